/* ir_race.c -- data-race check with vector clocks over the step graph. */
#include "ir_check.h"
#include "ir_geom.h"
#include "ir_graph.h"
#include "rt_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A chunk range in one address space of a rank: space 0 is i (and o when
 * aliased), 1 is o, 2 is scratch; positions are chunk indices of the
 * aliased span, so allgather's i[0] and o[rank] coincide. */
typedef struct access { int space; long lo, hi; int write; } access;

static int accesses(const ir_step *st, const ir_geom *g, int aliased, access out[2]) {
  unsigned fl = ir_op_flags[st->op];
  int n = 0;
  for (int k = 0; k < 2; k++) {
    int is_dst = k == 1;
    if (!(fl & (is_dst ? IR_F_DST : IR_F_SRC))) continue;
    int b = is_dst ? st->dstbuf : st->srcbuf;
    long off = is_dst ? st->dstoff : st->srcoff;
    access a = {b, off, off + st->cnt, is_dst};
    if (aliased && b != IR_BUF_SCRATCH) {
      a.space = 0;                    /* with count = k, elements are chunks */
      a.lo = ir_geom_span_off(g, b, off);
      a.hi = a.lo + st->cnt;
    }
    out[n++] = a;
  }
  return n;
}

static const char *what(const ir_step *st, char *buf, size_t n, int write) {
  int b = write ? st->dstbuf : st->srcbuf, off = write ? st->dstoff : st->srcoff;
  if (st->cnt > 1) snprintf(buf, n, "%s %s[%d..%d]", write ? "writes" : "reads", ir_buf_xml[b], off, off + st->cnt - 1);
  else snprintf(buf, n, "%s %s[%d]", write ? "writes" : "reads", ir_buf_xml[b], off);
  return buf;
}

/* One chunk range a step touches, for the sweep. */
typedef struct iv { long lo, hi; int space, write, t, s, k; } iv;
/* Two steps of different tbs touching a common chunk, one writing; t < u;
 * ka / kb: which access of each (0 source, 1 destination) overlaps. */
typedef struct cand { int t, s, ka, u, q, kb; } cand;

static int iv_cmp(const void *x, const void *y) {
  const iv *a = x, *b = y;
  if (a->space != b->space) return a->space - b->space;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static int cand_cmp(const void *x, const void *y) {
  const cand *a = x, *b = y;
  int d[] = {a->t - b->t, a->s - b->s, a->u - b->u, a->q - b->q, a->ka - b->ka, a->kb - b->kb};
  for (int i = 0; i < 6; i++) if (d[i]) return d[i];
  return 0;
}

/* Candidates of rank r: pairs of overlapping accesses (a sweep over the
 * ranges sorted by start), one pair per two steps.  Returns the count, -1
 * when out of memory; *out is malloc'ed. */
static long candidates(const ir_prog *p, int r, int aliased, cand **out) {
  const ir_gpu *gp = &p->gpus[r];
  ir_geom geom;
  *out = NULL;
  if (ir_geom_chunks(&geom, p, r, aliased)) return 0;
  long n = 0, m = 0, capc = 0;
  for (int t = 0; t < gp->ntbs; t++) n += 2L * gp->tbs[t].nsteps;
  iv *v = malloc((n + 1) * sizeof *v);
  if (!v) return -1;
  n = 0;
  for (int t = 0; t < gp->ntbs; t++)
    for (int s = 0; s < gp->tbs[t].nsteps; s++) {
      const ir_step *st = &gp->tbs[t].steps[s];
      access a[2];
      int na = accesses(st, &geom, aliased, a);
      for (int i = 0; i < na; i++)
        v[n++] = (iv){a[i].lo, a[i].hi, a[i].space, a[i].write, t, s, na == 2 ? i : a[i].write};
    }
  qsort(v, n, sizeof *v, iv_cmp);
  cand *c = NULL;
  for (long i = 0; i < n; i++)
    for (long j = i + 1; j < n && v[j].space == v[i].space && v[j].lo < v[i].hi; j++) {
      const iv *a = &v[i], *b = &v[j];
      if (a->t == b->t || !(a->write || b->write)) continue;
      if (a->t > b->t) { const iv *x = a; a = b; b = x; }
      if (m == capc) {
        capc = capc ? 2 * capc : 64;
        cand *nc = realloc(c, capc * sizeof *nc);
        if (!nc) { free(c); free(v); return -1; }
        c = nc;
      }
      c[m++] = (cand){a->t, a->s, a->k, b->t, b->s, b->k};
    }
  free(v);
  qsort(c, m, sizeof *c, cand_cmp);
  long k = 0;   /* keep the first (lowest access pair) per two steps */
  for (long i = 0; i < m; i++)
    if (!k || c[k - 1].t != c[i].t || c[k - 1].s != c[i].s || c[k - 1].u != c[i].u || c[k - 1].q != c[i].q)
      c[k++] = c[i];
  *out = c;
  return k;
}

/* Reads of chunks nothing has produced before them, on rank r (whose
 * clocks vc holds): a read (a source, or a reduce's destination) of a
 * scratch chunk, or in a fused program of any chunk (its input is
 * computed, not given), needs a step that writes the chunk ordered before
 * it.  Each one goes to diag (up to the cap in *found). */
static bt_result check_produced(const ir_prog *p, int r, int aliased, const ir_graph *g, const int32_t *vc,
                                rt_diag *diag, int *found) {
  const ir_gpu *gp = &p->gpus[r];
  int fused = ir_prog_fused(p);
  ir_geom geom;
  if (ir_geom_chunks(&geom, p, r, aliased)) return BT_OK;
  long nw = 0;
  for (int t = 0; t < gp->ntbs; t++) nw += gp->tbs[t].nsteps;
  iv *w = malloc((nw + 1) * sizeof *w);
  if (!w) return BT_ERR_NOMEM;
  nw = 0;
  for (int t = 0; t < gp->ntbs; t++)
    for (int s = 0; s < gp->tbs[t].nsteps; s++) {
      access a[2];
      int na = accesses(&gp->tbs[t].steps[s], &geom, aliased, a);
      for (int i = 0; i < na; i++)
        if (a[i].write) w[nw++] = (iv){a[i].lo, a[i].hi, a[i].space, 1, t, s, 1};
    }
  for (int t = 0; t < gp->ntbs && *found < 8; t++)
    for (int s = 0; s < gp->tbs[t].nsteps && *found < 8; s++) {
      const ir_step *st = &gp->tbs[t].steps[s];
      access a[2];
      int na = accesses(st, &geom, aliased, a);
      unsigned fl = ir_op_flags[st->op];
      if ((fl & IR_F_RED) && !(fl & IR_F_RECV) && na == 2) {   /* REDUCE reads its destination too */
        a[1].write = 0;
        na = 2;
      } else if (na == 2) {
        na = 1;   /* a[0] is the source */
      }
      long v = g->base[r][t] + s;
      for (int i = 0; i < na; i++) {
        if (a[i].write || (!fused && a[i].space != IR_BUF_SCRATCH)) continue;   /* a plain program's i and o are given */
        for (long x = a[i].lo; x < a[i].hi; x++) {
          int ok = 0;
          for (long k = 0; k < nw && !ok; k++)
            ok = w[k].space == a[i].space && w[k].lo <= x && x < w[k].hi && !(w[k].t == t && w[k].s == s) &&
                 ir_graph_before(g, vc, g->base[r][w[k].t] + w[k].s, v);
          if (ok) continue;
          int b = i == 0 && (fl & IR_F_SRC) ? st->srcbuf : st->dstbuf;
          long c = x - (aliased && b != IR_BUF_SCRATCH ? (b == IR_BUF_INPUT ? geom.in_at : geom.out_at) : 0);
          rt_diag_add(diag, "%s:%d: rank %d tb %d step %d (%s): reads %s[%ld] before anything has produced it (no step "
                      "that writes it is ordered before this one%s)", ir_prog_where(p), st->line, r, t, s,
                      ir_op_xml[st->op], ir_buf_xml[b], c, fused && b != IR_BUF_SCRATCH ? "; a fused program's input "
                      "holds nothing until a compute step writes it" : "");
          (*found)++;
          break;
        }
      }
    }
  free(w);
  return BT_OK;
}

bt_result ir_check_races(const ir_prog *p, int aliased, rt_diag *diag) {
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  ir_graph g;
  bt_result res = ir_graph_build(p, &pe, 0, &g);   /* no slot edges: conservative, and true for any slot count */
  ir_peers_free(&pe);
  if (res) return res;
  long n = g.n, *order = malloc((n + 1) * sizeof(long));
  int32_t *vc = NULL;
  size_t vccap = 0;
  int races = 0, sorted = 0, unproduced = 0;
  if (!order) { res = BT_ERR_NOMEM; goto out; }
  for (int r = 0; r < p->ngpus && races < 8 && unproduced < 8; r++) {
    cand *c;
    long nc = candidates(p, r, aliased, &c);
    if (nc < 0) { res = BT_ERR_NOMEM; goto out; }
    const ir_gpu *gp = &p->gpus[r];
    int nt = g.ncols[r];
    if ((size_t)n * nt > (64UL << 20)) {
      LOG_INFO(RT_SUB_IR, "%s: race check of rank %d skipped (%ld steps x %d thread blocks)", ir_prog_where(p), r, n, nt);
      free(c);
      continue;
    }
    if (!sorted) {
      if (!ir_graph_topo(&g, order)) { free(c); goto out; }   /* cycles are ir_check's to report */
      sorted = 1;
    }
    if ((size_t)n * nt > vccap) {
      free(vc);
      vccap = (size_t)n * nt;
      vc = malloc((vccap + 1) * sizeof *vc);
      if (!vc) { free(c); res = BT_ERR_NOMEM; goto out; }
    }
    ir_graph_clocks(&g, order, r, vc);
    res = check_produced(p, r, aliased, &g, vc, diag, &unproduced);
    if (res) { free(c); goto out; }
    for (long i = 0; i < nc && races < 8; i++) {
      int t = c[i].t, s = c[i].s, u = c[i].u, q = c[i].q;
      long va = g.base[r][t] + s, vb = g.base[r][u] + q;
      if (ir_graph_before(&g, vc, va, vb) || ir_graph_before(&g, vc, vb, va)) continue;
      const ir_step *a = &gp->tbs[t].steps[s], *b = &gp->tbs[u].steps[q];
      ir_geom geom;
      ir_geom_chunks(&geom, p, r, aliased);
      access aa[2], bb[2];
      int na = accesses(a, &geom, aliased, aa), nb = accesses(b, &geom, aliased, bb);
      const access *x = &aa[na == 2 ? c[i].ka : 0], *y = &bb[nb == 2 ? c[i].kb : 0];
      char m1[48], m2[48];
      rt_diag_add(diag, "%s:%d: rank %d: data race: tb %d step %d (%s) %s while tb %d step %d (%s) %s%s, and no dependency or message orders them",
                  ir_prog_where(p), a->line, r, t, s, ir_op_xml[a->op], what(a, m1, sizeof m1, x->write),
                  u, q, ir_op_xml[b->op], what(b, m2, sizeof m2, y->write),
                  aliased && x->space == 0 && (x->write ? a->dstbuf : a->srcbuf) != (y->write ? b->dstbuf : b->srcbuf)
                      ? " (the same memory in place)" : "");
      races++;
    }
    free(c);
  }
out:
  ir_graph_free(&g);
  free(order); free(vc);
  if (res) return res;
  return races || unproduced ? BT_ERR_INVALID : BT_OK;
}
