/* ir_check.h -- validation of an IR program. */
#ifndef IR_CHECK_H
#define IR_CHECK_H

#include "ir.h"
#include "ir_peers.h"
#include "rt_diag.h"

/* Checks everything that can be checked without running the program:
 * header consistency, peers and channels, one thread block per connection
 * direction, opcodes against their thread block's peers, chunk offsets in
 * range, dependencies on existing signalling steps, send/recv pairing
 * (message counts, sizes and declared destinations) and deadlock freedom:
 * no cycle through program order, dependencies and messages, nor, with
 * BATON_EXEC_SLOTS FIFO slots per connection, through full slots.  A
 * direct program (put, get, getr, xchg, sig, wait) is held to the rules of
 * docs/IR.md, "Direct steps" (ir_check_direct.c): its peers, the peer's chunk
 * ranges, Simple or LL and no FIFO or compute step, its signal streams, LL
 * landings and the pair rule, no cycle through signals and landings
 * either, and the end and start rules (vector clocks of every rank, skipped
 * with an INFO log past IR_GRAPH_MAX_CLOCKS entries).  Every
 * problem is added to diag as "file:line: rank R tb T step S: what";
 * returns BT_ERR_INVALID when there is at least one.  A program over
 * BATON_MAX_RANKS, BATON_IR_MAX_TBS, BATON_IR_MAX_STEPS or BATON_MAX_CHUNKS
 * is refused first, naming the limit.  Near-linear in the program's size:
 * connections and compute steps are checked by sorting, not pairwise. */
bt_result ir_check(const ir_prog *p, rt_diag *diag);

/* The same for `slots` FIFO slots per connection (0: BATON_EXEC_SLOTS). */
bt_result ir_check_slots(const ir_prog *p, int slots, rt_diag *diag);

/* Finds data races: two steps of one rank, in different thread blocks,
 * touching a common chunk (at least one writing) with nothing ordering
 * them -- no chain of program order, dependencies and messages.  In a
 * direct program a put's destination and a get's source are accesses to
 * the peer's memory, so the two steps may be on any ranks (both are
 * named), ordered also through signals and landings by the clocks of
 * every rank's columns (the whole check is skipped with an INFO log where
 * those would exceed 64 Mi entries).  With
 * `aliased` the program's i and o are one span (an in-place call, see
 * ir_prog_aliased).  Each race goes to diag with both steps; returns
 * BT_ERR_INVALID if there is one.  Needs ir_check to have passed.
 * Time and memory are linear in the segments (runs of chunks no step's
 * range cuts) the steps' ranges cover, plus vector clocks of steps x
 * thread blocks; a rank where either is over 64 Mi is skipped with an
 * INFO log (a program of one rank with 4,096 thread blocks of 5 steps each
 * gets there within the default BATON_IR_MAX_* limits): a caller that
 * gives a verdict must say so (ir_check_races_of).  Of the races of one
 * chunk, the first in the programs' order is named. */
bt_result ir_check_races(const ir_prog *p, int aliased, rt_diag *diag);

/* ir_check_races, with the number of ranks whose check was skipped for
 * size in *unchecked (0: every rank checked; BT_OK then proves nothing
 * for those ranks). */
bt_result ir_check_races_of(const ir_prog *p, int aliased, int *unchecked, rt_diag *diag);

/* Whether an in-place call may run p as it is, its input and output one
 * span: an in-place program, or an out-of-place AllToAll that
 * ir_check_races_of proves race-free so on every rank (no block written
 * before every read of what it overwrites).  The runtime runs such a
 * program's in-place calls with no copy of the input (rt_algo.c), and the
 * CPU executor and baton verify run them so.  Needs ir_check to have
 * passed. */
int ir_prog_inplace_as_is(const ir_prog *p);


#endif
