/* bench_moe_core.c -- `baton bench --fused gemm_alltoall`: options,
 * derived columns and outputs (text, CSV, JSON); no CUDA here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_moe.h"

static const char moe_help[] =
  "usage: baton bench --fused gemm_alltoall [options]\n"
  "\n"
  "Measures the fused expert GEMM + AllToAll (the mixture-of-experts combine,\n"
  "one expert per rank) against what a framework runs today, on the same inputs:\n"
  "every rank holds T tokens, X [T, F] (block q of T/n rows: rank q's tokens),\n"
  "and its expert's W [F, H], computes Y = X W (bf16, f32 accumulation), and\n"
  "rank q gets block q of every rank's Y: out [T, H] holds in block p its\n"
  "tokens' outputs from expert p.  Per shape, interleaved, it times:\n"
  "  gemm       cuBLAS's GEMM alone, Y [T, H] = X W per rank\n"
  "  alltoall   NCCL's AllToAll of Y alone (T/n*H elements to each peer)\n"
  "  baseline   the GEMM, then the AllToAll, on one stream per rank\n"
  "  own gemm   baton's GEMM alone (baton_gemm_alltoall on a one-rank\n"
  "             communicator per rank: the GEMM opcode alone)\n"
  "  own+a2a    baton's own GEMM, then NCCL's AllToAll (baton unfused)\n"
  "  baton      baton_gemm_alltoall, one kernel per rank\n"
  "and checks the baseline's, own+a2a's and baton's outputs against the exact\n"
  "product (in double): on every rank, 64 columns (the first and last among\n"
  "them) of at least 32 rows spread over every block (each block's first and\n"
  "last among them), within one bf16 rounding plus the f32 accumulation's bound.\n"
  "\n"
  "options:\n"
  "  -g, --ngpus N         ranks, one GPU each (default: every GPU)\n"
  "  --share G             the ranks share G GPUs (rank r on GPU r % G): NCCL takes\n"
  "                        one rank per GPU, so only gemm, own gemm and baton run\n"
  "  -P, --procs           one forked process per rank (needs -g N), as torchrun runs\n"
  "                        them; each part is timed on every rank from a common start\n"
  "                        and the slowest rank's time is shown\n"
  "  -d, --datatype T      bf16 only (the default: the GEMM tile engine's type)\n"
  "  --tokens LIST         T: tokens per rank, multiples of the ranks (default 4096)\n"
  "  --out_cols LIST       H: the experts' output columns, multiples of 64\n"
  "                        (default 8192)\n"
  "  --in_cols LIST        F: the experts' input columns, multiples of 64\n"
  "                        (default 4096)\n"
  "  --grid                the MoE grid (tools/measure/torch_moe.py's): T 1024,2048,\n"
  "                        4096,8192, H 4096,8192, F 1024,2048,4096,14336, for\n"
  "                        each of --tokens, --out_cols, --in_cols not given\n"
  "  -w, -n, -G, -c, --rounds   warmup, iterations, CUDA graph launches, check,\n"
  "                        rounds: as for collectives (defaults 5, 20, 0, 1, 3)\n"
  "  --csv FILE, --json FILE   also write the table\n"
  "  --no-nccl             no NCCL: only gemm, own gemm and baton run\n"
  "  --fill F              an uneven combine, F in (0, 1]: every rank passes baton\n"
  "                        n token counts (baton_gemm_alltoall's counts), drawn\n"
  "                        per rank and shape uniformly in [F/2, 3F/2] * T/n,\n"
  "                        capped at T/n: block q of X holds counts[q] tokens, the\n"
  "                        rest padding, which baton skips; cuBLAS's GEMM, the\n"
  "                        AllToAll and the own GEMM (one block) multiply and move\n"
  "                        the padded X whole, as a capacity-factor MoE does; only\n"
  "                        token rows are checked (default: every row a token)\n"
  "\n"
  "LIST: comma-separated, K/M suffixes; every combination of the lists is a\n"
  "shape.  X and W are tiled from a fixed pattern of small bf16 values, shifted\n"
  "per rank.  BATON_ALGO_DIR must hold gemm programs (algorithms/moe_combine.lua)\n"
  "for 1 rank (baton's own GEMM) and for the ranks run (a communicator ignores\n"
  "programs for other rank counts).\n"
  "Columns: tokens = the share of X's rows that are tokens (1 without --fill);\n"
  "times in us; TFLOP/s = 2*T*H*F / time (a rank's GEMM); speedup =\n"
  "baseline / baton; vs own = own+a2a / baton; overlap = (baseline - baton) /\n"
  "min(gemm, alltoall), the share of the shorter part that baton hides (1: all\n"
  "of it); own/cuBLAS = gemm / own gemm; wrong = elements off the exact product\n"
  "(without NCCL, 'base' and 'own' are the GEMMs alone's).\n";

/* The MoE grid (tools/measure/torch_moe.py's TOKENS, HS, FS). */
static const int64_t grid_T[] = {1024, 2048, 4096, 8192}, grid_H[] = {4096, 8192},
                     grid_F[] = {1024, 2048, 4096, 14336};

static void set_list(int64_t *list, int *n, const int64_t *from, int count) {
  memcpy(list, from, (size_t)count * sizeof *from);
  *n = count;
}

/* A list's values that must be multiples of 64: 0, or 2 after the
 * refusal naming the first that is not. */
static int tile_multiples(const char *opt, const int64_t *list, int n, FILE *err) {
  for (int i = 0; i < n; i++)
    if (list[i] % BENCH_MOE_TILE) {
      fprintf(err, "baton bench: %s %lld is not a multiple of %d (the GPU GEMM tile engine takes only those)\n", opt,
              (long long)list[i], BENCH_MOE_TILE);
      return 2;
    }
  return 0;
}

/* --fill's value: 0, or -1 after the refusal on err. */
static int parse_fill(const char *v, double *fill, FILE *err) {
  char *end;
  double f = strtod(v, &end);
  if (end == v || *end || !isfinite(f)) {
    fprintf(err, "baton bench: --fill takes a number, the share of each block's rows that are tokens on average, "
            "in (0, 1], not '%s'\n", v);
    return -1;
  }
  if (!(f > 0 && f <= 1)) {
    fprintf(err, "baton bench: --fill %s is outside (0, 1] (the share of each block's rows that are tokens on "
            "average)\n", v);
    return -1;
  }
  *fill = f;
  return 0;
}

/* bench_moe_parse's own flag (--grid) and options (--tokens, --out_cols, --in_cols, -d, --fill), as
 * bench_mode_parse's flag and value.  The given_* note which lists were
 * given: --grid fills the others. */
typedef struct moe_parse_state {
  bench_moe_opts *o;
  int given_T, given_H, given_F;
} moe_parse_state;

static int moe_flag(void *p, const char *a) {
  moe_parse_state *s = p;
  if (strcmp(a, "--grid")) return 0;
  s->o->grid = 1;
  return 1;
}

static int moe_value(void *p, const char *name, const char *v, int *bad, FILE *err) {
  moe_parse_state *s = p;
  bench_moe_opts *o = s->o;
  if (!strcmp(name, "--tokens")) { s->given_T = 1; return bench_list_value(name, v, "KM", BENCH_MOE_MAX_DIMS, o->T, &o->nT, err); }
  else if (!strcmp(name, "--out_cols")) { s->given_H = 1; return bench_list_value(name, v, "KM", BENCH_MOE_MAX_DIMS, o->H, &o->nH, err); }
  else if (!strcmp(name, "--in_cols")) { s->given_F = 1; return bench_list_value(name, v, "KM", BENCH_MOE_MAX_DIMS, o->F, &o->nF, err); }
  else if (!strcmp(name, "-d") || !strcmp(name, "--datatype")) {
    if (strcmp(v, "bf16") && strcmp(v, "bfloat16")) {
      fprintf(err, "baton bench: --fused gemm_alltoall takes -d bf16 only (the GEMM tile engine's type), not "
              "'%s'\n", v);
      return -1;
    }
  } else if (!strcmp(name, "--fill")) {
    if (parse_fill(v, &o->fill, err)) return -1;
  } else return 0;
  return 1;
}

int bench_moe_parse(bench_moe_opts *o, int argc, char **argv, FILE *out, FILE *err) {
  memset(o, 0, sizeof *o);
  static const int64_t def_T[] = {4096}, def_H[] = {8192}, def_F[] = {4096};
  set_list(o->T, &o->nT, def_T, 1);
  set_list(o->H, &o->nH, def_H, 1);
  set_list(o->F, &o->nF, def_F, 1);
  static const bench_mode_parse mode = {"gemm_alltoall", moe_help, "--fused gemm_alltoall", moe_flag, moe_value};
  moe_parse_state s = {o, 0, 0, 0};
  int rc = bench_parse_fused(&o->c, &s, &mode, argc, argv, out, err);
  if (rc) return rc;
  if (o->grid) {
    if (!s.given_T) set_list(o->T, &o->nT, grid_T, 4);
    if (!s.given_H) set_list(o->H, &o->nH, grid_H, 2);
    if (!s.given_F) set_list(o->F, &o->nF, grid_F, 4);
  }
  for (int i = 0; o->c.ngpus && i < o->nT; i++)
    if (o->T[i] % o->c.ngpus) {
      fprintf(err, "baton bench: --tokens %lld is not a multiple of the %d ranks\n", (long long)o->T[i], o->c.ngpus);
      return 2;
    }
  if (tile_multiples("--out_cols", o->H, o->nH, err) || tile_multiples("--in_cols", o->F, o->nF, err)) return 2;
  return bench_check_outputs(&o->c, err);
}

double bench_moe_speedup(const bench_moe_row *r) {
  return bench_time_ratio(r->base_us, r->baton_us);
}

double bench_moe_vs_own_a2a(const bench_moe_row *r) {
  return bench_time_ratio(r->own_a2a_us, r->baton_us);
}

double bench_moe_overlap(const bench_moe_row *r) {
  return bench_time_overlap(r->base_us, r->baton_us, r->gemm_us, r->a2a_us);
}

double bench_moe_own_vs_cublas(const bench_moe_row *r) {
  return bench_time_ratio(r->gemm_us, r->own_us);
}

double bench_moe_tflops(const bench_moe_row *r, double us) {
  return us > 0 ? 2.0 * (double)r->T * (double)r->H * (double)r->F / (us * 1e6) : -1;
}

void bench_moe_print_header(FILE *f, const bench_moe_table *t) {
  fprintf(f, "# baton bench --fused gemm_alltoall: %d rank%s on %s, bf16, %d iterations after %d warmup%s, median "
          "of %d round%s\n", t->info.nranks, t->info.nranks == 1 ? "" : "s", t->info.share ? "shared GPUs" : t->info.procs ? "one GPU and process each" : "one GPU each",
          t->info.iters, t->info.warmup, t->info.graph ? ", in a CUDA graph" : "", t->info.rounds, t->info.rounds == 1 ? "" : "s");
  if (t->info.device[0]) fprintf(f, "# device: %s\n", t->info.device);
  if (t->info.cublas[0])
    fprintf(f, "# gemm: %s, Y [T, H] = X [T, F] W [F, H] per rank, f32 accumulation\n", t->info.cublas);
  else
    fprintf(f, "# gemm: NOT USED (no cuBLAS)\n");
  fprintf(f, "# own gemm: baton_gemm_alltoall on a one-rank communicator per rank (the GEMM opcode alone)%s\n",
          t->info.share ? ", one GPU's ranks in turn on one stream" : "");
  if (t->info.nccl[0]) {
    fprintf(f, "# alltoall: %s, of Y (T/n*H elements to each peer)\n", t->info.nccl);
    fprintf(f, "# baseline: gemm, then alltoall, on one stream per rank\n");
    fprintf(f, "# own+a2a: own gemm, then alltoall, on one stream per rank\n");
  } else if (t->info.share) {
    fprintf(f, "# alltoall, baseline, own+a2a: NOT MEASURED: the ranks share %d GPU%s, where NCCL cannot run (one "
            "rank per GPU); gemm, own gemm and baton only ('wrong base' and 'wrong own' are the GEMMs alone's)\n",
            t->info.share, t->info.share == 1 ? "" : "s");
  } else {
    fprintf(f, "# alltoall, baseline, own+a2a: NOT MEASURED (no NCCL): gemm, own gemm and baton only ('wrong base' "
            "and 'wrong own' are the GEMMs alone's)\n");
  }
  fprintf(f, "# baton: baton_gemm_alltoall on the %d-rank communicator\n", t->info.nranks);
  if (t->fill > 0)
    fprintf(f, "# uneven: --fill %g: block q of a rank's X holds counts[q] tokens, drawn per rank uniformly in "
            "[%g, %g] * T/n and capped at T/n, the rest padding; baton skips the padding, gemm, alltoall and own gemm "
            "take the padded X whole; only token rows checked\n", t->fill, t->fill / 2, t->fill * 1.5);
  fprintf(f, "# %5s %5s %5s %6s  %9s %7s  %9s  %9s  %9s %7s  %9s  %9s %7s  %7s %7s %7s %10s  %6s %6s %6s  %s\n",
          "T", "H", "F", "tokens", "gemm", "TFLOP/s", "alltoall", "baseline", "own gemm", "TFLOP/s", "own+a2a", "baton",
          "TFLOP/s", "speedup", "vs own", "overlap", "own/cuBLAS", "wrong", "wrong", "wrong", "baton algorithm");
  fprintf(f, "# %5s %5s %5s %6s  %9s %7s  %9s  %9s  %9s %7s  %9s  %9s %7s  %7s %7s %7s %10s  %6s %6s %6s\n", "", "",
          "", "", "(us)", "", "(us)", "(us)", "(us)", "", "(us)", "(us)", "", "base/b", "own+a/b", "", "gemm/own",
          "base", "own", "baton");
  fflush(f);
}

void bench_moe_print_row(FILE *f, const bench_moe_table *t, const bench_moe_row *r) {
  (void)t;
  if (r->error[0])
    fprintf(f, "# T=%lld H=%lld F=%lld: %s\n", (long long)r->T, (long long)r->H, (long long)r->F, r->error);
  fprintf(f, "  %5lld %5lld %5lld ", (long long)r->T, (long long)r->H, (long long)r->F);
  bench_num(f, "%6.3f", r->tokens);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->gemm_us);
  fputc(' ', f);
  bench_num(f, "%7.1f", bench_moe_tflops(r, r->gemm_us));
  fputs("  ", f);
  bench_num(f, "%9.2f", r->a2a_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->base_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->own_us);
  fputc(' ', f);
  bench_num(f, "%7.1f", bench_moe_tflops(r, r->own_us));
  fputs("  ", f);
  bench_num(f, "%9.2f", r->own_a2a_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->baton_us);
  fputc(' ', f);
  bench_num(f, "%7.1f", bench_moe_tflops(r, r->baton_us));
  fputs("  ", f);
  bench_num(f, "%7.2f", bench_moe_speedup(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_moe_vs_own_a2a(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_moe_overlap(r));
  fputc(' ', f);
  bench_num(f, "%10.3f", bench_moe_own_vs_cublas(r));
  fprintf(f, "  %6lld %6lld %6lld  %s\n", (long long)r->wrong_base, (long long)r->wrong_own, (long long)r->wrong_baton,
          r->algorithm[0] ? r->algorithm : "-");
  fflush(f);
}

int bench_moe_print_footer(FILE *f, const bench_moe_table *t) {
  int bad = 0, n = 0, nown = 0;
  double sum = 0, sum_own = 0;
  for (int i = 0; i < t->nrows; i++) {
    const bench_moe_row *r = &t->rows[i];
    bad |= r->error[0] || r->wrong_base > 0 || r->wrong_own > 0 || r->wrong_baton > 0 || r->baton_us < 0;
    double q = t->info.nccl[0] ? bench_moe_speedup(r) : bench_time_ratio(r->gemm_us, r->baton_us);
    if (q > 0) { sum += q; n++; }
    double e = bench_moe_own_vs_cublas(r);
    if (e > 0) { sum_own += e; nown++; }
  }
  bench_print_average(f, t->info.nccl[0] ? "baseline time / baton time" : "cuBLAS GEMM time / baton time", n, sum);
  bench_print_average(f, "cuBLAS GEMM time / own GEMM time", nown, sum_own);
  return bench_print_verdict(f, bad);
}

int bench_moe_write_csv(const char *path, const bench_moe_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "fused,dtype,ranks,share,fill,T,H,F,tokens,gemm_us,alltoall_us,baseline_us,own_gemm_us,own_a2a_us,"
          "baton_us,gemm_tflops,own_gemm_tflops,baton_tflops,speedup,vs_own_a2a,overlap,own_vs_cublas,wrong_baseline,"
          "wrong_own,wrong_baton,checked,algorithm\n");
  for (int i = 0; i < t->nrows; i++) {
    const bench_moe_row *r = &t->rows[i];
    fprintf(f, "gemm_alltoall,bf16,%d,%d,%g,%lld,%lld,%lld,%.4f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,%.4f,"
            "%.4f,%.4f,%.4f,%lld,%lld,%lld,%lld,%s\n", t->info.nranks, t->info.share, t->fill, (long long)r->T, (long long)r->H,
            (long long)r->F, r->tokens, r->gemm_us, r->a2a_us, r->base_us, r->own_us, r->own_a2a_us, r->baton_us,
            bench_moe_tflops(r, r->gemm_us), bench_moe_tflops(r, r->own_us), bench_moe_tflops(r, r->baton_us),
            bench_moe_speedup(r), bench_moe_vs_own_a2a(r), bench_moe_overlap(r), bench_moe_own_vs_cublas(r),
            (long long)r->wrong_base, (long long)r->wrong_own, (long long)r->wrong_baton, (long long)r->checked,
            r->algorithm[0] ? r->algorithm : "-");
  }
  return fclose(f) ? -1 : 0;
}

int bench_moe_write_json(const char *path, const bench_moe_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs("{\"fused\": \"gemm_alltoall\", \"dtype\": \"bf16\"", f);
  bench_json_info(f, &t->info, "gemm", "alltoall");
  if (t->fill > 0) fprintf(f, ", \"fill\": %g", t->fill);
  else fputs(", \"fill\": null", f);
  fputs(", \"rows\": [", f);
  for (int i = 0; i < t->nrows; i++) {
    const bench_moe_row *r = &t->rows[i];
    fprintf(f, "%s\n  {\"T\": %lld, \"H\": %lld, \"F\": %lld, \"tokens\": %.4f, \"gemm_us\": %.3f, "
            "\"alltoall_us\": %.3f, \"baseline_us\": %.3f, \"own_gemm_us\": %.3f, \"own_a2a_us\": %.3f, "
            "\"baton_us\": %.3f, \"gemm_tflops\": %.2f, \"own_gemm_tflops\": %.2f, \"baton_tflops\": %.2f, "
            "\"speedup\": %.4f, \"vs_own_a2a\": %.4f, \"overlap\": %.4f, \"own_vs_cublas\": %.4f, "
            "\"wrong_baseline\": %lld, \"wrong_own\": %lld, \"wrong_baton\": %lld, \"checked\": %lld",
            i ? "," : "", (long long)r->T, (long long)r->H, (long long)r->F, r->tokens, r->gemm_us, r->a2a_us,
            r->base_us, r->own_us, r->own_a2a_us, r->baton_us, bench_moe_tflops(r, r->gemm_us),
            bench_moe_tflops(r, r->own_us), bench_moe_tflops(r, r->baton_us), bench_moe_speedup(r),
            bench_moe_vs_own_a2a(r), bench_moe_overlap(r), bench_moe_own_vs_cublas(r), (long long)r->wrong_base,
            (long long)r->wrong_own, (long long)r->wrong_baton, (long long)r->checked);
    bench_json_row_end(f, r->algorithm, r->error);
  }
  return bench_json_close(f);
}
