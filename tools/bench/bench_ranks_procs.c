/* bench_ranks_procs.c -- `baton bench --fused ... -P`: a fused mode's
 * ranks in forked processes, one each (bench_ranks.h): what every child
 * opens and closes around the mode's shapes, and the parent's side, which
 * hands the run's description and each shape's rows of every rank to the
 * mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_ranks.h"

typedef struct procs_run {
  const bench_common_opts *c;
  const bench_procs_mode *m;
  void *arg;
  bench_nccl *nccl;          /* loaded in the parent (no CUDA there), used by the children */
  baton_unique_id bid;
  int got;                   /* results so far: the run's description, then the rows */
} procs_run;

/* Rank r's set-up, or its error to the parent (bench_fork_fail): its
 * GPU, cuBLAS and handle (where the mode has a compute baseline), stream,
 * NCCL's id, baton's communicators, NCCL's (dropped on every rank unless
 * every rank has it). */
static void child_open(const procs_run *p, bench_fork *f, int r, bench_ranks *k, bench_cublas **cb, void **ch) {
  int ngpu = 0, world = p->c->ngpus;
  char why[300], text[360], id[128];
  if (bench_gpus(&ngpu)) _exit(2);   /* said why */
  if (ngpu <= r) bench_fork_fail(f, "this machine has fewer GPUs than -g asks for");
  k->nranks = k->ngpus = 1;
  k->devs[0] = r;
  k->world = world;
  k->lo = r;
  k->fork = f;
  cudaSetDevice(r);
  if (p->m->compute && !(*cb = bench_cublas_open(why, sizeof why))) {
    snprintf(text, sizeof text, "the baseline needs cuBLAS: %s", why);
    bench_fork_fail(f, text);
  }
  if (bench_ranks_stream(k, 0)) bench_fork_fail(f, "cannot create its stream");
  if (*cb && !(ch[0] = bench_cublas_handle(*cb, why, sizeof why))) bench_fork_fail(f, why);
  k->nccl = p->nccl;
  int have_id = bench_fork_nccl_id(f, k->nccl, id);
  baton_result be = baton_comm_init_rank(&k->bc[0], world, p->bid, r);
  if (be) {
    snprintf(text, sizeof text, "baton_comm_init_rank: %s", baton_result_string(be));
    bench_fork_fail(f, text);
  }
  if (p->m->own && (be = baton_comm_init_all(&k->pc[0], 1, &k->devs[0]))) {
    snprintf(text, sizeof text, "%s: its one-rank communicator: %s", p->m->own, baton_result_string(be));
    bench_fork_fail(f, text);
  }
  int no_nccl = !have_id || bench_nccl_init_rank(k->nccl, &k->nc[0], world, id, r, why, sizeof why);
  if (no_nccl && have_id) fprintf(stderr, "# rank %d: %s\n", r, why);
  if (bench_fork_barrier(f, no_nccl)) {   /* NCCL runs only where every rank has it */
    if (k->nc[0]) bench_nccl_abort(k->nccl, k->nc[0]);
    k->nc[0] = NULL;
    k->nccl = NULL;
  }
}

/* Rank r's process (bench_fork_ops.child): set up, its description of
 * the run to the parent, the mode's shapes, everything closed; never
 * returns. */
static void child(void *arg, bench_fork *f, int r) {
  const procs_run *p = arg;
  static bench_ranks k;
  bench_cublas *cb = NULL;
  void *ch[1] = {NULL};
  child_open(p, f, r, &k, &cb, ch);
  const bench_common_opts *c = p->c;
  bench_run_info info = {.nranks = c->ngpus, .procs = 1, .iters = c->iters, .warmup = c->warmup, .graph = c->graph,
                         .rounds = c->rounds};
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, r) == cudaSuccess) snprintf(info.device, sizeof info.device, "%.120s", prop.name);
  if (cb) snprintf(info.cublas, sizeof info.cublas, "%.150s%s", bench_cublas_describe(cb), p->m->compute);
  if (k.nccl) snprintf(info.nccl, sizeof info.nccl, "%.190s", bench_nccl_describe(k.nccl));
  bench_fork_result(f, &info, sizeof info);
  bench_child bc = {&k, cb, ch};
  p->m->run(p->arg, &bc);
  k.nccl = p->nccl;   /* bench_ranks_shut closes it, in this process alone */
  bench_ranks_shut(&k, cb, ch);
  fflush(stderr);
  _exit(0);
}

static void on_id(void *arg, int have, const char *why) {
  const procs_run *p = arg;
  if (!have && p->nccl) fprintf(stderr, "# NCCL not used: %s\n", why);
}

/* A result from every rank: first their descriptions (rank 0's is the
 * run's), then a row per shape. */
static int on_result(void *arg, char *const *msg, const int *len, int n) {
  procs_run *p = arg;
  int info = p->got++ == 0;
  for (int r = 0; r < n; r++)
    if (len[r] != (int)(info ? sizeof(bench_run_info) : p->m->row_size)) return -1;
  if (info) {
    memcpy(p->m->info, msg[0], sizeof *p->m->info);
    p->m->header(p->arg);
  } else {
    char *all = (char *)p->m->rows + (size_t)(*p->m->nrows)++ * p->m->row_size, *err = all + p->m->error_at;
    memcpy(all, msg[0], p->m->row_size);
    bench_fold_error(err, p->m->error_len, NULL, 0);
    for (int r = 1; r < n; r++) {
      p->m->fold(all, msg[r]);
      bench_fold_error(err, p->m->error_len, msg[r] + p->m->error_at, r);
    }
    p->m->print(p->arg, all);
  }
  return 0;
}

int bench_ranks_procs(const bench_common_opts *c, const bench_procs_mode *m, void *arg) {
  if (c->ngpus > BENCH_RANKS_MAX) {
    fprintf(stderr, "baton bench: -P runs at most %d ranks of a fused operator\n", BENCH_RANKS_MAX);
    return 2;
  }
  if (m->row_size > BENCH_FORK_MSG_MAX) return 2;
  static procs_run p;
  memset(&p, 0, sizeof p);
  p.c = c;
  p.m = m;
  p.arg = arg;
  char why[300];
  if (!c->no_nccl && !(p.nccl = bench_nccl_open(why, sizeof why))) fprintf(stderr, "# NCCL not used: %s\n", why);
  baton_result be = baton_get_unique_id(&p.bid);
  if (be) {
    fprintf(stderr, "baton bench: baton_get_unique_id failed: %s\n", baton_result_string(be));
    if (p.nccl) bench_nccl_close(p.nccl);
    return 2;
  }
  bench_fork_ops ops = {child, on_id, NULL, on_result, 1 + m->nshapes};
  int rc = bench_fork_run(c->ngpus, &ops, &p);
  if (p.nccl) bench_nccl_close(p.nccl);
  return rc;
}
