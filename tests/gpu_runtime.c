/* gpu_runtime.c -- runs loaded algorithms on real GPUs through the public
 * API and compares every output element with the host reference (bit-exact
 * for integers, a tolerance for floats); also the automatic choice of
 * algorithm, uneven counts, in and out of place, and the timeout path.
 *
 * Usage: gpu_runtime --ranks N --dir DIR [--gpus G] [--procs] [--big] [--quick] [--net]
 *   DIR holds IR files (those for other rank counts are skipped by the runtime).  --procs: one process per GPU
 *   (fork, unique id, TCP bootstrap, CUDA IPC) instead of one process driving every GPU.  --gpus G: rank r runs on
 *   GPU r % G, so N ranks share G < N GPUs (their correctness, not their speed).  With --procs that needs the
 *   kernels of several processes to run at once on one GPU (the MPS daemon), and few enough blocks per rank for all
 *   of them to be resident (BATON_LANES).  --net: checks that every rank has connections over the network transport
 *   (run with BATON_NODE_RANKS set), and that bytes crossed it.  TAP output; skips when fewer than N (or G) GPUs are
 *   present. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baton.h"
#include "ir_expect.h"
#include "ip_post.h"
#include "ir_geom.h"
#include "rt_comm.h"
#include "rt_diag.h"
#include "rt_param.h"
#include "rt_peerbuf.h"
#include "rt_pool.h"
#include "rt_window.h"
#include "gpu_opts.h"
#include "gpu_runtime.h"
#include "tap.h"

int nranks;
static int ngpus;               /* rank r runs on GPU r % ngpus */
static int shared;              /* ngpus < nranks: calls must be grouped */
int lo, hi;
baton_comm **comms;
cudaStream_t *streams;
dbuf *din, *dout;
static int grouped;              /* run_case makes its calls in one baton group */

int dev_of(int r) { return r % ngpus; }

int reserve(dbuf *b, int r, size_t bytes) {
  if (bytes <= b->cap) return 0;
  cudaSetDevice(dev_of(r));
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
  const ir_prog *p = rt_algos_get(comms[lo]->algos, ai)->prog;
  const char *name = ir_prog_where(p);   /* the file: names may repeat */
  ip_cpu_opts o = {.dtype = (ip_dtype)dtype, .op = (ip_redop)op, .count = count, .inplace = inplace, .expect = ex};
  int es = ip_dtype_size[dtype];
  ir_geom *g = calloc(nranks, sizeof *g);
  post_bufs pb;
  memset(&pb, 0, sizeof pb);
  bt_result res = BT_OK;
  for (int r = 0; r < nranks; r++) ir_geom_init(&g[r], p, r, count, ir_prog_aliased(p, inplace));
  CHECK_GOTO(post_setup(&pb, p, &o, g, inplace, d), res, out);
  pb.check_one = hi - lo == 1 && nranks > 1;
  pb.check_rank = lo;
  for (int r = lo; r < hi; r++) {
    size_t ni = g[r].elems[IR_BUF_INPUT] * es, no = g[r].elems[IR_BUF_OUTPUT] * es, ns = g[r].span * es;
    if (reserve(&din[r], r, ni) || reserve(&dout[r], r, ns > no ? ns : no)) {
      rt_diag_add(d, "cannot allocate test buffers");
      res = BT_ERR_NOMEM;
      goto out;
    }
    /* On the call's stream: a pageable cudaMemcpy may still be in flight
     * when it returns, and the stream does not wait for it. */
    cudaSetDevice(dev_of(r));
    if (inplace) cudaMemcpyAsync(dout[r].p, pb.user_out[r], ns, cudaMemcpyHostToDevice, streams[r]);
    else {
      cudaMemcpyAsync(din[r].p, pb.user_in[r], ni, cudaMemcpyHostToDevice, streams[r]);
      cudaMemcpyAsync(dout[r].p, pb.user_out[r], no, cudaMemcpyHostToDevice, streams[r]);
    }
  }
  if (grouped || shared) baton_group_start();
  for (int r = lo; r < hi; r++) {
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
  if (grouped || shared) {
    baton_result e = baton_group_end();
    if (e) {
      rt_diag_add(d, "baton_group_end: %s", baton_result_string(e));
      res = (bt_result)e;
    }
  }
  for (int r = lo; r < hi; r++) {
    cudaSetDevice(dev_of(r));
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
  for (int r = lo; r < hi; r++) {
    size_t ni = g[r].elems[IR_BUF_INPUT] * es, no = g[r].elems[IR_BUF_OUTPUT] * es, ns = g[r].span * es;
    cudaSetDevice(dev_of(r));
    if (inplace) cudaMemcpyAsync(pb.user_out[r], dout[r].p, ns, cudaMemcpyDeviceToHost, streams[r]);
    else {
      cudaMemcpyAsync(pb.user_out[r], dout[r].p, no, cudaMemcpyDeviceToHost, streams[r]);
      cudaMemcpyAsync(pb.user_in[r], din[r].p, ni, cudaMemcpyDeviceToHost, streams[r]);
    }
    cudaStreamSynchronize(streams[r]);
  }
  int64_t checked = 0;
  res = post_check(&pb, p, &o, g, inplace, &checked, d);
  if (!res && !by_name && (!baton_comm_last_algorithm(comms[lo]) || !*baton_comm_last_algorithm(comms[lo]))) {
    rt_diag_add(d, "no algorithm recorded as run");
    res = BT_ERR_INTERNAL;
  }
out:
  post_free(&pb, p);
  free(g);
  return res;
}

static int reduces(ir_coll c) { return c == IR_COLL_ALLREDUCE || c == IR_COLL_REDUCESCATTER; }

/* Whether a program on its peers' buffers runs eagerly here: in one
 * process holding every rank (its calls in one group), or with a process
 * per GPU where eager calls exchange their buffers (BATON_EAGER_EXCHANGE_MB). */
static int peers_reachable(void) { return hi - lo == nranks || rt_direct_eager_exchanges(comms[lo]); }

/* Every loaded algorithm by name over every type, operator, count and
 * layout it supports. */
static void check_algorithms(int quick, rt_diag *d) {
  const int64_t counts[] = {1, 7, 4099, 3 * 65536 + 5, (1 << 20) + 1};
  int ncounts = quick ? 3 : 5;
  int nalg = rt_algos_count(comms[lo]->algos);
  for (int ai = 0; ai < nalg; ai++) {
    const rt_algo *al = rt_algos_get(comms[lo]->algos, ai);
    const ir_prog *p = al->prog;
    const char *name = p->name;
    if (al->compute >= 0 || al->root_copy) continue;   /* fused programs: tests/gpu_fused; other roots: check_rooted */
    if (!rt_comm_runnable(comms[lo], ai)) {
      ok(1, "# SKIP %s: does not fit this GPU", name);
      continue;
    }
    /* A direct program that reaches its peers' buffers runs in a group of
     * every rank's call, in one process. */
    int peer_io = comms[lo]->dplans && comms[lo]->dplans[ai].ok && comms[lo]->dplans[ai].peer_io;
    if (peer_io && !peers_reachable()) {
      ok(1, "# SKIP %s: reaches its peers' buffers (one process, or BATON_EAGER_EXCHANGE_MB)", name);
      continue;
    }
    int was = grouped;
    grouped |= peer_io;
    ir_expect *ex = NULL;
    if (p->coll == IR_COLL_CUSTOM && (!p->expect || ir_expect_parse(p->expect, ir_prog_where(p), &ex, d))) {
      ok(1, "# SKIP %s: custom collective without an expectation", name);
      continue;
    }
    int fails = 0, runs = 0, refused = 0;
    int direct = comms[lo]->dplans && comms[lo]->dplans[ai].ok;
    rt_diag_clear(d);
    for (int inplace = 0; inplace < 2; inplace++) {
      if (inplace ? !al->inplace_ok : !al->outofplace_ok) continue;
      for (int dt = 0; dt < IP_DTYPE_COUNT; dt++)
        for (int op = 0; op < (reduces(p->coll) ? IP_REDOP_COUNT : 1); op++)
          for (int ci = 0; ci < ncounts; ci++) {
            /* The largest counts once per type with sum, to bound the time. */
            if (ci >= 3 && op != IP_OP_SUM) continue;
            runs++;
            /* A direct program by name with a count past its window is
             * refused on every rank (baton_unsupported), never run. */
            int fits = !direct || rt_dplan_fits(&comms[lo]->dplans[ai], p, rt_window_layout_of(comms[lo]->win),
                                                counts[ci], ip_dtype_size[dt]);
            bt_result e = run_case(ai, dt, op, counts[ci], inplace, ex, 1, d);
            refused += !fits && e == BT_ERR_UNSUPPORTED;
            if (fits ? e != BT_OK : e != BT_ERR_UNSUPPORTED) {
              fails++;
              rt_diag_add(d, "  (%s %s count %lld %s%s)", ip_dtype_name[dt], ip_redop_name[op],
                          (long long)counts[ci], inplace ? "in place" : "out of place",
                          fits ? "" : ": past the window, should be refused");
              if (fails > 3) goto report;
            }
          }
    }
  report:
    grouped = was;
    ok(fails == 0, "%s (%s): %d runs by name, all types and operators, counts 1..%lld, in/out of place%s", name,
       ir_prog_where(p), runs, (long long)counts[ncounts - 1], refused ? " (the counts past the window refused)" : "");
    ir_expect_free(ex);
    if (fails) diag("%s", rt_diag_text(d));
  }
}

/* The entry of rooted program ai relabelled for `root`: its copies follow
 * it, entry ai + root; -1 when that entry is not the copy for that root. */
static int root_entry(int ai, int root) {
  const int aj = ai + root;
  return aj < rt_algos_count(comms[lo]->algos) && rt_algos_get(comms[lo]->algos, aj)->prog->root == root ? aj : -1;
}

/* A direct AllReduce or Broadcast larger than what its scratch holds in
 * the window runs on consecutive slices (rt_direct_slice, rt_comm_call_submit): each such
 * program by name, in and out of place, on two slices and a remainder.
 * Small windows (BATON_WINDOW_MB) make the counts small; with the default
 * window the quick suite leaves it out. */
static void check_sliced(int quick, rt_diag *d) {
  const int64_t huge = INT64_C(1) << 40, limit = quick ? INT64_C(4) << 20 : INT64_C(48) << 20;
  int nalg = rt_algos_count(comms[lo]->algos);
  for (int ai = 0; ai < nalg; ai++) {
    const rt_algo *al = rt_algos_get(comms[lo]->algos, ai);
    const rt_dplan *dp = comms[lo]->dplans ? &comms[lo]->dplans[ai] : NULL;
    if (!dp || !dp->ok || !ir_coll_elementwise(al->prog->coll) || al->compute >= 0 || al->root_copy) continue;
    const int rooted = ir_coll_rooted(al->prog->coll);
    int64_t most = rt_direct_slice(comms[lo], ai, huge, IP_F32), n = 2 * most + 1007;
    if (most <= 0 || most >= huge) continue;
    if (n > limit || (dp->peer_io && !peers_reachable())) {
      ok(1, "# SKIP %s in slices of %lld: %s", al->prog->name, (long long)most,
         n > limit ? "too large for this suite (a smaller BATON_WINDOW_MB makes it smaller)"
                   : "one process, or BATON_EAGER_EXCHANGE_MB");
      continue;
    }
    int fails = 0, runs = 0, was = grouped;
    rt_diag_clear(d);
    grouped = dp->peer_io || was;   /* the ranks' calls in one group: each learns its peers' buffers */
    for (int inplace = 0; inplace < 2; inplace++) {
      if (rooted) {   /* from every root: its relabelled copies follow it (check_rooted) */
        float *h = malloc((size_t)n * 4);   /* one block a rank: element-wise */
        for (int root = 0; root < nranks && h; root++, runs++) {
          int64_t wrong = 0, untouched = 0;
          const int aj = root_entry(ai, root);
          if (aj < 0) {
            fails++;
            continue;
          }
          baton_result e = rooted_run(aj, al->prog->coll, root, n, inplace, h, &wrong, &untouched);
          fails += e || wrong;
        }
        fails += !h;
        free(h);
        continue;
      }
      if (inplace ? !al->inplace_ok : !al->outofplace_ok) continue;
      runs++;
      fails += run_case(ai, IP_F32, IP_OP_SUM, n, inplace, NULL, 1, d) != BT_OK;
    }
    grouped = was;
    ok(runs && !fails, "%s on %lld elements, more than its scratch holds: 3 slices of at most %lld, %d of %d "
       "placements right", al->prog->name, (long long)n, (long long)most, runs - fails, runs);
    if (fails) diag("%s", rt_diag_text(d));
  }
}

/* The automatic choice: every collective that has an algorithm, the
 * ranks' calls one after the other or in one group (launched at once from
 * the launch threads). */
static void check_choice(rt_diag *d, int group) {
  const int64_t n1 = group ? 65536 : 4096, n2 = group ? 999 : 1001;
  const int dt2 = group ? IP_BF16 : IP_I32;
  grouped = group;
  for (int coll = 0; coll < IR_COLL_CUSTOM; coll++) {
    if (ir_coll_rooted((ir_coll)coll)) continue;   /* check_rooted */
    int ai = rt_algos_select(comms[lo]->algos, (ir_coll)coll, 0, n1 * 4, n1, 0);
    if (ai < 0) continue;
    rt_diag_clear(d);
    bt_result r1 = run_case(ai, IP_F32, IP_OP_SUM, n1, 0, NULL, 0, d);
    bt_result r2 = run_case(ai, dt2, IP_OP_MAX, n2, 0, NULL, 0, d);
    ok(!r1 && !r2, "baton_%s%s chooses %s and is right (f32 sum %lld, %s max %lld)", ir_coll_name[coll],
       group ? ", the ranks' calls in one group," : "", baton_comm_last_algorithm(comms[lo]), (long long)n1,
       ip_dtype_name[dt2], (long long)n2);
    if (r1 || r2) diag("%s", rt_diag_text(d));
  }
  grouped = 0;
}

static void check_graphs(int group) {
  /* CUDA graphs: capture one allreduce per rank, replay it three times
   * with the output cleared in between.  With `group`, the ranks' calls
   * are one baton group: launch threads put them in the captures. */
  {
    int ai = rt_algos_select(comms[0]->algos, IR_COLL_ALLREDUCE, 0, 65536 * 4, 65536, 0);
    if (ai >= 0) {
      const int64_t n = 65536 + 13;
      int good = 1, captured = 1;
      cudaGraphExec_t *ge = calloc(nranks, sizeof *ge);
      float *h = malloc(n * sizeof *h);
      for (int r = 0; r < nranks; r++) {
        reserve(&din[r], r, n * 4);
        reserve(&dout[r], r, n * 4);
        for (int64_t i = 0; i < n; i++) h[i] = (float)((i * 7 + r * 3) % 13);
        cudaSetDevice(dev_of(r));
        cudaMemcpyAsync(din[r].p, h, n * 4, cudaMemcpyHostToDevice, streams[r]);
        cudaStreamSynchronize(streams[r]);
      }
      /* The first call outside the capture reserves the scratch. */
      if (group || shared) baton_group_start();
      for (int r = 0; r < nranks; r++)
        baton_allreduce(din[r].p, dout[r].p, n, baton_f32, baton_sum, comms[r], streams[r]);
      if (group || shared) baton_group_end();
      /* Every stream idle first: a synchronize while another stream is
       * capturing (global mode) would invalidate that capture. */
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        cudaStreamSynchronize(streams[r]);
      }
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        captured &= cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeGlobal) == cudaSuccess;
      }
      if (group || shared) baton_group_start();
      for (int r = 0; r < nranks; r++)
        captured &= baton_allreduce(din[r].p, dout[r].p, n, baton_f32, baton_sum, comms[r], streams[r]) == 0;
      if (group || shared) captured &= baton_group_end() == baton_success;
      /* Every capture ended before any graph is instantiated: that too
       * is forbidden while a global-mode capture is under way. */
      cudaGraph_t *gr = calloc(nranks, sizeof *gr);
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        captured &= cudaStreamEndCapture(streams[r], &gr[r]) == cudaSuccess && gr[r];
      }
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        captured &= gr[r] && cudaGraphInstantiate(&ge[r], gr[r], 0) == cudaSuccess;
        if (gr[r]) cudaGraphDestroy(gr[r]);
      }
      free(gr);
      for (int rep = 0; rep < 3 && captured; rep++) {
        for (int r = 0; r < nranks; r++) {
          cudaSetDevice(dev_of(r));
          cudaMemsetAsync(dout[r].p, 0, n * 4, streams[r]);
          good &= cudaGraphLaunch(ge[r], streams[r]) == cudaSuccess;
        }
        for (int r = 0; r < nranks; r++) {
          cudaSetDevice(dev_of(r));
          cudaStreamSynchronize(streams[r]);
          cudaMemcpyAsync(h, dout[r].p, n * 4, cudaMemcpyDeviceToHost, streams[r]);
          cudaStreamSynchronize(streams[r]);
          /* Every wrong element counted, and the call's own verdict, so
           * that a failure says how much went wrong and whether the
           * kernel knew (an abort or a deadline) or stored wrong data. */
          int64_t bad = 0, first = -1, last = -1;
          for (int64_t i = 0; i < n; i++) {
            float want = 0;
            for (int q = 0; q < nranks; q++) want += (float)((i * 7 + q * 3) % 13);
            if (h[i] != want) {
              if (first < 0) {
                diag("replay %d rank %d element %lld: %g, expected %g", rep, r, (long long)i, h[i], want);
                first = i;
              }
              last = i;
              bad++;
            }
          }
          if (bad) {
            baton_result ae = baton_success;
            baton_comm_get_async_error(comms[r], &ae);
            diag("replay %d rank %d: %lld of %lld elements wrong, %lld .. %lld; the call says %s", rep, r,
                 (long long)bad, (long long)n, (long long)first, (long long)last, baton_result_string(ae));
            good = 0;
          }
        }
      }
      ok(captured && good, "allreduce captured in a CUDA graph per rank%s and replayed 3 times (%s)",
         group ? ", the ranks' calls in one group" : "", baton_comm_last_algorithm(comms[0]));
      for (int r = 0; r < nranks; r++)
        if (ge[r]) cudaGraphExecDestroy(ge[r]);
      free(ge);
      free(h);
    }
  }
}

/* Whether the program named algo (what a call ran) reaches its peers'
 * buffers. */
static int reaches(const char *algo) {
  const int ai = algo ? rt_algos_find(comms[lo]->algos, algo) : -1;
  return ai >= 0 && comms[lo]->dplans && comms[lo]->dplans[ai].ok && comms[lo]->dplans[ai].peer_io;
}

/* A process per GPU: allreduces captured into CUDA graphs, each on new
 * buffers (a direct program on the ranks' own buffers learns them at
 * capture, BATON_PEER_MAPS), and on managed memory no handle exports
 * (every rank then runs a program that copies through the window). */
static void check_graphs_procs(void) {
  static const int64_t ns[] = {65536 + 13, 262144 + 5, 2097152 + 3};
  for (int k = 0; k < 3; k++)
    for (int inplace = 0; inplace < 2; inplace++) {
      const char *algo = NULL;
      int good = graph_case(ns[k], inplace, 0, 1, &algo);
      ok(good, "rank %d: allreduce of %lld floats %s captured in a CUDA graph on new buffers, replayed 3 times (%s; "
         "%d peers' allocations mapped)", lo, (long long)ns[k], inplace ? "in place" : "out of place", algo,
         rt_peerbuf_count(comms[lo]->pbufs));
    }
  const char *algo = NULL;
  int good = graph_case(2097152 + 3, 0, 1, 1, &algo);
  ok(good && !reaches(algo), "rank %d: allreduce of %lld floats captured on managed memory (no handle exports it), "
     "replayed 3 times (%s, without its peers' buffers)", lo, (long long)2097152 + 3, algo);
}

/* A process per GPU: eager calls from BATON_EAGER_EXCHANGE_MB exchange
 * every rank's buffers for themselves, so the set's programs on the
 * ranks' own buffers run them (each on new buffers: mapped anew); on
 * managed memory no handle exports, every rank runs one without them. */
static void check_eager_procs(void) {
  const int64_t mb = rt_param_int(RT_PARAM_EAGER_EXCHANGE_MB);
  if (mb <= 0 || mb * (nranks - 1) > 256 || !rt_direct_eager_exchanges(comms[lo])) {
    ok(1, "# SKIP eager calls exchanging their buffers: BATON_EAGER_EXCHANGE_MB is %lld (1-%d runs them)",
       (long long)mb, 256 / (nranks - 1));
    return;
  }
  const int64_t at = mb * (nranks - 1);   /* MiB; at least 32, where the sets run programs on the buffers */
  const int64_t n = ((at > 32 ? at : 32) << 20) / 4 + 5;
  for (int k = 0; k < 4; k++) {
    const int root = k < 2 ? -1 : nranks - 1, inplace = k & 1;
    const char *algo = NULL;
    const int good = eager_case(n, inplace, 0, root, &algo);
    ok(good && reaches(algo) && rt_peerbuf_count(comms[lo]->pbufs) > 0,
       "rank %d: eager %s of %lld floats %s on new buffers: %s, on its peers' buffers (%d peers' allocations mapped)",
       lo, root < 0 ? "allreduce" : "broadcast from the last rank", (long long)n, inplace ? "in place" : "out of place",
       algo ? algo : "?", rt_peerbuf_count(comms[lo]->pbufs));
  }
  /* Calls the ranks do not agree on: every rank is told, before a kernel. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  baton_result e = eager_differs(n);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  ok(e == baton_invalid_argument && secs < 5, "rank %d: eager allreduces whose count differs by rank: %s in %.2f s "
     "(the exchange compares the calls)", lo, baton_result_string(e), secs);
  for (int k = 0; k < 2; k++) {   /* an allreduce, then a broadcast from the last rank (its root kept) */
    const int root = k ? nranks - 1 : -1;
    const char *algo = NULL;
    const int good = eager_case(n, 0, 1, root, &algo);
    ok(good && !reaches(algo), "rank %d: eager %s of %lld floats on managed memory (no handle exports it): %s, "
       "without its peers' buffers (%d peers' allocations mapped)", lo, root < 0 ? "allreduce" : "broadcast from the "
       "last rank", (long long)n, algo ? algo : "?", rt_peerbuf_count(comms[lo]->pbufs));
  }
  /* Memory a rank frees goes back to its GPU: the peers unmap it at the
   * next exchange (here a capture's, whose 2 new buffers each peer maps). */
  const char *algo = NULL;
  double lost = 0;
  int then = 0, now = 0;
  const size_t big = (size_t)2 << 30;
  const int good = freed_case(n, big, &lost, &then, &now, &algo);
  ok(good && reaches(algo) && lost < 256 && now <= then + (nranks - 1), "rank %d: a 2 GiB allocation an eager allreduce exchanged, "
     "then freed: %.0f MiB of the GPU's memory not back after the next exchange (a capture: %s); %d peers' "
     "allocations mapped after the allreduce, %d after", lo, lost, algo ? algo : "?", then, now);
}

/* Lets every other rank's GPU read and write GPU r's default pool (grant),
 * or not. */
static int pool_grant(int r, int grant) {
  cudaMemPool_t pool;
  int bad = cudaDeviceGetDefaultMemPool(&pool, dev_of(r)) != cudaSuccess;
  for (int q = 0; q < nranks && !bad; q++) {
    struct cudaMemAccessDesc a = {.location = {.type = cudaMemLocationTypeDevice, .id = dev_of(q)},
                                  .flags = grant ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone};
    bad = dev_of(q) != dev_of(r) && cudaMemPoolSetAccess(pool, &a, 1) != cudaSuccess;
  }
  return -bad;
}

/* One process: grouped AllGathers past 4 MiB (direct, on the peers' buffers)
 * on each GPU's stream-ordered pool, which peer access does not open to
 * other GPUs: no such program may run (it would fault) unless the pools
 * grant every GPU access, or every rank shares one GPU.  Right either way. */
static void check_pool(void) {
  const int64_t n = (1 << 20) + 3, on = n * nranks;   /* each buffer: the output, then an input outside it */
  float *h = malloc((size_t)(on + n) * sizeof *h), **buf = calloc(nranks, sizeof *buf);
  for (int grant = 0; grant < 2 && h && buf; grant++)
    for (int inplace = 0; inplace < 2; inplace++) {
      int good = 1;
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        for (int64_t i = 0; i < on + n; i++) h[i] = (float)((i * 5 + r) % 11);
        good &= pool_grant(r, grant) == 0 && !cudaMallocAsync((void **)&buf[r], (on + n) * 4, streams[r]) &&
                !cudaMemcpyAsync(buf[r], h, (on + n) * 4, cudaMemcpyHostToDevice, streams[r]);
      }
      baton_result e = baton_group_start();   /* in place: rank r's input is its block of the output */
      for (int r = 0; r < nranks && good && !e; r++)
        e = baton_allgather(buf[r] + (inplace ? r * n : on), buf[r], n, baton_f32, comms[r], streams[r]);
      baton_result g = baton_group_end();
      const char *algo = baton_comm_last_algorithm(comms[0]);
      const int reach = reaches(algo);
      const int barred = reach && !grant && ngpus > 1;   /* ranks on one GPU reach each other's pools */
      good &= !e && !g && !barred;
      for (int r = 0; r < nranks; r++) {
        cudaSetDevice(dev_of(r));
        good &= !cudaStreamSynchronize(streams[r]) && !cudaMemcpy(h, buf[r], on * 4, cudaMemcpyDeviceToHost);
        for (int64_t i = 0; i < on && good; i++)   /* block q = i / n: rank q's input */
          good = h[i] == (float)((((inplace ? i / n * n : on) + i % n) * 5 + i / n) % 11);
        if (!good && !e && !g && !barred) diag("rank %d: an element is wrong", r);
        cudaFreeAsync(buf[r], streams[r]);
        cudaStreamSynchronize(streams[r]);
        pool_grant(r, 0);
      }
      ok(good, "allgather of %lld floats %s on pool memory %s the other GPUs: %s by %s (%s the peers' buffers)",
         (long long)n, inplace ? "in place" : "out of place", grant ? "granted" : "closed to", e || g ? "fails" : "ran",
         algo ? algo : "?", reach ? "reaching" : "not reaching");
    }
  free(h);
  free(buf);
}

/* Groups, after check_choice(d, 1) ran every collective in them: one
 * launch thread per GPU but the caller's, and a group with a bad call,
 * which must launch nothing (launched, the other ranks would wait for the
 * missing one until BATON_TIMEOUT). */
static void check_groups(void) {
  ok(rt_pool_workers() == ngpus - 1, "%d launch threads for %d GPUs (the caller launches one)", rt_pool_workers(),
     ngpus);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  baton_group_start();
  baton_result bad = baton_success;
  for (int r = 0; r < nranks; r++) {
    reserve(&din[r], r, 4096);
    reserve(&dout[r], r, 4096);
    baton_result e = baton_allreduce(r == nranks - 1 ? NULL : din[r].p, dout[r].p, 1024, baton_f32, baton_sum,
                                     comms[r], streams[r]);
    if (r == nranks - 1) bad = e;
  }
  baton_result end = baton_group_end();
  int synced = 1;
  baton_result ae = baton_success;
  for (int r = 0; r < nranks; r++) {
    cudaSetDevice(dev_of(r));
    synced &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
    baton_result e = baton_success;
    baton_comm_get_async_error(comms[r], &e);
    if (e) ae = e;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  ok(bad == baton_invalid_argument && end == baton_invalid_argument,
     "a group with a NULL buffer on rank %d: the call and baton_group_end say %s, %s", nranks - 1,
     baton_result_string(bad), baton_result_string(end));
  ok(synced && ae == baton_success && secs < 2,
     "and nothing was launched: the streams finish at once (%.3f s), no rank timed out (%s)", secs,
     baton_result_string(ae));
  ok(baton_group_end() == baton_invalid_argument, "baton_group_end without a group: invalid argument");
}

/* 1 GiB: the larger buffer of every collective that has an algorithm,
 * with a count that does not divide evenly; allreduce in place. */
static void check_big(rt_diag *d) {
  for (int coll = 0; coll < IR_COLL_CUSTOM; coll++) {
    if (ir_coll_rooted((ir_coll)coll)) continue;   /* check_rooted */
    int ib, ob;
    ir_geom_blocks((ir_coll)coll, nranks, &ib, &ob);
    int64_t count = (1ll << 28) / (ib > ob ? ib : ob) - 5;
    int inplace = coll == IR_COLL_ALLREDUCE;
    int ai = rt_algos_select(comms[lo]->algos, (ir_coll)coll, inplace, (uint64_t)count * 4 * (ib > ob ? ib : ob),
                             count, 0);
    if (ai < 0) continue;
    rt_diag_clear(d);
    bt_result r = run_case(ai, coll == IR_COLL_ALLREDUCE ? IP_F32 : IP_I32, IP_OP_SUM, count, inplace, NULL, 0, d);
    ok(!r, "1 GiB %s %s (%s), count %lld per block", ir_coll_name[coll], inplace ? "in place" : "out of place",
       baton_comm_last_algorithm(comms[lo]), (long long)count);
    if (r) diag("%s", rt_diag_text(d));
  }
}

/* In-place AllToAll (the ranks this process drives): block q of rank r's
 * buffer ends up holding block r of rank q's; in one process by a direct
 * program where the size picks one, and where a FIFO program runs, with
 * no copy of the input if one in place covers the size. */
static uint32_t a2a_val(int r, int q, int64_t i) { return (uint32_t)r * 1000003u + (uint32_t)q * 10007u + (uint32_t)i; }
static int fifo_inplace(void *as, int i) { return !rt_algos_get(as, i)->direct && rt_algos_get(as, i)->inplace_ok; }

static void check_inplace_alltoall(void) {
  const rt_window_layout *l = comms[lo]->win ? rt_window_layout_of(comms[lo]->win) : NULL;   /* past it: a copy aside */
  const int64_t counts[] = {1, 1000, 70000, 300000, l ? (int64_t)(l->simple_bytes / 4 / nranks) + 1001 : 0};
  for (int k = 0; k < 5 && counts[k]; k++) {
    const int64_t count = counts[k], bytes = count * nranks * 4;
    const int sel = rt_algos_select(comms[lo]->algos, IR_COLL_ALLTOALL, 1, bytes, count, 0);
    if (sel < 0) continue;
    uint32_t *h = malloc(bytes);
    int bad = !h;
    for (int r = lo; r < hi && !bad; r++) {
      if (reserve(&dout[r], r, bytes)) { bad = 1; break; }
      for (int q = 0; q < nranks; q++)
        for (int64_t i = 0; i < count; i++) h[q * count + i] = a2a_val(r, q, i);
      cudaSetDevice(dev_of(r));
      cudaMemcpyAsync(dout[r].p, h, bytes, cudaMemcpyHostToDevice, streams[r]);
      cudaStreamSynchronize(streams[r]);
    }
    baton_result e = baton_group_start();
    for (int r = lo; r < hi && !bad && !e; r++)
      e = baton_alltoall(dout[r].p, dout[r].p, count, baton_i32, comms[r], streams[r]);
    baton_result ge = baton_group_end();
    int64_t wrong = 0;
    for (int r = lo; r < hi && !bad; r++) {
      cudaSetDevice(dev_of(r));
      bad |= cudaMemcpyAsync(h, dout[r].p, bytes, cudaMemcpyDefault, streams[r]) || cudaStreamSynchronize(streams[r]);
      for (int q = 0; q < nranks; q++)
        for (int64_t i = 0; i < count; i++) wrong += h[q * count + i] != a2a_val(q, r, i);
    }
    rt_algos *as = comms[lo]->algos;
    const int ai = comms[lo]->last_choice[IR_COLL_ALLTOALL][1], procs = hi - lo == 1 && nranks > 1;
    const rt_algo *al = ai >= 0 ? rt_algos_get(as, ai) : NULL;
    const int fifo_ip = rt_algos_select_by(as, IR_COLL_ALLTOALL, 1, bytes, count, fifo_inplace, as, 0) >= 0;
    const int good = al && (procs || !comms[lo]->dplans || !comms[lo]->dplans[sel].ok || al->direct) &&
                     (al->direct || al->inplace_ok || !fifo_ip);
    ok(!bad && !e && !ge && !wrong && good, "in-place AllToAll, %lld elements a block: %s (direct where the size "
       "picks it, else in place where a FIFO program is), %lld wrong", (long long)count,
       al ? ir_prog_where(al->prog) : "?", (long long)wrong);
    free(h);
  }
}

/* Broadcast, reduce, gather and scatter from every root, in place and
 * out of place: every rooted program by its entry (its relabelled copies
 * too), then the entry points' own choice. */
static void check_rooted(void) {
  static const int64_t counts[] = {1, 4099, 300001};
  float *h = malloc((size_t)counts[2] * nranks * 4);
  if (!h) return;
  /* Every program and every relabelled copy of it, by its entry. */
  int nall = rt_algos_count(comms[lo]->algos);
  for (int ai = 0; ai < nall; ai++) {
    const rt_algo *al = rt_algos_get(comms[lo]->algos, ai);
    if (al->root_copy || !ir_coll_rooted(al->prog->coll)) continue;
    if (!rt_comm_runnable(comms[lo], ai)) {
      ok(1, "# SKIP %s relabelled: does not run on this communicator", al->prog->name);
      continue;
    }
    if (comms[lo]->dplans && comms[lo]->dplans[ai].ok && comms[lo]->dplans[ai].peer_io && !peers_reachable()) {
      ok(1, "# SKIP %s relabelled: reaches its peers' buffers (one process, or BATON_EAGER_EXCHANGE_MB)",
         al->prog->name);
      continue;
    }
    int64_t wrong = 0, untouched = 0, runs = 0;
    baton_result e = baton_success;
    for (int root = 0; root < nranks; root++) {
      int aj = root_entry(ai, root);
      if (aj < 0 || !rt_comm_runnable(comms[lo], aj)) { e = baton_internal_error; break; }
      for (int inplace = 0; inplace < 2 && !e; inplace++)
        for (int ci = 1; ci < 3 && !e; ci++, runs++)
          e = rooted_run(aj, al->prog->coll, root, counts[ci], inplace, h, &wrong, &untouched);
    }
    ok(!e && !wrong, "%s (%s) relabelled for each of %d roots: %lld runs in and out of place, NULL unused buffers, "
       "%lld wrong (%lld off-root buffers written)%s%s", al->prog->name, ir_prog_where(al->prog), nranks,
       (long long)runs, (long long)wrong, (long long)untouched, e ? ": " : "", e ? baton_result_string(e) : "");
  }
  /* The entry points' own choice, from every root. */
  for (int coll = IR_COLL_BROADCAST; coll <= IR_COLL_SCATTER; coll++)
    for (int ci = 0; ci < 3; ci++) {
      int64_t count = counts[ci], wrong = 0, untouched = 0;
      int ib, ob;
      ir_geom_blocks((ir_coll)coll, nranks, &ib, &ob);
      if (rt_algos_select_rooted(comms[lo]->algos, (ir_coll)coll, 0, (uint64_t)count * 4 * (ib > ob ? ib : ob), count,
                                 NULL, NULL, 0) < 0)
        continue;
      baton_result e = baton_success;
      for (int root = 0; root < nranks && !e; root++)
        for (int inplace = 0; inplace < 2 && !e; inplace++)
          e = rooted_run(-1, (ir_coll)coll, root, count, inplace, h, &wrong, &untouched);
      ok(!e && !wrong, "baton_%s from each of %d roots, %lld elements, in and out of place: %s, %lld wrong (%lld "
         "off-root buffers written)%s%s", ir_coll_name[coll], nranks, (long long)count,
         baton_comm_last_algorithm(comms[lo]), (long long)wrong, (long long)untouched, e ? ": " : "",
         e ? baton_result_string(e) : "");
    }
  free(h);
}


static void check_dead_peer(void) {
  /* A dead peer: the last rank never calls.  The others must stop with a
   * timeout error instead of hanging. */
  {
    /* the program the entry point would run without its peers' buffers:
     * one this communicator can run (a direct one spans one node group) */
    int ai = rt_comm_choose_io(comms[0], IR_COLL_ALLREDUCE, din[0].p, dout[0].p, 1024, baton_f32, 0);
    if (ai >= 0) {
      if (shared) baton_group_start();
      for (int r = 0; r + 1 < nranks; r++)
        baton_run(ir_prog_where(rt_algos_get(comms[0]->algos, ai)->prog), din[r].p, dout[r].p, 1024, baton_f32, baton_sum, comms[r],
                  streams[r]);
      if (shared) baton_group_end();
      int stopped = 1;
      for (int r = 0; r + 1 < nranks; r++) {
        cudaSetDevice(dev_of(r));
        stopped &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
      }
      baton_result ae = baton_success;
      baton_comm_get_async_error(comms[0], &ae);
      ok(stopped && ae == baton_timeout, "a missing rank ends the others' kernels with %s (BATON_TIMEOUT=%s)",
         baton_result_string(ae), getenv("BATON_TIMEOUT"));
      if (shared) baton_group_start();
      baton_result again = baton_allreduce(din[0].p, dout[0].p, 16, baton_f32, baton_sum, comms[0], streams[0]);
      if (shared) baton_group_end();
      ok(again == baton_timeout, "later calls on the failed communicator return %s", baton_result_string(again));
    }
  }
}

/* The connections' FIFOs as rank lo's plans wire them: the programs of
 * one protocol share a connection's FIFO (same sender, receiver, channel
 * and lane), programs of different protocols never do (LL and LL128
 * receivers take a line whose flag matches, and raw data a Simple program
 * left in a shared slot can hold that very flag). */
typedef struct fifo_use { int peer, chan, lane, proto; char *fifo; } fifo_use;

static void check_fifos(void) {
  baton_comm *c = comms[lo];
  int nalg = rt_algos_count(c->algos), n = 0, cap = 0;   /* every plan, relabelled copies' too */
  fifo_use *u = NULL;
  cudaSetDevice(dev_of(lo));
  for (int ai = 0; ai < nalg; ai++) {
    const rt_plan *pl = &c->plans[ai];
    if (!pl->ntbs) continue;
    int nb = pl->ntbs * pl->lanes, proto = rt_comm_proto(c, rt_algos_get(c->algos, ai)->prog);
    ip_gtb *h = malloc(nb * sizeof *h);
    if (!h || cudaMemcpy(h, pl->tbs, nb * sizeof *h, cudaMemcpyDeviceToHost) != cudaSuccess) {
      ok(0, "reading the plan of %s", ir_prog_where(rt_algos_get(c->algos, ai)->prog));
      free(h);
      free(u);
      return;
    }
    for (int b = 0; b < nb; b++) {
      if (!h[b].send.fifo) continue;
      if (n == cap) {
        fifo_use *v = realloc(u, (cap = cap ? 2 * cap : 256) * sizeof *u);
        if (!v) {
          ok(0, "out of memory listing the connections");
          free(h);
          free(u);
          return;
        }
        u = v;
      }
      u[n++] = (fifo_use){h[b].send_peer, h[b].chan, b / pl->ntbs, proto, h[b].send.fifo};
    }
    free(h);
  }
  int64_t same = 0, apart = 0, bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (u[i].peer != u[j].peer || u[i].chan != u[j].chan || u[i].lane != u[j].lane) continue;
      int eq = u[i].fifo == u[j].fifo;
      if (u[i].proto == u[j].proto) same++, bad += !eq;
      else apart++, bad += eq;
    }
  int protos = 0;
  for (int p = 0; p < IR_PROTO_COUNT; p++)
    for (int i = 0; i < n; i++)
      if (u[i].proto == p) { protos++; break; }
  ok(bad == 0 && (protos < 2 || apart > 0),
     "rank %d's connections: %lld pairs of one protocol share the FIFO, %lld of different protocols (%d in use) "
     "never do (%lld wrong)", lo, (long long)same, (long long)apart, protos, (long long)bad);
  free(u);
}

/* Ranks sharing a GPU: a call outside a group is refused (launched
 * alone, it would wait for the others while their set-up waits for it). */
static void check_shared_alone(void) {
  reserve(&din[0], 0, 4096);
  reserve(&dout[0], 0, 4096);
  baton_result e = baton_allreduce(din[0].p, dout[0].p, 1024, baton_f32, baton_sum, comms[0], streams[0]);
  cudaSetDevice(dev_of(0));
  int synced = cudaStreamSynchronize(streams[0]) == cudaSuccess;
  baton_result ae = baton_success;
  baton_comm_get_async_error(comms[0], &ae);
  ok(e == baton_invalid_argument && synced && !ae,
     "%d ranks on %d GPUs: a call outside a group is refused (%s) and launches nothing", nranks, ngpus,
     baton_result_string(e));
}

static void streams_create(void) {
  for (int r = lo; r < hi; r++) {
    cudaSetDevice(dev_of(r));
    cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
  }
}

static void release(void) {
  for (int r = lo; r < hi; r++) {
    cudaSetDevice(dev_of(r));
    if (din[r].p) cudaFree(din[r].p);
    if (dout[r].p) cudaFree(dout[r].p);
    cudaStreamDestroy(streams[r]);
    baton_comm_destroy(comms[r]);
  }
}

/* One process per GPU: rank r in a child process; its TAP lines go to a
 * file that the parent renumbers.  The parent touches no CUDA before the
 * fork (a forked CUDA context is unusable). */
static int run_procs(int quick, int big, int net, rt_diag *d) {
  baton_unique_id id;
  baton_result e = baton_get_unique_id(&id);
  if (e) {
    ok(0, "unique id created: %s", baton_result_string(e));
    return tap_done();
  }
  char tmpl[] = "/tmp/baton_gpu_procs_XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  pid_t *pids = calloc(nranks, sizeof *pids);
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      char path[300];
      snprintf(path, sizeof path, "%s/rank%d", tmpl, r);
      if (!freopen(path, "w", stdout)) _exit(3);
      int ngpu = 0;
      if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < ngpus) _exit(77);
      lo = r;
      hi = r + 1;
      cudaSetDevice(dev_of(r));
      e = baton_comm_init_rank(&comms[r], nranks, id, r);
      ok(e == baton_success, "init_rank %d of %d: %s", r, nranks, baton_result_string(e));
      if (e) _exit(tap_done());
      if (net) {
        ok(comms[r]->net && comms[r]->nodes > 1, "rank %d: %d node groups, connections over the network", r,
           comms[r]->nodes);
      }
      streams_create();
      ok(baton_comm_algorithm_count(comms[r]) > 0, "%d algorithms loaded", baton_comm_algorithm_count(comms[r]));
      check_fifos();
      check_algorithms(quick, d);
      check_choice(d, 0);
      check_graphs_procs();
      check_eager_procs();
      check_inplace_alltoall();
      check_rooted();
      check_sliced(quick, d);
      if (big) check_big(d);
      if (net) {
        uint64_t sent = 0, rcvd = 0;
        baton_comm_net_bytes(comms[r], &sent, &rcvd);
        ok(sent > 0 && rcvd > 0, "rank %d: the network carried %.1f MB out, %.1f MB in", r, sent / 1e6, rcvd / 1e6);
      }
      release();
      fflush(stdout);
      _exit(tap_done());
    }
  }
  int skipped = tap_collect_ranks(pids, nranks, tmpl);
  rmdir(tmpl);
  free(pids);
  if (skipped && tap_n == 0) {
    printf("1..0 # SKIP fewer than %d GPUs\n", nranks);
    return 0;
  }
  return tap_done();
}

int main(int argc, char **argv) {
  gpu_opts o;
  if (gpu_opts_read(argc, argv, "gpu_runtime", GPU_OPT_GPUS | GPU_OPT_BIG | GPU_OPT_QUICK | GPU_OPT_PROCS | GPU_OPT_NET,
                    2, 4096, &o))
    return 2;
  nranks = o.nranks;
  ngpus = o.ngpus;
  shared = ngpus < nranks;
  int big = o.big, quick = o.quick, procs = o.procs, net = o.net;
  const char *dir = o.dir;
  setenv("BATON_ALGO_DIR", o.dir, 1);
  setenv("BATON_TIMEOUT", "5", 0);
  comms = calloc(nranks, sizeof *comms);
  streams = calloc(nranks, sizeof *streams);
  din = calloc(nranks, sizeof *din);
  dout = calloc(nranks, sizeof *dout);
  rt_diag *d = rt_diag_new(6);
  if (procs) {
    int rc = run_procs(quick, big, net, d);
    rt_diag_free(d);
    return rc;
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < ngpus) {
    printf("1..0 # SKIP needs %d GPUs, found %d\n", ngpus, ngpu);
    return 0;
  }
  lo = 0;
  hi = nranks;
  int *devs = calloc(nranks, sizeof *devs);
  for (int r = 0; r < nranks; r++) devs[r] = dev_of(r);
  baton_result e = baton_comm_init_all(comms, nranks, devs);
  free(devs);
  ok(e == baton_success, "init_all of %d ranks over %d GPUs: %s", nranks, ngpus, baton_result_string(e));
  if (e) return tap_done();
  streams_create();
  int nalg = baton_comm_algorithm_count(comms[0]);
  ok(nalg > 0, "%d algorithms loaded for %d ranks from %s", nalg, nranks, dir);
  if (net) {
    int all = 1;
    for (int r = 0; r < nranks; r++) all &= comms[r]->net && comms[r]->nodes > 1;
    ok(all, "%d node groups (BATON_NODE_RANKS=%s): every rank has connections over the network transport",
       comms[0]->nodes, getenv("BATON_NODE_RANKS") ? getenv("BATON_NODE_RANKS") : "unset");
  }
  check_fifos();
  check_algorithms(quick, d);
  if (shared) {
    check_shared_alone();
  } else {
    check_choice(d, 0);
    check_graphs(0);
  }
  check_choice(d, 1);
  check_groups();
  check_graphs(1);
  check_inplace_alltoall();
  check_pool();
  check_sliced(quick, d);
  check_rooted();
  if (big) check_big(d);
  if (net) {
    uint64_t sent = 0, rcvd = 0;
    for (int r = 0; r < nranks; r++) {
      uint64_t a, b;
      tp_set_stats(comms[r]->tps, &a, &b);
      sent += a;
      rcvd += b;
    }
    ok(sent > 0 && sent == rcvd, "the network carried %.1f MB (sent %llu bytes, received %llu)", sent / 1e6,
       (unsigned long long)sent, (unsigned long long)rcvd);
  }
  check_dead_peer();
  release();
  rt_diag_free(d);
  return tap_done();
}
