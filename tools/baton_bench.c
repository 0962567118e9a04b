/* baton_bench.c -- baton-bench: the GPU side of `baton bench`, which the
 * baton command execs for a run (tool_bench.c, built here with the GPU
 * runtime).  Takes bench's own arguments. */
#include "tool.h"

int main(int argc, char **argv) { return tool_bench(argc, argv); }
