/* ip_cpu.h -- the CPU reference executor: runs an IR program for all ranks on
 * real data and checks the collective's postcondition. */
#ifndef IP_CPU_H
#define IP_CPU_H

#include <stdint.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "ir_expect.h"
#include "ir.h"
#include "rt_diag.h"

typedef struct ip_cpu_opts {
  ip_dtype dtype;
  ip_redop op;
  int64_t count;          /* elements per block (see ir_geom.h) */
  int inplace;            /* 1 in place, 0 out of place, -1 the program's own */
  int64_t tile;           /* elements per tile; 0: BATON_EXEC_TILE, else one tile per chunk */
  int slots;              /* FIFO slots per connection; 0: BATON_EXEC_SLOTS */
  const ir_expect *expect;/* custom collectives: the postcondition; NULL: the program's expect attribute */
  const ip_dims *dims;    /* fused programs: dimension bindings (e.g. K); an unbound one is IP_CPU_DIM */
} ip_cpu_opts;

/* The size of an operand dimension a fused program's run leaves unbound:
 * odd, so that vector loops meet a tail. */
#define IP_CPU_DIM 67

typedef struct ip_cpu_report {
  int threads;            /* one per (rank, thread block) */
  int64_t ntiles;         /* tile iterations per thread block */
  int64_t steps;          /* steps executed, all tiles */
  int64_t messages;       /* messages sent */
  int64_t bytes;          /* bytes carried by messages */
  int64_t checked;        /* output elements compared */
  double seconds;
} ip_cpu_report;

/* Runs p (which must have passed ir_check) and checks its result.  A
 * fused program computes its input from operands filled with test data
 * (ip_operand_fill); its output is compared with the exact result within
 * ip_compute_tolerance, and a type its compute steps do not take is
 * BT_ERR_UNSUPPORTED.
 * Returns BT_OK when every output element is right, BT_ERR_MISMATCH with
 * the wrong ranks, chunks and values in diag, BT_ERR_DEADLOCK with every
 * stuck rank/tb/step and what it waits for, BT_ERR_INVALID for options
 * that do not fit the program.  Never hangs. */
bt_result ip_cpu_verify(const ir_prog *p, const ip_cpu_opts *o, ip_cpu_report *rep, rt_diag *diag);

#endif
