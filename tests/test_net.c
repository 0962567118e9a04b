/* test_net.c -- the network transport with host memory: threads (and, for
 * a killed peer, processes) play the GPUs; the socket backend runs over
 * real TCP connections on this machine (hostile peers:
 * test_net_hostile.c).
 *
 * Run with argument "ib" (and BATON_NET=ib): checks that asking for the
 * verbs backend where it cannot run fails at set-up, with a reason.  With
 * "ibfake PATH" (and BATON_NET=ib): the traffic and abort tests over the
 * verbs backend with PATH, the simulated device of tests/fake_verbs.c, in
 * place of libibverbs; with "ibstall PATH", a receiver held up while its
 * peer leaves, over that backend. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "net_ib.h"
#include "net_socket.h"
#include "rt_socket.h"
#include "tap.h"
#include "tp.h"

#include "net_test.h"

static void test_traffic(int n, int chans, int64_t msgs, const char *what) {
  tp_key keys[MAXR * MAXR * 8];
  int nk = all_pairs(n, chans, keys);
  trank t[MAXR];
  int64_t t0 = rt_time_ns();
  int bad = setup(t, n, keys, nk);
  ok(!bad, "%s: %d ranks in one process connect (%d connections)", what, n, nk);
  if (bad) return;
  bad = run_all(t, n, msgs);
  uint64_t s = 0, r = 0, ts, tr;
  for (int i = 0; i < n; i++) {
    tp_set_stats(t[i].set, &ts, &tr);
    s += ts;
    r += tr;
  }
  ok(!bad && s == r && s > 0, "%s: %lld messages per connection arrive intact, in order (%.1f MB each way, %.2f s)",
     what, (long long)msgs, s / 1e6, (rt_time_ns() - t0) / 1e9);
  /* An orderly destroy is no fault for the ranks still up. */
  tp_set_free(t[0].set);
  usleep(200000);
  int errs = 0;
  for (int i = 1; i < n; i++) errs += tp_set_error(t[i].set) != BT_OK || t[i].abort;
  ok(errs == 0, "%s: rank 0 destroyed first: the others see no fault", what);
  for (int i = 1; i < n; i++) tp_set_free(t[i].set);
}

/* Ping-pong between two ranks, threads playing both GPUs: the floor the
 * proxies and loopback TCP put under one hop (reported, and bounded so
 * that a proxy that naps while a message waits is caught). */
typedef struct pp { ip_gconn s, r; int first, n; double secs; } pp;

static void *pingpong(void *arg) {
  pp *p = arg;
  int64_t t0 = rt_time_ns(), limit = t0 + 20 * 1000000000ll;
  for (int i = 0; i < p->n; i++) {
    uint64_t m = (uint64_t)i;
    if (!p->first) {
      while (__atomic_load_n(p->r.head, __ATOMIC_ACQUIRE) <= m)
        if (rt_time_ns() > limit) return NULL;
        else sched_yield();
      __atomic_store_n(p->r.tail, m + 1, __ATOMIC_RELEASE);
    }
    while (m - __atomic_load_n(p->s.tail, __ATOMIC_ACQUIRE) >= NSLOTS)
      if (rt_time_ns() > limit) return NULL;
      else sched_yield();
    memset(p->s.fifo + (m % NSLOTS) * SLOT, 1, 8);
    p->s.lens[m % NSLOTS] = 8;
    __atomic_store_n(p->s.head, m + 1, __ATOMIC_RELEASE);
    if (p->first) {
      while (__atomic_load_n(p->r.head, __ATOMIC_ACQUIRE) <= m)
        if (rt_time_ns() > limit) return NULL;
        else sched_yield();
      __atomic_store_n(p->r.tail, m + 1, __ATOMIC_RELEASE);
    }
  }
  p->secs = (rt_time_ns() - t0) / 1e9;
  return NULL;
}

static void test_pingpong(void) {
  tp_key keys[4] = {{0, 1, 0, 0, 0}, {1, 0, 0, 0, 0}};
  trank t[2];
  if (setup(t, 2, keys, 2)) {
    ok(0, "ping-pong: set-up");
    return;
  }
  pp p[2] = {{.first = 1, .n = 2000}, {.first = 0, .n = 2000}};
  for (int r = 0; r < 2; r++) {
    tp_set_side(t[r].set, 1 - r, 0, 0, 0, 0, &p[r].s);
    tp_set_side(t[r].set, 1 - r, 0, 0, 0, 1, &p[r].r);
  }
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, pingpong, &p[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  double hop = p[0].secs / (2.0 * p[0].n) * 1e6;
  ok(p[0].secs > 0 && p[1].secs > 0 && hop < 1000, "ping-pong: 2000 round trips of 8 bytes, %.1f us one way "
     "(head seen by the proxy, sent, landed, head written)", hop);
  for (int r = 0; r < 2; r++) tp_set_free(t[r].set);
}

/* One rank aborts while every rank exchanges messages: the others learn it
 * through their links and stop within a bounded time. */
static void test_abort_spreads(void) {
  tp_key keys[64];
  int nk = all_pairs(3, 1, keys);
  trank t[3];
  if (setup(t, 3, keys, nk)) {
    ok(0, "abort: set-up");
    return;
  }
  pthread_t th[3];
  for (int r = 0; r < 3; r++) {
    t[r].msgs = -1;
    pthread_create(&th[r], NULL, engine, &t[r]);
  }
  usleep(300000);
  int64_t t0 = rt_time_ns();
  t[1].abort = 1;
  for (int r = 0; r < 3; r++) pthread_join(th[r], NULL);
  double secs = (rt_time_ns() - t0) / 1e9;
  ok(t[0].stopped_by_abort && t[2].stopped_by_abort && secs < 5, "abort on rank 1: ranks 0 and 2 stop in %.3f s",
     secs);
  ok(tp_set_error(t[0].set) == BT_ERR_REMOTE && tp_set_error(t[2].set) == BT_ERR_REMOTE,
     "abort on rank 1: ranks 0 and 2 report a remote error");
  ok(t[0].failures == 0 && t[2].failures == 0, "abort: nothing that arrived was wrong");
  int64_t f0 = rt_time_ns();
  for (int r = 0; r < 3; r++) tp_set_free(t[r].set);
  ok((rt_time_ns() - f0) / 1e9 < 5, "abort: every rank is destroyed cleanly afterwards");
}

/* ---- processes: a peer killed in the middle of traffic ---- */

static int read_all(int fd, void *p, size_t n) {
  size_t d = 0;
  while (d < n) {
    ssize_t r = read(fd, (char *)p + d, n - d);
    if (r <= 0) return -1;
    d += (size_t)r;
  }
  return 0;
}

/* Processes for the tests below: child q holds ranks [q * per, (q + 1) *
 * per) of n and runs body; the parent relays every rank's peer record (its
 * child's pid), then every rank's set record to every child. */
enum { MAXP = 4 };
typedef struct procs {
  int n, per, nprocs;
  int up[MAXP][2], down[MAXP][2];
  pid_t pid[MAXP];
  tp_key *keys;
  int nk;
  int64_t msgs;
} procs;
typedef int (*child_fn)(const procs *p, int q);

/* Starts the children and relays; 0 when every record went through. */
static int procs_start(procs *p, child_fn body) {
  for (int q = 0; q < p->nprocs; q++) {
    if (pipe(p->up[q]) || pipe(p->down[q])) return -1;
    p->pid[q] = fork();
    if (p->pid[q] == 0) {
      tap_n = 0;
      _exit(body(p, q));
    }
  }
  for (int r = 0; r < p->n; r++) {
    tp_peer me;
    tp_peer_self(&me, 0);
    me.pid = p->pid[r / p->per];
    for (int q = 0; q < p->nprocs; q++) write(p->down[q][1], &me, sizeof me);
  }
  size_t rec = tp_set_blob_bytes(1);
  unsigned char all[MAXR * 1024];
  int bad = 0;
  for (int q = 0; q < p->nprocs; q++) bad |= read_all(p->up[q][0], all + (size_t)q * p->per * rec, p->per * rec);
  for (int q = 0; q < p->nprocs; q++) bad |= write(p->down[q][1], all, p->n * rec) != (ssize_t)(p->n * rec);
  return bad ? -1 : 0;
}

/* Waits until t0 + ns for the children still counted in pid[] (0: not
 * waited for), kills the rest; their statuses in status[].  Returns how
 * many had to be killed. */
static int procs_wait(procs *p, int64_t t0, int64_t ns, int *status) {
  int left = 0;
  for (int q = 0; q < p->nprocs; q++) left += p->pid[q] != 0;
  while (left && rt_time_ns() - t0 < ns) {
    for (int q = 0; q < p->nprocs; q++)
      if (p->pid[q] && waitpid(p->pid[q], &status[q], WNOHANG) == p->pid[q]) p->pid[q] = 0, left--;
    usleep(10000);
  }
  for (int q = 0; q < p->nprocs; q++)
    if (p->pid[q]) kill(p->pid[q], SIGKILL), waitpid(p->pid[q], &status[q], 0);
  return left;
}

static void procs_close(procs *p) {
  for (int q = 0; q < p->nprocs; q++)
    close(p->up[q][0]), close(p->up[q][1]), close(p->down[q][0]), close(p->down[q][1]);
}

static int exited_0(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
static int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

/* In child q: its ranks' sets made and connected one after the other (as
 * a process holding several GPUs does), records through the parent.  0,
 * or the child's exit status for what failed. */
static int child_join(const procs *p, int q, trank *t) {
  for (int i = 0; i < p->n; i++) read_all(p->down[q][0], &peers[i], sizeof peers[i]);
  tp_peer_group(peers, p->n, 1);
  size_t rec = tp_set_blob_bytes(1);
  unsigned char *all = calloc(p->n, rec);
  int res = all ? 0 : 11;
  for (int k = 0; k < p->per && !res; k++) {
    t[k] = (trank){.rank = q * p->per + k, .nranks = p->n, .keys = p->keys, .nkeys = p->nk, .msgs = p->msgs};
    tp_ctx x = ctx_of(&t[k]);
    if (tp_set_create(&t[k].set, &x, net_only, 1, p->keys, p->nk)) res = 10;
    else if (write(p->up[q][1], tp_set_blob(t[k].set), rec) != (ssize_t)rec) res = 11;
  }
  if (!res && read_all(p->down[q][0], all, p->n * rec)) res = 11;
  for (int k = 0; k < p->per && !res; k++)
    if (tp_set_connect(t[k].set, all)) res = 12;
  free(all);
  return res;
}

/* A peer killed in the middle of traffic: each child's one rank runs
 * until the engine stops; exit 0 when it stopped because the transport
 * reported the lost peer (abort raised, remote error). */
static int child_killed(const procs *p, int q) {
  trank t;
  int res = child_join(p, q, &t);
  if (res) return res;
  char ready = 'r';
  if (write(p->up[q][1], &ready, 1) != 1) return 13;
  engine(&t);
  int64_t f0 = rt_time_ns();
  bt_result e = tp_set_error(t.set);
  tp_set_free(t.set);
  if (!t.stopped_by_abort) return 14;
  if (e != BT_ERR_REMOTE) return 15;
  if (t.failures) return 16;
  if ((rt_time_ns() - f0) > 5000000000ll) return 17;
  return 0;
}

static void test_killed_peer(void) {
  tp_key keys[64];
  procs p = {.n = 3, .per = 1, .nprocs = 3, .keys = keys, .nk = all_pairs(3, 1, keys), .msgs = -1};
  int bad = procs_start(&p, child_killed);
  char c;
  for (int q = 0; q < 3 && !bad; q++) bad |= read_all(p.up[q][0], &c, 1);
  ok(!bad, "killed peer: 3 processes connected");
  usleep(300000);   /* traffic flows */
  int64_t t0 = rt_time_ns();
  kill(p.pid[2], SIGKILL);
  waitpid(p.pid[2], NULL, 0);
  p.pid[2] = 0;
  int status[MAXP] = {0}, left = procs_wait(&p, t0, 15000000000ll, status);
  ok(left == 0 && exited_0(status[0]) && exited_0(status[1]),
     "killed peer: ranks 0 and 1 stop with a remote error and are destroyed cleanly (%.2f s; exits %d %d)",
     (rt_time_ns() - t0) / 1e9, exit_code(status[0]), exit_code(status[1]));
  procs_close(&p);
}

/* Two ranks in a child: msgs messages on every connection, then, once
 * every child is done with its traffic, tear-down (as a job finishes its
 * collectives before destroying).  0 when all arrived intact. */
static int child_pair(const procs *p, int q) {
  trank t[2];
  int res = child_join(p, q, t);
  if (res) return res;
  int bad = run_all(t, 2, p->msgs);
  char c = 'd';
  if (write(p->up[q][1], &c, 1) != 1 || read_all(p->down[q][0], &c, 1)) return 14;
  for (int k = 0; k < 2; k++) tp_set_free(t[k].set);
  return bad ? 13 : 0;
}

/* Two processes of two ranks each, all four ranks in their own node
 * groups: set-up (each process's ranks one after the other) and traffic.
 * Waiting for acknowledgements there would deadlock: rank 0 waiting for
 * rank 3's, rank 3 not yet set up behind rank 2, rank 2 accepting and
 * waiting for rank 1, rank 1 behind rank 0. */
static void test_process_pairs(void) {
  tp_key keys[64];
  procs p = {.n = 4, .per = 2, .nprocs = 2, .keys = keys, .nk = all_pairs(4, 1, keys), .msgs = 50};
  int bad = procs_start(&p, child_pair);
  int64_t t0 = rt_time_ns();
  for (int q = 0; q < 2 && !bad; q++) {   /* both done with their traffic, then both tear down */
    struct pollfd pf = {.fd = p.up[q][0], .events = POLLIN};
    char c;
    bad |= rt_socket_poll(&pf, 1, t0 + 30000000000ll) != 1 || read_all(p.up[q][0], &c, 1);
  }
  for (int q = 0; q < 2; q++) bad |= write(p.down[q][1], "g", 1) != 1;
  int status[MAXP] = {0}, left = procs_wait(&p, t0, 30000000000ll, status);
  ok(!bad && !left && exited_0(status[0]) && exited_0(status[1]),
     "two processes of two ranks each connect and carry 50 messages per connection intact (%.2f s; exits %d %d)",
     (rt_time_ns() - t0) / 1e9, exit_code(status[0]), exit_code(status[1]));
  procs_close(&p);
}

/* Rank 0 sends to rank 1 and is destroyed the moment its GPU side has
 * published the last message; rank 1 starts receiving 300 ms after
 * set-up.  0 when this rank's part went right (rank 1: every message
 * arrived intact). */
static int child_flush(const procs *p, int q) {
  trank t;
  int res = child_join(p, q, &t);
  if (res) return res;
  if (q == 1) usleep(300000);
  engine(&t);
  int good = !t.failures && t.done == (q == 1 ? p->msgs : 0) && !t.stopped_by_abort;
  tp_set_free(t.set);
  return good ? 0 : 13;
}

/* A rank destroyed as soon as its last message is published (its kernel
 * has ended; the network still owes the peer up to a FIFO's worth): the
 * peer, in another process and late to receive, must get every message.
 * (The proxy stopped at once: the last messages never left, and the peer
 * waited for them until killed.) */
static void test_destroy_flush(void) {
  tp_key keys[1] = {{0, 1, 0, 0, 0}};
  procs p = {.n = 2, .per = 1, .nprocs = 2, .keys = keys, .nk = tp_keys_normalize(keys, 1), .msgs = 200};
  int bad = procs_start(&p, child_flush);
  int64_t t0 = rt_time_ns();
  int status[MAXP] = {0}, left = procs_wait(&p, t0, 30000000000ll, status);
  ok(!bad && !left && exited_0(status[0]) && exited_0(status[1]),
     "a sender destroyed right after publishing its last message: the late receiver gets all 200 intact (%.2f s; "
     "exits %d %d)", (rt_time_ns() - t0) / 1e9, exit_code(status[0]), exit_code(status[1]));
  procs_close(&p);
}

/* The same in one process (the simulated verbs device): the sender's set
 * freed as soon as its engine published the last message, the receiver
 * 300 ms late.  What the backend itself still holds (a message's last
 * piece waits for its earlier pieces' completions) must go out before
 * the proxy stops. */
static void *sender_then_free(void *arg) {
  trank *t = arg;
  engine(t);
  tp_set_free(t->set);
  t->set = NULL;
  return NULL;
}

static void *late_receiver(void *arg) {
  usleep(300000);
  return engine(arg);
}

static void test_destroy_flush_inproc(const char *what) {
  tp_key keys[1] = {{0, 1, 0, 0, 0}};
  int nk = tp_keys_normalize(keys, 1);
  trank t[2];
  if (setup(t, 2, keys, nk)) {
    ok(0, "%s: destroy right after the last message: set-up", what);
    return;
  }
  t[0].msgs = t[1].msgs = 200;
  int64_t t0 = rt_time_ns();
  pthread_t th[2];
  pthread_create(&th[0], NULL, sender_then_free, &t[0]);
  pthread_create(&th[1], NULL, late_receiver, &t[1]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  ok(!t[1].failures && t[1].done == 200, "%s: a sender destroyed right after publishing its last message: the late "
     "receiver gets %lld of 200 intact (%.2f s)", what, (long long)t[1].done, (rt_time_ns() - t0) / 1e9);
  tp_set_free(t[1].set);
}

/* A receiver whose proxy is held up (here by a signal handler that
 * sleeps in it) while its peer publishes everything and is destroyed in
 * order (which waits a short while for the receiver, then closes): when
 * the receiver's proxy resumes, every message must arrive, and the
 * peer's close must be the orderly end it is, however many frames and
 * completions wait ahead of the goodbye (the receiver owes credits by
 * then, whose sending fails on the closed connection). */
enum { STALL_CONNS = 200 };
static volatile int stall_ms, consuming;
static void on_stall(int sig) {
  (void)sig;
  usleep(stall_ms * 1000);
}
static tp_set *stalled_set;
static void *consume_all(void *arg) {   /* the receiver's GPU: frees each slot as it is published */
  (void)arg;
  static ip_gconn g[STALL_CONNS];
  for (int c = 0; c < STALL_CONNS / 2; c++)
    for (int l = 0; l < 2; l++) tp_set_side(stalled_set, 0, c, l, 0, 1, &g[c * 2 + l]);
  while (consuming)
    for (int i = 0; i < STALL_CONNS; i++)
      __atomic_store_n(g[i].tail, __atomic_load_n(g[i].head, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
  return NULL;
}

/* The proxy thread of rank r of this process (named "baton-net rR"), or 0. */
static pid_t proxy_of(int r) {
  char want[16], path[300], name[32];
  snprintf(want, sizeof want, "baton-net r%d\n", r);
  DIR *d = opendir("/proc/self/task");
  pid_t found = 0;
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(name, sizeof name, f) && !strcmp(name, want)) found = (pid_t)atoi(e->d_name);
    fclose(f);
  }
  if (d) closedir(d);
  return found;
}

static void test_stalled_receiver(const char *what) {
  tp_key keys[STALL_CONNS + 1];
  int nk = 0;
  for (int c = 0; c < STALL_CONNS / 2; c++)
    for (int l = 0; l < 2; l++) keys[nk++] = (tp_key){0, 1, c, l, 0};
  keys[nk++] = (tp_key){1, 0, 0, 0, 0};
  nk = tp_keys_normalize(keys, nk);
  trank t[2];
  if (setup(t, 2, keys, nk)) {
    ok(0, "%s: a receiver held up while its peer leaves: set-up", what);
    return;
  }
  stall_ms = 500;
  signal(SIGUSR1, on_stall);
  stalled_set = t[1].set;
  consuming = 1;
  pthread_t ct;
  pthread_create(&ct, NULL, consume_all, NULL);
  usleep(200000);   /* the links up */
  pid_t proxy = proxy_of(1);
  if (proxy) syscall(SYS_tgkill, getpid(), proxy, SIGUSR1);
  usleep(20000);
  for (int c = 0; c < STALL_CONNS / 2; c++)
    for (int l = 0; l < 2; l++) {
      ip_gconn g;
      tp_set_side(t[0].set, 1, c, l, 0, 0, &g);
      for (int m = 0; m < NSLOTS; m++) {
        memset((char *)g.fifo + m * SLOT, m + 1, 64);
        g.lens[m] = 64;
      }
      __atomic_store_n(g.head, NSLOTS, __ATOMIC_RELEASE);
    }
  tp_set_kick(t[0].set);
  tp_set_free(t[0].set);   /* in order: what is published goes out, then the goodbye */
  usleep(stall_ms * 1000 + 500000);
  uint64_t got = 0;
  for (int c = 0; c < STALL_CONNS / 2; c++)
    for (int l = 0; l < 2; l++) {
      ip_gconn g;
      tp_set_side(t[1].set, 0, c, l, 0, 1, &g);
      got += __atomic_load_n(g.head, __ATOMIC_ACQUIRE);
    }
  consuming = 0;
  pthread_join(ct, NULL);
  bt_result e = tp_set_error(t[1].set);
  ok(proxy && got == STALL_CONNS * NSLOTS && e == BT_OK && !t[1].abort,
     "%s: a receiver held up %d ms while its peer publishes %d messages and leaves in order gets them all (%llu), "
     "and no error (%s)", what, (int)stall_ms, STALL_CONNS * NSLOTS, (unsigned long long)got, bt_result_str(e));
  tp_set_free(t[1].set);
  signal(SIGUSR1, SIG_DFL);
}

/* What the simulated device (tests/fake_verbs.c, loaded from `so`) ran:
 * it carried the traffic, and writes of different queue pairs overtook
 * each other. */
static void fake_verbs_report(const char *so) {
  uint64_t st[4] = {0};
  void *dl = dlopen(so, RTLD_NOW | RTLD_NOLOAD);
  void (*stats)(uint64_t *) = dl ? (void (*)(uint64_t *))dlsym(dl, "fake_verbs_stats") : NULL;
  if (stats) stats(st);
  if (dl) dlclose(dl);
  ok(st[0] > 0 && st[3] > 0, "the simulated device ran %llu RDMA writes (%.1f MB), %llu ahead of earlier ones of other "
     "queue pairs; writes with immediate waited %llu times for a receive", (unsigned long long)st[0], st[1] / 1e6,
     (unsigned long long)st[3], (unsigned long long)st[2]);
}

/* BATON_TRACE (set before any parameter is read): each rank's proxy writes
 * its timeline; the bytes its rounds sent and received add up to what the
 * transport counted. */
static void test_trace(const char *dir) {
  char prefix[900];
  snprintf(prefix, sizeof prefix, "%s/net", dir);
  if (mkdir(dir, 0700) && errno != EEXIST) {
    ok(0, "traced: cannot make %s: %s", dir, strerror(errno));
    return;
  }
  setenv("BATON_TRACE", prefix, 1);
  tp_key keys[8];
  int nk = all_pairs(2, 1, keys);
  trank t[2];
  if (setup(t, 2, keys, nk)) {
    ok(0, "traced: set-up");
    return;
  }
  int bad = run_all(t, 2, 100);
  uint64_t want[2][2];
  for (int r = 0; r < 2; r++) tp_set_stats(t[r].set, &want[r][0], &want[r][1]);
  for (int r = 0; r < 2; r++) tp_set_free(t[r].set);
  for (int r = 0; r < 2; r++) {
    char path[1000], line[512];
    snprintf(path, sizeof path, "%s.%d.net.csv", prefix, r);
    FILE *f = fopen(path, "r");
    uint64_t got[2] = {0, 0};
    int rounds = 0, rows = 0, header = f && fgets(line, sizeof line, f) && !strncmp(line, "rank,event,at_ns", 16);
    while (f && fgets(line, sizeof line, f)) {
      char ev[16];
      long long at, dur;
      int rk, posted, credits, progress, nrounds, timeout;
      unsigned long long s, rc;
      if (sscanf(line, "%d,%15[a-z],%lld,%lld,%d,%d,%d,%d,%d,%llu,%llu", &rk, ev, &at, &dur, &posted, &credits,
                 &progress, &nrounds, &timeout, &s, &rc) != 11 || rk != r || at < 0 || dur < 0)
        break;
      rows++;
      rounds += !strcmp(ev, "round");
      got[0] += s;
      got[1] += rc;
    }
    if (f) fclose(f);
    ok(!bad && header && rounds > 0 && got[0] == want[r][0] && got[1] == want[r][1],
       "BATON_TRACE: rank %d's proxy timeline (%d events, %d rounds that moved) adds up to the %llu bytes it sent "
       "and %llu it received", r, rows, rounds, (unsigned long long)want[r][0], (unsigned long long)want[r][1]);
  }
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 2 && !strcmp(argv[1], "trace")) {
    test_trace(argv[2]);
    return tap_done();
  }
  if (argc > 2 && !strcmp(argv[1], "ibfake")) {
    net_ib_set_library(argv[2]);
    test_traffic(4, 2, 300, "verbs (simulated)");
    /* The fewest WRs per queue the backend takes (rings and queues wrap
     * all the time), and no inline data (records go from the staging area). */
    setenv("BATON_FAKE_VERBS_MAX_QP_WR", "16", 1);
    setenv("BATON_FAKE_VERBS_MAX_INLINE", "0", 1);
    test_traffic(3, 1, 100, "verbs (simulated), 16-WR queues, no inline data");
    unsetenv("BATON_FAKE_VERBS_MAX_QP_WR");
    unsetenv("BATON_FAKE_VERBS_MAX_INLINE");
    test_abort_spreads();
    test_destroy_flush_inproc("verbs (simulated)");
    fake_verbs_report(argv[2]);
    return tap_done();
  }
  if (argc > 2 && !strcmp(argv[1], "ibstall")) {   /* with BATON_IB_QPS=16: more completions than a poll drains */
    net_ib_set_library(argv[2]);
    test_stalled_receiver("verbs (simulated)");
    return tap_done();
  }
  if (argc > 1 && !strcmp(argv[1], "ib")) {
    /* BATON_NET=ib where no RDMA device is (every machine here). */
    tp_key keys[8];
    int nk = all_pairs(2, 1, keys);
    trank t[2];
    tp_peer_self(&peers[0], 0);
    tp_peer_self(&peers[1], 0);
    tp_peer_group(peers, 2, 1);
    t[0] = (trank){.rank = 0, .nranks = 2};
    tp_ctx x = ctx_of(&t[0]);
    tp_set *s = NULL;
    bt_result e = tp_set_create(&s, &x, net_only, 1, keys, nk);
    ok(e == BT_ERR_UNSUPPORTED && !s, "BATON_NET=ib without a usable RDMA device: set-up refuses (%s)",
       bt_result_str(e));
    return tap_done();
  }
  test_traffic(4, 2, 300, "traffic");
  rt_socket_fault_set(1000, 5);   /* short reads and writes, spurious would-blocks */
  test_traffic(3, 1, 100, "traffic with short I/O");
  rt_socket_fault_set(0, 0);
  test_pingpong();
  test_abort_spreads();
  test_killed_peer();
  test_process_pairs();
  test_destroy_flush();
  test_stalled_receiver("sockets");
  return tap_done();
}
