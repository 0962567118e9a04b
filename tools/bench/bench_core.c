/* bench_core.c -- `baton bench` options, size sweep, geometry, bandwidth
 * formulas and the check data (nccl-tests' conventions throughout). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_util.h"

const char *const bench_coll_name[BENCH_COLL_COUNT] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                                        "broadcast", "reduce", "gather", "scatter"};
const char *const bench_lib_name[BENCH_NLIBS] = {"nccl", "baton"};

int bench_reduces(bench_coll c) { return c == BENCH_ALLREDUCE || c == BENCH_REDUCESCATTER || c == BENCH_REDUCE; }

int bench_rooted(bench_coll c) {
  return c == BENCH_BROADCAST || c == BENCH_REDUCE || c == BENCH_GATHER || c == BENCH_SCATTER;
}

int bench_root_check(const bench_opts *o, int nranks, FILE *err) {
  if (!bench_rooted(o->coll) || o->root < nranks) return 0;
  fprintf(err, "baton bench: -r %d is not a rank: the root is one of 0..%d (%d ranks)\n", o->root, nranks - 1, nranks);
  return 2;
}

int bench_combos(const bench_opts *o, bench_combo *c) {
  int n = 0, ops = o->all_ops && bench_reduces(o->coll);
  for (int t = 0; t < IP_DTYPE_COUNT; t++) {
    if (!o->all_types && t != (int)o->dtype) continue;
    for (int op = 0; op < IP_REDOP_COUNT; op++) {
      if (!ops && op != (int)o->op) continue;
      c[n].dtype = (ip_dtype)t;
      c[n++].op = (ip_redop)op;
    }
  }
  return n;
}

bench_opts bench_opts_combo(const bench_opts *o, const bench_combo *c) {
  bench_opts x = *o;
  x.dtype = c->dtype;
  x.op = c->op;
  return x;
}

const char *bench_place_name(int inplace) {
  return inplace == BENCH_BOTH_PLACES ? "out of place and in place" : inplace ? "in place" : "out of place";
}

static const char bench_help[] =
  "usage: baton bench [options]\n"
  "\n"
  "Measures one collective with NCCL (libnccl.so.2 or BATON_NCCL_LIB, loaded at\n"
  "run time) and with baton (algorithms from BATON_ALGO_DIR etc.) in the same\n"
  "process, on the same buffers, timed the same way, interleaved per size; checks\n"
  "every size for both and prints nccl-tests' columns for each and the ratio\n"
  "NCCL time / baton time (> 1: baton is faster).  nccl-tests' options keep their\n"
  "meaning where both have them.\n"
  "\n"
  "options (nccl-tests spelling):\n"
  "  -b, --minbytes N      smallest size in bytes; suffix K, M or G (x 1024; 1.5K\n"
  "                        too) (default 32M)\n"
  "  -e, --maxbytes N      largest size (default 32M)\n"
  "  -f, --stepfactor N    multiply the size by N (> 1) between sizes\n"
  "  -i, --stepbytes N     else add N bytes (default 1M)\n"
  "  -g, --ngpus N         GPUs driven by this one process (default: every GPU)\n"
  "  -P, --procs           one process per GPU (forked; unique ids, CUDA IPC)\n"
  "  -w, --warmup_iters N  untimed calls before each timed block (default 5)\n"
  "  -n, --iters N         timed calls per block (default 20)\n"
  "  -G, --cudagraph N     capture the n calls in a CUDA graph per GPU and launch\n"
  "                        it N times (time = wall / (n*N)); 0: no graph (default)\n"
  "  -R, --local_register N  0: no registration (default); 1 or 2: a process per\n"
  "                        GPU (-P) registers the buffers with both libraries\n"
  "                        first, as applications that reuse buffers do\n"
  "                        (baton_comm_register: eager calls reach the peers' own\n"
  "                        buffers; NCCL: ncclCommRegister, for 2 as for 1)\n"
  "  -c, --check N         check count: before timing, each size runs N calls on\n"
  "                        known data per library, every output element compared\n"
  "                        (#wrong sums them); 0: no check (default 1)\n"
  "  -o, --op OP           sum (default), prod, max, min, avg; all: each of them\n"
  "                        (allgather, alltoall, broadcast, gather and scatter\n"
  "                        take no op: all runs them once)\n"
  "  -d, --datatype T      f32 (default), f64, f16, bf16, i32, u32, i64, u64, i8, u8\n"
  "                        (or nccl-tests' float, half, bfloat16, int32, ...); all:\n"
  "                        each of them.  -d all, -o all: each (type, op) pair runs\n"
  "                        the sweep, type outer, op inner (nccl-tests' order), in\n"
  "                        one table (the type and redop columns tell them apart;\n"
  "                        the footer adds a line per pair)\n"
  "  -r, --root N          the root rank of broadcast, reduce, gather and scatter,\n"
  "                        0..ranks-1 (default 0; the others ignore it)\n"
  "  -C, --report_cputime N, -I, --per_iter_timing N: 0 only (baton bench reports\n"
  "                        wall-clock times per block; the CSV has each call's host\n"
  "                        time)\n"
  "\n"
  "baton's own options:\n"
  "  --collective C        allreduce (default), allgather, reducescatter, alltoall,\n"
  "                        broadcast, reduce, gather, scatter\n"
  "  --inplace P           0: out of place (default); 1: in place (NCCL's in-place\n"
  "                        layouts); 2 or both: every size out of place, then in\n"
  "                        place, one line per size with a column group for each\n"
  "                        (one process: not with -P)\n"
  "  --rounds N            interleaved NCCL/baton rounds per size; the median time\n"
  "                        is reported (default 3, at most 64)\n"
  "  --csv FILE            also write the table as CSV (tools/measure/plot_bench.py plots it)\n"
  "  --json FILE           also write the table as JSON\n"
  "  --no-nccl             run baton alone\n"
  "  --between             after every call of either library, a one-block kernel\n"
  "                        on each rank's stream, as a model's graph has between\n"
  "                        two collectives (its time counts on both sides)\n"
  "  --nccl-mem            the buffers from NCCL's ncclMemAlloc, as nccl-tests\n"
  "                        allocates them (default cudaMalloc); needs NCCL\n"
  "  --register            the same as -R 1\n"
  "  --share G             the -g ranks share G GPUs (rank r on GPU r % G), baton\n"
  "                        alone (NCCL takes one rank per GPU): the interpreter's\n"
  "                        costs on machines with fewer GPUs, not NVLink's\n"
  "  --dry-run             print the sizes, counts and buffers and stop (needs -g)\n"
  "  --fused gemv_allreduce   a fused operator against cuBLAS + NCCL instead\n"
  "                        (baton bench --fused gemv_allreduce --help)\n"
  "\n"
  "Sizes are total bytes of the larger buffer, as in nccl-tests.  Time: per block,\n"
  "warmup, then n calls on every GPU's stream, then wait for all: wall clock / n.\n"
  "exit status: 0 all right, 1 wrong elements or a failed call, 2 bad usage or no GPU\n";

void bench_opts_default(bench_opts *o) {
  memset(o, 0, sizeof *o);
  o->minbytes = o->maxbytes = 32 << 20;
  o->stepbytes = 1 << 20;
  o->stepfactor = 1;
  o->warmup = 5;
  o->iters = 20;
  o->rounds = 3;
  o->check = 1;
  o->coll = BENCH_ALLREDUCE;   /* -r 0: the memset's */
  o->dtype = IP_F32;
  o->op = IP_OP_SUM;
}

int bench_parse_size(const char *s, int64_t *bytes) {
  const char *end;
  int64_t v;
  if (bench_parse_scaled(s, "KMG", 1, &v, &end) || (*end && strcmp(end, "B") && strcmp(end, "b"))) return -1;
  *bytes = v;
  return 0;
}

/* s, a decimal integer in [lo, 10^9], into *out: 0, or -1. */
static int parse_int(const char *s, int lo, int *out) {
  return bench_parse_int(s, lo, 1000000000, out);
}

/* --inplace's value: 0, 1, 2 or "both" (2) into *inplace: 0, or -1. */
static int parse_place(const char *s, int *inplace) {
  if (!strcmp(s, "both")) s = "2";
  return bench_parse_int(s, BENCH_OUT_OF_PLACE, BENCH_BOTH_PLACES, inplace);
}

/* nccl-tests' names for the types, accepted beside baton's. */
static int dtype_from_name(const char *s) {
  static const char *const alias[][2] = {
    {"float", "f32"}, {"float32", "f32"}, {"double", "f64"}, {"float64", "f64"}, {"half", "f16"},
    {"float16", "f16"}, {"bfloat16", "bf16"}, {"int32", "i32"}, {"int", "i32"}, {"uint32", "u32"},
    {"int64", "i64"}, {"uint64", "u64"}, {"int8", "i8"}, {"char", "i8"}, {"uint8", "u8"}};
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (!strcmp(s, alias[i][0])) s = alias[i][1];
  return ip_dtype_from_name(s);
}

/* The value of option `shrt`/`lng` at argv[*i] ("-b 8", "-b8", "--minbytes 8",
 * "--minbytes=8"), advancing *i; NULL when argv[*i] is another option.
 * *missing is set when the option is there but its value is not. */
static const char *opt_value(int argc, char **argv, int *i, const char *shrt, const char *lng, int *missing) {
  const char *a = argv[*i];
  size_t ls = strlen(lng);
  if (!strncmp(a, lng, ls) && a[ls] == '=') return a + ls + 1;
  if (!strcmp(a, lng) || !strcmp(a, shrt)) {
    if (*i + 1 >= argc) { *missing = 1; return NULL; }
    return argv[++*i];
  }
  if (shrt[0] && !strncmp(a, shrt, 2) && a[2]) return a + 2;
  return NULL;
}

int bench_parse(bench_opts *o, int argc, char **argv, FILE *out, FILE *err) {
  bench_opts_default(o);
  int got_f = 0, got_i = 0, got_r = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0, bad = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(bench_help, out); return 1; }
    if (!strcmp(a, "-P") || !strcmp(a, "--procs")) { o->procs = 1; continue; }
    if (!strcmp(a, "--dry-run")) { o->dry_run = 1; continue; }
    if (!strcmp(a, "--no-nccl")) { o->no_nccl = 1; continue; }
    if (!strcmp(a, "--between")) { o->between = 1; continue; }
    if (!strcmp(a, "--nccl-mem")) { o->nccl_mem = 1; continue; }
    if (!strcmp(a, "--register")) { o->reg = 1; continue; }
#define OPT(s, l) ((v = opt_value(argc, argv, &i, s, l, &missing)) != NULL || missing)
    if (OPT("-b", "--minbytes")) bad = !v || bench_parse_size(v, &o->minbytes);
    else if (OPT("-e", "--maxbytes")) bad = !v || bench_parse_size(v, &o->maxbytes);
    else if (OPT("-i", "--stepbytes")) { bad = !v || bench_parse_size(v, &o->stepbytes) || o->stepbytes == 0; got_i = 1; }
    else if (OPT("-f", "--stepfactor")) {
      int f = 0;
      bad = !v || parse_int(v, 1, &f);
      o->stepfactor = f;
      got_f = 1;
    }
    else if (OPT("-g", "--ngpus")) bad = !v || parse_int(v, 1, &o->ngpus);
    else if (OPT("", "--share")) bad = !v || parse_int(v, 1, &o->share);
    else if (OPT("-w", "--warmup_iters")) bad = !v || parse_int(v, 0, &o->warmup);
    else if (OPT("-n", "--iters")) bad = !v || parse_int(v, 1, &o->iters);
    else if (OPT("-G", "--cudagraph")) bad = !v || parse_int(v, 0, &o->graph);
    else if (OPT("", "--rounds")) bad = !v || parse_int(v, 1, &o->rounds) || o->rounds > 64;
    else if (OPT("-R", "--local_register")) {
      int r = 0;
      bad = !v || parse_int(v, 0, &r) || r > 2;
      o->reg = r > 0;
    } else if (OPT("-c", "--check")) bad = !v || parse_int(v, 0, &o->check);
    else if (OPT("", "--inplace")) bad = !v || parse_place(v, &o->inplace);
    else if (OPT("-C", "--report_cputime") || OPT("-I", "--per_iter_timing")) {
      int x = 0;
      bad = !v || parse_int(v, 0, &x);
      if (!bad && x) {
        fprintf(err, "baton bench: %s %s is nccl-tests' %s, which baton bench does not do (it reports wall-clock "
                "times per block; the CSV has each call's host time)%s\n", a, v,
                a[1] == 'C' || strstr(a, "cputime") ? "CPU-time report" : "per-iteration timing",
                a[1] == 'C' ? "; the collective is --collective" : a[1] == 'I' ? "; in place is --inplace" : "");
        return 2;
      }
    }
    else if (OPT("-o", "--op")) {
      int x = !v ? -1 : !strcmp(v, "all") ? (int)o->op : ip_redop_from_name(v);
      bad = x < 0;
      if (!bad) {
        o->op = (ip_redop)x;
        o->all_ops = !strcmp(v, "all");
      }
    } else if (OPT("-d", "--datatype")) {
      int x = !v ? -1 : !strcmp(v, "all") ? (int)o->dtype : dtype_from_name(v);
      bad = x < 0;
      if (!bad) {
        o->dtype = (ip_dtype)x;
        o->all_types = !strcmp(v, "all");
      }
    } else if (OPT("", "--collective")) {
      bad = 1;
      for (int c = 0; v && c < BENCH_COLL_COUNT; c++)
        if (!strcmp(v, bench_coll_name[c])) { o->coll = (bench_coll)c; bad = 0; }
    } else if (OPT("-r", "--root")) {
      bad = !v || parse_int(v, 0, &o->root);
      got_r = 1;
    } else if (OPT("", "--csv")) o->csv = v;
    else if (OPT("", "--json")) o->json = v;
    else {
      fprintf(err, "baton bench: unknown option '%s' (baton bench --help lists them)\n", a);
      return 2;
    }
#undef OPT
    if (missing) { fprintf(err, "baton bench: %s needs a value\n", a); return 2; }
    if (bad) {
      /* nccl-tests' letters that baton spelled otherwise before: say where its own went */
      const char *hint = !strncmp(a, "-C", 2) ? " (-C is nccl-tests' report_cputime, 0 or 1; the collective is --collective)"
                         : !strncmp(a, "-R", 2) ? " (-R is nccl-tests' local_register, 0-2; rounds are --rounds)"
                         : !strncmp(a, "-I", 2) ? " (-I is nccl-tests' per_iter_timing; in place is --inplace)"
                                                : "";
      fprintf(err, "baton bench: bad value '%s' for %s%s\n", v ? v : "", a, hint);
      return 2;
    }
  }
  if (got_f && got_i && o->stepfactor > 1) {
    fprintf(err, "baton bench: give -f (multiply) or -i (add), not both\n");
    return 2;
  }
  if (o->minbytes > o->maxbytes) {
    fprintf(err, "baton bench: -b %lld is larger than -e %lld\n", (long long)o->minbytes, (long long)o->maxbytes);
    return 2;
  }
  if (o->stepfactor > 1 && o->minbytes == 0) {
    fprintf(err, "baton bench: -b 0 with -f %lld never grows; start at 1 byte or more\n", (long long)o->stepfactor);
    return 2;
  }
  if (o->share && (o->procs || !o->ngpus || o->share > o->ngpus)) {
    fprintf(err, "baton bench: --share %d needs -g N with N >= %d, one process (not -P)\n", o->share, o->share);
    return 2;
  }
  if (o->ngpus && bench_root_check(o, o->ngpus, err)) return 2;
  if (o->nccl_mem && (o->no_nccl || o->share)) {
    fprintf(err, "baton bench: --nccl-mem allocates with NCCL: not with --no-nccl or --share\n");
    return 2;
  }
  if (o->reg && !o->procs) {
    fprintf(err, "baton bench: -R (--register) needs -P (one process drives every GPU's buffers already)\n");
    return 2;
  }
  if (o->inplace == BENCH_BOTH_PLACES && o->procs) {
    fprintf(err, "baton bench: --inplace both needs one process (not -P); with -P run --inplace 0, then --inplace 1\n");
    return 2;
  }
  if (o->all_types) o->dtype = (ip_dtype)0;   /* the first combination's, until the run moves on */
  if (o->all_ops) o->op = (ip_redop)0;
  if (o->all_ops && !bench_reduces(o->coll))
    fprintf(err, "baton bench: note: %s takes no reduction op: -o all runs it once (redop none)\n",
            bench_coll_name[o->coll]);
  if (got_r && !bench_rooted(o->coll))
    fprintf(err, "baton bench: note: %s has no root: -r is ignored\n", bench_coll_name[o->coll]);
  if ((o->csv && !*o->csv) || (o->json && !*o->json)) {
    fprintf(err, "baton bench: --csv and --json need a file name\n");
    return 2;
  }
  int64_t s[BENCH_MAX_SIZES];
  if (bench_sizes(o, s, BENCH_MAX_SIZES) < 0) {
    fprintf(err, "baton bench: -b/-e/-f/-i give more than %d sizes\n", BENCH_MAX_SIZES);
    return 2;
  }
  return 0;
}

int bench_sizes(const bench_opts *o, int64_t *sizes, int max) {
  int n = 0;
  for (int64_t s = o->minbytes; s <= o->maxbytes;
       s = o->stepfactor > 1 ? s * o->stepfactor : s + o->stepbytes) {
    if (n == max) return -1;
    sizes[n++] = s;
    if (o->stepfactor <= 1 && o->stepbytes <= 0) break;
  }
  return n;
}

void bench_geometry(bench_coll c, int64_t bytes, int esize, int nranks, bench_geom *g) {
  int64_t count = bytes / esize;
  int64_t align = 16 / esize;   /* nccl-tests: per-rank counts in 16-byte multiples */
  int64_t base = (count / nranks) / align * align;
  memset(g, 0, sizeof *g);
  g->blocks = 1;
  switch (c) {
  case BENCH_ALLREDUCE:
  case BENCH_BROADCAST:
  case BENCH_REDUCE:
    g->count = g->send_elems = g->recv_elems = count;
    break;
  case BENCH_ALLGATHER:
  case BENCH_GATHER:
    g->count = g->send_elems = base;
    g->recv_elems = base * nranks;
    g->send_inplace = base;
    g->blocks = nranks;
    break;
  case BENCH_REDUCESCATTER:
  case BENCH_SCATTER:
    g->count = g->recv_elems = base;
    g->send_elems = base * nranks;
    g->recv_inplace = base;
    break;
  default:   /* alltoall */
    g->count = base;
    g->send_elems = g->recv_elems = base * nranks;
    g->blocks = nranks;
    break;
  }
  int64_t big = g->send_elems > g->recv_elems ? g->send_elems : g->recv_elems;
  g->bytes = big * esize;
}

void bench_bw(bench_coll c, const bench_geom *g, int nranks, double sec, double *algbw, double *busbw) {
  double factor = c == BENCH_ALLREDUCE ? 2.0 * (nranks - 1) / nranks
                  : c == BENCH_BROADCAST || c == BENCH_REDUCE ? 1.0
                                                               : (double)(nranks - 1) / nranks;
  *algbw = sec > 0 ? (double)g->bytes / 1.0e9 / sec : 0;
  *busbw = *algbw * factor;
}

/* ---- check data ---- */

enum { PERIOD = 1021 };   /* a prime: chunk boundaries do not line up with it */

/* Input value of rank r at index k mod PERIOD: small integers that every
 * type holds exactly, and whose sums (3 per rank), products (powers of
 * two) and max/min stay exact. */
static double input_value(bench_coll c, ip_redop op, int r, int64_t k) {
  if (bench_reduces(c) && (op == IP_OP_SUM || op == IP_OP_AVG)) return (double)((k * 7 + r * 3) % 4);
  if (bench_reduces(c) && op == IP_OP_PROD) return (k + r) % 3 == 0 ? 2.0 : 1.0;
  return (double)((k * 7 + r * 13 + 1) % 101);
}

void bench_fill(bench_coll c, ip_redop op, ip_dtype t, int rank, int64_t n, void *dst) {
  int es = ip_dtype_size[t];
  int64_t filled = n < PERIOD ? n : PERIOD;
  for (int64_t k = 0; k < filled; k++) ip_set(t, dst, (size_t)k, input_value(c, op, rank, k));
  /* Doubling copies keep the period: filled stays a multiple of it. */
  while (filled < n) {
    int64_t m = filled < n - filled ? filled : n - filled;
    memcpy((char *)dst + filled * es, dst, (size_t)(m * es));
    filled += m;
  }
}

static int same(ip_dtype t, const void *got, const void *want, size_t i, size_t j) {
  double a = ip_get(t, got, i), b = ip_get(t, want, j);
  if (a == b) return 1;
  if (ip_dtype_kind[t] != 'F') return 0;
  return fabs(a - b) <= ip_dtype_tolerance(t) * fmax(1.0, fabs(b));   /* NaN fails */
}

/* What rank's receive buffer must hold in block b (bench_check's case),
 * one period of it: want[j] is element k*PERIOD + j of the block for
 * every k; tmp is scratch of the same size.  1 when the call must leave the buffer as it
 * was (reduce and gather off the root: compared byte for byte), else 0. */
static int expected(const bench_opts *o, int nranks, int rank, int b, int64_t count, char *want, char *tmp) {
  bench_coll c = o->coll;
  ip_dtype t = o->dtype;
  if ((c == BENCH_REDUCE || c == BENCH_GATHER) && rank != o->root) {
    /* In place the rank's input is in the buffer: all of a reduce's, a gather's block rank. */
    if (o->inplace == BENCH_IN_PLACE && (c == BENCH_REDUCE || b == rank))
      for (int64_t j = 0; j < PERIOD; j++) ip_set(t, want, (size_t)j, input_value(c, o->op, rank, j));
    else
      memset(want, BENCH_POISON, (size_t)PERIOD * ip_dtype_size[t]);
    return 1;
  }
  int64_t phase = c == BENCH_REDUCESCATTER || c == BENCH_ALLTOALL || c == BENCH_SCATTER ? (rank * count) % PERIOD : 0;
  if (bench_reduces(c)) {
    for (int q = 0; q < nranks; q++) {
      for (int64_t j = 0; j < PERIOD; j++)
        ip_set(t, q ? tmp : want, (size_t)j, input_value(c, o->op, q, (phase + j) % PERIOD));
      if (q) ip_reduce(t, o->op, want, want, tmp, PERIOD);
    }
    if (o->op == IP_OP_AVG) ip_divide(t, want, PERIOD, nranks);
  } else {
    /* Block b comes from rank b; a broadcast's and a scatter's from the root. */
    int from = c == BENCH_BROADCAST || c == BENCH_SCATTER ? o->root : b;
    for (int64_t j = 0; j < PERIOD; j++) ip_set(t, want, (size_t)j, input_value(c, o->op, from, (phase + j) % PERIOD));
  }
  return 0;
}

int64_t bench_check(const bench_opts *o, int nranks, int rank, const bench_geom *g, const void *got,
                    int64_t *first_bad) {
  ip_dtype t = o->dtype;
  int es = ip_dtype_size[t];
  char *want = malloc((size_t)PERIOD * es), *tmp = malloc((size_t)PERIOD * es);
  int64_t wrong = 0;
  if (first_bad) *first_bad = -1;
  for (int b = 0; b < g->blocks; b++) {
    int exact = expected(o, nranks, rank, b, g->count, want, tmp);
    const char *out = (const char *)got + (size_t)(b * g->count) * es;
    for (int64_t i = 0; i < g->count; i += PERIOD) {
      int64_t len = g->count - i < PERIOD ? g->count - i : PERIOD;
      if (!memcmp(out + i * es, want, (size_t)(len * es))) continue;
      for (int64_t j = 0; j < len; j++)
        if (exact ? memcmp(out + (i + j) * es, want + j * es, (size_t)es) != 0
                  : !same(t, out, want, (size_t)(i + j), (size_t)j)) {
          if (first_bad && *first_bad < 0) *first_bad = b * g->count + i + j;
          wrong++;
        }
    }
  }
  free(want);
  free(tmp);
  return wrong;
}
