/* rt_nccl.h -- the insides of baton's libnccl.so.2 (docs/NCCL.md), shared
 * by rt_nccl_api.c (the exported functions), rt_nccl_load.c (the real
 * NCCL), rt_nccl_group.c (a thread's group, forwarding a call to the real
 * NCCL), rt_nccl_comm.c (communicators) and rt_nccl_coll.c (collectives
 * and the group calls). */
#ifndef RT_NCCL_H
#define RT_NCCL_H

#include <nccl.h>

#include "baton.h"

/* What an ncclComm_t of this library points to: baton's communicator
 * beside the real NCCL's.  Either may be missing, not both. */
#define RT_NCCL_MAGIC 0xba70cc01u
struct ncclComm {
  unsigned magic;
  ncclComm_t real;        /* the real NCCL's communicator; NULL without NCCL */
  baton_comm *baton;      /* NULL: every call goes to the real NCCL */
  int rank, nranks, dev;  /* known at creation (the real comm's when present) */
  int nonblocking;        /* non-blocking (config->blocking = 0, NCCL_COMM_BLOCKING=0): NCCL only */
  ncclUniqueId id;        /* the id it was made with (baton's without NCCL); zero for a split */
  unsigned long long on_baton, on_nccl;   /* collective calls (those baton may run) run on each */
};

/* The real NCCL: one function pointer per row of rt_nccl.def (NULL where
 * the loaded NCCL lacks it). */
typedef struct rt_nccl_real {
  char path[256];
  int version;
#define F(ret, name, params, args, how) ret (*name) params;
#include "rt_nccl.def"
#undef F
} rt_nccl_real;

/* The real NCCL, loaded on first use (BATON_NCCL_LIB, else the usual
 * places; never this library itself); NULL when there is none. */
const rt_nccl_real *rt_nccl_real_get(void);

/* Why there is no real NCCL ("no NCCL library: BATON_NCCL_LIB=x: ..."). */
const char *rt_nccl_real_why(void);

/* The baton-side implementations of the OWN, OWNC and OWNG rows of rt_nccl.def. */
#define F(ret, name, params, args, how) RT_NCCL_DECL_##how(ret, name, params)
#define RT_NCCL_DECL_OWN(ret, name, params) ret rt_nccl_##name params;
#define RT_NCCL_DECL_OWNC(ret, name, params) ret rt_nccl_##name params;
#define RT_NCCL_DECL_OWNG(ret, name, params) ret rt_nccl_##name params;
#define RT_NCCL_DECL_FWD(ret, name, params)
#include "rt_nccl.def"
#undef F
#undef RT_NCCL_DECL_OWN
#undef RT_NCCL_DECL_OWNC
#undef RT_NCCL_DECL_OWNG
#undef RT_NCCL_DECL_FWD

/* ncclSuccess when c is a communicator of this library (and its device
 * becomes the thread's log device); else ncclInvalidArgument and a WARN
 * naming `call`. */
ncclResult_t rt_nccl_comm_check(ncclComm_t c, const char *call);

/* The real communicator of a communicator of this library; NULL for
 * NULL; a pointer that is not one of ours is handed on unchanged when
 * there is a real NCCL (it is the real NCCL's own), else NULL (WARN). */
ncclComm_t rt_nccl_real_comm(ncclComm_t c);

/* The real NCCL when c is a communicator this library did not make and a
 * real NCCL is loaded (c is then the real NCCL's own); else NULL. */
const rt_nccl_real *rt_nccl_foreign(ncclComm_t c);

/* Errors: logs "what" at WARN, keeps it for ncclGetLastError, returns r. */
ncclResult_t rt_nccl_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A forwarded call that has no real NCCL to go to (ncclInvalidUsage). */
ncclResult_t rt_nccl_unavailable(const char *call);
/* The last message rt_nccl_fail kept, or NULL when the last error was
 * the real NCCL's (rt_nccl_clear_error). */
const char *rt_nccl_last_error(void);
void rt_nccl_clear_error(void);
ncclResult_t rt_nccl_from_baton(baton_result r);

/* The collectives this library may run on baton (rooted from Broadcast on). */
typedef enum {
  RT_NCCL_ALLREDUCE, RT_NCCL_ALLGATHER, RT_NCCL_REDUCESCATTER, RT_NCCL_ALLTOALL, RT_NCCL_BROADCAST, RT_NCCL_REDUCE,
  RT_NCCL_GATHER, RT_NCCL_SCATTER
} rt_nccl_kind;
extern const char *const rt_nccl_kind_name[];   /* "AllReduce", ... */
static inline int rt_nccl_rooted(rt_nccl_kind k) { return k >= RT_NCCL_BROADCAST; }

/* One call of a collective baton may run, as the application made it. */
typedef struct rt_nccl_call {
  rt_nccl_kind kind;
  const void *s;
  void *r;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  struct ncclComm *comm;
  cudaStream_t stream;
  int root;                 /* the rooted kinds */
} rt_nccl_call;

/* The group state of one thread (NCCL's groups are per thread too). */
typedef struct rt_nccl_group {
  int depth;                /* nesting of ncclGroupStart */
  int to_nccl;              /* handed to NCCL: its ncclGroupStart was called */
  ncclResult_t error;       /* the group's error: the last call inside it that failed (NCCL's rule) */
  rt_nccl_call *calls;      /* recorded for baton, in order */
  int ncalls, cap;
  struct ncclComm **defer;  /* created inside: baton's side at the end */
  int ndefer, capdefer;
} rt_nccl_group;

/* Groups (rt_nccl_group.c): this thread's state, read and changed by the
 * group calls of rt_nccl_coll.c; emptied (its lists freed) by reset. */
rt_nccl_group *rt_nccl_group_get(void);
void rt_nccl_group_reset(void);

/* Appends c to this thread's group's calls for baton; ncclSystemError
 * (said, naming `name`) when out of memory. */
ncclResult_t rt_nccl_group_record(const rt_nccl_call *c, const char *name);

/* The NCCL-style description of a call for the log. */
void rt_nccl_describe(const rt_nccl_call *c, char *buf, size_t n);

/* Runs c on the real NCCL, logging `why` at INFO; ncclInvalidUsage (said)
 * when there is no real NCCL, the loaded one lacks the call, or the
 * communicator has no real side. */
ncclResult_t rt_nccl_forward(const rt_nccl_call *c, const char *why);

/* Inside a group, a call that must go to NCCL
 * first hands the group to NCCL: ncclGroupStart, then the calls recorded
 * so far, in order.  Returns the first error of that (ncclSuccess when
 * the group is NCCL's already); the error is the group's too. */
int rt_nccl_in_group(void);
ncclResult_t rt_nccl_group_to_nccl(void);

/* As NCCL's groups: an error (not ncclInProgress) of a call made inside a
 * group becomes the group's error, the last such one winning; the
 * outermost ncclGroupEnd returns it and launches none of the group's
 * calls.  Outside a group nothing.  Returns r. */
ncclResult_t rt_nccl_group_check(ncclResult_t r);

/* The outermost end of a group handed to NCCL: NCCL's ncclGroupEnd, after
 * giving NCCL's group an invalid call of its own when the group has an
 * error, so that NCCL launches none of the calls it holds.  Returns the
 * group's error when there is one, else NCCL's result; nothing, and the
 * group's error, when the group is not NCCL's. */
ncclResult_t rt_nccl_group_end_nccl(void);

/* A communicator created inside a group gets its baton side at the
 * outermost ncclGroupEnd, after NCCL has made its own. */
void rt_nccl_group_defer(struct ncclComm *c);

/* Gives communicators their baton side (rt_nccl_comm.c): every rank of a
 * communicator made here at once (as ncclCommInitAll does), the others
 * over the real NCCL (rank 0's baton id broadcast) or, without NCCL, from
 * the id they were created with.  All n are created together (one thread each), as a
 * group of ncclCommInitRank calls of one thread needs. */
ncclResult_t rt_nccl_comm_attach(struct ncclComm **v, int n);

/* True when baton could run anything on a communicator of `nranks`
 * ranks: BATON_ENABLE is 1 and an algorithm source is set (BATON_ALGO_*,
 * MSCCL_XML_FILES) or the installed default set has programs for nranks. */
int rt_nccl_baton_wanted(int nranks);

#endif
