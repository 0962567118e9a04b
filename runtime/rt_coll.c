/* rt_coll.c -- the calls of baton.h: the collectives, a program run by
 * name, the checks and errors every call shares (rt_fused.c's calls use
 * them too), and the end of a group: its calls given their peers'
 * buffers, then launched, those of different GPUs in parallel, one host
 * thread per GPU (rt_pool.c). */
#include "rt_comm.h"

#include <stdlib.h>
#include <string.h>

#include "ip_dtype.h"
#include "ir_geom.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"
#include "rt_pool.h"
#include "tp_cuda.h"

/* Checks what every call shares; returns the error to give back. */
baton_result rt_comm_call_check(baton_comm *c, const void *s, const void *r, int dtype, int op) {
  if (!c) return baton_invalid_argument;
  if (!s || !r) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: NULL buffer", c->rank);
    return baton_invalid_argument;
  }
  if (dtype < 0 || dtype >= IP_DTYPE_COUNT || op < 0 || op >= IP_REDOP_COUNT) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: unknown type %d or operator %d", c->rank, dtype, op);
    return baton_invalid_argument;
  }
  return rt_comm_poll_error(c);
}

/* A call's error; inside a group it also fails the group (rt_group.c). */
baton_result rt_comm_call_failed(baton_result e) {
  rt_group_fail((bt_result)e);
  return e;
}

/* Prepares algorithm ai for the call and launches it, or records it in
 * the calling thread's group. */
baton_result rt_comm_call_submit(baton_comm *c, int ai, const void *s, void *r, size_t count, int dtype, int op,
                                 const rt_operands *ops, cudaStream_t stream) {
  /* Ranks of one process sharing a GPU: a kernel launched alone waits for the others',
   * and their set-up (a scratch cudaFree waits for the whole GPU) would
   * wait for it: only a group prepares every call before launching any. */
  if (!c->bs && c->share > 1 && !rt_group_open()) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d shares GPU %d with %d other ranks: make its calls inside "
             "baton_group_start/end", c->rank, c->dev, c->share - 1);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (rt_cuda(cudaSetDevice(c->dev), RT_SUB_RUNTIME, "cudaSetDevice")) return rt_comm_call_failed(baton_cuda_error);
  c->calls++;
  /* A direct element-wise call (AllReduce, Broadcast) larger than the
   * window runs on consecutive slices (every rank slices alike: the count,
   * program and window decide). */
  const size_t es = (size_t)ip_dtype_size[dtype];
  int64_t slice = 0;
  int again = 1;
  for (int64_t at = 0; at < (int64_t)count; at += slice) {
    if (again) {   /* the program's slices, or (chosen again) the rest in the new one's */
      slice = !ops && c->dplans && c->dplans[ai].ok ? rt_direct_slice(c, ai, (int64_t)count - at, dtype) : 0;
      if (slice <= 0 || slice >= (int64_t)count - at) slice = (int64_t)count - at;
      again = 0;
    }
    int64_t n = (int64_t)count - at < slice ? (int64_t)count - at : slice;
    rt_launch L;
    /* (a buffer NCCL's contract lets a rooted call leave NULL stays NULL) */
    bt_result e = rt_call_prep(c, ai, s ? (const char *)s + (size_t)at * es : NULL, r ? (char *)r + (size_t)at * es : NULL,
                               n, dtype, op, ops, stream, &L);
    if (!e && L.resubmit) {   /* without its peers' buffers, a program that runs in slices: from here on */
      ai = L.resubmit - 1;
      again = 1;
      slice = 0;
      continue;
    }
    if (!e) e = rt_group_submit(&L);
    if (e) return rt_comm_call_failed((baton_result)e);
  }
  return baton_success;
}

/* A collective of one rank: its output is its input, whatever the
 * collective and operator (an average over one rank is the value): no
 * kernel, one copy on the stream when out of place. */
static baton_result one_rank(baton_comm *c, const void *s, void *r, size_t bytes, cudaStream_t stream) {
  if (s == r) {
    c->last = "one rank: in place, nothing to do";
    return baton_success;
  }
  c->last = "one rank: a copy";
  if (rt_cuda(cudaSetDevice(c->dev), RT_SUB_RUNTIME, "cudaSetDevice") ||
      rt_cuda(cudaMemcpyAsync(r, s, bytes, cudaMemcpyDeviceToDevice, stream), RT_SUB_RUNTIME, "cudaMemcpyAsync"))
    return rt_comm_call_failed(baton_cuda_error);
  return baton_success;
}

static baton_result collective(ir_coll coll, const void *s, void *r, size_t count, int dtype, int op, baton_comm *c,
                               cudaStream_t stream, int ai) {
  baton_result e = rt_comm_call_check(c, s, r, dtype, op);
  if (e) return rt_comm_call_failed(e);
  if (count == 0) return baton_success;
  if (c->nranks == 1) return one_rank(c, s, r, count * (size_t)ip_dtype_size[dtype], stream);
  if (ai < 0) ai = rt_comm_choose(c, coll, s, r, count, dtype, stream);
  if (ai < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no algorithm for %s of %zu elements on %d ranks (BATON_DEBUG=INFO says "
             "why): not run", c->rank, ir_coll_name[coll], count, c->nranks);
    return rt_comm_call_failed(baton_unsupported);
  }
  return rt_comm_call_submit(c, ai, s, r, count, dtype, op, NULL, stream);
}

baton_result baton_allreduce(const void *s, void *r, size_t count, baton_dtype t, baton_redop op, baton_comm *c,
                             cudaStream_t stream) {
  return collective(IR_COLL_ALLREDUCE, s, r, count, t, op, c, stream, -1);
}
baton_result baton_allgather(const void *s, void *r, size_t count, baton_dtype t, baton_comm *c, cudaStream_t stream) {
  return collective(IR_COLL_ALLGATHER, s, r, count, t, baton_sum, c, stream, -1);
}
baton_result baton_reducescatter(const void *s, void *r, size_t count, baton_dtype t, baton_redop op, baton_comm *c,
                                 cudaStream_t stream) {
  return collective(IR_COLL_REDUCESCATTER, s, r, count, t, op, c, stream, -1);
}
baton_result baton_alltoall(const void *s, void *r, size_t count, baton_dtype t, baton_comm *c, cudaStream_t stream) {
  return collective(IR_COLL_ALLTOALL, s, r, count, t, baton_sum, c, stream, -1);
}

/* Broadcast and reduce: `root` names the rank whose input (broadcast) or
 * output (reduce) counts; the buffer a rank does not use may be NULL
 * there (NCCL's contract), and the other is given for both. */
static baton_result rooted(ir_coll coll, const void *s, void *r, size_t count, int dtype, int op, int root,
                           baton_comm *c, cudaStream_t stream, int ai) {
  if (!c) return rt_comm_call_failed(baton_invalid_argument);
  if (root < 0 || root >= c->nranks) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s with root %d, but the communicator has ranks 0..%d", c->rank,
             ir_coll_name[coll], root, c->nranks - 1);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  rt_rooted_bufs(coll, c->rank, root, &s, &r);
  baton_result e = rt_comm_call_check(c, s, r, dtype, op);
  if (e) return rt_comm_call_failed(e);
  if (count == 0) return baton_success;
  if (c->nranks == 1) return one_rank(c, s, r, count * (size_t)ip_dtype_size[dtype], stream);   /* one block */
  if (ai < 0) ai = rt_comm_choose_rooted(c, coll, root, s, r, count, dtype, stream);
  if (ai < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no algorithm for %s of %zu elements from root %d on %d ranks (BATON_DEBUG=INFO "
             "says why): not run", c->rank, ir_coll_name[coll], count, root, c->nranks);
    return rt_comm_call_failed(baton_unsupported);
  }
  return rt_comm_call_submit(c, ai, s, r, count, dtype, op, NULL, stream);
}

baton_result rt_comm_collective(baton_comm *c, ir_coll coll, int root, int ai, const void *s, void *r, size_t count,
                                int dtype, int op, cudaStream_t stream) {
  if (!ir_coll_reduces(coll)) op = baton_sum;   /* as baton_allgather and the others pass it */
  if (ir_coll_rooted(coll)) return rooted(coll, s, r, count, dtype, op, root, c, stream, ai);
  return collective(coll, s, r, count, dtype, op, c, stream, ai);
}

baton_result baton_broadcast(const void *s, void *r, size_t count, baton_dtype t, int root, baton_comm *c,
                             cudaStream_t stream) {
  return rooted(IR_COLL_BROADCAST, s, r, count, t, baton_sum, root, c, stream, -1);
}
baton_result baton_reduce(const void *s, void *r, size_t count, baton_dtype t, baton_redop op, int root, baton_comm *c,
                          cudaStream_t stream) {
  return rooted(IR_COLL_REDUCE, s, r, count, t, op, root, c, stream, -1);
}

baton_result baton_gather(const void *s, void *r, size_t count, baton_dtype t, int root, baton_comm *c,
                          cudaStream_t stream) {
  return rooted(IR_COLL_GATHER, s, r, count, t, baton_sum, root, c, stream, -1);
}
baton_result baton_scatter(const void *s, void *r, size_t count, baton_dtype t, int root, baton_comm *c,
                           cudaStream_t stream) {
  return rooted(IR_COLL_SCATTER, s, r, count, t, baton_sum, root, c, stream, -1);
}

baton_result baton_run(const char *name, const void *s, void *r, size_t count, baton_dtype t, baton_redop op,
                       baton_comm *c, cudaStream_t stream) {
  baton_result e = rt_comm_call_check(c, s, r, t, op);
  if (e) return rt_comm_call_failed(e);
  if (!name) return rt_comm_call_failed(baton_invalid_argument);
  int ai = rt_algos_find(c->algos, name);
  if (ai < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no loaded algorithm is called %s", c->rank, name);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (count == 0) return baton_success;
  LOG_INFO(RT_SUB_RUNTIME, "rank %d: running %s by name, count %zu", c->rank, name, count);
  return rt_comm_call_submit(c, ai, s, r, count, t, op, NULL, stream);
}

/* Whether the GPU of every rank's call in by[0..nr) may reach every other
 * rank's output outs[r] and input ins[r] (ins NULL: none): not so for
 * memory from a stream-ordered pool or cuMem that was not granted to the
 * other GPUs (tp_cuda_reach_all), which peer access does not cover. */
static int reach_all(rt_launch *const *by, int nr, char *const *ins, char *const *outs) {
  int devs[IP_WIN_MAX_RANKS];
  for (int r = 0; r < nr; r++) devs[r] = by[r]->c->dev;
  for (int r = 0; r < nr; r++) {
    const char *bad = !tp_cuda_reach_all(outs[r], devs, nr) ? "output"
                      : ins && ins[r] != outs[r] && !tp_cuda_reach_all(ins[r], devs, nr) ? "input" : NULL;
    if (bad) {
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: its %s is memory the other ranks' GPUs may not reach (a pool or cuMem "
               "allocation without their access): the call does not run direct", r, bad);
      return 0;
    }
  }
  return 1;
}

/* Direct calls by[0..nr) of every rank: whether each reaches the others'
 * buffers. */
static int peers_reach(rt_launch *const *by, int nr) {
  char *ins[IP_WIN_MAX_RANKS], *outs[IP_WIN_MAX_RANKS];
  for (int r = 0; r < nr; r++) {
    ins[r] = by[r]->d.buf[r][IR_BUF_INPUT];
    outs[r] = by[r]->d.buf[r][IR_BUF_OUTPUT];
  }
  return reach_all(by, nr, ins, outs);
}

/* A group's end, before it launches: each direct call that reaches its
 * peers' buffers gets every rank's; where the group lacks a rank's call,
 * or some rank's buffers cannot be reached by the others' GPUs, it is
 * prepared again without them (rt_call_again). */
static bt_result direct_peers(rt_launch *v, int n) {
  unsigned char *done = calloc((size_t)n + 1, 1);
  if (!done) return BT_ERR_NOMEM;
  bt_result res = BT_OK;
  for (int i = 0; i < n && !res; i++) {
    rt_launch *L = &v[i];
    if (done[i] || !L->direct || !L->c->dplans[L->ai].peer_io || L->peers_known) continue;
    /* The first call of each rank of L's communicator, of L's program and
     * count, not yet given its peers: one set. */
    rt_launch *by[IP_WIN_MAX_RANKS] = {0};
    int at[IP_WIN_MAX_RANKS], have = 0, nr = L->c->nranks;
    for (int j = i; j < n; j++) {
      rt_launch *M = &v[j];
      if (done[j] || !M->direct || M->c->shared != L->c->shared || M->ai != L->ai ||
          M->d.geom.count != L->d.geom.count || by[M->c->rank])
        continue;
      by[M->c->rank] = M;
      at[M->c->rank] = j;
      have++;
    }
    const int reach = have == nr && peers_reach(by, nr);
    for (int q = 0; q < nr; q++) {
      if (!by[q]) continue;
      done[at[q]] = 1;
      if (!reach) {
        res = rt_call_again(by[q]);
        if (!res && by[q]->resubmit) {   /* a group's calls are prepared already: no slices now */
          LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s cannot have its peers' buffers, and the program that runs without "
                   "them needs slices of the window for this count: not run (make the call outside a group, or "
                   "on buffers every GPU reaches)", by[q]->c->rank, by[q]->where);
          res = BT_ERR_UNSUPPORTED;
        }
        continue;
      }
      for (int r = 0; r < nr; r++) {
        by[q]->d.buf[r][IR_BUF_INPUT] = by[r]->d.buf[r][IR_BUF_INPUT];
        by[q]->d.buf[r][IR_BUF_OUTPUT] = by[r]->d.buf[r][IR_BUF_OUTPUT];
      }
    }
  }
  free(done);
  return res;
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
    char *outs[IP_DIRECT_MAX];
    uint64_t *flags[IP_DIRECT_MAX];
    for (int p = 0; p < c->nranks; p++) {
      outs[p] = by[p]->recvbuf;
      flags[p] = by[p]->c->dflags;
    }
    if (!reach_all(by, c->nranks, NULL, outs)) continue;
    for (int q = 0; q < c->nranks; q++) rt_call_direct_alltoall(by[q], outs, flags);
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
  rt_launch *v;
  int n;
  bt_result r;
  int left = rt_group_leave(&v, &n, &r);
  if (left < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "baton_group_end without baton_group_start");
    return baton_invalid_argument;
  }
  if (left == 0) return baton_success;
  if (r) {
    if (n) LOG_WARN(RT_SUB_RUNTIME, "a call of the group failed (%s): its other %d calls are not launched",
                    bt_result_str(r), n);
  } else if ((r = direct_peers(v, n))) {
    LOG_WARN(RT_SUB_RUNTIME, "a direct call of the group cannot run (%s): its %d calls are not launched",
             bt_result_str(r), n);
  } else if (n == 1) {
    direct_alltoall(v, 1);
    r = launch_job(&v[0]);
  } else if (n > 1) {
    rt_pool_job stack[16], *jobs = n <= 16 ? stack : malloc((size_t)n * sizeof *jobs);
    if (!jobs) {
      r = BT_ERR_NOMEM;
    } else {
      direct_alltoall(v, n);
      for (int i = 0; i < n; i++) jobs[i] = (rt_pool_job){.key = v[i].c->dev, .fn = launch_job, .arg = &v[i]};
      r = rt_pool_run(jobs, n, rt_param_int(RT_PARAM_LAUNCH_THREADS) != 0, (int)rt_param_int(RT_PARAM_LAUNCH_SPIN_US));
      if (jobs != stack) free(jobs);
    }
  }
  rt_group_reset();
  return (baton_result)r;
}
