/* rt_time.h -- the monotonic clock every stage measures deadlines and
 * durations with (CLOCK_MONOTONIC). */
#ifndef RT_TIME_H
#define RT_TIME_H

#include <stdint.h>

/* Nanoseconds since an arbitrary start, for deadlines. */
int64_t rt_time_ns(void);

/* The same in seconds. */
double rt_time_s(void);

#endif
