// ip_gpu_fdirect.cu -- the direct fused kernels (ip_fdirect.h): GEMV +
// AllReduce in one shot over the window.  A warp computes its row groups
// with the interpreter's GEMV loads (ip_compute.cuh), stores each as LL
// lines into every rank's landing, then sums every rank's lines of those
// rows.  One instance per element type and unroll.  Also the host's launch
// and grid calls.
#include "ip_fdirect.h"

#include <cuda_runtime.h>

#include "ip_compute.cuh"
#include "ip_spin.cuh"
#include "rt_cudart.h"
#include "rt_log.h"

// Adds the elements of type DT that a line's two data words hold (four;
// f32: two) into acc, as float; E is that count (8 bytes / size).
template <int DT> struct fline {
  static constexpr int E = DT == IP_F32 ? 2 : 4;
  static __device__ __forceinline__ void add(uint2 d, float *acc) {
    if constexpr (DT == IP_F32) {
      acc[0] += __uint_as_float(d.x);
      acc[1] += __uint_as_float(d.y);
    } else {
      const uint32_t w[2] = {d.x, d.y};
#pragma unroll
      for (int i = 0; i < 4; i++) acc[i] += ip_tof<DT>((const char *)w + 2 * i);
    }
  }
};

// Packs a row group's R sums (every lane holds them) into the words of its
// LL lines in the type DT: word w of the group's 8 * LPG data bytes.
template <int DT, int R>
__device__ __forceinline__ uint32_t fpack(const float *acc, int w) {
  if constexpr (DT == IP_F32) {
    return __float_as_uint(acc[w]);
  } else {
    uint16_t h[2];
    ip_fromf<DT>((char *)&h[0], acc[2 * w]);
    ip_fromf<DT>((char *)&h[1], acc[2 * w + 1]);
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
  }
}

// Work is split into row groups of R = IP_FDIRECT_ROW_GROUP rows, a warp
// each: a group's R results fill LPG whole LL lines (one in f16 and bf16,
// two in f32), so a warp stores its group's lines without waiting for any
// other warp, and no barrier stands between one group's loads and the
// next.  Group g goes to block g % grid, so that every block, hence every
// SM, gets a share however few groups there are.  A warp first computes
// and stores all its groups (lane k < nranks * LPG storing one line for
// rank rank+1+k's landing: peers first, every store of a group in flight
// at once), then polls and sums the same groups' lines of every rank.
// The parameters stay in the constant bank (__grid_constant__: the waits
// take their address; a plain parameter would be copied to local memory,
// every field then read from there: measured on H200, up to 1.5x the
// time at the smallest shapes).  The bounds
// give unroll 4 and 8 a block per SM and every register they want, 1 and
// 2 four blocks (ip_fdirect.h, IP_FDIRECT_UNROLL8_ROWS).
template <int DT, int U>
__global__ void __launch_bounds__(IP_FDIRECT_THREADS, U >= 4 ? 1 : 4) ip_fgemv_kernel(const __grid_constant__ ip_fargs a) {
  constexpr int ES = DT == IP_F32 ? 4 : 2, VE = 16 / ES, R = IP_FDIRECT_ROW_GROUP, LPG = R * ES / 8;
  constexpr int WPB = IP_FDIRECT_THREADS / 32;
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t groups = (a.M + R - 1) / R, lines = (a.M * ES + 7) / 8, rs = a.ld * ES;
  const int64_t g0 = blockIdx.x + (int64_t)wid * gridDim.x, gstep = (int64_t)gridDim.x * WPB;
  // A programmatic launch (ip_fgemv_launch): nothing the kernel before
  // wrote -- x, the call counts, the landings -- is read before it has
  // ended.  (Asking L2 for the warp's first rows of W before the wait, a
  // bulk prefetch, made the call 0.7 us faster at 4096 x 1024 but up to
  // 30% slower at K = 4096-7168, on an H200.)
  pdl_wait();
  if (a.release_early) pdl_release();
  // The block's call count, waited for only at the first store: its
  // latency hides behind the matrix's loads.
  const uint64_t count = *(volatile uint64_t *)(a.seq + blockIdx.x);
  int tn = 0;   // thread 0: events traced
  if (threadIdx.x == 0) {
    d_stop = 0;
    d_next_poll = 0;
    ip_trace_ev(a.trace, tn, IP_EV_ENTER, 0, 0);
    ip_trace_ev(a.trace, tn, IP_EV_READY, 0, 0);
  }
  __syncthreads();   // d_stop is set before any wait reads it
  const int64_t nv = ((((uintptr_t)a.W | (uintptr_t)a.x) & 15) == 0 && (rs & 15) == 0) ? a.K / VE : 0;
  const uint64_t seq = count + 1;
  const uint32_t flag = (uint32_t)seq;
  const int64_t hoff = (seq & 1) ? a.half : 0;
  for (int64_t g = g0; g < groups; g += gstep) {
    const int64_t r0 = g * R;
    const int nr = a.M - r0 < R ? (int)(a.M - r0) : R;
    const char *base = a.W + r0 * rs;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.f;
    ip_gemv_span<DT, R, U>(base, rs, a.x, nr, lane, nv, acc);
    ip_gemv_rest<DT, R>(base, rs, a.x, nr, nv * VE, a.K, lane, acc);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int off = 16; off; off >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
    if (a.nranks == 1) {   // nothing to add: the rows are y's
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; r++)
          if (r < nr) ip_fromf<DT>(a.y + (r0 + r) * ES, acc[r]);
      continue;
    }
    const int h = lane & (LPG - 1);   // the group's line this lane stores (a rank's slot ends with y's last row)
    if (lane < a.nranks * LPG && r0 + h * fline<DT>::E < a.M) {
      const int k = lane / LPG;
      const int p = a.rank + 1 + k < a.nranks ? a.rank + 1 + k : a.rank + 1 + k - a.nranks;
      uint32_t w0 = 0, w1 = 0;
#pragma unroll
      for (int j = 0; j < LPG; j++)   // constant indices: acc stays in registers
        if (h == j) {
          w0 = fpack<DT, R>(acc, 2 * j);
          w1 = fpack<DT, R>(acc, 2 * j + 1);
        }
      ll_line_put((uint4 *)(a.land[p] + hoff) + (int64_t)a.rank * lines + g * LPG + h, w0, w1, flag);
    }
  }
  if (a.trace) {
    __syncthreads();
    if (threadIdx.x == 0) ip_trace_ev(a.trace, tn, IP_EV_DONE, IP_FSTEP_TASK, g0 < groups ? g0 : -1);
  }
  // Sum every rank's lines of the same groups, in rank order: lane
  // s * LPG + h polls line h of rank s's copy, lane h adds them up.
  const uint4 *mine = (const uint4 *)(a.land[a.rank] + hoff);
  if (a.nranks > 1)
    for (int64_t g = g0; g < groups; g += gstep) {
      bool ok = true;
      uint2 d = make_uint2(0, 0), f;
      const int h = lane & (LPG - 1);
      if (lane < a.nranks * LPG && g * R + h * fline<DT>::E < a.M) {
        const int s = lane / LPG;
        dspin sp = {0, 0};
        for (;;) {
          ll_line_get(mine + (int64_t)s * lines + g * LPG + h, d, f);
          if (f.x == flag && f.y == flag) break;
          if (a.poll_ns) __nanosleep(a.poll_ns);
          if (!dspin_more(a, sp, (int)blockIdx.x, -1, g * R, IP_WAIT_RECV, s, 0)) {
            ok = false;   // stopped: y is left as it is
            break;
          }
        }
      }
      if (!__all_sync(0xffffffffu, ok)) break;
      float sum[fline<DT>::E];
#pragma unroll
      for (int e = 0; e < fline<DT>::E; e++) sum[e] = 0.f;
      for (int s = 0; s < a.nranks; s++) {
        uint2 v;
        v.x = __shfl_sync(0xffffffffu, d.x, s * LPG + h);
        v.y = __shfl_sync(0xffffffffu, d.y, s * LPG + h);
        fline<DT>::add(v, sum);
      }
      if (lane < LPG) {
        const int64_t e0 = g * R + lane * fline<DT>::E;   // the line's first row
#pragma unroll
        for (int e = 0; e < fline<DT>::E; e++)
          if (e0 + e < a.M) ip_fromf<DT>(a.y + (e0 + e) * ES, sum[e]);
      }
    }
  __syncthreads();
  if (threadIdx.x == 0) {
    a.seq[blockIdx.x] = seq;
    ip_trace_ev(a.trace, tn, IP_EV_DONE, IP_FSTEP_SUM, 0);
    ip_trace_ev(a.trace, tn, IP_EV_EXIT, 0, 0);
  }
}

// The kernel of each type and unroll (loads in flight per thread and row).
#define FGEMV_U(DT) {(const void *)ip_fgemv_kernel<DT, 1>, (const void *)ip_fgemv_kernel<DT, 2>, \
                     (const void *)ip_fgemv_kernel<DT, 4>, (const void *)ip_fgemv_kernel<DT, 8>}
static const void *const kernels[3][4] = {FGEMV_U(IP_F32), FGEMV_U(IP_F16), FGEMV_U(IP_BF16)};

extern "C" const char *const ip_fgemv_step_names[IP_FSTEP_COUNT] = {"gemv rows, stored everywhere",
                                                                   "sum of every rank's rows"};

static const void *kernel_of(int dtype, int unroll) {
  const int u = unroll == 1 ? 0 : unroll == 2 ? 1 : unroll == 4 ? 2 : unroll == 8 ? 3 : -1;
  const int t = dtype == IP_F32 ? 0 : dtype == IP_F16 ? 1 : dtype == IP_BF16 ? 2 : -1;
  return u < 0 || t < 0 ? NULL : kernels[t][u];
}

extern "C" int ip_fgemv_takes(int dtype) { return kernel_of(dtype, 1) != NULL; }

extern "C" bt_result ip_fgemv_grid(int unroll, int share, int *grid) {
  int dev, sms, per, least = IP_FDIRECT_BLOCKS_PER_SM;
  if (!kernel_of(IP_F32, unroll)) return BT_ERR_INVALID;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  for (int t : {IP_F32, IP_F16, IP_BF16}) {
    CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel_of(t, unroll), IP_FDIRECT_THREADS, 0),
                  RT_SUB_EXEC, "occupancy of the direct GEMV + AllReduce"));
    if (per < least) least = per;
  }
  const int g = sms * least / (share > 0 ? share : 1);
  *grid = g < 1 ? 1 : g < IP_FDIRECT_MAX_GRID ? g : IP_FDIRECT_MAX_GRID;
  return BT_OK;
}

extern "C" bt_result ip_fgemv_launch(const ip_fargs *a, int grid, int unroll, int pdl, void *stream) {
  const void *k = kernel_of(a->dtype, unroll);
  if (!k || grid < 1) return BT_ERR_INVALID;
  ip_fargs args = *a;
  void *params[] = {&args};
  return rt_cuda_launch(k, (unsigned)grid, IP_FDIRECT_THREADS, 0, stream, pdl, params, RT_SUB_EXEC,
                        "direct GEMV + AllReduce launch");
}
