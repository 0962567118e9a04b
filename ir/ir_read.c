/* ir_read.c -- reads the MSCCL XML schema (plus baton's extensions) with libxml2. */
#include "ir_read.h"
#include "ir_expect.h"
#include "ir_geom.h"
#include "rt_param.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

typedef struct reader {
  const char *name;
  rt_diag *diag;
  int errors;
  ir_prog *prog;
  int64_t max_tbs, max_steps;   /* BATON_IR_MAX_TBS, BATON_IR_MAX_STEPS */
} reader;

#define ERR(rd, node, ...) do {                                             \
    char m_[512];                                                           \
    snprintf(m_, sizeof m_, __VA_ARGS__);                                   \
    rt_diag_add((rd)->diag, "%s:%ld: %s", (rd)->name,                       \
                (node) ? xmlGetLineNo(node) : 0L, m_);                      \
    (rd)->errors++;                                                         \
  } while (0)

static void on_xml_error(void *ctx, xmlErrorPtr e) {
  reader *rd = ctx;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", e->message ? e->message : "XML error");
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = 0;
  rt_diag_add(rd->diag, "%s:%d: %s", rd->name, e->line, msg);
  rd->errors++;
}

static char *attr(xmlNode *n, const char *name) {
  return (char *)xmlGetProp(n, (const xmlChar *)name);
}

/* Reads integer attribute `name`; absent gives `def` (or an error when
 * `required`).  Returns 0 on error. */
static int int_attr(reader *rd, xmlNode *n, const char *name, int required,
                    long long def, long long lo, long long hi, long long *out) {
  char *v = attr(n, name);
  if (!v) {
    if (required) { ERR(rd, n, "<%s> lacks attribute %s", (const char *)n->name, name); return 0; }
    *out = def;
    return 1;
  }
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  int ok = !errno && end != v && *end == 0;
  if (!ok) ERR(rd, n, "%s=\"%s\" is not an integer", name, v);
  else if (x < lo || x > hi) { ERR(rd, n, "%s=%lld is out of range [%lld, %lld]", name, x, lo, hi); ok = 0; }
  else *out = x;
  xmlFree(v);
  return ok;
}

static int32_t i32(reader *rd, xmlNode *n, const char *name, int required, int def, int lo, int hi) {
  long long v = def;
  int_attr(rd, n, name, required, def, lo, hi, &v);
  return (int32_t)v;
}

/* A buffer attribute ("i", "o", "s"); returns -1 when absent. */
static int buf_attr(reader *rd, xmlNode *n, const char *name) {
  char *v = attr(n, name);
  if (!v) return -1;
  int b = ir_buf_from_xml(v);
  if (b < 0) ERR(rd, n, "unknown buffer %s=\"%s\" (expected i, o or s)", name, v);
  xmlFree(v);
  return b < 0 ? -2 : b;
}

static int is_elem(xmlNode *n) { return n->type == XML_ELEMENT_NODE; }
static int named(xmlNode *n, const char *s) { return !strcmp((const char *)n->name, s); }

/* A name of an operand or a dimension: a letter or '_', then letters,
 * digits and '_', shorter than IR_MAX_NAME. */
static int name_ok(const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n >= IR_MAX_NAME || !(isalpha((unsigned char)v[0]) || v[0] == '_')) return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)v[i]) || v[i] == '_')) return 0;
  return 1;
}

/* A dimension attribute of an operand: required, a name. */
static const char *dim_attr(reader *rd, xmlNode *n, const char *opnd, const char *name) {
  char *v = attr(n, name);
  const char *r = NULL;
  if (!v) ERR(rd, n, "operand %s lacks attribute %s", opnd, name);
  else if (!name_ok(v))
    ERR(rd, n, "operand %s: %s=\"%s\" is not a dimension name (\"%s\", or a name the call binds such as K)", opnd,
        name, v, IR_DIM_INPUT);
  else if (!(r = ir_intern(rd->prog, v))) ERR(rd, n, "out of memory");
  xmlFree(v);
  return r;
}

/* <operand name="W" kind="matrix" dtype="call" rows="input" cols="K"/>,
 * <operand name="x" kind="vector" dtype="call" len="K"/> or
 * <operand name="I" kind="index" dtype="i64" len="L"/> (baton). */
static void read_operand(reader *rd, xmlNode *n) {
  ir_prog *p = rd->prog;
  char *name = attr(n, "name"), *kind = attr(n, "kind"), *dtype = attr(n, "dtype");
  int k = -1;
  for (int i = 0; kind && i < IR_OKIND_COUNT; i++)
    if (!strcmp(kind, ir_okind_name[i])) k = i;
  if (!name || !name_ok(name)) ERR(rd, n, "<operand> needs a name=\"...\" (a letter, then letters, digits or _; at most %d)", IR_MAX_NAME - 1);
  else if (ir_operand_find(p, name) >= 0) ERR(rd, n, "operand %s is declared twice", name);
  else if (k < 0) ERR(rd, n, "operand %s: kind=\"%s\" is not matrix, vector or index", name, kind ? kind : "");
  else if (p->noperands >= IR_MAX_OPERANDS) ERR(rd, n, "operand %s: a program has at most %d operands", name, IR_MAX_OPERANDS);
  else {
    ir_operand *o = ir_operand_add(p, name, (ir_okind)k);
    if (!o) ERR(rd, n, "out of memory");
    else {
      o->line = (int32_t)xmlGetLineNo(n);
      if (dtype && !name_ok(dtype)) ERR(rd, n, "operand %s: dtype=\"%s\" is not \"call\" or a type name", name, dtype);
      else if (dtype && !(o->dtype = ir_intern(p, dtype))) ERR(rd, n, "out of memory");
      if (k == IR_OPND_MATRIX) {
        o->dim[0] = dim_attr(rd, n, name, "rows");
        o->dim[1] = dim_attr(rd, n, name, "cols");
      } else {
        o->dim[0] = dim_attr(rd, n, name, "len");
      }
    }
  }
  xmlFree(name);
  xmlFree(kind);
  xmlFree(dtype);
}

/* args="W x": the operands of a compute step, by name. */
static void read_args(reader *rd, xmlNode *n, ir_step *s, int rank, int tb, int idx) {
  char *v = attr(n, "args");
  const char *want = ir_op_args[s->op];
  int least, need = ir_op_nargs(s->op, &least), got = 0;
  if (!v) {
    if (least) ERR(rd, n, "rank %d tb %d step %d: %s needs args=\"...\" (%d operands)", rank, tb, idx, ir_op_xml[s->op], least);
    return;
  }
  if (!need) {
    ERR(rd, n, "rank %d tb %d step %d: %s takes no operands (args=\"%s\")", rank, tb, idx, ir_op_xml[s->op], v);
    xmlFree(v);
    return;
  }
  for (char *save = NULL, *w = strtok_r(v, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    int o = ir_operand_find(rd->prog, w);
    if (got >= need) { got++; continue; }
    if (o < 0) ERR(rd, n, "rank %d tb %d step %d: args names operand %s, which is not declared", rank, tb, idx, w);
    s->args[got++] = (int8_t)o;
  }
  if (got < least || got > need) {
    if (least == need)
      ERR(rd, n, "rank %d tb %d step %d: %s takes %d operands (%s), args names %d", rank, tb, idx, ir_op_xml[s->op],
          need, want, got);
    else
      ERR(rd, n, "rank %d tb %d step %d: %s takes %d to %d operands (%s; lowercase: optional), args names %d", rank, tb,
          idx, ir_op_xml[s->op], least, need, want, got);
  }
  xmlFree(v);
}

/* sync="tile", "group:G" or "stride:S". */
static void read_sync(reader *rd, xmlNode *n, ir_step *s, int rank, int tb, int idx) {
  char *v = attr(n, "sync");
  if (!v) return;
  int k = -1;
  long long par = 0;
  const char *colon = strchr(v, ':');
  size_t len = colon ? (size_t)(colon - v) : strlen(v);
  for (int i = 0; i < IR_SYNC_COUNT; i++)
    if (strlen(ir_sync_name[i]) == len && !strncmp(v, ir_sync_name[i], len)) k = i;
  if (colon) {
    char *end;
    errno = 0;
    par = strtoll(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end) k = -1;
  }
  if (k < 0 || (k == IR_SYNC_TILE) != !colon)
    ERR(rd, n, "rank %d tb %d step %d: sync=\"%s\" is not tile, group:G or stride:S", rank, tb, idx, v);
  else if (k != IR_SYNC_TILE && (par < 1 || par > IR_MAX_SYNC_PARAM))
    ERR(rd, n, "rank %d tb %d step %d: sync=\"%s\": %lld is out of range [1, %d]", rank, tb, idx, v, par,
        IR_MAX_SYNC_PARAM);
  else if (!(ir_op_flags[s->op] & IR_F_COMP))
    ERR(rd, n, "rank %d tb %d step %d: sync= is for compute steps, not %s", rank, tb, idx, ir_op_xml[s->op]);
  else {
    s->sync = (uint8_t)k;
    s->sync_param = (int32_t)par;
  }
  xmlFree(v);
}

/* xdeps="tb:step tb:step ..." (baton): the step's dependencies after
 * depid/deps, at most IR_MAX_DEPS - 1. */
static void read_xdeps(reader *rd, xmlNode *n, ir_step *s, int rank, int tb, int idx) {
  char *v = attr(n, "xdeps");
  if (!v) return;
  const char *c = v;
  while (*c) {
    while (*c == ' ') c++;
    if (!*c) break;
    char *end;
    errno = 0;
    long a = strtol(c, &end, 10), b = -1;
    int ok = !errno && end != c && *end == ':' && a >= 0 && a <= INT_MAX;
    if (ok) {
      c = end + 1;
      b = strtol(c, &end, 10);
      ok = !errno && end != c && (*end == ' ' || !*end) && b >= 0 && b <= INT_MAX;
    }
    if (!ok) {
      ERR(rd, n, "rank %d tb %d step %d: xdeps=\"%s\" is not a list of tb:step pairs (non-negative integers)", rank,
          tb, idx, v);
      break;
    }
    if (s->nxdeps == IR_MAX_DEPS - 1) {
      ERR(rd, n, "rank %d tb %d step %d: xdeps names more than %d dependencies (a step has at most %d; a nop step "
          "before it can wait for more)", rank, tb, idx, IR_MAX_DEPS - 1, IR_MAX_DEPS);
      break;
    }
    s->xdep[s->nxdeps++] = (ir_dep){(int32_t)a, (int32_t)b};
    c = end;
  }
  if (s->nxdeps && s->depid < 0)
    ERR(rd, n, "rank %d tb %d step %d: xdeps without depid/deps (the first dependency goes there)", rank, tb, idx);
  xmlFree(v);
}

static void read_step(reader *rd, xmlNode *n, ir_tb *tb, int rank) {
  ir_step *s = ir_step_add(tb);
  if (!s) { ERR(rd, n, "out of memory"); return; }
  int idx = tb->nsteps - 1;
  s->line = (int32_t)xmlGetLineNo(n);
  int sn = i32(rd, n, "s", 1, 0, 0, INT_MAX);
  if (sn != idx)
    ERR(rd, n, "rank %d tb %d: step numbered s=%d where s=%d was expected (a step is missing, repeated or out of order)",
        rank, tb->id, sn, idx);
  char *type = attr(n, "type");
  ir_op op = IR_OP_COUNT;
  if (!type) ERR(rd, n, "rank %d tb %d step %d: <step> lacks attribute type", rank, tb->id, idx);
  else {
    op = ir_op_from_xml(type);
    if (op == IR_OP_COUNT)
      ERR(rd, n, "rank %d tb %d step %d: unknown opcode type=\"%s\"", rank, tb->id, idx, type);
    xmlFree(type);
  }
  s->op = op == IR_OP_COUNT ? IR_OP_NOP : op;
  unsigned fl = op == IR_OP_COUNT ? 0 : ir_op_flags[op];
  int sb = buf_attr(rd, n, "srcbuf"), db = buf_attr(rd, n, "dstbuf");
  unsigned needs_src = IR_F_SRC | IR_F_COMP | IR_F_GET, needs_dst = IR_F_DST | IR_F_PUT;
  if (sb == -1 && (fl & needs_src))
    ERR(rd, n, "rank %d tb %d step %d: %s needs srcbuf", rank, tb->id, idx, ir_op_xml[op]);
  if (db == -1 && (fl & needs_dst))
    ERR(rd, n, "rank %d tb %d step %d: %s needs dstbuf", rank, tb->id, idx, ir_op_xml[op]);
  s->srcbuf = sb >= 0 ? sb : IR_BUF_INPUT;
  s->dstbuf = db >= 0 ? db : IR_BUF_OUTPUT;
  s->srcoff = i32(rd, n, "srcoff", (fl & needs_src) != 0, -1, -1, INT_MAX);
  s->dstoff = i32(rd, n, "dstoff", (fl & needs_dst) != 0, -1, -1, INT_MAX);
  /* Direct steps name their peer; no other step has one. */
  s->peer = i32(rd, n, "peer", (fl & IR_F_DIRECT) != 0, -1, -1, INT_MAX);
  if (s->peer >= 0 && op != IR_OP_COUNT && !(fl & IR_F_DIRECT))   /* an unknown opcode has its error */
    ERR(rd, n, "rank %d tb %d step %d: peer= is for direct steps (put, get, getr, xchg, sig, wait), not %s", rank, tb->id,
        idx, ir_op_xml[op]);
  s->cnt = i32(rd, n, "cnt", op != IR_OP_NOP && op != IR_OP_COUNT, 0, 0, INT_MAX);
  s->srcrun = i32(rd, n, "srcrun", 0, 0, 0, INT_MAX);
  s->srcstride = i32(rd, n, "srcstride", 0, 0, INT_MIN + 1, INT_MAX);
  s->dstrun = i32(rd, n, "dstrun", 0, 0, 0, INT_MAX);
  s->dststride = i32(rd, n, "dststride", 0, 0, INT_MIN + 1, INT_MAX);
  if ((s->srcstride && !s->srcrun) || (s->dststride && !s->dstrun))   /* it would be ignored */
    ERR(rd, n, "rank %d tb %d step %d: %s without %s (a stride spaces runs of chunks)", rank, tb->id, idx,
        s->srcstride && !s->srcrun ? "srcstride" : "dststride", s->srcstride && !s->srcrun ? "srcrun" : "dstrun");
  s->depid = i32(rd, n, "depid", 0, -1, -1, INT_MAX);
  s->deps = i32(rd, n, "deps", 0, -1, -1, INT_MAX);
  s->hasdep = (uint8_t)i32(rd, n, "hasdep", 0, 0, 0, 1);
  read_xdeps(rd, n, s, rank, tb->id, idx);
  if (op != IR_OP_COUNT) {
    read_args(rd, n, s, rank, tb->id, idx);
    read_sync(rd, n, s, rank, tb->id, idx);
  }
  char *prov = attr(n, "prov");
  if (prov) { s->prov = ir_intern(rd->prog, prov); xmlFree(prov); }
}

static void read_tb(reader *rd, xmlNode *n, ir_gpu *g) {
  ir_tb *tb = ir_tb_add(g, -1, -1, 0);
  if (!tb) { ERR(rd, n, "out of memory"); return; }
  int idx = tb->id;
  tb->line = (int32_t)xmlGetLineNo(n);
  int id = i32(rd, n, "id", 1, 0, 0, INT_MAX);
  if (id != idx)
    ERR(rd, n, "rank %d: thread block numbered id=%d where id=%d was expected (thread blocks must be numbered 0, 1, ... in order)",
        g->id, id, idx);
  tb->send = i32(rd, n, "send", 0, -1, -1, INT_MAX);
  tb->recv = i32(rd, n, "recv", 0, -1, -1, INT_MAX);
  tb->chan = i32(rd, n, "chan", 0, 0, 0, INT_MAX);
  for (xmlNode *c = n->children; c; c = c->next) {
    if (!is_elem(c)) continue;
    if (named(c, "step") && tb->nsteps >= rd->max_steps) {
      ERR(rd, c, "rank %d tb %d: more than %lld steps, the most a thread block may have (%s raises it)", g->id, idx,
          (long long)rd->max_steps, rt_param_name(RT_PARAM_IR_MAX_STEPS));
      break;
    }
    if (named(c, "step")) read_step(rd, c, tb, g->id);
    else ERR(rd, c, "rank %d tb %d: unexpected element <%s> (expected <step>)", g->id, idx, (const char *)c->name);
  }
}

static void read_gpu(reader *rd, xmlNode *n, char *seen) {
  ir_prog *p = rd->prog;
  long long id;
  if (!int_attr(rd, n, "id", 1, 0, 0, INT_MAX, &id)) return;
  if (id >= p->ngpus) { ERR(rd, n, "gpu id=%lld but the algo has ngpus=%d", id, p->ngpus); return; }
  if (seen[id]) { ERR(rd, n, "gpu id=%lld appears twice", id); return; }
  seen[id] = 1;
  ir_gpu *g = &p->gpus[id];
  g->line = (int32_t)xmlGetLineNo(n);
  g->i_chunks = i32(rd, n, "i_chunks", 0, 0, 0, INT_MAX);
  g->o_chunks = i32(rd, n, "o_chunks", 0, 0, 0, INT_MAX);
  g->s_chunks = i32(rd, n, "s_chunks", 0, 0, 0, INT_MAX);
  for (xmlNode *c = n->children; c; c = c->next) {
    if (!is_elem(c)) continue;
    if (named(c, "tb") && g->ntbs >= rd->max_tbs) {
      ERR(rd, c, "rank %d: more than %lld thread blocks, the most a rank may have (%s raises it)", (int)id,
          (long long)rd->max_tbs, rt_param_name(RT_PARAM_IR_MAX_TBS));
      break;
    }
    if (named(c, "tb")) read_tb(rd, c, g);
    else ERR(rd, c, "rank %d: unexpected element <%s> (expected <tb>)", (int)id, (const char *)c->name);
  }
}

/* The expect attribute (baton): a custom collective's postcondition; it
 * must parse, and only custom collectives have one. */
static void read_expect(reader *rd, xmlNode *n, ir_prog *p) {
  char *spec = attr(n, "expect");
  if (!spec) return;
  if (p->coll != IR_COLL_CUSTOM) {
    ERR(rd, n, "expect=\"%s\" is only for coll=\"custom\" (the %s postcondition is built in)", spec,
        ir_coll_name[p->coll]);
  } else {
    rt_diag *d = rt_diag_new(1);
    ir_expect *e = NULL;
    if (!d) ERR(rd, n, "out of memory");
    else if (ir_expect_parse(spec, "expect", &e, d)) {
      const char *m = rt_diag_text(d);
      int len = (int)strlen(m);
      while (len && m[len - 1] == '\n') len--;
      ERR(rd, n, "bad expect attribute: %.*s", len, m);
    }
    else if (!(p->expect = ir_intern(p, spec))) ERR(rd, n, "out of memory");
    ir_expect_free(e);
    rt_diag_free(d);
  }
  xmlFree(spec);
}

/* The interleave attribute (baton): the output's interleaved layout, a
 * product of dimension names ("T*D"). */
static void read_interleave(reader *rd, xmlNode *n, ir_prog *p) {
  char *v = attr(n, "interleave");
  if (!v) return;
  if (!ir_dim_expr_ok(v))
    ERR(rd, n, "interleave=\"%s\" is not a product of dimension names, such as \"T*D\"", v);
  else if (!(p->interleave = ir_intern(p, v))) ERR(rd, n, "out of memory");
  xmlFree(v);
}

static void read_algo(reader *rd, xmlNode *n) {
  long long ngpus = 0;
  if (!int_attr(rd, n, "ngpus", 1, 0, 1, INT_MAX, &ngpus)) return;
  long long max_ranks = rt_param_int(RT_PARAM_MAX_RANKS);
  if (ngpus > max_ranks) {
    ERR(rd, n, "ngpus=%lld is over the limit of %lld ranks (%s raises it)", ngpus, max_ranks,
        rt_param_name(RT_PARAM_MAX_RANKS));
    return;
  }
  char *coll = attr(n, "coll"), *name = attr(n, "name"), *proto = attr(n, "proto");
  int c = coll ? ir_coll_from_name(coll) : -1;
  if (!coll) ERR(rd, n, "<algo> lacks attribute coll");
  else if (c < 0) ERR(rd, n, "unknown collective coll=\"%s\" (expected allreduce, allgather, reducescatter, alltoall, broadcast, reduce, gather, scatter or custom)", coll);
  ir_prog *p = ir_prog_new(name ? name : "", c < 0 ? IR_COLL_CUSTOM : (ir_coll)c, (int)ngpus);
  if (!p) { ERR(rd, n, "out of memory"); goto out; }
  rd->prog = p;
  p->line = (int32_t)xmlGetLineNo(n);
  /* "baton-Simple": a program only baton runs as written (ir_prog_needs_baton). */
  const char *pname = proto && !strncmp(proto, IR_PROTO_BATON_PREFIX, strlen(IR_PROTO_BATON_PREFIX))
                      ? proto + strlen(IR_PROTO_BATON_PREFIX) : proto;
  int pr = pname ? ir_proto_from_name(pname) : IR_PROTO_SIMPLE;
  if (pr < 0)
    ERR(rd, n, "unknown protocol proto=\"%s\" (expected Simple, LL or LL128, or baton-Simple, baton-LL or baton-LL128)",
        proto);
  p->proto = pr < 0 ? IR_PROTO_SIMPLE : (ir_proto)pr;
  p->nchannels = i32(rd, n, "nchannels", 0, 1, 1, 1 << 16);
  p->nchunksperloop = i32(rd, n, "nchunksperloop", 1, 1, 1, INT_MAX);
  p->inplace = i32(rd, n, "inplace", 0, 0, 0, 1);
  p->outofplace = i32(rd, n, "outofplace", 0, -1, 0, 1);
  p->nthreads = i32(rd, n, "nthreads", 0, 0, 0, 1 << 16);
  p->slots = i32(rd, n, "slots", 0, 0, 1, 1024);
  p->version = i32(rd, n, "baton", 0, 0, 0, IR_SCHEMA_VERSION);
  long long v;
  if (int_attr(rd, n, "minBytes", 0, 0, 0, LLONG_MAX, &v)) p->minbytes = (uint64_t)v;
  if (int_attr(rd, n, "maxBytes", 0, 0, 0, LLONG_MAX, &v)) p->maxbytes = (uint64_t)v;
  read_expect(rd, n, p);
  read_interleave(rd, n, p);
  char *seen = calloc(ngpus, 1);
  if (!seen) { ERR(rd, n, "out of memory"); goto out; }
  /* Operands first, wherever they are: steps name them. */
  for (xmlNode *ch = n->children; ch; ch = ch->next)
    if (is_elem(ch) && named(ch, "operand")) read_operand(rd, ch);
  for (xmlNode *ch = n->children; ch; ch = ch->next) {
    if (!is_elem(ch) || named(ch, "operand")) continue;
    if (named(ch, "gpu")) read_gpu(rd, ch, seen);
    else ERR(rd, ch, "unexpected element <%s> (expected <gpu> or <operand>)", (const char *)ch->name);
  }
  for (int r = 0; r < ngpus; r++)
    if (!seen[r]) ERR(rd, n, "no <gpu id=\"%d\"> although ngpus=%lld", r, ngpus);
  free(seen);
  int64_t chunks = ir_geom_total_chunks(p), max_chunks = rt_param_int(RT_PARAM_MAX_CHUNKS);
  if (chunks > max_chunks)
    ERR(rd, n, "the buffers of the %lld ranks have %lld chunks together (i, o and s), over the limit of %lld (%s "
        "raises it)", ngpus, (long long)chunks, (long long)max_chunks, rt_param_name(RT_PARAM_MAX_CHUNKS));
out:
  xmlFree(coll);
  xmlFree(name);
  xmlFree(proto);
}

/* The common tail of both entry points: walks the parsed document. */
static bt_result finish(reader *rd, xmlDoc *doc, ir_prog **out) {
  if (doc && rd->errors) {
    xmlFreeDoc(doc);   /* the parser was stopped (a DOCTYPE) or warned: what it built is not read */
  } else if (doc) {
    xmlNode *root = xmlDocGetRootElement(doc);
    if (doc->intSubset || doc->extSubset)
      ERR(rd, (xmlNode *)(doc->intSubset ? doc->intSubset : doc->extSubset),
          "DOCTYPE declarations are not allowed in IR files");
    else if (!root) ERR(rd, (xmlNode *)NULL, "empty document");
    else if (!named(root, "algo"))
      ERR(rd, root, "root element is <%s>, expected <algo>", (const char *)root->name);
    else read_algo(rd, root);
    xmlFreeDoc(doc);
  } else if (!rd->errors) {
    rt_diag_add(rd->diag, "%s:0: cannot parse", rd->name);
    rd->errors++;
  }
  if (rd->errors) {
    ir_prog_free(rd->prog);
    *out = NULL;
    return BT_ERR_INVALID;
  }
  rd->prog->file = strdup(rd->name);
  *out = rd->prog;
  return BT_OK;
}

/* libxml2's options: no network access (NONET), no entity substitution and
 * no DTD loading (their options are left off: entity references stay
 * references, and a DOCTYPE stops the parse, see on_doctype), libxml2's
 * own bounds on names, text nodes and nesting depth kept (no HUGE), line
 * numbers past 65535, blanks dropped and small text nodes compacted. */
static const int xml_opts = XML_PARSE_NONET | XML_PARSE_BIG_LINES | XML_PARSE_NOBLANKS | XML_PARSE_COMPACT;

/* A DOCTYPE (where entities, external ones included, are declared) ends
 * the parse at once: IR files have none. */
static void on_doctype(void *ctx, const xmlChar *name, const xmlChar *ext, const xmlChar *sys) {
  xmlParserCtxtPtr ctxt = ctx;
  reader *rd = ctxt->_private;
  (void)name; (void)ext; (void)sys;
  rt_diag_add(rd->diag, "%s:%d: DOCTYPE declarations are not allowed in IR files", rd->name,
              ctxt->input ? ctxt->input->line : 0);
  rd->errors++;
  xmlStopParser(ctxt);
}

/* The file-size limit (BATON_IR_MAX_MB), in bytes. */
static int64_t max_bytes(void) { return rt_param_int(RT_PARAM_IR_MAX_MB) << 20; }

/* Whether an IR of len bytes is over the limits (reported); partial: len
 * is where reading a pipe stopped, not the whole. */
static int too_large(reader *rd, int64_t len, int partial) {
  int64_t lim = max_bytes();
  if (len <= lim && len <= INT_MAX) return 0;
  if (len > lim && partial)
    rt_diag_add(rd->diag, "%s:1: IR file is more than %lld MiB, over the limit of %lld MiB (%s raises it)", rd->name,
                (long long)(lim >> 20), (long long)(lim >> 20), rt_param_name(RT_PARAM_IR_MAX_MB));
  else if (len > lim)
    rt_diag_add(rd->diag, "%s:1: IR file is %lld bytes (%lld MiB), over the limit of %lld MiB (%s raises it)", rd->name,
                (long long)len, (long long)((len + (1 << 20) - 1) >> 20), (long long)(lim >> 20),
                rt_param_name(RT_PARAM_IR_MAX_MB));
  else
    rt_diag_add(rd->diag, "%s:1: IR file is %lld bytes, over the 2 GiB that libxml2 parses", rd->name, (long long)len);
  rd->errors++;
  return 1;
}

static bt_result parse(reader *rd, const char *buf, size_t len, int partial, ir_prog **out) {
  *out = NULL;
  rd->max_tbs = rt_param_int(RT_PARAM_IR_MAX_TBS);
  rd->max_steps = rt_param_int(RT_PARAM_IR_MAX_STEPS);
  if (too_large(rd, (int64_t)len, partial)) return BT_ERR_INVALID;
  xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
  if (!ctxt) {
    rt_diag_add(rd->diag, "%s:0: out of memory", rd->name);
    return BT_ERR_NOMEM;
  }
  ctxt->_private = rd;
  ctxt->sax->internalSubset = on_doctype;
  xmlSetStructuredErrorFunc(rd, on_xml_error);
  xmlDoc *doc = xmlCtxtReadMemory(ctxt, buf, (int)len, rd->name, NULL, xml_opts);
  xmlSetStructuredErrorFunc(NULL, NULL);
  xmlFreeParserCtxt(ctxt);
  return finish(rd, doc, out);
}

bt_result ir_read_memory(const char *buf, size_t len, const char *name,
                         ir_prog **out, rt_diag *diag) {
  reader rd = {name ? name : "<memory>", diag, 0, NULL, 0, 0};
  return parse(&rd, buf, len, 0, out);
}

bt_result ir_read_file(const char *path, ir_prog **out, rt_diag *diag) {
  reader rd = {path, diag, 0, NULL, 0, 0};
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    rt_diag_add(diag, "%s: cannot open: %s", path, strerror(errno));
    return BT_ERR_INVALID;
  }
  /* The size is checked before anything is read (a regular file's from
   * stat; a pipe's as it comes, reading stops past the limit). */
  struct stat st;
  int64_t lim = max_bytes();
  int reg = !fstat(fileno(f), &st) && S_ISREG(st.st_mode);
  if (reg && too_large(&rd, (int64_t)st.st_size, 0)) {
    fclose(f);
    return BT_ERR_INVALID;
  }
  size_t cap = reg ? (size_t)st.st_size + 1 : 65536, len = 0;
  char *buf = malloc(cap);
  int nomem = !buf;
  while (!nomem && (int64_t)len <= lim) {
    if (len == cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) { nomem = 1; break; }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    if (got == 0) break;
    len += got;
  }
  int rerr = ferror(f), e = errno;
  fclose(f);
  bt_result res;
  if (nomem) {
    rt_diag_add(diag, "%s:0: out of memory reading it", path);
    res = BT_ERR_NOMEM;
  } else if (rerr) {
    rt_diag_add(diag, "%s: cannot read: %s", path, strerror(e));
    res = BT_ERR_INVALID;
  } else {
    res = parse(&rd, buf, len, !reg || (int64_t)len > (int64_t)st.st_size, out);   /* past the limit: refused */
  }
  free(buf);
  return res;
}
