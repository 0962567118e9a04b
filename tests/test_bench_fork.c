/* test_bench_fork.c -- the process layer of `baton bench -P`
 * (tools/bench/bench_fork.c) without a GPU or NCCL: barriers carry the OR
 * of every rank's flags or the least of their values, results come a step
 * at a time, and a run stops at once, with the rank and its reason, when
 * one rank fails during setup while the others wait for it, when a rank's
 * process ends early, or when the ranks fall out of step; and how the
 * ranks' results fold into one. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_fork.h"
#include "tap.h"

typedef struct res {
  int rank, flags, step;
} res;

/* What a scenario's children do and what its parent saw. */
typedef struct scen {
  int kind;
  int started_flags, results, bad_results, id_calls, id_have;
  char id_why[64];
} scen;

enum { NORMAL, FAIL_EARLY, FAIL_LATE, DIES, OUT_OF_STEP, EXIT_NONZERO };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void child(void *arg, bench_fork *f, int r) {
  const scen *s = arg;
  char id[128];
  if (s->kind == FAIL_EARLY && r == 2) bench_fork_fail(f, "no GPU for this rank");
  int have = bench_fork_nccl_id(f, NULL, id);
  if (s->kind == FAIL_EARLY) sleep(30);   /* ranks 0 and 1 wait for rank 2, as a communicator's set-up would */
  if (s->kind == DIES && r == 1) _exit(5);
  if (s->kind == FAIL_LATE) {
    if (r == 1) bench_fork_fail(f, "cannot allocate its buffers");
    sleep(30);
  }
  int all = bench_fork_barrier(f, 1 << r | have << 8);
  if (bench_fork_min(f, 100 - 10 * r) != 80) _exit(6);   /* the least of 100, 90 and 80, on every rank */
  for (int step = 0; step < 2; step++) {
    if (s->kind == OUT_OF_STEP && r == 1) bench_fork_barrier(f, 0);
    res m = {r, all, step};
    bench_fork_result(f, &m, sizeof m);
  }
  _exit(s->kind == EXIT_NONZERO && r == 1 ? 4 : 0);
}

static void on_id(void *arg, int have, const char *why) {
  scen *s = arg;
  s->id_calls++;
  s->id_have = have;
  snprintf(s->id_why, sizeof s->id_why, "%s", why);
}

static void on_started(void *arg, int flags) {
  ((scen *)arg)->started_flags = flags;
}

static int on_result(void *arg, char *const *msg, const int *len, int n) {
  scen *s = arg;
  for (int r = 0; r < n; r++) {
    res m;
    if (len[r] != (int)sizeof m) return -1;
    memcpy(&m, msg[r], sizeof m);
    s->bad_results += m.rank != r || m.step != s->results || m.flags != 7;
  }
  s->results++;
  return 0;
}

/* Runs scenario kind on 3 ranks with stderr into a file: the exit status,
 * the seconds it took and what it printed (text, len bytes). */
static int run(scen *s, int kind, double *secs, char *text, size_t len) {
  memset(s, 0, sizeof *s);
  s->kind = kind;
  char path[] = "/tmp/baton_test_fork_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  bench_fork_ops ops = {child, on_id, on_started, on_result, 2};
  double t0 = now_s();
  int rc = bench_fork_run(3, &ops, s);
  *secs = now_s() - t0;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t k = read(fd, text, len - 1);
  text[k > 0 ? k : 0] = 0;
  close(fd);
  unlink(path);
  return rc;
}

int main(void) {
  scen s;
  double secs;
  char text[2000];
  int rc = run(&s, NORMAL, &secs, text, sizeof text);
  ok(rc == 0 && s.results == 2 && s.bad_results == 0, "3 ranks: the least of their values, two results each, folded step by step (rc %d)", rc);
  ok(s.started_flags == 7, "the first barrier hands every rank the OR of their flags (%#x)", s.started_flags);
  ok(s.id_calls == 1 && !s.id_have && strstr(s.id_why, "NCCL not loaded"),
     "without NCCL, rank 0 says so and every rank goes on without an id");
  rc = run(&s, FAIL_EARLY, &secs, text, sizeof text);
  ok(rc == 2 && secs < 10, "rank 2's setup error stops the run while ranks 0 and 1 wait for it (%.1f s)", secs);
  ok_contains(text, "baton bench: rank 2: no GPU for this rank", "the error names the rank and its reason");
  rc = run(&s, FAIL_LATE, &secs, text, sizeof text);
  ok(rc == 2 && secs < 10 && strstr(text, "rank 1: cannot allocate its buffers"),
     "an error after the id, while rank 0 still sets up, stops the run too (%.1f s)", secs);
  rc = run(&s, DIES, &secs, text, sizeof text);
  ok(rc == 2 && strstr(text, "rank 1's process ended early"), "a rank whose process ends early is named");
  rc = run(&s, OUT_OF_STEP, &secs, text, sizeof text);
  ok(rc == 2 && strstr(text, "out of step"), "a barrier against results: the ranks are out of step");
  rc = run(&s, EXIT_NONZERO, &secs, text, sizeof text);
  ok(rc == 1 && s.results == 2 && strstr(text, "rank 1's process ended with status 4"),
     "a rank ending with a nonzero status after its results makes the status 1");
  double t = 5;
  bench_fold_time(&t, 7);
  double u = 5;
  bench_fold_time(&u, -1);
  bench_fold_time(&u, 9);
  ok(t == 7 && u == -1, "a folded time is the slowest rank's, and none where some rank has none");
  int64_t w = -1;
  bench_fold_wrong(&w, 2);
  bench_fold_wrong(&w, -1);
  bench_fold_wrong(&w, 3);
  ok(w == 5, "wrong elements add up over the ranks that checked (%lld)", (long long)w);
  char e[40] = "";
  bench_fold_error(e, sizeof e, NULL, 0);
  bench_fold_error(e, sizeof e, "out of memory", 2);
  bench_fold_error(e, sizeof e, "later", 3);
  char f[40] = "bad";
  bench_fold_error(f, sizeof f, NULL, 0);
  ok(!strcmp(e, "rank 2: out of memory") && !strcmp(f, "rank 0: bad"), "the first error is kept, named by its rank");
  return tap_done();
}
