/* rt_bootstrap.c -- a rank's side of the bootstrap: connections, the message engine, collectives (registration: rt_bootstrap_join.c). */
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

/* How long a rank waits for a peer that has not connected before it checks
 * that the peer still listens, and how long it waits for a message from a
 * peer whose process has closed its sockets. */
#define PROBE_NS 1000000000LL
#define GONE_GRACE_NS 1000000000LL

/* A complete message that no receive has taken yet. */
typedef struct msg {
  struct msg *next;
  int peer;
  uint32_t tag;
  size_t len;
  char *data;
} msg;

/* A connection a peer opened to send to us; we only read from it (and
 * answer its hello with BS_ACK).  peer -1: pending, not yet authenticated. */
typedef struct conn {
  int fd;                 /* -1 once ended */
  int peer;               /* -1 until its hello arrived */
  int64_t since;          /* accepted at (rt_time_ns) */
  char addr[RT_SOCKADDR_STRLEN];
  int ended, midway, err; /* the peer hung up; inside a message; errno other than EOF */
  unsigned char hdr[BS_HEADER_LEN];   /* hello or message header being read */
  size_t hgot;
  int body, direct;       /* reading a body; into the posted receive's buffer */
  uint32_t tag;
  size_t len, got;
  char *buf;
} conn;

/* The connection this rank sends to a peer on. */
enum { OUT_NONE, OUT_HELLO, OUT_RETRY, OUT_READY, OUT_GONE };
typedef struct outc {
  int fd;                 /* -1 unless HELLO or READY */
  int state;
  size_t hello_sent;      /* HELLO: bytes of the hello written */
  int tries;              /* hellos closed unanswered (a flood shed them) */
  int64_t retry_at;       /* RETRY: when to connect again */
  int64_t gone_at;        /* GONE: when the peer closed it */
  int busy;               /* a message is partly written */
  unsigned char *back;    /* what the peer sent back after BS_ACK: only its last words (BS_TAG_NOTE) */
  size_t backgot;
} outc;

/* One send and/or one receive in progress (the unit progress() drives). */
typedef struct op {
  char what[80];          /* "allgather #2 step 1", "message tag 7", for errors */
  int speer;              /* -1: no send */
  unsigned char pre[BS_HEADER_LEN];
  size_t sent, slen;
  const char *sdata;
  int rpeer, rdone;       /* -1: no receive */
  uint32_t rtag;
  char *rdata;
  size_t rlen;
} op;

/* The tag of a collective's messages: TAG_INTERNAL, its kind, its sequence number (24 bits). */
static uint32_t internal_tag(int kind, uint32_t seq) {
  return TAG_INTERNAL | (uint32_t)kind << 24 | (seq & 0xffffff);
}

/* "message tag 7", "allgather #2", "an error report": what a tag carries, in buf. */
static const char *tag_str(uint32_t tag, char *buf, size_t n) {
  int kind = (tag >> 24) & 0x7f;
  if (!(tag & TAG_INTERNAL)) snprintf(buf, n, "message tag %u", tag);
  else if (tag == BS_TAG_NOTE) snprintf(buf, n, "an error report");
  else snprintf(buf, n, "%s #%u", kind == KIND_ALLGATHER ? "allgather" : kind == KIND_BARRIER ? "barrier"
                : "an unknown collective", tag & 0xffffff);
  return buf;
}

/* "rank 3 (at 10.0.0.2:41234)": a peer and the address its connection came from. */
static const char *peer_str(const rt_bootstrap *bs, int peer, const char *addr, char *buf, size_t n) {
  char a[RT_SOCKADDR_STRLEN];
  if (!addr) addr = peer >= 0 && peer < bs->nranks ? rt_socket_str(&bs->addrs[peer], a, sizeof a) : "?";
  snprintf(buf, n, "rank %d (at %s)", peer, addr);
  return buf;
}

/* Shuts every connection down so that peers blocked on this rank fail now
 * rather than at their timeout, after telling each peer it sends to why (a
 * message of BS_TAG_NOTE, where no other message is half written), and
 * stops listening so that a peer checking on this rank finds it gone.  The
 * sockets are closed by free. */
static void break_all(rt_bootstrap *bs, const char *why) {
  if (bs->broken) return;
  bs->broken = 1;
  if (bs->cause[0]) why = bs->cause;
  size_t len = why ? strlen(why) : 0;
  if (len > BS_ERRMSG_MAX) len = BS_ERRMSG_MAX;
  unsigned char h[BS_HEADER_LEN];
  bs_put32(h, BS_TAG_NOTE);
  bs_put32(h + 4, 0);
  bs_put64(h + 8, len);
  for (int p = 0; p < bs->nranks; p++) {
    outc *o = &bs->out[p];
    if (o->state == OUT_READY && !o->busy && len) {
      struct iovec v[2] = {{h, sizeof h}, {(char *)why, len}};
      if (rt_socket_send(o->fd, v, 2) < 0) { /* it is gone: nothing to tell */ }
    }
    if (o->fd >= 0) shutdown(o->fd, SHUT_RDWR);
  }
  for (int i = 0; i < bs->nin; i++) {
    conn *c = bs->in[i];
    if (c->fd < 0) continue;
    if (c->peer >= 0 && len) {           /* the way back carries nothing else */
      struct iovec v[2] = {{h, sizeof h}, {(char *)why, len}};
      if (rt_socket_send(c->fd, v, 2) < 0) { /* it is gone */ }
    }
    shutdown(c->fd, SHUT_RDWR);
  }
  if (bs->l.fd >= 0) {
    close(bs->l.fd);
    bs->l.fd = -1;
  }
}

/* Logs "bootstrap rank R/N: ...", breaks bs and returns r. */
static bt_result fail(rt_bootstrap *bs, bt_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bt_result fail(rt_bootstrap *bs, bt_result r, const char *fmt, ...) {
  char m[BS_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  int k = snprintf(m, sizeof m, "%s: ", bs->who);
  vsnprintf(m + k, sizeof m - k, fmt, ap);
  va_end(ap);
  LOG_WARN(RT_SUB_BOOTSTRAP, "%s", m);
  break_all(bs, m);
  return r;
}

/* Records why a peer's connection must end (the first reason only); the
 * running operation fails with it. */
static void fault(rt_bootstrap *bs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fault(rt_bootstrap *bs, const char *fmt, ...) {
  if (bs->fault[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(bs->fault, sizeof bs->fault, fmt, ap);
  va_end(ap);
}

/* A peer's last words arrived: kept, for when an operation finds that
 * peer gone. */
static void note(rt_bootstrap *bs, int peer, const char *text, size_t len) {
  if (!bs->notes && !(bs->notes = calloc(bs->nranks, sizeof *bs->notes))) return;
  if (bs->notes[peer]) return;
  if (len > BS_ERRMSG_MAX) len = BS_ERRMSG_MAX;
  if ((bs->notes[peer] = malloc(4 * len + 1)))   /* escaped: it goes into this rank's log and errors */
    rt_log_escape(bs->notes[peer], 4 * len + 1, text ? text : "", len);
}

/* Fails o because peer q is gone: with q's own last words when it said
 * any (they are then what this rank passes on: the first cause, not a
 * chain), else with `detail`. */
static bt_result lost(rt_bootstrap *bs, const op *o, int q, const char *detail) {
  const char *n = bs->notes ? bs->notes[q] : NULL;
  if (!n) return fail(bs, BT_ERR_SYSTEM, "%s: %s", o->what, detail);
  if (!bs->cause[0]) snprintf(bs->cause, sizeof bs->cause, "%s", n);
  return fail(bs, BT_ERR_SYSTEM, "%s: rank %d closed its connection, reporting: %s", o->what, q, n);
}

/* Appends a complete message (taking data) to the unclaimed ones; out of
 * memory frees data.  The caller counts its bytes in bs->held. */
static bt_result enqueue(rt_bootstrap *bs, int peer, uint32_t tag, size_t len, char *data) {
  msg *m = malloc(sizeof *m);
  if (!m) { free(data); return BT_ERR_NOMEM; }
  *m = (msg){NULL, peer, tag, len, data};
  if (bs->tail) bs->tail->next = m; else bs->head = m;
  bs->tail = m;
  return BT_OK;
}

/* Whether an unclaimed message from peer with tag waits (one that arrives
 * now must queue behind it). */
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
    bs->held -= m->len;
    free(m->data);
    free(m);
    o->rdone = 1;
    return BT_OK;
  }
  return BT_OK;
}

/* The connection has ended: the peer exited, aborted or reset it, or this
 * rank dropped it. */
static void conn_end(rt_bootstrap *bs, conn *c, int err) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->ended = 1;
  c->midway = c->body || c->hgot;
  c->err = err == ECONNRESET ? 0 : err;
  if (c->body && !c->direct) bs->held -= c->len;
  if (!c->direct) free(c->buf);
  c->buf = NULL;
  c->body = c->direct = 0;
}

/* Ends an adopted connection for a reason the running operation reports. */
static void conn_fault(rt_bootstrap *bs, conn *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void conn_fault(rt_bootstrap *bs, conn *c, const char *fmt, ...) {
  char m[BS_ERRMSG_MAX / 2], p[RT_SOCKADDR_STRLEN + 32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  fault(bs, "%s %s; this rank closed that connection", peer_str(bs, c->peer, c->addr, p, sizeof p), m);
  conn_end(bs, c, 0);
}

/* Drops a pending connection (a stranger, a bad hello, too slow, evicted). */
static void conn_drop(rt_bootstrap *bs, conn *c, const char *why) {
  rt_listener_dropped(&bs->l, c->addr, why);
  conn_end(bs, c, 0);
}

/* A complete hello: adopt the connection and say so, or drop it. */
/* Sends the one-byte answer to a hello.  A fresh socket takes it at once,
 * but a would-block is waited out (up to BATON_BOOTSTRAP_AUTH_MS, polling
 * for room), not taken for a hang-up.  Returns 1 when it was sent. */
static int send_ack(int fd) {
  unsigned char ack = BS_ACK;
  struct iovec v = {&ack, 1};
  int64_t until = rt_time_ns() + rt_param_int(RT_PARAM_BOOTSTRAP_AUTH_MS) * 1000000;
  for (;;) {
    ssize_t k = rt_socket_send(fd, &v, 1);
    if (k == 1) return 1;
    if (k < 0 || rt_time_ns() >= until) return 0;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, 10);
  }
}

static void hello(rt_bootstrap *bs, conn *c) {
  uint64_t magic = bs_get64(c->hdr);
  uint32_t rank = bs_get32(c->hdr + 8), nranks = bs_get32(c->hdr + 12);
  if (magic != bs->magic) return conn_drop(bs, c, "its magic differs (another run, or not a baton rank)");
  const char *why = nranks != (uint32_t)bs->nranks || rank >= nranks ? "its rank is out of range"
                  : (int)rank == bs->rank ? "it claims to be this rank"
                  : bs->from[rank] ? "that rank is already connected" : NULL;
  if (why) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: closed a connection from %s claiming to be rank %u/%u: %s", bs->who,
             c->addr, rank, nranks, why);
    conn_end(bs, c, 0);
    return;
  }
  if (!send_ack(c->fd)) return conn_drop(bs, c, "it hung up before its hello was answered");
  c->peer = (int)rank;
  bs->from[rank] = c;
}

/* Reads everything a connection has for us now; complete messages go to
 * o's buffer (when they match its receive) or to the queue; a peer's
 * error report is kept (note).  A message over the limits or a malformed
 * header ends the connection and sets bs->fault. */
static void read_conn(rt_bootstrap *bs, conn *c, op *o) {
  char t[48];
  while (c->fd >= 0) {
    if (!c->body) {
      size_t need = c->peer < 0 ? BS_HELLO_LEN : BS_HEADER_LEN;
      ssize_t k = rt_socket_recv(c->fd, c->hdr + c->hgot, need - c->hgot);
      if (k < 0) {
        if (c->peer < 0) conn_drop(bs, c, "it hung up before its hello");
        else conn_end(bs, c, errno);
        return;
      }
      if (k == 0) return;
      if ((c->hgot += k) < need) continue;
      c->hgot = 0;
      if (c->peer < 0) { hello(bs, c); continue; }
      uint64_t len = bs_get64(c->hdr + 8);
      c->tag = bs_get32(c->hdr);
      if (bs_get32(c->hdr + 4))
        return conn_fault(bs, c, "sent a malformed message header (bytes 4..7 are not zero)");
      if (len > bs->max_msg)
        return conn_fault(bs, c, "sent a message of %llu bytes (%s), over the limit of %zu MiB "
                          "(BATON_BOOTSTRAP_MAX_MSG_MB raises it; every rank needs the same value)",
                          (unsigned long long)len, tag_str(c->tag, t, sizeof t), bs->max_msg >> 20);
      if (c->tag == BS_TAG_NOTE && len > BS_ERRMSG_MAX)
        return conn_fault(bs, c, "sent an error report of %llu bytes (at most %d are allowed)",
                          (unsigned long long)len, BS_ERRMSG_MAX);
      c->len = (size_t)len;
      c->got = 0;
      c->direct = o && o->rpeer == c->peer && !o->rdone && c->tag == o->rtag && c->len == o->rlen &&
                  !queued(bs, c->peer, c->tag);
      if (!c->direct && bs->held + c->len > bs->max_held)
        return conn_fault(bs, c, "sent %s of %zu bytes while this rank held %zu bytes of messages not yet "
                          "asked for, over the limit of %zu MiB (BATON_BOOTSTRAP_MAX_QUEUED_MB raises it)",
                          tag_str(c->tag, t, sizeof t), c->len, bs->held, bs->max_held >> 20);
      c->buf = c->direct ? o->rdata : c->len ? malloc(c->len) : NULL;
      if (c->len && !c->buf)
        return conn_fault(bs, c, "sent a message of %zu bytes and this rank is out of memory for it", c->len);
      if (!c->direct) bs->held += c->len;
      c->body = 1;
    }
    if (c->got < c->len) {
      ssize_t k = rt_socket_recv(c->fd, c->buf + c->got, c->len - c->got);
      if (k < 0) { conn_end(bs, c, errno); return; }
      if (k == 0) return;
      if ((c->got += k) < c->len) continue;
    }
    c->body = 0;
    if (c->direct) {
      o->rdone = 1;
    } else if (c->tag == BS_TAG_NOTE) {   /* the peer failed: its last words */
      note(bs, c->peer, c->buf, c->len);
      bs->held -= c->len;
      free(c->buf);
      c->buf = NULL;
      conn_end(bs, c, 0);
      return;
    } else if (enqueue(bs, c->peer, c->tag, c->len, c->buf) != BT_OK) {
      bs->held -= c->len;
      c->buf = NULL;
      return conn_fault(bs, c, "sent a message this rank is out of memory to hold");
    }
    c->direct = 0;
    c->buf = NULL;
  }
}

/* Frees the pending connections that have been dropped. */
static void sweep(rt_bootstrap *bs) {
  for (int i = bs->nin - 1; i >= 0; i--) {
    conn *c = bs->in[i];
    if (c->fd >= 0 || c->peer >= 0) continue;
    free(c);
    bs->in[i] = bs->in[--bs->nin];
  }
}

/* Drops pending connections older than the authentication time. */
static void expire(rt_bootstrap *bs, int64_t now) {
  char why[128];
  for (int i = 0; i < bs->nin; i++) {
    conn *c = bs->in[i];
    if (c->peer >= 0 || c->fd < 0 || now - c->since < bs->l.auth_ns) continue;
    snprintf(why, sizeof why, "no hello within %lld ms (BATON_BOOTSTRAP_AUTH_MS)", (long long)(bs->l.auth_ns / 1000000));
    conn_drop(bs, c, why);
  }
}

/* Drops the oldest pending connection, after a last read of what it has
 * sent (a peer whose hello is there is adopted).  0: there was none. */
static int evict(void *owner) {
  rt_bootstrap *bs = owner;
  for (;;) {
    conn *old = NULL;
    int npend = 0;
    for (int i = 0; i < bs->nin; i++) {
      conn *c = bs->in[i];
      if (c->peer >= 0 || c->fd < 0) continue;
      npend++;
      if (!old || c->since < old->since) old = c;
    }
    if (!old) return 0;
    read_conn(bs, old, NULL);
    if (old->peer >= 0 || old->fd < 0) continue;   /* adopted, or it dropped itself */
    char why[128];
    snprintf(why, sizeof why, "the oldest of %d connections waiting for their hello, closed for a newer one "
             "(BATON_BOOTSTRAP_MAX_PENDING)", npend);
    conn_drop(bs, old, why);
    return 1;
  }
}

/* Takes a new connection as pending, making room if the list is full. */
static int add_conn(void *owner, int fd, const rt_sockaddr *peer) {
  rt_bootstrap *bs = owner;
  int npend = 0;
  for (int i = 0; i < bs->nin; i++) npend += bs->in[i]->peer < 0 && bs->in[i]->fd >= 0;
  for (; npend >= bs->l.max_pending && evict(bs); npend--) {}
  sweep(bs);
  if (bs->nin == bs->capin) {
    int cap = bs->capin ? 2 * bs->capin : 8;
    conn **n = realloc(bs->in, cap * sizeof *n);
    if (!n) return -1;
    bs->in = n;
    bs->capin = cap;
  }
  conn *c = calloc(1, sizeof *c);
  if (!c) return -1;
  c->fd = fd;
  c->peer = -1;
  c->since = rt_time_ns();
  if (peer) rt_socket_str(peer, c->addr, sizeof c->addr);
  else snprintf(c->addr, sizeof c->addr, "(a local socket)");
  bs->in[bs->nin++] = c;
  return 0;
}

/* ---- the connections this rank sends on ----------------------------------- */

/* Connects to peer p and starts its hello.  Out of descriptors, the
 * pending connections are given up first.  `what` names the operation. */
static bt_result out_connect(rt_bootstrap *bs, int p, const char *what, int64_t deadline) {
  char w[200], a[RT_SOCKADDR_STRLEN];
  snprintf(w, sizeof w, "%s: %s: rank %d", bs->who, what, p);
  outc *o = &bs->out[p];
  bt_result r = BT_OK;
  for (int tries = 0; tries < 2; tries++) {
    r = rt_socket_connect(&bs->addrs[p], deadline, bs->wake[0], w, &o->fd);
    if (!r || (errno != EMFILE && errno != ENFILE)) break;
    while (evict(bs)) {}
    sweep(bs);
  }
  if (r) {
    o->fd = -1;
    o->state = OUT_GONE;
    o->gone_at = rt_time_ns();
    return fail(bs, BT_ERR_SYSTEM, "%s: cannot reach rank %d at %s; did it exit, crash or abort?", what, p,
                rt_socket_str(&bs->addrs[p], a, sizeof a));
  }
  o->state = OUT_HELLO;
  o->hello_sent = 0;
  return BT_OK;
}

/* Reads what peer p sent back on the connection this rank sends to it on:
 * nothing but, when p fails, its last words; then the end (OUT_GONE). */
static bt_result out_back(rt_bootstrap *bs, int p) {
  outc *o = &bs->out[p];
  enum { CAP = BS_HEADER_LEN + BS_ERRMSG_MAX };
  char a[RT_SOCKADDR_STRLEN];
  while (o->fd >= 0) {
    if (!o->back && !(o->back = malloc(CAP))) return BT_OK;
    size_t want = o->backgot < BS_HEADER_LEN ? BS_HEADER_LEN - o->backgot
                : BS_HEADER_LEN + bs_get64(o->back + 8) - o->backgot;
    ssize_t k = want ? rt_socket_recv(o->fd, o->back + o->backgot, want) : -1;
    if (k == 0) return BT_OK;
    if (k < 0) {                        /* the peer closed it: it exited or failed */
      close(o->fd);
      o->fd = -1;
      o->state = OUT_GONE;
      o->gone_at = rt_time_ns();
      o->busy = 0;
      return BT_OK;
    }
    o->backgot += k;
    if (o->backgot == BS_HEADER_LEN &&
        (bs_get32(o->back) != BS_TAG_NOTE || bs_get32(o->back + 4) || bs_get64(o->back + 8) > BS_ERRMSG_MAX)) {
      fault(bs, "rank %d (at %s) sent bytes this rank did not expect on the connection it sends to it on",
            p, rt_socket_str(&bs->addrs[p], a, sizeof a));
      o->backgot = 0;
      return BT_OK;
    }
    if (o->backgot >= BS_HEADER_LEN && o->backgot == BS_HEADER_LEN + bs_get64(o->back + 8)) {
      note(bs, p, (char *)o->back + BS_HEADER_LEN, o->backgot - BS_HEADER_LEN);
      o->backgot = 0;
    }
  }
  return BT_OK;
}

/* Moves peer p's connection on: writes its hello, reads the BS_ACK, notices
 * a peer that closed it.  A hello closed unanswered was shed by a flooded
 * listener: it is tried again a little later. */
static bt_result out_drive(rt_bootstrap *bs, int p, const char *what) {
  outc *o = &bs->out[p];
  unsigned char b[64];
  if (o->state == OUT_HELLO && o->hello_sent < BS_HELLO_LEN) {
    unsigned char h[BS_HELLO_LEN];
    bs_put64(h, bs->magic);
    bs_put32(h + 8, (uint32_t)bs->rank);
    bs_put32(h + 12, (uint32_t)bs->nranks);
    struct iovec v = {h + o->hello_sent, BS_HELLO_LEN - o->hello_sent};
    ssize_t k = rt_socket_send(o->fd, &v, 1);
    if (k > 0) o->hello_sent += k;
    if (k >= 0 && o->hello_sent < BS_HELLO_LEN) return BT_OK;
    if (k < 0) goto shed;
  }
  if (o->state == OUT_READY) return out_back(bs, p);
  if (o->state != OUT_HELLO) return BT_OK;
  ssize_t k = rt_socket_recv(o->fd, b, 1);
  if (k == 0) return BT_OK;
  if (k > 0 && o->state == OUT_HELLO) {
    if (b[0] != BS_ACK)
      return fail(bs, BT_ERR_SYSTEM, "%s: rank %d answered this rank's hello with byte %u, not %u: is "
                  "something else listening at its address?", what, p, b[0], BS_ACK);
    o->state = OUT_READY;
    o->tries = 0;
    return BT_OK;
  }
shed:
  close(o->fd);
  o->fd = -1;
  o->state = OUT_RETRY;
  o->retry_at = rt_time_ns() + bs_retry_ns(o->tries);
  o->tries++;
  LOG_TRACE(RT_SUB_BOOTSTRAP, "%s: %s: rank %d closed this rank's hello unanswered (try %d); trying again",
            bs->who, what, p, o->tries);
  return BT_OK;
}

/* Writes as much of o's send as the socket takes now. */
static bt_result push(rt_bootstrap *bs, op *o) {
  outc *oc = &bs->out[o->speer];
  size_t total = BS_HEADER_LEN + o->slen;
  while (o->sent < total) {
    struct iovec v[2];
    int n = 0;
    if (o->sent < BS_HEADER_LEN) v[n++] = (struct iovec){o->pre + o->sent, BS_HEADER_LEN - o->sent};
    size_t off = o->sent > BS_HEADER_LEN ? o->sent - BS_HEADER_LEN : 0;
    if (o->slen > off) v[n++] = (struct iovec){(char *)o->sdata + off, o->slen - off};
    ssize_t k = rt_socket_send(oc->fd, v, n);
    if (k < 0) {
      int e = errno;
      char d[300];
      out_back(bs, o->speer);            /* its last words, if it said any */
      snprintf(d, sizeof d, "the connection to rank %d broke while sending to it (%zu of %zu bytes sent): %s; "
               "did it exit, crash or abort?", o->speer, o->sent, total, strerror(e));
      return lost(bs, o, o->speer, d);
    }
    if (k == 0) break;
    o->sent += k;
  }
  oc->busy = o->sent > 0 && o->sent < total;
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
  if (o->speer >= 0 && o->sent < BS_HEADER_LEN + o->slen && k < n) {
    const outc *oc = &bs->out[o->speer];
    if (oc->state == OUT_READY)
      snprintf(buf + k, n - k, "%ssending to rank %d (%zu of %zu bytes sent; is it stuck?)", k ? "; " : "",
               o->speer, o->sent, BS_HEADER_LEN + o->slen);
    else
      snprintf(buf + k, n - k, "%srank %d has not answered this rank's hello (%d tries; is its listener "
               "flooded?)", k ? "; " : "", o->speer, oc->tries + 1);
  }
}

/* Why o cannot finish: its peers hung up.  NULL while it may. */
static bt_result check_peers(rt_bootstrap *bs, op *o, int64_t now) {
  char a[RT_SOCKADDR_STRLEN], d[400];
  if (o->speer >= 0 && o->sent < BS_HEADER_LEN + o->slen && bs->out[o->speer].state == OUT_GONE) {
    snprintf(d, sizeof d, "rank %d closed its connection (the one this rank sends to it on, to %s); did it "
             "exit, crash or abort?", o->speer, rt_socket_str(&bs->addrs[o->speer], a, sizeof a));
    return lost(bs, o, o->speer, d);
  }
  if (o->rpeer < 0 || o->rdone) return BT_OK;
  const conn *rc = bs->from[o->rpeer];
  if (rc && rc->ended) {
    snprintf(d, sizeof d, "rank %d closed its connection (from %s)%s while this rank waited for it%s%s; did "
             "it exit, crash or abort?", o->rpeer, rc->addr, rc->midway ? " in the middle of a message" : "",
             rc->err ? ": " : "", rc->err ? strerror(rc->err) : "");
    return lost(bs, o, o->rpeer, d);
  }
  const outc *oc = &bs->out[o->rpeer];
  if (!rc && oc->state == OUT_GONE && now - oc->gone_at >= GONE_GRACE_NS) {
    snprintf(d, sizeof d, "rank %d closed its connection (the one this rank sends to it on, to %s) and never "
             "connected to send what this rank waits for; did it exit, crash or abort?", o->rpeer,
             rt_socket_str(&bs->addrs[o->rpeer], a, sizeof a));
    return lost(bs, o, o->rpeer, d);
  }
  return BT_OK;
}

/* What one poll entry is. */
enum { PK_WAKE, PK_LISTEN, PK_OUT, PK_IN };
typedef struct pk { int kind, peer; conn *c; } pk;

/* Drives o until its send is handed to the kernel and its receive has
 * arrived, accepting connections and queueing other messages meanwhile.
 * Fails on timeout, abort, a peer's error report or misbehaviour, or when
 * a peer o needs has hung up.  A peer o waits for that has not connected
 * within PROBE_NS is connected to, so that its death is noticed. */
static bt_result progress(rt_bootstrap *bs, op *o) {
  int64_t start = rt_time_ns(), deadline = start + bs->timeout_ns;
  struct pollfd *p = NULL;
  pk *pks = NULL;
  int cap = 0;
  bt_result res = BT_OK;
  for (;;) {
    int64_t now = rt_time_ns();
    if (__atomic_load_n(&bs->aborted, __ATOMIC_ACQUIRE)) {
      res = fail(bs, BT_ERR_SYSTEM, "%s: aborted (rt_bootstrap_abort)", o->what);
      break;
    }
    if (bs->fault[0]) { res = fail(bs, BT_ERR_SYSTEM, "%s: %s", o->what, bs->fault); break; }
    if (o->rpeer >= 0 && !o->rdone && (res = take(bs, o))) break;
    if (o->speer >= 0) {
      outc *oc = &bs->out[o->speer];
      if (oc->state == OUT_RETRY && now >= oc->retry_at && (res = out_connect(bs, o->speer, o->what, deadline)))
        break;
      if (oc->state == OUT_HELLO && (res = out_drive(bs, o->speer, o->what))) break;
      if (oc->state == OUT_READY && (res = push(bs, o))) break;
    }
    int sdone = o->speer < 0 || o->sent == BS_HEADER_LEN + o->slen;
    int rdone = o->rpeer < 0 || o->rdone;
    if (sdone && rdone) break;
    if ((res = check_peers(bs, o, now))) break;
    if (!rdone && !bs->from[o->rpeer] && bs->out[o->rpeer].state == OUT_NONE && now - start >= PROBE_NS &&
        (res = out_connect(bs, o->rpeer, o->what, deadline)))
      break;
    expire(bs, now);
    sweep(bs);
    int need = 2 + bs->nin + bs->nranks;
    if (need > cap) {
      struct pollfd *np = realloc(p, need * sizeof *p);
      if (np) p = np;
      pk *npk = realloc(pks, need * sizeof *pks);
      if (npk) pks = npk;
      if (!np || !npk) { res = fail(bs, BT_ERR_NOMEM, "%s: out of memory", o->what); break; }
      cap = need;
    }
    int n = 0;
    int64_t wake = deadline;
    pks[n] = (pk){PK_WAKE, -1, NULL};
    p[n++] = (struct pollfd){.fd = bs->wake[0], .events = POLLIN};
    if (rt_listener_pollable(&bs->l, now)) {
      pks[n] = (pk){PK_LISTEN, -1, NULL};
      p[n++] = (struct pollfd){.fd = bs->l.fd, .events = POLLIN};
    } else if (bs->l.fd >= 0) {
      wake = bs_earlier(wake, bs->l.quiet_until);
    }
    for (int q = 0; q < bs->nranks; q++) {
      outc *oc = &bs->out[q];
      if (oc->state == OUT_RETRY && q == o->speer) wake = bs_earlier(wake, oc->retry_at);
      if (oc->state == OUT_GONE && q == o->rpeer) wake = bs_earlier(wake, oc->gone_at + GONE_GRACE_NS);
      if (oc->state != OUT_HELLO && oc->state != OUT_READY) continue;
      short ev = oc->state == OUT_HELLO && oc->hello_sent < BS_HELLO_LEN ? POLLOUT : POLLIN;
      if (q == o->speer && oc->state == OUT_READY && !sdone) ev |= POLLOUT;
      pks[n] = (pk){PK_OUT, q, NULL};
      p[n++] = (struct pollfd){.fd = oc->fd, .events = ev};
    }
    if (!rdone && !bs->from[o->rpeer] && bs->out[o->rpeer].state == OUT_NONE)
      wake = bs_earlier(wake, start + PROBE_NS);
    for (int i = 0; i < bs->nin; i++) {
      conn *c = bs->in[i];
      if (c->fd < 0) continue;
      if (c->peer < 0) wake = bs_earlier(wake, c->since + bs->l.auth_ns);
      pks[n] = (pk){PK_IN, -1, c};
      p[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    }
    int k = rt_socket_poll(p, n, wake);
    if (k < 0) { res = fail(bs, BT_ERR_SYSTEM, "%s: poll failed: %s", o->what, strerror(errno)); break; }
    int accept = 0;
    for (int i = 0; i < n && k > 0 && !res; i++) {
      if (!p[i].revents) continue;
      if (pks[i].kind == PK_IN) read_conn(bs, pks[i].c, o);
      else if (pks[i].kind == PK_OUT) res = out_drive(bs, pks[i].peer, o->what);
      else if (pks[i].kind == PK_LISTEN) accept = 1;
    }
    if (res) break;
    if (accept && rt_listener_accept(&bs->l, bs, add_conn, evict) < 0) {
      res = fail(bs, BT_ERR_SYSTEM, "%s: this rank's listening socket failed", o->what);
      break;
    }
    if (k == 0 && rt_time_ns() >= deadline) {
      char what[256];
      pending_str(bs, o, what, sizeof what);
      res = fail(bs, BT_ERR_SYSTEM, "%s: timed out after %lld s (BATON_BOOTSTRAP_TIMEOUT): %s", o->what,
                 (long long)(bs->timeout_ns / 1000000000), what);
      break;
    }
  }
  free(p);
  free(pks);
  sweep(bs);
  return res;
}

/* Checks that bs may run another operation. */
static bt_result usable(rt_bootstrap *bs, const char *what) {
  if (!bs) return BT_ERR_INVALID;
  if (bs->broken || __atomic_load_n(&bs->aborted, __ATOMIC_ACQUIRE)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: %s: an earlier operation failed or was aborted", bs->who, what);
    bs->broken = 1;
    return BT_ERR_SYSTEM;
  }
  return BT_OK;
}

/* A message too large for the peers to accept is the caller's mistake:
 * logged, bs stays usable. */
static bt_result too_big(const rt_bootstrap *bs, const char *fn, size_t bytes) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "%s: %s: a message of %zu bytes is over the limit of %zu MiB "
           "(BATON_BOOTSTRAP_MAX_MSG_MB raises it; every rank needs the same value)", bs->who, fn, bytes,
           bs->max_msg >> 20);
  return BT_ERR_INVALID;
}

/* Sets up o's send of (tag, data) to peer, connecting on first use. */
static bt_result start_send(rt_bootstrap *bs, op *o, int peer, uint32_t tag, const void *data, size_t len) {
  o->speer = peer;
  if (bs->out[peer].state == OUT_NONE) CHECK(out_connect(bs, peer, o->what, rt_time_ns() + bs->timeout_ns));
  bs_put32(o->pre, tag);
  bs_put32(o->pre + 4, 0);
  bs_put64(o->pre + 8, (uint64_t)len);
  o->sdata = data;
  o->slen = len;
  o->sent = 0;
  return BT_OK;
}

/* Bad arguments are the caller's mistake: logged, but bs stays usable. */
static bt_result bad_args(const rt_bootstrap *bs, const char *fn, int peer, int tag, size_t bytes, const void *data) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "%s: %s: bad arguments: peer %d (must be 0..%d), tag %d "
           "(must be 0..2^31-1), %zu bytes at %p", bs->who, fn, peer, bs->nranks - 1, tag, bytes, data);
  return BT_ERR_INVALID;
}

static void op_init(op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void op_init(op *o, const char *fmt, ...) {
  memset(o, 0, sizeof *o);
  o->speer = o->rpeer = -1;
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
  if (bytes > bs->max_msg) return too_big(bs, "send", bytes);
  if (peer == bs->rank) {            /* to itself: straight into the queue */
    if (bs->held + bytes > bs->max_held)
      return fail(bs, BT_ERR_NOMEM, "send to itself: %zu bytes more would make the messages not yet asked "
                  "for %zu bytes, over the limit of %zu MiB (BATON_BOOTSTRAP_MAX_QUEUED_MB raises it)", bytes,
                  bs->held + bytes, bs->max_held >> 20);
    char *copy = bytes ? malloc(bytes) : NULL;
    if (bytes && !copy) return fail(bs, BT_ERR_NOMEM, "send to itself: out of memory for %zu bytes", bytes);
    if (bytes) memcpy(copy, data, bytes);
    if (enqueue(bs, peer, (uint32_t)tag, bytes, copy))
      return fail(bs, BT_ERR_NOMEM, "send to itself: out of memory");
    bs->held += bytes;
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
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: allgather: data is NULL", bs->who);
    return BT_ERR_INVALID;
  }
  if (bytes_per_rank > bs->max_msg) return too_big(bs, "allgather", bytes_per_rank);
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
  for (int p = 0; p < bs->nranks && bs->out; p++) {
    if (bs->out[p].fd >= 0) close(bs->out[p].fd);
    free(bs->out[p].back);
  }
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
  rt_listener_close(&bs->l);
  if (bs->wake[0] >= 0) close(bs->wake[0]);
  if (bs->wake[1] >= 0) close(bs->wake[1]);
  for (int p = 0; p < bs->nranks && bs->notes; p++) free(bs->notes[p]);
  free(bs->notes);
  free(bs->in);
  free(bs->from);
  free(bs->out);
  free(bs->addrs);
  free(bs);
}

/* A rank with its tables but no connections yet (listener: none). */
static rt_bootstrap *bs_new(int rank, int nranks, uint64_t magic) {
  rt_bootstrap *bs = calloc(1, sizeof *bs);
  if (!bs) return NULL;
  bs->rank = rank;
  bs->nranks = nranks;
  bs->magic = magic;
  bs->timeout_ns = bs_timeout_ns();
  bs->max_msg = (size_t)rt_param_int(RT_PARAM_BOOTSTRAP_MAX_MSG_MB) << 20;
  bs->max_held = (size_t)rt_param_int(RT_PARAM_BOOTSTRAP_MAX_QUEUED_MB) << 20;
  snprintf(bs->who, sizeof bs->who, "bootstrap rank %d/%d", rank, nranks);
  rt_listener_init(&bs->l, -1, bs->who, RT_SUB_BOOTSTRAP);
  bs->wake[0] = bs->wake[1] = -1;
  bs->addrs = calloc(nranks, sizeof *bs->addrs);
  bs->out = malloc(nranks * sizeof *bs->out);
  bs->from = calloc(nranks, sizeof *bs->from);
  if (!bs->addrs || !bs->out || !bs->from || pipe2(bs->wake, O_CLOEXEC | O_NONBLOCK)) {
    if (bs->wake[0] < 0 && bs->addrs && bs->out && bs->from)
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: pipe failed: %s", bs->who, strerror(errno));
    rt_bootstrap_free(bs);
    return NULL;
  }
  for (int i = 0; i < nranks; i++) bs->out[i] = (outc){.fd = -1, .state = OUT_NONE};
  return bs;
}

/* ---- the fuzz seam -------------------------------------------------------- */

rt_bootstrap *bs_engine_new(int rank, int nranks, uint64_t magic) {
  if (nranks < 1 || nranks > BS_MAX_RANKS || rank < 0 || rank >= nranks) return NULL;
  return bs_new(rank, nranks, magic);
}

int bs_engine_add(rt_bootstrap *bs, int fd) { return add_conn(bs, fd, NULL); }

bt_result bs_engine_pump(rt_bootstrap *bs, int peer, uint32_t tag, void *data, size_t len, int *done, int *open) {
  op o;
  op_init(&o, "engine");
  o.rpeer = peer;
  o.rtag = tag;
  o.rdata = data;
  o.rlen = len;
  o.rdone = *done;
  bt_result res = BT_OK;
  if (bs->broken) res = BT_ERR_SYSTEM;
  if (!res && peer >= 0 && !o.rdone) res = take(bs, &o);
  for (int i = 0; i < bs->nin && !res; i++) read_conn(bs, bs->in[i], &o);
  if (!res && bs->fault[0]) res = fail(bs, BT_ERR_SYSTEM, "%s", bs->fault);
  expire(bs, rt_time_ns());
  sweep(bs);
  *done = o.rdone;
  *open = 0;
  for (int i = 0; i < bs->nin; i++) *open += bs->in[i]->fd >= 0;
  return res;
}

size_t bs_engine_held(const rt_bootstrap *bs) { return bs->held; }

void bs_listen_address(const rt_bootstrap *bs, rt_sockaddr *a) {
  socklen_t len = sizeof *a;
  memset(a, 0, sizeof *a);
  if (bs->l.fd >= 0) getsockname(bs->l.fd, &a->sa, &len);
}

/* ---- init ------------------------------------------------------------------ */

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
  rt_bootstrap *bs = bs_new(rank, nranks, magic);
  if (!bs) return BT_ERR_NOMEM;
  bt_result res = bs_join(bs, &root);
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
