/* gpu_fused.c -- fused programs on real GPUs through the public API: every
 * loaded fused program by name (baton_run_fused) and the automatic choice
 * (baton_gemv_allreduce) over f32, f16 and bf16 and shapes from one row
 * to the tensor-parallel decode shapes, padded and unaligned operands,
 * CUDA-graph capture, and refused calls.  Every output element of every
 * rank is compared with y = sum over ranks of W_r x_r computed in double
 * on the host, within ip_compute_tolerance.
 *
 * Usage: gpu_fused --ranks N --dir DIR [--gpus G] [--big] [--net] [--procs]
 *   DIR holds the fused IR files; rank r runs on GPU r % G (ranks share a
 *   GPU when G < N: their correctness, not their speed); --procs: a
 *   process per rank (each makes every rank's operands on the host, the
 *   same random draws in the same order, and checks its own y).  TAP output;
 *   skips when fewer than G GPUs are present.  --net: checks that the
 *   ranks' connections use the network transport (run with
 *   BATON_NODE_RANKS set) and that bytes crossed it. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "ip_compute.h"
#include "rt_comm.h"
#include "rt_param.h"
#include "gpu_ranks.h"
#include "tap.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)


/* One shape of a run: y [M] = sum of W_r [M, K] (rows ld apart) x_r [K];
 * x_off shifts x by that many elements (unaligned when not a multiple of
 * 16 bytes). */
typedef struct shape { size_t M, K, ld, x_off; } shape;

/* Per rank: host and device copies of W, x and y. */
typedef struct bufs {
  void *hW, *hx, *hy;
  char *dW, *dx, *dy;
} bufs;

static uint64_t rng = 88172645463325252ull;
static double frand(void) {   /* uniform in [-1, 1) */
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static void fill(int dt, void *p, size_t n) {
  for (size_t i = 0; i < n; i++) ip_set((ip_dtype)dt, p, i, frand());
}

static int mine(int r) { return r >= rank_lo && r < rank_hi; }

static void bufs_free(bufs *b) {
  for (int r = 0; r < nranks; r++) {
    free(b[r].hW); free(b[r].hx); free(b[r].hy);
    if (!mine(r)) continue;
    cudaSetDevice(dev_of(r));
    cudaFree(b[r].dW); cudaFree(b[r].dx); cudaFree(b[r].dy);
  }
  free(b);
}

/* Random W and x on every rank, y poisoned (NaN); on the device for the
 * ranks this process drives. */
static bufs *bufs_new(int dt, const shape *s) {
  int es = ip_dtype_size[dt];
  bufs *b = calloc(nranks, sizeof *b);
  for (int r = 0; b && r < nranks; r++) {
    size_t nw = s->M * s->ld, nx = s->K + s->x_off;
    b[r].hW = malloc(nw * es + 1); b[r].hx = malloc(nx * es + 1); b[r].hy = malloc(s->M * es + 1);
    if (!b[r].hW || !b[r].hx || !b[r].hy) {
      bufs_free(b);
      return NULL;
    }
    fill(dt, b[r].hW, nw);
    fill(dt, b[r].hx, nx);
    for (size_t i = 0; i < s->M; i++) ip_set((ip_dtype)dt, b[r].hy, i, NAN);
    if (!mine(r)) continue;
    cudaSetDevice(dev_of(r));
    if (cudaMalloc((void **)&b[r].dW, nw * es + 16) || cudaMalloc((void **)&b[r].dx, nx * es + 16) ||
        cudaMalloc((void **)&b[r].dy, s->M * es + 16)) {
      bufs_free(b);
      return NULL;
    }
    cudaMemcpy(b[r].dW, b[r].hW, nw * es, cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dx, b[r].hx, nx * es, cudaMemcpyHostToDevice);
    cudaMemcpy(b[r].dy, b[r].hy, s->M * es, cudaMemcpyHostToDevice);
  }
  return b;
}

/* Elements of y on the ranks this process drives that differ from the
 * reference by more than the tolerance; the first is described in why. */
static long check(int dt, const shape *s, bufs *b, char *why, size_t len) {
  int es = ip_dtype_size[dt];
  double *want = calloc(s->M + 1, sizeof(double)), *mag = calloc(s->M + 1, sizeof(double));
  double *v = malloc((s->M + 1) * sizeof(double)), *m = malloc((s->M + 1) * sizeof(double));
  long bad = 0;
  why[0] = 0;
  if (!want || !mag || !v || !m) { snprintf(why, len, "out of memory"); bad = -1; goto out; }
  for (int r = 0; r < nranks; r++) {
    ip_opnd args[IR_MAX_ARGS] = {{b[r].hW, (int64_t)s->M, (int64_t)s->K, (int64_t)s->ld, -1},
                                 {(char *)b[r].hx + s->x_off * es, (int64_t)s->K, 1, 1, -1}};
    ip_compute_exact(IR_OP_GEMV, (ip_dtype)dt, args, 0, (int64_t)s->M, v, m);
    for (size_t i = 0; i < s->M; i++) { want[i] += v[i]; mag[i] += m[i]; }
  }
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    cudaMemcpy(b[r].hy, b[r].dy, s->M * es, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < s->M; i++) {
      double got = ip_get((ip_dtype)dt, b[r].hy, i), tol = ip_compute_tolerance((ip_dtype)dt, nranks, (int64_t)s->K, mag[i]);
      if (fabs(got - want[i]) <= tol) continue;   /* NaN fails */
      if (!bad++)
        snprintf(why, len, "rank %d y[%zu] = %g, expected %g (tolerance %g)", r, i, got, want[i], tol);
    }
  }
out:
  free(want); free(mag); free(v); free(m);
  return bad;
}


/* One grouped call on every rank: by name (baton_run_fused) or through
 * the automatic choice (name NULL). */
static baton_result call(const char *name, int dt, const shape *s, bufs *b) {
  int es = ip_dtype_size[dt];
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++) {
    const char *x = b[r].dx + s->x_off * es;
    if (name) {
      const ir_prog *p = rt_algos_get(comms[r]->algos, rt_algos_find(comms[r]->algos, name))->prog;
      baton_operand ops[IR_MAX_OPERANDS];
      for (int k = 0; k < p->noperands; k++) {
        int mat = p->operands[k].kind == IR_OPND_MATRIX;
        ops[k] = (baton_operand){p->operands[k].name, mat ? (const void *)b[r].dW : (const void *)x,
                                 mat ? s->M : s->K, mat ? s->K : 1, mat ? s->ld : 0};
      }
      e = baton_run_fused(name, ops, p->noperands, b[r].dy, s->M, (baton_dtype)dt, baton_sum, comms[r], streams[r]);
    } else {
      e = baton_gemv_allreduce(comms[r], b[r].dW, x, b[r].dy, s->M, s->K, (baton_dtype)dt, streams[r]);
    }
  }
  baton_result g = baton_group_end();
  return e ? e : g ? g : sync_all();
}

static const int dtypes[] = {IP_F32, IP_F16, IP_BF16};

/* Every fused program by name over every type and shape. */
static void check_programs(const shape *shapes, int nshapes) {
  int nalg = rt_algos_count(comms[rank_lo]->algos);
  for (int ai = 0; ai < nalg; ai++) {
    const rt_algo *al = rt_algos_get(comms[rank_lo]->algos, ai);
    const char *name = ir_prog_where(al->prog);   /* the file: names may repeat */
    if (RT_COMPUTE_OP(al->compute) != IR_OP_GEMV) continue;   /* gemv programs; tests/gpu_embed the others */
    if (rt_plan_blocks(&comms[rank_lo]->plans[ai]) == 0) {
      ok(1, "# SKIP %s: does not fit this GPU", name);
      continue;
    }
    long fails = 0;
    char why[300] = "";
    for (int di = 0; di < 3 && !fails; di++)
      for (int si = 0; si < nshapes && !fails; si++) {
        bufs *b = bufs_new(dtypes[di], &shapes[si]);
        if (!b) { fails = 1; snprintf(why, sizeof why, "out of memory"); break; }
        baton_result e = call(name, dtypes[di], &shapes[si], b);
        if (e) { fails = 1; snprintf(why, sizeof why, "%s", baton_result_string(e)); }
        else fails = check(dtypes[di], &shapes[si], b, why, sizeof why);
        if (fails) diag("%s %s M=%zu K=%zu ld=%zu x+%zu: %s", name, ip_dtype_name[dtypes[di]], shapes[si].M,
                        shapes[si].K, shapes[si].ld, shapes[si].x_off, why);
        bufs_free(b);
      }
    ok(fails == 0, "%s: y = sum of W_r x_r on %d ranks, f32/f16/bf16 x %d shapes, every element within tolerance",
       name, nranks, nshapes);
  }
}

/* Sets the launch count of every plan of the ranks here to `at`, so that
 * their next launches cross it (a program's generation as its progress
 * and semaphore words carry it wraps after 2^24 launches). */
static int set_generations(uint64_t at) {
  int bad = 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(comms[r]->dev);
    for (int ai = 0; ai < rt_algos_count(comms[r]->algos); ai++) {
      const rt_plan *pl = &comms[r]->plans[ai];
      const int n = rt_plan_blocks(pl);
      uint64_t *h = n > 0 && pl->words ? malloc((size_t)n * sizeof *h) : NULL;
      for (int i = 0; h && i < n; i++) h[i] = at;
      if (h) bad |= cudaMemcpy(pl->words, h, (size_t)n * sizeof *h, cudaMemcpyHostToDevice) != cudaSuccess;
      free(h);
    }
  }
  return bad;
}

/* The direct one-shot kernel (BATON_FUSED_DIRECT=1, the default): every
 * type over the shapes with a dense W, the calls one after another with
 * changing shapes (the landing's halves alternate, nothing is reset
 * between calls), each checked, and every rank's y the same bits
 * (tensor-parallel replicas must not drift apart). */
static void check_direct(const shape *shapes, int nshapes, const char *what) {
  if (!comms[rank_lo]->win || !rt_param_int(RT_PARAM_FUSED_DIRECT)) {
    ok(1, "# SKIP the direct GEMV + AllReduce (%s): no window, or BATON_FUSED_DIRECT=0", what);
    return;
  }
  long fails = 0;
  int runs = 0;
  char why[300] = "";
  for (int di = 0; di < 3 && !fails; di++)
    for (int si = 0; si < nshapes && !fails; si++) {
      const shape *sh = &shapes[si];
      if (sh->ld != sh->K ||   /* baton_gemv_allreduce takes a dense W; rows past the fused landings run a program */
          ip_fgemv_half_bytes((int64_t)sh->M, nranks, ip_dtype_size[dtypes[di]]) >
              (int64_t)rt_window_layout_of(comms[rank_lo]->win)->fused_half)
        continue;
      bufs *b = bufs_new(dtypes[di], sh);
      if (!b) { fails = 1; snprintf(why, sizeof why, "out of memory"); break; }
      baton_result e = call(NULL, dtypes[di], sh, b);
      const char *ran = baton_comm_last_algorithm(comms[rank_lo]);
      if (e) { fails = 1; snprintf(why, sizeof why, "%s", baton_result_string(e)); }
      else if (!ran || strcmp(ran, "gemv_allreduce_oneshot_direct")) {
        fails = 1;
        snprintf(why, sizeof why, "ran %s, not the direct kernel", ran ? ran : "nothing");
      } else fails = check(dtypes[di], sh, b, why, sizeof why);
      for (int r = rank_lo + 1; r < rank_hi && !fails; r++)   /* one process: every rank's y */
        if (memcmp(b[r].hy, b[rank_lo].hy, sh->M * ip_dtype_size[dtypes[di]])) {
          fails = 1;
          snprintf(why, sizeof why, "rank %d's y differs from rank 0's", r);
        }
      if (fails) diag("%s M=%zu K=%zu x+%zu: %s", ip_dtype_name[dtypes[di]], sh->M, sh->K, sh->x_off, why);
      runs++;
      bufs_free(b);
    }
  ok(fails == 0, "the direct one-shot GEMV + AllReduce, %s: %d calls (f32/f16/bf16), shapes changing between calls, "
     "every element of every rank within tolerance and the same bits on every rank", what, runs);
}

/* The automatic choice, by the size of y. */
static void check_choice(void) {
  const shape s[] = {{1000, 300, 300, 0}, {40000, 96, 96, 0}};
  for (int k = 0; k < 2; k++) {
    char why[300] = "";
    bufs *b = bufs_new(IP_BF16, &s[k]);
    baton_result e = b ? call(NULL, IP_BF16, &s[k], b) : baton_out_of_memory;
    long bad = e ? -1 : check(IP_BF16, &s[k], b, why, sizeof why);
    ok(bad == 0, "baton_gemv_allreduce bf16 M=%zu K=%zu runs %s: %s", s[k].M, s[k].K,
       baton_comm_last_algorithm(comms[rank_lo]) ? baton_comm_last_algorithm(comms[rank_lo]) : "?", e ? baton_result_string(e) : why);
    if (b) bufs_free(b);
  }
}

/* A captured fused call, replayed on new data: graph-safe (no host state
 * per call). */
/* The ranks' GEMV + AllReduce calls of shape *arg, to be captured. */
typedef struct graph_call { const shape *s; bufs *b; } graph_call;
static baton_result issue_gemv(void *arg) {
  const graph_call *c = arg;
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++)
    e = baton_gemv_allreduce(comms[r], c->b[r].dW, c->b[r].dx, c->b[r].dy, c->s->M, c->s->K, baton_f16, streams[r]);
  baton_result g = baton_group_end();
  return e ? e : g;
}

static void check_graph(shape s) {
  bufs *b = bufs_new(IP_F16, &s);
  if (!b) { ok(0, "graph: buffers"); return; }
  baton_result e = call(NULL, IP_F16, &s, b);   /* once outside the capture: the scratch is reserved */
  graph_call gc = {&s, b};
  gpu_graphs G = {0};
  if (!e) e = gpu_graphs_capture(&G, issue_gemv, &gc);
  long bad = -1;
  char why[300] = "";
  for (int round = 0; round < 2 && !e; round++) {
    for (int r = 0; r < nranks; r++) {   /* new operands, same buffers */
      fill(IP_F16, b[r].hx, s.K);
      for (size_t i = 0; i < s.M; i++) ip_set(IP_F16, b[r].hy, i, NAN);
      if (!mine(r)) continue;
      cudaSetDevice(dev_of(r));
      cudaMemcpy(b[r].dx, b[r].hx, s.K * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(b[r].dy, b[r].hy, s.M * 2, cudaMemcpyHostToDevice);
    }
    e = gpu_graphs_replay(&G);
    bad = e ? -1 : check(IP_F16, &s, b, why, sizeof why);
    if (bad) break;
  }
  ok(!e && bad == 0, "a captured baton_gemv_allreduce of %zu x %zu replays right on new data twice: %s", s.M, s.K,
     e ? baton_result_string(e) : why);
  gpu_graphs_free(&G);
  bufs_free(b);
}

/* Calls the runtime must refuse, and the communicator still works after. */
static void check_refused(void) {
  const shape s = {257, 64, 64, 0};
  bufs *b = bufs_new(IP_F32, &s);
  if (!b) { ok(0, "refusals: buffers"); return; }
  baton_group_start();
  baton_result e = baton_gemv_allreduce(comms[rank_lo], b[rank_lo].dW, b[rank_lo].dx, b[rank_lo].dy, s.M, s.K, baton_i32, streams[rank_lo]);
  baton_group_end();
  ok(e == baton_invalid_argument, "a type gemv does not take (i32) is refused: %s", baton_result_string(e));
  baton_group_start();
  e = baton_gemv_allreduce(comms[rank_lo], NULL, b[rank_lo].dx, b[rank_lo].dy, s.M, s.K, baton_f32, streams[rank_lo]);
  baton_group_end();
  ok(e == baton_invalid_argument, "a NULL matrix is refused: %s", baton_result_string(e));
  int nalg = rt_algos_count(comms[rank_lo]->algos);
  for (int ai = 0; ai < nalg; ai++) {
    if (RT_COMPUTE_OP(rt_algos_get(comms[rank_lo]->algos, ai)->compute) != IR_OP_GEMV || rt_plan_blocks(&comms[rank_lo]->plans[ai]) == 0)
      continue;
    const char *name = ir_prog_where(rt_algos_get(comms[rank_lo]->algos, ai)->prog);
    baton_operand ops[2] = {{"W", b[rank_lo].dW, s.M, s.K, 0}, {"x", b[rank_lo].dx, s.K + 1, 1, 0}};
    baton_group_start();
    e = baton_run_fused(name, ops, 2, b[rank_lo].dy, s.M, baton_f32, baton_sum, comms[rank_lo], streams[rank_lo]);
    baton_group_end();
    ok(e == baton_invalid_argument, "an x of K+1 elements for a W of K columns is refused: %s", baton_result_string(e));
    baton_operand fit[2] = {{"W", b[rank_lo].dW, s.M, s.K, 0}, {"x", b[rank_lo].dx, s.K, 1, 0}};
    for (int op = baton_prod; op <= baton_min; op++) {   /* only the sum kernel computes */
      baton_group_start();
      e = baton_run_fused(name, fit, 2, b[rank_lo].dy, s.M, baton_f32, (baton_redop)op, comms[rank_lo], streams[rank_lo]);
      baton_group_end();
      ok(e == baton_invalid_argument, "a fused program run with %s is refused: %s", ip_redop_name[op],
         baton_result_string(e));
    }
    baton_group_start();
    e = baton_run(name, b[rank_lo].dy, b[rank_lo].dy, s.M, baton_f32, baton_sum, comms[rank_lo], streams[rank_lo]);
    baton_group_end();
    ok(e == baton_invalid_argument, "a fused program run as a plain collective is refused: %s", baton_result_string(e));
    break;
  }
  e = call(NULL, IP_F32, &s, b);
  char why[300] = "";
  ok(!e && check(IP_F32, &s, b, why, sizeof why) == 0, "after the refusals a call still runs right: %s",
     e ? baton_result_string(e) : why);
  bufs_free(b);
}

/* Every check, on the ranks this process drives. */
static void fused_checks(const gpu_ranks_opts *o) {
  int fused = 0;
  for (int ai = 0; ai < rt_algos_count(comms[rank_lo]->algos); ai++)
    fused += rt_algos_get(comms[rank_lo]->algos, ai)->compute >= 0;
  ok(fused > 0, "%d fused programs loaded for %d ranks from %s", fused, nranks, o->dir);
  /* One row; odd sizes (scalar tails, partial tiles); a padded row
   * stride; x not 16-byte aligned (no 16-byte loads); decode shapes. */
  const shape small[] = {{1, 1, 1, 0}, {5, 3, 3, 0}, {4099, 67, 67, 0}, {3000, 1000, 1032, 0}, {2049, 515, 515, 1},
                         {8192, 2048, 2048, 0}, {12289, 1031, 1031, 0}};
  const shape large[] = {{8192, 4096, 4096, 0}, {32768, 2048, 2048, 0}, {65536, 7168, 7168, 0}};
  check_programs(small, sizeof small / sizeof small[0]);
  if (o->big) check_programs(large, sizeof large / sizeof large[0]);
  check_direct(small, sizeof small / sizeof small[0], "small and odd shapes");
  if (o->big) check_direct(large, sizeof large / sizeof large[0], "decode shapes");
  /* Past 2^24 launches of each program: the first launch after a count of
   * 2^24 - 2 is right, and so is every one after the wrap (each program's
   * shapes and types are several launches). */
  ok(!set_generations((UINT64_C(1) << 24) - 2), "every plan's launch count set to 2^24 - 2");
  check_programs(small, 3);
  check_choice();
  check_graph((shape){4099, 513, 513, 0});
  check_graph((shape){40000, 160, 160, 0});   /* more row groups than the direct kernel's warps */
  check_refused();
  if (o->net) {
    uint64_t sent = 0, rcvd = 0;
    int all = 1;
    for (int r = rank_lo; r < rank_hi; r++) {
      uint64_t a = 0, b = 0;
      all &= comms[r]->net && comms[r]->nodes > 1;
      baton_comm_net_bytes(comms[r], &a, &b);
      sent += a;
      rcvd += b;
    }
    ok(all && sent > 0 && (o->procs || sent == rcvd), "%d node groups: the fused programs' messages crossed the "
       "network transport (%.1f MB)", comms[rank_lo]->nodes, sent / 1e6);
  }
}

int main(int argc, char **argv) {
  gpu_ranks_opts o;
  int done;
  if (gpu_ranks_args(argc, argv, "gpu_fused", 1, &o)) return 2;
  if (o.procs) return gpu_ranks_procs(&o, fused_checks);
  int rc = gpu_ranks_up(&done);
  if (done) return rc;
  fused_checks(&o);
  return gpu_ranks_end();
}
