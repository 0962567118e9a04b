/* tool_compile.c -- `baton compile`: Lua script -> verified XML IR. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cc_lower.h"
#include "cc_lua.h"
#include "cc_trace.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_write.h"
#include "rt_param.h"
#include "tool.h"

static const char compile_help[] =
  "usage: baton compile SCRIPT.lua [--param KEY=VALUE ...] [-o OUT.xml] [options]\n"
  "\n"
  "Runs the algorithm script in the sandboxed Lua DSL, traces its chunk\n"
  "operations, checks the collective's postcondition, lowers, fuses and\n"
  "schedules them into thread blocks, validates the IR (races and deadlock\n"
  "included), runs it on the CPU executor on real data, and only then writes it.\n"
  "\n"
  "options:\n"
  "  --param K=V      a script parameter (read with param(\"K\", default))\n"
  "  -o FILE          write the IR here (default, or -o -: standard output)\n"
  "  --no-fuse        keep plain s / r / rrc steps (no rcs, rrs, rrcs)\n"
  "  --explain        print the readable listing to standard error too\n"
  "  --dot FILE       also write the schedule as a Graphviz digraph (see\n"
  "                   'baton explain --dot'), after verification\n"
  "  --sizes MIN:MAX  the message sizes (bytes of the larger buffer, suffix K, M,\n"
  "                   G; either side may be empty) the runtime picks this program\n"
  "                   for, instead of the script's minbytes/maxbytes\n"
  "  -q, --quiet      no summary line\n"
  "  -v, --verbose    a Lua error in the script prints the Lua traceback after\n"
  "                   its one 'script:line: message' line\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run {
  const ir_prog *p;
  ip_cpu_opts o;
  ip_cpu_report rep;
  rt_diag *d;
  bt_result res;
  pthread_t th;
} run;

static void *run_main(void *arg) {
  run *r = arg;
  r->res = ip_cpu_verify(r->p, &r->o, &r->rep, r->d);
  return NULL;
}

/* Runs the compiled program through the CPU executor the way users call
 * it: three runs (f32 sum at an uneven count in 128-element tiles, i32 max
 * at 7 elements in 1-element tiles -- f16 for a fused program, whose
 * compute steps take float types --, bf16 sum out of place), side by
 * side; each is an independent executor.  The first failure's messages go
 * to d. */
static bt_result verify(const ir_prog *p, rt_diag *d, long *checked) {
  run runs[] = {
    {.o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 4099, .tile = 128, .inplace = -1}},
    {.o = {.dtype = IP_I32, .op = IP_OP_MAX, .count = 7, .tile = 1, .inplace = -1}},
    {.o = {.dtype = IP_BF16, .op = IP_OP_SUM, .count = 1000, .tile = 64, .inplace = 0}},
  };
  enum { N = sizeof runs / sizeof runs[0] };
  if (!ip_compute_takes(p, IP_I32)) runs[1].o.dtype = IP_F16;
  for (int i = 0; i < N; i++)   /* a program that takes one float type (gemm: bf16) runs in it */
    if (!ip_compute_takes(p, runs[i].o.dtype)) runs[i].o.dtype = IP_BF16;
  /* A gemm's output rows are W's columns: 3 of them (and 5 for F), and
   * counts of whole rows. */
  ip_dims dims = {0};
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int k = 0; k < p->gpus[r].tbs[b].nsteps; k++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[k];
        if (st->op != IR_OP_GEMM || ip_dims_get(&dims, p->operands[st->args[1]].dim[1]) > 0) continue;
        ip_dims_set(&dims, p->operands[st->args[1]].dim[1], 3);
        ip_dims_set(&dims, p->operands[st->args[0]].dim[1], 5);
        for (int i = 0; i < N; i++) {
          runs[i].o.count = (runs[i].o.count + 2) / 3 * 3;
          runs[i].o.dims = &dims;
        }
      }
  /* An interleaved output's rows are a product of dimensions: 3 each, and
   * counts of whole rows per chunk. */
  if (p->interleave) {
    int64_t seg = 1;
    for (const char *f = p->interleave; *f;) {
      size_t n = strcspn(f, "*");
      char name[IR_MAX_NAME];
      snprintf(name, sizeof name, "%.*s", (int)n, f);
      ip_dims_set(&dims, name, 3);
      seg *= 3;
      f += n + (f[n] == '*');
    }
    int ib, ob;
    ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
    int64_t row = seg * (p->nchunksperloop / (ib > ob ? ib : ob));   /* whole rows in every chunk */
    for (int i = 0; i < N; i++) {
      runs[i].o.count = (runs[i].o.count + row - 1) / row * row;
      runs[i].o.dims = &dims;
    }
  }
  int started[N] = {0};
  bt_result res = BT_OK;
  *checked = 0;
  for (int i = 0; i < N; i++) {
    runs[i].p = p;
    runs[i].d = rt_diag_new(20);
    if (!runs[i].d) { res = BT_ERR_NOMEM; continue; }
    started[i] = !pthread_create(&runs[i].th, NULL, run_main, &runs[i]);
    if (!started[i]) run_main(&runs[i]);   /* no thread: run it here */
  }
  for (int i = 0; i < N; i++) {
    if (started[i]) pthread_join(runs[i].th, NULL);
    if (!runs[i].d) continue;
    if (runs[i].res && !res) { res = runs[i].res; rt_diag_add(d, "%s", rt_diag_text(runs[i].d)); }
    *checked += runs[i].rep.checked;
    rt_diag_free(runs[i].d);
  }
  return res;
}

int tool_compile(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) { fputs(compile_help, stdout); return 0; }
  const char *script = NULL, *outpath = NULL, *dotpath = NULL;
  const char *params[128];
  int nparams = 0, quiet = 0, explain = 0, sized = 0, verbose = 0;
  int64_t minb = 0, maxb = 0;
  cc_lower_opts lo = {.fuse = 1};
  for (int i = 1; i < argc; i++) {
    const char *v;
    if ((v = tool_opt(argc, argv, &i, "--param"))) {
      if (!strchr(v, '=') || nparams == 128) { fprintf(stderr, "baton compile: --param wants KEY=VALUE, not '%s'\n", v); return 2; }
      params[nparams++] = v;
    } else if ((v = tool_opt(argc, argv, &i, "-o"))) {
      outpath = strcmp(v, "-") ? v : NULL;   /* -o -: standard output, as without -o */
    } else if ((v = tool_opt(argc, argv, &i, "--dot"))) {
      dotpath = v;
    } else if ((v = tool_opt(argc, argv, &i, "--sizes"))) {
      const char *colon = strchr(v, ':');
      char lo[64] = "";
      if (colon && (size_t)(colon - v) < sizeof lo) memcpy(lo, v, colon - v);
      if (!colon || (size_t)(colon - v) >= sizeof lo || (*lo && bench_parse_size(lo, &minb)) ||
          (colon[1] && bench_parse_size(colon + 1, &maxb)) || (maxb && minb > maxb)) {
        fprintf(stderr, "baton compile: --sizes wants MIN:MAX in bytes (K, M, G suffixes; MIN <= MAX), not '%s'\n", v);
        return 2;
      }
      sized = 1;
    } else if (!strcmp(argv[i], "--no-fuse")) {
      lo.fuse = 0;
    } else if (!strcmp(argv[i], "--explain")) {
      explain = 1;
    } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
      quiet = 1;
    } else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
      verbose = 1;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "baton compile: unknown option '%s'\n", argv[i]);
      return 2;
    } else if (script) {
      fprintf(stderr, "baton compile: one script at a time ('%s' and '%s')\n", script, argv[i]);
      return 2;
    } else {
      script = argv[i];
    }
  }
  if (!script) { fputs(compile_help, stderr); return 2; }
  if (tool_is_dir("compile", script, "a Lua script")) return 2;
  cc_lua_set_traceback(verbose);
  double t0 = now();
  rt_diag *d = rt_diag_new(20);
  cc_trace *t = NULL;
  ir_prog *p = NULL;
  int rc = 1;
  long checked = 0;
  if (cc_trace_file(script, params, nparams, &t, d)) { fprintf(stderr, "%s", rt_diag_text(d)); goto out; }
  double t1 = now();
  if (cc_lower(t, &lo, &p, d)) { fprintf(stderr, "%s", rt_diag_text(d)); goto out; }
  if (sized) {
    p->minbytes = (uint64_t)minb;
    p->maxbytes = (uint64_t)maxb;
  }
  double t2 = now();
  if (explain) ir_explain(p, stderr);
  int bad = ir_check(p, d) != BT_OK;
  double t2a = now();
  bad = bad || ir_check_races(p, ir_prog_aliased(p, p->inplace), d);
  double t2b = now();
  if (bad) {
    fprintf(stderr, "%s: the compiled program fails validation (deadlock freedom with %d FIFO slots included); nothing written:\n%s",
            script, (int)rt_param_int(RT_PARAM_EXEC_SLOTS), rt_diag_text(d));
    goto out;
  }
  bt_result vr = verify(p, d, &checked);
  if (vr) {
    fprintf(stderr, "%s: the compiled program fails on the CPU executor; nothing written:\n%s", script, rt_diag_text(d));
    goto out;
  }
  double t3 = now();
  if (outpath ? ir_write_file(p, outpath) : ir_write(p, stdout)) {
    fprintf(stderr, "baton compile: cannot write %s\n", outpath ? outpath : "standard output");
    goto out;
  }
  if (dotpath) {
    FILE *df = fopen(dotpath, "w");
    bt_result dr = df ? ir_write_dot(p, df) : BT_ERR_SYSTEM;
    if (df && fclose(df)) dr = BT_ERR_SYSTEM;
    if (dr) { fprintf(stderr, "baton compile: cannot write %s\n", dotpath); goto out; }
  }
  rc = 0;
  if (!quiet)
    fprintf(stderr, "%s: %s on %d ranks, %ld thread blocks, %ld steps; verified on the CPU (%ld elements); "
            "trace %.1f ms, lower %.1f ms, verify %.1f ms (check %.1f, races %.1f, 3 runs %.1f) -> %s\n",
            script, ir_coll_name[p->coll], p->ngpus, ir_prog_ntbs(p), ir_prog_nsteps(p), checked,
            (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t2a - t2) * 1e3, (t2b - t2a) * 1e3,
            (t3 - t2b) * 1e3, outpath ? outpath : "stdout");
out:
  ir_prog_free(p);
  cc_trace_free(t);
  rt_diag_free(d);
  return rc;
}
