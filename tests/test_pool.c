/* test_pool.c -- the launch worker pool: order per key, parallelism, errors, sleep and wake, concurrent users, fork. */
#include "rt_pool.h"
#include "tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct rec {
  int key, idx;                 /* its key, its place among its key's jobs */
  pthread_t ran_on;
  int order;                    /* global order it ran in (parallel: only per key meaningful) */
  bt_result ret;
  _Atomic int *seq;             /* per key counter */
  _Atomic int *rendezvous;      /* NULL, or: wait until this many jobs arrived */
  int need;
} rec;

static _Atomic int global_order;

static bt_result job_fn(void *arg) {
  rec *r = arg;
  r->ran_on = pthread_self();
  r->order = atomic_fetch_add(r->seq, 1);
  atomic_fetch_add(&global_order, 1);
  if (r->rendezvous) {
    /* Only jobs that run at the same time all get past this. */
    atomic_fetch_add(r->rendezvous, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(r->rendezvous) < r->need) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if (t.tv_sec - t0.tv_sec > 5) return BT_ERR_TIMEOUT;
    }
  }
  return r->ret;
}

/* nk keys, per jobs each, interleaved (key = i % nk); runs them and checks
 * order per key and who ran them. */
static void scenario(const char *what, int nk, int per, int parallel, int spin_us) {
  enum { MAXJ = 64 };
  rec recs[MAXJ];
  rt_pool_job jobs[MAXJ];
  _Atomic int seq[16];
  int n = nk * per;
  for (int k = 0; k < nk; k++) atomic_store(&seq[k], 0);
  for (int i = 0; i < n; i++) {
    recs[i] = (rec){.key = i % nk, .idx = i / nk, .ret = BT_OK, .seq = &seq[i % nk]};
    jobs[i] = (rt_pool_job){.key = i % nk, .fn = job_fn, .arg = &recs[i], .res = BT_ERR_INTERNAL};
  }
  bt_result r = rt_pool_run(jobs, n, parallel, spin_us);
  ok(r == BT_OK, "%s: every job succeeded", what);
  int in_order = 1, one_thread = 1, caller_last = 1, workers_others = 1;
  for (int i = 0; i < n; i++) {
    if (recs[i].order != recs[i].idx) in_order = 0;
    if (!pthread_equal(recs[i].ran_on, recs[recs[i].key].ran_on)) one_thread = 0;
    int on_caller = pthread_equal(recs[i].ran_on, pthread_self());
    if (recs[i].key == (n - 1) % nk && !on_caller) caller_last = 0;
    if (recs[i].key != (n - 1) % nk && on_caller == parallel) workers_others = 0;
    if (jobs[i].res != BT_OK) in_order = 0;
  }
  ok(in_order, "%s: each key's jobs ran in array order", what);
  ok(one_thread, "%s: each key's jobs ran on one thread", what);
  ok(caller_last, "%s: the last job's key ran on the calling thread", what);
  ok(workers_others, parallel ? "%s: the other keys ran on worker threads" : "%s: nothing ran on a worker", what);
}

static void test_concurrent(void) {
  _Atomic int arrived = 0, seq[4];
  rec recs[4];
  rt_pool_job jobs[4];
  for (int k = 0; k < 4; k++) {
    atomic_store(&seq[k], 0);
    recs[k] = (rec){.key = k, .seq = &seq[k], .rendezvous = &arrived, .need = 4};
    jobs[k] = (rt_pool_job){.key = k, .fn = job_fn, .arg = &recs[k]};
  }
  ok(rt_pool_run(jobs, 4, 1, 1000) == BT_OK, "4 keys whose jobs each wait for all 4 to start: they ran at once");
}

static void test_errors(void) {
  _Atomic int seq[3] = {0, 0, 0};
  rec recs[9];
  rt_pool_job jobs[9];
  for (int i = 0; i < 9; i++) {
    recs[i] = (rec){.key = i % 3, .seq = &seq[i % 3], .ret = i == 4 ? BT_ERR_INVALID : i == 7 ? BT_ERR_CUDA : BT_OK};
    jobs[i] = (rt_pool_job){.key = i % 3, .fn = job_fn, .arg = &recs[i]};
  }
  bt_result r = rt_pool_run(jobs, 9, 1, 100);
  ok(r == BT_ERR_INVALID, "two failing jobs: the first in array order is returned (got %d)", r);
  int all_ran = 1;
  for (int i = 0; i < 9; i++) all_ran &= jobs[i].res == recs[i].ret && recs[i].order == i / 3;
  ok(all_ran, "the other jobs still ran, and each job's own result is kept");
}

/* Keys outside the pool's range run on the calling thread. */
static void test_odd_keys(void) {
  _Atomic int seq = 0;
  int keys[4] = {-1, 200, 1, 200};
  rec recs[4];
  rt_pool_job jobs[4];
  for (int i = 0; i < 4; i++) {
    recs[i] = (rec){.key = keys[i], .seq = &seq};
    jobs[i] = (rt_pool_job){.key = keys[i], .fn = job_fn, .arg = &recs[i]};
  }
  ok(rt_pool_run(jobs, 4, 1, 10) == BT_OK, "keys -1 and 200 with key 1: run");
  ok(pthread_equal(recs[0].ran_on, pthread_self()) && pthread_equal(recs[1].ran_on, pthread_self()) &&
     pthread_equal(recs[3].ran_on, pthread_self()) && !pthread_equal(recs[2].ran_on, pthread_self()),
     "keys outside the pool ran on the caller, key 1 on its worker");
}

/* Workers that sleep between batches (spin 0) are woken every time: a
 * lost wake-up would hang here (the test's alarm fails it). */
static void test_wakeups(void) {
  int fails = 0;
  for (int it = 0; it < 3000; it++) {
    _Atomic int seq[3] = {0, 0, 0};
    rec recs[3];
    rt_pool_job jobs[3];
    for (int k = 0; k < 3; k++) {
      recs[k] = (rec){.key = k, .seq = &seq[k]};
      jobs[k] = (rt_pool_job){.key = k, .fn = job_fn, .arg = &recs[k]};
    }
    if (rt_pool_run(jobs, 3, 1, it % 3 == 0 ? 0 : 5) != BT_OK || recs[0].order || recs[1].order) fails++;
    if (it % 1000 == 0) usleep(20000);   /* long enough for every worker to be asleep */
  }
  ok(fails == 0, "3000 batches with workers spinning 0-5 us then sleeping: every one ran (%d failed)", fails);
}

static void *user_thread(void *arg) {
  int *fails = arg;
  for (int it = 0; it < 500; it++) {
    _Atomic int seq[4] = {0, 0, 0, 0};
    rec recs[8];
    rt_pool_job jobs[8];
    for (int i = 0; i < 8; i++) {
      recs[i] = (rec){.key = i % 4, .idx = i / 4, .seq = &seq[i % 4]};
      jobs[i] = (rt_pool_job){.key = i % 4, .fn = job_fn, .arg = &recs[i]};
    }
    if (rt_pool_run(jobs, 8, 1, 50) != BT_OK) (*fails)++;
    for (int i = 0; i < 8; i++)
      if (recs[i].order != recs[i].idx) (*fails)++;
  }
  return NULL;
}

static void test_two_users(void) {
  int fails[2] = {0, 0};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, user_thread, &fails[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  ok(fails[0] + fails[1] == 0, "two threads using the pool at once, same keys, 500 batches each: all ran in order");
}

/* A child forked after workers exist gets working launches of its own. */
static void test_fork(void) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    _Atomic int seq[2] = {0, 0};
    rec recs[2];
    rt_pool_job jobs[2];
    for (int k = 0; k < 2; k++) {
      recs[k] = (rec){.key = k, .seq = &seq[k]};
      jobs[k] = (rt_pool_job){.key = k, .fn = job_fn, .arg = &recs[k]};
    }
    int before = rt_pool_workers();
    _exit(rt_pool_run(jobs, 2, 1, 10) == BT_OK && before == 0 && rt_pool_workers() == 1 ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child starts with no workers and its batches run (status %d)", st);
}

int main(void) {
  alarm(60);
  scenario("4 keys x 3 jobs, parallel", 4, 3, 1, 200);
  ok(rt_pool_workers() == 3, "three workers started (keys 0, 1, 2; key 3 ran on the caller): %d", rt_pool_workers());
  scenario("4 keys x 3 jobs, again (workers reused)", 4, 3, 1, 200);
  ok(rt_pool_workers() == 3, "still three workers");
  scenario("4 keys x 3 jobs, parallel off", 4, 3, 0, 200);
  scenario("1 key x 5 jobs", 1, 5, 1, 200);
  test_concurrent();
  test_errors();
  test_odd_keys();
  test_wakeups();
  test_two_users();
  test_fork();
  return tap_done();
}
