/* tool_opt.c -- what the subcommands share to read their command lines:
 * getopt_long with errors in the command's own words, numbers with
 * suffixes, a fused program's --dim, folders refused where a file is
 * wanted. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ip_compute.h"
#include "tool.h"

int tool_getopt(const char *cmd, int argc, char **argv, const char *shorts, const struct option *longs) {
  char spec[64];
  snprintf(spec, sizeof spec, ":%s", shorts);   /* ':' first: a missing value is ':', not '?' */
  int c = getopt_long(argc, argv, spec, longs, NULL);
  if (c != '?' && c != ':') return c;
  const char *what = argv[optind - 1];   /* a long option as given */
  char one[3] = {'-', (char)optopt, 0};
  if (optopt > 0 && optopt < 256) what = one;   /* a short option (maybe in a bundle): its letter */
  if (c == ':') fprintf(stderr, "baton %s: %s needs a value\n", cmd, what);
  else fprintf(stderr, "baton %s: unknown option '%s'\n", cmd, what);
  return '?';
}

void tool_getopt_reset(void) {
  optind = 0;   /* GNU: start over (one process may parse several command lines: baton set) */
  opterr = 0;
}

int tool_parse_count(const char *v, int suffixed, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (end == v || (errno && errno != ERANGE)) return 0;
  int shift = 0;
  if (suffixed && *end) {
    const char *units = "KMG", *u = strchr(units, toupper((unsigned char)end[0]));
    if (!u || end[1]) return 0;
    shift = 10 * (int)(u - units + 1);
  } else if (*end) {
    return 0;
  }
  if (errno == ERANGE) return -1;
  if (shift && (x > (LLONG_MAX >> shift) || x < (LLONG_MIN >> shift))) return -1;
  *out = shift ? (long long)((unsigned long long)x << shift) : x;
  return 1;
}

/* tool_int and tool_size: v into *out within [lo, hi], or a message. */
static int range_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, int suffixed,
                     long long *out) {
  long long x = 0;
  int r = tool_parse_count(v, suffixed, &x);
  if (!r) {
    fprintf(stderr, "baton %s: bad %s '%s': not an integer%s\n", cmd, opt, v, suffixed ? " (suffixes K, M, G allowed)" : "");
    return 0;
  }
  if (r < 0 || x < lo || x > hi) {
    fprintf(stderr, "baton %s: bad %s '%s': must be %lld..%lld\n", cmd, opt, v, lo, hi);
    return 0;
  }
  *out = x;
  return 1;
}

int tool_int(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out) {
  return range_int(cmd, opt, v, lo, hi, 0, out);
}

int tool_size(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out) {
  return range_int(cmd, opt, v, lo, hi, 1, out);
}

int tool_is_dir(const char *cmd, const char *path, const char *want) {
  struct stat st;
  if (stat(path, &st) || !S_ISDIR(st.st_mode)) return 0;
  fprintf(stderr, "baton %s: %s is a directory, not %s\n", cmd, path, want);
  return 1;
}

int tool_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  return 0;
}


int tool_dim(const char *cmd, struct ip_dims *dims, const char *v) {
  const char *eq = strchr(v, '=');
  long long x;
  char spec[IR_MAX_NAME + 32];
  if (eq && (size_t)(eq - v) < IR_MAX_NAME && tool_parse_count(eq + 1, 1, &x) == 1) {
    snprintf(spec, sizeof spec, "%.*s=%lld", (int)(eq - v), v, x);
    if (ip_dims_parse(dims, spec) == 0) return 1;
  }
  fprintf(stderr, "baton %s: bad --dim '%s' (NAME=N, N in 1..%lld, at most %d)\n", cmd, v, (long long)IP_MAX_DIM,
          IP_MAX_DIMS);
  return 0;
}

int tool_dims_known(const char *path, const struct ir_prog *p, const struct ip_dims *dims) {
  for (int k = 0; k < dims->n; k++) {
    char names[256];
    if (ip_dims_names(p, dims->name[k], names, sizeof names)) continue;
    fprintf(stderr, "%s: --dim %s: the program has no such dimension (%s%s)\n", path, dims->name[k],
            *names ? "its dimensions: " : "it binds none", names);
    return 0;
  }
  return 1;
}
