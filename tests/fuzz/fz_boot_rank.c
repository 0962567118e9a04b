/* fz_boot_rank.c -- fuzzes a rank's message engine with what hostile peers send on up to four connections. */
#define _GNU_SOURCE
#include "fz_conn.h"
#include "rt_bootstrap_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input: nranks byte (2 + b % 7 ranks; this engine is rank 0), a
 * connection-count byte (1 + b % 4), a posted receive (peer byte: b %
 * nranks, 0 for none; tag byte: b % 8 as a user tag, b >= 0x80 the
 * allgather #0 tag; length byte: 4 * b), then the connections' bytes:
 * each but the last preceded by its length (2 bytes, big-endian).  The
 * job's magic is FZ_MAGIC (the seeds' hellos carry it). */
enum { MAX_CONNS = 4 };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  setenv("BATON_BOOTSTRAP_MAX_MSG_MB", "1", 1);
  setenv("BATON_BOOTSTRAP_MAX_QUEUED_MB", "2", 1);
  return 0;
}

/* Hands len bytes to a new connection of bs; returns the far end (kept
 * open to take the engine's answers), or -1. */
static int feed(rt_bootstrap *bs, const uint8_t *d, size_t len) {
  int mine, far = fz_fed_pair(d, len, &mine);
  if (far >= 0 && bs_engine_add(bs, mine)) { close(far); close(mine); return -1; }
  return far;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 5 || n > (1 << 16)) return 0;
  int nranks = 2 + d[0] % 7, nconns = 1 + d[1] % MAX_CONNS;
  int peer = d[2] % nranks;
  uint32_t tag = d[3] >= 0x80 ? 0x81000000u : d[3] % 8u;
  size_t rlen = 4u * d[4];
  d += 5;
  n -= 5;
  rt_bootstrap *bs = bs_engine_new(0, nranks, FZ_MAGIC);
  if (!bs) return 0;
  int far[MAX_CONNS];
  for (int i = 0; i < nconns; i++) {
    const uint8_t *piece;
    size_t len = fz_next_piece(&d, &n, i == nconns - 1, &piece);
    far[i] = feed(bs, piece, len);
  }
  unsigned char *buf = malloc(rlen ? rlen : 1);
  int done = 0, open = 1;
  bt_result r = BT_OK;
  /* Every byte is in the sockets and each ends: a few rounds drain them. */
  for (int round = 0; round < 8 && open && !r; round++)
    r = bs_engine_pump(bs, peer ? peer : -1, tag, buf, rlen, &done, &open);
  if (bs_engine_held(bs) > (2u << 20)) abort();          /* BATON_BOOTSTRAP_MAX_QUEUED_MB */
  /* Claim what was queued: each peer's first few user tags. */
  for (int p = 1; p < nranks && !r; p++)
    for (uint32_t t = 0; t < 3 && !r; t++) {
      int got = 0;
      r = bs_engine_pump(bs, p, t, buf, rlen, &got, &open);
    }
  free(buf);
  rt_bootstrap_free(bs);
  for (int i = 0; i < nconns; i++)
    if (far[i] >= 0) close(far[i]);
  return 0;
}
