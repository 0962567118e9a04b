/* rt_trace.c -- the interpreter's timeline (BATON_TRACE): a device buffer
 * the kernel writes its events into (interpreter/ip_gpu.h says the
 * layout), saved as CSV when the communicator goes. */
#include "rt_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip_gpu.h"
#include "ir.h"
#include "rt_cudart.h"
#include "rt_hash.h"
#include "rt_log.h"
#include "rt_param.h"

struct rt_trace {
  int rank, nranks, cap;     /* cap: CUDA blocks the buffer holds */
  uint64_t *dev;             /* cap * IP_TRACE_WORDS words */
  const char *algo;          /* the last launch (the program's name: lives as long as the communicator) */
  const ir_prog *prog;       /* its program (NULL: none): names the steps */
  const char *const *steps;  /* else, its steps' names (nsteps of them; NULL: none) */
  int nsteps;
  int blocks, ntbs, lanes, cwidth, nthreads;
  int direct;                /* the direct executor's: block b is lane b % lanes of thread block b / lanes */
  const int *irtb;           /* per block of a lane, its IR thread block (the plan's; NULL: the same) */
  int warned;
};

bt_result rt_trace_open(rt_trace **out, int rank, int nranks, int blocks) {
  *out = NULL;
  if (!*rt_param_str(RT_PARAM_TRACE) || blocks < 1) return BT_OK;
  rt_trace *t = calloc(1, sizeof *t);
  if (!t) return BT_ERR_NOMEM;
  size_t bytes = (size_t)blocks * IP_TRACE_WORDS * sizeof(uint64_t);
  if (rt_cuda(cudaMalloc((void **)&t->dev, bytes), RT_SUB_RUNTIME, "allocating the timeline (BATON_TRACE)") ||
      rt_cuda(cudaMemset(t->dev, 0, bytes), RT_SUB_RUNTIME, "clearing the timeline")) {
    if (t->dev) cudaFree(t->dev);
    free(t);
    return BT_ERR_CUDA;
  }
  t->rank = rank;
  t->nranks = nranks;
  t->cap = blocks;
  *out = t;
  return BT_OK;
}

uint64_t *rt_trace_buf(rt_trace *t, int blocks) {
  if (!t) return NULL;
  if (blocks <= t->cap) return t->dev;
  if (!t->warned++)
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: BATON_TRACE: a launch of %d CUDA blocks, the timeline holds %d: not traced",
             t->rank, blocks, t->cap);
  return NULL;
}

void rt_trace_called(rt_trace *t, const char *algo, const ir_prog *prog, int blocks, int ntbs, int lanes,
                     int cwidth, int nthreads, const int *irtb, int direct) {
  if (!t) return;
  t->prog = prog;
  t->steps = NULL;
  t->nsteps = 0;
  t->direct = direct;
  t->irtb = irtb;
  t->algo = algo;
  t->blocks = blocks;
  t->ntbs = ntbs;
  t->lanes = lanes;
  t->cwidth = cwidth;
  t->nthreads = nthreads;
}

void rt_trace_steps(rt_trace *t, const char *const *steps, int n) {
  if (!t) return;
  t->steps = steps;
  t->nsteps = n;
}

static const char *const ev_name[] = {"enter", "ready", "waited", "done", "exit"};

/* Step `step` of IR thread block `tb` of this rank's part of the program,
 * or NULL when there is none (no program, or out of range). */
static const ir_step *step_of(const rt_trace *t, int tb, unsigned step) {
  const ir_prog *p = t->prog;
  for (int g = 0; p && g < p->ngpus; g++) {
    const ir_gpu *u = &p->gpus[g];
    if (u->id != t->rank) continue;
    return tb >= 0 && tb < u->ntbs && step < (unsigned)u->tbs[tb].nsteps ? &u->tbs[tb].steps[step] : NULL;
  }
  return NULL;
}

/* Writes field s as CSV (quoted when it holds a comma, a quote or a
 * line break, its quotes doubled). */
static void csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Whether this process wrote path before (another communicator of the
 * same rank and size): the paths' hashes, up to TRACE_FILES_SEEN of them
 * (past that, no more are looked at). */
#define TRACE_FILES_SEEN 256
static int written_before(const char *path) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t seen[TRACE_FILES_SEEN];
  static int nseen;
  const uint64_t h = rt_hash_bytes(RT_HASH_START, path, strlen(path));
  int found = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nseen && !found; i++) found = seen[i] == h;
  if (!found && nseen < TRACE_FILES_SEEN) seen[nseen++] = h;
  pthread_mutex_unlock(&mu);
  return found;
}

/* One row per event: absolute times, so that the files of all ranks of a
 * machine line up (their GPUs' timers start from the same host clock). */
static void save(const rt_trace *t) {
  size_t words = (size_t)t->blocks * IP_TRACE_WORDS;
  uint64_t *h = malloc(words * sizeof *h);
  if (!h) return;
  if (rt_cuda(cudaMemcpy(h, t->dev, words * sizeof *h, cudaMemcpyDeviceToHost), RT_SUB_RUNTIME,
              "reading the timeline")) {
    free(h);
    return;
  }
  char path[4096];
  if (rt_param_trace_file(path, sizeof path, t->nranks, t->rank, ".csv")) {
    LOG_WARN(RT_SUB_RUNTIME, "BATON_TRACE: the file name for rank %d is longer than %zu bytes: not written", t->rank,
             sizeof path);
    free(h);
    return;
  }
  if (written_before(path))
    LOG_WARN(RT_SUB_RUNTIME, "BATON_TRACE: %s is written again by another communicator of this process (the last "
             "one destroyed is kept); put %%n in BATON_TRACE to name the files by the communicator's ranks", path);
  FILE *f = fopen(path, "w");
  if (!f) {
    LOG_WARN(RT_SUB_RUNTIME, "BATON_TRACE: cannot write %s", path);
    free(h);
    return;
  }
  fprintf(f, "rank,algo,threads,block,lane,tb,event,step,tile,ns,clk,op,where\n");
  int comm = t->ntbs * t->lanes;
  for (int b = 0; b < t->blocks; b++) {
    const uint64_t *w = h + (size_t)b * IP_TRACE_WORDS;
    uint64_t n = w[0] < IP_TRACE_EVENTS ? w[0] : IP_TRACE_EVENTS;
    /* a compute block's "lane" is its place among its compute tb's blocks */
    int lane = t->direct ? b % t->lanes : b < comm ? b / t->ntbs : (b - comm) % t->cwidth;
    int k = t->direct ? b / t->lanes : b < comm ? b % t->ntbs : t->ntbs + (b - comm) / t->cwidth;
    for (uint64_t e = 0; e < n; e++) {
      const uint64_t *ev = w + 1 + 3 * e;
      unsigned kind = (unsigned)(ev[0] & 0xff);
      const int tb = t->irtb ? t->irtb[k] : k;
      const unsigned step = (unsigned)(ev[0] >> 8 & 0xffffffffu);
      /* waits and ends name their step: opcode, and the script line (else the XML line); a launch
       * without a program, by its own names */
      const int stepped = kind == IP_EV_WAITED || kind == IP_EV_DONE;
      const ir_step *st = stepped ? step_of(t, tb, step) : NULL;
      const char *named = stepped && !t->prog && step < (unsigned)t->nsteps ? t->steps[step] : NULL;
      char where[64] = "";
      if (st && !st->prov && st->line > 0) snprintf(where, sizeof where, "xml:%d", (int)st->line);
      fprintf(f, "%d,", t->rank);
      csv_field(f, t->algo ? t->algo : "");
      fprintf(f, ",%d,%d,%d,%d,%s,%u,%llu,%llu,%llu,", t->nthreads, b, lane, tb, kind < 5 ? ev_name[kind] : "?", step,
              (unsigned long long)(ev[0] >> 40), (unsigned long long)ev[1], (unsigned long long)ev[2]);
      csv_field(f, named ? named : st && st->op < IR_OP_COUNT ? ir_op_xml[st->op] : "");
      fputc(',', f);
      csv_field(f, st && st->prov ? st->prov : where);
      fputc('\n', f);
    }
  }
  fclose(f);
  free(h);
  LOG_INFO(RT_SUB_RUNTIME, "rank %d: timeline of the last call (%s) written to %s", t->rank, t->algo, path);
}

void rt_trace_close(rt_trace *t) {
  if (!t) return;
  if (t->blocks > 0 && !rt_cuda(cudaDeviceSynchronize(), RT_SUB_RUNTIME, "BATON_TRACE: waiting"))
    save(t);
  cudaFree(t->dev);
  free(t);
}
