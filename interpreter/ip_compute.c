/* ip_compute.c -- compute opcodes on the host: operand shapes, types,
 * reference arithmetic, test data and tolerance (see ip_compute.h). */
#include "ip_compute.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dim_name_ok(const char *s, size_t n) {
  if (n == 0 || n >= IR_MAX_NAME || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
  return 1;
}

int ip_dims_set(ip_dims *d, const char *name, int64_t value) {
  size_t n = strlen(name);
  if (!dim_name_ok(name, n) || value < 1 || value > IP_MAX_DIM) return -1;
  for (int i = 0; i < d->n; i++)
    if (!strcmp(d->name[i], name)) { d->value[i] = value; return 0; }
  if (d->n >= IP_MAX_DIMS) return -1;
  memcpy(d->name[d->n], name, n + 1);
  d->value[d->n++] = value;
  return 0;
}

int ip_dims_parse(ip_dims *d, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || (size_t)(eq - spec) >= IR_MAX_NAME) return -1;
  char name[IR_MAX_NAME];
  memcpy(name, spec, eq - spec);
  name[eq - spec] = 0;
  char *end;
  long long v = strtoll(eq + 1, &end, 10);
  if (end == eq + 1 || *end) return -1;
  return ip_dims_set(d, name, v);
}

int64_t ip_dims_get(const ip_dims *d, const char *name) {
  for (int i = 0; d && i < d->n; i++)
    if (!strcmp(d->name[i], name)) return d->value[i];
  return -1;
}

/* The value of dimension `dim` of operand o: the input's elements, a
 * binding, or dflt; -1 with a message when there is none. */
static int64_t dim_value(const ir_prog *p, const ir_operand *o, const char *dim, const ir_geom *g, const ip_dims *d,
                         int64_t dflt, rt_diag *diag) {
  if (!strcmp(dim, IR_DIM_INPUT)) return g->elems[IR_BUF_INPUT];
  int64_t v = ip_dims_get(d, dim);
  if (v < 0 && dflt > 0) v = dflt;
  if (v < 0)
    rt_diag_add(diag, "%s: operand %s: dimension %s is not bound (the call must say how large %s is)",
                ir_prog_where(p), o->name, dim, dim);
  return v;
}

bt_result ip_operand_shapes(const ir_prog *p, const ir_geom *g, const ip_dims *d, int64_t dflt,
                            int64_t shape[IR_MAX_OPERANDS][2], rt_diag *diag) {
  bt_result res = BT_OK;
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *o = &p->operands[k];
    int64_t a = dim_value(p, o, o->dim[0], g, d, dflt, diag);
    int64_t b = o->kind == IR_OPND_MATRIX ? dim_value(p, o, o->dim[1], g, d, dflt, diag) : 1;
    if (a < 0 || b < 0) { res = BT_ERR_INVALID; continue; }
    if (a > IP_MAX_DIM || b > IP_MAX_DIM || a * b > IP_MAX_OPERAND_ELEMS) {
      rt_diag_add(diag, "%s: operand %s of %lld x %lld elements is larger than baton takes (%lld per dimension, "
                  "%lld in all)", ir_prog_where(p), o->name, (long long)a, (long long)b, (long long)IP_MAX_DIM,
                  (long long)IP_MAX_OPERAND_ELEMS);
      res = BT_ERR_INVALID;
      continue;
    }
    shape[k][0] = a;
    shape[k][1] = b;
  }
  return res;
}

static int gemv_type(ip_dtype t) { return t == IP_F32 || t == IP_F16 || t == IP_BF16; }

int ip_compute_takes(const ir_prog *p, ip_dtype t) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        int op = p->gpus[r].tbs[b].steps[s].op;
        if ((op == IR_OP_GEMV || op == IR_OP_GEMVS) && !gemv_type(t)) return 0;
      }
  return 1;
}

const char *ip_compute_types(int op) {
  return op == IR_OP_GEMV || op == IR_OP_GEMVS ? "f32, f16, bf16" : "every type";
}

static float elem(ip_dtype t, const void *p, int64_t i) {
  if (t == IP_F32) return ((const float *)p)[i];
  if (t == IP_F16) return ip_half_to_float(((const uint16_t *)p)[i]);
  return ip_bf16_to_float(((const uint16_t *)p)[i]);
}

void ip_compute_rows(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, void *out) {
  (void)op;   /* gemv is the only compute opcode so far */
  const ip_opnd *a = &args[0], *x = &args[1];
  for (int64_t i = 0; i < n; i++) {
    int64_t row = row0 + i;
    float acc = 0;
    for (int64_t k = 0; k < a->cols; k++) acc += elem(t, a->data, row * a->ld + k) * elem(t, x->data, k);
    ip_set(t, out, (size_t)i, acc);
  }
}

void ip_compute_exact(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, double *val, double *mag) {
  (void)op;
  const ip_opnd *a = &args[0], *x = &args[1];
  for (int64_t i = 0; i < n; i++) {
    int64_t row = row0 + i;
    double v = 0, m = 0;
    for (int64_t k = 0; k < a->cols; k++) {
      double term = (double)elem(t, a->data, row * a->ld + k) * (double)elem(t, x->data, k);
      v += term;
      m += fabs(term);
    }
    val[i] = v;
    mag[i] = m;
  }
}

void ip_operand_fill(ip_dtype t, int rank, int k, int64_t n, void *dst) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank * 0xBF58476D1CE4E5B9ull + (uint64_t)k + 1);
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    ip_set(t, dst, (size_t)i, (double)(int)(h % 5) - 2);
  }
}

double ip_dtype_eps(ip_dtype t) {
  switch (t) {
  case IP_F16: return ldexp(1, -11);
  case IP_BF16: return ldexp(1, -8);
  case IP_F64: return ldexp(1, -53);
  default: return ldexp(1, -24);
  }
}

double ip_compute_tolerance(ip_dtype t, int nranks, int64_t kterms, double mag) {
  return (nranks * ip_dtype_eps(t) + (double)kterms * ldexp(1, -24)) * (mag > 1 ? mag : 1);
}
