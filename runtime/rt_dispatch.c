/* rt_dispatch.c -- a call from its choice to its launch, whatever kind of
 * program runs it: which program (rt_comm_choose*), preparing it (a FIFO
 * program by rt_call.c, a direct one by rt_dcall.c, chosen again without
 * its peers' buffers where it cannot have them) and launching it, now or
 * at its group's end (rt_group.c records it; rt_coll.c ends the group). */
#include "rt_comm.h"

#include "ip_dtype.h"
#include "ir_geom.h"
#include "ir_wire.h"
#include "rt_log.h"

/* What rt_algos_select_by asks of each candidate: the call's facts
 * (inplace: 1, 0 or RT_PLACE_EITHER, both). */
typedef struct usable_ctx { baton_comm *c; int64_t count; int dtype, inplace, peer_io; } usable_ctx;
static int usable(void *x, int i) {
  usable_ctx *u = x;
  if (!rt_algos_get(u->c->algos, i)->direct) return rt_plan_blocks(&u->c->plans[i]) > 0;
  if (u->inplace == RT_PLACE_EITHER)
    return rt_direct_usable(u->c, i, u->count, u->dtype, 1, u->peer_io) &&
           rt_direct_usable(u->c, i, u->count, u->dtype, 0, u->peer_io);
  return rt_direct_usable(u->c, i, u->count, u->dtype, u->inplace, u->peer_io);
}

/* Whether algorithm ai reaches its peers' buffers (a direct program whose
 * plan needs them): its calls meet at a group's end (one process) or in
 * the exchange of their buffers (a process per GPU). */
static int reaches_peers(const baton_comm *c, int ai) { return c->dplans && c->dplans[ai].ok && c->dplans[ai].peer_io; }

/* Whether ranks of one call may run algorithms i and j, one each (NCCL
 * lets each rank of a call choose its placement, and the best program in
 * place is not always the best out of place):
 *  - the same program;
 *  - two that reach their peers' buffers: their calls meet at the group's
 *    end or in the exchange, where every rank finds the programs differ
 *    and all run again without their peers' buffers (rt_call_again);
 *  - two that exchange the same between ranks (ir_wire_same) with the
 *    same lanes (each lane has connections of its own).
 * With a process per GPU, a program that reaches its peers' buffers and
 * one that does not never mix: one rank would wait in the exchange for a
 * peer that never comes.  In one process they do: the group's end runs
 * the first again without its peers' buffers, and it then chooses among
 * the programs the second was chosen from, by this rule. */
static int mixes(const baton_comm *c, int i, int j) {
  if (i == j) return 1;
  const int pi = reaches_peers(c, i), pj = reaches_peers(c, j);
  if (pi || pj) return (pi && pj) || !c->bs;
  return c->lanes[i] == c->lanes[j] &&
         ir_wire_same(rt_algos_get(c->algos, i)->prog, rt_algos_get(c->algos, j)->prog);
}

/* Whether a call on s and r reaches its peers' buffers (rt_direct_usable's
 * peer_io): captured, or on registered windows, or large enough to
 * exchange them for itself, or not (as rt_direct_prep decides). */
static int peer_io_of(const baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype,
                      cudaStream_t stream) {
  if (rt_direct_peer_io(c, stream)) return RT_PEERS_KNOWN;
  if (rt_direct_registered(c, coll, s, r, count, dtype)) return RT_PEERS_REGISTERED;
  return rt_direct_eager_exchange(c, coll, count, dtype) ? RT_PEERS_KNOWN : RT_PEERS_NONE;
}

/* Whether choice ai is new for the slot that keeps the last one (then
 * kept): each new choice is logged once. */
static int new_choice(int *last, int ai) {
  if (ai == *last) return 0;
  *last = ai;
  return 1;
}

int rt_comm_choose(baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype,
                   cudaStream_t stream) {
  if (!c) return -1;
  return rt_comm_choose_io(c, coll, s, r, count, dtype, peer_io_of(c, coll, s, r, count, dtype, stream));
}

int rt_comm_choose_io(baton_comm *c, ir_coll coll, const void *s, const void *r, size_t count, int dtype, int peer_io) {
  if (!c || dtype < 0 || dtype >= IP_DTYPE_COUNT) return -1;
  int es = ip_dtype_size[dtype];
  /* In place as NCCL lays it out: allgather's input is block `rank` of the
   * output, reducescatter's output is block `rank` of the input. */
  int64_t in_at = coll == IR_COLL_ALLGATHER ? (int64_t)c->rank * count : 0;
  int64_t out_at = coll == IR_COLL_REDUCESCATTER ? (int64_t)c->rank * count : 0;
  int inplace = (const char *)s - in_at * es == (const char *)r - out_at * es;
  uint64_t bytes = rt_call_bytes(c, coll, count, dtype);
  rt_choice *memo = &c->choices[coll][inplace];
  if (memo->ai != RT_CHOICE_NONE && memo->bytes == bytes && memo->count == (int64_t)count && memo->dtype == dtype &&
      memo->peer_io == peer_io)
    return memo->ai;
  /* This rank's choice, then the one its peers would make in the other
   * placement; where the two cannot run side by side in one call, the
   * program every rank would choose whatever its placement. */
  usable_ctx u = {c, (int64_t)count, dtype, inplace, peer_io};
  int ai = rt_algos_select_by(c->algos, coll, inplace, bytes, (int64_t)count, usable, &u, 0), place = inplace;
  u.inplace = !inplace;
  const int other = ai >= 0 ? rt_algos_select_by(c->algos, coll, !inplace, bytes, (int64_t)count, usable, &u, 0) : -1;
  if (other >= 0 && !mixes(c, ai, other)) {
    u.inplace = place = RT_PLACE_EITHER;
    ai = rt_algos_select_by(c->algos, coll, place, bytes, (int64_t)count, usable, &u, 0);
  }
  *memo = (rt_choice){bytes, (int64_t)count, dtype, peer_io, ai};
  if (new_choice(&c->last_choice[coll][inplace], ai)) {
    u.inplace = place;
    rt_algos_select_by(c->algos, coll, place, bytes, (int64_t)count, usable, &u, 1);
  }
  return ai;
}

int rt_comm_choose_rooted(baton_comm *c, ir_coll coll, int root, const void *s, const void *r, size_t count,
                          int dtype, cudaStream_t stream) {
  if (!c || root < 0 || root >= c->nranks) return -1;
  rt_rooted_bufs(coll, c->rank, root, &s, (void **)&r);   /* off the root the one buffer is both */
  return rt_comm_choose_rooted_io(c, coll, root, s, r, count, dtype, peer_io_of(c, coll, s, r, count, dtype, stream));
}

int rt_comm_choose_rooted_io(baton_comm *c, ir_coll coll, int root, const void *s, const void *r, size_t count,
                             int dtype, int peer_io) {
  if (!c || dtype < 0 || dtype >= IP_DTYPE_COUNT || root < 0 || root >= c->nranks) return -1;
  uint64_t bytes = rt_call_bytes(c, coll, count, dtype);   /* the larger buffer's, as for every collective */
  usable_ctx u = {c, (int64_t)count, dtype, c->rank != root || s == r, peer_io};
  int ai = rt_algos_select_rooted(c->algos, coll, root, bytes, (int64_t)count, usable, &u, 0);
  if (new_choice(&c->last_choice[coll][0], ai))
    rt_algos_select_rooted(c->algos, coll, root, bytes, (int64_t)count, usable, &u, 1);
  if (ai >= 0 && !rt_comm_runnable(c, ai)) return -1;
  return ai;
}

bt_result rt_call_again(rt_launch *L) {
  baton_comm *c = L->c;
  int64_t count = L->d.geom.count;
  int dtype = L->d.dtype;
  const ir_coll coll = (ir_coll)L->coll;
  int ai = ir_coll_rooted(coll) ? rt_comm_choose_rooted_io(c, coll, rt_algos_get(c->algos, L->ai)->root, L->sendbuf,
                                                           L->recvbuf, (size_t)count, dtype, RT_PEERS_NONE)
                                : rt_comm_choose_io(c, coll, L->sendbuf, L->recvbuf, (size_t)count, dtype, RT_PEERS_NONE);
  if (ai < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s reaches every rank's buffers, which this call cannot have (its group lacks "
             "some rank's call, or a rank's buffers cannot be mapped), and no other program fits the call: not run",
             c->rank, L->where);
    return BT_ERR_UNSUPPORTED;
  }
  const int64_t slice = c->dplans && c->dplans[ai].ok ? rt_direct_slice(c, ai, count, dtype) : count;
  if (slice > 0 && slice < count) {
    L->resubmit = ai + 1;
    return BT_OK;
  }
  rt_launch M;
  CHECK(rt_call_prep(c, ai, L->sendbuf, L->recvbuf, count, dtype, L->op, NULL, L->stream, &M));
  *L = M;
  return BT_OK;
}

bt_result rt_call_prep(baton_comm *c, int ai, const void *sendbuf, void *recvbuf, int64_t count, int dtype, int op,
                       const rt_operands *ops, cudaStream_t stream, rt_launch *L) {
  if (ops) {   /* a fused call: a FIFO program's, made direct where every rank's output is known */
    CHECK(rt_fifo_prep(c, ai, sendbuf, recvbuf, count, dtype, op, ops, stream, L));
    return rt_direct_fused_across(L, stream);
  }
  if (!c->dplans || !c->dplans[ai].ok) return rt_fifo_prep(c, ai, sendbuf, recvbuf, count, dtype, op, ops, stream, L);
  CHECK(rt_direct_prep(c, ai, sendbuf, recvbuf, count, dtype, op, stream, L));
  return L->again ? rt_call_again(L) : BT_OK;
}

bt_result rt_call_launch(const rt_launch *L) {
  if (L->direct) return rt_direct_launch(L);
  if (L->fdirect) return rt_fgemv_launch(L);
  return rt_fifo_launch(L);
}

bt_result rt_group_submit(const rt_launch *L) { return rt_group_open() ? rt_group_record(L) : rt_call_launch(L); }
