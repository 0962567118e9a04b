/* fz_replay.c -- runs a fuzz target over saved inputs without libFuzzer.
 *
 * Every fuzz target (fz_NAME.c) defines LLVMFuzzerTestOneInput.  Linked
 * with this file instead of libFuzzer, the target becomes a test program:
 * each argument is an input file or a folder of them (not recursive), and
 * each input is run once.  A crash, a sanitizer report or a hang fails the
 * test; the regression inputs under tests/fuzz/regress/ (every crash the
 * fuzzers found) and the seed corpora are replayed this way in every build.
 * Prints TAP: one line per argument. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Inputs larger than this are not fuzzer inputs (libFuzzer's own default
 * cap is 4 KiB-1 MiB); refusing them keeps a stray file from stalling CI. */
#define FZ_MAX_INPUT (16u << 20)

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { printf("# %s: %s\n", path, strerror(errno)); return 0; }
  uint8_t *buf = malloc(FZ_MAX_INPUT + 1);
  size_t n = buf ? fread(buf, 1, FZ_MAX_INPUT + 1, f) : 0;
  fclose(f);
  if (!buf || n > FZ_MAX_INPUT) {
    printf("# %s: %s\n", path, buf ? "larger than 16 MiB" : "out of memory");
    free(buf);
    return 0;
  }
  /* An exact-size copy, so that reads past the input are caught by ASan. */
  uint8_t *in = malloc(n ? n : 1);
  if (!in) { free(buf); return 0; }
  memcpy(in, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(in, n);
  free(in);
  return 1;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every regular file in dir in name order; returns how many ran, or
 * -1 when one could not be read. */
static int run_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *names);
      if (!nn) break;
      names = nn;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp);
  int ran = 0, bad = 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    struct stat st;
    if (names[i] && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(path)) ran++;
      else bad = 1;
    }
    free(names[i]);
  }
  free(names);
  return bad ? -1 : ran;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    int ran;
    if (stat(argv[i], &st) != 0) {
      /* A corpus that is not there (../shared on a machine without it). */
      printf("ok %d - %s # SKIP not present\n", i, argv[i]);
      continue;
    }
    ran = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
    if (ran < 0) { printf("not ok %d - %s: an input could not be read\n", i, argv[i]); failed++; }
    else printf("ok %d - %s: %d inputs ran\n", i, argv[i], ran);
  }
  printf("1..%d\n", argc - 1);
  return failed != 0;
}
