/* rt_param.c -- reads the environment parameter table once. */
#include "rt_param.h"
#include "rt_log.h"

#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { T_INT, T_STR };
#define INT T_INT
#define STR T_STR

static const struct {
  const char *env;
  int type;
  const char *def;
  int64_t min, max;
  const char *doc;
} params[RT_PARAM_COUNT] = {
#define X(id, env, type, def, lo, hi, doc) { env, type, def, lo, hi, doc },
#include "rt_param.def"
#undef X
};
#undef INT
#undef STR

static struct { int64_t i; const char *s; int set; } values[RT_PARAM_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || end == s || *end) return 0;
  *out = v;
  return 1;
}

static void load(void) {
  for (int i = 0; i < RT_PARAM_COUNT; i++) {
    const char *e = getenv(params[i].env);
    values[i].set = e != NULL && *e;
    const char *v = values[i].set ? e : params[i].def;
    values[i].s = v;
    if (params[i].type == T_INT &&
        (!parse_int(v, &values[i].i) || values[i].i < params[i].min || values[i].i > params[i].max)) {
      parse_int(params[i].def, &values[i].i);
      values[i].set = -1;
    }
  }
}

/* Logging is configured from the table, so non-default values are reported
 * only after both are ready; rt_log calls this lazily too. */
static void ensure(void) { pthread_once(&once, load); }

static pthread_once_t reported = PTHREAD_ONCE_INIT;
static void report(void) {
  for (int i = 0; i < RT_PARAM_COUNT; i++) {
    if (values[i].set > 0)
      LOG_INFO(RT_SUB_TOOL, "%s set by environment to %s", params[i].env, values[i].s);
    else if (values[i].set < 0)
      LOG_WARN(RT_SUB_TOOL, "%s=%s is not an integer in %lld..%lld; using default %s",
               params[i].env, getenv(params[i].env), (long long)params[i].min, (long long)params[i].max,
               params[i].def);
  }
}

/* Parameters the logger reads while it starts: reading them must not log
 * (the report of non-default values would wait for the logger). */
static int configures_logging(rt_param_id id) {
  return id == RT_PARAM_DEBUG || id == RT_PARAM_NCCL_DEBUG || id == RT_PARAM_DEBUG_SUBSYS ||
         id == RT_PARAM_DEBUG_FILE;
}

int64_t rt_param_int(rt_param_id id) {
  ensure();
  if (!configures_logging(id)) pthread_once(&reported, report);
  return values[id].i;
}

const char *rt_param_str(rt_param_id id) {
  ensure();
  if (!configures_logging(id)) pthread_once(&reported, report);
  return values[id].s;
}

const char *rt_param_name(rt_param_id id) { return params[id].env; }

void rt_param_print(FILE *f) {
  ensure();
  fprintf(f, "%-20s %-4s %-8s %-10s %-18s %s\n", "NAME", "TYPE", "DEFAULT", "VALUE", "RANGE", "DESCRIPTION");
  for (int i = 0; i < RT_PARAM_COUNT; i++) {
    char range[48] = "";
    if (params[i].type == T_INT)
      snprintf(range, sizeof range, "%lld..%lld", (long long)params[i].min, (long long)params[i].max);
    fprintf(f, "%-20s %-4s %-8s %-10s %-18s %s\n", params[i].env,
            params[i].type == T_INT ? "int" : "str",
            *params[i].def ? params[i].def : "\"\"",
            *values[i].s ? values[i].s : "\"\"", range, params[i].doc);
  }
}
