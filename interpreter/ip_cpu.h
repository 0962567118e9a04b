/* ip_cpu.h -- the CPU reference executor: runs an IR program for all ranks on
 * real data and checks the collective's postcondition. */
#ifndef IP_CPU_H
#define IP_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "ip_cpu_opts.h"
#include "ir.h"
#include "rt_diag.h"

typedef struct ip_cpu_report {
  int threads;            /* thread blocks run, one per (rank, thread block); all run on the calling thread */
  int64_t ntiles;         /* tile iterations per thread block */
  int64_t steps;          /* steps executed, all tiles */
  int64_t messages;       /* messages sent */
  int64_t bytes;          /* bytes carried by messages */
  int64_t checked;        /* output elements compared */
  int passes;             /* executor runs: 1, or a sources run's windows of ranks */
  double seconds;
} ip_cpu_report;

/* Runs p (which must have passed ir_check) and checks its result.  The
 * thread blocks of every rank run on the calling thread, one at a time: a
 * thread block runs steps until one must wait, and a step that completes
 * makes runnable again only the thread blocks it can unblock (its
 * receiver, the sender whose slot it freed, the thread blocks that depend
 * on it, a direct program's stream waiter and landing readers); when no
 * thread block is runnable and some have not finished, that is a
 * deadlock, exactly.  Messages, slots, dependencies, a direct program's
 * signals and LL landings behave as on the GPU (puts and gets reach the
 * peer's buffers at once), and the result of a race-free program is the
 * same in any order, so one order is as good as any (docs/VERIFY.md).  A
 * fused program computes its input from operands filled with test data
 * (ip_operand_fill); its output is compared with the exact result within
 * ip_compute_tolerance, and a type its compute steps do not take is
 * BT_ERR_UNSUPPORTED.
 * Returns BT_OK when every output element is right, BT_ERR_MISMATCH with
 * the wrong ranks, chunks and values in diag, BT_ERR_DEADLOCK with every
 * stuck rank/tb/step and what it waits for, BT_ERR_INVALID for options
 * that do not fit the program.  Never hangs. */
bt_result ip_cpu_verify(const ir_prog *p, const ip_cpu_opts *o, ip_cpu_report *rep, rt_diag *diag);

/* ip_cpu_verify's route check: a sources run (ip_cpu_opts.sources) of one
 * element a chunk in `like`'s placement, slots, expectation and
 * dimensions, which traces every element to the rank and place it came
 * from.  The routes depend on neither the values, the count nor the tiles,
 * so this proves them exactly, where a value run can miss a misrouted
 * chunk whose values happen to match (the inputs take 9 values).  A
 * fused or interleaved program runs nothing here (BT_OK): it computes its
 * input, which a sources run cannot carry, from varied operands whose
 * values its value runs follow.  The result as ip_cpu_verify's. */
bt_result ip_cpu_verify_routes(const ir_prog *p, const ip_cpu_opts *like, ip_cpu_report *rep, rt_diag *diag);

/* What a failed verification run is called where a verifier reports it
 * (baton verify, baton_verify): DEADLOCK, WRONG RESULT (WRONG ROUTE for a
 * route check), or FAILED with its cause (out of memory, ...), in buf. */
const char *ip_cpu_verdict(bt_result r, int routes, char *buf, size_t n);

#endif
