/* rt_nccl_load.c -- finding and loading the real NCCL that baton's
 * libnccl.so.2 forwards to, and the library's error messages. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rt_algo.h"
#include "rt_log.h"
#include "rt_nccl.h"
#include "rt_param.h"

static rt_nccl_real real;
static int have_real;
static char why[1024];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Where NCCL usually is when BATON_NCCL_LIB is not set: the loader's own
 * search first (LD_LIBRARY_PATH, the application's rpath, ld.so.cache),
 * then the CUDA toolkit's and the distributions' folders. */
static const char *const usual[] = {
  "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
  "/usr/lib/aarch64-linux-gnu/libnccl.so.2", "/usr/lib64/libnccl.so.2", "/usr/local/lib/libnccl.so.2",
};

static void why_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void why_add(const char *fmt, ...) {
  size_t n = strlen(why);
  if (n && n + 2 < sizeof why) { strcpy(why + n, "; "); n += 2; }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + n, sizeof why - n, fmt, ap);
  va_end(ap);
}

/* Opens one candidate.  RTLD_DEEPBIND: the real NCCL's calls to its own
 * exported functions (ncclBcast calls ncclBroadcast) must reach its own
 * definitions, not this library's, which the application loaded first.
 * Refuses this library itself: loaded as libnccl.so.2 (LD_PRELOAD, or
 * first in the path), dlopen("libnccl.so.2") returns our own handle. */
static int try_open(const char *path) {
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!dl) {
    why_add("%s", dlerror());   /* names the path */
    return 0;
  }
  void *gv = dlsym(dl, "ncclGetVersion");
  Dl_info mine, theirs;
  if (gv && dladdr((void *)try_open, &mine) && dladdr(gv, &theirs) && mine.dli_fbase == theirs.dli_fbase) {
    why_add("%s is baton's own libnccl.so.2, not the real NCCL (set BATON_NCCL_LIB to the real one's path)", path);
    dlclose(dl);
    return 0;
  }
  if (!gv || !dlsym(dl, "ncclGetUniqueId") || !dlsym(dl, "ncclCommInitRank") || !dlsym(dl, "ncclBroadcast") ||
      !dlsym(dl, "ncclAllReduce") || !dlsym(dl, "ncclGroupStart") || !dlsym(dl, "ncclGroupEnd")) {
    why_add("%s is not NCCL (no ncclGetVersion, ncclCommInitRank, ncclBroadcast, ncclAllReduce or groups)", path);
    dlclose(dl);
    return 0;
  }
#define F(ret, name, params, args, how) real.name = (ret(*) params)dlsym(dl, "nccl" #name);
#include "rt_nccl.def"
#undef F
  snprintf(real.path, sizeof real.path, "%s", path);
  real.GetVersion(&real.version);
  return 1;
}

static void load(void) {
  const char *lib = rt_param_str(RT_PARAM_NCCL_LIB);
  if (lib && *lib) {
    have_real = try_open(lib);
    if (!have_real) {
      char tmp[sizeof why];
      memcpy(tmp, why, sizeof tmp);
      int k = snprintf(why, sizeof why, "BATON_NCCL_LIB: ");
      if (k > 0 && k < (int)sizeof why) snprintf(why + k, sizeof why - k, "%.900s", tmp);
      LOG_WARN(RT_SUB_NCCL, "no real NCCL loaded: %s; only what baton runs itself will work", why);
      return;
    }
  } else {
    for (size_t i = 0; i < sizeof usual / sizeof usual[0] && !have_real; i++) have_real = try_open(usual[i]);
    if (!have_real) {
      LOG_INFO(RT_SUB_NCCL, "no real NCCL found (%s): only what baton runs itself will work", why);
      return;
    }
    if (why[0]) LOG_INFO(RT_SUB_NCCL, "skipped: %s", why);
  }
  LOG_INFO(RT_SUB_NCCL, "baton %s forwarding to the real NCCL %d.%d.%d loaded from %s", baton_version(),
           real.version / 10000, real.version / 100 % 100, real.version % 100, real.path);
}

const rt_nccl_real *rt_nccl_real_get(void) {
  pthread_once(&once, load);
  return have_real ? &real : NULL;
}

const char *rt_nccl_real_why(void) {
  pthread_once(&once, load);
  return have_real ? "" : why;
}

int rt_nccl_baton_wanted(int nranks) {
  char def[4096];
  if (!rt_param_int(RT_PARAM_ENABLE)) return 0;
  return *rt_param_str(RT_PARAM_ALGO_FILES) || *rt_param_str(RT_PARAM_ALGO_DIR) ||
         *rt_param_str(RT_PARAM_MSCCL_FILES) || rt_algos_default_dir(nranks, def, sizeof def);
}

const rt_nccl_real *rt_nccl_foreign(ncclComm_t c) {
  if (!c || c->magic == RT_NCCL_MAGIC) return NULL;
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n) LOG_TRACE(RT_SUB_NCCL, "communicator %p is not one of this library's: handed to the real NCCL as is", (void *)c);
  return n;
}

ncclComm_t rt_nccl_real_comm(ncclComm_t c) {
  if (!c) return NULL;
  if (c->magic != RT_NCCL_MAGIC) {
    if (rt_nccl_foreign(c)) return c;
    rt_nccl_fail(ncclInvalidArgument, "communicator %p was not made by this library", (void *)c);
    return NULL;
  }
  return c->real;
}

/* The last error message of this library, for ncclGetLastError.  NCCL
 * keeps one per process too. */
static char last[1024];
static int last_set;
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;

ncclResult_t rt_nccl_fail(ncclResult_t r, const char *fmt, ...) {
  char msg[sizeof last];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  LOG_WARN(RT_SUB_NCCL, "%s", msg);
  pthread_mutex_lock(&last_mu);
  memcpy(last, msg, sizeof last);
  last_set = 1;
  pthread_mutex_unlock(&last_mu);
  return r;
}

ncclResult_t rt_nccl_unavailable(const char *call) {
  return rt_nccl_fail(ncclInvalidUsage, "%s: baton does not run this call and there is no real NCCL to forward it "
                      "to (%s)", call, rt_nccl_real_why());
}

const char *rt_nccl_last_error(void) { return last_set ? last : NULL; }

void rt_nccl_clear_error(void) {
  if (!last_set) return;
  pthread_mutex_lock(&last_mu);
  last_set = 0;
  pthread_mutex_unlock(&last_mu);
}

ncclResult_t rt_nccl_from_baton(baton_result r) {
  switch (r) {
  case baton_success: return ncclSuccess;
  case baton_invalid_argument: return ncclInvalidArgument;
  case baton_unsupported: return ncclInvalidUsage;
  case baton_cuda_error: return ncclUnhandledCudaError;
  case baton_out_of_memory:
  case baton_system_error: return ncclSystemError;
  case baton_timeout:
  case baton_aborted:
  case baton_remote_error: return ncclRemoteError;
  default: return ncclInternalError;
  }
}

ncclResult_t rt_nccl_GetVersion(int *version) {
  if (!version) return rt_nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  const rt_nccl_real *n = rt_nccl_real_get();
  *version = n ? n->version : NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *rt_nccl_GetErrorString(ncclResult_t r) {
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n && n->GetErrorString) return n->GetErrorString(r);
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "a remote rank failed, timed out or was aborted";
  case ncclInProgress: return "operation in progress";
  default: return "unknown result code";
  }
}

const char *rt_nccl_GetLastError(ncclComm_t comm) {
  const char *mine = rt_nccl_last_error();
  if (mine) return mine;
  const rt_nccl_real *n = rt_nccl_real_get();
  if (n && n->GetLastError) return n->GetLastError(comm && comm->magic == RT_NCCL_MAGIC ? comm->real : NULL);
  return "";
}
