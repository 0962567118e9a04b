/* ip_cpu_opts.h -- what a run of the CPU reference executor (ip_cpu.h)
 * is asked to do: type, operator, counts, the postcondition, a sources
 * run; the postcondition checks (ip_post.h) read the same options. */
#ifndef IP_CPU_OPTS_H
#define IP_CPU_OPTS_H

#include <stdint.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "ir_expect.h"

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
