/* bench_ranks.c -- the ranks of every `baton bench --fused` mode (streams,
 * cuBLAS, NCCL, baton's communicators, waiting, teardown) and their
 * check's sampling and thread pool. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench_parts.h"
#include "bench_ranks.h"

#define MAXTHREADS 32   /* host threads checking */

int bench_gpus(int *ngpu) {
  *ngpu = 0;
  cudaError_t ce = cudaGetDeviceCount(ngpu);
  if (ce == cudaSuccess && *ngpu > 0) return 0;
  const char *why = ce == cudaErrorInsufficientDriver ? "no NVIDIA driver here, or one older than this CUDA runtime"
                    : ce == cudaErrorNoDevice || ce == cudaSuccess ? "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)"
                                                                  : "the CUDA runtime cannot start";
  fprintf(stderr, "baton bench: no GPU to run on: %s (CUDA: %s)\n", why,
          ce == cudaSuccess ? "0 devices" : cudaGetErrorString(ce));
  return 2;
}

int bench_ranks_size(bench_ranks *k, const bench_common_opts *c) {
  int ngpu = 0;
  if (bench_gpus(&ngpu)) return 2;
  k->nranks = c->ngpus ? c->ngpus : ngpu;
  k->ngpus = c->share ? c->share : k->nranks;
  if (k->ngpus > ngpu || k->nranks > BENCH_RANKS_MAX) {
    fprintf(stderr, "baton bench: %d ranks on %d GPUs asked, %d present\n", k->nranks, k->ngpus, ngpu);
    return 2;
  }
  for (int r = 0; r < k->nranks; r++) k->devs[r] = r % k->ngpus;
  k->world = k->nranks;
  return 0;
}

int bench_ranks_stream(bench_ranks *k, int r) {
  cudaSetDevice(k->devs[r]);
  cudaError_t e = cudaStreamCreateWithFlags(&k->st[r], cudaStreamNonBlocking);
  if (e) {
    k->st[r] = NULL;
    fprintf(stderr, "baton bench: rank %d: cudaStreamCreate: %s\n", r, cudaGetErrorString(e));
    return -1;
  }
  return 0;
}

void bench_ranks_nccl(bench_ranks *k, const bench_common_opts *c, char *desc, size_t len) {
  char why[300];
  if (c->no_nccl || c->share) return;
  if (!(k->nccl = bench_nccl_open(why, sizeof why)))
    fprintf(stderr, "# NCCL not used: %s\n", why);
  else if (bench_nccl_init_all(k->nccl, k->nc, k->nranks, why, sizeof why)) {
    fprintf(stderr, "# NCCL not used: %s\n", why);
    memset(k->nc, 0, sizeof k->nc);
    bench_nccl_close(k->nccl);
    k->nccl = NULL;
  } else {
    snprintf(desc, len, "%s", bench_nccl_describe(k->nccl));
  }
}

int bench_ranks_comms(bench_ranks *k, const char *own) {
  baton_result be = baton_comm_init_all(k->bc, k->nranks, k->devs);
  if (be) {
    fprintf(stderr, "baton bench: baton_comm_init_all of %d ranks: %s\n", k->nranks, baton_result_string(be));
    memset(k->bc, 0, sizeof k->bc);
    return -1;
  }
  for (int r = 0; r < k->nranks && own; r++) {
    be = baton_comm_init_all(&k->pc[r], 1, &k->devs[r]);
    if (be) {
      fprintf(stderr, "baton bench: %s: baton_comm_init_all of rank %d's one-rank communicator: %s\n", own, r,
              baton_result_string(be));
      k->pc[r] = NULL;
      return -1;
    }
  }
  return 0;
}

int bench_ranks_wait(const bench_ranks *k, const char *own, char *err, size_t len) {
  for (int r = 0; r < k->nranks; r++) {
    cudaSetDevice(k->devs[r]);
    if (!bench_cuda_ok(cudaStreamSynchronize(k->st[r]), "stream", err, len)) return -1;
  }
  for (int r = 0; r < k->nranks; r++) {
    baton_result ae = baton_success;
    if (k->bc[r] && !baton_comm_get_async_error(k->bc[r], &ae) && ae) {
      snprintf(err, len, "baton rank %d: %s", r, baton_result_string(ae));
      return -1;
    }
    if (k->pc[r] && !baton_comm_get_async_error(k->pc[r], &ae) && ae) {
      snprintf(err, len, "%s: rank %d's one-rank communicator: %s", own, r, baton_result_string(ae));
      return -1;
    }
    if (k->nccl && k->nc[r] && bench_nccl_async_error(k->nccl, k->nc[r], err, len)) return -1;
  }
  return 0;
}

void bench_ranks_free_comms(bench_ranks *k, int r) {
  if (k->bc[r]) baton_comm_destroy(k->bc[r]);
  if (k->pc[r]) baton_comm_destroy(k->pc[r]);
  if (k->nccl && k->nc[r]) bench_nccl_destroy(k->nccl, k->nc[r]);
}

void bench_ranks_close(bench_ranks *k) {
  if (k->nccl) bench_nccl_close(k->nccl);
}

int bench_ranks_open(bench_ranks *k, const bench_common_opts *c, bench_run_info *info, bench_cublas **cb, void **ch,
                     const char *own) {
  *info = (bench_run_info){.nranks = k->nranks, .share = c->share, .iters = c->iters, .warmup = c->warmup,
                           .graph = c->graph, .rounds = c->rounds};
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(info->device, sizeof info->device, "%.120s", prop.name);
  char why[300];
  if (cb && !(*cb = bench_cublas_open(why, sizeof why))) {
    fprintf(stderr, "baton bench: the baseline needs cuBLAS: %s\n", why);
    return -1;
  }
  for (int r = 0; r < k->nranks; r++) {
    if (bench_ranks_stream(k, r)) return -1;
    if (cb && !(ch[r] = bench_cublas_handle(*cb, why, sizeof why))) {
      fprintf(stderr, "baton bench: rank %d: %s\n", r, why);
      return -1;
    }
  }
  if (cb) snprintf(info->cublas, sizeof info->cublas, "%s", bench_cublas_describe(*cb));
  bench_ranks_nccl(k, c, info->nccl, sizeof info->nccl);
  return bench_ranks_comms(k, own);
}

void bench_ranks_shut(bench_ranks *k, bench_cublas *cb, void **ch) {
  for (int r = 0; r < k->nranks; r++) {
    bench_ranks_free_comms(k, r);
    cudaSetDevice(k->devs[r]);
    if (cb && ch && ch[r]) bench_cublas_handle_free(cb, ch[r]);
    if (k->st[r]) cudaStreamDestroy(k->st[r]);
  }
  bench_ranks_close(k);
  if (cb) bench_cublas_close(cb);
}

cudaStream_t bench_ranks_own_stream(const bench_ranks *k, int share, int r) {
  return k->st[share ? k->devs[r] : r];
}

int bench_ranks_streams(const bench_ranks *k, int own, int share, cudaStream_t *st, int *devs) {
  int ns = own && share ? k->ngpus : k->nranks;
  for (int r = 0; r < ns; r++) {
    st[r] = k->st[r];
    devs[r] = k->devs[r];
  }
  return ns;
}

void bench_ranks_algorithm(const bench_ranks *k, char *dst, size_t len) {
  if (k->nranks && baton_comm_last_algorithm(k->bc[0])) snprintf(dst, len, "%s", baton_comm_last_algorithm(k->bc[0]));
}

int bench_spread(int64_t n, int k, int64_t *samp) {
  if (n <= k) {
    for (int64_t i = 0; i < n; i++) samp[i] = i;
    return (int)n;
  }
  for (int i = 0; i < k; i++) {
    int64_t lo = i * n / k, hi = (i + 1) * n / k;
    uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    samp[i] = lo + (int64_t)((h >> 33) % (uint64_t)(hi - lo));
  }
  samp[0] = 0;
  samp[k - 1] = n - 1;
  return k;
}

void bench_pool(void *(*fn)(void *), void *arg, int64_t tasks) {
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  int n = c < 1 ? 1 : c > MAXTHREADS ? MAXTHREADS : (int)c;
  int nt = tasks < n ? (int)(tasks < 1 ? 1 : tasks) : n, started = 0;
  pthread_t th[MAXTHREADS];
  for (int i = 0; i < nt; i++)
    if (pthread_create(&th[started], NULL, fn, arg) == 0) started++;
  if (!started) fn(arg);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

int64_t bench_tasks_take(bench_tasks *t) {
  int64_t i = __atomic_fetch_add(&t->next, 1, __ATOMIC_RELAXED);
  return i >= t->count || __atomic_load_n(&t->fail, __ATOMIC_RELAXED) ? -1 : i;
}

void bench_tasks_fail(bench_tasks *t, const char *what) {
  pthread_mutex_lock(&t->mu);
  if (!t->fail) snprintf(t->why, sizeof t->why, "%s", what);
  __atomic_store_n(&t->fail, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&t->mu);
}

int bench_tasks_run(bench_tasks *t, int64_t count, void *(*fn)(void *), void *arg, char *err, size_t len) {
  t->next = 0;
  t->count = count;
  t->fail = 0;
  t->why[0] = 0;
  pthread_mutex_init(&t->mu, NULL);
  bench_pool(fn, arg, count);
  pthread_mutex_destroy(&t->mu);
  if (!t->fail) return 0;
  snprintf(err, len, "check: %.200s", t->why);
  return -1;
}
