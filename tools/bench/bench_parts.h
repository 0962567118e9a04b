/* bench_parts.h -- the timing harness of `baton bench --fused` (every
 * fused mode's GPU driver: bench_fused_run.c, bench_embed_run.c,
 * bench_moe_run.c): a shape's parts -- the library calls alone, the
 * baseline, baton -- each launched on every rank's stream by the mode,
 * timed alike and interleaved, the median of the rounds per part.  CUDA
 * builds only (CUDA runtime API). */
#ifndef BENCH_PARTS_H
#define BENCH_PARTS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "bench_util.h"

#define BENCH_PARTS_MAX 8          /* parts of a shape */
#define BENCH_PARTS_MAXS 64        /* streams a part runs on */
#define BENCH_PARTS_MAX_ROUNDS 64

/* What a mode gives the harness.  The contract:
 *  - launch issues one call of part `what` (0 .. nparts-1) on every
 *    stream `streams` names for it, asynchronously: it never waits on the
 *    GPU, so that it can be captured into a graph (the streams capture in
 *    cudaStreamCaptureModeThreadLocal, this thread launching).  `it` is the
 *    call's index within a run of calls (warmup: 0 .. warmup-1; capture
 *    and plain timing: 0 .. iters-1), for a mode that cycles buffers.
 *    0, or -1 with what failed in err (len bytes).
 *  - wait waits for every stream of every part and reports the
 *    asynchronous errors of the libraries' communicators: 0, or -1 with
 *    err.
 *  - streams fills st[] and devs[] (the device each stream belongs to,
 *    at most BENCH_PARTS_MAXS) with the streams part `what` launches on,
 *    and returns their number: these are captured and get the graph
 *    launches.
 *  - sync (NULL in one process) waits until every rank's process calls
 *    it and returns the OR of their `dead` bits: the ranks capture and
 *    time each part from a common start and drop a part that failed on
 *    any of them. */
typedef struct bench_parts_ops {
  int (*launch)(void *ctx, int what, int it, char *err, size_t len);
  int (*wait)(void *ctx, char *err, size_t len);
  int (*streams)(void *ctx, int what, cudaStream_t *st, int *devs);
  unsigned (*sync)(void *ctx, unsigned dead);
} bench_parts_ops;

/* One shape's measurement.  dead: a bit per part that failed or cannot
 * run (set by the mode before bench_parts_measure for parts it did not
 * set up or whose checked run failed; the harness adds the parts that
 * fail while measured): such a part is not run again. */
typedef struct bench_parts {
  const bench_parts_ops *ops;
  void *ctx;
  int nparts;                      /* at most BENCH_PARTS_MAX */
  const char *const *names;        /* a name per part, for the errors */
  int warmup, iters, graph, rounds;   /* -w, -n, -G (0: plain launches), -R (at most BENCH_PARTS_MAX_ROUNDS) */
  unsigned dead;
} bench_parts;

/* Measures every part not dead (with ops->sync, dead on any rank, asked
 * before the captures and before each part is timed): with graph > 0,
 * first captures `iters`
 * calls of each part on each of its streams into a graph per stream
 * (every capture of a part ended before any of its graphs is
 * instantiated); then `rounds` rounds, each timing every part in turn
 * (bench_parts_time_one); us[what] gets the median round's time per call
 * in microseconds, -1 for a dead part; the graphs are destroyed.  A part
 * that fails is marked dead and the failure written to error (len bytes):
 * "<name>: <why>" or "<name> graph: <why>" (the last failure wins). */
void bench_parts_measure(bench_parts *p, double *us, char *error, size_t len);

/* bench_parts_measure of ops and ctx's nparts parts (names), with c's
 * -w, -n, -G and -R, the parts in dead not run: us[] and error as there.
 * The parts dead after it. */
unsigned bench_parts_measure_opts(const bench_parts_ops *ops, void *ctx, int nparts, const char *const *names,
                                  const bench_common_opts *c, unsigned dead, double *us, char *error, size_t len);

/* Seconds per call of part `what`: `warmup` launches, wait; then with
 * graph > 0 `graph` launches of each stream's graph ge[] (iters calls
 * each), else `iters` plain launches; wait; the elapsed host time over
 * the calls.  -1 with err on a failure. */
double bench_parts_time_one(const bench_parts *p, int what, const cudaGraphExec_t *ge, char *err, size_t len);

/* 1 when e is cudaSuccess; else 0 with "<what>: <CUDA's error string>"
 * in err. */
int bench_cuda_ok(cudaError_t e, const char *what, char *err, size_t len);

#endif
