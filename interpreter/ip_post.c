/* ip_post.c -- fills test data and checks results element by element. */
#include "ip_post.h"
#include "ip_compute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input value of element e of rank r.  Sums of up to 32 ranks stay exact
 * in f16/bf16 and in range for i8/u8; products have at most a few factors
 * of 2 and signs, so they are exact too. */
static double pattern(const ip_cpu_opts *o, int r, int64_t e) {
  int unsig = ip_dtype_kind[o->dtype] == 'U';
  if (o->op == IP_OP_PROD) {
    if ((r + e) % 11 == 0) return 2;
    if (!unsig && (r * 3 + e) % 7 == 0) return -1;
    return 1;
  }
  int64_t v = (r * 131 + e * 17 + 7) % 9;
  return unsig ? (double)v : (double)(v - 4);
}

static const double SENTINEL = 99;

static void fill(const ip_cpu_opts *o, int r, unsigned char *p, int64_t n) {
  for (int64_t e = 0; e < n; e++) ip_set(o->dtype, p, e, pattern(o, r, e));
}

static void fill_const(const ip_cpu_opts *o, unsigned char *p, int64_t n, double v) {
  for (int64_t e = 0; e < n; e++) ip_set(o->dtype, p, e, v);
}

static unsigned char **ptrs(int n) { return calloc(n, sizeof(unsigned char *)); }

/* n elements of es bytes (and one more, so that n = 0 allocates); NULL when
 * n is outside [0, IR_GEOM_MAX_ELEMS] (ir_geom_init keeps every buffer
 * within it: a size that is not is refused, never wrapped) or out of memory. */
static void *alloc_elems(int64_t n, size_t es) {
  if (n < 0 || n > IR_GEOM_MAX_ELEMS || es > 64) return NULL;
  return malloc(((size_t)n + 1) * es);
}

/* An aliased i/o span in NCCL's in-place layout: the sentinel everywhere
 * but the input, which sits at in_at.  Sets where i and o start in it. */
static unsigned char *new_span(const ip_cpu_opts *o, const ir_geom *g, const unsigned char *input,
                               unsigned char **in, unsigned char **out) {
  int es = ip_dtype_size[o->dtype];
  unsigned char *s = alloc_elems(g->span, es);
  if (!s) return NULL;
  fill_const(o, s, g->span, SENTINEL);
  memcpy(s + g->in_at * es, input, g->elems[IR_BUF_INPUT] * es);
  *in = s + g->in_at * es;
  *out = s + g->out_at * es;
  return s;
}

/* For each of the n input chunks of rank r, the first compute step (in
 * thread block and step order) that computes it, or NULL: one pass over the
 * steps, not one per chunk.  NULL when out of memory. */
static const ir_step **computes(const ir_prog *p, int r, int n) {
  const ir_gpu *g = &p->gpus[r];
  const ir_step **by = calloc((size_t)n + 1, sizeof *by);
  if (!by) return NULL;
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      if (!(ir_op_flags[st->op] & IR_F_COMP)) continue;
      int64_t lo = st->srcoff < 0 ? 0 : st->srcoff, hi = (int64_t)st->srcoff + st->cnt;
      for (int64_t c = lo; c < hi && c < n; c++)
        if (!by[c]) by[c] = st;
    }
  return by;
}

/* A fused program's operands (test data) and reference input on every
 * rank: ref_in[r] gets the exact value of each computed element rounded
 * to the type, ref_mag[r] its terms' magnitudes. */
static bt_result fused_setup(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g, rt_diag *diag) {
  int n = p->ngpus;
  b->opnd = calloc(n, sizeof *b->opnd);
  b->ref_mag = calloc(n, sizeof *b->ref_mag);
  if (!b->opnd || !b->ref_mag) return BT_ERR_NOMEM;
  for (int r = 0; r < n; r++) {
    int64_t shape[IR_MAX_OPERANDS][2];
    CHECK(ip_operand_shapes(p, &g[r], o->dims, IP_CPU_DIM, shape, diag));
    for (int k = 0; k < p->noperands; k++) {
      int64_t elems = shape[k][0] * shape[k][1];   /* <= IP_MAX_OPERAND_ELEMS (ip_operand_shapes) */
      ip_dtype dt = ip_operand_dtype(p, k, o->dtype);
      void *data = alloc_elems(elems, ip_dtype_size[dt]);
      if (!data) return BT_ERR_NOMEM;
      ip_operand_make(p, k, o->dtype, r, shape, data);
      b->opnd[r][k] = (ip_opnd){data, shape[k][0], shape[k][1], shape[k][1],
                                 p->operands[k].kind == IR_OPND_INDEX ? (int)dt : -1};
    }
    int64_t ni = g[r].elems[IR_BUF_INPUT];
    double *val = alloc_elems(ni, sizeof *val);
    b->ref_mag[r] = alloc_elems(ni, sizeof(double));
    const ir_step **by = computes(p, r, g[r].chunks[IR_BUF_INPUT]);
    if (!val || !b->ref_mag[r] || !by) { free(val); free(by); return BT_ERR_NOMEM; }
    memset(b->ref_mag[r], 0, ((size_t)ni + 1) * sizeof(double));
    for (int64_t e = 0; e < ni; e++) val[e] = NAN;
    for (int c = 0; c < g[r].chunks[IR_BUF_INPUT]; c++) {
      const ir_step *st = by[c];
      if (!st) continue;
      ip_opnd args[IR_MAX_ARGS] = {{0}};
      for (int k = 0; k < IR_MAX_ARGS && st->args[k] >= 0; k++) args[k] = b->opnd[r][st->args[k]];
      int64_t at = ir_geom_off(&g[r], IR_BUF_INPUT, c), len = ir_geom_len(&g[r], IR_BUF_INPUT, c);
      ip_compute_exact(st->op, o->dtype, args, at, len, val + at, b->ref_mag[r] + at);
    }
    for (int64_t e = 0; e < ni; e++) ip_set(o->dtype, b->ref_in[r], (size_t)e, val[e]);
    free(val);
    free(by);
  }
  return BT_OK;
}

bt_result post_setup(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, rt_diag *diag) {
  int n = p->ngpus, es = ip_dtype_size[o->dtype];
  int aliased = ir_prog_aliased(p, inplace);
  b->inplace_call = inplace;
  b->fused = ir_prog_fused(p);
  b->user_in = ptrs(n); b->user_out = ptrs(n); b->ref_in = ptrs(n); b->span = ptrs(n);
  b->prog_in = ptrs(n); b->prog_out = ptrs(n);
  if (!b->user_in || !b->user_out || !b->ref_in || !b->span || !b->prog_in || !b->prog_out)
    return BT_ERR_NOMEM;
  for (int r = 0; r < n; r++) {
    b->ref_in[r] = alloc_elems(g[r].elems[IR_BUF_INPUT], es);
    if (!b->ref_in[r]) return BT_ERR_NOMEM;
    fill(o, r, b->ref_in[r], g[r].elems[IR_BUF_INPUT]);
  }
  if (b->fused) CHECK(fused_setup(b, p, o, g, diag));
  /* What the program finds in its input: the data, or for a fused
   * program NaN (it computes the input before it reads it). */
  unsigned char *poison = NULL;
  if (b->fused) {
    int64_t most = 0;
    for (int r = 0; r < n; r++) if (g[r].elems[IR_BUF_INPUT] > most) most = g[r].elems[IR_BUF_INPUT];
    if (!(poison = alloc_elems(most, es))) return BT_ERR_NOMEM;
    for (int64_t e = 0; e < most; e++) ip_set(o->dtype, poison, (size_t)e, NAN);
  }
  bt_result res = BT_OK;
  for (int r = 0; r < n && !res; r++) {
    const ir_geom *gr = &g[r];
    int64_t ni = gr->elems[IR_BUF_INPUT], no = gr->elems[IR_BUF_OUTPUT];
    const unsigned char *start = poison ? poison : b->ref_in[r];
    if (inplace) {
      /* One allocation; the input sits where NCCL's in-place call puts it
       * and the rest of the output starts as a sentinel. */
      b->user_out[r] = new_span(o, gr, start, &b->prog_in[r], &b->prog_out[r]);
      if (!b->user_out[r]) res = BT_ERR_NOMEM;
      continue;
    }
    b->user_in[r] = alloc_elems(ni, es);
    b->user_out[r] = alloc_elems(no, es);
    if (!b->user_in[r] || !b->user_out[r]) { res = BT_ERR_NOMEM; continue; }
    memcpy(b->user_in[r], start, ni * es);
    fill_const(o, b->user_out[r], no, SENTINEL);
    if (aliased) {
      /* An in-place program called out of place runs on a copy of the
       * input in a span of its own; post_finish copies the output out. */
      b->span[r] = new_span(o, gr, start, &b->prog_in[r], &b->prog_out[r]);
      if (!b->span[r]) res = BT_ERR_NOMEM;
    } else {
      b->prog_in[r] = b->user_in[r];
      b->prog_out[r] = b->user_out[r];
    }
  }
  free(poison);
  return res;
}

void post_finish(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g) {
  int es = ip_dtype_size[o->dtype];
  int reduces = p->coll == IR_COLL_ALLREDUCE || p->coll == IR_COLL_REDUCESCATTER;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_geom *gr = &g[r];
    if (b->span[r]) memcpy(b->user_out[r], b->prog_out[r], gr->elems[IR_BUF_OUTPUT] * es);
    unsigned char *out = b->span[r] || !b->inplace_call ? b->user_out[r] : b->prog_out[r];
    if (o->op == IP_OP_AVG && reduces) ip_divide(o->dtype, out, gr->elems[IR_BUF_OUTPUT], p->ngpus);
  }
}

void post_free(post_bufs *b, const ir_prog *p) {
  unsigned char **all[] = {b->user_in, b->user_out, b->ref_in, b->span};
  for (int i = 0; i < 4; i++) {
    if (!all[i]) continue;
    for (int r = 0; r < p->ngpus; r++) free(all[i][r]);
    free(all[i]);
  }
  free(b->prog_in);
  free(b->prog_out);
  for (int r = 0; b->opnd && r < p->ngpus; r++)
    for (int k = 0; k < IR_MAX_OPERANDS; k++) free((void *)b->opnd[r][k].data);
  free(b->opnd);
  for (int r = 0; b->ref_mag && r < p->ngpus; r++) free(b->ref_mag[r]);
  free(b->ref_mag);
  memset(b, 0, sizeof *b);
}

/* Where output chunk c of rank r must come from: *src_rank (-1 = reduced
 * over all ranks) and *src_chunk.  Returns 0 when nothing is required. */
static int source_of(const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g, int r, int c,
                     int inplace, int *src_rank, int *src_chunk, rt_diag *diag) {
  int k = g->k, n = p->ngpus;
  switch (p->coll) {
  case IR_COLL_ALLREDUCE: *src_rank = -1; *src_chunk = c; return 1;
  case IR_COLL_ALLGATHER: *src_rank = c / k; *src_chunk = c % k; return 1;
  case IR_COLL_REDUCESCATTER: *src_rank = -1; *src_chunk = r * k + c; return 1;
  case IR_COLL_ALLTOALL: *src_rank = c / k; *src_chunk = r * k + c % k; return 1;
  default: break;
  }
  int got = ir_expect_eval(o->expect, r, c, n, k, src_rank, src_chunk, diag);
  if (got == 0 && inplace) { *src_rank = r; *src_chunk = c; return 1; }  /* left alone */
  return got;
}

static int same(ip_dtype t, double want, double got) {
  if (ip_dtype_kind[t] != 'F') return want == got;
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  return fabs(want - got) <= ip_dtype_tolerance(t) * fmax(1.0, fabs(want));
}

bt_result post_check(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, int64_t *checked, rt_diag *diag) {
  int n = p->ngpus, es = ip_dtype_size[o->dtype];
  int bad = 0;
  const char *file = ir_prog_where(p);
  int64_t cap = g[0].cap;
  unsigned char *want = alloc_elems(cap, es);
  if (!want) return BT_ERR_NOMEM;
  *checked = 0;
  for (int r = 0; r < n; r++) {
    if (b->check_one && r != b->check_rank) continue;
    const ir_geom *gr = &g[r];
    unsigned char *out = b->inplace_call ? b->prog_out[r] : b->user_out[r];
    for (int c = 0; c < gr->chunks[IR_BUF_OUTPUT]; c++) {
      int sr, sc;
      int got = source_of(p, o, gr, r, c, inplace, &sr, &sc, diag);
      if (got < 0) { free(want); return BT_ERR_INVALID; }
      if (!got) continue;
      int exists = sr >= -1 && sr < n && sc >= 0;   /* a reduction's chunk on every rank */
      for (int q = sr < 0 ? 0 : sr; exists && q < (sr < 0 ? n : sr + 1); q++) exists = sc < g[q].chunks[IR_BUF_INPUT];
      if (!exists) {
        rt_diag_add(diag, "%s: expected result of rank %d output chunk %d is input chunk %d of rank %d, which does not exist",
                    file, r, c, sc, sr);
        free(want);
        return BT_ERR_INVALID;
      }
      int64_t len = ir_geom_len(gr, IR_BUF_OUTPUT, c);
      int64_t at = ir_geom_off(gr, IR_BUF_INPUT, sc);
      /* An input chunk at another place of its block may hold fewer valid
       * elements than the output chunk: the rest reads as zero. */
      int64_t lin = ir_geom_len(gr, IR_BUF_INPUT, sc);
      if (lin > len) lin = len;
      if (sr >= 0) {
        memcpy(want, b->ref_in[sr] + at * es, lin * es);
      } else {
        memcpy(want, b->ref_in[0] + at * es, lin * es);
        for (int q = 1; q < n; q++) ip_reduce(o->dtype, o->op, want, want, b->ref_in[q] + at * es, lin);
        if (o->op == IP_OP_AVG) ip_divide(o->dtype, want, lin, n);
      }
      for (int64_t e = lin; e < len; e++) ip_set(o->dtype, want, (size_t)e, 0);
      *checked += len;
      for (int64_t e = 0; e < len; e++) {
        double w = ip_get(o->dtype, want, e), v = ip_get(o->dtype, out, ir_geom_at(gr, IR_BUF_OUTPUT, c, e));
        if (b->fused) {   /* computed partials: within the tolerance of their magnitudes */
          double mag = 0;
          for (int q = sr < 0 ? 0 : sr; q < (sr < 0 ? n : sr + 1) && e < lin; q++) mag += b->ref_mag[q][at + e];
          if (fabs(v - w) <= ip_compute_tolerance(o->dtype, n, 0, mag)) continue;
        } else if (same(o->dtype, w, v)) {
          continue;
        }
        char from[64];
        if (sr < 0) snprintf(from, sizeof from, "the %s of input chunk %d over all ranks", ip_redop_name[o->op], sc);
        else snprintf(from, sizeof from, "input chunk %d of rank %d", sc, sr);
        rt_diag_add(diag, "%s: rank %d output chunk %d element %lld is %g, expected %g (%s)",
                    file, r, c, (long long)e, v, w, from);
        bad++;
        break;
      }
    }
    /* An out-of-place run must leave the caller's input as it was (a
     * fused program's input is its own). */
    if (!inplace && !b->fused) {
      for (int c = 0; c < gr->chunks[IR_BUF_INPUT]; c++) {
        int64_t off = ir_geom_off(gr, IR_BUF_INPUT, c), len = ir_geom_len(gr, IR_BUF_INPUT, c);
        if (memcmp(b->user_in[r] + off * es, b->ref_in[r] + off * es, len * es)) {
          rt_diag_add(diag, "%s: rank %d input chunk %d was overwritten by an out-of-place run", file, r, c);
          bad++;
        }
      }
    }
  }
  free(want);
  return bad ? BT_ERR_MISMATCH : BT_OK;
}
