/* rt_bootstrap_io.c -- whole messages read and written on a blocking
 * bootstrap connection, within a deadline, stopped by an abort descriptor:
 * the root's replies and a joining rank's registration (rt_bootstrap_root.c,
 * rt_bootstrap_join.c). */
#include "rt_bootstrap_int.h"

/* Waits for fd to be ready for `events`; maps the outcome. */
static bs_io wait_fd(int fd, short events, int64_t deadline, int abort_fd) {
  struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = abort_fd, .events = POLLIN}};
  int n = rt_socket_poll(p, abort_fd >= 0 ? 2 : 1, deadline);
  if (n == 0) return BS_IO_TIMEOUT;
  if (n < 0) return BS_IO_CLOSED;
  if (abort_fd >= 0 && p[1].revents) return BS_IO_ABORTED;
  return BS_IO_OK;
}

bs_io bs_write_all(int fd, const void *buf, size_t n, int64_t deadline, int abort_fd) {
  size_t done = 0;
  while (done < n) {
    struct iovec v = {(char *)buf + done, n - done};
    ssize_t k = rt_socket_send(fd, &v, 1);
    if (k < 0) return BS_IO_CLOSED;
    done += k;
    if (k == 0) {
      bs_io w = wait_fd(fd, POLLOUT, deadline, abort_fd);
      if (w != BS_IO_OK) return w;
    }
  }
  return BS_IO_OK;
}

bs_io bs_read_all(int fd, void *buf, size_t n, int64_t deadline, int abort_fd) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = rt_socket_recv(fd, (char *)buf + done, n - done);
    if (k < 0) return BS_IO_CLOSED;
    done += k;
    if (k == 0) {
      bs_io w = wait_fd(fd, POLLIN, deadline, abort_fd);
      if (w != BS_IO_OK) return w;
    }
  }
  return BS_IO_OK;
}
