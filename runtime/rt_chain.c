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

bt_result rt_chain_plan(rt_chain *c, const ir_gpu *g, int fold) {
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
  c->ref_tb = malloc((total + 1) * sizeof(int));
  c->ref_step = malloc((total + 1) * sizeof(int));
  /* per host: its folded-in tbs, in the order they were folded */
  int *chain = malloc((n + 1) * sizeof(int)), *next = malloc((n + 1) * sizeof(int)), *last = malloc((n + 1) * sizeof(int));
  if (!c->host || !c->first || !c->count || !c->xconn || !c->nx || !c->xtb || !c->ref_tb || !c->ref_step || !chain ||
      !next || !last) {
    free(chain); free(next); free(last);
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
      if (ir_tb_compute(&g->tbs[d])) continue;   /* compute blocks run their steps in any order */
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
  long k = 0;
  for (int h = 0; h < n; h++) {
    c->first[h] = (int)k;
    if (c->host[h] != h) continue;
    for (int t = h; t >= 0; t = next[t])
      for (int s = 0; s < g->tbs[t].nsteps; s++, k++) { c->ref_tb[k] = t; c->ref_step[k] = s; }
    c->count[h] = (int)(k - c->first[h]);
  }
  free(chain); free(next); free(last);
  return BT_OK;
}

int rt_chain_blocks(const ir_gpu *g, int fold) {
  rt_chain c;
  if (rt_chain_plan(&c, g, fold) != BT_OK) return g->ntbs;
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

/* Whether step r may follow step p in a fused receive chain: r a
 * receive-reduce that waits for nothing (but p, in program order), p
 * waited on by no other block, r's src p's dst. */
static int links(const ip_gstep *p, const ip_gstep *r) {
  return r->op == IR_OP_RRC && r->depid < 0 && !p->hasdep && r->srcbuf == p->dstbuf && r->srcoff == p->dstoff &&
         r->cnt == p->cnt && !r->srcrun && !p->dstrun && !r->dstrun;   /* consecutive chunks only */
}

int rt_chain_fuse(ip_gstep *s, int n, int max) {
  int fused = 0;
  for (int j = 0; j < n;) {
    int k = j + 1;
    /* a send of what the chain's first link reads goes with the chain */
    int head = max > 0 && s[j].op == IR_OP_SEND && j + 1 < n && s[j + 1].op == IR_OP_RRC && s[j + 1].depid < 0 &&
               !s[j].hasdep && s[j + 1].srcbuf == s[j].srcbuf && s[j + 1].srcoff == s[j].srcoff &&
               s[j + 1].cnt == s[j].cnt && !s[j].srcrun && !s[j + 1].srcrun && !s[j + 1].dstrun;
    if (head) k++;
    if (s[j].op == IR_OP_RRC || head)
      while (k < n && k - j - head < max && links(&s[k - 1], &s[k])) k++;
    else if (s[j].op == IR_OP_NOP)
      while (k < n && k - j < IP_GPU_NOPS && s[k].op == IR_OP_NOP && !s[k - 1].hasdep) k++;
    s[j].fuse = (uint8_t)(k - j);
    for (int m = j + 1; m < k; m++) s[m].fuse = 0;
    fused += k - j - 1;
    j = k;
  }
  return fused;
}

void rt_chain_free(rt_chain *c) {
  free(c->host); free(c->first); free(c->count); free(c->xconn); free(c->nx); free(c->xtb);
  free(c->ref_tb); free(c->ref_step);
  memset(c, 0, sizeof *c);
}
