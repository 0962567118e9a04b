/* test_nccl.c -- baton's libnccl.so.2 without a GPU: what reaches the real
 * NCCL, in which order and with which arguments, and the errors when there
 * is none.  Linked against the library as an application is.
 *
 * Usage: test_nccl fake FAKE.so LOG | missing LOG | self LOG | search LOG,
 * with BATON_NCCL_LIB set by meson (parameters are read once per process)
 * and BATON_DEBUG=INFO, BATON_DEBUG_FILE=LOG.  "fake" runs against
 * tests/fake_nccl.c, which records every call it gets. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static const char *(*fake_log)(void);
static void (*fake_clear)(void);

/* The fake's record since the last clear, then cleared. */
static char *taken(void) {
  char *s = strdup(fake_log());
  fake_clear();
  return s;
}

#define P(x) ((void *)(uintptr_t)(x))
#define STREAM ((cudaStream_t)P(0x5000))

static void expect_log(const char *want, const char *what) {
  char *got = taken();
  int same = !strcmp(got, want);
  ok(same, "%s", what);
  if (!same) printf("#   expected:\n%s#   got:\n%s", want, got);
  free(got);
}

/* The real (fake) communicator behind ours: the pointer the fake printed
 * when it made it, "... = 0x..." at the end of its line. */
static void *made_comm(const char *log, const char *call) {
  const char *p = strstr(log, call);
  if (!p) return NULL;
  p = strstr(p, " = ");
  return p ? (void *)(uintptr_t)strtoull(p + 3, NULL, 16) : NULL;
}

static void test_fake(const char *fake_path, const char *logpath) {
  void *dl = dlopen(fake_path, RTLD_NOW | RTLD_NOLOAD);
  int v = 0;
  /* The first call loads the real (fake) NCCL. */
  ok(ncclGetVersion(&v) == ncclSuccess && v == 22703, "ncclGetVersion is the real NCCL's (fake 2.27.3): %d", v);
  if (!dl) dl = dlopen(fake_path, RTLD_NOW | RTLD_NOLOAD);
  ok(dl != NULL, "the library loaded %s", fake_path);
  if (!dl) return;
  fake_log = (const char *(*)(void))dlsym(dl, "fake_nccl_log");
  fake_clear = (void (*)(void))dlsym(dl, "fake_nccl_log_clear");
  fake_clear();

  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  ok(ncclGetUniqueId(&id) == ncclSuccess && (unsigned char)id.internal[0] == 0x5a &&
     (unsigned char)id.internal[127] == 0x5a, "ncclGetUniqueId returns the real NCCL's id");
  expect_log("ncclGetUniqueId()\n", "the unique id comes from the real NCCL");

  ncclComm_t comm = NULL;
  ok(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm, "ncclCommInitRank succeeds");
  char *log = taken();
  ok_contains(log, "ncclCommInitRank(nranks=1, id=5a, rank=0) = 0x", "ncclCommInitRank reaches the real NCCL "
              "with the same rank, size and id");
  void *real = made_comm(log, "ncclCommInitRank(");
  free(log);
  ok(real && real != (void *)comm, "the application's communicator is not the real NCCL's (%p, %p)", (void *)comm,
     real);
  int n = -1, r = -1, d = -1;
  ok(ncclCommCount(comm, &n) == ncclSuccess && n == 1, "ncclCommCount: %d", n);
  ok(ncclCommUserRank(comm, &r) == ncclSuccess && r == 0, "ncclCommUserRank: %d", r);
  ok(ncclCommCuDevice(comm, &d) == ncclSuccess && d == 0, "ncclCommCuDevice: %d", d);

  /* No baton communicator (no GPU, no algorithms): forwarded unchanged. */
  char want[4096];
  fake_clear();
  ok(ncclAllReduce(P(0x1000), P(0x2000), 77, ncclFloat32, ncclMax, comm, STREAM) == ncclSuccess,
     "ncclAllReduce without a baton communicator succeeds");
  snprintf(want, sizeof want, "ncclAllReduce(0x1000, 0x2000, 77, type=7, op=2, comm=%p, stream=0x5000)\n", real);
  expect_log(want, "ncclAllReduce is forwarded with the same buffers, count, type, operator and stream, on the real "
             "communicator");

  /* A group of two calls: one NCCL group, in order. */
  ok(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
  ok(ncclAllReduce(P(0x1000), P(0x1000), 8, ncclBfloat16, ncclSum, comm, STREAM) == ncclSuccess, "AllReduce in a group");
  ok(ncclAllGather(P(0x3000), P(0x4000), 9, ncclInt8, comm, STREAM) == ncclSuccess, "AllGather in a group");
  ok(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclAllReduce(0x1000, 0x1000, 8, type=9, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllGather(0x3000, 0x4000, 9, type=0, comm=%p, stream=0x5000)\n"
           "ncclGroupEnd()\n", real, real);
  expect_log(want, "a group of two calls reaches NCCL as one group: start, both calls in order, end");

  /* Nesting: one NCCL group, ended by the outermost ncclGroupEnd only. */
  ncclGroupStart();
  ncclGroupStart();
  ok(ncclReduceScatter(P(0x1000), P(0x2000), 5, ncclFloat64, ncclMin, comm, STREAM) == ncclSuccess,
     "ReduceScatter in a nested group");
  ncclGroupEnd();
  char *mid = strdup(fake_log());
  ok(!strstr(mid, "ncclGroupEnd"), "the inner ncclGroupEnd does not end NCCL's group");
  free(mid);
  ncclGroupEnd();
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclReduceScatter(0x1000, 0x2000, 5, type=8, op=3, comm=%p, stream=0x5000)\n"
           "ncclGroupEnd()\n", real);
  expect_log(want, "Start, Start, call, End, End reaches NCCL as one group");

  ncclGroupStart();
  ncclGroupEnd();
  expect_log("", "an empty group reaches NCCL not at all");
  ok(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart is ncclInvalidUsage");
  ok_contains(ncclGetLastError(NULL), "ncclGroupEnd without ncclGroupStart", "and ncclGetLastError says so");

  /* Without a baton communicator: point to point, broadcast, reduce, all-to-all go to NCCL. */
  ncclGroupStart();
  ok(ncclSend(P(0x1000), 3, ncclInt32, 0, comm, STREAM) == ncclSuccess, "ncclSend");
  ok(ncclRecv(P(0x2000), 3, ncclInt32, 0, comm, STREAM) == ncclSuccess, "ncclRecv");
  ncclGroupEnd();
  ok(ncclBroadcast(P(0x1000), P(0x2000), 4, ncclUint8, 0, comm, STREAM) == ncclSuccess, "ncclBroadcast");
  ok(ncclReduce(P(0x1000), P(0x2000), 6, ncclFloat16, ncclProd, 0, comm, STREAM) == ncclSuccess, "ncclReduce");
  ok(ncclAlltoAll(P(0x1000), P(0x2000), 2, ncclUint64, comm, STREAM) == ncclSuccess, "ncclAlltoAll");
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclSend(0x1000, 3, type=2, peer=0, comm=%p, stream=0x5000)\n"
           "ncclRecv(0x2000, 3, type=2, peer=0, comm=%p, stream=0x5000)\n"
           "ncclGroupEnd()\n"
           "ncclBroadcast(0x1000, 0x2000, 4, type=1, root=0, comm=%p, stream=0x5000)\n"
           "ncclReduce(0x1000, 0x2000, 6, type=6, op=1, root=0, comm=%p, stream=0x5000)\n"
           "ncclAlltoAll(0x1000, 0x2000, 2, type=5, comm=%p, stream=0x5000)\n", real, real, real, real, real);
  expect_log(want, "Send/Recv (grouped), Broadcast, Reduce and AlltoAll are forwarded with their arguments");

  /* Custom operators are NCCL's, and so is every call that uses one. */
  ncclRedOp_t op = ncclSum;
  double scalar = 0.5;
  ok(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm) == ncclSuccess &&
     op == ncclNumOps, "ncclRedOpCreatePreMulSum is forwarded and returns NCCL's operator");
  ok(ncclAllReduce(P(0x1000), P(0x2000), 10, ncclFloat64, op, comm, STREAM) == ncclSuccess, "AllReduce with it");
  ok(ncclRedOpDestroy(op, comm) == ncclSuccess, "ncclRedOpDestroy");
  snprintf(want, sizeof want, "ncclRedOpCreatePreMulSum(type=8, residence=1, comm=%p)\n"
           "ncclAllReduce(0x1000, 0x2000, 10, type=8, op=5, comm=%p, stream=0x5000)\n"
           "ncclRedOpDestroy(op=5, comm=%p)\n", real, real, real);
  expect_log(want, "the operator's creation, use and destruction reach NCCL on the real communicator");

  /* Memory and registration. */
  void *mem = NULL, *handle = NULL;
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess) ngpu = 0;
  ncclResult_t ma = ncclMemAlloc(&mem, 256);
  ok(ngpu ? ma == ncclSuccess && mem : ma == ncclUnhandledCudaError && !mem,
     "ncclMemAlloc is baton's cudaMalloc (%s)", ngpu ? "a GPU: memory" : "no GPU: ncclUnhandledCudaError");
  ok(ncclMemFree(mem) == ncclSuccess, "ncclMemFree");
  ok(ncclCommRegister(comm, P(0x7000), 256, &handle) == ncclSuccess && handle == P(0x7000), "ncclCommRegister");
  ok(ncclCommDeregister(comm, handle) == ncclSuccess, "ncclCommDeregister");
  snprintf(want, sizeof want, "ncclCommRegister(comm=%p, buff=0x7000, size=256)\n"
           "ncclCommDeregister(comm=%p, handle=0x7000)\n", real, real);
  expect_log(want, "CommRegister and CommDeregister are forwarded; MemAlloc and MemFree are not");

  ncclResult_t async = ncclInternalError;
  ok(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess, "ncclCommGetAsyncError: success");
  ok(!strcmp(ncclGetErrorString(ncclSuccess), "fake: no error"), "ncclGetErrorString is the real NCCL's");

  /* Creation inside a group: the real init runs inside NCCL's group. */
  ncclComm_t c2 = NULL;
  fake_clear();
  ncclGroupStart();
  ok(ncclCommInitRank(&c2, 1, id, 0) == ncclSuccess && c2, "ncclCommInitRank inside a group");
  ok(ncclGroupEnd() == ncclSuccess, "its ncclGroupEnd");
  log = taken();
  ok(!strncmp(log, "ncclGroupStart()\nncclCommInitRank(nranks=1, id=5a, rank=0) = ", 60) &&
     strstr(log, "\nncclGroupEnd()\n"), "deferred creation: GroupStart, CommInitRank, GroupEnd reach NCCL");
  free(log);

  /* Split: NCCL's split, wrapped; no colour, no communicator. */
  ncclComm_t sub = NULL, none = P(1);
  ok(ncclCommSplit(comm, 0, 0, &sub, NULL) == ncclSuccess && sub && sub != comm, "ncclCommSplit");
  ok(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &none, NULL) == ncclSuccess && none == NULL,
     "ncclCommSplit with NCCL_SPLIT_NOCOLOR gives NULL");
  log = taken();
  ok_contains(log, "ncclCommSplit(comm=", "the split reaches NCCL");
  free(log);

  /* Non-blocking: NCCL's ncclInProgress passes through. */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb = NULL;
  ok(ncclCommInitRankConfig(&nb, 1, id, 0, &cfg) == ncclInProgress && nb, "a non-blocking init returns "
     "NCCL's ncclInProgress");

  /* Bad communicators. */
  ok(ncclAllReduce(P(0x1000), P(0x2000), 1, ncclFloat32, ncclSum, NULL, STREAM) == ncclInvalidArgument,
     "ncclAllReduce on a NULL communicator: ncclInvalidArgument");
  /* A communicator this library did not make is the real NCCL's own (NCCL
   * calls its exported functions with its communicators, and those calls
   * may land here): it goes to the real NCCL unchanged, which checks it. */
  int junk[32] = {0};
  fake_clear();
  ncclAllReduce(P(0x1000), P(0x2000), 1, ncclFloat32, ncclSum, (ncclComm_t)junk, STREAM);
  char want_fwd[160];
  snprintf(want_fwd, sizeof want_fwd, "ncclAllReduce(0x1000, 0x2000, 1, type=7, op=0, comm=%p, stream=0x5000)",
           (void *)junk);
  ok_contains(fake_log(), want_fwd, "ncclAllReduce on a communicator this library did not make goes to the real "
              "NCCL as it is");
  ncclResult_t aerr = ncclInternalError;
  fake_clear();
  ok(ncclCommGetAsyncError((ncclComm_t)junk, &aerr) == ncclSuccess, "so does ncclCommGetAsyncError");
  snprintf(want_fwd, sizeof want_fwd, "ncclCommGetAsyncError(comm=%p)", (void *)junk);
  ok_contains(fake_log(), want_fwd, "with the pointer unchanged");

  fake_clear();
  ok(ncclCommDestroy(sub) == ncclSuccess && ncclCommDestroy(c2) == ncclSuccess && ncclCommAbort(nb) == ncclSuccess,
     "ncclCommDestroy, ncclCommAbort");
  ok(ncclCommFinalize(comm) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess, "ncclCommFinalize, Destroy");
  snprintf(want, sizeof want, "ncclCommFinalize(comm=%p)\nncclCommDestroy(comm=%p)\n", real, real);
  log = taken();
  ok_contains(log, want, "Finalize and Destroy reach NCCL with the real communicator");
  free(log);

  char *text = tap_slurp(logpath);
  ok_contains(text, "forwarding to the real NCCL 2.27.3 loaded from", "the log says which NCCL was loaded");
  ok_contains(text, "AllReduce: count 77 datatype 7 op 2 sendbuff 0x1000 recvbuff 0x2000",
              "each call is logged NCCL-style");
  ok_contains(text, "stream 0x5000: NCCL (no baton communicator)", "with where it ran and why");
  ok_contains(text, "ncclSend: NCCL (baton does not run it)", "calls baton never runs are logged too");
  ok_contains(text, "[0] baton INFO NCCL ", "log lines carry the device as NCCL's do: host:pid:tid [dev]");
  free(text);
}

/* No real NCCL: what baton cannot run fails with a message naming why. */
static void test_missing(const char *logpath) {
  int v = 0;
  ok(ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE, "ncclGetVersion without NCCL: the header's %d", v);
  ok(!strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage"), "ncclGetErrorString without NCCL");
  ok(ncclSend(P(0x1000), 4, ncclUint8, 0, NULL, STREAM) == ncclInvalidUsage, "ncclSend without NCCL: ncclInvalidUsage");
  const char *e = ncclGetLastError(NULL);
  ok_contains(e, "ncclSend: baton does not run this call", "ncclGetLastError names the call");
  ok_contains(e, "BATON_NCCL_LIB: /nonexistent/libnccl.so.2: cannot open", "and where NCCL was looked for");

  /* A communicator whose baton side is made at the group's end. */
  ncclUniqueId id;
  ok(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId without NCCL: baton's id");
  ncclComm_t comm = NULL;
  ncclGroupStart();
  ok(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm, "ncclCommInitRank in a group: deferred");
  ncclResult_t end = ncclGroupEnd();
  if (end != ncclSuccess)   /* no GPU here: baton cannot make its side */
    ok_contains(ncclGetLastError(NULL), "no real NCCL (BATON_NCCL_LIB: /nonexistent/libnccl.so.2: cannot open",
                "ncclGroupEnd fails (%d) and says that neither NCCL nor baton can make the communicator", end);
  else
    ok(1, "ncclGroupEnd: baton made the communicator (a GPU is here)");
  ok(ncclAllReduce(P(0x1000), P(0x2000), 77, ncclFloat32, ncclSum, comm, STREAM) == ncclInvalidUsage,
     "ncclAllReduce that baton cannot run, without NCCL: ncclInvalidUsage");
  e = ncclGetLastError(NULL);
  ok_contains(e, "AllReduce: count 77", "ncclGetLastError names the call");
  ok_contains(e, "and there is no real NCCL to forward it to (BATON_NCCL_LIB: /nonexistent/libnccl.so.2: ",
              "and why it could not run");
  ok(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  int junk[32] = {0};
  ok(ncclAllReduce(P(0x1000), P(0x2000), 1, ncclFloat32, ncclSum, (ncclComm_t)junk, STREAM) == ncclInvalidArgument,
     "without NCCL, ncclAllReduce on memory that is not a communicator: ncclInvalidArgument");
  ok_contains(ncclGetLastError(NULL), "is not a communicator of this library", "ncclGetLastError names it");
  char *text = tap_slurp(logpath);
  ok_contains(text, "baton WARN NCCL no real NCCL loaded: BATON_NCCL_LIB: /nonexistent/libnccl.so.2: cannot open", "one WARN at "
              "load names the missing library");
  free(text);
}

/* BATON_NCCL_LIB names this library: refused, never loaded into itself. */
static void test_self(const char *logpath) {
  int v = 0;
  ok(ncclGetVersion(&v) == ncclSuccess && v == NCCL_VERSION_CODE, "ncclGetVersion: the header's, not a loop (%d)", v);
  ok(ncclSend(P(0x1000), 1, ncclInt8, 0, NULL, STREAM) == ncclInvalidUsage, "ncclSend: nothing to forward to");
  char *text = tap_slurp(logpath);
  ok_contains(text, "is baton's own libnccl.so.2, not the real NCCL (set BATON_NCCL_LIB to the real one's path)",
              "a WARN says that BATON_NCCL_LIB is this library itself");
  free(text);
}

/* BATON_NCCL_LIB empty: "libnccl.so.2" is this library (the application
 * linked it), so the search skips it and goes on. */
static void test_search(const char *logpath) {
  int v = 0;
  ok(ncclGetVersion(&v) == ncclSuccess && v > 0, "ncclGetVersion: %d", v);
  char *text = tap_slurp(logpath);
  ok_contains(text, "libnccl.so.2 is baton's own libnccl.so.2", "the loader's libnccl.so.2 is skipped as this library");
  free(text);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "fake") && argc > 3) test_fake(argv[2], argv[3]);
  else if (!strcmp(mode, "missing") && argc > 2) test_missing(argv[2]);
  else if (!strcmp(mode, "self") && argc > 2) test_self(argv[2]);
  else if (!strcmp(mode, "search") && argc > 2) test_search(argv[2]);
  else ok(0, "usage: test_nccl fake FAKE.so LOG | missing LOG | self LOG | search LOG");
  return tap_done();
}
