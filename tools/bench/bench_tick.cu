/* bench_tick.cu -- the kernel `baton bench --between` queues after every
 * call of either library: one block of 32 threads adding to a counter of
 * the GPU's, as a small elementwise kernel of a model sits between two
 * collectives; the next call then follows another kernel than its own
 * library's last one. */
#include <cuda_runtime.h>

#include "bench_run.h"

__device__ unsigned long long bench_ticks;

__global__ void bench_tick_kernel(void) {
  if (threadIdx.x == 0) atomicAdd(&bench_ticks, 1ull);
}

extern "C" cudaError_t bench_tick(cudaStream_t stream) {
  return cudaLaunchKernel((const void *)bench_tick_kernel, dim3(1), dim3(32), nullptr, 0, stream);
}
