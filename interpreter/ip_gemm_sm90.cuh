// ip_gemm_sm90.cuh -- the PTX the GEMM tile engine's sm_90a path issues
// (ip_gemm.cuh): which device passes take that path (IP_GEMM_SM90A), the
// shared-memory layout TMA and wgmma agree on (128-byte swizzle), wgmma's
// matrix descriptors, and one wrapper each for mbarriers, TMA loads,
// wgmma and setmaxnreg.  Nothing here knows the engine's roles or ring.
#ifndef IP_GEMM_SM90_CUH
#define IP_GEMM_SM90_CUH

#include <stdint.h>

#include "ip_gemm.h"

// The wgmma path needs the sm_90a feature set; every other device pass
// (and the host pass, where none of this is compiled) takes the fallback.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IP_GEMM_SM90A 1
#else
#define IP_GEMM_SM90A 0
#endif

#if IP_GEMM_SM90A
namespace ipg90 {

constexpr int kWgmmaK = 16;                                      // K of one wgmma
constexpr int kSwzRowBytes = IP_GEMM_SWZ_COLS * 2;               // 128
constexpr int kSwzAtomBytes = 8 * kSwzRowBytes;                  // 1024: 8 rows, the swizzle's period
constexpr int kBoxBytes = IP_GEMM_SWZ_COLS * IP_GEMM_TILE_K * 2; // one 64 x 64 W box: 8 KiB
static_assert(IP_GEMM_TILE_K == IP_GEMM_SWZ_COLS, "an A row is one 128-byte swizzled row");

// wgmma shared-memory descriptor fields (PTX "matrix descriptor"):
// start address, leading and stride byte offsets, all >> 4; bits 62-63 =
// 1: 128-byte swizzle.
constexpr uint64_t kDescSwizzle128 = 1ull << 62;
constexpr uint32_t kDescAddrMask = 0x3ffff;
__host__ __device__ constexpr uint64_t desc_bits(uint32_t lbo, uint32_t sbo) {
  return ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | kDescSwizzle128;
}
// A (X) is K-major: 128-byte rows, 8-row groups 1024 bytes apart (SBO);
// LBO is unused with swizzling (1 by convention).
constexpr uint64_t kDescA = desc_bits(16, kSwzAtomBytes);
// B (W) is N-major (transpose bit set): LBO steps N by 64 columns (the
// next 64-column group: kb k-blocks' rows of one, where a stage holds kb
// k-blocks), SBO steps K by 8 rows (one swizzle atom).
__host__ __device__ constexpr uint64_t desc_b(int kb) { return desc_bits(kb * kBoxBytes, kSwzAtomBytes); }
// A descriptor's low word for shared address addr (the start address,
// addr >> 4 in bits 0-13, and bits' low word); desc_of adds the constant
// high word.  Offsets (>> 4) add to the low word alone: shared addresses
// stay below 2^18, so the start address never carries.  (64-bit
// descriptor arithmetic cost the consumers 5-15% of a narrow tile's time.)
__device__ __forceinline__ uint32_t desc_lo(uint32_t addr, uint64_t bits) {
  return (uint32_t)bits | ((addr & kDescAddrMask) >> 4);
}
__device__ __forceinline__ uint64_t desc_of(uint32_t lo, uint64_t bits) { return (bits & ~0xffffffffull) | lo; }
// Descriptor steps for one wgmma K (16): 32 bytes along an A row; 16 rows
// of B.
constexpr uint32_t kStepA = (kWgmmaK * 2) >> 4;
constexpr uint32_t kStepB = (kWgmmaK * kSwzRowBytes) >> 4;

// ---- mbarriers ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Whether the phase of parity `parity` has completed (a fresh barrier
// counts its phase before the first, parity 1, as complete); the thread
// may be suspended a while (the hardware's own limit) before it is told
// no.
__device__ __forceinline__ bool mbar_try(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// ---- TMA ----
__device__ __forceinline__ void tma_prefetch(const ip_tmap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}
// One box of `map` at element coordinates (c0 innermost, c1, c2) into
// shared memory at dst; completes `bar`'s transaction bytes.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const ip_tmap *map, int32_t c0, int32_t c1, int32_t c2,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// ---- wgmma ----
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the
// asynchronous wgmma boundary (the asm statements are ordered; the
// registers' uses are tied to this one).
template <int N>
__device__ __forceinline__ void acc_fence(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define IPG_F8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// The accumulators' operands, 32 at a time (a list of N / 2 is the first
// N / 64 of them, comma-separated).
#define IPG_D0 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define IPG_D1 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define IPG_D2 \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define IPG_D3 \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// d (64 x N f32 per warpgroup: N / 2 a thread) += or = A (64 x 16,
// K-major) B (16 x N, N-major), both from shared memory; accumulate = 0
// overwrites d.  One for each tile width (the accumulators' count picks
// it).
__device__ __forceinline__ void wgmma(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" IPG_D0 ", " IPG_D1 ", " IPG_D2 ", " IPG_D3
               "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
               : IPG_F8(0), IPG_F8(8), IPG_F8(16), IPG_F8(24), IPG_F8(32), IPG_F8(40), IPG_F8(48), IPG_F8(56),
                 IPG_F8(64), IPG_F8(72), IPG_F8(80), IPG_F8(88), IPG_F8(96), IPG_F8(104), IPG_F8(112), IPG_F8(120)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" IPG_D0 ", " IPG_D1
               "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
               : IPG_F8(0), IPG_F8(8), IPG_F8(16), IPG_F8(24), IPG_F8(32), IPG_F8(40), IPG_F8(48), IPG_F8(56)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" IPG_D0 "}, %32, %33, p, 1, 1, 0, 1;\n}\n"
               : IPG_F8(0), IPG_F8(8), IPG_F8(16), IPG_F8(24)
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}
#undef IPG_F8
#undef IPG_D0
#undef IPG_D1
#undef IPG_D2
#undef IPG_D3

template <uint32_t R>
__device__ __forceinline__ void regs_grow() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <uint32_t R>
__device__ __forceinline__ void regs_shrink() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

}  // namespace ipg90
#endif  // IP_GEMM_SM90A

#endif
