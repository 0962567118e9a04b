/* test_bench_moe.c -- `baton bench --fused gemm_alltoall` without a GPU:
 * the operator dispatch of all three fused operators and which take -P
 * (a process per rank), every option and
 * error message, the defaults and --grid, the derived columns of known
 * rows, the text, CSV and JSON outputs, the pattern the fused benches
 * tile their operands from; then, given the baton program,
 * its --help and refusals end to end.
 * Usage: test_bench_moe [BATON] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_embed.h"
#include "bench_fused.h"
#include "bench_moe.h"
#include "bench_test.h"
#include "tap.h"

/* bench_moe_parse of "bench LINE": its return; err gets stderr (its first
 * line), out stdout. */
static int mparse(bench_moe_opts *o, const char *line, char *err, size_t errlen, char *out, size_t outlen) {
  char *argv[64];
  int argc = bench_test_split(line, argv);
  bench_test_io io;
  bench_test_open(&io, err, errlen, out, outlen);
  int rc = bench_moe_parse(o, argc, argv, io.out, io.err);
  bench_test_close(&io, 1);
  return rc;
}

static int same_list(const int64_t *got, int n, const int64_t *want, int wn) {
  if (n != wn) return 0;
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) return 0;
  return 1;
}

/* -P: every fused mode runs with a process per rank (it needs -g N and
 * no --share). */
static void test_procs(void) {
  char err[400];
  bench_fused_opts f;
  bench_moe_opts m;
  bench_embed_opts e;
  char *argv[64];
  bench_test_io io;
  const char *lines[] = {"--fused gemv_allreduce -g 2 --procs -G 5", "--fused gemv_allreduce -P",
                         "--fused gemv_allreduce -g 4 --share 2 -P"};
  int rc[3];
  for (int i = 0; i < 3; i++) {
    int argc = bench_test_split(lines[i], argv);
    bench_test_open(&io, err, sizeof err, NULL, 0);
    rc[i] = bench_fused_parse(&f, argc, argv, io.out, io.err);
    bench_test_close(&io, 1);
    if (i == 0) ok(rc[0] == 0 && f.c.procs == 1 && f.c.ngpus == 2 && f.c.graph == 5, "-P / --procs: a process per rank");
  }
  ok(rc[1] == 2 && rc[2] == 2 && strstr(err, "-P needs -g N") && strstr(err, "no --share"),
     "gemv_allreduce: -P without -g N, or with --share, is refused");
  bench_fused_table t = {.dtype = IP_BF16, .info = {.nranks = 2, .procs = 1, .iters = 20, .warmup = 5, .rounds = 3}};
  char text[1000];
  FILE *hf = fmemopen(text, sizeof text, "w");
  bench_fused_print_header(hf, &t);
  fclose(hf);
  ok_contains(text, "2 ranks on one GPU and process each", "gemv_allreduce -P: the table says a process ran each rank");
  ok(mparse(&m, "--fused gemm_alltoall -g 2 -P --tokens 2048", err, sizeof err, NULL, 0) == 0 && m.c.procs == 1,
     "gemm_alltoall takes -P");
  bench_test_open(&io, err, sizeof err, NULL, 0);
  int argc = bench_test_split("--fused embedding_alltoall -g 2 -P --batch 2048", argv);
  ok(bench_embed_parse(&e, argc, argv, io.out, io.err) == 0 && e.c.procs == 1, "embedding_alltoall takes -P");
  bench_test_close(&io, 1);
  bench_test_open(&io, err, sizeof err, NULL, 0);
  argc = bench_test_split("--fused embedding_alltoall -P", argv);
  ok(bench_embed_parse(&e, argc, argv, io.out, io.err) == 2, "and refuses it without -g N");
  bench_test_close(&io, 1);
  ok_contains(err, "-P needs -g N", "saying why");
}

static void test_operator(void) {
  char err[400];
  ok(bench_test_operator("--fused gemm_alltoall -g 2", err, sizeof err) == BENCH_FUSED_GEMM_ALLTOALL &&
     bench_test_operator("-g 2 --fused=gemm_alltoall", err, sizeof err) == BENCH_FUSED_GEMM_ALLTOALL,
     "--fused gemm_alltoall and --fused=gemm_alltoall name the GEMM + AllToAll operator (3)");
  ok(BENCH_FUSED_GEMM_ALLTOALL == 3 && BENCH_FUSED_GEMV_ALLREDUCE == 1 && BENCH_FUSED_EMBEDDING_ALLTOALL == 2,
     "the operators' numbers");
  ok(bench_test_operator("--fused gemv_allreduce --rows 8192", err, sizeof err) == BENCH_FUSED_GEMV_ALLREDUCE,
     "--fused gemv_allreduce names the GEMV operator");
  ok(bench_test_operator("--fused embedding_alltoall", err, sizeof err) == BENCH_FUSED_EMBEDDING_ALLTOALL,
     "--fused embedding_alltoall names the embedding operator");
  ok(bench_test_operator("--fused gemv_allreduce --fused gemm_alltoall", err, sizeof err) == BENCH_FUSED_GEMM_ALLTOALL,
     "the last --fused wins");
  ok(bench_test_operator("--fused gemm -g 2", err, sizeof err) == 0, "an unknown fused operator is refused");
  ok_contains(err, "baton bench: --fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused "
              "operator measured), not 'gemm'", "the refusal lists the three operators");
  ok(bench_test_operator("-g 2 --fused", err, sizeof err) == 0, "--fused without an operator is refused");
  ok_contains(err, "not ''", "and names the empty operator");
}

static void test_options(void) {
  bench_moe_opts o;
  char err[400], out[8192];
  ok(mparse(&o, "--fused gemm_alltoall", err, sizeof err, NULL, 0) == 0 && o.nT == 1 && o.T[0] == 4096 &&
     o.nH == 1 && o.H[0] == 8192 && o.nF == 1 && o.F[0] == 4096 && !o.grid && o.c.ngpus == 0 && o.c.share == 0 &&
     o.c.warmup == 5 && o.c.iters == 20 && o.c.graph == 0 && o.c.rounds == 3 && o.c.check == 1 &&
     !o.c.no_nccl && !o.c.csv && !o.c.json && o.fill == 0,
     "defaults: T 4096, H 8192, F 4096; every GPU; -w 5 -n 20 -G 0 --rounds 3 -c 1; no --fill");
  ok(mparse(&o, "--fused gemm_alltoall -g 4 --share 2 -d bf16 --tokens 1K,8192 --out_cols 4096,8K --in_cols 1024,14336 -w 2 -n 7 -G 3 "
             "--rounds 5 -c 0 --csv a.csv --json b.json --no-nccl", err, sizeof err, NULL, 0) == 0 &&
     o.c.ngpus == 4 && o.c.share == 2 && o.nT == 2 && o.T[0] == 1024 && o.T[1] == 8192 && o.nH == 2 &&
     o.H[0] == 4096 && o.H[1] == 8192 && o.nF == 2 && o.F[0] == 1024 && o.F[1] == 14336 && o.c.warmup == 2 &&
     o.c.iters == 7 && o.c.graph == 3 && o.c.rounds == 5 && o.c.check == 0 && !strcmp(o.c.csv, "a.csv") &&
     !strcmp(o.c.json, "b.json") && o.c.no_nccl, "every option in its short form, K suffixes");
  ok(mparse(&o, "--fused=gemm_alltoall --ngpus=8 --datatype=bfloat16 --warmup_iters 1 --iters 9 --cudagraph 2 "
             "--rounds 1 --check 1 --share=8 --csv=c.csv", err, sizeof err, NULL, 0) == 0 &&
     o.c.ngpus == 8 && o.c.share == 8 && o.c.warmup == 1 && o.c.iters == 9 && o.c.graph == 2 && o.c.rounds == 1 &&
     o.c.check == 1 && !strcmp(o.c.csv, "c.csv"), "long forms, --opt=value, bfloat16");
  ok(mparse(&o, "--fused gemm_alltoall --tokens 1M --out_cols 64 --in_cols 128", err, sizeof err, NULL, 0) == 0 && o.T[0] == 1048576 &&
     o.H[0] == 64 && o.F[0] == 128, "M suffix; H and F of one tile");
  ok(mparse(&o, "--fused gemm_alltoall --fill 0.5", err, sizeof err, NULL, 0) == 0 && o.fill == 0.5 &&
     mparse(&o, "--fused gemm_alltoall --fill=1", err, sizeof err, NULL, 0) == 0 && o.fill == 1 &&
     mparse(&o, "--fused gemm_alltoall --fill 1e-3 -g 2", err, sizeof err, NULL, 0) == 0 && o.fill == 1e-3,
     "--fill F in (0, 1], --fill=F, exponents");
  static const int64_t gT[] = {1024, 2048, 4096, 8192}, gH[] = {4096, 8192}, gF[] = {1024, 2048, 4096, 14336};
  ok(mparse(&o, "--fused gemm_alltoall --grid", err, sizeof err, NULL, 0) == 0 && o.grid &&
     same_list(o.T, o.nT, gT, 4) && same_list(o.H, o.nH, gH, 2) && same_list(o.F, o.nF, gF, 4),
     "--grid: T 1024..8192 x H 4096,8192 x F 1024,2048,4096,14336 (32 shapes)");
  static const int64_t one[] = {2048}, two[] = {1024, 4096};
  ok(mparse(&o, "--fused gemm_alltoall --tokens 2048 --grid --in_cols 1024,4096", err, sizeof err, NULL, 0) == 0 &&
     same_list(o.T, o.nT, one, 1) && same_list(o.H, o.nH, gH, 2) && same_list(o.F, o.nF, two, 2),
     "--grid fills only the lists not given, before or after it");
  ok(mparse(&o, "--fused gemm_alltoall -g 8 --grid", err, sizeof err, NULL, 0) == 0,
     "the grid's tokens are multiples of 8 ranks");
  int rc = mparse(&o, "--fused gemm_alltoall --help", err, sizeof err, out, sizeof out);
  ok(rc == 1, "--help returns 1 (usage printed, nothing run)");
  ok_contains(out, "usage: baton bench --fused gemm_alltoall [options]", "usage: its first line");
  ok_contains(out, "--share G", "usage: --share");
  ok_contains(out, "--grid", "usage: --grid");
  ok_contains(out, "own+a2a", "usage: the own+a2a part");
  ok_contains(out, "moe_combine.lua", "usage: where the programs come from");
  ok_contains(out, "--fill F", "usage: --fill");
  ok_contains(out, "multiply and move\n                        the padded X whole", "usage: what --fill leaves padded");
  ok_contains(out, "Columns: tokens = the share of X's rows that are tokens", "usage: the tokens column");
  ok_contains(out, "overlap = (baseline - baton) /\nmin(gemm, alltoall)", "usage: the overlap column");
  ok(mparse(&o, "-h --fused gemm_alltoall", err, sizeof err, out, sizeof out) == 1, "-h too");

  static const struct { const char *args, *msg; } bad[] = {
    {"--fused gemm_alltoall2", "baton bench: --fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the "
                               "fused operator measured), not 'gemm_alltoall2'"},
    {"-g 2", "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall"},
    {"--fused embedding_alltoall", "not 'embedding_alltoall'"},
    {"--fused gemm_alltoall --tokens", "baton bench: --tokens needs a value"},
    {"--fused gemm_alltoall -d f32", "baton bench: --fused gemm_alltoall takes -d bf16 only (the GEMM tile engine's "
                                     "type), not 'f32'"},
    {"--fused gemm_alltoall -d f16", "takes -d bf16 only (the GEMM tile engine's type), not 'f16'"},
    {"--fused gemm_alltoall --datatype=i32", "takes -d bf16 only (the GEMM tile engine's type), not 'i32'"},
    {"--fused gemm_alltoall --tokens 0", "baton bench: bad value '0' for --tokens"},
    {"--fused gemm_alltoall --tokens 4096,", "bad value '4096,' for --tokens"},
    {"--fused gemm_alltoall --tokens 1Q", "bad value '1Q' for --tokens"},
    {"--fused gemm_alltoall --tokens 1G", "bad value '1G' for --tokens"},
    {"--fused gemm_alltoall --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "--tokens takes at most 16 values, got 17"},
    {"--fused gemm_alltoall --out_cols x", "bad value 'x' for --out_cols"},
    {"--fused gemm_alltoall --in_cols -64", "bad value '-64' for --in_cols"},
    {"--fused gemm_alltoall --in_cols 64,,128", "bad value '64,,128' for --in_cols"},
    {"--fused gemm_alltoall -g 0", "bad value '0' for -g"},
    {"--fused gemm_alltoall -g 65", "bad value '65' for -g"},
    {"--fused gemm_alltoall --share 0", "bad value '0' for --share"},
    {"--fused gemm_alltoall -n 0", "bad value '0' for -n"},
    {"--fused gemm_alltoall -w -1", "bad value '-1' for -w"},
    {"--fused gemm_alltoall -G x", "bad value 'x' for -G"},
    {"--fused gemm_alltoall --rounds 65", "bad value '65' for --rounds"},
    {"--fused gemm_alltoall -c 2", "bad value '2' for -c"},
    {"--fused gemm_alltoall --rows 8192", "baton bench: unknown option '--rows' for --fused gemm_alltoall (baton bench "
                                      "--fused gemm_alltoall --help lists them)"},
    {"--fused gemm_alltoall --batch 8", "unknown option '--batch' for --fused gemm_alltoall"},
    {"--fused gemm_alltoall -T 4096", "unknown option '-T' for --fused gemm_alltoall"},
    {"--fused gemm_alltoall --share 2", "baton bench: --share 2 needs -g N with N >= 2"},
    {"--fused gemm_alltoall -g 2 --share 4", "--share 4 needs -g N with N >= 4"},
    {"--fused gemm_alltoall -g 3", "baton bench: --tokens 4096 is not a multiple of the 3 ranks"},
    {"--fused gemm_alltoall -g 4 --tokens 4096,1026", "--tokens 1026 is not a multiple of the 4 ranks"},
    {"--fused gemm_alltoall -g 3 --grid", "--tokens 1024 is not a multiple of the 3 ranks"},
    {"--fused gemm_alltoall --out_cols 100", "baton bench: --out_cols 100 is not a multiple of 64 (the GPU GEMM tile engine takes "
                                     "only those)"},
    {"--fused gemm_alltoall --out_cols 8192,4160,4100", "--out_cols 4100 is not a multiple of 64"},
    {"--fused gemm_alltoall --in_cols 1000", "baton bench: --in_cols 1000 is not a multiple of 64"},
    {"--fused gemm_alltoall --fill 0", "baton bench: --fill 0 is outside (0, 1] (the share of each block's rows "
                                       "that are tokens on average)"},
    {"--fused gemm_alltoall --fill 1.5", "--fill 1.5 is outside (0, 1]"},
    {"--fused gemm_alltoall --fill -0.5", "--fill -0.5 is outside (0, 1]"},
    {"--fused gemm_alltoall --fill=-0", "--fill -0 is outside (0, 1]"},
    {"--fused gemm_alltoall --fill half", "baton bench: --fill takes a number, the share of each block's rows that "
                                          "are tokens on average, in (0, 1], not 'half'"},
    {"--fused gemm_alltoall --fill 0.5x", "--fill takes a number, the share of each block's rows that are tokens on "
                                          "average, in (0, 1], not '0.5x'"},
    {"--fused gemm_alltoall --fill=", "--fill takes a number"},
    {"--fused gemm_alltoall --fill nan", "--fill takes a number"},
    {"--fused gemm_alltoall --fill inf", "--fill takes a number"},
    {"--fused gemm_alltoall --fill", "baton bench: --fill needs a value"},
    {"--fused gemm_alltoall --csv=", "baton bench: --csv and --json need a file name"},
    {"--fused gemm_alltoall --json=", "--csv and --json need a file name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rc = mparse(&o, bad[i].args, err, sizeof err, NULL, 0);
    ok(rc == 2 && strstr(err, bad[i].msg), "'%s' is refused: %s", bad[i].args, err);
  }
  ok(mparse(&o, "--fused gemm_alltoall -g 3 --tokens 3072 --share 3", err, sizeof err, NULL, 0) == 0,
     "tokens that are a multiple of the ranks are taken, and --share G with G = N");
}

static bench_moe_row rows[3];

static void make_rows(void) {
  memset(rows, 0, sizeof rows);
  rows[0] = (bench_moe_row){.T = 4096, .H = 8192, .F = 4096, .gemm_us = 500, .a2a_us = 200, .base_us = 700,
                            .own_us = 550, .own_a2a_us = 750, .baton_us = 600, .wrong_base = 0, .wrong_own = 0,
                            .wrong_baton = 0, .checked = 8192, .tokens = 1};
  snprintf(rows[0].algorithm, sizeof rows[0].algorithm, "moe_combine");
  rows[1] = (bench_moe_row){.T = 1024, .H = 4096, .F = 14336, .gemm_us = 300, .a2a_us = -1, .base_us = -1,
                            .own_us = 320, .own_a2a_us = -1, .baton_us = -1, .wrong_base = 0, .wrong_own = 0,
                            .wrong_baton = -1, .checked = 2048, .tokens = 0.5};
  snprintf(rows[1].error, sizeof rows[1].error, "baton: unsupported");
  rows[2] = (bench_moe_row){.T = 2048, .H = 4096, .F = 1024, .gemm_us = 40, .a2a_us = 60, .base_us = 100,
                            .own_us = 50, .own_a2a_us = 110, .baton_us = 70, .wrong_base = 3, .wrong_own = 0,
                            .wrong_baton = 0, .checked = 9, .tokens = 0.4297};
  snprintf(rows[2].algorithm, sizeof rows[2].algorithm, "moe_combine_c2");
}

static void test_derived(void) {
  make_rows();
  ok(fabs(bench_moe_speedup(&rows[0]) - 700.0 / 600) < 1e-12 && fabs(bench_moe_vs_own_a2a(&rows[0]) - 1.25) < 1e-12 &&
     fabs(bench_moe_overlap(&rows[0]) - 0.5) < 1e-12 && fabs(bench_moe_own_vs_cublas(&rows[0]) - 500.0 / 550) < 1e-12,
     "speedup 700/600, vs own 750/600, overlap (700-600)/min(500, 200), own/cuBLAS 500/550");
  ok(fabs(bench_moe_overlap(&rows[2]) - 30.0 / 40) < 1e-12, "overlap over the GEMM when it is the shorter part");
  ok(fabs(bench_moe_tflops(&rows[0], 500) - 2.0 * 4096 * 8192 * 4096 / 5e8) < 1e-9 &&
     fabs(bench_moe_tflops(&rows[1], 300) - 2.0 * 1024 * 4096 * 14336 / 3e8) < 1e-9,
     "TFLOP/s: 2*T*H*F over the time");
  ok(bench_moe_speedup(&rows[1]) == -1 && bench_moe_vs_own_a2a(&rows[1]) == -1 && bench_moe_overlap(&rows[1]) == -1 &&
     bench_moe_tflops(&rows[1], -1) == -1 && fabs(bench_moe_own_vs_cublas(&rows[1]) - 300.0 / 320) < 1e-12,
     "missing times give -1 for speedup, vs own, overlap and rate; own/cuBLAS needs only the GEMMs");
  bench_moe_row r = rows[0];
  r.a2a_us = -1;
  ok(bench_moe_overlap(&r) == -1 && bench_moe_speedup(&r) > 0, "no overlap without the AllToAll's time");
  r = rows[0];
  r.own_us = -1;
  ok(bench_moe_own_vs_cublas(&r) == -1 && bench_moe_vs_own_a2a(&r) > 0, "no own/cuBLAS without the own GEMM's time");
  r = rows[0];
  r.gemm_us = 0;
  ok(bench_moe_overlap(&r) == -1 && bench_moe_own_vs_cublas(&r) == -1 && bench_moe_tflops(&r, 0) == -1,
     "a zero time counts as missing");
}

static void test_output(void) {
  make_rows();
  bench_moe_table t = {.info = {.nranks = 4, .iters = 20, .warmup = 5, .graph = 10, .rounds = 3}};
  snprintf(t.info.nccl, sizeof t.info.nccl, "NCCL 2.28.9 (libnccl.so.2), all-to-all by ncclAlltoAll");
  snprintf(t.info.cublas, sizeof t.info.cublas, "cuBLAS 13.0.2 (libcublas.so.13), cublasGemmEx");
  snprintf(t.info.device, sizeof t.info.device, "NVIDIA H200");
  t.rows = rows;
  t.nrows = 2;
  static char text[16384];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_moe_print_header(f, &t);
  for (int i = 0; i < t.nrows; i++) bench_moe_print_row(f, &t, &rows[i]);
  int st = bench_moe_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "# baton bench --fused gemm_alltoall: 4 ranks on one GPU each, bf16, 20 iterations after 5 "
              "warmup, in a CUDA graph, median of 3 rounds\n# device: NVIDIA H200\n", "text: the header's first lines");
  ok_contains(text, "# gemm: cuBLAS 13.0.2 (libcublas.so.13), cublasGemmEx, Y [T, H] = X [T, F] W [F, H] per rank, "
              "f32 accumulation\n", "text: the GEMM named");
  ok_contains(text, "# own gemm: baton_gemm_alltoall on a one-rank communicator per rank (the GEMM opcode alone)\n",
              "text: the own GEMM said");
  ok_contains(text, "# alltoall: NCCL 2.28.9 (libnccl.so.2), all-to-all by ncclAlltoAll, of Y (T/n*H elements to "
              "each peer)\n", "text: the AllToAll named");
  ok_contains(text, "# baseline: gemm, then alltoall, on one stream per rank\n", "text: the baseline said");
  ok_contains(text, "# own+a2a: own gemm, then alltoall, on one stream per rank\n", "text: own+a2a said");
  ok_contains(text, "# baton: baton_gemm_alltoall on the 4-rank communicator\n", "text: baton said");
  ok(!strstr(text, "# uneven"), "text: no uneven line without --fill");
  ok_contains(text, "#     T     H     F tokens       gemm TFLOP/s   alltoall   baseline   own gemm TFLOP/s    own+a2a"
              "      baton TFLOP/s  speedup  vs own overlap own/cuBLAS   wrong  wrong  wrong  baton algorithm\n",
              "text: the column names");
  ok_contains(text, "base/b own+a/b           gemm/own    base    own  baton\n", "text: the columns' second line");
  ok_contains(text, "   4096  8192  4096  1.000     500.00   549.8     200.00     700.00     550.00   499.8     750.00"
              "     600.00   458.1     1.17    1.25    0.50      0.909       0      0      0  moe_combine\n",
              "text: the first shape's times, rates and ratios");
  ok_contains(text, "# T=1024 H=4096 F=14336: baton: unsupported\n", "text: the failed shape named");
  ok_contains(text, "   1024  4096 14336  0.500     300.00   400.9          -          -     320.00   375.8          -"
              "          -       -        -       -       -      0.938       0      0     -1  -\n",
              "text: missing times are dashes");
  ok_contains(text, "# average baseline time / baton time over 1 shapes: 1.167\n", "text: the average speedup");
  ok_contains(text, "# average cuBLAS GEMM time / own GEMM time over 2 shapes: 0.923\n",
              "text: the average own/cuBLAS");
  ok_contains(text, "# FAILED: a shape failed or had wrong elements", "text: the failure said");
  ok(st == 1, "a failed shape makes the exit status 1");

  bench_moe_table s = {.info = {.nranks = 8, .share = 1, .iters = 20, .warmup = 5, .rounds = 1}};
  bench_moe_row one = rows[0];
  one.a2a_us = one.base_us = one.own_a2a_us = -1;
  s.rows = &one;
  s.nrows = 1;
  f = fmemopen(text, sizeof text, "w");
  bench_moe_print_header(f, &s);
  bench_moe_print_row(f, &s, &one);
  st = bench_moe_print_footer(f, &s);
  fclose(f);
  ok_contains(text, "8 ranks on shared GPUs, bf16, 20 iterations after 5 warmup, median of 1 round\n",
              "share: the header");
  ok_contains(text, "# gemm: NOT USED", "share: no cuBLAS named: not used");
  ok_contains(text, "(the GEMM opcode alone), one GPU's ranks in turn on one stream\n", "share: the own GEMM in turn");
  ok_contains(text, "# alltoall, baseline, own+a2a: NOT MEASURED: the ranks share 1 GPU, where NCCL cannot run",
              "share: the baseline not measured, and why");
  ok_contains(text, "# average cuBLAS GEMM time / baton time over 1 shapes: 0.833\n"
              "# average cuBLAS GEMM time / own GEMM time over 1 shapes: 0.909\n# all shapes checked and right\n",
              "share: the averages against the GEMM alone, all right");
  ok(st == 0, "all right: exit status 0");
  s.info.share = 0;
  f = fmemopen(text, sizeof text, "w");
  bench_moe_print_header(f, &s);
  fclose(f);
  ok_contains(text, "# alltoall, baseline, own+a2a: NOT MEASURED (no NCCL): gemm, own gemm and baton only",
              "no NCCL: the baseline not measured, and why");
  one.wrong_own = 2;
  f = fmemopen(text, sizeof text, "w");
  st = bench_moe_print_footer(f, &s);
  fclose(f);
  ok(st == 1 && strstr(text, "FAILED"), "wrong elements of the own GEMM fail the run");
  s.fill = 0.5;
  one.tokens = 0.4297;
  f = fmemopen(text, sizeof text, "w");
  bench_moe_print_header(f, &s);
  bench_moe_print_row(f, &s, &one);
  fclose(f);
  ok_contains(text, "# baton: baton_gemm_alltoall on the 8-rank communicator\n# uneven: --fill 0.5: block q of a "
              "rank's X holds counts[q] tokens, drawn per rank uniformly in [0.25, 0.75] * T/n and capped at T/n, the "
              "rest padding; baton skips the padding, gemm, alltoall and own gemm take the padded X whole; only "
              "token rows checked\n#     T     H     F tokens", "--fill: the uneven line, before the column names");
  ok_contains(text, "\n   4096  8192  4096  0.430     500.00", "--fill: the share of rows that are tokens");

  rows[1].wrong_baton = 0;
  t.nrows = 3;
  t.fill = 0.25;
  char dir[] = "/tmp/test_bench_moe_XXXXXX", csv[300], json[300], cmd[2000];
  if (!mkdtemp(dir)) { ok(0, "mkdtemp"); return; }
  snprintf(csv, sizeof csv, "%s/m.csv", dir);
  snprintf(json, sizeof json, "%s/m.json", dir);
  ok(bench_moe_write_csv(csv, &t) == 0 && bench_moe_write_json(json, &t) == 0, "CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok_contains(c, "fused,dtype,ranks,share,fill,T,H,F,tokens,gemm_us,alltoall_us,baseline_us,own_gemm_us,own_a2a_us,"
                 "baton_us,gemm_tflops,own_gemm_tflops,baton_tflops,speedup,vs_own_a2a,overlap,own_vs_cublas,"
                 "wrong_baseline,wrong_own,wrong_baton,checked,algorithm\n", "CSV: the header");
  ok_contains(c, "\ngemm_alltoall,bf16,4,0,0.25,4096,8192,4096,1.0000,500.000,200.000,700.000,550.000,750.000,"
                 "600.000,549.76,499.78,458.13,1.1667,1.2500,0.5000,0.9091,0,0,0,8192,moe_combine\n",
              "CSV: the first shape");
  ok_contains(c, "\ngemm_alltoall,bf16,4,0,0.25,1024,4096,14336,0.5000,300.000,-1.000,-1.000,320.000,-1.000,"
                 "-1.000,400.86,375.81,-1.00,-1.0000,-1.0000,-1.0000,0.9375,0,0,0,2048,-\n",
              "CSV: a failed shape, -1 for what is missing");
  ok_contains(c, ",3,0,0,9,moe_combine_c2\n", "CSV: wrong elements of the baseline");
  ok_contains(c, ",2048,4096,1024,0.4297,40.000,", "CSV: the fill and the share of rows that are tokens");
  /* every CSV line has the header's 27 fields */
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import csv,sys; r=list(csv.reader(open(sys.argv[1]))); "
           "sys.exit(0 if len(r)==4 and all(len(x)==27 for x in r) and r[3][5]==\"2048\" and r[3][8]==\"0.4297\" "
           "and r[3][21]==\"0.8000\" and r[0][4]==\"fill\" and r[0][8]==\"tokens\" else 1)' %s", csv);
  ok(system(cmd) == 0, "CSV parses: 3 rows of 27 fields");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"fused\"]==\"gemm_alltoall\" and d[\"dtype\"]==\"bf16\" and d[\"ranks\"]==4 and "
           "d[\"share\"]==0 and d[\"iters\"]==20 and d[\"warmup\"]==5 and d[\"graph\"]==10 and d[\"rounds\"]==3 and "
           "d[\"alltoall\"].startswith(\"NCCL 2.28.9\") and d[\"gemm\"].startswith(\"cuBLAS 13.0.2\") and "
           "d[\"device\"]==\"NVIDIA H200\" and len(r)==3 and r[0][\"T\"]==4096 and r[0][\"H\"]==8192 and "
           "r[0][\"F\"]==4096 and r[0][\"speedup\"]==1.1667 and r[0][\"vs_own_a2a\"]==1.25 and "
           "r[0][\"overlap\"]==0.5 and r[0][\"own_vs_cublas\"]==0.9091 and r[0][\"gemm_tflops\"]==549.76 and "
           "r[0][\"own_a2a_us\"]==750 and r[0][\"algorithm\"]==\"moe_combine\" and r[0][\"error\"]==\"\" and "
           "r[1][\"error\"]==\"baton: unsupported\" and r[1][\"baton_us\"]==-1 and r[1][\"speedup\"]==-1 and "
           "r[2][\"wrong_baseline\"]==3 and r[2][\"wrong_own\"]==0 and r[2][\"checked\"]==9 and "
           "d[\"fill\"]==0.25 and r[0][\"tokens\"]==1 and r[2][\"tokens\"]==0.4297 else 1)' %s", json);
  ok(system(cmd) == 0, "JSON parses and holds the table, the fill and the share of rows that are tokens");
  t.fill = 0;
  snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
           "sys.exit(0 if d[\"fill\"] is None and d[\"rows\"][1][\"tokens\"]==0.5 else 1)' %s", json);
  ok(bench_moe_write_json(json, &t) == 0 && system(cmd) == 0, "JSON without --fill: fill null");
  ok(bench_moe_write_csv("/nonexistent/dir/m.csv", &t) == -1 &&
     bench_moe_write_json("/nonexistent/dir/m.json", &t) == -1, "an unwritable path is an error");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) printf("# could not remove %s\n", dir);
}

/* baton bench ARGS through the baton program: its exit status, its output
 * (stdout and stderr) in out. */
static int run_baton(const char *baton, const char *args, char *out, size_t len) {
  char path[] = "/tmp/test_bench_moe_out_XXXXXX", cmd[1200];
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  snprintf(cmd, sizeof cmd, "'%s' bench %s > %s 2>&1", baton, args, path);
  int st = system(cmd);
  char *s = bench_test_slurp(path);
  snprintf(out, len, "%s", s ? s : "");
  unlink(path);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(const char *baton) {
  static char out[1 << 16];
  int rc = run_baton(baton, "--fused gemm_alltoall --help", out, sizeof out);
  ok(rc == 0, "baton bench --fused gemm_alltoall --help exits 0");
  ok_contains(out, "usage: baton bench --fused gemm_alltoall [options]", "and prints the usage");
  rc = run_baton(baton, "--fused=embedding_alltoall --help", out, sizeof out);
  ok(rc == 0 && strstr(out, "usage: baton bench --fused embedding_alltoall"), "the embedding mode's --help still");
  rc = run_baton(baton, "--fused gemv_allreduce --help", out, sizeof out);
  ok(rc == 0 && strstr(out, "usage: baton bench --fused gemv_allreduce"), "the GEMV mode's --help still");
  rc = run_baton(baton, "--fused gemm -g 2", out, sizeof out);
  ok(rc == 2, "baton bench --fused gemm exits 2");
  ok_contains(out, "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused operator measured), "
              "not 'gemm'", "and lists the three operators");
  rc = run_baton(baton, "--fused gemm_alltoall -d f32", out, sizeof out);
  ok(rc == 2, "-d f32 exits 2 before any GPU is touched");
  ok_contains(out, "baton bench: --fused gemm_alltoall takes -d bf16 only (the GEMM tile engine's type), not 'f32'",
              "and says bf16 only");
  rc = run_baton(baton, "--fused gemm_alltoall --out_cols 100", out, sizeof out);
  ok(rc == 2, "--out_cols 100 exits 2");
  ok_contains(out, "baton bench: --out_cols 100 is not a multiple of 64", "and names the value");
  rc = run_baton(baton, "--fused gemm_alltoall -g 3 --tokens 4096", out, sizeof out);
  ok(rc == 2, "--tokens 4096 with -g 3 exits 2");
  ok_contains(out, "baton bench: --tokens 4096 is not a multiple of the 3 ranks", "and names the value and the ranks");
  rc = run_baton(baton, "--fused gemm_alltoall --fill 1.5", out, sizeof out);
  ok(rc == 2, "--fill 1.5 exits 2 before any GPU is touched");
  ok_contains(out, "baton bench: --fill 1.5 is outside (0, 1]", "and names the value");
  rc = run_baton(baton, "--fused gemm_alltoall --fill half", out, sizeof out);
  ok(rc == 2, "--fill half exits 2");
  ok_contains(out, "baton bench: --fill takes a number, the share of each block's rows that are tokens on average, "
              "in (0, 1], not 'half'", "and says a number is needed");
  rc = run_baton(baton, "--fused gemm_alltoall -Q 1", out, sizeof out);
  ok(rc == 2 && strstr(out, "unknown option '-Q' for --fused gemm_alltoall"), "an unknown option exits 2");
}

/* The fused benches' pattern: the same values on every call (each process
 * of a -P run makes its own and checks against every rank's operands),
 * within [-1, 1), of the asked type. */
static void test_pattern(void) {
  float *a = bench_pattern(IP_F32, 4099), *b = bench_pattern(IP_F32, 4099);
  uint16_t *h = bench_pattern(IP_BF16, 4099);
  int same = a && b && h && !memcmp(a, b, 4099 * sizeof *a), in = same, spread = 0;
  for (int i = 0; in && i < 4099; i++) {
    in = a[i] >= -1 && a[i] < 1 && fabs(ip_get(IP_BF16, h, (size_t)i) - a[i]) <= fabs(a[i]) / 128 + 1e-30;
    spread += a[i] < 0;
  }
  ok(same && in && spread > 1800 && spread < 2300,
     "bench_pattern: the same values each call, in [-1, 1), bf16 the same draws (%d of 4099 negative)", spread);
  free(a);
  free(b);
  free(h);
}

int main(int argc, char **argv) {
  test_operator();
  test_procs();
  test_options();
  test_derived();
  test_output();
  test_pattern();
  if (argc > 1) test_cli(argv[1]);
  else ok(1, "# SKIP no baton program given");
  return tap_done();
}
