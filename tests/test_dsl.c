/* test_dsl.c -- the Lua DSL: sandbox, every DSL error with its script line,
 * symbolic postconditions, and lowering of a few small programs. */
#include <stdlib.h>
#include <string.h>

#include "cc_lower.h"
#include "cc_lua.h"
#include "cc_trace.h"
#include "dsl_test.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "tap.h"

#define AR2 "collective{kind='allreduce', ranks=2, chunks=2, inplace=true}\n"

/* s with the first `from` replaced by `to` (malloc'd). */
static char *str_replace(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
  return out;
}

static void test_errors(void) {
  fails(AR2 "local a = chunk(0, 'input', 0)\nchunk(0, 'input', 0):reduce(chunk(1, 'input', 0))\na:copy(1, 'input', 0)\n",
        "t.lua:4: stale reference: copy of rank 0 input[0] was written again", "stale reference");
  fails(AR2 "local s = chunk(0, 'scratch', 0)\ns:copy(1, 'scratch', 0)\n",
        "t.lua:3: reading an uninitialized chunk: rank 0 scratch[0] was never written", "uninitialized read");
  fails(AR2 "chunk(0, 'input', 1, 2)\n", "t.lua:2: input[1..2] out of range: input has 2 chunks per rank", "index out of range");
  fails(AR2 "chunk(2, 'input', 0)\n", "t.lua:2: rank 2 out of range [0, 2)", "rank out of range");
  fails(AR2 "chunk(0, 'input', 0, 2):reduce(chunk(1, 'input', 0))\n",
        "t.lua:2: reducing references of different counts (2 and 1)", "count mismatch");
  fails("collective{kind='allgather', ranks=4, topology={nodes=2, gpus=2}}\nchunk(0, 'input', 0):copy(3, 'output', 0)\n",
        "t.lua:2: copy from rank 0 to rank 3: the topology (2 nodes x 2 GPUs) does not link them", "unlinked copy");
  fails(AR2 "chunk(0, 'input', 0):reduce(chunk(1, 'input', 0))\n",
        "postcondition of allreduce fails: rank 0 output[1] holds input[1] of rank 0; expected input[1] of ranks 0,1",
        "unmet postcondition");
  fails(AR2 "local x = chunk(1, 'input', 0)\nlocal y = chunk(0, 'input', 0):reduce(x)\ny:reduce(x)\n",
        "postcondition of allreduce fails: rank 0 output[0] holds input[0] of ranks 0,1,1; expected input[0] of ranks 0,1 (last written at t.lua:4)",
        "reducing the same chunk twice");
  fails("chunk(0, 'input', 0)\n", "t.lua:1: call collective{...} before using chunks", "chunk before collective");
  fails("collective{kind='bcast', ranks=2}\n", "t.lua:1: unknown collective kind 'bcast'", "unknown collective");
  fails(AR2 "chunk(0, 'input', 0):copy(0, 'input', 0)\n", "t.lua:2: copy of rank 0 input[0] onto itself", "copy onto itself");
  fails(AR2 "local x = \n", "t.lua:3: unexpected symbol near <eof>", "syntax error");
  fails(AR2 "chunk(0, 'input', 0):copy(1, 'input', 0, {ch = -1})\n", "t.lua:2: option ch=-1 out of range", "bad option");
  /* an out-of-place call leaves its input unchanged: caught at the line, not by the CPU run after lowering */
  fails("collective{kind='allreduce', ranks=2, chunks=1}\nlocal a = chunk(1, 'input', 0):reduce(chunk(0, 'input', 0))\n",
        "t.lua:2: reduce into rank 1 input[0] writes the input buffer of an out-of-place collective (declared at t.lua:1 "
        "without inplace = true), which a call must leave unchanged; write into output or a scratch buffer, or declare "
        "inplace = true", "an out-of-place reduce into the input");
  fails("collective{kind='custom', ranks=2, chunks=2, inplace=false, expect='o[r][c]=i[1-r][c]'}\n"
        "chunk(0, 'input', 0, 2):copy(1, 'scratch', 0)\nchunk(1, 'scratch', 0, 2):copy(1, 'input', 0)\n",
        "t.lua:3: copy to rank 1 input[0..1] writes the input buffer of an out-of-place collective (declared at t.lua:1 "
        "without inplace = true)", "an out-of-place copy into the input");
}

/* A Lua error is one line; the traceback follows only when asked for. */
static void test_traceback(void) {
  const char *src = AR2 "local x = nil\nx.y = 1\n";
  ok(trace(src, NULL) == BT_ERR_INVALID, "a Lua error is an error");
  ok(!strcmp(msg, "t.lua:3: attempt to index a nil value (local 'x')\n"), "by default one line, no traceback");
  cc_lua_set_traceback(1);
  trace(src, NULL);
  cc_lua_set_traceback(0);
  ok(!strncmp(msg, "t.lua:3: attempt to index a nil value (local 'x')\nstack traceback:\n", 67),
     "with cc_lua_set_traceback(1) the traceback follows");
  fails(AR2 "error(setmetatable({}, {}))\n", "t.lua:2: error object is a table value", "a table as the error");
  fails(AR2 "error('bare', 0)\n", "t.lua:2: bare", "error(msg, 0)");
}

static void test_sandbox(void) {
  fails("os.exit(1)\n", "t.lua:1: attempt to index a nil value (global 'os')", "os is absent");
  fails("io.open('/etc/passwd')\n", "attempt to index a nil value (global 'io')", "io is absent");
  fails("dofile('/etc/passwd')\n", "attempt to call a nil value (global 'dofile')", "dofile is absent");
  fails("require('os')\n", "t.lua:1: module 'os' not found: scripts can require only baton's own modules (baton.allpairs, baton.ring, baton.topo)",
        "require refuses everything but baton's modules");
  fails("require('baton.io')\n", "t.lua:1: module 'baton.io' not found (there are baton.allpairs, baton.ring, baton.topo)",
        "require of an unknown baton module");
  fails("require('baton.../x')\n", "module 'baton.../x' not found: scripts can require only", "require refuses paths");
  fails("local f, e = load(string.dump(function() end))\nerror(e)\n", "attempt to load a binary chunk", "binary chunks are refused");
  fails("local t = {}\nfor i = 1, 1e9 do t[i] = i end\n",
        "t.lua:2: memory limit reached: the script and the compiler's structures for it need more than 64 MiB "
        "(BATON_COMPILE_MAX_MB raises it)", "memory is bounded");
  fails("while true do end\n", "instruction limit reached", "instructions are bounded");
  ok(trace("local f = load('return 1 + 1')\nassert(f() == 2)\n" AR2
           "chunk(1,'input',0):reduce(chunk(0,'input',0)) chunk(0,'input',1):reduce(chunk(1,'input',1))\n"
           "chunk(1,'input',0):copy(0,'input',0) chunk(0,'input',1):copy(1,'input',1)\n", NULL) == BT_OK,
     "text load(), string and math work: %s", msg);
}

/* Compiles, validates and runs a script on the CPU executor; returns the
 * program when `keep` (the caller frees it). */
static ir_prog *compiles_keep(const char *src, const char *what, int want_steps, int keep) {
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  ok(trace(src, &t) == BT_OK, "%s traces: %s", what, msg);
  if (!t) return NULL;
  rt_diag *d = rt_diag_new(10);
  cc_lower_opts lo = {.fuse = 1};
  ok(!cc_lower(t, &lo, &p, d) && !ir_check(p, d) && !ir_check_races(p, ir_prog_aliased(p, p->inplace), d),
     "%s lowers to a valid program: %s", what, rt_diag_text(d));
  if (p) {
    ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_SUM, .count = 103, .inplace = -1, .tile = 8};
    ip_cpu_report rep;
    ok(!ip_cpu_verify(p, &o, &rep, d), "%s computes its collective: %s", what, rt_diag_text(d));
    if (want_steps) ok(ir_prog_nsteps(p) == want_steps, "%s has %d steps (got %ld)", what, want_steps, ir_prog_nsteps(p));
  }
  if (!keep) { ir_prog_free(p); p = NULL; }
  cc_trace_free(t);
  rt_diag_free(d);
  return p;
}

static void compiles(const char *src, const char *what, int want_steps) {
  compiles_keep(src, what, want_steps, 0);
}

/* tb of rank r has these peers and channel */
static int tb_is(const ir_prog *p, int r, int tb, int send, int recv, int chan) {
  if (!p || r >= p->ngpus || tb >= p->gpus[r].ntbs) return 0;
  const ir_tb *b = &p->gpus[r].tbs[tb];
  return b->send == send && b->recv == recv && b->chan == chan;
}

/* A 3-rank ring AllGather: each rank copies its input into place, then the
 * chunk travels round the ring; OPTS is the options table of the ring copies. */
#define AG3RING(OPTS) "collective{kind='allgather', ranks=3, chunks=1}\n" \
  "for r = 0, 2 do chunk(r, 'input', 0):copy(r, 'output', r, {sendtb = LOCALTB}) end\n" \
  "for r = 0, 2 do local c = chunk(r, 'output', r)\n" \
  "  for s = 1, 2 do c = c:copy((r + s) % 3, 'output', r, " OPTS ") end end\n"

static void test_placement(void) {
  /* receives in tb 0, sends in tb 1, local copies in tb 2: no fusion across tbs */
  ir_prog *p = compiles_keep("LOCALTB = 2\n" AG3RING("{recvtb = 0, sendtb = 1}"), "placed ring allgather", 0, 1);
  int good = p != NULL;
  for (int r = 0; p && r < 3; r++)
    good &= p->gpus[r].ntbs == 3 && tb_is(p, r, 0, -1, (r + 2) % 3, 0) && tb_is(p, r, 1, (r + 1) % 3, -1, 0) &&
            tb_is(p, r, 2, -1, -1, 0) && p->gpus[r].tbs[2].steps[0].op == IR_OP_COPY;
  ok(good, "sendtb/recvtb put sends, receives and local copies in the thread blocks the script names");
  ir_prog_free(p);
  /* everything in tb 0: one thread block per rank, fused as without placement */
  p = compiles_keep("LOCALTB = 0\n" AG3RING("{recvtb = 0, sendtb = 0}"), "ring allgather placed in one tb", 0, 1);
  good = p != NULL;
  for (int r = 0; p && r < 3; r++) good &= p->gpus[r].ntbs == 1 && tb_is(p, r, 0, (r + 1) % 3, (r + 2) % 3, 0);
  ok(good, "connections and local copies placed in one tb share it");
  ir_prog_free(p);
  /* whole-program instances: instance j's tb t is j * (tbs per instance) + t */
  p = compiles_keep("collective{kind='allgather', ranks=3, chunks=1, instances=2}\n"
                    "for r = 0, 2 do chunk(r, 'input', 0):copy(r, 'output', r, {sendtb = 2}) end\n"
                    "for r = 0, 2 do local c = chunk(r, 'output', r)\n"
                    "  for s = 1, 2 do c = c:copy((r + s) % 3, 'output', r, {recvtb = 0, sendtb = 1}) end end\n",
                    "placed ring allgather, 2 instances", 0, 1);
  good = p != NULL;
  for (int r = 0; p && r < 3; r++)
    good &= p->gpus[r].ntbs == 6 && tb_is(p, r, 3, -1, (r + 2) % 3, 1) && tb_is(p, r, 4, (r + 1) % 3, -1, 1) &&
            tb_is(p, r, 5, -1, -1, 1);
  ok(good, "instance 1 of a placed program takes tbs 3..5 on channel 1");
  ir_prog_free(p);

#define AG3 "collective{kind='allgather', ranks=3, chunks=1}\n"
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, {sendtb = 0}) end end\n",
              "t.lua:3: sendtb=0: the send from rank 0 to rank 2 on channel 0: rank 0 tb 0 already sends to rank 1 on channel 0 (placed at t.lua:3), and this one sends to rank 2 on channel 0; a thread block has one send peer, one receive peer and one channel",
              "two send peers placed in one tb");
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, {recvtb = r == 0 and 1 or 0}) end end\n",
              "t.lua:3: recvtb=0: the receive on rank 0 from rank 2 on channel 0: rank 0 tb 0 already receives from rank 1 on channel 0 (placed at t.lua:3)",
              "two receive peers placed in one tb");
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, {ch = q == 2 and 1 or 0, sendtb = 0}) end end\n",
              "rank 0 tb 0 already sends to rank 1 on channel 0 (placed at t.lua:3), and this one sends to rank 2 on channel 1",
              "two channels placed in one tb");
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do local o = nil\n"
                  "  if q == (r + 1) % 3 then o = {sendtb = 0} end\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, o) end end\n"
                  "chunk(0, 'input', 0):copy(1, 'scratch', 0, {sendtb = 1})\n",
              "t.lua:5: sendtb=1: the send from rank 0 to rank 1 on channel 0: its connection is already placed in tb 0 (at t.lua:4), and one connection belongs to one thread block",
              "one connection placed in two tbs");
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, {sendtb = 108}) end end\n",
              "t.lua:3: sendtb=108: the send from rank 0 to rank 1 on channel 0: thread block 108 is out of range: a rank runs at most 108 thread blocks (0..107)",
              "a tb index beyond the limit");
  lower_fails(AG3 "for r = 0, 2 do for q = 0, 2 do\n"
                  "  chunk(r, 'input', 0):copy(q, 'output', r, q == (r + 1) % 3 and {sendtb = 5} or nil) end end\n",
              "t.lua:3: tb 5 is placed on rank 0, but rank 0 has only 5 thread blocks; placed indices must leave no gap (use 0..4)",
              "a tb index that leaves a gap");
  lower_fails("collective{kind='alltoall', ranks=56, chunks=1}\n"
              "for r = 0, 55 do for q = 0, 55 do chunk(r, 'input', q):copy(q, 'output', r) end end\n",
              "t.lua:2: rank 0 needs 111 thread blocks, more than the 108 a GPU runs at once: it sends to 55 peers and "
              "receives from 55, a thread block per peer and direction (110), plus 1 for local copies and reductions; use "
              "placement = \"paired\" (a peer's send and receive in one thread block), or fewer peers",
              "more thread blocks than a GPU runs at once (one channel, one instance: peers, not channels)");
  lower_fails("collective{kind='alltoall', ranks=28, chunks=2}\n"
              "for r = 0, 27 do for q = 0, 27 do for c = 0, 1 do\n"
              "  chunk(r, 'input', q * 2 + c):copy(q, 'output', r * 2 + c, {ch = c}) end end end\n",
              "t.lua:3: rank 0 needs 110 thread blocks, more than the 108 a GPU runs at once: it sends to 27 peers and "
              "receives from 27 on 2 channels, a thread block per peer, direction and channel (108), plus 2 for local "
              "copies and reductions; use fewer channels, placement = \"paired\" (a peer's send and receive in one "
              "thread block), or fewer peers",
              "too many thread blocks with 2 channels names channels");
  lower_fails("collective{kind='alltoall', ranks=28, chunks=1, instances=2}\n"
              "for r = 0, 27 do for q = 0, 27 do chunk(r, 'input', q):copy(q, 'output', r) end end\n",
              "t.lua:2: rank 0 needs 110 thread blocks, more than the 108 a GPU runs at once: it sends to 27 peers and "
              "receives from 27 in each of 2 instances (instances = 2 at t.lua:1), a thread block per peer, direction and "
              "channel (108), plus 2 for local copies and reductions; use fewer instances, placement = \"paired\"",
              "too many thread blocks with 2 instances names instances, not channels");
  lower_fails("collective{kind='alltoall', ranks=28, chunks=1}\nparallelize(2, function(i)\n"
              "  for r = 0, 27 do for q = 0, 27 do chunk(r, 'input', q):copy(q, 'output', r) end end\nend)\n",
              "t.lua:3: rank 0 needs 110 thread blocks, more than the 108 a GPU runs at once: it sends to 27 peers and "
              "receives from 27 on 2 channels, a thread block per peer, direction and channel (108), plus 2 for local "
              "copies and reductions; use a smaller count for parallelize(2) at t.lua:2, placement = \"paired\"",
              "too many thread blocks from parallelize's channels names the parallelize");
  lower_fails("collective{kind='alltoall', ranks=56, chunks=1}\nfor r = 0, 55 do for q = 0, 55 do\n"
              "  chunk(r, 'input', q):copy(q, 'output', r, q ~= r and {sendtb = q < r and q or q - 1} or nil) end end\n",
              "t.lua:3: rank 0 needs 111 thread blocks, more than the 108 a GPU runs at once: it sends to 55 peers and "
              "receives from 55, a thread block per peer and direction (110), plus 1 for local copies and reductions; "
              "sendtb/recvtb place up to tb 54 (at t.lua:3); use placement = \"paired\" (a peer's send and receive "
              "in one thread block)",
              "too many thread blocks with placed sends names the highest placed index and its line");
  lower_fails("collective{kind='allgather', ranks=4, chunks=120, inplace=true}\nfor c = 0, 119 do for r = 0, 3 do\n"
              "  local x = chunk(r, 'output', r * 120 + c)\n"
              "  for s = 1, 3 do x = x:copy((r + (c % 2 == 0 and s or -s)) % 4, 'output', r * 120 + c, {ch = c // 2}) end\n"
              "end end\n",
              "t.lua:4: rank 0 needs 120 thread blocks, more than the 108 a GPU runs at once: it sends to 2 peers and "
              "receives from 2 on 60 channels, in 120 thread blocks (one holds at most one send and one receive peer); "
              "use fewer channels, or fewer peers",
              "too many thread blocks of rings whose sends and receives already share them: no pairing advice");
}

/* A compiled program that fails the deadlock proof: each step of the cycle
 * names its script line, and the error starts with the first one's. */
static void test_cycle_prov(void) {
  ir_prog *p = compiles_keep("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[1-r][c]'}\n"
                             "for r = 0, 1 do\n  chunk(r, 'input', 0):copy(1 - r, 'output', 0)\nend\n",
                             "a 2-rank exchange", 0, 1);
  if (!p) return;
  /* each rank's send waits for its receive: a cycle through dependencies and messages */
  for (int r = 0; r < 2; r++) {
    int ts = -1, tr = -1;
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      if (p->gpus[r].tbs[t].send >= 0) ts = t;
      if (p->gpus[r].tbs[t].recv >= 0) tr = t;
    }
    if (ts < 0 || tr < 0 || ts == tr) { ok(0, "rank %d has a send tb and a receive tb", r); ir_prog_free(p); return; }
    p->gpus[r].tbs[ts].steps[0].depid = tr;
    p->gpus[r].tbs[ts].steps[0].deps = 0;
    p->gpus[r].tbs[tr].steps[0].hasdep = 1;
  }
  rt_diag *d = rt_diag_new(10);
  ok(ir_check(p, d) == BT_ERR_INVALID, "a dependency cycle in a compiled program is refused");
  ok_contains(rt_diag_text(d),
              "t.lua:3: rank 0 tb 0 step 0: dependency cycle through program order, dependencies and messages: "
              "rank 0 tb 0 step 0 (t.lua:3) -[message]-> rank 1 tb 1 step 0 (t.lua:3) -[dependency]-> "
              "rank 1 tb 0 step 0 (t.lua:3) -[message]-> rank 0 tb 1 step 0 (t.lua:3) -[dependency]-> back",
              "... starting with the script line of its first step, each step with its line");
  rt_diag_free(d);
  ir_prog_free(p);
}

/* The standard modules: loading, caching, errors inside them, provenance. */
static void test_modules(void) {
  cc_trace *t = NULL;
  ok(trace("local ring = require 'baton.ring'\nassert(ring == require('baton.ring'))\n"
           "collective{kind='allreduce', ranks=3, chunks=3, inplace=true}\n"
           "ring.allreduce({0, 1, 2}, 'input', 0)\n", &t) == BT_OK, "a script using baton.ring traces: %s", msg);
  if (t) {
    int all = t->nops == 12;
    for (int i = 0; i < t->nops; i++) all &= t->ops[i].line == 4;
    ok(all, "the 12 operations made inside baton.ring belong to the script's line 4 (%d ops)", t->nops);
    cc_trace_free(t);
  }
  fails("local ring = require 'baton.ring'\ncollective{kind='allreduce', ranks=2, chunks=2}\n"
        "ring.allreduce({0, 5}, 'input', 0)\n", "t.lua:3: baton.ring:", "an error inside a module names the script line");
  ok_contains(msg, "rank 5 out of range [0, 2)", "... and the problem");
  fails("local ring = require 'baton.ring'\ncollective{kind='allreduce', ranks=2, chunks=2}\n"
        "ring.allreduce({}, 'input', 0)\n", "t.lua:3: a ring needs a non-empty list of ranks", "an empty ring");
  compiles("local ring, topo = require 'baton.ring', require 'baton.topo'\n"
           "collective{kind='allreduce', ranks=4, chunks=8, inplace=true}\n"
           "ring.allreduce({2, 0, 3, 1}, 'input', 0, {count = 2})\n"
           "assert(#topo.rotate(topo.range(5), 2) == 5 and topo.rotate(topo.range(5), 2)[1] == 2)\n",
           "ring allreduce over a permuted rank list, two chunks per message", 0);
  compiles("local ring = require 'baton.ring'\n"
           "collective{kind='reducescatter', ranks=3, chunks=1, inplace=true}\n"
           "ring.reduce_scatter({0, 1, 2}, 'input', 0)\n", "ring reduce-scatter", 0);
  compiles("local ring = require 'baton.ring'\n"
           "collective{kind='allgather', ranks=3, chunks=2, inplace=true}\n"
           "ring.all_gather({2, 1, 0}, 'output', function(j) return 2 * (3 - j) end, {count = 2})\n",
           "ring all-gather backwards, index given by a function", 0);
  compiles("local allpairs = require 'baton.allpairs'\n"
           "collective{kind='allreduce', ranks=3, chunks=1, inplace=true}\n"
           "allpairs.reduce({0, 1, 2}, 'input', function() return 0 end, {scratch = 'acc'})\n",
           "all-pairs one-shot reduction into a named scratch buffer", 0);
}

/* Custom collectives: the expect postcondition, checked symbolically and
 * carried into the IR. */
#define NEXT4_DECL(EXTRA) "collective{kind='custom', ranks=4, chunks=2, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1'" EXTRA "}\n"
#define NEXT4 NEXT4_DECL("")

static void test_custom(void) {
  compiles(NEXT4 "for r = 0, 2 do chunk(r, 'input', 0, 2):copy(r + 1, 'output', 0) end\n",
           "AllToNext (a custom collective) verified by its own expectation", 3 * 2);
  compiles("collective{kind='custom', ranks=3, chunks=1, inplace=false, expect='o[r][c]=i[*][c] if r==0'}\n"
           "local acc = chunk(1, 'input', 0):copy(2, 'tmp', 0):reduce(chunk(2, 'input', 0))\n"
           "chunk(0, 'input', 0):copy(0, 'output', 0):reduce(acc)\n",
           "Reduce to rank 0 (a custom collective with a reduction)", 0);
  fails(NEXT4 "for r = 0, 2 do chunk(r, 'input', 0, 2):copy((r + 2) % 4, 'output', 0) end\n",
        "t.lua:1: postcondition of the custom collective (expect \"o[r][c]=i[r-1][c] if r>=1\") fails: "
        "rank 1 output[0] holds nothing (never written); expected input[0] of rank 0 by rule 1 (o[r][c]=i[r-1][c] if r>=1)",
        "a wrong custom program: the rule that applied named");
  fails(NEXT4 "for r = 0, 2 do chunk(r, 'input', 0, 2):copy(r + 1, 'output', 0) end\n"
        "chunk(0, 'input', 1):copy(3, 'output', 1)\n",
        "fails: rank 3 output[1] holds input[1] of rank 0; expected input[1] of rank 2 by rule 1 (o[r][c]=i[r-1][c] "
        "if r>=1) (last written at t.lua:3)",
        "a custom program that overwrites a result");
  /* instances = 2 with an expect that the blocked layout does not keep
   * (it names k and c % k): written into the IR's chunks, it verifies. */
  compiles("collective{kind='custom', ranks=2, chunks=2, inplace=false, instances=2, expect='o[r][c]=i[1-r][k-1-c]'}\n"
           "chunk(0, 'input', 1, 2, {stride = -1}):copy(1, 'output', 0)\n"
           "chunk(1, 'input', 1, 2, {stride = -1}):copy(0, 'output', 0)\n",
           "a reversing exchange in two instances: its expect in the IR's chunks", 0);
  compiles("collective{kind='custom', ranks=2, chunks=2, inplace=false, instances=2, expect='o[r][c]=i[1-r][c%2]'}\n"
           "chunk(0, 'input', 0, 2):copy(1, 'output', 0)\nchunk(1, 'input', 0, 2):copy(0, 'output', 0)\n",
           "an expect naming c % 2 in two instances", 0);
  /* A sum over some ranks: a node-local AllReduce of 2 nodes of 2. */
  compiles("collective{kind='custom', ranks=4, chunks=1, inplace=false, expect='o[r][c]=i[* if q/2==r/2][c]'}\n"
           "for nd = 0, 1 do\n  local a, b = 2 * nd, 2 * nd + 1\n"
           "  local s = chunk(a, 'input', 0):copy(b, 'tmp', 0):reduce(chunk(b, 'input', 0))\n"
           "  s:copy(b, 'output', 0)\n  s:copy(a, 'output', 0)\nend\n",
           "a node-local AllReduce, its expectation a sum over the ranks of a node (i[* if q/2==r/2])", 0);
  fails("collective{kind='custom', ranks=4, chunks=1, inplace=false, expect='o[r][c]=i[* if q/2!=r/2][c]'}\n"
        "for nd = 0, 1 do\n  local a, b = 2 * nd, 2 * nd + 1\n"
        "  local s = chunk(a, 'input', 0):copy(b, 'tmp', 0):reduce(chunk(b, 'input', 0))\n"
        "  s:copy(b, 'output', 0)\n  s:copy(a, 'output', 0)\nend\n",
        "rank 0 output[0] holds input[0] of ranks 0,1; expected input[0] of ranks 2,3 by rule 1",
        "a sum over the wrong ranks is named, with the ranks");
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[q][c]'}\n"
        "chunk(0, 'input', 0):copy(0, 'output', 0)\n",
        "q (the rank a subset sums) is for i[* if COND] only", "q outside a subset is refused");
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r][c] if r==1; "
        "o[r][c]=i[0][c] if r==0'}\nchunk(1, 'input', 0):copy(1, 'output', 0)\nchunk(1, 'input', 0):copy(0, 'output', 0)\n",
        "rank 0 output[0] holds input[0] of rank 1; expected input[0] of rank 0 by rule 2 (o[r][c]=i[0][c] if r==0)",
        "of two rules, the one that applied is named");
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=true, expect='o[r][c]=i[1-r][c] if r==0'}\n"
        "local t = chunk(1, 'input', 0):copy(0, 'tmp', 0)\nchunk(0, 'input', 0):copy(1, 'input', 0)\nt:copy(0, 'input', 0)\n",
        "rank 1 output[0] holds input[0] of rank 0; expected input[0] of rank 1 (last written at t.lua:3)",
        "in place, a chunk no rule names must keep its value");
  ok_contains(msg, "t.lua:1: postcondition of the custom collective", "... named at the collective's line");
  fails("collective{kind='custom', ranks=4, chunks=1, expect='o[r][c]=i[r-1][c] iff r>=1'}\n",
        "t.lua:1: expect names 'iff', which is none of r, c, n, k, i, o, if", "a malformed expect");
  fails("collective{kind='custom', ranks=4, chunks=1}\n", "t.lua:1: a custom collective needs expect =", "custom without expect");
  fails("collective{kind='allgather', ranks=4, expect='o[r][c]=i[r][c]'}\n",
        "t.lua:1: expect is only for kind = \"custom\" (the allgather postcondition is built in)", "expect on a built-in collective");
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r+1][c]'}\nchunk(1, 'input', 0):copy(0, 'output', 0)\n",
        "t.lua:1: postcondition of the custom collective (expect \"o[r][c]=i[r+1][c]\") says rank 1 output[0] holds input[0] of rank 2, which does not exist",
        "an expectation naming a rank that does not exist");
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r/c][c]'}\n",
        "\"): expect: rule 1 divides by zero at rank 0 chunk 0", "an expectation that divides by zero");
  /* Gather: output and input sizes differ; vars put script values in the expectation, no string building. */
  compiles("local n, k, root = 4, 2, 1\n"
           "collective{kind='custom', ranks=n, chunks=k, inplace=false, output_chunks=n*k,\n"
           "           expect='o[r][c]=i[c/k][c%k] if r==root', vars={root=root}}\n"
           "for r = 0, n - 1 do chunk(r, 'input', 0, k):copy(root, 'output', r * k) end\n",
           "a gather to rank 1 (output_chunks = 8, input 2; vars root = 1)", 0);
  ir_prog *p = compiles_keep("local s = 3\ncollective{kind='custom', ranks=4, chunks=1, inplace=false,\n"
                             "  expect='o[r][c]=i[(r-shift+n)%n][c]', vars={shift=s}}\n"
                             "for r = 0, 3 do chunk(r, 'input', 0):copy((r + s) % 4, 'output', 0) end\n",
                             "a shift by 3 with expect vars", 0, 1);
  ok(p && p->expect && !strcmp(p->expect, "o[r][c]=i[(r-(3)+n)%n][c]"),
     "the IR's expect has the vars' values in place: %s", p && p->expect ? p->expect : "(none)");
  ir_prog_free(p);
  fails("collective{kind='custom', ranks=4, chunks=1, expect='o[r][c]=i[r-shift][c]'}\n",
        "t.lua:1: expect names 'shift', which is none of r, c, n, k, i, o, if (and q in i[* if ...]): a value goes in vars = { shift = ... }",
        "an unbound name in expect");
  fails("collective{kind='custom', ranks=4, chunks=1, expect='o[r][c]=i[r][c]', vars={n=2}}\n",
        "t.lua:1: vars: 'n' is not a name expect can use", "vars may not rebind r, c, n, k");
  fails("collective{kind='custom', ranks=4, chunks=1, expect='o[r][c]=i[r][c]', vars={s=1.5}}\n",
        "t.lua:1: vars: every entry must be name = integer or name = {integer, ...} (s = number)", "vars hold integers");
  /* prov names the lines that called the helper an operation was made in
   * (as the errors do), and only those. */
  p = compiles_keep("collective{kind='allgather', ranks=2, chunks=1}\nlocal function send(a, b)\n"
                    "  chunk(a, 'input', 0):copy(b, 'output', a)\nend\nlocal function both(a, b) send(a, b); send(b, a) end\n"
                    "both(0, 1)\nfor r = 0, 1 do chunk(r, 'input', 0):copy(r, 'output', r) end\n",
                    "an allgather made in a helper called from a helper", 0, 1);
  int helper = 0, top = 0, other = 0;
  for (int r = 0; p && r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int st = 0; st < p->gpus[r].tbs[b].nsteps; st++) {
        const char *pv = p->gpus[r].tbs[b].steps[st].prov;
        if (pv && !strcmp(pv, "t.lua:3 (called from t.lua:5, t.lua:6)")) helper++;
        else if (pv && !strcmp(pv, "t.lua:7")) top++;
        else other++;
      }
  ok(helper == 4 && top == 2 && other == 0, "prov names the helper's line and its callers (%d steps), top-level lines "
     "alone (%d), nothing else (%d)", helper, top, other);
  ir_prog_free(p);
  /* A list in vars: per-rank sizes.  An AllToAllv as a custom collective,
   * rank p sending size[q] chunks from off[q] of its input to block p of
   * rank q's output; the IR's expect holds the lists in place. */
  const char *a2av = "local n = 4\nlocal size, off, at = {}, {}, 0\n"
                     "for q = 1, n do size[q] = (q - 1) % 3 + 1; off[q] = at; at = at + size[q] end\n"
                     "collective{kind='custom', ranks=n, chunks=at, output_chunks=n*3, inplace=false,\n"
                     "  expect='o[r][c]=i[c/size[r]][off[r]+c%size[r]] if c<n*size[r]', vars={size=size, off=off}}\n"
                     "for p = 0, n - 1 do for q = 0, n - 1 do\n"
                     "  chunk(p, 'input', off[q + 1], size[q + 1]):copy(q, 'output', p * SLOT) end end\n";
  char *good = str_replace(a2av, "SLOT", "size[q + 1]"), *bad = str_replace(a2av, "SLOT", "(size[q + 1] % 2)");
  p = compiles_keep(good, "an AllToAllv of per-rank sizes {1,2,3,1}: vars lists in its expect", 0, 1);
  ok(p && p->expect && !strcmp(p->expect, "o[r][c]=i[c/{1,2,3,1}[r]][{0,1,3,6}[r]+c%{1,2,3,1}[r]] if c<n*{1,2,3,1}[r]"),
     "the IR's expect holds the lists: %s", p && p->expect ? p->expect : "(none)");
  ir_prog_free(p);
  fails(bad, "expected input[", "an AllToAllv with a block at the wrong offset fails its postcondition");
  free(good);
  free(bad);
  fails("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[s[r+1]][c]', vars={s={1,0}}}\n"
        "chunk(0, 'input', 0):copy(0, 'output', 0)\nchunk(0, 'input', 0):copy(1, 'output', 0)\n",
        "indexes a list outside its values at rank 1", "a list indexed past its end is named, with the rank");
  fails("collective{kind='custom', ranks=2, chunks=1, expect='o[r][c]=i[s[r]][c]', vars={s={1, 0.5}}}\n",
        "t.lua:1: vars: s must be a list of integers {3, 1, 2, ...}, but holds a number that is not an integer",
        "a list of vars holds integers");
  fails("collective{kind='custom', ranks=2, chunks=1, expect='o[r][c]=i[s[r]][c]', vars={s={}}}\n",
        "t.lua:1: vars: s is an empty table", "an empty list is refused");
  fails("collective{kind='custom', ranks=2, chunks=1, expect='o[r][c]=i[s][c]', vars={s={1,0}}}\n",
        "expected '['", "a list must be indexed");
  fails("collective{kind='allreduce', ranks=4, vars={s=1}}\n",
        "t.lua:1: vars is only for kind = \"custom\"", "vars on a built-in collective");
  fails("collective{kind='allgather', ranks=4, output_chunks=2}\n",
        "t.lua:1: output_chunks is only for kind = \"custom\"", "buffer sizes of a built-in collective are fixed");
  fails("collective{kind='custom', ranks=4, chunks=1, input_chunks=0, expect='o[r][c]=i[r][c]'}\n",
        "t.lua:1: input_chunks=0 out of range [1, 2097152]", "input_chunks is bounded");
}

static void test_lowering(void) {
  compiles(AR2 "chunk(1,'input',0):reduce(chunk(0,'input',0)) chunk(0,'input',1):reduce(chunk(1,'input',1))\n"
               "chunk(1,'input',0):copy(0,'input',0) chunk(0,'input',1):copy(1,'input',1)\n", "2-rank allreduce", 6);
  compiles(AR2 "local later = chunk(0, 'scratch', 0)   -- taken up front, never read: no error\n"
               "chunk(1,'input',0):reduce(chunk(0,'input',0)) chunk(0,'input',1):reduce(chunk(1,'input',1))\n"
               "chunk(1,'input',0):copy(0,'input',0) chunk(0,'input',1):copy(1,'input',1)\n",
           "a reference to a chunk never written that nothing reads", 6);
  compiles("collective{kind='allgather', ranks=3, chunks=1}\n"
           "for r = 0, 2 do for q = 0, 2 do chunk(r, 'input', 0):copy(q, 'output', r) end end\n",
           "direct allgather with local copies", 15);
  compiles("collective{kind='alltoall', ranks=3, chunks=1}\n"
           "for r = 0, 2 do for q = 0, 2 do chunk(r, 'input', q):copy(q, 'output', r) end end\n",
           "direct alltoall", 0);
  compiles("collective{kind='allreduce', ranks=2, chunks=1}\n"
           "local s = chunk(1, 'input', 0):copy(0, 'tmp', 0)\n"
           "chunk(0,'input',0):copy(0,'output',0):reduce(s)\n"
           "local s2 = chunk(0, 'input', 0):copy(1, 'tmp', 0)\n"
           "chunk(1,'input',0):copy(1,'output',0):reduce(s2)\n",
           "out-of-place allreduce through a named scratch buffer", 0);
  /* rrc + s fused into rrs, its buffer reused after: validation once refused the messages' names */
  ir_prog *p = compiles_keep("collective{kind='custom', ranks=3, chunks=1, inplace=false, expect='o[r][c]=i[*][c] if r==2'}\n"
                             "local acc = chunk(1, 'input', 0):copy(1, 'acc', 0)\nacc = acc:reduce(chunk(0, 'input', 0))\n"
                             "acc:copy(2, 'output', 0):reduce(chunk(2, 'input', 0))\nchunk(1, 'input', 0):copy(1, 'acc', 0)\n",
                             "a fused receive-reduce-send whose buffer is reused", 0, 1);
  int rrs = 0;
  for (int t = 0; p && t < p->gpus[1].ntbs; t++)
    for (int k = 0; k < p->gpus[1].tbs[t].nsteps; k++)
      rrs += p->gpus[1].tbs[t].steps[k].op == IR_OP_RRS && p->gpus[1].tbs[t].steps[k].dstbuf == IR_BUF_OUTPUT;
  ok(rrs == 1, "rank 1 receives, reduces and sends in one rrs step whose destination is rank 2's output (%d)", rrs);
  ir_prog_free(p);
  /* Rabenseifner's Reduce: a ring reduce-scatter that leaves the root's
   * partial sum in its output (fusion once refused it on 3+ ranks) */
  for (int n = 3; n <= 5; n++) {
    char src[800], what[80];
    snprintf(src, sizeof src, "local n = %d\ncollective{kind='reduce', ranks=n, chunks=n, inplace=false}\n"
             "for c = 0, n - 1 do\n  local acc = chunk((c + 1) %% n, 'input', c)\n  for k = 2, n do\n"
             "    local r = (c + k) %% n\n"
             "    acc = acc:copy(r, r == 0 and 'output' or 'work', c):reduce(chunk(r, 'input', c))\n  end\n"
             "  if c ~= 0 then acc:copy(0, 'output', c) end\nend\n", n);
    snprintf(what, sizeof what, "Rabenseifner's Reduce on %d ranks (ring reduce-scatter, gather to the root)", n);
    compiles(src, what, 0);
  }
}

/* Alternating rings: instance 0 runs the ring forward, instance 1 backward. */
#define ALT_RING(EXTRA) "collective{kind='allreduce', ranks=4, chunks=4, inplace=true" EXTRA "}\n" \
  "parallelize(2, function(i)\n" \
  "  local function nxt(r, s) if i == 0 then return (r + s) % 4 else return (r - s) % 4 end end\n" \
  "  for c = 0, 3 do\n" \
  "    local acc = chunk(nxt(c, 1), 'input', c)\n" \
  "    for s = 2, 4 do acc = chunk(nxt(c, s), 'input', c):reduce(acc) end\n" \
  "    for s = 1, 3 do acc = acc:copy(nxt(c, s), 'input', c) end\n" \
  "  end\n" \
  "end)\n"

/* Every step of tb `tb` of rank r moves one chunk x with x / d % m == want. */
static int tb_pieces(const ir_prog *p, int r, int tb, int d, int m, int want) {
  const ir_tb *b = &p->gpus[r].tbs[tb];
  for (int s = 0; s < b->nsteps; s++) {
    const ir_step *st = &b->steps[s];
    if (st->op == IR_OP_NOP) continue;
    if (st->cnt != 1 || st->srcoff / d % m != want || st->dstoff / d % m != want) return 0;
  }
  return b->nsteps > 0;
}

static void test_parallelize(void) {
  ir_prog *p = compiles_keep(ALT_RING(""), "alternating rings (parallelize 2)", 0, 1);
  int good = p && p->nchunksperloop == 8 && p->nchannels == 2;
  for (int r = 0; p && r < 4; r++)
    good &= p->gpus[r].ntbs == 2 && tb_is(p, r, 0, (r + 1) % 4, (r + 3) % 4, 0) && tb_pieces(p, r, 0, 1, 2, 0) &&
            tb_is(p, r, 1, (r + 3) % 4, (r + 1) % 4, 1) && tb_pieces(p, r, 1, 1, 2, 1);
  ok(good, "parallelize: instance i works on piece i (chunk c -> 2c+i) on channel i, in its own tb");
  ir_prog_free(p);
  p = compiles_keep(ALT_RING(", instances=2"), "alternating rings, 2 whole-program instances", 0, 1);
  good = p && p->nchunksperloop == 16 && p->nchannels == 4;
  for (int r = 0; p && r < 4; r++) {
    good &= p->gpus[r].ntbs == 4;
    for (int tb = 0; good && tb < 4; tb++) {
      const ir_tb *b = &p->gpus[r].tbs[tb];
      int frag_inst = b->chan % 2, prog_inst = b->chan / 2;    /* channel = piece + 2 * instance */
      good &= b->send == (frag_inst == 0 ? (r + 1) % 4 : (r + 3) % 4) &&
              tb_pieces(p, r, tb, 1, 2, frag_inst) && tb_pieces(p, r, tb, 8, 2, prog_inst);  /* chunk j*8 + c*2 + i */
    }
  }
  ok(good, "parallelize inside 2 instances: piece j*8 + c*2 + i (instance j's own half) on channel i + 2j");
  ir_prog_free(p);
  /* code outside the fragment keeps channel 0; the fragment's channels come after */
  p = compiles_keep("collective{kind='allgather', ranks=3, chunks=1}\n"
                    "for r = 0, 2 do chunk(r, 'input', 0):copy(r, 'output', r) end\n"
                    "parallelize(3, function(i)\n"
                    "  for r = 0, 2 do local c = chunk(r, 'output', r)\n"
                    "    for s = 1, 2 do c = c:copy((r + s) % 3, 'output', r, {ch = 1}) end end\n"
                    "end)\n", "allgather ring in 3 pieces after local copies", 0, 1);
  good = p && p->nchunksperloop == 9 && p->nchannels == 1 + 3 * 2;
  for (int r = 0; p && r < 3; r++) {
    good &= p->gpus[r].ntbs == 4;
    for (int tb = 0; good && tb < 4; tb++) {
      const ir_tb *b = &p->gpus[r].tbs[tb];
      if (b->send < 0) good &= b->chan == 0 && b->steps[0].op == IR_OP_COPY && b->steps[0].cnt == 3;
      else good &= (b->chan == 2 || b->chan == 4 || b->chan == 6) && tb_pieces(p, r, tb, 1, 3, (b->chan - 2) / 2);
    }
  }
  ok(good, "outside code moves whole chunks on channel 0; instance i of a fragment using ch=1 runs on channel 1 + 2i + 1");
  ir_prog_free(p);

  fails(AR2 "parallelize(2, function(i)\n"
            "  if i == 0 then chunk(0, 'input', 0):copy(1, 'scratch', 0) end\n"
            "end)\n"
            "chunk(1, 'scratch', 0)\n",
        "t.lua:5: rank 1 scratch[0] holds different values in the instances of parallelize at t.lua:2; read it inside the fragment, or make every instance leave the same value",
        "reading a chunk the instances left different");
  fails(AR2 "chunk(1,'input',1):reduce(chunk(0,'input',1)):copy(0,'input',1)\n"
            "parallelize(2, function(i)\n"
            "  local x = chunk(1,'input',0):reduce(chunk(0,'input',0))\n"
            "  if i == 0 then x:copy(0,'input',0) end\n"
            "end)\n",
        "t.lua: postcondition of allreduce fails: rank 0 output[0] holds different values in the instances of parallelize at t.lua:3",
        "a result the instances leave different");
  fails(AR2 "parallelize(2, function(i) parallelize(2, function(j) end) end)\n",
        "t.lua:2: parallelize inside parallelize (started at t.lua:2) is not supported", "nested parallelize");
  fails(AR2 "parallelize(0, function(i) end)\n", "t.lua:2: parallelize: 0 instances out of range [1, 64]",
        "parallelize of 0");
  lower_fails(AR2 "chunk(1,'input',0):reduce(chunk(0,'input',0)):copy(0,'input',0)\n"
                  "chunk(1,'input',1):reduce(chunk(0,'input',1)):copy(0,'input',1)\n"
                  "parallelize(7, function(i) end)\nparallelize(11, function(i) end)\n",
              "t.lua:5: parallelize(11): the program would split each chunk into 77 pieces (the least common multiple of its parallelize counts), more than 64",
              "too many pieces");
}

/* Steps of opcode op, over all ranks, that move cnt chunks. */
static int steps_of(const ir_prog *p, int op, int cnt) {
  int n = 0;
  for (int r = 0; p && r < p->ngpus; r++)
    for (int tb = 0; tb < p->gpus[r].ntbs; tb++)
      for (int s = 0; s < p->gpus[r].tbs[tb].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[tb].steps[s];
        n += st->op == op && st->cnt == cnt;
      }
  return n;
}

/* The sends of rank r, 0 unless each starts (at both ends) at a chunk x with
 * x % m == per_chan times its thread block's channel. */
static int sends_at(const ir_prog *p, int r, int m, int per_chan) {
  int n = 0;
  for (int tb = 0; tb < p->gpus[r].ntbs; tb++)
    for (int s = 0; s < p->gpus[r].tbs[tb].nsteps; s++) {
      const ir_step *st = &p->gpus[r].tbs[tb].steps[s];
      if (st->op != IR_OP_SEND) continue;
      if (st->srcoff % m != p->gpus[r].tbs[tb].chan * per_chan || st->dstoff % m != p->gpus[r].tbs[tb].chan * per_chan)
        return 0;
      n++;
    }
  return n;
}

/* Instances and parallelize pieces keep an instance's part of a
 * multi-chunk operation in one step where its chunks are consecutive at
 * both ends: instance j owns a range of each block. */
static void test_instances(void) {
  ir_prog *p = compiles_keep("collective{kind='alltoall', ranks=2, chunks=2, instances=2}\n"
                             "for r = 0, 1 do for q = 0, 1 do chunk(r, 'input', q * 2, 2):copy(q, 'output', r * 2) end end\n",
                             "direct alltoall of 2-chunk blocks, 2 instances", 0, 1);
  ok(steps_of(p, IR_OP_SEND, 2) == 4 && steps_of(p, IR_OP_SEND, 1) == 0 && steps_of(p, IR_OP_COPY, 2) == 4,
     "each instance moves a 2-chunk block in one step (4 sends and 4 copies of 2 chunks)");
  ok(p && sends_at(p, 0, 4, 2) == 2 && sends_at(p, 1, 4, 2) == 2,
     "instance j (channel j) sends chunks 2j, 2j+1 of the block (IR chunks per block: 4)");
  ir_prog_free(p);
  p = compiles_keep("collective{kind='alltoall', ranks=2, chunks=1, instances=2}\n"
                    "for r = 0, 1 do local q = 1 - r\n"
                    "  chunk(r, 'input', r):copy(r, 'output', r)\n"
                    "  chunk(r, 'input', 0, 2):copy(q, 'tmp', 0)\n"
                    "  chunk(q, 'tmp', q):copy(q, 'output', r)\n"
                    "end\n", "alltoall through scratch, 2 instances", 0, 1);
  ok(steps_of(p, IR_OP_SEND, 1) == 8 && steps_of(p, IR_OP_SEND, 2) == 0,
     "a message over two blocks of the input is one step per block and instance (no pattern: consecutive steps)");
  ir_prog_free(p);
  p = compiles_keep("collective{kind='allgather', ranks=2, chunks=4, inplace=true}\n"
                    "parallelize(2, function(i)\n"
                    "  for r = 0, 1 do chunk(r, 'output', r * 4, 4):copy(1 - r, 'output', r * 4) end\n"
                    "end)\n", "allgather of 4-chunk blocks in parallelize(2)", 0, 1);
  ok(steps_of(p, IR_OP_SEND, 4) == 4 && steps_of(p, IR_OP_SEND, 1) == 0,
     "parallelize: each instance sends its piece of the 4 chunks in one step (pieces outer)");
  ok(p && sends_at(p, 0, 8, 4) == 2 && sends_at(p, 1, 8, 4) == 2,
     "... instance i (channel i) takes piece i of every chunk: IR chunks 4i..4i+3 of the block");
  ir_prog_free(p);
  p = compiles_keep(NEXT4_DECL(", instances=2") "for r = 0, 2 do chunk(r, 'input', 0, 2):copy(r + 1, 'output', 0) end\n",
                    "AllToNext, 2 instances", 0, 1);
  ok(steps_of(p, IR_OP_SEND, 2) == 6 && steps_of(p, IR_OP_SEND, 1) == 0,
     "a custom collective whose expect keeps its form keeps messages whole");
  ir_prog_free(p);
  /* k/2 means chunk 2 of the IR's 4 per block: right only if instance j's
   * pieces sit at 2c + j (interleaved), not in a half of their own */
  p = compiles_keep("collective{kind='custom', ranks=2, chunks=2, instances=2, expect='o[r][c]=i[r][c+k/2] if c<k/2'}\n"
                    "for r = 0, 1 do chunk(r, 'input', 1):copy(r, 'output', 0) end\n",
                    "a custom collective whose expect names k/2, 2 instances", 0, 1);
  int good = p && steps_of(p, IR_OP_COPY, 1) == 4;
  for (int r = 0; good && r < 2; r++)
    for (int tb = 0; tb < p->gpus[r].ntbs; tb++)
      for (int s = 0; s < p->gpus[r].tbs[tb].nsteps; s++)
        good &= p->gpus[r].tbs[tb].steps[s].srcoff == p->gpus[r].tbs[tb].steps[s].dstoff + 2;
  ok(good, "... keeps the interleaved layout (chunk c of instance j at 2c + j), which its expect holds under");
  ir_prog_free(p);
}

#define BCAST4 "collective{kind='broadcast', ranks=4, chunks=2, inplace=false}\n"
#define CHAIN_BCAST "chunk(0, 'input', 0, 2):copy(0, 'output', 0)\n" \
                    "for r = 1, 3 do chunk(r - 1, 'output', 0, 2):copy(r, 'output', 0) end\n"
#define REDUCE4 "collective{kind='reduce', ranks=4, chunks=1, inplace=false}\n"
#define CHAIN_REDUCE "chunk(3, 'input', 0):copy(2, 'acc', 0)\n" \
                     "for r = 2, 1, -1 do chunk(r, 'acc', 0):reduce(chunk(r, 'input', 0)); chunk(r, 'acc', 0):copy(r - 1, 'acc', 0) end\n" \
                     "chunk(0, 'input', 0):copy(0, 'output', 0):reduce(chunk(0, 'acc', 0))\n"

/* A rooted program relabelled for every root (as the runtime does) is
 * valid and computes the collective from that root. */
static void every_root(const ir_prog *p, const char *what) {
  rt_diag *d = rt_diag_new(10);
  int good = 0;
  for (int root = 1; root < p->ngpus; root++) {
    ir_prog *q = ir_prog_copy(p, root);
    ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_MAX, .count = 103, .inplace = -1, .tile = 8};
    ip_cpu_report rep;
    good += q && q->root == root && !ir_check(q, d) && !ip_cpu_verify(q, &o, &rep, d);
    ir_prog_free(q);
  }
  ok(good == p->ngpus - 1, "%s relabelled for roots 1..%d: valid and right from each (%s)", what, p->ngpus - 1,
     rt_diag_text(d));
  rt_diag_free(d);
}

static void test_rooted(void) {
  ir_prog *p = compiles_keep(BCAST4 CHAIN_BCAST, "a chain broadcast", 5, 1);
  if (p) every_root(p, "the chain broadcast");
  ir_prog_free(p);
  p = compiles_keep(REDUCE4 CHAIN_REDUCE, "a chain reduce", 0, 1);
  if (p) {
    every_root(p, "the chain reduce");
    /* a hand-edited program whose rank 1 writes its output is refused by the validator */
    rt_diag *d = rt_diag_new(4);
    ir_step *hit = NULL;
    for (int t = 0; t < p->gpus[1].ntbs && !hit; t++)
      for (int k = 0; k < p->gpus[1].tbs[t].nsteps && !hit; k++)
        if (ir_op_flags[p->gpus[1].tbs[t].steps[k].op] & IR_F_DST) hit = &p->gpus[1].tbs[t].steps[k];
    if (hit) { hit->dstbuf = IR_BUF_OUTPUT; hit->dstoff = 0; }
    ok(hit && ir_check(p, d) == BT_ERR_INVALID && strstr(rt_diag_text(d), "writes its output: off the root (rank 0)"),
       "a reduce step writing the output off the root is refused by the validator: %s", rt_diag_text(d));
    rt_diag_free(d);
  }
  ir_prog_free(p);
  compiles("collective{kind='broadcast', ranks=3, chunks=1, inplace=true}\n"
           "chunk(0, 'output', 0):copy(1, 'output', 0)\nchunk(1, 'output', 0):copy(2, 'output', 0)\n",
           "an in-place chain broadcast", 3);
  fails(BCAST4 "chunk(2, 'input', 0):copy(2, 'tmp', 0)\n",
        "t.lua:2: copy of rank 2 input[0] reads input[0] of rank 2, which a broadcast has only on the root (rank 0)",
        "a broadcast reading its input off the root");
  fails("collective{kind='broadcast', ranks=3, chunks=1, inplace=true}\nchunk(1, 'output', 0):copy(2, 'output', 0)\n",
        "t.lua:2: copy of rank 1 output[0] reads input[0] of rank 1", "in place, reading the buffer off the root before it holds the root's data");
  fails(REDUCE4 "chunk(1, 'input', 0):copy(2, 'output', 0)\n",
        "t.lua:2: copy to rank 2 output[0]: off the root (rank 0) a reduce has no output", "a reduce writing an output off the root");
  fails("collective{kind='reduce', ranks=2, chunks=1, inplace=true}\nchunk(1, 'input', 0):reduce(chunk(0, 'input', 0))\n",
        "t.lua:2: reduce into rank 1 input[0]: off the root (rank 0) a reduce has no output and leaves its input as the "
        "caller gave it", "an in-place reduce writing its buffer off the root");
  fails(REDUCE4 "chunk(0, 'input', 0):copy(0, 'output', 0)\n",
        "t.lua: postcondition of reduce fails: rank 0 output[0] holds input[0] of rank 0; expected input[0] of ranks 0,1,2,3",
        "a reduce missing ranks");
  fails("collective{kind='bcast', ranks=2}\n", "t.lua:1: unknown collective kind 'bcast' (allreduce, allgather, "
        "reducescatter, alltoall, broadcast, reduce, gather, scatter or custom)", "an unknown kind lists the kinds");
  /* Gather and scatter: a block per rank in the root's buffer, out of place. */
  p = compiles_keep("collective{kind='gather', ranks=4, chunks=2, inplace=false}\n"
                    "for r = 0, 3 do chunk(r, 'input', 0, 2):copy(0, 'output', r * 2) end\n", "a direct gather", 0, 1);
  if (p) every_root(p, "the direct gather (its root's blocks rotated, as the runtime leaves them)");
  ir_prog_free(p);
  p = compiles_keep("collective{kind='scatter', ranks=3, chunks=1, inplace=false}\n"
                    "for r = 0, 2 do chunk(0, 'input', r):copy(r, 'output', 0) end\n", "a direct scatter", 0, 1);
  if (p) every_root(p, "the direct scatter");
  ir_prog_free(p);
  fails("collective{kind='gather', ranks=2, inplace=true}\n",
        "t.lua:1: a gather is written out of place (inplace = false)", "an in-place gather script");
  fails("collective{kind='gather', ranks=3, chunks=1}\nchunk(1, 'input', 0):copy(2, 'output', 0)\n",
        "t.lua:2: copy to rank 2 output[0]: off the root (rank 0) a gather has no output", "a gather writing off the root");
  fails("collective{kind='scatter', ranks=3, chunks=1}\nchunk(1, 'input', 0):copy(1, 'output', 0)\n",
        "t.lua:2: copy of rank 1 input[0] reads input[0] of rank 1, which a scatter has only on the root (rank 0)",
        "a scatter reading its input off the root");
}

/* Hostile scripts: every limit stops the script with its line, the limit
 * and the parameter that raises it; nothing overflows, nothing crashes. */
static void test_hostile(void) {
  fails(AR2 "chunk(1, 's', 2147483647, 4)\n",
        "t.lua:2: index out of range: scratch[2147483647..2147483650] goes past the 2097152 chunks", "an index near INT_MAX");
  fails(AR2 "chunk(0, 'input', 0):copy(1, 'scratch', 2147483646)\n", "t.lua:2: index out of range", "a copy to an index near INT_MAX");
  fails(AR2 "chunk(4294967296, 'input', 0)\n", "t.lua:2: rank 4294967296 out of range [0, 2)", "a rank that wraps to 0 as an int");
  fails(AR2 "chunk(0, 'input', 0, 4294967297)\n", "t.lua:2: count 4294967297 out of range", "a count that wraps to 1 as an int");
  fails(AR2 "chunk(0, 'input', -4294967296)\n", "t.lua:2: index -4294967296 of input is negative", "a negative index that wraps to 0");
  fails("collective{kind='allreduce', ranks=4294967298, chunks=1}\n", "t.lua:1: ranks=4294967298 out of range [1, 4096] (BATON_MAX_RANKS raises the limit)",
        "ranks that wrap to 2 as an int");
  fails("collective{kind='allreduce', ranks=4096, chunks=65536}\n",
        "t.lua:1: ranks=4096 x chunks=65536: allreduce has 536870912 chunks in all ranks' input and output, over the limit of 1048576 (BATON_MAX_CHUNKS raises it)",
        "a collective too large for memory");
  fails("collective{kind='alltoall', ranks=2048, chunks=1}\n", "over the limit of 1048576 (BATON_MAX_CHUNKS raises it)",
        "an alltoall whose buffers grow as ranks squared");
  fails(AR2 "chunk(0, 'input', 0, 2):copy(1, 'scratch', 0, {ch = 4294967296})\n", "t.lua:2: option ch=4294967296 out of range", "an option that wraps");
  fails("collective{kind='allgather', ranks=4, topology={nodes=4294967298, gpus=2}}\n", "t.lua:1: topology nodes=4294967298 x gpus=2 does not make ranks=4",
        "a topology whose product wraps");
  fails(AR2 "parallelize(4294967298, function(i) end)\n", "t.lua:2: parallelize: 4294967298 instances out of range", "parallelize count that wraps");
  fails(AR2 "local r = chunk(0, 'input', 0)\nlocal i = 0\nwhile true do i = i + 1; r = r:copy(1, 'scratch', i % 1000) end\n",
        "t.lua:4: memory limit reached: the script and the compiler's structures for it need more than 64 MiB (BATON_COMPILE_MAX_MB raises it)",
        "an endless ref:copy loop (the trace's own memory is counted)");
  fails("pcall(function() while true do end end)\nerror('the limit was caught')\n",
        "t.lua:1: instruction limit reached", "pcall cannot catch the instruction limit");
  ok_contains(msg, "(BATON_LUA_MAX_INSTRUCTIONS raises it", "... and the message names the parameter");
  fails("local ok = xpcall(function() local t = {} for i = 1, 1e9 do t[i] = i end end, function(m) return m end)\nerror('caught')\n",
        "memory limit reached", "xpcall cannot catch the memory limit");
  fails("setmetatable({}, {__gc = function() while true do end end})\n", "t.lua:1: setmetatable: a metatable with __gc is not allowed",
        "finalizers (which run without the instruction hook) are refused");
  fails(AR2 "getmetatable(chunk(0, 'input', 0)).__gc = function() end\n", "attempt to index a string value",
        "the DSL's metatables cannot be changed");
  fails("local s = string.rep('a', 40)\nreturn s:find(string.rep('a*', 30) .. 'b')\n",
        "t.lua:2: string.find: the pattern \"a*a*a*", "a backtracking pattern is refused before it runs");
  ok_contains(msg, "on a subject of 40 bytes could take up to", "... with the subject's size and the bound");
  fails("table.move({}, 1, 1 << 50, 2)\n", "t.lua:1: instruction limit reached", "table.move's loop counts as instructions");
  fails("local s = ('x'):rep(1 << 30)\n", "t.lua:1: memory limit reached", "string.rep beyond the budget names its line");
  fails("string.format('%d', {})\n", "t.lua:1: bad argument #2 to 'string.format'", "a library error names the script line and the function");
  ok(trace("local t = {}\nfor i = 1, 100 do t[i] = ('%d'):format(i) end\nassert(('a,b'):gsub(',', ';') == 'a;b')\n"
           "assert(('  x  '):match('^%s*(.-)%s*$') == 'x')\nassert(math.random(1000) == 418 or true)\n"
           "local ok, e = pcall(error, 'mine')\nassert(not ok and e == 'mine')\n" AR2
           "chunk(1,'input',0):reduce(chunk(0,'input',0)) chunk(0,'input',1):reduce(chunk(1,'input',1))\n"
           "chunk(1,'input',0):copy(0,'input',0) chunk(0,'input',1):copy(1,'input',1)\n", NULL) == BT_OK,
     "ordinary string, pattern, pcall and math use still works: %s", msg);
}

/* In place, input and output are two names of one buffer: a script may
 * mix them, and the program it compiles to names one. */
static void test_inplace_names(void) {
  compiles("collective{kind='allreduce', ranks=2, chunks=1, inplace=true}\n"
           "chunk(1,'input',0):reduce(chunk(0,'input',0))\nchunk(1,'output',0):copy(0,'output',0)\n",
           "in-place allreduce reading 'output' after reducing into 'input'", 0);
  compiles("collective{kind='allgather', ranks=2, chunks=1, inplace=true}\n"
           "for r = 0, 1 do chunk(r, 'input', 0):copy(1 - r, 'output', r) end\n",
           "in-place allgather sending 'input' into the peers' 'output'", 0);
  ir_prog *p = compiles_keep("collective{kind='custom', ranks=2, chunks=2, inplace=true, expect='o[r][c]=i[0][c] if r==1'}\n"
                             "chunk(0,'input',0,2):copy(1,'output',0)\n", "in-place custom collective writing 'output'", 0, 1);
  int one = p != NULL;
  for (int r = 0; p && r < 2; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        one &= st->srcbuf == IR_BUF_INPUT && st->dstbuf == IR_BUF_INPUT;
      }
  ok(one, "... its steps name the one buffer (i)");
  /* The executor: a step outside this run's geometry is an error, not a write past the buffer. */
  if (p) {
    p->gpus[1].o_chunks = 0;
    for (int t = 0; t < p->gpus[1].ntbs; t++)
      for (int s = 0; s < p->gpus[1].tbs[t].nsteps; s++) p->gpus[1].tbs[t].steps[s].dstbuf = IR_BUF_OUTPUT;
    rt_diag *d = rt_diag_new(10);
    ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_SUM, .count = 103, .inplace = 0, .tile = 8};
    ip_cpu_report rep;
    ok(ip_cpu_verify(p, &o, &rep, d) == BT_ERR_INVALID, "the CPU executor refuses a step outside its buffers");
    ok_contains(rt_diag_text(d), "rank 1 tb 0 step 0 (r): writes o[0..1], outside the output's 0 chunks on this rank in this run (out of place)",
                "... naming rank, tb, step and the range");
    rt_diag_free(d);
    p->gpus[0].tbs[0].steps[0].depid = 7;
    d = rt_diag_new(10);
    ok(ip_cpu_verify(p, &o, &rep, d) == BT_ERR_INVALID && strstr(rt_diag_text(d), "rank 0 tb 0 step 0 (s): waits for tb 7 step"),
       "... and a dependency on a thread block that does not exist: %s", rt_diag_text(d));
    rt_diag_free(d);
  }
  ir_prog_free(p);
}

/* The number of steps of p with a source (src) or destination pattern
 * run, stride. */
static int patterned(const ir_prog *p, int src, int run, int stride) {
  int n = 0;
  for (int r = 0; p && r < p->ngpus; r++)
    for (int tb = 0; tb < p->gpus[r].ntbs; tb++)
      for (int s = 0; s < p->gpus[r].tbs[tb].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[tb].steps[s];
        n += src ? st->srcrun == run && st->srcstride == stride : st->dstrun == run && st->dststride == stride;
      }
  return n;
}

#define REV2 "collective{kind='custom', ranks=2, chunks=4, inplace=false, expect='o[r][c]=i[1-r][3-c]'}\n"
#define SWAP8 "collective{kind='custom', ranks=2, chunks=8, inplace=false, expect='o[r][c]=i[1-r][c]'}\n"

/* Strided references: chunk()'s pattern, copy's destination pattern, the
 * steps they lower to, and every error with its line. */
static void test_strided(void) {
  ir_prog *p = compiles_keep(REV2 "for r = 0, 1 do chunk(r, 'input', 3, 4, {stride = -1}):copy(1 - r, 'output', 0) end\n",
                             "a reversed copy", 4, 1);
  ok(patterned(p, 1, 1, -1) == 2 && patterned(p, 0, 1, -1) == 0,
     "a reversed range is one send per rank, its source backwards (srcrun 1, srcstride -1)");
  ir_prog_free(p);
  p = compiles_keep(REV2 "for r = 0, 1 do chunk(r, 'input', 0, 4):copy(1 - r, 'output', 3, {stride = -1}) end\n",
                    "a reversed destination", 4, 1);
  ok(patterned(p, 0, 1, -1) == 4, "the send and its receive both carry the receiver's pattern (dstrun 1, dststride -1)");
  ir_prog_free(p);
  p = compiles_keep(SWAP8 "for r = 0, 1 do\n"
                    "  chunk(r, 'input', 0, 4, {stride = 2}):copy(1 - r, 'output', 0, {stride = 2})\n"
                    "  chunk(r, 'input', 1, 4, {stride = 2}):copy(r, 'tmp', 0)\n"
                    "  chunk(r, 'tmp', 0, 4):copy(1 - r, 'output', 1, {stride = 2})\n"
                    "end\n", "every other chunk, strided and through scratch", 0, 1);
  ok(patterned(p, 1, 1, 2) == 4 && patterned(p, 0, 1, 2) == 8, "every other chunk: runs of 1, 2 apart, at each end");
  ir_prog_free(p);
  p = compiles_keep(SWAP8 "for r = 0, 1 do\n"
                    "  chunk(r, 'input', 0, 4, {run = 2, stride = 4}):copy(1 - r, 'output', 0, {run = 2, stride = 4})\n"
                    "  chunk(r, 'input', 6, 4, {run = 2, stride = -4}):copy(1 - r, 'output', 6, {run = 2, stride = -4})\n"
                    "end\n", "runs of 2, forwards and backwards", 8, 1);
  ok(patterned(p, 1, 2, 4) == 2 && patterned(p, 1, 2, -4) == 2 && patterned(p, 0, 2, 4) == 4 && patterned(p, 0, 2, -4) == 4,
     "runs of 2 chunks, 4 apart (negative: the later runs first), one message each");
  ir_prog_free(p);
  compiles("collective{kind='allreduce', ranks=2, chunks=4, inplace=true}\n"
           "for r = 0, 1 do chunk(r, 'input', r, 2, {stride = 2}):reduce(chunk(1 - r, 'input', r, 2, {stride = 2})) end\n"
           "for r = 0, 1 do chunk(r, 'input', r, 2, {stride = 2}):copy(1 - r, 'input', r, {stride = 2}) end\n",
           "an allreduce of strided halves (reduce pairs chunk j with chunk j)", 0);
  fails("collective{kind='allreduce', ranks=2, chunks=2, inplace=true}\n"
        "local x = chunk(0, 'input', 0, 2):reduce(chunk(1, 'input', 1, 2, {stride = -1}))\n",
        "postcondition of allreduce fails: rank 0 output[0] holds input[0] of rank 0 + input[1] of rank 1",
        "a reduce of a reversed reference (chunk 0 with the other's chunk 1)");
  ok(trace(REV2 "print(tostring(chunk(0, 'input', 3, 4, {stride = -1})), tostring(chunk(0, 'input', 0, 4, {run = 2, stride = 2})))\n"
           "error(tostring(chunk(0, 'input', 0, 2, {run = 1, stride = 3})) .. ' ' .. tostring(chunk(1, 'input', 0, 2, {run = 2, stride = -2})))\n", NULL)
     == BT_ERR_INVALID, "tostring of references");
  ok_contains(msg, "t.lua:3: chunk(0, input, 0, 2, {stride = 3}) chunk(1, input, 0, 2)",
              "a reference prints its pattern (one whole run prints none)");
  fails(REV2 "chunk(0, 'input', 0, 2, {stride = 0})\n", "t.lua:2: chunk: a pattern needs a stride other than 0", "stride 0");
  fails(REV2 "chunk(0, 'input', 0, 4, {run = 2})\n", "t.lua:2: chunk: a pattern needs a stride other than 0", "a run without a stride");
  fails(REV2 "chunk(0, 'input', 0, 4, {run = 3, stride = 2})\n",
        "t.lua:2: chunk: pattern {run = 3, stride = 2} overlaps itself: runs of 3 chunks need |stride| >= 3", "|stride| < run");
  fails(REV2 "chunk(0, 'input', 0, 4, {run = 0, stride = 2})\n", "t.lua:2: chunk: pattern run=0 out of range [1, 2097152]",
        "run 0");
  fails(REV2 "chunk(0, 'input', 0, 2, {stride = 1.5})\n", "t.lua:2: chunk: pattern stride must be an integer, not 1.5",
        "a stride that is not an integer");
  fails(REV2 "chunk(0, 'input', 0, 2, {run = 'a', stride = 2})\n", "t.lua:2: chunk: pattern run must be an integer, not string",
        "a run that is not an integer");
  fails(REV2 "chunk(0, 'input', 0, 2, {strid = 2})\n", "t.lua:2: chunk: unknown pattern key 'strid' (it takes run, stride)",
        "a misspelt pattern key");
  fails(REV2 "chunk(0, 'input', 1, 2, {stride = -2})\n",
        "t.lua:2: 2 chunks from input[1], {stride = -2} reach input[-1], outside [0, 4)", "a pattern below the buffer");
  fails(REV2 "chunk(0, 'input', 0, 3, {stride = 2})\n",
        "t.lua:2: 3 chunks from input[0], {stride = 2} reach input[4], outside [0, 4)", "a pattern past the buffer");
  fails(REV2 "chunk(0, 'input', 0, 2):copy(1, 'output', 0, {stride = 0})\n",
        "t.lua:2: copy: a pattern needs a stride other than 0", "a copy's stride 0");
  fails(REV2 "chunk(0, 'input', 0, 2):copy(1, 'output', 0, {run = 1, stride = 4})\n",
        "t.lua:2: 2 chunks from output[0], {stride = 4} reach output[4], outside [0, 4)", "a copy's pattern past the buffer");
  fails(REV2 "chunk(0, 'input', 0, 2):reduce(chunk(1, 'input', 0, 2), {stride = 2})\n",
        "t.lua:2: reduce options: unknown option 'stride' (it takes ch, sendtb, recvtb, via)", "a pattern on reduce");
  fails(REV2 "chunk(0, 'input', 0, 2):copy(0, 'tmp', 0)\nchunk(0, 'tmp', 0, 2):copy(0, 'tmp', 1, {stride = -1})\n",
        "t.lua:3: copy of rank 0 tmp[0]: its chunk 0 is written before chunk 1 reads it", "overlapping source and destination");
  fails(REV2 "chunk(0, 'input', 0, 3):copy(0, 'tmp', 0)\nchunk(0, 'tmp', 0, 2):copy(0, 'tmp', 2, {stride = -1})\n",
        "t.lua:3: copy of rank 0 tmp[1] onto itself", "a reversed copy onto itself");
  fails("collective{kind='custom', ranks=2, chunks=4, inplace=false, expect='o[r][c]=i[r][c]'}\n"
        "chunk(1, 'input', 0, 2):copy(0, 'input', 3, {stride = -2})\n",
        "t.lua:2: copy to rank 0 input[1..3, strided] writes the input buffer of an out-of-place collective",
        "a strided write into the input");
  fails(REV2 "chunk(0, 'input', 0, 4):copy(0, 'tmp', 0)\nlocal a = chunk(0, 'tmp', 0, 2, {stride = 2})\n"
        "chunk(1, 'input', 1):copy(0, 'tmp', 2)\na:copy(1, 'output', 0)\n",
        "t.lua:5: stale reference: copy of rank 0 tmp[2] was written again", "a stale strided reference (its second chunk)");
}

int main(void) {
  setenv("BATON_COMPILE_MAX_MB", "64", 1);
  setenv("BATON_LUA_MAX_INSTRUCTIONS", "20000000", 1);
  test_errors();
  test_traceback();
  test_sandbox();
  test_lowering();
  test_placement();
  test_cycle_prov();
  test_parallelize();
  test_instances();
  test_strided();
  test_modules();
  test_custom();
  test_rooted();
  test_hostile();
  test_inplace_names();
  return tap_done();
}
