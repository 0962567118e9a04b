/* net_test.h -- what the network transport's tests share (test_net.c,
 * test_net_hostile.c): ranks of this process playing GPUs over host
 * memory, their connections' keys and messages, and the engine that sends
 * and checks them. */
#ifndef NET_TEST_H
#define NET_TEST_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "rt_time.h"
#include "tap.h"
#include "tp.h"

enum { SLOT = 3 * 4096 + 100, NSLOTS = 4, MAXR = 8 };

static const tp_ops *const net_only[] = {&tp_net_ops};

typedef struct trank {
  int rank, nranks;
  tp_set *set;
  volatile int32_t abort;
  tp_key *keys;
  int nkeys;
  int64_t msgs;        /* per connection; -1: until aborted */
  int failures;        /* bytes that arrived wrong */
  int64_t done;        /* messages received in all */
  int stopped_by_abort;
} trank;

static tp_peer peers[MAXR];

/* Every ordered pair of ranks on `chans` channels and 2 lanes. */
__attribute__((unused)) static int all_pairs(int n, int chans, tp_key *k) {
  int m = 0;
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      for (int c = 0; c < chans && a != b; c++)
        for (int l = 0; l < 2; l++) k[m++] = (tp_key){a, b, c, l, 0};
  return tp_keys_normalize(k, m);
}

__attribute__((unused)) static uint32_t msg_len(const tp_key *k, uint64_t m) {
  static const uint32_t sizes[] = {0, 1, 7, 4095, 4096, 4097, SLOT, 12345, 8192 + 13, 100};
  return sizes[(m + (uint64_t)k->chan * 3 + (uint64_t)k->lane) % 10] % (SLOT + 1);
}
__attribute__((unused)) static unsigned char pat(const tp_key *k, uint64_t m, uint32_t i) {
  return (unsigned char)(k->src * 131 + k->dst * 31 + k->chan * 7 + k->lane * 3 + m * 17 + i * 13 + (i >> 8));
}

__attribute__((unused)) static tp_ctx ctx_of(trank *t) {
  return (tp_ctx){t->rank, t->nranks, peers, NSLOTS, SLOT, 0, &tp_heap_mem, &t->abort};
}

/* Creates ranks t[0..n) in this process and connects them one after the
 * other (as one process holding several ranks does). */
__attribute__((unused)) static int setup(trank *t, int n, tp_key *keys, int nkeys) {
  if (n < 1 || n > MAXR) return -1;
  for (int r = 0; r < n; r++) {
    tp_peer_self(&peers[r], 0);
    t[r] = (trank){.rank = r, .nranks = n, .keys = keys, .nkeys = nkeys};
  }
  tp_peer_group(peers, n, 1);
  size_t rec = tp_set_blob_bytes(1);
  unsigned char *all = calloc((size_t)n, rec);
  int bad = 0;
  for (int r = 0; r < n && !bad; r++) {
    tp_ctx x = ctx_of(&t[r]);
    bad = tp_set_create(&t[r].set, &x, net_only, 1, keys, nkeys) != BT_OK;
    if (!bad) memcpy(all + r * rec, tp_set_blob(t[r].set), rec);
  }
  for (int r = 0; r < n && !bad; r++) bad = tp_set_connect(t[r].set, all) != BT_OK;
  free(all);
  return bad ? -1 : 0;
}

/* The GPU of rank t: sends msgs messages on each of its send connections
 * and receives as many on each receive connection, checking every byte,
 * until done, aborted, or 60 s. */
__attribute__((unused)) static void *engine(void *arg) {
  trank *t = arg;
  typedef struct gc { ip_gconn g; tp_key k; uint64_t next; int dir; } gc;
  gc *c = calloc(t->nkeys, sizeof *c);
  int n = 0;
  for (int i = 0; i < t->nkeys; i++) {
    const tp_key *k = &t->keys[i];
    int dir = k->src == t->rank ? 0 : k->dst == t->rank ? 1 : -1;
    if (dir < 0) continue;
    if (tp_set_side(t->set, dir ? k->src : k->dst, k->chan, k->lane, k->proto, dir, &c[n].g)) {
      t->failures++;
      continue;
    }
    c[n].k = *k;
    c[n].dir = dir;
    n++;
  }
  int64_t deadline = rt_time_ns() + 60 * 1000000000ll;
  uint64_t want = t->msgs < 0 ? UINT64_MAX : (uint64_t)t->msgs;
  for (;;) {
    int left = 0, moved = 0;
    if (t->abort) { t->stopped_by_abort = 1; break; }
    if (rt_time_ns() > deadline) break;
    for (int i = 0; i < n; i++) {
      gc *x = &c[i];
      if (x->next >= want) continue;
      left++;
      uint64_t m = x->next;
      int slot = (int)(m % NSLOTS);
      uint32_t len = msg_len(&x->k, m);
      if (x->dir == 0) {
        if (m - __atomic_load_n(x->g.tail, __ATOMIC_ACQUIRE) >= NSLOTS) continue;
        unsigned char *p = (unsigned char *)x->g.fifo + (size_t)slot * SLOT;
        for (uint32_t b = 0; b < len; b++) p[b] = pat(&x->k, m, b);
        x->g.lens[slot] = len;
        __atomic_store_n(x->g.head, m + 1, __ATOMIC_RELEASE);
      } else {
        if (__atomic_load_n(x->g.head, __ATOMIC_ACQUIRE) <= m) continue;
        const unsigned char *p = (const unsigned char *)x->g.fifo + (size_t)slot * SLOT;
        for (uint32_t b = 0; b < len; b++)
          if (p[b] != pat(&x->k, m, b)) {
            if (t->failures++ < 3)
              printf("# rank %d: message %llu from %d chan %d lane %d byte %u: %u, expected %u\n", t->rank,
                     (unsigned long long)m, x->k.src, x->k.chan, x->k.lane, b, p[b], pat(&x->k, m, b));
            break;
          }
        __atomic_store_n(x->g.tail, m + 1, __ATOMIC_RELEASE);
        t->done++;
      }
      x->next++;
      moved++;
    }
    if (!left) break;
    if (!moved) sched_yield();
  }
  free(c);
  return NULL;
}

/* Runs the engines of t[0..n) to the end; 0 when every message of every
 * connection arrived intact. */
__attribute__((unused)) static int run_all(trank *t, int n, int64_t msgs) {
  pthread_t th[MAXR];
  for (int r = 0; r < n; r++) {
    t[r].msgs = msgs;
    pthread_create(&th[r], NULL, engine, &t[r]);
  }
  int bad = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    int64_t expect = 0;
    for (int i = 0; i < t[r].nkeys; i++) expect += t[r].keys[i].dst == r;
    expect *= msgs;
    if (t[r].failures || t[r].done != expect) {
      printf("# rank %d: %lld of %lld messages, %d wrong\n", r, (long long)t[r].done, (long long)expect,
             t[r].failures);
      bad = 1;
    }
  }
  return bad;
}

#endif
