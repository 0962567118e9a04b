/* tp_p2p.h -- the NVLink/PCIe peer-to-peer transport: FIFOs in GPU memory
 * reached by peer access (one process) or CUDA IPC (one process per GPU).
 *
 * Every rank holds one pool: the FIFO and head word of each connection it
 * receives on, the tail word of each it sends on, and its private counts.
 * The connection set (sorted (src, dst, chan) keys) is the same on every
 * rank, so each rank computes where any other rank keeps any connection;
 * only the pool base addresses are exchanged. */
#ifndef TP_P2P_H
#define TP_P2P_H

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

/* What a rank publishes so that peers can reach its pool. */
typedef struct tp_handle {
  char ipc[64];          /* cudaIpcMemHandle_t */
  uint64_t base;         /* the pool's address in its own process */
  int32_t dev;           /* CUDA device of the rank */
  int32_t pid;
  uint64_t host;         /* hash of the host name */
} tp_handle;

typedef struct tp_p2p tp_p2p;

/* Sorts and deduplicates keys in place; returns the new count. */
int tp_keys_normalize(tp_key *keys, int n);

/* Allocates (zeroed) rank's pool on the current CUDA device for the
 * connection set keys[0..nkeys) with FIFOs of fifo_bytes. */
bt_result tp_p2p_create(tp_p2p **out, int rank, int nranks, const tp_key *keys, int nkeys, int64_t fifo_bytes);

/* Fills h with what peers need (an IPC handle when ipc is 1). */
bt_result tp_p2p_export(tp_p2p *t, int ipc, tp_handle *h);

/* Makes every peer's pool reachable: peer access when a peer's pid is
 * ours, CUDA IPC otherwise.  all[] has nranks entries. */
bt_result tp_p2p_connect(tp_p2p *t, const tp_handle *all);

/* The send (dir 0) or receive (dir 1) side of connection (this rank ->
 * peer) or (peer -> this rank) on (chan, lane, proto), as the interpreter
 * needs it.  BT_ERR_INVALID when the key is not in the set. */
bt_result tp_p2p_side(tp_p2p *t, int peer, int chan, int lane, int proto, int dir, ip_gconn *out);

int64_t tp_p2p_fifo_bytes(const tp_p2p *t);
void tp_p2p_free(tp_p2p *t);

#endif
