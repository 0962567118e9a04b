/* cc_trace.c -- the Lua DSL's chunks: chunk(), ref:copy(), ref:reduce(),
 * parallelize(), param(), traced into operations over symbolic values,
 * and the postcondition checked symbolically at the end; the helpers
 * collective{} (cc_collective.c) and the compute calls (cc_compute.c)
 * share.  cc_script.c runs a script with all of them. */
#include "cc_trace_int.h"
#include "cc_frag.h"
#include "cc_topo.h"
#include "cc_via.h"
#include "ir_geom.h"
#include "rt_param.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunk j of r. */
static int at(const ref *r, int j) { return cc_pat_at(r->idx, r->pat, j); }

cc_trace *cc_dsl_trace_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* ---- symbolic values ---- */

static int val_reserve(cc_val *v, int n) {
  if (n <= v->cap) return 1;
  if (n > INT_MAX / 2) return 0;
  int cap = n > 2 * v->cap ? n : 2 * v->cap;
  uint64_t *t = cc_realloc(v->terms, (size_t)cap * sizeof *t);
  if (!t) return 0;
  v->terms = t;
  v->cap = cap;
  return 1;
}

int cc_dsl_val_set(cc_val *dst, const cc_val *src) {
  if (!val_reserve(dst, src->n)) return 0;
  memcpy(dst->terms, src->terms, src->n * sizeof *src->terms);
  dst->n = src->n;
  return 1;
}

/* dst = dst + src as multisets, kept sorted. */
static int val_merge(cc_val *dst, const cc_val *src) {
  if ((int64_t)dst->n + src->n > INT_MAX / 2 || !val_reserve(dst, dst->n + src->n)) return 0;
  int i = dst->n - 1, j = src->n - 1, k = dst->n + src->n - 1;
  while (j >= 0) dst->terms[k--] = (i >= 0 && dst->terms[i] > src->terms[j]) ? dst->terms[i--] : src->terms[j--];
  dst->n += src->n;
  return 1;
}

/* "input[3] of ranks 0,1,2" */
static void val_describe(const cc_val *v, char *buf, size_t n) {
  if (!v->n) { snprintf(buf, n, "nothing (never written)"); return; }
  size_t len = 0;
  for (int i = 0; i < v->n && len + 40 < n; ) {
    uint32_t idx = (uint32_t)v->terms[i];
    int j = i;
    len += snprintf(buf + len, n - len, "%sinput[%u] of rank%s ", len ? " + " : "", idx,
                    (j + 1 < v->n && (uint32_t)v->terms[j + 1] == idx) ? "s" : "");
    for (; j < v->n && (uint32_t)v->terms[j] == idx && len + 16 < n; j++)
      len += snprintf(buf + len, n - len, "%s%u", j > i ? "," : "", (unsigned)(v->terms[j] >> 32));
    i = j;
  }
}

/* ---- locations ---- */

static const char *space_name(const cc_trace *t, int s) { return t->space_name[s]; }

/* In place, input and output are one buffer in NCCL's layout; every
 * reference is mapped to one canonical location. */
static void canon(const cc_trace *t, int rank, int *space, int *idx) {
  if (!t->inplace || *space > CC_SPACE_OUTPUT) return;
  if (t->coll == IR_COLL_ALLGATHER && *space == CC_SPACE_INPUT) { *space = CC_SPACE_OUTPUT; *idx += rank * t->k; }
  else if (t->coll == IR_COLL_REDUCESCATTER && *space == CC_SPACE_OUTPUT) { *space = CC_SPACE_INPUT; *idx += rank * t->k; }
  else if (t->coll != IR_COLL_ALLGATHER && t->coll != IR_COLL_REDUCESCATTER && *space == CC_SPACE_OUTPUT) *space = CC_SPACE_INPUT;
}

/* A version number for a write. */
int cc_dsl_next_version(lua_State *L, cc_trace *t) {
  if (t->clock >= INT_MAX / 4)
    luaL_error(L, "the script writes more than %d chunks in all (each write of each chunk counts)", INT_MAX / 4);
  return ++t->clock;
}

/* The location (rank, space, idx), which check_range accepted. */
cc_loc *cc_dsl_loc(lua_State *L, cc_trace *t, int rank, int space, int idx) {
  canon(t, rank, &space, &idx);
  if (idx >= t->cap[space][rank]) {
    int cap = idx + 1 > 2 * t->cap[space][rank] ? idx + 1 : 2 * t->cap[space][rank];
    cc_loc *l = cc_realloc(t->loc[space][rank], (size_t)cap * sizeof *l);
    if (!l) cc_lua_nomem(L);
    memset(l + t->cap[space][rank], 0, (size_t)(cap - t->cap[space][rank]) * sizeof *l);
    t->loc[space][rank] = l;
    t->cap[space][rank] = cap;
  }
  if (idx + 1 > t->size[space][rank]) {
    if (space >= CC_SPACE_FIRST_SCRATCH) {
      int grow = idx + 1 - t->size[space][rank];
      int64_t all = t->fixed_chunks + t->scratch_chunks + grow, most = rt_param_int(RT_PARAM_MAX_CHUNKS);
      if (most > CC_MAX_TOTAL) most = CC_MAX_TOTAL;
      if (all > most)
        luaL_error(L, "%s[%d] on rank %d makes %I chunks in all buffers of all ranks, over the limit of %I "
                   "(%s raises it)", space_name(t, space), idx, rank, (lua_Integer)all, (lua_Integer)most,
                   rt_param_name(RT_PARAM_MAX_CHUNKS));
      if ((int64_t)t->scratch_rank[rank] + grow > CC_MAX_INDEX)
        luaL_error(L, "%s[%d] on rank %d makes its scratch buffers %I chunks, more than the %d a rank may have",
                   space_name(t, space), idx, rank, (lua_Integer)t->scratch_rank[rank] + grow, CC_MAX_INDEX);
      t->scratch_chunks += grow;
      t->scratch_rank[rank] += grow;
    }
    t->size[space][rank] = idx + 1;
  }
  return &t->loc[space][rank][idx];
}

static int find_space(cc_trace *t, const char *name, int create) {
  if (!strcmp(name, "input") || !strcmp(name, "i")) return CC_SPACE_INPUT;
  if (!strcmp(name, "output") || !strcmp(name, "o")) return CC_SPACE_OUTPUT;
  if (!strcmp(name, "s")) name = "scratch";
  for (int s = CC_SPACE_FIRST_SCRATCH; s < t->nspaces; s++)
    if (!strcmp(t->space_name[s], name)) return s;
  if (!create || t->nspaces == CC_MAX_SPACES || strlen(name) >= sizeof t->space_name[0]) return -1;
  int s = t->nspaces;
  t->size[s] = cc_calloc(t->nranks, sizeof(int));
  t->cap[s] = cc_calloc(t->nranks, sizeof(int));
  t->loc[s] = cc_calloc(t->nranks, sizeof(cc_loc *));
  if (!t->size[s] || !t->cap[s] || !t->loc[s]) return -2;
  snprintf(t->space_name[s], sizeof t->space_name[s], "%s", name);
  t->nspaces++;
  return s;
}

/* The buffer named b, created when new; raises the error. */
/* Edits (insert, delete, change, swap of neighbours) from a to b, up to
 * 3; 3 past that. */
static int edits(const char *a, const char *b) {
  int na = (int)strlen(a), nb = (int)strlen(b);
  if (na > 24 || nb > 24 || abs(na - nb) > 2) return 3;
  int d[26][26];
  for (int i = 0; i <= na; i++) d[i][0] = i;
  for (int j = 0; j <= nb; j++) d[0][j] = j;
  for (int i = 1; i <= na; i++)
    for (int j = 1; j <= nb; j++) {
      int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v) v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[na][nb] < 3 ? d[na][nb] : 3;
}

/* The buffer named b: input, output, or a scratch buffer (a new name makes
 * one), but a name one or two typos away from "input", "output" or
 * "scratch" (and not one of them with a number or _suffix) is an error at
 * its line: it would make a scratch buffer the script never meant, and the
 * collective's output would stay unwritten. */
static int space_arg(lua_State *L, cc_trace *t, const char *b) {
  static const char *const known[] = {"input", "output", "scratch"};
  int near = -1, best = 3;
  for (int k = 0; k < 3 && strlen(b) >= 4 && find_space(t, b, 0) < 0; k++) {
    size_t m = strlen(known[k]);
    if (!strncmp(b, known[k], m) && (isdigit((unsigned char)b[m]) || b[m] == '_')) continue;   /* scratch2, output_a */
    int e = edits(b, known[k]);
    if (e < best) best = e, near = k;
  }
  if (near >= 0 && best > 0)
    luaL_error(L, "'%s' is not a buffer: did you mean '%s'? (input, output, scratch; a name of its own makes a "
               "scratch buffer, but not one a typo away from these)", b, known[near]);
  int space = find_space(t, b, 1);
  if (space == -2) cc_lua_nomem(L);
  if (space < 0) luaL_error(L, "too many buffers (or name too long): '%s'", b);
  return space;
}

/* Checks a (rank, buffer, index, count) range in 64 bits, before any of
 * it becomes an int; raises a Lua error. */
void cc_dsl_check_range(lua_State *L, cc_trace *t, lua_Integer rank, int space, lua_Integer idx, lua_Integer count) {
  if (rank < 0 || rank >= t->nranks) luaL_error(L, "rank %I out of range [0, %d)", (lua_Integer)rank, t->nranks);
  if (count < 1 || count > CC_MAX_INDEX)
    luaL_error(L, "count %I out of range [1, %d]", (lua_Integer)count, CC_MAX_INDEX);
  if (idx < 0) luaL_error(L, "index %I of %s is negative", (lua_Integer)idx, space_name(t, space));
  if (space <= CC_SPACE_OUTPUT && idx + count > t->fixed_size[space])
    luaL_error(L, "%s[%I..%I] out of range: %s has %d chunks per rank", space_name(t, space), (lua_Integer)idx,
               (lua_Integer)(idx + count - 1), space_name(t, space), t->fixed_size[space]);
  if (idx > CC_MAX_INDEX - count)
    luaL_error(L, "index out of range: %s[%I..%I] goes past the %d chunks a buffer of a rank may have",
               space_name(t, space), (lua_Integer)idx, (lua_Integer)(idx + count - 1), CC_MAX_INDEX);
}


/* The line of the user's script that made the current call: the innermost
 * frame of a file chunk, so that operations made inside a baton.* module
 * are attributed to the script line that called the module. */
int cc_dsl_script_line(lua_State *L) { return cc_lua_line(L); }

/* Checks the chunks of pattern p from (rank, buffer, idx), `count` of
 * them, as check_range does a range: every one inside the buffer. */
static void check_pattern(lua_State *L, cc_trace *t, lua_Integer rank, int space, lua_Integer idx, lua_Integer count,
                          cc_pat p) {
  if (!p.run) { cc_dsl_check_range(L, t, rank, space, idx, count); return; }
  cc_dsl_check_range(L, t, rank, space, idx, 1);
  if (count < 1 || count > CC_MAX_INDEX)
    luaL_error(L, "count %I out of range [1, %d]", (lua_Integer)count, CC_MAX_INDEX);
  int64_t lo, hi;
  cc_pat_extent(p, count, &lo, &hi);
  int64_t size = space <= CC_SPACE_OUTPUT ? t->fixed_size[space] : CC_MAX_INDEX;
  if (idx + lo < 0 || idx + hi >= size) {
    char pat[64];
    cc_pat_format(p, pat, sizeof pat);
    luaL_error(L, "%I chunks from %s[%I]%s reach %s[%I], outside [0, %I) (%s)", (lua_Integer)count,
               space_name(t, space), (lua_Integer)idx, pat, space_name(t, space), (lua_Integer)(idx + lo < 0 ? idx + lo : idx + hi),
               (lua_Integer)size, space <= CC_SPACE_OUTPUT ? "the chunks a rank's buffer has" : "the chunks a buffer of a rank may have");
  }
}

ref *cc_dsl_push_ref(lua_State *L, cc_trace *t, int rank, int space, int idx, int count, cc_pat p) {
  ref *r = lua_newuserdatauv(L, sizeof(ref) + (size_t)count * sizeof(int), 0);
  r->rank = rank; r->space = space; r->idx = idx; r->count = count; r->pat = p;
  for (int i = 0; i < count; i++) r->versions[i] = cc_dsl_loc(L, t, rank, space, at(r, i))->version;
  luaL_setmetatable(L, REF_MT);
  return r;
}

/* A chunk whose pieces the instances of a parallelize left different. */
static void check_mixed(lua_State *L, cc_trace *t, const cc_loc *l, int rank, int space, int idx) {
  if (l->mixed)
    luaL_error(L, "rank %d %s[%d] holds different values in the instances of parallelize at %s:%d; "
               "read it inside the fragment, or make every instance leave the same value",
               rank, space_name(t, space), idx, t->script, l->mixed);
}

static void check_fresh(lua_State *L, cc_trace *t, const ref *r, const char *what) {
  for (int i = 0; i < r->count; i++) {
    cc_loc *l = cc_dsl_loc(L, t, r->rank, r->space, at(r, i));
    if (l->version != r->versions[i])
      luaL_error(L, "stale reference: %s rank %d %s[%d] was written again after this reference was made; use the reference that write returned",
                 what, r->rank, space_name(t, r->space), at(r, i));
    check_mixed(L, t, l, r->rank, r->space, at(r, i));
  }
}

/* The script lines that called the function an operation is being made
 * in, as an index into t->froms (each distinct list once: a Lua table in
 * the registry finds it); -1 at the script's top level. */
static int op_from(lua_State *L, cc_trace *t) {
  if (!cc_lua_push_callers(L)) return -1;
  if (lua_getfield(L, LUA_REGISTRYINDEX, "baton.froms") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "baton.froms");
  }
  lua_pushvalue(L, -2);
  int known = lua_rawget(L, -2) == LUA_TNUMBER, at = known ? (int)lua_tointeger(L, -1) : t->nfroms;
  lua_pop(L, 1);
  if (!known) {
    if (t->nfroms == t->capfroms) {
      int cap = t->capfroms ? 2 * t->capfroms : 16;
      char **v = cc_realloc(t->froms, (size_t)cap * sizeof *v);
      if (!v) cc_lua_nomem(L);
      t->froms = v;
      t->capfroms = cap;
    }
    size_t len;
    const char *s = lua_tolstring(L, -2, &len);
    char *copy = cc_malloc(len + 1);
    if (!copy) cc_lua_nomem(L);
    memcpy(copy, s, len + 1);
    t->froms[t->nfroms++] = copy;
    lua_pushvalue(L, -2);
    lua_pushinteger(L, at);
    lua_rawset(L, -3);
  }
  lua_pop(L, 2);
  return at;
}

/* Records op.  Its locations are canonical: in place, the two names of one
 * buffer (input and output) become one, so that lowering and the IR see
 * one name for one memory.  A compute step's source stays the input chunks
 * whose rows it computes. */
void cc_dsl_add_op(lua_State *L, cc_trace *t, const cc_op *op) {
  if (t->nops == t->capops) {
    if (t->capops >= INT_MAX / 4) luaL_error(L, "the script makes more than %d chunk operations", INT_MAX / 4);
    int cap = t->capops ? 2 * t->capops : 64;
    cc_op *o = cc_realloc(t->ops, (size_t)cap * sizeof *o);
    if (!o) cc_lua_nomem(L);
    t->ops = o;
    t->capops = cap;
  }
  t->ops[t->nops] = *op;
  cc_op *o = &t->ops[t->nops];
  if (o->kind != CC_COMPUTE) canon(t, o->src_rank, &o->src_space, &o->src_idx);
  canon(t, o->dst_rank, &o->dst_space, &o->dst_idx);
  o->frag = t->cur_frag;
  o->piece = t->cur_piece;
  o->round = t->round;
  o->from = op_from(L, t);
  cc_via_op(L, t, o);
  t->nops++;
}


/* Raises "WHAT: unknown KIND 'KEY' (it takes a, b, ...)" for the first
 * key of the table at `at` that is not in the NULL-terminated `known` (a
 * misspelt field would otherwise be ignored and its default used). */
void cc_dsl_check_keys(lua_State *L, int at, const char *const *known, const char *what, const char *kind) {
  at = lua_absindex(L, at);
  lua_pushnil(L);
  while (lua_next(L, at)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int ok = 0;
    for (int i = 0; k && known[i] && !ok; i++) ok = !strcmp(k, known[i]);
    if (ok) continue;
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; known[i] && used < sizeof list - 1; i++) {
      int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
      used = n < 0 ? sizeof list - 1 : used + (size_t)n < sizeof list ? used + (size_t)n : sizeof list - 1;
    }
    if (k) luaL_error(L, "%s: unknown %s '%s' (it takes %s)", what, kind, k, list);
    luaL_error(L, "%s: a %s must be a name (it takes %s)", what, kind, list);
  }
}

/* The value of field `key`, on top of the stack, as an integer: dflt when
 * it is nil (an error when `required`); an error naming the field when it
 * is not an integer (chunks=1.5). */
lua_Integer cc_dsl_top_integer(lua_State *L, const char *key, lua_Integer dflt, int required) {
  if (lua_isnil(L, -1)) {
    if (required) luaL_error(L, "%s is required (an integer)", key);
    return dflt;
  }
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isnum);
  if (!isnum) luaL_error(L, "%s=%s is not an integer", key, luaL_tolstring(L, -1, NULL));
  return v;
}

/* Reads the optional options table at index `at`: ch, sendtb, recvtb,
 * via (op->via, -1 when absent), and with `pattern` (a copy's) the
 * destination's run and stride into op->dst_pat (cc_ref.h), for
 * op->count chunks. */
static void read_opts(lua_State *L, int at, cc_op *op, int pattern) {
  op->ch = op->sendtb = op->recvtb = op->via = -1;
  if (lua_isnoneornil(L, at)) return;
  luaL_checktype(L, at, LUA_TTABLE);
  static const char *const keys[] = {"ch", "sendtb", "recvtb"};
  static const char *const known[] = {"ch", "sendtb", "recvtb", "via", NULL};
  static const char *const known_pat[] = {"ch", "sendtb", "recvtb", "run", "stride", "via", NULL};
  cc_dsl_check_keys(L, at, pattern ? known_pat : known, pattern ? "copy options" : "reduce options", "option");
  if (pattern) cc_pat_read(L, at, op->count, "copy", &op->dst_pat);
  lua_getfield(L, at, "via");
  op->via = cc_via_parse(L, -1);
  lua_pop(L, 1);
  int *dst[] = {&op->ch, &op->sendtb, &op->recvtb};
  for (int i = 0; i < 3; i++) {
    lua_getfield(L, at, keys[i]);
    if (!lua_isnil(L, -1)) {
      lua_Integer v = cc_dsl_top_integer(L, keys[i], 0, 1);
      if (v < 0 || v > 1023) luaL_error(L, "option %s=%I out of range [0, 1023]", keys[i], (lua_Integer)v);
      *dst[i] = (int)v;
    }
    lua_pop(L, 1);
  }
}

cc_trace *cc_dsl_declared(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  cc_lua_check_time(L);
  cc_lua_line(L);
  if (!t->declared) luaL_error(L, "call collective{...} before using chunks");
  return t;
}

/* ---- the DSL ---- */


/* chunk(rank, buffer, index [, count [, pattern]]): pattern {stride = S}
 * or {run = M, stride = S} (cc_ref.h); index is the first chunk. */
int cc_dsl_chunk(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  lua_Integer rank64 = luaL_checkinteger(L, 1);
  const char *b = luaL_checkstring(L, 2);
  lua_Integer idx64 = luaL_checkinteger(L, 3), count64 = luaL_optinteger(L, 4, 1);
  cc_pat p = {0, 0};
  if (!lua_isnoneornil(L, 5)) {
    luaL_checktype(L, 5, LUA_TTABLE);
    static const char *const known[] = {"run", "stride", NULL};
    cc_dsl_check_keys(L, 5, known, "chunk", "pattern key");
    if (count64 >= 1 && count64 <= CC_MAX_INDEX) cc_pat_read(L, 5, (int)count64, "chunk", &p);
  }
  int space = space_arg(L, t, b);
  check_pattern(L, t, rank64, space, idx64, count64, p);
  int rank = (int)rank64, idx = (int)idx64, count = (int)count64;
  for (int i = 0; i < count; i++) {
    int c = cc_pat_at(idx, p, i);
    cc_loc *l = cc_dsl_loc(L, t, rank, space, c);
    check_mixed(L, t, l, rank, space, c);
  }
  cc_dsl_push_ref(L, t, rank, space, idx, count, p);
  return 1;
}

/* An out-of-place call leaves its input as the caller gave it: a copy or
 * reduce whose destination is the input buffer of an out-of-place
 * collective is an error at its line (the CPU run would catch it only
 * after lowering, without the line).  A fused program's input is its own
 * (computed, not given): it may be written. */
static void check_input_write(lua_State *L, const cc_trace *t, const char *what, int rank, int space, int idx,
                              int count, cc_pat p) {
  if (t->inplace || t->fused || space != CC_SPACE_INPUT) return;
  char range[64];
  int64_t lo, hi;
  cc_pat_extent(p, count, &lo, &hi);
  if (count > 1) snprintf(range, sizeof range, "%d..%d%s", idx + (int)lo, idx + (int)hi, p.run ? ", strided" : "");
  else snprintf(range, sizeof range, "%d", idx);
  luaL_error(L, "%s rank %d input[%s] writes the input buffer of an out-of-place collective (declared at %s:%d "
             "without inplace = true), which a call must leave unchanged; write into output or a scratch buffer, "
             "or declare inplace = true", what, rank, range, t->script, t->decl_line);
}

/* Rooted collectives are written for root rank 0 (the runtime relabels
 * ranks for the others).  Off the root a reduce's caller gives no output
 * and its input is read only: a copy or reduce into either there is an
 * error at its line (partial results go to scratch). */
static void check_rooted_write(lua_State *L, const cc_trace *t, const char *what, int rank, int space, int idx) {
  if (ir_coll_unused(t->coll) != IR_BUF_OUTPUT || rank == 0 || space > CC_SPACE_OUTPUT) return;
  luaL_error(L, "%s rank %d %s[%d]: off the root (rank 0) a %s has no output and leaves its input as the caller "
             "gave it; keep partial results in a scratch buffer", what, rank, space_name(t, space), idx,
             ir_coll_name[t->coll]);
}

/* Off the root a broadcast's caller gives no input: reading a value that
 * came from another rank's input (its own, in place, before it received
 * the root's) is an error at the line that reads it. */
static void check_rooted_read(lua_State *L, cc_trace *t, const char *what, const ref *src) {
  if (ir_coll_unused(t->coll) != IR_BUF_INPUT) return;
  for (int i = 0; i < src->count; i++) {
    const cc_loc *l = cc_dsl_loc(L, t, src->rank, src->space, at(src, i));
    for (int j = 0; j < l->val.n; j++)
      if (l->val.terms[j] >> 32)
        luaL_error(L, "%s rank %d %s[%d] reads input[%d] of rank %d, which a %s has only on the root (rank 0)",
                   what, src->rank, space_name(t, src->space), at(src, i), (int)(uint32_t)l->val.terms[j],
                   (int)(l->val.terms[j] >> 32), ir_coll_name[t->coll]);
  }
}

/* Raises an error when an operation would read a chunk it has written
 * already: d's chunk at position i (of count, pattern dp from di) is s's
 * chunk at position j > i (pattern sp from si), both on one rank's buffer
 * (their canonical names).  The same position is "onto itself". */
static void check_overlap(lua_State *L, cc_trace *t, const char *what, int rank, int sspace, int si, cc_pat sp,
                          int dspace, int di, cc_pat dp, int count, int srank) {
  if (rank != srank) return;
  int cs = sspace, cd = dspace, s0 = si, d0 = di;
  canon(t, rank, &cs, &s0);
  canon(t, rank, &cd, &d0);
  if (cs != cd) return;
  for (int i = 0; i < count; i++) {
    int j = cc_pat_find(s0, sp, count, cc_pat_at(d0, dp, i));
    if (j == i)
      luaL_error(L, "%s rank %d %s[%d] %s", what, rank, space_name(t, dspace), cc_pat_at(di, dp, i),
                 !strcmp(what, "copy of") ? "onto itself" : "with itself");
    if (j > i)
      luaL_error(L, "%s rank %d %s[%d]: its chunk %d is written before chunk %d reads it (source and destination "
                 "overlap); go through a scratch buffer", what, rank, space_name(t, sspace), si, i, j);
  }
}

/* A reference's chunks are read (a copy's source, both sides of a
 * reduce): each must hold a value.  chunk() itself reads nothing, so a
 * helper may take references up front; the error comes at the read, at
 * its line. */
static void check_written(lua_State *L, cc_trace *t, const ref *r) {
  for (int i = 0; i < r->count; i++) {
    const cc_loc *l = cc_dsl_loc(L, t, r->rank, r->space, at(r, i));
    if (l->val.n) continue;
    if (t->fused && r->space == CC_SPACE_INPUT)
      luaL_error(L, "rank %d input[%d] is not computed yet: a fused program's input holds nothing until a compute "
                 "step (gemv) writes it", r->rank, at(r, i));
    luaL_error(L, "reading an uninitialized chunk: rank %d %s[%d] was never written", r->rank,
               space_name(t, r->space), at(r, i));
  }
}

/* The arguments ref:op(rank, buffer, index ...) of copy and swap: the
 * reference, and the place it names on another (or the same) rank. */
static ref *ref_and_place(lua_State *L, lua_Integer *rank, const char **buf, lua_Integer *idx) {
  ref *r = luaL_checkudata(L, 1, REF_MT);
  *rank = luaL_checkinteger(L, 2);
  *buf = luaL_checkstring(L, 3);
  *idx = luaL_checkinteger(L, 4);
  return r;
}

/* ref:copy(rank, buffer, index [, opts]): opts ch, sendtb, recvtb, and
 * the destination's pattern run, stride (cc_ref.h). */
static int l_copy(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  lua_Integer rank64, idx64;
  const char *b;
  ref *src = ref_and_place(L, &rank64, &b, &idx64);
  cc_op op = {.kind = CC_COPY, .src_rank = src->rank, .src_space = src->space, .src_idx = src->idx,
              .src_pat = src->pat, .count = src->count, .line = cc_dsl_script_line(L)};
  read_opts(L, 5, &op, 1);
  int space = space_arg(L, t, b);
  check_pattern(L, t, rank64, space, idx64, src->count, op.dst_pat);
  int rank = (int)rank64, idx = (int)idx64;
  cc_pat dp = op.dst_pat;
  op.dst_rank = rank;
  op.dst_idx = idx;
  op.dst_space = space;
  check_fresh(L, t, src, "copy of");
  check_written(L, t, src);
  char topo[CC_MAX_TOPO_NAME + 64];
  if (!cc_topo_linked(&t->topo, src->rank, rank))
    luaL_error(L, "copy from rank %d to rank %d: the topology (%s) does not link them", src->rank, rank,
               cc_topo_describe(&t->topo, topo, sizeof topo));
  check_overlap(L, t, "copy of", rank, src->space, src->idx, src->pat, space, idx, dp, src->count, src->rank);
  check_input_write(L, t, "copy to", rank, space, idx, src->count, dp);
  check_rooted_write(L, t, "copy to", rank, space, idx);
  check_rooted_read(L, t, "copy of", src);
  for (int i = 0; i < src->count; i++) {
    cc_loc *d = cc_dsl_loc(L, t, rank, space, cc_pat_at(idx, dp, i)), *s = cc_dsl_loc(L, t, src->rank, src->space, at(src, i));
    if (!cc_dsl_val_set(&d->val, &s->val)) cc_lua_nomem(L);
    d->version = cc_dsl_next_version(L, t);
    d->mixed = 0;
    d->line = op.line;
  }
  cc_dsl_add_op(L, t, &op);
  cc_dsl_push_ref(L, t, rank, space, idx, src->count, dp);
  return 1;
}

/* ref:reduce(other [, opts]): ref = ref (op) other, at ref's place; chunk
 * j of ref with chunk j of other, whatever their patterns. */
static int l_reduce(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  ref *dst = luaL_checkudata(L, 1, REF_MT);
  ref *src = luaL_checkudata(L, 2, REF_MT);
  cc_op op = {.kind = CC_REDUCE, .src_rank = src->rank, .src_space = src->space, .src_idx = src->idx,
              .src_pat = src->pat, .dst_rank = dst->rank, .dst_space = dst->space, .dst_idx = dst->idx,
              .dst_pat = dst->pat, .count = dst->count, .line = cc_dsl_script_line(L)};
  read_opts(L, 3, &op, 0);
  if (src->count != dst->count)
    luaL_error(L, "reducing references of different counts (%d and %d)", dst->count, src->count);
  check_fresh(L, t, dst, "reduce into");
  check_fresh(L, t, src, "reduce of");
  check_written(L, t, dst);
  check_written(L, t, src);
  char topo[CC_MAX_TOPO_NAME + 64];
  if (!cc_topo_linked(&t->topo, src->rank, dst->rank))
    luaL_error(L, "reduce from rank %d into rank %d: the topology (%s) does not link them", src->rank, dst->rank,
               cc_topo_describe(&t->topo, topo, sizeof topo));
  check_overlap(L, t, "reduce of", dst->rank, src->space, src->idx, src->pat, dst->space, dst->idx, dst->pat,
                dst->count, src->rank);
  check_input_write(L, t, "reduce into", dst->rank, dst->space, dst->idx, dst->count, dst->pat);
  check_rooted_write(L, t, "reduce into", dst->rank, dst->space, dst->idx);
  check_rooted_read(L, t, "reduce of", src);
  check_rooted_read(L, t, "reduce into", dst);
  for (int i = 0; i < dst->count; i++) {
    cc_loc *d = cc_dsl_loc(L, t, dst->rank, dst->space, at(dst, i)), *s = cc_dsl_loc(L, t, src->rank, src->space, at(src, i));
    if (!val_merge(&d->val, &s->val)) cc_lua_nomem(L);
    d->version = cc_dsl_next_version(L, t);
    d->mixed = 0;
    d->line = op.line;
  }
  cc_dsl_add_op(L, t, &op);
  cc_dsl_push_ref(L, t, dst->rank, dst->space, dst->idx, dst->count, dst->pat);
  return 1;
}

/* ref:swap(rank, buffer, index): ref's chunks and as many consecutive
 * chunks of another rank's buffer from index trade places, both read
 * before either is written.  In a direct program one step (xchg) of
 * ref's rank, Simple only; in a FIFO program a send each way, each
 * rank's receive after its own send.  Returns references to both, ref's
 * side first. */
static int l_swap(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  lua_Integer rank64, idx64;
  const char *b;
  ref *mine = ref_and_place(L, &rank64, &b, &idx64);
  if (!lua_isnoneornil(L, 5)) luaL_error(L, "swap takes no options: swap(rank, buffer, index)");
  int space = space_arg(L, t, b);
  const cc_pat flat = {0, 0};
  check_pattern(L, t, rank64, space, idx64, mine->count, flat);
  int rank = (int)rank64, idx = (int)idx64, n = mine->count;
  if (rank == mine->rank)
    luaL_error(L, "swap of rank %d's chunks with its own: swap trades chunks with another rank", rank);
  /* FIFO unless the collective or an operation before made it direct */
  const int fifo = t->via == CC_VIA_FIFO && !t->direct;
  if (!fifo && ir_proto_landed(t->proto))
    luaL_error(L, "swap between ranks %d and %d in a direct %s program: swap loads the peer's chunks, which only "
               "protocol Simple does", mine->rank, rank, ir_proto_name[t->proto]);
  ref *theirs = cc_dsl_push_ref(L, t, rank, space, idx, n, flat);   /* kept on the stack while it is used */
  cc_op op = {.kind = CC_SWAP, .src_rank = mine->rank, .src_space = mine->space, .src_idx = mine->idx,
              .src_pat = mine->pat, .dst_rank = rank, .dst_space = space, .dst_idx = idx, .count = n,
              .ch = -1, .sendtb = -1, .recvtb = -1, .via = fifo ? CC_VIA_FIFO : CC_VIA_DIRECT,
              .line = cc_dsl_script_line(L)};
  check_fresh(L, t, mine, "swap of");
  check_fresh(L, t, theirs, "swap with");
  check_written(L, t, mine);
  check_written(L, t, theirs);
  char topo[CC_MAX_TOPO_NAME + 64];
  if (!cc_topo_linked(&t->topo, mine->rank, rank))
    luaL_error(L, "swap between ranks %d and %d: the topology (%s) does not link them", mine->rank, rank,
               cc_topo_describe(&t->topo, topo, sizeof topo));
  check_input_write(L, t, "swap of", mine->rank, mine->space, mine->idx, n, mine->pat);
  check_input_write(L, t, "swap with", rank, space, idx, n, flat);
  check_rooted_write(L, t, "swap of", mine->rank, mine->space, mine->idx);
  check_rooted_write(L, t, "swap with", rank, space, idx);
  check_rooted_read(L, t, "swap of", mine);
  check_rooted_read(L, t, "swap with", theirs);
  for (int i = 0; i < n; i++) {
    cc_loc *x = cc_dsl_loc(L, t, mine->rank, mine->space, at(mine, i)), *y = cc_dsl_loc(L, t, rank, space, idx + i);
    cc_val v = x->val;
    x->val = y->val;
    y->val = v;
    x->version = cc_dsl_next_version(L, t);
    y->version = cc_dsl_next_version(L, t);
    x->mixed = y->mixed = 0;
    x->line = y->line = op.line;
  }
  cc_dsl_add_op(L, t, &op);
  cc_dsl_push_ref(L, t, mine->rank, mine->space, mine->idx, n, mine->pat);
  cc_dsl_push_ref(L, t, rank, space, idx, n, flat);
  return 2;
}

/* parallelize(n, fn): calls fn(i) for i = 0..n-1, each from the state
 * before the call; instance i's operations act on piece i of every chunk
 * and run on their own channels (cc_lower.c).  Afterwards a chunk holds
 * what the instances left there, if they agree; else it is mixed. */
int cc_dsl_parallelize(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  lua_Integer n = luaL_checkinteger(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (n < 1 || n > 64) luaL_error(L, "parallelize: %I instances out of range [1, 64]", (lua_Integer)n);
  cc_via_parallelize(L, t);
  if (t->cur_frag) luaL_error(L, "parallelize inside parallelize (started at %s:%d) is not supported",
                              t->script, t->frags[t->cur_frag - 1].line);
  if (t->nfrags == t->capfrags) {
    int cap = t->capfrags ? 2 * t->capfrags : 8;
    if (t->capfrags >= INT_MAX / 4) luaL_error(L, "the script calls parallelize more than %d times", INT_MAX / 4);
    cc_frag *f = cc_realloc(t->frags, (size_t)cap * sizeof *f);
    if (!f) cc_lua_nomem(L);
    t->frags = f;
    t->capfrags = cap;
  }
  int line = cc_dsl_script_line(L);
  t->frags[t->nfrags++] = (cc_frag){(int)n, line};
  if (t->clock >= INT_MAX / 4) cc_dsl_next_version(L, t);   /* the error: snapshots renumber chunks */
  if (!cc_frag_begin(t)) cc_lua_nomem(L);
  t->cur_frag = t->nfrags;
  for (int i = 0; i < n; i++) {
    t->cur_piece = i;
    lua_pushvalue(L, 2);
    lua_pushinteger(L, i);
    lua_call(L, 1, 0);
    cc_lua_check_time(L);
    if (t->clock >= INT_MAX / 4) cc_dsl_next_version(L, t);
    if (!cc_frag_next(t, i == 0, line)) cc_lua_nomem(L);
  }
  t->cur_frag = t->cur_piece = 0;
  if (t->clock >= INT_MAX / 4) cc_dsl_next_version(L, t);
  if (!cc_frag_end(t)) cc_lua_nomem(L);
  return 0;
}

int cc_dsl_ref_index(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  ref *r = luaL_checkudata(L, 1, REF_MT);
  const char *k = luaL_checkstring(L, 2);
  if (!strcmp(k, "rank")) lua_pushinteger(L, r->rank);
  else if (!strcmp(k, "index")) lua_pushinteger(L, r->idx);
  else if (!strcmp(k, "count")) lua_pushinteger(L, r->count);
  else if (!strcmp(k, "buffer")) lua_pushstring(L, space_name(t, r->space));
  else if (!strcmp(k, "copy")) { lua_pushvalue(L, lua_upvalueindex(1)); lua_pushcclosure(L, l_copy, 1); }
  else if (!strcmp(k, "reduce")) { lua_pushvalue(L, lua_upvalueindex(1)); lua_pushcclosure(L, l_reduce, 1); }
  else if (!strcmp(k, "swap")) { lua_pushvalue(L, lua_upvalueindex(1)); lua_pushcclosure(L, l_swap, 1); }
  else lua_pushnil(L);
  return 1;
}

int cc_dsl_ref_tostring(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  ref *r = luaL_checkudata(L, 1, REF_MT);
  char pat[64];
  cc_pat_format(r->pat, pat, sizeof pat);
  lua_pushfstring(L, "chunk(%d, %s, %d, %d%s)", r->rank, space_name(t, r->space), r->idx, r->count, pat);
  return 1;
}

/* round(): the operations traced after it form the next round.  On each
 * rank, every operation of a round starts after every operation of the
 * rank's previous round (a round that has operations there) has done its
 * part; within a round the scheduler orders what does not depend, as
 * everywhere.  Returns the new round's number (the first is 0). */
int cc_dsl_round(lua_State *L) {
  cc_trace *t = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_gettop(L) > 0) luaL_error(L, "round() takes no arguments");
  if (t->cur_frag) luaL_error(L, "round() inside parallelize: its instances run side by side, not in rounds");
  if (t->round >= CC_MAX_ROUNDS) luaL_error(L, "more than %d rounds", CC_MAX_ROUNDS);
  t->round++;
  t->round_line = cc_dsl_script_line(L);
  lua_pushinteger(L, t->round);
  return 1;
}

/* param(name, default): a --param value, converted to the default's type. */
int cc_dsl_param(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "baton.params_read");   /* for unread_params: the names in the order read */
  if (lua_getfield(L, -1, name) == LUA_TNIL) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -3, name);
    lua_getfield(L, LUA_REGISTRYINDEX, "baton.params_seq");
    lua_pushstring(L, name);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
  lua_getfield(L, LUA_REGISTRYINDEX, "baton.params");
  lua_getfield(L, -1, name);
  if (lua_isnil(L, -1)) { lua_settop(L, 2); return 1; }
  if (lua_type(L, 2) == LUA_TNUMBER) {
    if (!lua_stringtonumber(L, lua_tostring(L, -1)))
      luaL_error(L, "parameter %s=%s is not a number", name, lua_tostring(L, -1));
    return 1;
  }
  if (lua_type(L, 2) == LUA_TBOOLEAN) {
    const char *v = lua_tostring(L, -1);
    lua_pushboolean(L, !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
  }
  return 1;
}

/* Symbolic postcondition, run in protected mode after the script. */
int cc_dsl_finish(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  if (!t->declared) luaL_error(L, "%s: the script never called collective{...}", t->script);
  int custom = t->coll == IR_COLL_CUSTOM;
  char got[256], want[256], what[400];
  if (custom) {   /* the expect as written, shortened with what was left out */
    size_t len = strlen(t->expect), shown = len <= 160 ? len : 120;
    char rest[64] = "";
    if (shown < len) snprintf(rest, sizeof rest, "... (%zu more characters)", len - shown);
    snprintf(what, sizeof what, "%s:%d: postcondition of the custom collective (expect \"%.*s%s\")", t->script,
             t->decl_line, (int)shown, t->expect, rest);
  }
  else snprintf(what, sizeof what, "%s: postcondition of %s", t->script, ir_coll_name[t->coll]);
  for (int r = 0; r < t->nranks; r++)
    for (int c = 0; c < t->fixed_size[CC_SPACE_OUTPUT]; c++) {
      if (!(c & 1023)) cc_lua_check_time(L);
      int sr, si, rule = -1, has = cc_expected(t, r, c, &sr, &si, &rule);
      if (has < 0) {   /* the evaluation's own words: "expect: rule 1 divides by zero at rank 0 chunk 0" */
        rt_diag *d = rt_diag_new(1);
        int rk, ix;
        if (d) ir_expect_eval(t->rules, r, c, t->nranks, t->k, &rk, &ix, d);
        lua_pushstring(L, d ? rt_diag_text(d) : "cannot be evaluated");
        rt_diag_free(d);
        luaL_error(L, "%s: %s", what, luaL_gsub(L, lua_tostring(L, -1), "\n", ""));
      }
      if (!has) continue;
      if (sr < -1 || sr >= t->nranks || si < 0 || si >= t->fixed_size[CC_SPACE_INPUT])
        luaL_error(L, "%s says rank %d output[%d] holds input[%d] of rank %d, which does not exist (ranks 0..%d, input[0..%d])",
                   what, r, c, si, sr, t->nranks - 1, t->fixed_size[CC_SPACE_INPUT] - 1);
      cc_val ev = {0, 0, NULL};
      uint64_t one = (uint64_t)(sr < 0 ? 0 : sr) << 32 | (uint32_t)si;
      if (sr >= 0) { ev.n = ev.cap = 1; ev.terms = &one; }
      else {
        ev.terms = cc_malloc((size_t)t->nranks * sizeof(uint64_t));
        if (!ev.terms) cc_lua_nomem(L);
        ev.n = 0;
        for (int q = 0; q < t->nranks; q++) {   /* every rank, or those i[* if COND] sums */
          int in = custom ? ir_expect_sums(t->rules, rule, q, r, c, t->nranks, t->k) : 1;
          if (in < 0) {
            cc_free(ev.terms);
            luaL_error(L, "%s: rule %d overflows or divides by zero choosing the ranks it sums at rank %d output[%d]",
                       what, rule + 1, r, c);
          }
          if (in) ev.terms[ev.n++] = (uint64_t)q << 32 | (uint32_t)si;
        }
        ev.cap = t->nranks;
        if (!ev.n) {
          cc_free(ev.terms);
          luaL_error(L, "%s: rule %d sums no rank for rank %d output[%d]", what, rule + 1, r, c);
        }
      }
      cc_loc *l = cc_dsl_loc(L, t, r, CC_SPACE_OUTPUT, c);
      if (l->mixed) {
        lua_pushfstring(L, "%s: postcondition of %s fails: rank %d output[%d] holds different values in the instances of parallelize at %s:%d",
                        t->script, ir_coll_name[t->coll], r, c, t->script, l->mixed);
        if (sr < 0) cc_free(ev.terms);
        return lua_error(L);
      }
      int same = l->val.n == ev.n && !memcmp(l->val.terms, ev.terms, ev.n * sizeof(uint64_t));
      if (!same) {
        val_describe(&l->val, got, sizeof got);
        val_describe(&ev, want, sizeof want);
        char where[300] = "", by[160] = "";
        if (l->line) snprintf(where, sizeof where, " (last written at %s:%d)", t->script, l->line);
        int rule = -1, rr, rc, len;
        if (custom && ir_expect_eval_rule(t->rules, r, c, t->nranks, t->k, &rr, &rc, &rule, NULL) == 1) {
          const char *text = ir_expect_rule_text(t->rules, rule, &len);   /* the rule that said so */
          snprintf(by, sizeof by, " by rule %d (%.*s%s)", rule + 1, len > 100 ? 100 : len, text, len > 100 ? "..." : "");
        }
        if (sr < 0) cc_free(ev.terms);
        lua_pushfstring(L, "%s fails: rank %d output[%d] holds %s; expected %s%s%s", what, r, c, got, want, by, where);
        return lua_error(L);
      }
      if (sr < 0) cc_free(ev.terms);
    }
  return 0;
}

int cc_expected(const cc_trace *t, int r, int c, int *rank, int *idx, int *rule) {
  int k = t->k;
  *rule = -1;
  if (t->coll != IR_COLL_CUSTOM) return ir_coll_source(t->coll, 0, t->nranks, k, r, c, rank, idx);
  int has = ir_expect_eval_rule(t->rules, r, c, t->nranks, k, rank, idx, rule, NULL);
  if (has == 0 && t->inplace) { *rank = r; *idx = c; return 1; }   /* must keep its value */
  return has;
}

void cc_trace_free(cc_trace *t) {
  if (!t) return;
  cc_budget *prev = cc_mem_enter(t->mem);
  for (int s = 0; s < CC_MAX_SPACES; s++) {
    if (t->loc[s])
      for (int r = 0; r < t->nranks; r++) {
        for (int i = 0; t->loc[s][r] && i < t->cap[s][r]; i++) cc_free(t->loc[s][r][i].val.terms);
        cc_free(t->loc[s][r]);
      }
    cc_free(t->loc[s]);
    cc_free(t->size[s]);
    cc_free(t->cap[s]);
  }
  cc_free(t->scratch_rank);
  cc_topo_free(&t->topo);
  cc_free(t->ops);
  for (int i = 0; i < t->nfroms; i++) cc_free(t->froms[i]);
  cc_free(t->froms);
  cc_frag_free(t);
  cc_free(t->frags);
  free(t->expect);
  ir_expect_free(t->rules);
  free((char *)t->script);
  cc_mem_leave(prev);
  cc_budget_free(t->mem);
  free(t);
}
