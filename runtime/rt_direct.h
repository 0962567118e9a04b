/* rt_direct.h -- direct programs (docs/IR.md, "Direct steps") on one rank:
 * the direct executor's operations (interpreter/ip_direct.h), built from
 * the IR once per communicator, and what a call adds to them. */
#ifndef RT_DIRECT_H
#define RT_DIRECT_H

#include "ip_direct.h"
#include "ir.h"
#include "rt_window.h"

typedef struct rt_dplan {
  int ok;                 /* built: the direct executor runs the program on this rank */
  int ntbs, nops, nlinks, nsyncs;
  ip_dtab tab;            /* the operations, their links and signal entries, as the kernel reads them */
  int peer_io;            /* some rank's step reaches a peer's input or output: a call needs every rank's buffers */
  int stage_ok;           /* no rank reads a peer's input, and each writes a peer's input or output only after
                             waiting on that peer's signal: a rank may run on a copy of its input made before
                             its kernel (in place, rt_direct_usable) */
  int guarded;            /* each rank's thread block reaches a peer's input or output only after waiting on that
                             peer's signal: a call on registered windows checks there that the peer runs the
                             same call (ip_dargs.key) before it touches the peer's buffers */
  int root_src;           /* a rooted collective whose root only puts from its own input, which no other rank
                             reaches: the root of an out-of-place call may run on the caller's input with the
                             root-copy variant (rt_dplan_build_root_copy), no copy before the kernel */
  uint64_t skip_in;       /* the staged variant (rt_dplan_build_staged): bit c, input chunk c is read by no
                             operation, so the copy of the input taken before the kernel may leave it out */
  int most_tbs;           /* the most thread blocks of any rank (every rank gives each the same lanes) */
  int64_t s_chunks;       /* the most scratch chunks of any rank (what a call needs of the window) */
  int nthreads;
  int ll128;              /* LL128: a thread takes 16 bytes of a chunk's lines (120 data bytes a line of eight
                             threads), not of its data */
  /* Who sees whom begin the call (ir_direct_sightings; ip_dargs says what
   * the kernel does with them): bit q, rank q. */
  uint32_t unmet;         /* the peers this rank's call does not see begin */
  uint32_t announce;      /* the peers whose call does not see this rank begin */
  int meets;              /* some rank's unmet is not 0 (every rank's call then leaves the last block of the grid
                             spare, for the meeting: rt_dplan_grid) */
} rt_dplan;

/* Builds rank's operations for direct program p: each thread block's steps
 * in order, consecutive data steps over the same chunks joined into runs
 * (a value kept in registers), consecutive signals and waits into groups.
 * nthreads: the IR's when it says, else this.  BT_ERR_UNSUPPORTED, said
 * why at WARN, when the executor cannot run p (more ranks, thread blocks,
 * channels or operations than ip_direct.h allows, a dependency between
 * thread blocks, an interleaved output, an LL program writing its own
 * scratch); d->ok stays 0 then. */
bt_result rt_dplan_build(rt_dplan *d, const ir_prog *p, int rank, int nthreads);

/* The root-copy variant of rank's plan of p: the same operations, and
 * wherever a run puts the rank's input, that value stored into the same
 * chunks of its output as well (in the run, or as a copies segment beside
 * the put's), so that an out-of-place call of an in-place rooted program
 * reads the caller's input once and fills the root's output on the way.
 * BT_ERR_UNSUPPORTED (not logged) unless p is rooted at `rank` and
 * d->root_src would hold; else as rt_dplan_build. */
bt_result rt_dplan_build_root_copy(rt_dplan *d, const ir_prog *p, int rank, int nthreads);

/* The staged variant of rank's plan of p, for an in-place call run on a
 * copy of its input in memory of the stream's pool (rt_dplan_stage 2): the
 * same operations without the copies of the rank's own input chunks into
 * the same chunks of its output, which in place are already there; their
 * chunks in d->skip_in, so that the copy taken before the kernel leaves
 * them out too (on n ranks it copies n - 1 blocks of n).
 * BT_ERR_UNSUPPORTED (not logged) unless p is an out-of-place AllToAll
 * that may run on a copy (stage_ok) with such a copy, on chunks 0..63;
 * else as rt_dplan_build. */
bt_result rt_dplan_build_staged(rt_dplan *d, const ir_prog *p, int rank, int nthreads);

/* Fills a's lean links (ip_dargs.lean): chunk 0 of every link of each of
 * plan d's one-chunk operations, where the kernel finds it for the call a
 * describes (its buffers, geometry and protocol set); and each thread
 * block's start (ip_dargs.start): its first load and, where that first
 * operation is an LL run that reduces, its leading puts of the value. */
void rt_dplan_lean_links(ip_dargs *a, const rt_dplan *d);

/* The blocks of a direct grid of `grid` that a call of plan d spreads its
 * thread blocks over: all but the last where d->meets (that one meets);
 * the same on every rank. */
static inline int rt_dplan_grid(const rt_dplan *d, int grid) { return grid - (d->meets ? 1 : 0); }

/* Whether a call of `count` elements of `esize` bytes finds room for p's
 * scratch in a window laid out as l (the same answer on every rank). */
int rt_dplan_fits(const rt_dplan *d, const ir_prog *p, const rt_window_layout *l, int64_t count, int esize);

/* Where rank's in-place call of `count` elements of `esize` bytes of p, an
 * out-of-place direct program (plan d), gets the copy of its input it
 * runs on, when d->stage_ok says a copy made before the kernel is safe:
 * 1, the window's Simple scratch (`scratch_bytes`), where p is LL or
 * keeps no scratch of its own and the input fits; 2, memory of the
 * stream's pool, for an AllToAll (no program serves its in-place call
 * without a copy) whose input is at most `pool_bytes`
 * (BATON_STAGE_POOL_MB); 0 where it cannot run so (the call takes
 * another program).  The same answer on every rank of a call. */
int rt_dplan_stage(const rt_dplan *d, const ir_prog *p, int rank, int64_t count, int esize, int64_t scratch_bytes,
                   int64_t pool_bytes);

/* The lanes (blocks per thread block) a call gives each of d's thread
 * blocks on a direct grid of `grid` blocks: enough that a lane takes at
 * most `lane_bytes` of a chunk of `cap_bytes` (0: a 16-byte unit per
 * thread of `nthreads`; LL128: of the chunk's lines), at most grid /
 * d->most_tbs. */
int rt_dplan_lanes(const rt_dplan *d, int grid, int64_t cap_bytes, int64_t lane_bytes, int nthreads);

/* The threads per block of a call of p (plan d) whose chunks have
 * `cap_bytes`: d->nthreads, but for an LL program whose IR does not fix
 * them `small` (BATON_DIRECT_LL_THREADS) where the chunk at a 16-byte unit
 * a thread of `small` (LL128: of its lines) still fits the grid's lanes --
 * a small call then spreads over more blocks; a larger one keeps every
 * thread. */
int rt_dplan_threads(const rt_dplan *d, const ir_prog *p, int grid, int64_t cap_bytes, int small);

#endif
