/* rt_plan.c -- lowering an ir_prog for one rank into the GPU interpreter's arrays. */
#include "rt_plan.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "rt_chain.h"
#include "rt_cuda.h"
#include "rt_log.h"
#include "rt_param.h"

/* Whether programs run in protocol proto fold receive chains (rt_chain_plan):
 * BATON_FOLD_CHAINS, and never in Simple. */
static int folds(int proto) { return rt_param_int(RT_PARAM_FOLD_CHAINS) != 0 && proto != IR_PROTO_SIMPLE; }

int rt_plan_lanes(const ir_prog *p, int blocks, int proto) {
  int64_t l = rt_param_int(RT_PARAM_LANES);
  if (l <= 0) {
    int most = 1;
    for (int r = 0; r < p->ngpus; r++) {
      int n = rt_chain_blocks(&p->gpus[r], folds(proto));
      if (n > most) most = n;
    }
    l = blocks / most;
  }
  if (l < 1) l = 1;
  if (l > 64) l = 64;
  return (int)l;
}

int rt_plan_keys(const ir_prog *p, int lanes, int proto, tp_key **keys, int n, int *cap) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      if (tb->send < 0) continue;
      for (int l = 0; l < lanes; l++) {
        if (n == *cap) {
          int c = *cap ? 2 * *cap : 64;
          tp_key *k = realloc(*keys, c * sizeof *k);
          if (!k) return -1;
          *keys = k;
          *cap = c;
        }
        (*keys)[n++] = (tp_key){r, tb->send, tb->chan, l, proto};
      }
    }
  return n;
}

/* Resolves the receive side of every connection a host block reads on
 * `lane`: its own tb's and those of the tbs folded into it. */
static bt_result wire_recv(ip_gtb *d, const ir_prog *p, int rank, int tbi, tp_p2p *t, int lane, int proto) {
  const ir_tb *tb = &p->gpus[rank].tbs[tbi];
  if (d->recv.fifo) CHECK(tp_p2p_side(t, tb->recv, tb->chan, lane, proto, 1, &d->recv));
  for (int x = 0; x < d->nx; x++) {
    const ir_tb *f = &p->gpus[rank].tbs[d->xtb[x]];
    CHECK(tp_p2p_side(t, f->recv, f->chan, lane, proto, 1, &d->xrecv[x]));
  }
  return BT_OK;
}

bt_result rt_plan_build(rt_plan *pl, const ir_prog *p, int rank, tp_p2p *t, int nthreads, int lanes, int proto) {
  memset(pl, 0, sizeof *pl);
  const ir_gpu *g = &p->gpus[rank];
  rt_chain ch;
  /* Folding saves a hand-off per link (about 0.4 us a call for the LL
   * one-shot) but puts every receive of a chain on one SM: for Simple, a
   * bandwidth protocol, that costs more than it saves (docs/RUNTIME.md). */
  CHECK(rt_chain_plan(&ch, g, folds(proto)));
  int stride = 1;   /* steps of the longest block: block i's start at i * stride */
  for (int i = 0; i < g->ntbs; i++)
    if (ch.count[i] > stride) stride = ch.count[i];
  long nsteps = (long)g->ntbs * stride;
  ip_gstep *hs = calloc(nsteps + 1, sizeof *hs);
  int nblocks = lanes * g->ntbs;
  ip_gtb *ht = calloc(nblocks + 1, sizeof *ht);
  int *cidx = malloc((g->ntbs + 1) * sizeof *cidx);
  bt_result res = BT_ERR_NOMEM;
  if (!hs || !ht || !cidx) goto out;
  if (ch.folded)
    LOG_INFO(RT_SUB_RUNTIME, "%s: rank %d runs %d receive-reduce thread blocks in the block of the step they wait "
             "for (BATON_FOLD_CHAINS)", ir_prog_where(p), rank, ch.folded);
  for (int i = 0; i < g->ntbs; i++) {
    const ir_tb *tb = &g->tbs[i];
    ip_gtb *d = &ht[i];
    d->nsteps = ch.count[i];
    d->send_peer = tb->send;
    d->recv_peer = tb->recv;
    d->chan = tb->chan;
    if (ch.host[i] != i) continue;   /* folded: an empty block */
    if (tb->send >= 0) CHECK_GOTO(tp_p2p_side(t, tb->send, tb->chan, 0, proto, 0, &d->send), res, out);
    if (tb->recv >= 0 && tp_p2p_side(t, tb->recv, tb->chan, 0, proto, 1, &d->recv)) {
      /* No peer sends on this connection: fine only if nothing receives. */
      for (int s = 0; s < tb->nsteps; s++)
        if (ir_op_flags[tb->steps[s].op] & IR_F_RECV) {
          LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d tb %d receives from rank %d on channel %d, which never sends",
                   ir_prog_where(p), rank, i, tb->recv, tb->chan);
          res = BT_ERR_INVALID;
          goto out;
        }
      memset(&d->recv, 0, sizeof d->recv);
    }
    d->nx = ch.nx[i];
    for (int x = 0; x < d->nx; x++) {
      int f = ch.xtb[i * IP_GPU_XRECV + x];
      d->xtb[x] = f;
      d->xpeer[x] = g->tbs[f].recv;
    }
    if (d->nx) CHECK_GOTO(wire_recv(d, p, rank, i, t, 0, proto), res, out);
    for (int j = 0; j < ch.count[i]; j++) {
      int rt = ch.ref_tb[ch.first[i] + j];
      const ir_step *st = &g->tbs[rt].steps[ch.ref_step[ch.first[i] + j]];
      int depid = st->depid, deps = st->deps;
      if (depid >= 0) {
        int at, h = rt_chain_where(&ch, depid, deps, &at);
        if (h == i && at < j) depid = deps = -1;   /* earlier in this block: program order */
        else { depid = h; deps = at; }
      }
      int conn = rt == i ? 0 : 1 + ch.xconn[rt];
      unsigned fl = ir_op_flags[st->op];
      hs[(long)i * stride + j] = (ip_gstep){.op = st->op, .srcbuf = st->srcbuf, .dstbuf = st->dstbuf, .fuse = 1,
                                            .conn = conn, .srcoff = st->srcoff, .dstoff = st->dstoff, .cnt = st->cnt,
                                            .depid = depid, .deps = deps, .depn = depid >= 0 ? ch.count[depid] : 0,
                                            .sseq = (fl & IR_F_SEND) ? d->nsend++ : 0,
                                            .rseq = (fl & IR_F_RECV) ? d->nrecv[conn]++ : 0};
    }
  }
  /* hasdep exactly where another block waits: the steps a fold put in
   * program order release nothing. */
  for (int i = 0; i < g->ntbs; i++)
    for (int j = 0; j < ch.count[i]; j++) {
      const ip_gstep *w = &hs[(long)i * stride + j];
      if (w->depid >= 0) hs[(long)w->depid * stride + w->deps].hasdep = 1;
    }
  /* Fused steps: receive chains in LL and LL128 only (a Simple step's
   * data waits on a head word per message, and its pieces are not one per
   * thread), runs of nop waits in every protocol. */
  int fused = 0, fuse = rt_param_int(RT_PARAM_FUSE_CHAINS) != 0;
  for (int i = 0; fuse && i < g->ntbs; i++)
    fused += rt_chain_fuse(&hs[(long)i * stride], ch.count[i], proto == IR_PROTO_SIMPLE ? 0 : IP_GPU_FUSE);
  if (fused)
    LOG_INFO(RT_SUB_RUNTIME, "%s rank %d: %d steps run with the step before them (BATON_FUSE_CHAINS)",
             ir_prog_where(p), rank, fused);
  /* A folded tb gets no CUDA block: the hosts are numbered 0..nh-1 in IR
   * order (rows move down, never over one not yet moved), and
   * dependencies name those numbers; ip_gtb.irtb keeps the IR's. */
  int nh = 0;
  for (int i = 0; i < g->ntbs; i++) cidx[i] = ch.host[i] == i ? nh++ : -1;
  for (int i = 0; i < g->ntbs; i++) {
    int k = cidx[i];
    if (k < 0) continue;
    ht[i].irtb = i;
    if (k != i) {
      memmove(&hs[(long)k * stride], &hs[(long)i * stride], stride * sizeof *hs);
      ht[k] = ht[i];
    }
    for (int j = 0; j < ch.count[i]; j++)
      if (hs[(long)k * stride + j].depid >= 0) hs[(long)k * stride + j].depid = cidx[hs[(long)k * stride + j].depid];
  }
  memset(&hs[(long)nh * stride], 0, (nsteps - (long)nh * stride) * sizeof *hs);
  nsteps = (long)nh * stride;
  nblocks = lanes * nh;
  /* Lanes 1.. are copies of lane 0 with connections of their own. */
  for (int l = 1; l < lanes; l++)
    for (int k = 0; k < nh; k++) {
      int i = ht[k].irtb;
      const ir_tb *tb = &g->tbs[i];
      ip_gtb *d = &ht[l * nh + k];
      *d = ht[k];
      if (d->send.fifo) CHECK_GOTO(tp_p2p_side(t, tb->send, tb->chan, l, proto, 0, &d->send), res, out);
      CHECK_GOTO(wire_recv(d, p, rank, i, t, l, proto), res, out);
    }
  pl->ntbs = nh;
  if (!(pl->irtb = malloc((nh + 1) * sizeof *pl->irtb))) { res = BT_ERR_NOMEM; goto out; }
  for (int k = 0; k < nh; k++) pl->irtb[k] = ht[k].irtb;
  pl->lanes = lanes;
  pl->nthreads = p->nthreads > 0 ? p->nthreads : nthreads;
  if (pl->nthreads > IP_GPU_MAX_THREADS || pl->nthreads % 32) {
    /* Whole warps: the LL128 loop votes over all 32 threads of a warp. */
    int want = pl->nthreads;
    pl->nthreads = want > IP_GPU_MAX_THREADS ? IP_GPU_MAX_THREADS : want < 32 ? 32 : want / 32 * 32;
    LOG_INFO(RT_SUB_RUNTIME, "%s asks for %d threads per thread block: running %d (whole warps, at most %d)",
             ir_prog_where(p), want, pl->nthreads, IP_GPU_MAX_THREADS);
  }
  pl->step_stride = stride;
  pl->smem_steps = stride <= IP_GPU_SMEM_STEPS ? stride : 0;
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->steps, (nsteps + 1) * sizeof *hs),
                     RT_SUB_RUNTIME, "plan: steps"), res, out);
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->tbs, (nblocks + 1) * sizeof *ht),
                     RT_SUB_RUNTIME, "plan: thread blocks"), res, out);
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->words, (2 * nblocks + 1) * sizeof(uint64_t)),
                     RT_SUB_RUNTIME, "plan: progress words"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemcpy(pl->steps, hs, nsteps * sizeof *hs, cudaMemcpyHostToDevice),
                     RT_SUB_RUNTIME, "plan: steps upload"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemcpy(pl->tbs, ht, nblocks * sizeof *ht, cudaMemcpyHostToDevice),
                     RT_SUB_RUNTIME, "plan: tbs upload"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemset(pl->words, 0, (2 * nblocks + 1) * sizeof(uint64_t)),
                     RT_SUB_RUNTIME, "plan: progress clear"), res, out);
  res = BT_OK;
out:
  rt_chain_free(&ch);
  free(hs);
  free(ht);
  free(cidx);
  if (res) rt_plan_free(pl);
  return res;
}

void rt_plan_free(rt_plan *pl) {
  if (pl->steps) cudaFree(pl->steps);
  if (pl->tbs) cudaFree(pl->tbs);
  if (pl->words) cudaFree(pl->words);
  free(pl->irtb);
  memset(pl, 0, sizeof *pl);
}
