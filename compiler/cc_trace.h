/* cc_trace.h -- runs an algorithm script and traces its chunk operations. */
#ifndef CC_TRACE_H
#define CC_TRACE_H

#include "cc.h"

/* Runs the Lua script at `path` in the sandbox with parameters
 * `params[i]` = "key=value" (seen by param() in the script), traces every
 * chunk operation, and checks the collective's postcondition symbolically.
 * Script errors, DSL misuse and a failing postcondition are reported as
 * one line "script.lua:LINE: message" (the Lua traceback after it only
 * with cc_lua_set_traceback(1), cc_lua.h) and give BT_ERR_INVALID. */
bt_result cc_trace_file(const char *path, const char *const *params, int nparams,
                        cc_trace **out, rt_diag *diag);

/* The same for a script in memory, named `name`. */
bt_result cc_trace_string(const char *src, const char *name, const char *const *params,
                          int nparams, cc_trace **out, rt_diag *diag);

void cc_trace_free(cc_trace *t);

/* Expected content of output chunk c of rank r: *rank = -1 for a
 * reduction of input *idx over all ranks (or, for a custom collective's
 * rule *rule with a subset, those ir_expect_sums names; *rule -1 for a
 * built-in collective).  Returns 1, or 0 when a custom
 * collective's expectation says nothing about the chunk, -1 when it cannot
 * be evaluated there (division by zero). */
int cc_expected(const cc_trace *t, int r, int c, int *rank, int *idx, int *rule);

#endif
