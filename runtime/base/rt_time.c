/* rt_time.c -- the monotonic clock (rt_time.h). */
#include "rt_time.h"

#include <time.h>

int64_t rt_time_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double rt_time_s(void) { return (double)rt_time_ns() * 1e-9; }
