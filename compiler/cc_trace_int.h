/* cc_trace_int.h -- what the DSL's files share inside the compiler
 * (cc_trace.c: chunks, copies, reductions, the trace and its helpers;
 * cc_collective.c: collective{}; cc_compute.c: operands and compute
 * steps; cc_script.c: running a script with them): the chunk reference,
 * the helpers and the DSL's functions.  Calls go from cc_script.c to the
 * others and from those to cc_trace.c only.  Not for other stages. */
#ifndef CC_TRACE_INT_H
#define CC_TRACE_INT_H

#include "cc_trace.h"
#include "cc_lua.h"
#include "cc_ref.h"

#define REF_MT "baton.ref"
#define OPND_MT "baton.operand"

typedef struct ref {
  int rank, space, idx, count;
  cc_pat pat;               /* chunk j is cc_pat_at(idx, pat, j) */
  int versions[];           /* version of each chunk when the ref was made */
} ref;

/* The trace of the running script (the DSL functions' upvalue). */
cc_trace *cc_dsl_trace_of(lua_State *L);

/* The trace, once collective{} has run; else a Lua error naming the call. */
cc_trace *cc_dsl_declared(lua_State *L);

/* The line of the user's script that made the current call (not of a
 * baton.* module it went through). */
int cc_dsl_script_line(lua_State *L);

/* Checks a (rank, buffer, index, count) range in 64 bits, before any of
 * it becomes an int; raises a Lua error. */
void cc_dsl_check_range(lua_State *L, cc_trace *t, lua_Integer rank, int space, lua_Integer idx, lua_Integer count);

/* The location (rank, space, idx), which cc_dsl_check_range accepted. */
cc_loc *cc_dsl_loc(lua_State *L, cc_trace *t, int rank, int space, int idx);

/* A version number for a write. */
int cc_dsl_next_version(lua_State *L, cc_trace *t);

/* dst = a copy of src's symbolic value; 0 when out of memory. */
int cc_dsl_val_set(cc_val *dst, const cc_val *src);

/* Records op (its locations made canonical: in place, input and output
 * are one buffer). */
void cc_dsl_add_op(lua_State *L, cc_trace *t, const cc_op *op);

/* Pushes a reference to `count` chunks of (rank, space) from idx along
 * pattern p, with their current versions. */
ref *cc_dsl_push_ref(lua_State *L, cc_trace *t, int rank, int space, int idx, int count, cc_pat p);

/* Raises "WHAT: unknown KIND 'KEY' (it takes a, b, ...)" for the first
 * key of the table at `at` that is not in the NULL-terminated `known`. */
void cc_dsl_check_keys(lua_State *L, int at, const char *const *known, const char *what, const char *kind);

/* The value of field `key`, on top of the stack, as an integer: dflt when
 * it is nil (an error when `required`); an error naming the field when it
 * is not an integer. */
lua_Integer cc_dsl_top_integer(lua_State *L, const char *key, lua_Integer dflt, int required);

/* The DSL's own functions (cc_trace.c), which cc_script.c registers:
 * chunk(), a reference's index and tostring, param(), parallelize(), and
 * the postcondition check run after the script. */
int cc_dsl_chunk(lua_State *L);
int cc_dsl_ref_index(lua_State *L);
int cc_dsl_ref_tostring(lua_State *L);
int cc_dsl_param(lua_State *L);
int cc_dsl_round(lua_State *L);
/* exchange(a, b [, opts]) (cc_exchange.c): both become a (op) b. */
int cc_dsl_exchange(lua_State *L);
int cc_dsl_parallelize(lua_State *L);
int cc_dsl_finish(lua_State *L);

/* collective{...} (cc_collective.c): declares the collective and reads
 * its postcondition. */
int cc_dsl_collective(lua_State *L);

/* The compute calls (cc_compute.c): matrix(), vector(), index(), gemv(),
 * gemm(), embedding_bag(), and an operand's tostring. */
int cc_dsl_matrix(lua_State *L);
int cc_dsl_vector(lua_State *L);
int cc_dsl_index(lua_State *L);
int cc_dsl_gemv(lua_State *L);
int cc_dsl_gemm(lua_State *L);
int cc_dsl_embedding_bag(lua_State *L);
int cc_dsl_opnd_tostring(lua_State *L);

#endif
