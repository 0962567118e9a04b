/* rt_group.c -- baton_group_start/end: a group's calls are prepared when
 * they are made and launched at its end, those of different GPUs in
 * parallel, one host thread per GPU (rt_pool.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rt_comm.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"
#include "rt_pool.h"

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

bt_result rt_group_submit(const rt_launch *L) {
  if (grp.depth == 0) return rt_call_launch(L);
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

/* Direct AllToAll (ip_gargs.direct): where the group holds one fused
 * call that may run direct (rt_launch.direct_ok: a GEMM's or embedding
 * bags') for every rank of communicators made together in this process
 * (that have end flags: rt_comm.c's direct_setup), of one kind and size,
 * and no other such call of theirs, each of those calls learns every
 * rank's output and end flags: its values then go straight to their
 * owners, and every block of its launch computes.  Any other mix keeps
 * the FIFO exchange.  Every rank's call is in this group, so every rank
 * decides alike. */
static void direct_alltoall(rt_launch *v, int n) {
  for (int i = 0; i < n; i++) {
    const rt_launch *L = &v[i];
    const baton_comm *c = L->c;
    if (!L->direct_ok || L->a.direct || !c->dflags || c->nranks > IP_DIRECT_MAX) continue;
    rt_launch *by[IP_DIRECT_MAX] = {0};
    int ok = 1;
    for (int j = 0; j < n && ok; j++) {
      rt_launch *M = &v[j];
      if (!M->direct_ok || M->c->shared != c->shared) continue;
      ok = !by[M->c->rank] && !M->a.direct && M->a.geom.count == L->a.geom.count && M->a.cgemm == L->a.cgemm &&
           M->a.cbag == L->a.cbag && M->a.gemm.n == L->a.gemm.n;
      by[M->c->rank] = M;
    }
    for (int q = 0; q < c->nranks && ok; q++) ok = by[q] != NULL;
    if (!ok) continue;   /* (a later call of the same set finds the same mix) */
    for (int q = 0; q < c->nranks; q++) {
      ip_gargs *a = &by[q]->a;
      /* Nothing moves through FIFOs: every block of the launch computes,
       * as the one compute thread block, whose steps and entry follow the
       * communicating ones'. */
      a->cwidth = ip_gpu_blocks(a);
      a->steps += (int64_t)a->ntbs * a->step_stride;
      a->tbs += (int64_t)a->ntbs * a->lanes;
      by[q]->irtb += a->ntbs;   /* the timeline names every block by the compute tb */
      a->ncomp = 1;
      a->ntbs = 0;
      a->direct = 1;
      a->dnranks = c->nranks;
      for (int p = 0; p < c->nranks; p++) {
        a->dout[p] = by[p]->recvbuf;
        a->dflag[p] = by[p]->c->dflags;
      }
    }
  }
}

static bt_result launch_job(void *arg) {
  const rt_launch *L = arg;
  CHECK(rt_cuda(cudaSetDevice(L->c->dev), RT_SUB_RUNTIME, "cudaSetDevice"));
  return rt_call_launch(L);
}

/* The outermost end launches the recorded calls: each GPU's in the order
 * they were made, the GPUs at once (BATON_LAUNCH_THREADS).  When a call
 * of the group failed, nothing is launched: ranks that ran without the
 * others would wait for them until BATON_TIMEOUT. */
baton_result baton_group_end(void) {
  if (grp.depth == 0) {
    LOG_WARN(RT_SUB_RUNTIME, "baton_group_end without baton_group_start");
    return baton_invalid_argument;
  }
  if (--grp.depth > 0) return baton_success;
  bt_result r = grp.err;
  if (r) {
    if (grp.n) LOG_WARN(RT_SUB_RUNTIME, "a call of the group failed (%s): its other %d calls are not launched",
                        bt_result_str(r), grp.n);
  } else if ((r = rt_direct_group(grp.v, grp.n))) {
    LOG_WARN(RT_SUB_RUNTIME, "a direct call of the group cannot run (%s): its %d calls are not launched",
             bt_result_str(r), grp.n);
  } else if (grp.n == 1) {
    direct_alltoall(grp.v, 1);
    r = launch_job(&grp.v[0]);
  } else if (grp.n > 1) {
    rt_pool_job stack[16], *jobs = grp.n <= 16 ? stack : malloc((size_t)grp.n * sizeof *jobs);
    if (!jobs) {
      r = BT_ERR_NOMEM;
    } else {
      direct_alltoall(grp.v, grp.n);
      for (int i = 0; i < grp.n; i++) jobs[i] = (rt_pool_job){.key = grp.v[i].c->dev, .fn = launch_job, .arg = &grp.v[i]};
      r = rt_pool_run(jobs, grp.n, rt_param_int(RT_PARAM_LAUNCH_THREADS) != 0, (int)rt_param_int(RT_PARAM_LAUNCH_SPIN_US));
      if (jobs != stack) free(jobs);
    }
  }
  grp.n = 0;
  grp.err = BT_OK;
  return (baton_result)r;
}
