/* tool_sim.c -- `baton sim`: a program timed on a described system. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip_compute.h"
#include "ir_check.h"
#include "ir_read.h"
#include "sim_run.h"
#include "tool.h"

static const char sim_help[] =
  "usage: baton sim PROGRAM.xml --system SPEC [options]\n"
  "       baton sim A.xml B.xml ... --system SPEC [options]   compare programs of one collective\n"
  "       baton sim --fields        the SPEC file's keys, defaults and ranges (Markdown)\n"
  "\n"
  "Predicts how long one call of the program takes on the system SPEC\n"
  "describes (docs/SIMULATION.md): the CPU executor runs it, every tile,\n"
  "and each step it completes is timed by the SPEC's links, ports, latencies\n"
  "and protocol costs.  Prints, per size, the predicted time, the bandwidth\n"
  "(bytes / time), the critical path (its steps, what bound them) and the\n"
  "busiest port.  Given several programs of the same collective and rank\n"
  "count, prints each one's time per size, the fastest, and the sizes where\n"
  "the fastest changes (the crossovers a set's size ranges follow).\n"
  "\n"
  "options:\n"
  "  --system SPEC    the system (\"key value\" lines; 'default' for the defaults)\n"
  "  --sizes LIST     call sizes in bytes of the larger buffer: comma-separated, each\n"
  "                   SIZE or FIRST:LAST[:FACTOR] (default factor 4); K, M, G suffixes\n"
  "                   (default 8:512M:8)\n"
  "  -d, --dtype T    element type (default f32; bf16 for a program whose compute steps\n"
  "                   take only that)\n"
  "  --dim NAME=N     a fused program's dimension (repeatable): a GEMM's W and X\n"
  "                   columns, an embedding table's columns, an interleaved output's\n"
  "                   factors must be given; a GEMV's K is 4096 unless given\n"
  "  --inplace, --outofplace   the call's placement (default: the program's own)\n"
  "  --trace FILE     the last size's timeline, Chrome-trace JSON (Perfetto, chrome://tracing)\n"
  "  --csv FILE       the table as CSV\n"
  "  -q, --quiet      the table only\n";

/* Sizes a --sizes list may name at most, programs one comparison takes. */
#define MAX_SIZES 256
#define MAX_PROGS 16

static int parse_sizes(const char *v, long long *out, int *n) {
  char buf[1024];
  if (strlen(v) >= sizeof buf) { fprintf(stderr, "baton sim: --sizes is too long\n"); return 0; }
  snprintf(buf, sizeof buf, "%s", v);
  *n = 0;
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *c1 = strchr(item, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c1) *c1 = 0;
    if (c2) *c2 = 0;
    long long a, b = 0, f = 4;
    if (!tool_size("sim", "--sizes", item, 1, (long long)1 << 50, &a) ||
        (c1 && !tool_size("sim", "--sizes", c1 + 1, a, (long long)1 << 50, &b)) ||
        (c2 && !tool_int("sim", "--sizes factor", c2 + 1, 2, 1024, &f)))
      return 0;
    for (long long x = a; x <= (c1 ? b : a); x *= f) {
      if (*n == MAX_SIZES) { fprintf(stderr, "baton sim: --sizes names more than %d sizes\n", MAX_SIZES); return 0; }
      out[(*n)++] = x;
      if (x > ((long long)1 << 50) / f) break;
    }
  }
  if (!*n) { fprintf(stderr, "baton sim: --sizes names no size\n"); return 0; }
  return 1;
}

/* The bound that stopped most of the critical path's steps. */
static const char *main_bound(const sim_report *r) {
  int best = SIM_BY_ORDER;
  for (int k = 0; k < SIM_BY_COUNT; k++)
    if (r->path_by[k] > r->path_by[best]) best = k;
  return sim_bound_name[best];
}

int tool_system(const char *cmd, const char *what, struct sim_spec *s) {
  rt_diag *d = rt_diag_new(20);
  int ok = sim_spec_load(what, s, d) == BT_OK;
  if (!ok) fprintf(stderr, "baton %s: invalid system description\n%s", cmd, rt_diag_text(d));
  rt_diag_free(d);
  return ok;
}

/* The element type a run of p takes when -d gives none: f32, or bf16 for
 * a program whose compute steps take only that (a GEMM's), as verify. */
static int default_dtype(const ir_prog *p) {
  return !ip_compute_takes(p, IP_F32) && ip_compute_takes(p, IP_BF16) ? IP_BF16 : IP_F32;
}

/* Several programs of one collective and rank count, timed side by side:
 * each one's time per size, the fastest, and where the fastest changes. */
static int compare(const char *const *files, int n, const char *system, const long long *sizes, int nsizes,
                   int dtype, int inplace, const ip_dims *dims, const char *csv) {
  rt_diag *d = rt_diag_new(20);
  ir_prog *p[MAX_PROGS] = {0};
  double t[MAX_PROGS];
  sim_spec spec;
  FILE *cf = NULL;
  int rc = 1, prev = -1;
  if (!tool_system("sim", system, &spec)) goto out;
  for (int k = 0; k < n; k++) {
    if (tool_is_dir("sim", files[k], "an IR file")) { rc = 2; goto out; }
    rt_diag_clear(d);
    if (ir_read_file(files[k], &p[k], d) || ir_check(p[k], d)) {
      fprintf(stderr, "%s: invalid\n%s", files[k], rt_diag_text(d));
      goto out;
    }
    if (!tool_dims_known(files[k], p[k], dims)) goto out;
    if (k && (p[k]->coll != p[0]->coll || p[k]->ngpus != p[0]->ngpus)) {
      fprintf(stderr, "baton sim: %s is a %s on %d ranks, %s a %s on %d: compare programs of one collective and "
              "rank count\n", files[k], ir_coll_name[p[k]->coll], p[k]->ngpus, files[0], ir_coll_name[p[0]->coll],
              p[0]->ngpus);
      rc = 2;
      goto out;
    }
  }
  if (dtype < 0) dtype = default_dtype(p[0]);
  if (csv && !(cf = fopen(csv, "w"))) {
    fprintf(stderr, "baton sim: cannot write %s: %s\n", csv, strerror(errno));
    goto out;
  }
  printf("%14s", "bytes");
  for (int k = 0; k < n; k++) printf("  %c %12s", 'A' + k, "us");
  printf("  fastest\n");
  for (int k = 0; k < n; k++) printf("# %c: %s\n", 'A' + k, files[k]);
  if (cf) fputs("bytes,program,time_us,fastest\n", cf);
  for (int i = 0; i < nsizes; i++) {
    int best = 0;
    for (int k = 0; k < n; k++) {
      sim_opts o = {.bytes = (uint64_t)sizes[i], .dtype = (ip_dtype)dtype, .inplace = inplace, .dims = dims};
      sim_report rep;
      rt_diag_clear(d);
      if (sim_run(p[k], &spec, &o, &rep, d)) {
        fprintf(stderr, "%s at %lld bytes:\n%s", files[k], sizes[i], rt_diag_text(d));
        goto out;
      }
      t[k] = rep.time_us;
      if (t[k] < t[best]) best = k;
    }
    printf("%14lld", sizes[i]);
    for (int k = 0; k < n; k++) printf("  %c %12.2f", 'A' + k, t[k]);
    printf("  %c\n", 'A' + best);
    for (int k = 0; cf && k < n; k++) fprintf(cf, "%lld,%s,%.4f,%d\n", sizes[i], files[k], t[k], k == best);
    if (prev >= 0 && best != prev)
      printf("# from %lld bytes %c is the fastest (%c before)\n", sizes[i], 'A' + best, 'A' + prev);
    prev = best;
  }
  rc = 0;
out:
  if (cf) fclose(cf);
  for (int k = 0; k < n; k++) ir_prog_free(p[k]);
  rt_diag_free(d);
  return rc;
}

int tool_sim(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) { fputs(sim_help, stdout); return 0; }
  const char *files[MAX_PROGS], *file = NULL, *system = NULL, *trace = NULL, *csv = NULL;
  int nprogs = 0;
  long long sizes[MAX_SIZES];
  int nsizes = 0, quiet = 0, inplace = -1, dtype = -1;   /* -1: default_dtype */
  ip_dims dims = {0};
  enum { O_FIELDS = 256, O_SYSTEM, O_SIZES, O_TRACE, O_CSV, O_INPLACE, O_OUTOFPLACE, O_DIM };
  static const struct option longs[] = {
    {"fields", no_argument, NULL, O_FIELDS}, {"system", required_argument, NULL, O_SYSTEM},
    {"sizes", required_argument, NULL, O_SIZES}, {"dtype", required_argument, NULL, 'd'},
    {"trace", required_argument, NULL, O_TRACE}, {"csv", required_argument, NULL, O_CSV},
    {"inplace", no_argument, NULL, O_INPLACE}, {"outofplace", no_argument, NULL, O_OUTOFPLACE},
    {"dim", required_argument, NULL, O_DIM}, {"quiet", no_argument, NULL, 'q'}, {NULL, 0, NULL, 0}};
  tool_getopt_reset();
  for (int c; (c = tool_getopt("sim", argc, argv, "d:q", longs)) != -1;) {
    const char *v = optarg;
    if (c == O_FIELDS) { sim_spec_markdown(stdout); return 0; }
    if (c == O_SYSTEM) system = v;
    else if (c == O_SIZES) { if (!parse_sizes(v, sizes, &nsizes)) return 2; }
    else if (c == 'd') {
      int t = ip_dtype_from_name(v);
      if (t < 0) { fprintf(stderr, "baton sim: unknown dtype '%s'\n", v); return 2; }
      dtype = t;
    } else if (c == O_DIM) { if (!tool_dim("sim", &dims, v)) return 2; }
    else if (c == O_TRACE) trace = v;
    else if (c == O_CSV) csv = v;
    else if (c == O_INPLACE) inplace = 1;
    else if (c == O_OUTOFPLACE) inplace = 0;
    else if (c == 'q') quiet = 1;
    else return 2;
  }
  for (int i = optind; i < argc; i++) {
    if (nprogs == MAX_PROGS) { fprintf(stderr, "baton sim: at most %d programs at a time\n", MAX_PROGS); return 2; }
    files[nprogs++] = argv[i];
  }
  if (!nprogs || !system) { fputs(sim_help, stderr); return 2; }
  if (!nsizes && !parse_sizes("8:512M:8", sizes, &nsizes)) return 2;
  if (nprogs > 1) return compare(files, nprogs, system, sizes, nsizes, dtype, inplace, &dims, csv);
  file = files[0];
  if (tool_is_dir("sim", file, "an IR file")) return 2;
  rt_diag *d = rt_diag_new(20);
  sim_spec spec;
  ir_prog *p = NULL;
  int rc = 1;
  FILE *tf = NULL, *cf = NULL;
  if (!tool_system("sim", system, &spec)) goto out;
  if (ir_read_file(file, &p, d) || ir_check(p, d)) {
    fprintf(stderr, "%s: invalid\n%s", file, rt_diag_text(d));
    goto out;
  }
  if (!tool_dims_known(file, p, &dims)) goto out;
  if (dtype < 0) dtype = default_dtype(p);
  if ((csv && !(cf = fopen(csv, "w"))) || (trace && !(tf = fopen(trace, "w")))) {
    fprintf(stderr, "baton sim: cannot write %s: %s\n", cf || !csv ? trace : csv, strerror(errno));
    goto out;
  }
  if (!quiet) {
    char bound[160] = "";   /* the dimensions --dim bound */
    for (int k = 0, at = 0; k < dims.n && at < (int)sizeof bound; k++)
      at += snprintf(bound + at, sizeof bound - (size_t)at, ", %s=%lld", dims.name[k], (long long)dims.value[k]);
    int simple = p->ngpus > spec.v[SIM_GPUS] && p->proto != IR_PROTO_SIMPLE;   /* across nodes: the runtime's rule */
    printf("# baton sim: %s (%s, %d ranks, %s%s) on %s (%g nodes x %g GPUs), %s%s\n", file, ir_coll_name[p->coll],
           p->ngpus, ir_proto_name[p->proto], simple ? " run as Simple across nodes" : "", spec.name,
           spec.v[SIM_NODES], spec.v[SIM_GPUS], ip_dtype_name[dtype], bound);
  }
  printf("%14s %12s %11s %7s %6s %10s  %-18s %s\n", "bytes", "time_us", "algbw_GB/s", "tiles", "path", "busy_us",
         "path bound by", "busiest port (busy)");
  if (cf) fputs("bytes,time_us,algbw_gbs,tiles,path_steps,path_busy_us,bound_by,busiest_port,port_util\n", cf);
  sim_report last;
  memset(&last, 0, sizeof last);
  for (int k = 0; k < nsizes; k++) {
    sim_opts o = {.bytes = (uint64_t)sizes[k], .dtype = (ip_dtype)dtype, .inplace = inplace, .dims = &dims,
                  .trace = k == nsizes - 1 ? tf : NULL};
    sim_report rep;
    rt_diag_clear(d);
    if (sim_run(p, &spec, &o, &rep, d)) {
      fprintf(stderr, "%s at %lld bytes:\n%s", file, sizes[k], rt_diag_text(d));
      goto out;
    }
    char port[80] = "-";
    if (rep.nports) snprintf(port, sizeof port, "%s (%.0f%%)", rep.ports[0].name, 100 * rep.ports[0].util);
    printf("%14lld %12.2f %11.2f %7lld %6d %10.2f  %-18s %s\n", sizes[k], rep.time_us,
           rep.time_us > 0 ? (double)sizes[k] / (rep.time_us * 1e3) : 0, (long long)rep.tiles, rep.path_steps,
           rep.path_busy_us, main_bound(&rep), port);
    if (cf)
      fprintf(cf, "%lld,%.4f,%.4f,%lld,%d,%.4f,%s,%s,%.4f\n", sizes[k], rep.time_us,
              rep.time_us > 0 ? (double)sizes[k] / (rep.time_us * 1e3) : 0, (long long)rep.tiles, rep.path_steps,
              rep.path_busy_us, main_bound(&rep), rep.nports ? rep.ports[0].name : "", rep.nports ? rep.ports[0].util : 0);
    last = rep;
  }
  if (!quiet) {   /* the last size in more detail */
    printf("# at %lld bytes: the critical path ends at %s; of its %d steps,", sizes[nsizes - 1], last.path_end,
           last.path_steps);
    for (int b = 0, first = 1; b < SIM_BY_COUNT; b++)
      if (last.path_by[b]) { printf("%s %d waited for %s", first ? "" : ",", last.path_by[b], sim_bound_name[b]); first = 0; }
    printf("; they ran %.2f of its %.2f us\n# ports:", last.path_busy_us, last.time_us);
    for (int j = 0; j < last.nports; j++)
      printf("%s %s %.0f%%", j ? "," : "", last.ports[j].name, 100 * last.ports[j].util);
    printf("\n");
  }
  rc = 0;
out:
  if (tf) fclose(tf);
  if (cf) fclose(cf);
  ir_prog_free(p);
  rt_diag_free(d);
  return rc;
}
