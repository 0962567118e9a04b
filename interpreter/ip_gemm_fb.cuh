// ip_gemm_fb.cuh -- the GEMM tile engine's fallback for GPUs other than
// sm_90a (ip_gemm.cuh includes it there, after what it uses; nothing else
// should): the same interface and results as the wgmma path, by mma.sync
// m16n8k16 and cp.async.  A split tile (ip_gemm_args, "Split K") is
// computed whole by its first k-range; the others do nothing.
#ifndef IP_GEMM_FB_CUH
#define IP_GEMM_FB_CUH
// ===========================================================================
// Fallback (any other target): mma.sync m16n8k16 + cp.async, 3 stages.
// A unit's 128 x tile_n tile is computed as 128 x 128 parts (one for a
// tile of 128 or 64 columns, whose columns past the tile are neither
// loaded nor stored); warps 0-7 compute (a 2 x 4 grid of 64 x 32 warp
// tiles), all 12 warps load.
// ===========================================================================
namespace ipgfb {

constexpr int kComputeWarps = 8;
constexpr int kWarpRows = 64, kWarpCols = 32;
constexpr int kWarpsN = IP_GEMM_FB_BN / kWarpCols;  // 4
constexpr int kMt = kWarpRows / 16, kNt = kWarpCols / 8;
constexpr int kAChunks = IP_GEMM_TILE_M * IP_GEMM_FB_BK / 8;  // 16-byte pieces of an A stage
constexpr int kBChunks = IP_GEMM_FB_BK * IP_GEMM_FB_BN / 8;
constexpr int kAStageBytes = IP_GEMM_TILE_M * IP_GEMM_FB_A_LD * 2;
static_assert(kComputeWarps * 32 <= IP_GEMM_THREADS, "compute warps fit the block");
static_assert((IP_GEMM_TILE_M / kWarpRows) * kWarpsN == kComputeWarps, "warp grid covers the half tile");

// 16 bytes from global src to shared dst; src_bytes 0 writes zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Every thread: its share of stage s's cp.async for k-block kb of the
// part at (m0, nh); rows past m and columns from nend on read as zeros.
__device__ __forceinline__ void load_stage(const ip_gemm_args &g, uint32_t base, int s, int64_t kb, int64_t m0,
                                           int64_t nh, int64_t nend) {
  const uint32_t a = base + s * IP_GEMM_FB_STAGE_BYTES, b = a + kAStageBytes;
  const __nv_bfloat16 *x = (const __nv_bfloat16 *)g.x, *w = (const __nv_bfloat16 *)g.w;
  for (int i = threadIdx.x; i < kAChunks + kBChunks; i += IP_GEMM_THREADS) {
    if (i < kAChunks) {
      const int r = i / (IP_GEMM_FB_BK / 8), c8 = i % (IP_GEMM_FB_BK / 8);
      const bool ok = m0 + r < g.m;
      const __nv_bfloat16 *src = ok ? x + (m0 + r) * g.ldx + kb * IP_GEMM_FB_BK + c8 * 8 : x;
      cp_async16(a + (r * IP_GEMM_FB_A_LD + c8 * 8) * 2, src, ok ? 16 : 0);
    } else {
      const int j = i - kAChunks, r = j / (IP_GEMM_FB_BN / 8), c8 = j % (IP_GEMM_FB_BN / 8);
      const bool ok = nh + c8 * 8 < nend;
      const __nv_bfloat16 *src = ok ? w + (kb * IP_GEMM_FB_BK + r) * g.ldw + nh + c8 * 8 : w;
      cp_async16(b + (r * IP_GEMM_FB_B_LD + c8 * 8) * 2, src, ok ? 16 : 0);
    }
  }
}

// Output pair (col, col + 1) of a row: one 4-byte store where aligned.
__device__ __forceinline__ void store2(__nv_bfloat16 *p, float lo, float hi) {
  const uint32_t v = ipg::pack_bf16(lo, hi);
  if (((uintptr_t)p & 3) == 0) {
    *(uint32_t *)p = v;
  } else {
    ((unsigned short *)p)[0] = (unsigned short)(v & 0xffff);
    ((unsigned short *)p)[1] = (unsigned short)(v >> 16);
  }
}

template <class Epi>
__device__ __forceinline__ void run(const ip_gemm_args &g, char *smem, int64_t unit0, int64_t unit_step, Epi &epi) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const uint32_t s0 = ipg::smem_u32(smem);
  const uint32_t base = (s0 + 127) & ~127u;
  const int64_t kt = g.k / IP_GEMM_FB_BK;
  for (int64_t u = unit0; u < g.units; u += unit_step) {
    int64_t m0, n0;
    int r;
    ip_gemm_unit_coords(g, ip_gemm_unit_tile(g, u, &r), &m0, &n0);
    if (r != 0) continue;   // a split tile: its first k-range computes all of K, the others nothing
    const bool skip = epi.skip(m0);
    const int64_t nend = n0 + g.tile_n < g.n ? n0 + g.tile_n : g.n;   // the tile's columns end
    for (int h = 0; h < IP_GEMM_TILE_N / IP_GEMM_FB_BN && !skip; h++) {
      const int64_t nh = n0 + h * IP_GEMM_FB_BN;
      if (nh >= nend) break;
      float acc[kMt][kNt][4];
#pragma unroll
      for (int i = 0; i < kMt; i++)
#pragma unroll
        for (int j = 0; j < kNt; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
      for (int s = 0; s < IP_GEMM_FB_STAGES - 1; s++) {
        if (s < kt) load_stage(g, base, s, s, m0, nh, nend);
        cp_commit();  // empty groups keep the count uniform
      }
      for (int64_t kb = 0; kb < kt; kb++) {
        cp_wait<IP_GEMM_FB_STAGES - 2>();
        __syncthreads();  // stage kb landed for all; stage kb - 1 is no longer read
        const int64_t next = kb + IP_GEMM_FB_STAGES - 1;
        if (next < kt) load_stage(g, base, (int)(next % IP_GEMM_FB_STAGES), next, m0, nh, nend);
        cp_commit();
        if (warp < kComputeWarps) {
          const uint32_t a = base + (int)(kb % IP_GEMM_FB_STAGES) * IP_GEMM_FB_STAGE_BYTES, b = a + kAStageBytes;
#pragma unroll
          for (int ks = 0; ks < IP_GEMM_FB_BK / 16; ks++) {
            uint32_t af[kMt][4], bf[kNt / 2][4];
#pragma unroll
            for (int mt = 0; mt < kMt; mt++)
              ldsm_x4(a + ((wm * kWarpRows + mt * 16 + lane % 16) * IP_GEMM_FB_A_LD + ks * 16 + lane / 16 * 8) * 2,
                      af[mt]);
#pragma unroll
            for (int np = 0; np < kNt / 2; np++)
              ldsm_x4_t(b + ((ks * 16 + lane % 16) * IP_GEMM_FB_B_LD + wn * kWarpCols + np * 16 + lane / 16 * 8) * 2,
                        bf[np]);
#pragma unroll
            for (int mt = 0; mt < kMt; mt++)
#pragma unroll
              for (int nt = 0; nt < kNt; nt++)
                mma16816(acc[mt][nt], af[mt], bf[nt / 2][(nt % 2) * 2], bf[nt / 2][(nt % 2) * 2 + 1]);
          }
        }
      }
      cp_wait<0>();
      __syncthreads();  // the next half's first loads overwrite stages still being read
      if (warp < kComputeWarps) {
#pragma unroll
        for (int mt = 0; mt < kMt; mt++)
#pragma unroll
          for (int hr = 0; hr < 2; hr++) {
            const int64_t row = m0 + wm * kWarpRows + mt * 16 + lane / 4 + hr * 8;
            if (row >= g.m) continue;
            __nv_bfloat16 *p = epi.row_ptr(row);
#pragma unroll
            for (int nt = 0; nt < kNt; nt++) {
              const int64_t col = nh + wn * kWarpCols + nt * 8 + (lane % 4) * 2;
              if (col < nend) store2(p + col, acc[mt][nt][hr * 2], acc[mt][nt][hr * 2 + 1]);
            }
          }
      }
    }
    if (!skip) __syncthreads();  // every store of the unit precedes done (the same for every thread)
    if (threadIdx.x < 32) {
      const int rows = ipg::unit_rows(g, m0), cols = ipg::unit_cols(g, n0, g.tile_n);
      if (epi.publishes()) __threadfence();
      epi.done(m0, n0, rows, cols, threadIdx.x);
    }
  }
  __syncthreads();
}

}  // namespace ipgfb

#endif
