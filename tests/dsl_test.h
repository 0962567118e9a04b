/* dsl_test.h -- what the DSL tests share: tracing a script given as text
 * ("t.lua"), and expecting an error of tracing or of lowering. */
#ifndef DSL_TEST_H
#define DSL_TEST_H

#include <stdio.h>

#include "cc_lower.h"
#include "cc_trace.h"
#include "tap.h"

static char msg[4096];   /* the last trace's messages */

/* Traces `src` as "t.lua"; returns the result and leaves messages in msg. */
__attribute__((unused)) static bt_result trace(const char *src, cc_trace **out) {
  rt_diag *d = rt_diag_new(10);
  cc_trace *t = NULL;
  bt_result r = cc_trace_string(src, "t.lua", NULL, 0, &t, d);
  snprintf(msg, sizeof msg, "%s", rt_diag_text(d));
  rt_diag_free(d);
  if (out) *out = t; else cc_trace_free(t);
  return r;
}

/* Tracing `src` must fail with a message containing `expect`. */
__attribute__((unused)) static void fails(const char *src, const char *expect, const char *what) {
  ok(trace(src, NULL) == BT_ERR_INVALID, "%s is an error", what);
  ok_contains(msg, expect, "%s: message names the line and the problem", what);
}

/* Traces `src`, which must pass, and expects lowering to fail with `expect`. */
__attribute__((unused)) static void lower_fails(const char *src, const char *expect, const char *what) {
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  ok(trace(src, &t) == BT_OK, "%s traces: %s", what, msg);
  if (!t) return;
  rt_diag *d = rt_diag_new(10);
  cc_lower_opts lo = {.fuse = 1};
  ok(cc_lower(t, &lo, &p, d) == BT_ERR_INVALID, "%s is refused by the compiler", what);
  ok_contains(rt_diag_text(d), expect, "%s: message names the line and the problem", what);
  ir_prog_free(p);
  cc_trace_free(t);
  rt_diag_free(d);
}

#endif
