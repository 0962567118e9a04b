/* cc_entry.c -- the compiler as a loadable library (libbaton_compile): the one entry that
 * baton_compile (runtime/rt_tools.c) calls in process when the library and the system's
 * shared Lua load, instead of running the baton program. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cc_compile.h"
#include "cc_entry.h"
#include "ir_write.h"

/* Appends the formatted text to err (errlen bytes in all), cut to fit. */
static void add_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  size_t n = strlen(err);
  if (n + 1 >= errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err + n, errlen - n, fmt, ap);
  va_end(ap);
}

/* cc_entry.h: `baton compile -q SCRIPT --param ... -o OUT`, in process. */
int cc_entry_compile(const char *script, const char *const *params, int nparams, const char *out_path, char *err,
                     size_t errlen) {
  if (err && errlen) *err = 0;
  if (!script || !out_path || nparams < 0 || (nparams && !params)) {
    add_err(err, errlen, "baton_compile: script, out_path or params missing");
    return BT_ERR_INVALID;
  }
  rt_diag *d = rt_diag_new(20);
  if (!d) return BT_ERR_NOMEM;
  ir_prog *p = NULL;
  cc_compile_report rep;
  bt_result r = cc_compile_file(script, params, nparams, NULL, &p, &rep, d);
  if (r) {
    if (*rep.what) add_err(err, errlen, "%s:\n", rep.what);
    add_err(err, errlen, "%s", rt_diag_text(d));
  } else {
    errno = 0;
    if (ir_write_file(p, out_path)) {
      add_err(err, errlen, "baton compile: cannot write %s%s%s", out_path, errno ? ": " : "", errno ? strerror(errno) : "");
      r = BT_ERR_SYSTEM;
    }
  }
  ir_prog_free(p);
  rt_diag_free(d);
  return r;
}
