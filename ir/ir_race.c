/* ir_race.c -- data-race check with vector clocks over the step graph. */
#include "ir_check.h"
#include "ir_direct.h"
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

/* Range i of step st's source or destination (ir_side_nruns of them: one
 * per run of a strided pattern), in chunk positions of the address space
 * of the rank whose geometry g is (a direct step's remote side: its peer). */
static access range_of(const ir_step *st, const ir_geom *g, int aliased, int dst, long i) {
  int b = dst ? st->dstbuf : st->srcbuf;
  int64_t off, end;
  ir_side_run(st, dst, (int32_t)i, &off, &end);
  access a = {b, off, end, dst};
  if (aliased && b != IR_BUF_SCRATCH) {
    a.space = 0;                    /* with count = k, elements are chunks */
    a.lo = ir_geom_span_off(g, b, off);
    a.hi = a.lo + (end - off);
  }
  return a;
}

/* "reads i[2..3]" / "writes o[1]": side k of st (0 its source, 1 its
 * destination), in buf. */
static const char *what(const ir_step *st, char *buf, size_t n, int k, int write) {
  int b = k ? st->dstbuf : st->srcbuf, off = k ? st->dstoff : st->srcoff;
  int run = k ? st->dstrun : st->srcrun, stride = k ? st->dststride : st->srcstride;
  const char *verb = write ? "writes" : "reads";
  if (run > 0 && run < st->cnt)
    snprintf(buf, n, "%s %s[%d..%d %+d x%d]", verb, ir_buf_xml[b], off, off + run - 1, stride, (st->cnt + run - 1) / run);
  else if (st->cnt > 1) snprintf(buf, n, "%s %s[%d..%d]", verb, ir_buf_xml[b], off, off + st->cnt - 1);
  else snprintf(buf, n, "%s %s[%d]", verb, ir_buf_xml[b], off);
  return buf;
}

/* The race check's bounds: vector clocks of n steps x c columns, and
 * segment visits (each access walks the segments of its range, ir_check.h). */
#define RACE_MAX_CLOCKS IR_GRAPH_MAX_CLOCKS
#define RACE_MAX_VISITS (64L << 20)
/* Races, and reads of unproduced data, reported at most (each kind). */
#define RACE_MAX_REPORTS 8

/* One access to the memory of the rank being checked: node v (rank r --
 * another one for a direct step's remote side -- tb t, step s), k the
 * side (0 source, 1 destination), the segments [sa, sb) it covers,
 * whether it writes, and whether it must read produced data. */
typedef struct acc {
  long v, sa, sb, topo;
  int r, t, s, k, write, produce;
  access a;
} acc;

static int acc_cmp(const void *x, const void *y) {
  const acc *a = x, *b = y;
  if (a->topo != b->topo) return a->topo < b->topo ? -1 : 1;
  if (a->write != b->write) return a->write - b->write;   /* a step's reads before its writes */
  return a->k - b->k;
}

/* A segment endpoint: space and chunk position. */
typedef struct pt { long pos; int space; } pt;
static int pt_cmp(const void *x, const void *y) {
  const pt *a = x, *b = y;
  if (a->space != b->space) return a->space - b->space;
  return (a->pos > b->pos) - (a->pos < b->pos);
}
/* The first of the n sorted endpoints v not below want (binary search). */
static long pt_find(const pt *v, long n, pt want) {
  long lo = 0, hi = n;
  while (lo < hi) {
    long mid = lo + (hi - lo) / 2;
    if (pt_cmp(&v[mid], &want) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A read of a segment since its last write (a list through `next`). */
typedef struct rd { long acc; long next; } rd;

typedef struct race_state {
  const ir_prog *p;
  const ir_graph *g;
  const int32_t *vc;       /* clocks of rank r's columns, or of every rank's (full) */
  int r, aliased, fused, full;
  const long *roff, *rnode;   /* a direct program: the nodes rnode[roff[q] .. roff[q+1]) reach rank q's memory */
  ir_geom geom;
  rt_diag *diag;
  int races, unproduced;
  int skipped;             /* ranks not checked: over the limits */
  long pairs[RACE_MAX_REPORTS][2];     /* reported races (step nodes), not repeated */
  acc *acc;
} race_state;

/* Reports that x and y race (a pair once, at most RACE_MAX_REPORTS).  In
 * a direct program the steps may be on other ranks than the memory's: both
 * are named with their ranks. */
static void report_race(race_state *st, const acc *x, const acc *y) {
  if (x->r > y->r || (x->r == y->r && x->t > y->t)) { const acc *z = x; x = y; y = z; }   /* lower rank, tb first */
  for (int i = 0; i < st->races; i++)
    if (st->pairs[i][0] == x->v && st->pairs[i][1] == y->v) return;
  if (st->races >= RACE_MAX_REPORTS) return;
  st->pairs[st->races][0] = x->v;
  st->pairs[st->races][1] = y->v;
  st->races++;
  const ir_step *a = &st->p->gpus[x->r].tbs[x->t].steps[x->s], *b = &st->p->gpus[y->r].tbs[y->t].steps[y->s];
  char m1[64], m2[64], at[160];
  ir_step_where(st->p, a, at, sizeof at);
  const char *same = st->aliased && x->a.space == 0 &&
                     (x->k ? a->dstbuf : a->srcbuf) != (y->k ? b->dstbuf : b->srcbuf) ? " (the same memory in place)" : "";
  if (st->rnode)
    rt_diag_add(st->diag, "%s: rank %d: data race in its memory: rank %d tb %d step %d (%s) %s while rank %d tb %d "
                "step %d (%s) %s%s, and no dependency, signal or landing orders them", at, st->r, x->r, x->t, x->s,
                ir_op_xml[a->op], what(a, m1, sizeof m1, x->k, x->a.write), y->r, y->t, y->s,
                ir_op_xml[b->op], what(b, m2, sizeof m2, y->k, y->a.write), same);
  else
    rt_diag_add(st->diag, "%s: rank %d: data race: tb %d step %d (%s) %s while tb %d step %d (%s) %s%s, and no "
                "dependency or message orders them", at, st->r, x->t, x->s, ir_op_xml[a->op],
                what(a, m1, sizeof m1, x->k, x->a.write), y->t, y->s, ir_op_xml[b->op], what(b, m2, sizeof m2, y->k, y->a.write), same);
}

/* Whether node a happens before or at node v (a of rank r unless the
 * clocks are every rank's). */
static int before(const race_state *st, long a, long v) {
  return st->full ? ir_graph_before_all(st->g, st->vc, a, v) : ir_graph_before(st->g, st->vc, a, v);
}

/* x (earlier in topological order) and y touch a common segment, one
 * writing: a race unless they are one tb or x happens before y. */
static void pair(race_state *st, const acc *x, const acc *y) {
  if ((x->r == y->r && x->t == y->t) || before(st, x->v, y->v)) return;
  report_race(st, x, y);
}

/* Reports that x reads chunk position pos before any step ordered before
 * it wrote it (at most RACE_MAX_REPORTS). */
static void report_unproduced(race_state *st, const acc *x, long pos) {
  if (st->unproduced >= RACE_MAX_REPORTS) return;
  st->unproduced++;
  const ir_step *s = &st->p->gpus[x->r].tbs[x->t].steps[x->s];
  int b = x->k == 0 ? s->srcbuf : s->dstbuf;
  long c = pos - (st->aliased && b != IR_BUF_SCRATCH ? (b == IR_BUF_INPUT ? st->geom.in_at : st->geom.out_at) : 0);
  char whose[32] = "", at[160];   /* a direct step's read of its peer's memory */
  ir_step_where(st->p, s, at, sizeof at);
  if (x->r != st->r) snprintf(whose, sizeof whose, "rank %d's ", st->r);
  rt_diag_add(st->diag, "%s: rank %d tb %d step %d (%s): reads %s%s[%ld] before anything has produced it (no step "
              "that writes it is ordered before this one%s)", at, x->r, x->t, x->s,
              ir_op_xml[s->op], whose, ir_buf_xml[b], c, st->fused && b != IR_BUF_SCRATCH ? "; a fused program's input "
              "holds nothing until a compute step writes it" : "");
}

/* Rank r in one pass over its accesses in topological order, FastTrack's
 * way: each segment (a run of chunks no range boundary cuts) keeps its
 * last write and the reads since, one per column where they follow each
 * other.  A write must come after the last write and those reads; a read
 * after the last write (and, where data must be produced first -- scratch,
 * or any chunk of a fused program -- there must be one).  Writes of a
 * segment are ordered unless a race is reported, so the last one stands
 * for all: linear in the segments the accesses cover, not quadratic in
 * the accesses.  Returns BT_ERR_NOMEM, or BT_OK (also when skipped). */
/* The accesses of node `node` to the memory of rank st->r (its own
 * rank's sides, or a direct step's remote side) into v[*m ..], *m
 * advanced; with v NULL, *m grows by a bound on their number instead. */
static void node_accesses(race_state *st, long node, const long *topo, acc *v, long *m) {
  const ir_graph *g = st->g;
  int sr = g->node_r[node], t = g->node_t[node], s = g->node_s[node];
  const ir_step *x = &st->p->gpus[sr].tbs[t].steps[s];
  unsigned fl = ir_op_flags[x->op];
  for (int k = 0; k < 2; k++) {   /* k: 0 the source, 1 the destination */
    if (ir_side_rank(x, sr, k) != st->r) continue;
    if (!v) { *m += 2 * (long)ir_side_nruns(x, k); continue; }   /* a written side may add its read half */
    int rmw = ir_side_rmw(fl, k);   /* a reduction's destination (re, getr), either side of an xchg: read, then written */
    for (int32_t i = 0; i < ir_side_nruns(x, k); i++) {
      access a = range_of(x, &st->geom, st->aliased, k, i);
      a.write |= rmw;   /* an xchg's source is written too */
      if (a.hi <= a.lo) continue;
      /* reads that need a producer: sources, and a read-then-written side (it reads it too) */
      int reads = !a.write || rmw;
      int produce = reads && (st->fused || a.space == IR_BUF_SCRATCH);
      if (a.write && produce) {   /* the read half of a reduce's destination, for the producer check */
        access rdh = a;
        rdh.write = 0;
        v[(*m)++] = (acc){node, 0, 0, topo[node], sr, t, s, k, 0, 2, rdh};
      }
      v[(*m)++] = (acc){node, 0, 0, topo[node], sr, t, s, k, a.write, a.write ? 0 : produce, a};
    }
  }
}

/* node_accesses of every step that reaches rank st->r's memory: its own,
 * and in a direct program the other ranks' that reach it (st->rnode). */
static void rank_accesses(race_state *st, const long *topo, acc *v, long *m) {
  const ir_gpu *gp = &st->p->gpus[st->r];
  for (int t = 0; t < gp->ntbs; t++)
    for (int s = 0; s < gp->tbs[t].nsteps; s++) node_accesses(st, st->g->base[st->r][t] + s, topo, v, m);
  if (st->rnode)
    for (long i = st->roff[st->r]; i < st->roff[st->r + 1]; i++) node_accesses(st, st->rnode[i], topo, v, m);
}

static bt_result check_rank(race_state *st, const long *topo) {
  const ir_prog *p = st->p;
  if (ir_geom_chunks(&st->geom, p, st->r, st->aliased)) return BT_OK;
  long n = 0;
  rank_accesses(st, topo, NULL, &n);
  if (n > RACE_MAX_VISITS) {
    LOG_INFO(RT_SUB_IR, "%s: race check of rank %d skipped (its steps make %ld ranges, over %ld)", ir_prog_where(p),
             st->r, n, RACE_MAX_VISITS);
    st->skipped++;
    return BT_OK;
  }
  acc *v = malloc((n + 1) * sizeof *v);
  pt *e = malloc((2 * n + 1) * sizeof *e);
  long *last = NULL, *first = NULL, *head = NULL;
  rd *pool = NULL;
  long npool = 0, cappool = 0, freel = -1, m = 0;
  bt_result res = BT_ERR_NOMEM;
  if (!v || !e) goto out;
  rank_accesses(st, topo, v, &m);
  long ne = 0;
  for (long i = 0; i < m; i++) {
    e[ne++] = (pt){v[i].a.lo, v[i].a.space};
    e[ne++] = (pt){v[i].a.hi, v[i].a.space};
  }
  qsort(e, ne, sizeof *e, pt_cmp);
  long nseg = 0;
  for (long i = 0; i < ne; i++)
    if (!nseg || pt_cmp(&e[nseg - 1], &e[i])) e[nseg++] = e[i];
  long visits = 0;
  for (long i = 0; i < m; i++) {
    v[i].sa = pt_find(e, nseg, (pt){v[i].a.lo, v[i].a.space});
    v[i].sb = pt_find(e, nseg, (pt){v[i].a.hi, v[i].a.space});
    visits += v[i].sb - v[i].sa;
  }
  if (visits > RACE_MAX_VISITS) {
    LOG_INFO(RT_SUB_IR, "%s: race check of rank %d skipped (its steps' ranges cover %ld segments, over %ld)",
             ir_prog_where(p), st->r, visits, RACE_MAX_VISITS);
    st->skipped++;
    res = BT_OK;
    goto out;
  }
  if (m > 1) qsort(v, m, sizeof *v, acc_cmp);
  last = malloc((nseg + 1) * sizeof *last);
  first = malloc((nseg + 1) * sizeof *first);
  head = malloc((nseg + 1) * sizeof *head);
  if (!last || !first || !head) goto out;
  for (long j = 0; j < nseg; j++) last[j] = first[j] = head[j] = -1;
  for (long i = 0; i < m && (st->races < RACE_MAX_REPORTS || st->unproduced < RACE_MAX_REPORTS); i++) {
    const acc *x = &v[i];
    int missing = 0;
    for (long j = x->sa; j < x->sb; j++) {
      const acc *w = last[j] >= 0 ? &v[last[j]] : NULL;
      /* Produced: the segment's first write happens before the read.
       * Writes of a segment are ordered (or a race is reported), so the
       * writes before the read are a prefix of them: the first decides. */
      if (x->produce && !missing &&
          (first[j] < 0 || !before(st, v[first[j]].v, x->v))) {
        report_unproduced(st, x, e[j].pos);
        missing = 1;
      }
      if (x->produce == 2) continue;   /* only the producer check (a reduce's destination) */
      if (!x->write) {
        if (w) pair(st, w, x);
        long h = head[j];
        if (h >= 0 && v[pool[h].acc].r == x->r && v[pool[h].acc].t == x->t &&
            st->g->col[v[pool[h].acc].v] == st->g->col[x->v]) {
          pool[h].acc = i;     /* the same column: the later read stands for both */
          continue;
        }
        long f = freel;
        if (f >= 0) freel = pool[f].next;
        else {
          if (npool == cappool) {
            long nc = cappool ? 2 * cappool : 1024;
            rd *np = realloc(pool, nc * sizeof *np);
            if (!np) goto out;
            pool = np;
            cappool = nc;
          }
          f = npool++;
        }
        pool[f] = (rd){i, h};
        head[j] = f;
      } else {
        if (w) pair(st, w, x);
        long h = head[j];
        while (h >= 0) {
          long nx = pool[h].next;
          pair(st, &v[pool[h].acc], x);
          pool[h].next = freel;
          freel = h;
          h = nx;
        }
        head[j] = -1;
        last[j] = i;
        if (first[j] < 0) first[j] = i;
      }
    }
  }
  res = BT_OK;
out:
  free(v); free(e); free(last); free(first); free(head); free(pool);
  return res;
}

/* A direct program's remote accesses by the rank they reach: the nodes
 * of the steps whose remote side (a put's destination, a get's source)
 * is in rank q's memory are rnode[roff[q] .. roff[q + 1]). */
static bt_result remote_nodes(const ir_prog *p, const ir_graph *g, long **roff, long **rnode) {
  *roff = calloc(p->ngpus + 2, sizeof **roff);
  *rnode = NULL;
  if (!*roff) return BT_ERR_NOMEM;
  long *at = *roff + 1;   /* counts, then where each rank's nodes go */
  for (int pass = 0; pass < 2; pass++) {
    for (int r = 0; r < p->ngpus; r++)
      for (int t = 0; t < p->gpus[r].ntbs; t++)
        for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
          const ir_step *st = &p->gpus[r].tbs[t].steps[s];
          if (!(ir_op_flags[st->op] & (IR_F_PUT | IR_F_GET)) || !ir_peer_ok(p, r, st)) continue;
          if (pass) (*rnode)[at[st->peer]++] = g->base[r][t] + s;
          else at[st->peer + 1]++;
        }
    if (pass) break;
    for (int q = 0; q < p->ngpus; q++) at[q + 1] += at[q];   /* at[q]: where rank q's nodes begin */
    if (!(*rnode = malloc((at[p->ngpus] + 1) * sizeof **rnode))) return BT_ERR_NOMEM;
  }
  return BT_OK;   /* at[q] = (*roff)[q + 1]: the end of rank q's nodes, the start of q + 1's */
}

bt_result ir_check_races(const ir_prog *p, int aliased, rt_diag *diag) {
  return ir_check_races_of(p, aliased, NULL, diag);
}

bt_result ir_check_races_of(const ir_prog *p, int aliased, int *unchecked, rt_diag *diag) {
  if (unchecked) *unchecked = 0;
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  ir_graph g;
  bt_result res = ir_graph_build(p, &pe, 0, &g);   /* no slot edges: conservative, and true for any slot count */
  ir_peers_free(&pe);
  if (res) return res;
  long n = g.n, *order = malloc((n + 1) * sizeof(long)), *topo = malloc((n + 1) * sizeof(long));
  int32_t *vc = NULL;
  long *roff = NULL, *rnode = NULL;
  size_t vccap = 0;
  int sorted = 0, clocked = 0;
  /* A direct program's steps reach other ranks' memory: its accesses are
   * ordered by the clocks of every rank's columns, computed once. */
  race_state st = {.p = p, .g = &g, .aliased = aliased, .fused = ir_prog_fused(p), .full = ir_prog_direct(p),
                   .diag = diag};
  if (!order || !topo) { res = BT_ERR_NOMEM; goto out; }
  if (st.full) {
    if ((res = remote_nodes(p, &g, &roff, &rnode))) goto out;
    st.roff = roff;
    st.rnode = rnode;
  }
  for (int r = 0; r < p->ngpus && st.races < RACE_MAX_REPORTS && st.unproduced < RACE_MAX_REPORTS; r++) {
    int nt = st.full ? g.colbase[p->ngpus] : g.ncols[r];
    if ((size_t)n * nt > (size_t)RACE_MAX_CLOCKS) {
      if (st.full) {
        LOG_INFO(RT_SUB_IR, "%s: race check skipped (%ld steps x %d thread blocks of all ranks)", ir_prog_where(p), n, nt);
        st.skipped = p->ngpus - r;
        break;
      }
      LOG_INFO(RT_SUB_IR, "%s: race check of rank %d skipped (%ld steps x %d thread blocks)", ir_prog_where(p), r, n, nt);
      st.skipped++;
      continue;
    }
    if (!sorted) {
      if (!ir_graph_topo(&g, order)) goto out;   /* cycles are ir_check's to report */
      for (long i = 0; i < n; i++) topo[order[i]] = i;
      sorted = 1;
    }
    if (!vc || (size_t)n * nt > vccap) {   /* allocated even for none: memset(NULL, 0, 0) is undefined */
      free(vc);
      vccap = (size_t)n * nt;
      vc = malloc((vccap + 1) * sizeof *vc);
      if (!vc) { res = BT_ERR_NOMEM; goto out; }
    }
    if (!clocked) ir_graph_clocks(&g, order, st.full ? -1 : r, vc);
    clocked = st.full;
    st.vc = vc;
    st.r = r;
    if ((res = check_rank(&st, topo))) goto out;
  }
out:
  ir_graph_free(&g);
  free(order); free(topo); free(vc); free(roff); free(rnode);
  if (unchecked) *unchecked = st.skipped;
  if (res) return res;
  return st.races || st.unproduced ? BT_ERR_INVALID : BT_OK;
}

int ir_prog_inplace_as_is(const ir_prog *p) {
  if (p->inplace) return 1;
  if (p->coll != IR_COLL_ALLTOALL) return 0;
  rt_diag *quiet = rt_diag_new(1);
  int unchecked = 0;
  int ok = quiet && ir_check_races_of(p, 1, &unchecked, quiet) == BT_OK && !unchecked;
  rt_diag_free(quiet);
  return ok;
}
