/* cc_layout.c -- pieces, instances and channels of a traced program: which
 * IR chunks each traced chunk becomes, and the runs an operation makes. */
#include "cc_layout.h"
#include "ir_expect.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int gcd(int a, int b) { while (b) { int r = a % b; a = b; b = r; } return a; }

/* The most channels a compiled program may have (a fixed limit). */
#define CC_MAX_CHANNELS 64

/* Reports that lay needs more than CC_MAX_CHANNELS channels, at the script
 * line that asked for the last one: the first operation with the highest
 * ch= of the code outside fragments or of the fragment that sets the
 * count, or that fragment's parallelize() when its operations name no
 * channel; the message says how the count comes about. */
static void too_many_channels(lower *w, const cc_layout *lay) {
  const cc_trace *t = w->t;
  int f = -1;   /* the fragment that sets C, or -1: the code outside fragments */
  for (int i = 0; i < t->nfrags; i++)
    if (lay->Bc + t->frags[i].n * lay->K[i] == lay->C && lay->C > lay->Bc) { f = i; break; }
  int want = f < 0 ? lay->C - 1 : lay->K[f] - 1, line = 0, ch = -1;
  for (int k = 0; k < t->nops && !line; k++) {
    const cc_op *o = &t->ops[k];
    if (o->frag == f + 1 && o->ch == want && want > 0) { line = o->line; ch = o->ch; }
  }
  if (!line) line = f >= 0 ? t->frags[f].line : t->decl_line;
  char asked[64] = "", how[160] = "", inst[112] = "";
  if (ch > 0) snprintf(asked, sizeof asked, "ch=%d: ", ch);
  if (f >= 0)
    snprintf(how, sizeof how, "%s%d outside parallelize + %d x %d for parallelize(%d) at %s:%d", lay->I > 1 ? "per instance " : "",
             lay->Bc, t->frags[f].n, lay->K[f], t->frags[f].n, t->script, t->frags[f].line);
  if (lay->I > 1)
    snprintf(inst, sizeof inst, "%s%d per instance x %d instances set at %s:%d", f >= 0 ? "; " : "", lay->C, lay->I,
             t->script, t->decl_line);
  cc_err(w, line, "%sthe program needs %d channels%s%s%s%s, more than the %d a program may have (a fixed limit: "
         "use fewer channels%s)", asked, lay->C * lay->I, *how || *inst ? " (" : "", how, inst, *how || *inst ? ")" : "",
         CC_MAX_CHANNELS, lay->I > 1 || f >= 0 ? ", instances or parallelize pieces" : "");
}

/* Appends s[0..n) to out (at *at, cap bytes) with the variables c and k,
 * as whole words, in traced units: (c/M), (k/M) (M 0: as it is).  0 when
 * it does not fit. */
static int put_traced(char *out, size_t cap, size_t *at, const char *s, size_t n, int M) {
  for (size_t i = 0; i < n;) {
    size_t w = 0;
    while (i + w < n && (isalnum((unsigned char)s[i + w]) || s[i + w] == '_')) w++;
    char buf[32];
    const char *piece = s + i;
    size_t len = w ? w : 1;
    if (M && w == 1 && (s[i] == 'c' || s[i] == 'k')) {
      snprintf(buf, sizeof buf, "(%c/%d)", s[i], M);
      piece = buf;
      len = strlen(buf);
    }
    if (*at + len >= cap) return 0;
    memcpy(out + *at, piece, len);
    *at += len;
    i += w ? w : 1;
  }
  out[*at] = 0;
  return 1;
}

char *cc_layout_expect(const cc_layout *lay, const char *expect) {
  const int M = lay->P * lay->I;
  size_t cap = strlen(expect) * 4 + 64;
  char *out = cc_malloc(cap);
  if (!out) return NULL;
  if (lay->blocked || M == 1) {   /* the traced chunks are the IR's, or keep their meaning */
    memcpy(out, expect, strlen(expect) + 1);
    return out;
  }
  size_t at = 0;
  out[0] = 0;
  for (const char *r = expect; *r;) {   /* rule by rule: o[r][c]=i[R][X] [if COND] */
    const char *end = strchr(r, ';');
    if (!end) end = r + strlen(r);
    const char *i0 = strstr(r, "i["), *i1 = i0 && i0 < end ? strchr(i0 + 2, ']') : NULL;
    const char *x0 = i1 ? strchr(i1, '[') : NULL, *x1 = x0 ? strchr(x0 + 1, ']') : NULL;
    char tail[48];
    snprintf(tail, sizeof tail, ")*%d+c%%%d", M, M);
    /* the head as written; the rank (or the subset's condition); the chunk, widened; the condition */
    int okp = i1 && x0 && x1 && x1 < end && put_traced(out, cap, &at, r, (size_t)(i0 + 2 - r), 0) &&
              put_traced(out, cap, &at, i0 + 2, (size_t)(x0 + 1 - (i0 + 2)), M) && at + 1 < cap;
    if (okp) {
      out[at++] = '(';
      okp = put_traced(out, cap, &at, x0 + 1, (size_t)(x1 - (x0 + 1)), M) &&
            put_traced(out, cap, &at, tail, strlen(tail), 0) && put_traced(out, cap, &at, x1, (size_t)(end - x1), M);
    }
    if (!okp) {   /* not the shape the parser accepted: leave the text (the checks will say) */
      memcpy(out, expect, strlen(expect) + 1);
      return out;
    }
    if (*end == ';') {
      if (at + 2 >= cap) { memcpy(out, expect, strlen(expect) + 1); return out; }
      out[at++] = ';';
      out[at] = 0;
      end++;
    }
    r = end;
  }
  return out;
}

int cc_layout_chunk(const cc_trace *t, const cc_layout *lay, int space, int rank, int idx, int x, int j) {
  int P = lay->P, I = lay->I;
  if (!lay->blocked) return (idx * P + x) * I + j;
  int B = space < CC_SPACE_FIRST_SCRATCH ? t->k : t->size[space][rank];
  int q = idx / B, m = idx % B;
  return (q * I + j) * B * P + (lay->xmajor ? x * B + m : m * P + x);
}

int cc_runs_start(cc_runs *it, const cc_trace *t, const cc_layout *lay, const cc_op *o, int j) {
  int ch = (o->ch < 0 ? 0 : o->ch) + j * lay->C, lo = 0, hi = lay->P;
  if (o->frag) {
    int n = t->frags[o->frag - 1].n;
    ch += lay->Bc + o->piece * lay->K[o->frag - 1];
    lo = o->piece * (lay->P / n);
    hi = lo + lay->P / n;
  }
  *it = (cc_runs){t, lay, o, j, lo, hi, o->kind == CC_COMPUTE || (!o->src_pat.run && !o->dst_pat.run), 0, (int64_t)o->count * (hi - lo)};
  return ch;
}

/* The source and destination IR chunks of pair q of the walk: chunk by
 * chunk (through the operation's patterns), each one's pieces in turn, or
 * piece by piece with xmajor. */
static void pair(const cc_runs *it, int64_t q, int *s, int *d) {
  const cc_op *o = it->o;
  int np = it->hi - it->lo, c, x;
  if (it->lay->blocked && it->lay->xmajor) { x = it->lo + (int)(q / o->count); c = (int)(q % o->count); }
  else { c = (int)(q / np); x = it->lo + (int)(q % np); }
  *s = cc_layout_chunk(it->t, it->lay, o->src_space, o->src_rank, cc_pat_at(o->src_idx, o->src_pat, c), x, it->j);
  *d = cc_layout_chunk(it->t, it->lay, o->dst_space, o->dst_rank, cc_pat_at(o->dst_idx, o->dst_pat, c), x, it->j);
}

/* Whether chunk e, at position len of a piece starting at off whose
 * pattern so far is *p (run 0: consecutive so far), keeps the piece one
 * pattern; *p becomes the pattern with e.  The first chunk off the first
 * run fixes the run and the stride, which must not make runs overlap;
 * with `plain` (compute steps, and operations the script gave no pattern,
 * which keep the steps they had before patterns) the piece stays
 * consecutive. */
static int fits(int off, cc_pat *p, int len, int e, int plain) {
  if (!p->run) {
    if (e == off + len) return 1;
    if (plain) return 0;
    int64_t st = (int64_t)e - off;
    if ((st < 0 ? -st : st) < len) return 0;
    *p = (cc_pat){len, (int)st};
    return 1;
  }
  return e == cc_pat_at(off, *p, len);
}

int cc_runs_next(cc_runs *it, int *si, cc_pat *sp, int *di, cc_pat *dp, int *n) {
  if (it->q >= it->all) return 0;
  pair(it, it->q, si, di);
  *sp = *dp = (cc_pat){0, 0};
  int len = 1, s, d;
  for (; it->q + len < it->all; len++) {
    pair(it, it->q + len, &s, &d);
    cc_pat a = *sp, b = *dp;
    if (!fits(*si, &a, len, s, it->plain) || !fits(*di, &b, len, d, it->plain)) break;
    *sp = a;
    *dp = b;
  }
  it->q += len;
  *n = len;
  return 1;
}

/* The pieces instance 0 of every operation makes with lay (the instances
 * make as many each), times 2^30, plus those of them that are strided: of
 * two layouts with as many steps, the one with more consecutive ones. */
static int64_t count_runs(const cc_trace *t, const cc_layout *lay) {
  int64_t runs = 0;
  int si, di, n;
  cc_pat sp, dp;
  for (int k = 0; k < t->nops; k++) {
    cc_runs it;
    cc_runs_start(&it, t, lay, &t->ops[k], 0);
    while (cc_runs_next(&it, &si, &sp, &di, &dp, &n)) runs += ((int64_t)1 << 30) + (sp.run || dp.run);
  }
  return runs;
}

/* Whether a custom collective's expect says under lay what it says of
 * the traced chunks: for every output chunk, its rule evaluated at each of
 * the chunk's IR chunks (over IR chunks per block) names the same source
 * rank and the source chunk's IR chunk of the same piece and instance
 * (the CPU run and the runtime check the IR's chunks against it). */
static int expect_keeps(lower *w, const cc_layout *lay) {
  const cc_trace *t = w->t;
  int n = t->nranks, k = t->k, kk = k * lay->P * lay->I;
  for (int r = 0; r < n; r++)
    for (int c = 0; c < k; c++)
      for (int j = 0; j < lay->I; j++)
        for (int x = 0; x < lay->P; x++) {
          int tr, tc, ir, ic;
          if (cc_late(w)) return 0;
          int a = ir_expect_eval(t->rules, r, c, n, k, &tr, &tc, NULL);
          int b = ir_expect_eval(t->rules, r, cc_layout_chunk(t, lay, CC_SPACE_OUTPUT, r, c, x, j), n, kk, &ir, &ic, NULL);
          if (a < 0 || a != b) return 0;
          if (a && (ir != tr || ic != cc_layout_chunk(t, lay, CC_SPACE_INPUT, tr < 0 ? r : tr, tc, x, j))) return 0;
        }
  return 1;
}

int cc_layout_plan(lower *w, cc_layout *lay) {
  const cc_trace *t = w->t;
  *lay = (cc_layout){1, t->instances, 0, 0, NULL, 1, 0};
  lay->K = cc_calloc(t->nfrags + 1, sizeof(int));
  if (!lay->K) return 0;
  for (int f = 0; f < t->nfrags; f++) {
    int n = t->frags[f].n;
    lay->P = lay->P / gcd(lay->P, n) * n;
    if (lay->P > 64 || lay->P * lay->I > 512) {
      cc_err(w, t->frags[f].line, "parallelize(%d): the program would split each chunk into %d pieces (the least common multiple of its parallelize counts%s), more than %d",
             n, lay->P * lay->I, lay->I > 1 ? ", times its instances" : "", lay->P > 64 ? 64 : 512);
      return 0;
    }
  }
  for (int k = 0; k < t->nops; k++) {
    const cc_op *o = &t->ops[k];
    int ch = o->ch < 0 ? 0 : o->ch;
    if (!o->frag) { if (ch + 1 > lay->Bc) lay->Bc = ch + 1; }
    else if (ch + 1 > lay->K[o->frag - 1]) lay->K[o->frag - 1] = ch + 1;
  }
  lay->C = lay->Bc > 0 ? lay->Bc : 1;
  for (int f = 0; f < t->nfrags; f++)
    if (lay->Bc + t->frags[f].n * lay->K[f] > lay->C) lay->C = lay->Bc + t->frags[f].n * lay->K[f];
  if (lay->C * lay->I > CC_MAX_CHANNELS) {
    too_many_channels(w, lay);
    return 0;
  }
  if (lay->P > 1) {
    int64_t inner = count_runs(t, lay);
    lay->xmajor = 1;
    lay->xmajor = count_runs(t, lay) < inner;
  }
  /* with one instance and pieces inner, the two layouts are the same */
  if (t->rules && (lay->I > 1 || lay->xmajor) && !expect_keeps(w, lay)) {
    if (w->late) return 0;
    lay->blocked = lay->xmajor = 0;
  }
  return 1;
}
