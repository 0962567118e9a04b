/* rt_cudart.h -- the one conversion of a CUDA runtime error into a
 * bt_result, and driver entry points without -lcuda: for every file built
 * with the CUDA runtime (the interpreter's launchers and the GPU runtime). */
#ifndef RT_CUDART_H
#define RT_CUDART_H

#include <cuda_runtime_api.h>

#include "rt_log.h"
#include "rt_result.h"

/* BT_OK for cudaSuccess; otherwise logs "what: CUDA's message" at WARN
 * under subsystem `sub` and returns BT_ERR_CUDA. */
static inline bt_result rt_cuda(cudaError_t e, unsigned sub, const char *what) {
  if (e == cudaSuccess) return BT_OK;
  LOG_WARN(sub, "%s: %s", what, cudaGetErrorString(e));
  return BT_ERR_CUDA;
}

/* Launches `kernel` with `params` on `stream` (a cudaStream_t): `grid`
 * blocks of `block` threads, `smem` bytes of dynamic shared memory, and
 * with `pdl` set as a programmatic dependent of the kernel before it on
 * the stream (its blocks may start as that kernel's leave the SMs; the
 * kernel itself waits for it before reading what it wrote).  As rt_cuda:
 * logs `what` and returns BT_ERR_CUDA when the launch fails. */
static inline bt_result rt_cuda_launch(const void *kernel, unsigned grid, unsigned block, size_t smem, void *stream,
                                       int pdl, void **params, unsigned sub, const char *what) {
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {0};
  cfg.gridDim.x = grid;
  cfg.gridDim.y = cfg.gridDim.z = 1;
  cfg.blockDim.x = block;
  cfg.blockDim.y = cfg.blockDim.z = 1;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  return rt_cuda(cudaLaunchKernelExC(&cfg, kernel, params), sub, what);
}

/* Driver API function `name`, with the signature of driver API `version`
 * (12000: CUDA 12.0), found through the runtime's driver entry points (no
 * -lcuda link); NULL when the driver lacks it. */
static inline void *rt_cuda_driver_fn(const char *name, int version) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  if (cudaGetDriverEntryPointByVersion(name, &fn, (unsigned)version, cudaEnableDefault, &q) != cudaSuccess) fn = NULL;
#else
  (void)version;
  if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess) fn = NULL;
#endif
  return q == cudaDriverEntryPointSuccess ? fn : NULL;
}

#endif
