/* rt_fused.c -- the fused calls: operands bound to a fused program's,
 * the program chosen by size and key, and the public fused operators
 * (GEMV + AllReduce, embedding bags + AllToAll, GEMM + AllToAll). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "rt_comm.h"
#include "rt_log.h"

/* Binds a fused call's operands to program ai's (by name), checks each
 * against its declared shape -- the input's elements, and dimensions the
 * operands must agree on (a matrix's columns and a vector's length,
 * both K) -- and fills o.  Errors are logged, naming the operand. */
static baton_result bind_operands(baton_comm *c, int ai, const baton_operand *ops, int n, size_t count, int dtype,
                                  rt_operands *o) {
  const ir_prog *p = rt_algos_get(c->algos, ai)->prog;
  const char *where = ir_prog_where(p);
  memset(o, 0, sizeof *o);
  if (n < 0 || (n && !ops)) return baton_invalid_argument;
  if (!ip_compute_takes(p, (ip_dtype)dtype)) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: its compute steps do not take %s (they take %s)", c->rank, where,
             ip_dtype_name[dtype], ip_compute_types(p));
    return baton_invalid_argument;
  }
  /* Entries without data that name no operand bind a dimension (rows). */
  ip_dims dims = {0};
  int given = 0;
  for (int j = 0; j < n; j++) {
    if (ops[j].name && ir_operand_find(p, ops[j].name) >= 0) { given++; continue; }
    if (!ops[j].name || ops[j].data || ip_dims_set(&dims, ops[j].name, (int64_t)ops[j].rows)) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: the call's entry %d (%s) is neither one of its operands nor a dimension "
               "(no data, rows in [1, %lld])", c->rank, where, j, ops[j].name ? ops[j].name : "no name",
               (long long)IP_MAX_DIM);
      return baton_invalid_argument;
    }
  }
  if (given != p->noperands) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s takes %d operands, the call gives %d", c->rank, where, p->noperands, given);
    return baton_invalid_argument;
  }
  const baton_operand *by[IR_MAX_OPERANDS] = {0};
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *io = &p->operands[k];
    for (int j = 0; j < n && !by[k]; j++)
      if (ops[j].name && !strcmp(ops[j].name, io->name)) by[k] = &ops[j];
    const baton_operand *u = by[k];
    if (!u || !u->data) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: operand %s is %s", c->rank, where, io->name, u ? "NULL" : "not given");
      return baton_invalid_argument;
    }
    size_t got[2] = {u->rows, io->kind == IR_OPND_MATRIX ? u->cols : 1};
    for (int d = 0; d < (io->kind == IR_OPND_MATRIX ? 2 : 1); d++) {
      if (!strcmp(io->dim[d], IR_DIM_INPUT)) continue;
      int64_t bound = ip_dims_get(&dims, io->dim[d]);
      if (bound < 0 && ip_dims_set(&dims, io->dim[d], (int64_t)got[d])) {
        LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: operand %s: %s = %zu is out of range [1, %lld]", c->rank, where,
                 io->name, io->dim[d], got[d], (long long)IP_MAX_DIM);
        return baton_invalid_argument;
      }
    }
  }
  ir_geom g;
  if (ir_geom_init(&g, p, c->rank, (int64_t)count, p->inplace)) return baton_invalid_argument;
  rt_diag *d = rt_diag_new(4);
  int64_t shape[IR_MAX_OPERANDS][2];
  bt_result e = d ? ip_operand_shapes(p, &g, &dims, 0, shape, d) : BT_ERR_NOMEM;
  if (e) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s", c->rank, d ? rt_diag_text(d) : "out of memory");
    rt_diag_free(d);
    return (baton_result)e;
  }
  rt_diag_free(d);
  for (int k = 0; k < p->noperands; k++) {
    const ir_operand *io = &p->operands[k];
    const baton_operand *u = by[k];
    int64_t rows = (int64_t)u->rows, cols = io->kind == IR_OPND_MATRIX ? (int64_t)u->cols : 1;
    int64_t ld = io->kind == IR_OPND_MATRIX && u->ld ? (int64_t)u->ld : cols;
    if (rows != shape[k][0] || cols != shape[k][1] || ld < cols) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: operand %s is %lld x %lld (row stride %lld); the program needs %lld x %lld "
               "(%s x %s, the input holding %lld elements)", c->rank, where, io->name, (long long)rows, (long long)cols,
               (long long)ld, (long long)shape[k][0], (long long)shape[k][1], io->dim[0],
               io->kind == IR_OPND_MATRIX ? io->dim[1] : "1", (long long)g.elems[IR_BUF_INPUT]);
      return baton_invalid_argument;
    }
    o->data[k] = u->data;
    o->ld[k] = ld;
    o->cols[k] = cols;
    o->rows[k] = rows;
    o->dtype[k] = io->kind == IR_OPND_INDEX ? (int8_t)ip_operand_dtype(p, k, (ip_dtype)dtype) : -1;
  }
  if (p->interleave) {
    rt_diag *d2 = rt_diag_new(2);
    o->seg = d2 ? ip_interleave_len(p, &dims, 0, d2) : -1;
    if (o->seg < 0) LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s", c->rank, d2 ? rt_diag_text(d2) : "out of memory");
    rt_diag_free(d2);
    if (o->seg < 0) return baton_invalid_argument;
  }
  return baton_success;
}

/* Runs fused program ai with its operands on recvbuf. */
static baton_result fused_submit(baton_comm *c, int ai, const baton_operand *ops, int n, void *recvbuf, size_t count,
                                 int dtype, int op, cudaStream_t stream) {
  rt_operands o;
  baton_result e = bind_operands(c, ai, ops, n, count, dtype, &o);
  if (e) return rt_comm_call_failed(e);
  return rt_comm_call_submit(c, ai, NULL, recvbuf, count, dtype, op, &o, stream);
}

baton_result baton_run_fused(const char *name, const baton_operand *operands, int noperands, void *recvbuf,
                             size_t count, baton_dtype t, baton_redop op, baton_comm *c, cudaStream_t stream) {
  baton_result e = rt_comm_call_check(c, recvbuf, recvbuf, t, op);
  if (e) return rt_comm_call_failed(e);
  if (!name || noperands < 0) return rt_comm_call_failed(baton_invalid_argument);
  int ai = rt_algos_find(c->algos, name);
  if (ai < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no loaded algorithm is called %s", c->rank, name);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (rt_algos_get(c->algos, ai)->compute < 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s computes nothing: run it with baton_run", c->rank, name);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (count == 0) return baton_success;
  return fused_submit(c, ai, operands, noperands, recvbuf, count, t, op, stream);
}

/* The fused program a call of `bytes` (count elements) runs: among the
 * loaded ones this GPU holds, of collective coll computing with `key`
 * (rt_algos_select_fused), each new choice logged once.  baton_success
 * with *ai set; baton_unsupported, said why (`what`: the operator), when
 * none fits; baton_out_of_memory. */
static baton_result choose_fused(baton_comm *c, ir_coll coll, int key, uint64_t bytes, int64_t count, const char *what,
                                 int *ai) {
  int n = rt_algos_count(c->algos);
  unsigned char *usable = calloc(n + 1, 1);
  if (!usable) return baton_out_of_memory;
  for (int i = 0; i < n; i++) usable[i] = rt_plan_blocks(&c->plans[i]) > 0;
  int i = rt_algos_select_fused(c->algos, coll, key, bytes, count, usable, 0);
  if (i != c->last_choice_fused) {
    rt_algos_select_fused(c->algos, coll, key, bytes, count, usable, 1);
    c->last_choice_fused = i;
  }
  free(usable);
  if (i < 0) {
    int loaded = 0;   /* programs of this kind at all, whatever their sizes */
    for (int k = 0; k < n && !loaded; k++) {
      const rt_algo *al = rt_algos_get(c->algos, k);
      loaded = al->prog->coll == coll && al->compute == key;
    }
    if (!loaded) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: no %s program is loaded (compile one for %d ranks into BATON_ALGO_DIR: "
               "docs/FUSED.md): not run", c->rank, what, c->nranks);
      return baton_unsupported;
    }
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: no loaded %s program fits %lld elements (%llu bytes) per rank on %d ranks "
             "(BATON_DEBUG=INFO says why): not run", c->rank, what, (long long)count, (unsigned long long)bytes,
             c->nranks);
    return baton_unsupported;
  }
  *ai = i;
  return baton_success;
}

/* The first step of p running opcode op. */
static const ir_step *first_step(const ir_prog *p, int op) {
  for (int r = 0; r < p->ngpus; r++)
    for (int b = 0; b < p->gpus[r].ntbs; b++)
      for (int s = 0; s < p->gpus[r].tbs[b].nsteps; s++)
        if (p->gpus[r].tbs[b].steps[s].op == op) return &p->gpus[r].tbs[b].steps[s];
  return NULL;
}

baton_result baton_gemv_allreduce(baton_comm *c, const void *W, const void *x, void *y, size_t M, size_t K_local,
                                  baton_dtype t, cudaStream_t stream) {
  baton_result e = rt_comm_call_check(c, W && x ? y : NULL, y, t, baton_sum);
  if (e) return rt_comm_call_failed(e);
  if (M == 0) return baton_success;
  if (K_local == 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: gemv_allreduce with K_local = 0", c->rank);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  /* The direct one-shot kernel where it runs the call, else a program. */
  rt_launch L;
  bt_result d = rt_fgemv_prep(c, W, x, y, M, K_local, t, stream, &L);
  if (d == BT_OK) d = rt_group_submit(&L);
  if (d != BT_ERR_UNSUPPORTED) return d ? rt_comm_call_failed((baton_result)d) : baton_success;
  int ai;
  e = choose_fused(c, IR_COLL_ALLREDUCE, IR_OP_GEMV, (uint64_t)M * ip_dtype_size[t], (int64_t)M, "GEMV + AllReduce",
                   &ai);
  if (e) return rt_comm_call_failed(e);
  /* The program's matrix is W, its vector x, whatever it names them. */
  const ir_prog *p = rt_algos_get(c->algos, ai)->prog;
  baton_operand ops[IR_MAX_OPERANDS];
  for (int k = 0; k < p->noperands; k++) {
    int m = p->operands[k].kind == IR_OPND_MATRIX;
    ops[k] = (baton_operand){.name = p->operands[k].name, .data = m ? W : x, .rows = m ? M : K_local,
                             .cols = m ? K_local : 1, .ld = m ? K_local : 0};
  }
  return fused_submit(c, ai, ops, p->noperands, y, M, t, baton_sum, stream);
}

baton_result baton_embedding_alltoall(baton_comm *c, const void *table, size_t rows, size_t dim, size_t ld,
                                      const int64_t *indices, size_t nindices, const int64_t *offsets,
                                      const void *weights, size_t batch, size_t tables, baton_redop mode,
                                      void *out, baton_dtype t, cudaStream_t stream) {
  baton_result e = rt_comm_call_check(c, table && indices && offsets ? out : NULL, out, t, baton_sum);
  if (e) return rt_comm_call_failed(e);
  if ((mode != baton_sum && mode != baton_avg) || (weights && mode != baton_sum)) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: embedding_alltoall pools by sum or avg, and takes weights only with sum",
             c->rank);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (batch == 0 || tables == 0 || dim == 0) return baton_success;
  if (batch > (size_t)IP_MAX_DIM || tables > (size_t)IP_MAX_DIM / batch || dim > (size_t)IP_MAX_DIM ||
      batch * tables * dim > (size_t)IR_GEOM_MAX_ELEMS) {   /* each product below 2^62: none overflows */
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: embedding_alltoall: batch %zu x tables %zu x dim %zu is larger than baton takes "
             "(%lld bags and columns each, %lld elements in all)", c->rank, batch, tables, dim, (long long)IP_MAX_DIM,
             (long long)IR_GEOM_MAX_ELEMS);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  if (batch % (size_t)c->nranks || rows == 0 || nindices == 0) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: embedding_alltoall: batch %zu is not a multiple of the %d ranks, or the table "
             "or the indices are empty", c->rank, batch, c->nranks);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  size_t count = batch / (size_t)c->nranks * tables * dim;   /* elements this rank sends each rank */
  int key = (mode == baton_avg ? IR_OP_EBAGM : IR_OP_EBAG) | (weights ? RT_COMPUTE_WEIGHTED : 0);
  int ai;
  e = choose_fused(c, IR_COLL_ALLTOALL, key, (uint64_t)count * ip_dtype_size[t], (int64_t)count,
                   mode == baton_avg ? "embedding-bag (mean) + AllToAll"
                   : weights        ? "embedding-bag (weighted sum) + AllToAll"
                                    : "embedding-bag (sum) + AllToAll",
                   &ai);
  if (e) return rt_comm_call_failed(e);
  /* The program's operands by their roles in its embedding bag step. */
  const ir_prog *p = rt_algos_get(c->algos, ai)->prog;
  const ir_step *st = first_step(p, RT_COMPUTE_OP(key));
  baton_operand ops[IR_MAX_OPERANDS + IP_MAX_DIMS];
  int k = 0;
  ops[k++] = (baton_operand){.name = p->operands[st->args[0]].name, .data = table, .rows = rows, .cols = dim, .ld = ld};
  ops[k++] = (baton_operand){.name = p->operands[st->args[1]].name, .data = indices, .rows = nindices, .cols = 1};
  ops[k++] = (baton_operand){.name = p->operands[st->args[2]].name, .data = offsets, .rows = batch * tables + 1,
                             .cols = 1};
  if (st->args[3] >= 0)
    ops[k++] = (baton_operand){.name = p->operands[st->args[3]].name, .data = weights, .rows = nindices, .cols = 1};
  /* The interleave's dimensions: the table's columns (bound by the table),
   * and `tables` for each other factor. */
  char dnames[IR_MAX_DIM_FACTORS][IR_MAX_NAME];
  int nd = 0;
  for (const char *f = p->interleave ? p->interleave : ""; *f && nd < IR_MAX_DIM_FACTORS;) {
    size_t len = strcspn(f, "*");   /* < IR_MAX_NAME: ir_dim_expr_ok */
    snprintf(dnames[nd], IR_MAX_NAME, "%.*s", (int)len, f);
    if (strcmp(dnames[nd], p->operands[st->args[0]].dim[1]))
      ops[k++] = (baton_operand){.name = dnames[nd++], .rows = tables};
    f += len + (f[len] == '*');
  }
  return fused_submit(c, ai, ops, k, out, count, t, baton_sum, stream);
}

baton_result baton_gemm_alltoall(baton_comm *c, const void *X, size_t ldx, const void *W, size_t ldw,
                                 const int32_t *counts, void *out, size_t tokens, size_t F, size_t H, baton_dtype t,
                                 cudaStream_t stream) {
  baton_result e = rt_comm_call_check(c, X && W ? out : NULL, out, t, baton_sum);
  if (e) return rt_comm_call_failed(e);
  if (tokens == 0 || H == 0) return baton_success;
  const char *why = t != baton_bf16 ? "it multiplies bf16 only"
                    : tokens % (size_t)c->nranks ? "tokens must be a multiple of the ranks"
                    : F == 0 ? "F must be at least 1"
                    : tokens > (size_t)IP_MAX_DIM || F > (size_t)IP_MAX_DIM || H > (size_t)IP_MAX_DIM ||
                            tokens * H > (size_t)IR_GEOM_MAX_ELEMS
                        ? "larger than baton takes (IP_MAX_DIM per dimension, IR_GEOM_MAX_ELEMS for tokens x H)"
                        : NULL;
  if (why) {
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: gemm_alltoall of %s, tokens %zu, F %zu, H %zu on %d ranks: %s", c->rank,
             ip_dtype_name[t], tokens, F, H, c->nranks, why);
    return rt_comm_call_failed(baton_invalid_argument);
  }
  size_t count = tokens / (size_t)c->nranks * H;   /* elements this rank sends each rank */
  int ai;
  e = choose_fused(c, IR_COLL_ALLTOALL, IR_OP_GEMM, (uint64_t)count * ip_dtype_size[t], (int64_t)count,
                   "GEMM + AllToAll", &ai);
  if (e) return rt_comm_call_failed(e);
  const ir_prog *p = rt_algos_get(c->algos, ai)->prog;
  const ir_step *st = first_step(p, IR_OP_GEMM);
  baton_operand ops[2] = {
      {.name = p->operands[st->args[0]].name, .data = X, .rows = tokens, .cols = F, .ld = ldx},
      {.name = p->operands[st->args[1]].name, .data = W, .rows = F, .cols = H, .ld = ldw},
  };
  rt_operands o;
  e = bind_operands(c, ai, ops, 2, count, t, &o);
  if (e) return rt_comm_call_failed(e);
  o.gcount = counts;
  return rt_comm_call_submit(c, ai, NULL, out, count, t, baton_sum, &o, stream);
}
