/* fz_boot_root.c -- fuzzes the bootstrap root's registration engine with what up to eight hostile connections send. */
#define _GNU_SOURCE
#include "fz_conn.h"
#include "rt_bootstrap_int.h"

#include <stdint.h>
#include <stdlib.h>

/* Input: a connection-count byte (1 + b % 8), then the connections' bytes:
 * each but the last preceded by its length (2 bytes, big-endian).  The
 * root's magic is FZ_MAGIC (the seeds' registrations carry it). */
enum { MAX_CONNS = 8 };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 1 || n > (1 << 16)) return 0;
  int nconns = 1 + d[0] % MAX_CONNS;
  d++;
  n--;
  root *r = bs_root_engine_new(FZ_MAGIC);
  if (!r) return 0;
  int far[MAX_CONNS];
  for (int i = 0; i < nconns; i++) {
    const uint8_t *piece;
    size_t len = fz_next_piece(&d, &n, i == nconns - 1, &piece);
    int mine;
    far[i] = fz_fed_pair(piece, len, &mine);   /* kept open: the root's replies go there */
    if (far[i] >= 0 && bs_root_engine_add(r, mine)) {
      close(far[i]);
      close(mine);
      far[i] = -1;
    }
  }
  for (int round = 0; round < 4 && !bs_root_engine_pump(r); round++) {}
  bs_root_engine_free(r);
  for (int i = 0; i < nconns; i++)
    if (far[i] >= 0) close(far[i]);
  return 0;
}
