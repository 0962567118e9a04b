/* cc_lower.h -- lowering, fusion, thread-block assignment, scheduling and
 * synchronization: traced chunk operations -> IR program. */
#ifndef CC_LOWER_H
#define CC_LOWER_H

#include "cc.h"

typedef struct cc_lower_opts {
  int fuse;          /* 1: form rcs, rrcs, rrs (default) */
  int max_tbs;       /* thread blocks per rank the GPU can co-schedule; 0: 108 */
} cc_lower_opts;

/* Builds the IR for trace t.  Each copy between ranks becomes a send and a
 * receive, each remote reduce a send and an rrc, local ones cpy / re;
 * receive-then-forward chains fuse into rcs / rrcs / rrs; thread blocks
 * own one send and one receive connection at most; steps are ordered by a
 * global topological order that keeps every connection's messages in
 * FIFO order; cross-thread-block dependencies (with nop steps where a step
 * waits on several) are inserted only where program order does not
 * already imply them.  Problems name the script line. */
bt_result cc_lower(const cc_trace *t, const cc_lower_opts *o, ir_prog **out, rt_diag *diag);

#endif
