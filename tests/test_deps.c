/* test_deps.c -- steps that wait for several thread blocks (xdeps): the
 * compiler writes them instead of nop chains, the reader and validator
 * refuse bad ones at their place, the proofs and the CPU executor honour
 * every one, and ir_deps_split gives the one-dependency form that runs
 * the same. */
#include "cc_compile.h"
#include "ip_cpu.h"
#include "ir.h"
#include "ir_check.h"
#include "ir_read.h"
#include "ir_write.h"
#include "tap.h"

static char *to_xml(const ir_prog *p, int explain) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (explain) ir_explain(p, f);
  else ir_write(p, f);
  fclose(f);
  return buf;
}

/* Reads and validates `text`; the messages, "" when valid (static). */
static const char *errors_of(const char *text) {
  static char buf[4096];
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL;
  if (!ir_read_memory(text, strlen(text), "m.xml", &p, d)) ir_check(p, d);
  snprintf(buf, sizeof buf, "%s", rt_diag_text(d));
  ir_prog_free(p);
  rt_diag_free(d);
  return buf;
}

/* `text` with the attribute value after the first `key` replaced by `val`
 * (up to its closing quote); malloc'd. */
static char *with_attr(const char *text, const char *key, const char *val) {
  const char *a = strstr(text, key);
  if (!a) return strdup(text);
  a += strlen(key);
  const char *b = strchr(a, '"');
  size_t n = strlen(text) + strlen(val) + 1;
  char *s = malloc(n);
  snprintf(s, n, "%.*s%s%s", (int)(a - text), text, val, b);
  return s;
}

/* Route runs of p on the CPU (every type and operator at once), and the
 * race proof; 0 when both pass. */
static int runs_ok(const ir_prog *p, char *why, size_t n) {
  rt_diag *d = rt_diag_new(10);
  int unchecked = 0;
  ip_cpu_opts o = {.sources = 1, .count = 8, .tile = 1, .inplace = -1};
  ip_cpu_report rep;
  bt_result r = ir_check(p, d);
  if (!r) r = ir_check_races_of(p, ir_prog_aliased(p, p->inplace), &unchecked, d);
  if (!r) r = ip_cpu_verify(p, &o, &rep, d);
  snprintf(why, n, "%s", rt_diag_text(d));
  rt_diag_free(d);
  return r;
}

static long extra_deps(const ir_prog *p) {
  long k = 0;
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) k += p->gpus[r].tbs[t].steps[s].nxdeps;
  return k;
}

int main(int argc, char **argv) {
  if (argc < 2) { printf("Bail out! usage: test_deps ALGORITHMS_DIR\n"); return 1; }
  char script[1024], why[4096];
  snprintf(script, sizeof script, "%s/alltoall_bruck.lua", argv[1]);
  const char *params[] = {"ranks=8"};
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL;
  ok(cc_compile_file(script, params, 1, NULL, &p, NULL, d) == BT_OK, "Bruck AllToAll on 8 ranks compiles: %s",
     rt_diag_text(d));
  rt_diag_free(d);
  if (!p) return tap_done();

  long nops = 0, extra = extra_deps(p);
  for (int r = 0; r < p->ngpus; r++)
    for (int t = 0; t < p->gpus[r].ntbs; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps; s++) nops += p->gpus[r].tbs[t].steps[s].op == IR_OP_NOP;
  ok(ir_prog_multideps(p) && extra > 0 && nops == 0 && extra < 8,
     "its steps wait for several thread blocks at once: %ld further dependencies, %ld nop steps", extra, nops);
  ok(ir_prog_needs_baton(p), "a file with such steps is baton's (MSCCL takes one dependency a step)");

  /* XML: written as xdeps, read back the same */
  char *a = to_xml(p, 0);
  rt_diag *rd = rt_diag_new(10);
  ir_prog *q = NULL;
  ok(strstr(a, " xdeps=\"") && !ir_read_memory(a, strlen(a), "b.xml", &q, rd) && !ir_check(q, rd),
     "written with xdeps=\"tb:step ...\", read back and valid: %s", rt_diag_text(rd));
  char *b = q ? to_xml(q, 0) : NULL;
  ok(b && !strcmp(a, b) && q && extra_deps(q) == extra, "write(read(write(p))) == write(p)");
  free(b);
  ir_prog_free(q);
  rt_diag_free(rd);
  char *e = to_xml(p, 1);
  ok(strstr(e, " wait tb") && strstr(e, ",tb"), "explain lists every thread block a step waits for");
  free(e);

  /* the proofs and the CPU executor honour every dependency */
  ok(runs_ok(p, why, sizeof why) == BT_OK, "it is race-free and computes its collective on the CPU: %s", why);
  int dropped = 0, caught = 0;
  for (int r = 0; r < p->ngpus && dropped < 64; r++)
    for (int t = 0; t < p->gpus[r].ntbs && dropped < 64; t++)
      for (int s = 0; s < p->gpus[r].tbs[t].nsteps && dropped < 64; s++) {
        ir_step *st = &p->gpus[r].tbs[t].steps[s];
        if (!st->nxdeps) continue;
        st->nxdeps--;   /* forget its last dependency */
        dropped++;
        caught += runs_ok(p, why, sizeof why) != BT_OK;
        st->nxdeps++;
      }
  /* the compiler writes no wait that another implies: each one matters */
  ok(dropped > 0 && caught == dropped, "forgetting any one further dependency is caught (%d of %d)", caught, dropped);

  /* the one-dependency form */
  ir_prog *one = ir_deps_split(p);
  long before = ir_prog_nsteps(p);
  ok(one && !ir_prog_multideps(one) && ir_prog_nsteps(one) == before + extra,
     "ir_deps_split: one dependency a step, a nop for each further one (%ld + %ld steps)", before, extra);
  if (one) {
    ok(runs_ok(one, why, sizeof why) == BT_OK, "the split form is valid, race-free and computes the same: %s", why);
    char *c = to_xml(one, 0);
    ok(!strstr(c, "xdeps="), "the split form is written without xdeps");
    free(c);
  }
  ir_prog_free(one);

  /* a script MSCCL could run keeps the one-dependency form */
  snprintf(script, sizeof script, "%s/allreduce_allpairs.lua", argv[1]);
  const char *ap[] = {"ranks=8", "shot=1", "chain=1"};
  d = rt_diag_new(10);
  ir_prog *plain = NULL;
  ok(cc_compile_file(script, ap, 3, NULL, &plain, NULL, d) == BT_OK && plain && !ir_prog_multideps(plain) &&
     !ir_prog_needs_baton(plain), "a program MSCCL could run is written with one dependency a step: %s",
     rt_diag_text(d));
  ir_prog_free(plain);
  rt_diag_free(d);

  /* bad xdeps are refused at their place */
  const char *key = " xdeps=\"";
  static const struct { const char *val, *expect, *what; } bad[] = {
      {"1:x", "is not a list of tb:step pairs", "a malformed pair"},
      {"-1:0", "is not a list of tb:step pairs", "a negative thread block"},
      {"1:0 2:0 3:0 4:0", "names more than 3 dependencies", "more than IR_MAX_DEPS"},
      {"99:0", "depends on tb 99, which does not exist", "a thread block that does not exist"},
      {"1:999", "which does not exist (tb 1 has", "a step that does not exist"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *m = with_attr(a, key, bad[i].val);
    ok_contains(errors_of(m), bad[i].expect, "xdeps: %s is refused with its place", bad[i].what);
    ok_contains(errors_of(m), "m.xml:", "... the message names the file and line");
    free(m);
  }
  /* a dependency on its own thread block, and xdeps without a depid */
  const char *first = strstr(a, key);
  const char *tbl = first;
  while (tbl > a && strncmp(tbl, "<tb id=\"", 8)) tbl--;
  int own = atoi(tbl + 8);
  char val[32];
  snprintf(val, sizeof val, "%d:0", own);
  char *m = with_attr(a, key, val);
  ok_contains(errors_of(m), "depends on its own thread block", "xdeps: a step's own thread block is refused");
  free(m);
  /* xdeps on a step whose depid/deps say -1 */
  const char *dep = first;
  while (dep > a && strncmp(dep, " depid=\"", 8)) dep--;
  const char *deps = strstr(dep, " deps=\""), *depsend = deps ? strchr(deps + 7, '"') : NULL;
  if (dep > a && depsend) {
    size_t n = strlen(a) + 64;
    char *u = malloc(n);
    snprintf(u, n, "%.*s depid=\"-1\" deps=\"-1%s", (int)(dep - a), a, depsend);
    ok_contains(errors_of(u), "xdeps without depid/deps", "xdeps without depid/deps is refused");
    free(u);
  } else {
    ok(0, "the written step with xdeps has depid and deps");
  }
  free(a);
  ir_prog_free(p);
  return tap_done();
}
