/* sim_fused.c -- fused programs in a simulation: their dimensions, the
 * call's shapes and a compute step's time (sim_fused.h). */
#include "sim_fused.h"

#include <stdio.h>
#include <string.h>

/* Dimension `name` makes rows of the call (why says how): bound to 1 for
 * the executor, which runs one element a tile; 0 with a message when the
 * call leaves it unbound (said once per name). */
static int needs(sim_fused *f, const ip_dims *call, const ir_prog *p, const char *name, const char *why,
                 rt_diag *diag) {
  if (!name || !strcmp(name, IR_DIM_INPUT) || ip_dims_get(call, name) > 0) {
    if (name && strcmp(name, IR_DIM_INPUT)) ip_dims_set(&f->exec, name, 1);
    return 1;
  }
  if (ip_dims_get(&f->exec, name) < 0)
    rt_diag_add(diag, "%s: dimension %s is not bound: %s; give it with --dim %s=N", ir_prog_where(p), name, why,
                name);
  ip_dims_set(&f->exec, name, 1);
  return 0;
}

/* Whether the rank's input of n elements is whole rows of `rows` (dimension
 * `name`, what: whose columns); else a message naming a size that fits. */
static int whole_rows(const ir_prog *p, int64_t n, int64_t rows, const char *name, const char *what, int esize,
                      uint64_t bytes, rt_diag *diag) {
  if (rows < 1 || n % rows == 0) return 1;
  rt_diag_add(diag, "%s: %llu bytes: a rank's input of %lld elements is not whole rows of %s = %lld (%s); give a "
              "size of whole rows (a multiple of %lld bytes)", ir_prog_where(p), (unsigned long long)bytes,
              (long long)n, name, (long long)rows, what, (long long)rows * esize);
  return 0;
}

bt_result sim_fused_setup(sim_fused *f, const ir_prog *p, ir_geom *g, const ip_dims *call, int esize,
                          uint64_t bytes, rt_diag *diag) {
  memset(f, 0, sizeof *f);
  f->pool = 1;
  int ok = 1;
  ip_dims t = {0};   /* the timed call's bindings: the call's, and a GEMV's K where it gives none */
  if (call) t = *call;
  char why[160];
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (!(ir_op_flags[st->op] & IR_F_COMP)) continue;
        const ir_operand *a = &p->operands[st->args[0]];
        if (st->op == IR_OP_GEMV || st->op == IR_OP_GEMVS) {
          if (a->dim[1] && ip_dims_get(&t, a->dim[1]) < 0) ip_dims_set(&t, a->dim[1], SIM_GEMV_K);
        } else if (st->op == IR_OP_GEMM) {
          snprintf(why, sizeof why, "a gemm's multiply-adds per output element are the columns of %s", a->name);
          ok &= needs(f, call, p, a->dim[1], why, diag);
          snprintf(why, sizeof why, "a gemm's output rows are the columns of %s", p->operands[st->args[1]].name);
          ok &= needs(f, call, p, p->operands[st->args[1]].dim[1], why, diag);
        } else {
          snprintf(why, sizeof why, "an embedding bag's output rows are the columns of %s", a->name);
          ok &= needs(f, call, p, a->dim[1], why, diag);
        }
      }
  if (p->interleave) {   /* each factor of the interleave: the output's rows are made of them */
    snprintf(why, sizeof why, "the output is interleaved in rows of %s", p->interleave);
    for (const char *s = p->interleave; *s;) {
      char name[IR_MAX_NAME];
      size_t n = strcspn(s, "*");
      snprintf(name, sizeof name, "%.*s", (int)(n < IR_MAX_NAME ? n : IR_MAX_NAME - 1), s);
      ok &= needs(f, call, p, name, why, diag);
      s += n + (s[n] == '*');
    }
  }
  if (!ok) return BT_ERR_INVALID;
  int64_t in = g->elems[IR_BUF_INPUT];
  for (int r = 0; r < p->ngpus; r++)   /* rows before shapes: a size of whole rows is the fix to name */
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        const ir_operand *rows = st->op == IR_OP_GEMM ? &p->operands[st->args[1]]
                                 : st->op == IR_OP_EBAG || st->op == IR_OP_EBAGM ? &p->operands[st->args[0]] : NULL;
        if (rows && !whole_rows(p, in, ip_dims_get(&t, rows->dim[1]), rows->dim[1],
                                st->op == IR_OP_GEMM ? "a gemm's output row" : "an embedding bag", esize, bytes, diag))
          return BT_ERR_INVALID;
      }
  int64_t shape[IR_MAX_OPERANDS][2];
  if (p->noperands && ip_operand_shapes(p, g, &t, 1, shape, diag)) return BT_ERR_INVALID;
  for (int k = 0; k < p->noperands; k++)
    if (p->operands[k].kind == IR_OPND_MATRIX) f->cols[k] = (double)shape[k][1];
  for (int r = 0; r < p->ngpus; r++)   /* indices per bag, where the call says how many indices */
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (st->op != IR_OP_EBAG && st->op != IR_OP_EBAGM) continue;
        int64_t len = ip_dims_get(call, p->operands[st->args[1]].dim[0]), bags = in / shape[st->args[0]][1];
        if (len > 0 && bags > 0) f->pool = (double)len / (double)bags;
      }
  if (p->interleave) {
    f->seg = ip_interleave_len(p, &t, 0, diag);
    if (f->seg < 0) return BT_ERR_INVALID;
    if (ir_geom_interleave(g, f->seg)) {
      rt_diag_add(diag, "%s: %llu bytes: every chunk (%lld elements) must be whole rows of the output's interleave "
                  "%s = %lld; give a size of whole rows in every chunk (a multiple of %lld elements a block)",
                  ir_prog_where(p), (unsigned long long)bytes, (long long)g->cap, p->interleave, (long long)f->seg,
                  (long long)(f->seg * g->k));
      return BT_ERR_INVALID;
    }
  }
  return BT_OK;
}

int64_t sim_fused_tile(const ir_geom *g, int64_t tile, int esize, int simple) {
  if (g->seg <= 0) return tile;
  int64_t fit = esize > 0 && esize < 16 ? ir_geom_tile_fit(g, tile, 16 / esize, simple) : 0;
  return fit > 0 ? fit : ir_geom_tile_fit(g, tile, 1, simple);
}

double sim_fused_compute_us(const sim_fused *f, const sim_spec *s, const ir_step *st, int64_t elems, int esize) {
  double cols = st->args[0] >= 0 && f->cols[st->args[0]] > 0 ? f->cols[st->args[0]] : SIM_GEMV_K;
  double bytes = (double)elems * esize;
  if (st->op == IR_OP_GEMM) return 2.0 * (double)elems * cols / (s->v[SIM_GEMM_TFLOPS] * 1e6);
  if (st->op == IR_OP_EBAG || st->op == IR_OP_EBAGM) return bytes * f->pool / (s->v[SIM_EMBED_BW] * 1e3);
  return bytes * cols / (s->v[SIM_GEMV_BW] * 1e3);
}
