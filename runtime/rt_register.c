/* rt_register.c -- registering windows (baton_comm_register; the list and
 * its lookup in rt_regset.h): each rank's checks of its buffer, the ranks'
 * agreement and the mapping of every peer's buffer; and
 * baton_mem_alloc/free. */
#include "rt_regset.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "rt_bootstrap.h"
#include "rt_comm.h"
#include "tp_cuda.h"
#include "rt_log.h"
#include "rt_param.h"

/* Why a rank cannot register its buffer (what it publishes; 0: it can). */
enum { REG_OK, REG_NOT_DEVICE, REG_UNKNOWN, REG_PAST_END, REG_OVERLAP, REG_FULL, REG_WHY_COUNT };
static const char *const reg_why[REG_WHY_COUNT] = {
    "", "is not device memory of its GPU (host memory, another GPU's, or not allocated)",
    "lies in an allocation CUDA cannot describe", "runs past the end of its allocation",
    "overlaps a window registered already", "would pass BATON_REG_WINDOWS windows"};

/* What each rank publishes when registering: why not, and the size. */
typedef struct reg_rec {
  int32_t why, pad;
  uint64_t bytes;
} reg_rec;

static int reg_count(const baton_comm *c) {
  int n = 0;
  for (const baton_window *w = c->regs; w; w = w->next) n++;
  return n;
}

/* This rank's checks of buf: REG_OK with w->alloc filled, else why not. */
static int check_mine(const baton_comm *c, baton_window *w) {
  struct cudaPointerAttributes at;
  memset(&at, 0, sizeof at);
  if (cudaPointerGetAttributes(&at, w->base) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != c->dev) {
    cudaGetLastError();
    return REG_NOT_DEVICE;
  }
  uint64_t base = 0;
  size_t bytes = 0;
  if (!tp_cuda_alloc_of(w->base, &base, &bytes, &w->alloc)) return REG_UNKNOWN;
  uint64_t at_ = (uint64_t)(uintptr_t)w->base - base;
  if (at_ > bytes || w->bytes > bytes - at_) return REG_PAST_END;
  for (const baton_window *o = c->regs; o; o = o->next)
    if (w->base < o->base + o->bytes && o->base < w->base + w->bytes) return REG_OVERLAP;
  if (reg_count(c) >= rt_param_int(RT_PARAM_REG_WINDOWS)) return REG_FULL;
  return REG_OK;
}

/* The ranks' agreement (a process per GPU): every rank's checks and size
 * published; BT_OK when every rank can register the same bytes, else the
 * same error on every rank, logged by the rank at fault (and rank 0). */
static bt_result agree(baton_comm *c, int why, size_t bytes) {
  reg_rec *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all) return BT_ERR_NOMEM;
  all[c->rank].why = why;
  all[c->rank].bytes = bytes;
  bt_result res = rt_bootstrap_allgather(c->bs, all, sizeof *all);
  for (int r = 0; r < c->nranks && !res; r++) {
    int w = all[r].why >= 0 && all[r].why < REG_WHY_COUNT ? all[r].why : REG_UNKNOWN;
    if (w != REG_OK) {
      if (c->rank == 0 || r == c->rank)
        LOG_WARN(RT_SUB_RUNTIME, "rank %d: baton_comm_register: rank %d's buffer of %llu bytes %s: no window "
                 "registered on any rank", c->rank, r, (unsigned long long)all[r].bytes, reg_why[w]);
      res = BT_ERR_INVALID;
    } else if (all[r].bytes != all[0].bytes) {
      if (c->rank == 0 || r == c->rank)
        LOG_WARN(RT_SUB_RUNTIME, "rank %d: baton_comm_register: rank %d registers %llu bytes, rank 0 %llu: a window "
                 "has the same size on every rank; none registered", c->rank, r, (unsigned long long)all[r].bytes,
                 (unsigned long long)all[0].bytes);
      res = BT_ERR_INVALID;
    }
  }
  free(all);
  return res;
}

/* Every peer's buffer of w mapped (a process per GPU), every rank alike. */
static bt_result map_peers(baton_comm *c, baton_window *w) {
  char *in[IP_WIN_MAX_RANKS], *out[IP_WIN_MAX_RANKS];
  in[c->rank] = out[c->rank] = w->base;
  const uint64_t key = rt_hash(rt_hash(RT_HASH_START, 0x72656769737465ull), (uint64_t)w->bytes);   /* "registe(r)" */
  bt_result e = rt_direct_exchange(c, "a registered window", key, 0, in, out, (int64_t)w->bytes, (int64_t)w->bytes);
  if (e == BT_ERR_UNSUPPORTED) {
    if (c->rank == 0)
      LOG_WARN(RT_SUB_RUNTIME, "baton_comm_register: a rank's buffer cannot be mapped by its peers (not from "
               "cudaMalloc or baton_mem_alloc, another host, or BATON_PEER_MAPS reached): none registered");
    return e;
  }
  CHECK(e);
  memcpy(w->peer, in, (size_t)c->nranks * sizeof *in);
  return BT_OK;
}

baton_result baton_comm_register(baton_comm *c, void *buf, size_t bytes, baton_window **win) {
  if (!c || !buf || !bytes || !win) {
    LOG_WARN(RT_SUB_RUNTIME, "baton_comm_register: %s", !c ? "comm is NULL" : !buf ? "buffer is NULL"
                                                        : !bytes ? "size is 0" : "window pointer is NULL");
    return baton_invalid_argument;
  }
  *win = NULL;
  if (c->nranks > IP_WIN_MAX_RANKS) {
    LOG_WARN(RT_SUB_RUNTIME, "baton_comm_register: %d ranks, more than the %d a window spans", c->nranks,
             IP_WIN_MAX_RANKS);
    return baton_unsupported;
  }
  baton_window *w = calloc(1, sizeof *w);
  if (!w) return baton_out_of_memory;
  w->comm = c;
  w->base = buf;
  w->bytes = bytes;
  w->peer[c->rank] = buf;
  int dev = -1;   /* the caller's current device, given back */
  cudaGetDevice(&dev);
  cudaSetDevice(c->dev);
  int why = check_mine(c, w);
  bt_result e = BT_OK;
  if (c->bs) {
    e = agree(c, why, bytes);
    if (!e) e = map_peers(c, w);
  } else if (why != REG_OK) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: baton_comm_register: the buffer of %zu bytes %s", c->rank, bytes, reg_why[why]);
    e = BT_ERR_INVALID;
  }
  if (dev >= 0) cudaSetDevice(dev);
  if (e) {
    free(w);
    return (baton_result)e;
  }
  w->id = c->reg_next++;
  w->next = c->regs;
  c->regs = w;
  LOG_INFO(RT_SUB_RUNTIME, "rank %d: window %u registered: %zu bytes at %p", c->rank, w->id, bytes, buf);
  *win = w;
  return baton_success;
}

baton_result baton_comm_deregister(baton_comm *c, baton_window *win) {
  if (!c) return baton_invalid_argument;
  baton_window **at = &c->regs;
  while (*at && *at != win) at = &(*at)->next;
  int64_t id = *at ? (int64_t)win->id : -1;
  if (c->bs) {   /* every rank must name the same window */
    int64_t *all = calloc((size_t)c->nranks, sizeof *all);
    if (!all) return baton_out_of_memory;
    all[c->rank] = id;
    bt_result e = rt_bootstrap_allgather(c->bs, all, sizeof *all);
    for (int r = 0; r < c->nranks && !e; r++)
      if (all[r] != all[0] || all[r] < 0) {
        if (c->rank == 0 || r == c->rank)
          LOG_WARN(RT_SUB_RUNTIME, "rank %d: baton_comm_deregister: rank %d names %s, rank 0 %s%lld: every rank "
                   "deregisters the same window together; none deregistered", c->rank, r,
                   all[r] < 0 ? "no window of this communicator" : "a window", all[0] < 0 ? "none" : "window ",
                   (long long)all[0]);
        e = BT_ERR_INVALID;
      }
    free(all);
    if (e) return (baton_result)e;
  } else if (id < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: baton_comm_deregister: %p is no window of this communicator", c->rank,
             (void *)win);
    return baton_invalid_argument;
  }
  /* Calls enqueued on it keep their mappings (kept until the communicator
   * is destroyed): only later calls no longer see the window. */
  *at = win->next;
  LOG_INFO(RT_SUB_RUNTIME, "rank %d: window %u deregistered", c->rank, win->id);
  free(win);
  return baton_success;
}

baton_result baton_mem_alloc(void **ptr, size_t bytes) {
  if (!ptr || !bytes) {
    LOG_WARN(RT_SUB_RUNTIME, "baton_mem_alloc: %s", !ptr ? "ptr is NULL" : "size is 0");
    return baton_invalid_argument;
  }
  cudaError_t e = cudaMalloc(ptr, bytes);
  if (e == cudaSuccess) return baton_success;
  cudaGetLastError();
  *ptr = NULL;
  LOG_WARN(RT_SUB_RUNTIME, "baton_mem_alloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
  return e == cudaErrorMemoryAllocation ? baton_out_of_memory : baton_cuda_error;
}

baton_result baton_mem_free(void *ptr) {
  if (!ptr) return baton_success;
  cudaError_t e = cudaFree(ptr);
  if (e == cudaSuccess) return baton_success;
  cudaGetLastError();
  LOG_WARN(RT_SUB_RUNTIME, "baton_mem_free(%p): %s", ptr, cudaGetErrorString(e));
  return baton_invalid_argument;
}
