// ip_spin.cuh -- what the direct kernels (the direct executor, the direct
// fused operators) share: waiting with abort and timeout, and LL lines
// (16 bytes: two data words, each followed by the call's flag).  A kernel's
// arguments A name: claim, err, rank, abort, timeout_ns.
#ifndef IP_SPIN_CUH
#define IP_SPIN_CUH

#include <stdint.h>

#include "ip_gpu.h"
#include "ip_mem.cuh"

// ---- waiting, with abort and timeout (as the interpreter's spin_more) ----

// Per block: stop (every thread leaves at its next check) and when the
// host's abort flag may next be read (it lives in host memory: reads cross
// PCIe, so a block reads it at most once per DIRECT_ABORT_POLL_NS).
__shared__ int d_stop;
__shared__ unsigned long long d_next_poll;
#define DIRECT_ABORT_POLL_NS 100000

struct dspin {
  uint64_t start;
  uint32_t n;
};

// Stops the call on every GPU of the communicator: the first block to
// stop on this GPU records where and why (tb, step, tile, what, peer, chan;
// `now` the GPU's timer), this block leaves at its next check, and the
// abort flag stops every other block.
template <class A>
static __device__ __noinline__ void dstop(const A &a, int tb, int step, int64_t tile, int what, int peer, int chan,
                                          uint64_t now) {
  if (atomicCAS((unsigned long long *)a.claim, 0ull, 1ull) == 0ull && *(volatile int32_t *)&a.err->flag == 0) {
    volatile ip_gerr *e = a.err;
    e->rank = a.rank;
    e->tb = tb;
    e->step = step;
    e->tile = tile;
    e->what = what;
    e->peer = peer;
    e->chan = chan;
    e->depid = -1;
    e->when = now;
    __threadfence_system();
    e->flag = 1;
    __threadfence_system();
  }
  atomicExch(&d_stop, 1);
  *a.abort = 1;
  __threadfence_system();
}

// Called in a wait loop.  False when the wait must end: the block stops,
// the host or another GPU aborted, or this wait timed out (dstop).
template <class A>
static __device__ __noinline__ bool dspin_more(const A &a, dspin &s, int tb, int step, int64_t tile, int what, int peer,
                                               int chan) {
  if (++s.n & 1023) return true;
  if (atomicAdd(&d_stop, 0)) return false;
  const uint64_t now = globaltimer();
  if (s.start == 0) s.start = now;
  const unsigned long long due = atomicAdd(&d_next_poll, 0ull);
  if (now >= due && atomicCAS(&d_next_poll, due, now + DIRECT_ABORT_POLL_NS) == due && *a.abort) {
    atomicExch(&d_stop, 1);
    return false;
  }
  if (a.timeout_ns == 0 || now - s.start < a.timeout_ns) return true;
  dstop(a, tb, step, tile, what, peer, chan, now);
  return false;
}

// A single 16-byte LL line {d0, flag, d1, flag} at l, stored at once.
__device__ __forceinline__ void ll_line_put(uint4 *l, uint32_t d0, uint32_t d1, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(l), "r"(d0), "r"(flag), "r"(d1), "r"(flag)
               : "memory");
}
// Loads the line at l: its data words into d, its flag copies into f.
__device__ __forceinline__ void ll_line_get(const uint4 *l, uint2 &d, uint2 &f) {
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(d.x), "=r"(f.x), "=r"(d.y), "=r"(f.y) : "l"(l));
}

// LL: unit u of a chunk of `units` units is two 16-byte lines, {8 data
// bytes as two words, the flag after each}: its first half at line u, its
// second at line units + u, so that a warp's stores (and polls) of one
// half cover consecutive lines, 512 bytes an instruction (two lines per
// thread side by side made every instruction touch 32 separate 16-byte
// pieces: measured at about 100 GB/s of lines out of a GPU).  A single
// store writes a line, so a reader that sees the flag twice in it has its
// data.  A landing is inside the window: its units fit 32 bits.
__device__ __forceinline__ void ll_put(char *p, uint32_t u, uint32_t units, const uint4 &v, uint32_t flag) {
  ll_line_put((uint4 *)p + u, v.x, v.y, flag);
  ll_line_put((uint4 *)p + units + u, v.z, v.w, flag);
}
// Loads unit u's two lines: the data into v, the four flag copies into f.
__device__ __forceinline__ void ll_lines(const char *p, uint32_t u, uint32_t units, uint4 &v, uint4 &f) {
  uint2 d0, d1, f0, f1;
  ll_line_get((const uint4 *)p + u, d0, f0);
  ll_line_get((const uint4 *)p + units + u, d1, f1);
  v = make_uint4(d0.x, d0.y, d1.x, d1.y);
  f = make_uint4(f0.x, f0.y, f1.x, f1.y);
}
__device__ __forceinline__ bool ll_there(const uint4 &f, uint32_t flag) {
  return f.x == flag && f.y == flag && f.z == flag && f.w == flag;
}

#endif
