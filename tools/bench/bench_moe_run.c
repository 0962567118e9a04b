/* bench_moe_run.c -- the GPU part of `baton bench --fused gemm_alltoall`:
 * cuBLAS's GEMM alone, NCCL's AllToAll of its output alone, the two in a
 * row on one stream (the baseline), baton's own GEMM alone (a one-rank
 * communicator per rank: the GEMM opcode alone), baton's own GEMM then
 * NCCL's AllToAll, and baton_gemm_alltoall, on the same inputs and
 * streams, checked and timed alike (tools/bench/bench_parts.c), interleaved per
 * shape.  One process drives every rank.  With --fill, baton's n-rank
 * calls get each rank's token counts; the rest takes the padded X whole. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "bench_cublas.h"
#include "bench_moe.h"
#include "bench_nccl.h"
#include "bench_parts.h"
#include "bench_ranks.h"
#include "ip_compute.h"

#define MAXR BENCH_RANKS_MAX
#define PATTERN 1048573           /* bf16 values (a prime count) X and W are tiled from */
#define ROWS_PER_RANK 32          /* output rows checked per rank, at least (at least 2 a block) */
#define SAMPLED_COLS 64           /* columns checked of each of those rows */

enum { WHAT_GEMM, WHAT_A2A, WHAT_BASE, WHAT_OWN, WHAT_OWN_A2A, WHAT_BATON, NWHAT };
static const char *const what_name[NWHAT] = {"cuBLAS GEMM", "NCCL AllToAll", "baseline", "own gemm", "own+a2a",
                                             "baton"};

typedef struct mctx {
  const bench_moe_opts *o;
  bench_ranks k;                 /* this process's ranks; pc: baton's own GEMM */
  int base;                      /* NCCL is there: alltoall, baseline and own+a2a run */
  bench_cublas *cb;
  void *ch[MAXR];                /* a cuBLAS handle per rank */
  uint16_t *pattern;             /* PATTERN bf16 values */
  double *pd;                    /* the same in double, for the check */
  /* this shape */
  int64_t T, H, F;
  char *X[MAXR], *W[MAXR];
  char *Y[MAXR];                 /* cuBLAS's Y [T, H] */
  char *recv[MAXR];              /* the baseline's output: Y after the AllToAll */
  char *Yo[MAXR];                /* baton's own GEMM's Y */
  char *recvo[MAXR];             /* own+a2a's output: Yo after the AllToAll */
  char *out[MAXR];               /* baton's out [T, H] */
  /* --fill: cnt[r][q] tokens in block q of X_r (T/n each without it), r
   * and q of all ranks; dcnt[r]: the local rank r's row of cnt in its
   * device memory (NULL without --fill) */
  int32_t cnt[MAXR][MAXR];
  int32_t *dcnt[MAXR];
} mctx;

_Static_assert(sizeof(bench_moe_row) <= BENCH_FORK_MSG_MAX, "a row fits one message");

/* Where rank r's X and W start in the pattern: element e of X_r is
 * pattern[(e + x_off(r)) % PATTERN], of W_r pattern[(e + w_off(r)) %
 * PATTERN]; every rank's differ, and X's from W's. */
static int64_t x_off(int r) { return ((int64_t)r * 7919) % PATTERN; }
static int64_t w_off(int r) { return ((int64_t)r * 7919 + 524287) % PATTERN; }

static void free_shape(mctx *x) {
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    void *d[] = {x->X[r], x->W[r], x->Y[r], x->recv[r], x->Yo[r], x->recvo[r], x->out[r], x->dcnt[r]};
    for (size_t k = 0; k < sizeof d / sizeof d[0]; k++)
      if (d[k]) cudaFree(d[k]);
  }
  memset(x->X, 0, sizeof x->X);
  memset(x->W, 0, sizeof x->W);
  memset(x->Y, 0, sizeof x->Y);
  memset(x->recv, 0, sizeof x->recv);
  memset(x->Yo, 0, sizeof x->Yo);
  memset(x->recvo, 0, sizeof x->recvo);
  memset(x->out, 0, sizeof x->out);
  memset(x->dcnt, 0, sizeof x->dcnt);
}

/* The token counts of this shape (--fill F): cnt[r][q] uniform in
 * [F/2 * T/n, 3F/2 * T/n] capped at T/n, from a seed per (rank, shape);
 * T/n each without --fill.  The share of X's rows that are tokens, mean
 * over ranks. */
static double draw_counts(mctx *x) {
  int n = x->k.world;
  int64_t per = x->T / n, sum = 0;
  double f = x->o->fill;
  int64_t lo = (int64_t)(per * f * 0.5), hi = (int64_t)(per * f * 1.5);
  if (hi > per) hi = per;
  for (int r = 0; r < n; r++) {
    uint64_t s = 77 + (uint64_t)r;
    s = s * 0x9E3779B97F4A7C15ull ^ (uint64_t)x->T;
    s = s * 0x9E3779B97F4A7C15ull ^ (uint64_t)x->H;
    s = s * 0x9E3779B97F4A7C15ull ^ (uint64_t)x->F;
    s = s * 0x9E3779B97F4A7C15ull | 1;       /* xorshift needs a nonzero state */
    for (int q = 0; q < n; q++) {
      int64_t c = per;
      if (f > 0) {
        bench_frand(&s);
        c = lo + (int64_t)((s >> 11) % (uint64_t)(hi - lo + 1));
      }
      x->cnt[r][q] = (int32_t)c;
      sum += c;
    }
  }
  return (double)sum / ((double)n * (double)x->T);
}

/* Device bytes a rank needs for the shape: X, W; cuBLAS's Y, baton's own
 * GEMM's and baton's output, and with NCCL the two AllToAlls' outputs;
 * the scratch of both communicators (an out-of-place program computes
 * its input there: [T, H] each); 1 MiB more. */
static double rank_bytes(const mctx *x) {
  double th = (double)x->T * x->H * 2;
  return ((double)x->T * x->F + (double)x->F * x->H) * 2 + th * (x->base ? 5 : 3) + 2 * th + (1 << 20);
}

/* dst (n bf16 values on the current device) = the pattern from `off` on,
 * repeated: the first PATTERN values uploaded (rotated in rot, PATTERN
 * values of host memory), then doubled in place (every copy starts at a
 * multiple of PATTERN values).  0, or -1 with err. */
static int tile(const mctx *x, char *dst, size_t n, int64_t off, uint16_t *rot, const char *what, char *err,
                size_t len) {
  size_t chunk = n < PATTERN ? n : PATTERN;
  for (size_t i = 0; i < chunk; i++) rot[i] = x->pattern[(off + (int64_t)i) % PATTERN];
  if (!bench_cuda_ok(cudaMemcpy(dst, rot, chunk * 2, cudaMemcpyHostToDevice), what, err, len)) return -1;
  for (size_t done = chunk; done < n;) {
    size_t m = done < n - done ? done : n - done;
    if (!bench_cuda_ok(cudaMemcpy(dst + done * 2, dst, m * 2, cudaMemcpyDeviceToDevice), what, err, len)) return -1;
    done += m;
  }
  return 0;
}

/* Buffers of this shape, X and W tiled from the pattern; refused when a
 * rank's share of the free memory of the fullest GPU does not hold them.
 * 0, or -1 with err. */
static int alloc_shape(mctx *x, char *err, size_t len) {
  int per_gpu = x->o->c.share ? (x->k.nranks + x->o->c.share - 1) / x->o->c.share : 1;
  size_t freeb = (size_t)-1, totb = 0;
  for (int g = 0; g < x->k.ngpus; g++) {   /* devs[g] is GPU g in one process, the rank's GPU with -P */
    size_t f = 0;
    cudaSetDevice(x->k.devs[g]);
    if (!bench_cuda_ok(cudaMemGetInfo(&f, &totb), "cudaMemGetInfo", err, len)) return -1;
    if (f < freeb) freeb = f;
  }
  double need = rank_bytes(x), budget = (double)freeb * 0.85 / per_gpu;
  if (need > budget) {
    snprintf(err, len, "%.0f MiB a rank (X, W, outputs, baton's scratch) do not fit the %.0f MiB free (x %d rank%s "
             "a GPU)", need / 1048576.0, (double)freeb / 1048576.0, per_gpu, per_gpu == 1 ? "" : "s");
    return -1;
  }
  size_t nX = (size_t)(x->T * x->F), nW = (size_t)(x->F * x->H), out = (size_t)(x->T * x->H) * 2;
  uint16_t *rot = malloc((size_t)PATTERN * 2);
  if (!rot) { snprintf(err, len, "out of host memory"); return -1; }
  int rc = -1;
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    if (!bench_cuda_ok(cudaMalloc((void **)&x->X[r], nX * 2 + 16), "X", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->W[r], nW * 2 + 16), "W", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->Y[r], out + 16), "cuBLAS's Y", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->Yo[r], out + 16), "own gemm's Y", err, len) ||
        !bench_cuda_ok(cudaMalloc((void **)&x->out[r], out + 16), "baton's output", err, len) ||
        (x->base && !bench_cuda_ok(cudaMalloc((void **)&x->recv[r], out + 16), "the baseline's output", err, len)) ||
        (x->base && !bench_cuda_ok(cudaMalloc((void **)&x->recvo[r], out + 16), "own+a2a's output", err, len)))
      goto out;
    if (tile(x, x->X[r], nX, x_off(x->k.lo + r), rot, "X upload", err, len) ||
        tile(x, x->W[r], nW, w_off(x->k.lo + r), rot, "W upload", err, len))
      goto out;
    if (x->o->fill > 0 &&
        (!bench_cuda_ok(cudaMalloc((void **)&x->dcnt[r], sizeof x->cnt[r]), "the token counts", err, len) ||
         !bench_cuda_ok(cudaMemcpy(x->dcnt[r], x->cnt[x->k.lo + r], (size_t)x->k.world * sizeof x->cnt[0][0],
                                   cudaMemcpyHostToDevice), "the token counts' upload", err, len)))
      goto out;
  }
  rc = 0;
out:
  free(rot);
  return rc;
}

/* Poisons the outputs (all ones: NaN in bf16), then waits for every GPU:
 * cudaMemset and the tiling copies run on the legacy stream, which does
 * not order the ranks' non-blocking streams.  0, or -1 with err. */
static int poison(mctx *x, char *err, size_t len) {
  size_t out = (size_t)(x->T * x->H) * 2;
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    char *b[] = {x->Y[r], x->recv[r], x->Yo[r], x->recvo[r], x->out[r]};
    for (size_t k = 0; k < sizeof b / sizeof b[0]; k++)
      if (b[k] && !bench_cuda_ok(cudaMemset(b[k], 0xff, out), "poison", err, len)) return -1;
  }
  for (int g = 0; g < x->k.ngpus; g++) {
    cudaSetDevice(x->k.devs[g]);
    if (!bench_cuda_ok(cudaDeviceSynchronize(), "setting the shape up", err, len)) return -1;
  }
  return 0;
}

/* The stream rank r's own GEMM alone runs on (bench_ranks_own_stream). */
static cudaStream_t own_stream(const mctx *x, int r) { return bench_ranks_own_stream(&x->k, x->o->c.share, r); }

/* The streams `what` runs on (bench_parts_ops.streams): every rank's; the
 * own GEMM alone with ranks sharing GPUs, each GPU's first rank's. */
static int part_streams(void *ctx, int what, cudaStream_t *st, int *devs) {
  const mctx *x = ctx;
  return bench_ranks_streams(&x->k, what == WHAT_OWN, x->o->c.share, st, devs);
}

static const char *hint(baton_result e) {
  return e == baton_unsupported ? " (no gemm program for this rank count and size in BATON_ALGO_DIR?)" : "";
}

/* baton_gemm_alltoall on every rank, grouped: on the one-rank
 * communicators into Yo (own: on own_stream, else on the ranks' streams),
 * the padded X whole, or on the n-rank one into out, with the ranks'
 * token counts under --fill.  0, or -1 with err. */
static int baton_calls(mctx *x, int one_rank, int own, char *err, size_t len) {
  baton_group_start();
  for (int r = 0; r < x->k.nranks; r++) {
    cudaSetDevice(x->k.devs[r]);
    baton_result e = baton_gemm_alltoall(one_rank ? x->k.pc[r] : x->k.bc[r], x->X[r], 0, x->W[r], 0,
                                         one_rank ? NULL : x->dcnt[r], one_rank ? x->Yo[r] : x->out[r],
                                         (size_t)x->T, (size_t)x->F, (size_t)x->H, baton_bf16,
                                         own ? own_stream(x, r) : x->k.st[r]);
    if (e) {
      if (one_rank)
        snprintf(err, len, "own gemm: baton_gemm_alltoall on rank %d's one-rank communicator: %s%s", x->k.lo + r,
                 baton_result_string(e), hint(e));
      else
        snprintf(err, len, "baton_gemm_alltoall on rank %d: %s%s", x->k.lo + r, baton_result_string(e), hint(e));
      baton_group_end();
      return -1;
    }
  }
  baton_result e = baton_group_end();
  if (e) { snprintf(err, len, "%sbaton group: %s", one_rank ? "own gemm: " : "", baton_result_string(e)); return -1; }
  return 0;
}

/* NCCL's AllToAll of from[] into to[] on the ranks' streams: T/n*H
 * elements to each peer.  0, or -1 with err. */
static int alltoall(mctx *x, char **from, char **to, char *err, size_t len) {
  void *send[MAXR], *recv[MAXR];
  for (int r = 0; r < x->k.nranks; r++) {
    send[r] = from[r];
    recv[r] = to[r];
  }
  return bench_nccl_launch(x->k.nccl, BENCH_ALLTOALL, x->k.nc, x->k.nranks, x->k.world, send, recv,
                           (size_t)(x->T / x->k.world * x->H), IP_BF16, IP_OP_SUM, 0, x->k.st, err, len);
}

/* One call of `what` on every rank (bench_parts_ops.launch; `it` is not
 * used).  0, or -1 with err. */
static int launch(void *ctx, int what, int it, char *err, size_t len) {
  mctx *x = ctx;
  (void)it;
  if (what == WHAT_GEMM || what == WHAT_BASE)
    for (int r = 0; r < x->k.nranks; r++) {
      char why[200];
      cudaSetDevice(x->k.devs[r]);
      if (bench_cublas_gemm(x->cb, x->ch[r], x->T, x->H, x->F, x->X[r], x->F, x->W[r], x->H, x->Y[r], x->H, x->k.st[r],
                            why, sizeof why)) {
        snprintf(err, len, "cuBLAS GEMM on rank %d: %s", x->k.lo + r, why);
        return -1;
      }
    }
  if ((what == WHAT_A2A || what == WHAT_BASE) && alltoall(x, x->Y, x->recv, err, len)) return -1;
  if ((what == WHAT_OWN || what == WHAT_OWN_A2A) && baton_calls(x, 1, what == WHAT_OWN, err, len)) return -1;
  if (what == WHAT_OWN_A2A && alltoall(x, x->Yo, x->recvo, err, len)) return -1;
  if (what == WHAT_BATON && baton_calls(x, 0, 0, err, len)) return -1;
  return 0;
}

/* Every rank's stream done, and the communicators' asynchronous errors
 * (bench_parts_ops.wait).  0, or -1 with err. */
static int wait_all(void *ctx, char *err, size_t len) {
  const mctx *x = ctx;
  return bench_ranks_wait(&x->k, "own gemm", err, len);
}

/* ---- the check ---------------------------------------------------------
 * Sampled elements of every rank's outputs against the exact product in
 * double.  Rank q's out (and, after the AllToAll, the baseline's and
 * own+a2a's) holds in row p*T/n + i, block p, row q*T/n + i of expert p's
 * Y_p = X_p W_p: NCCL's AllToAll sends block q of rank p's send buffer to
 * block p of rank q's receive buffer, the layout baton_gemm_alltoall
 * gives.  Without NCCL the GEMMs alone are checked where they stay: row s
 * of rank q's Y is row s of X_q W_q.  The rows: at least ROWS_PER_RANK,
 * spread over every block with its first and last row (with --fill, over
 * block p's tokens on rank q alone, rows < cnt[p][q], the last of them
 * among them; the other outputs take the padded X whole and are checked on
 * the same rows); the columns: SAMPLED_COLS spread with the first and
 * last.  Host threads take (rank, row) pairs in turn, over this process's
 * ranks. */
typedef struct chk {
  mctx *x;
  int have_b, have_o, have_t;    /* the outputs checked: the baseline's (or the GEMM alone's), own's, baton's */
  int nrows, ncols;              /* nrows: the most rows a rank has checked */
  int nr[MAXR];                  /* local rank l's rows checked: rows[l * nrows ..] */
  int64_t *rows, cols[SAMPLED_COLS];
  int64_t bad_b, bad_o, bad_t;
  bench_tasks tasks;
} chk;

/* Row xrow of expert e's X_e W_e at the sampled columns, exactly (val)
 * with the sum of the terms' magnitudes (mag), from the pattern. */
static void exact_row(const chk *c, int e, int64_t xrow, double *val, double *mag) {
  const mctx *x = c->x;
  int64_t F = x->F, x0 = (xrow % PATTERN * (F % PATTERN) + x_off(e)) % PATTERN, step = x->H % PATTERN;
  for (int j = 0; j < c->ncols; j++) {
    int64_t xi = x0, wi = (c->cols[j] % PATTERN + w_off(e)) % PATTERN;
    double v = 0, m = 0;
    for (int64_t k = 0; k < F; k++) {
      double t = x->pd[xi] * x->pd[wi];
      v += t;
      m += fabs(t);
      if (++xi == PATTERN) xi = 0;
      wi += step;
      if (wi >= PATTERN) wi -= PATTERN;
    }
    val[j] = v;
    mag[j] = m;
  }
}

/* Counts in *bad the wrong elements of `got` (an output row of H bf16
 * values) at the sampled columns against val/mag: off by more than one
 * bf16 rounding of the exact value plus the f32 accumulation's bound (F
 * terms, 2^-24 of their magnitudes each); NaN is wrong.  The first of
 * all is described on stderr. */
static void compare(chk *c, const uint16_t *got, const double *val, const double *mag, int64_t *bad,
                    const char *name, int q, int64_t row) {
  const mctx *x = c->x;
  for (int j = 0; j < c->ncols; j++) {
    double g = ip_get(IP_BF16, got, (size_t)c->cols[j]), want = val[j];
    double tol = ip_dtype_eps(IP_BF16) * fabs(want) + (double)x->F * ldexp(1, -24) * mag[j];
    if (fabs(g - want) <= tol) continue;
    if (!__atomic_fetch_add(bad, 1, __ATOMIC_RELAXED))
      fprintf(stderr, "# T=%lld H=%lld F=%lld: %s: rank %d out[%lld][%lld] = %g, expected %g (tolerance %g)\n",
              (long long)x->T, (long long)x->H, (long long)x->F, name, q, (long long)row, (long long)c->cols[j], g,
              want, tol);
  }
}

static void *chk_worker(void *arg) {
  chk *c = arg;
  mctx *x = c->x;
  int64_t per = x->T / x->k.world;
  size_t rowb = (size_t)x->H * 2;
  uint16_t *hb = malloc(rowb), *ho = malloc(rowb), *ht = malloc(rowb);
  double *ve = malloc(SAMPLED_COLS * sizeof(double)), *me = malloc(SAMPLED_COLS * sizeof(double));
  double *vl = malloc(SAMPLED_COLS * sizeof(double)), *ml = malloc(SAMPLED_COLS * sizeof(double));
  if (!hb || !ho || !ht || !ve || !me || !vl || !ml) { bench_tasks_fail(&c->tasks, "out of host memory for the check"); goto out; }
  for (;;) {
    int64_t task = bench_tasks_take(&c->tasks);
    if (task < 0) break;
    int l = (int)(task / c->nrows), q = x->k.lo + l;
    if (task % c->nrows >= c->nr[l]) continue;
    int64_t row = c->rows[task], p = row / per, i = row % per;
    /* the row of each output checked: exchanged (out-shaped) with NCCL,
     * else the GEMMs' own Y */
    char *bsrc = x->base ? x->recv[l] : x->Y[l], *osrc = x->base ? x->recvo[l] : x->Yo[l];
    cudaError_t e = cudaSetDevice(x->k.devs[l]);
    if (!e && c->have_t) e = cudaMemcpy(ht, x->out[l] + (size_t)row * rowb, rowb, cudaMemcpyDeviceToHost);
    if (!e && c->have_b) e = cudaMemcpy(hb, bsrc + (size_t)row * rowb, rowb, cudaMemcpyDeviceToHost);
    if (!e && c->have_o) e = cudaMemcpy(ho, osrc + (size_t)row * rowb, rowb, cudaMemcpyDeviceToHost);
    if (e) {
      char m[200];
      snprintf(m, sizeof m, "output download: %s", cudaGetErrorString(e));
      bench_tasks_fail(&c->tasks, m);
      break;
    }
    exact_row(c, (int)p, q * per + i, ve, me);   /* out's row: expert p's row of rank q's tokens */
    if (c->have_t) compare(c, ht, ve, me, &c->bad_t, "baton", q, row);
    if (x->base) {
      if (c->have_b) compare(c, hb, ve, me, &c->bad_b, "baseline", q, row);
      if (c->have_o) compare(c, ho, ve, me, &c->bad_o, "own+a2a", q, row);
    } else if (c->have_b || c->have_o) {
      exact_row(c, q, row, vl, ml);              /* Y's row: rank q's own expert */
      if (c->have_b) compare(c, hb, vl, ml, &c->bad_b, "cuBLAS GEMM alone", q, row);
      if (c->have_o) compare(c, ho, vl, ml, &c->bad_o, "own gemm alone", q, row);
    }
  }
out:
  free(hb); free(ho); free(ht); free(ve); free(me); free(vl); free(ml);
  return NULL;
}

/* Checks what ran (have_b: the baseline, or cuBLAS's GEMM alone; have_o:
 * own+a2a, or the own GEMM alone; have_t: baton): the wrong elements of
 * each (-1: not checked), the elements checked per output.  0, or -1 with
 * err. */
static int check(mctx *x, int have_b, int have_o, int have_t, bench_moe_row *row, char *err, size_t len) {
  chk c;
  memset(&c, 0, sizeof c);
  c.x = x;
  c.have_b = have_b;
  c.have_o = have_o;
  c.have_t = have_t;
  int n = x->k.world, nl = x->k.nranks, k = (ROWS_PER_RANK + n - 1) / n;   /* rows a block */
  if (k < 2) k = 2;
  int64_t per = x->T / n, *blk = malloc((size_t)k * sizeof *blk);
  c.nrows = n * k;
  c.rows = malloc((size_t)nl * c.nrows * sizeof *c.rows);
  if (!blk || !c.rows) {
    free(blk);
    free(c.rows);
    snprintf(err, len, "check: out of host memory");
    return -1;
  }
  int64_t nchecked = 0;
  for (int l = 0; l < nl; l++)
    for (int p = 0, q = x->k.lo + l; p < n; p++) {
      int nb = x->cnt[p][q] > 0 ? bench_spread(x->cnt[p][q], k, blk) : 0;   /* block p's tokens on rank q */
      for (int i = 0; i < nb; i++) c.rows[(int64_t)l * c.nrows + c.nr[l]++] = p * per + blk[i];
      nchecked += nb;
    }
  free(blk);
  c.ncols = bench_spread(x->H, SAMPLED_COLS, c.cols);
  int64_t tasks = (int64_t)nl * c.nrows;
  int failed = bench_tasks_run(&c.tasks, tasks, chk_worker, &c, err, len);
  free(c.rows);
  if (failed) return -1;
  row->wrong_base = have_b ? c.bad_b : -1;
  row->wrong_own = have_o ? c.bad_o : -1;
  row->wrong_baton = have_t ? c.bad_t : -1;
  row->checked = nchecked * c.ncols;
  return 0;
}

/* The parts a failure of `what` in its checked run rules out: itself, and
 * for the baseline and own+a2a the part alone that failed (any of them
 * when the error names none: a stream error). */
static unsigned dead_after(int what, const char *err) {
  int nccl = strstr(err, "nccl") || strstr(err, "NCCL");
  unsigned d = 1u << what;
  if (what == WHAT_BASE)
    d |= !strncmp(err, "cuBLAS", 6) ? 1u << WHAT_GEMM : nccl ? 1u << WHAT_A2A : 1u << WHAT_GEMM | 1u << WHAT_A2A;
  if (what == WHAT_OWN_A2A)
    d |= !strncmp(err, "own gemm", 8) ? 1u << WHAT_OWN : nccl ? 1u << WHAT_A2A : 1u << WHAT_OWN | 1u << WHAT_A2A;
  return d;
}

/* The parts dead on any rank (bench_parts_ops.sync): with a process per
 * rank, after every rank got here; else dead itself. */
static unsigned sync_dead(void *ctx, unsigned dead) {
  const mctx *x = ctx;
  return x->k.fork ? (unsigned)bench_fork_barrier(x->k.fork, (int)dead) : dead;
}

enum { SHAPE_FAILED = 1u << NWHAT };   /* sync_dead's bit: some rank could not set the shape up */

static void run_shape(mctx *x, int64_t T, int64_t H, int64_t F, bench_moe_row *row) {
  memset(row, 0, sizeof *row);
  row->T = x->T = T;
  row->H = x->H = H;
  row->F = x->F = F;
  row->tokens = -1;
  row->gemm_us = row->a2a_us = row->base_us = row->own_us = row->own_a2a_us = row->baton_us = -1;
  row->wrong_base = row->wrong_own = row->wrong_baton = -1;
  char err[240] = "";
  /* bit per WHAT: failed or not set up, not run (again) for this shape */
  unsigned dead = x->base ? 0 : 1u << WHAT_A2A | 1u << WHAT_BASE | 1u << WHAT_OWN_A2A;
  if (T % x->k.world || H % BENCH_MOE_TILE || F % BENCH_MOE_TILE) {
    snprintf(row->error, sizeof row->error, "T=%lld is not a multiple of the %d ranks, or H=%lld or F=%lld not of %d",
             (long long)T, x->k.world, (long long)H, (long long)F, BENCH_MOE_TILE);
    return;
  }
  row->tokens = draw_counts(x);
  int failed = alloc_shape(x, err, sizeof err) || poison(x, err, sizeof err);
  if (failed) snprintf(row->error, sizeof row->error, "%s", err);
  if (sync_dead(x, failed ? SHAPE_FAILED : 0) & SHAPE_FAILED) {
    if (!failed) snprintf(row->error, sizeof row->error, "failed on another rank");
    free_shape(x);
    return;
  }
  /* once each, checked: the baseline (or cuBLAS's GEMM alone), own+a2a
   * (or the own GEMM alone), baton */
  int ran[NWHAT] = {0};
  int first[3] = {x->base ? WHAT_BASE : WHAT_GEMM, x->base ? WHAT_OWN_A2A : WHAT_OWN, WHAT_BATON};
  for (int k = 0; k < 3; k++) {
    int what = first[k];
    if (launch(x, what, 0, err, sizeof err) || wait_all(x, err, sizeof err)) {
      snprintf(row->error, sizeof row->error, "%s: %.200s", what_name[what], err);
      dead |= dead_after(what, err);
      continue;
    }
    ran[what] = 1;
  }
  if (x->o->c.check && (ran[first[0]] || ran[first[1]] || ran[WHAT_BATON]) &&
      check(x, ran[first[0]], ran[first[1]], ran[WHAT_BATON], row, err, sizeof err))
    snprintf(row->error, sizeof row->error, "%s", err);
  bench_ranks_algorithm(&x->k, row->algorithm, sizeof row->algorithm);
  static const bench_parts_ops ops = {launch, wait_all, part_streams, sync_dead};
  double us[NWHAT];
  bench_parts_measure_opts(&ops, x, NWHAT, what_name, &x->o->c, dead, us, row->error, sizeof row->error);
  row->gemm_us = us[WHAT_GEMM];
  row->a2a_us = us[WHAT_A2A];
  row->base_us = us[WHAT_BASE];
  row->own_us = us[WHAT_OWN];
  row->own_a2a_us = us[WHAT_OWN_A2A];
  row->baton_us = us[WHAT_BATON];
  free_shape(x);
}

/* Whether comm loaded a gemm program (algorithms/moe_combine.lua's are
 * called moe_combine*). */
static int has_gemm(const baton_comm *c) {
  for (int i = 0; i < baton_comm_algorithm_count(c); i++) {
    const char *n = baton_comm_algorithm_name(c, i);
    if (n && (strstr(n, "moe") || strstr(n, "gemm"))) return 1;
  }
  return 0;
}

/* The communicators, cuBLAS and NCCL, streams; the warnings when
 * BATON_ALGO_DIR lacks gemm programs.  0, or -1 after the reason on
 * stderr. */
static int setup(mctx *x, bench_moe_table *t) {
  if (bench_ranks_open(&x->k, &x->o->c, &t->info, &x->cb, x->ch, "own gemm")) return -1;
  x->base = x->k.nccl != NULL;
  if (!has_gemm(x->k.pc[0]))
    fprintf(stderr, "# warning: the one-rank communicators loaded no gemm program: put one in BATON_ALGO_DIR "
            "(baton compile algorithms/moe_combine.lua --param ranks=1 -o DIR/moe_combine_1r.xml)\n");
  if (x->k.nranks > 1 && !has_gemm(x->k.bc[0]))
    fprintf(stderr, "# warning: the %d-rank communicator loaded no gemm program: put one in BATON_ALGO_DIR "
            "(baton compile algorithms/moe_combine.lua --param ranks=%d -o DIR/moe_combine_%dr.xml)\n", x->k.nranks,
            x->k.nranks, x->k.nranks);
  return 0;
}

/* x's pattern, in bf16 (bench_pattern: the same in every process) and in
 * double.  0, or -1 when out of memory. */
static int make_pattern(mctx *x) {
  x->pattern = bench_pattern(IP_BF16, PATTERN);
  x->pd = malloc((size_t)PATTERN * sizeof *x->pd);
  if (!x->pattern || !x->pd) return -1;
  for (int i = 0; i < PATTERN; i++) x->pd[i] = ip_get(IP_BF16, x->pattern, (size_t)i);
  return 0;
}

/* ---- -P: a process per rank (bench_ranks_procs) ---- */

typedef struct procs_arg {
  const bench_moe_opts *o;
  bench_moe_table *t;
} procs_arg;

/* Rank c->rank's shapes, in its process: a row each to the parent. */
static void procs_run(void *arg, const bench_child *c) {
  const procs_arg *p = arg;
  const bench_moe_opts *o = p->o;
  static mctx mx;
  mctx *x = &mx;
  x->o = o;
  x->k = *c->k;
  x->cb = c->cb;
  x->ch[0] = c->ch[0];
  x->base = x->k.nccl != NULL;
  if (make_pattern(x)) bench_fork_fail(x->k.fork, "out of host memory for the pattern");
  for (int it = 0; it < o->nT; it++)
    for (int ih = 0; ih < o->nH; ih++)
      for (int jf = 0; jf < o->nF; jf++) {
        bench_moe_row row;
        run_shape(x, o->T[it], o->H[ih], o->F[jf], &row);
        bench_fork_result(x->k.fork, &row, sizeof row);
      }
  free(x->pattern);
  free(x->pd);
}

static void procs_header(void *arg) {
  bench_moe_print_header(stdout, ((procs_arg *)arg)->t);
}

/* Another rank's row into all: the slowest rank's time per part, the sums
 * of wrong and checked elements. */
static void procs_fold(void *all, const void *one) {
  bench_moe_row *a = all, o;
  memcpy(&o, one, sizeof o);
  double *at[] = {&a->gemm_us, &a->a2a_us, &a->base_us, &a->own_us, &a->own_a2a_us, &a->baton_us};
  const double ot[] = {o.gemm_us, o.a2a_us, o.base_us, o.own_us, o.own_a2a_us, o.baton_us};
  for (size_t i = 0; i < sizeof ot / sizeof ot[0]; i++) bench_fold_time(at[i], ot[i]);
  bench_fold_wrong(&a->wrong_base, o.wrong_base);
  bench_fold_wrong(&a->wrong_own, o.wrong_own);
  bench_fold_wrong(&a->wrong_baton, o.wrong_baton);
  a->checked += o.checked;
}

static void procs_print(void *arg, const void *row) {
  bench_moe_print_row(stdout, ((procs_arg *)arg)->t, row);
}

int bench_moe_run(const bench_moe_opts *o, bench_moe_table *t) {
  memset(t, 0, sizeof *t);
  int world = o->c.ngpus;
  mctx *x = calloc(1, sizeof *x);
  if (!x) return 2;
  x->o = o;
  if (!o->c.procs && bench_ranks_size(&x->k, &o->c)) {
    free(x);
    return 2;
  }
  if (!o->c.procs) world = x->k.nranks;
  for (int i = 0; i < o->nT; i++)
    if (o->T[i] % world) {
      fprintf(stderr, "baton bench: --tokens %lld is not a multiple of the %d ranks\n", (long long)o->T[i], world);
      free(x);
      return 2;
    }
  t->fill = o->fill;
  int rc = 2;
  if (o->c.procs) {
    free(x);
    if (!(t->rows = calloc((size_t)o->nT * o->nH * o->nF + 1, sizeof *t->rows))) return 2;
    static procs_arg p;
    p = (procs_arg){o, t};
    const bench_procs_mode m = {"own gemm", "", procs_run, sizeof(bench_moe_row), o->nT * o->nH * o->nF,
                                &t->info, procs_header, t->rows, &t->nrows, procs_fold, procs_print, offsetof(bench_moe_row, error),
                                sizeof(((bench_moe_row *)0)->error)};
    return bench_ranks_procs(&o->c, &m, &p);
  }
  if (setup(x, t) || make_pattern(x)) goto out;
  t->rows = calloc((size_t)o->nT * o->nH * o->nF + 1, sizeof *t->rows);
  if (!t->rows) goto out;
  bench_moe_print_header(stdout, t);
  for (int it = 0; it < o->nT; it++)
    for (int ih = 0; ih < o->nH; ih++)
      for (int jf = 0; jf < o->nF; jf++) {
        bench_moe_row *row = &t->rows[t->nrows++];
        run_shape(x, o->T[it], o->H[ih], o->F[jf], row);
        bench_moe_print_row(stdout, t, row);
      }
  rc = 0;
out:
  bench_ranks_shut(&x->k, x->cb, x->ch);
  free(x->pattern);
  free(x->pd);
  free(x);
  return rc;
}
