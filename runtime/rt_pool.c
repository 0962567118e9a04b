/* rt_pool.c -- host worker threads, one per key (a CUDA device), that run
 * the jobs of one batch at once: what lets a group's launches on several
 * GPUs go out in parallel. */
#define _GNU_SOURCE
#include "rt_pool.h"
#include "rt_time.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rt_log.h"

/* One worker.  The poster writes jobs/n/spin_us, then moves `posted`
 * (release); the worker runs its key's jobs and moves `done` to match.
 * `sleeping` and `posted` are seq_cst on both sides, so either the worker
 * sees the new batch before it waits or the poster sees it asleep and
 * signals under the mutex the worker waits with. */
typedef struct worker {
  pthread_t th;
  int key;
  rt_pool_job *jobs;
  int n, spin_us;
  _Atomic uint64_t posted, done;
  _Atomic int sleeping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} worker;

static worker *workers[RT_POOL_KEYS];
static atomic_int nworkers;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* held by the thread using the workers */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void run_key(rt_pool_job *jobs, int n, int key) {
  for (int i = 0; i < n; i++)
    if (jobs[i].key == key) jobs[i].res = jobs[i].fn(jobs[i].arg);
}

static void *worker_main(void *p) {
  worker *w = p;
  char name[16];
  snprintf(name, sizeof name, "baton-launch%d", w->key);
  pthread_setname_np(pthread_self(), name);
  uint64_t seen = 0;
  for (;;) {
    /* Spin for the next batch (back-to-back calls come within
     * microseconds), then sleep until one is posted. */
    uint64_t t0 = (uint64_t)rt_time_ns(), limit = (uint64_t)w->spin_us * 1000u;
    for (unsigned spins = 0; atomic_load_explicit(&w->posted, memory_order_acquire) == seen; spins++) {
      if ((spins & 255) == 255 && (uint64_t)rt_time_ns() - t0 >= limit) {
        pthread_mutex_lock(&w->mu);
        atomic_store(&w->sleeping, 1);
        while (atomic_load(&w->posted) == seen) pthread_cond_wait(&w->cv, &w->mu);
        atomic_store(&w->sleeping, 0);
        pthread_mutex_unlock(&w->mu);
        break;
      }
      cpu_relax();
    }
    seen = atomic_load_explicit(&w->posted, memory_order_acquire);
    run_key(w->jobs, w->n, w->key);
    atomic_store_explicit(&w->done, seen, memory_order_release);
  }
  return NULL;
}

/* A forked child has none of the parent's threads: it forgets them (the
 * memory stays: the structs may be mid-use in the parent's image). */
static void pool_atfork_child(void) {
  for (int k = 0; k < RT_POOL_KEYS; k++) workers[k] = NULL;
  atomic_store(&nworkers, 0);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  pool_mu = fresh;
}

static void pool_atfork_register(void) { pthread_atfork(NULL, NULL, pool_atfork_child); }

/* The worker of key k, started on first use; NULL when it cannot be. */
static worker *worker_get(int k) {
  if (workers[k]) return workers[k];
  pthread_once(&fork_once, pool_atfork_register);
  worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->key = k;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&w->th, &at, worker_main, w);
  pthread_attr_destroy(&at);
  if (e) {
    LOG_WARN(RT_SUB_RUNTIME, "cannot start the launch thread of device %d (error %d): its launches run on the "
             "calling thread", k, e);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  workers[k] = w;
  atomic_fetch_add(&nworkers, 1);
  return w;
}

static void worker_post(worker *w, rt_pool_job *jobs, int n, int spin_us) {
  w->jobs = jobs;
  w->n = n;
  w->spin_us = spin_us;
  atomic_fetch_add(&w->posted, 1);
  if (atomic_load(&w->sleeping)) {
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
}

static void worker_wait(worker *w) {
  uint64_t want = atomic_load_explicit(&w->posted, memory_order_relaxed);
  for (unsigned spins = 0; atomic_load_explicit(&w->done, memory_order_acquire) != want; spins++) {
    if (spins > (1u << 16)) sched_yield();   /* a long launch (a first call's allocation) */
    else cpu_relax();
  }
}

static bt_result first_failure(const rt_pool_job *jobs, int n) {
  for (int i = 0; i < n; i++)
    if (jobs[i].res) return jobs[i].res;
  return BT_OK;
}

bt_result rt_pool_run(rt_pool_job *jobs, int n, int parallel, int spin_us) {
  if (n <= 0) return BT_OK;
  int mine = jobs[n - 1].key, multi = 0;
  for (int i = 0; i < n; i++) {
    jobs[i].res = BT_OK;
    if (jobs[i].key != mine) multi = 1;
  }
  if (!parallel || !multi || pthread_mutex_trylock(&pool_mu) != 0) {
    for (int i = 0; i < n; i++) jobs[i].res = jobs[i].fn(jobs[i].arg);
    return first_failure(jobs, n);
  }
  /* Post every other key to its worker, run the rest here, wait. */
  uint64_t posted = 0;
  worker *busy[RT_POOL_KEYS];
  int nbusy = 0;
  for (int i = 0; i < n; i++) {
    int k = jobs[i].key;
    if (k == mine || k < 0 || k >= RT_POOL_KEYS || (posted >> k & 1)) continue;
    worker *w = worker_get(k);
    if (!w) continue;
    worker_post(w, jobs, n, spin_us);
    posted |= 1ull << k;
    busy[nbusy++] = w;
  }
  for (int i = 0; i < n; i++) {
    int k = jobs[i].key;
    if (k < 0 || k >= RT_POOL_KEYS || !(posted >> k & 1)) jobs[i].res = jobs[i].fn(jobs[i].arg);
  }
  for (int j = 0; j < nbusy; j++) worker_wait(busy[j]);
  pthread_mutex_unlock(&pool_mu);
  return first_failure(jobs, n);
}

int rt_pool_workers(void) { return atomic_load(&nworkers); }
