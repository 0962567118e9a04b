/* ir_direct.c -- a direct program's signal streams and LL landings
 * (ir_direct.h), which the step graph (ir_graph.c) and the validator's
 * direct rules (ir_check_direct.c) both read. */
#include "ir_direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int ir_stream_cmp(const ir_sigstep *a, const ir_sigstep *b) {
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  if (a->to != b->to) return a->to < b->to ? -1 : 1;
  return (a->chan > b->chan) - (a->chan < b->chan);
}

static int sigstep_cmp(const void *x, const void *y) {
  const ir_sigstep *a = x, *b = y;
  int c = ir_stream_cmp(a, b);
  if (c) return c;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return (a->s > b->s) - (a->s < b->s);
}

bt_result ir_direct_streams(const ir_prog *p, ir_sigstep **sigs, long *nsigs, ir_sigstep **waits, long *nwaits) {
  long n[2] = {0, 0};
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        unsigned fl = ir_op_flags[st->op];
        if ((fl & (IR_F_SIG | IR_F_WAIT)) && ir_peer_ok(p, r, st)) n[(fl & IR_F_WAIT) != 0]++;
      }
  ir_sigstep *v[2] = {malloc((n[0] + 1) * sizeof **sigs), malloc((n[1] + 1) * sizeof **waits)};
  *sigs = v[0];
  *waits = v[1];
  *nsigs = *nwaits = 0;
  if (!v[0] || !v[1]) return BT_ERR_NOMEM;
  long m[2] = {0, 0};
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      for (int s = 0; s < tb->nsteps; s++) {
        const ir_step *st = &tb->steps[s];
        unsigned fl = ir_op_flags[st->op];
        if (!(fl & (IR_F_SIG | IR_F_WAIT)) || !ir_peer_ok(p, r, st)) continue;
        int w = (fl & IR_F_WAIT) != 0;
        v[w][m[w]++] = (ir_sigstep){w ? st->peer : r, w ? r : st->peer, tb->chan, r, t, s, st->cnt};
      }
    }
  for (int w = 0; w < 2; w++)
    if (m[w] > 1) qsort(v[w], m[w], sizeof *v[w], sigstep_cmp);
  *nsigs = m[0];
  *nwaits = m[1];
  return BT_OK;
}

static int landing_cmp(const void *x, const void *y) {
  const ir_landing *a = x, *b = y;
  if (a->owner != b->owner) return a->owner < b->owner ? -1 : 1;
  if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
  if (a->r != b->r) return a->r < b->r ? -1 : 1;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return (a->s > b->s) - (a->s < b->s);
}

/* Whether step st of rank r is a put into its peer's scratch (a landing in an LL program). */
static int lands(const ir_prog *p, int r, const ir_step *st) {
  const unsigned fl = ir_op_flags[st->op];
  return (fl & IR_F_PUT) && !(fl & IR_F_SWAP) && st->dstbuf == IR_BUF_SCRATCH && st->cnt >= 1 && ir_peer_ok(p, r, st);
}

bt_result ir_direct_landings(const ir_prog *p, ir_landing **out, long *n) {
  long m = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (lands(p, r, st)) m += ir_side_nruns(st, 1);
      }
  *n = 0;
  *out = malloc((m + 1) * sizeof **out);
  if (!*out) return BT_ERR_NOMEM;
  m = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (!lands(p, r, st)) continue;
        for (int32_t i = 0; i < ir_side_nruns(st, 1); i++) {
          ir_landing *l = &(*out)[m++];
          *l = (ir_landing){st->peer, r, t, s, 0, 0};
          ir_side_run(st, 1, i, &l->lo, &l->hi);
        }
      }
  if (m > 1) qsort(*out, m, sizeof **out, landing_cmp);
  *n = m;
  return BT_OK;
}

long ir_landing_first(const ir_landing *v, long n, int owner, int64_t lo, int64_t hi) {
  long a = 0, b = n;   /* the first landing at or after (owner, lo) */
  while (a < b) {
    long mid = a + (b - a) / 2;
    if (v[mid].owner < owner || (v[mid].owner == owner && v[mid].lo < lo)) a = mid + 1;
    else b = mid;
  }
  if (a > 0 && v[a - 1].owner == owner && v[a - 1].hi > lo) a--;   /* one that starts before lo and reaches it */
  return a < n && v[a].owner == owner && v[a].lo < hi && v[a].hi > lo ? a : n;
}

int ir_direct_sightings(const ir_prog *p, const ir_landing *lv, long nl, int (*f)(void *u, int r, int q, int t, int s),
                        void *u) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        const unsigned fl = ir_op_flags[st->op];
        int e = 0;
        if (st->op == IR_OP_WAIT && ir_peer_ok(p, r, st) && (e = f(u, r, st->peer, t, s))) return e;
        for (int k = 0; k < 2 && nl; k++) {
          if (!ir_side_reads_local(fl, k) || (k ? st->dstbuf : st->srcbuf) != IR_BUF_SCRATCH || st->cnt < 1) continue;
          for (int32_t i = 0; i < ir_side_nruns(st, k); i++) {
            int64_t lo, hi;
            ir_side_run(st, k, i, &lo, &hi);
            for (long j = ir_landing_first(lv, nl, r, lo, hi); j < nl && lv[j].owner == r && lv[j].lo < hi; j++)
              if ((e = f(u, r, lv[j].r, t, s))) return e;
          }
        }
      }
  return 0;
}
