/* bench.h -- `baton bench`: options, the size sweep, nccl-tests' buffer
 * geometry and bandwidth formulas, the check data and the result table.
 * Nothing here touches CUDA, so all of it is unit-tested without a GPU
 * (tests/test_bench.c); the GPU driver is tools/bench/bench_run.c. */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "ip_dtype.h"

typedef enum bench_coll {
  BENCH_ALLREDUCE, BENCH_ALLGATHER, BENCH_REDUCESCATTER, BENCH_ALLTOALL, BENCH_BROADCAST, BENCH_REDUCE,
  BENCH_GATHER, BENCH_SCATTER, BENCH_COLL_COUNT
} bench_coll;
extern const char *const bench_coll_name[BENCH_COLL_COUNT];

/* The two libraries compared, in the order they run within a round. */
enum { BENCH_NCCL, BENCH_BATON, BENCH_NLIBS };
extern const char *const bench_lib_name[BENCH_NLIBS];

#define BENCH_MAX_SIZES 1024
#define BENCH_MAX_COMBOS (IP_DTYPE_COUNT * IP_REDOP_COUNT)   /* -d all -o all: every (type, op) */

/* -I: where the output goes.  BENCH_BOTH_PLACES runs every size out of
 * place, then in place (nccl-tests' two column groups). */
enum { BENCH_OUT_OF_PLACE, BENCH_IN_PLACE, BENCH_BOTH_PLACES };

/* "out of place", "in place", "out of place and in place" for a -I value. */
const char *bench_place_name(int inplace);

typedef struct bench_opts {
  int64_t minbytes, maxbytes, stepbytes, stepfactor;
  int ngpus;            /* -g; 0: every GPU found */
  int share;            /* --share G: the -g ranks on GPUs 0..G-1 (rank r on r % G), baton alone; 0: one GPU each */
  int procs;            /* -P: one process per GPU */
  int warmup, iters;    /* -w, -n */
  int graph;            /* -G: CUDA-graph launches of the n captured iterations; 0 = no graph */
  int between;          /* --between: a one-block kernel on each rank's stream after every call (both libraries) */
  int nccl_mem;         /* --nccl-mem: the buffers from the loaded NCCL's ncclMemAlloc, as nccl-tests' */
  int rounds;           /* -R: interleaved rounds per size; the median is kept */
  int check;            /* -c N: check count; each size is checked N times per library (0: never) */
  int inplace;          /* -I: BENCH_OUT_OF_PLACE, BENCH_IN_PLACE or BENCH_BOTH_PLACES */
  bench_coll coll;      /* -C */
  int root;             /* -r: the root rank of the rooted collectives (0; the others ignore it) */
  ip_dtype dtype;       /* -d; with all_types the first type (each combination runs on a bench_opts_combo copy) */
  ip_redop op;          /* -o; with all_ops the first op, sum */
  int all_types;        /* -d all: every type, in ip_dtype's order (the help's list) */
  int all_ops;          /* -o all: every op (sum, prod, max, min, avg) where the collective reduces */
  int dry_run, no_nccl;
  int reg;              /* --register: buffers registered with both libraries (baton's windows; ncclCommRegister) */
  const char *csv, *json;
} bench_opts;

/* Fills nccl-tests' defaults where they exist (-b 32M -e 32M -i 1M -f 1,
 * -n 20, -c 1, sum, f32, -I 0: out of place, -r 0) and baton's own (-w 5,
 * -R 3, every GPU). */
void bench_opts_default(bench_opts *o);

/* Parses `baton bench` options (argv[0] is "bench").  Returns 0 (with
 * -o all for a collective that does not reduce, after a note on err that
 * it runs once; with -r for a collective without a root, after a note
 * that it is ignored); 1 when --help was asked (the help is printed to
 * out); 2 after printing "baton bench: <what is wrong>" to err (a root
 * past -g N's ranks among them: bench_root_check). */
int bench_parse(bench_opts *o, int argc, char **argv, FILE *out, FILE *err);

/* 1 for the collectives that take a reduction op (allreduce,
 * reducescatter, reduce), else 0: their redop column says "none". */
int bench_reduces(bench_coll c);

/* 1 for the collectives with a root (broadcast, reduce, gather,
 * scatter), else 0. */
int bench_rooted(bench_coll c);

/* o's root against the run's rank count, for a rooted collective: 0 when
 * it is a rank (0..nranks-1) or the collective has no root; 2 after
 * "baton bench: -r R is not a rank: the root is one of 0..N-1 (N ranks)"
 * on err.  bench_parse checks it against -g N; bench_run, without -g,
 * against the GPUs found. */
int bench_root_check(const bench_opts *o, int nranks, FILE *err);

/* One (type, op) combination that a run sweeps. */
typedef struct bench_combo {
  ip_dtype dtype;
  ip_redop op;
} bench_combo;

/* The combinations o asks for, written to c (room for BENCH_MAX_COMBOS),
 * in nccl-tests' order: type outer, op inner.  -d all: every type
 * (ip_dtype's order), else o->dtype; -o all: every op where the
 * collective reduces, else o->op alone (allgather and alltoall run each
 * type once).  Returns how many, at least 1. */
int bench_combos(const bench_opts *o, bench_combo *c);

/* The options of one combination: o with dtype and op set from c. */
bench_opts bench_opts_combo(const bench_opts *o, const bench_combo *c);

/* "64", "1.5K", "128M", "1G" (units of 1024, either case; an optional
 * trailing B) into bytes, through bench_parse_scaled (bench_util.h), the
 * parser of every size-like option; 0 on success, -1 when malformed or
 * negative. */
int bench_parse_size(const char *s, int64_t *bytes);

/* The sizes nccl-tests visits: minbytes, then times stepfactor (> 1) or
 * plus stepbytes, while <= maxbytes.  Returns how many were written to
 * sizes (at most max), or -1 when there would be more than max. */
int bench_sizes(const bench_opts *o, int64_t *sizes, int max);

/* One size's buffers for nranks ranks, as nccl-tests sets them up:
 * count = bytes / type size, then per collective (allgather, gather,
 * reducescatter, scatter and alltoall round the per-rank count down to a
 * multiple of 16 bytes, gather's receive and scatter's send buffer
 * holding a block of it per rank, like allgather's and reducescatter's;
 * allreduce, broadcast and reduce take count elements in both buffers,
 * in place at the same address). */
typedef struct bench_geom {
  int64_t count;                  /* per-rank count the call takes (the count column) */
  int64_t send_elems, recv_elems; /* elements of each rank's send and receive buffers */
  int64_t send_inplace, recv_inplace; /* in place: send = buf + send_inplace*rank, recv = buf + recv_inplace*rank */
  int64_t bytes;                  /* the size column: the larger buffer, in bytes */
  int blocks;                     /* output blocks of count elements: nranks for allgather, gather, alltoall; else 1 */
} bench_geom;
void bench_geometry(bench_coll c, int64_t bytes, int esize, int nranks, bench_geom *g);

/* nccl-tests' bandwidths in GB/s (1e9 bytes) for one call of sec seconds:
 * algbw = size / time; busbw = algbw * 2(n-1)/n for allreduce, * (n-1)/n
 * for allgather, reducescatter, alltoall, gather and scatter, * 1 for
 * broadcast and reduce. */
void bench_bw(bench_coll c, const bench_geom *g, int nranks, double sec, double *algbw, double *busbw);

/* Check data: element i of rank's input (small integers, exact in every
 * type, periodic in i), written to dst (n elements of type t). */
void bench_fill(bench_coll c, ip_redop op, ip_dtype t, int rank, int64_t n, void *dst);

/* The byte the GPU driver fills every output buffer with before a
 * check's call (NaN in floats, a value no check pattern makes). */
enum { BENCH_POISON = 0xff };

/* Number of elements of got (rank's receive buffer after one call of
 * o's collective, type, op, root and placement, o->inplace 0 or 1:
 * g->recv_elems elements) that differ from what the call must leave
 * there, the inputs bench_fill's and the buffer BENCH_POISON bytes
 * before the call: the collective's output, exact for integers and
 * within a relative tolerance for floats (avg rounds differently in
 * NCCL); for reduce and gather off the root, as nccl-tests, the buffer
 * as it was (out of place the poison, in place the rank's own input in
 * its own block and the poison around it), byte for byte.  first_bad, when not NULL, gets the first wrong index (-1 if
 * none). */
int64_t bench_check(const bench_opts *o, int nranks, int rank, const bench_geom *g, const void *got,
                    int64_t *first_bad);

/* Results. time_us < 0: not measured (see error). wrong < 0: not checked.
 * host_us: host time to enqueue one call (or one graph's share), the part
 * of time_us that launch overhead sets at small sizes; < 0 when not measured. */
typedef struct bench_result {
  double time_us, host_us;
  int64_t wrong;
  char error[200];
} bench_result;

typedef struct bench_row {
  int64_t bytes, count;
  int inplace;          /* this row's placement: 0 out of place, 1 in place */
  ip_dtype dtype;       /* this row's type and op (read where the table has several combinations) */
  ip_redop op;
  bench_result lib[BENCH_NLIBS];
  char algorithm[96];   /* what baton ran (baton_comm_last_algorithm) */
  double net_bytes;     /* baton: payload bytes one rank sent over the network per call (mean of the local
                           ranks; 0 when its peers share its node group) */
} bench_row;

typedef struct bench_table {
  bench_coll coll;
  int root;             /* -r, for the rooted collectives */
  ip_dtype dtype;       /* the type and op of every row, unless all_types / all_ops: then each row's own */
  ip_redop op;
  int all_types, all_ops; /* -d all, -o all (all_ops only where the collective reduces) */
  int inplace;          /* -I's value: with BENCH_BOTH_PLACES each size has two rows, out of place then in place */
  int nranks, procs, iters, warmup, graph, rounds, between, nccl_mem;
  char nccl[200];       /* "NCCL 2.28.9 (libnccl.so.2)"; empty when NCCL is not used */
  char nccl_missing[300]; /* why NCCL is not used */
  bench_row *rows;
  int nrows, maxrows;
} bench_table;

/* Starts a table for the options and rank count (rows are appended by
 * the caller, at most maxrows: one per size, placement and combination,
 * in the order the run makes them: combination, then size, then
 * placement). */
void bench_table_init(bench_table *t, const bench_opts *o, int nranks);
void bench_table_free(bench_table *t);

/* NCCL time / baton time (> 1: baton is faster), or -1 when either is
 * missing. */
double bench_ratio(const bench_row *r);

/* Text output in nccl-tests' style: header (naming the root of broadcast
 * and reduce), one line per size (printed as each size finishes; with
 * -d all / -o all, each combination's sweep after the previous one, the
 * type and redop columns per line), footer with averages (and, with
 * several combinations, a line per combination: its ratio's geometric
 * mean and its wrong elements).  One placement (-I 0 or
 * 1): bench_print_row per row, each library's time, algbw, busbw and
 * #wrong.  Both (-I both): bench_print_pair per size, its out-of-place
 * row then its in-place row side by side, each a column group of NCCL's
 * time and busbw, baton's, #wrong (NCCL/baton) and the ratio.
 * bench_print_footer (both placements' lines where there are two) returns
 * 1 when some element was wrong or a call failed, else 0. */
void bench_print_header(FILE *f, const bench_table *t);
void bench_print_row(FILE *f, const bench_table *t, const bench_row *r);
void bench_print_pair(FILE *f, const bench_table *t, const bench_row *out, const bench_row *in);
int bench_print_footer(FILE *f, const bench_table *t);

/* The table as CSV (one line per size, placement and combination, both
 * libraries side by side, the placement in the inplace column, the
 * combination in type and redop) and as JSON (the same rows, each with
 * its "type", "redop" and "inplace"; the run's "type" and "redop" are
 * "all" with -d all / -o all, its "root" the root of a rooted
 * collective, else null).  0, or -1 when the file cannot be written (errno
 * set). */
int bench_write_csv(const char *path, const bench_table *t);
int bench_write_json(const char *path, const bench_table *t);

/* The GPU part (CUDA builds only): runs the sweep and fills t; returns
 * the exit status (0 all good, 1 wrong or failed, 2 no GPUs / setup
 * failed).  bench_run (tools/bench/bench_run.c): one process driving every GPU;
 * bench_run_procs (tools/bench/bench_procs.c): a process per GPU (-P). */
int bench_run(const bench_opts *o, bench_table *t);
int bench_run_procs(const bench_opts *o, bench_table *t);

#endif
