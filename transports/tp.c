/* tp.c -- node groups and the set of transports of one communicator. */
#include "tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_hash.h"
#include "rt_log.h"

int tp_key_cmp(const void *a, const void *b) {
  const tp_key *x = a, *y = b;
  if (x->src != y->src) return x->src < y->src ? -1 : 1;
  if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
  if (x->chan != y->chan) return x->chan < y->chan ? -1 : 1;
  if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
  return x->proto < y->proto ? -1 : x->proto > y->proto;
}

int tp_keys_normalize(tp_key *keys, int n) {
  if (n == 0) return 0;
  qsort(keys, n, sizeof *keys, tp_key_cmp);
  int m = 1;
  for (int i = 1; i < n; i++)
    if (tp_key_cmp(&keys[i], &keys[m - 1])) keys[m++] = keys[i];
  return m;
}

void tp_keys_count(const tp_key *keys, int n, int r, int64_t *nrecv, int64_t *nsend) {
  *nrecv = *nsend = 0;
  for (int i = 0; i < n; i++) {
    *nrecv += keys[i].dst == r;
    *nsend += keys[i].src == r;
  }
}

tp_place tp_keys_place(const tp_key *keys, int n, const tp_key *k) {
  tp_place p = {0, 0, 0, 0};
  for (int i = 0; i < n; i++) {
    const tp_key *x = &keys[i];
    if (tp_key_cmp(x, k) < 0) {
      p.ri += x->dst == k->dst;
      p.si += x->src == k->src;
    }
    p.nrecv_dst += x->dst == k->dst;
    p.nrecv_src += x->dst == k->src;
  }
  return p;
}

static void *heap_alloc(size_t bytes, void **dev) {
  bytes = (bytes + 4095) / 4096 * 4096;
  void *p = aligned_alloc(4096, bytes);
  if (p) memset(p, 0, bytes);
  *dev = p;
  return p;
}
const tp_hostmem tp_heap_mem = {heap_alloc, free};

void tp_peer_self(tp_peer *me, int dev) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  memset(me, 0, sizeof *me);
  me->host = rt_hash_bytes(RT_HASH_START, name, strlen(name));
  me->pid = (int32_t)getpid();
  me->dev = dev;
}

int tp_peer_group(tp_peer *all, int nranks, int64_t node_ranks) {
  int groups = 0;
  for (int r = 0; r < nranks; r++) {
    all[r].node = -1;
    for (int q = 0; q < r && all[r].node < 0; q++)
      if (all[q].host == all[r].host && (node_ranks <= 0 || q / node_ranks == r / node_ranks))
        all[r].node = all[q].node;
    if (all[r].node < 0) all[r].node = groups++;
  }
  return groups;
}

#define TP_MAX_OPS 4

struct tp_set {
  int rank, nranks, nops;
  const tp_ops *ops[TP_MAX_OPS];
  void *state[TP_MAX_OPS];
  int touches[TP_MAX_OPS];       /* connections of this rank the transport carries */
  tp_key *keys;                  /* every rank's connections, sorted */
  unsigned char *owner;          /* per key: index of the transport carrying it */
  int nkeys;
  unsigned char *blob;           /* this rank's record: nops x TP_BLOB_BYTES */
};

size_t tp_set_blob_bytes(int nops) { return (size_t)nops * TP_BLOB_BYTES; }
const unsigned char *tp_set_blob(const tp_set *s) { return s->blob; }

bt_result tp_set_create(tp_set **out, const tp_ctx *x, const tp_ops *const *ops, int nops, const tp_key *keys,
                        int nkeys) {
  *out = NULL;
  if (nops < 1 || nops > TP_MAX_OPS) return BT_ERR_INTERNAL;
  tp_set *s = calloc(1, sizeof *s);
  if (!s) return BT_ERR_NOMEM;
  s->rank = x->rank;
  s->nranks = x->nranks;
  s->nops = nops;
  s->nkeys = nkeys;
  s->keys = malloc((nkeys + 1) * sizeof *keys);
  s->owner = malloc(nkeys + 1);
  s->blob = calloc(nops, TP_BLOB_BYTES);
  tp_key *mine = malloc((nkeys + 1) * sizeof *keys);
  bt_result res = BT_ERR_NOMEM;
  if (!s->keys || !s->owner || !s->blob || !mine) goto fail;
  memcpy(s->keys, keys, nkeys * sizeof *keys);
  for (int i = 0; i < nops; i++) s->ops[i] = ops[i];
  /* Which transport carries each key: the first that can; a pair is asked
   * once per key, which is cheap (a comparison of node groups). */
  for (int k = 0; k < nkeys; k++) {
    int o = 0;
    while (o < nops && !ops[o]->can_connect(x, keys[k].src, keys[k].dst)) o++;
    if (o == nops) {
      char tried[128] = "";
      for (int i = 0, at = 0; i < nops && at < (int)sizeof tried; i++)
        at += snprintf(tried + at, sizeof tried - at, "%s%s", i ? ", " : "", ops[i]->name);
      LOG_WARN(RT_SUB_RUNTIME, "no transport connects rank %d to rank %d (tried: %s)", keys[k].src, keys[k].dst, tried);
      res = BT_ERR_UNSUPPORTED;
      goto fail;
    }
    s->owner[k] = (unsigned char)o;
    if (keys[k].src == x->rank || keys[k].dst == x->rank) s->touches[o]++;
  }
  for (int o = 0; o < nops; o++) {
    int n = 0;
    for (int k = 0; k < nkeys; k++)
      if (s->owner[k] == o) mine[n++] = keys[k];
    if (n == 0) continue;   /* a transport nobody uses is not set up anywhere */
    CHECK_GOTO(ops[o]->setup(x, mine, n, &s->state[o], s->blob + (size_t)o * TP_BLOB_BYTES), res, fail);
  }
  for (int o = 0; o < nops; o++)
    if (s->touches[o])
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: %d connections over %s", x->rank, s->touches[o], ops[o]->name);
  free(mine);
  *out = s;
  return BT_OK;
fail:
  free(mine);
  tp_set_free(s);
  return res;
}

bt_result tp_set_connect(tp_set *s, const unsigned char *records) {
  size_t rec = tp_set_blob_bytes(s->nops);
  unsigned char *blobs = malloc((size_t)s->nranks * TP_BLOB_BYTES);
  if (!blobs) return BT_ERR_NOMEM;
  bt_result res = BT_OK;
  for (int o = 0; o < s->nops && !res; o++) {
    if (!s->state[o]) continue;
    for (int r = 0; r < s->nranks; r++)
      memcpy(blobs + (size_t)r * TP_BLOB_BYTES, records + (size_t)r * rec + (size_t)o * TP_BLOB_BYTES, TP_BLOB_BYTES);
    res = s->ops[o]->connect(s->state[o], blobs);
  }
  free(blobs);
  return res;
}

bt_result tp_set_side(tp_set *s, int peer, int chan, int lane, int proto, int dir, ip_gconn *out) {
  tp_key k = {dir == 0 ? s->rank : peer, dir == 0 ? peer : s->rank, chan, lane, proto};
  const tp_key *f = bsearch(&k, s->keys, s->nkeys, sizeof k, tp_key_cmp);
  if (!f) return BT_ERR_INVALID;
  int o = s->owner[f - s->keys];
  memset(out, 0, sizeof *out);
  return s->ops[o]->side(s->state[o], &k, dir, out);
}

int tp_set_uses(const tp_set *s, const char *name) {
  for (int o = 0; o < s->nops; o++)
    if (s->touches[o] && !strcmp(s->ops[o]->name, name)) return 1;
  return 0;
}

void tp_set_kick(tp_set *s) {
  for (int o = 0; o < s->nops; o++)
    if (s->state[o] && s->ops[o]->kick) s->ops[o]->kick(s->state[o]);
}

bt_result tp_set_error(tp_set *s) {
  for (int o = 0; o < s->nops; o++) {
    if (!s->state[o] || !s->ops[o]->error) continue;
    bt_result e = s->ops[o]->error(s->state[o]);
    if (e) return e;
  }
  return BT_OK;
}

void tp_set_stats(tp_set *s, uint64_t *sent, uint64_t *received) {
  *sent = *received = 0;
  for (int o = 0; o < s->nops; o++) {
    uint64_t a = 0, b = 0;
    if (s->state[o] && s->ops[o]->stats) s->ops[o]->stats(s->state[o], &a, &b);
    *sent += a;
    *received += b;
  }
}

void tp_set_free(tp_set *s) {
  if (!s) return;
  for (int o = 0; o < s->nops; o++)
    if (s->state[o]) s->ops[o]->free(s->state[o]);
  free(s->keys);
  free(s->owner);
  free(s->blob);
  free(s);
}
