/* cc_ins.c -- the lowering passes' instruction list (cc_ins.h): adding
 * instructions and the order constraints between them, within the
 * compile's time budget. */
#include "cc_ins.h"

#include <limits.h>
#include <string.h>

int cc_int_push(int **a, int *n, int *cap, int x) {
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 4;
    int *q = cc_realloc(*a, c * sizeof *q);
    if (!q) return 0;
    *a = q;
    *cap = c;
  }
  (*a)[(*n)++] = x;
  return 1;
}

int cc_has_pred(const ins *i, int p) {
  for (int k = 0; k < i->npred; k++)
    if (i->pred[k] == p) return 1;
  return 0;
}

int cc_add_pred(ins *i, int p) {
  if (cc_has_pred(i, p)) return 1;
  return cc_int_push(&i->pred, &i->npred, &i->cappred, p);
}

int cc_late(lower *w) {
  if (w->late) return 1;
  if (++w->ticks & 1023) return 0;
  if (!cc_budget_late(w->t->mem)) return 0;
  char m[300];
  cc_err(w, w->t->decl_line, "%s (while lowering)", cc_budget_time_msg(w->t->mem, m, sizeof m));
  w->late = 1;
  return 1;
}

/* The most instructions lowering makes (each becomes a step). */
#define MAX_INS (INT_MAX / 8)

int cc_emit(lower *w, int rank, int op, int ss, int si, int ds, int di, int count, int send, int recv, int ch,
            int fixtb, int inst, int line) {
  if (w->n >= MAX_INS) {
    if (!w->errors) cc_err(w, line, "the program would have more than %d steps", MAX_INS);
    return -1;
  }
  if (cc_late(w)) return -1;
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 256;
    ins *v = cc_realloc(w->v, (size_t)cap * sizeof *v);
    if (!v) return -1;
    w->v = v;
    w->cap = cap;
  }
  w->v[w->n] = (ins){.rank = rank, .op = op, .sspace = ss, .sidx = si, .dspace = ds, .didx = di, .count = count,
                     .send = send, .recv = recv, .ch = ch < 0 ? 0 : ch, .fixtb = fixtb, .inst = inst, .line = line,
                     .msg_of = -1, .tb = -1, .pos = -1, .args = {-1, -1, -1, -1}, .peer = -1, .from = -1};
  return w->n++;
}
