/* rt_regset.c -- a communicator's registered windows as a list
 * (rt_regset.h). */
#include "rt_regset.h"

#include <stdlib.h>

#include "tp_cuda.h"

const baton_window *rt_reg_find(const baton_window *list, const void *p, size_t bytes) {
  const char *q = p;
  for (const baton_window *w = list; w; w = w->next)
    if (q >= w->base && bytes <= w->bytes && (size_t)(q - w->base) <= w->bytes - bytes) return w;
  return NULL;
}

int rt_reg_live(const baton_window *w) {
  uint64_t base;
  size_t bytes;
  unsigned long long id = 0;
  return tp_cuda_alloc_of(w->base, &base, &bytes, &id) && id == w->alloc;
}

void rt_regs_free(baton_window **list) {
  while (*list) {
    baton_window *w = *list;
    *list = w->next;
    free(w);
  }
}
