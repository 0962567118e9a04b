/* ir_write.h -- IR to XML, and the human-readable listing. */
#ifndef IR_WRITE_H
#define IR_WRITE_H

#include <stdio.h>

#include "ir.h"

/* Writes p as XML.  Attributes MSCCL knows come first and in MSCCL's
 * order; baton's extensions (the "baton" schema version, minBytes and
 * maxBytes, nthreads, per-step "prov") are written only when set, so a
 * program that uses none of them is a plain MSCCL file.  A program MSCCL
 * would run otherwise than baton (ir_prog_needs_baton) has its protocol
 * written "baton-Simple" (-LL, -LL128): MSCCL refuses to load it. */
bt_result ir_write(const ir_prog *p, FILE *f);
/* Writes p to the file at path (created or truncated); BT_ERR_SYSTEM with
 * errno set when it cannot be opened or written (nothing logged: the
 * caller names the path). */
bt_result ir_write_file(const ir_prog *p, const char *path);

/* One step as text, e.g. "rrs  recv(3) + i[4] -> send(1)". */
void ir_step_text(const ir_prog *p, const ir_tb *tb, const ir_step *st, char *buf, size_t n);

/* A readable per-rank, per-thread-block listing (like SQLite's EXPLAIN). */
void ir_explain(const ir_prog *p, FILE *f);

/* The schedule as a Graphviz digraph: a cluster per rank holding a
 * cluster per thread block with its steps in order; message edges between
 * ranks (bold, blue), dependency edges dashed; a direct program's signal
 * edges (a sig to its wait) red and landing edges (an LL put to the steps
 * that read its landing) dotted green.  Needs ir_check to have
 * passed (messages are paired as it pairs them).  ir/ir_dot.c. */
bt_result ir_write_dot(const ir_prog *p, FILE *f);

/* The opcode table as a Markdown table (generated from ir_op.def). */
void ir_ops_markdown(FILE *f);

#endif
