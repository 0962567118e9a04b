/* bench_embed_core.c -- `baton bench --fused embedding_alltoall`: options,
 * derived columns and outputs (text, CSV, JSON); no CUDA here. */
#include <stdlib.h>
#include <string.h>

#include "bench_embed.h"

static const char embed_help[] =
  "usage: baton bench --fused embedding_alltoall [options]\n"
  "\n"
  "Measures the fused embedding bags + AllToAll (model-parallel embedding\n"
  "tables) against what a framework runs today, on the same inputs: every rank\n"
  "pools its T tables of D columns for the global batch of B samples (bag s*T+t\n"
  "is table t of sample s) and rank q gets its B/n samples' pooled vectors as\n"
  "out [B/n, n*T*D].  Per shape, interleaved, it times:\n"
  "  pooling    the pooling alone, [B, T*D] per rank (baton on a one-rank\n"
  "             communicator per rank)\n"
  "  alltoall   NCCL's AllToAll of the pooled [B, T*D] alone (B/n*T*D elements\n"
  "             to each peer)\n"
  "  shuffle    the layout shuffle alone, [n][B/n][T*D] into [B/n][n*T*D]\n"
  "  baseline   the three in a row on one stream per rank\n"
  "  baton      baton_embedding_alltoall, one kernel per rank\n"
  "and checks the baseline's and baton's outputs against the exact pooling\n"
  "(ip_compute_exact, in double): every element of 64 sampled output rows per\n"
  "rank (all of them when B/n <= 64).\n"
  "\n"
  "options:\n"
  "  -g, --ngpus N         ranks, one GPU each (default: every GPU)\n"
  "  --share G             the ranks share G GPUs (rank r on GPU r % G): NCCL takes\n"
  "                        one rank per GPU, so only baton and the pooling alone run\n"
  "  -P, --procs           one forked process per rank (needs -g N), as torchrun runs\n"
  "                        them; each part is timed on every rank from a common start\n"
  "                        and the slowest rank's time is shown\n"
  "  -d, --datatype T      f32 (default), f16, bf16\n"
  "  --batch LIST          global batch sizes, multiples of the ranks (default 2048)\n"
  "  --tables LIST         tables per rank (default 16,64)\n"
  "  --dim LIST            embedding dimensions (default 64,128)\n"
  "  --bag LIST            mean bag sizes: each bag's size uniform in [0, 2*bag]\n"
  "                        (default 50)\n"
  "  --rows LIST           rows per table (default min(100000, what keeps the T\n"
  "                        tables of a rank within 2 GiB))\n"
  "  --skew LIST           indices: uniform (0, default) or zipf (1: Zipf-like, most\n"
  "                        among a table's first rows); e.g. --skew uniform,zipf\n"
  "  --mode sum|mean       pooling (default sum)\n"
  "  --weighted            a weight per index (with --mode sum)\n"
  "  -w, -n, -G, -c, --rounds   warmup, iterations, CUDA graph launches, check,\n"
  "                        rounds: as for collectives (defaults 5, 20, 0, 1, 3)\n"
  "  --csv FILE, --json FILE   also write the table (tools/measure/plot_embed.py plots the CSV)\n"
  "  --no-nccl             no NCCL: only baton and the pooling alone run\n"
  "\n"
  "LIST: comma-separated, K/M suffixes; every combination of the lists is a\n"
  "shape.  Bag sizes and indices come from a fixed seed.  BATON_ALGO_DIR must\n"
  "hold embedding programs for 1 rank (the pooling alone) and for the ranks run\n"
  "(a communicator ignores programs for other rank counts).\n"
  "Columns: times in us; TB/s = a rank's gathered rows (lookups * D * element\n"
  "size) / time; speedup = baseline / baton; overlap = (baseline - baton) /\n"
  "min(pooling, alltoall + shuffle), the share of the shorter part that baton\n"
  "hides (1: all of it); vs pool = pooling / baton; wrong = elements off the\n"
  "exact pooling (without a baseline: the pooling alone's).\n";

/* "uniform,zipf" (or 0,1) into list. */
static int parse_skew(const char *s, int *list, int *n) {
  *n = 0;
  while (*s) {
    size_t len = strcspn(s, ",");
    int v;
    if ((len == 7 && !strncmp(s, "uniform", 7)) || (len == 1 && *s == '0')) v = 0;
    else if ((len == 4 && !strncmp(s, "zipf", 4)) || (len == 1 && *s == '1')) v = 1;
    else return -1;
    if (*n == BENCH_EMBED_MAX_DIMS) return -1;
    list[(*n)++] = v;
    s += len;
    if (*s == ',' && !*++s) return -1;
  }
  return *n ? 0 : -1;
}

int64_t bench_embed_default_rows(int64_t T, int64_t D, int es) {
  double per_row = (double)T * (double)D * es, rows = per_row > 0 ? 2147483648.0 / per_row : 1;
  if (rows > 100000) rows = 100000;
  return rows < 1 ? 1 : (int64_t)rows;
}

/* bench_embed_parse's own flag (--weighted) and options (--batch, --tables, --dim,
 * --bag, --rows, --skew, --mode, -d) into o, as bench_mode_parse's. */
static int embed_flag(void *p, const char *a) {
  bench_embed_opts *o = p;
  if (strcmp(a, "--weighted")) return 0;
  o->weighted = 1;
  return 1;
}

static int embed_value(void *p, const char *name, const char *v, int *bad, FILE *err) {
  bench_embed_opts *o = p;
  if (!strcmp(name, "--batch")) return bench_list_value(name, v, "KM", BENCH_EMBED_MAX_DIMS, o->B, &o->nB, err);
  else if (!strcmp(name, "--tables")) return bench_list_value(name, v, "KM", BENCH_EMBED_MAX_DIMS, o->T, &o->nT, err);
  else if (!strcmp(name, "--dim")) return bench_list_value(name, v, "KM", BENCH_EMBED_MAX_DIMS, o->D, &o->nD, err);
  else if (!strcmp(name, "--bag")) return bench_list_value(name, v, "KM", BENCH_EMBED_MAX_DIMS, o->bag, &o->nbag, err);
  else if (!strcmp(name, "--rows")) return bench_list_value(name, v, "KM", BENCH_EMBED_MAX_DIMS, o->rows, &o->nrows, err);
  else if (!strcmp(name, "--skew")) *bad = parse_skew(v, o->skew, &o->nskew);
  else if (!strcmp(name, "--mode")) {
    *bad = strcmp(v, "sum") && strcmp(v, "mean");
    o->mean = !strcmp(v, "mean");
  } else if (!strcmp(name, "-d") || !strcmp(name, "--datatype")) {
    int x;
    *bad = bench_parse_float_dtype(v, &x);
    if (!*bad) o->dtype = (ip_dtype)x;
  } else return 0;
  return 1;
}

int bench_embed_parse(bench_embed_opts *o, int argc, char **argv, FILE *out, FILE *err) {
  memset(o, 0, sizeof *o);
  o->dtype = IP_F32;
  o->B[0] = 2048;
  o->nB = 1;
  o->T[0] = 16;
  o->T[1] = 64;
  o->nT = 2;
  o->D[0] = 64;
  o->D[1] = 128;
  o->nD = 2;
  o->bag[0] = 50;
  o->nbag = 1;
  o->nskew = 1;
  static const bench_mode_parse mode = {"embedding_alltoall", embed_help, "--fused embedding_alltoall", embed_flag,
                                        embed_value};
  int rc = bench_parse_fused(&o->c, o, &mode, argc, argv, out, err);
  if (rc) return rc;
  if (o->weighted && o->mean) {
    fprintf(err, "baton bench: --weighted pools by sum (as PyTorch's embedding_bag): not with --mode mean\n");
    return 2;
  }
  for (int i = 0; o->c.ngpus && i < o->nB; i++)
    if (o->B[i] % o->c.ngpus) {
      fprintf(err, "baton bench: --batch %lld is not a multiple of the %d ranks\n", (long long)o->B[i], o->c.ngpus);
      return 2;
    }
  return bench_check_outputs(&o->c, err);
}

double bench_embed_speedup(const bench_embed_row *r) {
  return bench_time_ratio(r->base_us, r->baton_us);
}

double bench_embed_overlap(const bench_embed_row *r) {
  if (r->base_us <= 0 || r->baton_us <= 0 || r->pool_us <= 0 || r->a2a_us <= 0 || r->shuf_us <= 0) return -1;
  double comm = r->a2a_us + r->shuf_us, shorter = r->pool_us < comm ? r->pool_us : comm;
  return (r->base_us - r->baton_us) / shorter;
}

double bench_embed_vs_pool(const bench_embed_row *r) {
  return bench_time_ratio(r->pool_us, r->baton_us);
}

double bench_embed_tbps(const bench_embed_row *r, ip_dtype t, double us) {
  return us > 0 ? (double)r->lookups * (double)r->D * ip_dtype_size[t] / (us * 1e6) : -1;
}

static const char *mode_name(const bench_embed_table *t) {
  return t->mean ? "mean" : t->weighted ? "weighted sum" : "sum";
}

void bench_embed_print_header(FILE *f, const bench_embed_table *t) {
  fprintf(f, "# baton bench --fused embedding_alltoall: %d rank%s on %s, %s, %s, %d iterations after %d warmup%s, "
          "median of %d round%s\n", t->info.nranks, t->info.nranks == 1 ? "" : "s",
          t->info.share ? "shared GPUs" : t->info.procs ? "one GPU and process each" : "one GPU each",
          ip_dtype_name[t->dtype], mode_name(t), t->info.iters, t->info.warmup,
          t->info.graph ? ", in a CUDA graph" : "", t->info.rounds, t->info.rounds == 1 ? "" : "s");
  if (t->info.device[0]) fprintf(f, "# device: %s\n", t->info.device);
  fprintf(f, "# pooling alone: baton_embedding_alltoall on a one-rank communicator per rank, out [B, T*D]\n");
  if (t->info.nccl[0]) {
    fprintf(f, "# alltoall: %s, of the pooled [B, T*D]\n", t->info.nccl);
    fprintf(f, "# shuffle: [n][B/n][T*D] into [B/n][n*T*D] (tools/bench/bench_shuffle.cu)\n");
    fprintf(f, "# baseline: pooling, then alltoall, then shuffle, on one stream per rank\n");
  } else if (t->info.share) {
    fprintf(f, "# alltoall, shuffle, baseline: NOT MEASURED: the ranks share %d GPU%s, where NCCL cannot run (one rank "
            "per GPU); baton and the pooling alone only ('wrong base' is the pooling alone's)\n", t->info.share,
            t->info.share == 1 ? "" : "s");
  } else {
    fprintf(f, "# alltoall, shuffle, baseline: NOT MEASURED (no NCCL): baton and the pooling alone only ('wrong "
            "base' is the pooling alone's)\n");
  }
  fprintf(f, "# %5s %4s %4s %4s %7s %4s %9s  %9s %6s  %9s %9s  %9s  %9s %6s  %7s %7s %7s  %6s %6s  %s\n", "B", "T",
          "D", "bag", "rows", "idx", "lookups", "pooling", "TB/s", "alltoall", "shuffle", "baseline", "baton", "TB/s",
          "speedup", "overlap", "vs pool", "wrong", "wrong", "baton algorithm");
  fprintf(f, "# %5s %4s %4s %4s %7s %4s %9s  %9s %6s  %9s %9s  %9s  %9s %6s  %7s %7s %7s  %6s %6s\n", "", "", "", "",
          "", "", "/rank", "(us)", "", "(us)", "(us)", "(us)", "(us)", "", "base/b", "", "pool/b", "base", "baton");
  fflush(f);
}

void bench_embed_print_row(FILE *f, const bench_embed_table *t, const bench_embed_row *r) {
  if (r->error[0])
    fprintf(f, "# B=%lld T=%lld D=%lld bag=%lld rows=%lld %s: %s\n", (long long)r->B, (long long)r->T,
            (long long)r->D, (long long)r->bag, (long long)r->rows, r->skew ? "zipf" : "uniform", r->error);
  fprintf(f, "  %5lld %4lld %4lld %4lld %7lld %4s %9lld  ", (long long)r->B, (long long)r->T, (long long)r->D,
          (long long)r->bag, (long long)r->rows, r->skew ? "zipf" : "unif", (long long)r->lookups);
  bench_num(f, "%9.2f", r->pool_us);
  fputc(' ', f);
  bench_num(f, "%6.2f", bench_embed_tbps(r, t->dtype, r->pool_us));
  fputs("  ", f);
  bench_num(f, "%9.2f", r->a2a_us);
  fputc(' ', f);
  bench_num(f, "%9.2f", r->shuf_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->base_us);
  fputs("  ", f);
  bench_num(f, "%9.2f", r->baton_us);
  fputc(' ', f);
  bench_num(f, "%6.2f", bench_embed_tbps(r, t->dtype, r->baton_us));
  fputs("  ", f);
  bench_num(f, "%7.2f", bench_embed_speedup(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_embed_overlap(r));
  fputc(' ', f);
  bench_num(f, "%7.2f", bench_embed_vs_pool(r));
  fprintf(f, "  %6lld %6lld  %s\n", (long long)r->wrong_base, (long long)r->wrong_baton,
          r->algorithm[0] ? r->algorithm : "-");
  fflush(f);
}

int bench_embed_print_footer(FILE *f, const bench_embed_table *t) {
  int bad = 0, n = 0;
  double sum = 0;
  for (int i = 0; i < t->nrows; i++) {
    const bench_embed_row *r = &t->rows[i];
    bad |= r->error[0] || r->wrong_base > 0 || r->wrong_baton > 0 || r->baton_us < 0;
    double q = t->info.nccl[0] ? bench_embed_speedup(r) : bench_embed_vs_pool(r);
    if (q > 0) { sum += q; n++; }
  }
  bench_print_average(f, t->info.nccl[0] ? "baseline time / baton time" : "pooling-alone time / baton time", n, sum);
  return bench_print_verdict(f, bad);
}

int bench_embed_write_csv(const char *path, const bench_embed_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "fused,dtype,mode,weighted,ranks,share,B,T,D,bag,rows,indices,lookups,pool_us,alltoall_us,shuffle_us,"
          "baseline_us,baton_us,pool_tbps,baton_tbps,speedup,overlap,vs_pool,wrong_baseline,wrong_baton,checked,"
          "algorithm\n");
  for (int i = 0; i < t->nrows; i++) {
    const bench_embed_row *r = &t->rows[i];
    fprintf(f, "embedding_alltoall,%s,%s,%d,%d,%d,%lld,%lld,%lld,%lld,%lld,%s,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,"
            "%.4f,%.4f,%.4f,%lld,%lld,%lld,%s\n", ip_dtype_name[t->dtype], t->mean ? "mean" : "sum", t->weighted,
            t->info.nranks, t->info.share, (long long)r->B, (long long)r->T, (long long)r->D, (long long)r->bag,
            (long long)r->rows, r->skew ? "zipf" : "uniform", (long long)r->lookups, r->pool_us, r->a2a_us, r->shuf_us,
            r->base_us, r->baton_us, bench_embed_tbps(r, t->dtype, r->pool_us),
            bench_embed_tbps(r, t->dtype, r->baton_us), bench_embed_speedup(r), bench_embed_overlap(r),
            bench_embed_vs_pool(r), (long long)r->wrong_base, (long long)r->wrong_baton, (long long)r->checked,
            r->algorithm[0] ? r->algorithm : "-");
  }
  return fclose(f) ? -1 : 0;
}

int bench_embed_write_json(const char *path, const bench_embed_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\"fused\": \"embedding_alltoall\", \"dtype\": \"%s\", \"mode\": \"%s\", \"weighted\": %d",
          ip_dtype_name[t->dtype], t->mean ? "mean" : "sum", t->weighted);
  bench_json_info(f, &t->info, NULL, "alltoall");
  fputs(", \"rows\": [", f);
  for (int i = 0; i < t->nrows; i++) {
    const bench_embed_row *r = &t->rows[i];
    fprintf(f, "%s\n  {\"B\": %lld, \"T\": %lld, \"D\": %lld, \"bag\": %lld, \"rows\": %lld, \"indices\": \"%s\", "
            "\"lookups\": %lld, \"pool_us\": %.3f, \"alltoall_us\": %.3f, \"shuffle_us\": %.3f, \"baseline_us\": %.3f, "
            "\"baton_us\": %.3f, \"pool_tbps\": %.4f, \"baton_tbps\": %.4f, \"speedup\": %.4f, \"overlap\": %.4f, "
            "\"vs_pool\": %.4f, \"wrong_baseline\": %lld, \"wrong_baton\": %lld, \"checked\": %lld",
            i ? "," : "", (long long)r->B, (long long)r->T, (long long)r->D, (long long)r->bag, (long long)r->rows,
            r->skew ? "zipf" : "uniform", (long long)r->lookups, r->pool_us, r->a2a_us, r->shuf_us, r->base_us,
            r->baton_us, bench_embed_tbps(r, t->dtype, r->pool_us), bench_embed_tbps(r, t->dtype, r->baton_us),
            bench_embed_speedup(r), bench_embed_overlap(r), bench_embed_vs_pool(r), (long long)r->wrong_base,
            (long long)r->wrong_baton, (long long)r->checked);
    bench_json_row_end(f, r->algorithm, r->error);
  }
  return bench_json_close(f);
}
