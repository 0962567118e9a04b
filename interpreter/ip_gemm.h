/* ip_gemm.h -- the bf16 GEMM tile engine's problem description, shared by
 * the host (plain C: ip_gemm_host.c fills it) and the device
 * (ip_gemm.cuh runs it): Y[M, N] = X[M, K] W[K, N], X and W row-major
 * bf16, f32 accumulation, bf16 output rounded to nearest even.  The output
 * is not described here: the device caller's epilogue functor places each
 * row (ip_gemm.cuh). */
#ifndef IP_GEMM_H
#define IP_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the tile engine's shape -------------------------------------------
 * One unit of work is one output tile of IP_GEMM_TILE_M x tile_n, computed
 * in k-blocks of IP_GEMM_TILE_K; tile_n is IP_GEMM_TILE_N, or narrower for
 * GEMMs of few tiles (ip_gemm_set_tile_n: 128 or IP_GEMM_TILE_N_MIN).  On
 * sm_90a: one producer warpgroup (TMA) and two consumer warpgroups
 * (wgmma, 64 rows each). */
#define IP_GEMM_TILE_M 128
#define IP_GEMM_TILE_N 256     /* the widest tile, and ip_gemm_prepare's */
#define IP_GEMM_TILE_N_MIN 64  /* the narrowest: one W box (a 128-byte swizzled row) */
#define IP_GEMM_TILE_K 64
#define IP_GEMM_SWZ_COLS 64 /* bf16 columns in one 128-byte swizzled row: a TMA box's width */
/* k-blocks one stage of the ring holds (one load of X and one of W each,
 * one wait and one arrival a side): two for the narrowest tile, whose
 * k-block is too short to hide the per-stage work of loading (loads and
 * barriers, not bytes, bounded it: halving X's rows a stage changed
 * nothing on an H200, two k-blocks a stage made 64-column tiles 1.05-1.4x
 * as fast); one for the others, whose two-k-block stages would not fit
 * IP_GEMM_SMEM three deep. */
#define IP_GEMM_STAGE_KB_MIN 2
#define IP_GEMM_THREADS 384 /* every block of the kernel that runs the engine */
#define IP_GEMM_STAGES 3    /* shared-memory ring depth (k-blocks in flight) of the widest tile: 3 leaves room
                               for the staging; narrower tiles fit more stages in the same memory */
#define IP_GEMM_MAX_STAGES 8 /* any tile width's ring depth at most (narrower tiles' k-blocks take less time) */
#define IP_GEMM_BAND_GROUP 4 /* tile rows per band (ip_gemm_unit_coords): measured 2-8 alike, 1 slow on big W */
/* From this K on, or where W holds IP_GEMM_DEEP_W_BYTES or more, bands of
 * IP_GEMM_BAND_GROUP_DEEP tile rows: each band walks all of W, and a W
 * that L2 cannot keep comes from DRAM once per band, so once per 16 tile
 * rows instead of once per 4; a GEMM that long also runs at the GPU's
 * power cap, where reading less buys clock (8192 x 8192 x 14336 on an
 * H200: 2.15 against 4.18 GB read, 1.60 against 1.58 GHz, 2,743 against
 * 2,761 us; 2048 x 8192 x 14336: 676 against 694 us).  48 MiB is about
 * an H100's or H200's L2 (50 MB): a 64 MiB W (K 4096 x N 8192) ran 1024 x
 * 8192 x 4096 in 87.3-87.6 us in bands of 8 (all its tile rows) against
 * 89.6-89.9 in bands of 4, and 8192 x 8192 x 4096 in 814-822 against
 * 834-842 (an H200); at 32 MiB (K 2048 x N 8192, K 4096 x N 4096) some
 * shapes gained and some lost, by 1-4%.  Outputs IP_GEMM_DEEP_WIDE_N
 * columns wide or more go wide from a W of IP_GEMM_DEEP_WIDE_W_BYTES: at
 * K 2048 x N 8192 on an H100 (cuBLAS turn about, two runs) bands of 16 ran
 * 1024 tokens in 47.8-48.0 us against 49.6-49.8, 2048 in 91.4-91.8
 * against 97.4-97.6, 8192 in 399-414 against 425-426, 4096 alike
 * (197-199); K 4096 x N 4096 ran alike in bands of 4, 8 and 16 there. */
#define IP_GEMM_DEEP_K 8192
#define IP_GEMM_DEEP_W_BYTES (48ll << 20)
#define IP_GEMM_DEEP_WIDE_N 8192
#define IP_GEMM_DEEP_WIDE_W_BYTES (32ll << 20)
#define IP_GEMM_BAND_GROUP_DEEP 16

/* Shared memory, sm_90a, for the widest tile (a narrower one lays out
 * more stages in the same bytes: ip_gemm.cuh's ipg90::tiling): the ring
 * (A tile then B tile per stage), one staging buffer per consumer
 * warpgroup holding its 64 rows of a unit's outputs in bf16 (rows padded
 * by 8 elements so that fragment stores avoid bank conflicts; 528-byte
 * rows keep 16-byte alignment), the mbarriers, and slack to align the
 * ring to the 1024 bytes that 128-byte swizzling repeats over.  The
 * staging lets a consumer hand its outputs over and go on with the next
 * unit while the producer warpgroup's other warps store them
 * (ip_gemm.cuh). */
#define IP_GEMM_A_BYTES (IP_GEMM_TILE_M * IP_GEMM_TILE_K * 2)
#define IP_GEMM_B_BYTES (IP_GEMM_TILE_K * IP_GEMM_TILE_N * 2)
#define IP_GEMM_STAGE_BYTES (IP_GEMM_A_BYTES + IP_GEMM_B_BYTES)
#define IP_GEMM_STG_LD (IP_GEMM_TILE_N + 8)
#define IP_GEMM_STG_BYTES (64 * IP_GEMM_STG_LD * 2)
#define IP_GEMM_BAR_BYTES 192 /* 2 x IP_GEMM_MAX_STAGES + 4 8-byte mbarriers and a claim word, rounded up */
#define IP_GEMM_ALIGN 1024
#define IP_GEMM_SMEM \
  (IP_GEMM_ALIGN + IP_GEMM_STAGES * IP_GEMM_STAGE_BYTES + 2 * IP_GEMM_STG_BYTES + IP_GEMM_BAR_BYTES)
/* The fallback (any other target): 3 stages of a 128 x 32 A tile and a
 * 32 x 128 B tile, rows padded by 8 elements for ldmatrix. */
#define IP_GEMM_FB_STAGES 3
#define IP_GEMM_FB_BK 32
#define IP_GEMM_FB_BN 128
#define IP_GEMM_FB_A_LD (IP_GEMM_FB_BK + 8)
#define IP_GEMM_FB_B_LD (IP_GEMM_FB_BN + 8)
#define IP_GEMM_FB_STAGE_BYTES ((IP_GEMM_TILE_M * IP_GEMM_FB_A_LD + IP_GEMM_FB_BK * IP_GEMM_FB_B_LD) * 2)
#define IP_GEMM_SMEM_FALLBACK (128 + IP_GEMM_FB_STAGES * IP_GEMM_FB_STAGE_BYTES)

/* Registers a thread holds at kernel entry on sm_90a: the kernel must be
 * built with __launch_bounds__(IP_GEMM_THREADS, 1), which caps it at
 * 65536 / 384 rounded down to 8; the engine moves registers between
 * warpgroups (setmaxnreg) and gives them back to this count on return.
 * A kernel that ends up with another count must not run the engine (the
 * test checks cudaFuncAttributes.numRegs). */
#define IP_GEMM_REGS_ENTRY 168
#define IP_GEMM_REGS_PRODUCER 40
#define IP_GEMM_REGS_CONSUMER 232

/* ---- limits the host checks --------------------------------------------- */
#define IP_GEMM_DIM_MULT 64        /* N and K: multiples of this */
#define IP_GEMM_LD_MULT 8          /* ldx, ldw: multiples of this many elements (TMA: 16-byte strides) */
#define IP_GEMM_PTR_ALIGN 16       /* x, w: byte alignment (TMA global address) */
#define IP_GEMM_MAX_DIM 2147483647 /* M, N, K: TMA coordinates are signed 32-bit */
#define IP_GEMM_MAX_LD (1ll << 36) /* ldx, ldw elements: TMA strides are below 2^40 bytes */

/* Errors ip_gemm_prepare returns. */
enum ip_gemm_err {
  IP_GEMM_OK = 0,
  IP_GEMM_ESHAPE = -1,  /* M < 1, N or K not a positive multiple of 64, too large */
  IP_GEMM_ESTRIDE = -2, /* ldx < K, ldw < N, or not a multiple of 8 elements */
  IP_GEMM_EALIGN = -3,  /* x or w not 16-byte aligned, or NULL */
  IP_GEMM_EDRIVER = -4, /* cuTensorMapEncodeTiled missing or refused the map */
  IP_GEMM_ESPLIT = -5,  /* ip_gemm_set_split: splits out of range, workspace missing or misaligned */
  IP_GEMM_ETILE = -6,   /* ip_gemm_set_tile_n: not a width the engine has */
};

#ifdef __CUDACC__
#define IP_GEMM_HD __host__ __device__ __forceinline__
#else
#define IP_GEMM_HD static inline
#endif

/* k-blocks a stage holds for tiles tile_n wide (IP_GEMM_STAGE_KB_MIN);
 * constexpr in C++, where the device code sizes its ring by it. */
#ifdef __cplusplus
#define IP_GEMM_CONSTEXPR constexpr
#else
#define IP_GEMM_CONSTEXPR
#endif
IP_GEMM_HD IP_GEMM_CONSTEXPR int ip_gemm_stage_kb(int64_t tile_n) {
  return tile_n == IP_GEMM_TILE_N_MIN ? IP_GEMM_STAGE_KB_MIN : 1;
}
/* The stages of K (k_blocks of them) a tile tile_n wide walks. */
IP_GEMM_HD int64_t ip_gemm_stages(int64_t k_blocks, int64_t tile_n) {
  const int kb = ip_gemm_stage_kb(tile_n);
  return (k_blocks + kb - 1) / kb;
}

/* A tile width's place among the engine's IP_GEMM_WIDTHS, widest first
 * (IP_GEMM_TILE_N, 128, IP_GEMM_TILE_N_MIN); -1 for any other width. */
#define IP_GEMM_WIDTHS 3
IP_GEMM_HD int ip_gemm_width_index(int64_t tile_n) {
  return tile_n == IP_GEMM_TILE_N ? 0 : tile_n == IP_GEMM_TILE_N / 2 ? 1 : tile_n == IP_GEMM_TILE_N_MIN ? 2 : -1;
}

/* n / d for 0 <= n < 2^31 by a multiply and a shift: n / d = (umulhi(n,
 * m) + n) >> s (ip_fastdiv_div).  The engine walks its units
 * and the gemm kernel's epilogue divides rows by chunk, tile and block
 * heights with it.  ip_fastdiv_make (d < 2^31; a d below 1 is taken as 1,
 * never a division by zero) runs on the host, where a launch is prepared:
 * on the GPU its 64-bit division is a long routine one thread would run
 * before the first load. */
typedef struct ip_fastdiv {
  uint32_t m, s;
} ip_fastdiv;
static inline ip_fastdiv ip_fastdiv_make(uint32_t d) {
  ip_fastdiv f;
  uint32_t s = 0;
  if (d < 1) d = 1;
  while ((1ull << s) < d) s++;
  f.m = (uint32_t)(((1ull << 32) * ((1ull << s) - d)) / d + 1);
  f.s = s;
  return f;
}
/* n / d for 0 <= n < 2^31, f = ip_fastdiv_make(d): five instructions on
 * the GPU, where a 32-bit division is some twenty dependent ones and a
 * 64-bit one a routine; the same quotient on the host. */
IP_GEMM_HD int32_t ip_fastdiv_div(int32_t n, ip_fastdiv f) {
#ifdef __CUDA_ARCH__
  const uint32_t hi = __umulhi((uint32_t)n, f.m);
#else
  const uint32_t hi = (uint32_t)((uint64_t)(uint32_t)n * f.m >> 32);
#endif
  return (int32_t)((hi + (uint32_t)n) >> f.s);
}

/* A TMA tensor map: the driver's CUtensorMap (cuda.h; ip_gemm_host.c
 * checks that the two agree), held opaque so that C code that includes
 * this header needs no CUDA header. */
#ifdef __cplusplus
#define IP_ALIGN128 alignas(128)
#else
#define IP_ALIGN128 _Alignas(128)
#endif
typedef struct ip_tmap {
  IP_ALIGN128 uint64_t opaque[16];
} ip_tmap;

/* A wait inside the engine that gave up (on sm_90a: a phase of one of its
 * block's mbarriers that did not complete in ip_gemm_args.stall_ns), as
 * the first thread of a block to give up records it before it stops the
 * kernel (ip_gemm.cuh, "Deadlines").  In host-mapped memory, so that the
 * host reads it after the kernel is stopped; flag is written last. */
enum { IP_GEMM_WAIT_FULL = 1,   /* a stage's loads (the consumers) */
       IP_GEMM_WAIT_EMPTY,      /* a free stage (the producer) */
       IP_GEMM_WAIT_STAGED,     /* the consumers' outputs (the store warps) */
       IP_GEMM_WAIT_FREED,      /* a free staging buffer (the consumers) */
       IP_GEMM_WAIT_SPLIT };    /* the other k-ranges' partial sums of a tile (the consumers) */
typedef struct ip_gemm_stall {
  int32_t flag;                 /* 0: none */
  int32_t block, thread, what;  /* what: IP_GEMM_WAIT_* */
  int64_t m0, n0;               /* the unit's tile (ip_gemm_unit_coords) */
  uint64_t waited_ns;
} ip_gemm_stall;

/* One problem.  The tensor maps come first: a map is 128-byte
 * aligned and 128 bytes long, so the maps sit at the same offsets for C
 * and C++ compilers, and the struct can be a member of a
 * __grid_constant__ kernel parameter (TMA reads the maps from there). */
typedef struct ip_gemm_args {
  /* X as {64, M, K / 64} (k inside a k-block, row, k-block), box {64, 128,
   * kb}: kb k-blocks' A tiles one after the other; W as {64, K, N / 64}
   * (column inside a 64-column group, k, group), box {64, 64 kb, tile_n /
   * 64}: a stage's W tile, each 64-column group's kb k-blocks together.
   * kb = ip_gemm_stage_kb(tile_n); 128-byte swizzle; whatever lies outside
   * the matrix (rows >= M, the k-block after the last, groups past N) reads
   * as zeros.  Made for maps_tile_n (ip_gemm_prepare, ip_gemm_set_tile_n).
   * tmap_xt: X again, box {64, tail_rows, 1}, for the tile row at tail_m0
   * (below). */
  ip_tmap tmap_x;
  ip_tmap tmap_w;
  ip_tmap tmap_xt;
  const void *x;      /* bf16, row m at x + m * ldx (the fallback reads through these) */
  const void *w;      /* bf16, row k at w + k * ldw */
  int64_t m, n, k;    /* Y[m, n] = X[m, k] W[k, n] */
  int64_t ldx, ldw;   /* row strides in elements */
  int64_t tiles_m;    /* ceil(m / IP_GEMM_TILE_M) */
  int64_t tiles_n;    /* ceil(n / tile_n) */
  int64_t units;      /* tiles * splits: units are 0 .. units - 1 (below) */
  int64_t k_blocks;   /* k / IP_GEMM_TILE_K */
  /* The first row of the last tile row where it holds fewer than
   * IP_GEMM_TILE_M rows, else -1 (ip_gemm_prepare).  Its units load each
   * A tile's first tail_rows rows (that row's rows, all of them) through
   * tmap_xt, a box each a k-block, and leave the tile's other rows as they
   * were (what is computed from them is never stored), so that no box
   * reaches past X's last row: TMA's zeros for rows past it are slow (on
   * an H200, 100 x 4096 x 2048 took 11.8 us with boxes of 128 rows, 8.8
   * with boxes of 100; 64 x 4096 x 1024 8.8 against 6.1). */
  int64_t tail_m0;
  int32_t tail_rows;
  /* Split K (below; ip_gemm_set_split): beside the fields every walk reads
   * first, so that they share their constant-cache lines. */
  int64_t tiles;      /* tiles_m * tiles_n; units = tiles * splits */
  int32_t splits;     /* 1 .. IP_GEMM_MAX_SPLITS */
  ip_fastdiv div_splits;
  int32_t tile_n;     /* a tile's columns: IP_GEMM_TILE_N, 128 or IP_GEMM_TILE_N_MIN (ip_gemm_set_tile_n) */
  int32_t maps_tile_n; /* the width tmap_x and tmap_w were made for: tile_n, or the engine stops the kernel */
  int64_t band_group; /* tile rows per band of the unit order (ip_gemm_unit_coords); prepare:
                         ip_gemm_default_band_group's */
  int64_t band0;      /* the tile row the unit order starts at, wrapping around to 0 after the last (0 <= band0 <
                         tiles_m; prepare: 0): a caller whose rows leave for other GPUs computes those first */
  /* The unit order's divisors (ip_gemm_set_band_group makes them): by
   * tiles_n, by band_group * tiles_n, by band_group, by the last band's
   * tile rows (tiles_m mod band_group); fast32: units < 2^31, so that the
   * engine walks its units in 32-bit arithmetic with them (else in 64-bit
   * divisions, a few hundred cycles each). */
  ip_fastdiv div_tiles_n, div_group, div_band, div_last;
  int32_t fast32;
  /* Interleaved bands (ip_gemm_set_interleave; 0: none): the first
   * inter_n full bands of the order above are walked with the first
   * inter_first of them spread evenly among the other inter_n -
   * inter_first, the last of all kept among those others. */
  int32_t inter_n, inter_first;
  ip_fastdiv div_inter;   /* by inter_n */
  /* Deadlines (prepare: none): a wait inside the engine that lasts
   * stall_ns (0: waits for ever) is recorded in *stall (NULL: nowhere)
   * and stops the kernel. */
  ip_gemm_stall *stall;
  uint64_t stall_ns;
  /* 1: the engine waits for the kernels before it (griddepcontrol.wait,
   * ip_mem.cuh's pdl_wait) in its producer warp, before its first load,
   * so that a programmatic dependent does its set-up while they end; its
   * caller then reads and writes no global memory before the engine
   * returns but what the kernels before it leave alone (prepare: 0, the
   * caller waits). */
  int32_t deps_wait;
  /* Split K (ip_gemm_set_split; prepare: none, splits 1).  Unit u is
   * k-range u mod splits of tile u / splits, in whole stages: of the S =
   * ceil(k_blocks / kb) stages (kb = ip_gemm_stage_kb(tile_n)), stages S
   * r / splits .. S (r + 1) / splits - 1, the last range ending at
   * k_blocks.  Each range's block writes
   * its partial sums to split_ws, meets the tile's other ranges
   * (split_sem), and adds every range's partial sums of the columns it
   * owns (of the tile's G = tile_n / 8 groups of 8 columns, groups G r /
   * splits .. G (r + 1) / splits - 1) in range order: the same bits every
   * call.  The
   * tile's last range to store calls done().  A block waits
   * there for the blocks of its tile's other ranges: the caller gives the
   * engine unit_step >= splits, blocks that all run at once, and waits in
   * none of them for what the GEMM's outputs release (tiles, splits and
   * div_splits are above). */
  float *split_ws;    /* ip_gemm_split_ws_bytes, 16-byte aligned; its contents between calls do not matter */
  uint32_t *split_sem; /* IP_GEMM_SPLIT_SEMS words per tile, zero before a call; the call leaves them zero */
} ip_gemm_args;

/* Split K's limits and workspace.  A range's partial tile is
 * IP_GEMM_TILE_M x tile_n f32 (128 KiB for the widest tile). */
#define IP_GEMM_MAX_SPLITS 16
#define IP_GEMM_SPLIT_SEMS 3 /* per tile: each consumer warpgroup's arrivals, then the ranges' stores */
/* The shape of a GEMM of few tiles (ip_gemm_default_tile_n and
 * ip_gemm_default_splits) comes from a model of the time a block takes:
 * its k-blocks (IP_GEMM_KB_NS: a narrow tile's cost more per column, as
 * each loads X's whole 16 KiB row block for fewer W columns), at least
 * W's bytes at IP_GEMM_DRAM_BYTES_NS, plus, where its tile is split, the
 * exchange of partial tiles (IP_GEMM_SPLIT_NS: each range writes its f32
 * partial tile, meets the others and reads theirs back), at most
 * IP_GEMM_SPLIT_DEFAULT_MAX ranges.  The figures are an H200's, fitted to
 * 128-512 tokens x 4096-8192 x 1024-14336 in every width and 1-8 ranges
 * (one round of 132 blocks, one run; whole tiles the mean of two): the
 * model picks the fastest measured setting for 21 of the 24 and loses 0.7%
 * on average (12% at 512 x 4096 x 1024, 10.9 us in 128 columns against
 * 9.7 in 64, where 128 columns took 9.6 in another run).  128 x 4096 x
 * 1024: 6.6 us in tiles 64 wide whole, 8.8 in 128, 13.5 in 256; 128 x
 * 4096 x 14336: 39.4 in 64 split 2 ways, 40.8 in 128 split 4 ways, 47.4
 * in 256 split 8 ways; cuBLAS 4.6 and 36.0.  The per-k-block costs are
 * the model's, not the slopes a width shows alone (some 230-250 and 290
 * ns for 64 and 128 columns). */
#define IP_GEMM_SPLIT_DEFAULT_MAX 8
#define IP_GEMM_KB_NS_256 570       /* a k-block of a 256-column tile, ns: the tensor cores' rate */
#define IP_GEMM_KB_NS_128 320
#define IP_GEMM_KB_NS_64 200
#define IP_GEMM_SPLIT_NS_256 11600  /* a split's exchange, ns */
#define IP_GEMM_SPLIT_NS_128 6500
#define IP_GEMM_SPLIT_NS_64 3000
#define IP_GEMM_DRAM_BYTES_NS 3500.0 /* bytes a ns (3.5 TB/s): W read once from DRAM, by every shape */

/* Fills *g for Y = X W with X [m, k] (row stride ldx elements) at x and
 * W [k, n] (row stride ldw) at w, both device memory of the GPU that will
 * run the engine, tensor maps included (cuTensorMapEncodeTiled, reached
 * through cudaGetDriverEntryPointByVersion: no -lcuda).  Returns IP_GEMM_OK
 * or a negative ip_gemm_err with *why (if why) a static sentence naming
 * the limit; *g is then unusable.  Thread-safe after the first call. */
int ip_gemm_prepare(ip_gemm_args *g, const void *x, int64_t ldx, const void *w, int64_t ldw, int64_t m, int64_t n,
                    int64_t k, const char **why);

/* How ip_gemm_prepare loads the last tile row of an X of m rows
 * (ip_gemm_args.tail_m0): sets *m0 to its first row and *rows to its
 * rows, or *m0 to -1 and *rows to 0 where it loads it in one box of
 * IP_GEMM_TILE_M rows like the others (m a multiple of it). */
void ip_gemm_tail(int64_t m, int64_t *m0, int32_t *rows);

/* The band group ip_gemm_prepare gives Y[m, n] = X[m, k] W[k, n]:
 * IP_GEMM_BAND_GROUP_DEEP from K = IP_GEMM_DEEP_K, a W of
 * IP_GEMM_DEEP_W_BYTES bf16 bytes, or N from IP_GEMM_DEEP_WIDE_N with a W
 * of IP_GEMM_DEEP_WIDE_W_BYTES; else IP_GEMM_BAND_GROUP. */
int64_t ip_gemm_default_band_group(int64_t n, int64_t k);

/* Sets g's tiles to tile_n columns: IP_GEMM_TILE_N (ip_gemm_prepare's),
 * 128 or IP_GEMM_TILE_N_MIN.  A narrower tile gives a GEMM of few tiles
 * more of them, each through all of K (ip_gemm_default_tile_n).  It
 * makes the tensor maps for the width where g's were made for another
 * (g must come from ip_gemm_prepare), recounts the tiles, undoes a split
 * and an interleave, and keeps the band group: call it before
 * ip_gemm_set_band_group, ip_gemm_set_interleave and ip_gemm_set_split.  Returns IP_GEMM_OK, or
 * IP_GEMM_ETILE (not a width the engine has) or IP_GEMM_EDRIVER (the
 * driver refused a map) with *why (if why) saying which; g is then
 * unchanged. */
int ip_gemm_set_tile_n(ip_gemm_args *g, int64_t tile_n, const char **why);
/* ip_gemm_set_tile_n without the tensor maps (plain C, for the model and
 * tests without a driver): a g so retiled runs only once its maps are
 * made for the width (the engine stops the kernel otherwise). */
int ip_gemm_retile(ip_gemm_args *g, int64_t tile_n, const char **why);

/* The tile width for g when `blocks` blocks run the engine at once:
 * IP_GEMM_TILE_N where its tiles fill more than half the blocks; else,
 * among the widths whose tiles fit the blocks in one round, the one the
 * model (IP_GEMM_KB_NS) says is fastest with the ranges
 * ip_gemm_default_splits would give it (ties: the wider). */
int64_t ip_gemm_default_tile_n(const ip_gemm_args *g, int64_t blocks);

/* Sets g's unit order to bands of band_group tile rows (1 or more; below
 * 1 is taken as 1) and the divisors that walk it.  ip_gemm_prepare calls
 * it with ip_gemm_default_band_group's; a caller that wants another order
 * calls it after. */
void ip_gemm_set_band_group(ip_gemm_args *g, int64_t band_group);

/* Spreads the first `rows` rows of g's unit order (from band0: a caller's
 * rows for other GPUs, which it computes first) evenly over the walk, in
 * whole bands, instead of computing them all before the rest: where each
 * output row crosses a link as it is stored, the link then has the whole
 * GEMM to carry them, not its first part (ip_gemm_unit_coords).  The
 * walk still ends on a band of the other rows.  Nothing changes where a
 * band group is one tile row, the order is walked in 64-bit arithmetic,
 * `rows` is less than one band or not less than all but one, or the bands
 * are too many for the 32-bit arithmetic (46340); ip_gemm_set_band_group
 * undoes it. */
#define IP_GEMM_MAX_INTER_BANDS 46340
void ip_gemm_set_interleave(ip_gemm_args *g, int64_t rows);

/* The full band walked w-th (0 <= w < n) when the first f of n full bands
 * are spread (ip_gemm_set_interleave: n = inter_n, f = inter_first, div =
 * div_inter): of the first w bands walked, ceil(w f / n) are of the first
 * f; band w is the next of those where that count grows at w + 1, else
 * the next of the others.  A permutation of 0 .. n - 1 whose last band is
 * one of the others (ceil((n - 1) f / n) = f for 0 < f < n).  The
 * quotients by the host's divisor, in 32 bits (n <= 46340 keeps them
 * below 2^31); on the GPU every thread that walks units runs it. */
IP_GEMM_HD int32_t ip_gemm_inter_band(int32_t w, int32_t n, int32_t f, ip_fastdiv div) {
  const int32_t before = ip_fastdiv_div(w * f + n - 1, div), upto = ip_fastdiv_div((w + 1) * f + n - 1, div);
  return upto > before ? before : f + w - before;
}

/* Splits g's tiles into `splits` k-ranges each (ip_gemm_args, "Split
 * K"), with ws (ip_gemm_split_ws_bytes(g, splits) bytes) and sem
 * (ip_gemm_split_sem_bytes(g) bytes, zeroed) in device memory of the GPU
 * that runs the engine.  splits 1 undoes it (ws and sem may then be
 * NULL).  Returns IP_GEMM_OK, or IP_GEMM_ESPLIT with *why (if why) naming
 * the limit: splits outside 1 .. IP_GEMM_MAX_SPLITS or above g's
 * stages (ip_gemm_k_stages), ws or sem NULL or misaligned; g is then
 * unchanged. */
int ip_gemm_set_split(ip_gemm_args *g, int64_t splits, float *ws, uint32_t *sem, const char **why);
/* The stages of K a tile of g walks (ip_gemm_stages at g's width). */
IP_GEMM_HD int64_t ip_gemm_k_stages(const ip_gemm_args *g) { return ip_gemm_stages(g->k_blocks, g->tile_n); }
int64_t ip_gemm_split_ws_bytes(const ip_gemm_args *g, int64_t splits);
int64_t ip_gemm_split_sem_bytes(const ip_gemm_args *g);

/* The k-ranges a tile of g gets when `blocks` blocks run the engine at
 * once: as many as the blocks hold in one round (blocks / tiles), at most
 * IP_GEMM_SPLIT_DEFAULT_MAX and the stages of K, where the model (IP_GEMM_KB_NS)
 * says they are faster than the whole tile; else 1 (no split), also where
 * its tiles fill more than half the blocks. */
int64_t ip_gemm_default_splits(const ip_gemm_args *g, int64_t blocks);

/* Dynamic shared memory a block needs to run the engine on a device of
 * compute capability major.minor: IP_GEMM_SMEM on 9.x (whichever path the
 * build selected: it covers the fallback too), IP_GEMM_SMEM_FALLBACK
 * elsewhere. */
int ip_gemm_smem_bytes(int major, int minor);

#ifdef __cplusplus
}
#endif

#endif
