/* rt_nccl_coll.c -- where each call of baton's libnccl.so.2 runs: on baton
 * when baton has an algorithm for it, else on the real NCCL; a group runs
 * whole on baton or whole on NCCL (its state is rt_nccl_group.c's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_comm.h"
#include "rt_log.h"
#include "rt_nccl.h"
#include "rt_param.h"

_Static_assert((int)ncclSum == (int)baton_sum && (int)ncclProd == (int)baton_prod && (int)ncclMax == (int)baton_max &&
               (int)ncclMin == (int)baton_min && (int)ncclAvg == (int)baton_avg, "NCCL's operators are baton's");

static const ir_coll kind_coll[] = {IR_COLL_ALLREDUCE, IR_COLL_ALLGATHER, IR_COLL_REDUCESCATTER, IR_COLL_ALLTOALL,
                                   IR_COLL_BROADCAST, IR_COLL_REDUCE, IR_COLL_GATHER, IR_COLL_SCATTER};

/* Off the root, NCCL does not use a Broadcast's or Scatter's sendbuff, nor
 * a Reduce's or Gather's recvbuff. */
static int no_send_off_root(rt_nccl_kind k) { return k == RT_NCCL_BROADCAST || k == RT_NCCL_SCATTER; }

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

/* Why baton cannot run the call, or NULL when it can (then *ai is the
 * algorithm it would choose and *algo its name). */
static const char *baton_refuses(const rt_nccl_call *c, int *ai_out, const char **algo) {
  if (!c->comm->baton) return rt_param_int(RT_PARAM_ENABLE) ? "no baton communicator" : "baton is off (BATON_ENABLE=0)";
  int t = baton_type(c->type);
  if (t < 0) return "a type baton does not run";
  if ((int)c->op < 0 || (int)c->op >= (int)ncclNumOps) return "a custom operator";
  ir_coll coll = kind_coll[c->kind];
  int ai = rt_nccl_rooted(c->kind) ? rt_comm_choose_rooted(c->comm->baton, coll, c->root, c->s, c->r, c->count, t, c->stream)
                           : rt_comm_choose(c->comm->baton, coll, c->s, c->r, c->count, t, c->stream);
  if (ai < 0) return "no baton algorithm fits";
  *ai_out = ai;
  *algo = baton_comm_algorithm_name(c->comm->baton, ai);
  return NULL;
}

/* Runs the call on baton: by algorithm ai where baton_refuses just chose
 * it for this very call, else (ai < 0: a call recorded in a group, run at
 * its end) by the runtime's choice then. */
static ncclResult_t run_baton(const rt_nccl_call *c, int ai) {
  baton_comm *b = c->comm->baton;
  baton_result r = rt_comm_collective(b, kind_coll[c->kind], c->root, ai, c->s, c->r, c->count, baton_type(c->type),
                                      (int)c->op, c->stream);
  /* The description costs a microsecond: only for a line that is written. */
  char d[320];
  if (r || rt_log_enabled(RT_LOG_INFO, RT_SUB_NCCL)) rt_nccl_describe(c, d, sizeof d);
  if (r)
    return rt_nccl_fail(rt_nccl_from_baton(r), "%s: baton failed: %s", d, baton_result_string(r));
  LOG_INFO(RT_SUB_NCCL, "%s: baton %s", d, baton_comm_last_algorithm(b));
  c->comm->on_baton++;
  return ncclSuccess;
}

/* NCCL's checks of a collective's arguments (its ArgsCheck), made before a
 * count of 0 does nothing, as NCCL makes them: the communicator, the root
 * (of the rooted kinds), the type and the operator (one made by
 * ncclRedOpCreatePreMulSum is the real NCCL's to check); then, where
 * elements move, the buffers the call uses (NCCL checks those only with
 * NCCL_CHECK_POINTERS=1; a NULL one would fault on the GPU).  ncclSuccess,
 * or the error, said naming the call (`name`) and the rank. */
static ncclResult_t check_args(const rt_nccl_call *c, const char *name) {
  ncclResult_t r = rt_nccl_comm_check(c->comm, name);
  if (r) return r;
  int rank = c->comm->rank;
  if (rt_nccl_rooted(c->kind) && (c->root < 0 || c->root >= c->comm->nranks))
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: root %d is not a rank (0..%d)", name, rank, c->root,
                        c->comm->nranks - 1);
  if ((int)c->type < 0 || (int)c->type >= (int)ncclNumTypes)
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: datatype %d is not an NCCL type (0..%d)", name, rank,
                        (int)c->type, (int)ncclNumTypes - 1);
  if ((int)c->op < 0)   /* ncclMaxRedOp is INT_MAX: no int lies beyond it */
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: reduction operation %d is not an NCCL operator", name,
                        rank, (int)c->op);
  if (c->count == 0) return ncclSuccess;
  /* Off the root, one of a rooted call's buffers is not used (NULL is fine). */
  int off_root = rt_nccl_rooted(c->kind) && rank != c->root;
  int need_s = !(off_root && no_send_off_root(c->kind)), need_r = !(off_root && !no_send_off_root(c->kind));
  if ((need_r && !c->r) || (need_s && !c->s))
    return rt_nccl_fail(ncclInvalidArgument, "%s on rank %d: NULL buffer", name, rank);
  return ncclSuccess;
}

/* Where one collective call goes, its arguments checked: alone, it runs
 * where it can; in a group, it is recorded for baton until a call baton
 * cannot run hands the group to NCCL. */
static ncclResult_t place(const rt_nccl_call *c) {
  char name[32];
  snprintf(name, sizeof name, "nccl%s", rt_nccl_kind_name[c->kind]);
  ncclResult_t r = check_args(c, name);
  if (r) return r;
  /* Nothing to move, on either side (NCCL does nothing either); but an
   * operator of ncclRedOpCreatePreMulSum goes to NCCL, which checks it. */
  if (c->count == 0 && (int)c->op < (int)ncclNumOps) {
    LOG_INFO(RT_SUB_NCCL, "%s of 0 elements on rank %d: nothing to do", name, c->comm->rank);
    return ncclSuccess;
  }
  const char *algo = NULL;
  int ai = -1;
  const char *no = baton_refuses(c, &ai, &algo);
  const rt_nccl_group *g = rt_nccl_group_get();
  if (g->depth == 0) return no ? rt_nccl_forward(c, no) : run_baton(c, ai);
  if (g->to_nccl) return rt_nccl_forward(c, no ? no : "its group went to NCCL");
  if (no) {
    if ((r = rt_nccl_group_to_nccl())) return r;
    return rt_nccl_forward(c, no);
  }
  if ((r = rt_nccl_group_record(c, name))) return r;
  if (rt_log_enabled(RT_LOG_TRACE, RT_SUB_NCCL)) {
    char d[320];
    rt_nccl_describe(c, d, sizeof d);
    LOG_TRACE(RT_SUB_NCCL, "%s: recorded for baton's %s at the end of the group", d, algo);
  }
  return ncclSuccess;
}

/* One collective call; inside a group its error is the group's (NCCL's
 * rule: the outermost ncclGroupEnd then fails and launches nothing). */
static ncclResult_t dispatch(const rt_nccl_call *c) { return rt_nccl_group_check(place(c)); }

ncclResult_t rt_nccl_AllReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_ALLREDUCE, s, r, count, t, op, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_AllGather(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
                               cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_ALLGATHER, s, r, count, t, ncclSum, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_ReduceScatter(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                                   ncclComm_t comm, cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_REDUCESCATTER, s, r, count, t, op, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_AlltoAll(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t comm,
                              cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_ALLTOALL, s, r, count, t, ncclSum, comm, stream, 0};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Broadcast(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                               cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_BROADCAST, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

/* The deprecated in-place form. */
ncclResult_t rt_nccl_Bcast(void *buff, size_t count, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t stream) {
  return rt_nccl_Broadcast(buff, buff, count, t, root, comm, stream);
}

ncclResult_t rt_nccl_Reduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                            ncclComm_t comm, cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_REDUCE, s, r, count, t, op, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Gather(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_GATHER, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_Scatter(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                             cudaStream_t stream) {
  rt_nccl_call c = {RT_NCCL_SCATTER, s, r, count, t, ncclSum, comm, stream, root};
  return dispatch(&c);
}

ncclResult_t rt_nccl_GroupStart(void) {
  rt_nccl_group *g = rt_nccl_group_get();
  g->depth++;
  return ncclSuccess;
}

/* The outermost end: NCCL's group ends, or the recorded calls run on
 * baton in order; then the communicators created inside get baton's side.
 * A group holding a call that failed (its error, rt_nccl_group_check)
 * launches none of its calls and returns that error, as NCCL's does. */
ncclResult_t rt_nccl_GroupEnd(void) {
  rt_nccl_group *g = rt_nccl_group_get();
  if (g->depth == 0) return rt_nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--g->depth > 0) return ncclSuccess;
  if (g->error != ncclSuccess) {
    ncclResult_t r = rt_nccl_group_end_nccl();
    LOG_INFO(RT_SUB_NCCL, "ncclGroupEnd: a call inside the group failed: none of its calls runs%s (as NCCL's "
             "group, it returns the error, %d)", g->ndefer ? " and the communicators created in it get no baton side"
             : "", (int)r);
    rt_nccl_group_reset();
    return r;
  }
  ncclResult_t r = rt_nccl_group_end_nccl();
  if (g->ndefer && (r == ncclSuccess || r == ncclInProgress)) r = rt_nccl_comm_attach(g->defer, g->ndefer);
  if (!g->to_nccl && g->ncalls) {
    if (g->ncalls > 1) LOG_INFO(RT_SUB_NCCL, "group of %d calls: all on baton", g->ncalls);
    /* In a group of baton's own: checked one by one, launched together
     * (on several GPUs at once). */
    baton_group_start();
    for (int i = 0; i < g->ncalls && r == ncclSuccess; i++) r = run_baton(&g->calls[i], -1);
    baton_result be = baton_group_end();
    if (be && r == ncclSuccess)
      r = rt_nccl_fail(rt_nccl_from_baton(be), "group of %d calls: baton's launch failed: %s", g->ncalls,
                       baton_result_string(be));
  }
  rt_nccl_group_reset();
  return r;
}

/* NCCL estimates the group's time; nothing runs, no communicator is made.
 * A group with an error returns it, as ncclGroupEnd does. */
ncclResult_t rt_nccl_GroupSimulateEnd(ncclSimInfo_t *info) {
  rt_nccl_group *g = rt_nccl_group_get();
  if (g->depth == 0) return rt_nccl_fail(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  if (g->depth > 1) {
    g->depth--;
    return ncclSuccess;
  }
  const rt_nccl_real *n = rt_nccl_real_get();
  ncclResult_t r = g->error;
  if (r == ncclSuccess)
    r = n && n->GroupSimulateEnd ? rt_nccl_group_to_nccl() : rt_nccl_unavailable("ncclGroupSimulateEnd");
  if (r == ncclSuccess) {
    r = n->GroupSimulateEnd(info);
  } else {
    rt_nccl_group_check(r);
    r = rt_nccl_group_end_nccl();
  }
  rt_nccl_group_reset();
  return r;
}
