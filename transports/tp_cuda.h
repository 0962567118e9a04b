/* tp_cuda.h -- mapping a peer's device memory and finding the allocation
 * a pointer lies in (the one CUDA error conversion is rt_cudart.h's). */
#ifndef TP_CUDA_H
#define TP_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "rt_cudart.h"

/* Maps a peer's device allocation for use from device `dev`.  Made in this
 * process (same_process): its own address `base`, with peer access
 * enabled when it is on another GPU (peer_dev); else opened from its CUDA
 * IPC handle `ipc` (*opened = 1: close it with cudaIpcCloseMemHandle).
 * BT_ERR_UNSUPPORTED, not logged (the caller says what it means), when
 * `dev` cannot reach peer_dev; a CUDA failure is logged as "who: call".
 * *out is NULL unless BT_OK. */
bt_result tp_cuda_map_peer(const char *who, int dev, int same_process, int peer_dev, uint64_t base,
                           const char ipc[64], char **out, int *opened);

/* The allocation device pointer p lies in: its base, its bytes and CUDA's
 * process-wide id of it (never reused after it is freed; id may be NULL).
 * 0 when the driver cannot say (p is not device memory, or no such
 * driver call). */
int tp_cuda_alloc_of(const void *p, uint64_t *base, size_t *bytes, unsigned long long *id);

/* Whether every GPU of devs[0..n) may load from and store to device
 * pointer p of this process: memory of that GPU, cudaMalloc memory of
 * another (peer access, which communicators enable, reaches it), managed
 * memory; a stream-ordered pool's (cudaMallocAsync) or a cuMem mapping's
 * only where its owner granted that GPU access (cudaMemPoolSetAccess,
 * cuMemSetAccess), which peer access does not.  1 where the driver
 * cannot say. */
int tp_cuda_reach_all(const void *p, const int *devs, int n);

/* A cuMem allocation (cuMemCreate, mapped with cuMemMap: ncclMemAlloc's,
 * baton_mem_alloc's, PyTorch's expandable segments) shared with another
 * process of this host.  tp_cuda_vmm_export: the file descriptor of the
 * allocation mapped at `base` (the caller closes it), 1; 0 where it is not
 * such an allocation or was made without POSIX file descriptors among its
 * handle types. */
int tp_cuda_vmm_export(uint64_t base, int *fd);

/* Maps the k allocations behind fds[] (tp_cuda_vmm_export's in another
 * process, bytes[i] each; the descriptors stay open) side by side at a new
 * address of this process, in that order, read and write for GPU dev: *at
 * and handles[0..k-1], for tp_cuda_vmm_unmap.  BT_ERR_UNSUPPORTED (not
 * logged) where the driver cannot; nothing stays mapped then. */
bt_result tp_cuda_vmm_import(const int *fds, const size_t *bytes, int k, int dev, char **at,
                             unsigned long long *handles);
void tp_cuda_vmm_unmap(char *at, const size_t *bytes, int k, const unsigned long long *handles);

#endif
