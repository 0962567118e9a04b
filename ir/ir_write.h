/* ir_write.h -- IR to XML, and the human-readable listing. */
#ifndef IR_WRITE_H
#define IR_WRITE_H

#include <stdio.h>

#include "ir.h"

/* Writes p as XML.  Attributes MSCCL knows come first and in MSCCL's
 * order; baton's extensions (the "baton" schema version, minBytes and
 * maxBytes, nthreads, per-step "prov") are written only when set, so a
 * program that uses none of them is a plain MSCCL file. */
bt_result ir_write(const ir_prog *p, FILE *f);
bt_result ir_write_file(const ir_prog *p, const char *path);

/* A readable per-rank, per-thread-block listing (like SQLite's EXPLAIN). */
void ir_explain(const ir_prog *p, FILE *f);

/* The opcode table as a Markdown table (generated from ir_op.def). */
void ir_ops_markdown(FILE *f);

#endif
