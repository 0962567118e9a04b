/* gpu_ranks.h -- what the fused-operator GPU tests (gpu_fused, gpu_embed,
 * gpu_moe) share: the command line (--ranks N --dir DIR [--gpus G]
 * [--big] [--net] [--procs]), N ranks over G GPUs (rank r on GPU r % G)
 * driven by one process or, with --procs, by a process each
 * (gpu_ranks_procs), a stream per rank, waiting for the ranks, and the
 * end.  Header-only: each test is one translation unit. */
#ifndef GPU_RANKS_H
#define GPU_RANKS_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton.h"
#include "gpu_opts.h"
#include "tap.h"

static int nranks, ngpus;
static baton_comm **comms;
static cudaStream_t *streams;
/* The ranks this process drives: [rank_lo, rank_hi); every one, but in a
 * process of gpu_ranks_procs its own.  comms and streams hold only those. */
static int rank_lo, rank_hi;

static int dev_of(int r) { return r % ngpus; }

typedef gpu_opts gpu_ranks_opts;

/* Reads the command line into o, nranks and ngpus: 0, or 2 after the
 * usage was printed. */
static int gpu_ranks_args(int argc, char **argv, const char *name, int net_ok, gpu_ranks_opts *o) {
  if (gpu_opts_read(argc, argv, name, GPU_OPT_GPUS | GPU_OPT_BIG | GPU_OPT_PROCS | (net_ok ? GPU_OPT_NET : 0), 1,
                    4096, o))
    return 2;
  nranks = o->nranks;
  ngpus = o->ngpus;
  setenv("BATON_ALGO_DIR", o->dir, 1);
  setenv("BATON_TIMEOUT", "10", 0);
  return 0;
}

/* Brings every rank up in this process (the command line read by
 * gpu_ranks_args): 0 to go on; else the test's exit status (0 after a TAP
 * skip when fewer than G GPUs are present, or after the failed init was
 * reported). */
static int gpu_ranks_up(int *done) {
  *done = 1;
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < ngpus) {
    printf("1..0 # SKIP needs %d GPUs, found %d\n", ngpus, ngpu);
    return 0;
  }
  rank_lo = 0;
  rank_hi = nranks;
  comms = calloc(nranks, sizeof *comms);
  streams = calloc(nranks, sizeof *streams);
  int *devs = calloc(nranks, sizeof *devs);
  for (int r = 0; r < nranks; r++) devs[r] = dev_of(r);
  baton_result e = baton_comm_init_all(comms, nranks, devs);
  free(devs);
  ok(e == baton_success, "init_all of %d ranks over %d GPUs: %s", nranks, ngpus, baton_result_string(e));
  if (e) return tap_done();
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(dev_of(r));
    cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
  }
  *done = 0;
  return 0;
}

/* Parses the command line and brings the ranks up in this process
 * (gpu_ranks_up; a test that takes --procs reads the line itself and runs
 * gpu_ranks_procs or gpu_ranks_up): 0 to go on; else the test's exit
 * status (2: usage). */
__attribute__((unused)) static int gpu_ranks_start(int argc, char **argv, const char *name, int net_ok,
                                                   gpu_ranks_opts *o, int *done) {
  *done = 1;
  if (gpu_ranks_args(argc, argv, name, net_ok, o)) return 2;
  if (o->procs) {
    fprintf(stderr, "%s: --procs is not supported here\n", name);
    return 2;
  }
  return gpu_ranks_up(done);
}

/* A process per rank (the command line's --procs, already read into o):
 * the parent, which touches no CUDA (a forked CUDA context is unusable),
 * makes the unique id and forks rank r's process, which brings up its
 * communicator (baton_comm_init_rank) and stream, runs checks(o), frees
 * them and leaves its TAP lines in a file that the parent renumbers
 * (tap_collect_ranks).  Returns the test's exit status. */
__attribute__((unused)) static int gpu_ranks_procs(const gpu_ranks_opts *o, void (*checks)(const gpu_ranks_opts *o)) {
  baton_unique_id id;
  baton_result e = baton_get_unique_id(&id);
  if (e) {
    ok(0, "unique id created: %s", baton_result_string(e));
    return tap_done();
  }
  char tmpl[] = "/tmp/baton_gpu_ranks_XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  pid_t *pids = calloc(nranks, sizeof *pids);
  for (int r = 0; r < nranks && pids; r++) {
    pids[r] = fork();
    if (pids[r] != 0) continue;
    char path[300];
    snprintf(path, sizeof path, "%s/rank%d", tmpl, r);
    if (!freopen(path, "w", stdout)) _exit(3);
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < ngpus) _exit(77);
    rank_lo = r;
    rank_hi = r + 1;
    comms = calloc(nranks, sizeof *comms);
    streams = calloc(nranks, sizeof *streams);
    cudaSetDevice(dev_of(r));
    e = baton_comm_init_rank(&comms[r], nranks, id, r);
    ok(e == baton_success, "init_rank %d of %d: %s", r, nranks, baton_result_string(e));
    if (e) _exit(tap_done());
    cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    checks(o);
    cudaStreamDestroy(streams[r]);
    baton_comm_destroy(comms[r]);
    fflush(stdout);
    _exit(tap_done());
  }
  int skipped = pids ? tap_collect_ranks(pids, nranks, tmpl) : 1;
  rmdir(tmpl);
  free(pids);
  if (skipped && tap_n == 0) {
    printf("1..0 # SKIP needs %d GPUs\n", ngpus);
    return 0;
  }
  return tap_done();
}

/* A window of `bytes` of device memory (baton_mem_alloc) on this process's
 * first rank's GPU, registered with its communicator (collective: every
 * rank calls it), reported as a TAP line; NULL when either failed (what
 * was allocated freed).  The memory is the caller's to free. */
__attribute__((unused)) static char *gpu_ranks_window(size_t bytes) {
  const int r = rank_lo;
  char *mem = NULL;
  baton_window *w = NULL;
  cudaSetDevice(dev_of(r));
  baton_result e = baton_mem_alloc((void **)&mem, bytes);
  if (!e) e = baton_comm_register(comms[r], mem, bytes, &w);
  ok(!e, "rank %d: a window of %zu bytes registered: %s", r, bytes, baton_result_string(e));
  if (e && mem) baton_mem_free(mem);
  return e ? NULL : mem;
}

/* The elements of `esize` bytes among the `bytes` of device memory at p
 * that are no longer all 0xff bytes (what cudaMemset(p, 0xff, bytes) left):
 * how many a refused call wrote; -1 when they cannot be read. */
__attribute__((unused)) static long gpu_written(const void *p, size_t bytes, size_t esize) {
  unsigned char *h = malloc(bytes ? bytes : 1);
  if (!h || cudaMemcpy(h, p, bytes, cudaMemcpyDeviceToHost)) { free(h); return -1; }
  long n = 0;
  for (size_t i = 0; i + esize <= bytes; i += esize) {
    size_t k = 0;
    while (k < esize && h[i + k] == 0xff) k++;
    n += k < esize;
  }
  free(h);
  return n;
}

/* Waits for every rank's stream; the first error (the stream's, or the
 * communicator's asynchronous one). */
static baton_result sync_all(void) {
  baton_result res = baton_success;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess && !res) res = baton_cuda_error;
    baton_result ae = baton_success;
    baton_comm_get_async_error(comms[r], &ae);
    if (ae && !res) res = ae;
  }
  return res;
}

static inline void CUDART_CB gpu_sleep_30ms(void *arg) {
  (void)arg;
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

/* Queues on rank r's stream a 30 ms hold by the host, then poisons
 * (all ones: NaN) `bytes` at buf: work a call made next on that stream
 * must wait for.  cudaSuccess or the first error. */
static inline cudaError_t gpu_hold_and_poison(int r, void *buf, size_t bytes) {
  cudaError_t e = cudaLaunchHostFunc(streams[r], gpu_sleep_30ms, NULL);
  return e ? e : cudaMemsetAsync(buf, 0xff, bytes, streams[r]);
}

/* CUDA graphs of one call on every rank, one graph per rank's stream. */
typedef struct gpu_graphs {
  cudaGraph_t *g;
  cudaGraphExec_t *x;
} gpu_graphs;

/* Captures issue(arg) -- the ranks' calls, which it makes inside a group
 * on their streams -- into one graph per rank and instantiates them:
 * issue's error, or baton_cuda_error when capturing failed. */
static baton_result gpu_graphs_capture(gpu_graphs *G, baton_result (*issue)(void *), void *arg) {
  G->g = calloc(nranks, sizeof *G->g);
  G->x = calloc(nranks, sizeof *G->x);
  int okc = G->g && G->x;
  for (int r = rank_lo; r < rank_hi && okc; r++) {
    cudaSetDevice(dev_of(r));
    okc = cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeRelaxed) == cudaSuccess;
  }
  baton_result e = okc ? issue(arg) : baton_cuda_error;
  for (int r = rank_lo; r < rank_hi && G->g; r++) {
    cudaSetDevice(dev_of(r));
    if (cudaStreamEndCapture(streams[r], &G->g[r]) || cudaGraphInstantiate(&G->x[r], G->g[r], 0)) okc = 0;
  }
  return e ? e : okc ? baton_success : baton_cuda_error;
}

/* Launches every rank's graph and waits (sync_all). */
static baton_result gpu_graphs_replay(const gpu_graphs *G) {
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (cudaGraphLaunch(G->x[r], streams[r])) return baton_cuda_error;
  }
  return sync_all();
}

static void gpu_graphs_free(gpu_graphs *G) {
  for (int r = rank_lo; r < rank_hi && G->g; r++) {
    cudaSetDevice(dev_of(r));
    if (G->x && G->x[r]) cudaGraphExecDestroy(G->x[r]);
    if (G->g[r]) cudaGraphDestroy(G->g[r]);
  }
  free(G->g);
  free(G->x);
}

/* Destroys the streams and communicators; the TAP plan and exit status. */
static int gpu_ranks_end(void) {
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(dev_of(r));
    cudaStreamDestroy(streams[r]);
    baton_comm_destroy(comms[r]);
  }
  free(comms);
  free(streams);
  return tap_done();
}

#endif
