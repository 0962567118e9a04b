/* test_bench_embed.c -- `baton bench --fused embedding_alltoall` without a
 * GPU: the operator dispatch, every option and error message, the default
 * rows, the derived columns of known rows, the text, CSV and JSON outputs;
 * then, given the baton program, its --help and refusals end to end.
 * Usage: test_bench_embed [BATON] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_embed.h"
#include "bench_test.h"
#include "tap.h"

/* bench_embed_parse of "bench LINE": its return; err gets stderr (its
 * first line), out stdout. */
static int eparse(bench_embed_opts *o, const char *line, char *err, size_t errlen, char *out, size_t outlen) {
  char *argv[64];
  int argc = bench_test_split(line, argv);
  bench_test_io io;
  bench_test_open(&io, err, errlen, out, outlen);
  int rc = bench_embed_parse(o, argc, argv, io.out, io.err);
  bench_test_close(&io, 1);
  return rc;
}

static void test_operator(void) {
  char err[400];
  ok(bench_test_operator("--fused embedding_alltoall -g 2", err, sizeof err) == BENCH_FUSED_EMBEDDING_ALLTOALL &&
     bench_test_operator("-g 2 --fused=embedding_alltoall", err, sizeof err) == BENCH_FUSED_EMBEDDING_ALLTOALL,
     "--fused embedding_alltoall and --fused=embedding_alltoall name the embedding operator");
  ok(bench_test_operator("--fused gemv_allreduce --rows 8192", err, sizeof err) == BENCH_FUSED_GEMV_ALLREDUCE,
     "--fused gemv_allreduce still names the GEMV operator");
  ok(bench_test_operator("--fused embedding -g 2", err, sizeof err) == 0, "an unknown fused operator is refused");
  ok_contains(err, "baton bench: --fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused "
              "operator measured), not 'embedding'", "the refusal lists the three operators");
  ok(bench_test_operator("-g 2 --fused", err, sizeof err) == 0, "--fused without an operator is refused");
  ok_contains(err, "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall", "and says which it takes");
}

static void test_options(void) {
  bench_embed_opts o;
  char err[400], out[8192];
  ok(eparse(&o, "--fused embedding_alltoall", err, sizeof err, NULL, 0) == 0 && o.dtype == IP_F32 && o.nB == 1 &&
     o.B[0] == 2048 && o.nT == 2 && o.T[0] == 16 && o.T[1] == 64 && o.nD == 2 && o.D[0] == 64 && o.D[1] == 128 &&
     o.nbag == 1 && o.bag[0] == 50 && o.nrows == 0 && o.nskew == 1 && o.skew[0] == 0 && !o.mean && !o.weighted &&
     o.c.ngpus == 0 && o.c.share == 0 && o.c.warmup == 5 && o.c.iters == 20 && o.c.graph == 0 && o.c.rounds == 3 &&
     o.c.check == 1 && !o.c.no_nccl && !o.c.csv && !o.c.json,
     "defaults: f32, sum, B 2048, T 16,64, D 64,128, bag 50, rows by size, uniform; -w 5 -n 20 -G 0 --rounds 3 -c 1");
  ok(eparse(&o, "--fused embedding_alltoall -g 4 --share 2 -d bf16 --batch 1K,4096 --tables 16,64,256 --dim 64 --bag 30,70 "
             "--rows 1000,2K --skew uniform,zipf --mode mean -w 2 -n 7 -G 3 --rounds 5 -c 0 --csv a.csv --json b.json "
             "--no-nccl", err, sizeof err, NULL, 0) == 0 &&
     o.c.ngpus == 4 && o.c.share == 2 && o.dtype == IP_BF16 && o.nB == 2 && o.B[0] == 1024 && o.B[1] == 4096 &&
     o.nT == 3 && o.T[2] == 256 && o.nD == 1 && o.D[0] == 64 && o.nbag == 2 && o.bag[1] == 70 && o.nrows == 2 &&
     o.rows[0] == 1000 && o.rows[1] == 2048 && o.nskew == 2 && o.skew[0] == 0 && o.skew[1] == 1 && o.mean &&
     o.c.warmup == 2 && o.c.iters == 7 && o.c.graph == 3 && o.c.rounds == 5 && o.c.check == 0 &&
     !strcmp(o.c.csv, "a.csv") && !strcmp(o.c.json, "b.json") && o.c.no_nccl,
     "every option in its short form");
  ok(eparse(&o, "--fused=embedding_alltoall --ngpus=8 --datatype=half --warmup_iters 1 --iters 9 --cudagraph 2 "
             "--rounds 1 --check 1 --mode=sum --weighted --skew 1,0 -d float", err, sizeof err, NULL, 0) == 0 &&
     o.c.ngpus == 8 && o.dtype == IP_F32 && o.c.warmup == 1 && o.c.iters == 9 && o.c.graph == 2 && o.c.rounds == 1 &&
     !o.mean && o.weighted && o.nskew == 2 && o.skew[0] == 1 && o.skew[1] == 0,
     "long forms, --opt=value, --weighted, --skew 1,0, type aliases (the last -d wins)");
  ok(eparse(&o, "--fused embedding_alltoall -d half", err, sizeof err, NULL, 0) == 0 && o.dtype == IP_F16 &&
     eparse(&o, "--fused embedding_alltoall -d bfloat16", err, sizeof err, NULL, 0) == 0 && o.dtype == IP_BF16,
     "half and bfloat16 are f16 and bf16");
  int rc = eparse(&o, "--fused embedding_alltoall --help", err, sizeof err, out, sizeof out);
  ok(rc == 1, "--help returns 1 (usage printed, nothing run)");
  ok_contains(out, "usage: baton bench --fused embedding_alltoall [options]", "usage: its first line");
  ok_contains(out, "--share G", "usage: --share");
  ok_contains(out, "--skew LIST", "usage: --skew");
  ok_contains(out, "overlap = (baseline - baton) /\nmin(pooling, alltoall + shuffle)", "usage: the overlap column");
  ok(eparse(&o, "-h --fused embedding_alltoall", err, sizeof err, out, sizeof out) == 1, "-h too");

  static const struct { const char *args, *msg; } bad[] = {
    {"--fused gemv_allreduce2", "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused "
                                "operator measured), not 'gemv_allreduce2'"},
    {"-g 2", "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall"},
    {"--fused embedding_alltoall --batch", "baton bench: --batch needs a value"},
    {"--fused embedding_alltoall -d i32", "baton bench: bad value 'i32' for -d"},
    {"--fused embedding_alltoall -d f64", "bad value 'f64' for -d"},
    {"--fused embedding_alltoall --batch 0", "bad value '0' for --batch"},
    {"--fused embedding_alltoall --batch 2048,", "bad value '2048,' for --batch"},
    {"--fused embedding_alltoall --batch 1Q", "bad value '1Q' for --batch"},
    {"--fused embedding_alltoall --batch 4G", "bad value '4G' for --batch"},
    {"--fused embedding_alltoall --batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "--batch takes at most 16 values, got 17"},
    {"--fused embedding_alltoall --tables x", "bad value 'x' for --tables"},
    {"--fused embedding_alltoall --dim -64", "bad value '-64' for --dim"},
    {"--fused embedding_alltoall --bag 0", "bad value '0' for --bag"},
    {"--fused embedding_alltoall --rows 3,,4", "bad value '3,,4' for --rows"},
    {"--fused embedding_alltoall --skew normal", "bad value 'normal' for --skew"},
    {"--fused embedding_alltoall --skew zipf,", "bad value 'zipf,' for --skew"},
    {"--fused embedding_alltoall --mode max", "bad value 'max' for --mode"},
    {"--fused embedding_alltoall -g 0", "bad value '0' for -g"},
    {"--fused embedding_alltoall -g 65", "bad value '65' for -g"},
    {"--fused embedding_alltoall --share 0", "bad value '0' for --share"},
    {"--fused embedding_alltoall -n 0", "bad value '0' for -n"},
    {"--fused embedding_alltoall -w -1", "bad value '-1' for -w"},
    {"--fused embedding_alltoall -G x", "bad value 'x' for -G"},
    {"--fused embedding_alltoall --rounds 65", "bad value '65' for --rounds"},
    {"--fused embedding_alltoall -c 2", "bad value '2' for -c"},
    {"--fused embedding_alltoall --cols 8192", "baton bench: unknown option '--cols' for --fused embedding_alltoall "
                                           "(baton bench --fused embedding_alltoall --help lists them)"},
    {"--fused embedding_alltoall -B 2048", "unknown option '-B' for --fused embedding_alltoall"},
    {"--fused embedding_alltoall -b 8", "unknown option '-b' for --fused embedding_alltoall"},
    {"--fused embedding_alltoall --share 2", "baton bench: --share 2 needs -g N with N >= 2"},
    {"--fused embedding_alltoall -g 2 --share 4", "--share 4 needs -g N with N >= 4"},
    {"--fused embedding_alltoall --weighted --mode mean", "baton bench: --weighted pools by sum (as PyTorch's "
                                                          "embedding_bag): not with --mode mean"},
    {"--fused embedding_alltoall -g 3", "baton bench: --batch 2048 is not a multiple of the 3 ranks"},
    {"--fused embedding_alltoall -g 4 --batch 4096,1026", "--batch 1026 is not a multiple of the 4 ranks"},
    {"--fused embedding_alltoall --csv=", "baton bench: --csv and --json need a file name"},
    {"--fused embedding_alltoall --json=", "--csv and --json need a file name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rc = eparse(&o, bad[i].args, err, sizeof err, NULL, 0);
    ok(rc == 2 && strstr(err, bad[i].msg), "'%s' is refused: %s", bad[i].args, err);
  }
  ok(eparse(&o, "--fused embedding_alltoall -g 3 --batch 3072 --share 3", err, sizeof err, NULL, 0) == 0,
     "a batch that is a multiple of the ranks is taken, and --share G with G = N");
}

static void test_rows(void) {
  ok(bench_embed_default_rows(16, 64, 4) == 100000 && bench_embed_default_rows(256, 256, 4) == 8192 &&
     bench_embed_default_rows(256, 256, 2) == 16384 && bench_embed_default_rows(64, 128, 4) == 65536 &&
     bench_embed_default_rows(INT64_C(1) << 20, INT64_C(1) << 20, 4) == 1,
     "default rows: min(100000, 2 GiB / (T * D * element size)), at least 1");
}

static bench_embed_row rows[3];

static void make_rows(void) {
  memset(rows, 0, sizeof rows);
  rows[0] = (bench_embed_row){.B = 2048, .T = 16, .D = 64, .bag = 50, .rows = 100000, .lookups = 1000000,
                              .pool_us = 100, .a2a_us = 40, .shuf_us = 10, .base_us = 160, .baton_us = 120,
                              .wrong_base = 0, .wrong_baton = 0, .checked = 262144};
  snprintf(rows[0].algorithm, sizeof rows[0].algorithm, "embedding_alltoall_sum");
  rows[1] = (bench_embed_row){.B = 4096, .T = 64, .D = 128, .bag = 50, .rows = 65536, .skew = 1, .lookups = 13107200,
                              .pool_us = 300, .a2a_us = -1, .shuf_us = 12, .base_us = -1, .baton_us = -1,
                              .wrong_base = 0, .wrong_baton = -1, .checked = 1048576};
  snprintf(rows[1].error, sizeof rows[1].error, "baton: unsupported");
  rows[2] = (bench_embed_row){.B = 2048, .T = 64, .D = 64, .bag = 30, .rows = 1000, .lookups = 4000000,
                              .pool_us = 200, .a2a_us = 50, .shuf_us = 20, .base_us = 260, .baton_us = 250,
                              .wrong_base = 3, .wrong_baton = 0, .checked = 9};
}

static void test_derived(void) {
  make_rows();
  ok(fabs(bench_embed_speedup(&rows[0]) - 160.0 / 120) < 1e-12 && fabs(bench_embed_overlap(&rows[0]) - 0.8) < 1e-12 &&
     fabs(bench_embed_vs_pool(&rows[0]) - 100.0 / 120) < 1e-12,
     "speedup 160/120, overlap (160-120)/min(100, 40+10), pooling/baton 100/120");
  ok(fabs(bench_embed_overlap(&rows[2]) - 10.0 / 70) < 1e-12, "overlap over the pooling when it is the shorter part");
  ok(fabs(bench_embed_tbps(&rows[0], IP_F32, 100) - 1e6 * 64 * 4 / 1e8) < 1e-12 &&
     fabs(bench_embed_tbps(&rows[0], IP_BF16, 100) - 1e6 * 64 * 2 / 1e8) < 1e-12,
     "TB/s: a rank's lookups x D x element size over the time");
  ok(bench_embed_speedup(&rows[1]) < 0 && bench_embed_overlap(&rows[1]) < 0 && bench_embed_vs_pool(&rows[1]) < 0 &&
     bench_embed_tbps(&rows[1], IP_F32, -1) < 0, "a missing time gives no speedup, overlap, ratio or rate");
  bench_embed_row r = rows[0];
  r.shuf_us = -1;
  ok(bench_embed_overlap(&r) < 0 && bench_embed_speedup(&r) > 0, "no overlap without the shuffle's time");
}

static void test_output(void) {
  make_rows();
  bench_embed_table t = {.dtype = IP_F32, .info = {.nranks = 4, .iters = 20, .warmup = 5, .graph = 10, .rounds = 3}};
  snprintf(t.info.nccl, sizeof t.info.nccl, "NCCL 2.28.9 (libnccl.so.2), all-to-all by ncclAlltoAll");
  snprintf(t.info.device, sizeof t.info.device, "NVIDIA H200");
  t.rows = rows;
  t.nrows = 2;
  static char text[16384];
  FILE *f = fmemopen(text, sizeof text, "w");
  bench_embed_print_header(f, &t);
  for (int i = 0; i < t.nrows; i++) bench_embed_print_row(f, &t, &rows[i]);
  int st = bench_embed_print_footer(f, &t);
  fclose(f);
  ok_contains(text, "# baton bench --fused embedding_alltoall: 4 ranks on one GPU each, f32, sum, 20 iterations after "
              "5 warmup, in a CUDA graph, median of 3 rounds\n# device: NVIDIA H200\n", "text: the header's first lines");
  ok_contains(text, "# alltoall: NCCL 2.28.9 (libnccl.so.2), all-to-all by ncclAlltoAll, of the pooled [B, T*D]",
              "text: the AllToAll named");
  ok_contains(text, "# baseline: pooling, then alltoall, then shuffle, on one stream per rank", "text: the baseline said");
  ok_contains(text, "   2048   16   64   50  100000 unif   1000000     100.00   2.56      40.00     10.00     160.00"
              "     120.00   2.13     1.33    0.80    0.83       0      0  embedding_alltoall_sum\n",
              "text: the first shape's times, rates and ratios");
  ok_contains(text, "# B=4096 T=64 D=128 bag=50 rows=65536 zipf: baton: unsupported\n", "text: the failed shape named");
  ok_contains(text, "   4096   64  128   50   65536 zipf  13107200     300.00  22.37          -     12.00          -"
              "          -      -        -       -       -       0     -1  -\n", "text: missing times are dashes");
  ok_contains(text, "# average baseline time / baton time over 1 shapes: 1.333\n", "text: the average speedup");
  ok_contains(text, "# FAILED: a shape failed or had wrong elements", "text: the failure said");
  ok(st == 1, "a failed shape makes the exit status 1");

  bench_embed_table s = {.dtype = IP_BF16, .mean = 1, .info = {.nranks = 8, .share = 1, .iters = 20, .warmup = 5, .rounds = 1}};
  bench_embed_row one = rows[0];
  one.a2a_us = one.shuf_us = one.base_us = -1;
  s.rows = &one;
  s.nrows = 1;
  f = fmemopen(text, sizeof text, "w");
  bench_embed_print_header(f, &s);
  bench_embed_print_row(f, &s, &one);
  st = bench_embed_print_footer(f, &s);
  fclose(f);
  ok_contains(text, "8 ranks on shared GPUs, bf16, mean, 20 iterations after 5 warmup, median of 1 round\n",
              "share: the header");
  ok_contains(text, "# alltoall, shuffle, baseline: NOT MEASURED: the ranks share 1 GPU, where NCCL cannot run",
              "share: the baseline not measured, and why");
  ok_contains(text, "# average pooling-alone time / baton time over 1 shapes: 0.833\n# all shapes checked and right\n",
              "share: the average over the pooling alone, all right");
  ok(st == 0, "all right: exit status 0");
  s.info.share = 0;
  s.weighted = 1;
  s.mean = 0;
  f = fmemopen(text, sizeof text, "w");
  bench_embed_print_header(f, &s);
  fclose(f);
  ok_contains(text, "weighted sum", "the weighted mode named");
  ok_contains(text, "NOT MEASURED (no NCCL)", "no NCCL: the baseline not measured, and why");

  rows[1].wrong_baton = 0;
  t.nrows = 3;
  char dir[] = "/tmp/test_bench_embed_XXXXXX", csv[300], json[300], cmd[1200];
  if (!mkdtemp(dir)) { ok(0, "mkdtemp"); return; }
  snprintf(csv, sizeof csv, "%s/e.csv", dir);
  snprintf(json, sizeof json, "%s/e.json", dir);
  ok(bench_embed_write_csv(csv, &t) == 0 && bench_embed_write_json(json, &t) == 0, "CSV and JSON written");
  char *c = bench_test_slurp(csv);
  ok_contains(c, "fused,dtype,mode,weighted,ranks,share,B,T,D,bag,rows,indices,lookups,pool_us,alltoall_us,shuffle_us,"
                 "baseline_us,baton_us,pool_tbps,baton_tbps,speedup,overlap,vs_pool,wrong_baseline,wrong_baton,checked,"
                 "algorithm\n", "CSV: the header");
  ok_contains(c, "\nembedding_alltoall,f32,sum,0,4,0,2048,16,64,50,100000,uniform,1000000,100.000,40.000,10.000,160.000,"
                 "120.000,2.5600,2.1333,1.3333,0.8000,0.8333,0,0,262144,embedding_alltoall_sum\n", "CSV: the first shape");
  ok_contains(c, "\nembedding_alltoall,f32,sum,0,4,0,4096,64,128,50,65536,zipf,13107200,300.000,-1.000,12.000,-1.000,"
                 "-1.000,22.3696,-1.0000,-1.0000,-1.0000,-1.0000,0,0,1048576,-\n", "CSV: a failed shape, -1 for what is missing");
  ok_contains(c, ",3,0,9,-\n", "CSV: wrong elements of the baseline");
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=d[\"rows\"];"
           "sys.exit(0 if d[\"fused\"]==\"embedding_alltoall\" and d[\"ranks\"]==4 and d[\"mode\"]==\"sum\" and "
           "d[\"alltoall\"].startswith(\"NCCL 2.28.9\") and d[\"device\"]==\"NVIDIA H200\" and len(r)==3 and "
           "r[0][\"speedup\"]==1.3333 and r[0][\"overlap\"]==0.8 and r[0][\"B\"]==2048 and r[0][\"indices\"]==\"uniform\" "
           "and r[1][\"indices\"]==\"zipf\" and r[1][\"error\"]==\"baton: unsupported\" and r[1][\"baton_us\"]==-1 and "
           "r[2][\"wrong_baseline\"]==3 and r[0][\"algorithm\"]==\"embedding_alltoall_sum\" else 1)' %s", json);
  ok(system(cmd) == 0, "JSON parses and holds the table");
  ok(bench_embed_write_csv("/nonexistent/dir/e.csv", &t) == -1 && bench_embed_write_json("/nonexistent/dir/e.json", &t) == -1,
     "an unwritable path is an error");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) printf("# could not remove %s\n", dir);
}

/* baton bench ARGS through the baton program: its exit status, its output
 * (stdout and stderr) in out. */
static int run_baton(const char *baton, const char *args, char *out, size_t len) {
  char path[] = "/tmp/test_bench_embed_out_XXXXXX", cmd[1200];
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
  int rc = run_baton(baton, "--fused embedding_alltoall --help", out, sizeof out);
  ok(rc == 0, "baton bench --fused embedding_alltoall --help exits 0");
  ok_contains(out, "usage: baton bench --fused embedding_alltoall [options]", "and prints the usage");
  rc = run_baton(baton, "--fused gemv_allreduce --help", out, sizeof out);
  ok(rc == 0, "baton bench --fused gemv_allreduce --help still exits 0");
  ok_contains(out, "usage: baton bench --fused gemv_allreduce [options]", "with the GEMV's usage");
  rc = run_baton(baton, "--fused alltoall -g 2", out, sizeof out);
  ok(rc == 2, "baton bench --fused alltoall exits 2");
  ok_contains(out, "--fused takes gemv_allreduce, embedding_alltoall or gemm_alltoall (the fused operator measured), "
              "not 'alltoall'", "and lists the three operators");
  rc = run_baton(baton, "--fused embedding_alltoall -g 2 --tables 0", out, sizeof out);
  ok(rc == 2, "a bad option exits 2 before any GPU is touched");
  ok_contains(out, "bad value '0' for --tables", "and names the value");
  rc = run_baton(baton, "--fused embedding_alltoall -g 2 --weighted --mode mean", out, sizeof out);
  ok(rc == 2, "--weighted --mode mean exits 2");
}

int main(int argc, char **argv) {
  test_operator();
  test_options();
  test_rows();
  test_derived();
  test_output();
  if (argc > 1) test_cli(argv[1]);
  else ok(1, "# SKIP no baton program given");
  return tap_done();
}
