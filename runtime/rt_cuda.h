/* rt_cuda.h -- the one conversion of a CUDA runtime error into a bt_result,
 * for every file of the GPU runtime (and the interpreter's launcher). */
#ifndef RT_CUDA_H
#define RT_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

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

/* Maps a peer's device allocation for use from device `dev`.  Made in this
 * process (same_process): its own address `base`, with peer access
 * enabled when it is on another GPU (peer_dev); else opened from its CUDA
 * IPC handle `ipc` (*opened = 1: close it with cudaIpcCloseMemHandle).
 * BT_ERR_UNSUPPORTED, not logged (the caller says what it means), when
 * `dev` cannot reach peer_dev; a CUDA failure is logged as "who: call".
 * *out is NULL unless BT_OK. */
bt_result rt_cuda_map_peer(const char *who, int dev, int same_process, int peer_dev, uint64_t base,
                           const char ipc[64], char **out, int *opened);

/* The allocation device pointer p lies in: its base, its bytes and CUDA's
 * process-wide id of it (never reused after it is freed; id may be NULL).
 * 0 when the driver cannot say (p is not device memory, or no such
 * driver call). */
int rt_cuda_alloc_of(const void *p, uint64_t *base, size_t *bytes, unsigned long long *id);

#endif
