/* test_nccl_baton.c -- the choices of baton's libnccl.so.2 when baton has
 * a communicator: which calls run on baton and which on NCCL, groups whole
 * on one side (the calls recorded for baton handed to NCCL in order when a
 * later one cannot run on baton; an error inside a group failing it
 * whole), baton's bootstrap over NCCL, errors.
 * Built from the library's sources with tests/fake_baton.c in place of
 * baton's GPU runtime (fake_even runs even counts) and tests/fake_nccl.c
 * as the real NCCL; no GPU.  Usage: test_nccl_baton FAKE_NCCL.so, with
 * BATON_NCCL_LIB=FAKE_NCCL.so and BATON_ALGO_FILES set by meson (and
 * BATON_ENABLE=0 or NCCL_COMM_BLOCKING=0 for the runs of those). */
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "tap.h"

const char *fake_baton_log(void);
void fake_baton_log_clear(void);
void fake_baton_set_async_error(baton_result r);
void fake_baton_set_group_error(baton_result r);
int fake_baton_chosen(void);
extern void (*fake_baton_destroy_hook)(void);
/* The device API's host call (declared in NCCL's C++ nccl_device headers). */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm);
static const char *(*nccl_log)(void);
static void (*nccl_clear)(void);

#define P(x) ((void *)(uintptr_t)(x))
#define STREAM ((cudaStream_t)P(0x5000))

/* Both records since the last check must be exactly these; then cleared. */
static void expect(const char *nccl, const char *baton, const char *what) {
  int same = !strcmp(nccl_log(), nccl) && !strcmp(fake_baton_log(), baton);
  ok(same, "%s", what);
  if (!same)
    printf("#   NCCL expected:\n%s#   NCCL got:\n%s#   baton expected:\n%s#   baton got:\n%s", nccl, nccl_log(), baton,
           fake_baton_log());
  nccl_clear();
  fake_baton_log_clear();
}

/* True when the log (BATON_DEBUG_FILE) holds `line`. */
static int logged(const char *line) {
  const char *path = getenv("BATON_DEBUG_FILE");
  FILE *f = path ? fopen(path, "r") : NULL;
  char buf[1024];
  int found = 0;
  while (f && !found && fgets(buf, sizeof buf, f)) found = strstr(buf, line) != NULL;
  if (f) fclose(f);
  return found;
}

/* BATON_ENABLE=0: baton loaded but off. */
static int run_off(void) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm = NULL;
  ok(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm, "ncclCommInitRank with BATON_ENABLE=0");
  ok(!strstr(fake_baton_log(), "baton_comm_init"), "makes no baton communicator");
  nccl_clear();
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM) == ncclSuccess &&
     strstr(nccl_log(), "ncclAllReduce(0x1000, 0x2000, 8,") && !*fake_baton_log(),
     "an AllReduce baton would run goes to NCCL");
  ok(logged("AllReduce: count 8") && logged("NCCL (baton is off (BATON_ENABLE=0))"), "and the INFO line says why");
  void *mem = NULL;
  ok(ncclMemAlloc(&mem, 256) == ncclSuccess && mem && ncclMemFree(mem) == ncclSuccess &&
     strstr(nccl_log(), "ncclMemAlloc(size=256)") && strstr(nccl_log(), "ncclMemFree(") && !*fake_baton_log(),
     "ncclMemAlloc and ncclMemFree are NCCL's");
  nccl_clear();
  ncclCommDestroy(comm);
  ok(logged("WARN") && logged("communicator of 1 ranks destroyed: none of its 1 collective calls ran on baton, all on NCCL "
                               "(BATON_ENABLE=0)"),
     "its destruction WARNs that nothing ran on baton, and why");
  return tap_done();
}

/* fake_baton_destroy_hook: counts baton destructions made after NCCL's
 * log shows an abort. */
static int nccl_aborted_at_destroy;
static void note_nccl_aborted(void) { nccl_aborted_at_destroy += strstr(nccl_log(), "ncclCommAbort(") != NULL; }

/* A communicator of 1 rank with a baton side; *real is the fake NCCL's
 * beside it.  Both records cleared. */
static ncclComm_t fresh_comm(ncclUniqueId *id, void **real) {
  ncclComm_t c = NULL;
  nccl_clear();
  ncclCommInitRank(&c, 1, *id, 0);
  const char *made = "ncclCommInitRank(nranks=1, id=5a, rank=0) = ", *at = strstr(nccl_log(), made);
  *real = at ? (void *)(uintptr_t)strtoull(at + strlen(made), NULL, 16) : NULL;
  nccl_clear();
  fake_baton_log_clear();
  return c;
}

/* NCCL's argument checks come before a count of 0 does nothing. */
static void zero_counts(ncclUniqueId *id) {
  char want[512];
  void *real = NULL;
  ncclComm_t c = fresh_comm(id, &real);
  ok(ncclAllReduce(NULL, NULL, 0, (ncclDataType_t)99, ncclSum, c, STREAM) == ncclInvalidArgument,
     "an AllReduce of 0 elements of datatype 99: ncclInvalidArgument");
  ok(ncclAllReduce(NULL, NULL, 0, ncclFloat32, (ncclRedOp_t)-1, c, STREAM) == ncclInvalidArgument,
     "of operator -1: ncclInvalidArgument");
  ok(ncclBroadcast(NULL, NULL, 0, ncclFloat32, 5, c, STREAM) == ncclInvalidArgument,
     "a Broadcast of 0 elements from root 5 of 1 rank: ncclInvalidArgument");
  ok(ncclAllGather(NULL, NULL, 0, ncclInt8, NULL, STREAM) == ncclInvalidArgument,
     "an AllGather of 0 elements on a NULL communicator: ncclInvalidArgument");
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, (ncclDataType_t)ncclNumTypes, ncclSum, c, STREAM) == ncclInvalidArgument,
     "an AllReduce of 8 elements of datatype ncclNumTypes: ncclInvalidArgument (not handed to NCCL)");
  expect("", "", "none of them reaches baton or NCCL");
  ok(ncclAllReduce(NULL, NULL, 0, ncclFloat32, (ncclRedOp_t)ncclNumOps, c, STREAM) == ncclSuccess,
     "an AllReduce of 0 elements with an operator of ncclRedOpCreatePreMulSum");
  snprintf(want, sizeof want, "ncclAllReduce((nil), (nil), 0, type=7, op=5, comm=%p, stream=0x5000)\n", real);
  expect(want, "", "goes to NCCL, which checks the operator");
  ok(ncclReduce(NULL, NULL, 0, ncclFloat32, ncclMax, 0, c, STREAM) == ncclSuccess, "a valid Reduce of 0 elements");
  expect("", "", "runs nowhere");
  ncclCommDestroy(c);
  nccl_clear();
  fake_baton_log_clear();
}

/* An error inside a group fails the group, as NCCL's: the call returns
 * it, the outermost ncclGroupEnd returns it too, and none of the group's
 * calls runs, on baton or on NCCL. */
static void group_errors(ncclUniqueId *id) {
  char want[4096];
  void *real = NULL;
  ncclComm_t gc = fresh_comm(id, &real);

  ncclGroupStart();
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, gc, STREAM) == ncclSuccess, "in a group: an "
     "AllReduce baton runs");
  ok(ncclBroadcast(P(0x1000), P(0x2000), 8, ncclFloat32, 7, gc, STREAM) == ncclInvalidArgument,
     "then a Broadcast from root 7 of 1 rank: ncclInvalidArgument");
  ok(ncclGroupEnd() == ncclInvalidArgument, "the outermost ncclGroupEnd returns the group's error");
  expect("", "", "and none of the group's calls runs (the AllReduce neither)");
  ok_contains(ncclGetLastError(gc), "root 7 is not a rank", "ncclGetLastError names the failed call");

  ncclGroupStart();
  ncclAllGather(P(0x3000), P(0x4000), 2, ncclFloat32, gc, STREAM);
  ncclGroupStart();
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, NULL, STREAM) == ncclInvalidArgument,
     "in a nested group: an AllReduce on a NULL communicator: ncclInvalidArgument");
  ok(ncclGroupEnd() == ncclSuccess, "the inner ncclGroupEnd ends nothing");
  ok(ncclGroupEnd() == ncclInvalidArgument, "the outermost returns the error");
  ncclGroupStart();
  ok(ncclReduceScatter(P(0x1000), NULL, 4, ncclFloat32, ncclSum, gc, STREAM) == ncclInvalidArgument,
     "a ReduceScatter with a NULL recvbuff in a group: ncclInvalidArgument");
  ok(ncclGroupEnd() == ncclInvalidArgument, "its ncclGroupEnd too");
  expect("", "", "none of those groups' calls runs");

  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, gc, STREAM);
  ncclAllReduce(P(0x1000), P(0x2000), 7, ncclFloat32, ncclSum, gc, STREAM);
  ok(ncclReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, 3, gc, STREAM) == ncclInvalidArgument,
     "in a group handed to NCCL: a Reduce from root 3 of 1 rank: ncclInvalidArgument");
  ok(ncclGroupEnd() == ncclInvalidArgument, "ncclGroupEnd returns it");
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllReduce(0x1000, 0x2000, 7, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllReduce((nil), (nil), 0, type=1, op=0, comm=(nil), stream=(nil))\n"
           "ncclGroupEnd() = 4: the group's error, nothing launched\n", real, real);
  expect(want, "", "NCCL's group is given an invalid call of its own (a NULL communicator) before its end, so that "
         "NCCL launches none of the calls it holds");

  ncclComm_t made_in = NULL;
  ncclGroupStart();
  ncclCommInitRank(&made_in, 1, *id, 0);
  ncclAllGather(P(0x3000), NULL, 2, ncclFloat32, gc, STREAM);
  ok(ncclGroupEnd() == ncclInvalidArgument, "a group creating a communicator, with a failed call");
  ok(!strstr(fake_baton_log(), "baton_comm_init") && !strstr(nccl_log(), "ncclBroadcast("),
     "the communicator gets no baton side (NCCL made none either)");
  ncclCommDestroy(made_in);
  nccl_clear();
  fake_baton_log_clear();

  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, gc, STREAM);
  ok(ncclGroupEnd() == ncclSuccess, "the next group");
  expect("", "baton_group_start()\nbaton_allreduce(0x1000, 0x2000, 8, type=0, op=0, rank=0, stream=0x5000)\n"
         "baton_group_end()\n", "runs whole: the failed group left nothing behind");

  /* A communicator this library did not make is the real NCCL's own: in a
   * group, NCCL's group must hold its call. */
  int junk[32] = {0};
  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, gc, STREAM);
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, (ncclComm_t)junk, STREAM);
  ok(ncclGroupEnd() == ncclSuccess, "a group with a call on the real NCCL's own communicator");
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclGroupEnd()\n", real, (void *)junk);
  expect(want, "", "goes whole to NCCL, that call inside NCCL's group (where NCCL's checks of it fail the group)");
  ncclCommDestroy(gc);
  nccl_clear();
  fake_baton_log_clear();
}

/* NCCL_COMM_BLOCKING=0: NCCL makes every communicator non-blocking, so
 * each is NCCL's alone, and each creation returns what NCCL returns. */
static int run_nonblocking(void) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm = NULL, cfgd = NULL, forced = NULL, all[1] = {NULL};
  nccl_clear();
  ok(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm, "ncclCommInitRank with NCCL_COMM_BLOCKING=0: "
     "ncclSuccess (NCCL makes it at once)");
  ok(!strstr(nccl_log(), "ncclBroadcast(") && !*fake_baton_log(), "no baton side: no id broadcast over NCCL, no "
     "baton communicator (NCCL's work on it may still run)");
  nccl_clear();
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM) == ncclSuccess &&
     strstr(nccl_log(), "ncclAllReduce(0x1000, 0x2000, 8,") && !*fake_baton_log(),
     "an AllReduce baton would run goes to NCCL");
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  nccl_clear();
  ok(ncclCommInitRankConfig(&cfgd, 1, id, 0, &cfg) == ncclInProgress && cfgd, "ncclCommInitRankConfig with a default "
     "config: NCCL's ncclInProgress");
  cfg.blocking = 1;
  ok(ncclCommInitRankConfig(&forced, 1, id, 0, &cfg) == ncclInProgress && forced, "with config->blocking = 1 too "
     "(the variable overrides the config)");
  ok(ncclCommInitAll(all, 1, NULL) == ncclInProgress && all[0], "ncclCommInitAll: ncclInProgress, its communicators "
     "returned");
  ok(!strstr(nccl_log(), "ncclBroadcast(") && !*fake_baton_log(), "none of them gets a baton side");
  ok(logged("ncclCommInitRank: non-blocking communicator (NCCL_COMM_BLOCKING=0): NCCL runs every call"),
     "the INFO line says why");
  ncclCommDestroy(comm);
  ncclCommDestroy(cfgd);
  ncclCommDestroy(forced);
  ncclCommDestroy(all[0]);
  ok(logged("all on NCCL (a non-blocking communicator is NCCL's)"), "the summary at destruction says why");
  return tap_done();
}

int main(int argc, char **argv) {
  int v = 0;
  ncclGetVersion(&v);
  void *dl = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) : NULL;
  ok(dl && v == 22703, "the fake NCCL is the real one here (%d)", v);
  if (!dl) return tap_done();
  nccl_log = (const char *(*)(void))dlsym(dl, "fake_nccl_log");
  nccl_clear = (void (*)(void))dlsym(dl, "fake_nccl_log_clear");
  nccl_clear();
  const char *en = getenv("BATON_ENABLE");
  if (en && !strcmp(en, "0")) return run_off();
  const char *blocking = getenv("NCCL_COMM_BLOCKING");
  if (blocking && !strcmp(blocking, "0")) return run_nonblocking();
  char want[4096];

  /* Creation: NCCL's communicator, then baton's bootstrapped over it. */
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm = NULL;
  ok(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess && comm, "ncclCommInitRank");
  const char *log = nccl_log();
  const char *made = "ncclCommInitRank(nranks=1, id=5a, rank=0) = ", *at = strstr(log, made);
  void *real = at ? (void *)(uintptr_t)strtoull(at + strlen(made), NULL, 16) : NULL;
  const char *bc = strstr(log, "ncclBroadcast(");
  void *idbuf = bc ? (void *)(uintptr_t)strtoull(bc + 14, NULL, 16) : NULL;
  snprintf(want, sizeof want, "ncclGetUniqueId()\n"
           "ncclCommInitRank(nranks=1, id=5a, rank=0) = %p\n"
           "ncclGroupStart()\nncclBroadcast(%p, %p, 128, type=1, root=0, comm=%p, stream=", real, idbuf, idbuf, real);
  ok(real && idbuf && !strncmp(log, want, strlen(want)), "rank 0 broadcasts baton's 128-byte id over NCCL (uint8, "
     "root 0, in place, on the real communicator)");
  ok(strstr(log, "ncclGroupEnd()\nncclGroupStart()\nncclAllReduce(") && strstr(log, ", 1, type=2, op=3, comm="),
     "then every rank agrees with an NCCL min-allreduce of one int32 that baton's communicator exists");
  expect(log, "baton_get_unique_id()\nbaton_comm_init_rank(nranks=1, id=b7, rank=0)\n",
         "baton's communicator is made from the id rank 0 broadcast");

  /* Alone: baton where fake_even fits (even counts), NCCL else. */
  ok(ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM) == ncclSuccess, "AllReduce of 8");
  expect("", "baton_allreduce(0x1000, 0x2000, 8, type=0, op=0, rank=0, stream=0x5000)\n",
         "an AllReduce baton has an algorithm for runs on baton, with NCCL's types and operators mapped to baton's");
  ok(ncclAllReduce(P(0x1000), P(0x2000), 7, ncclFloat32, ncclSum, comm, STREAM) == ncclSuccess, "AllReduce of 7");
  snprintf(want, sizeof want, "ncclAllReduce(0x1000, 0x2000, 7, type=7, op=0, comm=%p, stream=0x5000)\n", real);
  expect(want, "", "an AllReduce baton has no algorithm for goes to NCCL");
  ncclAllGather(P(0x1000), P(0x2000), 4, ncclBfloat16, comm, STREAM);
  ncclReduceScatter(P(0x1000), P(0x2000), 6, ncclInt64, ncclAvg, comm, STREAM);
  ncclAlltoAll(P(0x1000), P(0x2000), 2, ncclUint8, comm, STREAM);
  expect("", "baton_allgather(0x1000, 0x2000, 4, type=3, rank=0, stream=0x5000)\n"
         "baton_reducescatter(0x1000, 0x2000, 6, type=6, op=4, rank=0, stream=0x5000)\n"
         "baton_alltoall(0x1000, 0x2000, 2, type=9, rank=0, stream=0x5000)\n",
         "AllGather, ReduceScatter (avg) and AlltoAll run on baton");
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat8e4m3, ncclSum, comm, STREAM);
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, (ncclRedOp_t)ncclNumOps, comm, STREAM);
  snprintf(want, sizeof want, "ncclAllReduce(0x1000, 0x2000, 8, type=10, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=5, comm=%p, stream=0x5000)\n", real, real);
  expect(want, "", "fp8 and custom operators go to NCCL");
  ok(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, STREAM) == ncclSuccess, "AllReduce of 0 elements");
  expect("", "", "a call of 0 elements runs nowhere");
  ok(ncclAllReduce(P(0x1000), NULL, 8, ncclFloat32, ncclSum, comm, STREAM) == ncclInvalidArgument,
     "AllReduce with a NULL buffer: ncclInvalidArgument");
  ok(ncclBroadcast(P(0x1000), P(0x2000), 8, ncclFloat32, 0, comm, STREAM) == ncclSuccess, "Broadcast of 8");
  ok(ncclBcast(P(0x3000), 6, ncclFloat32, 0, comm, STREAM) == ncclSuccess, "Bcast of 6");
  ok(ncclReduce(P(0x1000), P(0x2000), 4, ncclBfloat16, ncclMax, 0, comm, STREAM) == ncclSuccess, "Reduce of 4");
  ok(ncclGather(P(0x1000), P(0x2000), 2, ncclFloat32, 0, comm, STREAM) == ncclSuccess, "Gather of 2");
  ok(ncclScatter(P(0x1000), P(0x2000), 2, ncclFloat32, 0, comm, STREAM) == ncclSuccess, "Scatter of 2");
  expect("", "baton_broadcast(0x1000, 0x2000, 8, type=0, root=0, rank=0, stream=0x5000)\n"
         "baton_broadcast(0x3000, 0x3000, 6, type=0, root=0, rank=0, stream=0x5000)\n"
         "baton_reduce(0x1000, 0x2000, 4, type=3, op=2, root=0, rank=0, stream=0x5000)\n"
         "baton_gather(0x1000, 0x2000, 2, type=0, root=0, rank=0, stream=0x5000)\n"
         "baton_scatter(0x1000, 0x2000, 2, type=0, root=0, rank=0, stream=0x5000)\n",
         "Broadcast, Bcast (in place), Reduce, Gather and Scatter run on baton with their root");
  ok(fake_baton_chosen() == 9, "each of those 9 calls runs the program chosen when it was checked (no second "
     "choice): %d", fake_baton_chosen());
  ok(ncclScatter(NULL, P(0x2000), 2, ncclFloat32, 0, comm, STREAM) == ncclInvalidArgument,
     "Scatter with a NULL sendbuff on the root: ncclInvalidArgument");
  expect("", "", "and it runs nowhere");
  ncclBroadcast(P(0x1000), P(0x2000), 7, ncclFloat32, 0, comm, STREAM);
  ncclReduce(P(0x1000), P(0x2000), 5, ncclFloat32, ncclSum, 0, comm, STREAM);
  snprintf(want, sizeof want, "ncclBroadcast(0x1000, 0x2000, 7, type=7, root=0, comm=%p, stream=0x5000)\n"
           "ncclReduce(0x1000, 0x2000, 5, type=7, op=0, root=0, comm=%p, stream=0x5000)\n", real, real);
  expect(want, "", "a Broadcast or Reduce baton has no algorithm for goes to NCCL, root and all");
  ok(ncclReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, 1, comm, STREAM) == ncclInvalidArgument,
     "Reduce from root 1 on a communicator of 1 rank: ncclInvalidArgument");
  ok(ncclReduce(P(0x1000), NULL, 8, ncclFloat32, ncclSum, 0, comm, STREAM) == ncclInvalidArgument,
     "Reduce with a NULL recvbuff on the root: ncclInvalidArgument");
  expect("", "", "and neither runs anywhere");

  /* Windows and memory: baton's. */
  void *mem = NULL;
  ncclWindow_t win = NULL;
  ok(ncclMemAlloc(&mem, 4096) == ncclSuccess && mem, "ncclMemAlloc");
  ok(ncclCommWindowRegister(comm, mem, 4096, &win, 0) == ncclSuccess && win, "ncclCommWindowRegister");
  ncclWindow_t kept = win;
  ok(ncclCommWindowRegister(comm, NULL, 4096, &win, 0) == ncclSuccess && win == kept &&
     ncclCommWindowRegister(comm, mem, 0, &win, 0) == ncclSuccess && win == kept,
     "ncclCommWindowRegister of a NULL buffer or of 0 bytes: ncclSuccess, *win untouched (as NCCL)");
  ok(ncclCommWindowDeregister(comm, win) == ncclSuccess, "ncclCommWindowDeregister");
  ok(ncclCommWindowDeregister(comm, NULL) == ncclSuccess, "ncclCommWindowDeregister of NULL: ncclSuccess (as NCCL)");
  ok(ncclMemFree(mem) == ncclSuccess, "ncclMemFree");
  snprintf(want, sizeof want, "baton_mem_alloc(bytes=4096)\nbaton_comm_register(rank=0, buf=%p, bytes=4096)\n"
           "baton_comm_deregister(rank=0)\nbaton_mem_free()\n", mem);
  expect("", want, "memory and windows are baton's (cudaMalloc memory every rank can map), NCCL sees none of it; "
         "a NULL buffer, 0 bytes or a NULL window reaches neither");
  void *none = P(1);
  ok(ncclMemAlloc(&none, 0) == ncclSuccess && ncclMemFree(none) == ncclSuccess,
     "ncclMemAlloc of 0 bytes: cudaMalloc's answer, as NCCL's (here ncclSuccess)");
  ok(ncclMemAlloc(NULL, 64) == ncclUnhandledCudaError, "ncclMemAlloc into a NULL ptr: ncclUnhandledCudaError "
     "(NCCL's cudaMalloc fails on it)");
  expect("", "baton_mem_free()\n", "neither reaches baton's allocator");
  /* The device API reads NCCL's windows: refused where windows are baton's. */
  char devcomm[256];
  ncclGroupStart();
  ok(ncclDevCommCreate(comm, NULL, devcomm) == ncclInvalidUsage, "ncclDevCommCreate on a communicator with a baton "
     "side: ncclInvalidUsage");
  ok(ncclGroupEnd() == ncclInvalidUsage, "inside a group (as nccl-tests -D makes it), the group fails too");
  ok_contains(ncclGetLastError(comm), "needs NCCL's windows", "ncclGetLastError says why and what to do");
  expect("", "", "and nothing reaches NCCL or baton");

  /* Groups. */
  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM);
  ncclAllGather(P(0x3000), P(0x4000), 2, ncclFloat32, comm, STREAM);
  ok(!*fake_baton_log() && !*nccl_log(), "inside a group nothing runs before ncclGroupEnd");
  ok(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
  expect("", "baton_group_start()\n"
         "baton_allreduce(0x1000, 0x2000, 8, type=0, op=0, rank=0, stream=0x5000)\n"
         "baton_allgather(0x3000, 0x4000, 2, type=0, rank=0, stream=0x5000)\n"
         "baton_group_end()\n",
         "a group baton can run whole runs on baton at ncclGroupEnd, in order, in one baton group (launched together)");
  ok(fake_baton_chosen() == 9, "a group's calls are chosen again at its end, inside baton's group (where the peers' "
     "buffers may be known)");

  /* A launch that fails at the end of baton's group fails ncclGroupEnd. */
  fake_baton_set_group_error(baton_cuda_error);
  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM);
  ncclAllReduce(P(0x1000), P(0x2000), 4, ncclFloat32, ncclSum, comm, STREAM);
  ok(ncclGroupEnd() == ncclUnhandledCudaError, "a failed launch at the end of baton's group: ncclGroupEnd says so");
  fake_baton_log_clear();
  nccl_clear();

  ncclGroupStart();
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM);
  ncclGroupStart();
  ncclReduceScatter(P(0x1000), P(0x2000), 4, ncclFloat32, ncclSum, comm, STREAM);
  ncclGroupEnd();
  ncclAllGather(P(0x3000), P(0x4000), 3, ncclFloat32, comm, STREAM);
  ncclAlltoAll(P(0x5000), P(0x6000), 2, ncclFloat32, comm, STREAM);
  ok(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd of a mixed group");
  snprintf(want, sizeof want, "ncclGroupStart()\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclReduceScatter(0x1000, 0x2000, 4, type=7, op=0, comm=%p, stream=0x5000)\n"
           "ncclAllGather(0x3000, 0x4000, 3, type=7, comm=%p, stream=0x5000)\n"
           "ncclAlltoAll(0x5000, 0x6000, 2, type=7, comm=%p, stream=0x5000)\n"
           "ncclGroupEnd()\n", real, real, real, real);
  expect(want, "", "a (nested) group with one call baton cannot run goes whole to NCCL, the calls recorded before it "
         "first, in order, and the ones after it too");

  ncclGroupStart();
  ncclSend(P(0x1000), 8, ncclFloat32, 0, comm, STREAM);
  ncclAllReduce(P(0x1000), P(0x2000), 8, ncclFloat32, ncclSum, comm, STREAM);
  ncclGroupEnd();
  snprintf(want, sizeof want, "ncclGroupStart()\nncclSend(0x1000, 8, type=7, peer=0, comm=%p, stream=0x5000)\n"
           "ncclAllReduce(0x1000, 0x2000, 8, type=7, op=0, comm=%p, stream=0x5000)\nncclGroupEnd()\n", real, real);
  expect(want, "", "a group with a Send goes whole to NCCL");

  /* Errors: baton's asynchronous error is the communicator's. */
  ncclResult_t err = ncclSuccess;
  fake_baton_set_async_error(baton_timeout);
  ok(ncclCommGetAsyncError(comm, &err) == ncclSuccess && err == ncclRemoteError, "a baton timeout is reported by "
     "ncclCommGetAsyncError as ncclRemoteError (%d)", err);
  fake_baton_set_async_error(baton_success);
  ok(ncclCommGetAsyncError(comm, &err) == ncclSuccess && err == ncclSuccess, "and success when there is none");
  nccl_clear();

  /* Split: the new communicator gets baton's side too. */
  ncclComm_t sub = NULL;
  ok(ncclCommSplit(comm, 1, 0, &sub, NULL) == ncclSuccess && sub, "ncclCommSplit");
  ok(strstr(fake_baton_log(), "baton_comm_init_rank(nranks=1, id=b7, rank=0)") != NULL,
     "the split communicator gets a baton communicator bootstrapped over it");
  nccl_clear();
  fake_baton_log_clear();
  ncclAllReduce(P(0x1000), P(0x2000), 2, ncclFloat32, ncclSum, sub, STREAM);
  ok(strstr(fake_baton_log(), "baton_allreduce(") && !*nccl_log(), "and runs on baton");
  fake_baton_log_clear();

  /* Creation inside a group: baton's side after NCCL's group ends. */
  ncclComm_t c2 = NULL;
  ncclGroupStart();
  ncclCommInitRank(&c2, 1, id, 0);
  ok(!*fake_baton_log(), "inside a group baton's side waits for ncclGroupEnd");
  ok(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd");
  ok(strstr(nccl_log(), "ncclGroupEnd()\nncclGroupStart()\nncclBroadcast(") != NULL &&
     strstr(fake_baton_log(), "baton_comm_init_rank(nranks=1, id=b7, rank=0)") != NULL,
     "after NCCL's group ends, the id is broadcast and baton's communicator made");
  nccl_clear();
  fake_baton_log_clear();

  /* Destroy and abort reach both sides; an abort stops both sides before
   * either is destroyed (baton's destruction waits on nothing after an
   * abort, NCCL's abort might: its kernels must not wait on baton's). */
  fake_baton_destroy_hook = note_nccl_aborted;
  ok(ncclCommDestroy(sub) == ncclSuccess && ncclCommAbort(c2) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess,
     "Destroy, Abort");
  fake_baton_destroy_hook = NULL;
  ok(nccl_aborted_at_destroy == 2, "ncclCommAbort: NCCL's side aborted before baton's is destroyed (%d of 3 "
     "destructions came after an NCCL abort: the abort's and the last Destroy's)", nccl_aborted_at_destroy);
  ok(!strcmp(fake_baton_log(), "baton_comm_destroy(rank=0)\nbaton_comm_abort(rank=0)\nbaton_comm_destroy(rank=0)\n"
             "baton_comm_destroy(rank=0)\n"), "baton's communicators are destroyed (aborted first by ncclCommAbort)");
  /* On comm: baton ran AllReduce 8, AllGather, ReduceScatter, AlltoAll, Broadcast, Bcast, Reduce, Gather, Scatter,
   * a group of 2
   * and the failed group's 2; NCCL the AllReduce of 7, fp8, a custom operator, the Broadcast of 7, the Reduce of 5,
   * the mixed group's 4 and the group with a Send's 1. */
  ok(logged("communicator of 1 ranks destroyed: 13 collective calls ran on baton, "
            "10 on NCCL"), "the destruction's summary counts the calls run on baton and on NCCL");
  ok(logged("communicator of 1 ranks destroyed: 1 collective calls ran on baton, "
            "0 on NCCL"), "per communicator (the split one's)");

  /* One process, several devices: both sides made by ncclCommInitAll. */
  ncclComm_t all[1] = {NULL};
  fake_baton_log_clear();
  ok(ncclCommInitAll(all, 1, NULL) == ncclSuccess && all[0], "ncclCommInitAll");
  ok(strstr(nccl_log(), "ncclCommInitAll(ndev=1)") && strstr(fake_baton_log(), "baton_comm_init_all(ndev=1)"),
     "ncclCommInitAll makes NCCL's and baton's communicators");
  ncclCommDestroy(all[0]);

  /* Every rank of one id made in one group (nccl-tests' way): as by
   * ncclCommInitAll, so that a group of their calls reaches each other's
   * buffers; a group holding one rank of two goes over NCCL. */
  ncclComm_t pair[2] = {NULL, NULL}, lone = NULL;
  nccl_clear();
  fake_baton_log_clear();
  ncclGroupStart();
  ncclCommInitRank(&pair[0], 2, id, 0);
  ncclCommInitRank(&pair[1], 2, id, 1);
  ok(ncclGroupEnd() == ncclSuccess && pair[0] && pair[1], "a group of ncclCommInitRank for ranks 0 and 1 of 2");
  ok(!strcmp(fake_baton_log(), "baton_comm_init_all(ndev=2)\nbaton_comm_init_rank(nranks=2, id=00, rank=0)\n"
             "baton_comm_init_rank(nranks=2, id=00, rank=1)\n") && !strstr(nccl_log(), "ncclBroadcast("),
     "baton's side of both ranks is made at once by baton_comm_init_all, with no id broadcast over NCCL");
  fake_baton_log_clear();
  ncclGroupStart();
  ncclCommInitRank(&lone, 2, id, 1);
  ok(ncclGroupEnd() == ncclSuccess && lone, "a group of one ncclCommInitRank of 2 ranks");
  ok(!strstr(fake_baton_log(), "baton_comm_init_all(") && strstr(nccl_log(), "ncclBroadcast("),
     "goes over NCCL (the id broadcast)");
  ncclCommDestroy(pair[0]);
  ncclCommDestroy(pair[1]);
  ncclCommDestroy(lone);
  zero_counts(&id);
  group_errors(&id);
  return tap_done();
}
