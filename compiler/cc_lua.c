/* cc_lua.c -- sandbox: restricted libraries, bounded memory and instructions,
 * text chunks only, one seam where Lua errors become bt_results. */
#include "cc_lua.h"
#include "cc_lib.h"

#include <lauxlib.h>
#include <stdio.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

typedef struct sandbox {
  size_t used, max;
  long max_instr;
} sandbox;

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  sandbox *sb = ud;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    free(ptr);
    sb->used -= osize;
    return NULL;
  }
  if (nsize > osize && sb->used + (nsize - osize) > sb->max) return NULL;  /* Lua raises "not enough memory" */
  void *p = realloc(ptr, nsize);
  if (p) sb->used = sb->used - osize + nsize;
  return p;
}

#define HOOK_EVERY 10000

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  sandbox *sb;
  lua_getallocf(L, (void **)&sb);
  sb->max_instr -= HOOK_EVERY;
  if (sb->max_instr < 0) luaL_error(L, "instruction limit reached (the script runs too long or loops forever)");
}

/* load() that accepts text chunks only. */
static int safe_load(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  const char *name = luaL_optstring(L, 2, "=(load)");
  int st = luaL_loadbufferx(L, s, n, name, "t");
  if (st != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

lua_State *cc_lua_new(const cc_lua_limits *lim) {
  sandbox *sb = calloc(1, sizeof *sb);
  if (!sb) return NULL;
  sb->max = lim && lim->max_bytes ? lim->max_bytes : (size_t)256 << 20;
  sb->max_instr = lim && lim->max_instructions ? lim->max_instructions : 2000000000L;
  lua_State *L = lua_newstate(alloc, sb);
  if (!L) { free(sb); return NULL; }
  static const luaL_Reg libs[] = {
    {LUA_GNAME, luaopen_base}, {LUA_TABLIBNAME, luaopen_table}, {LUA_STRLIBNAME, luaopen_string},
    {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};
  for (const luaL_Reg *l = libs; l->func; l++) {
    luaL_requiref(L, l->name, l->func, 1);
    lua_pop(L, 1);
  }
  static const char *const removed[] = {"dofile", "loadfile", "collectgarbage", NULL};
  for (int i = 0; removed[i]; i++) {
    lua_pushnil(L);
    lua_setglobal(L, removed[i]);
  }
  lua_pushcfunction(L, safe_load);
  lua_setglobal(L, "load");
  cc_lib_open(L);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
  return L;
}

void cc_lua_close(lua_State *L) {
  if (!L) return;
  sandbox *sb;
  lua_getallocf(L, (void **)&sb);
  lua_close(L);
  free(sb);
}

/* An error raised inside a baton.* module ("baton.ring:30: ...") is put
 * after the line of the user's script that led there, the innermost frame
 * of a file chunk ("@script.lua"), so that every message starts with it. */
static const char *blame_script(lua_State *L, const char *msg) {
  if (strncmp(msg, "baton.", 6)) return msg;
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "Sl", &ar) && ar.source[0] == '@' && ar.currentline > 0)
      return lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
  return msg;
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = luaL_typename(L, 1);
  else msg = blame_script(L, msg);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

bt_result cc_lua_run(lua_State *L, const char *src, size_t len, const char *name, rt_diag *diag) {
  char chunkname[512];
  snprintf(chunkname, sizeof chunkname, "@%s", name);
  lua_pushcfunction(L, traceback);
  int base = lua_gettop(L);
  int st = luaL_loadbufferx(L, src, len, chunkname, "t");
  if (st == LUA_OK) st = lua_pcall(L, 0, 0, base);
  if (st != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    rt_diag_add(diag, "%s", msg ? msg : "error object is not a string");
    lua_settop(L, base - 1);
    return BT_ERR_INVALID;   /* the script's fault, memory limit included */
  }
  lua_settop(L, base - 1);
  return BT_OK;
}
