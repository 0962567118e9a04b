/* test_bootstrap.c -- the TCP bootstrap, with N forked processes on localhost: data, deaths, timeouts, bad ids. */
#include "rt_bootstrap.h"
#include "rt_shmbox.h"
#include "rt_socket.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Child exit codes. */
enum { RC_OK = 0, RC_DATA = 1, RC_INIT = 2, RC_OP = 3, RC_NOID = 4, RC_ID = 5, RC_DIED = 42 };

/* The test's own timeout for every scenario unless one sets another. */
#define TIMEOUT "4"

typedef int (*rank_fn)(int rank, int n, const rt_unique_id *id, void *arg);

typedef struct result {
  int code[16];
  char *log[16];
  double secs;
} result;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Forks n ranks.  Each sets the environment `env` ("K=V" strings, NULL
 * ended) before touching baton; rank 0 creates the id and passes it to the
 * others through pipes, as an application would by MPI or a file.  Each
 * rank's stderr (baton's log) is kept in r->log[rank]. */
static void run_ranks(int n, rank_fn fn, void *arg, const char *const *env, result *r) {
  int pipes[16][2];
  char path[16][64];
  pid_t pid[16];
  memset(r, 0, sizeof *r);
  for (int i = 0; i < n; i++) {
    if (pipe(pipes[i])) { perror("pipe"); exit(99); }
    snprintf(path[i], sizeof path[i], "/tmp/test_bootstrap.%d.%d.log", (int)getpid(), i);
  }
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    if (pid[i] < 0) { perror("fork"); exit(99); }
    if (pid[i]) continue;
    alarm(40);
    FILE *log = freopen(path[i], "w", stderr);
    if (!log) _exit(99);
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int k = 0; env && env[k]; k++) putenv((char *)env[k]);
    rt_unique_id id;
    if (i == 0) {
      if (rt_bootstrap_unique_id(&id) != BT_OK) _exit(RC_ID);
      for (int k = 1; k < n; k++)
        if (write(pipes[k][1], &id, sizeof id) != sizeof id) _exit(99);
    } else {
      for (int k = 0; k < n; k++) close(pipes[k][1]);
      if (read(pipes[i][0], &id, sizeof id) != sizeof id) _exit(RC_NOID);
    }
    fflush(stderr);
    _exit(fn(i, n, &id, arg));
  }
  for (int i = 0; i < n; i++) { close(pipes[i][0]); close(pipes[i][1]); }
  for (int i = 0; i < n; i++) {
    int st;
    while (waitpid(pid[i], &st, 0) < 0 && errno == EINTR) {}
    r->code[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  r->secs = now_s() - t0;
  for (int i = 0; i < n; i++) {
    r->log[i] = tap_slurp(path[i]);
    if (!r->log[i]) r->log[i] = strdup("");
    unlink(path[i]);
  }
}

static void show_logs(const result *r, int n) {
  for (int i = 0; i < n; i++) {
    printf("#   rank %d exit %d\n", i, r->code[i]);
    for (const char *p = r->log[i]; *p;) {
      const char *e = strchr(p, '\n');
      int len = e ? (int)(e - p) : (int)strlen(p);
      printf("#     %.*s\n", len, p);
      p += len + (e != NULL);
    }
  }
}

static void free_result(result *r, int n) {
  for (int i = 0; i < n; i++) free(r->log[i]);
}

/* True when every rank exited with `code`, else the logs are shown. */
static int all_exit(const result *r, int n, int code) {
  for (int i = 0; i < n; i++)
    if (r->code[i] != code) { show_logs(r, n); return 0; }
  return 1;
}

static unsigned char pattern(int rank, size_t i, int salt) {
  return (unsigned char)(rank * 131 + i * 7 + salt * 29 + (i >> 8) + 1);
}

static int check(const unsigned char *p, int rank, size_t n, int salt, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(rank, i, salt)) {
      fprintf(stderr, "TEST %s: byte %zu of rank %d's data is %u, expected %u\n", what, i, rank, p[i],
              pattern(rank, i, salt));
      return 0;
    }
  return 1;
}

static void fill(unsigned char *p, int rank, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) p[i] = pattern(rank, i, salt);
}

/* Allgather of `per` bytes a rank; checks every byte. */
static int allgather_checked(rt_bootstrap *bs, int rank, int n, size_t per, int salt) {
  unsigned char *d = malloc(per * n);
  memset(d, 0xee, per * n);
  fill(d + per * rank, rank, per, salt);
  int ok_ = rt_bootstrap_allgather(bs, d, per) == BT_OK;
  for (int k = 0; ok_ && k < n; k++) ok_ = check(d + per * k, k, per, salt, "allgather");
  free(d);
  return ok_;
}

/* The whole API: init, two allgathers, barrier, tagged messages in a ring
 * received out of order, a message two ranks on (a lazily made connection,
 * or to itself for 2 ranks), and big messages every rank sends before it
 * receives.  arg: bytes of the big transfers. */
static int full_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  size_t big = *(size_t *)arg;
  if (getenv("TEST_FAULTS")) rt_socket_fault_set(7, 3);
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  if (rt_bootstrap_rank(bs) != rank || rt_bootstrap_nranks(bs) != n) return RC_DATA;
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  int res = RC_OK;
  unsigned char a[100], b[333], c[64];
  unsigned char *bigs = malloc(big), *bigr = malloc(big);
  if (!allgather_checked(bs, rank, n, 37, 1) || !allgather_checked(bs, rank, n, big, 2)) { res = RC_DATA; goto out; }
  if (rt_bootstrap_barrier(bs)) { res = RC_OP; goto out; }
  fill(a, rank, sizeof a, 5);
  fill(b, rank, sizeof b, 6);
  fill(c, rank, sizeof c, 7);
  fill(bigs, rank, big, 8);
  if (rt_bootstrap_send(bs, next, 5, a, sizeof a) || rt_bootstrap_send(bs, next, 6, b, sizeof b) ||
      rt_bootstrap_send(bs, (rank + 2) % n, 7, c, sizeof c) || rt_bootstrap_send(bs, prev, 8, bigs, big)) {
    res = RC_OP;
    goto out;
  }
  memset(a, 0, sizeof a); memset(b, 0, sizeof b); memset(c, 0, sizeof c); memset(bigr, 0, big);
  if (rt_bootstrap_recv(bs, prev, 6, b, sizeof b) || rt_bootstrap_recv(bs, prev, 5, a, sizeof a) ||
      rt_bootstrap_recv(bs, (rank + n - 2) % n, 7, c, sizeof c) || rt_bootstrap_recv(bs, next, 8, bigr, big)) {
    res = RC_OP;
    goto out;
  }
  if (!check(a, prev, sizeof a, 5, "tag 5") || !check(b, prev, sizeof b, 6, "tag 6") ||
      !check(c, (rank + n - 2) % n, sizeof c, 7, "tag 7") || !check(bigr, next, big, 8, "tag 8"))
    res = RC_DATA;
  else if (rt_bootstrap_barrier(bs))
    res = RC_OP;
out:
  free(bigs);
  free(bigr);
  rt_bootstrap_free(bs);
  return res;
}

static void test_full(void) {
  static const char *const faults[] = {"TEST_FAULTS=1", "BATON_BOOTSTRAP_TIMEOUT=30", NULL};   /* slow by design: no 4 s bound */
  size_t big = 3 << 20, small = 5000;
  for (int n = 2; n <= 8; n *= 2) {
    result r;
    run_ranks(n, full_rank, &big, NULL, &r);
    ok(all_exit(&r, n, RC_OK), "%d ranks: init, allgather of 37 B and 3 MiB, barrier, out-of-order tags, "
       "non-ring peers, send-before-receive of 3 MiB: every byte right (%.2f s)", n, r.secs);
    free_result(&r, n);
  }
  result r;
  run_ranks(4, full_rank, &small, faults, &r);
  ok(all_exit(&r, 4, RC_OK), "4 ranks with every socket read and write cut to 7 bytes and every third "
     "one a spurious would-block: every byte right (%.2f s)", r.secs);
  free_result(&r, 4);
}

/* Whether rank `victim` of n died by SIGKILL and every other failed its
 * operation (RC_OP), one of them logging `says`; the logs shown if not. */
static int killed_named(const result *r, int n, int victim, const char *says) {
  int good = r->code[victim] == 128 + SIGKILL, named = 0;
  for (int i = 0; i < n; i++)
    if (i != victim) {
      good &= r->code[i] == RC_OP;
      named |= strstr(r->log[i], says) != NULL;
    }
  if (!good || !named) show_logs(r, n);
  return good && named;
}

/* arg {victim, rounds}: the victim kills itself (SIGKILL, no clean-up)
 * after `rounds` allgathers; the others run allgathers until one fails. */
static int dies_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  const int *a = arg;
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  unsigned char d[64 * 16];
  int rc = RC_OK;
  for (int i = 0; i < 100000 && rc == RC_OK; i++) {
    if (rank == a[0] && i == a[1]) kill(getpid(), SIGKILL);
    if (rt_bootstrap_allgather(bs, d, 64) != BT_OK) rc = RC_OP;
  }
  rt_bootstrap_free(bs);
  return rc;
}

static void test_dead_rank(void) {
  for (int rounds = 0; rounds <= 50; rounds += 50) {
    int a[2] = {2, rounds};
    result r;
    run_ranks(4, dies_rank, a, NULL, &r);
    int good = killed_named(&r, 4, 2, "rank 2 closed its connection");
    ok(good && r.secs < 4, "a rank killed after %d allgathers makes every other rank's allgather "
       "fail within the timeout (%.2f s of 4), naming the dead rank", rounds, r.secs);
    free_result(&r, 4);
  }
}

/* The shared-memory mailbox: 2000 allgathers of records of 1-1000 bytes,
 * every byte checked, then one record too large.  arg {victim, when}: a
 * rank that kills itself (SIGKILL) before allgather `when` (-1: before
 * the mailbox is made), or victim -1. */
static int box_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  const int victim = ((const int *)arg)[0], when = ((const int *)arg)[1];
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  if (rank == victim && when < 0) kill(getpid(), SIGKILL);
  rt_shmbox *box = NULL;
  int rc = rt_shmbox_open(&box, bs, rank, n, 1000, INT64_C(3000000000)) ? RC_INIT : RC_OK;
  unsigned char *d = malloc(1000 * (size_t)n);
  for (int i = 0; i < 2000 && rc == RC_OK && d; i++) {
    if (rank == victim && i == when) kill(getpid(), SIGKILL);
    size_t per = 1 + (size_t)i * 37 % 1000;
    fill(d + per * rank, rank, per, i);
    if (rt_shmbox_allgather(box, d, per) != BT_OK) rc = RC_OP;
    for (int k = 0; k < n && rc == RC_OK; k++)
      if (!check(d + per * k, k, per, i, "mailbox")) rc = RC_DATA;
  }
  if (rc == RC_OK && rt_shmbox_allgather(box, d, 1001) != BT_ERR_INVALID) rc = RC_DATA;
  free(d);
  rt_shmbox_close(box);
  rt_bootstrap_free(bs);
  return rc;
}

/* Mailboxes this host's /dev/shm still holds. */
static int boxes_left(void) {
  glob_t g;
  int left = glob("/dev/shm/baton-box-*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
  if (left) globfree(&g);
  return left;
}

static void test_shmbox(void) {
  int arg[2] = {-1, 0};
  const int before = boxes_left();   /* another job's, or one a crash left: not this test's */
  result r;
  run_ranks(4, box_rank, arg, NULL, &r);
  int left = boxes_left() - before;
  ok(all_exit(&r, 4, RC_OK) && !left, "4 ranks: 2000 allgathers through the shared-memory mailbox, every byte right, "
     "a record too large refused, nothing left in /dev/shm (%d) (%.2f s)", left, r.secs);
  free_result(&r, 4);
  arg[0] = 2, arg[1] = 100;
  run_ranks(4, box_rank, arg, NULL, &r);
  int good = killed_named(&r, 4, 2, "rank 2's process");
  ok(good && r.secs < 2, "a rank killed between mailbox allgathers: every other rank's fails at once, "
     "naming it (%.2f s; the wait's own limit 3 s)", r.secs);
  free_result(&r, 4);
  arg[1] = -1;   /* before the mailbox is made: rank 0 has made it, nobody maps it */
  run_ranks(4, box_rank, arg, NULL, &r);
  good = r.code[2] == 128 + SIGKILL;
  for (int i = 0; i < 4; i++) good &= i == 2 || r.code[i] == RC_INIT;
  left = boxes_left() - before;
  ok(good && !left && r.secs < 4, "a rank killed before the mailbox is made: every other rank's making fails, "
     "nothing left in /dev/shm (%d) (%.2f s)", left, r.secs);
  if (!good) show_logs(&r, 4);
  free_result(&r, 4);
}

/* Rank 1 never joins: the root reports it; nobody hangs. */
static int absent_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  if (rank == 1) return RC_DIED;
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  rt_bootstrap_free(bs);
  return RC_OK;
}

static void test_absent_rank(void) {
  static const char *const e2[] = {"BATON_BOOTSTRAP_TIMEOUT=2", NULL};
  result r;
  run_ranks(3, absent_rank, NULL, e2, &r);
  ok(r.code[0] == RC_INIT && r.code[2] == RC_INIT && r.secs >= 2 && r.secs < 2 + 4, "a rank that never calls init "
     "makes the others' init fail after the timeout (%.2f s of 2)", r.secs);
  ok_contains(r.log[2], "rank 1 of 3 did not register within 2 s", "the error names the missing rank");
  free_result(&r, 3);
}

/* The id's magic (bytes 4..11) is changed: the root refuses. */
static int magic_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  rt_unique_id bad = *id;
  bad.bytes[*(int *)arg] ^= 0x5a;
  rt_bootstrap *bs;
  bt_result res = rt_bootstrap_init(&bs, &bad, rank, n);
  return res == BT_ERR_INVALID && !bs ? RC_OK : RC_INIT;
}

static void test_bad_ids(void) {
  int byte = 6;
  result r;
  run_ranks(1, magic_rank, &byte, NULL, &r);
  ok(r.code[0] == RC_OK, "an id with another magic is refused with BT_ERR_INVALID");
  ok_contains(r.log[0], "magic", "the refusal says the magic differs");
  ok_contains(r.log[0], "another run", "and suggests an id from another run");
  free_result(&r, 1);
  byte = 1;
  run_ranks(1, magic_rank, &byte, NULL, &r);
  ok(r.code[0] == RC_OK, "bytes that are not a baton id are refused");
  ok_contains(r.log[0], "not one made by rt_bootstrap_unique_id", "saying so");
  free_result(&r, 1);
}

static int id_only(int rank, int n, const rt_unique_id *id, void *arg) { return RC_OK; }

static void test_comm_id(void) {
  static const struct { const char *value, *says; } bad[] = {
    {"localhost", "expected host:port"},
    {"127.0.0.1:99999", "port '99999' is not a number from 1 to 65535"},
    {"127.0.0.1:", "port '' is not a number"},
    {"::1:5000", "must be written in brackets"},
    {"[::1:5000", "expected [IPv6-address]:port"},
    {"203.0.113.7:5000", "not an address of this host"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char env[128];
    snprintf(env, sizeof env, "BATON_COMM_ID=%s", bad[i].value);
    const char *const e[] = {env, NULL};
    result r;
    run_ranks(1, id_only, NULL, e, &r);
    ok(r.code[0] == RC_ID, "BATON_COMM_ID=%s: rt_bootstrap_unique_id fails", bad[i].value);
    ok_contains(r.log[0], bad[i].says, "BATON_COMM_ID=%s: the error says '%s'", bad[i].value, bad[i].says);
    free_result(&r, 1);
  }
  /* A fixed, free port on IPv4 and (where the host has it) IPv6 loopback. */
  for (int v6 = 0; v6 < 2; v6++) {
    rt_sockaddr a = {0};
    socklen_t len = v6 ? sizeof a.in6 : sizeof a.in4;
    if (v6) { a.in6.sin6_family = AF_INET6; a.in6.sin6_addr = in6addr_loopback; }
    else { a.in4.sin_family = AF_INET; a.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK); }
    int fd = socket(a.sa.sa_family, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, &a.sa, len) || getsockname(fd, &a.sa, &len)) {
      if (fd >= 0) close(fd);
      ok(v6, "# SKIP no %s loopback", v6 ? "IPv6" : "IPv4");
      continue;
    }
    close(fd);
    char env[128];
    snprintf(env, sizeof env, v6 ? "BATON_COMM_ID=[::1]:%d" : "BATON_COMM_ID=127.0.0.1:%d",
             ntohs(v6 ? a.in6.sin6_port : a.in4.sin_port));
    const char *const e[] = {env, NULL};
    size_t big = 100000;
    result r;
    run_ranks(3, full_rank, &big, e, &r);
    ok(all_exit(&r, 3, RC_OK), "%s: 3 ranks bootstrap through it and move every byte right", env);
    free_result(&r, 3);
  }
}

static void test_ifname(void) {
  static const char *const lo[] = {"BATON_SOCKET_IFNAME=lo", NULL};
  static const char *const none[] = {"BATON_SOCKET_IFNAME=nosuchif", NULL};
  size_t big = 10000;
  result r;
  run_ranks(2, full_rank, &big, lo, &r);
  ok(all_exit(&r, 2, RC_OK), "BATON_SOCKET_IFNAME=lo: 2 ranks bootstrap over loopback");
  free_result(&r, 2);
  run_ranks(1, id_only, NULL, none, &r);
  ok(r.code[0] == RC_ID, "BATON_SOCKET_IFNAME=nosuchif: rt_bootstrap_unique_id fails");
  ok_contains(r.log[0], "BATON_SOCKET_IFNAME=nosuchif matches no interface", "naming the setting");
  ok_contains(r.log[0], " lo", "and listing the interfaces there are");
  free_result(&r, 1);
}

static void *abort_later(void *bs) {
  usleep(300000);
  rt_bootstrap_abort(bs);
  return NULL;
}

/* Rank 0 blocks in a receive that never comes and another thread aborts;
 * rank 1, blocked on rank 0, must fail too. */
static int abort_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  pthread_t t;
  if (rank == 0) pthread_create(&t, NULL, abort_later, bs);
  char x;
  int rc = rt_bootstrap_recv(bs, 1 - rank, 1, &x, 1) == BT_OK ? RC_OK : RC_OP;
  if (rank == 0) pthread_join(t, NULL);
  if (rc == RC_OP && rt_bootstrap_barrier(bs) == BT_OK) rc = RC_DATA;  /* stays failed */
  rt_bootstrap_free(bs);
  return rc;
}

static void test_abort(void) {
  static const char *const e[] = {"BATON_BOOTSTRAP_TIMEOUT=30", NULL};
  result r;
  run_ranks(2, abort_rank, NULL, e, &r);
  ok(r.code[0] == RC_OP && r.code[1] == RC_OP && r.secs < 5, "rt_bootstrap_abort from another thread "
     "unblocks the receive, and the peer blocked on it fails too (%.2f s, timeout 30)", r.secs);
  ok_contains(r.log[0], "aborted", "the aborted rank says so");
  ok_contains(r.log[1], "rank 0 closed its connection", "the peer names the aborted rank");
  free_result(&r, 2);
}

/* Scenarios of one mistake each, on 2 ranks; arg picks one. */
static int mistake_rank(int rank, int n, const rt_unique_id *id, void *arg) {
  const char *what = arg;
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  unsigned char buf[64] = {0};
  int rc = RC_OK;
  if (!strcmp(what, "timeout")) {        /* rank 1 sends tag 6, rank 0 waits for tag 5 */
    if (rank == 1) { rt_bootstrap_send(bs, 0, 6, buf, 8); usleep(3000000); }   /* alive past rank 0's 2 s */
    else if (rt_bootstrap_recv(bs, 1, 5, buf, 8) != BT_OK) rc = RC_OP;
  } else if (!strcmp(what, "size")) {    /* 10 bytes sent, 20 expected */
    if (rank == 1) rt_bootstrap_send(bs, 0, 3, buf, 10);
    else if (rt_bootstrap_recv(bs, 1, 3, buf, 20) != BT_ERR_INVALID) rc = RC_DATA;
    else rc = RC_OP;
    if (rank == 1) sleep(1);
  } else if (!strcmp(what, "collectives")) {
    bt_result res = rank == 0 ? rt_bootstrap_allgather(bs, buf, 8) : rt_bootstrap_barrier(bs);
    rc = res != BT_OK ? RC_OP : RC_DATA;
  } else if (!strcmp(what, "args")) {    /* bad arguments leave bs usable */
    rc = rt_bootstrap_send(bs, 2, 0, buf, 1) == BT_ERR_INVALID && rt_bootstrap_recv(bs, 0, -1, buf, 1) ==
         BT_ERR_INVALID && rt_bootstrap_barrier(bs) == BT_OK ? RC_OP : RC_DATA;
  }
  rt_bootstrap_free(bs);
  return rc;
}

static void test_mistakes(void) {
  static const char *const e2[] = {"BATON_BOOTSTRAP_TIMEOUT=2", NULL};
  result r;
  run_ranks(2, mistake_rank, "timeout", e2, &r);
  ok(r.code[0] == RC_OP && r.secs >= 2 && r.secs < 6, "a receive whose message never comes times out "
     "after BATON_BOOTSTRAP_TIMEOUT=2 (%.2f s)", r.secs);
  ok_contains(r.log[0], "receive of message tag 5 from rank 1: timed out after 2 s", "naming tag, peer and timeout");
  free_result(&r, 2);
  run_ranks(2, mistake_rank, "size", NULL, &r);
  ok(r.code[0] == RC_OP, "a message of another size than the receive is BT_ERR_INVALID");
  ok_contains(r.log[0], "rank 1 sent 10 bytes for message tag 3, but this rank expects 20", "naming both sizes");
  free_result(&r, 2);
  run_ranks(2, mistake_rank, "collectives", NULL, &r);
  ok(r.code[0] == RC_OP && r.code[1] == RC_OP, "allgather on one rank and barrier on the other fail on both");
  {
    /* Whichever rank reads the other's message first says why; the other may see it hang up first. */
    const char *said = strstr(r.log[0], "different collectives") ? r.log[0] : r.log[1];
    ok_contains(said, "different collectives", "one rank says the ranks called different collectives");
    ok(strstr(said, "sent barrier #1 instead") || strstr(said, "sent allgather #0 instead"),
       "naming what it got instead");
    if (!strstr(said, " instead")) show_logs(&r, 2);
  }
  free_result(&r, 2);
  run_ranks(2, mistake_rank, "args", NULL, &r);
  ok(all_exit(&r, 2, RC_OP), "bad peer or tag arguments are BT_ERR_INVALID and leave the bootstrap usable");
  ok_contains(r.log[0], "peer 2 (must be 0..1)", "naming the bad peer");
  free_result(&r, 2);
}

/* The socket layer's pure functions, in this process. */
static void test_socket(void) {
  rt_sockaddr a, b;
  char s[RT_SOCKADDR_STRLEN];
  unsigned char w[RT_SOCKADDR_WIRE];
  ok(rt_socket_parse("127.0.0.1:80", "t", &a) == BT_OK && !strcmp(rt_socket_str(&a, s, sizeof s), "127.0.0.1:80"),
     "parse and print 127.0.0.1:80");
  ok(rt_socket_is_loopback(&a), "127.0.0.1 is loopback");
  rt_socket_pack(&a, w);
  ok(rt_socket_unpack(w, &b) == BT_OK && !memcmp(&a.in4, &b.in4, sizeof a.in4), "IPv4 wire round trip");
  ok(rt_socket_parse("[::1]:8080", "t", &a) == BT_OK && !strcmp(rt_socket_str(&a, s, sizeof s), "[::1]:8080"),
     "parse and print [::1]:8080");
  rt_socket_pack(&a, w);
  ok(rt_socket_unpack(w, &b) == BT_OK && !memcmp(&a.in6, &b.in6, sizeof a.in6), "IPv6 wire round trip");
  w[0] = 5;
  ok(rt_socket_unpack(w, &b) == BT_ERR_INVALID, "an unknown family on the wire is refused");
  char name[IF_NAMESIZE];
  ok(rt_socket_pick_interface("=lo", AF_INET, &a, name) == BT_OK && !strcmp(name, "lo") && rt_socket_is_loopback(&a),
     "=lo picks the loopback interface");
  bt_result r = rt_socket_pick_interface("", AF_UNSPEC, &a, name);
  ok(r == BT_OK, "the default picks an interface (%s: %s)", name, rt_socket_str(&a, s, sizeof s));
  r = rt_socket_pick_interface("^lo", AF_UNSPEC, &a, name);
  ok(r == BT_ERR_INVALID || (strcmp(name, "lo") && !rt_socket_is_loopback(&a)), "^lo never picks lo");
}

/* The launcher's pattern (baton bench -P, gpu_runtime --procs): the id is
 * made in the parent, whose root thread serves ranks that are all forked
 * children.  No child runs that root, so none may wait on it when init
 * returns (they did, for the whole bootstrap timeout). */
static void test_parent_id(void) {
  enum { N = 3 };
  rt_unique_id id;
  size_t small = 5000;
  ok(rt_bootstrap_unique_id(&id) == BT_OK, "the parent makes an id");
  double t0 = now_s();
  pid_t pid[N];
  for (int i = 0; i < N; i++) {
    pid[i] = fork();
    if (pid[i] < 0) { perror("fork"); exit(99); }
    if (!pid[i]) {
      alarm(40);
      if (!freopen("/dev/null", "w", stderr)) _exit(99);
      _exit(full_rank(i, N, &id, &small));
    }
  }
  int good = 0;
  for (int i = 0; i < N; i++) {
    int st;
    while (waitpid(pid[i], &st, 0) < 0 && errno == EINTR) {}
    good += WIFEXITED(st) && WEXITSTATUS(st) == RC_OK;
  }
  double secs = now_s() - t0;
  ok(good == N && secs < 2, "%d ranks forked after the parent made the id: all succeed (%d of %d) at once, "
     "not after the %s s bootstrap timeout (%.2f s)", N, good, N, TIMEOUT, secs);
}

int main(void) {
  /* Children read the environment on first use; the parent touches no
   * parameter until test_socket, the last test. */
  setenv("BATON_BOOTSTRAP_TIMEOUT", TIMEOUT, 1);
  signal(SIGPIPE, SIG_DFL);    /* the library must not need SIGPIPE ignored */
  alarm(110);
  test_full();
  test_dead_rank();
  test_shmbox();
  test_absent_rank();
  test_bad_ids();
  test_comm_id();
  test_ifname();
  test_abort();
  test_mistakes();
  test_socket();
  test_parent_id();   /* reads parameters in this process: after every test that sets them in children */
  return tap_done();
}
