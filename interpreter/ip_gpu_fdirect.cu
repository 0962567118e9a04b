// ip_gpu_fdirect.cu -- the direct fused kernels (ip_fdirect.h): GEMV +
// AllReduce in one shot over the window.  A block computes its rows with
// the interpreter's GEMV (ip_compute.cuh), stores them as LL lines into
// every rank's landing, then sums every rank's lines of those rows.  One
// instance per element type.  Also the host's launch and grid calls.
#include "ip_fdirect.h"

#include <cuda_runtime.h>

#include "ip_compute.cuh"
#include "ip_spin.cuh"
#include "rt_cuda.h"
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

// A warp loads one row group at a time (ip_gemv's R): a task is one row
// group per warp.  The bounds name one block per SM at least: ptxas then
// gives the loads the registers they want (109-162, the build measured in
// docs/PERFORMANCE.md; without the second argument it caps them at 80 and
// spills some).
template <int DT, int U>
__global__ void __launch_bounds__(IP_FDIRECT_THREADS, 1) ip_fgemv_kernel(const ip_fargs a) {
  constexpr int ES = DT == IP_F32 ? 4 : 2;
  __shared__ __align__(16) char part[IP_FDIRECT_TASK_ROWS * ES + 16];
  __shared__ uint64_t s_seq;
  // The call count is loaded now and waited for only after the first
  // task's GEMV (its flag is needed for the first stores): its latency
  // hides behind the matrix's loads.
  const uint64_t count = threadIdx.x == 0 ? *(volatile uint64_t *)(a.seq + blockIdx.x) : 0;
  int tn = 0;   // thread 0: events traced
  if (threadIdx.x == 0) {
    d_stop = 0;
    d_next_poll = 0;
    ip_trace_ev(a.trace, tn, IP_EV_ENTER, 0, 0);
    ip_trace_ev(a.trace, tn, IP_EV_READY, 0, 0);
  }
  const int64_t lines = (a.M * ES + 7) / 8;                 // a rank's slot
  const int64_t tasks = (a.M + IP_FDIRECT_TASK_ROWS - 1) / IP_FDIRECT_TASK_ROWS;
  uint64_t seq = 0;
  // Compute task by task, and store each into every rank's slot.
  for (int64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
    const int64_t c0 = t * IP_FDIRECT_TASK_ROWS;
    const int n = (int)(a.M - c0 < IP_FDIRECT_TASK_ROWS ? a.M - c0 : IP_FDIRECT_TASK_ROWS);
    ip_gemv<DT, IP_FDIRECT_ROW_GROUP, U>(a.W, a.ld, a.K, a.x, c0, n, part);   // ends with a barrier
    const int bytes = n * ES, nl = (bytes + 7) / 8;
    for (int i = bytes + (int)threadIdx.x; i < nl * 8; i += blockDim.x) part[i] = 0;   // the last line's tail
    if (threadIdx.x == 0 && t == blockIdx.x) s_seq = count + 1;
    __syncthreads();
    seq = s_seq;
    const uint32_t flag = (uint32_t)seq;
    const int64_t hoff = (seq & 1) ? a.half : 0;
    const int64_t l0 = c0 * ES / 8;                          // whole row groups: a multiple of 8 bytes
    for (int i = threadIdx.x; i < nl; i += blockDim.x) {
      const uint2 d = *(const uint2 *)(part + 8 * i);
      for (int k = 0; k < a.nranks; k++) {
        const int p = a.rank + 1 + k < a.nranks ? a.rank + 1 + k : a.rank + 1 + k - a.nranks;   // peers first
        ll_line_put((uint4 *)(a.land[p] + hoff) + (int64_t)a.rank * lines + l0 + i, d.x, d.y, flag);
      }
    }
    __syncthreads();                                         // part is rewritten by the next task
    if (threadIdx.x == 0) ip_trace_ev(a.trace, tn, IP_EV_DONE, IP_FSTEP_TASK, t);
  }
  if (blockIdx.x >= tasks) {   // no task: this block only counts the call
    if (threadIdx.x == 0) {
      a.seq[blockIdx.x] = count + 1;
      ip_trace_ev(a.trace, tn, IP_EV_EXIT, 0, 0);
    }
    return;
  }
  // Sum every rank's lines of the same rows, in rank order.
  const uint32_t flag = (uint32_t)seq;
  const int64_t hoff = (seq & 1) ? a.half : 0;
  const uint4 *mine = (const uint4 *)(a.land[a.rank] + hoff);
  bool live = true;
  for (int64_t t = blockIdx.x; t < tasks && live; t += gridDim.x) {
    const int64_t r1 = (t + 1) * IP_FDIRECT_TASK_ROWS < a.M ? (t + 1) * IP_FDIRECT_TASK_ROWS : a.M;
    const int64_t lb = t * IP_FDIRECT_TASK_ROWS * ES / 8, le = (r1 * ES + 7) / 8;
    for (int64_t L = lb + threadIdx.x; L < le && live; L += blockDim.x) {
      float acc[fline<DT>::E];
#pragma unroll
      for (int e = 0; e < fline<DT>::E; e++) acc[e] = 0.f;
      for (int s = 0; s < a.nranks && live; s++) {
        uint2 d, f;
        dspin sp = {0, 0};
        for (;;) {
          ll_line_get(mine + (int64_t)s * lines + L, d, f);
          if (f.x == flag && f.y == flag) break;
          if (a.poll_ns) __nanosleep(a.poll_ns);
          if (!dspin_more(a, sp, (int)blockIdx.x, -1, L * 8 / ES, IP_WAIT_RECV, s, 0)) {
            live = false;   // stopped: y is left as it is
            break;
          }
        }
        fline<DT>::add(d, acc);
      }
      const int64_t e0 = L * 8 / ES;                         // the line's first row
#pragma unroll
      for (int e = 0; e < fline<DT>::E; e++)
        if (live && e0 + e < a.M) ip_fromf<DT>(a.y + (e0 + e) * ES, acc[e]);
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
                     (const void *)ip_fgemv_kernel<DT, 4>}
static const void *const kernels[3][3] = {FGEMV_U(IP_F32), FGEMV_U(IP_F16), FGEMV_U(IP_BF16)};

extern "C" const char *const ip_fgemv_step_names[IP_FSTEP_COUNT] = {"gemv rows, stored everywhere",
                                                                   "sum of every rank's rows"};

static const void *kernel_of(int dtype, int unroll) {
  const int u = unroll == 1 ? 0 : unroll == 2 ? 1 : unroll == 4 ? 2 : -1;
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

extern "C" bt_result ip_fgemv_launch(const ip_fargs *a, int grid, int unroll, void *stream) {
  const void *k = kernel_of(a->dtype, unroll);
  if (!k || grid < 1) return BT_ERR_INVALID;
  ip_fargs args = *a;
  void *params[] = {&args};
  return rt_cuda(cudaLaunchKernel(k, dim3(grid), dim3(IP_FDIRECT_THREADS), params, 0, (cudaStream_t)stream),
                 RT_SUB_EXEC, "direct GEMV + AllReduce launch");
}
