/* rt_comm.c -- communicators: creation in both process modes, errors,
 * abort, destruction.  Their calls are rt_coll.c's. */
#include "rt_comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ip_dtype.h"
#include "ir_geom.h"
#include "rt_bootstrap.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"
#include "rt_regset.h"

_Static_assert((int)baton_timeout == (int)BT_ERR_TIMEOUT && (int)baton_aborted == (int)BT_ERR_ABORTED &&
               (int)baton_cuda_error == (int)BT_ERR_CUDA, "baton_result mirrors bt_result");
_Static_assert((int)baton_u8 == (int)IP_U8 && (int)baton_bf16 == (int)IP_BF16, "baton_dtype mirrors ip_dtype");
_Static_assert((int)baton_avg == (int)IP_OP_AVG, "baton_redop mirrors ip_redop");

const char *baton_result_string(baton_result r) { return bt_result_str((bt_result)r); }
const char *baton_version(void) { return BATON_VERSION; }

/* The host-mapped words of the ranks of one process: the abort flag and
 * nerr error records (one per rank). */
static bt_result shared_new(rt_hostref **out, int refs, int nerr) {
  rt_hostref *h = calloc(1, sizeof *h);
  if (!h) return BT_ERR_NOMEM;
  size_t bytes = sizeof(rt_shared) + (size_t)nerr * sizeof(ip_gerr);
  if (rt_cuda(cudaHostAlloc((void **)&h->host, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
              RT_SUB_RUNTIME, "allocating the abort flag")) {
    free(h);
    return BT_ERR_CUDA;
  }
  memset((void *)h->host, 0, bytes);
  h->host->nerr = nerr;
  if (rt_cuda(cudaHostGetDevicePointer((void **)&h->dev, (void *)h->host, 0),
              RT_SUB_RUNTIME, "mapping the abort flag")) {
    cudaFreeHost((void *)h->host);
    free(h);
    return BT_ERR_CUDA;
  }
  h->refs = refs;
  *out = h;
  return BT_OK;
}

static void shared_unref(rt_hostref *h) {   /* atomic: an aborted communicator is freed by a thread of its own */
  if (!h || __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
  cudaFreeHost((void *)h->host);
  free(h);
}

/* A communicator's own state: parameters and algorithms, no connections.
 * `share` ranks run on dev (those of this process, or with a process
 * per rank those of every process on the GPU, under MPS): each gets that
 * share of the GPU's resident blocks.  With several node groups
 * every program runs as Simple: the network carries Simple messages only
 * (a proxy learns of a message from its head word; LL and LL128 lines
 * carry their own flags and have none). */
static bt_result comm_new(baton_comm **out, int rank, int nranks, int dev, int share, int nodes) {
  baton_comm *c = calloc(1, sizeof *c);
  if (!c) return BT_ERR_NOMEM;
  c->rank = rank;
  c->nranks = nranks;
  c->dev = dev;
  c->share = share < 1 ? 1 : share;
  for (int i = 0; i < IR_COLL_COUNT; i++) {
    c->last_choice[i][0] = c->last_choice[i][1] = -2;
    c->choices[i][0].ai = c->choices[i][1].ai = RT_CHOICE_NONE;
  }
  c->last_choice_fused = -2;
  c->nslots = (int)rt_param_int(RT_PARAM_EXEC_SLOTS);
  if (c->nslots < 1) c->nslots = 1;
  /* Whole LL128 lines; across node groups, slots of their own size: a
   * message costs the proxies system calls and a wake-up each. */
  c->slot_bytes = rt_param_int(nodes > 1 ? RT_PARAM_NET_SLOT_BYTES : RT_PARAM_SLOT_BYTES) / 128 * 128;
  if (c->slot_bytes < 128) c->slot_bytes = 128;
  c->min_tile = rt_param_int(RT_PARAM_MIN_TILE) / 16 * 16;
  if (c->min_tile < 16) c->min_tile = 16;
  int64_t lt = rt_param_int(RT_PARAM_LANE_TILES);
  c->lane_tiles = lt < 1 ? 1 : lt > 64 ? 64 : (int)lt;
  const char *proto = rt_param_str(RT_PARAM_PROTO);
  c->force_simple = !strcasecmp(proto, "simple");
  if (*proto && !c->force_simple && rank == 0)
    LOG_WARN(RT_SUB_RUNTIME, "BATON_PROTO=%s: expected empty or Simple; running each program's own protocol", proto);
  c->nodes = nodes;
  if (nodes > 1) {
    c->force_simple = 1;
    if (rank == 0)
      LOG_INFO(RT_SUB_RUNTIME, "%d node groups (BATON_NODE_RANKS=%lld): connections between them use the network "
               "transport, and every program runs as Simple", nodes, (long long)rt_param_int(RT_PARAM_NODE_RANKS));
  }
  int64_t tmo = rt_param_int(RT_PARAM_TIMEOUT);
  c->timeout_ns = tmo > 0 ? (uint64_t)tmo * 1000000000ull : 0;
  bt_result res = rt_cuda(cudaSetDevice(dev), RT_SUB_RUNTIME, "cudaSetDevice");
  if (!res) res = ip_gpu_load();
  if (!res) res = ip_direct_load();
  if (!res) res = rt_algos_load(&c->algos, nranks);
  if (!res && !(c->plans = calloc(rt_algos_count(c->algos) + 1, sizeof *c->plans))) res = BT_ERR_NOMEM;
  if (!res && !(c->lanes = calloc(rt_algos_count(c->algos) + 1, sizeof *c->lanes))) res = BT_ERR_NOMEM;
  /* Lanes per algorithm: at most 128 CUDA blocks, and no more than the GPU
   * holds at the largest block the interpreter runs. */
  int holds = 0;
  if (!res) res = ip_gpu_max_blocks(IP_GPU_MAX_THREADS, IP_GPU_SMEM_STEPS * (int)sizeof(ip_gstep), 0, &holds);
  holds /= c->share;
  int64_t net_lanes = nodes > 1 && rt_param_int(RT_PARAM_LANES) == 0 ? rt_param_int(RT_PARAM_NET_LANES) : 0;
  for (int i = 0; !res && i < rt_algos_count(c->algos); i++) {
    c->lanes[i] = rt_plan_lanes(rt_algos_get(c->algos, i)->prog, holds < 128 ? holds : 128,
                                rt_comm_proto(c, rt_algos_get(c->algos, i)->prog));
    if (net_lanes > 0 && c->lanes[i] > net_lanes) c->lanes[i] = (int)net_lanes;
  }
  /* The direct grid: every direct kernel of the communicator launches it. */
  int dholds = 0;
  if (!res) res = ip_direct_max_blocks(IP_GPU_MAX_THREADS, &dholds);
  dholds /= c->share;
  c->grid = dholds < 1 ? 1 : dholds < 128 ? dholds : 128;
  if (!res && rt_param_int(RT_PARAM_DIRECT_PDL)) res = ip_direct_pdl_ok(&c->pdl);
  c->gemm_split = (int)rt_param_int(RT_PARAM_GEMM_SPLIT);
  c->gemm_narrow = rt_param_int(RT_PARAM_GEMM_NARROW) && ip_gpu_gemm_wgmma();   /* measured there only */
  /* The timeline holds the largest launch: an interpreter grid, or the
   * direct GEMV + AllReduce's (up to IP_FDIRECT_BLOCKS_PER_SM per SM). */
  int tblocks = holds;
  for (int u = 1; !res && *rt_param_str(RT_PARAM_TRACE) && u <= 8; u *= 2) {
    int g = 0;
    res = ip_fgemv_grid(u, c->share, &g);
    if (g > tblocks) tblocks = g;
  }
  if (!res) res = rt_trace_open(&c->trace, rank, nranks, tblocks);
  if (res) {
    rt_algos_free(c->algos);
    free(c->plans);
    free(c->lanes);
    free(c);
    return res;
  }
  if (rank == 0 && rt_algos_count(c->algos) == 0)
    LOG_INFO(RT_SUB_RUNTIME, "no algorithms loaded for %d ranks: set BATON_ALGO_FILES or BATON_ALGO_DIR", nranks);
  *out = c;
  return BT_OK;
}

/* Host memory for the network transport's FIFOs: pinned, mapped into
 * every GPU's address space (portable: all devices of the process). */
static void *pinned_alloc(size_t bytes, void **dev) {
  void *p = NULL;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  memset(p, 0, bytes);
  if (cudaHostGetDevicePointer(dev, p, 0) != cudaSuccess) {
    cudaGetLastError();
    cudaFreeHost(p);
    return NULL;
  }
  return p;
}
static void pinned_free(void *p) { cudaFreeHost(p); }
static const tp_hostmem pinned = {pinned_alloc, pinned_free};

/* The transports, in the order tried for each pair of ranks. */
static const tp_ops *const transports[] = {&tp_p2p_ops, &tp_net_ops};
enum { NTRANSPORTS = sizeof transports / sizeof *transports };

/* Sets up c's transports for keys: first of the two set-up passes. */
static bt_result comm_transports(baton_comm *c, int ipc, const tp_key *keys, int nkeys) {
  tp_ctx x = {c->rank, c->nranks, c->peers, c->nslots, c->slot_bytes, ipc, &pinned, &c->shared->host->abort};
  return tp_set_create(&c->tps, &x, transports, NTRANSPORTS, keys, nkeys);
}

/* With several node groups, each algorithm's network peers (rt_algo's
 * net_peers: the choice prefers fewer). */
static bt_result comm_net_peers(baton_comm *c) {
  if (c->nodes < 2) return BT_OK;
  int *node = malloc((size_t)c->nranks * sizeof *node);
  if (!node) return BT_ERR_NOMEM;
  for (int r = 0; r < c->nranks; r++) node[r] = c->peers[r].node;
  bt_result res = rt_algos_set_nodes(c->algos, node, c->nranks);
  free(node);
  return res;
}

/* The second pass, given every rank's record: connects, then builds the plans. */
static bt_result comm_connect(baton_comm *c, const unsigned char *records) {
  CHECK(tp_set_connect(c->tps, records));
  c->net = tp_set_uses(c->tps, tp_net_ops.name);
  if (c->net) {   /* what a captured call wakes the proxy with (rt_call.c): made here, never during a capture */
    CHECK(rt_cuda(cudaStreamCreateWithFlags(&c->kick_stream, cudaStreamNonBlocking), RT_SUB_RUNTIME,
                  "creating the proxy's wake-up stream"));
    CHECK(rt_cuda(cudaEventCreateWithFlags(&c->kick_fork, cudaEventDisableTiming), RT_SUB_RUNTIME, "cudaEventCreate"));
    CHECK(rt_cuda(cudaEventCreateWithFlags(&c->kick_join, cudaEventDisableTiming), RT_SUB_RUNTIME, "cudaEventCreate"));
  }
  return comm_net_peers(c);
}

/* Every rank's host, process and device, in node groups (BATON_NODE_RANKS). */
static int comm_groups(tp_peer *peers, int nranks) {
  return tp_peer_group(peers, nranks, rt_param_int(RT_PARAM_NODE_RANKS));
}

/* Every connection any loaded algorithm uses, sorted: the same on every rank. */
static bt_result comm_keys(baton_comm *c, tp_key **keys, int *n) {
  int cap = 0;
  *keys = NULL;
  *n = 0;
  for (int i = 0; i < rt_algos_count(c->algos); i++) {
    const ir_prog *p = rt_algos_get(c->algos, i)->prog;
    *n = rt_plan_keys(p, c->lanes[i], rt_comm_proto(c, p), keys, *n, &cap);
    if (*n < 0) { free(*keys); return BT_ERR_NOMEM; }
  }
  *n = tp_keys_normalize(*keys, *n);
  return BT_OK;
}

static bt_result comm_plans(baton_comm *c) {
  int nthreads = (int)rt_param_int(RT_PARAM_NTHREADS);
  if (nthreads < 32 || nthreads > IP_GPU_MAX_THREADS || nthreads % 32) {
    LOG_WARN(RT_SUB_RUNTIME, "BATON_NTHREADS=%d is not a multiple of 32 in 32..%d: using 512", nthreads,
             IP_GPU_MAX_THREADS);
    nthreads = 512;
  }
  for (int i = 0; i < rt_algos_count(c->algos); i++) {
    const ir_prog *p = rt_algos_get(c->algos, i)->prog;
    if (rt_algos_get(c->algos, i)->direct) continue;   /* rt_direct_plans */
    bt_result e = rt_plan_build(&c->plans[i], p, c->rank, c->tps, nthreads, c->lanes[i], rt_comm_proto(c, p), c->share);
    if (e == BT_ERR_UNSUPPORTED) continue;   /* said why; the plan stays empty: not runnable here */
    CHECK(e);
    int fit = 0, smem = c->plans[i].smem_steps * (int)sizeof(ip_gstep) + c->plans[i].stage_bytes;
    CHECK(ip_gpu_max_blocks(c->plans[i].nthreads, smem, c->plans[i].gemm, &fit));
    fit /= c->share;   /* the other ranks on this GPU run at the same time */
    int blocks = rt_plan_blocks(&c->plans[i]);
    if (blocks > fit) {
      LOG_WARN(RT_SUB_RUNTIME, "algorithm %s needs %d CUDA blocks (%d thread blocks x %d lanes) resident at once on "
               "rank %d, the GPU holds %d%s: not used (lower BATON_LANES?)", ir_prog_where(p), blocks,
               c->plans[i].ntbs, c->plans[i].lanes, c->rank, fit, c->share > 1 ? " for each rank it runs" : "");
      rt_plan_free(&c->plans[i]);
    }
  }
  return rt_direct_plans(c, nthreads);
}

int rt_comm_runnable(const baton_comm *c, int ai) {
  return rt_plan_blocks(&c->plans[ai]) > 0 || (c->dplans && c->dplans[ai].ok);
}

/* Drops on this rank every plan that some rank could not build (runnable[r *
 * n + i] is 0): ranks must choose alike, or a call would run baton's kernel
 * on some ranks only and wait forever for the others. */
static void plans_agree(baton_comm *c, const unsigned char *runnable, int nranks) {
  int n = rt_algos_count(c->algos);
  for (int i = 0; i < n; i++)
    for (int r = 0; r < nranks; r++)
      if (!runnable[(size_t)r * n + i]) {
        if (rt_comm_runnable(c, i)) {
          LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s is not used: rank %d cannot run it", c->rank,
                   ir_prog_where(rt_algos_get(c->algos, i)->prog), r);
          rt_plan_free(&c->plans[i]);
          if (c->dplans) c->dplans[i].ok = 0;
        }
        break;
      }
}

static void comm_free(baton_comm *c) {
  if (!c) return;
  cudaSetDevice(c->dev);
  rt_trace_close(c->trace);   /* first: the timeline names blocks by the plans' IR thread blocks */
  for (int i = 0; c->plans && i < rt_algos_count(c->algos); i++) rt_plan_free(&c->plans[i]);
  free(c->plans);
  free(c->lanes);
  tp_set_free(c->tps);   /* stops the network proxy before anything it reads goes */
  free(c->peers);
  if (c->scratch) cudaFree(c->scratch);
  if (c->gsplit_ws) cudaFree(c->gsplit_ws);
  if (c->gsplit_sem) cudaFree(c->gsplit_sem);
  if (c->dflags) cudaFree(c->dflags);
  if (c->kick_stream) cudaStreamDestroy(c->kick_stream);
  if (c->kick_fork) cudaEventDestroy(c->kick_fork);
  if (c->kick_join) cudaEventDestroy(c->kick_join);
  rt_direct_free(c);
  rt_regs_free(&c->regs);
  rt_algos_free(c->algos);
  shared_unref(c->shared);
  if (c->bs) rt_bootstrap_free(c->bs);
  free(c);
}

/* Direct fused AllToAlls (BATON_FUSED_DIRECT; ip_gargs.direct) for the
 * communicators of one init_all: every GPU of theirs must reach every
 * other's memory (peer access is enabled for every pair), and each gets
 * its zeroed end flags.  A pair without peer access leaves them all
 * without (the FIFO exchange then runs); only a CUDA failure fails. */
static bt_result direct_setup(baton_comm **comms, int n) {
  if (!rt_param_int(RT_PARAM_FUSED_DIRECT) || n > IP_DIRECT_MAX) return BT_OK;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int a = comms[i]->dev, b = comms[j]->dev, can = 0;
      if (a == b) continue;
      CHECK(rt_cuda(cudaDeviceCanAccessPeer(&can, a, b), RT_SUB_RUNTIME, "cudaDeviceCanAccessPeer"));
      if (!can) {
        LOG_INFO(RT_SUB_RUNTIME, "GPU %d cannot reach GPU %d: fused AllToAll calls exchange through FIFOs", a, b);
        return BT_OK;
      }
      CHECK(rt_cuda(cudaSetDevice(a), RT_SUB_RUNTIME, "cudaSetDevice"));
      cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else CHECK(rt_cuda(e, RT_SUB_RUNTIME, "cudaDeviceEnablePeerAccess"));
    }
  size_t bytes = IP_DIRECT_FLAG_WORDS((size_t)n) * sizeof(uint64_t);
  for (int i = 0; i < n; i++) {
    CHECK(rt_cuda(cudaSetDevice(comms[i]->dev), RT_SUB_RUNTIME, "cudaSetDevice"));
    CHECK(rt_cuda(cudaMalloc((void **)&comms[i]->dflags, bytes), RT_SUB_RUNTIME, "direct end flags"));
    CHECK(rt_cuda(cudaMemset(comms[i]->dflags, 0, bytes), RT_SUB_RUNTIME, "direct end flags"));
  }
  return BT_OK;
}

baton_result baton_comm_init_all(baton_comm **comms, int ndev, const int *devlist) {
  if (!comms || ndev < 1) return baton_invalid_argument;
  int cur = 0;
  cudaGetDevice(&cur);
  memset(comms, 0, ndev * sizeof *comms);
  size_t rec = tp_set_blob_bytes(NTRANSPORTS);
  unsigned char *records = calloc(ndev, rec);
  tp_peer *peers = calloc(ndev, sizeof *peers);
  tp_key *keys = NULL;
  int nkeys = 0, nodes = 1;
  rt_hostref *sh = NULL;
  bt_result res = records && peers ? BT_OK : BT_ERR_NOMEM;
  if (!res) res = shared_new(&sh, 0, ndev);
  if (!res) {
    for (int i = 0; i < ndev; i++) tp_peer_self(&peers[i], devlist ? devlist[i] : i);
    nodes = comm_groups(peers, ndev);
  }
  /* The most ranks on one GPU: every rank gets that share of its GPU's
   * blocks (gpu_share's rule), so that all size their grids and lanes
   * alike, however unevenly devlist spreads them (each reads its peers'
   * windows by its own layout). */
  int share = 1, crowded = 0;
  for (int i = 0; i < ndev; i++) {
    int on = 0;
    for (int j = 0; j < ndev; j++) on += (devlist ? devlist[j] : j) == (devlist ? devlist[i] : i);
    if (on > share) share = on, crowded = devlist ? devlist[i] : i;
  }
  if (share > 1)
    LOG_INFO(RT_SUB_RUNTIME, "ranks share GPUs (%d on GPU %d): each gets that share of its GPU's blocks; for "
             "testing: %s", share, crowded, nodes > 1 ? "their traffic between node groups goes over the network"
                                                      : "their traffic never leaves the GPU");
  for (int i = 0; i < ndev && !res; i++) {
    int dev = devlist ? devlist[i] : i;
    res = comm_new(&comms[i], i, ndev, dev, share, nodes);
    if (!res) {
      comms[i]->shared = sh;
      comms[i]->local = i;
      sh->refs++;
      if (!(comms[i]->peers = malloc(ndev * sizeof *peers))) res = BT_ERR_NOMEM;
      else memcpy(comms[i]->peers, peers, ndev * sizeof *peers);
    }
  }
  if (!res) res = comm_keys(comms[0], &keys, &nkeys);
  /* Two passes: every rank's FIFOs must exist before any rank connects. */
  for (int i = 0; i < ndev && !res; i++) {
    CHECK_GOTO(rt_cuda(cudaSetDevice(comms[i]->dev), RT_SUB_RUNTIME, "cudaSetDevice"), res, out);
    CHECK_GOTO(comm_transports(comms[i], 0, keys, nkeys), res, out);
    memcpy(records + (size_t)i * rec, tp_set_blob(comms[i]->tps), rec);
  }
  for (int i = 0; i < ndev && !res; i++) {
    CHECK_GOTO(rt_cuda(cudaSetDevice(comms[i]->dev), RT_SUB_RUNTIME, "cudaSetDevice"), res, out);
    CHECK_GOTO(comm_connect(comms[i], records), res, out);
    CHECK_GOTO(comm_plans(comms[i]), res, out);
  }
  if (!res && rt_direct_wanted(comms[0])) {   /* every rank's window, then each maps the others' */
    rt_window_handle *h = calloc((size_t)ndev, sizeof *h);
    if (!h) res = BT_ERR_NOMEM;
    for (int i = 0; i < ndev && !res; i++)
      if (!(res = rt_cuda(cudaSetDevice(comms[i]->dev), RT_SUB_RUNTIME, "cudaSetDevice")))
        res = rt_direct_window(comms[i], &h[i]);
    for (int i = 0; i < ndev && !res; i++)
      if (!(res = rt_cuda(cudaSetDevice(comms[i]->dev), RT_SUB_RUNTIME, "cudaSetDevice")))
        res = rt_direct_connect(comms[i], h);
    free(h);
  }
  if (!res) {
    int n = rt_algos_count(comms[0]->algos);
    unsigned char *runnable = calloc((size_t)ndev * n + 1, 1);
    if (!runnable) res = BT_ERR_NOMEM;
    for (int r = 0; r < ndev && !res; r++)
      for (int i = 0; i < n; i++) runnable[(size_t)r * n + i] = rt_comm_runnable(comms[r], i);
    for (int r = 0; r < ndev && !res; r++) {
      cudaSetDevice(comms[r]->dev);
      plans_agree(comms[r], runnable, ndev);
    }
    free(runnable);
  }
  if (!res) res = direct_setup(comms, ndev);
  for (int i = 0; i < ndev && !res; i++) {
    cudaSetDevice(comms[i]->dev);
    res = rt_cuda(cudaDeviceSynchronize(), RT_SUB_RUNTIME, "finishing communicator set-up");
  }
out:
  if (res) {
    int owned = sh && sh->refs > 0;
    for (int i = 0; i < ndev; i++) {
      comm_free(comms[i]);   /* the last one frees sh */
      comms[i] = NULL;
    }
    if (sh && !owned) shared_unref(sh);
  } else {
    LOG_INFO(RT_SUB_RUNTIME, "communicator of %d GPUs in one process: %d algorithms, %d connections", ndev,
             rt_algos_count(comms[0]->algos), nkeys);
  }
  free(records);
  free(peers);
  free(keys);
  cudaSetDevice(cur);
  return (baton_result)res;
}

_Static_assert(sizeof(baton_unique_id) == sizeof(rt_unique_id), "unique ids are 128 bytes");

baton_result baton_get_unique_id(baton_unique_id *id) {
  if (!id) return baton_invalid_argument;
  return (baton_result)rt_bootstrap_unique_id((rt_unique_id *)id);
}

/* A hash of device dev's UUID, the same in every process that sees the
 * GPU whatever its number there; 0 when CUDA cannot say. */
static uint64_t gpu_hash(int dev) {
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const uint64_t h = rt_hash_bytes(RT_HASH_START, prop.uuid.bytes, sizeof prop.uuid.bytes);
  return h ? h : 1;
}

/* The most ranks, of any processes, that run on one GPU of the
 * communicator: processes sharing a GPU (under MPS) divide its resident
 * blocks as the ranks of one process do, so that every rank's kernel can
 * run beside the others'.  The same on every rank (the grids and lanes it
 * sizes must agree), whichever GPU a rank is on. */
static int gpu_share(const tp_peer *peers, int nranks, int rank) {
  int most = 1;
  for (int q = 0; q < nranks; q++) {
    int on = 0;
    for (int r = 0; r < nranks && peers[q].gpu; r++) on += peers[r].gpu == peers[q].gpu && peers[r].host == peers[q].host;
    if (on > most) most = on;
  }
  if (most > 1 && rank == 0)
    LOG_INFO(RT_SUB_RUNTIME, "up to %d ranks of this communicator run on one GPU: each gets that share of its "
             "GPU's blocks", most);
  return most;
}

/* A fingerprint of the loaded algorithms, their connections and the
 * parameters every rank must set alike: every rank must load the same
 * set, or their pools would not match. */
static uint64_t fingerprint(const baton_comm *c, const tp_key *keys, int nkeys) {
  uint64_t h = RT_HASH_START;
  const unsigned char *b = (const unsigned char *)keys;
  for (size_t i = 0; i < nkeys * sizeof *keys; i++) h = rt_hash(h, b[i]);
  for (int i = 0; i < rt_algos_count(c->algos); i++) {
    const ir_prog *p = rt_algos_get(c->algos, i)->prog;
    h = rt_hash(h, (uint64_t)ir_prog_nsteps(p));
    h = rt_hash(h, (uint64_t)p->coll);
  }
  h = rt_hash(h, (uint64_t)c->slot_bytes);
  h = rt_hash(h, (uint64_t)c->nslots);
  h = rt_hash(h, (uint64_t)c->min_tile);     /* the tile: every rank must cut alike */
  h = rt_hash(h, (uint64_t)c->lane_tiles);
  h = rt_hash(h, (uint64_t)c->force_simple);
  h = rt_hash(h, (uint64_t)rt_param_int(RT_PARAM_NODE_RANKS));   /* the groups: every rank alike */
  h = rt_hash(h, (uint64_t)rt_param_int(RT_PARAM_WINDOW_MB));    /* windows laid out alike */
  h = rt_hash(h, (uint64_t)c->grid);                              /* the direct grid: lanes alike */
  h = rt_hash(h, (uint64_t)rt_param_int(RT_PARAM_DIRECT_LANE_BYTES));
  h = rt_hash(h, (uint64_t)rt_param_int(RT_PARAM_FUSED_DIRECT));   /* the set-up's exchanges alike */
  h = rt_hash(h, (uint64_t)rt_param_int(RT_PARAM_EAGER_EXCHANGE_MB));   /* eager calls exchange alike */
  h = rt_hash(h, (uint64_t)(rt_param_int(RT_PARAM_PEER_MAPS) > 0));
  for (const char *u = rt_param_str(RT_PARAM_FGEMV_UNROLL); *u; u++)   /* the GEMV + AllReduce kernel's forms alike */
    h = rt_hash(h, (uint64_t)(unsigned char)*u);
  return h;
}

baton_result baton_comm_init_rank(baton_comm **out, int nranks, baton_unique_id id, int rank) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return baton_invalid_argument;
  *out = NULL;
  int dev = 0;
  if (rt_cuda(cudaGetDevice(&dev), RT_SUB_RUNTIME, "cudaGetDevice")) return baton_cuda_error;
  baton_comm *c = NULL;
  struct rt_bootstrap *bs = NULL;
  tp_key *keys = NULL;
  int nkeys = 0;
  size_t rec = tp_set_blob_bytes(NTRANSPORTS);
  uint64_t *fp = calloc(nranks, sizeof *fp);
  unsigned char *records = calloc(nranks, rec);
  tp_peer *peers = calloc(nranks, sizeof *peers);
  bt_result res = fp && records && peers ? BT_OK : BT_ERR_NOMEM;
  CHECK_GOTO(res, res, out);
  /* Where every rank runs first: the node groups decide the protocol. */
  CHECK_GOTO(rt_bootstrap_init(&bs, (const rt_unique_id *)&id, rank, nranks), res, out);
  tp_peer_self(&peers[rank], dev);
  peers[rank].gpu = gpu_hash(dev);
  CHECK_GOTO(rt_bootstrap_allgather(bs, peers, sizeof *peers), res, out);
  int nodes = comm_groups(peers, nranks);
  res = comm_new(&c, rank, nranks, dev, gpu_share(peers, nranks, rank), nodes);
  if (!res) {
    c->bs = bs;
    bs = NULL;
    c->peers = peers;
    peers = NULL;
    res = shared_new(&c->shared, 1, 1);
  }
  CHECK_GOTO(res, res, out);
  CHECK_GOTO(comm_keys(c, &keys, &nkeys), res, out);
  fp[rank] = fingerprint(c, keys, nkeys);
  CHECK_GOTO(rt_bootstrap_allgather(c->bs, fp, sizeof *fp), res, out);
  for (int r = 0; r < nranks; r++)
    if (fp[r] != fp[rank]) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d loaded other algorithms than rank %d (%d here): every rank must see the "
               "same BATON_ALGO_FILES / BATON_ALGO_DIR / MSCCL_XML_FILES and the same BATON_LANES, BATON_SLOT_BYTES, "
               "BATON_NET_SLOT_BYTES, BATON_EXEC_SLOTS, BATON_PROTO, BATON_NODE_RANKS, BATON_WINDOW_MB, BATON_DIRECT_LANE_BYTES, "
               "BATON_FUSED_DIRECT, BATON_FGEMV_UNROLL, BATON_EAGER_EXCHANGE_MB and BATON_PEER_MAPS (0 or not), on GPUs alike", r, rank,
               rt_algos_count(c->algos));
      res = BT_ERR_INVALID;
      goto out;
    }
  CHECK_GOTO(comm_transports(c, 1, keys, nkeys), res, out);
  memcpy(records + (size_t)rank * rec, tp_set_blob(c->tps), rec);
  CHECK_GOTO(rt_bootstrap_allgather(c->bs, records, rec), res, out);
  CHECK_GOTO(comm_connect(c, records), res, out);
  CHECK_GOTO(comm_plans(c), res, out);
  if (rt_direct_wanted(c)) {   /* the windows, exchanged over the bootstrap */
    rt_window_handle *h = calloc((size_t)nranks, sizeof *h);
    if (!h) { res = BT_ERR_NOMEM; goto out; }
    res = rt_direct_window(c, &h[rank]);
    if (!res) res = rt_bootstrap_allgather(c->bs, h, sizeof *h);
    if (!res) res = rt_direct_connect(c, h);
    free(h);
    CHECK_GOTO(res, res, out);
  }
  {
    int n = rt_algos_count(c->algos);
    unsigned char *runnable = calloc((size_t)nranks * n + 1, 1);
    if (!runnable) { res = BT_ERR_NOMEM; goto out; }
    for (int i = 0; i < n; i++) runnable[(size_t)rank * n + i] = rt_comm_runnable(c, i);
    res = n ? rt_bootstrap_allgather(c->bs, runnable, (size_t)n) : BT_OK;
    if (!res) plans_agree(c, runnable, nranks);
    free(runnable);
    CHECK_GOTO(res, res, out);
  }
  CHECK_GOTO(rt_cuda(cudaDeviceSynchronize(), RT_SUB_RUNTIME, "finishing communicator set-up"), res, out);
  /* Nobody runs a kernel before every pool is mapped everywhere. */
  CHECK_GOTO(rt_bootstrap_barrier(c->bs), res, out);
  if (rank == 0)
    LOG_INFO(RT_SUB_RUNTIME, "communicator of %d ranks, one process each: %d algorithms, %d connections", nranks,
             rt_algos_count(c->algos), nkeys);
  *out = c;
out:
  if (res && c) comm_free(c);
  if (bs) rt_bootstrap_free(bs);
  free(fp);
  free(records);
  free(peers);
  free(keys);
  return (baton_result)res;
}

baton_result rt_comm_poll_error(baton_comm *c) {
  if (c->error) return c->error;
  if (c->net && tp_set_error(c->tps)) {   /* a peer went away (logged by the transport) */
    c->error = baton_remote_error;
    return c->error;
  }
  rt_shared *s = c->shared->host;
  /* A wait inside the GEMM tile engine on this rank's GPU that gave up
   * stopped its kernel with a trap, and lost the GPU's CUDA context with
   * it.  (Other ranks' kernels that wait for this one give up as below;
   * each rank reports its own engine.) */
  const volatile ip_gemm_stall *g = &s->err[c->local].gemm;
  if (g->flag) {
    __sync_synchronize();
    static const char *what[] = {"?", "a stage's loads", "a free stage", "the consumers' outputs",
                                 "a free staging buffer", "the other k-ranges' partial sums"};
    const int w = g->what >= IP_GEMM_WAIT_FULL && g->what <= IP_GEMM_WAIT_SPLIT ? g->what : 0;
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: the GEMM tile engine's block %d (thread %d) waited %.1f s for %s at the tile "
             "of rows %lld, columns %lld (the last call: %s): kernel stopped (a defect in baton or a GPU fault, not "
             "in the call's arguments; BATON_TIMEOUT); this process's CUDA context is unusable from here", c->rank,
             g->block, g->thread, (double)g->waited_ns * 1e-9, what[w], (long long)g->m0, (long long)g->n0,
             c->last ? c->last : "the gemm program");
    c->error = baton_internal_error;
    return c->error;
  }
  /* The cause: of the ranks whose GPU gave up waiting, the earliest.  The
   * flags are read first (every call does), the records only after a
   * fence, once a flag is seen. */
  int any = 0;
  for (int i = 0; i < s->nerr && !any; i++) any = ((const volatile ip_gerr *)&s->err[i])->flag;
  const ip_gerr *e = NULL;
  if (any) {
    __sync_synchronize();
    for (int i = 0; i < s->nerr; i++) {
      const volatile ip_gerr *x = &s->err[i];
      if (x->flag && (!e || x->when < e->when)) e = (const ip_gerr *)x;
    }
  }
  if (e && e->what == IP_BAD_COUNT) {   /* a bad token count: clamped, nothing aborted */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: counts[%lld] is %lld, outside [0, the rows of block %lld]: taken as the "
             "nearest bound; the call's result is wrong", e->rank, c->last ? c->last : "the gemm program",
             (long long)e->tile, (long long)e->value, (long long)e->tile);
    c->error = baton_invalid_argument;
  } else if (e && e->what >= IP_BAD_INDEX) {   /* bad operand data: reported, skipped, nothing aborted */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d tb %d step %d: operand %d of %s: element %lld is %lld, %s: the call's result is "
             "wrong", e->rank, e->tb, e->step, e->peer, c->last ? c->last : "the fused program", (long long)e->tile,
             (long long)e->value, e->what == IP_BAD_INDEX ? "outside the table's rows" :
             "outside [the bag's first offset, the indices' length]");
    c->error = baton_invalid_argument;
  } else if (e && e->what == IP_WAIT_BUFS) {
    char at[32] = " at its start";   /* a fused call checks before its first store */
    if (e->step >= 0) snprintf(at, sizeof at, " step %d", e->step);
    LOG_WARN(RT_SUB_RUNTIME, "rank %d tb %d%s: rank %d's call is not this one on the same registered windows "
             "(every rank passes buffers at the same offsets of the same windows, with the same count, type and "
             "operator, or none passes windows): call stopped before it touched rank %d's buffers", e->rank, e->tb,
             at, e->peer, e->peer);
    c->error = baton_invalid_argument;
  } else if (e && e->what == IP_WAIT_START) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: waited %llu s for rank %d to begin %s (a call ends only once every rank has "
             "begun it): call aborted (rank %d's view; BATON_TIMEOUT)", e->rank,
             (unsigned long long)(c->timeout_ns / 1000000000ull), e->peer, c->last ? c->last : "the call", c->rank);
    c->error = baton_timeout;
  } else if (e) {
    static const char *what[] = {"?", "another thread block to signal", "a message", "a free FIFO slot", "abort",
                                 "a compute thread block's tiles"};
    int w = e->what >= 0 && e->what <= IP_WAIT_SEM ? e->what : 0;
    char peer[64] = "";
    if (e->what == IP_WAIT_RECV) snprintf(peer, sizeof peer, " from rank %d on channel %d", e->peer, e->chan);
    if (e->what == IP_WAIT_SEND) snprintf(peer, sizeof peer, " to rank %d on channel %d", e->peer, e->chan);
    if (e->what == IP_WAIT_DEP || e->what == IP_WAIT_SEM) snprintf(peer, sizeof peer, " (tb %d)", e->depid);
    LOG_WARN(RT_SUB_RUNTIME, "rank %d tb %d step %d tile %lld: waited %llu s for %s%s: call aborted (rank %d's "
             "view; BATON_TIMEOUT)", e->rank, e->tb, e->step, (long long)e->tile,
             (unsigned long long)(c->timeout_ns / 1000000000ull), what[w], peer, c->rank);
    c->error = baton_timeout;
  } else if (s->abort) {
    c->error = baton_aborted;
  }
  return c->error;
}

baton_result baton_comm_get_async_error(baton_comm *c, baton_result *err) {
  if (!c || !err) return baton_invalid_argument;
  *err = rt_comm_poll_error(c);
  return baton_success;
}

baton_result baton_comm_abort(baton_comm *c) {
  if (!c) return baton_invalid_argument;
  c->shared->host->abort = 1;
  c->aborted = 1;
  __sync_synchronize();
  if (c->bs) rt_bootstrap_abort(c->bs);
  if (!c->error) c->error = baton_aborted;
  return baton_success;
}

/* Aborted communicators being freed by threads of their own. */
static pthread_mutex_t releasing_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t releasing_cv = PTHREAD_COND_INITIALIZER;
static int releasing;

/* Frees c once its GPU has finished the work launched before. */
static void release(baton_comm *c) {
  cudaSetDevice(c->dev);
  cudaDeviceSynchronize();
  comm_free(c);
}

/* pthread start routine of an aborted communicator's destruction. */
static void *release_thread(void *arg) {
  release(arg);
  pthread_mutex_lock(&releasing_mu);
  releasing--;
  pthread_cond_broadcast(&releasing_cv);
  pthread_mutex_unlock(&releasing_mu);
  return NULL;
}

/* At exit (or the library's unloading): waits up to
 * RT_RELEASE_EXIT_WAIT_S for the aborted communicators still being freed,
 * so that the CUDA runtime is not torn down under them; past that (work
 * on the GPU that never ends), exits anyway. */
#define RT_RELEASE_EXIT_WAIT_S 10
__attribute__((destructor)) static void release_wait(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += RT_RELEASE_EXIT_WAIT_S;
  pthread_mutex_lock(&releasing_mu);
  while (releasing > 0 && pthread_cond_timedwait(&releasing_cv, &releasing_mu, &until) == 0) {
  }
  pthread_mutex_unlock(&releasing_mu);
}

/* A communicator the caller aborted (baton_comm_abort) is freed from a
 * thread of its own, so that the caller never waits on the GPU: its own
 * kernels end at the abort, but another communicator's may be held by a
 * dead peer until that one is aborted in turn, and the GPU's work
 * (cudaDeviceSynchronize, and the cudaFree that synchronizes too) would
 * wait for it (NCCL's ncclCommAbort does not wait on the GPU either:
 * PyTorch aborts its communicators one after another).  Where no thread
 * can be made, here.  A communicator that failed without an abort is
 * freed here, its timeline (BATON_TRACE) written before this returns. */
baton_result baton_comm_destroy(baton_comm *c) {
  if (!c) return baton_invalid_argument;
  if (c->aborted) {
    pthread_attr_t at;
    pthread_t t;
    pthread_mutex_lock(&releasing_mu);
    int made = !pthread_attr_init(&at);
    made = made && !pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) &&
           !pthread_create(&t, &at, release_thread, c);
    pthread_attr_destroy(&at);
    releasing += made;
    pthread_mutex_unlock(&releasing_mu);
    if (made) return baton_success;
  }
  release(c);
  return baton_success;
}

baton_result baton_comm_net_bytes(const baton_comm *c, uint64_t *sent, uint64_t *received) {
  if (!c || !sent || !received) return baton_invalid_argument;
  tp_set_stats(c->tps, sent, received);
  return baton_success;
}

baton_result baton_comm_count(const baton_comm *c, int *n) {
  if (!c || !n) return baton_invalid_argument;
  *n = c->nranks;
  return baton_success;
}
baton_result baton_comm_user_rank(const baton_comm *c, int *r) {
  if (!c || !r) return baton_invalid_argument;
  *r = c->rank;
  return baton_success;
}
baton_result baton_comm_cu_device(const baton_comm *c, int *d) {
  if (!c || !d) return baton_invalid_argument;
  *d = c->dev;
  return baton_success;
}
int baton_comm_algorithm_count(const baton_comm *c) { return c ? rt_algos_listed(c->algos) : 0; }
const char *baton_comm_algorithm_name(const baton_comm *c, int i) {
  int j = c ? rt_algos_listed_index(c->algos, i) : -1;
  if (j < 0) return NULL;
  const ir_prog *p = rt_algos_get(c->algos, j)->prog;
  return p->name ? p->name : ir_prog_where(p);
}
const char *baton_comm_last_algorithm(const baton_comm *c) { return c ? c->last : NULL; }
