/* ip_gemm_host.c -- fills the GEMM tile engine's problem description
 * (ip_gemm.h): checks shapes, strides and alignment against the engine's
 * named limits and encodes the two TMA tensor maps through the driver's
 * cuTensorMapEncodeTiled, found at run time (no -lcuda link). */
#include "ip_gemm.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rt_cudart.h"

_Static_assert(sizeof(ip_tmap) == sizeof(CUtensorMap) && _Alignof(ip_tmap) == _Alignof(CUtensorMap),
               "ip_tmap is the driver's CUtensorMap");

/* The bytes of one bf16 element. */
#define IP_GEMM_ESIZE 2
/* The driver API version whose cuTensorMapEncodeTiled signature we call. */
#define IP_GEMM_DRIVER_API 12000

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static pthread_once_t encode_once = PTHREAD_ONCE_INIT;
static encode_fn encode;

/* Looks the driver entry point up once per process; encode stays NULL when
 * the driver lacks it (older than CUDA 12). */
static void encode_lookup(void) { encode = (encode_fn)rt_cuda_driver_fn("cuTensorMapEncodeTiled", IP_GEMM_DRIVER_API); }

/* A 2-D bf16 tensor map: `inner` contiguous elements per row, `outer`
 * rows `ld` elements apart, boxes of box_inner x box_outer, 128-byte
 * swizzle (box_inner * 2 must be 128), out-of-bounds elements read as
 * zeros.  Returns 0, or -1 when the driver refuses it. */
static int encode_2d(ip_tmap *tmap, const void *base, int64_t inner, int64_t outer, int64_t ld, uint32_t box_inner,
                     uint32_t box_outer) {
  const cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer};
  const cuuint64_t strides[1] = {(cuuint64_t)ld * IP_GEMM_ESIZE};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t estride[2] = {1, 1};
  CUresult r = encode((CUtensorMap *)tmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box, estride,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : -1;
}

/* Records why and returns code (a small helper for ip_gemm_prepare). */
static int fail(const char **why, int code, const char *msg) {
  if (why) *why = msg;
  return code;
}

int ip_gemm_prepare(ip_gemm_args *g, const void *x, int64_t ldx, const void *w, int64_t ldw, int64_t m, int64_t n,
                    int64_t k, const char **why) {
  memset(g, 0, sizeof *g);
  if (why) *why = "ok";
  if (m < 1 || m > IP_GEMM_MAX_DIM) return fail(why, IP_GEMM_ESHAPE, "ip_gemm: M must be in 1 .. 2^31-1");
  if (n < IP_GEMM_DIM_MULT || n % IP_GEMM_DIM_MULT || n > IP_GEMM_MAX_DIM)
    return fail(why, IP_GEMM_ESHAPE, "ip_gemm: N must be a positive multiple of 64 (IP_GEMM_DIM_MULT), below 2^31");
  if (k < IP_GEMM_DIM_MULT || k % IP_GEMM_DIM_MULT || k > IP_GEMM_MAX_DIM)
    return fail(why, IP_GEMM_ESHAPE, "ip_gemm: K must be a positive multiple of 64 (IP_GEMM_DIM_MULT), below 2^31");
  if (ldx < k || ldx % IP_GEMM_LD_MULT || ldx > IP_GEMM_MAX_LD)
    return fail(why, IP_GEMM_ESTRIDE, "ip_gemm: ldx must be >= K and a multiple of 8 elements (IP_GEMM_LD_MULT)");
  if (ldw < n || ldw % IP_GEMM_LD_MULT || ldw > IP_GEMM_MAX_LD)
    return fail(why, IP_GEMM_ESTRIDE, "ip_gemm: ldw must be >= N and a multiple of 8 elements (IP_GEMM_LD_MULT)");
  if (!x || !w || (uintptr_t)x % IP_GEMM_PTR_ALIGN || (uintptr_t)w % IP_GEMM_PTR_ALIGN)
    return fail(why, IP_GEMM_EALIGN, "ip_gemm: x and w must be non-NULL and 16-byte aligned (IP_GEMM_PTR_ALIGN)");
  pthread_once(&encode_once, encode_lookup);
  if (!encode) return fail(why, IP_GEMM_EDRIVER, "ip_gemm: the driver has no cuTensorMapEncodeTiled (CUDA 12+)");
  /* X: K contiguous, one box = the A tile of one k-block (64 x 128 rows;
   * IP_GEMM_TILE_K is IP_GEMM_SWZ_COLS: one swizzled row per tile row). */
  if (encode_2d(&g->tmap_x, x, k, m, ldx, IP_GEMM_TILE_K, IP_GEMM_TILE_M))
    return fail(why, IP_GEMM_EDRIVER, "ip_gemm: cuTensorMapEncodeTiled refused X's map");
  /* W: N contiguous (MN-major B), one box = 64 columns x one k-block; a
   * B tile is IP_GEMM_TILE_N / IP_GEMM_SWZ_COLS boxes side by side. */
  if (encode_2d(&g->tmap_w, w, n, k, ldw, IP_GEMM_SWZ_COLS, IP_GEMM_TILE_K))
    return fail(why, IP_GEMM_EDRIVER, "ip_gemm: cuTensorMapEncodeTiled refused W's map");
  g->x = x;
  g->w = w;
  g->m = m;
  g->n = n;
  g->k = k;
  g->ldx = ldx;
  g->ldw = ldw;
  g->tiles_m = (m + IP_GEMM_TILE_M - 1) / IP_GEMM_TILE_M;
  g->tile_n = IP_GEMM_TILE_N;
  g->tiles_n = (n + IP_GEMM_TILE_N - 1) / IP_GEMM_TILE_N;
  g->tiles = g->tiles_m * g->tiles_n;
  g->units = g->tiles;
  g->splits = 1;
  g->div_splits = ip_fastdiv_make(1);
  g->k_blocks = k / IP_GEMM_TILE_K;
  g->band0 = 0;
  g->deps_wait = 0;
  g->stall = NULL;
  g->stall_ns = 0;
  ip_gemm_set_band_group(g, ip_gemm_default_band_group(n, k));
  return IP_GEMM_OK;
}

/* Hopper: IP_GEMM_SMEM; other GPUs run the fallback. */
#define IP_GEMM_HOPPER_MAJOR 9
int ip_gemm_smem_bytes(int major, int minor) {
  (void)minor;
  return major == IP_GEMM_HOPPER_MAJOR ? IP_GEMM_SMEM : IP_GEMM_SMEM_FALLBACK;
}
