/* test_dtype.c -- element conversions, host reductions and the expect language. */
#include "ip_dtype.h"
#include "ir_expect.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_half(void) {
  ok(ip_float_to_half(1.0f) == 0x3c00 && ip_half_to_float(0x3c00) == 1.0f, "f16 1.0");
  ok(ip_float_to_half(65504.0f) == 0x7bff, "f16 largest finite");
  ok(ip_float_to_half(65520.0f) == 0x7c00, "f16 overflows to inf at 65520");
  ok(ip_float_to_half(-2.0f) == 0xc000, "f16 sign");
  ok(ip_float_to_half(ldexpf(1, -24)) == 0x0001 && ip_half_to_float(1) == ldexpf(1, -24), "f16 smallest subnormal");
  ok(ip_float_to_half(1.0f + ldexpf(1, -11)) == 0x3c00, "f16 tie rounds to even (down)");
  ok(ip_float_to_half(1.0f + 3 * ldexpf(1, -11)) == 0x3c02, "f16 tie rounds to even (up)");
  ok(isnan(ip_half_to_float(ip_float_to_half(NAN))), "f16 NaN stays NaN");
  ok(ip_float_to_bf16(1.0f) == 0x3f80 && ip_bf16_to_float(0x3f80) == 1.0f, "bf16 1.0");
  ok(ip_float_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80, "bf16 tie rounds to even");
  ok(ip_float_to_bf16(1.0f + 3 * ldexpf(1, -8)) == 0x3f82, "bf16 rounds up past the tie");
}

static void test_reduce(void) {
  int8_t a8[3] = {127, -128, 5}, b8[3] = {1, -1, -7}, d8[3];
  ip_reduce(IP_I8, IP_OP_SUM, d8, a8, b8, 3);
  ok(d8[0] == -128 && d8[1] == 127 && d8[2] == -2, "i8 sum wraps");
  ip_reduce(IP_I8, IP_OP_MAX, d8, a8, b8, 3);
  ok(d8[0] == 127 && d8[1] == -1 && d8[2] == 5, "i8 max");
  uint8_t u1[2] = {16, 200}, u2[2] = {16, 3}, ud[2];
  ip_reduce(IP_U8, IP_OP_PROD, ud, u1, u2, 2);
  ok(ud[0] == 0 && ud[1] == (uint8_t)600, "u8 prod wraps");
  int64_t l1[1] = {INT64_MAX}, l2[1] = {1}, ld[1];
  ip_reduce(IP_I64, IP_OP_SUM, ld, l1, l2, 1);
  ok(ld[0] == INT64_MIN, "i64 sum wraps without undefined behaviour");
  uint32_t x1[1] = {7}, x2[1] = {9}, xd[1];
  ip_reduce(IP_U32, IP_OP_MIN, xd, x1, x2, 1);
  ok(xd[0] == 7, "u32 min");
  float f1[2] = {1.5f, -2}, f2[2] = {2.5f, 8}, fd[2];
  ip_reduce(IP_F32, IP_OP_PROD, fd, f1, f2, 2);
  ok(fd[0] == 3.75f && fd[1] == -16, "f32 prod");
  ip_reduce(IP_F32, IP_OP_AVG, fd, f1, f2, 2);
  ok(fd[0] == 4 && fd[1] == 6, "avg reduces as sum");
  ip_divide(IP_F32, fd, 2, 4);
  ok(fd[0] == 1 && fd[1] == 1.5f, "avg's final division (f32)");
  int32_t i1[2] = {7, -7};
  ip_divide(IP_I32, i1, 2, 2);
  ok(i1[0] == 3 && i1[1] == -3, "avg's final division truncates integers");
  int64_t q1[2] = {INT64_C(18014398509481986), INT64_C(-18014398509481986)};   /* 2 * (2^53 + 1) */
  uint64_t q2[1] = {UINT64_MAX};
  ip_divide(IP_I64, q1, 2, 2);
  ip_divide(IP_U64, q2, 1, 3);
  ok(q1[0] == INT64_C(9007199254740993) && q1[1] == -INT64_C(9007199254740993) && q2[0] == UINT64_MAX / 3,
     "avg's final division of 64-bit integers is exact past 2^53 (through double it rounded)");
  uint16_t h1[1] = {ip_float_to_half(1.5f)}, h2[1] = {ip_float_to_half(2.25f)}, hd[1];
  ip_reduce(IP_F16, IP_OP_SUM, hd, h1, h2, 1);
  ok(ip_half_to_float(hd[0]) == 3.75f, "f16 sum");
  uint16_t g1[1] = {ip_float_to_bf16(3)}, g2[1] = {ip_float_to_bf16(-5)}, gd[1];
  ip_reduce(IP_BF16, IP_OP_MIN, gd, g1, g2, 1);
  ok(ip_bf16_to_float(gd[0]) == -5, "bf16 min");
  for (int t = 0; t < IP_DTYPE_COUNT; t++) {
    unsigned char buf[8];
    ip_set(t, buf, 0, 3);
    ok(ip_get(t, buf, 0) == 3 && ip_dtype_from_name(ip_dtype_name[t]) == t, "%s set/get and name", ip_dtype_name[t]);
  }
  ok(ip_dtype_from_name("f8") == -1 && ip_redop_from_name("xor") == -1, "unknown names are refused");
}

/* A spec of `pre` + `reps` times `rep` + `mid` + `reps` times `close` + `post`. */
static char *spec_of(const char *pre, const char *rep, const char *mid, const char *close, const char *post, int reps) {
  size_t n = strlen(pre) + (strlen(rep) + strlen(close)) * (size_t)reps + strlen(mid) + strlen(post) + 1;
  char *s = malloc(n), *p = s;
  p += sprintf(p, "%s", pre);
  for (int i = 0; i < reps; i++) p += sprintf(p, "%s", rep);
  p += sprintf(p, "%s", mid);
  for (int i = 0; i < reps; i++) p += sprintf(p, "%s", close);
  sprintf(p, "%s", post);
  return s;
}

/* Specs from a file are bounded: deep nesting and huge sums are refused
 * by name (they overflowed the stack of the recursive parser and
 * evaluator), and what fits evaluates without recursion. */
static void test_expect_limits(rt_diag *d) {
  ir_expect *e = NULL;
  int sr, sc;
  char *s = spec_of("o[r][c]=i[", "(", "r", ")", "][c]", 20000);
  rt_diag_clear(d);
  ok(ir_expect_parse(s, "expect", &e, d) == BT_ERR_INVALID && !e, "20,000 nested parentheses are refused");
  ok_contains(rt_diag_text(d), "nested deeper than 64 (IR_EXPECT_MAX_DEPTH)", "naming the limit");
  free(s);
  s = spec_of("o[r][c]=i[", "-", "r", "", "][c]", 100000);
  rt_diag_clear(d);
  ok(ir_expect_parse(s, "expect", &e, d) == BT_ERR_INVALID, "100,000 unary minus signs are refused");
  free(s);
  s = spec_of("o[r][c]=i[r][c] if ", "!", "0", "", "", 100000);
  ok(ir_expect_parse(s, "expect", &e, d) == BT_ERR_INVALID, "100,000 '!' are refused");
  free(s);
  s = spec_of("o[r][c]=i[r", "+0", "", "", "][c]", 200000);
  rt_diag_clear(d);
  ok(ir_expect_parse(s, "expect", &e, d) == BT_ERR_INVALID, "a flat sum of 200,000 terms is refused");
  ok_contains(rt_diag_text(d), "more than 65536 terms (IR_EXPECT_MAX_TERMS)", "naming the limit");
  free(s);
  s = spec_of("o[r][c]=i[r", "+1-1", "", "", "][c]", 16000);   /* 64,001 terms: within the limit */
  ok(!ir_expect_parse(s, "expect", &e, d) && ir_expect_eval(e, 3, 2, 4, 4, &sr, &sc, d) == 1 && sr == 3 && sc == 2,
     "a flat sum of 64,001 terms evaluates (no recursion)");
  ir_expect_free(e);
  free(s);
  s = spec_of("o[r][c]=i[", "(r+(1*(", "0", "-1)))", "][c]", 21);   /* 63 deep, right-nested */
  ok(!ir_expect_parse(s, "expect", &e, d) && ir_expect_eval(e, 3, 2, 4, 4, &sr, &sc, d) == 1 && sr == 42 && sc == 2,
     "63 nested parentheses evaluate (21 x (r + (1 * (x - 1))) around 0: 42 at r = 3)");
  ir_expect_free(e);
  free(s);
}

static void test_expect(void) {
  rt_diag *d = rt_diag_new(4);
  ir_expect *e = NULL;
  ok(!ir_expect_parse("o[r][c]=i[r-1][c] if r>=1", "--expect", &e, d), "AllToNext rule parses");
  int sr, sc;
  ok(ir_expect_eval(e, 3, 5, 16, 8, &sr, &sc, d) == 1 && sr == 2 && sc == 5, "rank 3 chunk 5 comes from rank 2 chunk 5");
  ok(ir_expect_eval(e, 0, 5, 16, 8, &sr, &sc, d) == 0, "no rule for rank 0");
  ir_expect_free(e);
  ok(!ir_expect_parse("o[r][c]=i[*][c] if c%2==0 && !(r>3); o[r][c] = i[(r+1)%n][k-1-c]", "--expect", &e, d), "two rules parse");
  ok(ir_expect_eval(e, 1, 2, 4, 4, &sr, &sc, d) == 1 && sr == -1 && sc == 2, "first rule: reduction");
  ok(ir_expect_eval(e, 3, 1, 4, 4, &sr, &sc, d) == 1 && sr == 0 && sc == 2, "second rule: (r+1)%%n, k-1-c");
  ir_expect_free(e);
  ok(!ir_expect_parse("o[r][c]=i[r/(c-c)][c]", "--expect", &e, d), "division parses");
  ok(ir_expect_eval(e, 1, 1, 2, 2, &sr, &sc, d) == -1, "division by zero is an error");
  ok_contains(rt_diag_text(d), "divides by zero at rank 1 chunk 1", "and says where");
  ir_expect_free(e);
  rt_diag_clear(d);
  ok(ir_expect_parse("o[r][c]=i[r-1[c]", "--expect", &e, d) == BT_ERR_INVALID, "syntax error is refused");
  ok_contains(rt_diag_text(d), "--expect:14: expected ']' near '[c]'", "with the column and what follows");
  rt_diag_clear(d);
  ok(ir_expect_parse("o[r][c]=i[x][c]", "--expect", &e, d) == BT_ERR_INVALID, "unknown variable is refused");
  ok_contains(rt_diag_text(d), "expected a number, r, c, n, k, '(' or a list '{'", "with what is allowed");
  rt_diag_clear(d);
  /* Lists: per-rank values, indexed from 0; outside them an error. */
  ok(!ir_expect_parse("o[r][c]=i[{3,0,2}[r]][c+{0,5}[c%2]]", "--expect", &e, d), "lists parse: %s", rt_diag_text(d));
  ok(ir_expect_eval(e, 1, 1, 3, 6, &sr, &sc, d) == 1 && sr == 0 && sc == 6, "a list's value by the index");
  ok(ir_expect_eval(e, 3, 0, 4, 6, &sr, &sc, d) == -1, "an index past the list is an error");
  ok_contains(rt_diag_text(d), "rule 1 indexes a list outside its values at rank 3 chunk 0", "naming the rule and where");
  ir_expect_free(e);
  rt_diag_clear(d);
  ok(ir_expect_parse("o[r][c]=i[{1,r}[0]][c]", "--expect", &e, d) == BT_ERR_INVALID, "a list holds integers only");
  ok_contains(rt_diag_text(d), "a list holds integers only", "said so");
  rt_diag_clear(d);
  /* A computed rank of -1 is no rank (it once read as i[*], a sum over
   * every rank, so a program computing the sum passed). */
  ok(!ir_expect_parse("o[r][c]=i[r-1][c]", "--expect", &e, d), "r-1 parses");
  ok(ir_expect_eval(e, 0, 0, 2, 1, &sr, &sc, d) == -1, "rank -1 at r = 0 is an error, not a sum over every rank");
  ok_contains(rt_diag_text(d), "rule 1 names rank -1, which does not exist, at rank 0 chunk 0 (a sum over every rank is "
              "i[*])", "naming the rule and where");
  ir_expect_free(e);
  rt_diag_clear(d);
  char *big = malloc(8 * 70000 + 64);
  int at = sprintf(big, "o[r][c]=i[{");
  for (int i = 0; i < 70000; i++) at += sprintf(big + at, "%s%d", i ? "," : "", i);
  sprintf(big + at, "}[r]][c]");
  ok(ir_expect_parse(big, "--expect", &e, d) == BT_ERR_INVALID, "a list past IR_EXPECT_MAX_TERMS is refused");
  ok_contains(rt_diag_text(d), "more than 65536 terms (IR_EXPECT_MAX_TERMS)", "naming the limit");
  free(big);
  test_expect_limits(d);
  rt_diag_free(d);
}

/* C's bit operators, shifts and conditionals, with C's precedence; the
 * branch not taken is not evaluated. */
static void test_expect_bits(void) {
  rt_diag *d = rt_diag_new(4);
  static const struct { const char *spec; int r, c, rank, chunk; const char *what; } t[] = {
    {"o[r][c]=i[r^1][c]", 2, 0, 3, 0, "a recursive-doubling partner r^1"},
    {"o[r][c]=i[(r&1)?r-1:r+1][c]", 3, 0, 2, 0, "a conditional: odd ranks from below"},
    {"o[r][c]=i[(r&1)?r-1:r+1][c]", 2, 0, 3, 0, "... even ranks from above"},
    {"o[r][c]=i[r][c<<1|1]", 0, 2, 0, 5, "shift, then or"},
    {"o[r][c]=i[r][c>>1]", 0, 5, 0, 2, "a right shift"},
    {"o[r][c]=i[~r&3][c]", 1, 0, 2, 0, "complement, and"},
    {"o[r][c]=i[r][1|2^3&1]", 0, 0, 0, 3, "& before ^ before |, as in C"},
    {"o[r][c]=i[r==0 ? 0 : n/r][c]", 0, 0, 0, 0, "the branch not taken divides by zero and is not evaluated"},
    {"o[r][c]=i[r<1 ? 0 : r<2 ? 1 : 2][c]", 1, 0, 1, 0, "conditionals nest to the right"},
    {"o[r][c]=i[r<1 ? 0 : r<2 ? 1 : 2][c]", 5, 0, 2, 0, "... their last branch"},
    {"o[r][c]=i[r][c] if r&1 && c||0", 1, 1, 1, 1, "& binds tighter than &&, and || stays ||"},
    {"o[r][c]=i[r<<2>>1][c]", 3, 0, 6, 0, "shifts associate left"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    ir_expect *e = NULL;
    int sr = -9, sc = -9;
    int pr = ir_expect_parse(t[i].spec, "expect", &e, d);
    int ev = pr ? -9 : ir_expect_eval(e, t[i].r, t[i].c, 8, 8, &sr, &sc, d);
    ok(!pr && ev == 1 && sr == t[i].rank && sc == t[i].chunk, "%s: %s at r=%d c=%d is i[%d][%d] (got %d: %d, %d) %s",
       t[i].what, t[i].spec, t[i].r, t[i].c, t[i].rank, t[i].chunk, ev, sr, sc, pr ? rt_diag_text(d) : "");
    ir_expect_free(e);
    rt_diag_clear(d);
  }
  ir_expect *e = NULL;
  int sr, sc, which;
  ok(!ir_expect_parse("o[r][c]=i[r][c] if c>9; o[r][c]=i[* if q/4==r/4][c]", "expect", &e, d) &&
         ir_expect_eval_rule(e, 5, 1, 8, 2, &sr, &sc, &which, d) == 1 && sr == -1 && sc == 1 && which == 1 &&
         ir_expect_sums(e, 1, 4, 5, 1, 8, 2) == 1 && ir_expect_sums(e, 1, 7, 5, 1, 8, 2) == 1 &&
         ir_expect_sums(e, 1, 3, 5, 1, 8, 2) == 0 && ir_expect_sums(e, 0, 3, 5, 1, 8, 2) == 1,
     "i[* if q/4==r/4]: a node-local sum of rank 5 takes ranks 4..7, not 3");
  ir_expect_free(e);
  rt_diag_clear(d);
  ok(ir_expect_parse("o[r][c]=i[q][c]", "expect", &e, d) == BT_ERR_INVALID &&
         strstr(rt_diag_text(d), "q (the rank a subset sums) is for i[* if COND] only"), "q elsewhere is refused");
  rt_diag_clear(d);
  ok(!ir_expect_parse("o[r][c]=i[r][1<<c]", "expect", &e, d) && ir_expect_eval(e, 0, 70, 8, 8, &sr, &sc, d) == -1,
     "a shift past 63 bits does not fit: an error, not a value");
  ir_expect_free(e);
  rt_diag_clear(d);
  ok(ir_expect_parse("o[r][c]=i[r ? 1][c]", "expect", &e, d) == BT_ERR_INVALID &&
         strstr(rt_diag_text(d), "expected ':'"), "a conditional without its ':' is refused: %s", rt_diag_text(d));
  rt_diag_free(d);
}

int main(void) {
  test_half();
  test_reduce();
  test_expect();
  test_expect_bits();
  return tap_done();
}
