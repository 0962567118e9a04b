/* ip_gemm_host.c -- fills the GEMM tile engine's problem description
 * (ip_gemm.h): checks shapes, strides and alignment against the engine's
 * named limits and encodes the two TMA tensor maps for the tile width
 * through the driver's cuTensorMapEncodeTiled, found at run time (no
 * -lcuda link). */
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

/* A 3-D bf16 tensor map over base: dims[0] contiguous elements (64: one
 * 128-byte swizzled row), dims[1] and dims[2] strides[0] and strides[1]
 * bytes apart, boxes of box[0..2], 128-byte swizzle, out-of-bounds
 * elements read as zeros.  Returns 0, or -1 when the driver refuses it. */
static int encode_3d(ip_tmap *tmap, const void *base, const cuuint64_t dims[3], const cuuint64_t strides[2],
                     const cuuint32_t box[3]) {
  const cuuint32_t estride[3] = {1, 1, 1};
  CUresult r = encode((CUtensorMap *)tmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)base, dims, strides, box, estride,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : -1;
}

/* A map of g's X: a k-block's 64 elements of a row, rows ldx apart,
 * k-blocks 128 bytes apart; a box is kb k-blocks of `rows` rows end to
 * end (IP_GEMM_TILE_M rows: kb A tiles; fewer: the tail's map,
 * ip_gemm_args.tmap_xt).  Returns 0, or -1 when the driver
 * refuses it. */
static int encode_x(const ip_gemm_args *g, uint32_t rows, uint32_t kb, ip_tmap *mx) {
  const cuuint64_t xd[3] = {IP_GEMM_TILE_K, (cuuint64_t)g->m, (cuuint64_t)g->k_blocks};
  const cuuint64_t xs[2] = {(cuuint64_t)g->ldx * IP_GEMM_ESIZE, IP_GEMM_TILE_K * IP_GEMM_ESIZE};
  const cuuint32_t xb[3] = {IP_GEMM_TILE_K, rows, kb};
  return encode_3d(mx, g->x, xd, xs, xb);
}

/* g's two tensor maps for tiles tile_n wide (ip_gemm_args: one box of
 * each is a stage) into *mx and *mw.  Returns 0, or -1 when the driver
 * refuses one. */
static int encode_maps(const ip_gemm_args *g, int64_t tile_n, ip_tmap *mx, ip_tmap *mw) {
  const cuuint32_t kb = (cuuint32_t)ip_gemm_stage_kb(tile_n);
  /* W: a group's 64 columns of a row, rows ldw apart, groups 128 bytes
   * apart: a box is tile_n / 64 boxes of 64 kb rows x 64 columns end to
   * end. */
  const cuuint64_t wd[3] = {IP_GEMM_SWZ_COLS, (cuuint64_t)g->k, (cuuint64_t)(g->n / IP_GEMM_SWZ_COLS)};
  const cuuint64_t ws[2] = {(cuuint64_t)g->ldw * IP_GEMM_ESIZE, IP_GEMM_SWZ_COLS * IP_GEMM_ESIZE};
  const cuuint32_t wb[3] = {IP_GEMM_SWZ_COLS, kb * IP_GEMM_TILE_K, (cuuint32_t)(tile_n / IP_GEMM_SWZ_COLS)};
  return encode_x(g, IP_GEMM_TILE_M, kb, mx) || encode_3d(mw, g->w, wd, ws, wb) ? -1 : 0;
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
  if (encode_maps(g, IP_GEMM_TILE_N, &g->tmap_x, &g->tmap_w))
    return fail(why, IP_GEMM_EDRIVER, "ip_gemm: cuTensorMapEncodeTiled refused X's or W's map");
  ip_gemm_tail(m, &g->tail_m0, &g->tail_rows);
  if (g->tail_m0 >= 0 && encode_x(g, (uint32_t)g->tail_rows, 1, &g->tmap_xt))
    return fail(why, IP_GEMM_EDRIVER, "ip_gemm: cuTensorMapEncodeTiled refused a map of X's last rows");
  g->maps_tile_n = IP_GEMM_TILE_N;
  ip_gemm_set_band_group(g, ip_gemm_default_band_group(n, k));
  return IP_GEMM_OK;
}

int ip_gemm_set_tile_n(ip_gemm_args *g, int64_t tile_n, const char **why) {
  if (why) *why = "ok";
  if (ip_gemm_width_index(tile_n) < 0) return ip_gemm_retile(g, tile_n, why);   /* its refusal */
  if (tile_n == g->maps_tile_n) return ip_gemm_retile(g, tile_n, why);         /* the maps fit already */
  pthread_once(&encode_once, encode_lookup);
  if (!encode) return fail(why, IP_GEMM_EDRIVER, "ip_gemm: the driver has no cuTensorMapEncodeTiled (CUDA 12+)");
  ip_tmap mx, mw;
  if (encode_maps(g, tile_n, &mx, &mw))
    return fail(why, IP_GEMM_EDRIVER, "ip_gemm: cuTensorMapEncodeTiled refused X's or W's map");
  const int rc = ip_gemm_retile(g, tile_n, why);
  if (rc != IP_GEMM_OK) return rc;
  g->tmap_x = mx;
  g->tmap_w = mw;
  g->maps_tile_n = (int32_t)tile_n;
  return IP_GEMM_OK;
}

/* Hopper: IP_GEMM_SMEM; other GPUs run the fallback. */
#define IP_GEMM_HOPPER_MAJOR 9
int ip_gemm_smem_bytes(int major, int minor) {
  (void)minor;
  return major == IP_GEMM_HOPPER_MAJOR ? IP_GEMM_SMEM : IP_GEMM_SMEM_FALLBACK;
}
