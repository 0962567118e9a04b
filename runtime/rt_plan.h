/* rt_plan.h -- one algorithm made ready for one rank's GPU: the
 * interpreter's step and thread-block arrays in device memory, wired to
 * the P2P connections, plus the words that carry cross-tb dependencies. */
#ifndef RT_PLAN_H
#define RT_PLAN_H

#include "ip_gpu.h"
#include "ir.h"
#include "tp_p2p.h"

typedef struct rt_plan {
  ip_gstep *steps;        /* device */
  ip_gtb *tbs;            /* device: lanes * ntbs, lane-major */
  /* ntbs: CUDA blocks per lane, the IR tbs not folded into another */
  uint64_t *words;        /* device: gen then progress, one per CUDA block */
  int ntbs, lanes, step_stride, smem_steps, nthreads;
  int *irtb;              /* host: per block of a lane, its IR thread block */
} rt_plan;

/* The lanes p runs with under protocol proto: BATON_LANES, or when that
 * is 0, `blocks` CUDA blocks (the runtime passes min(128, what the GPU
 * holds)) over the most CUDA blocks per lane any rank needs (its thread
 * blocks less those folded into another: rt_chain), 1..64.  Ranks must
 * agree (connections are made per lane): process-per-GPU communicators
 * check it. */
int rt_plan_lanes(const ir_prog *p, int blocks, int proto);

/* Builds rank's plan of p on the current device with `lanes` lanes, its
 * messages in protocol `proto` (the one it runs: rt_comm_proto).
 * nthreads: the IR's nthreads when set, else the given default. */
bt_result rt_plan_build(rt_plan *pl, const ir_prog *p, int rank, tp_p2p *t, int nthreads, int lanes, int proto);

/* Adds the connections p uses (on every rank, each of `lanes` lanes, for
 * protocol proto) to keys; returns the new count or -1 when out of memory. */
int rt_plan_keys(const ir_prog *p, int lanes, int proto, tp_key **keys, int n, int *cap);

void rt_plan_free(rt_plan *pl);

#endif
