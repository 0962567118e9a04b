// ip_gpu_direct.cu -- the direct executor's kernel (ip_direct.h): every
// block walks its thread block's executor operations -- runs of data steps
// over 16-byte units kept in registers, groups of signals, groups of waits
// -- straight on the windows of every rank; no FIFO, no credit, no plan
// read from memory (the operations are the kernel's parameters).  Like the
// interpreter, one instance per (type, operator), so the reduction is
// inlined, and per protocol, so each holds only its own data paths.  Also
// the host's launch, load and occupancy calls.
#include "ip_direct.h"

#include <cuda_runtime.h>

#include "ip_mem.cuh"
#include "ip_part.h"
#include "ip_spin.cuh"
#include "ip_reduce.cuh"
#include "rt_cudart.h"
#include "rt_log.h"

// ---- 16-byte units ---------------------------------------------------------

__device__ __forceinline__ bool aligned16(const char *p) { return ((uintptr_t)p & 15) == 0; }

// Nonzero where n bytes at q are not one or two aligned 8-byte words:
// q or n not a multiple of 8 (ip_part.h's pieces or words then).
__device__ __forceinline__ unsigned part_grain(const char *q, int n) { return (unsigned)(((uintptr_t)q | (unsigned)n) & 7); }

// The valid bytes of a unit that is not one whole aligned 16-byte access
// (a region's tail, an LL128 slot's 8 bytes, or an unaligned region),
// zero past valid: 8-byte words in line (an LL128 line's last slot is
// one); a tail at an 8-byte boundary in ip_part.h's pieces; an unaligned
// unit in its words or bytes.
static __device__ __forceinline__ uint4 load_part(const char *p, int64_t off, int64_t valid) {
  const char *q = p + off;
  const int n = valid - off < 16 ? (int)(valid - off) : 16;
  uint64_t lo, hi = 0;
  if (part_grain(q, n) == 0) {   // n is 8 or 16
    lo = __ldcg((const unsigned long long *)q);
    if (n > 8) hi = __ldcg((const unsigned long long *)(q + 8));
  } else if (((uintptr_t)q & 7) == 0) {   // a tail
    ip_part_tail_load(q, n, &lo, &hi);
  } else {
    ip_part_words_load(q, n, &lo, &hi);
  }
  return make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
}
static __device__ __forceinline__ void store_part(char *p, int64_t off, int64_t valid, uint4 v) {
  char *q = p + off;
  const int n = valid - off < 16 ? (int)(valid - off) : 16;
  const uint64_t lo = (uint64_t)v.y << 32 | v.x, hi = (uint64_t)v.w << 32 | v.z;
  if (part_grain(q, n) == 0) {   // n is 8 or 16
    *(uint64_t *)q = lo;
    if (n > 8) *(uint64_t *)(q + 8) = hi;
    return;
  }
  if (((uintptr_t)q & 7) == 0) ip_part_tail_store(q, n, lo, hi);   // a tail
  else ip_part_words_store(q, n, lo, hi);
}

// The 16 bytes at p + off of a region whose first `valid` bytes count (a
// unit, off a multiple of 16; or an LL128 slot, off a multiple of 8): one
// 16-byte load where they are whole and aligned, else load_part.  Past L1
// (ld.global.cg): what a peer stored, here or there, must not be read from
// a line a former call left in this SM's L1, and nothing here is read
// twice.
__device__ __forceinline__ uint4 load_unit(const char *p, int64_t off, int64_t valid) {
  if (off + 16 <= valid && aligned16(p + off)) return __ldcg((const uint4 *)(p + off));
  if (off >= valid) return make_uint4(0, 0, 0, 0);
  return load_part(p, off, valid);
}

// Stores the valid part of the 16 bytes v at p + off (as load_unit).
__device__ __forceinline__ void store_unit(char *p, int64_t off, int64_t valid, const uint4 &v) {
  if (off + 16 <= valid && aligned16(p + off)) *(uint4 *)(p + off) = v;
  else if (off < valid) store_part(p, off, valid, v);
}

// ---- the plan ---------------------------------------------------------------

// This rank's plan of the program (ip_dtab), copied from device memory at
// the block's start: every operation, link and signal entry is then a
// shared-memory load away, where a lookup in the kernel's parameters
// would wait for the constant cache to fetch the line from L2, one lookup
// after another (the operation, then its link, then the link's buffer).
__shared__ uint4 d_tabw[IP_DTAB_UNITS];
__device__ __forceinline__ const ip_dtab &dtab() { return *reinterpret_cast<const ip_dtab *>(d_tabw); }

// ---- runs ---------------------------------------------------------------------

// A run's links for the chunk at hand, in shared memory: where each one's
// chunk starts and how many of its bytes count (landings: lines, whole).
__shared__ char *d_ptr[IP_DIRECT_MAX_LINKS];
__shared__ int64_t d_valid[IP_DIRECT_MAX_LINKS];

// Fills d_ptr[k] / d_valid[k] for chunk j of link k of run op (link_table:
// every link, a thread each).  Landings and an LL put's target start in
// their first half; the caller adds the call's half.
__device__ __forceinline__ void link_one(const ip_dargs &a, const ip_dop &op, int j, int k) {
  char *p;
  int64_t v;
  ip_dlink_at(&a, &dtab().links[op.first + k], j, &p, &v);
  d_ptr[k] = p;
  d_valid[k] = v;
}

__device__ __forceinline__ void link_table(const ip_dargs &a, const ip_dop &op, int j) {
  for (int k = threadIdx.x; k < op.n; k += blockDim.x) link_one(a, op, j, k);
}

// Whether op reads its links from the host's (ip_dargs.lean: a one-chunk
// operation) rather than from a table of its own.
__device__ __forceinline__ bool lean_op(const ip_dop &op) { return op.cnt == 1; }
// Where link k of op's chunk at hand starts, and its bytes that count.
__device__ __forceinline__ char *lk_ptr(const ip_dargs &a, const ip_dop &op, bool lean, int k) {
  return lean ? a.lean[op.first + k].ptr : d_ptr[k];
}
__device__ __forceinline__ int64_t lk_valid(const ip_dargs &a, const ip_dop &op, bool lean, int k) {
  return lean ? a.lean[op.first + k].valid : d_valid[k];
}
// Builds op's link table for chunk j, unless it reads the host's: every
// thread done with the last chunk's table first, every entry written
// before any is read.
__device__ __forceinline__ void chunk_links(const ip_dargs &a, const ip_dop &op, bool lean, int j) {
  if (lean) return;
  if (j) __syncthreads();
  link_table(a, op, j);
  __syncthreads();
}

// Polls unit u of the landing at p (a run's first value) until its lines
// carry `flag`; its data into v.  False when the wait gave up.
__device__ __forceinline__ bool poll_one(const ip_dargs &a, const ip_dop &op, const char *p, int64_t u, int64_t units,
                                         uint32_t flag, uint4 &v) {
  dspin sp = {0, 0};
  for (;;) {
    uint4 f;
    ll_lines(p, u, units, v, f);
    if (ll_there(f, flag)) return true;
    if (a.poll_ns) __nanosleep(a.poll_ns);
    if (!dspin_more(a, sp, op.tb, dtab().links[op.first].step, blockIdx.x % a.lanes, IP_WAIT_RECV, -1, 0)) return false;
  }
}

// Polls unit u of the landings among run op's reductions' operands (bit c
// of `want`: operand c) until their lines carry `flag`, every line of
// every landing loaded before any is checked; their data into v.  False
// when the wait gave up.
__device__ __forceinline__ bool poll_landings(const ip_dargs &a, const ip_dop &op, bool lean, unsigned want, uint4 *v,
                                              int pre, int64_t u, int64_t units, int64_t hoff, uint32_t flag) {
  dspin sp = {0, 0};
  for (;;) {
    uint4 f[IP_DIRECT_RUN_LOADS];
#pragma unroll
    for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)
      if (want >> c & 1) ll_lines(lk_ptr(a, op, lean, pre + c) + hoff, u, units, v[c], f[c]);
#pragma unroll
    for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)
      if ((want >> c & 1) && ll_there(f[c], flag)) want &= ~(1u << c);
    if (!want) return true;
    if (a.poll_ns) __nanosleep(a.poll_ns);
    const int c = __ffs(want) - 1;
    if (!dspin_more(a, sp, op.tb, dtab().links[op.first + pre + c].step, blockIdx.x % a.lanes, IP_WAIT_RECV, -1, 0)) return false;
  }
}

// Which of op's links are LL puts (bit k: link k; none but in an LL
// program), and which of its loads are landings (ip_dop.land), read from
// the plan once per operation: the compiler reads the plan again after
// every store otherwise (a store through a pointer may, for all it knows,
// write shared memory).
template <int PR>
__device__ __forceinline__ uint64_t ll_puts(const ip_dop &op) {
  return PR == IR_PROTO_LL ? op.puts : 0;
}
template <int PR>
__device__ __forceinline__ unsigned ll_landings(const ip_dop &op) {
  return PR == IR_PROTO_LL ? op.land : 0;
}

// Writes unit u's value v through link k of op: an LL put (bit k of
// `puts`, ll_puts) as its two lines with this call's flag, in the landing
// half `hoff` names; any other store as the unit's bytes.
template <int PR>
__device__ __forceinline__ void put_unit(const ip_dargs &a, const ip_dop &op, bool lean, int k, uint64_t puts,
                                         int64_t u, int64_t units, int64_t hoff, uint32_t flag, const uint4 &v) {
  if (PR == IR_PROTO_LL && (puts >> k & 1))
    ll_put(lk_ptr(a, op, lean, k) + hoff, u, units, v, flag);
  else
    store_unit(lk_ptr(a, op, lean, k), 16 * u, lk_valid(a, op, lean, k), v);
}

// Runs one run (ip_direct.h) for this block's units: per unit, its loads
// (the first link's source and every reduction's operand) at once, then
// its stores and reductions in program order, LL landings polled where
// they are first needed (after the first value's stores) until their
// flags say this call.  Loads precede the unit's stores: the host
// cuts runs where a store would feed a later load of the same run.  False
// when a wait gave up (the thread then skips its other units but keeps to
// the block's barriers).  has0: this thread's unit `me` of link 0 is
// loaded already, into v0 (the block's first operation: ip_dstart.first),
// and its first `early` puts stored (ip_dstart.put).  Which links are
// landings and puts comes from the plan's masks, read once per operation
// (ll_puts): a short call's time was mostly lookups in the plan, one
// waiting on the other.
template <int DT, int OP, int PR>
__device__ __forceinline__ bool run(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane, bool has0,
                                    const uint4 &v0, int early) {
  const int nc = op.ncomb, pre = op.npre;
  const int64_t cb = a.cb, units = (cb + 15) / 16;
  const int64_t nt = (int64_t)a.lanes * blockDim.x, me = (int64_t)lane * blockDim.x + threadIdx.x;
  const int64_t hoff = (seq & 1) ? a.half : 0;
  const uint32_t flag = (uint32_t)(seq + 1);
  const bool lean = lean_op(op);
  const uint64_t puts = ll_puts<PR>(op);
  const unsigned land = ll_landings<PR>(op);   // bit c: operand c is a landing, polled where it is first needed
  bool ok = true;
#pragma unroll 1
  for (int j = 0; j < op.cnt; j++) {
    chunk_links(a, op, lean, j);
#pragma unroll 1
    for (int64_t u = me; u < units; u += nt) {
      const int64_t off = 16 * u;
      uint4 v[IP_DIRECT_RUN_LOADS];
#pragma unroll
      for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)
        if (c <= nc && !(land >> c & 1)) {
          const int k = c == 0 ? 0 : pre + c;
          v[c] = c == 0 && has0 && u == me ? v0 : load_unit(lk_ptr(a, op, lean, k), off, lk_valid(a, op, lean, k));
        }
      // The first value's stores -- an LL one-shot's puts among them --
      // go out before this rank waits for its own landings: the peers'
      // puts wait for nothing either.
      if ((land & 1) && !poll_one(a, op, lk_ptr(a, op, lean, 0) + hoff, u, units, flag, v[0])) {
        ok = false;
        break;
      }
      uint4 w = v[0];
      for (int k = u == me ? early + 1 : 1; k <= pre; k++) put_unit<PR>(a, op, lean, k, puts, u, units, hoff, flag, w);
      if ((land & ~1u) && !poll_landings(a, op, lean, land & ~1u, v, pre, u, units, hoff, flag)) {
        ok = false;   // gave up: this thread does no more, but keeps to the block's barriers
        break;
      }
#pragma unroll
      for (int c = 1; c < IP_DIRECT_RUN_LOADS; c++)
        if (c <= nc) w = ip_apply_u4<DT, OP>(w, v[c]);
      for (int k = pre + nc + 1; k < op.n; k++)   // stores of the reduced value
        put_unit<PR>(a, op, lean, k, puts, u, units, hoff, flag, w);
    }
  }
  return ok;
}

// Runs a copies operation (ip_direct.h) for this block's units: per unit,
// every segment's load at once (but landings), then each segment's store
// in order, a landing polled first where its segment comes.  The host
// joined only segments whose loads read nothing an earlier segment
// stores.  False when a wait gave up (as run).  has0, v0: as run's, of
// segment 0's load; the masks as run's.
template <int PR>
__device__ __forceinline__ bool copies(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane, bool has0,
                                       const uint4 &v0) {
  const int64_t cb = a.cb, units = (cb + 15) / 16;
  const int64_t nt = (int64_t)a.lanes * blockDim.x, me = (int64_t)lane * blockDim.x + threadIdx.x;
  const int64_t hoff = (seq & 1) ? a.half : 0;
  const uint32_t flag = (uint32_t)(seq + 1);
  const bool lean = lean_op(op);
  const int nseg = op.nseg;
  const uint64_t puts = ll_puts<PR>(op);
  const unsigned land = ll_landings<PR>(op);   // bit c: segment c loads a landing (link 2c; its store: 2c + 1)
  bool ok = true;
#pragma unroll 1
  for (int j = 0; j < op.cnt; j++) {
    chunk_links(a, op, lean, j);
#pragma unroll 1
    for (int64_t u = me; u < units; u += nt) {
      const int64_t off = 16 * u;
      uint4 v[IP_DIRECT_COPY_SEGS];
#pragma unroll
      for (int c = 0; c < IP_DIRECT_COPY_SEGS; c++)
        if (c < nseg && !(land >> c & 1))
          v[c] = c == 0 && has0 && u == me ? v0
                                           : load_unit(lk_ptr(a, op, lean, 2 * c), off, lk_valid(a, op, lean, 2 * c));
      // In program order: a landing is polled where its segment comes, so
      // a put of an earlier segment is out before it (the peers' puts may
      // wait for nothing either; polling first deadlocked an LL AllToAll).
#pragma unroll
      for (int c = 0; c < IP_DIRECT_COPY_SEGS; c++) {
        if (c >= nseg) break;
        if ((land >> c & 1) && !poll_one(a, op, lk_ptr(a, op, lean, 2 * c) + hoff, u, units, flag, v[c])) {
          ok = false;   // gave up: this thread does no more, but keeps to the block's barriers
          break;
        }
        put_unit<PR>(a, op, lean, 2 * c + 1, puts, u, units, hoff, flag, v[c]);
      }
      if (!ok) break;
    }
  }
  return ok;
}

// ---- LL128 ------------------------------------------------------------------
//
// An LL128 program's landings are 128-byte lines: line l holds bytes 120 l
// .. 120 l + 119 of its chunk and, in its last word, the call's flag (seq
// + 1).  Eight threads of a warp move a line with one 16-byte access each,
// in one instruction, so that it travels and is read whole (the property
// the interpreter's LL128 rests on, ip_proto.cuh): slot `part` 0..6 holds
// 16 data bytes, part 7 holds 8 and the flag.  Every data operation of such
// a program walks slots, not units: warp w of a thread block's lanes takes
// lines 4w .. 4w + 3, then 4 (w + warps) .., on every rank alike, so that
// every link of an operation is read and written at the same bytes by the
// same thread.  The loops are the same for the 32 threads of a warp (the
// polls vote).

struct slot {
  int64_t l, off;   // its line, and its first data byte in the chunk
  int part, n;      // its place in the line, and its data bytes (16; 8 for part 7)
  bool live;        // l is one of the chunk's lines
  bool loop;        // a load of this round took ip_part.h's pieces (see slot_out)
};

// How many of a chunk's bytes count for slot s, where `valid` of them do:
// none past its own n.
__device__ __forceinline__ int64_t slot_valid(const slot &s, int64_t valid) {
  return valid < s.off + s.n ? valid : s.off + s.n;
}

// The slot's bytes of a chunk at p of which `valid` bytes count (zero past
// them).  Notes in s.loop whether they came through ip_part.h's pieces
// (a length or an address not a multiple of 8).
__device__ __forceinline__ uint4 slot_load(const char *p, slot &s, int64_t valid) {
  if (!s.live) return make_uint4(0, 0, 0, 0);
  const int64_t v = slot_valid(s, valid);
  if (s.off < v) s.loop |= part_grain(p + s.off, (int)(v - s.off)) != 0;   // v - s.off: 1..16
  return load_unit(p, s.off, v);
}

// Writes the slot's value x through link k of op: into a peer's landing
// (a put) as its part of the line with this call's flag, in the landing
// half `hoff` names; any other store as its bytes that count.  Every
// thread of the warp calls it: a line's eight parts must leave in one
// instruction, so the warp meets first (a part held back by a branch
// before would travel on its own, and a reader could see the flag with
// old data).  Meeting does not make the eight execute the store together,
// though: where a line's loads took paths of different lengths (s.loop:
// a part that is the chunk's partial end, or an unaligned chunk), the
// part that arrived last could store first.  Under compute-sanitizer's
// memcheck that happened (the flag part of a chunk's last line stored
// before its data parts, in 4 of 7 runs of the GPU suite), so such a line
// stores its data parts, meets again, then stores its flag part.
__device__ __forceinline__ void slot_out(const ip_dargs &a, const ip_dop &op, bool lean, int k, uint64_t puts,
                                         const slot &s, int64_t hoff, uint64_t flag, const uint4 &x) {
  if (puts >> k & 1) {
    const unsigned split = __ballot_sync(0xffffffffu, s.live && s.loop);   // bit t: thread t's part took the loop
    const bool mine = (split >> (threadIdx.x & 24)) & 0xffu;
    uint64_t *at = (uint64_t *)(lk_ptr(a, op, lean, k) + hoff + 128 * s.l) + 2 * s.part;
    const uint64_t lo = (uint64_t)x.y << 32 | x.x;
    if (s.live && !(mine && s.part == 7)) st_volatile_v2(at, lo, s.part == 7 ? flag : (uint64_t)x.w << 32 | x.z);
    if (split) {   // the same for the whole warp
      __syncwarp();
      if (s.live && mine && s.part == 7) st_volatile_v2(at, lo, flag);
    }
    return;
  }
  if (s.live) store_unit(lk_ptr(a, op, lean, k), s.off, slot_valid(s, lk_valid(a, op, lean, k)), x);
}

// Loads this thread's part of the line of each landing among `want`
// (bit c: the one at at[c], its half added) into v[c].
__device__ __forceinline__ void slot_lines(unsigned want, const char *const *at, uint4 *v, const slot &s) {
  __syncwarp();
#pragma unroll
  for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)
    if ((want >> c & 1) && s.live) {
      uint64_t x, y;
      ld_volatile_v2((const uint64_t *)(at[c] + 128 * s.l) + 2 * s.part, &x, &y);
      v[c] = make_uint4((uint32_t)x, (uint32_t)(x >> 32), (uint32_t)y, (uint32_t)(y >> 32));
    }
}

// Polls the lines of each landing among `want` until every live line of
// the warp holds `flag` in each, then loads them once more: their data
// into v[c].  A line is written whole, but a load that meets a write on
// its way may return the new flag beside old data; once the flag is
// there, the write has landed, and the second load reads it all (as
// NCCL's LL128 does; polling with one load per line, the GPU suite saw
// such a line on 2 x H200).  False, for the whole warp, when the wait gave
// up (step: for the error).  The warp meets before each round of loads,
// so that a line's eight parts are read in one instruction (see slot_out).
__device__ __forceinline__ bool slot_poll(const ip_dargs &a, const ip_dop &op, int step, unsigned want,
                                          const char *const *at, uint4 *v, const slot &s, uint64_t flag) {
  const unsigned full = 0xffffffffu, all = want;
  dspin sp = {0, 0};
  for (;;) {
    slot_lines(want, at, v, s);
#pragma unroll
    for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)   // want stays the same for the whole warp
      if ((want >> c & 1) &&
          __all_sync(full, !s.live || s.part != 7 || ((uint64_t)v[c].w << 32 | v[c].z) == flag))
        want &= ~(1u << c);
    if (!want) {
      slot_lines(all, at, v, s);
      return true;
    }
    if (a.poll_ns) __nanosleep(a.poll_ns);
    int give_up = 0;
    if ((threadIdx.x & 31) == 0) give_up = !dspin_more(a, sp, op.tb, step, blockIdx.x % a.lanes, IP_WAIT_RECV, -1, 0);
    if (__shfl_sync(full, give_up, 0)) return false;
  }
}

// This thread's slot of the warp's lines from l0.
__device__ __forceinline__ void slot_at(slot &s, int64_t l0, int64_t lines) {
  s.part = threadIdx.x & 7;
  s.n = s.part == 7 ? 8 : 16;
  s.l = l0 + ((threadIdx.x & 31) >> 3);
  s.live = s.l < lines;
  s.loop = false;
  s.off = 120 * s.l + 16 * s.part;
}

// The walk of one warp over a chunk's lines (run128, copies128): its
// first group, its stride, and the chunk's lines.
struct slot_walk {
  int64_t first, stride, lines;
};
__device__ __forceinline__ slot_walk walk_of(const ip_dargs &a, int lane) {
  const int64_t wpb = blockDim.x >> 5;
  return {4 * ((int64_t)lane * wpb + (threadIdx.x >> 5)), 4 * (int64_t)a.lanes * wpb, (a.cb + 119) / 120};
}

// run (above) for an LL128 program: per slot instead of per unit.  (A
// first pass putting every line before any poll, as a one-shot might
// want, measured slower on 2 x H200: 10.4 against 10.0 us at 1.5 MB; so
// did two groups of a warp's lines a round, both put before either is
// polled: 8.0 against 6.3 us at 512 KiB, 16.0 against 13.1 at 2 MiB.)
template <int DT, int OP>
__device__ __forceinline__ bool run128(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane) {
  const int nc = op.ncomb, pre = op.npre;
  const slot_walk wk = walk_of(a, lane);
  const int64_t hoff = (seq & 1) ? a.half : 0;
  const uint64_t flag = seq + 1;
  const bool lean = lean_op(op);
  const int step = dtab().links[op.first].step;
  const unsigned land = op.land;   // bit c: operand c is a landing, polled where it is first needed
  const uint64_t puts = op.puts;
  bool ok = true;
#pragma unroll 1
  for (int j = 0; j < op.cnt; j++) {
    chunk_links(a, op, lean, j);
    const char *at[IP_DIRECT_RUN_LOADS];
    int64_t valid[IP_DIRECT_RUN_LOADS];
#pragma unroll
    for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++) {
      const int k = c == 0 ? 0 : pre + c;
      at[c] = c <= nc ? lk_ptr(a, op, lean, k) + (land >> c & 1 ? hoff : 0) : nullptr;
      valid[c] = c <= nc ? lk_valid(a, op, lean, k) : 0;
    }
#pragma unroll 1
    for (int64_t l0 = wk.first; ok && l0 < wk.lines; l0 += wk.stride) {
      slot s;
      slot_at(s, l0, wk.lines);
      uint4 v[IP_DIRECT_RUN_LOADS];
#pragma unroll
      for (int c = 0; c < IP_DIRECT_RUN_LOADS; c++)
        if (c <= nc && !(land >> c & 1)) v[c] = slot_load(at[c], s, valid[c]);
      // As run: the first value's stores (puts among them) before this
      // rank waits for its own landings.
      if ((land & 1) && !(ok = slot_poll(a, op, step, 1u, at, v, s, flag))) break;
      uint4 x = v[0];
      for (int k = 1; k <= pre; k++) slot_out(a, op, lean, k, puts, s, hoff, flag, x);
      if ((land & ~1u) && !(ok = slot_poll(a, op, step, land & ~1u, at, v, s, flag))) break;
#pragma unroll
      for (int c = 1; c < IP_DIRECT_RUN_LOADS; c++)
        if (c <= nc) x = ip_apply_u4<DT, OP>(x, v[c]);   // part 7: its flag words reduced too, never stored
      for (int k = pre + nc + 1; k < op.n; k++) slot_out(a, op, lean, k, puts, s, hoff, flag, x);
    }
  }
  return ok;
}

// copies (above) for an LL128 program: per slot instead of per unit.
__device__ __forceinline__ bool copies128(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane) {
  const slot_walk wk = walk_of(a, lane);
  const int64_t hoff = (seq & 1) ? a.half : 0;
  const uint64_t flag = seq + 1;
  const bool lean = lean_op(op);
  const int nseg = op.nseg;
  const unsigned land = op.land;   // bit c: segment c loads a landing
  const uint64_t puts = op.puts;
  bool ok = true;
#pragma unroll 1
  for (int j = 0; j < op.cnt; j++) {
    chunk_links(a, op, lean, j);
#pragma unroll 1
    for (int64_t l0 = wk.first; ok && l0 < wk.lines; l0 += wk.stride) {
      slot s;
      slot_at(s, l0, wk.lines);
      uint4 v[IP_DIRECT_COPY_SEGS];
#pragma unroll
      for (int c = 0; c < IP_DIRECT_COPY_SEGS; c++)   // segment c: its load is link 2c, its store 2c + 1
        if (c < nseg && !(land >> c & 1)) v[c] = slot_load(lk_ptr(a, op, lean, 2 * c), s, lk_valid(a, op, lean, 2 * c));
#pragma unroll
      for (int c = 0; c < IP_DIRECT_COPY_SEGS; c++) {
        if (c >= nseg) break;
        if (land >> c & 1) {
          const char *at[1] = {lk_ptr(a, op, lean, 2 * c) + hoff};
          if (!(ok = slot_poll(a, op, dtab().links[op.first + 2 * c].step, 1u, at, &v[c], s, flag))) break;
        }
        slot_out(a, op, lean, 2 * c + 1, puts, s, hoff, flag, v[c]);
      }
    }
  }
  return ok;
}

// ---- signals and waits ------------------------------------------------------

// A group of signals: once every thread's earlier stores are done (the
// barrier that ends every operation, ip_direct_kernel), thread i signals
// signal i into its peer's flag (st_signal_sys).  `bare`: the block has
// stored nothing this call (the group opens its thread block, and no call
// descriptor went out): a plain store.
__device__ __forceinline__ void signals(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane, bool bare) {
  for (int i = threadIdx.x; i < op.n; i += blockDim.x) {
    const ip_dsync &s = dtab().syncs[op.first + i];
    st_signal_sys(a.flags[s.peer] + ip_direct_flag(lane, s.chan, a.rank, a.nranks), IP_DIRECT_SIGNAL(seq, s.at), bare);
  }
}

// A group of waits: thread i acquires wait i's flag until it holds the
// count the wait needs, then a barrier lets the whole block go on.  False
// when a wait gave up.
__device__ __forceinline__ bool waits(const ip_dargs &a, const ip_dop &op, uint64_t seq, int lane) {
  for (int i = threadIdx.x; i < op.n; i += blockDim.x) {
    const ip_dsync &s = dtab().syncs[op.first + i];
    const uint64_t *f = a.flags[a.rank] + ip_direct_flag(lane, s.chan, s.peer, a.nranks);
    const uint64_t need = IP_DIRECT_SIGNAL(seq, s.at);
    dspin sp = {0, 0};
    bool got = true;
    while (ld_acquire_sys(f) < need)
      if (!dspin_more(a, sp, op.tb, s.step, blockIdx.x % a.lanes, IP_WAIT_RECV, s.peer, s.chan)) {
        got = false;
        break;
      }
    // Registered windows: the peer's call must be this one (its slot,
    // stored before the signal just acquired).
    if (got && a.key &&
        *(volatile const uint64_t *)(a.flags[a.rank] + a.desc_at + IP_DIRECT_DESC_SLOT(s.peer, seq)) !=
            IP_DIRECT_DESC(seq, a.key))
      dstop(a, op.tb, s.step, blockIdx.x % a.lanes, IP_WAIT_BUFS, s.peer, s.chan, globaltimer());
  }
  __syncthreads();
  return !d_stop;   // set before the barrier by a thread that gave up
}

// ---- calls in which some ranks do not see each other begin -------------------

// The meeting of such a call (ip_dargs.unmet, .announce: off the root of
// a Broadcast on 4 ranks or more), in the grid's last block, which only
// counts the call otherwise (the host leaves it spare): thread q stores
// this rank's count + 1 into rank q's begun word for this rank (announce),
// then waits until this rank's word for rank q holds seq + 1 or more
// (unmet), so that the call ends only once every peer has begun it, as
// every other direct call does by its own signals and landings.  No rank
// then starts a call while a peer is two calls behind, still reading the
// landing half (or the descriptor slot) that call fills.  The kernel
// before has ended here (pdl_wait): nothing of it still reads a landing.
// A wait that gives up stops the call (IP_WAIT_START).  The working
// blocks run as in any other call, and the wait overlaps their work.  The
// block lets the next kernel's blocks start first, as a block that only
// counts does by ending at once: they wait for this kernel to end before
// they read anything (pdl_wait), so waiting here holds them no longer
// than the call itself.
static __device__ __noinline__ void meet(const ip_dargs &a, int b) {
  pdl_release();
  if (threadIdx.x == 0) {
    d_stop = 0;
    d_next_poll = 0;
  }
  __syncthreads();
  const uint64_t seq = *(volatile const uint64_t *)&a.seq[b];
  const int q = threadIdx.x;
  if (q < a.nranks && (a.announce >> q & 1))
    st_signal_sys(a.flags[q] + a.desc_at + IP_DIRECT_BEGUN_SLOT(a.nranks, a.rank), seq + 1, true);
  if (q < a.nranks && (a.unmet >> q & 1)) {
    const volatile uint64_t *f = a.flags[a.rank] + a.desc_at + IP_DIRECT_BEGUN_SLOT(a.nranks, q);
    dspin sp = {0, 0};
    while (*f <= seq)
      if (!dspin_more(a, sp, -1, -1, b, IP_WAIT_START, q, -1)) break;
  }
  __syncthreads();   // every thread has read the count before thread 0 raises it
}

// ---- the kernel --------------------------------------------------------------

// Block b is lane b % lanes of thread block b / lanes; blocks past the
// thread blocks' only count the call, so that every block's count stays
// the call's number (the last one also meets, in a call that needs it:
// meet).  EARLY (LL only): the instance that stores a block's
// early puts (ip_dstart.put), for calls that have some; the prologue's
// few instructions for them cost every other LL call 0.1-0.25 us when
// they were in the one instance (2 ranks sharing one H200: AllGather,
// AllToAll, Broadcast, ReduceScatter at 1 KiB-1 MiB).
template <int DT, int OP, int PR, bool EARLY>
__global__ void __launch_bounds__(IP_GPU_MAX_THREADS, 1) ip_direct_kernel(const __grid_constant__ ip_dargs a) {
  const int b = blockIdx.x, tb = b / a.lanes, lane = b % a.lanes;
  if (tb >= a.ntbs) {   // counts the call, waits for nothing else (a reduction, no load)
    pdl_wait();         // the kernel before counted its call
    if (b == a.grid - 1 && (a.announce | a.unmet)) meet(a, b);
    if (threadIdx.x == 0) atomicAdd((unsigned long long *)&a.seq[b], 1ull);
    return;
  }
  // The plan, written when the communicator was made, loads while the
  // kernel before this one may still run (a programmatic launch), and the
  // block meets then, once: the call count and the caller's data load only
  // after that kernel has ended, and each thread goes on with its own as
  // soon as it has them (a meeting after them took a short call 0.15 us).
  for (int i = threadIdx.x; i < IP_DTAB_UNITS; i += blockDim.x) d_tabw[i] = __ldg((const uint4 *)a.tab + i);
  if (threadIdx.x == 0) {
    d_stop = 0;
    d_next_poll = 0;
  }
  // The block's start (ip_dstart) into registers now too: parameters, but
  // looked up by block, each a constant-cache line that may have to come
  // from L2 (loaded after the wait, they took the one-shot AllReduce 0.15
  // us more at 8 B-32 KiB).  The empty statement keeps the loads here; it
  // names its operands as written, so they are not const.
  static_assert(IP_DIRECT_EARLY_PUTS == 3, "the prologue stores three early puts at most");
  const ip_dstart &st = a.start[tb];
  const char *first = st.first;
  int64_t first_valid = st.valid;
  int early = EARLY ? st.puts : 0;
  char *put0 = EARLY ? st.put[0] : nullptr, *put1 = EARLY ? st.put[1] : nullptr, *put2 = EARLY ? st.put[2] : nullptr;
  asm volatile("" : "+l"(first), "+l"(first_valid), "+r"(early), "+l"(put0), "+l"(put1), "+l"(put2));
  __syncthreads();
  pdl_wait();
  int tn = 0;   // thread 0: events traced (after the wait: the kernel before may trace into the same buffer)
  if (threadIdx.x == 0) ip_trace_ev(a.trace, tn, IP_EV_ENTER, 0, 0);
  // Every load the block's start needs at once: the call count and this
  // thread's unit of the first operation's first value.
  const uint64_t seq = a.seq[b];   // every thread: a broadcast load, used only where flags are
  uint4 v0 = make_uint4(0, 0, 0, 0);
  if (first) v0 = load_unit(first, 16 * ((int64_t)lane * blockDim.x + threadIdx.x), first_valid);
  // An LL program's first puts of that value, right away, where its first
  // run reduces (ip_dstart.put; `early` is 0 where first is NULL).
  if (EARLY && early) {
    const int64_t units = (a.cb + 15) / 16, me = (int64_t)lane * blockDim.x + threadIdx.x;
    const int64_t hoff = (seq & 1) ? a.half : 0;
    if (me < units) {
      const uint32_t flag = (uint32_t)(seq + 1);
      ll_put(put0 + hoff, (uint32_t)me, (uint32_t)units, v0, flag);
      if (early > 1) ll_put(put1 + hoff, (uint32_t)me, (uint32_t)units, v0, flag);
      if (early > 2) ll_put(put2 + hoff, (uint32_t)me, (uint32_t)units, v0, flag);
    }
  }
  if (a.release == IP_RELEASE_START) pdl_release();
  // Registered windows: this call's descriptor into every peer's slot for
  // this rank, before any signal (whose release after a barrier carries it).
  if (a.key) {
    if (threadIdx.x < a.nranks && threadIdx.x != a.rank)
      *(volatile uint64_t *)(a.flags[threadIdx.x] + a.desc_at + IP_DIRECT_DESC_SLOT(a.rank, seq)) =
          IP_DIRECT_DESC(seq, a.key);
    __syncthreads();
  }
  if (threadIdx.x == 0) ip_trace_ev(a.trace, tn, IP_EV_READY, 0, 0);
  const int o0 = dtab().tb_first[tb], end = dtab().tb_first[tb + 1];
  // The block's closing meeting, its signals and waits after its last
  // data operation (IP_RELEASE_MEET: the next kernel's blocks may start
  // while it runs; they then wait a crossing or two on SMs, not the whole
  // call).  None: at the end.
  int meet = end;
  if (a.release == IP_RELEASE_MEET)
    while (meet > o0 && (dtab().ops[meet - 1].kind == IP_D_SIGS || dtab().ops[meet - 1].kind == IP_D_WAITS)) meet--;
  for (int o = o0; o < end; o++) {
    // A copy: its fields stay in registers, where the compiler would read
    // them from the plan again after every store.
    const ip_dop op = dtab().ops[o];
    if (o == meet) pdl_release();   // meet < end only under IP_RELEASE_MEET
    const bool has0 = o == o0 && first;
    bool ok = true;
    if (op.kind == IP_D_RUN)
      ok = PR == IR_PROTO_LL128 ? run128<DT, OP>(a, op, seq, lane)
                                : run<DT, OP, PR>(a, op, seq, lane, has0, v0, EARLY && has0 ? early : 0);
    else if (op.kind == IP_D_COPIES)
      ok = PR == IR_PROTO_LL128 ? copies128(a, op, seq, lane) : copies<PR>(a, op, seq, lane, has0, v0);
    else if (op.kind == IP_D_SIGS) signals(a, op, seq, lane, o == o0 && !a.key);
    else ok = waits(a, op, seq, lane);
    if (threadIdx.x == 0 && a.trace) {
      const bool sync = op.kind == IP_D_SIGS || op.kind == IP_D_WAITS;
      ip_trace_ev(a.trace, tn, op.kind == IP_D_WAITS ? IP_EV_WAITED : IP_EV_DONE,
                  sync ? dtab().syncs[op.first].step : dtab().links[op.first].step, o);
    }
    // Every thread leaves together (after the last operation there is
    // nothing to leave).
    if (o + 1 < end && __syncthreads_or(!ok || d_stop)) break;
  }
  // The next call's count: no thread reads this one's after the first
  // barrier, and the next kernel reads it only after every block of this
  // one has ended (its pdl_wait, or the stream's order).
  if (a.release != IP_RELEASE_START && meet == end) pdl_release();
  if (threadIdx.x == 0) {
    a.seq[b] = seq + 1;
    ip_trace_ev(a.trace, tn, IP_EV_EXIT, 0, 0);
  }
}

// The kernel of each (type, operator, protocol): the operator inlined as
// the interpreter's (ip_gpu_type.cu), the protocol so that each kernel
// holds only its own data paths.  One kernel for every protocol was
// 150 KB of code, and a short call's few instructions lay far apart in it.
// The last of each row is LL's with early puts (EARLY).
enum { K_LL_EARLY = IR_PROTO_COUNT, K_COUNT };
#define DIRECT_PR(DT, OP)                                                                                          \
  {(const void *)ip_direct_kernel<DT, OP, IR_PROTO_SIMPLE, false>,                                                 \
   (const void *)ip_direct_kernel<DT, OP, IR_PROTO_LL, false>,                                                     \
   (const void *)ip_direct_kernel<DT, OP, IR_PROTO_LL128, false>, (const void *)ip_direct_kernel<DT, OP, IR_PROTO_LL, true>}
#define DIRECT_OPS(DT) {DIRECT_PR(DT, IP_OP_SUM), DIRECT_PR(DT, IP_OP_PROD), DIRECT_PR(DT, IP_OP_MAX), DIRECT_PR(DT, IP_OP_MIN)}
static const void *const kernels[IP_DTYPE_COUNT][4][K_COUNT] = {
#define X(id, name, ctype, size, kind) DIRECT_OPS(IP_##id),
#include "ip_dtype.def"
#undef X
};

// The instance call a runs on: its protocol's, or LL's with early puts
// where a thread block of the call has some.
static const void *kernel_of(const ip_dargs *a) {
  int k = a->proto >= 0 && a->proto < IR_PROTO_COUNT ? a->proto : IR_PROTO_SIMPLE;
  if (k == IR_PROTO_LL && ip_dargs_early(a)) k = K_LL_EARLY;
  return kernels[a->dtype >= 0 && a->dtype < IP_DTYPE_COUNT ? a->dtype : 0][ip_kernel_slot(a->op)][k];
}

extern "C" bt_result ip_direct_launch(const ip_dargs *a, int nthreads, int pdl, void *stream) {
  ip_dargs args = *a;
  void *params[] = {&args};
  return rt_cuda_launch(kernel_of(a), (unsigned)a->grid, (unsigned)nthreads, 0, stream, pdl, params, RT_SUB_EXEC,
                        "direct executor launch");
}

extern "C" bt_result ip_direct_pdl_ok(int *ok) {
  int dev, major;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), RT_SUB_EXEC,
                "compute capability"));
  *ok = major >= 9;
  return BT_OK;
}

extern "C" bt_result ip_direct_load(void) {
  cudaFuncAttributes at;
  for (int d = 0; d < IP_DTYPE_COUNT; d++)
    for (int o = 0; o < 4; o++)
      for (int p = 0; p < K_COUNT; p++)
        CHECK(rt_cuda(cudaFuncGetAttributes(&at, kernels[d][o][p]), RT_SUB_EXEC, "loading the direct executor"));
  return BT_OK;
}

extern "C" bt_result ip_direct_max_blocks(int nthreads, int *max_blocks) {
  int dev, sms, per, least = -1;
  CHECK(rt_cuda(cudaGetDevice(&dev), RT_SUB_EXEC, "cudaGetDevice"));
  CHECK(rt_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), RT_SUB_EXEC, "SM count"));
  for (int d = 0; d < IP_DTYPE_COUNT; d++)
    for (int o = 0; o < 4; o++)
      for (int p = 0; p < K_COUNT; p++) {
        CHECK(rt_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernels[d][o][p], nthreads, 0),
                      RT_SUB_EXEC, "occupancy"));
        if (least < 0 || per < least) least = per;
      }
  *max_blocks = sms * least;
  return BT_OK;
}
