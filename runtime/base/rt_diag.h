/* rt_diag.h -- a list of error messages, each naming where and what. */
#ifndef RT_DIAG_H
#define RT_DIAG_H

#include <stddef.h>

typedef struct rt_diag rt_diag;

/* A diag keeps at most `max` messages and counts the rest. */
rt_diag *rt_diag_new(int max);
void rt_diag_free(rt_diag *d);

/* Appends one message (no trailing newline needed).  Thread-safe. */
void rt_diag_add(rt_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Number of messages added, including those over the cap. */
int rt_diag_count(const rt_diag *d);

/* All kept messages, one per line, plus "... and N more" if capped.
 * Valid until the next rt_diag_add or rt_diag_free. */
const char *rt_diag_text(rt_diag *d);

/* Drops every message. */
void rt_diag_clear(rt_diag *d);

/* For a message of `full` characters that vsnprintf cut into buf (cap
 * bytes): ends what buf holds at a word, with "... (N more characters)",
 * so that a cut message says so.  Returns the length buf then has; buf as
 * it is (its length) when nothing was cut. */
int rt_cut_note(char *buf, size_t cap, int full);

#endif
