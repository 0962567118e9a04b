/* ip_gemm_order.c -- the GEMM tile engine's units and their order
 * (ip_gemm.h): bands of tile rows, bands spread over the walk, and tiles
 * split into k-ranges; plain C, so that they can be set and tested
 * without CUDA. */
#include "ip_gemm.h"

#include <stddef.h>
#include <stdint.h>

int64_t ip_gemm_default_band_group(int64_t n, int64_t k) {
  if (n < 1 || k < 1 || n > IP_GEMM_MAX_DIM || k > IP_GEMM_MAX_DIM) return IP_GEMM_BAND_GROUP;
  const int64_t w_bytes = n * k * 2;   /* bf16; below 2^63 within the limits */
  return k >= IP_GEMM_DEEP_K || w_bytes >= IP_GEMM_DEEP_W_BYTES ? IP_GEMM_BAND_GROUP_DEEP : IP_GEMM_BAND_GROUP;
}

void ip_gemm_set_band_group(ip_gemm_args *g, int64_t band_group) {
  if (band_group < 1) band_group = 1;
  if (band_group > g->tiles_m && g->tiles_m > 0) band_group = g->tiles_m;
  g->band_group = band_group;
  g->inter_n = g->inter_first = 0;
  /* 32-bit only where every quotient and product below 2^31 stays exact */
  g->fast32 = g->tiles < INT32_MAX && band_group * g->tiles_n < INT32_MAX;
  if (!g->fast32) return;
  g->div_tiles_n = ip_fastdiv_make((uint32_t)g->tiles_n);
  g->div_group = ip_fastdiv_make((uint32_t)(band_group * g->tiles_n));
  g->div_band = ip_fastdiv_make((uint32_t)band_group);
  g->div_last = ip_fastdiv_make((uint32_t)(g->tiles_m % band_group));
}

void ip_gemm_set_interleave(ip_gemm_args *g, int64_t rows) {
  g->inter_n = g->inter_first = 0;
  if (g->band_group < 2 || !g->fast32) return;   /* (a zeroed g among them: no division by its band) */
  const int64_t full = g->tiles_m / g->band_group, first = rows / (g->band_group * IP_GEMM_TILE_M);
  if (first < 1 || first >= full || full > IP_GEMM_MAX_INTER_BANDS) return;
  g->inter_n = (int32_t)full;
  g->inter_first = (int32_t)first;
  g->div_inter = ip_fastdiv_make((uint32_t)full);
}

int64_t ip_gemm_split_ws_bytes(const ip_gemm_args *g, int64_t splits) {
  if (splits < 1 || splits > IP_GEMM_MAX_SPLITS || g->tiles < 1) return 0;
  return g->tiles * splits * IP_GEMM_TILE_M * IP_GEMM_TILE_N * (int64_t)sizeof(float);
}

int64_t ip_gemm_split_sem_bytes(const ip_gemm_args *g) {
  return g->tiles * IP_GEMM_SPLIT_SEMS * (int64_t)sizeof(uint32_t);
}

/* Records why and returns IP_GEMM_ESPLIT. */
static int split_fail(const char **why, const char *msg) {
  if (why) *why = msg;
  return IP_GEMM_ESPLIT;
}

int ip_gemm_set_split(ip_gemm_args *g, int64_t splits, float *ws, uint32_t *sem, const char **why) {
  if (why) *why = "ok";
  if (splits < 1 || splits > IP_GEMM_MAX_SPLITS)
    return split_fail(why, "ip_gemm: splits must be in 1 .. 16 (IP_GEMM_MAX_SPLITS)");
  if (splits > g->k_blocks) return split_fail(why, "ip_gemm: more splits than k-blocks (K / 64)");
  if (splits > 1 && (!ws || !sem || (uintptr_t)ws % 16 || (uintptr_t)sem % 4))
    return split_fail(why, "ip_gemm: split K needs a 16-byte aligned workspace and zeroed semaphores");
  if (g->tiles * splits >= INT32_MAX) return split_fail(why, "ip_gemm: tiles x splits must stay below 2^31");
  g->splits = (int32_t)splits;
  g->div_splits = ip_fastdiv_make((uint32_t)splits);
  g->units = g->tiles * splits;
  g->split_ws = splits > 1 ? ws : NULL;
  g->split_sem = splits > 1 ? sem : NULL;
  return IP_GEMM_OK;
}

int64_t ip_gemm_default_splits(const ip_gemm_args *g, int64_t blocks) {
  if (g->tiles < 1 || blocks < 2 || 2 * g->tiles > blocks) return 1;
  int64_t s = blocks / g->tiles;
  if (s > IP_GEMM_SPLIT_DEFAULT_MAX) s = IP_GEMM_SPLIT_DEFAULT_MAX;
  if (s > g->k_blocks) s = g->k_blocks;
  return g->k_blocks - g->k_blocks / s < IP_GEMM_SPLIT_MIN_SAVED ? 1 : s;
}
