/* net_ib_select.c -- the verbs backend's "which device" half: loads
 * libibverbs at run time (dlopen; net_ib_set_library names another
 * library, as tests do), parses BATON_IB_HCA and matches it against every
 * device's ports, picks the GID, and answers whether the backend can run
 * here at all (net_ib_unavailable).  net_ib.c builds contexts, queue
 * pairs and the data path on the port chosen here, net_ib_side.c the TCP
 * side connections that set the queue pairs up (net_ib_int.h is what the
 * three share). */
#define _GNU_SOURCE
#include "net_ib_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_param.h"

enum { IB_MAX_DEVS = 64, IB_MAX_PORTS = 256 };

/* ---- libibverbs, loaded at run time ---- */

net_ib_fns net_ib_fn;

static struct {
  pthread_mutex_t mu;
  char soname[256];
  void *dl;
  int answered;
  char why[512];
} lib = {PTHREAD_MUTEX_INITIALIZER, "libibverbs.so.1", NULL, 0, ""};

void net_ib_set_library(const char *soname) {
  pthread_mutex_lock(&lib.mu);
  snprintf(lib.soname, sizeof lib.soname, "%s", soname);
  lib.dl = NULL;   /* a library loaded before stays loaded: its handles may be in use */
  lib.answered = 0;
  pthread_mutex_unlock(&lib.mu);
}

/* Loads the library and fills net_ib_fn (lib.mu held).  0, or -1 with why set. */
static int load_lib(char *why, size_t n) {
  if (lib.dl) return 0;
  void *dl = dlopen(lib.soname, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(why, n, "%s could not be loaded: %s", lib.soname, dlerror());
    return -1;
  }
#define X(ret, name, args)                                                          \
  if (!(net_ib_fn.name = (ret(*) args)dlsym(dl, "ibv_" #name))) {                   \
    snprintf(why, n, "%s has no ibv_" #name " (libibverbs too old?)", lib.soname);  \
    dlclose(dl);                                                                    \
    return -1;                                                                      \
  }
  IBV_FNS(X)
#undef X
  *(void **)&net_ib_fn.query_gid_ex = dlsym(dl, "_ibv_query_gid_ex");
  lib.dl = dl;
  return 0;
}

/* ibv_query_port as <infiniband/verbs.h> does it, with the library's
 * symbol from net_ib_fn: the provider's extended op where it has one. */
static int query_port(struct ibv_context *vc, int port, struct ibv_port_attr *a) {
  memset(a, 0, sizeof *a);
  struct verbs_context *x = verbs_get_ctx_op(vc, query_port);
  if (x) return x->query_port(vc, (uint8_t)port, a, sizeof *a);
  return net_ib_fn.query_port(vc, (uint8_t)port, (struct _compat_ibv_port_attr *)a);
}

/* ---- BATON_IB_HCA and the GID index: pure choices ---- */

int net_ib_parse_hca(const char *spec, net_ib_hca_spec *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!spec || !*spec) return 0;
  const char *s = spec;
  if (*s == '^') out->exclude = 1, s++;
  if (!*s) {
    snprintf(err, errlen, "BATON_IB_HCA=%s: '^' excludes nothing (expected ^NAME[,NAME...])", spec);
    return -1;
  }
  for (int k = 1;; k++) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    while (len && (*s == ' ' || *s == '\t')) s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
    char ent[160];
    snprintf(ent, sizeof ent, "%.*s", (int)(len < 150 ? len : 150), s);
    if (out->n == NET_IB_HCA_MAX) {
      snprintf(err, errlen, "BATON_IB_HCA=%s: more than %d entries", spec, NET_IB_HCA_MAX);
      return -1;
    }
    net_ib_hca_entry *e = &out->e[out->n];
    const char *name = ent + (ent[0] == '='), *colon = strchr(ent, ':');
    e->exact = ent[0] == '=';
    size_t nl = colon ? (size_t)(colon - name) : strlen(name);
    const char *bad = !len ? "is empty" : nl == 0 ? "names no device"
                      : nl >= NET_IB_NAME_MAX ? "has a device name too long"
                      : strcspn(name, "^=, \t") < nl ? "has a '^', '=' or blank inside a device name" : NULL;
    if (!bad && colon) {
      const char *p = colon + 1;
      int digits = 0;
      while (*p >= '0' && *p <= '9' && digits < 4) e->port = e->port * 10 + (*p++ - '0'), digits++;
      if (*p || !digits || e->port < 1 || e->port > 255) bad = "has a port that is not a number in 1..255";
    }
    if (bad) {
      snprintf(err, errlen, "BATON_IB_HCA=%s: entry %d ('%s') %s (expected [^][=]NAME[:PORT],...)", spec, k, ent,
               bad);
      return -1;
    }
    snprintf(e->name, sizeof e->name, "%.*s", (int)nl, name);
    out->n++;
    if (!end) return 0;
    s = end + 1;
  }
}

static int entry_match(const net_ib_hca_entry *e, const net_ib_port *p) {
  if (e->port && e->port != p->port) return 0;
  return e->exact ? !strcmp(e->name, p->dev) : !strncmp(e->name, p->dev, strlen(e->name));
}

/* Appends "dev:port" of the ports marked in pick (all: NULL) to buf. */
static void list_ports(char *buf, size_t n, const net_ib_port *ports, int np, const unsigned char *pick) {
  size_t k = strlen(buf);
  for (int i = 0, first = 1; i < np && k + 80 < n; i++) {
    if (pick && !pick[i]) continue;
    k += (size_t)snprintf(buf + k, n - k, "%s%.60s:%d%s", first ? "" : ", ", ports[i].dev, ports[i].port,
                          ports[i].active ? "" : " down");
    first = 0;
  }
}

int net_ib_pick_port(const char *spec, const net_ib_port *ports, int n, char *err, size_t errlen) {
  net_ib_hca_spec hs;
  if (net_ib_parse_hca(spec, &hs, err, errlen)) return -1;
  if (n > IB_MAX_PORTS) n = IB_MAX_PORTS;
  unsigned char cand[IB_MAX_PORTS];
  int ncand = 0;
  for (int i = 0; i < n; i++) {
    int hit = 0;
    for (int k = 0; k < hs.n && !hit; k++) hit = entry_match(&hs.e[k], &ports[i]);
    ncand += cand[i] = hs.n == 0 || hit != hs.exclude;
  }
  if (hs.n && !hs.exclude) {   /* entry by entry, in the list's order */
    for (int k = 0; k < hs.n; k++)
      for (int i = 0; i < n; i++)
        if (ports[i].active && entry_match(&hs.e[k], &ports[i])) return i;
  } else {
    for (int i = 0; i < n; i++)
      if (cand[i] && ports[i].active) return i;
  }
  size_t k;
  if (!n) {
    snprintf(err, errlen, "no port found on any InfiniBand/RoCE device");
  } else if (!ncand) {
    snprintf(err, errlen, "no device matches BATON_IB_HCA=%s (ports here: ", spec);
    list_ports(err, errlen, ports, n, NULL);
    if ((k = strlen(err)) + 1 < errlen) snprintf(err + k, errlen - k, ")");
  } else {
    snprintf(err, errlen, "no active port on ");
    list_ports(err, errlen, ports, n, cand);
    if (hs.n && (k = strlen(err)) < errlen) snprintf(err + k, errlen - k, " (BATON_IB_HCA=%s)", spec);
  }
  return -1;
}

int net_ib_pick_gid(const net_ib_gid *gids, int n, int want, char *err, size_t errlen) {
  static const unsigned char zero[16];
  if (want >= n) {
    snprintf(err, errlen, "BATON_IB_GID_INDEX=%d: the port has %d GID entries", want, n);
    return -1;
  }
  if (want >= 0 && !memcmp(gids[want].raw, zero, 16)) {
    snprintf(err, errlen, "BATON_IB_GID_INDEX=%d: that GID entry is empty", want);
    return -1;
  }
  if (want >= 0) return want;
  for (int i = 0; i < n; i++) {
    const unsigned char *r = gids[i].raw;
    if (gids[i].type == NET_IB_GID_ROCE_V2 && !memcmp(r, zero, 10) && r[10] == 0xff && r[11] == 0xff) return i;
  }
  if (n > 0) return 0;
  snprintf(err, errlen, "the port has no GID entries");
  return -1;
}

/* ---- finding the device ---- */

typedef struct ib_scan {
  struct ibv_device **list;
  int n;
  net_ib_port p[IB_MAX_PORTS];
  int dev[IB_MAX_PORTS];              /* index in list */
  char name[IB_MAX_DEVS][NET_IB_NAME_MAX];
} ib_scan;

/* Lists every port of every device (opening each briefly) and picks one
 * per BATON_IB_HCA: its index in s->p, or -1 with why set.  s->list is
 * the caller's to free. */
static int scan_pick(ib_scan *s, char *why, size_t n) {
  int ndev = 0;
  errno = 0;
  s->list = net_ib_fn.get_device_list(&ndev);
  if (!s->list || ndev <= 0) {
    snprintf(why, n, "no InfiniBand/RoCE device found%s%s%s", s->list ? "" : " (ibv_get_device_list: ",
             s->list ? "" : strerror(errno), s->list ? "" : ")");
    return -1;
  }
  char failed[256] = "";
  for (int d = 0; d < ndev && d < IB_MAX_DEVS; d++) {
    const char *name = net_ib_fn.get_device_name(s->list[d]);
    snprintf(s->name[d], NET_IB_NAME_MAX, "%s", name ? name : "?");
    struct ibv_context *vc = net_ib_fn.open_device(s->list[d]);
    struct ibv_device_attr da;
    int e = vc ? net_ib_fn.query_device(vc, &da) : errno;
    if (!vc || e) {
      size_t k = strlen(failed);
      snprintf(failed + k, sizeof failed - k, "%s%.60s: %s", k ? "; " : "", s->name[d], strerror(e));
      if (vc) net_ib_fn.close_device(vc);
      continue;
    }
    for (int port = 1; port <= da.phys_port_cnt && s->n < IB_MAX_PORTS; port++) {
      struct ibv_port_attr pa;
      if (query_port(vc, port, &pa)) continue;
      s->p[s->n] = (net_ib_port){s->name[d], port, pa.state == IBV_PORT_ACTIVE};
      s->dev[s->n++] = d;
    }
    net_ib_fn.close_device(vc);
  }
  if (!s->n && *failed) {
    snprintf(why, n, "no InfiniBand/RoCE device could be opened (%s)", failed);
    return -1;
  }
  return net_ib_pick_port(rt_param_str(RT_PARAM_IB_HCA), s->p, s->n, why, n);
}

const char *net_ib_unavailable(void) {
  pthread_mutex_lock(&lib.mu);
  if (!lib.answered) {
    lib.answered = 1;
    lib.why[0] = 0;
    ib_scan *s = calloc(1, sizeof *s);
    if (!s) snprintf(lib.why, sizeof lib.why, "out of memory");
    else if (!load_lib(lib.why, sizeof lib.why) && scan_pick(s, lib.why, sizeof lib.why) >= 0) lib.why[0] = 0;
    if (s && s->list) net_ib_fn.free_device_list(s->list);
    free(s);
  }
  const char *r = lib.why[0] ? lib.why : NULL;
  pthread_mutex_unlock(&lib.mu);
  return r;
}

/* ---- the port of one context ---- */

/* The port's GID index into d->gid_index and its GID into d->gid (RoCE:
 * per BATON_IB_GID_INDEX, each entry's type from _ibv_query_gid_ex where
 * the library has it, else from sysfs; InfiniBand: 0).  The index, or -1
 * with err set when none fits. */
static int pick_gid(net_ib_dev *d, int tbl_len, char *err, size_t errlen) {
  int n = d->link_layer == IBV_LINK_LAYER_ETHERNET ? (tbl_len < 1 ? 1 : tbl_len > 256 ? 256 : tbl_len) : 1;
  net_ib_gid g[256];
  memset(g, 0, sizeof g);
  for (int i = 0; i < n; i++) {
    g[i].type = NET_IB_GID_UNKNOWN;
    struct ibv_gid_entry e;
    union ibv_gid gid;
    if (net_ib_fn.query_gid_ex && !net_ib_fn.query_gid_ex(d->vc, (uint32_t)d->port, (uint32_t)i, &e, 0, sizeof e)) {
      memcpy(g[i].raw, e.gid.raw, 16);
      g[i].type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? NET_IB_GID_ROCE_V2
                  : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? NET_IB_GID_ROCE_V1 : NET_IB_GID_IB;
    } else if (!net_ib_fn.query_gid_ex && !net_ib_fn.query_gid(d->vc, (uint8_t)d->port, i, &gid)) {
      memcpy(g[i].raw, gid.raw, 16);
      char path[256], line[32] = "";
      snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", d->name, d->port, i);
      FILE *f = fopen(path, "r");
      if (f && fgets(line, sizeof line, f))
        g[i].type = strstr(line, "v2") ? NET_IB_GID_ROCE_V2 : strstr(line, "v1") ? NET_IB_GID_ROCE_V1 : g[i].type;
      if (f) fclose(f);
    }
  }
  int want = d->link_layer == IBV_LINK_LAYER_ETHERNET ? (int)rt_param_int(RT_PARAM_IB_GID_INDEX) : 0;
  int k = net_ib_pick_gid(g, n, want, err, errlen);
  if (k >= 0) memcpy(d->gid, g[k].raw, 16);
  return d->gid_index = k;
}

bt_result net_ib_open_port(net_ib_dev *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  if (errlen) *err = 0;
  ib_scan *s = calloc(1, sizeof *s);
  if (!s) return BT_ERR_NOMEM;
  int pick = scan_pick(s, err, errlen), e = 0;
  if (pick >= 0) {
    snprintf(d->name, sizeof d->name, "%s", s->p[pick].dev);
    d->port = s->p[pick].port;
    d->vc = net_ib_fn.open_device(s->list[s->dev[pick]]);
    e = errno;
  }
  if (s->list) net_ib_fn.free_device_list(s->list);
  free(s);
  if (pick < 0) return BT_ERR_UNSUPPORTED;
  struct ibv_device_attr da;
  struct ibv_port_attr pa;
  if (!d->vc || (e = net_ib_fn.query_device(d->vc, &da)) || (e = query_port(d->vc, d->port, &pa))) {
    snprintf(err, errlen, "%s failed: %s", d->vc ? "querying the device" : "ibv_open_device", strerror(e));
    return BT_ERR_SYSTEM;
  }
  d->max_qp_wr = da.max_qp_wr;
  d->max_cqe = da.max_cqe;
  d->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  d->mtu = pa.active_mtu;
  d->lid = pa.lid;
  if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && !d->lid) {
    snprintf(err, errlen, "the port has LID 0 (is a subnet manager running?)");
    return BT_ERR_UNSUPPORTED;
  }
  return pick_gid(d, pa.gid_tbl_len, err, errlen) < 0 ? BT_ERR_INVALID : BT_OK;
}
