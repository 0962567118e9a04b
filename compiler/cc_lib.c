/* cc_lib.c -- require() for the sandbox: loads baton's own Lua modules
 * (algorithms/lib/, embedded in the binary or read from BATON_ALGO_LIB). */
#include "cc_lib.h"
#include "rt_param.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOADED_KEY "baton.loaded"
#define PREFIX "baton."

/* Pushes "baton.a, baton.b, ..." (the embedded modules). */
static void push_available(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const cc_lib_module *m = cc_lib_modules; m->name; m++) {
    if (m != cc_lib_modules) luaL_addstring(&b, ", ");
    luaL_addstring(&b, m->name);
  }
  luaL_pushresult(&b);
}

/* Pushes the text of module NAME (the part after "baton.") read from
 * folder `dir`; raises a Lua error when the file cannot be read. */
static void push_file_text(lua_State *L, const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.lua", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) luaL_error(L, "module '" PREFIX "%s' not found: cannot open %s (BATON_ALGO_LIB): %s", name, path, strerror(errno));
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  size_t got;
  do {
    char *p = luaL_prepbuffer(&b);
    got = fread(p, 1, LUAL_BUFFERSIZE, f);
    luaL_addsize(&b, got);
  } while (got == LUAL_BUFFERSIZE);
  int err = ferror(f);
  fclose(f);
  if (err) luaL_error(L, "module '" PREFIX "%s': cannot read %s", name, path);
  luaL_pushresult(&b);
}

/* require(name): see cc_lib.h. */
static int l_require(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, LOADED_KEY);            /* 2: loaded */
  lua_getfield(L, 2, name);
  if (lua_toboolean(L, -1)) return 1;
  if (!lua_isnil(L, -1)) luaL_error(L, "module '%s' requires itself (a require cycle)", name);
  lua_pop(L, 1);
  const char *short_name = name + strlen(PREFIX);
  int valid = !strncmp(name, PREFIX, strlen(PREFIX)) && *short_name && strlen(short_name) < 64;
  for (const char *p = short_name; valid && *p; p++)
    valid = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
  if (!valid) {
    push_available(L);
    luaL_error(L, "module '%s' not found: scripts can require only baton's own modules (%s)", name,
               lua_tostring(L, -1));
  }
  const char *dir = rt_param_str(RT_PARAM_ALGO_LIB);
  if (dir && *dir) {
    push_file_text(L, dir, short_name);
  } else {
    const cc_lib_module *m = cc_lib_modules;
    while (m->name && strcmp(m->name, name)) m++;
    if (!m->name) {
      push_available(L);
      luaL_error(L, "module '%s' not found (there are %s)", name, lua_tostring(L, -1));
    }
    lua_pushstring(L, m->text);
  }                                                          /* 3: text */
  char chunkname[80];
  snprintf(chunkname, sizeof chunkname, "=%s", name);
  size_t len;
  const char *text = lua_tolstring(L, 3, &len);
  if (luaL_loadbufferx(L, text, len, chunkname, "t") != LUA_OK) lua_error(L);
  lua_pushboolean(L, 0);                                     /* mark: loading */
  lua_setfield(L, 2, name);
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {   /* unmark, so that a retry is not taken for a cycle */
    lua_pushnil(L);
    lua_setfield(L, 2, name);
    lua_error(L);
  }
  if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_pushboolean(L, 1); }
  lua_pushvalue(L, -1);
  lua_setfield(L, 2, name);
  return 1;
}

void cc_lib_open(lua_State *L) {
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, LOADED_KEY);
  lua_pushcfunction(L, l_require);
  lua_setglobal(L, "require");
}
