/* rt_trace.h -- the interpreter's timeline (BATON_TRACE): every call's
 * kernel writes, per CUDA block, when it started, when each step's wait
 * ended and its work was done, and when it left; the communicator saves
 * the last call's timeline as CSV when it is destroyed. */
#ifndef RT_TRACE_H
#define RT_TRACE_H

#include <stdint.h>

#include "rt_result.h"

struct ir_prog;

typedef struct rt_trace rt_trace;

/* *t = a timeline of `blocks` CUDA blocks on the current device for
 * `rank` of a communicator of nranks ranks (its file's name:
 * rt_param_trace_file), or NULL when BATON_TRACE is empty. */
bt_result rt_trace_open(rt_trace **t, int rank, int nranks, int blocks);

/* The buffer a launch of `blocks` CUDA blocks writes (ip_gargs.trace), or
 * NULL when tracing is off or the launch has more blocks than the buffer
 * (logged once). */
uint64_t *rt_trace_buf(rt_trace *t, int blocks);

/* Notes what the last launch ran, for the file's rows; algo and prog must
 * outlive t (programs go after the timeline); prog (NULL: none) names each
 * step's opcode and where it came from (the script line, else the XML
 * line).  Blocks are
 * lanes x ntbs communication blocks (the interpreter: lane-major; direct
 * programs, `direct`: thread-block-major), then compute blocks, cwidth per
 * compute thread block; irtb names the IR thread block of each block of a
 * lane, then of each compute thread block (NULL: its index). */
void rt_trace_called(rt_trace *t, const char *algo, const struct ir_prog *prog, int blocks, int ntbs, int lanes,
                     int cwidth, int nthreads, const int *irtb, int direct);

/* For a launch that ran no program (rt_trace_called with prog NULL): the
 * names of its steps, steps[0 .. n), which must outlive t. */
void rt_trace_steps(rt_trace *t, const char *const *steps, int n);

/* Writes the last call's timeline to BATON_TRACE.<rank>.csv (after the
 * device is idle), then frees t.  Does nothing for NULL. */
void rt_trace_close(rt_trace *t);

#endif
