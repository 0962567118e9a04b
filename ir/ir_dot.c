/* ir_dot.c -- the schedule as a Graphviz digraph (baton explain --dot,
 * baton compile --dot). */
#include "ir_check.h"
#include "ir_graph.h"
#include "ir_write.h"

#include <stdio.h>

/* Writes s as a DOT string body: quotes and backslashes escaped. */
static void dot_str(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
}

bt_result ir_write_dot(const ir_prog *p, FILE *f) {
  ir_peers pe;
  CHECK(ir_peers_build(p, &pe));
  ir_graph g;
  bt_result res = ir_graph_build(p, &pe, 0, &g);
  ir_peers_free(&pe);
  if (res) return res;
  fputs("digraph \"", f);
  dot_str(f, p->name && *p->name ? p->name : "baton");
  fprintf(f, "\" {\n  label=\"%s on %d ranks: %ld thread blocks, %ld steps; blue: messages, dashed: dependencies%s\";\n",
          ir_coll_name[p->coll], p->ngpus, ir_prog_ntbs(p), ir_prog_nsteps(p),
          ir_prog_direct(p) ? ", red: signals, green dotted: landings" : "");
  fputs("  node [shape=box, fontname=\"monospace\", fontsize=10];\n", f);
  for (int r = 0; r < p->ngpus; r++) {
    fprintf(f, "  subgraph cluster_r%d {\n    label=\"rank %d\";\n", r, r);
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      fprintf(f, "    subgraph cluster_r%d_t%d {\n      label=\"tb %d: chan %d", r, t, t, tb->chan);
      if (tb->send >= 0) fprintf(f, ", send %d", tb->send);
      if (tb->recv >= 0) fprintf(f, ", recv %d", tb->recv);
      fputs("\";\n", f);
      for (int s = 0; s < tb->nsteps; s++) {
        const ir_step *st = &tb->steps[s];
        char text[160];
        ir_step_text(p, tb, st, text, sizeof text);
        fprintf(f, "      r%dt%ds%d [label=\"%d: ", r, t, s, s);
        dot_str(f, text);
        if (st->prov) { fputs("\\n", f); dot_str(f, st->prov); }
        fputs("\"];\n", f);
      }
      fputs("    }\n", f);
    }
    fputs("  }\n", f);
  }
  for (long v = 0; v < g.n; v++)
    for (long e = g.succ_off[v]; e < g.succ_off[v + 1]; e++) {
      long w = g.succ[e];
      static const char *const style[IR_EDGE_KINDS] = {
          "", " [style=dashed]", " [color=blue, penwidth=2, constraint=false]", "",
          " [color=red, penwidth=2, constraint=false]", " [color=darkgreen, style=dotted, penwidth=2, constraint=false]"};
      fprintf(f, "  r%dt%ds%d -> r%dt%ds%d%s;\n", g.node_r[v], g.node_t[v], g.node_s[v],
              g.node_r[w], g.node_t[w], g.node_s[w], style[g.kind[e]]);
    }
  fputs("}\n", f);
  ir_graph_free(&g);
  return BT_OK;
}
