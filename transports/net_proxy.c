/* net_proxy.c -- the network transport's proxy thread: watches the GPU's
 * FIFO words, hands new messages to the backend piece by piece, returns
 * consumed counts as credits, and sleeps when nothing moves. */
#define _GNU_SOURCE   /* ppoll */
#include "net.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rt_log.h"
#include "rt_socket.h"

void net_fault(net *n, bt_result e) {
  int none = 0;
  if (!__atomic_compare_exchange_n(&n->err, &none, (int)e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: the communicator is broken (%s): its kernels stop, its peers are told; "
           "destroy it", n->x.rank, bt_result_str(e));
  if (n->x.abort) *n->x.abort = 1;
  __sync_synchronize();
  n->be->abort(n->bctx);
}

/* Hands the backend what the GPU has posted on c since the last look:
 * every piece of each new message.  Returns how many pieces were taken,
 * or -1 on a fault (logged). */
static int post_sends(net *n, net_sconn *c) {
  uint64_t head = __atomic_load_n(c->head, __ATOMIC_ACQUIRE);
  int moved = 0;
  net_link *L = &n->links[c->link];
  while (c->posted < head) {
    if (L->bye) {
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: rank %d has destroyed its communicator, and this rank still sends "
               "to it (connection %d, message %llu)", n->x.rank, L->peer, c->idx, (unsigned long long)c->posted);
      return -1;
    }
    int slot = (int)(c->posted % (uint64_t)n->nslots);
    uint32_t len = __atomic_load_n(&c->lens[slot], __ATOMIC_RELAXED);
    if (len > (uint64_t)n->slot_bytes || c->posted - c->credited >= (uint64_t)n->nslots) {
      LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: message %llu to rank %d claims %u bytes in a %lld-byte slot with "
               "%llu messages unconsumed (internal error)", n->x.rank, (unsigned long long)c->posted, L->peer, len,
               (long long)n->slot_bytes, (unsigned long long)(c->posted - c->credited));
      return -1;
    }
    do {
      uint32_t take = len - c->next_off;
      if (take > n->piece) take = (uint32_t)n->piece;
      net_piece p = {.conn = (uint32_t)c->idx, .off = c->next_off, .len = take, .total = len, .seq = c->posted,
                     .remote_off = c->remote_fifo + (uint64_t)slot * n->slot_bytes + c->next_off,
                     .src = c->fifo + (int64_t)slot * n->slot_bytes + c->next_off,
                     .last = c->next_off + take == len};
      int r = n->be->post(n->bctx, c->link, &p);
      if (r < 0) return -1;
      if (r > 0) return moved;   /* the backend is full: later */
      moved++;
      c->next_off += take;
      __atomic_fetch_add(&n->moved_bytes[0], take, __ATOMIC_RELAXED);
    } while (c->next_off < len);
    c->next_off = 0;
    c->posted++;
  }
  return moved;
}

/* Sends back what the GPU has consumed on c since the last credit. */
static int post_credit(net *n, net_rconn *c) {
  uint64_t tail = __atomic_load_n(c->tail, __ATOMIC_ACQUIRE);
  if (tail == c->credit_sent) return 0;
  if (tail < c->credit_sent || tail > c->done) {
    LOG_WARN(RT_SUB_RUNTIME, "network: rank %d: the GPU says it consumed %llu messages from rank %d, %llu arrived "
             "(internal error)", n->x.rank, (unsigned long long)tail, n->links[c->link].peer,
             (unsigned long long)c->done);
    return -1;
  }
  if (n->be->credit(n->bctx, c->link, c->idx, tail) < 0) return -1;
  c->credit_sent = tail;
  return 1;
}

/* One round: sends, credits, the backend's progress (recorded in the
 * timeline, BATON_TRACE).  Returns what moved, or -1 on a fault. */
static int round_once(net *n, const net_sink *sink) {
  net_round r = {0};
  const int64_t t0 = n->trace ? rt_time_ns() : 0;
  const uint64_t sent = __atomic_load_n(&n->moved_bytes[0], __ATOMIC_RELAXED);
  const uint64_t received = __atomic_load_n(&n->moved_bytes[1], __ATOMIC_RELAXED);
  for (int i = 0; i < n->ns; i++) {
    int m = post_sends(n, &n->s[i]);
    if (m < 0) return -1;
    r.posted += m;
  }
  for (int i = 0; i < n->nr; i++) {
    int m = post_credit(n, &n->r[i]);
    if (m < 0) return -1;
    r.credits += m;
  }
  int failed = -1;
  if ((r.progress = n->be->progress(n->bctx, sink, &failed)) < 0) return -1;
  if (n->trace)
    net_trace_round(n->trace, t0, rt_time_ns(), &r, __atomic_load_n(&n->moved_bytes[0], __ATOMIC_RELAXED) - sent,
                    __atomic_load_n(&n->moved_bytes[1], __ATOMIC_RELAXED) - received);
  return r.posted + r.credits + r.progress;
}

static void drain(int fd) {
  uint64_t v;
  while (read(fd, &v, sizeof v) > 0) {
  }
}

/* Sleeps until the backend has something, a kick comes, or timeout_ns.
 * The descriptors watched grow with the backend's (every socket of every
 * link): where they filled the array, it doubles for the next nap (up to
 * NET_NAP_FDS_MAX), so that none is left to the nap's timeout. */
#define NET_NAP_FDS_MAX 65536
static void nap(net *n, int64_t timeout_ns) {
  struct pollfd few[64], *fds = n->pfds ? n->pfds : few;
  const int cap = n->pfds ? n->pfd_cap : 64;
  fds[0] = (struct pollfd){.fd = n->wake_fd, .events = POLLIN};
  int nfds = 1 + n->be->pollfds(n->bctx, fds + 1, cap - 1);
  struct timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
  const int64_t t0 = n->trace ? rt_time_ns() : 0;
  int r = ppoll(fds, nfds, &ts, NULL);   /* EINTR: one short nap less */
  if (r > 0 && fds[0].revents) drain(n->wake_fd);
  if (n->trace) net_trace_nap(n->trace, t0, rt_time_ns(), timeout_ns);
  if (nfds == cap && cap < NET_NAP_FDS_MAX) {   /* full: perhaps more were left out */
    struct pollfd *more = realloc(n->pfds, 2 * (size_t)cap * sizeof *more);
    if (more) n->pfds = more, n->pfd_cap = 2 * cap;
  }
}

/* Whether the GPU has published messages the backend has not all taken. */
static int unposted(net *n) {
  for (int i = 0; i < n->ns; i++)
    if (__atomic_load_n(n->s[i].head, __ATOMIC_ACQUIRE) > n->s[i].posted || n->s[i].next_off) return 1;
  return 0;
}

/* Stopping in order (not broken, not aborted): what the GPU has published
 * and what the backend has queued go out before the proxy leaves, for
 * NET_FLUSH_NS at most.  A rank whose last kernel has ended may still owe
 * its peers its last messages; destroyed at once, its peers saw the link
 * end without them. */
static void flush(net *n, const net_sink *sink) {
  const int64_t until = rt_time_ns() + NET_FLUSH_NS;
  while (rt_time_ns() < until && !(n->x.abort && *n->x.abort)) {
    int moved = round_once(n, sink);
    if (moved < 0) return;
    if (!moved && !unposted(n) && !(n->be->pending && n->be->pending(n->bctx))) return;
    if (!moved) nap(n, 100000);
  }
}

static void *proxy_main(void *arg) {
  net *n = arg;
  char name[16];   /* for debuggers, top -H, and the tests that find it */
  snprintf(name, sizeof name, "baton-net r%d", n->x.rank);
  pthread_setname_np(pthread_self(), name);
  const net_sink sink = n->sink;
  int64_t last = rt_time_ns(), sleep = 10000;
  int broken = 0;
  while (!__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE)) {
    if (broken || (n->x.abort && *n->x.abort)) {
      /* Broken or aborted: the links are dropped; wait for the stop. */
      if (!broken && !__atomic_load_n(&n->err, __ATOMIC_ACQUIRE)) n->be->abort(n->bctx);
      broken = 1;
      nap(n, 100000000);
      continue;
    }
    int moved = round_once(n, &sink);
    if (moved < 0) {
      net_fault(n, BT_ERR_REMOTE);
      broken = 1;
      continue;
    }
    int64_t now = rt_time_ns();
    if (moved) {
      last = now;
      sleep = 10000;
    } else if (now - last < n->spin_ns) {
      sched_yield();   /* polling: let a thread with work (another rank's proxy, the caller) have the core */
    } else {
      /* Idle: sleep, longer each time, up to BATON_NET_SLEEP_US; a launch
       * (tp kick) or anything arriving wakes the thread at once. */
      nap(n, sleep);
      last = rt_time_ns() - n->spin_ns + 50000;   /* after a wake, spin a little before sleeping again */
      sleep = sleep * 2 > n->sleep_ns ? n->sleep_ns : sleep * 2;
    }
  }
  if (!broken && !(n->x.abort && *n->x.abort)) flush(n, &sink);
  return NULL;
}

bt_result net_proxy_start(net *n) {
  n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (n->wake_fd < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "network: eventfd: %s", strerror(errno));
    return BT_ERR_SYSTEM;
  }
  int e = pthread_create(&n->thread, NULL, proxy_main, n);
  if (e) {
    LOG_WARN(RT_SUB_RUNTIME, "network: cannot start the proxy thread: %s", strerror(e));
    return BT_ERR_SYSTEM;
  }
  n->running = 1;
  return BT_OK;
}

void net_proxy_kick(net *n) {
  if (n->wake_fd < 0) return;
  uint64_t one = 1;
  ssize_t w = write(n->wake_fd, &one, sizeof one);
  (void)w;
}

void net_proxy_stop(net *n) {
  if (n->running) {
    __atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
    net_proxy_kick(n);
    pthread_join(n->thread, NULL);
    n->running = 0;
  }
  if (n->wake_fd >= 0) close(n->wake_fd);
  n->wake_fd = -1;
  free(n->pfds);
  n->pfds = NULL;
  n->pfd_cap = 0;
}
