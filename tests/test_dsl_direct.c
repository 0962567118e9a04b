/* test_dsl_direct.c -- the direct lowering (via = "direct", "put", "get";
 * swap): the steps, peers and signals small scripts become, the start and end
 * rules, LL landings, every refusal with its script line, and that
 * via = "fifo" changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "cc_compile.h"
#include "cc_lower.h"
#include "cc_trace.h"
#include "dsl_test.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_write.h"
#include "tap.h"

/* Traces and lowers `src`, then verifies the program as baton compile
 * does (validation with the direct rules, races, the CPU runs).  Returns
 * the program (the caller frees it), or NULL after a failed test point. */
static ir_prog *build(const char *src, const char *what) {
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  ok(trace(src, &t) == BT_OK, "%s traces: %s", what, msg);
  if (!t) return NULL;
  rt_diag *d = rt_diag_new(10);
  int slots = 0;
  cc_lower_opts lo = {.fuse = 1, .slots_needed = &slots};
  cc_compile_report rep;
  int good = !cc_lower(t, &lo, &p, d);
  if (good) p->slots = slots;
  good = good && !cc_verify(p, "t.lua", &rep, d);
  ok(good, "%s lowers to a valid, race-free program that computes its collective: %s", what, rt_diag_text(d));
  if (!good) { ir_prog_free(p); p = NULL; }
  cc_trace_free(t);
  rt_diag_free(d);
  return p;
}

/* The program as XML text (the caller frees it). */
static char *xml(const ir_prog *p) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  ir_write(p, f);
  fclose(f);
  return buf;
}

/* Rank r's steps (its one thread block), or NULL. */
static const ir_tb *tb0(const ir_prog *p, int r) {
  return p && r < p->ngpus && p->gpus[r].ntbs == 1 ? &p->gpus[r].tbs[0] : NULL;
}

/* Whether rank r's steps are exactly `ops` ("sig wait cpy ..."), each a
 * type and, for a direct step, ":peer" ("getr:1"), and a wait's cnt after
 * "x" ("wait:1x2"). */
static int steps_are(const ir_prog *p, int r, const char *ops) {
  const ir_tb *tb = tb0(p, r);
  if (!tb) return 0;
  char got[2048] = "";
  size_t n = 0;
  for (int s = 0; s < tb->nsteps && n < sizeof got - 32; s++) {
    const ir_step *st = &tb->steps[s];
    n += snprintf(got + n, sizeof got - n, "%s%s", s ? " " : "", ir_op_xml[st->op]);
    if (st->peer >= 0) n += snprintf(got + n, sizeof got - n, ":%d", st->peer);
    if (st->op == IR_OP_WAIT && st->cnt > 1) n += snprintf(got + n, sizeof got - n, "x%d", st->cnt);
  }
  if (!strcmp(got, ops)) return 1;
  printf("#   rank %d: got '%s'\n#   wanted  '%s'\n", r, got, ops);
  return 0;
}

/* Steps of type op on rank r (all thread blocks). */
static int count(const ir_prog *p, int r, int op) {
  int n = 0;
  for (int t = 0; t < p->gpus[r].ntbs; t++)
    for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) n += p->gpus[r].tbs[t].steps[s].op == op;
  return n;
}

/* Every rank one thread block on channel 0 without FIFO peers, and every
 * stream's sigs as many as its waits' cnt add up to. */
static int shape_ok(const ir_prog *p) {
  if (p->nchannels != 1) return 0;
  for (int r = 0; r < p->ngpus; r++) {
    if (p->gpus[r].ntbs > 1) return 0;
    if (p->gpus[r].ntbs && (p->gpus[r].tbs[0].send >= 0 || p->gpus[r].tbs[0].recv >= 0 || p->gpus[r].tbs[0].chan))
      return 0;
  }
  for (int x = 0; x < p->ngpus; x++)
    for (int y = 0; y < p->ngpus; y++) {
      int sigs = 0, taken = 0;
      const ir_tb *a = tb0(p, x), *b = tb0(p, y);
      for (int s = 0; a && s < a->nsteps; s++) sigs += a->steps[s].op == IR_OP_SIG && a->steps[s].peer == y;
      for (int s = 0; b && s < b->nsteps; s++) taken += b->steps[s].op == IR_OP_WAIT && b->steps[s].peer == x ? b->steps[s].cnt : 0;
      if (sigs != taken) return 0;
    }
  return 1;
}

#define TWOSHOT(N, PROTO, VIA) \
  "local n = " #N "\n" \
  "collective{kind='allreduce', ranks=n, chunks=n, inplace=false, protocol='" PROTO "', via='" VIA "'}\n" \
  "for r = 0, n - 1 do\n" \
  "  local acc = chunk(r, 'input', r):copy(r, 'output', r)\n" \
  "  for k = 1, n - 1 do acc = acc:reduce(chunk((r + k) % n, 'input', r)) end\n" \
  "end\n" \
  "for r = 0, n - 1 do for k = 1, n - 1 do chunk(r, 'output', r):copy((r + k) % n, 'output', r) end end\n"

/* Simple: a reduction between ranks is a getr by its destination, a copy
 * a put by its source; the signals are the start rule's (every rank may
 * touch a peer only after the peer started), the end rule's and the final
 * waits. */
static void test_twoshot(void) {
  ir_prog *p = build(TWOSHOT(2, "Simple", "direct"), "the 2-rank two-shot (Simple, direct)");
  ok(p && steps_are(p, 0, "sig:1 cpy wait:1 getr:1 put:1 sig:1 wait:1") &&
     steps_are(p, 1, "sig:0 cpy wait:0 getr:0 put:0 sig:0 wait:0"),
     "... is, on each rank: a start sig, the local copy, the wait for the peer's start, getr, put, the end sig, the final wait");
  const ir_tb *tb = tb0(p, 0);
  ok(tb && tb->steps[3].srcbuf == IR_BUF_INPUT && tb->steps[3].srcoff == 0 && tb->steps[3].dstbuf == IR_BUF_OUTPUT &&
     tb->steps[4].srcbuf == IR_BUF_OUTPUT && tb->steps[4].dstbuf == IR_BUF_OUTPUT && tb->steps[4].dstoff == 0 &&
     tb->steps[4].cnt == 1,
     "... getr reads the peer's i[0] into o[0], put stores o[0] into the peer's o[0]");
  ok(p && p->slots == 1 && p->proto == IR_PROTO_SIMPLE, "... needs no FIFO slots beyond the least");
  ir_prog_free(p);
  p = build(TWOSHOT(4, "Simple", "direct"), "the 4-rank two-shot");
  int good = p && shape_ok(p);
  for (int r = 0; p && r < 4; r++)
    good &= count(p, r, IR_OP_GETR) == 3 && count(p, r, IR_OP_PUT) == 3 && count(p, r, IR_OP_GET) == 0 &&
            count(p, r, IR_OP_COPY) == 1 && count(p, r, IR_OP_SIG) == 6 && count(p, r, IR_OP_WAIT) == 6;
  ok(good, "... has on every rank 3 getr, 3 puts, one cpy, 2 sigs to and 2 waits for each peer, one thread block, "
           "and as many signals as waits take");
  ok(p && steps_are(p, 0, "sig:1 sig:2 sig:3 cpy wait:1 wait:2 wait:3 getr:1 getr:2 getr:3 put:1 sig:1 put:2 sig:2 "
                          "put:3 sig:3 wait:1 wait:2 wait:3"),
     "... rank 0: start sigs, waits, the getr chain, each put followed by its sig, the final waits");
  ir_prog_free(p);
  p = build(TWOSHOT(3, "Simple", "get"), "the 3-rank two-shot by get");
  good = p && shape_ok(p);
  for (int r = 0; p && r < 3; r++)
    good &= count(p, r, IR_OP_GETR) == 2 && count(p, r, IR_OP_GET) == 2 && count(p, r, IR_OP_PUT) == 0;
  ok(good, "... gathers with get by the destination, not put");
  ir_prog_free(p);
  p = build(TWOSHOT(3, "Simple", "put"), "the 3-rank two-shot by put");
  good = p && shape_ok(p);
  for (int r = 0; p && r < 3; r++)
    good &= count(p, r, IR_OP_GETR) == 0 && count(p, r, IR_OP_PUT) == 4 && count(p, r, IR_OP_REDUCE) == 2 &&
            p->gpus[r].s_chunks == 2;
  ok(good, "... reduces through landings: each peer puts into a fresh scratch chunk, the owner reduces it (2 "
           "landings a rank)");
  ir_prog_free(p);
  p = build(TWOSHOT(4, "LL", "direct"), "the 4-rank two-shot in LL");
  good = p && shape_ok(p);
  for (int r = 0; p && r < 4; r++)
    good &= count(p, r, IR_OP_SIG) == 0 && count(p, r, IR_OP_WAIT) == 0 && count(p, r, IR_OP_PUT) == 6 &&
            count(p, r, IR_OP_REDUCE) == 3 && count(p, r, IR_OP_COPY) == 4 && p->gpus[r].s_chunks == 6;
  ok(good, "... has no signals: every value goes by put into a landing, reduced (3) or copied (3 and the own block) "
           "into place");
  ir_prog_free(p);
}

/* A put into a peer's output before the peer did anything: the peer
 * signals at its start, the put waits for it, and the peer's final wait
 * takes the signal after the put (the end rule). */
static void test_start_rule(void) {
  const char *src = "collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1', "
                    "via='put'}\nchunk(0, 'input', 0):copy(1, 'output', 0)\n";
  ir_prog *p = build(src, "a put into a peer that does nothing else");
  ok(p && steps_are(p, 0, "wait:1 put:1 sig:1") && steps_are(p, 1, "sig:0 wait:0"),
     "... rank 1 signals at its start and waits at its end; rank 0 waits for it, puts, signals");
  ir_prog_free(p);
  p = build("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1', "
            "via='get'}\nchunk(0, 'input', 0):copy(1, 'output', 0)\n", "the same by get");
  ok(p && steps_are(p, 0, "sig:1 wait:1") && steps_are(p, 1, "wait:0 get:0 sig:0"),
     "... rank 0 signals its start and waits for rank 1's get to be done");
  ir_prog_free(p);
  p = build("collective{kind='custom', ranks=2, chunks=1, inplace=false, expect='o[r][c]=i[r-1][c] if r>=1', "
            "via='put', protocol='LL'}\nchunk(0, 'input', 0):copy(1, 'output', 0)\n", "in LL, a put one way only");
  ok(p && steps_are(p, 0, "put:1 wait:1") && steps_are(p, 1, "sig:0 cpy"),
     "... rank 1 signals rank 0 at its start, and rank 0 ends waiting for it: its next call's put cannot reach the "
     "landing half rank 1 may still read");
  ir_prog_free(p);
}

/* Orders across ranks in a chain: each getr waits for the previous rank's,
 * and a put into a chunk a peer still reads waits for that read. */
static void test_orders(void) {
  ir_prog *p = build("collective{kind='allreduce', ranks=3, chunks=1, inplace=true, via='direct'}\n"
                     "local acc = chunk(1, 'input', 0):reduce(chunk(0, 'input', 0))\n"
                     "acc = chunk(2, 'input', 0):reduce(acc)\n"
                     "acc:copy(0, 'input', 0)\nacc:copy(1, 'input', 0)\n",
                     "a reduce chain by getr, then puts back");
  ok(p && steps_are(p, 0, "sig:1 sig:2 wait:1 wait:2") && steps_are(p, 1, "wait:0 getr:0 sig:2 sig:0 wait:2") &&
     steps_are(p, 2, "wait:0 wait:1 getr:1 put:0 sig:0 put:1 sig:1"),
     "... rank 1 signals rank 2 after its getr (one sig for the value rank 2 reads and for rank 0's chunk it read, "
     "which rank 2 then writes); rank 0 only lets the others in and waits for them to be done");
  ok(p && shape_ok(p), "... streams balanced, one thread block a rank");
  ir_prog_free(p);
  p = build("collective{kind='custom', ranks=2, chunks=2, inplace=false, expect='o[r][c]=i[r][c] if n<0', via='get'}\n"
            "chunk(0, 'input', 0):copy(0, 'tmp', 0)\nchunk(0, 'tmp', 0):copy(1, 'output', 0)\n"
            "chunk(1, 'output', 0):reduce(chunk(0, 'input', 1))\n", "a get of what the peer wrote, then a getr");
  ok(p && steps_are(p, 0, "cpy sig:1 wait:1") && steps_are(p, 1, "wait:0 get:0 getr:0 sig:0"),
     "... needs no start signal: the wait for the peer's copy already orders the getr after a step of the peer");
  ir_prog_free(p);
}

/* LL: every put lands in the peer's scratch, each landing once; a copy
 * into scratch that its rank alone reads goes straight there. */
static void test_landings(void) {
  ir_prog *p = build("local n = 3\ncollective{kind='alltoall', ranks=n, chunks=1, protocol='LL', via='direct'}\n"
                     "for r = 0, n - 1 do for q = 0, n - 1 do chunk(r, 'input', q):copy(q, 'output', r) end end\n",
                     "an LL all-to-all");
  int good = p && shape_ok(p);
  for (int r = 0; p && r < 3; r++) {
    const ir_tb *tb = tb0(p, r);
    good &= p->gpus[r].s_chunks == 2 && count(p, r, IR_OP_PUT) == 2 && count(p, r, IR_OP_COPY) == 3;
    for (int s = 0; tb && s < tb->nsteps; s++)
      if (tb->steps[s].op == IR_OP_PUT) good &= tb->steps[s].dstbuf == IR_BUF_SCRATCH;
  }
  /* each landing chunk of each rank is the destination of one put */
  for (int q = 0; p && q < 3; q++)
    for (int c = 0; c < 2; c++) {
      int puts = 0;
      for (int r = 0; r < 3; r++) {
        const ir_tb *tb = tb0(p, r);
        for (int s = 0; tb && s < tb->nsteps; s++)
          puts += tb->steps[s].op == IR_OP_PUT && tb->steps[s].peer == q && tb->steps[s].dstoff == c;
      }
      good &= puts == 1;
    }
  ok(good, "... puts each block into a landing of its own (2 a rank), which the receiver copies into its output");
  ir_prog_free(p);
  p = build("local n = 4\ncollective{kind='allreduce', ranks=n, chunks=1, inplace=true, protocol='LL', via='direct'}\n"
            "for r = 0, n - 1 do for q = 0, n - 1 do\n"
            "  if q ~= r then chunk(r, 'input', 0):copy(q, 'scratch', r) end\nend end\n"
            "for q = 0, n - 1 do for r = 0, n - 1 do\n"
            "  if r ~= q then chunk(q, 'input', 0):reduce(chunk(q, 'scratch', r)) end\nend end\n",
            "the LL one-shot");
  ok(p && steps_are(p, 0, "put:1 put:2 put:3 re re re") && steps_are(p, 3, "put:0 put:1 put:2 re re re") &&
     p->gpus[0].s_chunks == 4 && shape_ok(p),
     "... puts straight into the script's scratch (written once, read by its rank) and reduces there: no copies");
  ir_prog_free(p);
  p = build("collective{kind='allreduce', ranks=2, chunks=1, inplace=true, protocol='LL', via='direct'}\n"
            "for r = 0, 1 do chunk(r, 'input', 0):copy(1 - r, 'tmp', 0) end\n"
            "for r = 0, 1 do chunk(r, 'tmp', 0):reduce(chunk(r, 'input', 0)) end\n"
            "for r = 0, 1 do chunk(r, 'tmp', 0):copy(r, 'input', 0) end\n",
            "an LL copy into scratch its rank writes again");
  ok(p && steps_are(p, 0, "put:1 cpy re cpy") && p->gpus[0].s_chunks == 2,
     "... goes through a landing (scratch written by the rank itself is no landing)");
  ir_prog_free(p);
  /* LL128: the same landings, another line format */
  p = build("local n = 4\ncollective{kind='allreduce', ranks=n, chunks=1, inplace=true, protocol='LL128', via='direct'}\n"
            "for r = 0, n - 1 do for q = 0, n - 1 do\n"
            "  if q ~= r then chunk(r, 'input', 0):copy(q, 'scratch', r) end\nend end\n"
            "for q = 0, n - 1 do for r = 0, n - 1 do\n"
            "  if r ~= q then chunk(q, 'input', 0):reduce(chunk(q, 'scratch', r)) end\nend end\n",
            "the LL128 one-shot");
  ok(p && p->proto == IR_PROTO_LL128 && steps_are(p, 0, "put:1 put:2 put:3 re re re") && p->gpus[0].s_chunks == 4 &&
     shape_ok(p), "... lowers as LL does (puts into landings, no signals) and validates");
  ir_prog_free(p);
}

/* Strided references keep their patterns on both sides of a put or get. */
static void test_strided(void) {
  const char *body = "expect = 'o[r][c]=i[1-r][3-c] if c<4; o[r][c]=i[1-r][c]' }\n"
                     "for r = 0, 1 do\n  local q = 1 - r\n"
                     "  chunk(r, 'input', 3, 4, {stride = -1}):copy(q, 'output', 0)\n"
                     "  chunk(r, 'input', 4, 2, {stride = 2}):copy(q, 'output', 4, {stride = 2})\n"
                     "  chunk(r, 'input', 5, 2, {stride = 2}):copy(q, 'output', 5, {stride = 2})\nend\n";
  const char *head[] = {"collective{ kind = 'custom', ranks = 2, chunks = 8, inplace = false, via = 'get', ",
                        "collective{ kind = 'custom', ranks = 2, chunks = 8, inplace = false, via = 'put', ",
                        "collective{ kind = 'custom', ranks = 2, chunks = 8, inplace = false, via = 'direct', protocol = 'LL', "};
  const char *what[] = {"strided copies by get", "strided copies by put", "strided copies through LL landings"};
  for (int i = 0; i < 3; i++) {
    char src[1024];
    snprintf(src, sizeof src, "%s%s", head[i], body);
    ir_prog *p = build(src, what[i]);
    int reversed = 0;
    for (int r = 0; p && r < 2; r++)
      for (int s = 0; tb0(p, r) && s < tb0(p, r)->nsteps; s++) {
        const ir_step *st = &tb0(p, r)->steps[s];
        reversed += ir_op_direct(st->op) && st->srcrun == 1 && st->srcstride == -1;
      }
    ok(reversed == 2, "... the reversed range stays one %s step a rank (%d)", i ? "put" : "get", reversed);
    ir_prog_free(p);
  }
}

/* via = "fifo", given or not, changes nothing. */
static void test_fifo_unchanged(void) {
  const char *plain = "collective{kind='allgather', ranks=3, chunks=1, inplace=true}\n"
                      "for r = 0, 2 do for q = 0, 2 do if q ~= r then chunk(r, 'output', r):copy(q, 'output', r) end end end\n";
  const char *given = "collective{kind='allgather', ranks=3, chunks=1, inplace=true, via='fifo'}\n"
                      "for r = 0, 2 do for q = 0, 2 do if q ~= r then chunk(r, 'output', r):copy(q, 'output', r, {via='fifo'}) end end end\n";
  ir_prog *a = build(plain, "an all-pairs allgather"), *b = build(given, "the same with via='fifo'");
  char *x = a ? xml(a) : NULL, *y = b ? xml(b) : NULL;
  ok(x && y && !strcmp(x, y), "via='fifo' in collective{} and on every copy: the same IR, byte for byte");
  ok(a && count(a, 0, IR_OP_SEND) == 2 && !ir_prog_direct(a), "... of sends and receives");
  free(x);
  free(y);
  ir_prog_free(a);
  ir_prog_free(b);
}

/* Rooted collectives relabel a direct program's peers with its ranks. */
static void test_rooted(void) {
  ir_prog *p = build("collective{kind='broadcast', ranks=3, chunks=1, inplace=false, via='get'}\n"
                     "chunk(0, 'input', 0):copy(0, 'output', 0)\n"
                     "for r = 1, 2 do chunk(r - 1, 'output', 0):copy(r, 'output', 0) end\n",
                     "a chain broadcast by get");
  rt_diag *d = rt_diag_new(10);
  int good = 0;
  for (int root = 1; p && root < 3; root++) {
    ir_prog *q = ir_prog_copy(p, root);
    ip_cpu_opts o = {.dtype = IP_I32, .op = IP_OP_MAX, .count = 103, .inplace = -1, .tile = 8};
    ip_cpu_report rep;
    good += q && !ir_check(q, d) && !ip_cpu_verify(q, &o, &rep, d);
    ir_prog_free(q);
  }
  ok(good == 2, "... relabelled for roots 1 and 2: valid and right (%s)", rt_diag_text(d));
  rt_diag_free(d);
  ir_prog_free(p);
}

#define AG2 "collective{kind='allgather', ranks=2, chunks=1"
#define AR2 "collective{kind='allreduce', ranks=2, chunks=1, inplace=true}\n"
#define COPY01 "chunk(0, 'input', 0):copy(1, 'output', 0"

/* Every refusal names the script line and what is not supported. */
static void test_errors(void) {
  fails(AG2 ", via='pull'}\n", "t.lua:1: via='pull': expected \"fifo\" (FIFO messages, the default), \"direct\" (puts or "
        "gets, the compiler's choice), \"put\" or \"get\"", "an unknown via");
  fails(AG2 "}\n" COPY01 ", {via='pull'})\n", "t.lua:2: via='pull': expected \"fifo\"", "an unknown via option");
  fails(AG2 ", via=1}\n", "t.lua:1: via: expected \"fifo\" (FIFO messages, the default), \"direct\" (puts or gets, the "
        "compiler's choice), \"put\" or \"get\", not a number", "a via that is not a string");
  fails(AG2 "}\n" COPY01 ")\nchunk(1, 'input', 0):copy(0, 'output', 1, {via='put'})\n",
        "t.lua:3: copy from rank 1 to rank 0 is direct (via='put'), but the operation between ranks at t.lua:2 goes "
        "through FIFOs (via='fifo'): a program is either FIFO or direct", "a direct copy after a FIFO one");
  fails(AG2 ", via='direct'}\n" COPY01 ")\nchunk(1, 'input', 0):copy(0, 'output', 1, {via='fifo'})\n",
        "t.lua:3: copy from rank 1 to rank 0 goes through FIFOs (via='fifo'), but the program is direct (via at t.lua:1): "
        "a program is either FIFO or direct", "a FIFO copy in a direct program");
  fails(AR2 "chunk(0, 'input', 0):copy(1, 'tmp', 0, {via='get'})\nchunk(1, 'input', 0):reduce(chunk(0, 'input', 0), {via='fifo'})\n",
        "t.lua:3: reduce from rank 0 into rank 1 goes through FIFOs (via='fifo'), but the program is direct (via at "
        "t.lua:2)", "a FIFO reduce after a direct copy");
  fails(AG2 ", via='get', protocol='LL128'}\n",
        "t.lua:1: via='get': a direct LL128 program has no gets (its puts land in the peer's scratch with their "
        "flags); use \"put\" or \"direct\", or protocol Simple", "get in LL128");
  fails(AG2 ", via='get', protocol='LL'}\n",
        "t.lua:1: via='get': a direct LL program has no gets (its puts land in the peer's scratch with their flags); "
        "use \"put\" or \"direct\", or protocol Simple", "get in LL");
  fails(AG2 ", via='put', protocol='LL'}\n" COPY01 ", {via='get'})\n",
        "t.lua:2: copy from rank 0 to rank 1, via='get': a direct LL program has no gets", "a get option in LL");
  fails(AG2 ", via='direct', instances=2}\n",
        "t.lua:1: via='direct' with instances = 2 (at t.lua:1): a direct program uses one channel and one thread block "
        "per rank for now; instances are not supported yet", "instances");
  fails(AG2 ", instances=2}\n" COPY01 ", {via='put'})\n",
        "t.lua:2: copy from rank 0 to rank 1, via='put' with instances = 2 (at t.lua:1): a direct program uses one "
        "channel", "instances with via on a copy");
  fails(AG2 ", via='direct', placement='paired'}\n",
        "t.lua:1: via='direct' with placement = \"paired\" (at t.lua:1): a direct program uses one channel and one "
        "thread block per rank for now; placement is not supported yet", "placement = \"paired\"");
  fails(AG2 ", via='direct'}\n" COPY01 ", {ch=1})\n",
        "t.lua:2: copy with ch=1 in a direct program (via at t.lua:1): a direct program uses one channel and one thread "
        "block per rank for now", "a second channel");
  fails(AG2 ", via='direct'}\nchunk(0, 'input', 0):copy(0, 'output', 0, {ch=2})\n",
        "t.lua:2: copy with ch=2 in a direct program (via at t.lua:1)", "a second channel on a local copy");
  fails(AG2 ", via='direct'}\n" COPY01 ", {sendtb=1})\n",
        "t.lua:2: copy with sendtb=1 in a direct program (via at t.lua:1): a direct program uses one channel and one "
        "thread block per rank for now; sendtb and recvtb are not supported yet", "sendtb");
  fails(AR2 "chunk(1, 'input', 0):reduce(chunk(0, 'input', 0), {via='get', recvtb=0})\n",
        "t.lua:2: reduce with recvtb=0 in a direct program (via at t.lua:2)", "recvtb");
  fails(AG2 ", via='direct'}\nparallelize(2, function(i) end)\n",
        "t.lua:2: parallelize in a direct program (via at t.lua:1): a direct program uses one channel and one thread "
        "block per rank for now; parallelize is not supported yet", "parallelize");
  fails(AG2 "}\nparallelize(2, function(i)\n" COPY01 ", {via='get'})\nend)\n",
        "t.lua:3: copy from rank 0 to rank 1, via='get' makes the program direct, but parallelize at t.lua:2 came "
        "before: a direct program uses one channel and one thread block per rank for now; parallelize is not "
        "supported yet", "a direct copy inside parallelize");
  fails(AG2 "}\nchunk(0, 'input', 0):copy(0, 'output', 0, {ch=1})\n" "chunk(1, 'input', 0):copy(0, 'output', 1, {via='put'})\n",
        "t.lua:3: copy from rank 1 to rank 0, via='put' makes the program direct, but the copy at t.lua:2 has ch > 0: a "
        "direct program uses one channel and one thread block per rank for now", "a direct copy after one on channel 1");
  fails("collective{kind='allreduce', ranks=2, chunks=1, via='direct'}\nlocal W = matrix('W', 'input', 'K')\n"
        "local x = vector('x', 'K')\ngemv(W, x, 0, 0)\n",
        "t.lua:4: gemv in a direct program (via at t.lua:1): compute steps are not supported yet in direct programs",
        "a compute step");
}

#define A2A_SWAP(N, K) \
  "local n, k = " #N ", " #K "\n" \
  "collective{kind='alltoall', ranks=n, chunks=k, inplace=true, via='direct'}\n" \
  "local h = (k + 1) // 2\n" \
  "for r = 0, n - 1 do for q = r + 1, n - 1 do\n" \
  "  chunk(r, 'input', q * k, h):swap(q, 'input', r * k)\n" \
  "  if k > h then chunk(q, 'input', r * k + h, k - h):swap(r, 'input', q * k + h) end\n" \
  "end end\n"

/* Whether rank r's receive from its peer waits for its own send to that
 * peer of the same chunks (what it overwrites), and both carry cnt chunks. */
static int recv_after_send(const ir_prog *p, int r, int peer, int cnt) {
  const ir_gpu *g = &p->gpus[r];
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *R = &g->tbs[t].steps[s];
      if (R->op != IR_OP_RECV || g->tbs[t].recv != peer || R->cnt != cnt || R->depid < 0) continue;
      const ir_tb *B = &g->tbs[R->depid];
      const ir_step *S = R->deps < B->nsteps ? &B->steps[R->deps] : NULL;
      if (S && S->op == IR_OP_SEND && B->send == peer && S->srcbuf == R->dstbuf && S->srcoff == R->dstoff &&
          S->cnt == cnt)
        return 1;
    }
  return 0;
}

/* swap in a FIFO program: a send each way, each rank's receive after its
 * own send of the chunks it overwrites; any protocol; such a program
 * stays FIFO (a later direct operation is refused). */
static void test_fifo_swap(void) {
  const char *two = "collective{kind='alltoall', ranks=2, chunks=1, inplace=true}\n"
                    "chunk(0, 'input', 1):swap(1, 'input', 0)\n";
  ir_prog *p = build(two, "a swap in a FIFO program");
  ok(p && count(p, 0, IR_OP_SEND) == 1 && count(p, 0, IR_OP_RECV) == 1 && count(p, 1, IR_OP_SEND) == 1 &&
     count(p, 1, IR_OP_RECV) == 1 && count(p, 0, IR_OP_XCHG) == 0 && p->gpus[0].s_chunks == 0,
     "... is a send and a receive on each rank, no xchg and no scratch");
  ok(p && recv_after_send(p, 0, 1, 1) && recv_after_send(p, 1, 0, 1),
     "... each rank receives over its chunk only after sending it");
  ir_prog_free(p);
  for (int n = 2; n <= 4; n++) {
    char src[1024], what[64];
    snprintf(src, sizeof src, "local n, k = %d, 4\ncollective{kind='alltoall', ranks=n, chunks=k, inplace=true, "
             "protocol='LL128'}\n%s", n, strchr(strchr(A2A_SWAP(2, 4), '\n') + 1, '\n') + 1);
    snprintf(what, sizeof what, "the %d-rank FIFO swap, LL128, four chunks a block", n);
    p = build(src, what);
    int good = p != NULL;
    for (int r = 0; p && r < n; r++)
      for (int q = 0; q < n; q++)
        if (q != r) good &= recv_after_send(p, r, q, 2);
    ok(good, "... every rank receives each half block from each peer after sending its own");
    ir_prog_free(p);
  }
  fails("collective{kind='alltoall', ranks=2, chunks=2, inplace=true}\n"
        "chunk(0, 'input', 1):swap(1, 'input', 0)\nchunk(1, 'input', 1):copy(0, 'scratch', 0, {via='put'})\n",
        "t.lua:3: copy from rank 1 to rank 0 is direct (via='put'), but the operation between ranks at t.lua:2 goes "
        "through FIFOs (via='fifo'): a program is either FIFO or direct", "a direct copy after a FIFO swap");
}

/* swap: an in-place AllToAll whose pairs of blocks trade places is one
 * xchg per pair and half, between the start rule's and the end rule's
 * signals, no scratch; the refusals at their lines. */
static void test_swap(void) {
  ir_prog *p = build(A2A_SWAP(2, 1), "the 2-rank in-place AllToAll by swap");
  ok(p && steps_are(p, 0, "wait:1 xchg:1 sig:1") && steps_are(p, 1, "sig:0 wait:0"),
     "... is rank 0's xchg between rank 1's start sig and its own end sig; rank 1 moves nothing");
  const ir_tb *tb = tb0(p, 0);
  ok(tb && tb->steps[1].srcbuf == IR_BUF_INPUT && tb->steps[1].srcoff == 1 && tb->steps[1].dstbuf == IR_BUF_INPUT &&
     tb->steps[1].dstoff == 0 && tb->steps[1].cnt == 1 && p->gpus[0].s_chunks == 0,
     "... the xchg trades rank 0's i[1] with rank 1's i[0], and no scratch");
  char line[128];
  if (tb) ir_step_text(p, tb, &tb->steps[1], line, sizeof line);
  ok(tb && strstr(line, "xchg i[1] <-> 1:i[0]"), "... explained as 'xchg i[1] <-> 1:i[0]': %s", tb ? line : "");
  char *x = xml(p);
  ok(x && strstr(x, "type=\"xchg\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\""),
     "... written as an xchg step");
  free(x);
  ir_prog_free(p);
  p = build(A2A_SWAP(2, 2), "the 2-rank swap with two chunks a block");
  ok(p && count(p, 0, IR_OP_XCHG) == 1 && count(p, 1, IR_OP_XCHG) == 1 && shape_ok(p),
     "... each rank swaps half of the pair's chunks");
  ir_prog_free(p);
  for (int n = 3; n <= 5; n++) {
    char src[1024], what[64];
    snprintf(src, sizeof src, "local n, k = %d, 3\n%s", n, strchr(A2A_SWAP(2, 3), '\n') + 1);
    snprintf(what, sizeof what, "the %d-rank swap with three chunks a block", n);
    p = build(src, what);
    int good = p && shape_ok(p);
    for (int r = 0; p && r < n; r++) good &= count(p, r, IR_OP_XCHG) == n - 1 && count(p, r, IR_OP_PUT) == 0;
    ok(good, "... every rank runs one xchg per peer (its half of each pair) and no put");
    ir_prog_free(p);
  }
  p = build("collective{kind='alltoall', ranks=2, chunks=2, inplace=true}\n"
            "chunk(1, 'input', 0, 2):copy(0, 'scratch', 0, {via='put'})\n"
            "chunk(0, 'input', 2, 2):swap(1, 'input', 0)\n", "a swap in a program an operation's via made direct");
  ok(p && count(p, 1, IR_OP_PUT) == 1 && count(p, 0, IR_OP_XCHG) == 1, "... is a put, then the xchg");
  ir_prog_free(p);
  test_fifo_swap();
  fails("collective{kind='alltoall', ranks=2, chunks=1, inplace=true, via='direct', protocol='LL'}\n"
        "chunk(0, 'input', 1):swap(1, 'input', 0)\n",
        "t.lua:2: swap between ranks 0 and 1 in a direct LL program: swap loads the peer's chunks, which only protocol "
        "Simple does", "swap in LL");
  fails("collective{kind='alltoall', ranks=2, chunks=2, inplace=true, via='direct'}\n"
        "chunk(0, 'input', 0):swap(0, 'input', 1)\n",
        "t.lua:2: swap of rank 0's chunks with its own: swap trades chunks with another rank", "a swap within a rank");
  fails("collective{kind='alltoall', ranks=2, chunks=1, via='direct'}\nchunk(0, 'input', 1):swap(1, 'input', 0)\n",
        "t.lua:2: swap of rank 0 input[1] writes the input buffer of an out-of-place collective",
        "a swap of an out-of-place input");
  fails("collective{kind='alltoall', ranks=2, chunks=1, inplace=true, via='direct'}\n"
        "local c = chunk(0, 'input', 1)\nc:swap(1, 'input', 0)\nc:swap(1, 'input', 1)\n",
        "t.lua:4: stale reference: swap of rank 0 input[1] was written again", "a stale reference after a swap");
  fails("collective{kind='alltoall', ranks=2, chunks=1, inplace=true, via='direct'}\n"
        "chunk(0, 'input', 1):swap(1, 'input', 0, {ch=1})\n",
        "t.lua:2: swap takes no options: swap(rank, buffer, index)", "swap options");
  fails("collective{kind='alltoall', ranks=2, chunks=1, inplace=true, via='direct'}\n"
        "chunk(0, 'input', 0, 2):swap(1, 'input', 1)\n",
        "t.lua:2: input[1..2] out of range: input has 2 chunks per rank", "a swap past the peer's buffer");
}

int main(void) {
  test_twoshot();
  test_start_rule();
  test_orders();
  test_landings();
  test_strided();
  test_fifo_unchanged();
  test_rooted();
  test_errors();
  test_swap();
  return tap_done();
}
