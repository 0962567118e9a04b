/* bench_util.c -- helpers the cores of `baton bench --fused` share (the
 * operator --fused names, the common options and the parse loop, option
 * values, printers); no CUDA here. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ip_dtype.h"

/* The operator named by the last --fused in argv, or NULL. */
static const char *fused_name(int argc, char **argv) {
  const char *op = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--fused=", 8)) op = argv[i] + 8;
    else if (!strcmp(argv[i], "--fused")) op = i + 1 < argc ? argv[++i] : "";
  }
  return op;
}

void bench_fused_refuse(FILE *err, const char *op) {
  fprintf(err, "baton bench: --fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused operator "
          "measured), not '%s'\n", op ? op : "");
}

int bench_fused_operator(int argc, char **argv, FILE *err) {
  const char *op = fused_name(argc, argv);
  if (op && !strcmp(op, "gemv_allreduce")) return BENCH_FUSED_GEMV_ALLREDUCE;
  if (op && !strcmp(op, "embedding_alltoall")) return BENCH_FUSED_EMBEDDING_ALLTOALL;
  if (op && !strcmp(op, "gemm_alltoall")) return BENCH_FUSED_GEMM_ALLTOALL;
  bench_fused_refuse(err, op);
  return 0;
}

int bench_parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int bench_parse_scaled(const char *s, const char *suffixes, int frac, int64_t *v, const char **end) {
  char *e;
  double d = 0;
  long long n = 0;
  if (frac) d = strtod(s, &e);
  else n = strtoll(s, &e, 10);   /* saturates: caught by the range check */
  if (e == s) return -1;
  int shift = 0;
  char u = (char)toupper((unsigned char)*e);
  if (u && strchr("KMG", u) && strchr(suffixes, u)) {
    shift = u == 'K' ? 10 : u == 'M' ? 20 : 30;
    e++;
  }
  const int64_t top = INT64_C(1) << 62;
  if (frac) {
    double x = ldexp(d, shift);
    if (!(x >= 0) || x > (double)top) return -1;   /* NaN fails */
    *v = (int64_t)x;
  } else {
    if (n < 0 || n > top >> shift) return -1;
    *v = (int64_t)n << shift;
  }
  *end = e;
  return 0;
}

int bench_parse_list(const char *s, const char *suffixes, int max, int64_t *list, int *n) {
  *n = 0;
  while (*s) {
    const char *end;
    int64_t v;
    if (bench_parse_scaled(s, suffixes, 0, &v, &end) || v < 1 || v > (INT64_C(1) << 31) || *n == max ||
        (*end && *end != ','))
      return -1;
    list[(*n)++] = v;
    s = *end ? end + 1 : end;
    if (*end == ',' && !*s) return -1;
  }
  return *n ? 0 : -1;
}

int bench_list_value(const char *name, const char *v, const char *suffixes, int max, int64_t *list, int *n,
                     FILE *err) {
  if (!bench_parse_list(v, suffixes, max, list, n)) return 1;
  int values = *v != 0;
  for (const char *c = v; *c; c++) values += *c == ',';
  if (values > max)
    fprintf(err, "baton bench: %s takes at most %d values, got %d in '%s'\n", name, max, values, v);
  else
    fprintf(err, "baton bench: bad value '%s' for %s: comma-separated sizes in 1..2147483648, each with an optional "
            "suffix, one of %s\n", v, name, suffixes);
  return -1;
}

int bench_opt_value(int argc, char **argv, int *i, char *name, size_t len, const char **v, FILE *err) {
  const char *a = argv[*i], *eq = strchr(a, '=');
  int longform = eq && a[0] == '-' && a[1] == '-';
  size_t nl = longform ? (size_t)(eq - a) : strlen(a);
  if (nl >= len) nl = len - 1;
  memcpy(name, a, nl);
  name[nl] = 0;
  if (longform) *v = eq + 1;
  else if (*i + 1 < argc) *v = argv[++*i];
  else {
    fprintf(err, "baton bench: %s needs a value\n", a);
    return -1;
  }
  return 0;
}

int bench_parse_float_dtype(const char *s, int *dtype) {
  const char *t = !strcmp(s, "bfloat16") ? "bf16" : !strcmp(s, "half") ? "f16" : !strcmp(s, "float") ? "f32" : s;
  int x = ip_dtype_from_name(t);
  if (x != IP_F32 && x != IP_F16 && x != IP_BF16) return -1;
  *dtype = x;
  return 0;
}

/* A common option that takes a value, name with value v, into c: 1 when
 * name is one (*bad nonzero when v is bad), else 0. */
static int common_value(bench_common_opts *c, const char *name, const char *v, int *bad) {
  if (!strcmp(name, "-g") || !strcmp(name, "--ngpus")) *bad = bench_parse_int(v, 1, 64, &c->ngpus);
  else if (!strcmp(name, "--share")) *bad = bench_parse_int(v, 1, 64, &c->share);
  else if (!strcmp(name, "-w") || !strcmp(name, "--warmup_iters")) *bad = bench_parse_int(v, 0, 100000, &c->warmup);
  else if (!strcmp(name, "-n") || !strcmp(name, "--iters")) *bad = bench_parse_int(v, 1, 100000, &c->iters);
  else if (!strcmp(name, "-G") || !strcmp(name, "--cudagraph")) *bad = bench_parse_int(v, 0, 100000, &c->graph);
  else if (!strcmp(name, "--rounds")) *bad = bench_parse_int(v, 1, 64, &c->rounds);
  else if (!strcmp(name, "-c") || !strcmp(name, "--check")) *bad = bench_parse_int(v, 0, 1, &c->check);
  else if (!strcmp(name, "--csv")) c->csv = v;
  else if (!strcmp(name, "--json")) c->json = v;
  else return 0;
  return 1;
}

int bench_parse_fused(bench_common_opts *c, void *o, const bench_mode_parse *m, int argc, char **argv, FILE *out,
                      FILE *err) {
  c->warmup = 5;
  c->iters = 20;
  c->rounds = 3;
  c->check = 1;
  const char *op = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(m->help, out); return 1; }
    if (!strcmp(a, "--no-nccl")) { c->no_nccl = 1; continue; }
    if (!strcmp(a, "-P") || !strcmp(a, "--procs")) { c->procs = 1; continue; }
    if (m->flag && m->flag(o, a)) continue;
    if (!strncmp(a, "--fused=", 8)) { op = a + 8; continue; }
    /* every other option takes a value */
    const char *v;
    char name[32];
    if (bench_opt_value(argc, argv, &i, name, sizeof name, &v, err)) return 2;
    int bad = 0, own = 0;
    if (!strcmp(name, "--fused")) op = v;
    else if (!common_value(c, name, v, &bad) && (own = m->value(o, name, v, &bad, err)) == 0) {
      fprintf(err, "baton bench: unknown option '%s' for %s (baton bench --fused %s --help lists them)\n", a,
              m->unknown, m->op);
      return 2;
    }
    if (own < 0) return 2;
    if (bad) { fprintf(err, "baton bench: bad value '%s' for %s\n", v, name); return 2; }
  }
  if (!op || strcmp(op, m->op)) {
    bench_fused_refuse(err, op);
    return 2;
  }
  if (c->share && (!c->ngpus || c->share > c->ngpus)) {
    fprintf(err, "baton bench: --share %d needs -g N with N >= %d\n", c->share, c->share);
    return 2;
  }
  if (c->procs && (!c->ngpus || c->share)) {
    fprintf(err, "baton bench: -P needs -g N (the number of ranks: the parent touches no GPU before it forks) and "
            "no --share\n");
    return 2;
  }
  return 0;
}

int bench_check_outputs(const bench_common_opts *c, FILE *err) {
  if ((c->csv && !*c->csv) || (c->json && !*c->json)) {
    fprintf(err, "baton bench: --csv and --json need a file name\n");
    return 2;
  }
  return 0;
}

void bench_num(FILE *f, const char *fmt, double v) {
  if (v < 0) fprintf(f, "%*s", atoi(fmt + 1), "-");
  else fprintf(f, fmt, v);
}

void bench_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

void bench_json_info(FILE *f, const bench_run_info *info, const char *compute_key, const char *coll_key) {
  fprintf(f, ", \"ranks\": %d, \"share\": %d, \"procs\": %d, \"iters\": %d, \"warmup\": %d, \"graph\": %d, "
          "\"rounds\": %d, \"device\": ", info->nranks, info->share, info->procs, info->iters, info->warmup, info->graph,
          info->rounds);
  bench_json_str(f, info->device);
  if (compute_key) {
    fprintf(f, ", \"%s\": ", compute_key);
    bench_json_str(f, info->cublas);
  }
  fprintf(f, ", \"%s\": ", coll_key);
  bench_json_str(f, info->nccl);
}

double bench_time_ratio(double a, double b) {
  return a > 0 && b > 0 ? a / b : -1;
}

double bench_time_overlap(double base, double baton, double x, double y) {
  if (base <= 0 || baton <= 0 || x <= 0 || y <= 0) return -1;
  return (base - baton) / (x < y ? x : y);
}

void bench_print_average(FILE *f, const char *what, int n, double sum) {
  if (n) fprintf(f, "# average %s over %d shapes: %.3f\n", what, n, sum / n);
}

int bench_print_verdict(FILE *f, int bad) {
  fprintf(f, "# %s\n", bad ? "FAILED: a shape failed or had wrong elements" : "all shapes checked and right");
  return bad;
}

void bench_json_row_end(FILE *f, const char *algorithm, const char *error) {
  fputs(", \"algorithm\": ", f);
  bench_json_str(f, algorithm);
  fputs(", \"error\": ", f);
  bench_json_str(f, error);
  fputc('}', f);
}

int bench_json_close(FILE *f) {
  fputs("\n]}\n", f);
  return fclose(f) ? -1 : 0;
}

uint64_t bench_xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

double bench_frand(uint64_t *s) { return (double)(bench_xorshift(s) >> 11) / 4503599627370496.0 - 1.0; }

void *bench_pattern(int dtype, size_t n) {
  void *p = malloc(n * (size_t)ip_dtype_size[dtype]);
  if (!p) return NULL;
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < n; i++) ip_set(dtype, p, i, bench_frand(&s));
  return p;
}
