/* tp.h -- the transport interface: one vtable per way of carrying a
 * connection's messages between two ranks, and the set of transports a
 * communicator uses, tried in priority order for each pair of ranks.
 *
 * A connection is a tp_key (sender, receiver, channel, lane, protocol).
 * Whatever carries it, the interpreter sees the same FIFO (ip_gconn): a
 * ring of slots, a head word the sender advances, a tail word the
 * receiver advances.  P2P puts the FIFO in the receiver's GPU memory; the
 * network transport gives each side a FIFO of its own in host memory and
 * a proxy thread that moves messages between them.
 *
 * Set-up, on every rank: tp_peer_self, an allgather of tp_peer (host,
 * process, device), tp_peer_group (node groups); tp_set_create (each
 * transport sets up the connections it carries and writes a fixed-size
 * blob); an allgather of the blobs; tp_set_connect. */
#ifndef TP_H
#define TP_H

#include <stdint.h>

#include "ip_gpu.h"
#include "rt_result.h"

/* One connection: sender, receiver, IR channel, the lane (each IR thread
 * block runs as several CUDA blocks, lanes, with connections of their
 * own), and the protocol its messages use (an ir_proto).  Every protocol
 * has FIFOs of its own, as in NCCL: LL and LL128 receivers recognize a
 * line by the flag in it, and a Simple message left in the same slot is
 * raw data that can hold the very value expected (seen: wrong sums when
 * LL128 programs ran after Simple ones on shared FIFOs). */
typedef struct tp_key { int32_t src, dst, chan, lane, proto; } tp_key;

/* Sorts and deduplicates keys in place; returns the new count. */
int tp_keys_normalize(tp_key *keys, int n);
int tp_key_cmp(const void *a, const void *b);

/* Connections rank r receives on (*nrecv) and sends on (*nsend) among
 * keys[0..n). */
void tp_keys_count(const tp_key *keys, int n, int r, int64_t *nrecv, int64_t *nsend);

/* Where key k stands among the sorted keys[0..n), for a transport that
 * lays out each rank's pool from the same keys on every rank: its index
 * among the keys its receiver receives on (ri) and among those its sender
 * sends on (si), and how many keys its receiver and its sender each
 * receive on (nrecv_dst, nrecv_src: the receive sides come first in a
 * pool).  One pass over the keys. */
typedef struct tp_place { int64_t ri, si, nrecv_dst, nrecv_src; } tp_place;
tp_place tp_keys_place(const tp_key *keys, int n, const tp_key *k);

/* Where a rank runs.  node is filled by tp_peer_group. */
typedef struct tp_peer {
  uint64_t host;         /* hash of the host name */
  uint64_t gpu;          /* hash of the GPU's UUID (0: unknown), filled by the runtime: which ranks share a GPU */
  int32_t pid, dev;
  int32_t node;          /* node group */
  int32_t pad;
} tp_peer;

void tp_peer_self(tp_peer *me, int dev);

/* Numbers the node groups of all[0..nranks): ranks on one host with equal
 * r / node_ranks (node_ranks 0: any) share a group.  Returns the count. */
int tp_peer_group(tp_peer *all, int nranks, int64_t node_ranks);

/* Host memory the GPU can reach (pinned and mapped in the runtime; plain
 * memory in tests, where threads play the GPU).  alloc returns zeroed,
 * page-aligned memory and its address for the GPU. */
typedef struct tp_hostmem {
  void *(*alloc)(size_t bytes, void **dev);
  void (*free)(void *p);
} tp_hostmem;

/* Plain heap memory (the GPU address is the host one): for runs where
 * threads play the GPUs. */
extern const tp_hostmem tp_heap_mem;

/* What every transport of a communicator is set up with. */
typedef struct tp_ctx {
  int rank, nranks;
  const tp_peer *peers;          /* nranks, node groups filled */
  int nslots;
  int64_t slot_bytes;            /* FIFO: nslots slots of slot_bytes */
  int ipc;                       /* one process per GPU (P2P exports CUDA IPC handles) */
  const tp_hostmem *mem;
  volatile int32_t *abort;       /* host address of the flag that stops this rank's kernels */
} tp_ctx;

/* Bytes of the blob one transport of one rank publishes. */
#define TP_BLOB_BYTES 256

typedef struct tp_ops {
  const char *name;
  /* 1 when this transport can carry messages between ranks a and b. */
  int (*can_connect)(const tp_ctx *x, int a, int b);
  /* Sets up keys[0..nkeys) (every rank's connections this transport
   * carries, sorted, the same list on every rank) and fills blob. */
  bt_result (*setup)(const tp_ctx *x, const tp_key *keys, int nkeys, void **state, unsigned char blob[TP_BLOB_BYTES]);
  /* Connects, given every rank's blob (nranks x TP_BLOB_BYTES). */
  bt_result (*connect)(void *state, const unsigned char *blobs);
  /* The FIFO of key k as its sender (dir 0) or receiver (dir 1) sees it. */
  bt_result (*side)(void *state, const tp_key *k, int dir, ip_gconn *out);
  /* Work was launched: a proxy wakes up.  NULL when nothing to do. */
  void (*kick)(void *state);
  /* The transport's own asynchronous error (logged once), or BT_OK. */
  bt_result (*error)(void *state);
  /* Bytes it moved each way so far; NULL when it keeps no count. */
  void (*stats)(void *state, uint64_t *sent, uint64_t *received);
  void (*free)(void *state);
} tp_ops;

extern const tp_ops tp_p2p_ops;   /* same node group; needs CUDA */
extern const tp_ops tp_net_ops;   /* any two ranks: sockets or verbs through a proxy thread */

typedef struct tp_set tp_set;

/* Assigns each of keys[0..nkeys) (all ranks' connections, normalized) to
 * the first of ops[0..nops) that can connect its two ranks, and sets up
 * every transport that got any.  A pair no transport connects is an error
 * naming both ranks. */
bt_result tp_set_create(tp_set **out, const tp_ctx *x, const tp_ops *const *ops, int nops, const tp_key *keys,
                        int nkeys);

/* This rank's record for the allgather: tp_set_blob_bytes(nops) bytes. */
const unsigned char *tp_set_blob(const tp_set *s);
size_t tp_set_blob_bytes(int nops);

/* Connects every transport given all ranks' records (nranks of them). */
bt_result tp_set_connect(tp_set *s, const unsigned char *records);

/* The FIFO of connection (this rank -> peer) for dir 0 or (peer -> this
 * rank) for dir 1 on (chan, lane, proto).  BT_ERR_INVALID when the key is
 * not in the set. */
bt_result tp_set_side(tp_set *s, int peer, int chan, int lane, int proto, int dir, ip_gconn *out);

/* Whether any connection touching this rank uses transport `name`. */
int tp_set_uses(const tp_set *s, const char *name);

void tp_set_kick(tp_set *s);
bt_result tp_set_error(tp_set *s);
/* Bytes the network moved for this rank each way. */
void tp_set_stats(tp_set *s, uint64_t *sent, uint64_t *received);
void tp_set_free(tp_set *s);

#endif
