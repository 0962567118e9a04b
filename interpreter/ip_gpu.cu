// ip_gpu.cu -- the GPU interpreter kernel: one CUDA block per IR thread
// block walks its steps for every tile; a switch over opcodes moves and
// combines data through FIFO slots.  Only the reduction primitive is
// specialised per (type, op) (ip_reduce.cuh); the algorithm is the IR.
#include "ip_gpu.h"
#include "ip_reduce.cuh"

#include <cuda_runtime.h>

#include "rt_cuda.h"
#include "rt_log.h"

// ---- memory-model helpers ----------------------------------------------

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- spinning with abort and timeout ------------------------------------

struct spin {
  uint64_t start;
  uint32_t n;
};

// Called in a wait loop by thread 0.  Returns false when the wait must end:
// another block aborted, or this one timed out (then it records why and
// raises the abort flag for everybody).
__device__ bool spin_more(const ip_gargs &a, spin &s, int step, int64_t tile, int what, int peer,
                          int depid) {
  if (++s.n & 255) return true;
  if (*a.abort) return false;
  if (a.timeout_ns == 0) return true;
  uint64_t now = globaltimer();
  if (s.start == 0) s.start = now;
  /* A block waiting on another block of its own GPU gives the blocks
   * that wait on peers time to report first: they name the cause. */
  uint64_t limit = what == IP_WAIT_DEP ? a.timeout_ns + a.timeout_ns / 2 : a.timeout_ns;
  if (now - s.start < limit) return true;
  if (atomicCAS_system((int *)&a.err->flag, 0, 1) == 0) {
    const ip_gtb &tb = a.tbs[blockIdx.x];
    a.err->rank = a.rank;
    a.err->tb = blockIdx.x;
    a.err->step = step;
    a.err->tile = tile;
    a.err->what = what;
    a.err->peer = peer;
    a.err->chan = tb.chan;
    a.err->depid = depid;
    __threadfence_system();
  }
  *a.abort = 1;
  __threadfence_system();
  return false;
}

// ---- element loops ------------------------------------------------------

// Loads `avail` bytes (clamped to [0, sizeof(V)]) of a unit, zero beyond.
template <typename V>
__device__ __forceinline__ V load_part(const char *p, int64_t avail) {
  if (avail >= (int64_t)sizeof(V)) return *(const V *)p;
  V v;
  char *b = (char *)&v;
  for (int i = 0; i < (int)sizeof(V); i++) b[i] = i < avail ? p[i] : 0;
  return v;
}
template <typename V>
__device__ __forceinline__ void store_part(char *p, const V &v, int64_t avail) {
  if (avail >= (int64_t)sizeof(V)) { *(V *)p = v; return; }
  const char *b = (const char *)&v;
  for (int i = 0; i < avail; i++) p[i] = b[i];
}

// Element-wise a (op) b over a unit V holding sizeof(V)/sizeof(T) elements.
template <int DT, int OP, typename V>
__device__ __forceinline__ V apply_unit(const V &a, const V &b) {
  typedef typename ip_dev<DT>::type T;
  constexpr int U = sizeof(V) / sizeof(T);
  V r;
  const T *x = (const T *)&a, *y = (const T *)&b;
  T *z = (T *)&r;
#pragma unroll
  for (int i = 0; i < U; i++) z[i] = ip_apply<OP>(x[i], y[i]);
  return r;
}

// What one step does to one chunk piece (bytes throughout):
//   v = src (zero past srcvalid) | msg | msg (op) src;   REDUCE: v = src (op) cur
//   dst[..dstvalid) = v;  out[..len) = v
struct piece {
  const char *src; int64_t srcvalid;
  const char *msg;
  const char *cur;               // REDUCE: the dst chunk as second operand
  char *dst; int64_t dstvalid;
  char *out;
  int64_t len;
};

template <typename V, int DT, int OP, bool RED>
__device__ void run_piece(const piece &p) {
  int64_t units = (p.len + sizeof(V) - 1) / sizeof(V);
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    int64_t off = u * (int64_t)sizeof(V);
    V v;
    if (p.src) v = load_part<V>(p.src + off, p.srcvalid - off);
    if (p.msg) {
      V m = *(const V *)(p.msg + off);
      if constexpr (RED) v = p.src ? apply_unit<DT, OP>(m, v) : m;
      else v = m;
    }
    if constexpr (RED) {
      if (p.cur) v = apply_unit<DT, OP>(v, load_part<V>(p.cur + off, p.dstvalid - off));
    }
    if (p.dst) store_part<V>(p.dst + off, v, p.dstvalid - off);
    if (p.out) *(V *)(p.out + off) = v;
  }
}

__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// Moves a piece with no reduction: 16-byte units when every pointer allows.
__device__ void move_piece(const piece &p, int esize) {
  if (aligned16(p.src) && aligned16(p.dst) && aligned16(p.msg) && aligned16(p.out)) {
    run_piece<uint4, IP_U8, 0, false>(p);
    return;
  }
  switch (esize) {
  case 1: run_piece<uint8_t, IP_U8, 0, false>(p); break;
  case 2: run_piece<uint16_t, IP_U8, 0, false>(p); break;
  case 4: run_piece<uint32_t, IP_U8, 0, false>(p); break;
  default: run_piece<uint64_t, IP_U8, 0, false>(p); break;
  }
}

template <int DT, int OP>
__device__ void reduce_piece_t(const piece &p) {
  typedef typename ip_dev<DT>::type T;
  if (aligned16(p.src) && aligned16(p.dst) && aligned16(p.msg) && aligned16(p.out) && aligned16(p.cur))
    run_piece<uint4, DT, OP, true>(p);
  else
    run_piece<T, DT, OP, true>(p);
}

template <int DT>
__device__ void reduce_piece_op(const piece &p, int op) {
  switch (op) {
  case IP_OP_PROD: reduce_piece_t<DT, IP_OP_PROD>(p); break;
  case IP_OP_MAX: reduce_piece_t<DT, IP_OP_MAX>(p); break;
  case IP_OP_MIN: reduce_piece_t<DT, IP_OP_MIN>(p); break;
  default: reduce_piece_t<DT, IP_OP_SUM>(p); break;   // SUM, AVG
  }
}

// The one place the interpreter depends on (type, op).
__device__ void reduce_piece(const piece &p, int dtype, int op) {
  switch (dtype) {
#define X(id, name, ctype, size, kind) case IP_##id: reduce_piece_op<IP_##id>(p, op); break;
#include "ip_dtype.def"
#undef X
  }
}

// ---- the interpreter ----------------------------------------------------

__device__ __forceinline__ unsigned op_flags(int op) {
  switch (op) {
#define X(id, xml, flags, doc) case IR_OP_##id: return (flags);
#include "ir_op.def"
#undef X
  }
  return 0;
}

// Executes step st for tile t: every chunk of the step, all threads.
__device__ void exec_step(const ip_gargs &a, const ip_gstep &st, int64_t t, const char *msg, char *out) {
  unsigned fl = op_flags(st.op);
  int64_t len = a.geom.cap - t * a.tile;
  len = len > a.tile ? a.tile : len;
  int64_t lenb = len * a.esize;
  for (int j = 0; j < st.cnt; j++) {
    piece p;
    p.src = NULL; p.msg = NULL; p.cur = NULL; p.dst = NULL; p.out = NULL;
    p.srcvalid = p.dstvalid = 0;
    p.len = lenb;
    if (fl & IR_F_SRC) {
      int64_t c = st.srcoff + j, v = ir_geom_len(&a.geom, st.srcbuf, c) - t * a.tile;
      p.src = a.buf[st.srcbuf] + (ir_geom_off(&a.geom, st.srcbuf, c) + t * a.tile) * a.esize;
      p.srcvalid = (v < 0 ? 0 : v > len ? len : v) * a.esize;
    }
    if (fl & IR_F_DST) {
      int64_t c = st.dstoff + j, v = ir_geom_len(&a.geom, st.dstbuf, c) - t * a.tile;
      p.dst = a.buf[st.dstbuf] + (ir_geom_off(&a.geom, st.dstbuf, c) + t * a.tile) * a.esize;
      p.dstvalid = (v < 0 ? 0 : v > len ? len : v) * a.esize;
    }
    if (fl & IR_F_RECV) p.msg = msg + j * a.msg_stride;
    if (fl & IR_F_SEND) p.out = out + j * a.msg_stride;
    if (st.op == IR_OP_REDUCE) p.cur = p.dst;
    if (fl & IR_F_RED) reduce_piece(p, a.dtype, a.op);
    else move_piece(p, a.esize);
  }
}

// Thread 0 waits until step st of tile t may run.  Returns false to stop.
__device__ bool wait_step(const ip_gargs &a, const ip_gtb &tb, const ip_gstep &st, int s, int64_t t,
                          uint64_t base, uint64_t sent, uint64_t rcvd) {
  spin sp = {0, 0};
  if (st.depid >= 0) {
    uint64_t need = base + (uint64_t)t * a.tbs[st.depid].nsteps + st.deps + 1;
    while (ld_acquire_gpu(&a.progress[st.depid]) < need)
      if (!spin_more(a, sp, s, t, IP_WAIT_DEP, -1, st.depid)) return false;
  }
  unsigned fl = op_flags(st.op);
  if (fl & IR_F_RECV) {
    while (ld_acquire_sys(tb.recv.head) <= rcvd)
      if (!spin_more(a, sp, s, t, IP_WAIT_RECV, tb.recv_peer, -1)) return false;
  }
  if (fl & IR_F_SEND) {
    while (sent - ld_acquire_sys(tb.send.tail) >= (uint64_t)a.nslots)
      if (!spin_more(a, sp, s, t, IP_WAIT_SEND, tb.send_peer, -1)) return false;
  }
  return true;
}

__global__ void __launch_bounds__(1024) ip_gpu_kernel(ip_gargs a) {
  extern __shared__ ip_gstep sm_steps[];
  __shared__ int stop;
  __shared__ uint64_t base, sent, rcvd;
  const ip_gtb &tb = a.tbs[blockIdx.x];
  const ip_gstep *steps = a.steps + tb.first;
  if (tb.nsteps <= a.smem_steps) {
    const int *from = (const int *)steps;
    int *to = (int *)sm_steps;
    for (int i = threadIdx.x; i < tb.nsteps * (int)(sizeof(ip_gstep) / 4); i += blockDim.x) to[i] = from[i];
    steps = sm_steps;
  }
  if (threadIdx.x == 0) {
    stop = 0;
    uint64_t g = a.gen[blockIdx.x] + 1;   // this block is the only writer
    a.gen[blockIdx.x] = g;
    base = g << 40;
    sent = tb.send.fifo ? *tb.send.count : 0;
    rcvd = tb.recv.fifo ? *tb.recv.count : 0;
  }
  __syncthreads();
  for (int64_t t = 0; t < a.ntiles; t++) {
    for (int s = 0; s < tb.nsteps; s++) {
      ip_gstep st = steps[s];
      if (threadIdx.x == 0 && !wait_step(a, tb, st, s, t, base, sent, rcvd)) stop = 1;
      __syncthreads();
      if (stop) goto done;
      unsigned fl = op_flags(st.op);
      const char *msg = (fl & IR_F_RECV) ? tb.recv.fifo + (rcvd % a.nslots) * a.slot_bytes : NULL;
      char *out = (fl & IR_F_SEND) ? tb.send.fifo + (sent % a.nslots) * a.slot_bytes : NULL;
      if (st.op != IR_OP_NOP) exec_step(a, st, t, msg, out);
      __syncthreads();
      if (threadIdx.x == 0) {
        if (fl & IR_F_SEND) __threadfence_system();
        else if (st.hasdep) __threadfence();
        if (fl & IR_F_SEND) st_release_sys(tb.send.head, ++sent);
        if (fl & IR_F_RECV) st_release_sys(tb.recv.tail, ++rcvd);
        if (st.hasdep) st_release_gpu(&a.progress[blockIdx.x], base + (uint64_t)t * tb.nsteps + s + 1);
      }
    }
  }
done:
  if (threadIdx.x == 0) {
    if (tb.send.fifo) *tb.send.count = sent;
    if (tb.recv.fifo) *tb.recv.count = rcvd;
  }
}

template <int DT>
__global__ void ip_divide_kernel(void *p, int64_t n, int divisor) {
  typedef typename ip_dev<DT>::type T;
  T *x = (T *)p;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    if constexpr (DT == IP_F16) x[i] = __float2half_rn((float)((double)__half2float(x[i]) / divisor));
    else if constexpr (DT == IP_BF16) x[i] = __float2bfloat16_rn((float)((double)__bfloat162float(x[i]) / divisor));
    else if constexpr (DT == IP_F32) x[i] = (float)((double)x[i] / divisor);
    else if constexpr (DT == IP_F64) x[i] = x[i] / divisor;
    else if constexpr (DT == IP_U64) {
      double v = trunc((double)x[i] / divisor);   // as ip_get/ip_set: through double
      x[i] = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    } else x[i] = (T)(int64_t)trunc((double)x[i] / divisor);
  }
}

extern "C" bt_result ip_gpu_launch(const ip_gargs *a, int nthreads, void *stream) {
  size_t smem = (size_t)a->smem_steps * sizeof(ip_gstep);
  ip_gpu_kernel<<<a->ntbs, nthreads, smem, (cudaStream_t)stream>>>(*a);
  return rt_cuda(cudaGetLastError(), RT_SUB_EXEC, "interpreter launch");
}

extern "C" bt_result ip_gpu_divide(int dtype, void *p, int64_t n, int divisor, void *stream) {
  if (n <= 0) return BT_OK;
  int blocks = (int)((n + 511) / 512);
  if (blocks > 1024) blocks = 1024;
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
#define X(id, name, ctype, size, kind) \
  case IP_##id: ip_divide_kernel<IP_##id><<<blocks, 512, 0, s>>>(p, n, divisor); break;
#include "ip_dtype.def"
#undef X
  }
  return rt_cuda(cudaGetLastError(), RT_SUB_EXEC, "avg divide launch");
}

extern "C" bt_result ip_gpu_max_blocks(int nthreads, int smem, int *max_blocks) {
  int dev, sms, per;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, ip_gpu_kernel, nthreads, smem), RT_SUB_EXEC,
                   "occupancy"));
  *max_blocks = sms * per;
  return BT_OK;
}
