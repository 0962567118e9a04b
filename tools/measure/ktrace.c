/* ktrace.c -- libbaton_ktrace.so: the GPU's own start and end of every
 * kernel, copy and memset a process runs, from CUPTI's activity records,
 * for any CUDA program, graph launches included (each graph node is a
 * record): the time between kernels in a captured graph, and each kernel's
 * own, which a timeline inside one kernel (BATON_TRACE) cannot show.
 *
 * Loaded by the CUDA driver as an injection library:
 *   BATON_KTRACE=PREFIX CUDA_INJECTION64_PATH=$PWD/build/tools/libbaton_ktrace.so PROGRAM ...
 * Each process writes PREFIX.PID.csv when it exits (header line, then one
 * row a record, in the order CUPTI delivered them):
 *   kind,name,device,stream,graph,node,start_ns,end_ns,grid,block,bytes
 * kind is kernel, memcpy or memset; start and end are the GPU's clock in
 * ns; graph and node are 0 outside a graph; grid and block count threads'
 * blocks and threads (x*y*z); bytes, for copies and memsets.
 * tools/measure/ktrace_summary.py reads them.
 *
 * Limits: KTRACE_MAX_RECORDS records a process (past it, records are
 * counted and dropped, and the file's last line says how many);
 * KTRACE_MAX_NAMES distinct kernel names (the others are written as
 * "other"), each cut at KTRACE_MAX_NAME bytes.  Tracing adds CUPTI's own
 * cost to each launch: compare runs traced alike. */
#include <cupti.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KTRACE_MAX_RECORDS (1 << 20)
#define KTRACE_MAX_NAMES 1024
#define KTRACE_MAX_NAME 256
#define KTRACE_BUFFER_BYTES (8 << 20)   /* one CUPTI activity buffer */

typedef struct {
  uint8_t kind;    /* 0 kernel, 1 memcpy, 2 memset */
  uint16_t name;   /* kernels: its index in names[] */
  uint32_t device, stream, graph;
  uint64_t node, start, end, bytes;
  int64_t grid, block;
} krec;

static const char *const kind_name[] = {"kernel", "memcpy", "memset"};
static char *names[KTRACE_MAX_NAMES];   /* names[0]: "other" */
static int nnames;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static krec *recs;
static size_t nrecs, caprecs, dropped;
static char prefix[4096];

static void say(const char *what, CUptiResult r) {
  const char *s = NULL;
  cuptiGetResultString(r, &s);
  fprintf(stderr, "libbaton_ktrace: %s: %s (BATON_KTRACE: no timeline)\n", what, s ? s : "unknown CUPTI error");
}

/* A slot for one more record (unset: row fills it), or NULL (counted as
 * dropped) past the limit or when memory runs out.  Called with lock held. */
static krec *slot(void) {
  if (nrecs == caprecs) {
    size_t want = caprecs ? 2 * caprecs : 4096;
    if (want > KTRACE_MAX_RECORDS) want = KTRACE_MAX_RECORDS;
    krec *grown = want > caprecs ? realloc(recs, want * sizeof *recs) : NULL;
    if (!grown) {
      dropped++;
      return NULL;
    }
    recs = grown;
    caprecs = want;
  }
  return &recs[nrecs++];
}

/* The index of kernel name s in names[], added if new; 0 ("other") past
 * KTRACE_MAX_NAMES or when memory runs out.  Called with lock held. */
static uint16_t name_of(const char *s) {
  static int last;
  if (!nnames && (names[0] = strdup("other"))) nnames = 1;
  if (!s) s = "?";
  if (last > 0 && last < nnames && !strncmp(names[last], s, KTRACE_MAX_NAME - 1)) return (uint16_t)last;
  for (int i = 1; i < nnames; i++)
    if (!strncmp(names[i], s, KTRACE_MAX_NAME - 1)) return (uint16_t)(last = i);
  if (nnames == KTRACE_MAX_NAMES || !(names[nnames] = strndup(s, KTRACE_MAX_NAME - 1))) return 0;
  return (uint16_t)(last = nnames++);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, KTRACE_BUFFER_BYTES);
  *size = *buffer ? KTRACE_BUFFER_BYTES : 0;
  *max_records = 0;   /* as many as fit */
}

/* A new row of kind `kind` with the fields every kept record has; NULL
 * when dropped (slot).  Called with lock held. */
static krec *row(uint8_t kind, uint32_t device, uint32_t stream, uint32_t graph, uint64_t node, uint64_t start,
                 uint64_t end) {
  krec *k = slot();
  if (k)
    *k = (krec){.kind = kind, .device = device, .stream = stream, .graph = graph, .node = node, .start = start,
                .end = end};
  return k;
}

/* Copies what a record of a kind we keep says into the table. */
static void keep(const CUpti_Activity *a) {
  krec *k;
  if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    const CUpti_ActivityKernel10 *r = (const CUpti_ActivityKernel10 *)a;
    if (!(k = row(0, r->deviceId, r->streamId, r->graphId, r->graphNodeId, r->start, r->end))) return;
    k->grid = (int64_t)r->gridX * r->gridY * r->gridZ;
    k->block = (int64_t)r->blockX * r->blockY * r->blockZ;
    k->name = name_of(r->name);
  } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    const CUpti_ActivityMemcpy6 *r = (const CUpti_ActivityMemcpy6 *)a;
    if ((k = row(1, r->deviceId, r->streamId, r->graphId, r->graphNodeId, r->start, r->end))) k->bytes = r->bytes;
  } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    const CUpti_ActivityMemset4 *r = (const CUpti_ActivityMemset4 *)a;
    if ((k = row(2, r->deviceId, r->streamId, r->graphId, r->graphNodeId, r->start, r->end))) k->bytes = r->bytes;
  }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *a = NULL;
  pthread_mutex_lock(&lock);
  while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) keep(a);
  pthread_mutex_unlock(&lock);
  free(buffer);
}

/* A name as one CSV field: quoted, its quotes doubled (C++ names hold
 * commas). */
static void put_name(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void write_out(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  char path[4200];
  snprintf(path, sizeof path, "%s.%ld.csv", prefix, (long)getpid());
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "libbaton_ktrace: cannot write %s\n", path);
    return;
  }
  pthread_mutex_lock(&lock);
  fprintf(f, "kind,name,device,stream,graph,node,start_ns,end_ns,grid,block,bytes\n");
  for (size_t i = 0; i < nrecs; i++) {
    const krec *k = &recs[i];
    fprintf(f, "%s,", kind_name[k->kind]);
    put_name(f, k->kind ? kind_name[k->kind] : names[k->name] ? names[k->name] : "other");
    fprintf(f, ",%" PRIu32 ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRIu64 "\n",
            k->device, k->stream, k->graph, k->node, k->start, k->end, k->grid, k->block, k->bytes);
  }
  if (dropped) fprintf(f, "# dropped %zu records past %d\n", dropped, KTRACE_MAX_RECORDS);
  pthread_mutex_unlock(&lock);
  if (fclose(f)) fprintf(stderr, "libbaton_ktrace: writing %s failed\n", path);
}

/* The driver's entry point for an injection library (CUDA_INJECTION64_PATH),
 * called once, at cuInit.  Returns 1 (the driver goes on either way). */
__attribute__((visibility("default"))) int InitializeInjection(void) {
  const char *p = getenv("BATON_KTRACE");
  if (!p || !*p) {
    fprintf(stderr, "libbaton_ktrace: BATON_KTRACE (the output's prefix) is not set: no timeline\n");
    return 1;
  }
  if (strlen(p) >= sizeof prefix) {
    fprintf(stderr, "libbaton_ktrace: BATON_KTRACE is longer than %zu bytes: no timeline\n", sizeof prefix - 1);
    return 1;
  }
  strcpy(prefix, p);
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    say("registering the activity buffers", r);
    return 1;
  }
  static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                             CUPTI_ACTIVITY_KIND_MEMSET};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if ((r = cuptiActivityEnable(kinds[i])) != CUPTI_SUCCESS) {
      say("enabling an activity kind", r);
      return 1;
    }
  atexit(write_out);
  return 1;
}
