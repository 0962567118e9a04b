/* rt_nccl_coll.c -- where each call of baton's libnccl.so.2 runs: on baton
 * when baton has an algorithm for it, else on the real NCCL; a group runs
 * whole on baton or whole on NCCL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_comm.h"
#include "rt_log.h"
#include "rt_nccl.h"
#include "rt_param.h"

_Static_assert((int)ncclSum == (int)baton_sum && (int)ncclProd == (int)baton_prod && (int)ncclMax == (int)baton_max &&
               (int)ncclMin == (int)baton_min && (int)ncclAvg == (int)baton_avg, "NCCL's operators are baton's");

typedef enum {
  CALL_ALLREDUCE, CALL_ALLGATHER, CALL_REDUCESCATTER, CALL_ALLTOALL, CALL_BROADCAST, CALL_REDUCE, CALL_GATHER,
  CALL_SCATTER
} call_kind;
static const char *const kind_name[] = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Reduce",
                                        "Gather", "Scatter"};
static const ir_coll kind_coll[] = {IR_COLL_ALLREDUCE, IR_COLL_ALLGATHER, IR_COLL_REDUCESCATTER, IR_COLL_ALLTOALL,
                                   IR_COLL_BROADCAST, IR_COLL_REDUCE, IR_COLL_GATHER, IR_COLL_SCATTER};

static int rooted(call_kind k) { return k >= CALL_BROADCAST; }
/* Off the root, NCCL does not use a Broadcast's or Scatter's sendbuff, nor
 * a Reduce's or Gather's recvbuff. */
static int no_send_off_root(call_kind k) { return k == CALL_BROADCAST || k == CALL_SCATTER; }

/* One call of a collective baton may run, as the application made it. */
typedef struct call {
  call_kind kind;
  const void *s;
  void *r;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  struct ncclComm *comm;
  cudaStream_t stream;
  int root;                 /* Broadcast, Reduce */
} call;

/* The group state of one thread (NCCL's groups are per thread too). */
static _Thread_local struct group {
  int depth;                /* nesting of ncclGroupStart */
  int to_nccl;              /* handed to NCCL: its ncclGroupStart was called */
  ncclResult_t error;       /* the first error inside the group */
  call *calls;              /* recorded for baton, in order */
  int ncalls, cap;
  struct ncclComm **defer;  /* created inside: baton's side at the end */
  int ndefer, capdefer;
} grp;

static int baton_type(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: return baton_i8;
  case ncclUint8: return baton_u8;
  case ncclInt32: return baton_i32;
  case ncclUint32: return baton_u32;
  case ncclInt64: return baton_i64;
  case ncclUint64: return baton_u64;
  case ncclFloat16: return baton_f16;
  case ncclFloat32: return baton_f32;
  case ncclFloat64: return baton_f64;
  case ncclBfloat16: return baton_bf16;
  default: return -1;   /* fp8 */
  }
}

/* The NCCL-style description of a call for the log. */
static void describe(const call *c, char *buf, size_t n) {
  char root[24] = "";
  if (rooted(c->kind)) snprintf(root, sizeof root, " root %d", c->root);
  snprintf(buf, n, "%s: count %zu datatype %d op %d%s sendbuff %p recvbuff %p comm %p [rank %d of %d] stream %p",
           kind_name[c->kind], c->count, (int)c->type, (int)c->op, root, c->s, (void *)c->r, (void *)c->comm,
           c->comm->rank, c->comm->nranks, (void *)c->stream);
}

/* Why baton cannot run the call, or NULL when it can (then *algo names
 * the algorithm it would choose). */
static const char *baton_refuses(const call *c, const char **algo) {
  if (!c->comm->baton) return rt_param_int(RT_PARAM_ENABLE) ? "no baton communicator" : "baton is off (BATON_ENABLE=0)";
  int t = baton_type(c->type);
  if (t < 0) return "a type baton does not run";
  if ((int)c->op < 0 || (int)c->op >= (int)ncclNumOps) return "a custom operator";
  ir_coll coll = kind_coll[c->kind];
  int ai = rooted(c->kind) ? rt_comm_choose_rooted(c->comm->baton, coll, c->root, c->s, c->r, c->count, t, c->stream)
                           : rt_comm_choose(c->comm->baton, coll, c->s, c->r, c->count, t, c->stream);
  if (ai < 0) return "no baton algorithm fits";
  *algo = baton_comm_algorithm_name(c->comm->baton, ai);
  return NULL;
}

static ncclResult_t run_baton(const call *c) {
  baton_comm *b = c->comm->baton;
  baton_dtype t = (baton_dtype)baton_type(c->type);
  baton_redop op = (baton_redop)c->op;
  baton_result r = baton_unsupported;
  switch (c->kind) {
  case CALL_ALLREDUCE: r = baton_allreduce(c->s, c->r, c->count, t, op, b, c->stream); break;
  case CALL_ALLGATHER: r = baton_allgather(c->s, c->r, c->count, t, b, c->stream); break;
  case CALL_REDUCESCATTER: r = baton_reducescatter(c->s, c->r, c->count, t, op, b, c->stream); break;
  case CALL_ALLTOALL: r = baton_alltoall(c->s, c->r, c->count, t, b, c->stream); break;
  case CALL_BROADCAST: r = baton_broadcast(c->s, c->r, c->count, t, c->root, b, c->stream); break;
  case CALL_REDUCE: r = baton_reduce(c->s, c->r, c->count, t, op, c->root, b, c->stream); break;
  case CALL_GATHER: r = baton_gather(c->s, c->r, c->count, t, c->root, b, c->stream); break;
  case CALL_SCATTER: r = baton_scatter(c->s, c->r, c->count, t, c->root, b, c->stream); break;
  }
  /* The description costs a microsecond: only for a line that is written. */
  char d[320];
  if (r || rt_log_enabled(RT_LOG_INFO, RT_SUB_NCCL)) describe(c, d, sizeof d);
  if (r)
    return rt_nccl_fail(rt_nccl_from_baton(r), "%s: baton failed: %s", d, baton_result_string(r));
  LOG_INFO(RT_SUB_NCCL, "%s: baton %s", d, baton_comm_last_algorithm(b));
  c->comm->on_baton++;
  return ncclSuccess;
}

static ncclResult_t run_nccl(const call *c, const char *why) {
  const rt_nccl_real *n = rt_nccl_real_get();
  char d[320] = "";
  int have = 0;
  if (n) {
    switch (c->kind) {
    case CALL_ALLREDUCE: have = n->AllReduce != NULL; break;
    case CALL_ALLGATHER: have = n->AllGather != NULL; break;
    case CALL_REDUCESCATTER: have = n->ReduceScatter != NULL; break;
    case CALL_ALLTOALL: have = n->AlltoAll != NULL; break;
    case CALL_BROADCAST: have = n->Broadcast != NULL; break;
    case CALL_REDUCE: have = n->Reduce != NULL; break;
    case CALL_GATHER: have = n->Gather != NULL; break;
    case CALL_SCATTER: have = n->Scatter != NULL; break;
    }
  }
  int cannot = !have || !c->comm->real;
  if (cannot || rt_log_enabled(RT_LOG_INFO, RT_SUB_NCCL)) describe(c, d, sizeof d);
  if (cannot)
    return rt_nccl_fail(ncclInvalidUsage, "%s: %s, and there is no real NCCL to forward it to (%s)", d, why,
                        !n ? rt_nccl_real_why() : have ? "this communicator has none" : "the loaded NCCL lacks it");
  LOG_INFO(RT_SUB_NCCL, "%s: NCCL (%s)", d, why);
  c->comm->on_nccl++;
  rt_nccl_clear_error();
  ncclComm_t rc = c->comm->real;
  switch (c->kind) {
  case CALL_ALLREDUCE: return n->AllReduce(c->s, c->r, c->count, c->type, c->op, rc, c->stream);
  case CALL_ALLGATHER: return n->AllGather(c->s, c->r, c->count, c->type, rc, c->stream);
  case CALL_REDUCESCATTER: return n->ReduceScatter(c->s, c->r, c->count, c->type, c->op, rc, c->stream);
  case CALL_BROADCAST: return n->Broadcast(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  case CALL_REDUCE: return n->Reduce(c->s, c->r, c->count, c->type, c->op, c->root, rc, c->stream);
  case CALL_GATHER: return n->Gather(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  case CALL_SCATTER: return n->Scatter(c->s, c->r, c->count, c->type, c->root, rc, c->stream);
  default: return n->AlltoAll(c->s, c->r, c->count, c->type, rc, c->stream);
  }
}

static void group_reset(void) {
  free(grp.calls);
  free(grp.defer);
  memset(&grp, 0, sizeof grp);
}

int rt_nccl_in_group(void) { return grp.depth > 0; }

ncclResult_t rt_nccl_group_to_nccl(void) {
  if (grp.depth == 0 || grp.to_nccl) return grp.error;
  const rt_nccl_real *n = rt_nccl_real_get();
  grp.to_nccl = 1;
  ncclResult_t r = n ? n->GroupStart()
                     : rt_nccl_fail(ncclInvalidUsage, "a group holds a call baton does not run, and there is no "
                                    "real NCCL to run the group (%s)", rt_nccl_real_why());
  if (r == ncclSuccess && grp.ncalls)
    LOG_INFO(RT_SUB_NCCL, "group: %d call%s recorded for baton go to NCCL with the rest of the group", grp.ncalls,
             grp.ncalls == 1 ? "" : "s");
  for (int i = 0; i < grp.ncalls && r == ncclSuccess; i++) r = run_nccl(&grp.calls[i], "its group went to NCCL");
  grp.ncalls = 0;
  if (grp.error == ncclSuccess) grp.error = r;
  return r;
}

void rt_nccl_group_defer(struct ncclComm *c) {
  if (grp.ndefer == grp.capdefer) {
    int cap = grp.capdefer ? 2 * grp.capdefer : 8;
    struct ncclComm **v = realloc(grp.defer, cap * sizeof *v);
    if (!v) {
      if (grp.error == ncclSuccess)
        grp.error = rt_nccl_fail(ncclSystemError, "out of memory deferring a communicator's creation");
      return;
    }
    grp.defer = v;
    grp.capdefer = cap;
  }
  grp.defer[grp.ndefer++] = c;
}

/* One collective call: alone, it runs where it can; in a group, it is
 * recorded for baton until a call baton cannot run hands the group to NCCL. */
static ncclResult_t dispatch(const call *c) {
  char name[32];
  snprintf(name, sizeof name, "nccl%s", kind_name[c->kind]);
  ncclResult_t r = rt_nccl_comm_check(c->comm, name);
  if (r) return r;
  if (c->count == 0) {   /* nothing to move, on either side (NCCL does nothing either) */
    LOG_INFO(RT_SUB_NCCL, "%s of 0 elements on rank %d: nothing to do", name, c->comm->rank);
    return ncclSuccess;
  }
  /* Off the root, one of a rooted call's buffers is not used (NULL is fine). */
  int off_root = rooted(c->kind) && c->comm->rank != c->root;
  int need_s = !(off_root && no_send_off_root(c->kind)), need_r = !(off_root && !no_send_off_root(c->kind));
  if ((need_r && !c->r) || (need_s && !c->s))
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: NULL buffer", name, c->comm->rank);
  if (rooted(c->kind) && (c->root < 0 || c->root >= c->comm->nranks))
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: root %d is not a rank (0..%d)", name, c->comm->rank,
                        c->root, c->comm->nranks - 1);
  const char *algo = NULL, *no = baton_refuses(c, &algo);
  if (grp.depth == 0) return no ? run_nccl(c, no) : run_baton(c);
  if (grp.to_nccl) return run_nccl(c, no ? no : "its group went to NCCL");
  if (no) {
    if ((r = rt_nccl_group_to_nccl())) return r;
    return run_nccl(c, no);
  }
  if (grp.ncalls == grp.cap) {
    int cap = grp.cap ? 2 * grp.cap : 16;
    call *v = realloc(grp.calls, cap * sizeof *v);
    if (!v) return rt_nccl_fail(ncclSystemError, "%s: out of memory recording a group", name);
    grp.calls = v;
    grp.cap = cap;
  }
  grp.calls[grp.ncalls++] = *c;
  if (rt_log_enabled(RT_LOG_TRACE, RT_SUB_NCCL)) {
    char d[320];
    describe(c, d, sizeof d);
    LOG_TRACE(RT_SUB_NCCL, "%s: recorded for baton's %s at the end of the group", d, algo);
  }
  return ncclSuccess;
}

ncclResult_t rt_nccl_AllReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  call c = {CALL_ALLREDUCE, s, r, count, t, op, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_AllGather(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
                               cudaStream_t stream) {
  call c = {CALL_ALLGATHER, s, r, count, t, ncclSum, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_ReduceScatter(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                                   ncclComm_t comm, cudaStream_t stream) {
  call c = {CALL_REDUCESCATTER, s, r, count, t, op, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_AlltoAll(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
                              cudaStream_t stream) {
  call c = {CALL_ALLTOALL, s, r, count, t, ncclSum, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Broadcast(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                               cudaStream_t stream) {
  call c = {CALL_BROADCAST, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

/* The deprecated in-place form. */
ncclResult_t rt_nccl_Bcast(void *buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream) {
  return rt_nccl_Broadcast(buff, buff, count, t, root, comm, stream);
}

ncclResult_t rt_nccl_Reduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  call c = {CALL_REDUCE, s, r, count, t, op, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Gather(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  call c = {CALL_GATHER, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Scatter(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                             cudaStream_t stream) {
  call c = {CALL_SCATTER, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_GroupStart(void) {
  grp.depth++;
  return ncclSuccess;
}

/* The outermost end: NCCL's group ends, or the recorded calls run on
 * baton in order; then the communicators created inside get baton's side. */
ncclResult_t rt_nccl_GroupEnd(void) {
  if (grp.depth == 0) return rt_nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--grp.depth > 0) return ncclSuccess;
  ncclResult_t r = grp.error;
  const rt_nccl_real *n = rt_nccl_real_get();
  if (grp.to_nccl && n) {
    ncclResult_t e = n->GroupEnd();
    if (r == ncclSuccess) r = e;
  }
  if (grp.ndefer && (r == ncclSuccess || r == ncclInProgress)) r = rt_nccl_comm_attach(grp.defer, grp.ndefer);
  if (!grp.to_nccl && grp.ncalls) {
    if (grp.ncalls > 1) LOG_INFO(RT_SUB_NCCL, "group of %d calls: all on baton", grp.ncalls);
    /* In a group of baton's own: checked one by one, launched together
     * (on several GPUs at once). */
    baton_group_start();
    for (int i = 0; i < grp.ncalls && r == ncclSuccess; i++) r = run_baton(&grp.calls[i]);
    baton_result be = baton_group_end();
    if (be && r == ncclSuccess)
      r = rt_nccl_fail(rt_nccl_from_baton(be), "group of %d calls: baton's launch failed: %s", grp.ncalls,
                       baton_result_string(be));
  }
  group_reset();
  return r;
}

/* NCCL estimates the group's time; nothing runs, no communicator is made. */
ncclResult_t rt_nccl_GroupSimulateEnd(ncclSimInfo_t *info) {
  if (grp.depth == 0) return rt_nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  if (grp.depth > 1) {
    grp.depth--;
    return ncclSuccess;
  }
  const rt_nccl_real *n = rt_nccl_real_get();
  ncclResult_t r = n && n->GroupSimulateEnd ? rt_nccl_group_to_nccl() : rt_nccl_unavailable("ncclGroupSimulateEnd");
  if (r == ncclSuccess) r = n->GroupSimulateEnd(info);
  else if (grp.to_nccl && n) n->GroupEnd();
  group_reset();
  return r;
}
