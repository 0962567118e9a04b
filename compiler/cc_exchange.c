/* cc_exchange.c -- exchange(a, b): two ranks trade chunks and both keep the
 * combination, the pairwise step of recursive doubling, Swing and
 * butterflies, written as the copies and reductions it is made of. */
#include "cc_trace_int.h"

#include <lauxlib.h>
#include <string.h>

/* Calls method `name` of the reference at stack index `self` with the
 * nargs values on top of the stack; leaves its result there. */
static void call_method(lua_State *L, int self, const char *name, int nargs) {
  lua_getfield(L, self, name);
  lua_pushvalue(L, self);
  lua_rotate(L, -nargs - 2, 2);   /* method, self below the arguments */
  lua_call(L, nargs + 1, 1);
}

/* The options of a copy or reduce an exchange makes: ch, sendtb, recvtb,
 * via from the exchange's own (at index o, or none), and for the copy
 * into scratch the pattern of the chunks it stands for. */
static void push_step_opts(lua_State *L, int o, const ref *like) {
  static const char *const keys[] = {"ch", "sendtb", "recvtb", "via"};
  lua_createtable(L, 0, 6);
  for (int k = 0; o && k < 4; k++) {
    lua_getfield(L, o, keys[k]);
    lua_setfield(L, -2, keys[k]);
  }
  if (like && like->pat.run) {
    lua_pushinteger(L, like->pat.run);
    lua_setfield(L, -2, "run");
    lua_pushinteger(L, like->pat.stride);
    lua_setfield(L, -2, "stride");
  }
}

/* exchange(a, b [, opts]): references to the same number of chunks on two
 * ranks; afterwards both hold a (op) b.  Each sends its old value into a
 * scratch buffer of the other (opts.scratch, "exchange", at the index and
 * pattern of the chunks it will be added to), then each adds what it
 * received; the compiler folds the pair back into one receive-reduce per
 * rank where that adds no wait.  opts: scratch, ch, sendtb, recvtb, via.
 * Returns the new references to a and b. */
int cc_dsl_exchange(lua_State *L) {
  static const char *const known[] = {"scratch", "ch", "sendtb", "recvtb", "via", NULL};
  cc_dsl_declared(L);
  ref *a = luaL_checkudata(L, 1, REF_MT), *b = luaL_checkudata(L, 2, REF_MT);
  int o = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    cc_dsl_check_keys(L, 3, known, "exchange", "option");
    o = 3;
  }
  if (a->rank == b->rank)
    luaL_error(L, "exchange between rank %d and itself: the two references must be on two ranks", a->rank);
  if (a->count != b->count)
    luaL_error(L, "exchange of references of different counts (%d and %d)", a->count, b->count);
  const char *scratch = "exchange";
  if (o) {
    lua_getfield(L, o, "scratch");
    if (!lua_isnil(L, -1)) {
      if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "exchange: option scratch must be a buffer name");
      scratch = lua_tostring(L, -1);
    }
  }
  lua_settop(L, 3);
  lua_pushstring(L, scratch);   /* 4: the scratch buffer's name */
  /* 5: b's old value at a's rank; 6: a's old value at b's rank */
  for (int k = 0; k < 2; k++) {
    const ref *to = k ? b : a;
    lua_pushinteger(L, to->rank);
    lua_pushvalue(L, 4);
    lua_pushinteger(L, to->idx);
    push_step_opts(L, o, to);
    call_method(L, k ? 1 : 2, "copy", 4);
  }
  /* 7: a (op) b at a; 8: the same at b */
  for (int k = 0; k < 2; k++) {
    lua_pushvalue(L, 5 + k);
    push_step_opts(L, o, NULL);
    call_method(L, 1 + k, "reduce", 2);
  }
  return 2;
}
