/* gpu_faults.c -- runtime faults on real GPUs, every rank in one process:
 * a rank that never calls (the others' watchdog, BATON_TIMEOUT, ends
 * them), a rank whose stream is stuck behind work that never finishes, an
 * abort from the host while the others wait, and aborting every
 * communicator while other work holds the GPU.  After each, every
 * communicator is destroyed and a new set created in the same process must
 * compute right: a fault costs the communicator, never the process.
 *
 * Usage: gpu_faults --ranks N --dir DIR [--gpus G]
 *   DIR holds IR files for N ranks (tests/gpu_runtime.sh prepares it);
 *   rank r runs on GPU r % G (G defaults to N).  Each fault runs in a
 *   child process of its own (BATON_TIMEOUT is read once a process), and
 *   the parent, which touches no CUDA, relays its TAP lines.  Skips when
 *   fewer than G GPUs are present. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "gpu_opts.h"
#include "tap.h"

#define COUNT (1 << 16)    /* f32 elements of each call */
#define SLACK_S 10.0       /* what an error may take beyond the wait it ends */

static int nranks, ngpus;
static baton_comm **comms;
static cudaStream_t *streams;
static float **din, **dout;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A fresh set of communicators, streams and buffers; rank r's input holds
 * r + 1 everywhere.  Returns 0 on success. */
static int setup(void) {
  int *devs = calloc(nranks, sizeof *devs);
  for (int r = 0; r < nranks; r++) devs[r] = r % ngpus;
  baton_result e = baton_comm_init_all(comms, nranks, devs);
  free(devs);
  if (e) {
    ok(0, "communicators of %d ranks created: %s", nranks, baton_result_string(e));
    return 1;
  }
  float *h = malloc(COUNT * sizeof *h);
  int bad = !h;
  for (int r = 0; r < nranks && !bad; r++) {
    for (int i = 0; i < COUNT; i++) h[i] = (float)(r + 1);
    cudaSetDevice(r % ngpus);
    bad |= cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking) != cudaSuccess;
    bad |= cudaMalloc((void **)&din[r], COUNT * sizeof(float)) != cudaSuccess;
    bad |= cudaMalloc((void **)&dout[r], COUNT * sizeof(float)) != cudaSuccess;
    bad |= cudaMemcpy(din[r], h, COUNT * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess;
  }
  free(h);
  if (bad) ok(0, "buffers and streams of %d ranks allocated", nranks);
  return bad;
}

/* Destroys everything setup made; returns the seconds it took (a failed
 * communicator must not make destruction wait). */
static double teardown(int *failed) {
  double t0 = now();
  *failed = 0;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(r % ngpus);
    if (din[r]) cudaFree(din[r]);
    if (dout[r]) cudaFree(dout[r]);
    din[r] = dout[r] = NULL;
    if (streams[r]) cudaStreamDestroy(streams[r]);
    streams[r] = NULL;
    if (comms[r] && baton_comm_destroy(comms[r]) != baton_success) (*failed)++;
    comms[r] = NULL;
  }
  return now() - t0;
}

/* AllReduce on ranks [0, upto) in one group (ranks sharing a GPU must be
 * grouped); the group's result. */
static baton_result launch(int upto) {
  baton_group_start();
  for (int r = 0; r < upto; r++) baton_allreduce(din[r], dout[r], COUNT, baton_f32, baton_sum, comms[r], streams[r]);
  return baton_group_end();
}

/* Waits for the streams of ranks [from, to); returns the seconds waited
 * and counts the ranks whose asynchronous error is `want`. */
static double wait_ranks(int from, int to, baton_result want, int *matched) {
  double t0 = now();
  *matched = 0;
  for (int r = from; r < to; r++) {
    cudaSetDevice(r % ngpus);
    cudaStreamSynchronize(streams[r]);
    baton_result e = baton_success;
    baton_comm_get_async_error(comms[r], &e);
    *matched += e == want;
  }
  return now() - t0;
}

/* A whole AllReduce on fresh communicators gives every rank the sum. */
static void check_fresh_set(const char *after) {
  if (setup()) return;
  baton_result e = launch(nranks);
  int matched;
  wait_ranks(0, nranks, baton_success, &matched);
  float *h = malloc(COUNT * sizeof *h);
  int64_t wrong = 0;
  float want = (float)nranks * (nranks + 1) / 2;
  for (int r = 0; r < nranks && h; r++) {
    cudaSetDevice(r % ngpus);
    if (cudaMemcpy(h, dout[r], COUNT * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) wrong += COUNT;
    else
      for (int i = 0; i < COUNT; i++) wrong += h[i] != want;
  }
  free(h);
  ok(!e && matched == nranks && !wrong, "after %s, a new set of %d communicators in the same process sums right "
     "(%s, %d ranks without error, %lld wrong)", after, nranks, baton_result_string(e), matched, (long long)wrong);
  int failed;
  teardown(&failed);
}

/* One whole AllReduce before the fault: the set works, and the first
 * call's one-time set-up (scratch) is behind it. */
static int warm(void) {
  baton_result e = launch(nranks);
  int matched;
  wait_ranks(0, nranks, baton_success, &matched);
  if (e || matched != nranks) ok(0, "a first AllReduce on every rank: %s, %d ranks without error",
                                 baton_result_string(e), matched);
  return e || matched != nranks;
}

/* Ranks 0..N-2 call; rank N-1 never does.  Each waiting rank must stop
 * with baton_timeout within BATON_TIMEOUT and a margin, and refuse later
 * calls; the communicators are destroyed promptly. */
static void fault_missing_rank(int timeout_s) {
  if (setup() || warm()) return;
  double t0 = now();
  baton_result e = launch(nranks - 1);
  int matched;
  wait_ranks(0, nranks - 1, baton_timeout, &matched);
  double took = now() - t0;
  ok(!e && matched == nranks - 1 && took < timeout_s + SLACK_S,
     "a rank that never calls: the other %d end with baton_timeout in %.1f s (BATON_TIMEOUT=%d; %d did)",
     nranks - 1, took, timeout_s, matched);
  baton_group_start();
  baton_result again = baton_allreduce(din[0], dout[0], COUNT, baton_f32, baton_sum, comms[0], streams[0]);
  baton_group_end();
  ok(again == baton_timeout, "a later call on a timed-out communicator is refused with %s",
     baton_result_string(again));
  int failed;
  double d = teardown(&failed);
  ok(!failed && d < SLACK_S, "the failed communicators are destroyed in %.2f s", d);
  check_fresh_set("a rank that never called");
}

/* Host function that holds a stream until *arg is set (at most hold_s
 * seconds). */
static double hold_s = 60;
static void CUDART_CB hold(void *arg) {
  volatile int *go = arg;
  double t0 = now();
  while (!*go && now() - t0 < hold_s) usleep(1000);
}

/* Every rank calls, but rank N-1's stream is held behind work that does
 * not finish: its kernel is queued and never starts while the others
 * wait.  They must time out; when the work is released, rank N-1's own
 * call must end too (its peers are gone) instead of hanging. */
static void fault_stuck_rank(int timeout_s) {
  if (setup() || warm()) return;
  int last = nranks - 1;
  volatile int go = 0;
  cudaStream_t side;
  cudaEvent_t ev;
  cudaSetDevice(last % ngpus);
  int bad = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
            cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
            cudaLaunchHostFunc(side, hold, (void *)&go) != cudaSuccess || cudaEventRecord(ev, side) != cudaSuccess ||
            cudaStreamWaitEvent(streams[last], ev, 0) != cudaSuccess;
  double t0 = now();
  baton_result e = bad ? baton_cuda_error : launch(nranks);
  int matched;
  wait_ranks(0, last, baton_timeout, &matched);
  double took = now() - t0;
  ok(!e && matched == last && took < timeout_s + SLACK_S,
     "a rank whose stream is stuck: the other %d end with baton_timeout in %.1f s (%d did)", last, took, matched);
  go = 1;
  int lm;
  double lt = wait_ranks(last, nranks, baton_timeout, &lm);
  ok(lm == 1 && lt < timeout_s + SLACK_S, "released, the stuck rank's call ends with baton_timeout in %.1f s, "
     "not hanging on peers that left", lt);
  cudaSetDevice(last % ngpus);
  cudaStreamSynchronize(side);
  cudaEventDestroy(ev);
  cudaStreamDestroy(side);
  int failed;
  double d = teardown(&failed);
  ok(!failed && d < SLACK_S, "the failed communicators are destroyed in %.2f s", d);
  check_fresh_set("a stuck rank");
}

/* Ranks 0..N-2 call and wait for rank N-1, which aborts from the host
 * instead of calling.  With a long BATON_TIMEOUT, the abort (not the
 * watchdog) must end every waiting kernel, within seconds. */
static void fault_abort(int timeout_s) {
  if (setup() || warm()) return;
  baton_result e = launch(nranks - 1);
  usleep(300 * 1000);
  double t0 = now();
  baton_result ae = baton_comm_abort(comms[nranks - 1]);
  int matched;
  wait_ranks(0, nranks - 1, baton_aborted, &matched);
  double took = now() - t0;
  ok(!e && !ae && matched == nranks - 1 && took < SLACK_S && took < timeout_s / 2.0,
     "rank %d aborts from the host while %d wait: they end with baton_aborted %.2f s later (BATON_TIMEOUT=%d; %d did)",
     nranks - 1, nranks - 1, took, timeout_s, matched);
  baton_group_start();
  baton_result again = baton_allreduce(din[0], dout[0], COUNT, baton_f32, baton_sum, comms[0], streams[0]);
  baton_group_end();
  ok(again == baton_aborted, "a later call on an aborted communicator is refused with %s", baton_result_string(again));
  int failed;
  double d = teardown(&failed);
  ok(!failed && d < SLACK_S, "the aborted communicators are destroyed in %.2f s", d);
  check_fresh_set("an abort");
}

/* Another stream of rank 0's GPU is held behind work that does not end
 * (as another library's kernel held by a dead peer until its own abort).
 * Aborting and destroying every communicator must not wait for it, as
 * NCCL's abort does not: PyTorch aborts its communicators one after
 * another, and one waiting on the GPU would wait for the next's abort. */
static void fault_abort_busy(int timeout_s) {
  (void)timeout_s;
  if (setup() || warm()) return;
  volatile int go = 0;
  cudaStream_t side = NULL;
  hold_s = 8;   /* the longest a destruction that waits on the GPU would take here */
  cudaSetDevice(0);
  int bad = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess ||
            cudaLaunchHostFunc(side, hold, (void *)&go) != cudaSuccess;
  double t0 = now();
  int failed = 0;
  for (int r = 0; r < nranks; r++) failed += baton_comm_abort(comms[r]) != baton_success;
  for (int r = 0; r < nranks; r++) {
    failed += baton_comm_destroy(comms[r]) != baton_success;
    comms[r] = NULL;
  }
  double took = now() - t0;
  go = 1;
  ok(!bad && !failed && took < 2.0, "with another stream of GPU 0 held, %d communicators aborted and destroyed in "
     "%.2f s (at most 2; the stream held for %.0f s)", nranks, took, hold_s);
  cudaStreamSynchronize(side);
  cudaStreamDestroy(side);
  teardown(&failed);
  check_fresh_set("an abort while another stream was held");
}

/* Runs one fault in a child process with BATON_TIMEOUT=timeout_s; relays
 * its TAP lines.  Returns 77 when the child found too few GPUs. */
static int run_child(void (*fault)(int), int timeout_s, const char *name) {
  char path[] = "/tmp/baton_gpu_faults_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 1;
  close(fd);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(path, "w", stdout)) _exit(3);
    char t[16];
    snprintf(t, sizeof t, "%d", timeout_s);
    setenv("BATON_TIMEOUT", t, 1);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < ngpus) _exit(77);
    fault(timeout_s);
    fflush(stdout);
    _exit(tap_failed ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
    remove(path);
    return 77;
  }
  int points = tap_relay(path, name);
  remove(path);
  ok(WIFEXITED(st) && points > 0, "%s: the process ended by itself (%s %d) after %d checks", name,
     WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), points);
  return 0;
}

int main(int argc, char **argv) {
  gpu_opts o;
  if (gpu_opts_read(argc, argv, "gpu_faults", GPU_OPT_GPUS, 2, 4096, &o)) return 2;
  nranks = o.nranks;
  ngpus = o.ngpus;
  setenv("BATON_ALGO_DIR", o.dir, 1);
  comms = calloc(nranks, sizeof *comms);
  streams = calloc(nranks, sizeof *streams);
  din = calloc(nranks, sizeof *din);
  dout = calloc(nranks, sizeof *dout);
  if (run_child(fault_missing_rank, 3, "missing rank") == 77) {
    printf("1..0 # SKIP needs %d GPUs\n", ngpus);
    return 0;
  }
  run_child(fault_stuck_rank, 3, "stuck rank");
  run_child(fault_abort, 120, "host abort");
  run_child(fault_abort_busy, 120, "abort with the GPU busy");
  return tap_done();
}
