/* cc_lower.c -- from chunk operations to scheduled thread-block programs. */
#include "cc_lower.h"
#include "cc_waits.h"
#include "cc_direct.h"
#include "cc_ins.h"
#include "cc_layout.h"
#include "cc_ref.h"
#include "ir_geom.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data dependencies: per rank and location, last writer and readers ---- */

typedef struct access_state { int writer; int *readers; int nreaders, cap; } access_state;

typedef struct deps {
  access_state **a;   /* [rank * CC_MAX_SPACES + space] -> per chunk */
  int *len;
} deps;

static access_state *slot(deps *d, int rank, int space, int idx) {
  int key = rank * CC_MAX_SPACES + space;
  if (idx >= d->len[key]) {
    int len = idx + 1 > 2 * d->len[key] ? idx + 1 : 2 * d->len[key];
    access_state *a = cc_realloc(d->a[key], len * sizeof *a);
    if (!a) return NULL;
    for (int k = d->len[key]; k < len; k++) a[k] = (access_state){-1, NULL, 0, 0};
    d->a[key] = a;
    d->len[key] = len;
  }
  return &d->a[key][idx];
}

/* Records that instruction id reads (write 0) or writes the chunks of
 * `rank` (its own, or a direct step's peer) at pattern pat from idx: it
 * comes after their last writer and, a write, after their readers since. */
static int record(lower *w, deps *d, int id, int rank, int space, int idx, cc_pat pat, int count, int write) {
  for (int c = 0; c < count; c++) {
    access_state *s = slot(d, rank, space, cc_pat_at(idx, pat, c));
    if (!s) return 0;
    if (s->writer >= 0 && s->writer != id && !cc_add_pred(&w->v[id], s->writer)) return 0;
    if (write) {
      for (int k = 0; k < s->nreaders; k++)
        if (s->readers[k] != id && !cc_add_pred(&w->v[id], s->readers[k])) return 0;
      s->writer = id;
      s->nreaders = 0;
    } else if (!cc_int_push(&s->readers, &s->nreaders, &s->cap, id)) {
      return 0;
    }
  }
  return 1;
}

static unsigned fl(int op) { return ir_op_flags[op]; }

static int same_pat(cc_pat a, cc_pat b) { return a.run == b.run && (!a.run || a.stride == b.stride); }

/* Whether the count chunks of pattern ap from a and the count chunks of bp
 * from b may share a chunk: their extents meet (for a pattern, more than
 * its chunks: callers may only skip work when this says no). */
static int may_overlap(int a, cc_pat ap, int acount, int b, cc_pat bp, int bcount) {
  int64_t alo, ahi, blo, bhi;
  cc_pat_extent(ap, acount, &alo, &ahi);
  cc_pat_extent(bp, bcount, &blo, &bhi);
  return a + alo <= b + bhi && b + blo <= a + ahi;
}

/* Reads come before writes so that a reduce's read of dst sees the old
 * writer.  A direct step's remote side is recorded on its peer's chunks (a
 * put writes them, a get or getr reads them, an xchg both), so its
 * predecessors there are the peer's steps or other ranks' accesses to
 * them.  An xchg reads both sides, then writes both. */
static int track(lower *w, deps *d, int id) {
  const ins *i = &w->v[id];
  unsigned f = fl(i->op);
  if ((f & IR_F_SRC) && !record(w, d, id, i->rank, i->sspace, i->sidx, i->spat, i->count, 0)) return 0;
  if ((f & IR_F_GET) && !record(w, d, id, i->peer, i->sspace, i->sidx, i->spat, i->count, 0)) return 0;
  if ((f & IR_F_SWAP) && !record(w, d, id, i->peer, i->dspace, i->didx, i->dpat, i->count, 0)) return 0;
  if ((i->op == IR_OP_REDUCE || i->op == IR_OP_GETR) &&
      !record(w, d, id, i->rank, i->dspace, i->didx, i->dpat, i->count, 0))
    return 0;
  if ((f & IR_F_DST) && !record(w, d, id, i->rank, i->dspace, i->didx, i->dpat, i->count, 1)) return 0;
  if ((f & IR_F_PUT) && !record(w, d, id, i->peer, i->dspace, i->didx, i->dpat, i->count, 1)) return 0;
  if ((f & IR_F_SWAP) && !record(w, d, id, i->rank, i->sspace, i->sidx, i->spat, i->count, 1)) return 0;
  return 1;
}

/* ---- operations to instructions ---- */

/* Sets the patterns of instruction id (-1: none, as emit_ins failed). */
static int with_pats(lower *w, int id, cc_pat sp, cc_pat dp) {
  if (id < 0) return -1;
  w->v[id].spat = sp;
  w->v[id].dpat = dp;
  return id;
}

/* A FIFO swap of rank a's chunks (sa, ai, ap) with rank b's (sb, bi, bp),
 * n of them on channel ch: both sends, then both receives, so that
 * track() orders each rank's receive after its own send of what it
 * overwrites (and no send reads what a receive wrote). */
static int emit_swap(lower *w, int a, int sa, int ai, cc_pat ap, int b, int sb, int bi, cc_pat bp, int n, int ch,
                     int inst, int line) {
  int sab = with_pats(w, cc_emit(w, a, IR_OP_SEND, sa, ai, sb, bi, n, b, -1, ch, -1, inst, line), ap, bp);
  int sba = with_pats(w, cc_emit(w, b, IR_OP_SEND, sb, bi, sa, ai, n, a, -1, ch, -1, inst, line), bp, ap);
  int rab = with_pats(w, cc_emit(w, b, IR_OP_RECV, sa, ai, sb, bi, n, -1, a, ch, -1, inst, line), (cc_pat){0, 0}, bp);
  int rba = with_pats(w, cc_emit(w, a, IR_OP_RECV, sb, bi, sa, ai, n, -1, b, ch, -1, inst, line), (cc_pat){0, 0}, ap);
  if (sab < 0 || sba < 0 || rab < 0 || rba < 0) return 0;
  w->v[rab].msg_of = sab;
  w->v[rba].msg_of = sba;
  return 1;
}

/* Emits the instructions of operation o on IR chunks pattern sp from si /
 * dp from di (n chunks); a send names its receiver's destination. */
static int emit_op(lower *w, const cc_op *o, int si, cc_pat sp, int di, cc_pat dp, int n, int ch, int inst) {
  int a = o->src_rank, b = o->dst_rank;
  if (o->kind == CC_SWAP)
    return emit_swap(w, a, o->src_space, si, sp, b, o->dst_space, di, dp, n, ch, inst, o->line);
  if (o->kind == CC_COMPUTE) {   /* a compute step: src names the input chunks it computes */
    int c = cc_emit(w, a, o->cop, CC_SPACE_INPUT, si, o->dst_space, di, n, -1, -1, ch, -1, inst, o->line);
    if (c < 0) return 0;
    ins *C = &w->v[c];
    memcpy(C->args, o->args, sizeof C->args);
    C->sync = o->sync;
    C->sync_param = o->sync_param;
    C->zerocopy = o->zerocopy;
    return 1;
  }
  if (a == b) {
    int fx = o->sendtb >= 0 ? o->sendtb : o->recvtb;
    return with_pats(w, cc_emit(w, a, o->kind == CC_COPY ? IR_OP_COPY : IR_OP_REDUCE, o->src_space, si,
                                 o->dst_space, di, n, -1, -1, ch, fx, inst, o->line), sp, dp) >= 0;
  }
  int s = with_pats(w, cc_emit(w, a, IR_OP_SEND, o->src_space, si, o->dst_space, di, n, b, -1, ch, o->sendtb, inst,
                                o->line), sp, dp);
  int r = o->kind == CC_COPY
    ? with_pats(w, cc_emit(w, b, IR_OP_RECV, o->src_space, si, o->dst_space, di, n, -1, a, ch, o->recvtb, inst,
                            o->line), (cc_pat){0, 0}, dp)
    : with_pats(w, cc_emit(w, b, IR_OP_RRC, o->dst_space, di, o->dst_space, di, n, -1, a, ch, o->recvtb, inst,
                            o->line), dp, dp);
  if (s < 0 || r < 0) return 0;
  w->v[r].msg_of = s;
  return 1;
}

/* Every operation, for every whole-program instance, on its pieces and
 * channel (cc_layout.h): one instruction per piece of IR chunks that are
 * one pattern at each end (cc_runs_next); in a direct program, the
 * direct steps of cc_direct_emit. */
static int lower_ops(lower *w, const cc_layout *lay) {
  const cc_trace *t = w->t;
  for (int j = 0; j < lay->I; j++)
    for (int k = 0; k < t->nops; k++) {
      cc_runs it;
      int ch = cc_runs_start(&it, t, lay, &t->ops[k], j), si, di, n;
      cc_pat sp, dp;
      int first = w->n;
      while (cc_runs_next(&it, &si, &sp, &di, &dp, &n))
        if (!(t->direct ? cc_direct_emit(w, k, si, sp, di, dp, n) : emit_op(w, &t->ops[k], si, sp, di, dp, n, ch, j)))
          return 0;
      for (int i = first; i < w->n; i++) {
        w->v[i].round = t->ops[k].round;
        w->v[i].from = t->ops[k].from;
      }
    }
  return 1;
}

/* ---- compute ---- */

/* Zero-copy: a compute step C the script marked zerocopy, whose value the
 * send S alone reads (S waits on C only and sends exactly C's chunks; no
 * other step reads the value and it does not survive), becomes one step
 * that computes into S's message (gemv + s -> gemvs): the send's thread
 * block computes the chunks and stores them straight into the peer's
 * slot.  A zerocopy step that cannot be fused is an error naming its
 * line.  Returns 0 when out of memory. */
static int fuse_compute(lower *w, const int *users) {
  int n = w->n;
  int *sends = cc_calloc(n + 1, sizeof(int)), *sender = cc_malloc((n + 1) * sizeof(int)), *recv_of = cc_malloc((n + 1) * sizeof(int));
  if (!sends || !sender || !recv_of) { cc_free(sends); cc_free(sender); cc_free(recv_of); return 0; }
  for (int j = 0; j < n; j++) { sender[j] = -1; recv_of[j] = -1; }
  for (int j = 0; j < n; j++) {
    const ins *S = &w->v[j];
    if (S->msg_of >= 0) recv_of[S->msg_of] = j;
    if (S->dead || S->op != IR_OP_SEND) continue;
    for (int k = 0; k < S->npred; k++) {
      int c = S->pred[k];
      if (w->v[c].op == IR_OP_GEMV) { sends[c]++; sender[c] = j; }
    }
  }
  for (int c = 0; c < n; c++) {
    ins *C = &w->v[c];
    if (C->dead || C->op != IR_OP_GEMV || !C->zerocopy) continue;
    int j = sender[c];
    ins *S = j >= 0 ? &w->v[j] : NULL;
    if (sends[c] != 1 || users[c] != 1 || !S || S->npred != 1 || S->sspace != C->dspace || S->sidx != C->didx ||
        S->count != C->count || S->spat.run || S->dpat.run) {
      cc_err(w, C->line, "gemv with zerocopy: the chunks it computes on rank %d must be sent once, whole, to one peer "
             "(into consecutive chunks there), and not read or kept on rank %d (they go straight into the peer's "
             "memory)", C->rank, C->rank);
      continue;
    }
    C->op = IR_OP_GEMVS;
    C->send = S->send;
    C->ch = S->ch;
    C->fixtb = S->fixtb;
    C->dspace = S->dspace;   /* where the receiver puts it */
    C->didx = S->didx;
    S->dead = 1;
    if (recv_of[j] >= 0) w->v[recv_of[j]].msg_of = c;
    for (int q = 0; q < n; q++) {   /* whoever waited for the send waits for the computation */
      ins *J = &w->v[q];
      for (int k = 0; k < J->npred; k++)
        if (J->pred[k] == j) J->pred[k] = c;
    }
  }
  cc_free(sends); cc_free(sender); cc_free(recv_of);
  return 1;
}

/* Puts the compute steps that stay in the compute thread block first in
 * order[0..live), in the program's tile order (trace's tileorder): with
 * CC_ORDER_COMM the chunks some step sends come first, those read
 * earliest (the least depth of a reader) before the others, and the chunks
 * only read locally last; with CC_ORDER_PROGRAM the script's order.  They
 * wait for nothing, so any place before their readers keeps the order
 * topological. */
static int order_compute(lower *w, int *order, int live) {
  int *moved = cc_malloc((live + 1) * sizeof(int)), *key = cc_malloc((w->n + 1) * sizeof(int));
  int *sent = cc_calloc(w->n + 1, sizeof(int));
  if (!moved || !key || !sent) { cc_free(moved); cc_free(key); cc_free(sent); return 0; }
  for (int j = 0; j < w->n; j++) key[j] = INT_MAX / 4;
  for (int j = 0; j < w->n; j++) {
    const ins *J = &w->v[j];
    if (J->dead) continue;
    for (int k = 0; k < J->npred; k++) {
      int c = J->pred[k];
      if (!(fl(w->v[c].op) & IR_F_COMP)) continue;
      if (fl(J->op) & IR_F_SEND) sent[c] = 1;
      if (J->depth < key[c]) key[c] = J->depth;
    }
  }
  int m = 0;
  for (int q = 0; q < live; q++) {
    int id = order[q];
    if (w->v[id].op == IR_OP_GEMVS || !(fl(w->v[id].op) & IR_F_COMP)) continue;
    key[id] = w->t->tileorder == CC_ORDER_PROGRAM ? 0 : key[id] + (sent[id] ? 0 : INT_MAX / 2);
    moved[m++] = id;
  }
  for (int i = 1; i < m; i++)   /* a stable insertion sort by key: few steps */
    for (int j = i; j > 0 && key[moved[j]] < key[moved[j - 1]]; j--) {
      int x = moved[j];
      moved[j] = moved[j - 1];
      moved[j - 1] = x;
    }
  int k = m;
  for (int q = 0; q < live; q++)
    if (w->v[order[q]].op == IR_OP_GEMVS || !(fl(w->v[order[q]].op) & IR_F_COMP)) moved[k++] = order[q];
  memcpy(order, moved, live * sizeof(int));
  cc_free(moved);
  cc_free(key);
  cc_free(sent);
  return 1;
}

/* ---- fusion ---- */

/* Fuses a receive R with the send S that forwards exactly what R wrote,
 * when S's only dependency is R and R's thread block can also own S's
 * connection.  rrc + s becomes rrs when S is the only reader of the value
 * and the value does not survive (users[R] == 1); name_messages then
 * names its messages.  Returns 0 when out of memory. */
static int fuse(lower *w, const int *users) {
  /* successors of each send, to redirect them in O(edges) */
  int n = w->n, ok = 0;
  int *off = cc_calloc(n + 2, sizeof(int)), *succ = NULL, *fill = cc_calloc(n + 1, sizeof(int)), *recv_of = cc_malloc((n + 1) * sizeof(int));
  if (!off || !fill || !recv_of) goto out;
  long m = 0;
  for (int j = 0; j < n; j++) {
    recv_of[j] = -1;
    for (int k = 0; k < w->v[j].npred; k++) { off[w->v[j].pred[k] + 1]++; m++; }
  }
  for (int j = 0; j < n; j++) if (w->v[j].msg_of >= 0) recv_of[w->v[j].msg_of] = j;
  for (int i = 0; i < n; i++) off[i + 1] += off[i];
  succ = cc_malloc((m + 1) * sizeof(int));
  if (!succ) goto out;
  for (int j = 0; j < n; j++)
    for (int k = 0; k < w->v[j].npred; k++) { int p = w->v[j].pred[k]; succ[off[p] + fill[p]++] = j; }
  for (int s = 0; s < n; s++) {
    ins *S = &w->v[s];
    if (S->op != IR_OP_SEND || S->dead || S->npred != 1) continue;
    int rid = S->pred[0];
    ins *R = &w->v[rid];
    if (R->dead || (R->op != IR_OP_RECV && R->op != IR_OP_RRC) || R->rank != S->rank || R->ch != S->ch) continue;
    if (R->dspace != S->sspace || R->didx != S->sidx || R->count != S->count || !same_pat(R->dpat, S->spat)) continue;
    if (!cc_sets_join(w, cc_endpoint_of(w, R, 1), cc_endpoint_of(w, S, 0))) continue;  /* one of each per tb */
    R->op = R->op == IR_OP_RECV ? IR_OP_RCS : (users[rid] == 1 ? IR_OP_RRS : IR_OP_RRCS);
    R->send = S->send;

    S->dead = 1;
    /* whoever waited for S now waits for R; S's message is now R's */
    if (recv_of[s] >= 0) w->v[recv_of[s]].msg_of = rid;
    for (int e = off[s]; e < off[s + 1]; e++) {
      ins *J = &w->v[succ[e]];
      for (int k = 0; k < J->npred; k++) if (J->pred[k] == s) J->pred[k] = rid;
    }
  }
  ok = 1;
out:
  cc_free(off); cc_free(succ); cc_free(fill); cc_free(recv_of);
  return ok;
}

/* A send (s) or an rrs names, in its destination, where the message lands
 * at its receiver; an rrs writes nothing of its own, so the messages of a
 * chain of rrs steps all carry the name of where the chain ends (docs/IR.md,
 * the message rule).  Fusion made rrs steps of receives that wrote a buffer
 * of their own (a scratch chunk the script reuses, say): walks back from
 * every receive that writes its destination and gives each send and rrs of
 * its chain that destination. */
static void name_messages(lower *w) {
  for (int z = 0; z < w->n; z++) {
    const ins *Z = &w->v[z];
    if (Z->dead || Z->msg_of < 0 || !(fl(Z->op) & IR_F_DST)) continue;
    for (int p = Z->msg_of, hops = 0; p >= 0 && hops <= w->n; hops++) {
      ins *P = &w->v[p];
      if (P->op != IR_OP_SEND && P->op != IR_OP_RRS) break;   /* an rcs or rrcs names its own destination */
      P->dspace = Z->dspace;
      P->didx = Z->didx;
      P->dpat = Z->dpat;
      p = P->op == IR_OP_RRS ? P->msg_of : -1;
    }
  }
}

/* Makes step st wait for need[0..n) (n <= IR_MAX_DEPS). */
static void set_deps(ir_step *st, const cc_need *need, int n) {
  if (n < 1) return;
  st->depid = need[0].tb;
  st->deps = need[0].pos;
  st->nxdeps = n - 1;
  for (int k = 1; k < n; k++) st->xdep[k - 1] = (ir_dep){need[k].tb, need[k].pos};
}

/* Whether instruction `from` waits for `to`, directly or through others
 * (mark: per instruction, the stamp of the last search that saw it). */
static int waits_for(const lower *w, int from, int to, int *mark, int stamp, int *stack) {
  int top = 0;
  stack[top++] = from;
  mark[from] = stamp;
  while (top) {
    const ins *I = &w->v[stack[--top]];
    for (int k = 0; k < I->npred; k++) {
      int p = I->pred[k];
      if (p == to) return 1;
      if (mark[p] != stamp) { mark[p] = stamp; stack[top++] = p; }
    }
  }
  return 0;
}

/* Whether J is a receive-reduce that reads copy C's destination and
 * overwrites it whole, on C's rank. */
static int takes_copy(const ins *C, const ins *J) {
  return !J->dead && J->op == IR_OP_RRC && J->rank == C->rank && J->count == C->count &&
         J->sspace == C->dspace && J->sidx == C->didx && J->dspace == C->dspace && J->didx == C->didx &&
         same_pat(J->spat, C->dpat) && same_pat(J->dpat, C->dpat);
}

/* Who waits for whom, the other way round: succ.v[p] lists the
 * instructions that had p among their predecessors when they were listed.
 * An entry may be stale (a reader checks cc_has_pred) or repeat; none is
 * missing, as long as whoever adds a wait between building and the last
 * use lists it (take_over does).  Scanning every instruction for the
 * successors of each candidate made fusing a 64-rank all-pairs program
 * take seconds. */
typedef struct {
  int **v, *n, *cap;
  int size;
} succs;

static void succs_free(succs *s) {
  for (int i = 0; s->v && i < s->size; i++) cc_free(s->v[i]);
  cc_free(s->v);
  cc_free(s->n);
  cc_free(s->cap);
  *s = (succs){0};
}

/* Lists j as a successor of p.  0 when out of memory. */
static int succs_add(succs *s, int p, int j) { return cc_int_push(&s->v[p], &s->n[p], &s->cap[p], j); }

/* The successors of every instruction of w as its predecessors now stand.
 * 0 when out of memory (s then holds nothing). */
static int succs_build(const lower *w, succs *s) {
  *s = (succs){.v = cc_calloc(w->n + 1, sizeof(int *)), .n = cc_calloc(w->n + 1, sizeof(int)),
               .cap = cc_calloc(w->n + 1, sizeof(int)), .size = w->n};
  if (!s->v || !s->n || !s->cap) { succs_free(s); return 0; }
  for (int j = 0; j < w->n; j++)
    for (int k = 0; k < w->v[j].npred; k++)
      if (!succs_add(s, w->v[j].pred[k], j)) { succs_free(s); return 0; }
  return 1;
}

/* Makes p a predecessor of instruction i (once), listed in s.  0 when out
 * of memory. */
static int add_pred_listed(lower *w, succs *s, int i, int p) {
  const int had = w->v[i].npred;
  if (!cc_add_pred(&w->v[i], p)) return 0;
  return w->v[i].npred == had || succs_add(s, p, i);
}

/* Forwards a local copy C (X -> Y) into the receive-reduce R that reads Y
 * and overwrites it, when R is C's only successor or every other successor
 * waits for R anyway: R reads X instead and C goes (out = in (op) msg in
 * one step, not a copy and then a reduction of the copy).  Sound because
 * every later writer of X depends on C (a write waits for earlier
 * readers), hence on R once R takes C's place, so R still reads the value C
 * would have copied.  The other successors are such writers (the one-shot
 * chain in place copies the sum back into X): they wait for R instead of
 * C.  succ lists the waits it adds.  Returns 0 when out of memory. */
static int forward_copies(lower *w, succs *succ, const int *users) {
  int n = w->n, ok = 0, stamp = 0;
  int *nsucc = cc_calloc(n + 1, sizeof(int)), *only = cc_malloc((n + 1) * sizeof(int));
  int *mark = cc_calloc(n + 1, sizeof(int)), *stack = cc_malloc((n + 1) * sizeof(int));
  if (!nsucc || !only || !mark || !stack) goto out;
  for (int j = 0; j < n; j++)
    for (int k = 0; k < w->v[j].npred; k++) { nsucc[w->v[j].pred[k]]++; only[w->v[j].pred[k]] = j; }
  for (int c = 0; c < n; c++) {
    ins *C = &w->v[c];
    /* With one successor, R must be the only reader of Y's copy; with
     * several, every other one waits for R, which overwrites Y whole, so
     * none of them reads the copy. */
    if (C->op != IR_OP_COPY || C->dead || nsucc[c] < 1 || (nsucc[c] == 1 && users[c] != 1)) continue;
    int r = -1;
    if (nsucc[c] == 1) r = takes_copy(C, &w->v[only[c]]) ? only[c] : -1;
    for (int q = 0; q < succ->n[c] && nsucc[c] > 1; q++) {   /* the first such successor */
      const int j = succ->v[c][q];
      if ((r < 0 || j < r) && takes_copy(C, &w->v[j]) && cc_has_pred(&w->v[j], c)) r = j;
    }
    if (r < 0) continue;
    ins *R = &w->v[r];
    int others = 1;   /* every other successor waits for R */
    for (int q = 0; q < succ->n[c] && others && nsucc[c] > 1; q++) {
      const int j = succ->v[c][q];
      if (j != r && cc_has_pred(&w->v[j], c) && !waits_for(w, j, r, mark, ++stamp, stack)) others = 0;
    }
    if (!others) continue;
    R->sspace = C->sspace;
    R->sidx = C->sidx;
    R->spat = C->spat;
    int k = 0;
    while (R->pred[k] != c) k++;
    R->pred[k] = R->pred[--R->npred];
    for (int q = 0; q < C->npred; q++) {
      int p = C->pred[q], had = R->npred;
      if (!add_pred_listed(w, succ, r, p)) goto out;
      if (R->npred == had) nsucc[p]--;        /* R already waited for p */
      else if (only[p] == c) only[p] = r;
    }
    /* The others drop their edge to C: they wait for R already. */
    for (int q = 0; q < succ->n[c] && nsucc[c] > 1; q++) {
      const int j = succ->v[c][q];
      ins *J = &w->v[j];
      for (int e = 0; e < J->npred && j != r; e++)
        if (J->pred[e] == c) J->pred[e--] = J->pred[--J->npred];
    }
    C->dead = 1;
  }
  ok = 1;
out:
  cc_free(nsucc);
  cc_free(only);
  cc_free(mark);
  cc_free(stack);
  return ok;
}

/* Whether instruction c alone reads the value instruction r writes (no
 * other step after r reads r's destination; r's own message aside). */
static int reads_alone(const lower *w, const succs *s, int r, int c) {
  const ins *R = &w->v[r];
  for (int q = 0; q < s->n[r]; q++) {
    const int j = s->v[r][q];
    const ins *J = &w->v[j];
    if (J->dead || j == c || !cc_has_pred(J, r) || J->msg_of == r) continue;
    if (((fl(J->op) & IR_F_SRC) && J->sspace == R->dspace &&
         may_overlap(J->sidx, J->spat, J->count, R->didx, R->dpat, R->count)) ||
        (J->op == IR_OP_REDUCE && J->dspace == R->dspace &&
         may_overlap(J->didx, J->dpat, J->count, R->didx, R->dpat, R->count)))
      return 0;
  }
  return 1;
}

/* Instruction r takes over the write of instruction c, which goes: r
 * waits for what c waited for, writes c's destination (the send of r's
 * message names it), and whoever waited for c waits for r; s lists the
 * new waits.  0 when out of memory. */
static int take_over(lower *w, succs *s, int r, int c) {
  const ins *C = &w->v[c];
  for (int k = 0; k < C->npred; k++)
    if (C->pred[k] != r && !add_pred_listed(w, s, r, C->pred[k])) return 0;
  ins *R = &w->v[r];
  R->dspace = C->dspace;
  R->didx = C->didx;
  R->dpat = C->dpat;
  if (R->msg_of >= 0) {   /* the send names where its message lands */
    w->v[R->msg_of].dspace = C->dspace;
    w->v[R->msg_of].didx = C->didx;
    w->v[R->msg_of].dpat = C->dpat;
  }
  for (int q = 0; q < s->n[c]; q++) {   /* whoever waited for c waits for r */
    const int j = s->v[c][q];
    ins *J = &w->v[j];
    for (int k = 0; k < J->npred; k++)
      if (J->pred[k] == c) {
        J->pred[k] = J->pred[--J->npred];
        if (j != r && !add_pred_listed(w, s, j, r)) return 0;
        break;
      }
  }
  w->v[c].dead = 1;
  return 1;
}

/* Sinks a local copy C (S -> Y) of a scratch value S into the
 * receive-reduce R that wrote S, when C is the value's only reader and
 * everything else C waits for (the readers of Y's old value) runs in R's
 * thread block: R writes Y itself, after those in program order, and C
 * goes.  The 2-rank in-place one-shot chain, its send and receive in one
 * thread block, so reduces straight into the input with no copy.  (Where
 * those waits are in other thread blocks, R waiting for them cost more
 * than the copy: docs/PERFORMANCE.md, seventh run.)  Returns 0 when out
 * of memory. */
static int sink_copies(lower *w, succs *succ) {
  int n = w->n, ok = 0, stamp = 0;
  int *mark = cc_calloc(n + 1, sizeof(int)), *stack = cc_malloc((n + 1) * sizeof(int));
  if (!mark || !stack) goto out;
  for (int c = 0; c < n; c++) {
    ins *C = &w->v[c];
    if (C->op != IR_OP_COPY || C->dead || C->sspace < CC_SPACE_FIRST_SCRATCH) continue;
    int r = -1;
    for (int k = 0; k < C->npred && r < 0; k++) {
      const ins *P = &w->v[C->pred[k]];
      if (!P->dead && P->op == IR_OP_RRC && P->rank == C->rank && P->dspace == C->sspace && P->didx == C->sidx &&
          P->count == C->count && same_pat(P->dpat, C->spat))
        r = C->pred[k];
    }
    if (r < 0) continue;
    const ins *R = &w->v[r];
    int alone = reads_alone(w, succ, r, c), home = cc_find(w->parent, cc_home(w, R));
    for (int k = 0; k < C->npred && alone; k++) {   /* C's other waits: in R's tb, and not after R */
      int p = C->pred[k];
      if (p == r || waits_for(w, r, p, mark, ++stamp, stack)) continue;
      if (cc_find(w->parent, cc_home(w, &w->v[p])) != home || waits_for(w, p, r, mark, ++stamp, stack)) alone = 0;
    }
    if (!alone) continue;
    if (!take_over(w, succ, r, c)) goto out;
  }
  ok = 1;
out:
  cc_free(mark);
  cc_free(stack);
  return ok;
}

/* Folds a scratch round trip back into one receive-reduce: a receive R
 * into a scratch value S that a local reduce D (X = X (op) S) alone reads
 * becomes R: X = X (op) message (rrc), and D goes.  The exchange of two
 * partners (each sends its old X and adds the other's) must receive into
 * scratch to be correct; this gives it the one step a receive-reduce is.
 * R now writes X, so it waits for what D waited for (the readers of X's
 * old value: the send of it among them), and whoever waited for D waits
 * for R.  Only for an exchange (D waits for the send of X's old value to
 * R's partner) and where that adds no wait but the exchange's own: every
 * other step D waited for is one R waits for already (a scratch reused
 * round after round), so that receives which ran side by side (the
 * all-pairs programs', into a scratch chunk each) stay so.  Not where the
 * script placed D's thread block.  Returns 0 when out of memory. */
static int fold_reduces(lower *w, succs *succ) {
  int n = w->n, ok = 0, stamp = 0;
  int *mark = cc_calloc(n + 1, sizeof(int)), *stack = cc_malloc((n + 1) * sizeof(int));
  if (!mark || !stack) goto out;
  for (int d = 0; d < n; d++) {
    ins *D = &w->v[d];
    if (D->op != IR_OP_REDUCE || D->dead || D->fixtb >= 0 || D->sspace < CC_SPACE_FIRST_SCRATCH) continue;
    int r = -1;
    for (int k = 0; k < D->npred && r < 0; k++) {
      const ins *P = &w->v[D->pred[k]];
      if (!P->dead && P->op == IR_OP_RECV && P->rank == D->rank && P->dspace == D->sspace && P->didx == D->sidx &&
          P->count == D->count && same_pat(P->dpat, D->spat) && P->fixtb < 0 && P->ch == D->ch)
        r = D->pred[k];
    }
    if (r < 0) continue;
    const ins *R = &w->v[r];
    int alone = reads_alone(w, succ, r, d);
    int exchange = 0;   /* D waits for the send of X's old value to R's partner: an exchange */
    for (int k = 0; k < D->npred && alone; k++) {   /* no new wait but that send */
      int p = D->pred[k];
      const ins *P = &w->v[p];
      int partner = P->op == IR_OP_SEND && P->send == R->recv && P->sspace == D->dspace &&
                    may_overlap(P->sidx, P->spat, P->count, D->didx, D->dpat, D->count);
      exchange |= partner;
      alone = p == r || partner || waits_for(w, r, p, mark, ++stamp, stack);
    }
    if (!alone || !exchange) continue;
    ins *V = &w->v[r];
    V->op = IR_OP_RRC;   /* X = X (op) message */
    V->sspace = D->dspace;
    V->sidx = D->didx;
    V->spat = D->dpat;
    if (!take_over(w, succ, r, d)) goto out;
  }
  ok = 1;
out:
  cc_free(mark);
  cc_free(stack);
  return ok;
}

/* Places a local copy C in the thread block of the receive R whose value
 * it copies, when C is that value's only reader: C runs after R in
 * program order instead of waiting on R's block across blocks (the
 * in-place one-shot chain copies its sum from scratch back to the input;
 * the runtime then folds the chain's last block, copy and all, into the
 * chain's first: rt_chain).  Joins the sets of C's local endpoint and R's
 * receive endpoint, so the rank's other local steps on that channel go
 * there too; nothing is joined where a tb could not own both. */
static void copy_after_receive(lower *w, const succs *succ) {
  for (int c = 0; c < w->n; c++) {
    const ins *C = &w->v[c];
    if (C->op != IR_OP_COPY || C->dead || C->fixtb >= 0) continue;
    int r = -1;
    for (int k = 0; k < C->npred && r < 0; k++) {
      const ins *P = &w->v[C->pred[k]];
      if (!P->dead && (P->op == IR_OP_RRC || P->op == IR_OP_RECV) && P->rank == C->rank && P->ch == C->ch &&
          P->dspace == C->sspace && P->didx == C->sidx && P->count == C->count && same_pat(P->dpat, C->spat) &&
          P->fixtb < 0)
        r = C->pred[k];
    }
    if (r < 0) continue;
    if (reads_alone(w, succ, r, c)) cc_sets_join(w, cc_home(w, C), cc_endpoint_of(w, &w->v[r], 1));
  }
}

/* users[R] = instructions that read the value R writes, plus 1 when the
 * value survives to the end (nobody overwrites it). */
static void count_users(lower *w, int *users) {
  for (int i = 0; i < w->n; i++) users[i] = 0;
  for (int j = 0; j < w->n; j++) {
    ins *J = &w->v[j];
    for (int k = 0; k < J->npred; k++) {
      int p = J->pred[k];
      ins *P = &w->v[p];
      if (!(fl(P->op) & IR_F_DST) || J->msg_of == p) continue;
      int reads = ((fl(J->op) & IR_F_SRC) && J->sspace == P->dspace && J->rank == P->rank &&
                   may_overlap(J->sidx, J->spat, J->count, P->didx, P->dpat, P->count)) ||
                  (J->op == IR_OP_REDUCE && J->dspace == P->dspace &&
                   may_overlap(J->didx, J->dpat, J->count, P->didx, P->dpat, P->count));
      if (reads) users[p]++;
    }
  }
  /* A value nobody overwrites is a result: it must be written. */
  int *overwritten = cc_calloc(w->n + 1, sizeof(int));
  if (!overwritten) { for (int i = 0; i < w->n; i++) users[i]++; return; }
  for (int j = 0; j < w->n; j++) {
    ins *J = &w->v[j];
    if (!(fl(J->op) & IR_F_DST)) continue;
    for (int k = 0; k < J->npred; k++) {
      ins *P = &w->v[J->pred[k]];
      if ((fl(P->op) & IR_F_DST) && P->rank == J->rank && P->dspace == J->dspace &&
          P->didx == J->didx && P->count == J->count && same_pat(P->dpat, J->dpat) && J->msg_of != J->pred[k])
        overwritten[J->pred[k]] = 1;
    }
  }
  for (int i = 0; i < w->n; i++) if (!overwritten[i]) users[i]++;
  cc_free(overwritten);
}

/* ---- emission ---- */

static int buf_of(const cc_trace *t, int space) {
  return space == CC_SPACE_INPUT ? IR_BUF_INPUT : space == CC_SPACE_OUTPUT ? IR_BUF_OUTPUT : IR_BUF_SCRATCH;
}

bt_result cc_lower(const cc_trace *t, const cc_lower_opts *o, ir_prog **out, rt_diag *diag) {
  *out = NULL;
  cc_budget *prev = cc_mem_enter(t->mem);   /* lowering's memory counts against the compile's budget */
  size_t ir_charge = 0;
  lower w = {.t = t, .diag = diag, .nch = 1, .landing_space = -1};
  deps d = {cc_calloc((size_t)t->nranks * CC_MAX_SPACES, sizeof(access_state *)),
            cc_calloc((size_t)t->nranks * CC_MAX_SPACES, sizeof(int))};
  int *users = NULL, *order = NULL, *scr_base = NULL;
  succs succ = {0};   /* who waits for each step (fusing passes) */
  ir_prog *p = NULL;
  bt_result res = BT_ERR_NOMEM;
  cc_layout lay = {0};
  if (!d.a || !d.len) goto out;
  if (!cc_layout_plan(&w, &lay)) { res = w.errors ? BT_ERR_INVALID : BT_ERR_NOMEM; goto out; }
  if (t->direct && !cc_direct_plan(&w)) goto out;
  if (!lower_ops(&w, &lay)) goto out;
  for (int i = 0; i < w.n; i++) {
    if (w.v[i].msg_of >= 0 && !cc_add_pred(&w.v[i], w.v[i].msg_of)) goto out;
    if (!track(&w, &d, i)) goto out;
  }
  if (t->direct && !cc_direct_sync(&w)) goto out;
  if (t->round && !cc_order_rounds(&w)) goto out;
  if (w.errors) { res = BT_ERR_INVALID; goto out; }
  int maxch = 0;
  for (int i = 0; i < w.n; i++) if (w.v[i].ch > maxch) maxch = w.v[i].ch;
  w.nch = maxch + 1;
  users = cc_malloc((w.n + 1) * sizeof(int));
  if (!users || !cc_sets_init(&w)) goto out;
  int max_tbs = o && o->max_tbs ? o->max_tbs : CC_MAX_TBS;
  if (!cc_place_fixed(&w, t->instances, max_tbs)) goto out;
  if (w.errors) { res = BT_ERR_INVALID; goto out; }
  count_users(&w, users);
  if (!fuse_compute(&w, users)) goto out;
  if (w.errors) { res = BT_ERR_INVALID; goto out; }
  if ((!o || o->fuse) && !t->direct) {   /* fusion forms FIFO steps (rcs, rrcs, rrs) */
    /* The passes that ask for a value's readers share one successor
     * index, each listing the waits it adds. */
    if (!succs_build(&w, &succ) || !fold_reduces(&w, &succ)) goto out;
    count_users(&w, users);
    if (!forward_copies(&w, &succ, users) || !sink_copies(&w, &succ)) goto out;
    copy_after_receive(&w, &succ);
    succs_free(&succ);
    if (!fuse(&w, users)) goto out;
    name_messages(&w);
  }
  if (t->placement == CC_PLACE_PAIRED) cc_pair_peers(&w);
  order = cc_malloc((w.n + 1) * sizeof(int));
  int need = 1;
  if (!order || (w.n && !cc_schedule(&w, order, CC_LOWER_SLOTS, &need))) {
    res = w.errors ? BT_ERR_INVALID : BT_ERR_NOMEM;
    goto out;
  }

  /* Thread blocks: one per endpoint set that has instructions, plus a
   * local one per channel for cpy/re (a direct program: one per rank). */
  int live = 0;
  for (int i = 0; i < w.n; i++) live += !w.v[i].dead;
  if (t->direct && (live = cc_direct_settle(&w, &order, live)) < 0) goto out;
  if (t->fused && !order_compute(&w, order, live)) goto out;
  /* the IR program (built by ir/, not counted there): a step and a wait per instruction */
  ir_charge = (size_t)live * 2 * (sizeof(ir_step) + 16);
  if (!cc_budget_charge(t->mem, ir_charge, 0)) { ir_charge = 0; goto out; }
  p = ir_prog_new(t->name, t->coll, t->nranks);
  if (!p) goto out;
  p->proto = t->proto;
  p->nthreads = t->nthreads;
  p->inplace = t->inplace;
  p->version = IR_SCHEMA_VERSION;
  p->minbytes = t->minbytes;
  p->maxbytes = t->maxbytes;
  if (t->expect) {   /* in the IR's chunks, which the CPU run and baton verify check */
    char *ex = cc_layout_expect(&lay, t->expect);
    p->expect = ex ? ir_intern(p, ex) : NULL;
    cc_free(ex);
    if (!p->expect) goto out;
  }
  if (t->interleave[0] && !(p->interleave = ir_intern(p, t->interleave))) goto out;
  for (int k = 0; k < t->noperands; k++) {
    const cc_opnd *c = &t->opnd[k];
    ir_operand *od = ir_operand_add(p, c->name, (ir_okind)c->kind);
    if (!od || !(od->dim[0] = ir_intern(p, c->dim[0])) || (c->dim[1][0] && !(od->dim[1] = ir_intern(p, c->dim[1]))) ||
        !(od->dtype = ir_intern(p, c->dtype)))
      goto out;
    od->line = c->line;
  }
  int ib, ob;
  ir_geom_blocks(t->coll, t->nranks, &ib, &ob);
  int I = t->instances, PI = lay.P * I;   /* IR chunks per traced chunk */
  p->nchunksperloop = (ib > ob ? ib : ob) * t->k * PI;
  p->nchannels = maxch + 1;
  /* scratch: named buffers laid out one after another on each rank */
  scr_base = cc_calloc((size_t)t->nranks * CC_MAX_SPACES, sizeof(int));
  if (!scr_base) goto out;
  for (int r = 0; r < t->nranks; r++) {
    int at = 0;
    for (int s = CC_SPACE_FIRST_SCRATCH; s < t->nspaces; s++) { scr_base[r * CC_MAX_SPACES + s] = at; at += t->size[s][r] * PI; }
    if (w.landing && w.landing_space >= 0) {   /* a direct program's landings, after the named buffers */
      scr_base[r * CC_MAX_SPACES + w.landing_space] = at;
      at += w.landing[r];
    }
    ir_gpu *g = &p->gpus[r];
    g->s_chunks = at;
    /* in place, a buffer no step touches is written as 0 chunks, as msccl-tools does */
    int in_used = t->size[CC_SPACE_INPUT][r] > 0 || t->fused, out_used = t->size[CC_SPACE_OUTPUT][r] > 0;
    g->i_chunks = !t->inplace || in_used ? t->fixed_size[CC_SPACE_INPUT] * PI : 0;
    g->o_chunks = !t->inplace || out_used ? t->fixed_size[CC_SPACE_OUTPUT] * PI : 0;
  }
  if (o && o->slots_needed) *o->slots_needed = need;
  if (!cc_number_tbs(&w, order, live, I, max_tbs, p)) goto out;
  if (w.errors) { res = BT_ERR_INVALID; goto out; }
  /* Steps in global order; waits only where program order does not imply them. */
  int maxtb = 0;
  for (int r = 0; r < t->nranks; r++) if (p->gpus[r].ntbs > maxtb) maxtb = p->gpus[r].ntbs;
  cc_waits *clocks = cc_waits_new(t->nranks, maxtb, w.n);
  int *mark = cc_calloc(w.n + 1, sizeof(int)), *stack = cc_malloc((w.n + 1) * sizeof(int)), stamp = 0;
  if (!clocks || !mark || !stack) { cc_waits_free(clocks); cc_free(mark); cc_free(stack); goto out; }
  char prov[600];
  for (int q = 0; q < live; q++) {
    if (cc_late(&w)) { cc_waits_free(clocks); cc_free(mark); cc_free(stack); goto out; }
    int id = order[q];
    ins *I = &w.v[id];
    ir_gpu *g = &p->gpus[I->rank];
    ir_tb *tb = &g->tbs[I->tb];
    /* the latest predecessor in each other tb of this rank; in a compute
     * tb, whose steps run in any order, every one */
    cc_need need[256];
    int nneed = 0;
    for (int k = 0; k < I->npred; k++) {
      ins *P = &w.v[I->pred[k]];
      if (P->dead || P->rank != I->rank || P->tb == I->tb) continue;   /* dead: a direct program's wait that went */
      int anyorder = ir_tb_compute(&g->tbs[P->tb]), j;
      for (j = 0; j < nneed && (need[j].tb != P->tb || (anyorder && need[j].pos != P->pos)); j++) {}
      if (j == nneed) {
        if (nneed == 256) { cc_err(&w, I->line, "a step waits on more than 256 others"); break; }
        need[nneed++] = (cc_need){P->tb, P->pos, I->pred[k]};
      } else if (P->pos > need[j].pos) need[j] = (cc_need){P->tb, P->pos, I->pred[k]};
    }
    /* a compute step another predecessor waits for already needs no wait */
    for (int k = 0; k < I->npred && nneed; k++) {
      ins *P = &w.v[I->pred[k]];
      if (P->dead || P->rank != I->rank || P->tb == I->tb || !ir_tb_compute(&g->tbs[P->tb])) continue;
      for (int q = 0; q < I->npred; q++)
        if (q != k && w.v[I->pred[q]].rank == I->rank && waits_for(&w, I->pred[q], I->pred[k], mark, ++stamp, stack)) {
          for (int j = 0; j < nneed; j++)
            if (need[j].tb == P->tb && need[j].pos == P->pos) need[j] = need[--nneed];
          break;
        }
    }
    /* the step carries its last IR_MAX_DEPS dependencies; nops before it
     * carry the others, IR_MAX_DEPS each */
    int m = cc_waits_pick(clocks, g, I->rank, I->tb, need, nneed);
    if (I->from >= 0) snprintf(prov, sizeof prov, "%s:%d (called from %s)", t->script, I->line, t->froms[I->from]);
    else snprintf(prov, sizeof prov, "%s:%d", t->script, I->line);
    for (int j = 0; j < m; j++) g->tbs[need[j].tb].steps[need[j].pos].hasdep = 1;
    int nnops = m > IR_MAX_DEPS ? (m - 1) / IR_MAX_DEPS : 0, j0 = 0;
    for (int k = 0; k < nnops; k++, j0 += IR_MAX_DEPS) {
      ir_step *st = ir_step_add(tb);
      if (!st) { cc_waits_free(clocks); cc_free(mark); cc_free(stack); goto out; }
      st->op = IR_OP_NOP; st->srcbuf = IR_BUF_INPUT; st->dstbuf = IR_BUF_OUTPUT; st->cnt = 0;
      st->prov = ir_intern(p, prov);
      set_deps(st, need + j0, IR_MAX_DEPS);
    }
    ir_step *st = ir_step_add(tb);
    if (!st) { cc_waits_free(clocks); cc_free(mark); cc_free(stack); goto out; }
    st->op = (uint8_t)I->op;
    unsigned f = fl(I->op);
    int sb = buf_of(t, I->sspace), db = buf_of(t, I->dspace);
    /* a get reads its peer's chunks, in the peer's scratch layout */
    int srank = (f & IR_F_GET) ? I->peer : I->rank;
    st->srcbuf = sb;
    st->srcoff = I->sidx + (sb == IR_BUF_SCRATCH ? scr_base[srank * CC_MAX_SPACES + I->sspace] : 0);
    st->dstbuf = db;
    /* a send names where the receiver puts the data (its own rank's scratch layout), a put where it stores it */
    int drank = I->op == IR_OP_SEND || I->op == IR_OP_GEMVS ? I->send : (f & IR_F_PUT) ? I->peer : I->rank;
    st->dstoff = I->didx + (db == IR_BUF_SCRATCH ? scr_base[drank * CC_MAX_SPACES + I->dspace] : 0);
    if (!(f & (IR_F_SRC | IR_F_COMP | IR_F_GET)) && I->op != IR_OP_SEND) { st->srcbuf = db; st->srcoff = st->dstoff; }
    st->cnt = I->count;
    if ((f & (IR_F_SRC | IR_F_GET)) && I->spat.run) { st->srcrun = I->spat.run; st->srcstride = I->spat.stride; }
    if ((f & (IR_F_DST | IR_F_SEND | IR_F_PUT)) && I->dpat.run) { st->dstrun = I->dpat.run; st->dststride = I->dpat.stride; }
    if (f & IR_F_DIRECT) st->peer = I->peer;
    if (f & (IR_F_SIG | IR_F_WAIT)) {   /* no chunks: a sig is one signal, a wait's cnt the signals it takes */
      st->srcbuf = IR_BUF_INPUT;
      st->dstbuf = IR_BUF_OUTPUT;
      st->srcoff = st->dstoff = -1;
    }
    if (f & IR_F_COMP) {
      memcpy(st->args, I->args, sizeof st->args);
      st->sync = (uint8_t)I->sync;
      st->sync_param = I->sync_param;
    }
    set_deps(st, need + j0, m - j0);
    st->prov = ir_intern(p, prov);
    I->pos = tb->nsteps - 1;
    cc_waits_ran(clocks, I->rank, I->tb, I->pos, id);
  }
  cc_waits_free(clocks);
  cc_free(mark);
  cc_free(stack);
  res = BT_OK;
out:
  if (t->mem && t->mem->over && !w.errors) {
    char m[300];
    cc_err(&w, t->decl_line, "%s (while lowering)", cc_budget_mem_msg(t->mem, m, sizeof m));
  }
  if (w.errors) res = BT_ERR_INVALID;
  succs_free(&succ);
  for (int i = 0; i < w.n; i++) cc_free(w.v[i].pred);
  cc_free(w.v);
  cc_free(w.parent);
  cc_free(w.info);
  cc_free(users);
  cc_free(order);
  cc_free(scr_base);
  cc_free(lay.K);
  cc_direct_free(&w);
  if (d.a) {
    for (int k = 0; k < t->nranks * CC_MAX_SPACES; k++) {
      for (int c = 0; c < d.len[k]; c++) cc_free(d.a[k][c].readers);
      cc_free(d.a[k]);
    }
  }
  cc_free(d.a);
  cc_free(d.len);
  cc_budget_release(t->mem, ir_charge);
  cc_mem_leave(prev);
  if (res) { ir_prog_free(p); return res; }
  *out = p;
  return BT_OK;
}
