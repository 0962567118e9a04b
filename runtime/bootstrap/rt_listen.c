/* rt_listen.c -- a listener that survives floods (rt_listen.h): accepting
 * in batches, shedding when out of descriptors, logging dropped strangers
 * without flooding the log. */
#include "rt_listen.h"

#include "rt_log.h"
#include "rt_param.h"

#include <string.h>
#include <unistd.h>

void rt_listener_init(rt_listener *l, int fd, const char *who, unsigned sub) {
  memset(l, 0, sizeof *l);
  l->fd = fd;
  l->reserve = fd >= 0 ? rt_socket_reserve() : -1;
  l->max_pending = (int)rt_param_int(RT_PARAM_BOOTSTRAP_MAX_PENDING);
  if (l->max_pending < 1) l->max_pending = 1;
  l->auth_ns = rt_param_int(RT_PARAM_BOOTSTRAP_AUTH_MS) * 1000000;
  if (l->auth_ns < 1000000) l->auth_ns = 1000000;
  l->quiet_until = -1;
  l->who = who;
  l->sub = sub;
}

void rt_listener_close(rt_listener *l) {
  if (l->dropped && l->logged)
    LOG_INFO(l->sub, "%s: dropped %lu more connections that did not prove they belong to the job",
             l->who, l->dropped);
  if (l->fd >= 0) close(l->fd);
  if (l->reserve >= 0) close(l->reserve);
  l->fd = l->reserve = -1;
  l->dropped = 0;
}

int rt_listener_pollable(const rt_listener *l, int64_t now) {
  return l->fd >= 0 && (l->quiet_until < 0 || now >= l->quiet_until);
}

void rt_listener_dropped(rt_listener *l, const char *addr, const char *why) {
  enum { FULL_LINES = 8 };
  int64_t now = rt_time_ns();
  if (l->logged < FULL_LINES) {
    l->logged++;
    LOG_WARN(l->sub, "%s: closed a connection from %s: %s%s", l->who, addr, why,
             l->logged == FULL_LINES ? " (more such connections are counted, not logged one by one)" : "");
    l->next_log = now + RT_LISTEN_LOG_EVERY_NS;
    return;
  }
  l->dropped++;
  if (now >= l->next_log) {
    LOG_WARN(l->sub, "%s: closed %lu more connections that did not prove they belong to the "
             "job (the last from %s: %s)", l->who, l->dropped, addr, why);
    l->dropped = 0;
    l->next_log = now + RT_LISTEN_LOG_EVERY_NS;
  }
}

int rt_listener_accept(rt_listener *l, void *owner, rt_listen_add_fn add, rt_listen_evict_fn evict) {
  for (int i = 0; i < RT_LISTEN_BATCH; i++) {
    int fd;
    rt_sockaddr peer;
    rt_accept a = rt_socket_accept(l->fd, &fd, &peer);
    if (a == RT_ACCEPT_NONE) return 0;
    if (a == RT_ACCEPT_BROKEN) return -1;
    if (a == RT_ACCEPT_SHORT) {
      /* Out of descriptors: the pending connections are the ones to give
       * up (they may all be a flood's); failing that, shed the queue's head
       * with the spare descriptor and stay away from the listener a while
       * rather than spin on it. */
      if (evict(owner)) continue;
      if (!rt_socket_shed(l->fd, &l->reserve)) l->quiet_until = rt_time_ns() + RT_LISTEN_QUIET_NS;
      return 0;
    }
    if (add(owner, fd, &peer)) close(fd);
  }
  return 0;
}
