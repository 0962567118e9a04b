/* gpu_mixed.c -- collectives in which some ranks call in place and others
 * out of place, on real GPUs, every rank in one process or (--procs) a
 * process each.
 *
 * NCCL lets each rank choose: an AllReduce may run in place on rank 0 and
 * out of place on rank 1 in the same call.  For AllReduce, AllGather,
 * ReduceScatter and AllToAll, at a size inside each size range of the
 * default set, every rank calls in place, none does, only rank 0 does,
 * and every rank but rank 0 does; eagerly, then captured in a CUDA graph
 * and replayed.  Every element of every rank's output is checked (f32
 * sums of small integers: exact).  A case that fails names the programs
 * each rank ran (one process) and what went wrong; in one process the
 * communicators are made again after it, so that one failure does not
 * hide the next.
 *
 * Usage: gpu_mixed --ranks N --dir DIR [--gpus G] [--procs] [--big] [--only COLL]
 *   DIR/default (else DIR) holds the default set for N ranks
 *   (tests/gpu_runtime.sh prepares it).  --big: sizes to 48 MiB (else to
 *   6 MiB).  Rank r runs on GPU r % G (G defaults to N). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_ranks.h"

/* A size inside each range the default sets cut at (64 KiB .. 32 MiB):
 * the bytes of a call's larger buffer. */
static const size_t sizes[] = {4096, 96 << 10, 192 << 10, 384 << 10, 768 << 10, 1536 << 10, 3 << 20, 6 << 20,
                               12 << 20, 24 << 20, 48 << 20};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])
#define SMALL_MAX (6 << 20)   /* the largest size without --big */

enum { AR, AG, RS, A2A, NCOLLS };
static const char *coll_names[NCOLLS] = {"allreduce", "allgather", "reducescatter", "alltoall"};
static int only = -1;   /* --only COLL: that collective alone */

/* Which ranks call in place: pattern 0 none, 1 every rank, 2 rank 0
 * only, 3 every rank but rank 0. */
#define NPATTERNS 4
static const char *pattern_names[NPATTERNS] = {"every rank out of place", "every rank in place",
                                               "rank 0 in place, the others out of place",
                                               "rank 0 out of place, the others in place"};
static int in_place(int pattern, int r) { return pattern == 1 || (pattern == 2 && r == 0) || (pattern == 3 && r); }

/* Rank q's input element i: small integers, so that f32 sums are exact. */
static float value(int q, int64_t i) { return (float)((q * 7 + i * 3) % 17 + 1); }

/* A case: the collective, the count per rank (baton's convention) and the
 * elements of the input and of the output. */
typedef struct mcase { int coll, pattern; size_t count; int64_t nin, nout; } mcase;

static mcase case_of(int coll, int pattern, size_t bytes) {
  mcase m = {coll, pattern, 0, 0, 0};
  const int64_t big = (int64_t)(bytes / sizeof(float)) / nranks * nranks;   /* a multiple of the ranks */
  m.count = (size_t)(coll == AR ? big : big / nranks);
  m.nin = coll == AR || coll == RS || coll == A2A ? big : big / nranks;
  m.nout = coll == AR || coll == AG || coll == A2A ? big : big / nranks;
  return m;
}

/* The element i of rank r's output. */
static float expected(const mcase *m, int r, int64_t i) {
  float s = 0;
  switch (m->coll) {
  case AR:
    for (int q = 0; q < nranks; q++) s += value(q, i);
    return s;
  case AG: return value((int)(i / (int64_t)m->count), i % (int64_t)m->count);
  case RS:
    for (int q = 0; q < nranks; q++) s += value(q, (int64_t)r * (int64_t)m->count + i);
    return s;
  default: return value((int)(i / (int64_t)m->count), (int64_t)r * (int64_t)m->count + i % (int64_t)m->count);
  }
}

/* Rank r's buffers for a case: one allocation of 2 x the larger buffer;
 * in place the call's buffers overlap as NCCL lays them out, out of place
 * the output is the allocation's second half. */
static void *mem[4096];
static float *host_in[4096];

static void bufs(const mcase *m, int r, float **in, float **out) {
  float *base = mem[r];
  int64_t big = m->nin > m->nout ? m->nin : m->nout;
  if (!in_place(m->pattern, r)) {
    *in = base;
    *out = base + big;
  } else {
    *in = m->coll == AG ? base + (int64_t)r * (int64_t)m->count : base;
    *out = m->coll == RS ? base + (int64_t)r * (int64_t)m->count : base;
  }
}

/* Puts every rank's input in place and poisons its output (NaN), then
 * waits: before each run. */
static int reset(const mcase *m) {
  int bad = 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    float *in, *out;
    bufs(m, r, &in, &out);
    cudaSetDevice(dev_of(r));
    int64_t big = m->nin > m->nout ? m->nin : m->nout;
    bad |= cudaMemsetAsync(mem[r], 0xff, (size_t)big * 2 * sizeof(float), streams[r]) != cudaSuccess;
    for (int64_t i = 0; i < m->nin; i++) host_in[r][i] = value(r, i);
    bad |= cudaMemcpyAsync(in, host_in[r], (size_t)m->nin * sizeof(float), cudaMemcpyHostToDevice, streams[r]) !=
           cudaSuccess;
    bad |= cudaStreamSynchronize(streams[r]) != cudaSuccess;
  }
  return bad;
}

/* Every rank's call of the case, in one group. */
static baton_result issue(void *arg) {
  const mcase *m = arg;
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    float *in, *out;
    bufs(m, r, &in, &out);
    switch (m->coll) {
    case AR: e = baton_allreduce(in, out, m->count, baton_f32, baton_sum, comms[r], streams[r]); break;
    case AG: e = baton_allgather(in, out, m->count, baton_f32, comms[r], streams[r]); break;
    case RS: e = baton_reducescatter(in, out, m->count, baton_f32, baton_sum, comms[r], streams[r]); break;
    default: e = baton_alltoall(in, out, m->count, baton_f32, comms[r], streams[r]); break;
    }
  }
  baton_result ge = baton_group_end();
  return e ? e : ge;
}

/* The wrong elements of this process's ranks' outputs (the first one
 * described in `what`); -1 when an output cannot be read. */
static int64_t wrong_elements(const mcase *m, char *what, size_t len) {
  int64_t wrong = 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    float *in, *out;
    bufs(m, r, &in, &out);
    cudaSetDevice(dev_of(r));
    if (cudaMemcpy(host_in[r], out, (size_t)m->nout * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
    for (int64_t i = 0; i < m->nout; i++) {
      float want = expected(m, r, i);
      if (host_in[r][i] == want) continue;
      if (!wrong++) snprintf(what, len, "rank %d element %lld: %g, expected %g", r, (long long)i, host_in[r][i], want);
    }
  }
  return wrong;
}

/* The programs this process's ranks ran last, as "r0 name, r1 name". */
static void ran(char *s, size_t len) {
  size_t at = 0;
  s[0] = 0;
  for (int r = rank_lo; r < rank_hi && at < len; r++) {
    const char *a = baton_comm_last_algorithm(comms[r]);
    at += (size_t)snprintf(s + at, len - at, "%sr%d %s", r > rank_lo ? ", " : "", r, a ? a : "none");
  }
}

/* Runs case m eagerly (graph 0) or, after an eager call, captured and
 * replayed twice, each replay on fresh inputs: 0 when
 * every output is right, else 1 after diagnostics. */
static int run_case(const mcase *m, int graph) {
  char what[256] = "", names[2048];
  baton_result e = reset(m) ? baton_cuda_error : baton_success;
  gpu_graphs G = {0};
  int64_t wrong = 0;
  if (!e) e = issue((void *)m);
  /* captured: after an eager call (a FIFO program reserves its scratch
   * there, as a user's first call does) */
  if (!e && graph) e = sync_all();
  if (!e && graph) e = gpu_graphs_capture(&G, issue, (void *)m);
  ran(names, sizeof names);
  for (int rep = 0; rep < (graph ? 2 : 1) && !e && !wrong; rep++) {
    if (graph) e = reset(m) ? baton_cuda_error : baton_success;
    if (!e) e = graph ? gpu_graphs_replay(&G) : sync_all();
    if (!e) wrong = wrong_elements(m, what, sizeof what);
  }
  if (graph) gpu_graphs_free(&G);
  if (!e && !wrong) return 0;
  printf("# %s of %lld bytes, %s, %s: %s; %lld wrong%s%s; ran: %s\n", coll_names[m->coll],
       (long long)(m->nin > m->nout ? m->nin : m->nout) * 4, pattern_names[m->pattern], graph ? "captured" : "eager",
       baton_result_string(e), (long long)wrong, wrong ? ", " : "", what, names);
  return 1;
}

/* Makes every rank's communicator again (one process), after a case
 * that failed: 0 on success. */
static int renew(void) {
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(dev_of(r));
    cudaStreamSynchronize(streams[r]);
    baton_comm_destroy(comms[r]);
  }
  static int devs[4096];
  for (int r = 0; r < nranks; r++) devs[r] = dev_of(r);
  return baton_comm_init_all(comms, nranks, devs) != baton_success;
}

static void checks(const gpu_ranks_opts *o) {
  size_t most = o->big ? sizes[NSIZES - 1] : SMALL_MAX;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    host_in[r] = malloc(most);
    if (cudaMalloc(&mem[r], 2 * most) != cudaSuccess || !host_in[r]) {
      ok(0, "rank %d: buffers of 2 x %zu bytes", r, most);
      return;
    }
  }
  int stopped = 0;
  for (int graph = 0; graph < 2; graph++)
    for (int coll = 0; coll < NCOLLS; coll++)
      for (int pattern = 0; pattern < NPATTERNS && (only < 0 || only == coll); pattern++) {
        int failed = 0, run = 0;
        for (int k = 0; k < NSIZES && !stopped; k++) {
          if (sizes[k] > most) continue;
          mcase m = case_of(coll, pattern, sizes[k]);
          run++;
          if (!run_case(&m, graph)) continue;
          failed++;
          /* A process per rank cannot tell whether its peers failed too:
           * it stops there.  One process starts afresh. */
          if (o->procs || renew()) stopped = 1;
        }
        ok(!failed && !stopped, "%s, %s, %s: %d of %d sizes right%s", coll_names[coll], pattern_names[pattern],
           graph ? "captured and replayed" : "eager", run - failed, run, stopped ? " (stopped)" : "");
      }
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    cudaFree(mem[r]);
    free(host_in[r]);
  }
}

/* Takes --only NAME out of argv: -1 when NAME is not a collective here. */
static int take_only(int *argc, char **argv) {
  for (int i = 1; i + 1 < *argc; i++) {
    if (strcmp(argv[i], "--only")) continue;
    for (int c = 0; c < NCOLLS; c++)
      if (!strcmp(argv[i + 1], coll_names[c])) only = c;
    if (only < 0) return -1;
    memmove(argv + i, argv + i + 2, (size_t)(*argc - i - 2) * sizeof *argv);
    *argc -= 2;
    return 0;
  }
  return 0;
}

int main(int argc, char **argv) {
  gpu_ranks_opts o;
  if (take_only(&argc, argv)) {
    fprintf(stderr, "gpu_mixed: --only allreduce|allgather|reducescatter|alltoall\n");
    return 2;
  }
  if (gpu_ranks_args(argc, argv, "gpu_mixed", 0, &o)) return 2;
  if (nranks < 2 || nranks > 4096) {
    fprintf(stderr, "gpu_mixed: --ranks 2..4096\n");
    return 2;
  }
  /* The default set, before anything of the library runs (it reads its
   * parameters once). */
  static char set[4096];
  snprintf(set, sizeof set, "%s/default", o.dir);
  if (access(set, R_OK) == 0) setenv("BATON_ALGO_DIR", set, 1);
  if (o.procs) return gpu_ranks_procs(&o, checks);
  int done;
  int rc = gpu_ranks_up(&done);
  if (done) return rc;
  checks(&o);
  return gpu_ranks_end();
}
