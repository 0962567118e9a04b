/* rt_peerbuf.c -- every rank's buffers of one call across processes:
 * exported by CUDA IPC, exchanged over the bootstrap, mapped once per
 * peer allocation. */
#include "rt_peerbuf.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_bootstrap.h"
#include "tp_cuda.h"
#include "rt_log.h"

enum { PB_IN, PB_OUT, PB_BUFS };

/* What a rank publishes of one call: per buffer, its allocation's IPC
 * handle, base (in its own process) and the buffer's offset there. */
typedef struct pb_rec {
  char ipc[PB_BUFS][64];
  uint64_t base[PB_BUFS], off[PB_BUFS];
  uint64_t host;
  int32_t pid, dev, ok, pad;
} pb_rec;

/* A peer's allocation mapped into this process. */
typedef struct pb_map {
  int peer, opened;
  char ipc[64];
  char *at;                   /* its base as this process reaches it */
} pb_map;

struct rt_peerbufs {
  int n, cap;
  pb_map *maps;
  pb_rec *recs;               /* nranks: the exchange's buffer */
  int warned_full;
};

/* Fills buffer b of rec for device pointer p of device dev: 0 when p is
 * not device memory of dev in an allocation CUDA IPC can export (why
 * says). */
static int export_buf(pb_rec *rec, int b, const char *p, int dev, const char **why) {
  struct cudaPointerAttributes at;
  memset(&at, 0, sizeof at);
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != dev) {
    cudaGetLastError();
    *why = "not device memory of this rank's GPU";
    return 0;
  }
  uint64_t base = 0;
  size_t bytes = 0;
  if (!tp_cuda_alloc_of(p, &base, &bytes, NULL)) {
    *why = "its allocation's range is unknown";
    return 0;
  }
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base) != cudaSuccess) {
    cudaGetLastError();
    *why = "its allocation cannot be exported by CUDA IPC (not from cudaMalloc)";
    return 0;
  }
  memcpy(rec->ipc[b], &h, sizeof h < sizeof rec->ipc[b] ? sizeof h : sizeof rec->ipc[b]);
  rec->base[b] = base;
  rec->off[b] = (uint64_t)((uintptr_t)p - (uintptr_t)base);
  return 1;
}

/* Rank r's allocation of buffer b as this process reaches it: a mapping
 * kept from an earlier call, else a new one.  0 when it cannot be. */
static int map_buf(rt_peerbufs *pb, const rt_peerbuf_self *me, int r, int b, char **at) {
  const pb_rec *x = &pb->recs[r];
  int same_process = x->host == me->host && x->pid == (int32_t)getpid();
  for (int i = 0; i < pb->n; i++)
    if (pb->maps[i].peer == r && !memcmp(pb->maps[i].ipc, x->ipc[b], 64) &&
        (pb->maps[i].opened || (uint64_t)(uintptr_t)pb->maps[i].at == x->base[b])) {
      *at = pb->maps[i].at;
      return 1;
    }
  if (pb->n >= me->max_maps) {
    if (!pb->warned_full++)
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: %d peers' allocations are mapped already (BATON_PEER_MAPS): calls on new "
               "ones copy through the window", me->rank, pb->n);
    return 0;
  }
  if (pb->n == pb->cap) {
    int cap = pb->cap ? 2 * pb->cap : 16;
    pb_map *m = realloc(pb->maps, (size_t)cap * sizeof *m);
    if (!m) return 0;
    pb->maps = m;
    pb->cap = cap;
  }
  pb_map *m = &pb->maps[pb->n];
  memset(m, 0, sizeof *m);
  if (tp_cuda_map_peer("peer buffer", me->dev, same_process, x->dev, x->base[b], x->ipc[b], &m->at, &m->opened))
    return 0;
  m->peer = r;
  memcpy(m->ipc, x->ipc[b], 64);
  pb->n++;
  *at = m->at;
  return 1;
}

/* The exchange proper (rt_peerbuf_exchange, under relaxed capture). */
static bt_result exchange(rt_peerbufs *pb, struct rt_bootstrap *bs, const rt_peerbuf_self *me, char **in,
                          char **out) {
  pb_rec *mine = &pb->recs[me->rank];
  memset(mine, 0, sizeof *mine);
  const char *why = NULL;
  mine->host = me->host;
  mine->pid = (int32_t)getpid();
  mine->dev = me->dev;
  mine->ok = export_buf(mine, PB_IN, in[me->rank], me->dev, &why) &&
             export_buf(mine, PB_OUT, out[me->rank], me->dev, &why);
  CHECK(rt_bootstrap_allgather(bs, pb->recs, sizeof *pb->recs));
  int ok = 1, bad = -1;
  for (int r = 0; r < me->nranks && ok; r++)
    if (!pb->recs[r].ok || pb->recs[r].host != me->host) ok = 0, bad = r;
  if (!ok) {   /* every rank sees the same records: all give up alike */
    if (me->rank == 0 || bad == me->rank)
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: rank %d's buffers of %s %s", me->rank, bad, me->what,
               bad == me->rank && why ? why : "cannot be mapped here");
    return BT_ERR_UNSUPPORTED;
  }
  int32_t *mapped = calloc(me->nranks > 0 ? (size_t)me->nranks : 1, sizeof *mapped);
  if (!mapped) return BT_ERR_NOMEM;
  int here = 1;
  for (int r = 0; r < me->nranks && here; r++) {
    if (r == me->rank) continue;
    char *a = NULL, *b = NULL;
    here = map_buf(pb, me, r, PB_IN, &a) && map_buf(pb, me, r, PB_OUT, &b);
    if (here) {
      in[r] = a + pb->recs[r].off[PB_IN];
      out[r] = b + pb->recs[r].off[PB_OUT];
    }
  }
  mapped[me->rank] = here;   /* a mapping can fail on one rank only: agree */
  bt_result res = rt_bootstrap_allgather(bs, mapped, sizeof *mapped);
  for (int r = 0; r < me->nranks && !res; r++)
    if (!mapped[r]) {
      if (me->rank == 0 || r == me->rank)
        LOG_INFO(RT_SUB_RUNTIME, "rank %d: rank %d could not map its peers' buffers of %s", me->rank, r,
                 me->what);
      res = BT_ERR_UNSUPPORTED;
    }
  free(mapped);
  return res;
}

bt_result rt_peerbuf_exchange(rt_peerbufs **pb, struct rt_bootstrap *bs, const rt_peerbuf_self *me, char **in,
                              char **out) {
  if (!*pb) {
    rt_peerbufs *p = calloc(1, sizeof *p);
    if (p) p->recs = calloc(me->nranks > 0 ? (size_t)me->nranks : 1, sizeof *p->recs);
    if (!p || !p->recs) {
      free(p);
      return BT_ERR_NOMEM;
    }
    *pb = p;
  }
  /* Mapping is not a stream operation; a capture in the global mode
   * would refuse it, so this thread relaxes its mode meanwhile. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  bt_result res = exchange(*pb, bs, me, in, out);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (!res)
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: the peers' buffers of %s exchanged (%d allocations mapped)", me->rank,
              me->what, (*pb)->n);
  return res;
}

int rt_peerbuf_count(const rt_peerbufs *pb) { return pb ? pb->n : 0; }

void rt_peerbufs_free(rt_peerbufs *pb) {
  if (!pb) return;
  for (int i = 0; i < pb->n; i++)
    if (pb->maps[i].opened) cudaIpcCloseMemHandle(pb->maps[i].at);
  free(pb->maps);
  free(pb->recs);
  free(pb);
}
