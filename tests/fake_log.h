/* fake_log.h -- the call log of the test doubles (fake_nccl.c,
 * fake_baton.c): rec() appends one line per call; each double includes
 * this once and returns log_buf from its own accessor. */
#ifndef FAKE_LOG_H
#define FAKE_LOG_H

#include <stdarg.h>
#include <stdio.h>

static char log_buf[1 << 16];
static size_t log_len;

static void rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rec(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(log_buf + log_len, sizeof log_buf - log_len - 1, fmt, ap);
  va_end(ap);
  if (n > 0 && log_len + n + 1 < sizeof log_buf) {
    log_len += n;
    log_buf[log_len++] = '\n';
    log_buf[log_len] = 0;
  }
}

static void log_clear(void) {
  log_len = 0;
  log_buf[0] = 0;
}

#endif
