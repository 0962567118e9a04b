/* cc_via.h -- the via field of collective{} and option of copy/reduce:
 * whether operations between ranks lower to FIFO messages or to direct
 * steps (put, get, getr), and the rules a direct program keeps at trace
 * time, each an error at the script line.  Internal to compiler/. */
#ifndef CC_VIA_H
#define CC_VIA_H

#include <lua.h>

#include "cc.h"

extern const char *const cc_via_name[CC_VIA_COUNT];   /* "fifo", "direct", "put", "get" */

/* The via value at stack index `at`: -1 when nil, else CC_VIA_*; raises
 * "via='x': expected ..." for anything else. */
int cc_via_parse(lua_State *L, int at);

/* collective{}'s via (the table at index 1), read after its protocol,
 * instances and placement: sets t->via and, for a direct one, refuses
 * what direct programs do not support yet (LL128, instances, placement =
 * "paired", get with LL) at the collective{} line. */
void cc_via_collective(lua_State *L, cc_trace *t);

/* Operation o, about to be recorded (o->via: its own option, -1 none):
 * resolves o->via, decides whether the program is FIFO or direct at its
 * first operation between ranks, and raises the error, at the script
 * line, for an operation between ranks whose kind disagrees with the
 * program's, and for what a direct program does not support yet (ch > 0,
 * sendtb/recvtb, compute steps, parallelize, and -- when this operation
 * makes the program direct -- what cc_via_collective refuses, or an
 * earlier operation that used any of them). */
void cc_via_op(lua_State *L, cc_trace *t, cc_op *o);

/* parallelize(): refused in a direct program (or one collective{} makes
 * direct), at its line. */
void cc_via_parallelize(lua_State *L, const cc_trace *t);

#endif
