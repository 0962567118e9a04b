/* bench_shuffle.cu -- the layout shuffle a framework runs after the
 * AllToAll of pooled embeddings (`baton bench --fused embedding_alltoall`'s
 * baseline): what rank q received, [n][B/n][T*D] (block p from rank p),
 * into [B/n][n*T*D] (per sample, every rank's T*D values in rank order).
 * One CUDA block copies one output row (one rank's T*D values of one
 * sample) at a time, its threads over the row in 16-, 8-, 4- or 1-byte
 * pieces, whichever the row length and both buffers' alignment allow. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "bench_embed.h"

template <typename V>
__global__ void __launch_bounds__(256) shuffle_rows(const V *__restrict__ in, V *__restrict__ out, int nranks,
                                                    long long per_rank, long long rowv) {
  long long rows = (long long)nranks * per_rank;
  for (long long j = blockIdx.x; j < rows; j += gridDim.x) {
    /* output row j = (sample s, source rank p): in row p * per_rank + s */
    long long s = j / nranks, p = j - s * nranks;
    const V *src = in + (p * per_rank + s) * rowv;
    V *dst = out + j * rowv;
    for (long long e = threadIdx.x; e < rowv; e += blockDim.x) dst[e] = src[e];
  }
}

template <typename V>
static cudaError_t launch(const void *in, void *out, int nranks, long long per_rank, long long row_bytes,
                          cudaStream_t st) {
  long long rows = (long long)nranks * per_rank, rowv = row_bytes / (long long)sizeof(V);
  int threads = rowv >= 256 ? 256 : rowv >= 128 ? 128 : rowv >= 64 ? 64 : 32;
  long long blocks = rows < 4096 ? rows : 4096;   /* enough to fill any GPU; the rest by the loop */
  shuffle_rows<V><<<(unsigned)blocks, threads, 0, st>>>((const V *)in, (V *)out, nranks, per_rank, rowv);
  return cudaGetLastError();
}

extern "C" int bench_embed_shuffle(const void *in, void *out, int nranks, int64_t per_rank, int64_t row_bytes,
                                   void *stream) {
  if (nranks < 1 || per_rank < 0 || row_bytes < 0 || (!in && per_rank && row_bytes) || (!out && per_rank && row_bytes))
    return (int)cudaErrorInvalidValue;
  if (!per_rank || !row_bytes) return 0;
  cudaStream_t st = (cudaStream_t)stream;
  uintptr_t a = (uintptr_t)in | (uintptr_t)out | (uintptr_t)row_bytes;
  if (a % 16 == 0) return (int)launch<uint4>(in, out, nranks, per_rank, row_bytes, st);
  if (a % 8 == 0) return (int)launch<uint2>(in, out, nranks, per_rank, row_bytes, st);
  if (a % 4 == 0) return (int)launch<unsigned>(in, out, nranks, per_rank, row_bytes, st);
  return (int)launch<unsigned char>(in, out, nranks, per_rank, row_bytes, st);
}
