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
  int sources;            /* 1: a sources run (below); dtype and op are then ignored */
  int src_words;          /* a sources run's rank sets: 64-bit words, 1..IP_CPU_SRC_WORDS; 0: as many as the
                           * ranks need, up to IP_CPU_SRC_WORDS */
} ip_cpu_opts;

/* A sources run carries, instead of a value, where every element came
 * from: an input element is the record (rank, offset in the input); a
 * reduction of two records of the same offset whose ranks differ is the
 * record (that offset, the set of ranks); anything else -- two offsets,
 * a rank counted twice, an operand no step wrote or the output's initial
 * contents -- is a wrong record that stays wrong.  Each output element's
 * record must be exactly its definition's: the one input element, or the
 * reduction over every rank with each rank once.  A non-fused program's
 * steps do not look at values, so this holds for every input, type and
 * operator at once, where a run on values can meet a coincidence.  The
 * rank sets of a program that reduces hold 64 x src_words ranks: a program
 * on more ranks is run once per window of that many (report.passes), each
 * run checking that every rank of its window is in each reduction once,
 * so that together they check every rank.  Fused programs are refused
 * (BT_ERR_UNSUPPORTED): their compute steps need values. */
#define IP_CPU_SRC_WORDS 8

/* The size of an operand dimension a fused program's run leaves unbound:
 * odd, so that vector loops meet a tail. */
#define IP_CPU_DIM 67

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

#endif
