/* rt_result.h -- the one result type of baton and the CHECK macros that carry it. */
#ifndef RT_RESULT_H
#define RT_RESULT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Every fallible function in baton returns a bt_result.  BT_OK is zero so
 * that "if (r) ..." reads naturally. */
typedef enum bt_result {
  BT_OK = 0,
  BT_ERR_INVALID,     /* bad input: a file, a script, an argument */
  BT_ERR_NOMEM,       /* allocation failed */
  BT_ERR_SYSTEM,      /* an OS call failed (errno is logged) */
  BT_ERR_DEADLOCK,    /* a program stopped making progress */
  BT_ERR_MISMATCH,    /* a program ran but its result is wrong */
  BT_ERR_UNSUPPORTED, /* valid, but not something this build can do */
  BT_ERR_CUDA,        /* a CUDA call failed */
  BT_ERR_INTERNAL,    /* a bug in baton */
  BT_ERR_TIMEOUT,     /* a peer or a GPU did not answer in time */
  BT_ERR_ABORTED,     /* the communicator was aborted (by the user or an earlier error) */
  BT_ERR_REMOTE       /* a peer went away: its connection closed, broke or misbehaved */
} bt_result;

const char *bt_result_str(bt_result r);

/* Logs "file:line: call failed: <result>" with a backtrace at TRACE level.
 * Used by the CHECK macros only. */
void rt_check_failed(const char *file, int line, const char *expr, bt_result r);

/* CHECK(call): return the failure to the caller. */
#define CHECK(call) do {                                                   \
    bt_result rt_r_ = (call);                                              \
    if (rt_r_ != BT_OK) {                                                  \
      rt_check_failed(__FILE__, __LINE__, #call, rt_r_);                   \
      return rt_r_;                                                        \
    }                                                                      \
  } while (0)

/* CHECK_GOTO(call, res, label): store the failure in res and jump to the
 * clean-up label.  Use where the function holds resources. */
#define CHECK_GOTO(call, res, label) do {                                  \
    (res) = (call);                                                        \
    if ((res) != BT_OK) {                                                  \
      rt_check_failed(__FILE__, __LINE__, #call, (res));                   \
      goto label;                                                          \
    }                                                                      \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
