/* test_dsl_place.c -- the DSL's placement = "paired" (a peer's send and
 * receive in one thread block), topologies given as link lists (the
 * helpers of baton.topo, the check of every copy and reduce, malformed
 * lists), rounds (round()) and an exchange through scratch folded into
 * receive-reduces. */
#include <stdlib.h>
#include <string.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "dsl_test.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "tap.h"

/* Compiles `src` and checks the program with the FIFO slots its schedule
 * needs (deadlock freedom included), for races, and on the CPU executor
 * with those slots.  Returns the program (the caller frees it), or NULL
 * after a failed test point. */
static ir_prog *build(const char *src, const char *what) {
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  ok(trace(src, &t) == BT_OK, "%s traces: %s", what, msg);
  if (!t) return NULL;
  rt_diag *d = rt_diag_new(10);
  int slots = 0;
  cc_lower_opts lo = {.fuse = 1, .slots_needed = &slots};
  int good = !cc_lower(t, &lo, &p, d) && !ir_check_slots(p, slots, d) &&
             !ir_check_races(p, ir_prog_aliased(p, p->inplace), d);
  if (good) {
    ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_SUM, .count = 103, .inplace = -1, .tile = 8, .slots = slots};
    ip_cpu_report rep;
    good = !ip_cpu_verify(p, &o, &rep, d);
  }
  ok(good, "%s compiles, is deadlock-free with the %d slots its schedule needs and computes its collective: %s", what,
     slots, rt_diag_text(d));
  if (!good) { ir_prog_free(p); p = NULL; }
  cc_trace_free(t);
  rt_diag_free(d);
  return p;
}

/* Whether every rank of p has `tbs` thread blocks: one per peer that both
 * sends to and receives from that peer on channel 0, each peer once, and
 * the rest without peers (local copies). */
static int paired_per_peer(const ir_prog *p, int tbs) {
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    int seen[64] = {0}, peers = 0;
    if (g->ntbs != tbs || p->ngpus > 64) return 0;
    for (int t = 0; t < g->ntbs; t++) {
      const ir_tb *b = &g->tbs[t];
      if (b->send < 0 && b->recv < 0) continue;
      if (b->send != b->recv || b->chan != 0 || b->send == r || seen[b->send]++) return 0;
      peers++;
    }
    if (peers != p->ngpus - 1) return 0;
  }
  return 1;
}

/* An all-pairs AllToAll of 6 ranks; PLACE is collective{}'s placement
 * field, OPTS the options of the copies. */
#define A2A6(PLACE, OPTS) "collective{kind='alltoall', ranks=6, chunks=1" PLACE "}\n" \
  "for r = 0, 5 do for q = 0, 5 do chunk(r, 'input', q):copy(q, 'output', r" OPTS ") end end\n"

static void test_paired(void) {
  ir_prog *split = build(A2A6("", ""), "all-pairs alltoall, split");
  ir_prog *paired = build(A2A6(", placement='paired'", ""), "all-pairs alltoall, paired");
  ok(split && split->gpus[0].ntbs == 11, "split: a thread block per peer and direction, plus the local one (11)");
  ok(paired && paired_per_peer(paired, 6), "paired: one thread block per peer that sends to it and receives from it, "
     "plus the local one (6)");
  ok(split && paired && ir_prog_nsteps(split) == ir_prog_nsteps(paired), "pairing moves steps, it adds or drops none");
  int order = paired != NULL;   /* each pair's steps in the schedule's order: the send (depth 0) before the receive */
  for (int r = 0; paired && r < 6; r++)
    for (int t = 0; t < paired->gpus[r].ntbs; t++) {
      const ir_tb *b = &paired->gpus[r].tbs[t];
      if (b->send >= 0) order &= b->nsteps == 2 && b->steps[0].op == IR_OP_SEND && b->steps[1].op == IR_OP_RECV;
    }
  ok(order, "a paired thread block runs its send, then its receive");
  ir_prog_free(split);
  ir_prog_free(paired);

  /* fusion first: a ring's receive-and-forward keeps its two peers */
  const char *ring = "local ring = require 'baton.ring'\n"
                     "collective{kind='allreduce', ranks=4, chunks=4, inplace=true%s}\n"
                     "ring.allreduce({0, 1, 2, 3}, 'input', 0)\n";
  char src[512];
  snprintf(src, sizeof src, ring, "");
  split = build(src, "ring allreduce, split");
  snprintf(src, sizeof src, ring, ", placement='paired'");
  paired = build(src, "ring allreduce, paired");
  int same = split && paired && ir_prog_nsteps(split) == ir_prog_nsteps(paired);
  for (int r = 0; same && r < 4; r++)
    same = paired->gpus[r].ntbs == 1 && paired->gpus[r].tbs[0].send == (r + 1) % 4 &&
           paired->gpus[r].tbs[0].recv == (r + 3) % 4 && split->gpus[r].ntbs == 1;
  ok(same, "a fused ring is the same paired: one thread block per rank, rcs/rrs steps kept");
  ir_prog_free(split);
  ir_prog_free(paired);

  /* sends placed by the script: the receives join their peer's thread block */
  paired = build(A2A6(", placement='paired'", ", q ~= r and {sendtb = q < r and q or q - 1} or nil"),
                 "paired alltoall with placed sends");
  int placed = paired && paired_per_peer(paired, 6);
  for (int r = 0; placed && r < 6; r++)
    for (int t = 0; t < 5; t++) placed &= paired->gpus[r].tbs[t].send == (t < r ? t : t + 1);
  ok(placed, "with sendtb placing each peer's send, its receive joins that thread block");
  ir_prog_free(paired);
  paired = build("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[1-r][c]', "
                 "placement='paired'}\n"
                 "for r = 0, 1 do chunk(r, 'input', 0):copy(1 - r, 'output', 0, {sendtb = 0, recvtb = 1}) end\n",
                 "paired exchange whose sends and receives are placed apart");
  ok(paired && paired->gpus[0].ntbs == 2 && paired->gpus[0].tbs[0].recv < 0 && paired->gpus[0].tbs[1].send < 0,
     "sendtb/recvtb that keep a peer's send and receive apart win over pairing");
  ir_prog_free(paired);

  /* 56 ranks: 111 thread blocks split, 56 paired */
  const char *a2a56 = "collective{kind='alltoall', ranks=56, chunks=1%s}\n"
                      "for r = 0, 55 do for q = 0, 55 do chunk(r, 'input', q):copy(q, 'output', r) end end\n";
  snprintf(src, sizeof src, a2a56, "");
  lower_fails(src, "t.lua:2: rank 0 needs 111 thread blocks, more than the 108 a GPU runs at once: it sends to 55 peers "
              "and receives from 55, a thread block per peer and direction (110), plus 1 for local copies and reductions; "
              "use placement = \"paired\" (a peer's send and receive in one thread block), or fewer peers",
              "a 56-rank alltoall, split");
  snprintf(src, sizeof src, a2a56, ", placement='paired'");
  paired = build(src, "a 56-rank alltoall, paired");
  ok(paired && paired_per_peer(paired, 56), "... compiles paired: 56 thread blocks per rank");
  ir_prog_free(paired);
  lower_fails("collective{kind='alltoall', ranks=110, chunks=1, placement='paired'}\n"
              "for r = 0, 109 do for q = 0, 109 do chunk(r, 'input', q):copy(q, 'output', r) end end\n",
              "t.lua:2: rank 0 needs 110 thread blocks, more than the 108 a GPU runs at once: it sends to 109 peers and "
              "receives from 109, in 109 thread blocks (one holds at most one send and one receive peer), plus 1 for "
              "local copies and reductions; use fewer peers",
              "too many thread blocks already paired: no pairing advice");

  fails("collective{kind='alltoall', ranks=2, placement='pairs'}\n",
        "t.lua:1: placement='pairs': expected \"split\" (a thread block per peer, direction and channel) or \"paired\" "
        "(a peer's send and receive on a channel share one)", "an unknown placement");
}

/* A 3 x 4 torus AllReduce: ring reduce-scatter along each row, ring
 * AllReduce down each column, ring all-gather along each row. */
#define TORUS "local ring, topo = require 'baton.ring', require 'baton.topo'\n" \
  "collective{kind='allreduce', ranks=12, chunks=12, inplace=true, topology=topo.torus_links(3, 4)}\n" \
  "for r = 0, 2 do ring.reduce_scatter(topo.node(r, 4), 'input', 0, {count = 3}) end\n" \
  "for c = 0, 3 do ring.allreduce(topo.rail(c, 3, 4), 'input', c * 3) end\n" \
  "for r = 0, 2 do ring.all_gather(topo.node(r, 4), 'input', 0, {count = 3}) end\n"

#define AG4 "collective{kind='allgather', ranks=4, chunks=1, topology={links=%s}}\n"

static void test_links(void) {
  ir_prog *p = build(TORUS, "a 3 x 4 torus AllReduce that keeps to the torus's links");
  ir_prog_free(p);
  ok(trace("local topo = require 'baton.topo'\n"
           "local function has(t, a, b) for _, l in ipairs(t.links) do\n"
           "  if (l[1] == a and l[2] == b) or (l[1] == b and l[2] == a) then return true end end end\n"
           "assert(#topo.ring_links(1).links == 0 and #topo.ring_links(2).links == 1 and #topo.ring_links(5).links == 5)\n"
           "assert(has(topo.ring_links(5), 4, 0) and not has(topo.ring_links(5), 0, 2))\n"
           "assert(#topo.line_links(5).links == 4 and not has(topo.line_links(5), 4, 0))\n"
           "assert(#topo.torus_links(4, 4).links == 32 and #topo.torus_links(2, 3).links == 9)\n"
           "assert(has(topo.torus_links(3, 4), 3, 0) and has(topo.torus_links(3, 4), 8, 0) and not has(topo.torus_links(3, 4), 0, 5))\n"
           "assert(topo.torus_links(3, 4).name == '3 x 4 torus' and topo.ring_links(8).name == 'ring of 8 ranks')\n"
           "collective{kind='custom', ranks=6, inplace=true, expect='o[r][c]=i[r][c]', topology=topo.torus_links(2, 3)}\n",
           NULL) == BT_OK,
     "ring_links, line_links and torus_links list each link once (2-rank rings and tori too): %s", msg);
  fails("local topo = require 'baton.topo'\n"
        "collective{kind='allgather', ranks=16, chunks=1, topology=topo.torus_links(4, 4)}\n"
        "chunk(0, 'input', 0):copy(5, 'output', 0)\n",
        "t.lua:3: copy from rank 0 to rank 5: the topology (4 x 4 torus: 32 links) does not link them",
        "a copy across a missing torus link");
  fails("collective{kind='allreduce', ranks=3, chunks=1, inplace=true, topology={links={{0, 1}, {1, 2}}}}\n"
        "chunk(0, 'input', 0):reduce(chunk(2, 'input', 0))\n",
        "t.lua:2: reduce from rank 2 into rank 0: the topology (a list of 2 links) does not link them",
        "a reduce across a missing link of an unnamed list");
  p = build("local topo = require 'baton.topo'\n"
            "collective{kind='custom', ranks=4, chunks=1, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1', "
            "topology=topo.line_links(4)}\n"
            "for r = 0, 2 do chunk(r, 'input', 0):copy(r + 1, 'output', 0) end\n",
            "a shift along a line of ranks");
  ir_prog_free(p);
  char src[256];
  struct { const char *links, *expect, *what; } bad[] = {
    {"{{0, 1}, {1, 1}}", "t.lua:1: topology link 2 {1, 1} links rank 1 to itself", "a link to itself"},
    {"{{0, 1}, {3, 4}}", "t.lua:1: topology link 2 {3, 4}: rank 4 out of range [0, 4)", "a rank out of range"},
    {"{{0, -1}}", "t.lua:1: topology link 1 {0, -1}: rank -1 out of range [0, 4)", "a negative rank"},
    {"{{0, 1}, {2, 3}, {1, 0}, {3, 2}}",
     "t.lua:1: topology link 3 {1, 0} repeats link 1 {0, 1}: links are undirected; list each pair once",
     "a link listed twice, reversed"},
    {"5", "t.lua:1: topology links must be a list of rank pairs {{a, b}, ...}, not a number", "links not a table"},
    {"{{0, 1}, x = {1, 2}}", "t.lua:1: topology links must be a list of rank pairs {{a, b}, ...}: keys 1..n and "
     "nothing else", "a list with another key"},
    {"{{0, 1}, 'x'}", "t.lua:1: topology link 2 must be a pair of ranks {a, b}, not a string", "a link not a table"},
    {"{{0, 1}, {2}}", "t.lua:1: topology link 2 must be a pair of ranks {a, b}: two integers, nothing else",
     "a link of one rank"},
    {"{{0, 1, 2}}", "t.lua:1: topology link 1 must be a pair of ranks {a, b}: two integers, nothing else",
     "a link of three ranks"},
    {"{{0, 1.5}}", "t.lua:1: topology link 1 must be a pair of ranks {a, b}: two integers, nothing else",
     "a rank that is not an integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(src, sizeof src, AG4, bad[i].links);
    fails(src, bad[i].expect, bad[i].what);
  }
  fails("collective{kind='allgather', ranks=4, topology={links={{0, 1}}, nodes=2, gpus=2}}\n",
        "t.lua:1: topology takes nodes and gpus, or links, not both", "links with nodes x gpus");
  fails("collective{kind='allgather', ranks=4, topology={nodes=2}}\n",
        "t.lua:1: topology needs nodes = N and gpus = G (integers), or links = {{a, b}, ...}", "nodes without gpus");
  fails("collective{kind='allgather', ranks=4, topology={link={{0, 1}}}}\n",
        "t.lua:1: collective{} topology: unknown field 'link' (it takes nodes, gpus, links, name)", "a misspelt field");
  fails("collective{kind='allgather', ranks=4, topology='ring'}\n",
        "t.lua:1: topology must be a table {nodes = N, gpus = G} or {links = {{a, b}, ...}}", "a topology not a table");
  fails("collective{kind='allgather', ranks=4, topology={links={}, name=string.rep('x', 64)}}\n",
        "t.lua:1: topology name must be a string of 1 to 63 characters", "a name too long");
  fails("collective{kind='allgather', ranks=4, chunks=1, topology={nodes=2, gpus=2, name='pods'}}\n"
        "chunk(0, 'input', 0):copy(3, 'output', 0)\n",
        "t.lua:2: copy from rank 0 to rank 3: the topology (pods: 2 nodes x 2 GPUs) does not link them",
        "a named nodes x gpus topology");
}

/* Whether thread block `want` of rank r waits, directly or through the
 * thread blocks it waits on, for a step of thread block `on`. */
static int waits_on(const ir_prog *p, int r, int want, int on, int depth) {
  const ir_tb *b = &p->gpus[r].tbs[want];
  for (int s = 0; s < b->nsteps && depth < 64; s++)
    for (int k = 0; k < ir_step_ndeps(&b->steps[s]); k++) {
      int d = ir_step_dep(&b->steps[s], k).tb;
      if (d == on || waits_on(p, r, d, on, depth + 1)) return 1;
    }
  return 0;
}

/* The thread block of rank r that sends to (or receives from, recv) peer q. */
static int tb_to(const ir_prog *p, int r, int q, int recv) {
  for (int t = 0; t < p->gpus[r].ntbs; t++)
    if ((recv ? p->gpus[r].tbs[t].recv : p->gpus[r].tbs[t].send) == q) return t;
  return -1;
}

/* round(): a pairwise-exchange AllToAll talks to one peer at a time. */
static void test_rounds(void) {
  const char *body = "local n = 8\ncollective{kind='alltoall', ranks=n, chunks=1}\nfor k = 1, n - 1 do\n  ROUND\n"
                     "  for r = 0, n - 1 do chunk(r, 'input', r ~ k):copy(r ~ k, 'output', r) end\nend\n"
                     "for r = 0, n - 1 do chunk(r, 'input', r):copy(r, 'output', r) end\n";
  char with[1024], without[1024];
  const char *at = strstr(body, "ROUND");
  snprintf(with, sizeof with, "%.*s%s%s", (int)(at - body), body, "if k > 1 then round() end", at + 5);
  snprintf(without, sizeof without, "%.*s%s", (int)(at - body), body, at + 5);
  ir_prog *p = build(with, "a pairwise-exchange AllToAll in rounds (round k: r with r xor k)");
  ir_prog *q = build(without, "the same exchanges without rounds");
  if (p && q) {
    int ordered = 1, free_ = 1;
    for (int r = 0; r < 8; r++)
      for (int k = 2; k < 8; k++) {   /* round k's send waits for round k-1's receive; without rounds nothing waits */
        ordered &= waits_on(p, r, tb_to(p, r, r ^ k, 0), tb_to(p, r, r ^ (k - 1), 1), 0);
        free_ &= !waits_on(q, r, tb_to(q, r, r ^ k, 0), tb_to(q, r, r ^ (k - 1), 1), 0);
      }
    ok(ordered, "every rank sends to its round-k peer only after receiving from its round-(k-1) peer");
    ok(free_, "without round() the exchanges do not wait for one another");
  }
  ir_prog_free(p);
  ir_prog_free(q);
  cc_trace *t = NULL;
  ok(trace("collective{kind='alltoall', ranks=2, chunks=1}\nround(1)\n", &t) != BT_OK &&
     strstr(msg, "t.lua:2: round() takes no arguments"), "round() with an argument is refused at its line: %s", msg);
  cc_trace_free(t);
  t = NULL;
  ok(trace("collective{kind='alltoall', ranks=2, chunks=1}\nparallelize(2, function() round() end)\n", &t) != BT_OK &&
     strstr(msg, "round() inside parallelize"), "round() inside parallelize is refused: %s", msg);
  cc_trace_free(t);
}

/* An exchange through scratch (each partner sends its old value, receives
 * the other's into scratch, then adds it) folds back into receive-reduces:
 * recursive doubling on 8 ranks is 4 steps a rank (a send, then rrcs/rrc),
 * not a receive, a nop and a local reduce per round. */
static void test_exchange_fold(void) {
  ir_prog *p = build("collective{kind='allreduce', ranks=8, chunks=1, inplace=true}\nfor k = 0, 2 do\n"
                     "  local d = 1 << k\n  for r = 0, 7 do chunk(r, 'input', 0):copy(r ~ d, 'tmp', 0) end\n"
                     "  for r = 0, 7 do chunk(r, 'input', 0):reduce(chunk(r, 'tmp', 0)) end\nend\n",
                     "recursive doubling through a scratch chunk reused every round");
  int steps = 0, local = 0;
  for (int r = 0; p && r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int st = 0; st < p->gpus[r].tbs[b].nsteps; st++) {
        int op = p->gpus[r].tbs[b].steps[st].op;
        steps++;
        local += op == IR_OP_REDUCE || op == IR_OP_RECV || op == IR_OP_NOP;
      }
  ok(p && steps == 32 && local == 0, "its rounds fold into receive-reduces: %d steps, %d receives into scratch, "
     "local reduces or nops (56 thread blocks and 112 steps before)", steps, local);
  /* the same with exchange(): the same program */
  ir_prog *q = build("collective{kind='allreduce', ranks=8, chunks=1, inplace=true}\nfor k = 0, 2 do\n"
                     "  local d = 1 << k\n  for r = 0, 7 do\n    if r < r ~ d then\n"
                     "      local a, b = exchange(chunk(r, 'input', 0), chunk(r ~ d, 'input', 0), {ch = 0})\n"
                     "      assert(a.rank == r and b.rank == r ~ d and a.buffer == 'input')\n    end\n  end\nend\n",
                     "recursive doubling with exchange()");
  ok(p && q && ir_prog_nsteps(q) == ir_prog_nsteps(p) && ir_prog_ntbs(q) == ir_prog_ntbs(p),
     "exchange() compiles to what the written-out exchange does (%ld steps)", q ? ir_prog_nsteps(q) : -1L);
  ir_prog_free(p);
  ir_prog_free(q);
  fails("collective{kind='allreduce', ranks=2, chunks=1}\nexchange(chunk(0, 'input', 0), chunk(0, 'input', 0))\n",
        "t.lua:2: exchange between rank 0 and itself", "exchange() of one rank with itself");
  fails("collective{kind='allreduce', ranks=2, chunks=2}\nexchange(chunk(0, 'input', 0, 2), chunk(1, 'input', 0))\n",
        "t.lua:2: exchange of references of different counts (2 and 1)", "exchange() of different counts");
  fails("collective{kind='allreduce', ranks=2, chunks=1}\nexchange(chunk(0, 'input', 0), chunk(1, 'input', 0), "
        "{chan = 1})\n", "t.lua:2: exchange: unknown option 'chan'", "exchange() with an unknown option");
  fails("collective{kind='allreduce', ranks=2, chunks=1}\nexchange(chunk(0, 'input', 0), 3)\n",
        "t.lua:2:", "exchange() of a number");
}

int main(void) {
  setenv("BATON_COMPILE_MAX_MB", "256", 1);
  test_exchange_fold();
  test_paired();
  test_links();
  test_rounds();
  return tap_done();
}
