// ip_exec.cuh -- the interpreter's communicating thread blocks, device
// side: the block that walks its thread block's steps tile by tile
// (ip_comm_block), over ip_proto.cuh's waits, element loops, protocols and
// receive chains.  Included by the kernels' translation units
// (ip_gpu_kernel.cuh: every type and op; ip_gpu_gemm.cu: programs with
// gemm steps), each of which adds its compute blocks.
#ifndef IP_EXEC_CUH
#define IP_EXEC_CUH

#include "ip_proto.cuh"

// ---- the interpreter ----------------------------------------------------

// Thread 0 records event ev of step s, tile index i, as the n-th of its
// block's timeline (ip_gpu.h); the last place is kept for EXIT.
__device__ __forceinline__ void trace_ev(const ip_gargs &a, int &n, int ev, int s, int64_t i) {
  ip_trace_ev(a.trace, n, ev, s, i);
}

__device__ __forceinline__ unsigned op_flags(int op) {
  switch (op) {
#define X(id, xml, flags, args, doc) case IR_OP_##id: return (flags);
#include "ir_op.def"
#undef X
  }
  return 0;
}

// Executes step st for tile t: every chunk of the step, all threads.  In
// LL, rflag/sflag are the flags of the message received/sent; returns
// false when an LL receive gave up (Simple waits before, in wait_step).
// The shared memory a compute step's values go to (after the steps).
__device__ __forceinline__ char *stage_of(const ip_gargs &a) {
  extern __shared__ ip_gstep sm_steps[];
  return (char *)sm_steps + (size_t)a.smem_steps * sizeof(ip_gstep);
}

// out[0 .. n) = elements [from, from + n) of tile t of input chunk c as
// compute step st computes them: the valid ones (rows A has) computed,
// the rest zero.  out is the stage or the destination chunk.  Ends with a
// barrier.
template <int DT, bool BAG, int R = IP_GEMV_ROWS, int U = IP_GEMV_UNROLL>
__device__ __forceinline__ void compute_piece(const ip_gargs &a, const ip_gstep &st, int64_t c, int64_t t, int64_t from,
                                              int64_t n, char *out) {
  int64_t at = t * a.tile + from, valid = ir_geom_len(&a.geom, IR_BUF_INPUT, c) - at;
  valid = valid < 0 ? 0 : valid > n ? n : valid;
  for (int64_t b = valid * a.esize + threadIdx.x; b < n * a.esize; b += blockDim.x) out[b] = 0;
  if (valid > 0)
    ip_compute_rows<DT, BAG, R, U>(a, st, ir_geom_off(&a.geom, IR_BUF_INPUT, c) + at, (int)valid, out);
  else __syncthreads();
}

// A compute step in a communicating thread block, before exec_step sends
// or stores its values: tile t of each of its chunks into the stage, one
// after the other (the runtime makes a tile of every chunk of a step fit).
// Not inlined: the computation's registers stay out of the interpreter's
// communication paths.
template <int DT, bool BAG>
__device__ __noinline__ void compute_tile(const ip_gargs &a, const ip_gstep &st, int64_t t) {
  const int64_t len = tile_len(a, t);
  for (int j = 0; j < st.cnt; j++)
    compute_piece<DT, BAG>(a, st, ir_chunk_at(st.srcoff, st.srcrun, st.srcstride, j), t, 0, len, stage_of(a) + j * len * a.esize);
}

// Row x of tile t of chunk c of buffer b (interleaved output rows): where
// it is and how many of its bytes are valid.
__device__ __forceinline__ char *row_at(const ip_gargs &a, int b, int64_t c, int64_t t, int64_t x, int64_t *valid) {
  int64_t v = ir_geom_len(&a.geom, b, c) - t * a.tile - x;
  *valid = (v < 0 ? 0 : v > a.geom.seg ? a.geom.seg : v) * a.esize;
  return a.buf[b] + ir_geom_at(&a.geom, b, c, t * a.tile + x) * a.esize;
}

// rows_piece's common case, a copy (no reduction) of rows that are all
// valid with every pointer and row stride 16-byte aligned: one flat loop
// over the 16-byte units of every row, U in flight per thread (a loop per
// row would pay a memory round trip per row).  false, having done
// nothing, when the piece is not such a copy.
template <int U>
__device__ __forceinline__ bool rows_copy16(const ip_gargs &a, const ip_gstep &st, const piece &p, int j, int64_t t,
                                            unsigned fl) {
  const int64_t seg = a.geom.seg, segb = seg * a.esize, ostride = (int64_t)a.geom.oblocks * segb;
  if ((fl & IR_F_RED) || (segb & 15) || p.len % segb) return false;
  const int64_t nrows = p.len / segb;
  const char *src = p.src ? p.src : p.msg;
  int64_t srs = segb, drs = segb, v = 0;
  char *dst = p.dst;
  int64_t rows = nrows;
  if (p.src && (fl & IR_F_SRC) && st.srcbuf == IR_BUF_OUTPUT) {
    src = row_at(a, IR_BUF_OUTPUT, ir_chunk_at(st.srcoff, st.srcrun, st.srcstride, j), t, 0, &v);
    srs = ostride;
    v = ir_geom_len(&a.geom, IR_BUF_OUTPUT, ir_chunk_at(st.srcoff, st.srcrun, st.srcstride, j)) - t * a.tile;
    rows = v <= 0 ? 0 : v / seg < rows ? v / seg : rows;
  } else if (p.src) {
    rows = p.srcvalid / segb < rows ? p.srcvalid / segb : rows;
  }
  if (dst && st.dstbuf == IR_BUF_OUTPUT) {
    dst = row_at(a, IR_BUF_OUTPUT, ir_chunk_at(st.dstoff, st.dstrun, st.dststride, j), t, 0, &v);
    drs = ostride;
    v = ir_geom_len(&a.geom, IR_BUF_OUTPUT, ir_chunk_at(st.dstoff, st.dstrun, st.dststride, j)) - t * a.tile;
    rows = v <= 0 ? 0 : v / seg < rows ? v / seg : rows;
  } else if (dst) {
    rows = p.dstvalid / segb < rows ? p.dstvalid / segb : rows;
  }
  if (rows != nrows || !src || !aligned16(src) || !aligned16(dst) || !aligned16(p.out) || (ostride & 15)) return false;
  const int64_t total = nrows * (segb / 16);
  if (total >= (1ll << 31)) return false;   // 32-bit unit arithmetic below
  const unsigned upr = (unsigned)(segb / 16), tot = (unsigned)total, n = blockDim.x;
  for (unsigned u = threadIdx.x; u < tot; u += U * n) {
    uint4 w[U];
#pragma unroll
    for (int k = 0; k < U; k++) {
      const unsigned x = u + k * n;
      if (x < tot) w[k] = *(const uint4 *)(src + (int64_t)(x / upr) * srs + (int64_t)(x % upr) * 16);
    }
#pragma unroll
    for (int k = 0; k < U; k++) {
      const unsigned x = u + k * n;
      if (x >= tot) continue;
      if (dst) *(uint4 *)(dst + (int64_t)(x / upr) * drs + (int64_t)(x % upr) * 16) = w[k];
      if (p.out) *(uint4 *)(p.out + (int64_t)x * 16) = w[k];
    }
  }
  return true;
}

// A Simple piece whose tile holds several rows of an interleaved output
// (ir_geom.seg): row by row, each a contiguous piece there; the message,
// the stage and the other buffers move on linearly.
template <int DT, int OP>
__device__ __noinline__ void rows_piece(const ip_gargs &a, const ip_gstep &st, const piece &p, int j, int64_t t,
                                        unsigned fl) {
  if (rows_copy16<4>(a, st, p, j, t, fl)) return;
  const int64_t seg = a.geom.seg, segb = seg * a.esize;
  for (int64_t x = 0; x * a.esize < p.len; x += seg) {
    const int64_t xb = x * a.esize;
    piece q = p;
    q.len = p.len - xb < segb ? p.len - xb : segb;
    if (q.msg) q.msg += xb;
    if (q.out) q.out += xb;
    if (q.src) {
      if ((fl & IR_F_SRC) && st.srcbuf == IR_BUF_OUTPUT) {
        q.src = row_at(a, st.srcbuf, ir_chunk_at(st.srcoff, st.srcrun, st.srcstride, j), t, x, &q.srcvalid);
      } else {
        q.src += xb;
        q.srcvalid = p.srcvalid - xb < 0 ? 0 : p.srcvalid - xb > segb ? segb : p.srcvalid - xb;
      }
    }
    if (q.dst) {
      if (st.dstbuf == IR_BUF_OUTPUT) {
        q.dst = row_at(a, st.dstbuf, ir_chunk_at(st.dstoff, st.dstrun, st.dststride, j), t, x, &q.dstvalid);
      } else {
        q.dst += xb;
        q.dstvalid = p.dstvalid - xb < 0 ? 0 : p.dstvalid - xb > segb ? segb : p.dstvalid - xb;
      }
      if (q.cur) q.cur = q.dst;
    }
    if (fl & IR_F_RED) reduce_piece<DT, OP>(&q);
    else move_piece(&q, a.esize);
  }
}

template <int DT, int OP>
__device__ __forceinline__ bool exec_step(const ip_gargs &a, const ip_gstep &st, int s, int64_t t, const char *msg,
                                          char *out, uint64_t rflag, uint64_t sflag, int peer) {
  unsigned fl = op_flags(st.op);
  int64_t stride = ir_geom_wire(a.proto, a.msg_stride);   // a chunk's bytes in the slot
  const int64_t len = tile_len(a, t), lenb = len * a.esize;
  for (int j = 0; j < st.cnt; j++) {
    piece p;
    p.src = NULL; p.msg = NULL; p.cur = NULL; p.dst = NULL; p.out = NULL;
    p.srcvalid = p.dstvalid = 0;
    p.len = lenb;
    if (fl & IR_F_COMP) {   // computed into the stage (compute_tile): stored or sent as a copy or send would
      p.src = stage_of(a) + j * lenb;
      p.srcvalid = lenb;
    }
    if (fl & IR_F_SRC) p.src = tile_at(a, st.srcbuf, ir_chunk_at(st.srcoff, st.srcrun, st.srcstride, j), t, len, &p.srcvalid);
    if (fl & IR_F_DST) p.dst = tile_at(a, st.dstbuf, ir_chunk_at(st.dstoff, st.dstrun, st.dststride, j), t, len, &p.dstvalid);
    if (fl & IR_F_RECV) p.msg = msg + j * stride;
    if (fl & IR_F_SEND) p.out = out + j * stride;
    if (st.op == IR_OP_REDUCE) p.cur = p.dst;
    if (a.geom.seg > 0 && len > a.geom.seg &&
        (((fl & IR_F_SRC) && st.srcbuf == IR_BUF_OUTPUT) || ((fl & IR_F_DST) && st.dstbuf == IR_BUF_OUTPUT))) {
      rows_piece<DT, OP>(a, st, p, j, t, fl);   // a tile of whole rows of an interleaved output (Simple)
      continue;
    }
    if (a.proto == IR_PROTO_LL) {
      if (!ll_piece<DT, OP>(a, p, (fl & IR_F_RED) != 0, (uint32_t)rflag, (uint32_t)sflag, s, t, peer)) return false;
    } else if (a.proto == IR_PROTO_LL128) {
      if (!ll128_piece<DT, OP>(a, p, (fl & IR_F_RED) != 0, rflag, sflag, s, t, peer)) return false;
    } else if (fl & IR_F_RED) {
      reduce_piece<DT, OP>(&p);
    } else {
      move_piece(&p, a.esize);
    }
  }
  return true;
}

// Thread 0 waits until step st of tile t, this lane's i-th, may run.
// Dependencies are on the same lane's copy of thread block depid (block
// `lane0 + depid`), whose progress counts depn steps per tile.  A receive
// is on connection rc, message r; a send is message `sent`, and reloads
// the receiver's tail only when the last value seen (*tail_seen, which
// only grows) leaves no free slot.  Returns false to stop.
__device__ __forceinline__ bool wait_step(const ip_gargs &a, const ip_gtb &tb, const ip_gstep &st, int s, int64_t t,
                                          int64_t i, int lane0, uint64_t base, uint64_t sent, const ip_gconn &rc,
                                          int rpeer, uint64_t r, uint64_t *tail_seen) {
  spin sp = {0, 0};
  if (st.depid >= 0 && st.sem != IP_SEM_NONE) {   // on a compute step: every sub-tile of t's group counted
    uint64_t need;
    const uint64_t *w = sem_word(a, st.sem, t, st.depn, &need);
    const uint64_t tag = base >> 40;   // this launch's generation (IP_GEN_TAG), every block's
    for (uint64_t x = ld_acquire_gpu(w); x >> 32 != tag || (x & 0xffffffffu) < need; x = ld_acquire_gpu(w))
      if (!spin_more(a, sp, s, t, IP_WAIT_SEM, -1, st.depid)) return false;
  } else if (st.depid >= 0) {
    const uint64_t need = (uint64_t)i * st.depn + st.deps + 1, steps = (UINT64_C(1) << 40) - 1;
    const uint64_t *w = &a.progress[lane0 + st.depid];
    for (uint64_t x = ld_acquire_gpu(w); x >> 40 != base >> 40 || (x & steps) < need; x = ld_acquire_gpu(w))
      if (!spin_more(a, sp, s, t, IP_WAIT_DEP, -1, st.depid)) return false;
  }
  unsigned fl = op_flags(st.op);
  if ((fl & IR_F_RECV) && a.proto == IR_PROTO_SIMPLE) {   // LL, LL128: threads wait for their own lines
    while (ld_acquire_sys(rc.head) <= r)
      if (!spin_more(a, sp, s, t, IP_WAIT_RECV, rpeer, -1)) return false;
  }
  if ((fl & IR_F_SEND) && sent - *tail_seen >= (uint64_t)a.nslots) {   // the last tail seen says "full"
    while (sent - (*tail_seen = ld_acquire_sys(tb.send.tail)) >= (uint64_t)a.nslots)
      if (!spin_more(a, sp, s, t, IP_WAIT_SEND, tb.send_peer, -1)) return false;
  }
  return true;
}


// Copies n 4-byte words from global to shared memory, all threads.
__device__ __forceinline__ void copy_words(void *to, const void *from, int n) {
  for (int k = threadIdx.x; k < n; k += blockDim.x) ((int *)to)[k] = ((const int *)from)[k];
}

// A communicating thread block's CUDA block (every block of the launch
// that is not a compute block): it runs its thread block's steps for
// every tile of its lane.
// Start: one round trip to global memory brings the block's ip_gtb and
// steps into shared memory (their addresses follow from blockIdx alone),
// a second the connections' counts; the kernel touches no other
// descriptor in global memory after that (an acquire invalidates L1, so
// every descriptor read would cost an L2 round trip per step).  Counts
// are never updated per step: message m of a connection in tile index i
// is count0 + i * (messages per tile) + (its place in the tile), computed
// by every thread, so a step that waits for nothing needs no barrier
// before it.
// COMP: the launch may have compute steps inline (gemv, ebag in a
// communicating thread block); a kernel built without them (the gemm
// kernel's) leaves their code out.
template <int DT, int OP, bool COMP>
__device__ __forceinline__ void ip_comm_block(const ip_gargs &a) {
  extern __shared__ ip_gstep sm_steps[];
  __shared__ ip_gtb tb;
  int &stop = ip_stop;
  __shared__ uint64_t base, sent0, rcvd0[1 + IP_GPU_XRECV];   // rcvd0[0]: own connection, then the extras
  static_assert(sizeof(ip_gtb) % 4 == 0 && sizeof(ip_gstep) % 4 == 0, "copied as words");
  int tn = 0;                     // thread 0: events traced
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_ENTER, 0, 0);
  const int lane = blockIdx.x / a.ntbs, lane0 = lane * a.ntbs;
  if (lane >= a.ntiles) {        // no tile for this lane (not launched: ip_gpu_blocks); keep its generation
    if (threadIdx.x == 0) {
      a.gen[blockIdx.x] += 1;
      trace_ev(a, tn, IP_EV_EXIT, 0, 0);
    }
    return;
  }
  const ip_gstep *steps = a.steps + (int64_t)(blockIdx.x % a.ntbs) * a.step_stride;
  uint64_t g = 0;
  if (threadIdx.x == 0) g = a.gen[blockIdx.x] + 1;   // this block is the only writer
  copy_words(&tb, &a.tbs[blockIdx.x], sizeof(ip_gtb) / 4);
  if (a.smem_steps) {
    copy_words(sm_steps, steps, a.smem_steps * (int)(sizeof(ip_gstep) / 4));
    steps = sm_steps;
  }
  __syncthreads();
  uint64_t tail_seen = 0;         // thread 0: the receiver's tail as last seen
  if (threadIdx.x == 0) {
    stop = 0;
    ip_next_poll = 0;
    a.gen[blockIdx.x] = g;
    base = IP_GEN_TAG(g) << 40;
    sent0 = tb.send.fifo ? *tb.send.count : 0;
    rcvd0[0] = tb.recv.fifo ? *tb.recv.count : 0;
    for (int x = 0; x < tb.nx; x++) rcvd0[1 + x] = *tb.xrecv[x].count;
    tail_seen = tb.send.fifo ? ld_acquire_sys(tb.send.tail) : 0;
    trace_ev(a, tn, IP_EV_READY, 0, 0);
  }
  __syncthreads();
  int64_t i = 0;   // tiles run, for the counts at the end
  for (int64_t t = lane; t < a.ntiles; t += a.lanes, i++) {
    int absorbed = -1;   // a step whose dependency the nop run before it waited for
    for (int s = 0; s < tb.nsteps; s++) {
      ip_gstep st = steps[s];
      if (st.op == IR_OP_NOP && st.fuse > 1) {
        // A run of nop steps: thread j waits on step s+j's dependency, all
        // at once; one barrier; the run's last step is then done.  When
        // nobody waits on the run's end, the dependency of the step after
        // it is waited for in the same round (one barrier fewer: the
        // in-place one-shot chain's head waits on a send this way).
        const int n = st.fuse, next = s + n;
        const bool absorb = next < tb.nsteps && !steps[next - 1].hasdep && steps[next].depid >= 0 &&
                            steps[next].op != IR_OP_NOP;
        if (threadIdx.x < n + (absorb ? 1 : 0)) {
          ip_gstep w = steps[s + threadIdx.x];
          w.op = IR_OP_NOP;   // only the dependency: a send's slot or a Simple head is waited for as usual
          if (!wait_step(a, tb, w, s + threadIdx.x, t, i, lane0, base, 0, tb.recv, -1, 0, &tail_seen)) stop = 1;
        }
        if (absorb) absorbed = next;
        if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_WAITED, s, i);
        __syncthreads();
        if (stop) goto done;
        if (threadIdx.x == 0) {
          trace_ev(a, tn, IP_EV_DONE, s, i);
          if (steps[s + st.fuse - 1].hasdep)
            st_release_gpu(&a.progress[blockIdx.x], base + (uint64_t)i * tb.nsteps + s + st.fuse);
        }
        s += st.fuse - 1;
        continue;
      }
      if (s == absorbed) st.depid = -1;
      const unsigned fl = op_flags(st.op);
      const uint64_t r = msg_no(tb, st, rcvd0, i);
      const uint64_t sent = sent0 + (uint64_t)i * tb.nsend + st.sseq;
      // A step that waits for nothing needs no barrier first: the last
      // one's (below) already ordered the data it reads.
      if (st.depid >= 0 || (fl & IR_F_SEND) || ((fl & IR_F_RECV) && a.proto == IR_PROTO_SIMPLE)) {
        if (threadIdx.x == 0) {
          if (!wait_step(a, tb, st, s, t, i, lane0, base, sent, recv_conn(tb, st.conn), recv_peer(tb, st.conn), r,
                         &tail_seen))
            stop = 1;
          trace_ev(a, tn, IP_EV_WAITED, s, i);
        }
        __syncthreads();
        if (stop) goto done;
      } else if (threadIdx.x == 0) {
        trace_ev(a, tn, IP_EV_WAITED, s, i);
      }
      const int nf = st.fuse > 1 ? st.fuse : 1;   // a fused chain: steps s .. s+nf-1 as one
      if (nf > 1) {
        if (!exec_chain<DT, OP>(a, tb, steps, s, nf, t, i, rcvd0, sent)) stop = 1;
      } else {
        const char *msg = (fl & IR_F_RECV) ? recv_conn(tb, st.conn).fifo + (r % a.nslots) * a.slot_bytes : NULL;
        char *out = (fl & IR_F_SEND) ? tb.send.fifo + (sent % a.nslots) * a.slot_bytes : NULL;
        if constexpr (COMP) {
          if (fl & IR_F_COMP) {
            if (a.cbag) compute_tile<DT, true>(a, st, t);
            else compute_tile<DT, false>(a, st, t);
          }
        }
        if (st.op != IR_OP_NOP && !exec_step<DT, OP>(a, st, s, t, msg, out, r + 1, sent + 1, recv_peer(tb, st.conn)))
          stop = 1;
      }
      __syncthreads();
      if (stop) goto done;
      // The barrier orders every thread's accesses before thread 0's
      // release, which is cumulative: one release per word, no extra fence.
      // The local dependants are told first (a GPU-scope release is cheap;
      // a system-scope one waits for every earlier write to land).  LL and
      // LL128 messages need no head: their lines carry their own flags.  No
      // tail needs a fence: every word read from the slot was used (stored)
      // before the barrier, so no read of it is still outstanding, and the
      // tail publishes nothing else (a Simple ring's eager AllReduce with a
      // process per GPU ran 2% faster at 64-256 MiB on 2 x H200 so).
      if (threadIdx.x == 0) {
        trace_ev(a, tn, IP_EV_DONE, s, i);
        if (nf > 1 ? steps[s + nf - 1].hasdep : st.hasdep)
          st_release_gpu(&a.progress[blockIdx.x], base + (uint64_t)i * tb.nsteps + s + nf);
        if ((fl & IR_F_SEND) && a.proto == IR_PROTO_SIMPLE) {
          if (tb.send.lens)   // a network connection: the proxy sends this many bytes
            tb.send.lens[sent % a.nslots] = (uint32_t)((int64_t)(st.cnt - 1) * a.msg_stride + tile_len(a, t) * a.esize);
          st_release_sys(tb.send.head, sent + 1);
        }
        if (nf > 1) {
          for (int k = 0; k < nf; k++)   // the links (a fused run may start with a send)
            if (op_flags(steps[s + k].op) & IR_F_RECV)
              st_relaxed_sys(recv_conn(tb, steps[s + k].conn).tail, msg_no(tb, steps[s + k], rcvd0, i) + 1);
        } else if (fl & IR_F_RECV) {
          st_relaxed_sys(recv_conn(tb, st.conn).tail, r + 1);
        }
      }
      s += nf - 1;
    }
  }
  // Every tile ran: the counts move on by the messages of i tiles.
  if (threadIdx.x == 0) {
    if (tb.send.fifo) *tb.send.count = sent0 + (uint64_t)i * tb.nsend;
    if (tb.recv.fifo) *tb.recv.count = rcvd0[0] + (uint64_t)i * tb.nrecv[0];
    for (int x = 0; x < tb.nx; x++) *tb.xrecv[x].count = rcvd0[1 + x] + (uint64_t)i * tb.nrecv[1 + x];
  }
done:
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_EXIT, 0, 0);
}

#endif
