/* cc_ins.h -- the lowering passes' shared state: the instruction list and
 * the thread-block sets.  Internal to compiler/ (the list's functions in
 * cc_ins.c; cc_lower.c, cc_place.c, cc_direct.c, cc_layout.c, cc_sched.c
 * use it). */
#ifndef CC_INS_H
#define CC_INS_H

#include "cc.h"

/* One IR-level instruction on one rank, before it becomes a step. */
typedef struct ins {
  int rank, op;                 /* ir_op */
  int sspace, sidx, dspace, didx, count;
  int send, recv, ch;           /* peers, -1 none */
  int fixtb;                    /* thread block the script placed it in (sendtb/recvtb), -1 none */
  int inst;                     /* whole-program instance */
  int line;
  int msg_of;                   /* for a receive: the sending instruction */
  int dead;                     /* fused away */
  int *pred, npred, cappred;    /* instructions that must come first (same rank, or the message) */
  int tb, pos, depth;
  int8_t args[IR_MAX_ARGS];     /* compute opcodes: operands */
  int sync, sync_param, zerocopy;
  cc_pat spat, dpat;            /* source and destination patterns (cc_pat; run 0: consecutive) */
  int peer;                     /* direct steps (put, get, getr, xchg, sig, wait): the peer rank; -1 else */
  int role;                     /* a sig's reason (cc_direct.h: CC_SIG_*); 0 else */
  int round;                    /* its operation's round (cc_op.round) */
  int from;                     /* its operation's callers (cc_op.from; -1 none) */
} ins;

/* A thread-block set: the connection endpoints (per rank and channel:
 * send to p, receive from p, local) that one thread block will own. */
typedef struct setinfo {
  int send, recv, ch;           /* peers (-1 none) and channel */
  int fixed, fixed_line;        /* tb index the script asked for (-1 none) and where */
  int compute;                  /* the compute endpoint: its set joins no other */
} setinfo;

typedef struct lower {
  const cc_trace *t;
  rt_diag *diag;
  ins *v;
  int n, cap;
  int *parent;                  /* union-find over connection endpoints */
  setinfo *info;                /* per endpoint; valid at roots */
  int nend;                     /* endpoints */
  int nch;                      /* channels in use */
  int errors;
  unsigned ticks;               /* calls of cc_late */
  int late;                     /* the deadline passed (reported once) */
  /* direct programs (cc_direct.h) */
  int landing_space;            /* the compiler's scratch space of landings, -1 none */
  int *landing;                 /* [rank]: landing chunks handed out */
  unsigned char *straight;      /* [trace op]: an LL copy that may put straight into its scratch destination */
} lower;

/* Orders the rounds (cc_round.c): on each rank, every instruction of a
 * round gets as predecessors the instructions of the rank's latest
 * earlier round that has any.  0 when out of memory; past
 * CC_MAX_ROUND_WAITS waits in all, or past the deadline, an error counted
 * in w. */
#define CC_MAX_ROUND_WAITS (1 << 24)
int cc_order_rounds(lower *w);

/* Appends an instruction (no predecessors, no patterns, peer -1) and
 * returns its index, or -1 (out of memory, too many instructions, past
 * the deadline; the error is counted in w).  May move w->v. */
int cc_emit(lower *w, int rank, int op, int ss, int si, int ds, int di, int count, int send, int recv, int ch,
            int fixtb, int inst, int line);

/* Makes instruction p a predecessor of i (once).  0 when out of memory. */
int cc_add_pred(ins *i, int p);

/* Whether p is already one of i's predecessors. */
int cc_has_pred(const ins *i, int p);

/* Appends x to a growable int array; 0 when out of memory. */
int cc_int_push(int **a, int *n, int *cap, int x);

/* 1 when the compile's deadline (BATON_COMPILE_TIMEOUT) has passed, checked
 * every so many calls; the first time, the error is counted in w. */
int cc_late(lower *w);

/* Adds "script:line: message" (line 0: "script: message") to the
 * diagnostics and counts an error. */
void cc_err(lower *w, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Endpoint ids: per rank and channel, send-to-peer p is 2p, recv-from-p
 * 2p+1; the local (cpy/re) thread block of a channel is 2n, the compute
 * thread block (compute steps that send nothing) 2n+1. */
int cc_endpoint(const lower *w, int rank, int ch, int e);
/* The endpoint of i's send (which 0) or receive (1) side, or -1. */
int cc_endpoint_of(const lower *w, const ins *i, int which);
/* The endpoint that decides i's thread block: send, else receive, else
 * compute (a compute step), else local. */
int cc_home(const lower *w, const ins *i);
int cc_find(int *parent, int x);

/* Creates one set per endpoint.  0 when out of memory. */
int cc_sets_init(lower *w);

/* Joins the sets of endpoints a and b when one thread block can own both:
 * at most one send peer, one receive peer, one channel and one placement.
 * Returns 1 when joined (or already one), 0 when they are incompatible. */
int cc_sets_join(lower *w, int a, int b);

/* placement = "paired": on every rank and channel, joins the set that
 * sends to a peer with the set that receives from it where one thread
 * block can own both (cc_sets_join; fusion or sendtb/recvtb may already
 * have given one of them another peer, and then they stay apart).  Any
 * grouping is deadlock-free: a thread block runs its steps in the
 * schedule's global order, a run of the whole program on CC_LOWER_SLOTS
 * slots in which every wait points backwards (cc_sched.c), so the
 * program order a shared thread block adds points backwards too. */
void cc_pair_peers(lower *w);

/* Honours sendtb/recvtb: each placed instruction's set is pinned to that
 * thread-block index; sets pinned to the same index of a rank are joined.
 * Conflicts (one connection pinned to two indices, two send peers in one
 * tb, an index at or above max_tbs) are errors naming the script lines.
 * Returns 0 when out of memory (errors are counted in w->errors). */
int cc_place_fixed(lower *w, int instances, int max_tbs);

/* Numbers the thread blocks of each rank: instance j's sets take indices
 * [base_j, base_j + count_j); a pinned set takes base_j + its index, the
 * others the lowest free index, in the order of their first instruction in
 * `order`.  Adds the tbs to p (peers, channel) and sets ins.tb.  Errors:
 * a pinned index that leaves a gap, more than max_tbs per rank.  Returns 0
 * when out of memory. */
int cc_number_tbs(lower *w, const int *order, int live, int instances, int max_tbs, ir_prog *p);

/* Orders the live instructions of w into one global order (cc_sched.c): a
 * run of the whole program on FIFOs of `slots` slots per connection, by
 * depth; fills order[] and *slots_run (the fewest slots the order is a run
 * on, at most `slots` unless the run had to go on with more) and returns
 * the count, 0 on error (reported in w). */
int cc_schedule(lower *w, int *order, int slots, int *slots_run);

#endif
