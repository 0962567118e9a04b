/* ip_direct.h -- the direct executor: one kernel runs every direct program
 * (docs/IR.md, "Direct steps") over windows, memory every rank of a
 * communicator can load from and store into.
 *
 * The host turns one rank's thread blocks into a short list of executor
 * operations (runtime/rt_direct.c), kept in device memory once per program
 * (ip_dtab); every block copies them into shared memory at its start, one
 * load per thread, beside its call count, so that what it looks up there
 * afterwards costs no round trip:
 *
 *   a run      consecutive data steps over the same chunks (put, get,
 *              getr, cpy, re) applied to one value per 16-byte unit kept in
 *              registers: its sources loaded at once, its stores in order
 *              (a one-shot AllReduce's puts, copy and reductions are one
 *              pass over the data);
 *   signals    consecutive sig steps: a barrier, then a thread per signal
 *              stores the peer's flag with release semantics;
 *   waits      consecutive wait steps: a thread per wait polls its flag,
 *              then a barrier.
 *
 * Every direct kernel of a communicator runs the same grid of `grid`
 * blocks; each block keeps its own count of the calls it ran (seq), so all
 * counts stay equal and every rank agrees on a call's number without
 * talking: signals carry seq * (signals per call) + the signal's place, LL
 * lines carry seq + 1, and LL landings alternate between two halves of
 * the window with the call's parity.  A call ends on a rank only once
 * every peer has begun it (so ended the one before, the last to read the
 * half the next call fills): the rank saw each peer begin it (a signal or
 * a landing of the peer's it took), or, where it did not (ip_dargs.unmet),
 * the grid's last block waits for the peer's word saying so.  Thread
 * block t runs on blocks [t * lanes, (t + 1) * lanes); blocks past ntbs *
 * lanes only count the call.  Unit u of a chunk (bytes 16u .. 16u + 15)
 * belongs to thread u mod (lanes * threads) of its thread block on every
 * rank, so a lane's signal covers exactly the units the peer's same lane
 * reads. */
#ifndef IP_DIRECT_H
#define IP_DIRECT_H

#include <stdint.h>

#include "ip_gpu.h"
#include "ir_geom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks a direct program spans at most: the kernel's parameters hold
 * every rank's buffer and flag pointers. */
#define IP_WIN_MAX_RANKS 16
/* Channels of a direct program at most (its signal streams' flags). */
#define IP_WIN_CHANS 4
/* Thread blocks of a rank, executor operations, run links and signal
 * entries of a rank's plan at most (ip_dtab: its size is shared memory
 * every block of the kernel takes). */
#define IP_DIRECT_MAX_TBS 8
#define IP_DIRECT_MAX_OPS 32
#define IP_DIRECT_MAX_LINKS 64
#define IP_DIRECT_MAX_SYNCS 64
/* Sources one run loads per unit at most (its first and its
 * reductions' operands): a longer chain of reductions is cut into runs. */
#define IP_DIRECT_RUN_LOADS 4
/* Segments of a copies operation at most (their loads at once). */
#define IP_DIRECT_COPY_SEGS 4
/* LL puts of a thread block's first value that its threads store in the
 * kernel's prologue at most (ip_dstart.put). */
#define IP_DIRECT_EARLY_PUTS 3

/* What an executor operation is: a run; copies (independent copies, up to
 * IP_DIRECT_COPY_SEGS of them, every one's load issued before any store:
 * segment c is a LOAD, link 2c, and one STORE or PUT, link 2c + 1);
 * signals; waits. */
enum { IP_D_RUN, IP_D_COPIES, IP_D_SIGS, IP_D_WAITS };

/* A link of a run: what it does to the run's value V for each unit.
 * LOAD (the run's first): V = the source; STORE: the local chunks = V;
 * PUT: the peer's chunks = V; COMBINE: V = V (op) the source. */
enum { IP_L_LOAD, IP_L_STORE, IP_L_PUT, IP_L_COMBINE };
/* Where a link's chunks are: this rank's memory, the peer's, or (LL) a
 * landing in this rank's scratch whose lines carry flags. */
enum { IP_AT_LOCAL, IP_AT_PEER, IP_AT_LANDING };

typedef struct ip_dlink {
  uint8_t kind, at;       /* IP_L_*, IP_AT_* */
  uint8_t buf;            /* ir_buf, in the memory `at` names */
  uint8_t pad;
  int16_t peer;           /* IP_AT_PEER: the rank */
  int16_t step;           /* the IR step it came from (errors) */
  int32_t off, run, stride;   /* its chunks: a pattern (ir_chunk_at) */
} ip_dlink;

/* A signal (IP_D_SIGS) or a wait (IP_D_WAITS) of a stream (this rank and
 * `peer` on channel `chan`).  A signal stores IP_DIRECT_SIGNAL(seq, at)
 * into the peer's flag; a wait polls its own flag until it holds
 * IP_DIRECT_SIGNAL(seq, at) or more (at counts the stream's signals of the
 * call up to and including this one, or those the wait takes).  The value
 * grows with every call whatever the program, so a flag never holds a
 * later call's count early, nor an earlier one's late (a count per
 * program would: one with more signals a call leaves larger values). */
#define IP_DIRECT_SIGNAL(seq, at) (((uint64_t)(seq) << 16) + (uint64_t)(at))
#define IP_DIRECT_MAX_SIGNALS 65535   /* a stream's signals in one call at most */
/* A call descriptor (ip_dargs.key) and the slot rank `sender` keeps it in
 * for call seq: two per sender, by parity (a sender runs at most one call
 * ahead of every rank: its call before ended only once they had begun it). */
#define IP_DIRECT_DESC(seq, key) (((uint64_t)(uint32_t)(seq) << 32) | (uint64_t)(key))
#define IP_DIRECT_DESC_SLOT(sender, seq) (2 * (int64_t)(sender) + (int64_t)((seq) & 1))
/* Where, from the descriptors (ip_dargs.desc_at), a rank keeps the word
 * saying which call rank `sender` has begun (ip_dargs.announce): one per
 * sender, after the 2 * nranks descriptor slots. */
#define IP_DIRECT_BEGUN_SLOT(nranks, sender) (2 * (int64_t)(nranks) + (int64_t)(sender))
/* Words of the descriptors and begun words of a rank's window. */
#define IP_DIRECT_DESC_WORDS(nranks) (3 * (int64_t)(nranks))

typedef struct ip_dsync {
  int16_t peer, chan;
  int16_t step, pad;
  int32_t at;
} ip_dsync;

typedef struct ip_dop {
  uint8_t kind;           /* IP_D_* */
  uint8_t n;              /* links of a run, entries of a signal or wait group */
  uint8_t npre, ncomb;    /* a run: links 1 .. npre store the first value (its LOAD), the ncomb after them reduce
                             into it (at most IP_DIRECT_RUN_LOADS - 1), the rest store the result */
  int16_t tb;             /* the IR thread block (errors) */
  uint8_t nseg;           /* copies: the segments */
  /* What the kernel would otherwise look up link by link for every unit
   * (rt_dplan works them out once): which loads are landings (a run: bit
   * c, operand c -- link 0, then link npre + c; copies: bit c, segment
   * c's load, link 2c), and which links are puts (bit k: link k). */
  uint8_t land;
  int32_t cnt;            /* a run: chunks per link */
  int32_t first;          /* its first link (ip_dtab.links) or entry (ip_dtab.syncs) */
  uint64_t puts;
} ip_dop;

/* One rank's plan of a direct program, as the kernel reads it: built once
 * (rt_dplan), copied to device memory when the communicator is made, and
 * into each block's shared memory at its start.  A multiple of 16 bytes
 * (IP_DTAB_UNITS loads of 16). */
typedef struct ip_dtab {
  int32_t tb_first[IP_DIRECT_MAX_TBS + 1];   /* thread block t's operations: [tb_first[t], tb_first[t + 1]) */
  int32_t pad[3];
  ip_dop ops[IP_DIRECT_MAX_OPS];
  ip_dlink links[IP_DIRECT_MAX_LINKS];
  ip_dsync syncs[IP_DIRECT_MAX_SYNCS];
} ip_dtab;
#define IP_DTAB_UNITS ((int)(sizeof(ip_dtab) / 16))

/* When a direct kernel's block lets the next kernel's blocks start
 * (ip_dargs.release); they wait for this kernel to end before they read
 * anything (ip_gpu_direct.cu). */
enum {
  IP_RELEASE_END = 0,    /* when it ends */
  IP_RELEASE_START = 1,  /* after its first loads (a short call) */
  IP_RELEASE_MEET = 2,   /* at its closing meeting: the signals and waits after its last data operation */
};

/* A lean link (ip_dargs.lean): where chunk 0 of the link is, and how
 * many of its bytes count. */
typedef struct ip_dlean {
  char *ptr;
  int64_t valid;
} ip_dlean;

/* How a thread block starts (ip_dargs.start).  first: link 0 of its first
 * operation where that is a one-chunk run or copies whose first value is
 * a load (not a landing): each thread loads its unit of it before
 * anything else; NULL: none.  Where that first operation is an LL run that
 * reduces (a one-shot AllReduce's), its puts of the first value (its
 * links 1, 2, .. while they are puts), where they land (first half; the
 * kernel adds the call's), `puts` of them: each thread stores its unit's
 * lines right after its load, and the run then leaves that unit's puts
 * out.  The peers' reductions wait for them: on 2 x H200 a one-shot of 8
 * B-4 KiB took 0.2-0.25 us less a call.  Where nothing waits on the puts
 * so (an AllGather's, a Broadcast's, a ReduceScatter's opening put),
 * storing them first took 0.15-0.3 us more at 1-64 KiB, on the instance
 * with early puts as on the one kernel before it: such runs put in their
 * turn. */
typedef struct ip_dstart {
  const char *first;
  int64_t valid;
  char *put[IP_DIRECT_EARLY_PUTS];
  int32_t puts;
  int32_t pad;
} ip_dstart;

typedef struct ip_dargs {
  /* What a block reads first, together in the parameters' first lines
   * (each line the constant cache fetches costs the block a wait). */
  uint64_t *seq;                       /* this rank's call count per block (grid words) */
  const ip_dtab *tab;                  /* this rank's plan of the program, in device memory */
  /* BATON_TRACE: the timeline (ip_gpu.h's layout; NULL: none): per block
   * enter, ready (prologue done), each operation's end (waited for waits,
   * done for the others; step: its first IR step, tile: the operation's
   * index), exit. */
  uint64_t *trace;
  int64_t half;                        /* LL: bytes from one landing half to the other */
  int64_t cb;                          /* bytes of a chunk: geom.cap * esize, worked out once by the host */
  int32_t rank, nranks, esize, proto;
  int32_t ntbs, lanes;                 /* thread blocks; blocks per thread block */
  int32_t poll_ns;                     /* LL: sleep between polls of a landing not there yet (0: none) */
  /* When a block lets the next kernel on the stream start its blocks
   * (where that one was launched as a programmatic dependent;
   * BATON_DIRECT_PDL): IP_RELEASE_*. */
  int32_t release;
  /* A call on registered windows (docs/RUNTIME.md, "Registered
   * buffers"): its descriptor, a hash of where its buffers are in their
   * windows and what it runs, which every rank's call must share; 0 for
   * any other call.  Before its first signal each block stores
   * IP_DIRECT_DESC(seq, key) into its slot of every peer's descriptors
   * (flags[peer] + desc_at + IP_DIRECT_DESC_SLOT); after each wait, the
   * waiting thread compares the slot of the rank it waited for with its
   * own and stops the call (IP_WAIT_BUFS) when they differ, before this
   * block touches that rank's buffers (rt_dplan.guarded). */
  uint32_t key;
  int32_t desc_at;                     /* words from a rank's flags to its descriptors (rt_window_layout.desc) */
  /* Calls in which some ranks do not see each other begin (rt_dplan.unmet,
   * .announce; a Broadcast from one rank of four: the other three see only
   * the root), met in the grid's last block, which the host leaves spare
   * (rt_dplan.meets).  announce: the peers (bit q: rank q) that do not see
   * this rank begin; that block stores seq + 1 into this rank's begun word
   * (IP_DIRECT_BEGUN_SLOT) in each of theirs once the kernel before has
   * ended.  unmet: the peers this rank does not see begin; that block
   * waits until each one's begun word here says it has (IP_WAIT_START
   * where it gives up).  Both 0 where every rank sees every other (every
   * AllReduce, AllGather, AllToAll and ReduceScatter of the default set):
   * no store, no wait. */
  uint32_t unmet, announce;
  /* Each thread block's start (ip_dstart), one entry a block in one
   * place, so that its few words come in one or two lines of the constant
   * cache; the kernel loads them before it waits for the kernel before. */
  ip_dstart start[IP_DIRECT_MAX_TBS];
  /* Where chunk 0 of each link of a one-chunk operation is (ip_dlink_at;
   * LL landings and targets: their first half), filled by the host at
   * every launch: such an operation reads them here, with no table of its
   * own to build; an operation of several chunks works them out.  A
   * link's place and length side by side: one line holds both. */
  ip_dlean lean[IP_DIRECT_MAX_LINKS];
  /* Where every rank's i, o and s are as this GPU reaches them (its own
   * rank's included); i and o of a peer are NULL when the call does not
   * know them (the program then touches no peer's i or o).  LL programs:
   * s is the landing region's first half (the kernel adds `half` on odd
   * calls). */
  char *buf[IP_WIN_MAX_RANKS][IR_BUF_COUNT];
  uint64_t *flags[IP_WIN_MAX_RANKS];   /* every rank's signal flags (rt_window.h lays them out) */
  ir_geom geom;
  int32_t dtype, op, grid;             /* grid: blocks launched */
  volatile int32_t *abort;             /* host-mapped, as ip_gargs's */
  ip_gerr *err;
  uint64_t *claim;                     /* device: 0 until one block of the call owns err */
  uint64_t timeout_ns;                 /* 0: never */
} ip_dargs;

/* Whether any thread block of the call a describes stores early puts
 * (ip_dstart.puts): the call then runs on LL's kernel instance that has
 * them, every other LL call on the one without. */
IR_HD int ip_dargs_early(const ip_dargs *a) {
  for (int t = 0; t < a->ntbs && t < IP_DIRECT_MAX_TBS; t++)
    if (a->start[t].puts) return 1;
  return 0;
}

/* Where chunk j of link l is for the call a describes: *ptr, and how many
 * of its bytes count, *valid (an LL landing or put target: the first
 * half's lines, every one).  The kernel's link table and the host's lean
 * links (ip_dargs.lean) both take it from here. */
IR_HD void ip_dlink_at(const ip_dargs *a, const ip_dlink *l, int64_t j, char **ptr, int64_t *valid) {
  const int r = l->at == IP_AT_PEER ? l->peer : a->rank;
  const int64_t c = ir_chunk_at(l->off, l->run, l->stride, j);
  const int ll = ir_proto_landed(a->proto) && l->buf == IR_BUF_SCRATCH;
  *ptr = a->buf[r][l->buf] + (ll ? c * ir_geom_wire(a->proto, a->cb) : ir_geom_off(&a->geom, l->buf, c) * a->esize);
  *valid = ll ? a->cb : ir_geom_len(&a->geom, l->buf, c) * a->esize;
}

/* A flag's index in a rank's flag words: the stream from `sender` on
 * channel `chan`, as lane `lane` of the thread blocks at its two ends
 * sees it. */
IR_HD int64_t ip_direct_flag(int lane, int chan, int sender, int nranks) {
  return ((int64_t)lane * IP_WIN_CHANS + chan) * nranks + sender;
}
/* Flag words of a rank's window for a grid of `grid` blocks. */
IR_HD int64_t ip_direct_flag_words(int grid, int nranks) {
  return (int64_t)grid * IP_WIN_CHANS * nranks;
}

/* Launches the direct executor for one rank on `stream` with `nthreads`
 * threads per block and a->grid blocks; `pdl`: as a programmatic
 * dependent launch (the GPU may start its blocks while the kernel before
 * it on the stream ends; each waits for that kernel before touching
 * anything it wrote).  BT_ERR_CUDA when the launch fails (logged). */
bt_result ip_direct_launch(const ip_dargs *a, int nthreads, int pdl, void *stream);

/* Whether the current device takes programmatic dependent launches
 * (compute capability 9.0 and up), into *ok. */
bt_result ip_direct_pdl_ok(int *ok);

/* Loads every direct kernel on the current device (ip_gpu_load's reason). */
bt_result ip_direct_load(void);

/* Blocks of `nthreads` threads the current device holds at once running
 * the direct kernel. */
bt_result ip_direct_max_blocks(int nthreads, int *max_blocks);

#ifdef __cplusplus
}
#endif

#endif
