/* ir_direct.h -- direct programs (put, get, getr, xchg, sig, wait): their signal streams and LL landings, shared by
 * the validator, the step graph, the race check and the CPU executor (docs/IR.md, "Direct steps"). */
#ifndef IR_DIRECT_H
#define IR_DIRECT_H

#include <stdint.h>

#include "ir.h"

/* Whether side k (0 the source, 1 the destination) of a step with opcode flags fl reads memory of the step's
 * own rank: a local source (IR_F_SRC), or the destination of a reduction into it (re, getr: dst = dst (op)
 * ...; a receive that reduces writes its destination without reading it). */
static inline int ir_side_reads_local(unsigned fl, int k) {
  return k ? (fl & IR_F_DST) && (fl & IR_F_RED) && !(fl & IR_F_RECV) : (fl & IR_F_SRC) != 0;
}

/* Whether side k of a step with opcode flags fl is read, then written: a reduction's destination (re, getr,
 * rrc, rrcs write it from what they read of it, or from a message), either side of an exchange (xchg). */
static inline int ir_side_rmw(unsigned fl, int k) {
  return (fl & IR_F_SWAP) || (k && ir_side_reads_local(fl, 1));
}

/* The rank whose memory side k of step st of rank r addresses: the peer's for a put's destination and a
 * get's or getr's source, r's for a local source or destination; -1 when that side touches no memory (a
 * send's destination is its receiver's business, a compute step's source is computed). */
static inline int ir_side_rank(const ir_step *st, int r, int k) {
  unsigned fl = ir_op_flags[st->op];
  if (k) return (fl & IR_F_PUT) ? st->peer : (fl & IR_F_DST) ? r : -1;
  return (fl & IR_F_GET) ? st->peer : (fl & IR_F_SRC) ? r : -1;
}

/* Whether step st of rank r names a peer that is another rank of p (what the validator requires of a direct
 * step); the helpers below skip the others. */
static inline int ir_peer_ok(const ir_prog *p, int r, const ir_step *st) {
  return st->peer >= 0 && st->peer < p->ngpus && st->peer != r;
}

/* A sig or wait step of a signal stream, the signals from rank `from` to rank `to` on channel `chan`: rank
 * r's (from for a sig, to for a wait) tb t step s; cnt the signals it sends (1) or takes. */
typedef struct ir_sigstep { int from, to, chan, r, t, s, cnt; } ir_sigstep;

/* Orders sig/wait steps by stream (from, to, chan) only. */
int ir_stream_cmp(const ir_sigstep *a, const ir_sigstep *b);

/* Every sig (*sigs, *nsigs) and every wait (*waits, *nwaits) of p with a valid peer, each list sorted by
 * stream, then thread block and step: a stream's steps in program order when they are in one thread block,
 * as ir_check requires.  BT_ERR_NOMEM or BT_OK; the caller frees both lists (NULL when empty is not
 * promised: free them anyway). */
bt_result ir_direct_streams(const ir_prog *p, ir_sigstep **sigs, long *nsigs, ir_sigstep **waits, long *nwaits);

/* A landing (LL direct programs): chunks [lo, hi) of rank `owner`'s scratch that rank r's tb t step s, a
 * put, stores into; a strided put has one per run of its destination. */
typedef struct ir_landing { int owner, r, t, s; int64_t lo, hi; } ir_landing;

/* The landings of p: every put with a valid peer whose destination is scratch, sorted by (owner, lo).
 * BT_ERR_NOMEM or BT_OK; the caller frees *out. */
bt_result ir_direct_landings(const ir_prog *p, ir_landing **out, long *n);

/* Calls f(u, r, q, t, s) for each time rank r of p sees rank q begin the call: r's tb t step s waits for a
 * signal of q's, or reads (ir_side_reads_local) scratch chunks that are the landing of a put of q's (lv[0..nl):
 * p's landings, ir_direct_landings; none where p is Simple).  Either way r's call ends only after q's has
 * begun.  A step that reads several of one peer's landings calls f for each.  Stops at the first
 * nonzero value f returns, and returns it; 0 otherwise. */
int ir_direct_sightings(const ir_prog *p, const ir_landing *lv, long nl, int (*f)(void *u, int r, int q, int t, int s),
                        void *u);

/* The first of the n sorted landings v that overlaps chunks [lo, hi) of rank owner's scratch, or n.  The
 * others follow it: v[j] for j > i while v[j].owner == owner and v[j].lo < hi (landings do not overlap
 * where ir_check passed, so each ends before the next begins). */
long ir_landing_first(const ir_landing *v, long n, int owner, int64_t lo, int64_t hi);

#endif
