/* test_verify.c -- baton compile's verification (cc_verify) never lets a
 * wrong program through: library programs compiled here, then corrupted in
 * memory the way a lowering bug would (a step's chunk offset, a missing
 * or doubled reduce, swapped peers, a lost dependency, a copy to the wrong
 * place), are each refused, and the ones that stay well formed are refused
 * by the CPU runs with the element and what it holds. */
#include <string.h>

#include "cc_compile.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "tap.h"

/* The diagnostic's first line, for a TAP description (one line). */
static const char *line1(rt_diag *d) {
  static char buf[512];
  const char *t = rt_diag_text(d);
  size_t n = strcspn(t, "\n");
  if (n >= sizeof buf) n = sizeof buf - 1;
  memcpy(buf, t, n);
  buf[n] = 0;
  return buf;
}

static const char *algs = "algorithms";

static ir_prog *compile(const char *script, const char *p1, const char *p2, rt_diag *d) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", algs, script);
  const char *params[] = {p1, p2};
  ir_prog *p = NULL;
  cc_compile_report rep;
  rt_diag_clear(d);
  if (cc_compile_file(path, params, p2 ? 2 : 1, NULL, &p, &rep, d)) return NULL;
  return p;
}

/* The first step of rank r with opcode op (and, when tb_send >= 0, in a
 * thread block sending to that rank), its thread block in *tb; NULL if none. */
static ir_step *find(ir_prog *p, int r, ir_op op, int tb_send, ir_tb **tb) {
  for (int t = 0; t < p->gpus[r].ntbs; t++) {
    ir_tb *b = &p->gpus[r].tbs[t];
    if (tb_send >= 0 && b->send != tb_send) continue;
    for (int s = 0; s < b->nsteps; s++)
      if (b->steps[s].op == op) {
        if (tb) *tb = b;
        return &b->steps[s];
      }
  }
  return NULL;
}

/* cc_verify on p: the result, with the stage it stopped at in *stage. */
static bt_result verify(const ir_prog *p, cc_stage *stage, rt_diag *d) {
  cc_compile_report rep;
  memset(&rep, 0, sizeof rep);
  rt_diag_clear(d);
  bt_result r = cc_verify(p, "t.lua", &rep, d);
  *stage = rep.stage;
  return r;
}

/* A well-formed wrong program: ir_check and the race check pass it, the
 * CPU runs refuse it with a line containing `says`. */
static void refused_by_runs(const ir_prog *p, const char *what, const char *says, rt_diag *d) {
  rt_diag_clear(d);
  int formed = p && !ir_check(p, d) && !ir_check_races(p, ir_prog_aliased(p, p->inplace), d);
  cc_stage stage = CC_STAGE_DONE;
  bt_result r = p ? verify(p, &stage, d) : BT_OK;
  ok(formed && r == BT_ERR_MISMATCH && stage == CC_STAGE_VERIFY, "%s: well formed, and the CPU runs refuse it: %s",
     what, line1(d));
  ok_contains(rt_diag_text(d), says, "%s: the message says what the element holds", what);
}

static void test_ring(rt_diag *d) {
  ir_prog *p = compile("allreduce_ring.lua", "ranks=8", NULL, d);
  cc_stage stage;
  ok(p && !verify(p, &stage, d) && stage == CC_STAGE_DONE, "the 8-rank ring verifies: %s", line1(d));
  ir_prog_free(p);

  /* A step's chunk offset: rank 3 reduces chunk c+1 into the partial sum of chunk c. */
  p = compile("allreduce_ring.lua", "ranks=8", NULL, d);
  ir_step *st = p ? find(p, 3, IR_OP_RRS, -1, NULL) : NULL;
  ok(st != NULL, "rank 3 has a receive-reduce-send");
  if (st) st->srcoff = (st->srcoff + 1) % p->nchunksperloop;
  refused_by_runs(st ? p : NULL, "an rrs reading the next chunk", "holds a reduction of elements of different input chunks", d);
  ir_prog_free(p);

  /* A missing reduce: rank 5 forwards the sum without adding its own. */
  p = compile("allreduce_ring.lua", "ranks=8", NULL, d);
  st = p ? find(p, 5, IR_OP_RRCS, -1, NULL) : NULL;
  ok(st != NULL, "rank 5 has a receive-reduce-copy-send");
  if (st) st->op = IR_OP_RCS;
  refused_by_runs(st ? p : NULL, "rrcs turned into rcs", "without rank 5", d);
  ir_prog_free(p);

  /* A doubled reduce: rank 2 adds its input again to a finished sum.  A
   * run of max on values cannot see it (max is idempotent); the sources
   * run names the rank counted twice. */
  p = compile("allreduce_ring.lua", "ranks=8", NULL, d);
  st = p ? find(p, 2, IR_OP_RCS, -1, NULL) : NULL;
  ok(st != NULL, "rank 2 has a receive-copy-send");
  if (st) {
    st->op = IR_OP_RRCS;
    st->srcbuf = st->dstbuf;
    st->srcoff = st->dstoff;
  }
  ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_MAX, .count = 4099, .tile = 128, .inplace = -1};
  ip_cpu_report rep;
  rt_diag_clear(d);
  ok(st && ip_cpu_verify(p, &o, &rep, d) == BT_OK, "a doubled reduce passes a run of max on values");
  refused_by_runs(st ? p : NULL, "rcs turned into rrcs", "counts rank 2 twice", d);
  ir_prog_free(p);

  /* The last receive writes the chunk beside its own. */
  p = compile("allreduce_ring.lua", "ranks=8", NULL, d);
  st = p ? find(p, 6, IR_OP_RECV, -1, NULL) : NULL;
  ok(st != NULL, "rank 6 has a receive");
  if (st) st->dstoff = (st->dstoff + 1) % p->nchunksperloop;
  refused_by_runs(st ? p : NULL, "a receive into the wrong chunk", "expected element 0 of the reduction", d);
  ir_prog_free(p);
}

static void test_alltoall(rt_diag *d) {
  /* Swapped peers: rank 0's thread blocks sending to ranks 1 and 2 trade
   * peers, so each gets the other's block at the right place. */
  ir_prog *p = compile("alltoall_direct.lua", "ranks=4", NULL, d);
  ir_tb *a = NULL, *b = NULL;
  if (p) {
    find(p, 0, IR_OP_SEND, 1, &a);
    find(p, 0, IR_OP_SEND, 2, &b);
  }
  ok(a && b && a != b, "rank 0 sends to ranks 1 and 2 from two thread blocks");
  if (a && b) {
    int t = a->send;
    a->send = b->send;
    b->send = t;
  }
  refused_by_runs(a && b ? p : NULL, "two swapped send peers", "holds element 0 of input chunk 2 of rank 0", d);
  ir_prog_free(p);

  p = compile("alltoall_bruck.lua", "ranks=8", NULL, d);
  cc_stage stage;
  ok(p && !verify(p, &stage, d) && stage == CC_STAGE_DONE, "the 8-rank Bruck AllToAll verifies: %s", line1(d));
  ir_prog_free(p);

  /* A final copy to the wrong output block: one block twice, one never. */
  p = compile("alltoall_bruck.lua", "ranks=8", NULL, d);
  ir_step *st = NULL;
  for (int t = 0; p && !st && t < p->gpus[4].ntbs; t++)
    for (int s = p->gpus[4].tbs[t].nsteps - 1; s >= 0 && !st; s--)
      if (p->gpus[4].tbs[t].steps[s].op == IR_OP_COPY && p->gpus[4].tbs[t].steps[s].dstbuf == IR_BUF_OUTPUT &&
          p->gpus[4].tbs[t].steps[s].dstoff != 4)
        st = &p->gpus[4].tbs[t].steps[s];
  ok(st != NULL, "rank 4 copies a received block into its output");
  if (st) st->dstoff = st->dstoff ? st->dstoff - 1 : 1;   /* the reversed blocks, one block off */
  refused_by_runs(st ? p : NULL, "a copy into the wrong output block", "holds", d);
  ir_prog_free(p);

  /* A lost dependency: the send of the first pack no longer waits for the
   * copies that fill it -- refused before anything runs. */
  p = compile("alltoall_bruck.lua", "ranks=8", NULL, d);
  st = p ? find(p, 0, IR_OP_SEND, 1, NULL) : NULL;
  ok(st && st->depid >= 0, "rank 0's first send waits for its pack");
  if (st) st->depid = st->deps = -1;
  bt_result r = st ? verify(p, &stage, d) : BT_OK;
  ok(r == BT_ERR_INVALID && stage == CC_STAGE_CHECK, "a send that no longer waits for its data is refused: %s",
     line1(d));
  ok_contains(rt_diag_text(d), "data race", "as a race");
  ir_prog_free(p);
}

/* The sources run directly on a 65-rank ring: one pass of 128-rank sets,
 * or two windows of 64 ranks; in and out of place; uneven counts and
 * tiles.  A doubled reduce of rank 64 is invisible to the first window's
 * pass (rank 64 is outside it) and caught by the second's. */
static void test_sources(rt_diag *d) {
  ir_prog *p = compile("allreduce_ring.lua", "ranks=65", NULL, d);
  ip_cpu_opts o = {.sources = 1, .count = 65, .tile = 1, .inplace = -1};
  ip_cpu_report rep;
  rt_diag_clear(d);
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_OK && rep.passes == 1, "65 ranks, one pass of 128-rank sets: %s",
     line1(d));
  o.src_words = 1;
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_OK && rep.passes == 2, "two windows of 64 ranks: %s", line1(d));
  o.inplace = 0;
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_OK, "out of place too: %s", line1(d));
  o.inplace = -1;
  o.count = 3 * 65 - 2;   /* short tails: padding stays apart from data */
  o.tile = 2;
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_OK, "uneven count, 2 tiles: %s", line1(d));
  ir_step *st = p ? find(p, 64, IR_OP_RCS, -1, NULL) : NULL;
  if (st) {
    st->op = IR_OP_RRCS;
    st->srcbuf = st->dstbuf;
    st->srcoff = st->dstoff;
  }
  o.count = 65;
  o.tile = 1;
  rt_diag_clear(d);
  ok(st && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_MISMATCH && rep.passes == 2,
     "rank 64 counted twice: caught by the second window's pass");
  ok_contains(rt_diag_text(d), "counts rank 64 twice", "which names it");
  o.src_words = 0;
  rt_diag_clear(d);
  ok(st && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_MISMATCH && rep.passes == 1, "and by one pass of 128-rank sets");
  ir_prog_free(p);
}

int main(int argc, char **argv) {
  if (argc > 1) algs = argv[1];
  rt_diag *d = rt_diag_new(20);
  test_ring(d);
  test_alltoall(d);
  test_sources(d);
  rt_diag_free(d);
  return tap_done();
}
