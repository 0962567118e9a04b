/* gpu_runtime.c -- runs loaded algorithms on real GPUs through the public
 * API and compares every output element with the host reference (bit-exact
 * for integers, a tolerance for floats); also the automatic choice of
 * algorithm, uneven counts, in and out of place, and the timeout path.
 *
 * Usage: gpu_runtime --ranks N --dir DIR [--big] [--quick]
 *   DIR holds IR files (those for other rank counts are skipped by the
 *   runtime).  TAP output; skips when fewer than N GPUs are present. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baton.h"
#include "ir_expect.h"
#include "ip_post.h"
#include "ir_geom.h"
#include "rt_comm.h"
#include "rt_diag.h"
#include "tap.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

typedef struct dbuf { char *p; size_t cap; } dbuf;

static int nranks;
static baton_comm **comms;
static cudaStream_t *streams;
static dbuf *din, *dout;

static int reserve(dbuf *b, int r, size_t bytes) {
  if (bytes <= b->cap) return 0;
  cudaSetDevice(r);
  if (b->p) cudaFree(b->p);
  b->p = NULL;
  b->cap = 0;
  if (cudaMalloc((void **)&b->p, bytes + 256) != cudaSuccess) return -1;
  b->cap = bytes;
  return 0;
}

/* One run of program p (algorithm index ai) on every rank.  name NULL:
 * go through the collective's own entry point (automatic choice). */
static bt_result run_case(int ai, int dtype, int op, int64_t count, int inplace, const ir_expect *ex, int by_name,
                          rt_diag *d) {
  const ir_prog *p = rt_algos_get(comms[0]->algos, ai)->prog;
  const char *name = ir_prog_where(p);   /* the file: names may repeat */
  ip_cpu_opts o = {(ip_dtype)dtype, (ip_redop)op, count, inplace, 0, 0, ex};
  int es = ip_dtype_size[dtype];
  ir_geom *g = calloc(nranks, sizeof *g);
  post_bufs pb;
  memset(&pb, 0, sizeof pb);
  bt_result res = BT_OK;
  for (int r = 0; r < nranks; r++) ir_geom_init(&g[r], p, r, count, ir_prog_aliased(p, inplace));
  CHECK_GOTO(post_setup(&pb, p, &o, g, inplace, d), res, out);
  for (int r = 0; r < nranks; r++) {
    size_t ni = g[r].elems[IR_BUF_INPUT] * es, no = g[r].elems[IR_BUF_OUTPUT] * es, ns = g[r].span * es;
    if (reserve(&din[r], r, ni) || reserve(&dout[r], r, ns > no ? ns : no)) {
      rt_diag_add(d, "cannot allocate test buffers");
      res = BT_ERR_NOMEM;
      goto out;
    }
    cudaSetDevice(r);
    if (inplace) cudaMemcpy(dout[r].p, pb.user_out[r], ns, cudaMemcpyHostToDevice);
    else {
      cudaMemcpy(din[r].p, pb.user_in[r], ni, cudaMemcpyHostToDevice);
      cudaMemcpy(dout[r].p, pb.user_out[r], no, cudaMemcpyHostToDevice);
    }
  }
  for (int r = 0; r < nranks; r++) {
    const char *send = inplace ? dout[r].p + g[r].in_at * es : din[r].p;
    char *recv = inplace ? dout[r].p + g[r].out_at * es : dout[r].p;
    baton_result e;
    /* Counts as the collective entry points take them (per rank). */
    if (by_name) e = baton_run(name, send, recv, count, dtype, op, comms[r], streams[r]);
    else if (p->coll == IR_COLL_ALLREDUCE) e = baton_allreduce(send, recv, count, dtype, op, comms[r], streams[r]);
    else if (p->coll == IR_COLL_ALLGATHER) e = baton_allgather(send, recv, count, dtype, comms[r], streams[r]);
    else if (p->coll == IR_COLL_REDUCESCATTER)
      e = baton_reducescatter(send, recv, count, dtype, op, comms[r], streams[r]);
    else e = baton_alltoall(send, recv, count, dtype, comms[r], streams[r]);
    if (e) {
      rt_diag_add(d, "rank %d: call failed: %s", r, baton_result_string(e));
      res = (bt_result)e;
    }
  }
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(r);
    cudaError_t ce = cudaStreamSynchronize(streams[r]);
    if (ce != cudaSuccess) {
      rt_diag_add(d, "rank %d: %s", r, cudaGetErrorString(ce));
      res = BT_ERR_CUDA;
    }
    baton_result ae;
    baton_comm_get_async_error(comms[r], &ae);
    if (ae) {
      rt_diag_add(d, "rank %d: asynchronous error: %s", r, baton_result_string(ae));
      res = (bt_result)ae;
    }
  }
  if (res) goto out;
  for (int r = 0; r < nranks; r++) {
    size_t ni = g[r].elems[IR_BUF_INPUT] * es, no = g[r].elems[IR_BUF_OUTPUT] * es, ns = g[r].span * es;
    cudaSetDevice(r);
    if (inplace) cudaMemcpy(pb.user_out[r], dout[r].p, ns, cudaMemcpyDeviceToHost);
    else {
      cudaMemcpy(pb.user_out[r], dout[r].p, no, cudaMemcpyDeviceToHost);
      cudaMemcpy(pb.user_in[r], din[r].p, ni, cudaMemcpyDeviceToHost);
    }
  }
  int64_t checked = 0;
  res = post_check(&pb, p, &o, g, inplace, &checked, d);
  if (!res && !by_name && (!baton_comm_last_algorithm(comms[0]) || !*baton_comm_last_algorithm(comms[0]))) {
    rt_diag_add(d, "no algorithm recorded as run");
    res = BT_ERR_INTERNAL;
  }
out:
  post_free(&pb, p);
  free(g);
  return res;
}

static int reduces(ir_coll c) { return c == IR_COLL_ALLREDUCE || c == IR_COLL_REDUCESCATTER; }

int main(int argc, char **argv) {
  const char *dir = NULL;
  int big = 0, quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc) nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--big")) big = 1;
    else if (!strcmp(argv[i], "--quick")) quick = 1;
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < nranks || nranks < 2 || !dir) {
    printf("1..0 # SKIP needs %d GPUs, found %d\n", nranks, ngpu);
    return 0;
  }
  setenv("BATON_ALGO_DIR", dir, 1);
  setenv("BATON_TIMEOUT", "5", 0);
  comms = calloc(nranks, sizeof *comms);
  streams = calloc(nranks, sizeof *streams);
  din = calloc(nranks, sizeof *din);
  dout = calloc(nranks, sizeof *dout);
  baton_result e = baton_comm_init_all(comms, nranks, NULL);
  ok(e == baton_success, "init_all over %d GPUs: %s", nranks, baton_result_string(e));
  if (e) return tap_done();
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(r);
    cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
  }
  int nalg = baton_comm_algorithm_count(comms[0]);
  ok(nalg > 0, "%d algorithms loaded for %d ranks from %s", nalg, nranks, dir);
  rt_diag *d = rt_diag_new(6);
  const int64_t counts[] = {1, 7, 4099, 3 * 65536 + 5, 1 << 20};
  int ncounts = quick ? 3 : 5;
  for (int ai = 0; ai < nalg; ai++) {
    const rt_algo *al = rt_algos_get(comms[0]->algos, ai);
    const ir_prog *p = al->prog;
    const char *name = baton_comm_algorithm_name(comms[0], ai);
    if (comms[0]->plans[ai].ntbs == 0) {
      ok(1, "# SKIP %s: does not fit this GPU", name);
      continue;
    }
    ir_expect *ex = NULL;
    if (p->coll == IR_COLL_CUSTOM) {
      ok(1, "# SKIP %s: custom collective without an expectation", name);
      continue;
    }
    int fails = 0, runs = 0;
    rt_diag_clear(d);
    for (int inplace = 0; inplace < 2; inplace++) {
      if (inplace ? !al->inplace_ok : !al->outofplace_ok) continue;
      for (int dt = 0; dt < IP_DTYPE_COUNT; dt++)
        for (int op = 0; op < (reduces(p->coll) ? IP_REDOP_COUNT : 1); op++)
          for (int ci = 0; ci < ncounts; ci++) {
            /* The largest counts once per type with sum, to bound the time. */
            if (ci >= 3 && op != IP_OP_SUM) continue;
            runs++;
            if (run_case(ai, dt, op, counts[ci], inplace, ex, 1, d)) {
              fails++;
              rt_diag_add(d, "  (%s %s count %lld %s)", ip_dtype_name[dt], ip_redop_name[op],
                          (long long)counts[ci], inplace ? "in place" : "out of place");
              if (fails > 3) goto report;
            }
          }
    }
  report:
    ok(fails == 0, "%s (%s): %d runs by name, all types and operators, counts 1..%lld, in/out of place", name,
       ir_prog_where(p), runs, (long long)counts[ncounts - 1]);
    if (fails) diag("%s", rt_diag_text(d));
  }
  /* The automatic choice: every collective that has an algorithm. */
  for (int coll = 0; coll < IR_COLL_CUSTOM; coll++) {
    int ai = rt_algos_select(comms[0]->algos, (ir_coll)coll, 0, 4096 * 4, 4096, 0);
    if (ai < 0) continue;
    rt_diag_clear(d);
    bt_result r1 = run_case(ai, IP_F32, IP_OP_SUM, 4096, 0, NULL, 0, d);
    bt_result r2 = run_case(ai, IP_I32, IP_OP_MAX, 1001, 0, NULL, 0, d);
    ok(!r1 && !r2, "baton_%s chooses %s and is right (f32 sum 4096, i32 max 1001)", ir_coll_name[coll],
       baton_comm_last_algorithm(comms[0]));
    if (r1 || r2) diag("%s", rt_diag_text(d));
  }
  if (big) {
    int ai = rt_algos_select(comms[0]->algos, IR_COLL_ALLREDUCE, 1, 1ull << 30, 1 << 28, 0);
    if (ai >= 0) {
      rt_diag_clear(d);
      bt_result r = run_case(ai, IP_F32, IP_OP_SUM, (1 << 28) + 3, 1, NULL, 0, d);
      ok(!r, "1 GiB f32 in-place allreduce (%s), count 2^28+3", baton_comm_last_algorithm(comms[0]));
      if (r) diag("%s", rt_diag_text(d));
    }
  }
  /* A dead peer: the last rank never calls.  The others must stop with a
   * timeout error instead of hanging. */
  {
    int ai = rt_algos_select(comms[0]->algos, IR_COLL_ALLREDUCE, 0, 4096, 1024, 0);
    if (ai >= 0) {
      for (int r = 0; r + 1 < nranks; r++)
        baton_run(ir_prog_where(rt_algos_get(comms[0]->algos, ai)->prog), din[r].p, dout[r].p, 1024, baton_f32, baton_sum, comms[r],
                  streams[r]);
      int stopped = 1;
      for (int r = 0; r + 1 < nranks; r++) {
        cudaSetDevice(r);
        stopped &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
      }
      baton_result ae = baton_success;
      baton_comm_get_async_error(comms[0], &ae);
      ok(stopped && ae == baton_timeout, "a missing rank ends the others' kernels with %s (BATON_TIMEOUT=%s)",
         baton_result_string(ae), getenv("BATON_TIMEOUT"));
      baton_result again = baton_allreduce(din[0].p, dout[0].p, 16, baton_f32, baton_sum, comms[0], streams[0]);
      ok(again == baton_timeout, "later calls on the failed communicator return %s", baton_result_string(again));
    }
  }
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(r);
    if (din[r].p) cudaFree(din[r].p);
    if (dout[r].p) cudaFree(dout[r].p);
    cudaStreamDestroy(streams[r]);
    baton_comm_destroy(comms[r]);
  }
  rt_diag_free(d);
  return tap_done();
}
