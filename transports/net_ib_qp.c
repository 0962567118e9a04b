/* net_ib_qp.c -- the queue pairs of the verbs backend's links: creating
 * them, taking them to RTR and RTS, posting receives; and a link's failure,
 * which every file of the backend reports through.  (net_ib.c's head says
 * how the backend works.) */
#define _GNU_SOURCE
#include "net_ib_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rt_log.h"
#include "rt_param.h"
#include "rt_time.h"

int net_ib_link_fail(ib_ctx *c, ib_link *L, const char *fmt, ...) {
  if (L->state == L_FAILED) return -1;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LOG_WARN(RT_SUB_RUNTIME, "verbs: rank %d -> rank %d (%s:%d): %s", c->rank, L->peer, c->dev, c->port, msg);
  L->state = L_FAILED;
  L->unreported = 1;
  close_fd(&L->fd);
  return -1;
}

int net_ib_post_recv(ib_qp *q, int g) {
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)g << 32 | RECV_BIT}, *bad = NULL;
  return ibv_post_recv(q->qp, &wr, &bad);
}

bt_result net_ib_qp_create(ib_ctx *c, int l, int k) {
  ib_link *L = &c->links[l];
  ib_qp *q = &L->qp[k];
  int g = l * c->nqps + k, e = 0;
  struct ibv_qp_init_attr ia = {
    .send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
    .cap = {.max_send_wr = (uint32_t)c->sq_depth, .max_recv_wr = (uint32_t)c->rq_depth, .max_send_sge = 1,
            .max_recv_sge = 1, .max_inline_data = sizeof(ib_rec)}};
  if (!(q->qp = net_ib_fn.create_qp(c->pd, &ia))) {   /* no inline data here: records go from the staging area */
    ia.cap.max_inline_data = 0;
    q->qp = net_ib_fn.create_qp(c->pd, &ia);
  }
  if (!q->qp) {
    net_ib_link_fail(c, L, "ibv_create_qp (%d send, %d receive WRs) failed: %s", c->sq_depth, c->rq_depth,
                     strerror(errno));
    return BT_ERR_SYSTEM;
  }
  q->inline_ok = ia.cap.max_inline_data >= sizeof(ib_rec);
  if (getrandom(&q->psn, sizeof q->psn, 0) != (ssize_t)sizeof q->psn) q->psn = (uint32_t)rt_time_ns();
  q->psn &= 0xffffff;
  if (!(q->sq = calloc((size_t)c->sq_depth, sizeof *q->sq))) return BT_ERR_NOMEM;
  q->stage = c->stage + (size_t)g * c->sq_depth;
  q->ring = c->rings + (size_t)g * c->ring_slots;
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = (uint8_t)c->port,
                           .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
  if ((e = net_ib_fn.modify_qp(q->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))) {
    net_ib_link_fail(c, L, "ibv_modify_qp of QP %d to INIT failed: %s", k, strerror(e));
    return BT_ERR_SYSTEM;
  }
  for (int i = 0; i < c->rq_depth && !e; i++) e = net_ib_post_recv(q, g);
  if (e) net_ib_link_fail(c, L, "ibv_post_recv on QP %d failed: %s", k, strerror(e));
  return e ? BT_ERR_SYSTEM : BT_OK;
}

int net_ib_qp_ready(ib_ctx *c, ib_link *L, int k, uint32_t qpn, uint32_t psn) {
  ib_qp *q = &L->qp[k];
  int mtu = L->peer_addr.mtu < c->mtu ? L->peer_addr.mtu : c->mtu;
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTR, .path_mtu = (enum ibv_mtu)mtu, .dest_qp_num = qpn,
                           .rq_psn = psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12};
  at.ah_attr.dlid = (uint16_t)L->peer_addr.lid;
  at.ah_attr.sl = (uint8_t)rt_param_int(RT_PARAM_IB_SL);
  at.ah_attr.port_num = (uint8_t)c->port;
  if (c->link_layer == IBV_LINK_LAYER_ETHERNET) {
    at.ah_attr.is_global = 1;
    memcpy(at.ah_attr.grh.dgid.raw, L->peer_addr.gid, 16);
    at.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
    at.ah_attr.grh.hop_limit = 255;
    at.ah_attr.grh.traffic_class = (uint8_t)rt_param_int(RT_PARAM_IB_TC);
  }
  int e = net_ib_fn.modify_qp(q->qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (e) return net_ib_link_fail(c, L, "ibv_modify_qp of QP %d to RTR (remote QPN %u) failed: %s", k, qpn, strerror(e));
  struct ibv_qp_attr rt = {.qp_state = IBV_QPS_RTS, .timeout = (uint8_t)rt_param_int(RT_PARAM_IB_TIMEOUT),
                           .retry_cnt = (uint8_t)rt_param_int(RT_PARAM_IB_RETRY_CNT), .rnr_retry = 7,
                           .sq_psn = q->psn, .max_rd_atomic = 1};
  e = net_ib_fn.modify_qp(q->qp, &rt, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  return e ? net_ib_link_fail(c, L, "ibv_modify_qp of QP %d to RTS failed: %s", k, strerror(e)) : 0;
}
