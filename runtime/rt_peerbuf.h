/* rt_peerbuf.h -- every rank's buffers of one call on a communicator that
 * spans processes: where each rank's input and output lie (their
 * allocation -- its CUDA IPC handle, or for cuMem allocations their file
 * descriptors, passed over a Unix socket (rt_fdpass.h) -- and the offset in
 * it), exchanged over the bootstrap when a call is captured into a CUDA
 * graph, and the peers' allocations mapped once each, kept until their
 * owner frees them (the exchange after learns it) or the communicator
 * ends (docs/RUNTIME.md, "Direct programs"). */
#ifndef RT_PEERBUF_H
#define RT_PEERBUF_H

#include <stdint.h>

#include "rt_result.h"

struct rt_bootstrap;
typedef struct rt_peerbufs rt_peerbufs;

/* A rank's side of the exchange. */
typedef struct rt_peerbuf_self {
  int rank, nranks, dev;
  uint64_t host;              /* tp_peer's hash of this host */
  int max_maps;               /* BATON_PEER_MAPS: peers' allocations kept mapped at most */
  const char *what;           /* what the buffers are, for the log: "a captured call", "a registered window" */
  int64_t in_bytes, out_bytes;  /* the bytes of this rank's input and output the call reaches from their pointers */
  uint64_t key;               /* what the call is: every rank's must be the same (else BT_ERR_INVALID) */
  uint64_t prog;              /* what runs it here: where ranks' differ, all give up alike (BT_ERR_UNSUPPORTED) */
} rt_peerbuf_self;

/* Exchanges where every rank's call buffers lie and fills in[r], out[r]
 * (r != rank) with rank r's input and output as this GPU reaches them;
 * in[rank] and out[rank] are this rank's, given.  Collective over bs:
 * every rank of the communicator calls it for the same call.  A peer's
 * allocation is mapped the first time it is seen (through *pb, made on
 * first use) and kept until an exchange learns that its owner freed it
 * (each rank looks at a few of its own allocations its peers map every
 * exchange, at all of them where the call brings a new one): every rank
 * then unmaps it (cuMem allocations mapped side by side: once all of the
 * range is freed).  BT_ERR_UNSUPPORTED on every rank alike, logged at
 * INFO, when some rank's buffer cannot be exported (neither cudaMalloc's
 * nor in cuMem allocations made with file descriptors among their handle
 * types -- up to 32 mapped side by side, as PyTorch's expandable segments
 * map them), mapped, or would pass max_maps (counted in allocations);
 * BT_ERR_INVALID on every rank alike, said, where the ranks' keys differ
 * (their calls are not the same one: made on some ranks only, in another
 * order, or with buffers registered on some ranks only); other errors are
 * the bootstrap's or CUDA's.  Safe while the
 * calling thread's stream is being captured. */
bt_result rt_peerbuf_exchange(rt_peerbufs **pb, struct rt_bootstrap *bs, const rt_peerbuf_self *me, char **in,
                              char **out);

/* Peers' allocations mapped now (each cuMem one a mapping spans counts;
 * for the log and tests). */
int rt_peerbuf_count(const rt_peerbufs *pb);

/* Closes every mapping; NULL is ignored. */
void rt_peerbufs_free(rt_peerbufs *pb);

#endif
