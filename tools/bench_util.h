/* bench_util.h -- what the cores of `baton bench --fused` (gemv_allreduce,
 * embedding_alltoall, gemm_alltoall) share: which operator --fused names,
 * option values (integers, shape lists, name=value splitting) and the
 * text and JSON printers.  No CUDA here (tests/test_bench*.c). */
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

/* A comma-separated list ("2048,4K") into list: at most max values in
 * 1..2^31, each with an optional suffix among `suffixes` (any of "KMG",
 * either case: x 2^10, 2^20, 2^30).  0, or -1 on anything else (an empty
 * list or item, an unknown suffix, too many values, out of range). */
int bench_parse_list(const char *s, const char *suffixes, int max, int64_t *list, int *n);

/* Option argv[*i] that takes a value: its name into name (len bytes; the
 * part before '=' of "--opt=value") and the value into *v ("--opt=value",
 * or the next argument: then *i moves on).  0, or -1 after "baton bench:
 * OPT needs a value" on err when argv ends. */
int bench_opt_value(int argc, char **argv, int *i, char *name, size_t len, const char **v, FILE *err);

/* v with printf format fmt ("%9.2f"), or a dash right-aligned in the
 * format's width when v < 0 (not measured). */
void bench_num(FILE *f, const char *fmt, double v);

/* s as a JSON string: quoted, '"' and '\\' escaped, control characters
 * dropped. */
void bench_json_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif

#endif
