/* fake_nccl.c -- a stand-in for the real NCCL in the tests of baton's
 * libnccl.so.2 (tests/test_nccl.c): each function appends one line
 * "ncclName(arguments)" to a log that fake_nccl_log() returns, and
 * succeeds (but a collective on a NULL communicator, which fails, and
 * fails its group, as NCCL's).  Built as libfakenccl.so (not named
 * libnccl) and reached through BATON_NCCL_LIB.  No GPU, no communication. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_VERSION 22703   /* 2.27.3: not the header's, so a test can tell */

#include "fake_log.h"

const char *fake_nccl_log(void) { return log_buf; }
void fake_nccl_log_clear(void) { log_clear(); }

/* NCCL's groups, as far as the tests need them: a collective on a NULL
 * communicator is an argument error; inside a group it is the group's,
 * and the outermost ncclGroupEnd returns it, launching nothing. */
static int group_depth;
static ncclResult_t group_error;

static ncclResult_t arg_check(ncclComm_t c) {
  if (c) return ncclSuccess;
  if (group_depth) group_error = ncclInvalidArgument;
  return ncclInvalidArgument;
}

/* A fake communicator: what it was created with. */
struct ncclComm { int nranks, rank, dev; };

static ncclComm_t fake_comm(int nranks, int rank, int dev) {
  ncclComm_t c = calloc(1, sizeof *c);
  c->nranks = nranks;
  c->rank = rank;
  c->dev = dev;
  return c;
}

ncclResult_t ncclGetVersion(int *v) { *v = FAKE_VERSION; rec("ncclGetVersion()"); return ncclSuccess; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  memset(id->internal, 0x5a, sizeof id->internal);
  rec("ncclGetUniqueId()");
  return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "fake: no error" : "fake: error"; }
const char *ncclGetLastError(ncclComm_t c) { return "fake: last error"; }

ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank) {
  *c = fake_comm(nranks, rank, 0);
  rec("ncclCommInitRank(nranks=%d, id=%02x, rank=%d) = %p", nranks, (unsigned char)id.internal[0], rank, (void *)*c);
  return ncclSuccess;
}
/* NCCL_COMM_BLOCKING=0 or 1 overrides every config's blocking, as in
 * NCCL; a non-blocking communicator made by ncclCommInitRankConfig or
 * ncclCommInitAll is still being made when the call returns
 * (ncclInProgress); ncclCommInitRank outside a group makes it at once. */
static int env_blocking(int config_blocking) {
  const char *e = getenv("NCCL_COMM_BLOCKING");
  return e && (!strcmp(e, "0") || !strcmp(e, "1")) ? atoi(e) : config_blocking;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *c, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
  *c = fake_comm(nranks, rank, 0);
  rec("ncclCommInitRankConfig(nranks=%d, rank=%d, blocking=%d) = %p", nranks, rank, config ? config->blocking : -1,
      (void *)*c);
  return env_blocking(config && config->blocking == 0 ? 0 : 1) ? ncclSuccess : ncclInProgress;
}
ncclResult_t ncclCommInitAll(ncclComm_t *c, int ndev, const int *devlist) {
  for (int i = 0; i < ndev; i++) c[i] = fake_comm(ndev, i, devlist ? devlist[i] : i);
  rec("ncclCommInitAll(ndev=%d)", ndev);
  return env_blocking(1) ? ncclSuccess : ncclInProgress;
}
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, ncclConfig_t *config) {
  *out = color == NCCL_SPLIT_NOCOLOR ? NULL : fake_comm(1, 0, c->dev);
  rec("ncclCommSplit(comm=%p, color=%d, key=%d) = %p", (void *)c, color, key, (void *)*out);
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t c) { rec("ncclCommFinalize(comm=%p)", (void *)c); return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { rec("ncclCommDestroy(comm=%p)", (void *)c); free(c); return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t c) { rec("ncclCommAbort(comm=%p)", (void *)c); free(c); return ncclSuccess; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
  *e = ncclSuccess;
  rec("ncclCommGetAsyncError(comm=%p)", (void *)c);
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t c, int *n) { *n = c->nranks; return ncclSuccess; }
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) { *r = c->rank; return ncclSuccess; }
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) { *d = c->dev; return ncclSuccess; }

ncclResult_t ncclCommRegister(const ncclComm_t c, void *buf, size_t size, void **handle) {
  *handle = buf;
  rec("ncclCommRegister(comm=%p, buff=%p, size=%zu)", (void *)c, buf, size);
  return ncclSuccess;
}
ncclResult_t ncclCommDeregister(const ncclComm_t c, void *handle) {
  rec("ncclCommDeregister(comm=%p, handle=%p)", (void *)c, handle);
  return ncclSuccess;
}
ncclResult_t ncclMemAlloc(void **p, size_t size) { *p = malloc(size); rec("ncclMemAlloc(size=%zu)", size); return ncclSuccess; }
ncclResult_t ncclMemFree(void *p) { rec("ncclMemFree(ptr=%p)", p); free(p); return ncclSuccess; }
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t t, ncclScalarResidence_t res,
                                      ncclComm_t c) {
  *op = (ncclRedOp_t)ncclNumOps;
  rec("ncclRedOpCreatePreMulSum(type=%d, residence=%d, comm=%p)", (int)t, (int)res, (void *)c);
  return ncclSuccess;
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t c) {
  rec("ncclRedOpDestroy(op=%d, comm=%p)", (int)op, (void *)c);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st) {
  rec("ncclAllReduce(%p, %p, %zu, type=%d, op=%d, comm=%p, stream=%p)", s, r, n, (int)t, (int)op, (void *)c,
      (void *)st);
  return arg_check(c);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  rec("ncclAllGather(%p, %p, %zu, type=%d, comm=%p, stream=%p)", s, r, n, (int)t, (void *)c, (void *)st);
  return arg_check(c);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
  rec("ncclReduceScatter(%p, %p, %zu, type=%d, op=%d, comm=%p, stream=%p)", s, r, n, (int)t, (int)op, (void *)c,
      (void *)st);
  return arg_check(c);
}
ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
  rec("ncclAlltoAll(%p, %p, %zu, type=%d, comm=%p, stream=%p)", s, r, n, (int)t, (void *)c, (void *)st);
  return arg_check(c);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st) {
  rec("ncclBroadcast(%p, %p, %zu, type=%d, root=%d, comm=%p, stream=%p)", s, r, n, (int)t, root, (void *)c,
      (void *)st);
  return arg_check(c);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                        cudaStream_t st) {
  rec("ncclReduce(%p, %p, %zu, type=%d, op=%d, root=%d, comm=%p, stream=%p)", s, r, n, (int)t, (int)op, root,
      (void *)c, (void *)st);
  return arg_check(c);
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  rec("ncclSend(%p, %zu, type=%d, peer=%d, comm=%p, stream=%p)", s, n, (int)t, peer, (void *)c, (void *)st);
  return arg_check(c);
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  rec("ncclRecv(%p, %zu, type=%d, peer=%d, comm=%p, stream=%p)", r, n, (int)t, peer, (void *)c, (void *)st);
  return arg_check(c);
}
ncclResult_t ncclGroupStart(void) { group_depth++; rec("ncclGroupStart()"); return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0 || --group_depth > 0 || !group_error) {
    rec("ncclGroupEnd()");
    return ncclSuccess;
  }
  ncclResult_t e = group_error;
  group_error = ncclSuccess;
  rec("ncclGroupEnd() = %d: the group's error, nothing launched", (int)e);
  return e;
}
