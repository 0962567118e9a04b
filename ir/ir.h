/* ir.h -- the in-memory IR: program -> per-rank GPU programs -> thread blocks -> steps.
 *
 * The IR is plain data: every stage (reader, validator, compiler, CPU
 * executor, GPU loader) reads these structs directly, the way SQLite's VDBE
 * reads its op array.  Construction goes through ir_prog_new / ir_*_add so
 * that all memory belongs to the program and ir_prog_free releases it. */
#ifndef IR_H
#define IR_H

#include <stddef.h>
#include <stdint.h>

#include "rt_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opcode flags, see ir_op.def. */
enum { IR_F_SRC = 1, IR_F_DST = 2, IR_F_RECV = 4, IR_F_SEND = 8, IR_F_RED = 16, IR_F_COMP = 32,
       IR_F_PUT = 64, IR_F_GET = 128, IR_F_SIG = 256, IR_F_WAIT = 512, IR_F_SWAP = 1024 };
/* The direct steps' flags: a step with any of them names a peer (ir_step.peer)
 * and moves data or signals through no FIFO. */
#define IR_F_DIRECT (IR_F_PUT | IR_F_GET | IR_F_SIG | IR_F_WAIT)
/* How many IR_F_* bits there are. */
#define IR_F_BITS 11

typedef enum ir_op {
#define X(id, xml, flags, args, doc) IR_OP_##id,
#include "ir_op.def"
#undef X
  IR_OP_COUNT
} ir_op;

extern const char *const ir_op_xml[IR_OP_COUNT];   /* "s", "rrcs", ... */
extern const unsigned ir_op_flags[IR_OP_COUNT];
extern const char *const ir_op_doc[IR_OP_COUNT];
extern const char *const ir_op_id[IR_OP_COUNT];    /* "SEND", ... */
extern const char *const ir_op_args[IR_OP_COUNT];  /* compute opcodes: their operands' kinds ("MV"); "" else */

/* Looks up an XML type code; returns IR_OP_COUNT when unknown. */
ir_op ir_op_from_xml(const char *s);

typedef enum ir_buf { IR_BUF_INPUT, IR_BUF_OUTPUT, IR_BUF_SCRATCH, IR_BUF_COUNT } ir_buf;
extern const char *const ir_buf_xml[IR_BUF_COUNT];  /* "i", "o", "s" */

typedef enum ir_coll {
  IR_COLL_ALLREDUCE, IR_COLL_ALLGATHER, IR_COLL_REDUCESCATTER, IR_COLL_ALLTOALL,
  IR_COLL_BROADCAST, IR_COLL_REDUCE, IR_COLL_GATHER, IR_COLL_SCATTER,
  IR_COLL_CUSTOM, IR_COLL_COUNT
} ir_coll;
extern const char *const ir_coll_name[IR_COLL_COUNT];

/* Rooted collectives (broadcast, reduce, gather, scatter): a program is
 * written for one root, rank 0 as compiled; ir_prog_copy relabels it for
 * any other. */
int ir_coll_rooted(ir_coll c);
/* The buffer a rooted collective's caller does not give off the root
 * (NCCL's: it may be NULL there): IR_BUF_INPUT for broadcast and scatter,
 * IR_BUF_OUTPUT for reduce and gather; -1 for the others. */
int ir_coll_unused(ir_coll c);
/* Collectives that reduce (an operator applies; avg divides the result). */
int ir_coll_reduces(ir_coll c);
/* Element-wise collectives (allreduce, broadcast, reduce): element i of
 * every output comes from element i of the inputs alone, so a call on a
 * contiguous range of the buffers is a call of its own. */
int ir_coll_elementwise(ir_coll c);

/* The postcondition of built-in collective c over n ranks, k chunks per
 * block, rooted at `root`: where output chunk `chunk` of rank r comes
 * from.  1 with *src_rank (-1: the reduction over all ranks) and
 * *src_chunk; 0 when nothing is required of it (a reduce's or gather's
 * output off the root); -1 for a custom collective (its expect says).  A
 * gather or scatter relabelled for root R keeps rank q's block at block
 * (q - R) mod n of the root's buffer, which the runtime rotates into place
 * around the call: this is the program's own postcondition. */
int ir_coll_source(ir_coll c, int root, int n, int k, int r, int chunk, int *src_rank, int *src_chunk);

/* A function the host and the GPU both call (ir_geom.h's, ip_direct.h's). */
#ifdef __CUDACC__
#define IR_HD __host__ __device__ __forceinline__
#else
#define IR_HD static inline
#endif

typedef enum ir_proto { IR_PROTO_SIMPLE, IR_PROTO_LL, IR_PROTO_LL128, IR_PROTO_COUNT } ir_proto;
extern const char *const ir_proto_name[IR_PROTO_COUNT];
/* Whether a direct program of protocol `proto` puts into landings in its
 * peers' scratch whose lines carry the call's flag (LL, LL128: the same
 * rules, another line format), rather than signalling (Simple). */
IR_HD int ir_proto_landed(int proto) { return proto == IR_PROTO_LL || proto == IR_PROTO_LL128; }

/* Operand buffers of fused programs (baton): named buffers beyond i, o and
 * s that compute steps read, bound by name when the program is called.
 * Their shapes are symbolic: a dimension is IR_DIM_INPUT (one per element
 * of the call's input buffer, so a matrix with rows="input" has a row per
 * computed element) or a name the call binds (e.g. "K"). */
#define IR_MAX_OPERANDS 8
#define IR_MAX_ARGS 4          /* operands one compute step takes at most */
#define IR_MAX_NAME 32         /* operand and dimension names, with the terminating 0 */
#define IR_DIM_INPUT "input"
/* A matrix and a vector hold elements of the call's type (dtype "call");
 * an index vector holds integers, dtype "i64" or "i32" (an embedding bag's
 * indices and offsets). */
typedef enum ir_okind { IR_OPND_MATRIX, IR_OPND_VECTOR, IR_OPND_INDEX, IR_OKIND_COUNT } ir_okind;
extern const char *const ir_okind_name[IR_OKIND_COUNT];   /* "matrix", "vector", "index" */
extern const char ir_okind_letter[IR_OKIND_COUNT];        /* 'M', 'V', 'I': as in ir_op_args */

/* The operands compute opcode op takes: at most (the letters of
 * ir_op_args) and at least (its uppercase letters); 0 for the others. */
int ir_op_nargs(int op, int *least);

typedef struct ir_operand {
  const char *name;     /* interned */
  uint8_t kind;         /* ir_okind */
  const char *dtype;    /* "call" (the call's element type) or a type name; interned */
  const char *dim[2];   /* matrix: rows, cols; vector: length, NULL; interned */
  int32_t line;
} ir_operand;

/* How the steps waiting on a compute step's tiles learn they are ready
 * (compute thread blocks only, ir_tb_compute): a semaphore per tile
 * (TILE), per group of `param` consecutive tiles (GROUP), or per class of
 * tiles t with the same t mod `param` (STRIDE); a waiting step waits for
 * every tile of its tile's semaphore. */
typedef enum ir_sync { IR_SYNC_TILE, IR_SYNC_GROUP, IR_SYNC_STRIDE, IR_SYNC_COUNT } ir_sync;
extern const char *const ir_sync_name[IR_SYNC_COUNT];   /* "tile", "group", "stride" */
#define IR_MAX_SYNC_PARAM 4096

/* The baton schema version written in the algo element's "baton" attribute.
 * Files without it are plain MSCCL files (version 0). */
#define IR_SCHEMA_VERSION 1

/* Dependencies one step carries (baton): MSCCL's one (depid, deps) and
 * up to IR_MAX_DEPS - 1 more in ir_step.xdep, so a step that waits for
 * several thread blocks needs no chain of nop steps.  A step with more
 * than one is written with xdeps="tb:step ..." and marks its file as
 * baton's (ir_prog_needs_baton); ir_deps_split turns it back into nops. */
#define IR_MAX_DEPS 4
typedef struct ir_dep { int32_t tb, step; } ir_dep;

typedef struct ir_step {
  uint8_t op;           /* ir_op */
  uint8_t srcbuf;       /* ir_buf */
  uint8_t dstbuf;       /* ir_buf */
  uint8_t hasdep;       /* 1: other steps depend on this one (it signals) */
  uint8_t nxdeps;       /* further dependencies, xdep[0 .. nxdeps-1]; 0 unless depid >= 0 */
  int32_t srcoff;       /* first chunk, -1 when unused */
  int32_t dstoff;
  int32_t cnt;          /* number of chunks */
  /* Strided steps (baton): chunk j (0 <= j < cnt) of the source is
   * srcoff + (j / srcrun) * srcstride + j % srcrun, runs of srcrun
   * consecutive chunks srcstride apart (negative: backwards); srcrun 0
   * means consecutive (srcoff + j), as in MSCCL.  The same for the
   * destination.  Messages carry chunks 0..cnt-1 in order whatever the
   * patterns: a sender's pattern and its receiver's are independent.
   * ir_chunk_at (ir_geom.h) computes it; compute steps are consecutive. */
  int32_t srcrun, srcstride, dstrun, dststride;
  int32_t peer;         /* direct steps (IR_F_DIRECT): the rank whose memory they address or which they
                         * signal / wait for; -1 for every other step */
  int32_t depid;        /* tb index on the same rank this step waits for, -1 none */
  int32_t deps;         /* step index in that tb */
  ir_dep xdep[IR_MAX_DEPS - 1];
  int32_t line;         /* line in the XML file it was read from, 0 if none */
  const char *prov;     /* provenance "script.lua:12", or NULL */
  int8_t args[IR_MAX_ARGS];  /* compute opcodes: operand indices (ir_prog.operands), -1 unused */
  uint8_t sync;         /* ir_sync (steps of compute thread blocks) */
  int32_t sync_param;   /* GROUP: tiles per group; STRIDE: the stride; else 0 */
} ir_step;

typedef struct ir_tb {
  int32_t id;
  int32_t send;         /* send peer rank, -1 none */
  int32_t recv;         /* recv peer rank, -1 none */
  int32_t chan;
  int32_t line;
  int32_t nsteps, capsteps;
  ir_step *steps;
} ir_tb;

typedef struct ir_gpu {
  int32_t id;
  int32_t i_chunks, o_chunks, s_chunks;
  int32_t line;
  int32_t ntbs, captbs;
  ir_tb *tbs;
} ir_gpu;

typedef struct ir_prog {
  char *name;
  char *file;           /* where it was read from, for messages; may be NULL */
  ir_coll coll;
  ir_proto proto;
  int32_t nchannels;
  int32_t nchunksperloop;
  int32_t ngpus;
  int32_t inplace;      /* 1: input and output alias (NCCL's in-place layout) */
  int32_t outofplace;   /* MSCCL's outofplace attribute; -1 when absent */
  int32_t nthreads;     /* 0: runtime default */
  int32_t slots;        /* FIFO slots per connection its schedule is proven deadlock-free with (the compiler
                         * records it: 1 or 2); a runtime with fewer refuses it; 0: not recorded (MSCCL) */
  int32_t version;      /* baton schema version, 0 for plain MSCCL */
  int32_t root;         /* rooted collectives: the root; 0 as written, another rank in a relabelled copy
                         * (ir_prog_copy) */
  uint64_t minbytes, maxbytes;   /* size range this program is meant for; max 0 = no limit */
  const char *expect;   /* custom collectives: the postcondition (ir_expect.h), interned; or NULL */
  const char *interleave;   /* NULL, or the output's interleaved layout: a product of dimension names
                               ("T*D", interned), L elements; see ir_geom.h */
  int32_t noperands;    /* fused programs: operand buffers (baton) */
  ir_operand operands[IR_MAX_OPERANDS];
  int32_t line;
  ir_gpu *gpus;         /* ngpus entries, gpus[r].id == r after validation */
  struct ir_strings *strings;    /* interned provenance strings */
} ir_prog;

/* Creates an empty program; the caller fills the header fields. */
ir_prog *ir_prog_new(const char *name, ir_coll coll, int ngpus);
void ir_prog_free(ir_prog *p);

/* A deep copy of p with its ranks relabelled by `shift` (0 <= shift <
 * ngpus): rank (r + shift) mod n runs what rank r of p runs, and every
 * peer moves the same way, so a rooted program's root moves from p->root
 * to (p->root + shift) mod n.  Every rank does what it did: chunks,
 * buffers and the order of steps are unchanged, and so are the
 * postcondition (rotated with the root), the deadlock proof and slots.
 * NULL when out of memory or shift is out of range. */
ir_prog *ir_prog_copy(const ir_prog *p, int shift);

/* The dependencies of step s: how many (0 when depid is -1), and the k-th
 * (0: depid/deps, then xdep). */
static inline int ir_step_ndeps(const ir_step *s) { return s->depid >= 0 ? 1 + s->nxdeps : 0; }
static inline ir_dep ir_step_dep(const ir_step *s, int k) {
  return k ? s->xdep[k - 1] : (ir_dep){s->depid, s->deps};
}

/* Whether any step of p carries more than one dependency. */
int ir_prog_multideps(const ir_prog *p);

/* A copy of p in which no step carries more than one dependency: a step
 * with k of them is preceded by k-1 nop steps that wait for the first
 * k-1, and every dependency on a step moves with it.  Every rank does
 * what it did in the same order; this is the form executors that take
 * one dependency per step run (MSCCL's, and baton's GPU plan).  NULL when
 * out of memory. */
ir_prog *ir_deps_split(const ir_prog *p);

/* Appends a thread block / step and returns it (NULL when out of memory). */
ir_tb *ir_tb_add(ir_gpu *g, int send, int recv, int chan);
ir_step *ir_step_add(ir_tb *tb);

/* Interns a string in the program (for provenance). */
const char *ir_intern(ir_prog *p, const char *s);

/* Index of the first step of tb at or after `from` whose opcode has any of
 * the IR_F_* bits in `flags`, or tb->nsteps: walks a connection's messages
 * (the k-th IR_F_SEND step of a tb pairs with the k-th IR_F_RECV step of
 * its peer tb). */
int ir_tb_next(const ir_tb *tb, int from, unsigned flags);

/* Appends an operand (dims to be set by the caller; dtype "call", "i64"
 * for an index vector);
 * NULL when IR_MAX_OPERANDS are there or out of memory. */
ir_operand *ir_operand_add(ir_prog *p, const char *name, ir_okind kind);

/* Index of the operand called `name`, -1 when there is none. */
int ir_operand_find(const ir_prog *p, const char *name);

/* A compute thread block: no peers, at least one step, and every step a
 * compute opcode that only writes locally and waits for nothing.  Its
 * steps run in any order, each tile of each step on whichever of the
 * block's CUDA blocks takes it (docs/FUSED.md); steps of other thread
 * blocks wait on them tile by tile (ir_sync).  Compute steps elsewhere
 * run in their thread block's order, as any step does. */
int ir_tb_compute(const ir_tb *tb);

/* 1 when some step of p computes (a fused program): its input buffer then
 * holds nothing until compute steps write it. */
int ir_prog_fused(const ir_prog *p);

/* Whether opcode op is a direct step (put, get, getr, xchg, sig, wait). */
static inline int ir_op_direct(int op) { return (ir_op_flags[op] & IR_F_DIRECT) != 0; }

/* 1 when some step of p is a direct step: the runtime runs p on the direct
 * executor, over windows, not FIFOs (docs/IR.md, "Direct steps"). */
int ir_prog_direct(const ir_prog *p);

/* 1 when MSCCL would load p and run another schedule than baton does: a
 * step MSCCL does not know (compute, direct) or a pattern it would ignore
 * (strided steps, operands, an interleaved output, a step's dependencies
 * past the first).  ir_write marks such
 * a program's protocol "baton-Simple" (-LL, -LL128), which MSCCL's
 * loaders refuse. */
int ir_prog_needs_baton(const ir_prog *p);

/* The prefix of a protocol that only baton loads ("baton-Simple"). */
#define IR_PROTO_BATON_PREFIX "baton-"

/* Whether a step's source or destination is strided (a run given). */
static inline int ir_step_strided(const ir_step *st) { return st->srcrun > 0 || st->dstrun > 0; }

/* The lowest and highest chunk a pattern (off, run, stride) of cnt >= 1
 * chunks addresses (ir_chunk_at). */
void ir_pattern_extent(int32_t off, int32_t run, int32_t stride, int32_t cnt, int64_t *lo, int64_t *hi);

/* The runs of chunks one side of step st addresses (dst 0: its source pattern, 1: its destination's): how
 * many there are (1 unless strided), and run i as chunks [*lo, *hi) of that side's buffer. */
int32_t ir_side_nruns(const ir_step *st, int dst);
void ir_side_run(const ir_step *st, int dst, int32_t i, int64_t *lo, int64_t *hi);

/* The largest cnt of any step of p, at least 1: a message of that many
 * chunks is what an executor's FIFO slot must hold. */
int ir_prog_max_cnt(const ir_prog *p);

/* Total steps / thread blocks of the program. */
long ir_prog_nsteps(const ir_prog *p);
long ir_prog_ntbs(const ir_prog *p);

/* Bit set (1 << ir_buf) of the buffers any step reads or writes, its own
 * or (direct steps) a peer's. */
unsigned ir_prog_spaces(const ir_prog *p);

/* How a call runs program p: 1 when its "i" and "o" alias one span
 * (NCCL's in-place layout).  Every in-place call does: an in-place
 * program's, or an out-of-place program's that is race-free so (the
 * runtime runs such an AllToAll in place as it is; the race check and the
 * CPU executor then treat its buffers as one).  An out-of-place call of
 * an in-place program that addresses only one of i and o runs on a copy
 * of the input placed in that span (as NCCL does for in-place-only
 * algorithms); a program that addresses both keeps them apart. */
int ir_prog_aliased(const ir_prog *p, int inplace_call);

/* The program's name for messages: its file or its name. */
const char *ir_prog_where(const ir_prog *p);
/* Where step s of p is, for a message: "file:line" of an IR file; for a
 * program built in memory, the script line it came from ("t.lua:12", its
 * provenance) when known, else "name:0".  Written into buf (n bytes). */
const char *ir_step_where(const ir_prog *p, const ir_step *s, char *buf, size_t n);

/* Whether s is a product of one to IR_MAX_DIM_FACTORS dimension names
 * ("K", "T*D"): each a letter or '_', then letters, digits or '_', shorter
 * than IR_MAX_NAME. */
#define IR_MAX_DIM_FACTORS 4
int ir_dim_expr_ok(const char *s);

/* Looks up names; return -1 when unknown. */
int ir_coll_from_name(const char *s);
int ir_proto_from_name(const char *s);
int ir_buf_from_xml(const char *s);

#ifdef __cplusplus
}
#endif

#endif
