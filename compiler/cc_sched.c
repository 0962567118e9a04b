/* cc_sched.c -- scheduling: one global order of every rank's instructions,
 * a run of the whole program on FIFOs of bounded slots in which every wait
 * points backwards, so the thread blocks that run their steps in this
 * order cannot deadlock (cc_lower.c places and numbers them after). */
#include "cc_ins.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Binary heap of instruction ids by (depth, id); a ready sig first (a
 * direct program signals as soon as what it signals is done). */
typedef struct heap { int *a, n; const ins *v; } heap;
static int before(const heap *h, int x, int y) {
  int sx = h->v[x].op == IR_OP_SIG, sy = h->v[y].op == IR_OP_SIG;
  if (sx != sy) return sx;
  return h->v[x].depth != h->v[y].depth ? h->v[x].depth < h->v[y].depth : x < y;
}
static void heap_push(heap *h, int x) {
  int i = h->n++;
  while (i && before(h, x, h->a[(i - 1) / 2])) { h->a[i] = h->a[(i - 1) / 2]; i = (i - 1) / 2; }
  h->a[i] = x;
}
static int heap_pop(heap *h) {
  int top = h->a[0], x = h->a[--h->n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(h, h->a[c + 1], h->a[c])) c++;
    if (!before(h, h->a[c], x)) break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n) h->a[i] = x;
  return top;
}

/* Dense ids for connections (sender rank, receiver rank, channel). */
static int conn_id(lower *w, int a, int b, int ch, long *keys, int nslots, int *next) {
  long key = ((long)a * w->t->nranks + b) * 64 + ch;
  unsigned long h = (unsigned long)key * 0x9E3779B97F4A7C15UL;
  for (int i = (int)(h % nslots);; i = (i + 1) % nslots) {
    if (keys[2 * i] == key) return (int)keys[2 * i + 1];
    if (keys[2 * i] < 0) { keys[2 * i] = key; keys[2 * i + 1] = (*next)++; return (int)keys[2 * i + 1]; }
  }
}

/* The list scheduler's state.  The global order it builds is a run of the
 * whole program, one step at a time, on FIFOs of `slots` slots: every send
 * finds a free slot, every receive its message at the head of its FIFO.
 * Each thread block's program is that order restricted to it, so program
 * order, dependencies, messages and full slots (the k-th receive of a
 * connection before its (k+slots)-th send) all point forward in it: the
 * step graph ir_check searches has no cycle, and the program cannot
 * deadlock with `slots` slots per connection, on any tile (docs/IR.md,
 * Messages and slots). */
typedef struct sched {
  lower *w;
  heap ready;                   /* steps whose waits are done, by (depth, id) */
  int *rconn, *sconn;           /* per step: connection of its receive / send side, -1 */
  int *seq;                     /* per step: the sequence number of its send on sconn */
  int *next;                    /* per step: the next in its waiting list */
  int nconn;
  int *sent, *recvd;            /* per connection: messages sent, received so far */
  int *turn_head, *slot_head;   /* per connection: receives waiting for their turn; sends for a slot */
  int nturn, nslot;             /* steps on those lists */
  int slots;                    /* the slots per connection the order keeps to */
  int need;                     /* the most messages in flight on a connection with the order's
                                 * sends, counting the send's own: the slots it is a run on */
} sched;

static void sched_free(sched *s) {
  cc_free(s->ready.a); cc_free(s->rconn); cc_free(s->sconn); cc_free(s->seq); cc_free(s->next);
  cc_free(s->sent); cc_free(s->recvd); cc_free(s->turn_head); cc_free(s->slot_head);
}

/* Gives every live step its connections and s its arrays.  0 when out of memory. */
static int sched_init(sched *s, lower *w, int slots) {
  int n = w->n, nkeys = 2 * n + 1;
  memset(s, 0, sizeof *s);
  s->w = w;
  s->slots = slots;
  s->need = 1;
  s->ready = (heap){cc_malloc((n + 1) * sizeof(int)), 0, w->v};
  s->rconn = cc_malloc((n + 1) * sizeof(int));
  s->sconn = cc_malloc((n + 1) * sizeof(int));
  s->seq = cc_calloc(n + 1, sizeof(int));
  s->next = cc_malloc((n + 1) * sizeof(int));
  long *keys = cc_malloc(2 * (size_t)nkeys * sizeof(long));
  if (!s->ready.a || !s->rconn || !s->sconn || !s->seq || !s->next || !keys) { cc_free(keys); return 0; }
  for (int i = 0; i < 2 * nkeys; i += 2) keys[i] = -1;
  for (int i = 0; i < n; i++) {
    const ins *I = &w->v[i];
    s->rconn[i] = s->sconn[i] = -1;
    if (I->dead) continue;
    if (I->send >= 0) s->sconn[i] = conn_id(w, I->rank, I->send, I->ch, keys, nkeys, &s->nconn);
    if (I->recv >= 0) s->rconn[i] = conn_id(w, I->recv, I->rank, I->ch, keys, nkeys, &s->nconn);
  }
  cc_free(keys);
  s->sent = cc_calloc(s->nconn + 1, sizeof(int));
  s->recvd = cc_calloc(s->nconn + 1, sizeof(int));
  s->turn_head = cc_malloc((s->nconn + 1) * sizeof(int));
  s->slot_head = cc_malloc((s->nconn + 1) * sizeof(int));
  if (!s->sent || !s->recvd || !s->turn_head || !s->slot_head) return 0;
  for (int c = 0; c < s->nconn; c++) s->turn_head[c] = s->slot_head[c] = -1;
  return 1;
}

/* Whether step b, its waits done, must wait on a list before it runs: a
 * receive until its message is at the head of its FIFO, a send until its
 * connection has a free slot.  A send that receives nothing leaves one
 * slot free, for the steps that receive and send at once (rcs, rrs, rrcs):
 * each of those frees a slot on one connection as it takes one on the
 * next, so a ring of them with a free slot somewhere can always move on,
 * while plain sends that fill every slot of a ring first leave its
 * forwarders nowhere to go (a ring that moves several messages per hop,
 * one per block or piece of an operation split by the layout, or one per
 * operation).  Puts b on its list and returns 1. */
static int sched_hold(sched *s, int b) {
  const ins *B = &s->w->v[b];
  int rc = s->rconn[b], sc = s->sconn[b];
  if (B->recv >= 0 && s->seq[B->msg_of] != s->recvd[rc]) {
    s->next[b] = s->turn_head[rc];
    s->turn_head[rc] = b;
    s->nturn++;
    return 1;
  }
  if (B->send >= 0 && s->sent[sc] - s->recvd[sc] >= s->slots - (B->recv < 0)) {
    s->next[b] = s->slot_head[sc];
    s->slot_head[sc] = b;
    s->nslot++;
    return 1;
  }
  return 0;
}

/* Puts the sends connection c holds for a slot back on the ready heap. */
static void wake_sends(sched *s, int c) {
  for (int i = s->slot_head[c]; i >= 0; i = s->next[i]) {
    heap_push(&s->ready, i);
    s->nslot--;
  }
  s->slot_head[c] = -1;
}

/* Runs step b: its send takes the next sequence number of its connection
 * (s->need grows to the messages then in flight), its receive the message
 * at the head of its FIFO; the receive now next on that connection, and
 * the sends it held for the slot just freed, become ready. */
static void sched_run(sched *s, int b) {
  const ins *B = &s->w->v[b];
  if (B->send >= 0) {
    int sc = s->sconn[b], fill = s->sent[sc] - s->recvd[sc] + 1;
    if (fill > s->need) s->need = fill;
    s->seq[b] = s->sent[sc]++;
  }
  if (B->recv < 0) return;
  int c = s->rconn[b];
  s->recvd[c]++;
  for (int *p = &s->turn_head[c]; *p >= 0; p = &s->next[*p])
    if (s->seq[s->w->v[*p].msg_of] == s->recvd[c]) {
      int i = *p;
      *p = s->next[i];
      s->nturn--;
      heap_push(&s->ready, i);
      break;
    }
  wake_sends(s, c);
}

/* Nothing is ready but sends held for a slot: the order goes on with one
 * slot more per connection, and they are ready again.  0 when none is
 * held (the schedule is stuck). */
static int sched_relax(sched *s) {
  if (!s->nslot) return 0;
  s->slots++;
  for (int c = 0; c < s->nconn; c++) wake_sends(s, c);
  return 1;
}

/* The error for a schedule that cannot go on: a receive whose turn never
 * comes, or a cycle. */
static void stuck(lower *w, const sched *s) {
  for (int c = 0; s->nturn && c < s->nconn; c++) {
    int i = s->turn_head[c];
    if (i < 0) continue;
    const ins *I = &w->v[i];
    cc_err(w, I->line, "cannot keep the messages from rank %d to rank %d on channel %d in order: this receive waits for an earlier message that depends on it; move one of them to another channel (ch=)",
           I->recv, I->rank, I->ch);
    return;
  }
  if (!w->errors) cc_err(w, 0, "the chunk operations have a dependency cycle");
}

/* Fills each instruction's depth, the priority: the longest run of waits
 * before it, in topological order (no pass may rely on waits pointing to
 * earlier ids).  queue and left are scratch of n entries. */
static void set_depths(lower *w, const int *succ_off, const int *succ, const int *indeg, int *queue, int *left) {
  int qh = 0, qt = 0, n = w->n;
  for (int i = 0; i < n; i++) {
    left[i] = indeg[i];
    if (!w->v[i].dead && !indeg[i]) queue[qt++] = i;
  }
  while (qh < qt) {
    int b = queue[qh++];
    for (int e = succ_off[b]; e < succ_off[b + 1]; e++) {
      ins *S = &w->v[succ[e]];
      if (w->v[b].depth + 1 > S->depth) S->depth = w->v[b].depth + 1;
      if (--left[succ[e]] == 0) queue[qt++] = succ[e];
    }
  }
}

/* Kahn's algorithm with priority (depth, id), run as the program itself
 * would run on FIFOs of `slots` slots per connection (see sched): a ready
 * receive waits until every earlier message of its connection has been
 * received, a ready send until its connection has a free slot (see
 * sched_hold).  When only sends waiting for a slot are left, the run goes
 * on with a slot more (this greedy run found no order for `slots`: a
 * placement or dependencies may leave none).  Fills order[] and *slots_run (the fewest slots the order is
 * a run on: the program is deadlock-free with that many, at most `slots`
 * unless the run had to go on with more) and returns the count, 0 on
 * error. */
int cc_schedule(lower *w, int *order, int slots, int *slots_run) {
  int n = w->n, done = 0, live = 0, ok = 0;
  int *indeg = cc_calloc(n + 1, sizeof(int)), *succ_off = cc_calloc(n + 2, sizeof(int));
  int *succ = NULL, *fillp = NULL;
  sched s;
  if (!sched_init(&s, w, slots) || !indeg || !succ_off) goto out;
  long m = 0;
  for (int i = 0; i < n; i++) {
    ins *I = &w->v[i];
    if (I->dead) continue;
    live++;
    for (int k = 0; k < I->npred; k++) { succ_off[I->pred[k] + 1]++; m++; }
    I->depth = 0;
  }
  for (int i = 0; i < n; i++) succ_off[i + 1] += succ_off[i];
  succ = cc_malloc((m + 1) * sizeof(int));
  fillp = cc_calloc(n + 1, sizeof(int));
  if (!succ || !fillp) goto out;
  for (int i = 0; i < n; i++) {
    if (w->v[i].dead) continue;
    for (int k = 0; k < w->v[i].npred; k++) {
      int p = w->v[i].pred[k];
      succ[succ_off[p] + fillp[p]++] = i;
      indeg[i]++;
    }
  }
  set_depths(w, succ_off, succ, indeg, order, fillp);
  for (int i = 0; i < n; i++) if (!w->v[i].dead && !indeg[i]) heap_push(&s.ready, i);
  while (done < live) {
    if (cc_late(w)) goto out;
    if (!s.ready.n && !sched_relax(&s)) { stuck(w, &s); goto out; }
    int b = heap_pop(&s.ready);
    if (sched_hold(&s, b)) continue;
    order[done++] = b;
    sched_run(&s, b);
    for (int e = succ_off[b]; e < succ_off[b + 1]; e++)
      if (--indeg[succ[e]] == 0) heap_push(&s.ready, succ[e]);
  }
  ok = done;
  *slots_run = s.need;
out:
  cc_free(indeg); cc_free(succ_off); cc_free(succ); cc_free(fillp);
  sched_free(&s);
  return ok;
}
