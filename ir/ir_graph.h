/* ir_graph.h -- the happens-before graph of one tile iteration of a program:
 * a node per step, edges for program order, dependencies, messages and
 * (with bounded FIFO slots) free slots. */
#ifndef IR_GRAPH_H
#define IR_GRAPH_H

#include "ir.h"
#include "ir_check.h"

/* Edge kinds. */
enum { IR_EDGE_ORDER, IR_EDGE_DEP, IR_EDGE_MSG, IR_EDGE_SLOT };

typedef struct ir_graph {
  long n;                 /* nodes (= steps of the program) */
  long **base;            /* [rank][tb]: node of step 0 */
  int *node_r, *node_t, *node_s;
  long *succ_off, *succ;  /* CSR successor lists */
  unsigned char *kind;    /* IR_EDGE_* of each succ entry */
  int ngpus;
} ir_graph;

/* Builds the graph; pe pairs each send with its receive (k-th with k-th).
 * With slots > 0 each connection holds at most `slots` messages: the k-th
 * receive of a connection comes before its (k+slots)-th send (a slot
 * edge).  A program runs without deadlock for that many slots exactly
 * when this graph has no cycle: edges across tiles only go forward, so one
 * tile's graph decides. */
bt_result ir_graph_build(const ir_prog *p, const ir_peers *pe, int slots, ir_graph *g);
void ir_graph_free(ir_graph *g);

/* Fills order[0..n) with a topological order.  Returns 0 when the graph has
 * a cycle; then order[0] is a node on one. */
int ir_graph_topo(const ir_graph *g, long *order);

/* vc[v * nt + u] = the number of steps of rank r's thread block u that
 * happen before or at node v (nt: rank r's thread blocks; vc holds n * nt
 * entries), over the whole graph in the topological `order`.  Step s of
 * tb u happens before node v exactly when vc[v * nt + u] >= s + 1. */
void ir_graph_clocks(const ir_graph *g, const long *order, int r, int nt, int32_t *vc);

#endif
