/* bench_embed.h -- `baton bench --fused embedding_alltoall`: the fused
 * embedding bags + AllToAll (baton_embedding_alltoall) against what a
 * framework runs today -- the pooling, then NCCL's AllToAll of the pooled
 * [B, T*D], then a layout shuffle into [B/n, n*T*D], on one stream -- with
 * the parts alone, per shape.  Options, the derived columns and the
 * outputs touch no CUDA (tests/test_bench_embed.c); the GPU driver is
 * tools/bench/bench_embed_run.c, the shuffle kernel tools/bench/bench_shuffle.cu. */
#ifndef BENCH_EMBED_H
#define BENCH_EMBED_H

#include <stdint.h>
#include <stdio.h>

#include "bench_util.h"   /* the operators --fused names: bench_fused_operator */
#include "ip_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_EMBED_MAX_DIMS 16

typedef struct bench_embed_opts {
  /* the common options (-g, --share, -w, -n, -G, -R, -c, --no-nccl, --csv,
   * --json); with --share: baton and the pooling alone only */
  bench_common_opts c;
  ip_dtype dtype;       /* -d: f32 (default), f16 or bf16 */
  int mean;             /* --mode mean (default sum) */
  int weighted;         /* --weighted: a weight per index (sum only) */
  /* -B, -T, -D, --bag, --rows, --skew: lists; every combination is a shape */
  int64_t B[BENCH_EMBED_MAX_DIMS], T[BENCH_EMBED_MAX_DIMS], D[BENCH_EMBED_MAX_DIMS], bag[BENCH_EMBED_MAX_DIMS];
  int64_t rows[BENCH_EMBED_MAX_DIMS];   /* rows per table; nrows 0: the default (bench_embed_default_rows) */
  int skew[BENCH_EMBED_MAX_DIMS];       /* 0 uniform indices, 1 Zipf-like (most among a table's first rows) */
  int nB, nT, nD, nbag, nrows, nskew;
} bench_embed_opts;

/* Parses `baton bench --fused embedding_alltoall [options]`.  0; 1 when
 * --help was asked (usage on out); 2 after "baton bench: <what>" on err. */
int bench_embed_parse(bench_embed_opts *o, int argc, char **argv, FILE *out, FILE *err);

/* Rows per table when --rows is not given: min(100000, what keeps the T
 * tables of D columns of es-byte elements within 2 GiB), at least 1. */
int64_t bench_embed_default_rows(int64_t T, int64_t D, int es);

/* One shape's results; a time < 0 was not measured (error says why when
 * it failed).  wrong: elements off the exact pooling on the rows
 * checked, -1 when not checked; without a baseline (--share, --no-nccl,
 * no NCCL) wrong_base counts the pooling alone's output. */
typedef struct bench_embed_row {
  int64_t B, T, D, bag, rows;
  int skew;
  int64_t lookups;      /* indices a rank gathers, the mean over ranks */
  double pool_us, a2a_us, shuf_us, base_us, baton_us;
  int64_t wrong_base, wrong_baton, checked;
  char algorithm[96];
  char error[240];
} bench_embed_row;

typedef struct bench_embed_table {
  ip_dtype dtype;
  bench_run_info info;  /* info.nccl: the AllToAll that ran ("" when none: no baseline) */
  int mean, weighted;
  bench_embed_row *rows;
  int nrows;
} bench_embed_table;

/* Derived columns (-1 when an input is missing): the baseline's time over
 * baton's (> 1: baton faster); the overlap reached, (baseline - baton) /
 * min(pooling, AllToAll + shuffle): 1 when baton hides the shorter part
 * entirely; the pooling alone's time over baton's; the gathered-row rate
 * of a rank in `us` microseconds, lookups * D * element size, in TB/s. */
double bench_embed_speedup(const bench_embed_row *r);
double bench_embed_overlap(const bench_embed_row *r);
double bench_embed_vs_pool(const bench_embed_row *r);
double bench_embed_tbps(const bench_embed_row *r, ip_dtype t, double us);

void bench_embed_print_header(FILE *f, const bench_embed_table *t);
void bench_embed_print_row(FILE *f, const bench_embed_table *t, const bench_embed_row *r);
/* 1 when some shape failed or had wrong elements. */
int bench_embed_print_footer(FILE *f, const bench_embed_table *t);
int bench_embed_write_csv(const char *path, const bench_embed_table *t);
int bench_embed_write_json(const char *path, const bench_embed_table *t);

/* The GPU part (tools/bench/bench_embed_run.c, CUDA builds): fills t (t->rows
 * to be freed); the exit status (0 all right, 1 wrong or failed, 2 no GPU
 * / setup failed). */
int bench_embed_run(const bench_embed_opts *o, bench_embed_table *t);

/* The layout shuffle (tools/bench/bench_shuffle.cu): in holds nranks blocks of
 * per_rank rows of row_bytes bytes ([n][B/n][T*D], what the AllToAll
 * received); out gets them as [B/n][n][T*D] (row s holds row s of every
 * block, in block order).  Launched on stream (a cudaStream_t); 0, or the
 * cudaError_t of the launch. */
int bench_embed_shuffle(const void *in, void *out, int nranks, int64_t per_rank, int64_t row_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif
