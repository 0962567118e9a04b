/* test_net_ib.c -- the verbs backend without a device: BATON_IB_HCA parsing
 * and matching, GID selection, unavailable() and open() with a missing
 * library and with no device (no RDMA device exists where this runs; the
 * data path is not exercised here). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "net_ib.h"
#include "tap.h"

static char err[1024];

/* The port BATON_IB_HCA=spec picks among the ports below: "dev:port",
 * or the error. */
static const char *pick(const char *spec) {
  static const net_ib_port ports[] = {
    {"mlx5_0", 1, 1}, {"mlx5_0", 2, 0}, {"mlx5_1", 1, 1}, {"mlx5_10", 1, 1}, {"mlx4_0", 1, 0},
  };
  static char out[64];
  err[0] = 0;
  int i = net_ib_pick_port(spec, ports, 5, err, sizeof err);
  if (i < 0) return err;
  snprintf(out, sizeof out, "%s:%d", ports[i].dev, ports[i].port);
  return out;
}

static void test_parse(void) {
  net_ib_hca_spec s;
  ok(!net_ib_parse_hca("", &s, err, sizeof err) && s.n == 0 && !s.exclude, "empty spec: no entries");
  ok(!net_ib_parse_hca(NULL, &s, err, sizeof err) && s.n == 0, "NULL spec: no entries");
  ok(!net_ib_parse_hca("mlx5", &s, err, sizeof err) && s.n == 1 && !s.e[0].exact && s.e[0].port == 0 &&
     !strcmp(s.e[0].name, "mlx5"), "a prefix");
  ok(!net_ib_parse_hca("=mlx5_0:1, mlx5_1:2 ,mlx4", &s, err, sizeof err) && s.n == 3 && s.e[0].exact &&
     !strcmp(s.e[0].name, "mlx5_0") && s.e[0].port == 1 && !strcmp(s.e[1].name, "mlx5_1") && s.e[1].port == 2 &&
     !s.e[1].exact && !strcmp(s.e[2].name, "mlx4") && s.e[2].port == 0, "=exact, :port, blanks around entries");
  ok(!net_ib_parse_hca("^mlx5_0,=mlx5_1:255", &s, err, sizeof err) && s.exclude && s.n == 2 && s.e[1].exact &&
     s.e[1].port == 255, "^ excludes the whole list");
  static const struct { const char *spec, *want; } bad[] = {
    {"mlx5_0,,mlx5_1", "entry 2 ('') is empty"},
    {"mlx5_0,", "entry 2 ('') is empty"},
    {"^", "'^' excludes nothing"},
    {"mlx5_0:0", "port that is not a number in 1..255"},
    {"mlx5_0:256", "port that is not a number in 1..255"},
    {"mlx5_0:x", "entry 1 ('mlx5_0:x') has a port that is not a number in 1..255"},
    {"mlx5_0:", "port that is not a number"},
    {"mlx5_0:1:2", "port that is not a number"},
    {"mlx5_0:-1", "port that is not a number"},
    {"=", "names no device"},
    {":1", "names no device"},
    {"mlx5_0,^mlx5_1", "entry 2 ('^mlx5_1') has a '^'"},
    {"mlx5 0", "blank inside a device name"},
    {"a,==b", "entry 2 ('==b') has a '^', '='"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    int r = net_ib_parse_hca(bad[i].spec, &s, err, sizeof err);
    ok(r == -1, "malformed BATON_IB_HCA=%s is refused", bad[i].spec);
    ok_contains(err, bad[i].want, "  ... saying: %s", bad[i].want);
    char named[128];
    snprintf(named, sizeof named, "BATON_IB_HCA=%s:", bad[i].spec);
    ok_contains(err, named, "  ... naming the spec");
  }
  char many[512] = "";
  for (int i = 0; i < NET_IB_HCA_MAX + 1; i++) strcat(many, i ? ",d" : "d");
  ok(net_ib_parse_hca(many, &s, err, sizeof err) == -1, "more than %d entries are refused", NET_IB_HCA_MAX);
  ok_contains(err, "more than 32 entries", "  ... saying so");
  char longname[100];
  memset(longname, 'x', 80);
  longname[80] = 0;
  ok(net_ib_parse_hca(longname, &s, err, sizeof err) == -1, "an 80-character device name is refused");
  ok_contains(err, "too long", "  ... saying so");
}

static void test_pick(void) {
  ok_contains(pick(""), "mlx5_0:1", "empty spec: the first active port");
  ok(!strcmp(pick("mlx5_1"), "mlx5_1:1"), "a prefix: the first device it matches, in device order (%s)",
     pick("mlx5_1"));
  ok(!strcmp(pick("=mlx5_10"), "mlx5_10:1"), "=NAME matches exactly (%s)", pick("=mlx5_10"));
  ok(!strcmp(pick("mlx5_10,mlx5_0"), "mlx5_10:1"), "entries are tried in the list's order (%s)",
     pick("mlx5_10,mlx5_0"));
  ok(!strcmp(pick("mlx4,mlx5_1"), "mlx5_1:1"), "an entry with no active port gives way to the next (%s)",
     pick("mlx4,mlx5_1"));
  ok(!strcmp(pick("mlx5_0:1"), "mlx5_0:1"), ":port picks that port (%s)", pick("mlx5_0:1"));
  ok_contains(pick("mlx5_0:2"), "no active port on mlx5_0:2 down (BATON_IB_HCA=mlx5_0:2)",
              "a named port that is down: no active port");
  ok(!strcmp(pick("^mlx5_0"), "mlx5_1:1"), "^NAME excludes by prefix (%s)", pick("^mlx5_0"));
  ok(!strcmp(pick("^=mlx5_1,mlx5_0"), "mlx5_10:1"), "^ with =NAME excludes that device only (%s)",
     pick("^=mlx5_1,mlx5_0"));
  ok(!strcmp(pick("^mlx5_0:1"), "mlx5_1:1"), "^NAME:PORT excludes one port; the other is down (%s)",
     pick("^mlx5_0:1"));
  ok_contains(pick("^mlx5"), "no active port on mlx4_0:1 down (BATON_IB_HCA=^mlx5)",
              "excluding every active port: no active port, naming what is left");
  ok_contains(pick("mlx6"), "no device matches BATON_IB_HCA=mlx6 (ports here: mlx5_0:1, mlx5_0:2 down,",
              "no match: names the spec and the ports");
  ok_contains(pick("^mlx"), "no device matches BATON_IB_HCA=^mlx", "everything excluded: no device matches");
  ok_contains(pick("=mlx5"), "no device matches BATON_IB_HCA==mlx5", "=NAME is not a prefix");
  ok_contains(pick("mlx5_0:x"), "BATON_IB_HCA=mlx5_0:x: entry 1", "a malformed spec: the parse error");
  static const net_ib_port down[] = {{"mlx5_0", 1, 0}, {"mlx5_1", 1, 0}};
  ok(net_ib_pick_port("", down, 2, err, sizeof err) == -1, "every port down: no pick");
  ok_contains(err, "no active port on mlx5_0:1 down, mlx5_1:1 down", "  ... listing them");
  ok(net_ib_pick_port("", NULL, 0, err, sizeof err) == -1, "no ports at all: no pick");
  ok_contains(err, "no port found", "  ... saying so");
}

static void test_gid(void) {
  net_ib_gid g[6];
  memset(g, 0, sizeof g);
  static const unsigned char link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7};
  static const unsigned char v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  memcpy(g[0].raw, link_local, 16), g[0].type = NET_IB_GID_ROCE_V1;
  memcpy(g[1].raw, link_local, 16), g[1].type = NET_IB_GID_ROCE_V2;
  memcpy(g[2].raw, v4, 16), g[2].type = NET_IB_GID_ROCE_V1;
  memcpy(g[3].raw, v4, 16), g[3].type = NET_IB_GID_ROCE_V2;
  g[4].type = NET_IB_GID_UNKNOWN;   /* empty */
  memcpy(g[5].raw, v4, 16), g[5].type = NET_IB_GID_ROCE_V2;
  ok(net_ib_pick_gid(g, 6, -1, err, sizeof err) == 3, "auto: the first RoCE v2 GID with an IPv4 address");
  ok(net_ib_pick_gid(g, 3, -1, err, sizeof err) == 0, "auto without one: index 0");
  net_ib_gid ib = {{0xfe, 0x80}, NET_IB_GID_IB};
  ok(net_ib_pick_gid(&ib, 1, -1, err, sizeof err) == 0, "auto on an InfiniBand table: index 0");
  ok(net_ib_pick_gid(g, 6, 2, err, sizeof err) == 2, "an explicit index is taken as it is");
  ok(net_ib_pick_gid(g, 6, 4, err, sizeof err) == -1, "an explicit index of an empty entry is refused");
  ok_contains(err, "BATON_IB_GID_INDEX=4: that GID entry is empty", "  ... saying so");
  ok(net_ib_pick_gid(g, 6, 9, err, sizeof err) == -1, "an index past the table is refused");
  ok_contains(err, "BATON_IB_GID_INDEX=9: the port has 6 GID entries", "  ... saying so");
  ok(net_ib_pick_gid(g, 0, -1, err, sizeof err) == -1, "an empty table: no GID");
}

/* What open() does with the library set now: refuses, NULL context, and
 * logs `want` (read back from BATON_DEBUG_FILE). */
static void test_open_fails(const char *log, const char *want, const char *what) {
  static char pool[8192];
  net_open_args a = {.rank = 3, .nranks = 4, .pool = pool, .pool_bytes = sizeof pool, .nsocks = 1,
                     .deadline_ns = INT64_MAX};
  unsigned char addr[NET_ADDR_BYTES];
  void *ctx = (void *)1;
  bt_result r = net_ib_backend.open(&a, &ctx, addr);
  ok(r != BT_OK && ctx == NULL, "%s: open() fails cleanly (%s)", what, bt_result_str(r));
  char *text = tap_slurp(log);
  ok_contains(text, want, "%s: open() logs why", what);
  free(text);
}

int main(void) {
  char log[] = "/tmp/test_net_ib.XXXXXX";
  int fd = mkstemp(log);
  if (fd >= 0) close(fd);
  setenv("BATON_DEBUG_FILE", log, 1);   /* before any parameter is read */
  setenv("BATON_DEBUG", "WARN", 1);

  test_parse();
  test_pick();
  test_gid();

  ok(!strcmp(net_ib_backend.name, "ib") && net_ib_backend.open && net_ib_backend.connect && net_ib_backend.post &&
     net_ib_backend.credit && net_ib_backend.progress && net_ib_backend.pollfds && net_ib_backend.stats &&
     net_ib_backend.close && net_ib_backend.unavailable, "the backend table is complete");

  net_ib_set_library("libdoes-not-exist.so.1");
  const char *why = net_ib_backend.unavailable();
  ok_contains(why, "libdoes-not-exist.so.1 could not be loaded: ", "a missing library: unavailable() names it");
  ok(net_ib_backend.unavailable() == why, "the answer is cached");
  test_open_fails(log, "verbs: rank 3: the verbs backend cannot run: libdoes-not-exist.so.1 could not be loaded",
                  "a missing library");

  net_ib_set_library("libibverbs.so.1");
  void *dl = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  why = net_ib_backend.unavailable();
  if (!dl) {
    ok_contains(why, "libibverbs.so.1 could not be loaded", "no libibverbs here: unavailable() says so");
  } else if (!why) {
    printf("ok %d - # SKIP an InfiniBand/RoCE device with an active port is present\n", ++tap_n);
  } else {
    ok_contains(why, "no InfiniBand/RoCE device", "libibverbs but no device: unavailable() says so");
    test_open_fails(log, "verbs: rank 3: the verbs backend cannot run: no InfiniBand/RoCE device", "no device");
  }
  if (dl) dlclose(dl);
  unlink(log);
  return tap_done();
}
