/* cc_compile.c -- the compile pipeline: trace, lower, validate, verify on the CPU. */
#include "cc_compile.h"
#include "rt_time.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "rt_log.h"
#include "ir_geom.h"
#include "ir_write.h"
#include "rt_param.h"

typedef struct run {
  const ir_prog *p;
  ip_cpu_opts o;
  ip_cpu_report rep;
  rt_diag *d;
  bt_result res;
  pthread_t th;
} run;

static void *run_main(void *arg) {
  run *r = arg;
  r->res = ip_cpu_verify(r->p, &r->o, &r->rep, r->d);
  return NULL;
}

/* The three runs of a fused or interleaved program, whose compute steps
 * and output rows need values: f32 sum at an uneven count in 128-element
 * tiles, i32 max -- f16 for a fused program, whose compute steps take
 * float types -- at 7 elements in 1-element tiles, bf16 sum out of place
 * (each in a type the compute steps take), counts of whole rows. */
static void value_runs(const ir_prog *p, run *runs, ip_dims *dims) {
  enum { N = 3 };
  runs[0].o = (ip_cpu_opts){.dtype = IP_F32, .op = IP_OP_SUM, .count = 4099, .tile = 128, .inplace = -1};
  runs[1].o = (ip_cpu_opts){.dtype = IP_I32, .op = IP_OP_MAX, .count = 7, .tile = 1, .inplace = -1};
  runs[2].o = (ip_cpu_opts){.dtype = IP_BF16, .op = IP_OP_SUM, .count = 1000, .tile = 64, .inplace = 0};
  if (!ip_compute_takes(p, IP_I32)) runs[1].o.dtype = IP_F16;
  for (int i = 0; i < N; i++)   /* a program that takes one float type (gemm: bf16) runs in it */
    if (!ip_compute_takes(p, runs[i].o.dtype)) runs[i].o.dtype = IP_BF16;
  /* Unbound dimensions small (a gemm's W columns 3, X's 5, the
   * interleave's 3 each) and counts of whole output rows. */
  for (int i = 0; i < N; i++) {
    runs[i].o.count = ip_dims_fit(p, dims, runs[i].o.count);
    runs[i].o.dims = dims;
  }
}

/* Element-steps (chunks the steps move x chunk capacity) the tiled run on
 * values may take: the capacity shrinks as programs grow, from 512 down
 * to 3. */
#define VALUE_RUN_BUDGET (INT64_C(1) << 18)

/* The chunks p's steps move, each step at least one (a nop, a signal). */
static int64_t chunk_steps(const ir_prog *p) {
  int64_t n = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        n += (ir_op_flags[st->op] & (IR_F_SIG | IR_F_WAIT)) || st->cnt < 1 ? 1 : st->cnt;
      }
  return n;
}

/* The three runs of any other program.  The routes of its elements do
 * not depend on their values (no step looks at one), nor on the count or
 * the tiles (each element of a chunk goes where element 0 goes; tiles cut
 * every chunk at the same places, and a dependency or message of tile t
 * orders only tile t's elements): a sources run (ip_cpu_opts.sources) with
 * one element per chunk checks every route exactly, for every input, type
 * and operator.
 *   0. a sources run, one element per chunk, in the program's own layout;
 *   1. for an in-place program whose out-of-place call keeps i and o apart
 *      (ir_prog_aliased), a sources run of that call; otherwise i32 max at 7
 *      elements in 1-element tiles (more chunks than elements: empty ones);
 *   2. f32 sum at an uneven count (each chunk's capacity C = 2^18 / the
 *      chunks the steps move, 3..512, and the last chunk of a block one short) in tiles of
 *      ceil(C / 4): several tiles and short tails on values, a few
 *      element-steps however large the program. */
static void route_runs(const ir_prog *p, run *runs) {
  ir_geom g;
  int64_t k = ir_geom_init(&g, p, 0, 1, 0) ? 1 : g.k;   /* ir_check passed: it fits */
  if (k < 1) k = 1;
  runs[0].o = (ip_cpu_opts){.sources = 1, .count = k, .tile = 1, .inplace = -1};
  if (p->inplace && ir_prog_aliased(p, 1) != ir_prog_aliased(p, 0))
    runs[1].o = (ip_cpu_opts){.sources = 1, .count = k, .tile = 1, .inplace = 0};
  else
    runs[1].o = (ip_cpu_opts){.dtype = IP_I32, .op = IP_OP_MAX, .count = 7, .tile = 1, .inplace = -1};
  int64_t steps = chunk_steps(p);
  int64_t cap = VALUE_RUN_BUDGET / (steps > 0 ? steps : 1);
  cap = cap < 3 ? 3 : cap > 512 ? 512 : cap;
  runs[2].o = (ip_cpu_opts){.dtype = IP_F32, .op = IP_OP_SUM, .count = cap * k - 1, .tile = (cap + 3) / 4,
                            .inplace = -1};
}

/* Runs the program through the CPU executor three times, side by side
 * (route_runs, or value_runs for a fused or interleaved program); each is
 * an independent executor on one thread.  The first failure's messages
 * go to d. */
static bt_result run_cpu(const ir_prog *p, rt_diag *d, long *checked) {
  enum { N = 3 };
  run runs[N];
  memset(runs, 0, sizeof runs);
  ip_dims dims = {0};
  if (ir_prog_fused(p) || p->interleave) value_runs(p, runs, &dims);
  else route_runs(p, runs);
  int started[N] = {0};
  bt_result res = BT_OK;
  *checked = 0;
  for (int i = 0; i < N; i++) {
    runs[i].p = p;
    runs[i].d = rt_diag_new(20);
    if (!runs[i].d) { res = BT_ERR_NOMEM; continue; }
    started[i] = !pthread_create(&runs[i].th, NULL, run_main, &runs[i]);
    if (!started[i]) run_main(&runs[i]);   /* no thread: run it here */
  }
  for (int i = 0; i < N; i++) {
    if (started[i]) pthread_join(runs[i].th, NULL);
    if (!runs[i].d) continue;
    if (runs[i].res && !res) { res = runs[i].res; rt_diag_add(d, "%s", rt_diag_text(runs[i].d)); }
    *checked += runs[i].rep.checked;
    rt_diag_free(runs[i].d);
  }
  return res;
}

bt_result cc_verify(const ir_prog *p, const char *script, cc_compile_report *rep, rt_diag *diag) {
  double t0 = rt_time_s();
  rep->stage = CC_STAGE_CHECK;
  bt_result res = ir_check(p, diag);
  double t1 = rt_time_s();
  int unchecked = 0;
  if (!res) res = ir_check_races_of(p, ir_prog_aliased(p, p->inplace), &unchecked, diag);
  if (!res && unchecked)
    LOG_WARN(RT_SUB_COMPILER, "%s: the race check was skipped on %d of %d ranks (the program is over its size "
             "limit): the program is written, but its race freedom is not proven", script, unchecked, p->ngpus);
  double t2 = rt_time_s();
  rep->check_s = t1 - t0;
  rep->races_s = t2 - t1;
  if (res) {
    snprintf(rep->what, sizeof rep->what, "%s: the compiled program fails validation (deadlock freedom with %d "
             "FIFO slots included); nothing written (the line below is the script line of the failing step; unless the "
             "script fixes thread blocks or channels there, or BATON_EXEC_SLOTS is small, this is a defect of baton's "
             "compiler: --no-fuse compiles without fusion)", script, (int)rt_param_int(RT_PARAM_EXEC_SLOTS));
    return res;
  }
  rep->stage = CC_STAGE_VERIFY;
  res = run_cpu(p, diag, &rep->checked);
  rep->runs_s = rt_time_s() - t2;
  if (res) {
    snprintf(rep->what, sizeof rep->what, "%s: the compiled program fails on the CPU executor; nothing written",
             script);
    return res;
  }
  rep->stage = CC_STAGE_DONE;
  return BT_OK;
}

bt_result cc_compile_file(const char *script, const char *const *params, int nparams, const cc_compile_opts *o,
                          ir_prog **out, cc_compile_report *rep, rt_diag *diag) {
  static const cc_compile_opts defaults = {.fuse = 1};
  cc_compile_report own;
  if (!o) o = &defaults;
  if (!rep) rep = &own;
  memset(rep, 0, sizeof *rep);
  *out = NULL;
  int slots = 0;
  cc_lower_opts lo = {.fuse = o->fuse, .slots_needed = &slots};
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  bt_result res;
  double t0 = rt_time_s();
  rep->stage = CC_STAGE_TRACE;
  if ((res = cc_trace_file(script, params, nparams, &t, diag))) goto out;
  double t1 = rt_time_s();
  rep->trace_s = t1 - t0;
  rep->stage = CC_STAGE_LOWER;
  if ((res = cc_lower(t, &lo, &p, diag))) goto out;
  p->slots = slots;   /* the runtime refuses the program with fewer (rt_algo.c) */
  if (o->sized) {
    p->minbytes = o->minbytes;
    p->maxbytes = o->maxbytes;
  }
  if (ir_prog_multideps(p)) {
    /* A program MSCCL could run keeps MSCCL's one dependency a step (nops
     * wait for the rest); one that is baton's anyway waits for them at once. */
    ir_prog *q = ir_deps_split(p);
    if (!q) { res = BT_ERR_NOMEM; goto out; }
    if (ir_prog_needs_baton(q)) ir_prog_free(q);
    else { ir_prog_free(p); p = q; }
  }
  double t2 = rt_time_s();
  rep->lower_s = t2 - t1;
  if (o->explain) ir_explain(p, o->explain);
  if ((res = cc_verify(p, script, rep, diag))) goto out;
  *out = p;
  p = NULL;
out:
  ir_prog_free(p);
  cc_trace_free(t);
  return res;
}
