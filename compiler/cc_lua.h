/* cc_lua.h -- the sandboxed Lua state that runs algorithm scripts. */
#ifndef CC_LUA_H
#define CC_LUA_H

#include <stddef.h>

#include <lua.h>

#include "rt_diag.h"
#include "rt_result.h"

typedef struct cc_lua_limits {
  size_t max_bytes;         /* memory the script may use */
  long max_instructions;    /* VM instructions before the script is stopped */
} cc_lua_limits;

/* A Lua state with only base (no dofile, loadfile, or binary chunks),
 * table, string, math and utf8, and a require() that loads only baton's
 * own modules (cc_lib.h); memory and instruction count bounded. */
lua_State *cc_lua_new(const cc_lua_limits *lim);
void cc_lua_close(lua_State *L);

/* Runs the text chunk `src` (named `name` in messages) with a traceback
 * handler.  Any Lua error -- from the script or raised by the DSL with
 * luaL_error -- is converted here, and only here, into diag as
 * "name:LINE: message" plus the traceback; returns BT_ERR_INVALID then.
 * An error inside a baton.* module is prefixed with the script line that
 * called into it: "name:LINE: baton.ring:30: message". */
bt_result cc_lua_run(lua_State *L, const char *src, size_t len, const char *name, rt_diag *diag);

#endif
