/* test_ktrace.c -- tools/measure/ktrace.c (libbaton_ktrace.so) on the CPU,
 * over a stand-in for CUPTI's activity API: what InitializeInjection asks
 * of CUPTI, each record kind written as its CSV row (a kernel's name quoted,
 * its grid and block counted), kernel names past the limit written as
 * "other", records past the limit counted on the file's last line, and no
 * timeline (with a message) without BATON_KTRACE. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tools/measure/ktrace.c"
#include "tap.h"

/* ---- the stand-in: records laid end to end in a buffer ---------------- */

static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static int enabled, flushed;

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  (void)r;
  *s = "stand-in error";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc cp) {
  requested = rq;
  completed = cp;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  enabled |= 1 << (kind & 31);
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  flushed++;
  return CUPTI_SUCCESS;
}
static size_t size_of(CUpti_ActivityKind k) {
  return k == CUPTI_ACTIVITY_KIND_MEMCPY ? sizeof(CUpti_ActivityMemcpy6)
         : k == CUPTI_ACTIVITY_KIND_MEMSET ? sizeof(CUpti_ActivityMemset4)
                                           : sizeof(CUpti_ActivityKernel10);
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
  size_t at = *record ? (size_t)((uint8_t *)*record - buffer) + size_of((*record)->kind) : 0;
  if (at + sizeof(CUpti_Activity) > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *)(buffer + at);
  return CUPTI_SUCCESS;
}

/* A buffer being filled, as CUPTI would. */
static uint8_t *buf;
static size_t cap, used;
static void *rec(CUpti_ActivityKind kind) {
  if (!buf) {
    size_t max;
    requested(&buf, &cap, &max);
    used = 0;
  }
  size_t n = size_of(kind);
  if (used + n > cap) return NULL;
  void *r = buf + used;
  memset(r, 0, n);
  ((CUpti_Activity *)r)->kind = kind;
  used += n;
  return r;
}
static void deliver(void) {
  if (buf) completed(NULL, 0, buf, cap, used);   /* frees it */
  buf = NULL;
}
static void kernel(const char *name, uint32_t stream, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 *k = rec(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (!k) {
    deliver();
    k = rec(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  k->name = name;
  k->streamId = stream;
  k->start = start;
  k->end = end;
  k->gridX = 4, k->gridY = 2, k->gridZ = 1;
  k->blockX = 128, k->blockY = k->blockZ = 1;
  k->graphId = 2;
  k->graphNodeId = 9;
}

/* The file write_out wrote for this process, whole (static: freed by no one). */
static char text[1 << 18];
static const char *file(const char *prefix) {
  char path[512];
  snprintf(path, sizeof path, "%s.%ld.csv", prefix, (long)getpid());
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  text[n] = 0;
  if (f) fclose(f);
  return text;
}
static int lines_with(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

int main(void) {
  char dir[] = "/tmp/test_ktrace.XXXXXX", pre[256];
  if (!mkdtemp(dir)) return 1;
  snprintf(pre, sizeof pre, "%s/kt", dir);

  unsetenv("BATON_KTRACE");
  ok(InitializeInjection() == 1 && !requested, "without BATON_KTRACE: nothing asked of CUPTI, the driver goes on");
  setenv("BATON_KTRACE", pre, 1);
  ok(InitializeInjection() == 1 && requested && completed, "with it: the activity buffers are registered");
  ok((enabled >> CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL & 1) && (enabled >> CUPTI_ACTIVITY_KIND_MEMCPY & 1) &&
         (enabled >> CUPTI_ACTIVITY_KIND_MEMSET & 1),
     "kernels (concurrent), copies and memsets are enabled");

  kernel("_Z3fooPi", 7, 100, 350);
  CUpti_ActivityMemcpy6 *m = rec(CUPTI_ACTIVITY_KIND_MEMCPY);
  m->streamId = 7, m->start = 400, m->end = 500, m->bytes = 4096;
  CUpti_ActivityMemset4 *z = rec(CUPTI_ACTIVITY_KIND_MEMSET);
  z->streamId = 8, z->start = 600, z->end = 610, z->bytes = 64;
  kernel("void f<int, \"q\">(int)", 7, 700, 800);
  kernel("_Z3fooPi", 9, 900, 1000);
  deliver();
  write_out();
  const char *s = file(pre);
  ok(flushed == 1, "the records are flushed before the file is written");
  ok(!strncmp(s, "kind,name,device,stream,graph,node,start_ns,end_ns,grid,block,bytes\n", 67), "the header");
  ok_contains(s, "kernel,\"_Z3fooPi\",0,7,2,9,100,350,8,128,0\n", "a kernel: its stream, graph and node, times, "
              "8 blocks of 128 threads");
  ok_contains(s, "memcpy,\"memcpy\",0,7,0,0,400,500,0,0,4096\n", "a copy, its bytes");
  ok_contains(s, "memset,\"memset\",0,8,0,0,600,610,0,0,64\n", "a memset");
  ok_contains(s, "kernel,\"void f<int, \"\"q\"\">(int)\",0,7,", "a name with a comma and quotes, quoted as CSV");
  ok(lines_with(s, "\"_Z3fooPi\"") == 2, "a name seen again is the same name");

  /* Kernel names past the limit are "other". */
  static char many[KTRACE_MAX_NAMES + 10][16];
  for (int i = 0; i < KTRACE_MAX_NAMES + 10; i++) {
    snprintf(many[i], sizeof many[i], "k%d", i);
    kernel(many[i], 1, 0, 1);
  }
  deliver();
  write_out();
  s = file(pre);
  /* names[0] is "other" and 2 names came before: 1,021 of these keep theirs */
  ok(lines_with(s, "\"other\"") == KTRACE_MAX_NAMES + 10 - (KTRACE_MAX_NAMES - 3),
     "past %d kernel names, the others are written as \"other\" (%d of them)", KTRACE_MAX_NAMES,
     lines_with(s, "\"other\""));

  /* Records past the limit: counted, and said on the last line. */
  size_t before = nrecs;
  for (size_t i = before; i < KTRACE_MAX_RECORDS + 5; i++) kernel("_Z3fooPi", 3, i, i + 1);
  deliver();
  ok(nrecs == KTRACE_MAX_RECORDS && dropped == 5, "records stop at %d, the rest counted (%zu dropped)",
     KTRACE_MAX_RECORDS, dropped);
  write_out();
  char path[512];
  snprintf(path, sizeof path, "%s.%ld.csv", pre, (long)getpid());
  FILE *f = fopen(path, "r");
  char line[512], last[512] = "";
  while (f && fgets(line, sizeof line, f)) strcpy(last, line);
  if (f) fclose(f);
  ok(!strcmp(last, "# dropped 5 records past 1048576\n"), "the file's last line says so: %s", last);
  remove(path);
  rmdir(dir);
  /* Not through exit: the library's own write at exit (atexit) would write
   * the file again into the folder just removed. */
  int rc = tap_done();
  fflush(stdout);
  _exit(rc);
}
