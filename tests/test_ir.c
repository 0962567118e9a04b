/* test_ir.c -- the IR library: opcode table, XML round trip, geometry,
 * precise errors on broken variants of the MSCCL corpus, and the rules of
 * direct programs. */
#include "direct_build.h"
#include "ir.h"
#include "ir_check.h"
#include "ir_dealias.h"
#include "ir_geom.h"
#include "ir_read.h"
#include "ir_write.h"
#include "sbuf.h"
#include "tap.h"

#include <stdarg.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *corpus;
static const char *fused_file;   /* tests/fused_2r.xml: a 2-rank GEMV + AllReduce */

/* Reads `text` as file `name`, validates it, and returns the messages
 * ("" when valid). */
static char *errors_of(const char *text, const char *name) {
  static char buf[8192];
  rt_diag *d = rt_diag_new(20);
  ir_prog *p = NULL;
  if (!ir_read_memory(text, strlen(text), name, &p, d)) ir_check(p, d);
  snprintf(buf, sizeof buf, "%s", rt_diag_text(d));
  ir_prog_free(p);
  rt_diag_free(d);
  return buf;
}

/* Whether the MSCCL corpus is here; where it is not (a fresh clone has no
 * ../shared), `what` is one skipped test point saying so. */
static int have_corpus(const char *what) {
  char path[1024];
  snprintf(path, sizeof path, "%s/allgather_ring_4r_simple.xml", corpus);
  FILE *f = fopen(path, "r");
  if (f) {
    fclose(f);
    return 1;
  }
  tap_skip("%s: needs the MSCCL corpus, missing at %s (README, Tests)", what, corpus);
  return 0;
}

static char *corpus_file(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", corpus, name);
  char *s = tap_slurp(path);
  if (!s) { printf("Bail out! cannot read %s\n", path); exit(1); }
  return s;
}

/* Applies one mutation to a corpus file and checks the error message. */
static void broken(const char *file, const char *from, const char *to, int nth,
                   const char *expect, const char *what) {
  char *orig = corpus_file(file);
  char *mut = tap_replace(orig, from, to, nth);
  ok(mut != NULL, "%s: mutation applies (%s)", file, what);
  if (mut) ok_contains(errors_of(mut, file), expect, "%s: %s is reported precisely", file, what);
  free(mut);
  free(orig);
}

static void test_ops(void) {
  for (int i = 0; i < IR_OP_COUNT; i++) {
    ok(ir_op_from_xml(ir_op_xml[i]) == (ir_op)i, "opcode %s round-trips through its XML code", ir_op_id[i]);
    for (int j = 0; j < i; j++)
      if (!strcmp(ir_op_xml[i], ir_op_xml[j])) ok(0, "XML codes are unique (%s)", ir_op_xml[i]);
  }
  ok(ir_op_from_xml("rrx") == IR_OP_COUNT, "unknown codes are refused");
  ok((ir_op_flags[IR_OP_RRCS] & (IR_F_RECV | IR_F_SRC | IR_F_RED | IR_F_DST | IR_F_SEND)) ==
         (IR_F_RECV | IR_F_SRC | IR_F_RED | IR_F_DST | IR_F_SEND), "rrcs receives, reduces, copies and sends");
}

static char *to_xml(const ir_prog *p) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  ir_write(p, f);
  fclose(f);
  return buf;
}

static void test_roundtrip(const char *name) {
  if (!have_corpus(name)) return;
  char *text = corpus_file(name);
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL, *q = NULL;
  ok(!ir_read_memory(text, strlen(text), name, &p, d) && !ir_check(p, d), "%s loads and validates", name);
  char *a = to_xml(p);
  ok(!ir_read_memory(a, strlen(a), "written", &q, d) && !ir_check(q, d), "%s: written XML loads again", name);
  char *b = to_xml(q);
  ok(!strcmp(a, b), "%s: write(read(write(x))) == write(x)", name);
  ok(p->version == 0 && !strstr(a, "baton=") && !strstr(a, "prov=") && !strstr(a, "proto=\"baton-"),
     "%s: a file using no extension is written as plain MSCCL (its protocol's own name)", name);
  ok(ir_prog_nsteps(p) == ir_prog_nsteps(q) && p->ngpus == q->ngpus && p->coll == q->coll &&
     p->inplace == q->inplace && p->proto == q->proto, "%s: header and step count survive", name);
  free(a); free(b); free(text);
  ir_prog_free(p); ir_prog_free(q);
  rt_diag_free(d);
}

static void test_extensions(void) {
  const char *x =
    "<algo name=\"e\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" inplace=\"0\""
    " minBytes=\"1024\" maxBytes=\"65536\" nthreads=\"256\" baton=\"1\">\n"
    " <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
    "  <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" prov=\"ag.lua:3\"/>\n"
    "  <step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" prov=\"ag.lua:4\"/>\n"
    "  <step s=\"2\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n"
    " </tb></gpu>\n"
    " <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
    "  <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/>\n"
    "  <step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n"
    "  <step s=\"2\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/>\n"
    " </tb></gpu></algo>\n";
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL;
  ok(!ir_read_memory(x, strlen(x), "ext.xml", &p, d) && !ir_check(p, d), "baton extensions load: %s", rt_diag_text(d));
  if (!p) { rt_diag_free(d); return; }
  ok(p->minbytes == 1024 && p->maxbytes == 65536 && p->nthreads == 256 && p->version == 1,
     "size range, nthreads and schema version are read");
  ok(p->gpus[0].tbs[0].steps[1].prov && !strcmp(p->gpus[0].tbs[0].steps[1].prov, "ag.lua:4"), "provenance is read");
  char *a = to_xml(p);
  ok_contains(a, "prov=\"ag.lua:3\"", "provenance is written");
  ok_contains(a, "minBytes=\"1024\" maxBytes=\"65536\" nthreads=\"256\" baton=\"1\"", "extensions are written");
  ok(!ir_prog_needs_baton(p) && strstr(a, " proto=\"LL\" "), "extensions MSCCL runs alike keep the protocol's name");
  free(a);
  ir_prog_free(p);
  /* A strided step: MSCCL would ignore the pattern, so the protocol is
   * written "baton-LL", which MSCCL's loaders refuse, and read back as LL. */
  const char *mark = " prov=\"ag.lua:3\"", *at = strstr(x, mark), *run = " srcrun=\"1\" srcstride=\"1\"";
  char *y = malloc(strlen(x) + strlen(run) + 1);
  sprintf(y, "%.*s%s%s", (int)(at - x), x, run, at);
  p = NULL;
  ok(!ir_read_memory(y, strlen(y), "strided.xml", &p, d) && p && ir_prog_needs_baton(p), "a strided step needs baton: %s",
     rt_diag_text(d));
  a = p ? to_xml(p) : NULL;
  ok(a && strstr(a, " proto=\"baton-LL\" "), "a program MSCCL would run otherwise is marked proto=\"baton-LL\"");
  ir_prog *q = NULL;
  ok(a && !ir_read_memory(a, strlen(a), "marked.xml", &q, d) && q && q->proto == IR_PROTO_LL,
     "baton-LL reads back as LL");
  free(a);
  ir_prog_free(p);
  ir_prog_free(q);
  char *z = strdup(x);
  memcpy(strstr(z, "proto=\"LL\""), "proto=\"Lx\"", 10);
  p = NULL;
  rt_diag_clear(d);
  ok(ir_read_memory(z, strlen(z), "bad.xml", &p, d) && strstr(rt_diag_text(d), "baton-Simple, baton-LL or baton-LL128"),
     "an unknown protocol names both forms: %s", rt_diag_text(d));
  ir_prog_free(p);
  free(y);
  free(z);
  rt_diag_free(d);
}

static void test_geometry(void) {
  if (!have_corpus("buffer geometry of the corpus's ring AllGather")) return;
  char *text = corpus_file("allgather_ring_4r_simple.xml");
  rt_diag *d = rt_diag_new(4);
  ir_prog *p = NULL;
  ir_read_memory(text, strlen(text), "ag", &p, d);
  ir_geom g;
  ok(!ir_geom_init(&g, p, 2, 5, 1), "allgather geometry for count 5");
  ok(g.k == 1 && g.cap == 5 && g.chunks[IR_BUF_OUTPUT] == 4 && g.chunks[IR_BUF_INPUT] == 1,
     "allgather: one chunk per rank block, output 4 chunks");
  ok(g.in_at == 10 && g.span == 20, "in place, rank 2's input sits at its block of the output");
  p->nchunksperloop = 8;   /* two chunks per block now */
  ir_geom_init(&g, p, 0, 5, 0);
  ok(g.k == 2 && g.cap == 3, "count 5 over 2 chunks gives capacity 3");
  ok(ir_geom_len(&g, IR_BUF_OUTPUT, 0) == 3 && ir_geom_len(&g, IR_BUF_OUTPUT, 1) == 2 &&
     ir_geom_off(&g, IR_BUF_OUTPUT, 3) == 5 + 3, "uneven counts: chunk lengths 3 and 2, blocks of 5");
  ir_geom_init(&g, p, 0, 1, 0);
  ok(ir_geom_len(&g, IR_BUF_OUTPUT, 1) == 0, "a count smaller than the chunks leaves empty chunks");
  ok(ir_geom_ntiles(&g, 1) == 1, "one tile when the chunk fits");
  p->nchunksperloop = 6;
  ok(ir_geom_init(&g, p, 0, 5, 0) == BT_ERR_INVALID, "nchunksperloop must divide into rank blocks");
  char *six = tap_replace(text, "nchunksperloop=\"4\"", "nchunksperloop=\"6\"", 0);
  ok_contains(errors_of(six, "ag.xml"), "nchunksperloop=6 is not a multiple of 4", "validator explains the chunk count");
  free(six);
  /* An interleaved output: 4 blocks of 12 elements in rows of L = 3, two
   * chunks of 6 per block: element x of block q at (x/3)*12 + q*3 + x%3. */
  p->nchunksperloop = 8;
  ir_geom_init(&g, p, 0, 12, 0);
  ok(ir_geom_interleave(&g, 5) == BT_ERR_INVALID && g.seg == 0, "interleave: rows that cut chunks are refused");
  ok(!ir_geom_interleave(&g, 3) && g.seg == 3 && g.oblocks == 4, "interleave: rows of 3 over 4 blocks");
  ok(ir_geom_at(&g, IR_BUF_OUTPUT, 0, 0) == 0 && ir_geom_at(&g, IR_BUF_OUTPUT, 0, 4) == 13 &&
     ir_geom_at(&g, IR_BUF_OUTPUT, 2, 2) == 5 && ir_geom_at(&g, IR_BUF_OUTPUT, 7, 5) == 3 * 12 + 3 * 3 + 2 &&
     ir_geom_at(&g, IR_BUF_INPUT, 1, 1) == 7, "interleave: block q's row j sits in row j at column q*L; the input is "
     "as before");
  int seen[48] = {0}, dup = 0;
  for (int c = 0; c < 8; c++)
    for (int x = 0; x < 6; x++) dup += seen[ir_geom_at(&g, IR_BUF_OUTPUT, c, x)]++ != 0;
  ok(dup == 0, "interleave: every output element has one place");
  ok(ir_geom_tile_fit(&g, 2, 1, 0) == 1 && ir_geom_tile_fit(&g, 6, 1, 0) == 3 && ir_geom_tile_fit(&g, 2, 2, 0) == 0,
     "interleave: tiles divide the rows (none of whole 2-element units divides 3)");
  ok(ir_geom_tile_fit(&g, 8, 1, 1) == 6 && ir_geom_tile_fit(&g, 2, 1, 1) == 1,
     "interleave: an executor that copies row by row takes tiles of whole rows");
  ir_prog_free(p);
  rt_diag_free(d);
  free(text);
}

/* The GPU runtime's tile: every message fits its slot, every lane gets work
 * where the chunk allows, tiles stay whole 16-byte multiples. */
static void test_tiles(void) {
  static const int esizes[] = {1, 2, 4, 8};
  static const int64_t caps[] = {1, 3, 100, 4096, 65537, 1 << 20, 67108864 / 4};
  int fits = 1, spread = 1, aligned = 1, bounded = 1, fullslots = 1;
  for (int e = 0; e < 4; e++)
    for (int c = 0; c < 7; c++)
      for (int proto = 0; proto < IR_PROTO_COUNT; proto++)
        for (int lanes = 1; lanes <= 32; lanes *= 2)
          for (int64_t maxcnt = 1; maxcnt <= 8; maxcnt *= 2) {
            int es = esizes[e];
            ir_geom g = {0};
            g.cap = caps[c];
            int64_t slot = 131072, min_tile = 4096;
            int64_t t = ir_geom_tile(&g, slot, proto, maxcnt, lanes, es, min_tile);
            int64_t n = ir_geom_ntiles(&g, t);
            fits &= t >= 1 && maxcnt * ir_geom_wire(proto, t * es) <= slot;
            bounded &= t <= g.cap;
            aligned &= t == g.cap || (t * es) % 16 == 0;
            /* Lanes each get a tile unless tiles would fall below min_tile. */
            int64_t want = lanes < (g.cap * es + min_tile - 1) / min_tile ? lanes : (g.cap * es + min_tile - 1) / min_tile;
            int64_t avail = slot / maxcnt;
            int64_t per_slot = (proto == IR_PROTO_LL ? avail / 2 : proto == IR_PROTO_LL128 ? avail / 128 * 120 : avail)
                               / 16 * 16 / es;
            if (per_slot * lanes >= g.cap) spread &= n >= want || t == g.cap;
            /* Large chunks use whole slots. */
            if (g.cap >= per_slot * lanes) fullslots &= t == per_slot;
          }
  ok(fits, "tile: a message of the largest step's chunks fits a slot (Simple, LL and LL128)");
  ok(bounded, "tile: never larger than the chunk");
  ok(aligned, "tile: a multiple of 16 bytes unless it is the whole chunk");
  ok(spread, "tile: a small chunk is cut so that every lane gets a tile, down to the smallest tile");
  ok(fullslots, "tile: a chunk larger than a slot per lane uses whole slots");
  ir_geom g = {0};
  g.cap = 1000;
  ok(ir_geom_tile(&g, 16, IR_PROTO_SIMPLE, 2, 1, 4, 4096) == 0 && ir_geom_tile(&g, 32, IR_PROTO_LL, 2, 1, 4, 4096) == 0 &&
     ir_geom_tile(&g, 64, IR_PROTO_LL, 2, 1, 4, 4096) == 4 && ir_geom_tile(&g, 255, IR_PROTO_LL128, 2, 1, 4, 4096) == 0 &&
     ir_geom_tile(&g, 256, IR_PROTO_LL128, 2, 1, 4, 4096) == 28,
     "tile: 0 when a slot cannot hold 16 bytes per chunk (32 in LL, a 128-byte line in LL128)");
  ok(ir_geom_wire(IR_PROTO_SIMPLE, 100) == 112 && ir_geom_wire(IR_PROTO_LL, 100) == 224 &&
     ir_geom_wire(IR_PROTO_LL128, 112) == 128 && ir_geom_wire(IR_PROTO_LL128, 128) == 256,
     "wire bytes: Simple rounds to 16, LL doubles, LL128 takes 128-byte lines of 120");
}

static void test_xml_errors(void) {
  ok_contains(errors_of("<algo ngpus=\"2\" coll=\"allreduce\" nchunksperloop=\"1\"><gpu id=\"0\"/>", "t.xml"),
              "t.xml:1:", "malformed XML is reported with its line");
  ok_contains(errors_of("<?xml version=\"1.0\"?>\n<!DOCTYPE algo [<!ENTITY x \"y\">]>\n<algo/>", "d.xml"),
              "DOCTYPE declarations are not allowed", "DTDs and entities are refused");
  ok_contains(errors_of("<algo ngpus=\"1\" coll=\"bcast\" nchunksperloop=\"1\"><gpu id=\"0\"/></algo>", "c.xml"),
              "unknown collective coll=\"bcast\"", "unknown collective");
  ok_contains(errors_of("<algo ngpus=\"2\" coll=\"allreduce\" nchunksperloop=\"1\"><gpu id=\"0\"/></algo>", "g.xml"),
              "no <gpu id=\"1\">", "missing gpu");
  ok_contains(errors_of("<algo ngpus=\"x\" coll=\"allreduce\" nchunksperloop=\"1\"/>", "n.xml"),
              "ngpus=\"x\" is not an integer", "bad integer");
  ok_contains(errors_of("<algo ngpus=\"1\" coll=\"allreduce\" nchunksperloop=\"1\"><gpu id=\"0\"><foo/></gpu></algo>", "u.xml"),
              "u.xml:1: rank 0: unexpected element <foo>", "unknown element");
  rt_diag *d = rt_diag_new(2);
  ir_prog *p = NULL;
  ok(ir_read_file("/nonexistent/x.xml", &p, d) == BT_ERR_INVALID && p == NULL, "missing file is an error");
  ok_contains(rt_diag_text(d), "/nonexistent/x.xml: cannot open", "missing file names the path");
  rt_diag_free(d);
}

static void test_corpus_mutations(void) {
  if (!have_corpus("broken variants of the corpus's files")) return;
  const char *ring = "allreduce_ring_4r_1c_1i_simple.xml";
  broken(ring, "      <step s=\"3\" type=\"rrcs\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n",
         "", 0, "rank 0 tb 0: step numbered s=4 where s=3 was expected", "deleted step");
  broken(ring, "      <step s=\"6\" type=\"r\" srcbuf=\"i\" srcoff=\"2\" dstbuf=\"i\" dstoff=\"2\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n",
         "", 0, "rank 3 tb 0: sends 6 messages to rank 0 on channel 0, but rank 0 tb 0 receives 5", "deleted last step");
  broken(ring, "send=\"1\" recv=\"3\"", "send=\"2\" recv=\"3\"", 0,
         "rank 0 tb 0: sends to rank 2 on channel 0, but no thread block of rank 2 receives from rank 0", "wrong peer");
  broken(ring, "type=\"rrcs\"", "type=\"rrx\"", 0, "rank 0 tb 0 step 3: unknown opcode type=\"rrx\"", "unknown opcode");
  broken(ring, "srcbuf=\"i\" srcoff=\"3\"", "srcbuf=\"i\" srcoff=\"9\"", 0,
         "rank 0 tb 0 step 1: source i[9..9] is out of range: buffer i has 4 chunks", "offset out of range");
  broken(ring, "srcbuf=\"i\"", "srcbuf=\"x\"", 0, "unknown buffer srcbuf=\"x\"", "unknown buffer");
  broken(ring, "chan=\"0\"", "chan=\"3\"", 0, "rank 0 tb 0: channel 3 is out of range", "channel out of range");
  broken(ring, "<step s=\"1\" type=\"rrs\" srcbuf=\"i\" srcoff=\"3\" dstbuf=\"i\" dstoff=\"3\"",
         "<step s=\"1\" type=\"rrs\" srcbuf=\"i\" srcoff=\"2\" dstbuf=\"i\" dstoff=\"2\"", 0,
         "message 1 to rank 1 channel 0 is meant for i[2], but rank 1 tb 0 step 2 (rrs) puts it in i[3]", "sends out of order");
  broken(ring, "<tb id=\"0\"", "<tb id=\"1\"", 0, "thread block numbered id=1 where id=0 was expected", "misnumbered tb");

  const char *ag = "allgather_allpairs_4r_ll128.xml";
  broken(ag, "<tb id=\"1\" send=\"2\" recv=\"2\"", "<tb id=\"1\" send=\"1\" recv=\"2\"", 0,
         "rank 0 tb 1: connection to rank 1 on channel 0 is already used for sending by tb 0", "duplicated send connection");
  broken(ag, "<tb id=\"1\" send=\"2\" recv=\"2\"", "<tb id=\"1\" send=\"2\" recv=\"1\"", 0,
         "rank 0 tb 1: connection from rank 1 on channel 0 is already used for receiving by tb 0", "duplicated recv connection");
  broken(ag, "send=\"1\" recv=\"1\"", "send=\"0\" recv=\"1\"", 0, "rank 0 tb 0: send peer 0 is not another rank", "self as peer");

  const char *hier = "allreduce_hier_2n2g_simple.xml";
  broken(hier, "<step s=\"0\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"",
         "<step s=\"0\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"1\" deps=\"0\" hasdep=\"1\"", 0,
         "dependency cycle through program order, dependencies and messages: rank 0 tb 1 step 0 -[dependency]-> rank 0 tb 5 step 0 -[dependency]-> back",
         "cyclic dependency");
  broken(hier, "depid=\"2\" deps=\"1\"", "depid=\"2\" deps=\"7\"", 0,
         "rank 0 tb 0 step 0: depends on tb 2 step 7, which does not exist (tb 2 has 3 steps)", "dependency on a missing step");
  broken(hier, "depid=\"2\" deps=\"1\"", "depid=\"9\" deps=\"1\"", 0,
         "rank 0 tb 0 step 0: depends on tb 9, which does not exist", "dependency on a missing tb");
  broken(hier, "depid=\"2\" deps=\"1\"", "depid=\"0\" deps=\"0\"", 0,
         "rank 0 tb 0 step 0: depends on its own thread block", "self dependency");
  broken(hier, "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"3\" dstbuf=\"i\" dstoff=\"3\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"",
         "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"3\" dstbuf=\"i\" dstoff=\"3\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"", 0,
         "rank 0 tb 0 step 0: depends on tb 2 step 1, which does not signal (hasdep=0)", "dependency on a non-signalling step");

  const char *one = "allreduce_1step_4r_ll.xml";
  broken(one, "cnt=\"4\"", "cnt=\"3\"", 0,
         "rank 0 tb 1 step 0: message 0 to rank 1 channel 0 has cnt=3, but rank 1 tb 1 step 1 receives it with cnt=4", "count mismatch");
  broken(one, "<tb id=\"1\" send=\"1\" recv=\"1\" chan=\"0\">", "<tb id=\"1\" send=\"-1\" recv=\"1\" chan=\"0\">", 0,
         "rank 0 tb 1 step 0: s sends, but the thread block has no send peer", "send without a peer");
}

/* Checks text as the validator and the race check of an in-place call do. */
static char *fused_errors(const char *text) {
  static char buf[8192];
  rt_diag *d = rt_diag_new(20);
  ir_prog *p = NULL;
  if (!ir_read_memory(text, strlen(text), "fused.xml", &p, d) && !ir_check(p, d)) ir_check_races(p, 1, d);
  snprintf(buf, sizeof buf, "%s", rt_diag_text(d));
  ir_prog_free(p);
  rt_diag_free(d);
  return buf;
}

static void fused_broken(const char *text, const char *from, const char *to, int nth, const char *expect,
                         const char *what) {
  char *mut = tap_replace(text, from, to, nth);
  ok(mut != NULL, "fused: mutation applies (%s)", what);
  if (mut) ok_contains(fused_errors(mut), expect, "fused: %s is reported precisely", what);
  free(mut);
}

/* Compute opcodes, operands and sync policies: read, written back the
 * same, and every misuse named. */
static void test_fused(void) {
  char *text = tap_slurp(fused_file);
  if (!text) { printf("Bail out! cannot read %s\n", fused_file); exit(1); }
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL, *q = NULL;
  ok(!ir_read_memory(text, strlen(text), "fused.xml", &p, d) && !ir_check(p, d) && !ir_check_races(p, 1, d),
     "a fused program loads, validates and has no race in place: %s", rt_diag_text(d));
  if (!p) { free(text); rt_diag_free(d); return; }
  ok(p->noperands == 2 && p->operands[0].kind == IR_OPND_MATRIX && !strcmp(p->operands[0].dim[1], "K") &&
     p->operands[1].kind == IR_OPND_VECTOR && !strcmp(p->operands[1].dim[0], "K"), "operands and their shapes are read");
  const ir_step *g1 = &p->gpus[1].tbs[0].steps[1];
  ok(g1->op == IR_OP_GEMV && g1->args[0] == 0 && g1->args[1] == 1 && g1->sync == IR_SYNC_GROUP && g1->sync_param == 2,
     "a compute step's operands and sync policy are read");
  ok(ir_tb_compute(&p->gpus[0].tbs[0]) && !ir_tb_compute(&p->gpus[0].tbs[1]) && ir_prog_fused(p),
     "compute thread blocks are recognized");
  char *a = to_xml(p);
  ok(!ir_read_memory(a, strlen(a), "written", &q, d) && !ir_check(q, d), "a written fused program loads again");
  char *b = q ? to_xml(q) : NULL;
  ok(b && !strcmp(a, b), "fused: write(read(write(x))) == write(x)");
  ok_contains(a, "<operand name=\"W\" kind=\"matrix\" dtype=\"call\" rows=\"input\" cols=\"K\" />",
              "operands are written");
  ok_contains(a, "args=\"W x\" sync=\"group:2\"", "operands and sync policy of steps are written");
  free(a); free(b);
  ir_prog_free(p); ir_prog_free(q);
  rt_diag_free(d);

  const char *dep0 = "depid=\"0\" deps=\"0\" hasdep=\"0\"";
  fused_broken(text, dep0, "depid=\"-1\" deps=\"-1\" hasdep=\"0\"", 0,
               "fused.xml:10: rank 0 tb 1 step 0 (s): reads i[1] before anything has produced it", "a read before the compute");
  fused_broken(text, "args=\"W x\" sync=\"group:2\"", "args=\"x W\" sync=\"group:2\"", 0,
               "rank 1 tb 0 step 1: gemv: operand 1, x, is a vector; it must be a matrix", "operands of the wrong kind");
  fused_broken(text, "args=\"W x\" sync=\"group:2\"", "args=\"W\" sync=\"group:2\"", 0,
               "gemv takes 2 operands (MV), args names 1", "too few operands");
  fused_broken(text, "args=\"W x\" sync=\"group:2\"", "args=\"W y\" sync=\"group:2\"", 0,
               "args names operand y, which is not declared", "an undeclared operand");
  fused_broken(text, "len=\"K\"", "len=\"N\"", 0,
               "gemv: matrix W has cols=\"K\" but vector x has len=\"N\"", "mismatched dimensions");
  fused_broken(text, "rows=\"input\"", "rows=\"M\"", 0, "matrix W has rows=\"M\"; it needs rows=\"input\"",
               "a matrix not shaped like the input");
  fused_broken(text, "rows=\"input\"", "rows=\"in put\"", 0, "operand W: rows=\"in put\" is not a dimension name",
               "a malformed dimension");
  fused_broken(text, "kind=\"vector\"", "kind=\"tensor\"", 0, "operand x: kind=\"tensor\" is not matrix, vector or index",
               "an unknown operand kind");
  fused_broken(text, "<operand name=\"x\"", "<operand name=\"W\"", 0, "operand W is declared twice", "a repeated operand");
  fused_broken(text, "sync=\"group:2\"", "sync=\"group:0\"", 0, "sync=\"group:0\": 0 is out of range [1, 4096]",
               "a group of no tiles");
  fused_broken(text, "sync=\"group:2\"", "sync=\"lane\"", 0, "sync=\"lane\" is not tile, group:G or stride:S",
               "an unknown policy");
  fused_broken(text, "type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"0\"",
               "type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"0\" sync=\"tile\"", 0,
               "sync= is for compute steps, not s", "sync on a communication step");
  fused_broken(text, "type=\"gemv\" srcbuf=\"i\" srcoff=\"1\"", "type=\"gemv\" srcbuf=\"s\" srcoff=\"1\"", 0,
               "gemv computes input chunks: srcbuf must be i", "a compute step over scratch");
  fused_broken(text, "srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"",
               "srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"", 0,
               "rank 0 tb 0 step 1: gemv writes i[0], as step 0 of this compute thread block does", "two compute steps writing one chunk");
  fused_broken(text, "type=\"gemv\" srcbuf=\"i\" srcoff=\"1\"", "type=\"gemv\" srcbuf=\"i\" srcoff=\"5\"", 0,
               "gemv computes i[5..5], out of range: the input has 2 chunks", "rows out of range");
  free(text);

  int64_t f, c, st;
  ir_sync_span(IR_SYNC_GROUP, 4, 9, 10, &f, &c, &st);
  ok(f == 8 && c == 2 && st == 1 && ir_sync_group(IR_SYNC_GROUP, 4, 9) == 2 && ir_sync_count(IR_SYNC_GROUP, 4, 10) == 3,
     "sync group:4 of 10 tiles: tile 9 is in the last group, of tiles 8 and 9");
  ir_sync_span(IR_SYNC_STRIDE, 3, 7, 10, &f, &c, &st);
  ok(f == 1 && c == 3 && st == 3 && ir_sync_group(IR_SYNC_STRIDE, 3, 7) == 1 && ir_sync_count(IR_SYNC_STRIDE, 3, 2) == 2,
     "sync stride:3 of 10 tiles: tile 7 shares its semaphore with tiles 1 and 4");
  ir_sync_span(IR_SYNC_TILE, 0, 5, 10, &f, &c, &st);
  ok(f == 5 && c == 1 && ir_sync_count(IR_SYNC_TILE, 0, 10) == 10, "sync tile: one semaphore per tile");
}

/* ---- hostile input: sizes, limits, quadratic work ---- */

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long maxrss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* A count whose byte sizes overflow is refused, never wrapped. */
static void test_geom_overflow(void) {
  if (!have_corpus("counts past the addressable buffers")) return;
  char *text = corpus_file("allgather_ring_4r_simple.xml");
  rt_diag *d = rt_diag_new(4);
  ir_prog *p = NULL;
  ir_read_memory(text, strlen(text), "ag", &p, d);
  ir_geom g;
  const int64_t huge[] = {INT64_C(1) << 62, INT64_MAX, INT64_C(1) << 48, -1};
  for (int i = 0; i < 4 && p; i++) {
    bt_result r = ir_geom_init(&g, p, 3, huge[i], 1);
    ok(r == BT_ERR_UNSUPPORTED && g.span == 0 && g.elems[IR_BUF_OUTPUT] == 0,
       "allgather geometry refuses count %lld (result %d, span %lld)", (long long)huge[i], r, (long long)g.span);
  }
  int64_t most = p ? ir_geom_max_count(p, 3, 1) : 0;
  ok(p && most > 0 && !ir_geom_init(&g, p, 3, most, 1) && g.span <= IR_GEOM_MAX_ELEMS &&
     ir_geom_init(&g, p, 3, most + 1, 1) == BT_ERR_UNSUPPORTED,
     "the largest count (%lld) is taken and keeps the span within %lld elements; one more is refused",
     (long long)most, (long long)IR_GEOM_MAX_ELEMS);
  ir_prog_free(p);
  /* a program built in memory (no reader limits): INT_MAX scratch chunks */
  p = ir_prog_new("big", IR_COLL_CUSTOM, 2);
  p->nchunksperloop = 1;
  p->gpus[1].s_chunks = p->gpus[1].i_chunks = p->gpus[1].o_chunks = 2147483647;
  ok(ir_geom_init(&g, p, 1, INT64_C(1) << 40, 1) == BT_ERR_UNSUPPORTED && ir_geom_init(&g, p, 1, 1, 1) == BT_OK &&
     g.elems[IR_BUF_SCRATCH] == 2147483647, "INT_MAX chunks: a count of 1 fits, 2^40 is refused");
  ok(ir_geom_total_chunks(p) == 3 * INT64_C(2147483647), "chunks of all buffers together: %lld",
     (long long)ir_geom_total_chunks(p));
  ir_prog_free(p);
  rt_diag_free(d);
  free(text);
}

/* Reads text (validating it when the reader takes it) and checks that the
 * first message contains `expect`, within `secs` seconds. */
static void refused(const char *text, size_t len, const char *expect, double secs, const char *what) {
  if (!len) len = strlen(text);
  rt_diag *d = rt_diag_new(4);
  ir_prog *p = NULL;
  double t0 = seconds();
  bt_result r = ir_read_memory(text, len, "h.xml", &p, d);
  if (!r) r = ir_check(p, d);
  double dt = seconds() - t0;
  ok(r == BT_ERR_INVALID, "%s is refused", what);
  ok_contains(rt_diag_text(d), expect, "%s: the error names where, the limit and its parameter", what);
  ok(dt < secs, "%s: refused in %.2f s", what, dt);
  ir_prog_free(p);
  rt_diag_free(d);
}

static void test_limits(void) {
  sbuf b = {0};
  /* ranks */
  refused("<algo ngpus=\"5000\" coll=\"allreduce\" nchunksperloop=\"1\"/>", 0,
          "h.xml:1: ngpus=5000 is over the limit of 4096 ranks (BATON_MAX_RANKS raises it)", 5, "ngpus over the limit");
  refused("<algo ngpus=\"2147483647\" coll=\"allreduce\" nchunksperloop=\"1\"/>", 0,
          "ngpus=2147483647 is over the limit", 5, "ngpus of INT_MAX");
  /* thread blocks per rank */
  sb_add(&b, "<algo ngpus=\"1\" coll=\"custom\" nchunksperloop=\"1\">\n<gpu id=\"0\" i_chunks=\"1\">\n");
  for (int t = 0; t <= 4096; t++) sb_add(&b, "<tb id=\"%d\"/>\n", t);
  sb_add(&b, "</gpu></algo>\n");
  refused(b.s, b.n, "h.xml:4099: rank 0: more than 4096 thread blocks, the most a rank may have (BATON_IR_MAX_TBS raises it)",
          5, "4097 thread blocks");
  /* steps per thread block */
  b.n = 0;
  sb_add(&b, "<algo ngpus=\"1\" coll=\"custom\" nchunksperloop=\"1\">\n<gpu id=\"0\" i_chunks=\"1\"><tb id=\"0\">\n");
  for (int s = 0; s <= 65536; s++) sb_add(&b, "<step s=\"%d\" type=\"nop\"/>%s", s, s % 16 == 15 ? "\n" : "");
  sb_add(&b, "</tb></gpu></algo>\n");
  refused(b.s, b.n, "h.xml:4099: rank 0 tb 0: more than 65536 steps, the most a thread block may have (BATON_IR_MAX_STEPS raises it)",
          10, "65537 steps");
  /* chunks */
  refused("<algo ngpus=\"1\" coll=\"allreduce\" nchunksperloop=\"2000000\"><gpu id=\"0\"/></algo>", 0,
          "h.xml:1: the buffers of the 1 ranks have 4000000 chunks together (i, o and s), over the limit of 1048576 "
          "(BATON_MAX_CHUNKS raises it)", 5, "4 million chunks");
  refused("<algo ngpus=\"2\" coll=\"custom\" nchunksperloop=\"1\"><gpu id=\"0\" s_chunks=\"2147483647\"/>"
          "<gpu id=\"1\" s_chunks=\"2147483647\"/></algo>", 0, "4294967294 chunks together", 5, "INT_MAX scratch chunks twice");
  /* the file size, from memory and from a file, before anything is parsed */
  size_t big = (64u << 20) + 1;
  char *m = malloc(big);
  memset(m, ' ', big);
  refused(m, big, "h.xml:1: IR file is 67108865 bytes (65 MiB), over the limit of 64 MiB (BATON_IR_MAX_MB raises it)",
          2, "a 64 MiB + 1 byte IR in memory");
  free(m);
  char path[] = "/tmp/test_ir_XXXXXX";
  int fd = mkstemp(path);
  ok(fd >= 0 && !ftruncate(fd, (off_t)300 << 20), "a sparse 300 MiB file");
  rt_diag *d = rt_diag_new(4);
  ir_prog *p = NULL;
  long rss = maxrss_kb();
  ok(ir_read_file(path, &p, d) == BT_ERR_INVALID && !p, "a 300 MiB IR file is refused");
  ok_contains(rt_diag_text(d), ": IR file is 314572800 bytes (300 MiB), over the limit of 64 MiB (BATON_IR_MAX_MB raises it)",
              "... naming its size, the limit and the parameter");
  ok(maxrss_kb() - rss < 16 * 1024, "... without reading it (%ld KiB more)", maxrss_kb() - rss);
  if (fd >= 0) { close(fd); unlink(path); }
  rt_diag_free(d);
  /* a DOCTYPE stops the parse at once: no entity is declared or expanded */
  b.n = 0;
  sb_add(&b, "<?xml version=\"1.0\"?>\n<!DOCTYPE algo [\n<!ENTITY a \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">\n");
  for (int i = 1; i < 12; i++) {
    sb_add(&b, "<!ENTITY %c \"", 'a' + i);
    for (int k = 0; k < 10; k++) sb_add(&b, "&%c;", 'a' + i - 1);
    sb_add(&b, "\">\n");
  }
  sb_add(&b, "]>\n<algo name=\"&l;\" ngpus=\"1\" coll=\"allreduce\" nchunksperloop=\"1\"><gpu id=\"0\"/></algo>\n");
  refused(b.s, b.n, "h.xml:2: DOCTYPE declarations are not allowed in IR files", 2, "a billion laughs");
  refused("<?xml version=\"1.0\"?>\n<!DOCTYPE algo SYSTEM \"/etc/passwd\">\n<algo name=\"x\"/>\n", 70,
          "h.xml:2: DOCTYPE declarations are not allowed", 2, "an external DTD");
  free(b.s);
}

/* Two thread blocks each writing one chunk 20,000 times: the race check
 * pairs them in linear memory and time (it needed 9 GiB). */
static void test_race_scale(void) {
  sbuf b = {0};
  int n = 20000;
  sb_add(&b, "<algo ngpus=\"1\" coll=\"custom\" nchunksperloop=\"1\">\n<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\">\n");
  for (int t = 0; t < 2; t++) {
    sb_add(&b, "<tb id=\"%d\">\n", t);
    for (int s = 0; s < n; s++)
      sb_add(&b, "<step s=\"%d\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n", s);
    sb_add(&b, "</tb>\n");
  }
  sb_add(&b, "</gpu></algo>\n");
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL;
  ok(!ir_read_memory(b.s, b.n, "race.xml", &p, d) && !ir_check(p, d), "2 tbs x %d copies to o[0] load and validate", n);
  free(b.s);
  long rss = maxrss_kb();
  double t0 = seconds();
  bt_result r = p ? ir_check_races(p, 0, d) : BT_ERR_INVALID;
  double dt = seconds() - t0;
  ok(r == BT_ERR_INVALID, "the race is found (result %d)", r);
  ok_contains(rt_diag_text(d), "race.xml:4: rank 0: data race: tb 0 step 0 (cpy) writes o[0] while tb 1 step 0 (cpy) writes o[0]",
              "the race names both steps");
  ok(dt < 5 && maxrss_kb() - rss < 256 * 1024, "in %.2f s and %ld MiB more", dt, (maxrss_kb() - rss) / 1024);
  ir_prog_free(p);
  rt_diag_free(d);
}

/* 4096 thread blocks on one connection, and 60,000 compute steps of one
 * chunk in one thread block: checked by sorting, not by every pair. */
static void test_check_scale(void) {
  sbuf b = {0};
  sb_add(&b, "<algo ngpus=\"2\" coll=\"custom\" nchunksperloop=\"1\">\n<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\">\n");
  for (int t = 0; t < 4096; t++) sb_add(&b, "<tb id=\"%d\" send=\"1\"/>\n", t);
  sb_add(&b, "</gpu><gpu id=\"1\" i_chunks=\"1\"/></algo>\n");
  double t0 = seconds();
  char *e = errors_of(b.s, "conn.xml");
  double dt = seconds() - t0;
  ok_contains(e, "conn.xml:4: rank 0 tb 1: connection to rank 1 on channel 0 is already used for sending by tb 0",
              "4096 tbs on one connection: the second is named with the first");
  ok(dt < 2, "... in %.2f s", dt);
  b.n = 0;
  int n = 60000;
  sb_add(&b, "<algo ngpus=\"2\" coll=\"allreduce\" nchunksperloop=\"1\" baton=\"1\">\n"
             "<operand name=\"W\" kind=\"matrix\" dtype=\"call\" rows=\"input\" cols=\"K\"/>\n"
             "<operand name=\"x\" kind=\"vector\" dtype=\"call\" len=\"K\"/>\n"
             "<gpu id=\"0\" i_chunks=\"1\"><tb id=\"0\" send=\"1\" recv=\"1\">\n");
  for (int s = 0; s < n; s++)
    sb_add(&b, "<step s=\"%d\" type=\"gemv\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" args=\"%s\"/>\n",
           s, s == n - 1 ? "x x" : "W x");
  sb_add(&b, "</tb></gpu><gpu id=\"1\" i_chunks=\"1\"/></algo>\n");
  t0 = seconds();
  e = errors_of(b.s, "comp.xml");
  dt = seconds() - t0;
  ok_contains(e, "operand 1, x, is a vector; it must be a matrix", "%d compute steps of one chunk: the odd one is named", n);
  b.n = 0;
  sb_add(&b, "<algo ngpus=\"2\" coll=\"allreduce\" nchunksperloop=\"1\" baton=\"1\">\n"
             "<operand name=\"W\" kind=\"matrix\" dtype=\"call\" rows=\"input\" cols=\"K\"/>\n"
             "<operand name=\"V\" kind=\"matrix\" dtype=\"call\" rows=\"input\" cols=\"K\"/>\n"
             "<operand name=\"x\" kind=\"vector\" dtype=\"call\" len=\"K\"/>\n"
             "<gpu id=\"0\" i_chunks=\"1\"><tb id=\"0\" send=\"1\" recv=\"1\">\n");
  for (int s = 0; s < n; s++)
    sb_add(&b, "<step s=\"%d\" type=\"gemv\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" args=\"%s\"/>\n",
           s, s == n - 1 ? "V x" : "W x");
  sb_add(&b, "</tb></gpu><gpu id=\"1\" i_chunks=\"1\"/></algo>\n");
  t0 = seconds();
  e = errors_of(b.s, "comp.xml");
  dt = seconds() - t0;
  ok_contains(e, "comp.xml:60005: rank 0 tb 0 step 59999: gemv computes input chunks that tb 0 step 0 computes too, from other operands",
              "%d compute steps of one chunk, the last from other operands: named with the first", n);
  ok(dt < 3, "... in %.2f s", dt);
  free(b.s);
}

/* Embedding bags, index operands and an interleaved output: read,
 * written back the same, and every misuse named. */
static void test_embed(const char *path) {
  char *text = tap_slurp(path);
  if (!text) { printf("Bail out! cannot read %s\n", path); exit(1); }
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL, *q = NULL;
  ok(!ir_read_memory(text, strlen(text), "embed.xml", &p, d) && !ir_check(p, d) && !ir_check_races(p, 0, d),
     "an embedding-bag + AllToAll program loads, validates and has no race: %s", rt_diag_text(d));
  if (!p) { free(text); rt_diag_free(d); return; }
  ok(p->noperands == 4 && p->operands[1].kind == IR_OPND_INDEX && !strcmp(p->operands[1].dtype, "i64") &&
     p->interleave && !strcmp(p->interleave, "T*D"), "index operands and the output's interleave are read");
  const ir_step *st = &p->gpus[0].tbs[0].steps[0];
  ok(st->op == IR_OP_EBAG && st->args[0] == 0 && st->args[1] == 1 && st->args[2] == 2 && st->args[3] == 3,
     "an embedding bag's four operands are read");
  char *a = to_xml(p);
  ok(!ir_read_memory(a, strlen(a), "written", &q, d) && !ir_check(q, d), "a written embedding program loads again");
  char *b = q ? to_xml(q) : NULL;
  ok(b && !strcmp(a, b), "embedding: write(read(write(x))) == write(x)");
  free(a); free(b);
  ir_prog_free(p); ir_prog_free(q);
  rt_diag_free(d);
  fused_broken(text, "inplace=\"0\"", "inplace=\"1\"", 0, "interleave=\"T*D\" is for out-of-place alltoall and "
               "allgather programs", "an in-place interleave");
  fused_broken(text, "interleave=\"T*D\"", "interleave=\"T**D\"", 0,
               "interleave=\"T**D\" is not a product of dimension names", "a malformed interleave");
  fused_broken(text, "kind=\"index\" dtype=\"i64\"", "kind=\"index\" dtype=\"call\"", 0,
               "operand I: an index operand has dtype=\"call\"; it takes i64 or i32", "an index of floats");
  fused_broken(text, "kind=\"vector\" dtype=\"call\"", "kind=\"vector\" dtype=\"i32\"", 0,
               "operand w: a vector operand has dtype=\"i32\"", "a vector of integers");
  fused_broken(text, "args=\"E I O w\"", "args=\"E I I w\"", 0,
               "ebag: indices I and offsets I have the same length L", "the indices as offsets");
  fused_broken(text, "args=\"E I O w\"", "args=\"E w O I\"", 0,
               "ebag: operand 2, w, is a vector; it must be an index", "operands of the wrong kind");
  fused_broken(text, "args=\"E I O w\"", "args=\"E I O w w\"", 0, "ebag takes 3 to 4 operands (MIIv; lowercase: "
               "optional), args names 5", "too many operands");
  fused_broken(text, "type=\"ebag\"", "type=\"ebagm\"", 0, "ebagm takes 3 operands (MII), args names 4",
               "weights for a mean");
  fused_broken(text, "len=\"NO\"", "len=\"L\"", 0, "ebag: indices I and offsets O have the same length L",
               "offsets as long as the indices");
  fused_broken(text, "srcoff=\"2\" dstbuf=\"i\" dstoff=\"2\"", "srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\"", 0,
               "ebag stores into the interleaved output (interleave=\"T*D\"), whose rows are apart",
               "a bag stored into an interleaved output");
  fused_broken(text, "rows=\"R\" cols=\"D\"", "rows=\"input\" cols=\"D\"", 0,
               "ebag: table E is [rows x D] of its own dimensions, not \"input\"", "a table shaped like the input");
  free(text);
}

/* GEMM + AllToAll: read, written back the same, and misuse named. */
static void test_gemm(const char *path) {
  char *text = tap_slurp(path);
  if (!text) { printf("Bail out! cannot read %s\n", path); exit(1); }
  rt_diag *d = rt_diag_new(10);
  ir_prog *p = NULL, *q = NULL;
  ok(!ir_read_memory(text, strlen(text), "moe.xml", &p, d) && !ir_check(p, d) && !ir_check_races(p, 0, d),
     "a GEMM + AllToAll program loads, validates and has no race: %s", rt_diag_text(d));
  char *a = p ? to_xml(p) : NULL;
  ok(a && !ir_read_memory(a, strlen(a), "written", &q, d), "a written GEMM program loads again");
  char *b = q ? to_xml(q) : NULL;
  ok(a && b && !strcmp(a, b), "gemm: write(read(write(x))) == write(x)");
  free(a); free(b);
  ir_prog_free(p); ir_prog_free(q);
  rt_diag_free(d);
  fused_broken(text, "args=\"X W\"", "args=\"W X\"", 0,
               "gemm: matrix W has cols=\"H\" but matrix X has rows=\"T\"", "X and W swapped");
  fused_broken(text, "rows=\"T\" cols=\"F\"", "rows=\"input\" cols=\"F\"", 0,
               "gemm: X [tokens, F] and W [F, H] have dimensions of their own", "X shaped like the input");
  fused_broken(text, "args=\"X W\"", "args=\"X\"", 0, "gemm takes 2 operands (MM), args names 1", "one operand");
  free(text);
}

/* Validates p (built in memory) and returns the messages, "" when valid;
 * frees p. */
static char *direct_errors(ir_prog *p) {
  static char buf[8192];
  rt_diag *d = rt_diag_new(20);
  ir_check(p, d);
  snprintf(buf, sizeof buf, "%s", rt_diag_text(d));
  rt_diag_free(d);
  ir_prog_free(p);
  return buf;
}

/* Step s of rank r's tb t. */
static ir_step *at(ir_prog *p, int r, int t, int s) { return &p->gpus[r].tbs[t].steps[s]; }

/* Drops step s of rank r's tb t. */
static void drop(ir_prog *p, int r, int t, int s) {
  ir_tb *tb = &p->gpus[r].tbs[t];
  memmove(&tb->steps[s], &tb->steps[s + 1], (tb->nsteps - s - 1) * sizeof *tb->steps);
  tb->nsteps--;
}

/* Direct programs (put, get, getr, xchg, sig, wait): the runtime's shapes are
 * valid, and each rule of docs/IR.md's "Direct steps" fails with its
 * message on a program broken for it. */
static void test_direct_rules(void) {
  ok(!*direct_errors(oneshot_get(4, 1, 1, 1)), "a Simple one-shot AllReduce by get validates");
  ok(!*direct_errors(twoshot(4)), "a Simple two-shot AllReduce (getr, put) validates");
  ok(!*direct_errors(oneshot_ll(4, 2)), "an LL one-shot AllReduce (puts into landings, re) validates");
  ir_prog *base = twoshot(4), *moved = ir_prog_copy(base, 3);
  ok(moved && moved->gpus[3].tbs[0].steps[0].peer == 0 && !*direct_errors(moved),
     "relabelled by 3 ranks (ir_prog_copy), the two-shot's peers move along and it still validates");
  ir_prog_free(base);
  /* peers and counts */
  ir_prog *p = twoshot(2);
  at(p, 0, 0, 3)->peer = 5;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 3: getr: peer 5 is not another rank in [0, 2)", "a peer out of range");
  p = twoshot(2);
  at(p, 1, 0, 4)->peer = 1;
  ok_contains(direct_errors(p), "rank 1 tb 0 step 4: put: peer 1 is not another rank in [0, 2)", "a put to its own rank");
  p = twoshot(2);
  at(p, 0, 0, 0)->cnt = 2;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 0: sig has cnt=2; a sig is one signal (cnt=1)", "a sig of two");
  p = twoshot(2);
  at(p, 0, 0, 1)->cnt = 0;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 1: wait has cnt=0; it waits for at least one signal", "a wait for none");
  p = twoshot(2);
  at(p, 0, 0, 2)->peer = 1;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 2: cpy has peer=1; only direct steps (put, get, getr, xchg, sig, wait) name a "
              "peer", "a peer on a local step");
  /* the peer's side in the peer's geometry: rank 0 has two scratch chunks, rank 1 one */
  p = oneshot_ll(2, 1);
  p->gpus[0].s_chunks = 2;
  at(p, 0, 0, 0)->dstoff = 1;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 0: destination s[1..1] is out of range: buffer s has 1 chunks on rank 1",
              "a put's destination is checked in its peer's buffers");
  p = oneshot_get(2, 1, 1, 1);
  at(p, 1, 0, 3)->srcoff = 1;
  ok_contains(direct_errors(p), "rank 1 tb 0 step 3: source i[1..1] is out of range: buffer i has 1 chunks on rank 0",
              "a get's source is checked in its peer's buffers");
  p = oneshot_get(2, 1, 1, 1);
  at(p, 0, 0, 3)->srcrun = 1;
  at(p, 0, 0, 3)->srcstride = 1;
  ok(!*direct_errors(p), "a getr's source may be strided (a pattern of the peer's chunks)");
  /* what a direct program holds */
  p = twoshot(2);
  ir_tb *tb = ir_tb_add(&p->gpus[0], 1, -1, 0);
  dstep(tb, IR_OP_SEND, -1, IR_BUF_INPUT, 0, IR_BUF_INPUT, 0, 1);
  ok_contains(direct_errors(p), "rank 0 tb 1 step 0: s is a FIFO step, but rank 0 tb 0 step 0 is a sig: direct programs "
              "have no FIFO steps (s, r, rcs, rrc, rrs, rrcs)", "a FIFO step in a direct program");
  p = twoshot(2);
  dstep(dtb(p, 1), IR_OP_GEMV, -1, IR_BUF_INPUT, 0, IR_BUF_INPUT, 0, 1);
  ok_contains(direct_errors(p), "rank 1 tb 1 step 0: gemv is a compute step, but rank 0 tb 0 step 0 is a sig: direct "
              "programs have no compute steps", "a compute step in a direct program");
  p = twoshot(2);
  p->proto = IR_PROTO_LL128;
  ok_contains(direct_errors(p), "rank 1 tb 0 step 3: getr in a direct LL128 program: it has only put, cpy, re, nop, sig "
              "and wait steps (get, getr and xchg are Simple's)", "LL128: the LL rules");
  /* signal streams */
  p = twoshot(2);
  dsig(dtb(p, 0), 1);
  dwait(&p->gpus[1].tbs[0], 0, 1);
  ok_contains(direct_errors(p), "rank 0 tb 1 step 0: sig to rank 1 on channel 0, but tb 0 signals rank 1 on channel 0 too: "
              "the sigs of a stream (rank pair and channel) are in one thread block", "a stream's sigs in two tbs");
  p = twoshot(2);
  dsig(&p->gpus[1].tbs[0], 0);
  dwait(dtb(p, 0), 1, 1);
  ok_contains(direct_errors(p), "rank 0 tb 1 step 0: wait for rank 1 on channel 0, but tb 0 waits for rank 1 on channel 0 "
              "too: the waits of a stream (rank pair and channel) are in one thread block", "a stream's waits in two tbs");
  p = twoshot(2);
  at(p, 1, 0, 6)->cnt = 2;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 0: 2 sigs to rank 1 on channel 0, but rank 1's waits for rank 0 on "
              "channel 0 take 3: a stream's waits take as many signals as it carries", "more signals waited for than sent");
  p = twoshot(2);
  p->nchannels = 2;
  dwait(ir_tb_add(&p->gpus[1], -1, -1, 1), 0, 1);
  ok_contains(direct_errors(p), "rank 1 tb 1 step 0: waits for 1 signal of rank 0 on channel 1, but rank 0 sends none there",
              "a wait on a stream with no sig");
  /* LL: its opcodes, landings, the pair rule */
  p = oneshot_ll(2, 1);
  dstep(&p->gpus[0].tbs[0], IR_OP_GET, 1, IR_BUF_INPUT, 0, IR_BUF_OUTPUT, 0, 1);
  ok_contains(direct_errors(p), "rank 0 tb 0 step 3: get in a direct LL program: it has only put, cpy, re, nop, sig and "
              "wait steps (get, getr and xchg are Simple's)", "a get in LL");
  p = oneshot_ll(2, 1);
  at(p, 0, 0, 0)->dstbuf = IR_BUF_OUTPUT;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 0: put into rank 1's o: in a direct LL program a put lands in its peer's "
              "scratch (dstbuf s)", "an LL put into the peer's output");
  p = oneshot_ll(3, 1);
  at(p, 2, 0, 0)->dstoff = 0;   /* rank 2 lands in rank 0's s[0], where rank 1 lands */
  ok_contains(direct_errors(p), "rank 2 tb 0 step 0: put lands in rank 0's s[0], as rank 1 tb 0 step 0's put does: a "
              "scratch chunk is the landing of one put", "two puts landing in one chunk");
  p = oneshot_ll(2, 1);
  dstep(&p->gpus[1].tbs[0], IR_OP_COPY, -1, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 0, 1);
  ok_contains(direct_errors(p), "rank 1 tb 0 step 3: cpy writes s[0], the landing of rank 0 tb 0 step 0's put: a landing is "
              "written by its put alone", "a local write into a landing");
  p = oneshot_ll(2, 1);
  drop(p, 1, 0, 2);   /* rank 1 never reads what rank 0 lands in it */
  ok_contains(direct_errors(p), "rank 1 tb 0 step 0: puts to rank 0 but reads no landing rank 0 put to it and waits for "
              "no signal of it: its call could end before rank 0's has begun (the LL pair rule: a rank that puts to a peer "
              "reads a landing of that peer's or waits for its signal)", "the LL pair rule");
  /* One way: rank 0 puts into rank 1's landing, which rank 1 copies out. */
  for (int signalled = 0; signalled < 2; signalled++) {
    p = dprog("one_way_ll", IR_COLL_ALLREDUCE, 2, IR_PROTO_LL, 1, 1, 1);
    ir_tb *t0 = dtb(p, 0), *t1 = dtb(p, 1);
    dstep(t0, IR_OP_PUT, 1, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 0, 1);
    if (signalled) {   /* rank 1 signals at its start; rank 0 ends waiting for it */
      dsig(t1, 0);
      dwait(t0, 1, 1);
    }
    dstep(t1, IR_OP_COPY, -1, IR_BUF_SCRATCH, 0, IR_BUF_INPUT, 0, 1);
    char *e = direct_errors(p);
    if (signalled)
      ok(!*e, "an LL put one way whose rank waits for the peer's signal keeps the pair rule: %s", *e ? e : "valid");
    else
      ok_contains(e, "rank 0 tb 0 step 0: puts to rank 1 but reads no landing rank 1 put to it and waits for no signal",
                  "... without the signal it breaks it");
  }
  /* LL keeps the signal streams' rules: a wait no sig feeds. */
  p = dprog("one_way_ll", IR_COLL_ALLREDUCE, 2, IR_PROTO_LL, 1, 1, 1);
  dstep(dtb(p, 0), IR_OP_PUT, 1, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 0, 1);
  dwait(&p->gpus[0].tbs[0], 1, 1);
  dstep(dtb(p, 1), IR_OP_COPY, -1, IR_BUF_SCRATCH, 0, IR_BUF_INPUT, 0, 1);
  ok_contains(direct_errors(p), "waits for 1 signal of rank 1 on channel 0, but rank 1 sends none there",
              "in LL, a wait for a signal nobody sends");
  p = oneshot_ll(2, 1);
  p->gpus[1].s_chunks = 2;   /* a second landing in rank 1 that it never reads */
  dstep(&p->gpus[0].tbs[0], IR_OP_PUT, 1, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 1, 1);
  ok_contains(direct_errors(p), "rank 0 tb 0 step 3: put writes rank 1's s[1] but happens before no step of rank 1: rank "
              "1's call could end before it is done (the end rule: that rank reads the landing)",
              "the end rule in LL: a landing nobody reads");
  /* ordering: the end and start rules, cycles through signals and landings */
  ok_contains(direct_errors(oneshot_get(2, 1, 1, 0)), "rank 0 tb 0 step 3: getr reads rank 1's i[0] but happens before no "
              "step of rank 1: rank 1's call could end before it is done (the end rule: a sig after it that a wait of that "
              "rank takes)", "the end rule: no barrier after the gets");
  ok_contains(direct_errors(oneshot_get(2, 1, 0, 1)), "rank 0 tb 0 step 1: getr reads rank 1's i[0] but happens after no "
              "step of rank 1: rank 1 may not have begun the call (the start rule: a wait before it for a sig of that rank)",
              "the start rule: no barrier before the gets");
  p = dprog("waits_first", IR_COLL_ALLREDUCE, 2, IR_PROTO_SIMPLE, 1, 1, 0);
  for (int r = 0; r < 2; r++) {
    tb = dtb(p, r);
    dwait(tb, 1 - r, 1);
    dsig(tb, 1 - r);
  }
  ok_contains(direct_errors(p), "rank 0 tb 0 step 0: dependency cycle through program order, dependencies, signals and "
              "landings (-[signal]-> : the wait takes that sig; -[landing]-> : the step reads what that put lands): "
              "rank 0 tb 0 step 0..1 -[signal]-> rank 1 tb 0 step 0..1 -[signal]-> back",
              "waits before sigs on both ranks: a cycle through signals");
  p = oneshot_ll(2, 1);
  for (int r = 0; r < 2; r++) {   /* reduce the landing before putting */
    ir_step *s = p->gpus[r].tbs[0].steps, put = s[0];
    memmove(&s[0], &s[1], 2 * sizeof *s);
    s[2] = put;
  }
  ok_contains(direct_errors(p), "-[landing]->", "reading landings before putting on both ranks: a cycle through landings");
  /* a rooted collective: the peer's buffers follow the root's rules */
  p = dprog("bcast", IR_COLL_BROADCAST, 2, IR_PROTO_SIMPLE, 1, 0, 0);
  for (int r = 0; r < 2; r++) {
    p->gpus[r].i_chunks = p->gpus[r].o_chunks = 1;
    tb = dtb(p, r);
    dbarrier(p, tb, r);
    if (r == 1) dstep(tb, IR_OP_GET, 0, IR_BUF_INPUT, 0, IR_BUF_OUTPUT, 0, 1);
    else dstep(tb, IR_OP_GET, 1, IR_BUF_INPUT, 0, IR_BUF_SCRATCH, 0, 1);
    dbarrier(p, tb, r);
  }
  p->gpus[0].s_chunks = 1;
  ok_contains(direct_errors(p), "rank 0 tb 0 step 2: reads rank 1's input, which a broadcast has only on the root (rank 0)",
              "a broadcast's root reading a peer's input");
  /* the in-place rewrite leaves direct programs alone */
  p = oneshot_ll(2, 1);
  for (int r = 0; r < 2; r++) {   /* in place, on the input alone */
    drop(p, r, 0, 1);
    at(p, r, 0, 1)->dstbuf = IR_BUF_INPUT;
  }
  ir_prog *q = NULL;
  char why[200];
  ok(!*direct_errors(ir_prog_copy(p, 0)) && ir_dealias(p, &q, why, sizeof why) == BT_ERR_UNSUPPORTED && !q,
     "ir_dealias refuses a direct program");
  ok_contains(why, "direct programs are left as they are", "... saying why: %s", why);
  ir_prog_free(p);
}

/* An in-place AllToAll of 2 ranks by xchg: rank 0 trades its i[1] with
 * rank 1's i[0] between rank 1's start sig and its own end sig; with
 * `race` 1, rank 1 also writes its i[0] meanwhile, with 2 it reads rank
 * 0's i[1]. */
static ir_prog *swap2(ir_proto proto, int starts, int race) {
  ir_prog *p = dprog("swap", IR_COLL_ALLTOALL, 2, proto, 2, 1, 0);
  for (int r = 0; r < 2; r++) p->gpus[r].i_chunks = p->gpus[r].o_chunks = 2;
  ir_tb *a = dtb(p, 0), *b = dtb(p, 1);
  if (starts) dwait(a, 1, 1);
  dstep(a, IR_OP_XCHG, 1, IR_BUF_INPUT, 1, IR_BUF_INPUT, 0, 1);
  dsig(a, 1);
  if (starts) dsig(b, 0);
  if (race == 1) dstep(b, IR_OP_COPY, -1, IR_BUF_INPUT, 1, IR_BUF_INPUT, 0, 1);
  if (race == 2) dstep(b, IR_OP_GET, 0, IR_BUF_INPUT, 1, IR_BUF_INPUT, 1, 1);
  dwait(b, 0, 1);
  return p;
}

/* xchg: valid between the start and end rules' signals; refused without
 * the start rule, in LL, and where a step of the peer races with it. */
static void test_xchg_rules(void) {
  ok(!*direct_errors(swap2(IR_PROTO_SIMPLE, 1, 0)), "an in-place AllToAll by xchg validates");
  ok_contains(direct_errors(swap2(IR_PROTO_SIMPLE, 0, 0)), "rank 0 tb 0 step 0: xchg exchanges with rank 1's i[0] but "
              "happens after no step of rank 1: rank 1 may not have begun the call (the start rule",
              "an xchg before the peer's start signal: the start rule");
  ok_contains(direct_errors(swap2(IR_PROTO_LL, 1, 0)), "rank 0 tb 0 step 1: xchg in a direct LL program: it has only put, "
              "cpy, re, nop, sig and wait steps (get, getr and xchg are Simple's)", "an xchg in LL");
  ir_prog *p = swap2(IR_PROTO_SIMPLE, 1, 1);
  rt_diag *d = rt_diag_new(20);
  ok(ir_check(p, d) == BT_OK && ir_check_races(p, 1, d) == BT_ERR_INVALID, "a peer's write during the xchg races");
  ok_contains(rt_diag_text(d), "rank 1: data race in its memory: rank 0 tb 0 step 1 (xchg) writes i[0] while rank 1 tb 0 "
              "step 1 (cpy) writes i[0]", "... named in the peer's memory: %s", rt_diag_text(d));
  rt_diag_free(d);
  ir_prog_free(p);
  p = swap2(IR_PROTO_SIMPLE, 1, 2);
  d = rt_diag_new(20);
  ok(ir_check_races(p, 1, d) == BT_ERR_INVALID, "a peer's read of the xchg's own side races");
  ok_contains(rt_diag_text(d), "rank 0: data race in its memory: rank 0 tb 0 step 1 (xchg) writes i[1] while rank 1 tb 0 "
              "step 1 (get) reads i[1]", "... as a write of it: %s", rt_diag_text(d));
  rt_diag_free(d);
  ir_prog_free(p);
}

/* The direct fixtures: read, validated, written back the same. */
static void test_direct_files(const char *const *paths, int n) {
  for (int i = 0; i < n; i++) {
    char *text = tap_slurp(paths[i]);
    if (!text) { printf("Bail out! cannot read %s\n", paths[i]); exit(1); }
    rt_diag *d = rt_diag_new(10);
    ir_prog *p = NULL;
    ok(!ir_read_memory(text, strlen(text), paths[i], &p, d) && !ir_check(p, d) && ir_prog_direct(p) &&
       !ir_check_races(p, 1, d) && !ir_check_races(p, 0, d), "%s: a direct program loads, validates and has no race: %s",
       paths[i], rt_diag_text(d));
    char *a = p ? to_xml(p) : NULL;
    ok(a && !strcmp(a, text), "%s: written back the same (peer= included)", paths[i]);
    free(a);
    free(text);
    ir_prog_free(p);
    rt_diag_free(d);
  }
}

int main(int argc, char **argv) {
  corpus = argc > 1 ? argv[1] : "../shared/corpus/msccl";
  fused_file = argc > 2 ? argv[2] : "tests/fused_2r.xml";
  test_ops();
  const char *files[] = {"allgather_allpairs_4r_ll128.xml", "allgather_ring_4r_simple.xml",
                         "allreduce_1step_4r_ll.xml", "allreduce_allpairs_4r_1i_ll.xml",
                         "allreduce_hier_2n2g_simple.xml", "allreduce_ring_4r_1c_1i_simple.xml",
                         "allreduce_ring_4r_2c_1i_ll128.xml", "alltoall_allpairs_4r_simple.xml",
                         "alltoall_twostep_2n2g_simple.xml", "alltonext_fwd_2n.xml"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) test_roundtrip(files[i]);
  test_extensions();
  test_geometry();
  test_tiles();
  test_xml_errors();
  test_corpus_mutations();
  test_fused();
  test_embed(argc > 3 ? argv[3] : "tests/embed_2r.xml");
  test_gemm(argc > 4 ? argv[4] : "tests/moe_2r.xml");
  test_geom_overflow();
  test_limits();
  test_race_scale();
  test_check_scale();
  test_direct_rules();
  test_xchg_rules();
  const char *direct[] = {argc > 5 ? argv[5] : "tests/direct_2r.xml", argc > 6 ? argv[6] : "tests/direct_ll_4r.xml"};
  test_direct_files(direct, 2);
  return tap_done();
}
