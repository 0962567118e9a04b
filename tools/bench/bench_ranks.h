/* bench_ranks.h -- the ranks of a fused bench that one process drives
 * (tools/bench/bench_{embed,moe,fused}_run.c): their GPUs and streams, cuBLAS, NCCL
 * when it runs, baton's n-rank communicator and a one-rank communicator
 * per rank (the operator's opcode alone; embedding_alltoall and
 * gemm_alltoall), waiting for them all and tearing them down; and the
 * host-side check's row sampling and thread pool.  CUDA builds only. */
#ifndef BENCH_RANKS_H
#define BENCH_RANKS_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>

#include "baton.h"
#include "bench_cublas.h"
#include "bench_fork.h"
#include "bench_nccl.h"
#include "bench_util.h"

#define BENCH_RANKS_MAX 64

typedef struct bench_ranks {
  int nranks, ngpus, devs[BENCH_RANKS_MAX];   /* rank r on GPU devs[r] = r % ngpus */
  int world, lo;                              /* all ranks, and this process's first (-P: its only one) */
  bench_fork *fork;                           /* -P: the link to the parent; NULL in one process */
  cudaStream_t st[BENCH_RANKS_MAX];           /* a non-blocking stream per rank */
  baton_comm *bc[BENCH_RANKS_MAX];            /* the n-rank communicator: the fused operator */
  baton_comm *pc[BENCH_RANKS_MAX];            /* one one-rank communicator per rank: the opcode alone */
  bench_nccl *nccl;                           /* NULL: NCCL does not run (no baseline) */
  void *nc[BENCH_RANKS_MAX];
} bench_ranks;

/* The GPUs this process sees into *ngpu: 0, or 2 after "baton bench: no
 * GPU to run on" and why in baton's words (no driver, one too old, none
 * visible), the CUDA runtime's own message after it. */
int bench_gpus(int *ngpu);

/* k's ranks from c (zeroed k): -g N or every GPU, on --share G GPUs or
 * one each (world: all of them, lo 0).  0, or 2 after "baton bench: no GPU" or "baton bench: N
 * ranks on G GPUs asked, P present" on stderr. */
int bench_ranks_size(bench_ranks *k, const bench_common_opts *c);

/* Rank r's stream, on its GPU (made current).  0, or -1 after "baton
 * bench: rank R: cudaStreamCreate: ..." on stderr (k->st[r] NULL). */
int bench_ranks_stream(bench_ranks *k, int r);

/* NCCL over every rank unless c says --no-nccl or --share: when it
 * cannot be loaded or initialized, "# NCCL not used: <why>" on stderr
 * and k->nccl NULL; else its description into desc (len bytes). */
void bench_ranks_nccl(bench_ranks *k, const bench_common_opts *c, char *desc, size_t len);

/* What a fused mode runs on, opened for c: info's ranks, options and GPU
 * name; every rank's stream; when cb is not NULL, cuBLAS (*cb) with a
 * handle per rank (ch[r]) and info->cublas its description; NCCL
 * (bench_ranks_nccl, info->nccl); baton's communicators
 * (bench_ranks_comms).  0, or -1 after the reason on stderr (what was
 * opened is bench_ranks_shut's to close). */
int bench_ranks_open(bench_ranks *k, const bench_common_opts *c, bench_run_info *info, bench_cublas **cb, void **ch,
                     const char *own);

/* Everything bench_ranks_open opened, closed: per rank its communicators,
 * cuBLAS handle (ch may be NULL) and stream; then NCCL and cuBLAS. */
void bench_ranks_shut(bench_ranks *k, bench_cublas *cb, void **ch);

/* baton's n-rank communicator, then, when own is not NULL, a one-rank one
 * per rank (`own` names the opcode alone in errors).  0, or -1
 * after "baton bench: baton_comm_init_all of N ranks: ..." or "baton
 * bench: <own>: baton_comm_init_all of rank R's one-rank communicator:
 * ..." on stderr (what failed left NULL). */
int bench_ranks_comms(bench_ranks *k, const char *own);

/* Every rank's stream done, then per rank the asynchronous errors of
 * baton's n-rank communicator ("baton rank R: ..."), its one-rank one
 * ("<own>: rank R's one-rank communicator: ...") and NCCL's
 * (bench_parts_ops.wait).  0, or -1 with err. */
int bench_ranks_wait(const bench_ranks *k, const char *own, char *err, size_t len);

/* Rank r's communicators destroyed (baton's two, NCCL's); the stream is
 * the caller's to destroy, after whatever else the rank holds. */
void bench_ranks_free_comms(bench_ranks *k, int r);

/* NCCL closed (after every rank's bench_ranks_free_comms). */
void bench_ranks_close(bench_ranks *k);

/* The stream rank r's opcode alone (its one-rank communicator) runs on:
 * its own; with ranks sharing GPUs (share), its GPU's first rank's, so
 * that the one-rank communicators' kernels (each sized for the whole
 * GPU) run one after the other. */
cudaStream_t bench_ranks_own_stream(const bench_ranks *k, int share, int r);

/* The streams a part runs on, into st and devs (bench_parts_ops.streams):
 * every rank's; for the opcode alone (own) with ranks sharing GPUs
 * (share), each GPU's first rank's.  Their number. */
int bench_ranks_streams(const bench_ranks *k, int own, int share, cudaStream_t *st, int *devs);

/* The algorithm baton's n-rank communicator ran last into dst (len
 * bytes); dst untouched when none. */
void bench_ranks_algorithm(const bench_ranks *k, char *dst, size_t len);

/* ---- -P: a fused mode with a forked process per rank
 * (tools/bench/bench_ranks_procs.c) ---- */

/* What a child of bench_ranks_procs has when its mode takes over: its
 * one rank in k (k->nranks 1, k->lo the rank, k->world all, k->fork the
 * link to the parent, the stream, baton's communicator of all ranks,
 * NCCL's when it runs on every rank, the one-rank communicator when the
 * mode names `own`), cuBLAS and the rank's handle ch[0]. */
typedef struct bench_child {
  bench_ranks *k;
  bench_cublas *cb;
  void **ch;
} bench_child;

/* A fused mode's part of -P. */
typedef struct bench_procs_mode {
  const char *own;             /* bench_ranks_comms's own: the one-rank communicator's name, NULL: none */
  const char *compute;         /* what the description says of cuBLAS after its version (" with n = 1", "");
                                  NULL: the mode needs no cuBLAS (cb NULL in its child) */
  /* Rank c->rank's shapes, in its child: each shape's row (row_size
   * bytes) sent with bench_fork_result, in the same order on every rank.
   * Then returns (the rest is closed for it). */
  void (*run)(void *arg, const bench_child *c);
  size_t row_size;             /* at most BENCH_FORK_MSG_MAX */
  int nshapes;                 /* rows each rank sends */
  /* In the parent: the table's description (rank 0's, with procs set)
   * into *info, then header(arg) prints the table's header; each shape's
   * row into rows[*nrows] (row_size bytes; *nrows counts them): rank 0's,
   * "rank 0: " put before its error, then every other rank's folded into
   * it by fold (bench_fold_time, bench_fold_wrong; its error by
   * bench_fold_error here); then print(arg, row) prints it. */
  bench_run_info *info;
  void (*header)(void *arg);
  void *rows;
  int *nrows;
  void (*fold)(void *all, const void *one);
  void (*print)(void *arg, const void *row);
  size_t error_at, error_len;  /* the row's error text: offsetof, sizeof */
} bench_procs_mode;

/* Runs mode m with a forked process per rank (c->ngpus of them, one GPU
 * each): in each child, rank r's GPU, stream, cuBLAS, NCCL (loaded by the
 * parent, c->no_nccl: none) and baton's communicators; its description
 * of the run (bench_run_info, with procs set) to the parent; m->run; all
 * closed.  The exit status as bench_fork_run's. */
int bench_ranks_procs(const bench_common_opts *c, const bench_procs_mode *m, void *arg);

/* k indices spread over [0, n) into samp: the first, the last, one in
 * each of k equal ranges between (all n when n <= k), the same on every
 * run.  Their number. */
int bench_spread(int64_t n, int k, int64_t *samp);

/* What the host threads of a check share: the next of its tasks and the
 * first failure. */
typedef struct bench_tasks {
  int64_t next, count;
  int fail;
  pthread_mutex_t mu;
  char why[240];
} bench_tasks;

/* The index of the next task to check, or -1 when none is left or a
 * thread failed. */
int64_t bench_tasks_take(bench_tasks *t);

/* Records why the check failed (the first reason is kept); every thread
 * stops at its next take. */
void bench_tasks_fail(bench_tasks *t, const char *what);

/* Runs fn(arg) on the host threads of bench_pool over `count` tasks of t
 * (fn takes them with bench_tasks_take).  0, or -1 with "check: <why>" in
 * err. */
int bench_tasks_run(bench_tasks *t, int64_t count, void *(*fn)(void *), void *arg, char *err, size_t len);

/* fn(arg) on as many host threads as there are processors (at most 32,
 * at most `tasks`, at least 1), joined; on this thread when none starts.
 * fn takes its tasks from arg itself. */
void bench_pool(void *(*fn)(void *), void *arg, int64_t tasks);

#endif
