/* test_exec.c -- the CPU executor: results, tiling, uneven counts, deadlock
 * and slot-limit detection, wrong results, direct programs, and the race
 * check. */
#include <dirent.h>
#include <limits.h>

#include "direct_build.h"
#include "ip_cpu.h"
#include "ip_gpu.h"
#include "ir_check.h"
#include "ir_geom.h"
#include "ir_read.h"
#include "tap.h"

/* A 2-rank in-place allreduce: rank r reduces chunk r, then they swap. */
static const char *ar2 =
  "<algo name=\"ar2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\">\n"
  "<gpu id=\"0\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
  "<step s=\"1\" type=\"STEP1\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
  "<step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
  "<step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
  "</tb></gpu>\n"
  "<gpu id=\"1\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
  "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
  "<step s=\"2\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
  "<step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
  "</tb></gpu></algo>\n";

static ir_prog *load(const char *text, rt_diag *d) {
  ir_prog *p = NULL;
  if (ir_read_memory(text, strlen(text), "mem.xml", &p, d)) return NULL;
  return p;
}

static ir_prog *ar2_with(const char *step1, rt_diag *d) {
  char *t = tap_replace(ar2, "STEP1", step1, 0);
  ir_prog *p = load(t, d);
  free(t);
  return p;
}

static bt_result run(const ir_prog *p, ip_dtype t, ip_redop op, long count, long tile, int slots,
                     int inplace, rt_diag *d) {
  ip_cpu_opts o = {.dtype = t, .op = op, .count = count, .inplace = inplace, .tile = tile, .slots = slots};
  ip_cpu_report rep;
  rt_diag_clear(d);
  return ip_cpu_verify(p, &o, &rep, d);
}

/* The gemm kernel's division by a multiply and a shift (ip_fastdiv_make,
 * made on the host): exact for every divisor and dividend it is given,
 * 0 <= n < 2^31, including the ends and the neighbours of powers of two. */
static void test_fastdiv(void) {
  uint32_t ds[64 + 3 * 31];
  int nd = 0, bad = 0;
  for (uint32_t d = 1; d <= 64; d++) ds[nd++] = d;
  for (int b = 1; b < 31; b++) {
    ds[nd++] = (1u << b) - 1;
    ds[nd++] = (1u << b) + 1;
    ds[nd++] = 3u << (b - 1);
  }
  ds[nd++] = 2147483647u;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < nd && !bad; i++) {
    const ip_fastdiv f = ip_fastdiv_make(ds[i]);
    for (int k = 0; k < 4000 && !bad; k++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const uint32_t n = k < 4 ? (uint32_t[]){0, 1, ds[i] - 1, 2147483647u}[k] : (uint32_t)(x & 0x7fffffffu);
      const uint32_t q = (uint32_t)ip_fastdiv_div((int32_t)n, f);
      if (q != n / ds[i]) {
        printf("# %u / %u: %u, not %u\n", n, ds[i], q, n / ds[i]);
        bad = 1;
      }
    }
  }
  ok(!bad, "ip_fastdiv_make: n / d by a multiply and a shift, %d divisors x 4000 dividends", nd);
  const ip_fastdiv z = ip_fastdiv_make(0);   /* never a division by zero: taken as 1 */
  ok(ip_fastdiv_div(12345, z) == 12345 && z.s == 0, "ip_fastdiv_make(0) divides by 1");
}

/* The direct GEMM + AllToAll's interleaved walk (ip_gemm_inter_band, the
 * same function the GPU runs): for every split of up to 130 bands, and at
 * the largest count, a permutation of the bands that never has more than
 * ceil(w f / n) of the first f among its first w, and ends on one of the
 * others; and when ip_gemm_set_interleave turns it on. */
static void test_interleave(void) {
  static uint8_t seen[IP_GEMM_MAX_INTER_BANDS];
  int bad = 0, cases = 0;
  for (int32_t n = 2; n <= IP_GEMM_MAX_INTER_BANDS && !bad; n = n < 130 ? n + 1 : IP_GEMM_MAX_INTER_BANDS + 1) {
    const ip_fastdiv div = ip_fastdiv_make((uint32_t)n);
    for (int32_t f = 1; f < n && !bad; f = n < 130 || f + 1 == n ? f + 1 : n - 1) {
      memset(seen, 0, (size_t)n);
      int32_t firsts = 0;
      for (int32_t w = 0; w < n && !bad; w++) {
        const int32_t b = ip_gemm_inter_band(w, n, f, div);
        firsts += b < f;
        const int64_t most = ((int64_t)(w + 1) * f + n - 1) / n;
        if (b < 0 || b >= n || seen[b] || firsts > most || (w == n - 1 && b < f)) {
          printf("# n %d f %d: band walked %d-th is %d (%d of the first f so far, at most %lld)\n", n, f, w, b,
                 firsts, (long long)most);
          bad = 1;
        }
        if (b >= 0 && b < n) seen[b] = 1;
      }
      cases++;
    }
  }
  ok(!bad, "ip_gemm_inter_band: %d splits, each a permutation that spreads the first bands and ends on another", cases);
  ip_gemm_args g;
  memset(&g, 0, sizeof g);
  g.tiles_m = 32, g.tiles_n = 8, g.tiles = g.units = 256;
  ip_gemm_set_band_group(&g, 4);   /* 8 bands of 512 rows */
  ip_gemm_set_interleave(&g, 2048);
  ok(g.inter_n == 8 && g.inter_first == 4, "half the rows spread over 8 bands (%d of %d)", g.inter_first, g.inter_n);
  ip_gemm_set_interleave(&g, 3600);
  ok(g.inter_n == 8 && g.inter_first == 7, "whole bands: 3600 rows are 7 (%d)", g.inter_first);
  ip_gemm_set_interleave(&g, 100);
  const int less = g.inter_n;
  ip_gemm_set_interleave(&g, 4096);
  const int all = g.inter_n;
  ip_gemm_set_interleave(&g, 2048);
  ip_gemm_set_band_group(&g, 1);
  ok(!less && !all && !g.inter_n, "nothing spread under one band, for every band, or in bands of one tile row");
  ip_gemm_set_band_group(&g, 4);
  ip_gemm_set_interleave(&g, -2048);
  const int neg = g.inter_n;
  ip_gemm_set_interleave(&g, INT64_MAX);
  const int huge = g.inter_n;
  memset(&g, 0, sizeof g);
  ip_gemm_set_interleave(&g, 2048);   /* no band group set: refused, not a division by zero */
  ok(!neg && !huge && !g.inter_n, "negative, huge and unset: nothing spread");
}

/* The engine's default unit order: wide bands from K = IP_GEMM_DEEP_K,
 * where W alone fills most of L2 (IP_GEMM_DEEP_W_BYTES) or, for outputs of
 * IP_GEMM_DEEP_WIDE_N columns or more, from IP_GEMM_DEEP_WIDE_W_BYTES;
 * narrow ones elsewhere, and nothing odd for shapes outside the limits. */
static void test_band_default(void) {
  const int64_t deep = IP_GEMM_BAND_GROUP_DEEP, narrow = IP_GEMM_BAND_GROUP;
  ok(ip_gemm_default_band_group(8192, 4096) == deep && ip_gemm_default_band_group(4096, 14336) == deep &&
         ip_gemm_default_band_group(1024, IP_GEMM_DEEP_K) == deep,
     "wide bands for a 64 MiB W (K 4096 x N 8192) and from K = %d", IP_GEMM_DEEP_K);
  ok(ip_gemm_default_band_group(4096, 4096) == narrow && ip_gemm_default_band_group(4096, 1024) == narrow &&
         ip_gemm_default_band_group(8192, 1024) == narrow && ip_gemm_default_band_group(4096, 2048) == narrow,
     "narrow bands for a W of 32 MiB or less under %d columns, and of 16 MiB at %d", IP_GEMM_DEEP_WIDE_N,
     IP_GEMM_DEEP_WIDE_N);
  ok(ip_gemm_default_band_group(8192, 2048) == deep && ip_gemm_default_band_group(16384, 1024) == deep &&
         ip_gemm_default_band_group(IP_GEMM_DEEP_WIDE_N, IP_GEMM_DEEP_WIDE_W_BYTES / (2 * IP_GEMM_DEEP_WIDE_N)) == deep &&
         ip_gemm_default_band_group(IP_GEMM_DEEP_WIDE_N, IP_GEMM_DEEP_WIDE_W_BYTES / (2 * IP_GEMM_DEEP_WIDE_N) - 64) ==
             narrow &&
         ip_gemm_default_band_group(IP_GEMM_DEEP_WIDE_N - 64, 2560) == narrow,   /* 39.7 MiB */
     "wide bands for a W of %lld MiB or more from %d columns (K 2048 x N 8192), not below either",
     IP_GEMM_DEEP_WIDE_W_BYTES >> 20, IP_GEMM_DEEP_WIDE_N);
  const int64_t n = 4096, k_edge = IP_GEMM_DEEP_W_BYTES / (2 * n);   /* W exactly at the limit */
  ok(ip_gemm_default_band_group(n, k_edge) == deep && ip_gemm_default_band_group(n, k_edge - 64) == narrow,
     "the limit itself is wide (K %lld x N %lld)", (long long)k_edge, (long long)n);
  ok(ip_gemm_default_band_group(0, 4096) == narrow && ip_gemm_default_band_group(-1, -1) == narrow &&
         ip_gemm_default_band_group(IP_GEMM_MAX_DIM, IP_GEMM_MAX_DIM) == deep &&
         ip_gemm_default_band_group(INT64_MAX, 64) == narrow,
     "shapes outside the limits get the narrow default, the largest inside them the wide one");
}

static void test_allreduce(rt_diag *d) {
  ir_prog *p = ar2_with("rrc", d);
  ok(p && !ir_check(p, d), "2-rank allreduce validates");
  int fails = 0;
  for (int t = 0; t < IP_DTYPE_COUNT; t++)
    for (int op = 0; op < IP_REDOP_COUNT; op++)
      for (int ip = 0; ip < 2; ip++)
        fails += run(p, t, op, 1001, 64, 2, ip, d) != BT_OK;
  ok(fails == 0, "every type x op, in and out of place, 1001 elements in 64-element tiles: %s", rt_diag_text(d));
  ok(run(p, IP_F32, IP_OP_SUM, 1, 0, 0, 1, d) == BT_OK, "count 1 (chunk 1 is empty)");
  ok(run(p, IP_U8, IP_OP_MAX, 100003, 1000, 8, 1, d) == BT_OK, "large uneven count with many tiles");
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 100, .inplace = 1, .tile = 10, .slots = 8};
  ip_cpu_report rep;
  ok(!ip_cpu_verify(p, &o, &rep, d) && rep.ntiles == 5 && rep.messages == 2 * 2 * 5 && rep.threads == 2,
     "report counts tiles (5), messages (20) and threads (2)");
  ir_prog_free(p);
}

static void test_wrong(rt_diag *d) {
  ir_prog *p = ar2_with("r", d);   /* receives instead of reducing */
  ok(p && !ir_check(p, d), "a wrong program can still be well formed");
  ok(run(p, IP_I32, IP_OP_SUM, 8, 0, 0, 1, d) == BT_ERR_MISMATCH, "its result is wrong");
  ok_contains(rt_diag_text(d), "mem.xml: rank 0 output chunk 0 element 0 is", "the message names rank, chunk and element");
  ok_contains(rt_diag_text(d), "(the sum of input chunk 0 over all ranks)", "and says what was expected");
  ir_prog_free(p);
}

static void test_deadlock(rt_diag *d) {
  /* Both ranks receive before they send. */
  char *t = tap_replace(ar2, "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
                             "<step s=\"1\" type=\"STEP1\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>",
                        "<step s=\"0\" type=\"rrc\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
                        "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>", 0);
  char *u = tap_replace(t, "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n"
                           "<step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>",
                        "<step s=\"0\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
                        "<step s=\"1\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>", 0);
  ir_prog *p = load(u, d);
  ok(p && ir_check(p, d) == BT_ERR_INVALID, "validator rejects receive-before-send on both sides");
  ok_contains(rt_diag_text(d), "dependency cycle", "as a cycle");
  ok(run(p, IP_F32, IP_OP_SUM, 16, 0, 0, 1, d) == BT_ERR_DEADLOCK, "the executor, given it anyway, reports a deadlock instead of hanging");
  ok_contains(rt_diag_text(d), "rank 0 tb 0 step 0 (rrc) tile 0: waiting for a message from rank 1 on channel 0",
              "naming the stuck rank, tb, step, tile and what it waits for");
  ir_prog_free(p);
  free(t); free(u);
}

static void test_slots(const char *ring8, rt_diag *d) {
  char *text = tap_slurp(ring8);
  ir_prog *p = text ? load(text, d) : NULL;
  ok(p && !ir_check(p, d), "bundled 8-rank ring loads");
  if (!p) { free(text); return; }
  ok(run(p, IP_F32, IP_OP_SUM, 64, 0, 1, 1, d) == BT_ERR_DEADLOCK, "a ring with one FIFO slot deadlocks");
  ok_contains(rt_diag_text(d), "waiting for a free slot to rank 1 on channel 0 (all 1 full)", "the report names the full slot");
  ok(run(p, IP_F32, IP_OP_SUM, 64, 0, 2, 1, d) == BT_OK, "two slots are enough");
  rt_diag *e = rt_diag_new(10);
  ok(ir_check_slots(p, 1, e) == BT_ERR_INVALID, "the static check proves the deadlock with one slot");
  ok_contains(rt_diag_text(e), "rank 0 tb 0 step 13: deadlock with 1 FIFO slot per connection: a cycle through program order, dependencies, messages and full slots",
              "the static check names the step and the slots");
  ok_contains(rt_diag_text(e), "rank 0 tb 0 step 13 -[slot]-> rank 7 tb 0 step 13 -[slot]-> rank 6", "the cycle is listed with its slot edges");
  rt_diag_free(e);
  e = rt_diag_new(10);
  ok(ir_check_slots(p, 2, e) == BT_OK && ir_check_slots(p, 0, e) == BT_OK, "and proves two slots (and BATON_EXEC_SLOTS) enough: %s", rt_diag_text(e));
  rt_diag_free(e);
  ir_prog_free(p);
  free(text);
}

static const char *ag2 =
  "<algo name=\"ag2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allgather\" inplace=\"0\">\n"
  "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n"
  "<step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/>\n"
  "<step s=\"2\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" hasdep=\"HD\"/>\n"
  "EXTRA</tb>TB2</gpu>\n"
  "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
  "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/>\n"
  "<step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n"
  "<step s=\"2\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\"/>\n"
  "</tb></gpu></algo>\n";

static ir_prog *ag2_with(const char *hd, const char *extra, const char *tb2, rt_diag *d) {
  char *a = tap_replace(ag2, "HD", hd, 0), *b = tap_replace(a, "EXTRA", extra, 0), *c = tap_replace(b, "TB2", tb2, 0);
  ir_prog *p = load(c, d);
  free(a); free(b); free(c);
  return p;
}

static void test_outofplace(rt_diag *d) {
  ir_prog *p = ag2_with("0", "", "", d);
  ok(p && !ir_check(p, d) && !ir_check_races(p, 0, d), "2-rank out-of-place allgather validates");
  ok(run(p, IP_I64, IP_OP_SUM, 37, 5, 2, 0, d) == BT_OK, "and gathers: %s", rt_diag_text(d));
  ok(run(p, IP_I64, IP_OP_SUM, 37, 5, 2, 1, d) == BT_ERR_INVALID, "an out-of-place program cannot run in place");
  ok_contains(rt_diag_text(d), "the program is out-of-place; it cannot run in place", "and says so");
  ir_prog_free(p);
  p = ag2_with("0", "<step s=\"3\" type=\"cpy\" srcbuf=\"o\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\"/>\n", "", d);
  ok(p && !ir_check(p, d), "a program that writes its input validates");
  ok(run(p, IP_I32, IP_OP_SUM, 8, 0, 0, 0, d) == BT_ERR_MISMATCH, "but an out-of-place run that clobbers the input fails");
  ok_contains(rt_diag_text(d), "rank 0 input chunk 0 was overwritten by an out-of-place run", "naming the rank and chunk");
  ir_prog_free(p);
  /* A second tb writes o[0] too, with nothing ordering it against step 2. */
  p = ag2_with("1", "", "<tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\"><step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/></tb>", d);
  ok(p && !ir_check(p, d), "two writers of one chunk validate structurally");
  ok(ir_check_races(p, 0, d) == BT_ERR_INVALID, "the race check refuses them");
  ok_contains(rt_diag_text(d), "rank 0: data race: tb 0 step 2 (cpy) writes o[0] while tb 1 step 0 (cpy) writes o[0]",
              "naming both steps");
  /* A program built in memory (a compile's) names the script line a step came from, not "name:0". */
  free(p->file);
  p->file = NULL;
  p->gpus[0].tbs[0].steps[2].prov = ir_intern(p, "t.lua:7");
  rt_diag_clear(d);
  ir_check_races(p, 0, d);
  ok_contains(rt_diag_text(d), "t.lua:7: rank 0: data race: tb 0 step 2 (cpy)", "a compiled program's race names its "
              "script line");
  ir_prog_free(p);
  p = ag2_with("1", "", "<tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\"><step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"2\"/></tb>", d);
  rt_diag_clear(d);
  ok(p && !ir_check(p, d) && !ir_check_races(p, 0, d), "a dependency orders them: no race: %s", rt_diag_text(d));
  ir_prog_free(p);
}

/* The executor's sizes come from the caller's options, which the library
 * does not bound (baton verify does, first): a count beyond what baton
 * addresses is named as too large, and a size product that overflows is
 * refused with what it was, before anything is allocated. */
static void test_limits(rt_diag *d) {
  ir_prog *p = ar2_with("rrc", d);
  long huge = INT64_MAX / 2;
  ok(p && run(p, IP_F32, IP_OP_SUM, huge, 0, 0, 1, d) == BT_ERR_INVALID, "a count past IR_GEOM_MAX_ELEMS is refused");
  char want[160];
  snprintf(want, sizeof want, "count %ld is too large", huge);
  ok_contains(rt_diag_text(d), want, "saying the count is too large: %s", rt_diag_text(d));
  snprintf(want, sizeof want, "takes a count of at most %lld", (long long)ir_geom_max_count(p, 0, ir_prog_aliased(p, 1)));
  ok_contains(rt_diag_text(d), want, "and the largest it takes");
  ir_prog_free(p);
  /* A nop's cnt is not a range, yet executors size their slots by the
   * largest cnt: the validator refuses one larger than every buffer. */
  char *t = tap_replace(ar2, "srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n</tb>",
                        "srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\"/>\n"
                        "<step s=\"4\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"2147483647\"/>\n</tb>", 0);
  char *u = tap_replace(t, "STEP1", "rrc", 0);
  p = load(u, d);
  free(t);
  free(u);
  rt_diag_clear(d);
  ok(p && ir_check(p, d) == BT_ERR_INVALID, "a program with a nop of 2^31-1 chunks is refused");
  ok_contains(rt_diag_text(d), "rank 0 tb 0 step 4: nop has cnt=2147483647, more chunks than any buffer of the rank holds",
              "naming the step");
  ir_prog_free(p);
  /* Slots x their size past int64_t (2^44 elements of 8 bytes a slot, in
   * INT_MAX slots): refused before anything is allocated. */
  p = ar2_with("rrc", d);
  ok(p && run(p, IP_F64, IP_OP_SUM, INT64_C(1) << 45, 0, INT_MAX, 1, d) == BT_ERR_NOMEM,
     "INT_MAX slots of 2^47 bytes are refused");
  ok_contains(rt_diag_text(d), "2147483647 FIFO slots per connection of 140737488355328 bytes each are more bytes than "
              "this machine addresses; nothing was run", "naming the slots and their size: %s", rt_diag_text(d));
  ir_prog_free(p);
}

static void test_custom(rt_diag *d) {
  ir_prog *p = ag2_with("0", "", "", d);
  p->coll = IR_COLL_CUSTOM;
  ok(run(p, IP_F32, IP_OP_SUM, 4, 0, 0, 0, d) == BT_ERR_INVALID, "a custom collective needs an expectation");
  ir_expect *e = NULL;
  ir_expect_parse("o[r][c]=i[c][0]", "--expect", &e, d);
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 4, .inplace = 0, .expect = e};
  ip_cpu_report rep;
  ok(ip_cpu_verify(p, &o, &rep, d) == BT_OK, "allgather checked as a custom collective");
  ir_expect_free(e);
  ir_expect_parse("o[r][c]=i[1-c][0]", "--expect", &e, d);
  o.expect = e;
  ok(ip_cpu_verify(p, &o, &rep, d) == BT_ERR_MISMATCH, "a wrong expectation fails");
  ir_expect_free(e);
  ir_expect_parse("o[r][c]=i[c+5][0]", "--expect", &e, d);
  o.expect = e;
  rt_diag_clear(d);
  ok(ip_cpu_verify(p, &o, &rep, d) == BT_ERR_INVALID, "an expectation naming a missing rank is refused");
  ok_contains(rt_diag_text(d), "input chunk 0 of rank 5, which does not exist", "with the rank");
  ir_expect_free(e);
  ir_prog_free(p);
}

/* The static slot proof (ir_check_slots) and the executor agree on every
 * corpus file for 1 to 3 slots: the proof is exact, not just sound. */
static void test_slots_agree(const char *dir, rt_diag *d) {
  DIR *dd = opendir(dir);
  if (!dd) { ok(1, "# SKIP corpus %s missing", dir); return; }
  struct dirent *e;
  int files = 0, disagree = 0, deadlocks = 0;
  char path[1024], why[600] = "";
  while ((e = readdir(dd))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".xml")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ir_prog *p = NULL;
    rt_diag_clear(d);
    if (ir_read_file(path, &p, d) || ir_check_slots(p, 64, d)) { ir_prog_free(p); continue; }
    files++;
    for (int s = 1; s <= 3; s++) {
      rt_diag *e2 = rt_diag_new(4);
      int proof = ir_check_slots(p, s, e2) != BT_OK;
      ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 37, .inplace = -1, .tile = 2, .slots = s};
      if (p->coll == IR_COLL_CUSTOM) { ir_prog_free(p); p = NULL; rt_diag_free(e2); break; }
      ip_cpu_report rep;
      int run_dl = ip_cpu_verify(p, &o, &rep, e2) == BT_ERR_DEADLOCK;
      deadlocks += run_dl;
      if (proof != run_dl && !disagree++)
        snprintf(why, sizeof why, "%s with %d slots: proof says %s, executor %s", e->d_name, s,
                 proof ? "deadlock" : "free", run_dl ? "deadlocks" : "runs");
      rt_diag_free(e2);
    }
    ir_prog_free(p);
  }
  closedir(dd);
  ok(files > 5 && !disagree, "slot proof and executor agree on %d corpus files x 1..3 slots (%d deadlocks) %s",
     files, deadlocks, why);
}

/* A fused program (tests/fused_2r.xml: GEMV + AllReduce on 2 ranks): every
 * type it takes, tile sizes that cut its chunks in many tiles, every sync
 * policy; a compute step put in the wrong place gives a wrong result. */
static void test_fused(const char *path, rt_diag *d) {
  char *text = tap_slurp(path);
  if (!text) { printf("Bail out! cannot read %s\n", path); exit(1); }
  static const char *const policies[] = {"sync=\"group:2\"", "sync=\"group:3\"", "sync=\"stride:2\"", "sync=\"tile\""};
  static const long tiles[] = {0, 1, 7, 128};
  int fails = 0, runs = 0;
  for (int k = 0; k < 4; k++) {
    char *t = tap_replace(text, "sync=\"group:2\"", policies[k], 0);
    ir_prog *p = load(t, d);
    free(t);
    if (!p || ir_check(p, d)) { fails++; ir_prog_free(p); continue; }
    for (int dt = 0; dt < IP_DTYPE_COUNT; dt++)
      for (int ti = 0; ti < 4; ti++) {
        if (!ip_compute_takes(p, dt)) continue;
        ip_dims dims = {0};
        ip_dims_set(&dims, "K", ti == 2 ? 1 : 300);
        ip_cpu_opts o = {.dtype = dt, .op = IP_OP_SUM, .count = 1001, .inplace = 1, .tile = tiles[ti], .slots = 2,
                         .dims = &dims};
        ip_cpu_report rep;
        rt_diag_clear(d);
        fails += ip_cpu_verify(p, &o, &rep, d) != BT_OK;
        runs++;
      }
    ir_prog_free(p);
  }
  ok(fails == 0 && runs == 4 * 3 * 4, "GEMV + AllReduce: f32, f16, bf16 x 4 tile sizes x 4 sync policies: %s",
     rt_diag_text(d));
  ir_prog *p = load(text, d);
  ok(p && run(p, IP_I32, IP_OP_SUM, 100, 0, 0, 1, d) == BT_ERR_UNSUPPORTED,
     "a type gemv does not take is refused");
  ok_contains(rt_diag_text(d), "its compute steps do not take i32 (they take f32, f16, bf16)", "and the refusal says why");
  ir_prog_free(p);
  /* rank 0 computes chunk 0's rows into chunk 1: valid, and wrong */
  char *t = tap_replace(text, "type=\"gemv\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\"",
                        "type=\"gemv\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"1\"", 0);
  p = load(t, d);
  free(t);
  ok(p && !ir_check(p, d) && run(p, IP_F32, IP_OP_SUM, 1001, 64, 2, 1, d) == BT_ERR_MISMATCH,
     "a compute step writing the wrong rows gives a wrong result");
  ok_contains(rt_diag_text(d), "output chunk 1 element 0 is", "which the check names");
  ir_prog_free(p);
  free(text);
}

/* Embedding bags + AllToAll into an interleaved output: every float type,
 * tile sizes, int32 indices, and a wrong program caught. */
static void test_embed(const char *path, rt_diag *d) {
  char *text = tap_slurp(path);
  if (!text) { printf("Bail out! cannot read %s\n", path); exit(1); }
  static const long tiles[] = {0, 1, 4, 15};
  int fails = 0, runs = 0;
  for (int v = 0; v < 2; v++) {
    char *t = v ? tap_replace(text, "name=\"I\" kind=\"index\" dtype=\"i64\"", "name=\"I\" kind=\"index\" dtype=\"i32\"", 0)
                : strdup(text);
    ir_prog *p = t ? load(t, d) : NULL;
    free(t);
    if (!p || ir_check(p, d)) { fails++; ir_prog_free(p); continue; }
    for (int dt = 0; dt < IP_DTYPE_COUNT; dt++)
      for (int ti = 0; ti < 4; ti++) {
        if (!ip_compute_takes(p, dt)) continue;
        ip_dims dims = {0};
        ip_dims_set(&dims, "T", 3);
        ip_dims_set(&dims, "D", ti == 1 ? 1 : 5);
        ip_cpu_opts o = {.dtype = dt, .op = IP_OP_SUM, .count = ti == 1 ? 6 : 30 * 4, .inplace = 0, .tile = tiles[ti],
                         .slots = 2, .dims = &dims};
        ip_cpu_report rep;
        rt_diag_clear(d);
        fails += ip_cpu_verify(p, &o, &rep, d) != BT_OK;
        runs++;
      }
    ir_prog_free(p);
  }
  ok(fails == 0 && runs == 2 * 3 * 4, "embedding bags + AllToAll, weighted: f32, f16, bf16 x 4 tile sizes x i64/i32 "
     "indices: %s", rt_diag_text(d));
  ir_prog *p = load(text, d);
  ip_dims dims = {0};
  ip_dims_set(&dims, "T", 3);
  ip_dims_set(&dims, "D", 5);
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 31, .inplace = 0, .dims = &dims};
  ip_cpu_report rep;
  rt_diag_clear(d);
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_INVALID, "a count of part rows is refused");
  ok_contains(rt_diag_text(d), "count 31 does not fit the output's interleave T*D = 15", "and the refusal says why");
  ir_prog_free(p);
  /* rank 0 pools rank 1's samples' bags into its own chunks: valid, and wrong */
  char *t = tap_replace(text, "type=\"ebag\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"2\"",
                        "type=\"ebag\" srcbuf=\"i\" srcoff=\"2\" dstbuf=\"i\" dstoff=\"0\" cnt=\"2\"", 0);
  p = t ? load(t, d) : NULL;
  free(t);
  o.count = 120;
  rt_diag_clear(d);
  ok(p && !ir_check(p, d) && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_MISMATCH,
     "a bag pooled into the wrong chunk gives a wrong result");
  ok_contains(rt_diag_text(d), "output chunk", "which the check names");
  ir_prog_free(p);
  free(text);
}

/* GEMM + AllToAll (the MoE combine) on the CPU executor: bf16 only, tile
 * sizes, and a wrong program caught. */
static void test_moe(const char *path, rt_diag *d) {
  char *text = tap_slurp(path);
  if (!text) { printf("Bail out! cannot read %s\n", path); exit(1); }
  ir_prog *p = load(text, d);
  static const long tiles[] = {0, 1, 7, 64};
  int fails = 0;
  for (int ti = 0; p && ti < 4; ti++) {
    ip_dims dims = {0};
    ip_dims_set(&dims, "H", 6);
    ip_dims_set(&dims, "F", ti == 1 ? 1 : 33);
    ip_cpu_opts o = {.dtype = IP_BF16, .op = IP_OP_SUM, .count = 6 * 10, .inplace = 0, .tile = tiles[ti], .slots = 2,
                     .dims = &dims};
    ip_cpu_report rep;
    rt_diag_clear(d);
    fails += ip_cpu_verify(p, &o, &rep, d) != BT_OK;
  }
  ok(p && fails == 0, "GEMM + AllToAll: Y = X W per rank, each rank's rows back to it, 4 tile sizes: %s", rt_diag_text(d));
  ip_dims dims = {0};
  ip_dims_set(&dims, "H", 6);
  ip_cpu_opts o = {.dtype = IP_F32, .op = IP_OP_SUM, .count = 60, .inplace = 0, .dims = &dims};
  ip_cpu_report rep;
  rt_diag_clear(d);
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_UNSUPPORTED, "a gemm in f32 is refused (the engine's type is bf16)");
  ok_contains(rt_diag_text(d), "its compute steps do not take f32 (they take bf16)", "and the refusal says why");
  o.dtype = IP_BF16;
  o.count = 61;
  rt_diag_clear(d);
  ok(p && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_INVALID, "an input that is not whole rows of H is refused");
  ok_contains(rt_diag_text(d), "gemm: X has", "and the refusal names the shapes");
  ir_prog_free(p);
  /* rank 0 computes the rows of its first chunk into its second: valid, and wrong */
  char *t = tap_replace(text, "type=\"gemm\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\"",
                        "type=\"gemm\" srcbuf=\"i\" srcoff=\"2\" dstbuf=\"i\" dstoff=\"0\"", 0);
  p = t ? load(t, d) : NULL;
  free(t);
  o.count = 60;
  rt_diag_clear(d);
  ok(p && !ir_check(p, d) && ip_cpu_verify(p, &o, &rep, d) == BT_ERR_MISMATCH,
     "a gemm computing the wrong rows gives a wrong result: %s", rt_diag_text(d));
  ir_prog_free(p);
  free(text);
}

/* Runs p over every type and operator, in and out of place, with tiles
 * smaller than a chunk and with one tile per chunk, and as a sources run
 * (every element's route); returns the failed runs, the first one's
 * messages in d. */
static int direct_runs(const ir_prog *p, rt_diag *d, int *runs) {
  static const long tiles[] = {7, 64, 0};
  int fails = 0;
  char first[2048] = "";
  for (int ip = 0; ip <= p->inplace; ip++)
    for (int ti = 0; ti < 3; ti++)
      for (int t = 0; t < IP_DTYPE_COUNT; t++)
        for (int op = 0; op < IP_REDOP_COUNT; op++) {
          if (ti != 1 && (t != IP_F32 || op != IP_OP_SUM)) continue;   /* every type and op at one tile size */
          bt_result r = run(p, t, op, 1001, tiles[ti], 2, ip, d);
          (*runs)++;
          if (r && !fails++) snprintf(first, sizeof first, "%s %s %s tile %ld: %s", ip ? "in place" : "out of place",
                                      ip_dtype_name[t], ip_redop_name[op], tiles[ti], rt_diag_text(d));
        }
  for (int ip = 0; ip <= p->inplace; ip++) {
    ip_cpu_opts o = {.sources = 1, .count = 37, .tile = 5, .inplace = ip};
    ip_cpu_report rep;
    rt_diag_clear(d);
    (*runs)++;
    if (ip_cpu_verify(p, &o, &rep, d) && !fails++)
      snprintf(first, sizeof first, "sources run %s: %s", ip ? "in place" : "out of place", rt_diag_text(d));
  }
  rt_diag_clear(d);
  if (fails) rt_diag_add(d, "%s", first);
  return fails;
}

/* Checks p as ir_check and the race check of both layouts do; "" when it
 * passes, else the first messages. */
static const char *direct_checks(const ir_prog *p, int inplace) {
  static char buf[2048];
  rt_diag *d = rt_diag_new(8);
  if (!ir_check(p, d)) ir_check_races(p, inplace, d);
  snprintf(buf, sizeof buf, "%s", rt_diag_text(d));
  rt_diag_free(d);
  return buf;
}

/* Direct programs (put, get, getr, sig, wait) run on the executor: the
 * shapes the runtime makes, every type and operator, in and out of place,
 * tiles smaller than a chunk, sources runs; a wait that never gets its
 * signal is a deadlock naming the stream; an LL reader waits for its
 * landing. */
static void test_direct(rt_diag *d) {
  struct { const char *what; ir_prog *p; } progs[] = {
    {"Simple one-shot by get (barrier, getr from every peer, barrier), 2 ranks", oneshot_get(2, 1, 1, 1)},
    {"Simple one-shot by get, 5 ranks", oneshot_get(5, 1, 1, 1)},
    {"Simple two-shot (getr, then put to every peer), 2 ranks", twoshot(2)},
    {"Simple two-shot, 4 ranks", twoshot(4)},
    {"LL one-shot (put into landings, re), 2 ranks", oneshot_ll(2, 1)},
    {"LL one-shot, 4 ranks, 3 chunks per step", oneshot_ll(4, 3)},
    {"Simple allgather by put into scratch", allgather_put(0)},
  };
  for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
    ir_prog *p = progs[i].p;
    const char *e = direct_checks(p, 1);
    if (p->inplace) ok(!*e, "%s: valid, no race in place: %s", progs[i].what, e);
    e = direct_checks(p, 0);
    ok(!*e, "%s: valid, no race out of place: %s", progs[i].what, e);
    int runs = 0, fails = direct_runs(p, d, &runs);
    ok(!fails, "%s: %d runs right: %s", progs[i].what, runs, rt_diag_text(d));
    ir_prog_free(p);
  }
  /* The one-shot by get reducing straight into its output races in place:
   * peers still read the input that the reduction overwrites. */
  ir_prog *p = oneshot_get(2, 0, 1, 1);
  ok(!*direct_checks(p, 0), "one-shot by get into the output: no race out of place");
  ok_contains(direct_checks(p, 1), "rank 0: data race in its memory: rank 0 tb 0 step 2 (cpy) writes o[0] while rank 1 "
              "tb 0 step 3 (getr) reads i[0] (the same memory in place), and no dependency, signal or landing orders them",
              "... and a race in place, naming both steps and their ranks");
  ir_prog_free(p);
  /* A copy out of scratch before the wait that orders it after the peer's put. */
  p = allgather_put(1);
  ok_contains(direct_checks(p, 0), "rank 0: data race in its memory: rank 0 tb 0 step 4 (cpy) reads s[0] while rank 1 tb "
              "0 step 2 (put) writes s[0], and no dependency, signal or landing orders them",
              "a put not ordered before its peer's read is a race");
  rt_diag *e = rt_diag_new(8);
  ir_check_races(p, 0, e);
  ok_contains(rt_diag_text(e), "rank 0 tb 0 step 4 (cpy): reads s[0] before anything has produced it",
              "... and a read of scratch nothing ordered before it wrote");
  rt_diag_free(e);
  ir_prog_free(p);
  /* rank 1 leaves out its first sig to rank 0: rank 0's second wait never gets its signal */
  p = oneshot_get(2, 1, 1, 1);
  ir_tb *tb = &p->gpus[1].tbs[0];
  memmove(&tb->steps[0], &tb->steps[1], (tb->nsteps - 1) * sizeof *tb->steps);
  tb->nsteps--;
  ok(ir_check(p, d) == BT_ERR_INVALID, "a stream one sig short is invalid");
  ok(run(p, IP_F32, IP_OP_SUM, 100, 10, 2, 0, d) == BT_ERR_DEADLOCK, "... and the executor, given it anyway, deadlocks");
  ok_contains(rt_diag_text(d), "rank 0 tb 0 step 5 (wait) tile 0: waiting for signals of rank 1 on channel 0 (1 of the "
              "stream's first 2 have come)", "naming the wait, its tile and its stream: %s", rt_diag_text(d));
  ir_prog_free(p);
  /* LL: a rank that reads its landings before it puts waits for the peer's put forever (both do) */
  p = oneshot_ll(2, 1);
  for (int r = 0; r < 2; r++) {
    ir_step *s = p->gpus[r].tbs[0].steps, put = s[0];
    memmove(&s[0], &s[1], 2 * sizeof *s);
    s[2] = put;
  }
  ok(ir_check(p, d) == BT_ERR_INVALID, "LL: reading the landing before putting is a cycle");
  ok(run(p, IP_I32, IP_OP_SUM, 100, 0, 2, 1, d) == BT_ERR_DEADLOCK, "... and the executor deadlocks");
  ok_contains(rt_diag_text(d), "rank 0 tb 0 step 1 (re) tile 0: waiting for rank 1's put to land tile 0 in s[0]",
              "naming the landing and its put's rank: %s", rt_diag_text(d));
  ir_prog_free(p);
}

/* Split K's host side (ip_gemm_set_split, ip_gemm_default_splits): the
 * limits refused with g unchanged, the units a split makes, undoing it,
 * and the default's choice on an H200's 132 blocks where it was measured
 * to win or lose (ip_gemm.h). */
static void test_split(void) {
  static float ws[4] __attribute__((aligned(16)));
  static uint32_t sem[4];
  ip_gemm_args g;
  memset(&g, 0, sizeof g);
  g.tiles_m = 1, g.tiles_n = 16, g.tiles = g.units = 16, g.k_blocks = 32, g.splits = 1, g.tile_n = IP_GEMM_TILE_N;
  const char *why = NULL;
  int refused = 0;
  refused += ip_gemm_set_split(&g, 0, ws, sem, &why) == IP_GEMM_ESPLIT;
  refused += ip_gemm_set_split(&g, IP_GEMM_MAX_SPLITS + 1, ws, sem, &why) == IP_GEMM_ESPLIT;
  refused += ip_gemm_set_split(&g, 8, NULL, sem, &why) == IP_GEMM_ESPLIT;
  refused += ip_gemm_set_split(&g, 8, ws, NULL, &why) == IP_GEMM_ESPLIT;
  refused += ip_gemm_set_split(&g, 8, (float *)((char *)ws + 4), sem, &why) == IP_GEMM_ESPLIT;
  g.k_blocks = 4;
  refused += ip_gemm_set_split(&g, 5, ws, sem, &why) == IP_GEMM_ESPLIT;
  ok(refused == 6 && g.units == 16 && g.splits == 1 && !g.split_ws,
     "set_split refuses 0 and 17 ranges, a missing or misaligned workspace and more ranges than k-blocks (%d of 6; "
     "last: %s), g unchanged", refused, why ? why : "?");
  g.k_blocks = 32;
  const int set = ip_gemm_set_split(&g, 5, ws, sem, &why);
  int divides = 1;
  for (int32_t u = 0; u < 80; u++) divides &= ip_fastdiv_div(u, g.div_splits) == u / 5;
  ok(set == IP_GEMM_OK && g.units == 80 && g.splits == 5 && g.split_ws == ws && g.split_sem == sem && divides,
     "5 ranges of 16 tiles: 80 units, each tile's ranges consecutive (unit / 5)");
  ip_gemm_set_split(&g, 1, NULL, NULL, &why);
  ok(g.units == 16 && g.splits == 1 && !g.split_ws && !g.split_sem, "1 range undoes it, with no workspace");
  ok(ip_gemm_split_ws_bytes(&g, 8) == 16ll * 8 * IP_GEMM_TILE_M * IP_GEMM_TILE_N * 4 &&
         ip_gemm_split_sem_bytes(&g) == 16ll * IP_GEMM_SPLIT_SEMS * 4 && ip_gemm_split_ws_bytes(&g, 0) == 0,
     "the workspace holds every range's f32 tile, the counters IP_GEMM_SPLIT_SEMS words a tile");
  /* {tile width, tiles, k-blocks, blocks, expected}: narrower tiles'
   * exchanges cost less.  W's bytes left out (g's n and k are 0): the
   * trade of k-blocks against the exchange alone. */
  static const int64_t cases[][5] = {
      {256, 16, 16, 132, 1},    /* 128 x 4096 x 1024: 8 ranges spare 14 k-blocks, measured slower */
      {256, 16, 32, 132, 8},    /* 128 x 4096 x 2048 */
      {256, 16, 224, 132, 8},   /* 128 x 4096 x 14336 */
      {256, 32, 32, 132, 4},    /* 128 x 8192 x 2048 */
      {256, 64, 32, 132, 1},    /* 256 x 8192 x 2048: 2 ranges spare 16 */
      {256, 64, 64, 132, 2},    /* 256 x 8192 x 4096 */
      {256, 67, 224, 132, 1},   /* more than half the blocks: one round already */
      {256, 128, 224, 132, 1},  /* 1024 tokens: the MoE grid is never split */
      {256, 2, 1024, 132, 8},   /* at most IP_GEMM_SPLIT_DEFAULT_MAX */
      {256, 16, 32, 1, 1},      /* one block */
      {256, 0, 32, 132, 1},     /* nothing */
      {64, 64, 16, 132, 1},     /* 128 x 4096 x 1024 in 64 columns: 6.6 us whole, 8.9 in 2 ranges */
      {64, 64, 64, 132, 2},     /* 128 x 4096 x 4096: 14.0 us in 2 ranges, 16.8 whole */
      {128, 32, 224, 132, 4},   /* 128 x 4096 x 14336 in 128 columns */
      {128, 64, 224, 132, 2},   /* 128 x 8192 x 14336 */
      {64, 128, 64, 132, 1},    /* 128 x 8192 x 4096: one round already */
  };
  int bad = 0;
  g.n = g.k = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    g.tile_n = (int32_t)cases[i][0], g.tiles = cases[i][1], g.k_blocks = cases[i][2];
    const int64_t s = ip_gemm_default_splits(&g, cases[i][3]);
    if (s != cases[i][4]) {
      printf("# %lld tiles %lld wide of %lld k-blocks on %lld blocks: %lld ranges, expected %lld\n",
             (long long)cases[i][1], (long long)cases[i][0], (long long)cases[i][2], (long long)cases[i][3],
             (long long)s, (long long)cases[i][4]);
      bad++;
    }
  }
  ok(!bad, "default_splits: one round of ranges where the model says they win, else none (%d cases)",
     (int)(sizeof cases / sizeof cases[0]));
}

/* The box of X's last tile row (ip_gemm_tail): exactly its rows where
 * it holds fewer than a tile's, none (one box of 128, as every other tile
 * row) at a multiple of 128; the box holds every row of it and none past
 * X. */
static void test_tail(void) {
  static const int64_t cases[][3] = {   /* m, m0, rows */
      {1, 0, 1},      {8, 0, 8},       {9, 0, 9},      {64, 0, 64},       {65, 0, 65},        {100, 0, 100},
      {127, 0, 127},  {128, -1, 0},    {129, 128, 1},  {200, 128, 72},    {4000, 3968, 32},   {1024, -1, 0},
      {1000, 896, 104},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t m0;
    int32_t rows;
    ip_gemm_tail(cases[i][0], &m0, &rows);
    if (m0 != cases[i][1] || rows != cases[i][2]) {
      bad++;
      printf("# m %lld: m0 %lld rows %d\n", (long long)cases[i][0], (long long)m0, rows);
    }
  }
  int holds = 1;
  for (int64_t m = 1; m <= 1024; m++) {
    int64_t m0;
    int32_t rows;
    ip_gemm_tail(m, &m0, &rows);
    if (m % IP_GEMM_TILE_M ? m0 % IP_GEMM_TILE_M || m0 + rows != m || rows < 1 || rows >= IP_GEMM_TILE_M
                           : m0 != -1 || rows != 0)
      holds = 0;
  }
  ok(!bad && holds, "tail box: %d cases; for M 1-1024 it holds the last tile row's rows and none past X",
     (int)(sizeof cases / sizeof cases[0]));
}

/* Tile widths' host side (ip_gemm_retile, ip_gemm_default_tile_n):
 * widths the engine lacks refused with g unchanged; a width recounts the
 * tiles and units, undoes a split and keeps the band group, with
 * divisors that walk the new tiles; the default on an H200's 132 blocks
 * where it was measured (ip_gemm.h). */
static void test_tile_n(void) {
  static float ws[4] __attribute__((aligned(16)));
  static uint32_t sem[4];
  ip_gemm_args g;
  memset(&g, 0, sizeof g);
  g.m = 1000, g.n = 4160, g.k = 1024, g.tiles_m = 8, g.k_blocks = 16, g.tile_n = IP_GEMM_TILE_N;
  g.tiles_n = 17, g.tiles = g.units = 136, g.splits = 1;
  ip_gemm_set_band_group(&g, 3);
  const char *why = NULL;
  int refused = 0;
  static const int64_t bad_widths[] = {0, 32, 100, 192, 512, -64};
  for (size_t i = 0; i < sizeof bad_widths / sizeof bad_widths[0]; i++)
    refused += ip_gemm_retile(&g, bad_widths[i], &why) == IP_GEMM_ETILE;
  ok(refused == 6 && g.tile_n == IP_GEMM_TILE_N && g.tiles_n == 17 && g.tiles == 136,
     "retile refuses widths the engine lacks (%d of 6; %s), g unchanged", refused, why ? why : "?");
  ip_gemm_set_split(&g, 4, ws, sem, &why);
  const int set = ip_gemm_retile(&g, IP_GEMM_TILE_N_MIN, &why);
  int walks = 1;
  for (int32_t u = 0; u < 520; u++) walks &= ip_fastdiv_div(u, g.div_tiles_n) == u / 65;
  ok(set == IP_GEMM_OK && g.tile_n == 64 && g.tiles_n == 65 && g.tiles == 520 && g.units == 520 && g.splits == 1 &&
         !g.split_ws && !g.split_sem && g.band_group == 3 && walks,
     "64 columns: 65 tiles a row of N = 4160, 520 units, the split undone, bands of 3 kept, divisors by 65");
  ok(ip_gemm_split_ws_bytes(&g, 2) == 520ll * 2 * IP_GEMM_TILE_M * 64 * 4, "a range's partial tile is 128 x 64 f32");
  /* 64-column tiles walk K two k-blocks a stage: K = 1024 is 8 stages,
   * so 8 ranges at most (16 in wider tiles); an odd count rounds up. */
  const int over = ip_gemm_set_split(&g, 9, ws, sem, &why), eight = ip_gemm_set_split(&g, 8, ws, sem, NULL);
  ip_gemm_args odd = g;
  odd.k_blocks = 7;
  ok(over == IP_GEMM_ESPLIT && strstr(why, "stages") && eight == IP_GEMM_OK && ip_gemm_k_stages(&g) == 8 &&
         ip_gemm_k_stages(&odd) == 4,
     "64 columns: ranges at most the stages of K, two k-blocks each (9 refused: %s)", why);
  /* {M, N, K, blocks, expected width} */
  static const int64_t cases[][5] = {
      {128, 4096, 1024, 132, 64},     /* 16 tiles of 256 columns: 64 of 64 (6.6 us against 13.5) */
      {128, 4096, 2048, 132, 64},     /* whole (9.9 us against 12.1 in 128 split 4 ways) */
      {128, 4096, 4096, 132, 64},     /* split 2 ways: 14.0 against 15.2 in 128 split 4 ways */
      {128, 4096, 14336, 132, 64},    /* split 2 ways: 39.4 against 40.8 in 128 split 4 ways */
      {128, 8192, 2048, 132, 64},     /* 128 tiles of 64 columns fit */
      {256, 8192, 1024, 132, 128},    /* 64 tiles of 256: 128 of 128 (8.8 against 14.0) */
      {512, 4096, 4096, 132, 128},
      {256, 8192, 14336, 132, 128},   /* whole: 83.8 against 92.9 in 256 split 2 ways */
      {512, 8192, 1024, 132, 256},    /* 128 tiles: more than half the blocks */
      {1024, 4096, 1024, 132, 256},   /* the MoE grid keeps its tiles */
      {128, 4096, 1024, 100, 64},     /* fewer compute blocks */
      {256, 8192, 1024, 100, 256},    /* 64 tiles, more than half of 100 */
      {1, 64, 64, 132, 64},           /* one tile whatever its width */
      {128, 4096, 1024, 1, 256},      /* one block */
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset(&g, 0, sizeof g);
    g.m = cases[i][0], g.n = cases[i][1], g.k = cases[i][2], g.k_blocks = g.k / IP_GEMM_TILE_K;
    g.tiles_m = (g.m + IP_GEMM_TILE_M - 1) / IP_GEMM_TILE_M;
    const int64_t w = ip_gemm_default_tile_n(&g, cases[i][3]);
    if (w != cases[i][4]) {
      printf("# %lld x %lld x %lld on %lld blocks: %lld columns, expected %lld\n", (long long)g.m, (long long)g.n,
             (long long)g.k, (long long)cases[i][3], (long long)w, (long long)cases[i][4]);
      bad++;
    }
  }
  ok(!bad, "default_tile_n: the width the model says is fastest among those whose tiles fit the blocks (%d cases)",
     (int)(sizeof cases / sizeof cases[0]));
}

int main(int argc, char **argv) {
  rt_diag *d = rt_diag_new(20);
  test_fastdiv();
  test_interleave();
  test_band_default();
  test_split();
  test_tile_n();
  test_tail();
  test_allreduce(d);
  test_wrong(d);
  test_deadlock(d);
  test_slots(argc > 1 ? argv[1] : "algorithms/ir/allreduce_ring_8r.xml", d);
  test_slots_agree(argc > 2 ? argv[2] : "../shared/corpus/msccl", d);
  test_outofplace(d);
  test_custom(d);
  test_limits(d);
  test_fused(argc > 3 ? argv[3] : "tests/fused_2r.xml", d);
  test_embed(argc > 4 ? argv[4] : "tests/embed_2r.xml", d);
  test_moe(argc > 5 ? argv[5] : "tests/moe_2r.xml", d);
  test_direct(d);
  rt_diag_free(d);
  return tap_done();
}
