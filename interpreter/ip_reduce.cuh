// ip_reduce.cuh -- device reduction primitives: the only code the GPU
// interpreter specialises per element type and operator.  Everything else
// (which chunks, which peers, in which order) comes from the IR at run time.
//
// Semantics match the host primitives in ip_dtype.c bit for bit: integers
// wrap (combined as unsigned), f16 and bf16 are widened to float, combined
// and rounded back once to nearest even, avg reduces as sum.
#ifndef IP_REDUCE_CUH
#define IP_REDUCE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "ip_dtype.h"

template <typename T> struct ip_unsigned { typedef T type; };
template <> struct ip_unsigned<int8_t> { typedef uint8_t type; };
template <> struct ip_unsigned<int32_t> { typedef uint32_t type; };
template <> struct ip_unsigned<int64_t> { typedef uint64_t type; };

// Integers and native floats.
template <int OP, typename T>
__device__ __forceinline__ T ip_apply(T a, T b) {
  typedef typename ip_unsigned<T>::type U;
  if (OP == IP_OP_PROD) return (T)((U)a * (U)b);
  if (OP == IP_OP_MAX) return a > b ? a : b;
  if (OP == IP_OP_MIN) return a < b ? a : b;
  return (T)((U)a + (U)b);
}

template <int OP>
__device__ __forceinline__ float ip_applyf(float a, float b) {
  if (OP == IP_OP_PROD) return a * b;
  if (OP == IP_OP_MAX) return fmaxf(a, b);
  if (OP == IP_OP_MIN) return fminf(a, b);
  return a + b;
}
template <int OP> __device__ __forceinline__ float ip_apply(float a, float b) { return ip_applyf<OP>(a, b); }
template <int OP> __device__ __forceinline__ double ip_apply(double a, double b) {
  if (OP == IP_OP_PROD) return a * b;
  if (OP == IP_OP_MAX) return fmax(a, b);
  if (OP == IP_OP_MIN) return fmin(a, b);
  return a + b;
}
template <int OP> __device__ __forceinline__ __half ip_apply(__half a, __half b) {
  return __float2half_rn(ip_applyf<OP>(__half2float(a), __half2float(b)));
}
template <int OP> __device__ __forceinline__ __nv_bfloat16 ip_apply(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(ip_applyf<OP>(__bfloat162float(a), __bfloat162float(b)));
}

// Storage type of each ip_dtype on the device.
template <int DT> struct ip_dev;
template <> struct ip_dev<IP_F32> { typedef float type; };
template <> struct ip_dev<IP_F64> { typedef double type; };
template <> struct ip_dev<IP_F16> { typedef __half type; };
template <> struct ip_dev<IP_BF16> { typedef __nv_bfloat16 type; };
template <> struct ip_dev<IP_I32> { typedef int32_t type; };
template <> struct ip_dev<IP_U32> { typedef uint32_t type; };
template <> struct ip_dev<IP_I64> { typedef int64_t type; };
template <> struct ip_dev<IP_U64> { typedef uint64_t type; };
template <> struct ip_dev<IP_I8> { typedef int8_t type; };
template <> struct ip_dev<IP_U8> { typedef uint8_t type; };

// dst[i] = a[i] (op) b[i], grid-stride.  dst may alias a or b.
template <int DT, int OP>
__global__ void ip_reduce_kernel(void *dst, const void *a, const void *b, size_t n) {
  typedef typename ip_dev<DT>::type T;
  T *d = (T *)dst;
  const T *x = (const T *)a, *y = (const T *)b;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    d[i] = ip_apply<OP == IP_OP_AVG ? IP_OP_SUM : OP>(x[i], y[i]);
}

#endif
