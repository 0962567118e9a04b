/* tool.h -- subcommands of the baton tool. */
#ifndef TOOL_H
#define TOOL_H

#include <getopt.h>

/* Each subcommand takes argv with argv[0] = its own name and returns the
 * process exit code: 0 success, 1 the check failed, 2 bad usage. */
typedef struct tool_cmd {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *doc;
} tool_cmd;

int tool_compile(int argc, char **argv);
int tool_verify(int argc, char **argv);
int tool_explain(int argc, char **argv);
int tool_ops(int argc, char **argv);
int tool_params(int argc, char **argv);
int tool_bench(int argc, char **argv);
int tool_set(int argc, char **argv);
int tool_sim(int argc, char **argv);

/* baton set --system (tool_tune.c): the set in dir, its size ranges moved
 * to the crossovers simulated on spec.  0, or 1 (said). */
struct sim_spec;
/* The system `what` names ("default", or a SPEC file: sim_spec_load) into
 * *s; 0 when it cannot be read, said as "baton CMD: invalid system
 * description" and each bad line. */
int tool_system(const char *cmd, const char *what, struct sim_spec *s);
int tool_set_tune(const char *dir, const struct sim_spec *spec, int quiet);

/* baton compile --tune (tool_tune.c): every variant of the script's
 * protocol, instances and channels (those it reads and the command line
 * leaves open) compiled and simulated on spec; each run of sizes with one
 * fastest variant written into outdir with its size range.  0, or 1. */
int tool_compile_tune(const char *script, const char *const *params, int nparams, const struct sim_spec *spec,
                      const char *outdir, int quiet);

/* Command lines are read with getopt_long (tool_opt.c): call
 * tool_getopt_reset() first, then tool_getopt() until it returns -1;
 * operands are then argv[optind .. argc-1] (GNU getopt moves them to the
 * end).  tool_getopt returns what getopt_long returns, except that an
 * unknown option or one without its value is said in the command's words
 * ("baton verify: unknown option '--frob'", "baton compile: -o needs a
 * value") and returns '?'.  `shorts` as getopt's, without a leading ':'. */
void tool_getopt_reset(void);
int tool_getopt(const char *cmd, int argc, char **argv, const char *shorts, const struct option *longs);

/* Parses v as a decimal integer with an optional binary suffix (K, M, G,
 * either case; none when suffixed is 0) into *out: 1, or 0 not an integer
 * (with that suffix rule), -1 past the 64-bit range. */
int tool_parse_count(const char *v, int suffixed, long long *out);

/* Parses v, the value of option `opt` of command `cmd`, as a decimal
 * integer in [lo, hi] into *out.  Otherwise prints why to stderr ("baton
 * verify: bad --slots '0': must be 1..1024", "... not an integer") and
 * returns 0: no overflow, trailing text or empty value passes. */
int tool_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);

/* Parses v like tool_int, with an optional binary suffix: K (x1024), M
 * (x1024^2) or G (x1024^3), upper or lower case ("64K" is 65536); the
 * range applies to the value with its suffix. */
int tool_size(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);

/* --dim NAME=N of command `cmd` (N with an optional K, M or G suffix)
 * into dims: 1, or 0 when malformed, out of range or one dimension too
 * many, said as "baton CMD: bad --dim 'V' (NAME=N, ...)". */
struct ip_dims;
int tool_dim(const char *cmd, struct ip_dims *dims, const char *v);

/* Whether program p (read from path) has every dimension dims binds (a
 * --dim it never reads is a typo, not a no-op); else prints "PATH: --dim
 * NAME: the program has no such dimension (its dimensions: ...)" and
 * returns 0. */
struct ir_prog;
int tool_dims_known(const char *path, const struct ir_prog *p, const struct ip_dims *dims);

/* When path is a directory, prints "baton CMD: PATH is a directory, not
 * WANT" (WANT: "a Lua script", "an IR file") to stderr and returns 1;
 * else 0 (a path that does not exist is left to the reader's error). */
int tool_is_dir(const char *cmd, const char *path, const char *want);

/* True when argv holds --help or -h. */
int tool_wants_help(int argc, char **argv);

#endif
