/* fz_dsl.c -- fuzz target: the input's bytes as a Lua algorithm script through the DSL front end the way `baton compile` takes it: the sandbox and trace (cc_trace_string), lowering (cc_lower), the validator and race check, and for small programs a CPU executor run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "rt_diag.h"

/* What a program may hold for the executor to run it here (a thread per
 * thread block, each step once per tile): a few milliseconds. */
enum { FZ_RANKS = 8, FZ_TBS = 48, FZ_STEPS = 1024 };

/* Quiet, and limits far below the defaults, so that every input's memory
 * and time stay small (the parameters are read once, on first use, so this
 * comes first): the compiler's budget, the script's instructions, a
 * deadline, ranks and chunks. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  setenv("BATON_COMPILE_MAX_MB", "128", 1);
  setenv("BATON_LUA_MAX_INSTRUCTIONS", "300000", 1);
  setenv("BATON_COMPILE_TIMEOUT", "5", 1);
  setenv("BATON_MAX_RANKS", "64", 1);
  setenv("BATON_MAX_CHUNKS", "16384", 1);
  setenv("BATON_IR_MAX_TBS", "256", 1);
  setenv("BATON_IR_MAX_STEPS", "4096", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024) return 0;   /* a script, not a data file */
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = 0;
  rt_diag *d = rt_diag_new(8);
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  if (d && !cc_trace_string(src, "fuzz.lua", NULL, 0, &t, d)) {
    cc_lower_opts lo = {.fuse = 1};
    if (!cc_lower(t, &lo, &p, d) && !ir_check(p, d) && !ir_check_races(p, ir_prog_aliased(p, p->inplace), d) &&
        p->ngpus <= FZ_RANKS && ir_prog_ntbs(p) <= FZ_TBS && ir_prog_nsteps(p) <= FZ_STEPS) {
      ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 37, .inplace = -1, .tile = 8};
      if (!ip_compute_takes(p, IP_F32)) o.dtype = IP_F16;
      ip_cpu_report rep;
      ip_cpu_verify(p, &o, &rep, d);
      o.inplace = 0;   /* as baton compile does: out of place too */
      ip_cpu_verify(p, &o, &rep, d);
    }
  }
  ir_prog_free(p);
  cc_trace_free(t);
  rt_diag_free(d);
  free(src);
  return 0;
}
