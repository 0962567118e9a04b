/* test_peerbuf.c -- the exchange of every rank's buffers across processes
 * (runtime/rt_peerbuf.c) without a GPU: two threads stand for the ranks of
 * two processes, over stand-ins for CUDA's pointer queries and IPC, cuMem
 * export and import, the bootstrap's allgather and the passing of file
 * descriptors.  The cases are what broke in use:
 *   - a buffer across two cuMem allocations that earlier calls carried
 *     (and mapped) one at a time: every rank maps the pair side by side,
 *     where the owner's peers used to fail while the owner went on;
 *   - an exchange that fails (one rank at BATON_PEER_MAPS) leaves no
 *     mapping behind on the ranks that did map;
 *   - a buffer running past its cudaMalloc allocation is refused;
 *   - a rank without a listener for descriptors gives up with the others
 *     where a peer shares cuMem memory (it used to crash);
 *   - ranks in different PID namespaces (containers) pass descriptors
 *     without checking a pid that means nothing to the receiver;
 *   - ranks of one call that run different programs (they differ in
 *     placement: one in place, one not) give up alike before mapping
 *     anything, and run it without their peers' buffers. */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "rt_bootstrap.h"
#include "rt_fdpass.h"
#include "rt_peerbuf.h"
#include "rt_shmbox.h"
#include "tap.h"
#include "tp_cuda.h"

#define MB (1ull << 20)

/* ---- the stand-ins: each rank a thread with allocations of its own ---- */

static __thread int me = -1;
int test_getpid(void) { return 1000 + me; }   /* rt_peerbuf.c is built with getpid as this */

typedef struct alloc {
  uint64_t base, size, id;
  int vmm, live;
} alloc;
static alloc allocs[2][16];
static int nallocs[2];
static int imports[2], ipc_opens[2], ipc_closes[2], no_listener = -1;

static void add_alloc(int r, uint64_t base, uint64_t size, uint64_t id, int vmm) {
  allocs[r][nallocs[r]++] = (alloc){base, size, id, vmm, 1};
}
static alloc *find(uint64_t p) {
  for (int i = 0; i < nallocs[me]; i++) {
    alloc *a = &allocs[me][i];
    if (a->live && p >= a->base && p < a->base + a->size) return a;
  }
  return NULL;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  memset(a, 0, sizeof *a);
  if (!find((uint64_t)(uintptr_t)p)) return cudaErrorInvalidValue;
  a->type = cudaMemoryTypeDevice;
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "stand-in"; }
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) {
  alloc *a = find((uint64_t)(uintptr_t)p);
  if (!a || a->vmm) return cudaErrorInvalidValue;
  memset(h, 0, sizeof *h);
  memcpy(h, &a->id, sizeof a->id);
  return cudaSuccess;
}
cudaError_t cudaIpcCloseMemHandle(void *p) {
  (void)p;
  ipc_closes[me]++;
  return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m) {
  (void)m;
  return cudaSuccess;
}
int tp_cuda_alloc_of(const void *p, uint64_t *base, size_t *bytes, unsigned long long *id) {
  alloc *a = find((uint64_t)(uintptr_t)p);
  if (!a) return 0;
  *base = a->base;
  *bytes = a->size;
  if (id) *id = a->id;
  return 1;
}
int tp_cuda_vmm_export(uint64_t base, int *fd) {
  alloc *a = find(base);
  *fd = a && a->vmm && a->base == base ? open("/dev/null", O_RDONLY) : -1;
  return *fd >= 0;
}
static uint64_t next_va[2] = {0x700000000000ull, 0x710000000000ull};   /* where each rank maps its peer's memory */
bt_result tp_cuda_vmm_import(const int *fds, const size_t *bytes, int k, int dev, char **at, unsigned long long *h) {
  (void)fds, (void)dev;
  size_t total = 0;
  for (int i = 0; i < k; i++) total += bytes[i], h[i] = 0;
  *at = (char *)(uintptr_t)next_va[me];
  next_va[me] += total + MB;
  imports[me]++;
  return BT_OK;
}
void tp_cuda_vmm_unmap(char *at, const size_t *bytes, int k, const unsigned long long *h) {
  (void)at, (void)bytes, (void)k, (void)h;
}
bt_result tp_cuda_map_peer(const char *who, int dev, int same, int pdev, uint64_t base, const char ipc[64],
                           char **out, int *opened) {
  (void)who, (void)dev, (void)same, (void)pdev, (void)base, (void)ipc;
  *out = (char *)(uintptr_t)next_va[me];
  next_va[me] += 1ull << 32;
  *opened = 1;
  ipc_opens[me]++;
  return BT_OK;
}
uint64_t rt_process_number(void) { return 42; }
static int other_namespace;   /* rank 1 in a PID namespace of its own */
uint64_t rt_pid_namespace(void) { return other_namespace && me == 1 ? 99 : 77; }

/* The two ranks' allgather: each waits for the other's contribution of
 * the same round, then for the other to have read its own. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char gathered[2][1 << 16];
static int rounds[2], read_rounds[2];
bt_result rt_bootstrap_allgather(rt_bootstrap *bs, void *data, size_t bytes) {
  (void)bs;
  const int other = 1 - me;
  if (bytes > sizeof gathered[0]) return BT_ERR_INVALID;
  pthread_mutex_lock(&mu);
  memcpy(gathered[me], (char *)data + me * bytes, bytes);
  rounds[me]++;
  pthread_cond_broadcast(&cv);
  while (rounds[other] < rounds[me]) pthread_cond_wait(&cv, &mu);
  memcpy((char *)data + other * bytes, gathered[other], bytes);
  read_rounds[me]++;
  pthread_cond_broadcast(&cv);
  while (read_rounds[other] < read_rounds[me]) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return BT_OK;
}
bt_result rt_shmbox_open(rt_shmbox **b, struct rt_bootstrap *bs, int rank, int nranks, size_t bytes, int64_t t) {
  (void)bs, (void)rank, (void)nranks, (void)bytes, (void)t;
  *b = NULL;
  return BT_ERR_UNSUPPORTED;   /* the bootstrap's allgather, above */
}
bt_result rt_shmbox_allgather(rt_shmbox *b, void *d, size_t n) {
  (void)b, (void)d, (void)n;
  return BT_ERR_INVALID;
}
void rt_shmbox_close(rt_shmbox *b) { (void)b; }

/* Descriptors: each rank's box holds what its peer sent under a tag. */
struct rt_fdpass {
  int rank;
};
static int box[2][RT_FDPASS_MAX], nbox[2];
static pid_t pid_expected[2];   /* what each rank's receive was told its peer's pid is */
static uint64_t box_tag[2];
bt_result rt_fdpass_open(rt_fdpass **fp, uint64_t key, int rank) {
  (void)key;
  *fp = NULL;
  if (rank == no_listener) return BT_ERR_SYSTEM;
  if (!(*fp = malloc(sizeof **fp))) return BT_ERR_NOMEM;
  (*fp)->rank = rank;
  return BT_OK;
}
bt_result rt_fdpass_send(rt_fdpass *fp, uint64_t key, int peer, uint64_t tag, const int *fds, int n, int ms) {
  (void)fp, (void)key, (void)ms;
  if (peer == no_listener) return BT_ERR_SYSTEM;   /* nobody listens there */
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n; i++) box[peer][i] = dup(fds[i]);
  nbox[peer] = n;
  box_tag[peer] = tag;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  return BT_OK;
}
bt_result rt_fdpass_recv(rt_fdpass *fp, int nranks, const int *want, const pid_t *pids, uint64_t tag, int *fds,
                         int ms) {
  (void)ms;
  const int r = fp->rank, other = 1 - r;
  pid_expected[r] = pids[other];
  for (int i = 0; i < nranks * RT_FDPASS_MAX; i++) fds[i] = -1;
  if (!want[other]) return BT_OK;
  pthread_mutex_lock(&mu);
  while (box_tag[r] != tag) pthread_cond_wait(&cv, &mu);
  for (int i = 0; i < nbox[r]; i++) fds[other * RT_FDPASS_MAX + i] = box[r][i];
  box_tag[r] = 0;
  pthread_mutex_unlock(&mu);
  return BT_OK;
}
void rt_fdpass_close(rt_fdpass *fp) { free(fp); }

/* ---- the cases --------------------------------------------------------- */

enum { SPAN, FAILED, PAST, LISTENER, PROGS, CASES };
static rt_peerbufs *pbs[2];
static bt_result results[2][8];   /* each rank's result of each call */
static char *peer_in[2][8];       /* where it found its peer's input */
static int mapped_after[2];
static pthread_barrier_t bar;
static uint64_t prog_of[2][8];
static int opens_first[2];      /* PROGS: the IPC mappings each rank opened in its first call */   /* the program each rank runs each call with (0 unless a case says) */

/* Call k of rank r on its buffer at p of len bytes (input and output). */
static void call(int r, int k, uint64_t p, int64_t len, int max_maps) {
  char *in[2], *out[2];
  in[r] = out[r] = (char *)(uintptr_t)p;
  rt_peerbuf_self s = {.rank = r, .nranks = 2, .dev = 0, .host = 7, .max_maps = max_maps, .what = "a test call",
                       .in_bytes = len, .out_bytes = len, .key = 1000 + (uint64_t)k, .prog = prog_of[r][k]};
  results[r][k] = rt_peerbuf_exchange(&pbs[r], (struct rt_bootstrap *)(uintptr_t)(r + 1), &s, in, out);
  peer_in[r][k] = results[r][k] ? NULL : in[1 - r];
}

static int the_case;
static void *rank_main(void *arg) {
  const int r = (int)(intptr_t)arg;
  me = r;
  const uint64_t base = r == 0 ? 0x100000000ull : 0x200000000ull;
  if (the_case == SPAN) {   /* pieces of 20 MiB side by side, as PyTorch's expandable segments */
    for (int i = 0; i < 3; i++) add_alloc(r, base + i * 20 * MB, 20 * MB, 100 * (r + 1) + i, 1);
    pthread_barrier_wait(&bar);
    call(r, 1, base, 10 * MB, 256);             /* in piece 0 */
    call(r, 2, base + 20 * MB, 10 * MB, 256);   /* in piece 1 */
    call(r, 3, r == 0 ? base + 15 * MB : base, 10 * MB, 256);   /* rank 0's across pieces 0 and 1 */
  } else if (the_case == FAILED) {   /* cudaMalloc memory; rank 1 may map one peer allocation, rank 0 many */
    for (int i = 0; i < 3; i++) add_alloc(r, base + i * 64 * MB, 64 * MB, 100 * (r + 1) + i, 0);
    pthread_barrier_wait(&bar);
    const int limit = r == 1 ? 1 : 256;
    call(r, 1, base, MB, limit);             /* both map the other's first allocation */
    call(r, 2, base + 64 * MB, MB, limit);   /* rank 1 cannot map another: every rank gives up */
    call(r, 3, base + 128 * MB, MB, limit);  /* nor here */
  } else if (the_case == PAST) {   /* two cudaMalloc allocations side by side; the buffer runs into the second */
    add_alloc(r, base, 16 * MB, 100 * (r + 1), 0);
    add_alloc(r, base + 16 * MB, 16 * MB, 100 * (r + 1) + 1, 0);
    pthread_barrier_wait(&bar);
    call(r, 1, base + 8 * MB, 16 * MB, 256);
  } else if (the_case == PROGS) {   /* call 1: each rank its own program; call 2: the same */
    add_alloc(r, base, 16 * MB, 100 * (r + 1), 0);
    pthread_barrier_wait(&bar);
    prog_of[r][1] = 10 + (uint64_t)r;
    prog_of[r][2] = 10;
    call(r, 1, base, MB, 256);
    opens_first[r] = ipc_opens[r];
    call(r, 2, base, MB, 256);
  } else {   /* LISTENER: rank 1 has no descriptor listener; rank 0's buffer is cuMem memory */
    add_alloc(r, base, 16 * MB, 100 * (r + 1), r == 0);
    pthread_barrier_wait(&bar);
    call(r, 1, base, MB, 256);
  }
  mapped_after[r] = rt_peerbuf_count(pbs[r]);
  rt_peerbufs_free(pbs[r]);
  pbs[r] = NULL;
  return NULL;
}

/* Runs case c on two fresh ranks. */
static void run_case(int c) {
  the_case = c;
  memset(results, 0, sizeof results);
  memset(prog_of, 0, sizeof prog_of);
  memset(nallocs, 0, sizeof nallocs);
  memset(imports, 0, sizeof imports);
  memset(ipc_opens, 0, sizeof ipc_opens);
  memset(ipc_closes, 0, sizeof ipc_closes);
  no_listener = c == LISTENER ? 1 : -1;
  pthread_barrier_init(&bar, NULL, 2);
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, rank_main, (void *)(intptr_t)r);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  pthread_barrier_destroy(&bar);
}

int main(void) {
  run_case(SPAN);
  ok(!results[0][1] && !results[1][1] && !results[0][2] && !results[1][2],
     "cuMem buffers in one allocation, then in the next: both exchanged (%s, %s)", bt_result_str(results[0][2]),
     bt_result_str(results[1][2]));
  ok(!results[0][3] && !results[1][3] && peer_in[1][3] != NULL && imports[1] == 3,
     "then a buffer across both: every rank exchanges it, its peer mapping the two side by side (%s, %s; rank 1 "
     "imported %d mappings)", bt_result_str(results[0][3]), bt_result_str(results[1][3]), imports[1]);
  run_case(FAILED);
  ok(!results[0][1] && !results[1][1] && results[0][2] == BT_ERR_UNSUPPORTED && results[1][2] == BT_ERR_UNSUPPORTED &&
     results[0][3] == BT_ERR_UNSUPPORTED && results[1][3] == BT_ERR_UNSUPPORTED,
     "a rank at its mapping limit: every rank gives up the calls on new allocations alike (%s, %s)",
     bt_result_str(results[0][2]), bt_result_str(results[1][2]));
  ok(mapped_after[0] == 1 && ipc_opens[0] == ipc_closes[0],
     "the rank that could map keeps only the mapping of the exchange that succeeded (%d mapped at the end; %d "
     "opened, %d closed with the communicator's end)", mapped_after[0], ipc_opens[0], ipc_closes[0]);
  run_case(PAST);
  ok(results[0][1] == BT_ERR_UNSUPPORTED && results[1][1] == BT_ERR_UNSUPPORTED && ipc_opens[0] + ipc_opens[1] == 0,
     "a buffer running past its cudaMalloc allocation is refused on every rank, nothing mapped (%s, %s)",
     bt_result_str(results[0][1]), bt_result_str(results[1][1]));
  pid_expected[1] = -1;
  run_case(SPAN);
  ok(pid_expected[1] == 1000 && !results[1][3], "ranks of one PID namespace: each checks its peer's pid (%d)",
     (int)pid_expected[1]);
  other_namespace = 1;
  run_case(SPAN);
  other_namespace = 0;
  ok(pid_expected[1] == 0 && pid_expected[0] == 0 && !results[0][3] && !results[1][3],
     "ranks in different PID namespaces (containers): no pid to check, and the exchange works (%s, %s)",
     bt_result_str(results[0][3]), bt_result_str(results[1][3]));
  run_case(LISTENER);
  ok(results[0][1] == BT_ERR_UNSUPPORTED && results[1][1] == BT_ERR_UNSUPPORTED,
     "a rank without a listener for descriptors, its peer's buffer cuMem memory: both give up alike (%s, %s)",
     bt_result_str(results[0][1]), bt_result_str(results[1][1]));
  run_case(PROGS);
  ok(results[0][1] == BT_ERR_UNSUPPORTED && results[1][1] == BT_ERR_UNSUPPORTED && opens_first[0] + opens_first[1] == 0,
     "ranks running different programs for one call: both give up alike, nothing mapped (%s, %s)",
     bt_result_str(results[0][1]), bt_result_str(results[1][1]));
  ok(!results[0][2] && !results[1][2] && peer_in[0][2] && peer_in[1][2],
     "then the same program on both: the exchange works (%s, %s)", bt_result_str(results[0][2]),
     bt_result_str(results[1][2]));
  return tap_done();
}
