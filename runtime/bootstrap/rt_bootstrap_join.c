/* rt_bootstrap_join.c -- a rank joining the job: its listening socket, its registration with the root, the table of every rank's address. */
#include "rt_bootstrap_int.h"
#include "rt_log.h"
#include "rt_param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* This rank's listen address: the BATON_SOCKET_IFNAME interface, else the
 * local address of its connection to the root (one the root can reach). */
static bt_result own_address(rt_bootstrap *bs, int root_fd, const rt_sockaddr *root, rt_sockaddr *a) {
  const char *spec = rt_param_str(RT_PARAM_SOCKET_IFNAME);
  if (*spec) return rt_socket_pick_interface(spec, root->sa.sa_family, a, NULL);
  socklen_t len = sizeof *a;
  memset(a, 0, sizeof *a);
  if (getsockname(root_fd, &a->sa, &len)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: getsockname failed: %s", bs->who, strerror(errno));
    return BT_ERR_SYSTEM;
  }
  if (a->sa.sa_family == AF_INET) a->in4.sin_port = 0;
  else a->in6.sin6_port = 0;
  return BT_OK;
}

/* Says what went wrong in a conversation with the root. */
static bt_result root_io_failed(rt_bootstrap *bs, bs_io io, const char *root, const char *doing) {
  LOG_WARN(RT_SUB_BOOTSTRAP, "%s: %s the root at %s: %s", bs->who, doing, root,
           io == BS_IO_TIMEOUT ? "timed out (BATON_BOOTSTRAP_TIMEOUT); did the process that created the id exit?"
           : io == BS_IO_ABORTED ? "aborted"
           : errno == ECONNRESET ? "the root closed the connection (did the process that created the id exit?)"
           : strerror(errno));
  return BT_ERR_SYSTEM;
}

/* Registers with the root and receives the address table into bs->addrs.
 * A registration the root closes unanswered was shed by a flooded root: it
 * is sent again on a new connection (a root that has gone refuses it). */
bt_result bs_join(rt_bootstrap *bs, const rt_sockaddr *root) {
  char where[RT_SOCKADDR_STRLEN], what[160], s[RT_SOCKADDR_STRLEN];
  rt_socket_str(root, where, sizeof where);
  snprintf(what, sizeof what, "%s: the root", bs->who);
  int64_t deadline = rt_time_ns() + bs->timeout_ns;
  int fd = -1;
  bt_result res = BT_OK;
  unsigned char reg[BS_REGISTER_LEN], rep[BS_REPLY_LEN];
  rt_sockaddr me;
  bs_io io;
  for (int tries = 0;; tries++) {
    CHECK(rt_socket_connect(root, deadline, bs->wake[0], what, &fd));
    if (bs->l.fd < 0) {
      int lfd;
      CHECK_GOTO(own_address(bs, fd, root, &me), res, out);
      CHECK_GOTO(rt_socket_listen(&me, BS_LISTEN_BACKLOG, &lfd), res, out);
      rt_listener_init(&bs->l, lfd, bs->who, RT_SUB_BOOTSTRAP);
      LOG_TRACE(RT_SUB_BOOTSTRAP, "%s: listening at %s", bs->who, rt_socket_str(&me, s, sizeof s));
      bs_put64(reg, bs->magic);
      bs_put32(reg + 8, (uint32_t)bs->rank);
      bs_put32(reg + 12, (uint32_t)bs->nranks);
      rt_socket_pack(&me, reg + 16);
    }
    io = bs_write_all(fd, reg, sizeof reg, deadline, bs->wake[0]);
    /* The root reports missing ranks after the timeout: wait a little longer. */
    if (io == BS_IO_OK)
      io = bs_read_all(fd, rep, sizeof rep, rt_time_ns() + bs->timeout_ns + BS_ROOT_GRACE_NS, bs->wake[0]);
    int shed = io == BS_IO_CLOSED && (errno == ECONNRESET || errno == EPIPE);
    if (!shed || rt_time_ns() >= deadline) break;
    close(fd);
    fd = -1;
    LOG_TRACE(RT_SUB_BOOTSTRAP, "%s: the root at %s closed the registration unanswered (try %d); again",
              bs->who, where, tries + 1);
    struct pollfd p = {.fd = bs->wake[0], .events = POLLIN};
    if (rt_socket_poll(&p, 1, rt_time_ns() + bs_retry_ns(tries)) > 0) {
      io = BS_IO_ABORTED;
      break;
    }
  }
  deadline = rt_time_ns() + bs->timeout_ns + BS_ROOT_GRACE_NS;
  if (io != BS_IO_OK) {
    res = root_io_failed(bs, io, where, "registering with");
    goto out;
  }
  uint32_t status = bs_get32(rep), len = bs_get32(rep + 4);
  if (status != BS_REPLY_OK) {
    char text[BS_ERRMSG_MAX + 1] = "", safe[4 * BS_ERRMSG_MAX + 1];
    if (len > BS_ERRMSG_MAX) len = BS_ERRMSG_MAX;
    if (bs_read_all(fd, text, len, deadline, bs->wake[0]) == BS_IO_OK) text[len] = 0;
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: the root at %s refused: %s", bs->who, where,
             rt_log_escape(safe, sizeof safe, text, len));
    res = status == BS_REPLY_INVALID ? BT_ERR_INVALID : BT_ERR_SYSTEM;
    goto out;
  }
  if (len != (uint64_t)bs->nranks * RT_SOCKADDR_WIRE) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: the root at %s sent a table of %u bytes, expected %zu", bs->who, where,
             len, (size_t)bs->nranks * RT_SOCKADDR_WIRE);
    res = BT_ERR_INTERNAL;
    goto out;
  }
  unsigned char *table = malloc(len);
  if (!table) { res = BT_ERR_NOMEM; goto out; }
  if ((io = bs_read_all(fd, table, len, deadline, bs->wake[0])) != BS_IO_OK) {
    free(table);
    res = root_io_failed(bs, io, where, "reading the table of addresses from");
    goto out;
  }
  for (int i = 0; i < bs->nranks && !res; i++)
    if (rt_socket_unpack(table + (size_t)i * RT_SOCKADDR_WIRE, &bs->addrs[i]) != BT_OK) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: the root at %s sent a malformed address for rank %d", bs->who, where, i);
      res = BT_ERR_INTERNAL;
    }
  free(table);
out:
  if (fd >= 0) close(fd);
  return res;
}
