/* rt_cuda.c -- mapping another rank's device memory into this process:
 * the one way the P2P transport's pools and the direct programs' windows
 * reach their peers. */
#include "rt_cuda.h"

#include <stdio.h>
#include <string.h>

bt_result rt_cuda_map_peer(const char *who, int dev, int same_process, int peer_dev, uint64_t base,
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
