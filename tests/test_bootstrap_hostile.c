/* test_bootstrap_hostile.c -- the bootstrap under attack and under failure: connection floods, hostile bytes, oversized and unasked-for messages, killed ranks, a killed root. */
#define _GNU_SOURCE
#include "rt_bootstrap_int.h"
#include "rt_socket.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { RC_OK = 0, RC_DATA = 1, RC_INIT = 2, RC_OP = 3, RC_NOID = 4, RC_ID = 5 };
enum { MAXR = 16 };

/* ASan reserves terabytes of address space: no RLIMIT_AS under it. */
static int sanitized(void) {
#if defined(__SANITIZE_ADDRESS__)
  return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return 1;
#endif
#endif
  return 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One forked process whose stderr (baton's log) goes to a file. */
typedef struct proc { pid_t pid; char path[64]; int code; char *log; } proc;

static int nproc_made;

/* Forks: the child sets the environment (NULL-ended "K=V" list), lowers
 * RLIMIT_NOFILE to nofile (0: unchanged) and returns 0; the parent
 * returns the child's pid. */
static pid_t spawn(proc *p, const char *const *env, int nofile) {
  snprintf(p->path, sizeof p->path, "/tmp/test_bshostile.%d.%d.log", (int)getpid(), nproc_made++);
  p->log = NULL;
  fflush(stdout);
  p->pid = fork();
  if (p->pid < 0) { perror("fork"); exit(99); }
  if (p->pid) return p->pid;
  alarm(60);
  if (!freopen(p->path, "w", stderr)) _exit(99);
  setvbuf(stderr, NULL, _IOLBF, 0);
  for (int k = 0; env && env[k]; k++) putenv((char *)env[k]);
  if (nofile) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = nofile;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  return 0;
}

/* Waits for p (SIGKILLed first when kill_it) and reads its log. */
static void reap(proc *p, int kill_it) {
  int st;
  if (kill_it) kill(p->pid, SIGKILL);
  while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {}
  p->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->log = tap_slurp(p->path);
  if (!p->log) p->log = strdup("");
  unlink(p->path);
}

static void show(const proc *p, const char *name) {
  printf("#   %s exit %d\n", name, p->code);
  int lines = 0;
  for (const char *s = p->log; *s && lines < 40; lines++) {
    const char *e = strchr(s, '\n');
    int len = e ? (int)(e - s) : (int)strlen(s);
    printf("#     %.*s\n", len > 3000 ? 3000 : len, s);
    s += len + (e != NULL);
  }
}

/* A root in its own process (so that it reads its own environment): makes
 * the id, hands it over through a pipe, and lives until killed. */
static void root_proc(proc *p, const char *const *env, int nofile, rt_unique_id *id) {
  int fds[2];
  if (pipe(fds)) exit(99);
  if (!spawn(p, env, nofile)) {
    close(fds[0]);
    rt_unique_id mine;
    if (rt_bootstrap_unique_id(&mine) != BT_OK) _exit(RC_ID);
    if (write(fds[1], &mine, sizeof mine) != sizeof mine) _exit(99);
    for (;;) pause();
  }
  close(fds[1]);
  if (read(fds[0], id, sizeof *id) != sizeof *id) memset(id, 0, sizeof *id);
  close(fds[0]);
}

/* ---- a hostile client ----------------------------------------------------- */

/* Opens a non-blocking connection to a (connect may still be in progress). */
static int dial(const rt_sockaddr *a) {
  int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len = a->sa.sa_family == AF_INET6 ? sizeof a->in6 : sizeof a->in4;
  if (connect(fd, &a->sa, len) && errno != EINPROGRESS) { close(fd); return -1; }
  return fd;
}

/* Connects, blocking, for the hostile peers that talk. */
static int dial_wait(const rt_sockaddr *a) {
  int fd = dial(a);
  if (fd < 0) return -1;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  if (poll(&p, 1, 5000) != 1) { close(fd); return -1; }
  int err = 0;
  socklen_t el = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err) { close(fd); return -1; }
  fcntl(fd, F_SETFL, 0);
  return fd;
}

static void send_all(int fd, const void *b, size_t n) {
  const char *p = b;
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= k;
  }
}

/* The flood: until killed, against the root and every rank address that
 * arrives on addr_fd: connect-and-close churn, up to `idle` idle
 * connections held open, and connections that send garbage, a partial
 * greeting or a well-formed one with the wrong magic.  Writes how many
 * connections it made to count_fd every 1000. */
static void flooder(const rt_sockaddr *root, int addr_fd, int idle, int count_fd) {
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  signal(SIGPIPE, SIG_IGN);
  rt_sockaddr targets[1 + MAXR];
  int nt = 1;
  targets[0] = *root;
  int *held = calloc(idle, sizeof *held);
  for (int i = 0; i < idle; i++) held[i] = -1;
  fcntl(addr_fd, F_SETFL, O_NONBLOCK);
  unsigned long made = 0;
  unsigned seed = 12345;
  for (int round = 0;; round++) {
    rt_sockaddr a;
    while (nt < 1 + MAXR && read(addr_fd, &a, sizeof a) == sizeof a) targets[nt++] = a;
    const rt_sockaddr *t = &targets[round % nt];
    for (int i = 0; i < 20; i++) {        /* churn */
      int fd = dial(t);
      if (fd >= 0) { close(fd); made++; }
    }
    for (int i = 0; i < 10; i++) {        /* idle holders, oldest replaced */
      int slot = (int)(made % idle);
      if (held[slot] >= 0) close(held[slot]);
      held[slot] = dial(&targets[(round + i) % nt]);
      made++;
    }
    for (int i = 0; i < 4; i++) {         /* talkers: garbage, partial, wrong magic */
      int fd = dial_wait(t);
      if (fd < 0) continue;
      made++;
      unsigned char b[BS_REGISTER_LEN];
      for (size_t k = 0; k < sizeof b; k++) b[k] = (unsigned char)(seed = seed * 1103515245 + 12345) >> 16;
      size_t n = i == 1 ? 7 : sizeof b;
      if (i == 2) bs_put64(b, 0x1122334455667788ull);
      if (i == 3) { bs_put32(b + 8, 0); bs_put32(b + 12, 2); }
      send_all(fd, b, n);
      int slot = (int)(made % idle);
      if (held[slot] >= 0) close(held[slot]);
      held[slot] = fd;
    }
    if (made % 1000 < 34 && count_fd >= 0) {
      unsigned long m = made;
      if (write(count_fd, &m, sizeof m) < 0) {}
    }
    usleep(3000);   /* a few thousand a second: enough, without using up the host's ephemeral ports */
  }
}

/* ---- a flood while ranks bootstrap --------------------------------------- */

/* A rank under the flood: init, publish its listen address, then
 * allgathers and barriers for about two seconds (the flood reaches its
 * listener), checking every byte.  Every rank runs the same number. */
static int flood_rank(int rank, int n, const rt_unique_id *id, int addr_fd) {
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  rt_sockaddr me;
  bs_listen_address(bs, &me);
  if (me.sa.sa_family && write(addr_fd, &me, sizeof me) != sizeof me) return 99;
  int rc = RC_OK;
  for (int it = 0; rc == RC_OK && it < 80; it++) {    /* about two seconds */
    unsigned char d[MAXR * 64];
    memset(d, 0, sizeof d);
    for (int k = 0; k < 64; k++) d[rank * 64 + k] = (unsigned char)(rank * 7 + k + it);
    if (rt_bootstrap_allgather(bs, d, 64) != BT_OK) { rc = RC_OP; break; }
    for (int r = 0; r < n; r++)
      for (int k = 0; k < 64; k++)
        if (d[r * 64 + k] != (unsigned char)(r * 7 + k + it)) rc = RC_DATA;
    if (rt_bootstrap_barrier(bs) != BT_OK) rc = RC_OP;
    usleep(20000);
  }
  rt_bootstrap_free(bs);
  return rc;
}

static void test_flood(const char *label, const char *const *env) {
  enum { N = 8, NOFILE = 256, IDLE = 1100 };
  proc root, ranks[N], fl;
  rt_unique_id id;
  root_proc(&root, env, NOFILE, &id);
  rt_sockaddr root_addr;
  uint64_t magic;
  if (bs_id_decode(&id, "test", &magic, &root_addr) != BT_OK) {
    reap(&root, 1);
    ok(0, "%s: the root made an id", label);
    show(&root, "root");
    free(root.log);
    return;
  }
  int addrs[2], counts[2];
  if (pipe(addrs) || pipe(counts)) exit(99);
  if (!spawn(&fl, NULL, 0)) {
    close(addrs[1]);
    close(counts[0]);
    flooder(&root_addr, addrs[0], IDLE, counts[1]);
    _exit(0);
  }
  close(addrs[0]);
  close(counts[1]);
  usleep(500000);                        /* the flood in full swing before the ranks come */
  double t0 = now_s();
  for (int i = 0; i < N; i++)
    if (!spawn(&ranks[i], env, NOFILE)) _exit(flood_rank(i, N, &id, addrs[1]));
  close(addrs[1]);
  int good = 0;
  for (int i = 0; i < N; i++) { reap(&ranks[i], 0); good += ranks[i].code == RC_OK; }
  double secs = now_s() - t0;
  unsigned long made = 0, m;
  fcntl(counts[0], F_SETFL, O_NONBLOCK);
  while (read(counts[0], &m, sizeof m) == sizeof m) made = m;
  close(counts[0]);
  int root_alive = kill(root.pid, 0) == 0;
  reap(&fl, 1);
  reap(&root, 1);
  ok(good == N && secs < 25, "%s: %d of %d ranks bootstrap, allgather and barrier under a flood of %lu+ "
     "connections (churn, 1100 held idle, garbage, wrong magic) with RLIMIT_NOFILE %d (%.2f s)", label, good, N,
     made, NOFILE, secs);
  if (good != N) {
    for (int i = 0; i < N; i++) if (ranks[i].code != RC_OK) { show(&ranks[i], "rank"); break; }
    show(&root, "root");
  }
  ok(root_alive && root.code == 128 + SIGKILL, "%s: the root process survived the flood", label);
  ok(made >= 2000, "%s: the flood made %lu connections", label, made);
  int flooded = 0;
  for (int i = 0; i < N; i++) flooded += strstr(ranks[i].log, "closed a connection from") != NULL;
  ok(flooded == N, "%s: it reached every rank's own listener too (%d of %d ranks dropped strangers)", label,
     flooded, N);
  ok(strlen(root.log) < 64 * 1024, "%s: the root's log stays small (%zu bytes): strangers are counted, not "
     "logged one by one", label, strlen(root.log));
  for (int i = 0; i < N; i++) free(ranks[i].log);
  free(root.log);
  free(fl.log);
}

/* ---- hostile registrations at the root ----------------------------------- */

static int plain_rank(int rank, int n, const rt_unique_id *id) {
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  unsigned char d[MAXR * 8] = {0};
  int rc = rt_bootstrap_allgather(bs, d, 8) == BT_OK && rt_bootstrap_barrier(bs) == BT_OK ? RC_OK : RC_OP;
  rt_bootstrap_free(bs);
  return rc;
}

/* A registration message (magic, rank, nranks, address). */
static void registration(unsigned char *b, uint64_t magic, uint32_t rank, uint32_t nranks, const rt_sockaddr *a) {
  bs_put64(b, magic);
  bs_put32(b + 8, rank);
  bs_put32(b + 12, nranks);
  rt_socket_pack(a, b + 16);
}

static void test_root_inputs(void) {
  static const char *const env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", "BATON_BOOTSTRAP_AUTH_MS=500", NULL};
  enum { N = 4 };
  proc root, ranks[N];
  rt_unique_id id;
  root_proc(&root, env, 0, &id);
  rt_sockaddr ra;
  uint64_t magic;
  if (bs_id_decode(&id, "test", &magic, &ra) != BT_OK) exit(99);
  /* Before any rank: the offenders, each on its own connection. */
  int fds[8], nf = 0;
  unsigned char b[BS_REGISTER_LEN];
  rt_sockaddr bogus = ra;
  registration(b, magic ^ 1, 0, N, &ra);                              /* wrong magic */
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, sizeof b);
  registration(b, magic, 99, N, &ra);                                 /* rank out of range */
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, sizeof b);
  registration(b, magic, 0xffffffffu, 0xffffffffu, &ra);              /* nranks out of range */
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, sizeof b);
  registration(b, magic ^ 2, 1, 1u << 30, &bogus);                    /* stranger claiming a huge job */
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, sizeof b);
  registration(b, magic, 1, N, &ra);
  b[16] = 9;                                                          /* malformed address */
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, sizeof b);
  if ((fds[nf] = dial_wait(&ra)) >= 0) send_all(fds[nf++], b, 20);    /* partial, then silence */
  if ((fds[nf] = dial_wait(&ra)) >= 0) { send_all(fds[nf], b, 30); close(fds[nf]); }  /* partial, hangs up */
  usleep(800000);                        /* past BATON_BOOTSTRAP_AUTH_MS */
  double t0 = now_s();
  for (int i = 0; i < N; i++)
    if (!spawn(&ranks[i], env, 0)) _exit(plain_rank(i, N, &id));
  int good = 0;
  for (int i = 0; i < N; i++) { reap(&ranks[i], 0); good += ranks[i].code == RC_OK; }
  double secs = now_s() - t0;
  for (int i = 0; i < nf; i++) close(fds[i]);
  reap(&root, 1);
  ok(good == N && secs < 10, "a wrong magic, ranks and nranks out of range, a malformed address and partial "
     "registrations before the real ranks: all %d ranks still bootstrap (%d did, %.2f s)", N, good, secs);
  if (good != N) { show(&ranks[0], "rank 0"); show(&root, "root"); }
  ok_contains(root.log, "rank 99 of 4 is out of range", "the root names the out-of-range rank it refused");
  ok_contains(root.log, "sent a malformed listen address", "and the malformed address");
  ok_contains(root.log, "no registration within 500 ms (BATON_BOOTSTRAP_AUTH_MS)",
              "a silent partial registration is closed after BATON_BOOTSTRAP_AUTH_MS");
  for (int i = 0; i < N; i++) free(ranks[i].log);
  free(root.log);
}

/* ---- a hostile rank that knows the magic: oversized and unasked-for messages */

/* Plays rank 1 of 2 with raw sockets: registers, connects to rank 0 and
 * sends what `how` says, then lingers. */
static int hostile_rank(const rt_unique_id *id, const char *how) {
  rt_sockaddr ra, me = {0};
  uint64_t magic;
  if (bs_id_decode(id, "hostile", &magic, &ra) != BT_OK) return 90;
  me.in4.sin_family = AF_INET;
  me.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int lfd;
  if (rt_socket_listen(&me, 16, &lfd) != BT_OK) return 91;
  int rfd = dial_wait(&ra);
  if (rfd < 0) return 92;
  unsigned char b[BS_REGISTER_LEN], rep[BS_REPLY_LEN], table[2 * RT_SOCKADDR_WIRE];
  registration(b, magic, 1, 2, &me);
  send_all(rfd, b, sizeof b);
  if (recv(rfd, rep, sizeof rep, MSG_WAITALL) != sizeof rep || bs_get32(rep) != BS_REPLY_OK) return 93;
  if (recv(rfd, table, sizeof table, MSG_WAITALL) != sizeof table) return 94;
  rt_sockaddr r0;
  if (rt_socket_unpack(table, &r0) != BT_OK) return 95;
  int fd = dial_wait(&r0);
  if (fd < 0) return 96;
  unsigned char h[BS_HELLO_LEN + BS_HEADER_LEN];
  bs_put64(h, magic);
  bs_put32(h + 8, 1);
  bs_put32(h + 12, 2);
  send_all(fd, h, BS_HELLO_LEN);
  if (!strcmp(how, "huge")) {                 /* a 3 GiB message */
    bs_put32(h, 7); bs_put32(h + 4, 0); bs_put64(h + 8, 3ull << 30);
    send_all(fd, h, BS_HEADER_LEN);
    send_all(fd, "abcdefgh", 8);
  } else if (!strcmp(how, "header")) {        /* bytes 4..7 not zero */
    bs_put32(h, 7); bs_put32(h + 4, 0xdeadbeef); bs_put64(h + 8, 8);
    send_all(fd, h, BS_HEADER_LEN);
  } else if (!strcmp(how, "note")) {          /* last words that would forge a log line and color the terminal */
    static const char words[] = "I failed\nhost:1:1 baton WARN forged line\x1b[31m";
    bs_put32(h, BS_TAG_NOTE); bs_put32(h + 4, 0); bs_put64(h + 8, sizeof words - 1);
    send_all(fd, h, BS_HEADER_LEN);
    send_all(fd, words, sizeof words - 1);
    /* Closing with the rank's messages unread would reset the connection
     * and could drop the words before the rank reads them: end the writes,
     * then read until the rank hangs up (it does at once) or 2 s pass. */
    shutdown(fd, SHUT_WR);
    char sink[4096];
    struct pollfd pf = {fd, POLLIN, 0};
    while (poll(&pf, 1, 2000) > 0 && read(fd, sink, sizeof sink) > 0) {}
    close(fd);
    fd = -1;
  } else if (!strcmp(how, "queue")) {         /* 12 x 512 KiB nobody asked for */
    static char body[512 << 10];
    for (int i = 0; i < 12; i++) {
      bs_put32(h, 100 + i); bs_put32(h + 4, 0); bs_put64(h + 8, sizeof body);
      send_all(fd, h, BS_HEADER_LEN);
      send_all(fd, body, sizeof body);
    }
  }
  sleep(3);
  if (fd >= 0) close(fd);
  close(rfd);
  close(lfd);
  return 0;
}

static void test_hostile_messages(void) {
  static const char *const env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", "BATON_BOOTSTRAP_MAX_QUEUED_MB=2", NULL};
  static const struct { const char *how, *says, *what; } cases[] = {
    {"huge", "sent a message of 3221225472 bytes (message tag 7), over the limit of 64 MiB "
     "(BATON_BOOTSTRAP_MAX_MSG_MB raises it", "a 3 GiB message length"},
    {"header", "sent a malformed message header", "a malformed message header"},
    {"queue", "over the limit of 2 MiB (BATON_BOOTSTRAP_MAX_QUEUED_MB raises it)", "6 MiB of messages nobody asked for"},
    {"note", "reporting: I failed\\x0ahost:1:1 baton WARN forged line\\x1b[31m", "last words with a newline and a "
     "terminal escape (logged escaped)"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    proc root, r0, r1;
    rt_unique_id id;
    root_proc(&root, env, 0, &id);
    double t0 = now_s();
    if (!spawn(&r0, env, 0)) {
      struct rlimit rl = {1ull << 31, 1ull << 31};   /* 2 GiB of address space: no 3 GiB buffer */
      if (!sanitized()) setrlimit(RLIMIT_AS, &rl);
      rt_bootstrap *bs;
      _exit(rt_bootstrap_init(&bs, &id, 0, 2) == BT_OK ? RC_OK : RC_INIT);
    }
    if (!spawn(&r1, env, 0)) _exit(hostile_rank(&id, cases[c].how));
    reap(&r0, 0);
    double secs = now_s() - t0;
    reap(&r1, 1);
    reap(&root, 1);
    ok(r0.code == RC_INIT && secs < 3, "%s from a peer that knows the magic: the rank fails at once (%.2f s), "
       "not at the timeout, and does not crash", cases[c].what, secs);
    ok_contains(r0.log, strcmp(cases[c].how, "note") ? "rank 1 (at " : "rank 1 closed its connection",
                "%s: the error names the peer", cases[c].what);
    ok_contains(r0.log, cases[c].says, "%s: and the limit or the fault", cases[c].what);
    free(r0.log);
    free(r1.log);
    free(root.log);
  }
}

/* A rank may not send what its peers would refuse: the sender is told. */
static int big_sender(int rank, int n, const rt_unique_id *id) {
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  size_t over = (1 << 20) + 1;
  char *big = calloc(2, over);
  int rc = RC_OK;
  if (rank == 0 && rt_bootstrap_send(bs, 1, 3, big, over) != BT_ERR_INVALID) rc = RC_DATA;
  if (rt_bootstrap_allgather(bs, big, over) != BT_ERR_INVALID) rc = RC_DATA;
  free(big);
  if (rc == RC_OK && rt_bootstrap_barrier(bs) != BT_OK) rc = RC_OP;
  rt_bootstrap_free(bs);
  return rc;
}

static void test_sender_limit(void) {
  static const char *const env[] = {"BATON_BOOTSTRAP_MAX_MSG_MB=1", NULL};
  proc root, r[2];
  rt_unique_id id;
  root_proc(&root, env, 0, &id);
  for (int i = 0; i < 2; i++)
    if (!spawn(&r[i], env, 0)) _exit(big_sender(i, 2, &id));
  for (int i = 0; i < 2; i++) reap(&r[i], 0);
  reap(&root, 1);
  ok(r[0].code == RC_OK && r[1].code == RC_OK, "a send or allgather over BATON_BOOTSTRAP_MAX_MSG_MB is refused "
     "to its caller (BT_ERR_INVALID) and the bootstrap stays usable");
  ok_contains(r[0].log, "a message of 1048577 bytes is over the limit of 1 MiB (BATON_BOOTSTRAP_MAX_MSG_MB "
              "raises it", "naming the size, the limit and the parameter");
  if (r[0].code) show(&r[0], "rank 0");
  free(r[0].log);
  free(r[1].log);
  free(root.log);
}

/* ---- process death --------------------------------------------------------- */

/* arg: the victim SIGKILLs itself at step `when` (0: right after init,
 * before the barrier; k > 0: before allgather k); the others loop over
 * barrier and allgathers until one fails. */
static int death_rank(int rank, int n, const rt_unique_id *id, int victim, int when) {
  rt_bootstrap *bs;
  if (rt_bootstrap_init(&bs, id, rank, n) != BT_OK) return RC_INIT;
  unsigned char d[MAXR * 16];
  int rc = RC_OK;
  if (rank == victim && when == 0) kill(getpid(), SIGKILL);
  if (rt_bootstrap_barrier(bs) != BT_OK) rc = RC_OP;
  for (int i = 1; rc == RC_OK && i < 100000; i++) {
    if (rank == victim && i == when) kill(getpid(), SIGKILL);
    if (rt_bootstrap_allgather(bs, d, 16) != BT_OK) rc = RC_OP;
  }
  rt_bootstrap_free(bs);
  return rc;
}

static void test_death(void) {
  static const char *const env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", NULL};
  enum { N = 8, VICTIM = 5 };
  static const int whens[] = {0, 1, 40};
  for (size_t w = 0; w < sizeof whens / sizeof whens[0]; w++) {
    proc root, r[N];
    rt_unique_id id;
    root_proc(&root, env, 0, &id);
    double t0 = now_s();
    for (int i = 0; i < N; i++)
      if (!spawn(&r[i], env, 0)) _exit(death_rank(i, N, &id, VICTIM, whens[w]));
    for (int i = 0; i < N; i++) reap(&r[i], 0);
    double secs = now_s() - t0;
    reap(&root, 1);
    int failed = 0, named = 0;
    for (int i = 0; i < N; i++) {
      if (i == VICTIM) continue;
      failed += r[i].code == RC_OP || r[i].code == RC_INIT;   /* some may still be in init's barrier */
      named += strstr(r[i].log, "rank 5 ") != NULL && strstr(r[i].log, "did it exit, crash or abort?") != NULL;
    }
    ok(r[VICTIM].code == 128 + SIGKILL && failed == N - 1 && secs < 10, "rank 5 of 8 SIGKILLed %s: all %d "
       "others fail (%d did) in %.2f s, well within BATON_BOOTSTRAP_TIMEOUT=30",
       whens[w] ? "between allgathers" : "after init, before a barrier", N - 1, failed, secs);
    ok(named == N - 1, "and each names rank 5 as the one lost (%d of %d do)", named, N - 1);
    if (failed != N - 1 || named != N - 1)
      for (int i = 0; i < N; i++)
        if (i != VICTIM && ((r[i].code != RC_OP && r[i].code != RC_INIT) || !strstr(r[i].log, "rank 5 "))) {
          show(&r[i], "rank");
          break;
        }
    for (int i = 0; i < N; i++) free(r[i].log);
    free(root.log);
  }
}

/* The root's process dies while ranks wait for the table (rank 3 never
 * comes): they fail at once, naming the root. */
static void test_root_death(void) {
  static const char *const env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", NULL};
  enum { N = 4 };
  proc root, r[N - 1];
  rt_unique_id id;
  root_proc(&root, env, 0, &id);
  for (int i = 0; i < N - 1; i++)
    if (!spawn(&r[i], env, 0)) _exit(plain_rank(i, N, &id));
  usleep(500000);
  double t0 = now_s();
  reap(&root, 1);
  int failed = 0, named = 0;
  for (int i = 0; i < N - 1; i++) {
    reap(&r[i], 0);
    failed += r[i].code == RC_INIT;
    named += strstr(r[i].log, "the root") != NULL;
  }
  double secs = now_s() - t0;
  ok(failed == N - 1 && secs < 10, "the root's process SIGKILLed while ranks wait for the table: all %d "
     "fail (%d did) in %.2f s", N - 1, failed, secs);
  ok(named == N - 1, "naming the root");
  if (failed != N - 1 || named != N - 1) show(&r[0], "rank 0");
  for (int i = 0; i < N - 1; i++) free(r[i].log);
  free(root.log);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_DFL);
  alarm(280);
  const char *only = argc > 1 ? argv[1] : "";
  static const char *const flood_env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", "BATON_BOOTSTRAP_AUTH_MS=500", NULL};
  static const char *const exhaust_env[] = {"BATON_BOOTSTRAP_TIMEOUT=30", "BATON_BOOTSTRAP_AUTH_MS=500",
                                            "BATON_BOOTSTRAP_MAX_PENDING=65536", NULL};
  if (!*only || !strcmp(only, "flood")) test_flood("default limits", flood_env);
  if (!*only || !strcmp(only, "exhaust")) test_flood("BATON_BOOTSTRAP_MAX_PENDING=65536 (out of descriptors)", exhaust_env);
  if (!*only || !strcmp(only, "root")) test_root_inputs();
  if (!*only || !strcmp(only, "messages")) test_hostile_messages();
  if (!*only || !strcmp(only, "sender")) test_sender_limit();
  if (!*only || !strcmp(only, "death")) test_death();
  if (!*only || !strcmp(only, "rootdeath")) test_root_death();
  return tap_done();
}
