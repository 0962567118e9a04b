/* cc_ref.c -- strided references' patterns: reading, bounds and lookup. */
#include "cc_ref.h"

#include <lauxlib.h>
#include <stdio.h>

/* Floor division (b > 0). */
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The integer at key `key` of the table at `at`, or `dflt` when nil. */
static lua_Integer pat_int(lua_State *L, int at, const char *key, lua_Integer dflt, const char *what) {
  lua_getfield(L, at, key);
  lua_Integer v = dflt;
  if (!lua_isnil(L, -1)) {
    int isint = 0;
    v = lua_tointegerx(L, -1, &isint);
    if (!isint)
      luaL_error(L, "%s: pattern %s must be an integer, not %s", what, key,
                 lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

void cc_pat_read(lua_State *L, int at, int count, const char *what, cc_pat *p) {
  at = lua_absindex(L, at);
  *p = (cc_pat){0, 0};
  lua_getfield(L, at, "stride");
  lua_getfield(L, at, "run");
  int none = lua_isnil(L, -1) && lua_isnil(L, -2);
  lua_pop(L, 2);
  if (none) return;
  lua_Integer stride = pat_int(L, at, "stride", 0, what), run = pat_int(L, at, "run", 1, what);
  if (!stride) luaL_error(L, "%s: a pattern needs a stride other than 0 (stride = S: runs start S chunks apart)", what);
  if (run < 1 || run > CC_MAX_INDEX) luaL_error(L, "%s: pattern run=%I out of range [1, %d]", what, run, CC_MAX_INDEX);
  if (stride < -CC_MAX_INDEX || stride > CC_MAX_INDEX)
    luaL_error(L, "%s: pattern stride=%I out of range [-%d, %d]", what, stride, CC_MAX_INDEX, CC_MAX_INDEX);
  if ((stride < 0 ? -stride : stride) < run)
    luaL_error(L, "%s: pattern {run = %I, stride = %I} overlaps itself: runs of %I chunks need |stride| >= %I", what,
               run, stride, run, run);
  if (run < count && !(run == stride)) *p = (cc_pat){(int)run, (int)stride};
}

void cc_pat_extent(cc_pat p, int64_t count, int64_t *lo, int64_t *hi) {
  if (!p.run) { *lo = 0; *hi = count - 1; return; }
  int64_t runs = (count + p.run - 1) / p.run, last = (runs - 1) * p.stride, lastlen = count - (runs - 1) * p.run;
  *lo = last < 0 ? last : 0;
  int64_t top = last + lastlen - 1, first = (runs > 1 ? p.run : count) - 1;
  *hi = top > first ? top : first;
}

int cc_pat_find(int idx, cc_pat p, int count, int c) {
  int64_t d = (int64_t)c - idx;
  if (!p.run) return d >= 0 && d < count ? (int)d : -1;
  int64_t q = p.stride > 0 ? fdiv(d, p.stride) : -fdiv(d, -(int64_t)p.stride);
  int64_t r = d - q * p.stride, j = q * p.run + r;
  return q >= 0 && r >= 0 && r < p.run && j < count ? (int)j : -1;
}

void cc_pat_format(cc_pat p, char *buf, size_t n) {
  if (!p.run) snprintf(buf, n, "%s", "");
  else if (p.run == 1) snprintf(buf, n, ", {stride = %d}", p.stride);
  else snprintf(buf, n, ", {run = %d, stride = %d}", p.run, p.stride);
}
