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
 * chain ReduceScatter at 64-256 MiB, 0.70x NCCL folded, 0.96-0.99x not).
 *
 * Sends go along too (BATON_FOLD_SENDS): a thread block whose only step
 * sends, waiting for nothing, the chunk a chain's head reads runs at the
 * front of that chain's block, on an extra send connection; the kernel
 * then loads the chunk once, sends it on every connection and reduces it
 * (rt_chain_fuse).  Its step moves ahead of steps it did not wait for,
 * which adds waits: per tile, the chain's steps now follow the sends, and
 * the next tile's sends follow the chain.  Neither can deadlock: such a
 * send waits only for a free slot of its connection, which carries one
 * message a tile, and that slot frees when the receiver consumes an
 * earlier tile's message, which waits for nothing of a later tile.  Once
 * the sends run in the chain's block, the in-place one-shot chain's copy
 * back (sum into scratch; wait for the rank's sends; copy the sum over the
 * input) sinks into the chain: every link reads and writes the input
 * itself, the scratch is not touched, the copy and the waits are gone.
 * BATON_FOLD_SENDS=1 folds sends only where that happens, 2 wherever it
 * can; the default, 0, never: measured on an H100 shared by 4 ranks, the
 * chain's block sends only after its own setup and waits, about 2 us
 * later than send blocks of their own, and small calls were 1.6 us (in
 * place) to 4 us (out of place) slower (docs/PERFORMANCE.md, eighth run). */
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
  int *nxs;               /* [ntbs] extra send connections of each host: its first nxs steps are their sends */
  int *xstb;              /* [ntbs * IP_GPU_XSEND] the send-only tbs whose connections those are */
  int *xsconn;            /* [ntbs] for a folded send tb: its connection's index in the host's extra sends */
  int *sink;              /* [ntbs] for a host whose chain took its copy back: the links, else 0 */
  int *sink_copy;         /* [ntbs] ... and the copy's place in the host's list (it runs as a nop) */
  int folded;             /* thread blocks folded into another, sends included */
  int sends;              /* of which send-only ones */
} rt_chain;

/* Ways of folding: receive chains, and sends (none, only where a copy
 * back sinks into the chain, wherever a chain's head reads what they send). */
enum { RT_FOLD_SENDS_NONE, RT_FOLD_SENDS_SINK, RT_FOLD_SENDS_ALL };

/* Computes the chains of rank's thread blocks (fold 0: none, every tb its
 * own host; sends: an RT_FOLD_SENDS_ way, used only when fold is 1).
 * BT_ERR_NOMEM only. */
bt_result rt_chain_plan(rt_chain *c, const ir_gpu *g, int fold, int sends);

/* CUDA blocks a lane of rank's program needs (its thread blocks less the
 * folded ones, which get no block); the thread blocks when out of memory. */
int rt_chain_blocks(const ir_gpu *g, int fold, int sends);

/* Where the program's step (tb, step) runs: its host's block, at index
 * *at in the host's list. */
int rt_chain_where(const rt_chain *c, int tb, int step, int *at);

/* The interpreter's steps of host h (c->count[h] of them) into s: a wait
 * on an earlier step of the same block dropped (program order), others
 * naming the host and place of the step waited for (rt_chain_where; depn
 * that host's count); receive and send connections numbered (0: the tb's
 * own, k: the k-th extra one); each message's place per tile counted in
 * nsend[1 + IP_GPU_XSEND] and nrecv[1 + IP_GPU_XRECV] (zeroed first); the
 * copy back sunk into the chain where c->sink says.  hasdep stays 0 (the
 * caller sets it once every host's steps are known), fuse 1. */
void rt_chain_steps(const rt_chain *c, const ir_gpu *g, int h, ip_gstep *s, int32_t *nsend, int32_t *nrecv);

/* Fused steps.  In a block's steps s[0..n) (after folding, hasdep set),
 * marks runs the kernel runs as one step:
 *  - receive-reduce-copy steps where each step reads what the step before
 *    it wrote (its src is that step's dst: buffer, offset and count) and
 *    waits for nothing else (no depid), at most `max` (0: none; LL and
 *    LL128 only): every message polled at once, the partial result kept in
 *    registers instead of written and read back after a barrier; sends
 *    of the first one's src just before it (on different connections,
 *    at most 1 + IP_GPU_XSEND) join the run (the src is loaded once, sent
 *    on each, then reduced: the in-place one-shot);
 *  - nop steps (a wait on another block each), at most IP_GPU_NOPS: one
 *    thread per step waits, then one barrier, instead of a wait and two
 *    barriers per step; a nop that waits for nothing and that no block
 *    waits on stays alone (fuse 1): the kernel skips it;
 * and in both, no other block waits on a step of the run but its last.
 * Sets s[j].fuse to the run's length at its first step, 0 on the others,
 * 1 on a step that runs alone.  Returns the number of steps folded into an
 * earlier one.  Same results: each message is still reduced in program
 * order, each dst written (a dst the next step overwrites in the same
 * place is written once), every wait still made before what follows. */
int rt_chain_fuse(ip_gstep *s, int n, int max);

void rt_chain_free(rt_chain *c);

#endif
