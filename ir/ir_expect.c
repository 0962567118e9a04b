/* ir_expect.c -- a tiny expression language for custom postconditions. */
#include "ir_expect.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_NUM, N_VAR, N_NEG, N_NOT, N_BNOT, N_BIN, N_JF, N_JMP, N_END, N_PICK };
/* Nodes are added after their operands, so a node's expression is the
 * nodes lo..itself, in an order a stack evaluates (eval).  A conditional
 * `x ? y : z` is x's nodes, N_JF (pops x; when 0 goes on at z's first
 * node, v), y's nodes, N_JMP (goes on at N_END, v), z's nodes, N_END
 * (the whole expression's root): only the branch taken is evaluated.
 * A list `{3,1,2}[x]` is x's nodes, then N_PICK (pops x, pushes value x
 * of the list: b values from vals[v]). */
typedef struct node { int kind, op; long long v; int a, b, lo; } node;

/* all_ranks: i[*] (a reduction); subset: its "if" over q, the rank
 * summed (-1: every rank); at, len: the rule's text. */
typedef struct rule { int src_rank, src_chunk, cond; int all_ranks, subset; int at, len; } rule;

struct ir_expect {
  node *nodes; int nnodes, capnodes;
  long long *vals; int nvals, capvals;   /* the lists' values, one after another */
  rule *rules; int nrules;
  char *text;                 /* the spec, for rule_text */
};

typedef struct parser {
  const char *s, *p;
  const char *name;         /* for messages */
  ir_expect *e;
  rt_diag *diag;
  int failed;
  int depth;                /* parentheses and unary operators open now */
  int allow_q;              /* inside i[* if ...]: q, the rank summed, may be named */
} parser;

static void fail(parser *ps, const char *what) {
  if (ps->failed) return;
  ps->failed = 1;
  const char *near = ps->p;
  while (*near == ' ') near++;
  rt_diag_add(ps->diag, "%s:%d: %s near '%.12s'", ps->name, (int)(ps->p - ps->s) + 1, what,
              *near ? near : "end of text");
}

static void skip(parser *ps) { while (isspace((unsigned char)*ps->p)) ps->p++; }

static int accept(parser *ps, const char *tok) {
  skip(ps);
  size_t n = strlen(tok);
  if (strncmp(ps->p, tok, n)) return 0;
  /* "if" must not be the start of a longer word, nor "<" of "<<", "|" of
   * "||", "&" of "&&" (operators of other levels) */
  if (isalpha((unsigned char)tok[0]) && isalnum((unsigned char)ps->p[n])) return 0;
  if (n == 1 && strchr("<>|&", tok[0]) && ps->p[1] == tok[0]) return 0;
  ps->p += n;
  return 1;
}

static void expect(parser *ps, const char *tok) {
  if (!accept(ps, tok)) {
    char m[64];
    snprintf(m, sizeof m, "expected '%s'", tok);
    fail(ps, m);
  }
}

/* Whether the spec has room for one more term (IR_EXPECT_MAX_TERMS
 * numbers, variables, operators and list values); else fails. */
static int room(parser *ps) {
  if (ps->e->nnodes + ps->e->nvals < IR_EXPECT_MAX_TERMS) return 1;
  char m[80];
  snprintf(m, sizeof m, "more than %d terms (IR_EXPECT_MAX_TERMS)", IR_EXPECT_MAX_TERMS);
  fail(ps, m);
  return 0;
}

static int add_node(parser *ps, int kind, int op, long long v, int a, int b) {
  ir_expect *e = ps->e;
  if (ps->failed) return 0;
  if (!room(ps)) return 0;
  if (e->nnodes == e->capnodes) {
    int cap = e->capnodes ? 2 * e->capnodes : 32;
    node *n = realloc(e->nodes, cap * sizeof *n);
    if (!n) { fail(ps, "out of memory"); return 0; }
    e->nodes = n; e->capnodes = cap;
  }
  /* an operator's expression starts where its first operand's does */
  int lo = kind == N_NUM || kind == N_VAR || kind == N_JF || kind == N_JMP ? e->nnodes : e->nodes[a].lo;
  e->nodes[e->nnodes] = (node){kind, op, v, a, b, lo};
  return e->nnodes++;
}

static int parse_or(parser *ps);

/* After '{': integers (each may have a '-') separated by ',', '}', then
 * "[" the index "]". */
static int parse_list(parser *ps) {
  ir_expect *e = ps->e;
  int at = e->nvals;
  do {
    skip(ps);
    char *end;
    errno = 0;
    long long v = strtoll(ps->p, &end, 10);
    if (end == ps->p || errno == ERANGE) {
      fail(ps, errno == ERANGE ? "a number past 64 bits" : "a list holds integers only");
      return 0;
    }
    ps->p = end;
    if (!room(ps)) return 0;
    if (e->nvals == e->capvals) {
      int cap = e->capvals ? 2 * e->capvals : 32;
      long long *n = realloc(e->vals, cap * sizeof *n);
      if (!n) { fail(ps, "out of memory"); return 0; }
      e->vals = n; e->capvals = cap;
    }
    e->vals[e->nvals++] = v;
  } while (accept(ps, ","));
  expect(ps, "}");
  expect(ps, "[");
  if (ps->failed) return 0;
  if (++ps->depth > IR_EXPECT_MAX_DEPTH) {
    fail(ps, "lists and parentheses nested too deep (IR_EXPECT_MAX_DEPTH)");
    return 0;
  }
  int x = parse_or(ps);
  ps->depth--;
  expect(ps, "]");
  return add_node(ps, N_PICK, 0, at, x, e->nvals - at);
}

static int parse_primary(parser *ps) {
  skip(ps);
  if (ps->failed) return 0;
  if (isdigit((unsigned char)*ps->p)) {
    char *end;
    errno = 0;
    long long v = strtoll(ps->p, &end, 10);
    if (errno == ERANGE) {
      fail(ps, "a number past 64 bits");
      return 0;
    }
    ps->p = end;
    return add_node(ps, N_NUM, 0, v, 0, 0);
  }
  if (accept(ps, "{")) return parse_list(ps);
  static const char vars[] = "rcnkq";
  if (*ps->p && strchr(vars, *ps->p) && !isalnum((unsigned char)ps->p[1])) {
    int v = (int)(strchr(vars, *ps->p) - vars);
    if (v == 4 && !ps->allow_q) {
      fail(ps, "q (the rank a subset sums) is for i[* if COND] only");
      return 0;
    }
    ps->p++;
    return add_node(ps, N_VAR, 0, v, 0, 0);
  }
  int paren = accept(ps, "("), neg = !paren && accept(ps, "-"), not = !paren && !neg && accept(ps, "!"),
      bnot = !paren && !neg && !not && accept(ps, "~");
  if (!paren && !neg && !not && !bnot) {
    fail(ps, "expected a number, r, c, n, k, '(' or a list '{'");
    return 0;
  }
  if (++ps->depth > IR_EXPECT_MAX_DEPTH) {
    char m[96];
    snprintf(m, sizeof m, "parentheses and unary operators nested deeper than %d (IR_EXPECT_MAX_DEPTH)",
             IR_EXPECT_MAX_DEPTH);
    fail(ps, m);
    return 0;
  }
  int x;
  if (paren) {
    x = parse_or(ps);
    expect(ps, ")");
  } else {
    x = add_node(ps, neg ? N_NEG : not ? N_NOT : N_BNOT, 0, 0, parse_primary(ps), 0);
  }
  ps->depth--;
  return x;
}

/* Binary levels from loosest to tightest, as C's; each lists its
 * operators, the longer spellings first so that "<=" is not read as "<". */
static const char *const levels[][7] = {
  {"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"<<", ">>"}, {"+", "-"},
  {"*", "/", "%"},
};
enum { NLEVELS = sizeof levels / sizeof levels[0] };
static const char *const all_ops[] = {"||", "&&", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%",
                                      "|", "^", "&", "<<", ">>"};

static int op_index(const char *tok) {
  for (int i = 0; i < (int)(sizeof all_ops / sizeof all_ops[0]); i++)
    if (!strcmp(all_ops[i], tok)) return i;
  return -1;
}

static int parse_level(parser *ps, int lvl) {
  if (lvl == NLEVELS) return parse_primary(ps);
  int x = parse_level(ps, lvl + 1);
  for (;;) {
    int matched = 0;
    for (int i = 0; i < 7 && levels[lvl][i]; i++) {
      if (accept(ps, levels[lvl][i])) {
        int y = parse_level(ps, lvl + 1);
        x = add_node(ps, N_BIN, op_index(levels[lvl][i]), 0, x, y);
        matched = 1;
        break;
      }
    }
    if (!matched || ps->failed) return x;
  }
}

/* cond ? a : b (right-associative, below ||), nested as parentheses are. */
static int parse_or(parser *ps) {
  int x = parse_level(ps, 0);
  if (ps->failed || !accept(ps, "?")) return x;
  if (++ps->depth > IR_EXPECT_MAX_DEPTH) {
    char m[96];
    snprintf(m, sizeof m, "conditionals and parentheses nested deeper than %d (IR_EXPECT_MAX_DEPTH)", IR_EXPECT_MAX_DEPTH);
    fail(ps, m);
    return 0;
  }
  int jf = add_node(ps, N_JF, 0, 0, 0, 0);
  parse_or(ps);
  expect(ps, ":");
  int jmp = add_node(ps, N_JMP, 0, 0, 0, 0);
  if (ps->failed) return 0;
  ps->e->nodes[jf].v = ps->e->nnodes;   /* the false branch starts here */
  parse_or(ps);
  int end = add_node(ps, N_END, 0, 0, x, 0);   /* lo: the condition's first node */
  if (ps->failed) return 0;
  ps->e->nodes[jmp].v = end;
  ps->depth--;
  return end;
}

static void parse_rule(parser *ps) {
  skip(ps);
  rule ru = {0, 0, -1, 0, -1, (int)(ps->p - ps->s), 0};
  expect(ps, "o"); expect(ps, "["); expect(ps, "r"); expect(ps, "]");
  expect(ps, "["); expect(ps, "c"); expect(ps, "]"); expect(ps, "=");
  expect(ps, "i"); expect(ps, "[");
  if (accept(ps, "*")) {
    ru.all_ranks = 1;
    if (accept(ps, "if")) {   /* a sum over the ranks q for which COND holds */
      ps->allow_q = 1;
      ru.subset = parse_or(ps);
      ps->allow_q = 0;
    }
  } else {
    ru.src_rank = parse_or(ps);
  }
  expect(ps, "]"); expect(ps, "[");
  ru.src_chunk = parse_or(ps);
  expect(ps, "]");
  if (accept(ps, "if")) ru.cond = parse_or(ps);
  if (ps->failed) return;
  ru.len = (int)(ps->p - ps->s) - ru.at;
  ir_expect *e = ps->e;
  rule *r = realloc(e->rules, (e->nrules + 1) * sizeof *r);
  if (!r) { fail(ps, "out of memory"); return; }
  e->rules = r;
  e->rules[e->nrules++] = ru;
}

bt_result ir_expect_parse(const char *spec, const char *name, ir_expect **out, rt_diag *diag) {
  ir_expect *e = calloc(1, sizeof *e);
  if (!e) return BT_ERR_NOMEM;
  parser ps = {spec, spec, name, e, diag, 0, 0, 0};
  do parse_rule(&ps); while (!ps.failed && accept(&ps, ";"));
  skip(&ps);
  if (!ps.failed && *ps.p) fail(&ps, "unexpected text");
  if (!ps.failed && !(e->text = strdup(spec))) fail(&ps, "out of memory");
  if (ps.failed) { ir_expect_free(e); *out = NULL; return BT_ERR_INVALID; }
  *out = e;
  return BT_OK;
}

void ir_expect_free(ir_expect *e) {
  if (!e) return;
  free(e->nodes);
  free(e->vals);
  free(e->rules);
  free(e->text);
  free(e);
}

/* The most values eval keeps at once: an operand waits on the stack only
 * while the other side of its operator, nested deeper, is evaluated, so
 * the nesting limit bounds it (each parenthesis opens at most one pending
 * operand per precedence level). */
enum { EVAL_STACK = (IR_EXPECT_MAX_DEPTH + 2) * (NLEVELS + 2) };

/* One operator on its operands in 64-bit arithmetic: 1 with the value in
 * *out, 0 on a division by zero, -1 when a value would not fit 64 bits
 * (the expression comes from a file: no operation may overflow). */
static int apply(int op, long long a, long long b, long long *out) {
  switch (op) {
  case 0: *out = a || b; break;
  case 1: *out = a && b; break;
  case 2: *out = a == b; break;
  case 3: *out = a != b; break;
  case 4: *out = a <= b; break;
  case 5: *out = a >= b; break;
  case 6: *out = a < b; break;
  case 7: *out = a > b; break;
  case 8: if (__builtin_add_overflow(a, b, out)) return -1; break;
  case 9: if (__builtin_sub_overflow(a, b, out)) return -1; break;
  case 10: if (__builtin_mul_overflow(a, b, out)) return -1; break;
  case 13: *out = a | b; break;
  case 14: *out = a ^ b; break;
  case 15: *out = a & b; break;
  case 16:   /* a shift past the value's 63 bits, or of a negative count, does not fit */
    if (b < 0 || b > 62 || a > (LLONG_MAX >> b) || a < (LLONG_MIN >> b)) return -1;
    *out = (long long)((unsigned long long)a << b);
    break;
  case 17:
    if (b < 0 || b > 63) return -1;
    *out = a < 0 ? ~(~a >> b) : a >> b;   /* arithmetic, whatever the compiler's choice */
    break;
  case 11:
  case 12:
    if (!b) return 0;
    if (a == LLONG_MIN && b == -1) return -1;
    *out = op == 11 ? a / b : a % b;
    break;
  }
  return 1;
}

/* Evaluates node i (apply's results, or -2 for a list indexed outside
 * it), without recursion: its nodes lo..i in order on a value stack. */
static int eval(const ir_expect *e, int i, const long long *env, long long *out) {
  long long st[EVAL_STACK];
  int sp = 0;
  for (int j = e->nodes[i].lo; j <= i; j++) {
    const node *n = &e->nodes[j];
    int k;
    switch (n->kind) {
    case N_NUM:
    case N_VAR:
      if (sp == EVAL_STACK) return -1;   /* not reached within the parser's limits */
      st[sp++] = n->kind == N_NUM ? n->v : env[n->v];
      break;
    case N_NEG:
      if (st[sp - 1] == LLONG_MIN) return -1;
      st[sp - 1] = -st[sp - 1];
      break;
    case N_NOT: st[sp - 1] = !st[sp - 1]; break;
    case N_BNOT: st[sp - 1] = ~st[sp - 1]; break;
    case N_JF:
      if (!st[--sp]) j = (int)n->v - 1;
      break;
    case N_JMP: j = (int)n->v - 1; break;
    case N_END: break;
    case N_PICK:
      if (st[sp - 1] < 0 || st[sp - 1] >= n->b) return -2;
      st[sp - 1] = e->vals[n->v + st[sp - 1]];
      break;
    default:
      if ((k = apply(n->op, st[sp - 2], st[sp - 1], &st[sp - 2])) <= 0) return k;
      sp--;
      break;
    }
  }
  *out = st[0];
  return 1;
}

int ir_expect_eval(const ir_expect *e, int r, int c, int n, int k, int *rank, int *chunk,
                   rt_diag *diag) {
  return ir_expect_eval_rule(e, r, c, n, k, rank, chunk, NULL, diag);
}

const char *ir_expect_rule_text(const ir_expect *e, int i, int *len) {
  if (!e || i < 0 || i >= e->nrules) {
    *len = 0;
    return "";
  }
  *len = e->rules[i].len;
  return e->text + e->rules[i].at;
}

int ir_expect_sums(const ir_expect *e, int rule, int q, int r, int c, int n, int k) {
  if (!e || rule < 0 || rule >= e->nrules || e->rules[rule].subset < 0) return 1;
  long long env[5] = {r, c, n, k, q}, v;
  int ok = eval(e, e->rules[rule].subset, env, &v);
  return ok <= 0 ? -1 : v != 0;
}

int ir_expect_eval_rule(const ir_expect *e, int r, int c, int n, int k, int *rank, int *chunk, int *which,
                        rt_diag *diag) {
  long long env[5] = {r, c, n, k, -1}, v;
  if (which) *which = -1;
  for (int i = 0; i < e->nrules; i++) {
    const rule *ru = &e->rules[i];
    int ok;
    if (ru->cond >= 0) {
      if ((ok = eval(e, ru->cond, env, &v)) <= 0) goto bad;
      if (!v) continue;
    }
    if (ru->all_ranks) *rank = -1;
    else {
      if ((ok = eval(e, ru->src_rank, env, &v)) <= 0) goto bad;
      if (v < INT_MIN || v > INT_MAX) { ok = -1; goto bad; }
      if (v < 0) { ok = -3; goto bad; }   /* -1 would read as i[*], a sum over every rank */
      *rank = (int)v;
    }
    if ((ok = eval(e, ru->src_chunk, env, &v)) <= 0) goto bad;
    if (v < INT_MIN || v > INT_MAX) { ok = -1; goto bad; }
    *chunk = (int)v;
    if (which) *which = i;
    return 1;
  bad:
    if (ok == -3)
      rt_diag_add(diag, "expect: rule %d names rank %lld, which does not exist, at rank %d chunk %d (a sum over "
                  "every rank is i[*])", i + 1, v, r, c);
    else
      rt_diag_add(diag, "expect: rule %d %s at rank %d chunk %d", i + 1,
                  ok == 0 ? "divides by zero" : ok == -2 ? "indexes a list outside its values"
                  : "overflows (a value past 64 bits, or a rank or chunk past 32)", r, c);
    return -1;
  }
  return 0;
}
