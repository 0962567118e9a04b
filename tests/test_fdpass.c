/* test_fdpass.c -- file descriptors between processes of one host
 * (runtime/bootstrap/rt_fdpass.c): ranks 1 and 2 each pass a pipe to rank
 * 0, which reads through it what they wrote; a process claiming rank 1's
 * place first is dropped (its credentials are not rank 1's), as are a
 * wrong tag and a wrong count, and a connection that sends nothing; a rank that never sends ends the wait in time, with
 * nothing left open. */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_fdpass.h"
#include "tap.h"

static const uint64_t key = 0x5eed0000ull;

/* A child: after delay_ms, listens as `rank` (once no other process holds
 * that name), then sends a pipe whose other end holds `text` to rank 0
 * with `tag` and `n` copies of it. */
static void child(int rank, uint64_t tag, int n, const char *text, int delay_ms) {
  rt_fdpass *fp = NULL;
  usleep((useconds_t)delay_ms * 1000);
  for (int i = 0; i < 400 && rt_fdpass_open(&fp, key, rank); i++) usleep(5000);   /* another holds the name */
  if (!fp) _exit(2);
  int p[2];
  if (pipe(p)) _exit(2);
  if (write(p[1], text, strlen(text)) < 0) _exit(2);
  close(p[1]);
  int fds[RT_FDPASS_MAX];
  for (int i = 0; i < n; i++) fds[i] = p[0];
  int e = rt_fdpass_send(fp, key, 0, tag, fds, n, 5000);
  close(p[0]);
  rt_fdpass_close(fp);
  _exit(e ? 1 : 0);
}

/* A child that connects to rank 0's listener (its name as rt_fdpass.c
 * makes it) first and then stays silent for 2 s: the listener's read of it
 * times out (after 1 s) and the wait goes on. */
static void silent(void) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "baton-fd-%016llx-%d", (unsigned long long)key, 0);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)))
    _exit(2);
  sleep(2);
  _exit(0);
}

static int read_all(int fd, char *buf, size_t len) {
  ssize_t r = read(fd, buf, len - 1);
  buf[r > 0 ? r : 0] = 0;
  return (int)r;
}

int main(void) {
  rt_fdpass *fp = NULL;
  ok(rt_fdpass_open(&fp, key, 0) == BT_OK && fp, "rank 0 listens");
  rt_fdpass *again = NULL;
  ok(rt_fdpass_open(&again, key, 0) != BT_OK && !again, "a second listener on the same name is refused");
  pid_t quiet = fork();
  if (quiet == 0) silent();
  usleep(20000);   /* it connects first */
  pid_t impostor = fork();
  if (impostor == 0) child(1, 7, 1, "impostor", 0);   /* rank 1's name and tag, another process */
  pid_t wrongtag = fork();
  if (wrongtag == 0) child(2, 8, 1, "wrong tag", 0);
  pid_t r1 = fork();
  if (r1 == 0) child(1, 7, 1, "from rank 1", 100);
  pid_t r2 = fork();
  if (r2 == 0) child(2, 7, RT_FDPASS_MAX, "from rank 2", 150);   /* a full message */
  /* The impostor and the wrong tag hold ranks 1's and 2's names first;
   * the real ranks take them after, and send after them. */
  pid_t pids[3] = {getpid(), r1, r2};
  int want[3] = {0, 1, RT_FDPASS_MAX}, fds[3 * RT_FDPASS_MAX];
  bt_result e = rt_fdpass_recv(fp, 3, want, pids, 7, fds, 10000);
  char a[64] = "", b[64] = "";
  int got = e == BT_OK && fds[RT_FDPASS_MAX] >= 0 && fds[2 * RT_FDPASS_MAX] >= 0 && fds[3 * RT_FDPASS_MAX - 1] >= 0;
  if (got) {
    read_all(fds[RT_FDPASS_MAX], a, sizeof a);
    read_all(fds[2 * RT_FDPASS_MAX], b, sizeof b);
  }
  ok(got && !strcmp(a, "from rank 1") && !strcmp(b, "from rank 2"),
     "rank 0 got rank 1's pipe and rank 2's %d, and read through them (\"%s\", \"%s\"); the impostor's, the "
     "wrong tag's and a silent connection were dropped", RT_FDPASS_MAX, a, b);
  for (int i = 0; i < 3 * RT_FDPASS_MAX; i++)
    if (fds[i] >= 0) close(fds[i]);
  int st, codes = 0;
  waitpid(r1, &st, 0);
  codes += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  waitpid(r2, &st, 0);
  codes += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  waitpid(impostor, &st, 0);
  waitpid(quiet, &st, 0);
  waitpid(wrongtag, &st, 0);
  ok(codes == 2, "both ranks' sends succeeded");
  /* Nobody sends: the wait ends at its limit. */
  int want1[2] = {0, 1};
  pid_t p2[2] = {getpid(), 1};
  bt_result t = rt_fdpass_recv(fp, 2, want1, p2, 9, fds, 200);
  ok(t == BT_ERR_TIMEOUT && fds[RT_FDPASS_MAX] == -1, "a rank that never sends: BT_ERR_TIMEOUT after 200 ms, "
     "nothing open");
  /* A rank of another PID namespace (pid 0: none to check): its message,
   * right tag and count, is taken from whatever pid it comes. */
  pid_t other = fork();
  if (other == 0) child(1, 11, 1, "another namespace", 0);
  pid_t p0[2] = {getpid(), 0};
  char c[64] = "";
  bt_result u = rt_fdpass_recv(fp, 2, want1, p0, 11, fds, 10000);
  if (u == BT_OK && fds[RT_FDPASS_MAX] >= 0) read_all(fds[RT_FDPASS_MAX], c, sizeof c), close(fds[RT_FDPASS_MAX]);
  waitpid(other, &st, 0);
  ok(u == BT_OK && !strcmp(c, "another namespace"), "a rank of another PID namespace (its pid unknown here): its "
     "descriptors are taken (\"%s\")", c);
  int fds1[1] = {0};
  ok(rt_fdpass_send(fp, key, 5, 1, fds1, 1, 50) == BT_ERR_TIMEOUT, "sending to a rank that never listens: "
     "BT_ERR_TIMEOUT");
  ok(rt_fdpass_send(fp, key, 5, 1, fds1, RT_FDPASS_MAX + 1, 50) == BT_ERR_INVALID, "more than RT_FDPASS_MAX "
     "descriptors: BT_ERR_INVALID");
  rt_fdpass_close(fp);
  return tap_done();
}
