/* ip_part.h -- the bytes of a 16-byte unit that cannot move as one aligned
 * access: a chunk's tail (8-byte aligned, 1..15 bytes) in the pieces of
 * its length's bits (8, 4, 2, 1 bytes), loaded independently, every load
 * issued before any is used; an unaligned unit in 4-byte words or bytes.
 * The direct executor's loads and stores of such units (ip_gpu_direct.cu);
 * on the host, the same code over plain memory (tests/test_part.c).
 *
 * A tail walked a 4-byte word or a byte at a time, each load used before
 * the next, held the warp owning a chunk's last line, and with it the
 * whole call: the LL128 one-shot AllReduce of 2 ranks sharing one H200
 * took up to 0.7 us longer at an odd f32 count than at an even one (three
 * words for a tail of 12 bytes), and 1.6-2.1 us longer at an odd bf16
 * count (10 and 14 single bytes); with the pieces, as long as at the even
 * count. */
#ifndef IP_PART_H
#define IP_PART_H

#include <stdint.h>
#include <string.h>

#include "ir.h"

/* The w-byte piece at p (aligned to w), zero-extended: past L1 on the GPU
 * (ld.global.cg, as every load of the direct executor). */
IR_HD uint64_t ip_part_get(const char *p, int w) {
#if defined(__CUDA_ARCH__)
  if (w == 8) return __ldcg((const unsigned long long *)p);
  if (w == 4) return __ldcg((const unsigned *)p);
  if (w == 2) return __ldcg((const unsigned short *)p);
  return __ldcg((const unsigned char *)p);
#else
  uint64_t x = 0;
  memcpy(&x, p, (size_t)w);   /* little-endian, as the GPU */
  return x;
#endif
}

/* Stores the low w bytes of x at p (aligned to w). */
IR_HD void ip_part_put(char *p, uint64_t x, int w) {
#if defined(__CUDA_ARCH__)
  if (w == 8) *(uint64_t *)p = x;
  else if (w == 4) *(uint32_t *)p = (uint32_t)x;
  else if (w == 2) *(uint16_t *)p = (uint16_t)x;
  else *p = (char)x;
#else
  memcpy(p, &x, (size_t)w);
#endif
}

/* Bytes k.. of the 16-byte value lo:hi, from the low end of a word. */
IR_HD uint64_t ip_part_bytes(uint64_t lo, uint64_t hi, int k) {
  if (k == 0) return lo;
  if (k < 8) return lo >> (8 * k) | hi << (64 - 8 * k);
  return hi >> (8 * (k - 8));
}

/* Places the w-byte piece x at byte k (k + w <= 16) of *lo:*hi. */
IR_HD void ip_part_place(uint64_t *lo, uint64_t *hi, uint64_t x, int k, int w) {
  if (k >= 8) {
    *hi |= x << (8 * (k - 8));
  } else {
    *lo |= x << (8 * k);
    if (k + w > 8) *hi |= x >> (64 - 8 * k);   /* k > 0 here */
  }
}

/* The n (1..15) bytes at q, 8-byte aligned, into *lo:*hi (zero past n):
 * a chunk's tail.  Its pieces are n's bits (8, 4, 2, 1 bytes, each at the
 * sum of the larger ones: aligned), loaded independently, every load
 * issued before any is used. */
IR_HD void ip_part_tail_load(const char *q, int n, uint64_t *lo, uint64_t *hi) {
  const uint64_t x8 = n & 8 ? ip_part_get(q, 8) : 0;
  const uint64_t x4 = n & 4 ? ip_part_get(q + (n & 8), 4) : 0;
  const uint64_t x2 = n & 2 ? ip_part_get(q + (n & 12), 2) : 0;
  const uint64_t x1 = n & 1 ? ip_part_get(q + (n & 14), 1) : 0;
  uint64_t l = x8, h = 0;
  ip_part_place(&l, &h, x4, n & 8, 4);
  ip_part_place(&l, &h, x2, n & 12, 2);
  ip_part_place(&l, &h, x1, n & 14, 1);
  *lo = l;
  *hi = h;
}

/* Stores the first n (1..15) bytes of lo:hi at q, 8-byte aligned, in the
 * pieces of ip_part_tail_load. */
IR_HD void ip_part_tail_store(char *q, int n, uint64_t lo, uint64_t hi) {
  if (n & 8) ip_part_put(q, lo, 8);
  if (n & 4) ip_part_put(q + (n & 8), ip_part_bytes(lo, hi, n & 8), 4);
  if (n & 2) ip_part_put(q + (n & 12), ip_part_bytes(lo, hi, n & 12), 2);
  if (n & 1) ip_part_put(q + (n & 14), ip_part_bytes(lo, hi, n & 14), 1);
}

/* The n (1..16) bytes at q, unaligned (an unaligned region), into
 * *lo:*hi (zero past n): in 4-byte words where q and n allow, else bytes,
 * in a loop, not unrolled: the direct kernel inlines it at every load of
 * every operation, where unrolled forms were a sixth of its code.  Rare
 * enough to go a word at a time. */
IR_HD void ip_part_words_load(const char *q, int n, uint64_t *lo, uint64_t *hi) {
  const int w = (((uintptr_t)q | (unsigned)n) & 3) == 0 ? 4 : 1;
  uint64_t l = 0, h = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
  for (int k = 0; k < n; k += w) ip_part_place(&l, &h, ip_part_get(q + k, w), k, w);
  *lo = l;
  *hi = h;
}

/* Stores the first n (1..16) bytes of lo:hi at q, unaligned, in the words
 * of ip_part_words_load. */
IR_HD void ip_part_words_store(char *q, int n, uint64_t lo, uint64_t hi) {
  const int w = (((uintptr_t)q | (unsigned)n) & 3) == 0 ? 4 : 1;
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
  for (int k = 0; k < n; k += w) ip_part_put(q + k, ip_part_bytes(lo, hi, k), w);
}

#endif
