/* ip_cpu_opts.h -- what a run of the CPU reference executor (ip_cpu.h)
 * is asked to do: type, operator, counts, the postcondition, a sources
 * run; the postcondition checks (ip_post.h) read the same options. */
#ifndef IP_CPU_OPTS_H
#define IP_CPU_OPTS_H

#include <stdint.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "ir_expect.h"

/* A step the executor completed, for a run that reports them (baton sim):
 * what it needed from other thread blocks, so that a caller can time it. */
typedef struct ip_cpu_event {
  int r, t, s;            /* rank, thread block, step */
  int64_t tile;
  int from_r, from_t;     /* a receive: the thread block that sent the message, else -1 */
  int64_t rmsg;           /* ... the message's index on that connection (0, 1, ...) */
  int to_r, to_t;         /* a send: the thread block that receives it, else -1 */
  int64_t smsg;           /* ... the index of the message it posts */
  int stream;             /* a sig or wait (direct programs): its signal stream, else -1 */
  int64_t sig;            /* a sig: its index in the stream; a wait: how many of the stream's signals it took */
} ip_cpu_event;

typedef struct ip_cpu_opts {
  ip_dtype dtype;
  ip_redop op;
  int64_t count;          /* elements per block (see ir_geom.h) */
  int inplace;            /* 1 in place, 0 out of place, -1 the program's own */
  int64_t tile;           /* elements per tile; 0: BATON_EXEC_TILE, else one tile per chunk */
  int slots;              /* FIFO slots per connection; 0: BATON_EXEC_SLOTS */
  const ir_expect *expect;/* custom collectives: the postcondition; NULL: the program's expect attribute */
  const ip_dims *dims;    /* fused programs: dimension bindings (e.g. K); an unbound one is IP_CPU_DIM */
  int sources;            /* 1: a sources run (below); dtype and op are then ignored */
  int src_words;          /* a sources run's rank sets: 64-bit words, 1..IP_CPU_SRC_WORDS; 0: as many as the
                           * ranks need, up to IP_CPU_SRC_WORDS */
  /* NULL, or called for every step the run completes, once per tile, in
   * the executor's order: after the events of everything the step waited
   * for (its dependencies, the message it takes, the receive that freed
   * its slot, the signals it waits for) */
  void (*on_step)(void *ctx, const ip_cpu_event *e);
  void *on_step_ctx;
} ip_cpu_opts;

/* A sources run carries, instead of a value, where every element came
 * from: an input element is the record (rank, offset in the input); a
 * reduction of two records of the same offset whose ranks differ is the
 * record (that offset, the set of ranks); anything else -- two offsets,
 * a rank counted twice, an operand no step wrote or the output's initial
 * contents -- is a wrong record that stays wrong.  Each output element's
 * record must be exactly its definition's: the one input element, or the
 * reduction over every rank with each rank once.  A non-fused program's
 * steps do not look at values, so this holds for every input, type and
 * operator at once, where a run on values can meet a coincidence.  The
 * rank sets of a program that reduces hold 64 x src_words ranks: a program
 * on more ranks is run once per window of that many (report.passes), each
 * run checking that every rank of its window is in each reduction once,
 * so that together they check every rank.  Fused programs are refused
 * (BT_ERR_UNSUPPORTED): their compute steps need values. */
#define IP_CPU_SRC_WORDS 8

/* The size of an operand dimension a fused program's run leaves unbound:
 * odd, so that vector loops meet a tail. */
#define IP_CPU_DIM 67

#endif
