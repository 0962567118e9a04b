/* gpu_embed.c -- fused embedding-bag + AllToAll programs on real GPUs
 * through the public API: every loaded embedding program by name
 * (baton_run_fused) and the automatic choice (baton_embedding_alltoall)
 * over f32, f16 and bf16, sum, mean and weighted sums, uniform and skewed
 * indices, empty bags, odd and aligned table widths, padded tables; CUDA-
 * graph replays on new data; refused calls; and an index outside the
 * table, which the communicator must report.  Every element of every
 * rank's output [B/n, n*T*D] is compared with the pooling computed in
 * double on the host from each rank's tables, within ip_compute_tolerance.
 *
 * Usage: gpu_embed --ranks N --dir DIR [--gpus G] [--big] [--procs]
 *   DIR holds the fused IR files; rank r runs on GPU r % G (ranks share a
 *   GPU when G < N: their correctness, not their speed); --procs: a
 *   process per rank, each making every rank's tables and bags from the
 *   same random draws and checking its own output; its captured calls
 *   go straight into the peers' outputs.  TAP output; skips when fewer
 *   than G GPUs are present. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "ip_compute.h"
#include "rt_comm.h"
#include "rt_param.h"
#include "rt_peerbuf.h"
#include "gpu_ranks.h"
#include "tap.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)


/* One shape: a global batch of B samples, T tables of D columns and
 * `rows` rows each on every rank (stacked, rows ld apart), bags of 0 to
 * 2 * bag indices, skewed (most indices among the first rows) or not. */
typedef struct shape { size_t B, T, D, rows, ld, bag; int skew; } shape;

/* Per rank: host and device copies of its table, indices, offsets,
 * weights and output. */
typedef struct bufs {
  void *hE, *hw, *hout;
  int64_t *hI, *hO;
  size_t L;
  char *dE, *dw, *dout;
  int64_t *dI, *dO;
} bufs;

static int mine(int r) { return r >= rank_lo && r < rank_hi; }
static int procs(void) { return rank_hi - rank_lo < nranks; }
/* Whether calls that can run direct do (BATON_FUSED_DIRECT, read once by the library). */
static int direct(void) { return rt_param_int(RT_PARAM_FUSED_DIRECT) != 0; }
/* Where rank r's device buffers live: its GPU, or with a process per
 * rank this process's (every rank's operands are made here). */
static int bdev(int r) { return procs() ? dev_of(rank_lo) : dev_of(r); }

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double frand(void) { return (double)(next() >> 11) / 4503599627370496.0 - 1.0; }   /* [-1, 1) */

static void bufs_free(bufs *b) {
  if (!b) return;
  for (int r = 0; r < nranks; r++) {
    free(b[r].hE); free(b[r].hw); free(b[r].hout); free(b[r].hI); free(b[r].hO);
    cudaSetDevice(bdev(r));
    cudaFree(b[r].dE); cudaFree(b[r].dw); cudaFree(b[r].dout); cudaFree(b[r].dI); cudaFree(b[r].dO);
  }
  free(b);
}

static size_t out_elems(const shape *s) { return s->B / nranks * nranks * s->T * s->D; }

/* Random tables, bags and weights on every rank; outputs poisoned (NaN). */
static bufs *bufs_new(int dt, const shape *s) {
  int es = ip_dtype_size[dt];
  size_t nbags = s->B * s->T, nE = s->T * s->rows * s->ld, no = out_elems(s);
  bufs *b = calloc(nranks, sizeof *b);
  for (int r = 0; b && r < nranks; r++) {
    b[r].hO = malloc((nbags + 1) * sizeof(int64_t));
    if (!b[r].hO) { bufs_free(b); return NULL; }
    int64_t at = 0;
    for (size_t k = 0; k < nbags; k++) {
      b[r].hO[k] = at;
      at += (int64_t)(next() % (2 * s->bag + 1));
    }
    b[r].hO[nbags] = at;
    b[r].L = at ? (size_t)at : 1;
    b[r].hI = malloc(b[r].L * sizeof(int64_t));
    b[r].hE = malloc(nE * es + 1);
    b[r].hw = malloc(b[r].L * es + 1);
    b[r].hout = malloc(no * es + 1);
    cudaSetDevice(bdev(r));
    if (!b[r].hI || !b[r].hE || !b[r].hw || !b[r].hout || cudaMalloc((void **)&b[r].dE, nE * es + 16) ||
        cudaMalloc((void **)&b[r].dw, b[r].L * es + 16) || cudaMalloc((void **)&b[r].dout, no * es + 16) ||
        cudaMalloc((void **)&b[r].dI, b[r].L * sizeof(int64_t)) || cudaMalloc((void **)&b[r].dO, (nbags + 1) * sizeof(int64_t))) {
      bufs_free(b);
      return NULL;
    }
    /* bag s*T + t names rows of table t: t*rows + (a row of that table) */
    for (size_t bag = 0; bag < nbags; bag++)
      for (int64_t k = b[r].hO[bag]; k < b[r].hO[bag + 1]; k++) {
        double u = (double)(next() >> 11) / 9007199254740992.0;
        size_t row = (size_t)((s->skew ? u * u * u * u : u) * (double)s->rows);
        b[r].hI[k] = (int64_t)((bag % s->T) * s->rows + (row < s->rows ? row : s->rows - 1));
      }
    for (size_t i = 0; i < nE; i++) ip_set((ip_dtype)dt, b[r].hE, i, frand());
    for (size_t i = 0; i < b[r].L; i++) ip_set((ip_dtype)dt, b[r].hw, i, frand());
    for (size_t i = 0; i < no; i++) ip_set((ip_dtype)dt, b[r].hout, i, NAN);
    cudaMemcpy(b[r].dE, b[r].hE, nE * es, cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dw, b[r].hw, b[r].L * es, cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dI, b[r].hI, b[r].L * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dO, b[r].hO, (nbags + 1) * sizeof(int64_t), cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dout, b[r].hout, no * es, cudaMemcpyHostToDevice);
  }
  return b;
}

/* Elements of the outputs of this process's ranks that differ from the
 * reference by more than the tolerance; the first is described in why.  Rank q's output
 * row s holds, for every rank r in order, the T*D values that rank r
 * pooled for sample q*B/n + s. */
static long check(int dt, const shape *s, bufs *b, int mean, int weighted, char *why, size_t len) {
  int es = ip_dtype_size[dt];
  size_t per = s->B / nranks, TD = s->T * s->D, nbags = s->B * s->T;
  double *val = malloc((nbags * s->D + 1) * sizeof(double)), *mag = malloc((nbags * s->D + 1) * sizeof(double));
  long bad = 0;
  why[0] = 0;
  if (!val || !mag) { snprintf(why, len, "out of memory"); bad = -1; goto out; }
  for (int r = 0; r < nranks; r++) {
    ip_opnd args[IR_MAX_ARGS] = {{b[r].hE, (int64_t)(s->T * s->rows), (int64_t)s->D, (int64_t)s->ld, -1},
                                 {b[r].hI, (int64_t)b[r].L, 1, 1, IP_I64},
                                 {b[r].hO, (int64_t)nbags + 1, 1, 1, IP_I64},
                                 {weighted ? b[r].hw : NULL, (int64_t)b[r].L, 1, 1, -1}};
    ip_compute_exact(mean ? IR_OP_EBAGM : IR_OP_EBAG, (ip_dtype)dt, args, 0, (int64_t)(nbags * s->D), val, mag);
    for (int q = rank_lo; q < rank_hi; q++) {
      cudaSetDevice(bdev(q));
      if (r == 0) cudaMemcpy(b[q].hout, b[q].dout, out_elems(s) * es, cudaMemcpyDeviceToHost);
      for (size_t smp = 0; smp < per && bad < 1000; smp++)
        for (size_t e = 0; e < TD; e++) {
          size_t from = ((size_t)q * per + smp) * TD + e, at = smp * nranks * TD + (size_t)r * TD + e;
          int64_t bag = (int64_t)(from / s->D);
          double want = val[from], got = ip_get((ip_dtype)dt, b[q].hout, at);
          double tol = ip_compute_tolerance((ip_dtype)dt, 1, b[r].hO[bag + 1] - b[r].hO[bag], mag[from]);
          if (fabs(got - want) <= tol) continue;   /* NaN fails */
          if (!bad++)
            snprintf(why, len, "rank %d out[%zu][%d*%zu + %zu] = %g, expected %g (tolerance %g)", q, smp, r, TD, e, got,
                     want, tol);
        }
    }
  }
out:
  free(val); free(mag);
  return bad;
}


/* The embedding-bag step of program p (its operands' roles). */
static const ir_step *bag_step(const ir_prog *p) {
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int k = 0; k < p->gpus[r].tbs[t].nsteps; k++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[k];
        if (st->op == IR_OP_EBAG || st->op == IR_OP_EBAGM) return st;
      }
  return NULL;
}

/* One grouped call on every rank: by name (baton_run_fused, the
 * operands bound by their roles and T as a dimension) or through the
 * automatic choice (name NULL). */
static baton_result call(const char *name, int dt, const shape *s, bufs *b, int mean, int weighted) {
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    if (name) {
      const ir_prog *p = rt_algos_get(comms[r]->algos, rt_algos_find(comms[r]->algos, name))->prog;
      const ir_step *st = bag_step(p);
      baton_operand ops[IR_MAX_OPERANDS + 1];
      int k = 0;
      ops[k++] = (baton_operand){p->operands[st->args[0]].name, b[r].dE, s->T * s->rows, s->D, s->ld};
      ops[k++] = (baton_operand){p->operands[st->args[1]].name, b[r].dI, b[r].L, 1, 0};
      ops[k++] = (baton_operand){p->operands[st->args[2]].name, b[r].dO, s->B * s->T + 1, 1, 0};
      if (st->args[3] >= 0) ops[k++] = (baton_operand){p->operands[st->args[3]].name, b[r].dw, b[r].L, 1, 0};
      ops[k++] = (baton_operand){"T", NULL, s->T, 0, 0};
      e = baton_run_fused(name, ops, k, b[r].dout, s->B / nranks * s->T * s->D, (baton_dtype)dt, baton_sum, comms[r],
                          streams[r]);
    } else {
      e = baton_embedding_alltoall(comms[r], b[r].dE, s->T * s->rows, s->D, s->ld, b[r].dI, b[r].L, b[r].dO,
                                   weighted ? b[r].dw : NULL, s->B, s->T, mean ? baton_avg : baton_sum, b[r].dout,
                                   (baton_dtype)dt, streams[r]);
    }
  }
  baton_result g = baton_group_end();
  return e ? e : g ? g : sync_all();
}

static const int dtypes[] = {IP_F32, IP_F16, IP_BF16};

/* Every embedding program by name over every type and shape. */
static void check_programs(const shape *shapes, int nshapes) {
  int nalg = rt_algos_count(comms[rank_lo]->algos);
  for (int ai = 0; ai < nalg; ai++) {
    const rt_algo *al = rt_algos_get(comms[rank_lo]->algos, ai);
    int op = RT_COMPUTE_OP(al->compute);
    if (al->compute < 0 || (op != IR_OP_EBAG && op != IR_OP_EBAGM)) continue;
    const char *name = ir_prog_where(al->prog);
    if (rt_plan_blocks(&comms[rank_lo]->plans[ai]) == 0) {
      ok(1, "# SKIP %s: does not fit this GPU", name);
      continue;
    }
    int mean = op == IR_OP_EBAGM, weighted = (al->compute & RT_COMPUTE_WEIGHTED) != 0;
    long fails = 0;
    char why[300] = "";
    for (int di = 0; di < 3 && !fails; di++)
      for (int si = 0; si < nshapes && !fails; si++) {
        const shape *s = &shapes[si];
        bufs *b = bufs_new(dtypes[di], s);
        if (!b) { fails = 1; snprintf(why, sizeof why, "out of memory"); break; }
        baton_result e = call(name, dtypes[di], s, b, mean, weighted);
        if (e) { fails = 1; snprintf(why, sizeof why, "%s", baton_result_string(e)); }
        else fails = check(dtypes[di], s, b, mean, weighted, why, sizeof why);
        if (fails)
          diag("%s %s B=%zu T=%zu D=%zu rows=%zu ld=%zu bag=%zu%s: %s", name, ip_dtype_name[dtypes[di]], s->B, s->T,
               s->D, s->rows, s->ld, s->bag, s->skew ? " skewed" : "", why);
        bufs_free(b);
      }
    ok(fails == 0, "%s: [B/n, n*T*D] pooled on %d ranks, f32/f16/bf16 x %d shapes, every element within tolerance",
       name, nranks, nshapes);
  }
}

/* The automatic choice for sum, mean and weighted sums. */
static void check_choice(void) {
  const shape s = {(size_t)nranks * 24, 5, 64, 300, 64, 20, 1};
  for (int m = 0; m < 3; m++) {
    char why[300] = "";
    bufs *b = bufs_new(IP_BF16, &s);
    baton_result e = b ? call(NULL, IP_BF16, &s, b, m == 1, m == 2) : baton_out_of_memory;
    long bad = e ? -1 : check(IP_BF16, &s, b, m == 1, m == 2, why, sizeof why);
    ok(bad == 0, "baton_embedding_alltoall bf16 %s runs %s: %s", m == 0 ? "sum" : m == 1 ? "mean" : "weighted sum",
       baton_comm_last_algorithm(comms[rank_lo]) ? baton_comm_last_algorithm(comms[rank_lo]) : "?",
       e ? baton_result_string(e) : why);
    bufs_free(b);
  }
}

/* A captured call, replayed on new bags: nothing is set up per call. */
/* The ranks' embedding calls of shape *arg (f32 sums), to be captured. */
typedef struct graph_call { const shape *s; bufs *b; } graph_call;
static baton_result issue_embed(void *arg) {
  const graph_call *c = arg;
  const shape *s = c->s;
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++)
    e = baton_embedding_alltoall(comms[r], c->b[r].dE, s->T * s->rows, s->D, s->ld, c->b[r].dI, c->b[r].L, c->b[r].dO,
                                 NULL, s->B, s->T, baton_sum, c->b[r].dout, baton_f32, streams[r]);
  baton_result g = baton_group_end();
  return e ? e : g;
}

static void check_graph(void) {
  const shape s = {(size_t)nranks * 16, 3, 128, 500, 128, 10, 0};
  bufs *b = bufs_new(IP_F32, &s);
  if (!b) { ok(0, "graph: buffers"); return; }
  baton_result e = call(NULL, IP_F32, &s, b, 0, 0);   /* once outside the capture: the scratch is reserved */
  graph_call gc = {&s, b};
  gpu_graphs G = {0};
  if (!e) e = gpu_graphs_capture(&G, issue_embed, &gc);
  long bad = -1;
  char why[300] = "";
  for (int round = 0; round < 2 && !e; round++) {
    for (int r = 0; r < nranks; r++) {   /* a new table, same bags and buffers */
      size_t nE = s.T * s.rows * s.ld;
      for (size_t i = 0; i < nE; i++) ip_set(IP_F32, b[r].hE, i, frand());
      cudaSetDevice(bdev(r));
      cudaMemcpy(b[r].dE, b[r].hE, nE * 4, cudaMemcpyHostToDevice);
      cudaMemset(b[r].dout, 0xff, out_elems(&s) * 4);   /* NaN */
      cudaDeviceSynchronize();   /* cudaMemset runs on the legacy stream, which the ranks' streams do not wait for */
    }
    e = gpu_graphs_replay(&G);
    bad = e ? -1 : check(IP_F32, &s, b, 0, 0, why, sizeof why);
    if (bad) break;
  }
  ok(!e && bad == 0, "a captured baton_embedding_alltoall replays right on new tables twice: %s",
     e ? baton_result_string(e) : why);
  if (procs() && direct())   /* learned at capture: its pooled rows went straight into the peers' outputs */
    ok(rt_peerbuf_count(comms[rank_lo]->pbufs) >= nranks - 1, "rank %d's captured call mapped its %d peers' outputs "
       "(%d mapped)", rank_lo, nranks - 1, rt_peerbuf_count(comms[rank_lo]->pbufs));
  gpu_graphs_free(&G);
  bufs_free(b);
}

/* Work queued before a call on its owner's stream comes first: every rank
 * but 0 has its stream held 30 ms by the host, then poisons its output
 * on it (cudaMemsetAsync), then calls; rank 0's call starts at once.  A
 * call that stored pooled values into a peer's output before that peer's
 * stream reached the call would see them poisoned. */
static void check_order(void) {
  const shape s = {(size_t)nranks * 64, 4, 128, 300, 128, 20, 0};
  bufs *b = bufs_new(IP_F32, &s);
  if (!b) { ok(0, "order: buffers"); return; }
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    cudaSetDevice(dev_of(r));
    if (r > 0 && gpu_hold_and_poison(r, b[r].dout, out_elems(&s) * 4)) e = baton_cuda_error;
    if (!e)
      e = baton_embedding_alltoall(comms[r], b[r].dE, s.T * s.rows, s.D, s.ld, b[r].dI, b[r].L, b[r].dO, NULL, s.B,
                                   s.T, baton_sum, b[r].dout, baton_f32, streams[r]);
  }
  baton_result g = baton_group_end();
  if (!e) e = g ? g : sync_all();
  char why[300] = "";
  long bad = e ? -1 : check(IP_F32, &s, b, 0, 0, why, sizeof why);
  ok(bad == 0, "pooled rows reach a peer's output only after the work queued before the call on its stream: %s",
     e ? baton_result_string(e) : why);
  bufs_free(b);
}

/* Calls the runtime must refuse; then an index outside the table, which
 * runs (skipped) and is reported by the communicator (last: it stays in
 * error). */
static void check_refused(void) {
  const shape s = {(size_t)nranks * 4, 2, 32, 50, 32, 3, 0};
  bufs *b = bufs_new(IP_F32, &s);
  if (!b) { ok(0, "refusals: buffers"); return; }
  baton_result e;
  const int q = rank_lo;   /* refused before anything is launched: this process's first rank alone */
  if (nranks > 1) {
    baton_group_start();
    e = baton_embedding_alltoall(comms[q], b[q].dE, s.T * s.rows, s.D, 0, b[q].dI, b[q].L, b[q].dO, NULL, s.B + 1, s.T,
                                 baton_sum, b[q].dout, baton_f32, streams[q]);
    baton_group_end();
    ok(e == baton_invalid_argument, "a batch that is not a multiple of the ranks is refused: %s", baton_result_string(e));
  } else {
    ok(1, "# SKIP one rank: every batch is a multiple");
  }
  baton_group_start();
  e = baton_embedding_alltoall(comms[q], b[q].dE, s.T * s.rows, s.D, 0, b[q].dI, b[q].L, b[q].dO, b[q].dw, s.B, s.T,
                               baton_avg, b[q].dout, baton_f32, streams[q]);
  baton_group_end();
  ok(e == baton_invalid_argument, "weights with mean pooling are refused: %s", baton_result_string(e));
  baton_group_start();
  e = baton_embedding_alltoall(comms[q], b[q].dE, s.T * s.rows, s.D, 0, b[q].dI, b[q].L, b[q].dO, NULL, s.B, s.T,
                               baton_sum, b[q].dout, baton_i32, streams[q]);
  baton_group_end();
  ok(e == baton_invalid_argument, "a type the pooling does not take (i32) is refused: %s", baton_result_string(e));
  char why[300] = "";
  e = call(NULL, IP_F32, &s, b, 0, 0);
  ok(!e && check(IP_F32, &s, b, 0, 0, why, sizeof why) == 0, "after the refusals a call still runs right: %s",
     e ? baton_result_string(e) : why);
  if (procs()) {   /* its sticky error would stop check_registered's calls, which come last */
    bufs_free(b);
    return;
  }
  /* An index past the table on rank 0. */
  int64_t badi = (int64_t)(s.T * s.rows) + 7;
  cudaSetDevice(bdev(0));
  cudaMemcpy(b[0].dI, &badi, sizeof badi, cudaMemcpyHostToDevice);
  e = call(NULL, IP_F32, &s, b, 0, 0);
  if (mine(0))
    ok(e == baton_invalid_argument, "an index outside the table is reported (the call's error: %s)",
       baton_result_string(e));
  else   /* rank 0's index, in rank 0's process */
    ok(e == baton_success, "rank %d's indices are right: its call runs (%s)", rank_lo, baton_result_string(e));
  bufs_free(b);
}

/* A process per rank, eager calls on registered outputs: every rank's
 * output at the same offset of a window twice its size, the pooled rows
 * stored straight into the peers' outputs.  Then (last: it leaves the
 * communicator failed) rank 1's output at another offset: every rank
 * must stop its call before anything reaches an output. */
static void check_registered(void) {
  const shape s = {(size_t)nranks * 64, 4, 128, 300, 128, 20, 0};
  const int r = rank_lo;
  const size_t bytes = out_elems(&s) * 4;
  bufs *b = bufs_new(IP_F32, &s);
  char *mem = b ? gpu_ranks_window(2 * bytes) : NULL;   /* every rank's output at the same offset of it */
  if (!mem) { bufs_free(b); return; }
  baton_result e;
  char *own = b[r].dout;
  char why[300] = "";
  for (int skew = 0; skew < 2; skew++) {
    b[r].dout = mem + (skew && r == 1 ? bytes : 0);
    cudaMemset(b[r].dout, 0xff, bytes);
    cudaDeviceSynchronize();
    e = call(NULL, IP_F32, &s, b, 0, 0);
    if (!skew) {
      long bad = e ? -1 : check(IP_F32, &s, b, 0, 0, why, sizeof why);
      ok(bad == 0, "rank %d: an eager call on registered outputs stores straight into the peers': %s", r,
         e ? baton_result_string(e) : why[0] ? why : "every element within tolerance");
      continue;
    }
    const long touched = gpu_written(b[r].dout, bytes, 4);
    ok(e == baton_invalid_argument && touched == 0, "rank %d: outputs at different offsets of their windows: the call "
       "stops before any pooled row lands (%s, %ld elements of the output written)", r, baton_result_string(e),
       touched);
  }
  b[r].dout = own;
  bufs_free(b);
  baton_mem_free(mem);   /* the communicator, failed now, keeps its mapping until it is destroyed */
}

static void embed_checks(const gpu_ranks_opts *o) {
  int n = 0;
  for (int ai = 0; ai < rt_algos_count(comms[rank_lo]->algos); ai++) {
    int op = RT_COMPUTE_OP(rt_algos_get(comms[rank_lo]->algos, ai)->compute);
    n += op == IR_OP_EBAG || op == IR_OP_EBAGM;
  }
  ok(n > 0, "%d embedding programs loaded for %d ranks from %s", n, nranks, o->dir);
  size_t R = (size_t)nranks;
  /* Odd widths (column by column), one table, empty bags only, padded
   * rows, the 16-byte paths at 64/128/256 columns, skewed indices. */
  const shape small[] = {{R * 2, 3, 5, 7, 5, 2, 0},       {R * 4, 1, 64, 40, 64, 0, 0},
                         {R * 8, 2, 33, 100, 40, 4, 0},   {R * 16, 4, 64, 300, 72, 12, 1},
                         {R * 32, 8, 128, 1000, 128, 30, 1}, {R * 8, 2, 256, 200, 256, 9, 0}};
  const shape large[] = {{R * 256, 64, 128, 20000, 128, 50, 1}, {R * 512, 16, 256, 100000, 256, 40, 0}};
  check_programs(small, sizeof small / sizeof small[0]);
  if (o->big) check_programs(large, sizeof large / sizeof large[0]);
  check_choice();
  check_graph();
  check_order();
  check_refused();
  if (procs() && direct()) check_registered();   /* last: it leaves the communicator failed */
}

int main(int argc, char **argv) {
  gpu_ranks_opts o;
  int done;
  if (gpu_ranks_args(argc, argv, "gpu_embed", 0, &o)) return 2;
  if (o.procs) return gpu_ranks_procs(&o, embed_checks);
  int rc = gpu_ranks_up(&done);
  if (done) return rc;
  embed_checks(&o);
  return gpu_ranks_end();
}
