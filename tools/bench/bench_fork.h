/* bench_fork.h -- one forked process per rank for `baton bench -P` (the
 * collectives, tools/bench/bench_procs.c, and the fused modes that take
 * it, tools/bench/bench_ranks_procs.c).  The parent touches no CUDA (a CUDA
 * context does not survive fork); it hands rank 0's NCCL unique id to
 * the others, keeps the ranks in step with barriers over pipes, and
 * gathers one result message per rank at a time.  The messages:
 *
 *   child 0 -> parent:  'I' NCCL unique id (flags 1) or why not (flags 0),
 *                       forwarded to the other children
 *   child -> parent:    'B' flags (a barrier; the reply 'G' carries the OR
 *                       of every rank's flags), 'M' a 64-bit value (a
 *                       barrier; the reply 'G' carries the least of them),
 *                       'R' a result (at most
 *                       BENCH_FORK_MSG_MAX bytes), 'E' a setup error (text),
 *                       then the child exits
 *
 * CUDA builds only (the children use NCCL through bench_nccl). */
#ifndef BENCH_FORK_H
#define BENCH_FORK_H

#include <stddef.h>
#include <stdint.h>

#include "bench_nccl.h"

#define BENCH_FORK_MSG_MAX 4096   /* bytes of one message's payload */
#define BENCH_FORK_MAX_RANKS 1024

typedef struct bench_fork bench_fork;   /* a child's link to the parent */

/* What a run gives the parent loop. */
typedef struct bench_fork_ops {
  /* Rank r's work, in its child: never returns (ends with _exit; 0 when
   * all went right). */
  void (*child)(void *arg, bench_fork *f, int rank);
  /* Rank 0's NCCL id message: have 0 with why (text) when it has none.
   * NULL: not looked at. */
  void (*id)(void *arg, int have, const char *why);
  /* The first barrier passed (every rank set up); flags their OR.  NULL:
   * nothing to do. */
  void (*started)(void *arg, int flags);
  /* A result from every rank: msg[r] of len[r] bytes.  0, or -1 when the
   * results do not fit together (the run stops, status 2). */
  int (*result)(void *arg, char *const *msg, const int *len, int n);
  int nresults;   /* results per rank in the whole run: the parent stops after them */
} bench_fork_ops;

/* Forks n children (ranks 0 .. n-1) running ops->child and serves them
 * until each sent ops->nresults results, a child failed or ended early.
 * The exit status: 0; 1 when a child ended with a nonzero status after
 * all its results; 2 when the run stopped early (after "baton bench:
 * <why>" on stderr: a child's setup error, a child ended early, the ranks
 * out of step); the children still running then are sent SIGTERM. */
int bench_fork_run(int n, const bench_fork_ops *ops, void *arg);

/* The parent's folding of every rank's result into one, the same for
 * every mode: */

/* Folds another rank's time (us, -1: not measured) into *all: it stays
 * only where every rank has one, the slowest rank's. */
void bench_fold_time(double *all, double one);

/* The error of a folded row (len bytes): with one NULL, rank 0's own,
 * "rank 0: " put before it when not empty; else rank r's one, "rank r:
 * <one>", where all is still empty. */
void bench_fold_error(char *all, size_t len, const char *one, int r);

/* Folds another rank's count of wrong elements (-1: not checked) into
 * *all: the sum of those checked. */
void bench_fold_wrong(int64_t *all, int64_t one);

/* Child side.  Each ends the child with _exit(3) when the parent is gone. */

/* The OR of every rank's flags, after every rank passed its barrier. */
int bench_fork_barrier(bench_fork *f, int flags);

/* The least of every rank's v, after every rank passed this barrier. */
int64_t bench_fork_min(bench_fork *f, int64_t v);

/* Sends len bytes (at most BENCH_FORK_MSG_MAX) as this rank's next result. */
void bench_fork_result(bench_fork *f, const void *msg, int len);

/* Sends "rank R: <text>" as a setup error and ends the child (_exit(2)):
 * the parent prints it and stops the run. */
void bench_fork_fail(bench_fork *f, const char *text);

/* NCCL's unique id into id: rank 0 makes it (its process has CUDA then)
 * and sends it, or why not; every other rank receives it.  1 when id
 * holds one, 0 when NCCL is not loaded (nccl NULL) or rank 0 could not
 * make one. */
int bench_fork_nccl_id(bench_fork *f, bench_nccl *nccl, char id[128]);

#endif
