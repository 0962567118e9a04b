/* ir_deps.c -- steps with several dependencies, and their one-dependency form. */
#include "ir.h"

#include <stdlib.h>

int ir_prog_multideps(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++)
        if (ir_step_ndeps(&p->gpus[r].tbs[t].steps[s]) > 1) return 1;
  return 0;
}

/* Where dependency d of a step of rank g lands: pos[tb][step], when the
 * step exists (oldn: each tb's steps before the split); as it was when not
 * (ir_check refuses it). */
static ir_dep moved(ir_dep d, int ntbs, int32_t *const *pos, const int *oldn) {
  if (d.tb >= 0 && d.tb < ntbs && d.step >= 0 && d.step < oldn[d.tb]) d.step = pos[d.tb][d.step];
  return d;
}

/* Rebuilds the steps of rank g's thread blocks: step s of tb t lands at
 * pos[t][s], after a nop for each of its dependencies but the last.
 * Returns 0 when out of memory. */
static int split_rank(ir_gpu *g) {
  int ok = 0, nt = g->ntbs;
  int32_t **pos = calloc(nt ? nt : 1, sizeof *pos);
  int *oldn = calloc(nt ? nt : 1, sizeof *oldn);
  if (!pos || !oldn) goto out;
  for (int t = 0; t < nt; t++) {
    const ir_tb *tb = &g->tbs[t];
    oldn[t] = tb->nsteps;
    if (!(pos[t] = malloc((tb->nsteps ? tb->nsteps : 1) * sizeof **pos))) goto out;
    int32_t at = 0;
    for (int s = 0; s < tb->nsteps; s++) {
      int nd = ir_step_ndeps(&tb->steps[s]);
      at += nd > 1 ? nd - 1 : 0;
      pos[t][s] = at++;
    }
  }
  for (int t = 0; t < nt; t++) {
    ir_tb *tb = &g->tbs[t];
    ir_step *old = tb->steps;
    int n = tb->nsteps;
    tb->steps = NULL;
    tb->nsteps = tb->capsteps = 0;
    for (int s = 0; s < n; s++) {
      const ir_step *st = &old[s];
      int nd = ir_step_ndeps(st);
      for (int k = 0; k + 1 < nd; k++) {   /* a nop waits for each dependency but the last */
        ir_step *w = ir_step_add(tb);
        if (!w) { free(old); goto out; }
        ir_dep d = moved(ir_step_dep(st, k), nt, pos, oldn);
        w->op = IR_OP_NOP;
        w->srcbuf = IR_BUF_INPUT;
        w->dstbuf = IR_BUF_OUTPUT;
        w->cnt = 0;
        w->depid = d.tb;
        w->deps = d.step;
        w->line = st->line;
        w->prov = st->prov;
      }
      ir_step *c = ir_step_add(tb);
      if (!c) { free(old); goto out; }
      *c = *st;
      c->nxdeps = 0;
      if (nd > 0) {
        ir_dep d = moved(ir_step_dep(st, nd - 1), nt, pos, oldn);
        c->depid = d.tb;
        c->deps = d.step;
      }
    }
    free(old);
  }
  ok = 1;
out:
  for (int t = 0; pos && t < nt; t++) free(pos[t]);
  free(pos);
  free(oldn);
  return ok;
}

ir_prog *ir_deps_split(const ir_prog *p) {
  ir_prog *q = ir_prog_copy(p, 0);
  if (!q) return NULL;
  for (int r = 0; r < q->ngpus; r++)
    if (!split_rank(&q->gpus[r])) { ir_prog_free(q); return NULL; }
  return q;
}
