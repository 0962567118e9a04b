/* rt_direct.c -- a direct program's thread blocks on one rank, turned into
 * the direct executor's operations: runs, signal groups, wait groups. */
#include "rt_direct.h"

#include <stdlib.h>
#include <string.h>

#include "ir_direct.h"
#include "ir_geom.h"
#include "rt_log.h"

_Static_assert(sizeof(ip_dtab) % 16 == 0, "ip_dtab is copied in 16-byte units");
_Static_assert(IP_DIRECT_MAX_LINKS <= 64, "an operation's links are bits of ip_dop.puts");
_Static_assert(IP_WIN_MAX_RANKS <= 32, "a plan's peers are bits of a 32-bit mask");

/* Where a run's value is, or where a link reads or writes: a rank's
 * buffer and a pattern of `cnt` chunks (the run's). */
typedef struct loc { int rank, buf; int32_t off, run, stride; } loc;

static int loc_eq(loc a, loc b) {
  return a.rank == b.rank && a.buf == b.buf && a.off == b.off && a.run == b.run && (!a.run || a.stride == b.stride);
}

/* Whether a and b (cnt chunks each) may share memory: one rank, and one
 * buffer with overlapping extents; in an in-place program (`inplace`: a
 * call lays its input and output over each other) any input/output pair
 * too.  An out-of-place direct program runs in place only on a copy of
 * its input in the window (rt_direct_usable), so its input and output
 * never overlap. */
static int loc_may_alias(loc a, loc b, int cnt, int inplace) {
  if (a.rank != b.rank) return 0;
  int as = a.buf == IR_BUF_SCRATCH, bs = b.buf == IR_BUF_SCRATCH;
  if (as != bs) return 0;
  if (!as && a.buf != b.buf) return inplace;
  int64_t alo, ahi, blo, bhi;
  ir_pattern_extent(a.off, a.run, a.stride, cnt, &alo, &ahi);
  ir_pattern_extent(b.off, b.run, b.stride, cnt, &blo, &bhi);
  return alo <= bhi && blo <= ahi;
}

/* The builder: the plan being filled and the run being built. */
typedef struct builder {
  rt_dplan *d;
  const ir_prog *p;
  int rank, ll, bad;
  int root_copy;          /* the root-copy variant: each run of the input's value also stores it into the output */
  int staged;             /* the staged variant: an AllToAll's copies of its own blocks left out (rt_dplan.skip_in) */
  int inplace;            /* the input and output may overlap: an in-place program, but for its root-copy
                             variant (the caller's input and output are apart) */
  const char *why;
  /* the open run: its op (-1 none), phase (0: storing the first value,
   * 1: reducing into acc, 2: storing the result), the places the value is
   * also in (clean copies), the chunk range being reduced into */
  int op, phase, dirty;
  loc locs[8];
  int nlocs;
  loc acc;
  int tb;
  /* Signals met while a run is open wait for its end (put, sig, put,
   * sig ... becomes one run, then one group of signals: a signal after a
   * later store of the same run still follows what it covers, and nothing
   * in a run waits). */
  ip_dsync pending[IP_DIRECT_MAX_SYNCS];
  int npending;
} builder;

static loc src_loc(const builder *b, const ir_step *st) {
  int r = (ir_op_flags[st->op] & IR_F_GET) ? st->peer : b->rank;
  return (loc){r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride};
}
static loc dst_loc(const builder *b, const ir_step *st) {
  int r = (ir_op_flags[st->op] & IR_F_PUT) ? st->peer : b->rank;
  return (loc){r, st->dstbuf, st->dstoff, st->dstrun, st->dststride};
}

/* Appends a link of kind k at l to the open run (its op's n grows). */
static void add_link(builder *b, int kind, loc l, int step) {
  rt_dplan *d = b->d;
  if (d->nlinks >= IP_DIRECT_MAX_LINKS) {
    b->bad = 1;
    b->why = "more run links than the executor holds";
    return;
  }
  ip_dlink *k = &d->tab.links[d->nlinks++];
  memset(k, 0, sizeof *k);
  k->kind = (uint8_t)kind;
  k->buf = (uint8_t)l.buf;
  k->peer = (int16_t)(l.rank == b->rank ? -1 : l.rank);
  k->at = (uint8_t)(l.rank != b->rank ? IP_AT_PEER
                    : b->ll && l.buf == IR_BUF_SCRATCH && (kind == IP_L_LOAD || kind == IP_L_COMBINE) ? IP_AT_LANDING
                    : IP_AT_LOCAL);
  k->step = (int16_t)step;
  k->off = l.off;
  k->run = l.run;
  k->stride = l.stride;
  d->tab.ops[b->op].n++;
}

static int new_op(builder *b, int kind) {
  rt_dplan *d = b->d;
  if (d->nops >= IP_DIRECT_MAX_OPS) {
    b->bad = 1;
    b->why = "more operations than the executor holds";
    return -1;
  }
  ip_dop *o = &d->tab.ops[d->nops];
  memset(o, 0, sizeof *o);
  o->kind = (uint8_t)kind;
  o->tb = (int16_t)b->tb;
  o->first = kind == IP_D_RUN ? d->nlinks : d->nsyncs;
  return d->nops++;
}

static loc link_loc(const builder *b, const ip_dlink *x) {
  return (loc){x->peer >= 0 ? x->peer : b->rank, x->buf, x->off, x->run, x->stride};
}

/* A run of one LOAD and its store of cnt chunks as cnt segments of one
 * chunk each (a segment per chunk: their loads at once),
 * when they fit a copies operation. */
static void split_chunks(builder *b, ip_dop *o) {
  rt_dplan *d = b->d;
  int n = o->n, cnt = o->cnt;
  if (cnt < 2 || cnt > IP_DIRECT_COPY_SEGS || d->nlinks - n + n * cnt > IP_DIRECT_MAX_LINKS) return;
  ip_dlink one[IP_DIRECT_MAX_LINKS];
  memcpy(one, &d->tab.links[o->first], (size_t)n * sizeof *one);
  d->nlinks = o->first;
  for (int j = 0; j < cnt; j++)
    for (int k = 0; k < n; k++) {
      ip_dlink x = one[k];
      x.off = (int32_t)ir_chunk_at(x.off, x.run, x.stride, j);
      x.run = x.stride = 0;
      d->tab.links[d->nlinks++] = x;
    }
  o->kind = IP_D_COPIES;
  o->nseg = (uint8_t)cnt;
  o->n = (uint8_t)(n * cnt);
  o->cnt = 1;
}

/* A run that only copies (a LOAD and one store) joins the copies operation
 * before it when the two share their chunk count and the run's load reads
 * nothing an earlier segment stores (loads go first); else it becomes one
 * (so the next may join it).  The open run is the last operation.  1 when
 * it joined the one before. */
static int join_copies(builder *b) {
  rt_dplan *d = b->d;
  ip_dop *o = &d->tab.ops[b->op];
  if (o->ncomb || o->n != 2) return 0;   /* a segment is one load and one store */
  o->kind = IP_D_COPIES;
  o->nseg = 1;
  split_chunks(b, o);
  if (b->op == 0 || b->op - 1 < d->tab.tb_first[b->tb]) return 0;
  ip_dop *p = &d->tab.ops[b->op - 1];
  if (p->kind != IP_D_COPIES || p->cnt != o->cnt || p->nseg + o->nseg > IP_DIRECT_COPY_SEGS || p->n + o->n > 255 ||
      p->first + p->n != o->first)
    return 0;
  for (int k = 0; k < o->n; k++) {   /* every load of the run against every store before it */
    const ip_dlink *l = &d->tab.links[o->first + k];
    if (l->kind != IP_L_LOAD) continue;
    for (int i = 0; i < p->n; i++) {
      const ip_dlink *x = &d->tab.links[p->first + i];
      if (x->kind != IP_L_LOAD && loc_may_alias(link_loc(b, x), link_loc(b, l), o->cnt, b->inplace)) return 0;
    }
  }
  p->n = (uint8_t)(p->n + o->n);
  p->nseg = (uint8_t)(p->nseg + o->nseg);
  d->nops--;
  b->op = -1;
  return 1;
}

static void add_sync(builder *b, int kind, ip_dsync e);
static void open_run(builder *b, loc l, int cnt, int step);
static void store(builder *b, int kind, loc l, int step);

/* The signals held back (builder.pending), as a group after the last
 * operation. */
static void flush_signals(builder *b) {
  for (int i = 0; i < b->npending && !b->bad; i++) add_sync(b, IP_D_SIGS, b->pending[i]);
  b->npending = 0;
}

/* Appends signal or wait entry e to a group of its kind: the last
 * operation of the thread block when it is one, else a new one.  A signal
 * of a stream the group signals already raises that entry's count
 * instead: a group's signals are stored by threads of their own, in no
 * order, and a flag must never go back to a smaller count (a wait takes
 * the stream's count or more). */
static void add_sync(builder *b, int kind, ip_dsync e) {
  rt_dplan *d = b->d;
  int last = d->nops - 1;
  if (last < d->tab.tb_first[b->tb] || d->tab.ops[last].kind != kind) last = new_op(b, kind);
  if (b->bad) return;
  const ip_dop *g = &d->tab.ops[last];
  for (int i = 0; kind == IP_D_SIGS && i < g->n; i++) {
    ip_dsync *x = &d->tab.syncs[g->first + i];
    if (x->peer == e.peer && x->chan == e.chan) {
      if (e.at > x->at) x->at = e.at, x->step = e.step;
      return;
    }
  }
  if (d->nsyncs >= IP_DIRECT_MAX_SYNCS) {
    b->bad = 1;
    b->why = "more signals and waits than the executor holds";
    return;
  }
  d->tab.syncs[d->nsyncs++] = e;
  d->tab.ops[last].n++;
}

/* Ends the open run: a value reduced into acc and not yet stored is; a
 * run that only copies joins the copies before it (join_copies); the
 * signals it held back follow it, unless it is a copies operation (the
 * next copy may join it: an AllToAll's puts or a two-shot's, each followed
 * by its signal, become one copies operation, every load at once, then
 * the signals; data_step sends them first where the next run would delay
 * them). */
static void close_run(builder *b, int step) {
  if (b->op < 0) return;
  if (b->dirty) add_link(b, IP_L_STORE, b->acc, step);
  b->dirty = 0;
  /* The root-copy variant: a run that puts the input's value (unreduced)
   * stores it into the output too -- in the run where it has several
   * stores already, else as a copies segment of its own beside the put's
   * (a segment holds one store). */
  const ip_dop *o = &b->d->tab.ops[b->op];
  const ip_dlink *first = &b->d->tab.links[o->first];
  int copy = b->root_copy && !b->bad && !o->ncomb && first->at == IP_AT_LOCAL && first->buf == IR_BUF_INPUT;
  loc from = copy ? link_loc(b, first) : (loc){0};
  loc out = from;
  out.buf = IR_BUF_OUTPUT;
  const int cnt = o->cnt;
  if (copy && o->n > 2) {
    store(b, IP_L_STORE, out, step);
    copy = 0;
  }
  int joined = !b->bad && join_copies(b);
  int copies = !joined && !b->bad && b->d->tab.ops[b->op].kind == IP_D_COPIES;
  b->op = -1;
  if (copy) {
    open_run(b, from, cnt, step);
    if (!b->bad) store(b, IP_L_STORE, out, step);
    joined = !b->bad && join_copies(b);
    copies = !joined && !b->bad && b->d->tab.ops[b->op].kind == IP_D_COPIES;
    b->op = -1;
  }
  if (joined || copies) return;
  flush_signals(b);
}

/* Whether a signal held back goes to `rank`: a store there must not join
 * the copies before it, or that signal would wait for it too (a chain's
 * pieces to one peer keep their pipeline). */
static int pending_to(const builder *b, int rank) {
  for (int i = 0; i < b->npending; i++)
    if (b->pending[i].peer == rank) return 1;
  return 0;
}

/* Opens a run of cnt chunks whose value starts as l's. */
static void open_run(builder *b, loc l, int cnt, int step) {
  b->op = new_op(b, IP_D_RUN);
  if (b->op < 0) return;
  b->d->tab.ops[b->op].cnt = cnt;
  b->phase = 0;
  b->dirty = 0;
  b->nlocs = 0;
  add_link(b, IP_L_LOAD, l, step);
  if (l.rank == b->rank) b->locs[b->nlocs++] = l;
}

static int holds(const builder *b, loc l) {
  for (int i = 0; i < b->nlocs; i++)
    if (loc_eq(b->locs[i], l)) return 1;
  return 0;
}

/* Whether an operand at l may be memory the open run stored before it
 * (its loads come first, so it would read the old value). */
static int stored_before(const builder *b, loc l) {
  const ip_dop *o = &b->d->tab.ops[b->op];
  for (int k = 1; k < o->n; k++) {
    const ip_dlink *x = &b->d->tab.links[o->first + k];
    if ((x->kind == IP_L_STORE || x->kind == IP_L_PUT) && loc_may_alias(link_loc(b, x), l, o->cnt, b->inplace))
      return 1;
  }
  return 0;
}

/* A store of the run's value at l (cpy's destination, or a put's). */
static void store(builder *b, int kind, loc l, int step) {
  ip_dop *o = &b->d->tab.ops[b->op];
  if (b->phase == 1) {   /* the reduced value: its own place first */
    add_link(b, IP_L_STORE, b->acc, step);
    b->dirty = 0;
    b->phase = 2;
    b->locs[0] = b->acc;
    b->nlocs = 1;
  }
  add_link(b, kind, l, step);
  if (b->phase == 0) o->npre++;
  if (kind == IP_L_STORE && b->nlocs < 8) b->locs[b->nlocs++] = l;
}

/* dst (op)= the operand at l, dst being where the value is. */
static void combine(builder *b, loc dst, loc l, int step) {
  ip_dop *o = &b->d->tab.ops[b->op];
  if (b->phase == 0) {   /* the first reduction: a store of dst before it is the result's */
    const ip_dlink *last = o->n > 1 ? &b->d->tab.links[o->first + o->n - 1] : NULL;
    if (last && last->kind == IP_L_STORE && last->peer < 0 &&
        loc_eq((loc){b->rank, last->buf, last->off, last->run, last->stride}, dst)) {
      b->d->nlinks--;
      o->n--;
      o->npre--;
    }
    b->phase = 1;
    b->acc = dst;
    b->nlocs = 0;
  }
  add_link(b, IP_L_COMBINE, l, step);
  o->ncomb++;
  b->dirty = 1;
}

/* Whether the open run puts into a peer's buffer. */
static int run_puts(const builder *b) {
  const ip_dop *o = &b->d->tab.ops[b->op];
  for (int k = 0; k < o->n; k++)
    if (b->d->tab.links[o->first + k].kind == IP_L_PUT) return 1;
  return 0;
}

/* One data step (put, get, getr, cpy, re): joins the open run where the
 * run's value is what it reads and the run's shape allows, else closes it
 * and opens another. */
static void data_step(builder *b, const ir_step *st, int s) {
  const unsigned fl = ir_op_flags[st->op];
  const int cnt = st->cnt;
  const int reduces = (fl & IR_F_RED) != 0;
  loc dst = dst_loc(b, st), src = src_loc(b, st);
  if (b->ll && (fl & IR_F_DST) && st->dstbuf == IR_BUF_SCRATCH) {
    b->bad = 1;
    b->why = "an LL or LL128 program writes its own scratch (only puts land there)";
    return;
  }
  /* Whether the step reads this rank's landing (LL, LL128): a wait for a
   * peer's put.  A run walks its chunks one at a time, so one of several
   * chunks that puts and then reads a landing would wait, at its first
   * chunk, for a peer whose put there may wait for the run's later
   * chunks: such a read opens a run of its own. */
  const int lands = b->ll && src.rank == b->rank && src.buf == IR_BUF_SCRATCH;
  int joins = b->op >= 0 && b->d->tab.ops[b->op].cnt == cnt;
  if (joins && !reduces) {   /* cpy, put: from where the value is */
    joins = st->op != IR_OP_GET && (b->phase == 1 ? loc_eq(src, b->acc) : holds(b, src));
  } else if (joins) {        /* re, getr: into where the value is, an operand the run did not store */
    const ip_dop *o = &b->d->tab.ops[b->op];
    joins = b->phase != 2 && (b->phase == 1 ? loc_eq(dst, b->acc) : holds(b, dst)) &&
            o->ncomb + 1 < IP_DIRECT_RUN_LOADS && !stored_before(b, src) &&
            !(lands && cnt > 1 && run_puts(b));
  }
  if (!joins) {
    close_run(b, s);
    /* Signals held back go first unless a copy to another peer follows;
     * always before a read of a landing, which waits for a peer's put that
     * may wait for them. */
    if (b->npending && (reduces || st->op == IR_OP_GET || pending_to(b, dst.rank) || lands)) flush_signals(b);
    open_run(b, reduces ? dst : src, cnt, s);
    if (b->bad) return;
    if (st->op == IR_OP_GET) {
      store(b, IP_L_STORE, dst, s);
      return;
    }
  }
  if (reduces) combine(b, dst, src, s);
  else store(b, st->op == IR_OP_PUT ? IP_L_PUT : IP_L_STORE, dst, s);
}

/* An xchg: a copies operation of its own, every segment's load first (the
 * local chunks' value, put into the peer's chunks; the peer's value,
 * stored into the local chunks), so each side reads the other's old
 * value.  Of up to IP_DIRECT_COPY_SEGS / 2 chunks, a pair of segments per
 * chunk: a thread then has that many of the peer's loads in flight at
 * once (a remote load's round trip, not the link, bounds one at a time).
 * Signals held back go before it. */
static void xchg_step(builder *b, const ir_step *st, int s) {
  if (b->ll) {
    b->bad = 1;
    b->why = "an xchg in an LL or LL128 program";
    return;
  }
  close_run(b, s);
  flush_signals(b);
  const loc mine = src_loc(b, st), theirs = dst_loc(b, st);
  const int split = st->cnt > 1 && 2 * st->cnt <= IP_DIRECT_COPY_SEGS;
  b->op = new_op(b, IP_D_RUN);   /* a run's first link: the links below */
  if (b->op < 0) return;
  ip_dop *o = &b->d->tab.ops[b->op];
  o->cnt = split ? 1 : st->cnt;
  o->nseg = (uint8_t)(split ? 2 * st->cnt : 2);
  for (int j = 0; j < (split ? st->cnt : 1); j++) {
    loc a = mine, t = theirs;   /* chunk j alone, or the whole patterns */
    if (split) {
      a.off = (int32_t)ir_chunk_at(mine.off, mine.run, mine.stride, j);
      t.off = (int32_t)ir_chunk_at(theirs.off, theirs.run, theirs.stride, j);
      a.run = a.stride = t.run = t.stride = 0;
    }
    add_link(b, IP_L_LOAD, a, s);
    add_link(b, IP_L_PUT, t, s);
    add_link(b, IP_L_LOAD, t, s);
    add_link(b, IP_L_STORE, a, s);
  }
  o->kind = IP_D_COPIES;
  b->op = -1;
}

/* Whether the open run only copies this rank's memory into this rank's
 * memory (a LOAD and local STOREs, no reduction yet, no signal held
 * back): a wait after it may run before it instead (a wait orders what
 * comes after it, and a copy nothing of a peer's can race with is still
 * in order after it), so that the copy joins what the wait was holding
 * back (the out-of-place two-shot's copy of its input into its output,
 * then the reductions into it: one pass, not two). */
static int local_copy(const builder *b) {
  if (b->op < 0 || b->npending) return 0;
  const ip_dop *o = &b->d->tab.ops[b->op];
  if (o->kind != IP_D_RUN || o->ncomb || b->phase) return 0;
  for (int k = 0; k < o->n; k++) {
    const ip_dlink *x = &b->d->tab.links[o->first + k];
    if (x->at != IP_AT_LOCAL || (x->kind != IP_L_LOAD && x->kind != IP_L_STORE)) return 0;
  }
  return 1;
}

/* A sig or wait: joins the open group of its kind, or opens one; a sig
 * met inside a run waits for the run's end (builder.pending), a wait ends
 * the run but for a local copy (local_copy). */
static void sync_step(builder *b, const ir_step *st, int s, int *taken, int *sent) {
  const ir_tb *tb = &b->p->gpus[b->rank].tbs[b->tb];
  int kind = st->op == IR_OP_SIG ? IP_D_SIGS : IP_D_WAITS;
  int key = st->peer * IP_WIN_CHANS + tb->chan;
  int at = kind == IP_D_SIGS ? ++sent[key] : (taken[key] += st->cnt);
  if (at > IP_DIRECT_MAX_SIGNALS || b->npending >= IP_DIRECT_MAX_SYNCS) {
    b->bad = 1;
    b->why = "more signals of a stream in one call than a flag counts";
    return;
  }
  ip_dsync e = {(int16_t)st->peer, (int16_t)tb->chan, (int16_t)s, 0, at};
  if (kind == IP_D_SIGS && (b->op >= 0 || b->npending)) {
    b->pending[b->npending++] = e;
    return;
  }
  if (kind == IP_D_WAITS && local_copy(b)) {   /* the wait goes before the copy, which stays open */
    rt_dplan *d = b->d;
    int w = b->op - 1;
    if (w < d->tab.tb_first[b->tb] || d->tab.ops[w].kind != IP_D_WAITS) {
      if (d->nops >= IP_DIRECT_MAX_OPS) {
        b->bad = 1;
        b->why = "more operations than the executor holds";
        return;
      }
      d->tab.ops[b->op + 1] = d->tab.ops[b->op];
      d->nops++;
      w = b->op++;
      memset(&d->tab.ops[w], 0, sizeof d->tab.ops[w]);
      d->tab.ops[w].kind = IP_D_WAITS;
      d->tab.ops[w].tb = (int16_t)b->tb;
      d->tab.ops[w].first = d->nsyncs;
    }
    if (d->nsyncs >= IP_DIRECT_MAX_SYNCS || d->tab.ops[w].first + d->tab.ops[w].n != d->nsyncs) {
      b->bad = 1;
      b->why = "more signals and waits than the executor holds";
      return;
    }
    d->tab.syncs[d->nsyncs++] = e;
    d->tab.ops[w].n++;
    return;
  }
  close_run(b, s);
  flush_signals(b);
  add_sync(b, kind, e);
}

/* Whether step st of rank r leaves the root of rooted program p alone but
 * for the root's own puts from its input (rt_dplan.root_src): the root's
 * steps put from its input or only signal and wait; no other rank's step
 * reaches the root's buffers. */
static int root_reads_only(const ir_prog *p, int r, const ir_step *st) {
  const unsigned fl = ir_op_flags[st->op];
  if (st->op == IR_OP_NOP || st->op == IR_OP_SIG || st->op == IR_OP_WAIT) return 1;
  if (r == p->root) return (fl & IR_F_PUT) && !(fl & IR_F_GET) && st->srcbuf == IR_BUF_INPUT;
  return !((fl & (IR_F_PUT | IR_F_GET)) && st->peer == p->root);
}

/* Whether step st of an AllToAll copies input chunks into the same chunks
 * of the output on its own rank: with one buffer for both (an in-place
 * call; an AllToAll lays its input and output out alike) an identity. */
static int self_copy(const ir_prog *p, const ir_step *st) {
  return p->coll == IR_COLL_ALLTOALL && st->op == IR_OP_COPY && st->srcbuf == IR_BUF_INPUT &&
         st->dstbuf == IR_BUF_OUTPUT && st->srcoff == st->dstoff && st->srcrun == st->dstrun &&
         (st->srcrun <= 0 || st->srcstride == st->dststride);
}

/* Sets in *bits the cnt chunks of the pattern (off, run, stride) (a step's
 * source or destination, ir_chunk_at); *over when one lies past the 64 a
 * mask holds. */
static void mark_chunks(int32_t off, int32_t run, int32_t stride, int32_t cnt, uint64_t *bits, int *over) {
  for (int64_t j = 0; j < cnt; j++) {
    const int64_t c = ir_chunk_at(off, run, stride, j);
    if (c < 0 || c >= 64) *over = 1;
    else *bits |= 1ull << c;
  }
}

/* Sets in *bits each of this rank's input chunks that step st reads (its
 * source, or the destination a reduction reads). */
static void reads_input(const ir_step *st, uint64_t *bits, int *over) {
  const unsigned fl = ir_op_flags[st->op];
  if (st->srcbuf == IR_BUF_INPUT && !(fl & IR_F_GET) && st->srcoff >= 0)
    mark_chunks(st->srcoff, st->srcrun, st->srcstride, st->cnt, bits, over);
  if (st->dstbuf == IR_BUF_INPUT && (fl & IR_F_RED) && !(fl & IR_F_PUT) && st->dstoff >= 0)
    mark_chunks(st->dstoff, st->dstrun, st->dststride, st->cnt, bits, over);
}

/* Sets in *bits each chunk of `rank`'s output that step st of rank r
 * writes (a local store of rank's own, or a put into it). */
static void writes_output(const ir_step *st, int r, int rank, uint64_t *bits, int *over) {
  const unsigned fl = ir_op_flags[st->op];
  if (st->dstbuf == IR_BUF_OUTPUT && (fl & (IR_F_DST | IR_F_PUT)) && st->dstoff >= 0 &&
      ((fl & IR_F_PUT) ? st->peer : r) == rank)
    mark_chunks(st->dstoff, st->dstrun, st->dststride, st->cnt, bits, over);
}

/* The staged variant's rt_dplan.skip_in for rank's steps of p: the input
 * chunks only its own-block copies read, whose output chunks nothing else
 * writes (the copy is the last word on them, so leaving it out leaves the
 * input's value there); 0 when none, or past 64 chunks. */
static uint64_t self_only(const ir_prog *p, int rank) {
  uint64_t self = 0, other = 0, written = 0;
  int over = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        const int mine = r == rank && self_copy(p, st);
        if (r == rank) reads_input(st, mine ? &self : &other, &over);
        if (!mine) writes_output(st, r, rank, &written, &over);
      }
  return over ? 0 : self & ~other & ~written;
}

/* Fills o's landing and put masks (ip_dop.land, .puts) from its links. */
static void mark_links(rt_dplan *d, ip_dop *o) {
  o->land = 0;
  o->puts = 0;
  if (o->kind != IP_D_RUN && o->kind != IP_D_COPIES) return;
  for (int k = 0; k < o->n; k++)
    if (d->tab.links[o->first + k].kind == IP_L_PUT) o->puts |= 1ull << k;
  const int loads = o->kind == IP_D_RUN ? o->ncomb + 1 : o->nseg;
  for (int c = 0; c < loads; c++) {
    const int k = o->kind == IP_D_COPIES ? 2 * c : c == 0 ? 0 : o->npre + c;
    if (d->tab.links[o->first + k].at == IP_AT_LANDING) o->land |= (uint8_t)(1u << c);
  }
}

/* Notes that rank r sees rank q begin the call (ir_direct_sightings):
 * u holds a mask per rank. */
static int saw(void *u, int r, int q, int t, int s) {
  (void)t, (void)s;
  ((uint32_t *)u)[r] |= 1u << q;
  return 0;
}

/* Fills d's unmet and announce masks for rank of p (at most
 * IP_WIN_MAX_RANKS ranks), and whether any rank's call meets: every
 * sighting of the program, from every rank's steps.  BT_ERR_NOMEM or
 * BT_OK. */
static bt_result meetings(rt_dplan *d, const ir_prog *p, int rank) {
  uint32_t seen[IP_WIN_MAX_RANKS] = {0};
  ir_landing *lv = NULL;
  long nl = 0;
  if (ir_proto_landed(p->proto) && ir_direct_landings(p, &lv, &nl)) return BT_ERR_NOMEM;
  ir_direct_sightings(p, lv, nl, saw, seen);
  free(lv);
  for (int r = 0; r < p->ngpus; r++)
    for (int q = 0; q < p->ngpus; q++) {
      if (q == r || (seen[r] >> q & 1)) continue;
      d->meets = 1;
      if (r == rank) d->unmet |= 1u << q;
      if (q == rank) d->announce |= 1u << r;
    }
  return BT_OK;
}

/* Which plan build makes: the program's, or one of its variants. */
typedef enum { PLAN_AS_WRITTEN, PLAN_ROOT_COPY, PLAN_STAGED } plan_variant;

/* rt_dplan_build, rt_dplan_build_root_copy or rt_dplan_build_staged. */
static bt_result build(rt_dplan *d, const ir_prog *p, int rank, int nthreads, plan_variant variant) {
  const int root_copy = variant == PLAN_ROOT_COPY;
  memset(d, 0, sizeof *d);
  const ir_gpu *g = &p->gpus[rank];
  builder b = {.d = d, .p = p, .rank = rank, .ll = ir_proto_landed(p->proto), .op = -1};
  int taken[IP_WIN_MAX_RANKS * IP_WIN_CHANS] = {0}, sent[IP_WIN_MAX_RANKS * IP_WIN_CHANS] = {0};
  if (p->ngpus > IP_WIN_MAX_RANKS) b.why = "more ranks than the direct executor spans", b.bad = 1;
  else if (g->ntbs > IP_DIRECT_MAX_TBS) b.why = "more thread blocks than the direct executor holds", b.bad = 1;
  else if (p->interleave) b.why = "an interleaved output", b.bad = 1;
  d->stage_ok = d->guarded = p->ngpus <= IP_WIN_MAX_RANKS;
  d->root_src = ir_coll_rooted(p->coll) && p->root >= 0 && p->root < p->ngpus;
  for (int r = 0; r < p->ngpus; r++) {
    if (p->gpus[r].ntbs > d->most_tbs) d->most_tbs = p->gpus[r].ntbs;
    if (p->gpus[r].s_chunks > d->s_chunks) d->s_chunks = p->gpus[r].s_chunks;
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      unsigned char waited[IP_WIN_MAX_RANKS] = {0};   /* this thread block has waited on a signal from the rank */
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        unsigned fl = ir_op_flags[st->op];
        int q = st->peer >= 0 && st->peer < IP_WIN_MAX_RANKS ? st->peer : 0;
        int put_io = (fl & IR_F_PUT) && st->dstbuf != IR_BUF_SCRATCH;   /* reaches the peer's input or output */
        int io = put_io || ((fl & IR_F_GET) && st->srcbuf != IR_BUF_SCRATCH);
        if (st->op == IR_OP_WAIT) waited[q] = 1;
        if (io) d->peer_io = 1, d->guarded &= waited[q];
        if ((put_io && !waited[q]) || ((fl & IR_F_GET) && st->srcbuf == IR_BUF_INPUT)) d->stage_ok = 0;
        if (!root_reads_only(p, r, st)) d->root_src = 0;
      }
    }
  }
  if (root_copy && (!d->root_src || rank != p->root)) {
    memset(d, 0, sizeof *d);
    return BT_ERR_UNSUPPORTED;   /* not the root of such a program: no variant (not an error to say) */
  }
  if (variant == PLAN_STAGED &&
      (p->coll != IR_COLL_ALLTOALL || p->inplace || !d->stage_ok || !(d->skip_in = self_only(p, rank)))) {
    memset(d, 0, sizeof *d);
    return BT_ERR_UNSUPPORTED;   /* no copy of its own to leave out: no variant */
  }
  b.root_copy = root_copy;
  b.staged = variant == PLAN_STAGED;
  b.inplace = p->inplace && !root_copy;
  for (int t = 0; t < g->ntbs && !b.bad; t++) {
    const ir_tb *tb = &g->tbs[t];
    b.tb = t;
    d->tab.tb_first[t] = d->nops;
    if (tb->chan >= IP_WIN_CHANS) {
      b.bad = 1;
      b.why = "a channel above the direct executor's";
      break;
    }
    for (int s = 0; s < tb->nsteps && !b.bad; s++) {
      const ir_step *st = &tb->steps[s];
      if (st->depid >= 0) {
        b.bad = 1;
        b.why = "a dependency between thread blocks";
      } else if (st->op == IR_OP_SIG || st->op == IR_OP_WAIT) {
        sync_step(&b, st, s, taken, sent);
      } else if (st->op == IR_OP_XCHG) {
        xchg_step(&b, st, s);
      } else if (b.staged && self_copy(p, st)) {
        /* left out: in place, those chunks are already where they go */
      } else if (st->op != IR_OP_NOP) {
        data_step(&b, st, s);
      }
    }
    close_run(&b, tb->nsteps);
    flush_signals(&b);
  }
  if (b.bad) {
    LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d: the direct executor cannot run it (%s): not used", ir_prog_where(p), rank,
             b.why);
    return BT_ERR_UNSUPPORTED;
  }
  if (meetings(d, p, rank)) {
    memset(d, 0, sizeof *d);
    return BT_ERR_NOMEM;
  }
  d->ntbs = g->ntbs;
  d->tab.tb_first[g->ntbs] = d->nops;
  for (int o = 0; o < d->nops; o++) mark_links(d, &d->tab.ops[o]);
  d->nthreads = p->nthreads ? p->nthreads : nthreads;
  d->ll128 = p->proto == IR_PROTO_LL128;
  d->ok = 1;
  return BT_OK;
}

bt_result rt_dplan_build(rt_dplan *d, const ir_prog *p, int rank, int nthreads) {
  return build(d, p, rank, nthreads, PLAN_AS_WRITTEN);
}

bt_result rt_dplan_build_root_copy(rt_dplan *d, const ir_prog *p, int rank, int nthreads) {
  return build(d, p, rank, nthreads, PLAN_ROOT_COPY);
}

bt_result rt_dplan_build_staged(rt_dplan *d, const ir_prog *p, int rank, int nthreads) {
  return build(d, p, rank, nthreads, PLAN_STAGED);
}

void rt_dplan_lean_links(ip_dargs *a, const rt_dplan *d) {
  for (int o = 0; o < d->nops; o++) {
    const ip_dop *op = &d->tab.ops[o];
    if ((op->kind != IP_D_RUN && op->kind != IP_D_COPIES) || op->cnt != 1) continue;
    for (int k = 0; k < op->n; k++) {
      ip_dlean *l = &a->lean[op->first + k];
      ip_dlink_at(a, &d->tab.links[op->first + k], 0, &l->ptr, &l->valid);
    }
  }
  for (int t = 0; t < d->ntbs; t++) {
    const int o = d->tab.tb_first[t];
    const ip_dop *op = &d->tab.ops[o];
    const int load = o < d->tab.tb_first[t + 1] && (op->kind == IP_D_RUN || op->kind == IP_D_COPIES) &&
                     op->cnt == 1 && d->tab.links[op->first].at != IP_AT_LANDING && a->proto != IR_PROTO_LL128;
    ip_dstart *st = &a->start[t];
    memset(st, 0, sizeof *st);
    if (!load) continue;
    st->first = a->lean[op->first].ptr;
    st->valid = a->lean[op->first].valid;
    /* its first value's leading LL puts, where it is a run that reduces (ip_dstart says why only there) */
    const int stores = a->proto == IR_PROTO_LL && op->kind == IP_D_RUN && op->ncomb ? op->npre : 0;
    while (st->puts < stores && st->puts < IP_DIRECT_EARLY_PUTS && (op->puts >> (st->puts + 1) & 1)) {
      st->put[st->puts] = a->lean[op->first + 1 + st->puts].ptr;
      st->puts++;
    }
  }
}

int rt_dplan_fits(const rt_dplan *d, const ir_prog *p, const rt_window_layout *l, int64_t count, int esize) {
  ir_geom g;
  if (ir_geom_init(&g, p, 0, count, 0)) return 0;
  int64_t chunk = g.cap * esize;
  if (ir_proto_landed(p->proto)) return d->s_chunks * ir_geom_wire(p->proto, chunk) <= (int64_t)l->ll_half;
  return d->s_chunks * chunk <= (int64_t)l->simple_bytes;
}

/* The bytes of a chunk of cap_bytes that d's threads take 16 at a time. */
static int64_t thread_bytes(const rt_dplan *d, int64_t cap_bytes) {
  return d->ll128 ? ir_geom_wire(IR_PROTO_LL128, cap_bytes) : cap_bytes;
}

int rt_dplan_lanes(const rt_dplan *d, int grid, int64_t cap_bytes, int64_t lane_bytes, int nthreads) {
  int most = grid / (d->most_tbs > 0 ? d->most_tbs : 1);
  cap_bytes = thread_bytes(d, cap_bytes);
  if (lane_bytes <= 0) lane_bytes = 16 * (int64_t)nthreads;
  int64_t want = (cap_bytes + lane_bytes - 1) / lane_bytes;
  if (want > most) want = most;
  return want < 1 ? 1 : (int)want;
}

int rt_dplan_threads(const rt_dplan *d, const ir_prog *p, int grid, int64_t cap_bytes, int small) {
  if (!ir_proto_landed(p->proto) || p->nthreads || small <= 0 || small >= d->nthreads) return d->nthreads;
  const int64_t most = grid / (d->most_tbs > 0 ? d->most_tbs : 1), lane = 16 * (int64_t)small;
  return (thread_bytes(d, cap_bytes) + lane - 1) / lane <= most ? small : d->nthreads;
}

int rt_dplan_stage(const rt_dplan *d, const ir_prog *p, int rank, int64_t count, int esize, int64_t scratch_bytes,
                   int64_t pool_bytes) {
  ir_geom g;
  if (!d->ok || p->inplace || !d->stage_ok || ir_geom_init(&g, p, rank, count, 0)) return 0;
  const int64_t in_bytes = g.elems[IR_BUF_INPUT] * esize;
  if ((ir_proto_landed(p->proto) || d->s_chunks == 0) && in_bytes <= scratch_bytes) return 1;
  return p->coll == IR_COLL_ALLTOALL && in_bytes <= pool_bytes ? 2 : 0;
}
