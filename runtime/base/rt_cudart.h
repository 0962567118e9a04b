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
