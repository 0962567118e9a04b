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
      long at = b == IR_BUF_INPUT ? g->in_at : g->out_at;
      a.lo = at + ir_geom_off(g, b, off);
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

bt_result ir_check_races(const ir_prog *p, int aliased, rt_diag *diag) {
  long ntbs = ir_prog_ntbs(p), nsteps = ir_prog_nsteps(p);
  if (nsteps * ntbs > (64L << 20)) {
    LOG_INFO(RT_SUB_IR, "%s: race check skipped (%ld steps x %ld thread blocks)", ir_prog_where(p), nsteps, ntbs);
    return BT_OK;
  }
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  ir_graph g;
  bt_result res = ir_graph_build(p, &pe, 0, &g);   /* no slot edges: conservative, and true for any slot count */
  ir_peers_free(&pe);
  if (res) return res;
  long n = g.n;
  long *tbbase = malloc((p->ngpus + 1) * sizeof(long));   /* global tb index of (r, 0) */
  long *order = malloc((n + 1) * sizeof(long));
  int32_t *vc = calloc((size_t)(n ? n : 1) * ntbs, sizeof(int32_t));
  int races = 0;
  if (!tbbase || !order || !vc) { res = BT_ERR_NOMEM; goto out; }
  for (int r = 0, acc = 0; r < p->ngpus; r++) { tbbase[r] = acc; acc += p->gpus[r].ntbs; }
  if (!ir_graph_topo(&g, order)) goto out;   /* cycles are ir_check's to report */
  /* vc[v][u] = number of steps of tb u known to happen before or at v. */
  for (long i = 0; i < n; i++) {
    long v = order[i];
    int32_t *mine = vc + (size_t)v * ntbs;
    long me = tbbase[g.node_r[v]] + g.node_t[v];
    if (mine[me] < g.node_s[v] + 1) mine[me] = g.node_s[v] + 1;
    for (long e = g.succ_off[v]; e < g.succ_off[v + 1]; e++) {
      int32_t *theirs = vc + (size_t)g.succ[e] * ntbs;
      for (long u = 0; u < ntbs; u++) if (theirs[u] < mine[u]) theirs[u] = mine[u];
    }
  }
  for (int r = 0; r < p->ngpus && races < 8; r++) {
    const ir_gpu *gp = &p->gpus[r];
    ir_geom geom;
    if (ir_geom_init(&geom, p, r, 0, aliased)) continue;
    geom.count = geom.k;   /* one element per chunk: offsets are chunk indices */
    geom.cap = 1;
    for (int t = 0; t < gp->ntbs && races < 8; t++)
      for (int s = 0; s < gp->tbs[t].nsteps && races < 8; s++) {
        const ir_step *a = &gp->tbs[t].steps[s];
        access aa[2];
        int na = accesses(a, &geom, aliased, aa);
        if (!na) continue;
        long va = g.base[r][t] + s;
        for (int u = t + 1; u < gp->ntbs && races < 8; u++)
          for (int q = 0; q < gp->tbs[u].nsteps && races < 8; q++) {
            const ir_step *b = &gp->tbs[u].steps[q];
            access bb[2];
            int nb = accesses(b, &geom, aliased, bb);
            for (int i = 0; i < na; i++)
              for (int j = 0; j < nb; j++) {
                if (!(aa[i].write || bb[j].write) || aa[i].space != bb[j].space ||
                    aa[i].hi <= bb[j].lo || bb[j].hi <= aa[i].lo) continue;
                long vb = g.base[r][u] + q;
                if (vc[(size_t)vb * ntbs + tbbase[r] + t] >= s + 1) continue;   /* a before b */
                if (vc[(size_t)va * ntbs + tbbase[r] + u] >= q + 1) continue;   /* b before a */
                char x[48], y[48];
                rt_diag_add(diag, "%s:%d: rank %d: data race: tb %d step %d (%s) %s while tb %d step %d (%s) %s%s, and no dependency or message orders them",
                            ir_prog_where(p), a->line, r, t, s, ir_op_xml[a->op], what(a, x, sizeof x, aa[i].write),
                            u, q, ir_op_xml[b->op], what(b, y, sizeof y, bb[j].write),
                            aliased && aa[i].space == 0 && (aa[i].write ? a->dstbuf : a->srcbuf) != (bb[j].write ? b->dstbuf : b->srcbuf)
                                ? " (the same memory in place)" : "");
                races++;
                i = na; j = nb;  /* one report per pair of steps */
              }
          }
      }
  }
out:
  ir_graph_free(&g);
  free(tbbase); free(order); free(vc);
  if (res) return res;
  return races ? BT_ERR_INVALID : BT_OK;
}
