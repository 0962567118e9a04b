/* cc_frag.h -- parallelize(n, fn): tracing n instances of a fragment from
 * the same symbolic state and merging what they leave behind. */
#ifndef CC_FRAG_H
#define CC_FRAG_H

#include "cc.h"

/* Before instance 0: saves the symbolic state.  0 when out of memory. */
int cc_frag_begin(cc_trace *t);

/* After each instance: folds the state it left into the merged result
 * (a chunk the instances leave with different values is marked mixed with
 * `line`) and restores the saved state for the next one.  0 when out of
 * memory. */
int cc_frag_next(cc_trace *t, int first, int line);

/* After the last instance: the merged result becomes the state; every
 * chunk an instance wrote gets a fresh version, so references made before
 * or inside the fragment to it are stale.  0 when out of memory. */
int cc_frag_end(cc_trace *t);

/* Frees the snapshots (also on an error inside the fragment). */
void cc_frag_free(cc_trace *t);

#endif
