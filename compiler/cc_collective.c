/* cc_collective.c -- collective{}, the declaration every script starts
 * with: its kind, ranks, chunks, buffers and options, and the
 * postcondition (`expect`) the trace is checked against. */
#include "cc_trace_int.h"
#include "cc_topo.h"
#include "cc_via.h"
#include "ir_geom.h"
#include "rt_param.h"

#include <ctype.h>
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names an expect may use beyond r, c, n, k: collective{}'s vars,
 * a table of integers (a script's parameters, say) or of lists of
 * integers (per-rank sizes, indexed as size[r]).  The text written to the
 * IR has each such name replaced by its value in parentheses, a list by
 * "{3,1,2}", so the IR needs nothing else.  Returns the expanded text (to free); errors at
 * the collective's line for a name that is not bound, a bad table or a
 * text past BATON_EXPECT_MAX_BYTES. */
static const char *const expect_words[] = {"r", "c", "n", "k", "i", "o", "if", "q", NULL};   /* ir_expect.h's */
/* Whether the table on top of the stack is a list of integers (vars'
 * entry `name`): a sequence 1..n of n >= 1 integers and nothing else;
 * otherwise an error naming the entry. */
static int list_ok(lua_State *L, const char *name) {
  lua_Integer len = (lua_Integer)lua_rawlen(L, -1), n = 0;
  if (len < 1) luaL_error(L, "vars: %s is an empty table: a list needs at least one integer", name ? name : "?");
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    n++;
    int key_ok = lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= len;
    if (!key_ok || !lua_isinteger(L, -1))
      luaL_error(L, "vars: %s must be a list of integers {3, 1, 2, ...}, but holds %s", name ? name : "?",
                 !key_ok ? "a named field" : lua_type(L, -1) == LUA_TNUMBER ? "a number that is not an integer"
                                                                            : luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  if (n != len) luaL_error(L, "vars: %s must be a list of integers without holes", name ? name : "?");
  return 1;
}

static char *expand_expect(lua_State *L, const char *expect) {
  int vars = lua_getfield(L, 1, "vars") == LUA_TTABLE ? lua_gettop(L) : 0;
  if (!vars && !lua_isnil(L, -1)) luaL_error(L, "vars must be a table of integers {name = value, ...}");
  if (vars) {
    lua_pushnil(L);
    while (lua_next(L, vars)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      int isint = lua_isinteger(L, -1) || (lua_istable(L, -1) && list_ok(L, k));
      if (!k || !isint)
        luaL_error(L, "vars: every entry must be name = integer or name = {integer, ...} (%s = %s)",
                   k ? k : luaL_typename(L, -2), luaL_typename(L, -1));
      size_t len = strlen(k);
      int ok = len > 0 && len < 32 && (isalpha((unsigned char)k[0]) || k[0] == '_');
      for (size_t i = 1; ok && i < len; i++) ok = isalnum((unsigned char)k[i]) || k[i] == '_';
      for (int i = 0; ok && expect_words[i]; i++) ok = strcmp(k, expect_words[i]) != 0;
      if (!ok)
        luaL_error(L, "vars: '%s' is not a name expect can use (a letter or _, then letters, digits or _, shorter than "
                   "32, and not r, c, n, k, i, o or if)", k);
      lua_pop(L, 1);
    }
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const char *p = expect; *p;) {
    if (!(isalpha((unsigned char)*p) || *p == '_')) { luaL_addchar(&b, *p++); continue; }
    const char *e = p;
    while (isalnum((unsigned char)*e) || *e == '_') e++;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(e - p < 63 ? e - p : 63), p);
    lua_Integer v;
    int kind = vars ? lua_getfield(L, vars, name) : LUA_TNIL;
    if (kind == LUA_TNUMBER && (v = lua_tointeger(L, -1), 1)) {
      lua_pop(L, 1);
      char num[32];
      snprintf(num, sizeof num, "(%lld)", (long long)v);
      luaL_addstring(&b, num);
    } else if (kind == LUA_TTABLE) {   /* a list: "{3,1,2}", indexed in the text that follows */
      lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
      luaL_addchar(&b, '{');
      for (lua_Integer i = 1; i <= len; i++) {
        char num[32];
        lua_rawgeti(L, -1, i);
        snprintf(num, sizeof num, "%s%lld", i > 1 ? "," : "", (long long)lua_tointeger(L, -1));
        lua_pop(L, 1);
        luaL_addstring(&b, num);
      }
      luaL_addchar(&b, '}');
      lua_pop(L, 1);
    } else {
      if (vars) lua_pop(L, 1);
      int found = 0;
      for (int i = 0; expect_words[i] && !found; i++) found = !strcmp(name, expect_words[i]);
      if (!found)
        luaL_error(L, "expect names '%s', which is none of r, c, n, k, i, o, if (and q in i[* if ...]): a value goes in vars = { %s = ... }", name, name);
      luaL_addlstring(&b, p, (size_t)(e - p));
    }
    p = e;
  }
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  const int64_t most = rt_param_int(RT_PARAM_EXPECT_MAX_BYTES);
  if ((int64_t)len > most)
    luaL_error(L, "expect is %I characters with its vars in place, over the limit of %I (BATON_EXPECT_MAX_BYTES "
               "raises it)", (lua_Integer)len, (lua_Integer)most);
  char *out = strdup(text);
  if (!out) cc_lua_nomem(L);
  lua_pop(L, vars ? 2 : 1);
  return out;
}

/* Reads collective{}'s expect: required for custom collectives (and parsed
 * here, so that a malformed one is reported at the collective's line),
 * refused for the others. */
static void read_expect(lua_State *L, cc_trace *t, const char *kind) {
  lua_getfield(L, 1, "expect");
  const char *expect = luaL_optstring(L, -1, NULL);
  if (t->coll != IR_COLL_CUSTOM) {
    if (expect) luaL_error(L, "expect is only for kind = \"custom\" (the %s postcondition is built in)", kind);
    lua_getfield(L, 1, "vars");
    if (!lua_isnil(L, -1)) luaL_error(L, "vars is only for kind = \"custom\" (names its expect uses)");
    lua_pop(L, 1);
    return;
  }
  if (!expect)
    luaL_error(L, "a custom collective needs expect = \"o[r][c]=i[...][...] [if ...]\", its postcondition (docs/VERIFY.md)");
  t->expect = expand_expect(L, expect);
  rt_diag *d = rt_diag_new(1);
  if (!d) cc_lua_nomem(L);
  if (ir_expect_parse(t->expect, "expect", &t->rules, d)) {
    lua_pushstring(L, rt_diag_text(d));
    rt_diag_free(d);
    if (strcmp(expect, t->expect))
      luaL_error(L, "bad expect \"%s\" (\"%s\" with vars in place): %s", expect, t->expect,
                 luaL_gsub(L, lua_tostring(L, -1), "\n", ""));
    luaL_error(L, "bad expect \"%s\": %s", expect, luaL_gsub(L, lua_tostring(L, -1), "\n", ""));
  }
  rt_diag_free(d);
}

/* A custom collective's input_chunks and output_chunks (each rank's
 * buffers, in chunks of count / chunks elements): `chunks` unless given;
 * 1..CC_MAX_INDEX, checked with the total below.  Refused for the others,
 * whose sizes the collective fixes. */
static void custom_sizes(lua_State *L, const cc_trace *t, int64_t *in, int64_t *out) {
  static const char *const keys[] = {"input_chunks", "output_chunks"};
  int64_t *dst[] = {in, out};
  for (int i = 0; i < 2; i++) {
    lua_getfield(L, 1, keys[i]);
    if (!lua_isnil(L, -1)) {
      if (t->coll != IR_COLL_CUSTOM)
        luaL_error(L, "%s is only for kind = \"custom\" (a %s's buffer sizes follow from ranks and chunks)", keys[i],
                   ir_coll_name[t->coll]);
      lua_Integer v = cc_dsl_top_integer(L, keys[i], 0, 1);
      if (v < 1 || v > CC_MAX_INDEX) luaL_error(L, "%s=%I out of range [1, %d]", keys[i], v, CC_MAX_INDEX);
      *dst[i] = v;
    }
    lua_pop(L, 1);
  }
}

/* collective{ kind=, ranks=, chunks=, inplace=, protocol=, instances=, threads=,
 *             name=, minbytes=, maxbytes=, topology={nodes=, gpus=} or {links=}, expect=, vars=,
 *             input_chunks=, output_chunks=, tileorder=, interleave=, placement=, via= } */
int cc_dsl_collective(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  if (t->declared) luaL_error(L, "collective{} called twice");
  t->decl_line = cc_dsl_script_line(L);
  static const char *const fields[] = {"kind", "ranks", "chunks", "inplace", "protocol", "instances", "threads",
                                       "name", "minbytes", "maxbytes", "topology", "expect", "vars", "tileorder",
                                       "interleave", "input_chunks", "output_chunks", "placement", "via", NULL};
  cc_dsl_check_keys(L, 1, fields, "collective{}", "field");
  lua_getfield(L, 1, "kind");
  const char *kind = luaL_optstring(L, -1, NULL);
  if (!kind)
    luaL_error(L, "collective{} needs kind = allreduce, allgather, reducescatter, alltoall, broadcast, reduce, "
               "gather, scatter or custom");
  int c = ir_coll_from_name(kind);
  if (c < 0)
    luaL_error(L, "unknown collective kind '%s' (allreduce, allgather, reducescatter, alltoall, broadcast, reduce, "
               "gather, scatter or custom)", kind);
  t->coll = (ir_coll)c;
  read_expect(L, t, kind);
  lua_getfield(L, 1, "ranks");
  lua_Integer ranks = cc_dsl_top_integer(L, "ranks", 0, 1), max_ranks = rt_param_int(RT_PARAM_MAX_RANKS);
  if (ranks < 1 || ranks > max_ranks)
    luaL_error(L, "ranks=%I out of range [1, %I] (%s raises the limit)", (lua_Integer)ranks, (lua_Integer)max_ranks,
               rt_param_name(RT_PARAM_MAX_RANKS));
  lua_getfield(L, 1, "chunks");
  lua_Integer k = cc_dsl_top_integer(L, "chunks", 1, 0);
  if (k < 1 || k > 65536) luaL_error(L, "chunks=%I out of range [1, 65536]", (lua_Integer)k);
  t->nranks = (int)ranks;
  t->k = (int)k;
  lua_getfield(L, 1, "inplace");
  t->inplace = lua_toboolean(L, -1);
  if (t->inplace && (t->coll == IR_COLL_GATHER || t->coll == IR_COLL_SCATTER))
    luaL_error(L, "a %s is written out of place (inplace = false): the runtime runs in-place calls on a copy of the "
               "input", kind);
  lua_getfield(L, 1, "instances");
  lua_Integer inst = cc_dsl_top_integer(L, "instances", 1, 0);
  if (inst < 1 || inst > 64) luaL_error(L, "instances=%I out of range [1, 64]", (lua_Integer)inst);
  t->instances = (int)inst;
  lua_getfield(L, 1, "threads");
  lua_Integer thr = cc_dsl_top_integer(L, "threads", 0, 0);
  if (thr && (thr < 32 || thr > 512 || thr % 32))
    luaL_error(L, "threads=%I must be a multiple of 32 in [32, 512] (or 0: the runtime's default)", (lua_Integer)thr);
  t->nthreads = (int)thr;
  lua_getfield(L, 1, "protocol");
  const char *proto = luaL_optstring(L, -1, "Simple");
  int pr = ir_proto_from_name(proto);
  if (pr < 0) luaL_error(L, "unknown protocol '%s' (Simple, LL or LL128)", proto);
  t->proto = (ir_proto)pr;
  lua_getfield(L, 1, "tileorder");
  const char *order = luaL_optstring(L, -1, "comm");
  if (strcmp(order, "comm") && strcmp(order, "program"))
    luaL_error(L, "tileorder='%s': expected \"comm\" (compute the chunks that leave the GPU first) or \"program\" (the "
               "script's order)", order);
  t->tileorder = !strcmp(order, "program") ? CC_ORDER_PROGRAM : CC_ORDER_COMM;
  lua_getfield(L, 1, "placement");
  const char *place = luaL_optstring(L, -1, "split");
  if (strcmp(place, "split") && strcmp(place, "paired"))
    luaL_error(L, "placement='%s': expected \"split\" (a thread block per peer, direction and channel) or \"paired\" "
               "(a peer's send and receive on a channel share one)", place);
  t->placement = !strcmp(place, "paired") ? CC_PLACE_PAIRED : CC_PLACE_SPLIT;
  cc_via_collective(L, t);
  lua_getfield(L, 1, "interleave");
  const char *il = luaL_optstring(L, -1, NULL);
  if (il && !ir_dim_expr_ok(il))
    luaL_error(L, "interleave='%s': expected a product of dimension names the call binds, such as \"T*D\"", il);
  if (il && ((t->coll != IR_COLL_ALLTOALL && t->coll != IR_COLL_ALLGATHER) || t->inplace))
    luaL_error(L, "interleave is for out-of-place alltoall and allgather collectives (an output block per rank)");
  snprintf(t->interleave, sizeof t->interleave, "%s", il ? il : "");
  lua_getfield(L, 1, "name");
  snprintf(t->name, sizeof t->name, "%s", luaL_optstring(L, -1, kind));
  lua_getfield(L, 1, "minbytes");
  lua_Integer minb = cc_dsl_top_integer(L, "minbytes", 0, 0);
  lua_getfield(L, 1, "maxbytes");
  lua_Integer maxb = cc_dsl_top_integer(L, "maxbytes", 0, 0);
  if (minb < 0 || maxb < 0) luaL_error(L, "minbytes=%I, maxbytes=%I: sizes cannot be negative", (lua_Integer)minb, (lua_Integer)maxb);
  t->minbytes = (uint64_t)minb;
  t->maxbytes = (uint64_t)maxb;
  lua_getfield(L, 1, "topology");
  if (lua_istable(L, -1)) {
    static const char *const topo[] = {"nodes", "gpus", "links", "name", NULL};
    cc_dsl_check_keys(L, -1, topo, "collective{} topology", "field");
  }
  cc_topo_read(L, &t->topo, t->nranks, -1);
  int ib, ob;
  ir_geom_blocks(t->coll, t->nranks, &ib, &ob);
  /* the buffers' size: bounded before anything is allocated for them */
  int64_t in = (int64_t)ib * t->k, out = (int64_t)ob * t->k;
  custom_sizes(L, t, &in, &out);
  int64_t all = t->nranks * (in + out);
  int64_t most = rt_param_int(RT_PARAM_MAX_CHUNKS);
  if (most > CC_MAX_TOTAL) most = CC_MAX_TOTAL;
  if (all > most)
    luaL_error(L, "ranks=%d x chunks=%d: %s has %I chunks in all ranks' input and output, over the limit of %I "
               "(%s raises it)", t->nranks, t->k, kind, (lua_Integer)all, (lua_Integer)most, rt_param_name(RT_PARAM_MAX_CHUNKS));
  if (in > CC_MAX_INDEX || out > CC_MAX_INDEX)
    luaL_error(L, "ranks=%d x chunks=%d: a rank's %s would have %I chunks, more than the %d a buffer may have",
               t->nranks, t->k, in > out ? "input" : "output", (lua_Integer)(in > out ? in : out), CC_MAX_INDEX);
  t->fixed_size[CC_SPACE_INPUT] = (int)in;
  t->fixed_size[CC_SPACE_OUTPUT] = (int)out;
  t->fixed_chunks = all;
  t->scratch_rank = cc_calloc(t->nranks, sizeof(int));
  if (!t->scratch_rank) cc_lua_nomem(L);
  for (int s = 0; s < 2; s++) {
    t->size[s] = cc_calloc(t->nranks, sizeof(int));
    t->cap[s] = cc_calloc(t->nranks, sizeof(int));
    t->loc[s] = cc_calloc(t->nranks, sizeof(cc_loc *));
    if (!t->size[s] || !t->cap[s] || !t->loc[s]) cc_lua_nomem(L);
  }
  t->declared = 1;
  /* Inputs hold their own (rank, index). */
  for (int r = 0; r < t->nranks; r++) {
    cc_lua_check_time(L);
    for (int i = 0; i < t->fixed_size[CC_SPACE_INPUT]; i++) {
      cc_loc *l = cc_dsl_loc(L, t, r, CC_SPACE_INPUT, i);
      uint64_t term = (uint64_t)r << 32 | (uint32_t)i;
      cc_val v = {1, 1, &term};
      if (!cc_dsl_val_set(&l->val, &v)) cc_lua_nomem(L);
      l->version = cc_dsl_next_version(L, t);
    }
  }
  return 0;
}
