/* rt_algo.h -- the algorithms a communicator can run: IR files loaded from
 * the environment, validated once, and chosen per call. */
#ifndef RT_ALGO_H
#define RT_ALGO_H

#include <stdint.h>

#include "ir.h"

typedef struct rt_algos rt_algos;

typedef struct rt_algo {
  ir_prog *prog;
  int inplace_ok;         /* may run an in-place call */
  int outofplace_ok;      /* may run an out-of-place call */
  int64_t maxcnt;         /* largest cnt of any step (sizes a message) */
  int copies;             /* an out-of-place call runs on a copy of the input:
                             ir_prog_aliased(prog, 0), once at load, not per call */
  int rewrite;            /* the out-of-place rewrite of a loaded in-place program (NAME_oop) */
  /* Rooted collectives (broadcast, reduce): a loaded program serves root
   * 0 as written, and its relabelled copies (ir_prog_copy), loaded beside
   * it, every other root; root_copy marks those (not listed to users). */
  int root;
  int root_copy;
  /* Fused programs (compute steps; docs/FUSED.md): run by the fused calls
   * only, never for a plain collective. */
  int compute;            /* the compute opcode its steps run (IR_OP_GEMV for gemv and gemvs, IR_OP_EBAG,
                             IR_OP_EBAGM), ORed with RT_COMPUTE_WEIGHTED when an embedding bag takes weights;
                             -1: none */
  int inline_compute;     /* the most chunks a compute step in a thread block that also communicates computes
                           * into the block's stage (0: none) */
  int bags;               /* some compute step is an embedding bag */
  int64_t max_ctiles;     /* tiles a chunk may be cut into: the least ip_sem_max_tiles of its waited-on compute steps */
  int direct;             /* a direct program (ir_prog_direct): runs on the direct executor */
  int net_peers;          /* with several node groups: the most ranks of other groups one rank sends to
                             (rt_algos_set_nodes); 0 with one group */
} rt_algo;

/* Loads every file named by BATON_ALGO_FILES, BATON_ALGO_DIR and
 * MSCCL_XML_FILES (in that order; a file named twice loads once) and keeps
 * the valid ones written for `nranks` ranks.  A rejected file is a WARN
 * line saying why; a file for another rank count an INFO line.  When none
 * of the three is set, the installed default set for `nranks` ranks
 * (rt_algos_default_dir), if there is one. */
bt_result rt_algos_load(rt_algos **out, int nranks);

/* Sets every algorithm's net_peers (rt_algo) from the node group of each
 * of the nranks ranks (node[r]); the runtime does once the groups are
 * known.  The count is the same on every rank, so every rank chooses
 * alike. */
bt_result rt_algos_set_nodes(rt_algos *a, const int *node, int nranks);

/* The installed default set's folder for `nranks` ranks
 * (PREFIX/share/baton/default/N, made by `baton set N` at install) into buf,
 * or NULL (buf empty) when baton is not installed or has no set for N. */
const char *rt_algos_default_dir(int nranks, char *buf, size_t n);

/* The same from an explicit colon-separated list (tests, tools). */
bt_result rt_algos_load_files(rt_algos **out, int nranks, const char *files, const char *dir);

int rt_algos_count(const rt_algos *a);
const rt_algo *rt_algos_get(const rt_algos *a, int i);

/* Index of the algorithm called `name` (its IR name or file name), -1. */
int rt_algos_find(const rt_algos *a, const char *name);

/* Chooses an algorithm for a call (never a fused program): same collective, in-place or not (an
 * in-place call may also take an out-of-place program, which then runs on
 * a copy of the input), `bytes` in its size range (across node groups,
 * from BATON_NET_FEWER_BYTES on, also below it for a program whose ranks
 * send to fewer ranks of other groups than every program covering the
 * size); among those, across node groups first the fewest such peers,
 * then one that runs the call without copying the input (rt_algo.copies),
 * then one whose chunks divide the count evenly, then the first loaded.  -1 when none fits.  The
 * choice and the reasons for it are logged at INFO (rank 0 only when
 * `log` is 0). */
int rt_algos_select(const rt_algos *a, ir_coll coll, int inplace, uint64_t bytes, int64_t count, int log);

/* The same among the algorithms i for which usable(ctx, i) is nonzero
 * (NULL: all), a direct program usable for the call winning over the
 * others (it does not depend on the copies the others' score weighs).
 * `inplace` may also be RT_PLACE_EITHER: a program that runs the call in
 * place and out of place, fewer copies of the input over the two winning
 * (one program for every rank of a call whose ranks may differ in
 * placement: rt_dispatch.c). */
#define RT_PLACE_EITHER 2
int rt_algos_select_by(const rt_algos *a, ir_coll coll, int inplace, uint64_t bytes, int64_t count,
                       int (*usable)(void *ctx, int i), void *ctx, int log);

/* The same for a rooted collective (broadcast, reduce) with root `root`:
 * every rank of a call must choose the same program, so the choice does
 * not depend on the caller's layout (only the root has one to speak of;
 * rt_call runs any rooted program in place or out of place there):
 * `bytes` in its size range, a direct program for which usable(ctx, i) is
 * nonzero (NULL: none is) first, then chunks that divide the count, then
 * the first loaded.  Whether a direct program is usable depends on what
 * every rank shares: the call captured in a graph, one process, or
 * registered windows. */
int rt_algos_select_rooted(const rt_algos *a, ir_coll coll, int root, uint64_t bytes, int64_t count,
                           int (*usable)(void *ctx, int i), void *ctx, int log);

/* The algorithms a user sees (baton_comm_algorithm_*): those loaded,
 * without the relabelled copies of rooted programs; the index of the i-th
 * among all, or -1. */
int rt_algos_listed(const rt_algos *a);
int rt_algos_listed_index(const rt_algos *a, int i);

/* The same for a fused call: a fused program of collective coll whose
 * compute steps run opcode `compute` (IR_OP_GEMV), `bytes` (of the
 * output) in its size range, and usable[i] (NULL: all are; the runtime
 * leaves out those this GPU cannot hold); the first loaded whose chunks
 * divide the count, else the first.  Programs without compute steps are
 * never chosen, and rt_algos_select never chooses a fused one. */
#define RT_COMPUTE_WEIGHTED 0x100
#define RT_COMPUTE_OP(x) ((x) & 0xff)
int rt_algos_select_fused(const rt_algos *a, ir_coll coll, int compute, uint64_t bytes, int64_t count,
                          const unsigned char *usable, int log);

void rt_algos_free(rt_algos *a);

#endif
