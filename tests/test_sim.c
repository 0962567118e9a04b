/* test_sim.c -- `baton sim` on tiny systems with known answers: one link
 * and one message, a pipeline of tiles, a chain of n hops, the network
 * (the proxies' time per message, every program as Simple), a FIFO lane's
 * pace, a direct program's executor operations; the SPEC reader's
 * refusals, each at its line.
 * Usage: test_sim ALGORITHMS_DIR */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cc_compile.h"
#include "sim_run.h"
#include "tap.h"

static const char *algs;

static ir_prog *compile(const char *script, const char *const *params, int n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", algs, script);
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL;
  if (cc_compile_file(path, params, n, NULL, &p, NULL, d)) printf("# %s: %s\n", script, rt_diag_text(d));
  rt_diag_free(d);
  return p;
}

/* A system whose only costs are the ones a test names: no launch, no
 * step costs, memory and blocks as fast as allowed. */
static void bare(sim_spec *s) {
  sim_spec_defaults(s);
  s->v[SIM_LAUNCH] = s->v[SIM_SIMPLE_STEP] = s->v[SIM_LL_STEP] = s->v[SIM_LL128_STEP] = s->v[SIM_DIRECT_STEP] = 0;
  s->v[SIM_HBM_BW] = 1e6;
  s->v[SIM_BLOCK_BW] = 1e6;   /* a lane's pass over what it receives: the receive's write, no longer */
  s->v[SIM_NVLINK_BW] = 100;
  s->v[SIM_NVLINK_LAT] = 2;
  s->v[SIM_LANES] = 1;
  s->v[SIM_MIN_TILE] = 1024;   /* tiles of a whole slot */
  s->v[SIM_GPUS] = 8;
}

static double run(const ir_prog *p, const sim_spec *s, uint64_t bytes, sim_report *rep) {
  sim_opts o = {.bytes = bytes, .dtype = IP_F32, .inplace = -1};
  rt_diag *d = rt_diag_new(10);
  bt_result r = sim_run(p, s, &o, rep, d);
  if (r) printf("# sim_run: %s\n", rt_diag_text(d));
  rt_diag_free(d);
  return r ? -1 : rep->time_us;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * (1 + fabs(b)); }

static void spec_errors(void) {
  static const struct { const char *text, *expect, *what; } bad[] = {
      {"gpus 4\nfrobs 3\n", "s.spec:2: unknown key 'frobs'", "an unknown key"},
      {"nvlink.bw_gbs -1\n", "s.spec:1: nvlink.bw_gbs -1 is out of range", "a negative bandwidth"},
      {"\n\ngpus 4\ngpus 8\n", "s.spec:4: gpus is given twice", "a repeated key"},
      {"net.latency_us fast\n", "s.spec:1: net.latency_us: 'fast' is not a number", "a value that is not a number"},
      {"gpus 2.5\n", "s.spec:1: gpus 2.5 is not a whole number", "a count that is not whole"},
      {"lanes\n", "s.spec:1: lanes has no value", "a key without a value"},
      {"nodes 5000\n", "s.spec:1: nodes 5000 is out of range [1, 4096]", "more nodes than a system may have"},
      {"gpus \x01\n", "s.spec:1: a byte 0x01 that is not text", "a control byte"},
      {"slots nan\n", "is not a number", "nan"},
      {"gpus 1e400\n", "is not a number", "an overflowing number"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sim_spec s;
    rt_diag *d = rt_diag_new(10);
    ok(sim_spec_read_memory(bad[i].text, strlen(bad[i].text), "s.spec", &s, d) == BT_ERR_INVALID,
       "SPEC: %s is refused", bad[i].what);
    ok_contains(rt_diag_text(d), bad[i].expect, "... with its place and the problem");
    rt_diag_free(d);
  }
  char big[SIM_SPEC_MAX_LINE + 20];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = 0;
  memcpy(big, "gpus 4", 6);
  sim_spec s;
  rt_diag *d = rt_diag_new(10);
  ok(sim_spec_read_memory(big, strlen(big), "s.spec", &s, d) == BT_ERR_INVALID &&
     strstr(rt_diag_text(d), "s.spec:1: a line is"), "SPEC: a line over SIM_SPEC_MAX_LINE is refused");
  rt_diag_free(d);
  const char *good = "# a machine\nname test box\ngpus 4   # per node\nnvlink.bw_gbs 400\n\n";
  d = rt_diag_new(10);
  ok(sim_spec_read_memory(good, strlen(good), "s.spec", &s, d) == BT_OK && s.v[SIM_GPUS] == 4 &&
     s.v[SIM_NVLINK_BW] == 400 && s.v[SIM_NODES] == 1 && !strcmp(s.name, "test box"),
     "SPEC: comments, blanks, a name and defaults for what is not given: %s", rt_diag_text(d));
  rt_diag_free(d);
}

int main(int argc, char **argv) {
  if (argc < 2) { printf("Bail out! usage: test_sim ALGORITHMS_DIR\n"); return 1; }
  algs = argv[1];
  spec_errors();
  sim_spec s;
  sim_report rep;
  bare(&s);

  /* one link, one message: rank 0 sends B bytes to rank 1, which writes them */
  const char *two[] = {"ranks=2"};
  ir_prog *bd = compile("broadcast_direct.lua", two, 1);
  double B = 65536, hbm = 1e9;
  double want = 2 + B / 1e5 + B / hbm;   /* latency + B / 100 GB/s + the receive's write */
  double got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "one link, one message of 64 KiB: latency + bytes / bandwidth (%.6f us, want %.6f)", got, want);
  ok(rep.tiles == 1 && rep.messages == 1, "... one tile, one message (%lld, %lld)", (long long)rep.tiles,
     (long long)rep.messages);
  s.v[SIM_LAUNCH] = 0.7;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want + 0.7), "... and the launch on top (%.6f us)", got);
  s.v[SIM_LAUNCH] = 0;

  /* a pipeline: 8 tiles of 16 KiB down one link, back to back */
  s.v[SIM_SIMPLE_TILE] = 16;
  B = 8 * 16384;
  want = 8 * 16384 / 1e5 + 2 + 16384 / hbm;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "8 tiles pipelined on one link: 8 x tile / bandwidth + one latency (%.6f us, want %.6f)", got,
     want);
  ok(rep.tiles == 8 && rep.messages == 8, "... in 8 messages (%lld tiles)", (long long)rep.tiles);
  s.v[SIM_SIMPLE_TILE] = 128;

  /* a chain of n hops: each rank receives the whole buffer and sends it on
   * in the same pass (its write of it beside the send); the last writes it */
  for (int n = 3; n <= 6; n += 3) {
    char rk[32];
    snprintf(rk, sizeof rk, "ranks=%d", n);
    const char *pp[] = {rk, "chunks=1"};
    ir_prog *ch = compile("broadcast_chain.lua", pp, 2);
    B = 32768;
    want = (n - 1) * (2 + B / 1e5) + B / hbm;
    got = ch ? run(ch, &s, (uint64_t)B, &rep) : -1;
    ok(near(got, want), "a chain of %d hops: (n - 1) x (latency + bytes / bandwidth) + the last write (%.6f us, want "
       "%.6f)", n - 1, got, want);
    ok(rep.path_steps == n && rep.path_by[SIM_BY_MSG] == n - 1,
       "... its critical path is every hop, each bound by its message (%d steps, %d by messages)", rep.path_steps,
       rep.path_by[SIM_BY_MSG]);
    ir_prog_free(ch);
  }

  /* a Simple lane's pace (simple.lane_gbs): slower than the link, it bounds
   * the sender's pass and the receiver's alike */
  s.v[SIM_SIMPLE_LANE] = 10;
  B = 65536;
  want = 2 + 2 * B / 1e4;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "a lane of 10 GB/s on a link of 100: latency + the send's and the receive's passes at the "
     "lane's pace (%.6f us, want %.6f)", got, want);
  /* a receive that sends nothing (its slot copied into place) at a pace
   * of its own (simple.recv_gbs) */
  s.v[SIM_SIMPLE_RECV] = 40;
  want = 2 + B / 1e4 + B / 4e4;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "a receive at 40 GB/s after a send at 10: latency + the send's pass + the receive's at its own "
     "pace (%.6f us, want %.6f)", got, want);
  s.v[SIM_SIMPLE_RECV] = 0;
  /* four lanes at that pace share the link at once: the port's share of
   * each tile fits in its lane's window, nothing waits for the port */
  s.v[SIM_LANES] = 4;
  s.v[SIM_SIMPLE_TILE] = 16;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  want = 2 + 2 * 16384 / 1e4;
  ok(near(got, want) && rep.tiles == 4, "4 lanes, a tile each, on one link: one tile's two passes and a latency, "
     "the port shared (%.6f us, want %.6f, %lld tiles)", got, want, (long long)rep.tiles);
  s.v[SIM_LANES] = 1;
  s.v[SIM_SIMPLE_TILE] = 128;
  s.v[SIM_SIMPLE_LANE] = 0;

  /* a direct program's copy before its waits: in the pass of the put after
   * them (the executor moves the waits first), no time of its own */
  const char *a2[] = {"ranks=2", "via=direct", "protocol=Simple"};
  ir_prog *da = compile("alltoall_direct.lua", a2, 3);
  s.v[SIM_HBM_BW] = 100;   /* a copy that would show */
  want = 2 + (B / 2) / 1e5 + 2;   /* the peer's ready signal, the put of half, its signal */
  got = da ? run(da, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "a direct AllToAll's local copy runs in its put's pass: signal, put, signal (%.6f us, want "
     "%.6f)", got, want);
  s.v[SIM_HBM_BW] = 1e6;
  ir_prog_free(da);
  /* the LL one-shot's put, copy and reduction: one executor operation, one
   * direct.step_us (and no LL step cost: that is the FIFO protocol's) */
  const char *o2[] = {"ranks=2", "shot=1", "inplace=0", "via=direct"};
  ir_prog *os = compile("allreduce_allpairs.lua", o2, 4);
  double base = os ? run(os, &s, 1024, &rep) : -1;
  s.v[SIM_DIRECT_STEP] = s.v[SIM_LL_STEP] = 1;
  got = os ? run(os, &s, 1024, &rep) : -1;
  ok(os && near(got - base, 1), "a one-shot's put, copy and reduction pay direct.step_us once (%.6f us more, want 1)",
     got - base);
  s.v[SIM_DIRECT_STEP] = s.v[SIM_LL_STEP] = 0;
  /* direct.pdl_us: a direct call's launch and fixed cost, less what its
   * programmatic launch saves, never below nothing; FIFO calls keep theirs */
  s.v[SIM_LAUNCH] = 0.7;
  s.v[SIM_CALL] = 4;
  double full = os ? run(os, &s, 1024, &rep) : -1;
  s.v[SIM_DIRECT_PDL] = 0.85;
  got = os ? run(os, &s, 1024, &rep) : -1;
  s.v[SIM_DIRECT_PDL] = 10;
  double floor0 = os ? run(os, &s, 1024, &rep) : -1;
  const char *f2[] = {"ranks=2", "shot=1", "inplace=0"};
  ir_prog *fo = compile("allreduce_allpairs.lua", f2, 3);
  double fifo = fo ? run(fo, &s, 1024, &rep) : -1;
  s.v[SIM_DIRECT_PDL] = 0;
  double fifo0 = fo ? run(fo, &s, 1024, &rep) : -1;
  ok(os && fo && near(full - got, 0.85) && near(floor0, base) && near(fifo, fifo0),
     "direct.pdl_us 0.85: a direct one-shot 0.85 us shorter (%.6f against %.6f), at most launch_us + call_us shorter "
     "(%.6f, without them %.6f); a FIFO one-shot as before (%.6f, %.6f)", got, full, floor0, base, fifo, fifo0);
  s.v[SIM_LAUNCH] = s.v[SIM_CALL] = 0;
  ir_prog_free(fo);
  ir_prog_free(os);
  /* an LL Broadcast (data one way): the peer's signal and the root's
   * wait for it cost what its put and copy cost, no more (no step of
   * their own, no latency: they travel beside the data) */
  const char *b2[] = {"ranks=2", "inplace=1", "via=direct", "protocol=LL"};
  ir_prog *bl = compile("broadcast_direct.lua", b2, 4);
  s.v[SIM_DIRECT_STEP] = 1;
  want = 1 + 2 * 1024 / 1e5;   /* one direct step, then the put's LL lines (twice the data) */
  got = bl ? run(bl, &s, 1024, &rep) : -1;
  ok(bl && near(got, want), "an LL Broadcast on 2 ranks takes its put's time: the peer's signal and the root's wait "
     "for it add nothing (%.6f us, want %.6f)", got, want);
  s.v[SIM_DIRECT_STEP] = 0;
  ir_prog_free(bl);

  /* across the network: 2 nodes of 1 GPU */
  s.v[SIM_GPUS] = 1;
  s.v[SIM_NODES] = 2;
  s.v[SIM_NET_BW] = 25;
  s.v[SIM_NET_LAT] = 5;
  s.v[SIM_NET_STEP] = 3;
  B = 65536;
  want = 5 + 3 + B / 25e3 + B / hbm;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "one message across the network: latency + net.step_us + bytes / bandwidth (%.6f us, "
     "want %.6f)", got, want);
  ok(rep.nports > 0 && strstr(rep.ports[0].name, "port 0"), "... and the busiest port is a network port (%s)",
     rep.nports ? rep.ports[0].name : "none");
  /* the proxies' busy time per message (net.msg_us) holds the ports: one
   * message pays it once; two leaving one rank pay it one after another */
  s.v[SIM_NET_MSG] = 10;
  want = 5 + 3 + 10 + B / 25e3 + B / hbm;
  got = bd ? run(bd, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "one message with net.msg_us 10: latency + delay + the proxies' 10 us + bytes / bandwidth "
     "(%.6f us, want %.6f)", got, want);
  const char *three[] = {"ranks=3"};
  ir_prog *b3 = compile("broadcast_direct.lua", three, 1);
  s.v[SIM_NODES] = 3;
  want = 2 * (10 + B / 25e3) + 5 + 3 + B / hbm;
  got = b3 ? run(b3, &s, (uint64_t)B, &rep) : -1;
  ok(near(got, want), "two messages out of one node's port: the second waits for the first's bytes and proxy time "
     "(%.6f us, want %.6f)", got, want);
  ok(rep.path_by[SIM_BY_PORT] == 1, "... and its critical path says a busy port held it (%d steps)",
     rep.path_by[SIM_BY_PORT]);
  s.v[SIM_NET_MSG] = 0;
  /* across nodes every program runs as Simple (the runtime's rule: LL and
   * LL128 flags have no head word a proxy could watch) */
  const char *ll[] = {"ranks=3", "protocol=LL"};
  ir_prog *b3ll = compile("broadcast_direct.lua", ll, 2);
  double simple = b3 ? run(b3, &s, (uint64_t)B, &rep) : -1;
  s.v[SIM_LL_STEP] = 1;   /* what LL would pay, were it run as LL */
  got = b3ll ? run(b3ll, &s, (uint64_t)B, &rep) : -1;
  ok(b3ll && b3ll->proto == IR_PROTO_LL && near(got, simple), "an LL program across nodes is timed as Simple: no "
     "flag bytes, no LL step cost (%.6f us, Simple %.6f)", got, simple);
  s.v[SIM_NODES] = 1;
  s.v[SIM_GPUS] = 8;
  double inside = b3ll ? run(b3ll, &s, (uint64_t)B, &rep) : -1;
  ok(inside > 0 && !near(inside, b3 ? run(b3, &s, (uint64_t)B, &rep) : -1), "... and inside a node as LL (%.6f us)",
     inside);
  s.v[SIM_LL_STEP] = 0;
  s.v[SIM_NODES] = 2;
  s.v[SIM_GPUS] = 1;
  ir_prog_free(b3);
  ir_prog_free(b3ll);

  /* FIFO slots past the bound a simulation keeps: refused, not allocated */
  s.v[SIM_SLOTS] = 1024;
  s.v[SIM_LANES] = 128;
  const char *many[] = {"ranks=32"};
  ir_prog *a2a = compile("alltoall_direct.lua", many, 1);
  rt_diag *dd = rt_diag_new(10);
  sim_opts so = {.bytes = 1024, .dtype = IP_F32, .inplace = -1};
  s.v[SIM_NODES] = 8;
  s.v[SIM_GPUS] = 8;
  ok(a2a && sim_run(a2a, &s, &so, &rep, dd) == BT_ERR_INVALID && strstr(rt_diag_text(dd), "FIFO slots (slots x lanes)"),
     "more FIFO slots than SIM_MAX_EVENTS is refused before allocating: %s", rt_diag_text(dd));
  rt_diag_free(dd);
  ir_prog_free(a2a);
  s.v[SIM_SLOTS] = 8;
  s.v[SIM_LANES] = 1;
  s.v[SIM_GPUS] = 1;

  /* a system too small for the program */
  s.v[SIM_NODES] = 1;
  sim_opts o = {.bytes = 1024, .dtype = IP_F32, .inplace = -1};
  rt_diag *d = rt_diag_new(10);
  ok(bd && sim_run(bd, &s, &o, &rep, d) == BT_ERR_INVALID && strstr(rt_diag_text(d), "2 ranks, but the system"),
     "a program of more ranks than the system has GPUs is refused: %s", rt_diag_text(d));
  rt_diag_free(d);
  ir_prog_free(bd);
  return tap_done();
}
