// ip_compute.cuh -- the compute opcodes on the GPU: rows of y = A x for a
// matrix operand A and a vector operand x, accumulated in f32, written to
// shared memory in the call's type; the interpreter then stores them (or
// sends them) as it does any step's values.  Also the semaphores that
// steps waiting on a compute thread block's tiles count and test.
// Included by ip_gpu.cu (one translation unit).
#ifndef IP_COMPUTE_CUH
#define IP_COMPUTE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "ip_gpu.h"
#include "ip_mem.cuh"
#include "ip_reduce.cuh"

// Rows a warp takes at once (each 16-byte piece of x it loads is used for
// that many rows), and 16-byte pieces of each row a thread loads per round
// before it uses any:
// 4 x 1 keeps 32 KiB in flight per 512-thread block.
#ifndef IP_GEMV_ROWS
#define IP_GEMV_ROWS 4
#endif
#ifndef IP_GEMV_UNROLL
#define IP_GEMV_UNROLL 1
#endif

// A matrix element is read once: no room in L1 for it.
__device__ __forceinline__ uint4 ld_stream16(const void *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// The types compute opcodes take: f32, f16 and bf16.
template <int DT> struct ip_cfloat { static constexpr bool ok = DT == IP_F32 || DT == IP_F16 || DT == IP_BF16; };

// One element as float, and back (round to nearest even).
template <int DT>
__device__ __forceinline__ float ip_tof(const char *p) {
  if constexpr (DT == IP_F32) return *(const float *)p;
  else if constexpr (DT == IP_F16) return __half2float(*(const __half *)p);
  else return __bfloat162float(*(const __nv_bfloat16 *)p);
}
template <int DT>
__device__ __forceinline__ void ip_fromf(char *p, float v) {
  if constexpr (DT == IP_F32) *(float *)p = v;
  else if constexpr (DT == IP_F16) *(__half *)p = __float2half_rn(v);
  else *(__nv_bfloat16 *)p = __float2bfloat16_rn(v);
}

// The 16 / sizeof(type) elements of a 16-byte piece as floats.
template <int DT>
__device__ __forceinline__ void ip_unpack16(const uint4 &v, float *f) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (DT == IP_F32) {
#pragma unroll
    for (int i = 0; i < 4; i++) f[i] = __uint_as_float(w[i]);
  } else if constexpr (DT == IP_BF16) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
      float2 g = __half22float2(h);
      f[2 * i] = g.x;
      f[2 * i + 1] = g.y;
    }
  }
}

// out[0 .. n) = rows row0 .. row0+n-1 of A (row stride ld elements, K
// columns) times x, in the type DT, by every thread of the block; n >= 1;
// out is shared or global memory.  Warps take IP_GEMV_ROWS rows at a
// time; when there are fewer row groups than warps, the warps of a group
// (a power of two of them: shifts, not divisions, on the way in) split K
// among themselves and their partial sums meet in shared memory.  Every
// element of A is loaded once, in 16-byte pieces where A, x and ld allow,
// else one by one.  Ends with a barrier: out is complete.
template <int DT, int R = IP_GEMV_ROWS, int U = IP_GEMV_UNROLL>
__device__ __forceinline__ void ip_gemv(const char *A, int64_t ld, int64_t K, const char *x, int64_t row0, int n,
                                        char *out) {
  if constexpr (!ip_cfloat<DT>::ok) {
    return;   // the runtime refuses other types before launching
  } else {
    constexpr int ES = DT == IP_F32 ? 4 : 2, VE = 16 / ES;
    __shared__ float part_sum[R * (IP_GPU_MAX_THREADS / 32)];
    const int warps = blockDim.x >> 5, wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int groups = (n + R - 1) / R;
    int lk = 0;   // log2 of the warps per row group, splitting K
    while ((groups << (lk + 1)) <= warps) lk++;
    const int ks = 1 << lk, teams = warps >> lk;              // row groups in flight
    const bool vec = ((((uintptr_t)A | (uintptr_t)x) & 15) == 0) && ((ld * ES) & 15) == 0;
    const int64_t nv = vec ? K / VE : 0;                      // whole 16-byte pieces of a row
    const int part = wid & (ks - 1);
    const int64_t per = (nv + ks - 1) >> lk;
    const int64_t vlo = part * per < nv ? part * per : nv, vhi = vlo + per < nv ? vlo + per : nv;
    if (wid < teams * ks)
      for (int grp = wid >> lk; grp < groups; grp += teams) {
        const int r0 = grp * R, nr = n - r0 < R ? n - r0 : R;   // rows of this group (the rest repeat its last)
        const char *base = A + (row0 + r0) * ld * ES;
        const int64_t rs = ld * ES;
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.f;
        int v = (int)vlo + lane;
#pragma unroll 1
        for (; v + 32 * (U - 1) < (int)vhi; v += 32 * U) {   // U pieces of each row a thread, all loaded first
          uint4 xv[U], wv[U][R];
#pragma unroll
          for (int u = 0; u < U; u++) {
            xv[u] = __ldg((const uint4 *)x + v + 32 * u);
#pragma unroll
            for (int r = 0; r < R; r++) wv[u][r] = ld_stream16(base + (r < nr ? r : nr - 1) * rs + (int64_t)(v + 32 * u) * 16);
          }
#pragma unroll
          for (int u = 0; u < U; u++) {
            float xf[VE], wf[VE];
            ip_unpack16<DT>(xv[u], xf);
#pragma unroll
            for (int r = 0; r < R; r++) {
              ip_unpack16<DT>(wv[u][r], wf);
#pragma unroll
              for (int e = 0; e < VE; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
            }
          }
        }
        for (; v < (int)vhi; v += 32) {   // the last pieces, fewer than U
          float xf[VE], wf[VE];
          ip_unpack16<DT>(__ldg((const uint4 *)x + v), xf);
#pragma unroll
          for (int r = 0; r < R; r++) {
            ip_unpack16<DT>(ld_stream16(base + (r < nr ? r : nr - 1) * rs + (int64_t)v * 16), wf);
#pragma unroll
            for (int e = 0; e < VE; e++) acc[r] = fmaf(wf[e], xf[e], acc[r]);
          }
        }
        if (part == ks - 1)   // the elements past the whole pieces (all of them without 16-byte access)
          for (int64_t k = nv * VE + lane; k < K; k += 32) {
            const float xk = ip_tof<DT>(x + k * ES);
#pragma unroll
            for (int r = 0; r < R; r++) acc[r] = fmaf(ip_tof<DT>(base + (r < nr ? r : nr - 1) * rs + k * ES), xk, acc[r]);
          }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
          for (int off = 16; off; off >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
        if (lane == 0)
#pragma unroll
          for (int r = 0; r < R; r++)
            if (r < nr) {
              if (ks == 1) ip_fromf<DT>(out + (int64_t)(r0 + r) * ES, acc[r]);
              else part_sum[part * n + r0 + r] = acc[r];   // ks * n <= R * warps
            }
      }
    __syncthreads();
    if (ks > 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float s = 0.f;
        for (int p = 0; p < ks; p++) s += part_sum[p * n + i];
        ip_fromf<DT>(out + (int64_t)i * ES, s);
      }
      __syncthreads();
    }
  }
}

// out[0 .. n) = the values compute step st gives the input's elements
// row0 .. row0+n-1 (a row of its matrix each).  Ends with a barrier.
template <int DT, int R = IP_GEMV_ROWS, int U = IP_GEMV_UNROLL>
__device__ __forceinline__ void ip_compute_rows(const ip_gargs &a, const ip_gstep &st, int64_t row0, int n,
                                                char *out) {
  // gemv and gemvs: A x (the only compute opcodes so far)
  const int m = st.arg[0], v = st.arg[1];
  ip_gemv<DT, R, U>(a.opnd[m], a.opld[m], a.opcols[m], a.opnd[v], row0, n, out);
}

// The semaphore word of tile t under sem (ip_sem_pack), and the rows it
// counts when every tile of t's group is done, for a step of `cnt`
// chunks (every tile but the last of a chunk is a.tile rows).
__device__ __forceinline__ uint64_t *sem_word(const ip_gargs &a, int32_t sem, int64_t t, int cnt, uint64_t *need) {
  const int kind = ip_sem_kind(sem), param = ip_sem_param(sem);
  int64_t first, count, stride, rows = 0;
  ir_sync_span(kind, param, t, a.ntiles, &first, &count, &stride);
  for (int64_t k = 0; k < count; k++) {
    const int64_t u = first + k * stride, left = a.geom.cap - u * a.tile;
    rows += left < a.tile ? left : a.tile;
  }
  *need = (uint64_t)rows * (uint64_t)cnt;
  return a.sems + ip_sem_base(sem) + ir_sync_group(kind, param, t);
}

// Thread 0, after a barrier that follows the block's stores: counts `rows`
// rows of tile t done in generation gen.  A word still holding an older
// generation starts over.
__device__ __forceinline__ void sem_post(const ip_gargs &a, int32_t sem, int64_t t, uint64_t rows, uint64_t gen) {
  uint64_t need;
  unsigned long long *w = (unsigned long long *)sem_word(a, sem, t, 1, &need);
  __threadfence();   // the block's stores (ordered before this by the barrier) before the count
  unsigned long long old = *(volatile unsigned long long *)w;
  for (;;) {
    const unsigned long long nw = (old >> 32) == gen ? old + rows : (unsigned long long)gen << 32 | rows;
    const unsigned long long got = atomicCAS(w, old, nw);
    if (got == old) break;
    old = got;
  }
}

#endif
