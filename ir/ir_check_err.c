/* ir_check_err.c -- how the validator's checks report (ir_check_int.h):
 * an error with its file, line, rank, thread block and step, and a chunk
 * range that leaves its buffer. */
#include "ir_check_int.h"
#include "rt_diag.h"

#include <stdarg.h>
#include <stdio.h>

typedef ir_checker checker;

/* Reports "FILE:LINE: rank R tb T step S: what" (rank, tb and step as far
 * as r, t, s >= 0 name them).  A program built in memory (no file: the
 * compiler's) has no XML line; where its step records the script line it
 * came from (prov, "ring.lua:12"), that leads instead: "ring.lua:12: rank
 * R tb T step S: what". */
void ir_check_verr(checker *c, int r, int t, int s, const char *fmt, va_list ap) {
  char msg[900];
  rt_cut_note(msg, sizeof msg, vsnprintf(msg, sizeof msg, fmt, ap));
  const ir_prog *p = c->p;
  int line = p->line;
  const char *prov = NULL;
  char where[96];
  if (r < 0) where[0] = 0;
  else if (t < 0) { line = p->gpus[r].line; snprintf(where, sizeof where, "rank %d: ", r); }
  else if (s < 0) { line = p->gpus[r].tbs[t].line; snprintf(where, sizeof where, "rank %d tb %d: ", r, t); }
  else {
    line = p->gpus[r].tbs[t].steps[s].line;
    if (!p->file) prov = p->gpus[r].tbs[t].steps[s].prov;
    snprintf(where, sizeof where, "rank %d tb %d step %d: ", r, t, s);
  }
  if (prov && *prov) rt_diag_add(c->diag, "%s: %s%s", prov, where, msg);
  else rt_diag_add(c->diag, "%s:%d: %s%s", ir_prog_where(p), line, where, msg);
  c->errors++;
}

void ir_check_err(ir_checker *c, int r, int t, int s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ir_check_verr(c, r, t, s, fmt, ap);
  va_end(ap);
}

void ir_check_range(checker *c, int r, int t, int s, const char *what, int buf, int off, int cnt, int run,
                    int stride, const ir_geom *g, int owner) {
  int n = g->chunks[buf];
  if (run > 0 && (stride == 0 || (stride > 0 ? stride : -(int64_t)stride) < run)) {
    ir_check_err(c, r, t, s, "%s runs of %d chunks %d apart overlap: a stride must be at least the run (or at most minus it)",
             what, run, stride);
    return;
  }
  int64_t lo, hi;
  ir_pattern_extent(off, run, stride, cnt, &lo, &hi);
  char whose[32] = "this rank";
  if (owner != r) snprintf(whose, sizeof whose, "rank %d", owner);
  if (off < 0 || lo < 0 || hi >= n)
    ir_check_err(c, r, t, s, "%s %s[%lld..%lld] is out of range: buffer %s has %d chunks on %s",
             what, ir_buf_xml[buf], (long long)lo, (long long)hi, ir_buf_xml[buf], n, whose);
}
