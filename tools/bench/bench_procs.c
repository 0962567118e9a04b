/* bench_procs.c -- `baton bench -P`: one forked process per GPU
 * (bench_fork.h), each its rank's bench_ctx; a bench_row per size (per
 * combination, then size, with -d all / -o all) from every rank, folded
 * into the table's row by the parent. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_fork.h"
#include "bench_ranks.h"
#include "bench_run.h"
#include "rt_param.h"

_Static_assert(sizeof(bench_row) <= BENCH_FORK_MSG_MAX, "a bench_row fits one message");

/* ---- a child: rank r on GPU r ---- */

static int child_barrier(bench_ctx *x, int flags) {
  return bench_fork_barrier(x->fork, flags);
}

static void child_fail(bench_ctx *x, const char *fmt, const char *what) {
  char text[400];
  snprintf(text, sizeof text, fmt, what);
  bench_fork_fail(x->fork, text);
}

/* --register: this rank's buffers registered with baton (every rank
 * together: a collective) and with NCCL where it runs. */
static void register_buffers(bench_ctx *x) {
  char err[300];
  size_t bytes[2] = {x->recv_bytes, x->send_bytes};
  char *bufs[2] = {x->recvbuf[0], x->sendbuf[0]};
  for (int b = 0; b < 2; b++) {
    if (!bytes[b] || !bufs[b]) continue;
    baton_result e = baton_comm_register(x->bc[0], bufs[b], bytes[b], &x->win[b]);
    if (e) child_fail(x, "baton_comm_register: %s", baton_result_string(e));
    if (x->nc[0] && bench_nccl_register(x->nccl, x->nc[0], bufs[b], bytes[b], &x->nreg[b], err, sizeof err))
      child_fail(x, "%s", err);
  }
}

static void deregister_buffers(bench_ctx *x) {
  for (int b = 0; b < 2; b++) {
    if (x->win[b]) baton_comm_deregister(x->bc[0], x->win[b]);
    if (x->nc[0] && x->nreg[b]) bench_nccl_deregister(x->nccl, x->nc[0], x->nreg[b]);
    x->win[b] = NULL;
    x->nreg[b] = NULL;
  }
}

static void child_main(const bench_opts *o, bench_ctx *x, baton_unique_id bid, const int64_t *sizes, int nsizes) {
  int r = x->lo, ngpu = 0;
  char err[300], id[128];
  if (bench_gpus(&ngpu)) _exit(2);   /* said why */
  if (ngpu <= r) child_fail(x, "%s", "this machine has fewer GPUs than -g asks for");
  cudaSetDevice(r);
  /* NCCL's unique id is made in rank 0's process, not in the parent:
   * ncclGetUniqueId initializes CUDA. */
  int have_id = bench_fork_nccl_id(x->fork, x->nccl, id);
  baton_result be = baton_comm_init_rank(&x->bc[0], x->nranks, bid, r);
  if (be) child_fail(x, "baton_comm_init_rank failed: %s", baton_result_string(be));
  if (!have_id || bench_nccl_init_rank(x->nccl, &x->nc[0], x->nranks, id, r, err, sizeof err)) {
    if (have_id) fprintf(stderr, "# rank %d: %s\n", r, err);
    x->nc[0] = NULL;
    x->dead |= 1 << BENCH_NCCL;
    snprintf(x->dead_why[BENCH_NCCL], sizeof x->dead_why[0], "NCCL not set up");
  }
  if (bench_ctx_alloc(x, sizes, nsizes, err, sizeof err)) child_fail(x, "%s", err);
  x->dead |= x->barrier(x, x->dead);   /* setup done everywhere; NCCL usable only if it is on every rank */
  if ((x->dead & 1 << BENCH_NCCL) && x->nc[0]) {
    bench_nccl_abort(x->nccl, x->nc[0]);
    x->nc[0] = NULL;
    snprintf(x->dead_why[BENCH_NCCL], sizeof x->dead_why[0], "NCCL not set up on every rank");
  }
  if (o->reg) register_buffers(x);
  bench_combo c[BENCH_MAX_COMBOS];
  int nc = bench_combos(o, c);
  for (int k = 0; k < nc; k++) {   /* type outer, op inner, as nccl-tests */
    bench_opts one = bench_opts_combo(o, &c[k]);
    x->o = &one;
    for (int s = 0; s < nsizes; s++) {
      bench_row row;
      bench_run_size(x, sizes[s], &row);
      bench_fork_result(x->fork, &row, sizeof row);
    }
  }
  x->o = o;
  if (o->reg) deregister_buffers(x);
  bench_ctx_free(x);
  fflush(stderr);
  _exit(0);
}

/* ---- the parent ---- */

/* What the parent's callbacks and the children share (the children get
 * it copied by fork). */
typedef struct procs_run {
  const bench_opts *o;
  bench_table *t;
  bench_ctx x;                  /* each child's, filled in the child */
  baton_unique_id bid;
  int64_t sizes[BENCH_MAX_SIZES];
  int nsizes;
} procs_run;

static void run_child(void *arg, bench_fork *f, int r) {
  procs_run *p = arg;
  p->x.lo = r;
  p->x.devs[0] = r;
  p->x.fork = f;
  child_main(p->o, &p->x, p->bid, p->sizes, p->nsizes);
}

static void run_id(void *arg, int have, const char *why) {
  procs_run *p = arg;
  if (!have && p->x.nccl) {
    snprintf(p->t->nccl_missing, sizeof p->t->nccl_missing, "%s", why);
    p->t->nccl[0] = 0;
  }
}

static void run_started(void *arg, int flags) {
  procs_run *p = arg;
  if ((flags & 1 << BENCH_NCCL) && p->t->nccl[0]) {
    snprintf(p->t->nccl_missing, sizeof p->t->nccl_missing, "NCCL communicator setup failed on some rank");
    p->t->nccl[0] = 0;
  }
  bench_print_header(stdout, p->t);
}

/* Folds rank r's row into the table's: the slowest rank's time, the sum
 * of wrong elements, the first error. */
static void combine(bench_row *all, const bench_row *one, int r) {
  if (r == 0) *all = *one;
  for (int l = 0; l < BENCH_NLIBS; l++) {
    bench_result *a = &all->lib[l];
    const bench_result *b = &one->lib[l];
    if (r) {
      bench_fold_time(&a->time_us, b->time_us);
      bench_fold_wrong(&a->wrong, b->wrong);
    }
    bench_fold_error(a->error, sizeof a->error, r ? b->error : NULL, r);
  }
}

static int run_result(void *arg, char *const *msg, const int *len, int n) {
  procs_run *p = arg;
  for (int r = 0; r < n; r++)
    if (len[r] != (int)sizeof(bench_row)) return -1;
  bench_row *row = &p->t->rows[p->t->nrows];
  for (int r = 0; r < n; r++) {
    bench_row one;
    memcpy(&one, msg[r], sizeof one);
    combine(row, &one, r);
  }
  if (!p->t->nccl[0]) row->lib[BENCH_NCCL].error[0] = 0;
  bench_print_row(stdout, p->t, row);
  p->t->nrows++;
  return 0;
}

int bench_run_procs(const bench_opts *o, bench_table *t) {
  int n = o->ngpus;
  if (n < 1 || n > BENCH_FORK_MAX_RANKS) {
    fprintf(stderr, "baton bench: -P needs -g N (the number of ranks: the parent touches no GPU before it forks)\n");
    return 2;
  }
  bench_table_init(t, o, n);
  static procs_run p;
  memset(&p, 0, sizeof p);
  p.o = o;
  p.t = t;
  p.x.o = o;
  p.x.nranks = n;
  p.x.nlocal = 1;
  p.x.timeout = (int)rt_param_int(RT_PARAM_TIMEOUT);
  p.x.barrier = child_barrier;
  p.x.nccl = bench_load_nccl(o, t);
  baton_result be = baton_get_unique_id(&p.bid);
  if (be) {
    fprintf(stderr, "baton bench: baton_get_unique_id failed: %s\n", baton_result_string(be));
    bench_nccl_close(p.x.nccl);
    return 2;
  }
  bench_combo combos[BENCH_MAX_COMBOS];
  p.nsizes = bench_sizes(o, p.sizes, BENCH_MAX_SIZES);
  bench_fork_ops ops = {run_child, run_id, run_started, run_result, p.nsizes * bench_combos(o, combos)};
  int rc = bench_fork_run(n, &ops, &p);
  bench_nccl_close(p.x.nccl);
  return rc;
}
