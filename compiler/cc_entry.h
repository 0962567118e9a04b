/* cc_entry.h -- the entry of libbaton_compile, the compiler as a loadable library
 * (compiler/cc_entry.map: this symbol only, in version node BATON_COMPILE_0.1). */
#ifndef CC_ENTRY_H
#define CC_ENTRY_H

#include <stddef.h>

/* The version node and name under which runtime/rt_tools.c looks the entry up (dlvsym). */
#define CC_ENTRY_VERSION "BATON_COMPILE_0.1"
#define CC_ENTRY_NAME "cc_entry_compile"

/* Compiles the Lua script at `script` with params[i] = "KEY=VALUE" (as
 * `baton compile -q SCRIPT --param ... -o OUT_PATH` does: fusion on, the
 * script's own size range, verified on the CPU executor) and writes the
 * IR to out_path.  Returns a bt_result (rt_result.h) as an int: BT_OK,
 * BT_ERR_INVALID (the script or the program it makes), BT_ERR_MISMATCH or
 * BT_ERR_DEADLOCK (the CPU runs), BT_ERR_SYSTEM (out_path not written),
 * BT_ERR_NOMEM.  On failure err (errlen bytes, cut to fit; may be NULL)
 * holds the compile's messages, as the baton program prints them. */
int cc_entry_compile(const char *script, const char *const *params, int nparams, const char *out_path, char *err,
                     size_t errlen);
typedef int (*cc_entry_fn)(const char *, const char *const *, int, const char *, char *, size_t);

#endif
