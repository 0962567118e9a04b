/* rt_group.c -- the calling thread's group: baton_group_start, the calls
 * recorded until its end (which rt_coll.c's baton_group_end launches),
 * its first failure. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rt_comm.h"
#include "rt_log.h"

/* The calling thread's group (groups are per thread, as NCCL's). */
static _Thread_local struct {
  int depth;          /* nesting of baton_group_start */
  rt_launch *v;       /* the calls recorded, in order */
  int n, cap;
  bt_result err;      /* the first call that failed: then nothing is launched */
} grp;

/* The array goes with its thread: a key whose destructor frees it. */
static pthread_key_t grp_key;
static pthread_once_t grp_once = PTHREAD_ONCE_INIT;
static int grp_key_ok;
static void grp_key_make(void) { grp_key_ok = pthread_key_create(&grp_key, free) == 0; }

baton_result baton_group_start(void) {
  grp.depth++;
  return baton_success;
}

int rt_group_open(void) { return grp.depth > 0; }

void rt_group_fail(bt_result e) {
  if (grp.depth > 0 && e != BT_OK && grp.err == BT_OK) grp.err = e;
}

bt_result rt_group_record(const rt_launch *L) {
  if (grp.err) return grp.err;
  if (grp.n == grp.cap) {
    int cap = grp.cap ? 2 * grp.cap : 16;
    /* Aligned as the type asks (the GEMM's tensor maps in ip_gargs: 128
     * bytes), which realloc does not promise. */
    rt_launch *v = aligned_alloc(_Alignof(rt_launch), (size_t)cap * sizeof *v);
    if (v && grp.n) memcpy(v, grp.v, (size_t)grp.n * sizeof *v);
    if (!v) {
      LOG_WARN(RT_SUB_RUNTIME, "out of memory recording call %d of a group", grp.n + 1);
      grp.err = BT_ERR_NOMEM;
      return BT_ERR_NOMEM;
    }
    free(grp.v);
    grp.v = v;
    grp.cap = cap;
    pthread_once(&grp_once, grp_key_make);
    if (grp_key_ok) pthread_setspecific(grp_key, v);
  }
  grp.v[grp.n++] = *L;
  return BT_OK;
}

int rt_group_leave(rt_launch **v, int *n, bt_result *err) {
  if (grp.depth == 0) return -1;
  if (--grp.depth > 0) return 0;
  *v = grp.v;
  *n = grp.n;
  *err = grp.err;
  return 1;
}

void rt_group_reset(void) {
  grp.n = 0;
  grp.err = BT_OK;
}
