/* bench_fused_core.c -- `baton bench --fused`: options, derived columns
 * and outputs (text, CSV, JSON); no CUDA here. */
#include <stdlib.h>
#include <string.h>

#include "bench_fused.h"
#include "bench_util.h"

static const char fused_help[] =
  "usage: baton bench --fused gemv_allreduce [options]\n"
  "\n"
  "Measures a fused operator against its library baseline on the same inputs:\n"
  "y = sum over ranks of W_r x_r (the tensor-parallel row split of a linear\n"
  "layer), rank r holding W_r [M, K] and x_r [K].  Per shape it times cuBLAS's\n"
  "GEMV alone, NCCL's AllReduce of y alone, the baseline (the GEMV, then the\n"
  "AllReduce, on the same stream) and baton_gemv_allreduce, interleaved, and\n"
  "checks both results on sampled rows against the exact sum (in double).\n"
  "With one rank the fused program is the GEMV alone: baton's against cuBLAS's.\n"
  "\n"
  "options:\n"
  "  -g, --ngpus N         ranks, one GPU each (default: every GPU)\n"
  "  --share G             the ranks share G GPUs (rank r on GPU r % G): NCCL takes\n"
  "                        one rank per GPU, so the baseline is cuBLAS alone\n"  "  -P, --procs           one forked process per rank (needs -g N), as torchrun runs\n"
  "                        them; each part is timed on every rank from a common start\n"
  "                        and the slowest rank's time is shown\n"
  "  -d, --datatype T      bf16 (default), f16, f32\n"
  "  --rows LIST           M: rows of W and elements of y, comma-separated, K/M/G\n"
  "                        suffixes (default 8192,16384,32768,65536)\n"
  "  --cols LIST           K: each rank's columns of W (K / tensor-parallel ranks)\n"
  "                        (default 2048,4096,7168)\n"
  "  -w, -n, -G, -c, --rounds   warmup, iterations, CUDA graph launches, check,\n"
  "                        rounds: as for collectives (defaults 5, 20, 0, 1, 3)\n"
  "  --csv FILE, --json FILE   also write the table (tools/measure/plot_fused.py plots it)\n"
  "  --no-nccl             no NCCL: the baseline is cuBLAS alone\n"
  "\n"
  "Every call reads another copy of W (copies cycle, at least 4x the GPU's L2\n"
  "in all where memory allows), so that no time is measured from cache.\n"
  "Columns: times in us; TB/s = bytes of W / time; speedup = baseline / baton;\n"
  "overlap = (baseline - baton) / min(GEMV, AllReduce), the share of the shorter\n"
  "part that baton hides (1: all of it).\n";

int bench_fused_asked(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--fused") || !strncmp(argv[i], "--fused=", 8)) return 1;
  return 0;
}

/* bench_fused_parse's own options (--rows, --cols, -d) into o, as
 * bench_mode_parse's value. */
static int fused_value(void *p, const char *name, const char *v, int *bad, FILE *err) {
  bench_fused_opts *o = p;
  if (!strcmp(name, "--rows")) return bench_list_value(name, v, "KMG", BENCH_FUSED_MAX_DIMS, o->M, &o->nM, err);
  else if (!strcmp(name, "--cols")) return bench_list_value(name, v, "KMG", BENCH_FUSED_MAX_DIMS, o->K, &o->nK, err);
  else if (!strcmp(name, "-d") || !strcmp(name, "--datatype")) {
    int x;
    *bad = bench_parse_float_dtype(v, &x);
    if (!*bad) o->dtype = (ip_dtype)x;
  } else return 0;
  return 1;
}

int bench_fused_parse(bench_fused_opts *o, int argc, char **argv, FILE *out, FILE *err) {
  memset(o, 0, sizeof *o);
  o->dtype = IP_BF16;
  static const int64_t Ms[] = {8192, 16384, 32768, 65536}, Ks[] = {2048, 4096, 7168};
  memcpy(o->M, Ms, sizeof Ms);
  memcpy(o->K, Ks, sizeof Ks);
  o->nM = 4;
  o->nK = 3;
  static const bench_mode_parse mode = {"gemv_allreduce", fused_help, "--fused", NULL, fused_value};
  int rc = bench_parse_fused(&o->c, o, &mode, argc, argv, out, err);
  if (rc) return rc;
  return bench_check_outputs(&o->c, err);
}

double bench_fused_speedup(const bench_fused_row *r) {
  return bench_time_ratio(r->base_us, r->baton_us);
}

double bench_fused_overlap(const bench_fused_row *r) {
  return bench_time_overlap(r->base_us, r->baton_us, r->gemv_us, r->ar_us);
}

double bench_fused_vs_cublas(const bench_fused_row *r) {
  return bench_time_ratio(r->gemv_us, r->baton_us);
}

double bench_fused_tbps(const bench_fused_row *r, ip_dtype t, double us) {
  return us > 0 ? (double)r->M * (double)r->K * ip_dtype_size[t] / (us * 1e6) : -1;
}

void bench_fused_print_header(FILE *f, const bench_fused_table *t) {
  fprintf(f, "# baton bench --fused gemv_allreduce: %d rank%s on %s, %s, %d iterations after %d warmup%s, median of "
          "%d round%s\n", t->info.nranks, t->info.nranks == 1 ? "" : "s",
          t->info.share ? "shared GPUs" : t->info.procs ? "one GPU and process each" : "one GPU each",
          ip_dtype_name[t->dtype], t->info.iters, t->info.warmup,
          t->info.graph ? ", in a CUDA graph" : "", t->info.rounds, t->info.rounds == 1 ? "" : "s");
  if (t->info.device[0]) fprintf(f, "# device: %s\n", t->info.device);
  fprintf(f, "# gemv: %s\n", t->info.cublas[0] ? t->info.cublas : "NOT USED");
  fprintf(f, "# allreduce: %s\n", t->info.nccl[0] ? t->info.nccl : "NOT USED (baseline = the GEMV alone)");
  fprintf(f, "# %7s %6s  %9s %6s  %9s  %9s  %9s %6s  %7s %7s %7s  %6s %6s  %s\n", "M", "K", "gemv", "TB/s", "allreduce",
          "baseline", "baton", "TB/s", "speedup", "overlap", "vs gemv", "wrong", "wrong", "baton algorithm");
  fprintf(f, "# %7s %6s  %9s %6s  %9s  %9s  %9s %6s  %7s %7s %7s  %6s %6s\n", "", "", "(us)", "", "(us)", "(us)", "(us)",
          "", "base/b", "", "cublas/b", "base", "baton");
  fflush(f);
}

void bench_fused_print_row(FILE *f, const bench_fused_table *t, const bench_fused_row *r) {
  if (r->error[0]) fprintf(f, "# M=%lld K=%lld: %s\n", (long long)r->M, (long long)r->K, r->error);
  fprintf(f, "  %7lld %6lld  ", (long long)r->M, (long long)r->K);
  bench_num(f, "%9.2f", r->gemv_us);
  fputc(' ', f);
  bench_num(f, "%6.2f", bench_fused_tbps(r, t->dtype, r->gemv_us));
  fputs("  ", f);
  bench_num(f, "%9.2f", r->ar_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->base_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->baton_us);
  fputc(' ', f);
  bench_num(f, "%6.2f", bench_fused_tbps(r, t->dtype, r->baton_us));
  fputs("  ", f);
  bench_num(f, "%7.2f", bench_fused_speedup(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_fused_overlap(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_fused_vs_cublas(r));
  fprintf(f, "  %6lld %6lld  %s\n", (long long)r->wrong_base, (long long)r->wrong_baton,
          r->algorithm[0] ? r->algorithm : "-");
  fflush(f);
}

int bench_fused_print_footer(FILE *f, const bench_fused_table *t) {
  int bad = 0, n = 0;
  double sum = 0;
  for (int i = 0; i < t->nrows; i++) {
    const bench_fused_row *r = &t->rows[i];
    bad |= r->error[0] || r->wrong_base > 0 || r->wrong_baton > 0 || r->baton_us < 0;
    double q = t->info.nranks == 1 ? bench_fused_vs_cublas(r) : bench_fused_speedup(r);
    if (q > 0) { sum += q; n++; }
  }
  bench_print_average(f, t->info.nranks == 1 ? "cuBLAS time / baton time" : "baseline time / baton time", n, sum);
  return bench_print_verdict(f, bad);
}

int bench_fused_write_csv(const char *path, const bench_fused_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "fused,dtype,ranks,share,M,K,gemv_us,allreduce_us,baseline_us,baton_us,gemv_tbps,baton_tbps,speedup,"
          "overlap,vs_cublas,wrong_baseline,wrong_baton,checked,algorithm\n");
  for (int i = 0; i < t->nrows; i++) {
    const bench_fused_row *r = &t->rows[i];
    fprintf(f, "gemv_allreduce,%s,%d,%d,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%lld,%lld,%lld,%s\n",
            ip_dtype_name[t->dtype], t->info.nranks, t->info.share, (long long)r->M, (long long)r->K, r->gemv_us, r->ar_us,
            r->base_us, r->baton_us, bench_fused_tbps(r, t->dtype, r->gemv_us), bench_fused_tbps(r, t->dtype, r->baton_us),
            bench_fused_speedup(r), bench_fused_overlap(r), bench_fused_vs_cublas(r), (long long)r->wrong_base,
            (long long)r->wrong_baton, (long long)r->checked, r->algorithm[0] ? r->algorithm : "-");
  }
  return fclose(f) ? -1 : 0;
}

int bench_fused_write_json(const char *path, const bench_fused_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"fused\": \"gemv_allreduce\", \"dtype\": \"%s\"", ip_dtype_name[t->dtype]);
  bench_json_info(f, &t->info, "gemv", "allreduce");
  fputs(", \"rows\": [", f);
  for (int i = 0; i < t->nrows; i++) {
    const bench_fused_row *r = &t->rows[i];
    fprintf(f, "%s\n  {\"M\": %lld, \"K\": %lld, \"gemv_us\": %.3f, \"allreduce_us\": %.3f, \"baseline_us\": %.3f, "
            "\"baton_us\": %.3f, \"speedup\": %.4f, \"overlap\": %.4f, \"vs_cublas\": %.4f, \"wrong_baseline\": %lld, "
            "\"wrong_baton\": %lld, \"checked\": %lld", i ? "," : "", (long long)r->M, (long long)r->K,
            r->gemv_us, r->ar_us, r->base_us, r->baton_us, bench_fused_speedup(r), bench_fused_overlap(r),
            bench_fused_vs_cublas(r), (long long)r->wrong_base, (long long)r->wrong_baton, (long long)r->checked);
    bench_json_row_end(f, r->algorithm, r->error);
  }
  return bench_json_close(f);
}
