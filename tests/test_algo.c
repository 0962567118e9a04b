/* test_algo.c -- choosing among loaded algorithms (runtime/rt_algo.c), on the CPU.
 * Usage: test_algo BATON ALGORITHMS_DIR (compiles the programs it loads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir_wire.h"
#include "rt_algo.h"
#include "tap.h"

static char dir[64];

/* Compiles algorithms/SCRIPT for 4 ranks with PARAMS into dir/NAME.xml. */
static int compile(const char *baton, const char *algs, const char *name, const char *script, const char *params) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s compile -q %s/%s --param ranks=4 %s -o %s/%s.xml", baton, algs, script, params, dir,
           name);
  return system(cmd);
}

static const char *picked(const rt_algos *a, int i) {
  return i < 0 || i >= rt_algos_count(a) ? "(none)" : rt_algos_get(a, i)->prog->name;
}

/* usable() of rt_algos_select_by: the FIFO programs only (what a call
 * without its peers' buffers, or across node groups, may run). */
static int fifo_only(void *ctx, int i) { return !rt_algos_get(ctx, i)->direct; }

/* Whether the programs named x and y of a are both there and exchange the
 * same between ranks (ir_wire_same); -1 when one is missing. */
static int wire_same(const rt_algos *a, const char *x, const char *y) {
  int i = rt_algos_find(a, x), j = rt_algos_find(a, y);
  if (i < 0 || j < 0) return -1;
  return ir_wire_same(rt_algos_get(a, i)->prog, rt_algos_get(a, j)->prog);
}

/* Ranks of one call that differ in placement (NCCL lets each choose):
 * which of the default set's programs for 4 ranks may run side by side,
 * and for every collective and size, that the FIFO programs the two
 * placements choose either may, or one program runs either placement. */
static void placement(const char *baton) {
  char cmd[512], set[128];
  snprintf(set, sizeof set, "%s/set4", dir);
  snprintf(cmd, sizeof cmd, "%s set 4 -q -o %s", baton, set);
  int bad = system(cmd);
  rt_algos *a = NULL;
  bt_result lr = bad ? BT_ERR_INVALID : rt_algos_load_files(&a, 4, "", set);
  ok(!bad && lr == BT_OK, "the default set for 4 ranks compiled and loaded (%s)", bt_result_str(lr));
  if (lr) return;
  ok(wire_same(a, "allreduce_allpairs_1shot_direct", "allreduce_allpairs_1shot_oop_direct") == 1,
     "the LL one-shot AllReduce in place and out of place exchange the same (they differ in their own copies only)");
  ok(wire_same(a, "allreduce_ring", "allreduce_ring_oop") == 1,
     "the ring AllReduce and its out-of-place rewrite exchange the same");
  ok(wire_same(a, "allgather_ring", "allgather_allpairs_oop") == 0,
     "the ring AllGather and the out-of-place all-pairs one do not");
  ok(wire_same(a, "reducescatter_ring", "reducescatter_ring_oop") == 0,
     "the in-place and out-of-place ring ReduceScatters do not (their channels differ)");
  ok(wire_same(a, "allreduce_allpairs_2shot_chain_put", "allreduce_allpairs_2shot_chain_oop_put") == 0,
     "two-shots that put into their peers' outputs never count as the same: what they reach depends on the peer");
  /* Every collective, at sizes in each range of the set: where the FIFO
   * choices for the two placements cannot run side by side, a program
   * that runs either placement is there. */
  const ir_coll colls[] = {IR_COLL_ALLREDUCE, IR_COLL_ALLGATHER, IR_COLL_REDUCESCATTER, IR_COLL_ALLTOALL};
  int cells = 0, differ = 0, either = 0, lost = 0;
  char first[256] = "";
  for (int k = 0; k < 4; k++)
    for (uint64_t bytes = 4096; bytes <= (256ull << 20); bytes *= 2) {
      const int64_t count = (int64_t)(bytes / 4 / 4);
      int in = rt_algos_select_by(a, colls[k], 1, bytes, count, fifo_only, a, 0);
      int out = rt_algos_select_by(a, colls[k], 0, bytes, count, fifo_only, a, 0);
      if (in < 0 || out < 0) continue;
      cells++;
      if (in == out || ir_wire_same(rt_algos_get(a, in)->prog, rt_algos_get(a, out)->prog)) continue;
      differ++;
      int e = rt_algos_select_by(a, colls[k], RT_PLACE_EITHER, bytes, count, fifo_only, a, 0);
      const rt_algo *al = e >= 0 ? rt_algos_get(a, e) : NULL;
      if (getenv("TEST_ALGO_LIST"))
        printf("# %s of %llu bytes: in place %s, out of place %s, either %s\n", ir_coll_name[colls[k]],
               (unsigned long long)bytes, picked(a, in), picked(a, out), picked(a, e));
      if (al && al->outofplace_ok && (al->inplace_ok || !al->copies)) either++;
      else if (!lost++)
        snprintf(first, sizeof first, "%s of %llu bytes", ir_coll_name[colls[k]], (unsigned long long)bytes);
    }
  ok(cells > 40 && differ > 0 && either == differ && !lost,
     "FIFO choices at %d (collective, size) cells: where the two placements' programs cannot run side by side "
     "(%d), one program runs either (%d; none at %s)", cells, differ, either, lost ? first : "no cell");
  rt_algos_free(a);
}


int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: test_algo BATON ALGORITHMS_DIR\n"); return 2; }
  snprintf(dir, sizeof dir, "/tmp/test_algo.%d", (int)getpid());
  char cmd[512];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd)) return 2;
  int bad = compile(argv[1], argv[2], "a_inplace", "allreduce_allpairs.lua", "--param shot=1") |
            compile(argv[1], argv[2], "b_oop", "allreduce_allpairs.lua", "--param shot=1 --param inplace=0") |
            compile(argv[1], argv[2], "c_ring", "allreduce_ring.lua", "");
  ok(!bad, "compiled the in-place and out-of-place one-shot AllReduce and the ring");
  char files[512];
  rt_algos *a = NULL;

  /* Both one-shot programs: the in-place one is loaded first. */
  snprintf(files, sizeof files, "%s/a_inplace.xml:%s/b_oop.xml", dir, dir);
  ok(rt_algos_load_files(&a, 4, files, NULL) == BT_OK && rt_algos_count(a) == 2, "two programs load");
  int i = rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0);
  ok(i >= 0 && !strcmp(picked(a, i), "allreduce_allpairs_1shot_oop"),
     "an out-of-place call takes the program that needs no copy of the input, not the first loaded (%s)",
     picked(a, i));
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4096, 1024, 0);
  ok(i >= 0 && !strcmp(picked(a, i), "allreduce_allpairs_1shot"), "an in-place call takes the in-place one (%s)",
     picked(a, i));
  ok(rt_algos_get(a, 0)->inplace_ok && rt_algos_get(a, 0)->outofplace_ok,
     "the in-place program may run both ways (out of place on a copy)");
  rt_algos_free(a);

  /* Only the in-place program: an out-of-place call still runs, on a copy. */
  snprintf(files, sizeof files, "%s/a_inplace.xml", dir);
  ok(rt_algos_load_files(&a, 4, files, NULL) == BT_OK, "the in-place program alone loads");
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0);
  ok(i == 0, "with nothing better, an out-of-place call takes the in-place program (%s)", picked(a, i));
  rt_algos_free(a);

  /* The ring reads its input where it is once rewritten (ir_dealias):
   * loading it adds allreduce_ring_oop, out of place only, right after it. */
  snprintf(files, sizeof files, "%s/c_ring.xml:%s/a_inplace.xml", dir, dir);
  bt_result lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(lr == BT_OK && rt_algos_count(a) == 3 &&
     !strcmp(picked(a, 1), "allreduce_ring_oop") && !rt_algos_get(a, 1)->inplace_ok &&
     rt_algos_get(a, 1)->outofplace_ok, "ring, its out-of-place rewrite (%s) and the one-shot load", picked(a, 1));
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0);
  ok(i == 1, "an out-of-place call takes the rewrite, the first program that needs no copy (%s)", picked(a, i));
  /* The ring has 4 chunks, the one-shot 1: for in-place calls a count the
   * ring's chunks do not divide goes to the one-shot, one they divide to
   * the first loaded. */
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4092, 1023, 0);
  ok(i == 2, "count 1023: the program whose chunks divide it (%s)", picked(a, i));
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4096, 1024, 0);
  ok(i == 0, "count 1024: the first loaded (%s)", picked(a, i));
  rt_algos_free(a);

  /* An in-place program whose rewrite runs out of place, loaded before a
   * program written out of place: out-of-place calls take the latter. */
  bad = compile(argv[1], argv[2], "d_chain", "allreduce_allpairs.lua", "--param shot=1 --param chain=1") |
        compile(argv[1], argv[2], "e_chain_oop", "allreduce_allpairs.lua", "--param shot=1 --param chain=1 --param inplace=0");
  snprintf(files, sizeof files, "%s/d_chain.xml:%s/e_chain_oop.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(!bad && lr == BT_OK && rt_algos_count(a) == 3 && rt_algos_get(a, 1)->rewrite && !rt_algos_get(a, 2)->rewrite,
     "the in-place chain, its rewrite and the out-of-place chain load");
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0);
  ok(i == 2, "an out-of-place call takes the program written out of place, not the earlier rewrite (got %d)", i);
  i = rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4096, 1024, 0);
  ok(i == 0, "an in-place call takes the in-place chain (got %d)", i);
  rt_algos_free(a);

  /* Only out-of-place programs: an in-place call runs one on a copy of
   * its input (the in-place AllToAll), but an in-place program, when
   * there is one, wins. */
  bad = compile(argv[1], argv[2], "f_a2a", "alltoall_direct.lua", "");
  snprintf(files, sizeof files, "%s/f_a2a.xml", dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  i = !bad && lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLTOALL, 1, 4096, 256, 0) : -2;
  ok(i == 0 && !rt_algos_get(a, 0)->inplace_ok, "an in-place AllToAll takes the out-of-place direct program (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);
  /* An out-of-place program that is race-free in NCCL's in-place layout
   * runs in-place calls as it is: the direct LL AllToAll (its peers put
   * into landings; it reads each block before it copies the peer's over
   * it), loaded after the direct Simple one, which puts straight into
   * blocks its peers still read and so runs them on a copy. */
  bad = compile(argv[1], argv[2], "f_a2a_simple", "alltoall_direct.lua", "--param via=direct --param protocol=Simple") |
        compile(argv[1], argv[2], "f_a2a_ll", "alltoall_direct.lua", "--param via=direct --param protocol=LL");
  snprintf(files, sizeof files, "%s/f_a2a_simple.xml:%s/f_a2a_ll.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  i = !bad && lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLTOALL, 1, 4096, 256, 0) : -2;
  ok(i == 1 && !rt_algos_get(a, 0)->inplace_ok && rt_algos_get(a, 1)->inplace_ok && rt_algos_get(a, 1)->outofplace_ok,
     "an in-place AllToAll takes the LL direct program, race-free in place, with no copy (got %d)", i);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLTOALL, 0, 4096, 256, 0) : -2;
  ok(i == 0, "an out-of-place one the first loaded (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);
  /* The default set's three direct AllToAlls, its order and ranges: the
   * Simple one on the ranks' buffers from 1 MiB, the in-place one through
   * scratch from 2 MiB, LL to 4 MiB.  In place, LL to 2 MiB (no copy),
   * then the in-place one; out of place, the Simple one from 1 MiB (the
   * in-place program would need a copy). */
  bad = compile(argv[1], argv[2], "f_a2a_0", "alltoall_direct.lua", "--param via=direct --sizes 1048577:") |
        compile(argv[1], argv[2], "f_a2a_1ip", "alltoall_direct.lua", "--param via=direct --param inplace=1 --sizes 2097153:") |
        compile(argv[1], argv[2], "f_a2a_2ll", "alltoall_direct.lua", "--param via=direct --param protocol=LL --sizes :4194304");
  snprintf(files, sizeof files, "%s/f_a2a_0.xml:%s/f_a2a_1ip.xml:%s/f_a2a_2ll.xml", dir, dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(!bad && lr == BT_OK && rt_algos_count(a) == 3 && rt_algos_get(a, 1)->inplace_ok,
     "the Simple, in-place and LL direct AllToAlls load (the in-place one runs in-place calls)");
  int sel[4] = {-2, -2, -2, -2};
  if (lr == BT_OK) {
    sel[0] = rt_algos_select(a, IR_COLL_ALLTOALL, 1, 2 << 20, 1 << 17, 0);
    sel[1] = rt_algos_select(a, IR_COLL_ALLTOALL, 1, 4 << 20, 1 << 18, 0);
    sel[2] = rt_algos_select(a, IR_COLL_ALLTOALL, 0, 4 << 20, 1 << 18, 0);
    sel[3] = rt_algos_select(a, IR_COLL_ALLTOALL, 1, 64 << 20, 1 << 22, 0);
  }
  ok(sel[0] == 2 && sel[1] == 1 && sel[2] == 0 && sel[3] == 1,
     "in place: LL at 2 MiB, the in-place one at 4 and 64 MiB; out of place at 4 MiB the Simple one (got %d %d %d %d)",
     sel[0], sel[1], sel[2], sel[3]);
  if (lr == BT_OK) rt_algos_free(a);
  snprintf(files, sizeof files, "%s/b_oop.xml:%s/a_inplace.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4096, 1024, 0) : -2;
  ok(i == 1, "an in-place call takes an in-place program over an earlier out-of-place one (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);

  /* Fused programs run only as fused calls: a plain AllReduce never takes
   * one, a GEMV + AllReduce call takes the one whose size range fits. */
  bad = compile(argv[1], argv[2], "g_gemv_small", "gemv_allreduce.lua", "--param maxbytes=65536") |
        compile(argv[1], argv[2], "h_gemv_ring", "gemv_allreduce.lua", "--param form=ring --param minbytes=65537");
  snprintf(files, sizeof files, "%s/g_gemv_small.xml:%s/h_gemv_ring.xml:%s/a_inplace.xml", dir, dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(!bad && lr == BT_OK && rt_algos_count(a) == 3 && rt_algos_get(a, 0)->compute == IR_OP_GEMV &&
     rt_algos_get(a, 2)->compute < 0, "two GEMV + AllReduce programs and the one-shot load (fused: %d)",
     lr == BT_OK ? rt_algos_get(a, 0)->compute : -9);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 1, 4096, 1024, 0) : -2;
  ok(i == 2, "a plain AllReduce never takes a fused program (got %s)", lr == BT_OK ? picked(a, i) : "?");
  i = lr == BT_OK ? rt_algos_select_fused(a, IR_COLL_ALLREDUCE, IR_OP_GEMV, 16384, 8192, NULL, 0) : -2;
  ok(i == 0, "GEMV + AllReduce of 16 KiB takes the small one (got %s)", lr == BT_OK ? picked(a, i) : "?");
  i = lr == BT_OK ? rt_algos_select_fused(a, IR_COLL_ALLREDUCE, IR_OP_GEMV, 1 << 20, 1 << 19, NULL, 0) : -2;
  ok(i == 1, "GEMV + AllReduce of 1 MiB takes the ring (got %s)", lr == BT_OK ? picked(a, i) : "?");
  unsigned char usable[3] = {1, 0, 1};
  i = lr == BT_OK ? rt_algos_select_fused(a, IR_COLL_ALLREDUCE, IR_OP_GEMV, 1 << 20, 1 << 19, usable, 0) : -2;
  ok(i == -1, "none when the GPU cannot hold the one that fits (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);

  /* A direct in-place ReduceScatter runs in place only: out of place its
   * input (4 blocks) would be copied around a 1-block output. */
  bad = compile(argv[1], argv[2], "l_rs_ip", "reducescatter_allpairs.lua",
                "--param via=direct --param protocol=Simple --param chain=1 --param inplace=1");
  snprintf(files, sizeof files, "%s/l_rs_ip.xml", dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(!bad && lr == BT_OK && rt_algos_count(a) == 1 && rt_algos_get(a, 0)->direct && rt_algos_get(a, 0)->inplace_ok &&
     !rt_algos_get(a, 0)->outofplace_ok, "the direct in-place ReduceScatter loads for in-place calls only");
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_REDUCESCATTER, 0, 16384, 1024, 0) : -2;
  ok(i == -1, "an out-of-place ReduceScatter does not take it (got %d)", i);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_REDUCESCATTER, 1, 16384, 1024, 0) : -2;
  ok(i == 0, "an in-place one does (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);

  /* Across node groups the fewest network peers come first: with every
   * rank its own group, the ring's rewrite (one peer) beats the one-shot
   * written out of place (three); with one group, the order above. */
  snprintf(files, sizeof files, "%s/b_oop.xml:%s/c_ring.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0) : -2;
  ok(i == 0, "one node group: the one-shot written out of place (%s)", lr == BT_OK ? picked(a, i) : "?");
  int apart[4] = {0, 1, 2, 3}, paired[4] = {0, 0, 1, 1};
  bt_result nr = lr == BT_OK ? rt_algos_set_nodes(a, apart, 4) : BT_ERR_INVALID;
  ok(nr == BT_OK && rt_algos_get(a, 0)->net_peers == 3 && rt_algos_get(a, 1)->net_peers == 1,
     "four groups: the one-shot sends to 3 ranks of other groups, the ring to 1 (%d, %d)",
     nr == BT_OK ? rt_algos_get(a, 0)->net_peers : -1, nr == BT_OK ? rt_algos_get(a, 1)->net_peers : -1);
  i = nr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0) : -2;
  ok(i == 2, "four groups: an out-of-place call takes the ring's rewrite (%s)", nr == BT_OK ? picked(a, i) : "?");
  nr = lr == BT_OK ? rt_algos_set_nodes(a, paired, 4) : BT_ERR_INVALID;
  ok(nr == BT_OK && rt_algos_get(a, 0)->net_peers == 2 && rt_algos_get(a, 1)->net_peers == 1,
     "two groups of two: 2 and 1 (%d, %d)", nr == BT_OK ? rt_algos_get(a, 0)->net_peers : -1,
     nr == BT_OK ? rt_algos_get(a, 1)->net_peers : -1);
  if (lr == BT_OK) rt_algos_free(a);

  /* Across node groups a program with fewer network peers also runs below
   * its size range from BATON_NET_FEWER_BYTES (1 MiB) on: the one-shot
   * covers up to 8 MiB, the ring from 8 MiB + 1 (as a default set's
   * NVLink ranges have it). */
  snprintf(cmd, sizeof cmd, "sed 's/<algo /<algo maxBytes=\"8388608\" /' %s/b_oop.xml > %s/m_oop.xml && "
           "sed 's/<algo /<algo minBytes=\"8388609\" /' %s/c_ring.xml > %s/m_ring.xml", dir, dir, dir, dir);
  bad = system(cmd);
  snprintf(files, sizeof files, "%s/m_oop.xml:%s/m_ring.xml", dir, dir);
  lr = bad ? BT_ERR_INVALID : rt_algos_load_files(&a, 4, files, NULL);
  i = lr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 2 << 20, 1 << 19, 0) : -2;
  ok(i == 0, "one node group, 2 MiB: the one-shot, whose range covers it (%s)", lr == BT_OK ? picked(a, i) : "?");
  nr = lr == BT_OK ? rt_algos_set_nodes(a, apart, 4) : BT_ERR_INVALID;
  i = nr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 2 << 20, 1 << 19, 0) : -2;
  ok(i >= 0 && strstr(rt_algos_get(a, i)->prog->file, "m_ring"), "four groups, 2 MiB: the ring, below its range (%s)",
     nr == BT_OK ? picked(a, i) : "?");
  i = nr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 512 << 10, 1 << 17, 0) : -2;
  ok(i == 0, "four groups, 512 KiB (under BATON_NET_FEWER_BYTES): the one-shot (%s)", nr == BT_OK ? picked(a, i) : "?");
  i = nr == BT_OK ? rt_algos_select(a, IR_COLL_ALLREDUCE, 0, 16 << 20, 1 << 22, 0) : -2;
  ok(i >= 0 && strstr(rt_algos_get(a, i)->prog->file, "m_ring"), "four groups, 16 MiB: the ring, in its range (%s)",
     nr == BT_OK ? picked(a, i) : "?");
  if (lr == BT_OK) rt_algos_free(a);

  /* GEMM + AllToAll: the library's program loads as a gemm program; one
   * whose gemm steps multiply two different W is refused (the GPU runs a
   * rank's gemm steps as one GEMM). */
  char path[160];
  snprintf(path, sizeof path, "%s/two_w.lua", dir);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs("collective{ kind = \"alltoall\", ranks = 4, chunks = 1, inplace = false, name = \"two_w\" }\n"
          "local X, W, V = matrix(\"X\", \"T\", \"F\"), matrix(\"W\", \"F\", \"H\"), matrix(\"V\", \"F\", \"H\")\n"
          "for r = 0, 3 do for q = 0, 3 do gemm(X, q % 2 == 0 and W or V, r, q) end end\n"
          "for r = 0, 3 do for q = 0, 3 do chunk(r, \"input\", q, 1):copy(q, \"output\", r) end end\n", f);
    fclose(f);
  }
  snprintf(cmd, sizeof cmd, "%s compile -q %s -o %s/j_two_w.xml", argv[1], path, dir);
  bad = !f || system(cmd) || compile(argv[1], argv[2], "i_moe", "moe_combine.lua", "");
  snprintf(files, sizeof files, "%s/i_moe.xml:%s/j_two_w.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  ok(!bad && lr == BT_OK && rt_algos_count(a) == 1 && rt_algos_get(a, 0)->compute == IR_OP_GEMM,
     "moe_combine loads as a GEMM + AllToAll program; gemm steps with two weights are refused (%d loaded)",
     lr == BT_OK ? rt_algos_count(a) : -1);
  i = lr == BT_OK ? rt_algos_select_fused(a, IR_COLL_ALLTOALL, IR_OP_GEMM, 1 << 20, 1 << 19, NULL, 0) : -2;
  ok(i == 0, "a GEMM + AllToAll call takes it (got %s)", lr == BT_OK ? picked(a, i) : "?");
  i = lr == BT_OK ? rt_algos_select_fused(a, IR_COLL_ALLTOALL, IR_OP_EBAG, 1 << 20, 1 << 19, NULL, 0) : -2;
  ok(i == -1, "an embedding call does not (got %d)", i);
  if (lr == BT_OK) rt_algos_free(a);

  /* The slots a program's schedule needs: recorded by the compiler; a
   * runtime with fewer (BATON_EXEC_SLOTS) does not use it. */
  snprintf(cmd, sizeof cmd, "grep -q ' slots=\"[12]\"' %s/c_ring.xml && sed 's/ slots=\"[12]\"/ slots=\"9\"/' "
           "%s/c_ring.xml > %s/k_ring9.xml", dir, dir, dir);
  bad = system(cmd);
  ok(!bad, "the compiled ring records the FIFO slots its schedule needs (slots=\"1\" or \"2\")");
  snprintf(files, sizeof files, "%s/c_ring.xml:%s/k_ring9.xml", dir, dir);
  lr = rt_algos_load_files(&a, 4, files, NULL);
  int nine = 0;   /* programs kept from k_ring9.xml (the ring's own may bring its out-of-place rewrite) */
  for (int k = 0; lr == BT_OK && k < rt_algos_count(a); k++) nine += strstr(rt_algos_get(a, k)->prog->file, "k_ring9") != NULL;
  ok(!bad && lr == BT_OK && rt_algos_count(a) >= 1 && nine == 0,
     "a program that needs 9 slots is not used with BATON_EXEC_SLOTS=8 (%d loaded)", lr == BT_OK ? rt_algos_count(a) : -1);
  if (lr == BT_OK) rt_algos_free(a);

  placement(argv[1]);

  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) return 2;
  return tap_done();
}
