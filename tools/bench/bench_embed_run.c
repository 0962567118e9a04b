/* bench_embed_run.c -- the GPU part of `baton bench --fused
 * embedding_alltoall`: the pooling alone (a one-rank baton communicator
 * per rank), NCCL's AllToAll of the pooled [B, T*D] alone, the layout
 * shuffle alone (tools/bench/bench_shuffle.cu), the three in a row on one
 * stream (the baseline) and baton_embedding_alltoall, on the same inputs
 * and streams, checked and timed alike, interleaved per shape.  One
 * process drives every rank, or (-P) every rank has a forked process of
 * its own (bench_ranks_procs). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "bench_embed.h"
#include "bench_nccl.h"
#include "bench_parts.h"
#include "bench_ranks.h"
#include "ip_compute.h"

#define MAXR BENCH_RANKS_MAX
#define PATTERN 1048573           /* random elements (a prime count) the tables are tiled from */
#define SAMPLED 64                /* output rows checked per rank */

enum { WHAT_POOL, WHAT_A2A, WHAT_SHUF, WHAT_BASE, WHAT_BATON, NWHAT };

_Static_assert(sizeof(bench_embed_row) <= BENCH_FORK_MSG_MAX, "a row fits one message");
static const char *const what_name[NWHAT] = {"pooling alone", "NCCL AllToAll", "shuffle", "baseline", "baton"};

typedef struct ectx {
  const bench_embed_opts *o;
  bench_ranks k;                 /* this process's ranks; pc: the pooling alone */
  bench_embed_table *t;          /* -P, in the parent: the table the ranks' rows are folded into */
  int es;
  int base;                      /* the baseline runs (NCCL is there) */
  void *pattern;                 /* PATTERN elements of the type */
  /* this shape */
  int64_t B, T, D, rows, bag;
  int skew;
  /* every rank's bags on the host (indexed by rank; the check needs them
   * all), this process's ranks' buffers on their GPUs (by local rank) */
  int64_t L[MAXR];               /* indices of rank r */
  int64_t *hI[MAXR], *hO[MAXR];
  void *hw[MAXR];
  char *E[MAXR], *w[MAXR], *pooled[MAXR], *recv[MAXR], *outb[MAXR], *outt[MAXR];
  int64_t *I[MAXR], *O[MAXR];
} ectx;

/* A value in [0, 1) from xorshift state *s (bench_xorshift). */
static double urand(uint64_t *s) { return (double)(bench_xorshift(s) >> 11) / 9007199254740992.0; }

/* The offset of rank r's tables in the pattern: element e of its stacked
 * tables is pattern[(e + offset) % PATTERN]. */
static int64_t tab_off(int r) { return ((int64_t)r * 7919) % PATTERN; }

static void free_shape(ectx *x) {
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    void *d[] = {x->E[r], x->w[r], x->pooled[r], x->recv[r], x->outb[r], x->outt[r], x->I[r], x->O[r]};
    for (size_t k = 0; k < sizeof d / sizeof d[0]; k++)
      if (d[k]) cudaFree(d[k]);
  }
  for (int q = 0; q < x->k.world; q++) {
    free(x->hI[q]);
    free(x->hO[q]);
    free(x->hw[q]);
  }
  memset(x->E, 0, sizeof x->E);
  memset(x->w, 0, sizeof x->w);
  memset(x->pooled, 0, sizeof x->pooled);
  memset(x->recv, 0, sizeof x->recv);
  memset(x->outb, 0, sizeof x->outb);
  memset(x->outt, 0, sizeof x->outt);
  memset(x->I, 0, sizeof x->I);
  memset(x->O, 0, sizeof x->O);
  memset(x->hI, 0, sizeof x->hI);
  memset(x->hO, 0, sizeof x->hO);
  memset(x->hw, 0, sizeof x->hw);
}

/* Rank r's bags on the host, from a seed fixed per rank: B*T bags of 0 to
 * 2*bag indices (uniform), each naming a row of its table (bag b is table
 * b % T: rows t*rows .. t*rows + rows - 1), uniform or Zipf-like (u^4:
 * most among the table's first rows); a weight per index. */
typedef struct gen_job { ectx *x; int r, fail; } gen_job;

static void *gen_rank(void *arg) {
  gen_job *j = arg;
  ectx *x = j->x;
  int r = j->r;
  uint64_t s = 0x2545F4914F6CDD1Dull ^ ((uint64_t)(r + 1) * 0x9E3779B97F4A7C15ull);
  for (int k = 0; k < 4; k++) bench_xorshift(&s);
  int64_t nbags = x->B * x->T;
  x->hO[r] = malloc((size_t)(nbags + 1) * sizeof(int64_t));
  if (!x->hO[r]) { j->fail = 1; return NULL; }
  int64_t at = 0;
  for (int64_t b = 0; b < nbags; b++) {
    x->hO[r][b] = at;
    at += (int64_t)(bench_xorshift(&s) % (uint64_t)(2 * x->bag + 1));
  }
  x->hO[r][nbags] = at;
  x->L[r] = at;
  int64_t L = at ? at : 1;   /* the runtime takes no empty index vector: one index, in no bag */
  x->hI[r] = malloc((size_t)L * sizeof(int64_t));
  x->hw[r] = x->o->weighted ? malloc((size_t)L * x->es) : NULL;
  if (!x->hI[r] || (x->o->weighted && !x->hw[r])) { j->fail = 1; return NULL; }
  x->hI[r][0] = 0;
  for (int64_t b = 0; b < nbags; b++) {
    int64_t t = b % x->T;
    for (int64_t k = x->hO[r][b]; k < x->hO[r][b + 1]; k++) {
      double u = urand(&s);
      if (x->skew) u = u * u * u * u;
      int64_t row = (int64_t)(u * (double)x->rows);
      x->hI[r][k] = t * x->rows + (row < x->rows ? row : x->rows - 1);
    }
  }
  if (x->o->weighted)
    for (int64_t k = 0; k < L; k++) ip_set(x->o->dtype, x->hw[r], (size_t)k, bench_frand(&s));
  return NULL;
}

/* Device bytes a rank needs for a shape, besides its tables: indices,
 * offsets, weights; the pooled [B, T*D], and with the baseline what the
 * AllToAll receives and the shuffled output; baton's output; the scratch
 * of both communicators (an out-of-place program computes its input
 * there: [B, T*D] each). */
static double other_bytes(const ectx *x, double L) {
  double out = (double)x->B * x->T * x->D * x->es;
  return L * (8.0 + (x->o->weighted ? x->es : 0)) + (x->B * x->T + 1) * 8.0 + out * (x->base ? 6 : 4) + (1 << 20);
}

/* Buffers of this shape: bags made on the host, tables tiled from the
 * pattern, outputs poisoned (NaN).  0, or -1 with err. */
static int alloc_shape(ectx *x, int64_t rows_asked, char *err, size_t len) {
  int es = x->es, per_gpu = x->o->c.share ? (x->k.nranks + x->o->c.share - 1) / x->o->c.share : 1;
  size_t freeb = (size_t)-1, totb = 0;
  for (int g = 0; g < x->k.ngpus; g++) {   /* devs[g] is GPU g in one process, the rank's GPU with -P */
    size_t f = 0;
    cudaSetDevice(x->k.devs[g]);
    if (!bench_cuda_ok(cudaMemGetInfo(&f, &totb), "cudaMemGetInfo", err, len)) return -1;
    if (f < freeb) freeb = f;
  }
  double budget = (double)freeb * 0.85 / per_gpu, row_bytes = (double)x->T * x->D * es;
  double expect_L = (double)x->B * x->T * x->bag * 1.05 + 1024;
  if (rows_asked) {
    x->rows = rows_asked;
  } else {
    x->rows = bench_embed_default_rows(x->T, x->D, es);
    double fit = (budget - other_bytes(x, expect_L)) / row_bytes;
    if (fit < (double)x->rows) x->rows = fit < 1 ? 1 : (int64_t)fit;
    if (x->k.fork) x->rows = bench_fork_min(x->k.fork, x->rows);   /* the same tables on every rank */
  }
  if ((double)x->rows * row_bytes + other_bytes(x, expect_L) > budget) {
    snprintf(err, len, "%.0f MiB a rank (tables of %lld rows, bags, outputs, scratch) do not fit the %.0f MiB free "
             "(x %d ranks a GPU)", ((double)x->rows * row_bytes + other_bytes(x, expect_L)) / 1048576.0,
             (long long)x->rows, (double)freeb / 1048576.0, per_gpu);
    return -1;
  }
  /* every rank's bags, at once */
  gen_job jobs[MAXR];
  pthread_t th[MAXR];
  int started[MAXR] = {0}, fail = 0;
  for (int r = 0; r < x->k.world; r++) {
    jobs[r] = (gen_job){x, r, 0};
    started[r] = pthread_create(&th[r], NULL, gen_rank, &jobs[r]) == 0;
    if (!started[r]) gen_rank(&jobs[r]);
  }
  for (int r = 0; r < x->k.world; r++) {
    if (started[r]) pthread_join(th[r], NULL);
    fail |= jobs[r].fail;
  }
  if (fail) { snprintf(err, len, "out of host memory for the bags"); return -1; }
  size_t nE = (size_t)(x->T * x->rows * x->D), chunk = nE < PATTERN ? nE : PATTERN;
  size_t out = (size_t)(x->B * x->T * x->D) * es, nbags = (size_t)(x->B * x->T);
  char *rot = malloc(chunk * es);
  if (!rot) { snprintf(err, len, "out of host memory"); return -1; }
  int rc = -1;
  for (int r = 0; r < x->k.nranks; r++) {
    const int q = x->k.lo + r;   /* the rank */
    size_t L = x->L[q] ? (size_t)x->L[q] : 1;
    cudaSetDevice(x->k.devs[r]);
    if (!bench_cuda_ok(cudaMalloc((void **)&x->E[r], nE * es + 16), "tables", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->I[r], L * 8), "indices", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->O[r], (nbags + 1) * 8), "offsets", err, len) ||
        (x->o->weighted && !bench_cuda_ok(cudaMalloc((void **)&x->w[r], L * es + 16), "weights", err, len)) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->pooled[r], out + 16), "pooled", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->outt[r], out + 16), "baton's output", err, len) ||
        (x->base && !bench_cuda_ok(cudaMalloc((void **)&x->recv[r], out + 16), "AllToAll's output", err, len)) ||
        (x->base && !bench_cuda_ok(cudaMalloc((void **)&x->outb[r], out + 16), "the baseline's output", err, len)))
      goto out;
    if (!bench_cuda_ok(cudaMemcpy(x->I[r], x->hI[q], L * 8, cudaMemcpyHostToDevice), "indices upload", err, len) ||
        !bench_cuda_ok(cudaMemcpy(x->O[r], x->hO[q], (nbags + 1) * 8, cudaMemcpyHostToDevice), "offsets upload", err,
                       len) ||
        (x->o->weighted &&
         !bench_cuda_ok(cudaMemcpy(x->w[r], x->hw[q], L * es, cudaMemcpyHostToDevice), "weights upload", err, len)))
      goto out;
    /* the tables: the pattern from rank q's offset on, then doubled in
     * place (every copy starts at a multiple of PATTERN elements) */
    int64_t off = tab_off(q);
    for (size_t i = 0; i < chunk; i++)
      memcpy(rot + i * es, (char *)x->pattern + (size_t)((off + (int64_t)i) % PATTERN) * es, es);
    if (!bench_cuda_ok(cudaMemcpy(x->E[r], rot, chunk * es, cudaMemcpyHostToDevice), "tables upload", err, len))
      goto out;
    for (size_t done = chunk; done < nE;) {
      size_t n = done < nE - done ? done : nE - done;
      if (!bench_cuda_ok(cudaMemcpy(x->E[r] + done * es, x->E[r], n * es, cudaMemcpyDeviceToDevice), "tables copy",
                         err, len))
        goto out;
      done += n;
    }
  }
  rc = 0;
out:
  free(rot);
  return rc;
}

/* The stream rank r's pooling alone runs on (bench_ranks_own_stream). */
static cudaStream_t pool_stream(const ectx *x, int r) { return bench_ranks_own_stream(&x->k, x->o->c.share, r); }

/* The streams `what` runs on (bench_parts_ops.streams): every rank's; the
 * pooling alone with ranks sharing GPUs, each GPU's first rank's. */
static int part_streams(void *ctx, int what, cudaStream_t *st, int *devs) {
  const ectx *x = ctx;
  return bench_ranks_streams(&x->k, what == WHAT_POOL, x->o->c.share, st, devs);
}

static const char *hint(baton_result e) {
  return e == baton_unsupported ? " (no embedding program for this rank count, mode and size in BATON_ALGO_DIR?)" : "";
}

/* One call of `what` on every rank (bench_parts_ops.launch; `it` is
 * not used).  0, or -1 with err. */
static int launch(void *ctx, int what, int it, char *err, size_t len) {
  ectx *x = ctx;
  (void)it;
  int n = x->k.nranks, world = x->k.world;
  baton_redop mode = x->o->mean ? baton_avg : baton_sum;
  if (what == WHAT_POOL || what == WHAT_BASE) {
    baton_group_start();
    for (int r = 0; r < n; r++) {
      cudaSetDevice(x->k.devs[r]);
      const int64_t L = x->L[x->k.lo + r];
      baton_result e = baton_embedding_alltoall(x->k.pc[r], x->E[r], (size_t)(x->T * x->rows), (size_t)x->D, 0,
                                                x->I[r], L ? (size_t)L : 1, x->O[r],
                                                x->o->weighted ? x->w[r] : NULL, (size_t)x->B, (size_t)x->T, mode,
                                                x->pooled[r], (baton_dtype)x->o->dtype, pool_stream(x, r));
      if (e) {
        snprintf(err, len, "pooling: baton_embedding_alltoall on rank %d's one-rank communicator: %s%s", x->k.lo + r,
                 baton_result_string(e), hint(e));
        baton_group_end();
        return -1;
      }
    }
    baton_result e = baton_group_end();
    if (e) { snprintf(err, len, "pooling: baton group: %s", baton_result_string(e)); return -1; }
  }
  if (what == WHAT_A2A || what == WHAT_BASE) {
    void *send[MAXR], *recv[MAXR];
    for (int r = 0; r < n; r++) {
      send[r] = x->pooled[r];
      recv[r] = x->recv[r];
    }
    if (bench_nccl_launch(x->k.nccl, BENCH_ALLTOALL, x->k.nc, n, world, send, recv, (size_t)(x->B / world * x->T * x->D),
                          x->o->dtype, IP_OP_SUM, 0, x->k.st, err, len))
      return -1;
  }
  if (what == WHAT_SHUF || what == WHAT_BASE)
    for (int r = 0; r < n; r++) {
      cudaSetDevice(x->k.devs[r]);
      int e = bench_embed_shuffle(x->recv[r], x->outb[r], world, x->B / world, x->T * x->D * x->es, x->k.st[r]);
      if (e) {
        snprintf(err, len, "shuffle on rank %d: %s", x->k.lo + r, cudaGetErrorString((cudaError_t)e));
        return -1;
      }
    }
  if (what == WHAT_BATON) {
    baton_group_start();
    for (int r = 0; r < n; r++) {
      cudaSetDevice(x->k.devs[r]);
      const int64_t L = x->L[x->k.lo + r];
      baton_result e = baton_embedding_alltoall(x->k.bc[r], x->E[r], (size_t)(x->T * x->rows), (size_t)x->D, 0,
                                                x->I[r], L ? (size_t)L : 1, x->O[r],
                                                x->o->weighted ? x->w[r] : NULL, (size_t)x->B, (size_t)x->T, mode,
                                                x->outt[r], (baton_dtype)x->o->dtype, x->k.st[r]);
      if (e) {
        snprintf(err, len, "baton_embedding_alltoall on rank %d: %s%s", x->k.lo + r, baton_result_string(e), hint(e));
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
  const ectx *x = ctx;
  return bench_ranks_wait(&x->k, "pooling", err, len);
}

/* ---- the check ---------------------------------------------------------
 * Every element of SAMPLED output rows of every rank (all when B/n is
 * fewer) against ip_compute_exact: output row s of rank q holds, for each
 * rank p, the T*D values p pooled for global sample q*B/n + s.  The exact
 * values of one (sample, rank p) come from a table of just the rows its
 * T bags gather, in order, built from the pattern.  Host threads take
 * (q, s) pairs in turn. */
typedef struct chk {
  ectx *x;
  int nsamp, have_b, have_t;     /* have_b: the baseline's output (or the pooling alone's) is checked */
  int64_t samp[SAMPLED];
  int64_t bad_b, bad_t;
  bench_tasks tasks;
} chk;

static void *chk_worker(void *arg) {
  chk *c = arg;
  ectx *x = c->x;
  int n = x->k.world, lo = x->k.lo, nl = x->k.nranks, es = x->es;
  int64_t T = x->T, D = x->D, TD = T * D, per = x->B / n;
  size_t rowb = (size_t)(n * TD) * es, cap = 0;
  char *hb = malloc(rowb), *ht = malloc(rowb), *mE = NULL;
  int64_t *mI = NULL, *mO = malloc((size_t)(T + 1) * sizeof(int64_t));
  double *val = malloc((size_t)TD * sizeof(double)), *mag = malloc((size_t)TD * sizeof(double));
  if (!hb || !ht || !mO || !val || !mag) { bench_tasks_fail(&c->tasks, "out of host memory for the check"); goto out; }
  for (;;) {
    int64_t task = bench_tasks_take(&c->tasks);
    if (task < 0) break;
    int l = (int)(task / c->nsamp), q = lo + l;
    int64_t srow = c->samp[task % c->nsamp], g = q * per + srow;
    /* the row from the baseline's output (or, without one, from the
     * pooled [B, T*D] of every rank this process holds) and from baton's */
    cudaSetDevice(x->k.devs[l]);
    cudaError_t e = cudaSuccess;
    if (c->have_t) e = cudaMemcpy(ht, x->outt[l] + (size_t)srow * rowb, rowb, cudaMemcpyDeviceToHost);
    if (c->have_b && x->base && !e) e = cudaMemcpy(hb, x->outb[l] + (size_t)srow * rowb, rowb, cudaMemcpyDeviceToHost);
    for (int pl = 0; c->have_b && !x->base && !e && pl < nl; pl++) {
      cudaSetDevice(x->k.devs[pl]);
      e = cudaMemcpy(hb + (size_t)((lo + pl) * TD) * es, x->pooled[pl] + (size_t)(g * TD) * es, (size_t)TD * es,
                     cudaMemcpyDeviceToHost);
    }
    if (e) {
      char m[200];
      snprintf(m, sizeof m, "output download: %s", cudaGetErrorString(e));
      bench_tasks_fail(&c->tasks, m);
      break;
    }
    for (int p = 0; p < n; p++) {
      int64_t b0 = g * T, lo = x->hO[p][b0], hi = x->hO[p][b0 + T], Ls = hi - lo, off = tab_off(p);
      if ((size_t)(Ls > 0 ? Ls : 1) > cap) {
        cap = (size_t)(Ls > 0 ? Ls : 1) * 2;
        free(mE);
        free(mI);
        mE = malloc(cap * (size_t)D * es);
        mI = malloc(cap * sizeof(int64_t));
        if (!mE || !mI) { bench_tasks_fail(&c->tasks, "out of host memory for the check"); goto out; }
      }
      for (int64_t k = 0; k < Ls; k++) {   /* row idx of rank p's tables: D elements from the pattern, wrapping */
        int64_t idx = x->hI[p][lo + k];
        mI[k] = k;
        for (int64_t d = 0; d < D;) {
          int64_t at = (idx * D + d + off) % PATTERN, m = D - d < PATTERN - at ? D - d : PATTERN - at;
          memcpy(mE + (size_t)(k * D + d) * es, (char *)x->pattern + (size_t)at * es, (size_t)m * es);
          d += m;
        }
      }
      for (int64_t t = 0; t <= T; t++) mO[t] = x->hO[p][b0 + t] - lo;
      ip_opnd args[IR_MAX_ARGS] = {{mE, Ls, D, D, -1},
                                   {mI, Ls, 1, 1, IP_I64},
                                   {mO, T + 1, 1, 1, IP_I64},
                                   {x->o->weighted ? (char *)x->hw[p] + (size_t)lo * es : NULL, Ls, 1, 1, -1}};
      ip_compute_exact(x->o->mean ? IR_OP_EBAGM : IR_OP_EBAG, x->o->dtype, args, 0, TD, val, mag);
      const int b_here = x->base || (p >= lo && p < lo + nl);   /* the pooling alone's values of rank p are here */
      for (int64_t i = 0; i < TD; i++) {
        double want = val[i], tol = ip_compute_tolerance(x->o->dtype, 1, mO[i / D + 1] - mO[i / D], mag[i]);
        for (int k = 0; k < 2; k++) {
          if (!(k ? c->have_t : c->have_b && b_here)) continue;
          double got = ip_get(x->o->dtype, k ? ht : hb, (size_t)(p * TD + i));
          if (fabs(got - want) <= tol) continue;   /* NaN fails */
          int64_t first = __atomic_fetch_add(k ? &c->bad_t : &c->bad_b, 1, __ATOMIC_RELAXED);
          if (!first)
            fprintf(stderr, "# B=%lld T=%lld D=%lld: %s: rank %d out[%lld][%d*%lld + %lld] = %g, expected %g "
                    "(tolerance %g)\n", (long long)x->B, (long long)T, (long long)D,
                    k ? "baton" : x->base ? "baseline" : "pooling alone", q, (long long)srow, p, (long long)TD,
                    (long long)i, got, want, tol);
        }
      }
    }
  }
out:
  free(hb); free(ht); free(mE); free(mI); free(mO); free(val); free(mag);
  return NULL;
}

/* Checks what ran (have_b: the baseline, or the pooling alone; have_t:
 * baton): the wrong elements of each (-1: not checked), the elements
 * checked of each.  0, or -1 with err. */
static int check(ectx *x, int have_b, int have_t, bench_embed_row *row, char *err, size_t len) {
  chk c;
  memset(&c, 0, sizeof c);
  c.x = x;
  c.have_b = have_b;
  c.have_t = have_t;
  c.nsamp = bench_spread(x->B / x->k.world, SAMPLED, c.samp);
  int64_t tasks = (int64_t)x->k.nranks * c.nsamp;
  int failed = bench_tasks_run(&c.tasks, tasks, chk_worker, &c, err, len);
  if (failed) return -1;
  row->wrong_base = have_b ? c.bad_b : -1;
  row->wrong_baton = have_t ? c.bad_t : -1;
  row->checked = tasks * x->k.world * x->T * x->D;
  return 0;
}

/* Poisons the outputs (all ones: NaN in f32, f16 and bf16). */
static int poison(ectx *x, char *err, size_t len) {
  size_t out = (size_t)(x->B * x->T * x->D) * x->es;
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    char *b[] = {x->pooled[r], x->outt[r], x->outb[r], x->recv[r]};
    for (int k = 0; k < 4; k++)
      if (b[k] && !bench_cuda_ok(cudaMemset(b[k], 0xff, out), "poison", err, len)) return -1;
  }
  /* cudaMemset and the tables' device copies run on the legacy stream,
   * which does not order the ranks' non-blocking streams: everything set
   * up must be done before the first call reads it (a pooling run that
   * began early read tables still being filled). */
  for (int g = 0; g < x->k.ngpus; g++) {
    cudaSetDevice(x->k.devs[g]);
    if (!bench_cuda_ok(cudaDeviceSynchronize(), "setting the shape up", err, len)) return -1;
  }
  return 0;
}

/* The parts dead on any rank (bench_parts_ops.sync): with a process per
 * rank, after every rank got here; else dead itself. */
static unsigned sync_dead(void *ctx, unsigned dead) {
  const ectx *x = ctx;
  return x->k.fork ? (unsigned)bench_fork_barrier(x->k.fork, (int)dead) : dead;
}

enum { SHAPE_FAILED = 1u << NWHAT };   /* sync_dead's bit: some rank could not set the shape up */

static void run_shape(ectx *x, int64_t B, int64_t T, int64_t D, int64_t bag, int64_t rows, int skew,
                      bench_embed_row *row) {
  memset(row, 0, sizeof *row);
  row->B = x->B = B;
  row->T = x->T = T;
  row->D = x->D = D;
  row->bag = x->bag = bag;
  row->rows = rows;
  row->skew = x->skew = skew;
  row->pool_us = row->a2a_us = row->shuf_us = row->base_us = row->baton_us = -1;
  row->wrong_base = row->wrong_baton = -1;
  char err[240] = "";
  /* bit per WHAT: failed or not set up, not run (again) for this shape */
  unsigned dead = x->base ? 0 : 1u << WHAT_A2A | 1u << WHAT_SHUF | 1u << WHAT_BASE;
  if (B % x->k.world) {
    snprintf(row->error, sizeof row->error, "B=%lld is not a multiple of the %d ranks", (long long)B, x->k.world);
    return;
  }
  int failed = alloc_shape(x, rows, err, sizeof err) || poison(x, err, sizeof err);
  if (failed) snprintf(row->error, sizeof row->error, "%s", err);
  row->rows = x->rows;
  if (sync_dead(x, failed ? SHAPE_FAILED : 0) & SHAPE_FAILED) {
    if (!failed) snprintf(row->error, sizeof row->error, "failed on another rank");
    free_shape(x);
    return;
  }
  int64_t sum = 0;
  for (int r = 0; r < x->k.world; r++) sum += x->L[r];
  row->lookups = sum / x->k.world;
  /* once each, checked: the baseline (or the pooling alone), then baton */
  int ran[NWHAT] = {0};
  int first[2] = {x->base ? WHAT_BASE : WHAT_POOL, WHAT_BATON};
  for (int k = 0; k < 2; k++) {
    int what = first[k];
    if (launch(x, what, 0, err, sizeof err) || wait_all(x, err, sizeof err)) {
      snprintf(row->error, sizeof row->error, "%s: %.200s", what_name[what], err);
      /* a part that failed in the baseline is not timed alone either */
      if (what == WHAT_BASE)
        dead |= !strncmp(err, "pooling", 7) ? 1u << WHAT_POOL : !strncmp(err, "shuffle", 7) ? 1u << WHAT_SHUF
                : !strncmp(err, "nccl", 4) || strstr(err, "NCCL") ? 1u << WHAT_A2A
                : 1u << WHAT_POOL | 1u << WHAT_A2A | 1u << WHAT_SHUF;   /* a stream error: any of them */
      dead |= 1u << what;
      continue;
    }
    ran[what] = 1;
  }
  if (x->o->c.check && (ran[first[0]] || ran[WHAT_BATON]) &&
      check(x, ran[first[0]], ran[WHAT_BATON], row, err, sizeof err))
    snprintf(row->error, sizeof row->error, "%s", err);
  bench_ranks_algorithm(&x->k, row->algorithm, sizeof row->algorithm);
  static const bench_parts_ops ops = {launch, wait_all, part_streams, sync_dead};
  double us[NWHAT];
  bench_parts_measure_opts(&ops, x, NWHAT, what_name, &x->o->c, dead, us, row->error, sizeof row->error);
  row->pool_us = us[WHAT_POOL];
  row->a2a_us = us[WHAT_A2A];
  row->shuf_us = us[WHAT_SHUF];
  row->base_us = us[WHAT_BASE];
  row->baton_us = us[WHAT_BATON];
  free_shape(x);
}

/* Whether comm loaded a program whose name says embedding. */
static int has_embedding(const baton_comm *c) {
  for (int i = 0; i < baton_comm_algorithm_count(c); i++) {
    const char *n = baton_comm_algorithm_name(c, i);
    if (n && strstr(n, "embedding")) return 1;
  }
  return 0;
}

/* x's pattern (bench_pattern: the same in every process).  0, or -1 when
 * out of memory. */
static int make_pattern(ectx *x) { return (x->pattern = bench_pattern(x->o->dtype, PATTERN)) ? 0 : -1; }

/* Every shape of o in order: run_shape's row each, to `done` (printed,
 * or sent to the parent). */
static void each_shape(ectx *x, void (*done)(ectx *x, bench_embed_row *row)) {
  const bench_embed_opts *o = x->o;
  int nrowsopt = o->nrows ? o->nrows : 1;
  for (int ib = 0; ib < o->nB; ib++)
    for (int it = 0; it < o->nT; it++)
      for (int id = 0; id < o->nD; id++)
        for (int ig = 0; ig < o->nbag; ig++)
          for (int ir = 0; ir < nrowsopt; ir++)
            for (int is = 0; is < o->nskew; is++) {
              bench_embed_row one, *row = x->t ? &x->t->rows[x->t->nrows++] : &one;
              run_shape(x, o->B[ib], o->T[it], o->D[id], o->bag[ig], o->nrows ? o->rows[ir] : 0, o->skew[is], row);
              done(x, row);
            }
}

/* ---- -P: a process per rank (bench_ranks_procs) ---- */

/* Another rank's row into all: the slowest rank's time per part, the sums
 * of wrong and checked elements (rows and lookups are every rank's). */
static void procs_fold(void *all, const void *one) {
  bench_embed_row *a = all, o;
  memcpy(&o, one, sizeof o);
  double *at[] = {&a->pool_us, &a->a2a_us, &a->shuf_us, &a->base_us, &a->baton_us};
  const double ot[] = {o.pool_us, o.a2a_us, o.shuf_us, o.base_us, o.baton_us};
  for (size_t i = 0; i < sizeof ot / sizeof ot[0]; i++) bench_fold_time(at[i], ot[i]);
  bench_fold_wrong(&a->wrong_base, o.wrong_base);
  bench_fold_wrong(&a->wrong_baton, o.wrong_baton);
  a->checked += o.checked;
}

static void procs_send(ectx *x, bench_embed_row *row) {
  bench_fork_result(x->k.fork, row, sizeof *row);
}

/* Rank c->rank's shapes, in its process (x: as the parent set it, o
 * alone): a row each to the parent. */
static void procs_run(void *arg, const bench_child *c) {
  ectx *x = arg;
  x->k = *c->k;
  x->t = NULL;
  x->base = x->k.nccl != NULL;
  if (make_pattern(x)) bench_fork_fail(x->k.fork, "out of host memory for the pattern");
  each_shape(x, procs_send);
  free(x->pattern);
}

static void procs_header(void *arg) {
  bench_embed_print_header(stdout, ((ectx *)arg)->t);
}

static void procs_print(void *arg, const void *row) {
  bench_embed_print_row(stdout, ((ectx *)arg)->t, row);
}

static void print_row(ectx *x, bench_embed_row *row) {
  bench_embed_print_row(stdout, x->t, row);
}

int bench_embed_run(const bench_embed_opts *o, bench_embed_table *t) {
  memset(t, 0, sizeof *t);
  t->dtype = o->dtype;
  t->mean = o->mean;
  t->weighted = o->weighted;
  int nrowsopt = o->nrows ? o->nrows : 1;
  size_t nshapes = (size_t)o->nB * o->nT * o->nD * o->nbag * nrowsopt * o->nskew;
  ectx *x = calloc(1, sizeof *x);
  if (!x) return 2;
  x->o = o;
  x->es = ip_dtype_size[o->dtype];
  if (!o->c.procs && bench_ranks_size(&x->k, &o->c)) {
    free(x);
    return 2;
  }
  int world = o->c.procs ? o->c.ngpus : x->k.nranks, rc = 2;
  for (int i = 0; i < o->nB; i++)
    if (o->B[i] % world) {
      fprintf(stderr, "baton bench: --batch %lld is not a multiple of the %d ranks\n", (long long)o->B[i], world);
      free(x);
      return 2;
    }
  if (!(t->rows = calloc(nshapes + 1, sizeof *t->rows))) goto out;
  x->t = t;
  if (o->c.procs) {
    static ectx p;
    p = *x;
    const bench_procs_mode m = {"the pooling alone", NULL, procs_run, sizeof(bench_embed_row), (int)nshapes,
                                &t->info, procs_header, t->rows, &t->nrows, procs_fold, procs_print,
                                offsetof(bench_embed_row, error), sizeof(((bench_embed_row *)0)->error)};
    free(x);
    return bench_ranks_procs(&o->c, &m, &p);
  }
  if (bench_ranks_open(&x->k, &o->c, &t->info, NULL, NULL, "the pooling alone")) goto out;
  x->base = x->k.nccl != NULL;
  if (!has_embedding(x->k.pc[0]))
    fprintf(stderr, "# warning: the one-rank communicators loaded no embedding program: put one in BATON_ALGO_DIR "
            "(baton compile algorithms/embedding_alltoall.lua --param ranks=1%s -o DIR/embedding_alltoall_1r.xml)\n",
            o->mean ? " --param mode=mean" : o->weighted ? " --param weighted=1" : "");
  if (x->k.nranks > 1 && !has_embedding(x->k.bc[0]))
    fprintf(stderr, "# warning: the %d-rank communicator loaded no embedding program: put one in BATON_ALGO_DIR "
            "(tools/measure/gpu_prep.sh ... %d OUT: OUT/default)\n", x->k.nranks, x->k.nranks);
  if (make_pattern(x)) goto out;
  bench_embed_print_header(stdout, t);
  each_shape(x, print_row);
  rc = 0;
out:
  bench_ranks_shut(&x->k, NULL, NULL);
  free(x->pattern);
  free(x);
  return rc;
}
