/* ir_geom.c -- buffer shapes of each collective. */
#include "ir_geom.h"

#include <string.h>

void ir_geom_blocks(ir_coll c, int n, int *in_blocks, int *out_blocks) {
  switch (c) {
  case IR_COLL_ALLGATHER:     *in_blocks = 1; *out_blocks = n; break;
  case IR_COLL_REDUCESCATTER: *in_blocks = n; *out_blocks = 1; break;
  case IR_COLL_ALLTOALL:      *in_blocks = n; *out_blocks = n; break;
  case IR_COLL_GATHER:        *in_blocks = 1; *out_blocks = n; break;
  case IR_COLL_SCATTER:       *in_blocks = n; *out_blocks = 1; break;
  default:                    *in_blocks = 1; *out_blocks = 1; break;
  }
}

/* a * b when it stays within [0, IR_GEOM_MAX_ELEMS], else -1 (a, b >= 0). */
static int64_t mul_in(int64_t a, int64_t b) {
  int64_t x;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &x) || x > IR_GEOM_MAX_ELEMS) return -1;
  return x;
}

bt_result ir_geom_init(ir_geom *g, const ir_prog *p, int rank, int64_t count, int inplace) {
  memset(g, 0, sizeof *g);
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  int per = ib > ob ? ib : ob;               /* blocks of the larger buffer */
  if (per < 1 || p->nchunksperloop < 1 || p->nchunksperloop % per || rank < 0 || rank >= p->ngpus)
    return BT_ERR_INVALID;
  if (count < 0 || count > IR_GEOM_MAX_ELEMS) return BT_ERR_UNSUPPORTED;
  g->k = p->nchunksperloop / per;
  g->count = count;
  g->cap = (count + g->k - 1) / g->k;        /* count <= 2^48: no overflow */
  const ir_gpu *gp = &p->gpus[rank];
  if (p->coll == IR_COLL_CUSTOM) {
    /* A custom collective's buffers are as large as the program says;
     * in place, input and output are one buffer. */
    int ic = gp->i_chunks, oc = gp->o_chunks;
    if (inplace) ic = oc = ic > oc ? ic : oc;
    g->chunks[IR_BUF_INPUT] = ic;
    g->chunks[IR_BUF_OUTPUT] = oc;
  } else {
    g->chunks[IR_BUF_INPUT] = ib * g->k;      /* ib * k <= nchunksperloop */
    g->chunks[IR_BUF_OUTPUT] = ob * g->k;
  }
  g->chunks[IR_BUF_SCRATCH] = gp->s_chunks;
  int bad = 0;
  for (int b = 0; b < IR_BUF_COUNT; b++) {
    if (g->chunks[b] < 0) return memset(g, 0, sizeof *g), BT_ERR_INVALID;
    bad |= mul_in(g->cap, g->chunks[b]) < 0;  /* a message of every chunk of the buffer */
  }
  for (int b = 0; b < 2; b++) {
    int64_t blocks = ((int64_t)g->chunks[b] + g->k - 1) / g->k;
    bad |= (g->elems[b] = mul_in(blocks, count)) < 0;
  }
  bad |= (g->elems[IR_BUF_SCRATCH] = mul_in(gp->s_chunks, g->cap)) < 0;
  /* NCCL's in-place conventions: allgather's input is the rank's block of
   * the output, reducescatter's output is the rank's block of the input. */
  g->in_at = g->out_at = 0;
  if (inplace && p->coll == IR_COLL_ALLGATHER) bad |= (g->in_at = mul_in(rank, count)) < 0;
  if (inplace && p->coll == IR_COLL_REDUCESCATTER) bad |= (g->out_at = mul_in(rank, count)) < 0;
  if (bad) { memset(g, 0, sizeof *g); return BT_ERR_UNSUPPORTED; }
  int64_t a = g->in_at + g->elems[IR_BUF_INPUT], b = g->out_at + g->elems[IR_BUF_OUTPUT];
  g->span = a > b ? a : b;                   /* sums of two values <= 2^48 */
  if (g->span > IR_GEOM_MAX_ELEMS) { memset(g, 0, sizeof *g); return BT_ERR_UNSUPPORTED; }
  return BT_OK;
}

int64_t ir_geom_total_chunks(const ir_prog *p) {
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  int per = ib > ob ? ib : ob;
  if (per < 1 || p->nchunksperloop < 1 || p->nchunksperloop % per) return -1;
  int64_t k = p->nchunksperloop / per, n = 0;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    if (p->coll == IR_COLL_CUSTOM) n += (int64_t)(g->i_chunks > 0 ? g->i_chunks : 0) + (g->o_chunks > 0 ? g->o_chunks : 0);
    else n += (ib + ob) * k;
    n += g->s_chunks > 0 ? g->s_chunks : 0;   /* ngpus * 3 * INT_MAX: no overflow */
  }
  return n;
}

int64_t ir_geom_max_count(const ir_prog *p, int rank, int inplace) {
  ir_geom g;
  if (ir_geom_init(&g, p, rank, 1, inplace)) return 0;
  int64_t lo = 1, hi = IR_GEOM_MAX_ELEMS;    /* ir_geom_init(lo) works; find the last that does */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (ir_geom_init(&g, p, rank, mid, inplace)) hi = mid - 1;
    else lo = mid;
  }
  return lo;
}

bt_result ir_geom_chunks(ir_geom *g, const ir_prog *p, int rank, int inplace) {
  bt_result res = ir_geom_init(g, p, rank, 0, inplace);
  return res ? res : ir_geom_init(g, p, rank, g->k, inplace);
}

bt_result ir_geom_interleave(ir_geom *g, int64_t seg) {
  if (seg < 1 || g->cap % seg || g->count % seg || g->k < 1) return BT_ERR_INVALID;
  g->seg = seg;
  g->oblocks = (int32_t)((g->chunks[IR_BUF_OUTPUT] + g->k - 1) / g->k);
  return BT_OK;
}

int64_t ir_geom_tile_fit(const ir_geom *g, int64_t tile, int64_t unit, int rows) {
  if (g->seg <= 0) return tile;
  if (rows && tile >= g->seg) return tile / g->seg * g->seg;
  if (unit < 1) unit = 1;
  for (int64_t t = (tile < g->seg ? tile : g->seg) / unit * unit; t >= unit; t -= unit)   /* done once per call */
    if (g->seg % t == 0) return t;
  return 0;
}
