/* tool_tune.c -- `baton set --system`: the set's size ranges moved to the
 * crossovers `baton sim` predicts on a described system. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir_check.h"
#include "ir_read.h"
#include "ir_write.h"
#include "sim_run.h"
#include "tool.h"

/* The sizes the crossovers are looked for at: 8 B x 2^k up to 1 GiB. */
enum { TUNE_SIZES = 28, TUNE_FILES = 512, TUNE_MEMBERS = 4 };

/* Programs of one collective and kind (direct or not) with the same size
 * range: the in-place and out-of-place forms of one stage of a set. */
typedef struct stage {
  uint64_t lo, hi;           /* the range; hi 0: no bound */
  int nm, dropped;
  int m[TUNE_MEMBERS];       /* indices into the files */
  double t[TUNE_SIZES];      /* the fastest member's predicted time per size */
} stage;

typedef struct file { char path[PATH_MAX]; ir_prog *p; } file;

static uint64_t grid(int k) { return (uint64_t)8 << k; }

static int by_lo(const void *a, const void *b) {
  const stage *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Predicts each member of s at every grid size within [lo, top] (others:
 * infinity); the fastest member's time.  0 when a simulation fails (said). */
static int predict(stage *s, const file *f, const sim_spec *spec, uint64_t top) {
  for (int k = 0; k < TUNE_SIZES; k++) {
    s->t[k] = 1e300;
    if (grid(k) < s->lo || (top && grid(k) > top)) continue;
    for (int i = 0; i < s->nm; i++) {
      const ir_prog *p = f[s->m[i]].p;
      sim_opts o = {.bytes = grid(k), .dtype = IP_F32, .inplace = p->inplace ? 1 : 0};
      sim_report rep;
      rt_diag *d = rt_diag_new(8);
      bt_result r = sim_run(p, spec, &o, &rep, d);
      if (r) fprintf(stderr, "baton set: %s at %llu bytes: %s", f[s->m[i]].path, (unsigned long long)grid(k), rt_diag_text(d));
      rt_diag_free(d);
      if (r) return 0;
      if (rep.time_us < s->t[k]) s->t[k] = rep.time_us;
    }
  }
  return 1;
}

/* Moves the boundaries of the chain st[0..n) (contiguous ranges, in order)
 * to where the next stage is first predicted faster; a stage never faster
 * than the one before it in its range is dropped and that one keeps it. */
static void retune(stage *st, int n) {
  int a = 0;
  for (int b = 1; b < n; b++) {
    uint64_t end = st[b].hi;   /* the next stage's range ends here: a later stage takes over after */
    int k = 0;
    while (k < TUNE_SIZES && (grid(k) <= st[a].lo || !(st[b].t[k] < st[a].t[k]) || (end && grid(k) > end))) k++;
    if (k == TUNE_SIZES) {   /* b never wins: a keeps b's range */
      st[a].hi = st[b].hi;
      st[b].dropped = 1;
      continue;
    }
    st[a].hi = grid(k) - 1;
    st[b].lo = grid(k);
    a = b;
  }
}

static void range_text(uint64_t lo, uint64_t hi, char *out, size_t n) {
  if (hi) snprintf(out, n, "%llu..%llu", (unsigned long long)lo, (unsigned long long)hi);
  else snprintf(out, n, "%llu..", (unsigned long long)lo);
}

int tool_set_tune(const char *dir, const sim_spec *spec, int quiet) {
  file *f = calloc(TUNE_FILES, sizeof *f);
  stage *st = calloc(TUNE_FILES, sizeof *st);
  int nf = 0, ns = 0, rc = 1;
  DIR *dp = opendir(dir);
  if (!f || !st || !dp) { fprintf(stderr, "baton set: cannot read %s\n", dir); goto out; }
  for (struct dirent *e; (e = readdir(dp)) && nf < TUNE_FILES;) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml")) continue;
    snprintf(f[nf].path, sizeof f[nf].path, "%s/%s", dir, e->d_name);
    rt_diag *d = rt_diag_new(8);
    if (ir_read_file(f[nf].path, &f[nf].p, d) || ir_check(f[nf].p, d)) {
      fprintf(stderr, "baton set: %s: invalid\n%s", f[nf].path, rt_diag_text(d));
      rt_diag_free(d);
      goto out;
    }
    rt_diag_free(d);
    nf++;
  }
  /* stages: same collective, kind and range (fused programs and those of every size stay as they are) */
  for (int i = 0; i < nf; i++) {
    const ir_prog *p = f[i].p;
    if (ir_prog_fused(p) || (!p->minbytes && !p->maxbytes)) continue;
    int s = 0;
    for (; s < ns; s++) {
      const ir_prog *q = f[st[s].m[0]].p;
      if (q->coll == p->coll && ir_prog_direct(q) == ir_prog_direct(p) && st[s].lo == p->minbytes &&
          st[s].hi == p->maxbytes && st[s].nm < TUNE_MEMBERS)
        break;
    }
    if (s == ns) st[ns++] = (stage){.lo = p->minbytes, .hi = p->maxbytes};
    st[s].m[st[s].nm++] = i;
  }
  qsort(st, (size_t)ns, sizeof *st, by_lo);
  /* chains: a kind of one collective's stages whose ranges follow one another */
  unsigned char *done = calloc((size_t)ns + 1, 1);
  stage *chain = calloc((size_t)ns + 1, sizeof *chain);
  int *at = calloc((size_t)ns + 1, sizeof *at);
  if (!done || !chain || !at) { free(done); free(chain); free(at); goto out; }
  rc = 0;
  for (int s = 0; s < ns && !rc; s++) {
    if (done[s]) continue;
    const ir_prog *p = f[st[s].m[0]].p;
    int n = 0;
    for (int t = s; t < ns; t++) {
      const ir_prog *q = f[st[t].m[0]].p;
      if (done[t] || q->coll != p->coll || ir_prog_direct(q) != ir_prog_direct(p)) continue;
      if (n && (!chain[n - 1].hi || st[t].lo != chain[n - 1].hi + 1)) continue;
      at[n] = t;
      chain[n++] = st[t];
      done[t] = 1;
    }
    if (n < 2) continue;
    for (int k = 0; k < n && !rc; k++)
      if (!predict(&chain[k], f, spec, chain[n - 1].hi)) rc = 1;
    if (rc) break;
    retune(chain, n);
    for (int k = 0; k < n; k++) {
      const stage *c = &chain[k];
      char was[64], now[64];
      range_text(st[at[k]].lo, st[at[k]].hi, was, sizeof was);
      range_text(c->lo, c->hi, now, sizeof now);
      for (int i = 0; i < c->nm; i++) {
        file *x = &f[c->m[i]];
        if (c->dropped) {
          if (!quiet) printf("%s: dropped (never predicted faster than the stage before it in %s)\n", x->path, was);
          if (unlink(x->path)) rc = 1;
          continue;
        }
        if (c->lo == st[at[k]].lo && c->hi == st[at[k]].hi) continue;
        x->p->minbytes = c->lo;
        x->p->maxbytes = c->hi;
        if (ir_write_file(x->p, x->path)) { fprintf(stderr, "baton set: cannot write %s\n", x->path); rc = 1; }
        else if (!quiet) printf("%s: bytes %s (was %s)\n", x->path, now, was);
      }
    }
  }
  free(done);
  free(chain);
  free(at);
out:
  if (dp) closedir(dp);
  for (int i = 0; f && i < nf; i++) ir_prog_free(f[i].p);
  free(f);
  free(st);
  return rc;
}
