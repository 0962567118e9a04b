/* fz_boot_root.c -- fuzzes the bootstrap root's registration engine with what up to eight hostile connections send. */
#define _GNU_SOURCE
#include "rt_bootstrap_int.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Input: a connection-count byte (1 + b % 8), then the connections' bytes:
 * each but the last preceded by its length (2 bytes, big-endian).  The
 * root's magic is FZ_MAGIC (the seeds' registrations carry it). */
#define FZ_MAGIC 0x0123456789abcdefull
enum { MAX_CONNS = 8 };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 1 || n > (1 << 16)) return 0;
  int nconns = 1 + d[0] % MAX_CONNS;
  d++;
  n--;
  root *r = bs_root_engine_new(FZ_MAGIC);
  if (!r) return 0;
  int far[MAX_CONNS];
  for (int i = 0; i < nconns; i++) {
    size_t len = n;
    if (i < nconns - 1) {
      len = n >= 2 ? (size_t)(d[0] << 8 | d[1]) : 0;
      d += n >= 2 ? 2 : n;
      n -= n >= 2 ? 2 : n;
      if (len > n) len = n;
    }
    far[i] = -1;
    int sv[2];
    if (!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
      int big = 1 << 20;
      setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
      setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
      fcntl(sv[0], F_SETFL, O_NONBLOCK);
      fcntl(sv[1], F_SETFL, O_NONBLOCK);
      size_t off = 0;
      while (off < len) {
        ssize_t k = send(sv[0], d + off, len - off, MSG_NOSIGNAL);
        if (k <= 0) break;
        off += k;
      }
      shutdown(sv[0], SHUT_WR);        /* kept open: the root's replies go there */
      if (bs_root_engine_add(r, sv[1])) { close(sv[0]); close(sv[1]); }
      else far[i] = sv[0];
    }
    d += len;
    n -= len;
  }
  for (int round = 0; round < 4 && !bs_root_engine_pump(r); round++) {}
  bs_root_engine_free(r);
  for (int i = 0; i < nconns; i++)
    if (far[i] >= 0) close(far[i]);
  return 0;
}
