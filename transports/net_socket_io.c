/* net_socket_io.c -- the TCP backend's data path: pieces and credits
 * queued per socket as frames, written by the sender threads (or by the
 * proxy thread itself, BATON_SOCKET_THREADS=0), and frames read back into
 * the sink by the proxy thread.
 *
 * Why threads: on TCP every byte is copied by the CPU once on each side,
 * and one thread that both sends and receives a rank's traffic spends the
 * sum of the two copies; a sender thread beside the proxy makes the two
 * copies run at the same time.  The proxy keeps every protocol decision
 * (what to send, where a piece lands, credits); a sender thread only
 * writes frames it was handed, in order, and reports a failed socket. */
#define _GNU_SOURCE
#include "net_socket_int.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rt_log.h"
#include "rt_socket.h"
#include "rt_time.h"

/* The largest frame payload the proxy writes itself rather than hand to
 * a sender thread: a hand-over costs a few microseconds, a copy of this
 * much about as long. */
#define NS_INLINE_BYTES 16384

static int tx(sctx *c, sock *s, int *moved);

/* Takes the right to write s (see sock); 1 when taken. */
static int take_writer(sock *s) {
  int free_ = 0;
  return __atomic_compare_exchange_n(&s->writer, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* A socket of L with room for the next piece, taken in turn, or NULL. */
static sock *pick(const sctx *c, slink *L) {
  for (int i = 0; i < c->nsocks; i++) {
    sock *s = &L->s[(L->rr + i) % c->nsocks];
    if (ns_live(s) && ns_queued(s) < QCAP) {
      L->rr = (L->rr + i + 1) % c->nsocks;
      return s;
    }
  }
  return NULL;
}

/* Queues a frame on socket s of link l (the caller checked for room) and
 * wakes the sender thread that writes it if it sleeps.  The frame's
 * entry is written before qput publishes it; qput is stored before
 * `sleeping` is read, and the thread stores `sleeping` before it reads
 * qput (both sequentially consistent), so a thread about to sleep either
 * sees the frame or is woken. */
static void enqueue(sctx *c, int l, sock *s, const ns_hdr *h, const char *src) {
  uint32_t at = __atomic_load_n(&s->qput, __ATOMIC_RELAXED);
  qent *e = &s->q[at % QCAP];
  e->h = *h;
  e->plen = h->type == NS_DATA ? h->len : 0;
  ns_hdr_wire(&e->h);
  e->src = src;
  __atomic_store_n(&s->qput, at + 1, __ATOMIC_SEQ_CST);
  if (!c->ntx) return;
  /* A small frame alone in the queue: written here and now, if the
   * sender thread is not writing this socket. */
  if (e->plen <= NS_INLINE_BYTES && at == __atomic_load_n(&s->qtake, __ATOMIC_ACQUIRE) && take_writer(s)) {
    int moved = 0;
    if (tx(c, s, &moved) < 0) __atomic_store_n(&s->txerr, errno ? errno : EIO, __ATOMIC_RELEASE);
    __atomic_store_n(&s->writer, 0, __ATOMIC_RELEASE);
    if (!ns_queued(s)) return;
  }
  stx *t = &c->tx[l % c->ntx];
  if (__atomic_load_n(&t->sleeping, __ATOMIC_SEQ_CST)) {
    uint64_t one = 1;
    ssize_t w = write(t->wake_fd, &one, sizeof one);
    (void)w;
  }
}

int ns_post(void *ctx, int link, const net_piece *p) {
  sctx *c = ctx;
  if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) || link < 0 || link >= c->nlinks) return -1;
  sock *s = pick(c, &c->links[link]);
  if (!s) return ns_live(&c->links[link].s[0]) ? 1 : -1;
  ns_hdr h = {NS_DATA, p->conn, p->off, p->len, p->total, 0, p->seq, p->remote_off};
  enqueue(c, link, s, &h, p->src);
  return 0;
}

int ns_credit(void *ctx, int link, int conn, uint64_t value) {
  sctx *c = ctx;
  if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) || link < 0 || link >= c->nlinks || conn < 0 ||
      conn >= c->links[link].nrecv)
    return -1;
  c->links[link].credit[conn] = value;
  c->links[link].dirty[conn] = 1;
  return 0;
}

/* Writes what socket s has queued until it would block; counts in *moved
 * the writes that took bytes.  -1: broken (errno says why). */
static int tx(sctx *c, sock *s, int *moved) {
  for (;;) {
    uint32_t take = __atomic_load_n(&s->qtake, __ATOMIC_RELAXED);
    if (take == __atomic_load_n(&s->qput, __ATOMIC_ACQUIRE)) return 0;
    qent *e = &s->q[take % QCAP];
    size_t plen = e->plen;
    struct iovec v[2];
    int nv = 0;
    if (s->qsent < sizeof(ns_hdr)) v[nv++] = (struct iovec){(char *)&e->h + s->qsent, sizeof(ns_hdr) - s->qsent};
    size_t pdone = s->qsent > sizeof(ns_hdr) ? s->qsent - sizeof(ns_hdr) : 0;
    if (plen > pdone) v[nv++] = (struct iovec){(char *)e->src + pdone, plen - pdone};
    ssize_t w = rt_socket_send(s->fd, v, nv);
    if (w < 0) return -1;
    if (w == 0) return 0;
    s->qsent += (size_t)w;
    (*moved)++;
    if (s->qsent == sizeof(ns_hdr) + plen) {
      __atomic_fetch_add(&c->sent, plen, __ATOMIC_RELAXED);
      s->qsent = 0;
      __atomic_store_n(&s->qtake, take + 1, __ATOMIC_RELEASE);
    }
  }
}

/* Whether every frame queued on s and not sent is a credit (read once
 * nobody writes s any more). */
static int only_credits(const sock *s) {
  for (uint32_t i = s->qtake; i != s->qput; i++)
    if (le32toh(s->q[i % QCAP].h.type) != NS_CREDIT) return 0;
  return 1;
}

static const char *frame_name(uint32_t t) {
  return t == NS_DATA ? "data" : t == NS_CREDIT ? "credit" : t == NS_BYE ? "goodbye" : "unknown";
}

/* Takes what socket s of link l has received, frame by frame, until it
 * would block (`all`), or 64 reads at most (the proxy's other work waits
 * meanwhile).  -1: broken or refused (logged). */
static int rx(sctx *c, int l, sock *s, const net_sink *sink, int *moved, int all) {
  slink *L = &c->links[l];
  for (int rounds = 0; all || rounds < 64; rounds++) {
    ssize_t g;
    if (s->rgot < sizeof(ns_hdr)) {
      g = rt_socket_recv(s->fd, (char *)&s->rh + s->rgot, sizeof(ns_hdr) - s->rgot);
    } else {
      g = rt_socket_recv(s->fd, s->dst, s->left);
    }
    if (g == 0) return 0;
    if (g < 0) {
      int e = errno;
      if (s->bye && s->rgot == 0) {   /* the peer said goodbye: its close is no fault */
        __atomic_store_n(&s->gone, 1, __ATOMIC_RELEASE);
        return 0;
      }
      if (s->rgot >= sizeof(ns_hdr) && s->rh.type == NS_DATA)
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: the connection from rank %d broke in the middle of a message "
                 "(%u of %u bytes of its piece at %u of message %llu on connection %u): %s", c->rank, L->peer,
                 s->rh.len - s->left, s->rh.len, s->rh.off, (unsigned long long)s->rh.seq, s->rh.conn,
                 e == ECONNRESET ? "closed by the peer (has its process exited?)" : strerror(e));
      else
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: the connection from rank %d %s%s: %s", c->rank, L->peer,
                 s->rgot ? "broke in the middle of a frame header" : "was lost",
                 s->rgot ? "" : " without a goodbye", e == ECONNRESET ? "closed by the peer (has its process exited?)"
                                                                      : strerror(e));
      return -1;
    }
    (*moved)++;
    if (s->rgot < sizeof(ns_hdr)) {
      s->rgot += (size_t)g;
      if (s->rgot < sizeof(ns_hdr)) continue;
      ns_hdr *h = &s->rh;
      ns_hdr_wire(h);   /* to host order */
      if (h->type == NS_DATA && s->bye) {   /* after its own goodbye, a socket carries nothing */
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent a piece after its goodbye (connection %u, message "
                 "%llu)", c->rank, L->peer, h->conn, (unsigned long long)h->seq);
        return -1;
      } else if (h->type == NS_DATA) {
        net_piece p = {h->conn, h->off, h->len, h->total, h->seq, h->remote_off, NULL, 0};
        s->dst = sink->where(sink->arg, l, &p);
        if (!s->dst) return -1;
        s->left = h->len;
      } else if (h->type == NS_CREDIT) {
        if (sink->credit(sink->arg, l, (int)h->conn, h->seq)) return -1;
        s->rgot = 0;
        continue;
      } else if (h->type == NS_BYE) {
        s->bye = 1;
        /* The link's goodbye once every socket has said it: pieces travel
         * on all of them, so one socket's goodbye can overtake another's
         * last piece. */
        int all = 1;
        for (int k = 0; k < c->nsocks; k++) all &= c->links[l].s[k].bye;
        if (all) sink->bye(sink->arg, l);
        s->rgot = 0;
        continue;
      } else {
        LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d sent a frame of %s type %u", c->rank, L->peer,
                 frame_name(h->type), h->type);
        return -1;
      }
    } else {
      s->dst += g;
      s->left -= (uint32_t)g;
    }
    if (s->left == 0) {   /* the piece is in */
      ns_hdr *h = &s->rh;
      net_piece p = {h->conn, h->off, h->len, h->total, h->seq, h->remote_off, NULL, 0};
      c->received += h->len;
      s->rgot = 0;
      if (sink->landed(sink->arg, l, &p)) return -1;
    }
  }
  return 0;
}

/* A socket whose sending failed: moot when its peer has said goodbye and
 * only credits were left (the socket is dropped), else the link's fault
 * (logged; -1). */
static int tx_failed(sctx *c, const slink *L, sock *s, int e) {
  if (s->bye && only_credits(s)) {   /* credits for a peer that has left */
    __atomic_store_n(&s->gone, 1, __ATOMIC_RELEASE);
    return 0;
  }
  if (!s->bye)
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: cannot send to rank %d: %s", c->rank, L->peer,
             e == EPIPE || e == ECONNRESET ? "the connection was closed (has its process exited?)" : strerror(e));
  else
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d has destroyed its communicator, and this rank still "
             "sends to it", c->rank, L->peer);
  return -1;
}

int ns_progress(void *ctx, const net_sink *sink, int *failed) {
  sctx *c = ctx;
  if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return -1;
  int moved = 0, n = 0;
  for (int l = 0; l < c->nlinks; l++) {
    slink *L = &c->links[l];
    /* Owed credits go out on socket 0, in order. */
    sock *s0 = &L->s[0];
    for (int i = 0; i < L->nrecv && ns_live(s0) && !s0->bye; i++) {   /* a peer that said goodbye sends no more */
      if (!L->dirty[i] || ns_queued(s0) == QCAP) continue;
      ns_hdr h = {NS_CREDIT, (uint32_t)i, 0, 0, 0, 0, L->credit[i], 0};
      enqueue(c, l, s0, &h, NULL);
      L->dirty[i] = 0;
    }
    for (int k = 0; k < c->nsocks; k++)
      if (ns_live(&L->s[k])) c->pfd[n++] = (struct pollfd){.fd = L->s[k].fd, .events = POLLIN};
  }
  if (n && poll(c->pfd, n, 0) < 0 && errno != EINTR) return -1;
  n = 0;
  for (int l = 0; l < c->nlinks; l++) {
    slink *L = &c->links[l];
    for (int k = 0; k < c->nsocks; k++) {
      sock *s = &L->s[k];
      if (!ns_live(s)) continue;
      short ev = c->pfd[n++].revents;
      /* What came in first: a goodbye there makes a failed send below the
       * orderly end it is. */
      if ((ev & (POLLIN | POLLHUP | POLLERR)) && rx(c, l, s, sink, &moved, 0) < 0) {
        *failed = l;
        return -1;
      }
      if (!ns_live(s)) continue;   /* the peer said goodbye and closed */
      if (!c->ntx && ns_queued(s) && tx(c, s, &moved) < 0) __atomic_store_n(&s->txerr, errno ? errno : EIO, __ATOMIC_RELEASE);
      int e = __atomic_load_n(&s->txerr, __ATOMIC_ACQUIRE);
      /* A failed send may have met a peer that has said goodbye after
       * frames still waiting here (it closes after a short wait for this
       * rank, which may have been stalled longer): everything received is
       * taken first, so that its messages arrive and its goodbye makes the
       * failure the orderly end it is. */
      if (e && !s->bye && rx(c, l, s, sink, &moved, 1) < 0) {
        *failed = l;
        return -1;
      }
      if (!ns_live(s)) continue;
      if (e && tx_failed(c, L, s, e) < 0) {
        *failed = l;
        return -1;
      }
    }
  }
  return moved;
}

int ns_pending(void *ctx) {
  sctx *c = ctx;
  for (int l = 0; l < c->nlinks; l++)
    for (int k = 0; k < c->nsocks; k++) {
      const sock *s = &c->links[l].s[k];
      if (ns_live(s) && !__atomic_load_n(&s->txerr, __ATOMIC_ACQUIRE) && ns_queued(s)) return 1;
    }
  return 0;
}

int ns_pollfds(void *ctx, struct pollfd *fds, int max) {
  sctx *c = ctx;
  int n = 0;
  for (int l = 0; l < c->nlinks; l++)
    for (int k = 0; k < c->nsocks && n < max; k++) {
      sock *s = &c->links[l].s[k];
      if (ns_live(s)) fds[n++] = (struct pollfd){.fd = s->fd, .events = POLLIN | (!c->ntx && ns_queued(s) ? POLLOUT : 0)};
    }
  return n;
}

void ns_stats(void *ctx, uint64_t *sent, uint64_t *received) {
  sctx *c = ctx;
  *sent = __atomic_load_n(&c->sent, __ATOMIC_RELAXED);
  *received = c->received;
}

/* A sender thread: writes its links' sockets while they have frames;
 * polls for NET_SPIN_US after the last one, then sleeps on its eventfd
 * (enqueue wakes it); waits for room with poll when every socket with
 * frames would block.  A socket whose send fails is left to the proxy
 * (txerr); an abort or the stop ends the thread. */
static void *tx_main(void *arg) {
  stx *t = arg;
  sctx *c = t->c;
  struct pollfd *fds = calloc((size_t)c->nlinks * c->nsocks + 1, sizeof *fds);
  int64_t last = rt_time_ns();
  while (fds && !__atomic_load_n(&c->tx_stop, __ATOMIC_ACQUIRE) && !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
    int moved = 0, nb = 0, work = 0, busy = 0;
    for (int l = t->id; l < c->nlinks; l += c->ntx)
      for (int k = 0; k < c->nsocks; k++) {
        sock *s = &c->links[l].s[k];
        if (!ns_live(s) || __atomic_load_n(&s->txerr, __ATOMIC_ACQUIRE) || !ns_queued(s)) continue;
        work = 1;
        if (!take_writer(s)) {   /* the proxy writes a small frame: look again at once */
          busy = 1;
          continue;
        }
        int r = tx(c, s, &moved);
        if (r < 0) __atomic_store_n(&s->txerr, errno ? errno : EIO, __ATOMIC_RELEASE);
        __atomic_store_n(&s->writer, 0, __ATOMIC_RELEASE);
        if (r == 0 && ns_queued(s)) fds[1 + nb++] = (struct pollfd){.fd = s->fd, .events = POLLOUT};
      }
    int64_t now = rt_time_ns();
    if (moved) {
      last = now;
      continue;
    }
    if (busy || (!nb && now - last < c->spin_ns)) {
      sched_yield();
      continue;
    }
    /* Blocked on every socket with frames, or idle past the spin: sleep
     * until a socket has room, a frame is queued, or 100 ms pass. */
    __atomic_store_n(&t->sleeping, 1, __ATOMIC_SEQ_CST);
    int fresh = 0;
    for (int l = t->id; l < c->nlinks && !fresh && !work; l += c->ntx)
      for (int k = 0; k < c->nsocks; k++) fresh |= ns_live(&c->links[l].s[k]) && ns_queued(&c->links[l].s[k]) > 0;
    if (!fresh) {
      fds[0] = (struct pollfd){.fd = t->wake_fd, .events = POLLIN};
      if (poll(fds, 1 + nb, 100) > 0 && fds[0].revents) {
        uint64_t v;
        ssize_t r = read(t->wake_fd, &v, sizeof v);
        (void)r;
      }
    }
    __atomic_store_n(&t->sleeping, 0, __ATOMIC_SEQ_CST);
    if (!nb) last = rt_time_ns() - c->spin_ns + 50000;   /* after a wake, spin a little before sleeping again */
  }
  free(fds);
  return NULL;
}

bt_result ns_tx_start(sctx *c) {
  if (c->ntx > c->nlinks) c->ntx = c->nlinks;
  if (!c->ntx) return BT_OK;
  c->tx = calloc((size_t)c->ntx, sizeof *c->tx);
  if (!c->tx) {
    c->ntx = 0;
    return BT_ERR_NOMEM;
  }
  for (int i = 0; i < c->ntx; i++) c->tx[i] = (stx){.c = c, .id = i, .wake_fd = -1};
  for (int i = 0; i < c->ntx; i++) {
    stx *t = &c->tx[i];
    t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int e = t->wake_fd < 0 ? errno : pthread_create(&t->th, NULL, tx_main, t);
    if (e) {
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: cannot start a sender thread: %s", c->rank, strerror(e));
      ns_tx_stop(c);
      return BT_ERR_SYSTEM;
    }
    t->started = 1;
  }
  return BT_OK;
}

void ns_tx_stop(sctx *c) {
  if (!c->tx) return;
  __atomic_store_n(&c->tx_stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < c->ntx; i++) {
    stx *t = &c->tx[i];
    if (t->started) {
      uint64_t one = 1;
      ssize_t w = write(t->wake_fd, &one, sizeof one);
      (void)w;
      pthread_join(t->th, NULL);
    }
    if (t->wake_fd >= 0) close(t->wake_fd);
  }
  free(c->tx);
  c->tx = NULL;
  c->ntx = 0;   /* what is left, the proxy writes (the goodbyes at close) */
}
