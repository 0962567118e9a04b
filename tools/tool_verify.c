/* tool_verify.c -- `baton verify`, `baton explain`, `baton ops`, `baton params`. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ip_compute.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_geom.h"
#include "ir_read.h"
#include "ir_write.h"
#include "rt_param.h"
#include "tool.h"

static const char verify_help[] =
  "usage: baton verify [options] FILE.xml [...]\n"
  "\n"
  "Validates each IR file, runs it for all ranks on the CPU reference executor\n"
  "(every rank's thread blocks interleaved on one thread by an event-driven\n"
  "scheduler, bounded FIFO slots, dependencies per tile) on real data, and\n"
  "checks the collective's postcondition.\n"
  "\n"
  "options:\n"
  "  --ranks N        fail unless the program is for N ranks\n"
  "  -d, --dtype T    f32 (default), f64, f16, bf16, i32, u32, i64, u64, i8, u8, or all\n"
  "  --op OP          sum (default), prod, max, min, avg, or all\n"
  "  --count N        elements per block (default 4099: uneven on purpose)\n"
  "  --tile N         elements per tile (default 128; 0 = BATON_EXEC_TILE or one tile per chunk)\n"
  "  --slots N        FIFO slots per connection (default: the slots=\"N\" the compiler\n"
  "                   recorded in the file, the fewest its schedule is proven\n"
  "                   deadlock-free with; BATON_EXEC_SLOTS for a file without one)\n"
  "  --root R|all     rooted collectives: run the program for root R (or every\n"
  "                   root), relabelled as the runtime does (default: 0, as written)\n"
  "  --inplace        run in place (needs an in-place program)\n"
  "  --outofplace     run out of place (an in-place program gets its input copied first);\n"
  "                   at most one of the two (default: the program's own)\n"
  "  --dim NAME=N     a fused program's operand dimension (e.g. --dim K=4096);\n"
  "                   unbound ones are 67.  Its operands hold small integers, so\n"
  "                   its partial results are exact; the output is compared with\n"
  "                   the exact result within (ranks x the type's unit roundoff)\n"
  "                   x the sum of the terms' magnitudes.  --dtype all runs the\n"
  "                   types its compute steps take (gemv: f32, f16, bf16)\n"
  "  --expect SPEC    postcondition of a custom collective, e.g.\n"
  "                   'o[r][c]=i[r-1][c] if r>=1' (rules separated by ';', i[*][x]\n"
  "                   is the reduction over all ranks; unnamed in-place chunks must\n"
  "                   keep their value); refused for a built-in collective\n"
  "  --as-run         the program as a communicator loads and calls it: the runtime's\n"
  "                   rewrites of the IR applied (dependencies past a step's first as\n"
  "                   nop steps), BATON_EXEC_SLOTS slots (a program proven for more is\n"
  "                   refused, as the runtime refuses it), every root of a rooted one,\n"
  "                   in place and out of place (unless --inplace/--outofplace)\n"
  "  -q, --quiet      print only failures\n"
  "  -v, --verbose    also say, per file, how many FIFO slots it runs with and why\n"
  "\n"
  "Every number N may end in K, M or G: x1024, x1024^2, x1024^3 (--count 64K).\n"
  "\n"
  "exit status: 0 all files pass, 1 a file is invalid, wrong, deadlocks or is too\n"
  "large for this machine at --count, 2 bad usage (--expect with a built-in\n"
  "collective alone); several files: each is reported, then one line for all,\n"
  "and the status is the worst; --expect applies to the custom ones among them\n";

typedef struct vopts {
  int ranks, quiet, verbose, inplace;
  int dtypes[IP_DTYPE_COUNT], ndtypes;
  int dtype_given;      /* --dtype was given; else f32, or bf16 for a program that takes only that */
  int ops[IP_REDOP_COUNT], nops;
  long long count, tile;
  int count_given;      /* --count was given; else 4099, or for a fused or interleaved program one that fits it */
  int slots;            /* --slots; 0: the program's own (slots_for) */
  int root, all_roots;  /* --root R / --root all (rooted collectives); 0: as written */
  int root_given;
  const char *expect;
  ip_dims dims;
  int batch;            /* several files: --expect applies to the custom ones, a summary line ends */
  int as_run;           /* --as-run: the program as a communicator runs it (as_run()) */
} vopts;

/* --slots: BATON_EXEC_SLOTS's range. */
#define VERIFY_MAX_SLOTS 1024
/* Files one `baton verify` takes. */
#define MAX_FILES 256

/* The FIFO slots per connection p is checked and run with: --slots, else
 * the slots its compiler recorded, else BATON_EXEC_SLOTS.  *why says which. */
static int slots_for(const ir_prog *p, const vopts *vo, const char **why) {
  if (vo->slots > 0) { *why = "--slots"; return vo->slots; }
  if (vo->as_run) { *why = "--as-run: BATON_EXEC_SLOTS, the runtime's"; return (int)rt_param_int(RT_PARAM_EXEC_SLOTS); }
  if (p->slots > 0) { *why = "the program's slots attribute: the fewest its schedule is proven deadlock-free with"; return p->slots; }
  *why = "BATON_EXEC_SLOTS: the program records no slots attribute";
  return (int)rt_param_int(RT_PARAM_EXEC_SLOTS);
}

/* Saturating arithmetic for the size estimate (non-negative operands). */
static int64_t sat_add(int64_t a, int64_t b) { int64_t x; return __builtin_add_overflow(a, b, &x) ? INT64_MAX : x; }
static int64_t sat_mul(int64_t a, int64_t b) { int64_t x; return __builtin_mul_overflow(a, b, &x) ? INT64_MAX : x; }

/* The memory this machine gives a process: its physical memory, or the
 * address-space limit (ulimit -v) when that is lower; INT64_MAX unknown. */
static int64_t memory_limit(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t m = pages > 0 && page > 0 ? sat_mul(pages, page) : INT64_MAX;
  struct rlimit rl;
  if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < (uint64_t)m)
    m = (int64_t)rl.rlim_cur;
  return m;
}

/* A lower bound of the bytes the CPU executor allocates for p at `count`
 * elements of es bytes: every rank's user buffers, reference data, scratch
 * and FIFO slots, and a fused program's operands and exact reference
 * values; saturates at INT64_MAX.  -1 with *bad_rank set when
 * a rank's geometry passes IR_GEOM_MAX_ELEMS. */
static int64_t run_bytes(const ir_prog *p, const vopts *vo, int64_t count, int es, int inplace, int *bad_rank) {
  int aliased = ir_prog_aliased(p, inplace);
  const char *why;
  int nslots = slots_for(p, vo, &why);
  int64_t maxcnt = ir_prog_max_cnt(p), bytes = 0;
  for (int r = 0; r < p->ngpus; r++) {
    ir_geom g;
    if (ir_geom_init(&g, p, r, count, aliased)) { *bad_rank = r; return -1; }
    int64_t elems = g.elems[IR_BUF_INPUT];                    /* the reference input */
    if (inplace) elems = sat_add(elems, g.span);
    else elems = sat_add(elems, sat_add(g.elems[IR_BUF_INPUT], g.elems[IR_BUF_OUTPUT]) + (aliased ? g.span : 0));
    elems = sat_add(elems, g.elems[IR_BUF_SCRATCH]);
    bytes = sat_add(bytes, sat_mul(elems, es));
    int64_t tile = vo->tile > 0 ? vo->tile : rt_param_int(RT_PARAM_EXEC_TILE);
    if (tile < 1 || tile > g.cap) tile = g.cap > 0 ? g.cap : 1;
    int64_t slot = sat_mul(sat_mul(maxcnt, tile), es), ntiles = ir_geom_ntiles(&g, tile);
    for (int t = 0; t < p->gpus[r].ntbs; t++) {
      const ir_tb *tb = &p->gpus[r].tbs[t];
      bytes = sat_add(bytes, sat_mul(slot, 2 + (tb->send >= 0 ? nslots : 0)));
      if (ir_tb_compute(tb)) bytes = sat_add(bytes, sat_mul(tb->nsteps, ntiles));
    }
    int64_t shape[IR_MAX_OPERANDS][2];   /* a shape that cannot be bound is the run's to report */
    if (ir_prog_fused(p) && !ip_operand_shapes(p, &g, &vo->dims, IP_CPU_DIM, shape, NULL)) {
      for (int k = 0; k < p->noperands; k++) {   /* the operands' test data, as many as the shapes say */
        int os = p->operands[k].kind == IR_OPND_INDEX ? ip_dtype_size[ip_operand_dtype(p, k, IP_F32)] : es;
        bytes = sat_add(bytes, sat_mul(sat_mul(shape[k][0], shape[k][1]), os));
      }
      bytes = sat_add(bytes, sat_mul(g.elems[IR_BUF_INPUT], 2 * (int64_t)sizeof(double)));   /* exact values */
    }
  }
  return bytes;
}

/* Whether the CPU executor's buffers for p at vo->count elements of es
 * bytes can exist: every rank's geometry within IR_GEOM_MAX_ELEMS, and
 * run_bytes within this machine's memory.  Otherwise prints one line
 * saying what was refused and the largest --count that fits, and returns
 * 0. */
static int sizes_fit(const char *path, const ir_prog *p, const vopts *vo, int es, int inplace) {
  int bad = 0;
  int64_t bytes = run_bytes(p, vo, vo->count, es, inplace, &bad);
  if (bytes < 0) {
    int aliased = ir_prog_aliased(p, inplace);
    fprintf(stderr, "%s: --count %lld: rank %d's buffers would hold more than %lld elements, the most baton "
            "addresses; this program takes a count of at most %lld\n", path, vo->count, bad,
            (long long)IR_GEOM_MAX_ELEMS, (long long)ir_geom_max_count(p, bad, aliased));
    return 0;
  }
  int64_t mem = memory_limit();
  if (bytes <= mem) return 1;
  int64_t lo = 0, hi = vo->count;   /* the largest count that fits: run_bytes grows with the count */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2, b = run_bytes(p, vo, mid, es, inplace, &bad);
    if (b >= 0 && b <= mem) lo = mid;
    else hi = mid;
  }
  char need[32], fits[96];
  if (bytes == INT64_MAX) snprintf(need, sizeof need, "more than %lld", (long long)INT64_MAX);
  else snprintf(need, sizeof need, "%lld", (long long)bytes);
  if (lo > 0) snprintf(fits, sizeof fits, "use --count %lld or less%s", (long long)lo, es > 1 ? " (or a smaller --dtype)" : "");
  else snprintf(fits, sizeof fits, "no --count fits");
  fprintf(stderr, "%s: --count %lld: the buffers%s of a %d-byte type would need %s bytes, over the %lld bytes of "
          "memory this machine gives the process; %s\n", path, vo->count, ir_prog_fused(p) ? " and operands" : "", es,
          need, (long long)mem, fits);
  return 0;
}

static int parse_list(const char *v, int all, int (*from)(const char *), int *out, int *n,
                      const char *what) {
  if (!strcmp(v, "all")) {
    for (int i = 0; i < all; i++) out[i] = i;
    *n = all;
    return 1;
  }
  int x = from(v);
  if (x < 0) { fprintf(stderr, "baton verify: unknown %s '%s'\n", what, v); return 0; }
  out[0] = x;
  *n = 1;
  return 1;
}

/* The routes, exactly (ip_cpu_verify_routes): value runs alone passed an
 * AllToAll that moved no block at the default count (its block b of rank
 * a and block a of rank b hold the same values when the count is 4 modulo
 * 9).  0 when it passes, 1 when it fails (the reason printed). */
static int route_run(const char *path, const ir_prog *p, const vopts *vo, const ir_expect *ex, int slots, rt_diag *d) {
  ip_cpu_opts like = {.inplace = vo->inplace, .slots = slots, .expect = ex, .dims = &vo->dims};
  ip_cpu_report rep;
  rt_diag_clear(d);
  bt_result r = ip_cpu_verify_routes(p, &like, &rep, d);
  if (!r) return 0;
  char what[64];
  fprintf(stderr, "%s: %s with every element's origin traced\n%s", path, ip_cpu_verdict(r, 1, what, sizeof what),
          rt_diag_text(d));
  return 1;
}

/* Verifies program p (read and checked) on the CPU as vo asks: races,
 * then one run per type and operator.  0 when it passes, 1 when it fails
 * (the reason printed). */
static int verify_prog(const char *path, const ir_prog *p, const vopts *vo, const ir_expect *ex, rt_diag *d) {
  int rc = 1;
  const char *why;
  int slots = slots_for(p, vo, &why);
  int inplace = vo->inplace < 0 ? p->inplace : vo->inplace;
  if (!tool_dims_known(path, p, &vo->dims)) return 1;   /* a --dim the program never reads is a typo */
  int unchecked = 0;
  if (ir_check_races_of(p, ir_prog_aliased(p, inplace), &unchecked, d)) {
    fprintf(stderr, "%s: %s\n%s", path, inplace ? "unsafe in place" : "unsafe", rt_diag_text(d));
    return 1;
  }
  if (vo->ranks && vo->ranks != p->ngpus) {
    fprintf(stderr, "%s: the program is for %d ranks, not %d\n", path, p->ngpus, vo->ranks);
    return 1;
  }
  vopts own = *vo;   /* the default type: f32, unless the program's compute steps take only bf16 (gemm) */
  if (!vo->dtype_given && !ip_compute_takes(p, IP_F32) && ip_compute_takes(p, IP_BF16)) own.dtypes[0] = IP_BF16;
  /* A fused or interleaved program without --count: dimensions --dim left
   * unbound small and a count of whole output rows, as compile checks it. */
  if (!vo->count_given && (ir_prog_fused(p) || p->interleave)) own.count = ip_dims_fit(p, &own.dims, own.count);
  vo = &own;
  int es = 1;   /* the largest type asked for sizes the buffers */
  for (int a = 0; a < vo->ndtypes; a++)
    if (ip_dtype_size[vo->dtypes[a]] > es) es = ip_dtype_size[vo->dtypes[a]];
  if (!sizes_fit(path, p, vo, es, inplace)) return 1;
  int reduces = ir_coll_reduces(p->coll);
  int nops = reduces ? vo->nops : 1;
  ip_cpu_report tot = {0};
  int runs = 0;
  rc = 0;
  int ntypes = 0;
  for (int a = 0; a < vo->ndtypes && !rc; a++)
    for (int b = 0; b < nops && !rc; b++) {
      /* every type asked for alone; of "all", those the program takes */
      if (vo->ndtypes > 1 && !ip_compute_takes(p, vo->dtypes[a])) continue;
      ntypes += b == 0;
      ip_cpu_opts o = {.dtype = vo->dtypes[a], .op = reduces ? vo->ops[b] : IP_OP_SUM,
                       .count = vo->count, .inplace = vo->inplace, .tile = vo->tile,
                       .slots = slots, .expect = ex, .dims = &vo->dims};
      ip_cpu_report rep;
      bt_result r = ip_cpu_verify(p, &o, &rep, d);
      if (r) {
        char what[64];
        fprintf(stderr, "%s: %s with %s %s count=%lld\n%s", path, ip_cpu_verdict(r, 0, what, sizeof what),
                ip_dtype_name[o.dtype], ip_redop_name[o.op], (long long)o.count, rt_diag_text(d));
        rc = 1;
        break;
      }
      runs++;
      tot.threads = rep.threads;
      tot.ntiles = rep.ntiles;
      tot.steps += rep.steps;
      tot.messages += rep.messages;
      tot.checked += rep.checked;
      tot.seconds += rep.seconds;
    }
  if (!rc && route_run(path, p, vo, ex, slots, d)) rc = 1;
  if (!rc && unchecked) {   /* runs that pass prove no race freedom: never "ok" */
    fprintf(stderr, "%s: NOT VERIFIED: the race check was skipped on %d of %d ranks (steps x thread blocks, or the "
            "chunk ranges of their steps, over the check's limit of 64 Mi); %d run%s passed\n",
            path, unchecked, p->ngpus, runs, runs == 1 ? "" : "s");
    return 1;
  }
  if (!rc && !vo->quiet) {
    char root[32] = "";
    if (ir_coll_rooted(p->coll)) snprintf(root, sizeof root, " rooted at %d", p->root);
    char dims[160] = "";   /* the dimensions the run bound (--dim, or chosen to fit) */
    for (int k = 0, at = 0; k < vo->dims.n && at < (int)sizeof dims; k++)
      at += snprintf(dims + at, sizeof dims - (size_t)at, ", %s=%lld", vo->dims.name[k], (long long)vo->dims.value[k]);
    printf("%s: ok  %s%s on %d ranks, %ld tbs, %ld steps; %d run%s (%s%s%s, count %lld%s, %s), "
           "%lld tiles, %lld messages, %lld elements checked, %.3f s\n",
           path, ir_coll_name[p->coll], root, p->ngpus, ir_prog_ntbs(p), ir_prog_nsteps(p), runs,
           runs == 1 ? "" : "s", vo->ndtypes == 1 ? ip_dtype_name[vo->dtypes[0]]
                                 : ntypes == IP_DTYPE_COUNT ? "all types" : "the types it takes",
           !reduces ? "" : " ", !reduces ? "" : nops == 1 ? ip_redop_name[vo->ops[0]] : "all ops",
           vo->count, dims, inplace ? "in-place" : "out-of-place", (long long)tot.ntiles,
           (long long)tot.messages, (long long)tot.checked, tot.seconds);
  }
  return rc;
}

/* --as-run: verifies p as a communicator loads and calls it.  The
 * runtime's IR-to-IR rewrites are applied (a step's dependencies past the
 * first become nop steps, ir_deps_split), it runs with the runtime's FIFO
 * slots (BATON_EXEC_SLOTS; a program proven for more is refused, as the
 * runtime refuses it), a rooted program for every root (relabelled), an
 * in-place program in place and out of place (the runtime copies the
 * input first), an out-of-place one in place too where the runtime runs
 * it so as it is (ir_prog_inplace_as_is), unless --inplace or
 * --outofplace says which.  The plan's
 * own rewrites (receive chains folded into one block, fused chains, nop
 * runs waited for at once, lanes, the LL and LL128 encodings) are not IR:
 * the GPU suites test them (docs/VERIFY.md).  0 when every run passes. */
static int as_run(const char *path, ir_prog **pp, const vopts *vo, const ir_expect *ex, rt_diag *d) {
  ir_prog *p = *pp;
  int runtime_slots = (int)rt_param_int(RT_PARAM_EXEC_SLOTS), nops = 0;
  if (p->slots > runtime_slots && vo->slots <= 0) {
    fprintf(stderr, "%s: not run: it is proven deadlock-free with %d FIFO slots per connection (slots=\"%d\"), and "
            "BATON_EXEC_SLOTS is %d: a communicator does not load it\n", path, p->slots, p->slots, runtime_slots);
    return 1;
  }
  if (ir_prog_multideps(p)) {
    ir_prog *q = ir_deps_split(p);
    if (!q) { fprintf(stderr, "%s: out of memory\n", path); return 1; }
    nops = (int)(ir_prog_nsteps(q) - ir_prog_nsteps(p));
    rt_diag_clear(d);
    const char *why;
    if (ir_check_slots(q, slots_for(q, vo, &why), d)) {
      fprintf(stderr, "%s: invalid as run (one dependency a step)\n%s", path, rt_diag_text(d));
      ir_prog_free(q);
      return 1;
    }
    ir_prog_free(p);
    *pp = p = q;
  }
  const int in_place = ir_prog_inplace_as_is(p);   /* an out-of-place AllToAll race-free so too */
  if (!vo->quiet)
    printf("%s: as run: %s, %d FIFO slot%s per connection%s%s\n", path,
           nops ? "one dependency a step" : "as written", (int)(vo->slots > 0 ? vo->slots : runtime_slots),
           (vo->slots > 0 ? vo->slots : runtime_slots) == 1 ? "" : "s",
           ir_coll_rooted(p->coll) ? ", every root" : "",
           vo->inplace >= 0 ? "" : in_place ? ", in place and out of place" : ", out of place");
  if (nops && !vo->quiet) printf("%s: as run: %d nop steps carry the dependencies past each step's first\n", path, nops);
  vopts own = *vo;
  own.as_run = 0;
  own.slots = vo->slots > 0 ? vo->slots : runtime_slots;
  int rc = 0;
  for (int place = 0; place < 2 && !rc; place++) {
    if (vo->inplace >= 0 ? place > 0 : (place == 0 && !in_place)) continue;
    if (vo->inplace < 0) own.inplace = place == 0 ? 1 : 0;
    for (int root = 0; root < (ir_coll_rooted(p->coll) ? p->ngpus : 1) && !rc; root++) {
      ir_prog *q = root ? ir_prog_copy(p, root) : p;
      if (!q) { fprintf(stderr, "%s: out of memory\n", path); return 1; }
      rt_diag_clear(d);
      if (q != p && ir_check_slots(q, own.slots, d)) {
        fprintf(stderr, "%s: invalid rooted at %d\n%s", path, root, rt_diag_text(d));
        rc = 1;
      } else {
        rc = verify_prog(path, q, &own, ex, d);
      }
      if (q != p) ir_prog_free(q);
    }
  }
  return rc;
}

static int verify_one(const char *path, const vopts *vo, const ir_expect *ex) {
  rt_diag *d = rt_diag_new(40);
  ir_prog *p = NULL;
  int rc = 1;
  const char *why = "";
  int slots = 0;
  if (access(path, R_OK)) {   /* not there: no file to call invalid */
    fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
    goto out;
  }
  if (ir_read_file(path, &p, d) || ir_check_slots(p, slots = slots_for(p, vo, &why), d)) {
    fprintf(stderr, "%s: invalid\n%s", path, rt_diag_text(d));
    goto out;
  }
  if (vo->verbose) printf("%s: %d FIFO slot%s per connection (%s)\n", path, slots, slots == 1 ? "" : "s", why);
  if (ex && p->coll != IR_COLL_CUSTOM && !vo->batch) {
    fprintf(stderr, "%s: --expect is for custom collectives; %s has its own postcondition (verify it without "
            "--expect)\n", path, ir_coll_name[p->coll]);
    rc = 2;
    goto out;
  }
  if (ex && p->coll != IR_COLL_CUSTOM) {   /* in a batch: the custom files take --expect, this one its own */
    if (!vo->quiet)
      printf("%s: %s: its own postcondition (--expect is for the batch's custom collectives)\n", path,
             ir_coll_name[p->coll]);
    ex = NULL;
  }
  if (vo->root_given && !ir_coll_rooted(p->coll)) {
    fprintf(stderr, "%s: --root is for rooted collectives (broadcast, reduce, gather, scatter), not %s\n", path, ir_coll_name[p->coll]);
    rc = 2;
    goto out;
  }
  if (vo->root_given && !vo->all_roots && vo->root >= p->ngpus) {
    fprintf(stderr, "%s: --root %d, but the program has ranks 0..%d\n", path, vo->root, p->ngpus - 1);
    rc = 2;
    goto out;
  }
  if (vo->as_run) {
    rc = as_run(path, &p, vo, ex, d);
    goto out;
  }
  /* Another root runs the program relabelled, as the runtime does. */
  int first = vo->all_roots ? 0 : vo->root, last = vo->all_roots ? p->ngpus - 1 : vo->root;
  rc = 0;
  for (int root = first; root <= last && !rc; root++) {
    ir_prog *q = root ? ir_prog_copy(p, root) : p;
    if (!q) {
      fprintf(stderr, "%s: out of memory\n", path);
      rc = 1;
      break;
    }
    rt_diag_clear(d);
    if (q != p && ir_check_slots(q, slots, d)) {
      fprintf(stderr, "%s: invalid rooted at %d\n%s", path, root, rt_diag_text(d));
      rc = 1;
    } else {
      rc = verify_prog(path, q, vo, ex, d);
    }
    if (q != p) ir_prog_free(q);
  }
out:
  ir_prog_free(p);
  rt_diag_free(d);
  return rc;
}

int tool_verify(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) { fputs(verify_help, stdout); return 0; }
  vopts vo = {.inplace = -1, .count = 4099, .tile = 128, .ndtypes = 1, .nops = 1};
  vo.dtypes[0] = IP_F32;
  vo.ops[0] = IP_OP_SUM;
  const char *files[MAX_FILES];
  int nfiles = 0;
  enum { O_RANKS = 256, O_OP, O_COUNT, O_TILE, O_SLOTS, O_EXPECT, O_ROOT, O_DIM, O_INPLACE, O_OUTOFPLACE, O_ASRUN };
  static const struct option longs[] = {
    {"ranks", required_argument, NULL, O_RANKS}, {"dtype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, O_OP}, {"count", required_argument, NULL, O_COUNT},
    {"tile", required_argument, NULL, O_TILE}, {"slots", required_argument, NULL, O_SLOTS},
    {"expect", required_argument, NULL, O_EXPECT}, {"root", required_argument, NULL, O_ROOT},
    {"dim", required_argument, NULL, O_DIM}, {"inplace", no_argument, NULL, O_INPLACE},
    {"outofplace", no_argument, NULL, O_OUTOFPLACE}, {"as-run", no_argument, NULL, O_ASRUN},
    {"verbose", no_argument, NULL, 'v'}, {"quiet", no_argument, NULL, 'q'}, {NULL, 0, NULL, 0}};
  tool_getopt_reset();
  for (int c; (c = tool_getopt("verify", argc, argv, "d:o:vq", longs)) != -1;) {
    const char *v = optarg;
    long long x;
    if (c == O_RANKS) {
      if (!tool_size("verify", "--ranks", v, 1, rt_param_int(RT_PARAM_MAX_RANKS), &x)) return 2;
      vo.ranks = (int)x;
    } else if (c == 'd') {
      if (!parse_list(v, IP_DTYPE_COUNT, ip_dtype_from_name, vo.dtypes, &vo.ndtypes, "dtype")) return 2;
      vo.dtype_given = 1;
    } else if (c == O_OP) {
      if (!parse_list(v, IP_REDOP_COUNT, ip_redop_from_name, vo.ops, &vo.nops, "op")) return 2;
    } else if (c == 'o') {   /* -o is an output file in baton's commands; verify writes none */
      fprintf(stderr, "baton verify: -o names an output file in baton's commands, and verify writes none; the "
              "reduction operator is --op (baton bench keeps nccl-tests' -o)\n");
      return 2;
    } else if (c == O_COUNT) {
      if (!tool_size("verify", "--count", v, 1, IR_GEOM_MAX_ELEMS, &vo.count)) return 2;
      vo.count_given = 1;
    } else if (c == O_TILE) {
      if (!tool_size("verify", "--tile", v, 0, IR_GEOM_MAX_ELEMS, &vo.tile)) return 2;
    } else if (c == O_SLOTS) {
      if (!tool_size("verify", "--slots", v, 1, VERIFY_MAX_SLOTS, &x)) return 2;
      vo.slots = (int)x;
    } else if (c == O_EXPECT) {
      vo.expect = v;
    } else if (c == O_ROOT) {
      vo.root_given = 1;
      if (!strcmp(v, "all")) vo.all_roots = 1;
      else if (!tool_size("verify", "--root", v, 0, rt_param_int(RT_PARAM_MAX_RANKS) - 1, &x)) return 2;
      else vo.root = (int)x;
    } else if (c == O_DIM) {
      if (!tool_dim("verify", &vo.dims, v)) return 2;
    } else if (c == O_INPLACE || c == O_OUTOFPLACE) {
      int want = c == O_INPLACE;
      if (vo.inplace >= 0 && vo.inplace != want) {
        fprintf(stderr, "baton verify: --inplace and --outofplace exclude each other; give one (or neither: the "
                "program's own placement)\n");
        return 2;
      }
      vo.inplace = want;
    } else if (c == O_ASRUN) {
      vo.as_run = 1;
    } else if (c == 'v') {
      vo.verbose = 1;
    } else if (c == 'q') {
      vo.quiet = 1;
    } else {
      return 2;
    }
  }
  for (int i = optind; i < argc; i++) {
    if (nfiles == MAX_FILES) {
      fprintf(stderr, "baton verify: at most %d files at a time ('%s' is one more)\n", MAX_FILES, argv[i]);
      return 2;
    }
    files[nfiles++] = argv[i];
  }
  if (!nfiles) { fputs(verify_help, stderr); return 2; }
  if (vo.as_run && vo.root_given) {
    fprintf(stderr, "baton verify: --as-run runs a rooted program for every root, as the runtime may; leave --root out\n");
    return 2;
  }
  for (int i = 0; i < nfiles; i++)
    if (tool_is_dir("verify", files[i], "an IR file")) return 2;
  ir_expect *ex = NULL;
  if (vo.expect) {
    rt_diag *d = rt_diag_new(4);
    if (ir_expect_parse(vo.expect, "--expect", &ex, d)) {
      fprintf(stderr, "baton verify: %s", rt_diag_text(d));
      rt_diag_free(d);
      return 2;
    }
    rt_diag_free(d);
  }
  vo.batch = nfiles > 1;
  int rc = 0, bad = 0;
  char names[256] = "";
  for (int i = 0; i < nfiles; i++) {
    int r = verify_one(files[i], &vo, ex);
    if (r > rc) rc = r;
    if (!r) continue;
    const char *base = strrchr(files[i], '/');
    base = base ? base + 1 : files[i];
    size_t at = strlen(names);
    if (at < sizeof names - 1)
      snprintf(names + at, sizeof names - at, "%s%s", bad ? ", " : "", base);
    bad++;
  }
  if (vo.batch) {   /* one line for the batch, after each file's own */
    if (bad)
      fprintf(stderr, "baton verify: %d files: %d passed, %d failed (%s)\n", nfiles, nfiles - bad, bad, names);
    else if (!vo.quiet)
      printf("baton verify: %d files: all passed\n", nfiles);
  }
  ir_expect_free(ex);
  return rc;
}

static const char explain_help[] =
  "usage: baton explain [--dot] [-q] FILE.xml [...]\n"
  "\n"
  "Prints each program as a readable listing: per rank, per thread block, one\n"
  "line per step with its operands, peers, dependencies (wait tbT.S), whether\n"
  "it signals, and its provenance.  The file is validated first; problems are\n"
  "printed after the listing.\n"
  "\n"
  "  --dot   print a Graphviz digraph instead (valid programs only): a cluster\n"
  "          per rank and thread block with its steps in order, message edges\n"
  "          between ranks in blue, dependency edges dashed.  Render it with\n"
  "          'dot -Tsvg'.\n"
  "  -q, --quiet   no listing: only the problems of invalid files (a check)\n";

int tool_explain(int argc, char **argv) {
  if (tool_wants_help(argc, argv) || argc < 2) {
    fputs(explain_help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  int failed = 0, dot = 0, quiet = 0;
  enum { O_DOT = 256 };
  static const struct option longs[] = {
    {"dot", no_argument, NULL, O_DOT}, {"quiet", no_argument, NULL, 'q'}, {NULL, 0, NULL, 0}};
  tool_getopt_reset();
  for (int c; (c = tool_getopt("explain", argc, argv, "q", longs)) != -1;) {
    if (c == O_DOT) dot = 1;
    else if (c == 'q') quiet = 1;
    else return 2;
  }
  if (optind >= argc) { fputs(explain_help, stderr); return 2; }
  for (int i = optind; i < argc; i++) {
    rt_diag *d = rt_diag_new(40);
    ir_prog *p = NULL;
    if (access(argv[i], R_OK)) {   /* not there: no file to call invalid */
      fprintf(stderr, "%s: cannot open: %s\n", argv[i], strerror(errno));
      failed++;
    } else if (ir_read_file(argv[i], &p, d)) {
      fprintf(stderr, "%s: invalid\n%s", argv[i], rt_diag_text(d));
      failed++;
    } else if (dot && !quiet) {
      if (ir_check(p, d)) {
        fprintf(stderr, "%s: invalid (no graph for an invalid program)\n%s", argv[i], rt_diag_text(d));
        failed++;
      } else if (ir_write_dot(p, stdout)) {
        failed++;
      }
    } else {
      if (!quiet) ir_explain(p, stdout);
      if (ir_check(p, d)) {
        fprintf(stderr, "%s: invalid\n%s", argv[i], rt_diag_text(d));
        failed++;
      }
    }
    ir_prog_free(p);
    rt_diag_free(d);
  }
  return failed ? 1 : 0;
}

int tool_ops(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) {
    puts("usage: baton ops\n\nPrints the IR opcode table, generated from ir/ir_op.def, as Markdown.");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "baton ops: takes no arguments, got '%s' (usage: baton ops)\n", argv[1]);
    return 2;
  }
  ir_ops_markdown(stdout);
  return 0;
}

int tool_params(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) {
    puts("usage: baton params\n\nPrints every environment parameter (runtime/base/rt_param.def):\nname, type, default, current value and meaning.");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "baton params: takes no arguments, got '%s' (usage: baton params)\n", argv[1]);
    return 2;
  }
  rt_param_print(stdout);
  return 0;
}
