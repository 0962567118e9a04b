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
typedef CUresult (*attrs_fn)(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p);
typedef CUresult (*pool_access_fn)(CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *where);
typedef CUresult (*vmm_access_fn)(unsigned long long *flags, const CUmemLocation *where, CUdeviceptr p);
static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;
static range_fn range;
static attr_fn attr;
static attrs_fn attrs;
static pool_access_fn pool_access;
static vmm_access_fn vmm_access;

/* The driver calls, once per process; NULL where the driver lacks them. */
static void alloc_lookup(void) {
  range = (range_fn)rt_cuda_driver_fn("cuMemGetAddressRange", 12000);
  attr = (attr_fn)rt_cuda_driver_fn("cuPointerGetAttribute", 12000);
  attrs = (attrs_fn)rt_cuda_driver_fn("cuPointerGetAttributes", 12000);
  pool_access = (pool_access_fn)rt_cuda_driver_fn("cuMemPoolGetAccess", 12000);
  vmm_access = (vmm_access_fn)rt_cuda_driver_fn("cuMemGetAccess", 12000);
}

/* Whether GPU dev may load and store p, an allocation of another GPU
 * that is neither cudaMalloc's nor managed: granted by its pool or its
 * cuMem mapping. */
static int granted(const void *p, CUmemoryPool pool, int dev) {
  CUmemLocation at = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  if (pool) {
    CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return pool_access && pool_access(&f, pool, &at) == CUDA_SUCCESS && f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  unsigned long long f = 0;
  return vmm_access && vmm_access(&f, &at, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
         f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

int tp_cuda_reach_all(const void *p, const int *devs, int n) {
  pthread_once(&alloc_once, alloc_lookup);
  if (!p || !attrs) return 1;
  unsigned type = 0, managed = 0, legacy = 0;
  int ord = -1;
  CUmemoryPool pool = NULL;
  CUpointer_attribute what[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  void *data[] = {&type, &managed, &ord, &legacy, &pool};
  if (attrs(5, what, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
    return 1;   /* not the driver's to say: the call's own checks decide */
  if (type != CU_MEMORYTYPE_DEVICE || managed || legacy) return 1;
  for (int i = 0; i < n; i++)
    if (devs[i] != ord && !granted(p, pool, devs[i])) return 0;
  return 1;
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

typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *h, void *addr);
typedef CUresult (*export_fn)(void *shareable, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                              unsigned long long flags);
typedef CUresult (*import_fn)(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType type);
typedef CUresult (*reserve_fn)(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags);
typedef CUresult (*map_fn)(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                           unsigned long long flags);
typedef CUresult (*access_fn)(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count);
typedef CUresult (*range_op_fn)(CUdeviceptr p, size_t size);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle h);
static pthread_once_t vmm_once = PTHREAD_ONCE_INIT;
static struct {
  retain_fn retain;
  export_fn export_;
  import_fn import_;
  reserve_fn reserve;
  map_fn map;
  access_fn access;
  range_op_fn unmap, addr_free;
  release_fn release;
} vmm;

static void vmm_lookup(void) {
  vmm.retain = (retain_fn)rt_cuda_driver_fn("cuMemRetainAllocationHandle", 11000);
  vmm.export_ = (export_fn)rt_cuda_driver_fn("cuMemExportToShareableHandle", 10020);
  vmm.import_ = (import_fn)rt_cuda_driver_fn("cuMemImportFromShareableHandle", 10020);
  vmm.reserve = (reserve_fn)rt_cuda_driver_fn("cuMemAddressReserve", 10020);
  vmm.map = (map_fn)rt_cuda_driver_fn("cuMemMap", 10020);
  vmm.access = (access_fn)rt_cuda_driver_fn("cuMemSetAccess", 10020);
  vmm.unmap = (range_op_fn)rt_cuda_driver_fn("cuMemUnmap", 10020);
  vmm.addr_free = (range_op_fn)rt_cuda_driver_fn("cuMemAddressFree", 10020);
  vmm.release = (release_fn)rt_cuda_driver_fn("cuMemRelease", 10020);
}

static int vmm_ready(void) {
  pthread_once(&vmm_once, vmm_lookup);
  return vmm.retain && vmm.export_ && vmm.import_ && vmm.reserve && vmm.map && vmm.access && vmm.unmap &&
         vmm.addr_free && vmm.release;
}

int tp_cuda_vmm_export(uint64_t base, int *fd) {
  *fd = -1;
  CUmemGenericAllocationHandle h;
  if (!vmm_ready() || vmm.retain(&h, (void *)(uintptr_t)base) != CUDA_SUCCESS) return 0;
  int f = -1;
  CUresult r = vmm.export_(&f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  vmm.release(h);   /* the retain's reference; the allocation stays mapped */
  if (r != CUDA_SUCCESS || f < 0) return 0;
  *fd = f;
  return 1;
}

/* Undoes the first `mapped` maps and `imported` imports of an import of
 * k pieces at p (reserved: `total` bytes there; 0: none). */
static void vmm_undo(CUdeviceptr p, size_t total, const size_t *bytes, int mapped, int imported,
                     const unsigned long long *handles) {
  size_t off = 0;
  for (int i = 0; i < mapped; i++) vmm.unmap(p + off, bytes[i]), off += bytes[i];
  if (total) vmm.addr_free(p, total);
  for (int i = 0; i < imported; i++) vmm.release((CUmemGenericAllocationHandle)handles[i]);
}

bt_result tp_cuda_vmm_import(const int *fds, const size_t *bytes, int k, int dev, char **at,
                             unsigned long long *handles) {
  *at = NULL;
  size_t total = 0;
  for (int i = 0; i < k; i++) {
    if (bytes[i] == 0 || total + bytes[i] < total) return BT_ERR_UNSUPPORTED;
    total += bytes[i];
  }
  if (!vmm_ready() || k < 1) return BT_ERR_UNSUPPORTED;
  int imported = 0, mapped = 0;
  for (; imported < k; imported++) {
    CUmemGenericAllocationHandle h;
    if (vmm.import_(&h, (void *)(uintptr_t)fds[imported], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS)
      break;
    handles[imported] = (unsigned long long)h;
  }
  CUdeviceptr p = 0;
  if (imported < k || vmm.reserve(&p, total, 0, 0, 0) != CUDA_SUCCESS) {
    vmm_undo(0, 0, bytes, 0, imported, handles);
    return BT_ERR_UNSUPPORTED;
  }
  size_t off = 0;
  for (; mapped < k; off += bytes[mapped], mapped++)
    if (vmm.map(p + off, bytes[mapped], 0, (CUmemGenericAllocationHandle)handles[mapped], 0) != CUDA_SUCCESS) break;
  CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (mapped < k || vmm.access(p, total, &d, 1) != CUDA_SUCCESS) {
    vmm_undo(p, total, bytes, mapped, k, handles);
    return BT_ERR_UNSUPPORTED;
  }
  *at = (char *)(uintptr_t)p;
  return BT_OK;
}

void tp_cuda_vmm_unmap(char *at, const size_t *bytes, int k, const unsigned long long *handles) {
  if (!at || !vmm_ready()) return;
  size_t total = 0;
  for (int i = 0; i < k; i++) total += bytes[i];
  vmm_undo((CUdeviceptr)(uintptr_t)at, total, bytes, k, k, handles);
}
