/* rt_fdpass.c -- file descriptors between the processes of one host over
 * Unix sockets of the abstract namespace (SCM_RIGHTS), senders checked by
 * their credentials (rt_fdpass.h). */
#define _GNU_SOURCE
#include "rt_fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rt_log.h"
#include "rt_socket.h"
#include "rt_time.h"

struct rt_fdpass {
  int fd;          /* the listener */
  uint64_t key;
  int rank;
};

/* The header before the descriptors. */
typedef struct fp_hdr {
  uint64_t magic, tag;
  int32_t rank, n;
} fp_hdr;
#define FP_MAGIC 0x62746e6664706173ull   /* "btnfdpas" */

/* The listener's address of `rank` of communicator `key`: an abstract name
 * (a leading zero byte; nothing in the file system). */
static socklen_t address(struct sockaddr_un *a, uint64_t key, int rank) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "baton-fd-%016llx-%d", (unsigned long long)key, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

bt_result rt_fdpass_open(rt_fdpass **fp, uint64_t key, int rank) {
  *fp = NULL;
  struct sockaddr_un a;
  socklen_t len = address(&a, key, rank);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&a, len) || listen(s, 128)) {
    const int e = errno;
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: cannot listen for file descriptors of peers (%s)", rank, strerror(e));
    if (s >= 0) close(s);
    return BT_ERR_SYSTEM;
  }
  rt_fdpass *p = calloc(1, sizeof *p);
  if (!p) {
    close(s);
    return BT_ERR_NOMEM;
  }
  p->fd = s;
  p->key = key;
  p->rank = rank;
  *fp = p;
  return BT_OK;
}

bt_result rt_fdpass_send(rt_fdpass *fp, uint64_t peer_key, int peer, uint64_t tag, const int *fds, int n,
                         int timeout_ms) {
  if (n < 1 || n > RT_FDPASS_MAX) return BT_ERR_INVALID;
  struct sockaddr_un a;
  socklen_t len = address(&a, peer_key, peer);
  const int64_t end = rt_time_ns() + (int64_t)timeout_ms * 1000000;
  int s = -1;
  for (;;) {   /* the peer's listener may not be up yet */
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) break;
    if (!connect(s, (struct sockaddr *)&a, len)) break;
    int e = errno;
    close(s);
    s = -1;
    if ((e != ECONNREFUSED && e != ENOENT && e != EAGAIN) || rt_time_ns() >= end) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: cannot reach rank %d's listener for file descriptors (%s)", fp->rank, peer,
               e == ECONNREFUSED || e == ENOENT ? "not there in time" : strerror(e));
      return e == ECONNREFUSED || e == ENOENT ? BT_ERR_TIMEOUT : BT_ERR_SYSTEM;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (s < 0) return BT_ERR_SYSTEM;
  fp_hdr h = {FP_MAGIC, tag, fp->rank, n};
  struct iovec iov = {&h, sizeof h};
  union {
    char buf[CMSG_SPACE(sizeof(int) * RT_FDPASS_MAX)];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
  ssize_t w = sendmsg(s, &m, MSG_NOSIGNAL);
  int e = errno;
  close(s);
  if (w != (ssize_t)sizeof h) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: sending file descriptors to rank %d: %s", fp->rank, peer,
             w < 0 ? strerror(e) : "short write");
    return BT_ERR_SYSTEM;
  }
  return BT_OK;
}

/* Reads one message from connection s: its header and descriptors (into
 * got, *ngot of them; every one it carried is taken, so none leaks). */
static int read_one(int s, fp_hdr *h, int *got, int *ngot) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * RT_FDPASS_MAX)];
    struct cmsghdr align;
  } u;
  struct iovec iov = {h, sizeof *h};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  *ngot = 0;
  ssize_t r = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
  if (r < 0) return 0;   /* nothing came (the connection's read timed out): no control data to look at */
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k && *ngot < RT_FDPASS_MAX; i++) memcpy(&got[(*ngot)++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
  return r == (ssize_t)sizeof *h && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
}

bt_result rt_fdpass_recv(rt_fdpass *fp, int nranks, const int *want, const pid_t *pids, uint64_t tag, int *fds,
                         int timeout_ms) {
  int left = 0;
  for (int r = 0; r < nranks; r++) {
    for (int k = 0; k < RT_FDPASS_MAX; k++) fds[r * RT_FDPASS_MAX + k] = -1;
    left += want[r] > 0;
  }
  char *done = calloc(nranks > 0 ? (size_t)nranks : 1, 1);
  if (!done) return BT_ERR_NOMEM;
  const int64_t end = rt_time_ns() + (int64_t)timeout_ms * 1000000;
  bt_result res = BT_OK;
  while (left > 0) {
    struct pollfd p = {fp->fd, POLLIN, 0};
    if (rt_socket_poll(&p, 1, end) <= 0) {
      res = BT_ERR_TIMEOUT;
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %d peers' file descriptors did not come in time", fp->rank, left);
      break;
    }
    int s = accept4(fp->fd, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) continue;
    /* A connection says nothing for a moment: whoever it is waits no longer. */
    struct timeval tv = {1, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct ucred cr;
    socklen_t cl = sizeof cr;
    fp_hdr h;
    int got[RT_FDPASS_MAX], ngot = 0;
    int okmsg = !getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) && read_one(s, &h, got, &ngot);
    close(s);
    okmsg = okmsg && h.magic == FP_MAGIC && h.tag == tag && h.rank >= 0 && h.rank < nranks && !done[h.rank] &&
            want[h.rank] == h.n && ngot == h.n && (!pids[h.rank] || cr.pid == pids[h.rank]);
    if (!okmsg) {   /* not ours, late, or hostile: its descriptors go */
      for (int i = 0; i < ngot; i++) close(got[i]);
      continue;
    }
    memcpy(&fds[h.rank * RT_FDPASS_MAX], got, sizeof(int) * (size_t)ngot);
    done[h.rank] = 1;
    left--;
  }
  if (res)
    for (int i = 0; i < nranks * RT_FDPASS_MAX; i++)
      if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
  free(done);
  return res;
}

void rt_fdpass_close(rt_fdpass *fp) {
  if (!fp) return;
  close(fp->fd);
  free(fp);
}
