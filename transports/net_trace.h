/* net_trace.h -- the network proxy's timeline: with BATON_TRACE=PREFIX
 * each rank's proxy keeps its last NET_TRACE_EVENTS events (rounds that
 * moved something, runs of idle rounds, naps) and writes them to
 * PREFIX.RANK.net.csv when the transport is freed; tools/measure/trace_summary.py
 * reads them (where a large message's time goes: posting, the backend's
 * progress, spinning, sleeping). */
#ifndef NET_TRACE_H
#define NET_TRACE_H

#include <stdint.h>

#include "rt_result.h"

/* Events a proxy keeps (the latest; older ones are overwritten). */
#define NET_TRACE_EVENTS (1 << 16)

/* What one round of the proxy did. */
typedef struct net_round {
  int posted;                  /* pieces handed to the backend */
  int credits;                 /* credits sent back */
  int progress;                /* what the backend's progress moved */
} net_round;

typedef struct net_trace net_trace;

/* A timeline for `rank`'s proxy (of a communicator of nranks ranks: its
 * file's name, rt_param_trace_file), or NULL when BATON_TRACE is empty
 * (or memory is short: logged; the transport runs untraced). */
net_trace *net_trace_new(int rank, int nranks);

/* Records a round from t0 to t1 (ns) that moved something, with the
 * payload bytes sent and received meanwhile; a round that moved nothing
 * is counted into the current idle run instead. */
void net_trace_round(net_trace *t, int64_t t0, int64_t t1, const net_round *r, uint64_t sent, uint64_t received);

/* Records a nap of at most timeout_ns from t0 to t1. */
void net_trace_nap(net_trace *t, int64_t t0, int64_t t1, int64_t timeout_ns);

/* Writes the timeline to PREFIX.RANK.net.csv (BATON_TRACE) and frees it;
 * nothing for NULL.  A file that cannot be written is logged, not fatal. */
void net_trace_finish(net_trace *t);

#endif
