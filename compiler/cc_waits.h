/* cc_waits.h -- which waits a step needs: what each thread block already
 * knows has run on its rank (a vector clock), so that lowering writes a
 * dependency only where neither program order nor another wait implies it. */
#ifndef CC_WAITS_H
#define CC_WAITS_H

#include "ir.h"

/* Clocks for the thread blocks of every rank, and per instruction the
 * clock of its step.  The per-instruction clocks cost nins * (maxtb + 1)
 * ints; past CC_WAITS_MAX_CELLS they are not kept, and only what a thread
 * block waited for itself (directly or not) prunes its waits. */
#define CC_WAITS_MAX_CELLS ((size_t)1 << 24)

typedef struct cc_waits cc_waits;

/* Clocks for nranks ranks of at most maxtb thread blocks and nins
 * instructions; NULL when out of memory (cc_malloc's budget). */
cc_waits *cc_waits_new(int nranks, int maxtb, int nins);
void cc_waits_free(cc_waits *w);

/* A dependency of a step: a step of thread block tb at pos, lowered from
 * instruction id. */
typedef struct cc_need { int tb, pos, id; } cc_need;

/* Keeps of need[0..n) (steps of other thread blocks of rank r that the
 * step of instruction `id`, on thread block tb, must come after) those
 * not implied: not known to thread block tb, and not run before another
 * of them.  A step of a compute thread block (ir_tb_compute of g's tbs:
 * its steps run in any order) is always kept.  Thread block tb then knows
 * of the kept ones and of what they knew.  Returns how many are kept,
 * first in need. */
int cc_waits_pick(cc_waits *w, const ir_gpu *g, int r, int tb, cc_need *need, int n);

/* Records that instruction id's step is step pos of thread block tb of
 * rank r (after cc_waits_pick of its waits). */
void cc_waits_ran(cc_waits *w, int r, int tb, int pos, int id);

#endif
