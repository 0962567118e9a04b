/* gpu_moe.c -- fused GEMM + AllToAll (the mixture-of-experts combine) on
 * real GPUs through the public API: every loaded gemm program by name
 * (baton_run_fused) and the automatic choice (baton_gemm_alltoall), over
 * shapes with partial GEMM tiles (tokens and H not multiples of the
 * engine's 128 x 256 tile), chunks that cut a tile's rows, padded rows,
 * few tokens over a long K (the engine splits K over blocks); CUDA-graph
 * replays on new data; refused calls.  Every element of every
 * rank's output [tokens, H] is compared with cuBLAS's Y = X W (bf16 in,
 * f32 accumulation, bf16 out) of the rank whose expert computed it,
 * within one bf16 rounding; the output is poisoned (NaN) before each call
 * so that a row nobody wrote fails.
 *
 * Usage: gpu_moe --ranks N --dir DIR [--gpus G] [--big] [--procs]
 *   DIR holds the fused IR files; rank r runs on GPU r % G (ranks share a
 *   GPU when G < N: their correctness, not their speed); --procs: a
 *   process per rank, each making every rank's X and W from the same
 *   random draws (on its own GPU, for the reference) and checking its own
 *   output; its captured calls go straight into the peers' outputs.  TAP
 *   output; skips when fewer than G GPUs are present. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "rt_comm.h"
#include "rt_param.h"
#include "rt_peerbuf.h"
#include "rt_window.h"
#include "gpu_ranks.h"
#include "tap.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

static cublasHandle_t *blas;   /* per rank: the reference's */

static int mine(int r) { return r >= rank_lo && r < rank_hi; }
static int procs(void) { return rank_hi - rank_lo < nranks; }
/* Whether calls that can run direct do (BATON_FUSED_DIRECT, read once by the library). */
static int direct(void) { return rt_param_int(RT_PARAM_FUSED_DIRECT) != 0; }
/* Where rank r's buffers and reference live: its GPU, or with a process
 * per rank this process's (every rank's operands are made here). */
static int bdev(int r) { return procs() ? dev_of(rank_lo) : dev_of(r); }

/* One shape: T tokens on every rank (T / n from each rank), X [T, F]
 * rows ldx apart, W [F, H] rows ldw apart. */
typedef struct shape { size_t T, F, H, ldx, ldw; } shape;

/* Per rank: X, W, the output and cuBLAS's Y on the device; Y and the
 * output on the host; the token counts of an uneven call (uneven set:
 * block q of X holds hcnt[q] tokens, a copy of them at dcnt). */
typedef struct bufs {
  uint16_t *dX, *dW, *dout, *dref;
  uint16_t *hout, *href;
  int32_t *dcnt, hcnt[64];
  int uneven;
} bufs;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* A bf16 in [-1, 1): the top bits of a float (exactly representable). */
static uint16_t brand(void) {
  float f = (float)((double)(next() >> 11) / 4503599627370496.0 - 1.0);
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void fill(uint16_t *d, size_t n) {
  uint16_t *h = malloc(n * 2);
  for (size_t i = 0; i < n; i++) h[i] = brand();
  cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice);
  free(h);
}

static void bufs_free(bufs *b) {
  if (!b) return;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    cudaFree(b[r].dX); cudaFree(b[r].dW); cudaFree(b[r].dout); cudaFree(b[r].dref); cudaFree(b[r].dcnt);
    free(b[r].hout); free(b[r].href);
  }
  free(b);
}

static bufs *bufs_new(const shape *s) {
  bufs *b = calloc(nranks, sizeof *b);
  if (!b) return NULL;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    if (cudaMalloc((void **)&b[r].dX, s->T * s->ldx * 2) || cudaMalloc((void **)&b[r].dW, s->F * s->ldw * 2) ||
        cudaMalloc((void **)&b[r].dout, s->T * s->H * 2) || cudaMalloc((void **)&b[r].dref, s->T * s->H * 2) ||
        cudaMalloc((void **)&b[r].dcnt, 64 * sizeof(int32_t)) ||
        !(b[r].hout = malloc(s->T * s->H * 2)) || !(b[r].href = malloc(s->T * s->H * 2))) {
      bufs_free(b);
      return NULL;
    }
    fill(b[r].dX, s->T * s->ldx);
    fill(b[r].dW, s->F * s->ldw);
    cudaMemset(b[r].dout, 0xff, s->T * s->H * 2);   /* NaN */
    cudaDeviceSynchronize();   /* cudaMemset runs on the legacy stream, which the ranks' streams do not wait for */
  }
  return b;
}

/* cuBLAS's Y_r = X_r W_r for every rank (row-major: Y^T = W^T X^T). */
static int reference(const shape *s, bufs *b) {
  const float one = 1.f, zero = 0.f;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    if (cublasGemmEx(blas[r], CUBLAS_OP_N, CUBLAS_OP_N, (int)s->H, (int)s->T, (int)s->F, &one, b[r].dW, CUDA_R_16BF,
                     (int)s->ldw, b[r].dX, CUDA_R_16BF, (int)s->ldx, &zero, b[r].dref, CUDA_R_16BF, (int)s->H,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
        cudaMemcpy(b[r].href, b[r].dref, s->T * s->H * 2, cudaMemcpyDeviceToHost))
      return -1;
  }
  return 0;
}

/* Rank q's output block r (rows q*T/n .. of Y_r) against cuBLAS, its
 * first hcnt[q] rows of rank r's counts in an uneven call, for every rank
 * q of this process: bad elements, the first described in why; then the
 * outputs are poisoned again. */
static long check(const shape *s, bufs *b, char *why, size_t len) {
  if (reference(s, b)) {
    snprintf(why, len, "cuBLAS reference failed");
    return -1;
  }
  long bad = 0;
  size_t per = s->T / nranks;
  for (int q = rank_lo; q < rank_hi; q++) {
    cudaSetDevice(bdev(q));
    cudaMemcpy(b[q].hout, b[q].dout, s->T * s->H * 2, cudaMemcpyDeviceToHost);
    cudaMemset(b[q].dout, 0xff, s->T * s->H * 2);
    cudaDeviceSynchronize();   /* cudaMemset runs on the legacy stream, which the ranks' streams do not wait for */
    for (int r = 0; r < nranks; r++)
      for (size_t i = 0; i < (b[r].uneven ? (size_t)b[r].hcnt[q] : per); i++)
        for (size_t j = 0; j < s->H; j++) {
          float got = bf2f(b[q].hout[(r * per + i) * s->H + j]), want = bf2f(b[r].href[(q * per + i) * s->H + j]);
          float tol = fmaxf(fabsf(got), fabsf(want)) / 128.f + 1e-2f;
          if (!(fabsf(got - want) <= tol)) {
            if (!bad++)
              snprintf(why, len, "rank %d row %zu col %zu (expert %d, its row %zu): %g, cuBLAS %g", q, r * per + i, j,
                       r, q * per + i, got, want);
          }
        }
  }
  if (!bad) snprintf(why, len, "every element within one bf16 rounding");
  return bad;
}


static const ir_step *gemm_step(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int k = 0; k < p->gpus[r].tbs[t].nsteps; k++)
        if (p->gpus[r].tbs[t].steps[k].op == IR_OP_GEMM) return &p->gpus[r].tbs[t].steps[k];
  return NULL;
}

/* One grouped call on every rank: by name, or the automatic choice
 * (name NULL). */
static baton_result call(const char *name, const shape *s, bufs *b) {
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    if (name) {
      const ir_prog *p = rt_algos_get(comms[r]->algos, rt_algos_find(comms[r]->algos, name))->prog;
      const ir_step *st = gemm_step(p);
      baton_operand ops[2] = {{p->operands[st->args[0]].name, b[r].dX, s->T, s->F, s->ldx},
                              {p->operands[st->args[1]].name, b[r].dW, s->F, s->H, s->ldw}};
      e = baton_run_fused(name, ops, 2, b[r].dout, s->T / nranks * s->H, baton_bf16, baton_sum, comms[r], streams[r]);
    } else {
      e = baton_gemm_alltoall(comms[r], b[r].dX, s->ldx, b[r].dW, s->ldw, b[r].uneven ? b[r].dcnt : NULL, b[r].dout,
                              s->T, s->F, s->H, baton_bf16, streams[r]);
    }
  }
  baton_result g = baton_group_end();
  return e ? e : g ? g : sync_all();
}

static void check_programs(const shape *shapes, int nshapes) {
  for (int ai = 0; ai < rt_algos_count(comms[rank_lo]->algos); ai++) {
    const rt_algo *al = rt_algos_get(comms[rank_lo]->algos, ai);
    if (RT_COMPUTE_OP(al->compute) != IR_OP_GEMM) continue;
    const char *name = al->prog->name;
    for (int k = 0; k < nshapes; k++) {
      const shape *s = &shapes[k];
      char why[300] = "";
      bufs *b = bufs_new(s);
      baton_result e = b ? call(name, s, b) : baton_out_of_memory;
      long bad = e ? -1 : check(s, b, why, sizeof why);
      ok(bad == 0, "%s T=%zu F=%zu H=%zu ldx=%zu ldw=%zu: %s", name, s->T, s->F, s->H, s->ldx, s->ldw,
         e ? baton_result_string(e) : why);
      bufs_free(b);
    }
  }
}

static void check_choice(void) {
  const shape s = {(size_t)nranks * 192, 256, 512, 256, 512};
  char why[300] = "";
  bufs *b = bufs_new(&s);
  baton_result e = b ? call(NULL, &s, b) : baton_out_of_memory;
  long bad = e ? -1 : check(&s, b, why, sizeof why);
  ok(bad == 0, "baton_gemm_alltoall runs %s: %s",
     baton_comm_last_algorithm(comms[rank_lo]) ? baton_comm_last_algorithm(comms[rank_lo]) : "?",
     e ? baton_result_string(e) : why);
  bufs_free(b);
}

/* The ranks' baton_gemm_alltoall calls of shape *arg, to be captured. */
typedef struct graph_call { const shape *s; bufs *b; } graph_call;
static baton_result issue_moe(void *arg) {
  const graph_call *c = arg;
  const shape *s = c->s;
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++)
    e = baton_gemm_alltoall(comms[r], c->b[r].dX, s->ldx, c->b[r].dW, s->ldw, c->b[r].uneven ? c->b[r].dcnt : NULL,
                            c->b[r].dout, s->T, s->F, s->H, baton_bf16, streams[r]);
  baton_result g = baton_group_end();
  return e ? e : g;
}

/* Two calls in a row on each rank's stream, the second's X the first's
 * output (one layer feeding the next): the second must read the rows the
 * first stored, not what its output held before (NaN), also where it
 * launches as a programmatic dependent of the first and its engine waits
 * for it only before its first load (ip_gemm_args.deps_wait).  Eager,
 * then captured together and replayed twice on new X. */
typedef struct chain_call { graph_call first, second; } chain_call;
static baton_result issue_chain(void *arg) {
  const chain_call *c = arg;
  baton_result e = issue_moe((void *)&c->first);
  return e ? e : issue_moe((void *)&c->second);
}
static void check_chained(void) {
  const shape s = {(size_t)nranks * 256, 512, 512, 512, 512};   /* F = H: the output is the next X */
  bufs *a = bufs_new(&s), *b = bufs_new(&s);
  if (!a || !b) {
    ok(0, "chained: buffers");
    bufs_free(a);
    bufs_free(b);
    return;
  }
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    cudaFree(b[r].dX);
    b[r].dX = a[r].dout;
  }
  chain_call cc = {{&s, a}, {&s, b}};
  baton_result e = issue_chain(&cc);
  if (!e) e = sync_all();
  char why[300] = "";
  long bad = e ? -1 : check(&s, b, why, sizeof why);
  ok(bad == 0, "a call on the output of the call before it, eagerly: %s", e ? baton_result_string(e) : why);
  gpu_graphs G = {0};
  e = gpu_graphs_capture(&G, issue_chain, &cc);
  for (int round = 0; round < 2 && !e && !bad; round++) {
    for (int r = 0; r < nranks; r++) {
      cudaSetDevice(bdev(r));
      fill(a[r].dX, s.T * s.ldx);
      cudaMemset(a[r].dout, 0xff, s.T * s.H * 2);
      cudaDeviceSynchronize();   /* cudaMemset runs on the legacy stream */
    }
    e = gpu_graphs_replay(&G);
    bad = e ? -1 : check(&s, b, why, sizeof why);
  }
  ok(!e && bad == 0, "the two captured together replay right twice on new X: %s", e ? baton_result_string(e) : why);
  gpu_graphs_free(&G);
  for (int r = 0; r < nranks; r++) b[r].dX = NULL;   /* a's output: freed with a */
  bufs_free(a);
  bufs_free(b);
}

/* A captured call, replayed on new X and W: nothing is set up per call.
 * pool: the outputs come from the stream-ordered pool (cudaMallocAsync),
 * which CUDA IPC cannot export: with a process per rank the captured call
 * then stores through the windows, not into the peers' outputs. */
static void check_graph(int pool, int split) {
  /* split: few tokens over K = 2048, which the engine splits (the
   * workspace is made by then: check_programs ran the shape eagerly), so
   * that each replay meets on counters the one before left zero */
  const shape s = split ? (shape){(size_t)nranks * 128, 2048, 512, 2048, 512}
                        : (shape){(size_t)nranks * 256, 128, 256, 128, 256};
  bufs *b = bufs_new(&s);
  if (!b) { ok(0, "graph: buffers"); return; }
  for (int r = 0; r < nranks && pool; r++) {
    cudaSetDevice(bdev(r));
    cudaFree(b[r].dout);
    b[r].dout = NULL;
    if (cudaMallocAsync((void **)&b[r].dout, s.T * s.H * 2, streams[r]) || cudaStreamSynchronize(streams[r])) {
      ok(0, "graph: pool buffers");
      bufs_free(b);
      return;
    }
  }
  baton_result e = call(NULL, &s, b);   /* once outside the capture: the scratch is reserved */
  graph_call gc = {&s, b};
  gpu_graphs G = {0};
  if (!e) e = gpu_graphs_capture(&G, issue_moe, &gc);
  long bad = -1;
  char why[300] = "";
  for (int round = 0; round < 2 && !e; round++) {
    for (int r = 0; r < nranks; r++) {
      cudaSetDevice(bdev(r));
      fill(b[r].dX, s.T * s.ldx);
      fill(b[r].dW, s.F * s.ldw);
      cudaMemset(b[r].dout, 0xff, s.T * s.H * 2);
      cudaDeviceSynchronize();   /* cudaMemset runs on the legacy stream, which the ranks' streams do not wait for */
    }
    e = gpu_graphs_replay(&G);
    bad = e ? -1 : check(&s, b, why, sizeof why);
    if (bad) break;
  }
  ok(!e && bad == 0, "a captured baton_gemm_alltoall%s%s replays right on new X and W twice: %s",
     pool ? " on pool outputs" : "", split ? " of few tokens over K = 2048 (split K)" : "",
     e ? baton_result_string(e) : why);
  if (split) {
    gpu_graphs_free(&G);
    bufs_free(b);
    return;
  }
  if (procs() && direct() && !pool)   /* learned at capture: its rows went straight into the peers' outputs */
    ok(rt_peerbuf_count(comms[rank_lo]->pbufs) >= nranks - 1 && comms[rank_lo]->last_fused_via == RT_FUSED_VIA_OUTPUTS,
       "rank %d's captured call mapped its %d peers' outputs (%d mapped) and stored into them", rank_lo, nranks - 1,
       rt_peerbuf_count(comms[rank_lo]->pbufs));
  if (procs() && direct() && pool)
    ok(comms[rank_lo]->last_fused_via == RT_FUSED_VIA_WINDOWS, "rank %d's captured call on pool outputs stored "
       "through the windows (%d: 0 FIFOs, 1 the outputs, 2 the windows)", rank_lo, comms[rank_lo]->last_fused_via);
  gpu_graphs_free(&G);
  bufs_free(b);
}

/* The ranks' calls of *arg with every rank but 0 holding its stream 30 ms
 * and poisoning its output first, to be captured (check_order's work in a
 * graph). */
static baton_result issue_held(void *arg) {
  const graph_call *c = arg;
  const shape *s = c->s;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (r > 0 && gpu_hold_and_poison(r, c->b[r].dout, s->T * s->H * 2)) return baton_cuda_error;
  }
  return issue_moe(arg);
}

/* check_order's question for a captured call (with a process per rank,
 * the one that stores into its peers' outputs across processes): the
 * graph holds every rank but 0 for 30 ms and poisons its output before
 * the call; replayed twice, no row may arrive before the poison. */
static void check_graph_order(void) {
  const shape s = {(size_t)nranks * 256, 128, 256, 128, 256};
  bufs *b = bufs_new(&s);
  if (!b) { ok(0, "graph order: buffers"); return; }
  baton_result e = call(NULL, &s, b);
  char why[300] = "";
  long bad = e ? -1 : check(&s, b, why, sizeof why);
  graph_call gc = {&s, b};
  gpu_graphs G = {0};
  if (!e && !bad) e = gpu_graphs_capture(&G, issue_held, &gc);
  for (int round = 0; round < 2 && !e && !bad; round++) {
    e = gpu_graphs_replay(&G);
    bad = e ? -1 : check(&s, b, why, sizeof why);
  }
  ok(!e && bad == 0, "captured: rows reach a peer's output only after the work captured before the call on its "
     "stream, two replays: %s", e ? baton_result_string(e) : why);
  gpu_graphs_free(&G);
  bufs_free(b);
}

/* Calls the runtime must refuse, each on this process's first rank alone
 * (refused before anything is launched); then a call that runs. */
static void check_refused(void) {
  const shape s = {(size_t)nranks * 128, 128, 256, 128, 256};
  bufs *b = bufs_new(&s);
  if (!b) { ok(0, "refusals: buffers"); return; }
  struct { size_t T, F, H; baton_dtype t; const char *what; } bad[] = {
      {s.T, s.F, s.H, baton_f16, "f16 (the tile engine takes bf16)"},
      {s.T + 1, s.F, s.H, baton_bf16, "tokens that are not a multiple of the ranks"},
      {s.T, s.F, 96, baton_bf16, "H = 96, not a multiple of 64"},
      {s.T, 100, s.H, baton_bf16, "F = 100, not a multiple of 64"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    if (k == 1 && nranks == 1) { ok(1, "# SKIP one rank: every token count is a multiple"); continue; }
    baton_group_start();
    const int q = rank_lo;
    baton_result e = baton_gemm_alltoall(comms[q], b[q].dX, 0, b[q].dW, 0, NULL, b[q].dout, bad[k].T, bad[k].F,
                                         bad[k].H, bad[k].t, streams[q]);
    baton_group_end();
    ok(e == baton_invalid_argument || e == baton_unsupported, "%s is refused: %s", bad[k].what,
       baton_result_string(e));
  }
  char why[300] = "";
  baton_result e = call(NULL, &s, b);
  ok(!e && check(&s, b, why, sizeof why) == 0, "after the refusals a call still runs right: %s",
     e ? baton_result_string(e) : why);
  bufs_free(b);
}

/* Work queued before a call on its owner's stream comes first: every rank
 * but 0 has its stream held 30 ms by the host, then poisons its output
 * on it (cudaMemsetAsync), then calls; rank 0's call starts at once.  A
 * call that stored rows into a peer's output before that peer's stream
 * reached the call would see them poisoned. */
static void check_order(void) {
  const shape s = {(size_t)nranks * 256, 128, 256, 128, 256};
  bufs *b = bufs_new(&s);
  if (!b) { ok(0, "order: buffers"); return; }
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    cudaSetDevice(dev_of(r));
    if (r > 0 && gpu_hold_and_poison(r, b[r].dout, s.T * s.H * 2)) e = baton_cuda_error;
    if (!e)
      e = baton_gemm_alltoall(comms[r], b[r].dX, s.ldx, b[r].dW, s.ldw, NULL, b[r].dout, s.T, s.F, s.H, baton_bf16,
                              streams[r]);
  }
  baton_result g = baton_group_end();
  if (!e) e = g ? g : sync_all();
  char why[300] = "";
  long bad = e ? -1 : check(&s, b, why, sizeof why);
  ok(bad == 0, "rows reach a peer's output only after the work queued before the call on its stream: %s",
     e ? baton_result_string(e) : why);
  bufs_free(b);
}

/* Sets rank r's counts to cnt(r, q) for every block q and uploads them. */
static void set_counts(bufs *b, int32_t (*cnt)(int r, int q, int32_t cap), int32_t cap) {
  for (int r = 0; r < nranks; r++) {
    b[r].uneven = 1;
    for (int q = 0; q < nranks; q++) b[r].hcnt[q] = cnt(r, q, cap);
    cudaSetDevice(bdev(r));
    cudaMemcpy(b[r].dcnt, b[r].hcnt, (size_t)nranks * sizeof(int32_t), cudaMemcpyHostToDevice);
  }
}

/* Counts that cut tiles anywhere: none, one row, a tile's rows and one
 * more or less, the whole block, by (r, q). */
static int32_t cnt_mixed(int r, int q, int32_t cap) {
  static const int32_t k[] = {0, 1, 127, 128, 129, -1};
  int32_t v = k[(r * 5 + q * 3 + 1) % 6];
  return v < 0 || v > cap ? cap : v;
}
static int32_t cnt_none_own(int r, int q, int32_t cap) { return r == q ? 0 : cap / 2 + r; }
static int32_t cnt_over(int r, int q, int32_t cap) { return r == 0 && q == 0 ? cap + 5 : cap; }

/* Uneven combines (baton_gemm_alltoall's counts): the rows that are
 * tokens right, whatever the padding holds; tiles wholly of padding not
 * computed (with whole tiles per block, a rank's own block with no
 * tokens is never written: still NaN); counts read when a captured call
 * replays; last (the communicator keeps the error), a count past the
 * block reported. */
static void check_uneven(void) {
  const size_t R = (size_t)nranks;
  const shape odd = {R * 200, 128, 320, 128, 320}, whole = {R * 256, 128, 256, 128, 256};
  char why[300] = "";
  bufs *b = bufs_new(&odd);
  if (!b) { ok(0, "uneven: buffers"); return; }
  set_counts(b, cnt_mixed, 200);
  baton_result e = call(NULL, &odd, b);
  long bad = e ? -1 : check(&odd, b, why, sizeof why);
  ok(bad == 0, "uneven counts (0, 1, 127, 128, 129, 200 rows of 200) give the tokens' rows right: %s",
     e ? baton_result_string(e) : why);
  bufs_free(b);

  b = bufs_new(&whole);
  if (!b) { ok(0, "uneven: buffers"); return; }
  set_counts(b, cnt_none_own, 256);
  e = call(NULL, &whole, b);
  long touched = 0;
  for (int r = rank_lo; r < rank_hi && !e; r++) {   /* rank r's own block, before check() poisons it again */
    cudaSetDevice(bdev(r));
    cudaMemcpy(b[r].hout, b[r].dout, whole.T * whole.H * 2, cudaMemcpyDeviceToHost);
    for (size_t i = (size_t)r * 256 * whole.H; i < ((size_t)r + 1) * 256 * whole.H; i++) touched += b[r].hout[i] != 0xffff;
  }
  bad = e ? -1 : check(&whole, b, why, sizeof why);
  /* With a process per rank the eager call's rows land in the ranks'
   * windows, copied whole into the outputs after it: the padding rows
   * hold whatever the window held (unspecified, as the API says). */
  ok(bad == 0 && (procs() || touched == 0), "a rank's own block with no tokens is skipped (%ld of its elements "
     "written%s), the other blocks right: %s", touched, procs() ? ", the window's copied over them" : "",
     e ? baton_result_string(e) : why);

  /* captured once, replayed on new counts */
  graph_call gc = {&whole, b};
  gpu_graphs G = {0};
  e = gpu_graphs_capture(&G, issue_moe, &gc);
  if (!e) {
    set_counts(b, cnt_mixed, 256);
    e = gpu_graphs_replay(&G);
  }
  bad = e ? -1 : check(&whole, b, why, sizeof why);
  ok(bad == 0, "a captured uneven call replays right on new counts: %s", e ? baton_result_string(e) : why);
  gpu_graphs_free(&G);

  if (procs()) {   /* its sticky error would stop check_registered's calls, which come last */
    bufs_free(b);
    return;
  }
  set_counts(b, cnt_over, 256);
  e = call(NULL, &whole, b);
  if (mine(0))
    ok(e == baton_invalid_argument, "a count past the block's rows is reported (the call's error: %s)",
       baton_result_string(e));
  else   /* rank 0's count, in rank 0's process */
    ok(e == baton_success, "rank %d's counts are right: its call runs (%s)", rank_lo, baton_result_string(e));
  bufs_free(b);
}

/* An eager call whose output (unregistered, from cudaMalloc) is larger
 * than the window's Simple scratch: with a process per rank its rows go
 * straight into the peers' outputs, exchanged for the call (they went
 * through FIFOs before); right in every mode. */
static void check_beyond_scratch(void) {
  const rt_window_layout *l = comms[rank_lo]->win ? rt_window_layout_of(comms[rank_lo]->win) : NULL;
  const size_t H = 4096, R = (size_t)nranks, over = (l ? l->simple_bytes : (size_t)48 << 20) + 1;
  const size_t rows = (over + H * 2 - 1) / (H * 2);
  const shape s = {(rows + R - 1) / R * R, 64, H, 64, H};
  char why[300] = "";
  bufs *b = bufs_new(&s);
  baton_result e = b ? call(NULL, &s, b) : baton_out_of_memory;
  long bad = e ? -1 : check(&s, b, why, sizeof why);
  ok(bad == 0, "an eager call of %zu MiB of output (past the window's scratch) runs %s: %s", s.T * s.H * 2 >> 20,
     baton_comm_last_algorithm(comms[rank_lo]) ? baton_comm_last_algorithm(comms[rank_lo]) : "?",
     e ? baton_result_string(e) : why);
  if (procs() && direct())
    ok(comms[rank_lo]->last_fused_via == RT_FUSED_VIA_OUTPUTS, "rank %d's eager call past the scratch stored straight "
       "into its peers' outputs (%d: 0 FIFOs, 1 the outputs, 2 the windows)", rank_lo, comms[rank_lo]->last_fused_via);
  bufs_free(b);
}

/* A process per rank, eager calls on registered outputs: every rank's
 * output at the same offset of a window twice its size, its rows stored
 * straight into the peers' outputs (the call checks in the kernel that
 * every rank's descriptor -- window, offset, count, program -- is its
 * own).  Then (last: it leaves the communicator failed) rank 1's output
 * at another offset: every rank must stop its call before anything
 * reaches an output (the FIFO exchange, which needs no window, would
 * have run it right). */
static void check_registered(void) {
  const shape s = {(size_t)nranks * 256, 128, 256, 128, 256};
  const int r = rank_lo;
  const size_t bytes = s.T * s.H * 2;
  bufs *b = bufs_new(&s);
  char *mem = b ? gpu_ranks_window(2 * bytes) : NULL;   /* every rank's output at the same offset of it */
  if (!mem) { bufs_free(b); return; }
  baton_result e;
  uint16_t *own = b[r].dout;
  char why[300] = "";
  for (int skew = 0; skew < 2; skew++) {
    b[r].dout = (uint16_t *)(mem + (skew && r == 1 ? bytes : 0));
    cudaMemset(b[r].dout, 0xff, bytes);
    cudaDeviceSynchronize();
    e = call(NULL, &s, b);
    if (!skew) {
      long bad = e ? -1 : check(&s, b, why, sizeof why);
      ok(bad == 0, "rank %d: an eager call on registered outputs stores straight into the peers': %s", r,
         e ? baton_result_string(e) : why);
      continue;
    }
    const long touched = gpu_written(b[r].dout, bytes, 2);
    ok(e == baton_invalid_argument && touched == 0, "rank %d: outputs at different offsets of their windows: the call "
       "stops before any row lands (%s, %ld elements of the output written)", r, baton_result_string(e), touched);
  }
  b[r].dout = own;
  bufs_free(b);
  baton_mem_free(mem);   /* the communicator, failed now, keeps its mapping until it is destroyed */
}

static void moe_checks(const gpu_ranks_opts *o) {
  blas = calloc(nranks, sizeof *blas);
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    cublasCreate(&blas[r]);
  }
  int n = 0;
  for (int ai = 0; ai < rt_algos_count(comms[rank_lo]->algos); ai++)
    n += RT_COMPUTE_OP(rt_algos_get(comms[rank_lo]->algos, ai)->compute) == IR_OP_GEMM;
  ok(n > 0, "%d GEMM + AllToAll programs loaded for %d ranks from %s", n, nranks, o->dir);
  size_t R = (size_t)nranks;
  /* One tile; partial tiles in M and N (tokens per rank 200, H 320); W
   * wider than one N tile; padded rows; several k-blocks; few tiles over
   * a long K, which the engine splits over several blocks each
   * (BATON_GEMM_SPLIT), also with partial and padded tiles. */
  const shape small[] = {{R * 128, 64, 256, 64, 256},   {R * 200, 128, 320, 192, 328},
                         {R * 64, 192, 512, 192, 512},  {R * 384, 256, 768, 264, 768},
                         {R * 128, 2048, 512, 2048, 512}, {R * 200, 2048, 320, 2056, 328}};
  const shape large[] = {{R * 1024, 1024, 4096, 1024, 4096}, {R * 512, 4096, 8192, 4096, 8192}};
  check_programs(small, sizeof small / sizeof small[0]);
  /* The few-token shapes over K = 2048 are the ones the engine computes
   * in narrower tiles and splits: one rank has every block of its GPU for
   * their 8-10 tiles of 64 columns (8 ranges each); ranks sharing a GPU
   * may have too few blocks to, which is reported. */
  const int64_t split_units = comms[rank_lo]->gsplit_units;
  const int narrowest = comms[rank_lo]->gemm_narrowest;
  if (nranks == 1 && rt_param_int(RT_PARAM_GEMM_SPLIT) && rt_param_int(RT_PARAM_GEMM_NARROW))
    ok(split_units > 0 && narrowest == 64,
       "a GEMM of few tiles over K = 2048 ran tiles 64 columns wide (%d) split over blocks (workspace for %lld units)",
       narrowest, (long long)split_units);
  else
    printf("# rank %d: split workspace for %lld units, tiles down to %d columns\n", rank_lo, (long long)split_units,
           narrowest);
  if (o->big) check_programs(large, sizeof large / sizeof large[0]);
  check_choice();
  check_graph(0, 0);
  check_graph(1, 0);
  check_graph(0, 1);
  if (!procs()) check_chained();   /* a process holds only its own rank's first output, the next X */
  check_graph_order();
  check_order();
  check_refused();
  check_beyond_scratch();
  check_uneven();   /* its count past the bounds leaves the communicator's error set */
  if (procs() && direct()) check_registered();   /* last: it leaves the communicator failed */
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(bdev(r));
    cublasDestroy(blas[r]);
  }
  free(blas);
}

int main(int argc, char **argv) {
  gpu_ranks_opts o;
  int done;
  if (gpu_ranks_args(argc, argv, "gpu_moe", 0, &o)) return 2;
  if (o.procs) return gpu_ranks_procs(&o, moe_checks);
  int rc = gpu_ranks_up(&done);
  if (done) return rc;
  moe_checks(&o);
  return gpu_ranks_end();
}
