/* ir_read.h -- MSCCL/baton XML to IR. */
#ifndef IR_READ_H
#define IR_READ_H

#include "ir.h"
#include "rt_diag.h"

/* Parses an XML IR file into *out.  Structural problems (malformed XML,
 * unknown elements, opcodes or buffers, bad numbers, misnumbered ids) are
 * reported to diag as "file:line: message" and give BT_ERR_INVALID.  The
 * result still needs ir_check() before it can run.  Network access, DTDs
 * and entity expansion are off: a DOCTYPE stops the parse.  Bounded
 * before anything is parsed by BATON_IR_MAX_MB (the file's size), then by
 * BATON_MAX_RANKS, BATON_IR_MAX_TBS (per rank), BATON_IR_MAX_STEPS (per
 * thread block) and BATON_MAX_CHUNKS, each refusal naming its parameter.
 * Parsing takes about 20 times the file's size in memory at its peak. */
bt_result ir_read_file(const char *path, ir_prog **out, rt_diag *diag);

/* The same from memory; `name` is used in messages. */
bt_result ir_read_memory(const char *buf, size_t len, const char *name,
                         ir_prog **out, rt_diag *diag);

#endif
