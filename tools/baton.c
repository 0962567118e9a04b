/* baton.c -- the command-line tool: one program, one subcommand per stage. */
#include <stdio.h>
#include <string.h>

#include "tool.h"

static const tool_cmd cmds[] = {
  {"compile", tool_compile, "compile a Lua algorithm script into verified XML IR"},
  {"set",     tool_set,     "compile the default algorithm set for N ranks (one program per collective and size range)"},
  {"verify",  tool_verify,  "validate IR files, run them on the CPU executor and check the result"},
  {"explain", tool_explain, "print a readable per-rank, per-thread-block listing of IR files"},
  {"ops",     tool_ops,     "print the IR opcode table (Markdown)"},
  {"params",  tool_params,  "print every environment parameter with its default and current value"},
  {"bench",   tool_bench,   "time a collective with NCCL and with baton side by side (nccl-tests style)"},
  {"sim",     tool_sim,     "predict a program's time on a described system (event-driven, by the CPU executor)"},
};
enum { NCMDS = sizeof cmds / sizeof cmds[0] };

static void usage(FILE *f) {
  fprintf(f, "usage: baton COMMAND [options] [args]\n\ncommands:\n");
  for (int i = 0; i < NCMDS; i++) fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].doc);
  fprintf(f, "\noptions shared by the commands that take them:\n"
             "  -d, --dtype T   f32, f64, f16, bf16, i32, u32, i64, u64, i8, u8, or (verify) all\n"
             "  -o FILE|DIR     where compile and set write (and nothing else: verify's operator\n"
             "                  is --op; bench keeps nccl-tests' letters, -o its operator)\n"
             "  --op OP         sum, prod, max, min, avg, or (verify) all\n"
             "  sizes, counts   K, M, G suffixes, x1024, x1024^2, x1024^3 (64K is 65536): every\n"
             "                  number of verify (--count, --tile, --dim NAME=N, --slots, --ranks),\n"
             "                  compile's --sizes, bench's -b, -e, -i\n"
             "  -q, --quiet     less output; compile -v (--verbose): a script error's Lua traceback;\n"
             "                  verify -v: the FIFO slots each file runs with, and why\n"
             "  options are read by getopt_long: -oFILE or -o FILE, --opt=V or --opt V, a long\n"
             "  option by any unique start (--cou), short ones together (-qv), -- before a\n"
             "  file whose name starts with -\n");
  fprintf(f, "\n'baton COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) { usage(stderr); return 2; }
  if (!strcmp(argv[1], "help") && argc > 2) {   /* baton help CMD: CMD --help */
    for (int i = 0; i < NCMDS; i++)
      if (!strcmp(argv[2], cmds[i].name)) {
        char *args[] = {argv[2], "--help", NULL};
        return cmds[i].fn(2, args);
      }
    fprintf(stderr, "baton: unknown command '%s'\n", argv[2]);
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) { printf("baton %s\n", BATON_VERSION); return 0; }
  for (int i = 0; i < NCMDS; i++)
    if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "baton: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
