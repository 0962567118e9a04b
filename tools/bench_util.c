/* bench_util.c -- helpers the cores of `baton bench --fused` share (the
 * operator --fused names, option values, printers); no CUDA here. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

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

int bench_parse_list(const char *s, const char *suffixes, int max, int64_t *list, int *n) {
  *n = 0;
  while (*s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 1 || v > (1LL << 31)) return -1;   /* before a shift: no overflow (strtoll saturates) */
    char u = (char)toupper((unsigned char)*end);
    if (u && strchr("KMG", u) && strchr(suffixes, u)) {
      v <<= u == 'K' ? 10 : u == 'M' ? 20 : 30;
      end++;
    }
    if (v < 1 || v > (1LL << 31) || *n == max || (*end && *end != ',')) return -1;
    list[(*n)++] = v;
    s = *end ? end + 1 : end;
    if (*end == ',' && !*s) return -1;
  }
  return *n ? 0 : -1;
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
