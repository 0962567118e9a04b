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
 * parameter takes, is logged as a WARN naming the parameter, the value
 * and the default, and replaced by the default. */
int64_t rt_param_int(rt_param_id id);
const char *rt_param_str(rt_param_id id);

/* The environment variable's name ("BATON_IR_MAX_MB"), for errors that
 * name the parameter raising a limit. */
const char *rt_param_name(rt_param_id id);

/* Prints the table (name, type, default, current value, doc) to f. */
void rt_param_print(FILE *f);

#ifdef __cplusplus
}
#endif

#endif
