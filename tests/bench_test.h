/* bench_test.h -- what the tests of `baton bench` without a GPU share
 * (tests/test_bench*.c): argv from a line, a parse's streams in memory,
 * the operator --fused names, a file's text.  Header only: each test is
 * one file. */
#ifndef BENCH_TEST_H
#define BENCH_TEST_H

#include <stdio.h>
#include <string.h>

#include "bench_util.h"

/* The words of the last bench_test_split: options keep pointers into
 * argv (file names), so they live on after the parse, as a real argv's
 * would. */
static char bench_test_words[4096];

/* Splits "bench LINE" at spaces into argv (63 words at most, then NULL),
 * over bench_test_words; the argument count. */
static inline int bench_test_split(const char *line, char **argv) {
  int argc = 0;
  snprintf(bench_test_words, sizeof bench_test_words, "bench %s", line);
  for (char *s = strtok(bench_test_words, " "); s && argc < 63; s = strtok(NULL, " ")) argv[argc++] = s;
  argv[argc] = NULL;
  return argc;
}

/* A parse's streams: err writes into errbuf, out into outbuf or, when
 * that is NULL, /dev/null. */
typedef struct bench_test_io {
  FILE *out, *err;
  char *errbuf;
} bench_test_io;

/* Opens io's streams over the buffers, cleared first (errbuf errlen
 * bytes; outbuf outlen bytes, or NULL). */
static inline void bench_test_open(bench_test_io *io, char *errbuf, size_t errlen, char *outbuf, size_t outlen) {
  memset(errbuf, 0, errlen);
  if (outbuf) memset(outbuf, 0, outlen);
  io->errbuf = errbuf;
  io->err = fmemopen(errbuf, errlen, "w");
  io->out = outbuf ? fmemopen(outbuf, outlen, "w") : fopen("/dev/null", "w");
}

/* Closes io's streams; first_line: cut errbuf at its first newline (one
 * line, for a test's name). */
static inline void bench_test_close(bench_test_io *io, int first_line) {
  fclose(io->err);
  fclose(io->out);
  if (first_line) io->errbuf[strcspn(io->errbuf, "\n")] = 0;
}

/* bench_fused_operator of "bench LINE": its return; err gets its
 * stderr. */
static inline int bench_test_operator(const char *line, char *err, size_t errlen) {
  char *argv[64];
  int argc = bench_test_split(line, argv);
  bench_test_io io;
  bench_test_open(&io, err, errlen, NULL, 0);
  int k = bench_fused_operator(argc, argv, io.err);
  bench_test_close(&io, 0);
  return k;
}

/* The text of file path (its first 64 KiB, in one static buffer), or
 * NULL when it cannot be read. */
static inline char *bench_test_slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

#endif
