/* ir_expect.h -- the expected-result mapping of a custom collective (the
 * `expect` attribute of the IR, `baton verify --expect`, the DSL's collective{expect=}).
 *
 *   spec := rule { ";" rule }
 *   rule := "o[r][c]" "=" ("i[" expr "][" expr "]" | "i[*" [ "if" expr ] "][" expr "]") [ "if" expr ]
 *
 * Output chunk c of rank r must hold input chunk (rank, chunk) given by the
 * first rule whose condition holds; "i[*][x]" means the reduction of chunk
 * x over all ranks, "i[* if COND][x]" over the ranks q for which COND holds
 * (COND may name q; a node-local sum: "i[* if q/4==r/4][c]").  Expressions are integer C expressions over r, c, n
 * (ranks) and k (chunks per block) with C's operators and precedence:
 * ?: || && | ^ & == != < <= > >= << >> + - * / % and unary - ! ~, and
 * parentheses; a conditional evaluates only the branch it takes.  A list
 * of integers indexed by an expression, "{3,1,2,4}[r]", is value r of the
 * list (an index outside it is an evaluation error): per-rank sizes.
 * Example (AllToNext): "o[r][c]=i[r-1][c] if r>=1"; a recursive-doubling
 * partner: "o[r][c]=i[r^1][c]". */
#ifndef IR_EXPECT_H
#define IR_EXPECT_H

#include "rt_diag.h"
#include "rt_result.h"

typedef struct ir_expect ir_expect;

/* Limits on a spec (it may come from any file): parentheses and unary
 * operators nested at most IR_EXPECT_MAX_DEPTH deep, at most
 * IR_EXPECT_MAX_TERMS numbers, variables, operators and list values in all.  Beyond
 * either the parse fails, naming the limit; evaluation never recurses. */
#define IR_EXPECT_MAX_DEPTH 64
#define IR_EXPECT_MAX_TERMS 65536

/* Parses spec; errors name `name` and the column
 * ("--expect:12: expected ']' near 'x'" for name "--expect"). */
bt_result ir_expect_parse(const char *spec, const char *name, ir_expect **out, rt_diag *diag);
void ir_expect_free(ir_expect *e);

/* Where output chunk c of rank r comes from.  Returns 1 and sets *rank
 * (-1 for a reduction over all ranks) and *chunk when a rule applies, 0
 * when none does, -1 on an evaluation error (added to diag). */
int ir_expect_eval(const ir_expect *e, int r, int c, int n, int k, int *rank, int *chunk,
                   rt_diag *diag);
/* ir_expect_eval that also says which rule applied (*which: its index,
 * from 0; -1 when none did). */
int ir_expect_eval_rule(const ir_expect *e, int r, int c, int n, int k, int *rank, int *chunk, int *which,
                        rt_diag *diag);
/* Whether rank q is summed by rule `rule` (a reduction) for output chunk
 * c of rank r: 1 or 0 (1 for a rule over every rank), -1 on an
 * evaluation error. */
int ir_expect_sums(const ir_expect *e, int rule, int q, int r, int c, int n, int k);
/* Rule i's text as written (*len bytes at the pointer, not terminated). */
const char *ir_expect_rule_text(const ir_expect *e, int i, int *len);

#endif
