/* gpu_kill.c -- a rank's process killed, one process per rank: every other
 * rank must report an error within the bounded time (BATON_TIMEOUT for a
 * collective, BATON_BOOTSTRAP_TIMEOUT for communicator creation), destroy
 * its communicator without hanging, and make a new one with a process
 * that replaces the dead rank, which computes right.
 *
 * Usage: gpu_kill --ranks N --dir DIR [--gpus G]
 *   DIR holds IR files for N ranks; rank r runs on GPU r % G (G defaults
 *   to N).  With G < N the ranks' kernels share a GPU: that needs the MPS
 *   daemon (nvidia-cuda-mps-control -d) and BATON_LANES=1, as gpu_runtime
 *   --procs does.  The parent touches no CUDA: it forks the ranks, hands
 *   them unique ids through pipes, kills the last rank with SIGKILL, and
 *   relays each rank's TAP lines.  Skips when fewer than G GPUs exist. */
#include <cuda_runtime_api.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "gpu_opts.h"
#include "tap.h"

enum { COUNT = 1 << 16, TIMEOUT_S = 4, MARGIN_S = 6 };

static int nranks, ngpus;
static int skipped;   /* a rank found fewer GPUs than asked for */
static char outdir[] = "/tmp/baton_gpu_kill_XXXXXX";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reads exactly n bytes from fd; 0 on success. */
static int read_all(int fd, void *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t k = read(fd, (char *)p + got, n - got);
    if (k <= 0) return -1;
    got += (size_t)k;
  }
  return 0;
}

/* One AllReduce of f32 ones on rank r's buffers; waits for it.  Returns
 * the error of the call, the stream or the communicator, and in *sum the
 * first element (nranks when right). */
static baton_result allreduce_once(baton_comm *c, float *buf, cudaStream_t st, float *sum) {
  baton_group_start();   /* ranks sharing a GPU launch in groups */
  baton_result e = baton_allreduce(buf, buf + COUNT, COUNT, baton_f32, baton_sum, c, st);
  baton_result ge = baton_group_end();
  if (!e) e = ge;
  if (!e && cudaStreamSynchronize(st) != cudaSuccess) e = baton_cuda_error;
  baton_result ae = baton_success;
  baton_comm_get_async_error(c, &ae);
  if (!e) e = ae;
  if (!e && cudaMemcpy(sum, buf + COUNT, sizeof *sum, cudaMemcpyDeviceToHost) != cudaSuccess) e = baton_cuda_error;
  return e;
}

/* Reads n bytes from fd, waiting at most `secs` in all; 0 on success (a
 * rank that died early must not hang the parent, which keeps the pipe's
 * write end for later ranks). */
static int wait_bytes(int fd, int n, int secs) {
  double end = now() + secs;
  for (int got = 0; got < n;) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)((end - now()) * 1000);
    if (left <= 0 || poll(&p, 1, left) != 1) return -1;
    char b;
    if (read(fd, &b, 1) != 1) return -1;
    got++;
  }
  return 0;
}

/* Fills buf's first COUNT floats with ones. */
static int ones(float *buf) {
  float *h = malloc(COUNT * sizeof *h);
  if (!h) return -1;
  for (int i = 0; i < COUNT; i++) h[i] = 1.0f;
  int bad = cudaMemcpy(buf, h, COUNT * sizeof *h, cudaMemcpyHostToDevice) != cudaSuccess;
  free(h);
  return bad ? -1 : 0;
}

/* A rank's process.  Scenario "collective": make a communicator from the
 * first id, tell the parent (one byte on `ready`), run AllReduces until
 * one fails (the victim is killed meanwhile), time the failure, destroy,
 * then make a new communicator from the second id and check one
 * AllReduce.  Scenario "bootstrap": the first creation must fail (the
 * victim never joins).  A replacement process (replace) does only the
 * second part.  Exits with tap_done(). */
static int rank_main(int r, int bootstrap, int replace, int ids, int ready) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < ngpus) _exit(77);
  cudaSetDevice(r % ngpus);
  baton_unique_id id;
  baton_comm *c = NULL;
  cudaStream_t st;
  float *buf = NULL;
  if (cudaStreamCreate(&st) != cudaSuccess || cudaMalloc((void **)&buf, 2 * COUNT * sizeof(float)) != cudaSuccess ||
      ones(buf)) {
    ok(0, "rank %d: stream and buffers", r);
    return tap_done();
  }
  if (!replace) {
    if (read_all(ids, &id, sizeof id)) { ok(0, "rank %d: first id", r); return tap_done(); }
    double t0 = now();
    baton_result e = baton_comm_init_rank(&c, nranks, id, r);
    if (bootstrap) {
      double dt = now() - t0;
      ok(e != baton_success && dt < TIMEOUT_S + MARGIN_S, "rank %d: creation without the killed rank fails in %.1f s "
         "(BATON_BOOTSTRAP_TIMEOUT=%d): %s", r, dt, TIMEOUT_S, baton_result_string(e));
      if (!e) baton_comm_destroy(c);
    } else {
      ok(e == baton_success, "rank %d: communicator of %d ranks made", r, nranks);
      if (e) return tap_done();
      if (write(ready, "R", 1) != 1) return tap_done();
      float sum = 0;
      int runs = 0;
      double failed_at = 0;
      baton_result fe = baton_success;
      for (double start = now(); now() - start < 60;) {
        fe = allreduce_once(c, buf, st, &sum);
        if (fe) { failed_at = now(); break; }
        runs++;
      }
      /* the parent kills the victim about a second after every rank is ready */
      ok(fe != baton_success, "rank %d: an AllReduce fails once rank %d is killed (%d ran before): %s", r, nranks - 1,
         runs, baton_result_string(fe));
      double killed_at = 0;
      if (read_all(ids, &killed_at, sizeof killed_at)) killed_at = 0;
      ok(killed_at > 0 && failed_at - killed_at < TIMEOUT_S + MARGIN_S,
         "rank %d: the error came %.1f s after the kill (BATON_TIMEOUT=%d)", r, failed_at - killed_at, TIMEOUT_S);
      double t1 = now();
      baton_result de = baton_comm_destroy(c);
      ok(now() - t1 < MARGIN_S, "rank %d: the communicator is destroyed in %.1f s (%s)", r, now() - t1,
         baton_result_string(de));
      cudaGetLastError();
    }
  }
  /* A new communicator with the dead rank's replacement, once every
   * survivor is done with the first (the parent waits for their bytes). */
  if (!replace && write(ready, "D", 1) != 1) return tap_done();
  if (read_all(ids, &id, sizeof id)) { ok(0, "rank %d: second id", r); return tap_done(); }
  baton_result e = baton_comm_init_rank(&c, nranks, id, r);
  ok(e == baton_success, "rank %d%s: a new communicator of %d ranks: %s", r, replace ? " (the replacement)" : "",
     nranks, baton_result_string(e));
  if (e) return tap_done();
  float sum = 0;
  ones(buf);
  e = allreduce_once(c, buf, st, &sum);
  ok(!e && sum == (float)nranks, "rank %d: and an AllReduce on it is right (%g, %s)", r, sum, baton_result_string(e));
  baton_comm_destroy(c);
  cudaFree(buf);
  cudaStreamDestroy(st);
  return tap_done();
}

/* Forks rank r with its id pipe; its TAP output goes to OUTDIR/NAME. */
static pid_t spawn(int r, int bootstrap, int replace, int *ids_w, int ready_w, const char *name) {
  int p[2];
  if (pipe(p)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    if (!freopen(path, "w", stdout)) _exit(3);
    _exit(rank_main(r, bootstrap, replace, p[0], ready_w));
  }
  close(p[0]);
  *ids_w = p[1];
  return pid;
}

/* Relays the TAP output of a rank and checks how its process ended. */
static void collect(pid_t pid, const char *name, int killed) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) { skipped = 1; return; }
  char path[256];
  snprintf(path, sizeof path, "%s/%s", outdir, name);
  int points = tap_relay(path, name);
  remove(path);
  if (killed) {
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s was killed", name);
    return;
  }
  ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && points > 0, "%s exited with %d after %d checks", name,
     WIFEXITED(st) ? WEXITSTATUS(st) : -1, points);
}

/* One scenario: ranks 0..N-2 survive, rank N-1 is killed once every
 * survivor is ready (collective) or before it ever joins (bootstrap); then
 * a replacement joins a second communicator. */
static void scenario(int bootstrap) {
  int ready[2];
  if (pipe(ready)) { ok(0, "pipe"); return; }
  pid_t *pid = calloc(nranks + 1, sizeof *pid);
  int *ids = calloc(nranks + 1, sizeof *ids);
  char names[64][32];
  for (int r = 0; r < nranks; r++) {
    snprintf(names[r], sizeof names[r], "%s rank %d", bootstrap ? "bootstrap" : "collective", r);
    if (r == nranks - 1 && bootstrap) {   /* never joins: sleeps until killed */
      pid[r] = fork();
      if (pid[r] == 0) { for (;;) pause(); }
      continue;
    }
    pid[r] = spawn(r, bootstrap, 0, &ids[r], ready[1], names[r]);
  }
  baton_unique_id id;
  baton_get_unique_id(&id);
  for (int r = 0; r < nranks; r++)
    if (ids[r] && write(ids[r], &id, sizeof id) != (ssize_t)sizeof id) ok(0, "handing rank %d its id", r);
  if (!bootstrap) {   /* every rank ready, a second of AllReduces, then the kill */
    if (wait_bytes(ready[0], nranks, 120)) ok(0, "every rank made its communicator within 120 s");
    sleep(1);
  }
  kill(pid[nranks - 1], SIGKILL);
  double killed_at = now();
  for (int r = 0; r < nranks - 1 && !bootstrap; r++)
    if (write(ids[r], &killed_at, sizeof killed_at) != (ssize_t)sizeof killed_at) ok(0, "telling rank %d", r);
  if (bootstrap) {
    int st;
    waitpid(pid[nranks - 1], &st, 0);
  } else {
    collect(pid[nranks - 1], names[nranks - 1], 1);
  }
  /* the survivors done with the first communicator, then the replacement
   * and the second id for all (a root waits BATON_BOOTSTRAP_TIMEOUT only) */
  if (wait_bytes(ready[0], nranks - 1, 120)) ok(0, "every survivor was done with its first communicator within 120 s");
  char rname[32];
  snprintf(rname, sizeof rname, "%s replacement", bootstrap ? "bootstrap" : "collective");
  pid[nranks] = spawn(nranks - 1, bootstrap, 1, &ids[nranks], ready[1], rname);
  baton_get_unique_id(&id);
  for (int r = 0; r < nranks - 1; r++)
    if (write(ids[r], &id, sizeof id) != (ssize_t)sizeof id) ok(0, "handing rank %d the second id", r);
  if (write(ids[nranks], &id, sizeof id) != (ssize_t)sizeof id) ok(0, "handing the replacement its id");
  for (int r = 0; r < nranks - 1; r++) collect(pid[r], names[r], 0);
  collect(pid[nranks], rname, 0);
  for (int r = 0; r <= nranks; r++)
    if (ids[r]) close(ids[r]);
  close(ready[0]);
  close(ready[1]);
  free(pid);
  free(ids);
}

int main(int argc, char **argv) {
  gpu_opts o;
  if (gpu_opts_read(argc, argv, "gpu_kill", GPU_OPT_GPUS, 2, 64, &o)) return 2;
  nranks = o.nranks;
  ngpus = o.ngpus;
  const char *dir = o.dir;
  /* Enough GPUs?  Asked in a child: the parent stays free of CUDA, so that
   * its forks are too. */
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n >= ngpus ? 0 : 77);
  }
  int pst = 0;
  waitpid(probe, &pst, 0);
  if (!WIFEXITED(pst) || WEXITSTATUS(pst) != 0) {
    printf("1..0 # SKIP fewer than %d GPUs\n", ngpus);
    return 0;
  }
  signal(SIGPIPE, SIG_IGN);   /* a rank that died early: a failed write, reported */
  char num[16];
  snprintf(num, sizeof num, "%d", TIMEOUT_S);
  setenv("BATON_ALGO_DIR", dir, 1);
  setenv("BATON_TIMEOUT", num, 1);
  setenv("BATON_BOOTSTRAP_TIMEOUT", num, 1);
  if (!mkdtemp(outdir)) return 1;
  scenario(0);
  if (!skipped) scenario(1);
  rmdir(outdir);
  if (skipped && tap_n == 0) {
    printf("1..0 # SKIP fewer than %d GPUs\n", ngpus);
    return 0;
  }
  return tap_done();
}
