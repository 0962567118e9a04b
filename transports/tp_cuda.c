/* tp_cuda.c -- mapping another rank's device memory into this process:
 * the one way the P2P transport's pools and the direct programs' windows
 * reach their peers; and what allocation a pointer lies in. */
#include "tp_cuda.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

bt_result tp_cuda_map_peer(const char *who, int dev, int same_process, int peer_dev, uint64_t base,
                           const char ipc[64], char **out, int *opened) {
  char what[96];
  *out = NULL;
  *opened = 0;
  if (same_process) {
    if (peer_dev != dev) {
      int can = 0;
      snprintf(what, sizeof what, "%s: cudaDeviceCanAccessPeer", who);
      CHECK(rt_cuda(cudaDeviceCanAccessPeer(&can, dev, peer_dev), RT_SUB_RUNTIME, what));
      if (!can) return BT_ERR_UNSUPPORTED;
      cudaError_t e = cudaDeviceEnablePeerAccess(peer_dev, 0);
      snprintf(what, sizeof what, "%s: cudaDeviceEnablePeerAccess", who);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else CHECK(rt_cuda(e, RT_SUB_RUNTIME, what));
    }
    *out = (char *)(uintptr_t)base;
    return BT_OK;
  }
  cudaIpcMemHandle_t m;
  memcpy(&m, ipc, sizeof m);
  void *p = NULL;
  snprintf(what, sizeof what, "%s: cudaIpcOpenMemHandle", who);
  CHECK(rt_cuda(cudaIpcOpenMemHandle(&p, m, cudaIpcMemLazyEnablePeerAccess), RT_SUB_RUNTIME, what));
  *out = p;
  *opened = 1;
  return BT_OK;
}

typedef CUresult (*range_fn)(CUdeviceptr *base, size_t *bytes, CUdeviceptr p);
typedef CUresult (*attr_fn)(void *data, CUpointer_attribute attr, CUdeviceptr p);
static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;
static range_fn range;
static attr_fn attr;

/* The driver calls, once per process; NULL where the driver lacks them. */
static void alloc_lookup(void) {
  range = (range_fn)rt_cuda_driver_fn("cuMemGetAddressRange", 12000);
  attr = (attr_fn)rt_cuda_driver_fn("cuPointerGetAttribute", 12000);
}

int tp_cuda_alloc_of(const void *p, uint64_t *base, size_t *bytes, unsigned long long *id) {
  pthread_once(&alloc_once, alloc_lookup);
  CUdeviceptr b = 0;
  size_t n = 0;
  if (!range || range(&b, &n, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS) return 0;
  if (id && (!attr || attr(id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)) return 0;
  *base = (uint64_t)b;
  *bytes = n;
  return 1;
}
