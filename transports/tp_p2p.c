/* tp_p2p.c -- pools of FIFOs in GPU memory, reached by peer access or CUDA IPC. */
#include "tp_p2p.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_cuda.h"
#include "rt_log.h"

/* Words (head, tail, counts) sit 128 bytes apart so that a remote writer
 * and a local poller never share a cache line with another connection. */
#define WORD 128

struct tp_p2p {
  int rank, nranks, dev;
  tp_key *keys;
  int nkeys;
  int64_t fifo_bytes;
  char *pool;            /* this rank's pool */
  char **peer;           /* every rank's pool base as this process sees it */
  int *opened;           /* 1: peer[r] came from cudaIpcOpenMemHandle */
};

static int key_cmp(const void *a, const void *b) {
  const tp_key *x = a, *y = b;
  if (x->src != y->src) return x->src < y->src ? -1 : 1;
  if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
  if (x->chan != y->chan) return x->chan < y->chan ? -1 : 1;
  if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
  return x->proto < y->proto ? -1 : x->proto > y->proto;
}

int tp_keys_normalize(tp_key *keys, int n) {
  if (n == 0) return 0;
  qsort(keys, n, sizeof *keys, key_cmp);
  int m = 1;
  for (int i = 1; i < n; i++)
    if (key_cmp(&keys[i], &keys[m - 1])) keys[m++] = keys[i];
  return m;
}

/* Layout of rank r's pool: FIFOs of the connections r receives on (in key
 * order), then per received connection a head and a count word, then per
 * sent connection a tail and a count word. */
typedef struct where { int64_t fifo, head, rcount, tail, scount; } where;

static int64_t nrecv_of(const tp_p2p *t, int r) {
  int64_t n = 0;
  for (int i = 0; i < t->nkeys; i++) n += t->keys[i].dst == r;
  return n;
}
static int64_t nsend_of(const tp_p2p *t, int r) {
  int64_t n = 0;
  for (int i = 0; i < t->nkeys; i++) n += t->keys[i].src == r;
  return n;
}
static int64_t pool_bytes(const tp_p2p *t, int r) {
  return nrecv_of(t, r) * (t->fifo_bytes + 2 * WORD) + nsend_of(t, r) * 2 * WORD;
}

/* Offsets of key k's parts: receive side in k.dst's pool, send side in
 * k.src's pool. */
static where locate(const tp_p2p *t, const tp_key *k) {
  where w;
  int64_t ri = 0, si = 0;
  for (int i = 0; i < t->nkeys; i++) {
    const tp_key *x = &t->keys[i];
    if (key_cmp(x, k) >= 0) break;
    ri += x->dst == k->dst;
    si += x->src == k->src;
  }
  int64_t nr = nrecv_of(t, k->dst);
  w.fifo = ri * t->fifo_bytes;
  w.head = nr * t->fifo_bytes + ri * 2 * WORD;
  w.rcount = w.head + WORD;
  int64_t sbase = nrecv_of(t, k->src) * (t->fifo_bytes + 2 * WORD);
  w.tail = sbase + si * 2 * WORD;
  w.scount = w.tail + WORD;
  return w;
}

bt_result tp_p2p_create(tp_p2p **out, int rank, int nranks, const tp_key *keys, int nkeys, int64_t fifo_bytes) {
  *out = NULL;
  tp_p2p *t = calloc(1, sizeof *t);
  if (!t) return BT_ERR_NOMEM;
  t->rank = rank;
  t->nranks = nranks;
  t->fifo_bytes = (fifo_bytes + WORD - 1) / WORD * WORD;
  t->keys = malloc((nkeys + 1) * sizeof *keys);
  t->peer = calloc(nranks, sizeof *t->peer);
  t->opened = calloc(nranks, sizeof *t->opened);
  bt_result res = BT_ERR_NOMEM;
  if (!t->keys || !t->peer || !t->opened) goto fail;
  memcpy(t->keys, keys, nkeys * sizeof *keys);
  t->nkeys = nkeys;
  CHECK_GOTO(rt_cuda(cudaGetDevice(&t->dev), RT_SUB_RUNTIME, "p2p: cudaGetDevice"), res, fail);
  int64_t bytes = pool_bytes(t, rank);
  if (bytes == 0) bytes = WORD;
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&t->pool, bytes),
                     RT_SUB_RUNTIME, "p2p: allocating the connection pool"), res, fail);
  CHECK_GOTO(rt_cuda(cudaMemset(t->pool, 0, bytes), RT_SUB_RUNTIME, "p2p: clearing the connection pool"), res, fail);
  t->peer[rank] = t->pool;
  LOG_INFO(RT_SUB_RUNTIME, "p2p: rank %d dev %d: %lld connections, pool %.1f MiB", rank, t->dev,
           (long long)(nrecv_of(t, rank) + nsend_of(t, rank)), bytes / 1048576.0);
  *out = t;
  return BT_OK;
fail:
  tp_p2p_free(t);
  return res;
}

static uint64_t host_hash(void) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;
  for (char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

bt_result tp_p2p_export(tp_p2p *t, int ipc, tp_handle *h) {
  memset(h, 0, sizeof *h);
  h->base = (uint64_t)(uintptr_t)t->pool;
  h->dev = t->dev;
  h->pid = (int32_t)getpid();
  h->host = host_hash();
  if (ipc) {
    cudaIpcMemHandle_t m;
    CHECK(rt_cuda(cudaIpcGetMemHandle(&m, t->pool), RT_SUB_RUNTIME, "p2p: cudaIpcGetMemHandle"));
    memcpy(h->ipc, &m, sizeof m < sizeof h->ipc ? sizeof m : sizeof h->ipc);
  }
  return BT_OK;
}

/* True when rank r exchanges messages with this rank. */
static int linked(const tp_p2p *t, int r) {
  for (int i = 0; i < t->nkeys; i++)
    if ((t->keys[i].src == t->rank && t->keys[i].dst == r) || (t->keys[i].dst == t->rank && t->keys[i].src == r))
      return 1;
  return 0;
}

bt_result tp_p2p_connect(tp_p2p *t, const tp_handle *all) {
  int me = (int)getpid();
  uint64_t host = host_hash();
  for (int r = 0; r < t->nranks; r++) {
    if (r == t->rank || !linked(t, r)) continue;
    if (all[r].host != host) {
      LOG_WARN(RT_SUB_RUNTIME, "p2p: rank %d is on another host; only one node is supported by the P2P transport", r);
      return BT_ERR_UNSUPPORTED;
    }
    if (all[r].pid == me && all[r].dev == t->dev) {
      t->peer[r] = (char *)(uintptr_t)all[r].base;   /* ranks sharing a GPU (tests): its own memory */
    } else if (all[r].pid == me) {
      int can = 0;
      CHECK(rt_cuda(cudaDeviceCanAccessPeer(&can, t->dev, all[r].dev), RT_SUB_RUNTIME, "p2p: cudaDeviceCanAccessPeer"));
      if (!can) {
        LOG_WARN(RT_SUB_RUNTIME, "p2p: device %d cannot access device %d (rank %d) directly", t->dev, all[r].dev, r);
        return BT_ERR_UNSUPPORTED;
      }
      cudaError_t e = cudaDeviceEnablePeerAccess(all[r].dev, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else CHECK(rt_cuda(e, RT_SUB_RUNTIME, "p2p: cudaDeviceEnablePeerAccess"));
      t->peer[r] = (char *)(uintptr_t)all[r].base;
    } else {
      cudaIpcMemHandle_t m;
      memcpy(&m, all[r].ipc, sizeof m);
      void *p = NULL;
      CHECK(rt_cuda(cudaIpcOpenMemHandle(&p, m, cudaIpcMemLazyEnablePeerAccess),
                    RT_SUB_RUNTIME, "p2p: cudaIpcOpenMemHandle"));
      t->peer[r] = p;
      t->opened[r] = 1;
    }
  }
  return BT_OK;
}

bt_result tp_p2p_side(tp_p2p *t, int peer, int chan, int lane, int proto, int dir, ip_gconn *out) {
  tp_key k = {dir == 0 ? t->rank : peer, dir == 0 ? peer : t->rank, chan, lane, proto};
  if (!bsearch(&k, t->keys, t->nkeys, sizeof k, key_cmp)) return BT_ERR_INVALID;
  char *rx = t->peer[k.dst], *tx = t->peer[k.src];
  if (!rx || !tx) return BT_ERR_INVALID;
  where w = locate(t, &k);
  out->fifo = rx + w.fifo;
  out->head = (uint64_t *)(rx + w.head);
  out->tail = (uint64_t *)(tx + w.tail);
  out->count = (uint64_t *)(dir == 0 ? tx + w.scount : rx + w.rcount);
  return BT_OK;
}

int64_t tp_p2p_fifo_bytes(const tp_p2p *t) { return t->fifo_bytes; }

void tp_p2p_free(tp_p2p *t) {
  if (!t) return;
  for (int r = 0; t->opened && r < t->nranks; r++)
    if (t->opened[r]) cudaIpcCloseMemHandle(t->peer[r]);
  if (t->pool) cudaFree(t->pool);
  free(t->keys);
  free(t->peer);
  free(t->opened);
  free(t);
}
