/* ip_post.c -- fills test data and checks results element by element. */
#include "ip_post.h"
#include "ip_compute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input value of element e of rank r.  Sums of up to 32 ranks stay exact
 * in f16/bf16 and in range for i8/u8; products have at most a few factors
 * of 2 and signs, so they are exact too. */
static double pattern(const ip_cpu_opts *o, int r, int64_t e) {
  int unsig = ip_dtype_kind[o->dtype] == 'U';
  if (o->op == IP_OP_PROD) {
    if ((r + e) % 11 == 0) return 2;
    if (!unsig && (r * 3 + e) % 7 == 0) return -1;
    return 1;
  }
  int64_t v = (r * 131 + e * 17 + 7) % 9;
  return unsig ? (double)v : (double)(v - 4);
}

static const double SENTINEL = 99;

/* Sources records (ip_cpu_opts.sources): word 0 is a tag (2 bits), a rank
 * (14 bits) and an element offset in the input (48 bits, IR_GEOM_MAX_ELEMS);
 * words 1 .. src_words the set of the window's ranks it holds.  All-zero
 * bytes are EMPTY: what calloc'ed scratch and a message's padding hold. */
enum { SRC_EMPTY, SRC_SENTINEL, SRC_DATA, SRC_BAD };
/* Why a record is SRC_BAD (its offset field; for BAD_TWICE also the
 * window bit + 1 of the rank, from bit 4, when its rank field is MULTI). */
enum { BAD_MIXED = 1, BAD_TWICE, BAD_UNWRITTEN, BAD_INITIAL };
#define SRC_MULTI 0x3fffu   /* the rank field of a record of several ranks */
#define SRC_OFF_MASK ((UINT64_C(1) << 48) - 1)

static uint64_t src_head(unsigned tag, uint64_t rank, uint64_t off) {
  return (uint64_t)tag << 62 | (rank & SRC_MULTI) << 48 | (off & SRC_OFF_MASK);
}
static unsigned src_tag(uint64_t h) { return (unsigned)(h >> 62); }
static unsigned src_rank(uint64_t h) { return (unsigned)(h >> 48) & SRC_MULTI; }
static uint64_t src_off(uint64_t h) { return h & SRC_OFF_MASK; }

int post_esize(const post_bufs *b, const ip_cpu_opts *o) {
  return o->sources ? 8 * (1 + b->src_words) : ip_dtype_size[o->dtype];
}

int post_src_words(const ir_prog *p, int want, int *passes) {
  int reduces = 0;
  for (int r = 0; r < p->ngpus && !reduces; r++)
    for (int t = 0; t < p->gpus[r].ntbs && !reduces; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++)
        if (p->gpus[r].tbs[t].steps[s].op < IR_OP_COUNT && (ir_op_flags[p->gpus[r].tbs[t].steps[s].op] & IR_F_RED)) {
          reduces = 1;
          break;
        }
  int words = !reduces ? 1 : want >= 1 && want <= IP_CPU_SRC_WORDS ? want : (p->ngpus + 63) / 64;
  if (words > IP_CPU_SRC_WORDS) words = IP_CPU_SRC_WORDS;
  if (words < 1) words = 1;
  *passes = reduces ? (p->ngpus + 64 * words - 1) / (64 * words) : 1;
  if (*passes < 1) *passes = 1;
  return words;
}

/* The combination of records x and y into d (which may be x or y). */
static void src_combine(int words, uint64_t *d, const uint64_t *x, const uint64_t *y) {
  unsigned tx = src_tag(x[0]), ty = src_tag(y[0]);
  uint64_t head = 0;
  if (tx == SRC_EMPTY && ty == SRC_EMPTY) head = 0;                /* padding with padding */
  else if (tx == SRC_BAD) head = x[0];
  else if (ty == SRC_BAD) head = y[0];
  else if (tx != SRC_DATA || ty != SRC_DATA)
    head = src_head(SRC_BAD, SRC_MULTI, tx == SRC_EMPTY || ty == SRC_EMPTY ? BAD_UNWRITTEN : BAD_INITIAL);
  else if (src_off(x[0]) != src_off(y[0])) head = src_head(SRC_BAD, SRC_MULTI, BAD_MIXED);
  else if (src_rank(x[0]) != SRC_MULTI && src_rank(x[0]) == src_rank(y[0]))
    head = src_head(SRC_BAD, src_rank(x[0]), BAD_TWICE);
  else {
    for (int j = 1; j <= words; j++)
      if (x[j] & y[j]) {
        head = src_head(SRC_BAD, SRC_MULTI, BAD_TWICE | (uint64_t)((j - 1) * 64 + __builtin_ctzll(x[j] & y[j]) + 1) << 4);
        break;
      }
    if (!head) {
      d[0] = src_head(SRC_DATA, SRC_MULTI, src_off(x[0]));
      for (int j = 1; j <= words; j++) d[j] = x[j] | y[j];
      return;
    }
  }
  d[0] = head;
  for (int j = 1; j <= words; j++) d[j] = 0;
}

void post_src_reduce(int words, void *dst, const void *a, const void *b, size_t n) {
  size_t w = 1 + (size_t)words;
  for (size_t i = 0; i < n; i++)
    src_combine(words, (uint64_t *)dst + i * w, (const uint64_t *)a + i * w, (const uint64_t *)b + i * w);
}

/* Rank r's input: the pattern, or each element's own record. */
static void fill(const post_bufs *b, const ip_cpu_opts *o, int r, unsigned char *p, int64_t n) {
  if (!o->sources) {
    for (int64_t e = 0; e < n; e++) ip_set(o->dtype, p, e, pattern(o, r, e));
    return;
  }
  size_t w = 1 + (size_t)b->src_words;
  int bit = r - b->src_base;
  uint64_t *q = (uint64_t *)p;
  memset(q, 0, (size_t)n * w * 8);
  for (int64_t e = 0; e < n; e++) {
    q[e * w] = src_head(SRC_DATA, (uint64_t)r, (uint64_t)e);
    if (bit >= 0 && bit < 64 * b->src_words) q[e * w + 1 + bit / 64] = UINT64_C(1) << (bit % 64);
  }
}

/* What an output holds before the run. */
static void fill_sentinel(const post_bufs *b, const ip_cpu_opts *o, unsigned char *p, int64_t n) {
  if (!o->sources) {
    for (int64_t e = 0; e < n; e++) ip_set(o->dtype, p, e, SENTINEL);
    return;
  }
  size_t w = 1 + (size_t)b->src_words;
  memset(p, 0, (size_t)n * w * 8);
  for (int64_t e = 0; e < n; e++) ((uint64_t *)p)[e * w] = src_head(SRC_SENTINEL, 0, 0);
}

static unsigned char **ptrs(int n) { return calloc(n, sizeof(unsigned char *)); }

/* n elements of es bytes (and one more, so that n = 0 allocates); NULL when
 * n is outside [0, IR_GEOM_MAX_ELEMS] (ir_geom_init keeps every buffer
 * within it: a size that is not is refused, never wrapped) or out of memory. */
static void *alloc_elems(int64_t n, size_t es) {
  if (n < 0 || n > IR_GEOM_MAX_ELEMS || es > 8 * (1 + IP_CPU_SRC_WORDS)) return NULL;
  return malloc(((size_t)n + 1) * es);
}

/* An aliased i/o span in NCCL's in-place layout: the sentinel everywhere
 * but the input, which sits at in_at.  Sets where i and o start in it. */
static unsigned char *new_span(const post_bufs *b, const ip_cpu_opts *o, const ir_geom *g, const unsigned char *input,
                               unsigned char **in, unsigned char **out) {
  int es = post_esize(b, o);
  unsigned char *s = alloc_elems(g->span, es);
  if (!s) return NULL;
  fill_sentinel(b, o, s, g->span);
  memcpy(s + g->in_at * es, input, g->elems[IR_BUF_INPUT] * es);
  *in = s + g->in_at * es;
  *out = s + g->out_at * es;
  return s;
}

/* For each of the n input chunks of rank r, the first compute step (in
 * thread block and step order) that computes it, or NULL: one pass over the
 * steps, not one per chunk.  NULL when out of memory. */
static const ir_step **computes(const ir_prog *p, int r, int n) {
  const ir_gpu *g = &p->gpus[r];
  const ir_step **by = calloc((size_t)n + 1, sizeof *by);
  if (!by) return NULL;
  for (int t = 0; t < g->ntbs; t++)
    for (int s = 0; s < g->tbs[t].nsteps; s++) {
      const ir_step *st = &g->tbs[t].steps[s];
      if (!(ir_op_flags[st->op] & IR_F_COMP)) continue;
      int64_t lo = st->srcoff < 0 ? 0 : st->srcoff, hi = (int64_t)st->srcoff + st->cnt;
      for (int64_t c = lo; c < hi && c < n; c++)
        if (!by[c]) by[c] = st;
    }
  return by;
}

/* A fused program's operands (test data) and reference input on every
 * rank: ref_in[r] gets the exact value of each computed element rounded
 * to the type, ref_mag[r] its terms' magnitudes. */
static bt_result fused_setup(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g, rt_diag *diag) {
  int n = p->ngpus;
  b->opnd = calloc(n, sizeof *b->opnd);
  b->ref_mag = calloc(n, sizeof *b->ref_mag);
  if (!b->opnd || !b->ref_mag) return BT_ERR_NOMEM;
  for (int r = 0; r < n; r++) {
    int64_t shape[IR_MAX_OPERANDS][2];
    CHECK(ip_operand_shapes(p, &g[r], o->dims, IP_CPU_DIM, shape, diag));
    for (int k = 0; k < p->noperands; k++) {
      int64_t elems = shape[k][0] * shape[k][1];   /* <= IP_MAX_OPERAND_ELEMS (ip_operand_shapes) */
      ip_dtype dt = ip_operand_dtype(p, k, o->dtype);
      void *data = alloc_elems(elems, ip_dtype_size[dt]);
      if (!data) return BT_ERR_NOMEM;
      ip_operand_make(p, k, o->dtype, r, shape, data);
      b->opnd[r][k] = (ip_opnd){data, shape[k][0], shape[k][1], shape[k][1],
                                 p->operands[k].kind == IR_OPND_INDEX ? (int)dt : -1};
    }
    int64_t ni = g[r].elems[IR_BUF_INPUT];
    double *val = alloc_elems(ni, sizeof *val);
    b->ref_mag[r] = alloc_elems(ni, sizeof(double));
    const ir_step **by = computes(p, r, g[r].chunks[IR_BUF_INPUT]);
    if (!val || !b->ref_mag[r] || !by) { free(val); free(by); return BT_ERR_NOMEM; }
    memset(b->ref_mag[r], 0, ((size_t)ni + 1) * sizeof(double));
    for (int64_t e = 0; e < ni; e++) val[e] = NAN;
    for (int c = 0; c < g[r].chunks[IR_BUF_INPUT]; c++) {
      const ir_step *st = by[c];
      if (!st) continue;
      ip_opnd args[IR_MAX_ARGS] = {{0}};
      for (int k = 0; k < IR_MAX_ARGS && st->args[k] >= 0; k++) args[k] = b->opnd[r][st->args[k]];
      int64_t at = ir_geom_off(&g[r], IR_BUF_INPUT, c), len = ir_geom_len(&g[r], IR_BUF_INPUT, c);
      ip_compute_exact(st->op, o->dtype, args, at, len, val + at, b->ref_mag[r] + at);
    }
    for (int64_t e = 0; e < ni; e++) ip_set(o->dtype, b->ref_in[r], (size_t)e, val[e]);
    free(val);
    free(by);
  }
  return BT_OK;
}

bt_result post_setup(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, rt_diag *diag) {
  int n = p->ngpus, es = post_esize(b, o);
  int aliased = ir_prog_aliased(p, inplace);
  b->inplace_call = inplace;
  b->fused = ir_prog_fused(p);
  b->user_in = ptrs(n); b->user_out = ptrs(n); b->ref_in = ptrs(n); b->span = ptrs(n);
  b->prog_in = ptrs(n); b->prog_out = ptrs(n);
  if (!b->user_in || !b->user_out || !b->ref_in || !b->span || !b->prog_in || !b->prog_out)
    return BT_ERR_NOMEM;
  for (int r = 0; r < n; r++) {
    b->ref_in[r] = alloc_elems(g[r].elems[IR_BUF_INPUT], es);
    if (!b->ref_in[r]) return BT_ERR_NOMEM;
    fill(b, o, r, b->ref_in[r], g[r].elems[IR_BUF_INPUT]);
  }
  if (b->fused) CHECK(fused_setup(b, p, o, g, diag));
  /* What the program finds in its input: the data, or for a fused
   * program NaN (it computes the input before it reads it). */
  unsigned char *poison = NULL;
  if (b->fused) {
    int64_t most = 0;
    for (int r = 0; r < n; r++) if (g[r].elems[IR_BUF_INPUT] > most) most = g[r].elems[IR_BUF_INPUT];
    if (!(poison = alloc_elems(most, es))) return BT_ERR_NOMEM;
    for (int64_t e = 0; e < most; e++) ip_set(o->dtype, poison, (size_t)e, NAN);
  }
  bt_result res = BT_OK;
  for (int r = 0; r < n && !res; r++) {
    const ir_geom *gr = &g[r];
    int64_t ni = gr->elems[IR_BUF_INPUT], no = gr->elems[IR_BUF_OUTPUT];
    const unsigned char *start = poison ? poison : b->ref_in[r];
    if (inplace) {
      /* One allocation; the input sits where NCCL's in-place call puts it
       * and the rest of the output starts as a sentinel. */
      b->user_out[r] = new_span(b, o, gr, start, &b->prog_in[r], &b->prog_out[r]);
      if (!b->user_out[r]) res = BT_ERR_NOMEM;
      continue;
    }
    b->user_in[r] = alloc_elems(ni, es);
    b->user_out[r] = alloc_elems(no, es);
    if (!b->user_in[r] || !b->user_out[r]) { res = BT_ERR_NOMEM; continue; }
    memcpy(b->user_in[r], start, ni * es);
    fill_sentinel(b, o, b->user_out[r], no);
    if (aliased) {
      /* An in-place program called out of place runs on a copy of the
       * input in a span of its own; post_finish copies the output out. */
      b->span[r] = new_span(b, o, gr, start, &b->prog_in[r], &b->prog_out[r]);
      if (!b->span[r]) res = BT_ERR_NOMEM;
    } else {
      b->prog_in[r] = b->user_in[r];
      b->prog_out[r] = b->user_out[r];
    }
  }
  free(poison);
  return res;
}

void post_finish(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g) {
  int es = post_esize(b, o);
  int reduces = ir_coll_reduces(p->coll);
  for (int r = 0; r < p->ngpus; r++) {
    const ir_geom *gr = &g[r];
    if (b->span[r]) memcpy(b->user_out[r], b->prog_out[r], gr->elems[IR_BUF_OUTPUT] * es);
    unsigned char *out = b->span[r] || !b->inplace_call ? b->user_out[r] : b->prog_out[r];
    if (!o->sources && o->op == IP_OP_AVG && reduces) ip_divide(o->dtype, out, gr->elems[IR_BUF_OUTPUT], p->ngpus);
  }
}

void post_free(post_bufs *b, const ir_prog *p) {
  unsigned char **all[] = {b->user_in, b->user_out, b->ref_in, b->span};
  for (int i = 0; i < 4; i++) {
    if (!all[i]) continue;
    for (int r = 0; r < p->ngpus; r++) free(all[i][r]);
    free(all[i]);
  }
  free(b->prog_in);
  free(b->prog_out);
  for (int r = 0; b->opnd && r < p->ngpus; r++)
    for (int k = 0; k < IR_MAX_OPERANDS; k++) free((void *)b->opnd[r][k].data);
  free(b->opnd);
  for (int r = 0; b->ref_mag && r < p->ngpus; r++) free(b->ref_mag[r]);
  free(b->ref_mag);
  memset(b, 0, sizeof *b);
}

/* Where output chunk c of rank r must come from: *src_rank (-1 = reduced
 * over all ranks) and *src_chunk.  Returns 0 when nothing is required. */
static int source_of(const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g, int r, int c,
                     int inplace, int *src_rank, int *src_chunk, int *rule, rt_diag *diag) {
  int k = g->k, n = p->ngpus;
  *rule = -1;
  if (p->coll != IR_COLL_CUSTOM) return ir_coll_source(p->coll, p->root, n, k, r, c, src_rank, src_chunk);
  int got = ir_expect_eval_rule(o->expect, r, c, n, k, src_rank, src_chunk, rule, diag);
  if (got == 0 && inplace) { *src_rank = r; *src_chunk = c; return 1; }  /* left alone */
  return got;
}

/* For a custom collective's mismatch: ", by rule N: TEXT" (long rules
 * cut with "..."), the rule that chose the expected source; "" else. */
static void rule_said(const ip_cpu_opts *o, int rule, char *by, size_t n) {
  if (rule < 0) return;
  int len;
  const char *t = ir_expect_rule_text(o->expect, rule, &len);
  snprintf(by, n, ", by rule %d: %.*s%s", rule + 1, len > 100 ? 100 : len, t, len > 100 ? "..." : "");
}

static int same(ip_dtype t, double want, double got) {
  if (ip_dtype_kind[t] != 'F') return want == got;
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  return fabs(want - got) <= ip_dtype_tolerance(t) * fmax(1.0, fabs(want));
}

/* What record h (rank set m) is, in words, for a message: the input
 * element it is (chunk and element from geometry g), the reduction it is,
 * or why it is wrong. */
static void src_describe(const post_bufs *b, const ir_prog *p, const ir_geom *g, const uint64_t *h, char *buf,
                         size_t size) {
  static const char *const why[] = {"", "a reduction of elements of different input chunks or places",
                                    "a reduction that counts rank %d twice", "a reduction with a value no step wrote",
                                    "a reduction with the output's initial contents"};
  unsigned tag = src_tag(h[0]), rank = src_rank(h[0]);
  uint64_t off = src_off(h[0]);
  if (tag == SRC_EMPTY) { snprintf(buf, size, "nothing (no step wrote it)"); return; }
  if (tag == SRC_SENTINEL) { snprintf(buf, size, "the output's initial contents (no step wrote it)"); return; }
  if (tag == SRC_BAD) {
    unsigned reason = (unsigned)(off & 15);
    int twice = rank != SRC_MULTI ? (int)rank : (int)(off >> 4) - 1 + b->src_base;
    snprintf(buf, size, reason < 5 ? why[reason] : "a wrong value", twice);
    return;
  }
  int64_t blk = g->count > 0 ? (int64_t)off / g->count : 0, in = g->count > 0 ? (int64_t)off % g->count : 0;
  int64_t cap = g->cap > 0 ? g->cap : 1;
  long long chunk = blk * g->k + in / cap, elem = in % cap;
  if (rank != SRC_MULTI) {
    snprintf(buf, size, "element %lld of input chunk %lld of rank %u", elem, chunk, rank);
    return;
  }
  int have = 0, first_missing = -1, hi = p->ngpus - b->src_base < 64 * b->src_words ? p->ngpus - b->src_base
                                                                                    : 64 * b->src_words;
  for (int q = 0; q < hi; q++) {
    int in_set = (int)(h[1 + q / 64] >> (q % 64) & 1);
    have += in_set;
    if (!in_set && first_missing < 0) first_missing = q + b->src_base;
  }
  if (first_missing < 0)
    snprintf(buf, size, "element %lld of the reduction of input chunk %lld over ranks %d..%d", elem, chunk, b->src_base,
             b->src_base + hi - 1);
  else
    snprintf(buf, size, "element %lld of a reduction of input chunk %lld over %d of ranks %d..%d, without rank %d", elem,
             chunk, have, b->src_base, b->src_base + hi - 1, first_missing);
}

/* The reduction over every rank of the whole input (numeric: divided
 * for avg), when every rank's input has the same size; NULL otherwise or
 * out of memory (post_check then reduces chunk by chunk). */
static unsigned char *reduce_all(const post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g) {
  int n = p->ngpus, es = post_esize(b, o);
  int64_t ni = g[0].elems[IR_BUF_INPUT];
  for (int q = 1; q < n; q++)
    if (g[q].elems[IR_BUF_INPUT] != ni) return NULL;
  unsigned char *red = alloc_elems(ni, es);
  if (!red) return NULL;
  memcpy(red, b->ref_in[0], (size_t)ni * es);
  for (int q = 1; q < n; q++) {
    if (o->sources) post_src_reduce(b->src_words, red, red, b->ref_in[q], (size_t)ni);
    else ip_reduce(o->dtype, o->op, red, red, b->ref_in[q], (size_t)ni);
  }
  if (!o->sources && o->op == IP_OP_AVG) ip_divide(o->dtype, red, (size_t)ni, n);
  return red;
}

bt_result post_check(post_bufs *b, const ir_prog *p, const ip_cpu_opts *o, const ir_geom *g,
                     int inplace, int64_t *checked, rt_diag *diag) {
  int n = p->ngpus, es = post_esize(b, o);
  int bad = 0;
  const char *file = ir_prog_where(p);
  int64_t cap = g[0].cap;
  unsigned char *want = alloc_elems(cap, es), *red = NULL;
  int red_tried = 0;
  if (!want) return BT_ERR_NOMEM;
  *checked = 0;
  bt_result res = BT_OK;
  for (int r = 0; r < n; r++) {
    if (b->check_one && r != b->check_rank) continue;
    const ir_geom *gr = &g[r];
    unsigned char *out = b->inplace_call ? b->prog_out[r] : b->user_out[r];
    for (int c = 0; c < gr->chunks[IR_BUF_OUTPUT]; c++) {
      int sr, sc, rule;
      int got = source_of(p, o, gr, r, c, inplace, &sr, &sc, &rule, diag);
      if (got < 0) { res = BT_ERR_INVALID; goto out; }
      if (!got) continue;
      int exists = sr >= -1 && sr < n && sc >= 0;   /* a reduction's chunk on every rank */
      for (int q = sr < 0 ? 0 : sr; exists && q < (sr < 0 ? n : sr + 1); q++) exists = sc < g[q].chunks[IR_BUF_INPUT];
      if (!exists) {
        rt_diag_add(diag, "%s: expected result of rank %d output chunk %d is input chunk %d of rank %d, which does not exist",
                    file, r, c, sc, sr);
        res = BT_ERR_INVALID;
        goto out;
      }
      int64_t len = ir_geom_len(gr, IR_BUF_OUTPUT, c);
      int64_t at = ir_geom_off(gr, IR_BUF_INPUT, sc);
      /* An input chunk at another place of its block may hold fewer valid
       * elements than the output chunk: the rest reads as zero. */
      int64_t lin = ir_geom_len(gr, IR_BUF_INPUT, sc);
      if (lin > len) lin = len;
      /* A sum over some ranks only (i[* if COND]): which ones. */
      int partial = 0, members = n;
      for (int q = 0; sr < 0 && rule >= 0 && q < n; q++) {
        int in = ir_expect_sums(o->expect, rule, q, r, c, n, gr->k);
        if (in < 0) {
          rt_diag_add(diag, "%s: expect: rule %d overflows or divides by zero choosing the ranks it sums (rank %d "
                      "chunk %d, q = %d)", file, rule + 1, r, c, q);
          res = BT_ERR_INVALID;
          goto out;
        }
        if (!in) partial = 1, members--;
      }
      if (partial && !members) {
        rt_diag_add(diag, "%s: expect: rule %d sums no rank for rank %d output chunk %d", file, rule + 1, r, c);
        res = BT_ERR_INVALID;
        goto out;
      }
      if (sr < 0 && !partial && !red_tried) { red = reduce_all(b, p, o, g); red_tried = 1; }
      if (sr >= 0) {
        memcpy(want, b->ref_in[sr] + at * es, lin * es);
      } else if (red && !partial) {
        memcpy(want, red + at * es, lin * es);
      } else {
        int first = 1;
        for (int q = 0; q < n; q++) {
          if (partial && ir_expect_sums(o->expect, rule, q, r, c, n, gr->k) != 1) continue;
          if (first) memcpy(want, b->ref_in[q] + at * es, lin * es);
          else if (o->sources) post_src_reduce(b->src_words, want, want, b->ref_in[q] + at * es, lin);
          else ip_reduce(o->dtype, o->op, want, want, b->ref_in[q] + at * es, lin);
          first = 0;
        }
        if (!o->sources && o->op == IP_OP_AVG) ip_divide(o->dtype, want, lin, members);
      }
      memset(want + lin * es, 0, (len - lin) * es);   /* zero in every type, EMPTY for records */
      *checked += len;
      for (int64_t e = 0; e < len; e++) {
        const unsigned char *at_out = out + ir_geom_at(gr, IR_BUF_OUTPUT, c, e) * es;
        if (o->sources) {
          if (!memcmp(want + e * es, at_out, es)) continue;
          char is[160], should[160];
          src_describe(b, p, gr, (const uint64_t *)at_out, is, sizeof is);
          src_describe(b, p, gr, (const uint64_t *)(want + e * es), should, sizeof should);
          char by[160] = "";
          rule_said(o, rule, by, sizeof by);
          rt_diag_add(diag, "%s: rank %d output chunk %d element %lld holds %s, expected %s%s", file, r, c, (long long)e,
                      is, should, by);
          bad++;
          break;
        }
        double w = ip_get(o->dtype, want, e), v = ip_get(o->dtype, at_out, 0);
        if (b->fused) {   /* computed partials: within the tolerance of their magnitudes */
          double mag = 0;
          for (int q = sr < 0 ? 0 : sr; q < (sr < 0 ? n : sr + 1) && e < lin; q++) mag += b->ref_mag[q][at + e];
          if (fabs(v - w) <= ip_compute_tolerance(o->dtype, n, 0, mag)) continue;
        } else if (same(o->dtype, w, v)) {
          continue;
        }
        char from[64], by[160] = "";
        if (sr < 0)
          snprintf(from, sizeof from, "the %s of input chunk %d over %s", ip_redop_name[o->op], sc,
                   partial ? "the ranks the rule sums" : "all ranks");
        else snprintf(from, sizeof from, "input chunk %d of rank %d", sc, sr);
        rule_said(o, rule, by, sizeof by);
        rt_diag_add(diag, "%s: rank %d output chunk %d element %lld is %g, expected %g (%s%s)",
                    file, r, c, (long long)e, v, w, from, by);
        bad++;
        break;
      }
    }
    /* An out-of-place run must leave the caller's input as it was (a
     * fused program's input is its own). */
    if (!inplace && !b->fused) {
      for (int c = 0; c < gr->chunks[IR_BUF_INPUT]; c++) {
        int64_t off = ir_geom_off(gr, IR_BUF_INPUT, c), len = ir_geom_len(gr, IR_BUF_INPUT, c);
        if (memcmp(b->user_in[r] + off * es, b->ref_in[r] + off * es, len * es)) {
          rt_diag_add(diag, "%s: rank %d input chunk %d was overwritten by an out-of-place run", file, r, c);
          bad++;
        }
      }
    }
  }
  if (bad) res = BT_ERR_MISMATCH;
out:
  free(want);
  free(red);
  return res;
}
