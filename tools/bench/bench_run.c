/* bench_run.c -- the GPU part of `baton bench`: NCCL and baton on the same
 * buffers and streams, checked on every size, timed alike and
 * interleaved; one process driving every GPU or one process per GPU
 * (tools/bench/bench_procs.c). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton.h"
#include "rt_time.h"
#include "bench_nccl.h"
#include "bench_ranks.h"
#include "bench_run.h"
#include "rt_param.h"

/* The send and receive pointers of local rank i for geometry g: in place
 * as nccl-tests lays it out (both inside the receive buffer). */
static void pointers(bench_ctx *x, const bench_geom *g, int i, char **send, char **recv) {
  size_t es = (size_t)ip_dtype_size[x->o->dtype];
  int r = x->lo + i;
  if (x->o->inplace == BENCH_IN_PLACE) {
    *send = x->recvbuf[i] + (size_t)g->send_inplace * r * es;
    *recv = x->recvbuf[i] + (size_t)g->recv_inplace * r * es;
  } else {
    *send = x->sendbuf[i];
    *recv = x->recvbuf[i];
  }
}

/* One call of the collective on every local rank.  0, or -1 with err.
 * The rooted collectives get both buffers on every rank, as nccl-tests
 * gives them (the one a rank off the root does not use included). */
static int launch_call(bench_ctx *x, int lib, const bench_geom *g, char *err, size_t len) {
  void *send[BENCH_MAX_LOCAL], *recv[BENCH_MAX_LOCAL];
  for (int i = 0; i < x->nlocal; i++) pointers(x, g, i, (char **)&send[i], (char **)&recv[i]);
  if (lib == BENCH_NCCL)
    return bench_nccl_launch(x->nccl, x->o->coll, x->nc, x->nlocal, x->nranks, send, recv, (size_t)g->count,
                             x->o->dtype, x->o->op, x->o->root, x->streams, err, len);
  /* As NCCL's: one group, so the GPUs' launches go out at once. */
  baton_group_start();
  for (int i = 0; i < x->nlocal; i++) {
    baton_dtype t = (baton_dtype)x->o->dtype;
    baton_redop op = (baton_redop)x->o->op;
    size_t n = (size_t)g->count;
    int root = x->o->root;
    baton_result e;
    switch (x->o->coll) {
    case BENCH_ALLREDUCE: e = baton_allreduce(send[i], recv[i], n, t, op, x->bc[i], x->streams[i]); break;
    case BENCH_ALLGATHER: e = baton_allgather(send[i], recv[i], n, t, x->bc[i], x->streams[i]); break;
    case BENCH_REDUCESCATTER: e = baton_reducescatter(send[i], recv[i], n, t, op, x->bc[i], x->streams[i]); break;
    case BENCH_BROADCAST: e = baton_broadcast(send[i], recv[i], n, t, root, x->bc[i], x->streams[i]); break;
    case BENCH_REDUCE: e = baton_reduce(send[i], recv[i], n, t, op, root, x->bc[i], x->streams[i]); break;
    case BENCH_GATHER: e = baton_gather(send[i], recv[i], n, t, root, x->bc[i], x->streams[i]); break;
    case BENCH_SCATTER: e = baton_scatter(send[i], recv[i], n, t, root, x->bc[i], x->streams[i]); break;
    default: e = baton_alltoall(send[i], recv[i], n, t, x->bc[i], x->streams[i]); break;
    }
    if (e) {
      snprintf(err, len, "baton_%s failed on rank %d: %s", bench_coll_name[x->o->coll], x->lo + i,
               baton_result_string(e));
      baton_group_end();   /* launches nothing: the group failed */
      return -1;
    }
  }
  baton_result e = baton_group_end();
  if (e) {
    snprintf(err, len, "baton_%s: launching the group failed: %s", bench_coll_name[x->o->coll], baton_result_string(e));
    return -1;
  }
  return 0;
}

/* One call of library lib on every local rank, and with --between the
 * one-block kernel after it on each rank's stream. */
static int launch(bench_ctx *x, int lib, const bench_geom *g, char *err, size_t len) {
  if (launch_call(x, lib, g, err, len)) return -1;
  for (int i = 0; i < x->nlocal && x->o->between; i++) {
    cudaSetDevice(x->devs[i]);
    cudaError_t e = bench_tick(x->streams[i]);
    if (e != cudaSuccess) {
      snprintf(err, len, "the kernel between two calls on rank %d: %s", x->lo + i, cudaGetErrorString(e));
      return -1;
    }
  }
  return 0;
}

/* Stops the library on every local rank after an error: it is not used
 * again (a communicator that stopped half-way is unusable). */
static void kill_lib(bench_ctx *x, int lib, const char *why) {
  if (x->dead & (1 << lib)) return;
  x->dead |= 1 << lib;
  snprintf(x->dead_why[lib], sizeof x->dead_why[lib], "%s", why);
  for (int i = 0; i < x->nlocal; i++) {
    if (lib == BENCH_NCCL && x->nc[i]) bench_nccl_abort(x->nccl, x->nc[i]);
    if (lib == BENCH_BATON && x->bc[i]) baton_comm_abort(x->bc[i]);
    x->nc[i] = lib == BENCH_NCCL ? NULL : x->nc[i];
  }
}

/* Waits until every local stream is idle, as nccl-tests does: polls the
 * streams and the library's asynchronous error, and gives up after
 * 2 x BATON_TIMEOUT + 5 seconds (BATON_TIMEOUT 0: never). */
static int wait_lib(bench_ctx *x, int lib, char *err, size_t len) {
  double t0 = rt_time_s(), limit = x->timeout > 0 ? 2.0 * x->timeout + 5 : 0;
  for (;;) {
    int busy = 0;
    for (int i = 0; i < x->nlocal; i++) {
      cudaError_t e = cudaStreamQuery(x->streams[i]);
      if (e == cudaErrorNotReady) busy = 1;
      else if (e != cudaSuccess) {
        snprintf(err, len, "rank %d: %s", x->lo + i, cudaGetErrorString(e));
        goto failed;
      }
      if (lib == BENCH_NCCL && bench_nccl_async_error(x->nccl, x->nc[i], err, len)) goto failed;
      baton_result ae = baton_success;
      if (lib == BENCH_BATON && (baton_comm_get_async_error(x->bc[i], &ae) || ae)) {
        snprintf(err, len, "rank %d: asynchronous error: %s", x->lo + i, baton_result_string(ae));
        goto failed;
      }
    }
    if (!busy) return 0;
    if (limit > 0 && rt_time_s() - t0 > limit) {
      snprintf(err, len, "calls not finished after %.0f s (2 x BATON_TIMEOUT + 5)", limit);
      goto failed;
    }
  }
failed:
  kill_lib(x, lib, err);
  return -1;
}

/* Rank i's input for the check at its send pointer; the output region
 * poisoned first (BENCH_POISON bytes). */
static int upload(bench_ctx *x, const bench_geom *g, int i) {
  size_t es = (size_t)ip_dtype_size[x->o->dtype];
  char *send, *recv;
  pointers(x, g, i, &send, &recv);
  size_t big = (size_t)(g->send_elems > g->recv_elems ? g->send_elems : g->recv_elems) * es;
  cudaSetDevice(x->devs[i]);
  bench_fill(x->o->coll, x->o->op, x->o->dtype, x->lo + i, g->send_elems, x->host);
  int in = x->o->inplace == BENCH_IN_PLACE;
  int bad = cudaMemsetAsync(in ? x->recvbuf[i] : recv, BENCH_POISON, in ? big : (size_t)g->recv_elems * es,
                            x->streams[i]) != cudaSuccess;
  bad |= cudaMemcpyAsync(send, x->host, (size_t)g->send_elems * es, cudaMemcpyHostToDevice, x->streams[i]) != cudaSuccess;
  bad |= cudaStreamSynchronize(x->streams[i]) != cudaSuccess;
  return bad ? -1 : 0;
}

/* One call with known data, every output element compared with the
 * host's expectation (bench_check: off a reduce's or a gather's root,
 * the receive buffer left as it was): its wrong elements added to res->wrong (which
 * starts at 0 when it was -1, not checked). */
static void check_lib(bench_ctx *x, int lib, const bench_geom *g, bench_result *res) {
  size_t es = (size_t)ip_dtype_size[x->o->dtype];
  char err[200];
  for (int i = 0; i < x->nlocal; i++)
    if (upload(x, g, i)) {
      snprintf(res->error, sizeof res->error, "check: cannot copy the input to rank %d: %s", x->lo + i,
               cudaGetErrorString(cudaGetLastError()));
      return;
    }
  if (launch(x, lib, g, err, sizeof err) || wait_lib(x, lib, err, sizeof err)) {
    snprintf(res->error, sizeof res->error, "check: %.180s", err);
    return;
  }
  if (res->wrong < 0) res->wrong = 0;
  for (int i = 0; i < x->nlocal; i++) {
    char *send, *recv;
    pointers(x, g, i, &send, &recv);
    cudaSetDevice(x->devs[i]);
    if (cudaMemcpy(x->host, recv, (size_t)g->recv_elems * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
      snprintf(res->error, sizeof res->error, "check: cannot copy rank %d's output back: %s", x->lo + i,
               cudaGetErrorString(cudaGetLastError()));
      return;
    }
    int64_t first;
    int64_t w = bench_check(x->o, x->nranks, x->lo + i, g, x->host, &first);
    if (w)
      fprintf(stderr, "# %s, size %lld, rank %d: %lld wrong elements, the first at index %lld (value %g)\n",
              bench_lib_name[lib], (long long)g->bytes, x->lo + i, (long long)w, (long long)first,
              ip_get(x->o->dtype, x->host, (size_t)first));
    res->wrong += w;
  }
}

/* Captures the n iterations on every local stream into one graph per
 * GPU, after one call outside the capture (baton reserves its scratch,
 * NCCL connects). */
static int build_graphs(bench_ctx *x, int lib, const bench_geom *g, cudaGraphExec_t *ge, char *err, size_t len) {
  if (launch(x, lib, g, err, len) || wait_lib(x, lib, err, len)) return -1;
  int rc = 0;
  for (int i = 0; i < x->nlocal; i++) {
    cudaSetDevice(x->devs[i]);
    if (cudaStreamBeginCapture(x->streams[i], cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      snprintf(err, len, "cudaStreamBeginCapture: %s", cudaGetErrorString(cudaGetLastError()));
      rc = -1;
    }
  }
  /* After each call, every stream must still be capturing: the first
   * call that breaks a capture is named. */
  for (int it = 0; it < x->o->iters && !rc; it++) {
    rc = launch(x, lib, g, err, len);
    for (int i = 0; i < x->nlocal && !rc; i++) {
      enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      cudaError_t e = cudaStreamIsCapturing(x->streams[i], &cs);
      if (e != cudaSuccess || cs != cudaStreamCaptureStatusActive) {
        snprintf(err, len, "CUDA graph of rank %d: call %d of the capture broke it (%s)", x->lo + i, it + 1,
                 e != cudaSuccess ? cudaGetErrorString(e) : "capture invalidated");
        rc = -1;
      }
    }
  }
  /* Every capture ends before any graph is instantiated: instantiating
   * is not permitted while this thread still captures another stream. */
  cudaGraph_t gr[BENCH_MAX_LOCAL] = {0};
  for (int i = 0; i < x->nlocal; i++) {
    cudaSetDevice(x->devs[i]);
    cudaError_t e = cudaStreamEndCapture(x->streams[i], &gr[i]);
    if (e != cudaSuccess && !rc) {
      snprintf(err, len, "CUDA graph of rank %d: ending the capture: %s", x->lo + i, cudaGetErrorString(e));
      rc = -1;
    }
  }
  for (int i = 0; i < x->nlocal; i++) {
    cudaSetDevice(x->devs[i]);
    cudaError_t e = !rc && gr[i] ? cudaGraphInstantiate(&ge[i], gr[i], 0) : cudaSuccess;
    if (e != cudaSuccess && !rc) {
      snprintf(err, len, "CUDA graph of rank %d: instantiating: %s", x->lo + i, cudaGetErrorString(e));
      rc = -1;
    }
    if (gr[i]) cudaGraphDestroy(gr[i]);
  }
  /* A failed capture leaves its error as the thread's last CUDA error;
   * clear it so that it is not reported again by the next library. */
  if (rc) cudaGetLastError();
  if (rc) kill_lib(x, lib, err);   /* its calls were half captured: unusable */
  return rc;
}

/* Warmup, then the timed block: seconds per call, or -1 with err; *host
 * gets the seconds per call the host spent enqueueing. */
/* Payload bytes the local ranks' baton communicators sent over the network. */
static double net_sent(const bench_ctx *x) {
  double sum = 0;
  for (int i = 0; i < x->nlocal; i++) {
    uint64_t s = 0, r = 0;
    if (x->bc[i] && !baton_comm_net_bytes(x->bc[i], &s, &r)) sum += (double)s;
  }
  return sum;
}

static double time_block(bench_ctx *x, int lib, const bench_geom *g, cudaGraphExec_t *ge, double *host,
                         double *net, char *err, size_t len) {
  int n = x->o->iters;
  for (int w = 0; w < x->o->warmup; w++)
    if (launch(x, lib, g, err, len)) return -1;
  if (wait_lib(x, lib, err, len)) return -1;
  double net0 = lib == BENCH_BATON ? net_sent(x) : 0;
  double t0 = rt_time_s();
  if (x->o->graph) {
    for (int k = 0; k < x->o->graph; k++)
      for (int i = 0; i < x->nlocal; i++)
        if (cudaGraphLaunch(ge[i], x->streams[i]) != cudaSuccess) {
          snprintf(err, len, "cudaGraphLaunch on rank %d: %s", x->lo + i, cudaGetErrorString(cudaGetLastError()));
          return -1;
        }
    n *= x->o->graph;
  } else {
    for (int it = 0; it < n; it++)
      if (launch(x, lib, g, err, len)) return -1;
  }
  *host = (rt_time_s() - t0) / n;
  if (wait_lib(x, lib, err, len)) return -1;
  double t = (rt_time_s() - t0) / n;
  if (lib == BENCH_BATON && x->nlocal) *net = (net_sent(x) - net0) / n / x->nlocal;
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The barrier of one process per GPU (a no-op in one process): every
 * rank learns which libraries failed anywhere, so that all ranks take
 * the same path. */
static void sync_flags(bench_ctx *x, int *failed) {
  if (!x->barrier) return;
  int f = x->barrier(x, x->dead | *failed << BENCH_NLIBS);
  for (int lib = 0; lib < BENCH_NLIBS; lib++) {
    if ((f & 1 << lib) && !(x->dead & 1 << lib)) kill_lib(x, lib, "failed on another rank");
  }
  *failed |= f >> BENCH_NLIBS;
}

void bench_run_size(bench_ctx *x, int64_t bytes, bench_row *row) {
  bench_geom g;
  bench_geometry(x->o->coll, bytes, ip_dtype_size[x->o->dtype], x->nranks, &g);
  memset(row, 0, sizeof *row);
  row->inplace = x->o->inplace == BENCH_IN_PLACE;
  row->dtype = x->o->dtype;
  row->op = x->o->op;
  row->bytes = g.bytes;
  row->count = g.count;
  int failed = 0;   /* bit per library: failed for this size */
  double times[BENCH_NLIBS][64], hosts[BENCH_NLIBS][64];
  cudaGraphExec_t ge[BENCH_NLIBS][BENCH_MAX_LOCAL];
  memset(ge, 0, sizeof ge);
  for (int lib = 0; lib < BENCH_NLIBS; lib++) {
    bench_result *res = &row->lib[lib];
    res->time_us = res->host_us = -1;
    res->wrong = -1;
    if (x->dead & 1 << lib) {
      if (lib == BENCH_BATON || x->nccl) snprintf(res->error, sizeof res->error, "not run: %s", x->dead_why[lib]);
      failed |= 1 << lib;
      continue;
    }
    for (int k = 0; k < x->o->check && !res->error[0]; k++) check_lib(x, lib, &g, res);   /* -c N: N checks */
    if (res->error[0]) failed |= 1 << lib;
    if (lib == BENCH_BATON && x->nlocal && baton_comm_last_algorithm(x->bc[0]))
      snprintf(row->algorithm, sizeof row->algorithm, "%s", baton_comm_last_algorithm(x->bc[0]));
  }
  sync_flags(x, &failed);
  if (x->o->graph)
    for (int lib = 0; lib < BENCH_NLIBS; lib++) {
      if (!(failed & 1 << lib) && build_graphs(x, lib, &g, ge[lib], row->lib[lib].error, sizeof row->lib[0].error))
        failed |= 1 << lib;
      else if (lib == BENCH_BATON && x->nlocal && baton_comm_last_algorithm(x->bc[0]))   /* what the graphs run */
        snprintf(row->algorithm, sizeof row->algorithm, "%s", baton_comm_last_algorithm(x->bc[0]));
    }
  sync_flags(x, &failed);
  int rounds = x->o->rounds < 64 ? x->o->rounds : 64;
  for (int k = 0; k < rounds; k++)
    for (int lib = 0; lib < BENCH_NLIBS; lib++) {
      sync_flags(x, &failed);
      if (failed & 1 << lib) continue;
      times[lib][k] = time_block(x, lib, &g, ge[lib], &hosts[lib][k], &row->net_bytes, row->lib[lib].error,
                                 sizeof row->lib[0].error);
      if (times[lib][k] < 0) failed |= 1 << lib;
    }
  sync_flags(x, &failed);
  for (int lib = 0; lib < BENCH_NLIBS; lib++) {
    if (!(failed & 1 << lib)) {
      qsort(times[lib], (size_t)rounds, sizeof times[lib][0], cmp_double);
      row->lib[lib].time_us = times[lib][(rounds - 1) / 2] * 1e6;   /* the median (lower middle when even) */
      qsort(hosts[lib], (size_t)rounds, sizeof hosts[lib][0], cmp_double);
      row->lib[lib].host_us = hosts[lib][(rounds - 1) / 2] * 1e6;
    } else if (!row->lib[lib].error[0] && (lib == BENCH_BATON || x->nccl)) {
      snprintf(row->lib[lib].error, sizeof row->lib[lib].error, "failed on another rank");
    }
    for (int i = 0; i < x->nlocal; i++)
      if (ge[lib][i]) cudaGraphExecDestroy(ge[lib][i]);
  }
  if (!x->nccl) row->lib[BENCH_NCCL].error[0] = 0;
}

/* Buffers for the largest size of every type the run uses (-d all): the
 * receive buffer holds the larger of send and receive (in place uses it
 * alone), the host buffer as much. */
int bench_ctx_alloc(bench_ctx *x, const int64_t *sizes, int nsizes, char *err, size_t len) {
  bench_combo c[BENCH_MAX_COMBOS];
  int nc = bench_combos(x->o, c);
  size_t sc = 0, rc = 0;
  for (int k = 0; k < nc; k++)
    for (int s = 0; s < nsizes; s++) {
      size_t es = (size_t)ip_dtype_size[c[k].dtype];
      bench_geom g;
      bench_geometry(x->o->coll, sizes[s], (int)es, x->nranks, &g);
      size_t send = (size_t)g.send_elems * es;
      size_t big = (size_t)(g.send_elems > g.recv_elems ? g.send_elems : g.recv_elems) * es;
      if (send > sc) sc = send;
      if (big > rc) rc = big;
    }
  x->host = malloc(rc + 16);
  if (!x->host) {
    snprintf(err, len, "cannot allocate %zu bytes of host memory", rc);
    return -1;
  }
  for (int i = 0; i < x->nlocal; i++) {
    cudaSetDevice(x->devs[i]);
    cudaError_t e = cudaStreamCreateWithFlags(&x->streams[i], cudaStreamNonBlocking);
    x->recv_bytes = rc + 16;
    x->send_bytes = x->o->inplace != BENCH_IN_PLACE ? sc + 16 : 0;
    if (e == cudaSuccess && x->o->nccl_mem) {   /* as nccl-tests allocates them */
      if (!x->nccl) {
        snprintf(err, len, "--nccl-mem: NCCL is not loaded");
        return -1;
      }
      if (bench_nccl_mem_alloc(x->nccl, (void **)&x->recvbuf[i], rc + 16, err, len) ||
          (x->o->inplace != BENCH_IN_PLACE &&
           bench_nccl_mem_alloc(x->nccl, (void **)&x->sendbuf[i], sc + 16, err, len)))
        return -1;
      continue;
    }
    if (e == cudaSuccess) e = cudaMalloc((void **)&x->recvbuf[i], rc + 16);
    if (e == cudaSuccess && x->o->inplace != BENCH_IN_PLACE) e = cudaMalloc((void **)&x->sendbuf[i], sc + 16);
    if (e != cudaSuccess) {
      snprintf(err, len, "GPU %d: cannot allocate %zu + %zu bytes: %s", x->devs[i], rc, sc, cudaGetErrorString(e));
      return -1;
    }
  }
  return 0;
}

void bench_ctx_free(bench_ctx *x) {
  for (int i = 0; i < x->nlocal; i++) {
    cudaSetDevice(x->devs[i]);
    if (x->streams[i]) cudaStreamSynchronize(x->streams[i]);
    if (x->nc[i]) bench_nccl_destroy(x->nccl, x->nc[i]);
    if (x->bc[i]) baton_comm_destroy(x->bc[i]);
    if (x->o->nccl_mem) {
      bench_nccl_mem_free(x->nccl, x->sendbuf[i]);
      bench_nccl_mem_free(x->nccl, x->recvbuf[i]);
    } else {
      if (x->sendbuf[i]) cudaFree(x->sendbuf[i]);
      if (x->recvbuf[i]) cudaFree(x->recvbuf[i]);
    }
    if (x->streams[i]) cudaStreamDestroy(x->streams[i]);
  }
  free(x->host);
  x->host = NULL;
}

bench_nccl *bench_load_nccl(const bench_opts *o, bench_table *t) {
  if (o->no_nccl) {
    snprintf(t->nccl_missing, sizeof t->nccl_missing, "--no-nccl");
    return NULL;
  }
  bench_nccl *n = bench_nccl_open(t->nccl_missing, sizeof t->nccl_missing);
  const char *lacks = n ? bench_nccl_lacks(n, o->coll) : NULL;
  if (lacks) {
    snprintf(t->nccl_missing, sizeof t->nccl_missing, "the loaded NCCL has no %s (it came in NCCL 2.28)", lacks);
    bench_nccl_close(n);
    return NULL;
  }
  if (n) snprintf(t->nccl, sizeof t->nccl, "%s", bench_nccl_describe(n));
  return n;
}

/* The sweep of one combination in one process (x->o its options): each
 * size's row(s) appended to t and printed as it finishes.  --inplace both: out
 * of place, then in place, per size (x->o points at one of two copies of
 * the options at a time, for the buffers' layout, and back at the
 * caller's after). */
static void run_sweep(bench_ctx *x, const int64_t *sizes, int nsizes, bench_table *t) {
  const bench_opts *o = x->o;
  bench_opts place[2] = {*o, *o};
  place[0].inplace = BENCH_OUT_OF_PLACE;
  place[1].inplace = BENCH_IN_PLACE;
  for (int s = 0; s < nsizes; s++) {
    if (o->inplace != BENCH_BOTH_PLACES) {
      bench_run_size(x, sizes[s], &t->rows[t->nrows]);
      bench_print_row(stdout, t, &t->rows[t->nrows++]);
      continue;
    }
    for (int p = 0; p < 2; p++) {
      x->o = &place[p];
      bench_run_size(x, sizes[s], &t->rows[t->nrows + p]);
    }
    x->o = o;
    bench_print_pair(stdout, t, &t->rows[t->nrows], &t->rows[t->nrows + 1]);
    t->nrows += 2;
  }
}

/* Every combination's sweep (-d all, -o all: type outer, op inner, as
 * nccl-tests), x->o pointing at each one's options in turn and back at
 * the caller's after. */
static void run_combos(bench_ctx *x, const int64_t *sizes, int nsizes, bench_table *t) {
  const bench_opts *o = x->o;
  bench_combo c[BENCH_MAX_COMBOS];
  int nc = bench_combos(o, c);
  for (int k = 0; k < nc; k++) {
    bench_opts one = bench_opts_combo(o, &c[k]);
    x->o = &one;
    run_sweep(x, sizes, nsizes, t);
  }
  x->o = o;
}

/* One process driving GPUs 0..g-1 (nccl-tests' -g). */
int bench_run(const bench_opts *o, bench_table *t) {
  int ngpu = 0;
  if (bench_gpus(&ngpu)) return 2;
  int n = o->ngpus ? o->ngpus : ngpu, used = o->share ? o->share : n;
  if (used > ngpu || n > BENCH_MAX_LOCAL) {
    fprintf(stderr, "baton bench: %d ranks on %d GPUs, but this machine has %d GPUs (and bench drives at most %d "
            "ranks)\n", n, used, ngpu, BENCH_MAX_LOCAL);
    return 2;
  }
  if (bench_root_check(o, n, stderr)) return 2;   /* without -g: the GPUs found are the ranks */
  static bench_ctx x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.nranks = x.nlocal = n;
  x.timeout = (int)rt_param_int(RT_PARAM_TIMEOUT);
  for (int i = 0; i < n; i++) x.devs[i] = i % used;
  bench_table_init(t, o, n);
  if (used < n)   /* NCCL refuses two ranks on one GPU */
    snprintf(t->nccl_missing, sizeof t->nccl_missing, "%d ranks share %d GPU%s (--share)", n, used,
             used == 1 ? "" : "s");
  else
    x.nccl = bench_load_nccl(o, t);
  char err[300];
  int64_t sizes[BENCH_MAX_SIZES];
  int nsizes = bench_sizes(o, sizes, BENCH_MAX_SIZES), rc = 0;
  baton_result be = baton_comm_init_all(x.bc, n, x.devs);
  if (be) {
    fprintf(stderr, "baton bench: baton_comm_init_all over %d GPUs failed: %s\n", n, baton_result_string(be));
    rc = 2;
    goto out;
  }
  if (x.nccl && bench_nccl_init_all(x.nccl, x.nc, n, err, sizeof err)) {
    snprintf(t->nccl_missing, sizeof t->nccl_missing, "%s", err);
    t->nccl[0] = 0;
    memset(x.nc, 0, sizeof x.nc);
    bench_nccl_close(x.nccl);
    x.nccl = NULL;
  }
  if (!x.nccl) x.dead |= 1 << BENCH_NCCL;
  if (bench_ctx_alloc(&x, sizes, nsizes, err, sizeof err)) {
    fprintf(stderr, "baton bench: %s\n", err);
    rc = 2;
    goto out;
  }
  bench_print_header(stdout, t);
  run_combos(&x, sizes, nsizes, t);
out:
  bench_ctx_free(&x);
  bench_nccl_close(x.nccl);
  return rc;
}
