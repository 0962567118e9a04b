/* rt_shmbox.h -- a mailbox in shared memory for the processes of one
 * communicator's ranks on one host: an allgather of a small record in a
 * microsecond or two, where the bootstrap's takes a round trip through
 * TCP and poll (tens of microseconds).  Made over the bootstrap; the
 * per-call exchange of buffers (rt_peerbuf.c) runs on it. */
#ifndef RT_SHMBOX_H
#define RT_SHMBOX_H

#include <stddef.h>
#include <stdint.h>

#include "rt_result.h"

struct rt_bootstrap;
typedef struct rt_shmbox rt_shmbox;

#define RT_SHMBOX_MAX_BYTES 65536   /* the largest record a rank puts in per allgather */

/* Collective over bs (every rank of it, in the same order as its other
 * operations): makes a mailbox of records of up to `bytes` bytes each
 * (1..RT_SHMBOX_MAX_BYTES), rank 0's shared memory that every rank maps and
 * rank 0 then unlinks (nothing is left behind, even after a crash).
 * BT_ERR_UNSUPPORTED on every rank alike, logged at INFO, where some rank
 * cannot map it (another host, another /dev/shm); the bootstrap's errors
 * otherwise.  timeout_ns bounds each later allgather's wait. */
bt_result rt_shmbox_open(rt_shmbox **box, struct rt_bootstrap *bs, int rank, int nranks, size_t bytes,
                         int64_t timeout_ns);

/* An allgather through the mailbox: data holds nranks records of `bytes`
 * (at most the mailbox's), this rank's at rank * bytes, the others filled
 * in.  Collective: every rank calls it as often, in the same order.
 * BT_ERR_TIMEOUT when a peer has not put its record in within the
 * mailbox's timeout, BT_ERR_REMOTE as soon as a peer's process is gone
 * (asked of peers in this process's PID namespace; either says which
 * rank); BT_ERR_INVALID for a record too large. */
bt_result rt_shmbox_allgather(rt_shmbox *box, void *data, size_t bytes);

/* Unmaps the mailbox; NULL is ignored. */
void rt_shmbox_close(rt_shmbox *box);

#endif
