/* rt_bootstrap_int.h -- the bootstrap's wire formats and helpers shared by the root and the ranks (internal). */
#ifndef RT_BOOTSTRAP_INT_H
#define RT_BOOTSTRAP_INT_H

#include "rt_bootstrap.h"
#include "rt_listen.h"
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
 *                     sender); the accepting rank answers one byte, BS_ACK,
 *                     once it has adopted the connection, and nothing else:
 *                     data flows one way.  A hello closed without its BS_ACK
 *                     was shed (a flood) and is sent again on a new connection.
 *   message header (16) tag u32, 0 u32, length u64, then length bytes; tag
 *                     BS_TAG_NOTE carries a failing rank's error text (at most
 *                     BS_ERRMSG_MAX bytes) as its last words
 * A connection that has not sent a complete, well-formed registration or
 * hello within BATON_BOOTSTRAP_AUTH_MS is closed; at most
 * BATON_BOOTSTRAP_MAX_PENDING such connections wait at once (the oldest is
 * closed for a new one).  Messages longer than BATON_BOOTSTRAP_MAX_MSG_MB,
 * or beyond BATON_BOOTSTRAP_MAX_QUEUED_MB held unclaimed, end the sender's
 * connection with an error. */
enum {
  BS_ID_TAG_LEN = 4,
  BS_REGISTER_LEN = 16 + RT_SOCKADDR_WIRE,
  BS_REPLY_LEN = 8,
  BS_HELLO_LEN = 16,
  BS_HEADER_LEN = 16,
  BS_ERRMSG_MAX = 1024,
  BS_MAX_RANKS = 1 << 20,
  BS_ACK = 0x5a
};
#define BS_TAG_NOTE 0xffffffffu
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

/* Timings and sizes of the conversation that are not parameters. */
#define BS_LISTEN_BACKLOG 4096               /* listen(2) backlog of the root and the ranks */
#define BS_ROOT_GRACE_NS 2000000000LL        /* a rank waits this much past its timeout for the root's
                                              * reply: the root reports missing ranks at its timeout */
#define BS_RETRY_NS 10000000LL               /* a registration or hello shed unanswered is sent again
                                              * after this, doubling per try up to 32 times it */
#define BS_RETRY_MAX_SHIFT 5

/* When to send again after `tries` sends were shed (BS_RETRY_NS doubling). */
static inline int64_t bs_retry_ns(int tries) {
  return BS_RETRY_NS << (tries < BS_RETRY_MAX_SHIFT ? tries : BS_RETRY_MAX_SHIFT);
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

/* rt_bootstrap_io.c.  Moves exactly n bytes before the deadline, or until abort_fd (may be -1)
 * becomes readable.  BS_IO_CLOSED leaves errno set. */
bs_io bs_write_all(int fd, const void *buf, size_t n, int64_t deadline, int abort_fd);
bs_io bs_read_all(int fd, void *buf, size_t n, int64_t deadline, int abort_fd);

/* The earlier of two deadlines where -1 means none. */
static inline int64_t bs_earlier(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

/* ---- a rank's state (rt_bootstrap.c, rt_bootstrap_join.c) -----------------
 * Its connections and messages (struct conn, outc, msg) are rt_bootstrap.c's
 * own. */
/* Tags: user tags are 0..2^31-1; the collectives use the top bit, a kind
 * and a per-kind sequence number, so that ranks calling different
 * collectives are told so instead of timing out.  BS_TAG_NOTE (all ones)
 * is a failing rank's last words. */
#define TAG_INTERNAL 0x80000000u
enum { KIND_ALLGATHER = 1, KIND_BARRIER = 2, NKINDS };

struct rt_bootstrap {
  int rank, nranks;
  uint64_t magic;
  int64_t timeout_ns;
  size_t max_msg, max_held;  /* BATON_BOOTSTRAP_MAX_MSG_MB, _MAX_QUEUED_MB in bytes */
  size_t held;            /* bytes of unclaimed messages, and of bodies being read for the queue */
  char who[48];           /* "bootstrap rank R/N" */
  rt_sockaddr *addrs;     /* every rank's listen address */
  rt_listener l;          /* this rank's listener */
  int wake[2];            /* rt_bootstrap_abort writes here */
  int aborted;            /* set atomically by rt_bootstrap_abort */
  int broken;             /* an operation failed: every later one fails */
  struct outc *out;       /* peer -> the connection we send to it on */
  struct conn **in;       /* accepted connections: adopted ones and pending ones */
  int nin, capin;
  struct conn **from;     /* peer -> its connection to us, or NULL */
  struct msg *head, *tail; /* unclaimed messages, in arrival order */
  char fault[BS_ERRMSG_MAX]; /* a peer's misbehaviour or last words, for the running operation to report */
  char cause[BS_ERRMSG_MAX]; /* the first failing rank's words, passed on as they are */
  char **notes;           /* peer -> its last words (BS_TAG_NOTE), or NULL; allocated on the first */
  uint32_t seq[NKINDS];
};

/* Registers bs with the root at `root` (listening first, at the
 * BATON_SOCKET_IFNAME interface or the address its connection to the root
 * came from) and receives every rank's address into bs->addrs.  A
 * registration the root closes unanswered was shed by a flooded root: it
 * is sent again on a new connection (a root that has gone refuses it).
 * Errors are logged naming the root; the caller frees bs. */
bt_result bs_join(rt_bootstrap *bs, const rt_sockaddr *root);

/* ---- seams for the fuzz targets and tests ---------------------------------
 * The message engines without TCP listening: a connection's bytes can come
 * from a socketpair.  Not for production use. */

/* A root engine for `magic` that has no listener; *fd connections are
 * added with bs_root_engine_add.  bs_root_engine_pump reads what the
 * connections hold now (no waiting) and acts on it as the root thread does;
 * returns 0 while the root is collecting, 1 when it sent the table, -1 when
 * it failed (every rank told). */
typedef struct root root;
root *bs_root_engine_new(uint64_t magic);
int bs_root_engine_add(root *r, int fd);
int bs_root_engine_pump(root *r);
void bs_root_engine_free(root *r);

/* A rank engine (rank of nranks, the job's magic) with no root and no
 * listener; bs_engine_add adds a connection as if accepted.
 * bs_engine_pump reads what the connections hold now (no waiting); a
 * message matching (peer, tag, len) goes into data (peer -1: none).
 * Returns BT_OK or the error that ended the engine (logged); *done is set
 * when the message arrived, *open to the connections still open. */
rt_bootstrap *bs_engine_new(int rank, int nranks, uint64_t magic);
int bs_engine_add(rt_bootstrap *bs, int fd);
bt_result bs_engine_pump(rt_bootstrap *bs, int peer, uint32_t tag, void *data, size_t len, int *done, int *open);
size_t bs_engine_held(const rt_bootstrap *bs);   /* bytes of messages held unclaimed */

/* The address this rank listens at (for tests that play a hostile peer). */
void bs_listen_address(const rt_bootstrap *bs, rt_sockaddr *a);

#endif
