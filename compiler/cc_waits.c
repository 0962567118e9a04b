/* cc_waits.c -- vector clocks of thread blocks, to leave out implied waits. */
#include "cc_waits.h"

#include "cc_mem.h"

struct cc_waits {
  int cols;        /* maxtb + 1 */
  int *row;        /* per rank and thread block: the latest step of each tb of the rank known to have run; -1 none */
  int *snap;       /* per instruction: its step's row when it ran; NULL when too large */
};

cc_waits *cc_waits_new(int nranks, int maxtb, int nins) {
  cc_waits *w = cc_calloc(1, sizeof *w);
  if (!w) return NULL;
  w->cols = maxtb + 1;
  size_t rows = (size_t)nranks * w->cols * w->cols, snaps = (size_t)(nins + 1) * w->cols;
  if (!(w->row = cc_malloc(rows * sizeof *w->row))) { cc_waits_free(w); return NULL; }
  for (size_t z = 0; z < rows; z++) w->row[z] = -1;
  if (snaps <= CC_WAITS_MAX_CELLS && (w->snap = cc_malloc(snaps * sizeof *w->snap)))
    for (size_t z = 0; z < snaps; z++) w->snap[z] = -1;
  return w;
}

void cc_waits_free(cc_waits *w) {
  if (!w) return;
  cc_free(w->row);
  cc_free(w->snap);
  cc_free(w);
}

/* Whether dependency a is implied by b (b's step ran after a's). */
static int implies(const cc_waits *w, const cc_need *b, const cc_need *a) {
  return w->snap && w->snap[(size_t)b->id * w->cols + a->tb] >= a->pos;
}

int cc_waits_pick(cc_waits *w, const ir_gpu *g, int r, int tb, cc_need *need, int n) {
  int *row = w->row + ((size_t)r * w->cols + tb) * w->cols;
  int m = 0;
  for (int j = 0; j < n; j++) {
    int keep = ir_tb_compute(&g->tbs[need[j].tb]);
    if (!keep && row[need[j].tb] < need[j].pos) {
      keep = 1;
      for (int k = 0; k < n && keep; k++)
        if (k != j && !ir_tb_compute(&g->tbs[need[k].tb]) && implies(w, &need[k], &need[j])) keep = 0;
    }
    if (keep) need[m++] = need[j];
  }
  for (int j = 0; j < m; j++) {
    if (need[j].pos > row[need[j].tb]) row[need[j].tb] = need[j].pos;
    if (!w->snap || ir_tb_compute(&g->tbs[need[j].tb])) continue;
    const int *s = w->snap + (size_t)need[j].id * w->cols;
    for (int c = 0; c < w->cols; c++)
      if (s[c] > row[c]) row[c] = s[c];
  }
  return m;
}

void cc_waits_ran(cc_waits *w, int r, int tb, int pos, int id) {
  int *row = w->row + ((size_t)r * w->cols + tb) * w->cols;
  if (pos > row[tb]) row[tb] = pos;
  if (w->snap) {
    int *s = w->snap + (size_t)id * w->cols;
    for (int c = 0; c < w->cols; c++) s[c] = row[c];
  }
}
