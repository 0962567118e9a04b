/* rt_bootstrap_int.h -- the bootstrap's wire formats and helpers shared by the root and the ranks (internal). */
#ifndef RT_BOOTSTRAP_INT_H
#define RT_BOOTSTRAP_INT_H

#include "rt_bootstrap.h"
#include "rt_socket.h"

#include <stdint.h>

/* Wire formats, all integers big-endian:
 *   unique id (128)   "BTN1", magic u64, root address (32), zeros
 *   rank -> root (48) magic u64, rank u32, nranks u32, rank's listen address (32)
 *   root -> rank      status u32, length u32, then length bytes: the table
 *                     (nranks addresses of 32 bytes) when status is 0, else
 *                     an error message (status 1: invalid input, 2: a rank
 *                     is missing or died)
 *   peer hello (16)   magic u64, rank u32, nranks u32: first on a rank-to-rank
 *                     connection, written by the rank that connected (the
 *                     sender; each connection carries data one way)
 *   message header (16) tag u32, 0 u32, length u64, then length bytes */
enum {
  BS_ID_TAG_LEN = 4,
  BS_REGISTER_LEN = 16 + RT_SOCKADDR_WIRE,
  BS_REPLY_LEN = 8,
  BS_HELLO_LEN = 16,
  BS_HEADER_LEN = 16,
  BS_ERRMSG_MAX = 1024,
  BS_MAX_RANKS = 1 << 20
};
enum { BS_REPLY_OK = 0, BS_REPLY_INVALID = 1, BS_REPLY_MISSING = 2 };

static inline void bs_put32(unsigned char *p, uint32_t v) {
  p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline uint32_t bs_get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void bs_put64(unsigned char *p, uint64_t v) {
  bs_put32(p, v >> 32); bs_put32(p + 4, (uint32_t)v);
}
static inline uint64_t bs_get64(const unsigned char *p) {
  return (uint64_t)bs_get32(p) << 32 | bs_get32(p + 4);
}

/* BATON_BOOTSTRAP_TIMEOUT in nanoseconds (at least one second). */
int64_t bs_timeout_ns(void);

/* Reads the root's address and magic from an id; BT_ERR_INVALID (logged,
 * naming `who`) when the bytes are not a baton unique id. */
bt_result bs_id_decode(const rt_unique_id *id, const char *who, uint64_t *magic, rt_sockaddr *root);

/* Returns once the root with this magic that runs in this process (if any)
 * has sent its last reply and closed its sockets, or at the deadline
 * (rt_time_ns clock). */
void bs_root_wait(uint64_t magic, int64_t deadline);

/* Outcome of a blocking transfer on a non-blocking socket. */
typedef enum { BS_IO_OK, BS_IO_TIMEOUT, BS_IO_CLOSED, BS_IO_ABORTED } bs_io;

/* Moves exactly n bytes before the deadline, or until abort_fd (may be -1)
 * becomes readable.  BS_IO_CLOSED leaves errno set. */
bs_io bs_write_all(int fd, const void *buf, size_t n, int64_t deadline, int abort_fd);
bs_io bs_read_all(int fd, void *buf, size_t n, int64_t deadline, int abort_fd);

#endif
