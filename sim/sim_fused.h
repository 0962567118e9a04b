/* sim_fused.h -- fused programs in a simulation: the dimensions the timed
 * call binds (baton sim --dim) and what the CPU executor binds to run the
 * program one element a tile, and the time of a compute step. */
#ifndef SIM_FUSED_H
#define SIM_FUSED_H

#include <stdint.h>

#include "ip_compute.h"
#include "ir.h"
#include "ir_geom.h"
#include "rt_diag.h"
#include "rt_result.h"
#include "sim_spec.h"

/* A GEMV's columns (K) when the call does not bind them. */
#define SIM_GEMV_K 4096

typedef struct sim_fused {
  ip_dims exec;                    /* the executor's bindings: every dimension that makes rows, 1 */
  int64_t seg;                     /* the timed call's interleaved output row (ir_geom.seg), 0 none */
  double cols[IR_MAX_OPERANDS];    /* per operand: its columns in the timed call (a matrix), 0 unknown */
  double pool;                     /* embedding bags: indices per bag in the timed call (1 unless bound) */
} sim_fused;

/* Prepares f for program p timed as a call whose rank 0 has geometry *g
 * (the real count; its output is made interleaved here when p's is), the
 * call binding `call` (NULL: none), each element `esize` bytes, `bytes`
 * the call's size (for messages).  BT_ERR_INVALID with the reason in diag
 * when a dimension the time needs is not bound (a GEMM's X and W columns,
 * an embedding table's columns, the interleave's factors; a GEMV's K is
 * SIM_GEMV_K when not), or the call's input or output is not whole rows
 * of them, or its operands' shapes do not fit it (the runtime's checks). */
bt_result sim_fused_setup(sim_fused *f, const ir_prog *p, ir_geom *g, const ip_dims *call, int esize,
                          uint64_t bytes, rt_diag *diag);

/* The largest tile of at most `tile` elements that keeps to the rows of
 * g's interleaved output as the runtime cuts them (whole rows for Simple,
 * inside one row otherwise; 16-byte pieces where the rows allow); `tile`
 * when g has none; 0 when no tile fits. */
int64_t sim_fused_tile(const ir_geom *g, int64_t tile, int esize, int simple);

/* A compute step's time in us for `elems` output elements of esize bytes
 * on system s: a GEMV reads K matrix elements per output element at
 * compute.gemv_gbs, a GEMM does F multiply-adds per output element at
 * compute.gemm_tflops, an embedding bag reads its indices' rows at
 * compute.embed_gbs. */
double sim_fused_compute_us(const sim_fused *f, const sim_spec *s, const ir_step *st, int64_t elems, int esize);

#endif
