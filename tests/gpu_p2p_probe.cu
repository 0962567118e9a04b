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
  printf("1..%d\n", n_tests);
  return n_failed ? 1 : 0;
}
