/* rt_listen.h -- a listener that survives floods, shared by the bootstrap
 * (its root and its ranks) and the network transport's set-up: it takes
 * new connections off the queue a batch at a time, asks its owner to make
 * room when the process is out of descriptors, and logs dropped strangers
 * without flooding the log.  The owner keeps its own list of pending (not
 * yet authenticated) connections, oldest first, bounded by max_pending,
 * each waiting auth_ns at most. */
#ifndef RT_LISTEN_H
#define RT_LISTEN_H

#include <stdint.h>

#include "rt_socket.h"

enum { RT_LISTEN_BATCH = 16 };                 /* connections accepted per wake-up, so that reads keep up */
#define RT_LISTEN_QUIET_NS 20000000LL          /* a listener out of descriptors is not polled for this long */
#define RT_LISTEN_LOG_EVERY_NS 10000000000LL   /* dropped strangers are summed up in one line this often */

typedef struct rt_listener {
  int fd, reserve;          /* the listening socket; a spare descriptor (rt_socket_shed) */
  int max_pending;          /* BATON_BOOTSTRAP_MAX_PENDING */
  int64_t auth_ns;          /* BATON_BOOTSTRAP_AUTH_MS in ns */
  int64_t quiet_until;      /* after a shortage: not polled before this (rt_time_ns) */
  const char *who;          /* "bootstrap root 1.2.3.4:5", "network: rank 2" */
  unsigned sub;             /* the log subsystem (RT_SUB_*) */
  unsigned long dropped;    /* strangers dropped since the last log line */
  int logged;               /* lines logged about strangers */
  int64_t next_log;
} rt_listener;

/* Callbacks of rt_listener_accept: add takes a new connection (returns -1
 * when it cannot: out of memory; the listener closes fd); evict closes the
 * owner's oldest pending connection (returns 0 when it has none). */
typedef int (*rt_listen_add_fn)(void *owner, int fd, const rt_sockaddr *peer);
typedef int (*rt_listen_evict_fn)(void *owner);

/* Sets l up for the listening socket fd (-1: none, for the fuzz seams),
 * logging under subsystem sub. */
void rt_listener_init(rt_listener *l, int fd, const char *who, unsigned sub);
/* Closes the listening socket and the spare descriptor. */
void rt_listener_close(rt_listener *l);

/* Whether to poll l->fd now (it is quiet for a while after a shortage). */
int rt_listener_pollable(const rt_listener *l, int64_t now);

/* Accepts up to RT_LISTEN_BATCH connections.  Returns -1 when the
 * listening socket is broken (logged), else 0. */
int rt_listener_accept(rt_listener *l, void *owner, rt_listen_add_fn add, rt_listen_evict_fn evict);

/* Logs that a connection from addr was closed because of why (a stranger, a
 * malformed greeting, a timeout, eviction): the first few in full, then one
 * line every ten seconds with the count. */
void rt_listener_dropped(rt_listener *l, const char *addr, const char *why);

#endif
