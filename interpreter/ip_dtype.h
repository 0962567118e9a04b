/* ip_dtype.h -- element types and reduction operators, and their host-side primitives. */
#ifndef IP_DTYPE_H
#define IP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ip_dtype {
#define X(id, name, ctype, size, kind) IP_##id,
#include "ip_dtype.def"
#undef X
  IP_DTYPE_COUNT
} ip_dtype;

typedef enum ip_redop {
#define X(id, name) IP_OP_##id,
#include "ip_redop.def"
#undef X
  IP_REDOP_COUNT
} ip_redop;

extern const char *const ip_dtype_name[IP_DTYPE_COUNT];
extern const int ip_dtype_size[IP_DTYPE_COUNT];
extern const char ip_dtype_kind[IP_DTYPE_COUNT];   /* 'F', 'I' or 'U' */
extern const char *const ip_redop_name[IP_REDOP_COUNT];

int ip_dtype_from_name(const char *s);   /* -1 when unknown */
int ip_redop_from_name(const char *s);

/* IEEE half and bfloat16 <-> float, round to nearest even. */
float ip_half_to_float(uint16_t h);
uint16_t ip_float_to_half(float f);
float ip_bf16_to_float(uint16_t h);
uint16_t ip_float_to_bf16(float f);

/* Element i of a typed array as a double, and back (integers wrap). */
double ip_get(ip_dtype t, const void *p, size_t i);
void ip_set(ip_dtype t, void *p, size_t i, double v);

/* dst[i] = a[i] (op) b[i] for i < n; dst may alias a or b.  AVG reduces
 * as SUM.  Integer arithmetic wraps (computed unsigned). */
void ip_reduce(ip_dtype t, ip_redop op, void *dst, const void *a, const void *b, size_t n);

/* Relative tolerance when a float result is compared with a host
 * reference computed in another order (0 for integers: exact). */
double ip_dtype_tolerance(ip_dtype t);

/* p[i] /= divisor for i < n: the final step of AVG (integers truncate). */
void ip_divide(ip_dtype t, void *p, size_t n, int divisor);

#ifdef __cplusplus
}
#endif

#endif
