/* rt_plan.h -- one algorithm made ready for one rank's GPU: the
 * interpreter's step and thread-block arrays in device memory, wired to
 * the P2P connections, plus the words that carry cross-tb dependencies. */
#ifndef RT_PLAN_H
#define RT_PLAN_H

#include "ip_gpu.h"
#include "ir.h"
#include "tp.h"

typedef struct rt_plan {
  ip_gstep *steps;        /* device */
  ip_gtb *tbs;            /* device: lanes * ntbs, lane-major, then the compute tbs' */
  /* ntbs: CUDA blocks per lane, the IR tbs not folded into another and
   * not compute thread blocks */
  uint64_t *words;        /* device: gen then progress, one per CUDA block */
  int ntbs, lanes, step_stride, smem_steps, nthreads;
  int *irtb;              /* host: per block of a lane, then per compute tb, its IR thread block */
  /* Compute (docs/FUSED.md): compute thread blocks, the CUDA blocks each
   * runs as, their steps (all of them), the semaphore words; the stage of
   * shared memory when the rank computes; whether a communication block
   * computes too (inline: a tile must fit the stage). */
  int ncomp, cwidth, csteps;
  uint64_t *sems;         /* device */
  int stage_bytes, inline_compute;
  /* gemm steps (the gemm kernel runs the plan): input chunks gchunk0 ..
   * + gchunks - 1 are computed, gmap describes each (ip_gargs.gmap). */
  int gemm, gchunk0, gchunks;
  int gx, gw, gfirst;     /* the operands X and W; the chunk the first gemm step computes first (the GEMM's
                             walk starts there: rt_call) */
  int32_t *gmap;          /* device */
  int gposts;             /* some computed chunk's semaphores are waited on */
  int gdbuf, gdchunk0;    /* the buffer every computed chunk goes to, chunk gchunk0 + i to its chunk gdchunk0 + i; gdbuf
                             -1: not so (whether they then lie end to end depends on the call: rt_call) */
} rt_plan;

/* CUDA blocks of a launch of the plan: every lane's, then every compute
 * thread block's. */
static inline int rt_plan_blocks(const rt_plan *pl) { return pl->ntbs * pl->lanes + pl->ncomp * pl->cwidth; }

/* The lanes p runs with under protocol proto: BATON_LANES, or when that
 * is 0, `blocks` CUDA blocks (the runtime passes min(128, what the GPU
 * holds)) over the most CUDA blocks per lane any rank needs (its thread
 * blocks less those folded into another: rt_chain), 1..64.  A program
 * with compute thread blocks gives its communication an eighth of
 * `blocks` (its messages are small beside the computation, which takes
 * the rest: rt_plan_build).  Ranks must agree (connections are made per
 * lane): process-per-GPU communicators check it. */
int rt_plan_lanes(const ir_prog *p, int blocks, int proto);

/* Builds rank's plan of p on the current device with `lanes` lanes, its
 * messages in protocol `proto` (the one it runs: rt_comm_proto).
 * nthreads: the IR's nthreads when set, else the given default.  The
 * compute thread blocks take the blocks the GPU holds beyond the lanes'
 * (1 / `share` of them: the ranks sharing the GPU take the rest), or
 * BATON_COMPUTE_BLOCKS. */
bt_result rt_plan_build(rt_plan *pl, const ir_prog *p, int rank, tp_set *t, int nthreads, int lanes, int proto,
                        int share);

/* Adds the connections p uses (on every rank, each of `lanes` lanes, for
 * protocol proto) to keys; returns the new count or -1 when out of memory. */
int rt_plan_keys(const ir_prog *p, int lanes, int proto, tp_key **keys, int n, int *cap);

void rt_plan_free(rt_plan *pl);

#endif
