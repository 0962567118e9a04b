/* rt_fdirect.c -- direct fused calls: GEMV + AllReduce by the one-shot
 * kernel over the communicator's window (ip_fdirect.h, docs/FUSED.md). */
#include <string.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "rt_comm.h"
#include "rt_cudart.h"
#include "rt_log.h"
#include "rt_param.h"

/* The name calls report (baton_comm_last_algorithm, the bench's column). */
static const char fgemv_name[] = "gemv_allreduce_oneshot_direct";

/* The blocks form f (0: unroll 1 or 2; 1: unroll 4 or 8) launches, found at
 * its first use. */
static bt_result grid_of(baton_comm *c, int f, int unroll, int *grid) {
  if (!c->fgrid[f]) CHECK(ip_fgemv_grid(unroll, c->share, &c->fgrid[f]));
  *grid = c->fgrid[f];
  return BT_OK;
}

/* Loads in flight per thread and row for M rows: BATON_FGEMV_UNROLL (1,
 * 2, 4 or 8: rt_param checked it), else 8 up to IP_FDIRECT_UNROLL8_ROWS
 * rows (few row groups: each warp of the one-block-per-SM grid has at
 * most one, all its loads in flight at once), 2 beyond (four blocks per
 * SM, one warp's shuffles under another's loads).  The same on every
 * rank, whatever its GPU: every rank must run the same form. */
static int unroll_of(int64_t M) {
  const char *u = rt_param_str(RT_PARAM_FGEMV_UNROLL);
  if (u && *u) return u[0] - '0';
  return M <= IP_FDIRECT_UNROLL8_ROWS ? 8 : 2;
}

bt_result rt_fgemv_prep(baton_comm *c, const void *W, const void *x, void *y, size_t M, size_t K, int dtype,
                        cudaStream_t stream, rt_launch *L) {
  if (!rt_param_int(RT_PARAM_FUSED_DIRECT) || !c->win || c->nranks > IP_WIN_MAX_RANKS || !ip_fgemv_takes(dtype) ||
      M > (size_t)IP_MAX_DIM || K > (size_t)IP_MAX_DIM)
    return BT_ERR_UNSUPPORTED;
  const rt_window_layout *l = rt_window_layout_of(c->win);
  const int es = ip_dtype_size[dtype];
  if (ip_fgemv_half_bytes((int64_t)M, c->nranks, es) > (int64_t)l->fused_half) {
    LOG_INFO(RT_SUB_RUNTIME, "rank %d: GEMV + AllReduce of %zu rows needs %lld bytes of fused landing, the window has "
             "%zu (BATON_WINDOW_MB): a fused program runs it", c->rank, M,
             (long long)ip_fgemv_half_bytes((int64_t)M, c->nranks, es), l->fused_half);
    return BT_ERR_UNSUPPORTED;
  }
  /* Ranks sharing a GPU: each kernel waits for the others', which only a
   * group launches together (as rt_comm_call_submit says). */
  if (!c->bs && c->share > 1 && !rt_group_open()) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d shares GPU %d with %d other ranks: make its calls inside baton_group_start/end",
             c->rank, c->dev, c->share - 1);
    return BT_ERR_INVALID;
  }
  CHECK(rt_cuda(cudaSetDevice(c->dev), RT_SUB_RUNTIME, "cudaSetDevice"));
  const int unroll = unroll_of((int64_t)M), form = unroll >= 4;
  int grid;
  CHECK(grid_of(c, form, unroll, &grid));
  memset(L, 0, sizeof *L);
  L->c = c;
  L->stream = stream;
  L->recvbuf = y;
  L->where = fgemv_name;
  L->fdirect = 1;
  L->fgrid = grid;
  L->funroll = unroll;
  ip_fargs *a = &L->f;
  char *mine = rt_window_base(c->win, c->rank);
  for (int r = 0; r < c->nranks; r++) a->land[r] = rt_window_base(c->win, r) + l->fused + 2 * form * l->fused_half;
  a->seq = (uint64_t *)(mine + l->fseq) + form * IP_FDIRECT_MAX_GRID;
  a->claim = (uint64_t *)(mine + l->fseq) + IP_FDIRECT_FORMS * IP_FDIRECT_MAX_GRID;   /* after every form's counts */
  a->half = (int64_t)l->fused_half;
  a->W = W;
  a->x = x;
  a->y = y;
  a->M = (int64_t)M;
  a->K = (int64_t)K;
  a->ld = (int64_t)K;
  a->rank = c->rank;
  a->nranks = c->nranks;
  a->dtype = dtype;
  a->poll_ns = (int32_t)rt_param_int(RT_PARAM_DIRECT_POLL_NS);
  a->abort = &c->shared->dev->abort;
  a->err = &c->shared->dev->err[c->local];
  a->timeout_ns = c->timeout_ns;
  if (c->last != fgemv_name)
    LOG_INFO(RT_SUB_RUNTIME, "rank %d: GEMV + AllReduce of %zu x %zu %s: the direct one-shot kernel, %d blocks of %d warps, "
             "%zu row groups of %d rows, unroll %d", c->rank, M, K, ip_dtype_name[dtype], L->fgrid,
             IP_FDIRECT_THREADS / 32, (M + IP_FDIRECT_ROW_GROUP - 1) / IP_FDIRECT_ROW_GROUP, IP_FDIRECT_ROW_GROUP, unroll);
  c->last = fgemv_name;
  return BT_OK;
}

/* A programmatic launch (BATON_DIRECT_PDL), as the direct collectives':
 * its blocks start as the kernel before leaves the SMs, and wait for it
 * before reading anything.  It lets the next kernel in at its start only
 * where a rank has its GPU to itself. */
bt_result rt_fgemv_launch(const rt_launch *L) {
  baton_comm *c = L->c;
  ip_fargs a = L->f;
  const int pdl = c->pdl;
  a.release_early = pdl && c->share == 1;
  if (pdl && c->bs) rt_capture_programmatic(L->stream);
  if (c->trace) {   /* the working blocks' timeline */
    a.trace = rt_trace_buf(c->trace, L->fgrid);
    if (a.trace) {
      rt_trace_called(c->trace, L->where, NULL, L->fgrid, 1, L->fgrid, 0, IP_FDIRECT_THREADS, NULL, 1);
      rt_trace_steps(c->trace, ip_fgemv_step_names, IP_FSTEP_COUNT);
    }
  }
  return ip_fgemv_launch(&a, L->fgrid, L->funroll, pdl, L->stream);
}
