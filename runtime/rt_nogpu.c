/* rt_nogpu.c -- libbaton.so of a build without CUDA: the compiler and the
 * CPU verifier (rt_tools.c) work; communicators and collectives answer
 * baton_unsupported, saying why once. */
#include "baton.h"
#include "rt_log.h"
#include "rt_result.h"

const char *baton_result_string(baton_result r) { return bt_result_str((bt_result)r); }
const char *baton_version(void) { return BATON_VERSION; }

/* The answer of every GPU call: unsupported, and the first time a line
 * that says this library has no GPU code. */
static baton_result no_gpu(const char *call) {
  static int said;
  if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    LOG_WARN(RT_SUB_RUNTIME, "%s: this libbaton.so was built without CUDA: communicators and collectives are "
             "unavailable (baton_compile and baton_verify work); rebuild with the CUDA toolkit (docs/RUNTIME.md)", call);
  return baton_unsupported;
}

/* A call on a communicator: none can exist here, so NULL is the caller's
 * error (as in a CUDA build) and anything else is not baton's. */
static baton_result on_comm(const baton_comm *comm, const char *call) {
  return comm ? no_gpu(call) : baton_invalid_argument;
}

baton_result baton_comm_init_all(baton_comm **comms, int ndev, const int *devlist) {
  (void)comms; (void)ndev; (void)devlist;
  return no_gpu("baton_comm_init_all");
}
baton_result baton_get_unique_id(baton_unique_id *id) {
  (void)id;
  return no_gpu("baton_get_unique_id");
}
baton_result baton_comm_init_rank(baton_comm **comm, int nranks, baton_unique_id id, int rank) {
  (void)comm; (void)nranks; (void)id; (void)rank;
  return no_gpu("baton_comm_init_rank");
}
baton_result baton_comm_destroy(baton_comm *comm) { return on_comm(comm, "baton_comm_destroy"); }
baton_result baton_comm_abort(baton_comm *comm) { return on_comm(comm, "baton_comm_abort"); }
baton_result baton_comm_get_async_error(baton_comm *comm, baton_result *err) {
  (void)err;
  return on_comm(comm, "baton_comm_get_async_error");
}
baton_result baton_comm_net_bytes(const baton_comm *comm, uint64_t *sent, uint64_t *received) {
  (void)sent; (void)received;
  return on_comm(comm, "baton_comm_net_bytes");
}
baton_result baton_comm_count(const baton_comm *comm, int *nranks) {
  (void)nranks;
  return on_comm(comm, "baton_comm_count");
}
baton_result baton_comm_user_rank(const baton_comm *comm, int *rank) {
  (void)rank;
  return on_comm(comm, "baton_comm_user_rank");
}
baton_result baton_comm_cu_device(const baton_comm *comm, int *dev) {
  (void)dev;
  return on_comm(comm, "baton_comm_cu_device");
}
baton_result baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_redop op,
                             baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)op; (void)stream;
  return on_comm(comm, "baton_allreduce");
}
baton_result baton_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype dtype,
                             baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)sendcount; (void)dtype; (void)stream;
  return on_comm(comm, "baton_allgather");
}
baton_result baton_reducescatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype dtype,
                                 baton_redop op, baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)recvcount; (void)dtype; (void)op; (void)stream;
  return on_comm(comm, "baton_reducescatter");
}
baton_result baton_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_comm *comm,
                            cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)stream;
  return on_comm(comm, "baton_alltoall");
}
baton_result baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                             baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)root; (void)stream;
  return on_comm(comm, "baton_broadcast");
}
baton_result baton_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_redop op,
                          int root, baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)op; (void)root; (void)stream;
  return on_comm(comm, "baton_reduce");
}
baton_result baton_gather(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                          baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)root; (void)stream;
  return on_comm(comm, "baton_gather");
}
baton_result baton_scatter(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                           baton_comm *comm, cudaStream_t stream) {
  (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)root; (void)stream;
  return on_comm(comm, "baton_scatter");
}
baton_result baton_run(const char *name, const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype,
                       baton_redop op, baton_comm *comm, cudaStream_t stream) {
  (void)name; (void)sendbuf; (void)recvbuf; (void)count; (void)dtype; (void)op; (void)stream;
  return on_comm(comm, "baton_run");
}
baton_result baton_gemv_allreduce(baton_comm *comm, const void *W, const void *x, void *y, size_t M, size_t K_local,
                                  baton_dtype dtype, cudaStream_t stream) {
  (void)W; (void)x; (void)y; (void)M; (void)K_local; (void)dtype; (void)stream;
  return on_comm(comm, "baton_gemv_allreduce");
}
baton_result baton_embedding_alltoall(baton_comm *comm, const void *table, size_t rows, size_t dim, size_t ld,
                                      const int64_t *indices, size_t nindices, const int64_t *offsets,
                                      const void *weights, size_t batch, size_t tables, baton_redop mode,
                                      void *out, baton_dtype dtype, cudaStream_t stream) {
  (void)table; (void)rows; (void)dim; (void)ld; (void)indices; (void)nindices; (void)offsets; (void)weights;
  (void)batch; (void)tables; (void)mode; (void)out; (void)dtype; (void)stream;
  return on_comm(comm, "baton_embedding_alltoall");
}
baton_result baton_gemm_alltoall(baton_comm *comm, const void *X, size_t ldx, const void *W, size_t ldw,
                                 const int32_t *counts, void *out, size_t tokens, size_t F, size_t H,
                                 baton_dtype dtype, cudaStream_t stream) {
  (void)X; (void)ldx; (void)W; (void)ldw; (void)counts; (void)out; (void)tokens; (void)F; (void)H; (void)dtype;
  (void)stream;
  return on_comm(comm, "baton_gemm_alltoall");
}
baton_result baton_run_fused(const char *name, const baton_operand *operands, int noperands, void *recvbuf,
                             size_t count, baton_dtype dtype, baton_redop op, baton_comm *comm, cudaStream_t stream) {
  (void)name; (void)operands; (void)noperands; (void)recvbuf; (void)count; (void)dtype; (void)op; (void)stream;
  return on_comm(comm, "baton_run_fused");
}
baton_result baton_comm_register(baton_comm *comm, void *buf, size_t bytes, baton_window **win) {
  (void)buf; (void)bytes; (void)win;
  return on_comm(comm, "baton_comm_register");
}
baton_result baton_comm_deregister(baton_comm *comm, baton_window *win) {
  (void)win;
  return on_comm(comm, "baton_comm_deregister");
}
baton_result baton_mem_alloc(void **ptr, size_t bytes) {
  (void)ptr; (void)bytes;
  return no_gpu("baton_mem_alloc");
}
baton_result baton_mem_free(void *ptr) { return ptr ? no_gpu("baton_mem_free") : baton_success; }
baton_result baton_group_start(void) { return no_gpu("baton_group_start"); }
baton_result baton_group_end(void) { return no_gpu("baton_group_end"); }
int baton_comm_algorithm_count(const baton_comm *comm) { (void)comm; return 0; }
const char *baton_comm_algorithm_name(const baton_comm *comm, int i) { (void)comm; (void)i; return NULL; }
const char *baton_comm_last_algorithm(const baton_comm *comm) { (void)comm; return NULL; }
