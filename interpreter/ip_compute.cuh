// ip_compute.cuh -- the compute opcodes on the GPU: rows of y = A x for a
// matrix operand A and a vector operand x (gemv), and pooled rows of an
// embedding table (ebag, ebagm), accumulated in f32, written to the
// destination chunk or shared memory in the call's type; the interpreter
// then stores them (or sends them) as it does any step's values.  Also the semaphores that
// steps waiting on a compute thread block's tiles count and test.
// Included by the kernels' translation units (ip_gpu_kernel.cuh, ip_gpu_fdirect.cu).
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

// A matrix element is read once: no room in L1 for it.  Volatile keeps
// these loads in the order written in the PTX; whether ptxas then issues
// all of a loop's loads before the first use depends on the registers the
// kernel's bounds allow it (ip_gpu_fdirect.cu: with few, it issued each
// load just before its use, whatever the PTX order).
__device__ __forceinline__ uint4 ld_stream16(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
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

// Adds to this lane's acc[r] the products of row r of A (at base + r * rs
// bytes; rows from nr on repeat row nr - 1) with x over the 16-byte pieces
// v, v + 32, ... below vend.  U pieces of each row are loaded before any is
// used; the pieces left over, fewer than U, go U / 2 at a time, and so on,
// so that a short row costs one round trip, not one per piece.
template <int DT, int R, int U>
__device__ __forceinline__ void ip_gemv_span(const char *base, int64_t rs, const char *x, int nr, int64_t v,
                                             int64_t vend, float *acc) {
  constexpr int VE = DT == IP_F32 ? 4 : 8;
#pragma unroll 1
  for (; v + 32 * (U - 1) < vend; v += 32 * U) {
    uint4 xv[U], wv[U][R];
#pragma unroll
    for (int u = 0; u < U; u++) {
      xv[u] = __ldg((const uint4 *)x + v + 32 * u);
#pragma unroll
      for (int r = 0; r < R; r++) wv[u][r] = ld_stream16(base + (r < nr ? r : nr - 1) * rs + (v + 32 * u) * 16);
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
  if constexpr (U > 1) ip_gemv_span<DT, R, U / 2>(base, rs, x, nr, v, vend, acc);
}

// Adds to this lane's acc[r] row r's elements past the whole 16-byte
// pieces (from element k0 on; every element without 16-byte access).
template <int DT, int R>
__device__ __forceinline__ void ip_gemv_rest(const char *base, int64_t rs, const char *x, int nr, int64_t k0,
                                             int64_t K, int lane, float *acc) {
  constexpr int ES = DT == IP_F32 ? 4 : 2;
  for (int64_t k = k0 + lane; k < K; k += 32) {
    const float xk = ip_tof<DT>(x + k * ES);
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = fmaf(ip_tof<DT>(base + (r < nr ? r : nr - 1) * rs + k * ES), xk, acc[r]);
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
        ip_gemv_span<DT, R, U>(base, rs, x, nr, vlo + lane, vhi, acc);
        if (part == ks - 1) ip_gemv_rest<DT, R>(base, rs, x, nr, nv * VE, K, lane, acc);
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

// ---- embedding bag ---------------------------------------------------------

// Records bad operand data (ip_gerr: IP_BAD_INDEX / IP_BAD_OFFSET) once per
// call, from any thread: the first one met owns the record.  Nothing is
// aborted: the step skips the index, or clamps the offset, and goes on.
static __device__ __noinline__ void ip_bad_data(const ip_gargs &a, int what, int opnd, int64_t at, int64_t value) {
  if (atomicCAS((unsigned long long *)a.claim, 0ull, 1ull) != 0ull || *(volatile int32_t *)&a.err->flag) return;
  const int comm = a.ntbs * a.lanes, b = (int)blockIdx.x;
  const ip_gtb &tb = a.tbs[b < comm ? b : comm + (b - comm) / (a.cwidth > 0 ? a.cwidth : 1)];
  volatile ip_gerr *e = a.err;
  e->rank = a.rank;
  e->tb = tb.irtb;
  e->step = -1;
  e->what = what;
  e->peer = opnd;
  e->chan = tb.chan;
  e->depid = -1;
  e->tile = at;
  e->value = value;
  e->when = globaltimer();
  __threadfence_system();
  e->flag = 1;
  __threadfence_system();
}

// Element k of an index vector of type dt (IP_I64 or IP_I32).
__device__ __forceinline__ int64_t ip_ld_index(const char *p, int dt, int64_t k) {
  return dt == IP_I32 ? (int64_t)__ldg((const int *)p + k) : (int64_t)__ldg((const long long *)p + k);
}

// The operands of an embedding bag step.
struct ip_bag {
  const char *E, *idx, *off, *w;
  int64_t ld, D, R, L;
  int idt, odt, ie, oe;   // index types; operand numbers of the indices and offsets (for reports)
  bool mean;
};

// Bag b's index range [lo, hi), checked: offsets outside [0, L] or going
// back are clamped (and reported).
__device__ __forceinline__ void ip_bag_range(const ip_gargs &a, const ip_bag &g, int64_t b, int64_t *lo,
                                             int64_t *hi) {
  int64_t x = ip_ld_index(g.off, g.odt, b), y = ip_ld_index(g.off, g.odt, b + 1);
  if (x < 0 || x > g.L) { if ((threadIdx.x & 31) == 0) ip_bad_data(a, IP_BAD_OFFSET, g.oe, b, x); x = x < 0 ? 0 : g.L; }
  if (y < x || y > g.L) { if ((threadIdx.x & 31) == 0) ip_bad_data(a, IP_BAD_OFFSET, g.oe, b + 1, y); y = y < x ? x : g.L; }
  *lo = x;
  *hi = y;
}

// Row index k of the bag, or -1 when it is outside the table (reported).
__device__ __forceinline__ int64_t ip_bag_row(const ip_gargs &a, const ip_bag &g, int64_t k) {
  int64_t r = ip_ld_index(g.idx, g.idt, k);
  if (r < 0 || r >= g.R) {
    ip_bad_data(a, IP_BAD_INDEX, g.ie, k, r);
    return -1;
  }
  return r;
}

// One whole bag b (all D columns) by one warp, with 16-byte loads: the
// warp is G groups of P lanes (P a power of two covering a row's V
// pieces, V pieces of VE elements; VPL pieces per lane).  The bag's
// indices come 32 at a time, one per lane in one coalesced load, the next
// 32 loaded while this window's rows are; each group takes every G-th
// index of the window (handed over by shuffles), UN rows in flight before
// any is used; the groups' sums then meet by shuffles and group 0 stores.
template <int DT, int VPL>
__device__ __forceinline__ void ip_bag_vec(const ip_gargs &a, const ip_bag &g, int64_t b, int P, char *dst) {
  constexpr int ES = DT == IP_F32 ? 4 : 2, VE = 16 / ES, UN = 8 / VPL;
  const int lane = threadIdx.x & 31, grp = lane / P, sub = lane % P, G = 32 / P;
  const int V = (int)(g.D / VE);
  float acc[VPL][VE];
#pragma unroll
  for (int j = 0; j < VPL; j++)
#pragma unroll
    for (int e = 0; e < VE; e++) acc[j][e] = 0.f;
  int64_t lo, hi;
  ip_bag_range(a, g, b, &lo, &hi);
  const int64_t rs = g.ld * ES;
  int64_t nrow = lo + lane < hi ? ip_bag_row(a, g, lo + lane) : -1;   // the first window's
  float nw = nrow >= 0 && g.w ? ip_tof<DT>(g.w + (lo + lane) * ES) : 1.f;
  for (int64_t w0 = lo; w0 < hi; w0 += 32) {
    const int64_t myrow = nrow;
    const float myw = nw;
    const int n = hi - w0 < 32 ? (int)(hi - w0) : 32;
    if (w0 + 32 < hi) {   // the next window's indices, in flight behind this window's rows
      const int64_t k = w0 + 32 + lane;
      nrow = k < hi ? ip_bag_row(a, g, k) : -1;
      nw = nrow >= 0 && g.w ? ip_tof<DT>(g.w + k * ES) : 1.f;
    }
    for (int i0 = 0; i0 < n; i0 += G * UN) {   // warp-uniform bounds: every lane takes part in the shuffles
      int64_t row[UN];
      float wt[UN];
#pragma unroll
      for (int u = 0; u < UN; u++) {
        const int i = i0 + grp + u * G;
        const int64_t r = __shfl_sync(0xffffffffu, myrow, i & 31);
        wt[u] = __shfl_sync(0xffffffffu, myw, i & 31);
        row[u] = i < n ? r : -1;
      }
      uint4 v[UN][VPL];
#pragma unroll
      for (int u = 0; u < UN; u++)
#pragma unroll
        for (int j = 0; j < VPL; j++) {
          const int p = sub + j * P;
          v[u][j] = row[u] >= 0 && p < V ? __ldg((const uint4 *)(g.E + row[u] * rs) + p) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
      for (int u = 0; u < UN; u++)
#pragma unroll
        for (int j = 0; j < VPL; j++) {
          float f[VE];
          ip_unpack16<DT>(v[u][j], f);
#pragma unroll
          for (int e = 0; e < VE; e++) acc[j][e] = fmaf(f[e], wt[u], acc[j][e]);
        }
    }
  }
#pragma unroll
  for (int j = 0; j < VPL; j++)
#pragma unroll
    for (int e = 0; e < VE; e++) {
      float x = acc[j][e];
      for (int o = P; o < 32; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
      acc[j][e] = g.mean ? (hi > lo ? x / (float)(hi - lo) : 0.f) : x;
    }
  if (grp == 0) {
    const bool al = ((uintptr_t)dst & 15) == 0;
#pragma unroll
    for (int j = 0; j < VPL; j++) {
      const int p = sub + j * P;
      if (p >= V) continue;
      char *o = dst + (int64_t)p * 16;
      if (al && ES == 4) {
        *(float4 *)o = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
      } else {
#pragma unroll
        for (int e = 0; e < VE; e++) ip_fromf<DT>(o + e * ES, acc[j][e]);
      }
    }
  }
}

// Columns [c0, c1) of bag b by one warp, element by element (a bag cut by
// the piece's ends, rows too wide or not 16-byte aligned).
template <int DT>
__device__ __forceinline__ void ip_bag_cols(const ip_gargs &a, const ip_bag &g, int64_t b, int64_t c0, int64_t c1,
                                            char *dst) {
  constexpr int ES = DT == IP_F32 ? 4 : 2;
  int64_t lo, hi;
  ip_bag_range(a, g, b, &lo, &hi);
  for (int64_t c = c0 + (threadIdx.x & 31); c < c1; c += 32) {
    float acc = 0.f;
    for (int64_t k = lo; k < hi; k++) {
      const int64_t r = ip_bag_row(a, g, k);
      if (r < 0) continue;
      acc = fmaf(ip_tof<DT>(g.E + (r * g.ld + c) * ES), g.w ? ip_tof<DT>(g.w + k * ES) : 1.f, acc);
    }
    if (g.mean) acc = hi > lo ? acc / (float)(hi - lo) : 0.f;
    ip_fromf<DT>(dst + (c - c0) * ES, acc);
  }
}

// Where a piece of computed values goes when it is not contiguous (a
// direct AllToAll, ip_gargs.direct: the owner's output, interleaved):
// element i of the piece is element x0 + i of output chunk oc at base.
struct ip_place {
  char *base;
  int64_t oc, x0;
};

// out[0 .. n) = elements row0 .. row0+n-1 of an embedding bag's input
// (element e: column e mod D of bag e div D); with pl, element i goes
// where pl places it instead (a bag's columns stay together: the runtime
// makes the output's rows whole bags).  Warps take the bags the piece
// touches one at a time from a counter (bags differ in size): the
// block's own in shared memory, or with gctr one that every block taking
// part shares (zero at the start of the call; the caller sets it back);
// whole aligned bags go by 16-byte loads, cut ones column by column.
// Ends with a barrier, but with gctr: each warp leaves when the counter
// runs out, and the caller puts a barrier before anything that needs the
// block's stores done (a warp then starts the next step's bags while the
// others finish their last, where a barrier left it idle for up to a
// bag's time each step).
template <int DT>
__device__ __forceinline__ void ip_ebag(const ip_gargs &a, const ip_gstep &st, int64_t row0, int n, char *out,
                                        const ip_place *pl = nullptr, unsigned long long *gctr = nullptr) {
  if constexpr (!ip_cfloat<DT>::ok) {
    return;
  } else {
    constexpr int ES = DT == IP_F32 ? 4 : 2, VE = 16 / ES;
    __shared__ int64_t next_bag;
    ip_bag g;
    const int m = st.arg[0], ix = st.arg[1], of = st.arg[2], w = st.arg[3];
    g.E = a.opnd[m]; g.ld = a.opld[m]; g.D = a.opcols[m]; g.R = a.oprows[m];
    g.idx = a.opnd[ix]; g.idt = a.opdt[ix]; g.L = a.oprows[ix]; g.ie = ix;
    g.off = a.opnd[of]; g.odt = a.opdt[of]; g.oe = of;
    g.w = w >= 0 ? a.opnd[w] : nullptr;
    g.mean = st.op == IR_OP_EBAGM;
    const int64_t b0 = row0 / g.D, b1 = (row0 + n - 1) / g.D;
    const int V = (int)(g.D / VE);
    const bool vec = (g.D % VE) == 0 && V <= 128 && ((uintptr_t)g.E & 15) == 0 && ((g.ld * ES) & 15) == 0;
    int P = 1;
    while (P < V && P < 32) P <<= 1;
    if (!gctr) {
      if (threadIdx.x == 0) next_bag = b0;
      __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    for (;;) {
      int64_t b = 0;
      if (lane == 0) b = gctr ? b0 + (int64_t)atomicAdd(gctr, 1ull) : atomicAdd((unsigned long long *)&next_bag, 1ull);
      b = __shfl_sync(0xffffffffu, b, 0);
      if (b > b1) break;
      const int64_t c0 = b == b0 ? row0 - b * g.D : 0, c1 = b == b1 ? row0 + n - b * g.D : g.D;
      const int64_t i = b * g.D + c0 - row0;   // the bag's first element in the piece
      char *dst = pl ? pl->base + ir_geom_at(&a.geom, IR_BUF_OUTPUT, pl->oc, pl->x0 + i) * ES : out + i * ES;
      if (vec && c0 == 0 && c1 == g.D) {
        if (V <= 32) ip_bag_vec<DT, 1>(a, g, b, P, dst);
        else if (V <= 64) ip_bag_vec<DT, 2>(a, g, b, P, dst);
        else ip_bag_vec<DT, 4>(a, g, b, P, dst);
      } else {
        ip_bag_cols<DT>(a, g, b, c0, c1, dst);
      }
    }
    if (!gctr) __syncthreads();
  }
}

// out[0 .. n) = the values compute step st gives the input's elements
// row0 .. row0+n-1.  Ends with a barrier.  BAG: the launch has embedding
// bags (ip_gargs.cbag); without, the code holds the GEMV alone (the
// embedding bag's registers made the GEMV's compute blocks spill and
// cost it 3-4 us a call).
template <int DT, bool BAG, int R = IP_GEMV_ROWS, int U = IP_GEMV_UNROLL>
__device__ __forceinline__ void ip_compute_rows(const ip_gargs &a, const ip_gstep &st, int64_t row0, int n,
                                                char *out) {
  if constexpr (BAG) {
    if (st.op == IR_OP_EBAG || st.op == IR_OP_EBAGM) {
      ip_ebag<DT>(a, st, row0, n, out);
      return;
    }
  }
  // gemv and gemvs: A x
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
// rows of tile t done in generation gen (sem_post; sem_add: in the
// semaphore word itself).  A word still holding an older generation
// starts over.
__device__ __forceinline__ void sem_add(uint64_t *word, uint64_t rows, uint64_t gen) {
  unsigned long long *w = (unsigned long long *)word;
  const unsigned long long tag = IP_GEN_TAG(gen);   // as the waiter compares it
  __threadfence();   // the block's stores (ordered before this by the barrier) before the count
  unsigned long long old = *(volatile unsigned long long *)w;
  for (;;) {
    const unsigned long long nw = (old >> 32) == tag ? old + rows : tag << 32 | rows;
    const unsigned long long got = atomicCAS(w, old, nw);
    if (got == old) break;
    old = got;
  }
}
__device__ __forceinline__ void sem_post(const ip_gargs &a, int32_t sem, int64_t t, uint64_t rows, uint64_t gen) {
  uint64_t need;
  sem_add(sem_word(a, sem, t, 1, &need), rows, gen);
}

#endif
