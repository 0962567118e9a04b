// ip_mem.cuh -- the memory operations GPUs signal each other with: acquire
// loads and release stores at GPU or system scope, and the global timer.
// Shared by the interpreter and tests/gpu_p2p_probe.cu (which measures
// what these cost on the hardware).
#ifndef IP_MEM_CUH
#define IP_MEM_CUH

#include <stdint.h>

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A relaxed store at system scope: no fence before it.  For a word that
// only says "done reading": the values read were already used.
__device__ __forceinline__ void st_relaxed_sys(uint64_t *p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A signal into a peer's flag: a release at system scope, so that what the
// signalling block stored before it (after a barrier) is visible to
// whoever acquires the flag; a relaxed store where the block has stored
// nothing of this call (`bare`): what the kernels before it stored is in
// this GPU's memory already, where the peer's loads find it, and the
// release's system-scope fence cost 1.1-2.3 us a call (all 128 blocks of
// a 2 MiB two-shot fencing at once, 2 x H200).
__device__ __forceinline__ void st_signal_sys(uint64_t *p, uint64_t v, bool bare) {
  if (bare) st_relaxed_sys(p, v);
  else st_release_sys(p, v);
}
// Adds v to *p as an acquire and a release at system scope, and returns
// the old value: what this thread stored or saw before (a barrier's
// stores included: the release is cumulative) is visible to whoever
// acquires the sum, and what those who added before it released is
// visible to this thread after.  One atomic where a fence and a relaxed
// add took a sequentially consistent fence (MEMBAR.SC.SYS).
__device__ __forceinline__ uint64_t atom_add_acq_rel_sys(uint64_t *p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Programmatic dependent launch (sm_90 on; a no-op where the kernel was
// not launched so, and on older GPUs).  pdl_wait: until the kernel before
// this one on its stream has ended and its stores are visible -- nothing
// that kernel writes (inputs, call counts) may be read before it.
// pdl_release: this block lets the next kernel on the stream, if it was
// launched so, start its blocks now (they wait in their pdl_wait).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 16-byte volatile accesses (two 8-byte words), as LL128 moves its lines:
// a warp's eight threads cover one 128-byte line in one instruction.
__device__ __forceinline__ void ld_volatile_v2(const uint64_t *p, uint64_t *a, uint64_t *b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}
__device__ __forceinline__ void st_volatile_v2(uint64_t *p, uint64_t a, uint64_t b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

#endif
