/* cc_lua.h -- the sandboxed Lua state that runs algorithm scripts. */
#ifndef CC_LUA_H
#define CC_LUA_H

#include <stddef.h>

#include <lua.h>

#include "cc_mem.h"
#include "rt_diag.h"
#include "rt_result.h"

typedef struct cc_lua_limits {
  cc_budget *budget;        /* memory and time, shared with the trace and lowering; NULL: 256 MiB, no deadline */
  long long max_instructions;  /* VM instructions (and library work) before the script is stopped */
} cc_lua_limits;

/* A Lua state with only base (no dofile, loadfile, collectgarbage, or
 * binary chunks; setmetatable refuses __gc; pcall and xpcall cannot catch
 * a limit; print writes to standard error), table, string, math (seeded
 * the same every run) and utf8, and a require() that loads only baton's own
 * modules (cc_lib.h).  Bounded: memory (the budget), VM instructions, wall
 * time (checked every few thousand instructions and before every string
 * and table library call), and the work of each string pattern call (a
 * pattern whose worst case on its subject is too large is refused before
 * it runs).  Every limit stops the whole script with
 * "script:LINE: ... limit reached ... (PARAMETER raises it)". */
lua_State *cc_lua_new(const cc_lua_limits *lim);
void cc_lua_close(lua_State *L);

/* Runs the text chunk `src` (named `name` in messages) with a message
 * handler.  Any Lua error -- from the script or raised by the DSL with
 * luaL_error -- is converted here, and only here, into diag as one line
 * "name:LINE: message" (followed by the Lua traceback when
 * cc_lua_set_traceback(1) was called); returns BT_ERR_INVALID then.
 * An error inside a baton.* module is prefixed with the script line that
 * called into it: "name:LINE: baton.ring:30: message". */
bt_result cc_lua_run(lua_State *L, const char *src, size_t len, const char *name, rt_diag *diag);

/* Whether the errors of later cc_lua_run calls carry the Lua traceback
 * after their one line (`baton compile -v`); off by default.  For the
 * whole process: set it before compiling. */
void cc_lua_set_traceback(int on);

/* The line of the user's script that made the current call (the innermost
 * frame of a file chunk, so that a call made inside a baton.* module is
 * the script line that called the module); 0 when none.  Also remembered
 * as the line a memory error is reported at. */
int cc_lua_line(lua_State *L);

/* The script's lines that called the function the current call is made
 * in (the frames of the script below the innermost, innermost first):
 * pushes them as "t.lua:6, t.lua:8" (at most 8, then " and N more") and
 * returns 1; pushes nothing and returns 0 for a call made at the script's
 * top level. */
int cc_lua_push_callers(lua_State *L);

/* Stops the script: raises "script:LINE: msg" that pcall cannot catch. */
int cc_lua_stop(lua_State *L, const char *msg);

/* Raises the budget's memory-limit error (uncatchable) when an allocation
 * of the trace was refused by the limit, else "out of memory". */
int cc_lua_nomem(lua_State *L);

/* Checks the budget's deadline; stops the script when the time is up. */
void cc_lua_check_time(lua_State *L);

#endif
