/* tool_bench.c -- `baton bench`: NCCL against baton, nccl-tests style
 * (tools/bench*.c; docs/PERFORMANCE.md, "Measuring: baton bench"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_embed.h"
#include "bench_fused.h"
#include "bench_moe.h"
#include "tool.h"

/* --dry-run: what would run, without touching a GPU. */
static int dry_run(const bench_opts *o) {
  if (!o->ngpus) {
    fprintf(stderr, "baton bench: --dry-run needs -g N (the number of ranks)\n");
    return 2;
  }
  int64_t sizes[BENCH_MAX_SIZES];
  int n = bench_sizes(o, sizes, BENCH_MAX_SIZES), es = ip_dtype_size[o->dtype];
  printf("# baton bench --dry-run: %s on %d ranks, %s, %s, %d sizes\n", bench_coll_name[o->coll], o->ngpus,
         ip_dtype_name[o->dtype], o->inplace ? "in place" : "out of place", n);
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
  return 0;
}

/* --fused OP: a fused operator against its library baseline. */
static int fused(int argc, char **argv) {
  bench_fused_opts o;
  int rc = bench_fused_parse(&o, argc, argv, stdout, stderr);
  if (rc) return rc == 1 ? 0 : rc;
#ifdef BATON_HAVE_CUDA
  bench_fused_table t;
  rc = bench_fused_run(&o, &t);
  if (rc != 2) {
    rc |= bench_fused_print_footer(stdout, &t);
    if (o.csv && bench_fused_write_csv(o.csv, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.csv, strerror(errno));
      rc = 1;
    }
    if (o.json && bench_fused_write_json(o.json, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.json, strerror(errno));
      rc = 1;
    }
  }
  free(t.rows);
  return rc;
#else
  fprintf(stderr, "baton bench: baton bench needs a CUDA build (this baton was built without nvcc)\n");
  return 2;
#endif
}

/* --fused embedding_alltoall: the fused embedding bags + AllToAll against
 * pooling, NCCL AllToAll and shuffle in a row (tools/bench_embed*.c). */
static int fused_embed(int argc, char **argv) {
  bench_embed_opts o;
  int rc = bench_embed_parse(&o, argc, argv, stdout, stderr);
  if (rc) return rc == 1 ? 0 : rc;
#ifdef BATON_HAVE_CUDA
  bench_embed_table t;
  rc = bench_embed_run(&o, &t);
  if (rc != 2) {
    rc |= bench_embed_print_footer(stdout, &t);
    if (o.csv && bench_embed_write_csv(o.csv, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.csv, strerror(errno));
      rc = 1;
    }
    if (o.json && bench_embed_write_json(o.json, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.json, strerror(errno));
      rc = 1;
    }
  }
  free(t.rows);
  return rc;
#else
  fprintf(stderr, "baton bench: baton bench needs a CUDA build (this baton was built without nvcc)\n");
  return 2;
#endif
}

/* --fused gemm_alltoall: the fused expert GEMM + AllToAll against cuBLAS's
 * GEMM and NCCL's AllToAll in a row, and baton's own GEMM unfused
 * (tools/bench_moe*.c). */
static int fused_moe(int argc, char **argv) {
  bench_moe_opts o;
  int rc = bench_moe_parse(&o, argc, argv, stdout, stderr);
  if (rc) return rc == 1 ? 0 : rc;
#ifdef BATON_HAVE_CUDA
  bench_moe_table t;
  rc = bench_moe_run(&o, &t);
  if (rc != 2) {
    rc |= bench_moe_print_footer(stdout, &t);
    if (o.csv && bench_moe_write_csv(o.csv, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.csv, strerror(errno));
      rc = 1;
    }
    if (o.json && bench_moe_write_json(o.json, &t)) {
      fprintf(stderr, "baton bench: cannot write %s: %s\n", o.json, strerror(errno));
      rc = 1;
    }
  }
  free(t.rows);
  return rc;
#else
  fprintf(stderr, "baton bench: baton bench needs a CUDA build (this baton was built without nvcc)\n");
  return 2;
#endif
}

int tool_bench(int argc, char **argv) {
  if (bench_fused_asked(argc, argv)) {
    switch (bench_fused_operator(argc, argv, stderr)) {
    case BENCH_FUSED_GEMV_ALLREDUCE: return fused(argc, argv);
    case BENCH_FUSED_EMBEDDING_ALLTOALL: return fused_embed(argc, argv);
    case BENCH_FUSED_GEMM_ALLTOALL: return fused_moe(argc, argv);
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
  rc = bench_run(&o, &t);
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
  fprintf(stderr, "baton bench: baton bench needs a CUDA build (this baton was built without nvcc); "
                  "--dry-run works anywhere\n");
  return 2;
#endif
}
