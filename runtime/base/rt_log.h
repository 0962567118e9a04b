/* rt_log.h -- logging by level and subsystem, configured from the parameter table. */
#ifndef RT_LOG_H
#define RT_LOG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RT_LOG_NONE, RT_LOG_WARN, RT_LOG_INFO, RT_LOG_TRACE } rt_log_level;

/* Subsystems, a bit each, named in BATON_DEBUG_SUBSYS. */
#define RT_SUBSYS_LIST(X) X(IR) X(EXEC) X(COMPILER) X(RUNTIME) X(BOOTSTRAP) X(TOOL) X(NCCL)
typedef enum {
#define X(n) RT_SUB_BIT_##n,
  RT_SUBSYS_LIST(X)
#undef X
} rt_subsys_bit;
#define X(n) static const unsigned RT_SUB_##n = 1u << RT_SUB_BIT_##n;
RT_SUBSYS_LIST(X)
#undef X

/* True when a message of this level and subsystem would be printed.  The
 * first call starts the logger from BATON_DEBUG (else NCCL_DEBUG),
 * BATON_DEBUG_SUBSYS and BATON_DEBUG_FILE: an unknown level (WARN used),
 * an unknown subsystem (ignored) or a log file that cannot be opened
 * (stderr used) is a WARN naming the parameter, printed unless the level
 * is NONE whatever the subsystem filter. */
int rt_log_enabled(rt_log_level lvl, unsigned sub);

/* The CUDA device this thread works on, printed as "[dev]" in its log
 * lines as NCCL prints it; -1 (the default) prints nothing. */
void rt_log_set_dev(int dev);

/* Prints "host:pid:tid [dev] baton LEVEL SUB message" as one write. */
void rt_log(rt_log_level lvl, unsigned sub, const char *file, int line,
            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Text a peer sent (a refusal, its last words), made safe to log: at most
 * len bytes of src into dst (n bytes, 0-terminated), printable ASCII as it
 * is and every other byte (a newline that would forge a log line, a
 * terminal escape) as \xNN.  Returns dst. */
char *rt_log_escape(char *dst, size_t n, const char *src, size_t len);

#define LOG_AT(lvl, sub, ...) do {                                         \
    if (rt_log_enabled(lvl, sub)) rt_log(lvl, sub, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define LOG_WARN(sub, ...)  LOG_AT(RT_LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...)  LOG_AT(RT_LOG_INFO, sub, __VA_ARGS__)
#define LOG_TRACE(sub, ...) LOG_AT(RT_LOG_TRACE, sub, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
