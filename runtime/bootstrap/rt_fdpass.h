/* rt_fdpass.h -- file descriptors between the processes of one host, the
 * way CUDA's cuMem allocations are shared: each process listens on a Unix
 * socket of the abstract namespace named by a communicator's key and its
 * rank; a sender connects and passes descriptors in one SCM_RIGHTS message
 * with a header (tag, sender rank, count); the receiver takes only
 * messages whose sender's credentials match the process the sender rank
 * runs in, and closes everything else. */
#ifndef RT_FDPASS_H
#define RT_FDPASS_H

#include <stdint.h>
#include <sys/types.h>

#include "rt_result.h"

/* Descriptors one message carries at most. */
#define RT_FDPASS_MAX 64

typedef struct rt_fdpass rt_fdpass;

/* Listens as `rank` under `key` (a communicator's, or a process's own
 * random one that its peers learn).  BT_ERR_SYSTEM (logged)
 * when the socket cannot be made, e.g. the name is taken. */
bt_result rt_fdpass_open(rt_fdpass **fp, uint64_t key, int rank);

/* Sends n (1..RT_FDPASS_MAX) descriptors to the listener of `peer` made
 * with `peer_key`, tagged; waits up to timeout_ms for it to exist.  The
 * descriptors stay open here.  BT_ERR_TIMEOUT or BT_ERR_SYSTEM (logged)
 * when it cannot. */
bt_result rt_fdpass_send(rt_fdpass *fp, uint64_t peer_key, int peer, uint64_t tag, const int *fds, int n,
                         int timeout_ms);

/* Receives one tagged message from each rank r with want[r] > 0 (want[r]
 * descriptors each, into fds[r * RT_FDPASS_MAX + k]), the sender's process
 * being pids[r] (0: a process of another PID namespace, whose pid cannot be
 * checked here; its tag, rank and count still are); a message from anyone
 * else, with another tag or count, is closed and dropped.  On error every
 * descriptor received is closed.  BT_ERR_TIMEOUT when not all came within
 * timeout_ms. */
bt_result rt_fdpass_recv(rt_fdpass *fp, int nranks, const int *want, const pid_t *pids, uint64_t tag, int *fds,
                         int timeout_ms);

/* Stops listening; NULL is ignored. */
void rt_fdpass_close(rt_fdpass *fp);

#endif
