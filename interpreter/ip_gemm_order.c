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
  const int wide = n >= IP_GEMM_DEEP_WIDE_N && w_bytes >= IP_GEMM_DEEP_WIDE_W_BYTES;
  return k >= IP_GEMM_DEEP_K || w_bytes >= IP_GEMM_DEEP_W_BYTES || wide ? IP_GEMM_BAND_GROUP_DEEP : IP_GEMM_BAND_GROUP;
}

void ip_gemm_tail(int64_t m, int64_t *m0, int32_t *rows) {
  /* The last tile row's rows, 1 .. IP_GEMM_TILE_M, in one box of exactly
   * them: no row past X.  (Boxes of 8-64 rows, powers of two, a box of 64
   * under one of 8-32, and one of 128 from 97 rows left rows past X or
   * took two loads a k-block where one does: on an H200, up to 1.34x the
   * time.) */
  const int64_t tail = m < 1 ? IP_GEMM_TILE_M : m - (m - 1) / IP_GEMM_TILE_M * IP_GEMM_TILE_M;
  *m0 = tail < IP_GEMM_TILE_M ? m - tail : -1;
  *rows = tail < IP_GEMM_TILE_M ? (int32_t)tail : 0;
}

int ip_gemm_retile(ip_gemm_args *g, int64_t tile_n, const char **why) {
  if (why) *why = "ok";
  if (ip_gemm_width_index(tile_n) < 0) {
    if (why) *why = "ip_gemm: a tile is 256, 128 or 64 columns wide (IP_GEMM_TILE_N, IP_GEMM_TILE_N_MIN)";
    return IP_GEMM_ETILE;
  }
  g->tile_n = (int32_t)tile_n;
  g->tiles_n = (g->n + tile_n - 1) / tile_n;
  g->tiles = g->tiles_m * g->tiles_n;
  g->units = g->tiles;
  g->splits = 1;
  g->div_splits = ip_fastdiv_make(1);
  g->split_ws = NULL;
  g->split_sem = NULL;
  ip_gemm_set_band_group(g, g->band_group);
  return IP_GEMM_OK;
}

/* Tiles of g tile_n columns wide. */
static int64_t tiles_at(const ip_gemm_args *g, int64_t tile_n) { return g->tiles_m * ((g->n + tile_n - 1) / tile_n); }

/* The model's time, ns, of a block of g's GEMM in tiles tile_n wide split
 * into `splits` ranges (ip_gemm.h, IP_GEMM_KB_NS). */
static double model_ns(const ip_gemm_args *g, int64_t tile_n, int64_t splits) {
  const int w = ip_gemm_width_index(tile_n) < 0 ? 0 : ip_gemm_width_index(tile_n);   /* any other: the widest's */
  static const double kb_ns[IP_GEMM_WIDTHS] = {IP_GEMM_KB_NS_256, IP_GEMM_KB_NS_128, IP_GEMM_KB_NS_64};
  static const double split_ns[IP_GEMM_WIDTHS] = {IP_GEMM_SPLIT_NS_256, IP_GEMM_SPLIT_NS_128, IP_GEMM_SPLIT_NS_64};
  const double work = (double)((g->k_blocks + splits - 1) / splits) * kb_ns[w];
  const double dram = (double)g->n * (double)g->k * 2.0 / IP_GEMM_DRAM_BYTES_NS;
  return (work > dram ? work : dram) + (splits > 1 ? split_ns[w] : 0.0);
}

/* The ranges a tile of `tiles` tiles tile_n wide gets (ip_gemm_default_splits). */
static int64_t splits_at(const ip_gemm_args *g, int64_t tile_n, int64_t tiles, int64_t blocks) {
  if (tiles < 1 || blocks < 2 || 2 * tiles > blocks) return 1;
  int64_t s = blocks / tiles;
  if (s > IP_GEMM_SPLIT_DEFAULT_MAX) s = IP_GEMM_SPLIT_DEFAULT_MAX;
  const int64_t stages = ip_gemm_stages(g->k_blocks, tile_n);
  if (s > stages) s = stages;
  return s > 1 && model_ns(g, tile_n, s) < model_ns(g, tile_n, 1) ? s : 1;
}

int64_t ip_gemm_default_tile_n(const ip_gemm_args *g, int64_t blocks) {
  int64_t best = IP_GEMM_TILE_N;
  const int64_t widest = tiles_at(g, best);
  if (g->tiles_m < 1 || g->n < 1 || blocks < 2 || 2 * widest > blocks) return best;
  double best_ns = model_ns(g, best, splits_at(g, best, widest, blocks));
  for (int64_t tn = IP_GEMM_TILE_N / 2; tn >= IP_GEMM_TILE_N_MIN; tn /= 2) {
    const int64_t tiles = tiles_at(g, tn);
    if (tiles > blocks) break;
    const double ns = model_ns(g, tn, splits_at(g, tn, tiles, blocks));
    if (ns < best_ns) best = tn, best_ns = ns;
  }
  return best;
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
  return g->tiles * splits * IP_GEMM_TILE_M * g->tile_n * (int64_t)sizeof(float);
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
  if (splits > ip_gemm_k_stages(g))
    return split_fail(why, "ip_gemm: more splits than stages of K (K / 64, or K / 128 in 64-column tiles)");
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
  return splits_at(g, g->tile_n, g->tiles, blocks);
}
