/* cc_direct.c -- lowering of direct programs: puts, gets, getrs and xchgs
 * for the operations between ranks, LL landings, and the signals of Simple
 * ones. */
#include "cc_direct.h"

#include <stdlib.h>
#include <string.h>

/* ---- a small map from 64-bit keys to ints (pairs of ranks, steps) ---- */

typedef struct imap { int64_t *key; int *val; int cap, n; } imap;

static void imap_free(imap *m) { cc_free(m->key); cc_free(m->val); }

static size_t imap_hash(int64_t k, int cap) { return (size_t)(((uint64_t)k * 0x9E3779B97F4A7C15ULL) >> 17) % (size_t)cap; }

/* The value at key, or -1 when absent. */
static int imap_get(const imap *m, int64_t k) {
  if (!m->cap) return -1;
  for (size_t i = imap_hash(k, m->cap);; i = (i + 1) % (size_t)m->cap) {
    if (m->key[i] == k) return m->val[i];
    if (m->key[i] < 0) return -1;
  }
}

/* Sets key k (>= 0) to v.  0 when out of memory. */
static int imap_set(imap *m, int64_t k, int v) {
  if (2 * (m->n + 1) > m->cap) {
    imap g = {cc_malloc(((size_t)2 * m->cap + 64) * sizeof(int64_t)), cc_malloc(((size_t)2 * m->cap + 64) * sizeof(int)),
              2 * m->cap + 64, 0};
    if (!g.key || !g.val) { imap_free(&g); return 0; }
    for (int i = 0; i < g.cap; i++) g.key[i] = -1;
    for (int i = 0; i < m->cap; i++)
      if (m->key[i] >= 0) imap_set(&g, m->key[i], m->val[i]);
    imap_free(m);
    *m = g;
  }
  size_t i = imap_hash(k, m->cap);
  while (m->key[i] >= 0 && m->key[i] != k) i = (i + 1) % (size_t)m->cap;
  if (m->key[i] < 0) m->n++;
  m->key[i] = k;
  m->val[i] = v;
  return 1;
}

static unsigned fl(int op) { return ir_op_flags[op]; }

/* Whether instruction i accesses its peer's chunks. */
static int remote(const ins *i) { return (fl(i->op) & (IR_F_PUT | IR_F_GET)) != 0; }

/* The pair (from, to) of a signal stream as a map key. */
static int64_t pair(const lower *w, int from, int to) { return (int64_t)from * w->t->nranks + to; }

/* ---- plan and emission ---- */

int cc_direct_plan(lower *w) {
  const cc_trace *t = w->t;
  w->landing_space = t->nspaces < CC_MAX_SPACES ? t->nspaces : -1;
  w->landing = cc_calloc((size_t)t->nranks + 1, sizeof(int));
  if (!w->landing) return 0;
  if (!ir_proto_landed(t->proto)) return 1;
  /* LL: how often each scratch chunk is written and read, all ranks */
  w->straight = cc_calloc((size_t)t->nops + 1, 1);
  int64_t *base = cc_malloc(((size_t)t->nranks * CC_MAX_SPACES + 1) * sizeof(int64_t)), all = 0;
  if (!w->straight || !base) { cc_free(base); return 0; }
  for (int r = 0; r < t->nranks; r++)
    for (int s = CC_SPACE_FIRST_SCRATCH; s < t->nspaces; s++) {
      base[r * CC_MAX_SPACES + s] = all;
      all += t->size[s][r];
    }
  unsigned char *wr = cc_calloc((size_t)all + 1, 1), *rd = cc_calloc((size_t)all + 1, 1);
  if (!wr || !rd) { cc_free(base); cc_free(wr); cc_free(rd); return 0; }
  for (int k = 0; k < t->nops; k++) {
    const cc_op *o = &t->ops[k];
    for (int j = 0; j < o->count; j++) {
      if (o->dst_space >= CC_SPACE_FIRST_SCRATCH) {
        unsigned char *c = &wr[base[o->dst_rank * CC_MAX_SPACES + o->dst_space] + cc_pat_at(o->dst_idx, o->dst_pat, j)];
        if (*c < 2) ++*c;
      }
      if (o->src_space >= CC_SPACE_FIRST_SCRATCH && o->kind != CC_COMPUTE)
        rd[base[o->src_rank * CC_MAX_SPACES + o->src_space] + cc_pat_at(o->src_idx, o->src_pat, j)] = 1;
    }
  }
  /* A copy between ranks into scratch that nothing else writes and its
   * rank reads (in LL every read of a rank's chunk is that rank's step)
   * meets the landing rules itself. */
  for (int k = 0; k < t->nops; k++) {
    const cc_op *o = &t->ops[k];
    if (o->kind != CC_COPY || o->src_rank == o->dst_rank || o->dst_space < CC_SPACE_FIRST_SCRATCH) continue;
    int ok = 1;
    for (int j = 0; j < o->count && ok; j++) {
      int64_t c = base[o->dst_rank * CC_MAX_SPACES + o->dst_space] + cc_pat_at(o->dst_idx, o->dst_pat, j);
      ok = wr[c] == 1 && rd[c];
    }
    w->straight[k] = (unsigned char)ok;
  }
  cc_free(base); cc_free(wr); cc_free(rd);
  return 1;
}

void cc_direct_free(lower *w) {
  cc_free(w->landing);
  cc_free(w->straight);
}

/* The first of n fresh landing chunks on `rank`, or -1 (error counted). */
static int land(lower *w, int rank, int n, int line) {
  if (w->landing_space < 0) {
    if (!w->errors)
      cc_err(w, line, "a direct program needs a scratch buffer of its own for its landings: name at most %d scratch "
             "buffers", CC_MAX_SPACES - CC_SPACE_FIRST_SCRATCH - 1);
    return -1;
  }
  if (w->landing[rank] > CC_MAX_INDEX - n) {
    if (!w->errors)
      cc_err(w, line, "rank %d needs more than %d landing chunks (one per chunk put to it)", rank, CC_MAX_INDEX);
    return -1;
  }
  int at = w->landing[rank];
  w->landing[rank] += n;
  return at;
}

/* Emits one step of `rank` (channel 0, no placement) with patterns and
 * peer; its index, or -1. */
static int step(lower *w, int rank, int op, int ss, int si, cc_pat sp, int ds, int di, cc_pat dp, int n, int peer,
                int line) {
  int id = cc_emit(w, rank, op, ss, si, ds, di, n, -1, -1, 0, -1, 0, line);
  if (id < 0) return -1;
  w->v[id].spat = sp;
  w->v[id].dpat = dp;
  w->v[id].peer = peer;
  return id;
}

int cc_direct_emit(lower *w, int k, int si, cc_pat sp, int di, cc_pat dp, int n) {
  const cc_op *o = &w->t->ops[k];
  const cc_pat flat = {0, 0};
  int a = o->src_rank, b = o->dst_rank, line = o->line, copy = o->kind == CC_COPY;
  int ss = o->src_space, ds = o->dst_space;
  if (o->kind == CC_SWAP) return step(w, a, IR_OP_XCHG, ss, si, sp, ds, di, dp, n, b, line) >= 0;   /* Simple (l_swap) */
  if (a == b) return step(w, a, copy ? IR_OP_COPY : IR_OP_REDUCE, ss, si, sp, ds, di, dp, n, -1, line) >= 0;
  if (w->t->proto == IR_PROTO_SIMPLE) {
    if (copy && o->via == CC_VIA_GET) return step(w, b, IR_OP_GET, ss, si, sp, ds, di, dp, n, a, line) >= 0;
    if (copy) return step(w, a, IR_OP_PUT, ss, si, sp, ds, di, dp, n, b, line) >= 0;
    if (o->via != CC_VIA_PUT) return step(w, b, IR_OP_GETR, ss, si, sp, ds, di, dp, n, a, line) >= 0;
  } else if (copy && w->straight[k]) {
    return step(w, a, IR_OP_PUT, ss, si, sp, ds, di, dp, n, b, line) >= 0;
  }
  /* through a fresh landing of b: put there, then b copies or reduces it into place */
  int at = land(w, b, n, line);
  if (at < 0) return 0;
  if (step(w, a, IR_OP_PUT, ss, si, sp, w->landing_space, at, flat, n, b, line) < 0) return 0;
  return step(w, b, copy ? IR_OP_COPY : IR_OP_REDUCE, w->landing_space, at, flat, ds, di, dp, n, -1, line) >= 0;
}

/* ---- signals (Simple) ---- */

/* A sig of rank x to y, after instruction `after` (-1: none); its index or -1. */
static int make_sig(lower *w, int x, int y, int after, int role, int line) {
  int s = cc_emit(w, x, IR_OP_SIG, CC_SPACE_INPUT, -1, CC_SPACE_OUTPUT, -1, 1, -1, -1, 0, -1, 0, line);
  if (s < 0) return -1;
  w->v[s].peer = y;
  w->v[s].role = role;
  if (after >= 0 && !cc_add_pred(&w->v[s], after)) return -1;
  return s;
}

/* A wait of rank y for sig s of rank x (its cnt is settled after
 * scheduling); its index or -1. */
static int make_wait(lower *w, int y, int x, int s, int line) {
  int q = cc_emit(w, y, IR_OP_WAIT, CC_SPACE_INPUT, -1, CC_SPACE_OUTPUT, -1, 1, -1, -1, 0, -1, 0, line);
  if (q < 0) return -1;
  w->v[q].peer = x;
  if (s >= 0 && !cc_add_pred(&w->v[q], s)) return -1;
  return q;
}

/* Replaces every predecessor of a step on another rank by a wait for a
 * sig that rank issues after it (one sig and wait per source step and
 * waiting rank). */
static int data_edges(lower *w, int n0, imap *waits) {
  int nr = w->t->nranks;
  for (int b = 0; b < n0; b++)
    for (int k = 0; k < w->v[b].npred; k++) {
      int a = w->v[b].pred[k], x = w->v[a].rank, y = w->v[b].rank;
      if (x == y) continue;
      int64_t key = (int64_t)a * nr + y;
      int q = imap_get(waits, key);
      if (q < 0) {
        int s = make_sig(w, x, y, a, CC_SIG_DATA, w->v[a].line);
        if (s < 0 || (q = make_wait(w, y, x, s, w->v[b].line)) < 0 || !imap_set(waits, key, q)) return 0;
      }
      ins *B = &w->v[b];
      int dup = 0;
      for (int j = 0; j < B->npred; j++) dup |= B->pred[j] == q;
      if (dup) B->pred[k--] = B->pred[--B->npred];
      else B->pred[k] = q;
    }
  return 1;
}

/* The start rule: a remote access that waits for no signal of the rank it
 * touches waits for one that rank issues at its start (one per pair). */
static int start_rule(lower *w, int n0) {
  int nr = w->t->nranks, ok = 0;
  imap start = {0};
  for (int b = 0; b < n0; b++) {
    const ins *B = &w->v[b];
    if (B->dead || !remote(B)) continue;
    int x = B->peer, y = B->rank, has = 0;
    for (int k = 0; k < B->npred && !has; k++) has = w->v[B->pred[k]].op == IR_OP_WAIT && w->v[B->pred[k]].peer == x;
    if (has) continue;
    int64_t key = (int64_t)x * nr + y;
    int q = imap_get(&start, key);
    if (q < 0) {
      int s = make_sig(w, x, y, -1, CC_SIG_START, B->line);
      if (s < 0 || (q = make_wait(w, y, x, s, w->v[b].line)) < 0 || !imap_set(&start, key, q)) goto out;
    }
    if (!cc_add_pred(&w->v[b], q)) goto out;
  }
  ok = 1;
out:
  imap_free(&start);
  return ok;
}

/* The end rule: after all of rank y's remote accesses to x, a sig of y to
 * x (taken by x's final wait, cc_direct_settle). */
static int end_rule(lower *w, int n0) {
  int nr = w->t->nranks, ok = 0;
  imap end = {0};
  for (int b = 0; b < n0; b++) {
    if (w->v[b].dead || !remote(&w->v[b])) continue;
    int y = w->v[b].rank, x = w->v[b].peer;
    int64_t key = (int64_t)y * nr + x;
    int s = imap_get(&end, key);
    if (s < 0 && ((s = make_sig(w, y, x, -1, CC_SIG_END, 0)) < 0 || !imap_set(&end, key, s))) goto out;
    w->v[s].line = w->v[b].line;   /* the line of the last access */
    if (!cc_add_pred(&w->v[s], b)) goto out;
  }
  ok = 1;
out:
  imap_free(&end);
  return ok;
}

/* LL: the only orders between ranks are puts before the steps that read
 * their landings (the LL flags keep them); and a rank that puts to a peer
 * must end its call only after the peer's has started (docs/IR.md, "Direct
 * steps"): where the peer puts nothing back, it signals the rank at its
 * start (a sig of the end rule's role, which nothing drops), and
 * cc_direct_settle gives the rank the final wait that takes it. */
static int ll_sync(lower *w) {
  int n0 = w->n, ok = 0;
  for (int b = 0; b < n0; b++) {
    const ins *B = &w->v[b];
    for (int k = 0; k < B->npred; k++) {
      const ins *A = &w->v[B->pred[k]];
      if (A->rank == B->rank || (A->op == IR_OP_PUT && A->peer == B->rank)) continue;
      cc_err(w, B->line, "rank %d's step waits for rank %d's, an order between ranks that a direct LL program cannot "
             "keep (only a put before the reads of its landing); this is a bug in the compiler", B->rank, A->rank);
      return 0;
    }
  }
  imap puts = {0}, token = {0};
  for (int b = 0; b < n0; b++)
    if (w->v[b].op == IR_OP_PUT && !w->v[b].dead && imap_get(&puts, pair(w, w->v[b].rank, w->v[b].peer)) < 0 &&
        !imap_set(&puts, pair(w, w->v[b].rank, w->v[b].peer), b))
      goto out;
  for (int b = 0; b < n0; b++) {
    const ins *B = &w->v[b];
    if (B->op != IR_OP_PUT || B->dead || imap_get(&puts, pair(w, B->peer, B->rank)) >= 0 ||
        imap_get(&token, pair(w, B->peer, B->rank)) >= 0)
      continue;
    int x = B->rank, y = B->peer, line = B->line;   /* (B may move: make_sig grows w->v) */
    int s = make_sig(w, y, x, -1, CC_SIG_END, line);
    if (s < 0 || !imap_set(&token, pair(w, y, x), s)) goto out;
  }
  ok = 1;
out:
  imap_free(&puts);
  imap_free(&token);
  return ok;
}

int cc_direct_sync(lower *w) {
  if (w->t->proto != IR_PROTO_SIMPLE) return ll_sync(w);
  int n0 = w->n;
  imap waits = {0};
  int ok = data_edges(w, n0, &waits) && start_rule(w, n0) && end_rule(w, n0);
  imap_free(&waits);
  return ok;
}

/* ---- after scheduling: signal counts ---- */


static int cmp_key(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Marks dead the end sigs that a later data sig to the same peer
 * follows: that sig carries the end rule too. */
static int drop_end_sigs(lower *w, const int *order, int live, const int *pos) {
  imap latest = {0};   /* (rank, peer) -> the latest position of a data sig */
  for (int q = 0; q < live; q++) {
    const ins *S = &w->v[order[q]];
    if (S->op == IR_OP_SIG && S->role == CC_SIG_DATA && !imap_set(&latest, pair(w, S->rank, S->peer), q)) {
      imap_free(&latest);
      return 0;
    }
  }
  for (int q = 0; q < live; q++) {
    ins *E = &w->v[order[q]];
    if (E->op != IR_OP_SIG || E->role != CC_SIG_END) continue;
    int last = -1;
    for (int k = 0; k < E->npred; k++) if (pos[E->pred[k]] > last) last = pos[E->pred[k]];
    if (imap_get(&latest, pair(w, E->rank, E->peer)) > last) E->dead = 1;
  }
  imap_free(&latest);
  return 1;
}

/* The state of cc_direct_settle: the streams (from, to) of the signals
 * and, per instruction, its place in them. */
typedef struct streams {
  lower *w;
  const int *order;
  int live;
  int *fwd;         /* a merged sig -> the sig that carries it */
  int *idx;         /* a sig -> its number in its stream */
  int *prev;        /* [rank]: scratch */
  imap slot;        /* (from, to) -> index of the stream */
  int nkeys;
  int *total, *taken, *lastline;
  int64_t *keys;    /* per stream: (to, from) as to * nranks + from */
} streams;

/* The sig that carries sig s. */
static int carrier(const streams *z, int s) {
  while (z->fwd[s] != s) s = z->fwd[s];
  return s;
}

/* Adjacent sigs of a rank to one peer: the later carries them all. */
static void merge_sigs(streams *z) {
  lower *w = z->w;
  for (int r = 0; r < w->t->nranks; r++) z->prev[r] = -1;
  for (int q = 0; q < z->live; q++) {
    ins *I = &w->v[z->order[q]];
    if (I->dead) continue;
    int p = z->prev[I->rank];
    if (p >= 0 && I->op == IR_OP_SIG && w->v[p].op == IR_OP_SIG && w->v[p].peer == I->peer) {
      w->v[p].dead = 1;
      z->fwd[p] = z->order[q];
    }
    z->prev[I->rank] = z->order[q];
  }
}

/* Numbers every live sig in its stream and gives each wait (but those
 * `gone`) cnt = the signals up to its sig's beyond those its rank has
 * taken from that stream, or marks it dead when none (an earlier wait
 * took them; so also a wait whose sig drop_untaken dropped).  0 when out
 * of memory. */
static int count_signals(streams *z, const unsigned char *gone) {
  lower *w = z->w;
  int nr = w->t->nranks;
  for (int q = 0; q < z->live; q++) {
    const ins *S = &w->v[z->order[q]];
    if (S->dead || S->op != IR_OP_SIG) continue;
    int64_t k = pair(w, S->rank, S->peer);
    if (imap_get(&z->slot, k) >= 0) continue;
    if (!imap_set(&z->slot, k, z->nkeys++)) return 0;
  }
  cc_free(z->total); cc_free(z->taken); cc_free(z->lastline); cc_free(z->keys);
  z->total = cc_calloc((size_t)z->nkeys + 1, sizeof(int));
  z->taken = cc_calloc((size_t)z->nkeys + 1, sizeof(int));
  z->lastline = cc_calloc((size_t)z->nkeys + 1, sizeof(int));
  z->keys = cc_malloc(((size_t)z->nkeys + 1) * sizeof(int64_t));
  if (!z->total || !z->taken || !z->lastline || !z->keys) return 0;
  for (int k = 0; k < z->nkeys; k++) z->keys[k] = -1;
  for (int q = 0; q < z->live; q++) {
    const ins *S = &w->v[z->order[q]];
    if (S->dead || S->op != IR_OP_SIG) continue;
    int k = imap_get(&z->slot, pair(w, S->rank, S->peer));
    z->idx[z->order[q]] = z->total[k]++;
    z->lastline[k] = S->line;
    z->keys[k] = (int64_t)S->peer * nr + S->rank;   /* sorted by the waiting rank, then the signalling one */
  }
  for (int q = 0; q < z->live; q++) {
    ins *W = &w->v[z->order[q]];
    if (W->op != IR_OP_WAIT || gone[z->order[q]]) continue;
    int s = carrier(z, W->pred[0]), k = imap_get(&z->slot, pair(w, W->peer, W->rank));
    W->dead = 0;
    if (w->v[s].dead) { W->dead = 1; continue; }
    int need = z->idx[s] + 1 - z->taken[k];
    if (need <= 0) { W->dead = 1; continue; }
    W->count = need;
    z->taken[k] += need;
  }
  return 1;
}

/* The order of two waits for one peer: by their sigs' numbers, then ids. */
static int later(const streams *z, int a, int b) {
  int x = z->idx[carrier(z, z->w->v[a].pred[0])], y = z->idx[carrier(z, z->w->v[b].pred[0])];
  return x != y ? x > y : a > b;
}

/* Marks gone (and dead) every wait each of whose steps also waits for a
 * later data sig of the same peer: that one orders them (a start sig is
 * no such order: drop_start_waits may take its wait away).  0 when out
 * of memory. */
static int drop_redundant_waits(streams *z, unsigned char *gone) {
  lower *w = z->w;
  int *succs = cc_calloc((size_t)w->n + 1, sizeof(int)), *beaten = cc_calloc((size_t)w->n + 1, sizeof(int));
  if (!succs || !beaten) { cc_free(succs); cc_free(beaten); return 0; }
  for (int q = 0; q < z->live; q++) {
    const ins *B = &w->v[z->order[q]];
    if (B->dead || B->op == IR_OP_WAIT) continue;
    for (int k = 0; k < B->npred; k++) {
      int a = B->pred[k];
      if (w->v[a].op != IR_OP_WAIT) continue;
      succs[a]++;
      for (int j = 0; j < B->npred; j++) {
        int c = B->pred[j];
        if (c != a && !gone[c] && w->v[c].op == IR_OP_WAIT && w->v[c].peer == w->v[a].peer &&
            w->v[w->v[c].pred[0]].role != CC_SIG_START && later(z, c, a)) {
          beaten[a]++;
          break;
        }
      }
    }
  }
  for (int q = 0; q < z->live; q++) {
    int a = z->order[q];
    if (w->v[a].op == IR_OP_WAIT && succs[a] && beaten[a] == succs[a]) { gone[a] = 1; w->v[a].dead = 1; }
  }
  cc_free(succs);
  cc_free(beaten);
  return 1;
}

/* The most bits drop_start_waits spends on what each step knows (64 MiB). */
#define KNOWN_BUDGET (INT64_C(1) << 29)

/* Marks gone (and dead) the start rule's waits that other orders make
 * redundant: every step waiting on one already happens after some step of
 * the rank it touches through data signals and program order alone (in a
 * ring, a put into a chunk the next rank's getr read waits for that
 * getr, which waited for the value its owner wrote).  What each step
 * knows (the ranks with a step before it) is a bit set per step along the
 * order, counting no start signal and no wait gone already, so it holds
 * whichever start waits go; a wait an earlier one covers counts where it
 * is (the earlier one, a data wait, takes a later signal of the stream;
 * start sigs are the first of theirs).  Past KNOWN_BUDGET bits all stay.
 * 0 when out of memory. */
static int drop_start_waits(streams *z, const int *pos, unsigned char *gone) {
  lower *w = z->w;
  int nr = w->t->nranks;
  int64_t words = (nr + 63) / 64;
  if (words * 64 * z->live > KNOWN_BUDGET) return 1;
  uint64_t *known = cc_calloc((size_t)(words * z->live) + 1, sizeof(uint64_t));
  unsigned char *needed = cc_calloc((size_t)w->n + 1, 1);
  if (!known || !needed) { cc_free(known); cc_free(needed); return 0; }
  for (int r = 0; r < nr; r++) z->prev[r] = -1;
  for (int q = 0; q < z->live; q++) {
    const ins *I = &w->v[z->order[q]];
    uint64_t *k = known + words * q;
    k[I->rank / 64] |= UINT64_C(1) << (I->rank % 64);
    if (z->prev[I->rank] >= 0)
      for (int64_t j = 0; j < words; j++) k[j] |= known[words * z->prev[I->rank] + j];
    z->prev[I->rank] = q;
    for (int e = 0; e < I->npred && !gone[z->order[q]]; e++) {
      const ins *P = &w->v[I->pred[e]];
      if ((P->op == IR_OP_SIG && P->role == CC_SIG_START) || pos[I->pred[e]] < 0 || gone[I->pred[e]]) continue;
      for (int64_t j = 0; j < words; j++) k[j] |= known[words * pos[I->pred[e]] + j];
    }
  }
  for (int q = 0; q < z->live; q++) {   /* a start wait is needed by a step that knows its rank no other way */
    const ins *B = &w->v[z->order[q]];
    for (int e = 0; e < B->npred; e++) {
      const ins *W = &w->v[B->pred[e]];
      if (W->op == IR_OP_WAIT && w->v[W->pred[0]].role == CC_SIG_START &&
          !(known[words * q + W->peer / 64] >> (W->peer % 64) & 1))
        needed[B->pred[e]] = 1;
    }
  }
  for (int q = 0; q < z->live; q++) {
    int a = z->order[q];
    const ins *W = &w->v[a];
    if (W->op == IR_OP_WAIT && W->npred && w->v[W->pred[0]].role == CC_SIG_START && !needed[a]) {
      gone[a] = 1;
      w->v[a].dead = 1;
    }
  }
  cc_free(known);
  cc_free(needed);
  return 1;
}

/* Marks dead the start and data sigs every wait of which is gone: each
 * step that waited for a data sig waits for a later one of the same
 * stream (drop_redundant_waits), which carries the end rule too; a start
 * sig's steps know its rank otherwise (drop_start_waits).  A wait that an
 * earlier one covers keeps its sig: the cover may be gone.  Returns how
 * many, -1 when out of memory. */
static int drop_untaken(streams *z, const unsigned char *gone) {
  lower *w = z->w;
  int n = 0;
  unsigned char *taken = cc_calloc((size_t)w->n + 1, 1);
  if (!taken) return -1;
  for (int q = 0; q < z->live; q++) {
    const ins *W = &w->v[z->order[q]];
    if (!gone[z->order[q]] && W->op == IR_OP_WAIT) taken[carrier(z, W->pred[0])] = 1;
  }
  for (int q = 0; q < z->live; q++) {
    ins *S = &w->v[z->order[q]];
    if (!S->dead && S->op == IR_OP_SIG && S->role != CC_SIG_END && !taken[z->order[q]]) { S->dead = 1; n++; }
  }
  cc_free(taken);
  return n;
}

/* Whether data step F would join the run of data step P on its rank in
 * the executor (runtime/rt_direct.c): the same count, and F takes the
 * value P leaves (a reduction into, or a copy or put from, a chunk of this
 * rank that P read or wrote).  An approximation that errs towards yes. */
static int joins_run(const ins *P, const ins *F) {
  const unsigned data = IR_F_SRC | IR_F_DST;
  if (!(fl(P->op) & data) || !(fl(F->op) & data) ||
      (fl(P->op) | fl(F->op)) & (IR_F_SEND | IR_F_RECV | IR_F_COMP | IR_F_SWAP) ||   /* an xchg runs alone */
      P->count != F->count)
    return 0;
  int fs = (fl(F->op) & IR_F_RED) || F->op == IR_OP_GET ? F->dspace : F->sspace;
  int fi = (fl(F->op) & IR_F_RED) || F->op == IR_OP_GET ? F->didx : F->sidx;
  int p_src_local = !(fl(P->op) & IR_F_GET), p_dst_local = !(fl(P->op) & IR_F_PUT);
  return (p_src_local && P->sspace == fs && P->sidx == fi) || (p_dst_local && P->dspace == fs && P->didx == fi);
}

/* Moves a wait of order[0..live) down to just before the first step
 * that needs it (the schedule runs by depth, which puts every wait of a
 * pipeline ahead of its first put: a rank forwarding pieces would wait for
 * all of them before sending one).  The order stays topological: a wait
 * still follows what it followed and precedes what needs it, so each
 * rank's sequence stays a run of one global order (deadlock-free) and
 * each stream's waits keep their order.  0 when out of memory. */
static int sink_waits(lower *w, int *order, int live) {
  int n = w->n, nr = w->t->nranks, m = 0;
  int *first = cc_malloc(((size_t)n + 1) * sizeof(int)), *out = cc_malloc(((size_t)live + 1) * sizeof(int));
  int *head = cc_malloc(((size_t)live + 1) * sizeof(int)), *next = cc_malloc(((size_t)n + 1) * sizeof(int));
  int *maxf = cc_malloc(((size_t)nr * nr + 1) * sizeof(int));   /* per (rank, peer): the latest first use so far */
  if (!first || !out || !head || !next || !maxf) goto done;
  for (int i = 0; i < n; i++) first[i] = -1;
  for (int q = 0; q < live; q++) {
    const ins *B = &w->v[order[q]];
    for (int k = 0; k < B->npred; k++)
      if (w->v[B->pred[k]].op == IR_OP_WAIT && first[B->pred[k]] < 0) first[B->pred[k]] = q;
  }
  /* Only a wait of a pipeline moves: one that sits ahead of a step an
   * earlier wait for the same peer holds back (a rank forwarding pieces
   * from one peer).  Waits for different peers stay together (the
   * executor takes them at once and the steps after them in one pass), as
   * does a wait whose stream's earlier waits are all served already.  It
   * never moves into a run: it goes before the run's first step (a
   * one-pass reduction of several chunks stays one pass). */
  for (int i = 0; i < nr * nr; i++) maxf[i] = -1;
  for (int q = 0; q < live; q++) {
    int a = order[q];
    if (w->v[a].op != IR_OP_WAIT || first[a] <= q) continue;
    int *mf = &maxf[w->v[a].rank * nr + w->v[a].peer], pipelined = *mf > q, f = first[a];
    if (f > *mf) *mf = f;
    if (!pipelined) { first[a] = -1; continue; }
    for (int p = f - 1; p > q; p--) {
      const ins *P = &w->v[order[p]];
      if (P->rank != w->v[a].rank || P->op == IR_OP_WAIT) continue;
      if (!joins_run(P, &w->v[order[f]])) break;
      f = p;
    }
    first[a] = f;
  }
  /* per target position, the waits moved there, in their order */
  for (int q = 0; q < live; q++) head[q] = -1;
  for (int q = live - 1; q >= 0; q--) {   /* backwards, so each list comes out in order */
    int a = order[q];
    if (w->v[a].op == IR_OP_WAIT && first[a] > q) { next[a] = head[first[a]]; head[first[a]] = a; }
  }
  for (int q = 0; q < live; q++) {
    for (int a = head[q]; a >= 0; a = next[a]) out[m++] = a;
    int a = order[q];
    if (!(w->v[a].op == IR_OP_WAIT && first[a] > q)) out[m++] = a;
  }
  memcpy(order, out, (size_t)live * sizeof(int));
done:
  cc_free(first); cc_free(out); cc_free(head); cc_free(next); cc_free(maxf);
  return m == live;
}

int cc_direct_settle(lower *w, int **orderp, int live) {
  int *order = *orderp, n = w->n, nr = w->t->nranks, res = -1;
  if (!sink_waits(w, order, live)) return -1;
  int *pos = cc_malloc(((size_t)n + 1) * sizeof(int));
  unsigned char *gone = cc_calloc((size_t)n + 1, 1);   /* waits drop_redundant_waits and drop_start_waits took away */
  streams z = {w, order, live, cc_malloc(((size_t)n + 1) * sizeof(int)), cc_malloc(((size_t)n + 1) * sizeof(int)),
               cc_malloc(((size_t)nr + 1) * sizeof(int)), {0}, 0, NULL, NULL, NULL, NULL};
  if (!pos || !gone || !z.fwd || !z.idx || !z.prev) goto out;
  for (int i = 0; i < n; i++) { pos[i] = -1; z.fwd[i] = i; }
  for (int q = 0; q < live; q++) pos[order[q]] = q;
  if (!drop_end_sigs(w, order, live, pos)) goto out;
  merge_sigs(&z);
  if (!count_signals(&z, gone) || !drop_redundant_waits(&z, gone) || !drop_start_waits(&z, pos, gone)) goto out;
  int dropped = drop_untaken(&z, gone);
  if (dropped < 0) goto out;
  if (dropped) merge_sigs(&z);   /* fewer signals: merge and count again */
  if (!count_signals(&z, gone)) goto out;
  /* the rebuilt order: the live steps, then every rank's final waits */
  int extra = 0;
  for (int k = 0; k < z.nkeys; k++) extra += z.total[k] > z.taken[k];
  int *next = cc_malloc(((size_t)live + extra + 1) * sizeof(int)), m = 0;
  if (!next) goto out;
  for (int q = 0; q < live; q++) if (!w->v[order[q]].dead) next[m++] = order[q];
  cc_free(order);
  *orderp = order = next;
  qsort(z.keys, z.nkeys, sizeof *z.keys, cmp_key);
  for (int j = 0; j < z.nkeys; j++) {
    if (z.keys[j] < 0) continue;   /* a stream left with no sig */
    int x = (int)(z.keys[j] / nr), y = (int)(z.keys[j] % nr), k = imap_get(&z.slot, pair(w, y, x));
    if (z.total[k] == z.taken[k]) continue;
    int f = make_wait(w, x, y, -1, z.lastline[k]);
    if (f < 0) goto out;
    w->v[f].count = z.total[k] - z.taken[k];
    order[m++] = f;
  }
  /* adjacent waits of a rank for one peer: the later takes both's signals */
  for (int r = 0; r < nr; r++) z.prev[r] = -1;
  for (int q = 0; q < m; q++) {
    ins *I = &w->v[order[q]];
    int p = z.prev[I->rank];
    if (p >= 0 && I->op == IR_OP_WAIT && w->v[p].op == IR_OP_WAIT && w->v[p].peer == I->peer) {
      I->count += w->v[p].count;
      w->v[p].dead = 1;
    }
    z.prev[I->rank] = order[q];
  }
  res = 0;
  for (int q = 0; q < m; q++) if (!w->v[order[q]].dead) order[res++] = order[q];
out:
  imap_free(&z.slot);
  cc_free(pos); cc_free(gone); cc_free(z.fwd); cc_free(z.idx); cc_free(z.prev);
  cc_free(z.total); cc_free(z.taken); cc_free(z.lastline); cc_free(z.keys);
  return res;
}
