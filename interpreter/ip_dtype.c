/* ip_dtype.c -- host reduction primitives per type and op. */
#include "ip_dtype.h"

#include <math.h>
#include <string.h>

const char *const ip_dtype_name[IP_DTYPE_COUNT] = {
#define X(id, name, ctype, size, kind) name,
#include "ip_dtype.def"
#undef X
};
const int ip_dtype_size[IP_DTYPE_COUNT] = {
#define X(id, name, ctype, size, kind) size,
#include "ip_dtype.def"
#undef X
};
const char ip_dtype_kind[IP_DTYPE_COUNT] = {
#define X(id, name, ctype, size, kind) #kind[0],
#include "ip_dtype.def"
#undef X
};
const char *const ip_redop_name[IP_REDOP_COUNT] = {
#define X(id, name) name,
#include "ip_redop.def"
#undef X
};

int ip_dtype_from_name(const char *s) {
  for (int i = 0; i < IP_DTYPE_COUNT; i++)
    if (!strcmp(s, ip_dtype_name[i])) return i;
  return -1;
}
int ip_redop_from_name(const char *s) {
  for (int i = 0; i < IP_REDOP_COUNT; i++)
    if (!strcmp(s, ip_redop_name[i])) return i;
  return -1;
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float ip_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000 | (man << 13));
  if (exp == 0) {
    if (!man) return u2f(sign);
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ip_float_to_half(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t au = u & 0x7fffffff;
  if (au > 0x7f800000) return (uint16_t)(sign | 0x7e00);        /* NaN */
  if (au >= 0x477ff000) return (uint16_t)(sign | 0x7c00);       /* overflow to inf */
  if (au < 0x38800000) {                                         /* subnormal or zero */
    float a = u2f(au);
    uint32_t m = (uint32_t)lrintf(a * 16777216.0f);             /* units of 2^-24, RNE */
    return (uint16_t)(sign | m);
  }
  uint32_t exp = ((au >> 23) - 112) << 10, man = au & 0x7fffff;
  uint32_t h = exp | (man >> 13), rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float ip_bf16_to_float(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t ip_float_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

double ip_get(ip_dtype t, const void *p, size_t i) {
  if (t == IP_F16) return ip_half_to_float(((const uint16_t *)p)[i]);
  if (t == IP_BF16) return ip_bf16_to_float(((const uint16_t *)p)[i]);
  switch (t) {
#define X(id, name, ctype, size, kind) case IP_##id: return (double)((const ctype *)p)[i];
#include "ip_dtype.def"
#undef X
  default: return 0;
  }
}

void ip_set(ip_dtype t, void *p, size_t i, double v) {
  switch (t) {
  case IP_F32: ((float *)p)[i] = (float)v; break;
  case IP_F64: ((double *)p)[i] = v; break;
  case IP_F16: ((uint16_t *)p)[i] = ip_float_to_half((float)v); break;
  case IP_BF16: ((uint16_t *)p)[i] = ip_float_to_bf16((float)v); break;
  case IP_I32: ((int32_t *)p)[i] = (int32_t)(int64_t)v; break;
  case IP_U32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
  case IP_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  case IP_U64: ((uint64_t *)p)[i] = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v; break;
  case IP_I8: ((int8_t *)p)[i] = (int8_t)(int64_t)v; break;
  case IP_U8: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
  default: break;
  }
}

/* One loop per (type, op).  Signed integers are combined as unsigned so
 * that overflow wraps instead of being undefined. */
#define LOOP(T, U, EXPR)                                                   \
  do {                                                                     \
    T *d_ = dst; const T *a_ = a, *b_ = b;                                 \
    for (size_t i = 0; i < n; i++) { T x = a_[i], y = b_[i]; (void)sizeof(U); d_[i] = (EXPR); } \
  } while (0)
#define INT_OPS(T, U)                                                      \
  switch (op) {                                                            \
  case IP_OP_PROD: LOOP(T, U, (T)((U)x * (U)y)); break;                    \
  case IP_OP_MAX: LOOP(T, U, x > y ? x : y); break;                        \
  case IP_OP_MIN: LOOP(T, U, x < y ? x : y); break;                        \
  default: LOOP(T, U, (T)((U)x + (U)y)); break;                            \
  }
#define FLT_OPS(T)                                                         \
  switch (op) {                                                            \
  case IP_OP_PROD: LOOP(T, T, x * y); break;                               \
  case IP_OP_MAX: LOOP(T, T, fmax(x, y)); break;                           \
  case IP_OP_MIN: LOOP(T, T, fmin(x, y)); break;                           \
  default: LOOP(T, T, x + y); break;                                       \
  }

static float apply(ip_redop op, float x, float y) {
  switch (op) {
  case IP_OP_PROD: return x * y;
  case IP_OP_MAX: return fmaxf(x, y);
  case IP_OP_MIN: return fminf(x, y);
  default: return x + y;
  }
}

void ip_reduce(ip_dtype t, ip_redop op, void *dst, const void *a, const void *b, size_t n) {
  switch (t) {
  case IP_F32: FLT_OPS(float); break;
  case IP_F64: FLT_OPS(double); break;
  case IP_I32: INT_OPS(int32_t, uint32_t); break;
  case IP_U32: INT_OPS(uint32_t, uint32_t); break;
  case IP_I64: INT_OPS(int64_t, uint64_t); break;
  case IP_U64: INT_OPS(uint64_t, uint64_t); break;
  case IP_I8: INT_OPS(int8_t, uint8_t); break;
  case IP_U8: INT_OPS(uint8_t, uint8_t); break;
  case IP_F16: case IP_BF16: {
    /* Widen to float, combine, round back once: what the GPU does too. */
    uint16_t *d = dst; const uint16_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++) {
      float fx = t == IP_F16 ? ip_half_to_float(x[i]) : ip_bf16_to_float(x[i]);
      float fy = t == IP_F16 ? ip_half_to_float(y[i]) : ip_bf16_to_float(y[i]);
      float r = apply(op, fx, fy);
      d[i] = t == IP_F16 ? ip_float_to_half(r) : ip_float_to_bf16(r);
    }
    break;
  }
  default: break;
  }
}

double ip_dtype_tolerance(ip_dtype t) {
  switch (t) {
  case IP_F16: return 1e-2;
  case IP_BF16: return 2e-2;
  case IP_F32: return 1e-5;
  case IP_F64: return 1e-12;
  default: return 0;
  }
}

void ip_divide(ip_dtype t, void *p, size_t n, int divisor) {
  /* Integers exactly, in their own type, truncated toward zero (a
   * quotient through double would round sums past 2^53); floats through
   * double, as the GPU does. */
#define DIV_EACH(ctype) for (size_t i = 0; i < n; i++) ((ctype *)p)[i] /= divisor
  switch (t) {
  case IP_I8: DIV_EACH(int8_t); return;
  case IP_I32: DIV_EACH(int32_t); return;
  case IP_I64: DIV_EACH(int64_t); return;
  case IP_U8: DIV_EACH(uint8_t); return;
  case IP_U32: DIV_EACH(uint32_t); return;
  case IP_U64: DIV_EACH(uint64_t); return;
  default: break;
  }
#undef DIV_EACH
  for (size_t i = 0; i < n; i++) ip_set(t, p, i, ip_get(t, p, i) / divisor);
}

