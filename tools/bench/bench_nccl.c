/* bench_nccl.c -- NCCL loaded with dlopen for `baton bench`: nccl.h gives
 * the types only; every function is resolved at run time. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_nccl.h"
#include "rt_param.h"

struct bench_nccl {
  void *dl;
  char desc[200];
  ncclResult_t (*GetVersion)(int *);
  ncclResult_t (*GetUniqueId)(ncclUniqueId *);
  ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
  ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommRegister)(const ncclComm_t, void *, size_t, void **);
  ncclResult_t (*CommDeregister)(const ncclComm_t, void *);
  ncclResult_t (*MemAlloc)(void **, size_t);   /* may be NULL (NCCL before 2.19) */
  ncclResult_t (*MemFree)(void *);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AlltoAll)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t); /* may be NULL */
  ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  /* Gather and Scatter may be NULL (bench_nccl_lacks). */
  ncclResult_t (*Gather)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Scatter)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  const char *(*GetErrorString)(ncclResult_t);
};

bench_nccl *bench_nccl_open(char *why, size_t len) {
  const char *lib = rt_param_str(RT_PARAM_NCCL_LIB);
  if (!lib || !*lib) lib = "libnccl.so.2";
  void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(why, len, "cannot load %s: %s", lib, dlerror());
    return NULL;
  }
  bench_nccl *n = calloc(1, sizeof *n);
  n->dl = dl;
  /* Required symbols; ncclAlltoAll, ncclGather and ncclScatter (NCCL 2.28
   * and later) are optional. */
  struct { void **fn; const char *name; int required; } sym[] = {
    {(void **)&n->GetVersion, "ncclGetVersion", 1},
    {(void **)&n->GetUniqueId, "ncclGetUniqueId", 1},
    {(void **)&n->CommInitAll, "ncclCommInitAll", 1},
    {(void **)&n->CommInitRank, "ncclCommInitRank", 1},
    {(void **)&n->CommDestroy, "ncclCommDestroy", 1},
    {(void **)&n->CommAbort, "ncclCommAbort", 1},
    {(void **)&n->CommGetAsyncError, "ncclCommGetAsyncError", 1},
    {(void **)&n->GroupStart, "ncclGroupStart", 1},
    {(void **)&n->GroupEnd, "ncclGroupEnd", 1},
    {(void **)&n->AllReduce, "ncclAllReduce", 1},
    {(void **)&n->AllGather, "ncclAllGather", 1},
    {(void **)&n->ReduceScatter, "ncclReduceScatter", 1},
    {(void **)&n->AlltoAll, "ncclAlltoAll", 0},
    {(void **)&n->Broadcast, "ncclBroadcast", 1},
    {(void **)&n->Reduce, "ncclReduce", 1},
    {(void **)&n->Gather, "ncclGather", 0},
    {(void **)&n->Scatter, "ncclScatter", 0},
    {(void **)&n->Send, "ncclSend", 1},
    {(void **)&n->Recv, "ncclRecv", 1},
    {(void **)&n->GetErrorString, "ncclGetErrorString", 1},
    {(void **)&n->CommRegister, "ncclCommRegister", 0},
    {(void **)&n->CommDeregister, "ncclCommDeregister", 0},
    {(void **)&n->MemAlloc, "ncclMemAlloc", 0},
    {(void **)&n->MemFree, "ncclMemFree", 0},
  };
  for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++) {
    *sym[i].fn = dlsym(dl, sym[i].name);
    if (!*sym[i].fn && sym[i].required) {
      snprintf(why, len, "%s has no %s (not NCCL, or older than 2.10?)", lib, sym[i].name);
      bench_nccl_close(n);
      return NULL;
    }
  }
  int v = 0;
  n->GetVersion(&v);
  /* NCCL_VERSION: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after. */
  int major = v >= 10000 ? v / 10000 : v / 1000, minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10, patch = v % 100;
  snprintf(n->desc, sizeof n->desc, "NCCL %d.%d.%d (%s), all-to-all by %s", major, minor, patch, lib,
           n->AlltoAll ? "ncclAlltoAll" : "grouped ncclSend/ncclRecv");
  return n;
}

void bench_nccl_close(bench_nccl *n) {
  if (!n) return;
  if (n->dl) dlclose(n->dl);
  free(n);
}

const char *bench_nccl_describe(const bench_nccl *n) { return n->desc; }

const char *bench_nccl_lacks(const bench_nccl *n, bench_coll c) {
  if (c == BENCH_GATHER && !n->Gather) return "ncclGather";
  if (c == BENCH_SCATTER && !n->Scatter) return "ncclScatter";
  return NULL;
}

static int fail(bench_nccl *n, ncclResult_t r, const char *what, char *err, size_t len) {
  if (r == ncclSuccess) return 0;
  snprintf(err, len, "%s failed: %s", what, n->GetErrorString(r));
  return -1;
}

int bench_nccl_unique_id(bench_nccl *n, char id[128], char *err, size_t len) {
  ncclUniqueId u;
  if (fail(n, n->GetUniqueId(&u), "ncclGetUniqueId", err, len)) return -1;
  memcpy(id, u.internal, 128);
  return 0;
}

int bench_nccl_init_all(bench_nccl *n, void **comms, int ndev, char *err, size_t len) {
  return fail(n, n->CommInitAll((ncclComm_t *)comms, ndev, NULL), "ncclCommInitAll", err, len);
}

int bench_nccl_init_rank(bench_nccl *n, void **comm, int nranks, const char id[128], int rank, char *err, size_t len) {
  ncclUniqueId u;
  memcpy(u.internal, id, 128);
  return fail(n, n->CommInitRank((ncclComm_t *)comm, nranks, u, rank), "ncclCommInitRank", err, len);
}

static ncclDataType_t nccl_type(ip_dtype t) {
  switch (t) {
  case IP_F32: return ncclFloat32;
  case IP_F64: return ncclFloat64;
  case IP_F16: return ncclFloat16;
  case IP_BF16: return ncclBfloat16;
  case IP_I32: return ncclInt32;
  case IP_U32: return ncclUint32;
  case IP_I64: return ncclInt64;
  case IP_U64: return ncclUint64;
  case IP_I8: return ncclInt8;
  default: return ncclUint8;
  }
}

static ncclRedOp_t nccl_op(ip_redop op) {
  switch (op) {
  case IP_OP_SUM: return ncclSum;
  case IP_OP_PROD: return ncclProd;
  case IP_OP_MAX: return ncclMax;
  case IP_OP_MIN: return ncclMin;
  default: return ncclAvg;
  }
}

int bench_nccl_launch(bench_nccl *n, bench_coll c, void *const *comms, int nlocal, int nranks, void *const *send,
                      void *const *recv, size_t count, ip_dtype t, ip_redop op, int root, cudaStream_t *streams,
                      char *err, size_t len) {
  ncclDataType_t dt = nccl_type(t);
  size_t es = (size_t)ip_dtype_size[t];
  ncclResult_t r = n->GroupStart();
  const char *what = "ncclGroupStart";
  for (int i = 0; i < nlocal && r == ncclSuccess; i++) {
    ncclComm_t comm = (ncclComm_t)comms[i];
    switch (c) {
    case BENCH_ALLREDUCE:
      what = "ncclAllReduce";
      r = n->AllReduce(send[i], recv[i], count, dt, nccl_op(op), comm, streams[i]);
      break;
    case BENCH_ALLGATHER:
      what = "ncclAllGather";
      r = n->AllGather(send[i], recv[i], count, dt, comm, streams[i]);
      break;
    case BENCH_REDUCESCATTER:
      what = "ncclReduceScatter";
      r = n->ReduceScatter(send[i], recv[i], count, dt, nccl_op(op), comm, streams[i]);
      break;
    case BENCH_BROADCAST:
      what = "ncclBroadcast";
      r = n->Broadcast(send[i], recv[i], count, dt, root, comm, streams[i]);
      break;
    case BENCH_REDUCE:
      what = "ncclReduce";
      r = n->Reduce(send[i], recv[i], count, dt, nccl_op(op), root, comm, streams[i]);
      break;
    case BENCH_GATHER:
      what = "ncclGather";
      r = n->Gather(send[i], recv[i], count, dt, root, comm, streams[i]);
      break;
    case BENCH_SCATTER:
      what = "ncclScatter";
      r = n->Scatter(send[i], recv[i], count, dt, root, comm, streams[i]);
      break;
    default:
      if (n->AlltoAll) {
        what = "ncclAlltoAll";
        r = n->AlltoAll(send[i], recv[i], count, dt, comm, streams[i]);
        break;
      }
      /* As nccl-tests does: one send and one receive per peer, grouped. */
      what = "ncclSend/ncclRecv";
      for (int p = 0; p < nranks && r == ncclSuccess; p++) {
        r = n->Send((const char *)send[i] + p * count * es, count, dt, p, comm, streams[i]);
        if (r == ncclSuccess) r = n->Recv((char *)recv[i] + p * count * es, count, dt, p, comm, streams[i]);
      }
      break;
    }
  }
  ncclResult_t e = n->GroupEnd();
  if (r == ncclSuccess && e != ncclSuccess) {
    r = e;
    what = "ncclGroupEnd";
  }
  return fail(n, r, what, err, len);
}

int bench_nccl_async_error(bench_nccl *n, void *comm, char *err, size_t len) {
  ncclResult_t a = ncclSuccess;
  ncclResult_t r = n->CommGetAsyncError((ncclComm_t)comm, &a);
  if (r != ncclSuccess) return fail(n, r, "ncclCommGetAsyncError", err, len);
  if (a != ncclSuccess && a != ncclInProgress) return fail(n, a, "asynchronous NCCL error", err, len);
  return 0;
}

void bench_nccl_abort(bench_nccl *n, void *comm) { n->CommAbort((ncclComm_t)comm); }

void bench_nccl_destroy(bench_nccl *n, void *comm) { n->CommDestroy((ncclComm_t)comm); }

int bench_nccl_register(bench_nccl *n, void *comm, void *buf, size_t bytes, void **handle, char *err, size_t len) {
  *handle = NULL;
  if (!n->CommRegister) {
    snprintf(err, len, "this NCCL has no ncclCommRegister");
    return -1;
  }
  return fail(n, n->CommRegister((ncclComm_t)comm, buf, bytes, handle), "ncclCommRegister", err, len);
}

void bench_nccl_deregister(bench_nccl *n, void *comm, void *handle) {
  if (n->CommDeregister && handle) n->CommDeregister((ncclComm_t)comm, handle);
}

int bench_nccl_mem_alloc(bench_nccl *n, void **p, size_t bytes, char *err, size_t len) {
  if (!n->MemAlloc || !n->MemFree) {
    snprintf(err, len, "the loaded NCCL has no ncclMemAlloc (it came in NCCL 2.19)");
    return -1;
  }
  ncclResult_t r = n->MemAlloc(p, bytes);
  if (r != ncclSuccess) {
    snprintf(err, len, "ncclMemAlloc of %zu bytes: %s", bytes, n->GetErrorString(r));
    *p = NULL;
    return -1;
  }
  return 0;
}

void bench_nccl_mem_free(bench_nccl *n, void *p) {
  if (p && n && n->MemFree) n->MemFree(p);
}
