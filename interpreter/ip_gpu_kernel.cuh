// ip_gpu_kernel.cuh -- the GPU interpreter kernel: one CUDA block per IR
// thread block walks its steps for every tile (ip_exec.cuh); a switch over
// opcodes moves and combines data through FIFO slots.  The algorithm is
// the IR; the kernel is a template over the reduction primitive (type,
// op), so that the primitive is inlined into the copy loops (a run-time
// switch to forty out-of-line variants cost a register save and restore
// per call, more local-memory traffic than the data itself).  Included by
// ip_gpu_type.cu only, which the build compiles once per element type.
#ifndef IP_GPU_KERNEL_CUH
#define IP_GPU_KERNEL_CUH

#include "ip_exec.cuh"

// Where a direct call's (ip_gargs.direct) values of input chunk c go,
// from its element x0 on: chunk j of block q to rank q's output chunk
// (rank, j).
__device__ __forceinline__ ip_place direct_place(const ip_gargs &a, int64_t c, int64_t x0) {
  const int64_t k = a.geom.k, q = c / k;
  return {a.dout[q], (int64_t)a.rank * k + (c - q * k), x0};
}

// A piece: elements [from, from + n) of tile t of input chunk c of step
// st, computed into out, where the destination holds keep <= n of them
// (rows past the input's are zeros); or, with out NULL (a direct call:
// embedding bags only, the runtime sees to it), straight into the owner's
// output (direct_place).  Ends with a barrier.  The block's one call of
// the step's computation: each inlined copy of the bag and GEMV loops
// cost ptxas some 15 s per element type.
template <int DT, bool BAG>
__device__ __forceinline__ void block_piece(const ip_gargs &a, const ip_gstep &st, int64_t c, int64_t t,
                                            int64_t from, int64_t n, int64_t keep, char *out) {
  const int64_t at = t * a.tile + from;
  int64_t valid = ir_geom_len(&a.geom, IR_BUF_INPUT, c) - at;
  if (out) {
    n = keep;
    for (int64_t b = (valid < 0 ? 0 : valid) * a.esize + threadIdx.x; b < n * a.esize; b += blockDim.x) out[b] = 0;
  }
  valid = valid < 0 ? 0 : valid > n ? n : valid;
  if (valid > 0) {
    const int64_t row0 = ir_geom_off(&a.geom, IR_BUF_INPUT, c) + at;
    if constexpr (BAG) {
      if (!out || st.op == IR_OP_EBAG || st.op == IR_OP_EBAGM) {
        ip_place pl{};
        if (!out) pl = direct_place(a, c, at);
        ip_ebag<DT>(a, st, row0, (int)valid, out, out ? nullptr : &pl);
        return;
      }
    }
    if (out) {
      ip_compute_rows<DT, false>(a, st, row0, (int)valid, out);   // the GEMV
      return;
    }
  }
  __syncthreads();
}

// All of step st's chunk (one: whole_share) by this block together with
// every other block of the one compute thread block, the bags taken from
// the step's counter ctr: into the destination chunk, or in a direct call
// straight into the owner's output.  No barrier at its end: each warp
// goes on as the counter runs out (ip_ebag with a shared counter); the
// caller puts one before whatever needs this block's stores done.
template <int DT, bool BAG>
__device__ __forceinline__ void bag_step(const ip_gargs &a, const ip_gstep &st, unsigned long long *ctr) {
  if constexpr (BAG) {
    const int64_t c = st.srcoff, valid = ir_geom_len(&a.geom, IR_BUF_INPUT, c);
    const int64_t row0 = ir_geom_off(&a.geom, IR_BUF_INPUT, c);
    if (valid > 0) {
      ip_place pl{};
      char *dst = nullptr;
      if (a.direct) {
        pl = direct_place(a, c, 0);
      } else {
        int64_t dv;
        dst = tile_at(a, st.dstbuf, st.dstoff, 0, a.geom.cap, &dv);
      }
      ip_ebag<DT>(a, st, row0, (int)valid, dst, a.direct ? &pl : nullptr, ctr);
    }
  }
}

// Whether a compute block may take its share of step st's rows as one
// piece instead of tile by tile: an embedding-bag step of one chunk that
// nobody waits on tile by tile (no semaphore, or a direct call) and whose
// destination is contiguous (not an output interleaved among ranks, unless
// direct places every bag itself).  Fewer pieces, fewer barriers: a piece
// of a few bags per warp waits at its barrier for its longest bag.
__device__ __forceinline__ bool whole_share(const ip_gargs &a, const ip_gstep &st) {
  if ((st.op != IR_OP_EBAG && st.op != IR_OP_EBAGM) || st.cnt != 1) return false;
  if (a.direct) return true;
  return st.sem == IP_SEM_NONE && (st.dstbuf != IR_BUF_OUTPUT || a.geom.seg <= 0 || a.geom.oblocks <= 1);
}

// A CUDA block of a compute thread block (ip_gpu.h): its equal share of
// the row space, computed piece by piece (a piece within one chunk's
// tile) straight into the destination chunk, no stage between; the rows
// of each tile it finishes counted in that tile's semaphore when some
// step waits on the step.  Start: one round trip brings the tb's steps to
// shared memory (a row of the plan, zero past its last step: nothing has
// cnt 0) and thread 0's generation.  One division finds where the share
// starts in its first tile; pieces then move on by addition.  Not inlined
// into the kernel: its registers are its own.
template <int DT, bool BAG>
__device__ __noinline__ void compute_block(const ip_gargs &a) {
  extern __shared__ ip_gstep sm_steps[];
  const int cb = blockIdx.x - a.ntbs * a.lanes, ct = cb / a.cwidth, w = cb % a.cwidth;
  const ip_gstep *steps = a.steps + (int64_t)(a.ntbs + ct) * a.step_stride;
  int tn = 0;
  uint64_t gen = 0;   // thread 0's: only it counts in semaphores
  if (threadIdx.x == 0) {
    trace_ev(a, tn, IP_EV_ENTER, 0, 0);
    gen = a.gen[blockIdx.x] + 1;
  }
  if (a.smem_steps) {
    copy_words(sm_steps, steps, a.smem_steps * (int)(sizeof(ip_gstep) / 4));
    steps = sm_steps;
  }
  // A direct call stores nothing before every rank's call has started.
  // The barrier is every call's: it also orders the steps' copy above.
  if (__syncthreads_or(direct_meets(a) && threadIdx.x == 0 && !direct_start(a))) return;
  if (threadIdx.x == 0) a.gen[blockIdx.x] = gen;
  int nsteps = 0;
  while (nsteps < a.step_stride && steps[nsteps].cnt > 0) nsteps++;
  const int64_t cap = a.geom.cap, es = a.esize;
  int64_t total = 0;
  for (int s = 0; s < nsteps; s++) total += steps[s].cnt * cap;
  const int64_t lo = total * w / a.cwidth, hi = total * (w + 1) / a.cwidth;
  int64_t base = 0;   // the row space's start of step s
  bool shared_bags = false;   // some step's bags came from a counter every block shares
  bool unsynced = false;      // the last such step's warps may still run: a barrier before any other step's piece
  for (int s = 0; s < nsteps; base += steps[s].cnt * cap, s++) {
    const ip_gstep st = steps[s];
    if (BAG && a.bagctr && a.ncomp == 1 && cap < (1 << 30) && whole_share(a, st)) {
      // Every block takes the step's bags from one counter: the GPU's
      // warps balance over them, where equal shares of rows left each
      // block waiting for its slowest warp; and a warp that finds the
      // counter run out goes straight on to the next step's.
      shared_bags = unsynced = true;
      bag_step<DT, BAG>(a, st, (unsigned long long *)&a.bagctr[1 + s]);
      if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_DONE, s, 0);
      continue;
    }
    if (base >= hi || base + st.cnt * cap <= lo) continue;
    if (unsynced) {
      __syncthreads();
      unsynced = false;
    }
    // A whole share (whole_share: one chunk) is one tile of cap rows: no
    // barrier per tile.
    const bool whole = BAG && whole_share(a, st);
    const int64_t ntiles = whole ? 1 : a.ntiles;
    for (int64_t t = 0; t < ntiles; t++) {
      const int64_t len = whole ? cap : tile_len(a, t), us = base + st.cnt * t * a.tile, ue = us + st.cnt * len;   // tile t's rows
      if (ue <= lo || us >= hi) continue;
      const int64_t x0 = us > lo ? us : lo, end = ue < hi ? ue : hi;
      int j = (int)((x0 - us) / len);   // pieces: chunk j of the step, rows [from, from + n) of its tile
      int64_t from = x0 - us - j * len;
      for (int64_t x = x0; x < end;) {
        int64_t n = len - from < end - x ? len - from : end - x;
        if (n > (1 << 30)) n = 1 << 30;
        // Ends with a barrier, which also orders every thread's stores
        // before the count (or, in a direct call, before direct_end).
        char *dst = nullptr;
        int64_t keep = n;
        if (!a.direct) {
          int64_t dv;
          dst = tile_at(a, st.dstbuf, st.dstoff + j, t, len, &dv) + from * es;
          keep = dv / es - from;   // rows the destination holds
          keep = keep < 0 ? 0 : keep > n ? n : keep;
        }
        block_piece<DT, BAG>(a, st, st.srcoff + j, t, from, n, keep, dst);
        x += n;
        from += n;
        if (from == len) {
          from = 0;
          j++;
        }
      }
      if (st.sem != IP_SEM_NONE && !a.direct && threadIdx.x == 0) sem_post(a, st.sem, t, (uint64_t)(end - x0), gen);
      if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_DONE, s, t);
    }
  }
  if (shared_bags) {   // every warp done; the last block done sets the counters back for the next call
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd((unsigned long long *)&a.bagctr[0], 1ull) == (unsigned long long)(a.cwidth - 1))
      for (int k = 0; k <= nsteps; k++) a.bagctr[k] = 0;
  }
  if (direct_meets(a)) {
    __syncthreads();   // a block with no piece has met no barrier since its last stores: none
    if (threadIdx.x == 0) direct_end(a, a.ncomp * a.cwidth);
  }
  if (threadIdx.x == 0) trace_ev(a, tn, IP_EV_EXIT, 0, 0);
}


// The kernel: a compute thread block's blocks compute (gemv, embedding
// bags), every other block communicates.  Compute blocks run in the sum
// kernel only (avg runs it too): the runtime refuses a program with
// compute steps under any other operator (rt_fifo_prep), so each type's
// compute blocks are compiled once, not once per operator (ptxas spent
// half of a float type's build on the other three copies).  Were such a
// call launched all the same, its compute blocks stop it at once rather
// than leave the others waiting for tiles that never come.  Out of line,
// as compute_block is: without a call there, ptxas gave the other
// operators' communicating code more spills, and their FIFO ring ran
// 8-33 % slower (2 ranks sharing an H200).
static __device__ __noinline__ void refuse_compute(const ip_gargs &a) {
  if (threadIdx.x == 0) stop_call(a, -1, 0, IP_WAIT_ABORT, -1, -1, globaltimer());
}

template <int DT, int OP>
__global__ void __launch_bounds__(IP_GPU_MAX_THREADS, 1) ip_gpu_kernel(const __grid_constant__ ip_gargs a) {
  if (a.ncomp && (int)blockIdx.x >= a.ntbs * a.lanes) {   // a compute thread block's block
    if constexpr (OP == IP_OP_SUM) {
      if (a.cbag) compute_block<DT, true>(a);   // with embedding bags
      else compute_block<DT, false>(a);
    } else {
      refuse_compute(a);
    }
    return;
  }
  ip_comm_block<DT, OP, true>(a);
}

template <int DT>
__global__ void ip_divide_kernel(void *p, int64_t n, int divisor) {
  typedef typename ip_dev<DT>::type T;
  T *x = (T *)p;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    if constexpr (DT == IP_F16) x[i] = __float2half_rn((float)((double)__half2float(x[i]) / divisor));
    else if constexpr (DT == IP_BF16) x[i] = __float2bfloat16_rn((float)((double)__bfloat162float(x[i]) / divisor));
    else if constexpr (DT == IP_F32) x[i] = (float)((double)x[i] / divisor);
    else if constexpr (DT == IP_F64) x[i] = x[i] / divisor;
    else if constexpr (DT == IP_U8 || DT == IP_U32 || DT == IP_U64) x[i] = (T)((uint64_t)x[i] / (uint64_t)divisor);
    else x[i] = (T)((int64_t)x[i] / (int64_t)divisor);   // integers exactly, truncated toward zero, as ip_divide
  }
}

#endif
