// ip_gpu_gemm.cu -- the interpreter kernel of programs with gemm steps
// (GEMM + AllToAll: docs/FUSED.md).  Its launch shape is the GEMM tile
// engine's (ip_gemm.cuh): IP_GEMM_THREADS threads and the engine's shared
// memory in every block, one block per SM.  Its compute blocks run one
// GEMM over the rows of X the program's gemm steps compute, the units
// spread over all of them, and store each output row straight into its
// destination chunk; once a unit is stored, every tile of the chunks it
// touches counts its elements in that tile's semaphore, so the
// communicating blocks (ip_exec.cuh, as in every program) send a tile
// the moment its last unit lands.  Built for sm_90a (wgmma, TMA) and as
// compute_90 PTX (the engine's mma.sync fallback) for other GPUs.
#include "ip_exec.cuh"
#include "ip_gemm.cuh"

#include <cuda_runtime.h>

#include "rt_cuda.h"
#include "rt_log.h"

// What the epilogue needs of a launch, in shared memory: the consumer
// warpgroups run the mainloop with 128 accumulators live in their
// registers, so the epilogue holds no state of its own (values kept in
// registers across the mainloop cost the GEMM a third more instructions,
// spilled, on a one-wave shape).
struct gemm_state {
  char *buf[IR_BUF_COUNT];
  const int32_t *gmap;
  uint64_t *sems;
  uint64_t gen;
  int64_t count, cap, H;
  int32_t k, grow0, grows, gtrows, gchunk0;
};
__shared__ gemm_state ip_gs;

// The engine's epilogue (ip_gemm.cuh's contract) for a launch: GEMM row m
// is X's row grow0 + m, which goes where gmap sends its input chunk (the
// chunk itself, or an output chunk: into="output").  32-bit arithmetic on
// rows (a 64-bit division is a call).
struct gemm_epi {
  __device__ __nv_bfloat16 *row_ptr(int64_t row) const {
    const gemm_state &g = ip_gs;
    const int32_t r = g.grow0 + (int32_t)row, c = r / g.grows;
    const int32_t d = __ldg(&g.gmap[2 * (c - g.gchunk0) + 1]);
    const int32_t dc = IP_GMAP_CHUNK(d);   // ir_geom_off of a user buffer's chunk
    const int64_t off = (int64_t)(dc / g.k) * g.count + (int64_t)(dc % g.k) * g.cap;
    return (__nv_bfloat16 *)g.buf[IP_GMAP_BUF(d)] + off + (int64_t)(r - c * g.grows) * g.H;
  }

  // Rows m0 .. m0 + rows - 1 of the unit, cut where a tile ends, are
  // groups of rows of one tile of one chunk; lane j % 32 counts group j:
  // cols elements per row in that tile's semaphore of the chunk's step.
  __device__ void done(int64_t m0, int64_t n0, int rows, int cols, int lane) const {
    (void)n0;
    const gemm_state &g = ip_gs;
    const int32_t end = g.grow0 + (int32_t)m0 + rows;
    int32_t r = g.grow0 + (int32_t)m0;
    for (int j = 0; r < end; j++) {
      const int32_t c = r / g.grows, x = r - c * g.grows, t = x / g.gtrows;
      int32_t n = (t + 1) * g.gtrows < g.grows ? (t + 1) * g.gtrows - x : g.grows - x;
      if (n > end - r) n = end - r;
      if (j % 32 == lane) {
        const int32_t sem = __ldg(&g.gmap[2 * (c - g.gchunk0)]);
        if (sem != IP_SEM_NONE) {
          const int kind = ip_sem_kind(sem), p = ip_sem_param(sem);
          const int32_t grp = kind == IR_SYNC_GROUP ? t / p : kind == IR_SYNC_STRIDE ? t % p : t;
          sem_add(g.sems + ip_sem_base(sem) + grp, (uint64_t)n * (uint64_t)cols, g.gen);
        }
      }
      r += n;
    }
  }
};

// A compute block: units blockIdx - (the communicating blocks), then
// every (compute blocks)-th after it.  Thread 0 owns the block's
// generation word and fills the epilogue's state.
__device__ __forceinline__ void gemm_block(const ip_gargs &a) {
  const int cb = blockIdx.x - a.ntbs * a.lanes;
  int tn = 0;
  if (threadIdx.x == 0) {
    trace_ev(a, tn, IP_EV_ENTER, 0, 0);
    gemm_state &g = ip_gs;
    for (int b = 0; b < IR_BUF_COUNT; b++) g.buf[b] = a.buf[b];
    g.gmap = a.gmap;
    g.sems = a.sems;
    g.gen = a.gen[blockIdx.x] + 1;
    a.gen[blockIdx.x] = g.gen;
    g.count = a.geom.count;
    g.cap = a.geom.cap;
    g.H = a.gemm.n;
    g.k = a.geom.k;
    g.grow0 = a.grow0;
    g.grows = a.grows;
    g.gtrows = a.gtrows;
    g.gchunk0 = a.gchunk0;
  }
  // The engine's first barrier orders the state before any epilogue.
  gemm_epi e;
  char *smem = (char *)(((uintptr_t)stage_of(a) + 15) & ~(uintptr_t)15);
  ip_gemm_run(a.gemm, smem, cb, (int64_t)a.ncomp * a.cwidth, e);
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_EXIT, 0, 0);
}

// A communicating block, out of line: its code and registers stay out of
// the GEMM's.
__device__ __noinline__ void gemm_comm_block(const ip_gargs &a) { ip_comm_block<IP_BF16, IP_OP_SUM, false>(a); }

// The kernel: bf16 only (the engine's type); nothing reduces (a gemm
// program's collective moves its data: the runtime refuses others).
__global__ void __launch_bounds__(IP_GEMM_THREADS, 1) ip_gpu_gemm_kernel(const __grid_constant__ ip_gargs a) {
  if (a.ncomp && (int)blockIdx.x >= a.ntbs * a.lanes) {
    gemm_block(a);
    return;
  }
  gemm_comm_block(a);
}

// ---- host --------------------------------------------------------------

// Dynamic shared memory the kernel may ask for on this device (the
// opt-in maximum less its static shared memory); 0 on failure.
static int dyn_limit(void) {
  int dev, optin = 0;
  cudaFuncAttributes at;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      cudaFuncGetAttributes(&at, (const void *)ip_gpu_gemm_kernel) != cudaSuccess)
    return 0;
  return optin - (int)at.sharedSizeBytes;
}

extern "C" int ip_gpu_gemm_smem(void) {
  int dev, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return ip_gemm_smem_bytes(major, minor) + 16;   // + 16: aligned after the steps (gemm_block)
}

extern "C" int ip_gpu_gemm_ok(const char **why) {
  int dev, major = 0;
  cudaFuncAttributes at;
  *why = "ok";
  if (cudaGetDevice(&dev) != cudaSuccess || cudaFuncGetAttributes(&at, (const void *)ip_gpu_gemm_kernel) != cudaSuccess) {
    *why = "the gemm kernel does not load on this device";
    return 0;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (major < 8) {
    *why = "the GEMM tile engine needs compute capability 8.0 or later";
    return 0;
  }
  /* sm_90a moves registers between warpgroups (setmaxnreg): the kernel
   * must hold exactly the count the engine gives back. */
  if (major == 9 && at.numRegs != IP_GEMM_REGS_ENTRY) {
    *why = "the gemm kernel was built with a register count the tile engine cannot run with";
    return 0;
  }
  if (dyn_limit() < ip_gpu_gemm_smem()) {
    *why = "the GPU's shared memory per block is smaller than the GEMM tile engine's";
    return 0;
  }
  return 1;
}

extern "C" bt_result ip_gpu_gemm_load(void) {
  const int lim = dyn_limit();
  if (lim <= 0) return BT_OK;   /* ip_gpu_gemm_ok says why no program with gemm steps runs */
  return rt_cuda(cudaFuncSetAttribute((const void *)ip_gpu_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      lim), RT_SUB_EXEC, "allowing the gemm kernel its shared memory");
}

extern "C" bt_result ip_gpu_gemm_max_blocks(int smem, int *max_blocks) {
  int dev, sms, per = 0;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  if (smem > dyn_limit()) {
    *max_blocks = 0;
    return BT_OK;
  }
  CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, (const void *)ip_gpu_gemm_kernel, IP_GEMM_THREADS,
                                                              smem), RT_SUB_EXEC, "occupancy"));
  *max_blocks = sms * per;
  return BT_OK;
}

extern "C" bt_result ip_gpu_gemm_launch(const ip_gargs *a, void *stream) {
  ip_gargs args = *a;
  void *params[] = {&args};
  return rt_cuda(cudaLaunchKernel((const void *)ip_gpu_gemm_kernel, dim3(ip_gpu_blocks(a)), dim3(IP_GEMM_THREADS), params,
                                  ip_gpu_smem(a), (cudaStream_t)stream), RT_SUB_EXEC, "interpreter launch (gemm)");
}
