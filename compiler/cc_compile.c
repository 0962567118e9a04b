/* cc_compile.c -- the compile pipeline: trace, lower, validate, verify on the CPU. */
#include "cc_compile.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_write.h"
#include "rt_param.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

/* Runs the compiled program through the CPU executor the way users call
 * it: three runs (f32 sum at an uneven count in 128-element tiles, i32 max
 * at 7 elements in 1-element tiles -- f16 for a fused program, whose
 * compute steps take float types --, bf16 sum out of place), side by
 * side; each is an independent executor.  The first failure's messages go
 * to d. */
static bt_result verify(const ir_prog *p, rt_diag *d, long *checked) {
  run runs[] = {
    {.o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 4099, .tile = 128, .inplace = -1}},
    {.o = {.dtype = IP_I32, .op = IP_OP_MAX, .count = 7, .tile = 1, .inplace = -1}},
    {.o = {.dtype = IP_BF16, .op = IP_OP_SUM, .count = 1000, .tile = 64, .inplace = 0}},
  };
  enum { N = sizeof runs / sizeof runs[0] };
  if (!ip_compute_takes(p, IP_I32)) runs[1].o.dtype = IP_F16;
  for (int i = 0; i < N; i++)   /* a program that takes one float type (gemm: bf16) runs in it */
    if (!ip_compute_takes(p, runs[i].o.dtype)) runs[i].o.dtype = IP_BF16;
  /* A gemm's output rows are W's columns: 3 of them (and 5 for F), and
   * counts of whole rows. */
  ip_dims dims = {0};
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int k = 0; k < p->gpus[r].tbs[b].nsteps; k++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[k];
        if (st->op != IR_OP_GEMM || ip_dims_get(&dims, p->operands[st->args[1]].dim[1]) > 0) continue;
        ip_dims_set(&dims, p->operands[st->args[1]].dim[1], 3);
        ip_dims_set(&dims, p->operands[st->args[0]].dim[1], 5);
        for (int i = 0; i < N; i++) {
          runs[i].o.count = (runs[i].o.count + 2) / 3 * 3;
          runs[i].o.dims = &dims;
        }
      }
  /* An interleaved output's rows are a product of dimensions: 3 each, and
   * counts of whole rows per chunk. */
  if (p->interleave) {
    int64_t seg = 1;
    for (const char *f = p->interleave; *f;) {
      size_t n = strcspn(f, "*");
      char name[IR_MAX_NAME];
      snprintf(name, sizeof name, "%.*s", (int)n, f);
      ip_dims_set(&dims, name, 3);
      seg *= 3;
      f += n + (f[n] == '*');
    }
    int ib, ob;
    ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
    int64_t row = seg * (p->nchunksperloop / (ib > ob ? ib : ob));   /* whole rows in every chunk */
    for (int i = 0; i < N; i++) {
      runs[i].o.count = (runs[i].o.count + row - 1) / row * row;
      runs[i].o.dims = &dims;
    }
  }
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

bt_result cc_compile_file(const char *script, const char *const *params, int nparams, const cc_compile_opts *o,
                          ir_prog **out, cc_compile_report *rep, rt_diag *diag) {
  static const cc_compile_opts defaults = {.fuse = 1};
  cc_compile_report own;
  if (!o) o = &defaults;
  if (!rep) rep = &own;
  memset(rep, 0, sizeof *rep);
  *out = NULL;
  cc_lower_opts lo = {.fuse = o->fuse};
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  bt_result res;
  double t0 = now();
  rep->stage = CC_STAGE_TRACE;
  if ((res = cc_trace_file(script, params, nparams, &t, diag))) goto out;
  double t1 = now();
  rep->trace_s = t1 - t0;
  rep->stage = CC_STAGE_LOWER;
  if ((res = cc_lower(t, &lo, &p, diag))) goto out;
  if (o->sized) {
    p->minbytes = o->minbytes;
    p->maxbytes = o->maxbytes;
  }
  double t2 = now();
  rep->lower_s = t2 - t1;
  if (o->explain) ir_explain(p, o->explain);
  rep->stage = CC_STAGE_CHECK;
  res = ir_check(p, diag);
  double t2a = now();
  if (!res) res = ir_check_races(p, ir_prog_aliased(p, p->inplace), diag);
  double t2b = now();
  rep->check_s = t2a - t2;
  rep->races_s = t2b - t2a;
  if (res) {
    snprintf(rep->what, sizeof rep->what, "%s: the compiled program fails validation (deadlock freedom with %d "
             "FIFO slots included); nothing written", script, (int)rt_param_int(RT_PARAM_EXEC_SLOTS));
    goto out;
  }
  rep->stage = CC_STAGE_VERIFY;
  res = verify(p, diag, &rep->checked);
  rep->runs_s = now() - t2b;
  if (res) {
    snprintf(rep->what, sizeof rep->what, "%s: the compiled program fails on the CPU executor; nothing written",
             script);
    goto out;
  }
  rep->stage = CC_STAGE_DONE;
  *out = p;
  p = NULL;
out:
  ir_prog_free(p);
  cc_trace_free(t);
  return res;
}
