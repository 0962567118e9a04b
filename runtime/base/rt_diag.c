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

/* A message longer than this is cut (a path of PATH_MAX bytes and its
 * reason fit whole). */
#define RT_DIAG_MAX_MSG 16384

int rt_cut_note(char *buf, size_t cap, int full) {
  int len = (int)strnlen(buf, cap ? cap - 1 : 0);
  if (full <= len || cap < 64) return len;
  int keep = (int)cap - 1 - 40;                       /* room for the note */
  for (int k = keep; k > keep - 32 && k > 0; k--)     /* at a word, when one is near */
    if (buf[k - 1] == ' ') { keep = k - 1; break; }
  return keep + snprintf(buf + keep, cap - (size_t)keep, "... (%d more characters)", full - keep);
}

void rt_diag_add(rt_diag *d, const char *fmt, ...) {
  if (!d) return;
  char small[1024], *msg = small, *big = NULL;
  va_list ap, aq;
  va_start(ap, fmt);
  va_copy(aq, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof small) {   /* too long for the stack: whole, up to the limit, not cut at 1 KiB */
    const int full = n;
    size_t want = n < RT_DIAG_MAX_MSG ? (size_t)n + 1 : RT_DIAG_MAX_MSG;
    if ((big = malloc(want))) {
      vsnprintf(big, want, fmt, aq);
      msg = big;
      n = rt_cut_note(big, want, full);
    } else {
      n = rt_cut_note(small, sizeof small, full);
    }
  }
  va_end(aq);
  if (n < 0) return;
  pthread_mutex_lock(&d->mu);
  d->count++;
  if (d->kept < d->max) {
    if (d->len + n + 2 > d->cap) {
      size_t cap = (d->cap ? d->cap * 2 : 256) + n + 2;
      char *t = realloc(d->text, cap);
      if (!t) { pthread_mutex_unlock(&d->mu); free(big); return; }
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
  free(big);
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
