/* cc_compute.c -- the DSL's compute calls: operands (matrix(), vector(),
 * index()) and the compute steps that fill a rank's chunks (gemv(),
 * gemm(), embedding_bag()), traced into the same operation list as the
 * copies and reductions (cc_trace.c). */
#include "cc_trace_int.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

/* A dimension of an operand: "input" or a name the call binds. */
static void check_dim(lua_State *L, const char *what, const char *v) {
  size_t n = strlen(v);
  int ok = n > 0 && n < IR_MAX_NAME && (isalpha((unsigned char)v[0]) || v[0] == '_');
  for (size_t i = 1; ok && i < n; i++) ok = isalnum((unsigned char)v[i]) || v[i] == '_';
  if (!ok)
    luaL_error(L, "%s '%s' is not a dimension: \"%s\" (one per element of the input) or a name the call binds, "
               "such as \"K\" (a letter, then letters, digits or _)", what, v, IR_DIM_INPUT);
}

/* Declares an operand: the program becomes fused (its input is computed).
 * Pushes the operand's handle. */
static int declare(lua_State *L, int kind, const char *name, const char *d0, const char *d1, const char *dtype) {
  cc_trace *t = cc_dsl_declared(L);
  if (t->nops)
    luaL_error(L, "%s(\"%s\") comes after chunk operations: declare the operands first (a fused program's input "
               "holds nothing until a compute step writes it)", ir_okind_name[kind], name);
  check_dim(L, "name", name);
  for (int k = 0; k < t->noperands; k++)
    if (!strcmp(t->opnd[k].name, name))
      luaL_error(L, "operand %s is declared twice (first at %s:%d)", name, t->script, t->opnd[k].line);
  if (t->noperands == IR_MAX_OPERANDS) luaL_error(L, "a program has at most %d operands", IR_MAX_OPERANDS);
  check_dim(L, kind == IR_OPND_MATRIX ? "rows" : "length", d0);
  if (d1) check_dim(L, "cols", d1);
  cc_opnd *o = &t->opnd[t->noperands];
  snprintf(o->name, sizeof o->name, "%s", name);
  snprintf(o->dim[0], sizeof o->dim[0], "%s", d0);
  snprintf(o->dim[1], sizeof o->dim[1], "%s", d1 ? d1 : "");
  o->kind = kind;
  snprintf(o->dtype, sizeof o->dtype, "%s", dtype);
  o->line = cc_dsl_script_line(L);
  if (!t->fused) {   /* the input is computed from now on */
    t->fused = 1;
    for (int r = 0; r < t->nranks; r++)
      for (int i = 0; i < t->fixed_size[CC_SPACE_INPUT]; i++) {
        cc_loc *l = cc_dsl_loc(L, t, r, CC_SPACE_INPUT, i);
        l->val.n = 0;
        l->version = cc_dsl_next_version(L, t);
      }
  }
  int *h = lua_newuserdatauv(L, sizeof(int), 0);
  *h = t->noperands++;
  luaL_setmetatable(L, OPND_MT);
  return 1;
}

/* matrix(name, rows, cols): an operand matrix, row-major. */
int cc_dsl_matrix(lua_State *L) {
  return declare(L, IR_OPND_MATRIX, luaL_checkstring(L, 1), luaL_checkstring(L, 2), luaL_checkstring(L, 3), "call");
}

/* vector(name, length) */
int cc_dsl_vector(lua_State *L) {
  return declare(L, IR_OPND_VECTOR, luaL_checkstring(L, 1), luaL_checkstring(L, 2), NULL, "call");
}

/* index(name, length [, dtype]): a vector of integers, "i64" (the
 * default) or "i32". */
int cc_dsl_index(lua_State *L) {
  const char *dt = luaL_optstring(L, 3, "i64");
  if (strcmp(dt, "i64") && strcmp(dt, "i32")) luaL_error(L, "index: dtype '%s' is not i64 or i32", dt);
  return declare(L, IR_OPND_INDEX, luaL_checkstring(L, 1), luaL_checkstring(L, 2), NULL, dt);
}

static int operand_of(lua_State *L, int at, int kind, const char *fn, const char *what) {
  cc_trace *t = cc_dsl_trace_of(L);
  int *h = luaL_testudata(L, at, OPND_MT);
  if (!h) luaL_error(L, "%s: %s must be a%s %s declared with %s()", fn, what, kind == IR_OPND_INDEX ? "n" : "",
                     ir_okind_name[kind], ir_okind_name[kind]);
  if (t->opnd[*h].kind != kind)
    luaL_error(L, "%s: %s, %s, is a%s %s; it must be a%s %s", fn, what, t->opnd[*h].name,
               t->opnd[*h].kind == IR_OPND_INDEX ? "n" : "", ir_okind_name[t->opnd[*h].kind],
               kind == IR_OPND_INDEX ? "n" : "", ir_okind_name[kind]);
  return *h;
}

static int operand_arg(lua_State *L, int at, int kind, const char *fn) {
  char what[24];
  snprintf(what, sizeof what, "argument %d", at);
  return operand_of(L, at, kind, fn, what);
}

/* The compute options: sync = "tile" | "group:G" | "stride:S", zerocopy,
 * into = "input" | "output" (where the computed chunks are stored);
 * with bag set (embedding_bag), mode = "sum" | "mean" and weights = a
 * vector, which set op->cop and op->args[3]. */
static void compute_opts(lua_State *L, int at, cc_op *op, int bag) {
  op->sync = IR_SYNC_TILE;
  if (lua_isnoneornil(L, at)) return;
  luaL_checktype(L, at, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, at)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    if (!strcmp(k, "sync")) {
      const char *v = luaL_checkstring(L, -1);
      int n = 0;
      long long par = 0;
      if (!strcmp(v, "tile")) op->sync = IR_SYNC_TILE;
      else if (sscanf(v, "group:%lld%n", &par, &n) == 1 && !v[n]) op->sync = IR_SYNC_GROUP;
      else if (sscanf(v, "stride:%lld%n", &par, &n) == 1 && !v[n]) op->sync = IR_SYNC_STRIDE;
      else luaL_error(L, "sync='%s': expected \"tile\", \"group:G\" or \"stride:S\"", v);
      if (op->sync != IR_SYNC_TILE && (par < 1 || par > IR_MAX_SYNC_PARAM))
        luaL_error(L, "sync='%s': the number is out of range [1, %d]", v, IR_MAX_SYNC_PARAM);
      op->sync_param = (int)par;
    } else if (!strcmp(k, "into")) {
      const char *v = luaL_checkstring(L, -1);
      if (strcmp(v, "output") && strcmp(v, "input"))
        luaL_error(L, "into='%s': expected \"input\" (the default) or \"output\" (the chunks of the same indices)", v);
      op->into_output = !strcmp(v, "output");
    } else if (!strcmp(k, "zerocopy")) {
      op->zerocopy = lua_toboolean(L, -1);
      if (op->zerocopy && bag) luaL_error(L, "zerocopy is for gemv; an embedding bag's chunks are stored, then sent");
    } else if (bag && !strcmp(k, "mode")) {
      const char *v = luaL_checkstring(L, -1);
      if (!strcmp(v, "sum")) op->cop = IR_OP_EBAG;
      else if (!strcmp(v, "mean")) op->cop = IR_OP_EBAGM;
      else luaL_error(L, "mode='%s': expected \"sum\" or \"mean\"", v);
    } else if (bag && !strcmp(k, "weights")) {
      lua_pushvalue(L, -1);
      op->args[3] = (int8_t)operand_of(L, lua_gettop(L), IR_OPND_VECTOR, "embedding_bag", "weights");
      lua_pop(L, 1);
    } else {
      luaL_error(L, "unknown compute option '%s' (%s)", k, bag ? "mode, weights, sync, into" : "sync, zerocopy, into");
    }
    lua_pop(L, 1);
  }
}

/* Rank `rank` computes its input chunks [idx, idx+count) with op (its cop
 * and args set): marks them computed, records the step and pushes a
 * reference to them. */
static int compute_into(lua_State *L, cc_trace *t, cc_op *op, lua_Integer rank64, lua_Integer idx64,
                        lua_Integer count64) {
  const int dst = op->into_output ? CC_SPACE_OUTPUT : CC_SPACE_INPUT;
  cc_dsl_check_range(L, t, rank64, CC_SPACE_INPUT, idx64, count64);
  cc_dsl_check_range(L, t, rank64, dst, idx64, count64);
  int rank = (int)rank64, idx = (int)idx64, count = (int)count64;
  if (op->into_output && op->zerocopy) luaL_error(L, "into='output' and zerocopy: a chunk goes one place");
  if (op->into_output && t->interleave[0] && t->nranks > 1)
    luaL_error(L, "into='output' with interleave='%s': the output's rows are apart; compute into the input and copy or "
               "send the chunks there", t->interleave);
  op->kind = CC_COMPUTE;
  op->src_rank = op->dst_rank = rank;
  op->src_space = CC_SPACE_INPUT;
  op->dst_space = dst;
  op->src_idx = op->dst_idx = idx;
  op->count = count;
  op->ch = op->sendtb = op->recvtb = -1;
  for (int i = 0; i < count; i++) {
    cc_loc *l = cc_dsl_loc(L, t, rank, dst, idx + i);
    if (l->val.n && !op->into_output)
      luaL_error(L, "rank %d input[%d] is computed twice (first at %s:%d); compute each input chunk once and copy it",
                 rank, idx + i, t->script, l->line);
    uint64_t term = (uint64_t)rank << 32 | (uint32_t)(idx + i);
    cc_val v = {1, 1, &term};
    if (!cc_dsl_val_set(&l->val, &v)) cc_lua_nomem(L);
    l->version = cc_dsl_next_version(L, t);
    l->mixed = 0;
    l->line = op->line;
  }
  cc_dsl_add_op(L, t, op);
  cc_dsl_push_ref(L, t, rank, dst, idx, count, (cc_pat){0, 0});
  return 1;
}

/* gemv(A, x, rank, index [, count [, opts]]): rank computes its input
 * chunks [index, index+count): element e is row e of A times x.  Returns
 * a reference to them. */
int cc_dsl_gemv(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  int a = operand_arg(L, 1, IR_OPND_MATRIX, "gemv"), x = operand_arg(L, 2, IR_OPND_VECTOR, "gemv");
  const cc_opnd *A = &t->opnd[a], *X = &t->opnd[x];
  if (strcmp(A->dim[0], IR_DIM_INPUT))
    luaL_error(L, "gemv: matrix %s has rows '%s'; it needs rows \"%s\" (a row per element it computes)", A->name,
               A->dim[0], IR_DIM_INPUT);
  if (strcmp(A->dim[1], X->dim[0]))
    luaL_error(L, "gemv: matrix %s has cols '%s' but vector %s has length '%s'", A->name, A->dim[1], X->name, X->dim[0]);
  cc_op op = {.line = cc_dsl_script_line(L), .cop = IR_OP_GEMV, .args = {(int8_t)a, (int8_t)x, -1, -1}};
  compute_opts(L, 6, &op, 0);
  return compute_into(L, t, &op, luaL_checkinteger(L, 3), luaL_checkinteger(L, 4), luaL_optinteger(L, 5, 1));
}

/* gemm(X, W, rank, index [, count [, opts]]): rank computes its input
 * chunks [index, index+count) of Y = X W (X [tokens, F], W [F, H]):
 * element e is row e div H of X times column e mod H of W.  opts: sync.
 * Returns a reference to the chunks. */
int cc_dsl_gemm(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  int x = operand_of(L, 1, IR_OPND_MATRIX, "gemm", "X (argument 1)");
  int w = operand_of(L, 2, IR_OPND_MATRIX, "gemm", "W (argument 2)");
  const cc_opnd *X = &t->opnd[x], *W = &t->opnd[w];
  if (strcmp(X->dim[1], W->dim[0]))
    luaL_error(L, "gemm: X %s has cols '%s' but W %s has rows '%s' (X [tokens, F] times W [F, H])", X->name, X->dim[1],
               W->name, W->dim[0]);
  if (!strcmp(X->dim[0], IR_DIM_INPUT) || !strcmp(X->dim[1], IR_DIM_INPUT) || !strcmp(W->dim[1], IR_DIM_INPUT))
    luaL_error(L, "gemm: X [%s x %s] and W [%s x %s] have dimensions of their own, not \"%s\" (the input is tokens x "
               "H)", X->dim[0], X->dim[1], W->dim[0], W->dim[1], IR_DIM_INPUT);
  cc_op op = {.line = cc_dsl_script_line(L), .cop = IR_OP_GEMM, .args = {(int8_t)x, (int8_t)w, -1, -1}};
  compute_opts(L, 6, &op, 0);
  if (op.zerocopy) luaL_error(L, "zerocopy is for gemv; a gemm's tiles are stored, then sent");
  return compute_into(L, t, &op, luaL_checkinteger(L, 3), luaL_checkinteger(L, 4), luaL_optinteger(L, 5, 1));
}

/* embedding_bag(E, indices, offsets, rank, index [, count [, opts]]):
 * rank computes its input chunks [index, index+count) by pooling rows of
 * table E: element e is column e mod D of bag e div D (D: E's columns),
 * bag b the rows indices[offsets[b] .. offsets[b+1]-1].  opts: mode
 * ("sum", the default, or "mean"), weights (a vector, one per index; sum
 * only), sync.  Returns a reference to the chunks. */
int cc_dsl_embedding_bag(lua_State *L) {
  cc_trace *t = cc_dsl_declared(L);
  int e = operand_of(L, 1, IR_OPND_MATRIX, "embedding_bag", "the table (argument 1)");
  int ix = operand_of(L, 2, IR_OPND_INDEX, "embedding_bag", "the indices (argument 2)");
  int of = operand_of(L, 3, IR_OPND_INDEX, "embedding_bag", "the offsets (argument 3)");
  const cc_opnd *E = &t->opnd[e], *IX = &t->opnd[ix], *OF = &t->opnd[of];
  if (!strcmp(E->dim[0], IR_DIM_INPUT) || !strcmp(E->dim[1], IR_DIM_INPUT))
    luaL_error(L, "embedding_bag: table %s is [%s x %s]; a table's rows and columns are dimensions of its own, not "
               "\"%s\"", E->name, E->dim[0], E->dim[1], IR_DIM_INPUT);
  if (!strcmp(IX->dim[0], OF->dim[0]))
    luaL_error(L, "embedding_bag: indices %s and offsets %s have the same length '%s'; offsets has one per bag, plus "
               "one", IX->name, OF->name, IX->dim[0]);
  cc_op op = {.line = cc_dsl_script_line(L), .cop = IR_OP_EBAG, .args = {(int8_t)e, (int8_t)ix, (int8_t)of, -1}};
  compute_opts(L, 7, &op, 1);
  if (op.args[3] >= 0) {
    const cc_opnd *W = &t->opnd[op.args[3]];
    if (op.cop == IR_OP_EBAGM) luaL_error(L, "embedding_bag: weights are for mode \"sum\" (as in PyTorch)");
    if (strcmp(W->dim[0], IX->dim[0]))
      luaL_error(L, "embedding_bag: weights %s have length '%s' but indices %s have '%s' (a weight per index)",
                 W->name, W->dim[0], IX->name, IX->dim[0]);
  }
  return compute_into(L, t, &op, luaL_checkinteger(L, 4), luaL_checkinteger(L, 5), luaL_optinteger(L, 6, 1));
}

int cc_dsl_opnd_tostring(lua_State *L) {
  cc_trace *t = cc_dsl_trace_of(L);
  const cc_opnd *o = &t->opnd[*(int *)luaL_checkudata(L, 1, OPND_MT)];
  if (o->kind == IR_OPND_MATRIX) lua_pushfstring(L, "matrix %s [%s x %s]", o->name, o->dim[0], o->dim[1]);
  else lua_pushfstring(L, "%s %s [%s]", ir_okind_name[o->kind], o->name, o->dim[0]);
  return 1;
}

