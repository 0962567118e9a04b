/* bench_fused_run.c -- the GPU part of `baton bench --fused gemv_allreduce`:
 * cuBLAS's GEMV, NCCL's AllReduce, both in a row (the baseline) and
 * baton_gemv_allreduce, on the same inputs and streams, checked and timed
 * alike, interleaved per shape.  One process drives every rank, or (-P)
 * every rank has a forked process of its own (bench_fork.h), the ranks
 * in step at each part's timing. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "baton.h"
#include "bench_cublas.h"
#include "bench_fused.h"
#include "bench_nccl.h"
#include "bench_parts.h"
#include "bench_ranks.h"
#include "ip_compute.h"
#include "rt_param.h"

#define MAXR BENCH_RANKS_MAX
#define MAXBUF 64                 /* copies of W a rank cycles through */
#define PATTERN (1 << 20)         /* random elements W is tiled from */
#define SAMPLED 64                /* rows checked against the exact result */

enum { WHAT_GEMV, WHAT_AR, WHAT_BASE, WHAT_BATON, NWHAT };
static const char *const what_name[NWHAT] = {"cuBLAS GEMV", "NCCL AllReduce", "baseline", "baton"};

typedef struct fctx {
  const bench_fused_opts *o;
  bench_ranks k;                 /* this process's ranks (no one-rank communicators: pc unused) */
  bench_fused_table *t;          /* -P, in the parent: the table the ranks' rows are folded into */
  bench_cublas *cb;
  void *ch[MAXR];
  /* this shape */
  int64_t M, K;
  int nbuf;
  char *W[MAXR][MAXBUF], *x[MAXR], *yb[MAXR], *yt[MAXR];
  void *pattern, *hx[MAXR], *hy;   /* hx: every rank's x (the check sums them all) */
} fctx;

_Static_assert(sizeof(bench_fused_row) <= BENCH_FORK_MSG_MAX, "a row fits one message");
_Static_assert(sizeof(bench_run_info) <= BENCH_FORK_MSG_MAX, "the run's description fits one message");

/* The generator's start for rank r's x at shape (M, K): the same in every
 * process, so that each can check the sum over all ranks. */
static uint64_t x_seed(int r, int64_t M, int64_t K) {
  return 0x2545F4914F6CDD1Dull ^ (uint64_t)(r + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)M << 24 ^ (uint64_t)K;
}

static void free_shape(fctx *x) {
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    for (int b = 0; b < MAXBUF; b++) if (x->W[r][b]) cudaFree(x->W[r][b]);
    if (x->x[r]) cudaFree(x->x[r]);
    if (x->yb[r]) cudaFree(x->yb[r]);
    if (x->yt[r]) cudaFree(x->yt[r]);
  }
  for (int q = 0; q < x->k.world; q++) {
    free(x->hx[q]);
    x->hx[q] = NULL;
  }
  memset(x->W, 0, sizeof x->W);
  memset(x->x, 0, sizeof x->x);
  memset(x->yb, 0, sizeof x->yb);
  memset(x->yt, 0, sizeof x->yt);
  free(x->hy);
  x->hy = NULL;
}

/* Element e of rank r's W: the pattern, shifted per rank. */
static int64_t w_index(int r, int64_t e) { return (e + (int64_t)r * 7919) % PATTERN; }

/* Buffers of shape (M, K): W tiled from the pattern, nbuf copies per local
 * rank (enough to pass 4x the L2 where memory allows), every rank's x on
 * the host (random), the local ranks' on their GPUs, y's.  0, or -1 with
 * err. */
static int alloc_shape(fctx *x, int64_t M, int64_t K, char *err, size_t len) {
  int es = ip_dtype_size[x->o->dtype];
  size_t wbytes = (size_t)M * K * es, chunk = (size_t)PATTERN * es;
  x->M = M;
  x->K = K;
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, x->k.devs[0]);
  size_t freeb = 0, totb = 0;
  cudaSetDevice(x->k.devs[0]);
  cudaMemGetInfo(&freeb, &totb);
  int per_gpu = x->o->c.share ? (x->k.nranks + x->o->c.share - 1) / x->o->c.share : 1;
  size_t budget = freeb / 10 * 6 / per_gpu;   /* W copies take at most 60% of the free memory */
  x->nbuf = (int)((4.0 * l2 + wbytes - 1) / wbytes);
  if (x->nbuf < 1) x->nbuf = 1;
  if (x->nbuf > MAXBUF) x->nbuf = MAXBUF;
  if (x->nbuf > x->o->c.iters) x->nbuf = x->o->c.iters;
  while (x->nbuf > 1 && (size_t)x->nbuf * wbytes > budget) x->nbuf--;
  if (wbytes + (size_t)K * es + 2 * (size_t)M * es > freeb / per_gpu) {
    snprintf(err, len, "W of %zu bytes does not fit the GPU's %zu free bytes (x %d ranks)", wbytes, freeb, per_gpu);
    return -1;
  }
  for (int q = 0; q < x->k.world; q++) {
    if (!(x->hx[q] = malloc((size_t)K * es))) { snprintf(err, len, "out of memory"); return -1; }
    uint64_t s = x_seed(q, M, K);
    for (int64_t k = 0; k < K; k++) ip_set(x->o->dtype, x->hx[q], (size_t)k, bench_frand(&s));
  }
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    if (!bench_cuda_ok(cudaMalloc((void **)&x->x[r], (size_t)K * es + 16), "x", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->yb[r], (size_t)M * es + 16), "y", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->yt[r], (size_t)M * es + 16), "y", err, len) ||
        !bench_cuda_ok(cudaMemcpy(x->x[r], x->hx[x->k.lo + r], (size_t)K * es, cudaMemcpyHostToDevice), "x upload", err,
                       len))
      return -1;
    for (int b = 0; b < x->nbuf; b++)
      if (!bench_cuda_ok(cudaMalloc((void **)&x->W[r][b], wbytes + 16), "W", err, len)) return -1;
    /* W = the pattern from index rank * 7919 on, repeated */
    size_t off = (size_t)w_index(x->k.lo + r, 0) * es, done = 0;
    while (done < wbytes) {
      size_t from = done == 0 ? off : 0, n = chunk - from;
      if (n > wbytes - done) n = wbytes - done;
      if (!bench_cuda_ok(cudaMemcpy(x->W[r][0] + done, (char *)x->pattern + from, n, cudaMemcpyHostToDevice),
                         "W upload", err, len))
        return -1;
      done += n;
    }
    for (int b = 1; b < x->nbuf; b++)
      if (!bench_cuda_ok(cudaMemcpy(x->W[r][b], x->W[r][0], wbytes, cudaMemcpyDeviceToDevice), "W copies", err, len))
        return -1;
  }
  x->hy = malloc((size_t)M * es + 16);
  if (!x->hy) { snprintf(err, len, "out of memory"); return -1; }
  return 0;
}

/* One iteration of `what` on every rank; W copy it % nbuf.  0, or -1
 * with err (bench_parts_ops.launch). */
static int launch(void *ctx, int what, int it, char *err, size_t len) {
  fctx *x = ctx;
  int b = it % x->nbuf;
  if (what == WHAT_GEMV || what == WHAT_BASE)
    for (int r = 0; r < x->k.nranks; r++) {
      cudaSetDevice(x->k.devs[r]);
      if (bench_cublas_gemv(x->cb, x->ch[r], x->o->dtype, x->M, x->K, x->K, x->W[r][b], x->x[r], x->yb[r], x->k.st[r],
                            err, len))
        return -1;
    }
  if ((what == WHAT_AR || what == WHAT_BASE) && x->k.nccl) {
    void *send[MAXR], *recv[MAXR];
    for (int r = 0; r < x->k.nranks; r++) send[r] = recv[r] = x->yb[r];
    if (bench_nccl_launch(x->k.nccl, BENCH_ALLREDUCE, x->k.nc, x->k.nranks, x->k.world, send, recv, (size_t)x->M,
                          x->o->dtype, IP_OP_SUM, 0, x->k.st, err, len))
      return -1;
  }
  if (what == WHAT_BATON) {
    baton_group_start();
    for (int r = 0; r < x->k.nranks; r++) {
      baton_result e = baton_gemv_allreduce(x->k.bc[r], x->W[r][b], x->x[r], x->yt[r], (size_t)x->M, (size_t)x->K,
                                            (baton_dtype)x->o->dtype, x->k.st[r]);
      if (e) {
        snprintf(err, len, "baton_gemv_allreduce on rank %d: %s", x->k.lo + r, baton_result_string(e));
        baton_group_end();
        return -1;
      }
    }
    baton_result e = baton_group_end();
    if (e) { snprintf(err, len, "baton group: %s", baton_result_string(e)); return -1; }
  }
  return 0;
}

/* Every rank's stream done, and the communicators' asynchronous errors
 * (bench_parts_ops.wait).  0, or -1 with err. */
static int wait_all(void *ctx, char *err, size_t len) {
  const fctx *x = ctx;
  return bench_ranks_wait(&x->k, "GEMV", err, len);
}

/* Every part runs on every rank's stream (bench_parts_ops.streams). */
static int part_streams(void *ctx, int what, cudaStream_t *st, int *devs) {
  const fctx *x = ctx;
  (void)what;
  for (int r = 0; r < x->k.nranks; r++) {
    st[r] = x->k.st[r];
    devs[r] = x->k.devs[r];
  }
  return x->k.nranks;
}

/* Rows whose result is checked: the first, the last and SAMPLED-2 spread
 * over the rest. */
static int64_t sample_row(int64_t M, int i) {
  if (i == 0) return 0;
  if (i == 1) return M - 1;
  return (int64_t)((uint64_t)(i * 2654435761u) % (uint64_t)M);
}

/* Wrong elements of y (every local rank's, sampled rows) against the
 * exact sum over all ranks, or with `own` (a baseline without AllReduce)
 * each rank's own product. */
static int64_t check_y(fctx *x, char **y, int own, int64_t *checked, char *err, size_t len) {
  int es = ip_dtype_size[x->o->dtype];
  int64_t bad = 0;
  *checked = 0;
  for (int i = 0; i < SAMPLED && i < x->M; i++) {
    int64_t row = sample_row(x->M, i);
    for (int r = 0; r < x->k.nranks; r++) {
      double want = 0, mag = 0;
      int me = x->k.lo + r;
      for (int q = own ? me : 0; q < (own ? me + 1 : x->k.world); q++)
        for (int64_t k = 0; k < x->K; k++) {
          double t = ip_get(x->o->dtype, x->pattern, (size_t)w_index(q, row * x->K + k)) *
                     ip_get(x->o->dtype, x->hx[q], (size_t)k);
          want += t;
          mag += fabs(t);
        }
      cudaSetDevice(x->k.devs[r]);
      if (!bench_cuda_ok(cudaMemcpy(x->hy, y[r] + row * es, es, cudaMemcpyDeviceToHost), "y download", err, len))
        return -1;
      double got = ip_get(x->o->dtype, x->hy, 0);
      (*checked)++;
      if (!(fabs(got - want) <= ip_compute_tolerance(x->o->dtype, x->k.world, x->K, mag))) {
        if (!bad) fprintf(stderr, "# M=%lld K=%lld rank %d y[%lld] = %g, expected %g\n", (long long)x->M,
                          (long long)x->K, me, (long long)row, got, want);
        bad++;
      }
    }
  }
  return bad;
}

/* The parts dead on any rank (bench_parts_ops.sync): with a process per
 * rank, after every rank got here; else dead itself. */
static unsigned sync_dead(void *ctx, unsigned dead) {
  const fctx *x = ctx;
  return x->k.fork ? (unsigned)bench_fork_barrier(x->k.fork, (int)dead) : dead;
}

enum { SHAPE_FAILED = 1u << NWHAT };   /* sync_dead's bit: some rank could not set the shape up */

static void run_shape(fctx *x, int64_t M, int64_t K, bench_fused_row *row) {
  memset(row, 0, sizeof *row);
  row->M = M;
  row->K = K;
  row->gemv_us = row->ar_us = row->base_us = row->baton_us = -1;
  row->wrong_base = row->wrong_baton = -1;
  char err[240] = "";
  unsigned dead = x->k.nccl ? 0 : 1 << WHAT_AR;   /* bit per WHAT: failed, not run again for this shape */
  int failed = alloc_shape(x, M, K, err, sizeof err);
  if (failed) snprintf(row->error, sizeof row->error, "%s", err);
  if (sync_dead(x, failed ? SHAPE_FAILED : 0) & SHAPE_FAILED) {
    if (!failed) snprintf(row->error, sizeof row->error, "failed on another rank");
    free_shape(x);
    return;
  }
  int64_t chk;
  for (int what = WHAT_BASE; what <= WHAT_BATON; what++) {
    if (launch(x, what, 0, err, sizeof err) || wait_all(x, err, sizeof err)) {
      snprintf(row->error, sizeof row->error, "%s: %s", what_name[what], err);
      dead |= 1u << what | (what == WHAT_BASE ? 1u << WHAT_GEMV : 0);
      continue;
    }
    if (!x->o->c.check) continue;
    int64_t w = check_y(x, what == WHAT_BASE ? x->yb : x->yt, what == WHAT_BASE && !x->k.nccl, &chk, err, sizeof err);
    if (what == WHAT_BASE) row->wrong_base = w; else row->wrong_baton = w;
    row->checked = chk;
  }
  bench_ranks_algorithm(&x->k, row->algorithm, sizeof row->algorithm);
  static const bench_parts_ops ops = {launch, wait_all, part_streams, sync_dead};
  double us[NWHAT];
  dead = bench_parts_measure_opts(&ops, x, NWHAT, what_name, &x->o->c, dead, us, row->error, sizeof row->error);
  row->gemv_us = us[WHAT_GEMV];
  row->ar_us = us[WHAT_AR];
  row->base_us = us[WHAT_BASE];
  row->baton_us = us[WHAT_BATON];
  if (!x->k.nccl && !(dead & 1 << WHAT_GEMV)) row->base_us = row->gemv_us;   /* no AllReduce: the GEMV alone */
  free_shape(x);
}

/* x's pattern (bench_pattern: the same in every process).  0, or -1 when
 * out of memory. */
static int make_pattern(fctx *x) { return (x->pattern = bench_pattern(x->o->dtype, PATTERN)) ? 0 : -1; }

/* ---- -P: a process per rank (bench_ranks_procs) ---- */

/* Another rank's row into all: the slowest rank's time per part, the sums
 * of wrong and checked elements. */
static void procs_fold(void *all, const void *one) {
  bench_fused_row *a = all, o;
  memcpy(&o, one, sizeof o);
  bench_fold_time(&a->gemv_us, o.gemv_us);
  bench_fold_time(&a->ar_us, o.ar_us);
  bench_fold_time(&a->base_us, o.base_us);
  bench_fold_time(&a->baton_us, o.baton_us);
  bench_fold_wrong(&a->wrong_base, o.wrong_base);
  bench_fold_wrong(&a->wrong_baton, o.wrong_baton);
  a->checked += o.checked;
}

/* Rank c->rank's shapes, in its process (x: as the parent set it, o
 * alone): a row each to the parent. */
static void procs_run(void *arg, const bench_child *c) {
  fctx *x = arg;
  const bench_fused_opts *o = x->o;
  x->k = *c->k;
  x->cb = c->cb;
  x->ch[0] = c->ch[0];
  if (make_pattern(x)) bench_fork_fail(x->k.fork, "out of host memory for the pattern");
  for (int i = 0; i < o->nM; i++)
    for (int j = 0; j < o->nK; j++) {
      bench_fused_row row;
      run_shape(x, o->M[i], o->K[j], &row);
      bench_fork_result(x->k.fork, &row, sizeof row);
    }
  free(x->pattern);
}

static void procs_header(void *arg) {
  bench_fused_print_header(stdout, ((fctx *)arg)->t);
}

static void procs_print(void *arg, const void *row) {
  bench_fused_print_row(stdout, ((fctx *)arg)->t, row);
}

/* bench_fused_run with -P. */
static int run_procs(const bench_fused_opts *o, bench_fused_table *t) {
  t->dtype = o->dtype;
  if (!(t->rows = calloc((size_t)o->nM * o->nK + 1, sizeof *t->rows))) return 2;
  static fctx p;
  memset(&p, 0, sizeof p);
  p.o = o;
  p.t = t;
  const bench_procs_mode m = {NULL, " with n = 1", procs_run, sizeof(bench_fused_row), o->nM * o->nK, &t->info,
                              procs_header, t->rows, &t->nrows, procs_fold, procs_print,
                              offsetof(bench_fused_row, error), sizeof(((bench_fused_row *)0)->error)};
  return bench_ranks_procs(&o->c, &m, &p);
}

int bench_fused_run(const bench_fused_opts *o, bench_fused_table *t) {
  memset(t, 0, sizeof *t);
  if (o->c.procs) return run_procs(o, t);
  fctx *x = calloc(1, sizeof *x);
  if (!x) return 2;
  x->o = o;
  if (bench_ranks_size(&x->k, &o->c)) {
    free(x);
    return 2;
  }
  t->dtype = o->dtype;
  int rc = 2;
  if (bench_ranks_open(&x->k, &o->c, &t->info, &x->cb, x->ch, NULL)) goto out;
  snprintf(t->info.cublas, sizeof t->info.cublas, "%.180s with n = 1", bench_cublas_describe(x->cb));
  if (make_pattern(x)) goto out;
  t->rows = calloc((size_t)o->nM * o->nK + 1, sizeof *t->rows);
  if (!t->rows) goto out;
  bench_fused_print_header(stdout, t);
  for (int i = 0; i < o->nM; i++)
    for (int j = 0; j < o->nK; j++) {
      bench_fused_row *row = &t->rows[t->nrows++];
      run_shape(x, o->M[i], o->K[j], row);
      bench_fused_print_row(stdout, t, row);
    }
  rc = 0;
out:
  bench_ranks_shut(&x->k, x->cb, x->ch);
  free(x->pattern);
  free(x);
  return rc;
}
