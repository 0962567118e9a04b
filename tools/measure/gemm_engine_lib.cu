// gemm_engine_lib.cu -- the GEMM tile engine (interpreter/ip_gemm.cuh) in a
// kernel of its own with a plain row-major epilogue, as a shared library
// that Python loads with ctypes: tools/measure/torch_gemm.py times it
// beside torch.matmul and the GEMM opcode on the same tensors, so that
// what the interpreter adds to the engine is measured in one process.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -cudart static \
//        -I interpreter -I runtime/base tools/measure/gemm_engine_lib.cu build/ip_gemm_host.o build/ip_gemm_order.o \
//        -o libgemm_engine.so
//
// (ip_gemm_host.o and ip_gemm_order.o: gcc -O2 -fPIC -c -I interpreter -I runtime/base -I /usr/local/cuda/include
// interpreter/ip_gemm_host.c -o build/ip_gemm_host.o, and the same for interpreter/ip_gemm_order.c)
#include <cuda_runtime.h>

#include "ip_gemm.cuh"

// Row r of Y at y + r * ldy; nothing skipped, nothing counted.
struct plain_epi {
  __nv_bfloat16 *y;
  int64_t ldy;
  __device__ __nv_bfloat16 *row_ptr(int64_t r) { return y + r * ldy; }
  __device__ bool skip(int64_t) const { return false; }
  __device__ bool publishes() const { return false; }
  __device__ void done(int64_t, int64_t, int, int, int) {}
};

__global__ void __launch_bounds__(IP_GEMM_THREADS, 1) engine_kernel(const __grid_constant__ ip_gemm_args g,
                                                                     plain_epi e) {
  extern __shared__ __align__(16) char smem[];
  plain_epi epi = e;
  ip_gemm_run(g, smem, blockIdx.x, gridDim.x, epi);
}

static ip_gemm_args problem;

// Describes Y = X W (bf16, row-major, device pointers) for the next
// gemm_engine_run calls.  0, or ip_gemm_prepare's error (ip_gemm.h).
extern "C" int gemm_engine_prepare(const void *x, long ldx, const void *w, long ldw, long m, long n, long k) {
  const char *why;
  if (cudaFuncSetAttribute(engine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, IP_GEMM_SMEM) != cudaSuccess)
    return -100;
  return ip_gemm_prepare(&problem, x, ldx, w, ldw, m, n, k, &why);
}

// Launches the engine on `stream` over `grid` blocks, rows of Y ldy
// elements apart.  0, or the launch's cudaError_t.
extern "C" int gemm_engine_run(void *y, long ldy, int grid, void *stream) {
  plain_epi e{(__nv_bfloat16 *)y, ldy};
  engine_kernel<<<grid, IP_GEMM_THREADS, IP_GEMM_SMEM, (cudaStream_t)stream>>>(problem, e);
  return (int)cudaGetLastError();
}
