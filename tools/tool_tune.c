/* tool_tune.c -- `baton set --system`: the set's size ranges moved to the
 * crossovers `baton sim` predicts on a described system. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cc_compile.h"
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
  for (struct dirent *e; (e = readdir(dp));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml")) continue;
    if (nf == TUNE_FILES) {   /* a set is a few dozen programs: refuse rather than tune part of it */
      fprintf(stderr, "baton set: %s holds more than %d programs; --system tunes at most that many\n", dir, TUNE_FILES);
      goto out;
    }
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

/* --- baton compile --tune --- */

/* The variants compile --tune tries: each key with each of its values,
 * where the script reads the key (a key it never reads is left out). */
static const struct { const char *key; const char *vals[3]; } knobs[] = {
  {"protocol", {"Simple", "LL", "LL128"}},
  {"instances", {"1", "2", "4"}},
  {"channels", {"1", "2", NULL}},
};
enum { NKNOBS = 3, TUNE_MAX_VARIANTS = 27 };

typedef struct variant { char desc[96]; ir_prog *p; double t[TUNE_SIZES]; } variant;

/* Whether the script reads parameter key (a compile with it set to v is
 * not refused as "never read"). */
static int reads(const char *script, const char *const *params, int nparams, const char *kv) {
  const char *all[130];
  for (int i = 0; i < nparams; i++) all[i] = params[i];
  all[nparams] = kv;
  rt_diag *d = rt_diag_new(8);
  ir_prog *p = NULL;
  bt_result r = cc_compile_file(script, all, nparams + 1, NULL, &p, NULL, d);
  int never = r && strstr(rt_diag_text(d), "is never read");
  ir_prog_free(p);
  rt_diag_free(d);
  return !never;
}

/* The variant that runs size k: the previous size's while it is within 2%
 * of the fastest (near-ties do not cut a range), else the first within 2%
 * (the variants go from fewer instances and channels to more). */
static int pick(const variant *v, int nv, int k, int prev) {
  int best = 0;
  for (int i = 1; i < nv; i++) if (v[i].t[k] < v[best].t[k]) best = i;
  double near = v[best].t[k] * 1.02;
  if (prev >= 0 && v[prev].t[k] <= near) return prev;
  for (int i = 0; i < nv; i++) if (v[i].t[k] <= near) return i;
  return best;
}

int tool_compile_tune(const char *script, const char *const *params, int nparams, const struct sim_spec *spec,
                      const char *outdir, int quiet) {
  variant *v = calloc(TUNE_MAX_VARIANTS, sizeof *v);
  int nv = 0, rc = 1, read[NKNOBS];
  if (!v) return 1;
  for (int k = 0; k < NKNOBS; k++) {
    char kv[64];
    snprintf(kv, sizeof kv, "%s=%s", knobs[k].key, knobs[k].vals[0]);
    int given = 0;
    for (int i = 0; i < nparams; i++) given |= !strncmp(params[i], knobs[k].key, strlen(knobs[k].key)) &&
                                                params[i][strlen(knobs[k].key)] == '=';
    read[k] = !given && reads(script, params, nparams, kv);   /* a --param the user gave stays as given */
  }
  /* every combination of the knobs the script reads */
  int idx[NKNOBS] = {0};
  for (;;) {
    const char *all[130];
    char kvs[NKNOBS][64];
    int n = 0;
    for (int i = 0; i < nparams; i++) all[n++] = params[i];
    char *desc = v[nv].desc;
    desc[0] = 0;
    for (int k = 0; k < NKNOBS; k++) {
      if (!read[k]) continue;
      snprintf(kvs[k], sizeof kvs[k], "%s=%s", knobs[k].key, knobs[k].vals[idx[k]]);
      all[n++] = kvs[k];
      snprintf(desc + strlen(desc), sizeof v[nv].desc - strlen(desc), "%s%s", *desc ? " " : "", kvs[k]);
    }
    rt_diag *d = rt_diag_new(8);
    if (!cc_compile_file(script, all, n, NULL, &v[nv].p, NULL, d)) nv++;   /* one that does not compile is no variant */
    else if (!quiet) fprintf(stderr, "baton compile --tune: %s does not compile (%s)\n", desc, rt_diag_text(d));
    rt_diag_free(d);
    int k = 0;   /* the next combination */
    for (; k < NKNOBS; k++) {
      if (!read[k]) continue;
      if (++idx[k] < 3 && knobs[k].vals[idx[k]]) break;
      idx[k] = 0;
    }
    if (k == NKNOBS || nv == TUNE_MAX_VARIANTS) break;
  }
  if (!nv) { fprintf(stderr, "baton compile --tune: no variant of %s compiles\n", script); goto out; }
  for (int i = 0; i < nv; i++) {
    int timed = 0;
    rt_diag *d = rt_diag_new(8), *later = rt_diag_new(8);
    for (int k = 0; k < TUNE_SIZES; k++) {
      sim_opts o = {.bytes = grid(k), .dtype = IP_F32, .inplace = -1};
      sim_report rep;
      if (k) rt_diag_clear(later);
      bt_result r = sim_run(v[i].p, spec, &o, &rep, k ? later : d);   /* the first size's reason is kept */
      v[i].t[k] = r ? 1e300 : rep.time_us;   /* a size it cannot time (SIM_MAX_EVENTS) it does not win */
      timed += !r;
    }
    if (!timed) {   /* the system cannot run it at all: the reason is the same for every variant */
      fprintf(stderr, "baton compile --tune: %s cannot be simulated on %s:\n%s", script, spec->name, rt_diag_text(d));
      rt_diag_free(d);
      rt_diag_free(later);
      goto out;
    }
    rt_diag_free(d);
    rt_diag_free(later);
  }
  /* segments of sizes with one winner, each written with its range */
  const char *base = strrchr(script, '/');
  base = base ? base + 1 : script;
  char stem[128];
  snprintf(stem, sizeof stem, "%.*s", (int)(strlen(base) > 4 && !strcmp(base + strlen(base) - 4, ".lua") ? strlen(base) - 4 : strlen(base)), base);
  int seg = 0, win[TUNE_SIZES];
  for (int k = 0; k < TUNE_SIZES; k++) win[k] = pick(v, nv, k, k ? win[k - 1] : -1);
  for (int k = 0; k < TUNE_SIZES;) {
    int w = win[k], e = k + 1;
    while (e < TUNE_SIZES && win[e] == w) e++;
    ir_prog *p = v[w].p;
    p->minbytes = k ? grid(k) : 0;
    p->maxbytes = e < TUNE_SIZES ? grid(e) - 1 : 0;
    char path[PATH_MAX], r[64];
    snprintf(path, sizeof path, "%s/%s_%d_%dr.xml", outdir, stem, seg++, p->ngpus);
    if (ir_write_file(p, path)) { fprintf(stderr, "baton compile --tune: cannot write %s\n", path); goto out; }
    range_text(p->minbytes, p->maxbytes, r, sizeof r);
    if (!quiet) printf("%s: %s, bytes %s (%.2f us at %llu bytes)\n", path, *v[w].desc ? v[w].desc : "as written", r,
                       v[w].t[k], (unsigned long long)grid(k));
    k = e;
  }
  rc = 0;
out:
  for (int i = 0; i < nv; i++) ir_prog_free(v[i].p);
  free(v);
  return rc;
}
