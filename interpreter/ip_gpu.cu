// ip_gpu.cu -- the host's side of the GPU interpreter: launch, load and
// occupancy calls over its kernels (ip_gpu_kernel.cuh), which the build
// compiles per element type (ip_gpu_type.cu) so that they build in
// parallel.  Programs with gemm steps run ip_gpu_gemm.cu's kernel instead.
#include <cuda_runtime.h>

#include "ip_gpu.h"
#include "rt_cudart.h"
#include "rt_log.h"

// Each type's kernels (ip_gpu_type.cu): the interpreter's for SUM, PROD,
// MAX and MIN, then AVG's division.
#define X(id, name, ctype, size, kind) extern "C" const void *const ip_gpu_kernels_##id[IP_GPU_TYPE_KERNELS];
#include "ip_dtype.def"
#undef X

// The kernels of each type; AVG runs the SUM kernel (the division comes
// after), collectives that do not reduce run any of them.
static const void *const *const kernels[IP_DTYPE_COUNT] = {
#define X(id, name, ctype, size, kind) ip_gpu_kernels_##id,
#include "ip_dtype.def"
#undef X
};

static const void *kernel_of(int dtype, int op) {
  return kernels[dtype >= 0 && dtype < IP_DTYPE_COUNT ? dtype : 0][ip_kernel_slot(op)];
}

extern "C" bt_result ip_gpu_launch(const ip_gargs *a, int nthreads, int pdl, void *stream) {
  if (a->cgemm) return ip_gpu_gemm_launch(a, pdl, stream);
  size_t smem = ip_gpu_smem(a);
  ip_gargs args = *a;
  void *params[] = {&args};
  /* cudaLaunchKernel reports this launch's own error, never one an
   * earlier call of the application left behind. */
  return rt_cuda(cudaLaunchKernel(kernel_of(a->dtype, a->op), dim3(ip_gpu_blocks(a)), dim3(nthreads), params, smem,
                                  (cudaStream_t)stream), RT_SUB_EXEC, "interpreter launch");
}

extern "C" bt_result ip_gpu_divide(int dtype, void *p, int64_t n, int divisor, void *stream) {
  if (n <= 0) return BT_OK;
  if (dtype < 0 || dtype >= IP_DTYPE_COUNT) return BT_ERR_INVALID;
  int blocks = (int)((n + 511) / 512);
  if (blocks > 1024) blocks = 1024;
  void *params[] = {&p, &n, &divisor};
  return rt_cuda(cudaLaunchKernel(kernels[dtype][IP_GPU_DIVIDE], dim3(blocks), dim3(512), params, 0, (cudaStream_t)stream),
                 RT_SUB_EXEC, "avg divide launch");
}

extern "C" bt_result ip_gpu_load(void) {
  cudaFuncAttributes at;
  /* Steps and a stage together may pass the 48 KiB a launch gets unasked. */
  const int smem = IP_GPU_SMEM_STEPS * (int)sizeof(ip_gstep) + IP_GPU_STAGE_BYTES;
  for (int d = 0; d < IP_DTYPE_COUNT; d++)
    for (int o = 0; o < 4; o++) {
      CHECK(rt_cuda(cudaFuncGetAttributes(&at, kernels[d][o]), RT_SUB_EXEC, "loading the interpreter"));
      CHECK(rt_cuda(cudaFuncSetAttribute(kernels[d][o], cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                    RT_SUB_EXEC, "allowing the interpreter its shared memory"));
    }
  for (int d = 0; d < IP_DTYPE_COUNT; d++)
    CHECK(rt_cuda(cudaFuncGetAttributes(&at, kernels[d][IP_GPU_DIVIDE]), RT_SUB_EXEC, "loading the avg division"));
  return ip_gpu_gemm_load();
}

extern "C" bt_result ip_gpu_max_blocks(int nthreads, int smem, int gemm, int *max_blocks) {
  if (gemm) return ip_gpu_gemm_max_blocks(smem, max_blocks);
  int dev, sms, per;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  /* The fewest any of the kernels allows. */
  int least = -1;
  for (int d = 0; d < IP_DTYPE_COUNT; d++)
    for (int o = 0; o < 4; o++) {
      CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernels[d][o], nthreads, smem), RT_SUB_EXEC,
                    "occupancy"));
      if (least < 0 || per < least) least = per;
    }
  *max_blocks = sms * least;
  return BT_OK;
}
