/* fake_baton.c -- a stand-in for baton's GPU runtime and the few CUDA
 * calls of baton's libnccl.so.2, so that the library's choices (baton or
 * NCCL, groups, the bootstrap over NCCL, errors) can be tested on a CPU
 * (tests/test_nccl_baton.c).  Its one "algorithm", fake_even, runs every
 * AllReduce, AllGather, ReduceScatter and AlltoAll whose count is even;
 * each baton call it gets is appended to fake_baton_log(). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "ir.h"   /* ir_coll, for rt_comm_choose */

#include "fake_log.h"

static baton_result async_error, group_error;
static int group_depth;

const char *fake_baton_log(void) { return log_buf; }
void fake_baton_log_clear(void) { log_clear(); }
void fake_baton_set_async_error(baton_result r) { async_error = r; }
void fake_baton_set_group_error(baton_result r) { group_error = r; }

/* Groups: recorded, and the end returns the error set (once). */
baton_result baton_group_start(void) {
  rec("baton_group_start()");
  group_depth++;
  return baton_success;
}
baton_result baton_group_end(void) {
  rec("baton_group_end()");
  if (group_depth-- == 0) return baton_invalid_argument;
  baton_result r = group_error;
  group_error = baton_success;
  return r;
}

/* The fake communicator: only what the library asks of it. */
struct baton_comm { int rank, nranks; const char *last; };

const char *baton_version(void) { return "fake"; }
/* No installed default set: only BATON_ALGO_FILES makes baton wanted. */
const char *rt_algos_default_dir(int nranks, char *buf, size_t n) { buf[0] = 0; return NULL; }
const char *baton_result_string(baton_result r) { return r ? "fake error" : "ok"; }

baton_result baton_get_unique_id(baton_unique_id *id) {
  memset(id->bytes, 0xb7, sizeof id->bytes);
  rec("baton_get_unique_id()");
  return baton_success;
}

baton_result baton_comm_init_rank(baton_comm **out, int nranks, baton_unique_id id, int rank) {
  rec("baton_comm_init_rank(nranks=%d, id=%02x, rank=%d)", nranks, (unsigned char)id.bytes[0], rank);
  *out = calloc(1, sizeof **out);
  (*out)->rank = rank;
  (*out)->nranks = nranks;
  return baton_success;
}

baton_result baton_comm_init_all(baton_comm **comms, int ndev, const int *devlist) {
  rec("baton_comm_init_all(ndev=%d)", ndev);
  for (int i = 0; i < ndev; i++) baton_comm_init_rank(&comms[i], ndev, (baton_unique_id){{0}}, i);
  return baton_success;
}

/* Windows: recorded; a window is a heap word; memory from the heap.  What
 * the runtime refuses (no buffer, no bytes, no window) is refused. */
baton_result baton_comm_register(baton_comm *c, void *buf, size_t bytes, baton_window **w) {
  rec("baton_comm_register(rank=%d, buf=%p, bytes=%zu)", c->rank, buf, bytes);
  if (!buf || !bytes) return baton_invalid_argument;
  *w = malloc(1);
  return baton_success;
}
baton_result baton_comm_deregister(baton_comm *c, baton_window *w) {
  rec("baton_comm_deregister(rank=%d)", c->rank);
  if (!w) return baton_invalid_argument;
  free(w);
  return baton_success;
}
baton_result baton_mem_alloc(void **p, size_t bytes) {
  rec("baton_mem_alloc(bytes=%zu)", bytes);
  if (!p || !bytes) return baton_invalid_argument;
  *p = calloc(1, bytes);
  return baton_success;
}
baton_result baton_mem_free(void *p) {
  rec("baton_mem_free()");
  free(p);
  return baton_success;
}

/* Called at every baton_comm_destroy, where set (what the test must see
 * already done by then). */
void (*fake_baton_destroy_hook)(void);
baton_result baton_comm_destroy(baton_comm *c) {
  rec("baton_comm_destroy(rank=%d)", c->rank);
  if (fake_baton_destroy_hook) fake_baton_destroy_hook();
  free(c);
  return 0;
}
baton_result baton_comm_abort(baton_comm *c) { rec("baton_comm_abort(rank=%d)", c->rank); return baton_success; }
baton_result baton_comm_get_async_error(baton_comm *c, baton_result *e) { *e = async_error; return baton_success; }
int baton_comm_algorithm_count(const baton_comm *c) { return 1; }
const char *baton_comm_algorithm_name(const baton_comm *c, int i) { return i == 0 ? "fake_even" : NULL; }
const char *baton_comm_last_algorithm(const baton_comm *c) { return c->last; }

int rt_comm_choose(baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype,
                   cudaStream_t stream) {
  return count % 2 == 0 ? 0 : -1;
}
int rt_comm_choose_rooted(baton_comm *c, ir_coll coll, int root, const void *s, const void *r, size_t count,
                          int dtype, cudaStream_t stream) {
  return count % 2 == 0 ? 0 : -1;
}

#define FAKE_COLL(NAME, PARAMS, FMT, ...)                                  \
  baton_result baton_##NAME PARAMS {                                       \
    rec("baton_" #NAME "(" FMT ")", __VA_ARGS__);                          \
    c->last = "fake_even";                                                 \
    return baton_success;                                                  \
  }
FAKE_COLL(allreduce, (const void *s, void *r, size_t n, baton_dtype t, baton_redop op, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, op=%d, rank=%d, stream=%p", s, r, n, (int)t, (int)op, c->rank, (void *)st)
FAKE_COLL(allgather, (const void *s, void *r, size_t n, baton_dtype t, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, rank=%d, stream=%p", s, r, n, (int)t, c->rank, (void *)st)
FAKE_COLL(reducescatter, (const void *s, void *r, size_t n, baton_dtype t, baton_redop op, baton_comm *c,
          cudaStream_t st), "%p, %p, %zu, type=%d, op=%d, rank=%d, stream=%p", s, r, n, (int)t, (int)op, c->rank,
          (void *)st)
FAKE_COLL(alltoall, (const void *s, void *r, size_t n, baton_dtype t, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, rank=%d, stream=%p", s, r, n, (int)t, c->rank, (void *)st)

FAKE_COLL(broadcast, (const void *s, void *r, size_t n, baton_dtype t, int root, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, root=%d, rank=%d, stream=%p", s, r, n, (int)t, root, c->rank, (void *)st)
FAKE_COLL(reduce, (const void *s, void *r, size_t n, baton_dtype t, baton_redop op, int root, baton_comm *c,
          cudaStream_t st), "%p, %p, %zu, type=%d, op=%d, root=%d, rank=%d, stream=%p", s, r, n, (int)t, (int)op, root,
          c->rank, (void *)st)

FAKE_COLL(gather, (const void *s, void *r, size_t n, baton_dtype t, int root, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, root=%d, rank=%d, stream=%p", s, r, n, (int)t, root, c->rank, (void *)st)
FAKE_COLL(scatter, (const void *s, void *r, size_t n, baton_dtype t, int root, baton_comm *c, cudaStream_t st),
          "%p, %p, %zu, type=%d, root=%d, rank=%d, stream=%p", s, r, n, (int)t, root, c->rank, (void *)st)

/* The runtime's entry for a chosen program: the public call it stands
 * for (logged as that), counting the calls that came with a choice. */
static int chosen_calls;
int fake_baton_chosen(void) { return chosen_calls; }
baton_result rt_comm_collective(baton_comm *c, ir_coll coll, int root, int ai, const void *s, void *r, size_t n,
                                int t, int op, cudaStream_t st) {
  chosen_calls += ai >= 0;
  switch (coll) {
  case IR_COLL_ALLREDUCE: return baton_allreduce(s, r, n, t, op, c, st);
  case IR_COLL_ALLGATHER: return baton_allgather(s, r, n, t, c, st);
  case IR_COLL_REDUCESCATTER: return baton_reducescatter(s, r, n, t, op, c, st);
  case IR_COLL_ALLTOALL: return baton_alltoall(s, r, n, t, c, st);
  case IR_COLL_BROADCAST: return baton_broadcast(s, r, n, t, root, c, st);
  case IR_COLL_REDUCE: return baton_reduce(s, r, n, t, op, root, c, st);
  case IR_COLL_GATHER: return baton_gather(s, r, n, t, root, c, st);
  case IR_COLL_SCATTER: return baton_scatter(s, r, n, t, root, c, st);
  default: return baton_unsupported;
  }
}

/* CUDA: one device 0, host memory as device memory. */
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaMalloc(void **p, size_t n) { *p = calloc(1, n); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { memcpy(d, s, n); return 0; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { *s = (cudaStream_t)calloc(1, 8); return 0; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "fake CUDA error" : "no error"; }
