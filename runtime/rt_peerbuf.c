/* rt_peerbuf.c -- every rank's buffers of one call across processes:
 * exported by CUDA IPC or, for cuMem allocations (one, or several mapped
 * side by side), as file descriptors passed over a Unix socket; exchanged
 * over the bootstrap, mapped once per peer allocation. */
#include "rt_peerbuf.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_bootstrap.h"
#include "rt_fdpass.h"
#include "rt_hash.h"
#include "rt_param.h"
#include "rt_shmbox.h"
#include "rt_socket.h"
#include "tp_cuda.h"
#include "rt_log.h"

enum { PB_IN, PB_OUT, PB_BUFS };
enum { PB_IPC, PB_VMM };      /* how a buffer's allocation is shared */
#define PB_FD_TIMEOUT_MS 10000 /* the descriptors' passing, right after an allgather every rank took part in */
#define PB_PIECES_MAX 32       /* cuMem allocations side by side one buffer may span (PyTorch's expandable
                                * segments map 20 MiB ones: 640 MiB) */
_Static_assert(PB_BUFS * PB_PIECES_MAX <= RT_FDPASS_MAX, "one message carries a call's descriptors");
#define PB_GONE_MAX 16         /* freed allocations one record names (more wait for the next exchange) */
#define PB_CHECK_EACH 2        /* own exported allocations checked per exchange (all when the call brings a new one) */

/* One cuMem allocation of a buffer, in its owner's process: where it is
 * mapped, its bytes, and its identity (CU_POINTER_ATTRIBUTE_BUFFER_ID:
 * never reused, so a freed and remade allocation is a new one). */
typedef struct pb_piece {
  uint64_t base, size, id;
} pb_piece;

/* What a rank publishes of one call: per buffer, how its allocation is
 * shared (its IPC handle; for cuMem the allocations it spans, their
 * descriptors going over the Unix socket in that order), its base (in its
 * own process; cuMem: the first allocation's) and the buffer's offset
 * there; where its descriptors' listener is (fdkey). */
typedef struct pb_rec {
  char ipc[PB_BUFS][64];
  uint64_t base[PB_BUFS], off[PB_BUFS], id[PB_BUFS];  /* id: a CUDA IPC allocation's (0: unknown) */
  int32_t kind[PB_BUFS], pieces[PB_BUFS];
  pb_piece piece[PB_BUFS][PB_PIECES_MAX];
  uint64_t host, fdkey, key, prog, pidns;   /* pidns: its PID namespace (rt_pid_namespace; 0: unknown) */
  uint64_t gone[PB_GONE_MAX]; /* the ids of this rank's allocations, once exchanged, it has found freed */
  int32_t pid, dev, ok, ngone;
} pb_rec;

/* A peer's allocation mapped into this process: by CUDA IPC, or its cuMem
 * allocations side by side (pieces, mapped from at, with their handles). */
typedef struct pb_map {
  int peer, opened, vmm, pieces;
  int live;                   /* vmm: pieces its owner has not freed (a freed one's id becomes 0) */
  uint64_t id;                /* CUDA IPC: the allocation's id in its owner's process (0: unknown) */
  char ipc[64];
  char *at;                   /* its base as this process reaches it */
  pb_piece *piece;            /* vmm: the peer's allocations, and this process's handles of them */
  unsigned long long *handle;
} pb_map;

/* An allocation of some rank that a successful exchange carried: every
 * other rank has it mapped since (mappings are kept).  CUDA IPC ones by
 * their handle; cuMem ones by the run of allocations side by side that
 * one mapping holds (run_of: their identities in order), for a buffer
 * across several is mapped as one run of them (map_vmm): allocations each
 * carried alone were mapped apart, and no mapping holds them side by side. */
typedef struct pb_seen {
  int32_t rank, vmm;
  uint64_t id;
  char ipc[64];
} pb_seen;
#define PB_SEEN_MAX 1024      /* seen allocations remembered, made at once (past it, calls on new ones
                               * exchange in full) */
#define PB_OWN_MAX 16         /* this rank's CUDA IPC handles remembered by allocation */

/* An allocation of this rank that a successful exchange carried (its peers
 * have it mapped since): where it lies and its id, to find it freed. */
typedef struct pb_lent {
  uint64_t base, id;
} pb_lent;

struct rt_peerbufs {
  int n, cap;
  int allocs;                 /* peers' allocations the maps hold (against max_maps) */
  pb_map *maps;
  pb_rec *recs;               /* nranks: the exchange's buffer */
  int warned_full;
  rt_fdpass *fp;              /* this process's listener for cuMem descriptors, and its key */
  uint64_t fdkey, tag;        /* tag: exchanges that passed descriptors (the same count on every rank) */
  int myfd[PB_BUFS][PB_PIECES_MAX];  /* this call's exported descriptors (-1: none) */
  int *fds;                   /* nranks * RT_FDPASS_MAX: the peers' received ones */
  /* What successful exchanges carried: the same list on every rank (each
   * adds every record of such an exchange, in order, to the same bound),
   * so that every rank decides alike that a call needs no new mapping. */
  pb_seen *seen;              /* PB_SEEN_MAX */
  int nseen;
  rt_shmbox *box;             /* the ranks' allgathers through shared memory (NULL: the bootstrap's) */
  struct { unsigned long long id; char ipc[64]; } own[PB_OWN_MAX];   /* a ring of this rank's handles */
  int nown;
  /* This rank's allocations its peers have mapped (PB_SEEN_MAX at most),
   * looked at PB_CHECK_EACH an exchange from `next`; the ids of those
   * found freed and not yet named in a record. */
  pb_lent *lent;
  int nlent, next;
  uint64_t *freed;            /* PB_SEEN_MAX */
  int nfreed;
};

/* The identity of a run of k cuMem allocations side by side (never 0). */
static uint64_t run_of(const pb_piece *piece, int k) {
  uint64_t h = rt_hash(RT_HASH_START, (uint64_t)k);
  for (int i = 0; i < k; i++) h = rt_hash(rt_hash(h, piece[i].id), piece[i].base);
  return h ? h : 1;
}

/* Whether seen holds rank r's allocation (vmm: a run's identity id, run_of;
 * else handle ipc). */
static int seen_has(const rt_peerbufs *pb, int r, int vmm, uint64_t id, const char *ipc) {
  for (int i = pb->nseen - 1; i >= 0; i--) {
    const pb_seen *x = &pb->seen[i];
    if (x->rank == r && x->vmm == vmm && (vmm ? x->id == id : !memcmp(x->ipc, ipc, sizeof x->ipc))) return 1;
  }
  return 0;
}

/* Adds rank r's allocation to seen where it is new and there is room
 * (room made with pb: every rank's list grows alike). */
static void seen_add(rt_peerbufs *pb, int r, int vmm, uint64_t id, const char *ipc) {
  if (seen_has(pb, r, vmm, id, ipc) || pb->nseen == PB_SEEN_MAX) return;
  pb_seen *x = &pb->seen[pb->nseen++];
  memset(x, 0, sizeof *x);
  x->rank = r;
  x->vmm = vmm;
  x->id = id;
  if (!vmm) memcpy(x->ipc, ipc, sizeof x->ipc);
}


/* Buffer b of rec as the cuMem allocations side by side that hold its
 * `len` bytes from p, the first one (base, size, id) holding p: each one's
 * identity into rec, its descriptor into pb->myfd[b].  1; 0 with why
 * where one cannot be exported, or the buffer runs past them into
 * memory that is not another allocation of this GPU, or spans more than
 * PB_PIECES_MAX. */
static int export_vmm(rt_peerbufs *pb, pb_rec *rec, int b, pb_piece at, const char *p, int64_t len, int dev,
                      const char **why) {
  const uint64_t end = (uint64_t)(uintptr_t)p + (uint64_t)(len > 0 ? len : 0);
  for (int k = 0;; k++) {
    if (k == PB_PIECES_MAX) {
      *why = "it spans more cuMem allocations than one buffer may (32)";
      return 0;
    }
    if (!tp_cuda_vmm_export(at.base, &pb->myfd[b][k])) {
      *why = k ? "it runs past its cuMem allocation into one that cannot be exported as a file descriptor"
               : "its allocation can be exported neither by CUDA IPC (not from cudaMalloc) nor as a cuMem file "
                 "descriptor";
      return 0;   /* the descriptors go with the exchange's other ones */
    }
    rec->piece[b][k] = at;
    rec->pieces[b] = k + 1;
    if (at.base + at.size >= end) break;
    const char *next = (const char *)(uintptr_t)(at.base + at.size);
    struct cudaPointerAttributes pa;
    memset(&pa, 0, sizeof pa);
    size_t size = 0;
    unsigned long long id = 0;
    if (cudaPointerGetAttributes(&pa, next) != cudaSuccess || pa.type != cudaMemoryTypeDevice || pa.device != dev ||
        !tp_cuda_alloc_of(next, &at.base, &size, &id) || at.base != (uint64_t)(uintptr_t)next) {
      cudaGetLastError();
      *why = "it runs past its cuMem allocation into memory that is not another allocation of this GPU";
      return 0;
    }
    at.size = (uint64_t)size;
    at.id = (uint64_t)id;
  }
  rec->kind[b] = PB_VMM;
  return 1;
}

/* Fills buffer b of rec for device pointer p of device dev, of which the
 * call reaches `len` bytes: 1; 0 when p is not device memory of dev in an
 * allocation CUDA IPC can export, or in cuMem allocations (export_vmm)
 * whose file descriptors can be, which why says. */
static int export_buf(rt_peerbufs *pb, pb_rec *rec, int b, const char *p, int64_t len, int dev,
                      const char **why) {
  struct cudaPointerAttributes at;
  memset(&at, 0, sizeof at);
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type != cudaMemoryTypeDevice || at.device != dev) {
    cudaGetLastError();
    *why = "not device memory of this rank's GPU";
    return 0;
  }
  uint64_t base = 0;
  size_t size = 0;
  unsigned long long id = 0;
  if (!tp_cuda_alloc_of(p, &base, &size, &id)) {
    *why = "its allocation's range is unknown";
    return 0;
  }
  rec->base[b] = base;
  rec->off[b] = (uint64_t)((uintptr_t)p - (uintptr_t)base);
  rec->id[b] = (uint64_t)id;
  /* A CUDA IPC allocation is mapped alone: a buffer past its end would
   * have peers reach past their mapping (a cuMem one may run on into the
   * next allocation: export_vmm). */
  const int fits = rec->off[b] <= (uint64_t)size && (uint64_t)(len > 0 ? len : 0) <= (uint64_t)size - rec->off[b];
  static const char *const past = "it runs past the end of its allocation";
  for (int i = 0; i < PB_OWN_MAX && id; i++)   /* its handle, made for an earlier call */
    if (pb->own[i].id == id) {
      if (!fits) return *why = past, 0;
      memcpy(rec->ipc[b], pb->own[i].ipc, sizeof rec->ipc[b]);
      rec->kind[b] = PB_IPC;
      return 1;
    }
  cudaIpcMemHandle_t h;
  if (cudaIpcGetMemHandle(&h, (void *)(uintptr_t)base) == cudaSuccess) {
    if (!fits) return *why = past, 0;
    memcpy(rec->ipc[b], &h, sizeof h < sizeof rec->ipc[b] ? sizeof h : sizeof rec->ipc[b]);
    rec->kind[b] = PB_IPC;
    if (id) {
      const int i = pb->nown++ % PB_OWN_MAX;
      pb->own[i].id = id;
      memcpy(pb->own[i].ipc, rec->ipc[b], sizeof pb->own[i].ipc);
    }
    return 1;
  }
  cudaGetLastError();
  if (!pb->fp) {
    *why = "its allocation is not from cudaMalloc, and this process has no listener for cuMem file descriptors";
    return 0;
  }
  return export_vmm(pb, rec, b, (pb_piece){base, (uint64_t)size, (uint64_t)id}, p, len, dev, why);
}

/* Whether rank x's record describes what export_buf makes: each cuMem
 * buffer 1..PB_PIECES_MAX allocations of some bytes each, side by side,
 * the buffer's offset inside them (a record is another process's word;
 * one that is not so is refused like a buffer that cannot be exported). */
static int rec_sane(const pb_rec *x) {
  for (int b = 0; b < PB_BUFS; b++) {
    if (x->kind[b] != PB_VMM) continue;
    const int k = x->pieces[b];
    if (k < 1 || k > PB_PIECES_MAX || x->piece[b][0].base != x->base[b]) return 0;
    uint64_t span = 0;
    for (int i = 0; i < k; i++) {
      const pb_piece *q = &x->piece[b][i];
      if (q->size == 0 || q->base != x->base[b] + span || span + q->size < span) return 0;
      span += q->size;
    }
    if (x->off[b] >= span) return 0;
  }
  return x->ngone >= 0 && x->ngone <= PB_GONE_MAX;
}

/* Where map m holds the k allocations want[] side by side (the same
 * identities at the same bases in their owner's process): its address of
 * want[0]; NULL where it does not. */
static char *vmm_holds(const pb_map *m, const pb_piece *want, int k) {
  for (int j = 0; j + k <= m->pieces; j++) {
    int i = 0;
    while (i < k && want[i].id && m->piece[j + i].id == want[i].id && m->piece[j + i].base == want[i].base) i++;
    if (i == k) return m->at + (want[0].base - m->piece[0].base);
  }
  return NULL;
}

/* Maps rank r's cuMem allocations of buffer b (x->piece[b]) from their
 * descriptors fds[] into m.  0 when they cannot be. */
static int map_vmm(pb_map *m, const pb_rec *x, int b, const int *fds, int dev) {
  const int k = x->pieces[b];
  size_t bytes[PB_PIECES_MAX];
  for (int i = 0; i < k; i++) {
    if (fds[i] < 0) return 0;
    bytes[i] = (size_t)x->piece[b][i].size;
  }
  m->piece = malloc((size_t)k * sizeof *m->piece);
  m->handle = malloc((size_t)k * sizeof *m->handle);
  if (!m->piece || !m->handle || tp_cuda_vmm_import(fds, bytes, k, dev, &m->at, m->handle)) {
    free(m->piece);
    free(m->handle);
    return 0;
  }
  memcpy(m->piece, x->piece[b], (size_t)k * sizeof *m->piece);
  m->pieces = m->live = k;
  m->vmm = 1;
  return 1;
}

/* Rank r's allocation of buffer b as this process reaches it: a mapping
 * kept from an earlier call, else a new one (a cuMem one from fds, the
 * descriptors r passed for it).  0 when it cannot be. */
static int map_buf(rt_peerbufs *pb, const rt_peerbuf_self *me, int r, int b, const int *fds, char **at) {
  const pb_rec *x = &pb->recs[r];
  const int vmm = x->kind[b] == PB_VMM, want = vmm ? x->pieces[b] : 1;
  int same_process = x->host == me->host && x->pid == (int32_t)getpid() && x->pidns == pb->recs[me->rank].pidns;
  for (int i = 0; i < pb->n; i++) {
    const pb_map *m = &pb->maps[i];
    if (m->peer != r || m->vmm != vmm) continue;
    if (vmm && (*at = vmm_holds(m, x->piece[b], want))) return 1;
    if (!vmm && !memcmp(m->ipc, x->ipc[b], 64) && (m->opened || (uint64_t)(uintptr_t)m->at == x->base[b])) {
      *at = m->at;
      return 1;
    }
  }
  if (pb->allocs + want > me->max_maps) {
    if (!pb->warned_full++)
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: %d peers' allocations are mapped already (BATON_PEER_MAPS): calls on new "
               "ones copy through the window", me->rank, pb->allocs);
    return 0;
  }
  if (pb->n == pb->cap) {
    int cap = pb->cap ? 2 * pb->cap : 16;
    pb_map *m = realloc(pb->maps, (size_t)cap * sizeof *m);
    if (!m) return 0;
    pb->maps = m;
    pb->cap = cap;
  }
  pb_map *m = &pb->maps[pb->n];
  memset(m, 0, sizeof *m);
  if (vmm) {
    if (same_process || !map_vmm(m, x, b, fds, me->dev)) return 0;
  } else if (tp_cuda_map_peer("peer buffer", me->dev, same_process, x->dev, x->base[b], x->ipc[b], &m->at,
                              &m->opened)) {
    return 0;
  }
  m->peer = r;
  m->id = vmm ? 0 : x->id[b];
  memcpy(m->ipc, x->ipc[b], 64);
  pb->n++;
  pb->allocs += want;
  *at = m->at;
  return 1;
}

/* The cuMem descriptors of this call (pb->myfd; rt_peerbuf_exchange closes
 * them) to every peer, and every peer's into pb->fds, where any rank
 * shares a buffer so (every rank sees the same records, so all take part
 * or none).  A failure leaves nothing received open; the caller's
 * agreement on what was mapped makes every rank give up alike. */
static bt_result pass_fds(rt_peerbufs *pb, const rt_peerbuf_self *me) {
  int any = 0, n = 0, mine[RT_FDPASS_MAX];
  int *want = calloc((size_t)me->nranks, sizeof *want);
  pid_t *pids = calloc((size_t)me->nranks, sizeof *pids);
  bt_result res = want && pids ? BT_OK : BT_ERR_NOMEM;
  const uint64_t ns = pb->recs[me->rank].pidns;
  for (int r = 0; r < me->nranks && !res; r++) {
    pids[r] = ns && pb->recs[r].pidns == ns ? pb->recs[r].pid : 0;   /* another namespace's pid means nothing here */
    for (int b = 0; b < PB_BUFS; b++) want[r] += pb->recs[r].kind[b] == PB_VMM ? pb->recs[r].pieces[b] : 0;
    any |= want[r] > 0;
  }
  for (int b = 0; b < PB_BUFS; b++)   /* the input's, then the output's, in order */
    for (int k = 0; k < PB_PIECES_MAX; k++)
      if (pb->myfd[b][k] >= 0) mine[n++] = pb->myfd[b][k];
  if (!res && any) {
    const uint64_t tag = ++pb->tag;
    if (!pb->fp) res = BT_ERR_UNSUPPORTED;   /* no listener here (rt_fdpass_open failed): the agreement gives up */
    for (int r = 0; r < me->nranks && !res && n; r++)
      if (r != me->rank) res = rt_fdpass_send(pb->fp, pb->recs[r].fdkey, r, tag, mine, n, PB_FD_TIMEOUT_MS);
    want[me->rank] = 0;
    if (!res) res = rt_fdpass_recv(pb->fp, me->nranks, want, pids, tag, pb->fds, PB_FD_TIMEOUT_MS);
  }
  free(want);
  free(pids);
  return res;
}

/* Whether the allocation (or run of cuMem allocations) of each buffer of
 * rank r's record x is seen (add 0), or adds them (add 1). */
static int rec_seen(rt_peerbufs *pb, int r, const pb_rec *x, int add) {
  for (int b = 0; b < PB_BUFS; b++) {
    const int vmm = x->kind[b] == PB_VMM;
    const uint64_t id = vmm ? run_of(x->piece[b], x->pieces[b]) : 0;
    if (add) seen_add(pb, r, vmm, id, x->ipc[b]);
    else if (!seen_has(pb, r, vmm, id, x->ipc[b])) return 0;
  }
  return 1;
}

/* rec_seen over every record of this exchange. */
static int recs_seen(rt_peerbufs *pb, int nranks, int add) {
  for (int r = 0; r < nranks; r++)
    if (!rec_seen(pb, r, &pb->recs[r], add) && !add) return 0;
  return 1;
}

/* Adds this rank's allocations of its record x to those its peers have
 * mapped (pb->lent), once each, where there is room. */
static void lend(rt_peerbufs *pb, const pb_rec *x) {
  for (int b = 0; b < PB_BUFS; b++) {
    const int vmm = x->kind[b] == PB_VMM;
    for (int k = 0; k < (vmm ? x->pieces[b] : 1); k++) {
      const pb_lent l = vmm ? (pb_lent){x->piece[b][k].base, x->piece[b][k].id} : (pb_lent){x->base[b], x->id[b]};
      int i = 0;
      while (i < pb->nlent && pb->lent[i].id != l.id) i++;
      if (l.id && i == pb->nlent && pb->nlent < PB_SEEN_MAX) pb->lent[pb->nlent++] = l;
    }
  }
}

/* Names in this rank's record x (x->gone) allocations of it that its peers
 * have mapped and that it has freed since (the driver no longer knows
 * them at their base, or knows another there): it looks at every one
 * where `all` (a call that brings a new allocation, as one does after
 * memory is handed back and taken again), else at PB_CHECK_EACH of them
 * from where the last look ended.  What does not fit the record waits in
 * pb->freed for the next exchange. */
static void find_freed(rt_peerbufs *pb, pb_rec *x, int all) {
  const int looks = all || pb->nlent < PB_CHECK_EACH ? pb->nlent : PB_CHECK_EACH;
  if (all) pb->next = 0;
  for (int k = 0; k < looks; k++) {
    if (pb->next >= pb->nlent) pb->next = 0;
    pb_lent *l = &pb->lent[pb->next];
    uint64_t base = 0;
    size_t size = 0;
    unsigned long long id = 0;
    if (tp_cuda_alloc_of((const void *)(uintptr_t)l->base, &base, &size, &id) && base == l->base && id == l->id) {
      pb->next++;
      continue;
    }
    if (pb->nfreed < PB_SEEN_MAX) pb->freed[pb->nfreed++] = l->id;
    *l = pb->lent[--pb->nlent];   /* the last one takes its place, looked at next */
  }
  x->ngone = pb->nfreed < PB_GONE_MAX ? pb->nfreed : PB_GONE_MAX;
  pb->nfreed -= x->ngone;
  memcpy(x->gone, pb->freed + pb->nfreed, (size_t)x->ngone * sizeof *x->gone);
}

/* Unmaps map i (closes this process's reference to its peer's memory) and
 * removes it from pb. */
static void unmap_at(rt_peerbufs *pb, int i) {
  pb_map *m = &pb->maps[i];
  if (m->vmm) {
    size_t bytes[PB_PIECES_MAX];
    for (int k = 0; k < m->pieces; k++) bytes[k] = (size_t)m->piece[k].size;
    tp_cuda_vmm_unmap(m->at, bytes, m->pieces, m->handle);
    free(m->piece);
    free(m->handle);
  } else if (m->opened) {
    cudaIpcCloseMemHandle(m->at);
    cudaGetLastError();
  }
  pb->allocs -= m->vmm ? m->pieces : 1;
  pb->maps[i] = pb->maps[--pb->n];
}

/* Map i of pb, of a peer that freed its allocation `id`: unmapped where
 * it holds that allocation alone (CUDA IPC), or where every cuMem piece
 * it maps side by side is freed now; else the piece is only marked freed,
 * and its memory stays held with the live ones beside it, which a graph
 * captured on them may still use.  1 where map i is gone. */
static int drop_from(rt_peerbufs *pb, int i, uint64_t id) {
  pb_map *m = &pb->maps[i];
  if (!id) return 0;
  if (!m->vmm) {
    if (m->id != id) return 0;
    unmap_at(pb, i);
    return 1;
  }
  for (int k = 0; k < m->pieces; k++)
    if (m->piece[k].id == id) {
      m->piece[k].id = 0;
      if (--m->live > 0) return 0;
      unmap_at(pb, i);
      return 1;
    }
  return 0;
}

/* What the records of this exchange say their ranks freed: every rank
 * forgets every allocation it has seen of such a rank (the next call on
 * any of them exchanges in full, and maps again what it must), every rank
 * alike, for all see the same records; and each unmaps its mappings of the
 * freed ones (drop_from), so that the memory goes back to its GPU. */
static void drop_freed(rt_peerbufs *pb, const rt_peerbuf_self *me) {
  for (int r = 0; r < me->nranks; r++) {
    const pb_rec *x = &pb->recs[r];
    if (x->ngone <= 0 || x->ngone > PB_GONE_MAX) continue;
    int kept = 0, closed = 0;
    for (int i = 0; i < pb->nseen; i++)
      if (pb->seen[i].rank != r) pb->seen[kept++] = pb->seen[i];
    pb->nseen = kept;
    for (int g = 0; g < x->ngone && r != me->rank; g++)
      for (int i = pb->n - 1; i >= 0; i--)
        if (pb->maps[i].peer == r) closed += drop_from(pb, i, x->gone[g]);
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: rank %d freed %d allocations its peers had mapped (%d mappings closed here)",
              me->rank, r, x->ngone, closed);
  }
}

/* An allgather of the exchange: through the ranks' shared-memory mailbox
 * where they have one, else the bootstrap's. */
static bt_result gather(rt_peerbufs *pb, struct rt_bootstrap *bs, void *data, size_t bytes) {
  return pb->box ? rt_shmbox_allgather(pb->box, data, bytes) : rt_bootstrap_allgather(bs, data, bytes);
}

/* The exchange proper (rt_peerbuf_exchange, under relaxed capture).  Where
 * every record names allocations an earlier exchange carried, every rank
 * has its peers' mapped already: no descriptors pass and no agreement is
 * needed (one allgather, where new allocations take two). */
static bt_result exchange(rt_peerbufs *pb, struct rt_bootstrap *bs, const rt_peerbuf_self *me, char **in,
                          char **out) {
  pb_rec *mine = &pb->recs[me->rank];
  memset(mine, 0, sizeof *mine);
  const char *why = NULL;
  mine->host = me->host;
  mine->pid = (int32_t)getpid();
  mine->pidns = rt_pid_namespace();
  mine->dev = me->dev;
  mine->fdkey = pb->fdkey;
  mine->key = me->key;
  mine->prog = me->prog;
  mine->ok = export_buf(pb, mine, PB_IN, in[me->rank], me->in_bytes, me->dev, &why) &&
             export_buf(pb, mine, PB_OUT, out[me->rank], me->out_bytes, me->dev, &why);
  find_freed(pb, mine, mine->ok && !rec_seen(pb, me->rank, mine, 0));
  CHECK(gather(pb, bs, pb->recs, sizeof *pb->recs));
  drop_freed(pb, me);
  for (int r = 0; r < me->nranks; r++)   /* every rank sees the same records: all refuse alike */
    if (pb->recs[r].key != pb->recs[0].key) {
      LOG_WARN(RT_SUB_RUNTIME, "rank %d: %s: rank %d's call is not rank 0's (a call made on some ranks only, in "
               "another order, or with its buffers registered on some ranks only): not run", me->rank, me->what, r);
      return BT_ERR_INVALID;
    }
  for (int r = 0; r < me->nranks; r++)   /* ranks that differ in placement, each running its own program */
    if (pb->recs[r].prog != pb->recs[0].prog) {
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: %s: rank %d runs another program than rank 0 (the ranks differ in "
               "placement): every rank runs the call without its peers' buffers", me->rank, me->what, r);
      return BT_ERR_UNSUPPORTED;
    }
  int ok = 1, bad = -1;
  for (int r = 0; r < me->nranks && ok; r++)
    if (!pb->recs[r].ok || pb->recs[r].host != me->host || !rec_sane(&pb->recs[r])) ok = 0, bad = r;
  if (!ok) {   /* every rank sees the same records: all give up alike */
    if (me->rank == 0 || bad == me->rank)
      LOG_INFO(RT_SUB_RUNTIME, "rank %d: rank %d's buffers of %s %s", me->rank, bad, me->what,
               bad == me->rank && why ? why : "cannot be mapped here");
    return BT_ERR_UNSUPPORTED;
  }
  const int fresh = !recs_seen(pb, me->nranks, 0);   /* the same on every rank */
  int32_t *mapped = calloc(me->nranks > 0 ? (size_t)me->nranks : 1, sizeof *mapped);
  if (!mapped) return BT_ERR_NOMEM;
  int here = !fresh || pass_fds(pb, me) == BT_OK;
  const int kept = pb->n;   /* the mappings before this exchange's */
  for (int r = 0; r < me->nranks && here; r++) {
    if (r == me->rank) continue;
    char *a = NULL, *b = NULL;
    const int *fd = &pb->fds[r * RT_FDPASS_MAX];
    const int nin = pb->recs[r].kind[PB_IN] == PB_VMM ? pb->recs[r].pieces[PB_IN] : 0;
    here = map_buf(pb, me, r, PB_IN, fd, &a) && map_buf(pb, me, r, PB_OUT, fd + nin, &b);
    if (here) {
      in[r] = a + pb->recs[r].off[PB_IN];
      out[r] = b + pb->recs[r].off[PB_OUT];
    }
  }
  for (int i = 0; i < me->nranks * RT_FDPASS_MAX; i++)   /* a mapping holds its own reference */
    if (pb->fds[i] >= 0) close(pb->fds[i]), pb->fds[i] = -1;
  if (!fresh) {   /* mappings are kept: each was found */
    free(mapped);
    if (here) return BT_OK;
    LOG_WARN(RT_SUB_RUNTIME, "rank %d: a peer's allocation an earlier exchange mapped is no longer mapped", me->rank);
    return BT_ERR_INTERNAL;
  }
  mapped[me->rank] = here;   /* a mapping can fail on one rank only: agree */
  bt_result res = gather(pb, bs, mapped, sizeof *mapped);
  for (int r = 0; r < me->nranks && !res; r++)
    if (!mapped[r]) {
      if (me->rank == 0 || r == me->rank)
        LOG_INFO(RT_SUB_RUNTIME, "rank %d: rank %d could not map its peers' buffers of %s", me->rank, r,
                 me->what);
      res = BT_ERR_UNSUPPORTED;
    }
  free(mapped);
  if (!res) {
    recs_seen(pb, me->nranks, 1);
    lend(pb, mine);
  } else {   /* not agreed: no rank counts this exchange's mappings as made, and nothing will unmap them later */
    while (pb->n > kept) unmap_at(pb, pb->n - 1);
  }
  return res;
}

bt_result rt_peerbuf_exchange(rt_peerbufs **pb, struct rt_bootstrap *bs, const rt_peerbuf_self *me, char **in,
                              char **out) {
  if (!*pb) {
    rt_peerbufs *p = calloc(1, sizeof *p);
    if (p) p->recs = calloc(me->nranks > 0 ? (size_t)me->nranks : 1, sizeof *p->recs);
    if (p) p->fds = malloc((me->nranks > 0 ? (size_t)me->nranks : 1) * RT_FDPASS_MAX * sizeof *p->fds);
    if (p) p->seen = malloc(PB_SEEN_MAX * sizeof *p->seen);
    if (p) p->lent = malloc(PB_SEEN_MAX * sizeof *p->lent);
    if (p) p->freed = malloc(PB_SEEN_MAX * sizeof *p->freed);
    if (!p || !p->recs || !p->fds || !p->seen || !p->lent || !p->freed) {
      if (p) free(p->recs), free(p->fds), free(p->seen), free(p->lent), free(p->freed);
      free(p);
      return BT_ERR_NOMEM;
    }
    for (int i = 0; i < me->nranks * RT_FDPASS_MAX; i++) p->fds[i] = -1;
    for (int b = 0; b < PB_BUFS; b++)
      for (int k = 0; k < PB_PIECES_MAX; k++) p->myfd[b][k] = -1;
    /* The listener for cuMem descriptors, under a key of this process's
     * own (its random number, apart for each communicator of it; its peers
     * learn the key from the records); without one, cuMem buffers are not
     * shared (every rank then gives up alike). */
    p->fdkey = rt_process_number() ^ (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    if (rt_fdpass_open(&p->fp, p->fdkey, me->rank)) p->fp = NULL;
    /* The ranks of one host exchange through shared memory from now on
     * (every rank alike: its making is collective and agreed). */
    bt_result e = rt_shmbox_open(&p->box, bs, me->rank, me->nranks, sizeof *p->recs,
                                 rt_param_int(RT_PARAM_BOOTSTRAP_TIMEOUT) * INT64_C(1000000000));
    if (e && e != BT_ERR_UNSUPPORTED) {
      rt_peerbufs_free(p);
      return e;
    }
    *pb = p;
  }
  /* Mapping is not a stream operation; a capture in the global mode
   * would refuse it, so this thread relaxes its mode meanwhile. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  bt_result res = exchange(*pb, bs, me, in, out);
  cudaThreadExchangeStreamCaptureMode(&mode);
  for (int b = 0; b < PB_BUFS; b++)   /* this call's exported descriptors: passed on, or not needed */
    for (int k = 0; k < PB_PIECES_MAX; k++)
      if ((*pb)->myfd[b][k] >= 0) close((*pb)->myfd[b][k]), (*pb)->myfd[b][k] = -1;
  if (!res)
    LOG_TRACE(RT_SUB_RUNTIME, "rank %d: the peers' buffers of %s exchanged (%d allocations mapped)", me->rank,
              me->what, (*pb)->n);
  return res;
}

int rt_peerbuf_count(const rt_peerbufs *pb) { return pb ? pb->allocs : 0; }

void rt_peerbufs_free(rt_peerbufs *pb) {
  if (!pb) return;
  while (pb->n) unmap_at(pb, pb->n - 1);
  rt_fdpass_close(pb->fp);
  rt_shmbox_close(pb->box);
  free(pb->maps);
  free(pb->recs);
  free(pb->fds);
  free(pb->seen);
  free(pb->lent);
  free(pb->freed);
  free(pb);
}
