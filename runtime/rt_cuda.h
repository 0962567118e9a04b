/* rt_cuda.h -- the one conversion of a CUDA runtime error into a bt_result,
 * for every file of the GPU runtime (and the interpreter's launcher). */
#ifndef RT_CUDA_H
#define RT_CUDA_H

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

#endif
