/* rt_chain.h -- receive chains: thread blocks whose only step is a
 * receive-reduce waiting on the step before it, run in one CUDA block.
 *
 * A one-shot AllReduce or all-pairs ReduceScatter written as a chain
 * (allpairs.reduce with chain, reducescatter_allpairs chain=1) has, on
 * each rank, a thread block per peer that receives that peer's message and
 * reduces it into the sum after the thread block before it has.  Run as
 * written, each link of the chain costs a cross-block hand-off: a release,
 * a poll that sees it, a barrier.  rt_chain_plan folds such a thread block
 * into the block that runs the step it waits for, when that step is the
 * last one there: the block then reads the messages of several
 * connections in a row, ordered by program order, not by flags.
 *
 * The folding is exact (same steps, same order per tile; every wait that
 * remains is the one the program had) and needs no change of the IR.  The
 * runtime folds LL and LL128 programs only: all receives of a folded chain
 * run on one SM, which costs a Simple program bandwidth (measured: the
 * chain ReduceScatter at 64-256 MiB, 0.70x NCCL folded, 0.96-0.99x not). */
#ifndef RT_CHAIN_H
#define RT_CHAIN_H

#include "ip_gpu.h"
#include "ir.h"

typedef struct rt_chain {
  int ntbs;               /* thread blocks of the rank, as in the IR */
  int *host;              /* [ntbs] the tb whose block runs tb t's steps (t itself when not folded) */
  int *first, *count;     /* [ntbs] a host's steps are ref[first .. first+count) (count 0: folded away) */
  int *ref_tb, *ref_step; /* [all steps] the program's (tb, step) of each, host by host */
  int *xconn;             /* [ntbs] for a folded tb: its connection's index in the host's extras (0..) */
  int *nx;                /* [ntbs] extra receive connections of each host */
  int *xtb;               /* [ntbs * IP_GPU_XRECV] the tbs whose receive connections those are */
  int folded;             /* thread blocks folded into another */
} rt_chain;

/* Computes the chains of rank's thread blocks (fold 0: none, every tb its
 * own host).  BT_ERR_NOMEM only. */
bt_result rt_chain_plan(rt_chain *c, const ir_gpu *g, int fold);

/* CUDA blocks a lane of rank's program needs (its thread blocks less the
 * folded ones, which get no block); the thread blocks when out of memory. */
int rt_chain_blocks(const ir_gpu *g, int fold);

/* Where the program's step (tb, step) runs: its host's block, at index
 * *at in the host's list. */
int rt_chain_where(const rt_chain *c, int tb, int step, int *at);

/* Fused steps.  In a block's steps s[0..n) (after folding, hasdep set),
 * marks runs the kernel runs as one step:
 *  - receive-reduce-copy steps where each step reads what the step before
 *    it wrote (its src is that step's dst: buffer, offset and count) and
 *    waits for nothing else (no depid), at most `max` (0: none; LL and
 *    LL128 only): every message polled at once, the partial result kept in
 *    registers instead of written and read back after a barrier; a send
 *    of the first one's src just before it joins the run (the src is
 *    loaded once, sent, then reduced: the 2-rank in-place one-shot);
 *  - nop steps (a wait on another block each), at most IP_GPU_NOPS: one
 *    thread per step waits, then one barrier, instead of a wait and two
 *    barriers per step;
 * and in both, no other block waits on a step of the run but its last.
 * Sets s[j].fuse to the run's length at its first step, 0 on the others,
 * 1 on a step that runs alone.  Returns the number of steps folded into an
 * earlier one.  Same results: each message is still reduced in program
 * order, each dst written (a dst the next step overwrites in the same
 * place is written once), every wait still made before what follows. */
int rt_chain_fuse(ip_gstep *s, int n, int max);

void rt_chain_free(rt_chain *c);

#endif
