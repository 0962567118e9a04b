/* ip_cpu.c -- CPU executor: every (rank, tb) run on the calling thread by an
 * event-driven scheduler, bounded FIFO slots per connection, cross-tb
 * dependencies per tile, exact deadlock detection.
 * A compute thread block (ir_tb_compute) runs its steps one after the
 * other, each over every tile, and the steps waiting on it wait for every
 * tile of their tile's semaphore (ir_sync), as on the GPU.
 * A direct program's put, get and getr reach the peer's buffers at once; a
 * wait waits for its signal stream's count, and in LL a step that reads a
 * landing waits until its put has landed the tile (docs/IR.md). */
#include "ip_cpu.h"
#include "rt_time.h"
#include "ip_post.h"
#include "ir_check.h"
#include "ir_direct.h"
#include "ir_geom.h"
#include "rt_log.h"
#include "rt_param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One direction of one (sender tb, receiver tb) connection. */
typedef struct conn {
  unsigned char *data;     /* nslots * slot_bytes */
  int64_t head, tail;      /* messages put / taken */
} conn;

typedef struct exec exec;

/* Where a thread block is: queued to run (or running), waiting for
 * something only another thread block's step can give it, or finished. */
enum { TB_RUNNABLE, TB_BLOCKED, TB_DONE };
/* What a blocked thread block waits for. */
enum { WAIT_NONE, WAIT_DEP, WAIT_MSG, WAIT_SLOT, WAIT_SIG, WAIT_LAND };

typedef struct tbx {
  exec *x;
  int r, t;
  const ir_tb *tb;
  conn *in, *out;          /* recv / send connection, NULL if none */
  int64_t done;            /* steps completed, over all tiles */
  int step;                /* the next step to run ... */
  int64_t tile;            /* ... for this tile (compute tbs: steps outer, tiles inner) */
  int state, why;          /* TB_*, and for TB_BLOCKED a WAIT_* */
  struct tbx *send_peer, *recv_peer;   /* the tbs at the other end of out / in */
  struct tbx **dependents; /* tbs of this rank with a step that waits for this one */
  int ndependents;
  unsigned char *tmp;      /* one message worth of elements */
  int compute;             /* a compute thread block: steps outer, tiles inner */
  unsigned char *cdone;    /* compute: [step * ntiles + tile] done */
  int *stream;             /* direct programs, per step: a sig's or wait's signal stream, else -1 */
  int64_t *need;           /* ... a wait's: the stream's signals per tile up to and with it */
  int64_t land_c;          /* WAIT_LAND: the scratch chunk of this rank it waits for ... */
  struct tbx *land_next;   /* ... and the next tb waiting for that chunk */
} tbx;

/* A signal stream (rank from to rank to on a channel): signals sent, all
 * tiles; the signals one tile's waits take; the tb that holds them. */
typedef struct sstream {
  int64_t sent, per_tile;
  tbx *waiter;
} sstream;

/* A scratch chunk of an LL direct program: the tiles its put has landed
 * (-1 when it is no landing), the rank that puts it, and the tbs blocked
 * until it lands their tile (a list through tbx.land_next). */
typedef struct landx {
  int64_t tiles;
  int from;
  tbx *waiting;
} landx;

struct exec {
  const ir_prog *p;
  const ip_cpu_opts *o;
  ir_geom *geom;           /* per rank */
  unsigned char **in, **out, **scr;   /* per rank buffer bases */
  tbx **tbs;               /* [rank][tb] */
  tbx **ready;             /* the runnable tbs, a stack (each at most once) */
  int nready;
  int esize, nslots, src_words;   /* src_words: a sources run's (post_bufs) */
  int64_t tile, ntiles, slot_bytes;
  int alive;               /* tbs not finished */
  int64_t steps, messages, bytes;
  ip_opnd (*opnd)[IR_MAX_OPERANDS];   /* fused programs: per rank, the operands */
  sstream *streams;        /* direct programs: the signal streams */
  int nstreams;
  landx **land;            /* LL direct programs: [rank][scratch chunk]; NULL otherwise */
};

static void *buf_of(exec *x, int r, int b) {
  return b == IR_BUF_INPUT ? x->in[r] : b == IR_BUF_OUTPUT ? x->out[r] : x->scr[r];
}

/* b may be able to go on: a blocked tb becomes runnable.  A runnable or
 * running one looks again anyway, a finished one has nothing to do. */
static void wake(exec *x, tbx *b) {
  if (!b || b->state != TB_BLOCKED) return;
  b->state = TB_RUNNABLE;
  b->why = WAIT_NONE;
  x->ready[x->nready++] = b;
}

/* me completed a step: its receiver may have a message, its sender a free
 * slot, the tbs that depend on it a satisfied dependency.  Only these can
 * have been waiting for it, so waking only them keeps deadlock detection
 * exact: a blocked tb that nobody wakes can never go on. */
static void changed(exec *x, tbx *me) {
  wake(x, me->send_peer);
  wake(x, me->recv_peer);
  for (int i = 0; i < me->ndependents; i++) wake(x, me->dependents[i]);
}

/* Whether every tile of tile t's semaphore of compute step s of d is done. */
static int group_done(const exec *x, const tbx *d, int s, int64_t t) {
  const ir_step *st = &d->tb->steps[s];
  int64_t first, count, stride;
  ir_sync_span(st->sync, st->sync_param, t, x->ntiles, &first, &count, &stride);
  for (int64_t k = 0; k < count; k++)
    if (!d->cdone[(int64_t)s * x->ntiles + first + k * stride]) return 0;
  return 1;
}

/* In an LL direct program: the first landing chunk that step st of me
 * reads locally (its source, a reduction's destination) and whose put has
 * not landed tile t yet, or -1. */
static int64_t unlanded(const exec *x, const tbx *me, const ir_step *st, int64_t t) {
  unsigned fl = ir_op_flags[st->op];
  for (int k = 0; k < 2; k++) {
    if (!ir_side_reads_local(fl, k) || (k ? st->dstbuf : st->srcbuf) != IR_BUF_SCRATCH) continue;
    for (int64_t j = 0; j < st->cnt; j++) {
      int64_t c = k ? ir_chunk_at(st->dstoff, st->dstrun, st->dststride, j)
                    : ir_chunk_at(st->srcoff, st->srcrun, st->srcstride, j);
      const landx *l = &x->land[me->r][c];
      if (l->tiles >= 0 && l->tiles <= t) return c;
    }
  }
  return -1;
}

/* Whether the wait at step s of me, for tile t, has all its signals: its
 * stream's signals up to it in every tile before and in this one. */
static int signalled(const exec *x, const tbx *me, int s, int64_t t) {
  const sstream *k = &x->streams[me->stream[s]];
  return k->sent >= t * k->per_tile + me->need[s];
}

/* The first dependency of step st of me that tile t has not met (its
 * index, ir_step_dep), or -1 when all are met. */
static int unmet_dep(const exec *x, const tbx *me, const ir_step *st, int64_t t) {
  for (int k = 0; k < ir_step_ndeps(st); k++) {
    ir_dep e = ir_step_dep(st, k);
    const tbx *d = &x->tbs[me->r][e.tb];
    if (d->compute ? !group_done(x, d, e.step, t) : d->done < t * d->tb->nsteps + e.step + 1) return k;
  }
  return -1;
}

/* What step st (step s) of me, for tile t, waits for (a WAIT_*),
 * WAIT_NONE when it can run now; WAIT_LAND sets me->land_c. */
static int step_wait(const exec *x, tbx *me, const ir_step *st, int s, int64_t t) {
  unsigned fl = ir_op_flags[st->op];
  if (unmet_dep(x, me, st, t) >= 0) return WAIT_DEP;
  if ((fl & IR_F_RECV) && me->in->head == me->in->tail) return WAIT_MSG;
  if ((fl & IR_F_SEND) && me->out->head - me->out->tail >= x->nslots) return WAIT_SLOT;
  if ((fl & IR_F_WAIT) && !signalled(x, me, s, t)) return WAIT_SIG;
  if (x->land && (me->land_c = unlanded(x, me, st, t)) >= 0) return WAIT_LAND;
  return WAIT_NONE;
}

/* The line a deadlock report gives a stuck tb: rank, tb, step, tile and
 * what it waits for. */
static void stuck_line(const exec *x, const tbx *me, char *buf, size_t size) {
  const ir_step *st = &me->tb->steps[me->step];
  int n = snprintf(buf, size, "rank %d tb %d step %d (%s) tile %lld: ", me->r, me->t, me->step, ir_op_xml[st->op],
                   (long long)me->tile);
  if (n < 0 || (size_t)n >= size) return;
  buf += n;
  size -= (size_t)n;
  if (me->why == WAIT_DEP) {
    int k = unmet_dep(x, me, st, me->tile);
    ir_dep d = ir_step_dep(st, k < 0 ? 0 : k);
    snprintf(buf, size, "waiting for tb %d step %d (tile %lld) to signal", d.tb, d.step, (long long)me->tile);
  }
  else if (me->why == WAIT_MSG)
    snprintf(buf, size, "waiting for a message from rank %d on channel %d", me->tb->recv, me->tb->chan);
  else if (me->why == WAIT_SLOT)
    snprintf(buf, size, "waiting for a free slot to rank %d on channel %d (all %d full)", me->tb->send, me->tb->chan,
             x->nslots);
  else if (me->why == WAIT_SIG) {
    const sstream *k = &x->streams[me->stream[me->step]];
    snprintf(buf, size, "waiting for signals of rank %d on channel %d (%lld of the stream's first %lld have come)",
             st->peer, me->tb->chan, (long long)k->sent, (long long)(me->tile * k->per_tile + me->need[me->step]));
  } else if (me->why == WAIT_LAND)
    snprintf(buf, size, "waiting for rank %d's put to land tile %lld in s[%lld]", x->land[me->r][me->land_c].from,
             (long long)me->tile, (long long)me->land_c);
  else
    snprintf(buf, size, "stopped");
}

/* Copies n elements between a message and elements [x, x+n) of chunk c
 * of buffer b (to_msg: into the message), run by run: a row of an
 * interleaved output at a time (ir_geom_at), else all at once. */
static void copy_elems(exec *x, int r, int b, int c, int64_t at, int64_t n, unsigned char *msg, int to_msg) {
  const ir_geom *g = &x->geom[r];
  unsigned char *base = buf_of(x, r, b);
  for (int64_t done = 0; done < n;) {
    int64_t run = n - done;
    if (b == IR_BUF_OUTPUT && g->seg > 0 && run > g->seg - (at + done) % g->seg) run = g->seg - (at + done) % g->seg;
    unsigned char *p = base + ir_geom_at(g, b, c, at + done) * x->esize;
    if (to_msg) memcpy(msg + done * x->esize, p, run * x->esize);
    else memcpy(p, msg + done * x->esize, run * x->esize);
    done += run;
  }
}

/* Copies the tile-`t` piece of the cnt chunks of buffer b at pattern
 * (off, run, stride) (ir_chunk_at) into msg (len elements per chunk),
 * zero past each chunk's valid length. */
static void gather(exec *x, int r, int b, int off, int run, int stride, int cnt, int64_t t, int64_t len,
                   unsigned char *msg) {
  const ir_geom *g = &x->geom[r];
  for (int j = 0; j < cnt; j++) {
    int64_t c = ir_chunk_at(off, run, stride, j);
    int64_t valid = ir_geom_len(g, b, c) - t * x->tile;
    valid = valid < 0 ? 0 : valid > len ? len : valid;
    unsigned char *dst = msg + (size_t)j * len * x->esize;
    copy_elems(x, r, b, c, t * x->tile, valid, dst, 1);
    memset(dst + valid * x->esize, 0, (len - valid) * x->esize);
  }
}

/* The inverse: writes msg into the valid part of the chunks. */
static void scatter(exec *x, int r, int b, int off, int run, int stride, int cnt, int64_t t, int64_t len,
                    const unsigned char *msg) {
  const ir_geom *g = &x->geom[r];
  for (int j = 0; j < cnt; j++) {
    int64_t c = ir_chunk_at(off, run, stride, j);
    int64_t valid = ir_geom_len(g, b, c) - t * x->tile;
    valid = valid < 0 ? 0 : valid > len ? len : valid;
    copy_elems(x, r, b, c, t * x->tile, valid, (unsigned char *)msg + (size_t)j * len * x->esize, 0);
  }
}

/* dst = a (op) b over n elements: values, or a sources run's records. */
static void combine(exec *x, ip_redop op, void *dst, const void *a, const void *b, size_t n) {
  if (x->o->sources) post_src_reduce(x->src_words, dst, a, b, n);
  else ip_reduce(x->o->dtype, op, dst, a, b, n);
}

/* Executes one step for tile t (step_wait said it can run: its message is
 * in, its slot free, its dependency done). */
static void run_step(exec *x, tbx *me, const ir_step *st, int64_t t) {
  unsigned fl = ir_op_flags[st->op];
  int64_t len = x->geom[me->r].cap - t * x->tile;
  len = len > x->tile ? x->tile : len;
  size_t n = (size_t)st->cnt * len;
  unsigned char *in = (fl & IR_F_RECV) ? me->in->data + (me->in->tail % x->nslots) * x->slot_bytes : NULL;
  unsigned char *out = (fl & IR_F_SEND) ? me->out->data + (me->out->head % x->nslots) * x->slot_bytes : NULL;
  unsigned char *res = out ? out : me->tmp;   /* where the step's value is built */
  ip_redop op = x->o->op;
  if (fl & IR_F_COMP) {   /* the values of the input chunks src: computed, zero past their valid length */
    const ir_geom *g = &x->geom[me->r];
    ip_opnd args[IR_MAX_ARGS] = {{0}};
    for (int k = 0; k < IR_MAX_ARGS && st->args[k] >= 0; k++) args[k] = x->opnd[me->r][st->args[k]];
    for (int j = 0; j < st->cnt; j++) {
      int c = st->srcoff + j;
      int64_t valid = ir_geom_len(g, IR_BUF_INPUT, c) - t * x->tile;
      valid = valid < 0 ? 0 : valid > len ? len : valid;
      unsigned char *piece = res + (size_t)j * len * x->esize;
      ip_compute_rows(st->op, x->o->dtype, args, ir_geom_off(g, IR_BUF_INPUT, c) + t * x->tile, valid, piece);
      memset(piece + valid * x->esize, 0, (len - valid) * x->esize);
    }
    if (fl & IR_F_DST) scatter(x, me->r, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, res);
    return;
  }
  switch (st->op) {
  case IR_OP_NOP: case IR_OP_SIG: case IR_OP_WAIT: return;
  case IR_OP_PUT:   /* into the peer's buffer, in the peer's geometry */
    gather(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    scatter(x, st->peer, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, res);
    return;
  case IR_OP_GET:
    gather(x, st->peer, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    break;
  case IR_OP_XCHG: {   /* both sides loaded, then each stored where the other was */
    unsigned char *theirs = me->tmp + n * x->esize;
    gather(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    gather(x, st->peer, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, theirs);
    scatter(x, st->peer, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, res);
    scatter(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, theirs);
    return;
  }
  case IR_OP_GETR: {   /* as re, with the peer's chunks for src */
    unsigned char *cur = me->tmp + n * x->esize;
    gather(x, st->peer, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    gather(x, me->r, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, cur);
    combine(x, op, res, cur, res, n);
    break;
  }
  case IR_OP_SEND: case IR_OP_COPY:
    gather(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    break;
  case IR_OP_RECV: case IR_OP_RCS:
    memcpy(res, in, n * x->esize);
    break;
  case IR_OP_RRC: case IR_OP_RRS: case IR_OP_RRCS:
    gather(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    combine(x, op, res, in, res, n);
    break;
  case IR_OP_REDUCE: {
    unsigned char *cur = me->tmp + n * x->esize;
    gather(x, me->r, st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt, t, len, res);
    gather(x, me->r, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, cur);
    combine(x, op, res, cur, res, n);
    break;
  }
  default: return;
  }
  if (fl & IR_F_DST) scatter(x, me->r, st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt, t, len, res);
}

/* A direct step of me completed tile t: a sig adds to its stream and wakes
 * the stream's waiter once its wait has every signal; in LL, a put lands
 * the tile in its peer's chunks and wakes the peer's thread blocks that
 * wait for one of them and can now have it.  Only they can have been
 * waiting for it, and only those that can go on are woken, so deadlock
 * detection stays exact (changed()). */
static void direct_done(exec *x, tbx *me, const ir_step *st, int s, int64_t t) {
  unsigned fl = ir_op_flags[st->op];
  if (fl & IR_F_SIG) {
    sstream *k = &x->streams[me->stream[s]];
    k->sent++;
    tbx *w = k->waiter;
    if (w && w->state == TB_BLOCKED && w->why == WAIT_SIG && signalled(x, w, w->step, w->tile)) wake(x, w);
  }
  if (!(fl & IR_F_PUT) || !x->land || st->dstbuf != IR_BUF_SCRATCH) return;
  for (int64_t j = 0; j < st->cnt; j++) {
    landx *l = &x->land[st->peer][ir_chunk_at(st->dstoff, st->dstrun, st->dststride, j)];
    l->tiles = t + 1;
    tbx **at = &l->waiting;
    while (*at) {   /* wake the waiters whose tile has landed, keep the others */
      tbx *w = *at;
      if (l->tiles <= w->tile) { at = &w->land_next; continue; }
      *at = w->land_next;
      wake(x, w);
    }
  }
}

/* Tells o->on_step that step s of me ran for tile t (before the counts
 * of its connections and streams move on). */
static void report(exec *x, const tbx *me, const ir_step *st, int s, int64_t t) {
  if (!x->o->on_step) return;
  unsigned fl = ir_op_flags[st->op];
  ip_cpu_event e = {me->r, me->t, s, t, -1, -1, -1, -1, -1, -1, -1, -1};
  if ((fl & IR_F_RECV) && me->recv_peer) {
    e.from_r = me->recv_peer->r;
    e.from_t = me->recv_peer->t;
    e.rmsg = me->in->tail;
  }
  if ((fl & IR_F_SEND) && me->send_peer) {
    e.to_r = me->send_peer->r;
    e.to_t = me->send_peer->t;
    e.smsg = me->out->head;
  }
  if ((fl & (IR_F_SIG | IR_F_WAIT)) && me->stream && me->stream[s] >= 0) {
    const sstream *k = &x->streams[me->stream[s]];
    e.stream = me->stream[s];
    e.sig = (fl & IR_F_SIG) ? k->sent : t * k->per_tile + me->need[s];
  }
  x->o->on_step(x->o->on_step_ctx, &e);
}

/* Runs me until it finishes or must wait for another thread block.  A
 * compute thread block runs each step over every tile, in the order of its
 * steps (the program's tile order), and waits for nothing; any other runs
 * its steps in order for tile 0, then tile 1, and so on. */
static void advance(exec *x, tbx *me) {
  const ir_tb *tb = me->tb;
  if (me->compute) {
    for (; me->step < tb->nsteps; me->step++, me->tile = 0)
      for (; me->tile < x->ntiles; me->tile++) {
        run_step(x, me, &tb->steps[me->step], me->tile);
        report(x, me, &tb->steps[me->step], me->step, me->tile);
        me->cdone[(int64_t)me->step * x->ntiles + me->tile] = 1;
        me->done++;
        x->steps++;
        changed(x, me);
      }
  } else {
    while (tb->nsteps > 0 && me->tile < x->ntiles) {
      const ir_step *st = &tb->steps[me->step];
      int why = step_wait(x, me, st, me->step, me->tile);
      if (why != WAIT_NONE) {
        me->state = TB_BLOCKED;
        me->why = why;
        if (why == WAIT_LAND) {   /* the put that lands the chunk wakes it */
          landx *l = &x->land[me->r][me->land_c];
          me->land_next = l->waiting;
          l->waiting = me;
        }
        return;
      }
      run_step(x, me, st, me->tile);
      report(x, me, st, me->step, me->tile);
      unsigned fl = ir_op_flags[st->op];
      if (fl & IR_F_DIRECT) direct_done(x, me, st, me->step, me->tile);
      if (fl & IR_F_RECV) me->in->tail++;
      if (fl & IR_F_SEND) {
        me->out->head++;
        x->messages++;
        int64_t len = x->geom[me->r].cap - me->tile * x->tile;
        x->bytes += (int64_t)st->cnt * (len > x->tile ? x->tile : len) * x->esize;
      }
      me->done++;
      x->steps++;
      if (++me->step == tb->nsteps) {
        me->step = 0;
        me->tile++;
      }
      changed(x, me);
    }
  }
  me->state = TB_DONE;
  x->alive--;
}

/* Runs every thread block until all have finished or none can go on (a
 * deadlock: x->alive > 0 afterwards).  Every tb starts runnable; a
 * blocked one is runnable again only when changed() wakes it. */
static void run_all(exec *x) {
  const ir_prog *p = x->p;
  x->alive = 0;
  for (int r = p->ngpus - 1; r >= 0; r--)
    for (int t = p->gpus[r].ntbs - 1; t >= 0; t--) {
      x->tbs[r][t].state = TB_RUNNABLE;
      x->ready[x->nready++] = &x->tbs[r][t];
      x->alive++;
    }
  while (x->nready > 0) advance(x, x->ready[--x->nready]);
}

static void exec_free(exec *x) {
  const ir_prog *p = x->p;
  for (int r = 0; r < p->ngpus; r++) {
    if (x->tbs && x->tbs[r]) {
      for (int t = 0; t < p->gpus[r].ntbs; t++) {
        tbx *b = &x->tbs[r][t];
        if (b->out) free(b->out->data);
        free(b->out);
        free(b->tmp);
        free(b->cdone);
        free(b->dependents);
        free(b->stream);
        free(b->need);
      }
      free(x->tbs[r]);
    }
    if (x->scr) free(x->scr[r]);
    if (x->land) free(x->land[r]);
  }
  free(x->land);
  free(x->streams);
  free(x->tbs);
  free(x->ready);
  free(x->scr);
  free(x->geom);
}

/* a * b for sizes (a, b >= 0), or -1 when the product exceeds int64_t or
 * size_t. */
static int64_t size_mul(int64_t a, int64_t b) {
  int64_t v;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &v) || (uint64_t)v > SIZE_MAX) return -1;
  return v;
}

/* Sets x->slot_bytes (a message of the largest step's chunks, one tile of
 * each) and checks every size product exec_setup allocates from the
 * caller's count, tile and slots: two messages per thread block, x->nslots
 * slots per connection and a flag per (step, tile) of each compute thread
 * block.  One that does not fit int64_t or size_t is BT_ERR_NOMEM with a
 * line naming it, before anything is allocated (baton verify estimates
 * the memory first; tests and fuzzers call in directly). */
static bt_result exec_sizes(exec *x, rt_diag *diag) {
  const ir_prog *p = x->p;
  int maxcnt = ir_prog_max_cnt(p), sends = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) sends |= p->gpus[r].tbs[t].send >= 0;
  x->slot_bytes = size_mul(size_mul(maxcnt, x->tile), x->esize);
  if (x->slot_bytes < 0 || size_mul(2, x->slot_bytes) < 0) {
    rt_diag_add(diag, "%s: a message of %d chunks (its largest step) of %lld elements (a tile) of %d bytes is more "
                "bytes than this machine addresses; nothing was run", ir_prog_where(p), maxcnt, (long long)x->tile,
                x->esize);
    return BT_ERR_NOMEM;
  }
  if (sends && size_mul(x->nslots, x->slot_bytes) < 0) {
    rt_diag_add(diag, "%s: %d FIFO slots per connection of %lld bytes each are more bytes than this machine "
                "addresses; nothing was run", ir_prog_where(p), x->nslots, (long long)x->slot_bytes);
    return BT_ERR_NOMEM;
  }
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      int64_t flags = size_mul(tb->nsteps, x->ntiles);
      if (ir_tb_compute(tb) && (flags < 0 || flags == INT64_MAX)) {
        rt_diag_add(diag, "%s: rank %d tb %d: %d compute steps of %lld tiles each are more tiles than this machine "
                    "addresses; nothing was run", ir_prog_where(p), r, t, tb->nsteps, (long long)x->ntiles);
        return BT_ERR_NOMEM;
      }
    }
  return BT_OK;
}

/* A direct program's state (ir_direct.h): each sig's and wait's signal
 * stream, a wait's signals per tile up to and with it (its stream's waits
 * in program order), each stream's waits per tile and the tb that holds
 * them; in LL, which scratch chunks are landings and whose.  BT_ERR_NOMEM
 * or BT_OK. */
static bt_result direct_setup(exec *x) {
  const ir_prog *p = x->p;
  ir_sigstep *sg = NULL, *wt = NULL;
  ir_landing *lv = NULL;
  long ns = 0, nw = 0, nl = 0;
  bt_result res = BT_ERR_NOMEM;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      tbx *b = &x->tbs[r][t];
      b->stream = malloc((b->tb->nsteps + 1) * sizeof *b->stream);
      b->need = calloc(b->tb->nsteps + 1, sizeof *b->need);
      if (!b->stream || !b->need) goto out;
      for (int s = 0; s < b->tb->nsteps; s++) b->stream[s] = -1;
    }
  CHECK_GOTO(ir_direct_streams(p, &sg, &ns, &wt, &nw), res, out);
  if (!(x->streams = calloc(ns + nw + 1, sizeof *x->streams))) goto out;
  for (long i = 0, j = 0; i < ns || j < nw; x->nstreams++) {   /* the sorted sigs and waits merged, stream by stream */
    ir_sigstep key = j >= nw || (i < ns && ir_stream_cmp(&sg[i], &wt[j]) <= 0) ? sg[i] : wt[j];
    sstream *k = &x->streams[x->nstreams];
    for (; i < ns && !ir_stream_cmp(&sg[i], &key); i++) x->tbs[sg[i].r][sg[i].t].stream[sg[i].s] = x->nstreams;
    for (; j < nw && !ir_stream_cmp(&wt[j], &key); j++) {
      tbx *b = &x->tbs[wt[j].r][wt[j].t];
      k->per_tile += wt[j].cnt;
      b->stream[wt[j].s] = x->nstreams;
      b->need[wt[j].s] = k->per_tile;
      k->waiter = b;
    }
  }
  if (ir_proto_landed(p->proto)) {
    if (!(x->land = calloc(p->ngpus, sizeof *x->land))) goto out;
    for (int r = 0; r < p->ngpus; r++) {
      int64_t n = x->geom[r].chunks[IR_BUF_SCRATCH];
      if (!(x->land[r] = malloc((n + 1) * sizeof **x->land))) goto out;
      for (int64_t c = 0; c < n; c++) x->land[r][c] = (landx){-1, -1, NULL};
    }
    CHECK_GOTO(ir_direct_landings(p, &lv, &nl), res, out);
    for (long i = 0; i < nl; i++)   /* in range: check_steps */
      for (int64_t c = lv[i].lo; c < lv[i].hi; c++) x->land[lv[i].owner][c] = (landx){0, lv[i].r, NULL};
  }
  res = BT_OK;
out:
  free(sg);
  free(wt);
  free(lv);
  return res;
}

/* Builds the thread blocks' state and connections.  Each tb owns its outgoing
 * connection; the receiver's `in` points at the sender's `out`. */
static bt_result exec_setup(exec *x, rt_diag *diag) {
  const ir_prog *p = x->p;
  x->tbs = calloc(p->ngpus, sizeof *x->tbs);
  x->scr = calloc(p->ngpus, sizeof *x->scr);
  x->ready = calloc((size_t)ir_prog_ntbs(p) + 1, sizeof *x->ready);
  if (!x->tbs || !x->scr || !x->ready) return BT_ERR_NOMEM;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    x->scr[r] = calloc(x->geom[r].elems[IR_BUF_SCRATCH] + 1, x->esize);
    x->tbs[r] = calloc(g->ntbs + 1, sizeof(tbx));
    if (!x->scr[r] || !x->tbs[r]) return BT_ERR_NOMEM;
    for (int t = 0; t < g->ntbs; t++) {
      tbx *b = &x->tbs[r][t];
      b->x = x; b->r = r; b->t = t; b->tb = &g->tbs[t];
      b->tmp = malloc(2 * x->slot_bytes);
      if (!b->tmp) return BT_ERR_NOMEM;
      if ((b->compute = ir_tb_compute(b->tb)) && !(b->cdone = calloc((size_t)b->tb->nsteps * x->ntiles + 1, 1)))
        return BT_ERR_NOMEM;
      if (b->tb->send >= 0) {
        b->out = calloc(1, sizeof *b->out);
        if (!b->out) return BT_ERR_NOMEM;
        b->out->data = malloc(x->nslots * x->slot_bytes);
        if (!b->out->data) return BT_ERR_NOMEM;
      }
    }
  }
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  bt_result res = BT_OK;
  for (int r = 0; r < p->ngpus && !res; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      if (tb->recv < 0) continue;
      int u = pe.recv_tb[r][t];
      if (u < 0) {  /* ir_check allows it only when the tb never receives */
        static conn none;
        x->tbs[r][t].in = &none;
        continue;
      }
      x->tbs[r][t].in = x->tbs[tb->recv][u].out;
      x->tbs[r][t].recv_peer = &x->tbs[tb->recv][u];
      x->tbs[tb->recv][u].send_peer = &x->tbs[r][t];
    }
  /* dependents: tb u of rank r waits for tb d somewhere */
  for (int r = 0; r < p->ngpus && !res; r++)
    for (int u = 0; u < p->gpus[r].ntbs && !res; u++) {
      const ir_tb *tb = &p->gpus[r].tbs[u];
      for (int s = 0; s < tb->nsteps && !res; s++)
        for (int e = 0; e < ir_step_ndeps(&tb->steps[s]) && !res; e++) {
          int d = ir_step_dep(&tb->steps[s], e).tb;
          if (d < 0 || d >= p->gpus[r].ntbs) continue;
          tbx *b = &x->tbs[r][d];
          int k;
          for (k = b->ndependents - 1; k >= 0 && b->dependents[k] != &x->tbs[r][u]; k--) {}
          if (k >= 0) continue;
          tbx **nd = realloc(b->dependents, (b->ndependents + 1) * sizeof *nd);
          if (!nd) { res = BT_ERR_NOMEM; break; }
          b->dependents = nd;
          b->dependents[b->ndependents++] = &x->tbs[r][u];
        }
    }
  ir_peers_free(&pe);
  if (!res && ir_prog_direct(p)) res = direct_setup(x);
  (void)diag;
  return res;
}

/* Whether chunks [off, off+cnt) of buffer b exist in geometry g (of rank
 * owner: r, or a direct step's peer); else an error naming the step. */
static int step_range(const ir_prog *p, const ir_geom *g, int r, int t, int s, const char *what, int b, int32_t off,
                      int32_t run, int32_t stride, int32_t cnt, int inplace, int owner, rt_diag *diag) {
  static const char *const names[IR_BUF_COUNT] = {"input", "output", "scratch"};
  if (b >= IR_BUF_COUNT) {
    rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): %s buffer %d does not exist", ir_prog_where(p), r, t, s,
                ir_op_xml[p->gpus[r].tbs[t].steps[s].op], what, b);
    return 0;
  }
  int64_t lo, hi;
  ir_pattern_extent(off, run, stride, cnt, &lo, &hi);
  int overlap = run > 0 && run < cnt && (stride > 0 ? stride : -(int64_t)stride) < run;
  if (!overlap && lo >= 0 && hi < g->chunks[b]) return 1;
  char whose[32] = "this rank";
  if (owner != r) snprintf(whose, sizeof whose, "rank %d", owner);
  rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): %s %s[%lld..%lld]%s, outside the %s's %d chunks on %s in "
              "this run (%s); nothing was run", ir_prog_where(p), r, t, s, ir_op_xml[p->gpus[r].tbs[t].steps[s].op],
              what, ir_buf_xml[b], (long long)lo, (long long)hi, overlap ? " (overlapping runs)" : "", names[b],
              g->chunks[b], whose, inplace ? "in place" : "out of place");
  return 0;
}

/* Every step's chunks, peers, dependency and operands must exist in this
 * run's geometry, whatever the IR says (ir_check judges the program as
 * the layout it names; a run may take the other one): the executor never
 * reads or writes outside its buffers.  Problems name rank/tb/step. */
static bt_result check_steps(const ir_prog *p, const ir_geom *geom, int inplace, rt_diag *diag) {
  int bad = 0;
  for (int r = 0; r < p->ngpus && bad < 20; r++) {
    const ir_gpu *gp = &p->gpus[r];
    for (int t = 0; t < gp->ntbs && bad < 20; t++) {
      const ir_tb *tb = &gp->tbs[t];
      for (int s = 0; s < tb->nsteps && bad < 20; s++) {
        const ir_step *st = &tb->steps[s];
        int ok = 1;
        if (st->op >= IR_OP_COUNT) {
          rt_diag_add(diag, "%s: rank %d tb %d step %d: unknown operation %d", ir_prog_where(p), r, t, s, st->op);
          bad++;
          continue;
        }
        unsigned fl = ir_op_flags[st->op];
        const char *op = ir_op_xml[st->op];
        if (st->cnt < 0 || (st->cnt < 1 && st->op != IR_OP_NOP)) {
          rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): count %d", ir_prog_where(p), r, t, s, op, st->cnt);
          bad++;
          continue;
        }
        if (st->nxdeps > IR_MAX_DEPS - 1) {
          rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): %d dependencies", ir_prog_where(p), r, t, s, op,
                      ir_step_ndeps(st));
          bad++;
          continue;
        }
        for (int k = 0; k < ir_step_ndeps(st); k++) {
          ir_dep d = ir_step_dep(st, k);
          if (d.tb < 0 || d.tb >= gp->ntbs || d.step < 0 || d.step >= gp->tbs[d.tb].nsteps) {
            rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): waits for tb %d step %d, which does not exist",
                        ir_prog_where(p), r, t, s, op, d.tb, d.step);
            ok = 0;
          }
        }
        if (((fl & IR_F_RECV) && tb->recv < 0) || ((fl & IR_F_SEND) && (tb->send < 0 || tb->send >= p->ngpus)) ||
            ((fl & IR_F_RECV) && tb->recv >= p->ngpus)) {
          rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): the thread block has no such peer (send %d, recv %d)",
                      ir_prog_where(p), r, t, s, op, tb->send, tb->recv);
          ok = 0;
        }
        if (st->op == IR_OP_NOP) { bad += !ok; continue; }
        if (fl & IR_F_COMP) {
          ok &= step_range(p, &geom[r], r, t, s, "computes", IR_BUF_INPUT, st->srcoff, 0, 0, st->cnt, inplace, r, diag);
          for (int k = 0; k < IR_MAX_ARGS; k++)
            if (st->args[k] >= p->noperands || (st->args[k] < 0 && st->args[k] != -1)) {
              rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): operand %d does not exist (the program has %d)",
                          ir_prog_where(p), r, t, s, op, st->args[k], p->noperands);
              ok = 0;
            }
        } else if ((fl & IR_F_SRC) || st->op == IR_OP_SEND) {
          ok &= step_range(p, &geom[r], r, t, s, "reads", st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt,
                           inplace, r, diag);
        }
        if ((fl & IR_F_DST) || st->op == IR_OP_REDUCE)
          ok &= step_range(p, &geom[r], r, t, s, "writes", st->dstbuf, st->dstoff, st->dstrun, st->dststride, st->cnt,
                           inplace, r, diag);
        if (fl & IR_F_DIRECT) {   /* the peer's chunks, in its geometry */
          int q = st->peer;
          if (q < 0 || q >= p->ngpus || q == r) {
            rt_diag_add(diag, "%s: rank %d tb %d step %d (%s): peer %d is not another rank", ir_prog_where(p), r, t, s,
                        op, q);
            bad++;
            continue;
          }
          if (fl & IR_F_GET)
            ok &= step_range(p, &geom[q], r, t, s, "reads", st->srcbuf, st->srcoff, st->srcrun, st->srcstride, st->cnt,
                             inplace, q, diag);
          if (fl & IR_F_PUT)
            ok &= step_range(p, &geom[q], r, t, s, "writes", st->dstbuf, st->dstoff, st->dstrun, st->dststride,
                             st->cnt, inplace, q, diag);
        }
        bad += !ok;
      }
    }
  }
  return bad ? BT_ERR_INVALID : BT_OK;
}

/* One run of p with options o (already checked by ip_cpu_verify); a
 * sources run tracks ranks src_base .. src_base + 64 * src_words - 1. */
static bt_result run_once(const ir_prog *p, const ip_cpu_opts *o, int inplace, int src_words, int src_base,
                          ip_cpu_report *rep, rt_diag *diag) {
  exec x;
  memset(&x, 0, sizeof x);
  x.p = p;
  x.o = o;
  bt_result res = BT_OK;
  post_bufs pb;
  memset(&pb, 0, sizeof pb);
  pb.src_words = x.src_words = src_words;
  pb.src_base = src_base;
  x.esize = post_esize(&pb, o);
  x.nslots = o->slots > 0 ? o->slots : (int)rt_param_int(RT_PARAM_EXEC_SLOTS);
  if (x.nslots < 1) x.nslots = 1;
  x.geom = calloc(p->ngpus, sizeof *x.geom);
  if (!x.geom) { res = BT_ERR_NOMEM; goto out; }
  int aliased = ir_prog_aliased(p, inplace);
  for (int r = 0; r < p->ngpus; r++) {
    bt_result g = ir_geom_init(&x.geom[r], p, r, o->count, aliased);
    if (g == BT_ERR_UNSUPPORTED)
      rt_diag_add(diag, "%s: count %lld is too large: rank %d's buffers would hold more than %lld elements, the "
                  "most baton addresses (this program takes a count of at most %lld)", ir_prog_where(p),
                  (long long)o->count, r, (long long)IR_GEOM_MAX_ELEMS, (long long)ir_geom_max_count(p, r, aliased));
    else if (g)
      rt_diag_add(diag, "%s: chunk counts do not fit the collective (run ir_check)", ir_prog_where(p));
    if (g) {
      res = BT_ERR_INVALID;
      goto out;
    }
  }
  if (p->interleave) {   /* the output's rows: whole chunks, tiles inside them */
    int64_t seg = ip_interleave_len(p, o->dims, IP_CPU_DIM, diag);
    for (int r = 0; seg >= 0 && r < p->ngpus; r++)
      if (ir_geom_interleave(&x.geom[r], seg)) {
        rt_diag_add(diag, "%s: count %lld does not fit the output's interleave %s = %lld: every chunk (%lld elements) "
                    "must be whole rows of it (a multiple of %lld fits)", ir_prog_where(p), (long long)o->count,
                    p->interleave, (long long)seg, (long long)x.geom[r].cap, (long long)(seg * x.geom[r].k));
        seg = -1;
      }
    if (seg < 0) { res = BT_ERR_INVALID; goto out; }
  }
  if ((res = check_steps(p, x.geom, inplace, diag))) goto out;
  int64_t tile = o->tile > 0 ? o->tile : rt_param_int(RT_PARAM_EXEC_TILE);
  x.tile = tile > 0 && tile < x.geom[0].cap ? tile : x.geom[0].cap;
  if (x.tile < 1) x.tile = 1;
  x.tile = ir_geom_tile_fit(&x.geom[0], x.tile, 1, 1);
  x.ntiles = ir_geom_ntiles(&x.geom[0], x.tile);
  CHECK_GOTO(exec_sizes(&x, diag), res, out);
  CHECK_GOTO(post_setup(&pb, p, o, x.geom, inplace, diag), res, out);
  x.in = pb.prog_in;
  x.out = pb.prog_out;
  x.opnd = pb.opnd;
  if ((res = exec_setup(&x, diag))) {
    if (res == BT_ERR_NOMEM)
      rt_diag_add(diag, "%s: out of memory for the executor's thread blocks, scratch and FIFO slots (%d per "
                  "connection of %lld bytes)", ir_prog_where(p), x.nslots, (long long)x.slot_bytes);
    goto out;
  }

  double t0 = rt_time_s();
  run_all(&x);
  rep->seconds += rt_time_s() - t0;
  rep->threads = (int)ir_prog_ntbs(p);
  rep->ntiles = x.ntiles;
  rep->steps += x.steps;
  rep->messages += x.messages;
  rep->bytes += x.bytes;
  if (x.alive > 0) {
    rt_diag_add(diag, "%s: deadlock: no thread block can make progress (%d of %ld are stuck)",
                ir_prog_where(p), x.alive, ir_prog_ntbs(p));
    for (int r = 0; r < p->ngpus; r++)
      for (int t = 0; t < p->gpus[r].ntbs; t++)
        if (x.tbs[r][t].state != TB_DONE) {
          char line[256];
          stuck_line(&x, &x.tbs[r][t], line, sizeof line);
          rt_diag_add(diag, "  %s", line);
        }
    res = BT_ERR_DEADLOCK;
    goto out;
  }
  post_finish(&pb, p, o, x.geom);
  int64_t checked = 0;
  res = post_check(&pb, p, o, x.geom, inplace, &checked, diag);
  rep->checked += checked;
out:
  post_free(&pb, p);
  exec_free(&x);
  return res;
}

const char *ip_cpu_verdict(bt_result r, int routes, char *buf, size_t n) {
  if (r == BT_ERR_DEADLOCK) snprintf(buf, n, "DEADLOCK");
  else if (r == BT_ERR_MISMATCH) snprintf(buf, n, "%s", routes ? "WRONG ROUTE" : "WRONG RESULT");
  else snprintf(buf, n, "FAILED (%s)", bt_result_str(r));
  return buf;
}

bt_result ip_cpu_verify_routes(const ir_prog *p, const ip_cpu_opts *like, ip_cpu_report *rep, rt_diag *diag) {
  if (ir_prog_fused(p) || p->interleave) {   /* computed values from varied operands: their value runs trace them */
    memset(rep, 0, sizeof *rep);
    return BT_OK;
  }
  ir_geom g;
  int64_t k = ir_geom_init(&g, p, 0, 1, 0) ? 1 : g.k;
  ip_cpu_opts o = {.sources = 1, .count = k < 1 ? 1 : k, .tile = 1, .inplace = like->inplace, .slots = like->slots,
                   .expect = like->expect, .dims = like->dims};
  return ip_cpu_verify(p, &o, rep, diag);
}

bt_result ip_cpu_verify(const ir_prog *p, const ip_cpu_opts *o, ip_cpu_report *rep, rt_diag *diag) {
  memset(rep, 0, sizeof *rep);
  int inplace = o->inplace < 0 ? p->inplace : o->inplace;
  if (inplace && !ir_prog_inplace_as_is(p)) {
    rt_diag_add(diag, "%s: the program is out-of-place; it cannot run in place%s", ir_prog_where(p),
                p->coll == IR_COLL_ALLTOALL ? " (it races with its input and output one buffer)" : "");
    return BT_ERR_INVALID;
  }
  if (o->count < 1) {
    rt_diag_add(diag, "%s: count must be at least 1", ir_prog_where(p));
    return BT_ERR_INVALID;
  }
  if (o->sources && ir_prog_fused(p)) {
    rt_diag_add(diag, "%s: a fused program computes its input from values; it cannot make a sources run",
                ir_prog_where(p));
    return BT_ERR_UNSUPPORTED;
  }
  if (!o->sources && !ip_compute_takes(p, o->dtype)) {
    rt_diag_add(diag, "%s: its compute steps do not take %s (they take %s)", ir_prog_where(p), ip_dtype_name[o->dtype],
                ip_compute_types(p));
    return BT_ERR_UNSUPPORTED;
  }
  if (p->coll == IR_COLL_CUSTOM && !o->expect) {
    /* the program's own postcondition (its expect attribute) */
    if (!p->expect) {
      rt_diag_add(diag, "%s: a custom collective needs --expect (or an expect attribute in the program) to say what its result must be",
                  ir_prog_where(p));
      return BT_ERR_INVALID;
    }
    ir_expect *e = NULL;
    bt_result r = ir_expect_parse(p->expect, "expect", &e, diag);
    if (r) return r;
    ip_cpu_opts own = *o;
    own.expect = e;
    r = ip_cpu_verify(p, &own, rep, diag);
    ir_expect_free(e);
    return r;
  }
  int passes = 1, words = o->sources ? post_src_words(p, o->src_words, &passes) : 0;
  bt_result res = BT_OK;
  for (int k = 0; k < passes && !res; k++, rep->passes++) res = run_once(p, o, inplace, words, k * 64 * words, rep, diag);
  return res;
}
