/* bench_run.h -- internals of `baton bench`'s GPU part, shared by the
 * one-process driver (bench_run.c) and one process per GPU (bench_procs.c). */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <cuda_runtime_api.h>

#include "baton.h"
#include "bench.h"
#include "bench_nccl.h"

#define BENCH_MAX_LOCAL 64

/* Queues the one-block kernel `--between` puts after every call on
 * `stream` (tools/bench/bench_tick.cu): the launch's error. */
#ifdef __cplusplus
extern "C"
#endif
cudaError_t bench_tick(cudaStream_t stream);

/* What one process drives: local ranks lo..lo+nlocal-1 of nranks; the
 * arrays are indexed by local rank. */
typedef struct bench_ctx {
  const bench_opts *o;
  int nranks, lo, nlocal;
  int devs[BENCH_MAX_LOCAL];
  cudaStream_t streams[BENCH_MAX_LOCAL];
  char *sendbuf[BENCH_MAX_LOCAL], *recvbuf[BENCH_MAX_LOCAL];
  size_t send_bytes, recv_bytes;    /* each GPU's sendbuf and recvbuf */
  baton_window *win[2];             /* --register (-P): baton's windows of recvbuf and sendbuf */
  void *nreg[2];                    /* and NCCL's registrations of them */
  char *host;
  baton_comm *bc[BENCH_MAX_LOCAL];
  bench_nccl *nccl;                 /* NULL: NCCL not loaded */
  void *nc[BENCH_MAX_LOCAL];
  int dead;                         /* bit per library: stopped after an error, not run again */
  char dead_why[BENCH_NLIBS][200];
  int timeout;                      /* BATON_TIMEOUT */
  /* One process per GPU: exchanges flags with every rank and returns
   * their OR; NULL in one process. */
  int (*barrier)(struct bench_ctx *x, int flags);
  struct bench_fork *fork;          /* -P: the link to the parent (bench_fork.h) */
} bench_ctx;

/* Allocates streams, device buffers for the largest of sizes and the
 * host buffer; 0, or -1 with err. */
int bench_ctx_alloc(bench_ctx *x, const int64_t *sizes, int nsizes, char *err, size_t len);
void bench_ctx_free(bench_ctx *x);

/* One size: the check and the interleaved timed rounds for both
 * libraries; fills row (this process's ranks only). */
void bench_run_size(bench_ctx *x, int64_t bytes, bench_row *row);

/* Loads NCCL unless --no-nccl or it lacks o's collective: NULL then,
 * with the reason in t->nccl_missing, else the library described in
 * t->nccl. */
bench_nccl *bench_load_nccl(const bench_opts *o, bench_table *t);


#endif
