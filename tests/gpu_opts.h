/* gpu_opts.h -- the command line of the multi-rank GPU tests (gpu_runtime,
 * gpu_register, gpu_kill, gpu_faults and those of gpu_ranks.h):
 * --ranks N --dir DIR, and the options each test names; --probe (no DIR)
 * only asks whether the GPUs the options need are there. */
#ifndef GPU_OPTS_H
#define GPU_OPTS_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options a test may take besides --ranks and --dir. */
enum { GPU_OPT_GPUS = 1, GPU_OPT_BIG = 2, GPU_OPT_QUICK = 4, GPU_OPT_PROCS = 8, GPU_OPT_NET = 16 };

typedef struct gpu_opts {
  int nranks, ngpus;   /* ngpus: --gpus, else nranks (a GPU per rank) */
  const char *dir;
  int big, quick, procs, net;
} gpu_opts;

/* Reads argv into o, taking the options of `takes` (GPU_OPT_*): 0, or 2
 * after printing `name`'s usage when an argument is not one of them, N is
 * outside [min_ranks, max_ranks], DIR is missing or G is outside 1..N.
 * With --probe it does not return: the process exits 0 when this machine
 * has the G GPUs, else 77 after the TAP line that skips the test (the
 * wrappers ask before compiling the programs a test runs). */
static int gpu_opts_read(int argc, char **argv, const char *name, unsigned takes, int min_ranks, int max_ranks,
                         gpu_opts *o) {
  memset(o, 0, sizeof *o);
  int bad = 0, probe = 0;
  for (int i = 1; i < argc && !bad; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--ranks") && more) o->nranks = atoi(argv[++i]);
    else if (!strcmp(a, "--dir") && more) o->dir = argv[++i];
    else if (!strcmp(a, "--probe")) probe = 1;
    else if ((takes & GPU_OPT_GPUS) && !strcmp(a, "--gpus") && more) o->ngpus = atoi(argv[++i]);
    else if ((takes & GPU_OPT_BIG) && !strcmp(a, "--big")) o->big = 1;
    else if ((takes & GPU_OPT_QUICK) && !strcmp(a, "--quick")) o->quick = 1;
    else if ((takes & GPU_OPT_PROCS) && !strcmp(a, "--procs")) o->procs = 1;
    else if ((takes & GPU_OPT_NET) && !strcmp(a, "--net")) o->net = 1;
    else bad = 1;
  }
  if (o->ngpus == 0) o->ngpus = o->nranks;
  if (bad || o->nranks < min_ranks || o->nranks > max_ranks || (!o->dir && !probe) || o->ngpus < 1 ||
      o->ngpus > o->nranks) {
    fprintf(stderr, "usage: %s --ranks N (%d..%d) (--dir DIR | --probe)%s%s%s%s%s\n", name, min_ranks, max_ranks,
            takes & GPU_OPT_GPUS ? " [--gpus G (1..N)]" : "", takes & GPU_OPT_BIG ? " [--big]" : "",
            takes & GPU_OPT_QUICK ? " [--quick]" : "", takes & GPU_OPT_PROCS ? " [--procs]" : "",
            takes & GPU_OPT_NET ? " [--net]" : "");
    return 2;
  }
  if (probe) {
    int found = 0;
    if (cudaGetDeviceCount(&found) != cudaSuccess) found = 0;
    if (found >= o->ngpus) exit(0);
    printf("1..0 # SKIP needs %d GPUs, found %d\n", o->ngpus, found);
    exit(77);
  }
  return 0;
}

#endif
