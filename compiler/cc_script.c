/* cc_script.c -- running a script: a sandboxed Lua state with the DSL's
 * functions (cc_trace.c: chunks, copies, reductions; cc_collective.c:
 * collective{}; cc_compute.c: the compute calls), the script run in
 * protected mode, the parameters it never read, and the postcondition
 * checked at its end.  The public entry points of cc_trace.h. */
#include "cc_trace_int.h"
#include "rt_param.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void register_dsl(lua_State *L, cc_trace *t, const char *const *params, int nparams) {
  luaL_newmetatable(L, REF_MT);
  lua_pushliteral(L, "baton.ref");   /* getmetatable() gives this: the script cannot change the metatable */
  lua_setfield(L, -2, "__metatable");
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, cc_dsl_ref_index, 1);
  lua_setfield(L, -2, "__index");
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, cc_dsl_ref_tostring, 1);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, OPND_MT);
  lua_pushliteral(L, "baton.operand");
  lua_setfield(L, -2, "__metatable");
  lua_pushlightuserdata(L, t);
  lua_pushcclosure(L, cc_dsl_opnd_tostring, 1);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"collective", cc_dsl_collective}, {"chunk", cc_dsl_chunk}, {"param", cc_dsl_param},
                                 {"parallelize", cc_dsl_parallelize}, {"matrix", cc_dsl_matrix}, {"vector", cc_dsl_vector},
                                 {"gemv", cc_dsl_gemv}, {"index", cc_dsl_index},
                                 {"embedding_bag", cc_dsl_embedding_bag}, {"gemm", cc_dsl_gemm}, {"round", cc_dsl_round},
                                 {"exchange", cc_dsl_exchange},
                                 {NULL, NULL}};
  for (const luaL_Reg *f = fns; f->name; f++) {
    lua_pushlightuserdata(L, t);
    lua_pushcclosure(L, f->func, 1);
    lua_setglobal(L, f->name);
  }
  lua_newtable(L);
  for (int i = 0; i < nparams; i++) {
    const char *eq = strchr(params[i], '=');
    if (!eq) continue;
    lua_pushlstring(L, params[i], eq - params[i]);
    lua_pushstring(L, eq + 1);
    lua_settable(L, -3);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, "baton.params");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "baton.params_read");
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "baton.params_seq");
}

/* After the script ran: every --param it was given must have been read by
 * param() (a key it never reads is a typo, or a parameter of another
 * script, and would otherwise compile the default silently).  BT_OK, or
 * BT_ERR_INVALID with "SCRIPT: --param KEY is never read by this script
 * (it reads: ...)" in diag for the first such key (in key order). */
static bt_result unread_params(lua_State *L, const char *script, rt_diag *diag) {
  lua_getfield(L, LUA_REGISTRYINDEX, "baton.params");
  lua_getfield(L, LUA_REGISTRYINDEX, "baton.params_read");
  const int given = lua_absindex(L, -2), read = lua_absindex(L, -1);
  char bad[128] = "", names[512] = "";
  size_t used = 0;
  lua_getfield(L, LUA_REGISTRYINDEX, "baton.params_seq");   /* the names read, in order, for the message */
  for (lua_Integer i = 1, n = (lua_Integer)lua_rawlen(L, -1); i <= n && used < sizeof names - 1; i++) {
    lua_rawgeti(L, -1, i);
    int k = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", lua_tostring(L, -1));
    used = k < 0 ? sizeof names - 1 : used + (size_t)k < sizeof names ? used + (size_t)k : sizeof names - 1;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  while (lua_next(L, given)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    lua_pushvalue(L, -1);
    int was = lua_gettable(L, read) != LUA_TNIL;
    lua_pop(L, 1);
    if (!was && (!bad[0] || strcmp(lua_tostring(L, -1), bad) < 0)) snprintf(bad, sizeof bad, "%s", lua_tostring(L, -1));
  }
  lua_pop(L, 2);
  if (!bad[0]) return BT_OK;
  rt_diag_add(diag, "%s: --param %s is never read by this script (it reads: %s)", script, bad,
              names[0] ? names : "no parameter");
  return BT_ERR_INVALID;
}


bt_result cc_trace_string(const char *src, const char *name, const char *const *params,
                          int nparams, cc_trace **out, rt_diag *diag) {
  *out = NULL;
  cc_trace *t = calloc(1, sizeof *t);
  if (!t) return BT_ERR_NOMEM;
  t->script = strdup(name);
  t->nspaces = CC_SPACE_FIRST_SCRATCH;
  snprintf(t->space_name[CC_SPACE_INPUT], 32, "input");
  snprintf(t->space_name[CC_SPACE_OUTPUT], 32, "output");
  t->instances = 1;
  t->topo.nlinks = -1;
  t->mem = cc_budget_new();
  if (!t->mem || !t->script) { cc_trace_free(t); return BT_ERR_NOMEM; }
  cc_budget *prev = cc_mem_enter(t->mem);   /* the trace's allocations count against it */
  cc_lua_limits lim = {t->mem, (lua_Integer)rt_param_int(RT_PARAM_LUA_MAX_INSTRUCTIONS)};
  lua_State *L = cc_lua_new(&lim);
  if (!L) { cc_mem_leave(prev); cc_trace_free(t); return t->mem && t->mem->over ? BT_ERR_INVALID : BT_ERR_NOMEM; }
  register_dsl(L, t, params, nparams);
  bt_result res = cc_lua_run(L, src, strlen(src), name, diag);
  if (res == BT_OK) res = unread_params(L, name, diag);
  if (res == BT_OK) {   /* the postcondition: its message needs no traceback */
    lua_pushlightuserdata(L, t);
    lua_pushcclosure(L, cc_dsl_finish, 1);
    int st = lua_pcall(L, 0, 0, 0);
    if (st == LUA_ERRMEM && t->mem->over) {
      char m[300];
      cc_budget_mem_msg(t->mem, m, sizeof m);
      if (t->decl_line > 0) rt_diag_add(diag, "%s:%d: %s", name, t->decl_line, m);
      else rt_diag_add(diag, "%s: %s", name, m);
      res = BT_ERR_INVALID;
    } else if (st != LUA_OK) {
      rt_diag_add(diag, "%s", lua_tostring(L, -1));
      res = BT_ERR_INVALID;
    }
  }
  cc_lua_close(L);
  cc_mem_leave(prev);
  if (res) { cc_trace_free(t); return res; }
  *out = t;
  return BT_OK;
}

bt_result cc_trace_file(const char *path, const char *const *params, int nparams,
                        cc_trace **out, rt_diag *diag) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    rt_diag_add(diag, "%s: cannot open: %s", path, strerror(errno));
    *out = NULL;
    return BT_ERR_INVALID;
  }
  /* Read no further than the limit: the path may be a device or a pipe
   * that never ends (/dev/zero). */
  const size_t most = (size_t)rt_param_int(RT_PARAM_SCRIPT_MAX_MB) << 20;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  *out = NULL;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = 2 * cap + 8192;
      if (cap > most + 4096 + 1) cap = most + 4096 + 1;
      char *b = realloc(buf, cap);
      if (!b) {
        rt_diag_add(diag, "%s: out of memory reading the script (%zu bytes read)", path, n);
        free(buf);
        fclose(f);
        return BT_ERR_NOMEM;
      }
      buf = b;
    }
    size_t got = fread(buf + n, 1, 4096, f);
    n += got;
    if (n > most) {
      rt_diag_add(diag, "%s: the script is over the limit of %lld MiB (%s raises it)", path,
                  (long long)rt_param_int(RT_PARAM_SCRIPT_MAX_MB), rt_param_name(RT_PARAM_SCRIPT_MAX_MB));
      free(buf);
      fclose(f);
      return BT_ERR_INVALID;
    }
    if (got < 4096) break;
  }
  fclose(f);
  buf[n] = 0;
  bt_result r = cc_trace_string(buf, path, params, nparams, out, diag);
  free(buf);
  return r;
}
