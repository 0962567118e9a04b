/* tap.h -- a minimal TAP producer for baton's C tests (meson protocol 'tap'). */
#ifndef TAP_H
#define TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

static int tap_n, tap_failed;

/* ok(cond, fmt, ...): one test point. */
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
static void tap_ok(int pass, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#include <stdarg.h>
static void tap_ok(int pass, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s %d - ", pass ? "ok" : "not ok", ++tap_n);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!pass) {
    tap_failed++;
    printf("#   failed at %s:%d\n", file, line);
  }
  fflush(stdout);
}

/* contains(haystack, needle) with a diagnostic on failure. */
#define ok_contains(hay, needle, ...) do {                                  \
    const char *h_ = (hay), *n_ = (needle);                                 \
    int c_ = h_ && strstr(h_, n_) != NULL;                                  \
    ok(c_, __VA_ARGS__);                                                    \
    if (!c_) printf("#   expected to find: %s\n#   in: %s\n", n_, h_ ? h_ : "(null)"); \
  } while (0)

/* tap_skip(fmt, ...): one test point skipped, saying why (what it needs
 * that is not here). */
__attribute__((unused, format(printf, 1, 2))) static void tap_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("ok %d - # SKIP ", ++tap_n);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

static int tap_done(void) {
  printf("1..%d\n", tap_n);
  return tap_failed ? 1 : 0;
}

/* Re-emits the TAP output a child process left in the file at path:
 * each test point renumbered as one of ours, its text after "label: ",
 * and its # comments as they are.  Returns the points it had (0 when the
 * file is missing). */
__attribute__((unused)) static int tap_relay(const char *path, const char *label) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int points = 0;
  while (f && fgets(line, sizeof line, f)) {
    int nok = !strncmp(line, "not ok ", 7);
    if (nok || !strncmp(line, "ok ", 3)) {
      char *rest = strstr(line, " - ");
      ok(!nok, "%s: %s", label, rest ? strtok(rest + 3, "\n") : "?");
      points++;
    } else if (line[0] == '#') {
      fputs(line, stdout);
    }
  }
  if (f) fclose(f);
  return points;
}

/* Waits for child process pid, which left its TAP output in the file at
 * path: relays it as label's (tap_relay), removes the file and checks
 * that the process exited 0 after at least one check.  Returns 1 when the
 * child exited 77 (it skipped: too few GPUs), relaying nothing. */
__attribute__((unused)) static int tap_collect(pid_t pid, const char *path, const char *label) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) return 1;
  int points = tap_relay(path, label);
  remove(path);
  ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && points > 0, "%s process exited with %d after %d checks", label,
     WIFEXITED(st) ? WEXITSTATUS(st) : -1, points);
  return 0;
}

/* tap_collect for ranks 0..n-1, one process each (pids[r]), each of which
 * left its TAP output in dir/rankR.  Returns 1 when any of them skipped. */
__attribute__((unused)) static int tap_collect_ranks(const pid_t *pids, int n, const char *dir) {
  int skipped = 0;
  for (int r = 0; r < n; r++) {
    char path[300], label[64];
    snprintf(path, sizeof path, "%s/rank%d", dir, r);
    snprintf(label, sizeof label, "rank %d (process %d)", r, (int)pids[r]);
    skipped |= tap_collect(pids[r], path, label);
  }
  return skipped;
}

/* Reads a whole file; NULL when missing. */
__attribute__((unused)) static char *tap_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc(n + 1);
  if (buf && fread(buf, 1, n, f) != (size_t)n) { free(buf); buf = NULL; }
  if (buf) buf[n] = 0;
  fclose(f);
  return buf;
}

/* Returns a copy of s with the k-th (0-based) occurrence of `from`
 * replaced by `to`; NULL when there is no such occurrence. */
__attribute__((unused)) static char *tap_replace(const char *s, const char *from, const char *to, int k) {
  const char *p = s;
  for (;; p++) {
    p = strstr(p, from);
    if (!p) return NULL;
    if (k-- == 0) break;
  }
  size_t a = p - s, fl = strlen(from), tl = strlen(to), n = strlen(s);
  char *out = malloc(n - fl + tl + 1);
  memcpy(out, s, a);
  memcpy(out + a, to, tl);
  memcpy(out + a + tl, p + fl, n - a - fl + 1);
  return out;
}

#endif
