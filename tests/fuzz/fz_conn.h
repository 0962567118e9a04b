/* fz_conn.h -- what the bootstrap fuzz targets share: cutting an input into
 * connections' bytes, and handing those bytes to an engine through a
 * socketpair, as a hostile peer that then stops sending would. */
#ifndef FZ_CONN_H
#define FZ_CONN_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* The job's magic in the seeds' greetings. */
#define FZ_MAGIC 0x0123456789abcdefull

/* The next connection's bytes of *d (n left): the last connection takes
 * the rest, every other one a 2-byte big-endian length first (cut to what
 * is left).  Advances *d and *n past the piece; returns its length and
 * its start in *piece. */
static inline size_t fz_next_piece(const uint8_t **d, size_t *n, int last, const uint8_t **piece) {
  size_t len = *n;
  if (!last) {
    size_t hdr = *n >= 2 ? 2 : *n;
    len = hdr == 2 ? (size_t)((*d)[0] << 8 | (*d)[1]) : 0;
    *d += hdr;
    *n -= hdr;
    if (len > *n) len = *n;
  }
  *piece = *d;
  *d += len;
  *n -= len;
  return len;
}

/* A socketpair, both ends non-blocking with 1 MiB buffers, whose far end
 * has sent d[0..len) (what does not fit is cut off: a peer that hung up)
 * and shut its writing side.  Returns the far end (kept open to take the
 * engine's answers) and the engine's end in *mine, or -1. */
static inline int fz_fed_pair(const uint8_t *d, size_t len, int *mine) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return -1;
  int big = 1 << 20;
  for (int i = 0; i < 2; i++) {
    setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    fcntl(sv[i], F_SETFL, O_NONBLOCK);
  }
  size_t off = 0;
  while (off < len) {
    ssize_t k = send(sv[0], d + off, len - off, MSG_NOSIGNAL);
    if (k <= 0) break;
    off += k;
  }
  shutdown(sv[0], SHUT_WR);
  *mine = sv[1];
  return sv[0];
}

#endif
