/* rt_bootstrap.h -- out-of-band TCP bootstrap for one process per GPU: unique id, allgather, barrier, tagged messages. */
#ifndef RT_BOOTSTRAP_H
#define RT_BOOTSTRAP_H

#include "rt_result.h"

#include <stddef.h>
#include <stdint.h>

/* An opaque 128-byte id naming one bootstrap root.  It holds the root's
 * address and a random magic; pass it to every rank by any means (MPI
 * broadcast, a file, torch's store). */
typedef struct rt_unique_id { char bytes[128]; } rt_unique_id;

typedef struct rt_bootstrap rt_bootstrap;

/* Creates a unique id.  The caller's process becomes the root: a
 * background thread listens (on BATON_COMM_ID if set, else on the interface
 * chosen by BATON_SOCKET_IFNAME, on a free port) until all ranks of one
 * rt_bootstrap_init have registered, sends them the table of addresses and
 * exits.  The calling process must outlive that.  Errors (a malformed
 * BATON_COMM_ID, no usable interface) are logged and returned. */
bt_result rt_bootstrap_unique_id(rt_unique_id *id);

/* Joins the bootstrap named by id as `rank` of `nranks`: opens this rank's
 * own listener, registers with the root, receives every rank's address and
 * waits in a barrier until all ranks are present.  Collective over all
 * ranks.  Each blocking step waits at most BATON_BOOTSTRAP_TIMEOUT seconds;
 * errors (an id from another run, a rank that never comes, a dead peer)
 * are logged naming this rank and the peer, and *bs is left NULL.  The
 * listeners drop connections that do not send the id's magic in a
 * well-formed greeting within BATON_BOOTSTRAP_AUTH_MS (at most
 * BATON_BOOTSTRAP_MAX_PENDING wait at once), so floods delay, not kill, a
 * job. */
bt_result rt_bootstrap_init(rt_bootstrap **bs, const rt_unique_id *id, int rank, int nranks);

int rt_bootstrap_rank(const rt_bootstrap *bs);
int rt_bootstrap_nranks(const rt_bootstrap *bs);

/* Ring allgather: data holds nranks slices of bytes_per_rank bytes; this
 * rank's slice (at rank * bytes_per_rank) is given, the others are filled.
 * Collective; every rank must pass the same bytes_per_rank. */
bt_result rt_bootstrap_allgather(rt_bootstrap *bs, void *data, size_t bytes_per_rank);

/* Returns once every rank has entered the barrier. */
bt_result rt_bootstrap_barrier(rt_bootstrap *bs);

/* Point-to-point messages, matched by (peer, tag); tag is 0..2^31-1.
 * Messages from one peer with different tags may be received in any
 * order; with the same tag in the order sent.  send returns once the data
 * is handed to the kernel (it never waits for the matching receive, while
 * waiting it keeps accepting incoming messages, so two ranks that send to
 * each other before receiving do not deadlock).  recv needs exactly
 * `bytes` bytes; a message of another size is an error.  A message (or an
 * allgather slice) over BATON_BOOTSTRAP_MAX_MSG_MB is refused with
 * BT_ERR_INVALID and bs stays usable; a rank holds at most
 * BATON_BOOTSTRAP_MAX_QUEUED_MB of messages not yet received, beyond which
 * the operation fails naming the sending peer. */
bt_result rt_bootstrap_send(rt_bootstrap *bs, int peer, int tag, const void *data, size_t bytes);
bt_result rt_bootstrap_recv(rt_bootstrap *bs, int peer, int tag, void *data, size_t bytes);

/* Makes every blocked and later operation on bs fail at once, and closes
 * this rank's connections so that peers blocked on it fail too.  Safe from
 * any thread and from a signal handler; the operations themselves must be
 * called from one thread at a time. */
void rt_bootstrap_abort(rt_bootstrap *bs);

/* Closes every connection and frees bs (NULL is fine).  Messages already
 * sent are still delivered. */
void rt_bootstrap_free(rt_bootstrap *bs);

#endif
