// ip_gemm.cuh -- the bf16 GEMM tile engine, device side: Y = X W over the
// output tiles ("units") a block is given, for a persistent kernel whose
// every block runs IP_GEMM_THREADS threads.  On sm_90a (the PTX in
// ip_gemm_sm90.cuh): a warp-specialized mainloop (one TMA producer
// warpgroup, two wgmma consumer warpgroups, a ring of shared-memory
// stages under full/empty mbarriers, 128-byte swizzle, setmaxnreg) and
// an epilogue that overlaps the next unit's mainloop: the consumers hand
// their outputs over in shared memory and the producer warpgroup's three
// other warps store them; tiles 256, 128 or 64 columns wide
// (ip_gemm_args.tile_n: narrower where the widest are too few for the
// GPU), and split over several blocks along K where even those are too
// few (ip_gemm_args, "Split K").  On any other target: an mma.sync +
// cp.async fallback with the same interface and results (ip_gemm_fb.cuh).
//
// Interface (ip_gemm.h describes the problem, ip_gemm_prepare fills it):
//
//   template <class Epi> __device__ void ip_gemm_run(const ip_gemm_args &g, char *smem,
//                                                    int64_t unit0, int64_t unit_step, Epi &epi);
//
// Every thread of the block calls it, with the same arguments.  It runs
// units unit0, unit0 + unit_step, ... < g.units; ip_gemm_unit_tile and
// ip_gemm_unit_coords give each unit's tile.  Where g.splits > 1 a unit
// is one k-range of a tile and the blocks of a tile's ranges meet
// (ip_gemm_args, "Split K"): unit_step must be g.splits or more, every
// block of the call must run at once, and none may wait, before or
// inside the engine, for anything the GEMM's outputs release.  g must
// live in kernel parameter space (a __grid_constant__ parameter or a
// member of one): TMA reads the tensor maps from there.  smem:
// IP_GEMM_SMEM bytes of dynamic shared memory
// (IP_GEMM_SMEM_FALLBACK off Hopper), any alignment of 16 or more; a
// generic pointer is fine (one aligned through an integer, say): the
// engine addresses that memory as shared (ipg::as_shared).
//
// Epi, the epilogue functor (each thread has its own reference):
//   __device__ __nv_bfloat16 *row_ptr(int64_t row);
//       where output row `row` (0 <= row < g.m) starts: element (row, col)
//       is stored at row_ptr(row)[col].  Called by many threads, once or
//       more per row per tile, so it must be cheap and return the same
//       pointer every time.  2-byte alignment suffices; rows whose
//       pointer is 16-byte aligned get 16-byte stores (plain st.global:
//       local or peer memory alike).  Rows >= g.m are never asked for.
//   __device__ void done(int64_t m0, int64_t n0, int rows, int cols, int lane);
//       called by the 32 threads of one warp per tile (lane 0 .. 31: the
//       epilogue may spread its work, such as counting the tile in
//       several semaphores, over them; on sm_90a that warp, like the
//       ones calling row_ptr, runs with IP_GEMM_REGS_PRODUCER registers,
//       so both must stay small), after every thread of the block
//       has stored that tile's rows x cols outputs (rows = min(128, m -
//       m0), cols = min(g.tile_n, n - n0)).
//   __device__ bool publishes() const;
//       whether done() tells another thread that a tile is in place (a
//       flag it writes for someone to read): only then does the engine
//       fence before calling it (a fence after the block's last unit
//       cost a tiny call 0.1-0.4 us on an H200).  Cheap; the same
//       answer throughout the call.
//   __device__ bool skip(int64_t m0) const;
//       whether the units of tile row m0 need no computing (rows the
//       caller knows to be padding): the engine then loads, multiplies
//       and stores nothing for them and calls done() at once (the rows'
//       outputs are left as they were).  Called by the threads that walk
//       the units, once per unit each: it must be cheap and give the same
//       answer for m0 throughout the call.
//
// The kernels before: with g.deps_wait set, the producer warp waits for
// them (pdl_wait) before its first load; every global access of the engine
// follows that wait (the consumers' and store warps' through the stages'
// mbarriers), so the block's set-up (mbarriers, registers, the first unit)
// overlaps their end.
//
// Deadlines: with g.stall_ns set, a wait inside the engine that lasts
// that long is recorded in *g.stall and stops the kernel with a trap
// (ipg90::stall says why a trap).  ip_gemm_prepare sets none.
//
// Ordering guaranteed at done(): every store of the tile, by any thread of
// the block, precedes a barrier among the storing threads, after which
// each calling thread executes __threadfence() (where epi.publishes()) and
// then calls done.  The fence
// is cumulative: a flag done() writes at GPU scope (relaxed is enough
// after the fence) is seen by any thread of this GPU only with the tile's
// data.  For an observer on another GPU or the host, done() must publish
// with system scope (__threadfence_system() or st.release.sys; both
// cumulative over the barrier).  done() must not wait for other threads
// of the block: they go on with the next unit.  It may use no barrier.
//
// Barriers: the engine uses __syncthreads (hardware barrier 0) at entry
// and exit, and named barriers IP_GEMM_BAR_FIRST .. IP_GEMM_BAR_FIRST + 4
// in between.  On return every thread has left the engine (its stores are
// issued, in program order before whatever the caller stores next) and
// registers are back to IP_GEMM_REGS_ENTRY.  On sm_90a IP_GEMM_SMEM still
// holds the engine's mbarriers: the block ends after the engine, as every
// kernel that runs it does, or it invalidates them (mbarrier.inval)
// before using that memory again (doing so for every call cost a
// one-unit call 0.35 us on an H200).
#ifndef IP_GEMM_CUH
#define IP_GEMM_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "ip_gemm.h"
#include "ip_mem.cuh"
#include "ip_gemm_sm90.cuh"

// Named barriers the engine uses on sm_90a: the store warps', then each
// consumer warpgroup's, then the one that orders the register hand-back
// (ipg90::run).
#define IP_GEMM_BAR_FIRST 1

// Which path this device pass compiled: 1 wgmma (sm_90a), 0 the fallback.
__device__ __forceinline__ int ip_gemm_path() { return IP_GEMM_SM90A; }

// Unit u's tile (0 .. g.tiles - 1) and k-range (0 .. g.splits - 1):
// the g.splits units of a tile are consecutive (ip_gemm_args, "Split K").
__device__ __forceinline__ int64_t ip_gemm_unit_tile(const ip_gemm_args &g, int64_t u, int *range) {
  if (g.splits <= 1) {
    *range = 0;
    return u;
  }
  const int32_t t = ip_fastdiv_div((int32_t)u, g.div_splits);   // units < 2^31 (ip_gemm_set_split)
  *range = (int32_t)u - t * g.splits;
  return t;
}

// Tile u's output: rows m0 .. m0 + IP_GEMM_TILE_M - 1, columns n0 ..
// n0 + g.tile_n - 1 (clipped to m, n).  Row-band-major: all N tiles
// of one band of rows, then the next band, where a band is g.band_group
// tile rows (walked column by column: the G tiles of one column, then the
// next column).  Bands of one tile row (band_group 1) leave the ~132 units
// in flight spread over every W column: with W larger than L2 (8192 x
// 14336) each wave reads all of W from DRAM, measured 0.71-0.77x cuBLAS
// on an H100; bands of 2-8 tile rows share each W tile among more units
// in flight (1.02-1.04x there, the same elsewhere).  ip_gemm_prepare sets
// IP_GEMM_BAND_GROUP.  The walk starts at tile row g.band0 and wraps
// around; under ip_gemm_set_interleave its first g.inter_n bands come in
// ip_gemm_inter_band's order.  The one place that maps units to tiles:
// reorder bands here.
// In 32-bit arithmetic with the host's divisors where the units allow
// (g.fast32): every thread that walks the units runs this per unit, the
// producer before its first load (64-bit divisions there took 0.38 us of
// a one-unit call on an H200).
__device__ __forceinline__ void ip_gemm_unit_coords(const ip_gemm_args &g, int64_t u, int64_t *m0, int64_t *n0) {
  int64_t band, col;
  if (g.fast32) {
    const int32_t v = (int32_t)u, tn = (int32_t)g.tiles_n, bg = (int32_t)g.band_group;
    int32_t b, c;
    if (bg <= 1) {
      b = ip_fastdiv_div(v, g.div_tiles_n);
      c = v - b * tn;
    } else {
      int32_t grp = ip_fastdiv_div(v, g.div_group);
      const int32_t r = v - grp * bg * tn;
      if (grp < g.inter_n) grp = ip_gemm_inter_band(grp, g.inter_n, g.inter_first, g.div_inter);
      const int32_t left = (int32_t)g.tiles_m - grp * bg;
      const int32_t bands = left < bg ? left : bg;
      c = ip_fastdiv_div(r, left < bg ? g.div_last : g.div_band);
      b = grp * bg + (r - c * bands);
    }
    band = b;
    col = c;
  } else if (g.band_group <= 1) {
    band = u / g.tiles_n;
    col = u - band * g.tiles_n;
  } else {
    const int64_t per_group = g.band_group * g.tiles_n, grp = u / per_group, r = u - grp * per_group;
    const int64_t left = g.tiles_m - grp * g.band_group;
    const int64_t bands = left < g.band_group ? left : g.band_group;
    col = r / bands;
    band = grp * g.band_group + (r - col * bands);
  }
  band += g.band0;
  if (band >= g.tiles_m) band -= g.tiles_m;
  *m0 = band * IP_GEMM_TILE_M;
  *n0 = col * g.tile_n;
}

namespace ipg {

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// The caller's pointer p into dynamic shared memory, as one the compiler
// knows to be shared (an offset from this declaration), so that loads and
// stores through it are ld/st.shared.  A pointer that went through an
// integer (aligned by the caller, say) is a generic one to the compiler:
// the interpreter's kernel then staged every output through generic
// stores and loads, and ran 4 % more instructions than the engine alone.
__device__ __forceinline__ char *as_shared(char *p) {
  extern __shared__ __align__(16) char ipg_dynamic_smem[];
  return ipg_dynamic_smem + (smem_u32(p) - smem_u32(ipg_dynamic_smem));
}

__device__ __forceinline__ void bar_named(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}
// Counts the calling warp in named barrier id without waiting for it.
__device__ __forceinline__ void bar_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

// 16 bytes of output at p (any 2-byte alignment): one st.global.v4 where
// p is 16-byte aligned, else eight 2-byte stores.
__device__ __forceinline__ void store16(__nv_bfloat16 *p, uint4 v) {
  if (((uintptr_t)p & 15) == 0) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    unsigned short *q = (unsigned short *)p;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      q[2 * i] = (unsigned short)(w[i] & 0xffff);
      q[2 * i + 1] = (unsigned short)(w[i] >> 16);
    }
  }
}

// Two f32 as packed bf16 (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *(uint32_t *)&h;
}

// The rows and columns of the unit whose tile starts at (m0, n0): the
// tile's (tn columns wide), clipped to m and n.
__device__ __forceinline__ int unit_rows(const ip_gemm_args &g, int64_t m0) {
  return g.m - m0 < IP_GEMM_TILE_M ? (int)(g.m - m0) : IP_GEMM_TILE_M;
}
__device__ __forceinline__ int unit_cols(const ip_gemm_args &g, int64_t n0, int tn) {
  return g.n - n0 < tn ? (int)(g.n - n0) : tn;
}

// Unit u's tile and k-range (ip_gemm_unit_tile), and a range's bounds,
// for a walk that splits tiles (kSplit) or not.  Unsplit, the range is 0
// and its bounds the tile's, known to the compiler: reading g.splits and
// working the bounds out per unit cost the unsplit engine 1-3% (an H200,
// 1,024-8,192 tokens at K = 1024-2048), so the engine runs as one of two
// instances (ip_gemm_run).
template <bool kSplit>
__device__ __forceinline__ int64_t unit_tile(const ip_gemm_args &g, int64_t u, int *r) {
  if (!kSplit) {
    *r = 0;
    return u;
  }
  return ip_gemm_unit_tile(g, u, r);
}
// k-range r's first k-block (r = g.splits: one past the last range's), a
// range being whole stages of kKB k-blocks (ip_gemm_args, "Split K").  By
// the host's divisor: a 64-bit division is a routine of a few hundred
// cycles, here before the producer's first load.  stages * r stays below
// 2^31 (k_blocks < 2^25, r <= IP_GEMM_MAX_SPLITS).
template <bool kSplit, int kKB>
__device__ __forceinline__ int64_t range_kb(const ip_gemm_args &g, int r) {
  if (!kSplit || r == 0) return r == 0 ? 0 : g.k_blocks;
  const int32_t stages = ((int32_t)g.k_blocks + kKB - 1) / kKB;
  return r == g.splits ? g.k_blocks : kKB * ip_fastdiv_div(stages * r, g.div_splits);
}
// The first 8-column group of a kTN-wide tile that k-range r owns (r =
// g.splits: kTN / 8).
template <bool kSplit, int kTN>
__device__ __forceinline__ int range_group(const ip_gemm_args &g, int r) {
  if (!kSplit || r == 0) return r == 0 ? 0 : kTN / 8;
  return r == g.splits ? kTN / 8 : ip_fastdiv_div(kTN / 8 * r, g.div_splits);
}

}  // namespace ipg

#if IP_GEMM_SM90A
// ===========================================================================
// sm_90a: TMA producer, wgmma consumers.
// ===========================================================================
namespace ipg90 {

constexpr int kWarpgroup = 128;                                  // threads
constexpr int kConsumers = 2;                                    // consumer warpgroups
constexpr int kConsumerWarps = kConsumers * kWarpgroup / 32;     // arrivals that free a stage
constexpr int kRowsPerConsumer = IP_GEMM_TILE_M / kConsumers;    // 64: one wgmma M
constexpr int kStoreWarps = kWarpgroup / 32 - 1;                 // the producer warpgroup's warps 1-3 store outputs
constexpr int kPiece = 8;                                        // outputs in 16 bytes
static_assert(IP_GEMM_TILE_N == 32 * kPiece, "a store warp's 32 lanes cover one widest tile row in 16-byte pieces");
static_assert(IP_GEMM_THREADS == (1 + kConsumers) * kWarpgroup, "one producer and two consumer warpgroups");
static_assert(IP_GEMM_REGS_PRODUCER * kWarpgroup + IP_GEMM_REGS_CONSUMER * kConsumers * kWarpgroup <=
                  IP_GEMM_REGS_ENTRY * IP_GEMM_THREADS,
              "setmaxnreg must not ask for more registers than the block holds");

// What a tile kTN columns wide makes of the block's IP_GEMM_SMEM bytes
// and its threads: k-blocks per stage (ip_gemm_stage_kb) and W boxes
// (64-column groups) per k-block, the stages that fit beside the staging
// and the mbarriers (3 for 256 columns, 5 for 128, 4 of two k-blocks for
// 64: a narrow tile's k-block takes less time, so more of them must be in
// flight to cover a load's latency), each thread's accumulators (64 x kTN
// / 128), 8-column groups, and the rows a store warp's 32 lanes cover at
// once (a row is kTN / 8 lanes' 16-byte pieces).  A stage: kKB A tiles,
// then kBoxes groups of kKB k-blocks' W rows (the tensor maps' boxes,
// ip_gemm_args).
template <int kTN>
struct tiling {
  static_assert(kTN == IP_GEMM_TILE_N || kTN == 128 || kTN == IP_GEMM_TILE_N_MIN, "a width ip_gemm_set_tile_n takes");
  static constexpr int kKB = ip_gemm_stage_kb(kTN);
  static constexpr int kBoxes = kTN / IP_GEMM_SWZ_COLS;
  static constexpr int kStageBytes = kKB * (IP_GEMM_A_BYTES + kBoxes * kBoxBytes);
  static constexpr int kStgLd = kTN + 8;
  static constexpr int kStgBytes = kRowsPerConsumer * kStgLd * 2;
  static constexpr int kFit = (IP_GEMM_SMEM - IP_GEMM_ALIGN - kConsumers * kStgBytes - IP_GEMM_BAR_BYTES) / kStageBytes;
  static constexpr int kStages = kFit < IP_GEMM_MAX_STAGES ? kFit : IP_GEMM_MAX_STAGES;
  static constexpr int kAcc = kTN / 2;
  static constexpr int kGroups = kTN / kPiece;
  static constexpr int kRowsPerPass = 32 / kGroups;
  static constexpr int64_t kSplitRange = (int64_t)kConsumers * kGroups * kWarpgroup;   // float4s a range's partial tile
  static_assert(kStages >= 2, "a ring of two stages at least");
  static_assert(IP_GEMM_ALIGN + kStages * kStageBytes + kConsumers * kStgBytes + IP_GEMM_BAR_BYTES <= IP_GEMM_SMEM,
                "the layout fits IP_GEMM_SMEM");
  static_assert(IP_GEMM_BAR_BYTES >= (2 * kStages + 2 * kConsumers + 1) * 8, "mbarrier space and the claim");
  static_assert(kStgLd % kPiece == 0, "staging rows stay 16-byte aligned");
  static_assert(kStageBytes % IP_GEMM_ALIGN == 0, "every stage starts on the swizzle's period");
  static_assert(kAcc == 4 * kGroups, "a thread holds 4 accumulators of each column group");
};
static_assert(tiling<IP_GEMM_TILE_N>::kStages == IP_GEMM_STAGES, "the widest tile's ring is IP_GEMM_SMEM's");

// Shared-memory addresses of one call of a kTN-wide tile (ring aligned
// to IP_GEMM_ALIGN).  Consumer c's staging buffer: its 64 rows of the
// unit, bf16, rows kStgLd apart.  staged[c] completes when its 128 threads
// have written it (they arrive); freed[c] when the store warps have read
// it (one arrival).
template <int kTN>
struct layout : tiling<kTN> {
  using T = tiling<kTN>;
  uint32_t ring;  // stage s at ring + s * kStageBytes (tiling)
  char *stg;      // consumer c's staging buffer at stg + c * kStgBytes
  uint32_t bars;  // full[s], empty[s], staged[c], freed[c], 8 bytes each, then the claim
  __device__ uint32_t full(int s) const { return bars + 8 * s; }
  __device__ uint32_t empty(int s) const { return bars + 8 * (T::kStages + s); }
  __device__ uint32_t staged(int c) const { return bars + 8 * (2 * T::kStages + c); }
  __device__ uint32_t freed(int c) const { return bars + 8 * (2 * T::kStages + kConsumers + c); }
  // 0 until a thread of the block gives up a wait (stall).
  __device__ uint32_t claim() const { return bars + 8 * (2 * T::kStages + 2 * kConsumers); }
  __device__ __nv_bfloat16 *stg_row(int c, int r) const {
    return (__nv_bfloat16 *)(stg + c * T::kStgBytes) + r * T::kStgLd;
  }
};

// ---- Deadlines ----
// A wait inside the engine waits on its own block: on TMA's loads, on
// the other warpgroups' work on one unit.  None lasts long unless the
// engine or its caller is wrong (an epilogue whose skip() answers
// differently to the producer and the consumers, say), and then nothing
// else would end it: the block would hang, and the kernel, and the
// stream, with nothing reported.  So a wait that lasts g.stall_ns gives
// up.  The first thread of the block to give up records where (g.stall,
// host-mapped: the host reads it once the kernel is stopped) and stops
// the kernel with a trap: the engine cannot unwind its block (loads in
// flight into its shared memory, warpgroups inside wgmma and named
// barriers), and the trap ends every block of the kernel at once.  The
// CUDA context is then unusable, as after any kernel fault.  The block's
// other threads that give up sleep until the trap ends them.  Hardware
// barriers (bar.sync, setmaxnreg) have no deadline; a thread held there
// is held by one that is in a wait below, or by a defect in the engine's
// own order.

// Records the wait that gave up (the block's first thread to give up
// only) and stops the kernel.  Out of line and never returning: the
// callers keep nothing for after it (in line, or returning, it made ptxas
// spill more of the producer warpgroup's values, on its 40 registers).
// claim: the block's word.
__device__ __noinline__ __attribute__((noreturn)) void stall(const ip_gemm_args &g, uint32_t claim, int what,
                                                             int64_t m0, int64_t n0, uint64_t waited) {
  uint32_t old;
  asm volatile("atom.shared.cas.b32 %0, [%1], 0, 1;" : "=r"(old) : "r"(claim) : "memory");
  if (old != 0)
    for (;;) __nanosleep(1000000);   // the thread that won the claim records and traps
  volatile ip_gemm_stall *s = g.stall;
  if (s && s->flag == 0) {
    s->block = (int32_t)blockIdx.x;
    s->thread = (int32_t)threadIdx.x;
    s->what = what;
    s->m0 = m0;
    s->n0 = n0;
    s->waited_ns = waited;
    __threadfence_system();
    s->flag = 1;
    __threadfence_system();
  }
  __trap();
}

// Returns once the phase of parity `parity` of mbarrier `bar` has
// completed, or stops the kernel (stall) once it has waited g.stall_ns.
// what, m0, n0: what the wait is for and the unit's tile, for the record.
// The hints keep the first try's success the straight path: laid out the
// other way, a one-rank GEMM of 1024 x 4096 x 1024 took 0.1 us more (14.8
// against 14.7 on an H200, three rounds each); so, 14.7.  What the
// deadline costs the engine in its own kernel against none (an H200,
// three rounds turn about): 0.5-1.5% at 1024 x 4096 x 1024 (some 0.1
// us), 0.3% or less at 1024 x 8192 x 4096, 2048 x 4096 x 4096 and 4096 x
// 4096 x 2048.  Counting SM cycles instead of reading %globaltimer, and a
// second try before the clock, measured the same.
template <class Layout>
__device__ __forceinline__ void mbar_wait(const ip_gemm_args &g, const Layout &L, uint32_t bar, uint32_t parity,
                                          int what, int64_t m0, int64_t n0) {
  if (__builtin_expect(mbar_try(bar, parity), 1)) return;
  const uint64_t t0 = globaltimer();
  while (__builtin_expect(!mbar_try(bar, parity), 1)) {
    const uint64_t waited = globaltimer() - t0;
    if (__builtin_expect(g.stall_ns && waited >= g.stall_ns, 0)) stall(g, L.claim(), what, m0, n0, waited);
  }
}

// The producer's stages kb0 .. kend - 1 (k-blocks) of the unit at (m0,
// n0), from ring stage `stage` of parity `phase` on (both advanced).
// kTail: the unit is in X's short last tile row (ip_gemm_args.tail_m0):
// each A tile's first tail_rows rows, a box each a k-block, the rest of
// it not loaded (what the consumers compute from it is never stored).
// An instance each: the test in the loop made ptxas spill the producer
// warpgroup's values (40 registers).
template <bool kTail, int kTN>
__device__ __forceinline__ void produce_range(const ip_gemm_args &g, const layout<kTN> &L, int64_t m0, int64_t n0,
                                              int32_t group, int64_t kb0, int64_t kend, bool leader, int &stage,
                                              uint32_t &phase) {
  using T = tiling<kTN>;
  for (int64_t kb = kb0; kb < kend; kb += T::kKB) {
    mbar_wait(g, L, L.empty(stage), phase ^ 1, IP_GEMM_WAIT_EMPTY, m0, n0);
    if (leader) {
      const uint32_t full = L.full(stage), a = L.ring + stage * T::kStageBytes;
      if (!kTail) {
        mbar_arrive_tx(full, T::kStageBytes);
        tma_load_3d(a, &g.tmap_x, 0, (int32_t)m0, (int32_t)kb, full);
      } else {
        mbar_arrive_tx(full, T::kStageBytes - T::kKB * (IP_GEMM_TILE_M - g.tail_rows) * kSwzRowBytes);
#pragma unroll
        for (int i = 0; i < T::kKB; i++)
          tma_load_3d(a + i * IP_GEMM_A_BYTES, &g.tmap_xt, 0, (int32_t)m0, (int32_t)(kb + i), full);
      }
      tma_load_3d(a + T::kKB * IP_GEMM_A_BYTES, &g.tmap_w, 0, (int32_t)(kb * IP_GEMM_TILE_K), group, full);
    }
    __syncwarp();
    if (++stage == T::kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
}

// The producer: one warp, lane 0 issuing.  For every stage of every unit
// not skipped, waits for it to be free, then asks TMA for its A tiles and
// its W tile, one box each (ip_gemm_args: what lies outside X and W, rows
// past M, W's groups past N, the k-block past K of an odd count, reads as
// zeros and counts in the stage's bytes), but for a short last tile row
// (ip_gemm_args.tail_m0), whose A tiles' first rows come in boxes of one
// k-block and whose other rows are not loaded (what the consumers compute
// from them is never stored).  The loads' issue, not their
// bytes, bounds a narrow tile: one thread alone took some 650 cycles a
// k-block (an H200), more than a 64-column tile's wgmmas, so the ring
// never filled and each load's latency showed (a whole warp made calls up
// to 1.4x faster); then two k-blocks a 64-column stage, one load of X and
// one of W where there had been two a k-block, 1.05-1.4x more, where
// loading half of X's rows had changed nothing (it would now gain 10-17%;
// sharing X between pairs of blocks by multicast did not).  One box of W
// a stage instead of one per 64 columns made no difference at 128 and 256
// columns.
template <bool kSplit, int kTN, class Epi>
__device__ __forceinline__ void produce(const ip_gemm_args &g, const layout<kTN> &L, int64_t unit0, int64_t unit_step,
                                        int lane, const Epi &epi) {
  using T = tiling<kTN>;
  const bool leader = lane == 0;
  if (leader) {
    tma_prefetch(&g.tmap_x);
    tma_prefetch(&g.tmap_w);
    if (g.tail_m0 >= 0) tma_prefetch(&g.tmap_xt);
  }
  if (g.deps_wait) pdl_wait();
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t u = unit0; u < g.units; u += unit_step) {
    int64_t m0, n0;
    int r;
    ip_gemm_unit_coords(g, ipg::unit_tile<kSplit>(g, u, &r), &m0, &n0);
    if (epi.skip(m0)) continue;
    const int32_t group = (int32_t)(n0 / IP_GEMM_SWZ_COLS);
    const int64_t kb0 = ipg::range_kb<kSplit, T::kKB>(g, r), kend = ipg::range_kb<kSplit, T::kKB>(g, r + 1);
    if (m0 != g.tail_m0) produce_range<false>(g, L, m0, n0, group, kb0, kend, leader, stage, phase);
    else produce_range<true>(g, L, m0, n0, group, kb0, kend, leader, stage, phase);
  }
}

// Stores the staged unit at (m0, n0) a pass of kRowsPerPass rows at a
// time: passes q0, q0 + step, ... whose rows are below `rows`.  A lane
// stores the 16-byte piece lane % (kTN / 8) of row lane / (kTN / 8) of
// each pass (one whole row a pass for the widest tile; pieces past cols,
// and where the tile is split, pieces its k-range does not own, are not
// stored), kDepth passes' loads in flight before their stores (the store
// warps, with IP_GEMM_REGS_PRODUCER registers, take 1: the interpreter's
// row_ptr spilled them at 2).
template <int kTN, int kDepth, class Epi>
__device__ __forceinline__ void store_rows(const layout<kTN> &L, int q0, int step, int rows, int cols, int lane,
                                           int64_t m0, int64_t n0, int p0, int p1, Epi &epi) {
  using T = tiling<kTN>;
  const int piece = T::kGroups == 32 ? lane : lane % T::kGroups, sub = T::kGroups == 32 ? 0 : lane / T::kGroups;
  if (piece * kPiece >= cols || piece < p0 || piece >= p1) return;
  for (int q = q0; q * T::kRowsPerPass < rows; q += kDepth * step) {
    uint4 v[kDepth];
#pragma unroll
    for (int i = 0; i < kDepth; i++) {
      const int r = (q + i * step) * T::kRowsPerPass + sub;
      if (r < rows) v[i] = *(const uint4 *)(L.stg_row(r / kRowsPerConsumer, r % kRowsPerConsumer) + piece * kPiece);
    }
#pragma unroll
    for (int i = 0; i < kDepth; i++) {
      const int r = (q + i * step) * T::kRowsPerPass + sub;
      if (r < rows) ipg::store16(epi.row_ptr(m0 + r) + n0 + piece * kPiece, v[i]);
    }
  }
}

// Split K (split_meet, hand_over): the loads a thread keeps in flight
// adding up the ranges' partial sums.
constexpr int kSplitBatch = 8;   // 12 and more spill (the accumulators stay live)
static_assert(IP_GEMM_SPLIT_SEMS == kConsumers + 1, "a tile's counters: one per consumer warpgroup, then the stores'");

// Where consumer warpgroup c's thread t keeps its own groups' partial
// sums on chip (split_meet, hand_over): group p0 + i at own + i * 2 KiB,
// in the ring, which holds no stage once the block's last unit has left
// the mainloop (the warpgroups' halves kGroups KiB apart: 2 ranges' kGroups
// / 2 groups of 2 KiB at most).
template <int kTN>
__device__ __forceinline__ uint32_t split_own(const layout<kTN> &L, int c, int t) {
  static_assert(tiling<kTN>::kGroups * kWarpgroup * 16 <= tiling<kTN>::kStages * tiling<kTN>::kStageBytes,
                "both warpgroups' own groups fit the ring");
  return L.ring + c * (tiling<kTN>::kGroups / 2) * kWarpgroup * 16 + t * 16;
}

// Consumer warpgroup c's half of a unit's epilogue: once the store warps
// have read the previous unit out of its staging buffer, its 64 x kTN
// accumulators go in as bf16, and each thread arrives on staged[c]
// (release: its writes are seen by whoever waits for the phase).  The
// consumer is then free for the next unit's mainloop.  The block's last
// unit has no mainloop to hide its stores behind, so there the
// warpgroup stores its own rows before it arrives.  t: thread index
// inside the warpgroup; fphase: freed[c]'s parity, flipped per unit.
//
// A split tile's k-range r (split: split_meet's pointer) stages only the
// groups p0 .. p1 - 1 it owns, each the sum of every range's partial sums
// in range order (the same bits every call; range r's own from shared
// memory on the block's last unit, split_own), kSplitBatch loads in
// flight a thread (one range at a time, the loads' latency made a
// 128-token GEMM's exchange take longer than its mainloop).
template <int kTN, class Epi>
__device__ __forceinline__ void hand_over(const ip_gemm_args &g, const layout<kTN> &L,
                                          float (&d)[tiling<kTN>::kAcc], int c, int t, uint32_t &fphase, bool last,
                                          int64_t m0, int64_t n0, int p0, int p1, int r, const float4 *split,
                                          Epi &epi) {
  using T = tiling<kTN>;
  const int w = t / 32, l = t % 32;
  mbar_wait(g, L, L.freed(c), fphase ^ 1, IP_GEMM_WAIT_FREED, m0, n0);
  fphase ^= 1;
  // wgmma's accumulator layout: thread (w, l) holds, for each 8-column
  // group j, rows 16 w + l / 4 and + 8, columns 8 j + 2 (l % 4) and + 1.
  __nv_bfloat16 *r0 = L.stg_row(c, 16 * w + l / 4) + 2 * (l % 4), *r8 = r0 + 8 * T::kStgLd;
  if (!split) {
#pragma unroll
    for (int j = 0; j < T::kAcc / 4; j++) {
      *(uint32_t *)&r0[8 * j] = ipg::pack_bf16(d[4 * j], d[4 * j + 1]);
      *(uint32_t *)&r8[8 * j] = ipg::pack_bf16(d[4 * j + 2], d[4 * j + 3]);
    }
  } else {
    // Load i is range i mod S of group p0 + i / S (walked by counters).
    const int S = g.splits, n = (p1 - p0) * S;
    int jl = p0, ol = 0, jf = p0, of = 0;   // the next load's group and range; the fold's
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i0 = 0; i0 < n; i0 += kSplitBatch) {
      float4 v[kSplitBatch];
#pragma unroll
      for (int k = 0; k < kSplitBatch; k++)
        if (i0 + k < n) {
          if (last && ol == r)   // its own groups, on chip (split_meet)
            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                         : "=f"(v[k].x), "=f"(v[k].y), "=f"(v[k].z), "=f"(v[k].w)
                         : "r"(split_own(L, c, t) + (uint32_t)(jl - p0) * kWarpgroup * 16));
          else
            v[k] = __ldcg(split + ol * T::kSplitRange + jl * kWarpgroup);
          if (++ol == S) ol = 0, jl++;
        }
#pragma unroll
      for (int k = 0; k < kSplitBatch; k++)
        if (i0 + k < n) {
          if (of == 0) acc = v[k];
          else acc = make_float4(acc.x + v[k].x, acc.y + v[k].y, acc.z + v[k].z, acc.w + v[k].w);
          if (++of == S) {
            *(uint32_t *)&r0[8 * jf] = ipg::pack_bf16(acc.x, acc.y);
            *(uint32_t *)&r8[8 * jf] = ipg::pack_bf16(acc.z, acc.w);
            of = 0;
            jf++;
          }
        }
    }
  }
  if (last) {
    ipg::bar_named(IP_GEMM_BAR_FIRST + 1 + c, kWarpgroup);
    const int first = c * kRowsPerConsumer, left = ipg::unit_rows(g, m0) - first;
    const int end = first + (left < kRowsPerConsumer ? left : kRowsPerConsumer);
    store_rows<kTN, 4>(L, first / T::kRowsPerPass + w, kWarpgroup / 32, end, ipg::unit_cols(g, n0, kTN), l, m0, n0,
                       p0, p1, epi);
  }
  mbar_arrive(L.staged(c));
}

// ---- Split K (ip_gemm_args) ----
__device__ __forceinline__ uint32_t ld_acquire_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Consumer warpgroup c's part of k-range r of a split tile, before its
// hand-over: writes its partial sums to the workspace and meets the
// tile's other ranges (its warpgroup's counter: every range's warpgroup
// c arrives once).  Returns where thread t's values of range 0 lie: the
// hand-over adds up the groups range r owns (p0 .. p1 - 1) from there.
// On the block's last unit (last) the groups it owns stay on chip
// (split_own; nobody else reads them): the partial tile a block writes
// to L2 and reads back (128 KiB at 256 columns) bound a split call, by
// each SM's write rate and L2's.
// Workspace: thread t's 4 values of group j of warpgroup c of range r of
// the tile at float4 index
//   (((tile * splits + r) * kConsumers + c) * kGroups + j) * kWarpgroup + t,
// so that a warpgroup writes and reads each group as 2 KiB end to end.
// Loads and stores go to L2 (.cg): another SM wrote or reads them.
template <int kTN>
__device__ __forceinline__ const float4 *split_meet(const ip_gemm_args &g, const layout<kTN> &L,
                                                   float (&d)[tiling<kTN>::kAcc], int c, int t, int64_t tile, int r,
                                                   int p0, int p1, bool last, int64_t m0, int64_t n0) {
  using T = tiling<kTN>;
  const int S = g.splits;
  float4 *const ws = (float4 *)g.split_ws + (tile * S * kConsumers + c) * T::kGroups * kWarpgroup + t;
  float4 *const mine = ws + r * T::kSplitRange;
  // The ring is free once both warpgroups' last wgmma has read it (they
  // share its W boxes); the producer loads nothing after the last unit.
  if (last) ipg::bar_named(IP_GEMM_BAR_FIRST + 4, kConsumers * kWarpgroup);
  const uint32_t own = split_own(L, c, t) - (uint32_t)p0 * kWarpgroup * 16;
#pragma unroll
  for (int j = 0; j < T::kGroups; j++) {
    if (last && j >= p0 && j < p1)
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(own + j * kWarpgroup * 16), "f"(d[4 * j]),
                   "f"(d[4 * j + 1]), "f"(d[4 * j + 2]), "f"(d[4 * j + 3])
                   : "memory");
    else
      __stcg(mine + j * kWarpgroup, make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]));
  }
  uint32_t *const sem = g.split_sem + tile * IP_GEMM_SPLIT_SEMS + c;
  ipg::bar_named(IP_GEMM_BAR_FIRST + 1 + c, kWarpgroup);   // the warpgroup's partial sums are written
  if (t == 0) {
    __threadfence();   // ... before the arrival (cumulative over the barrier)
    atomicAdd(sem, 1u);
    if (ld_acquire_u32(sem) < (uint32_t)S) {
      const uint64_t t0 = globaltimer();
      while (ld_acquire_u32(sem) < (uint32_t)S) {
        const uint64_t waited = globaltimer() - t0;
        if (g.stall_ns && waited >= g.stall_ns) stall(g, L.claim(), IP_GEMM_WAIT_SPLIT, m0, n0, waited);
      }
    }
  }
  ipg::bar_named(IP_GEMM_BAR_FIRST + 1 + c, kWarpgroup);   // every range's partial sums are in place
  return ws;
}

// Whether the calling store warp's block is the last of a split tile's
// k-ranges to have stored its groups (the warp's 32 lanes call it once
// the block's stores of the tile are issued and its store warps have met):
// that one resets the tile's counters and reports the tile done.  The
// fences make every range's stores precede the report (cumulative over
// the store warps' barrier, then through the counter).
__device__ __forceinline__ bool split_last(const ip_gemm_args &g, int64_t tile, int lane) {
  uint32_t *const sem = g.split_sem + tile * IP_GEMM_SPLIT_SEMS;
  uint32_t old = 0;
  if (lane == 0) {
    __threadfence();
    old = atomicAdd(sem + kConsumers, 1u);
  }
  old = __shfl_sync(~0u, old, 0);
  if (old + 1 < (uint32_t)g.splits) return false;
  // Every range's consumers have passed their meeting (they stage before
  // their store warps arrive here): nobody reads these counters again.
  if (lane <= kConsumers) sem[lane] = 0;
  __threadfence();
  return true;
}

// The store warps (the producer warpgroup's warps 1-3; s: 0 .. 95): for
// every unit not skipped, wait until both consumers have staged it, store
// it 512 bytes per warp at a time (the 32 lanes' 16-byte pieces: one row
// of the widest tile, 2 or 4 rows of a narrower one; coalesced, local or
// peer memory alike; the block's last unit the consumers store), give
// the buffers back, and report the unit done from the first store warp.
// This overlaps the stores with the consumers' next mainloop.
template <bool kSplit, int kTN, class Epi>
__device__ __forceinline__ void store(const ip_gemm_args &g, const layout<kTN> &L, int64_t unit0, int64_t unit_step,
                                      int s, Epi &epi) {
  const int warp = s / 32, lane = s % 32;
  uint32_t sphase = 0;
  for (int64_t u = unit0; u < g.units; u += unit_step) {
    int64_t m0, n0;
    int r;
    const int64_t tile = ipg::unit_tile<kSplit>(g, u, &r);
    ip_gemm_unit_coords(g, tile, &m0, &n0);
    if (epi.skip(m0)) continue;   // the consumers report it
    const int rows = ipg::unit_rows(g, m0), cols = ipg::unit_cols(g, n0, kTN);
    for (int c = 0; c < kConsumers; c++) mbar_wait(g, L, L.staged(c), sphase, IP_GEMM_WAIT_STAGED, m0, n0);
    sphase ^= 1;
    if (u + unit_step < g.units)
      store_rows<kTN, 1>(L, warp, kStoreWarps, rows, cols, lane, m0, n0, ipg::range_group<kSplit, kTN>(g, r),
                         ipg::range_group<kSplit, kTN>(g, r + 1), epi);
    ipg::bar_named(IP_GEMM_BAR_FIRST, kStoreWarps * 32);   // every row is stored and the buffers read
    if (s == 0)
      for (int c = 0; c < kConsumers; c++) mbar_arrive(L.freed(c));
    if (warp == 0) {
      if (kSplit) {
        if (!split_last(g, tile, lane)) continue;
      } else if (epi.publishes()) {
        __threadfence();
      }
      epi.done(m0, n0, rows, cols, lane);
    }
  }
}

// One stage's wgmmas (kKB k-blocks) into a (one commit group): added, or
// (acc = 0) overwriting it.  A's k-blocks lie an A tile apart; W's rows
// run on through the stage's k-blocks (tiling).
template <int kKB, int N>
__device__ __forceinline__ void mma_block(float (&a)[N], uint32_t da, uint32_t db, bool acc) {
  constexpr int kPer = IP_GEMM_TILE_K / kWgmmaK;
  wg_fence();
  acc_fence(a);
#pragma unroll
  for (int kk = 0; kk < kKB * kPer; kk++)
    wgmma(a, desc_of(da + (kk / kPer) * (IP_GEMM_A_BYTES >> 4) + (kk % kPer) * kStepA, kDescA),
          desc_of(db + kk * kStepB, desc_b(kKB)), acc || kk > 0);
  wg_commit();
  acc_fence(a);
}

// Consumer warpgroup c: for every unit, wgmma over the k-blocks as the
// stages fill (one commit group per stage; a stage is given back once the
// group after it has been issued and its own has completed), then its
// half of the unit into the staging buffer.
template <bool kSplit, int kTN, class Epi>
__device__ __forceinline__ void consume(const ip_gemm_args &g, const layout<kTN> &L, int64_t unit0, int64_t unit_step,
                                        int c, int t, Epi &epi) {
  using T = tiling<kTN>;
  float d[T::kAcc];
#pragma unroll
  for (int i = 0; i < T::kAcc; i++) d[i] = 0.f;
  const int lane = t % 32;
  const uint32_t da = desc_lo(L.ring + c * kRowsPerConsumer * kSwzRowBytes, kDescA);
  const uint32_t db = desc_lo(L.ring + T::kKB * IP_GEMM_A_BYTES, desc_b(T::kKB));
  int stage = 0;
  uint32_t phase = 0, fphase = 0;
  for (int64_t u = unit0; u < g.units; u += unit_step) {
    int64_t m0, n0;
    int r;
    const int64_t tile = ipg::unit_tile<kSplit>(g, u, &r);
    ip_gemm_unit_coords(g, tile, &m0, &n0);
    if (epi.skip(m0)) {   // nothing was loaded for it: done at once, by one warp (of the first k-range)
      if (c == 0 && t < 32 && r == 0) epi.done(m0, n0, ipg::unit_rows(g, m0), ipg::unit_cols(g, n0, kTN), t);
      continue;
    }
    const int64_t kb0 = ipg::range_kb<kSplit, T::kKB>(g, r);
    int prev = 0;
    for (int64_t kb = kb0, kend = ipg::range_kb<kSplit, T::kKB>(g, r + 1); kb < kend; kb += T::kKB) {
      mbar_wait(g, L, L.full(stage), phase, IP_GEMM_WAIT_FULL, m0, n0);
      const uint32_t off = (uint32_t)(stage * T::kStageBytes) >> 4;
      mma_block<T::kKB>(d, da + off, db + off, kb > kb0);
      if (kb > kb0) {
        wg_wait<1>();
        if (lane == 0) mbar_arrive(L.empty(prev));
      }
      prev = stage;
      if (++stage == T::kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    wg_wait<0>();
    acc_fence(d);
    if (lane == 0) mbar_arrive(L.empty(prev));
    const int p0 = ipg::range_group<kSplit, kTN>(g, r), p1 = ipg::range_group<kSplit, kTN>(g, r + 1);
    const bool last = u + unit_step >= g.units;
    const float4 *split = kSplit ? split_meet(g, L, d, c, t, tile, r, p0, p1, last, m0, n0) : nullptr;
    hand_over(g, L, d, c, t, fphase, last, m0, n0, p0, p1, r, split, epi);
  }
}

template <bool kSplit, int kTN, class Epi>
__device__ __forceinline__ void run(const ip_gemm_args &g, char *smem, int64_t unit0, int64_t unit_step, Epi &epi) {
  using T = tiling<kTN>;
  // wg through a shuffle: known to the compiler as one value a warp, what
  // derives from it (the consumers' descriptors) stays in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(~0u, tid / kWarpgroup, 0);
  if (blockDim.x != IP_GEMM_THREADS) __trap();  // the roles below need exactly this many threads
  if (g.maps_tile_n != kTN) __trap();           // tensor maps for other boxes (ip_gemm_retile alone)
  const uint32_t s0 = ipg::smem_u32(smem);
  const uint32_t pad = (IP_GEMM_ALIGN - (s0 & (IP_GEMM_ALIGN - 1))) & (IP_GEMM_ALIGN - 1);
  layout<kTN> L;
  L.ring = s0 + pad;
  L.stg = ipg::as_shared(smem) + pad + T::kStages * T::kStageBytes;
  L.bars = L.ring + T::kStages * T::kStageBytes + kConsumers * T::kStgBytes;
  if (tid == 0) {
    for (int s = 0; s < T::kStages; s++) {
      mbar_init(L.full(s), 1);  // the producer's arrive; TMA's bytes complete the phase
      mbar_init(L.empty(s), kConsumerWarps);
    }
    for (int c = 0; c < kConsumers; c++) {
      mbar_init(L.staged(c), kWarpgroup);
      mbar_init(L.freed(c), 1);
    }
    asm volatile("st.shared.u32 [%0], 0;" ::"r"(L.claim()) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Whatever the caller last wrote here with ordinary stores is ordered
  // before TMA (the async proxy) overwrites it.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  // The producer warpgroup gives registers to the consumers and takes
  // them back at the end; it may take them back only once the consumers
  // hold theirs (they arrive on kGrown).  A block with nothing to compute
  // (no unit, or every unit skipped) has no wait that orders the two
  // otherwise: its producer warpgroup could take its registers back
  // before some consumer warp got them, and that warp then waited in
  // setmaxnreg forever (seen on an H200: a one-rank GEMM's four blocks
  // without a unit hung, their consumers' other warps in setmaxnreg.inc,
  // the next kernel's blocks in griddepcontrol.wait behind them).
  constexpr int kGrown = IP_GEMM_BAR_FIRST + 1 + kConsumers;
  if (wg == 0) {
    regs_shrink<IP_GEMM_REGS_PRODUCER>();
    if (tid < 32) produce<kSplit, kTN>(g, L, unit0, unit_step, tid, epi);
    else store<kSplit, kTN>(g, L, unit0, unit_step, tid - 32, epi);
    __syncwarp();
    ipg::bar_named(kGrown, IP_GEMM_THREADS);
    regs_grow<IP_GEMM_REGS_ENTRY>();
  } else {
    regs_grow<IP_GEMM_REGS_CONSUMER>();
    ipg::bar_arrive(kGrown, IP_GEMM_THREADS);
    consume<kSplit, kTN>(g, L, unit0, unit_step, wg - 1, tid - wg * kWarpgroup, epi);
    regs_shrink<IP_GEMM_REGS_ENTRY>();
  }
  __syncthreads();  // every wait and arrive is over, every store issued
}

}  // namespace ipg90
#endif  // IP_GEMM_SM90A

#if !IP_GEMM_SM90A
#include "ip_gemm_fb.cuh"
#endif

// The entry point (contract at the top of this file), as one of its
// instances: kSplit must be g.splits > 1, kTN g.tile_n.  A kernel that
// knows which calls it runs instantiates only those: each instance is a
// copy of the engine, and a second copy in the interpreter's gemm kernel
// made ptxas spill more of the kernel's other code (its communicating
// blocks' FIFO exchange ran 14-21% slower).
template <bool kSplit, int kTN, class Epi>
__device__ __forceinline__ void ip_gemm_run_as(const ip_gemm_args &g, char *smem, int64_t unit0, int64_t unit_step,
                                               Epi &epi) {
#if IP_GEMM_SM90A
  ipg90::run<kSplit, kTN>(g, smem, unit0, unit_step, epi);
#else
  ipgfb::run(g, smem, unit0, unit_step, epi);
#endif
}

// The entry point (contract at the top of this file), any instance.
template <class Epi>
__device__ __forceinline__ void ip_gemm_run(const ip_gemm_args &g, char *smem, int64_t unit0, int64_t unit_step,
                                            Epi &epi) {
#if IP_GEMM_SM90A
  const bool split = g.splits > 1;
  if (g.tile_n == IP_GEMM_TILE_N_MIN) {
    if (split) ip_gemm_run_as<true, IP_GEMM_TILE_N_MIN>(g, smem, unit0, unit_step, epi);
    else ip_gemm_run_as<false, IP_GEMM_TILE_N_MIN>(g, smem, unit0, unit_step, epi);
  } else if (g.tile_n == 128) {
    if (split) ip_gemm_run_as<true, 128>(g, smem, unit0, unit_step, epi);
    else ip_gemm_run_as<false, 128>(g, smem, unit0, unit_step, epi);
  } else if (split) {
    ip_gemm_run_as<true, IP_GEMM_TILE_N>(g, smem, unit0, unit_step, epi);
  } else {
    ip_gemm_run_as<false, IP_GEMM_TILE_N>(g, smem, unit0, unit_step, epi);
  }
#else
  ipgfb::run(g, smem, unit0, unit_step, epi);
#endif
}

#endif
