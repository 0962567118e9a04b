/* tool.h -- subcommands of the baton tool. */
#ifndef TOOL_H
#define TOOL_H

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

/* Shared option parsing: returns the value of "--name V" or "--name=V" at
 * argv[*i] (advancing *i), and for a one-letter name also "-nV", or NULL
 * when argv[*i] is not that option. */
const char *tool_opt(int argc, char **argv, int *i, const char *name);

/* Parses v, the value of option `opt` of command `cmd`, as a decimal
 * integer in [lo, hi] into *out.  Otherwise prints why to stderr ("baton
 * verify: bad --slots '0': must be 1..1024", "... not an integer") and
 * returns 0: no overflow, trailing text or empty value passes. */
int tool_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);

/* Parses v like tool_int, with an optional binary suffix: K (x1024), M
 * (x1024^2) or G (x1024^3), upper or lower case ("64K" is 65536); the
 * range applies to the value with its suffix. */
int tool_size(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out);

/* When path is a directory, prints "baton CMD: PATH is a directory, not
 * WANT" (WANT: "a Lua script", "an IR file") to stderr and returns 1;
 * else 0 (a path that does not exist is left to the reader's error). */
int tool_is_dir(const char *cmd, const char *path, const char *want);

/* True when argv holds --help or -h. */
int tool_wants_help(int argc, char **argv);

#endif
