/* gpu_runtime.h -- what gpu_runtime.c's checks share with those in files
 * of their own (gpu_rooted.c, gpu_procs.c): the ranks this process drives, their
 * communicators, streams and device buffers. */
#ifndef GPU_RUNTIME_H
#define GPU_RUNTIME_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "baton.h"
#include "ir.h"

#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

typedef struct dbuf { char *p; size_t cap; } dbuf;

extern int nranks;
extern int lo, hi;               /* the ranks this process drives */
extern baton_comm **comms;
extern cudaStream_t *streams;
extern dbuf *din, *dout;

/* The GPU of rank r. */
int dev_of(int r);

/* Makes b (rank r's) hold at least bytes; 0, or -1 when cudaMalloc fails. */
int reserve(dbuf *b, int r, size_t bytes);

/* Input element i of rank r in the rooted runs. */
float rooted_in(int r, int64_t i);

/* One rooted call on every rank this process drives (gpu_rooted.c): by
 * algorithm entry ai (a program or a relabelled copy rooted at its root),
 * or with ai < 0 the entry point's own choice from root, count elements a
 * block, in place as NCCL lays it out or not; adds the wrong elements
 * (those of a buffer that must stay untouched to *untouched as well) to
 * *wrong; h is host memory for the largest buffer.  The first error. */
baton_result rooted_run(int ai, ir_coll coll, int root, int64_t count, int inplace, float *h, int64_t *wrong,
                        int64_t *untouched);

/* One rank of a process per GPU (lo), gpu_procs.c: an allreduce of n
 * floats (in place when inplace) on new buffers from cudaMalloc, or from
 * cudaMallocManaged (managed: no handle exports them), called eagerly
 * first where `first`, captured into a CUDA graph, then replayed 3 times
 * with the output cleared in between.  1 when every replay is right;
 * *algo says what the capture ran. */
int graph_case(int64_t n, int inplace, int managed, int first, const char **algo);

/* The same rank: one eager AllReduce (root < 0) or Broadcast from `root`
 * of n floats on such new buffers, checked: 1 when right; the program that
 * ran into *algo. */
int eager_case(int64_t n, int inplace, int managed, int root, const char **algo);

/* The same rank: an eager AllReduce of n + 1024 * rank floats, each rank
 * a count of its own (a call the ranks do not agree on): its result. */
baton_result eager_differs(int64_t n);

/* The same rank: an eager in-place AllReduce of n floats (enough to
 * exchange its buffers) at the start of a new allocation of `big` bytes,
 * which is then freed; then a graph_case of 2097155 floats out of place
 * on new buffers with no eager call first (one of that count must have
 * run on the communicator), whose capture is the next exchange.  1 when both ran right; the GPU's free memory
 * lost across it all (a peer's mapping can hold what a rank frees) into
 * *lost_mib, the peers' allocations mapped after the AllReduce and at
 * the end into *maps_then and *maps_now, what the capture ran into *algo. */
int freed_case(int64_t n, size_t big, double *lost_mib, int *maps_then, int *maps_now, const char **algo);

#endif
