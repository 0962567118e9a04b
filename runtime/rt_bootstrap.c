/* rt_bootstrap.c -- a rank's side of the bootstrap: registration, connections, the message engine, collectives. */
#define _GNU_SOURCE  /* pipe2 */
#include "rt_bootstrap_int.h"
#include "rt_log.h"
#include "rt_param.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tags: user tags are 0..2^31-1; the collectives use the top bit, a kind
 * and a per-kind sequence number, so that ranks calling different
 * collectives are told so instead of timing out. */
#define TAG_INTERNAL 0x80000000u
enum { KIND_ALLGATHER = 1, KIND_BARRIER = 2, NKINDS };

/* A complete message that no receive has taken yet. */
typedef struct msg {
  struct msg *next;
  int peer;
  uint32_t tag;
  size_t len;
  char *data;
} msg;

/* A connection a peer opened to send to us; we only read from it. */
typedef struct conn {
  int fd;                 /* -1 once ended */
  int peer;               /* -1 until its hello arrived */
  int ended, midway, err; /* the peer hung up; inside a message; errno other than EOF */
  unsigned char hdr[BS_HEADER_LEN];   /* hello or message header being read */
  size_t hgot;
  int body, direct;       /* reading a body; into the posted receive's buffer */
  uint32_t tag;
  size_t len, got;
  char *buf;
} conn;

struct rt_bootstrap {
  int rank, nranks;
  uint64_t magic;
  int64_t timeout_ns;
  rt_sockaddr *addrs;     /* every rank's listen address */
  int listen_fd;
  int wake[2];            /* rt_bootstrap_abort writes here */
  int aborted;            /* set atomically by rt_bootstrap_abort */
  int broken;             /* an operation failed: every later one fails */
  int *out;               /* peer -> the socket we send to it on, or -1 */
  conn **in;              /* accepted connections */
  int nin, capin;
  conn **from;            /* peer -> its connection to us, or NULL */
  msg *head, *tail;       /* unclaimed messages, in arrival order */
  uint32_t seq[NKINDS];
};

/* One send and/or one receive in progress (the unit progress() drives). */
typedef struct op {
  char what[80];          /* "allgather #2 step 1", "message tag 7", for errors */
  int speer, sfd;         /* -1: no send */
  unsigned char pre[BS_HELLO_LEN + BS_HEADER_LEN];
  size_t prelen, sent, slen;
  const char *sdata;
  int rpeer, rdone;       /* -1: no receive */
  uint32_t rtag;
  char *rdata;
  size_t rlen;
} op;

static uint32_t internal_tag(int kind, uint32_t seq) {
  return TAG_INTERNAL | (uint32_t)kind << 24 | (seq & 0xffffff);
}

static const char *tag_str(uint32_t tag, char *buf, size_t n) {
  if (!(tag & TAG_INTERNAL)) snprintf(buf, n, "message tag %u", tag);
  else snprintf(buf, n, "%s #%u", ((tag >> 24) & 0x7f) == KIND_ALLGATHER ? "allgather" : "barrier",
                tag & 0xffffff);
  return buf;
}

/* Shuts every connection down so that peers blocked on this rank fail now
 * rather than at their timeout; the sockets are closed by free. */
static void break_all(rt_bootstrap *bs) {
  bs->broken = 1;
  for (int p = 0; p < bs->nranks; p++)
    if (bs->out[p] >= 0) shutdown(bs->out[p], SHUT_RDWR);
  for (int i = 0; i < bs->nin; i++)
    if (bs->in[i]->fd >= 0) shutdown(bs->in[i]->fd, SHUT_RDWR);
}

/* Logs "bootstrap rank R/N: ...", breaks bs and returns r. */
static bt_result fail(rt_bootstrap *bs, bt_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bt_result fail(rt_bootstrap *bs, bt_result r, const char *fmt, ...) {
  char m[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: %s", bs->rank, bs->nranks, m);
  break_all(bs);
  return r;
}

static void enqueue(rt_bootstrap *bs, int peer, uint32_t tag, size_t len, char *data) {
  msg *m = malloc(sizeof *m);
  if (!m) { free(data); return; }     /* reported as a missing message */
  *m = (msg){NULL, peer, tag, len, data};
  if (bs->tail) bs->tail->next = m; else bs->head = m;
  bs->tail = m;
}

static int queued(const rt_bootstrap *bs, int peer, uint32_t tag) {
  for (const msg *m = bs->head; m; m = m->next)
    if (m->peer == peer && m->tag == tag) return 1;
  return 0;
}

/* Claims the first queued message matching o's receive, if any. */
static bt_result take(rt_bootstrap *bs, op *o) {
  char a[48], b[48];
  msg *prev = NULL;
  for (msg *m = bs->head; m; prev = m, m = m->next) {
    if (m->peer != o->rpeer) continue;
    if (m->tag != o->rtag) {
      if ((m->tag & TAG_INTERNAL) && (o->rtag & TAG_INTERNAL))
        return fail(bs, BT_ERR_INVALID, "%s: rank %d sent %s instead: the ranks called different "
                    "collectives, or called them in a different order", o->what, o->rpeer,
                    tag_str(m->tag, a, sizeof a));
      continue;
    }
    if (m->len != o->rlen)
      return fail(bs, BT_ERR_INVALID, "%s: rank %d sent %zu bytes for %s, but this rank expects %zu",
                  o->what, o->rpeer, m->len, tag_str(m->tag, b, sizeof b), o->rlen);
    if (m->len) memcpy(o->rdata, m->data, m->len);
    if (prev) prev->next = m->next; else bs->head = m->next;
    if (bs->tail == m) bs->tail = prev;
    free(m->data);
    free(m);
    o->rdone = 1;
    return BT_OK;
  }
  return BT_OK;
}

/* The connection has ended: the peer exited, aborted or reset it. */
static void conn_end(conn *c, int err) {
  close(c->fd);
  c->fd = -1;
  c->ended = 1;
  c->midway = c->body || c->hgot;
  c->err = err == ECONNRESET ? 0 : err;
  if (!c->direct) free(c->buf);
  c->buf = NULL;
}

/* A complete hello: adopt the connection, or drop a stranger. */
static void hello(rt_bootstrap *bs, conn *c) {
  uint64_t magic = bs_get64(c->hdr);
  int rank = (int)bs_get32(c->hdr + 8), nranks = (int)bs_get32(c->hdr + 12);
  const char *why = magic != bs->magic ? "its magic differs (another run?)"
                  : nranks != bs->nranks || rank < 0 || rank >= nranks ? "its rank is out of range"
                  : bs->from[rank] ? "that rank is already connected" : NULL;
  if (why) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: dropped a connection claiming to be rank %d/%d: %s",
             bs->rank, bs->nranks, rank, nranks, why);
    close(c->fd);
    c->fd = -1;
    return;
  }
  c->peer = rank;
  bs->from[rank] = c;
}

/* Reads everything a connection has for us now; complete messages go to
 * o's buffer (when they match its receive) or to the queue. */
static void read_conn(rt_bootstrap *bs, conn *c, op *o) {
  while (c->fd >= 0) {
    if (!c->body) {
      size_t need = c->peer < 0 ? BS_HELLO_LEN : BS_HEADER_LEN;
      ssize_t k = rt_socket_recv(c->fd, c->hdr + c->hgot, need - c->hgot);
      if (k < 0) { conn_end(c, errno); return; }
      if (k == 0) return;
      if ((c->hgot += k) < need) continue;
      c->hgot = 0;
      if (c->peer < 0) { hello(bs, c); continue; }
      c->tag = bs_get32(c->hdr);
      c->len = (size_t)bs_get64(c->hdr + 8);
      c->got = 0;
      c->body = 1;
      c->direct = o->rpeer == c->peer && !o->rdone && c->tag == o->rtag && c->len == o->rlen &&
                  !queued(bs, c->peer, c->tag);
      c->buf = c->direct ? o->rdata : c->len ? malloc(c->len) : NULL;
      if (c->len && !c->buf) { conn_end(c, ENOMEM); return; }
    }
    if (c->got < c->len) {
      ssize_t k = rt_socket_recv(c->fd, c->buf + c->got, c->len - c->got);
      if (k < 0) { conn_end(c, errno); return; }
      if (k == 0) return;
      if ((c->got += k) < c->len) continue;
    }
    if (c->direct) o->rdone = 1;
    else enqueue(bs, c->peer, c->tag, c->len, c->buf);
    c->body = c->direct = 0;
    c->buf = NULL;
  }
}

static bt_result accept_new(rt_bootstrap *bs) {
  for (;;) {
    int fd;
    if (rt_socket_accept(bs->listen_fd, &fd) != BT_OK)
      return fail(bs, BT_ERR_SYSTEM, "accepting a connection failed");
    if (fd < 0) return BT_OK;
    conn *c = calloc(1, sizeof *c);
    if (c && bs->nin == bs->capin) {
      int cap = bs->capin ? 2 * bs->capin : 8;
      conn **n = realloc(bs->in, cap * sizeof *n);
      if (n) { bs->in = n; bs->capin = cap; }
    }
    if (!c || bs->nin == bs->capin) {
      free(c);
      close(fd);
      return fail(bs, BT_ERR_NOMEM, "out of memory for connections");
    }
    *c = (conn){.fd = fd, .peer = -1};
    bs->in[bs->nin++] = c;
  }
}

/* Writes as much of o's send as the socket takes now. */
static bt_result push(rt_bootstrap *bs, op *o) {
  while (o->sent < o->prelen + o->slen) {
    struct iovec v[2];
    int n = 0;
    if (o->sent < o->prelen) v[n++] = (struct iovec){o->pre + o->sent, o->prelen - o->sent};
    size_t off = o->sent > o->prelen ? o->sent - o->prelen : 0;
    if (o->slen > off) v[n++] = (struct iovec){(char *)o->sdata + off, o->slen - off};
    ssize_t k = rt_socket_send(o->sfd, v, n);
    if (k < 0)
      return fail(bs, BT_ERR_SYSTEM, "%s: the connection to rank %d broke while sending to it "
                  "(%zu of %zu bytes sent): %s; did it exit, crash or abort?", o->what, o->speer,
                  o->sent, o->prelen + o->slen, strerror(errno));
    if (k == 0) return BT_OK;
    o->sent += k;
  }
  return BT_OK;
}

/* Describes what o still waits for, for the timeout message. */
static void pending_str(const rt_bootstrap *bs, const op *o, char *buf, size_t n) {
  size_t k = 0;
  if (o->rpeer >= 0 && !o->rdone) {
    const conn *c = bs->from[o->rpeer];
    if (!c) k += snprintf(buf, n, "waiting for rank %d, which has not connected to this rank", o->rpeer);
    else if (c->direct) k += snprintf(buf, n, "waiting for rank %d (%zu of %zu bytes received)",
                                      o->rpeer, c->got, c->len);
    else k += snprintf(buf, n, "waiting for rank %d (nothing received)", o->rpeer);
  }
  if (o->speer >= 0 && o->sent < o->prelen + o->slen && k < n)
    snprintf(buf + k, n - k, "%ssending to rank %d (%zu of %zu bytes sent; is it stuck?)", k ? "; " : "",
             o->speer, o->sent, o->prelen + o->slen);
}

/* Drives o until its send is handed to the kernel and its receive has
 * arrived, accepting connections and queueing other messages meanwhile.
 * Fails on timeout, abort, or when the awaited peer hangs up. */
static bt_result progress(rt_bootstrap *bs, op *o) {
  int64_t deadline = rt_time_ns() + bs->timeout_ns;
  struct pollfd *p = NULL;
  conn **pc = NULL;
  bt_result res = BT_OK;
  for (;;) {
    if (__atomic_load_n(&bs->aborted, __ATOMIC_ACQUIRE)) {
      res = fail(bs, BT_ERR_SYSTEM, "%s: aborted (rt_bootstrap_abort)", o->what);
      break;
    }
    if (o->rpeer >= 0 && !o->rdone && (res = take(bs, o))) break;
    if (o->speer >= 0 && (res = push(bs, o))) break;
    int sdone = o->speer < 0 || o->sent == o->prelen + o->slen;
    int rdone = o->rpeer < 0 || o->rdone;
    if (sdone && rdone) break;
    const conn *rc = o->rpeer >= 0 ? bs->from[o->rpeer] : NULL;
    if (!rdone && rc && rc->ended) {
      res = fail(bs, BT_ERR_SYSTEM, "%s: rank %d closed its connection%s while this rank waited for it%s%s; "
                 "did it exit, crash or abort?", o->what, o->rpeer, rc->midway ? " in the middle of a message" : "",
                 rc->err ? ": " : "", rc->err ? strerror(rc->err) : "");
      break;
    }
    struct pollfd *np = realloc(p, (bs->nin + 3) * sizeof *p);
    conn **npc = realloc(pc, (bs->nin + 3) * sizeof *pc);
    if (np) p = np;
    if (npc) pc = npc;
    if (!np || !npc) { res = fail(bs, BT_ERR_NOMEM, "%s: out of memory", o->what); break; }
    int n = 0;
    p[n++] = (struct pollfd){.fd = bs->wake[0], .events = POLLIN};
    p[n++] = (struct pollfd){.fd = bs->listen_fd, .events = POLLIN};
    if (!sdone) p[n++] = (struct pollfd){.fd = o->sfd, .events = POLLOUT};
    int first = n;
    for (int i = 0; i < bs->nin; i++)
      if (bs->in[i]->fd >= 0) { pc[n] = bs->in[i]; p[n++] = (struct pollfd){.fd = bs->in[i]->fd, .events = POLLIN}; }
    int k = rt_socket_poll(p, n, deadline);
    if (k == 0) {
      char what[256];
      pending_str(bs, o, what, sizeof what);
      res = fail(bs, BT_ERR_SYSTEM, "%s: timed out after %lld s (BATON_BOOTSTRAP_TIMEOUT): %s", o->what,
                 (long long)(bs->timeout_ns / 1000000000), what);
      break;
    }
    if (k < 0) { res = fail(bs, BT_ERR_SYSTEM, "%s: poll failed: %s", o->what, strerror(errno)); break; }
    for (int i = first; i < n; i++)
      if (p[i].revents) read_conn(bs, pc[i], o);
    if (p[1].revents && (res = accept_new(bs))) break;
  }
  free(p);
  free(pc);
  return res;
}

/* Checks that bs may run another operation. */
static bt_result usable(rt_bootstrap *bs, const char *what) {
  if (!bs) return BT_ERR_INVALID;
  if (bs->broken || __atomic_load_n(&bs->aborted, __ATOMIC_ACQUIRE)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: %s: an earlier operation failed or was aborted",
             bs->rank, bs->nranks, what);
    bs->broken = 1;
    return BT_ERR_SYSTEM;
  }
  return BT_OK;
}

/* Sets up o's send of (tag, data) to peer, connecting on first use. */
static bt_result start_send(rt_bootstrap *bs, op *o, int peer, uint32_t tag, const void *data, size_t len) {
  o->speer = peer;
  o->prelen = 0;
  if (bs->out[peer] < 0) {
    char what[160];
    snprintf(what, sizeof what, "bootstrap rank %d/%d: %s: rank %d", bs->rank, bs->nranks, o->what, peer);
    bt_result r = rt_socket_connect(&bs->addrs[peer], rt_time_ns() + bs->timeout_ns, bs->wake[0], what,
                                    &bs->out[peer]);
    if (r) { break_all(bs); return r; }
    bs_put64(o->pre, bs->magic);
    bs_put32(o->pre + 8, (uint32_t)bs->rank);
    bs_put32(o->pre + 12, (uint32_t)bs->nranks);
    o->prelen = BS_HELLO_LEN;
  }
  o->sfd = bs->out[peer];
  bs_put32(o->pre + o->prelen, tag);
  bs_put32(o->pre + o->prelen + 4, 0);
  bs_put64(o->pre + o->prelen + 8, (uint64_t)len);
  o->prelen += BS_HEADER_LEN;
  o->sdata = data;
  o->slen = len;
  o->sent = 0;
  return BT_OK;
}

/* Bad arguments are the caller's mistake: logged, but bs stays usable. */
static bt_result bad_args(const rt_bootstrap *bs, const char *fn, int peer, int tag, size_t bytes, const void *data) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: %s: bad arguments: peer %d (must be 0..%d), tag %d "
           "(must be 0..2^31-1), %zu bytes at %p", bs->rank, bs->nranks, fn, peer, bs->nranks - 1, tag, bytes, data);
  return BT_ERR_INVALID;
}

static void op_init(op *o, const char *fmt, ...) {
  memset(o, 0, sizeof *o);
  o->speer = o->rpeer = o->sfd = -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->what, sizeof o->what, fmt, ap);
  va_end(ap);
}

int rt_bootstrap_rank(const rt_bootstrap *bs) { return bs->rank; }
int rt_bootstrap_nranks(const rt_bootstrap *bs) { return bs->nranks; }

bt_result rt_bootstrap_send(rt_bootstrap *bs, int peer, int tag, const void *data, size_t bytes) {
  CHECK(usable(bs, "send"));
  if (peer < 0 || peer >= bs->nranks || tag < 0 || (bytes && !data))
    return bad_args(bs, "send", peer, tag, bytes, data);
  if (peer == bs->rank) {            /* to itself: straight into the queue */
    char *copy = bytes ? malloc(bytes) : NULL;
    if (bytes && !copy) return fail(bs, BT_ERR_NOMEM, "send to itself: out of memory for %zu bytes", bytes);
    if (bytes) memcpy(copy, data, bytes);
    enqueue(bs, peer, (uint32_t)tag, bytes, copy);
    return BT_OK;
  }
  op o;
  op_init(&o, "send of message tag %d to rank %d", tag, peer);
  CHECK(start_send(bs, &o, peer, (uint32_t)tag, data, bytes));
  return progress(bs, &o);
}

bt_result rt_bootstrap_recv(rt_bootstrap *bs, int peer, int tag, void *data, size_t bytes) {
  CHECK(usable(bs, "recv"));
  if (peer < 0 || peer >= bs->nranks || tag < 0 || (bytes && !data))
    return bad_args(bs, "recv", peer, tag, bytes, data);
  op o;
  op_init(&o, "receive of message tag %d from rank %d", tag, peer);
  o.rpeer = peer;
  o.rtag = (uint32_t)tag;
  o.rdata = data;
  o.rlen = bytes;
  if (peer == bs->rank) {
    CHECK(take(bs, &o));
    if (!o.rdone)
      return fail(bs, BT_ERR_INVALID, "%s: this rank sent itself no such message", o.what);
    return BT_OK;
  }
  return progress(bs, &o);
}

bt_result rt_bootstrap_allgather(rt_bootstrap *bs, void *data, size_t bytes_per_rank) {
  CHECK(usable(bs, "allgather"));
  if (bytes_per_rank && !data) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: allgather: data is NULL", bs->rank, bs->nranks);
    return BT_ERR_INVALID;
  }
  uint32_t seq = bs->seq[KIND_ALLGATHER]++;
  uint32_t tag = internal_tag(KIND_ALLGATHER, seq);
  int n = bs->nranks, r = bs->rank;
  char *d = data;
  for (int s = 0; s < n - 1; s++) {  /* pass slice r-s on, take slice r-s-1 */
    op o;
    op_init(&o, "allgather #%u step %d", seq, s);
    size_t give = (size_t)((r - s + n) % n) * bytes_per_rank, get = (size_t)((r - s - 1 + 2 * n) % n) * bytes_per_rank;
    CHECK(start_send(bs, &o, (r + 1) % n, tag, d + give, bytes_per_rank));
    o.rpeer = (r - 1 + n) % n;
    o.rtag = tag;
    o.rdata = d + get;
    o.rlen = bytes_per_rank;
    CHECK(progress(bs, &o));
  }
  return BT_OK;
}

bt_result rt_bootstrap_barrier(rt_bootstrap *bs) {
  CHECK(usable(bs, "barrier"));
  uint32_t seq = bs->seq[KIND_BARRIER]++;
  uint32_t tag = internal_tag(KIND_BARRIER, seq);
  int n = bs->nranks, r = bs->rank, round = 0;
  for (int dist = 1; dist < n; dist <<= 1, round++) {  /* dissemination */
    op o;
    op_init(&o, "barrier #%u round %d", seq, round);
    CHECK(start_send(bs, &o, (r + dist) % n, tag, NULL, 0));
    o.rpeer = (r - dist + n) % n;
    o.rtag = tag;
    CHECK(progress(bs, &o));
  }
  return BT_OK;
}

void rt_bootstrap_abort(rt_bootstrap *bs) {
  if (!bs) return;
  __atomic_store_n(&bs->aborted, 1, __ATOMIC_RELEASE);
  char c = 1;
  ssize_t k = write(bs->wake[1], &c, 1);   /* full pipe: already woken */
  (void)k;
}

void rt_bootstrap_free(rt_bootstrap *bs) {
  if (!bs) return;
  for (int p = 0; p < bs->nranks && bs->out; p++)
    if (bs->out[p] >= 0) close(bs->out[p]);
  for (int i = 0; i < bs->nin; i++) {
    conn *c = bs->in[i];
    if (c->fd >= 0) close(c->fd);
    if (!c->direct) free(c->buf);
    free(c);
  }
  for (msg *m = bs->head, *next; m; m = next) {
    next = m->next;
    free(m->data);
    free(m);
  }
  if (bs->listen_fd >= 0) close(bs->listen_fd);
  if (bs->wake[0] >= 0) close(bs->wake[0]);
  if (bs->wake[1] >= 0) close(bs->wake[1]);
  free(bs->in);
  free(bs->from);
  free(bs->out);
  free(bs->addrs);
  free(bs);
}

/* ---- init ------------------------------------------------------------------ */

/* This rank's listen address: the BATON_SOCKET_IFNAME interface, else the
 * local address of its connection to the root (one the root can reach). */
static bt_result own_address(rt_bootstrap *bs, int root_fd, const rt_sockaddr *root, rt_sockaddr *a) {
  const char *spec = rt_param_str(RT_PARAM_SOCKET_IFNAME);
  if (*spec) return rt_socket_pick_interface(spec, root->sa.sa_family, a, NULL);
  socklen_t len = sizeof *a;
  memset(a, 0, sizeof *a);
  if (getsockname(root_fd, &a->sa, &len)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: getsockname failed: %s", bs->rank, bs->nranks,
             strerror(errno));
    return BT_ERR_SYSTEM;
  }
  if (a->sa.sa_family == AF_INET) a->in4.sin_port = 0;
  else a->in6.sin6_port = 0;
  return BT_OK;
}

/* Says what went wrong in a conversation with the root. */
static bt_result root_io_failed(rt_bootstrap *bs, bs_io io, const char *root, const char *doing) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: %s the root at %s: %s", bs->rank, bs->nranks, doing, root,
           io == BS_IO_TIMEOUT ? "timed out (BATON_BOOTSTRAP_TIMEOUT); did the process that created the id exit?"
           : io == BS_IO_ABORTED ? "aborted"
           : errno == ECONNRESET ? "the root closed the connection (did the process that created the id exit?)"
           : strerror(errno));
  return BT_ERR_SYSTEM;
}

/* Registers with the root and receives the address table into bs->addrs. */
static bt_result join(rt_bootstrap *bs, const rt_sockaddr *root) {
  char where[RT_SOCKADDR_STRLEN], what[160], s[RT_SOCKADDR_STRLEN];
  rt_socket_str(root, where, sizeof where);
  snprintf(what, sizeof what, "bootstrap rank %d/%d: the root", bs->rank, bs->nranks);
  int64_t deadline = rt_time_ns() + bs->timeout_ns;
  int fd = -1;
  bt_result res = BT_OK;
  unsigned char reg[BS_REGISTER_LEN], rep[BS_REPLY_LEN];
  rt_sockaddr me;
  bs_io io;
  CHECK(rt_socket_connect(root, deadline, bs->wake[0], what, &fd));
  CHECK_GOTO(own_address(bs, fd, root, &me), res, out);
  CHECK_GOTO(rt_socket_listen(&me, 4096, &bs->listen_fd), res, out);
  LOG_TRACE(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: listening at %s", bs->rank, bs->nranks,
            rt_socket_str(&me, s, sizeof s));
  bs_put64(reg, bs->magic);
  bs_put32(reg + 8, (uint32_t)bs->rank);
  bs_put32(reg + 12, (uint32_t)bs->nranks);
  rt_socket_pack(&me, reg + 16);
  if ((io = bs_write_all(fd, reg, sizeof reg, deadline, bs->wake[0])) != BS_IO_OK) {
    res = root_io_failed(bs, io, where, "registering with");
    goto out;
  }
  /* The root reports missing ranks after the timeout: wait a little longer. */
  deadline = rt_time_ns() + bs->timeout_ns + 2000000000;
  if ((io = bs_read_all(fd, rep, sizeof rep, deadline, bs->wake[0])) != BS_IO_OK) {
    res = root_io_failed(bs, io, where, "waiting for the table of addresses from");
    goto out;
  }
  uint32_t status = bs_get32(rep), len = bs_get32(rep + 4);
  if (status != BS_REPLY_OK) {
    char text[BS_ERRMSG_MAX + 1] = "";
    if (len > BS_ERRMSG_MAX) len = BS_ERRMSG_MAX;
    if (bs_read_all(fd, text, len, deadline, bs->wake[0]) == BS_IO_OK) text[len] = 0;
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: the root at %s refused: %s", bs->rank, bs->nranks,
             where, text);
    res = status == BS_REPLY_INVALID ? BT_ERR_INVALID : BT_ERR_SYSTEM;
    goto out;
  }
  if (len != (uint64_t)bs->nranks * RT_SOCKADDR_WIRE) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: the root at %s sent a table of %u bytes, expected %zu",
             bs->rank, bs->nranks, where, len, (size_t)bs->nranks * RT_SOCKADDR_WIRE);
    res = BT_ERR_INTERNAL;
    goto out;
  }
  unsigned char *table = malloc(len);
  if (!table) { res = BT_ERR_NOMEM; goto out; }
  if ((io = bs_read_all(fd, table, len, deadline, bs->wake[0])) != BS_IO_OK) {
    free(table);
    res = root_io_failed(bs, io, where, "reading the table of addresses from");
    goto out;
  }
  for (int i = 0; i < bs->nranks && !res; i++)
    if (rt_socket_unpack(table + (size_t)i * RT_SOCKADDR_WIRE, &bs->addrs[i]) != BT_OK) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "bootstrap rank %d/%d: the root at %s sent a malformed address for rank %d",
               bs->rank, bs->nranks, where, i);
      res = BT_ERR_INTERNAL;
    }
  free(table);
out:
  close(fd);
  return res;
}

bt_result rt_bootstrap_init(rt_bootstrap **out, const rt_unique_id *id, int rank, int nranks) {
  *out = NULL;
  char who[64];
  snprintf(who, sizeof who, "bootstrap rank %d/%d", rank, nranks);
  if (nranks < 1 || nranks > BS_MAX_RANKS || rank < 0 || rank >= nranks) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: rank must be in 0..nranks-1 and nranks in 1..%d", who, BS_MAX_RANKS);
    return BT_ERR_INVALID;
  }
  uint64_t magic;
  rt_sockaddr root;
  CHECK(bs_id_decode(id, who, &magic, &root));
  rt_bootstrap *bs = calloc(1, sizeof *bs);
  if (!bs) return BT_ERR_NOMEM;
  bs->rank = rank;
  bs->nranks = nranks;
  bs->magic = magic;
  bs->timeout_ns = bs_timeout_ns();
  bs->listen_fd = bs->wake[0] = bs->wake[1] = -1;
  bs->addrs = calloc(nranks, sizeof *bs->addrs);
  bs->out = malloc(nranks * sizeof *bs->out);
  bs->from = calloc(nranks, sizeof *bs->from);
  bt_result res = BT_OK;
  if (!bs->addrs || !bs->out || !bs->from) { res = BT_ERR_NOMEM; goto fail; }
  for (int i = 0; i < nranks; i++) bs->out[i] = -1;
  if (pipe2(bs->wake, O_CLOEXEC | O_NONBLOCK)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: pipe failed: %s", who, strerror(errno));
    res = BT_ERR_SYSTEM;
    goto fail;
  }
  res = join(bs, &root);
  bs_root_wait(magic, rt_time_ns() + bs->timeout_ns);  /* its replies must outlive an early exit */
  if (res != BT_OK) goto fail;
  CHECK_GOTO(rt_bootstrap_barrier(bs), res, fail);
  LOG_INFO(RT_SUB_BOOTSTRAP, "%s: joined", who);
  *out = bs;
  return BT_OK;
fail:
  rt_bootstrap_free(bs);
  return res;
}
