/* cc_round.c -- rounds (the DSL's round()): on each rank, a round's
 * instructions come after the rank's previous round's. */
#include "cc_ins.h"

#include <stdint.h>
#include <stdlib.h>

/* Instructions are grouped per (rank, round) by a counting sort, then each
 * group gets every instruction of the rank's latest earlier non-empty
 * group as predecessors: a send of round k+1 waits for its rank's round k
 * receives, so a pairwise exchange talks to one peer at a time.  Each
 * instruction's predecessors are marked first, so that adding one costs
 * nothing more than the push (no search of the list).  The waits added in
 * all are bounded by CC_MAX_ROUND_WAITS (an error at the line of the first
 * operation past it); the deadline is checked as lowering checks it. */
int cc_order_rounds(lower *w) {
  const int nr = w->t->nranks, R = w->t->round + 1;
  int64_t groups = (int64_t)nr * R, waits = 0;
  int *start = cc_calloc((size_t)groups + 1, sizeof *start), *at = cc_malloc(((size_t)w->n + 1) * sizeof *at);
  int *fill = cc_malloc(((size_t)groups + 1) * sizeof *fill), *mark = cc_calloc((size_t)w->n + 1, sizeof *mark);
  int ok = start && at && fill && mark, stop = 0, stamp = 0;   /* ok 0: out of memory; stop: an error was said */
  for (int i = 0; ok && i < w->n; i++) start[(int64_t)w->v[i].rank * R + w->v[i].round + 1]++;
  for (int64_t g = 0; ok && g < groups; g++) start[g + 1] += start[g];
  for (int64_t g = 0; ok && g <= groups; g++) fill[g] = start[g];
  for (int i = 0; ok && i < w->n; i++) at[fill[(int64_t)w->v[i].rank * R + w->v[i].round]++] = i;
  for (int r = 0; ok && !stop && r < nr; r++) {
    int64_t prev = -1;   /* the rank's latest non-empty group */
    for (int k = 0; ok && !stop && k < R; k++) {
      int64_t g = (int64_t)r * R + k;
      if (start[g] == start[g + 1]) continue;
      for (int a = start[g]; ok && !stop && prev >= 0 && a < start[g + 1]; a++) {
        ins *I = &w->v[at[a]];
        waits += start[prev + 1] - start[prev];
        if (waits > CC_MAX_ROUND_WAITS)
          cc_err(w, I->line, "the operations of this round wait for those of the rank's previous round: more than %d "
                 "waits between rounds in all (CC_MAX_ROUND_WAITS; put fewer operations of a rank in a round)",
                 CC_MAX_ROUND_WAITS);
        if (waits > CC_MAX_ROUND_WAITS || cc_late(w)) {   /* cc_late says so itself */
          stop = 1;
          break;
        }
        ++stamp;
        for (int q = 0; q < I->npred; q++) mark[I->pred[q]] = stamp;
        for (int b = start[prev]; ok && b < start[prev + 1]; b++)
          if (mark[at[b]] != stamp) ok = cc_int_push(&I->pred, &I->npred, &I->cappred, at[b]);
      }
      prev = g;
    }
  }
  cc_free(start);
  cc_free(at);
  cc_free(fill);
  cc_free(mark);
  return ok;
}
