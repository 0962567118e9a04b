/* bench_out.c -- `baton bench` results: the text table (nccl-tests'
 * columns, both libraries side by side; with --inplace both, both placements
 * too; with -d all / -o all, each (type, op) combination's rows), CSV and
 * JSON. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void bench_table_init(bench_table *t, const bench_opts *o, int nranks) {
  memset(t, 0, sizeof *t);
  t->coll = o->coll;
  t->root = o->root;
  t->dtype = o->dtype;
  t->op = o->op;
  t->all_types = o->all_types;
  t->all_ops = o->all_ops && bench_reduces(o->coll);
  t->inplace = o->inplace;
  t->nranks = nranks;
  t->procs = o->procs;
  t->iters = o->iters;
  t->warmup = o->warmup;
  t->graph = o->graph;
  t->between = o->between;
  t->nccl_mem = o->nccl_mem;
  t->rounds = o->rounds;
  int64_t sizes[BENCH_MAX_SIZES];
  bench_combo c[BENCH_MAX_COMBOS];
  int ns = bench_sizes(o, sizes, BENCH_MAX_SIZES);
  t->maxrows = (ns > 0 ? ns : BENCH_MAX_SIZES) * (o->inplace == BENCH_BOTH_PLACES ? 2 : 1) * bench_combos(o, c);
  t->rows = calloc((size_t)t->maxrows, sizeof *t->rows);
}

void bench_table_free(bench_table *t) {
  free(t->rows);
  t->rows = NULL;
  t->nrows = 0;
}

double bench_ratio(const bench_row *r) {
  double n = r->lib[BENCH_NCCL].time_us, b = r->lib[BENCH_BATON].time_us;
  return n > 0 && b > 0 ? n / b : -1;
}

/* Row r's type and op: the table's, or the row's own where the table
 * has several (-d all, -o all). */
static ip_dtype row_type(const bench_table *t, const bench_row *r) {
  return t->all_types ? r->dtype : t->dtype;
}

static ip_redop row_op(const bench_table *t, const bench_row *r) {
  return t->all_ops ? r->op : t->op;
}

/* Row r's redop column: its op's name, "none" for a collective that
 * does not reduce. */
static const char *row_op_name(const bench_table *t, const bench_row *r) {
  return bench_reduces(t->coll) ? ip_redop_name[row_op(t, r)] : "none";
}

/* 1 when the table has several combinations, so that lines about one
 * row name its type and op. */
static int multi(const bench_table *t) { return t->all_types || t->all_ops; }

/* Row r's combination as "f32 sum" ("f32" where nothing reduces) into
 * buf. */
static void combo_label(const bench_table *t, const bench_row *r, char *buf, size_t len) {
  snprintf(buf, len, "%s%s%s", ip_dtype_name[row_type(t, r)], bench_reduces(t->coll) ? " " : "",
           bench_reduces(t->coll) ? row_op_name(t, r) : "");
}

/* ", f32 sum" into buf where the table has several combinations, else "". */
static void combo_suffix(const bench_table *t, const bench_row *r, char *buf, size_t len) {
  char l[32];
  combo_label(t, r, l, sizeof l);
  snprintf(buf, len, "%s%s", multi(t) ? ", " : "", multi(t) ? l : "");
}

/* Row r's placement, 0 or 1: the table's own with one placement, else
 * the row's. */
static int row_place(const bench_table *t, const bench_row *r) {
  return t->inplace == BENCH_BOTH_PLACES ? r->inplace != 0 : t->inplace != 0;
}

static void row_bw(const bench_table *t, const bench_row *r, int lib, double *algbw, double *busbw) {
  bench_geom g;
  bench_geometry(t->coll, r->bytes, ip_dtype_size[row_type(t, r)], t->nranks, &g);
  bench_bw(t->coll, &g, t->nranks, r->lib[lib].time_us * 1e-6, algbw, busbw);
}

/* With --inplace both: "  --- label ---" filling width columns. */
static void group_title(FILE *f, const char *label, int width) {
  int len = (int)strlen(label) + 2, left = (width - 2 - len) / 2, right = width - 2 - len - left;
  fprintf(f, "  %.*s %s %.*s", left, "------------------------------", label, right, "------------------------------");
}

/* The column names and units lines: one group per library (-I 0 or 1),
 * or one group per placement (--inplace both). */
static void column_heads(FILE *f, const bench_table *t) {
  if (t->inplace != BENCH_BOTH_PLACES) {
    fprintf(f, "# %10s %12s %5s %6s  %10s %7s %7s %7s  %10s %7s %7s %7s  %6s  %s\n", "size", "count", "type", "redop",
            "nccl time", "algbw", "busbw", "#wrong", "baton time", "algbw", "busbw", "#wrong", "ratio", "baton algorithm");
    fprintf(f, "# %10s %12s %5s %6s  %10s %7s %7s %7s  %10s %7s %7s %7s  %6s\n", "(B)", "(elements)", "", "", "(us)",
            "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "nccl/b");
    return;
  }
  fprintf(f, "# %10s %12s %5s %6s", "", "", "", "");
  group_title(f, "out of place", 53);
  group_title(f, "in place", 53);
  fprintf(f, "\n# %10s %12s %5s %6s", "size", "count", "type", "redop");
  for (int p = 0; p < 2; p++)
    fprintf(f, "  %9s %7s %10s %7s %7s %6s", "nccl time", "busbw", "baton time", "busbw", "#wrong", "ratio");
  fprintf(f, "  %s\n# %10s %12s %5s %6s", "baton algorithm", "(B)", "(elements)", "", "");
  for (int p = 0; p < 2; p++) fprintf(f, "  %9s %7s %10s %7s %7s %6s", "(us)", "(GB/s)", "(us)", "(GB/s)", "nccl/b", "nccl/b");
  fprintf(f, "\n");
}

/* The header's type and op: "f32 sum", or with -d all / -o all
 * "10 types (-d all) x 5 ops (-o all)", "f32 x 5 ops (-o all)", ... */
static void combo_title(const bench_table *t, char *buf, size_t len) {
  char ty[32], op[32];
  if (t->all_types) snprintf(ty, sizeof ty, "%d types (-d all)", IP_DTYPE_COUNT);
  else snprintf(ty, sizeof ty, "%s", ip_dtype_name[t->dtype]);
  if (t->all_ops) snprintf(op, sizeof op, "%d ops (-o all)", IP_REDOP_COUNT);
  else snprintf(op, sizeof op, "%s", bench_reduces(t->coll) ? ip_redop_name[t->op] : "none");
  snprintf(buf, len, "%s%s%s", ty, multi(t) ? " x " : " ", op);
}

void bench_print_header(FILE *f, const bench_table *t) {
  char combo[80], root[32] = "";
  combo_title(t, combo, sizeof combo);
  if (bench_rooted(t->coll)) snprintf(root, sizeof root, ", root %d", t->root);
  fprintf(f, "# baton bench: %s%s, %d ranks (%s), %s, %s, %d iterations after %d warmup%s, median of %d round%s\n",
          bench_coll_name[t->coll], root, t->nranks, t->procs ? "one process per GPU" : "one process", combo,
          bench_place_name(t->inplace), t->iters, t->warmup,
          t->graph ? ", in a CUDA graph" : "", t->rounds, t->rounds == 1 ? "" : "s");
  if (t->graph) fprintf(f, "# CUDA graphs: the %d iterations captured per GPU and launched %d times\n", t->iters, t->graph);
  if (t->nccl_mem)
    fprintf(f, "# buffers: from NCCL's ncclMemAlloc, as nccl-tests allocates them (cuMem, every GPU granted access)\n");
  if (t->between)
    fprintf(f, "# between two calls: a one-block kernel on each rank's stream (its time in both columns)\n");
  if (t->nccl[0]) fprintf(f, "# nccl: %s\n", t->nccl);
  else fprintf(f, "# nccl: NOT USED: %s; baton runs alone\n", t->nccl_missing[0] ? t->nccl_missing : "--no-nccl");
  fprintf(f, "#\n");
  column_heads(f, t);
  fflush(f);
}

void bench_print_row(FILE *f, const bench_table *t, const bench_row *r) {
  char what[40];
  combo_suffix(t, r, what, sizeof what);
  for (int l = 0; l < BENCH_NLIBS; l++)
    if (r->lib[l].error[0])
      fprintf(f, "# %s, size %lld%s: %s\n", bench_lib_name[l], (long long)r->bytes, what, r->lib[l].error);
  fprintf(f, "  %10lld %12lld %5s %6s", (long long)r->bytes, (long long)r->count, ip_dtype_name[row_type(t, r)],
          row_op_name(t, r));
  for (int l = 0; l < BENCH_NLIBS; l++) {
    const bench_result *x = &r->lib[l];
    char wrong[24] = "-";
    if (x->wrong >= 0) snprintf(wrong, sizeof wrong, "%lld", (long long)x->wrong);
    if (x->time_us >= 0) {
      double a, b;
      row_bw(t, r, l, &a, &b);
      fprintf(f, "  %10.2f %7.2f %7.2f %7s", x->time_us, a, b, wrong);
    } else {
      fprintf(f, "  %10s %7s %7s %7s", l == BENCH_NCCL && !t->nccl[0] ? "-" : "error", "-", "-", wrong);
    }
  }
  double q = bench_ratio(r);
  if (q > 0) fprintf(f, "  %6.2f", q);
  else fprintf(f, "  %6s", "-");
  fprintf(f, "  %s\n", r->algorithm[0] ? r->algorithm : "-");
  if (r->net_bytes > 0 && r->lib[BENCH_BATON].time_us > 0)
    fprintf(f, "#   baton over the network: %.0f bytes per rank per call, %.3f GB/s per rank each way\n", r->net_bytes,
            r->net_bytes / (r->lib[BENCH_BATON].time_us * 1e3));
  fflush(f);
}

/* Library lib's time in r in a field of width w after a space: the
 * time, or "error" ("-" where NCCL is not used); then its busbw (width 7,
 * "-" when not measured). */
static void time_busbw(FILE *f, const bench_table *t, const bench_row *r, int lib, int w) {
  const bench_result *x = &r->lib[lib];
  if (x->time_us >= 0) {
    double a, b;
    row_bw(t, r, lib, &a, &b);
    fprintf(f, " %*.2f %7.2f", w, x->time_us, b);
  } else {
    fprintf(f, " %*s %7s", w, lib == BENCH_NCCL && !t->nccl[0] ? "-" : "error", "-");
  }
}

/* One placement's column group of an --inplace both line: "  nccl time busbw
 * baton time busbw N/b ratio". */
static void pair_group(FILE *f, const bench_table *t, const bench_row *r) {
  char wrong[BENCH_NLIBS][24], both[50];
  for (int l = 0; l < BENCH_NLIBS; l++) {
    if (r->lib[l].wrong >= 0) snprintf(wrong[l], sizeof wrong[l], "%lld", (long long)r->lib[l].wrong);
    else snprintf(wrong[l], sizeof wrong[l], "-");
  }
  snprintf(both, sizeof both, "%s/%s", wrong[BENCH_NCCL], wrong[BENCH_BATON]);
  fputc(' ', f);
  time_busbw(f, t, r, BENCH_NCCL, 9);
  time_busbw(f, t, r, BENCH_BATON, 10);
  fprintf(f, " %7s", both);
  double q = bench_ratio(r);
  if (q > 0) fprintf(f, " %6.2f", q);
  else fprintf(f, " %6s", "-");
}

/* A row's error lines (before its line), its placement named (and its
 * combination, where the table has several). */
static void pair_errors(FILE *f, const bench_table *t, const bench_row *r, int place) {
  char what[40];
  combo_suffix(t, r, what, sizeof what);
  for (int l = 0; l < BENCH_NLIBS; l++)
    if (r->lib[l].error[0])
      fprintf(f, "# %s, size %lld%s, %s: %s\n", bench_lib_name[l], (long long)r->bytes, what, bench_place_name(place),
              r->lib[l].error);
}

/* A row's network line (after its line) when baton sent over the network. */
static void pair_network(FILE *f, const bench_row *r, int place) {
  if (r->net_bytes > 0 && r->lib[BENCH_BATON].time_us > 0)
    fprintf(f, "#   baton over the network, %s: %.0f bytes per rank per call, %.3f GB/s per rank each way\n",
            bench_place_name(place), r->net_bytes, r->net_bytes / (r->lib[BENCH_BATON].time_us * 1e3));
}

void bench_print_pair(FILE *f, const bench_table *t, const bench_row *out, const bench_row *in) {
  pair_errors(f, t, out, BENCH_OUT_OF_PLACE);
  pair_errors(f, t, in, BENCH_IN_PLACE);
  fprintf(f, "  %10lld %12lld %5s %6s", (long long)out->bytes, (long long)out->count, ip_dtype_name[row_type(t, out)],
          row_op_name(t, out));
  pair_group(f, t, out);
  pair_group(f, t, in);
  const char *a = out->algorithm[0] ? out->algorithm : "-", *b = in->algorithm[0] ? in->algorithm : "-";
  if (!strcmp(a, b)) fprintf(f, "  %s\n", a);
  else fprintf(f, "  %s / %s\n", a, b);
  pair_network(f, out, BENCH_OUT_OF_PLACE);
  pair_network(f, in, BENCH_IN_PLACE);
  fflush(f);
}

/* The footer's sums over some rows. */
typedef struct bench_sums {
  double bus[BENCH_NLIBS], host[BENCH_NLIBS], logq;
  int nhost[BENCH_NLIBS], both, nq, bad;
  int64_t wrong[BENCH_NLIBS];
} bench_sums;

/* The sums over t's rows of placement place (-1: every placement) and of
 * like's type and op (NULL: every combination): busbw and the log of the
 * ratio over the rows both libraries measured, host time per call over
 * the rows each measured, wrong elements, failed calls. */
static void sum_rows(const bench_table *t, int place, const bench_row *like, bench_sums *s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < t->nrows; i++) {
    const bench_row *r = &t->rows[i];
    if (place >= 0 && row_place(t, r) != place) continue;
    if (like && (row_type(t, r) != row_type(t, like) || row_op(t, r) != row_op(t, like))) continue;
    for (int l = 0; l < BENCH_NLIBS; l++) {
      if (r->lib[l].wrong > 0) s->wrong[l] += r->lib[l].wrong;
      if (r->lib[l].error[0]) s->bad = 1;
      if (r->lib[l].time_us >= 0 && r->lib[l].host_us >= 0) {
        s->host[l] += r->lib[l].host_us;
        s->nhost[l]++;
      }
    }
    double q = bench_ratio(r);
    if (q > 0 && r->count > 0) {
      for (int l = 0; l < BENCH_NLIBS; l++) {
        double a, b;
        row_bw(t, r, l, &a, &b);
        s->bus[l] += b;
      }
      s->both++;
      s->logq += log(q);
      s->nq++;
    }
  }
}

/* "# Avg bus bandwidth" for sums s; what: the placement, or NULL with one. */
static void print_busbw(FILE *f, const bench_sums *s, const char *what) {
  if (s->both)
    fprintf(f, "# Avg bus bandwidth    : nccl %.3f  baton %.3f GB/s (over the %d sizes both measured%s%s)\n",
            s->bus[0] / s->both, s->bus[1] / s->both, s->both, what ? ", " : "", what ? what : "");
}

/* With several combinations: a line per combination, in the order of
 * the rows: its ratio's geometric mean and its wrong elements. */
static void print_combos(FILE *f, const bench_table *t) {
  unsigned char seen[IP_DTYPE_COUNT][IP_REDOP_COUNT];
  memset(seen, 0, sizeof seen);
  for (int i = 0; i < t->nrows; i++) {
    const bench_row *r = &t->rows[i];
    if (seen[row_type(t, r)][row_op(t, r)]) continue;
    seen[row_type(t, r)][row_op(t, r)] = 1;
    bench_sums s;
    char label[32];
    sum_rows(t, -1, r, &s);
    combo_label(t, r, label, sizeof label);
    fprintf(f, "#   %-19s: ", label);
    if (s.nq) fprintf(f, "ratio %.3f over %d %s", exp(s.logq / s.nq), s.nq,
                      t->inplace == BENCH_BOTH_PLACES ? "sizes x placements" : "sizes");
    else fprintf(f, "ratio - (no size both measured)");
    fprintf(f, ", wrong nccl %lld baton %lld%s%s\n", (long long)s.wrong[0], (long long)s.wrong[1],
            s.bad ? ", calls failed" : "", s.wrong[0] || s.wrong[1] || s.bad ? "  FAILED" : "");
  }
}

int bench_print_footer(FILE *f, const bench_table *t) {
  bench_sums all, place[2];
  sum_rows(t, -1, NULL, &all);
  int two = t->inplace == BENCH_BOTH_PLACES;
  if (!two) {
    print_busbw(f, &all, NULL);
    if (all.nq) fprintf(f, "# Geometric mean ratio : %.3f (nccl time / baton time)\n", exp(all.logq / all.nq));
  } else {
    for (int p = 0; p < 2; p++) {
      sum_rows(t, p, NULL, &place[p]);
      print_busbw(f, &place[p], bench_place_name(p));
    }
    if (all.nq) {
      fprintf(f, "# Geometric mean ratio :");
      for (int p = 0; p < 2; p++)
        if (place[p].nq) fprintf(f, " %.3f %s,", exp(place[p].logq / place[p].nq), bench_place_name(p));
      fprintf(f, " %.3f both (nccl time / baton time)\n", exp(all.logq / all.nq));
    }
  }
  if (multi(t)) print_combos(f, t);
  if (all.nhost[0] || all.nhost[1]) {
    fprintf(f, "# Host time per call   :");
    for (int l = 0; l < BENCH_NLIBS; l++)
      if (all.nhost[l]) fprintf(f, " %s %.2f us", bench_lib_name[l], all.host[l] / all.nhost[l]);
    fprintf(f, " (enqueue only, mean over sizes%s)\n", two && multi(t) ? ", placements, types and ops"
                                                      : two ? " and placements" : multi(t) ? ", types and ops" : "");
  }
  fprintf(f, "# Wrong elements       : nccl %lld  baton %lld  %s\n", (long long)all.wrong[0], (long long)all.wrong[1],
          all.wrong[0] || all.wrong[1] ? "FAILED" : "OK");
  if (all.bad) fprintf(f, "# Some calls failed: see the lines above\n");
  return all.wrong[0] || all.wrong[1] || all.bad ? 1 : 0;
}

/* ---- files ---- */

static void csv_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s == '\n' ? ' ' : *s, f);
  }
  fputc('"', f);
}

int bench_write_csv(const char *path, const bench_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "collective,nranks,type,redop,inplace,size,count");
  for (int l = 0; l < BENCH_NLIBS; l++)
    fprintf(f, ",%s_time_us,%s_algbw,%s_busbw,%s_wrong", bench_lib_name[l], bench_lib_name[l], bench_lib_name[l],
            bench_lib_name[l]);
  fprintf(f, ",ratio,algorithm,nccl_error,baton_error,nccl_host_us,baton_host_us,baton_net_bytes\n");
  for (int i = 0; i < t->nrows; i++) {
    const bench_row *r = &t->rows[i];
    fprintf(f, "%s,%d,%s,%s,%d,%lld,%lld", bench_coll_name[t->coll], t->nranks, ip_dtype_name[row_type(t, r)],
            row_op_name(t, r), row_place(t, r), (long long)r->bytes, (long long)r->count);
    for (int l = 0; l < BENCH_NLIBS; l++) {
      const bench_result *x = &r->lib[l];
      if (x->time_us >= 0) {
        double a, b;
        row_bw(t, r, l, &a, &b);
        fprintf(f, ",%.3f,%.4f,%.4f", x->time_us, a, b);
      } else {
        fprintf(f, ",,,");
      }
      if (x->wrong >= 0) fprintf(f, ",%lld", (long long)x->wrong);
      else fprintf(f, ",");
    }
    double q = bench_ratio(r);
    if (q > 0) fprintf(f, ",%.4f,", q);
    else fprintf(f, ",,");
    csv_str(f, r->algorithm);
    for (int l = 0; l < BENCH_NLIBS; l++) {
      fputc(',', f);
      csv_str(f, r->lib[l].error);
    }
    for (int l = 0; l < BENCH_NLIBS; l++) {
      const bench_result *x = &r->lib[l];
      if (x->time_us >= 0 && x->host_us >= 0) fprintf(f, ",%.3f", x->host_us);
      else fputc(',', f);
    }
    fprintf(f, ",%.0f\n", r->net_bytes);
  }
  return fclose(f) ? -1 : 0;
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

int bench_write_json(const char *path, const bench_table *t) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "{\n  \"tool\": \"baton bench\",\n  \"collective\": \"%s\",\n  \"nranks\": %d,\n", bench_coll_name[t->coll],
          t->nranks);
  if (bench_rooted(t->coll)) fprintf(f, "  \"root\": %d,\n", t->root);
  else fprintf(f, "  \"root\": null,\n");
  fprintf(f, "  \"mode\": \"%s\",\n  \"type\": \"%s\",\n  \"redop\": \"%s\",\n  \"inplace\": %s,\n",
          t->procs ? "one process per GPU" : "one process", t->all_types ? "all" : ip_dtype_name[t->dtype],
          !bench_reduces(t->coll) ? "none" : t->all_ops ? "all" : ip_redop_name[t->op],
          t->inplace == BENCH_BOTH_PLACES ? "\"both\"" : t->inplace ? "true" : "false");
  fprintf(f, "  \"iters\": %d,\n  \"warmup\": %d,\n  \"graph_launches\": %d,\n  \"rounds\": %d,\n", t->iters,
          t->warmup, t->graph, t->rounds);
  fprintf(f, "  \"nccl\": ");
  if (t->nccl[0]) json_str(f, t->nccl);
  else fprintf(f, "null");
  fprintf(f, ",\n  \"rows\": [");
  for (int i = 0; i < t->nrows; i++) {
    const bench_row *r = &t->rows[i];
    fprintf(f, "%s\n    {\"size\": %lld, \"count\": %lld, \"inplace\": %s, \"type\": \"%s\", \"redop\": \"%s\"",
            i ? "," : "", (long long)r->bytes, (long long)r->count, row_place(t, r) ? "true" : "false",
            ip_dtype_name[row_type(t, r)], row_op_name(t, r));
    for (int l = 0; l < BENCH_NLIBS; l++) {
      const bench_result *x = &r->lib[l];
      fprintf(f, ",\n     \"%s\": {", bench_lib_name[l]);
      if (x->time_us >= 0) {
        double a, b;
        row_bw(t, r, l, &a, &b);
        fprintf(f, "\"time_us\": %.3f, \"algbw\": %.4f, \"busbw\": %.4f", x->time_us, a, b);
        if (x->host_us >= 0) fprintf(f, ", \"host_us\": %.3f", x->host_us);
      } else {
        fprintf(f, "\"time_us\": null, \"algbw\": null, \"busbw\": null");
      }
      if (x->wrong >= 0) fprintf(f, ", \"wrong\": %lld, \"error\": ", (long long)x->wrong);
      else fprintf(f, ", \"wrong\": null, \"error\": ");
      if (x->error[0]) json_str(f, x->error);
      else fprintf(f, "null");
      fprintf(f, "}");
    }
    double q = bench_ratio(r);
    if (q > 0) fprintf(f, ",\n     \"ratio\": %.4f, \"algorithm\": ", q);
    else fprintf(f, ",\n     \"ratio\": null, \"algorithm\": ");
    if (r->algorithm[0]) json_str(f, r->algorithm);
    else fprintf(f, "null");
    fprintf(f, ", \"baton_net_bytes\": %.0f}", r->net_bytes);
  }
  fprintf(f, "\n  ]\n}\n");
  return fclose(f) ? -1 : 0;
}
