/* net_socket_int.h -- the TCP backend's insides, shared by its set-up
 * (net_socket.c: listen, connect, accept, close) and its data path
 * (net_socket_io.c: frames both ways, the sender threads). */
#ifndef NET_SOCKET_INT_H
#define NET_SOCKET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net_socket.h"

enum { QCAP = 256 };   /* frames queued on one socket */

typedef struct qent { ns_hdr h; const char *src; uint32_t plen; } qent;   /* h in wire order */

/* One TCP socket of a link.  Its fd is open from set-up to close; `gone`
 * marks one that carries nothing more (its peer said goodbye and closed,
 * or this side aborted).  The frames to send are a ring of QCAP entries:
 * the proxy thread puts (qput), whoever writes the socket takes (qtake),
 * both counts only ever grow and are read across threads; q[qtake % QCAP]
 * is partly sent (qsent bytes, header then payload).  Who writes holds
 * `writer`: the sender thread, or the proxy for a small frame alone in
 * the queue (no hand-over for a credit or a small message).  The receive fields
 * are the proxy thread's alone. */
typedef struct sock {
  int fd;
  int gone;                       /* atomic */
  int txerr;                      /* atomic: the errno a send failed with (then nothing more is sent on it) */
  int writer;                     /* atomic: 1 while a thread writes it (the sender thread, or the proxy a small frame) */
  int bye;                        /* BYE received on it */
  int eof;                        /* closing: the peer has closed it (drain) */
  qent q[QCAP];
  uint32_t qput, qtake;           /* atomic */
  size_t qsent;
  ns_hdr rh;                      /* the frame coming in */
  size_t rgot;                    /* bytes of rh so far */
  char *dst;                      /* payload: where the rest goes */
  uint32_t left;
} sock;

typedef struct slink {
  int peer, nsend, nrecv;
  sock *s;                        /* nsocks */
  int rr;                         /* next socket for a piece */
  uint64_t *credit;               /* per receive connection: the value owed */
  unsigned char *dirty;
} slink;

/* A sender thread: writes the sockets of links l with l % ntx == id. */
typedef struct stx {
  struct sctx *c;
  int id;
  pthread_t th;
  int started;
  int wake_fd;                    /* eventfd: frames were queued while it slept */
  int sleeping;                   /* atomic */
} stx;

typedef struct sctx {
  int rank, nranks, nsocks;
  uint64_t proc;                  /* this process's number (ns_addr.proc) */
  int64_t deadline;
  int listen_fd;
  unsigned char token[16];
  slink *links;
  int nlinks;
  int aborted;                    /* atomic */
  uint64_t sent, received;        /* sent: atomic (the sender threads add) */
  struct pollfd *pfd;             /* one per socket, for progress */
  int npfd;
  int ntx;                        /* sender threads (0: the proxy thread writes the sockets) */
  stx *tx;
  int tx_stop;                    /* atomic */
  int64_t spin_ns;                /* a sender thread polls this long after its last frame before it sleeps */
} sctx;

/* Whether s may still carry frames. */
static inline int ns_live(const sock *s) { return s->fd >= 0 && !__atomic_load_n(&s->gone, __ATOMIC_ACQUIRE); }

/* Frames queued on s and not all sent. */
static inline uint32_t ns_queued(const sock *s) {
  return __atomic_load_n(&s->qput, __ATOMIC_ACQUIRE) - __atomic_load_n(&s->qtake, __ATOMIC_ACQUIRE);
}

/* Writes all n bytes to a non-blocking socket before the deadline (net_socket.c). */
int ns_write_all(int fd, const void *p, size_t n, int64_t deadline);

/* The data path (net_socket_io.c), as net_backend.h describes each. */
int ns_post(void *ctx, int link, const net_piece *p);
int ns_credit(void *ctx, int link, int conn, uint64_t value);
int ns_progress(void *ctx, const net_sink *sink, int *failed);
int ns_pending(void *ctx);
int ns_pollfds(void *ctx, struct pollfd *fds, int max);
void ns_stats(void *ctx, uint64_t *sent, uint64_t *received);

/* Starts c->ntx sender threads once the links are up (none when ntx is 0);
 * stops and joins them (before the sockets close; safe to call twice). */
bt_result ns_tx_start(sctx *c);
void ns_tx_stop(sctx *c);

#endif
