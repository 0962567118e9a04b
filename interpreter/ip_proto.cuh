// ip_proto.cuh -- how the interpreter's communicating blocks move data,
// device side: waits with abort and timeout, the element loops of every
// opcode in Simple, the LL and LL128 protocols, and fused receive chains.
// ip_exec.cuh's block walks its steps with them.
#ifndef IP_PROTO_CUH
#define IP_PROTO_CUH

#include "ip_gpu.h"
#include "ip_compute.cuh"
#include "ip_mem.cuh"
#include "ip_reduce.cuh"

// ---- spinning with abort and timeout ------------------------------------

struct spin {
  uint64_t start;
  uint32_t n;
};

// Per block: stop (every thread leaves at the next barrier or wait).  Only
// a failing wait or step writes it, and a thread that reads it right after
// a barrier may see a write made after that barrier by a thread that has
// already failed (compute-sanitizer racecheck reports this): it then
// leaves one step early, which is what the others do at the next barrier,
// and a thread that has left holds no barrier.  A race-free form (each
// thread's result ORed by __syncthreads_or) measured 2% slower at 16 MiB.
// And ip_next_poll: when the host's abort flag may next be read.  That flag is in host
// memory: every read crosses PCIe, and reads from many spinning threads
// of many blocks on every GPU queue up behind one another until a single
// one takes hundreds of microseconds (measured: stalls of 200-600 us a
// call under CUDA graphs when each waiting thread read it every 256
// spins).  So a block reads it at most once per IP_ABORT_POLL_NS.
__shared__ int ip_stop;
__shared__ uint64_t ip_next_poll;
#define IP_ABORT_POLL_NS 100000

// Stops the call: records why (the first block of the GPU to stop owns
// the record, a device-memory claim: atomics on host-mapped memory are not
// supported everywhere; the flag goes last, after a fence, so the host
// never sees half a record), stops this block and raises the abort flag
// for everybody.  Inlined into its callers: called out of line from
// spin_more it cost the interpreter kernel 32 bytes more spill stores.
static __device__ __forceinline__ void stop_call(const ip_gargs &a, int step, int64_t tile, int what, int peer,
                                                 int depid, uint64_t now) {
  if (atomicCAS((unsigned long long *)a.claim, 0ull, 1ull) == 0ull && *(volatile int32_t *)&a.err->flag == 0) {
    const int comm = a.ntbs * a.lanes, b = (int)blockIdx.x;   // a compute block: its tb's entry
    const ip_gtb &tb = a.tbs[b < comm ? b : comm + (b - comm) / (a.cwidth > 0 ? a.cwidth : 1)];
    volatile ip_gerr *e = a.err;
    e->rank = a.rank;
    e->tb = tb.irtb;               // the tile says which lane
    e->step = step;
    e->tile = tile;
    e->what = what;
    e->peer = peer;
    e->chan = tb.chan;
    e->depid = depid >= 0 ? a.tbs[depid].irtb : depid;
    e->when = now;
    __threadfence_system();
    e->flag = 1;
    __threadfence_system();
  }
  atomicExch(&ip_stop, 1);
  *a.abort = 1;
  __threadfence_system();
}

// Called in a wait loop by a waiting thread.  Returns false when the wait
// must end: the block stops, another block or the host aborted, or this
// wait timed out (then it records why and raises the abort flag for
// everybody).
static __device__ bool spin_more(const ip_gargs &a, spin &s, int step, int64_t tile, int what, int peer,
                          int depid) {
  if (++s.n & 1023) return true;
  if (atomicAdd(&ip_stop, 0)) return false;   // atomics: other threads may be setting it
  uint64_t now = globaltimer();
  if (s.start == 0) s.start = now;
  /* One thread of the block reads the host's abort word per poll period:
   * the one whose CAS moves the deadline (shared-memory atomics, rare:
   * every 1024th spin). */
  unsigned long long *np = (unsigned long long *)&ip_next_poll;
  unsigned long long due = atomicAdd(np, 0ull);
  if (now >= due && atomicCAS(np, due, now + IP_ABORT_POLL_NS) == due) {
    if (*a.abort) {
      atomicExch(&ip_stop, 1);
      return false;
    }
  }
  if (a.timeout_ns == 0) return true;
  /* A block waiting on another block of its own GPU gives the blocks
   * that wait on peers time to report first: they name the cause. */
  uint64_t limit = what == IP_WAIT_DEP ? a.timeout_ns + a.timeout_ns / 2 : a.timeout_ns;
  if (now - s.start < limit) return true;
  stop_call(a, step, tile, what, peer, depid, now);
  return false;
}

// Whether a direct call (ip_gargs.direct) meets the other ranks at its
// start and end (direct_start, direct_end): a call of one rank has none to
// meet, and its stream's order alone orders it with the calls before and
// after (on an H200 the two meetings cost a one-rank GEMM 2-4 us: a call
// into code not yet fetched, a barrier, a system-scope fence).
__device__ __forceinline__ bool direct_meets(const ip_gargs &a) { return a.direct && a.dnranks > 1; }

// The start of a direct call (ip_gargs.direct), by thread 0 of each
// compute block before it stores anything: it tells every other rank that
// this rank's call has started (rank q's dflag[q][n + 2 + rank]), then
// waits until every other rank's has.  A rank's kernel starts only once
// the work queued before it on its stream is done, so no value is stored
// into an output that earlier work on its owner's stream may still read.
// The call's number: the calls this rank finished, plus one (the last
// block of the previous call counted it before that kernel ended).  For
// an eager call (dkey: on registered windows, or through the windows'
// scratch) the call's descriptor goes to every peer before the start flag
// (whose release carries it; without one the flag is a plain store, as
// the block has stored nothing a peer reads), and a peer whose descriptor differs stops
// the call before anything reaches its output (IP_WAIT_BUFS).  false when
// a wait gave up (BATON_TIMEOUT, abort) or a descriptor differed: the
// block stores nothing.
static __device__ __noinline__ bool direct_start(const ip_gargs &a) {
  const int n = a.dnranks;
  uint64_t *mine = a.dflag[a.rank];
  const uint64_t call = *(volatile uint64_t *)&mine[n] + 1, desc = call << 32 | a.dkey;
  for (int q = 0; q < n; q++) {
    if (q == a.rank) continue;
    if (a.dkey) *(volatile uint64_t *)&a.dflag[q][2 * n + 2 + a.rank] = desc;
    st_signal_sys(&a.dflag[q][n + 2 + a.rank], call, !a.dkey);   // bare but for the descriptor
  }
  ip_stop = 0;
  ip_next_poll = 0;
  for (int q = 0; q < n; q++) {
    if (q == a.rank) continue;
    spin sp = {};
    while (ld_acquire_sys(&mine[n + 2 + q]) < call)
      if (!spin_more(a, sp, -1, 0, IP_WAIT_RECV, q, -1)) return false;
    if (a.dkey && *(volatile uint64_t *)&mine[2 * n + 2 + q] != desc) {
      stop_call(a, -1, 0, IP_WAIT_BUFS, q, -1, globaltimer());
      return false;
    }
  }
  return true;
}

// The end of a direct call (ip_gargs.direct), by thread 0 of each
// compute block after a barrier that follows its stores (so that its
// count releases them): the block counts itself done (an acquire and
// release at system scope); the last of the ncb blocks then tells every
// other rank that this call's values are in its output (a release at
// system scope, cumulative over every count it acquired) and waits until
// every other rank has said the same to it.  A
// wait that gives up (BATON_TIMEOUT, abort) leaves the call unfinished;
// the host reports it.
static __device__ __noinline__ void direct_end(const ip_gargs &a, int ncb) {
  const int n = a.dnranks;
  uint64_t *mine = a.dflag[a.rank];
  // The count releases this block's stores and, for the last block,
  // acquires every other block's, which its release below then carries.
  if (atom_add_acq_rel_sys(&mine[n + 1], 1) != (uint64_t)(ncb - 1)) return;
  mine[n + 1] = 0;   // every block of this call has counted: the next call starts over
  const uint64_t call = mine[n] + 1;
  mine[n] = call;
  for (int q = 0; q < n; q++)
    if (q != a.rank) st_release_sys(&a.dflag[q][a.rank], call);
  ip_stop = 0;
  ip_next_poll = 0;
  for (int q = 0; q < n; q++) {
    if (q == a.rank) continue;
    spin sp = {};
    while (ld_acquire_sys(&mine[q]) < call)
      if (!spin_more(a, sp, -1, 0, IP_WAIT_RECV, q, -1)) return;
  }
}

// ---- element loops ------------------------------------------------------

// One element V at p when `avail` bytes are valid there, else zero.  Piece
// lengths and valid lengths are whole elements, so an element is either
// all valid or not at all.
template <typename V>
__device__ __forceinline__ V load_elem(const char *p, int64_t avail) {
  return avail >= (int64_t)sizeof(V) ? *(const V *)p : ip_from_bits<V>(0);
}

// Element-wise a (op) b over a unit V: one element, or a uint4 of packed
// elements (ip_apply_u4).
template <int DT, int OP, typename V>
__device__ __forceinline__ V apply_unit(const V &a, const V &b) {
  if constexpr (sizeof(V) == 16) return ip_apply_u4<DT, OP>(a, b);
  else return ip_apply<OP>(a, b);
}

// What one step does to one chunk piece (bytes throughout):
//   v = src (zero past srcvalid) | msg | msg (op) src;   REDUCE: v = src (op) cur
//   dst[..dstvalid) = v;  out[..len) = v
struct piece {
  const char *src; int64_t srcvalid;
  const char *msg;
  const char *cur;               // REDUCE: the dst chunk as second operand
  char *dst; int64_t dstvalid;
  char *out;
  int64_t len;
};

// Bytes [from, len) of a piece, one element V per thread at a time: the
// tail the 16-byte loop leaves, or all of a piece with unaligned pointers.
template <typename V, int DT, int OP, bool RED>
__device__ void run_piece(const piece &p, int64_t from) {
  int64_t units = p.len / (int64_t)sizeof(V);
  for (int64_t u = from / (int64_t)sizeof(V) + threadIdx.x; u < units; u += blockDim.x) {
    int64_t off = u * (int64_t)sizeof(V);
    V v;
    if (p.src) v = load_elem<V>(p.src + off, p.srcvalid - off);
    if (p.msg) {
      V m = *(const V *)(p.msg + off);
      if constexpr (RED) v = p.src ? apply_unit<DT, OP>(m, v) : m;
      else v = m;
    }
    if constexpr (RED) {
      if (p.cur) v = apply_unit<DT, OP>(v, load_elem<V>(p.cur + off, p.dstvalid - off));
    }
    if (p.dst && off < p.dstvalid) *(V *)(p.dst + off) = v;
    if (p.out) *(V *)(p.out + off) = v;
  }
}

// The first `full` 16-byte units of a piece whose pointers are all
// 16-byte aligned and whose src/dst are valid that far: every thread
// loads U units before it stores any, so that U * blockDim.x loads are in
// flight (a single SM needs that many to come near NVLink's bandwidth),
// and the last group, short, is guarded rather than left to a loop of one
// unit at a time (which paid a round trip per unit: small pieces were
// latency-bound).
template <int DT, int OP, bool RED, int U>
__device__ __forceinline__ void run_full(const piece &p, int64_t full) {
  // The second operand: the message, or (REDUCE, which receives nothing)
  // the destination's old value; one array holds either.
  const bool has_cur = RED && p.cur;
  const uint4 *src = (const uint4 *)p.src, *oth = (const uint4 *)(has_cur ? p.cur : p.msg);
  uint4 *dst = (uint4 *)p.dst, *out = (uint4 *)p.out;
  const int64_t n = blockDim.x;
  for (int64_t u = threadIdx.x; u < full; u += U * n) {
    uint4 v[U], m[U];
#pragma unroll
    for (int k = 0; k < U; k++) {
      const bool in = u + k * n < full;
      if (in && src) v[k] = src[u + k * n];
      if (in && oth) m[k] = oth[u + k * n];
    }
#pragma unroll
    for (int k = 0; k < U; k++) {
      if (u + k * n < full) {
        if (has_cur) v[k] = apply_unit<DT, OP>(v[k], m[k]);
        else if (oth) v[k] = (RED && src) ? apply_unit<DT, OP>(m[k], v[k]) : m[k];
        if (dst) dst[u + k * n] = v[k];
        if (out) out[u + k * n] = v[k];
      }
    }
  }
}

__device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// 16-byte units of p that the fast loop may take: all of those below the
// end of every bound (len, srcvalid, dstvalid), or -1 when some pointer
// is not 16-byte aligned.
__device__ __forceinline__ int64_t full_units(const piece &p) {
  if (!aligned16(p.src) || !aligned16(p.dst) || !aligned16(p.msg) || !aligned16(p.out) || !aligned16(p.cur))
    return -1;
  int64_t b = p.len;
  if (p.src && p.srcvalid < b) b = p.srcvalid;
  if ((p.dst || p.cur) && p.dstvalid < b) b = p.dstvalid;
  return b / 16;
}

// Moves a piece with no reduction: unrolled 16-byte units where every
// pointer allows, the element loop for the rest.
__device__ __forceinline__ void move_piece(const piece *pp, int esize) {
  const piece &p = *pp;
  int64_t full = full_units(p), from = 0;
  if (full >= 0) {
    run_full<IP_U8, 0, false, 4>(p, full);
    from = full * 16;
    if (from >= p.len) return;
  }
  switch (esize) {
  case 1: run_piece<uint8_t, IP_U8, 0, false>(p, from); break;
  case 2: run_piece<uint16_t, IP_U8, 0, false>(p, from); break;
  case 4: run_piece<uint32_t, IP_U8, 0, false>(p, from); break;
  default: run_piece<uint64_t, IP_U8, 0, false>(p, from); break;
  }
}

// Reduces a piece with the kernel's primitive (AVG reduces as SUM).
template <int DT, int OP>
__device__ __forceinline__ void reduce_piece(const piece *pp) {
  const piece &p = *pp;
  typedef typename ip_dev<DT>::type T;
  int64_t full = full_units(p), from = 0;
  if (full >= 0) {
    run_full<DT, OP, true, 4>(p, full);
    from = full * 16;
  }
  if (from < p.len) run_piece<T, DT, OP, true>(p, from);
}

// ---- LL protocol ----------------------------------------------------------
//
// A message is a run of 16-byte lines {data lo, flag, data hi, flag}: 8
// bytes of payload each, written by one 16-byte store whose two 8-byte
// halves land atomically.  The flag is the message's sequence number on
// the connection (low 32 bits of its count + 1), so a receiving thread
// knows its line has arrived by the line alone: no head word, no fence,
// no block barrier between a thread's receive and its forward.  Slots are
// still freed through the tail word, as in Simple.

// 8 bytes at p, element by element where p is not 8-byte aligned or fewer
// than 8 bytes are valid (zero beyond `avail`).
template <int ES>
__device__ __forceinline__ uint64_t load8(const char *p, int64_t avail) {
  if (avail >= 8 && ((uintptr_t)p & 7) == 0) return *(const uint64_t *)p;
  uint64_t w = 0;
#pragma unroll
  for (int k = 0; k < 8; k += ES) {
    if (k >= avail) break;
    uint64_t e = ES == 1 ? *(const uint8_t *)(p + k) : ES == 2 ? *(const uint16_t *)(p + k)
               : ES == 4 ? *(const uint32_t *)(p + k) : *(const uint64_t *)(p + k);
    w |= e << (8 * k);
  }
  return w;
}
template <int ES>
__device__ __forceinline__ void store8(char *p, uint64_t w, int64_t avail) {
  if (avail >= 8 && ((uintptr_t)p & 7) == 0) { *(uint64_t *)p = w; return; }
#pragma unroll
  for (int k = 0; k < 8; k += ES) {
    if (k >= avail) break;
    uint64_t e = w >> (8 * k);
    if (ES == 1) *(uint8_t *)(p + k) = (uint8_t)e;
    else if (ES == 2) *(uint16_t *)(p + k) = (uint16_t)e;
    else if (ES == 4) *(uint32_t *)(p + k) = (uint32_t)e;
    else *(uint64_t *)(p + k) = e;
  }
}

__device__ __forceinline__ void ll_send(uint4 *line, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"((uint32_t)v), "r"(flag),
               "r"((uint32_t)(v >> 32)), "r"(flag) : "memory");
}

// The rest of a step on the 8-byte word at byte `off` of piece p, once its
// source word v (0 without p.src) and, with p.msg, the received word m are
// in hand: combine them, fold in the destination (REDUCE), store it.
// Returns the word to send on.  LL and LL128 share it.
template <int DT, int OP>
__device__ __forceinline__ uint64_t finish_word(const piece &p, bool red, int64_t off, uint64_t v, uint64_t m) {
  typedef typename ip_dev<DT>::type T;
  constexpr int ES = sizeof(T);
  if (p.msg) v = (red && p.src) ? ip_apply_word<OP, T>(m, v) : m;
  if (red && p.cur) v = ip_apply_word<OP, T>(v, load8<ES>(p.cur + off, p.dstvalid - off));
  if (p.dst) store8<ES>(p.dst + off, v, p.dstvalid - off);
  return v;
}

// One piece in LL: p.msg and p.out point at lines (one per 8 bytes of
// p.len).  Every thread takes its own 8-byte units, LL_UNROLL at a time
// (units u, u + blockDim.x, ...): their source words and lines are all
// loaded before any is used, so a thread waits for its group of lines once,
// not once per line.  Returns false when a receive gave up.
#define LL_UNROLL 2
template <int DT, int OP>
__device__ __forceinline__ bool ll_piece(const ip_gargs &a, const piece &p, bool red, uint32_t rflag,
                                         uint32_t sflag, int step, int64_t tile, int peer) {
  typedef typename ip_dev<DT>::type T;
  constexpr int ES = sizeof(T);
  const int64_t units = (p.len + 7) / 8, n = blockDim.x;
  spin sp = {0, 0};
  for (int64_t u0 = threadIdx.x; u0 < units; u0 += LL_UNROLL * n) {
    uint64_t v[LL_UNROLL], m[LL_UNROLL];
#pragma unroll
    for (int k = 0; k < LL_UNROLL; k++) {
      const int64_t u = u0 + k * n;
      v[k] = m[k] = 0;
      if (p.src && u < units) v[k] = load8<ES>(p.src + u * 8, p.srcvalid - u * 8);
    }
    if (p.msg) {
      unsigned need = 0;   // bit k: line k is still awaited
#pragma unroll
      for (int k = 0; k < LL_UNROLL; k++)
        if (u0 + k * n < units) need |= 1u << k;
      for (;;) {
        uint32_t lo[LL_UNROLL], f1[LL_UNROLL], hi[LL_UNROLL], f2[LL_UNROLL];
#pragma unroll
        for (int k = 0; k < LL_UNROLL; k++)
          if (need >> k & 1)
            asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(lo[k]), "=r"(f1[k]), "=r"(hi[k]), "=r"(f2[k])
                         : "l"((const uint4 *)p.msg + u0 + k * n) : "memory");
#pragma unroll
        for (int k = 0; k < LL_UNROLL; k++)
          if ((need >> k & 1) && f1[k] == rflag && f2[k] == rflag) {
            m[k] = (uint64_t)hi[k] << 32 | lo[k];
            need &= ~(1u << k);
          }
        if (!need) break;
        if (!spin_more(a, sp, step, tile, IP_WAIT_RECV, peer, -1)) return false;
      }
    }
#pragma unroll
    for (int k = 0; k < LL_UNROLL; k++) {
      const int64_t u = u0 + k * n;
      if (u < units) {
        const uint64_t w = finish_word<DT, OP>(p, red, u * 8, v[k], m[k]);
        if (p.out) ll_send((uint4 *)p.out + u, w, sflag);
      }
    }
  }
  return true;
}

// ---- LL128 protocol -------------------------------------------------------
//
// A message is a run of 128-byte lines, 120 bytes of data and an 8-byte
// flag (the message's sequence number + 1) in the last word.  Eight
// threads of a warp move one line with one 16-byte access each, in one
// instruction, so the line travels and is read whole (NVLink delivers a
// warp's 128-byte store as one write, the property NCCL's LL128 rests
// on); thread 7 of the eight holds 8 data bytes and the flag.  A warp
// re-reads its four lines until every flag is there, then reads them once
// more: a load that meets the write on its way may return the new flag
// beside old data, and once the flag is there the whole line has landed
// (NCCL's LL128 reads its lines again so too).
//   Direct puts store a line whose parts loaded unevenly (an element
// loop at a region's partial end or an unaligned region) in two steps,
// flag part last (slot_out in ip_gpu_direct.cu: under compute-sanitizer
// one store let a reader take old data there).  These lines do not: done
// here, with the same vote, it cost the LL128 receive chain 1.3-4.5% at
// every size, aligned ones too (2 ranks sharing an H200), and these
// stores have not failed under memcheck.

template <int DT, int OP>
__device__ __forceinline__ bool ll128_piece(const ip_gargs &a, const piece &p, bool red, uint64_t rflag,
                                            uint64_t sflag, int step, int64_t tile, int peer) {
  typedef typename ip_dev<DT>::type T;
  constexpr int ES = sizeof(T);
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31, part = lane & 7;
  const int64_t lines = (p.len + 119) / 120, warps = blockDim.x >> 5;
  spin sp = {0, 0};
  // The loop is the same for every thread of a warp (the votes need all 32).
  for (int64_t l0 = (int64_t)(threadIdx.x >> 5) * 4; l0 < lines; l0 += warps * 4) {
    const int64_t l = l0 + (lane >> 3);
    const bool live = l < lines;
    const int64_t off = l * 120 + 16 * part;    // this thread's first data byte in the piece
    uint64_t v0 = 0, v1 = 0, m0 = 0, m1 = 0;
    if (live && p.src) {
      v0 = load8<ES>(p.src + off, p.srcvalid - off);
      if (part < 7) v1 = load8<ES>(p.src + off + 8, p.srcvalid - off - 8);
    }
    if (p.msg) {
      const uint64_t *w = (const uint64_t *)(p.msg + l * 128) + 2 * part;
      for (;;) {
        if (live) ld_volatile_v2(w, &m0, &m1);
        int there = !live || part != 7 || m1 == rflag;
        if (__all_sync(full, there)) break;
        int give_up = 0;
        if (lane == 0) give_up = !spin_more(a, sp, step, tile, IP_WAIT_RECV, peer, -1);
        if (__shfl_sync(full, give_up, 0)) return false;
      }
      if (live) ld_volatile_v2(w, &m0, &m1);   // the lines once more, now whole (see above)
    }
    if (live) {
      v0 = finish_word<DT, OP>(p, red, off, v0, m0);
      if (part < 7) v1 = finish_word<DT, OP>(p, red, off + 8, v1, m1);   // part 7's m1 is the flag
    }
    __syncwarp();   // a line's eight parts leave in one instruction: the warp meets after its branches
    if (live && p.out) st_volatile_v2((uint64_t *)(p.out + l * 128) + 2 * part, v0, part == 7 ? sflag : v1);
  }
  return true;
}

// ---- fused receive chains (LL, LL128) --------------------------------------
//
// Steps s..s+n-1 of a block, each a receive-reduce-copy reading what the
// one before wrote (rt_chain_fuse), run as one: per 8-byte word, the first
// step's src, every message polled at once, the reductions in registers in
// program order, each dst written unless the next step overwrites it in
// place.  What a chain of n steps costs is then one poll and one barrier,
// not n of each plus a store and a reload per link.

struct chain {                          // in shared memory: registers stay free
  const char *src; int64_t srcvalid;
  int64_t len;                          // bytes of the piece (every step's is the same)
  const char *msg[IP_GPU_FUSE];         // each step's message (lines)
  char *dst[IP_GPU_FUSE];               // NULL: the next step overwrites it in place
  int64_t dstvalid[IP_GPU_FUSE];
  uint64_t flag[IP_GPU_FUSE];           // each message's flag
  int peer[IP_GPU_FUSE];
  int n;
  char *out; uint64_t sflag;            // a send of src first (its lines, their flag), or NULL
};

// The sender of the first message still awaited (for a timeout's report).
__device__ __forceinline__ int chain_peer(const chain &c, unsigned need_msgs) {
  return need_msgs ? c.peer[__ffs(need_msgs) - 1] : -1;
}

// One 8-byte word per thread at a time: the lines of every message are
// loaded before any is checked, so a round costs one round trip.
template <int DT, int OP>
__device__ __forceinline__ bool ll_chain(const ip_gargs &a, const chain &c, int step, int64_t tile) {
  typedef typename ip_dev<DT>::type T;
  constexpr int ES = sizeof(T);
  const int64_t units = (c.len + 7) / 8;
  const int n = c.n;
  spin sp = {0, 0};
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    const uint64_t v = load8<ES>(c.src + u * 8, c.srcvalid - u * 8);
    if (c.out) ll_send((uint4 *)c.out + u, v, (uint32_t)c.sflag);
    uint64_t m[IP_GPU_FUSE];
    unsigned need = (1u << n) - 1;   // bit k: message k's line is still awaited
    while (need) {
      uint4 q[IP_GPU_FUSE];
#pragma unroll
      for (int k = 0; k < IP_GPU_FUSE; k++)
        if (need >> k & 1)
          asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(q[k].x), "=r"(q[k].y), "=r"(q[k].z), "=r"(q[k].w)
                       : "l"((const uint4 *)c.msg[k] + u) : "memory");
#pragma unroll
      for (int k = 0; k < IP_GPU_FUSE; k++) {
        const uint32_t f = (uint32_t)c.flag[k];
        if ((need >> k & 1) && q[k].y == f && q[k].w == f) {
          m[k] = (uint64_t)q[k].z << 32 | q[k].x;
          need &= ~(1u << k);
        }
      }
      if (need && !spin_more(a, sp, step, tile, IP_WAIT_RECV, chain_peer(c, need), -1)) return false;
    }
    uint64_t w = v;
#pragma unroll
    for (int k = 0; k < IP_GPU_FUSE; k++)
      if (k < n) {
        w = ip_apply_word<OP, T>(m[k], w);
        char *d = c.dst[k];
        if (d) store8<ES>(d + u * 8, w, c.dstvalid[k] - u * 8);
      }
  }
  return true;
}

// LL128: a warp's lines of every message, LL128_CHAIN_UNROLL groups of
// four, are loaded in one round; a message whose flags the whole warp has
// seen in every group is not polled again, and once all have been seen
// every message's lines are loaded once more, whole (ll128_piece).  The
// round trips, not the bytes, bound a chain's reduction: the groups keep
// more lines in flight per warp.
#define LL128_CHAIN_UNROLL 2
template <int DT, int OP>
__device__ __forceinline__ bool ll128_chain(const ip_gargs &a, const chain &c, int step, int64_t tile) {
  typedef typename ip_dev<DT>::type T;
  constexpr int ES = sizeof(T), U = LL128_CHAIN_UNROLL;
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31, part = lane & 7;
  const int64_t lines = (c.len + 119) / 120, warps = blockDim.x >> 5;
  const int n = c.n;
  spin sp = {0, 0};
  for (int64_t l0 = (int64_t)(threadIdx.x >> 5) * 4 * U; l0 < lines; l0 += warps * 4 * U) {
    uint64_t v0[U], v1[U], m0[IP_GPU_FUSE][U], m1[IP_GPU_FUSE][U];
#pragma unroll
    for (int g = 0; g < U; g++) {
      const int64_t l = l0 + 4 * g + (lane >> 3), off = l * 120 + 16 * part;
      v0[g] = v1[g] = 0;
      if (l < lines) {
        v0[g] = load8<ES>(c.src + off, c.srcvalid - off);
        if (part < 7) v1[g] = load8<ES>(c.src + off + 8, c.srcvalid - off - 8);
      }
      __syncwarp();   // as ll128_piece: the line's parts in one store
      if (l < lines && c.out)
        st_volatile_v2((uint64_t *)(c.out + l * 128) + 2 * part, v0[g], part == 7 ? c.sflag : v1[g]);
    }
    // Warp-uniform: messages whose flags are not all seen yet, and those
    // this round loads (every one once more after the last flag).
    const unsigned all = (1u << n) - 1;
    unsigned need = all, load = all;
    for (;;) {
#pragma unroll
      for (int k = 0; k < IP_GPU_FUSE; k++)
#pragma unroll
        for (int g = 0; g < U; g++) {
          const int64_t l = l0 + 4 * g + (lane >> 3);
          if ((load >> k & 1) && l < lines)
            ld_volatile_v2((const uint64_t *)(c.msg[k] + l * 128) + 2 * part, &m0[k][g], &m1[k][g]);
        }
      if (!need) break;   // that round read every line whole
#pragma unroll
      for (int k = 0; k < IP_GPU_FUSE; k++) {
        if (!(need >> k & 1)) continue;
        bool there = true;
#pragma unroll
        for (int g = 0; g < U; g++)
          there &= l0 + 4 * g + (lane >> 3) >= lines || part != 7 || m1[k][g] == c.flag[k];
        if (__all_sync(full, there)) need &= ~(1u << k);
      }
      load = need ? need : all;
      if (!need) continue;
      int give_up = 0;
      if (lane == 0) give_up = !spin_more(a, sp, step, tile, IP_WAIT_RECV, chain_peer(c, need), -1);
      if (__shfl_sync(full, give_up, 0)) return false;
    }
#pragma unroll
    for (int g = 0; g < U; g++) {
      const int64_t l = l0 + 4 * g + (lane >> 3), off = l * 120 + 16 * part;
      if (l >= lines) continue;
#pragma unroll
      for (int k = 0; k < IP_GPU_FUSE; k++)
        if (k < n) {
          v0[g] = ip_apply_word<OP, T>(m0[k][g], v0[g]);
          if (part < 7) v1[g] = ip_apply_word<OP, T>(m1[k][g], v1[g]);   // part 7's m1 is the flag
          char *d = c.dst[k];
          if (d) {
            store8<ES>(d + off, v0[g], c.dstvalid[k] - off);
            if (part < 7) store8<ES>(d + off + 8, v1[g], c.dstvalid[k] - off - 8);
          }
        }
    }
  }
  return true;
}

// Elements of tile t of a chunk (the last tile may be shorter).
__device__ __forceinline__ int64_t tile_len(const ip_gargs &a, int64_t t) {
  int64_t len = a.geom.cap - t * a.tile;
  return len > a.tile ? a.tile : len;
}

// A chunk's bytes of tile t in buffer b from chunk c: where, and how many
// are valid (0..len).
__device__ __forceinline__ char *tile_at(const ip_gargs &a, int b, int64_t c, int64_t t, int64_t len,
                                         int64_t *valid) {
  int64_t v = ir_geom_len(&a.geom, b, c) - t * a.tile;
  *valid = (v < 0 ? 0 : v > len ? len : v) * a.esize;
  return a.buf[b] + ir_geom_at(&a.geom, b, c, t * a.tile) * a.esize;
}

// Receive connection `conn` of tb and the sender on it (the tb's own, or
// the conn-th extra one of a folded chain).
__device__ __forceinline__ const ip_gconn &recv_conn(const ip_gtb &tb, int conn) {
  return conn ? tb.xrecv[conn - 1] : tb.recv;
}
__device__ __forceinline__ int recv_peer(const ip_gtb &tb, int conn) { return conn ? tb.xpeer[conn - 1] : tb.recv_peer; }

// The message step st receives in this lane's i-th tile on its connection
// (counts are computed, never updated per step).
__device__ __forceinline__ uint64_t msg_no(const ip_gtb &tb, const ip_gstep &st, const uint64_t *rcvd0, int64_t i) {
  return rcvd0[st.conn] + (uint64_t)i * tb.nrecv[st.conn] + st.rseq;
}

// Runs the fused chain steps[s .. s+n) for tile t, this lane's i-th: its
// links, after a send of the first link's src when steps[s] is that send
// (message `sent` of the block's send connection).  Thread 0 describes
// each chunk's piece in shared memory; a barrier publishes it.  False when
// a receive gave up.
template <int DT, int OP>
__device__ __forceinline__ bool exec_chain(const ip_gargs &a, const ip_gtb &tb, const ip_gstep *steps, int s, int n,
                                        int64_t t, int64_t i, const uint64_t *rcvd0, uint64_t sent) {
  __shared__ chain c;
  const int64_t stride = ir_geom_wire(a.proto, a.msg_stride), len = tile_len(a, t);
  const int cnt = steps[s].cnt, h = steps[s].op == IR_OP_SEND;   // h: the send before the links
  for (int j = 0; j < cnt; j++) {
    if (j) __syncthreads();   // every thread is done with the last piece's description
    if (threadIdx.x == 0) {
      const ip_gstep &first = steps[s + h];
      c.n = n - h;
      c.len = len * a.esize;
      c.src = tile_at(a, first.srcbuf, ir_chunk_at(first.srcoff, first.srcrun, first.srcstride, j), t, len, &c.srcvalid);
      c.out = h ? tb.send.fifo + (sent % a.nslots) * a.slot_bytes + j * stride : NULL;
      c.sflag = sent + 1;
      for (int k = 0; k < n - h; k++) {
        const ip_gstep &st = steps[s + h + k];
        const uint64_t r = msg_no(tb, st, rcvd0, i);
        c.msg[k] = recv_conn(tb, st.conn).fifo + (r % a.nslots) * a.slot_bytes + j * stride;
        c.flag[k] = r + 1;
        c.peer[k] = recv_peer(tb, st.conn);
        c.dst[k] = tile_at(a, st.dstbuf, ir_chunk_at(st.dstoff, st.dstrun, st.dststride, j), t, len, &c.dstvalid[k]);
        if (k + 1 < n - h && steps[s + h + k + 1].dstbuf == st.dstbuf && steps[s + h + k + 1].dstoff == st.dstoff)
          c.dst[k] = NULL;
      }
    }
    __syncthreads();
    if (a.proto == IR_PROTO_LL) {
      if (!ll_chain<DT, OP>(a, c, s, t)) return false;
    } else if (!ll128_chain<DT, OP>(a, c, s, t)) {
      return false;
    }
  }
  return true;
}

#endif
