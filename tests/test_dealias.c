/* test_dealias.c -- in-place programs rewritten to run out of place without a
 * copy of the input (ir/ir_dealias.c), each result checked on the CPU.
 * Usage: test_dealias BATON ALGORITHMS_DIR CORPUS_DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_dealias.h"
#include "ir_read.h"
#include "tap.h"

static char dir[64];
static rt_diag *d;

static ir_prog *compiled(const char *baton, const char *algs, const char *script, const char *params) {
  char cmd[1024], path[128];
  snprintf(path, sizeof path, "%s/p.xml", dir);
  snprintf(cmd, sizeof cmd, "%s compile -q %s/%s --param ranks=4 %s -o %s", baton, algs, script, params, path);
  ir_prog *p = NULL;
  if (system(cmd) || ir_read_file(path, &p, d) || ir_check(p, d)) { ir_prog_free(p); return NULL; }
  return p;
}

/* No step of q writes the caller's input. */
static int input_untouched(const ir_prog *q) {
  for (int r = 0; r < q->ngpus; r++)
    for (int t = 0; t < q->gpus[r].ntbs; t++)
      for (int s = 0; s < q->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &q->gpus[r].tbs[t].steps[s];
        if ((ir_op_flags[st->op] & IR_F_DST) && st->dstbuf == IR_BUF_INPUT) return 0;
      }
  return 1;
}

/* The rewritten program runs out of place right: every type and op, an
 * uneven count in several tiles, two slots; no step writes i; no races. */
static int verified(const ir_prog *q, char *msg, size_t n) {
  rt_diag_clear(d);
  if (ir_check(q, d) || ir_check_races(q, 0, d)) { snprintf(msg, n, "%s", rt_diag_text(d)); return 0; }
  if (!input_untouched(q)) { snprintf(msg, n, "a step writes the input"); return 0; }
  int ops = q->coll == IR_COLL_ALLGATHER || q->coll == IR_COLL_ALLTOALL ? 1 : IP_REDOP_COUNT;
  for (int t = 0; t < IP_DTYPE_COUNT; t++)
    for (int op = 0; op < ops; op++) {
      ip_cpu_opts o = {.dtype = t, .op = op, .count = 1001, .inplace = 0, .tile = 64, .slots = 2};
      ip_cpu_report rep;
      rt_diag_clear(d);
      if (ip_cpu_verify(q, &o, &rep, d)) { snprintf(msg, n, "%s", rt_diag_text(d)); return 0; }
    }
  snprintf(msg, n, "ok");
  return 1;
}

static void test_library(const char *baton, const char *algs) {
  char why[256], msg[512];
  ir_prog *q = NULL;
  static const char *const good[][2] = {
    {"allreduce_ring.lua", ""}, {"allreduce_ring.lua", "--param channels=2 --param instances=2"},
    {"allreduce_ring.lua", "--param protocol=LL"}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ir_prog *p = compiled(baton, algs, good[i][0], good[i][1]);
    bt_result r = p ? ir_dealias(p, &q, why, sizeof why) : BT_ERR_INVALID;
    ok(r == BT_OK && q && !q->inplace && !ir_prog_aliased(q, 0) && verified(q, msg, sizeof msg),
       "%s %s: rewritten to read the input and write the output, verified out of place (%s%s)", good[i][0],
       good[i][1], r ? why : "", q ? msg : "");
    ir_prog_free(q);
    ir_prog_free(p);
    q = NULL;
  }
  static const char *const bad[][3] = {
    {"allreduce_allpairs.lua", "--param shot=1", "reduces into a chunk that still holds the input"},
    {"allgather_ring.lua", "", "is never written and holds the input in place"},
    {"reducescatter_ring.lua", "", "writes outside the output buffer"},
    {"alltoall_direct.lua", "", "runs out of place as it is"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ir_prog *p = compiled(baton, algs, bad[i][0], bad[i][1]);
    bt_result r = p ? ir_dealias(p, &q, why, sizeof why) : BT_ERR_INVALID;
    ok(r == BT_ERR_UNSUPPORTED && !q && strstr(why, bad[i][2]), "%s %s: left as it is: %s", bad[i][0], bad[i][1],
       why);
    ir_prog_free(p);
  }
}

/* Every corpus file that copies its input when called out of place: where
 * the rewrite applies, its result verifies. */
static void test_corpus(const char *corpus) {
  DIR *dd = opendir(corpus);
  if (!dd) { ok(1, "# SKIP no corpus at %s", corpus); return; }
  int tried = 0, done = 0, bad = 0;
  char failed[512] = "", why[256], msg[512];
  struct dirent *e;
  while ((e = readdir(dd))) {
    if (!strstr(e->d_name, ".xml")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", corpus, e->d_name);
    ir_prog *p = NULL, *q = NULL;
    if (ir_read_file(path, &p, d) || ir_check(p, d) || !ir_prog_aliased(p, 0) || ir_check_races(p, 1, d)) {
      ir_prog_free(p);
      continue;
    }
    tried++;
    if (ir_dealias(p, &q, why, sizeof why) == BT_OK) {
      done++;
      if (!verified(q, msg, sizeof msg)) {
        bad++;
        snprintf(failed, sizeof failed, "%s: %.200s", e->d_name, msg);
      }
    }
    ir_prog_free(q);
    ir_prog_free(p);
  }
  closedir(dd);
  ok(tried > 0 && bad == 0, "corpus: %d in-place programs, %d rewritten, every rewrite verifies out of place %s",
     tried, done, failed);
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: test_dealias BATON ALGORITHMS_DIR CORPUS_DIR\n"); return 2; }
  d = rt_diag_new(8);
  snprintf(dir, sizeof dir, "/tmp/test_dealias.%d", (int)getpid());
  char cmd[128];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd)) return 2;
  test_library(argv[1], argv[2]);
  test_corpus(argv[3]);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) return 2;
  rt_diag_free(d);
  return tap_done();
}
