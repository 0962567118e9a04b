/* fz_spec.c -- fuzz target: a system description (the input's bytes)
 * through the SPEC reader and, when it reads, `baton sim` of a small
 * program on it at two sizes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir_check.h"
#include "ir_read.h"
#include "rt_diag.h"
#include "sim_run.h"

/* A 2-rank exchange with a dependency: each rank sends its chunk and
 * receives the other's, then copies it (messages, slots, a dependency). */
static const char prog_xml[] =
  "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" inplace=\"0\">"
  "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "<step s=\"1\" type=\"r\" srcbuf=\"o\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "</tb><tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">"
  "<step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "</tb></gpu>"
  "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "<step s=\"1\" type=\"r\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "</tb><tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">"
  "<step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
  "</tb></gpu></algo>";

static ir_prog *prog;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setenv("BATON_DEBUG", "NONE", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt_diag *d = rt_diag_new(8);
  if (!prog && (ir_read_memory(prog_xml, sizeof prog_xml - 1, "fz.xml", &prog, d) || ir_check(prog, d))) abort();
  sim_spec s;
  if (sim_spec_read_memory((const char *)data, size, "fz.spec", &s, d) == BT_OK) {
    /* small tiles would mean many events: the fuzzer looks at the reader and the model, not at the limits */
    if (s.v[SIM_SIMPLE_TILE] < 4) s.v[SIM_SIMPLE_TILE] = 4;
    if (s.v[SIM_MIN_TILE] < 4) s.v[SIM_MIN_TILE] = 4;
    static const uint64_t sizes[] = {8, 1 << 20};
    for (int k = 0; k < 2; k++) {
      sim_opts o = {.bytes = sizes[k], .dtype = IP_F32, .inplace = -1};
      sim_report rep;
      rt_diag_clear(d);
      if (sim_run(prog, &s, &o, &rep, d) == BT_OK && !(rep.time_us >= 0)) abort();   /* never negative or NaN */
    }
  }
  rt_diag_free(d);
  return 0;
}
