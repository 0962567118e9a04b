/* ip_compute.h -- compute opcodes on the host: binding a fused program's
 * operands (symbolic shapes to sizes), the element types they take, the
 * reference arithmetic the CPU executor runs, and the test data and
 * tolerance results are checked with (CPU executor and GPU tests alike). */
#ifndef IP_COMPUTE_H
#define IP_COMPUTE_H

#include <stdint.h>

#include "ip_dtype.h"
#include "ir.h"
#include "ir_geom.h"
#include "rt_diag.h"

/* Dimension bindings of a call: name = value ("K" = 4096). */
#define IP_MAX_DIMS 8
typedef struct ip_dims {
  int n;
  char name[IP_MAX_DIMS][IR_MAX_NAME];
  int64_t value[IP_MAX_DIMS];
} ip_dims;

/* Binds name to value (replacing an earlier binding); -1 when the name is
 * not a dimension name, value < 1, or IP_MAX_DIMS are bound. */
int ip_dims_set(ip_dims *d, const char *name, int64_t value);
/* Parses "NAME=VALUE" into d; -1 when malformed (see ip_dims_set). */
int ip_dims_parse(ip_dims *d, const char *spec);
/* The value bound to name, or -1. */
int64_t ip_dims_get(const ip_dims *d, const char *name);

/* One operand of one rank as a call binds it: a matrix of rows x cols
 * elements, row-major with rows ld elements apart (ld >= cols); a vector
 * of rows elements (cols 1, ld 1). */
typedef struct ip_opnd {
  const void *data;
  int64_t rows, cols, ld;
  int dtype;            /* an index vector's ip_dtype (IP_I64, IP_I32); -1: the call's type */
} ip_opnd;

/* The element type of operand k of p in a call of type t: t, or an index
 * vector's own (i64, i32). */
ip_dtype ip_operand_dtype(const ir_prog *p, int k, ip_dtype t);

/* The largest value a dimension may take, and a matrix's elements at most:
 * a bound on what a call or `baton verify --dim` may ask for. */
#define IP_MAX_DIM (INT64_C(1) << 31)
#define IP_MAX_OPERAND_ELEMS (INT64_C(1) << 40)

/* The shapes of p's operands for a call with geometry g (rank's, its
 * count set): shape[k] = {rows, cols} ({length, 1} for a vector).  A
 * dimension named IR_DIM_INPUT is the input buffer's elements; any other
 * comes from d, else from `dflt` when dflt > 0.  An unbound or oversized
 * dimension is an error naming the operand. */
bt_result ip_operand_shapes(const ir_prog *p, const ir_geom *g, const ip_dims *d, int64_t dflt,
                            int64_t shape[IR_MAX_OPERANDS][2], rt_diag *diag);

/* Whether p has a dimension called `name` that a call binds (an operand's
 * or the interleave's, not IR_DIM_INPUT); list gets every such name,
 * ", "-separated (as much as len holds). */
int ip_dims_names(const ir_prog *p, const char *name, char *list, size_t len);

/* The length of an interleaved output's rows (ir_geom.seg) for p's
 * interleave expression: the product of its dimensions, bound in d or
 * else dflt when dflt > 0; 0 when p has no interleave; -1 with a message
 * when a dimension is unbound or the product is over IP_MAX_DIM. */
int64_t ip_interleave_len(const ir_prog *p, const ip_dims *d, int64_t dflt, rt_diag *diag);

/* A count and dimensions a run of p can take, for tools that run a
 * program with no call to size it (baton compile's checks, baton
 * verify): binds what d leaves unbound that p needs to small values (a
 * gemm's W columns 3 and X columns 5, each dimension of the interleave 3)
 * and returns count rounded up to whole output rows (a multiple of W's
 * columns, or of the interleave's row per chunk).  count itself for any
 * other program. */
int64_t ip_dims_fit(const ir_prog *p, ip_dims *d, int64_t count);

/* Whether every compute step of p takes element type t (gemv, ebag: f32,
 * f16 and bf16; gemm: bf16; other types are refused by the runtime and
 * `baton verify`), and every matrix or vector operand that names its type
 * (dtype="bf16" rather than "call") names t.
 * Programs without compute steps take every type. */
int ip_compute_takes(const ir_prog *p, ip_dtype t);

/* The element types the compute steps of p take, as text ("f32, f16,
 * bf16"; "bf16" with a gemm). */
const char *ip_compute_types(const ir_prog *p);

/* The values of elements [row0, row0 + n) of the input that compute
 * opcode op computes from its operands args (ir_op_args order; a missing
 * optional one has data NULL), in type t: gemv accumulates row e of the
 * matrix times the vector in f32, in column order, and rounds once to t;
 * ebag sums (weighted) the bag's rows in f32 in index order, ebagm
 * divides that by the bag's size; gemm accumulates row e div H of X times
 * column e mod H of W in f32, in order of F.  An index outside the table or an
 * offset outside the indices is skipped / clamped (the GPU reports it).
 * out gets n elements of t. */
void ip_compute_rows(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, void *out);

/* The same in double precision (val), with the sum of the terms'
 * magnitudes of each element (mag): the reference results are compared
 * with (ip_compute_tolerance). */
void ip_compute_exact(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, double *val, double *mag);

/* Test data: element i of operand k of rank, in type t: integers in
 * [-2, 2], spread by a hash of (rank, k, i), so that f32 accumulation is
 * exact for fewer than 2^22 terms and every float type holds them. */
void ip_operand_fill(ip_dtype t, int rank, int k, int64_t n, void *dst);

/* Test data for operand k of p as its compute steps use it, shape[] as
 * ip_operand_shapes made them, in its type (ip_operand_dtype of t): an
 * embedding bag's indices are rows of its table (uniform by a hash), its
 * offsets bags of 0 to 5 indices (never past the indices' end); any other
 * operand as ip_operand_fill. */
void ip_operand_make(const ir_prog *p, int k, ip_dtype t, int rank, const int64_t shape[IR_MAX_OPERANDS][2],
                     void *dst);

/* Unit roundoff of float type t: 2^-24 (f32), 2^-11 (f16), 2^-8 (bf16),
 * 2^-53 (f64). */
double ip_dtype_eps(ip_dtype t);

/* The largest difference allowed between a fused result in type t and the
 * reference, for an element made of nranks partial results of kterms
 * products each whose magnitudes add up to mag: (nranks * eps(t) +
 * kterms * 2^-24) * max(1, mag) -- each partial rounded to t once and
 * summed in some order, each accumulated in f32 in some order. */
double ip_compute_tolerance(ip_dtype t, int nranks, int64_t kterms, double mag);

#endif
