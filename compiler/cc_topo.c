/* cc_topo.c -- collective{}'s topology: fully connected, nodes x gpus (a
 * node's GPUs all linked, rails across nodes) or an explicit list of
 * undirected links; the check every copy and reduce between ranks passes. */
#include "cc_topo.h"
#include "cc_lua.h"
#include "rt_param.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* While a link list is sorted, each entry is a << 44 | b << 24 | i (a < b,
 * i its position): ranks stay below 2^20 (BATON_MAX_RANKS's range) and
 * positions below 2^24 (BATON_MAX_LINKS's). */
#define POS_BITS 24
#define POS_MASK ((UINT64_C(1) << POS_BITS) - 1)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The length n of the table at `at` when its keys are exactly 1..n, else
 * -1.  Stops at the first other key, so it visits at most n + 1 keys. */
static lua_Integer seq_len(lua_State *L, int at) {
  at = lua_absindex(L, at);
  lua_Integer n = (lua_Integer)lua_rawlen(L, at), seen = 0;
  lua_pushnil(L);
  while (lua_next(L, at)) {
    lua_pop(L, 1);
    lua_Integer k = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    if (k < 1 || k > n) { lua_pop(L, 1); return -1; }
    if (!(++seen & 1023)) cc_lua_check_time(L);
  }
  return seen == n ? n : -1;
}

/* Link i (1-based) of the list at `li` into r[0], r[1]: a pair of
 * integer ranks in [0, nranks), two different ones; raises the error. */
static void read_link(lua_State *L, int li, lua_Integer i, int nranks, lua_Integer r[2]) {
  lua_rawgeti(L, li, i);
  int ok = lua_istable(L, -1) && seq_len(L, -1) == 2;
  for (int j = 0; j < 2 && ok; j++) {
    lua_rawgeti(L, -1, j + 1);
    ok = lua_isinteger(L, -1);
    r[j] = lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  if (!ok && lua_istable(L, -1)) luaL_error(L, "topology link %I must be a pair of ranks {a, b}: two integers, nothing else", i);
  if (!ok) luaL_error(L, "topology link %I must be a pair of ranks {a, b}, not a %s", i, luaL_typename(L, -1));
  lua_pop(L, 1);
  for (int j = 0; j < 2; j++)
    if (r[j] < 0 || r[j] >= nranks)
      luaL_error(L, "topology link %I {%I, %I}: rank %I out of range [0, %d)", i, r[0], r[1], r[j], nranks);
  if (r[0] == r[1]) luaL_error(L, "topology link %I {%I, %I} links rank %I to itself", i, r[0], r[1], r[0]);
}

/* Reads the list at `li` into tp->links (sorted, a << 32 | b); a link
 * listed twice, in either direction, is an error naming both places. */
static void read_links(lua_State *L, cc_topo *tp, int nranks, int li) {
  if (!lua_istable(L, li))
    luaL_error(L, "topology links must be a list of rank pairs {{a, b}, ...}, not a %s", luaL_typename(L, li));
  lua_Integer most = rt_param_int(RT_PARAM_MAX_LINKS), n = (lua_Integer)lua_rawlen(L, li);
  if (n > most)
    luaL_error(L, "topology: %I links, over the limit of %I (%s raises it)", n, most, rt_param_name(RT_PARAM_MAX_LINKS));
  if (seq_len(L, li) < 0)
    luaL_error(L, "topology links must be a list of rank pairs {{a, b}, ...}: keys 1..n and nothing else");
  uint64_t *k = cc_malloc(((size_t)n + 1) * sizeof *k);
  if (!k) cc_lua_nomem(L);
  tp->links = k;   /* freed with the trace, whatever is raised below */
  for (lua_Integer i = 1; i <= n; i++) {
    lua_Integer r[2];
    if (!(i & 1023)) cc_lua_check_time(L);
    read_link(L, li, i, nranks, r);
    uint64_t a = (uint64_t)(r[0] < r[1] ? r[0] : r[1]), b = (uint64_t)(r[0] < r[1] ? r[1] : r[0]);
    k[i - 1] = a << 44 | b << POS_BITS | (uint64_t)(i - 1);
  }
  qsort(k, (size_t)n, sizeof *k, cmp_u64);
  /* the repeat listed earliest, and the first listing of its pair (1-based) */
  lua_Integer dup = 0, first = 0, run = 0;
  for (lua_Integer j = 1; j < n; j++) {
    if (k[j] >> POS_BITS != k[j - 1] >> POS_BITS) { run = j; continue; }
    lua_Integer at = (lua_Integer)(k[j] & POS_MASK) + 1;
    if (!dup || at < dup) { dup = at; first = (lua_Integer)(k[run] & POS_MASK) + 1; }
  }
  if (dup) {
    lua_Integer x[2], y[2];
    read_link(L, li, dup, nranks, x);
    read_link(L, li, first, nranks, y);
    luaL_error(L, "topology link %I {%I, %I} repeats link %I {%I, %I}: links are undirected; list each pair once", dup,
               x[0], x[1], first, y[0], y[1]);
  }
  for (lua_Integer j = 0; j < n; j++) k[j] = (k[j] >> 44) << 32 | (k[j] >> POS_BITS & ((UINT64_C(1) << 20) - 1));
  tp->nlinks = (int)n;
}

void cc_topo_read(lua_State *L, cc_topo *tp, int nranks, int at) {
  at = lua_absindex(L, at);
  tp->nodes = tp->gpus = 0;
  tp->nlinks = -1;
  tp->name[0] = 0;
  if (lua_isnil(L, at)) return;
  if (!lua_istable(L, at))
    luaL_error(L, "topology must be a table {nodes = N, gpus = G} or {links = {{a, b}, ...}} (or absent: fully connected)");
  lua_getfield(L, at, "name");
  if (!lua_isnil(L, -1)) {
    size_t len = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (!s || len == 0 || len >= CC_MAX_TOPO_NAME)
      luaL_error(L, "topology name must be a string of 1 to %d characters", CC_MAX_TOPO_NAME - 1);
    memcpy(tp->name, s, len + 1);
  }
  lua_getfield(L, at, "links");
  lua_getfield(L, at, "nodes");
  lua_getfield(L, at, "gpus");
  int links = !lua_isnil(L, -3), ng = !lua_isnil(L, -2) || !lua_isnil(L, -1);
  if (links && ng) luaL_error(L, "topology takes nodes and gpus, or links, not both");
  if (links) {
    read_links(L, tp, nranks, lua_absindex(L, -3));
    lua_pop(L, 4);
    return;
  }
  if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1))
    luaL_error(L, "topology needs nodes = N and gpus = G (integers), or links = {{a, b}, ...}");
  lua_Integer nodes = lua_tointeger(L, -2), gpus = lua_tointeger(L, -1);
  if (nodes < 1 || gpus < 1 || nodes > nranks || gpus > nranks || nodes * gpus != nranks)
    luaL_error(L, "topology nodes=%I x gpus=%I does not make ranks=%d", nodes, gpus, nranks);
  tp->nodes = (int)nodes;
  tp->gpus = (int)gpus;
  lua_pop(L, 4);
}

int cc_topo_linked(const cc_topo *tp, int a, int b) {
  if (a == b) return 1;
  if (tp->nlinks >= 0) {
    uint64_t key = a < b ? (uint64_t)a << 32 | (uint32_t)b : (uint64_t)b << 32 | (uint32_t)a;
    return tp->nlinks > 0 && bsearch(&key, tp->links, (size_t)tp->nlinks, sizeof key, cmp_u64) != NULL;
  }
  if (!tp->nodes) return 1;
  return a / tp->gpus == b / tp->gpus || a % tp->gpus == b % tp->gpus;
}

const char *cc_topo_describe(const cc_topo *tp, char *buf, size_t n) {
  char form[64];
  if (tp->nlinks >= 0) snprintf(form, sizeof form, "%d link%s", tp->nlinks, tp->nlinks == 1 ? "" : "s");
  else if (tp->nodes) snprintf(form, sizeof form, "%d nodes x %d GPUs", tp->nodes, tp->gpus);
  else snprintf(form, sizeof form, "fully connected");
  if (tp->name[0]) snprintf(buf, n, "%s: %s", tp->name, form);
  else snprintf(buf, n, "%s%s", tp->nlinks >= 0 ? "a list of " : "", form);
  return buf;
}

void cc_topo_free(cc_topo *tp) {
  cc_free(tp->links);
  tp->links = NULL;
}
