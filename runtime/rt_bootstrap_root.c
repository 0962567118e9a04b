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

/* Waits for fd to be ready for `events`; maps the outcome. */
static bs_io wait_fd(int fd, short events, int64_t deadline, int abort_fd) {
  struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = abort_fd, .events = POLLIN}};
  int n = rt_socket_poll(p, abort_fd >= 0 ? 2 : 1, deadline);
  if (n == 0) return BS_IO_TIMEOUT;
  if (n < 0) return BS_IO_CLOSED;
  if (abort_fd >= 0 && p[1].revents) return BS_IO_ABORTED;
  return BS_IO_OK;
}

bs_io bs_write_all(int fd, const void *buf, size_t n, int64_t deadline, int abort_fd) {
  size_t done = 0;
  while (done < n) {
    struct iovec v = {(char *)buf + done, n - done};
    ssize_t k = rt_socket_send(fd, &v, 1);
    if (k < 0) return BS_IO_CLOSED;
    done += k;
    if (k == 0) {
      bs_io w = wait_fd(fd, POLLOUT, deadline, abort_fd);
      if (w != BS_IO_OK) return w;
    }
  }
  return BS_IO_OK;
}

bs_io bs_read_all(int fd, void *buf, size_t n, int64_t deadline, int abort_fd) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = rt_socket_recv(fd, (char *)buf + done, n - done);
    if (k < 0) return BS_IO_CLOSED;
    done += k;
    if (k == 0) {
      bs_io w = wait_fd(fd, POLLIN, deadline, abort_fd);
      if (w != BS_IO_OK) return w;
    }
  }
  return BS_IO_OK;
}

/* ---- the root thread ------------------------------------------------------ */

typedef struct root_conn {
  int fd;
  int rank;                              /* -1 until registered */
  unsigned char msg[BS_REGISTER_LEN];
  size_t got;
} root_conn;

typedef struct root {
  int listen_fd;
  uint64_t magic;
  int64_t timeout_ns;
  char where[RT_SOCKADDR_STRLEN];
  root_conn *conns;
  int nconns, cap;
  int nranks, registered;
  unsigned char *table;                  /* nranks wire addresses */
  int *conn_of;                          /* rank -> index in conns, or -1 */
  struct root *next;                     /* in `live`, while the thread runs */
} root;

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

static int live_has(uint64_t magic) {
  for (root *r = live; r; r = r->next)
    if (r->magic == magic) return 1;
  return 0;
}

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

/* Sends a reply (status, body) to one rank; failures are only logged. */
static void reply(root *r, int fd, uint32_t status, const void *body, size_t len) {
  unsigned char h[BS_REPLY_LEN];
  bs_put32(h, status);
  bs_put32(h + 4, (uint32_t)len);
  int64_t deadline = rt_time_ns() + r->timeout_ns;
  if (bs_write_all(fd, h, sizeof h, deadline, -1) != BS_IO_OK ||
      (len && bs_write_all(fd, body, len, deadline, -1) != BS_IO_OK))
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap root %s: could not send its reply to a rank: %s", r->where,
             strerror(errno));
}

/* Refuses one connection with a message; the rank logs it. */
static void refuse(root *r, root_conn *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(root *r, root_conn *c, const char *fmt, ...) {
  char msg[BS_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap root %s: refused a registration: %s", r->where, msg);
  reply(r, c->fd, BS_REPLY_INVALID, msg, strlen(msg));
  close(c->fd);
  c->fd = -1;
}

/* Tells every registered rank that the bootstrap failed, then gives up. */
static void fail_all(root *r, const char *msg) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap root %s: %s", r->where, msg);
  for (int i = 0; i < r->nconns; i++)
    if (r->conns[i].fd >= 0 && r->conns[i].rank >= 0)
      reply(r, r->conns[i].fd, BS_REPLY_MISSING, msg, strlen(msg));
}

/* "ranks 2, 5 and 7" for the ranks not yet registered (at most 8 named). */
static void missing_ranks(root *r, char *buf, size_t n) {
  int missing = r->nranks - r->registered, named = 0;
  size_t k = snprintf(buf, n, "%s", missing == 1 ? "rank" : "ranks");
  for (int i = 0; i < r->nranks && named < 8 && k < n; i++) {
    if (r->conn_of[i] >= 0) continue;
    named++;
    k += snprintf(buf + k, n - k, "%s %d", named == 1 ? "" : named == missing ? " and" : ",", i);
  }
  if (named < missing && k < n) snprintf(buf + k, n - k, " and %d more", missing - named);
}

/* Checks a complete registration message and records the rank. */
static void do_register(root *r, root_conn *c) {
  uint64_t magic = bs_get64(c->msg);
  int rank = (int)bs_get32(c->msg + 8), nranks = (int)bs_get32(c->msg + 12);
  rt_sockaddr a;
  if (magic != r->magic)
    return refuse(r, c, "the unique id's magic %016llx does not match this root's (an id from "
                  "another run, or a stale one?)", (unsigned long long)magic);
  if (nranks < 1 || nranks > BS_MAX_RANKS || rank < 0 || rank >= nranks)
    return refuse(r, c, "rank %d of %d is out of range", rank, nranks);
  if (r->nranks && nranks != r->nranks)
    return refuse(r, c, "rank %d says there are %d ranks, but the first rank to register said %d",
                  rank, nranks, r->nranks);
  if (rt_socket_unpack(c->msg + 16, &a) != BT_OK)
    return refuse(r, c, "rank %d sent a malformed listen address", rank);
  if (!r->nranks) {
    r->table = calloc(nranks, RT_SOCKADDR_WIRE);
    r->conn_of = malloc(nranks * sizeof *r->conn_of);
    if (!r->table || !r->conn_of) return refuse(r, c, "the root is out of memory for %d ranks", nranks);
    for (int i = 0; i < nranks; i++) r->conn_of[i] = -1;
    r->nranks = nranks;
  }
  if (r->conn_of[rank] >= 0)
    return refuse(r, c, "rank %d registered twice (two processes were given the same rank)", rank);
  r->conn_of[rank] = (int)(c - r->conns);
  c->rank = rank;
  memcpy(r->table + (size_t)rank * RT_SOCKADDR_WIRE, c->msg + 16, RT_SOCKADDR_WIRE);
  r->registered++;
  char s[RT_SOCKADDR_STRLEN];
  LOG_TRACE(RT_SUB_BOOTSTRAP, "bootstrap root %s: rank %d/%d registered at %s (%d of %d)", r->where,
            rank, nranks, rt_socket_str(&a, s, sizeof s), r->registered, nranks);
}

/* Reads what one connection has sent; returns -1 when a registered rank
 * closed its connection before the table went out. */
static int serve(root *r, root_conn *c) {
  if (c->rank >= 0) {                      /* registered: only EOF can come */
    unsigned char junk[16];
    return rt_socket_recv(c->fd, junk, sizeof junk) < 0 ? -1 : 0;
  }
  ssize_t k = rt_socket_recv(c->fd, c->msg + c->got, sizeof c->msg - c->got);
  if (k < 0) {                             /* a stranger hung up: forget it */
    close(c->fd);
    c->fd = -1;
    return 0;
  }
  c->got += k;
  if (c->got == sizeof c->msg) do_register(r, c);
  return 0;
}

/* Sends every rank the table; the bootstrap is then in the ranks' hands. */
static void send_table(root *r) {
  for (int i = 0; i < r->nranks; i++)
    reply(r, r->conns[r->conn_of[i]].fd, BS_REPLY_OK, r->table, (size_t)r->nranks * RT_SOCKADDR_WIRE);
  LOG_INFO(RT_SUB_BOOTSTRAP, "bootstrap root %s: all %d ranks registered", r->where, r->nranks);
}

static void root_free(root *r) {
  for (int i = 0; i < r->nconns; i++)
    if (r->conns[i].fd >= 0) close(r->conns[i].fd);
  close(r->listen_fd);
  free(r->conns);
  free(r->table);
  free(r->conn_of);
  free(r);
}

/* The thread: waits without limit for the first rank, then at most the
 * bootstrap timeout for each next one; a registered rank that hangs up
 * fails the whole bootstrap at once. */
static void *root_main(void *arg) {
  root *r = arg;
  struct pollfd *p = NULL;
  int64_t deadline = -1;
  char msg[BS_ERRMSG_MAX], missing[256];
  for (;;) {
    if (r->nranks && r->registered == r->nranks) { send_table(r); break; }
    struct pollfd *np = realloc(p, (r->nconns + 1) * sizeof *p);
    if (!np) { fail_all(r, "out of memory"); break; }
    p = np;
    p[0] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
    for (int i = 0; i < r->nconns; i++)
      p[i + 1] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
    int n = rt_socket_poll(p, r->nconns + 1, deadline);
    if (n == 0) {
      missing_ranks(r, missing, sizeof missing);
      snprintf(msg, sizeof msg, "%s of %d did not register within %lld s (BATON_BOOTSTRAP_TIMEOUT); "
               "did every rank call rt_bootstrap_init with this id?", missing, r->nranks,
               (long long)(r->timeout_ns / 1000000000));
      fail_all(r, msg);
      break;
    }
    if (n < 0) { snprintf(msg, sizeof msg, "poll failed: %s", strerror(errno)); fail_all(r, msg); break; }
    int dead = -1;
    for (int i = 0; i < r->nconns && dead < 0; i++) {
      if (!p[i + 1].revents || r->conns[i].fd < 0) continue;
      if (serve(r, &r->conns[i]) < 0) dead = r->conns[i].rank;
      else if (r->conns[i].rank >= 0) deadline = rt_time_ns() + r->timeout_ns;
    }
    if (dead >= 0) {
      snprintf(msg, sizeof msg, "rank %d closed its connection to the root before all %d ranks "
               "registered (did it exit or crash?)", dead, r->nranks);
      fail_all(r, msg);
      break;
    }
    if (p[0].revents) {
      int fd;
      if (rt_socket_accept(r->listen_fd, &fd) != BT_OK) { fail_all(r, "accept failed"); break; }
      if (fd < 0) continue;
      if (r->nconns == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        root_conn *nc = realloc(r->conns, cap * sizeof *nc);
        if (!nc) { close(fd); fail_all(r, "out of memory"); break; }
        r->conns = nc;
        r->cap = cap;
      }
      r->conns[r->nconns++] = (root_conn){.fd = fd, .rank = -1};
    }
  }
  free(p);
  live_remove(r);
  root_free(r);
  return NULL;
}

/* ---- the unique id -------------------------------------------------------- */

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
  root *r = calloc(1, sizeof *r);
  if (!r) return BT_ERR_NOMEM;
  bt_result res = rt_socket_listen(&bind_to, 4096, &r->listen_fd);
  if (res) {
    if (*rt_param_str(RT_PARAM_COMM_ID))
      LOG_WARN(RT_SUB_BOOTSTRAP, "BATON_COMM_ID=%s: the bootstrap root cannot listen there",
               rt_param_str(RT_PARAM_COMM_ID));
    free(r);
    return res;
  }
  if (adv.sa.sa_family == AF_INET) adv.in4.sin_port = bind_to.in4.sin_port;
  else adv.in6.sin6_port = bind_to.in6.sin6_port;
  r->magic = magic;
  r->timeout_ns = bs_timeout_ns();
  rt_socket_str(&adv, r->where, sizeof r->where);

  unsigned char *b = (unsigned char *)id->bytes;
  memcpy(b, id_tag, BS_ID_TAG_LEN);
  bs_put64(b + BS_ID_TAG_LEN, magic);
  rt_socket_pack(&adv, b + BS_ID_TAG_LEN + 8);

  char where[RT_SOCKADDR_STRLEN];
  memcpy(where, r->where, sizeof where);   /* r belongs to the thread once it runs */
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
    close(r->listen_fd);
    free(r);
    memset(id, 0, sizeof *id);
    return BT_ERR_SYSTEM;
  }
  LOG_INFO(RT_SUB_BOOTSTRAP, "bootstrap root listening at %s", where);
  return BT_OK;
}
