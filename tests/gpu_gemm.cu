// gpu_gemm.cu -- gpu suite: the GEMM tile engine (interpreter/ip_gemm.cuh)
// against cuBLAS.  Correctness (TAP): host-side shape checks; uneven M,
// N tails, strided inputs, strided/offset/unaligned outputs, few blocks
// looping over many units, blocks with no unit; every tile reported done
// exactly once, after its data; results compared with cuBLAS (every
// element) and with a float64 host reference (sampled); every launch with
// a deadline on the engine's waits, none of which fires; tiles 128 and 64
// columns wide; tiles split in k-ranges (counters left zero, the same
// bits in a second call); with
// --stall, a launch whose waits never end stops at its deadline and is
// recorded.  Speed: cuBLAS and the engine side by side on the MoE shapes
// (or fewer tokens: --shapes decode), CUDA-graph replays, median of
// repeats; a table on stdout and a CSV (--csv PATH).
//
// Build (repository root; no GPU needed to build):
//   mkdir -p .device/gemm
//   nvcc -O3 -std=c++17 -lineinfo -gencode arch=compute_90a,code=sm_90a -I interpreter -I runtime/base \
//     tests/gpu_gemm.cu interpreter/ip_gemm_host.c interpreter/ip_gemm_order.c -lcublas -o .device/gemm/gpu_gemm
// The fallback instead of wgmma: -gencode arch=compute_80,code=sm_80 (or
// arch=compute_90,code=sm_90, which runs the fallback on a Hopper GPU).
//
// Usage: gpu_gemm [--quick | --shapes all | --shapes decode | --shapes M,N,K] [--csv PATH] [--reps R] [--group G]
//                 [--split S] [--tile-n T] [--cold] [--no-bench] [--no-cases]
//                 (--no-cases: only the speed shapes, each still checked)
//        gpu_gemm --stall        (a wait that never ends stops the kernel and is recorded: the
//                                 process's CUDA context is lost, so this runs alone)
//        gpu_gemm --stall-split  (the same for a split tile's meeting with a k-range no block runs)
//   --group G: bands of G tile rows (ip_gemm_args.band_group; by default ip_gemm_prepare's)
//   --split S: the speed shapes' tiles in S k-ranges (by default ip_gemm_default_splits's; 1: none)
//   --tile-n T: the speed shapes' tiles T columns wide (256, 128 or 64; by default ip_gemm_default_tile_n's)
//   --cold: each timed call, cuBLAS's and the engine's, reads its own copy of W, the copies together 4 x L2
//           or more (up to one a call of a graph): weights read from DRAM, as a model's layers read theirs
//   --shapes decode: 64-512 tokens (fewer tiles than SMs), instead of the MoE grid's 1024-8192
// Exit 1 when a check fails; TAP skip (plan 1..N with # SKIP) without a GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "ip_gemm.cuh"
#include "ip_gemm.h"

// TAP (tests/tap.h is C only): one point per call, the plan at the end.
static int tap_n, tap_failed;
__attribute__((format(printf, 2, 3))) static void ok(int pass, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s %d - ", pass ? "ok" : "not ok", ++tap_n);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  tap_failed += !pass;
  fflush(stdout);
}
static int tap_done(void) {
  printf("1..%d\n", tap_n);
  return tap_failed ? 1 : 0;
}

#define CK(call)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      printf("Bail out! %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)
#define CKB(call)                                                   \
  do {                                                              \
    cublasStatus_t s_ = (call);                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                              \
      printf("Bail out! %s: cublas status %d\n", #call, (int)s_);   \
      exit(1);                                                      \
    }                                                               \
  } while (0)

typedef __nv_bfloat16 bf16;

// Tolerances against cuBLAS (same bf16 inputs, f32 accumulation in
// another order): the largest difference over the largest reference
// magnitude stays within one bf16 rounding step (2^-8 relative, at most
// 2^-7 of the largest value for a smaller one); the norm-wise error far
// below.  Against float64 (sampled) the same bound holds.
#define TOL_MAX 1e-2
#define TOL_FRO 5e-3
#define SAMPLES 64               // float64 reference points per shape
#define POISON 0xffffu           // a bf16 NaN: unwritten outputs and padding
#define REPLAYS 20               // launches captured in one graph
#define DEFAULT_REPS 5           // timed graph replays per side; the median counts
#define WARMUP_REPLAYS 2
#define CUBLAS_WS (64u << 20)    // cuBLAS workspace, set so that graph capture allocates nothing
#define CASE_STALL_NS 10000000000ull   // every launch's deadline (10 s): no wait lasts that long
#define STALL_TEST_NS 200000000ull     // --stall: the deadline of the launch that hangs (0.2 s)
#define STALL_TEST_LIMIT_S 30          // --stall: how long the test waits for that launch to end
#define SEED_X 0x9e3779b97f4a7c15ull
#define SEED_W 0xc2b2ae3d27d4eb4full

// ---- random data, the same on host and device -----------------------------

// Element i of a stream: uniform in [-1, 1), rounded to bf16 (splitmix64).
__host__ __device__ static inline float gen(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const float f = (float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
  return __bfloat162float(__float2bfloat16_rn(f));
}

// p[r * ld + c] = gen(seed, r * cols + c) for c < cols; poison in the
// padding c >= cols and in rows rows .. rows + extra - 1 (never read).
__global__ void fill_kernel(bf16 *p, int64_t rows, int64_t extra, int64_t cols, int64_t ld, uint64_t seed) {
  const int64_t total = (rows + extra) * ld;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / ld, c = i % ld;
    if (r < rows && c < cols)
      p[i] = __float2bfloat16_rn(gen(seed, (uint64_t)(r * cols + c)));
    else
      ((unsigned short *)p)[i] = POISON;
  }
}

__global__ void poison_kernel(bf16 *p, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    ((unsigned short *)p)[i] = POISON;
}

// ---- the engine under test --------------------------------------------------

// A plain [M, N] output at y with row stride ldy.  With `check` set, done()
// counts each tile and reads its first and last element back: still
// poison means done came before the data (ordering broken).
struct plain_epi {
  bf16 *y;
  int64_t ldy;
  int check;
  int64_t tiles_n, tile_n;
  unsigned *done_cnt;    // per tile
  int *done_shape;       // per tile: rows << 16 | cols
  unsigned *early;       // tiles whose data done() did not see
  __device__ bf16 *row_ptr(int64_t r) { return y + r * ldy; }
  __device__ bool skip(int64_t) const { return false; }   // every row is computed (gpu_moe skips padding)
  __device__ bool publishes() const { return check != 0; }   // done() reads the tile back: keep the fence
  __device__ void done(int64_t m0, int64_t n0, int rows, int cols, int lane) {
    if (!check || lane != 0) return;   // every lane is called: each unit counted once
    const int64_t u = m0 / IP_GEMM_TILE_M * tiles_n + n0 / tile_n;
    atomicAdd(&done_cnt[u], 1u);
    done_shape[u] = rows << 16 | cols;
    const unsigned short a = __ldcg((const unsigned short *)(y + m0 * ldy + n0));
    const unsigned short b = __ldcg((const unsigned short *)(y + (m0 + rows - 1) * ldy + n0 + cols - 1));
    if (a == POISON || b == POISON) atomicAdd(early, 1u);
  }
};

// An epilogue that breaks the contract: skip() tells the producer warp
// (threads 0-31) that no unit needs computing and every other thread that
// each does, so the consumers wait for loads that never come.  (The whole
// warp is told alike: its lanes walk the k-blocks together.)
struct lying_epi : plain_epi {
  __device__ bool skip(int64_t) const { return threadIdx.x < 32; }
};

// The engine over every unit, blocks striding, with epilogue Epi.
template <class Epi>
__global__ void __launch_bounds__(IP_GEMM_THREADS, 1) gemm_kernel(const __grid_constant__ ip_gemm_args g, Epi e) {
  extern __shared__ __align__(16) char smem[];
  Epi epi = e;
  ip_gemm_run(g, smem, blockIdx.x, gridDim.x, epi);
}

__global__ void path_kernel(int *out) { *out = ip_gemm_path(); }

// ---- comparison ---------------------------------------------------------

struct cmp_stats {
  unsigned max_diff_bits, max_ref_bits;  // non-negative floats compare as unsigned
  double sum_sq_diff, sum_sq_ref;
  unsigned long long nan_outputs;        // unwritten (poison) or NaN outputs
  unsigned long long pad_clobbered;      // elements outside the output that changed
};

// Over the engine's whole output allocation (off + m * ldy elements):
// outputs against ref [m, n] (compact), everything else must be poison.
__global__ void compare_kernel(const bf16 *y, int64_t off, int64_t ldy, const bf16 *ref, int64_t m, int64_t n,
                               cmp_stats *st) {
  float md = 0.f, mr = 0.f;
  double sd = 0.0, sr = 0.0;
  unsigned long long nan = 0, pad = 0;
  const int64_t total = off + m * ldy;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const unsigned short bits = ((const unsigned short *)y)[i];
    const int64_t pos = i - off, r = pos / ldy, c = pos % ldy;
    if (pos < 0 || c >= n) {
      pad += bits != POISON;
      continue;
    }
    const float e = __bfloat162float(y[i]), f = __bfloat162float(ref[r * n + c]);
    if (isnan(e)) {
      nan++;
      continue;
    }
    const float d = fabsf(e - f);
    md = fmaxf(md, d);
    mr = fmaxf(mr, fabsf(f));
    sd += (double)d * d;
    sr += (double)f * f;
  }
  for (int o = 16; o; o >>= 1) {
    md = fmaxf(md, __shfl_xor_sync(~0u, md, o));
    mr = fmaxf(mr, __shfl_xor_sync(~0u, mr, o));
    sd += __shfl_xor_sync(~0u, sd, o);
    sr += __shfl_xor_sync(~0u, sr, o);
    nan += __shfl_xor_sync(~0u, nan, o);
    pad += __shfl_xor_sync(~0u, pad, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(&st->max_diff_bits, __float_as_uint(md));
    atomicMax(&st->max_ref_bits, __float_as_uint(mr));
    atomicAdd(&st->sum_sq_diff, sd);
    atomicAdd(&st->sum_sq_ref, sr);
    atomicAdd(&st->nan_outputs, nan);
    atomicAdd(&st->pad_clobbered, pad);
  }
}

__global__ void gather_kernel(const bf16 *y, int64_t ldy, const int64_t *rc, int count, float *out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __bfloat162float(y[rc[2 * i] * ldy + rc[2 * i + 1]]);
}

// ---- one problem on the device -----------------------------------------

struct shape {
  int64_t m, n, k;
  int64_t ldx_pad, ldw_pad, ldy_pad;  // row strides beyond K, N, N (elements)
  int64_t xoff, yoff;                 // offsets of X and Y from their allocations (elements)
  int grid;                           // blocks; 0: one per SM
  int group;                          // band_group; 0: --group's, else ip_gemm_prepare's
  int64_t band0;                      // the tile row the walk starts at (ip_gemm_args.band0)
  int64_t inter;                      // ip_gemm_set_interleave's rows; 0: none
  int splits;                         // k-ranges a tile (ip_gemm_set_split); 0: 1; -1: the run's (--split)
  int tile_n;                         // a tile's columns (ip_gemm_set_tile_n); 0: 256; -1: the run's (--tile-n)
};

struct problem {
  shape s;
  int64_t ldx, ldw, ldy;
  bf16 *xa, *wa, *ya, *ref;  // allocations (X and Y at xa + xoff, ya + yoff)
  ip_gemm_args g;
};

static int g_sms, g_path;
static int64_t g_group = 0;  // --group: ip_gemm_args.band_group (0: ip_gemm_prepare's)
static int g_split = 0;      // --split: the speed shapes' k-ranges a tile (0: ip_gemm_default_splits's)
static int g_tile_n = 0;     // --tile-n: the speed shapes' tile width (0: ip_gemm_default_tile_n's)
static bool g_cold = false;  // --cold: each timed call reads its own copy of W (weights not in L2)
static int64_t g_l2_bytes;
static void *g_split_ws, *g_split_sem;   // split K's workspace and counters, grown as shapes need them
static int64_t g_split_ws_bytes, g_split_sem_bytes;
static cudaStream_t g_stream;
static cublasHandle_t g_blas;
static void *g_ws;
static unsigned *g_done_cnt, *g_early;
static int *g_done_shape;
static cmp_stats *g_stats;
static int64_t g_done_cap;
static ip_gemm_stall *g_stall, *g_stall_dev;   // host-mapped: where a wait that gives up is recorded

static int grid_of(const shape &s) { return s.grid ? s.grid : g_sms; }

// Makes *p (device memory, *have bytes) at least `want` bytes, zeroed when
// it is made anew.
static void grow_zeroed(void **p, int64_t *have, int64_t want) {
  if (want <= *have) return;
  if (*p) CK(cudaFree(*p));
  CK(cudaMalloc(p, (size_t)want));
  CK(cudaMemset(*p, 0, (size_t)want));
  *have = want;
}

// Allocates and fills a problem's buffers (fixed seeds) and prepares its
// arguments; returns the ip_gemm_prepare code.
static int setup(problem &p, const shape &s) {
  p.s = s;
  p.ldx = s.k + s.ldx_pad;
  p.ldw = s.n + s.ldw_pad;
  p.ldy = s.n + s.ldy_pad;
  const int64_t xrows_extra = IP_GEMM_TILE_M;  // poison past M: reading it would show
  CK(cudaMalloc(&p.xa, (size_t)(s.xoff + (s.m + xrows_extra) * p.ldx) * sizeof(bf16)));
  CK(cudaMalloc(&p.wa, (size_t)(s.k * p.ldw) * sizeof(bf16)));
  CK(cudaMalloc(&p.ya, (size_t)(s.yoff + s.m * p.ldy) * sizeof(bf16)));
  CK(cudaMalloc(&p.ref, (size_t)(s.m * s.n) * sizeof(bf16)));
  poison_kernel<<<1024, 256, 0, g_stream>>>(p.xa, s.xoff + (s.m + xrows_extra) * p.ldx);
  fill_kernel<<<4096, 256, 0, g_stream>>>(p.xa + s.xoff, s.m, xrows_extra, s.k, p.ldx, SEED_X ^ (uint64_t)s.m);
  fill_kernel<<<4096, 256, 0, g_stream>>>(p.wa, s.k, 0, s.n, p.ldw, SEED_W ^ (uint64_t)(s.n * 7 + s.k));
  CK(cudaGetLastError());
  const char *why;
  const int rc = ip_gemm_prepare(&p.g, p.xa + s.xoff, p.ldx, p.wa, p.ldw, s.m, s.n, s.k, &why);
  if (rc == IP_GEMM_OK) {
    const int64_t tn = s.tile_n > 0 ? s.tile_n
                       : !s.tile_n  ? IP_GEMM_TILE_N
                       : g_tile_n   ? g_tile_n
                                    : ip_gemm_default_tile_n(&p.g, grid_of(s));
    const int tr = ip_gemm_set_tile_n(&p.g, tn, &why);
    if (tr) {
      printf("# ip_gemm_set_tile_n(%lld): %s\n", (long long)tn, why);
      return tr;
    }
  }
  if (s.group || g_group) ip_gemm_set_band_group(&p.g, s.group ? s.group : g_group);
  if (rc == IP_GEMM_OK) {
    p.g.stall = g_stall_dev;   // deadlines on, as the interpreter runs the engine; none ever fires
    p.g.stall_ns = CASE_STALL_NS;
    p.g.band0 = s.band0;
    if (s.inter) ip_gemm_set_interleave(&p.g, s.inter);
    const int64_t splits = s.splits > 0 ? s.splits
                           : !s.splits ? 1
                           : g_split   ? g_split
                                       : ip_gemm_default_splits(&p.g, grid_of(s));
    if (splits > 1) {   // the counters start zero; the engine leaves them so (check() checks)
      grow_zeroed(&g_split_ws, &g_split_ws_bytes, ip_gemm_split_ws_bytes(&p.g, splits));
      grow_zeroed(&g_split_sem, &g_split_sem_bytes, ip_gemm_split_sem_bytes(&p.g));
    }
    const int sr = ip_gemm_set_split(&p.g, splits, (float *)g_split_ws, (uint32_t *)g_split_sem, &why);
    if (sr) {
      printf("# ip_gemm_set_split(%lld): %s\n", (long long)splits, why);
      return sr;
    }
  }
  return rc;
}

static void release(problem &p) {
  CK(cudaFree(p.xa));
  CK(cudaFree(p.wa));
  CK(cudaFree(p.ya));
  CK(cudaFree(p.ref));
}

static void launch_engine(const problem &p, int check) {
  plain_epi e;
  e.y = p.ya + p.s.yoff;
  e.ldy = p.ldy;
  e.check = check;
  e.tiles_n = p.g.tiles_n;
  e.tile_n = p.g.tile_n;
  e.done_cnt = g_done_cnt;
  e.done_shape = g_done_shape;
  e.early = g_early;
  gemm_kernel<plain_epi><<<grid_of(p.s), IP_GEMM_THREADS, IP_GEMM_SMEM, g_stream>>>(p.g, e);
}

// ref = X W through cuBLAS (column-major view: ref^T [N, M] = W^T X^T).
static void launch_cublas(const problem &p, bf16 *out, int64_t ldo) {
  const float one = 1.f, zero = 0.f;
  CKB(cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)p.s.n, (int)p.s.m, (int)p.s.k, &one, p.wa, CUDA_R_16BF,
                   (int)p.ldw, p.xa + p.s.xoff, CUDA_R_16BF, (int)p.ldx, &zero, out, CUDA_R_16BF, (int)ldo,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct check_result {
  double max_rel, fro_rel, f64_rel;
  bool pass;
};

// Runs both, compares, and reports one TAP point named by `what`.
static check_result check(problem &p, const char *what) {
  const shape &s = p.s;
  const int64_t tiles = p.g.tiles;   // done() counts tiles
  if (tiles > g_done_cap) {
    printf("Bail out! %lld tiles exceed the test's done buffers\n", (long long)tiles);
    exit(1);
  }
  poison_kernel<<<1024, 256, 0, g_stream>>>(p.ya, s.yoff + s.m * p.ldy);
  CK(cudaMemsetAsync(g_done_cnt, 0, tiles * sizeof(unsigned), g_stream));
  CK(cudaMemsetAsync(g_done_shape, 0, tiles * sizeof(int), g_stream));
  CK(cudaMemsetAsync(g_early, 0, sizeof(unsigned), g_stream));
  CK(cudaMemsetAsync(g_stats, 0, sizeof(cmp_stats), g_stream));
  launch_engine(p, 1);
  CK(cudaGetLastError());
  launch_cublas(p, p.ref, s.n);
  compare_kernel<<<1024, 256, 0, g_stream>>>(p.ya, s.yoff, p.ldy, p.ref, s.m, s.n, g_stats);
  CK(cudaGetLastError());
  // float64 reference at sampled points (host, from the same generator).
  std::vector<int64_t> rc(2 * SAMPLES);
  uint64_t z = 12345 + (uint64_t)s.m * 31 + (uint64_t)s.n;
  for (int i = 0; i < SAMPLES; i++) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    rc[2 * i] = i == 0 ? s.m - 1 : (int64_t)((z >> 33) % (uint64_t)s.m);  // the last row always
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    rc[2 * i + 1] = i == 0 ? s.n - 1 : (int64_t)((z >> 33) % (uint64_t)s.n);
  }
  int64_t *drc;
  float *dout;
  CK(cudaMalloc(&drc, rc.size() * sizeof(int64_t)));
  CK(cudaMalloc(&dout, SAMPLES * sizeof(float)));
  CK(cudaMemcpyAsync(drc, rc.data(), rc.size() * sizeof(int64_t), cudaMemcpyHostToDevice, g_stream));
  gather_kernel<<<1, SAMPLES, 0, g_stream>>>(p.ya + s.yoff, p.ldy, drc, SAMPLES, dout);
  std::vector<float> got(SAMPLES);
  CK(cudaMemcpyAsync(got.data(), dout, SAMPLES * sizeof(float), cudaMemcpyDeviceToHost, g_stream));
  cmp_stats st;
  CK(cudaMemcpyAsync(&st, g_stats, sizeof st, cudaMemcpyDeviceToHost, g_stream));
  std::vector<unsigned> cnt(tiles);
  std::vector<int> shp(tiles);
  unsigned early = 0;
  CK(cudaMemcpyAsync(cnt.data(), g_done_cnt, tiles * sizeof(unsigned), cudaMemcpyDeviceToHost, g_stream));
  CK(cudaMemcpyAsync(shp.data(), g_done_shape, tiles * sizeof(int), cudaMemcpyDeviceToHost, g_stream));
  CK(cudaMemcpyAsync(&early, g_early, sizeof early, cudaMemcpyDeviceToHost, g_stream));
  CK(cudaStreamSynchronize(g_stream));
  CK(cudaFree(drc));
  CK(cudaFree(dout));
  double f64_max_err = 0, f64_max_ref = 0;
  for (int i = 0; i < SAMPLES; i++) {
    const int64_t r = rc[2 * i], c = rc[2 * i + 1];
    double acc = 0;
    for (int64_t k = 0; k < s.k; k++)
      acc += (double)gen(SEED_X ^ (uint64_t)s.m, (uint64_t)(r * s.k + k)) *
             (double)gen(SEED_W ^ (uint64_t)(s.n * 7 + s.k), (uint64_t)(k * s.n + c));
    f64_max_err = std::max(f64_max_err, fabs((double)got[i] - acc));
    f64_max_ref = std::max(f64_max_ref, fabs(acc));
    if (isnan(got[i])) f64_max_err = INFINITY;
  }
  int bad_done = 0;
  for (int64_t u = 0; u < tiles; u++) {
    const int64_t m0 = u / p.g.tiles_n * IP_GEMM_TILE_M, n0 = u % p.g.tiles_n * p.g.tile_n;
    const int rows = (int)std::min<int64_t>(IP_GEMM_TILE_M, s.m - m0);
    const int cols = (int)std::min<int64_t>(p.g.tile_n, s.n - n0);
    if (cnt[u] != 1 || shp[u] != (rows << 16 | cols)) bad_done++;
  }
  // Split K: the tiles' counters are left zero for the next call, and a
  // second call stores the same bits (the partial sums add in a fixed
  // order).
  long long split_sems = 0, split_diff = 0;
  if (p.g.splits > 1) {
    std::vector<uint32_t> sem((size_t)(p.g.tiles * IP_GEMM_SPLIT_SEMS));
    CK(cudaMemcpy(sem.data(), g_split_sem, sem.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (uint32_t v : sem) split_sems += v != 0;
    const size_t ny = (size_t)(s.yoff + s.m * p.ldy);
    std::vector<unsigned short> first(ny), second(ny);
    CK(cudaMemcpy(first.data(), p.ya, ny * sizeof(bf16), cudaMemcpyDeviceToHost));
    launch_engine(p, 0);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(g_stream));
    CK(cudaMemcpy(second.data(), p.ya, ny * sizeof(bf16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < ny; i++) split_diff += first[i] != second[i];
  }
  float md, mr;
  memcpy(&md, &st.max_diff_bits, 4);
  memcpy(&mr, &st.max_ref_bits, 4);
  check_result res;
  res.max_rel = mr > 0 ? md / mr : md;
  res.fro_rel = st.sum_sq_ref > 0 ? sqrt(st.sum_sq_diff / st.sum_sq_ref) : sqrt(st.sum_sq_diff);
  res.f64_rel = f64_max_ref > 0 ? f64_max_err / f64_max_ref : f64_max_err;
  res.pass = res.max_rel <= TOL_MAX && res.fro_rel <= TOL_FRO && res.f64_rel <= TOL_MAX && st.nan_outputs == 0 &&
             st.pad_clobbered == 0 && bad_done == 0 && early == 0 && (!s.inter || p.g.inter_n > 0) &&
             split_sems == 0 && split_diff == 0 && (s.splits < 1 || p.g.splits == s.splits) &&
             (s.tile_n < 1 || p.g.tile_n == s.tile_n);
  ok(res.pass,
     "%s M=%lld N=%lld K=%lld ldx=%lld ldw=%lld ldy=%lld yoff=%lld grid=%d band_group=%lld band0=%lld interleaved "
     "%d of %d, tiles %d wide, %d k-ranges: max rel err %.2e (cuBLAS), "
     "norm rel err %.2e, f64 rel err %.2e; unwritten %llu, padding clobbered %llu, bad done %d, done early %u; "
     "counters left set %lld, outputs differing in a second call %lld",
     what, (long long)s.m, (long long)s.n, (long long)s.k, (long long)p.ldx, (long long)p.ldw, (long long)p.ldy,
     (long long)s.yoff, grid_of(s), (long long)p.g.band_group, (long long)p.g.band0, p.g.inter_first, p.g.inter_n,
     p.g.tile_n, p.g.splits, res.max_rel, res.fro_rel, res.f64_rel, st.nan_outputs, st.pad_clobbered,
     bad_done, early, split_sems, split_diff);
  return res;
}

// The checker itself: one output changed by a few units in the last
// place must fail the comparison (else a 0.00 error proves nothing).
static void check_checker(problem &p) {
  const shape &s = p.s;
  bf16 *at = p.ya + s.yoff + (s.m - 1) * p.ldy + (s.n - 1), v;
  CK(cudaMemcpy(&v, at, sizeof v, cudaMemcpyDeviceToHost));
  const float f = __bfloat162float(v);
  v = __float2bfloat16_rn(f + (fabsf(f) + 1.f) * 0.25f);
  CK(cudaMemcpy(at, &v, sizeof v, cudaMemcpyHostToDevice));
  CK(cudaMemset(g_stats, 0, sizeof(cmp_stats)));
  compare_kernel<<<1024, 256, 0, g_stream>>>(p.ya, s.yoff, p.ldy, p.ref, s.m, s.n, g_stats);
  cmp_stats st;
  CK(cudaMemcpyAsync(&st, g_stats, sizeof st, cudaMemcpyDeviceToHost, g_stream));
  CK(cudaStreamSynchronize(g_stream));
  float md, mr;
  memcpy(&md, &st.max_diff_bits, 4);
  memcpy(&mr, &st.max_ref_bits, 4);
  ok(mr > 0 && md / mr > TOL_MAX / 4, "the comparison sees one planted error (max rel err %.2e)", mr > 0 ? md / mr : 0.);
}

// Polls g_stream until its work ends or about limit_s seconds pass;
// returns the last cudaStreamQuery result (cudaErrorNotReady: still
// running) and the seconds waited.
static cudaError_t wait_stream(double limit_s, double *waited) {
  cudaError_t st;
  *waited = 0;
  while ((st = cudaStreamQuery(g_stream)) == cudaErrorNotReady && *waited < limit_s) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    *waited += 1e-3;
  }
  return st;
}

// Blocks with nothing to compute: one unit on every SM's block, launched
// IDLE_LAUNCHES times back to back, must all end within IDLE_DEADLINE_S.
// Such a block's producer warpgroup has no wait that follows the
// consumers' taking of their registers; before the engine ordered the
// two, it could take its registers back first and leave a consumer warp
// in setmaxnreg for ever.  The race depends on the compiled code's
// timing: it hung a gemm kernel of the interpreter's (a build with three
// inlined copies of the engine, in 5 of 7 runs of a GEMM + AllToAll grid)
// but not this kernel, before the fix as after (2000 launches, an H200),
// so this check guards the idle path; it did not catch the hang.  A hang
// cannot be undone: the test reports it and exits at once.
#define IDLE_LAUNCHES 2000
#define IDLE_DEADLINE_S 30
static void check_idle_blocks(void) {
  problem p;
  const shape s = {IP_GEMM_TILE_M, IP_GEMM_TILE_N, 64, 0, 0, 0, 0, 0, 0};
  if (setup(p, s)) {
    ok(0, "idle blocks: prepare");
    release(p);
    return;
  }
  for (int i = 0; i < IDLE_LAUNCHES; i++) launch_engine(p, 0);
  CK(cudaGetLastError());
  double waited;
  const cudaError_t st = wait_stream(IDLE_DEADLINE_S, &waited);
  const bool ended = st != cudaErrorNotReady;
  ok(ended, "idle blocks: %d launches of 1 unit on %d blocks %s after about %.1f s", IDLE_LAUNCHES, grid_of(s),
     ended ? "ended" : "still running (a block hung)", waited);
  if (!ended) {
    printf("Bail out! the GPU is stuck in a kernel\n");
    fflush(stdout);
    _exit(1);
  }
  CK(st);
  check(p, "idle blocks: after the launches");
  release(p);
}

// ---- timing ---------------------------------------------------------------

// --cold: the copies of p's W a timed graph cycles through, so that
// their bytes are at least 4 x L2's (a model's weights, read once a
// step, come from DRAM): copy 0 is p's own; *args gets the engine's
// arguments for each: p.g with the copy's W and W map (every other
// setting setup() made stays p.g's).
static int cold_copies(const problem &p, std::vector<bf16 *> *w, std::vector<ip_gemm_args> *args) {
  const int64_t wbytes = p.s.k * p.ldw * (int64_t)sizeof(bf16);
  const int copies = (int)std::min<int64_t>(REPLAYS, std::max<int64_t>(2, (4 * g_l2_bytes + wbytes - 1) / wbytes));
  w->assign(1, p.wa);
  args->assign(1, p.g);
  for (int i = 1; i < copies; i++) {
    bf16 *c;
    CK(cudaMalloc(&c, (size_t)wbytes));
    CK(cudaMemcpyAsync(c, p.wa, (size_t)wbytes, cudaMemcpyDeviceToDevice, g_stream));
    ip_gemm_args maps, g = p.g;   // maps: the copy's W map, for p.g's tile width
    const char *why;
    if (ip_gemm_prepare(&maps, p.xa + p.s.xoff, p.ldx, c, p.ldw, p.s.m, p.s.n, p.s.k, &why) ||
        ip_gemm_set_tile_n(&maps, p.g.tile_n, &why)) {
      printf("Bail out! a copy of W: %s\n", why);
      exit(1);
    }
    g.w = c;
    g.tmap_w = maps.tmap_w;
    w->push_back(c);
    args->push_back(g);
  }
  return copies;
}

// Median microseconds per call of REPLAYS calls captured in one graph,
// cuBLAS and engine replayed alternately so that both see the same clocks.
static void time_pair(problem &p, int reps, double *us_blas, double *us_eng) {
  cudaGraph_t gb, ge;
  cudaGraphExec_t xb, xe;
  std::vector<bf16 *> w;
  std::vector<ip_gemm_args> args;
  const int copies = g_cold ? cold_copies(p, &w, &args) : 1;
  problem q = p;
  CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < REPLAYS; i++) {
    if (g_cold) q.wa = w[i % copies];
    launch_cublas(q, p.ref, p.s.n);
  }
  CK(cudaStreamEndCapture(g_stream, &gb));
  CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < REPLAYS; i++) {
    if (g_cold) q.g = args[i % copies];
    launch_engine(q, 0);
  }
  CK(cudaStreamEndCapture(g_stream, &ge));
  CK(cudaGraphInstantiate(&xb, gb, 0));
  CK(cudaGraphInstantiate(&xe, ge, 0));
  for (int i = 0; i < WARMUP_REPLAYS; i++) {
    CK(cudaGraphLaunch(xb, g_stream));
    CK(cudaGraphLaunch(xe, g_stream));
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> tb, te;
  for (int r = 0; r < reps; r++) {
    for (int side = 0; side < 2; side++) {
      float ms;
      CK(cudaEventRecord(e0, g_stream));
      CK(cudaGraphLaunch(side ? xe : xb, g_stream));
      CK(cudaEventRecord(e1, g_stream));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      (side ? te : tb).push_back(ms * 1000.0 / REPLAYS);
    }
  }
  std::sort(tb.begin(), tb.end());
  std::sort(te.begin(), te.end());
  *us_blas = tb[tb.size() / 2];
  *us_eng = te[te.size() / 2];
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(xb));
  CK(cudaGraphExecDestroy(xe));
  CK(cudaGraphDestroy(gb));
  CK(cudaGraphDestroy(ge));
  for (int i = 1; i < copies; i++) CK(cudaFree(w[i]));
}

// ---- deadlines -----------------------------------------------------------------

// --stall: a launch whose waits never end (lying_epi) must stop at its
// deadline with an error, not hang, and record where it stopped.  The
// trap loses the CUDA context: nothing runs on the GPU after it.
// --stall-split: the same for a split tile whose other k-range never
// comes (one block for a tile in two ranges: it waits at the meeting for
// the range it would run next, against the engine's contract).
static void check_stall(bool split) {
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, gemm_kernel<lying_epi>));
  if (!g_path || fa.numRegs != IP_GEMM_REGS_ENTRY) {
    printf("# SKIP the wgmma path's waits (this GPU runs the fallback, which has none)\n");
    return;
  }
  CK(cudaFuncSetAttribute(gemm_kernel<lying_epi>, cudaFuncAttributeMaxDynamicSharedMemorySize, IP_GEMM_SMEM));
  problem p;
  const shape s = split ? shape{IP_GEMM_TILE_M, IP_GEMM_TILE_N, 2 * IP_GEMM_TILE_K, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}
                        : shape{1024, 1024, 256, 0, 0, 0, 0, 0, 0};
  if (setup(p, s)) {
    ok(0, "stall: prepare");
    return;
  }
  CK(cudaStreamSynchronize(g_stream));
  p.g.stall_ns = STALL_TEST_NS;
  const int grid = split ? 1 : g_sms;
  if (split) {
    launch_engine(p, 0);   // plain_epi: a contract kept but for the blocks
  } else {
    lying_epi e;
    memset(&e, 0, sizeof e);
    e.y = p.ya;
    e.ldy = p.ldy;
    e.tiles_n = p.g.tiles_n;
    e.tile_n = p.g.tile_n;
    gemm_kernel<lying_epi><<<grid, IP_GEMM_THREADS, IP_GEMM_SMEM, g_stream>>>(p.g, e);
  }
  double waited;
  const cudaError_t st = wait_stream(STALL_TEST_LIMIT_S, &waited);
  ok(st != cudaErrorNotReady, "stall: a launch whose %s ends (after about %.1f s; deadline %.1f s)",
     split ? "split tile's one block waits for a k-range no block runs"
           : "consumers wait for loads never asked for",
     waited, STALL_TEST_NS * 1e-9);
  if (st == cudaErrorNotReady) {
    printf("Bail out! the GPU is stuck in a kernel: the deadline did not stop it\n");
    fflush(stdout);
    _exit(1);
  }
  ok(st != cudaSuccess, "stall: the launch reports an error (%s)", cudaGetErrorString(st));
  const volatile ip_gemm_stall *r = g_stall;
  ok(r->flag == 1, "stall: the wait that gave up is recorded (flag %d)", r->flag);
  if (split)   // the block's first wait to give up: its meeting, or its store warps' (waiting since its start)
    ok(r->what == IP_GEMM_WAIT_SPLIT || r->what == IP_GEMM_WAIT_STAGED,
       "stall: for the other k-ranges' partial sums (%d) or the consumers' outputs (%d): %d", IP_GEMM_WAIT_SPLIT,
       IP_GEMM_WAIT_STAGED, r->what);
  else
    ok(r->what == IP_GEMM_WAIT_FULL || r->what == IP_GEMM_WAIT_STAGED,
       "stall: for a stage's loads (%d) or the consumers' outputs (%d): %d", IP_GEMM_WAIT_FULL, IP_GEMM_WAIT_STAGED,
       r->what);
  ok(r->block >= 0 && r->block < grid && r->thread >= 0 && r->thread < IP_GEMM_THREADS,
     "stall: by block %d of %d, thread %d of %d", r->block, grid, r->thread, IP_GEMM_THREADS);
  ok(r->waited_ns >= STALL_TEST_NS && r->waited_ns < (uint64_t)STALL_TEST_LIMIT_S * 1000000000ull,
     "stall: after waiting %.3f s (deadline %.3f s)", r->waited_ns * 1e-9, STALL_TEST_NS * 1e-9);
  ok(r->m0 >= 0 && r->m0 < s.m && r->m0 % IP_GEMM_TILE_M == 0 && r->n0 >= 0 && r->n0 < s.n &&
         r->n0 % p.g.tile_n == 0,
     "stall: at a tile of the problem (rows %lld, columns %lld)", (long long)r->m0, (long long)r->n0);
}

// ---- main -------------------------------------------------------------------

// Host-side refusals: each bad input gets its named error, no GPU needed.
static void check_refusals(void) {
  ip_gemm_args g;
  const char *why = NULL;
  char *base = (char *)(uintptr_t)4096;  // never dereferenced: refused before any use
  int rc;
  rc = ip_gemm_prepare(&g, base, 64, base, 64, 0, 64, 64, &why);
  ok(rc == IP_GEMM_ESHAPE, "refuses M = 0 (%s)", why);
  rc = ip_gemm_prepare(&g, base, 128, base, 128, 16, 100, 64, &why);
  ok(rc == IP_GEMM_ESHAPE, "refuses N = 100 (%s)", why);
  rc = ip_gemm_prepare(&g, base, 128, base, 128, 16, 64, 96, &why);
  ok(rc == IP_GEMM_ESHAPE, "refuses K = 96 (%s)", why);
  rc = ip_gemm_prepare(&g, base, 68, base, 64, 16, 64, 64, &why);
  ok(rc == IP_GEMM_ESTRIDE, "refuses ldx = 68 (%s)", why);
  rc = ip_gemm_prepare(&g, base, 64, base, 32, 16, 64, 64, &why);
  ok(rc == IP_GEMM_ESTRIDE, "refuses ldw < N (%s)", why);
  rc = ip_gemm_prepare(&g, base + 2, 64, base, 64, 16, 64, 64, &why);
  ok(rc == IP_GEMM_EALIGN, "refuses x + 2 bytes (%s)", why);
}

int main(int argc, char **argv) {
  bool quick = false, bench = true, one = false, cases_too = true, stall = false, stall_split = false, decode = false;
  int reps = DEFAULT_REPS;
  const char *csv = NULL;
  shape only = {};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = true;
    else if (!strcmp(argv[i], "--no-bench")) bench = false;
    else if (!strcmp(argv[i], "--no-cases")) cases_too = false;
    else if (!strcmp(argv[i], "--stall")) stall = true;
    else if (!strcmp(argv[i], "--stall-split")) stall = stall_split = true;
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, atoi(argv[++i]));
    else if (!strcmp(argv[i], "--group") && i + 1 < argc) g_group = std::max(1, atoi(argv[++i]));
    else if (!strcmp(argv[i], "--split") && i + 1 < argc) g_split = std::max(1, atoi(argv[++i]));
    else if (!strcmp(argv[i], "--tile-n") && i + 1 < argc) g_tile_n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cold")) g_cold = true;
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
      const char *v = argv[++i];
      long long m, n, k;
      if (!strcmp(v, "all")) quick = false;
      else if (!strcmp(v, "decode")) quick = false, decode = true;
      else if (sscanf(v, "%lld,%lld,%lld", &m, &n, &k) == 3) {
        one = true;
        only.m = m;
        only.n = n;
        only.k = k;
      } else {
        fprintf(stderr, "--shapes takes all, decode or M,N,K\n");
        return 2;
      }
    } else {
      fprintf(stderr, "usage: %s [--quick | --shapes all|decode|M,N,K] [--csv PATH] [--reps R] [--group G] [--split S] "
              "[--tile-n T] [--cold] [--no-bench] [--no-cases] | --stall | --stall-split\n",
              argv[0]);
      return 2;
    }
  }
  check_refusals();
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("# SKIP no GPU\n");
    return tap_done();
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  g_l2_bytes = prop.l2CacheSize;
  cudaFuncAttributes fa;
  if (cudaFuncGetAttributes(&fa, gemm_kernel<plain_epi>) != cudaSuccess) {
    printf("# SKIP this binary has no code for %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    return tap_done();
  }
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  int *dpath;
  CK(cudaMalloc(&dpath, sizeof(int)));
  path_kernel<<<1, 1, 0, g_stream>>>(dpath);
  CK(cudaMemcpyAsync(&g_path, dpath, sizeof(int), cudaMemcpyDeviceToHost, g_stream));
  CK(cudaStreamSynchronize(g_stream));
  printf("# device %s, %d SMs, sm_%d%d; engine path: %s; kernel %d registers, %zu bytes local, smem %d\n", prop.name,
         g_sms, prop.major, prop.minor, g_path ? "wgmma sm_90a" : "fallback mma.sync", fa.numRegs,
         (size_t)fa.localSizeBytes, IP_GEMM_SMEM);
  if (g_path) {
    ok(fa.numRegs == IP_GEMM_REGS_ENTRY, "kernel holds %d registers at entry (setmaxnreg needs %d)", fa.numRegs,
       IP_GEMM_REGS_ENTRY);
    if (fa.numRegs != IP_GEMM_REGS_ENTRY) return tap_done();
  }
  CK(cudaFuncSetAttribute(gemm_kernel<plain_epi>, cudaFuncAttributeMaxDynamicSharedMemorySize, IP_GEMM_SMEM));
  CKB(cublasCreate(&g_blas));
  CKB(cublasSetStream(g_blas, g_stream));
  CK(cudaMalloc(&g_ws, CUBLAS_WS));
  CKB(cublasSetWorkspace(g_blas, g_ws, CUBLAS_WS));
  g_done_cap = 1 << 16;
  CK(cudaMalloc(&g_done_cnt, g_done_cap * sizeof(unsigned)));
  CK(cudaMalloc(&g_done_shape, g_done_cap * sizeof(int)));
  CK(cudaMalloc(&g_early, sizeof(unsigned)));
  CK(cudaMalloc(&g_stats, sizeof(cmp_stats)));
  CK(cudaHostAlloc((void **)&g_stall, sizeof *g_stall, cudaHostAllocMapped));
  memset(g_stall, 0, sizeof *g_stall);
  CK(cudaHostGetDevicePointer((void **)&g_stall_dev, g_stall, 0));
  if (stall) {
    check_stall(stall_split);
    return tap_done();   // the context is lost: nothing is freed
  }

  // Correctness shapes: {m, n, k, ldx_pad, ldw_pad, ldy_pad, xoff, yoff, grid}.
  const shape cases[] = {
      {1000, 4096, 1024, 0, 0, 0, 0, 0, 0},     // uneven M: last band 104 rows
      {77, 512, 256, 0, 0, 0, 0, 0, 0},         // one partial band
      {1, 64, 64, 0, 0, 0, 0, 0, 0},            // the smallest problem
      {300, 320, 192, 0, 0, 0, 0, 0, 0},        // an N tail (256 + 64), fewer k-blocks than stages
      {1000, 1024, 512, 0, 0, 40, 0, 8, 0},     // strided, offset output (16-byte aligned rows)
      {515, 768, 640, 72, 136, 3, 8, 1, 0},     // strided inputs, unaligned output rows
      {4096, 4096, 320, 0, 0, 0, 0, 0, 0},      // ~4 units a block, 5 k-blocks
      {2000, 1280, 448, 0, 0, 0, 0, 0, 7},      // 7 blocks loop over 80 units
      {2000, 1280, 448, 0, 0, 0, 0, 0, 7, 1},   // the same, bands of one tile row
      {2000, 1280, 448, 0, 0, 0, 0, 0, 7, 3},   // bands of 3 tile rows (16 = 5 x 3 + 1)
      {4096, 4096, 320, 0, 0, 0, 0, 0, 0, 1},   // bands of one tile row
      // Interleaved walks (ip_gemm_set_interleave): half the rows from the
      // middle spread over 8 bands; 3 of 4 spread; 7 of 10 bands of 3 with
      // a partial band left, from an odd start, 7 blocks.
      {4096, 1024, 256, 0, 0, 0, 0, 0, 0, 0, 16, 2048},
      {4096, 512, 128, 0, 0, 0, 0, 0, 0, 0, 8, 3072},
      {4000, 1280, 192, 0, 0, 0, 0, 0, 7, 3, 5, 3000},
      // Split K (ip_gemm_set_split): one tile row of 16 tiles in 8 k-ranges
      // on every SM; uneven M and N tails with 17 k-blocks in 3 uneven
      // ranges, strided and unaligned output rows; 7 blocks taking 24
      // units in 4 rounds; as many ranges as k-blocks (one each); 16
      // ranges on 2 tiles.  (The speed
      // shapes below run with ip_gemm_default_splits's, or --split's.)
      {128, 4096, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8},
      {200, 320, 1088, 8, 0, 3, 0, 1, 0, 0, 0, 0, 3},
      {256, 1536, 512, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2},
      {100, 512, 320, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5},
      {128, 512, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16},
      // Narrower tiles (ip_gemm_set_tile_n): the smallest problem; an N
      // tail of half a 128-column tile; strided inputs and unaligned
      // output rows at both widths; 7 blocks over 176 units in bands of
      // 3; split in 8 and in 3 uneven ranges with M and N tails.
      {1, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64},
      {300, 320, 192, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128},
      {515, 768, 640, 72, 136, 3, 8, 1, 0, 0, 0, 0, 0, 64},
      {515, 704, 640, 72, 136, 3, 8, 1, 0, 0, 0, 0, 0, 128},
      {2000, 704, 448, 0, 0, 0, 0, 0, 7, 3, 0, 0, 0, 64},
      {128, 4096, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 128},
      {200, 320, 1088, 8, 0, 3, 0, 1, 0, 0, 0, 0, 3, 64},
      // Short last tile rows, X's rows there loaded in one box of exactly
      // them (ip_gemm_args.tail_m0; so are most M above: 1000 a box of
      // 104, 2000 80, 200 72, 77 77, 300 44, 4000 32, 515 3, 1 1):
      // exactly one such row of 64 in 64 columns; 64 rows after a whole
      // tile row, 17 k-blocks in 3 ranges, strided inputs; one row after a
      // whole tile row, 256 columns; 17 rows, 11 k-blocks in 3 ranges of
      // 128 columns; 127 rows (the tallest box), strided inputs and an
      // unaligned output, 64 columns in 2 ranges.
      {64, 4096, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64},
      {192, 1024, 1088, 72, 136, 0, 8, 0, 0, 0, 0, 0, 3, 64},
      {129, 768, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256},
      {17, 1024, 704, 0, 0, 5, 0, 3, 0, 0, 0, 0, 3, 128},
      {127, 1024, 640, 72, 136, 3, 8, 1, 0, 0, 0, 0, 2, 64},
  };
  if (!one && cases_too)
    for (const shape &s : cases) {
      problem p;
      const int rc = setup(p, s);
      if (rc) {
        ok(0, "prepare M=%lld N=%lld K=%lld: %d", (long long)s.m, (long long)s.n, (long long)s.k, rc);
        release(p);
        continue;
      }
      check(p, "correct");
      if (&s == &cases[0]) check_checker(p);
      release(p);
    }
  if (!one && cases_too) check_idle_blocks();
  if (!one && cases_too)
    ok(!((volatile ip_gemm_stall *)g_stall)->flag, "no wait of the launches above gave up (deadline %.0f s)",
       CASE_STALL_NS * 1e-9);

  // Speed shapes: tokens x H x F.
  std::vector<shape> bs;
  if (one) {
    bs.push_back(only);
  } else if (quick) {
    bs = {{1024, 4096, 1024}, {4096, 8192, 4096}, {8192, 8192, 14336}, {128, 4096, 4096}};
  } else {
    std::vector<int64_t> ms = {1024, 2048, 4096, 8192};
    if (decode) ms = {64, 128, 256, 512};
    const int64_t ns[] = {4096, 8192}, ks[] = {1024, 2048, 4096, 14336};
    for (int64_t m : ms)
      for (int64_t n : ns)
        for (int64_t k : ks) bs.push_back({m, n, k});
  }
  for (shape &s : bs) s.splits = s.tile_n = -1;
  struct row {
    shape s;
    double tb, te, err;
    int64_t bg;   // the band group it ran with
    int splits;   // and k-ranges a tile
    int tile_n;   // and tile width
  };
  std::vector<row> rows;
  if (bench)
    for (const shape &s : bs) {
      problem p;
      const int rc = setup(p, s);
      if (rc) {
        ok(0, "prepare M=%lld N=%lld K=%lld: %d", (long long)s.m, (long long)s.n, (long long)s.k, rc);
        release(p);
        continue;
      }
      const check_result cr = check(p, "bench shape");
      double tb, te;
      time_pair(p, reps, &tb, &te);
      rows.push_back({s, tb, te, cr.max_rel, p.g.band_group, p.g.splits, p.g.tile_n});
      release(p);
    }
  if (!rows.empty()) {
    FILE *f = csv ? fopen(csv, "w") : NULL;
    if (csv && !f) printf("# cannot write %s\n", csv);
    if (f)
      fprintf(f, "device,band_group,M,N,K,cublas_us,cublas_tflops,engine_us,engine_tflops,ratio,max_rel_err,splits,"
              "tile_n\n");
    char bgs[128];
    if (g_group) snprintf(bgs, sizeof bgs, "%lld", (long long)g_group);
    else snprintf(bgs, sizeof bgs, "%d (%d from K = %d, a W of %lld MiB, or %lld MiB at N >= %d)", IP_GEMM_BAND_GROUP,
                  IP_GEMM_BAND_GROUP_DEEP, IP_GEMM_DEEP_K, IP_GEMM_DEEP_W_BYTES >> 20, IP_GEMM_DEEP_WIDE_W_BYTES >> 20,
                  IP_GEMM_DEEP_WIDE_N);
    printf("# %s, %d SMs, %s path, band_group %s; median of %d graph replays of %d calls%s\n", prop.name, g_sms,
           g_path ? "wgmma" : "fallback", bgs, reps, REPLAYS,
           g_cold ? "; W cold (a copy a call, the copies 4 x L2 or more, or one a call)" : "");
    printf("# %6s %6s %6s | %10s %8s | %10s %8s | %6s | %6s %6s\n", "M", "N", "K", "cuBLAS us", "TFLOP/s",
           "engine us", "TFLOP/s", "ratio", "splits", "tile_n");
    double worst = 1e9;
    for (const row &r : rows) {
      const double fl = 2.0 * r.s.m * r.s.n * r.s.k;
      const double fb = fl / r.tb * 1e-6, fe = fl / r.te * 1e-6;
      worst = std::min(worst, r.tb / r.te);
      printf("# %6lld %6lld %6lld | %10.1f %8.1f | %10.1f %8.1f | %6.3f | %6d %6d\n", (long long)r.s.m,
             (long long)r.s.n, (long long)r.s.k, r.tb, fb, r.te, fe, r.tb / r.te, r.splits, r.tile_n);
      if (f)
        fprintf(f, "%s,%lld,%lld,%lld,%lld,%.2f,%.1f,%.2f,%.1f,%.4f,%.3e,%d,%d\n", prop.name, (long long)r.bg,
                (long long)r.s.m, (long long)r.s.n, (long long)r.s.k, r.tb, fb, r.te, fe, r.tb / r.te, r.err, r.splits,
                r.tile_n);
    }
    printf("# lowest engine / cuBLAS throughput ratio: %.3f\n", worst);
    if (f) fclose(f);
  }
  CKB(cublasDestroy(g_blas));
  return tap_done();
}
