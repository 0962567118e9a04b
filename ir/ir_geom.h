/* ir_geom.h -- where a chunk lives in memory: the one chunk geometry that the
 * CPU executor and the GPU interpreter share.
 *
 * A collective's user buffers are made of blocks of `count` elements: one
 * block for allreduce and custom collectives, one per rank for the others
 * (allgather output, reducescatter input, alltoall input and output).  A
 * block holds k = nchunksperloop / nblocks chunks of capacity C =
 * ceil(count / k) elements; chunk j of a block starts at j*C and holds
 * clamp(count - j*C, 0, C) valid elements, so any count works, not only
 * multiples of k.  Scratch chunks are always C elements.  Messages carry
 * full-capacity chunks; reads past a chunk's valid length give zero and
 * writes past it are dropped. */
#ifndef IR_GEOM_H
#define IR_GEOM_H

#include <stdint.h>

#include "ir.h"

typedef struct ir_geom {
  int64_t count;          /* elements per block */
  int64_t cap;            /* C: chunk capacity in elements */
  int32_t k;              /* chunks per block */
  int32_t chunks[IR_BUF_COUNT];  /* chunks addressable in i, o, s */
  int64_t elems[IR_BUF_COUNT];   /* elements of each user buffer (s: chunks*C) */
  /* In-place layout (NCCL's): input and output share one allocation of
   * `span` elements; in/out start at these element offsets in it. */
  int64_t span, in_at, out_at;
  /* Interleaved output (ir_prog.interleave, ir_geom_interleave): 0, or L,
   * the output is [count / L][oblocks][L]: element x of block q is at
   * (x / L) * oblocks * L + q * L + x mod L, so every row holds L elements
   * of each block in block order (what an alltoall feeding a per-sample
   * concatenation wants).  Chunks are then whole rows (cap a multiple of
   * L) and a tile never crosses a row (it divides L). */
  int64_t seg;
  int32_t oblocks;
} ir_geom;

/* Makes g's output interleaved in rows of seg elements (ir_geom.seg);
 * BT_ERR_INVALID, g unchanged, unless seg >= 1 divides the chunk capacity
 * and the count (every chunk is whole rows). */
bt_result ir_geom_interleave(ir_geom *g, int64_t seg);

/* The largest tile of at most `tile` elements, a multiple of `unit`,
 * whose tiles are whole rows of an interleaved output (a multiple of
 * g->seg; only when `rows`: an executor that copies a tile row by row) or
 * lie inside one row (a divisor of g->seg); `tile` itself when g->seg is
 * 0; 0 when none is. */
int64_t ir_geom_tile_fit(const ir_geom *g, int64_t tile, int64_t unit, int rows);

/* The most elements a geometry may address: every buffer, the in-place
 * span and a chunk times the chunks of any buffer (the largest message) stay
 * at or below it, so byte sizes (elements of at most 16 bytes), their sums
 * and a thousand FIFO slots of them stay far inside int64_t and size_t:
 * 2^48 elements, 1 PiB of f32, more than any machine holds. */
#define IR_GEOM_MAX_ELEMS (INT64_C(1) << 48)

/* Fills g for program p at `rank` with `count` elements per block.
 * inplace selects the aliased layout.  Returns BT_ERR_INVALID when the
 * program's chunk counts do not fit its collective (see ir_check), and
 * BT_ERR_UNSUPPORTED when count is negative or so large that a buffer
 * would exceed IR_GEOM_MAX_ELEMS elements (ir_geom_max_count says where
 * that starts); g is then zeroed.  The arithmetic cannot overflow for any
 * count. */
bt_result ir_geom_init(ir_geom *g, const ir_prog *p, int rank, int64_t count, int inplace);

/* The largest count ir_geom_init takes for program p at `rank` (at least
 * 0; 0 when even a count of 1 is too large or the chunk counts do not fit). */
int64_t ir_geom_max_count(const ir_prog *p, int rank, int inplace);

/* Chunks of all ranks' buffers together (i, o and s, as the geometry makes
 * them for the collective, over every rank): what BATON_MAX_CHUNKS bounds.
 * -1 when the chunk counts do not fit the collective (see ir_check). */
int64_t ir_geom_total_chunks(const ir_prog *p);

/* The same geometry in chunk units (count = k, so every chunk is one
 * element and offsets are chunk indices, in_at and out_at included): what
 * the checks that reason about chunks use. */
bt_result ir_geom_chunks(ir_geom *g, const ir_prog *p, int rank, int inplace);

/* Number of blocks of each user buffer for collective c over n ranks. */
void ir_geom_blocks(ir_coll c, int n, int *in_blocks, int *out_blocks);

/* Offset (elements, from the start of the buffer) and valid length of
 * chunk `c` of buffer `b`. */
/* Chunk j of a step's source or destination pattern (ir_step): off + j
 * when run is 0, else off + (j / run) * stride + j % run. */
IR_HD int64_t ir_chunk_at(int32_t off, int32_t run, int32_t stride, int64_t j) {
  return run <= 0 ? off + j : off + (j / run) * stride + j % run;
}

IR_HD int64_t ir_geom_off(const ir_geom *g, int b, int64_t c) {
  if (b == IR_BUF_SCRATCH) return c * g->cap;
  int32_t ci = (int32_t)c;   /* chunk indices are 32-bit (ir_step): a 32-bit division, cheap on a GPU */
  return (int64_t)(ci / g->k) * g->count + (int64_t)(ci % g->k) * g->cap;
}
/* Offset of chunk `c` of buffer b (i or o) in the in-place span: where an
 * in-place call finds it (in_at / out_at plus ir_geom_off). */
IR_HD int64_t ir_geom_span_off(const ir_geom *g, int b, int64_t c) {
  return (b == IR_BUF_INPUT ? g->in_at : g->out_at) + ir_geom_off(g, b, c);
}
/* Where element x of chunk c of buffer b is (elements from the buffer's
 * start): chunk c's offset plus x, except in an interleaved output. */
IR_HD int64_t ir_geom_at(const ir_geom *g, int b, int64_t c, int64_t x) {
  if (b != IR_BUF_OUTPUT || g->seg <= 0) return ir_geom_off(g, b, c) + x;
  int32_t ci = (int32_t)c;
  int64_t q = ci / g->k, j = (int64_t)(ci % g->k) * g->cap + x;   /* block, place in it */
  return (j / g->seg) * g->oblocks * g->seg + q * g->seg + j % g->seg;
}

IR_HD int64_t ir_geom_len(const ir_geom *g, int b, int64_t c) {
  if (b == IR_BUF_SCRATCH) return g->cap;
  int64_t v = g->count - (int64_t)((int32_t)c % g->k) * g->cap;
  return v < 0 ? 0 : v > g->cap ? g->cap : v;
}

/* Tiles: a chunk is processed in ntiles pieces of at most `tile` elements;
 * tile t covers [t*tile, min((t+1)*tile, C)) of every chunk. */
IR_HD int64_t ir_geom_ntiles(const ir_geom *g, int64_t tile) {
  return g->cap == 0 ? 1 : (g->cap + tile - 1) / tile;
}

/* Semaphores of a compute step (ir_sync): the index of tile t's
 * semaphore, among those of a step of ntiles tiles. */
IR_HD int64_t ir_sync_group(int kind, int64_t param, int64_t t) {
  return kind == IR_SYNC_GROUP ? t / param : kind == IR_SYNC_STRIDE ? t % param : t;
}
/* The semaphores a step of ntiles tiles has. */
IR_HD int64_t ir_sync_count(int kind, int64_t param, int64_t ntiles) {
  return kind == IR_SYNC_GROUP ? (ntiles + param - 1) / param : kind == IR_SYNC_STRIDE ? (param < ntiles ? param : ntiles)
                                                                                         : ntiles;
}
/* The tiles of tile t's semaphore: count of them, first + k * stride. */
IR_HD void ir_sync_span(int kind, int64_t param, int64_t t, int64_t ntiles, int64_t *first, int64_t *count,
                        int64_t *stride) {
  if (kind == IR_SYNC_GROUP) {
    *first = t / param * param;
    *count = ntiles - *first < param ? ntiles - *first : param;
    *stride = 1;
  } else if (kind == IR_SYNC_STRIDE) {
    *first = t % param;
    *count = (ntiles - *first + param - 1) / param;
    *stride = param;
  } else {
    *first = t;
    *count = 1;
    *stride = 1;
  }
}

/* Bytes a message of `payload` bytes of one chunk takes in a slot under
 * protocol `proto` (an ir_proto): Simple the payload rounded to 16; LL
 * twice that (8 data bytes per 16-byte line); LL128 whole 128-byte lines
 * of 120 data bytes. */
IR_HD int64_t ir_geom_wire(int proto, int64_t payload) {
  int64_t p16 = (payload + 15) / 16 * 16;
  return proto == IR_PROTO_LL ? 2 * p16 : proto == IR_PROTO_LL128 ? (p16 + 119) / 120 * 128 : p16;
}

/* The tile (elements) the GPU runtime cuts chunks of capacity g->cap into:
 * as large as a slot of slot_bytes allows for a message of `maxcnt`
 * chunks under protocol `proto` (ir_geom_wire), each chunk's part a
 * multiple of 16 bytes; then smaller, so that each of `lanes` lanes gets a
 * tile, but not below min_tile bytes; never above the chunk.  0 when a
 * slot cannot hold 16 bytes per chunk. */
IR_HD int64_t ir_geom_tile(const ir_geom *g, int64_t slot_bytes, int proto, int64_t maxcnt, int lanes, int esize,
                           int64_t min_tile) {
  int64_t avail = slot_bytes / (maxcnt > 0 ? maxcnt : 1);
  int64_t per = proto == IR_PROTO_LL ? avail / 2 : proto == IR_PROTO_LL128 ? avail / 128 * 120 : avail;
  per = per / 16 * 16;
  int64_t tile = per / esize;
  if (tile < 1) return 0;
  int64_t spread = ((g->cap * esize + lanes - 1) / (lanes > 0 ? lanes : 1) + 15) / 16 * 16 / esize;
  int64_t least = min_tile / esize;
  if (spread < least) spread = least;
  if (spread < tile) tile = spread;
  if (tile > g->cap) tile = g->cap;
  return tile < 1 ? 1 : tile;
}

#endif
