/* cc_place.c -- thread blocks: union-find sets of connection endpoints,
 * manual placement (sendtb/recvtb) and numbering. */
#include "cc_ins.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cc_err(lower *w, int line, const char *fmt, ...) {
  char m[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  if (line > 0) rt_diag_add(w->diag, "%s:%d: %s", w->t->script, line, m);
  else rt_diag_add(w->diag, "%s: %s", w->t->script, m);   /* about the whole program */
  w->errors++;
}

int cc_endpoint(const lower *w, int rank, int ch, int e) {
  return (rank * w->nch + ch) * (2 * w->t->nranks + 2) + e;
}

int cc_endpoint_of(const lower *w, const ins *i, int which) {
  if (which == 0 && i->send >= 0) return cc_endpoint(w, i->rank, i->ch, 2 * i->send);
  if (which == 1 && i->recv >= 0) return cc_endpoint(w, i->rank, i->ch, 2 * i->recv + 1);
  return -1;
}

int cc_home(const lower *w, const ins *i) {
  if (i->send >= 0) return cc_endpoint_of(w, i, 0);
  if (i->recv >= 0) return cc_endpoint_of(w, i, 1);
  if (ir_op_flags[i->op] & IR_F_COMP) return cc_endpoint(w, i->rank, i->ch, 2 * w->t->nranks + 1);
  return cc_endpoint(w, i->rank, i->ch, 2 * w->t->nranks);
}

int cc_find(int *parent, int x) {
  while (parent[x] != x) { parent[x] = parent[parent[x]]; x = parent[x]; }
  return x;
}

int cc_sets_init(lower *w) {
  int per = 2 * w->t->nranks + 2;
  w->nend = w->t->nranks * w->nch * per;
  w->parent = cc_malloc((w->nend + 1) * sizeof(int));
  w->info = cc_malloc((w->nend + 1) * sizeof *w->info);
  if (!w->parent || !w->info) return 0;
  for (int e = 0; e < w->nend; e++) {
    w->parent[e] = e;
    w->info[e] = (setinfo){-1, -1, e / per % w->nch, -1, 0, e % per == per - 1};
  }
  for (int i = 0; i < w->n; i++) {
    ins *I = &w->v[i];
    if (I->send >= 0) w->info[cc_endpoint_of(w, I, 0)].send = I->send;
    if (I->recv >= 0) w->info[cc_endpoint_of(w, I, 1)].recv = I->recv;
  }
  return 1;
}

int cc_sets_join(lower *w, int a, int b) {
  int ra = cc_find(w->parent, a), rb = cc_find(w->parent, b);
  if (ra == rb) return 1;
  setinfo *x = &w->info[ra], *y = &w->info[rb];
  /* distinct sets holding a send side each hold distinct send endpoints */
  if ((x->send >= 0 && y->send >= 0) || (x->recv >= 0 && y->recv >= 0) || x->ch != y->ch ||
      (x->fixed >= 0 && y->fixed >= 0 && x->fixed != y->fixed) || x->compute || y->compute)
    return 0;
  w->parent[rb] = ra;
  if (y->send >= 0) x->send = y->send;
  if (y->recv >= 0) x->recv = y->recv;
  if (x->fixed < 0) { x->fixed = y->fixed; x->fixed_line = y->fixed_line; }
  return 1;
}

void cc_pair_peers(lower *w) {
  int nr = w->t->nranks;
  for (int rank = 0; rank < nr; rank++)
    for (int ch = 0; ch < w->nch; ch++)
      for (int q = 0; q < nr; q++) {
        int s = cc_endpoint(w, rank, ch, 2 * q), r = cc_endpoint(w, rank, ch, 2 * q + 1);
        if (w->info[cc_find(w->parent, s)].send == q && w->info[cc_find(w->parent, r)].recv == q)
          cc_sets_join(w, s, r);
      }
}

/* "sends to rank 1 and receives from rank 3 on channel 0" */
static const char *describe(const setinfo *s, char *buf, size_t n) {
  if (s->send >= 0 && s->recv >= 0)
    snprintf(buf, n, "sends to rank %d and receives from rank %d on channel %d", s->send, s->recv, s->ch);
  else if (s->send >= 0) snprintf(buf, n, "sends to rank %d on channel %d", s->send, s->ch);
  else if (s->recv >= 0) snprintf(buf, n, "receives from rank %d on channel %d", s->recv, s->ch);
  else if (s->compute) snprintf(buf, n, "runs the compute steps");
  else snprintf(buf, n, "runs local copies and reductions on channel %d", s->ch);
  return buf;
}

static const char *side(const ins *I, char *buf, size_t n) {
  if (I->send >= 0) snprintf(buf, n, "sendtb=%d: the send from rank %d to rank %d on channel %d", I->fixtb, I->rank, I->send, I->ch);
  else if (I->recv >= 0) snprintf(buf, n, "recvtb=%d: the receive on rank %d from rank %d on channel %d", I->fixtb, I->rank, I->recv, I->ch);
  else snprintf(buf, n, "tb=%d: the local operation on rank %d, channel %d", I->fixtb, I->rank, I->ch);
  return buf;
}

int cc_place_fixed(lower *w, int instances, int max_tbs) {
  int any = 0;
  for (int i = 0; i < w->n; i++) any |= w->v[i].fixtb >= 0;
  if (!any) return 1;
  size_t nkeys = (size_t)w->t->nranks * instances * max_tbs;
  int *owner = cc_malloc(nkeys * sizeof(int));   /* (rank, instance, index) -> an endpoint of its set */
  if (!owner) return 0;
  for (size_t k = 0; k < nkeys; k++) owner[k] = -1;
  char a[160], b[160], c[160];
  for (int i = 0; i < w->n; i++) {
    ins *I = &w->v[i];
    if (I->fixtb < 0) continue;
    if (I->fixtb >= max_tbs) {
      cc_err(w, I->line, "%s: thread block %d is out of range: a rank runs at most %d thread blocks (0..%d)",
             side(I, a, sizeof a), I->fixtb, max_tbs, max_tbs - 1);
      continue;
    }
    int e = cc_home(w, I), r = cc_find(w->parent, e);
    setinfo *s = &w->info[r];
    if (s->fixed >= 0 && s->fixed != I->fixtb) {
      cc_err(w, I->line, "%s: its connection is already placed in tb %d (at %s:%d), and one connection belongs to one thread block",
             side(I, a, sizeof a), s->fixed, w->t->script, s->fixed_line);
      continue;
    }
    size_t key = ((size_t)I->rank * instances + I->inst) * max_tbs + I->fixtb;
    if (owner[key] >= 0 && cc_find(w->parent, owner[key]) != r) {
      int o = cc_find(w->parent, owner[key]);
      setinfo so = w->info[o], sr = w->info[r];
      if (!cc_sets_join(w, owner[key], e)) {
        cc_err(w, I->line, "%s: rank %d tb %d already %s (placed at %s:%d), and this one %s; a thread block has one send peer, one receive peer and one channel",
               side(I, a, sizeof a), I->rank, I->fixtb, describe(&so, b, sizeof b), w->t->script, so.fixed_line,
               describe(&sr, c, sizeof c));
        continue;
      }
      r = cc_find(w->parent, e);
      s = &w->info[r];
    }
    if (s->fixed < 0) { s->fixed = I->fixtb; s->fixed_line = I->line; }
    owner[key] = r;
  }
  cc_free(owner);
  return 1;
}

/* Appends to buf (used so far: *len of cap) like snprintf, never past cap. */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Reports that `rank` needs tot > max_tbs thread blocks, saying what the
 * script can change: at the line whose operations open the most of the
 * rank's thread blocks (line[root]: the first instruction of each set),
 * what the count is made of (send and receive peers, channels, instances,
 * local and compute thread blocks, the highest sendtb/recvtb index) and
 * only the levers the script has (channels when it uses more than one or
 * parallelize replicates them, instances when there are several,
 * placement = "paired" when it is not and a peer's send and receive are
 * apart, fewer peers).
 * Returns 0 when out of memory (nothing reported then but "out of memory"). */
static int too_many_tbs(lower *w, int rank, int tot, int max_tbs, int instances, const int *roots, int nroots,
                        const int *setrank, const int *setinst, const int *line) {
  const cc_trace *t = w->t;
  int nr = t->nranks, nch = w->nch;
  char *peer = cc_calloc((size_t)2 * nr + 1, 1), *chan = cc_calloc((size_t)nch + 1, 1);
  int *lines = cc_malloc(((size_t)tot + 1) * sizeof(int));
  if (!peer || !chan || !lines) { cc_free(peer); cc_free(chan); cc_free(lines); return 0; }
  int ns = 0, nrv = 0, sp = 0, rp = 0, comm = 0, local = 0, compute = 0, nch0 = 0, nl = 0;
  int top = -1, top_line = 0;   /* the highest placed index and where */
  for (int k = 0; k < nroots; k++) {
    int r = roots[k];
    if (setrank[r] != rank) continue;
    const setinfo *s = &w->info[r];
    lines[nl++] = line[r];
    if (s->send >= 0) { ns++; if (!peer[s->send]) { peer[s->send] = 1; sp++; } }
    if (s->recv >= 0) { nrv++; if (!peer[nr + s->recv]) { peer[nr + s->recv] = 1; rp++; } }
    if (s->send >= 0 || s->recv >= 0) comm++;
    else if (s->compute) compute++;
    else local++;
    if (setinst[r] == 0 && s->ch >= 0 && s->ch < nch && !chan[s->ch]) { chan[s->ch] = 1; nch0++; }
    if (s->fixed > top) { top = s->fixed; top_line = s->fixed_line; }
  }
  /* the line that opens the most (the earliest of equals) */
  qsort(lines, nl, sizeof *lines, cmp_int);
  int lead = 0, most = 0;
  for (int i = 0, j; i < nl; i = j) {
    for (j = i; j < nl && lines[j] == lines[i]; j++) {}
    if (j - i > most) { most = j - i; lead = lines[i]; }
  }
  int script_ch = 0, frag = -1;
  for (int i = 0; i < t->nops && !script_ch; i++) script_ch = t->ops[i].ch > 0;
  for (int i = 0; i < t->nfrags && frag < 0; i++) if (t->frags[i].n > 1) frag = i;
  char m[448];
  size_t len = 0;
  add(m, sizeof m, &len, "rank %d needs %d thread blocks, more than the %d a GPU runs at once: ", rank, tot, max_tbs);
  if (comm) {
    add(m, sizeof m, &len, "it sends to %d peer%s and receives from %d", sp, sp == 1 ? "" : "s", rp);
    if (nch0 > 1) add(m, sizeof m, &len, " on %d channels", nch0);
    if (instances > 1)
      add(m, sizeof m, &len, " in each of %d instances (instances = %d at %s:%d)", instances, instances, t->script,
          t->decl_line);
    if (comm == ns + nrv)
      add(m, sizeof m, &len, ", a thread block per peer%s (%d)",
          nch0 > 1 || instances > 1 ? ", direction and channel" : " and direction", comm);
    else
      add(m, sizeof m, &len, ", in %d thread blocks (one holds at most one send and one receive peer)", comm);
  }
  if (local) add(m, sizeof m, &len, "%s%d for local copies and reductions", comm ? ", plus " : "", local);
  if (compute) add(m, sizeof m, &len, "%s1 for compute steps", comm || local ? ", plus " : "");
  if (top >= 0) add(m, sizeof m, &len, "; sendtb/recvtb place up to tb %d (at %s:%d)", top, t->script, top_line);
  const char *lever[5];
  char fragw[160];
  int nlev = 0;
  if (nch0 > 1 && script_ch) lever[nlev++] = "fewer channels";
  if (nch0 > 1 && frag >= 0) {
    snprintf(fragw, sizeof fragw, "a smaller count for parallelize(%d) at %s:%d", t->frags[frag].n, t->script,
             t->frags[frag].line);
    lever[nlev++] = fragw;
  }
  if (instances > 1) lever[nlev++] = "fewer instances";
  if (t->placement != CC_PLACE_PAIRED && comm > (ns > nrv ? ns : nrv))
    lever[nlev++] = "placement = \"paired\" (a peer's send and receive in one thread block)";
  if (comm) lever[nlev++] = "fewer peers";
  for (int i = 0; i < nlev; i++)
    add(m, sizeof m, &len, "%s%s", i == 0 ? "; use " : i + 1 == nlev ? ", or " : ", ", lever[i]);
  cc_err(w, lead, "%s", m);
  cc_free(peer); cc_free(chan); cc_free(lines);
  return 1;
}

int cc_number_tbs(lower *w, const int *order, int live, int instances, int max_tbs, ir_prog *p) {
  int nr = w->t->nranks, ok = 0;
  int *tbof = cc_malloc((w->nend + 1) * sizeof(int)), *roots = cc_malloc((live + 1) * sizeof(int));
  int *count = cc_calloc((size_t)nr * instances + 1, sizeof(int)), *base = cc_calloc((size_t)nr * instances + 1, sizeof(int));
  int *cursor = cc_calloc((size_t)nr * instances + 1, sizeof(int)), *off = cc_calloc(nr + 1, sizeof(int));
  int *used = NULL, *setinst = cc_malloc((w->nend + 1) * sizeof(int)), *setrank = cc_malloc((w->nend + 1) * sizeof(int));
  int *setline = cc_malloc((w->nend + 1) * sizeof(int));   /* line of a set's first instruction */
  int nroots = 0;
  if (!tbof || !roots || !count || !base || !cursor || !off || !setinst || !setrank || !setline) goto out;
  for (int e = 0; e < w->nend; e++) tbof[e] = -1;
  for (int q = 0; q < live; q++) {
    const ins *I = &w->v[order[q]];
    int r = cc_find(w->parent, cc_home(w, I));
    if (tbof[r] != -1) continue;
    tbof[r] = -2;
    roots[nroots++] = r;
    setinst[r] = I->inst;
    setrank[r] = I->rank;
    setline[r] = I->line;
    count[I->rank * instances + I->inst]++;
  }
  for (int r = 0; r < nr; r++) {
    int tot = 0;
    for (int j = 0; j < instances; j++) { base[r * instances + j] = tot; cursor[r * instances + j] = tot; tot += count[r * instances + j]; }
    off[r + 1] = off[r] + tot;
    if (tot > max_tbs) {
      ok = too_many_tbs(w, r, tot, max_tbs, instances, roots, nroots, setrank, setinst, setline);
      goto out;
    }
  }
  used = cc_malloc((off[nr] + 1) * sizeof(int));
  if (!used) goto out;
  for (int k = 0; k < off[nr]; k++) used[k] = -1;
  for (int k = 0; k < nroots; k++) {
    int r = roots[k], rank = setrank[r], bj = rank * instances + setinst[r];
    const setinfo *s = &w->info[r];
    if (s->fixed < 0) continue;
    if (s->fixed >= count[bj]) {
      char inst[48] = "";
      if (instances > 1) snprintf(inst, sizeof inst, " in instance %d", setinst[r]);
      cc_err(w, s->fixed_line, "tb %d is placed on rank %d, but rank %d has only %d thread blocks%s; placed indices must leave no gap (use 0..%d)",
             s->fixed, rank, rank, count[bj], inst, count[bj] - 1);
      continue;
    }
    tbof[r] = base[bj] + s->fixed;
    used[off[rank] + tbof[r]] = r;
  }
  if (w->errors) { ok = 1; goto out; }
  for (int k = 0; k < nroots; k++) {
    int r = roots[k], rank = setrank[r], bj = rank * instances + setinst[r];
    if (w->info[r].fixed >= 0) continue;
    while (used[off[rank] + cursor[bj]] >= 0) cursor[bj]++;
    tbof[r] = cursor[bj];
    used[off[rank] + tbof[r]] = r;
  }
  for (int rank = 0; rank < nr; rank++)
    for (int k = off[rank]; k < off[rank + 1]; k++) {
      const setinfo *s = &w->info[used[k]];
      if (!ir_tb_add(&p->gpus[rank], s->send, s->recv, s->ch)) goto out;
    }
  for (int q = 0; q < live; q++) {
    ins *I = &w->v[order[q]];
    I->tb = tbof[cc_find(w->parent, cc_home(w, I))];
  }
  ok = 1;
out:
  cc_free(tbof); cc_free(roots); cc_free(count); cc_free(base); cc_free(cursor); cc_free(off); cc_free(used);
  cc_free(setinst); cc_free(setrank); cc_free(setline);
  return ok;
}
