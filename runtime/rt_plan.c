/* rt_plan.c -- lowering an ir_prog for one rank into the GPU interpreter's arrays. */
#include "rt_plan.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "rt_chain.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"

/* Whether programs run in protocol proto fold receive chains (rt_chain_plan):
 * BATON_FOLD_CHAINS, and never in Simple. */
static int folds(int proto) { return rt_param_int(RT_PARAM_FOLD_CHAINS) != 0 && proto != IR_PROTO_SIMPLE; }

/* Compute thread blocks of g. */
static int compute_tbs(const ir_gpu *g) {
  int n = 0;
  for (int t = 0; t < g->ntbs; t++) n += ir_tb_compute(&g->tbs[t]);
  return n;
}

int rt_plan_lanes(const ir_prog *p, int blocks, int proto) {
  int64_t l = rt_param_int(RT_PARAM_LANES);
  if (l <= 0) {
    int most = 1, fused = ir_prog_fused(p);
    for (int r = 0; r < p->ngpus; r++) {
      int n = rt_chain_blocks(&p->gpus[r], folds(proto)) - compute_tbs(&p->gpus[r]);
      if (n > most) most = n;
    }
    l = (fused ? blocks / 8 : blocks) / most;
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
static bt_result wire_recv(ip_gtb *d, const ir_prog *p, int rank, int tbi, tp_set *t, int lane, int proto) {
  const ir_tb *tb = &p->gpus[rank].tbs[tbi];
  if (d->recv.fifo) CHECK(tp_set_side(t, tb->recv, tb->chan, lane, proto, 1, &d->recv));
  for (int x = 0; x < d->nx; x++) {
    const ir_tb *f = &p->gpus[rank].tbs[d->xtb[x]];
    CHECK(tp_set_side(t, f->recv, f->chan, lane, proto, 1, &d->xrecv[x]));
  }
  return BT_OK;
}

/* The semaphores of rank g's compute steps that other steps wait on:
 * sem[first[t] + s] packs each one's words (ip_sem_pack), IP_SEM_NONE for
 * the others; *nwords words in all.  BT_ERR_UNSUPPORTED past
 * IP_SEM_MAX_WORDS. */
static bt_result plan_sems(const ir_prog *p, int rank, const int *first, int32_t *sem, int *nwords) {
  const ir_gpu *g = &p->gpus[rank];
  int n = 0;
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      sem[first[t] + s] = IP_SEM_NONE;
      if (!ir_tb_compute(&g->tbs[t]) || !st->hasdep) continue;
      if (st->sync_param > IP_SEM_MAX_PARAM) {
        LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d tb %d step %d: sync parameter %d is above %d", ir_prog_where(p), rank, t,
                 s, st->sync_param, IP_SEM_MAX_PARAM);
        return BT_ERR_UNSUPPORTED;
      }
      int words = (int)ir_sync_count(st->sync, st->sync_param, ip_sem_max_tiles(st->sync, st->sync_param));
      if (n + words > IP_SEM_MAX_WORDS) {
        LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d: its compute steps need more than %d semaphores", ir_prog_where(p), rank,
                 IP_SEM_MAX_WORDS);
        return BT_ERR_UNSUPPORTED;
      }
      sem[first[t] + s] = ip_sem_pack(n, st->sync, st->sync_param);
      n += words;
    }
  *nwords = n;
  return BT_OK;
}

/* The gemm steps of rank's compute thread blocks, for the gemm kernel:
 * they must compute a run of input chunks, each once; pl->gmap gets each
 * chunk's semaphores (sem, as plan_sems packed them) and destination.
 * BT_OK with pl->gemm 0 when the rank has no gemm step;
 * BT_ERR_UNSUPPORTED, said why, when the GPU cannot run them. */
static bt_result plan_gemm(rt_plan *pl, const ir_prog *p, int rank, const int *first, const int32_t *sem) {
  const ir_gpu *g = &p->gpus[rank];
  int c0 = INT32_MAX, c1 = -1;
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      if (st->op != IR_OP_GEMM) continue;
      if (c1 < 0) {
        pl->gx = st->args[0];
        pl->gw = st->args[1];
        pl->gfirst = st->srcoff;
      }
      if (st->srcoff < c0) c0 = st->srcoff;
      if (st->srcoff + st->cnt > c1) c1 = st->srcoff + st->cnt;
    }
  if (c1 < 0) return BT_OK;
  const char *why = NULL;
  if (!ip_gpu_gemm_ok(&why) || c1 - c0 > IP_GEMM_MAX_CHUNKS) {
    LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d: its gemm steps cannot run on this GPU: %s", ir_prog_where(p), rank,
             why && c1 - c0 <= IP_GEMM_MAX_CHUNKS ? why : "they compute more than IP_GEMM_MAX_CHUNKS input chunks");
    return BT_ERR_UNSUPPORTED;
  }
  int n = c1 - c0;
  int32_t *m = malloc(2 * (size_t)n * sizeof *m);
  if (!m) return BT_ERR_NOMEM;
  for (int i = 0; i < 2 * n; i++) m[i] = -1;   /* a destination of -1: not computed yet */
  bt_result res = BT_OK;
  for (int t = 0; t < g->ntbs && !res; t++)
    for (int s = 0; s < g->tbs[t].nsteps && !res; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      if (st->op != IR_OP_GEMM) continue;
      for (int j = 0; j < st->cnt; j++) {
        int32_t *e = &m[2 * (st->srcoff + j - c0)];
        if (e[1] != -1) {
          LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d tb %d step %d: input chunk %d is computed a second time: the GPU runs "
                   "gemm steps that compute each chunk once", ir_prog_where(p), rank, t, s, st->srcoff + j);
          res = BT_ERR_UNSUPPORTED;
          break;
        }
        e[0] = sem[first[t] + s];
        e[1] = IP_GMAP_DST(st->dstbuf, st->dstoff + j);
      }
    }
  for (int i = 0; i < n && !res; i++)
    if (m[2 * i + 1] == -1) {
      LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d: input chunk %d lies between chunks its gemm steps compute but is not "
               "computed: the GPU runs gemm steps over a run of chunks", ir_prog_where(p), rank, c0 + i);
      res = BT_ERR_UNSUPPORTED;
    }
  pl->gposts = 0;
  pl->gdbuf = n > 0 ? IP_GMAP_BUF(m[1]) : -1;
  pl->gdchunk0 = n > 0 ? IP_GMAP_CHUNK(m[1]) : 0;
  for (int i = 0; i < n && !res; i++) {
    pl->gposts |= m[2 * i] != IP_SEM_NONE;
    if (IP_GMAP_BUF(m[2 * i + 1]) != pl->gdbuf || IP_GMAP_CHUNK(m[2 * i + 1]) != pl->gdchunk0 + i) pl->gdbuf = -1;
  }
  if (!res) res = rt_cuda(cudaMalloc((void **)&pl->gmap, 2 * (size_t)n * sizeof *m), RT_SUB_RUNTIME, "plan: gemm map");
  if (!res)
    res = rt_cuda(cudaMemcpy(pl->gmap, m, 2 * (size_t)n * sizeof *m, cudaMemcpyHostToDevice), RT_SUB_RUNTIME,
                  "plan: gemm map upload");
  free(m);
  if (res) return res;
  pl->gemm = 1;
  pl->gchunk0 = c0;
  pl->gchunks = n;
  return BT_OK;
}

bt_result rt_plan_build(rt_plan *pl, const ir_prog *p, int rank, tp_set *t, int nthreads, int lanes, int proto,
                        int share) {
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
  long nsteps = (long)g->ntbs * stride, total = 0;
  ip_gstep *hs = calloc(nsteps + 1, sizeof *hs), *moved = calloc(nsteps + 1, sizeof *hs);
  int nblocks = lanes * g->ntbs;
  ip_gtb *ht = calloc(nblocks + g->ntbs + 1, sizeof *ht);
  int *cidx = malloc((g->ntbs + 1) * sizeof *cidx), *first = malloc((g->ntbs + 1) * sizeof *first);
  for (int i = 0; i < g->ntbs; i++) total += g->tbs[i].nsteps;
  int32_t *sem = malloc((total + 1) * sizeof *sem);
  bt_result res = BT_ERR_NOMEM;
  if (!hs || !moved || !ht || !cidx || !first || !sem) goto out;
  for (int i = 0, k = 0; i < g->ntbs; k += g->tbs[i++].nsteps) first[i] = k;
  int nsem = 0;
  CHECK_GOTO(plan_sems(p, rank, first, sem, &nsem), res, out);
  CHECK_GOTO(plan_gemm(pl, p, rank, first, sem), res, out);
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
    if (tb->send >= 0) CHECK_GOTO(tp_set_side(t, tb->send, tb->chan, 0, proto, 0, &d->send), res, out);
    if (tb->recv >= 0 && tp_set_side(t, tb->recv, tb->chan, 0, proto, 1, &d->recv)) {
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
    if (ir_tb_compute(tb)) pl->ncomp++;
    for (int j = 0; j < ch.count[i]; j++) {
      int rt = ch.ref_tb[ch.first[i] + j], rs = ch.ref_step[ch.first[i] + j];
      const ir_step *st = &g->tbs[rt].steps[rs];
      int depid = st->depid, deps = st->deps, wsem = IP_SEM_NONE;
      if (ir_tb_compute(&g->tbs[rt])) {
        wsem = sem[first[rt] + rs];   /* the semaphores it counts in */
      } else if (depid >= 0 && ir_tb_compute(&g->tbs[depid])) {
        wsem = sem[first[depid] + deps];   /* a wait on a compute step's tiles: depid is fixed up below */
      } else if (depid >= 0) {
        int at, h = rt_chain_where(&ch, depid, deps, &at);
        if (h == i && at < j) depid = deps = -1;   /* earlier in this block: program order */
        else { depid = h; deps = at; }
      }
      int conn = rt == i ? 0 : 1 + ch.xconn[rt];
      unsigned fl = ir_op_flags[st->op];
      hs[(long)i * stride + j] = (ip_gstep){.op = st->op, .srcbuf = st->srcbuf, .dstbuf = st->dstbuf,
                                            .hasdep = ir_tb_compute(&g->tbs[rt]) ? st->hasdep : 0, .fuse = 1,
                                            .arg = {st->args[0], st->args[1], st->args[2], st->args[3]},
                                            .conn = conn, .srcoff = st->srcoff, .dstoff = st->dstoff, .cnt = st->cnt,
                                            .srcrun = st->srcrun, .srcstride = st->srcstride,
                                            .dstrun = st->dstrun, .dststride = st->dststride,
                                            .depid = depid, .deps = deps,
                                            .depn = depid < 0 ? 0 : wsem == IP_SEM_NONE ? ch.count[depid]
                                                    : g->tbs[depid].steps[deps].cnt,
                                            .sseq = (fl & IR_F_SEND) ? d->nsend++ : 0,
                                            .rseq = (fl & IR_F_RECV) ? d->nrecv[conn]++ : 0, .sem = wsem};
      if (fl & IR_F_COMP) pl->inline_compute |= !ir_tb_compute(&g->tbs[rt]);
      if (ir_tb_compute(&g->tbs[rt])) pl->csteps++;
    }
  }
  /* hasdep exactly where another block waits on a step's progress: the
   * steps a fold put in program order release nothing (compute steps keep
   * theirs: they count in semaphores). */
  for (int i = 0; i < g->ntbs; i++)
    for (int j = 0; j < ch.count[i]; j++) {
      const ip_gstep *w = &hs[(long)i * stride + j];
      if (w->depid >= 0 && w->sem == IP_SEM_NONE) hs[(long)w->depid * stride + w->deps].hasdep = 1;
    }
  /* Fused steps: receive chains in LL and LL128 only (a Simple step's
   * data waits on a head word per message, and its pieces are not one per
   * thread), runs of nop waits in every protocol. */
  int fused = 0, fuse = rt_param_int(RT_PARAM_FUSE_CHAINS) != 0;
  for (int i = 0; fuse && i < g->ntbs; i++)
    if (!ir_tb_compute(&g->tbs[i]))
      fused += rt_chain_fuse(&hs[(long)i * stride], ch.count[i], proto == IR_PROTO_SIMPLE ? 0 : IP_GPU_FUSE);
  if (fused)
    LOG_INFO(RT_SUB_RUNTIME, "%s rank %d: %d steps run with the step before them (BATON_FUSE_CHAINS)",
             ir_prog_where(p), rank, fused);
  /* A folded tb gets no CUDA block: the hosts are numbered 0..nh-1 in IR
   * order, then the compute tbs nh.., and dependencies name those
   * numbers; ip_gtb.irtb keeps the IR's.  A wait on a compute step names
   * its compute tb's entry in the block table (after every lane's). */
  int nh = 0;
  for (int i = 0; i < g->ntbs; i++) cidx[i] = ch.host[i] == i && !ir_tb_compute(&g->tbs[i]) ? nh++ : -1;
  for (int i = 0, k = nh; i < g->ntbs; i++)
    if (ir_tb_compute(&g->tbs[i])) cidx[i] = k++;
  for (int i = 0; i < g->ntbs; i++) {
    int k = cidx[i];
    if (k < 0) continue;
    ht[i].irtb = i;
    memcpy(&moved[(long)k * stride], &hs[(long)i * stride], stride * sizeof *hs);
    for (int j = 0; j < ch.count[i]; j++) {
      ip_gstep *w = &moved[(long)k * stride + j];
      if (w->depid < 0) continue;
      w->depid = w->sem != IP_SEM_NONE ? lanes * nh + (cidx[w->depid] - nh) : cidx[w->depid];
    }
  }
  {
    ip_gtb *sorted = calloc(nblocks + g->ntbs + 1, sizeof *sorted);
    if (!sorted) goto out;
    for (int i = 0; i < g->ntbs; i++)
      if (cidx[i] >= 0) sorted[cidx[i] < nh ? cidx[i] : lanes * nh + cidx[i] - nh] = ht[i];
    free(ht);
    ht = sorted;
  }
  nsteps = (long)(nh + pl->ncomp) * stride;
  /* Lanes 1.. are copies of lane 0 with connections of their own. */
  for (int l = 1; l < lanes; l++)
    for (int k = 0; k < nh; k++) {
      int i = ht[k].irtb;
      const ir_tb *tb = &g->tbs[i];
      ip_gtb *d = &ht[l * nh + k];
      *d = ht[k];
      if (d->send.fifo) CHECK_GOTO(tp_set_side(t, tb->send, tb->chan, l, proto, 0, &d->send), res, out);
      CHECK_GOTO(wire_recv(d, p, rank, i, t, l, proto), res, out);
    }
  pl->ntbs = nh;
  if (!(pl->irtb = malloc((nh + pl->ncomp + 1) * sizeof *pl->irtb))) { res = BT_ERR_NOMEM; goto out; }
  for (int k = 0; k < nh; k++) pl->irtb[k] = ht[k].irtb;
  for (int k = 0; k < pl->ncomp; k++) pl->irtb[nh + k] = ht[lanes * nh + k].irtb;
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
  pl->stage_bytes = pl->inline_compute ? IP_GPU_STAGE_BYTES : 0;   /* compute blocks store straight to the chunks */
  if (pl->gemm) {
    /* The gemm kernel: the tile engine's threads and shared memory (the
     * steps stay in global memory when both do not fit). */
    int fit = 0;
    pl->nthreads = IP_GEMM_THREADS;
    pl->stage_bytes = ip_gpu_gemm_smem();
    CHECK_GOTO(ip_gpu_max_blocks(pl->nthreads, pl->smem_steps * (int)sizeof(ip_gstep) + pl->stage_bytes, 1, &fit),
               res, out);
    if (!fit) pl->smem_steps = 0;
  }
  if (pl->ncomp) {
    /* The compute tbs share what the GPU holds beyond the lanes' blocks. */
    int fit = 0;
    CHECK_GOTO(ip_gpu_max_blocks(pl->nthreads, pl->smem_steps * (int)sizeof(ip_gstep) + pl->stage_bytes, pl->gemm,
                                 &fit), res, out);
    fit /= share > 0 ? share : 1;
    int64_t want = rt_param_int(RT_PARAM_COMPUTE_BLOCKS);
    int avail = fit - lanes * nh;
    if (want > 0 && want < avail) avail = (int)want;
    pl->cwidth = avail / pl->ncomp;
    if (pl->cwidth < 1) {
      LOG_WARN(RT_SUB_RUNTIME, "%s: rank %d: its communication takes %d CUDA blocks (%d thread blocks x %d lanes) of "
               "the %d the GPU holds for it: none is left for its %d compute thread block%s (lower BATON_LANES?)",
               ir_prog_where(p), rank, lanes * nh, nh, lanes, fit, pl->ncomp, pl->ncomp == 1 ? "" : "s");
      res = BT_ERR_UNSUPPORTED;
      goto out;
    }
    LOG_INFO(RT_SUB_RUNTIME, "%s: rank %d: %d compute thread block%s of %d CUDA blocks each beside %d x %d "
             "communication blocks", ir_prog_where(p), rank, pl->ncomp, pl->ncomp == 1 ? "" : "s", pl->cwidth, nh, lanes);
  }
  int blocks = rt_plan_blocks(pl);
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->steps, (nsteps + 1) * sizeof *hs),
                     RT_SUB_RUNTIME, "plan: steps"), res, out);
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->tbs, (lanes * nh + pl->ncomp + 1) * sizeof *ht),
                     RT_SUB_RUNTIME, "plan: thread blocks"), res, out);
  /* gen and progress per block, the claim, then ip_gargs.bagctr (blocks done, a counter per compute step) */
  const size_t nwords = 2 * (size_t)blocks + 1 + (size_t)pl->csteps + 1;
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->words, nwords * sizeof(uint64_t)),
                     RT_SUB_RUNTIME, "plan: progress words"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemcpy(pl->steps, moved, nsteps * sizeof *hs, cudaMemcpyHostToDevice),
                     RT_SUB_RUNTIME, "plan: steps upload"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemcpy(pl->tbs, ht, (lanes * nh + pl->ncomp) * sizeof *ht, cudaMemcpyHostToDevice),
                     RT_SUB_RUNTIME, "plan: tbs upload"), res, out);
  CHECK_GOTO(rt_cuda(cudaMemset(pl->words, 0, nwords * sizeof(uint64_t)),
                     RT_SUB_RUNTIME, "plan: progress clear"), res, out);
  if (nsem) {
    CHECK_GOTO(rt_cuda(cudaMalloc((void **)&pl->sems, (size_t)nsem * sizeof(uint64_t)), RT_SUB_RUNTIME,
                       "plan: semaphores"), res, out);
    CHECK_GOTO(rt_cuda(cudaMemset(pl->sems, 0, (size_t)nsem * sizeof(uint64_t)), RT_SUB_RUNTIME,
                       "plan: semaphores clear"), res, out);
  }
  res = BT_OK;
out:
  rt_chain_free(&ch);
  free(hs);
  free(moved);
  free(ht);
  free(cidx);
  free(first);
  free(sem);
  if (res) rt_plan_free(pl);
  return res;
}

void rt_plan_free(rt_plan *pl) {
  if (pl->gmap) cudaFree(pl->gmap);
  if (pl->sems) cudaFree(pl->sems);
  if (pl->steps) cudaFree(pl->steps);
  if (pl->tbs) cudaFree(pl->tbs);
  if (pl->words) cudaFree(pl->words);
  free(pl->irtb);
  memset(pl, 0, sizeof *pl);
}
