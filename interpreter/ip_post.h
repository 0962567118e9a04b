/* ip_post.h -- test data and postconditions for the CPU executor. */
#ifndef IP_POST_H
#define IP_POST_H

#include "ip_cpu_opts.h"
#include "ir_geom.h"

/* The buffers of one verification run.  prog_in/prog_out are what the
 * program's "i" and "o" mean on each rank (they alias when in place). */
typedef struct post_bufs {
  unsigned char **user_in;   /* the caller's send buffers (out of place) */
  unsigned char **user_out;  /* the caller's receive buffers, or the in-place span */
  unsigned char **span;      /* aliased i/o span of an out-of-place call, or NULL */
  unsigned char **ref_in;    /* a copy of every rank's input, taken before the run */
  unsigned char **prog_in, **prog_out;
  int inplace_call;
  int check_one, check_rank; /* post_check: only rank check_rank when check_one (a process of one rank) */
  /* Fused programs: the input is computed.  Per rank: the operands, and
   * per input element the sum of its terms' magnitudes (the tolerance's
   * scale); ref_in holds the exact values rounded to the type. */
  int fused;
  ip_opnd (*opnd)[IR_MAX_OPERANDS];
  double **ref_mag;
  /* Sources runs (ip_cpu_opts.sources), set before post_setup: elements
   * are records of 1 + src_words 64-bit words (post_src_reduce) whose rank
   * sets hold ranks src_base .. src_base + 64 * src_words - 1. */
  int src_words, src_base;
} post_bufs;

/* Bytes of one element of a run: the type's, or a sources run's record. */
int post_esize(const post_bufs *b, const ip_cpu_opts *o);

/* The rank-set words a sources run of p uses (`want` when 1 ..
 * IP_CPU_SRC_WORDS, else as many as its ranks need up to that; 1 when no
 * step reduces, since a record then never holds two ranks) and in how
 * many windows of ranks it must run (*passes). */
int post_src_words(const ir_prog *p, int want, int *passes);

/* dst[i] = a[i] combined with b[i] for n records of 1 + words words (see
 * ip_cpu_opts.sources); dst may be a or b. */
void post_src_reduce(int words, void *dst, const void *a, const void *b, size_t n);

/* Allocates and fills every rank's buffers with a pattern that keeps
 * sums, products, minima and maxima exact in every type.  For a fused
 * program: the operands with test data, the input with NaN (computed
 * before it is read, or the result shows it), ref_in with the values the
 * compute steps must produce. */
bt_result post_setup(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, rt_diag *diag);

/* After the run: copies results out of a temporary span and divides by
 * the number of ranks for avg. */
void post_finish(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g);

/* Compares every output element against the collective's definition (or
 * o->expect) and checks that an out-of-place run left its input alone;
 * a sources run compares records, byte for byte.  *checked counts the
 * elements compared. */
bt_result post_check(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, int64_t *checked, rt_diag *diag);

void post_free(post_bufs *b, const ir_prog *p);

#endif
