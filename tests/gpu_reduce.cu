// gpu_reduce.cu -- gpu suite: the device reduction primitives agree bit for
// bit with the host ones for every type and operator.  Skipped (TAP plan
// 1..0 # SKIP) where no GPU is present.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip_dtype.h"
#include "ip_reduce.cuh"

typedef void (*kern_t)(void *, const void *, const void *, size_t);

template <int DT> static kern_t pick(int op) {
  switch (op) {
  case IP_OP_SUM: return ip_reduce_kernel<DT, IP_OP_SUM>;
  case IP_OP_PROD: return ip_reduce_kernel<DT, IP_OP_PROD>;
  case IP_OP_MAX: return ip_reduce_kernel<DT, IP_OP_MAX>;
  case IP_OP_MIN: return ip_reduce_kernel<DT, IP_OP_MIN>;
  default: return ip_reduce_kernel<DT, IP_OP_AVG>;
  }
}

static kern_t kernel_for(int dt, int op) {
  switch (dt) {
  case IP_F32: return pick<IP_F32>(op);
  case IP_F64: return pick<IP_F64>(op);
  case IP_F16: return pick<IP_F16>(op);
  case IP_BF16: return pick<IP_BF16>(op);
  case IP_I32: return pick<IP_I32>(op);
  case IP_U32: return pick<IP_U32>(op);
  case IP_I64: return pick<IP_I64>(op);
  case IP_U64: return pick<IP_U64>(op);
  case IP_I8: return pick<IP_I8>(op);
  default: return pick<IP_U8>(op);
  }
}

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("Bail out! %s: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    // TAP's skip plan: meson counts the test as skipped.
    printf("1..0 # SKIP no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  const size_t n = 1 << 16;
  unsigned char *a = (unsigned char *)malloc(n * 8), *b = (unsigned char *)malloc(n * 8);
  unsigned char *want = (unsigned char *)malloc(n * 8), *got = (unsigned char *)malloc(n * 8);
  void *da, *db, *dd;
  CK(cudaMalloc(&da, n * 8)); CK(cudaMalloc(&db, n * 8)); CK(cudaMalloc(&dd, n * 8));
  int t = 0, failed = 0;
  srand(1);
  for (int dt = 0; dt < IP_DTYPE_COUNT; dt++) {
    int es = ip_dtype_size[dt];
    for (size_t i = 0; i < n; i++) {
      if (ip_dtype_kind[dt] == 'F') {   // finite values, some large enough to overflow f16 products
        ip_set((ip_dtype)dt, a, i, (rand() % 20001 - 10000) / 64.0);
        ip_set((ip_dtype)dt, b, i, (rand() % 20001 - 10000) / 64.0);
      } else {                          // any bit pattern: wrapping must agree
        for (int k = 0; k < es; k++) { a[i * es + k] = rand(); b[i * es + k] = rand(); }
      }
    }
    CK(cudaMemcpy(da, a, n * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b, n * es, cudaMemcpyHostToDevice));
    for (int op = 0; op < IP_REDOP_COUNT; op++) {
      ip_reduce((ip_dtype)dt, (ip_redop)op, want, a, b, n);
      kernel_for(dt, op)<<<64, 256>>>(dd, da, db, n);
      CK(cudaGetLastError());
      CK(cudaMemcpy(got, dd, n * es, cudaMemcpyDeviceToHost));
      size_t bad = n;
      for (size_t i = 0; i < n && bad == n; i++)
        if (memcmp(want + i * es, got + i * es, es)) bad = i;
      t++;
      if (bad == n) printf("ok %d - %s %s on the GPU matches the host bit for bit\n", t, ip_dtype_name[dt], ip_redop_name[op]);
      else {
        failed++;
        printf("not ok %d - %s %s: element %zu: host %g, device %g\n", t, ip_dtype_name[dt], ip_redop_name[op], bad,
               ip_get((ip_dtype)dt, want, bad), ip_get((ip_dtype)dt, got, bad));
      }
    }
  }
  printf("1..%d\n", t);
  cudaFree(da); cudaFree(db); cudaFree(dd);
  free(a); free(b); free(want); free(got);
  return failed ? 1 : 0;
}
