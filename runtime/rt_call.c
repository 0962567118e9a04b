/* rt_call.c -- one collective call: geometry, buffers, tile size, launch. */
#include "rt_comm.h"

#include <stdlib.h>
#include <string.h>

#include "ip_dtype.h"
#include "ir_geom.h"
#include "rt_cuda.h"
#include "rt_log.h"

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
  CHECK(rt_cuda(cudaStreamSynchronize(stream), RT_SUB_RUNTIME, "scratch: waiting for earlier work"));
  CHECK(rt_cuda(cudaMalloc(&p, want), RT_SUB_RUNTIME, "scratch allocation"));
  if (c->scratch) cudaFree(c->scratch);
  c->scratch = p;
  c->scratch_bytes = want;
  return BT_OK;
}

static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

bt_result rt_call_run(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                      cudaStream_t stream) {
  const rt_algo *al = rt_algos_get(c->algos, ai);
  const ir_prog *p = al->prog;
  rt_plan *pl = &c->plans[ai];
  int es = ip_dtype_size[dtype];
  const char *where = ir_prog_where(p);
  /* Plans whose thread blocks do not all fit on the GPU at once were
   * dropped when the communicator was created (comm_plans). */
  if (pl->ntbs == 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s cannot run on this GPU (see the log of communicator creation)", c->rank,
             where);
    return BT_ERR_UNSUPPORTED;
  }
  /* In place when the buffers sit where NCCL's in-place layout puts them. */
  ir_geom g;
  CHECK(ir_geom_init(&g, p, c->rank, count, 1));
  int inplace = (const char *)sendbuf - g.in_at * es == (const char *)recvbuf - g.out_at * es;
  if (inplace ? !al->inplace_ok : !al->outofplace_ok) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s cannot run %s", c->rank, where, inplace ? "in place" : "out of place");
    return BT_ERR_INVALID;
  }
  int aliased = inplace ? ir_prog_aliased(p, 1) : al->copies;   /* cached: no scan of the steps per call */
  CHECK(ir_geom_init(&g, p, c->rank, count, aliased));

  /* A message of one tile of every chunk of the largest step fits a slot
   * (ir_geom_wire: LL lines carry 8 bytes of data in 16, LL128 120 in 128). */
  int proto = rt_comm_proto(c, p);
  int64_t tile = ir_geom_tile(&g, c->slot_bytes, proto, al->maxcnt, pl->lanes, es, c->min_tile);
  if (tile < 1) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: a step of %lld chunks needs slots of at least %lld bytes "
             "(BATON_SLOT_BYTES=%lld)", c->rank, where, (long long)al->maxcnt,
             (long long)(ir_geom_wire(proto, proto == IR_PROTO_LL128 ? 120 : 16) * al->maxcnt),
             (long long)c->slot_bytes);
    return BT_ERR_UNSUPPORTED;
  }

  /* Scratch chunks, then (for an in-place program called out of place
   * whose span is larger than the output) a temporary span. */
  size_t scr_bytes = (size_t)round16(g.elems[IR_BUF_SCRATCH] * es);
  int temp_span = aliased && !inplace && (g.out_at != 0 || g.span > g.elems[IR_BUF_OUTPUT]);
  size_t span_bytes = temp_span ? (size_t)g.span * es : 0;
  CHECK(scratch_reserve(c, scr_bytes + span_bytes + 16, stream));

  ip_gargs a;
  memset(&a, 0, sizeof a);
  char *in = (char *)sendbuf, *out = (char *)recvbuf;
  if (aliased && !inplace) {
    /* Run on a copy of the input placed where the program expects it. */
    char *span = temp_span ? (char *)c->scratch + scr_bytes : (char *)recvbuf;
    in = span + g.in_at * es;
    out = span + g.out_at * es;
    CHECK(rt_cuda(cudaMemcpyAsync(in, sendbuf, g.elems[IR_BUF_INPUT] * es, cudaMemcpyDeviceToDevice, stream),
                  RT_SUB_RUNTIME, "copying the input into the span"));
  }
  int blocks = pl->ntbs * pl->lanes;   /* CUDA blocks of the launch */
  a.steps = pl->steps;
  a.tbs = pl->tbs;
  a.ntbs = pl->ntbs;
  a.lanes = pl->lanes;
  a.step_stride = pl->step_stride;
  a.smem_steps = pl->smem_steps;
  a.gen = pl->words;
  a.progress = pl->words + blocks;
  a.buf[IR_BUF_INPUT] = in;
  a.buf[IR_BUF_OUTPUT] = out;
  a.buf[IR_BUF_SCRATCH] = (char *)c->scratch;
  a.geom = g;
  a.tile = tile;
  a.ntiles = ir_geom_ntiles(&g, tile);
  a.esize = es;
  a.dtype = dtype;
  a.op = op;
  a.nslots = c->nslots;
  a.slot_bytes = c->slot_bytes;
  a.msg_stride = round16(tile * es);
  a.proto = proto;
  a.rank = c->rank;
  a.abort = &c->shared->dev->abort;
  a.err = &c->shared->dev->err;
  a.timeout_ns = c->timeout_ns;
  a.trace = rt_trace_buf(c->trace, blocks);

  LOG_TRACE(RT_SUB_RUNTIME, "rank %d: %s count %lld: %d tbs x %d lanes x %d threads, %s, tile %lld elements x %lld tiles%s",
            c->rank, where, (long long)count, pl->ntbs, pl->lanes, pl->nthreads, ir_proto_name[proto], (long long)tile, (long long)a.ntiles,
            aliased && !inplace ? ", on a copy of the input" : "");
  CHECK(ip_gpu_launch(&a, pl->nthreads, stream));
  if (a.trace) rt_trace_called(c->trace, where, blocks, pl->ntbs, pl->nthreads);
  if (temp_span)
    CHECK(rt_cuda(cudaMemcpyAsync(recvbuf, out, g.elems[IR_BUF_OUTPUT] * es, cudaMemcpyDeviceToDevice, stream),
                  RT_SUB_RUNTIME, "copying the output out of the span"));
  if (op == IP_OP_AVG && (p->coll == IR_COLL_ALLREDUCE || p->coll == IR_COLL_REDUCESCATTER))
    CHECK(ip_gpu_divide(dtype, recvbuf, g.elems[IR_BUF_OUTPUT], p->ngpus, stream));
  c->last = p->name ? p->name : where;
  return BT_OK;
}
