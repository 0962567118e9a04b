/* rt_hash.h -- FNV-1a, the one hash the runtime uses where every rank or
 * process must compute the same value: the loaded algorithms'
 * fingerprint, a direct call's descriptor, a host's or a GPU's identity,
 * a trace file's name. */
#ifndef RT_HASH_H
#define RT_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a's start, and one step of it over a word. */
#define RT_HASH_START 1469598103934665603ull
static inline uint64_t rt_hash(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

/* FNV-1a over n bytes at p, from h. */
static inline uint64_t rt_hash_bytes(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = rt_hash(h, ((const unsigned char *)p)[i]);
  return h;
}

#endif
