/* rt_param.h -- environment parameters: one table, each read once. */
#ifndef RT_PARAM_H
#define RT_PARAM_H
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rt_param_id {
#define X(id, env, type, def, lo, hi, doc) RT_PARAM_##id,
#include "rt_param.def"
#undef X
  RT_PARAM_COUNT
} rt_param_id;

/* Value of an integer / string parameter.  The environment is read on
 * first use of any parameter; a value that is not an integer, or out of
 * the parameter's range, or (BATON_PROTO) not one of the words the
 * parameter takes, is replaced by the default (the logger WARNs of it
 * when it starts: rt_param_source). */
int64_t rt_param_int(rt_param_id id);
const char *rt_param_str(rt_param_id id);

/* fn runs once, at the first read of a parameter that does not configure
 * logging: the logger registers itself (rt_log.c) so that what the
 * environment set or got refused is reported however a process starts,
 * without this table depending on the logger. */
void rt_param_on_first_read(void (*fn)(void));

/* How parameter id got its value: 0 its default, 1 the environment, -1
 * the environment's value was refused and the default used, why (n bytes)
 * then saying so ("is out of its range 1..16; using default 2"). */
int rt_param_source(rt_param_id id, char *why, size_t n);

/* The environment variable's name ("BATON_IR_MAX_MB"), for errors that
 * name the parameter raising a limit. */
const char *rt_param_name(rt_param_id id);

/* Where BATON_TRACE puts rank `rank`'s file of a communicator of nranks
 * ranks, into dst (len bytes): its value with every "%n" replaced by
 * nranks, then ".RANK" and suffix (".csv", ".net.csv").  0, or -1 when
 * it does not fit (dst then holds "").  An empty BATON_TRACE gives
 * ".RANK<suffix>": callers look at it first. */
int rt_param_trace_file(char *dst, size_t len, int nranks, int rank, const char *suffix);

/* Prints the table (name, type, default, current value, doc) to f. */
void rt_param_print(FILE *f);

#ifdef __cplusplus
}
#endif

#endif
