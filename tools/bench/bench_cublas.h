/* bench_cublas.h -- cuBLAS for `baton bench --fused`, loaded with dlopen
 * at run time (libcublas.so.13, then libcublas.so): the baselines' GEMV
 * (gemv_allreduce) and GEMM (gemm_alltoall).  baton never links cuBLAS. */
#ifndef BENCH_CUBLAS_H
#define BENCH_CUBLAS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "ip_dtype.h"

typedef struct bench_cublas bench_cublas;

/* Loads cuBLAS; NULL with the reason in why. */
bench_cublas *bench_cublas_open(char *why, size_t len);
void bench_cublas_close(bench_cublas *b);

/* "cuBLAS 13.0.2 (libcublas.so.13), cublasGemmEx" (the version once a
 * handle was made; both calls below are cublasGemmEx). */
const char *bench_cublas_describe(const bench_cublas *b);

/* A handle on the current device; NULL with the reason in err. */
void *bench_cublas_handle(bench_cublas *b, char *err, size_t len);
void bench_cublas_handle_free(bench_cublas *b, void *h);

/* y [M] = W [M, K] (row-major, rows ld apart) x [K] on stream, in type t
 * (f32, f16, bf16) with f32 accumulation: cublasGemmEx with n = 1, as
 * PyTorch's linear layer of one token.  0, or -1 with err. */
int bench_cublas_gemv(bench_cublas *b, void *h, ip_dtype t, int64_t M, int64_t K, int64_t ld, const void *W,
                      const void *x, void *y, cudaStream_t stream, char *err, size_t len);

/* C [M, N] = A [M, K] B [K, N], every matrix row-major (rows lda, ldb,
 * ldc elements apart), bf16 with f32 accumulation (CUBLAS_COMPUTE_32F),
 * on stream: as torch.matmul of bf16 tensors.  cublasGemmEx on the
 * column-major transposes, C^T = B^T A^T.  0, or -1 with err. */
int bench_cublas_gemm(bench_cublas *b, void *h, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                      const void *B, int64_t ldb, void *C, int64_t ldc, cudaStream_t stream, char *err, size_t len);

#endif
