/* test_dsl_fused.c -- the DSL's fused programs: operands and compute
 * steps (GEMV + AllReduce), embedding bags + AllToAll and GEMM + AllToAll,
 * each compiled, checked and verified on the CPU, and their errors with
 * their script lines. */
#include <stdlib.h>
#include <string.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "dsl_test.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "tap.h"

#define AR2 "collective{kind='allreduce', ranks=2, chunks=2, inplace=true}\n"

/* A 2-rank fused GEMV + AllReduce, reduce-scatter then all-gather; `opts`
 * are rank r's gemv options for slice q (Lua expression). */
#define GEMV2(opts) "collective{kind='allreduce', ranks=2, chunks=2, inplace=true}\n" \
  "local W = matrix('W', 'input', 'K')\nlocal x = vector('x', 'K')\n" \
  "for r = 0, 1 do for q = 0, 1 do gemv(W, x, r, q, 1, " opts ") end end\n" \
  "for q = 0, 1 do chunk(q, 'input', q):reduce(chunk(1 - q, 'input', q)) end\n" \
  "for q = 0, 1 do chunk(q, 'input', q):copy(1 - q, 'input', q, {ch = 1}) end\n"
#define FUSED "local W = matrix('W', 'input', 'K')\nlocal x = vector('x', 'K')\n"

/* Compiles a fused script and verifies it on the CPU in f32 and bf16. */
static ir_prog *fused_compiles(const char *src, const char *what) {
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  ok(trace(src, &t) == BT_OK, "%s traces: %s", what, msg);
  if (!t) return NULL;
  rt_diag *d = rt_diag_new(10);
  cc_lower_opts lo = {.fuse = 1};
  ok(!cc_lower(t, &lo, &p, d) && !ir_check(p, d) && !ir_check_races(p, 1, d), "%s lowers to a valid program: %s", what,
     rt_diag_text(d));
  for (int k = 0; p && k < 2; k++) {
    ip_cpu_opts o = {.dtype = k ? IP_BF16 : IP_F32, .op = IP_OP_SUM, .count = 103, .inplace = -1, .tile = 8};
    ip_cpu_report rep;
    ok(!ip_cpu_verify(p, &o, &rep, d), "%s computes y = sum of W_r x_r (%s): %s", what, k ? "bf16" : "f32",
       rt_diag_text(d));
  }
  cc_trace_free(t);
  rt_diag_free(d);
  return p;
}

static void test_fused(void) {
  fails(AR2 "chunk(0, 'input', 0):copy(1, 'input', 0)\nmatrix('W', 'input', 'K')\n",
        "t.lua:3: matrix(\"W\") comes after chunk operations: declare the operands first", "an operand after chunk operations");
  fails("matrix('W', 'input', 'K')\n", "t.lua:1: call collective{...} before", "an operand before collective{}");
  fails(AR2 "matrix('W', 'input', 'K')\nvector('W', 'K')\n", "t.lua:3: operand W is declared twice (first at t.lua:2)",
        "an operand declared twice");
  fails(AR2 "matrix('W', 'input', '2K')\n", "t.lua:2: cols '2K' is not a dimension", "a malformed dimension");
  fails(AR2 FUSED "gemv(x, W, 0, 0)\n", "t.lua:4: gemv: argument 1, x, is a vector; it must be a matrix",
        "operands swapped");
  fails(AR2 "local W = matrix('W', 'M', 'K')\nlocal x = vector('x', 'K')\ngemv(W, x, 0, 0)\n",
        "t.lua:4: gemv: matrix W has rows 'M'; it needs rows \"input\"", "a matrix not shaped like the input");
  fails(AR2 "local W = matrix('W', 'input', 'K')\nlocal x = vector('x', 'N')\ngemv(W, x, 0, 0)\n",
        "t.lua:4: gemv: matrix W has cols 'K' but vector x has length 'N'", "mismatched shapes");
  fails(AR2 FUSED "gemv(W, x, 0, 0)\ngemv(W, x, 0, 0)\n", "t.lua:5: rank 0 input[0] is computed twice (first at t.lua:4)",
        "a chunk computed twice");
  fails(AR2 FUSED "chunk(0, 'input', 1):copy(1, 'scratch', 0)\n",
        "t.lua:4: rank 0 input[1] is not computed yet: a fused program's input holds nothing until a compute step",
        "a read before the compute");
  fails(AR2 FUSED "gemv(W, x, 0, 0, 1, {sync = 'row'})\n",
        "t.lua:4: sync='row': expected \"tile\", \"group:G\" or \"stride:S\"", "an unknown sync policy");
  fails(AR2 FUSED "gemv(W, x, 0, 0, 1, {sync = 'group:0'})\n", "t.lua:4: sync='group:0': the number is out of range [1, 4096]",
        "an empty group");
  fails(AR2 FUSED "gemv(W, x, 0, 0, 1, {tb = 3})\n", "t.lua:4: unknown compute option 'tb' (sync, zerocopy, into)",
        "an unknown compute option");
  fails("collective{kind='allreduce', ranks=2, tileorder='fast'}\n", "t.lua:1: tileorder='fast': expected \"comm\"",
        "an unknown tile order");
  fails(GEMV2("{}") "chunk(0, 'input', 5)\n", "t.lua:7: input[5..5] out of range", "a read past the input");

  ir_prog *p = fused_compiles(GEMV2("{sync = 'group:2'}"), "2-rank GEMV + AllReduce");
  ok(p && p->noperands == 2 && ir_tb_compute(&p->gpus[0].tbs[0]), "it has two operands and a compute thread block");
  if (p) {
    const ir_tb *c = &p->gpus[0].tbs[0];
    ok(c->nsteps == 2 && c->steps[0].srcoff == 1 && c->steps[1].srcoff == 0 && c->steps[0].sync == IR_SYNC_GROUP &&
       c->steps[0].sync_param == 2, "rank 0 computes the slice it sends first, its own last, with the sync policy asked");
  }
  ir_prog_free(p);
  p = fused_compiles("collective{kind='allreduce', ranks=2, chunks=2, inplace=true, tileorder='program'}\n" FUSED
                     "for r = 0, 1 do for q = 0, 1 do gemv(W, x, r, q) end end\n"
                     "for q = 0, 1 do chunk(q, 'input', q):reduce(chunk(1 - q, 'input', q)) end\n"
                     "for q = 0, 1 do chunk(q, 'input', q):copy(1 - q, 'input', q, {ch = 1}) end\n",
                     "tileorder='program'");
  ok(p && p->gpus[0].tbs[0].steps[0].srcoff == 0, "tileorder='program' keeps the script's order");
  ir_prog_free(p);
  p = fused_compiles(GEMV2("{zerocopy = q ~= r}"), "zero-copy GEMV + AllReduce");
  int gemvs = 0, sends = 0;
  for (int r = 0; p && r < 2; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        gemvs += p->gpus[r].tbs[t].steps[s].op == IR_OP_GEMVS && p->gpus[r].tbs[t].send == 1 - r;
        sends += p->gpus[r].tbs[t].steps[s].op == IR_OP_SEND;
      }
  ok(gemvs == 2 && sends == 2, "zerocopy: each rank computes the slice it sends in the send's thread block (gemvs), "
     "and sends its own sum as before");
  ir_prog_free(p);
  lower_fails(GEMV2("{zerocopy = true}"),
              "t.lua:4: gemv with zerocopy: the chunks it computes on rank 0 must be sent once, whole, to one peer "
              "(into consecutive chunks there), and not read or kept on rank 0", "zerocopy of a chunk kept on its rank");
}

/* A 2-rank embedding-bag + AllToAll; `opts` are the bags' options. */
#define EMB_DECL "collective{kind='alltoall', ranks=2, interleave='T*D'}\n" \
  "local E = matrix('E', 'R', 'D')\nlocal I = index('I', 'L')\nlocal O = index('O', 'NO')\n"
#define EMB2(opts) EMB_DECL "local w = vector('w', 'L')\n" \
  "for r = 0, 1 do for q = 0, 1 do embedding_bag(E, I, O, r, q, 1, " opts ") end end\n" \
  "for r = 0, 1 do for q = 0, 1 do chunk(r, 'input', q):copy(q, 'output', r) end end\n"

static void test_embed(void) {
  fails(EMB_DECL "embedding_bag(I, I, O, 0, 0)\n",
        "t.lua:5: embedding_bag: the table (argument 1), I, is an index; it must be a matrix", "an index as the table");
  fails(EMB_DECL "embedding_bag(E, O, O, 0, 0)\n",
        "t.lua:5: embedding_bag: indices O and offsets O have the same length 'NO'", "the offsets as indices");
  fails(EMB_DECL "local T = matrix('T', 'input', 'D')\nembedding_bag(T, I, O, 0, 0)\n",
        "t.lua:6: embedding_bag: table T is [input x D]", "a table shaped like the input");
  fails(EMB2("{mode = 'max'}"), "t.lua:6: mode='max': expected \"sum\" or \"mean\"", "an unknown pooling");
  fails(EMB2("{mode = 'mean', weights = w}"), "t.lua:6: embedding_bag: weights are for mode \"sum\"",
        "weights for a mean");
  fails(EMB_DECL "local w = vector('w', 'K')\nembedding_bag(E, I, O, 0, 0, 1, {weights = w})\n",
        "t.lua:6: embedding_bag: weights w have length 'K' but indices I have 'L'", "weights not one per index");
  fails(EMB2("{weights = E}"), "t.lua:6: embedding_bag: weights, E, is a matrix; it must be a vector",
        "a matrix as weights");
  fails(EMB2("{zerocopy = true}"), "t.lua:6: zerocopy is for gemv", "zerocopy for a bag");
  fails(EMB2("{tb = 1}"), "t.lua:6: unknown compute option 'tb' (mode, weights, sync, into)", "an unknown bag option");
  fails(EMB2("{into = 'scratch'}"), "t.lua:6: into='scratch': expected \"input\" (the default) or \"output\"",
        "computing into scratch");
  fails(EMB_DECL "embedding_bag(E, I, O, 0, 0, 1, {into = 'output'})\n",
        "t.lua:5: into='output' with interleave='T*D': the output's rows are apart", "a bag into an interleaved output "
        "of two ranks");
  fails(EMB_DECL "index('X', 'L', 'f32')\n", "t.lua:5: index: dtype 'f32' is not i64 or i32", "an index of floats");
  fails("collective{kind='allreduce', ranks=2, interleave='T'}\n",
        "t.lua:1: interleave is for out-of-place alltoall and allgather", "an interleaved allreduce");
  fails("collective{kind='alltoall', ranks=2, interleave='T+D'}\n",
        "t.lua:1: interleave='T+D': expected a product of dimension names", "a malformed interleave");
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  rt_diag *d = rt_diag_new(10);
  cc_lower_opts lo = {.fuse = 1};
  ok(trace(EMB2("{mode = 'mean'}"), &t) == BT_OK && !cc_lower(t, &lo, &p, d) && !ir_check(p, d),
     "a mean embedding program compiles: %s %s", msg, rt_diag_text(d));
  ok(p && p->gpus[0].tbs[0].steps[0].op == IR_OP_EBAGM && p->gpus[0].tbs[0].steps[0].args[3] < 0 && p->interleave &&
     !strcmp(p->interleave, "T*D") && p->operands[1].kind == IR_OPND_INDEX,
     "it pools by mean (ebagm, no weights) into the interleaved output");
  cc_trace_free(t);
  ir_prog_free(p);
  t = NULL;
  p = NULL;
  ok(trace(EMB2("{weights = w, sync = 'group:2'}"), &t) == BT_OK && !cc_lower(t, &lo, &p, d) && !ir_check(p, d),
     "a weighted embedding program compiles: %s %s", msg, rt_diag_text(d));
  ok(p && p->gpus[1].tbs[0].steps[0].op == IR_OP_EBAG && p->gpus[1].tbs[0].steps[0].args[3] == 3 &&
     p->gpus[1].tbs[0].steps[0].sync == IR_SYNC_GROUP && p->gpus[1].tbs[0].steps[0].srcoff == 0,
     "its bags take the weights and the sync policy, rank 1 pools rank 0's samples first");
  cc_trace_free(t);
  ir_prog_free(p);
  t = NULL;
  p = NULL;
  ok(trace("collective{kind='alltoall', ranks=1, interleave='T*D'}\nlocal E = matrix('E', 'R', 'D')\n"
           "local I = index('I', 'L')\nlocal O = index('O', 'NO')\nembedding_bag(E, I, O, 0, 0, 1, {into = 'output'})\n",
           &t) == BT_OK && !cc_lower(t, &lo, &p, d) && !ir_check(p, d),
     "one rank's pooling straight into the output compiles: %s %s", msg, rt_diag_text(d));
  ok(p && p->gpus[0].ntbs == 1 && p->gpus[0].tbs[0].steps[0].dstbuf == IR_BUF_OUTPUT,
     "one step, a compute thread block storing into the output");
  cc_trace_free(t);
  ir_prog_free(p);
  rt_diag_free(d);
}

#define MOE_DECL "collective{kind='alltoall', ranks=2}\nlocal X = matrix('X', 'T', 'F')\nlocal W = matrix('W', 'F', 'H')\n"

static void test_gemm(void) {
  fails(MOE_DECL "gemm(W, X, 0, 0)\n", "t.lua:4: gemm: X W has cols 'H' but W X has rows 'T'", "X and W swapped");
  fails(MOE_DECL "local V = vector('V', 'F')\ngemm(X, V, 0, 0)\n", "t.lua:5: gemm: W (argument 2), V, is a vector; it must "
        "be a matrix", "a vector as W");
  fails(MOE_DECL "local Y = matrix('Y', 'input', 'F')\ngemm(Y, W, 0, 0)\n",
        "t.lua:5: gemm: X [input x F] and W [F x H] have dimensions of their own", "X shaped like the input");
  fails(MOE_DECL "gemm(X, W, 0, 0, 1, {zerocopy = true})\n", "t.lua:4: zerocopy is for gemv", "zerocopy for a gemm");
  fails(MOE_DECL "gemm(X, W, 0, 2)\n", "t.lua:4: input[2..2] out of range", "a chunk past the input");
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  rt_diag *d = rt_diag_new(10);
  cc_lower_opts lo = {.fuse = 1};
  ok(trace(MOE_DECL "for r = 0, 1 do for q = 0, 1 do gemm(X, W, r, q) end end\n"
           "for r = 0, 1 do for q = 0, 1 do chunk(r, 'input', q):copy(q, 'output', r) end end\n", &t) == BT_OK &&
     !cc_lower(t, &lo, &p, d) && !ir_check(p, d), "a GEMM + AllToAll compiles: %s %s", msg, rt_diag_text(d));
  ok(p && p->gpus[0].tbs[0].steps[0].op == IR_OP_GEMM && p->gpus[0].tbs[0].steps[0].srcoff == 1 &&
     p->gpus[0].tbs[0].steps[0].args[0] == 0 && p->gpus[0].tbs[0].steps[0].args[1] == 1,
     "rank 0 computes the rows rank 1 owns first, with X and W");
  cc_trace_free(t);
  ir_prog_free(p);
  rt_diag_free(d);
}

int main(void) {
  setenv("BATON_COMPILE_MAX_MB", "64", 1);
  setenv("BATON_LUA_MAX_INSTRUCTIONS", "20000000", 1);
  test_fused();
  test_embed();
  test_gemm();
  return tap_done();
}
