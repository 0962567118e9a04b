/* rt_log.c -- log sink, level and subsystem filter; the result type's strings. */
#include "rt_log.h"
#include "rt_param.h"
#include "rt_result.h"

#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static rt_log_level level;
static unsigned subsys;
static FILE *sink;
static char host[64];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Thread_local int log_dev = -1;

static const char *subsys_names[] = {
#define X(n) #n,
  RT_SUBSYS_LIST(X)
#undef X
};
static const int nsubsys = sizeof subsys_names / sizeof subsys_names[0];

/* Problems with the logging parameters, found while the logger starts and
 * printed as WARNs once it has (init cannot log through LOG_WARN). */
enum { MAX_CONFIG_WARNINGS = 4 };
static char config_warning[MAX_CONFIG_WARNINGS][320];
static int nconfig_warnings;

static void config_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void config_warn(const char *fmt, ...) {
  if (nconfig_warnings == MAX_CONFIG_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(config_warning[nconfig_warnings++], sizeof config_warning[0], fmt, ap);
  va_end(ap);
}

/* The mask of BATON_DEBUG_SUBSYS's spec: names separated by commas (case
 * ignored), ALL, a leading ^ inverting; an unknown name is ignored with a
 * warning that lists the known ones. */
static unsigned parse_subsys(const char *spec) {
  int invert = spec[0] == '^';
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec + invert);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int known = !strcasecmp(t, "ALL");
    if (known) mask = ~0u;
    for (int i = 0; i < nsubsys; i++)
      if (!strcasecmp(t, subsys_names[i])) { mask |= 1u << i; known = 1; }
    if (!known) {
      char list[128] = "";
      for (int i = 0; i < nsubsys; i++) {
        strcat(list, subsys_names[i]);
        strcat(list, ", ");
      }
      config_warn("%s=%s: unknown subsystem '%.40s' (known: %sALL; a leading ^ excludes); ignored",
                  rt_param_name(RT_PARAM_DEBUG_SUBSYS), spec, t, list);
    }
  }
  return invert ? ~mask : mask;
}

/* The level BATON_DEBUG (or NCCL_DEBUG, `nccl` 1) names; an unknown name is
 * WARN, with a warning. */
static rt_log_level parse_level(const char *l, int nccl) {
  static const struct { const char *name; rt_log_level lvl; } names[] = {
    {"NONE", RT_LOG_NONE}, {"WARN", RT_LOG_WARN}, {"INFO", RT_LOG_INFO}, {"TRACE", RT_LOG_TRACE},
    {"VERSION", RT_LOG_WARN}, {"ABORT", RT_LOG_WARN}};   /* ABORT: NCCL_DEBUG's only */
  int n = sizeof names / sizeof names[0] - !nccl;
  for (int i = 0; i < n; i++)
    if (!strcasecmp(l, names[i].name)) return names[i].lvl;
  config_warn("%s=%s is not one of NONE, WARN, INFO, TRACE, VERSION%s; using WARN",
              rt_param_name(nccl ? RT_PARAM_NCCL_DEBUG : RT_PARAM_DEBUG), l, nccl ? ", ABORT" : "");
  return RT_LOG_WARN;
}

/* Opens BATON_DEBUG_FILE with %h and %p expanded. */
static FILE *open_sink(const char *pattern) {
  if (!*pattern) return stderr;
  char path[512];
  size_t n = 0;
  for (const char *p = pattern; *p && n + 64 < sizeof path; p++) {
    if (p[0] == '%' && p[1] == 'h') { n += snprintf(path + n, sizeof path - n, "%s", host); p++; }
    else if (p[0] == '%' && p[1] == 'p') { n += snprintf(path + n, sizeof path - n, "%d", (int)getpid()); p++; }
    else path[n++] = *p;
  }
  path[n] = 0;
  FILE *f = fopen(path, "w");
  if (!f)
    config_warn("%s=%s: cannot open %s: %s; logging to standard error", rt_param_name(RT_PARAM_DEBUG_FILE),
                pattern, path, strerror(errno));
  return f ? f : stderr;
}

static void init(void) {
  gethostname(host, sizeof host - 1);
  const char *l = rt_param_str(RT_PARAM_DEBUG);
  int nccl = !*l;
  if (nccl) l = rt_param_str(RT_PARAM_NCCL_DEBUG);   /* VERSION, ABORT: WARN */
  level = *l ? parse_level(l, nccl) : RT_LOG_WARN;
  subsys = parse_subsys(rt_param_str(RT_PARAM_DEBUG_SUBSYS));
  sink = open_sink(rt_param_str(RT_PARAM_DEBUG_FILE));
  /* whatever subsystems the filter lets through: it may be the mistake */
  for (int i = 0; i < nconfig_warnings && level >= RT_LOG_WARN; i++)
    rt_log(RT_LOG_WARN, RT_SUB_TOOL, __FILE__, __LINE__, "%s", config_warning[i]);
  /* then every parameter the environment set, and every value refused */
  for (int i = 0; i < RT_PARAM_COUNT; i++) {
    char why[200];
    const int src = rt_param_source((rt_param_id)i, why, sizeof why);
    const char *env = rt_param_name((rt_param_id)i);
    if (src > 0 && level >= RT_LOG_INFO && (subsys & RT_SUB_TOOL))
      rt_log(RT_LOG_INFO, RT_SUB_TOOL, __FILE__, __LINE__, "%s set by environment to %s", env, getenv(env));
    else if (src < 0 && level >= RT_LOG_WARN && (subsys & RT_SUB_TOOL))
      rt_log(RT_LOG_WARN, RT_SUB_TOOL, __FILE__, __LINE__, "%s=%s %s", env, getenv(env) ? getenv(env) : "", why);
  }
}

int rt_log_enabled(rt_log_level lvl, unsigned sub) {
  pthread_once(&once, init);
  return lvl <= level && (sub & subsys);
}

/* The logger starts, and reports the parameter table, at the first read of
 * a parameter (rt_param_on_first_read) if nothing logged before; the hook
 * is set when the library loads (it reads no environment then). */
static void start(void) { pthread_once(&once, init); }
__attribute__((constructor)) static void hook(void) { rt_param_on_first_read(start); }

void rt_log_set_dev(int dev) { log_dev = dev; }

void rt_log(rt_log_level lvl, unsigned sub, const char *file, int line,
            const char *fmt, ...) {
  static const char *lvlname[] = {"NONE", "WARN", "INFO", "TRACE"};
  const char *subname = "?";
  for (int i = 0; i < nsubsys; i++)
    if (sub == 1u << i) subname = subsys_names[i];
  char msg[2048];
  char dev[16] = "";
  if (log_dev >= 0) snprintf(dev, sizeof dev, " [%d]", log_dev);
  int n = snprintf(msg, sizeof msg, "%s:%d:%ld%s baton %s %s ", host, (int)getpid(),
                   (long)syscall(SYS_gettid), dev, lvlname[lvl], subname);
  if (lvl == RT_LOG_TRACE)
    n += snprintf(msg + n, sizeof msg - n, "%s:%d ", file, line);
  va_list ap;
  va_start(ap, fmt);
  if (n < (int)sizeof msg) n += vsnprintf(msg + n, sizeof msg - n, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof msg - 2) n = sizeof msg - 2;
  msg[n++] = '\n';
  fwrite(msg, 1, n, sink);
  fflush(sink);
}

const char *bt_result_str(bt_result r) {
  switch (r) {
  case BT_OK: return "ok";
  case BT_ERR_INVALID: return "invalid input";
  case BT_ERR_NOMEM: return "out of memory";
  case BT_ERR_SYSTEM: return "system error";
  case BT_ERR_DEADLOCK: return "deadlock";
  case BT_ERR_MISMATCH: return "wrong result";
  case BT_ERR_UNSUPPORTED: return "unsupported";
  case BT_ERR_CUDA: return "CUDA error";
  case BT_ERR_INTERNAL: return "internal error";
  case BT_ERR_TIMEOUT: return "timed out";
  case BT_ERR_ABORTED: return "aborted";
  case BT_ERR_REMOTE: return "remote peer lost";
  }
  return "unknown result";
}

void rt_check_failed(const char *file, int line, const char *expr, bt_result r) {
  if (!rt_log_enabled(RT_LOG_TRACE, ~0u)) return;
  rt_log(RT_LOG_TRACE, RT_SUB_TOOL, file, line, "%s failed: %s", expr, bt_result_str(r));
  void *frames[32];
  int n = backtrace(frames, 32);
  backtrace_symbols_fd(frames, n, fileno(sink));
}

char *rt_log_escape(char *dst, size_t n, const char *src, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t at = 0;
  if (!n) return dst;
  for (size_t i = 0; i < len && src[i]; i++) {
    unsigned char c = (unsigned char)src[i];
    int plain = c >= 0x20 && c < 0x7f && c != '\\';
    if (at + (plain ? 1 : 4) >= n) break;
    if (plain) {
      dst[at++] = (char)c;
    } else {
      dst[at++] = '\\';
      dst[at++] = 'x';
      dst[at++] = hex[c >> 4];
      dst[at++] = hex[c & 15];
    }
  }
  dst[at] = 0;
  return dst;
}
