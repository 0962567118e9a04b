/* rt_nccl_api.c -- every function baton's libnccl.so.2 exports, generated
 * from rt_nccl.def: ncclX, its profiling alias pncclX, and for the rows
 * baton does not implement the forwarding to the real NCCL. */
#include "rt_log.h"
#include "rt_nccl.h"

/* OWN: the exported name calls baton's implementation. */
#define RT_NCCL_BODY_OWN(ret, name, args) return rt_nccl_##name args;

/* OWNC: the same, but a communicator of the real NCCL itself goes back to it. */
#define RT_NCCL_BODY_OWNC(ret, name, args)                                 \
  const rt_nccl_real *f_ = rt_nccl_foreign(comm);                           \
  if (f_ && f_->name) return f_->name args;                                 \
  return rt_nccl_##name args;

/* OWNG: OWNC for a collective; inside a group, the real NCCL's own
 * communicator's call first hands the group to NCCL, and its error is the
 * group's. */
#define RT_NCCL_BODY_OWNG(ret, name, args)                                 \
  const rt_nccl_real *f_ = rt_nccl_foreign(comm);                           \
  if (f_ && f_->name) {                                                     \
    ncclResult_t g_ = rt_nccl_group_to_nccl();                              \
    return rt_nccl_group_check(g_ != ncclSuccess ? g_ : f_->name args);     \
  }                                                                         \
  return rt_nccl_##name args;

/* FWD: to the real NCCL, after handing an open group to it. */
#define RT_NCCL_BODY_FWD(ret, name, args)                                  \
  const rt_nccl_real *n_ = rt_nccl_real_get();                              \
  if (!n_ || !n_->name) return rt_nccl_unavailable("nccl" #name);           \
  if (rt_nccl_in_group()) {                                                 \
    ncclResult_t g_ = rt_nccl_group_to_nccl();                              \
    if (g_ != ncclSuccess) return g_;                                       \
  }                                                                         \
  LOG_INFO(RT_SUB_NCCL, "nccl" #name ": NCCL (baton does not run it)");    \
  rt_nccl_clear_error();                                                    \
  return n_->name args;

#define C(comm) rt_nccl_real_comm(comm)
#define F(ret, name, params, args, how)                                     \
  __attribute__((visibility("default"))) ret nccl##name params { RT_NCCL_BODY_##how(ret, name, args) } \
  extern __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name), visibility("default")));
#include "rt_nccl.def"
#undef F
#undef C
