/* gpu_rooted.c -- one run of a rooted collective (broadcast, reduce,
 * gather, scatter) on every rank gpu_runtime drives, from one root, in
 * place or out of place, with NULL for the buffers NCCL's contract leaves
 * unused, and its outputs checked. */
#include <stdlib.h>

#include "gpu_runtime.h"
#include "ir_geom.h"
#include "rt_comm.h"

float rooted_in(int r, int64_t i) { return (float)((i * 7 + r * 3) % 13); }

/* In place is NCCL's layout (broadcast, reduce: one buffer; gather: the
 * root's sendbuf is its block of recvbuf; scatter: the root's recvbuf is
 * its block of sendbuf).  The ranks this process drives check their own
 * outputs; off a reduce's or gather's root the output stays untouched. */
baton_result rooted_run(int ai, ir_coll coll, int root, int64_t count, int inplace, float *h, int64_t *wrong,
                        int64_t *untouched) {
  const float sentinel = -1.0f;
  int ib, ob;
  ir_geom_blocks(coll, nranks, &ib, &ob);
  int64_t ni = ib * count, no = ob * count;
  size_t big = (size_t)(ni > no ? ni : no) * 4;
  baton_result e = baton_success;
  /* where each rank's buffers are: in place, one allocation (dout) holds both */
  int64_t in_at = 0, out_at = 0;
  if (inplace && coll == IR_COLL_GATHER) in_at = (int64_t)root * count;
  if (inplace && coll == IR_COLL_SCATTER) out_at = (int64_t)root * count;
  for (int r = lo; r < hi; r++) {
    if (reserve(&din[r], r, big) || reserve(&dout[r], r, big)) return baton_cuda_error;
    cudaSetDevice(dev_of(r));
    for (int64_t i = 0; i < no; i++) h[i] = sentinel;
    cudaMemcpyAsync(dout[r].p, h, (size_t)no * 4, cudaMemcpyHostToDevice, streams[r]);
    for (int64_t i = 0; i < ni; i++) h[i] = rooted_in(r, i);
    int one = inplace && (r == root || (coll != IR_COLL_GATHER && coll != IR_COLL_SCATTER));
    cudaMemcpyAsync(one ? dout[r].p + in_at * 4 : din[r].p, h, (size_t)ni * 4, cudaMemcpyHostToDevice, streams[r]);
    cudaStreamSynchronize(streams[r]);
  }
  baton_group_start();
  for (int r = lo; r < hi; r++) {
    int one = inplace && (r == root || (coll != IR_COLL_GATHER && coll != IR_COLL_SCATTER));
    const void *s = one ? dout[r].p + in_at * 4 : din[r].p;
    void *o = dout[r].p + (one ? out_at * 4 : 0);
    if (ir_coll_unused(coll) == IR_BUF_INPUT && r != root) s = NULL;
    if (ir_coll_unused(coll) == IR_BUF_OUTPUT && r != root) o = NULL;
    baton_result x;
    if (ai >= 0) {   /* this very entry, as the entry points run one (in slices past its window) */
      x = rt_comm_call_submit(comms[r], ai, s, o, (size_t)count, baton_f32, baton_sum, NULL, streams[r]);
    } else if (coll == IR_COLL_BROADCAST) {
      x = baton_broadcast(s, o, count, baton_f32, root, comms[r], streams[r]);
    } else if (coll == IR_COLL_REDUCE) {
      x = baton_reduce(s, o, count, baton_f32, baton_sum, root, comms[r], streams[r]);
    } else if (coll == IR_COLL_GATHER) {
      x = baton_gather(s, o, count, baton_f32, root, comms[r], streams[r]);
    } else {
      x = baton_scatter(s, o, count, baton_f32, root, comms[r], streams[r]);
    }
    if (x) e = x;
  }
  baton_result ge = baton_group_end();
  if (ge) e = ge;
  for (int r = lo; r < hi; r++) {
    cudaSetDevice(dev_of(r));
    cudaMemcpyAsync(h, dout[r].p, big, cudaMemcpyDeviceToHost, streams[r]);   /* in place: both buffers */
    if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return baton_cuda_error;
    int one = inplace && (r == root || (coll != IR_COLL_GATHER && coll != IR_COLL_SCATTER));
    const float *out = h + (one ? out_at : 0);
    int64_t nout = coll == IR_COLL_SCATTER ? count : no;
    if (ir_coll_unused(coll) == IR_BUF_OUTPUT && r != root) {
      /* off the root of a reduce (its one buffer in place) or gather: left alone */
      for (int64_t i = 0; i < nout; i++) {
        float want = coll == IR_COLL_REDUCE && inplace ? rooted_in(r, i) : sentinel;
        *untouched += out[i] != want;
        *wrong += out[i] != want;
      }
      continue;
    }
    int64_t bad = 0, first = -1;
    float got0 = 0, want0 = 0;
    for (int64_t i = 0; i < nout; i++) {
      float want;
      if (coll == IR_COLL_BROADCAST) want = rooted_in(root, i);
      else if (coll == IR_COLL_GATHER) want = rooted_in((int)(i / count), i % count);
      else if (coll == IR_COLL_SCATTER) want = rooted_in(root, (int64_t)r * count + i);
      else {
        want = 0;
        for (int q = 0; q < nranks; q++) want += rooted_in(q, i);
      }
      if (out[i] != want && !bad++) { first = i; got0 = out[i]; want0 = want; }
    }
    if (bad)
      diag("%s root %d %s count %lld: rank %d has %lld wrong, the first at %lld: %g, expected %g", ir_coll_name[coll],
           root, inplace ? "in place" : "out of place", (long long)count, r, (long long)bad, (long long)first,
           got0, want0);
    *wrong += bad;
  }
  return e;
}
