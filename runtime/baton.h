/* baton.h -- baton's public C API: communicators over GPUs and collectives
 * that run IR algorithms on them.
 *
 * Every collective is asynchronous on a CUDA stream and may be captured in
 * a CUDA graph.  Which algorithm runs is chosen from the IR files named in
 * BATON_ALGO_FILES / BATON_ALGO_DIR / MSCCL_XML_FILES (docs/RUNTIME.md);
 * BATON_DEBUG=INFO logs the choice for every call. */
#ifndef BATON_H
#define BATON_H

#include <stddef.h>
#include <stdint.h>
/* The CUDA runtime's stream type; without the CUDA headers (a CPU-only
 * build, where compile and verify work) the same type, declared here. */
#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define BATON_HAVE_CUDA_HEADERS 1
#endif
#endif
#ifndef BATON_HAVE_CUDA_HEADERS
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Results.  The values are those of baton's internal result type. */
typedef enum baton_result {
  baton_success = 0,
  baton_invalid_argument = 1,
  baton_out_of_memory = 2,
  baton_system_error = 3,
  baton_deadlock = 4,
  baton_wrong_result = 5,
  baton_unsupported = 6,
  baton_cuda_error = 7,
  baton_internal_error = 8,
  baton_timeout = 9,
  baton_aborted = 10,
  baton_remote_error = 11
} baton_result;

/* Element types and reduction operators (avg: the sum divided by the
 * number of ranks). */
typedef enum baton_dtype {
  baton_f32, baton_f64, baton_f16, baton_bf16, baton_i32, baton_u32, baton_i64, baton_u64, baton_i8, baton_u8
} baton_dtype;
typedef enum baton_redop { baton_sum, baton_prod, baton_max, baton_min, baton_avg } baton_redop;

typedef struct baton_comm baton_comm;

/* 128 opaque bytes: one rank creates it, the application passes it to the
 * others (MPI broadcast, a file, a key-value store). */
typedef struct baton_unique_id { char bytes[128]; } baton_unique_id;

const char *baton_result_string(baton_result r);
const char *baton_version(void);

/* One process driving several GPUs: comms[i] is rank i on devlist[i]
 * (devices 0..ndev-1 when devlist is NULL).  A device may appear more
 * than once (for tests on fewer GPUs than ranks): its ranks then share its
 * SMs, and their messages never leave it, so their speed says nothing of
 * NVLink's. */
baton_result baton_comm_init_all(baton_comm **comms, int ndev, const int *devlist);

/* One process per GPU: every rank calls this with the same id, on the
 * CUDA device it will use as the current device. */
baton_result baton_get_unique_id(baton_unique_id *id);
baton_result baton_comm_init_rank(baton_comm **comm, int nranks, baton_unique_id id, int rank);

/* Frees the communicator after its work has finished.  Abort first stops
 * every running kernel of the communicator (a peer that died, a call
 * that will never complete); the communicator is unusable afterwards, and
 * its destruction then returns at once: it is freed by a thread of its
 * own once the GPU's work has ended, so that aborting one communicator
 * never waits on another's kernel that only its own abort would stop (at
 * the process's exit, baton waits up to 10 s for such threads). */
baton_result baton_comm_destroy(baton_comm *comm);
baton_result baton_comm_abort(baton_comm *comm);

/* baton_success, or the error that stopped an asynchronous call (e.g.
 * baton_timeout: a GPU waited BATON_TIMEOUT seconds for a peer).  The
 * error's details are logged at WARN. */
baton_result baton_comm_get_async_error(baton_comm *comm, baton_result *err);

/* Payload bytes this rank has sent and received over the network
 * transport so far (0 and 0 when all its peers are in its node group). */
baton_result baton_comm_net_bytes(const baton_comm *comm, uint64_t *sent, uint64_t *received);

baton_result baton_comm_count(const baton_comm *comm, int *nranks);
baton_result baton_comm_user_rank(const baton_comm *comm, int *rank);
baton_result baton_comm_cu_device(const baton_comm *comm, int *dev);

/* Collectives, with NCCL's buffer conventions: counts are per rank
 * (allgather: elements each rank contributes; reducescatter: elements
 * each rank receives; alltoall: elements sent to each peer).  In place
 * when the buffers are laid out as NCCL's in-place calls lay them out. */
baton_result baton_allreduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_redop op,
                             baton_comm *comm, cudaStream_t stream);
baton_result baton_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, baton_dtype dtype,
                             baton_comm *comm, cudaStream_t stream);
baton_result baton_reducescatter(const void *sendbuf, void *recvbuf, size_t recvcount, baton_dtype dtype,
                                 baton_redop op, baton_comm *comm, cudaStream_t stream);
baton_result baton_alltoall(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_comm *comm,
                            cudaStream_t stream);

/* Rooted collectives, as NCCL's: broadcast copies root's sendbuf into
 * every rank's recvbuf; reduce leaves the reduction of every rank's
 * sendbuf in root's recvbuf.  sendbuf == recvbuf is in place.  Off the
 * root, a broadcast's sendbuf and a reduce's recvbuf are not used and may
 * be NULL.  One compiled program serves every root (docs/RUNTIME.md). */
baton_result baton_broadcast(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                             baton_comm *comm, cudaStream_t stream);
baton_result baton_reduce(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, baton_redop op,
                          int root, baton_comm *comm, cudaStream_t stream);

/* Gather and scatter, as NCCL's: gather leaves every rank's sendbuf
 * (count elements) in root's recvbuf at block rank*count; scatter sends
 * block rank*count of root's sendbuf to every rank's recvbuf.  Off the
 * root a gather's recvbuf and a scatter's sendbuf are not used and may be
 * NULL; in place is NCCL's layout (gather: sendbuf == recvbuf +
 * root*count; scatter: recvbuf == sendbuf + root*count).  One program
 * serves every root: the root's block-per-rank buffer goes through a
 * rotated copy in the scratch for a root other than 0 (docs/RUNTIME.md). */
baton_result baton_gather(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                          baton_comm *comm, cudaStream_t stream);
baton_result baton_scatter(const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype, int root,
                           baton_comm *comm, cudaStream_t stream);

/* Runs the loaded algorithm called `name` (its IR name or file path),
 * whatever its collective, with `count` elements per block (see
 * docs/RUNTIME.md).  The way to run custom collectives. */
baton_result baton_run(const char *name, const void *sendbuf, void *recvbuf, size_t count, baton_dtype dtype,
                       baton_redop op, baton_comm *comm, cudaStream_t stream);

/* Fused computation and communication (docs/FUSED.md): programs whose
 * thread blocks compute their input from operand buffers, tile by tile,
 * and send each tile on as soon as it is done.  Loaded like any other
 * (BATON_ALGO_FILES ...); never chosen for a plain collective. */

/* An operand buffer of a fused call, bound to the program's by name: a
 * matrix of rows x cols elements, row-major, rows ld elements apart (ld 0:
 * cols), or a vector of rows elements (cols 1).  Device memory of the
 * call's type; an index vector's elements are the integers its program
 * declares (i64 unless it says i32).  An entry with data NULL whose name
 * is no operand's binds a dimension of the program to `rows` (such as
 * the T of an interleave "T*D"). */
typedef struct baton_operand {
  const char *name;
  const void *data;
  size_t rows, cols, ld;
} baton_operand;

/* y = sum over ranks of W_r x_r on every rank (the tensor-parallel row
 * split of a linear layer in decoding): rank r holds W [M, K_local]
 * (row-major, its K_local columns of the layer) and x [K_local]; y holds M
 * elements.  f32, f16 or bf16, accumulated in f32.  Runs the loaded fused
 * GEMV + AllReduce program chosen for M * sizeof(type) bytes (its size
 * range), in place on y.  Asynchronous on the stream, capturable. */
baton_result baton_gemv_allreduce(baton_comm *comm, const void *W, const void *x, void *y, size_t M, size_t K_local,
                                  baton_dtype dtype, cudaStream_t stream);

/* Embedding bags + AllToAll (model-parallel embedding tables): this rank
 * holds `tables` tables of `dim` columns stacked in `table` [rows, dim]
 * (row-major, rows ld elements apart; ld 0: dim) and pools them for the
 * whole global batch of `batch` samples: bag s*tables + t (table t of
 * sample s) sums -- mode baton_sum -- or averages -- baton_avg -- the rows
 * indices[offsets[b] .. offsets[b+1]-1] (int64; offsets has
 * batch*tables + 1 entries, indices nindices), each row times its weight
 * when `weights` (one per index, the table's type; sum only) is not NULL.
 * The pooled vectors of rank q's samples (q*batch/n .. (q+1)*batch/n - 1)
 * go to rank q: out [batch/n, n*tables*dim] holds, for each of this
 * rank's samples, every rank's tables*dim pooled values in rank order.
 * f32, f16 or bf16, accumulated in f32.  batch must be a multiple of the
 * ranks.  Runs the loaded fused program chosen for batch/n*tables*dim
 * elements (its size range); asynchronous on the stream, capturable.  An
 * index outside [0, rows) is skipped and an offset out of order clamped;
 * either makes the communicator report baton_invalid_argument. */
baton_result baton_embedding_alltoall(baton_comm *comm, const void *table, size_t rows, size_t dim, size_t ld,
                                      const int64_t *indices, size_t nindices, const int64_t *offsets,
                                      const void *weights, size_t batch, size_t tables, baton_redop mode,
                                      void *out, baton_dtype dtype, cudaStream_t stream);

/* Expert GEMM + AllToAll (the mixture-of-experts combine, one expert per
 * rank): this rank holds X [tokens, F] (row-major, rows ldx elements
 * apart; ldx 0: F), the tokens routed to its expert in n blocks of
 * tokens/n rows, block q holding rank q's (the layout a dispatch AllToAll
 * leaves), and the expert's weight W [F, H] (ldw; 0: H).  It computes
 * Y = X W (bf16, accumulated in f32) tile by tile on tensor cores, and
 * the rows of rank q's tokens go to rank q as soon as they are computed,
 * the other ranks' first: out [tokens, H] holds in block q (tokens/n
 * rows) this rank's tokens' outputs from expert q.
 *
 * counts, the token-to-rank map when the combine is uneven: NULL (every
 * row of X is a token), or n int32 in device memory, read when the call
 * runs (so a router's counts need no copy to the host and the call can be
 * captured once): block q's first counts[q] rows are rank q's tokens and
 * the rest of the block is padding up to the capacity tokens/n.  Tiles of
 * padding rows are not computed; the rows of out's blocks past the
 * sender's count are left unspecified (blocks still move whole).  A count
 * outside [0, tokens/n] is taken as the nearest bound and makes the
 * communicator report baton_invalid_argument.
 *
 * tokens must be a multiple of the ranks, and on the GPU H and F
 * multiples of 64.  Runs the loaded fused program chosen for tokens/n*H
 * elements (its size range); asynchronous on the stream, capturable. */
baton_result baton_gemm_alltoall(baton_comm *comm, const void *X, size_t ldx, const void *W, size_t ldw,
                                 const int32_t *counts, void *out, size_t tokens, size_t F, size_t H,
                                 baton_dtype dtype, cudaStream_t stream);

/* Runs the loaded fused program called `name` with its operands on
 * recvbuf (`count` elements per block, as baton_run): an in-place program
 * computes its input in recvbuf (NCCL's in-place layout), an
 * out-of-place one in baton's scratch.  op: baton_sum or baton_avg (the
 * others are refused with baton_invalid_argument). */
baton_result baton_run_fused(const char *name, const baton_operand *operands, int noperands, void *recvbuf,
                             size_t count, baton_dtype dtype, baton_redop op, baton_comm *comm, cudaStream_t stream);

/* Registered windows (docs/RUNTIME.md, "Registered buffers").  On a
 * communicator of a process per GPU, every rank calls baton_comm_register
 * together, in the same order, with its own buffer of the same size: each
 * rank then maps every peer's, once.  A later call whose buffers lie in
 * windows, at the same offsets on every rank, runs a direct program on
 * the ranks' own buffers: no copy through baton's window, nothing
 * exchanged per call.  Every rank's call must use its windows alike (same
 * windows, same offsets, or none): a call where ranks differ is stopped
 * with baton_invalid_argument before a rank touches another's buffers.
 * The buffer must be device memory of the communicator's GPU from
 * cudaMalloc or baton_mem_alloc, inside one allocation, overlapping no
 * other window; BATON_REG_WINDOWS windows at most.  On a communicator of
 * one process the buffer is only checked (peer access already reaches
 * it).  baton_comm_deregister is collective the same way; calls enqueued
 * before it still run.  A window whose memory was freed is not used. */
typedef struct baton_window baton_window;
baton_result baton_comm_register(baton_comm *comm, void *buf, size_t bytes, baton_window **win);
baton_result baton_comm_deregister(baton_comm *comm, baton_window *win);
/* Device memory of the current GPU that windows can be made of. */
baton_result baton_mem_alloc(void **ptr, size_t bytes);
baton_result baton_mem_free(void *ptr);

/* Groups (as NCCL's ncclGroupStart/End, per thread, nestable): the calls
 * made between start and the outermost end are checked and prepared when
 * made, and launched at the end, each GPU's in order and different GPUs
 * in parallel from one host thread per GPU (BATON_LAUNCH_THREADS).  One
 * thread driving several GPUs should group the calls of one collective:
 * launching them one after the other costs a few microseconds per GPU.
 * When a call of the group fails, none is launched and the end returns
 * the first error. */
baton_result baton_group_start(void);
baton_result baton_group_end(void);

/* The algorithms this communicator loaded, and the one its last call ran. */
int baton_comm_algorithm_count(const baton_comm *comm);
const char *baton_comm_algorithm_name(const baton_comm *comm, int i);
const char *baton_comm_last_algorithm(const baton_comm *comm);

/* The compiler and the CPU verifier, as `baton compile` and `baton
 * verify` (docs/DSL.md); no GPU is used.  On failure err (errlen bytes,
 * may be NULL) holds the first lines of the diagnostic, NUL-terminated
 * and cut to fit: "script.lua:LINE: message" for an error in the script.
 *
 * baton_compile runs the algorithm script at `script` with params[i] =
 * "KEY=VALUE" (nparams of them, at most 128, read by param() in the
 * script), lowers, fuses and schedules it, validates the result (races
 * and deadlock with BATON_EXEC_SLOTS FIFO slots included), runs it on the
 * CPU executor three times and only then writes the IR to out_path.  It
 * compiles in this process through libbaton_compile.so.0, the compiler
 * installed beside libbaton.so, which links the system's shared Lua
 * (liblua5.4.so.0; libbaton itself holds no Lua); that library reads
 * baton's environment parameters at its first compile.  Where it does not
 * load, it runs the baton program of this library's installation
 * (PREFIX/bin/baton) or build tree (tools/baton beside libbaton.so) as a
 * child process with this process's environment.  baton_invalid_argument
 * for a script or program that is wrong, baton_wrong_result or
 * baton_deadlock for a CPU run that fails, baton_system_error when no
 * compiler loads or runs, or out_path cannot be written. */
baton_result baton_compile(const char *script, const char *const *params, int nparams, const char *out_path,
                           char *err, size_t errlen);

/* Validates the IR file at ir_path (its XML, deadlock freedom with
 * BATON_EXEC_SLOTS FIFO slots, races for the placement it runs in) and
 * runs it for all ranks on the CPU executor, checking its collective's
 * postcondition: f32 sum (bf16 for a program whose compute steps take
 * only that), 4099 elements per block in 128-element tiles (a fused or
 * interleaved program: unbound dimensions small and a count of whole
 * output rows, as baton compile checks it) -- the run of `baton verify
 * FILE`.  baton_invalid_argument for a file that is not a valid program
 * (or options that do not fit it), baton_wrong_result or baton_deadlock
 * for a run that fails.  In this process: its first call reads baton's
 * environment parameters, which the library reads once (set
 * BATON_ALGO_DIR and the others before it). */
baton_result baton_verify(const char *ir_path, char *err, size_t errlen);

/* What baton_verify_with changes of that run (zero: as baton_verify).
 * expect: a custom collective's postcondition in `baton verify
 * --expect`'s language (refused for a built-in collective, which has its
 * own); placement: 0 the program's own, 1 in place, 2 out of place;
 * count: elements per block (0: as above). */
typedef struct baton_verify_opts {
  const char *expect;
  int placement;
  long long count;
} baton_verify_opts;

/* baton_verify with options o (NULL: none), as `baton verify --expect
 * SPEC --inplace|--outofplace --count N FILE`. */
baton_result baton_verify_with(const char *ir_path, const baton_verify_opts *o, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
