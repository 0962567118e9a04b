/* net.h -- the network transport's insides, shared by net.c (set-up, the
 * FIFOs, what arrives) and net_proxy.c (the thread that moves messages).
 *
 * A network connection has two FIFOs in host memory the GPU reaches: the
 * sender's staging FIFO, which its GPU fills, and the receiver's FIFO, which
 * its GPU drains.  The sender's GPU writes message m into slot m % nslots,
 * its length into lens[slot], then head = m + 1.  Its proxy sees the head
 * move and posts the message's pieces to the backend; the receiver's proxy
 * takes them into the same slot of its FIFO and, once every byte of
 * messages up to m is in, writes its head = m + 1.  The receiving GPU
 * consumes and writes its tail; that proxy sends the tail back as a credit
 * and the sender's proxy writes it into the sender's tail, freeing the
 * slot.  The sender's GPU thus only writes a slot the far side has freed,
 * so every piece that arrives has its slot waiting (end-to-end flow
 * control: connections sharing a link never block each other). */
#ifndef NET_H
#define NET_H

#include <poll.h>
#include <pthread.h>
#include <stdint.h>

#include "net_backend.h"
#include "net_trace.h"
#include "tp.h"

/* How long a proxy stopping in order keeps sending what its rank still
 * owes its peers (net_proxy.c). */
#define NET_FLUSH_NS 2000000000LL

typedef struct net_sconn {     /* this rank sends on it */
  tp_key key;
  int link, idx;               /* its link and its index there */
  char *fifo;                  /* host addresses */
  uint32_t *lens;
  uint64_t *head, *tail, *count;
  uint64_t remote_fifo;        /* its FIFO's offset in the receiver's pool */
  uint64_t posted;             /* messages whose every piece the backend took */
  uint32_t next_off;           /* bytes of message `posted` already taken */
  uint64_t credited;           /* messages the receiver has consumed */
} net_sconn;

/* The byte ranges of one slot's message that have landed, sorted and
 * merged where they touch: an honest sender's pieces, spread over its
 * sockets, leave a few gaps at most. */
#define NET_MAX_RANGES 64
typedef struct net_cover { int n; uint32_t lo[NET_MAX_RANGES], hi[NET_MAX_RANGES]; } net_cover;

typedef struct net_rconn {     /* this rank receives on it */
  tp_key key;
  int link, idx;
  char *fifo;
  uint64_t *head, *tail, *count;
  uint64_t fifo_off;           /* its FIFO's offset in this rank's pool */
  uint64_t done;               /* messages complete, published in head */
  uint64_t credit_sent;        /* tail value last sent back */
  uint64_t *slot_seq;          /* per slot: message in it, NET_SLOT_FREE */
  uint32_t *slot_got, *slot_total;
  net_cover *slot_cover;       /* per slot: the byte ranges landed (a piece twice, or overlapping, is refused) */
} net_rconn;

#define NET_SLOT_FREE UINT64_MAX

/* A rank's blob (tp.h): a magic word, the backend (0 socket, 1 verbs) at
 * byte NET_BLOB_BACKEND, the backend's address at NET_BLOB_ADDR. */
#define NET_BLOB_MAGIC 0x544e5442u   /* "BTNT" */
#define NET_BLOB_BACKEND 4
#define NET_BLOB_ADDR 16

typedef struct net_link {
  int peer;
  int nsend, nrecv;
  net_sconn **s;               /* by index on the link */
  net_rconn **r;
  int bye;                     /* the peer closed its end in order */
} net_link;

typedef struct net {
  tp_ctx x;
  const net_backend *be;
  void *bctx;                  /* the backend's context */
  int nslots;
  int64_t slot_bytes, fifo_bytes, piece;
  char *pool, *pool_dev;       /* host memory the GPU reaches, and its address for the GPU */
  size_t pool_bytes;
  net_sconn *s;
  net_rconn *r;
  int ns, nr;
  net_link *links;
  int nlinks;
  tp_key *keys;                /* every rank's network connections, sorted */
  int nkeys;
  /* The proxy thread. */
  pthread_t thread;
  int running;
  int wake_fd;                 /* eventfd: a launch or a stop */
  struct pollfd *pfds;         /* the proxy's naps: the eventfd, then the backend's descriptors */
  int pfd_cap;
  int stop;                    /* atomic */
  int err;                     /* atomic: a bt_result, set once by the proxy */
  int64_t spin_ns, sleep_ns;
  uint64_t moved_bytes[2];     /* sent, received: payload */
  net_trace *trace;            /* the proxy's timeline (BATON_TRACE), or NULL */
  net_sink sink;               /* what the proxy hands the backend: where pieces land (net.c's, set at setup) */
} net;

/* Starts / stops the proxy thread of n (net_proxy.c). */
bt_result net_proxy_start(net *n);
void net_proxy_stop(net *n);
void net_proxy_kick(net *n);

/* Records the first fault, logs it, stops this rank's kernels and drops
 * every link so the peers learn at once (net_proxy.c). */
void net_fault(net *n, bt_result e);

/* The backend BATON_NET names, or the best available one; NULL (logged)
 * when the one named cannot run here. */
const net_backend *net_backend_pick(void);

#endif
