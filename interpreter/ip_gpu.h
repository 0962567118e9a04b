/* ip_gpu.h -- the GPU interpreter: one kernel runs every IR program.
 *
 * The host lowers an ir_prog once per rank into a plan of plain arrays
 * (ip_gstep per step, ip_gtb per thread block with its connection
 * pointers) in device memory; a call launches ip_gpu_launch with the
 * call's buffers and sizes.  One CUDA block runs one IR thread block; all
 * blocks must be resident at once (ip_gpu_max_blocks says how many fit).
 *
 * Each IR thread block runs as `lanes` CUDA blocks: lane l takes tiles
 * l, l+lanes, ... with connections and progress words of its own, so a
 * connection's bandwidth is spread over several SMs.  Block b is lane
 * b / ntbs, IR thread block b % ntbs.
 *
 * Connections (transports/tp.h sets them up) are FIFOs of nslots slots
 * of slot_bytes: in the receiver's memory (P2P), or one on each side in
 * host memory with a proxy thread between them (the network; Simple only).  Counters are monotonic
 * over the life of a communicator: the sender posts message m by writing
 * head = m+1 into the receiver's memory, the receiver frees it by writing
 * tail = m+1 into the sender's memory.  Cross-thread-block dependencies
 * use per-program progress words tagged with a launch generation, so no
 * host-side reset is needed between calls (CUDA-graph safe). */
#ifndef IP_GPU_H
#define IP_GPU_H

#include <stdint.h>

#include "ip_dtype.h"
#include "ip_gemm.h"
#include "ir_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Extra receive connections a block may read (receive chains, see
 * runtime/rt_chain.h): a block runs its own tb's steps and the steps of up
 * to this many tbs folded into it. */
#define IP_GPU_XRECV 7

/* Receive-reduce steps the kernel runs as one (a fused chain, LL and LL128;
 * runtime/rt_chain.h): at most this many. */
#define IP_GPU_FUSE 4
/* Consecutive nop steps whose waits one step makes (a thread each). */
#define IP_GPU_NOPS 32

typedef struct ip_gstep {
  uint8_t op, srcbuf, dstbuf;
  uint8_t hasdep;        /* a step of another CUDA block waits on this one */
  uint8_t fuse;          /* this step and the fuse-1 after it run as one (rt_chain_fuse); 0: runs inside such a
                            group; 1: alone */
  int8_t arg[IR_MAX_ARGS];   /* compute opcodes: operand indices (ip_gargs.opnd), -1 none */
  int32_t conn;          /* receive from: 0 the tb's own connection, k the k-th extra one */
  int32_t srcoff, dstoff, cnt;
  int32_t srcrun, srcstride, dstrun, dststride;   /* strided patterns (ir_step, ir_chunk_at); run 0: consecutive */
  int32_t depid, deps;   /* wait for step deps of tb depid (same lane), or depid -1; a wait on a compute
                            step (sem set): depid is the compute tb's entry in ip_gargs.tbs */
  int32_t depn;          /* steps of tb depid: its progress counts them per tile; a wait on a compute step:
                            that step's chunks (its semaphore counts rows of all of them) */
  int32_t sseq, rseq;    /* this step's message among those of its send / receive
                            connection in one tile (so counts need no updating) */
  int32_t sem;           /* a step of a compute tb: the semaphores it counts in; a step waiting on one:
                            those it waits on (ip_sem_pack); IP_SEM_NONE */
} ip_gstep;

/* Semaphores: a compute step's words start at `base` in ip_gargs.sems,
 * one per group of tiles of its sync policy (ir_sync: kind, param). */
#define IP_SEM_NONE (-1)
#define IP_SEM_MAX_WORDS (1 << 17)
#define IP_SEM_MAX_PARAM ((1 << 13) - 1)
static inline int32_t ip_sem_pack(int base, int kind, int param) {
  return (int32_t)((uint32_t)base | (uint32_t)kind << 17 | (uint32_t)param << 19);
}
IR_HD int ip_sem_base(int32_t s) { return (int)((uint32_t)s & (IP_SEM_MAX_WORDS - 1)); }
IR_HD int ip_sem_kind(int32_t s) { return (int)((uint32_t)s >> 17 & 3); }
IR_HD int ip_sem_param(int32_t s) { return (int)((uint32_t)s >> 19); }

/* Semaphores of a compute step with dependents: as many as a chunk of
 * IP_GPU_MAX_CTILES tiles needs under its policy, so a chunk is cut into
 * at most that many tiles under "tile", G times as many under "group:G",
 * any number under "stride:S" (ip_sem_max_tiles). */
#define IP_GPU_MAX_CTILES 512
static inline int64_t ip_sem_max_tiles(int kind, int param) {
  return kind == IR_SYNC_GROUP ? (int64_t)IP_GPU_MAX_CTILES * param
         : kind == IR_SYNC_STRIDE ? (int64_t)1 << 40 : IP_GPU_MAX_CTILES;
}

/* One side of a connection as one thread block sees it. */
typedef struct ip_gconn {
  char *fifo;            /* nslots * slot_bytes, in the receiver's memory */
  uint64_t *head;        /* in the receiver's memory: messages posted */
  uint64_t *tail;        /* in the sender's memory: messages consumed */
  uint64_t *count;       /* this side's own count (posted or consumed), local */
  uint32_t *lens;        /* a network connection's send side: per slot, the bytes of the message in it,
                            written before head (the proxy sends that many); NULL otherwise */
} ip_gconn;

typedef struct ip_gtb {
  int32_t nsteps;        /* at ip_gargs.steps + (tb % ntbs) * step_stride */
  int32_t send_peer, recv_peer, chan;
  int32_t nx;            /* extra receive connections (folded receive chains) */
  int32_t nsend;         /* messages sent per tile */
  int32_t nrecv[1 + IP_GPU_XRECV];   /* messages received per tile, own connection then extras */
  ip_gconn send, recv;   /* fifo NULL when the tb does not send / receive */
  ip_gconn xrecv[IP_GPU_XRECV];
  int32_t xpeer[IP_GPU_XRECV], xtb[IP_GPU_XRECV];   /* their senders, and the IR tbs they belong to */
  int32_t irtb;          /* this block's IR thread block (folded ones get no block) */
} ip_gtb;

/* Why a spin gave up; the first block to give up fills ip_gerr.
 * IP_WAIT_BUFS: a direct call on registered windows whose peer (ip_gerr.
 * peer) runs a call with another descriptor (ip_dargs.key).
 * IP_WAIT_START: a direct call waited for its peer to begin the call
 * before (ip_dargs.unmet). */
enum { IP_WAIT_NONE, IP_WAIT_DEP, IP_WAIT_RECV, IP_WAIT_SEND, IP_WAIT_ABORT, IP_WAIT_SEM, IP_WAIT_BUFS, IP_WAIT_START };

/* The most ranks a direct GEMM + AllToAll spans (ip_gargs.dout). */
#define IP_DIRECT_MAX 16
/* Words of a rank's flags for direct calls (ip_gargs.dflag): end flags,
 * call count, blocks done, start flags, the peers' call descriptors. */
#define IP_DIRECT_FLAG_WORDS(n) (3 * (n) + 2)

/* Bad operand data a compute step met (ip_gerr.what; no wait gave up and
 * nothing is aborted: the step skipped it): an index outside its table's
 * rows, an offset outside [previous offset, indices' length], a GEMM's
 * row count outside [0, rows of its block] (ip_gargs.gcount). */
enum { IP_BAD_INDEX = 16, IP_BAD_OFFSET, IP_BAD_COUNT };

typedef struct ip_gerr {  /* in host-mapped memory, one per rank of the process */
  int32_t flag;           /* 0: no error; written last, once the rest is */
  int32_t rank, tb, step, what, peer, chan, depid;
  int64_t tile;           /* bad data: the element's position in its operand */
  int64_t value;          /* bad data: the value found there (peer: the operand) */
  uint64_t when;          /* GPU global timer when the wait gave up: the earliest is the cause */
  ip_gemm_stall gemm;     /* a wait inside the GEMM tile engine that gave up (and stopped the kernel) */
} ip_gerr;

/* A launch's generation as progress words and semaphores carry it: the
 * low IP_GEN_BITS bits of a block's count of launches (ip_gargs.gen).  A
 * progress word is (tag << 40) + steps done, a semaphore word (tag << 32)
 * + rows done; a waiter takes a word as this launch's only where its tag
 * is this launch's (a count, compared as more or less, would take a word
 * of the launch before as done once the counts wrap, which they do after
 * 2^24 launches of a program). */
#define IP_GEN_BITS 24
#define IP_GEN_TAG(g) ((uint64_t)(g) & ((UINT64_C(1) << IP_GEN_BITS) - 1))

typedef struct ip_gargs {
  /* A launch of a program with gemm steps (cgemm): its one GEMM, over the
   * rows of X its gemm steps compute.  First: the tensor maps in it are
   * 128-byte aligned, and TMA reads them from the kernel's parameters. */
  ip_gemm_args gemm;
  const ip_gstep *steps;  /* device: all steps of this rank, tb by tb */
  const ip_gtb *tbs;      /* device: lanes * ntbs entries, lane-major */
  int32_t ntbs, lanes;             /* IR thread blocks, CUDA blocks per tb */
  int32_t step_stride;             /* tb t's steps start at steps + t * step_stride */
  int32_t smem_steps;              /* step_stride when the steps go to shared memory, else 0 */
  uint64_t *gen, *progress;        /* device: one word per CUDA block each */
  char *buf[IR_BUF_COUNT];         /* i, o, s base pointers */
  ir_geom geom;
  int64_t tile, ntiles;            /* elements per tile, tiles per chunk */
  int32_t esize, dtype, op, nslots;
  int32_t proto;                   /* ir_proto: Simple, LL (16-byte lines of 8 data bytes),
                                      LL128 (128-byte lines of 120 data bytes) */
  int64_t slot_bytes, msg_stride;  /* bytes per message chunk (16-aligned) */
  int32_t rank;
  volatile int32_t *abort;         /* host-mapped; nonzero stops every block */
  ip_gerr *err;                    /* host-mapped: this rank's record (no atomics on it: host memory
                                      need not support them) */
  uint64_t *claim;                 /* device: 0 until one block of the call owns err */
  uint64_t timeout_ns;             /* 0: never */
  uint64_t *trace;                 /* NULL, or the timeline (IP_TRACE_WORDS per CUDA block) */
  /* Compute (docs/FUSED.md). */
  int32_t ncomp, cwidth;           /* compute tbs (their entries follow the lanes' in tbs, their steps the
                                      lanes' tbs' in steps), CUDA blocks each */
  int32_t cbag;                    /* some compute step is an embedding bag (the compute blocks' code with it) */
  uint64_t *bagctr;                /* device, zero between calls: [0] compute blocks done, [1 + s] the bags
                                      taken of the compute thread block's step s (one compute tb: ip_gpu_kernel.cuh) */
  uint64_t *sems;                  /* device: the semaphore words */
  int32_t stage_bytes;             /* dynamic shared memory after the steps for computed values */
  const char *opnd[IR_MAX_OPERANDS];   /* operands: device pointers */
  int64_t opld[IR_MAX_OPERANDS];       /* a matrix's row stride in elements */
  int64_t opcols[IR_MAX_OPERANDS];     /* a matrix's columns (a vector's length is the matrix's) */
  int64_t oprows[IR_MAX_OPERANDS];     /* a matrix's rows, a vector's length */
  int8_t opdt[IR_MAX_OPERANDS];        /* an index vector's ip_dtype (IP_I64, IP_I32); -1 the call's type */
  /* GEMM (ip_gpu_gemm.cu): the compute steps are gemm, Y = X W.  Row m of
   * gemm (m < gemm.m) is X's row grow0 + m, the input's elements
   * (grow0 + m) * H .. + H - 1 (H = gemm.n), in input chunk (grow0 + m) /
   * grows: chunks and tiles are whole rows, grows and gtrows of them, and
   * the input's chunks lie end to end.  gmap[2 (c - gchunk0)] and [.. + 1]
   * describe input chunk c: the semaphores of the step that computes it
   * (IP_SEM_NONE: nobody waits), and where it goes (IP_GMAP_DST: a chunk
   * of a buffer that is not interleaved).  gcount (device; NULL: every
   * row counts): X's rows come in blocks of gbrows, and only the first
   * gcount[b] rows of block b are worth computing (the rest is padding:
   * a tile row wholly in padding is skipped).  A count outside [0,
   * gbrows] is clamped and reported (IP_BAD_COUNT).  gposts: some
   * computed chunk's semaphores are waited on.  gbase (NULL: not so):
   * every computed chunk's destination lies end to end with the next, so
   * row m goes to gbase + m * H elements (the kernel then needs no chunk's
   * destination to store). */
  int32_t cgemm, gchunk0, gchunks, grow0, grows, gtrows, gbrows, gposts;
  char *gbase;
  ip_fastdiv gdiv_rows, gdiv_trows, gdiv_brows;   /* / grows, / gtrows, / max(gbrows, 1) (ip_fastdiv_make) */
  const int32_t *gmap;                 /* device */
  const int32_t *gcount;               /* device */
  /* Direct AllToAll (direct: set at a group's end when every rank of the
   * communicator calls from this process; a GEMM's or an embedding bag's
   * program): the collective's result, not the program's routes -- the
   * values of input block q go straight into rank q's output dout[q]
   * (its block `rank`), nothing moves through FIFOs (every block
   * computes), and the ranks meet at the start and at the end on their
   * flags: rank q's dflag[q][p] is the last call rank p finished writing
   * to it, dflag[q][dnranks] q's calls, dflag[q][dnranks + 1] its compute
   * blocks done in this call, dflag[q][dnranks + 2 + p] the last call
   * rank p started, dflag[q][2 * dnranks + 2 + p] rank p's call
   * descriptor (device memory of q, peer-mapped).  dkey: an eager call's
   * descriptor (its outputs in registered windows, or in the windows'
   * scratch: ip_proto.cuh's direct_start checks it), else 0. */
  int32_t direct, dnranks;
  uint32_t dkey;
  char *dout[IP_DIRECT_MAX];
  uint64_t *dflag[IP_DIRECT_MAX];
} ip_gargs;

/* Where input chunk c's rows go in a direct call (ip_gargs.direct): chunk
 * j of block q goes to rank q's output, block `rank`, chunk j. */
IR_HD char *ip_gemm_direct_dst(const ip_gargs *a, int32_t c) {
  const int32_t k = a->gbrows / a->grows, q = c / k, j = c - q * k;
  return a->dout[q] + ((int64_t)a->rank * a->gbrows + (int64_t)j * a->grows) * a->gemm.n * 2;
}

/* A gemm chunk's destination in ip_gargs.gmap: buffer and chunk. */
#define IP_GMAP_DST(buf, chunk) ((int32_t)((uint32_t)(buf) << 24 | (uint32_t)(chunk)))
#define IP_GMAP_BUF(d) ((int)((uint32_t)(d) >> 24))
#define IP_GMAP_CHUNK(d) ((int)((uint32_t)(d) & 0xffffff))

/* The kernel's timeline (BATON_TRACE, runtime/rt_trace.c).  When
 * ip_gargs.trace is set, thread 0 of CUDA block b writes IP_TRACE_WORDS
 * words at trace + b * IP_TRACE_WORDS: the number of events, then each
 * event as three words: IP_TRACE_TAG(event, step, tile index), the
 * %globaltimer (ns; ENTER and EXIT only, 0 for the others: a read costs
 * a fraction of a microsecond) and clock64 (SM cycles, cheap; the reader
 * converts them with the rate ENTER to EXIT gives).  Events past the room are dropped; EXIT always
 * takes the last place. */
#define IP_TRACE_WORDS 256
#define IP_TRACE_EVENTS ((IP_TRACE_WORDS - 1) / 3)
enum { IP_EV_ENTER, IP_EV_READY, IP_EV_WAITED, IP_EV_DONE, IP_EV_EXIT };
#define IP_TRACE_TAG(ev, step, i) ((uint64_t)(ev) | (uint64_t)(uint32_t)(step) << 8 | (uint64_t)(i) << 40)

#ifdef __CUDACC__
/* Thread 0 of a block records event ev of step s, index i, as the n-th of
 * its block's timeline at trace (NULL: nothing); the last place is kept
 * for EXIT.  Both kernels' (the interpreter's and the direct executor's). */
__device__ __forceinline__ void ip_trace_ev(uint64_t *trace, int &n, int ev, int s, int64_t i) {
  if (!trace || (n >= IP_TRACE_EVENTS - 1 && ev != IP_EV_EXIT)) return;
  uint64_t *w = trace + (uint64_t)blockIdx.x * IP_TRACE_WORDS + 1 + 3 * n++;
  uint64_t t = 0;
  if (ev == IP_EV_ENTER || ev == IP_EV_EXIT) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));   /* slow to read */
  w[0] = IP_TRACE_TAG(ev, s, i);
  w[1] = t;
  w[2] = clock64();
  if (ev == IP_EV_EXIT) trace[(uint64_t)blockIdx.x * IP_TRACE_WORDS] = n;
}
#endif

/* Which of a type's four kernels runs operator op: SUM, PROD, MAX, MIN
 * (AVG runs SUM; its division comes after).  The interpreter's and the
 * direct executor's kernel tables are laid out so. */
static inline int ip_kernel_slot(int op) {
  return op == IP_OP_PROD ? 1 : op == IP_OP_MAX ? 2 : op == IP_OP_MIN ? 3 : 0;
}

/* A type's kernel table (ip_gpu_type.cu): the four of ip_kernel_slot,
 * then AVG's division. */
#define IP_GPU_DIVIDE 4
#define IP_GPU_TYPE_KERNELS 5

/* Launches the interpreter for one rank on `stream` (a cudaStream_t) with
 * `nthreads` threads per block (IP_GEMM_THREADS, whatever nthreads says,
 * when a->cgemm: the gemm kernel).  `pdl`: the gemm kernel launches as a
 * programmatic dependent of the kernel before it on the stream (its
 * blocks may take the SMs as that kernel's blocks leave them, and read
 * nothing before it has ended); the other kernels launch plainly whatever
 * it says.  Returns BT_ERR_CUDA when the launch fails (the message is
 * logged). */
bt_result ip_gpu_launch(const ip_gargs *a, int nthreads, int pdl, void *stream);

/* CUDA blocks a launch runs: only the lanes that have a tile (a lane's
 * blocks wait only on each other, so a lane left out keeps its blocks'
 * generations equal); with compute thread blocks, every block (compute
 * blocks and any lane's wait on each other's semaphores). */
static inline int ip_gpu_blocks(const ip_gargs *a) {
  if (a->ncomp) return a->ntbs * a->lanes + a->ncomp * a->cwidth;
  return a->ntbs * (int)(a->ntiles < a->lanes ? a->ntiles : a->lanes);
}

/* Divides n elements at p by `divisor` on `stream`: the end of AVG,
 * matching ip_divide bit for bit. */
bt_result ip_gpu_divide(int dtype, void *p, int64_t n, int divisor, void *stream);

/* Loads every kernel a call may launch on the current device, so that no
 * launch loads code while interpreters wait for each other.  Under CUDA's
 * lazy loading (the default) a kernel's first launch loads it; on an H100
 * shared by several ranks the first AVG call, whose division kernel was
 * launched for the first time behind a waiting interpreter, hung until
 * BATON_TIMEOUT, and ran with CUDA_MODULE_LOADING=EAGER or this. */
bt_result ip_gpu_load(void);

/* Blocks of `nthreads` threads using `smem` bytes of dynamic shared memory
 * that can be resident at once on the current device: of the kernel of
 * programs with gemm steps when `gemm` (ip_gpu_gemm_smem is then part of
 * smem, and nthreads IP_GEMM_THREADS), else of every other. */
bt_result ip_gpu_max_blocks(int nthreads, int smem, int gemm, int *max_blocks);

/* The gemm kernel (ip_gpu_gemm.cu).  ip_gpu_gemm_ok: whether this device
 * runs programs with gemm steps (a compute capability the build has a
 * kernel for, with the registers and shared memory the tile engine
 * needs), and if not *why (a static sentence).  ip_gpu_gemm_smem: the
 * engine's dynamic shared memory on this device (after the steps').
 * ip_gpu_gemm_launch: as ip_gpu_launch, for a launch with cgemm set.
 * ip_gpu_gemm_wgmma: whether this device runs the engine's wgmma path
 * (compute capability 9.x, the sm_90a build), where narrower tiles were
 * measured (ip_gemm_set_tile_n); 0 where it runs the fallback. */
int ip_gpu_gemm_ok(const char **why);
int ip_gpu_gemm_smem(void);
int ip_gpu_gemm_wgmma(void);
bt_result ip_gpu_gemm_launch(const ip_gargs *a, int pdl, void *stream);
/* ip_gpu_load's and ip_gpu_max_blocks's halves for the gemm kernel. */
bt_result ip_gpu_gemm_load(void);
bt_result ip_gpu_gemm_max_blocks(int smem, int *max_blocks);

/* The most input chunks the gemm steps of one rank may compute (the gemm
 * kernel keeps a row of ip_gargs.gmap per chunk in shared memory). */
#define IP_GEMM_MAX_CHUNKS 128

/* Threads per CUDA block at most: the kernel is built for 512 threads and
 * one block per SM, which gives every thread 128 registers. */
#define IP_GPU_MAX_THREADS 512

/* Steps of a thread block held in shared memory at most. */
#define IP_GPU_SMEM_STEPS 1024

/* Shared memory for the values an inline compute step (in a communicating
 * thread block) computes, after the steps: its whole tile (the runtime
 * cuts tiles to fit).  Compute blocks store straight to the chunks. */
#define IP_GPU_STAGE_BYTES 16384

/* Dynamic shared memory of a launch: its steps, then the stage. */
static inline size_t ip_gpu_smem(const ip_gargs *a) {
  return (size_t)a->smem_steps * sizeof(ip_gstep) + (size_t)a->stage_bytes;
}

#ifdef __cplusplus
}
#endif

#endif
