/* ir_dealias.h -- an in-place program rewritten to run out of place with no copy of the input. */
#ifndef IR_DEALIAS_H
#define IR_DEALIAS_H

#include <stddef.h>

#include "ir.h"

/* For an in-place program p that runs out-of-place calls on a copy of its
 * input (ir_prog_aliased(p, 0)), builds *out: the same thread blocks and
 * steps, each chunk read from the caller's input where no write on its
 * rank comes before the read and from the output otherwise, each write to
 * the output; *out is an out-of-place program (inplace 0).  p must have
 * passed ir_check and the in-place race check (ir_check_races(p, 1)).
 * Returns BT_OK, BT_ERR_UNSUPPORTED with the reason in why[0..n) when the
 * rewrite cannot be exact (see ir_dealias.c), or BT_ERR_NOMEM. */
bt_result ir_dealias(const ir_prog *p, ir_prog **out, char *why, size_t n);

#endif
