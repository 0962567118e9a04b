/* ir_graph.c -- step graph in CSR form; topological order; vector clocks. */
#include "ir_graph.h"
#include "ir_direct.h"

#include <stdlib.h>
#include <string.h>

void ir_graph_free(ir_graph *g) {
  if (g->base) for (int r = 0; r < g->ngpus; r++) free(g->base[r]);
  free(g->base);
  free(g->node_r); free(g->node_t); free(g->node_s);
  free(g->succ_off); free(g->succ); free(g->kind);
  free(g->col); free(g->val); free(g->ncols); free(g->colbase);
  memset(g, 0, sizeof *g);
}

/* An edge of a direct program (a signal or a landing): from -> to. */
typedef struct dedge { long from, to; int kind; } dedge;
typedef struct dedges { dedge *v; long n, cap; } dedges;

static int dedge_push(dedges *d, long from, long to, int kind) {
  if (d->n == d->cap) {
    long cap = d->cap ? 2 * d->cap : 256;
    dedge *v = realloc(d->v, cap * sizeof *v);
    if (!v) return -1;
    d->v = v;
    d->cap = cap;
  }
  d->v[d->n++] = (dedge){from, to, kind};
  return 0;
}

static int dedge_cmp(const void *x, const void *y) {
  const dedge *a = x, *b = y;
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  if (a->to != b->to) return a->to < b->to ? -1 : 1;
  return a->kind - b->kind;
}

/* The signal edges of p into d: the k-th sig of each stream to the wait
 * whose cnt signals hold the k-th (the streams' sigs and waits merged in
 * one sorted pass).  A sig past the waits' signals has none (ir_check
 * refuses such a stream). */
static bt_result signal_edges(const ir_prog *p, const ir_graph *g, dedges *d) {
  ir_sigstep *sg = NULL, *wt = NULL;
  long ns = 0, nw = 0;
  bt_result res = ir_direct_streams(p, &sg, &ns, &wt, &nw);
  for (long i = 0, j = 0; !res && i < ns;) {
    ir_sigstep key = sg[i];
    while (j < nw && ir_stream_cmp(&wt[j], &key) < 0) j++;
    long w = j, through = 0;   /* wait w takes the stream's signals below `through` */
    if (w < nw && !ir_stream_cmp(&wt[w], &key)) through = wt[w].cnt;
    for (long k = 0; i < ns && !ir_stream_cmp(&sg[i], &key); i++, k++) {
      while (w < nw && !ir_stream_cmp(&wt[w], &key) && k >= through)
        if (++w < nw && !ir_stream_cmp(&wt[w], &key)) through += wt[w].cnt;
      if (w < nw && !ir_stream_cmp(&wt[w], &key) &&
          dedge_push(d, g->base[sg[i].r][sg[i].t] + sg[i].s, g->base[wt[w].r][wt[w].t] + wt[w].s, IR_EDGE_SIG)) {
        res = BT_ERR_NOMEM;
        break;
      }
    }
  }
  free(sg);
  free(wt);
  return res;
}

/* The landing edges of an LL program into d: each put to every step of
 * its peer with a local read of scratch (ir_side_reads_local) that
 * overlaps the put's landing; found by binary search in the sorted
 * landings, so the work is the steps' runs plus the edges. */
static bt_result landing_edges(const ir_prog *p, const ir_graph *g, dedges *d) {
  ir_landing *lv = NULL;
  long nl = 0;
  bt_result res = ir_direct_landings(p, &lv, &nl);
  for (int r = 0; !res && r < p->ngpus; r++)
    for (int t = 0; !res && t < p->gpus[r].ntbs; t++)
      for (int s = 0; !res && s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        unsigned fl = ir_op_flags[st->op];
        for (int k = 0; k < 2 && !res; k++) {
          if (!ir_side_reads_local(fl, k) || (k ? st->dstbuf : st->srcbuf) != IR_BUF_SCRATCH || st->cnt < 1) continue;
          for (int32_t i = 0; i < ir_side_nruns(st, k) && !res; i++) {
            int64_t lo, hi;
            ir_side_run(st, k, i, &lo, &hi);
            for (long j = ir_landing_first(lv, nl, r, lo, hi); j < nl && lv[j].owner == r && lv[j].lo < hi; j++)
              if (lv[j].hi > lo &&
                  dedge_push(d, g->base[lv[j].r][lv[j].t] + lv[j].s, g->base[r][t] + s, IR_EDGE_LAND)) {
                res = BT_ERR_NOMEM;
                break;
              }
          }
        }
      }
  free(lv);
  return res;
}

/* A direct program's edges (signals; landings in LL), sorted, each once. */
static bt_result direct_edges(const ir_prog *p, const ir_graph *g, dedges *d) {
  CHECK(signal_edges(p, g, d));
  if (ir_proto_landed(p->proto)) CHECK(landing_edges(p, g, d));
  if (d->n > 1) qsort(d->v, d->n, sizeof *d->v, dedge_cmp);
  long m = 0;
  for (long i = 0; i < d->n; i++)
    if (!m || dedge_cmp(&d->v[m - 1], &d->v[i])) d->v[m++] = d->v[i];
  d->n = m;
  return BT_OK;
}

/* Calls emit(v, w, kind) for every edge v -> w; d: a direct program's. */
static void edges(const ir_prog *p, const ir_peers *pe, int slots, const dedges *d, ir_graph *g,
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
        for (int k = 0; k < ir_step_ndeps(st); k++) {
          ir_dep d = ir_step_dep(st, k);
          if (d.tb >= 0 && d.tb < p->gpus[r].ntbs && d.step >= 0 && d.step < p->gpus[r].tbs[d.tb].nsteps)
            emit(g, g->base[r][d.tb] + d.step, v, IR_EDGE_DEP);
        }
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
  for (long i = 0; i < d->n; i++) emit(g, d->v[i].from, d->v[i].to, d->v[i].kind);
}

static void count_edge(ir_graph *g, long v, long w, int kind) { (void)w; (void)kind; g->succ_off[v + 1]++; }
static void fill_edge(ir_graph *g, long v, long w, int kind) {
  g->kind[g->succ_off[v]] = (unsigned char)kind;
  g->succ[g->succ_off[v]++] = w;
}

bt_result ir_graph_build(const ir_prog *p, const ir_peers *pe, int slots, ir_graph *g) {
  dedges d = {0};   /* a direct program's signal and landing edges */
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
  g->colbase = calloc(p->ngpus + 1, sizeof(int));
  if (!g->node_r || !g->node_t || !g->node_s || !g->succ_off || !g->col || !g->val || !g->ncols || !g->colbase)
    goto nomem;
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
    g->colbase[r + 1] = g->colbase[r] + extra;
  }
  if (ir_prog_direct(p) && direct_edges(p, g, &d)) goto nomem;
  edges(p, pe, slots, &d, g, count_edge);
  for (long v = 0; v < n; v++) g->succ_off[v + 1] += g->succ_off[v];
  g->succ = malloc((g->succ_off[n] + 1) * sizeof(long));
  g->kind = malloc(g->succ_off[n] + 1);
  if (!g->succ || !g->kind) goto nomem;
  edges(p, pe, slots, &d, g, fill_edge);   /* advances succ_off[v] to the end of v's list */
  for (long v = n; v > 0; v--) g->succ_off[v] = g->succ_off[v - 1];
  g->succ_off[0] = 0;
  free(d.v);
  return BT_OK;
nomem:
  free(d.v);
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

/* to[u] = max(to[u], from[u]) for u < nt: four columns at a time in
 * vector registers (the joins are nearly all of a race check's time). */
typedef int32_t clock4 __attribute__((vector_size(16)));
static void clocks_join(int32_t *restrict to, const int32_t *restrict from, int nt) {
  int u = 0;
  for (; u + 4 <= nt; u += 4) {
    clock4 a, b;
    memcpy(&a, to + u, sizeof a);
    memcpy(&b, from + u, sizeof b);
    clock4 less = a < b;
    a = (a & ~less) | (b & less);
    memcpy(to + u, &a, sizeof a);
  }
  for (; u < nt; u++)
    if (to[u] < from[u]) to[u] = from[u];
}

/* vc[v][k] = the largest value of a node of rank r's column k (every
 * rank's: r = -1) that happens before or at v, over the whole graph in
 * topological order.  A node no node of those columns happens before has
 * only zeros, and passes nothing on: such nodes are skipped (with one
 * rank's columns, the nodes of other ranks before its first message
 * reaches them). */
void ir_graph_clocks(const ir_graph *g, const long *order, int r, int32_t *vc) {
  int nt = r < 0 ? g->colbase[g->ngpus] : g->ncols[r];
  memset(vc, 0, (size_t)g->n * nt * sizeof *vc);
  unsigned char *reached = calloc(g->n + 1, 1);   /* without it, every node is joined */
  for (long i = 0; i < g->n; i++) {
    long v = order[i];
    int32_t *mine = vc + (size_t)v * nt;
    int own = r < 0 ? g->colbase[g->node_r[v]] + g->col[v] : g->node_r[v] == r ? g->col[v] : -1;
    if (own >= 0 && mine[own] < g->val[v]) mine[own] = g->val[v];
    if (reached && own < 0 && !reached[v]) continue;
    for (long e = g->succ_off[v]; e < g->succ_off[v + 1]; e++) {
      clocks_join(vc + (size_t)g->succ[e] * nt, mine, nt);
      if (reached) reached[g->succ[e]] = 1;
    }
  }
  free(reached);
}
