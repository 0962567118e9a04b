/* cc_layout.h -- where lowering puts a traced program: the IR chunks of
 * each chunk's parallelize pieces and whole-program instances, each
 * operation's channel, and the pieces (one message or local step each) an
 * operation becomes: each side's IR chunks one pattern (cc_pat).  Internal to compiler/. */
#ifndef CC_LAYOUT_H
#define CC_LAYOUT_H

#include "cc_ins.h"

/* parallelize(n) splits every chunk into P pieces (P: the least common
 * multiple of the fragments' n); instance i of a fragment owns pieces
 * [i*P/n, (i+1)*P/n) of each chunk it names, code outside fragments all
 * P.  Whole-program instances then give each of the I instances a share
 * of every piece.
 *
 * Blocked layout (the default): a buffer is made of blocks, the input's
 * and output's of k chunks each (ir_geom.h: the runtime fixes which block
 * an IR chunk is in, not where in it), a rank's scratch buffer one block
 * of its S chunks.  A block of B traced chunks becomes B*P*I IR chunks, of
 * which instance j owns the j-th B*P: piece x of chunk q*B + m in instance
 * j is IR chunk (q*I + j)*B*P + m*P + x, or + x*B + m with `xmajor`.  An
 * instance's pieces of consecutive chunks of a block are then consecutive
 * (pieces inner: all P of each chunk; xmajor: each piece's chunks), so an
 * operation stays one message per instance and block.
 *
 * Interleaved layout (a custom collective whose expect= does not keep its
 * form under the blocked one, below): piece x of chunk c in instance j is
 * IR chunk (c*P + x)*I + j; only runs of whole chunks with I = 1 stay
 * together.
 *
 * Channels: code outside fragments keeps its channels [0, Bc); instance i
 * of fragment f moves channel ch to Bc + i*K_f + ch (K_f: the channels f
 * names); whole-program instance j adds j*C, C being the channels of one
 * instance. */
typedef struct cc_layout {
  int P, I;
  int Bc, C, *K;    /* channels: outside fragments, per instance; per fragment */
  int blocked, xmajor;
} cc_layout;

/* Fills lay for w's trace: pieces, channels, and the chunk layout: blocked
 * unless a custom collective's expect needs the interleaved one; xmajor
 * where it makes fewer steps than pieces inner, or as many with fewer of
 * them strided (ties: pieces inner).  0 on
 * an error (counted in w: too many pieces or channels) or out of memory. */
int cc_layout_plan(lower *w, cc_layout *lay);

/* A custom collective's expect (written in the script's chunks) in the IR's
 * chunks under lay, as a new string (cc_malloc'd; NULL out of memory):
 * the same text where lay keeps its meaning (blocked, or one piece and one
 * instance); under the interleaved layout, IR chunk C being piece-instance
 * C % M of traced chunk C / M (M = P x I), each rule's c and k become
 * (c/M) and (k/M) and its source chunk X becomes (X)*M+c%M. */
char *cc_layout_expect(const cc_layout *lay, const char *expect);

/* IR chunk of piece x of traced chunk idx of `space` on `rank`, in
 * whole-program instance j. */
int cc_layout_chunk(const cc_trace *t, const cc_layout *lay, int space, int rank, int idx, int x, int j);

/* A walk over the (chunk, piece) pairs one operation moves in one
 * whole-program instance, in layout order. */
typedef struct cc_runs {
  const cc_trace *t;
  const cc_layout *lay;
  const cc_op *o;
  int j, lo, hi;    /* instance, pieces [lo, hi) */
  int plain;        /* consecutive pieces only: a compute step, or an operation with no pattern */
  int64_t q, all;   /* pairs walked, pairs in all */
} cc_runs;

/* Starts the walk of operation o in instance j; returns its channel. */
int cc_runs_start(cc_runs *it, const cc_trace *t, const cc_layout *lay, const cc_op *o, int j);

/* The next piece: *n pairs whose source IR chunks are pattern *sp from
 * *si and destination IR chunks pattern *dp from *di (cc_pat; run 0:
 * consecutive; always so for a compute step or an operation whose
 * references have no pattern), as long as both sides stay one pattern each (greedy: a
 * piece ends at the first pair that breaks either; the first chunk off a
 * side's first run fixes that side's run and stride).  0 at the end. */
int cc_runs_next(cc_runs *it, int *si, cc_pat *sp, int *di, cc_pat *dp, int *n);

#endif
