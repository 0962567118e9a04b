/* ip_fdirect.h -- direct fused operators: one kernel that computes and
 * communicates over the communicator's window (rt_window.h), with no FIFO
 * and no program.  The first is GEMV + AllReduce in one shot
 * (docs/FUSED.md, "The direct one-shot kernel"):
 *
 *   every rank computes y_r = W_r x_r in row groups of
 *   IP_FDIRECT_ROW_GROUP rows, a warp each, spread over every block of
 *   the grid; as soon as a warp has a group's rows it stores them, as LL
 *   lines carrying the call's flag, into its slot of the fused landing of
 *   every rank (its own included); after its last group it polls the same
 *   rows of every rank's slot in its own landing and writes their sum,
 *   added in rank order in f32 (so every rank's y is the same bits), into
 *   y.  With one rank the rows go straight into y.
 *
 * Nothing is reset between calls, and graph replays are safe: every
 * block of a rank's fixed grid counts the calls it ran (a word per block
 * in the window, as the direct executor does; blocks without a task only
 * count), a call's lines carry that count, and the landing alternates
 * between two halves with its parity.  A rank writes into a half only after its previous call ended, which
 * needed every rank's lines of that call, which each rank stores only
 * after its own call before it ended: no rank still reads the half being
 * written. */
#ifndef IP_FDIRECT_H
#define IP_FDIRECT_H

#include <stdint.h>

#include "ip_direct.h"
#include "ip_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block, and blocks per SM at most (the grid is every block
 * that fits at once, so that every warp's polls may wait for the other
 * ranks' stores). */
#define IP_FDIRECT_THREADS 256
#define IP_FDIRECT_BLOCKS_PER_SM 8
/* Rows a warp takes at once: one LL line's 8 data bytes in bf16 or f16,
 * two lines in f32, so no line holds two warps' rows. */
#define IP_FDIRECT_ROW_GROUP 4
/* The most rows the runtime runs with unroll 8 (by default; 2 above).
 * Unroll 4 and 8 are built for one block per SM (all of a warp's loads in
 * flight: ptxas, given fewer registers, issues each load just before its
 * use), 1 and 2 for four.  Measured on H200 (docs/PERFORMANCE.md): 8
 * wins while the one-block grid's warps have one row group each
 * (132 SMs x 8 warps x 4 rows), 2 beyond. */
#define IP_FDIRECT_UNROLL8_ROWS 4096
/* Blocks of the kernel at most.  A communicator runs it in up to two
 * forms (unroll 4 or 8 on one grid, 1 or 2 on another), each with its own call
 * counts and landings, so that each keeps its grid and its halves
 * alternate whatever the other does; the window holds, per form, a count
 * per block, then one error claim word. */
#define IP_FDIRECT_MAX_GRID 2048
#define IP_FDIRECT_FORMS 2
#define IP_FDIRECT_SEQ_WORDS (IP_FDIRECT_FORMS * IP_FDIRECT_MAX_GRID + 1)

typedef struct ip_fargs {
  char *land[IP_WIN_MAX_RANKS];   /* every rank's fused landing (its first half), as this GPU reaches it */
  uint64_t *seq;                  /* this rank's call count per block (IP_FDIRECT_MAX_GRID words) */
  int64_t half;                   /* bytes from one landing half to the other */
  const char *W, *x;              /* this rank's M x K matrix (row stride ld elements) and K-vector */
  char *y;                        /* the M-vector every rank ends with */
  int64_t M, K, ld;
  int32_t rank, nranks, dtype;
  int32_t poll_ns;                /* sleep between polls of a line not there yet (0: none) */
  volatile int32_t *abort;        /* host-mapped, as ip_gargs's */
  ip_gerr *err;
  uint64_t *claim;                /* device: 0 until one block of the call owns err */
  uint64_t timeout_ns;            /* 0: never */
  /* Launched as a programmatic dependent (ip_fgemv_launch's pdl), each
   * block waits for the kernel before at its start; release_early: it
   * lets the next kernel in at its start (one GPU a rank: waiting blocks
   * of the next call must keep no other rank's call off the SMs). */
  int32_t release_early;
  /* BATON_TRACE: the timeline (ip_gpu.h's layout; NULL: none): per block
   * enter, ready, the end of its warps' compute and stores (step
   * IP_FSTEP_TASK, tile: its first row group, -1 without one), the end
   * of the sums (IP_FSTEP_SUM), exit. */
  uint64_t *trace;
} ip_fargs;

/* The kernel's steps as its timeline names them (ip_fgemv_step_names). */
enum { IP_FSTEP_TASK, IP_FSTEP_SUM, IP_FSTEP_COUNT };
extern const char *const ip_fgemv_step_names[IP_FSTEP_COUNT];

/* Bytes of one landing half that GEMV + AllReduce of M rows of esize-byte
 * elements on nranks ranks needs: a slot per rank of 16-byte lines, each
 * carrying 8 bytes of y. */
static inline int64_t ip_fgemv_half_bytes(int64_t M, int nranks, int esize) {
  return (int64_t)nranks * ((M * esize + 7) / 8) * 16;
}

/* Whether the kernel computes elements of type dtype (f32, f16, bf16). */
int ip_fgemv_takes(int dtype);

/* The blocks every launch of the kernel with `unroll` on the current
 * device has (the same for every type: the call counts are per block) for
 * `share` ranks on it (each rank's blocks must all run at once): at most
 * IP_FDIRECT_BLOCKS_PER_SM per SM, what occupancy allows, divided among
 * the ranks, within [1, IP_FDIRECT_MAX_GRID]. */
bt_result ip_fgemv_grid(int unroll, int share, int *grid);

/* Launches GEMV + AllReduce for one rank on `stream`: `grid` blocks
 * (ip_fgemv_grid's) of IP_FDIRECT_THREADS, `unroll` 16-byte loads in
 * flight per thread and row (1, 2, 4 or 8), with `pdl` as a programmatic
 * dependent of the kernel before it.  BT_ERR_CUDA when the launch fails
 * (logged); BT_ERR_INVALID for a type or unroll it has no kernel of. */
bt_result ip_fgemv_launch(const ip_fargs *a, int grid, int unroll, int pdl, void *stream);

#ifdef __cplusplus
}
#endif

#endif
