/* bench_util.h -- what the cores of `baton bench --fused` (gemv_allreduce,
 * embedding_alltoall, gemm_alltoall) share: which operator --fused names,
 * options (the common ones, the parse loop, integers, shape lists,
 * name=value splitting) and the text and JSON printers; the size parser
 * and integers serve the collectives' options too.  No CUDA here
 * (tests/test_bench*.c). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The fused operators `baton bench --fused` measures. */
enum { BENCH_FUSED_GEMV_ALLREDUCE = 1, BENCH_FUSED_EMBEDDING_ALLTOALL = 2, BENCH_FUSED_GEMM_ALLTOALL = 3 };

/* Which operator argv's --fused names (argv[0] is "bench"; the last
 * --fused wins): one of the above, or 0 after bench_fused_refuse's line
 * on err. */
int bench_fused_operator(int argc, char **argv, FILE *err);

/* "baton bench: --fused takes gemv_allreduce, embedding_alltoall or
 * gemm_alltoall (the fused operator measured), not 'OP'" on err (op NULL:
 * ''). */
void bench_fused_refuse(FILE *err, const char *op);

/* s, a decimal integer in [lo, hi], into *out: 0, or -1 (*out untouched). */
int bench_parse_int(const char *s, int lo, int hi, int *out);

/* The number at the start of s with an optional unit among `suffixes`
 * (any of "KMG", either case: x 2^10, 2^20, 2^30) into *v, and where it
 * ends into *end; a fraction ("1.5K", rounded down) only when frac.  The
 * one parser of size-like values: collectives' -b/-e/-i
 * (bench_parse_size) and the fused operators' lists (bench_parse_list).
 * 0, or -1 (nothing set) when s starts with no number, or it is negative
 * or above 2^62. */
int bench_parse_scaled(const char *s, const char *suffixes, int frac, int64_t *v, const char **end);

/* A comma-separated list ("2048,4K") into list: at most max values in
 * 1..2^31, each an integer with an optional suffix among `suffixes`
 * (bench_parse_scaled).  0, or -1 on anything else (an empty list or
 * item, an unknown suffix, too many values, out of range). */
int bench_parse_list(const char *s, const char *suffixes, int max, int64_t *list, int *n);

/* Option `name`'s value v as bench_parse_list reads it: 1, or -1 after
 * saying on err what is wrong (too many values, naming the limit, or one
 * that is not a size in 1..2^31). */
int bench_list_value(const char *name, const char *v, const char *suffixes, int max, int64_t *list, int *n, FILE *err);

/* Option argv[*i] that takes a value: its name into name (len bytes; the
 * part before '=' of "--opt=value") and the value into *v ("--opt=value",
 * or the next argument: then *i moves on).  0, or -1 after "baton bench:
 * OPT needs a value" on err when argv ends. */
int bench_opt_value(int argc, char **argv, int *i, char *name, size_t len, const char **v, FILE *err);

/* s, -d's value for the operators that take f32, f16 or bf16 (or
 * "float", "half", "bfloat16"), into *dtype (an ip_dtype): 0, or -1
 * (*dtype untouched). */
int bench_parse_float_dtype(const char *s, int *dtype);

/* The options every fused operator takes: the first member, c, of
 * bench_fused_opts, bench_embed_opts and bench_moe_opts. */
typedef struct bench_common_opts {
  int ngpus;            /* -g: ranks, one GPU each (0, the default: every GPU) */
  int share;            /* --share G: the ranks on G GPUs (0: one GPU each) */
  int warmup, iters, graph, rounds, check;   /* -w, -n, -G, -R, -c: as for collectives */
  int no_nccl;          /* --no-nccl */
  int procs;            /* -P: a forked process per rank (modes that take it) */
  const char *csv, *json;   /* --csv FILE, --json FILE (NULL: not asked) */
} bench_common_opts;

/* What every fused operator's table says of its run: the ranks, the
 * timing options, the GPU, and the baseline's two parts that ran ("" when
 * not: its collective from NCCL, its compute from cuBLAS). */
typedef struct bench_run_info {
  int nranks, share, iters, warmup, graph, rounds;
  int procs;            /* -P: a process per rank */
  char nccl[200], cublas[200];
  char device[128];
} bench_run_info;

/* info's JSON members after an opening brace: "ranks", "share", "procs",
 * "iters", "warmup", "graph", "rounds", "device", then the baseline's parts under
 * compute_key (when not NULL) and coll_key; each with a comma before it
 * but the first. */
void bench_json_info(FILE *f, const bench_run_info *info, const char *compute_key, const char *coll_key);

/* One operator's own part of the parse, for bench_parse_fused; o is the
 * operator's options (bench_*_opts). */
typedef struct bench_mode_parse {
  const char *op;       /* the operator's name: --fused must name it */
  const char *help;     /* --help's text */
  const char *unknown;  /* what the unknown option refusal says it is not for ("--fused gemm_alltoall") */
  /* A flag of its own (an option without a value), a: 1 when it is one
   * (noted in o), 0 when not.  NULL: none. */
  int (*flag)(void *o, const char *a);
  /* An option of its own, name with value v: 1 when it is one (*bad set
   * to nonzero when v is bad, else v noted in o), 0 when not one, -1
   * after its own refusal on err. */
  int (*value)(void *o, const char *name, const char *v, int *bad, FILE *err);
} bench_mode_parse;

/* Parses `baton bench --fused OP [options]` (argv[0] is "bench"): sets
 * c's defaults (-w 5 -n 20 -G 0 -R 3 -c 1; c zeroed by the caller, o's
 * defaults set), then each option: -h/--help, --no-nccl, -P/--procs, m's
 * flags,
 * --fused, -g/--ngpus, --share, -w/--warmup_iters, -n/--iters,
 * -G/--cudagraph, -R/--rounds, -c/--check, --csv, --json, else m's
 * values; then refuses an OP other than m->op, a --share without -g N
 * with N >= G, and -P without -g N or with --share.  0; 1 after --help (m->help on out); 2 after "baton bench:
 * <what>" on err. */
int bench_parse_fused(bench_common_opts *c, void *o, const bench_mode_parse *m, int argc, char **argv, FILE *out,
                      FILE *err);

/* The last check of a parse: --csv and --json name a file.  0, or 2
 * after the refusal on err. */
int bench_check_outputs(const bench_common_opts *c, FILE *err);

/* Derived columns: a / b when both are > 0 (times measured), else -1;
 * the overlap (base - baton) / min(x, y), the share of the shorter part
 * x or y that the fused run hides, when all four are > 0, else -1. */
double bench_time_ratio(double a, double b);
double bench_time_overlap(double base, double baton, double x, double y);

/* A footer's lines: "# average WHAT over N shapes: SUM/N" (none when n
 * is 0); the verdict, "# FAILED: ..." when bad else "# all shapes
 * checked and right", returning bad. */
void bench_print_average(FILE *f, const char *what, int n, double sum);
int bench_print_verdict(FILE *f, int bad);

/* A JSON row's end: its "algorithm" and "error" strings and the '}'. */
void bench_json_row_end(FILE *f, const char *algorithm, const char *error);

/* The end of a JSON table (the rows' ']' and the '}'), f closed: 0, or
 * -1 when it could not be written. */
int bench_json_close(FILE *f);

/* v with printf format fmt ("%9.2f"), or a dash right-aligned in the
 * format's width when v < 0 (not measured). */
void bench_num(FILE *f, const char *fmt, double v);

/* s as a JSON string: quoted, '"' and '\\' escaped, control characters
 * dropped. */
void bench_json_str(FILE *f, const char *s);

/* xorshift64: state *s (nonzero) advanced, its new value; a value in
 * [-1, 1) from it. */
uint64_t bench_xorshift(uint64_t *s);
double bench_frand(uint64_t *s);

/* n elements of type dtype (ip_dtype) drawn by bench_frand from one fixed
 * seed, so that every process of a run makes the same ones (the fused
 * benches tile their operands from them and check each rank's result
 * against every rank's): malloc'd, NULL when out of memory. */
void *bench_pattern(int dtype, size_t n);

#ifdef __cplusplus
}
#endif

#endif
