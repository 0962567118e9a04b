/* bench_fork.c -- one forked process per rank for `baton bench -P`: the
 * pipes, the messages, the parent's loop (bench_fork.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_fork.h"

struct bench_fork {
  int rank, up, down;   /* the pipes to and from the parent */
};

typedef struct msg_hdr {
  int32_t type, flags, len;
} msg_hdr;

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

/* Reads one message; payload gets at most BENCH_FORK_MSG_MAX bytes.  -1
 * at EOF or on a length out of range. */
static int recv_msg(int fd, msg_hdr *h, char *payload) {
  if (read_all(fd, h, sizeof *h) || h->len < 0 || h->len > BENCH_FORK_MSG_MAX) return -1;
  return h->len ? read_all(fd, payload, (size_t)h->len) : 0;
}

/* ---- folding ---- */

void bench_fold_time(double *all, double one) {
  if (*all >= 0 && (one < 0 || one > *all)) *all = one;
}

void bench_fold_wrong(int64_t *all, int64_t one) {
  if (one >= 0) *all = *all < 0 ? one : *all + one;
}

void bench_fold_error(char *all, size_t len, const char *one, int r) {
  char e[400];
  if (!one && all[0]) {
    snprintf(e, sizeof e, "rank 0: %s", all);
    snprintf(all, len, "%s", e);
  } else if (one && one[0] && !all[0]) {
    snprintf(all, len, "rank %d: %s", r, one);
  }
}

/* ---- a child ---- */

int bench_fork_barrier(bench_fork *f, int flags) {
  msg_hdr h;
  char buf[BENCH_FORK_MSG_MAX];
  if (send_msg(f->up, 'B', flags, NULL, 0) || recv_msg(f->down, &h, buf) || h.type != 'G') _exit(3);
  return h.flags;
}

int64_t bench_fork_min(bench_fork *f, int64_t v) {
  msg_hdr h;
  char buf[BENCH_FORK_MSG_MAX];
  int64_t least;
  if (send_msg(f->up, 'M', 0, &v, sizeof v) || recv_msg(f->down, &h, buf) || h.type != 'G' || h.len != sizeof least)
    _exit(3);
  memcpy(&least, buf, sizeof least);
  return least;
}

void bench_fork_result(bench_fork *f, const void *msg, int len) {
  if (len < 0 || len > BENCH_FORK_MSG_MAX || send_msg(f->up, 'R', 0, msg, len)) _exit(3);
}

void bench_fork_fail(bench_fork *f, const char *text) {
  char line[400];
  snprintf(line, sizeof line, "rank %d: %s", f->rank, text);
  send_msg(f->up, 'E', 0, line, (int)strlen(line) + 1);
  _exit(2);
}

int bench_fork_nccl_id(bench_fork *f, bench_nccl *nccl, char id[128]) {
  char err[300];
  if (f->rank == 0) {
    int have = nccl && !bench_nccl_unique_id(nccl, id, err, sizeof err);
    if (!nccl) snprintf(err, sizeof err, "NCCL not loaded");
    if (have ? send_msg(f->up, 'I', 1, id, 128) : send_msg(f->up, 'I', 0, err, (int)strlen(err) + 1)) _exit(3);
    return have;
  }
  msg_hdr h;
  char buf[BENCH_FORK_MSG_MAX];
  if (recv_msg(f->down, &h, buf) || h.type != 'I') _exit(3);
  if (h.flags != 1 || h.len != 128) return 0;
  memcpy(id, buf, 128);
  return 1;
}

/* ---- the parent ---- */

enum { WANT_NONE, WANT_NEXT, WANT_WATCH };   /* gather's want[r] */

/* What the parent's loop keeps: the pipes, a message per rank, what it
 * polls. */
typedef struct parent {
  int n, (*up)[2], (*down)[2];
  char **msg, *want, *type;
  int *len, *flags, barriers;
  struct pollfd *pf;
  int *who;                    /* the rank of each of pf */
} parent;

/* The next message of every rank r with p->want[r] WANT_NEXT, in
 * whatever order they arrive (want[r] becomes WANT_NONE as each comes):
 * type[r], msg[r], len[r] and flags[r] of p.  Ranks with WANT_WATCH are watched too and
 * must stay silent.  So a rank's setup error is seen while another rank
 * waits for it.  0, or -1 after why (a rank's process ended early or sent
 * its setup error, a watched rank spoke: the run stops). */
static int gather(parent *p) {
  char *want = p->want;
  struct pollfd *pf = p->pf;
  int left = 0, rc = 0;
  for (int r = 0; r < p->n; r++) left += want[r] == WANT_NEXT;
  while (left && !rc) {
    int np = 0;
    for (int r = 0; r < p->n; r++)
      if (want[r] != WANT_NONE) {
        pf[np] = (struct pollfd){.fd = p->up[r][0], .events = POLLIN};
        p->who[np++] = r;
      }
    if (poll(pf, (nfds_t)np, -1) < 0) {
      if (errno == EINTR) continue;
      perror("baton bench: poll");
      rc = -1;
      break;
    }
    for (int i = 0; i < np && !rc; i++) {
      if (!pf[i].revents) continue;
      int r = p->who[i];
      msg_hdr h;
      if (recv_msg(p->up[r][0], &h, p->msg[r])) {
        fprintf(stderr, "baton bench: rank %d's process ended early\n", r);
        rc = -1;
      } else if (h.type == 'E') {
        fprintf(stderr, "baton bench: %.*s\n", h.len, p->msg[r]);
        rc = -1;
      } else if (want[r] == WANT_WATCH) {
        fprintf(stderr, "baton bench: rank %d sent '%c' out of turn\n", r, (char)h.type);
        rc = -1;
      } else {
        p->type[r] = (char)h.type;
        p->len[r] = h.len;
        p->flags[r] = h.flags;
        want[r] = WANT_NONE;
        left--;
      }
    }
  }
  return rc;
}

/* Rank 0's id message to every other rank (the others, silent until they
 * have it, are watched for a setup error meanwhile).  0, or -1 after why. */
static int hand_out_id(parent *p, const bench_fork_ops *ops, void *arg) {
  p->want[0] = WANT_NEXT;
  for (int r = 1; r < p->n; r++) p->want[r] = WANT_WATCH;
  if (gather(p)) return -1;
  if (p->type[0] != 'I') {
    fprintf(stderr, "baton bench: rank 0 sent '%c' during setup\n", p->type[0]);
    return -1;
  }
  if (ops->id) {
    char why[BENCH_FORK_MSG_MAX + 1] = "";
    if (p->flags[0] != 1) snprintf(why, sizeof why, "%.*s", p->len[0], p->msg[0]);
    ops->id(arg, p->flags[0] == 1, why);
  }
  for (int r = 1; r < p->n; r++) send_msg(p->down[r][1], 'I', p->flags[0], p->msg[0], p->len[0]);
  return 0;
}

/* One message from every rank, then: all barriers, answered (with the
 * OR of their flags, or the least of their values); all results, handed
 * to ops->result.  1 after a result, 0 after a barrier,
 * -1 after why (a rank ended or failed, the ranks out of step). */
static int serve_one(parent *p, const bench_fork_ops *ops, void *arg) {
  int n = p->n, nb = 0, nm = 0, nr = 0, all = 0;
  int64_t least = INT64_MAX, v;
  memset(p->want, WANT_NEXT, (size_t)n);
  if (gather(p)) return -1;
  for (int r = 0; r < n; r++) {
    nb += p->type[r] == 'B';
    nr += p->type[r] == 'R';
    all |= p->flags[r];
    if (p->type[r] == 'M' && p->len[r] == (int)sizeof v) {
      nm++;
      memcpy(&v, p->msg[r], sizeof v);
      if (v < least) least = v;
    }
  }
  if (nm == n) {
    for (int r = 0; r < n; r++) send_msg(p->down[r][1], 'G', 0, &least, sizeof least);
    return 0;
  }
  if (nb == n) {
    for (int r = 0; r < n; r++) send_msg(p->down[r][1], 'G', all, NULL, 0);
    if (p->barriers++ == 0 && ops->started) ops->started(arg, all);
    return 0;
  }
  if (nr == n) {
    if (ops->result(arg, p->msg, p->len, n)) {
      fprintf(stderr, "baton bench: the ranks' results do not fit together\n");
      return -1;
    }
    return 1;
  }
  fprintf(stderr, "baton bench: the ranks are out of step (rank 0 sent '%c', rank %d '%c')\n", p->type[0], n - 1,
          p->type[n - 1]);
  return -1;
}

int bench_fork_run(int n, const bench_fork_ops *ops, void *arg) {
  if (n < 1 || n > BENCH_FORK_MAX_RANKS) {
    fprintf(stderr, "baton bench: -P runs 1 to %d ranks, not %d\n", BENCH_FORK_MAX_RANKS, n);
    return 2;
  }
  parent p = {.n = n};
  p.up = calloc((size_t)n, sizeof *p.up);
  p.down = calloc((size_t)n, sizeof *p.down);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  char *buf = malloc((size_t)n * BENCH_FORK_MSG_MAX);
  p.msg = calloc((size_t)n, sizeof *p.msg);
  p.want = calloc((size_t)n, 1);
  p.type = calloc((size_t)n, 1);
  p.len = calloc((size_t)n, sizeof *p.len);
  p.flags = calloc((size_t)n, sizeof *p.flags);
  p.pf = calloc((size_t)n, sizeof *p.pf);
  p.who = calloc((size_t)n, sizeof *p.who);
  int made = 0, started = 0, rc = 0;
  if (!p.up || !p.down || !pids || !buf || !p.msg || !p.want || !p.type || !p.len || !p.flags || !p.pf || !p.who) {
    fprintf(stderr, "baton bench: out of memory for %d ranks' processes\n", n);
    rc = 2;
  }
  for (; !rc && made < n; made++)
    if (pipe(p.up[made]) || (pipe(p.down[made]) && (close(p.up[made][0]), close(p.up[made][1]), 1))) {
      perror("baton bench: pipe");
      rc = 2;
      break;
    }
  fflush(stdout);
  fflush(stderr);
  for (; !rc && started < n; started++) {
    pids[started] = fork();
    if (pids[started] < 0) {
      perror("baton bench: fork");
      rc = 2;
      break;
    }
    if (pids[started] == 0) {
      int r = started;
      for (int q = 0; q < n; q++)
        if (q != r) close(p.up[q][0]), close(p.up[q][1]), close(p.down[q][0]), close(p.down[q][1]);
      close(p.up[r][0]);
      close(p.down[r][1]);
      bench_fork f = {r, p.up[r][1], p.down[r][0]};
      ops->child(arg, &f, r);
      _exit(0);
    }
  }
  for (int r = 0; r < made; r++) {
    close(p.up[r][1]);
    close(p.down[r][0]);
  }
  void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
  for (int r = 0; r < n && !rc; r++) p.msg[r] = buf + (size_t)r * BENCH_FORK_MSG_MAX;
  if (!rc && hand_out_id(&p, ops, arg)) rc = 2;
  for (int got = 0; !rc && got < ops->nresults;) {
    int k = serve_one(&p, ops, arg);
    if (k < 0) rc = 2;
    got += k > 0;
  }
  for (int r = 0; r < made; r++) {
    if (rc && r < started) kill(pids[r], SIGTERM);
    close(p.down[r][1]);
  }
  for (int r = 0; r < started; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      fprintf(stderr, "baton bench: rank %d's process ended with status %d\n", r,
              WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      rc = 1;
    }
  }
  for (int r = 0; r < made; r++) close(p.up[r][0]);
  signal(SIGPIPE, old_pipe);
  free(buf);
  free(p.msg);
  free(p.want);
  free(p.type);
  free(p.len);
  free(p.flags);
  free(p.pf);
  free(p.who);
  free(p.up);
  free(p.down);
  free(pids);
  return rc;
}
