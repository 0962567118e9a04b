/* sim_spec.h -- a described system for `baton sim`: GPUs per node, NVLink,
 * the network's ports and wiring, protocol and step costs, compute rates.
 * A SPEC file is lines of "key value" ('#' starts a comment); every key is
 * a row of sim_spec.def, bounded, and an unknown, repeated or out-of-range
 * one is an error at its line. */
#ifndef SIM_SPEC_H
#define SIM_SPEC_H

#include <stddef.h>
#include <stdio.h>

#include "rt_diag.h"
#include "rt_result.h"

typedef enum sim_field {
#define X(id, key, def, lo, hi, doc) SIM_##id,
#include "sim_spec.def"
#undef X
  SIM_FIELD_COUNT
} sim_field;

/* A SPEC file is at most this many bytes, a line at most this long. */
#define SIM_SPEC_MAX_BYTES (1 << 16)
#define SIM_SPEC_MAX_LINE 512
/* The name a SPEC may give itself ("name h200x4"), at most this long. */
#define SIM_SPEC_MAX_NAME 64

typedef struct sim_spec {
  char name[SIM_SPEC_MAX_NAME];
  double v[SIM_FIELD_COUNT];   /* every field: its value, the default where the file has none */
} sim_spec;

/* The defaults of every field, named "default". */
void sim_spec_defaults(sim_spec *s);

/* Reads len bytes of text named `name` (for messages) into *s, starting
 * from the defaults.  BT_ERR_INVALID with each bad line in diag
 * ("NAME:LINE: ..."). */
bt_result sim_spec_read_memory(const char *text, size_t len, const char *name, sim_spec *s, rt_diag *diag);

/* The same from a file, read no further than SIM_SPEC_MAX_BYTES. */
bt_result sim_spec_read_file(const char *path, sim_spec *s, rt_diag *diag);

/* The system `what` names: "default" (the defaults), else a SPEC file. */
bt_result sim_spec_load(const char *what, sim_spec *s, rt_diag *diag);

/* Writes s as a SPEC file (every field, with its doc as a comment). */
void sim_spec_write(const sim_spec *s, FILE *f);

/* The fields as a Markdown table: key, default, range, meaning. */
void sim_spec_markdown(FILE *f);

#endif
