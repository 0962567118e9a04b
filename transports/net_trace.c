/* net_trace.c -- the network proxy's timeline (net_trace.h): a ring of the
 * latest events, written as CSV when the transport is freed. */
#include "net_trace.h"

#include <stdio.h>
#include <stdlib.h>

#include "rt_log.h"
#include "rt_param.h"

enum { EV_ROUND, EV_IDLE, EV_NAP };
static const char *const ev_name[] = {"round", "idle", "nap"};

typedef struct net_event {
  int64_t at, dur;             /* ns from the timeline's start */
  uint64_t sent, received;     /* payload bytes in the event */
  int32_t a, b, c;             /* round: posted, credits, progress; idle: rounds; nap: timeout (us) */
  uint8_t kind;
} net_event;

struct net_trace {
  int rank, nranks;
  int64_t start;               /* the first event's time */
  uint64_t n;                  /* events recorded in all (the ring keeps the last NET_TRACE_EVENTS) */
  int64_t idle_from, idle_to;  /* the open run of idle rounds, when idle_rounds > 0 */
  int32_t idle_rounds;
  net_event ev[];
};

net_trace *net_trace_new(int rank, int nranks) {
  if (!*rt_param_str(RT_PARAM_TRACE)) return NULL;
  net_trace *t = calloc(1, sizeof *t + (size_t)NET_TRACE_EVENTS * sizeof(net_event));
  if (!t) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: BATON_TRACE: no memory for the proxy's timeline: not traced", rank);
    return NULL;
  }
  t->rank = rank;
  t->nranks = nranks;
  t->start = -1;
  return t;
}

static net_event *add(net_trace *t, int kind, int64_t t0, int64_t t1) {
  if (t->start < 0) t->start = t0;
  net_event *e = &t->ev[t->n++ % NET_TRACE_EVENTS];
  *e = (net_event){.at = t0 - t->start, .dur = t1 - t0, .kind = (uint8_t)kind};
  return e;
}

/* Closes the open run of idle rounds as one event. */
static void close_idle(net_trace *t) {
  if (!t->idle_rounds) return;
  add(t, EV_IDLE, t->idle_from, t->idle_to)->a = t->idle_rounds;
  t->idle_rounds = 0;
}

void net_trace_round(net_trace *t, int64_t t0, int64_t t1, const net_round *r, uint64_t sent, uint64_t received) {
  if (!t) return;
  if (!r->posted && !r->credits && !r->progress) {
    if (!t->idle_rounds++) t->idle_from = t0;
    t->idle_to = t1;
    return;
  }
  close_idle(t);
  net_event *e = add(t, EV_ROUND, t0, t1);
  e->a = r->posted;
  e->b = r->credits;
  e->c = r->progress;
  e->sent = sent;
  e->received = received;
}

void net_trace_nap(net_trace *t, int64_t t0, int64_t t1, int64_t timeout_ns) {
  if (!t) return;
  close_idle(t);
  add(t, EV_NAP, t0, t1)->a = (int32_t)(timeout_ns / 1000);
}

void net_trace_finish(net_trace *t) {
  if (!t) return;
  close_idle(t);
  if (!t->n) {   /* a proxy that never ran (set-up failed): no file */
    free(t);
    return;
  }
  char path[1200];
  if (rt_param_trace_file(path, sizeof path, t->nranks, t->rank, ".net.csv")) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: BATON_TRACE: the file name is longer than %zu bytes: not written",
             t->rank, sizeof path);
    free(t);
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: BATON_TRACE: cannot write %s", t->rank, path);
    free(t);
    return;
  }
  fprintf(f, "rank,event,at_ns,dur_ns,posted,credits,progress,rounds,timeout_us,sent,received\n");
  uint64_t first = t->n > NET_TRACE_EVENTS ? t->n - NET_TRACE_EVENTS : 0;
  for (uint64_t i = first; i < t->n; i++) {
    const net_event *e = &t->ev[i % NET_TRACE_EVENTS];
    int round = e->kind == EV_ROUND;
    fprintf(f, "%d,%s,%lld,%lld,%d,%d,%d,%d,%d,%llu,%llu\n", t->rank, ev_name[e->kind], (long long)e->at,
            (long long)e->dur, round ? e->a : 0, round ? e->b : 0, round ? e->c : 0, e->kind == EV_IDLE ? e->a : 0,
            e->kind == EV_NAP ? e->a : 0, (unsigned long long)e->sent, (unsigned long long)e->received);
  }
  if (fclose(f)) LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: BATON_TRACE: cannot write %s", t->rank, path);
  else if (first) LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: BATON_TRACE: the proxy's last %d events of %llu in %s",
                           t->rank, NET_TRACE_EVENTS, (unsigned long long)t->n, path);
  free(t);
}
