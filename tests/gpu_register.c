/* gpu_register.c -- registered windows on GPUs, a process per GPU
 * (docs/RUNTIME.md, "Registered buffers"):
 *   - eager AllReduce, AllGather, ReduceScatter and AllToAll on buffers in
 *     windows every rank registered together, checked element by element,
 *     where the direct programs that reach the peers' own buffers run; in
 *     place too (a ReduceScatter's output at each rank's own offset);
 *   - a Broadcast whose outputs are in windows and whose root's input is
 *     not: every rank runs it alike, and right;
 *   - what registration refuses, every rank alike: host memory, a range
 *     past its allocation, the same range twice, sizes that differ, a
 *     deregistration the ranks disagree on; and NULL arguments;
 *   - a window whose memory was freed and allocated again: calls on the
 *     new memory are right;
 *   - ranks whose calls disagree (one on its windows, the others not):
 *     every rank gets an error in bounded time, none crashes;
 *   - BATON_TRACE: each rank's timeline of its last call, a direct one.
 * Usage: gpu_register --ranks N --dir DIR [--gpus G] (DIR/default: the
 * default set; rank r on GPU r % G, G = N unless given). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baton.h"
#include "rt_comm.h"
#include "gpu_opts.h"
#include "tap.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

static int nranks, rank;
static baton_comm *comm;
static cudaStream_t st;

/* Input element i of rank r: small integers, so float sums are exact. */
static float val(int r, int64_t i) { return (float)((i * 7 + r * 3) % 13); }

enum { AR, AG, RS, A2A };
static const char *const coll_name[] = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll"};
static const ir_coll coll_ir[] = {IR_COLL_ALLREDUCE, IR_COLL_ALLGATHER, IR_COLL_REDUCESCATTER, IR_COLL_ALLTOALL};

/* Elements of the input and output of collective k for n per block. */
static int64_t in_elems(int k, int64_t n) { return k == RS || k == A2A ? n * nranks : n; }
static int64_t out_elems(int k, int64_t n) { return k == AG || k == A2A ? n * nranks : n; }

/* What output element i of this rank must hold. */
static float want(int k, int64_t n, int64_t i) {
  float s = 0;
  switch (k) {
  case AR: for (int q = 0; q < nranks; q++) s += val(q, i); return s;
  case AG: return val((int)(i / n), i % n);
  case RS: for (int q = 0; q < nranks; q++) s += val(q, rank * n + i); return s;
  default: return val((int)(i / n), rank * n + i % n);   /* block q of rank q's input */
  }
}

static baton_result run(int k, const void *in, void *out, int64_t n) {
  switch (k) {
  case AR: return baton_allreduce(in, out, n, baton_f32, baton_sum, comm, st);
  case AG: return baton_allgather(in, out, n, baton_f32, comm, st);
  case RS: return baton_reducescatter(in, out, n, baton_f32, baton_sum, comm, st);
  default: return baton_alltoall(in, out, n, baton_f32, comm, st);
  }
}

/* The end of a call of collective k made on this rank's stream (its
 * result e): waits for it, takes its asynchronous error, and counts into
 * *wrong the elements of out (n per block) that are not what they must be
 * (`how` names the call in diagnostics).  The call's result. */
static baton_result finish(int k, const float *out, int64_t n, float *h, int64_t *wrong, baton_result e,
                           const char *how) {
  int64_t no = out_elems(k, n);
  if (cudaStreamSynchronize(st) != cudaSuccess && !e) e = baton_cuda_error;
  baton_result ae = baton_success;
  baton_comm_get_async_error(comm, &ae);
  if (ae && !e) e = ae;
  cudaMemcpy(h, out, no * 4, cudaMemcpyDeviceToHost);
  *wrong = 0;
  for (int64_t i = 0; i < no; i++)
    if (h[i] != want(k, n, i) && (*wrong)++ < 3)
      diag("rank %d %s of %lld%s: element %lld is %g, expected %g", rank, coll_name[k], (long long)n, how,
           (long long)i, h[i], want(k, n, i));
  return e;
}

/* Runs collective k eagerly on in/out (n per block), alone or in a group
 * of its own: fills the input, runs, counts wrong output elements into
 * *wrong.  The call's result. */
static baton_result call_in(int grouped, int k, float *in, float *out, int64_t n, float *h, int64_t *wrong) {
  int64_t ni = in_elems(k, n), no = out_elems(k, n);
  for (int64_t i = 0; i < ni; i++) h[i] = val(rank, i);
  cudaMemcpyAsync(in, h, ni * 4, cudaMemcpyHostToDevice, st);
  cudaMemsetAsync(out, 0xff, no * 4, st);
  if (grouped) baton_group_start();
  baton_result e = run(k, in, out, n);
  if (grouped && !e) e = baton_group_end();
  else if (grouped) baton_group_end();
  return finish(k, out, n, h, wrong, e, "");
}

static baton_result call(int k, float *in, float *out, int64_t n, float *h, int64_t *wrong) {
  return call_in(0, k, in, out, n, h, wrong);
}

/* Whether the program the call would run reaches its peers' own buffers. */
static int reaches_peers(int k, const void *in, const void *out, int64_t n) {
  int ai = rt_comm_choose(comm, coll_ir[k], in, out, (size_t)n, baton_f32, st);
  return ai >= 0 && comm->dplans && comm->dplans[ai].ok && comm->dplans[ai].peer_io;
}

/* Collective k (AllGather or ReduceScatter) in place on span, as NCCL
 * lays it out (AllGather's input block `rank` of its output,
 * ReduceScatter's output block `rank` of its input), n per block: fills
 * the input, runs, counts wrong output elements into *wrong. */
static baton_result call_inplace(int k, float *span, int64_t n, float *h, int64_t *wrong) {
  float *in = k == AG ? span + rank * n : span, *out = k == RS ? span + rank * n : span;
  int64_t ni = in_elems(k, n);
  for (int64_t i = 0; i < ni; i++) h[i] = val(rank, i);
  cudaMemsetAsync(span, 0xff, (size_t)(n * nranks) * 4, st);
  cudaMemcpyAsync(in, h, ni * 4, cudaMemcpyHostToDevice, st);
  return finish(k, out, n, h, wrong, run(k, in, out, n), " in place");
}

static const int64_t sizes[] = {4096, 262144 + 5, 2097152 + 3};
#define NSIZES 3
#define CAP(n) ((size_t)((n) + 1024) * 4 * (size_t)nranks)

/* Every collective at every size on windows, at the same offset on every
 * rank (and, in place, AllReduce on its output window). */
static void check_calls(void) {
  size_t cap = CAP(sizes[NSIZES - 1]);
  char *a = NULL, *b = NULL;
  float *h = malloc(cap);
  baton_window *wa = NULL, *wb = NULL;
  int good = h && !baton_mem_alloc((void **)&a, cap) && !baton_mem_alloc((void **)&b, cap);
  good = good && !baton_comm_register(comm, a, cap, &wa) && !baton_comm_register(comm, b, cap, &wb);
  ok(good, "rank %d: two windows of %zu bytes registered", rank, cap);
  if (!good) return;
  float *in = (float *)(a + 256), *out = (float *)(b + 4096);   /* the same offsets on every rank */
  int direct = 0;
  for (int k = AR; k <= A2A; k++)
    for (int s = 0; s < NSIZES; s++) {
      int64_t n = sizes[s], wrong = 0;
      int peers = reaches_peers(k, in, out, n);
      direct += peers;
      baton_result e = call(k, in, out, n, h, &wrong);
      ok(!e && !wrong, "rank %d: %s of %lld floats a block on windows: %s, %lld wrong (%s%s)", rank, coll_name[k],
         (long long)n, baton_result_string(e), (long long)wrong, baton_comm_last_algorithm(comm),
         peers ? ", on the peers' own buffers" : "");
    }
  /* In a group (as the NCCL drop-in makes every call): the same program. */
  int64_t n = sizes[2], wrong = 0;
  const char *alone = baton_comm_last_algorithm(comm);   /* AllToAll's, the loop's last call */
  baton_result e = call_in(1, A2A, in, out, n, h, &wrong);
  ok(!e && !wrong && !strcmp(alone, baton_comm_last_algorithm(comm)),
     "rank %d: AllToAll of %lld floats a block in a group on windows: %s, %lld wrong (%s; alone %s)", rank,
     (long long)n, baton_result_string(e), (long long)wrong, baton_comm_last_algorithm(comm), alone);
  n = sizes[1];
  for (int64_t i = 0; i < n; i++) h[i] = val(rank, i);
  cudaMemcpy(out, h, n * 4, cudaMemcpyHostToDevice);
  e = baton_allreduce(out, out, n, baton_f32, baton_sum, comm, st);
  cudaStreamSynchronize(st);
  cudaMemcpy(h, out, n * 4, cudaMemcpyDeviceToHost);
  for (int64_t i = 0; i < n; i++) wrong += h[i] != want(AR, n, i);
  ok(!e && !wrong, "rank %d: AllReduce of %lld floats in place on a window: %lld wrong (%s)", rank, (long long)n,
     (long long)wrong, baton_comm_last_algorithm(comm));
  /* AllGather and ReduceScatter in place on a window: each rank's input
   * (AllGather) or output (ReduceScatter) at its own offset of the span. */
  for (int k = AG; k <= RS; k++)
    for (int s = 0; s < NSIZES; s++) {
      n = sizes[s];
      int peers = reaches_peers(k, k == AG ? out + rank * n : out, k == RS ? out + rank * n : out, n);
      e = call_inplace(k, out, n, h, &wrong);
      ok(!e && !wrong, "rank %d: %s of %lld floats a block in place on a window: %s, %lld wrong (%s%s)", rank,
         coll_name[k], (long long)n, baton_result_string(e), (long long)wrong, baton_comm_last_algorithm(comm),
         peers ? ", on the peers' own buffers" : "");
    }
  /* In-place AllToAll on a window: each pair of ranks trades its blocks
   * where they are (xchg), block q of rank r ending as block r of rank q
   * (a count its 4 chunks a block divide: for others the program through
   * scratch, whose one chunk divides any, is chosen first). */
  n = sizes[2] + 1;
  wrong = 0;
  for (int q = 0; q < nranks; q++)
    for (int64_t i = 0; i < n; i++) h[q * n + i] = (float)(rank * 1000 + q * 100 + i % 97);
  cudaMemcpy(out, h, (size_t)(n * nranks) * 4, cudaMemcpyHostToDevice);
  int swapped = reaches_peers(A2A, out, out, n);
  e = baton_alltoall(out, out, n, baton_f32, comm, st);
  cudaStreamSynchronize(st);
  cudaMemcpy(h, out, (size_t)(n * nranks) * 4, cudaMemcpyDeviceToHost);
  for (int q = 0; q < nranks; q++)
    for (int64_t i = 0; i < n; i++) wrong += h[q * n + i] != (float)(q * 1000 + rank * 100 + i % 97);
  ok(!e && !wrong && swapped, "rank %d: AllToAll of %lld floats a block in place on a window: %lld wrong (%s%s)", rank,
     (long long)n, (long long)wrong, baton_comm_last_algorithm(comm), swapped ? ", on the peers' own buffers" : "");
  ok(direct > 0, "rank %d: %d of the calls ran a direct program on the peers' own buffers", rank, direct);
  ok(!baton_comm_deregister(comm, wa) && !baton_comm_deregister(comm, wb), "rank %d: both deregistered", rank);
  /* Deregistered, the windows are buffers like any other: a call reaches
   * its peers' buffers only where its size has it exchange them for
   * itself (BATON_EAGER_EXCHANGE_MB), and is right either way. */
  n = sizes[2];
  wrong = 0;
  const int exchanges = rt_direct_eager_exchange(comm, coll_ir[AR], (size_t)n, baton_f32);
  ok(!reaches_peers(AR, in, out, n) || exchanges, "rank %d: after deregistration, no call reaches the peers' buffers "
     "through the windows%s", rank, exchanges ? " (this size exchanges them for the call)" : "");
  e = call(AR, in, out, n, h, &wrong);
  ok(!e && !wrong, "rank %d: AllReduce of %lld floats a block on the deregistered buffers: %s, %lld wrong (%s)", rank,
     (long long)n, baton_result_string(e), (long long)wrong, baton_comm_last_algorithm(comm));
  baton_mem_free(a);
  baton_mem_free(b);
  free(h);
}

/* A Broadcast from rank 0 of 8 MiB and more a peer (where eager calls
 * exchange their buffers) whose outputs lie in windows on every rank and
 * whose root's input does not: every rank must run it alike (rooted
 * calls never take their windows) and right, where the ranks off the root
 * took their windows and the root exchanged, each waiting for the other. */
static void check_rooted(void) {
  const int64_t n = ((int64_t)8 << 20) / 4 * (nranks - 1) + 5;
  const size_t bytes = (size_t)n * 4 + 4096;
  char *b = NULL;
  float *in = NULL, *h = malloc((size_t)n * 4);
  baton_window *w = NULL;
  int good = h && !baton_mem_alloc((void **)&b, bytes) && !baton_comm_register(comm, b, bytes, &w) &&
             (rank != 0 || cudaMalloc((void **)&in, (size_t)n * 4) == cudaSuccess);
  float *out = (float *)(b + 4096);
  for (int64_t i = 0; good && i < n; i++) h[i] = val(0, i);
  if (good && rank == 0) cudaMemcpy(in, h, (size_t)n * 4, cudaMemcpyHostToDevice);
  if (good) cudaMemset(out, 0xff, (size_t)n * 4);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  baton_result e = good ? baton_broadcast(rank == 0 ? in : out, out, (size_t)n, baton_f32, 0, comm, st)
                        : baton_internal_error;
  if (good && cudaStreamSynchronize(st) != cudaSuccess && !e) e = baton_cuda_error;
  baton_result ae = baton_success;
  baton_comm_get_async_error(comm, &ae);
  if (ae && !e) e = ae;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int64_t wrong = 0;
  if (good) cudaMemcpy(h, out, (size_t)n * 4, cudaMemcpyDeviceToHost);
  for (int64_t i = 0; good && i < n; i++) wrong += h[i] != val(0, i);
  ok(good && !e && !wrong, "rank %d: Broadcast of %lld floats, the outputs in windows and the root's input not: %s, "
     "%lld wrong, %.1f s (%s)", rank, (long long)n, baton_result_string(e), (long long)wrong,
     (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, baton_comm_last_algorithm(comm));
  if (w) baton_comm_deregister(comm, w);
  if (b) baton_mem_free(b);
  if (in) cudaFree(in);
  free(h);
}

/* Registrations every rank refuses, each naming the rank at fault. */
static void check_refusals(void) {
  baton_window *w = NULL;
  ok(baton_comm_register(NULL, &w, 8, &w) == baton_invalid_argument &&
     baton_comm_register(comm, NULL, 8, &w) == baton_invalid_argument &&
     baton_comm_register(comm, &w, 0, &w) == baton_invalid_argument &&
     baton_comm_register(comm, &w, 8, NULL) == baton_invalid_argument,
     "rank %d: NULL comm, buffer or handle, or 0 bytes: invalid argument", rank);
  char *dev = NULL;
  baton_mem_alloc((void **)&dev, 1 << 20);
  char host[4096];
  /* Rank 0 passes host memory; the others a good buffer: all refuse. */
  baton_result e = baton_comm_register(comm, rank == 0 ? host : dev, sizeof host, &w);
  ok(e == baton_invalid_argument && !w, "rank %d: rank 0's host memory: every rank refuses (%s)", rank,
     baton_result_string(e));
  e = baton_comm_register(comm, dev + 4096, 1 << 20, &w);
  ok(e == baton_invalid_argument && !w, "rank %d: a range past the end of its allocation: refused (%s)", rank,
     baton_result_string(e));
  e = baton_comm_register(comm, dev, rank == nranks - 1 ? 8192 : 4096, &w);
  ok(e == baton_invalid_argument && !w, "rank %d: sizes that differ between ranks: refused (%s)", rank,
     baton_result_string(e));
  baton_window *w1 = NULL, *w2 = NULL;
  ok(!baton_comm_register(comm, dev, 4096, &w1) && w1, "rank %d: a window of 4096 bytes", rank);
  e = baton_comm_register(comm, dev + 2048, 4096, &w);
  ok(e == baton_invalid_argument && !w, "rank %d: a range overlapping it: refused (%s)", rank,
     baton_result_string(e));
  ok(!baton_comm_register(comm, dev + 8192, 4096, &w2) && w2, "rank %d: a second window beside it", rank);
  e = baton_comm_deregister(comm, rank == 0 ? w1 : w2);
  ok(e == baton_invalid_argument, "rank %d: ranks deregistering different windows: refused (%s)", rank,
     baton_result_string(e));
  e = baton_comm_deregister(comm, (baton_window *)host);
  ok(e == baton_invalid_argument, "rank %d: deregistering what is no window: refused (%s)", rank,
     baton_result_string(e));
  ok(!baton_comm_deregister(comm, w1) && !baton_comm_deregister(comm, w2), "rank %d: both deregistered together",
     rank);
  ok(baton_mem_alloc(NULL, 8) == baton_invalid_argument && baton_mem_alloc((void **)&w, 0) == baton_invalid_argument,
     "rank %d: baton_mem_alloc of NULL or 0 bytes: invalid argument", rank);
  baton_mem_free(dev);
}

/* A window whose memory every rank frees and allocates again: calls on
 * the new memory must not use the old mapping. */
static void check_freed(void) {
  int64_t n = sizes[2], wrong = 0;
  size_t cap = CAP(n);
  float *h = malloc(cap);
  char *a = NULL, *b = NULL;
  baton_window *wa = NULL, *wb = NULL;
  int good = h && !baton_mem_alloc((void **)&a, cap) && !baton_mem_alloc((void **)&b, cap) &&
             !baton_comm_register(comm, a, cap, &wa) && !baton_comm_register(comm, b, cap, &wb);
  baton_result e = good ? call(AR, (float *)a, (float *)b, n, h, &wrong) : baton_internal_error;
  good = good && !e && !wrong;
  baton_mem_free(a);
  baton_mem_free(b);
  a = b = NULL;
  good = good && !baton_mem_alloc((void **)&a, cap) && !baton_mem_alloc((void **)&b, cap);
  e = good ? call(AR, (float *)a, (float *)b, n, h, &wrong) : baton_internal_error;
  ok(good && !e && !wrong, "rank %d: AllReduce on memory allocated again after its window's was freed: %s, %lld "
     "wrong (%s)", rank, baton_result_string(e), (long long)wrong, baton_comm_last_algorithm(comm));
  ok(!baton_comm_deregister(comm, wa) && !baton_comm_deregister(comm, wb), "rank %d: the stale windows "
     "deregistered", rank);
  baton_mem_free(a);
  baton_mem_free(b);
  free(h);
}

/* How long past BATON_TIMEOUT a rank may take to end a call that cannot
 * finish: the waiting rank's deadline, then its peers learning that it
 * failed (or that its process is gone). */
#define DISAGREE_SLACK_S 50

/* Rank 0 calls on its windows, the others on plain memory: each rank's
 * call must end with an error within BATON_TIMEOUT and a margin (the
 * variable as this run has it: main sets 10 unless the caller set it). */
static void check_disagree(void) {
  const char *tv = getenv("BATON_TIMEOUT");
  const double t = tv ? atof(tv) : 0, bound = (t > 0 ? t : 10) + DISAGREE_SLACK_S;
  int64_t n = sizes[2], wrong = 0;
  size_t cap = CAP(n);
  float *h = malloc(cap);
  char *a = NULL, *b = NULL, *pa = NULL, *pb = NULL;
  baton_window *wa = NULL, *wb = NULL;
  int good = h && !baton_mem_alloc((void **)&a, cap) && !baton_mem_alloc((void **)&b, cap) &&
             !baton_mem_alloc((void **)&pa, cap) && !baton_mem_alloc((void **)&pb, cap) &&
             !baton_comm_register(comm, a, cap, &wa) && !baton_comm_register(comm, b, cap, &wb);
  int peers = good && reaches_peers(AR, a, b, n);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  baton_result e = good ? call(AR, (float *)(rank == 0 ? a : pa), (float *)(rank == 0 ? b : pb), n, h, &wrong)
                        : baton_internal_error;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (!peers) {
    ok(1, "rank %d: # SKIP no program reaches the peers' buffers at %lld floats", rank, (long long)n);
  } else {
    ok(e != baton_success && s < bound, "rank %d: rank 0 on its windows, the others not: %s after %.1f s (at most "
       "%.0f)", rank, baton_result_string(e), s, bound);
    if (rank == 0)
      ok(e == baton_invalid_argument || e == baton_timeout || e == baton_aborted,
         "rank 0: its call stops (%s)", baton_result_string(e));
  }
  free(h);
}

int main(int argc, char **argv) {
  gpu_opts o;
  if (gpu_opts_read(argc, argv, "gpu_register", GPU_OPT_GPUS, 2, 4096, &o)) return 2;
  nranks = o.nranks;
  char algo[4096];
  snprintf(algo, sizeof algo, "%s/default", o.dir);
  setenv("BATON_ALGO_DIR", algo, 1);
  setenv("BATON_TIMEOUT", "10", 0);
  char tmpl[] = "/tmp/baton_gpu_register_XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  char trace[300];   /* each rank's timeline of its last call (a direct one); before baton reads its parameters */
  snprintf(trace, sizeof trace, "%s/trace", tmpl);
  setenv("BATON_TRACE", trace, 1);
  baton_unique_id id;
  if (baton_get_unique_id(&id)) {
    ok(0, "unique id created");
    return tap_done();
  }
  pid_t *pids = calloc((size_t)nranks, sizeof *pids);
  for (int r = 0; r < nranks; r++) {
    if ((pids[r] = fork()) != 0) continue;
    char path[300];
    snprintf(path, sizeof path, "%s/rank%d", tmpl, r);
    if (!freopen(path, "w", stdout)) _exit(3);
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < o.ngpus) _exit(77);
    rank = r;
    cudaSetDevice(r % o.ngpus);
    baton_result e = baton_comm_init_rank(&comm, nranks, id, r);
    ok(e == baton_success, "init_rank %d of %d: %s", r, nranks, baton_result_string(e));
    if (e) _exit(tap_done());
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    check_calls();
    check_rooted();
    check_refusals();
    check_freed();
    check_disagree();   /* last: it leaves the communicator failed */
    baton_comm_destroy(comm);
    fflush(stdout);
    _exit(tap_done());
  }
  int skipped = tap_collect_ranks(pids, nranks, tmpl);
  for (int r = 0; r < nranks && !skipped; r++) {
    char path[400], line[512];
    snprintf(path, sizeof path, "%s.%d.csv", trace, r);
    FILE *f = fopen(path, "r");
    int rows = 0, enter = 0, exits = 0, direct = 0, header = 0;
    while (f && fgets(line, sizeof line, f)) {
      if (!rows++) header = !strncmp(line, "rank,algo,threads,block,lane,tb,event,step,tile,ns,clk", 54);
      direct += strstr(line, "direct") != NULL;
      enter += strstr(line, ",enter,") != NULL;
      exits += strstr(line, ",exit,") != NULL;
    }
    if (f) fclose(f);
    remove(path);
    ok(header && direct > 0 && enter > 0 && enter == exits, "rank %d: BATON_TRACE wrote the last (direct) call's "
       "timeline: %d rows, %d blocks entered and left", r, rows - 1, enter);
  }
  rmdir(tmpl);
  free(pids);
  if (skipped && tap_n == 0) {
    printf("1..0 # SKIP fewer than %d GPUs\n", o.ngpus);
    return 0;
  }
  return tap_done();
}
