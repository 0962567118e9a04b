/* cc_direct.h -- lowering of a direct program (docs/DSL.md, "Direct
 * lowering"): copies and reductions between ranks as put, get and getr
 * steps, LL landings, and the sig/wait steps a Simple program needs.
 * Internal to compiler/ (called by cc_lower.c). */
#ifndef CC_DIRECT_H
#define CC_DIRECT_H

#include "cc_ins.h"

/* Why a sig is there (ins.role): the start rule (the peer may touch this
 * rank's memory once it has started), an order between ranks the data
 * needs, the end rule (this rank's remote accesses to the peer are done). */
enum { CC_SIG_START = 1, CC_SIG_DATA, CC_SIG_END };

/* Prepares w for lowering direct program t->direct: the landing space and
 * which LL copies may put straight into their scratch destination (every
 * chunk of it written by that copy alone and read by its rank).  0 on an
 * error (counted in w) or out of memory. */
int cc_direct_plan(lower *w);

/* Emits the instructions of trace operation k on IR chunks sp from si /
 * dp from di (n chunks): local ones cpy / re; between ranks, Simple: a
 * copy a put by the source (via put or direct) or a get by the
 * destination (via get), a reduce a getr by the destination (get, direct)
 * or a put into a fresh landing of the destination and a re there (put);
 * LL: a put into a fresh landing of the destination and a cpy / re there,
 * or a put straight into a copy's scratch destination (cc_direct_plan).
 * 0 on an error (counted in w) or out of memory. */
int cc_direct_emit(lower *w, int k, int si, cc_pat sp, int di, cc_pat dp, int n);

/* After dependency tracking (predecessors may be on other ranks): Simple,
 * realizes every predecessor on another rank x by a sig on x after it and a
 * wait before the step (one pair per source step and peer); adds the
 * start rule (a remote access with no wait on the rank it touches waits
 * for a sig that rank issues at its start, one per pair of ranks) and the
 * end rule (a sig after all of a rank's remote accesses to a peer).  LL:
 * checks that the only orders between ranks are puts before their
 * landings' readers, and that a rank that puts to a peer gets a put from
 * it.  0 on an error (counted in w) or out of memory. */
int cc_direct_sync(lower *w);

/* After scheduling (order[0..live): the global order, every rank's steps
 * in one thread block): drops an end sig that a later sig to its peer
 * follows, merges adjacent sigs to one peer (the later stays), drops a
 * wait whose steps all wait for a later sig of the same peer and then a
 * start or data sig no wait is left for, gives each wait cnt = the
 * signals it needs beyond those its rank has taken (a wait they cover
 * goes), appends, per rank, a final wait for every peer's remaining
 * signals and merges adjacent waits for one peer.  Every drop keeps each
 * order: a later sig of the same stream comes after everything the
 * dropped one did.  Rebuilds *order (reallocated) and returns the live
 * count, -1 when out of memory. */
int cc_direct_settle(lower *w, int **order, int live);

/* Frees what cc_direct_plan allocated. */
void cc_direct_free(lower *w);

#endif
