/* ir_check_int.h -- what the validator's files (ir_check.c, ir_check_err.c, ir_check_direct.c) share; not the library's interface. */
#ifndef IR_CHECK_INT_H
#define IR_CHECK_INT_H

#include <stdarg.h>

#include "ir_check.h"
#include "ir_geom.h"
#include "ir_graph.h"

/* A validation in progress: its program, where problems go, how many there were. */
typedef struct ir_checker {
  const ir_prog *p;
  rt_diag *diag;
  int errors;
} ir_checker;

/* Reports "FILE:LINE: rank R tb T step S: what" (rank, tb and step as far as r, t, s >= 0 name them; a
 * program built in memory leads with its step's script line instead) and counts it. */
void ir_check_verr(ir_checker *c, int r, int t, int s, const char *fmt, va_list ap);

/* The same with its arguments. */
void ir_check_err(ir_checker *c, int r, int t, int s, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Reports a chunk range of step s (`what`: "source", "destination") that leaves buffer buf in geometry g, or
 * a strided one whose runs overlap.  owner: the rank whose buffer it is, named in the message when it is not
 * r (a direct step's peer). */
void ir_check_range(ir_checker *c, int r, int t, int s, const char *what, int buf, int off, int cnt, int run,
                    int stride, const ir_geom *g, int owner);

/* ir_check_direct.c: the rules of direct programs that need no step graph -- peers, counts, the peer's chunk
 * ranges, what a direct program may hold, signal streams, LL landings and the LL pair rule.  Called for a
 * direct program (ir_prog_direct) after the per-rank checks. */
void ir_direct_check(ir_checker *c);

/* ir_check_direct.c: the ordering rules of direct programs (the end rule; Simple: the start rule) over g, the
 * program's step graph, which has no cycle.  Skipped with an INFO log when the vector clocks of every rank
 * would exceed IR_GRAPH_MAX_CLOCKS entries. */
void ir_direct_order(ir_checker *c, const ir_graph *g);

#endif
