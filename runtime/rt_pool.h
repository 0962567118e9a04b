/* rt_pool.h -- host worker threads, one per key (a CUDA device), that run
 * jobs handed to them: a group's launches on several GPUs go out in
 * parallel instead of one after the other (docs/RUNTIME.md, "Groups"). */
#ifndef RT_POOL_H
#define RT_POOL_H

#include "rt_result.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_POOL_KEYS 64   /* keys 0..RT_POOL_KEYS-1 get a worker; others run on the caller */

typedef struct rt_pool_job {
  int key;                      /* jobs with one key run in array order on one thread */
  bt_result (*fn)(void *arg);
  void *arg;
  bt_result res;                /* what fn returned; set by rt_pool_run */
} rt_pool_job;

/* Runs jobs[0..n): the jobs of each key in array order, different keys
 * at once, each key on its own worker thread except the key of the last
 * job, whose jobs the calling thread runs.  Returns when every job has
 * run: the first failure in array order, else BT_OK.  With `parallel` 0,
 * with one key, while another thread is using the pool, or for keys
 * outside 0..RT_POOL_KEYS-1, the calling thread runs everything in array
 * order; the jobs of a key whose worker cannot be started run on the
 * calling thread too.  Workers wait `spin_us` microseconds spinning for
 * the next batch, then sleep.  Workers live until the process exits; a
 * forked child starts with none. */
bt_result rt_pool_run(rt_pool_job *jobs, int n, int parallel, int spin_us);

/* How many worker threads exist (for tests). */
int rt_pool_workers(void);

#ifdef __cplusplus
}
#endif

#endif
