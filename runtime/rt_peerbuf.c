/* rt_peerbuf.c -- every rank's buffers of one call across processes:
 * exported by CUDA IPC or, for cuMem allocations, as file descriptors
 * passed over a Unix socket; exchanged over the bootstrap, mapped once
 * per peer allocation. */
#include "rt_peerbuf.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_bootstrap.h"
#include "rt_fdpass.h"
#include "rt_socket.h"
#include "tp_cuda.h"
#include "rt_log.h"

enum { PB_IN, PB_OUT, PB_BUFS };
enum { PB_IPC, PB_VMM };      /* how a buffer's allocation is shared */
#define PB_FD_TIMEOUT_MS 10000 /* the descriptors' passing, right after an allgather every rank took part in */

/* What a rank publishes of one call: per buffer, how its allocation is
 * shared (its IPC handle; for a cuMem one its identity, the descriptor
 * going over the Unix socket), its base (in its own process), its bytes
 * (cuMem) and the buffer's offset there; where its descriptors' listener
 * is (fdkey). */
typedef struct pb_rec {
  char ipc[PB_BUFS][64];
  uint64_t base[PB_BUFS], off[PB_BUFS], size[PB_BUFS];
  int32_t kind[PB_BUFS];
  uint64_t host, fdkey;
  int32_t pid, dev, ok, pad;
} pb_rec;

/* A peer's allocation mapped into this process. */
typedef struct pb_map {
  int peer, opened, vmm;
  char ipc[64];
  char *at;                   /* its base as this process reaches it */
  size_t bytes;               /* vmm: what is mapped, and its handle */
  unsigned long long handle;
} pb_map;

struct rt_peerbufs {
  int n, cap;
  pb_map *maps;
  pb_rec *recs;               /* nranks: the exchange's buffer */
  int warned_full;
  rt_fdpass *fp;              /* this process's listener for cuMem descriptors, and its key */
  uint64_t fdkey, tag;        /* tag: exchanges that passed descriptors (the same count on every rank) */
  int myfd[PB_BUFS];          /* this call's exported descriptors (-1: none) */
  int *fds;                   /* nranks * RT_FDPASS_MAX: the peers' received ones */
};

/* Fills buffer b of rec for device pointer p of device dev, of which the
 * call reaches `len` bytes: 1; 0 when p is not device memory of dev in an
 * allocation CUDA IPC can export, or in one cuMem allocation whose file
 * descriptor can be (then in pb->myfd[b], for pass_fds), which why says. */
static int export_buf(rt_peerbufs *pb, pb_rec *rec, int b, const char *p, int64_t len, int dev,
                      const char **why) {
  struct cudaPointerAttributes at;
  memset(&at, 0, sizeof at);
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != dev) {
    cudaGetLastError();
    *why = "not device memory of this rank's GPU";
    return 0;
  }
  uint64_t base = 0;
  size_t size = 0;
  unsigned long long id = 0;   /* never reused: a cuMem allocation freed and made again is a new one */
  if (!tp_cuda_alloc_of(p, &base, &size, &id)) {
    *why = "its allocation's range is unknown";
    return 0;
  }
  rec->base[b] = base;
  rec->off[b] = (uint64_t)((uintptr_t)p - (uintptr_t)base);
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base) == cudaSuccess) {
    memcpy(rec->ipc[b], &h, sizeof h < sizeof rec->ipc[b] ? sizeof h : sizeof rec->ipc[b]);
    rec->kind[b] = PB_IPC;
    return 1;
  }
  cudaGetLastError();
  /* A cuMem allocation: its descriptor, the buffer inside it. */
  if (!pb->fp || !tp_cuda_vmm_export(base, &pb->myfd[b])) {
    *why = "its allocation can be exported neither by CUDA IPC (not from cudaMalloc) nor as a cuMem file "
           "descriptor";
    return 0;
  }
  if (rec->off[b] + (uint64_t)(len > 0 ? len : 0) > (uint64_t)size) {
    *why = "it runs past its cuMem allocation (several allocations mapped side by side, as PyTorch's expandable "
           "segments map them)";
    return 0;   /* the descriptor goes with the exchange's other ones */
  }
  rec->kind[b] = PB_VMM;
  rec->size[b] = (uint64_t)size;
  const uint64_t who[4] = {(uint64_t)getpid(), base, (uint64_t)size, id};
  memcpy(rec->ipc[b], who, sizeof who);
  return 1;
}

/* Rank r's allocation of buffer b as this process reaches it: a mapping
 * kept from an earlier call, else a new one (a cuMem one from fd, the
 * descriptor r passed for it).  0 when it cannot be. */
static int map_buf(rt_peerbufs *pb, const rt_peerbuf_self *me, int r, int b, int fd, char **at) {
  const pb_rec *x = &pb->recs[r];
  int same_process = x->host == me->host && x->pid == (int32_t)getpid();
  for (int i = 0; i < pb->n; i++)
    if (pb->maps[i].peer == r && !memcmp(pb->maps[i].ipc, x->ipc[b], 64) &&
        (pb->maps[i].opened || pb->maps[i].vmm || (uint64_t)(uintptr_t)pb->maps[i].at == x->base[b])) {
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
  if (x->kind[b] == PB_VMM) {
    if (same_process || fd < 0 || tp_cuda_vmm_import(fd, (size_t)x->size[b], me->dev, &m->at, &m->handle)) return 0;
    m->vmm = 1;
    m->bytes = (size_t)x->size[b];
  } else if (tp_cuda_map_peer("peer buffer", me->dev, same_process, x->dev, x->base[b], x->ipc[b], &m->at,
                              &m->opened)) {
    return 0;
  }
  m->peer = r;
  memcpy(m->ipc, x->ipc[b], 64);
  pb->n++;
  *at = m->at;
  return 1;
}

/* The cuMem descriptors of this call (pb->myfd; rt_peerbuf_exchange closes
 * them) to every peer, and every peer's into pb->fds, where any rank
 * shares a buffer so (every rank sees the same records, so all take part
 * or none).  A failure leaves nothing received open; the caller's
 * agreement on what was mapped makes every rank give up alike. */
static bt_result pass_fds(rt_peerbufs *pb, const rt_peerbuf_self *me) {
  int any = 0, n = 0, mine[PB_BUFS];
  int *want = calloc((size_t)me->nranks, sizeof *want);
  pid_t *pids = calloc((size_t)me->nranks, sizeof *pids);
  bt_result res = want && pids ? BT_OK : BT_ERR_NOMEM;
  for (int r = 0; r < me->nranks && !res; r++) {
    pids[r] = pb->recs[r].pid;
    for (int b = 0; b < PB_BUFS; b++) want[r] += pb->recs[r].kind[b] == PB_VMM;
    any |= want[r] > 0;
  }
  for (int b = 0; b < PB_BUFS; b++)
    if (pb->myfd[b] >= 0) mine[n++] = pb->myfd[b];
  if (!res && any) {
    const uint64_t tag = ++pb->tag;
    for (int r = 0; r < me->nranks && !res && n; r++)
      if (r != me->rank) res = rt_fdpass_send(pb->fp, pb->recs[r].fdkey, r, tag, mine, n, PB_FD_TIMEOUT_MS);
    want[me->rank] = 0;
    if (!res) res = rt_fdpass_recv(pb->fp, me->nranks, want, pids, tag, pb->fds, PB_FD_TIMEOUT_MS);
  }
  free(want);
  free(pids);
  return res;
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
  mine->fdkey = pb->fdkey;
  mine->ok = export_buf(pb, mine, PB_IN, in[me->rank], me->in_bytes, me->dev, &why) &&
             export_buf(pb, mine, PB_OUT, out[me->rank], me->out_bytes, me->dev, &why);
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
  int here = pass_fds(pb, me) == BT_OK;
  for (int r = 0; r < me->nranks && here; r++) {
    if (r == me->rank) continue;
    char *a = NULL, *b = NULL;
    const int *fd = &pb->fds[r * RT_FDPASS_MAX];
    const int fin = pb->recs[r].kind[PB_IN] == PB_VMM ? fd[0] : -1;
    const int fout = pb->recs[r].kind[PB_OUT] == PB_VMM ? fd[pb->recs[r].kind[PB_IN] == PB_VMM] : -1;
    here = map_buf(pb, me, r, PB_IN, fin, &a) && map_buf(pb, me, r, PB_OUT, fout, &b);
    if (here) {
      in[r] = a + pb->recs[r].off[PB_IN];
      out[r] = b + pb->recs[r].off[PB_OUT];
    }
  }
  for (int i = 0; i < me->nranks * RT_FDPASS_MAX; i++)   /* a mapping holds its own reference */
    if (pb->fds[i] >= 0) close(pb->fds[i]), pb->fds[i] = -1;
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
    if (p) p->fds = malloc((me->nranks > 0 ? (size_t)me->nranks : 1) * RT_FDPASS_MAX * sizeof *p->fds);
    if (!p || !p->recs || !p->fds) {
      if (p) free(p->recs);
      free(p);
      return BT_ERR_NOMEM;
    }
    for (int i = 0; i < me->nranks * RT_FDPASS_MAX; i++) p->fds[i] = -1;
    p->myfd[PB_IN] = p->myfd[PB_OUT] = -1;
    /* The listener for cuMem descriptors, under a key of this process's
     * own (its random number, apart for each communicator of it; its peers
     * learn the key from the records); without one, cuMem buffers are not
     * shared (every rank then gives up alike). */
    p->fdkey = rt_process_number() ^ (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    if (rt_fdpass_open(&p->fp, p->fdkey, me->rank)) p->fp = NULL;
    *pb = p;
  }
  /* Mapping is not a stream operation; a capture in the global mode
   * would refuse it, so this thread relaxes its mode meanwhile. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  bt_result res = exchange(*pb, bs, me, in, out);
  cudaThreadExchangeStreamCaptureMode(&mode);
  for (int b = 0; b < PB_BUFS; b++)   /* this call's exported descriptors: passed on, or not needed */
    if ((*pb)->myfd[b] >= 0) close((*pb)->myfd[b]), (*pb)->myfd[b] = -1;
  if (!res)
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: the peers' buffers of %s exchanged (%d allocations mapped)", me->rank,
              me->what, (*pb)->n);
  return res;
}

int rt_peerbuf_count(const rt_peerbufs *pb) { return pb ? pb->n : 0; }

void rt_peerbufs_free(rt_peerbufs *pb) {
  if (!pb) return;
  for (int i = 0; i < pb->n; i++)
    if (pb->maps[i].vmm) tp_cuda_vmm_unmap(pb->maps[i].at, pb->maps[i].bytes, pb->maps[i].handle);
    else if (pb->maps[i].opened) cudaIpcCloseMemHandle(pb->maps[i].at);
  rt_fdpass_close(pb->fp);
  free(pb->maps);
  free(pb->recs);
  free(pb->fds);
  free(pb);
}
