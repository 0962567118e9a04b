/* cc_ref.h -- the patterns of strided references: reading and checking a
 * script's {run =, stride =} table, the chunks a pattern covers, and how a
 * reference prints.  Internal to compiler/. */
#ifndef CC_REF_H
#define CC_REF_H

#include "cc.h"

#include <lua.h>

/* Reads the pattern keys run and stride of the table at `at` into *p
 * (consecutive when neither is there; run defaults to 1 when only stride
 * is).  `what` names the call in messages ("chunk", "copy").  Raises
 * "WHAT: ..." for a stride of 0, |stride| < run, a run below 1, a value
 * that is not an integer, or one past CC_MAX_INDEX.  A run of at least
 * `count` chunks is one run: consecutive. */
void cc_pat_read(lua_State *L, int at, int count, const char *what, cc_pat *p);

/* The lowest and highest offsets from the first chunk that `count` chunks
 * of pattern p reach (64 bits: before any check). */
void cc_pat_extent(cc_pat p, int64_t count, int64_t *lo, int64_t *hi);

/* The position j of chunk c among `count` chunks of pattern p from idx, or
 * -1 when p does not cover c. */
int cc_pat_find(int idx, cc_pat p, int count, int c);

/* ", {stride = S}" or ", {run = M, stride = S}"; "" when consecutive. */
void cc_pat_format(cc_pat p, char *buf, size_t n);

#endif
