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

// Bit casts between a type and the low bits of a word, in registers.
template <typename T> __device__ __forceinline__ T ip_from_bits(uint64_t v) { return (T)v; }
template <> __device__ __forceinline__ float ip_from_bits<float>(uint64_t v) { return __uint_as_float((uint32_t)v); }
template <> __device__ __forceinline__ double ip_from_bits<double>(uint64_t v) {
  return __longlong_as_double((long long)v);
}
template <> __device__ __forceinline__ __half ip_from_bits<__half>(uint64_t v) {
  return __ushort_as_half((unsigned short)v);
}
template <> __device__ __forceinline__ __nv_bfloat16 ip_from_bits<__nv_bfloat16>(uint64_t v) {
  return __ushort_as_bfloat16((unsigned short)v);
}
template <typename T> __device__ __forceinline__ uint64_t ip_to_bits(T v) {
  return (uint64_t)(typename ip_unsigned<T>::type)v;
}
template <> __device__ __forceinline__ uint64_t ip_to_bits<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ uint64_t ip_to_bits<double>(double v) {
  return (uint64_t)__double_as_longlong(v);
}
template <> __device__ __forceinline__ uint64_t ip_to_bits<__half>(__half v) { return __half_as_ushort(v); }
template <> __device__ __forceinline__ uint64_t ip_to_bits<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}

// x (op) y element-wise over a word W (32 or 64 bits) of packed T.
template <int OP, typename T, typename W>
__device__ __forceinline__ W ip_apply_word(W x, W y) {
  constexpr int B = 8 * sizeof(T), N = sizeof(W) / sizeof(T);
  if constexpr (N == 1) {
    return (W)ip_to_bits<T>(ip_apply<OP>(ip_from_bits<T>(x), ip_from_bits<T>(y)));
  } else {
    constexpr W M = ((W)1 << B) - 1;
    W r = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
      T z = ip_apply<OP>(ip_from_bits<T>((x >> (i * B)) & M), ip_from_bits<T>((y >> (i * B)) & M));
      r |= ((W)ip_to_bits<T>(z) & M) << (i * B);
    }
    return r;
  }
}

// a (op) b element-wise over 16 bytes of packed elements of type DT,
// taken apart in registers (no pointer casts, which would put the unit in
// local memory).
template <int DT, int OP>
__device__ __forceinline__ uint4 ip_apply_u4(const uint4 &a, const uint4 &b) {
  typedef typename ip_dev<DT>::type T;
  if constexpr (sizeof(T) == 8) {
    uint64_t x0 = (uint64_t)a.y << 32 | a.x, x1 = (uint64_t)a.w << 32 | a.z;
    uint64_t y0 = (uint64_t)b.y << 32 | b.x, y1 = (uint64_t)b.w << 32 | b.z;
    uint64_t r0 = ip_apply_word<OP, T>(x0, y0), r1 = ip_apply_word<OP, T>(x1, y1);
    return make_uint4((uint32_t)r0, (uint32_t)(r0 >> 32), (uint32_t)r1, (uint32_t)(r1 >> 32));
  } else {
    return make_uint4(ip_apply_word<OP, T>(a.x, b.x), ip_apply_word<OP, T>(a.y, b.y),
                      ip_apply_word<OP, T>(a.z, b.z), ip_apply_word<OP, T>(a.w, b.w));
  }
}

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
