/* test_part.c -- interpreter/ip_part.h on the CPU: a unit's bytes that are
 * not one aligned 16-byte access.  A chunk's tail (8-byte aligned, 1..15
 * bytes, in the pieces of its length's bits) and an unaligned unit (at
 * every start within 16 bytes, every length 1..16, in words or bytes):
 * the bytes read are the bytes there, zero past the length, and a store
 * writes exactly its bytes and nothing beside them. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ip_part.h"
#include "tap.h"

static _Alignas(16) char buf[64];
static char want[64];
static unsigned char src[16];

/* Loads n bytes at buf + 16 + off (tail or words), then stores src's first
 * n there over guard bytes; nonzero when either is wrong. */
static int one(int off, int n, int tail) {
  for (int i = 0; i < 64; i++) buf[i] = (char)(i * 7 + 3);
  uint64_t lo, hi;
  unsigned char got[16], exp[16] = {0};
  if (tail) ip_part_tail_load(buf + 16 + off, n, &lo, &hi);
  else ip_part_words_load(buf + 16 + off, n, &lo, &hi);
  memcpy(got, &lo, 8);
  memcpy(got + 8, &hi, 8);
  memcpy(exp, buf + 16 + off, (size_t)n);
  int bad = memcmp(got, exp, 16) != 0;
  memset(buf, 0xee, sizeof buf);
  memcpy(want, buf, sizeof want);
  memcpy(want + 16 + off, src, (size_t)n);
  memcpy(&lo, src, 8);
  memcpy(&hi, src + 8, 8);
  if (tail) ip_part_tail_store(buf + 16 + off, n, lo, hi);
  else ip_part_words_store(buf + 16 + off, n, lo, hi);
  return bad || memcmp(buf, want, sizeof buf) != 0;
}

int main(void) {
  for (int i = 0; i < 16; i++) src[i] = (unsigned char)(0x11 * (i + 1) ^ 0x5a);
  int bad = 0;
  for (int off = 0; off < 16; off += 8)
    for (int n = 1; n <= 15; n++)
      if (one(off, n, 1) && !bad++) printf("# tail at +%d, %d bytes: wrong\n", off, n);
  ok(bad == 0, "a tail of each length 1..15 at an 8-byte boundary loads and stores its bytes exactly (%d wrong)", bad);
  bad = 0;
  for (int off = 0; off < 16; off++)
    for (int n = 1; n <= 16; n++)
      if (one(off, n, 0) && !bad++) printf("# unit at +%d, %d bytes: wrong\n", off, n);
  ok(bad == 0, "a unit at each of 16 starts, each of 16 lengths, loads and stores its bytes exactly, word by word "
     "or byte by byte (%d wrong)", bad);
  /* The pieces place right across the two halves: 4 bytes at 6 span lo and hi. */
  uint64_t lo = 0, hi = 0;
  ip_part_place(&lo, &hi, 0xaabbccddu, 6, 4);
  ok(lo == 0xccdd000000000000ull && hi == 0xaabbu, "a piece across the halves lands in both (%016llx %016llx)",
     (unsigned long long)lo, (unsigned long long)hi);
  ok((ip_part_bytes(0x8877665544332211ull, 0x00ffeeddccbbaa99ull, 6) & 0xffffffffull) == 0xaa998877ull,
     "bytes 6.. of a value: its lo's last two, then hi's first");
  return tap_done();
}
