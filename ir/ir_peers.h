/* ir_peers.h -- the ends of a program's connections: each rank's thread
 * blocks by (peer, channel), and the thread block at the other end of
 * every send and receive.  The validator (ir_check.h) checks the
 * connection rules with them; the step graph, the race check, the
 * dealiasing rewrite and the dot output pair sends with receives. */
#ifndef IR_PEERS_H
#define IR_PEERS_H

#include "ir.h"
#include "rt_result.h"

/* A connection end of a thread block: (peer, channel), the tb's index. */
typedef struct ir_conn_end { int peer, chan, t; } ir_conn_end;

/* The connection ends of a rank's tbs in one direction (send or recv
 * peers >= 0), sorted by (peer, channel, tb); *n of them.  NULL when out
 * of memory; the caller frees it. */
ir_conn_end *ir_conn_ends(const ir_gpu *g, int send, int *n);

/* For each (rank, tb), the tb on the peer rank at the other end of its
 * send / recv connection, or -1.  Arrays are indexed [rank][tb]; the
 * caller frees them with ir_peers_free.  Requires ir_check to have passed
 * the connection rules. */
typedef struct ir_peers {
  int **send_tb;   /* tb on rank tb.send that receives from this tb */
  int **recv_tb;   /* tb on rank tb.recv that sends to this tb */
  int n;
} ir_peers;
bt_result ir_peers_build(const ir_prog *p, ir_peers *out);
void ir_peers_free(ir_peers *pe);

#endif
