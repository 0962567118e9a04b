/* test_chain.c -- folding receive-reduce chains into one block (runtime/rt_chain.c), on the CPU.
 * Usage: test_chain BATON ALGORITHMS_DIR (compiles the programs it checks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir_read.h"
#include "rt_chain.h"
#include "tap.h"

static char dir[64];

/* Compiles algorithms/SCRIPT with PARAMS and reads it back; NULL on failure. */
static ir_prog *compile(const char *baton, const char *algs, const char *name, const char *script,
                        const char *params) {
  char cmd[1024], path[256];
  snprintf(path, sizeof path, "%s/%s.xml", dir, name);
  snprintf(cmd, sizeof cmd, "%s compile -q %s/%s %s -o %s", baton, algs, script, params, path);
  if (system(cmd)) return NULL;
  ir_prog *p = NULL;
  return ir_read_file(path, &p, NULL) ? NULL : p;
}

/* Every step of the rank appears once in the hosts' lists, each folded tb
 * is empty, and every dependency that stays points to an earlier position
 * of another block or is dropped only within one block, backwards. */
static int consistent(const rt_chain *c, const ir_gpu *g) {
  int seen = 0, total = 0;
  for (int t = 0; t < g->ntbs; t++) {
    total += g->tbs[t].nsteps;
    if (c->host[t] != t && c->count[t]) return 0;
    seen += c->count[t];
  }
  if (seen != total) return 0;
  for (int h = 0; h < g->ntbs; h++)
    for (int j = 0; j < c->count[h]; j++) {
      int tb = c->ref_tb[c->first[h] + j], s = c->ref_step[c->first[h] + j];
      if (c->host[tb] != h) return 0;
      const ir_step *st = &g->tbs[tb].steps[s];
      if (st->depid < 0) continue;
      int at, dh = rt_chain_where(c, st->depid, st->deps, &at);
      if (dh == h && at >= j) return 0;   /* a wait on a later step of its own block: a deadlock */
    }
  return 1;
}

/* Fused chains (rt_chain_fuse) on hand-made steps: a chain o0 += m, where
 * step 0 reads the input. */
static void chain_steps(ip_gstep *s, int n) {
  for (int j = 0; j < n; j++)
    s[j] = (ip_gstep){.op = IR_OP_RRC, .srcbuf = j ? IR_BUF_OUTPUT : IR_BUF_INPUT, .dstbuf = IR_BUF_OUTPUT,
                      .fuse = 1, .conn = j, .cnt = 1, .depid = -1, .deps = -1};
}

static int fuse_is(ip_gstep *s, int n, const char *want) {
  char got[16];
  for (int j = 0; j < n; j++) got[j] = (char)('0' + s[j].fuse);
  got[n] = 0;
  if (strcmp(got, want)) printf("#   fuse marks %s, expected %s\n", got, want);
  return !strcmp(got, want);
}

static void check_fuse(void) {
  ip_gstep s[8];
  chain_steps(s, 3);
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 2 && fuse_is(s, 3, "300"), "three receive-reduce steps, each reading the last one's output: one fused step");
  chain_steps(s, 3);
  s[0].depid = 7;
  s[0].deps = 0;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 2 && fuse_is(s, 3, "300"), "the first step may wait on another block");
  chain_steps(s, 3);
  s[1].hasdep = 1;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "201"),
     "a step another block waits on ends its run (its partial result must be in memory when it is released)");
  chain_steps(s, 3);
  s[2].depid = 4;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "201"), "a later step that waits on another block starts a run");
  chain_steps(s, 3);
  s[1].srcoff = 1;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "120"), "a step that reads another chunk is not fused to the last");
  chain_steps(s, 3);
  s[1].srcbuf = IR_BUF_SCRATCH;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "120"), "nor one that reads another buffer");
  chain_steps(s, 3);
  s[2].cnt = 2;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "201"), "nor one of another chunk count");
  chain_steps(s, 4);
  s[0].op = IR_OP_SEND;
  s[3].op = IR_OP_RRCS;
  ok(rt_chain_fuse(s, 4, IP_GPU_FUSE) == 1 && fuse_is(s, 4, "1201"), "only receive-reduce-copy steps fuse");
  chain_steps(s, 7);
  ok(rt_chain_fuse(s, 7, 3) == 4 && fuse_is(s, 7, "3003001"), "runs are at most `max` long");
  chain_steps(s, 3);
  ok(rt_chain_fuse(s, 3, 0) == 0 && fuse_is(s, 3, "111"), "max 0 (a Simple program): no receive chain fuses");
  /* Runs of nop steps (a wait each), as the in-place one-shot chain's copy back has. */
  chain_steps(s, 5);
  for (int j = 0; j < 3; j++) s[j] = (ip_gstep){.op = IR_OP_NOP, .depid = j + 1, .deps = 0};
  s[3].op = IR_OP_COPY;
  s[3].depid = 6;
  ok(rt_chain_fuse(s, 5, 0) == 2 && fuse_is(s, 5, "30011"), "three nop waits run as one step, in any protocol");
  /* A send of what the chain's first link reads runs with the chain. */
  chain_steps(s, 3);
  s[0] = (ip_gstep){.op = IR_OP_SEND, .srcbuf = IR_BUF_INPUT, .dstbuf = IR_BUF_OUTPUT, .cnt = 1, .depid = 2, .deps = 0};
  s[1].srcbuf = IR_BUF_INPUT;
  s[2].srcbuf = IR_BUF_OUTPUT;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 2 && fuse_is(s, 3, "300"), "a send of the first link's src, then two links: one run");
  s[0].hasdep = 1;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "120"), "not when another block waits on the send");
  s[0].hasdep = 0;
  s[0].srcoff = 1;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "120"), "nor when it sends another chunk");
  s[0].srcoff = 0;
  ok(rt_chain_fuse(s, 3, 0) == 0 && fuse_is(s, 3, "111"), "nor in Simple (max 0)");
  chain_steps(s, 6);
  s[0] = (ip_gstep){.op = IR_OP_SEND, .srcbuf = IR_BUF_INPUT, .dstbuf = IR_BUF_OUTPUT, .cnt = 1, .depid = -1, .deps = -1};
  s[1].srcbuf = IR_BUF_INPUT;
  for (int j = 2; j < 6; j++) s[j].srcbuf = IR_BUF_OUTPUT;
  ok(rt_chain_fuse(s, 6, IP_GPU_FUSE) == 4 && fuse_is(s, 6, "500001"), "the send does not count against the links' limit");

  /* A chain after waits on other blocks (nops), its head waiting too. */
  chain_steps(s, 5);
  for (int j = 0; j < 5; j++) s[j].conn = j < 2 ? 0 : j - 2;
  s[0] = (ip_gstep){.op = IR_OP_NOP, .depid = 4, .deps = 0};
  s[1] = (ip_gstep){.op = IR_OP_NOP, .depid = 5, .deps = 0};
  s[2].depid = 6;
  s[2].deps = 0;
  ok(rt_chain_fuse(s, 5, IP_GPU_FUSE) == 3 && fuse_is(s, 5, "20300"),
     "waits, then a chain whose head waits too: one nop step, one fused chain");
  for (int j = 0; j < 3; j++) s[j] = (ip_gstep){.op = IR_OP_NOP, .depid = j + 1, .deps = 0};
  s[0].hasdep = 1;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 1 && fuse_is(s, 3, "120"), "a nop another block waits on ends its run");
  ip_gstep many[40];
  for (int j = 0; j < 40; j++) many[j] = (ip_gstep){.op = IR_OP_NOP, .depid = 1, .deps = j};
  int f = rt_chain_fuse(many, 40, IP_GPU_FUSE);
  ok(f == 38 && many[0].fuse == IP_GPU_NOPS && many[IP_GPU_NOPS].fuse == 40 - IP_GPU_NOPS,
     "at most IP_GPU_NOPS (%d) nops a run (one thread each): 40 make runs of %d and %d", IP_GPU_NOPS, many[0].fuse,
     many[IP_GPU_NOPS].fuse);
  chain_steps(s, 3);
  s[1].dstoff = 2;
  s[2].srcoff = 2;
  ok(rt_chain_fuse(s, 3, IP_GPU_FUSE) == 2 && fuse_is(s, 3, "300"),
     "a run may write several chunks (o0 then o2: each is written, the kernel keeps only overwritten ones out)");
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: test_chain BATON ALGORITHMS_DIR\n"); return 2; }
  snprintf(dir, sizeof dir, "/tmp/test_chain.%d", (int)getpid());
  char cmd[128];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd)) return 2;
  const char *b = argv[1], *algs = argv[2];
  ir_prog *one = compile(b, algs, "one", "allreduce_allpairs.lua", "--param ranks=4 --param shot=1 --param inplace=0 --param chain=1");
  ir_prog *onei = compile(b, algs, "onei", "allreduce_allpairs.lua", "--param ranks=4 --param shot=1 --param chain=1");
  ir_prog *rs8 = compile(b, algs, "rs8", "reducescatter_allpairs.lua", "--param ranks=8 --param chain=1");
  ir_prog *scr = compile(b, algs, "scr", "allreduce_allpairs.lua", "--param ranks=4 --param shot=1 --param inplace=0");
  ir_prog *two = compile(b, algs, "two", "allreduce_allpairs.lua", "--param ranks=4 --param shot=2 --param chain=1");
  ir_prog *ring = compile(b, algs, "ring", "allreduce_ring.lua", "--param ranks=4");
  ok(one && onei && rs8 && scr && two && ring, "compiled the chain (out of and in place) and scratch one-shot AllReduce, the 8-rank chain "
     "ReduceScatter, the two-shot chain and the ring");
  check_fuse();
  if (!one || !onei || !rs8 || !scr || !two || !ring) return tap_done();
  rt_chain c;

  /* One-shot chain, 4 ranks: three receivers, the last two fold into the first. */
  int good = 1;
  for (int r = 0; r < 4; r++) {
    const ir_gpu *g = &one->gpus[r];
    if (rt_chain_plan(&c, g, 1)) return 1;
    int h = -1;
    for (int t = 0; t < g->ntbs; t++)
      if (g->tbs[t].recv >= 0 && c.host[t] == t) { if (h >= 0) good = 0; h = t; }
    if (h < 0 || c.folded != 2 || c.nx[h] != 2 || c.count[h] != 3 || !consistent(&c, g)) good = 0;
    /* the extras are the two other receivers, in chain order, and their steps follow the host's */
    for (int x = 0; h >= 0 && x < 2; x++) {
      int f = c.xtb[h * IP_GPU_XRECV + x];
      if (c.host[f] != h || c.xconn[f] != x || c.ref_tb[c.first[h] + 1 + x] != f) good = 0;
      if (g->tbs[f].steps[0].depid != (x ? c.xtb[h * IP_GPU_XRECV] : h)) good = 0;
    }
    rt_chain_free(&c);
  }
  ok(good, "one-shot chain, 4 ranks: on every rank one block runs the three receive-reduce steps, in chain order");

  /* In place: the copy back sits in the last link's tb (the compiler puts
   * it there), and folds along with it: one block runs the three links,
   * the waits for the rank's sends and the copy, in that order. */
  good = 1;
  for (int r = 0; r < 4; r++) {
    const ir_gpu *g = &onei->gpus[r];
    if (rt_chain_plan(&c, g, 1)) return 1;
    int h = -1;
    for (int t = 0; t < g->ntbs; t++)
      if (g->tbs[t].recv >= 0 && c.host[t] == t) { if (h >= 0) good = 0; h = t; }
    if (h < 0 || c.folded != 2 || c.count[h] != 6 || !consistent(&c, g)) good = 0;
    static const int want[] = {IR_OP_RRC, IR_OP_RRC, IR_OP_RRC, IR_OP_NOP, IR_OP_NOP, IR_OP_COPY};
    for (int k = 0; h >= 0 && k < 6; k++) {
      int tb = c.ref_tb[c.first[h] + k], st = c.ref_step[c.first[h] + k], at = -1;
      if (g->tbs[tb].steps[st].op != want[k] || rt_chain_where(&c, tb, st, &at) != h || at != k) good = 0;
    }
    rt_chain_free(&c);
  }
  ok(good, "in-place one-shot chain, 4 ranks: one block runs the links, two waits and the copy back; "
     "every step is found where it runs");


  /* Eight ranks: seven receivers, six extra connections (IP_GPU_XRECV is 7). */
  good = 1;
  for (int r = 0; r < 8; r++) {
    if (rt_chain_plan(&c, &rs8->gpus[r], 1)) return 1;
    if (c.folded != 6 || !consistent(&c, &rs8->gpus[r])) good = 0;
    rt_chain_free(&c);
  }
  ok(good, "ReduceScatter chain, 8 ranks: six receive-reduce blocks fold into the seventh on every rank");

  /* Nothing to fold: scratch + local reductions, multi-step receivers, the ring; or folding off. */
  const ir_prog *none[] = {scr, two, ring};
  const char *what[] = {"the scratch one-shot", "the two-shot chain (receivers have several steps)", "the ring"};
  for (int k = 0; k < 3; k++) {
    good = 1;
    for (int r = 0; r < 4; r++) {
      if (rt_chain_plan(&c, &none[k]->gpus[r], 1)) return 1;
      if (c.folded || !consistent(&c, &none[k]->gpus[r])) good = 0;
      for (int t = 0; t < none[k]->gpus[r].ntbs; t++) if (c.host[t] != t) good = 0;
      rt_chain_free(&c);
    }
    ok(good, "%s: nothing folded", what[k]);
  }
  /* Lanes are counted over the blocks a rank needs: folded tbs get none. */
  int agch_ok = 1;
  ir_prog *agch = compile(b, algs, "agch", "allreduce_allpairs.lua",
                          "--param ranks=4 --param shot=2 --param inplace=0 --param chain=1 --param agch=1");
  for (int r = 0; agch && r < 4; r++)
    if (rt_chain_blocks(&agch->gpus[r], 1) != agch->gpus[r].ntbs - 2 || rt_chain_blocks(&agch->gpus[r], 0) != agch->gpus[r].ntbs)
      agch_ok = 0;
  ok(agch && agch_ok && rt_chain_blocks(&one->gpus[0], 1) == one->gpus[0].ntbs - 2 &&
     rt_chain_blocks(&ring->gpus[0], 1) == ring->gpus[0].ntbs,
     "CUDA blocks per lane: the one-shot and agch two-shot chains need 2 fewer than their tbs (%d of %d, %d of %d), "
     "the ring all, folding off all", rt_chain_blocks(&one->gpus[0], 1), one->gpus[0].ntbs,
     agch ? rt_chain_blocks(&agch->gpus[0], 1) : -1, agch ? agch->gpus[0].ntbs : -1);
  if (agch) ir_prog_free(agch);
  if (rt_chain_plan(&c, &one->gpus[0], 0)) return 1;
  ok(c.folded == 0 && consistent(&c, &one->gpus[0]), "fold 0 (BATON_FOLD_CHAINS=0) folds nothing");
  rt_chain_free(&c);

  ir_prog_free(one); ir_prog_free(onei); ir_prog_free(rs8); ir_prog_free(scr); ir_prog_free(two); ir_prog_free(ring);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) return 2;
  return tap_done();
}
