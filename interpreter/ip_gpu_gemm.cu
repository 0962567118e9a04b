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

#include "rt_cudart.h"

// What the epilogue needs of a launch, in shared memory: the consumer
// warpgroups run the mainloop with 128 accumulators live in their
// registers, so the epilogue holds no state of its own (values kept in
// registers across the mainloop cost the GEMM a third more instructions,
// spilled, on a one-wave shape).

struct gemm_state {
  __nv_bfloat16 *dst[IP_GEMM_MAX_CHUNKS];   // where input chunk gchunk0 + i goes
  int32_t sem[IP_GEMM_MAX_CHUNKS];          // its step's semaphores (IP_SEM_NONE: nobody waits)
  uint64_t *sems;
  uint64_t gen;
  int64_t H;
  int32_t gm;   // the GEMM's rows
  int32_t grow0, grows, gtrows, gchunk0;
  int32_t aligned;   // tiles cut the rows every gtrows from row 0 (grows is a multiple of gtrows)
  ip_fastdiv by_rows, by_trows;   // / grows, / gtrows
  // Padding rows (ip_gargs.gcount): X's rows in blocks of brows, block
  // vblock0 + i worth computing up to row valid[i]; nvalid 0: every row.
  int32_t valid[IP_GEMM_MAX_CHUNKS];
  int32_t nvalid, vblock0, brows;
  ip_fastdiv by_brows;
};
__shared__ gemm_state ip_gs;

// The engine's epilogue (ip_gemm.cuh's contract) for a launch: GEMM row m
// is X's row grow0 + m, in input chunk (grow0 + m) / grows, which goes
// where gmap sends it (the chunk itself, or an output chunk:
// into="output").  32-bit arithmetic on rows (a 64-bit division is a
// call).
struct gemm_epi {
  __nv_bfloat16 *base;   // ip_gargs.gbase: rows end to end from here, else NULL
  int64_t H;             // the GEMM's columns: a row's elements
  int posts;             // ip_gargs.gposts: done() counts tiles in semaphores (else it does nothing)
  int uneven;            // the call has counts (ip_gargs.gcount): skip() reads them
  // Whether tile row m0's rows are all padding: in each block the tile
  // touches, past that block's count.
  __device__ bool skip(int64_t m0) const {
    const gemm_state &g = ip_gs;
    if (!uneven || !g.nvalid) return false;
    const int32_t first = g.grow0 + (int32_t)m0;
    const int32_t last = first + unit_rows(m0) - 1;
    for (int32_t b = ip_fastdiv_div(first, g.by_brows), e = ip_fastdiv_div(last, g.by_brows); b <= e; b++) {
      const int32_t lo = b * g.brows, from = first > lo ? first - lo : 0;
      if (from < g.valid[b - g.vblock0]) return false;
    }
    return true;
  }
  // Only semaphores that some step waits on need the fence before done()
  // (a direct call's end releases the whole block's: direct_end).
  __device__ bool publishes() const { return posts != 0; }
  __device__ static int32_t unit_rows(int64_t m0) {
    const int32_t left = ip_gs.gm - (int32_t)m0;
    return left < IP_GEMM_TILE_M ? left : IP_GEMM_TILE_M;
  }

  __device__ __nv_bfloat16 *row_ptr(int64_t row) const {
    if (base) return base + row * H;
    const gemm_state &g = ip_gs;
    const int32_t r = g.grow0 + (int32_t)row, c = ip_fastdiv_div(r, g.by_rows);
    return g.dst[c - g.gchunk0] + (int64_t)(r - c * g.grows) * g.H;
  }

  // Counts cols elements per row of rows r .. e - 1 (one tile of one
  // chunk) in that tile's semaphore of the chunk's step.
  __device__ static void post(const gemm_state &g, int32_t r, int32_t e, int cols) {
    const int32_t c = ip_fastdiv_div(r, g.by_rows), t = ip_fastdiv_div(r - c * g.grows, g.by_trows);
    const int32_t sem = g.sem[c - g.gchunk0];
    if (sem == IP_SEM_NONE) return;
    const int kind = ip_sem_kind(sem), p = ip_sem_param(sem);
    const int32_t grp = kind == IR_SYNC_GROUP ? t / p : kind == IR_SYNC_STRIDE ? t % p : t;
    sem_add(g.sems + ip_sem_base(sem) + grp, (uint64_t)(e - r) * (uint64_t)cols, g.gen);
  }

  // Rows m0 .. m0 + rows - 1 of the unit, cut where a tile ends, are
  // groups of rows of one tile of one chunk; lane j % 32 counts group j.
  // Where tiles cut the rows every gtrows rows, a lane finds its groups
  // at once; else it walks the groups by addition.
  __device__ void done(int64_t m0, int64_t n0, int rows, int cols, int lane) const {
    (void)n0;
    const gemm_state &g = ip_gs;
    if (!posts) return;
    const int32_t first = g.grow0 + (int32_t)m0, end = first + rows;
    if (g.aligned) {
      const int32_t t0 = ip_fastdiv_div(first, g.by_trows);
      for (int32_t j = lane;; j += 32) {
        const int32_t r = (t0 + j) * g.gtrows, s = r > first ? r : first, e = r + g.gtrows < end ? r + g.gtrows : end;
        if (s >= end) break;
        post(g, s, e, cols);
      }
      return;
    }
    int32_t r = first, c = ip_fastdiv_div(r, g.by_rows), x = r - c * g.grows;
    int32_t t = ip_fastdiv_div(x, g.by_trows);
    for (int j = 0; r < end; j++) {
      int32_t n = (t + 1) * g.gtrows < g.grows ? (t + 1) * g.gtrows - x : g.grows - x;
      if (n > end - r) n = end - r;
      if (j % 32 == lane) post(g, r, r + n, cols);
      r += n;
      x += n;
      t++;
      if (x == g.grows) {   // the chunk's last tile: the next chunk's first
        c++;
        x = t = 0;
      }
    }
  }
};

// Whether a compute block's call is plain: its rows lie end to end, it
// counts no tiles and has no counts (its epilogue reads nothing of
// ip_gs), meets no peer, and is not traced.  A one-rank GEMM is.
__device__ __forceinline__ bool gemm_plain(const ip_gargs &a) {
  return a.gbase && !a.gposts && !a.gcount && !direct_meets(a) && !a.trace;
}

// A compute block: units blockIdx - (the communicating blocks), then
// every (compute blocks)-th after it.  A direct call has no
// communicating blocks: every block computes (rt_coll.c).  Thread 0
// owns the block's generation word; the threads fill the epilogue's
// state, the chunks' destinations only where rows do not lie end to end
// or tiles are counted (the GEMM then waits for no gmap read).  A plain
// call (gemm_plain) goes to the engine at once, on an inlined copy of
// its own: skipping only the state's fill gained a one-rank GEMM little,
// its own copy 0.6-2 us (1024 x 4096 x 1024 to 1024 x 8192 x 4096 on an
// H200).  Skipping the fill and both barriers around the one copy
// spilled 898 bytes in the communicating blocks' code (the note below);
// two copies leave them at 778.
template <bool kSplit, int kTN>
__device__ __forceinline__ void gemm_block(const ip_gargs &a) {
  const int cb = blockIdx.x - a.ntbs * a.lanes;
  char *smem = (char *)(((uintptr_t)stage_of(a) + 15) & ~(uintptr_t)15);
  if (gemm_plain(a)) {
    gemm_epi e{(__nv_bfloat16 *)a.gbase, a.gemm.n, 0, 0};
    ip_gemm_run_as<kSplit, kTN>(a.gemm, smem, cb, (int64_t)a.ncomp * a.cwidth, e);
    // Counted (nobody waits) after the engine, whose producer, thread 0,
    // waited for the kernels before where the kernel left that to it.
    if (threadIdx.x == 0) atomicAdd((unsigned long long *)&a.gen[blockIdx.x], 1ull);
    return;
  }
  if (a.gemm.deps_wait) pdl_wait();   // (the host sets it for plain calls only)
  int tn = 0;
  gemm_state &g = ip_gs;
  uint64_t gen = 0;   // thread 0's, read now: its load overlaps the others' below
  if (threadIdx.x == 0) {
    trace_ev(a, tn, IP_EV_ENTER, 0, 0);
    if (a.gposts) gen = a.gen[blockIdx.x] + 1;
    else atomicAdd((unsigned long long *)&a.gen[blockIdx.x], 1ull);   // counted, nobody waits for it
  }
  for (int i = threadIdx.x; i < a.gchunks && (!a.gbase || a.gposts); i += blockDim.x) {
    if (a.direct) {
      g.dst[i] = (__nv_bfloat16 *)ip_gemm_direct_dst(&a, a.gchunk0 + i);
      g.sem[i] = IP_SEM_NONE;
      continue;
    }
    const int32_t d = a.gmap[2 * i + 1], b = IP_GMAP_BUF(d);
    g.dst[i] = (__nv_bfloat16 *)a.buf[b] + ir_geom_off(&a.geom, b, IP_GMAP_CHUNK(d));
    g.sem[i] = a.gmap[2 * i];
  }
  // The blocks of rows the GEMM touches, and how many rows of each count.
  const int32_t vb0 = a.gcount ? a.grow0 / a.gbrows : 0;
  const int32_t nv = a.gcount ? (a.grow0 + (int32_t)a.gemm.m - 1) / a.gbrows - vb0 + 1 : 0;
  for (int i = threadIdx.x; i < nv; i += blockDim.x) {
    const int32_t v = a.gcount[vb0 + i];
    if ((v < 0 || v > a.gbrows) && cb == 0) ip_bad_data(a, IP_BAD_COUNT, -1, vb0 + i, v);
    g.valid[i] = v < 0 ? 0 : v > a.gbrows ? a.gbrows : v;
  }
  // A direct call stores nothing before every rank's call has started.
  if (__syncthreads_or(direct_meets(a) && threadIdx.x == 0 && !direct_start(a))) {
    if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_EXIT, 0, 0);
    return;
  }
  // Not needed for order (the engine's first barrier orders the state
  // below), but without it ptxas gives the communicating blocks'
  // out-of-line code fewer registers: it spilled 874 bytes instead of
  // 778, and the FIFO exchange ran 12-15% slower (2 ranks sharing an
  // H200).
  __syncthreads();
  if (threadIdx.x == 0) {
    g.nvalid = nv;
    g.vblock0 = vb0;
    g.brows = a.gbrows > 0 ? a.gbrows : 1;
    g.by_brows = a.gdiv_brows;
    g.gm = (int32_t)a.gemm.m;
    g.sems = a.sems;
    if (a.gposts) {
      g.gen = gen;
      a.gen[blockIdx.x] = gen;
    }
    g.H = a.gemm.n;
    g.grow0 = a.grow0;
    g.grows = a.grows;
    g.gtrows = a.gtrows;
    g.gchunk0 = a.gchunk0;
    g.aligned = a.grows % a.gtrows == 0;
    g.by_rows = a.gdiv_rows;
    g.by_trows = a.gdiv_trows;
  }
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_READY, 0, 0);
  // The engine's first barrier orders the state before any epilogue.
  gemm_epi e{(__nv_bfloat16 *)a.gbase, a.gemm.n, a.gposts, a.gcount != nullptr};
  ip_gemm_run_as<kSplit, kTN>(a.gemm, smem, cb, (int64_t)a.ncomp * a.cwidth, e);
  if (direct_meets(a) && threadIdx.x == 0) direct_end(a, a.ncomp * a.cwidth);
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_EXIT, 0, 0);
}

// A communicating block, out of line: its code and registers stay out of
// the GEMM's.
__device__ __noinline__ void gemm_comm_block(const ip_gargs &a) { ip_comm_block<IP_BF16, IP_OP_SUM, false>(a); }

// The kernel: bf16 only (the engine's type); nothing reduces (a gemm
// program's collective moves its data: the runtime refuses others).  An
// instance for each of the engine's (ip_gemm_run_as): split or not
// (ip_gemm_args.splits > 1), by tile width (tile_n), so that the one most
// calls run keeps the code, and the registers, it had before split K.
template <bool kSplit, int kTN>
__global__ void __launch_bounds__(IP_GEMM_THREADS, 1) ip_gpu_gemm_kernel(const __grid_constant__ ip_gargs a) {
  // A programmatic launch (ip_gpu_gemm_launch): nothing of the kernel
  // before -- the caller's X, the call counts, the FIFOs -- is read before
  // it has ended.  The next kernel may launch at once: every block of
  // this one fills an SM (its registers and shared memory), so the next
  // one's blocks take SMs only as this one's leave them.  A plain call's
  // compute blocks leave the wait to the engine (ip_gemm_args.deps_wait):
  // their set-up overlaps the kernel before's end.
  const bool computes = a.ncomp && (int)blockIdx.x >= a.ntbs * a.lanes;
  if (!computes || !a.gemm.deps_wait) pdl_wait();
  pdl_release();
  if (computes) {   // a direct call's every block (rt_group.c)
    gemm_block<kSplit, kTN>(a);
    return;
  }
  gemm_comm_block(a);
}

// ---- host --------------------------------------------------------------

// The kernel's instances, whole tiles then split ones, each in the
// engine's widths' order (ip_gemm_width_index; kernel_for).
static const void *const g_kernels[2 * IP_GEMM_WIDTHS] = {
    (const void *)ip_gpu_gemm_kernel<false, IP_GEMM_TILE_N>, (const void *)ip_gpu_gemm_kernel<false, 128>,
    (const void *)ip_gpu_gemm_kernel<false, IP_GEMM_TILE_N_MIN>, (const void *)ip_gpu_gemm_kernel<true, IP_GEMM_TILE_N>,
    (const void *)ip_gpu_gemm_kernel<true, 128>, (const void *)ip_gpu_gemm_kernel<true, IP_GEMM_TILE_N_MIN>};
enum { N_KERNELS = (int)(sizeof g_kernels / sizeof g_kernels[0]) };

// The instance that runs GEMM g.
static const void *kernel_for(const ip_gemm_args &g) {
  const int w = ip_gemm_width_index(g.tile_n);   /* a width ip_gemm_set_tile_n took */
  return g_kernels[(g.splits > 1 ? IP_GEMM_WIDTHS : 0) + (w < 0 ? 0 : w)];
}

// Dynamic shared memory every instance may ask for on this device (the
// opt-in maximum less the largest static shared memory); 0 on failure.
static int dyn_limit(void) {
  int dev, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return 0;
  size_t most = 0;
  for (int i = 0; i < N_KERNELS; i++) {
    cudaFuncAttributes at;
    if (cudaFuncGetAttributes(&at, g_kernels[i]) != cudaSuccess) return 0;
    if (at.sharedSizeBytes > most) most = at.sharedSizeBytes;
  }
  return optin - (int)most;
}

extern "C" int ip_gpu_gemm_smem(void) {
  int dev, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return ip_gemm_smem_bytes(major, minor) + 16;   // + 16: aligned after the steps (gemm_block)
}

// A 9.x device loads the build's sm_90a code (an exact match, preferred
// to the compute_90 PTX that other GPUs compile into the fallback).
extern "C" int ip_gpu_gemm_wgmma(void) {
  int dev, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return 0;
  return major == 9;
}

extern "C" int ip_gpu_gemm_ok(const char **why) {
  int dev, major = 0, regs_ok = 1;
  *why = "ok";
  if (cudaGetDevice(&dev) != cudaSuccess) {
    *why = "the gemm kernel does not load on this device";
    return 0;
  }
  for (int i = 0; i < N_KERNELS; i++) {
    cudaFuncAttributes at;
    if (cudaFuncGetAttributes(&at, g_kernels[i]) != cudaSuccess) {
      *why = "the gemm kernel does not load on this device";
      return 0;
    }
    regs_ok &= at.numRegs == IP_GEMM_REGS_ENTRY;
  }
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (major < 8) {
    *why = "the GEMM tile engine needs compute capability 8.0 or later";
    return 0;
  }
  /* sm_90a moves registers between warpgroups (setmaxnreg): every
   * instance must hold exactly the count the engine gives back. */
  if (major == 9 && !regs_ok) {
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
  for (int i = 0; i < N_KERNELS; i++)
    CHECK(rt_cuda(cudaFuncSetAttribute(g_kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, lim), RT_SUB_EXEC,
                  "allowing the gemm kernel its shared memory"));
  return BT_OK;
}

extern "C" bt_result ip_gpu_gemm_max_blocks(int smem, int *max_blocks) {
  int dev, sms, per = 0;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  if (smem > dyn_limit()) {
    *max_blocks = 0;
    return BT_OK;
  }
  CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, g_kernels[0], IP_GEMM_THREADS,
                                                              smem), RT_SUB_EXEC, "occupancy"));
  *max_blocks = sms * per;
  return BT_OK;
}

extern "C" bt_result ip_gpu_gemm_launch(const ip_gargs *a, int pdl, void *stream) {
  ip_gargs args = *a;
  void *params[] = {&args};
  return rt_cuda_launch(kernel_for(a->gemm), (unsigned)ip_gpu_blocks(a), IP_GEMM_THREADS, ip_gpu_smem(a),
                        stream, pdl, params, RT_SUB_EXEC, "interpreter launch (gemm)");
}
