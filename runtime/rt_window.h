/* rt_window.h -- a communicator's window: device memory of every rank that
 * every other rank of the communicator loads from and stores into (peer
 * access in one process, CUDA IPC across processes).  Direct programs
 * keep there their signal flags, their call counts, their LL landings and
 * their scratch (docs/RUNTIME.md, "Direct programs"). */
#ifndef RT_WINDOW_H
#define RT_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "rt_result.h"

/* Where the parts of a rank's window lie, the same on every rank:
 * the signal flags (ip_direct_flag_words of them), the call descriptors
 * of calls on registered buffers (two words per rank: ip_dargs.key) and
 * each rank's begun word (ip_dargs.announce), the call count of each block
 * of the direct grid and a word for the first error's claim, the LL
 * landings (two halves, alternating by call), the scratch of Simple
 * programs, and the direct fused kernels' part: the GEMV's call counts
 * (ip_fdirect.h), the fused AllToAlls' flags (ip_gargs.dflag), then the
 * GEMV's landings (two halves per form, ip_fdirect.h). */
typedef struct rt_window_layout {
  int nranks, grid;
  size_t flags, desc, seq;      /* offsets of the flag words, the call descriptors and the call counts */
  size_t ll, ll_half;           /* offset of the landing region, bytes of each half */
  size_t simple, simple_bytes;  /* offset and bytes of the Simple scratch */
  size_t fseq;                  /* offset of the direct fused kernels' call counts (IP_FDIRECT_SEQ_WORDS words) */
  size_t a2a;                   /* offset of the direct fused AllToAlls' flags (IP_DIRECT_FLAG_WORDS(nranks) words) */
  size_t fused, fused_half;     /* offset of their landings (two halves per form), bytes of each half */
  size_t bytes;                 /* the whole window */
} rt_window_layout;

/* Lays out a window of about `bytes` bytes (the flags and counts on top)
 * for nranks ranks and a direct grid of `grid` blocks: a quarter of it the
 * two landing halves, the rest Simple scratch; on top of that, the fused
 * landings, two halves of a 32nd each per form of the kernel. */
void rt_window_plan(rt_window_layout *l, int nranks, int grid, size_t bytes);

/* What a rank publishes so that its peers can map its window. */
typedef struct rt_window_handle {
  char ipc[64];                 /* cudaIpcMemHandle_t */
  uint64_t base;                /* the window's address in its own process */
  uint64_t host;                /* hash of the host name (tp_peer's) */
  int32_t pid, dev;
} rt_window_handle;

typedef struct rt_window rt_window;

/* Allocates and zeroes rank's window on the current device and fills
 * `mine` for the exchange.  host: tp_peer's hash of this host. */
bt_result rt_window_alloc(rt_window **out, int rank, const rt_window_layout *l, uint64_t host, rt_window_handle *mine);

/* Maps every other rank's window given every rank's handle: its address
 * in this process (peer access enabled) when it was made here, else opened
 * through CUDA IPC.  BT_ERR_UNSUPPORTED (logged) when a rank's GPU cannot
 * be reached: another host, or no peer access. */
bt_result rt_window_connect(rt_window *w, const rt_window_handle *all);

/* Rank r's window as this GPU reaches it (after rt_window_connect). */
char *rt_window_base(const rt_window *w, int r);
const rt_window_layout *rt_window_layout_of(const rt_window *w);

void rt_window_free(rt_window *w);

#endif
