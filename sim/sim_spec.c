/* sim_spec.c -- the SPEC reader: "key value" lines, every field bounded. */
#include "sim_spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct field {
  const char *key, *doc;
  double def, lo, hi;
} fields[SIM_FIELD_COUNT] = {
#define X(id, key, def, lo, hi, doc) {key, doc, def, lo, hi},
#include "sim_spec.def"
#undef X
};

/* The fields whose values are counts: integers. */
static int integral(int f) {
  return f == SIM_NODES || f == SIM_GPUS || f == SIM_NICS || f == SIM_LANES || f == SIM_SLOTS || f == SIM_BLOCKS || f == SIM_NET_LANES;
}

void sim_spec_defaults(sim_spec *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "default");
  for (int f = 0; f < SIM_FIELD_COUNT; f++) s->v[f] = fields[f].def;
}

/* The text of [a, b) without the blanks around it, into out (size n). */
static void trimmed(const char *a, const char *b, char *out, size_t n) {
  while (a < b && isspace((unsigned char)*a)) a++;
  while (b > a && isspace((unsigned char)b[-1])) b--;
  size_t k = (size_t)(b - a) < n - 1 ? (size_t)(b - a) : n - 1;
  memcpy(out, a, k);
  out[k] = 0;
}

/* One line ("key value", a comment or blank); 0 when it is bad (said). */
static int read_line(const char *name, int line, const char *text, size_t len, sim_spec *s, unsigned char *seen,
                     rt_diag *diag) {
  char buf[SIM_SPEC_MAX_LINE + 1];
  if (len > SIM_SPEC_MAX_LINE) {
    rt_diag_add(diag, "%s:%d: a line is %zu bytes, over the limit of %d", name, line, len, SIM_SPEC_MAX_LINE);
    return 0;
  }
  memcpy(buf, text, len);
  buf[len] = 0;
  char *hash = strchr(buf, '#');
  if (hash) *hash = 0;
  for (char *c = buf; *c; c++)
    if (!isprint((unsigned char)*c) && !isspace((unsigned char)*c)) {
      rt_diag_add(diag, "%s:%d: a byte 0x%02x that is not text", name, line, (unsigned char)*c);
      return 0;
    }
  char *k = buf;
  while (isspace((unsigned char)*k)) k++;
  if (!*k) return 1;
  char *sp = k;
  while (*sp && !isspace((unsigned char)*sp)) sp++;
  char key[SIM_SPEC_MAX_LINE + 1], val[SIM_SPEC_MAX_LINE + 1];
  trimmed(k, sp, key, sizeof key);
  trimmed(sp, buf + strlen(buf), val, sizeof val);
  if (!*val) {
    rt_diag_add(diag, "%s:%d: %s has no value (\"key value\")", name, line, key);
    return 0;
  }
  if (!strcmp(key, "name")) {
    if (strlen(val) >= SIM_SPEC_MAX_NAME) {
      rt_diag_add(diag, "%s:%d: name is %zu characters, over the limit of %d", name, line, strlen(val),
                  SIM_SPEC_MAX_NAME - 1);
      return 0;
    }
    snprintf(s->name, sizeof s->name, "%s", val);
    return 1;
  }
  int f = 0;
  while (f < SIM_FIELD_COUNT && strcmp(fields[f].key, key)) f++;
  if (f == SIM_FIELD_COUNT) {
    rt_diag_add(diag, "%s:%d: unknown key '%s' (baton sim --fields lists them)", name, line, key);
    return 0;
  }
  if (seen[f]) {
    rt_diag_add(diag, "%s:%d: %s is given twice", name, line, key);
    return 0;
  }
  seen[f] = 1;
  char *end;
  errno = 0;
  double x = strtod(val, &end);
  if (errno || end == val || *end || !isfinite(x)) {
    rt_diag_add(diag, "%s:%d: %s: '%s' is not a number", name, line, key, val);
    return 0;
  }
  if (x < fields[f].lo || x > fields[f].hi) {
    rt_diag_add(diag, "%s:%d: %s %s is out of range [%g, %g]", name, line, key, val, fields[f].lo, fields[f].hi);
    return 0;
  }
  if (integral(f) && x != floor(x)) {
    rt_diag_add(diag, "%s:%d: %s %s is not a whole number", name, line, key, val);
    return 0;
  }
  s->v[f] = x;
  return 1;
}

bt_result sim_spec_read_memory(const char *text, size_t len, const char *name, sim_spec *s, rt_diag *diag) {
  sim_spec_defaults(s);
  if (!name) name = "<spec>";
  if (len > SIM_SPEC_MAX_BYTES) {
    rt_diag_add(diag, "%s:1: the system description is %zu bytes, over the limit of %d", name, len,
                SIM_SPEC_MAX_BYTES);
    return BT_ERR_INVALID;
  }
  unsigned char seen[SIM_FIELD_COUNT] = {0};
  int bad = 0, line = 1;
  for (size_t at = 0; at < len; line++) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    bad += !read_line(name, line, text + at, n, s, seen, diag);
    at += n + 1;
  }
  return bad ? BT_ERR_INVALID : BT_OK;
}

bt_result sim_spec_read_file(const char *path, sim_spec *s, rt_diag *diag) {
  sim_spec_defaults(s);
  FILE *f = fopen(path, "rb");
  if (!f) {
    rt_diag_add(diag, "%s: cannot open: %s", path, strerror(errno));
    return BT_ERR_INVALID;
  }
  char *buf = malloc(SIM_SPEC_MAX_BYTES + 1);
  if (!buf) {
    fclose(f);
    rt_diag_add(diag, "%s: out of memory", path);
    return BT_ERR_NOMEM;
  }
  size_t len = fread(buf, 1, SIM_SPEC_MAX_BYTES + 1, f);
  int err = ferror(f);
  fclose(f);
  bt_result r;
  if (err) {
    rt_diag_add(diag, "%s: cannot read", path);
    r = BT_ERR_INVALID;
  } else {
    r = sim_spec_read_memory(buf, len, path, s, diag);   /* one byte past the limit: refused there */
  }
  free(buf);
  return r;
}

bt_result sim_spec_load(const char *what, sim_spec *s, rt_diag *diag) {
  if (strcmp(what, "default")) return sim_spec_read_file(what, s, diag);
  sim_spec_defaults(s);
  return BT_OK;
}

void sim_spec_write(const sim_spec *s, FILE *f) {
  fprintf(f, "name %s\n", s->name);
  for (int k = 0; k < SIM_FIELD_COUNT; k++) fprintf(f, "%-20s %-10g # %s\n", fields[k].key, s->v[k], fields[k].doc);
}

void sim_spec_markdown(FILE *f) {
  fputs("| key | default | range | meaning |\n|---|---|---|---|\n", f);
  for (int k = 0; k < SIM_FIELD_COUNT; k++)
    fprintf(f, "| `%s` | %g | %g .. %g | %s |\n", fields[k].key, fields[k].def, fields[k].lo, fields[k].hi,
            fields[k].doc);
}
