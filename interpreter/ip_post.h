/* ip_post.h -- test data and postconditions for the CPU executor. */
#ifndef IP_POST_H
#define IP_POST_H

#include "ip_cpu.h"
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
} post_bufs;

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
 * o->expect) and checks that an out-of-place run left its input alone.
 * *checked counts the elements compared. */
bt_result post_check(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, int64_t *checked, rt_diag *diag);

void post_free(post_bufs *b, const ir_prog *p);

#endif
