/* direct_build.h -- small direct programs (put, get, getr, sig, wait) built in memory, for test_ir.c and
 * test_exec.c: the shapes the runtime and the compiler make, and pieces to break them with. */
#ifndef DIRECT_BUILD_H
#define DIRECT_BUILD_H

#include <stdio.h>
#include <stdlib.h>

#include "ir.h"

/* A program of n ranks with k chunks per loop and `scratch` scratch chunks per rank, no thread blocks yet. */
__attribute__((unused)) static ir_prog *dprog(const char *name, ir_coll coll, int n, ir_proto proto, int k, int inplace,
                                              int scratch) {
  ir_prog *p = ir_prog_new(name, coll, n);
  if (!p) { printf("Bail out! out of memory\n"); exit(1); }
  p->proto = proto;
  p->nchannels = 1;
  p->nchunksperloop = k;
  p->inplace = inplace;
  p->version = IR_SCHEMA_VERSION;
  for (int r = 0; r < n; r++) {
    p->gpus[r].i_chunks = p->gpus[r].o_chunks = coll == IR_COLL_ALLREDUCE ? k : 0;
    p->gpus[r].s_chunks = scratch;
  }
  return p;
}

/* A thread block of rank r on channel 0 with no FIFO peers. */
__attribute__((unused)) static ir_tb *dtb(ir_prog *p, int r) {
  ir_tb *tb = ir_tb_add(&p->gpus[r], -1, -1, 0);
  if (!tb) { printf("Bail out! out of memory\n"); exit(1); }
  return tb;
}

/* Appends step op (peer -1 for a local step) moving cnt chunks from sb[so] to db[dof]. */
__attribute__((unused)) static ir_step *dstep(ir_tb *tb, int op, int peer, int sb, int so, int db, int dof, int cnt) {
  ir_step *st = ir_step_add(tb);
  if (!st) { printf("Bail out! out of memory\n"); exit(1); }
  st->op = (uint8_t)op;
  st->peer = peer;
  st->srcbuf = (uint8_t)sb;
  st->srcoff = so;
  st->dstbuf = (uint8_t)db;
  st->dstoff = dof;
  st->cnt = cnt;
  return st;
}

/* A sig to / a wait for rank q (cnt signals). */
__attribute__((unused)) static void dsig(ir_tb *tb, int q) { dstep(tb, IR_OP_SIG, q, IR_BUF_INPUT, -1, IR_BUF_OUTPUT, -1, 1); }
__attribute__((unused)) static void dwait(ir_tb *tb, int q, int cnt) {
  dstep(tb, IR_OP_WAIT, q, IR_BUF_INPUT, -1, IR_BUF_OUTPUT, -1, cnt);
}

/* A barrier with every other rank: a sig to each, then a wait for each. */
__attribute__((unused)) static void dbarrier(ir_prog *p, ir_tb *tb, int r) {
  for (int q = 0; q < p->ngpus; q++) if (q != r) dsig(tb, q);
  for (int q = 0; q < p->ngpus; q++) if (q != r) dwait(tb, q, 1);
}

/* Simple one-shot AllReduce by get on n ranks: a barrier, every rank reduces the input of every peer into
 * its scratch (getr), a barrier (no peer reads its input any more), then copies the result out.  Without
 * `scratch` it reduces into its output directly, which races in place (peers still read the input there).
 * With `ends` 0 the last barrier is left out (the end rule fails), with `starts` 0 the first. */
__attribute__((unused)) static ir_prog *oneshot_get(int n, int scratch, int starts, int ends) {
  ir_prog *p = dprog("oneshot_get", IR_COLL_ALLREDUCE, n, IR_PROTO_SIMPLE, 1, 1, scratch ? 1 : 0);
  int acc = scratch ? IR_BUF_SCRATCH : IR_BUF_OUTPUT;
  for (int r = 0; r < n; r++) {
    ir_tb *tb = dtb(p, r);
    if (starts) dbarrier(p, tb, r);
    dstep(tb, IR_OP_COPY, -1, IR_BUF_INPUT, 0, acc, 0, 1);
    for (int q = 0; q < n; q++)
      if (q != r) dstep(tb, IR_OP_GETR, q, IR_BUF_INPUT, 0, acc, 0, 1);
    if (ends) dbarrier(p, tb, r);
    if (scratch) dstep(tb, IR_OP_COPY, -1, IR_BUF_SCRATCH, 0, IR_BUF_OUTPUT, 0, 1);
  }
  return p;
}

/* Simple two-shot AllReduce on n ranks, k = n chunks: a barrier; rank r reduces chunk r of every peer's
 * input into its output (getr), puts it into every peer's output, and a barrier ends the call. */
__attribute__((unused)) static ir_prog *twoshot(int n) {
  ir_prog *p = dprog("twoshot", IR_COLL_ALLREDUCE, n, IR_PROTO_SIMPLE, n, 1, 0);
  for (int r = 0; r < n; r++) {
    ir_tb *tb = dtb(p, r);
    dbarrier(p, tb, r);
    dstep(tb, IR_OP_COPY, -1, IR_BUF_INPUT, r, IR_BUF_OUTPUT, r, 1);
    for (int q = 0; q < n; q++)
      if (q != r) dstep(tb, IR_OP_GETR, q, IR_BUF_INPUT, r, IR_BUF_OUTPUT, r, 1);
    for (int q = 0; q < n; q++)
      if (q != r) dstep(tb, IR_OP_PUT, q, IR_BUF_OUTPUT, r, IR_BUF_OUTPUT, r, 1);
    dbarrier(p, tb, r);
  }
  return p;
}

/* The scratch chunk of rank q where rank r's put lands in oneshot_ll (n - 1 of them, one per peer). */
__attribute__((unused)) static int ll_slot(int r, int q) { return r < q ? r : r - 1; }

/* LL one-shot AllReduce on n ranks, k chunks (every step moves all k): rank r puts its input into a landing
 * of every peer, copies its input to its output, and reduces every landing into it, in one thread block. */
__attribute__((unused)) static ir_prog *oneshot_ll(int n, int k) {
  ir_prog *p = dprog("oneshot_ll", IR_COLL_ALLREDUCE, n, IR_PROTO_LL, k, 1, (n - 1) * k);
  for (int r = 0; r < n; r++) {
    ir_tb *tb = dtb(p, r);
    for (int q = 0; q < n; q++)
      if (q != r) dstep(tb, IR_OP_PUT, q, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, ll_slot(r, q) * k, k);
    dstep(tb, IR_OP_COPY, -1, IR_BUF_INPUT, 0, IR_BUF_OUTPUT, 0, k);
    for (int j = 0; j < n - 1; j++) dstep(tb, IR_OP_REDUCE, -1, IR_BUF_SCRATCH, j * k, IR_BUF_OUTPUT, 0, k);
  }
  return p;
}

/* Simple AllGather on 2 ranks through scratch: a barrier, each rank puts its input into the peer's scratch,
 * signals, waits for the peer's signal and copies the scratch into its output.  With `early` the copy
 * comes before that wait: nothing orders it after the peer's put (a race). */
__attribute__((unused)) static ir_prog *allgather_put(int early) {
  ir_prog *p = dprog("allgather_put", IR_COLL_ALLGATHER, 2, IR_PROTO_SIMPLE, 2, 0, 1);
  for (int r = 0; r < 2; r++) {
    p->gpus[r].i_chunks = 1;
    p->gpus[r].o_chunks = 2;
    ir_tb *tb = dtb(p, r);
    int q = 1 - r;
    dbarrier(p, tb, r);
    dstep(tb, IR_OP_PUT, q, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 0, 1);
    dsig(tb, q);
    if (early) dstep(tb, IR_OP_COPY, -1, IR_BUF_SCRATCH, 0, IR_BUF_OUTPUT, q, 1);
    dwait(tb, q, 1);
    if (!early) dstep(tb, IR_OP_COPY, -1, IR_BUF_SCRATCH, 0, IR_BUF_OUTPUT, q, 1);
    dstep(tb, IR_OP_COPY, -1, IR_BUF_INPUT, 0, IR_BUF_OUTPUT, r, 1);
  }
  return p;
}

#endif
