/* test_direct.c -- the direct executor's operations (runtime/rt_direct.c)
 * built from hand-written direct programs, on the CPU: runs, signal and
 * wait groups, the counts signals carry, where runs are cut, and the
 * programs the executor refuses. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir_read.h"
#include "ip_fdirect.h"
#include "rt_direct.h"
#include "tap.h"

/* A program text being written. */
static char text[1 << 20];
static size_t len;
static void put(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text + len, sizeof text - len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof text - len) abort();   /* the test's programs fit */
  len += (size_t)n;
}
static int nstep;
static void step(const char *type, const char *sb, int so, const char *db, int dof, int cnt, int peer) {
  put("      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" "
      "deps=\"-1\" hasdep=\"0\"", nstep++, type, sb, so, db, dof, cnt);
  if (peer >= 0) put(" peer=\"%d\"", peer);
  put(" />\n");
}
static const char *coll = "allreduce";   /* the next program's collective */
static void begin(const char *proto, int n, int chunks, int inplace) {
  len = 0;
  put("<algo name=\"t\" proto=\"%s\" nchannels=\"1\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=\"%s\" "
      "inplace=\"%d\" baton=\"1\">\n", proto, chunks, n, coll, inplace);
  coll = "allreduce";
}
static void rank_begin(int r, int chunks, int inplace, int s_chunks) {
  nstep = 0;
  put("  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n    <tb id=\"0\" send=\"-1\" recv=\"-1\" "
      "chan=\"0\">\n", r, chunks, inplace ? 0 : chunks, s_chunks);
}
static void rank_end(void) { put("    </tb>\n  </gpu>\n"); }
static ir_prog *end(void) {
  put("</algo>\n");
  ir_prog *p = NULL;
  return ir_read_memory(text, len, "t.xml", &p, NULL) ? NULL : p;
}

/* The LL one-shot: every rank puts its input into every peer's landing,
 * then adds its landings to its own. */
static ir_prog *oneshot(int n, int inplace) {
  begin("LL", n, 1, inplace);
  for (int r = 0; r < n; r++) {
    rank_begin(r, 1, inplace, n - 1);
    for (int q = 0; q < n; q++)
      if (q != r) step("put", "i", 0, "s", ((r - q - 1) % n + n) % n, 1, q);
    if (!inplace) step("cpy", "i", 0, "o", 0, 1, -1);
    for (int k = 0; k < n - 1; k++) step("re", "s", k, inplace ? "i" : "o", 0, 1, -1);
    rank_end();
  }
  return end();
}

/* The Simple two-shot on the ranks' own buffers: signals, waits, the
 * reduction of chunk r by loads, its puts, signals and waits again. */
static ir_prog *twoshot(int n) {
  begin("Simple", n, n, 0);
  for (int r = 0; r < n; r++) {
    rank_begin(r, n, 0, 0);
    for (int q = 0; q < n; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    step("cpy", "i", r, "o", r, 1, -1);
    for (int q = 0; q < n; q++) if (q != r) step("getr", "i", r, "o", r, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("put", "o", r, "o", r, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    rank_end();
  }
  return end();
}

/* Broadcast by gets, Simple, in place: each peer signals the root, then
 * waits for its signal and loads the root's input (the root's buffer is
 * reached by its peers). */
static ir_prog *broadcast_get(int n) {
  coll = "broadcast";
  begin("Simple", n, 1, 1);
  for (int r = 0; r < n; r++) {
    rank_begin(r, 1, 1, 0);
    if (r == 0) {
      for (int q = 1; q < n; q++) step("sig", "i", -1, "o", -1, 1, q);
      for (int q = 1; q < n; q++) step("wait", "i", -1, "o", -1, 1, q);
    } else {
      step("wait", "i", -1, "o", -1, 1, 0);
      step("get", "i", 0, "i", 0, 1, 0);
      step("sig", "i", -1, "o", -1, 1, 0);
    }
    rank_end();
  }
  return end();
}

/* LL one way, as the compiler lowers a direct LL broadcast: rank 0 puts
 * its input into every peer's landing and ends waiting for each peer's
 * signal; each peer signals rank 0 at its start and copies its landing
 * into place (in place). */
static ir_prog *broadcast_ll(int n) {
  coll = "broadcast";
  begin("LL", n, 1, 1);
  for (int r = 0; r < n; r++) {
    rank_begin(r, 1, 1, r ? 1 : 0);
    if (r == 0) {
      for (int q = 1; q < n; q++) step("put", "i", 0, "s", 0, 1, q);
      for (int q = 1; q < n; q++) step("wait", "i", -1, "o", -1, 1, q);
    } else {
      step("sig", "i", -1, "o", -1, 1, 0);
      step("cpy", "s", 0, "i", 0, 1, -1);
    }
    rank_end();
  }
  return end();
}

/* AllToAll, Simple, out of place, on the ranks' own buffers: each rank
 * signals every peer and waits for it, puts its block q into rank q's
 * output, copies its own block, then signals and waits again. */
static ir_prog *alltoall_put_stray(int n, int stray) {
  coll = "alltoall";
  begin("Simple", n, n, 0);
  for (int r = 0; r < n; r++) {
    rank_begin(r, n, 0, 0);
    for (int q = 0; q < n; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    if (stray && r == 1) step("put", "i", 0, "o", 0, 1, 0);   /* into rank 0's own block, before its copy */
    for (int q = 0; q < n; q++) if (q != r) step("put", "i", q, "o", r, 1, q);
    step("cpy", "i", r, "o", r, 1, -1);
    for (int q = 0; q < n; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < n; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    rank_end();
  }
  return end();
}
static ir_prog *alltoall_put(int n) { return alltoall_put_stray(n, 0); }

/* Where an in-place call of out-of-place direct programs gets the copy of
 * its input (rt_dplan_stage). */
static void check_stage(void) {
  rt_dplan d;
  ir_prog *p = alltoall_put(2);
  const int64_t mib = (int64_t)1 << 20, scratch = 48 * mib, pool = 1024 * mib;
  ir_geom g;
  int built = p && rt_dplan_build(&d, p, 0, 512) == BT_OK && d.ok && d.stage_ok && !ir_geom_init(&g, p, 0, 1, 0);
  ok(built && d.peer_io && d.s_chunks == 0, "direct AllToAll by puts after waits: built, may run on a copy of its input");
  const int64_t per = built ? g.elems[IR_BUF_INPUT] * 4 : 1;   /* input bytes per f32 of count */
  ok(built && rt_dplan_stage(&d, p, 0, 2 * mib / per, 4, scratch, pool) == 1 &&
     rt_dplan_stage(&d, p, 0, scratch / per, 4, scratch, pool) == 1,
     "in-place AllToAll of up to the window's 48 MiB scratch: the input copied into the scratch");
  ok(built && rt_dplan_stage(&d, p, 0, 64 * mib / per, 4, scratch, pool) == 2 &&
     rt_dplan_stage(&d, p, 0, pool / per, 4, scratch, pool) == 2,
     "past the scratch, up to BATON_STAGE_POOL_MB (1 GiB): into memory of the stream's pool");
  ok(built && rt_dplan_stage(&d, p, 0, 2 * pool / per, 4, scratch, pool) == 0 &&
     rt_dplan_stage(&d, p, 0, 64 * mib / per, 4, scratch, 0) == 0 &&
     rt_dplan_stage(&d, p, 0, 2 * mib / per, 4, scratch, 0) == 1,
     "past BATON_STAGE_POOL_MB, or with 0, no copy into the pool: another program (the scratch still serves)");
  /* The staged variant: the own block's copy left out, and from the copy. */
  for (int r = 0; r < 3; r++) {
    rt_dplan v;
    ir_prog *p3 = alltoall_put(3);
    int good = p3 && rt_dplan_build(&d, p3, r, 512) == BT_OK && rt_dplan_build_staged(&v, p3, r, 512) == BT_OK;
    int stores = 0, vstores = 0;
    for (int k = 0; good && k < d.nlinks; k++) stores += d.tab.links[k].kind != IP_L_LOAD;
    for (int k = 0; good && k < v.nlinks; k++) vstores += v.tab.links[k].kind != IP_L_LOAD;
    ok(good && v.ok && v.skip_in == 1ull << r && d.skip_in == 0 && vstores == stores - 1 && v.stage_ok && v.peer_io,
       "3-rank AllToAll, rank %d: the staged variant leaves out the copy of block %d (%d stores against %d) and the "
       "copy before the kernel skips it (skip_in %#llx)", r, r, vstores, stores, (unsigned long long)v.skip_in);
    ir_prog_free(p3);
  }
  rt_dplan v;
  ok(rt_dplan_build_staged(&v, p, 0, 512) == BT_OK && v.skip_in == 1, "2 ranks: block 0 left out on rank 0");
  ir_prog_free(p);
  p = alltoall_put_stray(2, 1);
  ok(p && rt_dplan_build_staged(&v, p, 0, 512) == BT_ERR_UNSUPPORTED && rt_dplan_build_staged(&v, p, 1, 512) == BT_OK &&
     v.skip_in == 2, "a block another rank also writes keeps its copy (rank 0: no variant); rank 1's is left out");
  p = twoshot(2);
  built = p && rt_dplan_build(&d, p, 0, 512) == BT_OK && d.ok;
  ok(built && !d.stage_ok && rt_dplan_stage(&d, p, 0, 1024, 4, scratch, pool) == 0 &&
     rt_dplan_build_staged(&v, p, 0, 512) == BT_ERR_UNSUPPORTED && !v.ok,
     "a two-shot that loads its peers' inputs never runs on a copy (no staged variant)");
  ir_prog_free(p);
}

static int kinds_are(const rt_dplan *d, const ip_dop *o, const char *want) {
  char got[80];
  int n = 0;
  for (int k = 0; k < o->n && n < 78; k++) {
    const ip_dlink *l = &d->tab.links[o->first + k];
    got[n++] = "LSPC"[l->kind];
    got[n++] = "lpa"[l->at];
  }
  got[n] = 0;
  if (strcmp(got, want)) printf("#   links %s, expected %s\n", got, want);
  return !strcmp(got, want);
}

/* A program of two ranks, one thread block each, from its steps' text
 * (`step` lines of rank 0, then rank 1's), LL, of `coll` with the given
 * chunks; NULL where it does not read. */
static ir_prog *two_ranks(const char *coll_name, int per_loop, int ic, int oc, int sc, const char *const *steps0,
                          const char *const *steps1) {
  len = 0;
  put("<algo name=\"t\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"%d\" ngpus=\"2\" coll=\"%s\" "
      "inplace=\"%d\" baton=\"1\">\n", per_loop, coll_name, oc == 0);
  for (int r = 0; r < 2; r++) {
    put("  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n    <tb id=\"0\" send=\"-1\" "
        "recv=\"-1\" chan=\"0\">\n", r, ic, oc, sc);
    const char *const *st = r ? steps1 : steps0;
    for (int k = 0; st[k]; k++)
      put("      <step s=\"%d\" %s depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", k, st[k]);
    rank_end();
  }
  return end();
}

/* Orders the plan must keep whatever the steps' order allows: a signal
 * held back goes before a read of a landing (whose put may wait for it);
 * a read of a landing never joins a run of several chunks that puts (the
 * run walks chunk by chunk: its first chunk would wait for a put that
 * waits for its later ones); and a group of signals holds each stream
 * once, at its largest count (its stores race). */
static void check_orders(void) {
  static const char *const held0[] = {
      "type=\"put\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\" cnt=\"1\" peer=\"1\"",
      "type=\"sig\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" peer=\"1\"",
      "type=\"cpy\" srcbuf=\"s\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"",
      "type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"", NULL};
  static const char *const held1[] = {
      "type=\"wait\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" peer=\"0\"",
      "type=\"put\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\" cnt=\"1\" peer=\"0\"",
      "type=\"cpy\" srcbuf=\"s\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"",
      "type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"", NULL};
  rt_dplan d;
  ir_prog *p = two_ranks("allgather", 2, 1, 2, 1, held0, held1);
  int built = p && !rt_dplan_build(&d, p, 0, 512) && d.ok;
  ok(built && d.nops == 3 && kinds_are(&d, &d.tab.ops[0], "LlPp") && d.tab.ops[1].kind == IP_D_SIGS &&
     kinds_are(&d, &d.tab.ops[2], "LaSlLlSl"),
     "LL: put, signal, copy from the landing: the signal goes before the landing is read (the peer puts only "
     "after it)");
  ir_prog_free(p);
  static const char *const multi0[] = {
      "type=\"put\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\" cnt=\"2\" peer=\"1\"",
      "type=\"re\" srcbuf=\"s\" srcoff=\"2\" dstbuf=\"i\" dstoff=\"0\" cnt=\"2\"", NULL};
  static const char *const multi1[] = {
      "type=\"put\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"s\" dstoff=\"3\" cnt=\"1\" peer=\"0\"",
      "type=\"re\" srcbuf=\"s\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"",
      "type=\"put\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"2\" cnt=\"1\" peer=\"0\"",
      "type=\"re\" srcbuf=\"s\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"", NULL};
  p = two_ranks("allreduce", 2, 2, 0, 4, multi0, multi1);
  built = p && !rt_dplan_build(&d, p, 0, 512) && d.ok;
  ok(built && d.nops == 2 && kinds_are(&d, &d.tab.ops[0], "LlPpLlPp") && kinds_are(&d, &d.tab.ops[1], "LlCaSl"),
     "LL: a put of 2 chunks, then a reduction of 2 landed chunks: every chunk put before any landing is read "
     "(rank 1 puts chunk 0 only after it read chunk 1)");
  ir_prog_free(p);
  static const char *sigs0[40], *const sigs1[] = {
      "type=\"wait\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" peer=\"0\"", NULL};
  static const char *const sig = "type=\"sig\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" "
                                 "peer=\"1\"";
  for (int k = 0; k < 33; k++) sigs0[k] = sig;
  p = two_ranks("allreduce", 1, 1, 1, 0, sigs0, sigs1);
  built = p && !rt_dplan_build(&d, p, 0, 512) && d.ok;
  ok(built && d.nops == 1 && d.tab.ops[0].kind == IP_D_SIGS && d.tab.ops[0].n == 1 && d.tab.syncs[0].at == 33,
     "33 signals to one peer in a row: one entry, the 33rd count (threads storing each would race)");
  ir_prog_free(p);
}

/* Whether every data operation of d marks exactly its landing loads and
 * its puts (ip_dop.land, .puts), as the kernel takes them. */
static int masks_match(const rt_dplan *d) {
  for (int o = 0; o < d->nops; o++) {
    const ip_dop *op = &d->tab.ops[o];
    uint64_t puts = 0;
    unsigned land = 0;
    if (op->kind == IP_D_RUN || op->kind == IP_D_COPIES) {
      for (int k = 0; k < op->n; k++)
        if (d->tab.links[op->first + k].kind == IP_L_PUT) puts |= 1ull << k;
      const int loads = op->kind == IP_D_RUN ? op->ncomb + 1 : op->nseg;
      for (int c = 0; c < loads; c++)
        if (d->tab.links[op->first + (op->kind == IP_D_COPIES ? 2 * c : c == 0 ? 0 : op->npre + c)].at == IP_AT_LANDING)
          land |= 1u << c;
    }
    if (op->puts != puts || op->land != land) {
      printf("#   operation %d: puts %#llx land %#x, expected %#llx %#x\n", o, (unsigned long long)op->puts, op->land,
             (unsigned long long)puts, land);
      return 0;
    }
  }
  return 1;
}

/* Checks ip_dlink_at on rank 1's plan d of oneshot(4, 0), for 1,001 f32
 * elements on made-up buffers: every link of its run against what the
 * program text says (rank 1 puts into landing slot (1 - q - 1) mod 4 of
 * rank q, and reduces its own slots 0, 1, 2). */
static int links_at(const ir_prog *p, const rt_dplan *d, int proto) {
  static ip_dargs a;
  memset(&a, 0, sizeof a);
  if (ir_geom_init(&a.geom, p, 1, 1001, 0)) return 0;
  for (int r = 0; r < 4; r++)
    for (int b = 0; b < IR_BUF_COUNT; b++) a.buf[r][b] = (char *)(uintptr_t)(((uint64_t)r + 1) << 32 | (uint64_t)b << 24);
  a.rank = 1;
  a.nranks = 4;
  a.esize = 4;
  a.cb = a.geom.cap * 4;
  a.proto = proto;
  /* LL: 8 data bytes a 16-byte line; LL128: 120 a 128-byte line */
  const int64_t bytes = 1001 * 4, wire = proto == IR_PROTO_LL ? 2 * 4016 : (4016 + 119) / 120 * 128;
  const ip_dop *op = &d->tab.ops[0];
  int good = op->n == 8;
  for (int k = 0; k < op->n && good; k++) {
    char *ptr;
    int64_t valid;
    const ip_dlink *l = &d->tab.links[op->first + k];
    ip_dlink_at(&a, l, 0, &ptr, &valid);
    char *want = k == 0 ? a.buf[1][IR_BUF_INPUT]
                 : k <= 3 ? a.buf[l->peer][IR_BUF_SCRATCH] + ((1 - l->peer - 1) % 4 + 4) % 4 * wire
                 : k <= 6 ? a.buf[1][IR_BUF_SCRATCH] + (k - 4) * wire
                          : a.buf[1][IR_BUF_OUTPUT];
    good = ptr == want && valid == bytes;
    if (!good) printf("#   link %d: at %p (wanted %p), %lld bytes\n", k, (void *)ptr, (void *)want, (long long)valid);
  }
  return good;
}

/* Checks rt_dplan_lean_links on `rank`'s plan d of the 4-rank program p
 * for 1,001 elements of protocol `proto` on made-up buffers: the first
 * load is the input (none for LL128, whose operations walk lines), and
 * `want` puts of it are stored in the prologue, at the links' own places;
 * the call runs on LL's instance with early puts exactly where there are
 * some (ip_dargs_early). */
static int early_puts(const ir_prog *p, const rt_dplan *d, int rank, int proto, int want) {
  static ip_dargs a;
  memset(&a, 0, sizeof a);
  if (ir_geom_init(&a.geom, p, rank, 1001, 0)) return 0;
  for (int r = 0; r < 4; r++)
    for (int b = 0; b < IR_BUF_COUNT; b++) a.buf[r][b] = (char *)(uintptr_t)(((uint64_t)r + 1) << 32 | (uint64_t)b << 24);
  a.rank = rank;
  a.nranks = 4;
  a.esize = 4;
  a.cb = a.geom.cap * 4;
  a.proto = proto;
  rt_dplan_lean_links(&a, d);
  int good = proto == IR_PROTO_LL128 ? a.start[0].first == NULL : a.start[0].first == a.buf[rank][IR_BUF_INPUT];
  good &= a.start[0].puts == want;
  for (int k = 0; k < want; k++) good &= a.start[0].put[k] == a.lean[d->tab.ops[0].first + 1 + k].ptr;
  a.ntbs = d->ntbs;
  good &= ip_dargs_early(&a) == (want > 0);
  if (!good) printf("#   first %p, %d early puts (wanted %d)\n", (const void *)a.start[0].first, a.start[0].puts, want);
  return good;
}

/* Who sees whom begin a call (rt_dplan.unmet, .announce) in the LL
 * broadcast from rank 0 on 4 ranks (p), in the one-shot, the Simple
 * two-shot and a Simple broadcast by gets: off the root a rank sees only
 * the root (its landing or its signal), the root sees every rank (their
 * signals). */
static void check_meetings(const ir_prog *p) {
  rt_dplan d;
  bt_result built = rt_dplan_build(&d, p, 0, 512);
  ok(built == BT_OK && d.unmet == 0 && d.announce == 0 && d.meets && rt_dplan_grid(&d, 128) == 127,
     "LL broadcast, the root: sees every peer begin (their signals), every peer sees it (its landing): no wait, no "
     "word stored (unmet %#x, announce %#x); but other ranks meet, so its grid keeps a block spare as theirs does",
     d.unmet, d.announce);
  built = rt_dplan_build(&d, p, 2, 512);
  ok(built == BT_OK && d.unmet == 0xa && d.announce == 0xa,
     "LL broadcast, rank 2: sees neither rank 1 nor 3 begin, and neither sees it: it tells them when it begins, and "
     "ends only once they have (unmet %#x, announce %#x)", d.unmet, d.announce);
  rt_dplan v;
  ok(rt_dplan_build_root_copy(&v, p, 0, 512) == BT_OK && v.unmet == 0 && v.announce == 0,
     "LL broadcast's root-copy variant: the same meetings as the program's");
  int all = 1;
  ir_prog *q = oneshot(4, 0);
  for (int r = 0; r < 4; r++)
    all &= q && rt_dplan_build(&d, q, r, 512) == BT_OK && !d.unmet && !d.announce && !d.meets && rt_dplan_grid(&d, 128) == 128;
  ir_prog_free(q);
  ok(all, "LL one-shot: every rank sees every other begin (their landings): no wait, no word stored, the whole grid "
     "for the thread blocks");
  all = 1;
  q = twoshot(4);
  for (int r = 0; r < 4; r++) all &= q && rt_dplan_build(&d, q, r, 256) == BT_OK && !d.unmet && !d.announce;
  ir_prog_free(q);
  ok(all, "Simple two-shot: every rank waits for every other's signal: no wait, no word stored");
  q = broadcast_get(4);
  built = q ? rt_dplan_build(&d, q, 3, 512) : BT_ERR_INVALID;
  ok(built == BT_OK && d.unmet == 0x6 && d.announce == 0x6,
     "Simple broadcast by gets, rank 3: waits only for the root (unmet %#x, announce %#x)", d.unmet, d.announce);
  ir_prog_free(q);
}

int main(void) {
  rt_dplan d;
  bt_result built;
  /* One-shot LL, 4 ranks, out of place: one run, the input loaded once,
   * put to three peers, the landings reduced, the sum stored. */
  ir_prog *p = oneshot(4, 0);
  ok(p && rt_dplan_build(&d, p, 1, 512) == BT_OK && d.ok, "LL one-shot: built");
  ok(d.nops == 1 && d.tab.ops[0].kind == IP_D_RUN && d.tab.ops[0].npre == 3 && d.tab.ops[0].ncomb == 3 &&
     kinds_are(&d, &d.tab.ops[0], "LlPpPpPpCaCaCaSl"), "LL one-shot: one run: load, 3 puts, 3 landings reduced, one store "
     "(the copy into the output folded into the result's store)");
  ok(!d.peer_io && d.s_chunks == 3 && d.most_tbs == 1, "LL one-shot: reaches no peer's i/o, 3 landing chunks");
  int peers_ok = 1;
  for (int k = 1; k <= 3; k++) peers_ok &= d.tab.links[k].peer == (k <= 1 ? k - 1 : k) && d.tab.links[k].buf == IR_BUF_SCRATCH;
  ok(peers_ok, "LL one-shot: rank 1 puts to ranks 0, 2, 3, into their scratch");
  ok(d.tab.ops[0].puts == 0xe && d.tab.ops[0].land == 0xe,
     "LL one-shot: the plan marks links 1-3 as puts and operands 1-3 as landings once, for the kernel (ip_dop.puts, "
     ".land: %#llx, %#x)", (unsigned long long)d.tab.ops[0].puts, d.tab.ops[0].land);
  ok(links_at(p, &d, IR_PROTO_LL), "LL one-shot: where each link's chunk is (ip_dlink_at, the host's lean links and the kernel's "
     "table alike): the input and the output whole, each put in its slot of the peer's landing, each landing of this "
     "rank in its slot, LL lines twice the payload rounded to 16 bytes");
  ok(early_puts(p, &d, 1, IR_PROTO_LL, 3), "LL one-shot: each thread puts its unit of the input to the three peers "
     "right after loading it, at the run's own put links (ip_dargs.start)");
  ok(early_puts(p, &d, 1, IR_PROTO_SIMPLE, 0), "the same plan as Simple: the input loaded first, nothing put early");
  p->proto = IR_PROTO_LL128;
  ok(rt_dplan_build(&d, p, 1, 512) == BT_OK && d.ok && d.nops == 1 &&
     kinds_are(&d, &d.tab.ops[0], "LlPpPpPpCaCaCaSl") && links_at(p, &d, IR_PROTO_LL128) &&
         early_puts(p, &d, 1, IR_PROTO_LL128, 0),
     "LL128 one-shot: the same plan, its landings 128-byte lines of 120 payload bytes");
  ir_prog_free(p);
  p = oneshot(4, 1);
  ok(p && rt_dplan_build(&d, p, 0, 512) == BT_OK && d.nops == 1 && kinds_are(&d, &d.tab.ops[0], "LlPpPpPpCaCaCaSl") &&
     d.tab.links[7].buf == IR_BUF_INPUT, "LL one-shot in place: the same run, the sum stored over the input");
  ir_prog_free(p);
  /* Eight ranks: seven landings, more than a run loads: cut, the second
   * run starting from the stored partial sum. */
  p = oneshot(8, 0);
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  const int per = IP_DIRECT_RUN_LOADS - 1, runs = (7 + per - 1) / per;   /* reductions a run holds; runs for 7 */
  ok(built == BT_OK && d.nops == runs && d.tab.ops[0].ncomb == per && d.tab.ops[runs - 1].ncomb == 7 - (runs - 1) * per &&
     d.tab.links[d.tab.ops[1].first].kind == IP_L_LOAD && d.tab.links[d.tab.ops[1].first].buf == IR_BUF_OUTPUT,
     "LL one-shot, 8 ranks: seven landings in runs of %d reductions, each later run from the partial sum", per);
  ir_prog_free(p);
  /* LL one way with its signals (a broadcast): the root's puts in one
   * run, then its waits; a peer's signal before its copy. */
  p = broadcast_ll(4);
  ok(p && rt_dplan_build(&d, p, 0, 512) == BT_OK && d.nops == 2 && d.tab.ops[0].kind == IP_D_RUN &&
     kinds_are(&d, &d.tab.ops[0], "LlPpPpPp") && d.tab.ops[1].kind == IP_D_WAITS && d.tab.ops[1].n == 3,
     "LL broadcast, the root: one run (a load, three puts), then three waits");
  ok(early_puts(p, &d, 0, IR_PROTO_LL, 0), "LL broadcast, the root: its run reduces nothing, so its puts wait for the "
     "run (nothing on the peers waits on them sooner)");
  ok(d.root_src, "LL broadcast: the root only puts from its input and no peer reaches it (an out-of-place call's "
     "copy into the root's output may run beside the kernel)");
  built = p ? rt_dplan_build(&d, p, 2, 512) : BT_ERR_INVALID;
  ok(built == BT_OK && d.nops == 2 && d.tab.ops[0].kind == IP_D_SIGS && d.tab.ops[0].n == 1 && d.tab.ops[1].kind != IP_D_SIGS &&
     d.tab.ops[1].kind != IP_D_WAITS && d.s_chunks == 1, "LL broadcast, a peer: its signal, then the copy of its landing "
     "(built %d, %d ops, kinds %d %d, %d signals, %d landing chunks)", built, d.nops, d.nops ? d.tab.ops[0].kind : -1,
     d.nops > 1 ? d.tab.ops[1].kind : -1, d.nops ? d.tab.ops[0].n : -1, (int)d.s_chunks);
  ir_prog_free(p);
  /* Its root-copy variant (an out-of-place call on the caller's input):
   * the run's value also stored into the same chunk of the output. */
  p = broadcast_ll(4);
  built = p ? rt_dplan_build_root_copy(&d, p, 0, 512) : BT_ERR_INVALID;
  ok(built == BT_OK && d.ok && d.nops == 2 && kinds_are(&d, &d.tab.ops[0], "LlPpPpPpSl") &&
     d.tab.links[d.tab.ops[0].first + 4].buf == IR_BUF_OUTPUT && d.tab.links[d.tab.ops[0].first + 4].off == 0 &&
     d.tab.ops[1].kind == IP_D_WAITS, "LL broadcast's root-copy variant, the root: one run, its load put to three "
     "peers and stored into o[0], then the waits");
  ok(rt_dplan_build(&d, p, 2, 512) == BT_OK && d.ok && masks_match(&d),
     "LL broadcast, a rank off the root: its landing loads and its puts marked for the kernel");
  ok(rt_dplan_build_root_copy(&d, p, 2, 512) == BT_ERR_UNSUPPORTED && !d.ok, "no root-copy variant off the root");
  check_meetings(p);
  ir_prog_free(p);
  p = broadcast_ll(2);
  built = p ? rt_dplan_build_root_copy(&d, p, 0, 512) : BT_ERR_INVALID;
  ok(built == BT_OK && d.nops == 2 && d.tab.ops[0].kind == IP_D_COPIES && d.tab.ops[0].nseg == 2 &&
     kinds_are(&d, &d.tab.ops[0], "LlPpLlSl") && d.tab.links[d.tab.ops[0].first + 3].buf == IR_BUF_OUTPUT,
     "LL broadcast on 2 ranks, root-copy variant: one put is a copies segment, the copy into the output a second "
     "segment beside it (a segment holds one store)");
  ok(d.tab.ops[0].puts == 0x2 && d.tab.ops[0].land == 0 && masks_match(&d),
     "LL broadcast on 2 ranks, root-copy variant: link 1 marked as its put, no landing");
  ir_prog_free(p);
  p = broadcast_get(4);
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  ok(built == BT_OK && !d.root_src, "a broadcast whose peers get from the root's input: the root's copy into its "
     "output must come before the kernel (built %d, root_src %d)", built, d.root_src);
  ok(rt_dplan_build_root_copy(&d, p, 0, 512) == BT_ERR_UNSUPPORTED, "... and it has no root-copy variant");
  ir_prog_free(p);
  p = oneshot(4, 0);
  ok(p && rt_dplan_build(&d, p, 0, 512) == BT_OK && !d.root_src, "an AllReduce has no root");
  ir_prog_free(p);
  /* Two-shot, Simple, 4 ranks. */
  p = twoshot(4);
  ok(p && rt_dplan_build(&d, p, 2, 256) == BT_OK && d.nthreads == 256, "two-shot: built");
  ok(d.nops == 5 && d.tab.ops[0].kind == IP_D_SIGS && d.tab.ops[1].kind == IP_D_WAITS && d.tab.ops[2].kind == IP_D_RUN &&
     d.tab.ops[3].kind == IP_D_SIGS && d.tab.ops[4].kind == IP_D_WAITS && d.tab.ops[0].n == 3 && d.tab.ops[4].n == 3,
     "two-shot: signals, waits, one run, signals, waits");
  ok(kinds_are(&d, &d.tab.ops[2], "LlCpCpCpSlPpPpPp") && d.tab.ops[2].npre == 0 && d.tab.ops[2].ncomb == 3,
     "two-shot: the run loads i[r], reduces three peers' i[r], stores o[r] and puts it to three peers");
  const ip_dsync *s0 = &d.tab.syncs[d.tab.ops[0].first], *s3 = &d.tab.syncs[d.tab.ops[3].first], *w1 = &d.tab.syncs[d.tab.ops[1].first],
                 *w4 = &d.tab.syncs[d.tab.ops[4].first];
  ok(s0->at == 1 && s3->at == 2 && w1->at == 1 && w4->at == 2 && IP_DIRECT_SIGNAL(1, 1) > IP_DIRECT_SIGNAL(0, 64),
     "two-shot: each stream carries 2 signals a call: the first group sends and waits for number 1, the second 2; "
     "a call's signals count above every earlier call's");
  ok(d.peer_io, "two-shot: reaches its peers' inputs and outputs");
  ir_prog_free(p);
  /* The compiler's two-shot puts and signals peer by peer (put, sig, put,
   * sig, ...): one run, its signals after it in one group.  A staging copy
   * of four chunks and three copies of one chunk each: two copies
   * operations, every load of each at once. */
  begin("Simple", 4, 4, 0);
  for (int r = 0; r < 4; r++) {
    rank_begin(r, 4, 0, 8);
    step("cpy", "i", 0, "s", 0, 4, -1);
    for (int q = 0; q < 4; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < 4; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    step("cpy", "s", r, "o", r, 1, -1);
    for (int q = 0; q < 4; q++) if (q != r) step("getr", "s", r, "o", r, 1, q);
    for (int q = 0; q < 4; q++)
      if (q != r) {
        step("put", "o", r, "s", 4 + r, 1, q);
        step("sig", "i", -1, "o", -1, 1, q);
      }
    for (int q = 0; q < 4; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < 4; q++) if (q != r) step("cpy", "s", 4 + q, "o", q, 1, -1);
    rank_end();
  }
  p = end();
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  char kinds[40] = "";
  for (int i = 0; i < d.nops && i < 39; i++) kinds[i] = "RCSW"[d.tab.ops[i].kind];
  ok(built == BT_OK && !strcmp(kinds, "CSWRSWC") && d.tab.ops[0].nseg == 4 && d.tab.ops[0].cnt == 1 && d.tab.ops[3].n == 8 &&
     d.tab.ops[4].n == 3 && d.tab.ops[6].nseg == 3 && masks_match(&d), "staged two-shot: copies of 4 chunks, signals, waits, one run (load, 3 "
     "reductions, store, 3 puts), its 3 signals after it, waits, 3 copies at once (%s)", kinds);
  ir_prog_free(p);
  /* The in-place two-shot through scratch: rank 0 puts a chunk to each
   * peer's scratch, a signal after each: one copies operation (the three
   * links busy at once), then the three signals.  A chain's pieces to one
   * peer keep their signals between them (the peer forwards each as it
   * lands). */
  begin("Simple", 4, 4, 0);
  for (int r = 0; r < 4; r++) {
    rank_begin(r, 4, 0, 3);
    for (int q = 0; q < 4; q++) if (q != r) step("sig", "i", -1, "o", -1, 1, q);
    for (int q = 0; q < 4; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    for (int q = 0, k = 0; q < 4; q++)
      if (q != r) {
        step("put", "i", q, "s", k++, 1, q);
        step("sig", "i", -1, "o", -1, 1, q);
      }
    for (int q = 0; q < 4; q++) if (q != r) step("wait", "i", -1, "o", -1, 1, q);
    rank_end();
  }
  p = end();
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  memset(kinds, 0, sizeof kinds);
  for (int i = 0; i < d.nops && i < 39; i++) kinds[i] = "RCSW"[d.tab.ops[i].kind];
  ok(built == BT_OK && !strcmp(kinds, "SWCSW") && d.tab.ops[2].nseg == 3 && d.tab.ops[3].n == 3 && masks_match(&d),
     "puts to three peers, a signal after each: one copies operation of 3 segments, then the 3 signals (%s)", kinds);
  ir_prog_free(p);
  begin("Simple", 2, 4, 0);
  for (int r = 0; r < 2; r++) {
    rank_begin(r, 4, 0, 0);
    step(r ? "sig" : "wait", "i", -1, "o", -1, 1, 1 - r);
    for (int c = 0; c < 4 && r == 0; c++) {
      step("put", "i", c, "i", c, 1, 1);
      step("sig", "i", -1, "o", -1, 1, 1);
    }
    if (r) step("wait", "i", -1, "o", -1, 4, 0);
    rank_end();
  }
  p = end();
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  memset(kinds, 0, sizeof kinds);
  for (int i = 0; i < d.nops && i < 39; i++) kinds[i] = "RCSW"[d.tab.ops[i].kind];
  ok(built == BT_OK && !strcmp(kinds, "WCSCSCSCS"), "four pieces to one peer: each its copy, then its signal (%s)",
     kinds);
  ir_prog_free(p);
  /* An in-place AllToAll by xchg: one copies operation of two segments
   * (the local chunk put into the peer's, the peer's stored into the
   * local one), both loads first, after the start wait; its signal after. */
  coll = "alltoall";
  begin("Simple", 2, 2, 1);
  for (int r = 0; r < 2; r++) {
    rank_begin(r, 2, 1, 0);
    if (r == 0) {
      step("wait", "i", -1, "o", -1, 1, 1);
      step("xchg", "i", 1, "i", 0, 1, 1);
      step("sig", "i", -1, "o", -1, 1, 1);
    } else {
      step("sig", "i", -1, "o", -1, 1, 0);
      step("wait", "i", -1, "o", -1, 1, 0);
    }
    rank_end();
  }
  p = end();
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  memset(kinds, 0, sizeof kinds);
  for (int i = 0; i < d.nops && i < 39; i++) kinds[i] = "RCSW"[d.tab.ops[i].kind];
  const ip_dlink *xl = d.nops > 1 ? &d.tab.links[d.tab.ops[1].first] : NULL;
  ok(built == BT_OK && !strcmp(kinds, "WCS") && d.tab.ops[1].nseg == 2 && kinds_are(&d, &d.tab.ops[1], "LlPpLpSl") &&
     masks_match(&d) &&
     xl[0].off == 1 && xl[1].off == 0 && xl[1].peer == 1 && xl[2].off == 0 && xl[3].off == 1 && d.peer_io,
     "xchg: a wait, one copies operation (load i[1], put it to rank 1's i[0], load that, store it in i[1]), its "
     "signal (%s)", kinds);
  ir_prog_free(p);
  coll = "alltoall";   /* two chunks: a pair of segments each, two of the peer's loads at once */
  begin("Simple", 2, 4, 1);
  for (int r = 0; r < 2; r++) {
    rank_begin(r, 4, 1, 0);
    step(r ? "sig" : "wait", "i", -1, "o", -1, 1, 1 - r);
    if (r == 0) step("xchg", "i", 2, "i", 0, 2, 1);
    step(r ? "wait" : "sig", "i", -1, "o", -1, 1, 1 - r);
    rank_end();
  }
  p = end();
  built = p ? rt_dplan_build(&d, p, 0, 512) : BT_ERR_INVALID;
  xl = built == BT_OK && d.nops > 1 ? &d.tab.links[d.tab.ops[1].first] : NULL;
  ok(xl && d.tab.ops[1].kind == IP_D_COPIES && d.tab.ops[1].nseg == 4 && d.tab.ops[1].cnt == 1 &&
     kinds_are(&d, &d.tab.ops[1], "LlPpLpSlLlPpLpSl") && xl[0].off == 2 && xl[1].off == 0 && xl[4].off == 3 &&
     xl[5].off == 1 && xl[6].off == 1 && xl[7].off == 3,
     "xchg of 2 chunks: 4 segments of one chunk each (i[2] with rank 1's i[0], i[3] with its i[1]), all 4 loads first");
  ir_prog_free(p);
  /* Refused: a dependency between thread blocks, and more ranks than the
   * executor's parameters hold. */
  begin("Simple", 2, 1, 0);
  for (int r = 0; r < 2; r++) {
    nstep = 0;
    put("  <gpu id=\"%d\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"-1\" recv=\"-1\" "
        "chan=\"0\">\n", r);
    step("cpy", "i", 0, "o", 0, 1, -1);
    put("    </tb>\n    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n");
    nstep = 0;
    put("      <step s=\"0\" type=\"nop\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"0\" depid=\"0\" "
        "deps=\"0\" hasdep=\"0\" />\n");
    put("      <step s=\"1\" type=\"sig\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" "
        "deps=\"-1\" hasdep=\"0\" peer=\"%d\" />\n", 1 - r);
    put("      <step s=\"2\" type=\"wait\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" "
        "deps=\"-1\" hasdep=\"0\" peer=\"%d\" />\n", 1 - r);
    rank_end();
  }
  p = end();
  ok(p && rt_dplan_build(&d, p, 0, 512) == BT_ERR_UNSUPPORTED && !d.ok, "a wait on another thread block is refused");
  ir_prog_free(p);
  p = oneshot(IP_WIN_MAX_RANKS + 1, 0);
  ok(p && rt_dplan_build(&d, p, 0, 512) == BT_ERR_UNSUPPORTED, "%d ranks are refused (the executor spans %d)",
     IP_WIN_MAX_RANKS + 1, IP_WIN_MAX_RANKS);
  ir_prog_free(p);
  /* Room in the window and lanes. */
  p = oneshot(4, 0);
  rt_dplan_build(&d, p, 0, 512);
  rt_window_layout l;
  rt_window_plan(&l, 4, 128, (size_t)64 << 20);
  ok(rt_dplan_fits(&d, p, &l, (1 << 20) / 4, 4) && !rt_dplan_fits(&d, p, &l, (2 << 20) / 4, 4),
     "LL one-shot, 4 ranks, 64 MiB window (8 MiB landing halves): 1 MiB of f32 fits (3 x 2 MiB of lines), 2 MiB "
     "does not");
  ok(rt_dplan_lanes(&d, 128, 8, 0, 512) == 1 && rt_dplan_lanes(&d, 128, 32768, 0, 512) == 4 &&
     rt_dplan_lanes(&d, 128, 1 << 30, 0, 512) == 128 && rt_dplan_lanes(&d, 128, 32768, 2048, 512) == 16,
     "lanes: one for 8 bytes, 4 for 32 KiB (a unit a thread), all 128 for 1 GiB; 16 for 32 KiB at 2 KiB a lane");
  ok(rt_dplan_threads(&d, p, 128, 8, 256) == 256 && rt_dplan_threads(&d, p, 128, 512 << 10, 256) == 256 &&
     rt_dplan_threads(&d, p, 128, (512 << 10) + 16, 256) == 512 && rt_dplan_threads(&d, p, 128, 8, 0) == 512,
     "an LL call's threads: 256 while its chunk fits 128 lanes of 256 units (512 KiB), else the plan's 512; "
     "BATON_DIRECT_LL_THREADS=0: always the plan's");
  p->proto = IR_PROTO_LL128;
  rt_dplan_build(&d, p, 0, 512);
  ok(d.ll128 && rt_dplan_lanes(&d, 128, 32768, 0, 512) == 5 && rt_dplan_threads(&d, p, 128, 480 << 10, 256) == 256 &&
     rt_dplan_threads(&d, p, 128, 512 << 10, 256) == 512,
     "LL128: lanes and threads by the chunk's 128-byte lines (32 KiB: 274 lines, 5 lanes of 512 threads; 480 KiB "
     "fits 128 lanes of 256 threads, 512 KiB does not)");
  ok(l.seq >= (size_t)ip_direct_flag_words(128, 4) * 8 + IP_DIRECT_DESC_WORDS(4) * 8 &&
     l.ll >= l.seq + 129 * 8 && l.simple == l.ll + 2 * l.ll_half &&
     l.bytes >= ((size_t)64 << 20), "window layout: flags, counts and the claim word, two landing halves, scratch");
  ok(l.fseq >= l.simple + l.simple_bytes && l.a2a >= l.fseq + IP_FDIRECT_SEQ_WORDS * 8 &&
     l.fused >= l.a2a + IP_DIRECT_FLAG_WORDS(4) * 8 && l.a2a % 4096 == 0 && l.fused % 4096 == 0 &&
     l.fused_half == (size_t)2 << 20 && l.bytes == l.fused + 2 * IP_FDIRECT_FORMS * l.fused_half,
     "window layout: the direct GEMV + AllReduce's counts (a word per block and form, the claim word), the fused "
     "AllToAlls' flags (%d words for 4 ranks), then two 2 MiB landing halves per form, past the scratch",
     IP_DIRECT_FLAG_WORDS(4));
  ok(ip_fgemv_half_bytes(65536, 4, 2) <= (int64_t)l.fused_half && ip_fgemv_half_bytes(65536, 4, 4) <= (int64_t)l.fused_half &&
     ip_fgemv_half_bytes(65536, 8, 4) > (int64_t)l.fused_half && ip_fgemv_half_bytes(131072, 4, 2) <= (int64_t)l.fused_half &&
     ip_fgemv_half_bytes(131073, 4, 2) > (int64_t)l.fused_half,
     "64 MiB window, 4 ranks: the direct GEMV + AllReduce takes y of up to 131072 bf16 or 65536 f32 rows (16-byte lines "
     "of 8 bytes of y per rank); 65536 f32 rows on 8 ranks run a fused program");
  ok(ip_fgemv_half_bytes(1, 4, 2) == 4 * 16 && ip_fgemv_half_bytes(5, 2, 2) == 2 * 2 * 16,
     "a partial line still takes a whole line: 1 bf16 row, 4 ranks, 64 bytes; 5 rows, 2 ranks, 2 lines each");
  ir_prog_free(p);
  check_stage();
  check_orders();
  return tap_done();
}
