/* ir_graph.h -- the happens-before graph of one tile iteration of a program:
 * a node per step, edges for program order, dependencies, messages and
 * (with bounded FIFO slots) free slots; in a direct program, signals (a
 * sig to the wait that takes it) and, in LL, landings (a put to every step
 * of its peer that reads what it lands).  The steps of a compute thread
 * block (ir_tb_compute) run in any order: no program-order edges join
 * them. */
#ifndef IR_GRAPH_H
#define IR_GRAPH_H

#include "ir.h"
#include "ir_peers.h"

/* Edge kinds. */
enum { IR_EDGE_ORDER, IR_EDGE_DEP, IR_EDGE_MSG, IR_EDGE_SLOT, IR_EDGE_SIG, IR_EDGE_LAND, IR_EDGE_KINDS };

/* The most vector-clock entries (nodes x columns) a check computes; larger
 * programs skip the check with an INFO log (ir_check.h). */
#define IR_GRAPH_MAX_CLOCKS (64L << 20)

typedef struct ir_graph {
  long n;                 /* nodes (= steps of the program) */
  long **base;            /* [rank][tb]: node of step 0 */
  int *node_r, *node_t, *node_s;
  long *succ_off, *succ;  /* CSR successor lists */
  unsigned char *kind;    /* IR_EDGE_* of each succ entry */
  int ngpus;
  /* Vector-clock columns (ir_graph_clocks): a node counts in column
   * col[v] of its rank with value val[v]; ncols[r] columns on rank r.  An
   * ordinary tb is one column (its steps in program order, val s+1); each
   * step of a compute thread block a column of its own (val 1).  Every
   * rank's columns together (ir_graph_clocks with r = -1): rank r's column
   * k is column colbase[r] + k of colbase[ngpus]. */
  int *col, *val, *ncols, *colbase;
} ir_graph;

/* Builds the graph; pe pairs each send with its receive (k-th with k-th).
 * With slots > 0 each connection holds at most `slots` messages: the k-th
 * receive of a connection comes before its (k+slots)-th send (a slot
 * edge).  A program runs without deadlock for that many slots exactly
 * when this graph has no cycle: edges across tiles only go forward, so one
 * tile's graph decides.  In a direct program the k-th sig of a stream
 * leads to the wait whose signals hold the k-th (signals count per tile,
 * like messages), and in an LL one each put leads to every step of its
 * peer whose local source, or a reduction's destination, overlaps its
 * landing (ir_direct.h): such a step waits for the put's data. */
bt_result ir_graph_build(const ir_prog *p, const ir_peers *pe, int slots, ir_graph *g);
void ir_graph_free(ir_graph *g);

/* Fills order[0..n) with a topological order.  Returns 0 when the graph has
 * a cycle; then order[0] is a node on one. */
int ir_graph_topo(const ir_graph *g, long *order);

/* Vector clocks of rank r over the whole graph in the topological
 * `order`: vc[v * g->ncols[r] + k] is the largest value of a node of
 * column k that happens before or at node v (vc holds n * ncols[r]
 * entries).  r = -1: the columns of every rank (n * colbase[ngpus]
 * entries, rank q's column k at colbase[q] + k), which order steps of
 * different ranks too (ir_graph_before_all). */
void ir_graph_clocks(const ir_graph *g, const long *order, int r, int32_t *vc);

/* Whether node a (of rank r, whose clocks vc holds) happens before or at
 * node v. */
static inline int ir_graph_before(const ir_graph *g, const int32_t *vc, long a, long v) {
  return vc[(size_t)v * g->ncols[g->node_r[a]] + g->col[a]] >= g->val[a];
}

/* Whether node a happens before or at node v, any ranks, with the clocks
 * of every rank (ir_graph_clocks with r = -1) in vc. */
static inline int ir_graph_before_all(const ir_graph *g, const int32_t *vc, long a, long v) {
  return vc[(size_t)v * g->colbase[g->ngpus] + g->colbase[g->node_r[a]] + g->col[a]] >= g->val[a];
}

#endif
