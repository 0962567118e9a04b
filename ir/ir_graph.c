/* ir_graph.c -- step graph in CSR form; topological order. */
#include "ir_graph.h"

#include <stdlib.h>
#include <string.h>

void ir_graph_free(ir_graph *g) {
  if (g->base) for (int r = 0; r < g->ngpus; r++) free(g->base[r]);
  free(g->base);
  free(g->node_r); free(g->node_t); free(g->node_s);
  free(g->succ_off); free(g->succ); free(g->kind);
  free(g->col); free(g->val); free(g->ncols);
  memset(g, 0, sizeof *g);
}

/* Calls emit(v, w, kind) for every edge v -> w. */
static void edges(const ir_prog *p, const ir_peers *pe, int slots, ir_graph *g,
                  void (*emit)(ir_graph *, long, long, int)) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      int u = tb->send >= 0 ? pe->send_tb[r][t] : -1;
      const ir_tb *rt = u >= 0 ? &p->gpus[tb->send].tbs[u] : NULL;
      int b = 0, b2 = 0;   /* the receive of message k, and of message k - slots */
      long k = 0;
      int ordered = !ir_tb_compute(tb);
      for (int s = 0; s < tb->nsteps; s++) {
        long v = g->base[r][t] + s;
        const ir_step *st = &tb->steps[s];
        if (ordered && s + 1 < tb->nsteps) emit(g, v, v + 1, IR_EDGE_ORDER);
        if (st->depid >= 0 && st->depid < p->gpus[r].ntbs && st->deps >= 0 &&
            st->deps < p->gpus[r].tbs[st->depid].nsteps)
          emit(g, g->base[r][st->depid] + st->deps, v, IR_EDGE_DEP);
        if (rt && (ir_op_flags[st->op] & IR_F_SEND)) {
          b = ir_tb_next(rt, b, IR_F_RECV);
          if (b < rt->nsteps) emit(g, v, g->base[tb->send][u] + b++, IR_EDGE_MSG);
          if (slots > 0 && k >= slots) {
            b2 = ir_tb_next(rt, b2, IR_F_RECV);
            if (b2 < rt->nsteps) emit(g, g->base[tb->send][u] + b2++, v, IR_EDGE_SLOT);
          }
          k++;
        }
      }
    }
}

static void count_edge(ir_graph *g, long v, long w, int kind) { (void)w; (void)kind; g->succ_off[v + 1]++; }
static void fill_edge(ir_graph *g, long v, long w, int kind) {
  g->kind[g->succ_off[v]] = (unsigned char)kind;
  g->succ[g->succ_off[v]++] = w;
}

bt_result ir_graph_build(const ir_prog *p, const ir_peers *pe, int slots, ir_graph *g) {
  memset(g, 0, sizeof *g);
  g->ngpus = p->ngpus;
  g->base = calloc(p->ngpus, sizeof *g->base);
  if (!g->base) return BT_ERR_NOMEM;
  long n = 0;
  for (int r = 0; r < p->ngpus; r++) {
    g->base[r] = malloc((p->gpus[r].ntbs + 1) * sizeof(long));
    if (!g->base[r]) goto nomem;
    for (int t = 0; t < p->gpus[r].ntbs; t++) { g->base[r][t] = n; n += p->gpus[r].tbs[t].nsteps; }
  }
  g->n = n;
  g->node_r = malloc((n + 1) * sizeof(int));
  g->node_t = malloc((n + 1) * sizeof(int));
  g->node_s = malloc((n + 1) * sizeof(int));
  g->succ_off = calloc(n + 2, sizeof(long));
  g->col = malloc((n + 1) * sizeof(int));
  g->val = malloc((n + 1) * sizeof(int));
  g->ncols = calloc(p->ngpus + 1, sizeof(int));
  if (!g->node_r || !g->node_t || !g->node_s || !g->succ_off || !g->col || !g->val || !g->ncols) goto nomem;
  for (int r = 0; r < p->ngpus; r++) {
    int extra = p->gpus[r].ntbs;   /* compute steps' own columns follow the tbs' */
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      int compute = ir_tb_compute(&p->gpus[r].tbs[t]);
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        long v = g->base[r][t] + s;
        g->node_r[v] = r; g->node_t[v] = t; g->node_s[v] = s;
        g->col[v] = compute ? extra++ : t;
        g->val[v] = compute ? 1 : s + 1;
      }
    }
    g->ncols[r] = extra;
  }
  edges(p, pe, slots, g, count_edge);
  for (long v = 0; v < n; v++) g->succ_off[v + 1] += g->succ_off[v];
  g->succ = malloc((g->succ_off[n] + 1) * sizeof(long));
  g->kind = malloc(g->succ_off[n] + 1);
  if (!g->succ || !g->kind) goto nomem;
  edges(p, pe, slots, g, fill_edge);   /* advances succ_off[v] to the end of v's list */
  for (long v = n; v > 0; v--) g->succ_off[v] = g->succ_off[v - 1];
  g->succ_off[0] = 0;
  return BT_OK;
nomem:
  ir_graph_free(g);
  return BT_ERR_NOMEM;
}

int ir_graph_topo(const ir_graph *g, long *order) {
  long n = g->n, head = 0, tail = 0;
  long *indeg = calloc(n + 1, sizeof(long));
  if (!indeg) return 0;
  for (long e = 0; e < g->succ_off[n]; e++) indeg[g->succ[e]]++;
  for (long v = 0; v < n; v++) if (!indeg[v]) order[tail++] = v;
  while (head < tail) {
    long v = order[head++];
    for (long e = g->succ_off[v]; e < g->succ_off[v + 1]; e++)
      if (--indeg[g->succ[e]] == 0) order[tail++] = g->succ[e];
  }
  if (tail < n) {
    for (long v = 0; v < n; v++) if (indeg[v]) { order[0] = v; break; }
  }
  free(indeg);
  return tail == n;
}

/* vc[v][k] = the largest value of a node of rank r's column k that
 * happens before or at v, over the whole graph in topological order. */
void ir_graph_clocks(const ir_graph *g, const long *order, int r, int32_t *vc) {
  int nt = g->ncols[r];
  memset(vc, 0, (size_t)g->n * nt * sizeof *vc);
  for (long i = 0; i < g->n; i++) {
    long v = order[i];
    int32_t *mine = vc + (size_t)v * nt;
    if (g->node_r[v] == r && mine[g->col[v]] < g->val[v]) mine[g->col[v]] = g->val[v];
    for (long e = g->succ_off[v]; e < g->succ_off[v + 1]; e++) {
      int32_t *theirs = vc + (size_t)g->succ[e] * nt;
      for (int u = 0; u < nt; u++) if (theirs[u] < mine[u]) theirs[u] = mine[u];
    }
  }
}
