/* ir_dealias.c -- an in-place program rewritten to run out of place with no copy of the input.
 *
 * An in-place program that names only one of i and o runs an out-of-place
 * call on a copy of the input placed in the output (one more pass over the
 * data and one more call per rank).  Often the copy is not needed: a read
 * of a chunk that no write on its rank happens before sees the input as
 * it was, so it can read the caller's input; every other read and every
 * write goes to the output.  This pass rewrites each step that way, from
 * the happens-before graph, and gives up (with the reason) where the
 * rewrite cannot be exact:
 *   - a local reduce ("re", dst = dst op src) whose dst is still the input
 *     (the result would need three operands);
 *   - a read that mixes chunks still holding the input with chunks already
 *     written, or reaches past the input (resp. output) buffer;
 *   - a write outside the output buffer (scratch use of the input);
 *   - an output chunk no step writes whose place holds the input (in place
 *     it already holds its value; out of place it would need the copy);
 *   - a direct program (its puts and gets reach other ranks' buffers). */
#include "ir_dealias.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_geom.h"
#include "ir_graph.h"

/* The writes of one rank, for "is chunk x written before node v". */
typedef struct writes {
  long *off, *tb, *step;   /* CSR by chunk position: off[x]..off[x+1] */
} writes;

static void writes_free(writes *w) { free(w->off); free(w->tb); free(w->step); }

/* Chunk positions in the span of a step's src (k 0) or dst (k 1), or 0
 * when it does not touch i or o there. */
static int span_range(const ir_step *st, const ir_geom *g, int k, long *lo, long *hi) {
  unsigned fl = ir_op_flags[st->op];
  if (!(fl & (k ? IR_F_DST : IR_F_SRC))) return 0;
  int b = k ? st->dstbuf : st->srcbuf;
  if (b == IR_BUF_SCRATCH) return 0;
  *lo = ir_geom_span_off(g, b, k ? st->dstoff : st->srcoff);
  *hi = *lo + st->cnt;
  return 1;
}

static bt_result writes_build(const ir_gpu *gp, const ir_geom *g, writes *w) {
  long span = g->span, n = 0;
  memset(w, 0, sizeof *w);
  w->off = calloc(span + 2, sizeof *w->off);
  if (!w->off) return BT_ERR_NOMEM;
  for (int pass = 0; pass < 2; pass++) {
    for (int t = 0; t < gp->ntbs; t++)
      for (int s = 0; s < gp->tbs[t].nsteps; s++) {
        long lo, hi;
        if (!span_range(&gp->tbs[t].steps[s], g, 1, &lo, &hi)) continue;
        for (long x = lo; x < hi && x < span; x++) {
          if (pass == 0) { w->off[x + 2]++; continue; }
          long at = w->off[x + 1]++;
          w->tb[at] = t;
          w->step[at] = s;
        }
      }
    if (pass == 0) {
      for (long x = 0; x < span; x++) w->off[x + 2] += w->off[x + 1];
      n = w->off[span + 1];
      w->tb = malloc((n + 1) * sizeof *w->tb);
      w->step = malloc((n + 1) * sizeof *w->step);
      if (!w->tb || !w->step) { writes_free(w); return BT_ERR_NOMEM; }
    }
  }
  return BT_OK;   /* off[x]..off[x+1] now delimit chunk x's writes */
}

/* 1 when some write to chunk x happens before step s of tb t (node v). */
static int written_before(const writes *w, long x, int t, int s, const int32_t *vc_v) {
  for (long i = w->off[x]; i < w->off[x + 1]; i++) {
    int u = (int)w->tb[i], q = (int)w->step[i];
    if (u == t ? q < s : vc_v[u] >= q + 1) return 1;
  }
  return 0;
}

/* The new place of span positions [lo, hi): buffer i when `orig`, else o.
 * Returns 0 when the range leaves that buffer. */
static int place(const ir_geom *g, long lo, long hi, int orig, uint8_t *buf, int32_t *off) {
  int b = orig ? IR_BUF_INPUT : IR_BUF_OUTPUT;
  long at = orig ? g->in_at : g->out_at;
  if (lo < at || hi > at + g->chunks[b]) return 0;
  *buf = (uint8_t)b;
  *off = (int32_t)(lo - at);
  return 1;
}

/* Rewrites rank r's steps into q (same shape as p).  Returns BT_OK,
 * BT_ERR_UNSUPPORTED with `why`, or BT_ERR_NOMEM. */
static bt_result dealias_rank(const ir_prog *p, const ir_graph *gr, const long *order, int r, int32_t *vc,
                              ir_prog *q, char *why, size_t n) {
  const ir_gpu *gp = &p->gpus[r];
  ir_geom g;
  if (ir_geom_chunks(&g, p, r, 1)) { snprintf(why, n, "rank %d: chunk counts do not fit", r); return BT_ERR_UNSUPPORTED; }
  writes w;
  CHECK(writes_build(gp, &g, &w));
  int nt = gp->ntbs;   /* no compute thread blocks (ir_dealias): a column per tb */
  ir_graph_clocks(gr, order, r, vc);
  bt_result res = BT_OK;
  for (int t = 0; t < nt && !res; t++)
    for (int s = 0; s < gp->tbs[t].nsteps && !res; s++) {
      const ir_step *st = &gp->tbs[t].steps[s];
      ir_step *nst = &q->gpus[r].tbs[t].steps[s];
      const int32_t *vcv = vc + (size_t)(gr->base[r][t] + s) * nt;
      long lo, hi;
      if (span_range(st, &g, 0, &lo, &hi)) {
        int orig = !written_before(&w, lo, t, s, vcv);
        for (long x = lo + 1; x < hi && !res; x++)
          if ((!written_before(&w, x, t, s, vcv)) != orig) {
            snprintf(why, n, "rank %d tb %d step %d reads chunks both before and after they are written", r, t, s);
            res = BT_ERR_UNSUPPORTED;
          }
        if (!res && !place(&g, lo, hi, orig, &nst->srcbuf, &nst->srcoff)) {
          snprintf(why, n, "rank %d tb %d step %d reads past the %s buffer", r, t, s, orig ? "input" : "output");
          res = BT_ERR_UNSUPPORTED;
        }
      }
      if (!res && span_range(st, &g, 1, &lo, &hi)) {
        unsigned fl = ir_op_flags[st->op];
        if ((fl & IR_F_RED) && !(fl & IR_F_RECV))   /* dst = dst op src: reads its dst */
          for (long x = lo; x < hi && !res; x++)
            if (!written_before(&w, x, t, s, vcv)) {
              snprintf(why, n, "rank %d tb %d step %d (%s) reduces into a chunk that still holds the input", r, t, s,
                       ir_op_xml[st->op]);
              res = BT_ERR_UNSUPPORTED;
            }
        if (!res && !place(&g, lo, hi, 0, &nst->dstbuf, &nst->dstoff)) {
          snprintf(why, n, "rank %d tb %d step %d writes outside the output buffer", r, t, s);
          res = BT_ERR_UNSUPPORTED;
        }
      }
    }
  /* Output chunks nobody writes keep, in place, what the span held. */
  for (long x = g.out_at; x < g.out_at + g.chunks[IR_BUF_OUTPUT] && !res; x++)
    if (w.off[x] == w.off[x + 1] && x >= g.in_at && x < g.in_at + g.chunks[IR_BUF_INPUT]) {
      snprintf(why, n, "rank %d: output chunk %ld is never written and holds the input in place", r, x - g.out_at);
      res = BT_ERR_UNSUPPORTED;
    }
  writes_free(&w);
  return res;
}

/* A send that writes nothing locally names, in its dst, where its receiver
 * puts the message (ir_check compares them): after the rewrite it names
 * the receiver's new place.  A receiver that forwards without writing
 * (rrs) names its own receiver's, so this repeats until nothing changes. */
static void match_sends(ir_prog *q, const ir_peers *pe) {
  for (int changed = 1; changed;) {
    changed = 0;
    for (int r = 0; r < q->ngpus; r++)
      for (int t = 0; t < q->gpus[r].ntbs; t++) {
        ir_tb *tb = &q->gpus[r].tbs[t];
        int u = pe->send_tb[r][t];
        if (tb->send < 0 || u < 0) continue;
        const ir_tb *rt = &q->gpus[tb->send].tbs[u];
        for (int a = 0, b = 0;; a++, b++) {
          a = ir_tb_next(tb, a, IR_F_SEND);
          b = ir_tb_next(rt, b, IR_F_RECV);
          if (a >= tb->nsteps || b >= rt->nsteps) break;
          ir_step *ss = &tb->steps[a];
          const ir_step *rs = &rt->steps[b];
          if ((ir_op_flags[ss->op] & IR_F_DST) || ss->dstoff < 0 || rs->dstoff < 0) continue;
          if (ss->dstbuf != rs->dstbuf || ss->dstoff != rs->dstoff) {
            ss->dstbuf = rs->dstbuf;
            ss->dstoff = rs->dstoff;
            changed = 1;
          }
        }
      }
  }
}

bt_result ir_dealias(const ir_prog *p, ir_prog **out, char *why, size_t n) {
  *out = NULL;
  if (n) why[0] = 0;
  if (!ir_prog_aliased(p, 0)) { snprintf(why, n, "it runs out of place as it is"); return BT_ERR_UNSUPPORTED; }
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int k = 0; k < p->gpus[r].tbs[t].nsteps; k++)
        if (ir_step_strided(&p->gpus[r].tbs[t].steps[k])) {
          snprintf(why, n, "programs with strided steps are left as they are");
          return BT_ERR_UNSUPPORTED;
        }
  if (p->coll == IR_COLL_CUSTOM || ir_coll_rooted(p->coll)) {
    snprintf(why, n, "%s collectives are left as they are", p->coll == IR_COLL_CUSTOM ? "custom" : "rooted");
    return BT_ERR_UNSUPPORTED;
  }
  if (ir_prog_fused(p)) { snprintf(why, n, "it computes its input"); return BT_ERR_UNSUPPORTED; }
  if (ir_prog_direct(p)) {   /* its steps address other ranks' buffers, which the rewrite does not follow */
    snprintf(why, n, "direct programs are left as they are (their steps reach other ranks' buffers)");
    return BT_ERR_UNSUPPORTED;
  }
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  ir_graph gr;
  bt_result res = ir_graph_build(p, &pe, 0, &gr);
  if (res) { ir_peers_free(&pe); return res; }
  long *order = malloc((gr.n + 1) * sizeof *order);
  int maxt = 1;
  for (int r = 0; r < p->ngpus; r++) if (p->gpus[r].ntbs > maxt) maxt = p->gpus[r].ntbs;
  int32_t *vc = NULL;
  ir_prog *q = NULL;
  if (!order) { res = BT_ERR_NOMEM; goto out; }
  if ((size_t)gr.n * maxt > (64UL << 20)) {
    snprintf(why, n, "too large to analyse (%ld steps x %d thread blocks)", gr.n, maxt);
    res = BT_ERR_UNSUPPORTED;
    goto out;
  }
  if (!ir_graph_topo(&gr, order)) { snprintf(why, n, "its steps wait on each other in a cycle"); res = BT_ERR_UNSUPPORTED; goto out; }
  vc = malloc(((size_t)gr.n * maxt + 1) * sizeof *vc);
  q = ir_prog_copy(p, 0);
  if (!vc || !q) { res = BT_ERR_NOMEM; goto out; }
  for (int r = 0; r < p->ngpus && !res; r++) res = dealias_rank(p, &gr, order, r, vc, q, why, n);
  if (!res) {
    match_sends(q, &pe);
    q->inplace = 0;
    q->outofplace = 1;
    *out = q;
    q = NULL;
  }
out:
  ir_peers_free(&pe);
  ir_prog_free(q);
  free(vc);
  free(order);
  ir_graph_free(&gr);
  return res;
}
