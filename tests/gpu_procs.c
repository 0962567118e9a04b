/* gpu_procs.c -- gpu_runtime's checks of one rank of a process per GPU
 * (lo) on buffers of its own: calls captured into CUDA graphs, and eager
 * calls that exchange their buffers (BATON_EAGER_EXCHANGE_MB). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "baton.h"
#include "rt_comm.h"
#include "rt_peerbuf.h"
#include "gpu_runtime.h"

/* Buffers of the cases below: cudaMalloc's, or (managed) cudaMallocManaged's,
 * which neither CUDA IPC nor a cuMem descriptor exports.  (Stream-ordered
 * pool memory does not serve: with driver 580 its peers mapped it, from
 * the default pool and from one made without handle types alike.) */
static int alloc(float **p, int64_t n, int managed) {
  if (managed) return cudaMallocManaged((void **)p, (size_t)n * 4, cudaMemAttachGlobal) == cudaSuccess;
  return cudaMalloc((void **)p, (size_t)n * 4) == cudaSuccess;
}
static void release(float *in, float *out) {
  cudaFree(out);
  if (in != out) cudaFree(in);
}

/* Rank lo's buffers of n floats for a case (in == out in place), on new
 * allocations, its input values copied into `in` on its stream: the host
 * copy of them, or NULL (nothing kept) when something failed. */
static float *make(int64_t n, int inplace, int managed, float **in, float **out) {
  float *h = malloc(n * sizeof *h);
  *in = *out = NULL;
  int good = h && alloc(out, n, managed) && (inplace || alloc(in, n, managed));
  if (inplace) *in = *out;
  for (int64_t i = 0; good && i < n; i++) h[i] = (float)((i * 7 + lo * 3) % 13);
  good = good && cudaMemcpyAsync(*in, h, n * 4, cudaMemcpyHostToDevice, streams[lo]) == cudaSuccess;
  if (good) return h;
  release(*in, *out);
  free(h);
  return NULL;
}

/* Whether rank lo's output o (n floats, on the host) is every rank's input
 * summed (root < 0) or the root's; says the first wrong element. */
static int right(const float *o, int64_t n, int root, const char *what) {
  for (int64_t i = 0; i < n; i++) {
    float want = 0;
    for (int q = 0; q < nranks; q++)
      if (root < 0 || q == root) want += (float)((i * 7 + q * 3) % 13);
    if (o[i] != want) {
      diag("%s rank %d element %lld of %lld: %g, expected %g", what, lo, (long long)i, (long long)n, o[i], want);
      return 0;
    }
  }
  return 1;
}

/* gpu_runtime.h says what each case does. */
int graph_case(int64_t n, int inplace, int managed, int first, const char **algo) {
  const int r = lo;
  cudaStream_t st = streams[r];
  float *in, *out, *h = make(n, inplace, managed, &in, &out);
  int good = h != NULL;
  good &= cudaStreamSynchronize(st) == cudaSuccess;
  /* The first call outside the capture reserves what the call needs. */
  good &= good && (!first || baton_allreduce(in, out, n, baton_f32, baton_sum, comms[r], st) == baton_success);
  good &= cudaStreamSynchronize(st) == cudaSuccess;
  if (good && inplace) good &= cudaMemcpyAsync(in, h, n * 4, cudaMemcpyHostToDevice, st) == cudaSuccess;
  cudaGraph_t gr = NULL;
  cudaGraphExec_t ge = NULL;
  good &= good && cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess;
  good &= good && baton_allreduce(in, out, n, baton_f32, baton_sum, comms[r], st) == baton_success;
  good &= cudaStreamEndCapture(st, &gr) == cudaSuccess && gr && cudaGraphInstantiate(&ge, gr, 0) == cudaSuccess;
  *algo = baton_comm_last_algorithm(comms[r]);
  float *o = good ? malloc(n * sizeof *o) : NULL;
  for (int rep = 0; rep < 3 && good; rep++) {
    if (inplace) cudaMemcpyAsync(in, h, n * 4, cudaMemcpyHostToDevice, st);
    else cudaMemsetAsync(out, 0, n * 4, st);
    good &= cudaGraphLaunch(ge, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess;
    good &= o && cudaMemcpy(o, out, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess && right(o, n, -1, "a replay:");
  }
  free(o);
  if (ge) cudaGraphExecDestroy(ge);
  if (gr) cudaGraphDestroy(gr);
  if (h) release(in, out);
  free(h);
  return good;
}

int eager_case(int64_t n, int inplace, int managed, int root, const char **algo) {
  const int r = lo;
  cudaStream_t st = streams[r];
  float *in, *out, *h = make(n, inplace, managed, &in, &out);
  int good = h != NULL;
  if (good && !inplace) good &= cudaMemsetAsync(out, 0, n * 4, st) == cudaSuccess;
  good &= good && (root < 0 ? baton_allreduce(in, out, n, baton_f32, baton_sum, comms[r], st)
                            : baton_broadcast(in, out, n, baton_f32, root, comms[r], st)) == baton_success;
  good &= cudaStreamSynchronize(st) == cudaSuccess;
  *algo = baton_comm_last_algorithm(comms[r]);
  good &= good && cudaMemcpy(h, out, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess && right(h, n, root, "eager:");
  if (h) release(in, out);
  free(h);
  return good;
}

baton_result eager_differs(int64_t n) {
  float *in = NULL, *out = NULL;
  const int64_t m = n + 1024 * lo;   /* each rank a count of its own */
  baton_result e = baton_internal_error;
  if (alloc(&in, m, 0) && alloc(&out, m, 0)) {
    e = baton_allreduce(in, out, m, baton_f32, baton_sum, comms[lo], streams[lo]);
    cudaStreamSynchronize(streams[lo]);
  }
  release(in, out);
  return e;
}

/* A barrier of the ranks: a one-float allreduce (below any exchange). */
static int barrier(float *one) {
  return baton_allreduce(one, one, 1, baton_f32, baton_sum, comms[lo], streams[lo]) == baton_success &&
         cudaStreamSynchronize(streams[lo]) == cudaSuccess;
}

int freed_case(int64_t n, size_t big, double *lost_mib, int *maps_then, int *maps_now, const char **algo) {
  float *one = NULL, *b = NULL;
  size_t free0 = 0, free1 = 0, total = 0;
  int good = cudaMalloc((void **)&one, 4) == cudaSuccess && barrier(one);
  good = good && cudaMemGetInfo(&free0, &total) == cudaSuccess && barrier(one);
  good = good && big >= (size_t)n * 4 && cudaMalloc((void **)&b, big) == cudaSuccess;
  good = good && cudaMemsetAsync(b, 0, (size_t)n * 4, streams[lo]) == cudaSuccess &&
         baton_allreduce(b, b, n, baton_f32, baton_sum, comms[lo], streams[lo]) == baton_success &&
         cudaStreamSynchronize(streams[lo]) == cudaSuccess;
  *maps_then = rt_peerbuf_count(comms[lo]->pbufs);
  if (b) cudaFree(b);
  /* The next exchange learns it: this capture's, on new buffers (with no
   * eager call first: gpu_runtime's graphs ran this count before), so that
   * the peers unmap it while a capture is under way. */
  good = good && graph_case(2097152 + 3, 0, 0, 0, algo);
  good = good && barrier(one) && cudaMemGetInfo(&free1, &total) == cudaSuccess;
  *maps_now = rt_peerbuf_count(comms[lo]->pbufs);
  *lost_mib = ((double)free0 - (double)free1) / 1048576.0;
  cudaFree(one);
  return good;
}
