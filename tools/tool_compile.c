/* tool_compile.c -- `baton compile`: Lua script -> verified XML IR. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "cc_compile.h"
#include "cc_lua.h"
#include "ir_write.h"
#include "sim_spec.h"
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
  "  --tune SPEC      compile every variant of protocol, instances and channels\n"
  "                   (those the script reads and no --param fixes), time each with\n"
  "                   `baton sim` on the system SPEC, and write the fastest for each\n"
  "                   run of sizes, with its size range, into the folder -o names\n"
  "                   (docs/SIMULATION.md)\n"
  "  -q, --quiet      no summary line\n"
  "  -v, --verbose    a Lua error in the script prints the Lua traceback after\n"
  "                   its one 'script:line: message' line\n";

int tool_compile(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) { fputs(compile_help, stdout); return 0; }
  const char *script = NULL, *outpath = NULL, *dotpath = NULL;
  const char *params[128];
  int nparams = 0, quiet = 0, explain = 0, sized = 0, verbose = 0;
  int64_t minb = 0, maxb = 0;
  int fuse = 1;
  enum { O_PARAM = 256, O_DOT, O_SIZES, O_NOFUSE, O_EXPLAIN, O_TUNE };
  const char *tune = NULL;
  static const struct option longs[] = {
    {"param", required_argument, NULL, O_PARAM}, {"dot", required_argument, NULL, O_DOT},
    {"sizes", required_argument, NULL, O_SIZES}, {"no-fuse", no_argument, NULL, O_NOFUSE},
    {"explain", no_argument, NULL, O_EXPLAIN}, {"tune", required_argument, NULL, O_TUNE},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'}, {NULL, 0, NULL, 0}};
  tool_getopt_reset();
  for (int c; (c = tool_getopt("compile", argc, argv, "o:qv", longs)) != -1;) {
    const char *v = optarg;
    if (c == O_PARAM) {
      if (nparams == 128) { fprintf(stderr, "baton compile: at most 128 --param\n"); return 2; }
      if (!strchr(v, '=') || *v == '=') { fprintf(stderr, "baton compile: --param wants KEY=VALUE, not '%s'\n", v); return 2; }
      size_t klen = (size_t)(strchr(v, '=') - v);
      for (int k = 0; k < nparams; k++)
        if (!strncmp(params[k], v, klen) && params[k][klen] == '=') {
          fprintf(stderr, "baton compile: --param %.*s is given twice (%s, then %s)\n", (int)klen, v, params[k], v);
          return 2;
        }
      params[nparams++] = v;
    } else if (c == 'o') {
      outpath = strcmp(v, "-") ? v : NULL;   /* -o -: standard output, as without -o */
    } else if (c == O_DOT) {
      dotpath = v;
    } else if (c == O_SIZES) {
      const char *colon = strchr(v, ':');
      char lo[64] = "";
      if (colon && (size_t)(colon - v) < sizeof lo) memcpy(lo, v, colon - v);
      if (!colon || (size_t)(colon - v) >= sizeof lo || (*lo && bench_parse_size(lo, &minb)) ||
          (colon[1] && bench_parse_size(colon + 1, &maxb)) || (maxb && minb > maxb)) {
        fprintf(stderr, "baton compile: --sizes wants MIN:MAX in bytes (K, M, G suffixes; MIN <= MAX), not '%s'\n", v);
        return 2;
      }
      sized = 1;
    } else if (c == O_NOFUSE) {
      fuse = 0;
    } else if (c == O_EXPLAIN) {
      explain = 1;
    } else if (c == O_TUNE) {
      tune = v;
    } else if (c == 'q') {
      quiet = 1;
    } else if (c == 'v') {
      verbose = 1;
    } else {
      return 2;
    }
  }
  if (optind < argc) script = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "baton compile: one script at a time ('%s' and '%s')\n", script, argv[optind + 1]);
    return 2;
  }
  if (!script) { fputs(compile_help, stderr); return 2; }
  if (tool_is_dir("compile", script, "a Lua script")) return 2;
  if (tune) {
    if (!outpath) { fprintf(stderr, "baton compile: --tune writes several programs: -o names their folder\n"); return 2; }
    if (sized || dotpath || explain || !fuse) {
      fprintf(stderr, "baton compile: --tune picks the size ranges itself, and takes no --sizes, --dot, --explain "
              "or --no-fuse\n");
      return 2;
    }
    sim_spec spec;
    if (!tool_system("compile", tune, &spec)) return 2;
    if (mkdir(outpath, 0777) && errno != EEXIST) {
      fprintf(stderr, "baton compile: cannot create %s: %s\n", outpath, strerror(errno));
      return 1;
    }
    return tool_compile_tune(script, params, nparams, &spec, outpath, quiet);
  }
  cc_lua_set_traceback(verbose);
  rt_diag *d = rt_diag_new(20);
  ir_prog *p = NULL;
  int rc = 1;
  cc_compile_opts co = {.fuse = fuse, .sized = sized, .minbytes = (uint64_t)minb, .maxbytes = (uint64_t)maxb,
                        .explain = explain ? stderr : NULL};
  cc_compile_report rep;
  if (cc_compile_file(script, params, nparams, &co, &p, &rep, d)) {
    if (*rep.what) fprintf(stderr, "%s:\n", rep.what);
    fprintf(stderr, "%s", rt_diag_text(d));
    goto out;
  }
  errno = 0;
  if (outpath ? ir_write_file(p, outpath) : ir_write(p, stdout)) {
    fprintf(stderr, "baton compile: cannot write %s%s%s\n", outpath ? outpath : "standard output", errno ? ": " : "",
            errno ? strerror(errno) : "");
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
            script, ir_coll_name[p->coll], p->ngpus, ir_prog_ntbs(p), ir_prog_nsteps(p), rep.checked,
            rep.trace_s * 1e3, rep.lower_s * 1e3, (rep.check_s + rep.races_s + rep.runs_s) * 1e3, rep.check_s * 1e3,
            rep.races_s * 1e3, rep.runs_s * 1e3, outpath ? outpath : "stdout");
out:
  ir_prog_free(p);
  rt_diag_free(d);
  return rc;
}
