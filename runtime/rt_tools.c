/* rt_tools.c -- baton_compile (in process through libbaton_compile, else the baton program run as a child) and
 * baton_verify (in process). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baton.h"
#include "cc_entry.h"
#include "ip_compute.h"
#include "ip_cpu.h"
#include "ir_check.h"
#include "ir_geom.h"
#include "ir_expect.h"
#include "ir_read.h"

extern char **environ;

/* Parameters one baton_compile takes (as `baton compile`). */
#define MAX_PARAMS 128

/* Writes the formatted message into err (errlen bytes; nothing when err
 * is NULL or errlen 0), cut to fit, without a trailing newline. */
static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  size_t n = strlen(err);
  while (n && err[n - 1] == '\n') err[--n] = 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* The folder libbaton.so was loaded from, into dir (PATH_MAX bytes);
 * 0 when it is unknown. */
static int lib_dir(char *dir) {
  Dl_info info;
  char lib[PATH_MAX];
  if (!dladdr((void *)lib_dir, &info) || !info.dli_fname || !realpath(info.dli_fname, lib)) return 0;
  snprintf(dir, PATH_MAX, "%s", lib);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  return 1;
}

/* The compiler in process: libbaton_compile.so.0 beside libbaton.so,
 * loaded once (with the system's shared Lua it needs), its entry looked
 * up by version node; NULL where either does not load (the GPU machines
 * carry no Lua), and baton_compile runs the baton program instead. */
static cc_entry_fn inproc;
static pthread_once_t inproc_once = PTHREAD_ONCE_INIT;
static void inproc_load(void) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!lib_dir(dir) || snprintf(path, sizeof path, "%s/libbaton_compile.so.0", dir) >= (int)sizeof path) return;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  inproc = (cc_entry_fn)dlvsym(h, CC_ENTRY_NAME, CC_ENTRY_VERSION);
  if (!inproc) dlclose(h);
}

/* Where the compiler is: the baton program of this library's build tree
 * (DIR/tools/baton beside DIR/libbaton.so) or installation
 * (PREFIX/bin/baton for PREFIX/lib/ or PREFIX/lib/<triplet>/libbaton.so).
 * Copies its path into out and returns 1; 0 with the places looked in
 * in out when there is none. */
static int find_compiler(char *out, size_t n) {
  static const char *const rel[] = {"tools/baton", "../bin/baton", "../../bin/baton"};
  char dir[PATH_MAX], looked[3 * PATH_MAX] = "";
  if (!lib_dir(dir)) {
    snprintf(out, n, "the path of libbaton.so is unknown");
    return 0;
  }
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char cand[PATH_MAX + 32];
    snprintf(cand, sizeof cand, "%s/%s", dir, rel[i]);
    if (!access(cand, X_OK)) {
      snprintf(out, n, "%s", cand);
      return 1;
    }
    size_t k = strlen(looked);
    snprintf(looked + k, sizeof looked - k, "%s%s", k ? ", " : "", cand);
  }
  snprintf(out, n, "%s", looked);
  return 0;
}

/* Runs argv (argv[0] the program's path) with stdin and stdout on
 * /dev/null and its standard error into text (n > 0 bytes, NUL-terminated,
 * the rest discarded); *status is its exit status, -1 when it did not
 * exit.  BT_ERR_SYSTEM with errno set when it cannot be started. */
static bt_result run_capture(char *const argv[], char *text, size_t n, int *status) {
  int fd[2], e = 0;
  if (pipe2(fd, O_CLOEXEC)) return BT_ERR_SYSTEM;
  posix_spawn_file_actions_t fa;
  pid_t pid;
  if ((e = posix_spawn_file_actions_init(&fa)) == 0) {
    if (!(e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
        !(e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) &&
        !(e = posix_spawn_file_actions_adddup2(&fa, fd[1], 2)))
      e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  close(fd[1]);
  if (e) {
    close(fd[0]);
    errno = e;
    return BT_ERR_SYSTEM;
  }
  size_t len = 0;
  char buf[4096];
  for (;;) {
    ssize_t k = read(fd[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    size_t keep = n - 1 - len < (size_t)k ? n - 1 - len : (size_t)k;
    memcpy(text + len, buf, keep);
    len += keep;
  }
  close(fd[0]);
  text[len] = 0;
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return BT_ERR_SYSTEM;
  *status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  return BT_OK;
}

/* baton.h: `baton compile -q SCRIPT --param ... -o OUT`: in process through
 * libbaton_compile where it loads, else the baton program of this
 * library's build or installation in a child process (libbaton itself
 * holds no Lua); the messages are the compile pipeline's either way
 * (compiler/cc_compile.c). */
baton_result baton_compile(const char *script, const char *const *params, int nparams, const char *out_path,
                           char *err, size_t errlen) {
  if (err && errlen) *err = 0;
  if (!script || !out_path || nparams < 0 || nparams > MAX_PARAMS || (nparams && !params)) {
    set_err(err, errlen, "baton_compile: %s", !script ? "script is NULL" : !out_path ? "out_path is NULL"
            : nparams > MAX_PARAMS ? "more than 128 parameters" : "nparams is negative, or params is NULL");
    return baton_invalid_argument;
  }
  for (int i = 0; i < nparams; i++)
    if (!params[i] || !strchr(params[i], '=') || params[i][0] == '=') {
      set_err(err, errlen, "baton_compile: parameter %d is '%s', not KEY=VALUE", i, params[i] ? params[i] : "(null)");
      return baton_invalid_argument;
    }
  if (is_dir(script)) {
    set_err(err, errlen, "baton_compile: %s is a directory, not a Lua script", script);
    return baton_invalid_argument;
  }
  pthread_once(&inproc_once, inproc_load);
  if (inproc) {
    switch ((bt_result)inproc(script, params, nparams, out_path, err, errlen)) {
    case BT_OK: return baton_success;
    case BT_ERR_MISMATCH: return baton_wrong_result;
    case BT_ERR_DEADLOCK: return baton_deadlock;
    case BT_ERR_SYSTEM: case BT_ERR_NOMEM: return baton_system_error;
    default: return baton_invalid_argument;
    }
  }
  char tool[3 * PATH_MAX + 16];
  if (!find_compiler(tool, sizeof tool)) {
    set_err(err, errlen, "baton_compile: neither libbaton_compile.so.0 (with the system's liblua5.4) loads nor is "
            "the baton program beside libbaton.so (looked for %s)", tool);
    return baton_system_error;
  }
  /* A script or output named "-..." would read as an option: "./-...". */
  char s_arg[PATH_MAX + 8], o_arg[PATH_MAX + 8];
  if (snprintf(s_arg, sizeof s_arg, "%s%s", script[0] == '-' ? "./" : "", script) >= (int)sizeof s_arg ||
      snprintf(o_arg, sizeof o_arg, "%s%s", out_path[0] == '-' ? "./" : "", out_path) >= (int)sizeof o_arg) {
    set_err(err, errlen, "baton_compile: a path longer than %d bytes", PATH_MAX);
    return baton_invalid_argument;
  }
  char *argv[2 * MAX_PARAMS + 8];
  int a = 0;
  argv[a++] = tool;
  argv[a++] = "compile";
  argv[a++] = "-q";
  argv[a++] = s_arg;
  for (int i = 0; i < nparams; i++) {
    argv[a++] = "--param";
    argv[a++] = (char *)params[i];
  }
  argv[a++] = "-o";
  argv[a++] = o_arg;
  argv[a] = NULL;
  int status;
  char text[8192];   /* the compiler's messages: 20 at most, and a summary */
  if (run_capture(argv, text, sizeof text, &status)) {
    set_err(err, errlen, "baton_compile: cannot run %s: %s", tool, strerror(errno));
    return baton_system_error;
  }
  if (status == 0) return baton_success;
  set_err(err, errlen, "%s", text);
  if (status < 0) {
    set_err(err, errlen, "baton_compile: %s stopped without an exit status", tool);
    return baton_system_error;
  }
  if (strstr(text, "cannot write")) return baton_system_error;
  if (strstr(text, "fails on the CPU executor")) return strstr(text, "deadlock") ? baton_deadlock : baton_wrong_result;
  return baton_invalid_argument;
}

baton_result baton_verify(const char *ir_path, char *err, size_t errlen) {
  return baton_verify_with(ir_path, NULL, err, errlen);
}

/* baton.h: baton verify's checks and its CPU run, on one file, with o. */
baton_result baton_verify_with(const char *ir_path, const baton_verify_opts *o, char *err, size_t errlen) {
  static const baton_verify_opts none = {0};
  if (!o) o = &none;
  if (err && errlen) *err = 0;
  if (!ir_path) {
    set_err(err, errlen, "baton_verify: ir_path is NULL");
    return baton_invalid_argument;
  }
  if (o->placement < 0 || o->placement > 2 || o->count < 0 || o->count > IR_GEOM_MAX_ELEMS) {
    set_err(err, errlen, "baton_verify: placement %d (0 the program's own, 1 in place, 2 out of place) or count %lld "
            "(0..%lld) out of range", o->placement, o->count, (long long)IR_GEOM_MAX_ELEMS);
    return baton_invalid_argument;
  }
  if (is_dir(ir_path)) {
    set_err(err, errlen, "baton_verify: %s is a directory, not an IR file", ir_path);
    return baton_invalid_argument;
  }
  rt_diag *d = rt_diag_new(20);
  if (!d) {
    set_err(err, errlen, "baton_verify: out of memory");
    return baton_out_of_memory;
  }
  ir_prog *p = NULL;
  ir_expect *ex = NULL;
  bt_result r = ir_read_file(ir_path, &p, d);
  if (!r) r = ir_check(p, d);
  if (r) {
    set_err(err, errlen, "%s: invalid\n%s", ir_path, rt_diag_text(d));
    goto out;
  }
  if (o->expect && p->coll != IR_COLL_CUSTOM) {
    set_err(err, errlen, "%s: expect is for custom collectives; %s has its own postcondition", ir_path,
            ir_coll_name[p->coll]);
    r = BT_ERR_INVALID;
    goto out;
  }
  if (o->expect && (r = ir_expect_parse(o->expect, "expect", &ex, d))) {
    set_err(err, errlen, "baton_verify: %s", rt_diag_text(d));
    goto out;
  }
  const int inplace = o->placement == 1 ? 1 : o->placement == 2 ? 0 : p->inplace;
  int unchecked = 0;
  if ((r = ir_check_races_of(p, ir_prog_aliased(p, inplace), &unchecked, d))) {
    set_err(err, errlen, "%s: unsafe\n%s", ir_path, rt_diag_text(d));
    goto out;
  }
  if (unchecked) {
    set_err(err, errlen, "%s: not verified: the race check was skipped on %d of %d ranks (the program is over the "
            "check's size limit)", ir_path, unchecked, p->ngpus);
    r = BT_ERR_UNSUPPORTED;
    goto out;
  }
  /* baton verify's default run: f32 sum, or bf16 for a program whose
   * compute steps take only that; a fused or interleaved program at
   * dimensions and a count that fit it (ip_dims_fit) unless the count is
   * given. */
  ip_dims dims = {0};
  ip_cpu_opts c = {.dtype = IP_F32, .op = IP_OP_SUM, .count = o->count ? o->count : 4099, .tile = 128,
                   .inplace = o->placement == 1 ? 1 : o->placement == 2 ? 0 : -1, .dims = &dims, .expect = ex};
  if (!ip_compute_takes(p, IP_F32) && ip_compute_takes(p, IP_BF16)) c.dtype = IP_BF16;
  if (!o->count && (ir_prog_fused(p) || p->interleave)) c.count = ip_dims_fit(p, &dims, c.count);
  ip_cpu_report rep;
  char what[64];
  if ((r = ip_cpu_verify(p, &c, &rep, d))) {
    set_err(err, errlen, "%s: %s with %s %s count=%lld\n%s", ir_path, ip_cpu_verdict(r, 0, what, sizeof what),
            ip_dtype_name[c.dtype], ip_redop_name[c.op], (long long)c.count, rt_diag_text(d));
  } else if ((r = ip_cpu_verify_routes(p, &c, &rep, d))) {
    /* the routes exactly, as baton verify checks them (values can miss a misrouted chunk) */
    set_err(err, errlen, "%s: %s with every element's origin traced\n%s", ir_path,
            ip_cpu_verdict(r, 1, what, sizeof what), rt_diag_text(d));
  }
out:
  ir_expect_free(ex);
  ir_prog_free(p);
  rt_diag_free(d);
  return (baton_result)r;
}
