/* test_bench_nccl.c -- `baton bench`'s NCCL loader (dlopen), no GPU needed.
 * Usage: test_bench_nccl missing|notnccl|fake|real, with BATON_NCCL_LIB set
 * by the test (parameters are read once per process; fake: tests/fake_nccl.c,
 * an NCCL without ncclGather and ncclScatter).  TAP output; "real" skips
 * where no libnccl.so.2 is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_nccl.h"
#include "tap.h"

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  char why[300] = "";
  bench_nccl *n = bench_nccl_open(why, sizeof why);
  if (!strcmp(mode, "missing")) {
    ok(!n && strstr(why, "cannot load /nonexistent/libnccl.so.2"), "a missing library is named: %s", why);
  } else if (!strcmp(mode, "notnccl")) {
    ok(!n && strstr(why, "libc.so.6 has no ncclGetVersion"), "a library that is not NCCL is refused: %s", why);
  } else if (!strcmp(mode, "fake")) {
    ok(n != NULL, "an NCCL without ncclGather and ncclScatter loads: %s", n ? bench_nccl_describe(n) : why);
    if (n) {
      const char *g = bench_nccl_lacks(n, BENCH_GATHER), *s = bench_nccl_lacks(n, BENCH_SCATTER);
      ok(g && !strcmp(g, "ncclGather") && s && !strcmp(s, "ncclScatter"), "it lacks ncclGather and ncclScatter");
      ok(!bench_nccl_lacks(n, BENCH_ALLREDUCE) && !bench_nccl_lacks(n, BENCH_BROADCAST) &&
             !bench_nccl_lacks(n, BENCH_ALLTOALL), "and has the required collectives and all-to-all");
    }
    bench_nccl_close(n);
  } else {
    if (!n && strstr(why, "cannot load")) {
      printf("1..0 # SKIP no NCCL here: %s\n", why);
      return 0;
    }
    ok(n != NULL, "libnccl.so.2 loaded: %s", n ? bench_nccl_describe(n) : why);
    if (n) ok_contains(bench_nccl_describe(n), "NCCL 2.", "its version is read with ncclGetVersion");
    bench_nccl_close(n);
  }
  return tap_done();
}
