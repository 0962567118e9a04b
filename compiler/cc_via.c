/* cc_via.c -- the via field and option: reading it, FIFO or direct per
 * program, and what direct programs do not support yet, each refused at
 * the script line (docs/DSL.md, "Direct lowering"). */
#include "cc_via.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

const char *const cc_via_name[CC_VIA_COUNT] = {"fifo", "direct", "put", "get"};

#define VIA_VALUES "\"fifo\" (FIFO messages, the default), \"direct\" (puts or gets, the compiler's choice), \"put\" or \"get\""

/* What direct programs lack for now, said at the end of most refusals. */
#define ONE_TB "a direct program uses one channel and one thread block per rank for now"

int cc_via_parse(lua_State *L, int at) {
  if (lua_isnil(L, at)) return -1;
  if (lua_type(L, at) != LUA_TSTRING) luaL_error(L, "via: expected " VIA_VALUES ", not a %s", luaL_typename(L, at));
  const char *v = lua_tostring(L, at);
  for (int i = 0; i < CC_VIA_COUNT; i++)
    if (!strcmp(v, cc_via_name[i])) return i;
  return luaL_error(L, "via='%s': expected " VIA_VALUES, v);
}

/* Whether the program is direct or will be unless an operation between
 * ranks says otherwise: what is refused in direct programs is refused then. */
static int leaning(const cc_trace *t) { return t->direct || (t->via != CC_VIA_FIFO && !t->fifo_line); }

/* The name of operation o for messages. */
static const char *op_name(const cc_op *o) {
  if (o->kind == CC_COPY) return "copy";
  if (o->kind == CC_REDUCE) return "reduce";
  if (o->kind == CC_SWAP) return "swap";
  if (o->cop == IR_OP_GEMV) return "gemv";
  if (o->cop == IR_OP_GEMM) return "gemm";
  return "embedding_bag";
}

/* Refuses what the whole program has and a direct one does not support
 * yet; `what` says where via made it direct ("via='put'"). */
static void check_program(lua_State *L, const cc_trace *t, int via, const char *what) {
  if (via == CC_VIA_GET && ir_proto_landed(t->proto))
    luaL_error(L, "%s: a direct %s program has no gets (its puts land in the peer's scratch with their flags); use "
               "\"put\" or \"direct\", or protocol Simple", what, ir_proto_name[t->proto]);
  if (t->instances > 1)
    luaL_error(L, "%s with instances = %d (at %s:%d): " ONE_TB "; instances are not supported yet", what,
               t->instances, t->script, t->decl_line);
  if (t->placement == CC_PLACE_PAIRED)
    luaL_error(L, "%s with placement = \"paired\" (at %s:%d): " ONE_TB "; placement is not supported yet", what,
               t->script, t->decl_line);
}

/* Refuses operation o in a direct program where it asks for what one
 * does not support yet; `where` says what made the program direct. */
static void check_op(lua_State *L, const cc_trace *t, const cc_op *o, const char *where) {
  if (o->kind == CC_COMPUTE)
    luaL_error(L, "%s in a direct program (%s): compute steps are not supported yet in direct programs", op_name(o),
               where);
  if (o->ch > 0) luaL_error(L, "%s with ch=%d in a direct program (%s): " ONE_TB, op_name(o), o->ch, where);
  if (o->sendtb >= 0 || o->recvtb >= 0)
    luaL_error(L, "%s with %s=%d in a direct program (%s): " ONE_TB "; sendtb and recvtb are not supported yet",
               op_name(o), o->sendtb >= 0 ? "sendtb" : "recvtb", o->sendtb >= 0 ? o->sendtb : o->recvtb, where);
  if (o->frag)
    luaL_error(L, "%s inside parallelize (at %s:%d) in a direct program (%s): " ONE_TB
               "; parallelize is not supported yet", op_name(o), t->script, t->frags[o->frag - 1].line, where);
}

void cc_via_collective(lua_State *L, cc_trace *t) {
  lua_getfield(L, 1, "via");
  int v = cc_via_parse(L, -1);
  lua_pop(L, 1);
  t->via = v < 0 ? CC_VIA_FIFO : v;
  if (t->via == CC_VIA_FIFO) return;
  char what[32];
  snprintf(what, sizeof what, "via='%s'", cc_via_name[t->via]);
  check_program(L, t, t->via, what);
  t->via_line = t->decl_line;
}

void cc_via_op(lua_State *L, cc_trace *t, cc_op *o) {
  if (o->kind == CC_COMPUTE) o->via = CC_VIA_FIFO;
  else if (o->via < 0) o->via = t->via;
  char where[96];
  int remote = o->kind != CC_COMPUTE && o->src_rank != o->dst_rank;
  if (remote) {
    char what[96];
    snprintf(what, sizeof what, "%s from rank %d %s rank %d", op_name(o), o->src_rank,
             o->kind == CC_COPY ? "to" : o->kind == CC_SWAP ? "with" : "into", o->dst_rank);
    if (o->via == CC_VIA_FIFO) {
      if (t->direct)
        luaL_error(L, "%s goes through FIFOs (via='fifo'), but the program is direct (via at %s:%d): a program is "
                   "either FIFO or direct", what, t->script, t->via_line);
      if (!t->fifo_line) t->fifo_line = o->line;
      return;
    }
    if (t->fifo_line)
      luaL_error(L, "%s is direct (via='%s'), but the operation between ranks at %s:%d goes through FIFOs (via='fifo'): "
                 "a program is either FIFO or direct", what, cc_via_name[o->via], t->script, t->fifo_line);
    char how[128];
    snprintf(how, sizeof how, "%s, via='%s'", what, cc_via_name[o->via]);
    if (o->via == CC_VIA_GET) check_program(L, t, o->via, how);   /* get in an LL program */
    if (!t->direct && t->via == CC_VIA_FIFO) {   /* this operation makes the program direct */
      check_program(L, t, o->via, how);
      snprintf(where, sizeof where, "via='%s' at %s:%d", cc_via_name[o->via], t->script, o->line);
      for (int i = 0; i < t->nops; i++) {
        const cc_op *e = &t->ops[i];
        if (e->kind == CC_COMPUTE || e->ch > 0 || e->sendtb >= 0 || e->recvtb >= 0)
          luaL_error(L, "%s makes the program direct, but the %s at %s:%d has %s: " ONE_TB
                     "; compute steps, ch, sendtb and recvtb are not supported yet there", how, op_name(e), t->script,
                     e->line, e->kind == CC_COMPUTE ? "a compute step" : e->ch > 0 ? "ch > 0" : "sendtb or recvtb");
      }
      if (t->nfrags)
        luaL_error(L, "%s makes the program direct, but parallelize at %s:%d came before: " ONE_TB
                   "; parallelize is not supported yet", how, t->script, t->frags[0].line);
      t->via_line = o->line;
    }
    t->direct = 1;
  }
  if (!leaning(t)) return;
  snprintf(where, sizeof where, "via at %s:%d", t->script, t->via_line);
  check_op(L, t, o, where);
}

void cc_via_parallelize(lua_State *L, const cc_trace *t) {
  if (leaning(t))
    luaL_error(L, "parallelize in a direct program (via at %s:%d): " ONE_TB "; parallelize is not supported yet",
               t->script, t->via_line);
}
