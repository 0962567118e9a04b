/* cc.h -- the compiler's shared state: the traced chunk program. Internal to compiler/. */
#ifndef CC_H
#define CC_H

#include <stdint.h>

#include "ir.h"
#include "ir_expect.h"
#include "cc_mem.h"
#include "rt_diag.h"

enum { CC_SPACE_INPUT, CC_SPACE_OUTPUT, CC_SPACE_FIRST_SCRATCH, CC_MAX_SPACES = 16 };
/* What an operation does: dst = src; dst = dst (op) src; dst = a compute
 * opcode's result; src and dst exchanged (two ranks' chunks, a direct
 * program's xchg). */
enum { CC_COPY, CC_REDUCE, CC_COMPUTE, CC_SWAP };

/* The order a compute thread block takes its steps in (collective's
 * tileorder): chunks that leave the GPU first, local ones last (COMM); or
 * the script's order (PROGRAM). */
enum { CC_ORDER_COMM, CC_ORDER_PROGRAM };

/* How the compiler groups a rank's connections into thread blocks
 * (collective's placement): one per peer, direction and channel (SPLIT),
 * or a peer's send and receive on a channel in one (PAIRED). */
enum { CC_PLACE_SPLIT, CC_PLACE_PAIRED };

/* How a copy or reduce between two ranks is lowered (collective{}'s and an
 * operation's via): FIFO messages (send + receive), or direct steps
 * (compiler/cc_direct.c): the compiler's choice (DIRECT), puts by the
 * source rank (PUT) or gets by the destination rank (GET).  A program is
 * FIFO or direct, never both. */
enum { CC_VIA_FIFO, CC_VIA_DIRECT, CC_VIA_PUT, CC_VIA_GET, CC_VIA_COUNT };

/* The longest name a topology may have (for messages). */
#define CC_MAX_TOPO_NAME 64

/* The links between ranks a collective{} topology allows (compiler/cc_topo.c):
 * fully connected, nodes x gpus (a node's GPUs all linked, GPU i of every
 * node linked by rail i), or an explicit list of undirected links. */
typedef struct cc_topo {
  int nodes, gpus;          /* nodes x gpus; nodes == 0: another form */
  int nlinks;               /* a link list of nlinks pairs; -1: none given */
  uint64_t *links;          /* ... sorted, each a << 32 | b with a < b */
  char name[CC_MAX_TOPO_NAME];   /* the list's name, or "" */
} cc_topo;

/* What a chunk holds, symbolically: the input chunks (rank, index) folded
 * into it, sorted; empty when nothing was ever written. */
typedef struct cc_val {
  int n, cap;
  uint64_t *terms;     /* rank << 32 | index */
} cc_val;

typedef struct cc_loc {
  int version;         /* a fresh number on every write (cc_trace.clock) */
  int line;            /* script line of the last write */
  int mixed;           /* line of the parallelize whose instances left different values here; 0 none */
  cc_val val;
} cc_loc;

/* The chunks of a strided reference (cc_ref.h): chunk j of a reference
 * at idx is idx + (j / run) * stride + j % run, runs of `run` consecutive
 * chunks `stride` apart (negative: backwards); run 0 means consecutive
 * (idx + j).  Never overlapping: |stride| >= run. */
typedef struct cc_pat { int run, stride; } cc_pat;

static inline int cc_pat_at(int idx, cc_pat p, int j) {
  return p.run ? idx + (j / p.run) * p.stride + j % p.run : idx + j;
}

/* One traced chunk operation: dst = src (copy), dst = dst (op) src (reduce), or src and dst exchanged (swap). */
typedef struct cc_op {
  int kind;
  int src_rank, src_space, src_idx;
  int dst_rank, dst_space, dst_idx;
  int count;
  cc_pat src_pat, dst_pat;  /* chunk j of each side: cc_pat_at(idx, pat, j) */
  int ch, sendtb, recvtb;   /* directives, -1 = compiler's choice */
  int via;                  /* CC_VIA_*: the operation's own or, when it gives none, the collective's */
  int line;                 /* script line */
  int frag, piece;          /* parallelize fragment (1-based; 0 outside any) and its instance */
  int from;                 /* the script lines that called the function it was made in (cc_trace.froms), -1:
                             * made at the script's top level */
  int round;                /* round() calls before it: on each rank, a round's operations start after the
                             * earlier round's operations of that rank (cc_round.c) */
  /* CC_COMPUTE: dst (the input chunks) = opcode cop of operands args */
  int cop;                  /* ir_op */
  int8_t args[IR_MAX_ARGS];
  int sync, sync_param;     /* ir_sync of the steps waiting on it */
  int zerocopy;             /* computed straight into the one peer it is sent to (gemvs) */
  int into_output;          /* stored in the output's chunks of the same indices, not the input's */
} cc_op;

/* An operand declared with matrix(), vector() or index(). */
typedef struct cc_opnd {
  char name[IR_MAX_NAME];
  int kind;                 /* ir_okind */
  char dim[2][IR_MAX_NAME]; /* rows, cols / length, "" */
  char dtype[8];            /* "call"; an index vector's "i64" or "i32" */
  int line;
} cc_opnd;

/* One parallelize(n, fn) call. */
typedef struct cc_frag { int n, line; } cc_frag;

typedef struct cc_trace {
  char name[128];
  const char *script;       /* file name for provenance */
  ir_coll coll;
  ir_proto proto;
  int nranks, k;            /* ranks, chunks per block */
  int inplace, instances;
  int nthreads;             /* threads per thread block; 0: the runtime's (BATON_NTHREADS) */
  uint64_t minbytes, maxbytes;
  cc_topo topo;             /* the links copies and reductions may use */
  int placement;            /* CC_PLACE_* */
  int via;                  /* CC_VIA_*: collective{}'s via, the default of every operation */
  int via_line;             /* where the program became direct (collective{}'s line, or the first direct
                             * operation's between ranks); 0 while it is not */
  int fifo_line;            /* line of the first operation between ranks lowered to FIFO messages; 0 none */
  int direct;               /* 1: the operations between ranks lower to direct steps (cc_via.h) */
  int declared;             /* collective{} was called */
  int nspaces;
  char space_name[CC_MAX_SPACES][32];
  int fixed_size[2];        /* chunks of input and output per rank */
  int *size[CC_MAX_SPACES]; /* [space][rank]: chunks used (scratch grows) */
  cc_loc **loc[CC_MAX_SPACES];  /* [space][rank] -> chunks */
  int *cap[CC_MAX_SPACES];
  cc_op *ops;
  int nops, capops;
  int clock;                /* last version number handed out */
  cc_frag *frags;           /* parallelize calls, in order */
  int nfrags, capfrags;
  int cur_frag, cur_piece;  /* fragment being traced (1-based; 0 none) and its instance */
  int round, round_line;    /* round() calls so far, and the line of the last */
  char **froms;             /* distinct caller lists of operations, "t.lua:6, t.lua:8" (cc_op.from) */
  int nfroms, capfroms;
  struct cc_snap *snap0, *snapr;  /* parallelize: state before the fragment, merged result */
  char *expect;             /* custom collectives: the postcondition's text, or NULL */
  char interleave[IR_MAX_NAME * IR_MAX_DIM_FACTORS];   /* the output's interleaved layout ("T*D"), or "" */
  ir_expect *rules;         /* ... parsed */
  int decl_line;            /* script line of collective{} */
  int fused;                /* operands declared: the input is computed, not given */
  int noperands;
  cc_opnd opnd[IR_MAX_OPERANDS];
  int tileorder;            /* CC_ORDER_* */
  cc_budget *mem;           /* memory and time of this compile: Lua, trace, lowering */
  int64_t fixed_chunks;     /* chunks of every rank's input and output together */
  int64_t scratch_chunks;   /* ... of every rank's scratch buffers */
  int *scratch_rank;        /* [rank]: chunks of its scratch buffers */
} cc_trace;

/* The most chunks one buffer of one rank may have (a traced index stays
 * below it): times the pieces and instances of lowering (at most 512) an
 * IR chunk index still fits in an int. */
#define CC_MAX_INDEX (1 << 21)
/* Most round() calls a script may make. */
#define CC_MAX_ROUNDS (1 << 20)
/* The most chunks of all buffers together the tracer takes, whatever
 * BATON_MAX_CHUNKS says: version numbers stay far inside an int. */
#define CC_MAX_TOTAL (INT64_C(1) << 28)

#endif
