/* cc_lua.c -- sandbox: restricted libraries, bounded memory, instructions,
 * wall time and library work, text chunks only, one seam where Lua errors
 * become bt_results. */
#include "cc_lua.h"
#include "cc_lib.h"
#include "rt_log.h"
#include "rt_param.h"

#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Memory a stopped script may still take to build its error message and
 * traceback (beyond the budget). */
#define STOP_RESERVE ((size_t)1 << 20)
/* The hook runs every HOOK_EVERY VM instructions: it counts them, checks
 * the deadline and remembers the script line a memory error is blamed on. */
#define HOOK_EVERY 1000
/* The most work (pattern-matching steps, worst case) one string pattern
 * call may need: about a second. */
#define PATTERN_MAX_STEPS 1e8

typedef struct sandbox {
  cc_budget *mem, *own;     /* the budget; own: one made here (no limits given) */
  long long instr_left, max_instr;
  int refused;              /* the budget refused Lua's last allocation */
  int stopped;              /* a limit stopped the script: nothing may catch it */
  int last_line;            /* the last script line seen (hook, library calls, DSL calls) */
  char name[256];           /* the script, for messages */
  char stop_msg[512];
} sandbox;

static sandbox *sandbox_of(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  sandbox *sb = ud;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    free(ptr);
    cc_budget_release(sb->mem, osize);
    return NULL;
  }
  if (nsize > osize && !cc_budget_charge(sb->mem, nsize - osize, sb->stopped ? STOP_RESERVE : 0)) {
    sb->refused = 1;   /* Lua collects garbage and tries again, or raises "not enough memory" */
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (!p) {
    if (nsize > osize) cc_budget_release(sb->mem, nsize - osize);
    return NULL;
  }
  if (nsize < osize) cc_budget_release(sb->mem, osize - nsize);
  sb->refused = 0;
  return p;
}

int cc_lua_line(lua_State *L) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "Sl", &ar) && ar.source[0] == '@' && ar.currentline > 0) {
      sandbox_of(L)->last_line = ar.currentline;
      return ar.currentline;
    }
  return 0;
}

static void count_hook(lua_State *L, lua_Debug *ar);

/* Raises the stop message again. */
static int raise_stop(lua_State *L) {
  sandbox *sb = sandbox_of(L);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);   /* any Lua code that runs on (a handler) stops at once */
  lua_pushstring(L, sb->stop_msg);
  return lua_error(L);
}

int cc_lua_stop(lua_State *L, const char *msg) {
  sandbox *sb = sandbox_of(L);
  if (!sb->stopped) {
    sb->stopped = 1;
    int line = cc_lua_line(L);
    if (!line) line = sb->last_line;
    if (line > 0) snprintf(sb->stop_msg, sizeof sb->stop_msg, "%s:%d: %s", sb->name, line, msg);
    else snprintf(sb->stop_msg, sizeof sb->stop_msg, "%s: %s", sb->name, msg);   /* before any line ran */
  }
  return raise_stop(L);
}

static int stop_mem(lua_State *L) {
  char m[300];
  return cc_lua_stop(L, cc_budget_mem_msg(sandbox_of(L)->mem, m, sizeof m));
}

int cc_lua_nomem(lua_State *L) {
  if (sandbox_of(L)->mem->over) return stop_mem(L);
  return luaL_error(L, "out of memory");
}

void cc_lua_check_time(lua_State *L) {
  sandbox *sb = sandbox_of(L);
  if (cc_budget_late(sb->mem)) {
    char m[300];
    cc_lua_stop(L, cc_budget_time_msg(sb->mem, m, sizeof m));
  }
}

/* Counts `n` units of work against the instruction limit. */
static void charge(lua_State *L, double n) {
  sandbox *sb = sandbox_of(L);
  if (n > (double)sb->instr_left) sb->instr_left = -1;
  else sb->instr_left -= (long long)n;
  if (sb->instr_left < 0) {
    char m[300];
    snprintf(m, sizeof m, "instruction limit reached: the script ran more than %lld Lua instructions (or library "
             "steps) (%s raises it; the script runs too long or loops forever)", sb->max_instr,
             rt_param_name(RT_PARAM_LUA_MAX_INSTRUCTIONS));
    cc_lua_stop(L, m);
  }
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  sandbox *sb = sandbox_of(L);
  if (sb->stopped) raise_stop(L);
  cc_lua_line(L);
  charge(L, HOOK_EVERY);
  cc_lua_check_time(L);
}

/* After a protected call failed: a limit (or the budget's memory refusal)
 * goes on up; nothing in the script may catch it. */
static void rethrow_limits(lua_State *L, int status) {
  sandbox *sb = sandbox_of(L);
  if (status == LUA_ERRMEM && sb->refused) stop_mem(L);
  if (sb->stopped) raise_stop(L);
}

/* load() that accepts text chunks only. */
static int safe_load(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  const char *name = luaL_optstring(L, 2, "=(load)");
  cc_lua_line(L);
  cc_lua_check_time(L);
  int st = luaL_loadbufferx(L, s, n, name, "t");
  if (st != LUA_OK) {
    rethrow_limits(L, st);
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

static int safe_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  if (st != LUA_OK) rethrow_limits(L, st);
  lua_pushboolean(L, st == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

static int safe_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 1);   /* f, msgh, args..., f */
  lua_copy(L, 2, 1);     /* msgh, msgh, args..., f */
  lua_replace(L, 2);     /* msgh, f, args... */
  int st = lua_pcall(L, n - 2, LUA_MULTRET, 1);
  if (st != LUA_OK) rethrow_limits(L, st);
  lua_pushboolean(L, st == LUA_OK);
  lua_replace(L, 1);
  return lua_gettop(L);
}

/* print(...): to standard error (standard output carries the IR), unless
 * logging is off (BATON_DEBUG=NONE). */
static int safe_print(lua_State *L) {
  int n = lua_gettop(L);
  if (!rt_log_enabled(RT_LOG_WARN, RT_SUB_COMPILER)) return 0;
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    if (i > 1) fputc('\t', stderr);
    fwrite(s, 1, len, stderr);
    lua_pop(L, 1);
  }
  fputc('\n', stderr);
  return 0;
}

/* ---- library calls: the deadline, and the work of the long ones ---- */

enum { K_PLAIN, K_FIND, K_MATCH, K_GMATCH, K_GSUB, K_CONCAT, K_UNPACK, K_MOVE, K_SORT, K_SETMT };

/* The end of the single-character class at p (pattern end e). */
static const char *class_end(const char *p, const char *e) {
  if (p >= e) return e;
  char c = *p++;
  if (c == '%') return p < e ? p + 1 : e;
  if (c == '[') {
    if (p < e && *p == '^') p++;
    do {
      if (p >= e) return e;
      c = *p++;
      if (c == '%' && p < e) p++;
    } while (p < e && *p != ']');
    return p < e ? p + 1 : e;
  }
  return p;
}

/* An upper bound on the steps Lua's backtracking matcher can take for
 * pattern p on a subject of n bytes: every start position (one when
 * anchored) times, for each repeated item (*, +, -), every count it may
 * try (n + 1), times 2 for each optional item (?), times the pattern's
 * length; back-references and %b scan the subject (n + 1 more). */
static double pattern_steps(const char *p, size_t plen, size_t n, int anchor) {
  const char *e = p + plen;
  double N = (double)n + 1, steps = (double)plen + 1;
  int anchored = 0, scans = 0;
  if (anchor && p < e && *p == '^') { anchored = 1; p++; }
  while (p < e && steps < 1e300) {
    if (*p == '(' || *p == ')') { p++; continue; }
    if (*p == '$' && p + 1 == e) break;
    if (*p == '%' && p + 1 < e) {
      if (p[1] == 'b') { scans = 1; p += e - p < 4 ? e - p : 4; continue; }
      if (p[1] == 'f') { p = class_end(p + 2, e); continue; }
      if (p[1] >= '0' && p[1] <= '9') { scans = 1; p += 2; continue; }
    }
    const char *q = class_end(p, e);
    if (q < e && (*q == '*' || *q == '+' || *q == '-')) { steps *= N; q++; }
    else if (q < e && *q == '?') { steps *= 2; q++; }
    p = q;
  }
  if (scans) steps *= N;
  if (!anchored) steps *= N;
  return steps;
}

static int has_specials(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strchr("^$*+?.([%-", p[i])) return 1;
  return 0;
}

/* Refuses a pattern call whose worst case is too long. */
static void check_pattern(lua_State *L, int kind, const char *fname) {
  size_t n, plen;
  const char *s = lua_tolstring(L, 1, &n), *p = lua_tolstring(L, 2, &plen);
  if (!s || !p) return;   /* the library function reports the bad argument */
  double steps;
  if (kind == K_FIND && (lua_toboolean(L, 4) || !has_specials(p, plen))) steps = ((double)n + 1) * ((double)plen + 1);
  else steps = pattern_steps(p, plen, n, kind != K_GMATCH);
  if (steps <= PATTERN_MAX_STEPS) return;
  char m[400];
  snprintf(m, sizeof m, "%s: the pattern \"%.40s%s\" on a subject of %zu bytes could take up to %.3g matching steps, "
           "more than the %.0e one call may take (the sandbox's bound, no parameter; use a simpler pattern or a "
           "shorter string)", fname, p, plen > 40 ? "..." : "", n, steps, PATTERN_MAX_STEPS);
  cc_lua_stop(L, m);
}

/* A library function called through its guard: upvalue 1 the function,
 * 2 its kind, 3 its name. */
static int guarded(lua_State *L) {
  sandbox *sb = sandbox_of(L);
  int kind = (int)lua_tointeger(L, lua_upvalueindex(2));
  const char *fname = lua_tostring(L, lua_upvalueindex(3));
  if (sb->stopped) raise_stop(L);
  cc_lua_line(L);
  cc_lua_check_time(L);
  switch (kind) {
  case K_FIND: case K_MATCH: case K_GMATCH: case K_GSUB: check_pattern(L, kind, fname); break;
  case K_CONCAT: case K_UNPACK: case K_MOVE: {   /* concat (t, sep, i, j), unpack (t, i, j), move (a, f, e, t) */
    int at = kind == K_CONCAT ? 3 : 2, isnum;
    lua_Integer f = lua_tointegerx(L, at, &isnum);
    if (!isnum) f = 1;
    lua_Integer e = lua_tointegerx(L, at + 1, &isnum);
    if (!isnum) e = lua_istable(L, 1) ? (lua_Integer)lua_rawlen(L, 1) : 0;
    if (e >= f) charge(L, (double)e - (double)f + 1);
    break;
  }
  case K_SORT:
    if (lua_istable(L, 1)) {
      double n = (double)lua_rawlen(L, 1);
      charge(L, n * (log2(n + 1) + 1));
    }
    break;
  case K_SETMT:
    if (lua_istable(L, 2)) {
      lua_pushliteral(L, "__gc");
      int gc = lua_rawget(L, 2) != LUA_TNIL;
      lua_pop(L, 1);
      if (gc)
        luaL_error(L, "setmetatable: a metatable with __gc is not allowed (finalizers would run outside the "
                   "sandbox's limits)");
    }
    break;
  default: break;
  }
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  int st = lua_pcall(L, n, LUA_MULTRET, 0);
  if (st != LUA_OK) {
    rethrow_limits(L, st);
    /* the library's own errors name no function or line (it is called from C here) */
    const char *m = lua_tostring(L, -1);
    if (m && strncmp(m, sb->name, strlen(sb->name))) {
      const char *named = luaL_gsub(L, m, "'?'", lua_pushfstring(L, "'%s'", fname));
      int line = cc_lua_line(L);
      lua_pushfstring(L, "%s:%d: %s", sb->name, line, named);
    }
    return lua_error(L);
  }
  return lua_gettop(L);
}

/* Replaces every function of global table `lib` with its guard. */
static void guard_lib(lua_State *L, const char *lib) {
  static const struct { const char *name; int kind; } special[] = {
    {"string.find", K_FIND}, {"string.match", K_MATCH}, {"string.gmatch", K_GMATCH}, {"string.gsub", K_GSUB},
    {"table.concat", K_CONCAT}, {"table.unpack", K_UNPACK}, {"table.move", K_MOVE}, {"table.sort", K_SORT},
    {"_G.setmetatable", K_SETMT}, {NULL, 0}};
  lua_getglobal(L, lib);
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
      const char *key = lua_tostring(L, -2);
      char full[96];
      snprintf(full, sizeof full, "%s.%s", lib, key);
      int kind = K_PLAIN;
      for (int i = 0; special[i].name; i++)
        if (!strcmp(special[i].name, full)) kind = special[i].kind;
      if (!strcmp(lib, "_G") && kind != K_SETMT) { lua_pop(L, 1); continue; }
      lua_pushvalue(L, -2);            /* key */
      lua_pushvalue(L, -2);            /* the function */
      lua_pushinteger(L, kind);
      lua_pushstring(L, !strcmp(lib, "_G") ? key : full);
      lua_pushcclosure(L, guarded, 3);
      lua_rawset(L, t);                /* replacing an existing key keeps lua_next valid */
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

lua_State *cc_lua_new(const cc_lua_limits *lim) {
  sandbox *sb = calloc(1, sizeof *sb);
  if (!sb) return NULL;
  sb->mem = lim ? lim->budget : NULL;
  if (!sb->mem) {
    sb->mem = sb->own = calloc(1, sizeof *sb->own);
    if (!sb->own) { free(sb); return NULL; }
    sb->own->max = (size_t)256 << 20;
    sb->own->deadline = 1e300;
  }
  sb->max_instr = lim && lim->max_instructions ? lim->max_instructions : 2000000000LL;
  sb->instr_left = sb->max_instr;
  snprintf(sb->name, sizeof sb->name, "?");
  lua_State *L = lua_newstate(alloc, sb);
  if (!L) { free(sb->own); free(sb); return NULL; }
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
  /* math.random the same in every run: a compile is reproducible */
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, 0);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  static const char *const libnames[] = {"string", "table", "utf8", "_G", NULL};
  for (int i = 0; libnames[i]; i++) guard_lib(L, libnames[i]);
  static const luaL_Reg own[] = {{"load", safe_load}, {"pcall", safe_pcall}, {"xpcall", safe_xpcall},
                                 {"print", safe_print}, {NULL, NULL}};
  for (const luaL_Reg *f = own; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setglobal(L, f->name);
  }
  cc_lib_open(L);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
  return L;
}

void cc_lua_close(lua_State *L) {
  if (!L) return;
  sandbox *sb = sandbox_of(L);
  lua_close(L);
  free(sb->own);
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

/* Whether msg starts with the script's name and a colon: its full name, or
 * the short one Lua gives a long path in its own messages ("...tail"). */
static int positioned(lua_State *L, const char *msg) {
  sandbox *sb = sandbox_of(L);
  size_t n = strlen(sb->name);
  if (!strncmp(msg, sb->name, n) && msg[n] == ':') return 1;
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "S", &ar) && ar.source[0] == '@' && !strcmp(ar.source + 1, sb->name)) {
      n = strlen(ar.short_src);
      return !strncmp(msg, ar.short_src, n) && msg[n] == ':';
    }
  return 0;
}

/* The script's frames a message's line was reached through: where the
 * error is inside a function of the script, " (called from S:10, S:14)"
 * is pushed after msg (at most CALLERS of them, the outermost last), so
 * that a helper's line comes with the lines that called it. */
enum { CALLERS = 8 };

/* The lines cc_lua_push_callers pushes: at most max into lines, *more
 * those left out; their number. */
static int callers(lua_State *L, int *lines, int max, int *more) {
  sandbox *sb = sandbox_of(L);
  lua_Debug ar;
  int n = 0, first = 1;
  *more = 0;
  for (int level = 0; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.source[0] != '@' || strcmp(ar.source + 1, sb->name) || ar.currentline <= 0)
      continue;
    if (first) { first = 0; continue; }   /* the innermost: the line itself */
    if (n < max) lines[n++] = ar.currentline;
    else (*more)++;
  }
  return n;
}

int cc_lua_push_callers(lua_State *L) {
  sandbox *sb = sandbox_of(L);
  int lines[CALLERS], more, n = callers(L, lines, CALLERS, &more);
  if (!n) return 0;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < n; i++) {
    char one[300];
    snprintf(one, sizeof one, "%s%s:%d", i ? ", " : "", sb->name, lines[i]);
    luaL_addstring(&b, one);
  }
  if (more) {
    char rest[64];
    snprintf(rest, sizeof rest, " and %d more", more);
    luaL_addstring(&b, rest);
  }
  luaL_pushresult(&b);
  return 1;
}

static void called_from(lua_State *L, const char *msg) {
  if (!cc_lua_push_callers(L)) return;
  lua_pushfstring(L, "%s (called from %s)", msg, lua_tostring(L, -1));
  lua_remove(L, -2);
}

/* Whether Lua errors carry their traceback (cc_lua_set_traceback). */
static _Atomic int with_traceback;

void cc_lua_set_traceback(int on) { with_traceback = on != 0; }

/* The message handler: the error as one "script:LINE: message" line (a
 * message that names no script line, or an error object that is not a
 * string, gets the line the error was raised at, or the script's last
 * line seen), followed by the Lua traceback when asked for. */
static int on_error(lua_State *L) {
  sandbox *sb = sandbox_of(L);
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = lua_pushfstring(L, "error object is a %s value", luaL_typename(L, 1));
  else msg = blame_script(L, msg);
  if (!positioned(L, msg)) {
    int line = sb->stopped ? 0 : cc_lua_line(L);
    if (!line) line = sb->last_line;
    msg = line > 0 ? lua_pushfstring(L, "%s:%d: %s", sb->name, line, msg) : lua_pushfstring(L, "%s: %s", sb->name, msg);
  }
  if (with_traceback) luaL_traceback(L, L, msg, 1);
  else if (!sb->stopped) called_from(L, msg);
  return 1;
}

bt_result cc_lua_run(lua_State *L, const char *src, size_t len, const char *name, rt_diag *diag) {
  sandbox *sb = sandbox_of(L);
  char chunkname[512];
  snprintf(chunkname, sizeof chunkname, "@%s", name);
  snprintf(sb->name, sizeof sb->name, "%s", name);
  lua_pushcfunction(L, on_error);
  int base = lua_gettop(L);
  int st = luaL_loadbufferx(L, src, len, chunkname, "t");
  if (st == LUA_OK) st = lua_pcall(L, 0, 0, base);
  if (st != LUA_OK) {
    if (st == LUA_ERRMEM && sb->refused) {   /* no message handler ran: the line is the last one seen */
      char m[300];
      cc_budget_mem_msg(sb->mem, m, sizeof m);
      if (sb->last_line > 0) rt_diag_add(diag, "%s:%d: %s", name, sb->last_line, m);
      else rt_diag_add(diag, "%s: %s (while loading the script)", name, m);
    } else {
      const char *msg = lua_tostring(L, -1);
      rt_diag_add(diag, "%s", msg ? msg : "error object is not a string");
    }
    lua_settop(L, base - 1);
    return BT_ERR_INVALID;   /* the script's fault, memory limit included */
  }
  lua_settop(L, base - 1);
  return BT_OK;
}
