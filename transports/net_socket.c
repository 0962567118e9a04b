/* net_socket.c -- the TCP backend of the network transport: its set-up
 * and tear-down, and its table (the data path is net_socket_io.c).
 *
 * Several sockets per link, frames of a fixed header and a payload,
 * non-blocking both ways.  Frames: DATA (a piece: its header, then len
 * bytes), CREDIT (conn, value), BYE (the sender is closing in order).
 * Pieces go to the link's sockets in turn; credits always on socket 0, so
 * that they arrive in the order sent.  Integers travel little-endian
 * (net_socket.h).  Set-up: each rank listens; the lower rank of a pair
 * opens the link's sockets and proves with the peer's token (from the
 * bootstrap) that it belongs to the job; the higher one accepts, checks,
 * and closes anything else. */
#include "net_socket_int.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rt_listen.h"
#include "rt_log.h"
#include "rt_param.h"
#include "rt_socket.h"

static const char *sock_unavailable(void) { return NULL; }

static void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bt_result sock_open(const net_open_args *a, void **out, unsigned char addr[NET_ADDR_BYTES]) {
  *out = NULL;
  sctx *c = calloc(1, sizeof *c);
  if (!c) return BT_ERR_NOMEM;
  c->rank = a->rank;
  c->nranks = a->nranks;
  c->nsocks = a->nsocks < 1 ? 1 : a->nsocks;
  c->deadline = a->deadline_ns;
  c->listen_fd = -1;
  c->ntx = (int)rt_param_int(RT_PARAM_SOCKET_THREADS);
  c->spin_ns = rt_param_int(RT_PARAM_NET_SPIN_US) * 1000;
  c->proc = rt_process_number();   /* ranks of one process set up one after the other (sock_connect) */
  if (getrandom(c->token, sizeof c->token, 0) != (ssize_t)sizeof c->token) {
    LOG_WARN(RT_SUB_RUNTIME, "network: getrandom: %s", strerror(errno));
    free(c);
    return BT_ERR_SYSTEM;
  }
  rt_sockaddr sa;
  char ifname[IF_NAMESIZE] = "";
  bt_result res = rt_socket_pick_interface(rt_param_str(RT_PARAM_SOCKET_IFNAME), AF_UNSPEC, &sa, ifname);
  if (!res) {
    if (sa.sa.sa_family == AF_INET) sa.in4.sin_port = 0;
    else sa.in6.sin6_port = 0;
    /* room for every peer's sockets beside a full set of strangers waiting to greet (accept_links) */
    int64_t backlog = (int64_t)c->nsocks * a->nranks + rt_param_int(RT_PARAM_BOOTSTRAP_MAX_PENDING) + 16;
    res = rt_socket_listen(&sa, backlog > 4096 ? 4096 : (int)backlog, &c->listen_fd);
  }
  if (res) {
    free(c);
    return res;
  }
  ns_addr b = {NS_ADDR_MAGIC, NS_VERSION, a->rank, c->nsocks, {0}, {0}, c->proc};
  memcpy(b.token, c->token, sizeof b.token);
  rt_socket_pack(&sa, b.addr);
  ns_addr_wire(&b);
  memset(addr, 0, NET_ADDR_BYTES);
  memcpy(addr, &b, sizeof b);
  char s[RT_SOCKADDR_STRLEN];
  LOG_INFO(RT_SUB_RUNTIME, "network: rank %d listens on %s (%s), %d sockets per link, %d sender threads", a->rank,
           rt_socket_str(&sa, s, sizeof s), ifname, c->nsocks, c->ntx);
  *out = c;
  return BT_OK;
}

/* Writes all n bytes to a non-blocking socket before the deadline. */
int ns_write_all(int fd, const void *p, size_t n, int64_t deadline) {
  size_t done = 0;
  while (done < n) {
    struct iovec v = {(char *)p + done, n - done};
    ssize_t w = rt_socket_send(fd, &v, 1);
    if (w < 0) return -1;
    if (w > 0) { done += (size_t)w; continue; }
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (rt_socket_poll(&pf, 1, deadline) <= 0) { errno = ETIMEDOUT; return -1; }
  }
  return 0;
}

static int link_of(const sctx *c, int peer) {
  for (int l = 0; l < c->nlinks; l++)
    if (c->links[l].peer == peer) return l;
  return -1;
}

/* A new connection's greeting, read without blocking. */
typedef struct pend { int fd; size_t got; ns_hello h; int64_t since; } pend;

/* Checks a complete greeting; returns the link it joins (its socket in
 * *which) or -1 (logged at INFO: strays are closed quietly). */
static int check_hello(sctx *c, const ns_hello *h, int *which) {
  int l = h->from >= 0 && h->from < c->rank ? link_of(c, h->from) : -1;
  const char *bad = h->magic != NS_HELLO_MAGIC ? "not a baton network greeting"
                    : h->version != NS_VERSION ? "another version of baton"
                    : h->to != c->rank ? "meant for another rank"
                    : memcmp(h->token, c->token, sizeof c->token) ? "a wrong token (not of this communicator)"
                    : l < 0 ? "from a rank this one has no link with"
                    : h->nsocks != c->nsocks ? "another BATON_SOCKET_NSOCKS"
                    : h->sock < 0 || h->sock >= c->nsocks ? "a socket index out of range"
                    : c->links[l].s[h->sock].fd >= 0 ? "a second connection for one socket"
                    : NULL;
  if (bad) {
    LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: closed a connection that sent %s", c->rank, bad);
    if (h->magic == NS_HELLO_MAGIC && h->nsocks != c->nsocks && h->to == c->rank)
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d uses BATON_SOCKET_NSOCKS=%d, rank %d uses %d: set it alike",
               h->from, h->nsocks, c->rank, c->nsocks);
    return -1;
  }
  *which = h->sock;
  return l;
}

/* Reads what pending connection x has sent of its greeting.  1: it was
 * whole and right, and the socket joined its link; 0: not whole yet; -1:
 * closed (a stray, or the peer gone). */
static int read_hello(sctx *c, pend *x) {
  ssize_t g = rt_socket_recv(x->fd, (char *)&x->h + x->got, sizeof(ns_hello) - x->got);
  if (g >= 0 && (x->got += (size_t)g) < sizeof(ns_hello)) return 0;
  int which = 0, l = -1;
  if (g >= 0) {
    ns_hello_wire(&x->h);
    l = check_hello(c, &x->h, &which);
  }
  unsigned char ack = NS_ACK;
  if (l >= 0 && x->h.ack && ns_write_all(x->fd, &ack, 1, c->deadline)) {   /* a fresh socket takes one byte */
    LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: cannot acknowledge rank %d's greeting: %s", c->rank, x->h.from,
             strerror(errno));
    l = -1;
  }
  if (l < 0) {
    close(x->fd);
    return -1;
  }
  c->links[l].s[which].fd = x->fd;
  set_nodelay(x->fd);
  return 1;
}

/* Settles pending connection i of p[0 .. *np) (kept oldest first): reads
 * its greeting; joins its link when it is whole and right, else closes it
 * when it is a stray or gone, or -- `last` (shed), or older than auth_ns
 * -- has not greeted; removes it from the list unless it still waits.
 * 1 when it joined its link. */
static int settle(sctx *c, pend *p, int *np, int i, int last, int64_t now, int64_t auth_ns) {
  int r = read_hello(c, &p[i]);
  if (r == 0 && !last && now - p[i].since < auth_ns) return 0;
  if (r == 0) {
    LOG_INFO(RT_SUB_RUNTIME, "network: rank %d: closed a connection that sent no greeting (%s)", c->rank,
             last ? "shed for a newer one" : "BATON_BOOTSTRAP_AUTH_MS passed");
    close(p[i].fd);
  }
  memmove(p + i, p + i + 1, (size_t)(*np - i - 1) * sizeof *p);
  --*np;
  return r == 1;
}

/* The lower ranks whose sockets have not all arrived, for the timeout's
 * message: "rank 0 (1 of 2 sockets), ...". */
static void missing(const sctx *c, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int l = 0; l < c->nlinks && at + 48 < n; l++) {
    int lack = 0;
    if (c->links[l].peer < c->rank)
      for (int k = 0; k < c->nsocks; k++) lack += c->links[l].s[k].fd < 0;
    if (lack)
      at += (size_t)snprintf(buf + at, n - at, "%srank %d (%d of %d sockets)", at ? ", " : "", c->links[l].peer,
                             lack, c->nsocks);
  }
}

/* The pending connections of accept_links, oldest first, for the
 * listener's callbacks. */
typedef struct acceptor {
  sctx *c;
  pend *p;
  int np, maxp, have;             /* have: sockets joined to their links */
  int64_t auth_ns;
} acceptor;

/* rt_listener_accept's add: a new connection at the back; when the list
 * is full, the oldest is shed first, after a last read of its greeting. */
static int add_pending(void *owner, int fd, const rt_sockaddr *peer) {
  acceptor *a = owner;
  (void)peer;
  int64_t now = rt_time_ns();
  if (a->np == a->maxp) a->have += settle(a->c, a->p, &a->np, 0, 1, now, a->auth_ns);
  a->p[a->np++] = (pend){fd, 0, {0}, now};
  return 0;
}

/* rt_listener_accept's evict (out of descriptors): the oldest, as above. */
static int evict_oldest(void *owner) {
  acceptor *a = owner;
  if (!a->np) return 0;
  a->have += settle(a->c, a->p, &a->np, 0, 1, rt_time_ns(), a->auth_ns);
  return 1;
}

/* Accepts until every socket of every link to a lower rank is in, on the
 * listener the bootstrap uses too (rt_listen.h).  A flood cannot starve
 * it by numbers: at most BATON_BOOTSTRAP_MAX_PENDING connections wait for
 * their greeting at once, oldest first, each for BATON_BOOTSTRAP_AUTH_MS
 * at most; when one more arrives the oldest is shed, after a last read of
 * what it sent (a greeting that is there is taken).  Closes the listening
 * socket. */
static bt_result accept_links(sctx *c, int want) {
  char who[64];
  snprintf(who, sizeof who, "network: rank %d", c->rank);
  rt_listener l;
  rt_listener_init(&l, c->listen_fd, who, RT_SUB_RUNTIME);
  c->listen_fd = -1;   /* the listener's now */
  acceptor a = {c, calloc((size_t)l.max_pending + 1, sizeof(pend)), 0, l.max_pending, 0, l.auth_ns};
  struct pollfd *fds = calloc((size_t)l.max_pending + 2, sizeof *fds);
  bt_result res = a.p && fds ? BT_OK : BT_ERR_NOMEM;
  while (!res && a.have < want) {
    int64_t now = rt_time_ns(), until = c->deadline;
    if (now >= c->deadline) {
      char m[512];
      missing(c, m, sizeof m);
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: %d of %d connections from lower ranks arrived before "
               "BATON_NET_CONNECT_TIMEOUT; missing: %s", c->rank, a.have, want, m);
      res = BT_ERR_TIMEOUT;
      break;
    }
    const int listening = rt_listener_pollable(&l, now), at = listening;   /* fds: the listener, then p */
    if (listening) fds[0] = (struct pollfd){.fd = l.fd, .events = POLLIN};
    else if (l.quiet_until < until) until = l.quiet_until;
    for (int i = 0; i < a.np; i++) {
      fds[at + i] = (struct pollfd){.fd = a.p[i].fd, .events = POLLIN};
      if (a.p[i].since + a.auth_ns < until) until = a.p[i].since + a.auth_ns;
    }
    if (rt_socket_poll(fds, at + a.np, until) < 0) {
      res = BT_ERR_SYSTEM;
      break;
    }
    now = rt_time_ns();
    for (int i = a.np - 1; i >= 0; i--)   /* from the back: a removal moves only those already seen */
      if (fds[at + i].revents || now - a.p[i].since >= a.auth_ns)
        a.have += settle(c, a.p, &a.np, i, 0, now, a.auth_ns);
    if (listening && fds[0].revents && rt_listener_accept(&l, &a, add_pending, evict_oldest) < 0) res = BT_ERR_SYSTEM;
  }
  for (int i = 0; a.p && i < a.np; i++) close(a.p[i].fd);
  free(a.p);
  free(fds);
  rt_listener_close(&l);
  return res;
}

/* Opens socket k of link L to the peer at sa and greets it (asking for
 * an acknowledgement when ack). */
static bt_result open_sock(sctx *c, slink *L, int k, const rt_sockaddr *sa, const ns_addr *b, int ack,
                           const char *what) {
  CHECK(rt_socket_connect(sa, c->deadline, -1, what, &L->s[k].fd));
  set_nodelay(L->s[k].fd);
  ns_hello h = {NS_HELLO_MAGIC, NS_VERSION, c->rank, L->peer, k, c->nsocks, {0}, ack, 0};
  memcpy(h.token, b->token, sizeof h.token);
  ns_hello_wire(&h);
  if (ns_write_all(L->s[k].fd, &h, sizeof h, c->deadline)) {
    LOG_WARN(RT_SUB_RUNTIME, "%s: cannot greet: %s", what, strerror(errno));
    return BT_ERR_SYSTEM;
  }
  return BT_OK;
}

/* Waits for the acknowledgement of socket k of L; where the peer closed it
 * unread instead (its listener shed it under a flood of strangers, or it
 * was not listening yet), opens it again after a back-off (10 ms, doubling
 * to 1 s) until BATON_NET_CONNECT_TIMEOUT. */
static bt_result await_ack(sctx *c, slink *L, int k, const rt_sockaddr *sa, const ns_addr *b, const char *what) {
  int64_t backoff = 10000000;
  for (int tries = 1;; tries++) {
    struct pollfd pf = {.fd = L->s[k].fd, .events = POLLIN};
    int r = rt_socket_poll(&pf, 1, c->deadline);
    unsigned char got = 0;
    ssize_t n = r > 0 ? rt_socket_recv(L->s[k].fd, &got, 1) : 0;
    if (n == 1 && got == NS_ACK) return BT_OK;
    if (r == 0 || (n == 1 && got != NS_ACK)) {
      LOG_WARN(RT_SUB_RUNTIME, "%s: socket %d %s (try %d)", what, k,
               r == 0 ? "was not acknowledged before BATON_NET_CONNECT_TIMEOUT" : "got a wrong acknowledgement",
               tries);
      return r == 0 ? BT_ERR_TIMEOUT : BT_ERR_SYSTEM;
    }
    if (n == 0) continue;   /* a spurious wake-up */
    close(L->s[k].fd);
    L->s[k].fd = -1;
    if (rt_time_ns() + backoff >= c->deadline) {
      LOG_WARN(RT_SUB_RUNTIME, "%s: socket %d was closed unacknowledged %d times before BATON_NET_CONNECT_TIMEOUT",
               what, k, tries);
      return BT_ERR_TIMEOUT;
    }
    LOG_INFO(RT_SUB_RUNTIME, "%s: socket %d was closed unacknowledged (shed by a busy listener?): opening it again "
             "in %lld ms", what, k, (long long)(backoff / 1000000));
    struct timespec ts = {(time_t)(backoff / 1000000000), (long)(backoff % 1000000000)};
    nanosleep(&ts, NULL);
    backoff = backoff * 2 < 1000000000 ? backoff * 2 : 1000000000;
    CHECK(open_sock(c, L, k, sa, b, 1, what));
  }
}

static bt_result sock_connect(void *ctx, const net_link_req *reqs, int nlinks, const unsigned char *addrs) {
  sctx *c = ctx;
  c->links = calloc(nlinks + 1, sizeof *c->links);
  if (!c->links) return BT_ERR_NOMEM;
  c->nlinks = nlinks;
  int want = 0;
  for (int l = 0; l < nlinks; l++) {
    slink *L = &c->links[l];
    L->peer = reqs[l].peer;
    L->nsend = reqs[l].nsend;
    L->nrecv = reqs[l].nrecv;
    L->s = calloc(c->nsocks, sizeof *L->s);
    L->credit = calloc(L->nrecv + 1, sizeof *L->credit);
    L->dirty = calloc(L->nrecv + 1, 1);
    if (!L->s || !L->credit || !L->dirty) return BT_ERR_NOMEM;
    for (int k = 0; k < c->nsocks; k++) L->s[k].fd = -1;
    if (L->peer < c->rank) want += c->nsocks;
  }
  c->pfd = calloc((size_t)nlinks * c->nsocks + 1, sizeof *c->pfd);
  if (!c->pfd) return BT_ERR_NOMEM;
  /* To higher ranks: connect and greet (their listeners queue us); then,
   * by a rank alone in its process, each socket acknowledged or opened
   * again.  Every rank acknowledges once it accepts, after its own
   * connections to higher ranks.  Ranks sharing a process set up one after
   * another: one of them waiting for an acknowledgement would hold up the
   * next, whose connections a higher rank may need before it accepts; so
   * they wait for none (their listeners' backlogs take what arrives). */
  int alone = 1;
  for (int r = 0; r < c->nranks && alone; r++) {
    ns_addr o;
    memcpy(&o, addrs + (size_t)r * NET_ADDR_BYTES, sizeof o);
    ns_addr_wire(&o);
    if (r != c->rank && o.magic == NS_ADDR_MAGIC && o.proc == c->proc) alone = 0;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int l = 0; l < nlinks; l++) {
      slink *L = &c->links[l];
      if (L->peer < c->rank) continue;
      ns_addr b;
      memcpy(&b, addrs + (size_t)L->peer * NET_ADDR_BYTES, sizeof b);
      ns_addr_wire(&b);
      rt_sockaddr sa;
      if (b.magic != NS_ADDR_MAGIC || b.version != NS_VERSION || b.rank != L->peer ||
          rt_socket_unpack(b.addr, &sa)) {
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d's address is malformed (another baton version?)",
                 c->rank, L->peer);
        return BT_ERR_INVALID;
      }
      if (b.nsocks != c->nsocks) {
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d uses BATON_SOCKET_NSOCKS=%d, rank %d uses %d: set it alike",
                 L->peer, b.nsocks, c->rank, c->nsocks);
        return BT_ERR_INVALID;
      }
      char what[64];
      snprintf(what, sizeof what, "network: rank %d -> rank %d", c->rank, L->peer);
      int ack = alone;
      for (int k = 0; k < c->nsocks; k++)
        if (pass == 0) CHECK(open_sock(c, L, k, &sa, &b, ack, what));
        else if (ack) CHECK(await_ack(c, L, k, &sa, &b, what));
    }
  /* From lower ranks: accept; then the sender threads. */
  CHECK(accept_links(c, want));
  return ns_tx_start(c);
}

/* Shuts every socket both ways (the peers see their links end) and
 * marks them gone; the sender threads stop at the flag.  The descriptors
 * close in sock_close, once nothing uses them. */
static void sock_abort(void *ctx) {
  sctx *c = ctx;
  __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
  for (int l = 0; l < c->nlinks; l++)
    for (int k = 0; k < c->nsocks; k++) {
      sock *s = &c->links[l].s[k];
      if (s->fd < 0) continue;
      shutdown(s->fd, SHUT_RDWR);
      __atomic_store_n(&s->gone, 1, __ATOMIC_RELEASE);
    }
}

/* After the goodbyes: reads and drops what the peers still send (credits
 * on their way) until each has closed, for at most NS_DRAIN_NS.  Closing
 * a socket with unread data resets it, and a reset can drop the goodbye
 * the peer has not read yet: the peer would take an orderly destroy for a
 * fault. */
#define NS_DRAIN_NS 100000000
static void drain(sctx *c) {
  if (c->aborted) return;
  int64_t deadline = rt_time_ns() + NS_DRAIN_NS;
  for (;;) {
    int n = 0;
    for (int l = 0; l < c->nlinks; l++)
      for (int k = 0; k < c->nsocks; k++)
        if (c->links[l].s[k].fd >= 0 && !c->links[l].s[k].eof)
          c->pfd[n++] = (struct pollfd){.fd = c->links[l].s[k].fd, .events = POLLIN};
    int64_t left = deadline - rt_time_ns();
    if (!n || left <= 0 || poll(c->pfd, n, (int)(left / 1000000) + 1) <= 0) return;
    for (int l = 0; l < c->nlinks; l++)
      for (int k = 0; k < c->nsocks; k++) {
        sock *s = &c->links[l].s[k];
        if (s->fd < 0 || s->eof) continue;
        char junk[4096];
        ssize_t g = recv(s->fd, junk, sizeof junk, MSG_DONTWAIT);
        if (g == 0 || (g < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) s->eof = 1;
      }
  }
}

static void sock_close(void *ctx) {
  sctx *c = ctx;
  if (!c) return;
  ns_tx_stop(c);   /* from here the sockets are this thread's alone */
  /* Goodbye on every socket, so the peer takes the close for what it is;
   * a peer already gone costs at most a second in all. */
  int64_t deadline = rt_time_ns() + 1000000000;
  for (int l = 0; l < c->nlinks && !c->aborted; l++)
    for (int k = 0; k < c->nsocks; k++) {
      sock *s = &c->links[l].s[k];
      if (!ns_live(s) || ns_queued(s)) continue;   /* a frame half sent: a goodbye now would garble it */
      ns_hdr h = {NS_BYE, 0, 0, 0, 0, 0, 0, 0};
      ns_hdr_wire(&h);
      if (ns_write_all(s->fd, &h, sizeof h, deadline)) break;
      shutdown(s->fd, SHUT_WR);   /* the goodbye, then the end of what this side sends */
    }
  drain(c);
  sock_abort(c);
  for (int l = 0; l < c->nlinks; l++)
    for (int k = 0; k < c->nsocks; k++)
      if (c->links[l].s[k].fd >= 0) close(c->links[l].s[k].fd);
  if (c->listen_fd >= 0) close(c->listen_fd);
  for (int l = 0; l < c->nlinks; l++) {
    free(c->links[l].s);
    free(c->links[l].credit);
    free(c->links[l].dirty);
  }
  free(c->links);
  free(c->pfd);
  free(c);
}

const net_backend net_socket_backend = {
  .name = "socket",
  .unavailable = sock_unavailable,
  .open = sock_open,
  .connect = sock_connect,
  .post = ns_post,
  .credit = ns_credit,
  .progress = ns_progress,
  .pollfds = ns_pollfds,
  .pending = ns_pending,
  .stats = ns_stats,
  .abort = sock_abort,
  .close = sock_close,
};
