/* net.c -- the network transport: FIFOs in host memory on both sides of a
 * connection, the links a backend carries them on, and what the proxy does
 * with the pieces and credits that arrive (net.h tells the protocol). */
#include "net.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rt_log.h"
#include "rt_param.h"
#include "rt_socket.h"

/* What the proxy hands the backend: where pieces land (below). */
static const net_sink sink_ops;

/* Words (head, tail, count) sit this far apart so that the GPU and the
 * proxy never share a cache line with another connection's word. */
#define WORD 128

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

const net_backend *net_backend_pick(void) {
  const char *want = rt_param_str(RT_PARAM_NET);
  const net_backend *all[] = {&net_ib_backend, &net_socket_backend};
  if (*want) {
    for (int i = 0; i < 2; i++) {
      if (strcasecmp(want, all[i]->name)) continue;
      const char *why = all[i]->unavailable();
      if (why) {
        LOG_WARN(RT_SUB_RUNTIME, "BATON_NET=%s: the %s backend cannot run here: %s", want, all[i]->name, why);
        return NULL;
      }
      return all[i];
    }
    LOG_WARN(RT_SUB_RUNTIME, "BATON_NET=%s: expected socket or ib", want);
    return NULL;
  }
  for (int i = 0; i < 2; i++) {
    const char *why = all[i]->unavailable();
    if (!why) return all[i];
    LOG_INFO(RT_SUB_RUNTIME, "network: the %s backend is not used: %s", all[i]->name, why);
  }
  return NULL;
}

/* Any two ranks: the network is the transport of last resort. */
static int net_can(const tp_ctx *x, int a, int b) {
  (void)x, (void)a, (void)b;
  return 1;
}

static int64_t lens_bytes(const net *n) { return round_up((int64_t)n->nslots * 4, WORD); }

/* Bytes of rank r's pool and, for key k, where its parts lie: the receive
 * side in k.dst's pool (FIFO, then head, tail, count), the send side in
 * k.src's pool (staging FIFO, lens, head, tail, count).  Every rank
 * computes any rank's layout from the same sorted keys. */
typedef struct net_where { int64_t rfifo, rwords, sfifo, swords; } net_where;

static int64_t send_bytes(const net *n) { return n->fifo_bytes + lens_bytes(n) + 3 * WORD; }

static net_where locate(const net *n, const tp_key *k) {
  tp_place p = tp_keys_place(n->keys, n->nkeys, k);
  net_where w;
  w.rfifo = p.ri * n->fifo_bytes;
  w.rwords = p.nrecv_dst * n->fifo_bytes + p.ri * 3 * WORD;
  int64_t sbase = p.nrecv_src * (n->fifo_bytes + 3 * WORD);
  w.sfifo = sbase + p.si * send_bytes(n);
  w.swords = w.sfifo + n->fifo_bytes + lens_bytes(n);
  return w;
}

static void net_free(void *state);

/* The links of this rank: one per peer it exchanges messages with, in
 * peer order; connection indices per link follow key order both ways. */
static bt_result build_links(net *n) {
  int me = n->x.rank;
  int *seen = calloc(n->x.nranks, sizeof *seen);   /* link index + 1 */
  if (!seen) return BT_ERR_NOMEM;
  for (int i = 0; i < n->nkeys; i++) {
    int peer = n->keys[i].src == me ? n->keys[i].dst : n->keys[i].dst == me ? n->keys[i].src : -1;
    if (peer >= 0 && peer != me) seen[peer] = 1;
  }
  for (int r = 0; r < n->x.nranks; r++)
    if (seen[r]) seen[r] = ++n->nlinks;
  n->links = calloc(n->nlinks + 1, sizeof *n->links);
  if (!n->links) { free(seen); return BT_ERR_NOMEM; }
  for (int r = 0; r < n->x.nranks; r++)
    if (seen[r]) n->links[seen[r] - 1].peer = r;
  for (int i = 0; i < n->ns; i++) n->s[i].link = seen[n->s[i].key.dst] - 1;
  for (int i = 0; i < n->nr; i++) n->r[i].link = seen[n->r[i].key.src] - 1;
  free(seen);
  for (int l = 0; l < n->nlinks; l++) {
    net_link *L = &n->links[l];
    for (int i = 0; i < n->ns; i++) L->nsend += n->s[i].link == l;
    for (int i = 0; i < n->nr; i++) L->nrecv += n->r[i].link == l;
    L->s = calloc(L->nsend + 1, sizeof *L->s);
    L->r = calloc(L->nrecv + 1, sizeof *L->r);
    if (!L->s || !L->r) return BT_ERR_NOMEM;
    int a = 0, b = 0;
    for (int i = 0; i < n->ns; i++)
      if (n->s[i].link == l) n->s[i].idx = a, L->s[a++] = &n->s[i];
    for (int i = 0; i < n->nr; i++)
      if (n->r[i].link == l) n->r[i].idx = b, L->r[b++] = &n->r[i];
  }
  return BT_OK;
}

static bt_result net_setup(const tp_ctx *x, const tp_key *keys, int nkeys, void **state,
                           unsigned char blob[TP_BLOB_BYTES]) {
  _Static_assert(NET_BLOB_ADDR + NET_ADDR_BYTES <= TP_BLOB_BYTES, "a backend address fits the blob");
  *state = NULL;
  const net_backend *be = net_backend_pick();
  if (!be) return BT_ERR_UNSUPPORTED;
  net *n = calloc(1, sizeof *n);
  if (!n) return BT_ERR_NOMEM;
  n->x = *x;
  n->be = be;
  n->wake_fd = -1;
  n->nslots = x->nslots;
  n->slot_bytes = x->slot_bytes;
  n->fifo_bytes = round_up(x->slot_bytes * x->nslots, WORD);
  n->piece = rt_param_int(RT_PARAM_NET_PIECE);
  /* A receiver tracks NET_MAX_RANGES separate ranges of a message, and an
   * honest sender's pieces land in up to half as many as a slot holds
   * (every other one, with one of two sockets held up): a slot holds at
   * most 2 * (NET_MAX_RANGES - 1) pieces, larger ones where
   * BATON_NET_PIECE would cut more. */
  const int64_t most = 2 * (NET_MAX_RANGES - 1);
  if ((int64_t)x->slot_bytes / n->piece > most) {
    const int64_t p = ((int64_t)x->slot_bytes + most - 1) / most;
    LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: BATON_NET_PIECE=%lld cuts a slot of %lld bytes into more pieces "
             "than a receiver tracks at once: pieces of %lld bytes", x->rank, (long long)n->piece,
             (long long)x->slot_bytes, (long long)round_up(p, 4096));
    n->piece = round_up(p, 4096);
  }
  n->spin_ns = rt_param_int(RT_PARAM_NET_SPIN_US) * 1000;
  n->sleep_ns = rt_param_int(RT_PARAM_NET_SLEEP_US) * 1000;
  n->trace = net_trace_new(x->rank, x->nranks);
  n->sink = sink_ops;
  n->sink.arg = n;
  bt_result res = BT_ERR_NOMEM;
  n->keys = malloc((nkeys + 1) * sizeof *keys);
  if (!n->keys) goto fail;
  memcpy(n->keys, keys, nkeys * sizeof *keys);
  n->nkeys = nkeys;
  int me = x->rank;
  int64_t nr, ns;
  tp_keys_count(n->keys, n->nkeys, me, &nr, &ns);
  n->s = calloc(ns + 1, sizeof *n->s);
  n->r = calloc(nr + 1, sizeof *n->r);
  if (!n->s || !n->r) goto fail;
  n->pool_bytes = (size_t)(nr * (n->fifo_bytes + 3 * WORD) + ns * send_bytes(n));
  if (n->pool_bytes == 0) n->pool_bytes = WORD;
  void *dev = NULL;
  n->pool = x->mem->alloc(n->pool_bytes, &dev);
  if (!n->pool) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: cannot allocate %.1f MiB of host memory for %lld connections "
             "(lower BATON_SLOT_BYTES, BATON_EXEC_SLOTS or BATON_LANES)", me, n->pool_bytes / 1048576.0,
             (long long)(nr + ns));
    goto fail;
  }
  n->pool_dev = dev;
  for (int i = 0; i < nkeys; i++) {
    const tp_key *k = &keys[i];
    net_where w = locate(n, k);
    if (k->dst == me) {
      net_rconn *c = &n->r[n->nr++];
      c->key = *k;
      c->fifo = n->pool + w.rfifo;
      c->fifo_off = (uint64_t)w.rfifo;
      c->head = (uint64_t *)(n->pool + w.rwords);
      c->tail = (uint64_t *)(n->pool + w.rwords + WORD);
      c->count = (uint64_t *)(n->pool + w.rwords + 2 * WORD);
      c->slot_seq = malloc(n->nslots * sizeof *c->slot_seq);
      c->slot_got = calloc(n->nslots, sizeof *c->slot_got);
      c->slot_total = calloc(n->nslots, sizeof *c->slot_total);
      c->slot_cover = calloc(n->nslots, sizeof *c->slot_cover);
      if (!c->slot_seq || !c->slot_got || !c->slot_total || !c->slot_cover) goto fail;
      for (int j = 0; j < n->nslots; j++) c->slot_seq[j] = NET_SLOT_FREE;
    }
    if (k->src == me) {
      net_sconn *c = &n->s[n->ns++];
      c->key = *k;
      c->fifo = n->pool + w.sfifo;
      c->lens = (uint32_t *)(n->pool + w.sfifo + n->fifo_bytes);
      c->head = (uint64_t *)(n->pool + w.swords);
      c->tail = (uint64_t *)(n->pool + w.swords + WORD);
      c->count = (uint64_t *)(n->pool + w.swords + 2 * WORD);
      c->remote_fifo = (uint64_t)w.rfifo;
    }
  }
  CHECK_GOTO(build_links(n), res, fail);
  net_open_args oa = {.rank = me, .nranks = x->nranks, .pool = n->pool, .pool_bytes = n->pool_bytes,
                      .nsocks = (int)rt_param_int(RT_PARAM_SOCKET_NSOCKS),
                      .deadline_ns = rt_time_ns() + rt_param_int(RT_PARAM_NET_CONNECT_TIMEOUT) * 1000000000};
  memset(blob, 0, TP_BLOB_BYTES);
  uint32_t magic = NET_BLOB_MAGIC;
  memcpy(blob, &magic, 4);
  blob[NET_BLOB_BACKEND] = be == &net_ib_backend;
  CHECK_GOTO(be->open(&oa, &n->bctx, blob + NET_BLOB_ADDR), res, fail);
  LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: %s backend, %d links, %d send and %d receive connections, %.1f MiB "
           "of host FIFOs", me, be->name, n->nlinks, n->ns, n->nr, n->pool_bytes / 1048576.0);
  *state = n;
  return BT_OK;
fail:
  net_free(n);
  return res;
}

static bt_result net_connect(void *state, const unsigned char *blobs) {
  net *n = state;
  unsigned char *addrs = malloc((size_t)n->x.nranks * NET_ADDR_BYTES + 1);
  net_link_req *reqs = calloc(n->nlinks + 1, sizeof *reqs);
  bt_result res = addrs && reqs ? BT_OK : BT_ERR_NOMEM;
  for (int r = 0; r < n->x.nranks && !res; r++) {
    const unsigned char *b = blobs + (size_t)r * TP_BLOB_BYTES;
    uint32_t magic;
    memcpy(&magic, b, 4);
    memcpy(addrs + (size_t)r * NET_ADDR_BYTES, b + NET_BLOB_ADDR, NET_ADDR_BYTES);
    int linked = 0;
    for (int l = 0; l < n->nlinks; l++) linked |= n->links[l].peer == r;
    if (!linked) continue;
    if (magic != NET_BLOB_MAGIC || b[NET_BLOB_BACKEND] != (n->be == &net_ib_backend)) {
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d uses another network backend than rank %d (%s), or none: set "
               "BATON_NET alike on every rank", r, n->x.rank, n->be->name);
      res = BT_ERR_INVALID;
    }
  }
  for (int l = 0; l < n->nlinks && !res; l++)
    reqs[l] = (net_link_req){n->links[l].peer, n->links[l].nsend, n->links[l].nrecv};
  if (!res) res = n->be->connect(n->bctx, reqs, n->nlinks, addrs);
  if (!res) res = net_proxy_start(n);
  free(addrs);
  free(reqs);
  return res;
}

static bt_result net_side(void *state, const tp_key *k, int dir, ip_gconn *out) {
  net *n = state;
  char *base = n->pool, *dev = n->pool_dev;
#define DEV(p) ((void *)(dev + ((char *)(p) - base)))
  if (dir == 0) {
    for (int i = 0; i < n->ns; i++)
      if (!tp_key_cmp(&n->s[i].key, k)) {
        const net_sconn *c = &n->s[i];
        *out = (ip_gconn){DEV(c->fifo), DEV(c->head), DEV(c->tail), DEV(c->count), DEV(c->lens)};
        return BT_OK;
      }
  } else {
    for (int i = 0; i < n->nr; i++)
      if (!tp_key_cmp(&n->r[i].key, k)) {
        const net_rconn *c = &n->r[i];
        *out = (ip_gconn){DEV(c->fifo), DEV(c->head), DEV(c->tail), DEV(c->count), NULL};
        return BT_OK;
      }
  }
#undef DEV
  return BT_ERR_INVALID;
}

static void net_kick(void *state) { net_proxy_kick(state); }

static bt_result net_error(void *state) {
  net *n = state;
  return (bt_result)__atomic_load_n(&n->err, __ATOMIC_ACQUIRE);
}

static void net_stats(void *state, uint64_t *sent, uint64_t *received) {
  net *n = state;
  *sent = __atomic_load_n(&n->moved_bytes[0], __ATOMIC_RELAXED);
  *received = __atomic_load_n(&n->moved_bytes[1], __ATOMIC_RELAXED);
}

static void net_free(void *state) {
  net *n = state;
  if (!n) return;
  net_proxy_stop(n);
  net_trace_finish(n->trace);
  if (n->bctx) n->be->close(n->bctx);
  for (int i = 0; n->r && i < n->nr; i++) {
    free(n->r[i].slot_seq);
    free(n->r[i].slot_got);
    free(n->r[i].slot_total);
    free(n->r[i].slot_cover);
  }
  for (int l = 0; n->links && l < n->nlinks; l++) {
    free(n->links[l].s);
    free(n->links[l].r);
  }
  free(n->links);
  if (n->pool) n->x.mem->free(n->pool);
  free(n->s);
  free(n->r);
  free(n->keys);
  free(n);
}

const tp_ops tp_net_ops = {
  .name = "network",
  .can_connect = net_can,
  .setup = net_setup,
  .connect = net_connect,
  .side = net_side,
  .kick = net_kick,
  .error = net_error,
  .stats = net_stats,
  .free = net_free,
};

/* ---- what arrives (called by the backend from the proxy thread) ---- */

static net_rconn *rconn_of(net *n, int link, const net_piece *p) {
  if (link < 0 || link >= n->nlinks || p->conn >= (uint32_t)n->links[link].nrecv) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent a piece for connection %u, which it has not",
             n->x.rank, link >= 0 && link < n->nlinks ? n->links[link].peer : -1, p->conn);
    return NULL;
  }
  return n->links[link].r[p->conn];
}

/* Adds [lo, hi) to cv: NULL, or why it cannot be (bytes that landed
 * before: a piece sent twice or overlapping another; too many gaps). */
static const char *cover_add(net_cover *cv, uint32_t lo, uint32_t hi) {
  if (lo == hi) return NULL;
  int i = 0;
  while (i < cv->n && cv->lo[i] < lo) i++;   /* the first range starting at or after lo */
  if ((i > 0 && cv->hi[i - 1] > lo) || (i < cv->n && cv->lo[i] < hi))
    return "bytes it had sent before (a piece repeated or overlapping another)";
  int join_prev = i > 0 && cv->hi[i - 1] == lo, join_next = i < cv->n && cv->lo[i] == hi;
  if (join_prev && join_next) {   /* it closes the gap between two ranges */
    cv->hi[i - 1] = cv->hi[i];
    memmove(cv->lo + i, cv->lo + i + 1, (size_t)(cv->n - i - 1) * sizeof *cv->lo);
    memmove(cv->hi + i, cv->hi + i + 1, (size_t)(cv->n - i - 1) * sizeof *cv->hi);
    cv->n--;
  } else if (join_prev) {
    cv->hi[i - 1] = hi;
  } else if (join_next) {
    cv->lo[i] = lo;
  } else {
    if (cv->n == NET_MAX_RANGES) return "a message in more separate pieces at once than a receiver tracks";
    memmove(cv->lo + i + 1, cv->lo + i, (size_t)(cv->n - i) * sizeof *cv->lo);
    memmove(cv->hi + i + 1, cv->hi + i, (size_t)(cv->n - i) * sizeof *cv->hi);
    cv->lo[i] = lo;
    cv->hi[i] = hi;
    cv->n++;
  }
  return NULL;
}

/* Checks piece p against its slot (the message must be one the sender
 * could write: not yet complete, its slot freed by this GPU) and opens the
 * slot on the message's first piece.  Returns the connection or NULL. */
static net_rconn *admit(net *n, int link, const net_piece *p) {
  net_rconn *c = rconn_of(n, link, p);
  if (!c) return NULL;
  int peer = n->links[link].peer;
  uint64_t tail = __atomic_load_n(c->tail, __ATOMIC_ACQUIRE);
  int slot = (int)(p->seq % (uint64_t)n->nslots);
  const char *bad = NULL;
  if (n->links[link].bye) bad = "a piece after its goodbye";
  else if (p->seq < c->done || p->seq >= tail + (uint64_t)n->nslots) bad = "a message whose slot is not free";
  else if (p->total > (uint64_t)n->slot_bytes) bad = "a message larger than a slot";
  else if ((uint64_t)p->off + p->len > p->total) bad = "bytes past the message's end";
  else if (c->slot_seq[slot] != NET_SLOT_FREE && (c->slot_seq[slot] != p->seq || c->slot_total[slot] != p->total))
    bad = "a piece that disagrees with the earlier pieces of its slot";
  if (bad) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent %s (connection %u, message %llu, bytes %u..%u of %u; "
             "%llu received, %llu consumed)", n->x.rank, peer, bad, p->conn, (unsigned long long)p->seq, p->off,
             p->off + p->len, p->total, (unsigned long long)c->done, (unsigned long long)tail);
    return NULL;
  }
  if (c->slot_seq[slot] == NET_SLOT_FREE) {
    c->slot_seq[slot] = p->seq;
    c->slot_got[slot] = 0;
    c->slot_total[slot] = p->total;
    c->slot_cover[slot].n = 0;
  }
  return c;
}

/* Whether piece p of connection c was addressed to where its slot is in
 * this rank's pool (said where not). */
static int placed_right(const net *n, int link, const net_rconn *c, const net_piece *p) {
  uint64_t at = c->fifo_off + (p->seq % (uint64_t)n->nslots) * (uint64_t)n->slot_bytes + p->off;
  if (p->remote_off == at) return 1;
  LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d addressed a piece to pool offset %llu, expected %llu: the "
           "ranks lay out their FIFOs differently (same build and settings on every rank?)", n->x.rank,
           n->links[link].peer, (unsigned long long)p->remote_off, (unsigned long long)at);
  return 0;
}

static char *sink_where(void *arg, int link, const net_piece *p) {
  net *n = arg;
  net_rconn *c = admit(n, link, p);
  if (!c || !placed_right(n, link, c, p)) return NULL;
  return c->fifo + (p->seq % (uint64_t)n->nslots) * (uint64_t)n->slot_bytes + p->off;
}

/* A piece in place (for a backend that writes into the pool itself, as
 * verbs' RDMA writes do, the only check of where it went). */
static int sink_landed(void *arg, int link, const net_piece *p) {
  net *n = arg;
  net_rconn *c = admit(n, link, p);
  if (!c || !placed_right(n, link, c, p)) return -1;
  int slot = (int)(p->seq % (uint64_t)n->nslots);
  const char *bad = cover_add(&c->slot_cover[slot], p->off, p->off + p->len);   /* admit bounded off + len */
  if (bad) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent %s (connection %u, message %llu, bytes %u..%u)",
             n->x.rank, n->links[link].peer, bad, p->conn, (unsigned long long)p->seq, p->off, p->off + p->len);
    return -1;
  }
  c->slot_got[slot] += p->len;
  if (c->slot_got[slot] > c->slot_total[slot]) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent %u bytes of a %u-byte message (connection %u, "
             "message %llu)", n->x.rank, n->links[link].peer, c->slot_got[slot], c->slot_total[slot], p->conn,
             (unsigned long long)p->seq);
    return -1;
  }
  __atomic_fetch_add(&n->moved_bytes[1], p->len, __ATOMIC_RELAXED);
  /* Publish every message now complete, in order. */
  uint64_t was = c->done;
  for (;;) {
    int s = (int)(c->done % (uint64_t)n->nslots);
    if (c->slot_seq[s] != c->done || c->slot_got[s] != c->slot_total[s]) break;
    c->slot_seq[s] = NET_SLOT_FREE;
    c->done++;
  }
  if (c->done != was) __atomic_store_n(c->head, c->done, __ATOMIC_RELEASE);
  return 0;
}

static int sink_credit(void *arg, int link, int conn, uint64_t value) {
  net *n = arg;
  if (link < 0 || link >= n->nlinks || conn < 0 || conn >= n->links[link].nsend) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: a credit for connection %d, which does not exist", n->x.rank, conn);
    return -1;
  }
  net_sconn *c = n->links[link].s[conn];
  if (value < c->credited || value > c->posted) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d says it consumed %llu messages of connection %d; %llu were "
             "sent, %llu consumed before", n->x.rank, n->links[link].peer, (unsigned long long)value, conn,
             (unsigned long long)c->posted, (unsigned long long)c->credited);
    return -1;
  }
  if (value != c->credited) {
    c->credited = value;
    __atomic_store_n(c->tail, value, __ATOMIC_RELEASE);
  }
  return 0;
}

static void sink_bye(void *arg, int link) {
  net *n = arg;
  if (link >= 0 && link < n->nlinks) n->links[link].bye = 1;
}

static const net_sink sink_ops = {NULL, sink_where, sink_landed, sink_credit, sink_bye};
