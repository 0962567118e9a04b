/* rt_capture.c -- what a captured launch depends on: the edges a CUDA
 * graph's capture gives a programmatic launch (docs/RUNTIME.md, "Direct
 * programs"), shared by the direct kernels (rt_dcall.c) and the gemm
 * kernel (rt_call.c). */
#include "rt_comm.h"

#include <string.h>

#include "rt_log.h"

/* rt_comm.h.  A captured programmatic launch depends on the kernels
 * before it in its stream's order with programmatic edges only where the
 * capture made them so (one stream, kernel after kernel): a library that
 * runs its collectives on a stream of its own and joins it to the
 * caller's by events (PyTorch's process group) leaves plain edges, and
 * each replay then pays the whole launch.  Where every dependency of stream s is a
 * kernel node, its edges become programmatic: the kernel waits for those
 * kernels to end (pdl_wait) before it reads or signals anything, as it
 * does after a kernel launched before it on its own stream.  Anything
 * else (a copy, an event, no capture, a CUDA error) leaves them as they
 * are.  Called for communicators of a process per GPU only, whose
 * captures join streams of its one GPU (a graph joined across GPUs could
 * hand it another GPU's kernel, which no edge of this kind may follow). */
#define CAPTURE_DEPS_MAX 8
void rt_capture_programmatic(cudaStream_t s) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t *deps = NULL;
  const cudaGraphEdgeData *edges = NULL;
  size_t n = 0;
  if (cudaStreamGetCaptureInfo(s, &cs, NULL, NULL, &deps, &edges, &n) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (cs != cudaStreamCaptureStatusActive || n == 0 || n > CAPTURE_DEPS_MAX) return;
  cudaGraphNode_t d[CAPTURE_DEPS_MAX];
  cudaGraphEdgeData e[CAPTURE_DEPS_MAX];
  int plain = 0;
  for (size_t i = 0; i < n; i++) {
    enum cudaGraphNodeType t;
    if (cudaGraphNodeGetType(deps[i], &t) != cudaSuccess || t != cudaGraphNodeTypeKernel) {
      cudaGetLastError();
      return;
    }
    d[i] = deps[i];
    memset(&e[i], 0, sizeof e[i]);
    if (edges) e[i] = edges[i];
    if (e[i].type != cudaGraphDependencyTypeProgrammatic) {
      plain = 1;
      e[i].from_port = cudaGraphKernelNodePortProgrammatic;
      e[i].type = cudaGraphDependencyTypeProgrammatic;
    }
  }
  if (!plain) return;
  if (cudaStreamUpdateCaptureDependencies(s, d, e, n, cudaStreamSetCaptureDependencies) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  LOG_TRACE(RT_SUB_RUNTIME, "a captured call: %zu kernel dependencies made programmatic", n);
}
