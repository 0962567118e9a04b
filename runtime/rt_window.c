/* rt_window.c -- a communicator's window: allocation, layout, and the
 * mapping of every peer's window (peer access or CUDA IPC). */
#include "rt_window.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ip_direct.h"
#include "ip_fdirect.h"
#include "ip_gpu.h"
#include "tp_cuda.h"
#include "rt_log.h"

struct rt_window {
  int rank, dev;
  rt_window_layout l;
  char *base;                   /* this rank's */
  char **peer;                  /* every rank's, as this process reaches it */
  int *opened;                  /* 1: peer[r] came from cudaIpcOpenMemHandle */
  uint64_t host;
  int32_t pid;
};

/* Rounds x up to a multiple of 4 KiB (parts never share a page). */
static size_t page(size_t x) { return (x + 4095) / 4096 * 4096; }

void rt_window_plan(rt_window_layout *l, int nranks, int grid, size_t bytes) {
  memset(l, 0, sizeof *l);
  l->nranks = nranks;
  l->grid = grid;
  l->flags = 0;
  l->desc = (size_t)ip_direct_flag_words(grid, nranks) * sizeof(uint64_t);
  l->seq = page(l->desc + (size_t)IP_DIRECT_DESC_WORDS(nranks) * sizeof(uint64_t));
  l->ll = page(l->seq + (size_t)(grid + 1) * sizeof(uint64_t));   /* the counts, then the error claim word */
  l->ll_half = page(bytes / 8);
  l->simple = l->ll + 2 * l->ll_half;
  l->simple_bytes = page(bytes - bytes / 4);
  l->fseq = page(l->simple + l->simple_bytes);
  l->a2a = page(l->fseq + IP_FDIRECT_SEQ_WORDS * sizeof(uint64_t));   /* the counts, then the claim word */
  l->fused = page(l->a2a + IP_DIRECT_FLAG_WORDS((size_t)nranks) * sizeof(uint64_t));
  l->fused_half = page(bytes / 32);
  l->bytes = l->fused + 2 * IP_FDIRECT_FORMS * l->fused_half;
}

bt_result rt_window_alloc(rt_window **out, int rank, const rt_window_layout *l, uint64_t host, rt_window_handle *mine) {
  *out = NULL;
  rt_window *w = calloc(1, sizeof *w);
  if (!w) return BT_ERR_NOMEM;
  w->rank = rank;
  w->l = *l;
  w->host = host;
  w->pid = (int32_t)getpid();
  w->peer = calloc((size_t)l->nranks, sizeof *w->peer);
  w->opened = calloc((size_t)l->nranks, sizeof *w->opened);
  bt_result res = w->peer && w->opened ? BT_OK : BT_ERR_NOMEM;
  if (!res) res = rt_cuda(cudaGetDevice(&w->dev), RT_SUB_RUNTIME, "window: cudaGetDevice");
  if (!res) res = rt_cuda(cudaMalloc((void **)&w->base, l->bytes), RT_SUB_RUNTIME, "allocating the window");
  if (!res) res = rt_cuda(cudaMemset(w->base, 0, l->bytes), RT_SUB_RUNTIME, "clearing the window");
  memset(mine, 0, sizeof *mine);
  if (!res) {
    cudaIpcMemHandle_t m;
    res = rt_cuda(cudaIpcGetMemHandle(&m, w->base), RT_SUB_RUNTIME, "window: cudaIpcGetMemHandle");
    memcpy(mine->ipc, &m, sizeof m < sizeof mine->ipc ? sizeof m : sizeof mine->ipc);
  }
  if (res) {
    rt_window_free(w);
    return res;
  }
  mine->base = (uint64_t)(uintptr_t)w->base;
  mine->host = host;
  mine->pid = w->pid;
  mine->dev = w->dev;
  w->peer[rank] = w->base;
  LOG_INFO(RT_SUB_RUNTIME, "window: rank %d dev %d: %.1f MiB (landings 2 x %.1f MiB, scratch %.1f MiB, fused landings "
           "2 x %.1f MiB, %d blocks)", rank, w->dev, l->bytes / 1048576.0, l->ll_half / 1048576.0,
           l->simple_bytes / 1048576.0, l->fused_half / 1048576.0, l->grid);
  *out = w;
  return BT_OK;
}

bt_result rt_window_connect(rt_window *w, const rt_window_handle *all) {
  for (int r = 0; r < w->l.nranks; r++) {
    if (r == w->rank) continue;
    const rt_window_handle *h = &all[r];
    if (h->host != w->host) {
      LOG_WARN(RT_SUB_RUNTIME, "window: rank %d is on another host: direct programs need every rank on one", r);
      return BT_ERR_UNSUPPORTED;
    }
    bt_result e = tp_cuda_map_peer("window", w->dev, h->pid == w->pid, h->dev, h->base, h->ipc, &w->peer[r],
                                   &w->opened[r]);
    if (e == BT_ERR_UNSUPPORTED)
      LOG_WARN(RT_SUB_RUNTIME, "window: GPU %d cannot reach GPU %d (rank %d): direct programs are not used", w->dev,
               h->dev, r);
    CHECK(e);
  }
  return BT_OK;
}

char *rt_window_base(const rt_window *w, int r) { return w->peer[r]; }
const rt_window_layout *rt_window_layout_of(const rt_window *w) { return &w->l; }

void rt_window_free(rt_window *w) {
  if (!w) return;
  for (int r = 0; w->opened && r < w->l.nranks; r++)
    if (w->opened[r]) cudaIpcCloseMemHandle(w->peer[r]);
  if (w->base) cudaFree(w->base);
  free(w->peer);
  free(w->opened);
  free(w);
}
