/* net_ib_int.h -- what the verbs backend's files share (internal): the
 * libibverbs functions, which net_ib_select.c loads at run time and the
 * others call through; the device and port the selection opened for a
 * context; the context, its links and wire formats, which net_ib.c (queue
 * pairs, the data path) and net_ib_side.c (the side connections) share. */
#ifndef NET_IB_INT_H
#define NET_IB_INT_H

#include <infiniband/verbs.h>
#include <unistd.h>

#include "net_ib.h"
#include "rt_result.h"
#include "rt_listen.h"
#include "rt_socket.h"

/* Every ibv_* function the backend calls (ibv_post_send, ibv_post_recv,
 * ibv_poll_cq and ibv_req_notify_cq are inline in <infiniband/verbs.h>
 * and go through the device context's ops: they need no symbol). */
#define IBV_FNS(X)                                                                                    \
  X(struct ibv_device **, get_device_list, (int *))                                                   \
  X(void, free_device_list, (struct ibv_device **))                                                   \
  X(const char *, get_device_name, (struct ibv_device *))                                             \
  X(struct ibv_context *, open_device, (struct ibv_device *))                                         \
  X(int, close_device, (struct ibv_context *))                                                        \
  X(int, query_device, (struct ibv_context *, struct ibv_device_attr *))                              \
  X(int, query_port, (struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *))                 \
  X(int, query_gid, (struct ibv_context *, uint8_t, int, union ibv_gid *))                            \
  X(struct ibv_pd *, alloc_pd, (struct ibv_context *))                                                \
  X(int, dealloc_pd, (struct ibv_pd *))                                                               \
  X(struct ibv_mr *, reg_mr, (struct ibv_pd *, void *, size_t, int))                                  \
  X(int, dereg_mr, (struct ibv_mr *))                                                                 \
  X(struct ibv_comp_channel *, create_comp_channel, (struct ibv_context *))                           \
  X(int, destroy_comp_channel, (struct ibv_comp_channel *))                                           \
  X(struct ibv_cq *, create_cq, (struct ibv_context *, int, void *, struct ibv_comp_channel *, int))  \
  X(int, destroy_cq, (struct ibv_cq *))                                                               \
  X(int, get_cq_event, (struct ibv_comp_channel *, struct ibv_cq **, void **))                        \
  X(void, ack_cq_events, (struct ibv_cq *, unsigned int))                                             \
  X(struct ibv_qp *, create_qp, (struct ibv_pd *, struct ibv_qp_init_attr *))                         \
  X(int, modify_qp, (struct ibv_qp *, struct ibv_qp_attr *, int))                                     \
  X(int, destroy_qp, (struct ibv_qp *))                                                               \
  X(const char *, wc_status_str, (enum ibv_wc_status))

typedef struct net_ib_fns {
#define X(ret, name, args) ret(*name) args;
  IBV_FNS(X)
#undef X
  /* Optional (libibverbs 32 and later): a GID entry with its type. */
  int (*query_gid_ex)(struct ibv_context *, uint32_t, uint32_t, struct ibv_gid_entry *, uint32_t, size_t);
} net_ib_fns;

/* The library's functions: filled (under a lock) by the first
 * net_ib_unavailable() after start-up or net_ib_set_library(); valid, and
 * read without a lock, once it has returned NULL. */
extern net_ib_fns net_ib_fn;

/* Why the verbs backend cannot run here (the library does not load or
 * lacks a function, no device, no port BATON_IB_HCA accepts), as a
 * sentence, or NULL when it can.  The answer is kept until
 * net_ib_set_library(); thread-safe. */
const char *net_ib_unavailable(void);

/* The device and port BATON_IB_HCA picks, opened for one context. */
typedef struct net_ib_dev {
  struct ibv_context *vc;          /* the caller's to close, also after a failure */
  char name[NET_IB_NAME_MAX];      /* "" until a port is picked */
  int port, link_layer, mtu, lid;  /* link_layer: IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
  int gid_index, max_qp_wr, max_cqe;
  unsigned char gid[16];           /* entry gid_index of the port's table */
} net_ib_dev;

/* Lists the ports of every device, picks one (BATON_IB_HCA), opens its
 * device and reads the device's limits, the port's attributes and its GID
 * (RoCE: the entry BATON_IB_GID_INDEX names, else the first RoCE v2 one
 * holding an IPv4 address; InfiniBand: entry 0).  Call it only once
 * net_ib_unavailable() has returned NULL.  BT_OK; else, with a sentence
 * in err, BT_ERR_UNSUPPORTED (no port fits; an InfiniBand port without a
 * LID), BT_ERR_SYSTEM (opening or querying failed), BT_ERR_INVALID (no GID
 * fits), or BT_ERR_NOMEM (err empty). */
bt_result net_ib_open_port(net_ib_dev *d, char *err, size_t errlen);

/* ---- net_ib.c and net_ib_side.c: limits, link states, wire formats, the context ---- */

enum {
  IB_MAX_QPS = 16, IB_MAX_CONNS = 1 << 16,
  IB_WR = 128, IB_MIN_WR = 16,      /* send and receive WRs per QP; the ring has 2 x receives slots */
  IB_CQ_MAX = 1 << 20, IB_MSGQ = 16 /* messages in flight per send connection */,
  IB_MRC = 32, IB_PENDING_MAX = 64,
  K_DATA = 1, K_CREDIT = 2,
  SQ_PIECE = 1, SQ_RECORD, SQ_LAST, SQ_CREDIT,
  L_WAIT_CONN = 1, L_WAIT_HELLO, L_WAIT_READY, L_UP, L_BYE, L_FAILED,
};
#define ADDR_MAGIC 0x42494254u    /* "TBIB" */
#define HELLO_MAGIC 0x48494254u   /* "TBIH" */
#define IB_VERSION 1u
#define RECV_BIT 0x80000000u


/* ---- wire formats (host byte order: every rank runs the same build) ---- */

typedef struct ib_addr {        /* what a rank publishes through the bootstrap */
  uint32_t magic, version;
  uint8_t link_layer, port, mtu, gid_index;
  uint32_t lid;
  uint64_t nonce;               /* one per process */
  unsigned char token[16], gid[16], sock[RT_SOCKADDR_WIRE];
  char dev[32];
} ib_addr;

typedef struct ib_hello {       /* on the side connection, each way */
  uint32_t magic, version, from, to, nqps, nsend, nrecv, pool_rkey, ring_rkey, ring_slots;
  unsigned char token[16];      /* the receiver's */
  uint64_t pool_addr, pool_bytes, ring_addr;
  uint32_t qpn[IB_MAX_QPS], psn[IB_MAX_QPS];
} ib_hello;

typedef struct ib_rec {         /* one slot of a ring */
  uint32_t idx, kind, conn, total;
  uint64_t seq, off;            /* seq: the credit's value for K_CREDIT */
} ib_rec;

_Static_assert(sizeof(ib_addr) <= NET_ADDR_BYTES, "the verbs address must fit NET_ADDR_BYTES");
_Static_assert(sizeof(ib_rec) == 32, "a record is 32 bytes");

/* ---- the context ---- */

typedef struct ib_sqe {         /* one posted send WR, in posting order */
  uint8_t kind;
  int8_t mrc;                   /* the MR cache entry it holds, or -1 */
  uint32_t conn, msg, bytes;    /* msg: slot in the connection's message queue */
} ib_sqe;

typedef struct ib_qp {
  struct ibv_qp *qp;
  uint32_t psn, sq_head, sq_tail;   /* send WRs posted, completed */
  int inline_ok;
  ib_sqe *sq;                   /* sq_depth */
  ib_rec *stage, *ring;         /* outgoing records by send slot (stage_mr); incoming ring (rings_mr) */
  uint64_t rec_out, rec_in;     /* records written to the peer's ring, read from ours */
  uint64_t peer_ring;
} ib_qp;

typedef struct ib_msg {         /* a message with pieces in flight or its last piece held */
  uint64_t seq;
  uint32_t pending, lkey;       /* pieces posted, not yet completed */
  int closed, mrc;              /* closed: `last` holds its last piece */
  net_piece last;
} ib_msg;

typedef struct ib_sconn { ib_msg q[IB_MSGQ]; uint32_t head, tail; } ib_sconn;
typedef struct ib_rconn { uint64_t want, next_seq; uint8_t dirty, inflight; } ib_rconn;

typedef struct ib_link {
  int peer, nsend, nrecv, state, lower, same_proc;
  int unreported, bye_seen, bye_told, held;   /* held: last pieces waiting */
  int fd;                       /* the side connection */
  ib_hello in;                  /* the peer's hello */
  size_t in_n, out_n, out_off;
  unsigned char out[sizeof(ib_hello) + 8];    /* bytes to send on fd */
  ib_addr peer_addr;
  rt_sockaddr peer_sa;
  uint64_t pool_addr, pool_bytes;
  uint32_t pool_rkey, ring_rkey, ring_slots, rr;   /* rr: next QP for a piece */
  ib_qp qp[IB_MAX_QPS];
  ib_sconn *s;
  ib_rconn *r;
  uint32_t *dirty;              /* receive connections with a credit owed */
  int ndirty;
} ib_link;

typedef struct ib_mrc { uintptr_t lo, hi; struct ibv_mr *mr; int refs; uint64_t used; } ib_mrc;
typedef struct ib_pend { int fd; size_t n; ib_hello in; int64_t since; } ib_pend;

typedef struct ib_ctx {
  int rank, nranks, nqps, connected, aborted;
  int64_t deadline, next_side;
  char dev[NET_IB_NAME_MAX];
  int port, link_layer, mtu, gid_index, lid, max_qp_wr, max_cqe;
  unsigned char gid[16], token[16];
  uint64_t nonce;
  struct ibv_context *vc;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  int cq_size, armed, sq_depth, rq_depth, ring_slots;
  char *pool;
  size_t pool_bytes;
  struct ibv_mr *pool_mr, *rings_mr, *stage_mr;
  ib_rec *rings, *stage;
  ib_mrc mrc[IB_MRC];
  uint64_t clock, sent, received;
  rt_listener l;                  /* the side connections' listener (rt_listen.h, the bootstrap's) */
  char who[48];
  int npend, nlinks;
  ib_pend pend[IB_PENDING_MAX];   /* their pending connections, oldest first */
  int accepted;                   /* connections the listener took (net_ib_pump's progress) */
  ib_link *links;
  struct pollfd *pfd;
} ib_ctx;

/* Closes *fd unless it is -1, and sets it to -1. */
static inline void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* net_ib_qp.c.  Marks L failed, logging why ("verbs: rank 3 -> rank 5
 * (mlx5_0:1): ...") unless it already was, and closes its side connection
 * so that the peer learns at once; progress() reports it.  Returns -1. */
int net_ib_link_fail(ib_ctx *c, ib_link *L, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* net_ib_qp.c.  Creates QP k of link l, takes it to INIT and posts its
 * receives; a failure fails the link (BT_ERR_NOMEM unlogged). */
bt_result net_ib_qp_create(ib_ctx *c, int l, int k);

/* net_ib_qp.c.  Posts one receive on q, the backend's QP number g (l *
 * nqps + k, in the work request's id); ibv_post_recv's result. */
int net_ib_post_recv(ib_qp *q, int g);

/* net_ib_qp.c.  Takes QP k of L to RTR (towards the peer's QP qpn, PSN psn)
 * and RTS; BATON_IB_SL, _TC, _TIMEOUT and _RETRY_CNT apply.  0, or -1 (L
 * failed). */
int net_ib_qp_ready(ib_ctx *c, ib_link *L, int k, uint32_t qpn, uint32_t psn);

/* net_ib_side.c (contracts there): link l's hello queued; what L has
 * queued sent as far as the socket takes it; the listener and every side
 * connection served once, without blocking. */
void net_ib_hello_queue(ib_ctx *c, int l);
int net_ib_side_flush(ib_ctx *c, ib_link *L);
int net_ib_pump(ib_ctx *c);

#endif
