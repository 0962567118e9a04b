/* ir_write.c -- IR to MSCCL-compatible XML; EXPLAIN listing; opcode docs. */
#include "ir_write.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "rt_log.h"

/* Escapes the few characters XML needs escaped in attribute values; the
 * runs between them go out whole (a character at a time was a tenth of
 * writing a large program). */
static void put_attr(FILE *f, const char *name, const char *v) {
  fprintf(f, " %s=\"", name);
  for (;;) {
    size_t run = strcspn(v, "&<>\"");
    fwrite(v, 1, run, f);
    v += run;
    if (!*v) break;
    fputs(*v == '&' ? "&amp;" : *v == '<' ? "&lt;" : *v == '>' ? "&gt;" : "&quot;", f);
    v++;
  }
  fputc('"', f);
}

bt_result ir_write(const ir_prog *p, FILE *f) {
  fputs("<algo", f);
  put_attr(f, "name", p->name ? p->name : "");
  fprintf(f, " proto=\"%s%s\" nchannels=\"%d\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=\"%s\" inplace=\"%d\"",
          ir_prog_needs_baton(p) ? IR_PROTO_BATON_PREFIX : "", ir_proto_name[p->proto], p->nchannels, p->nchunksperloop, p->ngpus,
          ir_coll_name[p->coll], p->inplace);
  if (p->outofplace >= 0) fprintf(f, " outofplace=\"%d\"", p->outofplace);
  if (p->slots > 0) fprintf(f, " slots=\"%d\"", p->slots);
  if (p->minbytes) fprintf(f, " minBytes=\"%llu\"", (unsigned long long)p->minbytes);
  if (p->maxbytes) fprintf(f, " maxBytes=\"%llu\"", (unsigned long long)p->maxbytes);
  if (p->nthreads) fprintf(f, " nthreads=\"%d\"", p->nthreads);
  if (p->version) fprintf(f, " baton=\"%d\"", p->version);
  if (p->expect) put_attr(f, "expect", p->expect);
  if (p->interleave) put_attr(f, "interleave", p->interleave);
  fputs(">\n", f);
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *o = &p->operands[k];
    fprintf(f, "  <operand name=\"%s\" kind=\"%s\" dtype=\"%s\"", o->name, ir_okind_name[o->kind], o->dtype);
    if (o->kind == IR_OPND_MATRIX) fprintf(f, " rows=\"%s\" cols=\"%s\"", o->dim[0], o->dim[1]);
    else fprintf(f, " len=\"%s\"", o->dim[0]);
    fputs(" />\n", f);
  }
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    fprintf(f, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n",
            g->id, g->i_chunks, g->o_chunks, g->s_chunks);
    for (int t = 0; t < g->ntbs; t++) {
      const ir_tb *tb = &g->tbs[t];
      fprintf(f, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", tb->id, tb->send, tb->recv, tb->chan);
      for (int s = 0; s < tb->nsteps; s++) {
        const ir_step *st = &tb->steps[s];
        fprintf(f, "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"%d\" depid=\"%d\" deps=\"%d\" hasdep=\"%d\"",
                s, ir_op_xml[st->op], ir_buf_xml[st->srcbuf], st->srcoff, ir_buf_xml[st->dstbuf],
                st->dstoff, st->cnt, st->depid, st->deps, st->hasdep);
        if (st->nxdeps > 0 && st->depid >= 0) {
          fputs(" xdeps=\"", f);
          for (int k = 0; k < st->nxdeps; k++) fprintf(f, "%s%d:%d", k ? " " : "", st->xdep[k].tb, st->xdep[k].step);
          fputc('"', f);
        }
        if (st->peer >= 0) fprintf(f, " peer=\"%d\"", st->peer);
        if (st->srcrun > 0) fprintf(f, " srcrun=\"%d\" srcstride=\"%d\"", st->srcrun, st->srcstride);
        if (st->dstrun > 0) fprintf(f, " dstrun=\"%d\" dststride=\"%d\"", st->dstrun, st->dststride);
        if (ir_op_args[st->op][0]) {
          fputs(" args=\"", f);
          for (int k = 0; k < IR_MAX_ARGS && st->args[k] >= 0; k++)
            fprintf(f, "%s%s", k ? " " : "", p->operands[st->args[k]].name);
          fputc('"', f);
        }
        if (ir_tb_compute(tb)) {
          if (st->sync == IR_SYNC_TILE) fputs(" sync=\"tile\"", f);
          else fprintf(f, " sync=\"%s:%d\"", ir_sync_name[st->sync], st->sync_param);
        }
        if (st->prov) put_attr(f, "prov", st->prov);
        fputs(" />\n", f);
      }
      fputs("    </tb>\n", f);
    }
    fputs("  </gpu>\n", f);
  }
  fputs("</algo>\n", f);
  return ferror(f) ? BT_ERR_SYSTEM : BT_OK;
}

bt_result ir_write_file(const ir_prog *p, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return BT_ERR_SYSTEM;   /* errno says why; the caller says where */
  bt_result r = ir_write(p, f);
  if (fclose(f) && r == BT_OK) r = BT_ERR_SYSTEM;
  return r;
}

/* "i[3]", "s[0..1]", or a strided one: "s[0..1 +4 x3]" (runs of 2, 4 apart, 3 of them) */
static const char *chunks(char *buf, size_t n, int b, int off, int cnt, int run, int stride) {
  if (cnt <= 1) snprintf(buf, n, "%s[%d]", ir_buf_xml[b], off);
  else if (run <= 0 || run >= cnt) snprintf(buf, n, "%s[%d..%d]", ir_buf_xml[b], off, off + cnt - 1);
  else snprintf(buf, n, "%s[%d..%d %+d x%d]", ir_buf_xml[b], off, off + run - 1, stride, (cnt + run - 1) / run);
  return buf;
}

void ir_step_text(const ir_prog *p, const ir_tb *tb, const ir_step *st, char *line, size_t cap) {
  unsigned fl = ir_op_flags[st->op];
  char a[64], b[64];
  int n = snprintf(line, cap, "%-4s", ir_op_xml[st->op]);
  if (fl & IR_F_COMP) {
    for (int k = 0; k < IR_MAX_ARGS && st->args[k] >= 0 && st->args[k] < p->noperands; k++)
      n += snprintf(line + n, cap - n, " %s", p->operands[st->args[k]].name);
    n += snprintf(line + n, cap - n, " for %s", chunks(a, sizeof a, st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride));
  }
  if (fl & (IR_F_SIG | IR_F_WAIT)) {
    if (fl & IR_F_SIG) snprintf(line + n, cap - n, " -> rank %d", st->peer);
    else if (st->cnt > 1) snprintf(line + n, cap - n, " <- rank %d x%d", st->peer, st->cnt);
    else snprintf(line + n, cap - n, " <- rank %d", st->peer);
    return;
  }
  if (fl & IR_F_GET) {   /* rank:chunks, the peer's */
    chunks(a, sizeof a, st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride);
    chunks(b, sizeof b, st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride);
    if (fl & IR_F_RED) snprintf(line + n, cap - n, " %s (op)= %d:%s", b, st->peer, a);
    else snprintf(line + n, cap - n, " %d:%s -> %s", st->peer, a, b);
    return;
  }
  if (fl & IR_F_SWAP) {   /* both ways: the local chunks and the peer's */
    chunks(a, sizeof a, st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride);
    chunks(b, sizeof b, st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride);
    snprintf(line + n, cap - n, " %s <-> %d:%s", a, st->peer, b);
    return;
  }
  if (fl & IR_F_RECV) n += snprintf(line + n, cap - n, " recv(%d)", tb->recv);
  if (fl & IR_F_SRC) n += snprintf(line + n, cap - n, " %s%s",
                                    (fl & IR_F_RECV) ? "+ " : "", chunks(a, sizeof a, st->srcbuf, st->srcoff, st->cnt, st->srcrun, st->srcstride));
  if (fl & IR_F_DST) n += snprintf(line + n, cap - n, " -> %s", chunks(b, sizeof b, st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride));
  if (fl & IR_F_SEND) n += snprintf(line + n, cap - n, " -> send(%d)", tb->send);
  if (fl & IR_F_PUT) n += snprintf(line + n, cap - n, " -> %d:%s", st->peer, chunks(b, sizeof b, st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride));
  if (st->op == IR_OP_SEND && st->dstoff >= 0)
    snprintf(line + n, cap - n, " as %s", chunks(b, sizeof b, st->dstbuf, st->dstoff, st->cnt, st->dstrun, st->dststride));
}

/* Appends to b (size n, *m used), cutting what does not fit. */
static void add(char *b, size_t n, size_t *m, const char *fmt, ...) {
  if (*m + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(b + *m, n - *m, fmt, ap);
  va_end(ap);
  if (k > 0) *m = *m + (size_t)k < n ? *m + (size_t)k : n - 1;
}

void ir_explain(const ir_prog *p, FILE *f) {
  fprintf(f, "algo %s: %s over %d ranks, %s, proto %s, %d channel%s, %d chunks per loop\n",
          p->name && *p->name ? p->name : "(unnamed)", ir_coll_name[p->coll], p->ngpus,
          p->inplace ? "in-place" : "out-of-place", ir_proto_name[p->proto], p->nchannels,
          p->nchannels == 1 ? "" : "s", p->nchunksperloop);
  fprintf(f, "%ld thread blocks, %ld steps\n", ir_prog_ntbs(p), ir_prog_nsteps(p));
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *o = &p->operands[k];
    if (o->kind == IR_OPND_MATRIX)
      fprintf(f, "operand %s: matrix [%s x %s], %s type\n", o->name, o->dim[0], o->dim[1], o->dtype);
    else fprintf(f, "operand %s: %s [%s], %s type\n", o->name, ir_okind_name[o->kind], o->dim[0], o->dtype);
  }
  if (p->interleave) fprintf(f, "output interleaved: [count / L][ranks][L], L = %s\n", p->interleave);
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    fprintf(f, "\nrank %d  (input %d chunks, output %d, scratch %d)\n", r, g->i_chunks, g->o_chunks, g->s_chunks);
    for (int t = 0; t < g->ntbs; t++) {
      const ir_tb *tb = &g->tbs[t];
      fprintf(f, "  tb %d  chan %d", t, tb->chan);
      if (tb->send >= 0) fprintf(f, "  send->%d", tb->send);
      if (tb->recv >= 0) fprintf(f, "  recv<-%d", tb->recv);
      if (ir_tb_compute(tb)) fputs("  compute (steps in any order, tiles spread over many CUDA blocks)", f);
      fputc('\n', f);
      for (int s = 0; s < tb->nsteps; s++) {
        const ir_step *st = &tb->steps[s];
        char text[140], line[160];
        ir_step_text(p, tb, st, text, sizeof text);
        snprintf(line, sizeof line, "    %3d  %s", s, text);
        char extra[640] = "";
        size_t m = 0;
        for (int k = 0; k < ir_step_ndeps(st); k++) {
          ir_dep d = ir_step_dep(st, k);
          add(extra, sizeof extra, &m, k ? ",tb%d.%d" : " wait tb%d.%d", d.tb, d.step);
        }
        if (st->hasdep) add(extra, sizeof extra, &m, " signal");
        if (st->hasdep && ir_tb_compute(tb) && st->sync != IR_SYNC_TILE)
          add(extra, sizeof extra, &m, " (%s:%d)", ir_sync_name[st->sync], st->sync_param);
        if (st->prov) add(extra, sizeof extra, &m, "  ; %s", st->prov);
        if (m) fprintf(f, "%-56s%s\n", line, extra);
        else fprintf(f, "%s\n", line);
      }
    }
  }
}

_Static_assert(1u << (IR_F_BITS - 1) == IR_F_SWAP, "IR_F_BITS counts the IR_F_* flags, IR_F_SWAP the last");

void ir_ops_markdown(FILE *f) {
  static const char *flag_names[IR_F_BITS] = {"src", "dst", "recv", "send", "reduce", "compute", "peer's dst",
                                              "peer's src", "signal", "wait", "exchange"};
  fputs("| type | opcode | reads/writes | operands | semantics |\n|---|---|---|---|---|\n", f);
  for (int i = 0; i < IR_OP_COUNT; i++) {
    char fl[80] = "", args[64] = "";
    size_t n = 0, m = 0;
    for (int b = 0; b < IR_F_BITS; b++)
      if (ir_op_flags[i] & (1u << b))
        n += snprintf(fl + n, sizeof fl - n, "%s%s", n ? ", " : "", flag_names[b]);
    for (const char *a = ir_op_args[i]; *a; a++)
      for (int k = 0; k < IR_OKIND_COUNT; k++)
        if (ir_okind_letter[k] == toupper((unsigned char)*a))
          m += snprintf(args + m, sizeof args - m, "%s%s%s", m ? ", " : "", ir_okind_name[k],
                        islower((unsigned char)*a) ? " (optional)" : "");
    fprintf(f, "| `%s` | %s | %s | %s | %s |\n", ir_op_xml[i], ir_op_id[i], n ? fl : "-", m ? args : "-",
            ir_op_doc[i]);
  }
}
