/* fz_ir.c -- fuzz target: an IR file (the input's bytes) through the reader, the validator, the race check, the writer and, when small, a CPU executor run. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_read.h"
#include "ir_write.h"
#include "rt_diag.h"

/* What a program may hold for the executor to run it here: every thread
 * block is a thread and every step runs once per tile, so these bound an
 * input's time (a few milliseconds). */
enum { FZ_RANKS = 8, FZ_TBS = 48, FZ_STEPS = 1024, FZ_CHUNK_STEPS = 4096, FZ_CHUNKS = 256 };

/* Quiet, and limits far below the defaults so that no input can make the
 * checks' per-chunk work large (the parameters are read once, on first
 * use, so this must come first). */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  setenv("BATON_MAX_CHUNKS", "65536", 1);
  setenv("BATON_MAX_RANKS", "64", 1);
  setenv("BATON_IR_MAX_TBS", "256", 1);
  setenv("BATON_IR_MAX_STEPS", "4096", 1);
  return 0;
}

/* Whether p is small enough to run: ranks, thread blocks, steps, the
 * chunks they move and the chunks of each buffer. */
static int runnable(const ir_prog *p) {
  if (p->ngpus > FZ_RANKS || ir_prog_ntbs(p) > FZ_TBS || ir_prog_nsteps(p) > FZ_STEPS) return 0;
  long moved = 0;
  for (int r = 0; r < p->ngpus; r++) {
    const ir_gpu *g = &p->gpus[r];
    if (g->i_chunks > FZ_CHUNKS || g->o_chunks > FZ_CHUNKS || g->s_chunks > FZ_CHUNKS) return 0;
    for (int t = 0; t < g->ntbs; t++)
      for (int s = 0; s < g->tbs[t].nsteps; s++) moved += g->tbs[t].steps[s].cnt;
  }
  return moved <= FZ_CHUNK_STEPS && p->nchunksperloop <= FZ_CHUNKS * FZ_RANKS;
}

/* The writer's text reads back as a valid program with as many steps. */
static void roundtrip(const ir_prog *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  bt_result w = ir_write(p, f);
  fclose(f);
  if (!w) {
    rt_diag *d = rt_diag_new(4);
    ir_prog *q = NULL;
    if (ir_read_memory(text, len, "written", &q, d) || ir_check(q, d) || ir_prog_nsteps(q) != ir_prog_nsteps(p)) {
      fprintf(stderr, "fz_ir: the written program does not read back alike:\n%s\n%s", rt_diag_text(d), text);
      abort();
    }
    ir_prog_free(q);
    rt_diag_free(d);
  }
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt_diag *d = rt_diag_new(8);
  ir_prog *p = NULL;
  if (!d) return 0;
  if (ir_read_memory((const char *)data, size, "fuzz.xml", &p, d) || ir_check(p, d)) goto out;
  roundtrip(p);
  ir_check_slots(p, 1, d);   /* the slot-bounded deadlock check, whatever it finds */
  int aliased = ir_prog_aliased(p, p->inplace);
  if (ir_check_races(p, aliased, d) || !runnable(p)) goto out;
  ir_check_races(p, !aliased, d);   /* the other layout too: findings are fine, crashes are not */
  /* One element per chunk plus an uneven tail, tiles of 2: every chunk
   * boundary and a partial tile are met. */
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 2 * (p->nchunksperloop > 0 ? p->nchunksperloop : 1) + 1,
                   .inplace = -1, .tile = 2, .slots = 2};
  ip_cpu_report rep;
  rt_diag *e = rt_diag_new(4);
  if (e) ip_cpu_verify(p, &o, &rep, e);
  rt_diag_free(e);
out:
  ir_prog_free(p);
  rt_diag_free(d);
  return 0;
}
