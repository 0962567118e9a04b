/* ir_peers.c -- the ends of a program's connections: each rank's sorted
 * by (peer, channel), and the pairing of every send with its receive
 * (ir_peers.h). */
#include "ir_peers.h"

#include <stdlib.h>
#include <string.h>

static int conn_cmp(const void *x, const void *y) {
  const ir_conn_end *a = x, *b = y;
  if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
  if (a->chan != b->chan) return a->chan < b->chan ? -1 : 1;
  return (a->t > b->t) - (a->t < b->t);
}

ir_conn_end *ir_conn_ends(const ir_gpu *g, int send, int *n) {
  ir_conn_end *k = malloc(((size_t)g->ntbs + 1) * sizeof *k);
  *n = 0;
  if (!k) return NULL;
  for (int t = 0; t < g->ntbs; t++) {
    int peer = send ? g->tbs[t].send : g->tbs[t].recv;
    if (peer >= 0) k[(*n)++] = (ir_conn_end){peer, g->tbs[t].chan, t};
  }
  if (*n) qsort(k, *n, sizeof *k, conn_cmp);
  return k;
}

/* The first tb (lowest index) among the n sorted ends k with (peer, chan),
 * or -1: a binary search. */
static int find_tb(const ir_conn_end *k, int n, int peer, int chan) {
  int lo = 0, hi = n;
  ir_conn_end want = {peer, chan, -1};
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (conn_cmp(&k[mid], &want) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && k[lo].peer == peer && k[lo].chan == chan ? k[lo].t : -1;
}

void ir_peers_free(ir_peers *pe) {
  for (int r = 0; r < pe->n; r++) {
    if (pe->send_tb) free(pe->send_tb[r]);
    if (pe->recv_tb) free(pe->recv_tb[r]);
  }
  free(pe->send_tb);
  free(pe->recv_tb);
  memset(pe, 0, sizeof *pe);
}

bt_result ir_peers_build(const ir_prog *p, ir_peers *pe) {
  pe->n = p->ngpus;
  pe->send_tb = calloc(p->ngpus, sizeof *pe->send_tb);
  pe->recv_tb = calloc(p->ngpus, sizeof *pe->recv_tb);
  /* each rank's connection ends, sorted: [rank] sends and receives */
  ir_conn_end **sk = calloc(p->ngpus + 1, sizeof *sk), **rk = calloc(p->ngpus + 1, sizeof *rk);
  int *ns = calloc(p->ngpus + 1, sizeof *ns), *nr = calloc(p->ngpus + 1, sizeof *nr);
  bt_result res = BT_ERR_NOMEM;
  if (!pe->send_tb || !pe->recv_tb || !sk || !rk || !ns || !nr) goto out;
  for (int r = 0; r < p->ngpus; r++)
    if (!(sk[r] = ir_conn_ends(&p->gpus[r], 1, &ns[r])) || !(rk[r] = ir_conn_ends(&p->gpus[r], 0, &nr[r]))) goto out;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    pe->send_tb[r] = malloc((g->ntbs + 1) * sizeof(int));
    pe->recv_tb[r] = malloc((g->ntbs + 1) * sizeof(int));
    if (!pe->send_tb[r] || !pe->recv_tb[r]) goto out;
    for (int t = 0; t < g->ntbs; t++) {
      const ir_tb *tb = &g->tbs[t];
      int ok_s = tb->send >= 0 && tb->send < p->ngpus, ok_r = tb->recv >= 0 && tb->recv < p->ngpus;
      /* the first tb of the peer that receives from r (sends to r) on the channel */
      pe->send_tb[r][t] = ok_s ? find_tb(rk[tb->send], nr[tb->send], r, tb->chan) : -1;
      pe->recv_tb[r][t] = ok_r ? find_tb(sk[tb->recv], ns[tb->recv], r, tb->chan) : -1;
    }
  }
  res = BT_OK;
out:
  for (int r = 0; r < p->ngpus; r++) {
    if (sk) free(sk[r]);
    if (rk) free(rk[r]);
  }
  free(sk); free(rk); free(ns); free(nr);
  if (res) ir_peers_free(pe);
  return res;
}
