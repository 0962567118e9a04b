/* net_ib_int.h -- what the verbs backend's two halves share (internal):
 * the libibverbs functions, which net_ib_select.c loads at run time and
 * net_ib.c calls through, and the device and port the selection opened
 * for a context. */
#ifndef NET_IB_INT_H
#define NET_IB_INT_H

#include <infiniband/verbs.h>

#include "net_ib.h"
#include "rt_result.h"

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

#endif
