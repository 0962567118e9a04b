/* rt_call.c -- one call of a FIFO program: geometry, buffers, tile size,
 * launch (rt_dispatch.c chooses and prepares calls of every kind). */
#include "rt_comm.h"

#include <stdlib.h>
#include <string.h>

#include "ip_dtype.h"
#include "ir_geom.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"

/* Makes the communicator's scratch at least `bytes` long.  Growing is a
 * cudaMalloc, which a stream being captured cannot take: then the call
 * fails and says to run it once outside the capture. */
static bt_result scratch_reserve(baton_comm *c, size_t bytes, cudaStream_t stream) {
  if (bytes <= c->scratch_bytes) return BT_OK;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CHECK(rt_cuda(cudaStreamIsCapturing(stream, &cs), RT_SUB_RUNTIME, "cudaStreamIsCapturing"));
  if (cs != cudaStreamCaptureStatusNone) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: a captured call needs %zu bytes of scratch, %zu are reserved: run the same "
             "call once before capturing it", c->rank, bytes, c->scratch_bytes);
    return BT_ERR_UNSUPPORTED;
  }
  size_t want = bytes + bytes / 4;
  void *p = NULL;
  /* Earlier work may still use the old scratch; the first one has none to
   * wait for (a stream held by other work must not block the call). */
  if (c->scratch) CHECK(rt_cuda(cudaStreamSynchronize(stream), RT_SUB_RUNTIME, "scratch: waiting for earlier work"));
  CHECK(rt_cuda(cudaMalloc(&p, want), RT_SUB_RUNTIME, "scratch allocation"));
  if (c->scratch) cudaFree(c->scratch);
  c->scratch = p;
  c->scratch_bytes = want;
  return BT_OK;
}

static void CUDART_CB kick_host(void *tps) { tp_set_kick(tps); }

/* A network connection's proxy sleeps when idle: a launch wakes it.  In a
 * stream being captured the wake-up becomes a host node of the graph, run
 * as each replay reaches the kernel, on a branch of its own (forked here,
 * joined by wake_join after the kernel): in line, the kernel would wait
 * for the host function each replay (a round trip to the host per call).
 * *forked says whether wake_join has a branch to join. */
static bt_result wake_proxy(baton_comm *c, cudaStream_t stream, int *forked) {
  *forked = 0;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  CHECK(rt_cuda(cudaStreamIsCapturing(stream, &cs), RT_SUB_RUNTIME, "cudaStreamIsCapturing"));
  if (cs == cudaStreamCaptureStatusNone) {
    tp_set_kick(c->tps);
    return BT_OK;
  }
  if (!c->kick_stream) return BT_ERR_INTERNAL;   /* made with the communicator's network connections (rt_comm.c) */
  CHECK(rt_cuda(cudaEventRecord(c->kick_fork, stream), RT_SUB_RUNTIME, "capturing the proxy's wake-up (fork)"));
  CHECK(rt_cuda(cudaStreamWaitEvent(c->kick_stream, c->kick_fork, 0), RT_SUB_RUNTIME,
                "capturing the proxy's wake-up (fork)"));
  CHECK(rt_cuda(cudaLaunchHostFunc(c->kick_stream, kick_host, c->tps), RT_SUB_RUNTIME, "capturing the proxy's wake-up"));
  *forked = 1;
  return BT_OK;
}

/* Joins the wake-up's branch back into the captured stream (after the kernel). */
static bt_result wake_join(baton_comm *c, cudaStream_t stream) {
  CHECK(rt_cuda(cudaEventRecord(c->kick_join, c->kick_stream), RT_SUB_RUNTIME, "capturing the proxy's wake-up (join)"));
  return rt_cuda(cudaStreamWaitEvent(stream, c->kick_join, 0), RT_SUB_RUNTIME, "capturing the proxy's wake-up (join)");
}

/* The call's geometry; a count whose buffers would exceed what baton
 * addresses (IR_GEOM_MAX_ELEMS elements: ir_geom_init refuses it, so no
 * byte size below can overflow) is refused with a WARN naming it. */
static bt_result call_geom(const baton_comm *c, const ir_prog *p, int64_t count, int aliased, ir_geom *g) {
  bt_result res = ir_geom_init(g, p, c->rank, count, aliased);
  if (res == BT_ERR_UNSUPPORTED)
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: count %lld: the buffers would hold more than %lld elements, the most baton "
             "addresses (this program takes a count of at most %lld)", c->rank, ir_prog_where(p), (long long)count,
             (long long)IR_GEOM_MAX_ELEMS, (long long)ir_geom_max_count(p, c->rank, aliased));
  else if (res)
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: its chunk counts do not fit its collective", c->rank, ir_prog_where(p));
  return res == BT_ERR_UNSUPPORTED ? BT_ERR_INVALID : res;
}

static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

/* The tile of a program with compute steps, from the communication's
 * (tile, elements) for a chunk of `cap` elements of `es` bytes: no more
 * than max_ctiles tiles (rt_algo: what the compute steps' semaphores
 * cover), and a compute step in a communicating thread block computes a
 * tile of each of its chunks (at most inline_compute of them, rt_algo)
 * into the stage, one after the other.  Both are program-wide, so every
 * rank cuts alike.  0 when no tile fits both. */
static int64_t compute_tile(int64_t tile, int64_t cap, int es, int inline_compute, int64_t max_ctiles) {
  const int64_t unit = 16 / es;   /* elements of 16 bytes */
  int64_t least = (cap + max_ctiles - 1) / max_ctiles;
  least = (least + unit - 1) / unit * unit;
  if (tile < least) tile = least < cap ? least : cap;
  if (inline_compute && tile * es * inline_compute > IP_GPU_STAGE_BYTES) {
    tile = IP_GPU_STAGE_BYTES / inline_compute / es / unit * unit;
    if (tile < least && tile < cap) return 0;
  }
  return tile;
}

/* A call of a program with gemm steps (the gemm kernel, ip_gpu_gemm.cu):
 * bf16, the input's chunks end to end and whole rows of Y (H = W's
 * columns), no interleaved output; *tile becomes whole rows (and stays
 * within max_ctiles tiles a chunk where it can).  Says why
 * and fails otherwise. */
static bt_result gemm_tile(baton_comm *c, const rt_plan *pl, const ir_geom *g, const rt_operands *ops, int dtype,
                           int op, int64_t max_ctiles, const char *where, int64_t *tile) {
  const int64_t H = ops->cols[pl->gw];
  const char *why = dtype != IP_BF16 ? "gemm takes bf16"
                    : op != IP_OP_SUM ? "a program with gemm steps reduces (if at all) by sum"
                    : g->seg ? "an interleaved output is not supported with gemm steps"
                    : g->count % g->k || g->cap % H ? "every chunk must be whole rows of Y: the count a multiple of "
                                                      "the chunks per block times H"
                                                    : NULL;
  if (why) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: count %lld, H %lld, %d chunks per block: %s", c->rank, where,
             (long long)g->count, (long long)H, g->k, why);
    return BT_ERR_INVALID;
  }
  /* Whole rows, a GEMM row being counted in one tile: fewer where the
   * semaphores allow (a message must fit a slot), else more. */
  int64_t t = *tile / H * H;
  if (t < H || (g->cap + t - 1) / t > max_ctiles) t = (*tile + H - 1) / H * H;
  *tile = t < g->cap ? t : g->cap;
  return BT_OK;
}

/* Whether a fused call may run direct (ip_gargs.direct: computed straight
 * into the owners' outputs when every rank calls in one group from this
 * process, rt_group.c): an AllToAll whose computation is all in its one
 * compute thread block -- gemm steps, or embedding bags whose rows the
 * output's interleave keeps whole (a bag is written as one run). */
static int direct_ok(const ir_prog *p, const rt_plan *pl, const rt_algo *al, const rt_operands *ops, const ir_geom *g) {
  if (p->coll != IR_COLL_ALLTOALL || pl->ncomp != 1 || pl->inline_compute) return 0;
  if (pl->gemm) return 1;
  if (!al->bags || (RT_COMPUTE_OP(al->compute) != IR_OP_EBAG && RT_COMPUTE_OP(al->compute) != IR_OP_EBAGM)) return 0;
  for (int k = 0; k < p->noperands; k++)
    if (p->operands[k].kind == IR_OPND_MATRIX && g->seg > 0 && (ops->cols[k] < 1 || g->seg % ops->cols[k])) return 0;
  return 1;
}

/* Narrows launch a's GEMM tiles where the widest would leave most of its
 * `blocks` compute blocks idle (ip_gemm_default_tile_n; BATON_GEMM_NARROW):
 * a GEMM of few tokens then runs on more of them. */
static void gemm_narrow(const baton_comm *c, ip_gargs *a, int64_t blocks) {
  if (c->gemm_narrow) ip_gemm_set_tile_n(&a->gemm, ip_gemm_default_tile_n(&a->gemm, blocks), NULL);
}

void rt_call_direct_alltoall(rt_launch *L, char *const *outs, uint64_t *const *flags) {
  ip_gargs *a = &L->a;
  const int n = L->c->nranks;
  /* Nothing moves through FIFOs: every block of the launch computes, as
   * the one compute thread block, whose steps and entry follow the
   * communicating ones'. */
  a->cwidth = ip_gpu_blocks(a);
  a->steps += (int64_t)a->ntbs * a->step_stride;
  a->tbs += (int64_t)a->ntbs * a->lanes;
  L->irtb += a->ntbs;   /* the timeline names every block by the compute tb */
  a->ncomp = 1;
  a->ntbs = 0;
  a->direct = 1;
  a->dnranks = n;
  for (int p = 0; p < n; p++) {
    a->dout[p] = outs[p];
    a->dflag[p] = flags[p];
  }
  /* A GEMM's rows lie end to end when its chunks all go to one rank. */
  const int32_t k = a->cgemm && a->grows > 0 ? a->gbrows / a->grows : 0;
  a->gposts = 0;
  a->gbase = k > 0 && a->gchunk0 / k == (a->gchunk0 + a->gchunks - 1) / k ? ip_gemm_direct_dst(a, a->gchunk0) : NULL;
  if (a->cgemm) gemm_narrow(L->c, a, a->cwidth);   /* every block computes now */
  /* The rows for other ranks, walked first, cross a link as they are
   * stored: spread over the whole GEMM, so that the link carries them
   * while every block computes, not only during the GEMM's first part (a
   * combine whose remote rows take the link longer than computing them
   * did was bound by the link there, then by the GEMM of the own rows).
   * One rank has no other ranks' rows: its GEMM keeps its order. */
  if (a->cgemm && n > 1) {
    /* Bands of at most half the units in flight (but two tile rows), so
     * that the blocks of one wave store into the link and into memory
     * side by side: with whole waves of peer rows each block's staging
     * waited on its own peer row's stores at the link's share of one
     * block.  Not from K = IP_GEMM_DEEP_K where a band of the engine's
     * deep group holds two waves of units or more (an output 8192 wide
     * and more, on an H200): a unit computes long enough there (some 140
     * us at K = 14336) that its 64 KiB cross the link at that share in
     * time whatever the order, and the wide bands read W from DRAM less
     * (2 x H200, 2 ranks, three runs each: 8192 x 8192 x 14336 2,987-2,992
     * us against 3,077-3,090 in bands of 2 tile rows, 2048 x 8192 x 14336
     * 717-721 against 741-761).  Narrower outputs kept bands of 4 (4096
     * columns: 8192 x 4096 x 14336 took 1,474-1,475 us so, 1,499-1,512 in
     * bands of 16; why is not known). */
    const int64_t inflight = (int64_t)a->ncomp * a->cwidth, half = inflight / 2;
    int64_t bg = a->gemm.band_group;
    const int deep = a->gemm.k >= IP_GEMM_DEEP_K && bg * a->gemm.tiles_n >= 2 * inflight;
    while (!deep && bg > 2 && bg * a->gemm.tiles_n > half) bg--;
    if (bg != a->gemm.band_group) ip_gemm_set_band_group(&a->gemm, bg);
    const int64_t m = a->gemm.m, own = (int64_t)a->rank * a->gbrows - a->grow0;
    const int64_t first = own - a->gemm.band0 * IP_GEMM_TILE_M;
    ip_gemm_set_interleave(&a->gemm, own >= 0 && own < m ? (first > 0 ? first : first + m) : 0);
  }
}

/* The GEMM of a call: rows of X from the first chunk computed to the last,
 * walked from the chunk the program computes first (the other ranks'
 * rows, in the library's programs). */
static bt_result gemm_args(baton_comm *c, const rt_plan *pl, const rt_operands *ops, const char *where, ip_gargs *a) {
  const ir_geom *g = &a->geom;
  const int64_t H = ops->cols[pl->gw], rows = g->cap / H;
  const int64_t row0 = (int64_t)pl->gchunk0 * rows, m = (int64_t)pl->gchunks * rows;
  const char *why = NULL;
  const char *x = (const char *)ops->data[pl->gx] + row0 * ops->ld[pl->gx] * 2;
  if (row0 + m > ops->rows[pl->gx] || row0 + m > IP_GEMM_MAX_DIM) {
    why = "X has fewer rows than the chunks computed";
  } else if (ip_gemm_prepare(&a->gemm, x, ops->ld[pl->gx], ops->data[pl->gw], ops->ld[pl->gw], m, H, ops->cols[pl->gx],
                             &why) != IP_GEMM_OK) {
  } else {
    a->cgemm = 1;
    gemm_narrow(c, a, (int64_t)a->ncomp * a->cwidth);
    a->gchunk0 = pl->gchunk0;
    a->gchunks = pl->gchunks;
    a->grow0 = (int32_t)row0;
    a->grows = (int32_t)rows;
    a->gtrows = (int32_t)(a->tile / H);
    a->gmap = pl->gmap;
    a->gposts = pl->gposts;
    a->gcount = ops->gcount;
    a->gbrows = (int32_t)(g->count / H);
    a->gdiv_rows = ip_fastdiv_make((uint32_t)a->grows);
    a->gdiv_trows = ip_fastdiv_make((uint32_t)a->gtrows);
    a->gdiv_brows = ip_fastdiv_make((uint32_t)(a->gbrows > 0 ? a->gbrows : 1));
    a->gemm.band0 = ((int64_t)(pl->gfirst - pl->gchunk0) * rows / IP_GEMM_TILE_M) % a->gemm.tiles_m;
    a->gemm.stall = &c->shared->dev->err[c->local].gemm;   /* the engine's own waits give up as the call's do */
    a->gemm.stall_ns = c->timeout_ns;
    return BT_OK;
  }
  LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: X [%lld x %lld], W [%lld x %lld], rows %lld .. %lld: %s", c->rank, where,
           (long long)ops->rows[pl->gx], (long long)ops->cols[pl->gx], (long long)ops->rows[pl->gw], (long long)H,
           (long long)row0, (long long)(row0 + m), why);
  return BT_ERR_INVALID;
}

bt_result rt_fifo_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                       const rt_operands *ops, cudaStream_t stream, rt_launch *L) {
  const rt_algo *al = rt_algos_get(c->algos, ai);
  const ir_prog *p = al->prog;
  rt_plan *pl = &c->plans[ai];
  int es = ip_dtype_size[dtype];
  const char *where = ir_prog_where(p);
  /* Plans whose thread blocks do not all fit on the GPU at once were
   * dropped when the communicator was created (comm_plans). */
  if (rt_plan_blocks(pl) == 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s cannot run on this GPU (see the log of communicator creation)", c->rank,
             where);
    return BT_ERR_UNSUPPORTED;
  }
  if ((al->compute >= 0) != (ops != NULL)) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s %s", c->rank, where,
             ops ? "computes nothing: run it as a collective" : "computes its input: run it with its operands (baton_run_fused)");
    return BT_ERR_INVALID;
  }
  /* The interpreter computes in its sum kernel only (ip_gpu_kernel.cuh);
   * avg is a sum and a division. */
  if (ops && op != IP_OP_SUM && op != IP_OP_AVG) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s computes its input: it reduces (if at all) by sum or avg, not %s", c->rank,
             where, ip_redop_name[op]);
    return BT_ERR_INVALID;
  }
  /* In place when the buffers sit where NCCL's in-place layout puts them. */
  ir_geom g;
  CHECK(call_geom(c, p, count, 1, &g));
  if (ops) sendbuf = (const char *)recvbuf + (g.in_at - g.out_at) * es;   /* a fused program's input is its own */
  int inplace = (const char *)sendbuf - g.in_at * es == (const char *)recvbuf - g.out_at * es;
  /* Off a rooted collective's root the caller gives one buffer (its
   * other may be NULL) and the program never touches the other
   * (ir_check): it runs on the one, in its own layout, with no copy. */
  int off_root = ir_coll_rooted(p->coll) && c->rank != p->root;
  if (off_root) {
    rt_rooted_bufs(p->coll, c->rank, p->root, &sendbuf, &recvbuf);
    inplace = 1;
  }
  /* The root of a gather or scatter (out-of-place programs): its
   * block-per-rank buffer goes through a rotated span in the scratch when
   * the program is relabelled, and in place (NCCL's layout: the root's
   * block of it is the other buffer), so the program never aliases. */
  int gs = !off_root && (p->coll == IR_COLL_GATHER || p->coll == IR_COLL_SCATTER), rotate = 0;
  if (gs) {
    int64_t at = (int64_t)p->root * count * es;
    int gs_inplace = p->coll == IR_COLL_GATHER ? (const char *)sendbuf == (const char *)recvbuf + at
                                               : (const char *)recvbuf == (const char *)sendbuf + at;
    rotate = p->root != 0 || gs_inplace;
    inplace = 0;
  }
  /* An out-of-place program runs an in-place call on a copy of the input
   * (the in-place AllToAll: every rank overwrites blocks the others still
   * read), as NCCL's out-of-place-only algorithms do. */
  int stage = !off_root && inplace && !al->inplace_ok && al->outofplace_ok && !al->copies;
  if (!ops && !off_root && (inplace ? !al->inplace_ok && !stage : !al->outofplace_ok)) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s cannot run %s", c->rank, where, inplace ? "in place" : "out of place");
    return BT_ERR_INVALID;
  }
  /* An in-place call of an out-of-place program (an AllToAll race-free so)
   * keeps its two buffers apart here: its in-place layout puts both at the
   * call's one address.  al->copies is ir_prog_aliased(p, 0), cached: no
   * scan of the steps per call. */
  int aliased = off_root ? p->inplace : stage ? 0 : inplace ? p->inplace != 0 : al->copies;
  if (ops) { stage = 0; aliased = p->inplace; }
  CHECK(call_geom(c, p, count, aliased, &g));
  if (p->interleave && (!ops || ir_geom_interleave(&g, ops->seg))) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: count %lld does not fit the output's interleave %s = %lld: every chunk "
             "(%lld elements) must be whole rows of it", c->rank, where, (long long)count, p->interleave,
             (long long)(ops ? ops->seg : 0), (long long)g.cap);
    return BT_ERR_INVALID;
  }

  /* A message of one tile of every chunk of the largest step fits a slot
   * (ir_geom_wire: LL lines carry 8 bytes of data in 16, LL128 120 in 128). */
  int proto = rt_comm_proto(c, p);
  int64_t tile = ir_geom_tile(&g, c->slot_bytes, proto, al->maxcnt, pl->lanes * c->lane_tiles, es, c->min_tile);
  if (tile < 1) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: a step of %lld chunks needs slots of at least %lld bytes "
             "(BATON_SLOT_BYTES=%lld)", c->rank, where, (long long)al->maxcnt,
             (long long)(ir_geom_wire(proto, proto == IR_PROTO_LL128 ? 120 : 16) * al->maxcnt),
             (long long)c->slot_bytes);
    return BT_ERR_UNSUPPORTED;
  }
  if (ops && !(tile = compute_tile(tile, g.cap, es, al->inline_compute, al->max_ctiles))) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: a chunk of %lld elements is cut into more than %lld tiles of at most %d bytes "
             "(the most a thread block that communicates computes at once): use more chunks", c->rank, where,
             (long long)g.cap, (long long)al->max_ctiles, IP_GPU_STAGE_BYTES);
    return BT_ERR_UNSUPPORTED;
  }
  if (pl->gemm) CHECK(gemm_tile(c, pl, &g, ops, dtype, op, al->max_ctiles, where, &tile));
  if (g.seg) {   /* every tile whole rows of the interleaved output, or inside one */
    int rows = proto == IR_PROTO_SIMPLE;   /* Simple copies a tile of several rows row by row */
    int64_t fit = ir_geom_tile_fit(&g, tile, 16 / es, rows);   /* whole 16-byte pieces where the rows allow */
    tile = fit > 0 ? fit : ir_geom_tile_fit(&g, tile, 1, rows);
    if (tile < 1 || ir_geom_ntiles(&g, tile) > al->max_ctiles) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: no tile divides the output's rows of %lld elements (interleave %s) into "
               "at most %lld tiles a chunk of %lld: use more chunks or a sync policy of groups (sync=\"group:G\")",
               c->rank, where, (long long)g.seg, p->interleave, (long long)al->max_ctiles, (long long)g.cap);
      return BT_ERR_UNSUPPORTED;
    }
  }
  if (ops && ir_geom_wire(proto, tile * es) * al->maxcnt > c->slot_bytes) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: a chunk of %lld elements in at most %d tiles needs slots of %lld bytes "
             "(BATON_SLOT_BYTES=%lld): use more chunks", c->rank, where, (long long)g.cap, IP_GPU_MAX_CTILES,
             (long long)(ir_geom_wire(proto, tile * es) * al->maxcnt), (long long)c->slot_bytes);
    return BT_ERR_UNSUPPORTED;
  }

  /* Scratch chunks, then (for an in-place program called out of place
   * whose span is larger than the output) a temporary span. */
  memset(L, 0, sizeof *L);
  L->scr_bytes = (size_t)round16(g.elems[IR_BUF_SCRATCH] * es);
  L->copy_in = aliased && !inplace;
  L->temp_span = L->copy_in && (g.out_at != 0 || g.span > g.elems[IR_BUF_OUTPUT]);
  L->stage_in = stage;
  L->fused_in = ops && !p->inplace;
  if (rotate) {
    L->rot_in = p->coll == IR_COLL_SCATTER;
    L->rot_out = p->coll == IR_COLL_GATHER;
    L->rot_root = p->root;
    L->rot_blocks = p->ngpus;
    L->rot_block = (size_t)count * es;
  }
  size_t span_bytes = L->temp_span ? (size_t)g.span * es
                      : stage || L->fused_in ? (size_t)round16(g.elems[IR_BUF_INPUT] * es)
                      : rotate ? (size_t)round16((int64_t)p->ngpus * count * es) : 0;
  CHECK(scratch_reserve(c, L->scr_bytes + span_bytes + 16, stream));

  ip_gargs *a = &L->a;
  L->c = c;
  L->stream = stream;
  L->sendbuf = sendbuf;
  L->recvbuf = recvbuf;
  L->nthreads = pl->nthreads;
  L->where = where;
  L->ai = ai;
  L->irtb = pl->irtb;
  L->divide = op == IP_OP_AVG && ir_coll_reduces(p->coll) && !off_root ? p->ngpus : 0;
  int blocks = rt_plan_blocks(pl);   /* CUDA blocks of the plan: its words hold a generation and a progress each */
  a->steps = pl->steps;
  a->tbs = pl->tbs;
  a->ntbs = pl->ntbs;
  a->lanes = pl->lanes;
  a->step_stride = pl->step_stride;
  a->smem_steps = pl->smem_steps;
  a->gen = pl->words;
  a->progress = pl->words + blocks;
  a->buf[IR_BUF_INPUT] = (char *)sendbuf;
  a->buf[IR_BUF_OUTPUT] = (char *)recvbuf;
  a->geom = g;
  a->tile = tile;
  a->ntiles = ir_geom_ntiles(&g, tile);
  a->esize = es;
  a->dtype = dtype;
  a->op = op;
  a->nslots = c->nslots;
  a->slot_bytes = c->slot_bytes;
  a->msg_stride = round16(tile * es);
  a->proto = proto;
  a->rank = c->rank;
  a->abort = &c->shared->dev->abort;
  a->err = &c->shared->dev->err[c->local];
  a->claim = pl->words + 2 * blocks;   /* the plan's spare word */
  a->timeout_ns = c->timeout_ns;
  a->stage_bytes = pl->stage_bytes;
  if (ops) {
    a->ncomp = pl->ncomp;
    a->cbag = al->bags;
    a->bagctr = al->bags ? pl->words + 2 * blocks + 1 : NULL;   /* rt_plan_build's words after the claim */
    a->cwidth = pl->cwidth;
    a->sems = pl->sems;
    for (int k = 0; k < p->noperands; k++) {
      a->opnd[k] = (const char *)ops->data[k];
      a->opld[k] = ops->ld[k];
      a->opcols[k] = ops->cols[k];
      a->oprows[k] = ops->rows[k];
      a->opdt[k] = ops->dtype[k];
    }
    if (pl->gemm) CHECK(gemm_args(c, pl, ops, where, a));
    L->direct_ok = direct_ok(p, pl, al, ops, &g);
  }

  LOG_TRACE(RT_SUB_RUNTIME, "rank %d: %s count %lld: %d tbs x %d lanes x %d threads, %s, tile %lld elements x %lld tiles%s",
            c->rank, where, (long long)count, pl->ntbs, pl->lanes, pl->nthreads, ir_proto_name[proto], (long long)tile, (long long)a->ntiles,
            L->copy_in || L->stage_in ? ", on a copy of the input" : "");
  if (ops)
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: %s: %d compute tbs x %d blocks", c->rank, where, a->ncomp, a->cwidth);
  c->last = p->name ? p->name : where;
  return BT_OK;
}

/* Copies L's rot_blocks blocks between the caller's block-per-rank buffer
 * and the program's span, on L's stream: the program's block b is the
 * caller's block (b + R) mod n.  into_caller 0: dst is the span (scatter,
 * before the run); 1: dst is the caller's buffer (gather, after it). */
static bt_result rotate_blocks(const rt_launch *L, void *dst, const void *src, int into_caller) {
  size_t B = L->rot_block, R = (size_t)L->rot_root, n = (size_t)L->rot_blocks;
  const char *s = src;
  char *d = dst;
  /* [0, n-R) of the span <-> [R, n) of the caller's; [n-R, n) <-> [0, R) */
  size_t span_at[2] = {0, (n - R) * B}, caller_at[2] = {R * B, 0}, len[2] = {(n - R) * B, R * B};
  for (int i = 0; i < 2; i++) {
    if (!len[i]) continue;
    char *to = d + (into_caller ? caller_at[i] : span_at[i]);
    const char *from = s + (into_caller ? span_at[i] : caller_at[i]);
    CHECK(rt_cuda(cudaMemcpyAsync(to, from, len[i], cudaMemcpyDeviceToDevice, L->stream), RT_SUB_RUNTIME,
                  "rotating a gather's or scatter's blocks for its root"));
  }
  return BT_OK;
}

/* Where row 0 of launch a's GEMM goes when the chunks it computes lie end
 * to end in one buffer (ip_gargs.gbase), for plan pl; else NULL.  They
 * do when the plan sends them to consecutive chunks of one buffer and
 * those share a block or the blocks have no gap (count = k * cap). */
static char *gemm_base(const rt_plan *pl, const ip_gargs *a) {
  const ir_geom *g = &a->geom;
  const int b = pl->gdbuf;
  if (b < 0 || !a->buf[b]) return NULL;
  if (b != IR_BUF_SCRATCH && pl->gdchunk0 % g->k + pl->gchunks > g->k && g->count != g->k * g->cap) return NULL;
  return a->buf[b] + ir_geom_off(g, b, pl->gdchunk0) * a->esize;
}

/* Splits the k-blocks of launch a's GEMM over several of its compute
 * blocks where its tiles leave most of them idle (ip_gemm_default_splits,
 * BATON_GEMM_SPLIT), with the communicator's split workspace.  The
 * workspace is made for every unit the compute blocks hold (a block's
 * 128 KiB partial tile each) at the first call that splits; making it is
 * a cudaMalloc, which a stream being captured cannot take: a captured
 * call before any eager one runs unsplit (correct, slower) and says so.
 * Calls on a communicator are ordered on the GPU (as its FIFOs and
 * scratch require): one workspace serves them all. */
static bt_result gemm_split(baton_comm *c, ip_gargs *a, cudaStream_t stream) {
  const int64_t blocks = (int64_t)a->ncomp * a->cwidth;
  const int64_t s = ip_gemm_default_splits(&a->gemm, blocks);
  if (s < 2) return BT_OK;
  if (a->gemm.units * s > c->gsplit_units) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CHECK(rt_cuda(cudaStreamIsCapturing(stream, &cs), RT_SUB_RUNTIME, "cudaStreamIsCapturing"));
    if (cs != cudaStreamCaptureStatusNone) {
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: a captured GEMM of %lld x %lld x %lld runs unsplit: its split workspace is "
               "made at the first such call outside a capture", c->rank, (long long)a->gemm.m, (long long)a->gemm.n,
               (long long)a->gemm.k);
      return BT_OK;
    }
    ip_gemm_args most = a->gemm;   /* sized for every unit the blocks hold: widest tiles of one unit each */
    most.tiles = blocks;
    most.tile_n = IP_GEMM_TILE_N;
    const size_t wsb = (size_t)ip_gemm_split_ws_bytes(&most, 1), smb = (size_t)ip_gemm_split_sem_bytes(&most);
    if (c->gsplit_ws) CHECK(rt_cuda(cudaStreamSynchronize(stream), RT_SUB_RUNTIME, "split workspace: earlier work"));
    cudaFree(c->gsplit_ws);
    cudaFree(c->gsplit_sem);
    c->gsplit_ws = NULL;
    c->gsplit_sem = NULL;
    c->gsplit_units = 0;
    CHECK(rt_cuda(cudaMalloc((void **)&c->gsplit_ws, wsb), RT_SUB_RUNTIME, "the GEMM's split workspace"));
    CHECK(rt_cuda(cudaMalloc((void **)&c->gsplit_sem, smb), RT_SUB_RUNTIME, "the GEMM's split counters"));
    CHECK(rt_cuda(cudaMemsetAsync(c->gsplit_sem, 0, smb, stream), RT_SUB_RUNTIME, "zeroing the split counters"));
    c->gsplit_units = blocks;
  }
  const char *why = NULL;
  if (ip_gemm_set_split(&a->gemm, s, c->gsplit_ws, c->gsplit_sem, &why) != IP_GEMM_OK) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s", c->rank, why);
    return BT_ERR_INTERNAL;
  }
  return BT_OK;
}

/* The call's work on its stream: the input's copy when the program runs on
 * one, the interpreter, the output's copy out of a temporary span, AVG's
 * division.  The current device must be the communicator's. */
bt_result rt_fifo_launch(const rt_launch *L) {
  baton_comm *c = L->c;
  ip_gargs a = L->a;
  const ir_geom *g = &a.geom;
  int es = a.esize, blocks = ip_gpu_blocks(&a);
  a.buf[IR_BUF_SCRATCH] = (char *)c->scratch;
  if (L->copy_in) {
    /* Run on a copy of the input placed where the program expects it. */
    char *span = L->temp_span ? (char *)c->scratch + L->scr_bytes : (char *)L->recvbuf;
    a.buf[IR_BUF_INPUT] = span + g->in_at * es;
    a.buf[IR_BUF_OUTPUT] = span + g->out_at * es;
    CHECK(rt_cuda(cudaMemcpyAsync(a.buf[IR_BUF_INPUT], L->sendbuf, g->elems[IR_BUF_INPUT] * es,
                                  cudaMemcpyDeviceToDevice, L->stream), RT_SUB_RUNTIME, "copying the input into the span"));
  }
  if (L->fused_in) a.buf[IR_BUF_INPUT] = (char *)c->scratch + L->scr_bytes;   /* computed there */
  if (L->stage_in) {
    /* The out-of-place program reads a copy; it writes the caller's buffer. */
    a.buf[IR_BUF_INPUT] = (char *)c->scratch + L->scr_bytes;
    CHECK(rt_cuda(cudaMemcpyAsync(a.buf[IR_BUF_INPUT], L->sendbuf, g->elems[IR_BUF_INPUT] * es,
                                  cudaMemcpyDeviceToDevice, L->stream), RT_SUB_RUNTIME, "copying the input aside"));
  }
  char *rot = L->rot_in || L->rot_out ? (char *)c->scratch + L->scr_bytes : NULL;
  if (L->rot_in) {   /* scatter: its input, rotated */
    a.buf[IR_BUF_INPUT] = rot;
    CHECK(rotate_blocks(L, rot, L->sendbuf, 0));
  }
  if (L->rot_out) a.buf[IR_BUF_OUTPUT] = rot;   /* gather: rotated into place after the run */
  a.trace = rt_trace_buf(c->trace, blocks);
  if (a.cgemm && !a.direct) a.gbase = gemm_base(&c->plans[L->ai], &a);   /* a direct call's is its owners' */
  if (a.cgemm && c->gemm_split) CHECK(gemm_split(c, &a, L->stream));
  if (a.cgemm && (!c->gemm_narrowest || a.gemm.tile_n < c->gemm_narrowest)) c->gemm_narrowest = a.gemm.tile_n;
  int forked = 0;
  if (c->net) CHECK(wake_proxy(c, L->stream, &forked));
  /* The gemm kernel as a programmatic dependent (BATON_DIRECT_PDL), as
   * the direct kernels: its blocks take the SMs as the kernel before
   * leaves them instead of after the launch that follows its end (0.4-0.5
   * us of a one-wave GEMM on an H200).  Not after a copy of this call's
   * (it waits for the copy anyway), nor beside the proxy's wake-up, nor
   * where ranks share the GPU: the kernel lets the next one in at its
   * entry, and rt_dcall.c lets no early dependent in there either (the
   * next call's waiting blocks could keep another rank's off the SMs). */
  const int pdl = c->pdl && a.cgemm && c->share == 1 && !c->net && !L->copy_in && !L->stage_in && !L->rot_in;
  if (pdl && c->bs) rt_capture_programmatic(L->stream);
  /* A plain GEMM (its rows end to end, no counts, no tiles counted, no
   * peer met, not traced: ip_gpu_gemm.cu's gemm_plain) reads nothing of
   * the kernels before but X and W: the engine waits for them before its
   * first load, after its set-up (0.45 us of 1024 x 4096 x 1024 on an
   * H200). */
  a.gemm.deps_wait = pdl && a.gbase && !a.gposts && !a.gcount && !(a.direct && a.dnranks > 1) && !a.trace;
  if (a.cgemm)
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: %s: GEMM %lld x %lld x %lld in tiles of %d x %d, %d k-range%s each, %lld units on "
              "%lld blocks%s", c->rank, L->where, (long long)a.gemm.m, (long long)a.gemm.n, (long long)a.gemm.k,
              IP_GEMM_TILE_M, (int)a.gemm.tile_n, (int)a.gemm.splits, a.gemm.splits == 1 ? "" : "s",
              (long long)a.gemm.units, (long long)a.ncomp * a.cwidth,
              a.gemm.deps_wait ? ", set up before the wait for the kernel before" : "");
  bt_result launched = ip_gpu_launch(&a, L->nthreads, pdl, L->stream);
  if (forked) CHECK(wake_join(c, L->stream));   /* even after a failed launch: a capture must not end with a branch open */
  CHECK(launched);
  if (L->rot_out) CHECK(rotate_blocks(L, L->recvbuf, rot, 1));
  if (L->fused_stage)   /* a direct fused AllToAll's peers stored into this rank's window */
    CHECK(rt_cuda(cudaMemcpyAsync(L->recvbuf, a.dout[a.rank], (size_t)L->fused_stage, cudaMemcpyDeviceToDevice,
                                  L->stream), RT_SUB_RUNTIME, "copying the output out of the window"));
  if (a.trace)
    rt_trace_called(c->trace, L->where, rt_algos_get(c->algos, L->ai)->prog, blocks, a.ntbs, a.lanes, a.cwidth,
                    L->nthreads, L->irtb, 0);
  if (L->temp_span)
    CHECK(rt_cuda(cudaMemcpyAsync(L->recvbuf, a.buf[IR_BUF_OUTPUT], g->elems[IR_BUF_OUTPUT] * es,
                                  cudaMemcpyDeviceToDevice, L->stream), RT_SUB_RUNTIME, "copying the output out of the span"));
  if (L->divide) CHECK(ip_gpu_divide(a.dtype, L->recvbuf, g->elems[IR_BUF_OUTPUT], L->divide, L->stream));
  return BT_OK;
}
