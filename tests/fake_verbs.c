/* fake_verbs.c -- a simulated libibverbs, for testing the verbs backend
 * (transports/net_ib.c) where no RDMA device is: tests/test_net.c, mode
 * "ibfake", loads this module in place of libibverbs.so.1
 * (net_ib_set_library) and runs ranks as threads of one process over it.
 * Test code of this project, written against the public
 * <infiniband/verbs.h> only.
 *
 * What it simulates:
 *  - two devices: sim0 (port 1 down, port 2 active) and sim1 (port 1
 *    active).  InfiniBand by default: a LID per port and one GID;
 *    BATON_FAKE_VERBS_LINK=roce makes them RoCE: no LID, a GID table of
 *    six entries (link-local and IPv4-mapped, RoCE v1 and v2, two empty)
 *    with types through _ibv_query_gid_ex;
 *  - the device limits BATON_FAKE_VERBS_MAX_QP_WR (WRs per queue, default
 *    4096) and BATON_FAKE_VERBS_MAX_INLINE (default 64 bytes), read when a
 *    device is opened, so that a test can make queues small;
 *  - protection domains; memory regions with distinct lkeys and rkeys,
 *    never reused; completion channels (a pipe that becomes readable when
 *    an armed CQ gets a completion; events counted until acknowledged);
 *    CQs of the size asked for (an overflow aborts the process: the
 *    backend sized its CQ wrong); RC queue pairs through RESET, INIT, RTR,
 *    RTS and ERR, each transition checked for its attribute mask, the port
 *    (existing, active), the path MTU, the address (the LID, or for RoCE
 *    the GID, of the peer QP's port) and the peer QP; send and receive
 *    queues of the depth asked for (ENOMEM past it); inline data;
 *  - RDMA write and RDMA write with immediate, the only operations.  A
 *    posted WR does not run at once: a wire thread, and now and then an
 *    ibv_poll_cq, run a few WRs of randomly chosen QPs at a time, so that
 *    WRs of different QPs complete in any order while each QP keeps RC
 *    order.  Running a WR checks that the target QP is the peer of this
 *    one, at RTR or later, with matching PSNs; the rkey, its range, its
 *    remote-write right and protection domain (else IBV_WC_REM_ACCESS_ERR,
 *    the target QP to ERR too); the lkey and its range (IBV_WC_LOC_PROT_ERR);
 *    then copies the bytes with memcpy.  A write with immediate waits
 *    while the target QP has no receive posted (receiver not ready: the QP
 *    stalls and tries again later, without end, as rnr_retry 7 does), then
 *    takes one and completes there as IBV_WC_RECV_RDMA_WITH_IMM.  A target
 *    QP in ERR or destroyed gives IBV_WC_RETRY_EXC_ERR.  An error
 *    completion takes the QP to ERR and flushes its other WRs
 *    (IBV_WC_WR_FLUSH_ERR), as ibv_modify_qp to ERR does.
 *
 * What it does not: no NIC, kernel or wire; one process only (a QP reaches
 * only QPs of this process); no packets, timeouts, retransmission or
 * congestion; no RDMA read, sends with data, atomics, SRQs, UD or UC,
 * memory windows, async events or extended (ibv_*_ex) verbs; memory is
 * neither pinned nor checked to stay mapped (a write from or to freed
 * memory is caught by AddressSanitizer, where it is on, not here); a
 * region's access rights are checked only for remote write; a receive's
 * scatter list is ignored (a write with immediate carries no bytes into
 * it).  Every call takes one mutex.  Once loaded, the module must stay
 * loaded (its wire thread runs while a QP exists).
 *
 * fake_verbs_stats() gives counters for a test to report. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#undef ibv_query_port   /* macros in verbs.h; this module defines the symbols */
#undef ibv_reg_mr

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { SIM_NDEV = 2, SIM_QPN_BASE = 0x100, SIM_GIDS_IB = 4, SIM_GIDS_ROCE = 6, SIM_MAX_CQE = 1 << 16 };

static const struct {
  const char *name;
  int nports, up[2];   /* up[port - 1]: the port is active */
} sim_dev[SIM_NDEV] = {{"sim0", 2, {0, 1}}, {"sim1", 1, {1, 0}}};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wire_cv = PTHREAD_COND_INITIALIZER;
static struct ibv_device devs[SIM_NDEV];

typedef struct sim_ctx {
  struct ibv_context c;
  int dev, roce, max_qp_wr, max_inline, users;   /* users: PDs, channels, CQs */
} sim_ctx;

typedef struct sim_pd { struct ibv_pd pd; int users; } sim_pd;   /* users: MRs, QPs */
typedef struct sim_mr { struct ibv_mr mr; int access; } sim_mr;
typedef struct sim_ch { struct ibv_comp_channel ch; int wfd, users; } sim_ch;   /* users: CQs */

typedef struct sim_cq {
  struct ibv_cq cq;
  uint32_t id;                 /* what an event on the channel carries */
  struct ibv_wc *wc;
  int cap, head, n, armed, users;   /* users: QPs */
  unsigned events;             /* returned by ibv_get_cq_event, not yet acknowledged */
} sim_cq;

typedef struct sim_wr {
  uint64_t wr_id, seq;         /* seq: global posting order */
  int imm_op, signaled;
  uint32_t imm, len, lkey, rkey;
  uint64_t laddr, raddr;
  char *inl;                   /* inline data, copied when posted */
} sim_wr;

typedef struct sim_qp {
  struct ibv_qp qp;
  int state, port, access, mtu, max_inline, send_sge, recv_sge;
  uint32_t dest, sq_psn, rq_psn;   /* the peer QP; next PSN sent, next expected */
  sim_wr *sq;
  uint64_t *rq;
  uint32_t sq_cap, sq_head, sq_n, rq_cap, rq_head, rq_n;
} sim_qp;

/* Every live QP by QPN - SIM_QPN_BASE (QPNs are never reused); every
 * live MR and CQ. */
static sim_qp **qps;
static uint32_t qp_slots, qp_next;
static int live_qps, wire_running;
static sim_mr **mrs;
static int nmr, mr_cap;
static uint32_t next_key = 1, next_cq = 1;
static sim_cq **cqs;
static int ncq, cq_cap;
static uint64_t post_seq, rng;
static uint64_t st_writes, st_bytes, st_waits, st_overtook;

/* A diagnostic for the test's log: what the backend did wrong. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fake_verbs: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* A random number below n (mu held): xorshift, seeded from
 * BATON_FAKE_VERBS_SEED, else from the time and the process id. */
static uint32_t rnd(uint32_t n) {
  if (!rng) {
    const char *s = getenv("BATON_FAKE_VERBS_SEED");
    rng = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    rng |= 1;
  }
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11) % n;
}

static int env_int(const char *name, int dflt, int lo, int hi) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  int v = atoi(s);
  return v < lo ? lo : v > hi ? hi : v;
}

static int grow(void *pp, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *p = realloc(*(void **)pp, (size_t)n * elem);
  if (!p) return -1;
  *(void **)pp = p;
  *cap = n;
  return 0;
}

static sim_ctx *ctx_of(struct ibv_context *c) { return (sim_ctx *)c; }

static sim_qp *qp_find(uint32_t qpn) {
  uint32_t i = qpn - SIM_QPN_BASE;
  return qpn >= SIM_QPN_BASE && i < qp_next ? qps[i] : NULL;
}

/* ---- devices, ports, GIDs ---- */

struct ibv_device **ibv_get_device_list(int *num) {
  struct ibv_device **l = calloc(SIM_NDEV + 1, sizeof *l);
  if (!l) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&mu);
  for (int d = 0; d < SIM_NDEV; d++) {
    snprintf(devs[d].name, sizeof devs[d].name, "%s", sim_dev[d].name);
    snprintf(devs[d].dev_name, sizeof devs[d].dev_name, "uverbs%d", d);
    devs[d].node_type = IBV_NODE_CA;
    devs[d].transport_type = IBV_TRANSPORT_IB;
    l[d] = &devs[d];
  }
  pthread_mutex_unlock(&mu);
  if (num) *num = SIM_NDEV;
  return l;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }

const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

struct ibv_context *ibv_open_device(struct ibv_device *d) {
  int dev = (int)(d - devs);
  if (dev < 0 || dev >= SIM_NDEV) {
    errno = ENODEV;
    return NULL;
  }
  sim_ctx *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  x->c.device = d;
  x->c.cmd_fd = x->c.async_fd = -1;
  x->c.num_comp_vectors = 1;
  x->c.abi_compat = NULL;   /* not a verbs_context: the legacy ops below are used */
  x->c.ops.poll_cq = poll_cq;
  x->c.ops.req_notify_cq = req_notify_cq;
  x->c.ops.post_send = post_send;
  x->c.ops.post_recv = post_recv;
  pthread_mutex_init(&x->c.mutex, NULL);
  x->dev = dev;
  const char *link = getenv("BATON_FAKE_VERBS_LINK");
  x->roce = link && !strcmp(link, "roce");
  x->max_qp_wr = env_int("BATON_FAKE_VERBS_MAX_QP_WR", 4096, 1, 1 << 16);
  x->max_inline = env_int("BATON_FAKE_VERBS_MAX_INLINE", 64, 0, 1024);
  return &x->c;
}

int ibv_close_device(struct ibv_context *c) {
  sim_ctx *x = ctx_of(c);
  pthread_mutex_lock(&mu);
  int users = x->users;
  pthread_mutex_unlock(&mu);
  if (users) say("ibv_close_device of %s with %d PDs, channels or CQs still open", c->device->name, users);
  pthread_mutex_destroy(&c->mutex);
  free(x);
  return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
  sim_ctx *x = ctx_of(c);
  memset(a, 0, sizeof *a);
  snprintf(a->fw_ver, sizeof a->fw_ver, "0.0.0 (simulated)");
  a->node_guid = 0x5100000000000000ull | (uint64_t)x->dev;
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = (uint64_t)1 << 40;
  a->page_size_cap = 4096;
  a->vendor_id = 0xffff;
  a->max_qp = 1 << 16;
  a->max_qp_wr = x->max_qp_wr;
  a->max_sge = 1;
  a->max_cq = 1 << 12;
  a->max_cqe = SIM_MAX_CQE;
  a->max_mr = 1 << 16;
  a->max_pd = 1 << 12;
  a->max_qp_rd_atom = a->max_qp_init_rd_atom = 16;
  a->phys_port_cnt = (uint8_t)sim_dev[x->dev].nports;
  return 0;
}

static int port_ok(const sim_ctx *x, int port) { return port >= 1 && port <= sim_dev[x->dev].nports; }
static int port_up(const sim_ctx *x, int port) { return port_ok(x, port) && sim_dev[x->dev].up[port - 1]; }
static int port_lid(const sim_ctx *x, int port) { return x->roce ? 0 : 0x10 * (x->dev + 1) + port; }
static int port_mtu(const sim_ctx *x) { return x->roce ? IBV_MTU_1024 : IBV_MTU_4096; }

/* Entry i of the GID table of a port; its type; 0, or -1 when empty. */
static int gid_entry(const sim_ctx *x, int port, int i, union ibv_gid *g, int *type) {
  memset(g, 0, sizeof *g);
  *type = IBV_GID_TYPE_IB;
  if (!x->roce) {
    if (i != 0) return -1;
  } else if (i >= 4) {
    return -1;
  }
  if (!x->roce || i < 2) {   /* fe80::5100:0:<dev>:<port> */
    g->raw[0] = 0xfe, g->raw[1] = 0x80, g->raw[8] = 0x51, g->raw[13] = (uint8_t)x->dev, g->raw[15] = (uint8_t)port;
  } else {                   /* ::ffff:10.<dev>.<port>.1 */
    g->raw[10] = g->raw[11] = 0xff;
    g->raw[12] = 10, g->raw[13] = (uint8_t)x->dev, g->raw[14] = (uint8_t)port, g->raw[15] = 1;
  }
  if (x->roce) *type = i % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  return 0;
}

int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *out) {
  sim_ctx *x = ctx_of(c);
  if (!port_ok(x, port)) return EINVAL;
  struct ibv_port_attr a;
  memset(&a, 0, sizeof a);
  int up = port_up(x, port);
  a.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = (enum ibv_mtu)port_mtu(x);
  a.gid_tbl_len = x->roce ? SIM_GIDS_ROCE : SIM_GIDS_IB;
  a.max_msg_sz = 1u << 31;
  a.pkey_tbl_len = 1;
  a.lid = (uint16_t)port_lid(x, port);
  a.sm_lid = x->roce ? 0 : 1;
  a.phys_state = up ? 5 : 3;   /* LinkUp, Disabled */
  a.link_layer = x->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  /* The caller's struct is the older layout: everything before port_cap_flags2. */
  memcpy(out, &a, offsetof(struct ibv_port_attr, port_cap_flags2));
  return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
  sim_ctx *x = ctx_of(c);
  int type;
  if (!port_ok(x, port) || index < 0 || index >= (x->roce ? SIM_GIDS_ROCE : SIM_GIDS_IB)) return -1;
  gid_entry(x, port, index, gid, &type);   /* an empty entry reads as zeros */
  return 0;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e, uint32_t flags,
                      size_t size) {
  sim_ctx *x = ctx_of(c);
  int type;
  union ibv_gid g;
  if (flags || size < sizeof *e || !port_ok(x, (int)port)) return EINVAL;
  if (index >= (uint32_t)(x->roce ? SIM_GIDS_ROCE : SIM_GIDS_IB) || gid_entry(x, (int)port, (int)index, &g, &type))
    return ENODATA;
  memset(e, 0, sizeof *e);
  e->gid = g;
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = (uint32_t)type;
  return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status s) {
  switch (s) {
  case IBV_WC_SUCCESS: return "success";
  case IBV_WC_LOC_PROT_ERR: return "local protection error";
  case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
  case IBV_WC_REM_ACCESS_ERR: return "remote access error";
  case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
  default: return "unknown";
  }
}

/* ---- PDs, MRs ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
  sim_pd *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->pd.context = c;
  pthread_mutex_lock(&mu);
  ctx_of(c)->users++;
  pthread_mutex_unlock(&mu);
  return &p->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
  sim_pd *p = (sim_pd *)pd;
  pthread_mutex_lock(&mu);
  int busy = p->users;
  if (!busy) ctx_of(pd->context)->users--;
  pthread_mutex_unlock(&mu);
  if (busy) {
    say("ibv_dealloc_pd with %d MRs or QPs still using it", busy);
    return EBUSY;
  }
  free(p);
  return 0;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  if (!len || ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    say("ibv_reg_mr of %zu bytes with access %#x refused (remote write needs local write)", len, access);
    errno = EINVAL;
    return NULL;
  }
  sim_mr *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_lock(&mu);
  if (grow(&mrs, &mr_cap, nmr + 1, sizeof *mrs)) {
    pthread_mutex_unlock(&mu);
    free(m);
    errno = ENOMEM;
    return NULL;
  }
  m->mr = (struct ibv_mr){.context = pd->context, .pd = pd, .addr = addr, .length = len, .handle = next_key};
  m->mr.lkey = next_key << 8 | 0x11;   /* lkeys and rkeys differ: one used for the other fails */
  m->mr.rkey = access & IBV_ACCESS_REMOTE_WRITE ? next_key << 8 | 0x22 : 0;
  next_key++;
  m->access = access;
  mrs[nmr++] = m;
  ((sim_pd *)pd)->users++;
  pthread_mutex_unlock(&mu);
  return &m->mr;
}

int ibv_dereg_mr(struct ibv_mr *mr) {
  pthread_mutex_lock(&mu);
  int found = 0;
  for (int i = 0; i < nmr && !found; i++)
    if (&mrs[i]->mr == mr) mrs[i] = mrs[--nmr], found = 1;
  if (found) ((sim_pd *)mr->pd)->users--;
  pthread_mutex_unlock(&mu);
  if (!found) {
    say("ibv_dereg_mr of an MR that is not registered");
    return EINVAL;
  }
  free(mr);
  return 0;
}

/* Does key (an rkey when remote) of protection domain pd cover [a, a+len),
 * with remote write when remote?  mu held. */
static int mr_covers(uint32_t key, int remote, const struct ibv_pd *pd, uint64_t a, uint32_t len) {
  for (int i = 0; i < nmr; i++) {
    const sim_mr *m = mrs[i];
    if (!key || key != (remote ? m->mr.rkey : m->mr.lkey)) continue;
    uint64_t lo = (uintptr_t)m->mr.addr;
    return m->mr.pd == pd && (!remote || (m->access & IBV_ACCESS_REMOTE_WRITE)) && a >= lo && a - lo <= m->mr.length &&
           len <= m->mr.length - (a - lo);
  }
  return 0;
}

/* ---- completion channels and CQs ---- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c) {
  sim_ch *h = calloc(1, sizeof *h);
  int p[2];
  if (!h) return NULL;
  if (pipe2(p, O_CLOEXEC)) {
    free(h);
    return NULL;
  }
  fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
  h->ch.context = c;
  h->ch.fd = p[0];
  h->wfd = p[1];
  pthread_mutex_lock(&mu);
  ctx_of(c)->users++;
  pthread_mutex_unlock(&mu);
  return &h->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
  sim_ch *h = (sim_ch *)ch;
  pthread_mutex_lock(&mu);
  int busy = h->users;
  if (!busy) ctx_of(ch->context)->users--;
  pthread_mutex_unlock(&mu);
  if (busy) {
    say("ibv_destroy_comp_channel with %d CQs still on it", busy);
    return EBUSY;
  }
  close(h->ch.fd);
  close(h->wfd);
  free(h);
  return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *ch,
                             int vector) {
  if (cqe < 1 || cqe > SIM_MAX_CQE || vector != 0 || (ch && ch->context != c)) {
    say("ibv_create_cq of %d entries (vector %d) refused", cqe, vector);
    errno = EINVAL;
    return NULL;
  }
  sim_cq *q = calloc(1, sizeof *q);
  if (q) q->wc = calloc((size_t)cqe, sizeof *q->wc);
  if (!q || !q->wc) {
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  q->cq.context = c;
  q->cq.channel = ch;
  q->cq.cq_context = cq_context;
  q->cq.cqe = q->cap = cqe;
  pthread_mutex_lock(&mu);
  if (grow(&cqs, &cq_cap, ncq + 1, sizeof *cqs)) {
    pthread_mutex_unlock(&mu);
    free(q->wc);
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  q->id = next_cq++;
  cqs[ncq++] = q;
  ctx_of(c)->users++;
  if (ch) ((sim_ch *)ch)->users++;
  pthread_mutex_unlock(&mu);
  return &q->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
  sim_cq *q = (sim_cq *)cq;
  pthread_mutex_lock(&mu);
  int busy = q->users, unacked = (int)q->events;
  if (!busy && !unacked) {
    for (int i = 0; i < ncq; i++)
      if (cqs[i] == q) cqs[i] = cqs[--ncq];
    ctx_of(cq->context)->users--;
    if (cq->channel) ((sim_ch *)cq->channel)->users--;
  }
  pthread_mutex_unlock(&mu);
  if (busy || unacked) {
    say("ibv_destroy_cq with %d QPs on it and %d events not acknowledged (libibverbs would wait for ever)", busy,
        unacked);
    return EBUSY;
  }
  free(q->wc);
  free(q);
  return 0;
}

/* Adds a completion (mu held); an armed CQ with a channel signals it. */
static void push(struct ibv_cq *cq, struct ibv_wc wc) {
  sim_cq *q = (sim_cq *)cq;
  if (q->n == q->cap) {
    say("completion queue overflow (%d entries): the backend sized its CQ too small", q->cap);
    abort();
  }
  q->wc[(q->head + q->n++) % q->cap] = wc;
  if (q->armed && cq->channel) {
    q->armed = 0;
    ssize_t w = write(((sim_ch *)cq->channel)->wfd, &q->id, sizeof q->id);
    if (w != (ssize_t)sizeof q->id) say("a completion event was lost: %s", w < 0 ? strerror(errno) : "short write");
  }
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context) {
  for (;;) {
    uint32_t id;
    ssize_t r = read(ch->fd, &id, sizeof id);   /* blocks unless the caller made the fd non-blocking */
    if (r != (ssize_t)sizeof id) {
      if (r >= 0) errno = EIO;
      return -1;
    }
    pthread_mutex_lock(&mu);
    sim_cq *q = NULL;
    for (int i = 0; i < ncq && !q; i++)
      if (cqs[i]->id == id) q = cqs[i];
    if (q) q->events++;
    pthread_mutex_unlock(&mu);
    if (!q) continue;   /* an event of a CQ destroyed since */
    *cq = &q->cq;
    *cq_context = q->cq.cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) {
  sim_cq *q = (sim_cq *)cq;
  pthread_mutex_lock(&mu);
  if (n > q->events) say("ibv_ack_cq_events of %u events where %u were returned", n, q->events);
  q->events = n > q->events ? 0 : q->events - n;
  pthread_mutex_unlock(&mu);
}

static int req_notify_cq(struct ibv_cq *cq, int solicited_only) {
  (void)solicited_only;   /* every completion here counts */
  pthread_mutex_lock(&mu);
  ((sim_cq *)cq)->armed = 1;
  pthread_mutex_unlock(&mu);
  return 0;
}

/* ---- queue pairs ---- */

static void *wire_main(void *arg);

static void qp_free(sim_qp *q) {
  if (!q) return;
  for (uint32_t i = 0; q->sq && i < q->sq_cap; i++) free(q->sq[i].inl);
  free(q->sq);
  free(q->rq);
  free(q);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia) {
  sim_ctx *x = ctx_of(pd->context);
  const struct ibv_qp_cap *cap = &ia->cap;
  const char *bad = ia->qp_type != IBV_QPT_RC ? "only RC queue pairs are simulated"
                    : ia->srq ? "no shared receive queues here"
                    : !ia->send_cq || !ia->recv_cq || ia->send_cq->context != pd->context ||
                      ia->recv_cq->context != pd->context ? "CQs missing or of another device"
                    : !cap->max_send_wr || !cap->max_recv_wr || cap->max_send_wr > (uint32_t)x->max_qp_wr ||
                      cap->max_recv_wr > (uint32_t)x->max_qp_wr ? "queue depths out of 1..max_qp_wr"
                    : cap->max_send_sge > 1 || cap->max_recv_sge > 1 ? "more than one SGE per WR" : NULL;
  if (bad || cap->max_inline_data > (uint32_t)x->max_inline) {
    if (bad) say("ibv_create_qp refused: %s", bad);   /* too much inline data: refused quietly, as devices do */
    errno = EINVAL;
    return NULL;
  }
  sim_qp *q = calloc(1, sizeof *q);
  if (q) {
    q->sq = calloc(cap->max_send_wr, sizeof *q->sq);
    q->rq = calloc(cap->max_recv_wr, sizeof *q->rq);
  }
  if (!q || !q->sq || !q->rq) {
    qp_free(q);
    errno = ENOMEM;
    return NULL;
  }
  q->sq_cap = cap->max_send_wr;
  q->rq_cap = cap->max_recv_wr;
  q->max_inline = (int)cap->max_inline_data;
  q->send_sge = (int)cap->max_send_sge;
  q->recv_sge = (int)cap->max_recv_sge;
  q->state = IBV_QPS_RESET;
  q->qp.context = pd->context;
  q->qp.qp_context = ia->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = ia->send_cq;
  q->qp.recv_cq = ia->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  pthread_mutex_lock(&mu);
  int slots = (int)qp_slots;
  if (grow(&qps, &slots, (int)qp_next + 1, sizeof *qps)) {
    pthread_mutex_unlock(&mu);
    qp_free(q);
    errno = ENOMEM;
    return NULL;
  }
  qp_slots = (uint32_t)slots;
  q->qp.qp_num = q->qp.handle = SIM_QPN_BASE + qp_next;
  qps[qp_next++] = q;
  ((sim_pd *)pd)->users++;
  ((sim_cq *)ia->send_cq)->users++;
  ((sim_cq *)ia->recv_cq)->users++;
  if (live_qps++ == 0 && !wire_running) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    wire_running = pthread_create(&t, &at, wire_main, NULL) == 0;
    pthread_attr_destroy(&at);
    if (!wire_running) say("no wire thread: WRs run only inside ibv_poll_cq");
  }
  pthread_mutex_unlock(&mu);
  return &q->qp;
}

/* Completes every WR of q as flushed (mu held): the QP is in ERR. */
static void flush(sim_qp *q) {
  for (; q->sq_n; q->sq_n--, q->sq_head = (q->sq_head + 1) % q->sq_cap) {
    sim_wr *w = &q->sq[q->sq_head];
    push(q->qp.send_cq, (struct ibv_wc){.wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = q->qp.qp_num});
    free(w->inl);
    w->inl = NULL;
  }
  for (; q->rq_n; q->rq_n--, q->rq_head = (q->rq_head + 1) % q->rq_cap)
    push(q->qp.recv_cq, (struct ibv_wc){.wr_id = q->rq[q->rq_head], .status = IBV_WC_WR_FLUSH_ERR,
                                        .qp_num = q->qp.qp_num});
}

static void set_state(sim_qp *q, int st) {
  q->state = st;
  q->qp.state = (enum ibv_qp_state)st;
  if (st == IBV_QPS_ERR) flush(q);
}

/* The RTR address of q (attribute a) names the port of QP d?  mu held. */
static const char *bad_address(const sim_qp *q, const struct ibv_qp_attr *a, const sim_qp *d) {
  const sim_ctx *x = ctx_of(q->qp.context), *y = ctx_of(d->qp.context);
  const struct ibv_ah_attr *ah = &a->ah_attr;
  if (ah->port_num != q->port) return "the address handle's port is not the QP's port";
  if (x->roce != y->roce) return "the two QPs' ports have different link layers";
  if (!x->roce) return ah->dlid == port_lid(y, d->port) ? NULL : "the destination LID is not the peer QP's port's";
  union ibv_gid g;
  int type, found = 0;
  if (!ah->is_global) return "RoCE needs a global route header (is_global)";
  if (gid_entry(x, q->port, ah->grh.sgid_index, &g, &type)) return "the source GID index names an empty entry";
  for (int i = 0; i < SIM_GIDS_ROCE && !found; i++)
    found = !gid_entry(y, d->port, i, &g, &type) && !memcmp(g.raw, ah->grh.dgid.raw, 16);
  return found ? NULL : "the destination GID is not in the peer QP's port's table";
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
  sim_qp *q = (sim_qp *)qp;
  sim_ctx *x = ctx_of(qp->context);
  enum {
    TO_INIT = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
    TO_RTR = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
    TO_RTS = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC,
  };
  pthread_mutex_lock(&mu);
  const char *bad = NULL;
  int to = mask & IBV_QP_STATE ? (int)a->qp_state : -1, from = q->state;
  if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) {
    if (to == IBV_QPS_RESET) q->sq_n = q->rq_n = 0;   /* inline copies freed below */
    for (uint32_t i = 0; to == IBV_QPS_RESET && i < q->sq_cap; i++) free(q->sq[i].inl), q->sq[i].inl = NULL;
    set_state(q, to);
  } else if (to == IBV_QPS_INIT) {
    bad = from != IBV_QPS_RESET ? "INIT only from RESET"
          : (mask & TO_INIT) != TO_INIT ? "INIT needs the state, P_Key index, port and access flags"
          : !port_ok(x, a->port_num) ? "no such port"
          : !port_up(x, a->port_num) ? "the port is down" : NULL;
    if (!bad) q->port = a->port_num, q->access = (int)a->qp_access_flags, set_state(q, to);
  } else if (to == IBV_QPS_RTR) {
    sim_qp *d = from == IBV_QPS_INIT ? qp_find(a->dest_qp_num) : NULL;
    bad = from != IBV_QPS_INIT ? "RTR only from INIT"
          : (mask & TO_RTR) != TO_RTR ? "RTR needs the state, address, path MTU, destination QPN, receive PSN, "
                                        "responder resources and RNR timer"
          : a->path_mtu < IBV_MTU_256 || (int)a->path_mtu > port_mtu(x) ? "a path MTU above the port's"
          : !d ? "the destination QP does not exist in this process"
          : a->rq_psn > 0xffffff ? "a receive PSN past 24 bits" : bad_address(q, a, d);
    if (!bad) q->dest = a->dest_qp_num, q->rq_psn = a->rq_psn, q->mtu = a->path_mtu, set_state(q, to);
  } else if (to == IBV_QPS_RTS) {
    bad = from != IBV_QPS_RTR ? "RTS only from RTR"
          : (mask & TO_RTS) != TO_RTS ? "RTS needs the state, timeout, retry count, RNR retry, send PSN and "
                                        "initiator depth"
          : a->sq_psn > 0xffffff ? "a send PSN past 24 bits" : NULL;
    if (!bad) q->sq_psn = a->sq_psn, set_state(q, to);
  } else {
    bad = "no such state change here";
  }
  pthread_mutex_unlock(&mu);
  if (bad) say("ibv_modify_qp of QP %#x to state %d (from %d, mask %#x): %s", qp->qp_num, to, from, mask, bad);
  return bad ? EINVAL : 0;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
  sim_qp *q = (sim_qp *)qp;
  pthread_mutex_lock(&mu);
  qps[qp->qp_num - SIM_QPN_BASE] = NULL;   /* WRs aimed at it now fail as if its node were gone */
  ((sim_pd *)qp->pd)->users--;
  ((sim_cq *)qp->send_cq)->users--;
  ((sim_cq *)qp->recv_cq)->users--;
  if (--live_qps == 0) pthread_cond_broadcast(&wire_cv);
  pthread_mutex_unlock(&mu);
  qp_free(q);
  return 0;
}

/* ---- posting ---- */

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  sim_qp *q = (sim_qp *)qp;
  int e = 0;
  pthread_mutex_lock(&mu);
  for (; wr && !e; wr = wr->next) {
    uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
    const char *why = q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR ? "the QP is not at RTS"
                      : wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM
                      ? "only RDMA writes are simulated"
                      : wr->num_sge < 0 || wr->num_sge > q->send_sge ? "more SGEs than the QP was created with"
                      : wr->send_flags & IBV_SEND_INLINE && (int)len > q->max_inline ? "more inline data than allowed"
                      : NULL;
    if (why || q->sq_n == q->sq_cap) {
      if (why) say("ibv_post_send on QP %#x refused: %s", qp->qp_num, why);
      else say("ibv_post_send on QP %#x: the send queue is full (%u WRs)", qp->qp_num, q->sq_cap);
      e = why ? EINVAL : ENOMEM;
      *bad = wr;
      break;
    }
    sim_wr *w = &q->sq[(q->sq_head + q->sq_n) % q->sq_cap];
    *w = (sim_wr){.wr_id = wr->wr_id, .seq = ++post_seq, .imm_op = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM,
                  .signaled = !!(wr->send_flags & IBV_SEND_SIGNALED), .imm = wr->imm_data, .len = len,
                  .lkey = wr->num_sge ? wr->sg_list[0].lkey : 0, .laddr = wr->num_sge ? wr->sg_list[0].addr : 0,
                  .raddr = wr->wr.rdma.remote_addr, .rkey = wr->wr.rdma.rkey};
    if (wr->send_flags & IBV_SEND_INLINE && len) {   /* the bytes are taken now: the buffer is free at return */
      if (!(w->inl = malloc(len))) {
        e = ENOMEM;
        *bad = wr;
        break;
      }
      memcpy(w->inl, (const void *)(uintptr_t)w->laddr, len);
    }
    q->sq_n++;
    if (q->state == IBV_QPS_ERR) flush(q);
  }
  pthread_cond_signal(&wire_cv);
  pthread_mutex_unlock(&mu);
  return e;
}

static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  sim_qp *q = (sim_qp *)qp;
  int e = 0;
  pthread_mutex_lock(&mu);
  for (; wr && !e; wr = wr->next) {
    if (q->state == IBV_QPS_RESET || wr->num_sge < 0 || wr->num_sge > q->recv_sge || q->rq_n == q->rq_cap) {
      say("ibv_post_recv on QP %#x refused: %s", qp->qp_num, q->state == IBV_QPS_RESET ? "the QP is in RESET"
          : q->rq_n == q->rq_cap ? "the receive queue is full" : "more SGEs than the QP was created with");
      e = q->rq_n == q->rq_cap ? ENOMEM : EINVAL;
      *bad = wr;
      break;
    }
    q->rq[(q->rq_head + q->rq_n++) % q->rq_cap] = wr->wr_id;
    if (q->state == IBV_QPS_ERR) flush(q);
  }
  pthread_cond_signal(&wire_cv);   /* a receive may unblock a waiting write */
  pthread_mutex_unlock(&mu);
  return e;
}

/* ---- the network ---- */

static uint64_t oldest_pending(void) {
  uint64_t m = UINT64_MAX;
  for (uint32_t i = 0; i < qp_next; i++)
    if (qps[i] && qps[i]->sq_n && qps[i]->sq[qps[i]->sq_head].seq < m) m = qps[i]->sq[qps[i]->sq_head].seq;
  return m;
}

/* Runs the oldest WR of q (at RTS, with WRs; mu held).  1 when it ran or
 * failed, 0 when it waits for a receive at the target. */
static int run_one(sim_qp *q) {
  sim_wr *w = &q->sq[q->sq_head];
  sim_qp *d = qp_find(q->dest);
  uint32_t npsn = w->len ? (w->len + (128u << q->mtu) - 1) / (128u << q->mtu) : 1;
  enum ibv_wc_status st = IBV_WC_SUCCESS;
  if (!d || d->state == IBV_QPS_ERR || d->state == IBV_QPS_RESET || d->state == IBV_QPS_INIT) {
    st = IBV_WC_RETRY_EXC_ERR;   /* nobody answers */
  } else if (d->dest != q->qp.qp_num || d->rq_psn != q->sq_psn) {
    say("a write from QP %#x (PSN %#x) to QP %#x, whose peer is QP %#x expecting PSN %#x: never acknowledged",
        q->qp.qp_num, q->sq_psn, d->qp.qp_num, d->dest, d->rq_psn);
    st = IBV_WC_RETRY_EXC_ERR;
  } else if (w->len && (!(d->access & IBV_ACCESS_REMOTE_WRITE) || !mr_covers(w->rkey, 1, d->qp.pd, w->raddr, w->len))) {
    say("remote access error: a %u-byte write to %#llx with rkey %#x from QP %#x", w->len,
        (unsigned long long)w->raddr, w->rkey, q->qp.qp_num);
    st = IBV_WC_REM_ACCESS_ERR;
    set_state(d, IBV_QPS_ERR);   /* the responder's QP fails too */
  } else if (w->len && !w->inl && !mr_covers(w->lkey, 0, q->qp.pd, w->laddr, w->len)) {
    say("local protection error: a %u-byte write from %#llx with lkey %#x on QP %#x", w->len,
        (unsigned long long)w->laddr, w->lkey, q->qp.qp_num);
    st = IBV_WC_LOC_PROT_ERR;
  } else if (w->imm_op && !d->rq_n) {
    st_waits++;
    return 0;   /* receiver not ready: tried again later */
  }
  if (st != IBV_WC_SUCCESS) {
    push(q->qp.send_cq, (struct ibv_wc){.wr_id = w->wr_id, .status = st, .opcode = IBV_WC_RDMA_WRITE,
                                        .qp_num = q->qp.qp_num});
    free(w->inl);
    w->inl = NULL;
    q->sq_head = (q->sq_head + 1) % q->sq_cap;
    q->sq_n--;
    set_state(q, IBV_QPS_ERR);
    return 1;
  }
  if (w->seq > oldest_pending()) st_overtook++;
  if (w->len) memcpy((void *)(uintptr_t)w->raddr, w->inl ? w->inl : (const void *)(uintptr_t)w->laddr, w->len);
  q->sq_psn = (q->sq_psn + npsn) & 0xffffff;
  d->rq_psn = (d->rq_psn + npsn) & 0xffffff;
  st_writes++;
  st_bytes += w->len;
  if (w->imm_op) {   /* the bytes are in place before the receive completes */
    uint64_t id = d->rq[d->rq_head];
    d->rq_head = (d->rq_head + 1) % d->rq_cap;
    d->rq_n--;
    push(d->qp.recv_cq, (struct ibv_wc){.wr_id = id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                                        .byte_len = w->len, .imm_data = w->imm, .qp_num = d->qp.qp_num,
                                        .src_qp = q->qp.qp_num, .wc_flags = IBV_WC_WITH_IMM});
  }
  if (w->signaled)
    push(q->qp.send_cq, (struct ibv_wc){.wr_id = w->wr_id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RDMA_WRITE,
                                        .byte_len = w->len, .qp_num = q->qp.qp_num});
  free(w->inl);
  w->inl = NULL;
  q->sq_head = (q->sq_head + 1) % q->sq_cap;
  q->sq_n--;
  return 1;
}

/* A few rounds of the network (mu held): each picks a QP at random and
 * runs up to a few of its WRs.  Returns the WRs that ran. */
static int net_rounds(int rounds) {
  int ran = 0;
  for (int r = 0; r < rounds && qp_next; r++) {
    sim_qp *q = qps[rnd(qp_next)];
    if (!q || q->state != IBV_QPS_RTS) continue;
    for (uint32_t k = 1 + rnd(4); k && q->sq_n && q->state == IBV_QPS_RTS && run_one(q); k--) ran++;
  }
  return ran;
}

static int work_left(void) {
  for (uint32_t i = 0; i < qp_next; i++)
    if (qps[i] && qps[i]->state == IBV_QPS_RTS && qps[i]->sq_n) return 1;
  return 0;
}

/* The wire: runs WRs while any wait, sleeps on wire_cv otherwise, ends
 * with the last QP.  Short random pauses let WRs of several QPs pile up,
 * so that the random choice reorders them. */
static void *wire_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (live_qps && !work_left()) pthread_cond_wait(&wire_cv, &mu);
    if (!live_qps) break;
    net_rounds(2 * (int)qp_next + 8);
    unsigned pause = rnd(4) ? rnd(30) : 0;
    pthread_mutex_unlock(&mu);
    if (pause) usleep(pause);
    else sched_yield();
    pthread_mutex_lock(&mu);
  }
  wire_running = 0;
  pthread_mutex_unlock(&mu);
  return NULL;
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  sim_cq *q = (sim_cq *)cq;
  int k = 0;
  pthread_mutex_lock(&mu);
  if (!rnd(4) || !wire_running) net_rounds(8);   /* the poller moves the network now and then */
  for (; k < n && q->n; k++, q->head = (q->head + 1) % q->cap, q->n--) wc[k] = q->wc[q->head];
  pthread_mutex_unlock(&mu);
  return k;
}

/* Counters since the module was loaded: RDMA writes run, their bytes, waits
 * of a write with immediate for a receive, writes that ran before an
 * earlier-posted WR of another QP. */
void fake_verbs_stats(uint64_t out[4]);
void fake_verbs_stats(uint64_t out[4]) {
  pthread_mutex_lock(&mu);
  out[0] = st_writes, out[1] = st_bytes, out[2] = st_waits, out[3] = st_overtook;
  pthread_mutex_unlock(&mu);
}
