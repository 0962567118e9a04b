/* tp_p2p.c -- the NVLink/PCIe peer-to-peer transport: FIFOs in GPU memory
 * reached by peer access (one process) or CUDA IPC (one process per GPU).
 *
 * Every rank holds one pool: the FIFO and head word of each connection it
 * receives on, the tail word of each it sends on, and its private counts.
 * The connection set (sorted keys) is the same on every rank, so each rank
 * computes where any other rank keeps any connection; only the pool base
 * addresses are exchanged. */
#include "tp.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_cuda.h"
#include "rt_log.h"

/* Words (head, tail, counts) sit 128 bytes apart so that a remote writer
 * and a local poller never share a cache line with another connection. */
#define WORD 128

/* What a rank publishes so that peers can reach its pool. */
typedef struct tp_handle {
  char ipc[64];          /* cudaIpcMemHandle_t */
  uint64_t base;         /* the pool's address in its own process */
  int32_t dev;           /* CUDA device of the rank */
} tp_handle;
_Static_assert(sizeof(tp_handle) <= TP_BLOB_BYTES, "a P2P handle fits its blob");

typedef struct tp_p2p {
  int rank, nranks, dev;
  tp_key *keys;
  int nkeys;
  int64_t fifo_bytes;
  char *pool;            /* this rank's pool */
  char **peer;           /* every rank's pool base as this process sees it */
  int *opened;           /* 1: peer[r] came from cudaIpcOpenMemHandle */
  int ipc;
  const tp_peer *peers;
} tp_p2p;

/* Layout of rank r's pool: FIFOs of the connections r receives on (in key
 * order), then per received connection a head and a count word, then per
 * sent connection a tail and a count word. */
typedef struct where { int64_t fifo, head, rcount, tail, scount; } where;


/* Offsets of key k's parts: receive side in k.dst's pool, send side in
 * k.src's pool. */
static where locate(const tp_p2p *t, const tp_key *k) {
  where w;
  tp_place p = tp_keys_place(t->keys, t->nkeys, k);
  w.fifo = p.ri * t->fifo_bytes;
  w.head = p.nrecv_dst * t->fifo_bytes + p.ri * 2 * WORD;
  w.rcount = w.head + WORD;
  int64_t sbase = p.nrecv_src * (t->fifo_bytes + 2 * WORD);
  w.tail = sbase + p.si * 2 * WORD;
  w.scount = w.tail + WORD;
  return w;
}

static void p2p_free(void *state);

/* Same node group (so same host): the GPUs reach each other directly. */
static int p2p_can(const tp_ctx *x, int a, int b) { return x->peers[a].node == x->peers[b].node; }

static bt_result p2p_create(const tp_ctx *x, const tp_key *keys, int nkeys, void **state, unsigned char blob[TP_BLOB_BYTES]) {
  *state = NULL;
  int rank = x->rank, nranks = x->nranks;
  int64_t fifo_bytes = x->slot_bytes * x->nslots;
  tp_p2p *t = calloc(1, sizeof *t);
  if (!t) return BT_ERR_NOMEM;
  t->ipc = x->ipc;
  t->peers = x->peers;
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
  int64_t nrecv, nsend;
  tp_keys_count(t->keys, t->nkeys, rank, &nrecv, &nsend);
  int64_t bytes = nrecv * (t->fifo_bytes + 2 * WORD) + nsend * 2 * WORD;
  if (bytes == 0) bytes = WORD;
  CHECK_GOTO(rt_cuda(cudaMalloc((void **)&t->pool, bytes),
                     RT_SUB_RUNTIME, "p2p: allocating the connection pool"), res, fail);
  CHECK_GOTO(rt_cuda(cudaMemset(t->pool, 0, bytes), RT_SUB_RUNTIME, "p2p: clearing the connection pool"), res, fail);
  t->peer[rank] = t->pool;
  LOG_INFO(RT_SUB_RUNTIME, "p2p: rank %d dev %d: %lld connections, pool %.1f MiB", rank, t->dev,
           (long long)(nrecv + nsend), bytes / 1048576.0);
  *state = t;
  tp_handle *h = (tp_handle *)blob;
  memset(h, 0, sizeof *h);
  h->base = (uint64_t)(uintptr_t)t->pool;
  h->dev = t->dev;
  if (t->ipc) {
    cudaIpcMemHandle_t m;
    CHECK(rt_cuda(cudaIpcGetMemHandle(&m, t->pool), RT_SUB_RUNTIME, "p2p: cudaIpcGetMemHandle"));
    memcpy(h->ipc, &m, sizeof m < sizeof h->ipc ? sizeof m : sizeof h->ipc);
  }
  return BT_OK;
fail:
  p2p_free(t);
  return res;
}

/* True when rank r exchanges messages with this rank. */
static int linked(const tp_p2p *t, int r) {
  for (int i = 0; i < t->nkeys; i++)
    if ((t->keys[i].src == t->rank && t->keys[i].dst == r) || (t->keys[i].dst == t->rank && t->keys[i].src == r))
      return 1;
  return 0;
}

static bt_result p2p_connect(void *state, const unsigned char *blobs) {
  tp_p2p *t = state;
  int me = t->peers[t->rank].pid;
  for (int r = 0; r < t->nranks; r++) {
    if (r == t->rank || !linked(t, r)) continue;
    const tp_handle *hr = (const tp_handle *)(blobs + (size_t)r * TP_BLOB_BYTES);
    if (t->peers[r].host != t->peers[t->rank].host) {
      LOG_WARN(RT_SUB_RUNTIME, "p2p: rank %d is on another host; only one node is supported by the P2P transport", r);
      return BT_ERR_UNSUPPORTED;
    }
    /* ranks of one process sharing a GPU (tests): its own memory */
    bt_result e = tp_cuda_map_peer("p2p", t->dev, t->peers[r].pid == me, hr->dev, hr->base, hr->ipc, &t->peer[r],
                                   &t->opened[r]);
    if (e == BT_ERR_UNSUPPORTED)
      LOG_WARN(RT_SUB_RUNTIME, "p2p: device %d cannot access device %d (rank %d) directly", t->dev, hr->dev, r);
    CHECK(e);
  }
  return BT_OK;
}

static bt_result p2p_side(void *state, const tp_key *kp, int dir, ip_gconn *out) {
  tp_p2p *t = state;
  tp_key k = *kp;
  if (!bsearch(&k, t->keys, t->nkeys, sizeof k, tp_key_cmp)) return BT_ERR_INVALID;
  char *rx = t->peer[k.dst], *tx = t->peer[k.src];
  if (!rx || !tx) return BT_ERR_INVALID;
  where w = locate(t, &k);
  out->fifo = rx + w.fifo;
  out->head = (uint64_t *)(rx + w.head);
  out->tail = (uint64_t *)(tx + w.tail);
  out->count = (uint64_t *)(dir == 0 ? tx + w.scount : rx + w.rcount);
  return BT_OK;
}

static void p2p_free(void *state) {
  tp_p2p *t = state;
  if (!t) return;
  for (int r = 0; t->opened && r < t->nranks; r++)
    if (t->opened[r]) cudaIpcCloseMemHandle(t->peer[r]);
  if (t->pool) cudaFree(t->pool);
  free(t->keys);
  free(t->peer);
  free(t->opened);
  free(t);
}

const tp_ops tp_p2p_ops = {
  .name = "P2P",
  .can_connect = p2p_can,
  .setup = p2p_create,
  .connect = p2p_connect,
  .side = p2p_side,
  .free = p2p_free,
};
