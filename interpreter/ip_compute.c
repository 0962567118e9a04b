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

ip_dtype ip_operand_dtype(const ir_prog *p, int k, ip_dtype t) {
  if (p->operands[k].kind != IR_OPND_INDEX) return t;
  return !strcmp(p->operands[k].dtype, "i32") ? IP_I32 : IP_I64;
}

/* The value of dimension `name`: bound in d, else dflt (> 0), else -1. */
static int64_t dim_or(const ip_dims *d, const char *name, int64_t dflt) {
  int64_t v = ip_dims_get(d, name);
  return v < 0 && dflt > 0 ? dflt : v;
}

/* A gemm's X has a row per output row: the input's elements over H (W's
 * columns); where the call leaves X's rows unbound, dd gets them. */
static void derive_gemm(const ir_prog *p, const ir_geom *g, ip_dims *dd, int64_t dflt) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (st->op != IR_OP_GEMM) continue;
        const ir_operand *x = &p->operands[st->args[0]], *w = &p->operands[st->args[1]];
        int64_t H = dim_or(dd, w->dim[1], dflt);
        if (H > 0 && ip_dims_get(dd, x->dim[0]) < 0 && g->elems[IR_BUF_INPUT] % H == 0)
          ip_dims_set(dd, x->dim[0], g->elems[IR_BUF_INPUT] / H);
      }
}

/* An embedding bag's offsets have one entry per bag plus one, the bags
 * being the input's elements over the table's columns: where the call
 * leaves the offsets' length unbound, dd gets it. */
static void derive_dims(const ir_prog *p, const ir_geom *g, ip_dims *dd, int64_t dflt) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (st->op != IR_OP_EBAG && st->op != IR_OP_EBAGM) continue;
        const ir_operand *e = &p->operands[st->args[0]], *of = &p->operands[st->args[2]];
        int64_t D = dim_or(dd, e->dim[1], dflt);
        if (D > 0 && ip_dims_get(dd, of->dim[0]) < 0 && g->elems[IR_BUF_INPUT] % D == 0)
          ip_dims_set(dd, of->dim[0], g->elems[IR_BUF_INPUT] / D + 1);
      }
}

/* The shapes an embedding bag needs beyond its operands' dimensions: the
 * input is whole bags (a multiple of the table's columns) and the offsets
 * have one entry per bag plus one. */
static bt_result check_bags(const ir_prog *p, const ir_geom *g, int64_t shape[IR_MAX_OPERANDS][2], rt_diag *diag) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (st->op == IR_OP_GEMM) {   /* the input is X's rows times W's columns */
          int64_t rows = shape[st->args[0]][0], H = shape[st->args[1]][1];
          if (rows * H != g->elems[IR_BUF_INPUT]) {
            rt_diag_add(diag, "%s: gemm: X has %lld rows (%s) and W %lld columns (%s), but the input holds %lld "
                        "elements; it must hold rows x columns (bind those dimensions, or choose the count, to match)",
                        ir_prog_where(p), (long long)rows, p->operands[st->args[0]].dim[0], (long long)H,
                        p->operands[st->args[1]].dim[1], (long long)g->elems[IR_BUF_INPUT]);
            return BT_ERR_INVALID;
          }
          continue;
        }
        if (st->op != IR_OP_EBAG && st->op != IR_OP_EBAGM) continue;
        int64_t D = shape[st->args[0]][1], n = g->elems[IR_BUF_INPUT];
        if (n % D) {
          rt_diag_add(diag, "%s: the input's %lld elements are not whole bags of %lld (the columns of table %s)",
                      ir_prog_where(p), (long long)n, (long long)D, p->operands[st->args[0]].name);
          return BT_ERR_INVALID;
        }
        if (shape[st->args[2]][0] != n / D + 1) {
          rt_diag_add(diag, "%s: offsets %s has %lld entries; the input's %lld bags need %lld (one per bag, plus one)",
                      ir_prog_where(p), p->operands[st->args[2]].name, (long long)shape[st->args[2]][0],
                      (long long)(n / D), (long long)(n / D + 1));
          return BT_ERR_INVALID;
        }
      }
  return BT_OK;
}

bt_result ip_operand_shapes(const ir_prog *p, const ir_geom *g, const ip_dims *d, int64_t dflt,
                            int64_t shape[IR_MAX_OPERANDS][2], rt_diag *diag) {
  bt_result res = BT_OK;
  ip_dims dd = {0};
  if (d) dd = *d;
  derive_dims(p, g, &dd, dflt);
  derive_gemm(p, g, &dd, dflt);
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *o = &p->operands[k];
    int64_t a = dim_value(p, o, o->dim[0], g, &dd, dflt, diag);
    int64_t b = o->kind == IR_OPND_MATRIX ? dim_value(p, o, o->dim[1], g, &dd, dflt, diag) : 1;
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
  return res ? res : check_bags(p, g, shape, diag);
}

/* The next factor of interleave expression "A*B*C" at *s into name (cut
 * to IR_MAX_NAME - 1 bytes), *s advanced past it (NULL after the last);
 * 0 when none is left. */
static int next_factor(const char **s, char name[IR_MAX_NAME]) {
  if (!*s) return 0;
  size_t n = strcspn(*s, "*");
  snprintf(name, IR_MAX_NAME, "%.*s", (int)(n < IR_MAX_NAME ? n : IR_MAX_NAME - 1), *s);
  *s = (*s)[n] ? *s + n + 1 : NULL;
  return 1;
}

/* Appends dimension name d to the ", "-separated list (at: its length, n
 * bytes) unless it is there already or would not fit. */
static void list_add(char *list, size_t n, size_t *at, const char *d) {
  size_t len = strlen(d);
  for (const char *t = list; *t;) {
    size_t k = strcspn(t, ",");
    if (k == len && !strncmp(t, d, k)) return;
    t += k;
    while (*t == ',' || *t == ' ') t++;
  }
  if (*at + len + 3 < n) *at += (size_t)snprintf(list + *at, n - *at, "%s%s", *at ? ", " : "", d);
}

int ip_dims_names(const ir_prog *p, const char *name, char *list, size_t len) {
  int found = 0;
  size_t at = 0;
  char buf[1] = "", one[IR_MAX_NAME];
  if (!len) list = buf, len = 1;
  list[0] = 0;
  for (int k = 0; k < p->noperands; k++)   /* every operand dimension but the input's */
    for (int j = 0; j < 2; j++) {
      const char *d = p->operands[k].dim[j];
      if (!d || !strcmp(d, IR_DIM_INPUT)) continue;
      found |= !strcmp(d, name);
      list_add(list, len, &at, d);
    }
  for (const char *s = p->interleave; next_factor(&s, one);) {   /* then the interleave's factors */
    found |= !strcmp(one, name);
    list_add(list, len, &at, one);
  }
  return found;
}

int64_t ip_interleave_len(const ir_prog *p, const ip_dims *d, int64_t dflt, rt_diag *diag) {
  if (!p->interleave) return 0;
  int64_t len = 1;
  char name[IR_MAX_NAME];
  for (const char *s = p->interleave; next_factor(&s, name);) {
    int64_t v = dim_or(d, name, dflt);
    if (v < 0) {
      rt_diag_add(diag, "%s: the output's interleave %s needs dimension %s, which the call does not bind",
                  ir_prog_where(p), p->interleave, name);
      return -1;
    }
    if (v > IP_MAX_DIM / len) {
      rt_diag_add(diag, "%s: the output's interleave %s is over %lld elements", ir_prog_where(p), p->interleave,
                  (long long)IP_MAX_DIM);
      return -1;
    }
    len *= v;
  }
  return len;
}

static int64_t round_up_to(int64_t v, int64_t m) { return m > 1 ? (v + m - 1) / m * m : v; }

int64_t ip_dims_fit(const ir_prog *p, ip_dims *d, int64_t count) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int k = 0; k < p->gpus[r].tbs[b].nsteps; k++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[k];
        if (st->op != IR_OP_GEMM) continue;
        const char *wcols = p->operands[st->args[1]].dim[1], *xcols = p->operands[st->args[0]].dim[1];
        if (ip_dims_get(d, wcols) < 1) ip_dims_set(d, wcols, 3);
        if (ip_dims_get(d, xcols) < 1) ip_dims_set(d, xcols, 5);
        count = round_up_to(count, ip_dims_get(d, wcols));   /* the output's rows are W's columns */
      }
  if (p->interleave) {
    char name[IR_MAX_NAME];
    for (const char *s = p->interleave; next_factor(&s, name);)
      if (ip_dims_get(d, name) < 1) ip_dims_set(d, name, 3);
    int64_t seg = ip_interleave_len(p, d, 0, NULL);
    int ib, ob;
    ir_geom_blocks(p->coll, p->ngpus, &ib, &ob);
    int per = p->nchunksperloop / (ib > ob ? ib : ob);
    if (seg > 0 && per > 0 && seg <= IP_MAX_DIM / per) count = round_up_to(count, seg * per);   /* whole rows in every chunk */
  }
  return count;
}

static int gemv_type(ip_dtype t) { return t == IP_F32 || t == IP_F16 || t == IP_BF16; }

int ip_compute_takes(const ir_prog *p, ip_dtype t) {
  for (int k = 0; k < p->noperands; k++) {   /* a matrix or vector that names its type takes that one alone */
    const ir_operand *o = &p->operands[k];
    if (o->kind != IR_OPND_INDEX && o->dtype && strcmp(o->dtype, "call") && ip_dtype_from_name(o->dtype) != (int)t)
      return 0;
  }
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        int op = p->gpus[r].tbs[b].steps[s].op;
        if ((ir_op_flags[op] & IR_F_COMP) && !gemv_type(t)) return 0;
        if (op == IR_OP_GEMM && t != IP_BF16) return 0;   /* the tile engine's type */
      }
  return 1;
}

const char *ip_compute_types(const ir_prog *p) {
  if (ip_compute_takes(p, IP_I32)) return "every type";
  if (ip_compute_takes(p, IP_F32)) return ip_compute_takes(p, IP_F16) ? "f32, f16, bf16" : "f32";
  if (ip_compute_takes(p, IP_F16)) return "f16";
  return ip_compute_takes(p, IP_BF16) ? "bf16" : "no type (its operands name different ones)";
}

static float elem(ip_dtype t, const void *p, int64_t i) {
  if (t == IP_F32) return ((const float *)p)[i];
  if (t == IP_F16) return ip_half_to_float(((const uint16_t *)p)[i]);
  return ip_bf16_to_float(((const uint16_t *)p)[i]);
}

/* Integer element i of an index vector. */
static int64_t ielem(const ip_opnd *o, int64_t i) {
  return o->dtype == IP_I32 ? ((const int32_t *)o->data)[i] : ((const int64_t *)o->data)[i];
}

/* Element row of an embedding bag (ebag, ebagm) in double, with the sum
 * of its terms' magnitudes when mag is not NULL; as f32 accumulation
 * (rounded once per term's add) when f32acc. */
static double bag_elem(int op, ip_dtype t, const ip_opnd *args, int64_t row, double *mag, int f32acc) {
  const ip_opnd *e = &args[0], *ix = &args[1], *of = &args[2], *w = args[3].data ? &args[3] : NULL;
  int64_t D = e->cols, bag = row / D, col = row % D, L = ix->rows;
  int64_t lo = ielem(of, bag), hi = ielem(of, bag + 1);
  lo = lo < 0 ? 0 : lo > L ? L : lo;
  hi = hi < lo ? lo : hi > L ? L : hi;
  double v = 0, m = 0;
  float acc = 0;
  for (int64_t k = lo; k < hi; k++) {
    int64_t at = ielem(ix, k);
    if (at < 0 || at >= e->rows) continue;
    double term = (double)elem(t, e->data, at * e->ld + col);
    if (w) term *= (double)elem(t, w->data, k);
    v += term;
    m += fabs(term);
    acc += (float)term;
  }
  if (op == IR_OP_EBAGM && hi > lo) {
    v /= (double)(hi - lo);
    m /= (double)(hi - lo);
    acc /= (float)(hi - lo);
  }
  if (mag) *mag = m;
  return f32acc ? (double)acc : v;
}

/* Element e of Y = X W: row e div H of X times column e mod H of W, in
 * double with the terms' magnitudes (mag not NULL), or accumulated in f32
 * in column order (f32acc). */
static double gemm_elem(ip_dtype t, const ip_opnd *args, int64_t e, double *mag, int f32acc) {
  const ip_opnd *x = &args[0], *w = &args[1];
  int64_t H = w->cols, i = e / H, j = e % H;
  double v = 0, m = 0;
  float acc = 0;
  for (int64_t k = 0; k < x->cols; k++) {
    double term = (double)elem(t, x->data, i * x->ld + k) * (double)elem(t, w->data, k * w->ld + j);
    v += term;
    m += fabs(term);
    acc += (float)term;
  }
  if (mag) *mag = m;
  return f32acc ? (double)acc : v;
}

void ip_compute_rows(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, void *out) {
  if (op == IR_OP_GEMM) {
    for (int64_t i = 0; i < n; i++) ip_set(t, out, (size_t)i, gemm_elem(t, args, row0 + i, NULL, 1));
    return;
  }
  if (op == IR_OP_EBAG || op == IR_OP_EBAGM) {
    for (int64_t i = 0; i < n; i++) ip_set(t, out, (size_t)i, bag_elem(op, t, args, row0 + i, NULL, 1));
    return;
  }
  const ip_opnd *a = &args[0], *x = &args[1];   /* gemv, gemvs */
  for (int64_t i = 0; i < n; i++) {
    int64_t row = row0 + i;
    float acc = 0;
    for (int64_t k = 0; k < a->cols; k++) acc += elem(t, a->data, row * a->ld + k) * elem(t, x->data, k);
    ip_set(t, out, (size_t)i, acc);
  }
}

void ip_compute_exact(int op, ip_dtype t, const ip_opnd *args, int64_t row0, int64_t n, double *val, double *mag) {
  if (op == IR_OP_GEMM) {
    for (int64_t i = 0; i < n; i++) val[i] = gemm_elem(t, args, row0 + i, &mag[i], 0);
    return;
  }
  if (op == IR_OP_EBAG || op == IR_OP_EBAGM) {
    for (int64_t i = 0; i < n; i++) val[i] = bag_elem(op, t, args, row0 + i, &mag[i], 0);
    return;
  }
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

/* A 64-bit hash of (rank, k, i). */
static uint64_t mix(int rank, int k, int64_t i) {
  uint64_t h = ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank * 0xBF58476D1CE4E5B9ull + (uint64_t)k + 1);
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

static void iset(ip_dtype t, void *dst, int64_t i, int64_t v) {
  if (t == IP_I32) ((int32_t *)dst)[i] = (int32_t)v;
  else ((int64_t *)dst)[i] = v;
}

void ip_operand_make(const ir_prog *p, int k, ip_dtype t, int rank, const int64_t shape[IR_MAX_OPERANDS][2],
                     void *dst) {
  ip_dtype dt = ip_operand_dtype(p, k, t);
  int64_t n = shape[k][0] * shape[k][1];
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++) {
        const ir_step *st = &p->gpus[r].tbs[b].steps[s];
        if (st->op != IR_OP_EBAG && st->op != IR_OP_EBAGM) continue;
        if (st->args[1] == k) {   /* indices: rows of the table */
          int64_t rows = shape[st->args[0]][0];
          for (int64_t i = 0; i < n; i++) iset(dt, dst, i, (int64_t)(mix(rank, k, i) % (uint64_t)rows));
          return;
        }
        if (st->args[2] == k) {   /* offsets: bags of 0 to 5 indices, clamped to the indices' end */
          int64_t L = shape[st->args[1]][0], at = 0;
          for (int64_t i = 0; i < n; i++) {
            iset(dt, dst, i, at);
            at += (int64_t)(mix(rank, k, i) % 6);
            if (at > L) at = L;
          }
          return;
        }
      }
  ip_operand_fill(dt, rank, k, n, dst);
}

void ip_operand_fill(ip_dtype t, int rank, int k, int64_t n, void *dst) {
  for (int64_t i = 0; i < n; i++) ip_set(t, dst, (size_t)i, (double)(int)(mix(rank, k, i) % 5) - 2);
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
