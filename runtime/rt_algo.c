/* rt_algo.c -- loading IR files named in the environment, and choosing one per call. */
#include "rt_algo.h"

#include "ip_gpu.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_dealias.h"
#include "ir_geom.h"
#include "ir_read.h"
#include "rt_diag.h"
#include "rt_log.h"
#include "rt_param.h"

struct rt_algos {
  int nranks;
  int net;                /* rt_algos_set_nodes found ranks of other groups that some program sends to */
  int n, cap;
  rt_algo *v;
  char **seen;            /* paths already tried */
  int nseen, capseen;
};

static int seen(rt_algos *a, const char *path) {
  for (int i = 0; i < a->nseen; i++)
    if (!strcmp(a->seen[i], path)) return 1;
  if (a->nseen == a->capseen) {
    int c = a->capseen ? 2 * a->capseen : 16;
    char **s = realloc(a->seen, c * sizeof *s);
    if (!s) return 0;
    a->seen = s;
    a->capseen = c;
  }
  a->seen[a->nseen] = strdup(path);
  if (a->seen[a->nseen]) a->nseen++;
  return 0;
}

/* The first line of a diag, for a one-line WARN. */
static const char *first_line(rt_diag *d, char *buf, size_t n) {
  const char *t = rt_diag_text(d);
  size_t len = strcspn(t, "\n");
  if (len >= n) len = n - 1;
  memcpy(buf, t, len);
  buf[len] = 0;
  return buf;
}

static int append(rt_algos *a, const rt_algo *al) {
  if (a->n == a->cap) {
    int c = a->cap ? 2 * a->cap : 8;
    rt_algo *v = realloc(a->v, c * sizeof *v);
    if (!v) return -1;
    a->v = v;
    a->cap = c;
  }
  a->v[a->n++] = *al;
  return 0;
}

/* For an in-place program that would run out-of-place calls on a copy of
 * the input: its rewrite that reads the input where it is (ir_dealias),
 * kept beside it as an out-of-place-only algorithm named NAME_oop when it
 * passes the checks and runs right on the CPU (values, and every route
 * exactly).  Selection prefers it for
 * out-of-place calls over a copy, and a program written out of place over
 * it (rt_algos_select).  Only memory errors fail. */
static bt_result add_direct(rt_algos *a, const rt_algo *al, const char *path) {
  char why[256];
  ir_prog *q = NULL;
  bt_result res = ir_dealias(al->prog, &q, why, sizeof why);
  if (res == BT_ERR_NOMEM) return res;
  if (res) {
    LOG_INFO(RT_SUB_RUNTIME, "algorithm %s: out-of-place calls run on a copy of the input (%s)", path, why);
    return BT_OK;
  }
  rt_diag *d = rt_diag_new(4);
  if (!d) { ir_prog_free(q); return BT_ERR_NOMEM; }
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 1001, .inplace = 0, .tile = 64, .slots = 2};
  ip_cpu_report rep;
  if (ir_check(q, d) || ir_check_races(q, 0, d) || ip_cpu_verify(q, &o, &rep, d) ||
      ip_cpu_verify_routes(q, &o, &rep, d)) {
    /* A bug of the rewrite, not of the file: say so and keep the copy. */
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s: its out-of-place rewrite fails its checks, not used: %s", path,
             rt_diag_text(d));
    ir_prog_free(q);
    rt_diag_free(d);
    return BT_OK;
  }
  rt_diag_free(d);
  size_t len = strlen(q->name) + 8;
  char *name = malloc(len);
  if (!name) { ir_prog_free(q); return BT_ERR_NOMEM; }
  snprintf(name, len, "%s_oop", q->name);
  free(q->name);
  q->name = name;
  rt_algo direct = {.prog = q, .inplace_ok = 0, .outofplace_ok = 1, .maxcnt = al->maxcnt, .copies = 0, .rewrite = 1,
                    .compute = -1};
  if (append(a, &direct)) { ir_prog_free(q); return BT_ERR_NOMEM; }
  LOG_INFO(RT_SUB_RUNTIME, "algorithm %s: out-of-place calls run %s, which reads the input in place (no copy)", path,
           name);
  return BT_OK;
}

/* A rooted program (appended last to a) serves every root: it runs in
 * place and out of place on the root (rt_call.c), and its relabelled
 * copies for roots 1 .. n-1 are appended after it, each checked as a
 * program of its own.  Only memory errors fail; a program that cannot run
 * both ways is dropped with a WARN. */
static bt_result add_roots(rt_algos *a, const char *path) {
  rt_algo *al = &a->v[a->n - 1];
  if (!al->outofplace_ok || (!al->inplace_ok && al->copies)) {
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s rejected: a %s must run in place and out of place on its root, and this "
             "one races %s", path, ir_coll_name[al->prog->coll], al->outofplace_ok ? "in place" : "out of place");
    ir_prog_free(al->prog);
    a->n--;
    return BT_OK;
  }
  rt_algo base = *al;
  rt_diag *d = rt_diag_new(4);
  if (!d) return BT_ERR_NOMEM;
  for (int root = 1; root < base.prog->ngpus; root++) {
    rt_algo copy = base;
    copy.root = root;
    copy.root_copy = 1;
    if (!(copy.prog = ir_prog_copy(base.prog, root))) { rt_diag_free(d); return BT_ERR_NOMEM; }
    if (ir_check(copy.prog, d)) {   /* relabelling keeps every check: a failure is a bug here, not in the file */
      LOG_WARN(RT_SUB_RUNTIME, "algorithm %s relabelled for root %d fails its checks: %s", path, root, rt_diag_text(d));
      ir_prog_free(copy.prog);
      rt_diag_free(d);
      return BT_ERR_INTERNAL;
    }
    if (append(a, &copy)) { ir_prog_free(copy.prog); rt_diag_free(d); return BT_ERR_NOMEM; }
  }
  rt_diag_free(d);
  LOG_INFO(RT_SUB_RUNTIME, "algorithm %s serves every root: root 0 as written, %d relabelled copies", path,
           base.prog->ngpus - 1);
  return BT_OK;
}

/* Reads, validates and keeps one file.  Never fails the whole load: a bad
 * file is logged and skipped; only running out of memory is an error. */
static bt_result load_one(rt_algos *a, const char *path) {
  if (seen(a, path)) return BT_OK;
  rt_diag *d = rt_diag_new(8);
  if (!d) return BT_ERR_NOMEM;
  ir_prog *p = NULL;
  char why[512];
  if (ir_read_file(path, &p, d) || ir_check(p, d)) {
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s rejected: %s", path, first_line(d, why, sizeof why));
    goto drop;
  }
  if (ir_prog_multideps(p)) {   /* the GPU plan takes one dependency a step: nops wait for the rest */
    ir_prog *q = ir_deps_split(p);
    if (!q) { ir_prog_free(p); rt_diag_free(d); return BT_ERR_NOMEM; }
    ir_prog_free(p);
    p = q;
  }
  if (p->ngpus != a->nranks) {
    LOG_INFO(RT_SUB_RUNTIME, "algorithm %s is for %d ranks, this communicator has %d: not used", path, p->ngpus,
             a->nranks);
    goto drop;
  }
  if (p->slots > rt_param_int(RT_PARAM_EXEC_SLOTS)) {
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s is proven deadlock-free with %d FIFO slots per connection (slots=\"%d\"), "
             "BATON_EXEC_SLOTS is %lld: not used", path, p->slots, p->slots, (long long)rt_param_int(RT_PARAM_EXEC_SLOTS));
    goto drop;
  }
  if (p->coll == IR_COLL_CUSTOM) {
    /* Custom collectives are run by name only (baton_run). */
    LOG_INFO(RT_SUB_RUNTIME, "algorithm %s is a custom collective: runs by name only", path);
  }
  rt_algo al = {.prog = p, .maxcnt = 1, .copies = ir_prog_aliased(p, 0), .compute = -1,
                .max_ctiles = (int64_t)1 << 40, .direct = ir_prog_direct(p)};
  rt_diag_clear(d);
  int gemm = 0, gemm_x = -1, gemm_w = -1, mixed = 0, other = 0, gemm_inline = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (st->cnt > al.maxcnt) al.maxcnt = st->cnt;
        if (!(ir_op_flags[st->op] & IR_F_COMP)) continue;
        al.compute = (st->op == IR_OP_GEMVS ? IR_OP_GEMV : st->op) | (st->args[3] >= 0 ? RT_COMPUTE_WEIGHTED : 0);
        al.bags |= st->op == IR_OP_EBAG || st->op == IR_OP_EBAGM;
        if (st->op == IR_OP_GEMM) {
          if (gemm && (st->args[0] != gemm_x || st->args[1] != gemm_w)) mixed = 1;
          gemm = 1;
          gemm_x = st->args[0];
          gemm_w = st->args[1];
          gemm_inline |= !ir_tb_compute(&p->gpus[r].tbs[t]);
        } else {
          other = 1;
        }
        if (!ir_tb_compute(&p->gpus[r].tbs[t]) && st->cnt > al.inline_compute) al.inline_compute = st->cnt;
        int64_t most = ip_sem_max_tiles(st->sync, st->sync_param);
        if (ir_tb_compute(&p->gpus[r].tbs[t]) && st->hasdep && most < al.max_ctiles) al.max_ctiles = most;
      }
  /* The GPU runs a program's gemm steps as one GEMM (ip_gpu_gemm.cu): one
   * X, one W, in compute thread blocks, nothing else computed. */
  mixed |= gemm && other;
  if (gemm && (mixed || gemm_inline || p->coll == IR_COLL_ALLREDUCE || p->coll == IR_COLL_REDUCESCATTER)) {
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s skipped: the GPU runs gemm steps %s", path,
             mixed ? "that all multiply the same X and W, with no other compute opcode beside them"
             : gemm_inline ? "in compute thread blocks only (a thread block that also sends or receives cannot run "
                             "the GEMM tile engine)"
                           : "in collectives that move data only (alltoall, allgather, custom), not reduce it");
    goto drop;
  }
  if (al.compute >= 0) {
    /* A fused call runs the program in its own layout: no copies, no rewrite. */
    if (ir_check_races(p, p->inplace, d)) {
      LOG_WARN(RT_SUB_RUNTIME, "algorithm %s rejected: %s", path, first_line(d, why, sizeof why));
      goto drop;
    }
    al.copies = 0;
    if (append(a, &al)) { ir_prog_free(p); rt_diag_free(d); return BT_ERR_NOMEM; }
    LOG_INFO(RT_SUB_RUNTIME, "algorithm %s loaded: %s, fused %s (computes with %s), %d ranks, %d chunks, bytes %llu..%llu",
             path, p->name ? p->name : "?", ir_coll_name[p->coll], ir_op_xml[RT_COMPUTE_OP(al.compute)], p->ngpus, p->nchunksperloop,
             (unsigned long long)p->minbytes, (unsigned long long)p->maxbytes);
    rt_diag_free(d);
    return BT_OK;
  }
  if (p->inplace) {
    al.inplace_ok = ir_check_races(p, 1, d) == BT_OK;
    if (!al.inplace_ok)
      LOG_WARN(RT_SUB_RUNTIME, "algorithm %s is declared in-place but races in place (%s): out-of-place calls only",
               path, first_line(d, why, sizeof why));
  } else if (ir_prog_inplace_as_is(p)) {
    /* An out-of-place AllToAll whose input and output may be one buffer
     * (no block is written before every read of what it overwrites, on
     * this rank or any other) runs in-place calls as it is, with no copy
     * of the input first: the LL one, whose peers put into landings and
     * which reads each of its blocks before it copies the peer's over it.
     * AllToAll only: its in-place layout puts input and output at one
     * address, so the call's two pointers are the span the check proved;
     * AllGather and ReduceScatter programs so run gave wrong results (2 x
     * H200), their input placed as no in-place program places it. */
    al.inplace_ok = 1;
    LOG_INFO(RT_SUB_RUNTIME, "algorithm %s: out of place, and race-free in place: runs in-place calls too", path);
  }
  rt_diag_clear(d);
  int unchecked = 0;
  al.outofplace_ok = ir_check_races_of(p, al.copies, &unchecked, d) == BT_OK;
  /* A direct program runs an out-of-place call on a copy of the input in
   * the output, where the in-place layout puts it: only where the input
   * fits there (not a ReduceScatter's, n blocks around a 1-block output). */
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  if (al.direct && al.copies && ib > ob && al.outofplace_ok) {
    al.outofplace_ok = 0;
    if (al.inplace_ok)
      LOG_INFO(RT_SUB_RUNTIME, "algorithm %s: in-place calls only (a direct %s runs out of place on a copy of the "
               "input in the output, which holds 1 of its %d blocks)", path, ir_coll_name[p->coll], ib);
  }
  if (unchecked)
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s: the race check was skipped on %d of %d ranks (the program is over its size "
             "limit): loaded, but its race freedom is not proven", path, unchecked, p->ngpus);
  if (!al.outofplace_ok && !al.inplace_ok) {
    LOG_WARN(RT_SUB_RUNTIME, "algorithm %s rejected: %s", path, first_line(d, why, sizeof why));
    goto drop;
  }
  if (append(a, &al)) { ir_prog_free(p); rt_diag_free(d); return BT_ERR_NOMEM; }
  LOG_INFO(RT_SUB_RUNTIME, "algorithm %s loaded: %s %s, %d ranks, %d chunks, %s%s, bytes %llu..%llu", path,
           p->name ? p->name : "?", ir_coll_name[p->coll], p->ngpus, p->nchunksperloop,
           al.inplace_ok ? "in-place" : "", al.outofplace_ok ? (al.inplace_ok ? "+out-of-place" : "out-of-place") : "",
           (unsigned long long)p->minbytes, (unsigned long long)p->maxbytes);
  rt_diag_free(d);
  if (ir_coll_rooted(p->coll)) return add_roots(a, path);
  return al.inplace_ok && al.copies && !al.direct ? add_direct(a, &al, path) : BT_OK;
drop:
  ir_prog_free(p);
  rt_diag_free(d);
  return BT_OK;
}

static bt_result load_list(rt_algos *a, const char *list) {
  if (!list || !*list) return BT_OK;
  char *copy = strdup(list), *save = NULL;
  if (!copy) return BT_ERR_NOMEM;
  bt_result res = BT_OK;
  for (char *f = strtok_r(copy, ":", &save); f && !res; f = strtok_r(NULL, ":", &save)) res = load_one(a, f);
  free(copy);
  return res;
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static bt_result load_dir(rt_algos *a, const char *dir) {
  if (!dir || !*dir) return BT_OK;
  DIR *dp = opendir(dir);
  if (!dp) {
    LOG_WARN(RT_SUB_RUNTIME, "BATON_ALGO_DIR %s cannot be read: no algorithms loaded from it", dir);
    return BT_OK;
  }
  char **names = NULL;
  int n = 0, cap = 0;
  bt_result res = BT_OK;
  for (struct dirent *e; (e = readdir(dp));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".xml")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **v = realloc(names, cap * sizeof *v);
      if (!v) { res = BT_ERR_NOMEM; break; }
      names = v;
    }
    size_t plen = strlen(dir) + len + 2;
    if (!(names[n] = malloc(plen))) { res = BT_ERR_NOMEM; break; }
    snprintf(names[n++], plen, "%s/%s", dir, e->d_name);
  }
  closedir(dp);
  if (!res) qsort(names, n, sizeof *names, cmp_str);   /* a stable order on every rank */
  for (int i = 0; i < n && !res; i++) res = load_one(a, names[i]);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return res;
}

bt_result rt_algos_load_files(rt_algos **out, int nranks, const char *files, const char *dir) {
  rt_algos *a = calloc(1, sizeof *a);
  if (!a) return BT_ERR_NOMEM;
  a->nranks = nranks;
  bt_result res = load_list(a, files);
  if (!res) res = load_dir(a, dir);
  if (res) { rt_algos_free(a); return res; }
  *out = a;
  return BT_OK;
}

const char *rt_algos_default_dir(int nranks, char *buf, size_t n) {
#ifdef BATON_DEFAULT_SETS
  struct stat st;
  snprintf(buf, n, "%s/%d", BATON_DEFAULT_SETS, nranks);
  if (!stat(buf, &st) && S_ISDIR(st.st_mode)) return buf;
#else
  (void)nranks, (void)n;
#endif
  buf[0] = 0;
  return NULL;
}

bt_result rt_algos_load(rt_algos **out, int nranks) {
  const char *dir = rt_param_str(RT_PARAM_ALGO_DIR);
  char def[4096];
  if (!*rt_param_str(RT_PARAM_ALGO_FILES) && !*dir && !*rt_param_str(RT_PARAM_MSCCL_FILES) &&
      rt_algos_default_dir(nranks, def, sizeof def)) {
    LOG_INFO(RT_SUB_RUNTIME, "no BATON_ALGO_FILES, BATON_ALGO_DIR or MSCCL_XML_FILES: the installed default set for %d "
             "ranks (%s)", nranks, def);
    dir = def;
  }
  CHECK(rt_algos_load_files(out, nranks, rt_param_str(RT_PARAM_ALGO_FILES), dir));
  bt_result res = load_list(*out, rt_param_str(RT_PARAM_MSCCL_FILES));
  if (res) { rt_algos_free(*out); *out = NULL; }
  return res;
}

int rt_algos_count(const rt_algos *a) { return a ? a->n : 0; }

bt_result rt_algos_set_nodes(rt_algos *a, const int *node, int nranks) {
  a->net = 0;
  int *seen = calloc((size_t)nranks + 1, sizeof *seen);   /* stamped with rank + 1 */
  if (!seen) return BT_ERR_NOMEM;
  for (int i = 0; i < a->n; i++) {
    const ir_prog *p = a->v[i].prog;
    int most = 0;
    for (int r = 0; r < p->ngpus && p->ngpus == nranks; r++) {
      int n = 0;
      for (int t = 0; t < p->gpus[r].ntbs; t++) {
        int q = p->gpus[r].tbs[t].send;
        if (q < 0 || q >= nranks || node[q] == node[r] || seen[q] == r + 1) continue;
        seen[q] = r + 1;
        n++;
      }
      if (n > most) most = n;
    }
    a->v[i].net_peers = most;
    a->net |= most > 0;
    memset(seen, 0, (size_t)nranks * sizeof *seen);
  }
  free(seen);
  return BT_OK;
}
const rt_algo *rt_algos_get(const rt_algos *a, int i) { return &a->v[i]; }

int rt_algos_find(const rt_algos *a, const char *name) {
  for (int i = 0; i < a->n; i++) {
    const ir_prog *p = a->v[i].prog;
    if ((p->name && !strcmp(p->name, name)) || (p->file && !strcmp(p->file, name))) return i;
  }
  return -1;
}

/* Whether a call of `bytes` lies in p's size range (maxbytes 0: none). */
static int in_range(const ir_prog *p, uint64_t bytes) {
  return bytes >= p->minbytes && (!p->maxbytes || bytes <= p->maxbytes);
}

/* Whether p's chunks per block divide a count of `count` per block (no
 * uneven remainder to handle). */
static int chunks_divide(const ir_prog *p, int64_t count) {
  int ib, ob;
  ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
  int per = ib > ob ? ib : ob, k = p->nchunksperloop / (per ? per : 1);
  return k > 0 && count % k == 0;
}

int rt_algos_select(const rt_algos *a, ir_coll coll, int inplace, uint64_t bytes, int64_t count, int log) {
  return rt_algos_select_by(a, coll, inplace, bytes, count, NULL, NULL, log);
}

/* Whether al runs a call of placement `inplace` (1 in place, 0 out of
 * place) without first copying its input: an out-of-place program in
 * place runs on a copy of the input (rt_call.c), an in-place one out of
 * place on a copy of the input in the output. */
static int no_copy(const rt_algo *al, int inplace) {
  const int staged = !al->inplace_ok && al->outofplace_ok && !al->copies;
  return inplace ? !staged : !al->copies;
}

/* Whether al may run a call of `coll` of placement `inplace` (1, 0 or
 * RT_PLACE_EITHER: both) at all, whatever its size. */
static int eligible(const rt_algo *al, ir_coll coll, int inplace, int (*usable)(void *ctx, int i), void *ctx, int i) {
  if (al->prog->coll != coll || al->compute >= 0 || al->root_copy) return 0;
  if (usable && !usable(ctx, i)) return 0;
  /* in place, an out-of-place program may run on a copy of the input (rt_call.c) */
  const int in_ok = al->inplace_ok || (al->outofplace_ok && !al->copies), out_ok = al->outofplace_ok;
  return inplace == RT_PLACE_EITHER ? in_ok && out_ok : inplace ? in_ok : out_ok;
}

static const char *place_name(int inplace) {
  return inplace == RT_PLACE_EITHER ? "in-place or out-of-place" : inplace ? "in-place" : "out-of-place";
}

int rt_algos_select_by(const rt_algos *a, ir_coll coll, int inplace, uint64_t bytes, int64_t count,
                       int (*usable)(void *ctx, int i), void *ctx, int log) {
  int pick = -1, best = -1, candidates = 0;
  /* Across node groups, from BATON_NET_FEWER_BYTES on, a program below
   * its own size range runs too when its ranks send to fewer ranks of
   * other groups than every program covering the size (the ranges were
   * set over NVLink; over the network each peer costs the proxies their
   * own messages). */
  int covering = -1;   /* the fewest network peers among the programs covering the size */
  const int64_t fewer_bytes = rt_param_int(RT_PARAM_NET_FEWER_BYTES);
  const int net = a->net && fewer_bytes > 0 && bytes >= (uint64_t)fewer_bytes;
  for (int i = 0; net && i < a->n; i++)
    if (eligible(&a->v[i], coll, inplace, usable, ctx, i) && in_range(a->v[i].prog, bytes) &&
        (covering < 0 || a->v[i].net_peers < covering))
      covering = a->v[i].net_peers;
  for (int i = 0; i < a->n; i++) {
    const rt_algo *al = &a->v[i];
    const ir_prog *p = al->prog;
    if (!eligible(al, coll, inplace, usable, ctx, i)) continue;
    int below = net && bytes < p->minbytes && (!p->maxbytes || bytes <= p->maxbytes) &&
                (covering < 0 || al->net_peers < covering);
    if (!in_range(p, bytes) && !below) continue;
    candidates++;
    int divides = chunks_divide(p, count);
    /* runs without first copying the input (either placement: in how many of the two) */
    int direct = inplace == RT_PLACE_EITHER ? no_copy(al, 1) + no_copy(al, 0) : no_copy(al, inplace);
    /* First a direct program (the runtime's usable() said it runs this
     * call), then, across node groups, the fewest network peers per rank
     * (each costs the proxies their own messages: a ring beats all-pairs
     * where both run), then no copy, then a program written
     * for the call's layout over a rewrite (an out-of-place program beats
     * an in-place one rewritten), then chunks that divide the count; ties
     * go to the first loaded. */
    int fewer = 15 - (al->net_peers < 15 ? al->net_peers : 15);
    int score = 256 * al->direct + 16 * fewer + 4 * direct + 2 * !al->rewrite + divides;
    if (score > best) { pick = i; best = score; }
  }
  if (log) {
    if (pick >= 0) {
      const rt_algo *al = &a->v[pick];
      const int copies = inplace == RT_PLACE_EITHER ? 0 : !no_copy(al, inplace);
      LOG_INFO(RT_SUB_RUNTIME, "%s %s of %llu bytes: running %s (%s; %d candidate%s%s%s)", ir_coll_name[coll],
               place_name(inplace), (unsigned long long)bytes, al->prog->name ? al->prog->name : "?",
               ir_prog_where(al->prog), candidates, candidates == 1 ? "" : "s",
               best & 1 ? "" : ", count not a multiple of its chunks: remainder handled",
               copies ? ", on a copy of the input" : "");
    } else
      LOG_INFO(RT_SUB_RUNTIME, "%s %s of %llu bytes: no loaded algorithm fits (%d loaded)", ir_coll_name[coll],
               place_name(inplace), (unsigned long long)bytes, a->n);
  }
  return pick;
}

int rt_algos_select_rooted(const rt_algos *a, ir_coll coll, int root, uint64_t bytes, int64_t count,
                           int (*usable)(void *ctx, int i), void *ctx, int log) {
  int pick = -1, best = -1, candidates = 0;
  for (int i = 0; i < a->n; i++) {
    const rt_algo *al = &a->v[i];
    const ir_prog *p = al->prog;
    if (p->coll != coll || al->root != root || al->compute >= 0) continue;
    if (!in_range(p, bytes) || (al->direct && (!usable || !usable(ctx, i)))) continue;
    candidates++;
    int score = 2 * al->direct + chunks_divide(p, count);
    if (score > best) { pick = i; best = score; }
  }
  if (log) {
    if (pick >= 0)
      LOG_INFO(RT_SUB_RUNTIME, "%s from root %d of %llu bytes: running %s (%s; %d candidate%s%s)", ir_coll_name[coll],
               root, (unsigned long long)bytes, a->v[pick].prog->name ? a->v[pick].prog->name : "?",
               ir_prog_where(a->v[pick].prog), candidates, candidates == 1 ? "" : "s",
               best & 1 ? "" : ", count not a multiple of its chunks: remainder handled");
    else
      LOG_INFO(RT_SUB_RUNTIME, "%s from root %d of %llu bytes: no loaded algorithm fits (%d loaded)", ir_coll_name[coll],
               root, (unsigned long long)bytes, a->n);
  }
  return pick;
}

int rt_algos_listed(const rt_algos *a) {
  int n = 0;
  for (int i = 0; a && i < a->n; i++) n += !a->v[i].root_copy;
  return n;
}

int rt_algos_listed_index(const rt_algos *a, int i) {
  for (int j = 0; a && j < a->n; j++)
    if (!a->v[j].root_copy && i-- == 0) return j;
  return -1;
}

int rt_algos_select_fused(const rt_algos *a, ir_coll coll, int compute, uint64_t bytes, int64_t count,
                          const unsigned char *usable, int log) {
  int pick = -1, best = -1, candidates = 0;
  for (int i = 0; i < a->n; i++) {
    const rt_algo *al = &a->v[i];
    const ir_prog *p = al->prog;
    if (p->coll != coll || al->compute != compute || (usable && !usable[i])) continue;
    if (!in_range(p, bytes)) continue;
    candidates++;
    int divides = chunks_divide(p, count);
    if (divides > best) { pick = i; best = divides; }
  }
  if (log) {
    if (pick >= 0)
      LOG_INFO(RT_SUB_RUNTIME, "%s fused with %s, %llu bytes: running %s (%s; %d candidate%s)", ir_coll_name[coll],
               ir_op_xml[RT_COMPUTE_OP(compute)], (unsigned long long)bytes, a->v[pick].prog->name ? a->v[pick].prog->name : "?",
               ir_prog_where(a->v[pick].prog), candidates, candidates == 1 ? "" : "s");
    else
      LOG_INFO(RT_SUB_RUNTIME, "%s fused with %s, %llu bytes: no loaded algorithm fits (%d loaded)", ir_coll_name[coll],
               ir_op_xml[RT_COMPUTE_OP(compute)], (unsigned long long)bytes, a->n);
  }
  return pick;
}

void rt_algos_free(rt_algos *a) {
  if (!a) return;
  for (int i = 0; i < a->n; i++) ir_prog_free(a->v[i].prog);
  for (int i = 0; i < a->nseen; i++) free(a->seen[i]);
  free(a->seen);
  free(a->v);
  free(a);
}
