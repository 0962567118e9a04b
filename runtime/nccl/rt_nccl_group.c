/* rt_nccl_group.c -- a thread's group of baton's libnccl.so.2 (the calls
 * recorded for baton, the communicators created inside it) and forwarding
 * one collective call to the real NCCL.  The group calls themselves
 * (ncclGroupStart/End) are rt_nccl_coll.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_log.h"
#include "rt_nccl.h"

const char *const rt_nccl_kind_name[] = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Reduce",
                                         "Gather", "Scatter"};

static _Thread_local rt_nccl_group grp;

rt_nccl_group *rt_nccl_group_get(void) { return &grp; }

void rt_nccl_describe(const rt_nccl_call *c, char *buf, size_t n) {
  char root[24] = "";
  if (rt_nccl_rooted(c->kind)) snprintf(root, sizeof root, " root %d", c->root);
  snprintf(buf, n, "%s: count %zu datatype %d op %d%s sendbuff %p recvbuff %p comm %p [rank %d of %d] stream %p",
           rt_nccl_kind_name[c->kind], c->count, (int)c->type, (int)c->op, root, c->s, (void *)c->r, (void *)c->comm,
           c->comm->rank, c->comm->nranks, (void *)c->stream);
}

ncclResult_t rt_nccl_forward(const rt_nccl_call *c, const char *why) {
  const rt_nccl_real *n = rt_nccl_real_get();
  char d[320] = "";
  int have = 0;
  if (n) {
    switch (c->kind) {
    case RT_NCCL_ALLREDUCE: have = n->AllReduce != NULL; break;
    case RT_NCCL_ALLGATHER: have = n->AllGather != NULL; break;
    case RT_NCCL_REDUCESCATTER: have = n->ReduceScatter != NULL; break;
    case RT_NCCL_ALLTOALL: have = n->AlltoAll != NULL; break;
    case RT_NCCL_BROADCAST: have = n->Broadcast != NULL; break;
    case RT_NCCL_REDUCE: have = n->Reduce != NULL; break;
    case RT_NCCL_GATHER: have = n->Gather != NULL; break;
    case RT_NCCL_SCATTER: have = n->Scatter != NULL; break;
    }
  }
  int cannot = !have || !c->comm->real;
  if (cannot || rt_log_enabled(RT_LOG_INFO, RT_SUB_NCCL)) rt_nccl_describe(c, d, sizeof d);
  if (cannot)
    return rt_nccl_fail(ncclInvalidUsage, "%s: %s, and there is no real NCCL to forward it to (%s)", d, why,
                        !n ? rt_nccl_real_why() : have ? "this communicator has none" : "the loaded NCCL lacks it");
  LOG_INFO(RT_SUB_NCCL, "%s: NCCL (%s)", d, why);
  c->comm->on_nccl++;
  rt_nccl_clear_error();
  ncclComm_t rc = c->comm->real;
  switch (c->kind) {
  case RT_NCCL_ALLREDUCE: return n->AllReduce(c->s, c->r, c->count, c->type, c->op, rc, c->stream);
  case RT_NCCL_ALLGATHER: return n->AllGather(c->s, c->r, c->count, c->type, rc, c->stream);
  case RT_NCCL_REDUCESCATTER: return n->ReduceScatter(c->s, c->r, c->count, c->type, c->op, rc, c->stream);
  case RT_NCCL_BROADCAST: return n->Broadcast(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  case RT_NCCL_REDUCE: return n->Reduce(c->s, c->r, c->count, c->type, c->op, c->root, rc, c->stream);
  case RT_NCCL_GATHER: return n->Gather(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  case RT_NCCL_SCATTER: return n->Scatter(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  default: return n->AlltoAll(c->s, c->r, c->count, c->type, rc, c->stream);
  }
}

void rt_nccl_group_reset(void) {
  free(grp.calls);
  free(grp.defer);
  memset(&grp, 0, sizeof grp);
}

int rt_nccl_in_group(void) { return grp.depth > 0; }

ncclResult_t rt_nccl_group_check(ncclResult_t r) {
  if (grp.depth > 0 && r != ncclSuccess && r != ncclInProgress) grp.error = r;
  return r;
}

ncclResult_t rt_nccl_group_to_nccl(void) {
  if (grp.depth == 0 || grp.to_nccl) return ncclSuccess;
  const rt_nccl_real *n = rt_nccl_real_get();
  grp.to_nccl = 1;
  ncclResult_t r = n ? n->GroupStart()
                     : rt_nccl_fail(ncclInvalidUsage, "a group holds a call baton does not run, and there is no "
                                    "real NCCL to run the group (%s)", rt_nccl_real_why());
  if (r == ncclSuccess && grp.ncalls)
    LOG_INFO(RT_SUB_NCCL, "group: %d call%s recorded for baton go to NCCL with the rest of the group", grp.ncalls,
             grp.ncalls == 1 ? "" : "s");
  for (int i = 0; i < grp.ncalls && r == ncclSuccess; i++) r = rt_nccl_forward(&grp.calls[i], "its group went to NCCL");
  grp.ncalls = 0;
  return rt_nccl_group_check(r);
}

ncclResult_t rt_nccl_group_end_nccl(void) {
  const rt_nccl_real *n = rt_nccl_real_get();
  if (!grp.to_nccl || !n) return grp.error;
  if (grp.error != ncclSuccess && n->AllReduce) {
    /* NCCL records an argument error of a call inside its group and its
     * ncclGroupEnd then returns it, launching none of the group's calls: a
     * collective on a NULL communicator is such an error (NCCL checks the
     * communicator first and touches nothing else). */
    LOG_INFO(RT_SUB_NCCL, "group: a call inside it failed: NCCL's group is given an invalid call (a NULL "
             "communicator) so that it launches none of its calls either");
    n->AllReduce(NULL, NULL, 0, ncclUint8, ncclSum, NULL, NULL);
  }
  ncclResult_t e = n->GroupEnd();
  return grp.error != ncclSuccess ? grp.error : e;
}

void rt_nccl_group_defer(struct ncclComm *c) {
  if (grp.ndefer == grp.capdefer) {
    int cap = grp.capdefer ? 2 * grp.capdefer : 8;
    struct ncclComm **v = realloc(grp.defer, cap * sizeof *v);
    if (!v) {
      rt_nccl_group_check(rt_nccl_fail(ncclSystemError, "out of memory deferring a communicator's creation"));
      return;
    }
    grp.defer = v;
    grp.capdefer = cap;
  }
  grp.defer[grp.ndefer++] = c;
}

ncclResult_t rt_nccl_group_record(const rt_nccl_call *c, const char *name) {
  if (grp.ncalls == grp.cap) {
    int cap = grp.cap ? 2 * grp.cap : 16;
    rt_nccl_call *v = realloc(grp.calls, cap * sizeof *v);
    if (!v) return rt_nccl_fail(ncclSystemError, "%s: out of memory recording a group", name);
    grp.calls = v;
    grp.cap = cap;
  }
  grp.calls[grp.ncalls++] = *c;
  return ncclSuccess;
}
