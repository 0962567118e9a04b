/* rt_bootstrap_root.c -- the unique id and the root thread that collects every rank's address. */
#include "rt_bootstrap_int.h"
#include "rt_log.h"
#include "rt_param.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char id_tag[BS_ID_TAG_LEN] = {'B', 'T', 'N', '1'};

int64_t bs_timeout_ns(void) {
  int64_t s = rt_param_int(RT_PARAM_BOOTSTRAP_TIMEOUT);
  if (s < 1) s = 1;
  if (s > 1000000) s = 1000000;
  return s * 1000000000;
}

bt_result bs_id_decode(const rt_unique_id *id, const char *who, uint64_t *magic, rt_sockaddr *root) {
  const unsigned char *b = (const unsigned char *)id->bytes;
  int zeros = 1;
  for (size_t i = BS_ID_TAG_LEN + 8 + RT_SOCKADDR_WIRE; i < sizeof id->bytes; i++) zeros &= !b[i];
  if (memcmp(b, id_tag, BS_ID_TAG_LEN) || !zeros ||
      rt_socket_unpack(b + BS_ID_TAG_LEN + 8, root) != BT_OK) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: the unique id is not one made by rt_bootstrap_unique_id "
             "(was it passed on intact, all 128 bytes?)", who);
    return BT_ERR_INVALID;
  }
  *magic = bs_get64(b + BS_ID_TAG_LEN);
  return BT_OK;
}

/* ---- the root thread ------------------------------------------------------ */

/* A connection that has not registered yet. */
typedef struct pend {
  int fd;
  int64_t since;                         /* accepted at (rt_time_ns) */
  size_t got;
  unsigned char msg[BS_REGISTER_LEN];
  char addr[RT_SOCKADDR_STRLEN];
} pend;

struct root {
  rt_listener l;
  uint64_t magic;
  int64_t timeout_ns;
  char where[RT_SOCKADDR_STRLEN];
  char who[RT_SOCKADDR_STRLEN + 32];     /* "bootstrap root <where>" */
  pend *pend;                            /* unregistered connections, in no order */
  int npend, cappend;
  int nranks, registered;
  unsigned char *table;                  /* nranks wire addresses */
  int *fd_of;                            /* rank -> its connection, or -1 */
  int64_t deadline;                      /* for the next registration, -1 before the first */
  int state;                             /* 0 collecting, 1 table sent, -1 failed */
  struct root *next;                     /* in `live`, while the thread runs */
};

/* The roots this process runs, so that a rank living in the same process
 * can wait until its root has said everything it has to say: the process
 * may exit as soon as init returns, and would take the root's last replies
 * to the other ranks with it.  A forked child runs none of its parent's
 * roots (threads do not survive fork), so it starts with an empty list:
 * a launcher that makes the id and then forks its ranks must not leave
 * them waiting for a root that is not theirs. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cv = PTHREAD_COND_INITIALIZER;
static root *live;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void live_fork_prepare(void) { pthread_mutex_lock(&live_mu); }
static void live_fork_parent(void) { pthread_mutex_unlock(&live_mu); }
static void live_fork_child(void) {
  live = NULL;                           /* the parent's roots stay the parent's */
  pthread_mutex_unlock(&live_mu);
}
static void live_at_fork(void) { pthread_atfork(live_fork_prepare, live_fork_parent, live_fork_child); }

/* Whether a root with this magic runs (live_mu held). */
static int live_has(uint64_t magic) {
  for (root *r = live; r; r = r->next)
    if (r->magic == magic) return 1;
  return 0;
}

/* Takes r off the live list and wakes bs_root_wait. */
static void live_remove(root *r) {
  pthread_mutex_lock(&live_mu);
  for (root **pp = &live; *pp; pp = &(*pp)->next)
    if (*pp == r) { *pp = r->next; break; }
  pthread_cond_broadcast(&live_cv);
  pthread_mutex_unlock(&live_mu);
}

void bs_root_wait(uint64_t magic, int64_t deadline) {
  pthread_mutex_lock(&live_mu);
  while (live_has(magic) && rt_time_ns() < deadline) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10000000;                /* re-check the deadline every 10 ms */
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    pthread_cond_timedwait(&live_cv, &live_mu, &ts);
  }
  pthread_mutex_unlock(&live_mu);
}

/* Sends a reply (status, body) to one registered rank, waiting at most the
 * bootstrap timeout; failures are only logged. */
static void reply(root *r, int fd, uint32_t status, const void *body, size_t len) {
  unsigned char h[BS_REPLY_LEN];
  bs_put32(h, status);
  bs_put32(h + 4, (uint32_t)len);
  int64_t deadline = rt_time_ns() + r->timeout_ns;
  if (bs_write_all(fd, h, sizeof h, deadline, -1) != BS_IO_OK ||
      (len && bs_write_all(fd, body, len, deadline, -1) != BS_IO_OK))
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: could not send its reply to a rank: %s", r->who, strerror(errno));
}

/* Removes pending connection i (closing it unless its fd moved on). */
static void pend_remove(root *r, int i) {
  if (r->pend[i].fd >= 0) close(r->pend[i].fd);
  r->pend[i] = r->pend[--r->npend];
}

/* Refuses pending connection i with a message it can show (one try, no
 * waiting: whoever does not read it loses it), and closes it.  loud: a
 * rank of this job made a mistake (always logged); else a stranger (logged
 * sparingly). */
static void refuse(root *r, int i, int loud, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void refuse(root *r, int i, int loud, const char *fmt, ...) {
  char msg[BS_ERRMSG_MAX];
  unsigned char h[BS_REPLY_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pend *c = &r->pend[i];
  if (loud) LOG_WARN(RT_SUB_BOOTSTRAP, "%s: refused a registration from %s: %s", r->who, c->addr, msg);
  else rt_listener_dropped(&r->l, c->addr, msg);
  bs_put32(h, BS_REPLY_INVALID);
  bs_put32(h + 4, (uint32_t)strlen(msg));
  struct iovec v[2] = {{h, sizeof h}, {msg, strlen(msg)}};
  if (rt_socket_send(c->fd, v, 2) < 0) { /* gone already: nothing to tell */ }
  pend_remove(r, i);
}

/* Tells every registered rank that the bootstrap failed, then gives up. */
static void fail_all(root *r, const char *msg) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "%s: %s", r->who, msg);
  for (int i = 0; i < r->nranks; i++)
    if (r->fd_of[i] >= 0) reply(r, r->fd_of[i], BS_REPLY_MISSING, msg, strlen(msg));
  r->state = -1;
}

/* "ranks 2, 5 and 7" for the ranks not yet registered (at most 8 named). */
static void missing_ranks(root *r, char *buf, size_t n) {
  int missing = r->nranks - r->registered, named = 0;
  size_t k = snprintf(buf, n, "%s", missing == 1 ? "rank" : "ranks");
  for (int i = 0; i < r->nranks && named < 8 && k < n; i++) {
    if (r->fd_of[i] >= 0) continue;
    named++;
    k += snprintf(buf + k, n - k, "%s %d", named == 1 ? "" : named == missing ? " and" : ",", i);
  }
  if (named < missing && k < n) snprintf(buf + k, n - k, " and %d more", missing - named);
}

/* Checks the complete registration of pending connection i: records the
 * rank (the connection leaves the pending list) or refuses it. */
static void do_register(root *r, int i) {
  pend *c = &r->pend[i];
  uint64_t magic = bs_get64(c->msg);
  uint32_t urank = bs_get32(c->msg + 8), unranks = bs_get32(c->msg + 12);
  rt_sockaddr a;
  if (magic != r->magic)
    return refuse(r, i, 0, "the unique id's magic %016llx does not match this root's (an id from "
                  "another run, a stale one, or not a baton rank at all?)", (unsigned long long)magic);
  if (unranks < 1 || unranks > BS_MAX_RANKS || urank >= unranks)
    return refuse(r, i, 1, "rank %u of %u is out of range (nranks 1..%d)", urank, unranks, BS_MAX_RANKS);
  int rank = (int)urank, nranks = (int)unranks;
  if (r->nranks && nranks != r->nranks)
    return refuse(r, i, 1, "rank %d says there are %d ranks, but the first rank to register said %d",
                  rank, nranks, r->nranks);
  if (rt_socket_unpack(c->msg + 16, &a) != BT_OK)
    return refuse(r, i, 1, "rank %d sent a malformed listen address", rank);
  if (!r->nranks) {
    r->table = calloc(nranks, RT_SOCKADDR_WIRE);
    r->fd_of = malloc(nranks * sizeof *r->fd_of);
    if (!r->table || !r->fd_of) {
      free(r->table);
      free(r->fd_of);
      r->table = NULL;
      r->fd_of = NULL;
      return refuse(r, i, 1, "the root is out of memory for %d ranks", nranks);
    }
    for (int k = 0; k < nranks; k++) r->fd_of[k] = -1;
    r->nranks = nranks;
  }
  if (r->fd_of[rank] >= 0)
    return refuse(r, i, 1, "rank %d registered twice (two processes were given the same rank)", rank);
  r->fd_of[rank] = c->fd;
  c->fd = -1;
  memcpy(r->table + (size_t)rank * RT_SOCKADDR_WIRE, c->msg + 16, RT_SOCKADDR_WIRE);
  r->registered++;
  r->deadline = rt_time_ns() + r->timeout_ns;
  char s[RT_SOCKADDR_STRLEN];
  LOG_TRACE(RT_SUB_BOOTSTRAP, "%s: rank %d/%d registered from %s, listening at %s (%d of %d)", r->who,
            rank, nranks, c->addr, rt_socket_str(&a, s, sizeof s), r->registered, nranks);
  pend_remove(r, i);
}

/* Reads what pending connection i has sent; it may register, be refused
 * or hang up (then it is removed).  Returns 1 when i was removed. */
static int serve_pending(root *r, int i) {
  pend *c = &r->pend[i];
  for (;;) {
    ssize_t k = rt_socket_recv(c->fd, c->msg + c->got, sizeof c->msg - c->got);
    if (k < 0) {                           /* a stranger hung up: forget it */
      rt_listener_dropped(&r->l, c->addr, "it hung up before registering");
      pend_remove(r, i);
      return 1;
    }
    if (k == 0) return 0;
    if ((c->got += k) == sizeof c->msg) {
      do_register(r, i);
      return 1;
    }
  }
}

/* Reads what registered `rank` has sent (nothing is expected); returns -1
 * when it hung up. */
static int serve_rank(root *r, int rank) {
  unsigned char junk[512];
  for (;;) {
    ssize_t k = rt_socket_recv(r->fd_of[rank], junk, sizeof junk);
    if (k < 0) return -1;
    if (k == 0) return 0;
  }
}

/* Closes the pending connections older than the authentication time. */
static void expire(root *r, int64_t now) {
  char why[160];
  for (int i = r->npend - 1; i >= 0; i--)
    if (now - r->pend[i].since >= r->l.auth_ns) {
      snprintf(why, sizeof why, "no registration within %lld ms (BATON_BOOTSTRAP_AUTH_MS)",
               (long long)(r->l.auth_ns / 1000000));
      rt_listener_dropped(&r->l, r->pend[i].addr, why);
      pend_remove(r, i);
    }
}

/* Closes the oldest pending connection, after a last look at what it has
 * sent (a rank whose registration is there registers).  Returns 0 when
 * there was none. */
static int evict(void *owner) {
  root *r = owner;
  while (r->npend) {
    int old = 0;
    for (int i = 1; i < r->npend; i++)
      if (r->pend[i].since < r->pend[old].since) old = i;
    if (serve_pending(r, old)) continue;   /* registered, refused or gone: look again */
    char why[160];
    snprintf(why, sizeof why, "the oldest of %d connections waiting to register, closed for a newer one "
             "(BATON_BOOTSTRAP_MAX_PENDING)", r->npend);
    rt_listener_dropped(&r->l, r->pend[old].addr, why);
    pend_remove(r, old);
    return 1;
  }
  return 0;
}

/* Takes a new connection into the pending list, making room if it is full. */
static int add_pending(void *owner, int fd, const rt_sockaddr *peer) {
  root *r = owner;
  if (r->state) return -1;
  while (r->npend >= r->l.max_pending && evict(r)) {}
  if (r->npend == r->cappend) {
    int cap = r->cappend ? 2 * r->cappend : 16;
    pend *np = realloc(r->pend, cap * sizeof *np);
    if (!np) return -1;
    r->pend = np;
    r->cappend = cap;
  }
  pend *c = &r->pend[r->npend++];
  memset(c, 0, sizeof *c);
  c->fd = fd;
  c->since = rt_time_ns();
  if (peer) rt_socket_str(peer, c->addr, sizeof c->addr);
  else snprintf(c->addr, sizeof c->addr, "(a local socket)");
  return 0;
}

/* Sends every rank the table; the bootstrap is then in the ranks' hands. */
static void send_table(root *r) {
  for (int i = 0; i < r->nranks; i++)
    reply(r, r->fd_of[i], BS_REPLY_OK, r->table, (size_t)r->nranks * RT_SOCKADDR_WIRE);
  LOG_INFO(RT_SUB_BOOTSTRAP, "%s: all %d ranks registered", r->who, r->nranks);
  r->state = 1;
}

/* One round after a wake-up: pending connections (p_pend: their poll
 * entries, NULL: all), registered ranks, the deadline.  Sets r->state. */
static void root_round(root *r, const struct pollfd *p_pend, int npoll_pend, const struct pollfd *p_rank,
                       const int *rank_of, int npoll_rank) {
  char msg[BS_ERRMSG_MAX], missing[256];
  /* Pending connection k is p_pend[k]: a removal moves the last entry
   * into its place, so walking down keeps the two in step. */
  for (int k = npoll_pend - 1; k >= 0; k--)
    if (k < r->npend && (!p_pend || p_pend[k].revents)) serve_pending(r, k);
  for (int k = 0; k < npoll_rank; k++) {
    if (p_rank && !p_rank[k].revents) continue;
    int rank = rank_of[k];
    if (serve_rank(r, rank) < 0) {
      char s[RT_SOCKADDR_STRLEN];
      rt_sockaddr a;
      if (rt_socket_unpack(r->table + (size_t)rank * RT_SOCKADDR_WIRE, &a) != BT_OK) memset(&a, 0, sizeof a);
      snprintf(msg, sizeof msg, "rank %d (listening at %s) closed its connection to the root before all %d "
               "ranks registered (did it exit or crash?)", rank, rt_socket_str(&a, s, sizeof s), r->nranks);
      close(r->fd_of[rank]);
      r->fd_of[rank] = -1;
      fail_all(r, msg);
      return;
    }
  }
  if (r->nranks && r->registered == r->nranks) { send_table(r); return; }
  if (r->deadline >= 0 && rt_time_ns() >= r->deadline) {
    missing_ranks(r, missing, sizeof missing);
    snprintf(msg, sizeof msg, "%s of %d did not register within %lld s (BATON_BOOTSTRAP_TIMEOUT); "
             "did every rank call rt_bootstrap_init with this id?", missing, r->nranks,
             (long long)(r->timeout_ns / 1000000000));
    fail_all(r, msg);
  }
}

/* A root for `magic` listening on listen_fd (-1: none, for the fuzz seam);
 * where names it in messages.  NULL when out of memory. */
static root *root_new(uint64_t magic, int listen_fd, const char *where) {
  root *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->magic = magic;
  r->timeout_ns = bs_timeout_ns();
  r->deadline = -1;
  snprintf(r->where, sizeof r->where, "%s", where);
  snprintf(r->who, sizeof r->who, "bootstrap root %s", where);
  rt_listener_init(&r->l, listen_fd, r->who, RT_SUB_BOOTSTRAP);
  return r;
}

/* Closes every connection and the listener and frees r. */
static void root_free(root *r) {
  for (int i = 0; i < r->npend; i++) close(r->pend[i].fd);
  for (int i = 0; i < r->nranks; i++)
    if (r->fd_of[i] >= 0) close(r->fd_of[i]);
  rt_listener_close(&r->l);
  free(r->pend);
  free(r->table);
  free(r->fd_of);
  free(r);
}

/* The thread: waits without limit for the first rank, then at most the
 * bootstrap timeout for each next one; a registered rank that hangs up
 * fails the whole bootstrap at once.  Strangers cost it a bounded number
 * of descriptors for a bounded time each. */
static void *root_main(void *arg) {
  root *r = arg;
  struct pollfd *p = NULL;
  int *rank_of = NULL;
  int cap = 0;
  char msg[BS_ERRMSG_MAX];
  while (!r->state) {
    int64_t now = rt_time_ns();
    expire(r, now);
    int need = 1 + r->npend + r->registered;
    if (need > cap) {
      struct pollfd *np = realloc(p, need * sizeof *p);
      if (np) p = np;
      int *nr = realloc(rank_of, need * sizeof *nr);
      if (nr) rank_of = nr;
      if (!np || !nr) { fail_all(r, "out of memory"); break; }
      cap = need;
    }
    int n = 0, listening = rt_listener_pollable(&r->l, now);
    if (listening) p[n++] = (struct pollfd){.fd = r->l.fd, .events = POLLIN};
    int first_pend = n;
    int64_t wake = r->deadline;
    for (int i = 0; i < r->npend; i++) {
      p[n++] = (struct pollfd){.fd = r->pend[i].fd, .events = POLLIN};
      wake = bs_earlier(wake, r->pend[i].since + r->l.auth_ns);
    }
    int first_rank = n;
    for (int i = 0; i < r->nranks; i++)
      if (r->fd_of[i] >= 0) { rank_of[n - first_rank] = i; p[n++] = (struct pollfd){.fd = r->fd_of[i], .events = POLLIN}; }
    if (!listening) wake = bs_earlier(wake, r->l.quiet_until);
    int k = rt_socket_poll(p, n, wake);
    if (k < 0) { snprintf(msg, sizeof msg, "poll failed: %s", strerror(errno)); fail_all(r, msg); break; }
    root_round(r, p + first_pend, first_rank - first_pend, p + first_rank, rank_of, n - first_rank);
    if (r->state) break;
    if (listening && p[0].revents && rt_listener_accept(&r->l, r, add_pending, evict) < 0) {
      fail_all(r, "its listening socket failed");
      break;
    }
  }
  free(p);
  free(rank_of);
  live_remove(r);
  root_free(r);
  return NULL;
}

/* ---- the fuzz seam -------------------------------------------------------- */

root *bs_root_engine_new(uint64_t magic) { return root_new(magic, -1, "(engine)"); }

int bs_root_engine_add(root *r, int fd) { return add_pending(r, fd, NULL); }

int bs_root_engine_pump(root *r) {
  if (!r->state) {
    expire(r, rt_time_ns());
    root_round(r, NULL, r->npend, NULL, NULL, 0);
    /* registered ranks: look at all */
    for (int i = 0; i < r->nranks && !r->state; i++)
      if (r->fd_of[i] >= 0 && serve_rank(r, i) < 0) {
        close(r->fd_of[i]);
        r->fd_of[i] = -1;
        fail_all(r, "a rank hung up");
      }
  }
  return r->state;
}

void bs_root_engine_free(root *r) { root_free(r); }

/* ---- the unique id -------------------------------------------------------- */

/* A random job magic from getrandom; BT_ERR_SYSTEM (logged) when it fails. */
static bt_result random_magic(uint64_t *m) {
  size_t got = 0;
  while (got < sizeof *m) {
    ssize_t k = getrandom((char *)m + got, sizeof *m - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "getrandom failed: %s", strerror(errno));
      return BT_ERR_SYSTEM;
    }
    got += k;
  }
  return BT_OK;
}

/* Where the root listens: BATON_COMM_ID, else an interface and port 0.
 * *advertised is what goes into the id (never a wildcard address). */
static bt_result root_address(rt_sockaddr *bind_to, rt_sockaddr *advertised) {
  const char *comm = rt_param_str(RT_PARAM_COMM_ID);
  const char *ifspec = rt_param_str(RT_PARAM_SOCKET_IFNAME);
  char what[300];
  if (!*comm) {
    CHECK(rt_socket_pick_interface(ifspec, AF_UNSPEC, bind_to, NULL));
    *advertised = *bind_to;
    return BT_OK;
  }
  snprintf(what, sizeof what, "BATON_COMM_ID=%s", comm);
  CHECK(rt_socket_parse(comm, what, bind_to));
  *advertised = *bind_to;
  int any = bind_to->sa.sa_family == AF_INET ? bind_to->in4.sin_addr.s_addr == htonl(INADDR_ANY)
          : IN6_IS_ADDR_UNSPECIFIED(&bind_to->in6.sin6_addr);
  if (any) {                     /* listen everywhere, advertise one interface */
    CHECK(rt_socket_pick_interface(ifspec, bind_to->sa.sa_family, advertised, NULL));
    if (advertised->sa.sa_family == AF_INET) advertised->in4.sin_port = bind_to->in4.sin_port;
    else advertised->in6.sin6_port = bind_to->in6.sin6_port;
  }
  return BT_OK;
}

bt_result rt_bootstrap_unique_id(rt_unique_id *id) {
  memset(id, 0, sizeof *id);
  rt_sockaddr bind_to, adv;
  uint64_t magic;
  CHECK(root_address(&bind_to, &adv));
  CHECK(random_magic(&magic));
  int listen_fd;
  bt_result res = rt_socket_listen(&bind_to, BS_LISTEN_BACKLOG, &listen_fd);
  if (res) {
    if (*rt_param_str(RT_PARAM_COMM_ID))
      LOG_WARN(RT_SUB_BOOTSTRAP, "BATON_COMM_ID=%s: the bootstrap root cannot listen there",
               rt_param_str(RT_PARAM_COMM_ID));
    return res;
  }
  if (adv.sa.sa_family == AF_INET) adv.in4.sin_port = bind_to.in4.sin_port;
  else adv.in6.sin6_port = bind_to.in6.sin6_port;
  char where[RT_SOCKADDR_STRLEN];
  rt_socket_str(&adv, where, sizeof where);
  root *r = root_new(magic, listen_fd, where);
  if (!r) { close(listen_fd); return BT_ERR_NOMEM; }

  unsigned char *b = (unsigned char *)id->bytes;
  memcpy(b, id_tag, BS_ID_TAG_LEN);
  bs_put64(b + BS_ID_TAG_LEN, magic);
  rt_socket_pack(&adv, b + BS_ID_TAG_LEN + 8);

  pthread_once(&live_once, live_at_fork);
  pthread_mutex_lock(&live_mu);
  r->next = live;
  live = r;
  pthread_mutex_unlock(&live_mu);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, root_main, r);
  pthread_attr_destroy(&attr);
  if (rc) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "cannot start the bootstrap root thread: %s", strerror(rc));
    live_remove(r);
    root_free(r);
    memset(id, 0, sizeof *id);
    return BT_ERR_SYSTEM;
  }
  LOG_INFO(RT_SUB_BOOTSTRAP, "bootstrap root listening at %s", where);
  return BT_OK;
}
