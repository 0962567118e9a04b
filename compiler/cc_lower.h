/* cc_lower.h -- lowering, fusion, thread-block assignment, scheduling and
 * synchronization: traced chunk operations -> IR program. */
#ifndef CC_LOWER_H
#define CC_LOWER_H

#include "cc.h"

/* The FIFO slots per connection the scheduler orders every program for:
 * the least with which a ring whose ranks all send first and then
 * receive and forward at once (rcs, rrs, rrcs) can go round (with one
 * slot, each rank's forwarder waits for the next rank's to empty the slot
 * it fills, all round).  The runtime allows BATON_EXEC_SLOTS=1: a program
 * is safe there only where slots_needed (below) says 1. */
#define CC_LOWER_SLOTS 2

/* Thread blocks one rank's program may have by default: the runtime runs
 * each in a CUDA block, all resident at once, one per SM on the GPU with
 * the fewest SMs baton targets (an A100's 108). */
#define CC_MAX_TBS 108

typedef struct cc_lower_opts {
  int fuse;          /* 1: form rcs, rrcs, rrs (default) */
  int max_tbs;       /* thread blocks per rank the GPU can co-schedule; 0: CC_MAX_TBS */
  int *slots_needed; /* non-NULL: set to the fewest FIFO slots per connection the
                      * schedule is a run on, so deadlock-free with: 1 or
                      * CC_LOWER_SLOTS, more where the scheduler finds no order
                      * for those (sendtb/recvtb or dependencies may leave none) */
} cc_lower_opts;

/* Builds the IR for trace t.  Each copy between ranks becomes a send and a
 * receive, each remote reduce a send and an rrc, local ones cpy / re;
 * receive-then-forward chains fuse into rcs / rrcs / rrs; thread blocks
 * own one send and one receive connection at most; steps are ordered by a
 * global topological order that keeps every connection's messages in
 * FIFO order and is itself a run of the program on CC_LOWER_SLOTS slots
 * per connection (so the program cannot deadlock with that many: every
 * wait, message and full slot points forward in it); cross-thread-block
 * dependencies (with nop steps where a step waits on several) are
 * inserted only where program order does not already imply them.  Problems name the script line. */
bt_result cc_lower(const cc_trace *t, const cc_lower_opts *o, ir_prog **out, rt_diag *diag);

#endif
