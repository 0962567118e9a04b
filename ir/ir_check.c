/* ir_check.c -- static validation: every problem named by file, line, rank, tb and step. */
#include "ir_check.h"
#include "ir_check_int.h"
#include "ir_direct.h"
#include "ir_geom.h"
#include "ir_graph.h"
#include "ir_peers.h"
#include "rt_param.h"

#include <stdarg.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef ir_checker checker;

/* The bounds of rt_param.def that everything after the checks relies on
 * (the reader enforces them too; programs built in memory come here):
 * ranks, thread blocks per rank, steps per thread block, chunks.  Returns
 * 1 when one is exceeded (reported): the rest is not checked then. */
static int check_limits(checker *c) {
  const ir_prog *p = c->p;
  int64_t ranks = rt_param_int(RT_PARAM_MAX_RANKS), tbs = rt_param_int(RT_PARAM_IR_MAX_TBS);
  int64_t steps = rt_param_int(RT_PARAM_IR_MAX_STEPS), chunks = rt_param_int(RT_PARAM_MAX_CHUNKS);
  int bad = 0;
  if (p->ngpus < 1 || p->ngpus > ranks) {
    ir_check_err(c, -1, -1, -1, "ngpus=%d is out of range: 1 to the limit of %lld ranks (%s raises it)", p->ngpus,
             (long long)ranks, rt_param_name(RT_PARAM_MAX_RANKS));
    return 1;
  }
  for (int r = 0; r < p->ngpus && !bad; r++) {
    const ir_gpu *g = &p->gpus[r];
    if (g->ntbs > tbs) {
      ir_check_err(c, r, -1, -1, "%d thread blocks, over the limit of %lld per rank (%s raises it)", g->ntbs,
               (long long)tbs, rt_param_name(RT_PARAM_IR_MAX_TBS));
      bad = 1;
    }
    for (int t = 0; t < g->ntbs && !bad; t++)
      if (g->tbs[t].nsteps > steps) {
        ir_check_err(c, r, t, -1, "%d steps, over the limit of %lld per thread block (%s raises it)", g->tbs[t].nsteps,
                 (long long)steps, rt_param_name(RT_PARAM_IR_MAX_STEPS));
        bad = 1;
      }
  }
  int64_t n = ir_geom_total_chunks(p);
  if (n > chunks) {
    ir_check_err(c, -1, -1, -1, "the buffers of the %d ranks have %lld chunks together (i, o and s), over the limit of "
             "%lld (%s raises it)", p->ngpus, (long long)n, (long long)chunks, rt_param_name(RT_PARAM_MAX_CHUNKS));
    bad = 1;
  }
  return bad;
}

static void check_header(checker *c) {
  const ir_prog *p = c->p;
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  int per = ib > ob ? ib : ob;
  if (p->nchunksperloop % per)
    ir_check_err(c, -1, -1, -1, "nchunksperloop=%d is not a multiple of %d, the number of blocks of a %s over %d ranks",
             p->nchunksperloop, per, ir_coll_name[p->coll], p->ngpus);
  if (p->maxbytes && p->minbytes > p->maxbytes)
    ir_check_err(c, -1, -1, -1, "minBytes=%llu is larger than maxBytes=%llu",
             (unsigned long long)p->minbytes, (unsigned long long)p->maxbytes);
  if (p->inplace && (p->coll == IR_COLL_GATHER || p->coll == IR_COLL_SCATTER))
    ir_check_err(c, -1, -1, -1, "a %s program is out of place (the runtime runs in-place calls on a copy of the input)",
             ir_coll_name[p->coll]);
  if (p->interleave && ((p->coll != IR_COLL_ALLTOALL && p->coll != IR_COLL_ALLGATHER) || p->inplace))
    ir_check_err(c, -1, -1, -1, "interleave=\"%s\" is for out-of-place alltoall and allgather programs (an output of a "
             "block per rank), not an %s %s", p->interleave, p->inplace ? "in-place" : "out-of-place",
             ir_coll_name[p->coll]);
}

/* Peers, channels and one tb per (peer, channel) and direction: the
 * second and later tbs of a connection are named with the first (sorted
 * connection ends, not a comparison of every two tbs). */
static void check_tbs(checker *c, int r) {
  const ir_prog *p = c->p;
  const ir_gpu *g = &p->gpus[r];
  for (int t = 0; t < g->ntbs; t++) {
    const ir_tb *tb = &g->tbs[t];
    if (tb->send < -1 || tb->send >= p->ngpus || tb->send == r)
      ir_check_err(c, r, t, -1, "send peer %d is not another rank in [0, %d)", tb->send, p->ngpus);
    if (tb->recv < -1 || tb->recv >= p->ngpus || tb->recv == r)
      ir_check_err(c, r, t, -1, "recv peer %d is not another rank in [0, %d)", tb->recv, p->ngpus);
    if (tb->chan >= p->nchannels)
      ir_check_err(c, r, t, -1, "channel %d is out of range: the algo has nchannels=%d", tb->chan, p->nchannels);
  }
  for (int send = 1; send >= 0; send--) {
    int n;
    ir_conn_end *k = ir_conn_ends(g, send, &n);
    if (!k) { ir_check_err(c, r, -1, -1, "out of memory"); return; }
    for (int i = 1, first = 0; i < n; i++) {
      if (k[i].peer != k[first].peer || k[i].chan != k[first].chan) { first = i; continue; }
      if (send)
        ir_check_err(c, r, k[i].t, -1, "connection to rank %d on channel %d is already used for sending by tb %d",
                 k[i].peer, k[i].chan, k[first].t);
      else
        ir_check_err(c, r, k[i].t, -1, "connection from rank %d on channel %d is already used for receiving by tb %d",
                 k[i].peer, k[i].chan, k[first].t);
    }
    free(k);
  }
}

/* Operand declarations: a matrix has rows and cols, a vector a length. */
static void check_operands(checker *c) {
  const ir_prog *p = c->p;
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *o = &p->operands[k];
    if (!o->dim[0] || (o->kind == IR_OPND_MATRIX && !o->dim[1])) {
      rt_diag_add(c->diag, "%s:%d: operand %s: its %s is missing", ir_prog_where(p), o->line, o->name,
                  o->kind == IR_OPND_MATRIX ? "shape (rows, cols)" : "length");
      c->errors++;
    }
    int index = o->kind == IR_OPND_INDEX, integer = !strcmp(o->dtype, "i64") || !strcmp(o->dtype, "i32");
    int floating = !strcmp(o->dtype, "call") || !strcmp(o->dtype, "f32") || !strcmp(o->dtype, "f16") ||
                   !strcmp(o->dtype, "bf16");
    if (index ? !integer : !floating) {
      rt_diag_add(c->diag, "%s:%d: operand %s: a%s %s operand has dtype=\"%s\"; it takes %s", ir_prog_where(p), o->line,
                  o->name, index ? "n" : "", ir_okind_name[o->kind], o->dtype,
                  index ? "i64 or i32" : "\"call\" (the call's type), f32, f16 or bf16");
      c->errors++;
    }
  }
}

/* What each compute opcode needs of its operands' shapes, beyond their
 * kinds: gemv's matrix has a row per element of the input (rows="input")
 * and as many columns as the vector has elements. */
static void check_shapes(checker *c, int r, int t, int s, const ir_step *st) {
  const ir_prog *p = c->p;
  switch (st->op) {
  case IR_OP_GEMV:
  case IR_OP_GEMVS: {
    const ir_operand *a = &p->operands[st->args[0]], *x = &p->operands[st->args[1]];
    if (!a->dim[0] || !a->dim[1] || !x->dim[0]) return;   /* check_operands */
    if (strcmp(a->dim[0], IR_DIM_INPUT))
      ir_check_err(c, r, t, s, "%s: matrix %s has rows=\"%s\"; it needs rows=\"%s\", a row per element it computes",
               ir_op_xml[st->op], a->name, a->dim[0], IR_DIM_INPUT);
    if (strcmp(a->dim[1], x->dim[0]))
      ir_check_err(c, r, t, s, "%s: matrix %s has cols=\"%s\" but vector %s has len=\"%s\"; they must be the same dimension",
               ir_op_xml[st->op], a->name, a->dim[1], x->name, x->dim[0]);
    break;
  }
  case IR_OP_GEMM: {
    const ir_operand *x = &p->operands[st->args[0]], *w = &p->operands[st->args[1]];
    if (!x->dim[0] || !x->dim[1] || !w->dim[0] || !w->dim[1]) return;   /* check_operands */
    if (strcmp(x->dim[1], w->dim[0]))
      ir_check_err(c, r, t, s, "gemm: matrix %s has cols=\"%s\" but matrix %s has rows=\"%s\"; they must be the same "
               "dimension (F)", x->name, x->dim[1], w->name, w->dim[0]);
    if (!strcmp(x->dim[0], IR_DIM_INPUT) || !strcmp(w->dim[1], IR_DIM_INPUT) || !strcmp(x->dim[1], IR_DIM_INPUT))
      ir_check_err(c, r, t, s, "gemm: X [tokens, F] and W [F, H] have dimensions of their own, not \"%s\" (the input is "
               "tokens x H)", IR_DIM_INPUT);
    break;
  }
  case IR_OP_EBAG:
  case IR_OP_EBAGM: {
    const ir_operand *e = &p->operands[st->args[0]], *ix = &p->operands[st->args[1]], *of = &p->operands[st->args[2]];
    const ir_operand *w = st->args[3] >= 0 ? &p->operands[st->args[3]] : NULL;
    if (!e->dim[0] || !e->dim[1] || !ix->dim[0] || !of->dim[0] || (w && !w->dim[0])) return;   /* check_operands */
    if (!strcmp(e->dim[0], IR_DIM_INPUT) || !strcmp(e->dim[1], IR_DIM_INPUT))
      ir_check_err(c, r, t, s, "%s: table %s is [rows x D] of its own dimensions, not \"%s\"", ir_op_xml[st->op], e->name,
               IR_DIM_INPUT);
    if (!strcmp(ix->dim[0], of->dim[0]))
      ir_check_err(c, r, t, s, "%s: indices %s and offsets %s have the same length %s; the offsets are one per bag, plus one",
               ir_op_xml[st->op], ix->name, of->name, ix->dim[0]);
    if (w && strcmp(w->dim[0], ix->dim[0]))
      ir_check_err(c, r, t, s, "%s: weights %s have len=\"%s\" but indices %s have len=\"%s\" (a weight per index)",
               ir_op_xml[st->op], w->name, w->dim[0], ix->name, ix->dim[0]);
    break;
  }
  default: break;
  }
}

/* A compute step: it computes input chunks (srcbuf i), takes operands of
 * the kinds its opcode lists, and sync= belongs to compute thread blocks. */
static void check_compute(checker *c, int r, int t, int s, const ir_geom *geom) {
  const ir_prog *p = c->p;
  const ir_tb *tb = &p->gpus[r].tbs[t];
  const ir_step *st = &tb->steps[s];
  const char *op = ir_op_xml[st->op], *want = ir_op_args[st->op];
  if (!(ir_op_flags[st->op] & IR_F_COMP)) {
    if (st->sync != IR_SYNC_TILE) ir_check_err(c, r, t, s, "%s is not a compute step: it has no sync", op);
    return;
  }
  if (st->srcbuf != IR_BUF_INPUT)
    ir_check_err(c, r, t, s, "%s computes input chunks: srcbuf must be i (the elements whose values it computes), not %s",
             op, ir_buf_xml[st->srcbuf]);
  else if (st->cnt >= 1 && (st->srcoff < 0 || (long)st->srcoff + st->cnt > geom->chunks[IR_BUF_INPUT]))
    ir_check_err(c, r, t, s, "%s computes i[%d..%d], out of range: the input has %d chunks on this rank", op, st->srcoff,
             st->srcoff + st->cnt - 1, geom->chunks[IR_BUF_INPUT]);
  int bad = 0, least, most = ir_op_nargs(st->op, &least);
  for (int k = 0; k < IR_MAX_ARGS; k++) {
    int a = st->args[k];
    if (k >= most) {
      if (a >= 0) { ir_check_err(c, r, t, s, "%s takes %d operands, not more", op, most); bad = 1; }
      break;
    }
    if (a < 0 && k >= least) {   /* an optional operand left out: none after it */
      for (int j = k + 1; j < IR_MAX_ARGS; j++)
        if (st->args[j] >= 0) { ir_check_err(c, r, t, s, "%s: operand %d is given after a missing one", op, j + 1); bad = 1; }
      break;
    }
    char kind = (char)toupper((unsigned char)want[k]);
    if (a < 0 || a >= p->noperands) {
      ir_check_err(c, r, t, s, "%s: operand %d is missing (it takes %s)", op, k + 1, want);
      bad = 1;
    } else if (ir_okind_letter[p->operands[a].kind] != kind) {
      ir_check_err(c, r, t, s, "%s: operand %d, %s, is a%s %s; it must be a%s %s", op, k + 1, p->operands[a].name,
               p->operands[a].kind == IR_OPND_INDEX ? "n" : "", ir_okind_name[p->operands[a].kind],
               kind == 'I' ? "n" : "", kind == 'M' ? "matrix" : kind == 'V' ? "vector" : "index");
      bad = 1;
    }
  }
  if (!bad) check_shapes(c, r, t, s, st);
  if (p->interleave && p->ngpus > 1 && st->dstbuf == IR_BUF_OUTPUT)
    ir_check_err(c, r, t, s, "%s stores into the interleaved output (interleave=\"%s\"), whose rows are apart: compute into "
             "the input and copy or send the chunks there", op, p->interleave);
  if (!ir_tb_compute(tb) && st->sync != IR_SYNC_TILE)
    ir_check_err(c, r, t, s, "sync=\"%s:%d\" is for steps of compute thread blocks (no peers, only compute steps, no "
             "waits); here the step runs in its thread block's order", ir_sync_name[st->sync], st->sync_param);
}

/* A step's range in a sweep: [lo, hi) of one buffer, its tb and step, and
 * a class (steps of one class may overlap). */
typedef struct span { int buf; long lo, hi; int t, s; long cls; } span;

static int span_cmp(const void *x, const void *y) {
  const span *a = x, *b = y;
  if (a->buf != b->buf) return a->buf - b->buf;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->t != b->t) return a->t - b->t;
  return a->s - b->s;
}

/* Sweeps n spans sorted by (buf, lo): for each one that overlaps an
 * earlier-sorted span of another class, calls found(c, r, later, other)
 * with the one later in (tb, step) order first.  Keeps the largest end
 * of two classes, so that it is one pass: at most one report per span. */
static void sweep(checker *c, int r, span *v, long n, void (*found)(checker *, int, const span *, const span *)) {
  qsort(v, n, sizeof *v, span_cmp);
  const span *best = NULL, *second = NULL;   /* largest hi; largest hi of another class than best's */
  for (long i = 0; i < n; i++) {
    const span *x = &v[i];
    if (best && best->buf != x->buf) best = second = NULL;
    const span *o = best && best->cls != x->cls && best->hi > x->lo ? best
                    : second && second->cls != x->cls && second->hi > x->lo ? second : NULL;
    if (o) {
      int later = x->t > o->t || (x->t == o->t && x->s > o->s);
      found(c, r, later ? x : o, later ? o : x);
    }
    if (!best || x->hi > best->hi) {
      if (best && best->cls != x->cls) second = best;
      else if (second && second->cls == x->cls) second = NULL;
      best = x;
    } else if (x->cls != best->cls && (!second || x->hi > second->hi)) {
      second = x;
    }
  }
}

static void two_writers(checker *c, int r, const span *a, const span *b) {
  const ir_step *st = &c->p->gpus[r].tbs[a->t].steps[a->s];
  char range[48];
  if (st->cnt > 1) snprintf(range, sizeof range, "%s[%d..%d]", ir_buf_xml[st->dstbuf], st->dstoff, st->dstoff + st->cnt - 1);
  else snprintf(range, sizeof range, "%s[%d]", ir_buf_xml[st->dstbuf], st->dstoff);
  ir_check_err(c, r, a->t, a->s, "%s writes %s, as step %d of this compute thread block does: its steps run in any order, "
           "so they must write different chunks", ir_op_xml[st->op], range, b->s);
}

static void two_values(checker *c, int r, const span *a, const span *b) {
  const ir_step *st = &c->p->gpus[r].tbs[a->t].steps[a->s];
  ir_check_err(c, r, a->t, a->s, "%s computes input chunks that tb %d step %d computes too, from other operands or by "
           "another computation: an input chunk has one value", ir_op_xml[st->op], b->t, b->s);
}

/* The compute steps of rank r together: a compute thread block runs its
 * steps in any order and in parallel, so no two may write one chunk; and
 * an input chunk has one value: every step that computes it computes it
 * alike (the same computation from the same operands).  Sorted sweeps,
 * not a comparison of every two steps. */
static void check_compute_overlaps(checker *c, int r) {
  const ir_gpu *g = &c->p->gpus[r];
  long n = 0;
  for (int t = 0; t < g->ntbs; t++) n += g->tbs[t].nsteps;
  span *v = malloc(((size_t)n + 1) * sizeof *v);
  if (!v) { ir_check_err(c, r, -1, -1, "out of memory"); return; }
  for (int t = 0; t < g->ntbs; t++) {
    const ir_tb *tb = &g->tbs[t];
    if (!ir_tb_compute(tb)) continue;
    long m = 0;
    for (int s = 0; s < tb->nsteps; s++) {
      const ir_step *st = &tb->steps[s];
      v[m++] = (span){st->dstbuf, st->dstoff, (long)st->dstoff + st->cnt, t, s, s};   /* every step its own class */
    }
    sweep(c, r, v, m, two_writers);
  }
  long m = 0;
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      if (!(ir_op_flags[st->op] & IR_F_COMP) || st->cnt < 1) continue;
      long cls = (st->op == IR_OP_GEMV || st->op == IR_OP_GEMVS);   /* alike: the same kind, the same operands */
      for (int k = 0; k < IR_MAX_ARGS; k++) cls = cls * 256 + (st->args[k] + 1);
      v[m++] = (span){st->srcbuf, st->srcoff, (long)st->srcoff + st->cnt, t, s, cls};
    }
  sweep(c, r, v, m, two_values);
  free(v);
}

/* Rooted collectives, off the root: a broadcast's caller gives no input
 * there (the send buffer may be NULL) and a reduce's caller no output,
 * and a reduce's input is the caller's, read only.  So an out-of-place
 * broadcast leaves its input alone and a reduce writes neither buffer and
 * (out of place) never reads its output; partial results go to scratch.
 * (An in-place broadcast addresses one buffer, the output: reading it
 * before receiving is caught by verification, not here.)  rd and wr: the
 * buffers of rank owner that step s reads and writes, or -1. */
static void rooted_side(checker *c, int r, int t, int s, int owner, int rd, int wr) {
  const ir_prog *p = c->p;
  int unused = ir_coll_unused(p->coll);
  if (unused < 0 || owner == p->root) return;
  const char *coll = ir_coll_name[p->coll];
  char whose[32] = "its";   /* a direct step's remote side: the peer's buffers */
  if (owner != r) snprintf(whose, sizeof whose, "rank %d's", owner);
  if (unused == IR_BUF_INPUT && !p->inplace && (rd == IR_BUF_INPUT || wr == IR_BUF_INPUT))
    ir_check_err(c, r, t, s, "%s %s input, which a %s has only on the root (rank %d)",
             rd == IR_BUF_INPUT ? "reads" : "writes", whose, coll, p->root);
  if (unused == IR_BUF_OUTPUT && (wr == IR_BUF_INPUT || wr == IR_BUF_OUTPUT))
    ir_check_err(c, r, t, s, "writes %s %s: off the root (rank %d) a %s has no output and leaves its input alone "
             "(partial results go to scratch)", whose, wr == IR_BUF_INPUT && !p->inplace ? "input" : "output", p->root,
             coll);
  else if (unused == IR_BUF_OUTPUT && !p->inplace && rd == IR_BUF_OUTPUT)
    ir_check_err(c, r, t, s, "reads %s output, which a %s has only on the root (rank %d)", whose, coll, p->root);
}

/* Dependency d of step s of tb t, rank r (g): an existing step of
 * another tb of the rank, which signals. */
static void check_dep(ir_checker *c, const ir_gpu *g, int r, int t, int s, ir_dep d) {
  if (d.tb < 0 || d.tb >= g->ntbs)
    ir_check_err(c, r, t, s, "depends on tb %d, which does not exist (rank %d has %d thread blocks)", d.tb, r, g->ntbs);
  else if (d.tb == t)
    ir_check_err(c, r, t, s, "depends on its own thread block (step %d); steps of one tb already run in order", d.step);
  else if (d.step < 0 || d.step >= g->tbs[d.tb].nsteps)
    ir_check_err(c, r, t, s, "depends on tb %d step %d, which does not exist (tb %d has %d steps)", d.tb, d.step, d.tb,
                 g->tbs[d.tb].nsteps);
  else if (!g->tbs[d.tb].steps[d.step].hasdep)
    ir_check_err(c, r, t, s, "depends on tb %d step %d, which does not signal (hasdep=0)", d.tb, d.step);
}

/* The rules above for both sides of step st: its own buffers, and a
 * direct step's peer's (a put's destination, a get's source). */
static void check_rooted(checker *c, int r, int t, int s, const ir_step *st) {
  unsigned fl = ir_op_flags[st->op];
  if (st->cnt < 1) return;
  const int swap = (fl & IR_F_SWAP) != 0;   /* xchg: each side read and written */
  rooted_side(c, r, t, s, r, (fl & IR_F_SRC) ? st->srcbuf : -1, (fl & IR_F_DST) ? st->dstbuf : swap ? st->srcbuf : -1);
  if ((fl & (IR_F_PUT | IR_F_GET)) && ir_peer_ok(c->p, r, st))
    rooted_side(c, r, t, s, st->peer, (fl & IR_F_GET) ? st->srcbuf : swap ? st->dstbuf : -1,
                (fl & IR_F_PUT) ? st->dstbuf : -1);
}

static void check_steps(checker *c, int r) {
  const ir_prog *p = c->p;
  const ir_gpu *g = &p->gpus[r];
  ir_geom geom;
  if (ir_geom_init(&geom, p, r, 1, p->inplace)) return;  /* reported by check_header */
  if (p->coll != IR_COLL_CUSTOM) {
    if (g->i_chunks > geom.chunks[IR_BUF_INPUT])
      ir_check_err(c, r, -1, -1, "i_chunks=%d but a %s's input holds %d chunks", g->i_chunks,
               ir_coll_name[p->coll], geom.chunks[IR_BUF_INPUT]);
    if (g->o_chunks > geom.chunks[IR_BUF_OUTPUT])
      ir_check_err(c, r, -1, -1, "o_chunks=%d but a %s's output holds %d chunks", g->o_chunks,
               ir_coll_name[p->coll], geom.chunks[IR_BUF_OUTPUT]);
  }
  for (int t = 0; t < g->ntbs; t++) {
    const ir_tb *tb = &g->tbs[t];
    for (int s = 0; s < tb->nsteps; s++) {
      const ir_step *st = &tb->steps[s];
      unsigned fl = ir_op_flags[st->op];
      const char *op = ir_op_xml[st->op];
      if ((fl & IR_F_SEND) && tb->send < 0)
        ir_check_err(c, r, t, s, "%s sends, but the thread block has no send peer", op);
      if ((fl & IR_F_RECV) && tb->recv < 0)
        ir_check_err(c, r, t, s, "%s receives, but the thread block has no recv peer", op);
      if (st->op != IR_OP_NOP && !(fl & (IR_F_SIG | IR_F_WAIT)) && st->cnt < 1)   /* signals: ir_check_direct.c */
        ir_check_err(c, r, t, s, "%s has cnt=%d; it must move at least one chunk", op, st->cnt);
      if (!(fl & IR_F_DIRECT) && st->peer >= 0)
        ir_check_err(c, r, t, s, "%s has peer=%d; only direct steps (put, get, getr, xchg, sig, wait) name a peer", op, st->peer);
      /* A nop moves nothing, but executors size their FIFO slots by the
       * largest cnt: it may name no more chunks than a buffer holds. */
      if (st->op == IR_OP_NOP && st->cnt > geom.chunks[IR_BUF_INPUT] && st->cnt > geom.chunks[IR_BUF_OUTPUT] &&
          st->cnt > geom.chunks[IR_BUF_SCRATCH])
        ir_check_err(c, r, t, s, "nop has cnt=%d, more chunks than any buffer of the rank holds", st->cnt);
      if (st->cnt >= 1) {
        if (fl & IR_F_SRC)
          ir_check_range(c, r, t, s, "source", st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride, &geom, r);
        if (fl & IR_F_DST)
          ir_check_range(c, r, t, s, "destination", st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride, &geom,
                         r);
      }
      if ((fl & IR_F_COMP) && ir_step_strided(st))
        ir_check_err(c, r, t, s, "%s is strided (srcrun/dstrun): compute steps move consecutive chunks", op);
      /* a send names its receiver's destination (pattern included) in its own, a put or get the peer's */
      int nosrc = st->srcrun > 0 && !(fl & (IR_F_SRC | IR_F_GET));
      if (nosrc || (st->dstrun > 0 && !(fl & (IR_F_DST | IR_F_SEND | IR_F_PUT))))
        ir_check_err(c, r, t, s, "%s has a %s pattern (%s) but no %s", op, nosrc ? "source" : "destination",
                 nosrc ? "srcrun" : "dstrun", nosrc ? "source" : "destination");
      check_compute(c, r, t, s, &geom);
      check_rooted(c, r, t, s, st);
      if ((st->depid < 0) != (st->deps < 0))
        ir_check_err(c, r, t, s, "depid=%d and deps=%d: both or neither must be -1", st->depid, st->deps);
      else if (st->nxdeps > IR_MAX_DEPS - 1 || (st->nxdeps && st->depid < 0))
        ir_check_err(c, r, t, s, "%d dependencies after depid=%d (at most %d, and only after a first)", st->nxdeps,
                     st->depid, IR_MAX_DEPS - 1);
      else
        for (int k = 0; k < ir_step_ndeps(st); k++) check_dep(c, g, r, t, s, ir_step_dep(st, k));
    }
  }
  check_compute_overlaps(c, r);
}

/* ---- connections ---- */


/* The k-th message a tb sends (or receives) is its k-th step with the SEND
 * (RECV) flag; those must pair one to one, with equal sizes.  A sending
 * step that writes nothing locally (s, rrs) names in dstbuf/dstoff where
 * the receiver puts the data, as MSCCL's compiler writes it; when both
 * sides name it, they must agree, which catches sends and receives in
 * different orders. */
static void check_pairing(checker *c, const ir_peers *pe) {
  const ir_prog *p = c->p;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    for (int t = 0; t < g->ntbs; t++) {
      const ir_tb *tb = &g->tbs[t];
      int nsend = 0;
      for (int s = 0; s < tb->nsteps; s++) nsend += (ir_op_flags[tb->steps[s].op] & IR_F_SEND) != 0;
      if (tb->recv >= 0 && pe->recv_tb[r][t] < 0) {
        int nrecv = 0;
        for (int s = 0; s < tb->nsteps; s++) nrecv += (ir_op_flags[tb->steps[s].op] & IR_F_RECV) != 0;
        if (nrecv)
          ir_check_err(c, r, t, -1, "receives from rank %d on channel %d, but no thread block of rank %d sends to rank %d on channel %d",
                   tb->recv, tb->chan, tb->recv, r, tb->chan);
      }
      if (tb->send < 0) continue;
      int q = tb->send, u = pe->send_tb[r][t];
      if (u < 0) {
        if (nsend)
          ir_check_err(c, r, t, -1, "sends to rank %d on channel %d, but no thread block of rank %d receives from rank %d on channel %d",
                   q, tb->chan, q, r, tb->chan);
        continue;
      }
      const ir_tb *rt = &p->gpus[q].tbs[u];
      int a = 0, b = 0, m = 0;
      for (;; a++, b++, m++) {
        a = ir_tb_next(tb, a, IR_F_SEND);
        b = ir_tb_next(rt, b, IR_F_RECV);
        if (a >= tb->nsteps || b >= rt->nsteps) break;
        const ir_step *ss = &tb->steps[a], *rs = &rt->steps[b];
        if (ss->cnt != rs->cnt)
          ir_check_err(c, r, t, a, "message %d to rank %d channel %d has cnt=%d, but rank %d tb %d step %d receives it with cnt=%d",
                   m, q, tb->chan, ss->cnt, q, u, b, rs->cnt);
        else if (!(ir_op_flags[ss->op] & IR_F_DST) && ss->dstoff >= 0 && rs->dstoff >= 0 &&
                 (ss->dstbuf != rs->dstbuf || ss->dstoff != rs->dstoff || ss->dstrun != rs->dstrun ||
                  (ss->dstrun > 0 && ss->dststride != rs->dststride)))
          ir_check_err(c, r, t, a, "message %d to rank %d channel %d is meant for %s[%d]%s, but rank %d tb %d step %d (%s) puts it in %s[%d]%s: sends and receives are out of order",
                   m, q, tb->chan, ir_buf_xml[ss->dstbuf], ss->dstoff, ss->dstrun > 0 ? " (strided)" : "", q, u, b,
                   ir_op_xml[rs->op], ir_buf_xml[rs->dstbuf], rs->dstoff, rs->dstrun > 0 ? " (strided)" : "");
      }
      int ns = 0, nr = 0;
      for (int s = 0; s < tb->nsteps; s++) ns += (ir_op_flags[tb->steps[s].op] & IR_F_SEND) != 0;
      for (int s = 0; s < rt->nsteps; s++) nr += (ir_op_flags[rt->steps[s].op] & IR_F_RECV) != 0;
      if (ns != nr)
        ir_check_err(c, r, t, -1, "sends %d messages to rank %d on channel %d, but rank %d tb %d receives %d",
                 ns, q, tb->chan, q, u, nr);
    }
  }
}

/* ---- cycles ---- */

/* prov without its folders ("algorithms/ring.lua:12" -> "ring.lua:12"):
 * the error's own location gives the whole path once. */
static const char *prov_base(const char *prov) {
  const char *slash = strrchr(prov, '/');
  return slash ? slash + 1 : prov;
}

/* " (ring.lua:12)" for the run of steps a..b of one tb: the provenance of
 * its first step, and of its last where that differs ("ring.lua:12..14",
 * or "a.lua:3, b.lua:4" across files); "" when the steps carry none. */
static void run_prov(const ir_tb *tb, int a, int b, char *buf, size_t cap) {
  const char *x = tb->steps[a].prov, *y = tb->steps[b].prov;
  buf[0] = 0;
  if (!x || !*x) x = y;
  if (!x || !*x) return;
  x = prov_base(x);
  if (!y || !*y || !strcmp(prov_base(y), x)) { snprintf(buf, cap, " (%s)", x); return; }
  y = prov_base(y);
  const char *cx = strrchr(x, ':'), *cy = strrchr(y, ':');
  if (cx && cy && cx - x == cy - y && !strncmp(x, y, (size_t)(cx - x))) snprintf(buf, cap, " (%s..%s)", x, cy + 1);
  else snprintf(buf, cap, " (%s, %s)", x, y);
}

/* Writes the cycle cyc[0..m) (nodes of gr; via[v] the edge that entered
 * v, cyc[0] entered from cyc[m-1]) into path: one "rank R tb T step A[..B]
 * (script:line)" per run of program order, joined by the kind of the edge
 * that leaves it, ending in "back".  Bounded by cap: runs that do not fit
 * are left out, and "... (K more runs of steps) back" says so. */
static void describe_cycle(const ir_prog *p, const ir_graph *gr, const long *cyc, long m, const long *via,
                           char *path, size_t cap) {
  static const char *const kind[] = {"order", "dependency", "message", "slot", "signal", "landing"};
  size_t len = 0;
  long left = 0;   /* runs that did not fit */
  path[0] = 0;
  for (long j = 0; j < m; ) {
    long x = cyc[j], y = x;
    while (j + 1 < m && gr->kind[via[cyc[j + 1]]] == IR_EDGE_ORDER) y = cyc[++j];
    j++;
    int k = gr->kind[via[j < m ? cyc[j] : cyc[0]]];
    if (left) { left++; continue; }
    char pv[200], item[320];
    run_prov(&p->gpus[gr->node_r[x]].tbs[gr->node_t[x]], gr->node_s[x], gr->node_s[y], pv, sizeof pv);
    int n = snprintf(item, sizeof item, "rank %d tb %d step %d", gr->node_r[x], gr->node_t[x], gr->node_s[x]);
    if (y != x) n += snprintf(item + n, sizeof item - n, "..%d", gr->node_s[y]);
    snprintf(item + n, sizeof item - n, "%s -[%s]-> ", pv, kind[k]);
    if (len + strlen(item) + 48 < cap) len += (size_t)snprintf(path + len, cap - len, "%s", item);
    else left = 1;
  }
  if (left) snprintf(path + len, cap - len, "... (%ld more run%s of steps) back", left, left == 1 ? "" : "s");
  else snprintf(path + len, cap - len, "back");
}

/* Finds a cycle with an iterative DFS over gr (the graph of p).  Returns
 * 1 and describes it in path (describe_cycle), with *at its first node; 0
 * when there is none; -1 when out of memory. */
static int find_cycle(const ir_prog *p, const ir_graph *gr, char *path, size_t cap, long *at) {
  long n = gr->n;
  int found = -1;
  long *stack = malloc((n + 1) * sizeof(long)), *cur = malloc((n + 1) * sizeof(long)), *via = malloc((n + 1) * sizeof(long));
  unsigned char *state = calloc(n + 1, 1);   /* 1 on the stack, 2 done */
  if (!stack || !cur || !via || !state) goto out;
  found = 0;
  for (long root = 0; root < n && !found; root++) {
    if (state[root]) continue;
    long sp = 0;
    stack[sp++] = root; state[root] = 1; cur[root] = gr->succ_off[root];
    while (sp) {
      long v = stack[sp - 1];
      if (cur[v] == gr->succ_off[v + 1]) { state[v] = 2; sp--; continue; }
      long e = cur[v]++, w = gr->succ[e];
      if (state[w] == 2) continue;
      via[w] = e;   /* the edge that led to w (for the labels) */
      if (state[w] == 0) { stack[sp++] = w; state[w] = 1; cur[w] = gr->succ_off[w]; continue; }
      long i = sp - 1;
      while (stack[i] != w) i--;
      describe_cycle(p, gr, stack + i, sp - i, via, path, cap);
      *at = w;
      found = 1;
      break;
    }
  }
out:
  free(stack); free(cur); free(via); free(state);
  return found;
}

/* The most messages any connection carries per tile. */
static long max_messages(const ir_prog *p) {
  long most = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      long k = 0;
      for (int s = 0; s < tb->nsteps; s++) k += (ir_op_flags[tb->steps[s].op] & IR_F_SEND) != 0;
      if (k > most) most = k;
    }
  return most;
}

/* Deadlock freedom: no cycle through program order, dependencies and
 * messages (and a direct program's signals and landings); then, where
 * some connection carries more than `slots` messages per tile, none
 * through slot edges either (ir_graph.h).  With no cycle, a direct
 * program's ordering rules (ir_direct_order) over the same graph. */
static void check_cycles(checker *c, const ir_peers *pe, int slots) {
  const ir_prog *p = c->p;
  char path[640];
  long at;
  int direct = ir_prog_direct(p);
  for (int pass = 0; pass < 2; pass++) {
    int s = pass ? slots : 0;
    if (pass && (slots <= 0 || max_messages(p) <= slots)) return;
    ir_graph gr;
    if (ir_graph_build(p, pe, s, &gr)) return;
    int found = find_cycle(p, &gr, path, sizeof path, &at);
    if (found > 0 && !pass && direct)
      ir_check_err(c, gr.node_r[at], gr.node_t[at], gr.node_s[at],
               "dependency cycle through program order, dependencies, signals and landings (-[signal]-> : the wait "
               "takes that sig; -[landing]-> : the step reads what that put lands): %s", path);
    else if (found > 0 && !pass)
      ir_check_err(c, gr.node_r[at], gr.node_t[at], gr.node_s[at],
               "dependency cycle through program order, dependencies and messages: %s", path);
    else if (found > 0)
      ir_check_err(c, gr.node_r[at], gr.node_t[at], gr.node_s[at],
               "deadlock with %d FIFO slot%s per connection: a cycle through program order, dependencies, messages and full slots "
               "(-[slot]-> : the send waits until that receive frees a slot): %s",
               slots, slots == 1 ? "" : "s", path);
    if (!found && !pass && direct) ir_direct_order(c, &gr);
    ir_graph_free(&gr);
    if (found) return;
  }
}

bt_result ir_check(const ir_prog *p, rt_diag *diag) { return ir_check_slots(p, 0, diag); }

bt_result ir_check_slots(const ir_prog *p, int slots, rt_diag *diag) {
  checker c = {p, diag, 0};
  if (slots <= 0) slots = (int)rt_param_int(RT_PARAM_EXEC_SLOTS);
  if (check_limits(&c)) return BT_ERR_INVALID;
  check_header(&c);
  check_operands(&c);
  for (int r = 0; r < p->ngpus; r++) check_tbs(&c, r);
  for (int r = 0; r < p->ngpus; r++) check_steps(&c, r);
  if (ir_prog_direct(p)) ir_direct_check(&c);
  if (c.errors) return BT_ERR_INVALID;
  ir_peers pe;
  if (ir_peers_build(p, &pe)) return BT_ERR_NOMEM;
  check_pairing(&c, &pe);
  if (!c.errors) check_cycles(&c, &pe, slots);
  ir_peers_free(&pe);
  return c.errors ? BT_ERR_INVALID : BT_OK;
}
