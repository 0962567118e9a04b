/* cc_mem.h -- the compiler's one budget: memory (the Lua heap, the trace,
 * lowering and scheduling together) and wall time, for one script. */
#ifndef CC_MEM_H
#define CC_MEM_H

#include <stddef.h>

typedef struct cc_budget {
  size_t used, max;         /* bytes counted now, the limit (BATON_COMPILE_MAX_MB) */
  size_t peak;              /* the most counted at once */
  int over;                 /* an allocation was refused because of the limit */
  double deadline;          /* CLOCK_MONOTONIC seconds when the time is up (BATON_COMPILE_TIMEOUT) */
  int timeout_s;
} cc_budget;

/* A budget with the limits of the parameter table: BATON_COMPILE_MAX_MB and
 * BATON_COMPILE_TIMEOUT, the clock starting now.  NULL when out of memory. */
cc_budget *cc_budget_new(void);
void cc_budget_free(cc_budget *b);

/* Makes b the budget that cc_malloc & co. of this thread count against
 * (NULL: none); returns the previous one, for cc_mem_leave. */
cc_budget *cc_mem_enter(cc_budget *b);
void cc_mem_leave(cc_budget *prev);

/* malloc, calloc, realloc and free counted against the current budget:
 * NULL (and b->over set) when the allocation would take it past its
 * limit.  cc_free must only see what cc_malloc & co. returned while the
 * same budget was current (or none). */
void *cc_malloc(size_t n);
void *cc_calloc(size_t n, size_t size);
void *cc_realloc(void *p, size_t n);
void cc_free(void *p);

/* Counts n more bytes (Lua's heap: its allocator knows the sizes) against
 * b; 0 when that would pass the limit plus `slack` (then nothing is
 * counted and b->over is set).  cc_budget_release counts n fewer (never
 * below 0).  A NULL b counts nothing and refuses nothing. */
int cc_budget_charge(cc_budget *b, size_t n, size_t slack);
void cc_budget_release(cc_budget *b, size_t n);

/* 1 when b's time is up. */
int cc_budget_late(const cc_budget *b);

/* b's "memory limit reached ..." / "time limit reached ..." sentences (with the parameter that raises the limit), in buf. */
const char *cc_budget_mem_msg(const cc_budget *b, char *buf, size_t n);
const char *cc_budget_time_msg(const cc_budget *b, char *buf, size_t n);

#endif
