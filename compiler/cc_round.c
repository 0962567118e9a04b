/* cc_round.c -- rounds (the DSL's round()): on each rank, a round's
 * instructions come after the rank's previous round's. */
#include "cc_ins.h"

#include <stdlib.h>

/* Instructions are grouped per (rank, round) by a counting sort, then each
 * group gets every instruction of the rank's latest earlier non-empty
 * group as predecessors: a send of round k+1 waits for its rank's round k
 * receives, so a pairwise exchange talks to one peer at a time. */
int cc_order_rounds(lower *w) {
  const int nr = w->t->nranks, R = w->t->round + 1;
  int64_t groups = (int64_t)nr * R;
  int *start = cc_calloc((size_t)groups + 1, sizeof *start), *at = cc_malloc(((size_t)w->n + 1) * sizeof *at);
  int ok = start && at;
  for (int i = 0; ok && i < w->n; i++) start[(int64_t)w->v[i].rank * R + w->v[i].round + 1]++;
  for (int64_t g = 0; ok && g < groups; g++) start[g + 1] += start[g];
  int *fill = ok ? cc_malloc(((size_t)groups + 1) * sizeof *fill) : NULL;
  ok = ok && fill;
  for (int64_t g = 0; ok && g <= groups; g++) fill[g] = start[g];
  for (int i = 0; ok && i < w->n; i++) at[fill[(int64_t)w->v[i].rank * R + w->v[i].round]++] = i;
  for (int r = 0; ok && r < nr; r++) {
    int64_t prev = -1;   /* the rank's latest non-empty group */
    for (int k = 0; ok && k < R; k++) {
      int64_t g = (int64_t)r * R + k;
      if (start[g] == start[g + 1]) continue;
      for (int a = start[g]; ok && prev >= 0 && a < start[g + 1]; a++)
        for (int b = start[prev]; ok && b < start[prev + 1]; b++) ok = cc_add_pred(&w->v[at[a]], at[b]);
      prev = g;
    }
  }
  cc_free(start);
  cc_free(at);
  cc_free(fill);
  return ok;
}
