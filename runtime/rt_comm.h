/* rt_comm.h -- the communicator's insides, shared by the runtime's files,
 * lowest first: rt_group.c (the calling thread's group), rt_call.c (a FIFO
 * program's call), rt_dcall.c (direct programs: their set-up and calls),
 * rt_fdirect.c (the direct fused GEMV), rt_comm.c (creation, destruction,
 * errors), rt_dispatch.c (choosing, preparing and launching a call of any
 * kind), rt_coll.c (the collective calls, a group's end) and rt_fused.c
 * (the fused calls). */
#ifndef RT_COMM_H
#define RT_COMM_H

#include "baton.h"
#include "ip_direct.h"
#include "ip_fdirect.h"
#include "ip_gpu.h"
#include "rt_algo.h"
#include "rt_direct.h"
#include "rt_hash.h"
#include "rt_plan.h"
#include "rt_trace.h"
#include "rt_window.h"
#include "tp.h"

/* Host-mapped words every GPU of a process can see: the abort flag and
 * the first error a kernel reports.  Shared by the communicators of one
 * baton_comm_init_all call. */
typedef struct rt_shared {
  volatile int32_t abort;
  int32_t nerr;
  ip_gerr err[];              /* nerr: one per rank of the process, written by its GPU */
} rt_shared;

typedef struct rt_hostref {   /* host side of rt_shared: pointer and owners */
  rt_shared *host;            /* pinned, mapped */
  rt_shared *dev;             /* its device address */
  int refs;
} rt_hostref;

/* A call's choice of algorithm (rt_comm_choose_io) and the facts it
 * depends on: a call with the same facts makes the same choice.  ai is
 * RT_CHOICE_NONE until a call is made. */
#define RT_CHOICE_NONE (-2)
typedef struct rt_choice {
  uint64_t bytes;
  int64_t count;
  int dtype, peer_io, ai;
} rt_choice;

struct baton_comm {
  int rank, nranks, dev;
  int local;                  /* this rank's error record in shared->host->err */
  int share;                  /* ranks on dev (of this process; with a process per rank, of every process on
                                 the GPU, under MPS): each gets that share of its blocks */
  rt_algos *algos;
  int *lanes;                 /* per algorithm (rt_plan_lanes) */
  rt_plan *plans;             /* one per algorithm; ntbs 0: not runnable here */
  tp_peer *peers;             /* every rank's host, process, device and node group */
  int nodes;                  /* node groups of the communicator */
  tp_set *tps;                /* the transports of this rank's connections */
  int net;                    /* some connection of this rank uses the network (its proxy is kicked at launch) */
  cudaStream_t kick_stream;   /* captured launches: the branch of the graph that wakes the proxy (rt_call.c), */
  cudaEvent_t kick_fork, kick_join;   /* made with the network connections (no CUDA object is made during a capture) */
  rt_hostref *shared;
  int nslots;
  int64_t slot_bytes;
  int64_t min_tile;           /* BATON_MIN_TILE, bytes */
  int lane_tiles;             /* BATON_LANE_TILES */
  int force_simple;           /* BATON_PROTO=Simple */
  uint64_t timeout_ns;
  void *scratch;              /* device: scratch chunks and temporary spans */
  size_t scratch_bytes;
  int gemm_split;             /* BATON_GEMM_SPLIT */
  int gemm_narrow;            /* BATON_GEMM_NARROW */
  float *gsplit_ws;           /* device: split GEMM tiles' partial sums (rt_call.c, ip_gemm_set_split), */
  uint32_t *gsplit_sem;       /* and their counters (zero between calls); NULL until a call splits */
  int64_t gsplit_units;       /* units (k-ranges of tiles) they hold */
  int gemm_narrowest;         /* the narrowest GEMM tile a call has run (ip_gemm_args.tile_n; 0: none yet) */
  const char *last;           /* the algorithm the last call ran */
  uint64_t calls;             /* calls submitted (rt_comm_call_submit): the same count on every rank, which
                                 each exchange of buffers checks (rt_peerbuf_self.key) */
  int last_choice[IR_COLL_COUNT][2];   /* per (collective, in place): last algorithm chosen, -2 none yet */
  rt_choice choices[IR_COLL_COUNT][2]; /* per (collective, in place): the last call's facts and choice */
  int last_choice_fused;      /* the last GEMV + AllReduce program chosen, -2 none yet */
  int last_fused_via;         /* how the last fused AllToAll call of a process per GPU reached its peers:
                                 RT_FUSED_VIA_* (rt_direct_fused_across) */
  baton_result error;         /* sticky: the first asynchronous error seen */
  int aborted;                /* baton_comm_abort was called: destruction waits on no GPU work */
  struct rt_bootstrap *bs;    /* one process per GPU only */
  rt_trace *trace;            /* BATON_TRACE, else NULL */
  uint64_t *dflags;           /* device, peer-mapped: end flags of direct GEMM + AllToAll calls
                                 (IP_DIRECT_FLAG_WORDS(nranks); ip_gargs.dflag), NULL: none run direct */
  /* Direct programs (rt_dcall.c): their plans (one per algorithm; ok 0:
   * not a direct program, or not runnable here), the plans' tables in
   * device memory (one ip_dtab per algorithm, NULL: no direct program),
   * the window they run on (NULL: none), and the blocks every direct
   * kernel launches. */
  rt_dplan *dplans;           /* per algorithm i, and at n + i its variant: root copy for a rooted program
                                 (rt_dplan_build_root_copy), staged for an AllToAll (rt_dplan_build_staged) */
  ip_dtab *dtabs;
  rt_window *win;
  int grid;
  int pdl;                    /* direct kernels launch as programmatic dependents (BATON_DIRECT_PDL, sm_90 on) */
  int fgrid[IP_FDIRECT_FORMS];  /* the blocks each form of the direct GEMV + AllReduce launches (rt_fdirect.c), 0 until
                                   its first call */
  struct rt_peerbufs *pbufs;  /* a process per GPU: peers' allocations mapped for captured calls and registered
                                 windows (rt_peerbuf.h) */
  struct baton_window *regs;  /* registered windows, newest first (rt_regset.h) */
  uint32_t reg_next;          /* registrations made so far: the next window's number */
};

/* baton_comm.last_fused_via: through FIFOs; straight into the peers'
 * outputs (learned at capture); through the windows (registered outputs,
 * or the window's scratch and a copy out). */
enum { RT_FUSED_VIA_FIFO, RT_FUSED_VIA_OUTPUTS, RT_FUSED_VIA_WINDOWS };

/* The protocol p runs with on c: its own, or Simple under BATON_PROTO=Simple. */
static inline int rt_comm_proto(const baton_comm *c, const ir_prog *p) {
  return c->force_simple ? IR_PROTO_SIMPLE : (int)p->proto;
}

/* A fused call's operands, in the program's order (ir_prog.operands):
 * device pointers, a matrix's row stride and columns (rt_comm.c binds
 * and checks them against the program's shapes). */
typedef struct rt_operands {
  const void *data[IR_MAX_OPERANDS];
  int64_t ld[IR_MAX_OPERANDS], cols[IR_MAX_OPERANDS], rows[IR_MAX_OPERANDS];
  int8_t dtype[IR_MAX_OPERANDS];   /* ip_gargs.opdt */
  int64_t seg;                     /* the output's interleave (ir_geom.seg), 0 none */
  const int32_t *gcount;           /* gemm programs: rows worth computing per block (ip_gargs.gcount), or NULL */
} rt_operands;

/* One call, prepared and not yet launched (rt_call.c). */
typedef struct rt_launch {
  baton_comm *c;
  cudaStream_t stream;
  ip_gargs a;                 /* the scratch pointer, and the span's, are set at launch */
  const void *sendbuf;
  void *recvbuf;
  int nthreads;
  int copy_in;                /* runs on a copy of the input (an in-place program out of place) */
  int temp_span;              /* that copy is a temporary span in the scratch, after its chunks */
  int stage_in;               /* an out-of-place program in place: it reads a copy of the input in the scratch */
  int fused_in;               /* a fused out-of-place program: it computes its input into the scratch */
  /* The root of a gather or scatter relabelled for root R (or called in
   * place): the program's block-per-rank buffer is a span in the scratch,
   * rotated by R blocks from (scatter: before) or into (gather: after)
   * the caller's: rot_in (scatter: the input, before the run) or rot_out
   * (gather: the output, after it) is 1 then; `rot_root` R, `rot_block` a
   * block's bytes, `rot_blocks` the ranks. */
  int rot_in, rot_out, rot_root, rot_blocks;
  size_t rot_block;
  size_t scr_bytes;           /* bytes of the scratch chunks */
  int divide;                 /* AVG: divide the output by this, else 0 */
  const char *where;
  const int *irtb;            /* the plan's: blocks to IR thread blocks (the timeline) */
  int direct_ok;              /* a fused AllToAll that may run direct (ip_gargs.direct; decided at the
                                 group's end, rt_coll.c) */
  int64_t fused_stage;        /* a direct fused AllToAll whose peers store into this rank's window (its
                                 Simple scratch): the bytes copied from there into recvbuf after the
                                 kernel, else 0 (rt_dcall.c) */
  /* A direct program's call (rt_dcall.c): its executor's arguments (not
   * `a`), and what a group's end needs to give it its peers' buffers, or
   * to choose again without them. */
  int direct;
  int stage_window;           /* an out-of-place program in place: its input copied aside first (rt_dcall.c) */
  int64_t stage_temp;         /* ... into memory of the stream's pool, this many bytes, not the window */
  int staged_variant;         /* stage_window with the plan's staged variant: the copy leaves out the input
                                 chunks of rt_dplan.skip_in (the rank's own blocks, already in place) */
  int root_copy;              /* the root of a rooted in-place program out of place that only puts from its input
                                 (rt_dplan.root_src): it runs on the caller's input, and its plan's root-copy
                                 variant stores each piece into the output as it puts it (no copy before) */
  int aliased;                /* its input lies where the layout puts it in the output's span (in place, or
                                 copy_in), at an offset that may differ by rank */
  int ai, coll, op;
  int peers_known;            /* d holds every rank's buffers already (exchanged at capture: rt_peerbuf.h) */
  int again;                  /* rt_direct_prep: it cannot have its peers' buffers; choose again (rt_call_again) */
  int resubmit;               /* rt_call_again: the program chosen instead (its index + 1) runs the call in
                                 slices, which its caller prepares one by one (rt_comm_call_submit); L unset */
  ip_dargs d;
  /* A direct fused call (rt_fdirect.c): its kernel's arguments, blocks
   * and unroll. */
  int fdirect, fgrid, funroll;
  ip_fargs f;
} rt_launch;

/* ---- calls, whatever program runs them (rt_dispatch.c) ---- */

/* Prepares algorithm `ai` of comm for a call: every check that can fail
 * before the GPU is touched, the scratch reserved, L filled.  Arguments
 * are checked by the caller; the current device must be the comm's.  A
 * fused program takes its operands (ops, else NULL) and no sendbuf: an
 * in-place one computes its input where NCCL's in-place layout puts it in
 * recvbuf, an out-of-place one into the scratch.  A direct program that
 * cannot have its peers' buffers is replaced by rt_call_again's choice. */
bt_result rt_call_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                       const rt_operands *ops, cudaStream_t stream, rt_launch *L);

/* Prepares the direct call L again with a program chosen without its
 * peers' buffers (its group lacks some rank's call, or some rank's
 * buffers cannot be mapped across processes), from the same root for a
 * rooted collective; where that program runs the count in slices of the
 * window, only L->resubmit is set (every rank alike: the choice and the
 * window are the same on all).  BT_ERR_UNSUPPORTED (said) when none fits. */
bt_result rt_call_again(rt_launch *L);

/* Enqueues a prepared call on its stream; the current device must be the
 * comm's.  Any thread may launch it. */
bt_result rt_call_launch(const rt_launch *L);

/* Launches L now, or records it when the calling thread is inside
 * baton_group_start/end. */
bt_result rt_group_submit(const rt_launch *L);

/* A FIFO program's call (rt_call.c): rt_call_prep's and rt_call_launch's
 * work for those. */
bt_result rt_fifo_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                       const rt_operands *ops, cudaStream_t stream, rt_launch *L);
bt_result rt_fifo_launch(const rt_launch *L);

/* Where stream s is being captured and every node it depends on is a
 * kernel, makes those edges programmatic, so that a programmatic launch
 * captured next starts as those kernels end even where the capture joined
 * streams by events (PyTorch's process group); anything else leaves them
 * as they are (rt_capture.c).  For communicators of a process per GPU
 * only: their captures join streams of one GPU. */
void rt_capture_programmatic(cudaStream_t s);

/* Makes the fused AllToAll call L (rt_launch.direct_ok, not yet direct)
 * direct (ip_gargs.direct): outs[r] is rank r's output as this GPU
 * reaches it, flags[r] rank r's direct flags (IP_DIRECT_FLAG_WORDS of
 * them), for every rank of L's communicator; every block of its launch
 * then computes, and nothing moves through FIFOs.  Every rank's call
 * must be made direct alike (the kernels meet on the flags). */
void rt_call_direct_alltoall(rt_launch *L, char *const *outs, uint64_t *const *flags);

/* ---- the calling thread's group (rt_group.c; its end is rt_coll.c's) ---- */

/* Whether the calling thread is inside baton_group_start/end. */
int rt_group_open(void);

/* Marks the calling thread's open group as failed with e (its end then
 * launches nothing and returns e); nothing when no group is open. */
void rt_group_fail(bt_result e);

/* Records L in the open group (copied); the group's failure, if any. */
bt_result rt_group_record(const rt_launch *L);

/* Leaves one level of the group: -1 when none is open, 0 when an outer
 * level stays open, 1 when this was the outermost end: then *v and *n are
 * its recorded calls and *err its first failure, kept until
 * rt_group_reset. */
int rt_group_leave(rt_launch **v, int *n, bt_result *err);
void rt_group_reset(void);

/* The algorithm a call of collective `coll` with these buffers, count and
 * type would run on `stream` (NCCL's in-place layouts count as in place),
 * or -1 when none fits.  Runs nothing; logs each new choice at INFO once.
 * The one selection both baton's collectives and the NCCL drop-in library
 * use. */
int rt_comm_choose(baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype,
                   cudaStream_t stream);

/* The same with `peer_io` said by the caller (rt_call_again's choice,
 * without its peers' buffers). */
int rt_comm_choose_io(baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype, int peer_io);

/* Off the root of a rooted collective (rank != root) the caller gives one
 * buffer, the other may be NULL (NCCL's contract): the one given stands
 * for both in *s and *r.  Nothing elsewhere. */
static inline void rt_rooted_bufs(ir_coll coll, int rank, int root, const void **s, void **r) {
  if (!ir_coll_rooted(coll) || rank == root) return;
  if (ir_coll_unused(coll) == IR_BUF_INPUT) *s = *r;
  else if (ir_coll_unused(coll) == IR_BUF_OUTPUT) *r = (void *)*s;
}

/* The same for a rooted collective (broadcast, reduce) from `root`: the
 * choice depends on the count, and for a direct program on what every
 * rank of the call shares (captured in a graph, one process, registered
 * windows), so every rank makes the same one.  Off the root the buffer
 * the collective does not use may be NULL: the other stands for it. */
int rt_comm_choose_rooted(baton_comm *c, ir_coll coll, int root, const void *s, const void *r, size_t count,
                          int dtype, cudaStream_t stream);

/* The same with `peer_io` said by the caller (rt_call_again's choice),
 * s and r as rt_rooted_bufs leaves them. */
int rt_comm_choose_rooted_io(baton_comm *c, ir_coll coll, int root, const void *s, const void *r, size_t count,
                             int dtype, int peer_io);

/* Whether algorithm ai of c can run a call at all on this rank (its plan
 * was built and kept: FIFO or direct). */
int rt_comm_runnable(const baton_comm *c, int ai);

/* ---- direct programs (rt_dcall.c) ---- */

/* Builds c's plans of its direct programs (c->dplans) and copies their
 * tables to the current device (c->dtabs); a program the executor cannot
 * run keeps an empty plan. */
bt_result rt_direct_plans(baton_comm *c, int nthreads);

/* Whether c needs a window (the same on every rank): a loaded program is
 * direct, or computes a GEMV that the direct one-shot kernel may run in
 * its stead (BATON_FUSED_DIRECT), or, with a process per GPU, is a fused
 * AllToAll that may run direct (its flags lie in the window). */
int rt_direct_wanted(const baton_comm *c);

/* The window of c (when rt_direct_wanted): allocated, with the handle its
 * peers map it by; a rank that cannot have one publishes a zero handle
 * (every rank then drops its direct plans at rt_direct_connect). */
bt_result rt_direct_window(baton_comm *c, rt_window_handle *mine);

/* Maps every rank's window given all handles; where that cannot be (a
 * zero handle, another host, no peer access) c's direct plans are dropped
 * (logged), which every rank decides alike.  Fails only on CUDA errors. */
bt_result rt_direct_connect(baton_comm *c, const rt_window_handle *all);

/* Whether direct algorithm ai runs a call of `count` elements of type
 * dtype, in place or not, on c: its plan, room in the window (for each
 * slice, rt_direct_slice), a layout it
 * runs without a span outside the window, and, when it reaches its
 * peers' buffers, `peer_io` (RT_PEERS_*: every rank's buffers known to
 * the call, or registered windows and a plan that checks its peers'
 * calls before it touches their buffers, rt_dplan.guarded). */
int rt_direct_usable(const baton_comm *c, int ai, int64_t count, int dtype, int inplace, int peer_io);

/* The count of each slice in which direct algorithm ai runs a call of
 * `count` elements of type dtype: count itself where it fits the window;
 * for an element-wise collective (an AllReduce, Broadcast or Reduce: its
 * slices are calls of their own, ir_coll_elementwise) on the peers'
 * buffers or through the Simple scratch (not one through LL landings,
 * which its size range bounds), the most that fits, a multiple of
 * RT_DIRECT_SLICE_UNIT elements a chunk, so that a message larger than the
 * window runs as consecutive calls on slices of it (rt_comm_call_submit);
 * 0 when no slice fits. */
#define RT_DIRECT_SLICE_UNIT 1024
int64_t rt_direct_slice(const baton_comm *c, int ai, int64_t count, int dtype);

/* What a call knows of its peers' buffers (rt_direct_usable's peer_io):
 * nothing; every rank's (a group, or a capture); or, on registered
 * windows, where they are if every rank's call is like this one. */
enum { RT_PEERS_NONE, RT_PEERS_KNOWN, RT_PEERS_REGISTERED };

/* Whether a call of collective coll with these buffers on c (a process
 * per GPU) has its input and output in registered windows (NCCL's
 * layouts: the larger buffer holds every rank's block).  Never for a
 * rooted collective: off the root one buffer stands for both, so a rank
 * there could take its windows while the root, whose input is not in
 * one, exchanged its buffers for the call; each would wait for the
 * other until a timeout. */
int rt_direct_registered(const baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype);

/* Whether a call of c on `stream` now would know every rank's buffers:
 * inside a group, on a communicator of one process holding every rank
 * (the group's end then gives each call its peers' buffers); or, on a
 * communicator of a process per GPU, while the stream is being captured
 * (every rank captures the same calls; rt_direct_prep exchanges the
 * buffers then, BATON_PEER_MAPS). */
int rt_direct_peer_io(const baton_comm *c, cudaStream_t stream);

/* The bytes of the larger buffer of a call of collective coll, `count`
 * elements of type dtype (valid) a block, on c: what size ranges and
 * thresholds compare, as nccl-tests counts a size. */
uint64_t rt_call_bytes(const baton_comm *c, ir_coll coll, size_t count, int dtype);

/* Whether eager calls on c (a process per GPU, not captured, their
 * buffers not in registered windows) may exchange every rank's buffers
 * for themselves, as a captured call does (BATON_EAGER_EXCHANGE_MB is
 * not 0): a direct program on the ranks' buffers that such a call runs
 * then does (rt_direct_prep). */
int rt_direct_eager_exchanges(const baton_comm *c);

/* Whether the choice for such an eager call of collective coll, `count`
 * elements of type dtype, counts on that exchange: its larger buffer
 * holds BATON_EAGER_EXCHANGE_MB per other rank or more.  The same on every
 * rank (the count and type are). */
int rt_direct_eager_exchange(const baton_comm *c, ir_coll coll, size_t count, int dtype);

/* rt_peerbuf_exchange for c (a process per GPU): every rank's in and out
 * of one call (this rank's reaching in_bytes and out_bytes from their
 * pointers), `what` naming them for the log, `key` what the call is (the
 * same on every rank for the same call), `prog` the program this rank
 * runs it with; collective over c's bootstrap, BT_ERR_UNSUPPORTED on
 * every rank alike where some rank's cannot be exported or mapped or the
 * ranks' programs differ (ranks that differ in placement), BT_ERR_INVALID
 * where the ranks' keys differ. */
bt_result rt_direct_exchange(baton_comm *c, const char *what, uint64_t key, uint64_t prog, char **in, char **out,
                             int64_t in_bytes, int64_t out_bytes);

/* The key of call L's exchange: the communicator's call count, its
 * collective, count and type (not its program, which the exchange
 * compares apart). */
uint64_t rt_call_key(const rt_launch *L, int64_t count, int dtype);

/* A fused AllToAll call L that may run direct (rt_launch.direct_ok) on a
 * communicator of a process per GPU: captured on `stream`, every rank's
 * output exchanged (rt_peerbuf.h); eager, its output in a registered
 * window, every rank's at the same offset of that window; eager on an
 * unregistered output that fits the window's Simple scratch, every rank's
 * scratch standing in for its output (copied out after the kernel:
 * rt_launch.fused_stage).  The eager ones' descriptor is checked against
 * each peer's in the kernel (ip_gargs.dkey).  Then L is made direct with
 * those outputs and the flags in the windows (rt_call_direct_alltoall).
 * Captured where some rank's output cannot be mapped (every rank alike),
 * it goes the eager way, the copy out captured too.  Otherwise (a larger
 * unregistered output) L keeps the FIFO exchange.  Errors are the
 * bootstrap's or CUDA's. */
bt_result rt_direct_fused_across(rt_launch *L, cudaStream_t stream);

/* Prepares direct algorithm ai for a call (rt_call_prep's work for those);
 * L->again set when it cannot have its peers' buffers. */
bt_result rt_direct_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                         cudaStream_t stream, rt_launch *L);

/* Enqueues a prepared direct call: a copy of its input where its layout
 * needs one, the executor, AVG's division. */
bt_result rt_direct_launch(const rt_launch *L);

void rt_direct_free(baton_comm *c);

/* ---- direct fused calls (rt_fdirect.c) ---- */

/* Prepares GEMV + AllReduce by the direct one-shot kernel (ip_fdirect.h)
 * in L: y = the sum over ranks of W x.  Arguments are checked by the
 * caller.  BT_ERR_UNSUPPORTED, saying
 * nothing, where the kernel does not run the call (BATON_FUSED_DIRECT=0,
 * no window, a type it does not compute, more rows than the fused
 * landings hold): the caller runs a fused program instead. */
bt_result rt_fgemv_prep(baton_comm *c, const void *W, const void *x, void *y, size_t M, size_t K, int dtype,
                        cudaStream_t stream, rt_launch *L);

/* Enqueues a call prepared by rt_fgemv_prep on its stream, with its
 * timeline under BATON_TRACE. */
bt_result rt_fgemv_launch(const rt_launch *L);

/* Reads the shared error words: logs and returns the first kernel error. */
baton_result rt_comm_poll_error(baton_comm *c);

/* What every collective call shares (rt_coll.c), for the fused calls
 * (rt_fused.c): the checks of a call's communicator, buffers, type and
 * operator (the error to give back); a call's error, which inside a group
 * also fails the group; and preparing program ai for a call and launching
 * it, or recording it in the calling thread's group. */
baton_result rt_comm_call_check(baton_comm *c, const void *s, const void *r, int dtype, int op);
baton_result rt_comm_call_failed(baton_result e);
baton_result rt_comm_call_submit(baton_comm *c, int ai, const void *s, void *r, size_t count, int dtype, int op,
                                 const rt_operands *ops, cudaStream_t stream);

/* One collective call as baton_allreduce and the others make it (their
 * checks, nothing for a count of 0, a copy on one rank), by algorithm ai
 * when the caller has chosen it (rt_comm_choose, or rt_comm_choose_rooted
 * for a rooted coll, with the same arguments and nothing opened or
 * captured since), else (ai < 0) by the runtime's choice.  root counts
 * for rooted collectives only, op for the reducing ones only. */
baton_result rt_comm_collective(baton_comm *c, ir_coll coll, int root, int ai, const void *s, void *r, size_t count,
                                int dtype, int op, cudaStream_t stream);

#endif
