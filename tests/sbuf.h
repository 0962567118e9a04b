/* sbuf.h -- a growing string, for tests that generate programs. */
#ifndef TESTS_SBUF_H
#define TESTS_SBUF_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Appends printf-formatted text; bails out (TAP) when out of memory. */
typedef struct sbuf { char *s; size_t n, cap; } sbuf;
static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + k + 1 > b->cap) {
    b->cap = (b->n + k + 1) * 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s) { printf("Bail out! out of memory\n"); exit(1); }
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, k + 1, fmt, ap);
  va_end(ap);
  b->n += k;
}

#endif
