/* gpu_chain.c -- calls back to back on one stream, each reading what the
 * one before it wrote: AllReduces out of place and in place, with a copy
 * between two of them, eagerly and captured in a CUDA graph, at sizes from
 * one LL line to the two-shot's.  A direct kernel may start while the
 * kernel before it on the stream ends (docs/RUNTIME.md, "Direct programs":
 * BATON_DIRECT_PDL); any read of the caller's data, or of the call count,
 * before that kernel has ended shows here as a wrong element.  Last, the
 * largest size again on cuMem allocations (as ncclMemAlloc makes them),
 * then on buffers each made of three cuMem allocations mapped side by
 * side (as PyTorch's expandable segments make them): captured, a direct
 * program runs on the ranks' own buffers, with a process per GPU too (the
 * allocations go between the processes as file descriptors).  And the
 * chain captured with every call on a side stream joined to the rank's by
 * events, as PyTorch's process group runs its collectives: the direct
 * kernels then depend on the kernels before them through programmatic
 * edges the runtime makes (docs/RUNTIME.md), and still read only what
 * those kernels finished writing.  With a process per GPU, last, a graph
 * on the second of two cuMem allocations that the peers map side by side
 * must replay right after the first is freed, and the range must be
 * unmapped once both are (freed_piece).
 * Usage: gpu_chain --ranks N --dir DIR [--procs] (DIR/default, else DIR: the
 * default set). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_ranks.h"
#include "rt_comm.h"
#include "rt_cudart.h"
#include "rt_peerbuf.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

/* Rank r's input element i: small integers, so every sum below is exact. */
static float val(int r, int64_t i) { return (float)((i * 7 + r * 3) % 13); }

/* Each rank's three buffers of one size; with vmm, each made of vmm cuMem
 * allocations side by side, of size[r] bytes in all (handles in h). */
#define CHAIN_PIECES 3
typedef struct chain_bufs {
  float *a[64], *b[64], *c[64];
  int vmm;
  size_t size[64];
  CUmemGenericAllocationHandle h[64][3][CHAIN_PIECES];
} chain_bufs;

typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*range_fn)(CUdeviceptr, size_t);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);

/* At least `bytes` on GPU dev as `pieces` cuMem allocations of one size
 * mapped side by side, each exportable as a POSIX file descriptor, open
 * to every GPU (ncclMemAlloc's kind with one piece): NULL where the driver
 * cannot; *size (all pieces) and h[] for vmm_free. */
static void *vmm_alloc(int dev, size_t bytes, int pieces, size_t *size, CUmemGenericAllocationHandle *h) {
  gran_fn gran = (gran_fn)rt_cuda_driver_fn("cuMemGetAllocationGranularity", 10020);
  create_fn create = (create_fn)rt_cuda_driver_fn("cuMemCreate", 10020);
  reserve_fn reserve = (reserve_fn)rt_cuda_driver_fn("cuMemAddressReserve", 10020);
  map_fn map = (map_fn)rt_cuda_driver_fn("cuMemMap", 10020);
  access_fn access = (access_fn)rt_cuda_driver_fn("cuMemSetAccess", 10020);
  if (!gran || !create || !reserve || !map || !access) return NULL;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
  size_t g = 0;
  if (gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) || !g) return NULL;
  const size_t piece = (bytes + (size_t)pieces * g - 1) / ((size_t)pieces * g) * g;
  *size = piece * (size_t)pieces;
  CUdeviceptr p = 0;
  if (reserve(&p, *size, g, 0, 0)) return NULL;
  for (int i = 0; i < pieces; i++)
    if (create(&h[i], piece, &prop, 0) || map(p + (size_t)i * piece, piece, 0, h[i], 0)) return NULL;
  int n = 0;
  cudaGetDeviceCount(&n);
  for (int d = 0; d < n; d++) {
    CUmemAccessDesc a = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (access(p, *size, &a, 1)) return NULL;
  }
  return (void *)(uintptr_t)p;
}

static void vmm_free(void *p, size_t size, int pieces, const CUmemGenericAllocationHandle *h) {
  range_fn unmap = (range_fn)rt_cuda_driver_fn("cuMemUnmap", 10020);
  range_fn addr_free = (range_fn)rt_cuda_driver_fn("cuMemAddressFree", 10020);
  release_fn release = (release_fn)rt_cuda_driver_fn("cuMemRelease", 10020);
  if (!p || !unmap || !addr_free || !release) return;
  const size_t piece = size / (size_t)pieces;
  for (int i = 0; i < pieces; i++) unmap((CUdeviceptr)(uintptr_t)p + (size_t)i * piece, piece);
  addr_free((CUdeviceptr)(uintptr_t)p, size);
  for (int i = 0; i < pieces; i++) release(h[i]);
}

/* The chain on every rank this process drives, in one group per step:
 *   b = AR(a); b = AR(b) in place; c = copy of b; a = AR(c); b = AR(a)
 * Element i of b then holds S_i * n^3 (S_i: the sum of the ranks' inputs). */
#define CHAIN_POW 3

/* With side[r] set, each call of the chain runs on it, joined to the
 * rank's stream by events before and after (PyTorch's pattern). */
static cudaStream_t side[64];
static cudaEvent_t joins[64][2];

/* Stream `to` of rank r waits for what stream `from` has issued (event k). */
static int join(int r, int k, cudaStream_t from, cudaStream_t to) {
  return cudaEventRecord(joins[r][k], from) == cudaSuccess && cudaStreamWaitEvent(to, joins[r][k], 0) == cudaSuccess;
}

static baton_result chain(const chain_bufs *B, int64_t n) {
  baton_result e = baton_success;
  for (int step = 0; step < 5 && !e; step++) {
    if (step == 2) {   /* the copy: the next call's input written by a copy, not a kernel */
      for (int r = rank_lo; r < rank_hi && !e; r++) {
        cudaSetDevice(dev_of(r));
        if (cudaMemcpyAsync(B->c[r], B->b[r], (size_t)n * 4, cudaMemcpyDeviceToDevice, streams[r]))
          e = baton_cuda_error;
      }
      continue;
    }
    for (int r = rank_lo; r < rank_hi && side[r] && !e; r++)
      if (cudaSetDevice(dev_of(r)) || !join(r, 0, streams[r], side[r])) e = baton_cuda_error;
    baton_group_start();
    for (int r = rank_lo; r < rank_hi; r++) {
      float *in = step == 0 ? B->a[r] : step == 1 ? B->b[r] : step == 3 ? B->c[r] : B->a[r];
      float *out = step == 3 ? B->a[r] : B->b[r];
      baton_result f = baton_allreduce(in, out, n, baton_f32, baton_sum, comms[r], side[r] ? side[r] : streams[r]);
      if (f && !e) e = f;
    }
    baton_result f = baton_group_end();
    if (f && !e) e = f;
    for (int r = rank_lo; r < rank_hi && side[r] && !e; r++)
      if (cudaSetDevice(dev_of(r)) || !join(r, 1, side[r], streams[r])) e = baton_cuda_error;
  }
  return e;
}

/* Every rank's input into a, the other buffers poisoned (NaN), on the
 * rank's stream and waited for: the streams do not wait for the legacy
 * default stream, where cudaMemset and a pageable cudaMemcpy may still be
 * under way when they return. */
static int fill(const chain_bufs *B, int64_t n, float *h) {
  int good = 1;
  for (int r = rank_lo; r < rank_hi; r++) {
    for (int64_t i = 0; i < n; i++) h[i] = val(r, i);
    cudaSetDevice(dev_of(r));
    good &= cudaMemcpyAsync(B->a[r], h, (size_t)n * 4, cudaMemcpyHostToDevice, streams[r]) == cudaSuccess;
    good &= cudaMemsetAsync(B->b[r], 0xff, (size_t)n * 4, streams[r]) == cudaSuccess;
    good &= cudaMemsetAsync(B->c[r], 0xff, (size_t)n * 4, streams[r]) == cudaSuccess;
    good &= cudaStreamSynchronize(streams[r]) == cudaSuccess;
  }
  return good;
}

/* Wrong elements of b over the ranks this process drives (-1: unreadable). */
static int64_t wrong_of(const chain_bufs *B, int64_t n, float *h, const char *how) {
  float scale = 1;
  for (int k = 0; k < CHAIN_POW; k++) scale *= (float)nranks;
  int64_t wrong = 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (cudaMemcpy(h, B->b[r], (size_t)n * 4, cudaMemcpyDeviceToHost)) return -1;
    for (int64_t i = 0; i < n; i++) {
      float s = 0;
      for (int q = 0; q < nranks; q++) s += val(q, i);
      if (h[i] != s * scale && wrong++ < 3)
        diag("%s, rank %d, %lld floats: element %lld is %g, expected %g", how, r, (long long)n, (long long)i, h[i],
             s * scale);
    }
  }
  return wrong;
}

static baton_result chain_issue(void *arg) {
  const void *const *p = arg;
  return chain((const chain_bufs *)p[0], *(const int64_t *)p[1]);
}

/* Edges of graph g of dependency type programmatic (-1: unreadable). */
static int programmatic_edges(cudaGraph_t g) {
  size_t m = 0;
  if (cudaGraphGetEdges(g, NULL, NULL, NULL, &m)) return -1;
  cudaGraphNode_t *from = calloc(m + 1, sizeof *from), *to = calloc(m + 1, sizeof *to);
  cudaGraphEdgeData *d = calloc(m + 1, sizeof *d);
  int k = -1;
  if (from && to && d && !cudaGraphGetEdges(g, from, to, d, &m)) {
    k = 0;
    for (size_t i = 0; i < m; i++) k += d[i].type == cudaGraphDependencyTypeProgrammatic;
  }
  free(from);
  free(to);
  free(d);
  return k;
}

/* The chain of n floats captured with every call on a side stream joined
 * by events, replayed twice on fresh inputs; with a process per GPU
 * (`procs`) where direct kernels launch programmatically (the
 * communicator's pdl: compute capability 9.0 and up, BATON_DIRECT_PDL),
 * the graph holds programmatic edges. */
static void chain_side(chain_bufs *B, int64_t n, float *h, int procs) {
  int good = 1;
  for (int r = rank_lo; r < rank_hi && good; r++) {
    good &= cudaSetDevice(dev_of(r)) == cudaSuccess && cudaStreamCreateWithFlags(&side[r], cudaStreamNonBlocking) == 0;
    good &= cudaEventCreateWithFlags(&joins[r][0], cudaEventDisableTiming) == cudaSuccess;
    good &= cudaEventCreateWithFlags(&joins[r][1], cudaEventDisableTiming) == cudaSuccess;
  }
  const int want = procs && comms[rank_lo]->pdl;
  gpu_graphs G = {NULL, NULL};
  const void *arg[2] = {B, &n};
  baton_result e = good ? gpu_graphs_capture(&G, chain_issue, arg) : baton_cuda_error;
  const int k = e ? -1 : programmatic_edges(G.g[rank_lo]);
  ok(!e && (want ? k > 0 : k >= 0), "rank %d: the chain of %lld floats captured with each call on a side stream "
     "joined by events: %s, %d programmatic edges (%s)", rank_lo, (long long)n, baton_result_string(e), k,
     want ? "the direct kernels' own" : "none wanted: one process, or no programmatic launch here");
  for (int rep = 0; rep < 2 && !e; rep++) {
    int64_t wrong = -1;
    if (!fill(B, n, h)) e = baton_cuda_error;
    if (!e) e = gpu_graphs_replay(&G);
    if (!e) wrong = wrong_of(B, n, h, "graph, side streams");
    ok(!e && wrong == 0, "rank %d: the same, replay %d: %s, %lld wrong", rank_lo, rep + 1, baton_result_string(e),
       (long long)wrong);
    if (wrong) break;
  }
  if (G.g) gpu_graphs_free(&G);
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (side[r]) cudaStreamDestroy(side[r]);
    if (joins[r][0]) cudaEventDestroy(joins[r][0]);
    if (joins[r][1]) cudaEventDestroy(joins[r][1]);
    side[r] = NULL;
    joins[r][0] = joins[r][1] = NULL;
  }
}

/* The ranks' in-place AllReduce of n floats at at[rank]. */
typedef struct ar_call { float **at; int64_t n; } ar_call;

/* One in-place AllReduce per rank of this process (an issue for
 * gpu_graphs_capture; arg: an ar_call). */
static baton_result ar_issue(void *arg) {
  const ar_call *a = arg;
  baton_result e = baton_group_start();
  for (int r = rank_lo; r < rank_hi && !e; r++)
    e = baton_allreduce(a->at[r], a->at[r], (size_t)a->n, baton_f32, baton_sum, comms[r], streams[r]);
  baton_result g = baton_group_end();
  return e ? e : g;
}

/* The ranks' in-place AllReduce of n floats at at[] captured (G), or
 * replayed on fresh inputs and checked; 0 wrong elements, -1 when
 * something failed. */
static int64_t ar_graph(gpu_graphs *G, float **at, int64_t n, float *h, int capture) {
  ar_call a = {at, n};
  if (capture) return gpu_graphs_capture(G, ar_issue, &a) ? -1 : 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    for (int64_t i = 0; i < n; i++) h[i] = val(r, i);
    cudaSetDevice(dev_of(r));
    if (cudaMemcpy(at[r], h, (size_t)n * 4, cudaMemcpyHostToDevice)) return -1;
  }
  if (gpu_graphs_replay(G)) return -1;
  int64_t wrong = 0;
  for (int r = rank_lo; r < rank_hi; r++) {
    cudaSetDevice(dev_of(r));
    if (cudaMemcpy(h, at[r], (size_t)n * 4, cudaMemcpyDeviceToHost)) return -1;
    for (int64_t i = 0; i < n; i++) {
      float want = 0;
      for (int q = 0; q < nranks; q++) want += val(q, i);
      wrong += h[i] != want;
    }
  }
  return wrong;
}

/* A process per GPU: a buffer across two cuMem allocations side by side
 * (A) captured, then one inside the second alone (B) captured, its peers
 * reaching it through their mapping of both; the first allocation freed,
 * and an exchange after (a capture on new memory) learns it.  B's graph
 * must still replay right (the peers keep the range while a piece of it
 * lives), and once the second allocation is freed too, the next exchange
 * must unmap the range (fewer peers' allocations mapped). */
static void freed_piece(int64_t n, float *h) {
  const int r = rank_lo;
  size_t size = 0, piece = 0;
  CUmemGenericAllocationHandle hd[2];
  range_fn unmap = (range_fn)rt_cuda_driver_fn("cuMemUnmap", 10020);
  range_fn addr_free = (range_fn)rt_cuda_driver_fn("cuMemAddressFree", 10020);
  release_fn release = (release_fn)rt_cuda_driver_fn("cuMemRelease", 10020);
  cudaSetDevice(dev_of(r));
  char *x = vmm_alloc(dev_of(r), 2 * (size_t)n * 4, 2, &size, hd);
  float *y = NULL, *z = NULL;
  gpu_graphs GA = {0}, GB = {0}, GY = {0}, GZ = {0};
  float *at[64];
  int64_t wa = -1, wb = -1, wb2 = -1;
  int then = 0, mid = 0, now = 0, good = x && unmap && addr_free && release;
  piece = size / 2;
  if (good) {   /* A: n floats across the two allocations' border */
    at[r] = (float *)(x + piece - ((size_t)n * 2 & ~(size_t)15));
    good = !ar_graph(&GA, at, n, h, 1) && (wa = ar_graph(&GA, at, n, h, 0)) == 0;
  }
  if (good) {   /* B: n floats in the second alone */
    at[r] = (float *)(x + piece);
    good = !ar_graph(&GB, at, n, h, 1) && (wb = ar_graph(&GB, at, n, h, 0)) == 0;
  }
  gpu_graphs_free(&GA);
  then = rt_peerbuf_count(comms[r]->pbufs);
  if (good) {   /* the first allocation freed; the next exchange learns it */
    unmap((CUdeviceptr)(uintptr_t)x, piece);
    release(hd[0]);
    good = cudaMalloc((void **)&y, (size_t)n * 4) == cudaSuccess;
    at[r] = y;
    good = good && !ar_graph(&GY, at, n, h, 1);
    mid = rt_peerbuf_count(comms[r]->pbufs);
    at[r] = (float *)(x + piece);
    good = good && (wb2 = ar_graph(&GB, at, n, h, 0)) == 0;
  }
  ok(good && wa == 0 && wb == 0 && wb2 == 0, "rank %d: a graph on the second of two cuMem allocations a peer maps "
     "side by side replays right after the first is freed (%lld, %lld, %lld wrong; %d, %d peers' allocations mapped)",
     r, (long long)wa, (long long)wb, (long long)wb2, then, mid);
  gpu_graphs_free(&GB);
  if (good) {   /* the second freed too: the next exchange unmaps the range */
    unmap((CUdeviceptr)(uintptr_t)x + piece, piece);
    addr_free((CUdeviceptr)(uintptr_t)x, size);
    release(hd[1]);
    x = NULL;
    good = cudaMalloc((void **)&z, (size_t)n * 4) == cudaSuccess;
    at[r] = z;
    good = good && !ar_graph(&GZ, at, n, h, 1);
    now = rt_peerbuf_count(comms[r]->pbufs);
  }
  ok(good && now < mid + (nranks - 1), "rank %d: both freed: the peers' range unmapped at the next exchange (%d "
     "peers' allocations mapped before it, %d after, which mapped %d new)", r, mid, now, nranks - 1);
  gpu_graphs_free(&GY);
  gpu_graphs_free(&GZ);
  if (x) vmm_free(x, size, 2, hd);
  cudaFree(y);
  cudaFree(z);
}

static void chain_checks(const gpu_ranks_opts *o) {
  static const int64_t sizes[] = {2, 4096 + 3, 65536, 262144 + 5, 2097152 + 3, 2097152 + 3, 2097152 + 3};
  static const int pieces[] = {0, 0, 0, 0, 0, 1, CHAIN_PIECES};   /* cuMem allocations a buffer spans (0: cudaMalloc) */
  const unsigned nsizes = sizeof sizes / sizeof *sizes;
  for (unsigned s = 0; s < nsizes; s++) {
    const int64_t n = sizes[s];
    chain_bufs B;
    memset(&B, 0, sizeof B);
    B.vmm = pieces[s];
    float *h = malloc((size_t)n * 4);
    int good = h != NULL;
    for (int r = rank_lo; r < rank_hi && good; r++) {
      cudaSetDevice(dev_of(r));
      if (B.vmm) {
        good &= (B.a[r] = vmm_alloc(dev_of(r), (size_t)n * 4, B.vmm, &B.size[r], B.h[r][0])) != NULL;
        good &= good && (B.b[r] = vmm_alloc(dev_of(r), (size_t)n * 4, B.vmm, &B.size[r], B.h[r][1])) != NULL;
        good &= good && (B.c[r] = vmm_alloc(dev_of(r), (size_t)n * 4, B.vmm, &B.size[r], B.h[r][2])) != NULL;
        if (!good) ok(0, "rank %d: cuMem buffers (%d allocations each) of %lld floats", r, B.vmm, (long long)n);
        continue;
      }
      good &= cudaMalloc((void **)&B.a[r], (size_t)n * 4) == cudaSuccess;
      good &= cudaMalloc((void **)&B.b[r], (size_t)n * 4) == cudaSuccess;
      good &= cudaMalloc((void **)&B.c[r], (size_t)n * 4) == cudaSuccess;
    }
    /* Eagerly, twice (the second on the first's call counts and landings). */
    for (int rep = 0; rep < 2 && good; rep++) {
      good &= fill(&B, n, h);
      baton_result e = good ? chain(&B, n) : baton_cuda_error;
      if (!e) e = sync_all();
      const int64_t wrong = e ? -1 : wrong_of(&B, n, h, "eager");
      ok(!e && wrong == 0, "rank %d: %d dependent AllReduces of %lld floats and a copy, back to back on one stream "
         "(eager, round %d): %s, %lld wrong (%s)", rank_lo, 4, (long long)n, rep + 1, baton_result_string(e),
         (long long)wrong, baton_comm_last_algorithm(comms[rank_lo]));
      good &= !e && wrong == 0;
    }
    /* Captured in a graph, replayed twice on fresh inputs. */
    if (good) {
      gpu_graphs G;
      const void *arg[2] = {&B, &n};
      baton_result e = gpu_graphs_capture(&G, chain_issue, arg);
      if (e) ok(0, "rank %d: chain of %lld floats captured in a CUDA graph: %s", rank_lo, (long long)n,
                baton_result_string(e));
      const char *algo = baton_comm_last_algorithm(comms[rank_lo]);
      if (B.vmm && !e)
        ok(algo && strstr(algo, "direct") && !strstr(algo, "staged"), "rank %d: captured on buffers of %d cuMem "
           "allocation%s, the calls ran a direct program on the ranks' own buffers (%s)", rank_lo, B.vmm,
           B.vmm > 1 ? "s side by side" : "", algo ? algo : "?");
      for (int rep = 0; rep < 2 && !e; rep++) {
        int64_t wrong = -1;
        if (!fill(&B, n, h)) e = baton_cuda_error;
        if (!e) e = gpu_graphs_replay(&G);
        if (!e) wrong = wrong_of(&B, n, h, "graph");
        ok(!e && wrong == 0, "rank %d: the same chain of %lld floats captured in a CUDA graph, replay %d: %s, %lld "
           "wrong", rank_lo, (long long)n, rep + 1, baton_result_string(e), (long long)wrong);
        if (wrong) break;
      }
      gpu_graphs_free(&G);
    }
    if (good && !B.vmm && (s == 1 || s == 4)) chain_side(&B, n, h, o->procs);   /* an LL call's size, and the two-shot's */
    for (int r = rank_lo; r < rank_hi; r++) {
      cudaSetDevice(dev_of(r));
      if (B.vmm) {
        vmm_free(B.a[r], B.size[r], B.vmm, B.h[r][0]);
        vmm_free(B.b[r], B.size[r], B.vmm, B.h[r][1]);
        vmm_free(B.c[r], B.size[r], B.vmm, B.h[r][2]);
        continue;
      }
      cudaFree(B.a[r]);
      cudaFree(B.b[r]);
      cudaFree(B.c[r]);
    }
    free(h);
  }
  if (o->procs) {
    const int64_t n = 2097152 + 3;   /* a size the chains ran: the captures need nothing reserved first */
    float *h = malloc((size_t)n * 4);
    if (h) freed_piece(n, h);
    else ok(0, "rank %d: host memory", rank_lo);
    free(h);
  }
}

int main(int argc, char **argv) {
  gpu_ranks_opts o;
  int done;
  if (gpu_ranks_args(argc, argv, "gpu_chain", 0, &o)) return 2;
  if (nranks > 64) {
    fprintf(stderr, "gpu_chain: at most 64 ranks\n");
    return 2;
  }
  /* The default set: DIR/default where gpu_prep.sh made it, else DIR. */
  char algo[4096];
  snprintf(algo, sizeof algo, "%s/default", o.dir);
  setenv("BATON_ALGO_DIR", access(algo, R_OK) == 0 ? algo : o.dir, 1);
  if (o.procs) return gpu_ranks_procs(&o, chain_checks);
  int rc = gpu_ranks_up(&done);
  if (done) return rc;
  chain_checks(&o);
  return gpu_ranks_end();
}
