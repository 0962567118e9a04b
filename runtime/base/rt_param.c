/* rt_param.c -- reads the environment parameter table once.  It logs
 * nothing: the logger, configured from the table, reports what was set
 * and what was refused when it starts (rt_param_source). */
#include "rt_param.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* String parameters that take one of a few words (case ignored) or
 * nothing: any other value is replaced by the default, with a WARN. */
static const struct {
  rt_param_id id;
  const char *words;        /* the words, ", "-separated, for the message too */
  const char *by_default;   /* what the default (empty) does */
} choices[] = {
  {RT_PARAM_PROTO, "Simple", "each program runs its own protocol"},
  {RT_PARAM_FGEMV_UNROLL, "1, 2, 4, 8", "chosen by the shape"},
};
enum { NCHOICES = sizeof choices / sizeof choices[0] };

/* Why a value from the environment was refused (its default used). */
enum { V_OK, V_NOT_INT, V_RANGE, V_WORD };

static struct { int64_t i; const char *s; int set, bad; } values[RT_PARAM_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int parse_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);   /* decimal only: "010" is ten, not octal eight */
  if (errno || end == s || *end) return 0;
  *out = v;
  return 1;
}

/* 1 when s is one of the ", "-separated words (case ignored). */
static int is_word(const char *s, const char *words) {
  size_t n = strlen(s);
  for (const char *w = words; *w;) {
    size_t k = strcspn(w, ",");
    if (k == n && !strncasecmp(w, s, n)) return 1;
    w += k;
    while (*w == ',' || *w == ' ') w++;
  }
  return 0;
}

/* Why value v of parameter i is refused, or V_OK (*out: an INT's value). */
static int check_value(int i, const char *v, int64_t *out) {
  if (params[i].type == T_INT) {
    if (!parse_int(v, out)) return V_NOT_INT;
    return *out < params[i].min || *out > params[i].max ? V_RANGE : V_OK;
  }
  for (int c = 0; c < NCHOICES; c++)
    if (choices[c].id == (rt_param_id)i && *v && !is_word(v, choices[c].words)) return V_WORD;
  return V_OK;
}

static void load(void) {
  for (int i = 0; i < RT_PARAM_COUNT; i++) {
    const char *e = getenv(params[i].env);
    values[i].set = e != NULL && *e;
    const char *v = values[i].set ? e : params[i].def;
    values[i].s = v;
    values[i].bad = check_value(i, v, &values[i].i);
    if (values[i].bad) {   /* the default instead */
      values[i].s = params[i].def;
      check_value(i, params[i].def, &values[i].i);
      values[i].set = -1;
    }
  }
}

static void ensure(void) { pthread_once(&once, load); }

int rt_param_source(rt_param_id id, char *why, size_t n) {
  ensure();
  if (n) why[0] = 0;
  const int i = id;
  if (values[i].set >= 0) return values[i].set;
  if (values[i].bad == V_WORD) {
    const char *words = "", *by_default = "";
    for (int c = 0; c < NCHOICES; c++)
      if (choices[c].id == id) { words = choices[c].words; by_default = choices[c].by_default; }
    snprintf(why, n, "is not one of: %s, or empty; using default (empty: %s)", words, by_default);
  } else {
    snprintf(why, n, "is %s %lld..%lld; using default %s", values[i].bad == V_RANGE ? "out of its range" : "not an integer in",
             (long long)params[i].min, (long long)params[i].max, params[i].def);
  }
  return -1;
}

/* The first read of a parameter that does not configure logging starts
 * the logger (its hook), which reports the table; the logger's own reads
 * while it starts must not call it back. */
static void (*first_read)(void);
static pthread_once_t first_once = PTHREAD_ONCE_INIT;
static void call_first_read(void) { if (first_read) first_read(); }

void rt_param_on_first_read(void (*fn)(void)) { first_read = fn; }

static int configures_logging(rt_param_id id) {
  return id == RT_PARAM_DEBUG || id == RT_PARAM_NCCL_DEBUG || id == RT_PARAM_DEBUG_SUBSYS ||
         id == RT_PARAM_DEBUG_FILE;
}

int64_t rt_param_int(rt_param_id id) {
  ensure();
  if (!configures_logging(id)) pthread_once(&first_once, call_first_read);
  return values[id].i;
}

const char *rt_param_str(rt_param_id id) {
  ensure();
  if (!configures_logging(id)) pthread_once(&first_once, call_first_read);
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
    char value[96];   /* a refused value shows beside the default used instead */
    if (values[i].set < 0) snprintf(value, sizeof value, "%s (refused: '%.40s')", *values[i].s ? values[i].s : "\"\"",
                                    getenv(params[i].env) ? getenv(params[i].env) : "");
    else snprintf(value, sizeof value, "%s", *values[i].s ? values[i].s : "\"\"");
    fprintf(f, "%-20s %-4s %-8s %-10s %-18s %s\n", params[i].env,
            params[i].type == T_INT ? "int" : "str",
            *params[i].def ? params[i].def : "\"\"", value, range, params[i].doc);
  }
}

int rt_param_trace_file(char *dst, size_t len, int nranks, int rank, const char *suffix) {
  const char *p = rt_param_str(RT_PARAM_TRACE);
  size_t at = 0;
  char num[24];
  for (; *p; p++) {
    const char *add = p;
    size_t n = 1;
    if (p[0] == '%' && p[1] == 'n') {
      snprintf(num, sizeof num, "%d", nranks);
      add = num;
      n = strlen(num);
      p++;
    }
    if (at + n >= len) goto too_long;
    memcpy(dst + at, add, n);
    at += n;
  }
  int k = snprintf(dst + at, len - at, ".%d%s", rank, suffix);
  if (k < 0 || (size_t)k >= len - at) goto too_long;
  return 0;
too_long:
  if (len) dst[0] = 0;
  return -1;
}
