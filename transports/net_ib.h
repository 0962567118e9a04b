/* net_ib.h -- the verbs backend's test seam: which library it loads, and
 * the pure choices (device and port from BATON_IB_HCA, GID index) that
 * tests check without an InfiniBand/RoCE device. */
#ifndef NET_IB_H
#define NET_IB_H

#include <stddef.h>

#include "net_backend.h"

/* Loads `soname` instead of libibverbs.so.1 from now on, and forgets the
 * cached answer of unavailable() (tests: a library that does not exist,
 * the simulated device of tests/fake_verbs.c).  Call it only while no
 * verbs context is open: the next load replaces the functions they call. */
void net_ib_set_library(const char *soname);

enum { NET_IB_HCA_MAX = 32, NET_IB_NAME_MAX = 64 };

/* BATON_IB_HCA parsed: entries NAME (a prefix), =NAME (exact), each
 * optionally :PORT (1..255; 0 here: any port); `exclude` when the list
 * starts with ^ (the entries name what not to use). */
typedef struct net_ib_hca_entry {
  char name[NET_IB_NAME_MAX];
  int exact, port;
} net_ib_hca_entry;

typedef struct net_ib_hca_spec {
  int exclude, n;
  net_ib_hca_entry e[NET_IB_HCA_MAX];
} net_ib_hca_spec;

/* Parses spec ("" and NULL: no entries).  0, or -1 with a sentence naming
 * the spec and the bad entry in err. */
int net_ib_parse_hca(const char *spec, net_ib_hca_spec *out, char *err, size_t errlen);

/* One port of one device, as found on the host. */
typedef struct net_ib_port {
  const char *dev;
  int port, active;
} net_ib_port;

/* Picks the port to use among ports[0..n) (in the host's device order):
 * empty spec: the first active one; a list: entry by entry in the list's
 * order, the first active port the entry matches; ^list: the first active
 * port no entry matches.  Returns its index, or -1 with err set: a
 * malformed spec, "no device matches BATON_IB_HCA=...", "no active port
 * on ...". */
int net_ib_pick_port(const char *spec, const net_ib_port *ports, int n, char *err, size_t errlen);

/* A GID table entry; an empty entry is all zeros. */
enum { NET_IB_GID_IB, NET_IB_GID_ROCE_V1, NET_IB_GID_ROCE_V2, NET_IB_GID_UNKNOWN };
typedef struct net_ib_gid {
  unsigned char raw[16];
  int type;
} net_ib_gid;

/* The GID index to use among gids[0..n): want >= 0 (BATON_IB_GID_INDEX)
 * must name a non-empty entry; want = -1 takes the first RoCE v2 entry
 * holding an IPv4-mapped address (::ffff:a.b.c.d), else index 0.  Returns
 * the index, or -1 with err set. */
int net_ib_pick_gid(const net_ib_gid *gids, int n, int want, char *err, size_t errlen);

#endif
