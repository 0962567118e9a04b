/* rt_shmbox.c -- an allgather through shared memory for the ranks of one
 * host (rt_shmbox.h): a slot per rank and call parity, a sequence number
 * released after the record, peers polled until theirs carries the call's. */
#define _GNU_SOURCE
#include "rt_shmbox.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt_bootstrap.h"
#include "rt_log.h"
#include "rt_socket.h"
#include "rt_time.h"

#define BOX_HEAD 64                 /* a slot's sequence number, alone in its cache line */
#define BOX_SPIN_NS 1000000         /* polls without sleeping (a sleep of 20 us lasts 60-80 with Linux's
                                     * timer slack, more than a peer's usual lag), then 50 us sleeps */
#define BOX_ALIVE_NS 10000000       /* how often a waiting rank asks whether the peer's process lives */

struct rt_shmbox {
  int rank, nranks;
  size_t bytes, stride;             /* a record's most bytes; a slot's (BOX_HEAD + bytes, rounded) */
  size_t size;
  char *at;                         /* the mapping: slot (rank, parity) at (2 * rank + parity) * stride */
  int32_t *pid;                     /* each rank's process, where it shares this one's PID namespace (else 0) */
  uint64_t calls;                   /* allgathers made */
  int64_t timeout_ns;
};

/* What each rank says while the mailbox is made: rank 0 its name. */
typedef struct box_rec {
  char name[48];
  int32_t pid, ok;
  uint64_t pidns;             /* its PID namespace (0: unknown): another's pid means nothing here */
} box_rec;

static char *slot(const rt_shmbox *b, int r, uint64_t call) {
  return b->at + (2 * (size_t)r + (call & 1)) * b->stride;
}

/* Maps the mailbox of `size` bytes named name: created (rank 0) or
 * opened; NULL where it cannot be (errno kept for the log). */
static char *map_box(const char *name, size_t size, int create) {
  int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return NULL;
  struct stat st;
  int good = create ? ftruncate(fd, (off_t)size) == 0 : fstat(fd, &st) == 0 && (size_t)st.st_size == size;
  void *p = good ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (p == MAP_FAILED && create) shm_unlink(name);
  return p == MAP_FAILED ? NULL : p;
}

bt_result rt_shmbox_open(rt_shmbox **box, struct rt_bootstrap *bs, int rank, int nranks, size_t bytes,
                         int64_t timeout_ns) {
  *box = NULL;
  if (nranks < 1 || rank < 0 || rank >= nranks || bytes < 1 || bytes > RT_SHMBOX_MAX_BYTES) return BT_ERR_INVALID;
  rt_shmbox *b = calloc(1, sizeof *b);
  box_rec *recs = calloc((size_t)nranks, sizeof *recs);
  int32_t *oks = calloc((size_t)nranks, sizeof *oks);
  if (b) b->pid = calloc((size_t)nranks, sizeof *b->pid);
  bt_result res = b && recs && oks && b->pid ? BT_OK : BT_ERR_NOMEM;
  if (!res) {
    b->rank = rank;
    b->nranks = nranks;
    b->bytes = bytes;
    b->stride = (BOX_HEAD + bytes + 63) / 64 * 64;
    b->size = 2 * (size_t)nranks * b->stride;
    b->timeout_ns = timeout_ns;
    recs[rank].pid = (int32_t)getpid();
    recs[rank].pidns = rt_pid_namespace();
    if (rank == 0) {
      snprintf(recs[0].name, sizeof recs[0].name, "/baton-box-%d-%016llx", (int)getpid(),
               (unsigned long long)rt_process_number() ^ (unsigned long long)(uintptr_t)b);
      b->at = map_box(recs[0].name, b->size, 1);   /* fresh: every sequence number 0 */
      recs[0].ok = b->at != NULL;
    }
    res = rt_bootstrap_allgather(bs, recs, sizeof *recs);
    if (res && rank == 0 && b->at) shm_unlink(recs[0].name);   /* no rank will map it */
  }
  if (!res && rank != 0 && recs[0].ok) {
    recs[0].name[sizeof recs[0].name - 1] = '\0';
    b->at = map_box(recs[0].name, b->size, 0);
  }
  if (!res) {
    oks[rank] = b->at != NULL;
    if (!oks[rank])
      LOG_INFO(RT_SUB_BOOTSTRAP, "rank %d: the shared-memory mailbox of rank 0's process cannot be mapped here (%s): "
               "the bootstrap carries the exchanges", rank, strerror(errno));
    res = rt_bootstrap_allgather(bs, oks, sizeof *oks);   /* every rank has opened it, or given up */
    if (rank == 0 && b->at) shm_unlink(recs[0].name);
  }
  for (int r = 0; r < nranks && !res; r++) {
    if (!oks[r]) res = BT_ERR_UNSUPPORTED;
    b->pid[r] = recs[r].pidns && recs[r].pidns == recs[rank].pidns ? recs[r].pid : 0;
  }
  free(recs);
  free(oks);
  if (res) {
    rt_shmbox_close(b);
    return res;
  }
  *box = b;
  return BT_OK;
}

/* Whether process pid of this host is gone: no such process, or a zombie
 * its parent has not reaped yet (its state in /proc). */
static int gone(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;   /* no /proc: kill's answer stands */
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');   /* "pid (name) S ...": the name may hold anything */
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* Waits until rank q's slot carries call k: 0, or what went wrong. */
static bt_result await(const rt_shmbox *b, int q, uint64_t k) {
  const uint64_t *seq = (const uint64_t *)slot(b, q, k);
  const int64_t start = rt_time_ns();
  int64_t alive_at = start + BOX_ALIVE_NS;
  for (unsigned i = 0;; i++) {
    if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == k) return BT_OK;
    if (i % 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    const int64_t now = rt_time_ns();
    if (now - start > b->timeout_ns) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "rank %d: waited %.0f s for rank %d's record in the shared-memory mailbox (call %llu)",
               b->rank, (now - start) * 1e-9, q, (unsigned long long)k);
      return BT_ERR_TIMEOUT;
    }
    if (b->pid[q] > 0 && now >= alive_at) {
      alive_at = now + BOX_ALIVE_NS;
      if (gone(b->pid[q])) {
        LOG_WARN(RT_SUB_BOOTSTRAP, "rank %d: rank %d's process %d is gone (waiting in the shared-memory mailbox)",
                 b->rank, q, (int)b->pid[q]);
        return BT_ERR_REMOTE;
      }
    }
    if (now - start > BOX_SPIN_NS) {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    } else {
      sched_yield();   /* where the ranks outnumber the cores, the peer may need this one */
    }
  }
}

bt_result rt_shmbox_allgather(rt_shmbox *b, void *data, size_t bytes) {
  if (!b || (bytes && !data) || bytes > b->bytes) return BT_ERR_INVALID;
  const uint64_t k = ++b->calls;
  char *mine = slot(b, b->rank, k), *d = data;
  /* A peer reads this parity's slot of call k - 2 before it puts in its
   * record of call k - 1, which this rank has read: the slot is free. */
  memcpy(mine + BOX_HEAD, d + (size_t)b->rank * bytes, bytes);
  __atomic_store_n((uint64_t *)mine, k, __ATOMIC_RELEASE);
  for (int q = 0; q < b->nranks; q++) {
    if (q == b->rank) continue;
    CHECK(await(b, q, k));
    memcpy(d + (size_t)q * bytes, slot(b, q, k) + BOX_HEAD, bytes);
  }
  return BT_OK;
}

void rt_shmbox_close(rt_shmbox *b) {
  if (!b) return;
  if (b->at) munmap(b->at, b->size);
  free(b->pid);
  free(b);
}
