/* bench_fused.h -- `baton bench --fused gemv_allreduce`: a fused operator
 * against its library baseline (cuBLAS GEMV, then NCCL AllReduce on the
 * same stream), with the parts alone, per shape.  Options, the derived
 * columns and the outputs touch no CUDA (tests/test_bench.c); the GPU
 * driver is tools/bench/bench_fused_run.c. */
#ifndef BENCH_FUSED_H
#define BENCH_FUSED_H

#include <stdint.h>
#include <stdio.h>

#include "bench_util.h"
#include "ip_dtype.h"

#define BENCH_FUSED_MAX_DIMS 16

typedef struct bench_fused_opts {
  /* the common options (-g, --share, -w, -n, -G, -R, -c, --no-nccl, --csv,
   * --json); with --share: baton and cuBLAS only */
  bench_common_opts c;
  ip_dtype dtype;       /* -d: f32, f16 or bf16 (default bf16) */
  int64_t M[BENCH_FUSED_MAX_DIMS], K[BENCH_FUSED_MAX_DIMS];   /* -M, -K: rows; each rank's columns */
  int nM, nK;
} bench_fused_opts;

/* Parses `baton bench --fused gemv_allreduce [options]` (argv[0] is
 * "bench").  0; 1 when --help was asked; 2 after "baton bench: <what>"
 * on err. */
int bench_fused_parse(bench_fused_opts *o, int argc, char **argv, FILE *out, FILE *err);

/* Whether argv asks for the fused mode (holds --fused). */
int bench_fused_asked(int argc, char **argv);

/* One shape's results; a time < 0 was not measured (error says why when
 * it failed).  wrong: elements off the exact result on the rows checked,
 * -1 when not checked. */
typedef struct bench_fused_row {
  int64_t M, K;
  double gemv_us, ar_us, base_us, baton_us;
  int64_t wrong_base, wrong_baton, checked;
  char algorithm[96];
  char error[240];
} bench_fused_row;

typedef struct bench_fused_table {
  ip_dtype dtype;
  bench_run_info info;  /* the GEMV (info.cublas) and AllReduce (info.nccl) that ran */
  bench_fused_row *rows;
  int nrows;
} bench_fused_table;

/* Derived columns: the baseline's time over baton's (> 1: baton faster),
 * the share of the ideal overlap reached ((baseline - baton) / min(GEMV,
 * AllReduce): 1 when baton hides the shorter part entirely), cuBLAS's
 * GEMV time over baton's (one rank: GEMV alone), and the bandwidth of
 * reading W once in `us` microseconds, in TB/s.  -1 when an input is
 * missing. */
double bench_fused_speedup(const bench_fused_row *r);
double bench_fused_overlap(const bench_fused_row *r);
double bench_fused_vs_cublas(const bench_fused_row *r);
double bench_fused_tbps(const bench_fused_row *r, ip_dtype t, double us);

void bench_fused_print_header(FILE *f, const bench_fused_table *t);
void bench_fused_print_row(FILE *f, const bench_fused_table *t, const bench_fused_row *r);
/* 1 when some shape failed or had wrong elements. */
int bench_fused_print_footer(FILE *f, const bench_fused_table *t);
int bench_fused_write_csv(const char *path, const bench_fused_table *t);
int bench_fused_write_json(const char *path, const bench_fused_table *t);

/* The GPU part (tools/bench/bench_fused_run.c, CUDA builds): fills t; the exit
 * status (0 all right, 1 wrong or failed, 2 no GPU / setup failed). */
int bench_fused_run(const bench_fused_opts *o, bench_fused_table *t);

#endif
