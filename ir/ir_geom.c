/* ir_geom.c -- buffer shapes of each collective. */
#include "ir_geom.h"

#include <string.h>

void ir_geom_blocks(ir_coll c, int n, int *in_blocks, int *out_blocks) {
  switch (c) {
  case IR_COLL_ALLGATHER:     *in_blocks = 1; *out_blocks = n; break;
  case IR_COLL_REDUCESCATTER: *in_blocks = n; *out_blocks = 1; break;
  case IR_COLL_ALLTOALL:      *in_blocks = n; *out_blocks = n; break;
  default:                    *in_blocks = 1; *out_blocks = 1; break;
  }
}

bt_result ir_geom_init(ir_geom *g, const ir_prog *p, int rank, int64_t count, int inplace) {
  memset(g, 0, sizeof *g);
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  int per = ib > ob ? ib : ob;               /* blocks of the larger buffer */
  if (p->nchunksperloop % per) return BT_ERR_INVALID;
  g->k = p->nchunksperloop / per;
  g->count = count;
  g->cap = (count + g->k - 1) / g->k;
  const ir_gpu *gp = &p->gpus[rank];
  if (p->coll == IR_COLL_CUSTOM) {
    /* A custom collective's buffers are as large as the program says;
     * in place, input and output are one buffer. */
    int ic = gp->i_chunks, oc = gp->o_chunks;
    if (inplace) ic = oc = ic > oc ? ic : oc;
    g->chunks[IR_BUF_INPUT] = ic;
    g->chunks[IR_BUF_OUTPUT] = oc;
  } else {
    g->chunks[IR_BUF_INPUT] = ib * g->k;
    g->chunks[IR_BUF_OUTPUT] = ob * g->k;
  }
  g->chunks[IR_BUF_SCRATCH] = gp->s_chunks;
  for (int b = 0; b < 2; b++) {
    int blocks = (g->chunks[b] + g->k - 1) / g->k;
    g->elems[b] = (int64_t)blocks * count;
  }
  g->elems[IR_BUF_SCRATCH] = (int64_t)gp->s_chunks * g->cap;
  /* NCCL's in-place conventions: allgather's input is the rank's block of
   * the output, reducescatter's output is the rank's block of the input. */
  g->in_at = g->out_at = 0;
  if (inplace && p->coll == IR_COLL_ALLGATHER) g->in_at = (int64_t)rank * count;
  if (inplace && p->coll == IR_COLL_REDUCESCATTER) g->out_at = (int64_t)rank * count;
  int64_t a = g->in_at + g->elems[IR_BUF_INPUT], b = g->out_at + g->elems[IR_BUF_OUTPUT];
  g->span = a > b ? a : b;
  return BT_OK;
}

bt_result ir_geom_chunks(ir_geom *g, const ir_prog *p, int rank, int inplace) {
  bt_result res = ir_geom_init(g, p, rank, 0, inplace);
  return res ? res : ir_geom_init(g, p, rank, g->k, inplace);
}
