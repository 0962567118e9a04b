/* ir_wire.c -- what a program's ranks exchange, compared across programs
 * (ir_wire.h). */
#include "ir_wire.h"

/* The bits of a step's op that cross ranks. */
#define WIRE_FLAGS (IR_F_SEND | IR_F_RECV | IR_F_DIRECT)

static int crosses(const ir_step *s) { return (ir_op_flags[s->op] & WIRE_FLAGS) != 0; }

/* The index of tb's next step at or after k that crosses ranks, or
 * tb->nsteps. */
static int next_wire(const ir_tb *tb, int k) {
  while (k < tb->nsteps && !crosses(&tb->steps[k])) k++;
  return k;
}

/* Whether steps x and y do the same between ranks. */
static int step_same(const ir_step *x, const ir_step *y) {
  const unsigned fx = ir_op_flags[x->op], fy = ir_op_flags[y->op];
  if ((fx & WIRE_FLAGS) != (fy & WIRE_FLAGS) || x->cnt != y->cnt || x->peer != y->peer) return 0;
  if (fx & IR_F_PUT)   /* the place in the peer's memory: scratch only */
    return x->dstbuf == IR_BUF_SCRATCH && y->dstbuf == IR_BUF_SCRATCH && x->dstoff == y->dstoff &&
           x->dstrun == y->dstrun && x->dststride == y->dststride;
  if (fx & IR_F_GET)
    return x->srcbuf == IR_BUF_SCRATCH && y->srcbuf == IR_BUF_SCRATCH && x->srcoff == y->srcoff &&
           x->srcrun == y->srcrun && x->srcstride == y->srcstride;
  return 1;
}

/* Whether tb stays on its rank: no connection, no step that crosses. */
static int tb_local(const ir_tb *tb) { return tb->send < 0 && tb->recv < 0 && next_wire(tb, 0) == tb->nsteps; }

/* The index of g's next thread block at or after t that does not stay on
 * its rank, or g->ntbs. */
static int next_tb(const ir_gpu *g, int t) {
  while (t < g->ntbs && tb_local(&g->tbs[t])) t++;
  return t;
}

static int tb_same(const ir_tb *x, const ir_tb *y) {
  if (x->send != y->send || x->recv != y->recv || x->chan != y->chan) return 0;
  int i = next_wire(x, 0), j = next_wire(y, 0);
  for (; i < x->nsteps && j < y->nsteps; i = next_wire(x, i + 1), j = next_wire(y, j + 1))
    if (!step_same(&x->steps[i], &y->steps[j])) return 0;
  return i == x->nsteps && j == y->nsteps;
}

/* Whether p has a step that reaches another rank's memory or flags. */
static int has_direct(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int k = 0; k < p->gpus[r].tbs[t].nsteps; k++)
        if (ir_op_direct(p->gpus[r].tbs[t].steps[k].op)) return 1;
  return 0;
}

int ir_wire_same(const ir_prog *a, const ir_prog *b) {
  if (a == b) return 1;
  if (!a || !b || a->coll != b->coll || a->ngpus != b->ngpus || a->proto != b->proto ||
      a->nchunksperloop != b->nchunksperloop || a->slots != b->slots || a->nthreads != b->nthreads)
    return 0;
  /* A FIFO program's scratch is its rank's own; a direct one's is where
   * its peers put, and its size sets the slices a call runs in. */
  const int direct = has_direct(a) || has_direct(b);
  for (int r = 0; r < a->ngpus; r++) {
    const ir_gpu *x = &a->gpus[r], *y = &b->gpus[r];
    if (direct && x->s_chunks != y->s_chunks) return 0;
    int t = next_tb(x, 0), u = next_tb(y, 0);
    for (; t < x->ntbs && u < y->ntbs; t = next_tb(x, t + 1), u = next_tb(y, u + 1))
      if (!tb_same(&x->tbs[t], &y->tbs[u])) return 0;
    if (t < x->ntbs || u < y->ntbs) return 0;
  }
  return 1;
}
