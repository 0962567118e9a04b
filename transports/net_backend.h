/* net_backend.h -- what a network backend (TCP sockets, InfiniBand verbs)
 * does for the network transport's proxy: links to peers, message pieces
 * one way, credits the other, events back through a sink.
 *
 * The proxy (net_proxy.c) owns the FIFOs and the protocol; a backend only
 * moves bytes.  One rank's backend context holds one link per peer rank
 * it exchanges messages with; every link carries the connections between
 * the two ranks in both directions.  Connection i of a link, sender's
 * view, is the i-th of the sender's connections to that peer in key
 * order; the receiver numbers its connections from that peer alike, so
 * both ends name a connection by the same small index.
 *
 * Flow control is end to end and the proxy's: a piece is posted only for
 * a message the receiver has a free slot for, so a backend never holds
 * data back for lack of room on the far side, and connections multiplexed
 * on one link never block each other.  All backend calls come from the
 * proxy thread, except open/connect/close (set-up and tear-down). */
#ifndef NET_BACKEND_H
#define NET_BACKEND_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_result.h"

/* Bytes a backend publishes per rank (through the bootstrap) so that
 * peers can reach it: an address, a port, a token, device details. */
#define NET_ADDR_BYTES 200

/* One piece of one message: bytes [off, off+len) of message `seq` (of
 * `total` bytes) on link connection `conn`.  The sender's copy is at
 * `src`; the receiver's slot byte `off` is at `remote_off` in the
 * receiver's registered pool (backends that write remotely, such as RDMA,
 * use it; sockets send it along and the receiver checks it).  `last` is 1
 * on the final piece the proxy posts for the message. */
typedef struct net_piece {
  uint32_t conn, off, len, total;
  uint64_t seq;
  uint64_t remote_off;
  const char *src;
  int last;
} net_piece;

/* Where a backend reports what arrived.  Every callback returns 0, or -1
 * to refuse (the sink has logged why: a protocol error, a peer writing
 * outside its slots); a backend then fails the link. */
typedef struct net_sink {
  void *arg;
  /* A piece is about to land (sockets): where its bytes go, or NULL to
   * refuse it.  p->src is NULL here. */
  char *(*where)(void *arg, int link, const net_piece *p);
  /* Piece p has landed entirely in the receiver's memory (sockets: after
   * `where`; RDMA: once per message, with off 0 and len total, when the
   * last write has completed). */
  int (*landed)(void *arg, int link, const net_piece *p);
  /* The peer's receiver has consumed `value` messages of link connection
   * `conn` (this rank's send side). */
  int (*credit)(void *arg, int link, int conn, uint64_t value);
  /* The peer closed its end in order (its communicator was destroyed). */
  void (*bye)(void *arg, int link);
} net_sink;

/* What a backend is opened with. */
typedef struct net_open_args {
  int rank, nranks;
  char *pool;            /* this rank's pool of FIFOs (host memory, page aligned) */
  size_t pool_bytes;
  int nsocks;            /* sockets per link (sockets), queue pairs per link (verbs) */
  int64_t deadline_ns;   /* rt_time_ns() scale: set-up gives up after it */
} net_open_args;

/* The links a rank wants: the peer ranks, and per link the connections
 * each way (sends: this rank to peer; recvs: peer to this rank). */
typedef struct net_link_req {
  int peer;
  int nsend, nrecv;
} net_link_req;

typedef struct net_backend {
  const char *name;
  /* Why this backend cannot run here (a library or device missing), as a
   * sentence, or NULL when it may; cheap, no side effects beyond loading. */
  const char *(*unavailable)(void);
  /* Opens the backend: picks an interface or a device, registers the pool,
   * fills addr (NET_ADDR_BYTES) with what peers need. */
  bt_result (*open)(const net_open_args *a, void **ctx, unsigned char addr[NET_ADDR_BYTES]);
  /* Builds the links: reqs[0..nlinks) in this order are link 0, 1, ...;
   * addrs holds every rank's addr (nranks x NET_ADDR_BYTES).  Blocks
   * until every link is up or the deadline passes.  Every rank of the
   * communicator calls it at the same time (or, in one process, one
   * after the other: a backend must not need its peer to have called
   * connect before its own connect returns). */
  bt_result (*connect)(void *ctx, const net_link_req *reqs, int nlinks, const unsigned char *addrs);
  /* Queues piece p on link; 0 when taken, 1 when the backend's queue is
   * full (the proxy retries later), -1 when the link has failed. */
  int (*post)(void *ctx, int link, const net_piece *p);
  /* Tells the peer of link that `value` messages of (its send side's)
   * connection conn are consumed; a later value may replace an earlier one
   * not yet sent.  0, or -1 when the link has failed. */
  int (*credit)(void *ctx, int link, int conn, uint64_t value);
  /* Moves bytes both ways without blocking and reports arrivals to sink.
   * Returns the number of things that moved (0: nothing to do), or -1 when
   * a link failed (logged, naming the peer rank; `failed` gets the link). */
  int (*progress)(void *ctx, const net_sink *sink, int *failed);
  /* Descriptors to sleep on when idle (readable: something arrived; for a
   * link with queued bytes, writable): fills at most max, returns how many. */
  int (*pollfds)(void *ctx, struct pollfd *fds, int max);
  /* Whether pieces the backend took are still queued to go out (the proxy
   * flushes them before it stops); NULL: the backend queues nothing. */
  int (*pending)(void *ctx);
  /* Bytes moved so far each way (for `baton bench`). */
  void (*stats)(void *ctx, uint64_t *sent, uint64_t *received);
  /* Closes every link at once, without goodbye, so that each peer notices
   * (a fault or an abort here); later calls fail.  Frees nothing. */
  void (*abort)(void *ctx);
  /* Says goodbye to every live link (best effort, bounded) and frees all. */
  void (*close)(void *ctx);
} net_backend;

extern const net_backend net_socket_backend;
extern const net_backend net_ib_backend;

#endif
