/* cc_compile.h -- the whole compile pipeline: Lua script -> validated, CPU-verified IR program. */
#ifndef CC_COMPILE_H
#define CC_COMPILE_H

#include <stdint.h>
#include <stdio.h>

#include "ir.h"
#include "rt_diag.h"
#include "rt_result.h"

typedef struct cc_compile_opts {
  int fuse;               /* 1: form rcs, rrs, rrcs (baton compile's default); 0: --no-fuse */
  int sized;              /* 1: minbytes / maxbytes replace the script's (--sizes) */
  uint64_t minbytes, maxbytes;
  FILE *explain;          /* non-NULL: the readable listing goes here after lowering (--explain) */
} cc_compile_opts;

/* Where a compile stopped. */
typedef enum cc_stage {
  CC_STAGE_DONE,          /* it did not: the program is verified */
  CC_STAGE_TRACE,         /* the script, the DSL or its postcondition (diag: "script:LINE: message") */
  CC_STAGE_LOWER,         /* lowering and scheduling (diag names the script line) */
  CC_STAGE_CHECK,         /* validation or the race check of the lowered program */
  CC_STAGE_VERIFY         /* the CPU executor's runs */
} cc_stage;

typedef struct cc_compile_report {
  cc_stage stage;         /* CC_STAGE_DONE, or the stage that failed */
  char what[4352];        /* a failed CHECK or VERIFY stage: the headline that goes before diag's
                           * details ("SCRIPT: the compiled program fails ...; nothing written");
                           * "" otherwise (diag's messages name the script themselves) */
  long checked;           /* output elements the CPU runs compared */
  double trace_s, lower_s, check_s, races_s, runs_s;   /* seconds each stage took */
} cc_compile_report;

/* Compiles the algorithm script at `script` with parameters params[i] =
 * "KEY=VALUE" (read by param() in the script): traces it in the sandbox
 * (cc_trace_file), lowers it (cc_lower, fusion per o->fuse), applies
 * o's size range and verifies it (cc_verify).  On success *out is the
 * program (the caller writes it and frees it with ir_prog_free) and
 * rep->stage is CC_STAGE_DONE.  On failure *out is NULL, rep->stage says
 * where it stopped, rep->what holds a headline where diag's messages need
 * one, and diag the messages; the result is the failing stage's
 * (BT_ERR_INVALID for a script or program error, BT_ERR_MISMATCH /
 * BT_ERR_DEADLOCK for a wrong run).  o may be NULL (fusion on, the
 * script's sizes).  rep is filled in either case and may be NULL. */
bt_result cc_compile_file(const char *script, const char *const *params, int nparams, const cc_compile_opts *o,
                          ir_prog **out, cc_compile_report *rep, rt_diag *diag);

/* What cc_compile_file does to a lowered program p before it lets it be
 * written: ir_check (deadlock freedom with BATON_EXEC_SLOTS FIFO slots
 * included), ir_check_races for the program's own placement, then three
 * CPU-executor runs side by side, each on one thread.  A fused or
 * interleaved program runs on values (f32 sum at 4099 elements in
 * 128-element tiles, i32 max -- f16 for a fused program -- at 7 in
 * 1-element tiles, bf16 sum out of place; types its compute steps take).
 * Any other makes a sources run (ip_cpu_opts.sources, one element per
 * chunk: every route checked exactly) in its own layout, a second one out
 * of place when that call keeps i and o apart (else i32 max at 7
 * elements), and one small tiled run on values at an uneven count (f32
 * sum, chunks of 3..512 elements by the program's size, 3 or 4 tiles
 * each).
 * Fills rep's stage (CC_STAGE_CHECK or CC_STAGE_VERIFY when that stage
 * failed, else CC_STAGE_DONE), what (the headline, naming `script`),
 * checked and check_s, races_s, runs_s; diag gets the messages. */
bt_result cc_verify(const ir_prog *p, const char *script, cc_compile_report *rep, rt_diag *diag);

#endif
