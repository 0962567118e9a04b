/* rt_diag.c -- growable list of error messages. */
#include "rt_diag.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rt_diag {
  pthread_mutex_t mu;
  int max, count, kept;
  char *text;      /* kept messages, '\n'-terminated each */
  size_t len, cap;
  char *view;      /* text plus the "and N more" line */
};

rt_diag *rt_diag_new(int max) {
  rt_diag *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  pthread_mutex_init(&d->mu, NULL);
  d->max = max > 0 ? max : 1;
  return d;
}

void rt_diag_free(rt_diag *d) {
  if (!d) return;
  pthread_mutex_destroy(&d->mu);
  free(d->text);
  free(d->view);
  free(d);
}

void rt_diag_add(rt_diag *d, const char *fmt, ...) {
  if (!d) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n >= (int)sizeof msg) n = sizeof msg - 1;
  pthread_mutex_lock(&d->mu);
  d->count++;
  if (d->kept < d->max) {
    if (d->len + n + 2 > d->cap) {
      size_t cap = (d->cap ? d->cap * 2 : 256) + n + 2;
      char *t = realloc(d->text, cap);
      if (!t) { pthread_mutex_unlock(&d->mu); return; }
      d->text = t;
      d->cap = cap;
    }
    memcpy(d->text + d->len, msg, n);
    d->len += n;
    d->text[d->len++] = '\n';
    d->text[d->len] = 0;
    d->kept++;
  }
  pthread_mutex_unlock(&d->mu);
}

int rt_diag_count(const rt_diag *d) { return d ? d->count : 0; }

const char *rt_diag_text(rt_diag *d) {
  if (!d || !d->len) return "";
  free(d->view);
  size_t n = d->len + 64;
  d->view = malloc(n);
  if (!d->view) return d->text;
  if (d->count > d->kept)
    snprintf(d->view, n, "%s... and %d more\n", d->text, d->count - d->kept);
  else
    snprintf(d->view, n, "%s", d->text);
  return d->view;
}

void rt_diag_clear(rt_diag *d) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->count = d->kept = 0;
  d->len = 0;
  if (d->text) d->text[0] = 0;
  pthread_mutex_unlock(&d->mu);
}
