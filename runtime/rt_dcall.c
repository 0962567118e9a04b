/* rt_dcall.c -- direct programs in a communicator (docs/RUNTIME.md,
 * "Direct programs"): their plans and the window at creation, and each
 * call's arguments, launch, and peers' buffers. */
#include "rt_comm.h"

#include <stdlib.h>
#include <string.h>

#include "ip_dtype.h"
#include "ir_geom.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"
#include "rt_peerbuf.h"
#include "rt_regset.h"

int rt_direct_wanted(const baton_comm *c) {
  const int fused = rt_param_int(RT_PARAM_FUSED_DIRECT) != 0;
  for (int i = 0; i < rt_algos_count(c->algos); i++) {
    const rt_algo *al = rt_algos_get(c->algos, i);
    if (ir_prog_direct(al->prog) || (fused && al->compute == IR_OP_GEMV)) return 1;
    /* A fused AllToAll of a process per GPU keeps its flags there. */
    if (fused && c->bs && al->compute >= 0 && al->prog->coll == IR_COLL_ALLTOALL) return 1;
  }
  return 0;
}

/* Copies every built plan's table to device memory (c->dtabs, a slot per
 * algorithm), where each call's kernel finds its own (ip_dargs.tab); none
 * when no plan was built.  BT_ERR_CUDA (logged) when the device has no
 * room for them: the communicator is not made, as when its FIFOs find
 * none (dropping the plans on this rank alone would leave its peers
 * running direct programs it does not). */
static bt_result upload_tables(baton_comm *c) {
  int n = 2 * rt_algos_count(c->algos), any = 0;   /* every plan and its variant */
  for (int i = 0; i < n; i++) any |= c->dplans[i].ok;
  if (!any) return BT_OK;
  ip_dtab *host = calloc((size_t)n, sizeof *host);
  if (!host) return BT_ERR_NOMEM;
  for (int i = 0; i < n; i++)
    if (c->dplans[i].ok) host[i] = c->dplans[i].tab;
  bt_result e = rt_cuda(cudaMalloc((void **)&c->dtabs, (size_t)n * sizeof *host), RT_SUB_RUNTIME,
                        "device memory for the direct programs' tables");
  if (!e)
    e = rt_cuda(cudaMemcpy(c->dtabs, host, (size_t)n * sizeof *host, cudaMemcpyHostToDevice), RT_SUB_RUNTIME,
                "copying the direct programs' tables");
  free(host);
  return e;   /* c->dtabs, if made, goes with the communicator (rt_direct_free) */
}

bt_result rt_direct_plans(baton_comm *c, int nthreads) {
  int n = rt_algos_count(c->algos);
  if (!(c->dplans = calloc(2 * (size_t)n + 1, sizeof *c->dplans))) return BT_ERR_NOMEM;
  for (int i = 0; i < n; i++) {
    const ir_prog *p = rt_algos_get(c->algos, i)->prog;
    if (!ir_prog_direct(p)) continue;
    if (c->nodes > 1 || rt_comm_proto(c, p) != (int)p->proto) {
      if (c->rank == 0)
        LOG_WARN(RT_SUB_RUNTIME, "%s: a direct program runs on one node group in its own protocol (%s): not used",
                 ir_prog_where(p), c->nodes > 1 ? "the communicator spans node groups" : "BATON_PROTO=Simple");
      continue;
    }
    bt_result e = rt_dplan_build(&c->dplans[i], p, c->rank, nthreads);
    if (e && e != BT_ERR_UNSUPPORTED) return e;
    if (c->dplans[i].ok && rt_dplan_grid(&c->dplans[i], c->grid) < c->dplans[i].most_tbs) {
      if (c->rank == 0)
        LOG_WARN(RT_SUB_RUNTIME, "%s: its ranks do not all see each other begin a call, so the direct grid keeps a "
                 "block to meet, and %d blocks do not leave one beside its %d thread blocks: not used",
                 ir_prog_where(p), c->grid, c->dplans[i].most_tbs);
      memset(&c->dplans[i], 0, sizeof c->dplans[i]);
      continue;
    }
    /* Its variant, where it has one (each builder refuses, unsaid, a
     * program it does not apply to: root copy for a rooted one's root,
     * staged for an AllToAll). */
    if (c->dplans[i].ok && (e = rt_dplan_build_root_copy(&c->dplans[n + i], p, c->rank, nthreads)) == BT_ERR_UNSUPPORTED)
      e = rt_dplan_build_staged(&c->dplans[n + i], p, c->rank, nthreads);
    if (e && e != BT_ERR_UNSUPPORTED) return e;
  }
  return upload_tables(c);
}

bt_result rt_direct_window(baton_comm *c, rt_window_handle *mine) {
  memset(mine, 0, sizeof *mine);
  int64_t mb = rt_param_int(RT_PARAM_WINDOW_MB);
  if (mb <= 0 || c->nodes > 1) return BT_OK;
  rt_window_layout l;
  rt_window_plan(&l, c->nranks, c->grid, (size_t)mb << 20);
  bt_result e = rt_window_alloc(&c->win, c->rank, &l, c->peers[c->rank].host, mine);
  if (e == BT_ERR_CUDA) {   /* no room: this rank publishes none, so every rank does without */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no window of %lld MiB (BATON_WINDOW_MB): direct programs are not used", c->rank,
             (long long)mb);
    memset(mine, 0, sizeof *mine);
    return BT_OK;
  }
  return e;
}

/* Drops c's direct plans and window. */
static void drop_direct(baton_comm *c) {
  for (int i = 0; c->dplans && i < 2 * rt_algos_count(c->algos); i++) c->dplans[i].ok = 0;
  rt_window_free(c->win);
  c->win = NULL;
}

bt_result rt_direct_connect(baton_comm *c, const rt_window_handle *all) {
  int ok = c->win != NULL;
  for (int r = 0; r < c->nranks && ok; r++) ok = all[r].base != 0;
  bt_result e = ok ? rt_window_connect(c->win, all) : BT_ERR_UNSUPPORTED;
  if (e && e != BT_ERR_UNSUPPORTED) return e;
  if (e) {
    if (c->rank == 0 && rt_param_int(RT_PARAM_WINDOW_MB) > 0)
      LOG_INFO(RT_SUB_RUNTIME, "a rank has no window: direct programs are not used");
    drop_direct(c);
  }
  return BT_OK;
}

void rt_direct_free(baton_comm *c) {
  rt_peerbufs_free(c->pbufs);
  c->pbufs = NULL;
  rt_window_free(c->win);
  c->win = NULL;
  free(c->dplans);
  c->dplans = NULL;
  if (c->dtabs) cudaFree(c->dtabs);
  c->dtabs = NULL;
}

bt_result rt_direct_exchange(baton_comm *c, const char *what, uint64_t key, uint64_t prog, char **in, char **out,
                             int64_t in_bytes, int64_t out_bytes) {
  rt_peerbuf_self me = {c->rank, c->nranks, c->dev, c->peers[c->rank].host, (int)rt_param_int(RT_PARAM_PEER_MAPS),
                        what, in_bytes, out_bytes, key, prog};
  return rt_peerbuf_exchange(&c->pbufs, c->bs, &me, in, out);
}

int rt_direct_peer_io(const baton_comm *c, cudaStream_t stream) {
  if (!c->bs) return rt_group_open();
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (!c->win || rt_param_int(RT_PARAM_PEER_MAPS) <= 0) return 0;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return cs == cudaStreamCaptureStatusActive;
}

uint64_t rt_call_key(const rt_launch *L, int64_t count, int dtype) {
  const uint64_t what[4] = {L->c->calls, (uint64_t)L->coll, (uint64_t)count, (uint64_t)dtype};
  uint64_t h = RT_HASH_START;
  for (int i = 0; i < 4; i++) h = rt_hash(h, what[i]);
  return h;
}

uint64_t rt_call_bytes(const baton_comm *c, ir_coll coll, size_t count, int dtype) {
  int ib, ob;
  ir_geom_blocks(coll, c->nranks, &ib, &ob);
  return (uint64_t)count * (uint64_t)ip_dtype_size[dtype] * (uint64_t)(ib > ob ? ib : ob);
}

int rt_direct_eager_exchanges(const baton_comm *c) {
  return c->bs && c->win && rt_param_int(RT_PARAM_EAGER_EXCHANGE_MB) > 0 && rt_param_int(RT_PARAM_PEER_MAPS) > 0;
}

int rt_direct_eager_exchange(const baton_comm *c, ir_coll coll, size_t count, int dtype) {
  if (!rt_direct_eager_exchanges(c) || c->nranks < 2 || dtype < 0 || dtype >= IP_DTYPE_COUNT) return 0;
  const int64_t mb = rt_param_int(RT_PARAM_EAGER_EXCHANGE_MB);
  /* measured on 2 ranks; scaled with the peers, to be safe */
  return rt_call_bytes(c, coll, count, dtype) >= ((uint64_t)mb << 20) * (uint64_t)(c->nranks - 1);
}

int rt_direct_registered(const baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype) {
  if (!c->bs || !c->regs || !c->win || dtype < 0 || dtype >= IP_DTYPE_COUNT || ir_coll_rooted(coll)) return 0;
  int ib, ob;
  ir_geom_blocks(coll, c->nranks, &ib, &ob);
  size_t es = (size_t)ip_dtype_size[dtype];
  return rt_reg_find(c->regs, s, count * es * (size_t)ib) && rt_reg_find(c->regs, r, count * es * (size_t)ob);
}

/* Whether direct program p (plan d) can run a call in place although it is
 * out of place: on a copy of its input made on its stream before its
 * kernel, where its peers never read its input and write its buffers only
 * after it signalled (rt_dplan.stage_ok), so nothing reaches the caller's
 * buffer before the copy has been taken; where the copy goes
 * (rt_dplan_stage: 1 the window's scratch, 2 the stream's pool as
 * rt_launch.stage_temp), 0 where it cannot run so. */
static int window_stage(const baton_comm *c, const rt_dplan *d, const ir_prog *p, int64_t count, int es) {
  return rt_dplan_stage(d, p, c->rank, count, es, (int64_t)rt_window_layout_of(c->win)->simple_bytes,
                        rt_param_int(RT_PARAM_STAGE_POOL_MB) << 20);
}

int64_t rt_direct_slice(const baton_comm *c, int ai, int64_t count, int dtype) {
  if (!c->win || !c->dplans || !c->dplans[ai].ok || count <= 0 || dtype < 0 || dtype >= IP_DTYPE_COUNT) return 0;
  const rt_dplan *d = &c->dplans[ai];
  const ir_prog *p = rt_algos_get(c->algos, ai)->prog;
  const rt_window_layout *l = rt_window_layout_of(c->win);
  const int es = ip_dtype_size[dtype];
  if (rt_dplan_fits(d, p, l, count, es)) return count;
  if (!ir_coll_elementwise(p->coll) || (!d->peer_io && p->proto != IR_PROTO_SIMPLE)) return 0;   /* landings: its range */
  ir_geom g;
  if (ir_geom_init(&g, p, c->rank, 1, 0)) return 0;
  const int64_t unit = (int64_t)g.k * RT_DIRECT_SLICE_UNIT;
  int64_t lo = 0, hi = count / unit;   /* the most units that fit: fits(lo units), !fits(hi + 1) */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (rt_dplan_fits(d, p, l, mid * unit, es)) lo = mid;
    else hi = mid - 1;
  }
  return lo * unit;
}

int rt_direct_usable(const baton_comm *c, int ai, int64_t count, int dtype, int inplace, int peer_io) {
  if (!c->win || !c->dplans || !c->dplans[ai].ok) return 0;
  const rt_dplan *d = &c->dplans[ai];
  const rt_algo *al = rt_algos_get(c->algos, ai);
  const ir_prog *p = al->prog;
  if (d->peer_io && (!peer_io || (peer_io == RT_PEERS_REGISTERED && !d->guarded))) return 0;
  if ((count = rt_direct_slice(c, ai, count, dtype)) <= 0) return 0;   /* each slice's checks below */
  if (inplace) return al->inplace_ok || window_stage(c, d, p, count, ip_dtype_size[dtype]);
  if (!al->outofplace_ok) return 0;
  if (!al->copies) return 1;
  /* An in-place program out of place runs on a copy of the input in the
   * output, where the output is the whole span (no span outside the
   * window for peers to reach). */
  ir_geom g;
  return !ir_geom_init(&g, p, c->rank, count, 1) && g.out_at == 0 && g.span <= g.elems[IR_BUF_OUTPUT];
}

/* A call on a communicator of a process per GPU that reaches its peers'
 * buffers (captured: rt_direct_peer_io; or eager, rt_direct_eager_exchanges):
 * every rank's, exchanged now; where some rank's cannot be mapped, L is
 * prepared again without them (every rank alike).  `what` names the call
 * for the log. */
static bt_result peers_across(rt_launch *L, const char *what) {
  baton_comm *c = L->c;
  ip_dargs *a = &L->d;
  char *in[IP_WIN_MAX_RANKS], *out[IP_WIN_MAX_RANKS];
  out[c->rank] = a->buf[c->rank][IR_BUF_OUTPUT];
  /* An input no peer reads -- copied aside at launch (stage_temp,
   * rt_dplan.stage_ok), or a root's that only it reads (root_copy,
   * rt_dplan.root_src) -- is not exchanged: the output stands in for it. */
  const int in_is_out = L->stage_temp || L->root_copy;
  in[c->rank] = in_is_out ? out[c->rank] : a->buf[c->rank][IR_BUF_INPUT];
  const int64_t out_bytes = a->geom.elems[IR_BUF_OUTPUT] * a->esize;
  bt_result e = rt_direct_exchange(c, what, rt_call_key(L, a->geom.count, a->dtype), (uint64_t)L->ai, in, out,
                                   in_is_out ? out_bytes : a->geom.elems[IR_BUF_INPUT] * a->esize, out_bytes);
  if (e == BT_ERR_UNSUPPORTED) {
    LOG_INFO(RT_SUB_RUNTIME, "rank %d: %s runs without its peers' buffers", c->rank, what);
    L->again = 1;
    return BT_OK;
  }
  CHECK(e);
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    a->buf[r][IR_BUF_INPUT] = in[r];
    a->buf[r][IR_BUF_OUTPUT] = out[r];
  }
  L->peers_known = 1;
  return BT_OK;
}

/* The registered window of c holding buffer p of `bytes`, alive; NULL
 * (logged) when there is none or its memory was freed. */
static const baton_window *live_window(const rt_launch *L, const void *p, int64_t bytes, const char *what) {
  const baton_window *w = rt_reg_find(L->c->regs, p, (size_t)bytes);
  if (w && rt_reg_live(w)) return w;
  LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: its %s lies in a registered window whose memory was freed: the call runs "
           "without it (its peers' calls stop with an error)", L->c->rank, L->where, what);
  return NULL;
}

/* An eager fused AllToAll call's descriptor (ip_gargs.dkey): what it
 * runs, and where every rank's output lies -- window `win` (a registered
 * window's number, or RT_FUSED_STAGED: the communicator's own windows) at
 * offset `off`.  Never 0. */
#define RT_FUSED_STAGED UINT64_MAX
static uint32_t fused_key(const rt_launch *L, uint64_t win, uint64_t off) {
  const ip_gargs *a = &L->a;
  uint64_t what[8] = {win, off, (uint64_t)a->geom.count, (uint64_t)L->ai, (uint64_t)a->dtype, (uint64_t)a->cgemm,
                      (uint64_t)a->cbag, (uint64_t)a->gemm.n};
  uint64_t h = RT_HASH_START;
  for (int i = 0; i < 8; i++) h = rt_hash(h, what[i]);
  const uint32_t key = (uint32_t)(h ^ h >> 32);
  return key ? key : 1;
}

/* An eager fused AllToAll call L of `bytes` of output: on registered
 * windows (L's output in one, alive), every rank's output at this rank's
 * offset in it; else, where the output fits the window's Simple scratch,
 * every rank's scratch, which stands in for its output (L->fused_stage:
 * copied out after the kernel).  The call's descriptor, or 0 (L keeps the
 * FIFO exchange). */
static uint32_t fused_eager(rt_launch *L, int64_t bytes, char **out) {
  baton_comm *c = L->c;
  if (c->regs && rt_reg_find(c->regs, L->recvbuf, (size_t)bytes)) {
    const baton_window *wo = live_window(L, L->recvbuf, bytes, "output");
    if (!wo) return 0;
    const uint64_t off = (uint64_t)((const char *)L->recvbuf - wo->base);
    for (int r = 0; r < c->nranks; r++) out[r] = r == c->rank ? (char *)L->recvbuf : wo->peer[r] + off;
    return fused_key(L, wo->id, off);
  }
  const rt_window_layout *l = rt_window_layout_of(c->win);
  if (bytes > (int64_t)l->simple_bytes) return 0;
  for (int r = 0; r < c->nranks; r++) out[r] = rt_window_base(c->win, r) + l->simple;
  L->fused_stage = bytes;
  return fused_key(L, RT_FUSED_STAGED, 0);
}

/* The index of direct call L's plan in c->dplans and c->dtabs: its
 * program's, or that plan's variant (rt_launch.root_copy, staged_variant). */
static int plan_of(const rt_launch *L) {
  return (L->root_copy || L->staged_variant ? rt_algos_count(L->c->algos) : 0) + L->ai;
}

/* Every rank's output of fused call L, exchanged over the bootstrap now
 * (rt_peerbuf_exchange: collective, every rank alike): 1 with out[] set,
 * 0 where some rank's output cannot be exported or mapped (logged). */
static int outputs_across(rt_launch *L, const char *what, char **out, bt_result *res) {
  baton_comm *c = L->c;
  char *in[IP_WIN_MAX_RANKS];
  in[c->rank] = out[c->rank] = (char *)L->recvbuf;
  const int64_t bytes = L->a.geom.elems[IR_BUF_OUTPUT] * L->a.esize;
  bt_result e =
      rt_direct_exchange(c, what, rt_call_key(L, L->a.geom.count, L->a.dtype), (uint64_t)L->ai, in, out, bytes, bytes);
  *res = e == BT_ERR_UNSUPPORTED ? BT_OK : e;
  return !e;
}

bt_result rt_direct_fused_across(rt_launch *L, cudaStream_t stream) {
  baton_comm *c = L->c;
  if (c->bs) c->last_fused_via = RT_FUSED_VIA_FIFO;
  if (!L->direct_ok || !c->bs || !c->win || c->nranks > IP_DIRECT_MAX) return BT_OK;
  char *out[IP_WIN_MAX_RANKS];
  const int64_t bytes = L->a.geom.elems[IR_BUF_OUTPUT] * L->a.esize;
  uint32_t key = 0;
  int via = RT_FUSED_VIA_WINDOWS;
  bt_result res = BT_OK;
  if (rt_direct_peer_io(c, stream)) {   /* captured: every rank's output exchanged now */
    /* Some rank's output cannot be exported (stream-ordered pool memory,
     * cuMem, the map limit): every rank alike goes through the windows,
     * as an eager call does, the copy out captured with the kernel. */
    if (outputs_across(L, "a captured fused call", out, &res)) {
      via = RT_FUSED_VIA_OUTPUTS;
    } else {
      CHECK(res);
      if (!(key = fused_eager(L, bytes, out))) {
        LOG_INFO(RT_SUB_RUNTIME, "rank %d: %s: a captured fused call exchanges through FIFOs", c->rank, L->where);
        return BT_OK;
      }
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: %s: a captured fused call stores through the windows", c->rank, L->where);
    }
  } else if (!(key = fused_eager(L, bytes, out))) {   /* eager */
    /* An unregistered output larger than the window's scratch: every
     * rank's exchanged for this call, as a captured call's are (the
     * mappings kept by allocation), where each can be mapped; the FIFO
     * exchange where not, or where eager calls exchange nothing
     * (BATON_EAGER_EXCHANGE_MB=0, BATON_PEER_MAPS=0).  Every rank takes
     * the same way: the output's size and registration, and those
     * parameters (the creation's fingerprint), are the same on all. */
    if (!rt_direct_eager_exchanges(c) || (c->regs && rt_reg_find(c->regs, L->recvbuf, (size_t)bytes)) ||
        !outputs_across(L, "an eager fused call larger than the window's scratch", out, &res))
      return res;
    via = RT_FUSED_VIA_OUTPUTS;
  }
  c->last_fused_via = via;
  uint64_t *flags[IP_WIN_MAX_RANKS];
  const size_t at = rt_window_layout_of(c->win)->a2a;
  for (int r = 0; r < c->nranks; r++) flags[r] = (uint64_t *)(rt_window_base(c->win, r) + at);
  rt_call_direct_alltoall(L, out, flags);
  L->a.dkey = key;
  return BT_OK;
}

/* A call on a communicator of a process per GPU that reaches its peers'
 * buffers, not captured, on registered windows: each peer's output at this
 * rank's offset in the output's window and its input at this rank's
 * offset in the input's window; or, where the layout puts input and output
 * in one span (in place, the input copied in, or staged on a copy of the
 * input: ir_geom's in_at and out_at, and an in-place ReduceScatter's
 * output is block `rank` of its span), each peer's span at this rank's
 * span's offset, and its input and output where that rank's layout puts
 * them in it.  Also the call's descriptor (ip_dargs.key) of those offsets
 * and what the call runs, which the kernel checks against each peer's
 * before it touches that peer's buffers.  Where this rank's buffers are
 * not in live windows, L is prepared again without its peers' buffers:
 * every peer's kernel then stops the call. */
static bt_result peers_registered(rt_launch *L) {
  baton_comm *c = L->c;
  ip_dargs *a = &L->d;
  const ir_prog *p = rt_algos_get(c->algos, L->ai)->prog;
  const int64_t es = a->esize;
  const int spans = L->aliased || L->stage_window;
  ir_geom g;
  if (spans && ir_geom_init(&g, p, c->rank, a->geom.count, 1)) return BT_ERR_INTERNAL;   /* a->geom was built */
  const char *ob = (const char *)L->recvbuf - (spans ? g.out_at * es : 0);
  const baton_window *wo = live_window(L, ob, (spans ? g.span : a->geom.elems[IR_BUF_OUTPUT]) * es, "output");
  const baton_window *wi = spans ? NULL : live_window(L, L->sendbuf, a->geom.elems[IR_BUF_INPUT] * es, "input");
  if (!wo || (!wi && !spans)) {
    L->again = 1;
    return BT_OK;
  }
  uint64_t oo = (uint64_t)(ob - wo->base), oi = wi ? (uint64_t)((const char *)L->sendbuf - wi->base) : 0;
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    if (!spans) {
      a->buf[r][IR_BUF_OUTPUT] = wo->peer[r] + oo;
      a->buf[r][IR_BUF_INPUT] = wi->peer[r] + oi;
      continue;
    }
    if (ir_geom_init(&g, p, r, a->geom.count, 1)) return BT_ERR_INTERNAL;   /* this rank's was built: every rank's is */
    a->buf[r][IR_BUF_OUTPUT] = wo->peer[r] + oo + g.out_at * es;
    /* Staged: its input in its window, where no peer reads it (rt_dplan.stage_ok). */
    a->buf[r][IR_BUF_INPUT] = L->stage_window ? NULL : wo->peer[r] + oo + g.in_at * es;
  }
  uint64_t what[9] = {(uint64_t)a->geom.count, (uint64_t)L->ai, (uint64_t)a->dtype, (uint64_t)a->op,
                      (uint64_t)L->stage_window, (uint64_t)L->aliased, wo->id, oo, wi ? ((uint64_t)wi->id << 48) ^ oi : 0};
  uint64_t h = RT_HASH_START;
  for (int i = 0; i < 9; i++) h = rt_hash(h, what[i]);
  uint32_t key = (uint32_t)(h ^ h >> 32);
  a->key = key ? key : 1;
  L->peers_known = 1;
  return BT_OK;
}

bt_result rt_direct_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                         cudaStream_t stream, rt_launch *L) {
  const rt_algo *al = rt_algos_get(c->algos, ai);
  const ir_prog *p = al->prog;
  const rt_dplan *d = &c->dplans[ai];
  const int es = ip_dtype_size[dtype];
  rt_rooted_bufs(p->coll, c->rank, p->root, &sendbuf, &recvbuf);   /* off the root: in place on the one buffer */
  const int on_windows = (d->peer_io || d->guarded) &&
                         rt_direct_registered(c, p->coll, sendbuf, recvbuf, (size_t)count, dtype);
  /* Every rank's buffers exchanged for this call: captured, or eager off
   * registered windows where such calls exchange (a slice of a call the
   * choice gave this program for its size, or the program by name). */
  const int captured = rt_direct_peer_io(c, stream);
  const int known = captured || (d->peer_io && !on_windows && rt_direct_eager_exchanges(c));
  const int registered = !known && d->guarded && on_windows;
  if (d->peer_io && !known && !registered) {   /* by name (baton_run), or the NCCL drop-in's own choice */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s reaches its peers' buffers: it runs only in a group that holds every rank's "
             "call, on a communicator of one process (baton_comm_init_all), captured in a CUDA graph on every "
             "rank, on registered windows, or with a process per GPU where eager calls exchange their buffers "
             "(BATON_EAGER_EXCHANGE_MB)", c->rank, ir_prog_where(p));
    return BT_ERR_UNSUPPORTED;
  }
  ir_geom g;
  if (ir_geom_init(&g, p, c->rank, count, 1)) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: count %lld does not fit its geometry", c->rank, ir_prog_where(p),
             (long long)count);
    return BT_ERR_INVALID;
  }
  if (!rt_dplan_fits(d, p, rt_window_layout_of(c->win), count, es)) {   /* by name: the choice never takes it */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: count %lld of %d-byte elements needs more of the window than it has "
             "(BATON_WINDOW_MB=%lld): not run", c->rank, ir_prog_where(p), (long long)count, es,
             (long long)rt_param_int(RT_PARAM_WINDOW_MB));
    return BT_ERR_UNSUPPORTED;
  }
  const int inplace = (const char *)sendbuf - g.in_at * es == (const char *)recvbuf - g.out_at * es;
  const int staged = inplace && !al->inplace_ok ? window_stage(c, d, p, count, es) : 0;   /* on a copy of the input */
  const int aliased = (inplace && !staged) || al->copies;
  if (aliased && !inplace && !al->outofplace_ok) {   /* by name: its input would not fit the output (rt_algo.c) */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s runs in place only: an out-of-place call would need a copy of its input "
             "larger than the output", c->rank, ir_prog_where(p));
    return BT_ERR_UNSUPPORTED;
  }
  if (!aliased) ir_geom_init(&g, p, c->rank, count, 0);
  memset(L, 0, sizeof *L);
  L->c = c;
  L->stream = stream;
  L->sendbuf = sendbuf;
  L->recvbuf = recvbuf;
  L->nthreads =
      rt_dplan_threads(d, p, rt_dplan_grid(d, c->grid), g.cap * es, (int)rt_param_int(RT_PARAM_DIRECT_LL_THREADS));
  L->where = ir_prog_where(p);
  L->direct = 1;
  L->ai = ai;
  L->coll = p->coll;
  L->op = op;
  L->copy_in = aliased && !inplace;
  /* The root that only puts from its input runs on the caller's, its plan's
   * root-copy variant filling its output on the way (no copy first). */
  L->root_copy = L->copy_in && c->dplans[rt_algos_count(c->algos) + ai].ok;
  if (L->root_copy) L->copy_in = 0;
  L->stage_window = staged != 0;
  L->stage_temp = staged == 2 ? g.elems[IR_BUF_INPUT] * es : 0;
  L->staged_variant = L->stage_window && c->dplans[rt_algos_count(c->algos) + ai].ok;
  L->aliased = aliased;
  L->divide = op == IP_OP_AVG && ir_coll_reduces(p->coll) ? p->ngpus : 0;
  ip_dargs *a = &L->d;
  /* This rank's input: the caller's; in place, or copied into the
   * output's span, where the layout puts it in that span; copied into the
   * window's scratch; or copied into the stream's pool at launch. */
  const rt_window_layout *l = rt_window_layout_of(c->win);
  char *in = (char *)sendbuf;
  if (staged == 2) in = NULL;   /* memory of the stream's pool, taken at launch */
  else if (staged) in = rt_window_base(c->win, c->rank) + l->simple;
  else if (aliased && !L->root_copy) in = (char *)recvbuf + (g.in_at - g.out_at) * es;
  a->buf[c->rank][IR_BUF_INPUT] = in;
  /* The root-copy variant stores the input's chunks at the input's offsets
   * into the output, which the layout puts at in_at in the span. */
  a->buf[c->rank][IR_BUF_OUTPUT] = (char *)recvbuf + (L->root_copy ? (g.in_at - g.out_at) * es : 0);
  for (int r = 0; r < c->nranks; r++) {
    char *base = rt_window_base(c->win, r);
    a->buf[r][IR_BUF_SCRATCH] = base + (ir_proto_landed(p->proto) ? l->ll : l->simple);
    a->flags[r] = (uint64_t *)(base + l->flags);
  }
  char *mine = rt_window_base(c->win, c->rank);
  a->seq = (uint64_t *)(mine + l->seq);
  a->claim = a->seq + l->grid;   /* the word after the counts */
  a->desc_at = (int32_t)((l->desc - l->flags) / sizeof(uint64_t));
  a->unmet = d->unmet;
  a->announce = d->announce;
  a->half = (int64_t)l->ll_half;
  a->geom = g;
  a->cb = g.cap * es;
  a->rank = c->rank;
  a->nranks = c->nranks;
  a->esize = es;
  a->dtype = dtype;
  a->op = op;
  a->proto = p->proto;
  a->grid = c->grid;
  a->ntbs = d->ntbs;
  a->lanes =
      rt_dplan_lanes(d, rt_dplan_grid(d, c->grid), a->cb, rt_param_int(RT_PARAM_DIRECT_LANE_BYTES), L->nthreads);
  a->poll_ns = (int32_t)rt_param_int(RT_PARAM_DIRECT_POLL_NS);
  a->tab = c->dtabs + plan_of(L);
  a->abort = &c->shared->dev->abort;
  a->err = &c->shared->dev->err[c->local];
  a->timeout_ns = c->timeout_ns;
  LOG_TRACE(RT_SUB_RUNTIME, "rank %d: %s count %lld: direct, %d tbs x %d lanes of %d blocks x %d threads, %s%s",
            c->rank, L->where, (long long)count, d->ntbs, a->lanes, c->grid, L->nthreads, ir_proto_name[p->proto],
            L->copy_in        ? ", on a copy of the input"
            : L->stage_temp   ? (L->staged_variant ? ", in place on a copy of the other ranks' blocks in the stream's pool"
                                                   : ", in place on a copy of the input in the stream's pool")
            : L->staged_variant ? ", in place on a copy of the other ranks' blocks in the window"
            : L->stage_window ? ", in place on a copy of the input in the window"
            : L->root_copy    ? ", storing the root's input into its output on the way"
                              : "");
  c->last = p->name ? p->name : L->where;
  if (d->peer_io && c->bs)
    return known ? peers_across(L, captured ? "a captured call" : "an eager call (BATON_EAGER_EXCHANGE_MB)")
                 : peers_registered(L);
  return BT_OK;
}

/* Copies call L's input into place (t's input) before its kernel: all of
 * it, or with the staged variant only the chunks its plan reads (runs of
 * consecutive chunks, one copy each). */
static bt_result copy_input(const rt_launch *L, const ip_dargs *t) {
  const int64_t es = t->esize;
  char *dst = t->buf[t->rank][IR_BUF_INPUT];
  const char *src = L->sendbuf;
  if (!L->staged_variant)
    return rt_cuda(cudaMemcpyAsync(dst, src, (size_t)(t->geom.elems[IR_BUF_INPUT] * es), cudaMemcpyDeviceToDevice,
                                   L->stream), RT_SUB_RUNTIME, "copying the input into place");
  const uint64_t skip = L->c->dplans[plan_of(L)].skip_in;
  int64_t lo = 0, hi = 0;   /* the run of chunks being gathered: bytes [lo, hi) */
  for (int c = 0; c <= t->geom.chunks[IR_BUF_INPUT]; c++) {
    const int last = c == t->geom.chunks[IR_BUF_INPUT];
    const int64_t off = last ? 0 : ir_geom_off(&t->geom, IR_BUF_INPUT, c) * es;
    const int64_t len = last || (c < 64 && (skip >> c & 1)) ? 0 : ir_geom_len(&t->geom, IR_BUF_INPUT, c) * es;
    if (len > 0 && hi > lo && off == hi) {
      hi += len;
      continue;
    }
    if (hi > lo)
      CHECK(rt_cuda(cudaMemcpyAsync(dst + lo, src + lo, (size_t)(hi - lo), cudaMemcpyDeviceToDevice, L->stream),
                    RT_SUB_RUNTIME, "copying the input into place"));
    lo = off;
    hi = off + len;
  }
  return BT_OK;
}

/* The kernel of direct call L with arguments t, and what goes before and
 * after it on its stream: the copy of its input into place, AVG's
 * division. */
static bt_result launch_kernel(const rt_launch *L, ip_dargs *t) {
  if (L->copy_in || L->stage_window) CHECK(copy_input(L, t));
  rt_dplan_lean_links(t, &L->c->dplans[plan_of(L)]);
  if (L->c->trace) {   /* the working blocks' timeline (the others only count the call) */
    t->trace = rt_trace_buf(L->c->trace, t->grid);
    if (t->trace)
      rt_trace_called(L->c->trace, L->where, rt_algos_get(L->c->algos, L->ai)->prog, t->ntbs * t->lanes, t->ntbs,
                      t->lanes, 0, L->nthreads, NULL, 1);
  }
  /* A programmatic launch (BATON_DIRECT_PDL) after whatever kernel comes
   * before: after another direct kernel, which lets it in early, it saves
   * the launch; after one that does not, the part of it after that
   * kernel's last block (on 2 x H200, 0.85 and 0.27 us a call).  Never
   * after this call's own copy: it would wait for the copy anyway.  A
   * short call lets the next kernel's blocks in at its start: they wait on
   * SMs this one leaves free, for a few microseconds at most; any other
   * call at its closing meeting, whose waits are a crossing or two (0.2-0.7
   * us a Simple call of 4-16 MiB on 2 x H200, against letting them in at
   * the end).  Not where ranks share the GPU: waiting blocks of one rank's
   * next call could keep another rank's call, which this one waits for, off
   * the SMs. */
  const int pdl = L->c->pdl && !L->copy_in && !L->stage_window;
  t->release = !L->c->pdl || L->c->share != 1                    ? IP_RELEASE_END
               : t->proto == IR_PROTO_LL && L->nthreads <= 256 ? IP_RELEASE_START
                                                               : IP_RELEASE_MEET;
  if (pdl && L->c->bs) rt_capture_programmatic(L->stream);
  CHECK(ip_direct_launch(t, L->nthreads, pdl, L->stream));
  if (L->divide) CHECK(ip_gpu_divide(t->dtype, L->recvbuf, t->geom.elems[IR_BUF_OUTPUT], L->divide, L->stream));
  return BT_OK;
}

bt_result rt_direct_launch(const rt_launch *L) {
  ip_dargs t = L->d;   /* every buffer known now: the lean links, and the timeline */
  if (!L->stage_temp) return launch_kernel(L, &t);
  /* An in-place call's input copied aside into memory of the stream's pool
   * (a CUDA graph's own memory when captured), freed after the kernel. */
  char *tmp = NULL;
  CHECK(rt_cuda(cudaMallocAsync((void **)&tmp, (size_t)L->stage_temp, L->stream), RT_SUB_RUNTIME,
                "memory for the copy of an in-place call's input"));
  t.buf[t.rank][IR_BUF_INPUT] = tmp;
  bt_result e = launch_kernel(L, &t);
  bt_result f = rt_cuda(cudaFreeAsync(tmp, L->stream), RT_SUB_RUNTIME, "freeing the copy of an in-place call's input");
  return e ? e : f;
}
