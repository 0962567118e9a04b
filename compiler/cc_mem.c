/* cc_mem.c -- the compiler's budget: counted allocations and a deadline. */
#include "cc_mem.h"
#include "rt_time.h"
#include "rt_param.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static __thread cc_budget *cur;   /* this thread's budget (cc_mem_enter); NULL: none */

cc_budget *cc_budget_new(void) {
  cc_budget *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  int64_t mb = rt_param_int(RT_PARAM_COMPILE_MAX_MB);
  /* mb MiB; past half of size_t's range (mb << 20 could wrap), that half */
  b->max = mb >= (int64_t)(SIZE_MAX >> 21) ? SIZE_MAX / 2 : (size_t)mb << 20;
  b->timeout_s = (int)rt_param_int(RT_PARAM_COMPILE_TIMEOUT);
  b->deadline = rt_time_s() + b->timeout_s;
  return b;
}

void cc_budget_free(cc_budget *b) {
  if (cur == b) cur = NULL;
  free(b);
}

cc_budget *cc_mem_enter(cc_budget *b) {
  cc_budget *prev = cur;
  cur = b;
  return prev;
}

void cc_mem_leave(cc_budget *prev) { cur = prev; }

int cc_budget_charge(cc_budget *b, size_t n, size_t slack) {
  if (!b) return 1;
  if (n > b->max + slack - b->used || b->used > b->max + slack) { b->over = 1; return 0; }
  b->used += n;
  if (b->used > b->peak) b->peak = b->used;
  return 1;
}

void cc_budget_release(cc_budget *b, size_t n) {
  if (b) b->used = n > b->used ? 0 : b->used - n;
}

void *cc_realloc(void *p, size_t n) {
  if (!n) n = 1;
  cc_budget *b = cur;
  size_t old = p ? malloc_usable_size(p) : 0;
  if (b && n > old && !cc_budget_charge(b, n - old, 0)) return NULL;
  void *q = realloc(p, n);
  if (!b) return q;
  if (!q) {   /* nothing changed; give back what was charged */
    if (n > old) cc_budget_release(b, n - old);
    return NULL;
  }
  size_t now = malloc_usable_size(q);
  /* charged n - old; the allocator's real size replaces n */
  if (n > old) cc_budget_release(b, n - old);
  if (now > old) { b->used += now - old; if (b->used > b->peak) b->peak = b->used; }
  else cc_budget_release(b, old - now);
  return q;
}

void *cc_malloc(size_t n) { return cc_realloc(NULL, n); }

void *cc_calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) return NULL;
  void *p = cc_malloc(total);
  if (p) memset(p, 0, total ? total : 1);
  return p;
}

void cc_free(void *p) {
  if (!p) return;
  if (cur) cc_budget_release(cur, malloc_usable_size(p));
  free(p);
}

int cc_budget_late(const cc_budget *b) { return b && rt_time_s() > b->deadline; }

const char *cc_budget_mem_msg(const cc_budget *b, char *buf, size_t n) {
  snprintf(buf, n, "memory limit reached: the script and the compiler's structures for it need more than %zu MiB "
           "(%s raises it)", b ? b->max >> 20 : 0, rt_param_name(RT_PARAM_COMPILE_MAX_MB));
  return buf;
}

const char *cc_budget_time_msg(const cc_budget *b, char *buf, size_t n) {
  snprintf(buf, n, "time limit reached: compiling the script took more than %d s (%s raises it)",
           b ? b->timeout_s : 0, rt_param_name(RT_PARAM_COMPILE_TIMEOUT));
  return buf;
}
