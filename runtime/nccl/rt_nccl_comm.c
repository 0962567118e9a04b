/* rt_nccl_comm.c -- communicators of baton's libnccl.so.2: the real NCCL's
 * communicator beside baton's, baton's bootstrapped over NCCL (rank 0's
 * baton id broadcast on the NCCL communicator), deferred inside groups. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rt_log.h"
#include "rt_nccl.h"
#include "rt_param.h"

static struct ncclComm *comm_new(void) {
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = RT_NCCL_MAGIC;
  c->rank = c->nranks = c->dev = -1;
  return c;
}

static void comm_free(struct ncclComm *c) {
  if (!c) return;
  c->magic = 0;
  free(c);
}

ncclResult_t rt_nccl_comm_check(ncclComm_t c, const char *call) {
  if (!c) return rt_nccl_fail(ncclInvalidArgument, "%s: comm is NULL", call);
  if (c->magic != RT_NCCL_MAGIC)
    return rt_nccl_fail(ncclInvalidArgument, "%s: %p is not a communicator of this library", call, (void *)c);
  rt_log_set_dev(c->dev);
  return ncclSuccess;
}

/* Rank, size and device from the real communicator, once it is ready. */
static void comm_learn(const rt_nccl_real *n, struct ncclComm *c) {
  if (!n || !c->real) return;
  int v;
  if (n->CommUserRank && n->CommUserRank(c->real, &v) == ncclSuccess) c->rank = v;
  if (n->CommCount && n->CommCount(c->real, &v) == ncclSuccess) c->nranks = v;
  if (n->CommCuDevice && n->CommCuDevice(c->real, &v) == ncclSuccess) c->dev = v;
}

/* One baton_comm_init_rank, on its communicator's device. */
typedef struct job {
  struct ncclComm *c;
  int at;                 /* its index in attach_over_nccl's arrays */
  baton_unique_id id;
  baton_result r;
} job;

static void *job_run(void *p) {
  job *j = p;
  rt_log_set_dev(j->c->dev);
  j->r = cudaSetDevice(j->c->dev) == cudaSuccess
           ? baton_comm_init_rank(&j->c->baton, j->c->nranks, j->id, j->c->rank) : baton_cuda_error;
  return NULL;
}

/* Runs the jobs at once: each blocks until every rank of its communicator
 * has joined, so one thread may not run two of them one after the other. */
static void jobs_run(job *v, int n) {
  if (n == 1) {
    job_run(v);
    return;
  }
  pthread_t *t = calloc(n, sizeof *t);
  char *started = calloc(n, 1);
  for (int i = 0; i < n; i++) {
    if (t && started && pthread_create(&t[i], NULL, job_run, &v[i]) == 0) started[i] = 1;
    else v[i].r = baton_system_error;
  }
  for (int i = 0; i < n; i++)
    if (started && started[i]) pthread_join(t[i], NULL);
  free(t);
  free(started);
}

/* Baton's side over the real NCCL.  Rank 0 makes a baton unique id (all
 * zero when no algorithm source is set: then nobody creates one) and
 * broadcasts its 128 bytes on the NCCL communicator; every rank creates
 * baton's communicator with it; then an NCCL min-allreduce of "mine
 * exists" makes all ranks keep baton or all drop it, so that a call never
 * runs on baton on one rank and on NCCL on another.  A failure of baton's
 * side is logged and leaves the communicator to NCCL alone.  v's rank,
 * size and device are known (comm_learn). */
static ncclResult_t attach_over_nccl(const rt_nccl_real *n, struct ncclComm **v, int k) {
  int cur = 0;
  cudaGetDevice(&cur);
  job *jobs = calloc(k, sizeof *jobs);
  char **dbuf = calloc(k, sizeof *dbuf);
  cudaStream_t *st = calloc(k, sizeof *st);
  char *use = calloc(k, 1);
  ncclResult_t r = ncclSuccess;
  if (!jobs || !dbuf || !st || !use) {
    r = rt_nccl_fail(ncclSystemError, "out of memory creating baton's side of %d communicators", k);
    goto out;
  }
  for (int i = 0; i < k; i++) {
    struct ncclComm *c = v[i];
    jobs[i].c = c;
    jobs[i].at = i;
    rt_log_set_dev(c->dev);
    cudaError_t e = cudaSetDevice(c->dev);
    if (!e) e = cudaMalloc((void **)&dbuf[i], 256);
    if (!e) e = cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking);
    baton_unique_id id;
    memset(&id, 0, sizeof id);
    if (!e && c->rank == 0 && rt_nccl_baton_wanted(c->nranks) && baton_get_unique_id(&id) != baton_success) {
      LOG_WARN(RT_SUB_NCCL, "rank 0: no baton unique id: this communicator runs on NCCL only");
      memset(&id, 0, sizeof id);
    }
    if (!e && c->rank == 0) e = cudaMemcpy(dbuf[i], &id, sizeof id, cudaMemcpyHostToDevice);
    if (e) {
      LOG_INFO(RT_SUB_NCCL, "rank %d of %d: no baton on this communicator (CUDA: %s): NCCL runs every call", c->rank,
               c->nranks, cudaGetErrorString(e));
      continue;
    }
    use[i] = 1;
  }
  /* The id, on every communicator at once (one thread may hold several). */
  int any = 0;
  for (int i = 0; i < k; i++) any |= use[i];
  if (!any) goto out;
  r = n->GroupStart();
  for (int i = 0; i < k && r == ncclSuccess; i++)
    if (use[i]) r = n->Broadcast(dbuf[i], dbuf[i], sizeof(baton_unique_id), ncclUint8, 0, v[i]->real, st[i]);
  ncclResult_t e2 = n->GroupEnd();
  if (r == ncclSuccess) r = e2;
  for (int i = 0; i < k && r == ncclSuccess; i++)
    if (use[i] && (cudaSetDevice(v[i]->dev) || cudaStreamSynchronize(st[i]) ||
                   cudaMemcpy(&jobs[i].id, dbuf[i], sizeof jobs[i].id, cudaMemcpyDeviceToHost)))
      r = rt_nccl_fail(ncclUnhandledCudaError, "rank %d: reading baton's unique id broadcast over NCCL failed",
                       v[i]->rank);
  if (r != ncclSuccess) goto out;
  /* Baton's communicators, for those whose rank 0 made an id. */
  static const baton_unique_id zero;
  job *todo = calloc(k, sizeof *todo);
  int nt = 0;
  if (!todo) {
    r = rt_nccl_fail(ncclSystemError, "out of memory creating baton's side of %d communicators", k);
    goto out;
  }
  for (int i = 0; i < k; i++)
    if (use[i] && memcmp(&jobs[i].id, &zero, sizeof zero)) todo[nt++] = jobs[i];
  if (nt) jobs_run(todo, nt);
  for (int i = 0; i < nt; i++)
    if (todo[i].r)
      LOG_WARN(RT_SUB_NCCL, "rank %d of %d: baton could not create its communicator (%s): NCCL runs every call",
               todo[i].c->rank, todo[i].c->nranks, baton_result_string(todo[i].r));
  /* All ranks keep baton, or none. */
  r = nt ? n->GroupStart() : ncclSuccess;
  for (int i = 0; i < nt && r == ncclSuccess; i++) {
    struct ncclComm *c = todo[i].c;
    int j = todo[i].at, flag = c->baton != NULL;
    cudaSetDevice(c->dev);
    if (cudaMemcpy(dbuf[j] + 128, &flag, sizeof flag, cudaMemcpyHostToDevice))
      r = rt_nccl_fail(ncclUnhandledCudaError, "rank %d: copying baton's agreement flag failed", c->rank);
    else
      r = n->AllReduce(dbuf[j] + 128, dbuf[j] + 128, 1, ncclInt32, ncclMin, c->real, st[j]);
  }
  e2 = nt ? n->GroupEnd() : ncclSuccess;
  if (r == ncclSuccess) r = e2;
  for (int i = 0; i < nt && r == ncclSuccess; i++) {
    struct ncclComm *c = todo[i].c;
    int j = todo[i].at, all = 0;
    cudaSetDevice(c->dev);
    if (cudaStreamSynchronize(st[j]) || cudaMemcpy(&all, dbuf[j] + 128, sizeof all, cudaMemcpyDeviceToHost))
      r = rt_nccl_fail(ncclUnhandledCudaError, "rank %d: reading baton's agreement flag failed", c->rank);
    else if (!all && c->baton) {
      LOG_INFO(RT_SUB_NCCL, "rank %d: another rank has no baton communicator: NCCL runs every call", c->rank);
      baton_comm_destroy(c->baton);
      c->baton = NULL;
    }
    if (c->baton && c->rank == 0)
      LOG_INFO(RT_SUB_NCCL, "communicator of %d ranks: baton runs the calls its %d algorithms fit, NCCL the rest",
               c->nranks, baton_comm_algorithm_count(c->baton));
  }
  free(todo);
out:
  for (int i = 0; i < k; i++) {
    if (dbuf && dbuf[i]) cudaFree(dbuf[i]);
    if (st && st[i]) cudaStreamDestroy(st[i]);
  }
  free(jobs);
  free(dbuf);
  free(st);
  free(use);
  cudaSetDevice(cur);
  return r;
}

/* Without NCCL: baton's communicator from the id the caller gave (one
 * baton_get_unique_id of ncclGetUniqueId); its failure is the init's. */
static ncclResult_t attach_alone(struct ncclComm **v, int k) {
  if (!rt_param_int(RT_PARAM_ENABLE))
    return rt_nccl_fail(ncclInvalidUsage, "ncclCommInitRank: rank %d of %d: BATON_ENABLE=0 and no real NCCL (%s): "
                        "nothing can run this communicator", v[0]->rank, v[0]->nranks, rt_nccl_real_why());
  job *jobs = calloc(k, sizeof *jobs);
  if (!jobs) return rt_nccl_fail(ncclSystemError, "out of memory creating %d communicators", k);
  for (int i = 0; i < k; i++) {
    jobs[i].c = v[i];
    memcpy(&jobs[i].id, &v[i]->id, sizeof jobs[i].id);
  }
  jobs_run(jobs, k);
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < k; i++)
    if (jobs[i].r && r == ncclSuccess)
      r = rt_nccl_fail(rt_nccl_from_baton(jobs[i].r), "ncclCommInitRank: rank %d of %d: no real NCCL (%s) and baton "
                       "could not create the communicator (%s)", v[i]->rank, v[i]->nranks, rt_nccl_real_why(),
                       baton_result_string(jobs[i].r));
  free(jobs);
  return r;
}

/* Communicators a group created whole in this process (every rank of
 * one unique id, as nccl-tests does with a thread holding several GPUs):
 * baton's side of each is made at once, as ncclCommInitAll makes it, so
 * that the ranks share one process's state and a group of their calls can
 * reach each other's buffers.  All ranks get baton or none (one
 * baton_comm_init_all).  Marks them in done; the rest go over NCCL.
 * v's rank, size and device are known (comm_learn). */
static void attach_whole(struct ncclComm **v, int k, char *done) {
  static const ncclUniqueId zero;
  for (int i = 0; i < k; i++) {
    struct ncclComm *c = v[i];
    if (done[i] || c->nranks < 2 || !memcmp(&c->id, &zero, sizeof zero)) continue;
    int nr = c->nranks, have = 0;
    struct ncclComm **by = calloc((size_t)nr, sizeof *by);
    int *devs = calloc((size_t)nr, sizeof *devs), *at = calloc((size_t)nr, sizeof *at);
    baton_comm **b = calloc((size_t)nr, sizeof *b);
    for (int j = i; j < k && by && devs && at && b; j++) {
      struct ncclComm *m = v[j];
      if (done[j] || m->nranks != nr || memcmp(&m->id, &c->id, sizeof c->id) || m->rank < 0 || m->rank >= nr ||
          by[m->rank])
        continue;
      by[m->rank] = m;
      devs[m->rank] = m->dev;
      at[m->rank] = j;
      have++;
    }
    if (have == nr) {
      for (int r = 0; r < nr; r++) done[at[r]] = 1;
      int wanted = rt_nccl_baton_wanted(nr);
      baton_result br = wanted ? baton_comm_init_all(b, nr, devs) : baton_unsupported;
      if (!wanted)
        LOG_INFO(RT_SUB_NCCL, "communicator of %d ranks, all in this process: no baton algorithm for it: NCCL runs "
                 "every call", nr);
      else if (br)
        LOG_WARN(RT_SUB_NCCL, "communicator of %d ranks, all in this process: baton could not create its side (%s): "
                 "NCCL runs every call", nr, baton_result_string(br));
      else
        LOG_INFO(RT_SUB_NCCL, "communicator of %d ranks, all in this process: baton runs the calls its %d "
                 "algorithms fit, NCCL the rest", nr, baton_comm_algorithm_count(b[0]));
      for (int r = 0; r < nr && !br; r++) by[r]->baton = b[r];
    }
    free(by);
    free(devs);
    free(at);
    free(b);
  }
}

ncclResult_t rt_nccl_comm_attach(struct ncclComm **v, int n) {
  const rt_nccl_real *real = rt_nccl_real_get();
  if (!real) return attach_alone(v, n);
  char *done = calloc((size_t)n, 1);
  struct ncclComm **rest = calloc((size_t)n, sizeof *rest);
  if (!done || !rest) {
    free(done);
    free(rest);
    return rt_nccl_fail(ncclSystemError, "out of memory creating baton's side of %d communicators", n);
  }
  for (int i = 0; i < n; i++) comm_learn(real, v[i]);   /* rank, size and device, from NCCL's side */
  attach_whole(v, n, done);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!done[i]) rest[k++] = v[i];
  ncclResult_t r = k ? attach_over_nccl(real, rest, k) : ncclSuccess;
  free(done);
  free(rest);
  return r;
}

/* After the real init (or none): baton's side now, or at the outermost
 * ncclGroupEnd inside a group.  A communicator NCCL created non-blocking
 * stays NCCL's: its creation may still be running when this returns. */
static ncclResult_t comm_finish(struct ncclComm *c, ncclResult_t real_r, const char *call) {
  if (c->nonblocking) {
    LOG_INFO(RT_SUB_NCCL, "%s: non-blocking communicator%s: NCCL runs every call (baton needs a blocking one)", call,
             rt_param_int(RT_PARAM_NCCL_COMM_BLOCKING) == 0 ? " (NCCL_COMM_BLOCKING=0)" : "");
    return real_r;
  }
  if (rt_nccl_in_group()) {
    rt_nccl_group_defer(c);
    return real_r;
  }
  return rt_nccl_comm_attach(&c, 1);
}

/* Whether NCCL makes a communicator of `config` (NULL: NCCL's default
 * config) non-blocking, as NCCL decides it (parseCommConfig, then
 * envConfigOverride): NCCL_COMM_BLOCKING=0 or 1 (read once) overrides
 * every config; else config->blocking == 0.  *why, when given, is the
 * reason for the log. */
static int config_nonblocking(const ncclConfig_t *config, const char **why) {
  int64_t env = rt_param_int(RT_PARAM_NCCL_COMM_BLOCKING);
  int nb = env == 0 || env == 1 ? env == 0 : config && config->blocking == 0;
  if (why) *why = env == 0 ? "NCCL_COMM_BLOCKING=0" : "config->blocking = 0";
  return nb;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config,
                              const char *call) {
  if (!out) return rt_nccl_fail(ncclInvalidArgument, "%s: comm is NULL", call);
  *out = NULL;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return rt_nccl_fail(ncclInvalidArgument, "%s: rank %d of %d ranks", call, rank, nranks);
  const rt_nccl_real *n = rt_nccl_real_get();
  struct ncclComm *c = comm_new();
  if (!c) return rt_nccl_fail(ncclSystemError, "%s: out of memory", call);
  c->nranks = nranks;
  c->rank = rank;
  cudaGetDevice(&c->dev);
  rt_log_set_dev(c->dev);
  const char *nb_why = "";
  c->nonblocking = config_nonblocking(config, &nb_why);
  memcpy(&c->id, &id, sizeof id);
  ncclResult_t r = ncclSuccess;
  if (n) {
    if (config && !n->CommInitRankConfig) r = rt_nccl_unavailable("ncclCommInitRankConfig");
    if (r == ncclSuccess && rt_nccl_in_group()) r = rt_nccl_group_to_nccl();
    if (r == ncclSuccess) {
      rt_nccl_clear_error();
      r = config ? n->CommInitRankConfig(&c->real, nranks, id, rank, config)
                 : n->CommInitRank(&c->real, nranks, id, rank);
    }
    if (r != ncclSuccess && r != ncclInProgress) {
      comm_free(c);
      return r;
    }
    if (r == ncclSuccess && !rt_nccl_in_group()) comm_learn(n, c);
    rt_log_set_dev(c->dev);
    LOG_INFO(RT_SUB_NCCL, "%s: rank %d of %d on device %d: NCCL communicator %p", call, rank, nranks, c->dev,
             (void *)c->real);
  } else {
    if (c->nonblocking) {
      comm_free(c);
      return rt_nccl_fail(ncclInvalidUsage, "%s: a non-blocking communicator (%s) needs the real NCCL (%s)", call,
                          nb_why, rt_nccl_real_why());
    }
  }
  *out = c;
  ncclResult_t f = comm_finish(c, r, call);
  if (f != r && !n) {   /* nothing at all runs on it */
    comm_free(c);
    *out = NULL;
  }
  return f;
}

/* Inside a group, their errors are the group's (as NCCL's). */
ncclResult_t rt_nccl_CommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return rt_nccl_group_check(init_rank(comm, nranks, id, rank, NULL, "ncclCommInitRank"));
}

ncclResult_t rt_nccl_CommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                        ncclConfig_t *config) {
  return rt_nccl_group_check(init_rank(comm, nranks, id, rank, config, "ncclCommInitRankConfig"));
}

/* A communicator the real NCCL made from another (split, shrink) or from
 * several ids: wrapped, then given baton's side. */
static ncclResult_t wrap_new(ncclComm_t real, ncclResult_t r, int nonblocking, ncclComm_t *out, const char *call) {
  *out = NULL;
  if (r != ncclSuccess && r != ncclInProgress) return r;
  if (!real) return r;   /* NCCL_SPLIT_NOCOLOR: no new communicator */
  struct ncclComm *c = comm_new();
  if (!c) return rt_nccl_fail(ncclSystemError, "%s: out of memory", call);
  c->real = real;
  c->nonblocking = nonblocking || r == ncclInProgress;
  if (!c->nonblocking && !rt_nccl_in_group()) comm_learn(rt_nccl_real_get(), c);
  *out = c;
  return comm_finish(c, r, call);
}

static ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommSplit");
  if (r) return r;
  if (!newcomm) return rt_nccl_fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  const rt_nccl_real *n = rt_nccl_real_get();
  if (!n || !n->CommSplit || !comm->real) return rt_nccl_unavailable("ncclCommSplit");
  if (rt_nccl_in_group() && (r = rt_nccl_group_to_nccl())) return r;
  rt_nccl_clear_error();
  ncclComm_t real = NULL;
  r = n->CommSplit(comm->real, color, key, &real, config);
  int nb = config ? config_nonblocking(config, NULL) : comm->nonblocking;
  return wrap_new(real, r, nb, newcomm, "ncclCommSplit");
}

static ncclResult_t shrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm, ncclConfig_t *config,
                           int flags) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommShrink");
  if (r) return r;
  if (!newcomm) return rt_nccl_fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  const rt_nccl_real *n = rt_nccl_real_get();
  if (!n || !n->CommShrink || !comm->real) return rt_nccl_unavailable("ncclCommShrink");
  if (rt_nccl_in_group() && (r = rt_nccl_group_to_nccl())) return r;
  rt_nccl_clear_error();
  ncclComm_t real = NULL;
  r = n->CommShrink(comm->real, exclude, nexclude, &real, config, flags);
  int nb = config ? config_nonblocking(config, NULL) : comm->nonblocking;
  return wrap_new(real, r, nb, newcomm, "ncclCommShrink");
}

static ncclResult_t init_scalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *ids,
                                  ncclConfig_t *config) {
  if (!newcomm || !ids || nId < 1)
    return rt_nccl_fail(ncclInvalidArgument, "ncclCommInitRankScalable: newcomm or ids is NULL, or nId < 1");
  const rt_nccl_real *n = rt_nccl_real_get();
  if (!n && nId == 1) return init_rank(newcomm, nranks, ids[0], myrank, config, "ncclCommInitRankScalable");
  if (!n || !n->CommInitRankScalable) return rt_nccl_unavailable("ncclCommInitRankScalable");
  ncclResult_t r;
  if (rt_nccl_in_group() && (r = rt_nccl_group_to_nccl())) return r;
  rt_nccl_clear_error();
  ncclComm_t real = NULL;
  int dev = 0;
  cudaGetDevice(&dev);
  r = n->CommInitRankScalable(&real, nranks, myrank, nId, ids, config);
  r = wrap_new(real, r, config_nonblocking(config, NULL), newcomm, "ncclCommInitRankScalable");
  if (*newcomm && (*newcomm)->rank < 0) {   /* inside a group: NCCL is not done yet */
    (*newcomm)->rank = myrank;
    (*newcomm)->nranks = nranks;
    (*newcomm)->dev = dev;
  }
  return r;
}

/* Inside a group, their errors are the group's (as NCCL's). */
ncclResult_t rt_nccl_CommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  return rt_nccl_group_check(split(comm, color, key, newcomm, config));
}

ncclResult_t rt_nccl_CommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
                                ncclConfig_t *config, int flags) {
  return rt_nccl_group_check(shrink(comm, exclude, nexclude, newcomm, config, flags));
}

ncclResult_t rt_nccl_CommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *ids,
                                          ncclConfig_t *config) {
  return rt_nccl_group_check(init_scalable(newcomm, nranks, myrank, nId, ids, config));
}

ncclResult_t rt_nccl_CommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  if (!comms || ndev < 1) return rt_nccl_fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL or ndev < 1");
  const rt_nccl_real *n = rt_nccl_real_get();
  ncclComm_t *reals = calloc(ndev, sizeof *reals);
  baton_comm **b = calloc(ndev, sizeof *b);
  struct ncclComm **v = calloc(ndev, sizeof *v);
  ncclResult_t r = reals && b && v ? ncclSuccess : rt_nccl_fail(ncclSystemError, "ncclCommInitAll: out of memory");
  for (int i = 0; i < ndev && r == ncclSuccess; i++)
    if (!(v[i] = comm_new())) r = rt_nccl_fail(ncclSystemError, "ncclCommInitAll: out of memory");
  const char *nb_why = "";
  int nb = config_nonblocking(NULL, &nb_why);   /* NCCL_COMM_BLOCKING=0: NCCL makes them non-blocking */
  if (r == ncclSuccess && !n && nb)
    r = rt_nccl_fail(ncclInvalidUsage, "ncclCommInitAll: a non-blocking communicator (%s) needs the real NCCL (%s)",
                     nb_why, rt_nccl_real_why());
  if (r == ncclSuccess && n) {
    if (rt_nccl_in_group()) r = rt_nccl_group_to_nccl();
    if (r == ncclSuccess) {
      rt_nccl_clear_error();
      r = n->CommInitAll(reals, ndev, devlist);
    }
  }
  /* ncclInProgress: NCCL is still making them, on threads of its own. */
  nb = nb || r == ncclInProgress;
  if (r == ncclSuccess && !n && !rt_param_int(RT_PARAM_ENABLE))
    r = rt_nccl_fail(ncclInvalidUsage, "ncclCommInitAll: BATON_ENABLE=0 and no real NCCL (%s): nothing can run "
                     "these communicators", rt_nccl_real_why());
  if ((r == ncclSuccess || r == ncclInProgress) && nb)
    LOG_INFO(RT_SUB_NCCL, "ncclCommInitAll: non-blocking communicators%s: NCCL runs every call (baton needs blocking "
             "ones)", rt_param_int(RT_PARAM_NCCL_COMM_BLOCKING) == 0 ? " (NCCL_COMM_BLOCKING=0)" : "");
  /* One process holds every rank: baton's side is made here, group or not. */
  if (r == ncclSuccess && !nb && (!n || rt_nccl_baton_wanted(ndev))) {
    baton_result br = baton_comm_init_all(b, ndev, devlist);
    if (br && !n)
      r = rt_nccl_fail(rt_nccl_from_baton(br), "ncclCommInitAll: %d devices: no real NCCL (%s) and baton could not "
                       "create the communicators (%s)", ndev, rt_nccl_real_why(), baton_result_string(br));
    else if (br)
      LOG_WARN(RT_SUB_NCCL, "ncclCommInitAll: baton could not create its communicators of %d devices (%s): NCCL "
               "runs every call", ndev, baton_result_string(br));
    else
      LOG_INFO(RT_SUB_NCCL, "ncclCommInitAll: %d devices: baton runs the calls its %d algorithms fit, NCCL the rest",
               ndev, baton_comm_algorithm_count(b[0]));
  }
  for (int i = 0; i < ndev; i++) {
    if (r == ncclSuccess || r == ncclInProgress) {
      v[i]->real = reals[i];
      v[i]->baton = b[i];
      v[i]->nonblocking = nb;
      v[i]->rank = i;
      v[i]->nranks = ndev;
      v[i]->dev = devlist ? devlist[i] : i;
      comms[i] = v[i];
    } else if (v) {
      comm_free(v[i]);
    }
  }
  free(reals);
  free(b);
  free(v);
  return r;
}

ncclResult_t rt_nccl_GetUniqueId(ncclUniqueId *id) {
  _Static_assert(sizeof(ncclUniqueId) == sizeof(baton_unique_id), "both ids are 128 bytes");
  if (!id) return rt_nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n) return n->GetUniqueId(id);
  baton_result r = baton_get_unique_id((baton_unique_id *)id);
  return r ? rt_nccl_fail(rt_nccl_from_baton(r), "ncclGetUniqueId: baton's bootstrap could not start (%s)",
                          baton_result_string(r))
           : ncclSuccess;
}

ncclResult_t rt_nccl_CommFinalize(ncclComm_t comm) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommFinalize");
  if (r) return r;
  const rt_nccl_real *n = rt_nccl_real_get();
  return n && comm->real && n->CommFinalize ? n->CommFinalize(comm->real) : ncclSuccess;
}

/* The one line a run ends with (rank 0 of each communicator, at its
 * destruction): how many of the collectives baton runs ran on it and how
 * many on NCCL; a WARN when calls were made and none ran on baton. */
static void summarize(const struct ncclComm *c) {
  if (c->rank != 0 || c->on_baton + c->on_nccl == 0) return;
  const char *why = c->baton ? "BATON_DEBUG=INFO says why for each call"
                    : !rt_param_int(RT_PARAM_ENABLE) ? "BATON_ENABLE=0"
                    : c->nonblocking ? "a non-blocking communicator is NCCL's"
                    : "baton made no communicator: no algorithms for this rank count (BATON_ALGO_DIR, `baton set N`) "
                      "or its creation failed (see the log)";
  if (c->on_baton == 0)
    LOG_WARN(RT_SUB_NCCL, "communicator of %d ranks destroyed: none of its %llu collective calls ran on baton, "
             "all on NCCL (%s)", c->nranks, c->on_nccl, why);
  else
    LOG_INFO(RT_SUB_NCCL, "communicator of %d ranks destroyed: %llu collective calls ran on baton, %llu "
             "on NCCL", c->nranks, c->on_baton, c->on_nccl);
}

ncclResult_t rt_nccl_CommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;   /* as NCCL: destroying NULL does nothing */
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommDestroy");
  if (r) return r;
  const rt_nccl_real *n = rt_nccl_real_get();
  summarize(comm);
  if (comm->baton) baton_comm_destroy(comm->baton);
  if (n && comm->real) r = n->CommDestroy(comm->real);
  comm_free(comm);
  return r;
}

ncclResult_t rt_nccl_CommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommAbort");
  if (r) return r;
  const rt_nccl_real *n = rt_nccl_real_get();
  summarize(comm);
  /* Both sides' kernels stopped before anything waits (baton's
   * destruction of an aborted communicator does not wait on the GPU; the
   * real NCCL's abort might, and baton's kernels then end at once). */
  if (comm->baton) baton_comm_abort(comm->baton);
  if (n && comm->real && n->CommAbort) r = n->CommAbort(comm->real);
  if (comm->baton) baton_comm_destroy(comm->baton);
  comm_free(comm);
  return r;
}

/* NCCL's asynchronous error first (ncclInProgress included), then baton's. */
ncclResult_t rt_nccl_CommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommGetAsyncError");
  if (r) return r;
  if (!err) return rt_nccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  *err = ncclSuccess;
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n && comm->real && (r = n->CommGetAsyncError(comm->real, err))) return r;
  if (*err == ncclSuccess && comm->baton) {
    baton_result b = baton_success;
    baton_comm_get_async_error(comm->baton, &b);
    *err = rt_nccl_from_baton(b);
  }
  return ncclSuccess;
}

/* Count, device and rank: the real communicator's answer where there is one. */
#define COMM_QUERY(NAME, FIELD)                                                      \
  ncclResult_t rt_nccl_Comm##NAME(const ncclComm_t comm, int *out) {                 \
    ncclResult_t r = rt_nccl_comm_check(comm, "ncclComm" #NAME);                            \
    if (r) return r;                                                                 \
    if (!out) return rt_nccl_fail(ncclInvalidArgument, "ncclComm" #NAME ": result pointer is NULL"); \
    const rt_nccl_real *n = rt_nccl_real_get();                                      \
    if (n && comm->real && n->Comm##NAME) return n->Comm##NAME(comm->real, out);     \
    *out = comm->FIELD;                                                              \
    return ncclSuccess;                                                              \
  }
COMM_QUERY(Count, nranks)
COMM_QUERY(CuDevice, dev)
COMM_QUERY(UserRank, rank)
#undef COMM_QUERY

/* Registration is a hint to NCCL; baton's kernel needs none, so without
 * NCCL a registration succeeds and its handle is the buffer. */
ncclResult_t rt_nccl_CommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommRegister");
  if (r) return r;
  if (!handle) return rt_nccl_fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n && comm->real && n->CommRegister) return n->CommRegister(comm->real, buff, size, handle);
  LOG_INFO(RT_SUB_NCCL, "ncclCommRegister of %zu bytes: no real NCCL, nothing to register (baton needs none)", size);
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t rt_nccl_CommDeregister(const ncclComm_t comm, void *handle) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommDeregister");
  if (r) return r;
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n && comm->real && n->CommDeregister) return n->CommDeregister(comm->real, handle);
  return ncclSuccess;
}

/* Windows: baton's registration on a communicator with a baton side
 * (every rank together, as NCCL's), so that calls on them run baton's
 * direct programs on the ranks' own buffers; NCCL's without one.  Memory
 * baton cannot map on every rank (not from cudaMalloc or ncclMemAlloc)
 * still gets a window, which calls treat as unregistered: NCCL would
 * take it, so a drop-in must.  As NCCL's, a NULL buffer or a size of 0
 * registers nothing and succeeds (*win untouched), and deregistering
 * NULL does nothing. */
static char no_window;   /* the handle of such a window */

ncclResult_t rt_nccl_CommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int flags) {
  if (!buff || size == 0) {   /* as NCCL: nothing to register, *win left as it is */
    LOG_INFO(RT_SUB_NCCL, "ncclCommWindowRegister of %zu bytes at %p: nothing to register", size, buff);
    return ncclSuccess;
  }
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommWindowRegister");
  if (r) return r;
  if (!win) return rt_nccl_fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  if (!comm->baton) {
    const rt_nccl_real *n = rt_nccl_real_get();
    if (n && comm->real && n->CommWindowRegister) return n->CommWindowRegister(comm->real, buff, size, win, flags);
    return rt_nccl_fail(ncclInvalidUsage, "ncclCommWindowRegister: this communicator has neither a baton side nor a "
                        "real NCCL");
  }
  baton_window *w = NULL;
  baton_result b = baton_comm_register(comm->baton, buff, size, &w);
  if (b == baton_unsupported) {
    LOG_INFO(RT_SUB_NCCL, "rank %d: ncclCommWindowRegister of %zu bytes: baton cannot map it on every rank; calls on "
             "it copy through baton's own window", comm->rank, size);
    *win = (ncclWindow_t)(void *)&no_window;
    return ncclSuccess;
  }
  if (b) return rt_nccl_fail(rt_nccl_from_baton(b), "ncclCommWindowRegister of %zu bytes at %p: %s", size, buff,
                             baton_result_string(b));
  *win = (ncclWindow_t)(void *)w;
  return ncclSuccess;
}

ncclResult_t rt_nccl_CommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (!win) return ncclSuccess;   /* as NCCL: no window, nothing to do */
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclCommWindowDeregister");
  if (r) return r;
  if (!comm->baton) {
    const rt_nccl_real *n = rt_nccl_real_get();
    if (n && comm->real && n->CommWindowDeregister) return n->CommWindowDeregister(comm->real, win);
    return rt_nccl_fail(ncclInvalidUsage, "ncclCommWindowDeregister: this communicator has neither a baton side nor "
                        "a real NCCL");
  }
  if ((void *)win == (void *)&no_window) return ncclSuccess;
  baton_result b = baton_comm_deregister(comm->baton, (baton_window *)(void *)win);
  return b ? rt_nccl_fail(rt_nccl_from_baton(b), "ncclCommWindowDeregister(%p): %s", (void *)win,
                          baton_result_string(b))
           : ncclSuccess;
}

/* The device API's kernels read NCCL's windows, which a communicator with
 * a baton side does not make (ncclCommWindowRegister makes baton's): its
 * device communicator is refused, with what to do, rather than handing
 * kernels a baton window to read as NCCL's. */
ncclResult_t rt_nccl_DevCommCreate(ncclComm_t comm, const void *reqs, void *outDevComm) {
  ncclResult_t r = rt_nccl_comm_check(comm, "ncclDevCommCreate");
  if (r) return r;
  if (comm->baton)
    return rt_nccl_group_check(rt_nccl_fail(ncclInvalidUsage, "ncclDevCommCreate on rank %d: NCCL's device API "
                                            "needs NCCL's windows, and this communicator's are baton's (run it "
                                            "with BATON_ENABLE=0)", comm->rank));
  const rt_nccl_real *n = rt_nccl_real_get();
  if (!n || !comm->real || !n->DevCommCreate) return rt_nccl_unavailable("ncclDevCommCreate");
  if (rt_nccl_in_group() && (r = rt_nccl_group_to_nccl())) return r;
  rt_nccl_clear_error();
  return n->DevCommCreate(comm->real, reqs, outDevComm);
}

/* With baton on, baton's allocator (cudaMalloc: memory every rank can map
 * for baton's windows; NCCL's own allocator makes memory CUDA IPC cannot
 * export); with BATON_ENABLE=0, NCCL's where there is one. */
static int nccl_allocates(void) { return !rt_param_int(RT_PARAM_ENABLE) && rt_nccl_real_get() && rt_nccl_real_get()->MemAlloc; }

ncclResult_t rt_nccl_MemAlloc(void **ptr, size_t size) {
  if (nccl_allocates()) return rt_nccl_real_get()->MemAlloc(ptr, size);
  /* As NCCL, whose cudaMalloc fails on a NULL ptr and answers a size of 0
   * (baton_mem_alloc refuses both). */
  if (!ptr) return rt_nccl_fail(ncclUnhandledCudaError, "ncclMemAlloc: ptr is NULL");
  if (size == 0) {
    cudaError_t e = cudaMalloc(ptr, 0);
    return e ? rt_nccl_fail(ncclUnhandledCudaError, "ncclMemAlloc of 0 bytes: %s", cudaGetErrorString(e))
             : ncclSuccess;
  }
  baton_result b = baton_mem_alloc(ptr, size);
  return b ? rt_nccl_fail(rt_nccl_from_baton(b), "ncclMemAlloc of %zu bytes: %s", size, baton_result_string(b))
           : ncclSuccess;
}

ncclResult_t rt_nccl_MemFree(void *ptr) {
  if (nccl_allocates() && rt_nccl_real_get()->MemFree) return rt_nccl_real_get()->MemFree(ptr);
  baton_result b = baton_mem_free(ptr);
  return b ? rt_nccl_fail(rt_nccl_from_baton(b), "ncclMemFree(%p): %s", ptr, baton_result_string(b)) : ncclSuccess;
}
