/* ir.c -- IR tables generated from ir_op.def, and program construction. */
#include "ir.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ir_op_xml[IR_OP_COUNT] = {
#define X(id, xml, flags, args, doc) xml,
#include "ir_op.def"
#undef X
};
const unsigned ir_op_flags[IR_OP_COUNT] = {
#define X(id, xml, flags, args, doc) flags,
#include "ir_op.def"
#undef X
};
const char *const ir_op_doc[IR_OP_COUNT] = {
#define X(id, xml, flags, args, doc) doc,
#include "ir_op.def"
#undef X
};
const char *const ir_op_id[IR_OP_COUNT] = {
#define X(id, xml, flags, args, doc) #id,
#include "ir_op.def"
#undef X
};

const char *const ir_op_args[IR_OP_COUNT] = {
#define X(id, xml, flags, args, doc) args,
#include "ir_op.def"
#undef X
};

const char *const ir_buf_xml[IR_BUF_COUNT] = {"i", "o", "s"};
const char *const ir_okind_name[IR_OKIND_COUNT] = {"matrix", "vector", "index"};
const char ir_okind_letter[IR_OKIND_COUNT] = {'M', 'V', 'I'};

int ir_dim_expr_ok(const char *s) {
  int factors = 0;
  for (;;) {
    size_t n = 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_') n++;
    if (n >= IR_MAX_NAME || ++factors > IR_MAX_DIM_FACTORS) return 0;
    if (!s[n]) return 1;
    if (s[n] != '*') return 0;
    s += n + 1;
  }
}

int ir_op_nargs(int op, int *least) {
  const char *a = op >= 0 && op < IR_OP_COUNT ? ir_op_args[op] : "";
  int n = 0, m = 0;
  for (; a[n]; n++)
    if (a[n] >= 'A' && a[n] <= 'Z') m = n + 1;
  if (least) *least = m;
  return n;
}
const char *const ir_sync_name[IR_SYNC_COUNT] = {"tile", "group", "stride"};
const char *const ir_coll_name[IR_COLL_COUNT] = {
  "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "gather", "scatter", "custom"};

int ir_coll_rooted(ir_coll c) { return ir_coll_unused(c) >= 0; }
int ir_coll_unused(ir_coll c) {
  switch (c) {
  case IR_COLL_BROADCAST: case IR_COLL_SCATTER: return IR_BUF_INPUT;
  case IR_COLL_REDUCE: case IR_COLL_GATHER: return IR_BUF_OUTPUT;
  default: return -1;
  }
}
int ir_coll_reduces(ir_coll c) {
  return c == IR_COLL_ALLREDUCE || c == IR_COLL_REDUCESCATTER || c == IR_COLL_REDUCE;
}
int ir_coll_elementwise(ir_coll c) {
  return c == IR_COLL_ALLREDUCE || c == IR_COLL_BROADCAST || c == IR_COLL_REDUCE;
}

int ir_coll_source(ir_coll c, int root, int n, int k, int r, int chunk, int *src_rank, int *src_chunk) {
  switch (c) {
  case IR_COLL_ALLREDUCE: *src_rank = -1; *src_chunk = chunk; return 1;
  case IR_COLL_ALLGATHER: *src_rank = chunk / k; *src_chunk = chunk % k; return 1;
  case IR_COLL_REDUCESCATTER: *src_rank = -1; *src_chunk = r * k + chunk; return 1;
  case IR_COLL_ALLTOALL: *src_rank = chunk / k; *src_chunk = r * k + chunk % k; return 1;
  case IR_COLL_BROADCAST: *src_rank = root; *src_chunk = chunk; return 1;
  case IR_COLL_REDUCE:
    if (r != root) return 0;
    *src_rank = -1; *src_chunk = chunk; return 1;
  /* Gather and scatter, relabelled for root R (ir_prog_copy), keep rank
   * q's block at block (q - R) mod n of the root's buffer (block q for
   * root 0): the runtime rotates the root's buffer around the call. */
  case IR_COLL_GATHER:
    if (r != root) return 0;
    *src_rank = (chunk / k + root) % n; *src_chunk = chunk % k; return 1;
  case IR_COLL_SCATTER: *src_rank = root; *src_chunk = ((r - root + n) % n) * k + chunk; return 1;
  default: return -1;
  }
}
const char *const ir_proto_name[IR_PROTO_COUNT] = {"Simple", "LL", "LL128"};

static int lookup(const char *const *names, int n, const char *s) {
  for (int i = 0; s && i < n; i++)
    if (!strcmp(names[i], s)) return i;
  return -1;
}

ir_op ir_op_from_xml(const char *s) {
  int i = lookup(ir_op_xml, IR_OP_COUNT, s);
  return i < 0 ? IR_OP_COUNT : (ir_op)i;
}
int ir_coll_from_name(const char *s) { return lookup(ir_coll_name, IR_COLL_COUNT, s); }
int ir_proto_from_name(const char *s) { return lookup(ir_proto_name, IR_PROTO_COUNT, s); }
int ir_buf_from_xml(const char *s) { return lookup(ir_buf_xml, IR_BUF_COUNT, s); }

/* Interned strings: a singly linked list; provenance strings repeat a lot,
 * so a linear probe over the last few hits most of the time. */
struct ir_strings {
  struct ir_strings *next;
  char s[];
};

ir_prog *ir_prog_new(const char *name, ir_coll coll, int ngpus) {
  if (ngpus < 0 || ngpus > (1 << 20)) return NULL;
  ir_prog *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->name = strdup(name ? name : "");
  p->gpus = calloc(ngpus ? ngpus : 1, sizeof *p->gpus);
  if (!p->name || !p->gpus) { ir_prog_free(p); return NULL; }
  p->coll = coll;
  p->ngpus = ngpus;
  p->nchannels = 1;
  p->nchunksperloop = 1;
  p->outofplace = -1;
  for (int r = 0; r < ngpus; r++) p->gpus[r].id = r;
  return p;
}

void ir_prog_free(ir_prog *p) {
  if (!p) return;
  for (int r = 0; p->gpus && r < p->ngpus; r++) {
    ir_gpu *g = &p->gpus[r];
    for (int t = 0; t < g->ntbs; t++) free(g->tbs[t].steps);
    free(g->tbs);
  }
  free(p->gpus);
  for (struct ir_strings *s = p->strings, *n; s; s = n) { n = s->next; free(s); }
  free(p->name);
  free(p->file);
  free(p);
}

ir_prog *ir_prog_copy(const ir_prog *p, int shift) {
  int n = p->ngpus;
  if (shift < 0 || (n && shift >= n) || (!n && shift)) return NULL;
  ir_prog *q = ir_prog_new(p->name, p->coll, n);
  if (!q) return NULL;
  if (p->file && !(q->file = strdup(p->file))) goto fail;
  q->proto = p->proto;
  q->nchannels = p->nchannels;
  q->nchunksperloop = p->nchunksperloop;
  q->inplace = p->inplace;
  q->outofplace = p->outofplace;
  q->nthreads = p->nthreads;
  q->slots = p->slots;
  q->version = p->version;
  q->root = n ? (p->root + shift) % n : 0;
  q->minbytes = p->minbytes;
  q->maxbytes = p->maxbytes;
  q->line = p->line;
  if ((p->expect && !(q->expect = ir_intern(q, p->expect))) ||
      (p->interleave && !(q->interleave = ir_intern(q, p->interleave))))
    goto fail;
  q->noperands = p->noperands;
  for (int i = 0; i < p->noperands; i++) {
    const ir_operand *a = &p->operands[i];
    ir_operand *b = &q->operands[i];
    *b = *a;
    if ((a->name && !(b->name = ir_intern(q, a->name))) || (a->dtype && !(b->dtype = ir_intern(q, a->dtype))) ||
        (a->dim[0] && !(b->dim[0] = ir_intern(q, a->dim[0]))) || (a->dim[1] && !(b->dim[1] = ir_intern(q, a->dim[1]))))
      goto fail;
  }
  for (int r = 0; r < n; r++) {
    const ir_gpu *a = &p->gpus[r];
    ir_gpu *b = &q->gpus[(r + shift) % n];
    b->i_chunks = a->i_chunks; b->o_chunks = a->o_chunks; b->s_chunks = a->s_chunks; b->line = a->line;
    for (int t = 0; t < a->ntbs; t++) {
      const ir_tb *at = &a->tbs[t];
      ir_tb *tb = ir_tb_add(b, at->send < 0 ? -1 : (at->send + shift) % n, at->recv < 0 ? -1 : (at->recv + shift) % n,
                            at->chan);
      if (!tb) goto fail;
      tb->id = at->id;
      tb->line = at->line;
      for (int s = 0; s < at->nsteps; s++) {
        ir_step *st = ir_step_add(tb);
        if (!st) goto fail;
        *st = at->steps[s];
        if (st->peer >= 0) st->peer = (st->peer + shift) % n;
        if (st->prov && !(st->prov = ir_intern(q, st->prov))) goto fail;
      }
    }
  }
  return q;
fail:
  ir_prog_free(q);
  return NULL;
}

void ir_pattern_extent(int32_t off, int32_t run, int32_t stride, int32_t cnt, int64_t *lo, int64_t *hi) {
  if (run <= 0 || run >= cnt) { *lo = off; *hi = (int64_t)off + cnt - 1; return; }
  int64_t runs = (cnt + run - 1) / run, last = (runs - 1) * (int64_t)stride;   /* the last run's start - off */
  *lo = off + (last < 0 ? last : 0);
  *hi = off + (last > 0 ? last + (cnt - (runs - 1) * (int64_t)run) - 1 : run - 1);
}

int32_t ir_side_nruns(const ir_step *st, int dst) {
  int32_t run = dst ? st->dstrun : st->srcrun;
  return run > 0 && run < st->cnt ? (int32_t)(((int64_t)st->cnt + run - 1) / run) : 1;
}

void ir_side_run(const ir_step *st, int dst, int32_t i, int64_t *lo, int64_t *hi) {
  int32_t run = dst ? st->dstrun : st->srcrun;
  int64_t off = dst ? st->dstoff : st->srcoff, len = st->cnt;
  if (run > 0 && run < st->cnt) {
    off += i * (int64_t)(dst ? st->dststride : st->srcstride);
    len = st->cnt - (int64_t)i * run < run ? st->cnt - (int64_t)i * run : run;
  }
  *lo = off;
  *hi = off + len;
}

int ir_tb_next(const ir_tb *tb, int from, unsigned flags) {
  while (from < tb->nsteps && !(ir_op_flags[tb->steps[from].op] & flags)) from++;
  return from;
}

ir_tb *ir_tb_add(ir_gpu *g, int send, int recv, int chan) {
  if (g->ntbs == g->captbs) {
    int cap = g->captbs ? 2 * g->captbs : 4;
    ir_tb *t = realloc(g->tbs, cap * sizeof *t);
    if (!t) return NULL;
    g->tbs = t;
    g->captbs = cap;
  }
  ir_tb *tb = &g->tbs[g->ntbs];
  memset(tb, 0, sizeof *tb);
  tb->id = g->ntbs++;
  tb->send = send;
  tb->recv = recv;
  tb->chan = chan;
  return tb;
}

ir_step *ir_step_add(ir_tb *tb) {
  if (tb->nsteps == tb->capsteps) {
    int cap = tb->capsteps ? 2 * tb->capsteps : 8;
    ir_step *s = realloc(tb->steps, cap * sizeof *s);
    if (!s) return NULL;
    tb->steps = s;
    tb->capsteps = cap;
  }
  ir_step *s = &tb->steps[tb->nsteps++];
  memset(s, 0, sizeof *s);
  s->srcoff = s->dstoff = -1;
  s->depid = s->deps = -1;
  s->peer = -1;
  for (int k = 0; k < IR_MAX_ARGS; k++) s->args[k] = -1;
  return s;
}

ir_operand *ir_operand_add(ir_prog *p, const char *name, ir_okind kind) {
  if (p->noperands >= IR_MAX_OPERANDS) return NULL;
  ir_operand *o = &p->operands[p->noperands];
  memset(o, 0, sizeof *o);
  if (!(o->name = ir_intern(p, name)) || !(o->dtype = ir_intern(p, kind == IR_OPND_INDEX ? "i64" : "call"))) return NULL;
  o->kind = (uint8_t)kind;
  p->noperands++;
  return o;
}

int ir_operand_find(const ir_prog *p, const char *name) {
  for (int i = 0; name && i < p->noperands; i++)
    if (!strcmp(p->operands[i].name, name)) return i;
  return -1;
}

int ir_tb_compute(const ir_tb *tb) {
  if (tb->send >= 0 || tb->recv >= 0 || tb->nsteps < 1) return 0;
  for (int s = 0; s < tb->nsteps; s++) {
    const ir_step *st = &tb->steps[s];
    unsigned fl = ir_op_flags[st->op];
    if (!(fl & IR_F_COMP) || (fl & (IR_F_SEND | IR_F_RECV)) || st->depid >= 0) return 0;
  }
  return 1;
}

int ir_prog_fused(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++)
        if (ir_op_flags[p->gpus[r].tbs[t].steps[s].op] & IR_F_COMP) return 1;
  return 0;
}

int ir_prog_direct(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++)
        if (ir_op_direct(p->gpus[r].tbs[t].steps[s].op)) return 1;
  return 0;
}

int ir_prog_needs_baton(const ir_prog *p) {
  if (p->noperands > 0 || p->interleave) return 1;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (ir_step_strided(st) || ir_step_ndeps(st) > 1 || (ir_op_flags[st->op] & (IR_F_COMP | IR_F_DIRECT)))
          return 1;
      }
  return 0;
}

int ir_prog_max_cnt(const ir_prog *p) {
  int most = 1;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (!(ir_op_flags[st->op] & (IR_F_SIG | IR_F_WAIT)) && st->cnt > most) most = st->cnt;   /* a wait's cnt counts signals */
      }
  return most;
}

const char *ir_intern(ir_prog *p, const char *s) {
  if (!s) return NULL;
  int probes = 0;
  for (struct ir_strings *e = p->strings; e && probes < 16; e = e->next, probes++)
    if (!strcmp(e->s, s)) return e->s;
  size_t n = strlen(s) + 1;
  struct ir_strings *e = malloc(sizeof *e + n);
  if (!e) return NULL;
  memcpy(e->s, s, n);
  e->next = p->strings;
  p->strings = e;
  return e->s;
}

long ir_prog_nsteps(const ir_prog *p) {
  long n = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++) n += p->gpus[r].tbs[t].nsteps;
  return n;
}

long ir_prog_ntbs(const ir_prog *p) {
  long n = 0;
  for (int r = 0; r < p->ngpus; r++) n += p->gpus[r].ntbs;
  return n;
}

const char *ir_prog_where(const ir_prog *p) {
  return p->file ? p->file : (p->name && *p->name ? p->name : "<program>");
}

const char *ir_step_where(const ir_prog *p, const ir_step *s, char *buf, size_t n) {
  if (!p->file && s->prov && *s->prov) snprintf(buf, n, "%s", s->prov);
  else snprintf(buf, n, "%s:%d", ir_prog_where(p), (int)s->line);
  return buf;
}

unsigned ir_prog_spaces(const ir_prog *p) {
  unsigned m = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int i = 0; i < p->gpus[r].tbs[t].nsteps; i++) {
        const ir_step *s = &p->gpus[r].tbs[t].steps[i];
        if (ir_op_flags[s->op] & (IR_F_SRC | IR_F_GET)) m |= 1u << s->srcbuf;
        if (ir_op_flags[s->op] & (IR_F_DST | IR_F_PUT)) m |= 1u << s->dstbuf;
      }
  return m;
}

int ir_prog_aliased(const ir_prog *p, int inplace_call) {
  if (inplace_call) return 1;
  if (!p->inplace) return 0;
  unsigned both = (1u << IR_BUF_INPUT) | (1u << IR_BUF_OUTPUT);
  return (ir_prog_spaces(p) & both) != both;
}
