/* test_bench.c -- `baton bench` without a GPU: options, the size sweep,
 * nccl-tests' geometry and bandwidth formulas, the check data against a
 * naive reference, the text/CSV/JSON output of a fixed table (one
 * placement, both, several type/op combinations) and the SVG that
 * tools/measure/plot_bench.py draws from it.
 * Usage: test_bench PLOT_BENCH_PY   (TAP output) */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_fused.h"
#include "bench_test.h"
#include "tap.h"

/* bench_parse of "bench LINE": its return; err gets stderr. */
static int parse(bench_opts *o, const char *line, char *err, size_t errlen) {
  char *argv[64];
  int argc = bench_test_split(line, argv);
  bench_test_io io;
  bench_test_open(&io, err, errlen, NULL, 0);
  int rc = bench_parse(o, argc, argv, io.out, io.err);
  bench_test_close(&io, 0);
  return rc;
}

static void test_options(void) {
  bench_opts o;
  char err[400] = "";
  ok(parse(&o, "", err, sizeof err) == 0 && o.minbytes == 32 << 20 && o.maxbytes == 32 << 20 && o.iters == 20 &&
         o.check == 1 && o.dtype == IP_F32 && o.op == IP_OP_SUM && o.coll == BENCH_ALLREDUCE && !o.inplace,
     "defaults: -b 32M -e 32M, 20 iterations, check on, f32 sum allreduce out of place");
  ok(parse(&o, "-b 8 -e 128M -f 2 -g 8 -w 3 -n 7 -G 2 -c 0 -o max -d bf16 --collective alltoall --inplace 1 --rounds 5 --csv a.csv --json "
               "b.json -P", err, sizeof err) == 0 &&
         o.minbytes == 8 && o.maxbytes == 128 << 20 && o.stepfactor == 2 && o.ngpus == 8 && o.warmup == 3 &&
         o.iters == 7 && o.graph == 2 && o.check == 0 && o.op == IP_OP_MAX && o.dtype == IP_BF16 &&
         o.coll == BENCH_ALLTOALL && o.inplace == 1 && o.rounds == 5 && !strcmp(o.csv, "a.csv") &&
         !strcmp(o.json, "b.json") && o.procs,
     "every option parsed");
  ok(parse(&o, "-g 4 --share 1", err, sizeof err) == 0 && o.ngpus == 4 && o.share == 1,
     "--share 1: 4 ranks on one GPU");
  ok(parse(&o, "-b8 -e1K --stepfactor=4 --datatype float --op avg", err, sizeof err) == 0 && o.minbytes == 8 &&
         o.maxbytes == 1024 && o.stepfactor == 4 && o.dtype == IP_F32 && o.op == IP_OP_AVG,
     "getopt forms (-b8, --stepfactor=4) and nccl-tests' type names (float)");
  static const struct { const char *args, *msg; } bad[] = {
    {"-x", "unknown option '-x'"},
    {"-b lots", "bad value 'lots' for -b"},
    {"-b 1K -e 8", "-b 1024 is larger than -e 8"},
    {"-b 0 -e 8 -f 2", "never grows"},
    {"-e", "-e needs a value"},
    {"-c -1", "bad value '-1' for -c"},
    {"-c many", "bad value 'many' for -c"},
    {"--inplace 3", "bad value '3' for --inplace"},
    {"--inplace all", "bad value 'all' for --inplace"},
    {"--inplace both -P -g 2", "--inplace both needs one process (not -P)"},
    {"-d f8", "bad value 'f8' for -d"},
    {"--collective gatherv", "bad value 'gatherv' for --collective"},
    /* nccl-tests' letters keep nccl-tests' meaning (they were baton's
     * collective, rounds and in-place once): what baton cannot do is
     * refused, saying where baton's own options went */
    {"-C allgather", "-C is nccl-tests' report_cputime, 0 or 1; the collective is --collective"},
    {"-C 1", "-C 1 is nccl-tests' CPU-time report, which baton bench does not do"},
    {"-I 1", "-I 1 is nccl-tests' per-iteration timing, which baton bench does not do"},
    {"-I both", "-I is nccl-tests' per_iter_timing; in place is --inplace"},
    {"-R 3", "-R is nccl-tests' local_register, 0-2; rounds are --rounds"},
    {"--collective scatter -r 4 -g 4", "-r 4 is not a rank: the root is one of 0..3 (4 ranks)"},
    {"-b 1 -e 1G -i 1", "more than 1024 sizes"},
    {"-f 2 -i 4", "not both"},
    {"--rounds 65", "bad value '65' for --rounds"},
    {"--share 2", "--share 2 needs -g N"},
    {"-g 2 --share 4", "--share 4 needs -g N with N >= 4"},
    {"-g 4 --share 2 -P", "one process (not -P)"},
    {"--collective reduce -r 4 -g 4", "-r 4 is not a rank: the root is one of 0..3 (4 ranks)"},
    {"--collective broadcast -P -g 2 --root=2", "-r 2 is not a rank: the root is one of 0..1 (2 ranks)"},
    {"--collective broadcast -g 8 --share 2 -r 8", "-r 8 is not a rank"},
    {"--collective broadcast -r -1", "bad value '-1' for -r"},
    {"--collective reduce -r root", "bad value 'root' for -r"},
    {"--collective reduce -r", "-r needs a value"},
  };
  ok(parse(&o, "-P -R 1", err, sizeof err) == 0 && o.reg && parse(&o, "-P -R 2", err, sizeof err) == 0 && o.reg &&
         parse(&o, "-P -R 0", err, sizeof err) == 0 && !o.reg && parse(&o, "-P --register", err, sizeof err) == 0 &&
         o.reg && parse(&o, "-C 0 -I 0", err, sizeof err) == 0,
     "-R 1 and -R 2 register (as --register), -R 0 does not; -C 0 and -I 0 are taken");
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int rc = parse(&o, bad[i].args, err, sizeof err);
    err[strcspn(err, "\n")] = 0;
    ok(rc == 2 && strstr(err, bad[i].msg), "'%s' is refused: %s", bad[i].args, err);
  }
  ok(parse(&o, "--collective broadcast -r 3 -g 4", err, sizeof err) == 0 && o.coll == BENCH_BROADCAST && o.root == 3 && !err[0] &&
         parse(&o, "--collective=reduce --root=1 -g 2 -P", err, sizeof err) == 0 && o.coll == BENCH_REDUCE &&
         o.root == 1 && parse(&o, "--collective reduce -r2", err, sizeof err) == 0 && o.root == 2 &&
         parse(&o, "--collective broadcast", err, sizeof err) == 0 && o.root == 0,
     "--collective broadcast / reduce, -r N, --root=N, -r2; the root defaults to 0");
  ok(parse(&o, "--collective gather -r 3 -g 4", err, sizeof err) == 0 && o.coll == BENCH_GATHER && o.root == 3 && !err[0] &&
         parse(&o, "--collective=scatter --root=1 -g 2 -P", err, sizeof err) == 0 && o.coll == BENCH_SCATTER &&
         o.root == 1 && !err[0],
     "--collective gather, --collective scatter: rooted, -r N without a note");
  parse(&o, "--collective reduce -r 5", err, sizeof err);
  bench_test_io rio;
  bench_test_open(&rio, err, sizeof err, NULL, 0);
  int r5 = bench_root_check(&o, 5, rio.err), r6 = bench_root_check(&o, 6, rio.err);
  bench_test_close(&rio, 1);
  ok(r5 == 2 && r6 == 0 && strstr(err, "baton bench: -r 5 is not a rank: the root is one of 0..4 (5 ranks)"),
     "without -g the root is checked against the ranks the run finds: 5 ranks refuse -r 5, 6 take it: %s", err);
  ok(parse(&o, "--collective allgather -r 9 -g 4", err, sizeof err) == 0 && strstr(err, "note: allgather has no root: -r is ignored") &&
         parse(&o, "-g 4", err, sizeof err) == 0 && !err[0],
     "-r on a collective without a root: ignored, with a note (none without -r)");
  bench_opts_default(&o);
  o.root = 7;
  ok(bench_root_check(&o, 4, stderr) == 0, "allreduce with root 7 on 4 ranks: no root to check");
  ok(parse(&o, "--inplace both", err, sizeof err) == 0 && o.inplace == BENCH_BOTH_PLACES &&
         parse(&o, "--inplace 2", err, sizeof err) == 0 && o.inplace == BENCH_BOTH_PLACES &&
         parse(&o, "--inplace=both -g 2", err, sizeof err) == 0 && o.inplace == BENCH_BOTH_PLACES &&
         parse(&o, "--inplace 1", err, sizeof err) == 0 && o.inplace == BENCH_IN_PLACE &&
         parse(&o, "--inplace=0", err, sizeof err) == 0 && o.inplace == BENCH_OUT_OF_PLACE,
     "--inplace both, --inplace 2, --inplace=both: both placements; --inplace 1 in place, --inplace=0 out of place");
  ok(parse(&o, "-c 5", err, sizeof err) == 0 && o.check == 5 && parse(&o, "--check=0", err, sizeof err) == 0 &&
         o.check == 0 && parse(&o, "-c1", err, sizeof err) == 0 && o.check == 1,
     "-c N: nccl-tests' check count (5, 0: none, 1)");
  char help[8192];
  bench_test_io io;
  char *hargv[] = {"bench", "--help", NULL};
  bench_test_open(&io, err, sizeof err, help, sizeof help);
  int hrc = bench_parse(&o, 2, hargv, io.out, io.err);
  bench_test_close(&io, 0);
  ok(hrc == 1 && strstr(help, "-c, --check N") && strstr(help, "2 or both: every size out of place, then in"),
     "--help names -c N and --inplace both");
  ok(strstr(help, "allreduce (default), allgather, reducescatter, alltoall,\n"
                   "                        broadcast, reduce, gather, scatter\n") &&
         strstr(help, "-r, --root N          the root rank of broadcast, reduce, gather and scatter,\n"),
     "--help names broadcast, reduce, gather, scatter and -r");
  ok(strstr(help, "sum (default), prod, max, min, avg; all: each of them") &&
         strstr(help, "(or nccl-tests' float, half, bfloat16, int32, ...); all:") &&
         strstr(help, "type outer, op inner"), "--help names -d all and -o all and their order");
  int64_t b = 0;
  ok(!bench_parse_size("1.5K", &b) && b == 1536 && !bench_parse_size("128m", &b) && b == 128 << 20 &&
         !bench_parse_size("1G", &b) && b == 1 << 30 && bench_parse_size("-1", &b) && bench_parse_size("8Q", &b),
     "sizes: 1.5K, 128m, 1G; -1 and 8Q refused");
  /* One parser for every size-like value: -b/-e/-i (fractions, K/M/G, a
   * trailing B) and the fused modes' lists (integers, the suffixes each
   * option takes). */
  int64_t l[4];
  int nl = 0;
  const char *end = NULL;
  ok(!bench_parse_size("4kB", &b) && b == 4096 && !bench_parse_size("0", &b) && b == 0 &&
         bench_parse_size("1K5", &b) && bench_parse_size("nan", &b) && bench_parse_size("", &b),
     "sizes: 4kB; 0; 1K5, nan and nothing refused");
  ok(!bench_parse_scaled("2G,", "KM", 0, &b, &end) && b == 2 && !strcmp(end, "G,") &&
         !bench_parse_scaled("1.5K", "KMG", 1, &b, &end) && b == 1536 && !*end &&
         !bench_parse_scaled("3m", "KMG", 0, &b, &end) && b == 3 << 20 &&
         bench_parse_scaled("-4", "KMG", 1, &b, &end) && bench_parse_scaled("8G", "G", 0, &b, &end) == 0 &&
         bench_parse_scaled("16777216G", "G", 0, &b, &end) == 0 && bench_parse_scaled("99999999999G", "G", 0, &b, &end),
     "bench_parse_scaled: the suffixes asked for only, fractions only when asked, negative and over 2^62 refused");
  ok(!bench_parse_list("4K,1m,3", "KMG", 4, l, &nl) && nl == 3 && l[0] == 4096 && l[1] == 1 << 20 && l[2] == 3 &&
         bench_parse_list("1.5K", "KMG", 4, l, &nl) && bench_parse_list("1G", "KM", 4, l, &nl) &&
         bench_parse_list("4G", "KMG", 4, l, &nl) && bench_parse_list("0", "KMG", 4, l, &nl),
     "shape lists through the same parser: 4K,1m,3; 1.5K, G where not taken, over 2^31 and 0 refused");
}

/* -d all, -o all: the combinations each option list gives, in
 * nccl-tests' order, and what is refused. */
static void test_combos(void) {
  bench_opts o;
  bench_combo c[BENCH_MAX_COMBOS];
  char err[400];
  ok(parse(&o, "-d all", err, sizeof err) == 0 && o.all_types && !o.all_ops && o.dtype == IP_F32 && !err[0] &&
         bench_combos(&o, c) == IP_DTYPE_COUNT && c[0].dtype == IP_F32 && c[3].dtype == IP_BF16 &&
         c[IP_DTYPE_COUNT - 1].dtype == IP_U8 && c[5].op == IP_OP_SUM,
     "-d all: every type in the help's order (f32 .. u8), each with -o's op");
  ok(parse(&o, "-o all -d i8", err, sizeof err) == 0 && o.all_ops && !o.all_types && bench_combos(&o, c) == 5 &&
         c[0].op == IP_OP_SUM && c[1].op == IP_OP_PROD && c[4].op == IP_OP_AVG && c[4].dtype == IP_I8,
     "-o all: sum, prod, max, min, avg of one type");
  int n = parse(&o, "-d all -o all", err, sizeof err) == 0 ? bench_combos(&o, c) : -1, order = n == 50;
  for (int k = 0; order && k < n; k++) order = c[k].dtype == (ip_dtype)(k / 5) && c[k].op == (ip_redop)(k % 5);
  ok(order, "-d all -o all: 50 pairs, type outer, op inner (nccl-tests' order): %d", n);
  ok(parse(&o, "--datatype=all --op=all -d half", err, sizeof err) == 0 && !o.all_types && o.all_ops &&
         o.dtype == IP_F16 && bench_combos(&o, c) == 5 && parse(&o, "-o all -o max", err, sizeof err) == 0 &&
         !o.all_ops && o.op == IP_OP_MAX && bench_combos(&o, c) == 1,
     "the last -d / -o wins: --datatype=all -d half is f16 alone, -o all -o max is max alone");
  ok(parse(&o, "--collective allgather -o all -d all", err, sizeof err) == 0 && bench_combos(&o, c) == IP_DTYPE_COUNT &&
         strstr(err, "note: allgather takes no reduction op: -o all runs it once (redop none)"),
     "allgather -o all: runs each type once, and says so");
  ok(parse(&o, "--collective reducescatter -o all", err, sizeof err) == 0 && !err[0] && bench_combos(&o, c) == 5,
     "reducescatter -o all: every op, no note");
  ok(parse(&o, "--collective reduce -o all -r 1", err, sizeof err) == 0 && !err[0] && bench_combos(&o, c) == 5 &&
         c[4].op == IP_OP_AVG, "reduce -o all: every op, no note");
  ok(parse(&o, "--collective broadcast -o all", err, sizeof err) == 0 && bench_combos(&o, c) == 1 &&
         strstr(err, "note: broadcast takes no reduction op: -o all runs it once (redop none)"),
     "broadcast -o all: runs once, and says so");
  ok(parse(&o, "-P -g 2 -d all -o all", err, sizeof err) == 0 && o.procs &&
         parse(&o, "-g 4 --share 1 -d all -o all --inplace both -G 2 --no-nccl", err, sizeof err) == 0 && o.share == 1 &&
         o.inplace == BENCH_BOTH_PLACES && o.graph == 2 && o.no_nccl,
     "-d all -o all with -P, and with --share, --inplace both, -G, --no-nccl");
  ok(!parse(&o, "-g 2 -G 5", err, sizeof err) && !o.between && !parse(&o, "-g 2 -G 5 --between", err, sizeof err) &&
     o.between && o.graph == 5, "--between: a kernel between two calls, off unless asked for");
  ok(parse(&o, "-g 2 --nccl-mem", err, sizeof err) == 0 && o.nccl_mem &&
         parse(&o, "-g 2 --nccl-mem --no-nccl", err, sizeof err) == 2 &&
         strstr(err, "--nccl-mem allocates with NCCL: not with --no-nccl or --share"),
     "--nccl-mem: NCCL's ncclMemAlloc for the buffers; refused without NCCL");
  static const struct { const char *args, *msg; } bad[] = {
    {"-d every", "bad value 'every' for -d"},
    {"-o All", "bad value 'All' for -o"},
    {"-d all,f16", "bad value 'all,f16' for -d"},
    {"-o", "-o needs a value"},
    {"-d all -o all --inplace both -P -g 2", "--inplace both needs one process (not -P)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = parse(&o, bad[i].args, err, sizeof err);
    err[strcspn(err, "\n")] = 0;
    ok(rc == 2 && strstr(err, bad[i].msg), "'%s' is refused: %s", bad[i].args, err);
  }
  /* Opts of one combination; the table's room: sizes x placements x pairs. */
  parse(&o, "-b 1K -e 32K -f 32 -d all -o all --inplace both", err, sizeof err);
  bench_combos(&o, c);
  bench_opts one = bench_opts_combo(&o, &c[7]);
  bench_table t;
  bench_table_init(&t, &o, 4);
  ok(one.dtype == IP_F64 && one.op == IP_OP_MAX && one.all_types && t.maxrows == 2 * 2 * 50 && t.all_types &&
         t.all_ops, "bench_opts_combo: f64 max; a table of 2 sizes x 2 placements x 50 pairs has room for 200 rows");
  bench_table_free(&t);
  parse(&o, "--collective alltoall -d all -o all", err, sizeof err);
  bench_table_init(&t, &o, 4);
  ok(t.maxrows == 10 && t.all_types && !t.all_ops, "alltoall -d all -o all: a row per type");
  bench_table_free(&t);
}

static void test_sweep(void) {
  bench_opts o;
  char err[400];
  int64_t s[BENCH_MAX_SIZES];
  parse(&o, "-b 8 -e 128M -f 2", err, sizeof err);
  int n = bench_sizes(&o, s, BENCH_MAX_SIZES), doubling = 1;
  for (int i = 1; i < n; i++) doubling &= s[i] == 2 * s[i - 1];
  ok(n == 25 && s[0] == 8 && s[24] == 128 << 20 && doubling, "-b 8 -e 128M -f 2: 25 sizes, 8 to 134217728, doubling");
  parse(&o, "-b 1M -e 4M -i 1M", err, sizeof err);
  n = bench_sizes(&o, s, BENCH_MAX_SIZES);
  ok(n == 4 && s[3] == 4 << 20, "-b 1M -e 4M -i 1M: 4 sizes");
  parse(&o, "-b 100 -e 1000 -f 3", err, sizeof err);
  n = bench_sizes(&o, s, BENCH_MAX_SIZES);
  ok(n == 3 && s[2] == 900, "-b 100 -e 1000 -f 3: 100, 300, 900");
  parse(&o, "", err, sizeof err);
  ok(bench_sizes(&o, s, BENCH_MAX_SIZES) == 1 && s[0] == 32 << 20, "defaults: one size, 32M");
}

static void test_geometry(void) {
  bench_geom g;
  bench_geometry(BENCH_ALLREDUCE, 1024, 4, 8, &g);
  ok(g.count == 256 && g.send_elems == 256 && g.recv_elems == 256 && g.bytes == 1024, "allreduce 1024 B f32: count 256");
  bench_geometry(BENCH_ALLGATHER, 1024, 4, 8, &g);
  ok(g.count == 32 && g.send_elems == 32 && g.recv_elems == 256 && g.send_inplace == 32 && g.bytes == 1024 &&
         g.blocks == 8, "allgather 1024 B f32 on 8: 32 per rank, 256 received, in place at rank*32");
  bench_geometry(BENCH_ALLGATHER, 100, 4, 8, &g);
  ok(g.count == 0 && g.bytes == 0, "allgather 100 B f32 on 8: 3 per rank rounds down to 0 (16-byte multiples)");
  bench_geometry(BENCH_REDUCESCATTER, 4096, 2, 4, &g);
  ok(g.count == 512 && g.send_elems == 2048 && g.recv_elems == 512 && g.recv_inplace == 512 && g.bytes == 4096,
     "reducescatter 4096 B f16 on 4: 512 received, 2048 sent");
  bench_geometry(BENCH_ALLTOALL, 1000, 2, 4, &g);
  ok(g.count == 120 && g.send_elems == 480 && g.recv_elems == 480 && g.bytes == 960,
     "alltoall 1000 B f16 on 4: 125 per peer rounds down to 120, size column 960");
  bench_geometry(BENCH_GATHER, 1000, 4, 8, &g);
  ok(g.count == 28 && g.send_elems == 28 && g.recv_elems == 224 && g.send_inplace == 28 && !g.recv_inplace &&
         g.blocks == 8 && g.bytes == 896,
     "gather 1000 B f32 on 8: 31 per rank rounds down to 28, the root's 224 a block per rank, in place at rank*28, "
     "size column 896");
  bench_geometry(BENCH_SCATTER, 4096, 2, 4, &g);
  ok(g.count == 512 && g.send_elems == 2048 && g.recv_elems == 512 && !g.send_inplace && g.recv_inplace == 512 &&
         g.blocks == 1 && g.bytes == 4096,
     "scatter 4096 B f16 on 4: 512 received, the root's 2048 sent, in place at rank*512, size column 4096");
  for (int c = BENCH_BROADCAST; c <= BENCH_REDUCE; c++) {
    bench_geometry((bench_coll)c, 1001, 4, 8, &g);
    ok(g.count == 250 && g.send_elems == 250 && g.recv_elems == 250 && !g.send_inplace && !g.recv_inplace &&
           g.blocks == 1 && g.bytes == 1000,
       "%s 1001 B f32 on 8: count 250 in both buffers (no 16-byte rounding), in place at one address, size 1000",
       bench_coll_name[c]);
  }
  double a, b;
  bench_geometry(BENCH_ALLREDUCE, 1000000000, 4, 8, &g);
  bench_bw(BENCH_ALLREDUCE, &g, 8, 0.5, &a, &b);
  ok(fabs(a - 2.0) < 1e-12 && fabs(b - 3.5) < 1e-12, "allreduce busbw = algbw * 2(n-1)/n (8 ranks: 2 -> 3.5 GB/s)");
  static const bench_coll shared[] = {BENCH_ALLGATHER, BENCH_REDUCESCATTER, BENCH_ALLTOALL, BENCH_GATHER,
                                      BENCH_SCATTER};
  for (size_t k = 0; k < sizeof shared / sizeof shared[0]; k++) {
    bench_geometry(shared[k], 1 << 20, 4, 4, &g);
    bench_bw(shared[k], &g, 4, 1e-3, &a, &b);
    ok(fabs(a - 1.048576) < 1e-9 && fabs(b - a * 0.75) < 1e-12, "%s busbw = algbw * (n-1)/n (4 ranks)",
       bench_coll_name[shared[k]]);
  }
  for (int c = BENCH_BROADCAST; c <= BENCH_REDUCE; c++) {
    double a8, b8;
    bench_geometry((bench_coll)c, 1 << 20, 4, 4, &g);
    bench_bw((bench_coll)c, &g, 4, 1e-3, &a, &b);
    bench_geometry((bench_coll)c, 1 << 20, 4, 8, &g);
    bench_bw((bench_coll)c, &g, 8, 1e-3, &a8, &b8);
    ok(fabs(a - 1.048576) < 1e-9 && b == a && a8 == a && b8 == a,
       "%s busbw = algbw (nccl-tests' factor 1; 4 and 8 ranks)", bench_coll_name[c]);
  }
}

/* The naive reference: every rank's full input, the collective's
 * definition element by element (a reduce's and a gather's on its root). */
static void naive(bench_coll c, ip_redop op, ip_dtype t, int n, int rank, int root, const bench_geom *g, void *out) {
  int es = ip_dtype_size[t];
  char **in = calloc((size_t)n, sizeof *in);
  for (int q = 0; q < n; q++) {
    in[q] = malloc((size_t)(g->send_elems * es + 1));
    bench_fill(c, op, t, q, g->send_elems, in[q]);
  }
  int64_t cnt = g->count;
  if (c == BENCH_BROADCAST || c == BENCH_SCATTER) {
    int64_t off = c == BENCH_SCATTER ? rank * cnt : 0;
    memcpy(out, in[root] + off * es, (size_t)(cnt * es));
  } else if (c == BENCH_ALLREDUCE || c == BENCH_REDUCESCATTER || c == BENCH_REDUCE) {
    int64_t off = c == BENCH_REDUCESCATTER ? rank * cnt : 0;
    memcpy(out, in[0] + off * es, (size_t)(cnt * es));
    for (int q = 1; q < n; q++) ip_reduce(t, op, out, out, in[q] + off * es, (size_t)cnt);
    if (op == IP_OP_AVG) ip_divide(t, out, (size_t)cnt, n);
  } else {
    int64_t off = c == BENCH_ALLTOALL ? rank * cnt : 0;
    for (int q = 0; q < n; q++) memcpy((char *)out + q * cnt * es, in[q] + off * es, (size_t)(cnt * es));
  }
  for (int q = 0; q < n; q++) free(in[q]);
  free(in);
}

/* bench_check's options: collective c, type t, op, root, placement. */
static bench_opts check_opts(bench_coll c, ip_redop op, ip_dtype t, int root, int inplace) {
  bench_opts o;
  bench_opts_default(&o);
  o.coll = c;
  o.op = op;
  o.dtype = t;
  o.root = root;
  o.inplace = inplace;
  return o;
}

/* The rooted collectives' own cases, f32 on 4 ranks: a broadcast must
 * hold its root's input; off a reduce's root the receive buffer must be
 * left as it was (nccl-tests' rule; the reduction is not asked there):
 * out of place BENCH_POISON bytes (NaN, compared byte for byte), in place
 * the rank's own input. */
static void test_check_rooted(void) {
  int n = 4, es = 4;
  bench_geom g;
  bench_geometry(BENCH_REDUCE, 2 * 1021 * 4 + 12, es, n, &g);
  float *buf = malloc((size_t)g.recv_elems * es);
  int64_t first;
  bench_opts o = check_opts(BENCH_BROADCAST, IP_OP_SUM, IP_F32, 2, BENCH_OUT_OF_PLACE);
  naive(BENCH_BROADCAST, IP_OP_SUM, IP_F32, n, 1, 0, &g, buf);
  ok(bench_check(&o, n, 1, &g, buf, NULL) == g.count, "broadcast from root 2: root 0's input is wrong everywhere");
  o = check_opts(BENCH_REDUCE, IP_OP_SUM, IP_F32, 2, BENCH_OUT_OF_PLACE);
  memset(buf, BENCH_POISON, (size_t)g.recv_elems * es);
  int64_t untouched = bench_check(&o, n, 0, &g, buf, &first);
  buf[7] = 0;
  int64_t one = bench_check(&o, n, 0, &g, buf, &first);
  ok(untouched == 0 && one == 1 && first == 7,
     "reduce to root 2, out of place, rank 0: the poison left alone passes, one element written is wrong (at %lld)",
     (long long)first);
  naive(BENCH_REDUCE, IP_OP_SUM, IP_F32, n, 2, 2, &g, buf);
  ok(bench_check(&o, n, 2, &g, buf, NULL) == 0 && bench_check(&o, n, 0, &g, buf, NULL) == g.count,
     "the reduction: right on root 2, written off the root (rank 0) every element is wrong");
  o.inplace = BENCH_IN_PLACE;
  bench_fill(BENCH_REDUCE, IP_OP_SUM, IP_F32, 1, g.recv_elems, buf);
  untouched = bench_check(&o, n, 1, &g, buf, NULL);
  buf[g.count - 1] += 1;
  one = bench_check(&o, n, 1, &g, buf, &first);
  memset(buf, BENCH_POISON, (size_t)g.recv_elems * es);
  ok(untouched == 0 && one == 1 && first == g.count - 1 && bench_check(&o, n, 1, &g, buf, NULL) == g.count,
     "in place, rank 1: its own input left alone passes, one element changed is wrong, the poison is not its input");
  free(buf);
}

/* Gather and scatter, f32 on 4 ranks, root 2: a gather's root holds a
 * block per rank (a wrong element or two ranks' blocks swapped are
 * caught); off its root the receive buffer must be left as it was, byte
 * for byte: out of place the poison, in place the poison around the
 * rank's own input in its block.  A scatter's rank holds its own block of
 * the root's input, not another rank's block nor another root's. */
static void test_check_gather_scatter(void) {
  int n = 4, es = 4;
  bench_geom g;
  bench_geometry(BENCH_GATHER, 4 * (2 * 1021 + 6) * es, es, n, &g);   /* count 2048: not a multiple of the period */
  float *buf = malloc((size_t)g.recv_elems * es), *tmp = malloc((size_t)g.count * es);
  int64_t first;
  bench_opts o = check_opts(BENCH_GATHER, IP_OP_SUM, IP_F32, 2, BENCH_OUT_OF_PLACE);
  naive(BENCH_GATHER, IP_OP_SUM, IP_F32, n, 2, 2, &g, buf);
  int64_t right = bench_check(&o, n, 2, &g, buf, NULL);
  buf[g.count + 5] += 1;
  int64_t one = bench_check(&o, n, 2, &g, buf, &first);
  ok(right == 0 && one == 1 && first == g.count + 5,
     "gather to root 2: the root's blocks pass, one wrong element in block 1 is caught (at %lld)", (long long)first);
  naive(BENCH_GATHER, IP_OP_SUM, IP_F32, n, 2, 2, &g, buf);
  memcpy(tmp, buf, (size_t)g.count * es);
  memcpy(buf, buf + 3 * g.count, (size_t)g.count * es);
  memcpy(buf + 3 * g.count, tmp, (size_t)g.count * es);
  int64_t swapped = bench_check(&o, n, 2, &g, buf, NULL);
  ok(swapped > g.count, "gather: ranks 0 and 3's blocks swapped at the root: %lld wrong", (long long)swapped);
  ok(bench_check(&o, n, 0, &g, buf, NULL) == g.recv_elems, "gather: the gathered blocks written off the root (rank 0) "
     "are every element wrong");
  memset(buf, BENCH_POISON, (size_t)g.recv_elems * es);
  int64_t untouched = bench_check(&o, n, 0, &g, buf, NULL);
  buf[3 * g.count + 9] = 0;
  one = bench_check(&o, n, 0, &g, buf, &first);
  ok(untouched == 0 && one == 1 && first == 3 * g.count + 9,
     "gather off the root, out of place, rank 0: the poison left alone passes, one element written is wrong (at %lld)",
     (long long)first);
  o.inplace = BENCH_IN_PLACE;
  memset(buf, BENCH_POISON, (size_t)g.recv_elems * es);
  bench_fill(BENCH_GATHER, IP_OP_SUM, IP_F32, 1, g.count, buf + g.count);
  untouched = bench_check(&o, n, 1, &g, buf, NULL);
  buf[0] = 0;
  one = bench_check(&o, n, 1, &g, buf, &first);
  memset(buf + g.count, BENCH_POISON, (size_t)g.count * es);
  ok(untouched == 0 && one == 1 && first == 0 && bench_check(&o, n, 1, &g, buf, NULL) == g.count + 1,
     "gather off the root, in place, rank 1: its input in block 1 and the poison around it pass, a write to block 0 "
     "is wrong, its own block poisoned is wrong");
  bench_geometry(BENCH_SCATTER, 4 * (2 * 1021 + 6) * es, es, n, &g);
  o = check_opts(BENCH_SCATTER, IP_OP_SUM, IP_F32, 2, BENCH_OUT_OF_PLACE);
  naive(BENCH_SCATTER, IP_OP_SUM, IP_F32, n, 1, 2, &g, buf);
  right = bench_check(&o, n, 1, &g, buf, NULL);
  int64_t other_rank = bench_check(&o, n, 3, &g, buf, NULL);
  naive(BENCH_SCATTER, IP_OP_SUM, IP_F32, n, 1, 0, &g, buf);
  int64_t other_root = bench_check(&o, n, 1, &g, buf, NULL);
  ok(right == 0 && other_rank == g.count && other_root == g.count,
     "scatter from root 2: rank 1's block passes on rank 1, not on rank 3 (%lld wrong); root 0's block is wrong "
     "(%lld)", (long long)other_rank, (long long)other_root);
  free(buf);
  free(tmp);
}

static void test_check(void) {
  /* Checked on the last rank; a reduce's and a gather's on its root. */
  static const struct { bench_coll c; ip_redop op; ip_dtype t; int n, root; } cases[] = {
    {BENCH_ALLREDUCE, IP_OP_SUM, IP_F32, 8, 0}, {BENCH_ALLREDUCE, IP_OP_PROD, IP_I8, 8, 0},
    {BENCH_ALLREDUCE, IP_OP_AVG, IP_BF16, 3, 0}, {BENCH_ALLREDUCE, IP_OP_MIN, IP_U64, 4, 0},
    {BENCH_ALLGATHER, IP_OP_SUM, IP_F16, 4, 0}, {BENCH_REDUCESCATTER, IP_OP_MAX, IP_I32, 4, 0},
    {BENCH_REDUCESCATTER, IP_OP_AVG, IP_U8, 3, 0}, {BENCH_ALLTOALL, IP_OP_SUM, IP_F64, 8, 0},
    {BENCH_BROADCAST, IP_OP_SUM, IP_F16, 4, 1}, {BENCH_BROADCAST, IP_OP_SUM, IP_U8, 8, 7},
    {BENCH_REDUCE, IP_OP_SUM, IP_F32, 8, 3}, {BENCH_REDUCE, IP_OP_PROD, IP_I8, 5, 0},
    {BENCH_REDUCE, IP_OP_AVG, IP_BF16, 3, 2}, {BENCH_REDUCE, IP_OP_MAX, IP_U32, 4, 1},
    {BENCH_GATHER, IP_OP_SUM, IP_F32, 4, 2}, {BENCH_GATHER, IP_OP_SUM, IP_U8, 8, 0},
    {BENCH_SCATTER, IP_OP_SUM, IP_F16, 4, 1}, {BENCH_SCATTER, IP_OP_SUM, IP_I64, 8, 7},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    bench_coll c = cases[k].c;
    ip_dtype t = cases[k].t;
    int n = cases[k].n, es = ip_dtype_size[t], root = cases[k].root;
    bench_opts o = check_opts(c, cases[k].op, t, root, BENCH_OUT_OF_PLACE);
    bench_geom g;
    bench_geometry(c, 3 * 1021 * 16 + 400, es, n, &g);   /* not a multiple of the pattern's period */
    char *out = malloc((size_t)(g.recv_elems * es + 1));
    int rank = c == BENCH_REDUCE || c == BENCH_GATHER ? root : n - 1;
    naive(c, cases[k].op, t, n, rank, root, &g, out);
    int64_t first;
    int64_t w0 = bench_check(&o, n, rank, &g, out, &first);
    /* Three wrong elements, one in the last block. */
    int64_t at[3] = {0, g.recv_elems / 2 + 1, g.recv_elems - 1};
    for (int i = 0; i < 3; i++) ip_set(t, out, (size_t)at[i], ip_get(t, out, (size_t)at[i]) + 1);
    int64_t w3 = bench_check(&o, n, rank, &g, out, &first);
    ok(w0 == 0 && w3 == 3 && first == 0, "%s %s %s on %d ranks (count %lld), rank %d: right output passes, 3 changed "
       "elements are 3 wrong (got %lld, %lld)", bench_coll_name[c], ip_redop_name[cases[k].op], ip_dtype_name[t], n,
       (long long)g.count, rank, (long long)w0, (long long)w3);
    free(out);
  }
  /* Blocks of two ranks swapped in an allgather: caught. */
  bench_geom g;
  bench_geometry(BENCH_ALLGATHER, 4 * 4096, 4, 4, &g);
  float *out = malloc((size_t)g.recv_elems * 4), *tmp = malloc((size_t)g.count * 4);
  naive(BENCH_ALLGATHER, IP_OP_SUM, IP_F32, 4, 0, 0, &g, out);
  memcpy(tmp, out, (size_t)g.count * 4);
  memcpy(out, out + g.count, (size_t)g.count * 4);
  memcpy(out + g.count, tmp, (size_t)g.count * 4);
  bench_opts o = check_opts(BENCH_ALLGATHER, IP_OP_SUM, IP_F32, 0, BENCH_OUT_OF_PLACE);
  int64_t w = bench_check(&o, 4, 0, &g, out, NULL);
  ok(w > g.count, "allgather with two ranks' blocks swapped: %lld of %lld wrong", (long long)w, (long long)(2 * g.count));
  /* Float avg within tolerance (NCCL scales before summing): not wrong; NaN is. */
  bench_geometry(BENCH_ALLREDUCE, 4096, 4, 3, &g);
  naive(BENCH_ALLREDUCE, IP_OP_AVG, IP_F32, 3, 0, 0, &g, out);
  for (int64_t i = 0; i < g.count; i++) out[i] *= 1.0f + 1e-7f;
  out[5] = NAN;
  o = check_opts(BENCH_ALLREDUCE, IP_OP_AVG, IP_F32, 0, BENCH_OUT_OF_PLACE);
  ok(bench_check(&o, 3, 0, &g, out, NULL) == 1,
     "f32 avg: rounding differences pass, a NaN is wrong");
  free(out);
  free(tmp);
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
  return n;
}

/* A scratch folder for one test's output files: DIR/NAME.csv, .json,
 * .svg and .md.  0 when the folder cannot be made (TAP notes it). */
typedef struct scratch { char dir[64], csv[96], json[96], svg[96], md[96]; } scratch;

static int scratch_make(scratch *o, const char *name) {
  snprintf(o->dir, sizeof o->dir, "/tmp/test_bench_%s_XXXXXX", name);
  if (!mkdtemp(o->dir)) { printf("# mkdtemp %s failed\n", o->dir); return 0; }
  snprintf(o->csv, sizeof o->csv, "%s/%s.csv", o->dir, name);
  snprintf(o->json, sizeof o->json, "%s/%s.json", o->dir, name);
  snprintf(o->svg, sizeof o->svg, "%s/%s.svg", o->dir, name);
  snprintf(o->md, sizeof o->md, "%s/%s.md", o->dir, name);
  return 1;
}

static void scratch_remove(const scratch *o) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", o->dir);
  if (system(cmd)) printf("# could not remove %s\n", o->dir);
}

/* True when the file at svg parses as XML. */
static int svg_wellformed(const char *svg) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "python3 -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' %s", svg);
  return system(cmd) == 0;
}

/* The path of tools/NAME, which sits beside plot_bench.py (`plot`). */
static void beside(const char *plot, const char *name, char *out, size_t n) {
  const char *slash = strrchr(plot, '/');
  snprintf(out, n, "%.*s%s", (int)(slash ? slash - plot + 1 : 0), plot, name);
}

static void test_output(const char *plot) {
  bench_opts o;
  char err[400];
  parse(&o, "-b 1K -e 1M -f 32", err, sizeof err);
  bench_table t;
  bench_table_init(&t, &o, 8);
  snprintf(t.nccl, sizeof t.nccl, "NCCL 2.28.9 (libnccl.so.2)");
  int64_t sizes[] = {1024, 32768, 1048576};
  double nt[] = {20, 40, 100}, bt[] = {10, 40, -1}, nh[] = {6, 6, 9}, bh[] = {3, 5, -1};
  for (int i = 0; i < 3; i++) {
    bench_row *r = &t.rows[t.nrows++];
    r->bytes = sizes[i];
    r->count = sizes[i] / 4;
    r->lib[BENCH_NCCL] = (bench_result){.time_us = nt[i], .host_us = nh[i]};
    r->lib[BENCH_BATON] = (bench_result){.time_us = bt[i], .host_us = bh[i]};
    snprintf(r->algorithm, sizeof r->algorithm, "allreduce_ring");
  }
  snprintf(t.rows[2].lib[BENCH_BATON].error, sizeof t.rows[2].lib[0].error, "baton_allreduce failed on rank 0: unsupported");
  t.rows[2].lib[BENCH_BATON].wrong = -1;
  char text[8192];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  for (int i = 0; i < t.nrows; i++) bench_print_row(f, &t, &t.rows[i]);
  int st = bench_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "#wrong", "text: nccl-tests' columns");
  ok_contains(text, "        1024          256   f32    sum       20.00    0.05    0.09       0       10.00    0.10    0.18       0    2.00  allreduce_ring",
              "text: the 1024-byte row (algbw 1024 B / 20 us, busbw * 2*7/8, ratio 2)");
  ok_contains(text, "# baton, size 1048576: baton_allreduce failed on rank 0: unsupported", "text: the failed call named");
  ok(st == 1, "a failed call makes the exit status 1");
  ok_contains(text, "# Host time per call   : nccl 7.00 us baton 4.00 us (enqueue only, mean over sizes)",
              "text: the host's enqueue time per call, over the sizes each library ran");
  scratch out;
  if (!scratch_make(&out, "t")) return;
  const char *csv = out.csv, *json = out.json, *svg = out.svg, *md = out.md;
  char cmd[1200];
  ok(bench_write_csv(csv, &t) == 0 && bench_write_json(json, &t) == 0, "CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok_contains(c, "collective,nranks,type,redop,inplace,size,count,nccl_time_us,nccl_algbw,nccl_busbw,nccl_wrong,"
                 "baton_time_us,baton_algbw,baton_busbw,baton_wrong,ratio,algorithm,nccl_error,baton_error,nccl_host_us,"
                 "baton_host_us,baton_net_bytes\n",
              "CSV header");
  ok_contains(c, "allreduce,8,f32,sum,0,32768,8192,40.000,0.8192,1.4336,0,40.000,0.8192,1.4336,0,1.0000,\"allreduce_ring\",\"\",\"\",6.000,5.000,0\n",
              "CSV: the 32768-byte row");
  ok_contains(c, "1048576,262144,100.000,10.4858,18.3501,0,,,,,,\"allreduce_ring\",\"\",\"baton_allreduce failed on rank 0: unsupported\",9.000,,0\n",
              "CSV: a failed baton call leaves its columns, the ratio and its host time empty");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"nranks\"]==8 and len(r)==3 and r[0][\"ratio\"]==2.0 and r[2][\"baton\"][\"time_us\"] is None"
           " and abs(r[1][\"nccl\"][\"busbw\"]-1.4336)<1e-9 else 1)' %s", json);
  ok(system(cmd) == 0, "JSON parses and holds the table");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s", plot, csv, svg);
  ok(system(cmd) == 0, "plot_bench.py draws the CSV");
  char *s = bench_test_slurp(svg);
  ok(s && count_of(s, "class=\"curve\" data-lib=\"nccl\"") == 2 && count_of(s, "class=\"curve\" data-lib=\"baton\"") == 2 &&
         count_of(s, "<circle") == 3 + 2 + 3 + 2,
     "SVG: a latency and a busbw panel, each with an NCCL and a baton curve (baton's failed size left out)");
  ok_contains(s, "baton bench: allreduce, 8 ranks, f32 sum", "SVG title names the run");
  ok(svg_wellformed(svg), "SVG is well-formed XML");
  char table[400];
  beside(plot, "bench_table.py", table, sizeof table);
  snprintf(cmd, sizeof cmd, "python3 %s %s > %s", table, csv, md);
  ok(system(cmd) == 0, "bench_table.py turns the CSV into a Markdown table");
  const char *m = bench_test_slurp(md);   /* bench_test_slurp's static buffer */
  ok_contains(m, "| 32,768 | 40.0 | 1.4 | 40.0 | 1.43 | 1.00 | 0/0 | 6.0/5.0 |",
              "Markdown: the 32768-byte row with both libraries' host time per call");
  ok_contains(m, "| 1,048,576 | 100.0 | 18.4 | - | - | - | 0/- | 9.0/- |",
              "Markdown: a failed baton size shows dashes");
  scratch_remove(&out);
  bench_table_free(&t);
}

/* --inplace both: a fixed table of two sizes, each out of place and in place,
 * through the text printers (one line per size, a column group per
 * placement), CSV (a row per size and placement), JSON, plot_bench.py and
 * bench_table.py. */
static void test_output_both(const char *plot) {
  bench_opts o;
  char err[400];
  ok(parse(&o, "-b 1K -e 32K -f 32 --inplace both", err, sizeof err) == 0, "--inplace both parses");
  bench_table t;
  bench_table_init(&t, &o, 8);
  snprintf(t.nccl, sizeof t.nccl, "NCCL 2.28.9 (libnccl.so.2)");
  /* size, placement: NCCL and baton time (us), host time (us); baton fails the last */
  static const struct { int64_t bytes; int inplace; double nt, bt, nh, bh; const char *alg; } rs[] = {
    {1024, 0, 20, 10, 6, 3, "allreduce_allpairs1"}, {1024, 1, 25, 20, 6, 4, "allreduce_allpairs1"},
    {32768, 0, 40, 40, 6, 5, "allreduce_ring"}, {32768, 1, 50, -1, 6, -1, ""},
  };
  for (int i = 0; i < 4; i++) {
    bench_row *r = &t.rows[t.nrows++];
    r->bytes = rs[i].bytes;
    r->count = rs[i].bytes / 4;
    r->inplace = rs[i].inplace;
    r->lib[BENCH_NCCL] = (bench_result){.time_us = rs[i].nt, .host_us = rs[i].nh};
    r->lib[BENCH_BATON] = (bench_result){.time_us = rs[i].bt, .host_us = rs[i].bh};
    snprintf(r->algorithm, sizeof r->algorithm, "%s", rs[i].alg);
  }
  t.rows[3].lib[BENCH_BATON].wrong = -1;
  t.rows[1].lib[BENCH_NCCL].wrong = 2;
  t.rows[2].net_bytes = 4096;
  snprintf(t.rows[3].lib[BENCH_BATON].error, sizeof t.rows[3].lib[0].error, "baton_allreduce failed on rank 0: unsupported");
  char text[8192];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  for (int i = 0; i < t.nrows; i += 2) bench_print_pair(f, &t, &t.rows[i], &t.rows[i + 1]);
  int st = bench_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "f32 sum, out of place and in place, 20 iterations", "text: the title names both placements");
  ok_contains(text, "#                                       ------------------ out of place -------------------  "
                    "-------------------- in place ---------------------\n", "text: a title over each column group");
  ok_contains(text, "#       size        count  type  redop  nccl time   busbw baton time   busbw  #wrong  ratio  "
                    "nccl time   busbw baton time   busbw  #wrong  ratio  baton algorithm\n",
              "text: the column names, once per placement");
  ok_contains(text, "#        (B)   (elements)                    (us)  (GB/s)       (us)  (GB/s)  nccl/b nccl/b       "
                    "(us)  (GB/s)       (us)  (GB/s)  nccl/b nccl/b\n", "text: the units");
  ok_contains(text, "        1024          256   f32    sum      20.00    0.09      10.00    0.18     0/0   2.00      "
                    "25.00    0.07      20.00    0.09     2/0   1.25  allreduce_allpairs1\n",
              "text: one line for 1024 bytes, out of place then in place (busbw 1024 B / 20 us * 2*7/8)");
  ok_contains(text, "# baton, size 32768, in place: baton_allreduce failed on rank 0: unsupported\n"
                    "       32768         8192   f32    sum      40.00    1.43      40.00    1.43     0/0   1.00      "
                    "50.00    1.15      error       -     0/-      -  allreduce_ring / -\n",
              "text: a failed in-place call named with its placement; its group shows error, the algorithms differ");
  ok_contains(text, "allreduce_ring / -\n#   baton over the network, out of place: 4096 bytes per rank per call, 0.102 "
                    "GB/s per rank each way\n", "text: the network line after the size's line, its placement named");
  ok_contains(text, "# Avg bus bandwidth    : nccl 0.762  baton 0.806 GB/s (over the 2 sizes both measured, out of place)\n"
                    "# Avg bus bandwidth    : nccl 0.072  baton 0.090 GB/s (over the 1 sizes both measured, in place)\n"
                    "# Geometric mean ratio : 1.414 out of place, 1.250 in place, 1.357 both (nccl time / baton time)\n"
                    "# Host time per call   : nccl 6.00 us baton 4.00 us (enqueue only, mean over sizes and placements)\n"
                    "# Wrong elements       : nccl 2  baton 0  FAILED\n",
              "text: the footer per placement, then over both");
  ok(st == 1, "--inplace both: wrong elements in place make the exit status 1");
  scratch out;
  if (!scratch_make(&out, "both")) return;
  const char *csv = out.csv, *json = out.json, *svg = out.svg, *md = out.md;
  char cmd[1200], table[400];
  ok(bench_write_csv(csv, &t) == 0 && bench_write_json(json, &t) == 0, "--inplace both: CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok(c && count_of(c, "\nallreduce,8,f32,sum,") == 4, "CSV: four rows, one per size and placement");
  ok_contains(c, "\nallreduce,8,f32,sum,0,1024,256,20.000,0.0512,0.0896,0,10.000,0.1024,0.1792,0,2.0000,"
                 "\"allreduce_allpairs1\",\"\",\"\",6.000,3.000,0\n"
                 "allreduce,8,f32,sum,1,1024,256,25.000,0.0410,0.0717,2,20.000,0.0512,0.0896,0,1.2500,"
                 "\"allreduce_allpairs1\",\"\",\"\",6.000,4.000,0\n",
              "CSV: 1024 bytes out of place (inplace 0), then in place (inplace 1)");
  ok_contains(c, "allreduce,8,f32,sum,1,32768,8192,50.000,", "CSV: the failed in-place size has its row");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"inplace\"]==\"both\" and [x[\"inplace\"] for x in r]==[False,True,False,True]"
           " and r[1][\"nccl\"][\"wrong\"]==2 and r[3][\"baton\"][\"time_us\"] is None else 1)' %s", json);
  ok(system(cmd) == 0, "JSON: \"inplace\": \"both\", each row its own inplace");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s", plot, csv, svg);
  ok(system(cmd) == 0, "plot_bench.py draws the CSV of both placements");
  char *s = bench_test_slurp(svg);
  ok(s && count_of(s, "class=\"curve\" data-lib=\"nccl\" data-inplace=\"0\"") == 2 &&
         count_of(s, "class=\"curve\" data-lib=\"nccl\" data-inplace=\"1\"") == 2 &&
         count_of(s, "class=\"curve\" data-lib=\"baton\" data-inplace=\"0\"") == 2 &&
         count_of(s, "class=\"curve\" data-lib=\"baton\" data-inplace=\"1\"") == 2 &&
         count_of(s, "stroke-dasharray") == 2 * 2 + 2 * 2 && count_of(s, "<circle") == 2 * (2 + 2 + 2 + 1),
     "SVG: a curve per library and placement in each panel, in place dashed (baton's failed in-place size left out)");
  ok_contains(s, "baton bench: allreduce, 8 ranks, f32 sum out of place and in place", "SVG title names both placements");
  ok_contains(s, ">baton in place</text>", "SVG legend names the placement");
  ok(svg_wellformed(svg), "SVG of both placements is well-formed XML");
  beside(plot, "bench_table.py", table, sizeof table);
  snprintf(cmd, sizeof cmd, "python3 %s %s > %s", table, csv, md);
  ok(system(cmd) == 0, "bench_table.py reads the CSV of both placements");
  const char *m = bench_test_slurp(md);
  ok_contains(m, "| size (B) | placement | NCCL us |", "Markdown: a placement column");
  ok_contains(m, "| 1,024 | in place | 25.0 | 0.1 | 20.0 | 0.09 | 1.25 | 2/0 | 6.0/4.0 |", "Markdown: an in-place row");
  scratch_remove(&out);
  bench_table_free(&t);
}

/* Appends a row to a fixed table: size, type and op, placement, NCCL's
 * and baton's time (< 0: not measured); host times 5 and 3 us (baton's
 * none when it has no time), wrong 0, algorithm allreduce_ring. */
static bench_row *add_row(bench_table *t, int64_t bytes, ip_dtype ty, ip_redop op, int inplace, double nt, double bt) {
  bench_row *r = &t->rows[t->nrows++];
  r->bytes = bytes;
  r->count = bytes / ip_dtype_size[ty];
  r->dtype = ty;
  r->op = op;
  r->inplace = inplace;
  r->lib[BENCH_NCCL] = (bench_result){.time_us = nt, .host_us = 5};
  r->lib[BENCH_BATON] = (bench_result){.time_us = bt, .host_us = bt < 0 ? -1 : 3};
  snprintf(r->algorithm, sizeof r->algorithm, "allreduce_ring");
  return r;
}

/* Broadcast, reduce and gather: the header names the root, busbw = algbw
 * (a gather's * (n-1)/n), a broadcast's and a gather's redop is none and
 * a reduce's its op, in text, CSV and JSON ("root"; null for a
 * collective without one). */
static void test_output_rooted(void) {
  bench_opts o;
  char err[400], text[4096];
  ok(parse(&o, "--collective broadcast -r 2 -g 4 -b 1K -e 1K", err, sizeof err) == 0, "--collective broadcast -r 2 parses");
  bench_table t;
  bench_table_init(&t, &o, 4);
  snprintf(t.nccl, sizeof t.nccl, "NCCL 2.28.9 (libnccl.so.2)");
  snprintf(add_row(&t, 1024, IP_F32, IP_OP_SUM, 0, 20, 10)->algorithm, sizeof t.rows[0].algorithm, "broadcast_chain");
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  bench_print_row(f, &t, &t.rows[0]);
  fclose(f);
  ok_contains(text, "# baton bench: broadcast, root 2, 4 ranks (one process), f32 none, out of place,",
              "text: the title names the root");
  ok_contains(text, "        1024          256   f32   none       20.00    0.05    0.05       0       10.00    0.10    0.10"
                    "       0    2.00  broadcast_chain\n", "text: redop none, busbw = algbw");
  scratch out;
  if (!scratch_make(&out, "rooted")) return;
  char cmd[1200];
  ok(bench_write_csv(out.csv, &t) == 0 && bench_write_json(out.json, &t) == 0, "broadcast: CSV and JSON written");
  ok_contains(bench_test_slurp(out.csv), "\nbroadcast,4,f32,none,0,1024,256,20.000,0.0512,0.0512,0,10.000,0.1024,0.1024,0,",
              "CSV: the broadcast row, busbw = algbw");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1]));"
           "sys.exit(0 if d[\"collective\"]==\"broadcast\" and d[\"root\"]==2 and d[\"redop\"]==\"none\" else 1)' %s",
           out.json);
  ok(system(cmd) == 0, "JSON: \"root\": 2, \"redop\": \"none\"");
  bench_table_free(&t);
  parse(&o, "--collective reduce -r 1 -o max -g 4 -b 1K -e 1K", err, sizeof err);
  bench_table_init(&t, &o, 4);
  f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  fclose(f);
  ok_contains(text, "# baton bench: reduce, root 1, 4 ranks (one process), f32 max, out of place,",
              "text: a reduce's title names its root and op");
  bench_table_free(&t);
  parse(&o, "--collective gather -r 3 -g 4 -b 1K -e 1K", err, sizeof err);
  bench_table_init(&t, &o, 4);
  snprintf(t.nccl, sizeof t.nccl, "NCCL 2.28.9 (libnccl.so.2)");
  bench_row *gr = add_row(&t, 1024, IP_F32, IP_OP_SUM, 0, 20, 10);
  gr->count = 64;
  snprintf(gr->algorithm, sizeof gr->algorithm, "gather_direct");
  f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  bench_print_row(f, &t, gr);
  fclose(f);
  ok_contains(text, "# baton bench: gather, root 3, 4 ranks (one process), f32 none, out of place,",
              "text: a gather's title names its root, redop none");
  ok_contains(text, "        1024           64   f32   none       20.00    0.05    0.04       0       10.00    0.10    0.08"
                    "       0    2.00  gather_direct\n", "text: a gather's busbw = algbw * 3/4");
  bench_table_free(&t);
  parse(&o, "--collective allgather -r 1 -g 4", err, sizeof err);
  bench_table_init(&t, &o, 4);
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d[\"root\"] is None else 1)' %s",
           out.json);
  f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  fclose(f);
  ok(bench_write_json(out.json, &t) == 0 && system(cmd) == 0 && strstr(text, "# baton bench: allgather, 4 ranks"),
     "allgather with -r: no root in the title, \"root\": null");
  scratch_remove(&out);
  bench_table_free(&t);
}

/* -d all -o all: a fixed table of three (type, op) pairs of two sizes
 * each, through the text printers (the type and redop columns per line,
 * a footer line per pair), CSV, JSON, plot_bench.py (one pair drawn: the
 * first, or the one named) and bench_table.py; then --inplace both with two
 * pairs. */
static void test_output_combos(const char *plot) {
  bench_opts o;
  char err[400];
  ok(parse(&o, "-b 1K -e 32K -f 32 -d all -o all", err, sizeof err) == 0, "-d all -o all parses");
  bench_table t;
  bench_table_init(&t, &o, 8);
  snprintf(t.nccl, sizeof t.nccl, "NCCL 2.28.9 (libnccl.so.2)");
  add_row(&t, 1024, IP_F32, IP_OP_SUM, 0, 20, 10);
  add_row(&t, 32768, IP_F32, IP_OP_SUM, 0, 40, 40);
  add_row(&t, 1024, IP_F32, IP_OP_PROD, 0, 20, 20);
  add_row(&t, 32768, IP_F32, IP_OP_PROD, 0, 40, 80);
  add_row(&t, 1024, IP_F16, IP_OP_MAX, 0, 30, 10)->lib[BENCH_BATON].wrong = 3;
  bench_row *bad = add_row(&t, 32768, IP_F16, IP_OP_MAX, 0, 50, -1);
  bad->lib[BENCH_BATON].wrong = -1;
  snprintf(bad->lib[BENCH_BATON].error, sizeof bad->lib[0].error, "baton_allreduce failed on rank 0: unsupported");
  char text[8192];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  for (int i = 0; i < t.nrows; i++) bench_print_row(f, &t, &t.rows[i]);
  int st = bench_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "# baton bench: allreduce, 8 ranks (one process), 10 types (-d all) x 5 ops (-o all), out of place,",
              "text: the title names -d all and -o all");
  ok_contains(text, "        1024          256   f32   prod       20.00    0.05    0.09       0       20.00    0.05    0.09"
                    "       0    1.00  allreduce_ring\n", "text: an f32 prod line, its type and redop columns");
  ok_contains(text, "        1024          512   f16    max       30.00    0.03    0.06       0       10.00    0.10    0.18"
                    "       3    3.00  allreduce_ring\n", "text: an f16 max line: count and bandwidth of 2-byte elements");
  ok_contains(text, "# baton, size 32768, f16 max: baton_allreduce failed on rank 0: unsupported\n",
              "text: a failed call named with its type and op");
  ok_contains(text, "# Geometric mean ratio : 1.246 (nccl time / baton time)\n"
                    "#   f32 sum            : ratio 1.414 over 2 sizes, wrong nccl 0 baton 0\n"
                    "#   f32 prod           : ratio 0.707 over 2 sizes, wrong nccl 0 baton 0\n"
                    "#   f16 max            : ratio 3.000 over 1 sizes, wrong nccl 0 baton 3, calls failed  FAILED\n"
                    "# Host time per call   : nccl 5.00 us baton 3.00 us (enqueue only, mean over sizes, types and ops)\n",
              "text: the ratio over every pair, then a line per pair in the table's order");
  ok(st == 1, "wrong elements in one pair make the exit status 1");
  scratch out;
  if (!scratch_make(&out, "combos")) return;
  const char *csv = out.csv, *json = out.json, *svg = out.svg, *md = out.md, *dir = out.dir;
  char cmd[1200], table[400];
  ok(bench_write_csv(csv, &t) == 0 && bench_write_json(json, &t) == 0, "-d all -o all: CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok(c && count_of(c, "\nallreduce,8,f32,sum,0,") == 2 && count_of(c, "\nallreduce,8,f32,prod,0,") == 2 &&
         count_of(c, "\nallreduce,8,f16,max,0,") == 2,
     "CSV: two rows per pair, the type and redop columns per row");
  ok_contains(c, "\nallreduce,8,f16,max,0,1024,512,30.000,0.0341,0.0597,0,10.000,0.1024,0.1792,3,3.0000,",
              "CSV: the f16 max row of 1024 bytes");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"type\"]==\"all\" and d[\"redop\"]==\"all\" and"
           " [(x[\"type\"],x[\"redop\"]) for x in r]==[(\"f32\",\"sum\")]*2+[(\"f32\",\"prod\")]*2+[(\"f16\",\"max\")]*2"
           " and r[4][\"baton\"][\"wrong\"]==3 else 1)' %s", json);
  ok(system(cmd) == 0, "JSON: \"type\" and \"redop\" \"all\", each row its own");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s 2>%s/note", plot, csv, svg, dir);
  ok(system(cmd) == 0, "plot_bench.py draws a CSV of several pairs");
  char *s = bench_test_slurp(svg);
  ok(s && count_of(s, "class=\"curve\" data-lib=\"nccl\"") == 2 && count_of(s, "class=\"curve\" data-lib=\"baton\"") == 2 &&
         count_of(s, "<circle") == 4 * 2, "SVG: the first pair alone, a curve per library in each panel");
  ok_contains(s, "baton bench: allreduce, 8 ranks, f32 sum (1 of 3 type/redop pairs)</text>",
              "SVG title names the pair drawn and how many the CSV has");
  snprintf(cmd, sizeof cmd, "%s/note", dir);
  ok_contains(bench_test_slurp(cmd), "drawing f32/sum, the first of 3 type/redop pairs", "plot_bench.py says which");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s f16/max", plot, csv, svg);
  ok(system(cmd) == 0, "plot_bench.py draws the pair named (f16/max)");
  s = bench_test_slurp(svg);
  ok(s && strstr(s, "8 ranks, f16 max (1 of 3") && count_of(s, "<circle") == 2 * 2 + 1 * 2,
     "SVG of f16 max: its rows only (baton's failed size left out)");
  ok(svg_wellformed(svg), "that SVG is well-formed XML");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s f32", plot, csv, svg);
  int f32 = system(cmd) == 0 && strstr(bench_test_slurp(svg), "f32 sum (1 of 3");
  snprintf(cmd, sizeof cmd, "python3 %s %s %s i8 2>/dev/null", plot, csv, svg);
  ok(f32 && system(cmd) != 0, "plot_bench.py: a type alone picks its first op; a type the CSV lacks is refused");
  beside(plot, "bench_table.py", table, sizeof table);
  snprintf(cmd, sizeof cmd, "python3 %s %s > %s", table, csv, md);
  ok(system(cmd) == 0, "bench_table.py reads a CSV of several pairs");
  const char *m = bench_test_slurp(md);
  ok_contains(m, "| type/redop | size (B) | NCCL us |", "Markdown: a type/redop column");
  ok_contains(m, "| f32/prod | 32,768 | 40.0 | 1.4 | 80.0 | 0.72 | 0.50 | 0/0 | 5.0/3.0 |", "Markdown: an f32 prod row");
  scratch_remove(&out);
  bench_table_free(&t);

  /* --inplace both with -o all: a line per size and pair, a footer line per pair over both placements. */
  ok(parse(&o, "-b 1K -e 1K -o all --inplace both", err, sizeof err) == 0, "-o all --inplace both parses");
  bench_table_init(&t, &o, 8);
  add_row(&t, 1024, IP_F32, IP_OP_MIN, 0, 20, 10);
  add_row(&t, 1024, IP_F32, IP_OP_MIN, 1, 20, 20);
  add_row(&t, 1024, IP_F32, IP_OP_AVG, 0, 20, 40);
  snprintf(add_row(&t, 1024, IP_F32, IP_OP_AVG, 1, 20, -1)->lib[BENCH_BATON].error, sizeof t.rows[0].lib[0].error,
           "unsupported");
  f = fmemopen(text, sizeof text, "w");
  bench_print_header(f, &t);
  for (int i = 0; i < t.nrows; i += 2) bench_print_pair(f, &t, &t.rows[i], &t.rows[i + 1]);
  st = bench_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "8 ranks (one process), f32 x 5 ops (-o all), out of place and in place,", "text: the title");
  ok_contains(text, "        1024          256   f32    min      20.00", "text: the min pair's line");
  ok_contains(text, "# baton, size 1024, f32 avg, in place: unsupported\n        1024          256   f32    avg      20.00",
              "text: the avg pair's failed in-place call named with its pair and placement, then its line");
  ok_contains(text, "#   f32 min            : ratio 1.414 over 2 sizes x placements, wrong nccl 0 baton 0\n"
                    "#   f32 avg            : ratio 0.500 over 1 sizes x placements, wrong nccl 0 baton 0, calls failed  "
                    "FAILED\n", "text: a footer line per pair over both placements");
  ok(st == 1, "a failed call in one pair makes the exit status 1");
  bench_table_free(&t);
}

/* bench_fused_parse of "bench LINE": its return; err gets stderr. */
static int fparse(bench_fused_opts *o, const char *line, char *err, size_t errlen) {
  char *argv[64];
  int argc = bench_test_split(line, argv);
  bench_test_io io;
  bench_test_open(&io, err, errlen, NULL, 0);
  int rc = bench_fused_parse(o, argc, argv, io.out, io.err);
  bench_test_close(&io, 0);
  return rc;
}

/* baton bench --fused: options, the derived columns, the outputs and the
 * plot of a fixed table. */
static void test_fused(const char *plot) {
  bench_fused_opts o;
  char err[400];
  char *argv1[] = {"bench", "-g", "4", "--fused", "gemv_allreduce", NULL};
  ok(bench_fused_asked(5, argv1) && !bench_fused_asked(3, argv1), "--fused selects the fused mode");
  ok(fparse(&o, "--fused gemv_allreduce", err, sizeof err) == 0 && o.dtype == IP_BF16 && o.nM == 4 && o.nK == 3 &&
     o.M[3] == 65536 && o.K[2] == 7168 && o.c.iters == 20 && o.c.check == 1,
     "defaults: bf16, M 8192..65536, K 2048, 4096, 7168");
  ok(fparse(&o, "--fused=gemv_allreduce -g 4 -d f32 --rows 8K,12289 --cols 2048 -G 10 -n 50 --rounds 5 --csv a.csv", err,
            sizeof err) == 0 && o.c.ngpus == 4 && o.dtype == IP_F32 && o.nM == 2 && o.M[0] == 8192 && o.M[1] == 12289 &&
     o.nK == 1 && o.c.graph == 10 && o.c.iters == 50 && o.c.rounds == 5 && o.c.csv && !strcmp(o.c.csv, "a.csv"),
     "options: ranks, type, shape lists with suffixes, graph, iterations, rounds, CSV");
  ok(fparse(&o, "--fused allreduce", err, sizeof err) == 2, "an unknown fused operator is refused");
  ok_contains(err, "--fused takes gemv_allreduce", "and named");
  ok(fparse(&o, "--fused gemv_allreduce -d i32", err, sizeof err) == 2, "a type the GEMV does not take is refused");
  ok(fparse(&o, "--fused gemv_allreduce --rows 8192,", err, sizeof err) == 2 &&
     fparse(&o, "--fused gemv_allreduce --cols 0", err, sizeof err) == 2, "malformed and empty shape lists are refused");
  ok(fparse(&o, "--fused gemv_allreduce --share 2", err, sizeof err) == 2, "--share needs -g");
  ok(fparse(&o, "--fused gemv_allreduce -b 8", err, sizeof err) == 2, "a collective option is refused in fused mode");
  ok_contains(err, "unknown option '-b' for --fused", "and named");

  bench_fused_table t = {.dtype = IP_BF16, .info = {.nranks = 4, .iters = 20, .warmup = 5, .graph = 10, .rounds = 3}};
  snprintf(t.info.nccl, sizeof t.info.nccl, "NCCL 2.28.9");
  snprintf(t.info.cublas, sizeof t.info.cublas, "cuBLAS 13.0.2");
  bench_fused_row rows[2] = {
    {.M = 8192, .K = 2048, .gemv_us = 10, .ar_us = 20, .base_us = 30, .baton_us = 25, .wrong_base = 0,
     .wrong_baton = 0, .checked = 256},
    {.M = 16384, .K = 2048, .gemv_us = 20, .ar_us = -1, .base_us = -1, .baton_us = -1, .wrong_base = 0,
     .wrong_baton = -1},
  };
  snprintf(rows[0].algorithm, sizeof rows[0].algorithm, "gemv_allreduce_allpairs");
  snprintf(rows[1].error, sizeof rows[1].error, "baton: unsupported");
  t.rows = rows;
  t.nrows = 2;
  ok(fabs(bench_fused_speedup(&rows[0]) - 1.2) < 1e-12 && fabs(bench_fused_overlap(&rows[0]) - 0.5) < 1e-12 &&
     fabs(bench_fused_vs_cublas(&rows[0]) - 0.4) < 1e-12 && bench_fused_speedup(&rows[1]) < 0,
     "speedup 30/25, overlap (30-25)/min(10, 20), cuBLAS/baton 10/25; missing times give none");
  ok(fabs(bench_fused_tbps(&rows[0], IP_BF16, 10) - 8192.0 * 2048 * 2 / 1e7) < 1e-9, "TB/s: bytes of W over the time");
  char text[4096];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_fused_print_header(f, &t);
  for (int i = 0; i < 2; i++) bench_fused_print_row(f, &t, &rows[i]);
  int st = bench_fused_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "     8192   2048      10.00   3.36      20.00      30.00      25.00   1.34     1.20    0.50    0.40",
              "text: the first shape's times, bandwidths and ratios");
  ok_contains(text, "# M=16384 K=2048: baton: unsupported", "text: the failed shape named");
  ok(st == 1, "a failed shape makes the exit status 1");
  scratch out;
  if (!scratch_make(&out, "fused")) return;
  const char *csv = out.csv, *json = out.json, *svg = out.svg;
  char cmd[1200];
  ok(bench_fused_write_csv(csv, &t) == 0 && bench_fused_write_json(json, &t) == 0, "fused CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok_contains(c, "gemv_allreduce,bf16,4,0,8192,2048,10.000,20.000,30.000,25.000,3.3554,1.3422,1.2000,0.5000,0.4000,0,0,256,"
                 "gemv_allreduce_allpairs\n", "fused CSV: the first shape");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"ranks\"]==4 and len(r)==2 and r[0][\"speedup\"]==1.2 and r[1][\"error\"]==\"baton: unsupported\""
           " else 1)' %s", json);
  ok(system(cmd) == 0, "fused JSON parses and holds the table");
  char fplot[400];
  beside(plot, "plot_fused.py", fplot, sizeof fplot);
  snprintf(cmd, sizeof cmd, "python3 %s %s %s", fplot, csv, svg);
  ok(system(cmd) == 0, "plot_fused.py draws the CSV");
  char *s = bench_test_slurp(svg);
  ok(s && count_of(s, "class=\"bar\"") == 4 + 1 && count_of(s, "class=\"ratio\"") == 1,
     "SVG: the first shape's four times and the second's one, the first's ratio");
  ok(svg_wellformed(svg), "the fused SVG is well-formed XML");
  scratch_remove(&out);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_bench PLOT_BENCH_PY\n");
    return 2;
  }
  test_options();
  test_combos();
  test_sweep();
  test_geometry();
  test_check();
  test_check_rooted();
  test_check_gather_scatter();
  test_output(argv[1]);
  test_output_both(argv[1]);
  test_output_combos(argv[1]);
  test_output_rooted();
  test_fused(argv[1]);
  return tap_done();
}
