/* fz_net.c -- fuzzes what a rank of the network transport takes from a peer
 * on an established link: the TCP backend's frames (net_socket.c) and the
 * checks of every piece and credit before a byte is stored (net.c).  No
 * proxy thread: the target drives the backend's progress itself and plays
 * the GPU (it consumes every message as soon as it is published).
 *
 * Each input builds a fresh rank 1 of 2 (three connections: two from rank
 * 0 on channels 0 and 1, one back), greets it on its two sockets as rank 0
 * with the right token, then sends the input's bytes: the first piece (a
 * 2-byte big-endian length first) on socket 0, the rest on socket 1; then
 * both sockets end.  Frames are little-endian (net_socket.h), as the seeds. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fz_conn.h"
#include "net.h"
#include "net_socket.h"
#include "rt_socket.h"

enum { SLOT = 4096, NSLOTS = 4, NSOCKS = 2 };


int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("BATON_DEBUG", "NONE", 0);   /* BATON_DEBUG=WARN shows what each input did */
  setenv("BATON_NET", "socket", 1);
  setenv("BATON_SOCKET_NSOCKS", "2", 1);
  setenv("BATON_SOCKET_IFNAME", "=lo", 1);
  setenv("BATON_NET_CONNECT_TIMEOUT", "5", 1);
  return 0;
}

/* The GPU: every message published is consumed at once (after each piece
 * lands, so that a stream of messages finds its slots free). */
static int landed_then_consume(void *arg, int link, const net_piece *p) {
  net *nt = arg;
  int r = nt->sink.landed(arg, link, p);   /* the transport's own */
  for (int i = 0; i < nt->nr; i++) {
    net_rconn *c = &nt->r[i];
    if (*c->head != c->done) abort();   /* published exactly what is complete */
    __atomic_store_n(c->tail, c->done, __ATOMIC_RELEASE);
  }
  return r;
}

/* Sends what of d[*off..len) fits without blocking; 1 when all is out. */
static int push(int fd, const uint8_t *d, size_t len, size_t *off) {
  while (*off < len) {
    struct iovec v = {(void *)(d + *off), len - *off};
    ssize_t k = rt_socket_send(fd, &v, 1);
    if (k <= 0) return k < 0;   /* broken: nothing more will go */
    *off += (size_t)k;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n > (1 << 16)) return 0;
  static tp_peer peers[2];
  tp_peer_self(&peers[0], 0);
  tp_peer_self(&peers[1], 0);
  tp_peer_group(peers, 2, 1);
  tp_key keys[3] = {{0, 1, 0, 0, 0}, {0, 1, 1, 0, 0}, {1, 0, 0, 0, 0}};
  volatile int32_t abort_flag = 0;
  tp_ctx x = {1, 2, peers, NSLOTS, SLOT, 0, &tp_heap_mem, &abort_flag};
  void *state = NULL;
  unsigned char blob[TP_BLOB_BYTES];
  if (tp_net_ops.setup(&x, keys, 3, &state, blob)) return 0;
  net *nt = state;
  ns_addr real;
  memcpy(&real, blob + NET_BLOB_ADDR, sizeof real);
  ns_addr_wire(&real);
  rt_sockaddr to;
  int fd[NSOCKS] = {-1, -1};
  int64_t deadline = rt_time_ns() + 5000000000ll;
  int ok = !rt_socket_unpack(real.addr, &to);
  for (int s = 0; s < NSOCKS && ok; s++) {
    ok = !rt_socket_connect(&to, deadline, -1, "fz_net", &fd[s]);
    ns_hello h = {NS_HELLO_MAGIC, NS_VERSION, 0, 1, s, NSOCKS, {0}, 0, 0};
    memcpy(h.token, real.token, sizeof h.token);
    ns_hello_wire(&h);
    size_t off = 0;
    if (ok) ok = push(fd[s], (const uint8_t *)&h, sizeof h, &off) && off == sizeof h;
  }
  unsigned char addrs[2 * NET_ADDR_BYTES] = {0};
  net_link_req req = {0, nt->nlinks ? nt->links[0].nsend : 0, nt->nlinks ? nt->links[0].nrecv : 0};
  if (ok && nt->nlinks == 1) ok = !nt->be->connect(nt->bctx, &req, 1, addrs);
  if (ok) {
    const uint8_t *piece[NSOCKS];
    size_t len[NSOCKS], off[NSOCKS] = {0, 0};
    int done[NSOCKS] = {0, 0};
    for (int s = 0; s < NSOCKS; s++) len[s] = fz_next_piece(&d, &n, s == NSOCKS - 1, &piece[s]);
    net_sink sink = nt->sink;
    sink.landed = landed_then_consume;
    int idle = 0;
    for (int round = 0; round < 4096 && idle < 3; round++) {
      for (int s = 0; s < NSOCKS; s++)
        if (!done[s] && push(fd[s], piece[s], len[s], &off[s])) {
          done[s] = 1;
          shutdown(fd[s], SHUT_WR);
        }
      int failed = -1;
      int moved = nt->be->progress(nt->bctx, &sink, &failed);
      if (moved < 0) break;
      idle = moved == 0 && done[0] && done[1] ? idle + 1 : 0;
      if (!moved) {
        struct pollfd p[NSOCKS];
        int np = nt->be->pollfds(nt->bctx, p, NSOCKS);
        poll(p, np, 1);
      }
    }
  }
  for (int s = 0; s < NSOCKS; s++)
    if (fd[s] >= 0) close(fd[s]);
  tp_net_ops.free(state);
  return 0;
}
