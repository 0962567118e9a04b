/* bench_procs.c -- `baton bench -P`: one forked process per GPU.  The
 * parent touches no CUDA (a CUDA context does not survive fork); it
 * hands out the unique ids, keeps the ranks in step with barriers over
 * pipes and gathers each size's results:
 *
 *   child 0 -> parent:  'I' NCCL unique id (flags 1) or why not (flags 0),
 *                       forwarded to the other children
 *   child -> parent:    'B' flags (a barrier; the reply 'G' carries the OR
 *                       of every rank's flags), 'R' a bench_row per size
 *                       (per combination, then size, with -d all / -o all),
 *                       'E' a setup error (text), then the child exits
 */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_ranks.h"
#include "bench_run.h"
#include "rt_param.h"

typedef struct msg_hdr {
  int32_t type, flags, len;
} msg_hdr;

enum { MSG_MAX = 4096 };

static int write_all(int fd, const void *p, size_t n) {
  for (const char *c = p; n;) {
    ssize_t k = write(fd, c, n);
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n) {
  for (char *c = p; n;) {
    ssize_t k = read(fd, c, n);
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int send_msg(int fd, int type, int flags, const void *payload, int len) {
  msg_hdr h = {type, flags, len};
  return write_all(fd, &h, sizeof h) || (len && write_all(fd, payload, (size_t)len)) ? -1 : 0;
}

/* Reads one message; payload gets at most MSG_MAX bytes.  -1 at EOF. */
static int recv_msg(int fd, msg_hdr *h, char *payload) {
  if (read_all(fd, h, sizeof *h) || h->len < 0 || h->len > MSG_MAX) return -1;
  return h->len ? read_all(fd, payload, (size_t)h->len) : 0;
}

/* ---- a child: rank r on GPU r ---- */

static int child_barrier(bench_ctx *x, int flags) {
  msg_hdr h;
  char buf[MSG_MAX];
  if (send_msg(x->up, 'B', flags, NULL, 0) || recv_msg(x->down, &h, buf) || h.type != 'G') _exit(3);
  return h.flags;
}

static void child_fail(bench_ctx *x, const char *fmt, const char *what) {
  char text[400];
  snprintf(text, sizeof text, fmt, x->lo, what);
  send_msg(x->up, 'E', 0, text, (int)strlen(text) + 1);
  _exit(2);
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
    if (e) child_fail(x, "rank %d: baton_comm_register: %s", baton_result_string(e));
    if (x->nc[0] && bench_nccl_register(x->nccl, x->nc[0], bufs[b], bytes[b], &x->nreg[b], err, sizeof err))
      child_fail(x, "rank %d: %s", err);
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
  if (ngpu <= r) child_fail(x, "rank %d: %s", "this machine has fewer GPUs than -g asks for");
  cudaSetDevice(r);
  /* NCCL's unique id is made here, not in the parent: ncclGetUniqueId
   * initializes CUDA. */
  int have_id = 0;
  if (r == 0) {
    have_id = x->nccl && !bench_nccl_unique_id(x->nccl, id, err, sizeof err);
    if (!x->nccl) snprintf(err, sizeof err, "NCCL not loaded");
    if (have_id ? send_msg(x->up, 'I', 1, id, sizeof id) : send_msg(x->up, 'I', 0, err, (int)strlen(err) + 1))
      _exit(3);
  } else {
    msg_hdr h;
    char buf[MSG_MAX];
    if (recv_msg(x->down, &h, buf) || h.type != 'I') _exit(3);
    have_id = h.flags == 1 && h.len == sizeof id;
    if (have_id) memcpy(id, buf, sizeof id);
  }
  baton_result be = baton_comm_init_rank(&x->bc[0], x->nranks, bid, r);
  if (be) child_fail(x, "rank %d: baton_comm_init_rank failed: %s", baton_result_string(be));
  if (!have_id || bench_nccl_init_rank(x->nccl, &x->nc[0], x->nranks, id, r, err, sizeof err)) {
    if (have_id) fprintf(stderr, "# rank %d: %s\n", r, err);
    x->nc[0] = NULL;
    x->dead |= 1 << BENCH_NCCL;
    snprintf(x->dead_why[BENCH_NCCL], sizeof x->dead_why[0], "NCCL not set up");
  }
  if (bench_ctx_alloc(x, sizes, nsizes, err, sizeof err)) child_fail(x, "rank %d: %s", err);
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
      if (send_msg(x->up, 'R', 0, &row, sizeof row)) _exit(3);
    }
  }
  x->o = o;
  if (o->reg) deregister_buffers(x);
  bench_ctx_free(x);
  fflush(stderr);
  _exit(0);
}

/* ---- the parent ---- */

/* Folds rank r's row into the table's: the slowest rank's time, the sum
 * of wrong elements, the first error. */
static void combine(bench_row *all, const bench_row *one, int r) {
  if (r == 0) {
    *all = *one;
    for (int l = 0; l < BENCH_NLIBS; l++)
      if (one->lib[l].error[0]) snprintf(all->lib[l].error, sizeof all->lib[l].error, "rank 0: %.180s", one->lib[l].error);
    return;
  }
  for (int l = 0; l < BENCH_NLIBS; l++) {
    bench_result *a = &all->lib[l];
    const bench_result *b = &one->lib[l];
    if (a->time_us >= 0 && (b->time_us < 0 || b->time_us > a->time_us)) a->time_us = b->time_us;
    if (b->wrong >= 0) a->wrong = a->wrong < 0 ? b->wrong : a->wrong + b->wrong;
    if (!a->error[0] && b->error[0]) snprintf(a->error, sizeof a->error, "rank %d: %.180s", r, b->error);
  }
}

int bench_run_procs(const bench_opts *o, bench_table *t) {
  int n = o->ngpus;
  if (n < 1 || n > 1024) {
    fprintf(stderr, "baton bench: -P needs -g N (the number of ranks: the parent touches no GPU before it forks)\n");
    return 2;
  }
  bench_table_init(t, o, n);
  static bench_ctx x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.nranks = n;
  x.nlocal = 1;
  x.timeout = (int)rt_param_int(RT_PARAM_TIMEOUT);
  x.barrier = child_barrier;
  x.nccl = bench_load_nccl(o, t);
  baton_unique_id bid;
  baton_result be = baton_get_unique_id(&bid);
  if (be) {
    fprintf(stderr, "baton bench: baton_get_unique_id failed: %s\n", baton_result_string(be));
    bench_nccl_close(x.nccl);
    return 2;
  }
  int64_t sizes[BENCH_MAX_SIZES];
  bench_combo combos[BENCH_MAX_COMBOS];
  int nsizes = bench_sizes(o, sizes, BENCH_MAX_SIZES), nrows = nsizes * bench_combos(o, combos);
  int (*up)[2] = calloc((size_t)n, sizeof *up), (*down)[2] = calloc((size_t)n, sizeof *down);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  for (int r = 0; r < n; r++)
    if (pipe(up[r]) || pipe(down[r])) {
      perror("baton bench: pipe");
      return 2;
    }
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("baton bench: fork");
      n = r;
      break;
    }
    if (pids[r] == 0) {
      for (int q = 0; q < o->ngpus; q++) {
        if (q == r) continue;
        close(up[q][0]), close(up[q][1]), close(down[q][0]), close(down[q][1]);
      }
      close(up[r][0]);
      close(down[r][1]);
      x.lo = r;
      x.devs[0] = r;
      x.up = up[r][1];
      x.down = down[r][0];
      child_main(o, &x, bid, sizes, nsizes);
    }
  }
  for (int r = 0; r < o->ngpus; r++) {
    close(up[r][1]);
    close(down[r][0]);
  }
  void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
  int rc = n < o->ngpus ? 2 : 0, barriers = 0;
  msg_hdr h;
  char *buf = malloc((size_t)n * MSG_MAX), *types = calloc((size_t)n, 1);
  int *flags = calloc((size_t)n, sizeof *flags);
  /* The NCCL id from rank 0 to the others. */
  if (!rc && (recv_msg(up[0][0], &h, buf) || (h.type != 'I' && h.type != 'E'))) {
    fprintf(stderr, "baton bench: rank 0's process ended during setup\n");
    rc = 2;
  } else if (!rc && h.type == 'E') {
    fprintf(stderr, "baton bench: %s\n", buf);
    rc = 2;
  } else if (!rc) {
    if (h.flags != 1 && x.nccl) {
      snprintf(t->nccl_missing, sizeof t->nccl_missing, "%.*s", h.len, buf);
      t->nccl[0] = 0;
    }
    for (int r = 1; r < n; r++) send_msg(down[r][1], 'I', h.flags, buf, h.len);
  }
  while (!rc && t->nrows < nrows) {
    int nb = 0, nr = 0, all = 0;
    for (int r = 0; r < n && !rc; r++) {
      char *p = buf + (size_t)r * MSG_MAX;
      if (recv_msg(up[r][0], &h, p)) {
        fprintf(stderr, "baton bench: rank %d's process ended early\n", r);
        rc = 2;
      } else if (h.type == 'E') {
        fprintf(stderr, "baton bench: %.*s\n", h.len, p);
        rc = 2;
      }
      types[r] = (char)h.type;
      flags[r] = h.flags;
      nb += h.type == 'B';
      nr += h.type == 'R' && h.len == sizeof(bench_row);
      all |= h.flags;
    }
    if (rc) break;
    if (nb == n) {
      for (int r = 0; r < n; r++) send_msg(down[r][1], 'G', all, NULL, 0);
      if (barriers++ == 0) {
        if ((all & 1 << BENCH_NCCL) && t->nccl[0]) {
          snprintf(t->nccl_missing, sizeof t->nccl_missing, "NCCL communicator setup failed on some rank");
          t->nccl[0] = 0;
        }
        bench_print_header(stdout, t);
      }
    } else if (nr == n) {
      bench_row *row = &t->rows[t->nrows];
      for (int r = 0; r < n; r++) combine(row, (const bench_row *)(buf + (size_t)r * MSG_MAX), r);
      if (!t->nccl[0]) row->lib[BENCH_NCCL].error[0] = 0;
      bench_print_row(stdout, t, row);
      t->nrows++;
    } else {
      fprintf(stderr, "baton bench: the ranks are out of step (rank 0 sent '%c', rank %d '%c')\n", types[0], n - 1,
              types[n - 1]);
      rc = 2;
    }
  }
  for (int r = 0; r < n; r++) {
    if (rc) kill(pids[r], SIGTERM);
    close(down[r][1]);
  }
  for (int r = 0; r < n; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      fprintf(stderr, "baton bench: rank %d's process ended with status %d\n", r,
              WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      rc = 1;
    }
    close(up[r][0]);
  }
  signal(SIGPIPE, old_pipe);
  free(buf);
  free(types);
  free(flags);
  free(up);
  free(down);
  free(pids);
  bench_nccl_close(x.nccl);
  return rc;
}
