// gpu_p2p_probe.cu -- the floor under the interpreter: raw NVLink/PCIe
// peer-to-peer copy bandwidth against the number of CUDA blocks, and the
// one-way latency of a flag between two GPUs, measured with the same
// memory operations the interpreter uses (16-byte loads and stores four
// deep, st.release.sys / ld.acquire.sys).  TAP output: each measurement is
// checked for sense (data arrived intact, numbers positive) and printed as
// a comment, so docs/PERFORMANCE.md can compare baton's per-block numbers
// with what the hardware gives one block.  Skips (TAP's 1..0) below 2 GPUs.
//   gpu_p2p_probe [MiB (default 256)]
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ip_mem.cuh"

static int n_tests, n_failed;
static void ok(int cond, const char *what) {
  n_tests++;
  if (!cond) n_failed++;
  printf("%s %d - %s\n", cond ? "ok" : "not ok", n_tests, what);
}

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      printf("not ok %d - %s: %s\n1..%d\n", n_tests + 1, #x, cudaGetErrorString(e_), n_tests + 1); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

// Each block copies its contiguous share of n 16-byte units, every thread
// loading four units before it stores any (the interpreter's loop).
__global__ void __launch_bounds__(512) copy_kernel(const uint4 *src, uint4 *dst, int64_t n) {
  int64_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  int64_t u = lo + threadIdx.x;
  const int64_t s = blockDim.x;
  for (; u + 3 * s < hi; u += 4 * s) {
    uint4 a = src[u], b = src[u + s], c = src[u + 2 * s], d = src[u + 3 * s];
    dst[u] = a; dst[u + s] = b; dst[u + 2 * s] = c; dst[u + 3 * s] = d;
  }
  for (; u < hi; u += s) dst[u] = src[u];
}

// As copy_kernel, two units loaded a thread at a time, each stored twice:
// into dst (the peer's) and into ldst (this GPU's), as an AllToAll of two
// ranks stores its peer's block and its own (which it loads apart).
__global__ void __launch_bounds__(512) copy2_kernel(const uint4 *src, uint4 *dst, uint4 *ldst, int64_t n) {
  int64_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  int64_t u = lo + threadIdx.x;
  const int64_t s = blockDim.x;
  for (; u + s < hi; u += 2 * s) {
    uint4 a = src[u], b = src[u + s];
    dst[u] = a; ldst[u] = a; dst[u + s] = b; ldst[u + s] = b;
  }
  for (; u < hi; u += s) dst[u] = ldst[u] = src[u];
}

__global__ void fill_kernel(uint32_t *p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = (uint32_t)i * 2654435761u + seed;
}

__global__ void check_kernel(const uint32_t *p, int64_t n, uint32_t seed, unsigned long long *bad) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    if (p[i] != (uint32_t)i * 2654435761u + seed) atomicAdd(bad, 1ull);
}

// Ping-pong: side 0 posts i+1 into the peer's word and waits for the peer
// to answer in its own word; side 1 answers each value.  Gives up after
// 5 s (*out = 0).  mine: local word polled; theirs: the peer's word.
__global__ void pingpong_kernel(uint64_t *mine, uint64_t *theirs, int side, int rounds, uint64_t *out) {
  uint64_t t0 = globaltimer(), limit = 5000000000ull;
  for (int i = 0; i < rounds; i++) {
    if (side == 0) st_release_sys(theirs, (uint64_t)i + 1);
    while (ld_acquire_sys(mine) < (uint64_t)i + 1)
      if (globaltimer() - t0 > limit) { *out = 0; return; }
    if (side == 1) st_release_sys(theirs, (uint64_t)i + 1);
  }
  *out = globaltimer() - t0;
}

// Does nothing: the floor of a kernel back to back with others.
__global__ void empty_kernel(int *p) {
  if (p && threadIdx.x == 1024) *p = 0;
}
// The same as a programmatic dependent: waits for the kernel before, and
// lets the next one in at once (as a short direct call does).
__global__ void empty_pdl_kernel(int *p) {
  pdl_wait();
  pdl_release();
  if (p && threadIdx.x == 1024) *p = 0;
}

// Launches kernel k<<<blocks, threads, 0, s>>>(args...), as a programmatic
// dependent of the kernel before it on s where pdl.
template <class... P, class... A>
static void launch(void (*k)(P...), int blocks, int threads, cudaStream_t s, int pdl, A... args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

// Instruction fetch: thread 0 runs eight pieces of straight-line code
// (about 1.5 KB each, distinct) twice; out[2 * slot] is the first pass's
// cycles, out[2 * slot + 1] the second's.  A first pass that costs more
// than the second in a kernel launched after others of its kind means the
// instruction caches start cold at every launch.
template <int K>
__device__ __noinline__ uint32_t code_piece(uint32_t x) {
#pragma unroll
  for (int i = 0; i < 32; i++) x = (x ^ (x >> (i % 7 + 1))) * (uint32_t)(2 * K + 2 * i + 1);
  return x;
}
__device__ __forceinline__ uint32_t code_pieces(uint32_t x) {
  x = code_piece<1>(x); x = code_piece<2>(x); x = code_piece<3>(x); x = code_piece<4>(x);
  x = code_piece<5>(x); x = code_piece<6>(x); x = code_piece<7>(x); x = code_piece<8>(x);
  return x;
}
__global__ void icache_kernel(uint32_t seed, int slot, uint64_t *out) {
  if (threadIdx.x || blockIdx.x) return;
  uint64_t t0 = clock64();
  uint32_t x = code_pieces(seed);
  uint64_t t1 = clock64();
  x = code_pieces(x);
  uint64_t t2 = clock64();
  out[2 * slot] = t1 - t0;
  out[2 * slot + 1] = t2 - t1 + (x == 0x12345678u);
}

// The interpreter's building blocks, timed in SM cycles by thread 0 of one
// block of 512 threads over `reps` repetitions each (out[k] = cycles per
// repetition of item k):
//   0 two block barriers           1 dependent loads, L2-resident word
//   2 ld.volatile 16 B, local      3 ld.acquire.sys, local word
//   4 st.relaxed.sys to the peer   5 st.release.sys to the peer
//   6 st.release.gpu, local        7 %globaltimer read
//   8 ld.volatile 16 B of the peer (over the link)
__global__ void __launch_bounds__(512) costs_kernel(uint64_t *local, uint64_t *peer, int reps, uint64_t *out) {
  uint64_t acc = 0;
  for (int item = 0; item < 9; item++) {
    __syncthreads();
    uint64_t t0 = clock64();
    for (int r = 0; r < reps; r++) {
      if (item == 0) { __syncthreads(); __syncthreads(); continue; }
      if (threadIdx.x != 0) continue;
      switch (item) {
      case 1: acc = *(volatile uint64_t *)(local + (acc & 1)); break;
      case 2: { uint32_t a, b, c, d;
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                     : "l"(local + 2 + (acc & 2)) : "memory");
        acc += a + b + c + d; } break;
      case 3: acc += ld_acquire_sys(local + 8 + (acc & 1)); break;
      case 4: asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(peer + 16), "l"((uint64_t)r) : "memory"); break;
      case 5: st_release_sys(peer + 17, (uint64_t)r); break;
      case 6: st_release_gpu(local + 18, (uint64_t)r); break;
      case 7: acc += globaltimer(); break;
      case 8: { uint32_t a, b, c, d;
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                     : "l"(peer + 20 + (acc & 2)) : "memory");
        acc += a + b + c + d; } break;
      }
    }
    if (threadIdx.x == 0) out[item] = (clock64() - t0) / reps;
  }
  if (threadIdx.x == 0) out[9] = acc;   // keeps the loads
}

// The floor of a one-shot exchange between two GPUs, as a direct LL
// program does it: thread 0 of block 0 stores one 16-byte LL line (two
// data words, the call's flag after each) into the peer's landing (two
// halves by the call's parity), polls its own landing until the peer's
// line of this call is there, and counts the call (every other block and
// thread leaves at once).  `pad` is carried only to see what a kernel's
// parameter size costs (the direct executor's was 3.3 KB, now 1.9 KB).
enum { OS_LOADS = 1, OS_CHAIN = 2, OS_PDL = 4 };   // oneshot_kernel's variants (MODE bits); OS_PDL: a
                                                   // programmatic dependent, as the direct executor's kernel
template <int PAD>
struct oneshot_args {
  uint4 *mine, *theirs;
  uint32_t *count;
  const uint4 *in;             // OS_LOADS: a value loaded before the put ...
  uint4 *out;                  // ... and the sum stored after the poll
  int32_t tab[64];             // OS_CHAIN: the put's target found by two lookups in the parameters
  uint4 *ptrs[8];
  char pad[PAD];
};
// The same with the lookups' tables behind the padding, PAD bytes into the
// parameters (where the direct executor's operations and links are).
template <int PAD>
struct oneshot_far_args {
  uint4 *mine, *theirs;
  uint32_t *count;
  const uint4 *in;
  uint4 *out;
  char pad[PAD];
  int32_t tab[64];
  uint4 *ptrs[8];
};
template <class A, int MODE>
__global__ void oneshot_kernel(const __grid_constant__ A a) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (MODE & OS_PDL) {
    pdl_wait();
    pdl_release();
  }
  const uint32_t seq = *(volatile uint32_t *)a.count + 1;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (MODE & OS_LOADS) v = __ldcg(a.in);
  uint4 *to = a.theirs;
  if (MODE & OS_CHAIN) to = a.ptrs[a.tab[a.tab[seq & 63] & 63] & 7];
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %2};" ::"l"(to + (seq & 1)), "r"(seq * 3u + v.x),
               "r"(seq), "r"(seq * 5u + v.y) : "memory");
  uint64_t t0 = 0;
  uint32_t x, f, y, g;
  for (int n = 0;; n++) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(f), "=r"(y), "=r"(g)
                 : "l"(a.mine + (seq & 1)) : "memory");
    if (f == seq && g == seq) break;
    if ((n & 1023) == 1023) {
      if (!t0) t0 = globaltimer();
      else if (globaltimer() - t0 > 2000000000ull) return;   // the peer never came: the caller sees it
    }
  }
  if (MODE & OS_LOADS) *a.out = make_uint4(x + v.x, y + v.y, v.z, v.w);
  *a.count = seq;
}

// Microseconds per one-shot of `blocks` x `threads`, 100 captured in a
// CUDA graph on each GPU, both graphs launched together; -1 when a call
// timed out.  land[g]: GPU g's landing (2 lines), count[g] its counter.
template <class A, int MODE>
static double oneshot_floor(int blocks, int threads, uint4 *const land[2], uint32_t *const count[2],
                            uint4 *const io[2]) {
  const int per = 100, reps = 20;
  cudaStream_t s[2];
  cudaGraphExec_t ge[2];
  cudaEvent_t e0, e1;
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaStreamCreateWithFlags(&s[g], cudaStreamNonBlocking));
    A a;
    memset(&a, 0, sizeof a);
    a.mine = land[g];
    a.theirs = land[1 - g];
    a.count = count[g];
    a.in = io[g];
    a.out = io[g] + 1;
    for (int k = 0; k < 8; k++) a.ptrs[k] = land[1 - g];
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(s[g], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per; i++) launch(oneshot_kernel<A, MODE>, blocks, threads, s[g], (MODE & OS_PDL) != 0, a);
    CK(cudaStreamEndCapture(s[g], &gr));
    CK(cudaGraphInstantiate(&ge[g], gr, 0));
    CK(cudaGraphDestroy(gr));
  }
  CK(cudaSetDevice(0));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int w = 0; w < 2; w++) {   // warm, then timed
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(e0, s[0]));
    for (int r = 0; r < reps; r++)
      for (int g = 0; g < 2; g++) {
        CK(cudaSetDevice(g));
        CK(cudaGraphLaunch(ge[g], s[g]));
      }
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(e1, s[0]));
    CK(cudaEventSynchronize(e1));
    CK(cudaSetDevice(1));
    CK(cudaStreamSynchronize(s[1]));
  }
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  uint32_t c[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaMemcpy(&c[g], count[g], sizeof c[g], cudaMemcpyDeviceToHost));
    CK(cudaGraphExecDestroy(ge[g]));
    CK(cudaStreamDestroy(s[g]));
  }
  CK(cudaSetDevice(0));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return c[0] == c[1] && c[0] % (2 * reps * per) == 0 ? ms * 1e3 / (per * reps) : -1;
}

// Microseconds per empty kernel of `blocks` x `threads`, run back to back
// on one stream (graph: 100 of them captured in one CUDA graph).
static double launch_floor(int blocks, int threads, int graph, int pdl) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int per = 100, reps = 20;
  cudaGraphExec_t ge = NULL;
  if (graph) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per; i++) launch(pdl ? empty_pdl_kernel : empty_kernel, blocks, threads, s, pdl, (int *)NULL);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
  }
  for (int w = 0; w < 2; w++) {   // warm, then timed
    CK(cudaEventRecord(e0, s));
    for (int r = 0; r < reps; r++) {
      if (graph) CK(cudaGraphLaunch(ge, s));
      else for (int i = 0; i < per; i++) launch(pdl ? empty_pdl_kernel : empty_kernel, blocks, threads, s, pdl, (int *)NULL);
    }
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
  }
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  if (ge) CK(cudaGraphExecDestroy(ge));
  CK(cudaStreamDestroy(s));
  return ms * 1e3 / (per * reps);
}

// GB/s a direction of GPU 0 and GPU 1 each copying n units into the
// other's memory at once, `blocks` blocks each, 5 launches; ldst (one
// buffer of n units per GPU, or NULL): each also copies the same units
// into its own memory in the same loop.
static double both_ways(int blocks, const uint4 *const *src, uint4 *const *dst, uint4 *const *ldst, int64_t n) {
  cudaStream_t st[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
  }
  const int reps = 5;
  double t0 = 0;
  for (int r = -1; r < reps; r++) {   // r = -1: warm
    if (r == 0) {
      for (int g = 0; g < 2; g++) {
        CK(cudaSetDevice(g));
        CK(cudaStreamSynchronize(st[g]));
      }
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      t0 = ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    for (int g = 0; g < 2; g++) {
      CK(cudaSetDevice(g));
      if (ldst) copy2_kernel<<<blocks, 512, 0, st[g]>>>(src[g], dst[1 - g], ldst[g], n);
      else copy_kernel<<<blocks, 512, 0, st[g]>>>(src[g], dst[1 - g], n);
    }
  }
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaStreamSynchronize(st[g]));
    CK(cudaStreamDestroy(st[g]));
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  CK(cudaSetDevice(0));
  return (double)n * 16 * reps / (ts.tv_sec + ts.tv_nsec * 1e-9 - t0) / 1e9;
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    printf("1..0 # SKIP needs 2 GPUs (found %d)\n", ndev);   // TAP's skip plan
    return 0;
  }
  int64_t mib = argc > 1 ? atoll(argv[1]) : 256;
  if (mib < 1) mib = 1;
  int64_t bytes = mib << 20, n = bytes / 16;
  int can = 0;
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    printf("1..0 # SKIP GPU 0 cannot reach GPU 1 directly\n");
    return 0;
  }
  CK(cudaSetDevice(1));
  cudaError_t pe = cudaDeviceEnablePeerAccess(0, 0);
  if (pe == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError(); else CK(pe);
  uint4 *dst;
  uint64_t *w1;
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMalloc(&w1, 256));
  CK(cudaMemset(w1, 0, 256));
  CK(cudaSetDevice(0));
  pe = cudaDeviceEnablePeerAccess(1, 0);
  if (pe == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError(); else CK(pe);
  uint4 *src;
  uint64_t *w0, *out;
  unsigned long long *bad;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&w0, 256));
  CK(cudaMemset(w0, 0, 256));
  CK(cudaMallocManaged(&out, 2 * sizeof *out));
  CK(cudaMallocManaged(&bad, sizeof *bad));
  fill_kernel<<<1024, 256>>>((uint32_t *)src, bytes / 4, 7);
  CK(cudaDeviceSynchronize());

  // Copy bandwidth GPU 0 -> GPU 1 (stores over the link), by block count.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  static const int blocks[] = {1, 2, 4, 8, 16, 32, 64, 132};
  double best = 0;
  char line[200];
  for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
    int b = blocks[k];
    copy_kernel<<<b, 512>>>(src, dst, n);   // warm
    CK(cudaEventRecord(e0));
    const int reps = 5;
    for (int r = 0; r < reps; r++) copy_kernel<<<b, 512>>>(src, dst, n);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    double gbs = (double)bytes * reps / (ms * 1e-3) / 1e9;
    if (gbs > best) best = gbs;
    printf("# p2p copy 0->1, %4d blocks x 512 threads, %lld MiB: %8.1f GB/s (%.2f GB/s per block)\n", b,
           (long long)mib, gbs, gbs / b);
  }
  *bad = 0;
  CK(cudaSetDevice(1));
  check_kernel<<<1024, 256>>>((const uint32_t *)dst, bytes / 4, 7, bad);
  CK(cudaDeviceSynchronize());
  snprintf(line, sizeof line, "p2p copy: every byte arrived (%llu wrong words), best %.1f GB/s", *bad, best);
  ok(*bad == 0 && best > 0, line);

  // Both ways at once: each GPU stores its buffer into the other's (an
  // AllToAll of two ranks, whose own block is a local copy beside it:
  // `local`).  Per direction, by block count.
  uint4 *src1, *dst0, *ldst[2];
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&src1, bytes));
  CK(cudaMalloc(&ldst[1], bytes));
  fill_kernel<<<1024, 256>>>((uint32_t *)src1, bytes / 4, 9);
  CK(cudaDeviceSynchronize());
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&dst0, bytes));
  CK(cudaMalloc(&ldst[0], bytes));
  const uint4 *const srcs[2] = {src, src1};
  uint4 *const dsts[2] = {dst0, dst};
  double best2 = 0;
  for (int local = 0; local < 2; local++)
    for (int b : {64, 132, 264}) {
      double gbs = both_ways(b, srcs, dsts, local ? ldst : NULL, n);
      if (!local && gbs > best2) best2 = gbs;
      printf("# p2p copy both ways at once%s, %4d blocks x 512 threads, %lld MiB each: %8.1f GB/s a direction\n",
             local ? ", each beside a local copy as large" : "", b, (long long)mib, gbs);
    }
  *bad = 0;
  check_kernel<<<1024, 256>>>((const uint32_t *)dst0, bytes / 4, 9, bad);
  CK(cudaDeviceSynchronize());
  snprintf(line, sizeof line, "p2p copy both ways: every byte arrived (%llu wrong words), best %.1f GB/s a direction",
           *bad, best2);
  ok(*bad == 0 && best2 > 0, line);

  // Flag latency: one thread per GPU, st.release.sys into the peer's word,
  // ld.acquire.sys polling its own.
  const int rounds = 20000;
  cudaStream_t s0, s1;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaSetDevice(1));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  pingpong_kernel<<<1, 1, 0, s1>>>(w1, w0, 1, rounds, out + 1);
  CK(cudaSetDevice(0));
  pingpong_kernel<<<1, 1, 0, s0>>>(w0, w1, 0, rounds, out);
  CK(cudaStreamSynchronize(s0));
  CK(cudaSetDevice(1));
  CK(cudaStreamSynchronize(s1));
  double oneway = out[0] ? out[0] / 1e3 / (2.0 * rounds) : 0;
  snprintf(line, sizeof line, "flag ping-pong between GPU 0 and 1: %d round trips finished, one way %.2f us",
           rounds, oneway);
  ok(out[0] > 0 && out[1] > 0, line);

  // The floor under any collective: empty kernels back to back on GPU 0.
  CK(cudaSetDevice(0));
  double lo = 1e9;
  static const int shapes[][2] = {{4, 128}, {4, 512}, {32, 512}, {128, 512}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
    for (int graph = 0; graph < 2; graph++)
      for (int pdl = 0; pdl < 2; pdl++) {
        double t = launch_floor(shapes[k][0], shapes[k][1], graph, pdl);
        if (t < lo) lo = t;
        printf("# empty kernel back to back, %3d blocks x %3d threads, %s%s: %.2f us per kernel\n", shapes[k][0],
               shapes[k][1], graph ? "graph " : "stream", pdl ? ", programmatic" : "", t);
      }
  snprintf(line, sizeof line, "launch floor measured: %.2f us per kernel at best", lo);
  ok(lo > 0 && lo < 1e6, line);

  // The floor of a one-shot: its latency against the grid and the size
  // of the kernel's parameters.
  uint4 *land[2];
  uint32_t *count[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaMalloc(&land[g], 2 * sizeof(uint4)));
    CK(cudaMemset(land[g], 0, 2 * sizeof(uint4)));
    CK(cudaMalloc(&count[g], sizeof(uint32_t)));
    CK(cudaMemset(count[g], 0, sizeof(uint32_t)));
  }
  uint4 *io[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaMalloc(&io[g], 2 * sizeof(uint4)));
    CK(cudaMemset(io[g], 0, 2 * sizeof(uint4)));
  }
  double one = 1e9;
  int all_done = 1;
  static const char *const mode_name[] = {"the exchange alone",
                                          "+ an input load and an output store",
                                          "+ two chained lookups in the parameters",
                                          "+ both",
                                          "+ both, the lookups 3.5 KB into the parameters",
                                          "+ both, a programmatic dependent",
                                          "+ both, 3.5 KB, a programmatic dependent"};
  typedef oneshot_args<8> near8;
  typedef oneshot_args<3500> near3k;
  typedef oneshot_far_args<3500> far3k;
  for (int mode = 0; mode < 7; mode++)
    for (int grid = 0; grid < 2; grid++) {
      int blocks = grid ? 128 : 1, threads = 512;
      double t = mode == 0   ? oneshot_floor<near8, 0>(blocks, threads, land, count, io)
                 : mode == 1 ? oneshot_floor<near8, OS_LOADS>(blocks, threads, land, count, io)
                 : mode == 2 ? oneshot_floor<near3k, OS_CHAIN>(blocks, threads, land, count, io)
                 : mode == 3 ? oneshot_floor<near3k, OS_LOADS | OS_CHAIN>(blocks, threads, land, count, io)
                 : mode == 4 ? oneshot_floor<far3k, OS_LOADS | OS_CHAIN>(blocks, threads, land, count, io)
                 : mode == 5 ? oneshot_floor<near8, OS_LOADS | OS_CHAIN | OS_PDL>(blocks, threads, land, count, io)
                             : oneshot_floor<far3k, OS_LOADS | OS_CHAIN | OS_PDL>(blocks, threads, land, count, io);
      all_done &= t > 0;
      if (mode < 2 && t > 0 && t < one) one = t;
      printf("# one-shot exchange in a graph, %3d blocks x %3d threads, %s: %.2f us per call\n", blocks, threads,
             mode_name[mode], t);
    }
  snprintf(line, sizeof line, "one-shot floor measured: %.2f us per call at best, every call completed", one);
  ok(all_done, line);

  // What the interpreter's operations cost one thread (GPU 0, peer GPU 1).
  CK(cudaSetDevice(0));
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  uint64_t *cyc;
  CK(cudaMallocManaged(&cyc, 16 * sizeof *cyc));
  costs_kernel<<<1, 512>>>(w0, w1, 2000, cyc);
  CK(cudaDeviceSynchronize());
  static const char *const what[] = {"two block barriers (512 threads)", "dependent load, L2-resident word",
                                     "ld.volatile 16 B, local", "ld.acquire.sys, local word",
                                     "st.relaxed.sys to the peer", "st.release.sys to the peer",
                                     "st.release.gpu, local", "%globaltimer read", "ld.volatile 16 B of the peer"};
  int sane = 1;
  for (int k = 0; k < 9; k++) {
    printf("# cost of %-34s %6llu cycles = %.3f us at %d MHz\n", what[k], (unsigned long long)cyc[k],
           cyc[k] / (khz / 1e3), khz / 1000);
    if (cyc[k] == 0 || cyc[k] > 10000000) sane = 0;
  }
  ok(sane, "interpreter building blocks timed (cycles each, above)");

  // Instruction fetch at a launch's start: the first launch, the third of
  // three on a stream, the last of 20 in a CUDA graph.
  uint64_t *ic;
  CK(cudaMallocManaged(&ic, 64 * sizeof *ic));
  for (int k = 0; k < 3; k++) icache_kernel<<<1, 512>>>(7u + k, k, ic);
  CK(cudaDeviceSynchronize());
  {
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < 20; k++) icache_kernel<<<128, 512, 0, s>>>(11u + k, 3 + (k == 19), ic);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < 3; r++) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
  }
  static const char *const when[] = {"first launch", "second launch", "third launch", "a graph's 19th launch",
                                     "a graph's 20th launch"};
  for (int k = 0; k < 5; k++)
    printf("# code run once, %-22s: first pass %6llu cycles, second %6llu\n", when[k],
           (unsigned long long)ic[2 * k], (unsigned long long)ic[2 * k + 1]);
  ok(ic[5] > 0 && ic[9] > 0, "instruction fetch at a launch's start timed (above)");
  CK(cudaFree(ic));
  printf("1..%d\n", n_tests);
  return n_failed ? 1 : 0;
}
