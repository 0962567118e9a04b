/* cc_frag.c -- parallelize: snapshots of the symbolic chunk state, so that
 * each instance of a fragment is traced from the same state, and the merge
 * of the states the instances leave. */
#include "cc_frag.h"

#include <stdlib.h>
#include <string.h>

/* A deep copy of t->loc for the spaces that existed when it was taken. */
typedef struct cc_snap {
  int nspaces, nranks;
  int *cap[CC_MAX_SPACES];      /* [space][rank] */
  cc_loc **loc[CC_MAX_SPACES];  /* [space][rank] -> chunks */
} cc_snap;

static int val_copy(cc_val *dst, const cc_val *src) {
  if (src->n > dst->cap) {
    uint64_t *t = cc_realloc(dst->terms, src->n * sizeof *t);
    if (!t) return 0;
    dst->terms = t;
    dst->cap = src->n;
  }
  if (src->n) memcpy(dst->terms, src->terms, src->n * sizeof *src->terms);
  dst->n = src->n;
  return 1;
}

static int val_equal(const cc_val *a, const cc_val *b) {
  return a->n == b->n && (!a->n || !memcmp(a->terms, b->terms, a->n * sizeof *a->terms));
}

static void snap_free(cc_snap *s) {
  if (!s) return;
  for (int sp = 0; sp < s->nspaces; sp++) {
    for (int r = 0; s->loc[sp] && r < s->nranks; r++) {
      for (int i = 0; s->loc[sp][r] && i < s->cap[sp][r]; i++) cc_free(s->loc[sp][r][i].val.terms);
      if (s->loc[sp][r]) cc_free(s->loc[sp][r]);
    }
    cc_free(s->loc[sp]);
    cc_free(s->cap[sp]);
  }
  cc_free(s);
}

static cc_snap *snap_take(const cc_trace *t) {
  cc_snap *s = cc_calloc(1, sizeof *s);
  if (!s) return NULL;
  s->nspaces = t->nspaces;
  s->nranks = t->nranks;
  for (int sp = 0; sp < t->nspaces; sp++) {
    s->cap[sp] = cc_calloc(t->nranks, sizeof(int));
    s->loc[sp] = cc_calloc(t->nranks, sizeof(cc_loc *));
    if (!s->cap[sp] || !s->loc[sp]) goto fail;
    for (int r = 0; r < t->nranks; r++) {
      int n = t->cap[sp][r];
      s->loc[sp][r] = cc_calloc(n + 1, sizeof(cc_loc));
      if (!s->loc[sp][r]) goto fail;
      s->cap[sp][r] = n;
      for (int i = 0; i < n; i++) {
        const cc_loc *from = &t->loc[sp][r][i];
        cc_loc *to = &s->loc[sp][r][i];
        to->version = from->version; to->line = from->line; to->mixed = from->mixed;
        if (!val_copy(&to->val, &from->val)) goto fail;
      }
    }
  }
  return s;
fail:
  snap_free(s);
  return NULL;
}

/* Loc i of (space, rank) in s, or NULL when s never had it. */
static cc_loc *snap_loc(cc_snap *s, int sp, int r, int i) {
  if (sp >= s->nspaces || i >= s->cap[sp][r]) return NULL;
  return &s->loc[sp][r][i];
}

/* Makes t's state equal to s: chunks s does not have become unwritten with
 * a fresh version. */
static int snap_restore(cc_trace *t, cc_snap *s) {
  for (int sp = 0; sp < t->nspaces; sp++)
    for (int r = 0; r < t->nranks; r++)
      for (int i = 0; i < t->cap[sp][r]; i++) {
        cc_loc *l = &t->loc[sp][r][i], *from = snap_loc(s, sp, r, i);
        if (!from) {
          if (l->val.n || l->mixed) { l->val.n = 0; l->mixed = 0; l->line = 0; l->version = ++t->clock; }
          continue;
        }
        if (!val_copy(&l->val, &from->val)) return 0;
        l->version = from->version; l->line = from->line; l->mixed = from->mixed;
      }
  return 1;
}

/* Grows s so that it has every chunk t has. */
static int snap_cover(cc_snap *s, const cc_trace *t) {
  for (int sp = 0; sp < t->nspaces; sp++) {
    if (sp >= s->nspaces) {
      s->cap[sp] = cc_calloc(t->nranks, sizeof(int));
      s->loc[sp] = cc_calloc(t->nranks, sizeof(cc_loc *));
      if (!s->cap[sp] || !s->loc[sp]) return 0;
      s->nspaces = sp + 1;
    }
    for (int r = 0; r < t->nranks; r++) {
      int n = t->cap[sp][r], old = s->cap[sp][r];
      if (n <= old) continue;
      cc_loc *l = cc_realloc(s->loc[sp][r], (n + 1) * sizeof *l);
      if (!l) return 0;
      memset(l + old, 0, (n + 1 - old) * sizeof *l);
      s->loc[sp][r] = l;
      s->cap[sp][r] = n;
    }
  }
  return 1;
}

int cc_frag_begin(cc_trace *t) {
  cc_frag_free(t);
  t->snap0 = snap_take(t);
  return t->snap0 != NULL;
}

int cc_frag_next(cc_trace *t, int first, int line) {
  if (first) {
    t->snapr = snap_take(t);
    if (!t->snapr) return 0;
  } else {
    if (!snap_cover(t->snapr, t)) return 0;
    cc_snap *m = t->snapr;
    for (int sp = 0; sp < m->nspaces; sp++)
      for (int r = 0; r < t->nranks; r++)
        for (int i = 0; i < m->cap[sp][r]; i++) {
          cc_loc *acc = &m->loc[sp][r][i];
          const cc_loc *cur = sp < t->nspaces && i < t->cap[sp][r] ? &t->loc[sp][r][i] : NULL;
          static const cc_loc none;
          if (!cur) cur = &none;
          if (!val_equal(&acc->val, &cur->val) || cur->mixed) acc->mixed = cur->mixed ? cur->mixed : line;
          if (cur->version > acc->version) { acc->version = cur->version; if (!acc->line) acc->line = cur->line; }
        }
  }
  return snap_restore(t, t->snap0);
}

int cc_frag_end(cc_trace *t) {
  cc_snap *m = t->snapr, *s0 = t->snap0;
  for (int sp = 0; sp < m->nspaces; sp++)
    for (int r = 0; r < t->nranks; r++)
      for (int i = 0; i < m->cap[sp][r]; i++) {
        cc_loc *l = &m->loc[sp][r][i], *before = snap_loc(s0, sp, r, i);
        if (!before || l->version != before->version) l->version = ++t->clock;
      }
  int ok = snap_restore(t, m);
  cc_frag_free(t);
  return ok;
}

void cc_frag_free(cc_trace *t) {
  snap_free(t->snap0);
  snap_free(t->snapr);
  t->snap0 = t->snapr = NULL;
}
