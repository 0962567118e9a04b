/* ip_expect.h -- the expected-result mapping of a custom collective.
 *
 *   spec := rule { ";" rule }
 *   rule := "o[r][c]" "=" ("i[" expr "][" expr "]" | "i[*][" expr "]") [ "if" expr ]
 *
 * Output chunk c of rank r must hold input chunk (rank, chunk) given by the
 * first rule whose condition holds; "i[*][x]" means the reduction of chunk
 * x over all ranks.  Expressions are integer C expressions over r, c, n
 * (ranks) and k (chunks per block) with + - * / % == != < <= > >= && || !
 * and parentheses.  Example (AllToNext): "o[r][c]=i[r-1][c] if r>=1". */
#ifndef IP_EXPECT_H
#define IP_EXPECT_H

#include "rt_diag.h"
#include "rt_result.h"

typedef struct ip_expect ip_expect;

/* Parses spec; errors name the column ("--expect:12: expected ']' near 'x'"). */
bt_result ip_expect_parse(const char *spec, ip_expect **out, rt_diag *diag);
void ip_expect_free(ip_expect *e);

/* Where output chunk c of rank r comes from.  Returns 1 and sets *rank
 * (-1 for a reduction over all ranks) and *chunk when a rule applies, 0
 * when none does, -1 on an evaluation error (added to diag). */
int ip_expect_eval(const ip_expect *e, int r, int c, int n, int k, int *rank, int *chunk,
                   rt_diag *diag);

#endif
