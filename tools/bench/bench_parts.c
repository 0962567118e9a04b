/* bench_parts.c -- the timing harness of `baton bench --fused`: graph
 * capture of a part's calls, time per call, interleaved rounds and their
 * median (bench_parts.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_parts.h"
#include "rt_time.h"

int bench_cuda_ok(cudaError_t e, const char *what, char *err, size_t len) {
  if (e == cudaSuccess) return 1;
  snprintf(err, len, "%s: %s", what, cudaGetErrorString(e));
  return 0;
}

/* The streams of part `what`, at most BENCH_PARTS_MAXS. */
static int streams_of(const bench_parts *p, int what, cudaStream_t *st, int *devs) {
  int ns = p->ops->streams(p->ctx, what, st, devs);
  return ns < 0 ? 0 : ns > BENCH_PARTS_MAXS ? BENCH_PARTS_MAXS : ns;
}

/* `iters` calls of `what` captured on every stream it uses, a graph each
 * (ge[i] for stream i).  0, or -1 with err (ge[] left empty). */
static int capture(const bench_parts *p, int what, cudaGraphExec_t *ge, char *err, size_t len) {
  cudaStream_t st[BENCH_PARTS_MAXS];
  int devs[BENCH_PARTS_MAXS], rc = 0, ns = streams_of(p, what, st, devs), begun = 0;
  for (int r = 0; r < ns && !rc; r++, begun++) {
    cudaSetDevice(devs[r]);
    if (!bench_cuda_ok(cudaStreamBeginCapture(st[r], cudaStreamCaptureModeThreadLocal), "capture", err, len)) rc = -1;
  }
  if (rc) begun--;   /* the stream that failed to begin is not capturing */
  for (int it = 0; it < p->iters && !rc; it++) rc = p->ops->launch(p->ctx, what, it, err, len);
  /* Every capture ends before any graph is instantiated: instantiating is
   * not permitted while this thread still captures another stream. */
  cudaGraph_t g[BENCH_PARTS_MAXS] = {0};
  for (int r = 0; r < begun; r++) {
    cudaSetDevice(devs[r]);
    cudaError_t e = cudaStreamEndCapture(st[r], &g[r]);
    if (!rc && !bench_cuda_ok(e, "end capture", err, len)) rc = -1;
  }
  for (int r = 0; r < begun; r++) {
    cudaSetDevice(devs[r]);
    if (!rc && !bench_cuda_ok(cudaGraphInstantiate(&ge[r], g[r], 0), "graph instantiate", err, len)) rc = -1;
    if (g[r]) cudaGraphDestroy(g[r]);
  }
  if (rc) {
    for (int r = 0; r < ns; r++)
      if (ge[r]) {
        cudaSetDevice(devs[r]);
        cudaGraphExecDestroy(ge[r]);
        ge[r] = NULL;
      }
    cudaGetLastError();
  }
  return rc;
}

double bench_parts_time_one(const bench_parts *p, int what, const cudaGraphExec_t *ge, char *err, size_t len) {
  for (int w = 0; w < p->warmup; w++)
    if (p->ops->launch(p->ctx, what, w, err, len)) return -1;
  if (p->ops->wait(p->ctx, err, len)) return -1;
  int n = p->iters;
  double t0 = rt_time_s();
  if (p->graph) {
    cudaStream_t st[BENCH_PARTS_MAXS];
    int devs[BENCH_PARTS_MAXS], ns = streams_of(p, what, st, devs);
    for (int k = 0; k < p->graph; k++)
      for (int r = 0; r < ns; r++) {
        cudaSetDevice(devs[r]);
        if (!bench_cuda_ok(cudaGraphLaunch(ge[r], st[r]), "graph launch", err, len)) return -1;
      }
    n *= p->graph;
  } else {
    for (int it = 0; it < n; it++)
      if (p->ops->launch(p->ctx, what, it, err, len)) return -1;
  }
  if (p->ops->wait(p->ctx, err, len)) return -1;
  return (rt_time_s() - t0) / n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void bench_parts_measure(bench_parts *p, double *us, char *error, size_t len) {
  int nparts = p->nparts < BENCH_PARTS_MAX ? p->nparts : BENCH_PARTS_MAX;
  int rounds = p->rounds < 1 ? 1 : p->rounds > BENCH_PARTS_MAX_ROUNDS ? BENCH_PARTS_MAX_ROUNDS : p->rounds;
  char err[240] = "";
  cudaGraphExec_t ge[BENCH_PARTS_MAX][BENCH_PARTS_MAXS];
  memset(ge, 0, sizeof ge);
  if (p->ops->sync) p->dead = p->ops->sync(p->ctx, p->dead);
  if (p->graph)
    for (int what = 0; what < nparts; what++)
      if (!(p->dead & 1u << what) && capture(p, what, ge[what], err, sizeof err)) {
        snprintf(error, len, "%s graph: %.200s", p->names[what], err);
        p->dead |= 1u << what;
      }
  double t[BENCH_PARTS_MAX][BENCH_PARTS_MAX_ROUNDS];
  for (int k = 0; k < rounds; k++)
    for (int what = 0; what < nparts; what++) {
      if (p->ops->sync) p->dead = p->ops->sync(p->ctx, p->dead);
      if (p->dead & 1u << what) continue;
      t[what][k] = bench_parts_time_one(p, what, ge[what], err, sizeof err);
      if (t[what][k] < 0) {
        snprintf(error, len, "%s: %.200s", p->names[what], err);
        p->dead |= 1u << what;
      }
    }
  for (int what = 0; what < p->nparts; what++) {
    us[what] = -1;
    if (what >= nparts || p->dead & 1u << what) continue;
    qsort(t[what], (size_t)rounds, sizeof t[what][0], cmp_double);
    us[what] = t[what][(rounds - 1) / 2] * 1e6;
  }
  for (int what = 0; what < nparts; what++) {
    cudaStream_t st[BENCH_PARTS_MAXS];
    int devs[BENCH_PARTS_MAXS], ns = streams_of(p, what, st, devs);
    for (int r = 0; r < ns; r++) {
      if (!ge[what][r]) continue;
      cudaSetDevice(devs[r]);
      cudaGraphExecDestroy(ge[what][r]);
    }
  }
}

unsigned bench_parts_measure_opts(const bench_parts_ops *ops, void *ctx, int nparts, const char *const *names,
                                  const bench_common_opts *c, unsigned dead, double *us, char *error, size_t len) {
  bench_parts p = {.ops = ops, .ctx = ctx, .nparts = nparts, .names = names, .warmup = c->warmup, .iters = c->iters,
                   .graph = c->graph, .rounds = c->rounds, .dead = dead};
  bench_parts_measure(&p, us, error, len);
  return p.dead;
}
