/* bench_nccl.h -- NCCL for `baton bench`, loaded with dlopen at run time
 * (BATON_NCCL_LIB, else libnccl.so.2); baton never links libnccl. */
#ifndef BENCH_NCCL_H
#define BENCH_NCCL_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "bench.h"

typedef struct bench_nccl bench_nccl;

/* Loads NCCL and resolves the functions bench uses.  NULL on failure,
 * with the reason (library or symbol) in why. */
bench_nccl *bench_nccl_open(char *why, size_t len);
void bench_nccl_close(bench_nccl *n);

/* "NCCL 2.28.9 (libnccl.so.2), all-to-all by ncclAlltoAll". */
const char *bench_nccl_describe(const bench_nccl *n);

/* NULL when n has collective c, else the name of the function it lacks
 * (ncclGather and ncclScatter came in NCCL 2.28; the others are required
 * or, all-to-all, replaced by grouped sends and receives). */
const char *bench_nccl_lacks(const bench_nccl *n, bench_coll c);

/* Each returns 0, or -1 with "ncclX failed: <NCCL's error string>" in err. */
int bench_nccl_unique_id(bench_nccl *n, char id[128], char *err, size_t len);
int bench_nccl_init_all(bench_nccl *n, void **comms, int ndev, char *err, size_t len);
int bench_nccl_init_rank(bench_nccl *n, void **comm, int nranks, const char id[128], int rank, char *err, size_t len);

/* One call of collective c on nlocal communicators of this process (in
 * one NCCL group): comms[i] on streams[i] with send[i] and recv[i];
 * count per rank as in bench_geom; nranks is the communicator size
 * (used by the send/recv all-to-all of NCCL versions without
 * ncclAlltoAll); root is the rooted collectives' (the others ignore
 * it).  c is one bench_nccl_lacks does not name. */
int bench_nccl_launch(bench_nccl *n, bench_coll c, void *const *comms, int nlocal, int nranks, void *const *send,
                      void *const *recv, size_t count, ip_dtype t, ip_redop op, int root, cudaStream_t *streams,
                      char *err, size_t len);

/* 0 when comm is healthy; -1 with the asynchronous error in err. */
int bench_nccl_async_error(bench_nccl *n, void *comm, char *err, size_t len);
void bench_nccl_abort(bench_nccl *n, void *comm);
void bench_nccl_destroy(bench_nccl *n, void *comm);

/* ncclCommRegister of bytes at buf (*handle for bench_nccl_deregister);
 * 0, or -1 with err (also when the library lacks it). */
int bench_nccl_register(bench_nccl *n, void *comm, void *buf, size_t bytes, void **handle, char *err, size_t len);
void bench_nccl_deregister(bench_nccl *n, void *comm, void *handle);

/* ncclMemAlloc of bytes on the current GPU into *p (what nccl-tests
 * allocates its buffers with): 0, or -1 with err (also when the library
 * lacks it).  bench_nccl_mem_free gives it back. */
int bench_nccl_mem_alloc(bench_nccl *n, void **p, size_t bytes, char *err, size_t len);
void bench_nccl_mem_free(bench_nccl *n, void *p);

#endif
