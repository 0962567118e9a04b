/* tool_bench.c -- `baton bench`: NCCL against baton, nccl-tests style
 * (tools/bench/bench*.c; docs/PERFORMANCE.md, "Measuring: baton bench"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_embed.h"
#include "bench_fused.h"
#include "bench_moe.h"
#include "tool.h"

#ifndef BATON_HAVE_CUDA
#include <limits.h>
#include <unistd.h>

/* A run, from the baton command (built without the GPU runtime): execs
 * baton-bench beside this executable with the same arguments; returns
 * only when it cannot (2, said why). */
static int bench_exec(int argc, char **argv) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 16);
  char *slash = len > 0 ? (exe[len] = 0, strrchr(exe, '/')) : NULL;
  if (slash) {
    strcpy(slash + 1, "baton-bench");
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (args) {
      args[0] = exe;
      for (int i = 1; i < argc; i++) args[i] = argv[i];
      execv(exe, args);
      int e = errno;   /* execv returned: why, read once (fprintf and free may change errno) */
      free(args);
      if (e != ENOENT) {
        fprintf(stderr, "baton bench: cannot run %s: %s\n", exe, strerror(e));
        return 2;
      }
    }
  }
  fprintf(stderr, "baton bench: no baton-bench beside this baton: it is built with CUDA only (this build has no "
                  "nvcc); --dry-run and --help work anywhere\n");
  return 2;
}
#endif

/* One type's sweep for --dry-run: its title (the root of a rooted
 * collective, the ops it runs where -o all asks for several), then a line
 * per size. */
static void dry_run_type(const bench_opts *o, ip_dtype t, const int64_t *sizes, int n) {
  int es = ip_dtype_size[t];
  char root[32] = "";
  if (bench_rooted(o->coll)) snprintf(root, sizeof root, ", root %d", o->root);
  printf("# baton bench --dry-run: %s on %d ranks%s, %s, %s, %d sizes%s\n", bench_coll_name[o->coll], o->ngpus, root,
         ip_dtype_name[t], bench_place_name(o->inplace), n,
         o->all_ops && bench_reduces(o->coll) ? ", each with sum, prod, max, min, avg (-o all)" : "");
  printf("# %10s %12s %12s %12s %14s\n", "size", "count", "send elems", "recv elems", "busbw factor");
  for (int i = 0; i < n; i++) {
    bench_geom g;
    double algbw, busbw;
    bench_geometry(o->coll, sizes[i], es, o->ngpus, &g);
    bench_geom unit = g;
    unit.bytes = 1000000000;   /* the factor busbw / algbw, also for empty sizes */
    bench_bw(o->coll, &unit, o->ngpus, 1.0, &algbw, &busbw);
    printf("  %10lld %12lld %12lld %12lld %14.4f\n", (long long)g.bytes, (long long)g.count, (long long)g.send_elems,
           (long long)g.recv_elems, algbw > 0 ? busbw / algbw : 0.0);
  }
}

/* --dry-run: what would run, without touching a GPU: the sweep of each
 * type (-d all: every type in turn; the ops do not change it). */
static int dry_run(const bench_opts *o) {
  if (!o->ngpus) {
    fprintf(stderr, "baton bench: --dry-run needs -g N (the number of ranks)\n");
    return 2;
  }
  int64_t sizes[BENCH_MAX_SIZES];
  bench_combo c[BENCH_MAX_COMBOS];
  int n = bench_sizes(o, sizes, BENCH_MAX_SIZES), nc = bench_combos(o, c);
  for (int k = 0; k < nc; k++)
    if (k == 0 || c[k].dtype != c[k - 1].dtype) dry_run_type(o, c[k].dtype, sizes, n);
  return 0;
}

/* One fused operator's bench, for fused(): its options and table behind
 * void pointers (an options struct starts with its bench_common_opts).
 * parse as bench_*_parse (0, 1 after --help, 2 after a refusal); run
 * fills the table (0, 1 when a shape failed, 2 when nothing ran; NULL
 * without CUDA); footer, write_csv and write_json as bench_*_*; rows: the
 * table's row array, which fused() frees. */
typedef struct fused_mode {
  size_t opts_size, table_size;
  int (*parse)(void *o, int argc, char **argv, FILE *out, FILE *err);
  int (*run)(const void *o, void *t);
  int (*footer)(FILE *f, const void *t);
  int (*write_csv)(const char *path, const void *t);
  int (*write_json)(const char *path, const void *t);
  void *(*rows)(void *t);
} fused_mode;

/* Adapters from each mode's typed functions to fused_mode's. */
static int fz_parse(void *o, int c, char **v, FILE *out, FILE *err) { return bench_fused_parse(o, c, v, out, err); }
static int em_parse(void *o, int c, char **v, FILE *out, FILE *err) { return bench_embed_parse(o, c, v, out, err); }
static int moe_parse(void *o, int c, char **v, FILE *out, FILE *err) { return bench_moe_parse(o, c, v, out, err); }
static int fz_footer(FILE *f, const void *t) { return bench_fused_print_footer(f, t); }
static int fz_write_csv(const char *p, const void *t) { return bench_fused_write_csv(p, t); }
static int fz_write_json(const char *p, const void *t) { return bench_fused_write_json(p, t); }
static void *fz_rows(void *t) { return ((bench_fused_table *)t)->rows; }
static int em_footer(FILE *f, const void *t) { return bench_embed_print_footer(f, t); }
static int em_write_csv(const char *p, const void *t) { return bench_embed_write_csv(p, t); }
static int em_write_json(const char *p, const void *t) { return bench_embed_write_json(p, t); }
static void *em_rows(void *t) { return ((bench_embed_table *)t)->rows; }
static int moe_footer(FILE *f, const void *t) { return bench_moe_print_footer(f, t); }
static int moe_write_csv(const char *p, const void *t) { return bench_moe_write_csv(p, t); }
static int moe_write_json(const char *p, const void *t) { return bench_moe_write_json(p, t); }
static void *moe_rows(void *t) { return ((bench_moe_table *)t)->rows; }
/* The GPU drivers: only in CUDA builds (fused() never calls run without). */
#ifdef BATON_HAVE_CUDA
static int fz_run(const void *o, void *t) { return bench_fused_run(o, t); }
static int em_run(const void *o, void *t) { return bench_embed_run(o, t); }
static int moe_run(const void *o, void *t) { return bench_moe_run(o, t); }
#else
#define fz_run NULL
#define em_run NULL
#define moe_run NULL
#endif

/* --fused gemv_allreduce: the fused GEMV + AllReduce against cuBLAS's
 * GEMV and NCCL's AllReduce (tools/bench/bench_fused*.c). */
static const fused_mode mode_gemv = {sizeof(bench_fused_opts), sizeof(bench_fused_table), fz_parse, fz_run,
  fz_footer, fz_write_csv, fz_write_json, fz_rows};
/* --fused embedding_alltoall: the fused embedding bags + AllToAll against
 * pooling, NCCL AllToAll and shuffle in a row (tools/bench/bench_embed*.c). */
static const fused_mode mode_embed = {sizeof(bench_embed_opts), sizeof(bench_embed_table), em_parse, em_run,
  em_footer, em_write_csv, em_write_json, em_rows};
/* --fused gemm_alltoall: the fused expert GEMM + AllToAll against cuBLAS's
 * GEMM and NCCL's AllToAll in a row, and baton's own GEMM unfused
 * (tools/bench/bench_moe*.c). */
static const fused_mode mode_moe = {sizeof(bench_moe_opts), sizeof(bench_moe_table), moe_parse, moe_run,
  moe_footer, moe_write_csv, moe_write_json, moe_rows};

/* --fused OP: operator m against its library baseline: parse, run, the
 * footer, --csv and --json.  The exit status: 0, 1 (a shape failed, an
 * output not written), 2 (refused, nothing ran). */
static int fused(const fused_mode *m, int argc, char **argv) {
  void *o = calloc(1, m->opts_size);
  if (!o) return 2;
  int rc = m->parse(o, argc, argv, stdout, stderr);
  if (rc) {
    free(o);
    return rc == 1 ? 0 : rc;
  }
#ifdef BATON_HAVE_CUDA
  void *t = calloc(1, m->table_size);
  if (!t) {
    free(o);
    return 2;
  }
  rc = m->run(o, t);
  if (rc != 2) {
    rc |= m->footer(stdout, t);
    const char *csv = ((bench_common_opts *)o)->csv, *json = ((bench_common_opts *)o)->json;
    if (csv && m->write_csv(csv, t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", csv, strerror(errno));
      rc = 1;
    }
    if (json && m->write_json(json, t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", json, strerror(errno));
      rc = 1;
    }
  }
  free(m->rows(t));
  free(t);
  free(o);
  return rc;
#else
  free(o);
  return bench_exec(argc, argv);
#endif
}

int tool_bench(int argc, char **argv) {
  if (bench_fused_asked(argc, argv)) {
    switch (bench_fused_operator(argc, argv, stderr)) {
    case BENCH_FUSED_GEMV_ALLREDUCE: return fused(&mode_gemv, argc, argv);
    case BENCH_FUSED_EMBEDDING_ALLTOALL: return fused(&mode_embed, argc, argv);
    case BENCH_FUSED_GEMM_ALLTOALL: return fused(&mode_moe, argc, argv);
    default: return 2;
    }
  }
  bench_opts o;
  int rc = bench_parse(&o, argc, argv, stdout, stderr);
  if (rc) return rc == 1 ? 0 : rc;
  if (o.dry_run) return dry_run(&o);
#ifdef BATON_HAVE_CUDA
  bench_table t;
  memset(&t, 0, sizeof t);
  rc = o.procs ? bench_run_procs(&o, &t) : bench_run(&o, &t);   /* a process per GPU (-P), or one process */
  if (rc != 2) {
    rc |= bench_print_footer(stdout, &t);
    if (o.csv && bench_write_csv(o.csv, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.csv, strerror(errno));
      rc = 1;
    }
    if (o.json && bench_write_json(o.json, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.json, strerror(errno));
      rc = 1;
    }
  }
  bench_table_free(&t);
  return rc;
#else
  return bench_exec(argc, argv);
#endif
}
