/* ip_gemm_order.c -- the GEMM tile engine's unit order (ip_gemm.h): bands
 * of tile rows, and bands spread over the walk; plain C, so that the
 * order can be set and tested without CUDA. */
#include "ip_gemm.h"

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
  g->fast32 = g->units < INT32_MAX && band_group * g->tiles_n < INT32_MAX;
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
