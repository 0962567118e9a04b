/* bench_cublas.c -- cuBLAS loaded with dlopen for `baton bench --fused`:
 * cublas_api.h gives the types only; every function is resolved at run
 * time. */
#include <cublas_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_cublas.h"

struct bench_cublas {
  void *dl;
  const char *lib;               /* the library's name dlopen took */
  char desc[200];
  cublasStatus_t (*Create)(cublasHandle_t *);
  cublasStatus_t (*Destroy)(cublasHandle_t);
  cublasStatus_t (*SetStream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*GetVersion)(cublasHandle_t, int *);
  cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                           const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                           cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
};

bench_cublas *bench_cublas_open(char *why, size_t len) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so"};
  void *dl = NULL;
  const char *name = NULL;
  for (int i = 0; i < 2 && !dl; i++) dl = dlopen(name = names[i], RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(why, len, "cannot load cuBLAS (libcublas.so.13, libcublas.so): %s", dlerror());
    return NULL;
  }
  bench_cublas *b = calloc(1, sizeof *b);
  if (!b) { dlclose(dl); snprintf(why, len, "out of memory"); return NULL; }
  b->dl = dl;
  b->lib = name;
  struct { void **fn; const char *name; } sym[] = {
    {(void **)&b->Create, "cublasCreate_v2"}, {(void **)&b->Destroy, "cublasDestroy_v2"},
    {(void **)&b->SetStream, "cublasSetStream_v2"}, {(void **)&b->GetVersion, "cublasGetVersion_v2"},
    {(void **)&b->GemmEx, "cublasGemmEx"},
  };
  for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++)
    if (!(*sym[i].fn = dlsym(dl, sym[i].name))) {
      snprintf(why, len, "%s has no %s", name, sym[i].name);
      bench_cublas_close(b);
      return NULL;
    }
  snprintf(b->desc, sizeof b->desc, "cuBLAS (%s), cublasGemmEx", name);
  return b;
}

void bench_cublas_close(bench_cublas *b) {
  if (!b) return;
  dlclose(b->dl);
  free(b);
}

const char *bench_cublas_describe(const bench_cublas *b) { return b->desc; }

void *bench_cublas_handle(bench_cublas *b, char *err, size_t len) {
  cublasHandle_t h = NULL;
  cublasStatus_t s = b->Create(&h);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, len, "cublasCreate failed: status %d", (int)s);
    return NULL;
  }
  int v = 0;
  if (b->GetVersion(h, &v) == CUBLAS_STATUS_SUCCESS && v)
    snprintf(b->desc, sizeof b->desc, "cuBLAS %d.%d.%d (%s), cublasGemmEx", v / 10000, v / 100 % 100, v % 100,
             b->lib);
  return h;
}

void bench_cublas_handle_free(bench_cublas *b, void *h) {
  if (h) b->Destroy((cublasHandle_t)h);
}

int bench_cublas_gemv(bench_cublas *b, void *h, ip_dtype t, int64_t M, int64_t K, int64_t ld, const void *W,
                      const void *x, void *y, cudaStream_t stream, char *err, size_t len) {
  cudaDataType ty = t == IP_F32 ? CUDA_R_32F : t == IP_F16 ? CUDA_R_16F : CUDA_R_16BF;
  if ((t != IP_F32 && t != IP_F16 && t != IP_BF16) || M > INT32_MAX || K > INT32_MAX || ld > INT32_MAX) {
    snprintf(err, len, "cuBLAS GEMV of %s, %lld x %lld: not supported here", ip_dtype_name[t], (long long)M, (long long)K);
    return -1;
  }
  const float one = 1, zero = 0;
  cublasStatus_t s = b->SetStream((cublasHandle_t)h, stream);
  /* Row-major W is column-major W^T (K x M, leading dimension ld): y = (W^T)^T x. */
  if (s == CUBLAS_STATUS_SUCCESS)
    s = b->GemmEx((cublasHandle_t)h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, 1, (int)K, &one, W, ty, (int)ld, x, ty, (int)K,
                  &zero, y, ty, (int)M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, len, "cublasGemmEx (GEMV %lld x %lld, %s) failed: status %d", (long long)M, (long long)K,
             ip_dtype_name[t], (int)s);
    return -1;
  }
  return 0;
}

int bench_cublas_gemm(bench_cublas *b, void *h, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                      const void *B, int64_t ldb, void *C, int64_t ldc, cudaStream_t stream, char *err, size_t len) {
  if (M < 1 || N < 1 || K < 1 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || lda > INT32_MAX ||
      ldb > INT32_MAX || ldc > INT32_MAX || lda < K || ldb < N || ldc < N) {
    snprintf(err, len, "cuBLAS GEMM %lld x %lld x %lld (lda %lld, ldb %lld, ldc %lld): not supported here",
             (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc);
    return -1;
  }
  const float one = 1, zero = 0;
  cublasStatus_t s = b->SetStream((cublasHandle_t)h, stream);
  /* Row-major C [M, N] is column-major C^T [N, M] (leading dimension ldc),
   * and likewise A^T [K, M] and B^T [N, K]: C^T = B^T A^T, no transposes. */
  if (s == CUBLAS_STATUS_SUCCESS)
    s = b->GemmEx((cublasHandle_t)h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, CUDA_R_16BF, (int)ldb,
                  A, CUDA_R_16BF, (int)lda, &zero, C, CUDA_R_16BF, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, len, "cublasGemmEx (GEMM %lld x %lld x %lld, bf16) failed: status %d", (long long)M, (long long)N,
             (long long)K, (int)s);
    return -1;
  }
  return 0;
}
