/* ir_check_direct.c -- the validator's rules for direct programs (put, get, getr, xchg, sig, wait); their
 * streams and landings: ir_direct.c. */
#include "ir_direct.h"
#include "ir_check_int.h"
#include "rt_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation ---- */

/* "s[2]" or "s[2..3]": chunks [lo, hi) of buffer b. */
static const char *chunk_text(char *buf, size_t n, int b, int64_t lo, int64_t hi) {
  if (hi - lo <= 1) snprintf(buf, n, "%s[%lld]", ir_buf_xml[b], (long long)lo);
  else snprintf(buf, n, "%s[%lld..%lld]", ir_buf_xml[b], (long long)lo, (long long)hi - 1);
  return buf;
}

/* "o[1]", "i[0..3]", or a strided "s[0..1 +4 x3]": the chunks side k of st names. */
static const char *side_text(char *buf, size_t n, const ir_step *st, int k) {
  int b = k ? st->dstbuf : st->srcbuf, off = k ? st->dstoff : st->srcoff;
  int run = k ? st->dstrun : st->srcrun, stride = k ? st->dststride : st->srcstride;
  if (run > 0 && run < st->cnt)
    snprintf(buf, n, "%s[%d..%d %+d x%d]", ir_buf_xml[b], off, off + run - 1, stride, (st->cnt + run - 1) / run);
  else return chunk_text(buf, n, b, off, (int64_t)off + st->cnt);
  return buf;
}

/* Each direct step: its peer another rank, its cnt (a sig one signal, a
 * wait at least one), and its remote chunks inside the peer's buffers (the
 * peer's geometry; the local side is check_steps's).  Returns 1 when some
 * peer is not a rank: the rules that follow index ranks by it. */
static int check_peers(ir_checker *c, const ir_geom *geom) {
  const ir_prog *p = c->p;
  int bad = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        unsigned fl = ir_op_flags[st->op];
        const char *op = ir_op_xml[st->op];
        if (!(fl & IR_F_DIRECT)) continue;
        if (!ir_peer_ok(p, r, st)) {
          ir_check_err(c, r, t, s, "%s: peer %d is not another rank in [0, %d)", op, st->peer, p->ngpus);
          bad = 1;
          continue;
        }
        if ((fl & IR_F_SIG) && st->cnt != 1)
          ir_check_err(c, r, t, s, "sig has cnt=%d; a sig is one signal (cnt=1)", st->cnt);
        if ((fl & IR_F_WAIT) && st->cnt < 1)
          ir_check_err(c, r, t, s, "wait has cnt=%d; it waits for at least one signal", st->cnt);
        if (st->cnt < 1) continue;   /* a put's or get's: check_steps */
        if (fl & IR_F_PUT)
          ir_check_range(c, r, t, s, "destination", st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride,
                         &geom[st->peer], st->peer);
        if (fl & IR_F_GET)
          ir_check_range(c, r, t, s, "source", st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride,
                         &geom[st->peer], st->peer);
      }
  return bad;
}

/* What a direct program holds: no FIFO step and no compute step (one
 * report per thread block, naming a direct step of the program), the
 * Simple, LL or LL128 protocol, and in LL and LL128 only put, cpy, re,
 * nop, sig and wait, each put into its peer's scratch. */
static void check_kind(ir_checker *c) {
  const ir_prog *p = c->p;
  int dr = -1, dt = -1, ds = -1;   /* the first direct step */
  for (int r = 0; r < p->ngpus && dr < 0; r++)
    for (int t = 0; t < p->gpus[r].ntbs && dr < 0; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps && dr < 0; s++)
        if (ir_op_direct(p->gpus[r].tbs[t].steps[s].op)) { dr = r; dt = t; ds = s; }
  if (dr < 0) return;
  const char *first = ir_op_xml[p->gpus[dr].tbs[dt].steps[ds].op], *proto = ir_proto_name[p->proto];
  int ll = ir_proto_landed(p->proto);
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      for (int s = 0; s < tb->nsteps; s++) {
        const ir_step *st = &tb->steps[s];
        unsigned fl = ir_op_flags[st->op];
        const char *op = ir_op_xml[st->op];
        if (fl & (IR_F_SEND | IR_F_RECV | IR_F_COMP)) {
          int fifo = (fl & (IR_F_SEND | IR_F_RECV)) != 0;
          ir_check_err(c, r, t, s, "%s is a %s step, but rank %d tb %d step %d is a %s: direct programs have no %s", op,
                   fifo ? "FIFO" : "compute", dr, dt, ds, first,
                   fifo ? "FIFO steps (s, r, rcs, rrc, rrs, rrcs)" : "compute steps");
          break;
        }
        if (!ll) continue;
        if (st->op == IR_OP_GET || st->op == IR_OP_GETR || st->op == IR_OP_XCHG)
          ir_check_err(c, r, t, s, "%s in a direct %s program: it has only put, cpy, re, nop, sig and wait steps (get, "
                   "getr and xchg are Simple's)", op, proto);
        else if (st->op == IR_OP_PUT && st->dstbuf != IR_BUF_SCRATCH && ir_peer_ok(p, r, st))
          ir_check_err(c, r, t, s, "put into rank %d's %s: in a direct %s program a put lands in its peer's scratch "
                   "(dstbuf s)", st->peer, ir_buf_xml[st->dstbuf], proto);
      }
    }
}

/* The sigs (sig 1) or waits of each stream in v[0..n) (sorted by stream,
 * then tb): all in one thread block; the first one elsewhere is named. */
static void one_tb(ir_checker *c, const ir_sigstep *v, long n, int sig) {
  for (long i = 1, first = 0, told = 0; i < n; i++) {
    if (ir_stream_cmp(&v[i], &v[first])) { first = i; told = 0; continue; }
    if (v[i].t == v[first].t || told) continue;
    told = 1;
    if (sig)
      ir_check_err(c, v[i].r, v[i].t, v[i].s, "sig to rank %d on channel %d, but tb %d signals rank %d on channel %d "
               "too: the sigs of a stream (rank pair and channel) are in one thread block", v[i].to, v[i].chan,
               v[first].t, v[i].to, v[i].chan);
    else
      ir_check_err(c, v[i].r, v[i].t, v[i].s, "wait for rank %d on channel %d, but tb %d waits for rank %d on channel "
               "%d too: the waits of a stream (rank pair and channel) are in one thread block", v[i].from, v[i].chan,
               v[first].t, v[i].from, v[i].chan);
  }
}

/* Signal streams: each one's sigs in one thread block of its sender, its
 * waits in one of its receiver, and as many sigs as the waits' cnt add up
 * to (a sorted merge of the sigs and the waits). */
static void check_streams(ir_checker *c) {
  ir_sigstep *sg = NULL, *wt = NULL;
  long ns = 0, nw = 0;
  if (ir_direct_streams(c->p, &sg, &ns, &wt, &nw)) {
    ir_check_err(c, -1, -1, -1, "out of memory");
    goto out;
  }
  one_tb(c, sg, ns, 1);
  one_tb(c, wt, nw, 0);
  for (long i = 0, j = 0; i < ns || j < nw;) {
    ir_sigstep key = j >= nw || (i < ns && ir_stream_cmp(&sg[i], &wt[j]) <= 0) ? sg[i] : wt[j];
    long a = i, b = j, nsig = 0, take = 0;
    for (; i < ns && !ir_stream_cmp(&sg[i], &key); i++) nsig++;
    for (; j < nw && !ir_stream_cmp(&wt[j], &key); j++) take += wt[j].cnt;
    if (nsig == take) continue;
    if (nsig)
      ir_check_err(c, sg[a].r, sg[a].t, sg[a].s, "%ld sig%s to rank %d on channel %d, but rank %d's waits for rank %d on "
               "channel %d take %ld: a stream's waits take as many signals as it carries", nsig, nsig == 1 ? "" : "s",
               key.to, key.chan, key.to, key.from, key.chan, take);
    else
      ir_check_err(c, wt[b].r, wt[b].t, wt[b].s, "waits for %ld signal%s of rank %d on channel %d, but rank %d sends none "
               "there", take, take == 1 ? "" : "s", key.from, key.chan, key.from);
  }
out:
  free(sg);
  free(wt);
}

/* A pair (a, b) of ranks, and a step of a's that made it. */
typedef struct rpair { int a, b, t, s; } rpair;

static int rpair_cmp(const void *x, const void *y) {
  const rpair *u = x, *v = y;
  if (u->a != v->a) return u->a < v->a ? -1 : 1;
  if (u->b != v->b) return u->b < v->b ? -1 : 1;
  if (u->t != v->t) return u->t < v->t ? -1 : 1;
  return (u->s > v->s) - (u->s < v->s);
}

/* Whether the n sorted pairs v hold (a, b): a binary search. */
static int rpair_has(const rpair *v, long n, int a, int b) {
  long lo = 0, hi = n;
  rpair want = {a, b, -1, -1};
  while (lo < hi) {
    long mid = lo + (hi - lo) / 2;
    if (rpair_cmp(&v[mid], &want) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && v[lo].a == a && v[lo].b == b;
}

typedef struct rpairs { rpair *v; long n, cap; } rpairs;

static int rpair_push(rpairs *x, rpair e) {
  if (x->n == x->cap) {
    long cap = x->cap ? 2 * x->cap : 64;
    rpair *v = realloc(x->v, cap * sizeof *v);
    if (!v) return -1;
    x->v = v;
    x->cap = cap;
  }
  x->v[x->n++] = e;
  return 0;
}

/* LL landings (the sorted landings lv[0..nl)): no scratch chunk is the
 * landing of two puts (a sweep keeping the landing that reaches farthest)
 * and none is written by a step of its own rank (a binary search per
 * written run). */
static void check_landing_overlaps(ir_checker *c, const ir_landing *lv, long nl) {
  const ir_prog *p = c->p;
  char a[48];
  for (long i = 0, far = -1; i < nl; i++) {
    if (i == 0 || lv[i].owner != lv[i - 1].owner) far = -1;
    const ir_landing *x = &lv[i], *f = far >= 0 ? &lv[far] : NULL;
    if (f && f->hi > x->lo && (f->r != x->r || f->t != x->t || f->s != x->s))
      ir_check_err(c, x->r, x->t, x->s, "put lands in rank %d's %s, as rank %d tb %d step %d's put does: a scratch "
               "chunk is the landing of one put", x->owner, chunk_text(a, sizeof a, IR_BUF_SCRATCH, x->lo,
               x->hi < f->hi ? x->hi : f->hi), f->r, f->t, f->s);
    if (!f || x->hi > f->hi) far = i;
  }
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (!(ir_op_flags[st->op] & IR_F_DST) || st->dstbuf != IR_BUF_SCRATCH || st->cnt < 1) continue;
        for (int32_t i = 0; i < ir_side_nruns(st, 1); i++) {
          int64_t lo, hi;
          ir_side_run(st, 1, i, &lo, &hi);
          long j = ir_landing_first(lv, nl, r, lo, hi);
          if (j == nl) continue;
          ir_check_err(c, r, t, s, "%s writes %s, the landing of rank %d tb %d step %d's put: a landing is written by its "
                   "put alone", ir_op_xml[st->op], chunk_text(a, sizeof a, IR_BUF_SCRATCH, lv[j].lo > lo ? lv[j].lo : lo,
                   lv[j].hi < hi ? lv[j].hi : hi), lv[j].r, lv[j].t, lv[j].s);
          break;
        }
      }
}

/* Pushes (r, q) made by tb t step s onto the pairs u, unless it is the last one there. */
static int push_sighting(void *u, int r, int q, int t, int s) {
  rpairs *x = u;
  if (x->n && x->v[x->n - 1].a == r && x->v[x->n - 1].b == q) return 0;
  return rpair_push(x, (rpair){r, q, t, s});
}

/* The LL pair rule: a rank that puts to q reads (ir_side_reads_local) a
 * landing q put to it, or waits for a signal of q's, so that its call ends
 * only after q's has begun.  The (seer, seen) pairs of every sighting
 * (ir_direct_sightings), sorted, then a binary search for each (rank,
 * peer) a put makes; the first put of a pair that has none is named. */
static void check_pairs(ir_checker *c, const ir_landing *lv, long nl) {
  const ir_prog *p = c->p;
  rpairs rd = {0}, put = {0};
  if (ir_direct_sightings(p, lv, nl, push_sighting, &rd)) goto nomem;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if ((ir_op_flags[st->op] & IR_F_PUT) && ir_peer_ok(p, r, st) && rpair_push(&put, (rpair){r, st->peer, t, s}))
          goto nomem;
      }
  if (rd.n > 1) qsort(rd.v, rd.n, sizeof *rd.v, rpair_cmp);
  if (put.n > 1) qsort(put.v, put.n, sizeof *put.v, rpair_cmp);
  for (long i = 0; i < put.n; i++) {
    const rpair *x = &put.v[i];
    if ((i && x->a == put.v[i - 1].a && x->b == put.v[i - 1].b) || rpair_has(rd.v, rd.n, x->a, x->b)) continue;
    ir_check_err(c, x->a, x->t, x->s, "puts to rank %d but reads no landing rank %d put to it and waits for no signal of "
             "it: its call could end before rank %d's has begun (the LL pair rule: a rank that puts to a peer reads a "
             "landing of that peer's or waits for its signal)", x->b, x->b, x->b);
  }
  goto out;
nomem:
  ir_check_err(c, -1, -1, -1, "out of memory");
out:
  free(rd.v);
  free(put.v);
}

void ir_direct_check(ir_checker *c) {
  const ir_prog *p = c->p;
  ir_geom *geom = calloc(p->ngpus, sizeof *geom);
  if (!geom) { ir_check_err(c, -1, -1, -1, "out of memory"); return; }
  for (int r = 0; r < p->ngpus; r++)
    if (ir_geom_init(&geom[r], p, r, 1, p->inplace)) { free(geom); return; }   /* check_header reports it */
  int bad = check_peers(c, geom);
  free(geom);
  if (bad) return;
  check_kind(c);
  check_streams(c);
  if (!ir_proto_landed(p->proto)) return;
  ir_landing *lv = NULL;
  long nl = 0;
  if (ir_direct_landings(p, &lv, &nl)) {
    ir_check_err(c, -1, -1, -1, "out of memory");
  } else {
    check_landing_overlaps(c, lv, nl);
    check_pairs(c, lv, nl);
  }
  free(lv);
}

/* ---- ordering rules ---- */

/* The end rule (a put, get, getr or xchg happens before some step of the rank it
 * touches: the last step of one of its thread blocks) and, in Simple, the
 * start rule (it happens after some step of that rank: one of the rank's
 * columns in its clock is set), from the vector clocks of every rank. */
void ir_direct_order(ir_checker *c, const ir_graph *g) {
  const ir_prog *p = c->p;
  long n = g->n;
  int nc = g->colbase[p->ngpus];
  if ((size_t)n * nc > (size_t)IR_GRAPH_MAX_CLOCKS) {
    LOG_INFO(RT_SUB_IR, "%s: the direct steps' ordering rules are not checked (%ld steps x %d thread blocks)",
             ir_prog_where(p), n, nc);
    return;
  }
  long *order = malloc((n + 1) * sizeof *order);
  int32_t *vc = malloc(((size_t)n * nc + 1) * sizeof *vc);
  if (!order || !vc) { ir_check_err(c, -1, -1, -1, "out of memory"); goto out; }
  if (!ir_graph_topo(g, order)) goto out;   /* a cycle: reported already */
  ir_graph_clocks(g, order, -1, vc);
  int simple = p->proto == IR_PROTO_SIMPLE;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        unsigned fl = ir_op_flags[st->op];
        if (!(fl & (IR_F_PUT | IR_F_GET)) || !ir_peer_ok(p, r, st)) continue;
        int q = st->peer, put = (fl & IR_F_PUT) != 0, ends = 0, starts = 0;
        const char *verb = (fl & IR_F_SWAP) ? "exchanges with" : put ? "writes" : "reads";
        long v = g->base[r][t] + s;
        for (int u = 0; u < p->gpus[q].ntbs && !ends; u++)
          if (p->gpus[q].tbs[u].nsteps > 0) ends = ir_graph_before_all(g, vc, v, g->base[q][u] + p->gpus[q].tbs[u].nsteps - 1);
        for (int k = 0; k < g->ncols[q] && !starts; k++) starts = vc[(size_t)v * nc + g->colbase[q] + k] > 0;
        char a[64];
        side_text(a, sizeof a, st, put);
        if (!ends)
          ir_check_err(c, r, t, s, "%s %s rank %d's %s but happens before no step of rank %d: rank %d's call could end "
                   "before it is done (the end rule: %s)", ir_op_xml[st->op], verb, q, a, q, q,
                   simple ? "a sig after it that a wait of that rank takes" : "that rank reads the landing");
        if (simple && !starts)
          ir_check_err(c, r, t, s, "%s %s rank %d's %s but happens after no step of rank %d: rank %d may not have begun "
                   "the call (the start rule: a wait before it for a sig of that rank)", ir_op_xml[st->op], verb, q, a,
                   q, q);
      }
out:
  free(order);
  free(vc);
}
