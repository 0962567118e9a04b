/* net_ib_side.c -- the verbs backend's side connections: one TCP
 * connection per link for the queue-pair exchange (hellos each way), 'R'
 * (ready) and 'B' (goodbye), whose end without 'B' tells of the peer's
 * death; the listener, and the connections it took until their hellos say
 * which link they belong to.  The protocol is at the top of net_ib.c. */
#define _GNU_SOURCE
#include "net_ib_int.h"

#include <errno.h>
#include <string.h>

#include "rt_log.h"
#include "rt_param.h"
#include "rt_socket.h"

static void side_queue(ib_link *L, const void *p, size_t n) {
  if (L->out_n + n > sizeof L->out) return;   /* cannot happen: a hello, then one byte */
  memcpy(L->out + L->out_n, p, n);
  L->out_n += n;
}

/* Sends what L has queued on its side connection, as much as the socket
 * takes now (the rest on a later call).  0, or -1 (L failed: a send
 * failed). */
int net_ib_side_flush(ib_ctx *c, ib_link *L) {
  while (L->fd >= 0 && L->out_off < L->out_n) {
    struct iovec v = {L->out + L->out_off, L->out_n - L->out_off};
    ssize_t w = rt_socket_send(L->fd, &v, 1);
    if (w < 0) return net_ib_link_fail(c, L, "cannot send on the side connection: %s", strerror(errno));
    if (w == 0) break;
    L->out_off += (size_t)w;
  }
  return 0;
}

/* Queues link l's hello (its QPs' numbers and PSNs, the addresses and keys
 * of the pool and of its record rings, the peer's token) on its side
 * connection; net_ib_side_flush() sends it.  Needs L's QPs, the rings
 * and the peer's address. */
void net_ib_hello_queue(ib_ctx *c, int l) {
  ib_link *L = &c->links[l];
  ib_hello h = {.magic = HELLO_MAGIC, .version = IB_VERSION, .from = (uint32_t)c->rank, .to = (uint32_t)L->peer,
                .nqps = (uint32_t)c->nqps, .nsend = (uint32_t)L->nsend, .nrecv = (uint32_t)L->nrecv,
                .pool_rkey = c->pool_mr->rkey, .ring_rkey = c->rings_mr->rkey, .ring_slots = (uint32_t)c->ring_slots,
                .pool_addr = (uintptr_t)c->pool, .pool_bytes = c->pool_bytes, .ring_addr = (uintptr_t)L->qp[0].ring};
  memcpy(h.token, L->peer_addr.token, 16);
  for (int k = 0; k < c->nqps; k++) h.qpn[k] = L->qp[k].qp->qp_num, h.psn[k] = L->qp[k].psn;
  side_queue(L, &h, sizeof h);
}

/* Checks a hello's header: for this rank, with its token, from the peer of
 * link want (the lower rank's view), or from a rank whose link waits for
 * its connection (want -1, the higher's).  The link, or -1 with *bad. */
static int hello_check(const ib_ctx *c, const ib_hello *h, int want, const char **bad) {
  int l = want;
  for (int i = 0; l < 0 && i < c->nlinks; i++)
    if ((uint32_t)c->links[i].peer == h->from && !c->links[i].lower) l = i;
  *bad = h->magic != HELLO_MAGIC || h->version != IB_VERSION ? "no verbs hello of this version"
         : h->to != (uint32_t)c->rank || memcmp(h->token, c->token, 16) ? "a wrong rank or token"
         : l < 0 || (uint32_t)c->links[l].peer != h->from ? "a hello from a rank this one has no link with"
         : want < 0 && c->links[l].state != L_WAIT_CONN ? "a second hello for one link" : NULL;
  return *bad ? -1 : l;
}

/* The peer's hello (L->in, header checked) takes L's QPs to RTS; then the
 * higher rank answers with its hello, the lower one says 'R'. */
static int take_hello(ib_ctx *c, int l) {
  ib_link *L = &c->links[l];
  const ib_hello *h = &L->in;
  if (h->nqps != (uint32_t)c->nqps)
    return net_ib_link_fail(c, L, "rank %d uses BATON_IB_QPS=%u, rank %d uses %d: set it alike", L->peer, h->nqps,
                            c->rank, c->nqps);
  if (h->nsend != (uint32_t)L->nrecv || h->nrecv != (uint32_t)L->nsend)
    return net_ib_link_fail(c, L, "rank %d has %u connections to this rank and %u from it; this rank counts %d and %d "
                            "(internal error)", L->peer, h->nsend, h->nrecv, L->nrecv, L->nsend);
  uint64_t ring_bytes = (uint64_t)c->nqps * h->ring_slots * sizeof(ib_rec);
  const char *bad = !h->pool_bytes || h->pool_addr + h->pool_bytes < h->pool_addr ? "an empty or wrapping pool"
                    : h->ring_slots < 2 * IB_MIN_WR || h->ring_slots > 1u << 16 ? "a ring size out of range"
                    : !h->ring_addr || h->ring_addr + ring_bytes < h->ring_addr ? "a bad ring address" : NULL;
  for (int k = 0; k < c->nqps && !bad; k++)
    if (!h->qpn[k] || h->qpn[k] > 0xffffff || h->psn[k] > 0xffffff) bad = "a queue-pair number or PSN out of range";
  if (bad) return net_ib_link_fail(c, L, "rank %d's hello has %s", L->peer, bad);
  L->pool_addr = h->pool_addr;
  L->pool_bytes = h->pool_bytes;
  L->pool_rkey = h->pool_rkey;
  L->ring_rkey = h->ring_rkey;
  L->ring_slots = h->ring_slots;
  for (int k = 0; k < c->nqps; k++) {
    L->qp[k].peer_ring = h->ring_addr + (uint64_t)k * h->ring_slots * sizeof(ib_rec);
    if (net_ib_qp_ready(c, L, k, h->qpn[k], h->psn[k])) return -1;
  }
  if (L->lower) side_queue(L, "R", 1);
  else net_ib_hello_queue(c, l);
  L->state = L->lower ? L_UP : L_WAIT_READY;
  LOG_INFO(RT_SUB_RUNTIME, "verbs: rank %d -> rank %d (%s:%d -> %s:%d): %d queue pairs at RTS", c->rank, L->peer,
           c->dev, c->port, L->peer_addr.dev, L->peer_addr.port, c->nqps);
  return net_ib_side_flush(c, L);
}

/* Reads what L's side connection has: the rest of the peer's hello (the
 * lower rank), then 'R' (ready) and 'B' (goodbye); its end without 'B'
 * fails L.  Returns the things that moved, or -1 (L failed). */
static int side_read(ib_ctx *c, int l) {
  ib_link *L = &c->links[l];
  int moved = 0;
  while (L->fd >= 0) {
    unsigned char b[64];
    int hello = L->in_n < sizeof L->in;
    ssize_t r = hello ? rt_socket_recv(L->fd, (char *)&L->in + L->in_n, sizeof L->in - L->in_n)
                      : rt_socket_recv(L->fd, b, sizeof b);
    if (r == 0) break;
    if (r < 0 && L->bye_seen) {
      close_fd(&L->fd);
      break;
    }
    if (r < 0)
      return net_ib_link_fail(c, L, "rank %d closed its side connection without saying goodbye (%s): its process "
                              "probably died", L->peer, errno == ECONNRESET ? "end of stream" : strerror(errno));
    moved++;
    const char *bad;
    if (hello && (L->in_n += (size_t)r) == sizeof L->in) {
      if (hello_check(c, &L->in, l, &bad) < 0)
        return net_ib_link_fail(c, L, "rank %d's answer on the side connection has %s", L->peer, bad);
      if (take_hello(c, l)) return -1;
    }
    for (ssize_t i = 0; !hello && i < r; i++) {
      if (b[i] == 'R' && L->state == L_WAIT_READY) L->state = L_UP;
      else if (b[i] == 'B') L->bye_seen = 1, L->state = L_BYE;
      else if (!L->bye_seen)
        return net_ib_link_fail(c, L, "rank %d sent byte 0x%02x on the side connection (protocol error)", L->peer,
                                b[i]);
    }
  }
  return moved;
}

/* Reads pending side connection i's hello: 1 when it is done with (given
 * to its link, or closed: a stray, a peer gone, or -- `last`, or older
 * than BATON_BOOTSTRAP_AUTH_MS -- one that has not said it), and removed
 * from the pending list, which stays oldest first. */
static int pend_read(ib_ctx *c, int i, int64_t now, int last) {
  ib_pend *p = &c->pend[i];
  ssize_t r = rt_socket_recv(p->fd, (char *)&p->in + p->n, sizeof p->in - p->n);
  int whole = r > 0 && (p->n += (size_t)r) == sizeof p->in;
  int stale = last || now - p->since >= rt_param_int(RT_PARAM_BOOTSTRAP_AUTH_MS) * 1000000;
  if (r >= 0 && !whole && !stale) return 0;
  const char *bad = r < 0 ? "nothing before closing" : "no hello in time";
  int l = whole ? hello_check(c, &p->in, -1, &bad) : -1;
  if (l < 0) {
    LOG_INFO(RT_SUB_RUNTIME, "verbs: rank %d: closed a side connection that sent %s", c->rank, bad);
    close(p->fd);
  } else {
    c->links[l].fd = p->fd;
    c->links[l].in = p->in;
    c->links[l].in_n = sizeof p->in;
    take_hello(c, l);
  }
  memmove(c->pend + i, c->pend + i + 1, sizeof c->pend[0] * (size_t)(c->npend - i - 1));
  c->npend--;
  return 1;
}

/* The listener's callbacks: a new connection at the back of the pending
 * list (the oldest shed first, after a last read, when the list is full);
 * the oldest given up when the process is out of descriptors. */
static int add_pend(void *owner, int fd, const rt_sockaddr *peer) {
  ib_ctx *c = owner;
  (void)peer;
  int64_t now = rt_time_ns();
  int most = c->l.max_pending < IB_PENDING_MAX ? c->l.max_pending : IB_PENDING_MAX;
  if (c->npend >= most) pend_read(c, 0, now, 1);
  c->pend[c->npend++] = (ib_pend){.fd = fd, .since = now};
  c->accepted++;
  return 0;
}
static int evict_pend(void *owner) {
  ib_ctx *c = owner;
  if (!c->npend) return 0;
  pend_read(c, 0, rt_time_ns(), 1);
  return 1;
}

/* Reads the pending side connections' hellos and gives each whole one to
 * its link (its QPs to RTS, the answer queued), then takes new connections
 * off the listener (pend_read sheds the oldest when the list is full);
 * flushes and reads every side connection; closes the listener once no
 * link waits for its connection; fails the links not up by the deadline.
 * Never blocks.  Returns the things that moved (failures are on the
 * links). */
int net_ib_pump(ib_ctx *c) {
  int moved = 0, waiting = 0, n = 0;
  int64_t now = rt_time_ns();
  /* Hellos first (one that is there is never shed), then new connections:
   * when the list is full the oldest goes, after a last read. */
  for (int i = c->npend - 1; i >= 0; i--) moved += pend_read(c, i, now, 0);
  const int before = c->accepted;
  if (rt_listener_pollable(&c->l, now) && rt_listener_accept(&c->l, c, add_pend, evict_pend) < 0)
    rt_listener_close(&c->l);   /* broken (logged): the links still waiting fail below */
  moved += c->accepted - before;
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    waiting += L->state == L_WAIT_CONN;
    if (L->fd >= 0 && !net_ib_side_flush(c, L)) c->pfd[n++] = (struct pollfd){.fd = L->fd, .events = POLLIN};
  }
  if (n && poll(c->pfd, (nfds_t)n, 0) > 0)
    for (int l = 0, k = 0; l < c->nlinks && k < n; l++)
      if (c->links[l].fd >= 0 && c->pfd[k].fd == c->links[l].fd && c->pfd[k++].revents) {
        int m = side_read(c, l);
        moved += m > 0 ? m : 0;
      }
  if (!waiting && c->l.fd >= 0) {   /* every link is in: nobody else may knock */
    rt_listener_close(&c->l);
    while (c->npend) close(c->pend[--c->npend].fd);
  }
  now = rt_time_ns();
  for (int l = 0; l < c->nlinks; l++) {
    ib_link *L = &c->links[l];
    if (L->state < L_UP && now > c->deadline)
      net_ib_link_fail(c, L, "the link was not up within BATON_NET_CONNECT_TIMEOUT=%llds (%s)",
                       (long long)rt_param_int(RT_PARAM_NET_CONNECT_TIMEOUT), L->state == L_WAIT_CONN
                       ? "the peer never connected" : L->state == L_WAIT_HELLO ? "the peer never answered"
                       : "the peer never said it was ready");
    if (L->state == L_WAIT_CONN && c->l.fd < 0)
      net_ib_link_fail(c, L, "the listener for side connections broke before rank %d connected", L->peer);
  }
  return moved;
}
