/* bench_moe.h -- `baton bench --fused gemm_alltoall`: the fused expert
 * GEMM + AllToAll (the mixture-of-experts combine, baton_gemm_alltoall)
 * against what a framework runs today -- cuBLAS's GEMM, then NCCL's
 * AllToAll of its output, on one stream -- with the parts alone and
 * baton's own GEMM unfused, per shape.  Options, the derived columns and
 * the outputs touch no CUDA (tests/test_bench_moe.c); the GPU driver is
 * tools/bench/bench_moe_run.c. */
#ifndef BENCH_MOE_H
#define BENCH_MOE_H

#include <stdint.h>
#include <stdio.h>

#include "bench_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MOE_MAX_DIMS 16
#define BENCH_MOE_TILE 64   /* H and F must be multiples of it (the GPU GEMM tile engine's) */

typedef struct bench_moe_opts {
  /* the common options (-g, --share, -w, -n, -G, -R, -c, --no-nccl, --csv,
   * --json); with --share: the GEMMs alone and baton only */
  bench_common_opts c;
  /* -T (tokens per rank), -H, -F: lists; every combination is a shape */
  int64_t T[BENCH_MOE_MAX_DIMS], H[BENCH_MOE_MAX_DIMS], F[BENCH_MOE_MAX_DIMS];
  int nT, nH, nF;
  int grid;             /* --grid: the MoE grid for the lists not given */
  /* --fill F, in (0, 1]; 0: none (every row of X a token).  With it,
   * every rank r passes baton's n-rank calls n counts, drawn from a fixed
   * seed per (rank, shape) uniformly in [F/2, 3F/2] * T/n and capped at
   * T/n: block q of X_r holds counts[q] tokens, the rest padding.
   * cuBLAS's GEMM, the AllToAll and baton's own GEMM (a one-rank
   * communicator: one block) multiply and move the padded X whole, as a
   * capacity-factor MoE does; only token rows are checked. */
  double fill;
} bench_moe_opts;

/* Parses `baton bench --fused gemm_alltoall [options]` (argv[0] is
 * "bench").  0; 1 when --help was asked (usage on out); 2 after "baton
 * bench: <what>" on err. */
int bench_moe_parse(bench_moe_opts *o, int argc, char **argv, FILE *out, FILE *err);

/* One shape's results; a time < 0 was not measured (error says why when
 * it failed).  wrong: elements off the exact product on the rows and
 * columns checked (with --fill token rows only), -1 when not checked;
 * without NCCL (--share,
 * --no-nccl, none found) wrong_base counts cuBLAS's GEMM alone's Y and
 * wrong_own baton's own GEMM alone's. */
typedef struct bench_moe_row {
  int64_t T, H, F;
  double tokens;        /* the share of X's rows that are tokens (1 without --fill), mean over ranks; < 0: unknown */
  double gemm_us, a2a_us, base_us, own_us, own_a2a_us, baton_us;
  int64_t wrong_base, wrong_own, wrong_baton, checked;   /* checked: elements, per output */
  char algorithm[96];
  char error[240];
} bench_moe_row;

typedef struct bench_moe_table {
  bench_run_info info;  /* the GEMM (info.cublas) and AllToAll (info.nccl: "" when none, no baseline, no
                           own+a2a) that ran */
  double fill;          /* --fill (0: none) */
  bench_moe_row *rows;
  int nrows;
} bench_moe_table;

/* Derived columns (-1 when an input is missing): the baseline's time
 * over baton's (> 1: baton faster); own+a2a's over baton's (what the
 * overlap buys over baton's own GEMM unfused); the overlap reached,
 * (baseline - baton) / min(gemm, alltoall): 1 when baton hides the
 * shorter part entirely; cuBLAS's GEMM time over baton's own GEMM's (one
 * rank's GEMM efficiency against cuBLAS); the rate of a rank's 2*T*H*F
 * operations in `us` microseconds, in TFLOP/s. */
double bench_moe_speedup(const bench_moe_row *r);
double bench_moe_vs_own_a2a(const bench_moe_row *r);
double bench_moe_overlap(const bench_moe_row *r);
double bench_moe_own_vs_cublas(const bench_moe_row *r);
double bench_moe_tflops(const bench_moe_row *r, double us);

void bench_moe_print_header(FILE *f, const bench_moe_table *t);
void bench_moe_print_row(FILE *f, const bench_moe_table *t, const bench_moe_row *r);
/* 1 when some shape failed or had wrong elements. */
int bench_moe_print_footer(FILE *f, const bench_moe_table *t);
int bench_moe_write_csv(const char *path, const bench_moe_table *t);
int bench_moe_write_json(const char *path, const bench_moe_table *t);

/* The GPU part (tools/bench/bench_moe_run.c, CUDA builds): fills t (t->rows to
 * be freed); the exit status (0 all right, 1 wrong or failed, 2 no GPU /
 * setup failed). */
int bench_moe_run(const bench_moe_opts *o, bench_moe_table *t);

#ifdef __cplusplus
}
#endif

#endif
