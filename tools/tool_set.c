/* tool_set.c -- `baton set`: the default algorithm set for N ranks, one
 * program per collective and size range, compiled in one command. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cc_lower.h"
#include "sim_spec.h"
#include "tool.h"

static const char set_help[] =
  "usage: baton set RANKS [-o DIR] [--algorithms DIR] [--system SPEC] [-q | -v]\n"
  "\n"
  "Compiles baton's default algorithm set for RANKS ranks into DIR (default\n"
  "./baton-RANKS): for each collective (AllReduce, AllGather, ReduceScatter,\n"
  "AllToAll, Broadcast, Reduce, Gather, Scatter) and each fused operator\n"
  "(GEMV + AllReduce, embedding bags + AllToAll, GEMM + AllToAll), one verified\n"
  "IR file per message-size range, so that the runtime picks the program\n"
  "measured fastest for each size.\n"
  "Point BATON_ALGO_DIR at DIR (docs/RUNTIME.md).  An installed baton also\n"
  "ships the sets for 2, 4 and 8 ranks, which the runtime finds by itself.\n"
  "\n"
  "options:\n"
  "  -o DIR            where the IR files go (created if missing)\n"
  "  --algorithms DIR  the Lua algorithm scripts (default: the installed\n"
  "                    ones, else the source tree baton was built from)\n"
  "  --system SPEC     then move each run of consecutive size ranges (one\n"
  "                    collective, FIFO or direct) to the crossovers `baton sim`\n"
  "                    predicts on that system (docs/SIMULATION.md); a program never\n"
  "                    predicted faster than the one before it is left out\n"
  "  -q, --quiet       no line per program\n"
  "  -v, --verbose     also each program's compile summary (steps, checks, times)\n";

/* Room for one program's compile command line. */
enum { SET_MAX_ARGS = 32, SET_PATH = PATH_MAX };

typedef struct set_ctx {
  int ranks, quiet, verbose, failed, written;
  const char *missing;   /* collectives the set has no program for at this rank count (said at the end) */
  int fused_missing;     /* 1: the fused AllToAlls (embedding bags, GEMM) have none; 2: GEMV + AllReduce */
  const char *algs, *out;
} set_ctx;

/* Compiles one program of the set: `script` (a file of the algorithm
 * folder) with the space-separated `params` and ranks=N, for messages of
 * lo..hi bytes (hi 0: no upper bound), into OUT/NAME_Nr.xml.  A failure
 * is counted and the set goes on, so one report names every bad entry. */
static void entry(set_ctx *c, const char *name, const char *script, long long lo, long long hi,
                  const char *params) {
  char path[SET_PATH], out[SET_PATH], sizes[64], pbuf[256], rbuf[32], lob[24] = "", hib[24] = "";
  char *argv[SET_MAX_ARGS];
  int argc = 0;
  snprintf(path, sizeof path, "%s/%s", c->algs, script);
  snprintf(out, sizeof out, "%s/%s_%dr.xml", c->out, name, c->ranks);
  if (lo > 0) snprintf(lob, sizeof lob, "%lld", lo);
  if (hi > 0) snprintf(hib, sizeof hib, "%lld", hi);
  snprintf(sizes, sizeof sizes, "%s:%s", lob, hib);
  snprintf(rbuf, sizeof rbuf, "ranks=%d", c->ranks);
  snprintf(pbuf, sizeof pbuf, "%s", params);
  argv[argc++] = "compile";
  if (!c->verbose) argv[argc++] = "-q";
  argv[argc++] = path;
  argv[argc++] = "--param";
  argv[argc++] = rbuf;
  char *save = NULL;
  for (char *p = strtok_r(pbuf, " ", &save); p && argc < SET_MAX_ARGS - 6; p = strtok_r(NULL, " ", &save)) {
    argv[argc++] = "--param";
    argv[argc++] = p;
  }
  argv[argc++] = "--sizes";
  argv[argc++] = sizes;
  argv[argc++] = "-o";
  argv[argc++] = out;
  argv[argc] = NULL;
  if (tool_compile(argc, argv)) {
    fprintf(stderr, "baton set: %s (%s %s, sizes %s) failed\n", name, script, params, sizes);
    c->failed++;
    return;
  }
  c->written++;
  if (!c->quiet) printf("%s  %s %s, bytes %s\n", out, script, params, sizes);
}

/* How an all-pairs program whose ranks each talk to every peer on `chans`
 * channels, plus `extra` thread blocks (one for local copies and
 * reductions, one for compute steps), fits a rank's CUDA blocks
 * (CC_MAX_TBS): "" with a thread block per peer and direction,
 * " placement=paired" with one per peer, NULL where neither fits. */
static const char *allpairs_fit(const set_ctx *c, int chans, int extra) {
  long long peers = (long long)(c->ranks - 1) * chans;
  if (2 * peers + extra <= CC_MAX_TBS) return "";
  if (peers + extra <= CC_MAX_TBS) return " placement=paired";
  return NULL;
}

/* entry() for an all-pairs program: with the placement that fits
 * (allpairs_fit), or none.  1 when one was written. */
static int entry_allpairs(set_ctx *c, const char *name, const char *script, long long lo, long long hi,
                          const char *params, int chans, int extra) {
  const char *fit = allpairs_fit(c, chans, extra);
  if (!fit) return 0;
  char p[256];
  snprintf(p, sizeof p, "%s%s", params, fit);
  int before = c->written;
  entry(c, name, script, lo, hi, p);
  return c->written > before;
}

/* The set.  The size ranges are the crossovers measured on H200s over
 * NVLink (docs/PERFORMANCE.md); every range has an out-of-place program
 * (no copy of the input) and an in-place one where they differ.  Where
 * the ranks are too many for an all-pairs program's thread blocks, even
 * paired (allpairs_fit), the ring, the tree or Bruck's AllToAll serve its
 * sizes. */
static void default_set(set_ctx *c) {
  const long long K = 1024, M = 1024 * 1024;
  /* One-shot AllReduce moves (n-1)x the data: on 2 ranks that is little,
   * so it runs to 4 MiB there, to 512 KiB on more. */
  long long one = c->ranks <= 2 ? 4 * M : 512 * K;
  const char *two = c->ranks <= 2 ? "shot=2 inplace=0 chain=1 protocol=LL128"
                                  : "shot=2 inplace=0 chain=1 protocol=LL128 agch=1";
  const char *two_ip = c->ranks <= 2 ? "shot=2 chain=1 protocol=LL128" : "shot=2 chain=1 protocol=LL128 agch=1";
  /* Direct programs (their steps reach the peers' windows; the runtime
   * prefers one a call can use, else the FIFO programs below serve it):
   * the LL one-shot for small messages; the two-shot on the ranks' own
   * buffers, which needs every rank's call in one group of one process;
   * the two-shot through scratch for the others (a process per GPU):
   * measured on 4 x H200 it beats the FIFO programs from 512 KiB (14.9
   * against 18.5 us), on 2 x H200 from 2 MiB.  Above 16 MiB the two-shot
   * whose reduce-scatter stores into the owners' scratch (puts: 159.6
   * against 169.3 us at 32 MiB on 4 x H200, 585 against 640 at 128 MiB)
   * beats the one that loads from the peers' inputs (gets); a message
   * whose scratch does not fit the window runs on slices that do (the
   * runtime's rt_direct_slice). */
  long long staged = c->ranks <= 2 ? M : 256 * K;
  /* The LL one-shot against the two-shot on the ranks' buffers, 2 x H200
   * under graphs: 7.6 against 9.3 us at 512 KiB, 10.4 against 10.9 at 1
   * MiB, 17.4 against 13.6 at 2 MiB.  On 2 ranks the LL128 one-shot (120
   * data bytes a 128-byte line, not 8 a 16-byte one) takes 128 KiB-1 MiB:
   * 5.1 and 6.1 us at 256 and 512 KiB against the LL one-shot's 5.2 and
   * 6.7, a tie at 1 MiB (9.8 against 9.9, since it reads each line again
   * after its flags, as NCCL's LL128 does); LL stays ahead to 128 KiB (4.6
   * against 4.8).  More ranks: not measured.  The LL128 one-shot moves
   * the message in one pass of the grid's 128 blocks of 512 threads, 16
   * bytes of line each, up to 960 KiB (120 data bytes a 128-byte line);
   * above, a second pass: 10.1-10.4 us at 1 MiB where the two-shot took
   * 9.4-9.6 (7.1 against 8.7-8.9 at 768 KiB), so a two-shot takes over
   * there (the LL128 two-shot on 2 ranks, below, for every call). */
  const long long pass128 = 960 * K;
  long long ll1 = c->ranks <= 2 ? pass128 : 128 * K, ll = c->ranks <= 2 ? 128 * K : ll1;
  if (c->ranks > 1 && c->ranks <= 16) {
    entry(c, "allreduce_0_direct1_oop", "allreduce_allpairs.lua", 0, ll, "shot=1 inplace=0 via=direct");
    entry(c, "allreduce_0_direct1", "allreduce_allpairs.lua", 0, ll, "shot=1 via=direct");
    if (ll < ll1) {
      entry(c, "allreduce_0_direct1_ll128_oop", "allreduce_allpairs.lua", ll + 1, ll1,
            "shot=1 inplace=0 via=direct protocol=LL128");
      entry(c, "allreduce_0_direct1_ll128", "allreduce_allpairs.lua", ll + 1, ll1, "shot=1 via=direct protocol=LL128");
    }
    /* On 2 ranks the LL128 two-shot (each rank puts its peer's half into
     * the peer's landing; the owner sums it and puts the sum back into a
     * landing: no opening signal, no peer's buffer, every mode) takes the
     * LL128 one-shot's second pass to its own, 1.875 MiB (2 x H200 under
     * graphs, bf16: 8.8 us at 1 MiB against the Simple two-shot's 9.6 and
     * the one-shot's 10.1; 10.2 against 12.0 and 10.7 at 1.875 MiB; 13.2
     * against 12.3 at 2 MiB).  For calls without their peers' buffers
     * (eager with a process per GPU) it runs on where the two-shot through
     * scratch would ("direct3_ll128", loaded after the two-shots on the
     * buffers and before the one through scratch), as far as its landings
     * hold. */
    const long long t128 = c->ranks <= 2 ? 1920 * K : ll1;
    if (c->ranks <= 2) {
      entry(c, "allreduce_0_direct1t_ll128_oop", "allreduce_allpairs.lua", ll1 + 1, t128,
            "shot=2 inplace=0 via=direct protocol=LL128");
      entry(c, "allreduce_0_direct1t_ll128", "allreduce_allpairs.lua", ll1 + 1, t128, "shot=2 via=direct protocol=LL128");
      entry(c, "allreduce_0_direct3_ll128_oop", "allreduce_allpairs.lua", t128 + 1, 8 * M,
            "shot=2 inplace=0 via=direct protocol=LL128");
      entry(c, "allreduce_0_direct3_ll128", "allreduce_allpairs.lua", t128 + 1, 8 * M, "shot=2 via=direct protocol=LL128");
    }
    entry(c, "allreduce_0_direct2_oop", "allreduce_allpairs.lua", t128 + 1, 16 * M,
          "shot=2 inplace=0 chain=1 protocol=Simple via=direct");
    entry(c, "allreduce_0_direct2", "allreduce_allpairs.lua", t128 + 1, 16 * M,
          "shot=2 chain=1 protocol=Simple via=direct");
    entry(c, "allreduce_0_direct3_put_oop", "allreduce_allpairs.lua", 16 * M + 1, 0,
          "shot=2 inplace=0 chain=1 protocol=Simple via=put");
    entry(c, "allreduce_0_direct3_put", "allreduce_allpairs.lua", 16 * M + 1, 0, "shot=2 chain=1 protocol=Simple via=put");
    /* Through scratch, the peers put their pieces into the owner's
     * scratch (no copy of the input first): eager, a process per GPU, bf16
     * in place on 2 x H200, 61.5 against 77.7 us at 16 MiB where the
     * first copy made it (NCCL 75.1), 36.0 against 43.6 at 8 MiB.  Where
     * its scratch does not fit the window it runs on slices that do: on 2
     * ranks (48 MiB slices) 231 against the FIFO ring's 250 us at 64 MiB,
     * 456 against 464 at 128 MiB, 912 against 849-869 at 256 MiB, so it
     * stops at 128 MiB there; on more ranks, sliced calls are not
     * measured: it stops at 32 MiB, what 4 ranks' scratch (1.5 x the
     * message) fits of the default window unsliced. */
    const long long staged_top = c->ranks <= 2 ? 128 * M : 32 * M;
    entry(c, "allreduce_0_direct3_staged_oop", "allreduce_allpairs.lua", staged + 1, staged_top,
          "shot=2 inplace=0 chain=1 protocol=Simple via=put stage=1");
    entry(c, "allreduce_0_direct3_staged", "allreduce_allpairs.lua", staged + 1, staged_top,
          "shot=2 chain=1 protocol=Simple via=put stage=1");
  }
  /* The FIFO AllReduce: all-pairs to 8 MiB (the two-shot on one channel
   * where two do not fit), the ring above; where no all-pairs fits, the
   * tree to 8 MiB, and past 256 ranks (the ring's program grows as the
   * square of the ranks, over the compiler's memory limit at 512) at
   * every size. */
  int two_ch = c->ranks > 2 && allpairs_fit(c, 2, 1) ? 2 : 1;
  if (two_ch == 1) two = "shot=2 inplace=0 chain=1 protocol=LL128", two_ip = "shot=2 chain=1 protocol=LL128";
  int ap = entry_allpairs(c, "allreduce_1_allpairs1_chain_oop", "allreduce_allpairs.lua", 0, 64 * K,
                          "shot=1 inplace=0 chain=1", 1, 1);
  entry_allpairs(c, "allreduce_1_allpairs1_chain", "allreduce_allpairs.lua", 0, 64 * K, "shot=1 chain=1", 1, 1);
  entry_allpairs(c, "allreduce_2_allpairs1_chain_oop_ll128", "allreduce_allpairs.lua", 64 * K + 1, one,
                 "shot=1 inplace=0 chain=1 protocol=LL128", 1, 1);
  entry_allpairs(c, "allreduce_2_allpairs1_chain_ll128", "allreduce_allpairs.lua", 64 * K + 1, one,
                 "shot=1 chain=1 protocol=LL128", 1, 1);
  entry_allpairs(c, "allreduce_3_allpairs2_chain_oop_ll128", "allreduce_allpairs.lua", one + 1, 8 * M, two, two_ch, 1);
  entry_allpairs(c, "allreduce_3_allpairs2_chain_ll128", "allreduce_allpairs.lua", one + 1, 8 * M, two_ip, two_ch, 1);
  int ring = c->ranks <= 256;
  if (!ap) entry(c, "allreduce_4_tree", "allreduce_tree.lua", 0, ring ? 8 * M : 0, "");
  if (ring) entry(c, "allreduce_4_ring", "allreduce_ring.lua", 8 * M + 1, 0, "instances=2 threads=256");
  /* Direct AllGather, ReduceScatter and AllToAll (measured on 2 x H200
   * under CUDA graphs, docs/PERFORMANCE.md): the LL ones put into the
   * peers' landings (every mode; the window bounds their size), the
   * Simple ones reach the ranks' own buffers (one process, or captured
   * with a process per GPU; elsewhere the FIFO programs below serve). */
  if (c->ranks > 1 && c->ranks <= 16) {
    /* On 2 ranks the Simple ones from 2 MiB (loaded first, they win
     * where they run): 13.2 against 15.8 us at 4 MiB, 10.2 against 9.4-10.0
     * at 2 MiB, each program alone (AllGather out of place on a copy). */
    const long long simple = c->ranks <= 2 ? 2 * M : 4 * M;
    entry(c, "allgather_0_direct_ll_oop", "allgather_allpairs.lua", 0, 4 * M, "via=direct protocol=LL inplace=0");
    entry(c, "allgather_0_direct_ll", "allgather_allpairs.lua", 0, 4 * M, "via=direct protocol=LL");
    entry(c, "allgather_0_direct", "allgather_allpairs.lua", simple + 1, 0, "via=direct protocol=Simple");
    /* Out of place its own block's copy inside the kernel, not a copy
     * before it ("buf" sorts before "ll": loaded first). */
    entry(c, "allgather_0_direct_buf_oop", "allgather_allpairs.lua", simple + 1, 0,
          "via=direct protocol=Simple inplace=0");
    entry(c, "reducescatter_0_direct_ll", "reducescatter_allpairs.lua", 0, 4 * M, "via=direct protocol=LL chain=1");
    /* In place without a copy of the input (the sum lands in the rank's
     * own block of it): the out-of-place one on a copy took 6.2-6.9 us at
     * 1-64 KiB on 2 x H200, NCCL 5.3-6.1.  On 2 ranks to 4 MiB, for the
     * calls that cannot reach their peers' buffers (eager with a process
     * per GPU below the buffers' exchange; the program on the buffers,
     * loaded first, wins elsewhere): the one on a copy ran 0.99-1.03 x
     * NCCL at 2-4 MiB there. */
    entry(c, "reducescatter_0_direct_ll_ip", "reducescatter_allpairs.lua", 0, c->ranks <= 2 ? 4 * M : M,
          "via=direct protocol=LL chain=1 inplace=1");
    entry(c, "reducescatter_0_direct", "reducescatter_allpairs.lua", simple + 1, 0, "via=direct protocol=Simple chain=1");
    /* In place on the ranks' own buffers: 1.04-1.76 x NCCL from 1 MiB on
     * 4 x H200, where the FIFO ring ran 0.81-0.85 x at 16-256 MiB. */
    entry(c, "reducescatter_0_direct_ip", "reducescatter_allpairs.lua", M + 1, 0,
          "via=direct protocol=Simple chain=1 inplace=1");
    /* LL to 4 MiB: above 1 MiB the program on buffers (loaded first) wins
     * where it can run; LL serves in-place calls and eager calls of a
     * process per GPU there. */
    entry(c, "alltoall_0_direct_ll", "alltoall_direct.lua", 0, 4 * M, "via=direct protocol=LL");
    /* On 2 ranks from 64 MiB, two chunks a block (each thread's local
     * copy and put of both in flight at once): 1-2 % faster there on 2 x
     * H200 (380.7 against 388.0 us at 256 MiB, at the link's rate both
     * ways), slower below (9.5 against 9.1 us at 2 MiB). */
    const long long a2a_c2 = c->ranks <= 2 ? 64 * M : 0;
    entry(c, "alltoall_0_direct", "alltoall_direct.lua", M + 1, a2a_c2, "via=direct protocol=Simple");
    if (a2a_c2) entry(c, "alltoall_0_direct_c2", "alltoall_direct.lua", a2a_c2 + 1, 0, "via=direct protocol=Simple chunks=2");
    /* In place: the peers put each block into the rank's scratch, which it
     * copies into place ("ip" sorts before "ll": loaded first, so it
     * serves in-place calls above 2 MiB where the window holds n - 1
     * blocks; above that the program on a copy of the input).  On 2 x
     * H200, each alone: 9.8 us at 2 MiB like LL's, 13.0 at 4 MiB (LL 16.9),
     * 20.0 at 8 MiB (30.8). */
    entry(c, "alltoall_0_direct_ip", "alltoall_direct.lua", 2 * M + 1, 0, "via=direct protocol=Simple inplace=1");
    /* Out of place the same way, for calls that reach only the windows
     * (eager with a process per GPU): the program above, with the rank's
     * own block copied; where the peers' outputs are reachable the puts
     * straight into them win ("direct_2r" sorts before "direct_land"). */
    entry(c, "alltoall_0_direct_land", "alltoall_direct.lua", 2 * M + 1, 0, "via=direct protocol=Simple land=1");
    /* In place where the peers' buffers are reachable (one process, or
     * registered windows): each pair trades its two blocks (xchg), no
     * scratch and no copy ("inplace_swap" sorts before "ip" and "ll":
     * loaded first).  On 2 x H200 in graphs, each alone: 12.1 us at 4
     * MiB, 106.3 at 64 MiB against the one through scratch's 13.0 and
     * 128.5.  Four chunks a block, so that each rank's xchg of two runs
     * as four segments (two of the peer's loads in flight a thread): 1 %
     * faster than two chunks.  To 8 ranks: on 16 a rank's 15 xchgs and
     * their signals are more operations than the executor holds. */
    if (c->ranks <= 8)
      entry(c, "alltoall_0_direct_inplace_swap", "alltoall_direct.lua", 2 * M + 1, 0,
            "via=direct protocol=Simple inplace=1 swap=1 chunks=4");
  }
  /* All-pairs, else the ring (AllGather, ReduceScatter) and Bruck's
   * AllToAll at every size. */
  ap = entry_allpairs(c, "allgather_1_allpairs_oop", "allgather_allpairs.lua", 0, M, "inplace=0", 1, 1);
  entry_allpairs(c, "allgather_1_allpairs", "allgather_allpairs.lua", 0, M, "", 1, 1);
  entry_allpairs(c, "allgather_2_allpairs_oop", "allgather_allpairs.lua", M + 1, 0, "inplace=0 protocol=Simple", 1, 1);
  entry(c, "allgather_3_ring", "allgather_ring.lua", ap ? M + 1 : 0, 0, "");
  ap = entry_allpairs(c, "reducescatter_1_allpairs_chain", "reducescatter_allpairs.lua", 0, 128 * K, "chain=1", 1, 1);
  entry_allpairs(c, "reducescatter_2_allpairs_chain_ll128", "reducescatter_allpairs.lua", 128 * K + 1, 4 * M,
                 "chain=1 protocol=LL128", 1, 1);
  /* On one rank the out-of-place ring writes no output (nothing to reduce):
   * the in-place ring below, with the input copied, serves every size. */
  if (c->ranks > 1)
    entry(c, "reducescatter_3_ring_oop", "reducescatter_ring.lua", ap ? 4 * M + 1 : 0, 0,
          ring ? "inplace=0 instances=2" : "inplace=0");
  entry(c, "reducescatter_4_ring", "reducescatter_ring.lua", 0, 0, "");
  ap = entry_allpairs(c, "alltoall_1_direct_ll", "alltoall_direct.lua", 0, 64 * K, "protocol=LL", 1, 1);
  entry_allpairs(c, "alltoall_2_direct_ll128", "alltoall_direct.lua", 64 * K + 1, 4 * M, "protocol=LL128", 1, 1);
  entry_allpairs(c, "alltoall_3_direct", "alltoall_direct.lua", 4 * M + 1, 0, "", 1, 1);
  /* In place where no direct program runs (eager calls with a process
   * per GPU past the window): each pair of ranks trades its blocks
   * through FIFOs, every receive after the send of what it overwrites,
   * instead of the program above on a copy of the input. */
  entry_allpairs(c, "alltoall_3_direct_swap", "alltoall_direct.lua", 4 * M + 1, 0, "inplace=1 swap=1", 1, 1);
  if (!ap) entry(c, "alltoall_4_bruck", "alltoall_bruck.lua", 0, 0, "");
  /* Rooted: the tree's log2(n) hops for small messages, the chain's one
   * pass over each link for large ones.  Not yet measured across GPUs: the
   * crossover is the design's, not a measurement's.  Every rank must pick
   * the same program whatever its buffers, so one layout serves both: in
   * place, as PyTorch calls them (an out-of-place call copies its input
   * into the output on the root first). */
  if (c->ranks > 1) {
    /* Direct Broadcast: the root's LL stores into every peer's landing
     * (windows only: every mode) to 256 KiB, to 1 MiB on 2 ranks (2 x
     * H200 under graphs: 4.8-5.4 us at 1-256 KiB against NCCL's 4.9-6.4,
     * 9.8 against 11.3 at 1 MiB, where the root's stores straight into
     * its peers' outputs take 7.0-7.8 us); on 2 ranks those stores to 4
     * MiB (18.9 against 24.5 us there; they need the ranks' own buffers:
     * one process, captured, or registered windows), and the chain's
     * pipelined stores from 4 MiB; the LL128 tree between, and where the
     * direct programs cannot run (4 x H200: none of them beat NCCL but at
     * 16-64 KiB). */
    if (c->ranks <= 16) {
      long long ll = c->ranks <= 2 ? M : 256 * K;
      entry(c, "broadcast_0_direct_ll", "broadcast_direct.lua", 0, ll, "inplace=1 via=direct protocol=LL");
      if (c->ranks <= 2) entry(c, "broadcast_0_direct", "broadcast_direct.lua", ll + 1, 4 * M, "inplace=1 via=direct");
      /* On 2 ranks, where the peer's buffer is out of reach (eager with a
       * process per GPU), the root's stores into the peer's scratch, which
       * it copies out, past the scratch on slices of it (2 x H200, eager:
       * 1.21 x NCCL at 4 MiB, 0.98-1.02 x at 16-32 MiB with 4 chunks, 0.88-0.94
       * x sliced at 64-512 MiB, where the LL128 tree and the FIFO chain ran
       * 0.72-0.96 x and 0.83-0.87 x).  Loaded after
       * the programs on the buffers ("direct_2r", "direct_chain"), which
       * win where they run. */
      if (c->ranks <= 2) {
        entry(c, "broadcast_0_direct_land", "broadcast_direct.lua", ll + 1, 8 * M, "inplace=1 via=direct land=1");
        entry(c, "broadcast_0_direct_land4", "broadcast_direct.lua", 8 * M + 1, 0,
              "inplace=1 via=direct land=1 chunks=4");
      }
      entry(c, "broadcast_0_direct_chain", "broadcast_chain.lua", 4 * M + 1, 0, "inplace=1 chunks=8 via=direct");
    }
    entry(c, "broadcast_1_tree", "broadcast_tree.lua", 0, 4 * M, "inplace=1 chunks=1 protocol=LL128");
    entry(c, "broadcast_2_chain", "broadcast_chain.lua", 4 * M + 1, 0, "inplace=1");
    entry(c, "reduce_1_tree", "reduce_tree.lua", 0, 256 * K, "inplace=1 chunks=1 protocol=LL128");
    entry(c, "reduce_2_chain", "reduce_chain.lua", 256 * K + 1, 0, "inplace=1");
    /* The root receives from (sends to) every other rank: a thread block
     * per peer, one way. */
    if (c->ranks <= CC_MAX_TBS) {   /* peers and a block for the root's own copy */
      entry(c, "gather_direct", "gather_direct.lua", 0, 0, "");
      entry(c, "scatter_direct", "scatter_direct.lua", 0, 0, "");
    } else {
      c->missing = "Gather and Scatter (the direct programs' root needs a thread block per peer)";
    }
  }
  ap = entry_allpairs(c, "gemv_allreduce_1_allpairs", "gemv_allreduce.lua", 0, M, "", 2, 2);
  if (ring) entry(c, "gemv_allreduce_2_ring", "gemv_allreduce.lua", ap ? M + 1 : 0, 0, "form=ring protocol=LL128");
  else c->fused_missing |= 2;
  /* The fused AllToAlls: all-pairs only. */
  int emb = entry_allpairs(c, "embedding_alltoall_sum", "embedding_alltoall.lua", 0, 0, "", 1, 2);
  entry_allpairs(c, "embedding_alltoall_mean", "embedding_alltoall.lua", 0, 0, "mode=mean", 1, 2);
  entry_allpairs(c, "embedding_alltoall_w", "embedding_alltoall.lua", 0, 0, "weighted=1", 1, 2);
  int moe = entry_allpairs(c, "moe_combine", "moe_combine.lua", 0, 0, "", 1, 2);
  if (!emb || !moe) c->fused_missing |= 1;
}

static int is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* The algorithm scripts: the installed ones (BIN/../share/baton/algorithms
 * beside this executable), else the source tree this baton was built from. */
static const char *find_algorithms(char *buf) {   /* buf: PATH_MAX bytes */
  char exe[SET_PATH];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      char rel[SET_PATH + 32];
      snprintf(rel, sizeof rel, "%s/../share/baton/algorithms", exe);
      if (is_dir(rel) && realpath(rel, buf)) return buf;
    }
  }
#ifdef BATON_SOURCE_ALGORITHMS
  if (is_dir(BATON_SOURCE_ALGORITHMS)) return BATON_SOURCE_ALGORITHMS;
#endif
  return NULL;
}

/* mkdir -p. */
static int make_dirs(const char *dir) {
  char p[SET_PATH];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0777) && errno != EEXIST) return -1;
    *s = '/';
  }
  return mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
}

int tool_set(int argc, char **argv) {
  if (tool_wants_help(argc, argv)) { fputs(set_help, stdout); return 0; }
  set_ctx c = {0};
  const char *ranks = NULL;
  char outbuf[64], algbuf[SET_PATH];
  enum { O_ALGS = 256, O_SYSTEM };
  const char *system = NULL;
  static const struct option longs[] = {
    {"algorithms", required_argument, NULL, O_ALGS}, {"system", required_argument, NULL, O_SYSTEM},
    {"quiet", no_argument, NULL, 'q'},
    {"verbose", no_argument, NULL, 'v'}, {NULL, 0, NULL, 0}};
  tool_getopt_reset();
  for (int o; (o = tool_getopt("set", argc, argv, "o:qv", longs)) != -1;) {
    if (o == 'o') c.out = optarg;
    else if (o == O_ALGS) c.algs = optarg;
    else if (o == O_SYSTEM) system = optarg;
    else if (o == 'q') c.quiet = 1;
    else if (o == 'v') c.verbose = 1;
    else return 2;
  }
  if (optind < argc) ranks = argv[optind];
  if (optind + 1 < argc) {
    fprintf(stderr, "baton set: unexpected '%s'\n%s", argv[optind + 1], set_help);
    return 2;
  }
  long long n;
  if (!ranks) { fputs(set_help, stderr); return 2; }
  if (!tool_int("set", "RANKS", ranks, 1, 4096, &n)) return 2;
  c.ranks = (int)n;
  if (!c.out) {
    snprintf(outbuf, sizeof outbuf, "baton-%d", c.ranks);
    c.out = outbuf;
  }
  if (!c.algs && !(c.algs = find_algorithms(algbuf))) {
    fprintf(stderr, "baton set: cannot find the algorithm scripts (no share/baton/algorithms beside this baton): "
                    "give --algorithms DIR\n");
    return 2;
  }
  if (!is_dir(c.algs)) { fprintf(stderr, "baton set: --algorithms %s is not a folder\n", c.algs); return 2; }
  sim_spec spec;
  if (system) {   /* read first: a bad description costs no compile */
    if (!tool_system("set", system, &spec)) return 2;
    if (c.ranks > spec.v[SIM_NODES] * spec.v[SIM_GPUS]) {
      fprintf(stderr, "baton set: %d ranks, but the system (%s) has %g nodes x %g GPUs\n", c.ranks, spec.name,
              spec.v[SIM_NODES], spec.v[SIM_GPUS]);
      return 2;
    }
  }
  if (make_dirs(c.out)) { fprintf(stderr, "baton set: cannot create %s: %s\n", c.out, strerror(errno)); return 1; }
  default_set(&c);
  if (system && !c.failed && tool_set_tune(c.out, &spec, c.quiet)) c.failed++;
  if (!c.quiet || c.failed)
    fprintf(stderr, "baton set: %d programs for %d ranks in %s%s\n", c.written, c.ranks, c.out,
            c.failed ? ", some failed (above)" : "");
  /* What no program of the set serves at this count, said always: a call
   * of it fails with "no loaded algorithm fits". */
  if (c.missing)
    fprintf(stderr, "baton set: no %s at %d ranks\n", c.missing, c.ranks);
  if (c.fused_missing & 1)
    fprintf(stderr, "baton set: no embedding bags + AllToAll or GEMM + AllToAll at %d ranks (all-pairs only, and "
                    "their thread blocks do not fit)\n", c.ranks);
  if (c.fused_missing & 2)
    fprintf(stderr, "baton set: no GEMV + AllReduce at %d ranks (its ring grows as the square of the ranks, over "
                    "the compiler's memory limit past 256)\n", c.ranks);
  return c.failed ? 1 : 0;
}
