/* net_ib.c -- the InfiniBand/RoCE verbs backend of the network transport:
 * RDMA writes straight into the peer's pool, small records and immediates
 * to say what landed, and a TCP side connection per link for the
 * queue-pair exchange and to notice a peer's death.
 *
 * libibverbs is opened at run time: every ibv_* function called goes
 * through the table net_ib_fn, which net_ib_select.c loads; that file also
 * picks the device, port and GID.  The side connections (listener, hellos,
 * 'R' and 'B') are net_ib_side.c's; net_ib_int.h is what the files share.
 *
 * Set-up.  open() opens the device and port BATON_IB_HCA picks, registers
 * the pool, listens on TCP (BATON_SOCKET_IFNAME).  connect() creates each
 * link's BATON_IB_QPS RC queue pairs (INIT, receives posted; net_ib_qp.c).  The lower
 * rank of a pair connects to the higher one's listener and sends its hello
 * (QPNs, PSNs, pool and ring addresses and keys, the higher's token) at
 * once, without waiting: the listener's queue holds it.  The higher rank
 * accepts, checks the token, takes its QPs to RTR and RTS and answers with
 * its own hello; the lower one then takes its QPs to RTS and sends 'R'.
 * Each side posts only once the peer's QPs are at RTR (the lower on the
 * answer, the higher on 'R').  connect() waits for links to ranks of other
 * processes; links between ranks of this process (equal nonces in their
 * addresses) finish in progress(), since in one process one rank's
 * connect() returns before the other's starts.  'B' on the side
 * connection is an orderly close; its end without 'B' is a death.
 *
 * Data.  Pieces of a message are spread over the link's QPs; the last one
 * waits until the others have completed (an RDMA write completes once the
 * peer acknowledged it: its bytes are in the peer's memory), then goes on
 * the connection's home QP (conn % nqps) after a 32-byte record {index,
 * kind, conn, total, seq, offset} written into the peer's ring for that QP,
 * as an RDMA write with immediate: kind (2 bits), conn (14), seq (16).  RC
 * order puts the record in place before the immediate completes; the
 * receiver reads the slot of its count of immediates on that QP, checks it
 * against the immediate and calls landed once per message.  A credit is a
 * record written with immediate (kind 2, conn 30 bits), one in flight per
 * connection, a newer value replacing one not yet sent.  A ring has twice
 * as many slots as the receives kept posted: a record write runs only
 * after every earlier immediate on its QP took a receive, so the slot it
 * overwrites was read (the receive is re-posted after the read).
 *
 * A source outside the pool is registered on first use and cached (IB_MRC
 * entries, LRU; an entry with writes in flight stays); the cache assumes
 * that such memory stays mapped while the backend is open. */
#define _GNU_SOURCE
#include "net_ib_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "rt_log.h"
#include "rt_param.h"
#include "rt_socket.h"

/* Logs a WARN naming this rank and its device; returns r. */
static bt_result ctx_warn(const ib_ctx *c, bt_result r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bt_result ctx_warn(const ib_ctx *c, bt_result r, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (*c->dev) LOG_WARN(RT_SUB_RUNTIME, "verbs: rank %d (%s:%d): %s", c->rank, c->dev, c->port, msg);
  else LOG_WARN(RT_SUB_RUNTIME, "verbs: rank %d: %s", c->rank, msg);
  return r;
}

/* ---- open ---- */

/* Opens the device and port BATON_IB_HCA picks (net_ib_select.c), then
 * allocates the PD, registers the pool, creates the completion channel
 * and a first CQ.  A failure is logged. */
static bt_result open_device(ib_ctx *c) {
  char err[512];
  net_ib_dev d;
  bt_result res = net_ib_open_port(&d, err, sizeof err);
  snprintf(c->dev, sizeof c->dev, "%s", d.name);
  c->port = d.port;
  c->vc = d.vc;
  c->max_qp_wr = d.max_qp_wr;
  c->max_cqe = d.max_cqe;
  c->link_layer = d.link_layer;
  c->mtu = d.mtu;
  c->lid = d.lid;
  c->gid_index = d.gid_index;
  memcpy(c->gid, d.gid, 16);
  if (res) return res == BT_ERR_NOMEM ? res : ctx_warn(c, res, "%s", err);
  c->pd = net_ib_fn.alloc_pd(c->vc);
  if (c->pd)
    c->pool_mr = net_ib_fn.reg_mr(c->pd, c->pool, c->pool_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (c->pool_mr) c->ch = net_ib_fn.create_comp_channel(c->vc);
  c->cq_size = c->max_cqe < 1024 ? c->max_cqe : 1024;   /* connect() replaces it when the QPs need more */
  if (c->ch) c->cq = net_ib_fn.create_cq(c->vc, c->cq_size, NULL, c->ch, 0);
  if (!c->cq)
    return ctx_warn(c, BT_ERR_SYSTEM, "%s failed: %s%s", !c->pd ? "ibv_alloc_pd" : !c->pool_mr
                    ? "ibv_reg_mr of the pool" : !c->ch ? "ibv_create_comp_channel" : "ibv_create_cq", strerror(errno),
                    c->pd && !c->pool_mr ? " (is the locked-memory limit, ulimit -l, too low?)" : "");
  int fl = fcntl(c->ch->fd, F_GETFL);
  if (fl < 0 || fcntl(c->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return ctx_warn(c, BT_ERR_SYSTEM, "cannot make the completion channel non-blocking: %s", strerror(errno));
  return BT_OK;
}

static void ib_close(void *vctx);

static bt_result ib_open(const net_open_args *a, void **out, unsigned char addr[NET_ADDR_BYTES]) {
  *out = NULL;
  const char *why = net_ib_unavailable();
  if (why) {
    LOG_WARN(RT_SUB_RUNTIME, "verbs: rank %d: the verbs backend cannot run: %s", a->rank, why);
    return BT_ERR_UNSUPPORTED;
  }
  ib_ctx *c = calloc(1, sizeof *c);
  if (!c) return BT_ERR_NOMEM;
  c->rank = a->rank;
  c->nranks = a->nranks;
  c->deadline = a->deadline_ns;
  snprintf(c->who, sizeof c->who, "verbs: rank %d", c->rank);
  rt_listener_init(&c->l, -1, c->who, RT_SUB_RUNTIME);
  c->pool = a->pool;
  c->pool_bytes = a->pool_bytes;
  c->nqps = (int)rt_param_int(RT_PARAM_IB_QPS);
  if (c->nqps < 1 || c->nqps > IB_MAX_QPS) c->nqps = 1;
  bt_result res = open_device(c);
  if (!res && getrandom(c->token, sizeof c->token, 0) != (ssize_t)sizeof c->token)
    res = ctx_warn(c, BT_ERR_SYSTEM, "getrandom: %s", strerror(errno));
  c->nonce = rt_process_number();   /* ranks with equal numbers share a process */
  rt_sockaddr sa;
  char ifname[IF_NAMESIZE] = "", sbuf[RT_SOCKADDR_STRLEN];
  int lfd = -1;
  if (!res && ((res = rt_socket_pick_interface(rt_param_str(RT_PARAM_SOCKET_IFNAME), AF_UNSPEC, &sa, ifname)) ||
               (res = rt_socket_listen(&sa, c->nranks + 16 > 4096 ? 4096 : c->nranks + 16, &lfd))))
    ctx_warn(c, res, "no TCP listener for the queue-pair exchange (BATON_SOCKET_IFNAME)");
  if (!res) rt_listener_init(&c->l, lfd, c->who, RT_SUB_RUNTIME);
  if (res) {
    ib_close(c);
    return res;
  }
  ib_addr ad = {.magic = ADDR_MAGIC, .version = IB_VERSION, .link_layer = (uint8_t)c->link_layer,
                .port = (uint8_t)c->port, .mtu = (uint8_t)c->mtu, .gid_index = (uint8_t)c->gid_index,
                .lid = (uint32_t)c->lid, .nonce = c->nonce};
  memcpy(ad.token, c->token, 16);
  memcpy(ad.gid, c->gid, 16);
  rt_socket_pack(&sa, ad.sock);
  snprintf(ad.dev, sizeof ad.dev, "%.31s", c->dev);
  memset(addr, 0, NET_ADDR_BYTES);
  memcpy(addr, &ad, sizeof ad);
  LOG_INFO(RT_SUB_RUNTIME, "verbs: rank %d: %s:%d (%s, LID %d, GID index %d, MTU %d), side connections on %s (%s)",
           c->rank, c->dev, c->port, c->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", c->lid,
           c->gid_index, 128 << c->mtu, rt_socket_str(&sa, sbuf, sizeof sbuf), ifname);
  *out = c;
  return BT_OK;
}

/* ---- connect ---- */

/* Checks the requests and the peers' addresses; fills the links. */
static bt_result links_init(ib_ctx *c, const net_link_req *reqs, const unsigned char *addrs) {
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    const net_link_req *q = &reqs[l];
    L->peer = q->peer;
    const char *bad = q->peer < 0 || q->peer >= c->nranks || q->peer == c->rank ? "a peer rank out of range"
                      : q->nsend < 0 || q->nrecv < 0 || q->nsend > IB_MAX_CONNS || q->nrecv > IB_MAX_CONNS
                      ? "too many connections" : NULL;
    for (int k = 0; k < l && !bad; k++)
      if (c->links[k].peer == q->peer) bad = "two links to one peer";
    if (bad) return net_ib_link_fail(c, L, "connect asks for %s (internal error)", bad), BT_ERR_INTERNAL;
    ib_addr *a = &L->peer_addr;
    memcpy(a, addrs + (size_t)q->peer * NET_ADDR_BYTES, sizeof *a);
    if (a->magic != ADDR_MAGIC || a->version != IB_VERSION || rt_socket_unpack(a->sock, &L->peer_sa) ||
        a->mtu < IBV_MTU_256 || a->mtu > IBV_MTU_4096 || a->dev[sizeof a->dev - 1])
      return net_ib_link_fail(c, L, "rank %d's verbs address is malformed (another baton version?)", q->peer),
             BT_ERR_INVALID;
    if (a->link_layer != c->link_layer)
      return net_ib_link_fail(c, L, "rank %d's port is %s, this one's is %s: both ends must be alike", q->peer,
                              a->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                              c->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand"), BT_ERR_INVALID;
    L->nsend = q->nsend;
    L->nrecv = q->nrecv;
    L->lower = c->rank < q->peer;
    L->same_proc = a->nonce == c->nonce;
    L->s = calloc((size_t)L->nsend + 1, sizeof *L->s);
    L->r = calloc((size_t)L->nrecv + 1, sizeof *L->r);
    L->dirty = calloc((size_t)L->nrecv + 1, sizeof *L->dirty);
    if (!L->s || !L->r || !L->dirty) return BT_ERR_NOMEM;
  }
  return BT_OK;
}

/* Sizes the QPs (IB_WR WRs each way, fewer when the CQ would pass the
 * device's max_cqe or IB_CQ_MAX), replaces the CQ when it is too small,
 * registers the record rings and the staging area. */
static bt_result queues_init(ib_ctx *c) {
  int64_t nq = (int64_t)c->nlinks * c->nqps, cap = c->max_cqe < IB_CQ_MAX ? c->max_cqe : IB_CQ_MAX;
  int wr = c->max_qp_wr < IB_WR ? c->max_qp_wr : IB_WR;
  if (nq && nq * 2 * wr > cap) wr = (int)(cap / nq / 2);
  if (wr < IB_MIN_WR)
    return ctx_warn(c, BT_ERR_UNSUPPORTED, "%lld queue pairs do not fit a completion queue of %lld entries (fewer "
                    "links, or a lower BATON_IB_QPS)", (long long)nq, (long long)cap);
  c->sq_depth = c->rq_depth = wr;
  c->ring_slots = 2 * c->rq_depth;
  if (nq * 2 * wr > c->cq_size) {   /* no QP uses the CQ yet: a bigger one replaces it */
    net_ib_fn.destroy_cq(c->cq);
    c->cq = net_ib_fn.create_cq(c->vc, c->cq_size = (int)(nq * 2 * wr), NULL, c->ch, 0);
    if (!c->cq) return ctx_warn(c, BT_ERR_SYSTEM, "ibv_create_cq of %d entries failed: %s", c->cq_size, strerror(errno));
  }
  size_t rings = (size_t)nq * c->ring_slots * sizeof(ib_rec) + 4096, stage = (size_t)nq * wr * sizeof(ib_rec) + 4096;
  if (posix_memalign((void **)&c->rings, 4096, rings) || posix_memalign((void **)&c->stage, 4096, stage))
    return BT_ERR_NOMEM;
  memset(c->rings, 0, rings);
  memset(c->stage, 0, stage);
  c->rings_mr = net_ib_fn.reg_mr(c->pd, c->rings, rings, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  c->stage_mr = c->rings_mr ? net_ib_fn.reg_mr(c->pd, c->stage, stage, IBV_ACCESS_LOCAL_WRITE) : NULL;
  if (!c->stage_mr)
    return ctx_warn(c, BT_ERR_SYSTEM, "ibv_reg_mr of %zu bytes of record rings failed: %s", rings + stage,
                    strerror(errno));
  return BT_OK;
}

static int ib_pollfds(void *vctx, struct pollfd *fds, int max);

static bt_result ib_connect(void *vctx, const net_link_req *reqs, int nlinks, const unsigned char *addrs) {
  ib_ctx *c = vctx;
  if (c->connected++ || nlinks < 0 || nlinks > c->nranks) return BT_ERR_INTERNAL;
  c->links = calloc((size_t)nlinks + 1, sizeof *c->links);
  c->pfd = calloc((size_t)nlinks + IB_PENDING_MAX + 2, sizeof *c->pfd);
  if (!c->links || !c->pfd) return BT_ERR_NOMEM;
  c->nlinks = nlinks;
  for (int l = 0; l < nlinks; l++) c->links[l].fd = -1;
  CHECK(links_init(c, reqs, addrs));
  CHECK(queues_init(c));
  for (int l = 0; l < nlinks; l++) {
    ib_link *L = &c->links[l];
    for (int k = 0; k < c->nqps; k++) CHECK(net_ib_qp_create(c, l, k));
    L->state = L->lower ? L_WAIT_HELLO : L_WAIT_CONN;
    if (!L->lower) continue;
    char what[96];
    snprintf(what, sizeof what, "verbs: rank %d -> rank %d: side connection", c->rank, L->peer);
    CHECK(rt_socket_connect(&L->peer_sa, c->deadline, -1, what, &L->fd));
    net_ib_hello_queue(c, l);
    if (net_ib_side_flush(c, L)) return BT_ERR_REMOTE;
  }
  /* Links to ranks of other processes: wait until they are up. */
  for (;;) {
    net_ib_pump(c);
    int wait = 0;
    for (int l = 0; l < nlinks; l++) {
      ib_link *L = &c->links[l];
      if (L->state == L_FAILED) {
        L->unreported = 0;
        return rt_time_ns() > c->deadline ? BT_ERR_TIMEOUT : BT_ERR_REMOTE;
      }
      wait += !L->same_proc && L->state < L_UP;
    }
    if (!wait) return BT_OK;
    int n = ib_pollfds(c, c->pfd, nlinks + IB_PENDING_MAX + 2);
    int64_t until = rt_time_ns() + 100000000;
    rt_socket_poll(c->pfd, n, until < c->deadline ? until : c->deadline + 1000000);
  }
}

/* ---- sending ---- */

static int sq_room(const ib_ctx *c, const ib_qp *q) { return c->sq_depth - (int)(q->sq_head - q->sq_tail); }

/* Posts one RDMA write of e.bytes from src (with immediate when imm is
 * not NULL) on QP k of link l and records it.  0, or -1 (link failed). */
static int post_write(ib_ctx *c, int l, int k, ib_sqe e, const void *src, uint32_t lkey, uint64_t raddr,
                      uint32_t rkey, const uint32_t *imm, int inl) {
  ib_link *L = &c->links[l];
  ib_qp *q = &L->qp[k];
  struct ibv_sge sge = {.addr = (uintptr_t)src, .length = e.bytes, .lkey = lkey};
  struct ibv_send_wr wr = {
    .wr_id = (uint64_t)(l * c->nqps + k) << 32 | (q->sq_head & ~RECV_BIT), .sg_list = e.bytes ? &sge : NULL,
    .num_sge = e.bytes ? 1 : 0, .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
    .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0), .imm_data = imm ? htonl(*imm) : 0};
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr *bad = NULL;
  int err = ibv_post_send(q->qp, &wr, &bad);
  if (err) return net_ib_link_fail(c, L, "ibv_post_send on QP %d failed: %s", k, strerror(err));
  q->sq[q->sq_head++ % (uint32_t)c->sq_depth] = e;
  return 0;
}

/* Writes a record into the peer's ring for QP k of link l (from the
 * staging slot of its send WR); a credit record carries its immediate. */
static int post_record(ib_ctx *c, int l, int k, ib_rec r) {
  ib_link *L = &c->links[l];
  ib_qp *q = &L->qp[k];
  ib_rec *st = &q->stage[q->sq_head % (uint32_t)c->sq_depth];
  r.idx = (uint32_t)q->rec_out;
  *st = r;
  uint32_t imm = (uint32_t)K_CREDIT << 30 | (r.conn & 0x3fffffff);
  ib_sqe e = {.kind = r.kind == K_CREDIT ? SQ_CREDIT : SQ_RECORD, .mrc = -1, .conn = r.conn, .bytes = sizeof r};
  uint64_t raddr = q->peer_ring + (q->rec_out % L->ring_slots) * sizeof r;
  if (post_write(c, l, k, e, st, c->stage_mr->lkey, raddr, L->ring_rkey, r.kind == K_CREDIT ? &imm : NULL,
                 q->inline_ok))
    return -1;
  q->rec_out++;
  return 0;
}

/* Posts the held last pieces of send connection conn whose other pieces
 * have all completed, in message order, on its home QP: record, then the
 * piece with its immediate.  0, or -1 (link failed). */
static int flush_conn(ib_ctx *c, int l, uint32_t conn) {
  ib_link *L = &c->links[l];
  ib_sconn *s = &L->s[conn];
  int k = (int)(conn % (uint32_t)c->nqps);
  while (s->head != s->tail && L->state == L_UP) {
    ib_msg *m = &s->q[s->head % IB_MSGQ];
    if (!m->closed || m->pending || sq_room(c, &L->qp[k]) < 2) break;
    const net_piece *p = &m->last;
    uint32_t imm = (uint32_t)K_DATA << 30 | (conn & 0x3fff) << 16 | (uint32_t)(p->seq & 0xffff);
    ib_sqe e = {.kind = SQ_LAST, .mrc = (int8_t)m->mrc, .conn = conn, .bytes = p->len};
    ib_rec r = {.kind = K_DATA, .conn = conn, .total = p->total, .seq = p->seq, .off = p->remote_off - p->off};
    if (post_record(c, l, k, r) ||
        post_write(c, l, k, e, p->src, m->lkey, L->pool_addr + p->remote_off, L->pool_rkey, &imm, 0))
      return -1;
    s->head++;
    L->held--;
  }
  return 0;
}

/* Sends the credits owed on link l, one in flight per connection. */
static int flush_credits(ib_ctx *c, int l) {
  ib_link *L = &c->links[l];
  int keep = 0;
  for (int i = 0; i < L->ndirty; i++) {
    uint32_t conn = L->dirty[i];
    ib_rconn *r = &L->r[conn];
    int k = (int)(conn % (uint32_t)c->nqps);
    if (L->state != L_UP || r->inflight || sq_room(c, &L->qp[k]) < 1) {
      L->dirty[keep++] = conn;
      continue;
    }
    if (post_record(c, l, k, (ib_rec){.kind = K_CREDIT, .conn = conn, .seq = r->want})) return -1;
    r->inflight = 1;
    r->dirty = 0;
  }
  L->ndirty = keep;
  return 0;
}

/* The lkey of [src, src+len): the pool's, or a cache entry's (its refs
 * counted, *mrc set).  0; 1 when every entry has writes in flight (try
 * later); -1 when registration failed (link l failed). */
static int lkey_of(ib_ctx *c, int l, const char *src, uint32_t len, uint32_t *lkey, int *mrc) {
  uintptr_t a = (uintptr_t)src, e = a + len, pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  *mrc = -1;
  *lkey = c->pool_mr->lkey;
  if (!len || (a >= (uintptr_t)c->pool && e <= (uintptr_t)c->pool + c->pool_bytes)) return 0;
  int v = -1;
  for (int i = 0; i < IB_MRC; i++) {
    ib_mrc *m = &c->mrc[i];
    if (m->mr && a >= m->lo && e <= m->hi) {
      v = i;
      break;
    }
    if (!m->refs && (v < 0 || !m->mr || (c->mrc[v].mr && m->used < c->mrc[v].used))) v = i;   /* LRU, idle */
  }
  if (v < 0) return 1;
  ib_mrc *m = &c->mrc[v];
  if (!m->mr || a < m->lo || e > m->hi) {
    if (m->mr) net_ib_fn.dereg_mr(m->mr);
    m->lo = a & ~(pg - 1);
    m->hi = (e + pg - 1) & ~(pg - 1);
    if (!(m->mr = net_ib_fn.reg_mr(c->pd, (void *)m->lo, m->hi - m->lo, 0)))
      return net_ib_link_fail(c, &c->links[l], "ibv_reg_mr of %zu bytes at %p (a source outside the pool) failed: %s",
                              (size_t)(m->hi - m->lo), (void *)m->lo, strerror(errno));
  }
  m->refs++;
  m->used = ++c->clock;
  *lkey = m->mr->lkey;
  *mrc = v;
  return 0;
}

static void mrc_put(ib_ctx *c, int mrc) {
  if (mrc >= 0 && c->mrc[mrc].refs > 0) c->mrc[mrc].refs--;
}

static int ib_post(void *vctx, int link, const net_piece *p) {
  ib_ctx *c = vctx;
  if (c->aborted || link < 0 || link >= c->nlinks) return -1;
  ib_link *L = &c->links[link];
  if (L->state == L_FAILED || L->state == L_BYE) return -1;
  if (L->state != L_UP) return 1;
  if (p->conn >= (uint32_t)L->nsend || (p->len && !p->src) || p->off > p->total || p->len > p->total - p->off ||
      p->remote_off < p->off || p->remote_off > L->pool_bytes || p->len > L->pool_bytes - p->remote_off ||
      (p->last && p->off + p->len != p->total))
    return net_ib_link_fail(c, L, "a piece out of bounds: connection %u, message %llu, bytes %u+%u of %u at offset "
                            "%llu of the peer's %llu-byte pool (internal error)", p->conn, (unsigned long long)p->seq,
                            p->off, p->len, p->total, (unsigned long long)p->remote_off,
                            (unsigned long long)L->pool_bytes);
  ib_sconn *s = &L->s[p->conn];
  ib_msg *m = NULL;
  for (uint32_t i = s->head; i != s->tail && !m; i++)
    if (s->q[i % IB_MSGQ].seq == p->seq && !s->q[i % IB_MSGQ].closed) m = &s->q[i % IB_MSGQ];
  if (!m && s->tail - s->head == IB_MSGQ) return 1;
  int k = -1, mrc, r;
  for (int i = 0; !p->last && i < c->nqps && k < 0; i++)   /* a piece: the next QP with room */
    if (sq_room(c, &L->qp[(L->rr + (uint32_t)i) % (uint32_t)c->nqps]) > 0)
      k = (int)((L->rr + (uint32_t)i) % (uint32_t)c->nqps);
  if (!p->last && k < 0) return 1;
  uint32_t lkey;
  if ((r = lkey_of(c, link, p->src, p->len, &lkey, &mrc))) return r;
  if (!m) {
    m = &s->q[s->tail++ % IB_MSGQ];
    *m = (ib_msg){.seq = p->seq, .mrc = -1};
  }
  if (p->last) {
    m->closed = 1;
    m->last = *p;
    m->lkey = lkey;
    m->mrc = mrc;
    L->held++;
    return flush_conn(c, link, p->conn);
  }
  ib_sqe e = {.kind = SQ_PIECE, .mrc = (int8_t)mrc, .conn = p->conn, .msg = (uint32_t)(m - s->q), .bytes = p->len};
  if (post_write(c, link, k, e, p->src, lkey, L->pool_addr + p->remote_off, L->pool_rkey, NULL, 0)) {
    mrc_put(c, mrc);
    return -1;
  }
  m->pending++;
  L->rr = (uint32_t)(k + 1) % (uint32_t)c->nqps;
  return 0;
}

static int ib_credit(void *vctx, int link, int conn, uint64_t value) {
  ib_ctx *c = vctx;
  if (c->aborted || link < 0 || link >= c->nlinks || conn < 0 || conn >= c->links[link].nrecv) return -1;
  ib_link *L = &c->links[link];
  if (L->state == L_FAILED) return -1;
  if (L->state == L_BYE) return 0;   /* nobody reads it any more */
  ib_rconn *r = &L->r[conn];
  r->want = value;
  if (!r->dirty) {
    r->dirty = 1;
    L->dirty[L->ndirty++] = (uint32_t)conn;
  }
  return flush_credits(c, link);
}

/* ---- completions ---- */

/* A record arrived on QP k of link l (a receive with immediate): checks it
 * against the immediate, re-posts the receive, tells the sink.  0, or -1
 * (link failed). */
static int take_record(ib_ctx *c, int l, int k, const struct ibv_wc *wc, const net_sink *sink) {
  ib_link *L = &c->links[l];
  ib_qp *q = &L->qp[k];
  ib_rec r = q->ring[q->rec_in % (uint32_t)c->ring_slots];
  uint32_t imm = ntohl(wc->imm_data);
  char bad[200] = "";
  if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM))
    snprintf(bad, sizeof bad, "something other than an RDMA write with immediate (opcode %d)", (int)wc->opcode);
  else if (r.idx != (uint32_t)q->rec_in || r.kind != imm >> 30)
    snprintf(bad, sizeof bad, "record %u of kind %u where record %u (immediate of kind %u) was due", r.idx, r.kind,
             (uint32_t)q->rec_in, imm >> 30);
  else if (r.kind == K_DATA && r.conn >= (uint32_t)L->nrecv)
    snprintf(bad, sizeof bad, "data for connection %u of its %d", r.conn, L->nrecv);
  else if (r.kind == K_DATA && (((imm >> 16) & 0x3fff) != (r.conn & 0x3fff) || (imm & 0xffff) != (r.seq & 0xffff)))
    snprintf(bad, sizeof bad, "an immediate 0x%08x that disagrees with its record (connection %u, message %llu)",
             imm, r.conn, (unsigned long long)r.seq);
  else if (r.kind == K_DATA && r.seq != L->r[r.conn].next_seq)
    snprintf(bad, sizeof bad, "message %llu on connection %u where %llu was due", (unsigned long long)r.seq, r.conn,
             (unsigned long long)L->r[r.conn].next_seq);
  else if (r.kind == K_DATA && (r.off > c->pool_bytes || r.total > c->pool_bytes - r.off))
    snprintf(bad, sizeof bad, "a %u-byte message at offset %llu, outside this rank's pool", r.total,
             (unsigned long long)r.off);
  else if (r.kind == K_CREDIT && (r.conn >= (uint32_t)L->nsend || (imm & 0x3fffffff) != r.conn))
    snprintf(bad, sizeof bad, "a credit for connection %u of its %d", r.conn, L->nsend);
  else if (r.kind != K_DATA && r.kind != K_CREDIT)
    snprintf(bad, sizeof bad, "a record of unknown kind %u", r.kind);
  if (*bad) return net_ib_link_fail(c, L, "rank %d sent %s on QP %d (protocol error)", L->peer, bad, k);
  q->rec_in++;
  int e = net_ib_post_recv(q, l * c->nqps + k);   /* only now: the slot is read (see the top) */
  if (e) return net_ib_link_fail(c, L, "ibv_post_recv on QP %d failed: %s", k, strerror(e));
  int ok;
  if (r.kind == K_DATA) {
    net_piece p = {.conn = r.conn, .len = r.total, .total = r.total, .seq = r.seq, .remote_off = r.off, .last = 1};
    L->r[r.conn].next_seq++;
    __atomic_fetch_add(&c->received, r.total, __ATOMIC_RELAXED);
    ok = sink->landed(sink->arg, l, &p);
  } else {
    ok = sink->credit(sink->arg, l, (int)r.conn, r.seq);
  }
  return ok < 0 ? net_ib_link_fail(c, L, "the transport refused what rank %d sent (see above)", L->peer) : 0;
}

/* One work completion: a record in, or one of our writes done (a piece's
 * completion may free its message's last piece).  1 when it moved
 * something; an error status fails its link (logged with the status). */
/* Whether L's peer has said goodbye, once the side connections are read:
 * a peer that leaves sends its goodbye before it tears its queue pairs
 * down, so work of ours that fails on them afterwards (a credit on its way)
 * is the orderly end, not a fault, when the goodbye is there. */
static int bye_arrived(ib_ctx *c, ib_link *L) {
  if (!L->bye_seen) net_ib_pump(c);
  return L->bye_seen;
}

static int take_wc(ib_ctx *c, const struct ibv_wc *wc, const net_sink *sink) {
  static const char *const kinds[] = {"?", "an RDMA write of a piece", "an RDMA write of a record",
                                      "an RDMA write of a message's last piece", "an RDMA write of a credit"};
  uint64_t g = wc->wr_id >> 32;
  if (g >= (uint64_t)c->nlinks * (uint64_t)c->nqps) {
    LOG_WARN(RT_SUB_RUNTIME, "verbs: rank %d: a completion for unknown work %#llx (internal error)", c->rank,
             (unsigned long long)wc->wr_id);
    return 0;
  }
  int l = (int)(g / (uint64_t)c->nqps), k = (int)(g % (uint64_t)c->nqps), ok = wc->status == IBV_WC_SUCCESS;
  ib_link *L = &c->links[l];
  ib_qp *q = &L->qp[k];
  if (wc->wr_id & RECV_BIT) {   /* records still count after a goodbye: they were on their way before it */
    if (ok && L->state != L_FAILED && !c->aborted) return take_record(c, l, k, wc, sink) ? 0 : 1;
    if (!ok && L->state != L_FAILED && L->state != L_BYE && !c->aborted && !bye_arrived(c, L))
      net_ib_link_fail(c, L, "a receive on QP %d failed: %s (vendor error %#x)", k, net_ib_fn.wc_status_str(wc->status),
                       wc->vendor_err);
    return 0;
  }
  if ((uint32_t)(wc->wr_id & ~RECV_BIT) != (q->sq_tail & ~RECV_BIT) || q->sq_tail == q->sq_head)
    return net_ib_link_fail(c, L, "QP %d completed work %u where %u was due (internal error)", k,
                            (uint32_t)wc->wr_id & ~RECV_BIT, q->sq_tail & ~RECV_BIT), 0;
  ib_sqe e = q->sq[q->sq_tail++ % (uint32_t)c->sq_depth];
  mrc_put(c, e.mrc);
  if (!ok && L->state != L_FAILED && L->state != L_BYE && !c->aborted && !bye_arrived(c, L))
    net_ib_link_fail(c, L, "%s (%u bytes) on QP %d failed: %s (vendor error %#x)%s", kinds[e.kind < 5 ? e.kind : 0],
                     e.bytes, k, net_ib_fn.wc_status_str(wc->status), wc->vendor_err, wc->status == IBV_WC_RETRY_EXC_ERR
                     ? ": the peer is unreachable or dead (BATON_IB_TIMEOUT, BATON_IB_RETRY_CNT)"
                     : wc->status == IBV_WC_REM_ACCESS_ERR ? ": the peer's memory is gone (has it closed?)" : "");
  if (!ok) return 0;
  if (e.kind == SQ_PIECE || e.kind == SQ_LAST) __atomic_fetch_add(&c->sent, e.bytes, __ATOMIC_RELAXED);
  if (e.kind == SQ_PIECE && e.conn < (uint32_t)L->nsend && L->s[e.conn].q[e.msg % IB_MSGQ].pending)
    L->s[e.conn].q[e.msg % IB_MSGQ].pending--;
  if (e.kind == SQ_CREDIT && e.conn < (uint32_t)L->nrecv) L->r[e.conn].inflight = 0;
  return 1;
}

static int ib_progress(void *vctx, const net_sink *sink, int *failed) {
  ib_ctx *c = vctx;
  if (c->aborted) return -1;
  int moved = 0, setting_up = 0;
  int64_t now = rt_time_ns();
  for (int l = 0; l < c->nlinks && !setting_up; l++) setting_up = c->links[l].state < L_UP;
  if (setting_up || now >= c->next_side) {   /* side connections: each round while setting up, else each ms */
    moved += net_ib_pump(c);
    c->next_side = now + 1000000;
  }
  struct ibv_cq *ecq;
  void *ectx;
  while (net_ib_fn.get_cq_event(c->ch, &ecq, &ectx) == 0) {   /* non-blocking: the channel's events, acknowledged */
    net_ib_fn.ack_cq_events(ecq, 1);
    c->armed = 0;
  }
  if (!c->armed) c->armed = ibv_req_notify_cq(c->cq, 0) == 0;   /* before polling: nothing slips by */
  struct ibv_wc wc[32];
  int drained = 0;   /* the queue was emptied (fewer completions than asked for came) */
  for (int round = 0, n = 32; round < 16 && n == 32; round++) {
    if ((n = ibv_poll_cq(c->cq, 32, wc)) < 0)
      for (int l = 0; l < c->nlinks; l++)
        net_ib_link_fail(c, &c->links[l], "ibv_poll_cq failed: the completion queue broke");
    for (int i = 0; i < n; i++) moved += take_wc(c, &wc[i], sink);
    drained = n < 32;
  }
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    for (uint32_t i = 0; L->held && i < (uint32_t)L->nsend && L->state == L_UP; i++)
      if (L->s[i].head != L->s[i].tail) flush_conn(c, l, i);
    if (L->ndirty) flush_credits(c, l);
    /* A goodbye is told once every completion before it is taken: the
     * peer's last records may still wait in the queue behind this call's
     * batch (the sink refuses a piece after its goodbye). */
    if (L->bye_seen && !L->bye_told && L->state != L_FAILED && drained) {
      L->bye_told = 1;
      sink->bye(sink->arg, l);
      moved++;
    }
  }
  for (int l = 0; l < c->nlinks; l++)
    if (c->links[l].unreported) {
      c->links[l].unreported = 0;
      *failed = l;
      return -1;
    }
  return moved;
}

static int ib_pollfds(void *vctx, struct pollfd *fds, int max) {
  ib_ctx *c = vctx;
  int n = 0;
  if (c->aborted) return 0;   /* nothing more will come */
  if (c->ch && n < max) fds[n++] = (struct pollfd){.fd = c->ch->fd, .events = POLLIN};
  if (rt_listener_pollable(&c->l, rt_time_ns()) && n < max) fds[n++] = (struct pollfd){.fd = c->l.fd, .events = POLLIN};
  for (int i = 0; i < c->npend && n < max; i++) fds[n++] = (struct pollfd){.fd = c->pend[i].fd, .events = POLLIN};
  for (int l = 0; l < c->nlinks && n < max; l++) {
    const ib_link *L = &c->links[l];
    if (L->fd >= 0) fds[n++] = (struct pollfd){.fd = L->fd, .events = POLLIN | (L->out_off < L->out_n ? POLLOUT : 0)};
  }
  return n;
}

/* Whether a live link still holds work of the proxy's: a message's last
 * piece waiting for its earlier pieces' completions, send work requests
 * the device has not completed, or credits owed (the proxy flushes them
 * before it stops: a rank destroyed right after its last message). */
static int ib_pending(void *vctx) {
  const ib_ctx *c = vctx;
  if (c->aborted) return 0;
  for (int l = 0; l < c->nlinks; l++) {
    const ib_link *L = &c->links[l];
    if (L->state != L_UP) continue;
    if (L->held || L->ndirty) return 1;
    for (int k = 0; k < c->nqps; k++)
      if (L->qp[k].sq_head != L->qp[k].sq_tail) return 1;
  }
  return 0;
}

static void ib_stats(void *vctx, uint64_t *sent, uint64_t *received) {
  ib_ctx *c = vctx;
  *sent = __atomic_load_n(&c->sent, __ATOMIC_RELAXED);
  *received = __atomic_load_n(&c->received, __ATOMIC_RELAXED);
}

/* Drops every link at once: side connections closed (the peers see their
 * end without a goodbye), QPs to the error state; later calls fail; frees
 * nothing. */
static void ib_abort(void *vctx) {
  ib_ctx *c = vctx;
  c->aborted = 1;
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    if (L->fd >= 0) shutdown(L->fd, SHUT_RDWR);
    close_fd(&L->fd);
    for (int k = 0; k < c->nqps; k++) {
      struct ibv_qp_attr at = {.qp_state = IBV_QPS_ERR};
      if (L->qp[k].qp) net_ib_fn.modify_qp(L->qp[k].qp, &at, IBV_QP_STATE);
    }
  }
}

static void ib_close(void *vctx) {
  ib_ctx *c = vctx;
  if (!c) return;
  /* 'B' on every side connection whose hello is out: a byte into the
   * socket buffer, no waiting.  Bytes left unread would make the close a
   * reset, which the peer could take for a death: drain them first. */
  for (int l = 0; l < c->nlinks && !c->aborted; l++) {
    ib_link *L = &c->links[l];
    char junk[256];
    struct iovec v = {(void *)"B", 1};
    if (L->fd < 0 || L->state == L_FAILED || L->out_off < L->out_n) continue;
    if (rt_socket_send(L->fd, &v, 1) == 1) shutdown(L->fd, SHUT_WR);
    while (rt_socket_recv(L->fd, junk, sizeof junk) > 0) {
    }
  }
  ib_abort(c);
  rt_listener_close(&c->l);
  while (c->npend > 0) close(c->pend[--c->npend].fd);
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    for (int k = 0; k < c->nqps; k++) {
      if (L->qp[k].qp) net_ib_fn.destroy_qp(L->qp[k].qp);
      free(L->qp[k].sq);
    }
    free(L->s);
    free(L->r);
    free(L->dirty);
  }
  for (int i = 0; i < IB_MRC; i++)
    if (c->mrc[i].mr) net_ib_fn.dereg_mr(c->mrc[i].mr);
  struct ibv_mr *mrs[] = {c->rings_mr, c->stage_mr, c->pool_mr};
  for (int i = 0; i < 3; i++)
    if (mrs[i]) net_ib_fn.dereg_mr(mrs[i]);
  if (c->cq) net_ib_fn.destroy_cq(c->cq);
  if (c->ch) net_ib_fn.destroy_comp_channel(c->ch);
  if (c->pd) net_ib_fn.dealloc_pd(c->pd);
  if (c->vc) net_ib_fn.close_device(c->vc);
  free(c->rings);
  free(c->stage);
  free(c->links);
  free(c->pfd);
  free(c);
}

const net_backend net_ib_backend = {
  .name = "ib",
  .unavailable = net_ib_unavailable,
  .open = ib_open,
  .connect = ib_connect,
  .post = ib_post,
  .credit = ib_credit,
  .progress = ib_progress,
  .pollfds = ib_pollfds,
  .pending = ib_pending,
  .stats = ib_stats,
  .abort = ib_abort,
  .close = ib_close,
};
