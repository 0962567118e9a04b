/* rt_chain.c -- folding receive-reduce chains into one block (see rt_chain.h). */
#include "rt_chain.h"

#include <stdlib.h>
#include <string.h>

/* A tb that can be folded: no send connection, and a first step that is
 * a receive-reduce into dst reading only its message and src (rrc) and
 * waits on a step of another tb.  Its later steps (the in-place one-shot
 * chain's copy back, and the waits before it) come along: they ran after
 * the first, which ran after the host's last, so the host's steps never
 * waited on them (or the program would already deadlock). */
static int foldable(const ir_tb *tb, int self) {
  if (tb->nsteps < 1 || tb->send >= 0 || tb->recv < 0) return 0;
  const ir_step *s = &tb->steps[0];
  return s->op == IR_OP_RRC && s->depid >= 0 && s->depid != self;
}

/* A tb whose send can run at the front of the block of a chain whose head
 * reads `head`'s src: its only step sends that chunk, waiting for nothing,
 * and it receives nothing. */
static int sendable(const ir_tb *tb, const ir_step *head) {
  if (tb->nsteps != 1 || tb->send < 0 || tb->recv >= 0) return 0;
  const ir_step *s = &tb->steps[0];
  return s->op == IR_OP_SEND && s->depid < 0 && s->srcbuf == head->srcbuf && s->srcoff == head->srcoff &&
         s->cnt == head->cnt;
}

static int overlaps(int buf, int off, int cnt, int b2, int o2, int c2) {
  return buf == b2 && off < o2 + c2 && o2 < off + cnt;
}

/* Whether the wait of step st is one the folded block keeps in program
 * order: none, on step 0 of a tb in S[0..ns), or on one of the links (the
 * steps L[0..k) of the host's list, given as tb/step pairs). */
static int wait_folded(const ir_step *st, const int *S, int ns, const int *ltb, const int *lst, int k) {
  if (st->depid < 0) return 1;
  for (int i = 0; i < ns; i++)
    if (st->depid == S[i] && st->deps == 0) return 1;
  for (int i = 0; i < k; i++)
    if (st->depid == ltb[i] && st->deps == lst[i]) return 1;
  return 0;
}

/* The copy back of host h's list L (its steps, then those folded into it,
 * ltb/lst[0..n)) with the sends S[0..ns) at its front: L starts with a
 * chain of links, each a receive-reduce of the one before's dst into X
 * (the head's src is Y, the input), then nops, then a copy of X to Y; every
 * wait of those nops and the copy is on a send of S, a link or none; and on
 * the rank nothing but the links and the copy touches X.  Then the links
 * can read and write Y itself: returns their number and sets *copy to the
 * copy's place in L; 0 when the pattern is not there. */
static int sink_links(const ir_gpu *g, const int *ltb, const int *lst, int n, const int *S, int ns, int *copy) {
  const ir_step *head = &g->tbs[ltb[0]].steps[lst[0]];
  if (n < 2 || head->op != IR_OP_RRC || head->depid >= 0) return 0;
  int k = 1;
  while (k < n) {
    const ir_step *p = &g->tbs[ltb[k - 1]].steps[lst[k - 1]], *r = &g->tbs[ltb[k]].steps[lst[k]];
    if (r->op != IR_OP_RRC || r->srcbuf != p->dstbuf || r->srcoff != p->dstoff || r->cnt != p->cnt ||
        r->dstbuf != head->dstbuf || r->dstoff != head->dstoff ||
        (r->depid >= 0 && (r->depid != ltb[k - 1] || r->deps != lst[k - 1])))
      break;
    k++;
  }
  int j = k;
  while (j < n && g->tbs[ltb[j]].steps[lst[j]].op == IR_OP_NOP &&
         wait_folded(&g->tbs[ltb[j]].steps[lst[j]], S, ns, ltb, lst, k))
    j++;
  if (j >= n) return 0;
  const ir_step *cp = &g->tbs[ltb[j]].steps[lst[j]];
  if (cp->op != IR_OP_COPY || cp->srcbuf != head->dstbuf || cp->srcoff != head->dstoff || cp->cnt != head->cnt ||
      cp->dstbuf != head->srcbuf || cp->dstoff != head->srcoff || !wait_folded(cp, S, ns, ltb, lst, k) ||
      overlaps(head->dstbuf, head->dstoff, head->cnt, head->srcbuf, head->srcoff, head->cnt))
    return 0;
  for (int t = 0; t < g->ntbs; t++)
    for (int q = 0; q < g->tbs[t].nsteps; q++) {
      const ir_step *st = &g->tbs[t].steps[q];
      unsigned fl = ir_op_flags[st->op];
      int touches = ((fl & IR_F_SRC) && overlaps(st->srcbuf, st->srcoff, st->cnt, head->dstbuf, head->dstoff, head->cnt)) ||
                    ((fl & IR_F_DST) && overlaps(st->dstbuf, st->dstoff, st->cnt, head->dstbuf, head->dstoff, head->cnt));
      if (!touches) continue;
      int ours = t == ltb[j] && q == lst[j];
      for (int i = 0; i < k && !ours; i++) ours = t == ltb[i] && q == lst[i];
      if (!ours) return 0;
    }
  *copy = j;
  return k;
}

bt_result rt_chain_plan(rt_chain *c, const ir_gpu *g, int fold, int sends) {
  memset(c, 0, sizeof *c);
  int n = g->ntbs;
  long total = 0;
  for (int t = 0; t < n; t++) total += g->tbs[t].nsteps;
  c->ntbs = n;
  c->host = malloc((n + 1) * sizeof(int));
  c->first = calloc(n + 1, sizeof(int));
  c->count = calloc(n + 1, sizeof(int));
  c->xconn = calloc(n + 1, sizeof(int));
  c->nx = calloc(n + 1, sizeof(int));
  c->xtb = calloc((size_t)n * IP_GPU_XRECV + 1, sizeof(int));
  c->nxs = calloc(n + 1, sizeof(int));
  c->xstb = calloc((size_t)n * IP_GPU_XSEND + 1, sizeof(int));
  c->xsconn = calloc(n + 1, sizeof(int));
  c->sink = calloc(n + 1, sizeof(int));
  c->sink_copy = calloc(n + 1, sizeof(int));
  c->ref_tb = malloc((total + 1) * sizeof(int));
  c->ref_step = malloc((total + 1) * sizeof(int));
  /* per host: its folded-in tbs, in the order they were folded */
  int *chain = malloc((n + 1) * sizeof(int)), *next = malloc((n + 1) * sizeof(int)), *last = malloc((n + 1) * sizeof(int));
  int *ltb = malloc((total + 1) * sizeof(int)), *lst = malloc((total + 1) * sizeof(int));
  if (!c->host || !c->first || !c->count || !c->xconn || !c->nx || !c->xtb || !c->nxs || !c->xstb || !c->xsconn ||
      !c->sink || !c->sink_copy || !c->ref_tb || !c->ref_step || !chain || !next || !last || !ltb || !lst) {
    free(chain); free(next); free(last); free(ltb); free(lst);
    rt_chain_free(c);
    return BT_ERR_NOMEM;
  }
  /* last[h] = (tb of the last step h runs); a tb folds into host h when it
   * waits on exactly that step: nothing in h comes after what it needs. */
  for (int t = 0; t < n; t++) { c->host[t] = t; next[t] = -1; chain[t] = t; last[t] = g->tbs[t].nsteps ? t : -1; }
  for (int changed = fold; changed;) {
    changed = 0;
    for (int t = 0; t < n; t++) {
      const ir_tb *tb = &g->tbs[t];
      if (c->host[t] != t || !foldable(tb, t) || tb->steps[0].depid >= n) continue;
      const ir_step *s = &tb->steps[0];
      int h = c->host[s->depid], d = s->depid;
      if (h == t || last[h] != d || s->deps != g->tbs[d].nsteps - 1 || c->nx[h] + 1 + c->nx[t] > IP_GPU_XRECV)
        continue;
      /* t, and what was folded into t already, go to the end of h's list */
      next[chain[h]] = t;
      chain[h] = chain[t];
      last[h] = last[t];
      for (int m = t; m >= 0; m = next[m]) {
        c->host[m] = h;
        c->xconn[m] = c->nx[h];
        c->xtb[h * IP_GPU_XRECV + c->nx[h]++] = m;
        c->folded++;
      }
      c->nx[t] = 0;
      changed = 1;
    }
  }
  /* Sends, into hosts whose own first step is a chain's head. */
  for (int h = 0; fold && sends != RT_FOLD_SENDS_NONE && h < n; h++) {
    if (c->host[h] != h || g->tbs[h].nsteps < 1 || g->tbs[h].steps[0].op != IR_OP_RRC ||
        g->tbs[h].steps[0].depid >= 0)
      continue;
    int S[IP_GPU_XSEND], ns = 0;
    for (int t = 0; t < n && ns < IP_GPU_XSEND; t++)
      if (t != h && c->host[t] == t && c->nx[t] == 0 && sendable(&g->tbs[t], &g->tbs[h].steps[0])) S[ns++] = t;
    if (!ns) continue;
    int nl = 0, copy = 0;
    for (int t = h; t >= 0; t = next[t])
      for (int q = 0; q < g->tbs[t].nsteps; q++, nl++) { ltb[nl] = t; lst[nl] = q; }
    int k = sink_links(g, ltb, lst, nl, S, ns, &copy);
    if (!k && sends == RT_FOLD_SENDS_SINK) continue;
    for (int i = 0; i < ns; i++) {
      c->host[S[i]] = h;
      c->xsconn[S[i]] = i;
      c->xstb[h * IP_GPU_XSEND + i] = S[i];
      c->folded++;
      c->sends++;
    }
    c->nxs[h] = ns;
    c->sink[h] = k;
    c->sink_copy[h] = ns + copy;
  }
  long k = 0;
  for (int h = 0; h < n; h++) {
    c->first[h] = (int)k;
    if (c->host[h] != h) continue;
    for (int i = 0; i < c->nxs[h]; i++, k++) { c->ref_tb[k] = c->xstb[h * IP_GPU_XSEND + i]; c->ref_step[k] = 0; }
    for (int t = h; t >= 0; t = next[t])
      for (int s = 0; s < g->tbs[t].nsteps; s++, k++) { c->ref_tb[k] = t; c->ref_step[k] = s; }
    c->count[h] = (int)(k - c->first[h]);
  }
  free(chain); free(next); free(last); free(ltb); free(lst);
  return BT_OK;
}

int rt_chain_blocks(const ir_gpu *g, int fold, int sends) {
  rt_chain c;
  if (rt_chain_plan(&c, g, fold, sends) != BT_OK) return g->ntbs;
  int n = g->ntbs - c.folded;
  rt_chain_free(&c);
  return n;
}

int rt_chain_where(const rt_chain *c, int tb, int step, int *at) {
  int h = c->host[tb];
  if (h == tb) { *at = step; return h; }
  for (int i = 0; i < c->count[h]; i++)
    if (c->ref_tb[c->first[h] + i] == tb && c->ref_step[c->first[h] + i] == step) { *at = i; return h; }
  *at = step;
  return h;
}

void rt_chain_steps(const rt_chain *c, const ir_gpu *g, int h, ip_gstep *s, int32_t *nsend, int32_t *nrecv) {
  memset(nsend, 0, (1 + IP_GPU_XSEND) * sizeof *nsend);
  memset(nrecv, 0, (1 + IP_GPU_XRECV) * sizeof *nrecv);
  for (int j = 0; j < c->count[h]; j++) {
    int rt = c->ref_tb[c->first[h] + j];
    const ir_step *st = &g->tbs[rt].steps[c->ref_step[c->first[h] + j]];
    int depid = st->depid, deps = st->deps;
    if (depid >= 0) {
      int at, dh = rt_chain_where(c, depid, deps, &at);
      if (dh == h && at < j) depid = deps = -1;   /* earlier in this block: program order */
      else { depid = dh; deps = at; }
    }
    unsigned fl = ir_op_flags[st->op];
    int conn = rt == h || !(fl & IR_F_RECV) ? 0 : 1 + c->xconn[rt];
    int sconn = rt == h || !(fl & IR_F_SEND) ? 0 : 1 + c->xsconn[rt];
    s[j] = (ip_gstep){.op = st->op, .srcbuf = st->srcbuf, .dstbuf = st->dstbuf, .fuse = 1, .sconn = (uint8_t)sconn,
                      .conn = conn, .srcoff = st->srcoff, .dstoff = st->dstoff, .cnt = st->cnt, .depid = depid,
                      .deps = deps, .depn = depid >= 0 ? c->count[depid] : 0,
                      .sseq = (fl & IR_F_SEND) ? nsend[sconn]++ : 0, .rseq = (fl & IR_F_RECV) ? nrecv[conn]++ : 0};
  }
  if (c->sink[h]) {
    /* The copy back sank into the chain: every link reads and writes the
     * head's src, and the copy is a nop that waits for nothing. */
    ip_gstep *L = &s[c->nxs[h]], *cp = &s[c->sink_copy[h]];
    for (int k = 0; k < c->sink[h]; k++) {
      if (k) { L[k].srcbuf = L[0].srcbuf; L[k].srcoff = L[0].srcoff; }
      L[k].dstbuf = L[0].srcbuf;
      L[k].dstoff = L[0].srcoff;
    }
    *cp = (ip_gstep){.op = IR_OP_NOP, .fuse = 1, .depid = -1, .deps = -1};
  }
}

/* Whether step r may follow step p in a fused receive chain: r a
 * receive-reduce that waits for nothing (but p, in program order), p
 * waited on by no other block, r's src p's dst. */
static int links(const ip_gstep *p, const ip_gstep *r) {
  return r->op == IR_OP_RRC && r->depid < 0 && !p->hasdep && r->srcbuf == p->dstbuf && r->srcoff == p->dstoff &&
         r->cnt == p->cnt;
}

/* A nop that waits for nothing and that no block waits on: the kernel skips it. */
static int idle(const ip_gstep *s) { return s->op == IR_OP_NOP && s->depid < 0 && !s->hasdep; }

/* Sends at s[0..) of what the receive-reduce after them reads, each on
 * its own connection, that a fused chain may start with: how many (0 when
 * no receive-reduce that waits for nothing follows them). */
static int heads(const ip_gstep *s, int n) {
  int h = 0;
  while (h < n && h <= IP_GPU_XSEND && s[h].op == IR_OP_SEND && !s[h].hasdep) {
    for (int i = 0; i < h; i++)
      if (s[i].sconn == s[h].sconn) return 0;
    h++;
  }
  if (h == 0 || h == n || s[h].op != IR_OP_RRC || s[h].depid >= 0) return 0;
  for (int i = 0; i < h; i++)
    if (s[i].srcbuf != s[h].srcbuf || s[i].srcoff != s[h].srcoff || s[i].cnt != s[h].cnt) return 0;
  return h;
}

int rt_chain_fuse(ip_gstep *s, int n, int max) {
  int fused = 0;
  for (int j = 0; j < n;) {
    int k = j + 1;
    /* sends of what the chain's first link reads go with the chain */
    int head = max > 0 ? heads(&s[j], n - j) : 0;
    if (head) k += head;
    if (s[j].op == IR_OP_RRC || head)
      while (k < n && k - j - head < max && links(&s[k - 1], &s[k])) k++;
    else if (s[j].op == IR_OP_NOP && !idle(&s[j]))
      while (k < n && k - j < IP_GPU_NOPS && s[k].op == IR_OP_NOP && !idle(&s[k]) && !s[k - 1].hasdep) k++;
    s[j].fuse = (uint8_t)(k - j);
    for (int m = j + 1; m < k; m++) s[m].fuse = 0;
    fused += k - j - 1;
    j = k;
  }
  return fused;
}

void rt_chain_free(rt_chain *c) {
  free(c->host); free(c->first); free(c->count); free(c->xconn); free(c->nx); free(c->xtb);
  free(c->nxs); free(c->xstb); free(c->xsconn); free(c->sink); free(c->sink_copy);
  free(c->ref_tb); free(c->ref_step);
  memset(c, 0, sizeof *c);
}
