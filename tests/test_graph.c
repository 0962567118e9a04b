/* test_graph.c -- the happens-before graph of a program and the vector
 * clocks the race check orders steps by, against plain reachability. */
#include "ir.h"
#include "ir_check.h"
#include "ir_graph.h"
#include "ir_peers.h"
#include "ir_read.h"
#include "sbuf.h"
#include "tap.h"

#include <stdint.h>
#include <string.h>

/* The race check's vector clocks against reachability in the graph, node
 * by node: for one rank's columns and for every rank's (what a direct
 * program's check uses), "a happens before or at v" must be exactly "v is
 * reachable from a".  The clocks join four columns at a time and skip the
 * nodes no column's node reaches; the programs (the last made here) have
 * thread blocks per rank that are no multiple of four, compute thread blocks (a column per step)
 * and paths that leave a rank and come back. */
static char *clock_ring(void) {   /* 3 ranks of 6 thread blocks, a ring a channel, each send after the last receive */
  sbuf b = {0};
  const int R = 3, T = 6;
  sb_add(&b, "<algo ngpus=\"%d\" coll=\"custom\" nchannels=\"%d\" nchunksperloop=\"%d\">\n", R, T, T);
  for (int r = 0; r < R; r++) {
    sb_add(&b, "<gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\">\n", r, T, T);
    for (int t = 0; t < T; t++) {
      sb_add(&b, "<tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", t, (r + 1) % R, (r + R - 1) % R, t);
      sb_add(&b, "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"%d\" dstbuf=\"o\" dstoff=\"%d\" cnt=\"1\" depid=\"%d\" deps=\"%d\" hasdep=\"0\"/>\n",
             t, t, t ? t - 1 : -1, t ? 1 : -1);
      sb_add(&b, "<step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"%d\" dstbuf=\"o\" dstoff=\"%d\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"%d\"/>\n</tb>\n",
             t, t, t < T - 1);
    }
    sb_add(&b, "</gpu>\n");
  }
  sb_add(&b, "</algo>\n");
  return b.s;
}

static void test_clocks(const char **paths, int n) {
  for (int i = 0; i < n; i++) {
    char *text = paths[i] ? tap_slurp(paths[i]) : clock_ring();
    if (!text) { printf("Bail out! cannot read %s\n", paths[i]); exit(1); }
    if (!paths[i]) paths[i] = "ring.xml";
    rt_diag *d = rt_diag_new(10);
    ir_prog *p = NULL;
    ir_peers pe;
    ir_graph g;
    if (ir_read_memory(text, strlen(text), paths[i], &p, d) || ir_check(p, d) || ir_peers_build(p, &pe)) {
      ok(0, "%s: loads for the clocks: %s", paths[i], rt_diag_text(d));
      free(text); ir_prog_free(p); rt_diag_free(d);
      continue;
    }
    int built = !ir_graph_build(p, &pe, 0, &g);
    ir_peers_free(&pe);
    if (!built) { ok(0, "%s: the graph builds", paths[i]); free(text); ir_prog_free(p); rt_diag_free(d); continue; }
    long nn = g.n, *order = malloc((nn + 1) * sizeof *order), *stack = malloc((nn + 1) * sizeof *stack);
    unsigned char *seen = malloc(nn + 1);
    int32_t *vc = malloc(((size_t)nn * g.colbase[g.ngpus] + 1) * sizeof *vc);
    long wrong = 0, pairs = 0;
    int sorted = order && stack && seen && vc && ir_graph_topo(&g, order);
    for (int r = -1; sorted && r < g.ngpus; r++) {
      ir_graph_clocks(&g, order, r, vc);
      for (long a = 0; a < nn; a++) {
        if (r >= 0 && g.node_r[a] != r) continue;
        memset(seen, 0, nn);
        long top = 0;
        stack[top++] = a;
        seen[a] = 1;
        while (top) {
          long v = stack[--top];
          for (long e = g.succ_off[v]; e < g.succ_off[v + 1]; e++)
            if (!seen[g.succ[e]]) { seen[g.succ[e]] = 1; stack[top++] = g.succ[e]; }
        }
        for (long v = 0; v < nn; v++, pairs++)
          wrong += (r < 0 ? ir_graph_before_all(&g, vc, a, v) : ir_graph_before(&g, vc, a, v)) != seen[v];
      }
    }
    ok(sorted && wrong == 0 && pairs > 0, "%s: the vector clocks order %ld node pairs as the graph does (%ld wrong)",
       paths[i], pairs, wrong);
    free(order); free(stack); free(seen); free(vc);
    ir_graph_free(&g);
    free(text);
    ir_prog_free(p);
    rt_diag_free(d);
  }
}

int main(int argc, char **argv) {
  const char *paths[] = {argc > 1 ? argv[1] : "tests/fused_2r.xml", argc > 2 ? argv[2] : "tests/embed_2r.xml",
                         argc > 3 ? argv[3] : "tests/direct_2r.xml", argc > 4 ? argv[4] : "tests/direct_ll_4r.xml", NULL};
  test_clocks(paths, 5);
  return tap_done();
}
