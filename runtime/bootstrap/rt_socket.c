/* rt_socket.c -- TCP sockets for the bootstrap: addresses, interfaces, non-blocking I/O, faults. */
#define _GNU_SOURCE  /* accept4 */
#include "rt_socket.h"
#include "rt_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


static socklen_t addr_len(const rt_sockaddr *a) {
  return a->sa.sa_family == AF_INET6 ? sizeof a->in6 : sizeof a->in4;
}

const char *rt_socket_str(const rt_sockaddr *a, char *buf, size_t n) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->in4.sin_addr, host, sizeof host);
    snprintf(buf, n, "%s:%u", host, ntohs(a->in4.sin_port));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->in6.sin6_addr, host, sizeof host);
    char scope[IF_NAMESIZE + 1] = "";
    if (a->in6.sin6_scope_id) {
      char name[IF_NAMESIZE];
      if (if_indextoname(a->in6.sin6_scope_id, name)) snprintf(scope, sizeof scope, "%%%s", name);
    }
    snprintf(buf, n, "[%s%s]:%u", host, scope, ntohs(a->in6.sin6_port));
  } else {
    snprintf(buf, n, "(no address)");
  }
  return buf;
}

bt_result rt_socket_parse(const char *s, const char *what, rt_sockaddr *out) {
  char host[256];
  const char *port;
  if (s[0] == '[') {                         /* [v6]:port */
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':') {
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: expected [IPv6-address]:port", what);
      return BT_ERR_INVALID;
    }
    size_t n = close - s - 1;
    if (n >= sizeof host) n = sizeof host - 1;
    memcpy(host, s + 1, n);
    host[n] = 0;
    port = close + 2;
  } else {                                   /* host:port, the last ':' */
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: expected host:port or [IPv6-address]:port", what);
      return BT_ERR_INVALID;
    }
    if (memchr(s, ':', colon - s)) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: an IPv6 address must be written in brackets, as [::1]:port", what);
      return BT_ERR_INVALID;
    }
    size_t n = colon - s;
    if (n >= sizeof host) n = sizeof host - 1;
    memcpy(host, s, n);
    host[n] = 0;
    port = colon + 1;
  }
  char *end;
  errno = 0;
  long p = strtol(port, &end, 10);
  if (!*port || *end || errno || p < 1 || p > 65535) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: port '%s' is not a number from 1 to 65535", what, port);
    return BT_ERR_INVALID;
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc || !res) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: cannot resolve host '%s': %s", what, host, gai_strerror(rc));
    return BT_ERR_INVALID;
  }
  struct addrinfo *pick = res;
  for (struct addrinfo *r = res; r; r = r->ai_next)   /* prefer IPv4, as interfaces do */
    if (r->ai_family == AF_INET) { pick = r; break; }
  memset(out, 0, sizeof *out);
  memcpy(out, pick->ai_addr, pick->ai_addrlen < sizeof *out ? pick->ai_addrlen : sizeof *out);
  freeaddrinfo(res);
  if (out->sa.sa_family == AF_INET) out->in4.sin_port = htons((uint16_t)p);
  else if (out->sa.sa_family == AF_INET6) out->in6.sin6_port = htons((uint16_t)p);
  else {
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: host '%s' is neither IPv4 nor IPv6", what, host);
    return BT_ERR_INVALID;
  }
  return BT_OK;
}

int rt_socket_is_loopback(const rt_sockaddr *a) {
  if (a->sa.sa_family == AF_INET) return (ntohl(a->in4.sin_addr.s_addr) >> 24) == 127;
  if (a->sa.sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
  return 0;
}

/* Does interface `name` match the spec (see rt_socket_pick_interface)? */
static int spec_match(const char *spec, const char *name) {
  int exclude = spec[0] == '^';
  int hit = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec + exclude);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t && !hit; t = strtok_r(NULL, ",", &save)) {
    if (t[0] == '=') hit = !strcmp(t + 1, name);
    else hit = !strncmp(t, name, strlen(t));
  }
  return exclude ? !hit : hit;
}

/* Preference of an interface address: 0 = unusable, higher is better. */
static int addr_rank(const struct ifaddrs *ifa, int family, int allow_loopback) {
  if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) return 0;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return 0;
  if (family != AF_UNSPEC && fam != family) return 0;
  if ((ifa->ifa_flags & IFF_LOOPBACK) && !allow_loopback) return 0;
  if (fam == AF_INET) return 3;
  const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
  return IN6_IS_ADDR_LINKLOCAL(a6) ? 1 : 2;
}

/* Finds the best address among interfaces accepted by `spec`. */
static const struct ifaddrs *best_interface(const struct ifaddrs *list, const char *spec,
                                            int family, int allow_loopback) {
  const struct ifaddrs *best = NULL;
  int best_rank = 0;
  for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
    if (*spec && !spec_match(spec, ifa->ifa_name)) continue;
    if (!*spec && !(ifa->ifa_flags & IFF_RUNNING)) continue;
    int r = addr_rank(ifa, family, allow_loopback);
    if (r > best_rank) { best = ifa; best_rank = r; }
  }
  return best;
}

bt_result rt_socket_pick_interface(const char *spec, int family, rt_sockaddr *out, char *ifname) {
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list)) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "getifaddrs failed: %s", strerror(errno));
    return BT_ERR_SYSTEM;
  }
  const struct ifaddrs *pick = *spec ? best_interface(list, spec, family, 1)
                                     : best_interface(list, "", family, 0);
  if (!pick && !*spec) pick = best_interface(list, "", family, 1);  /* loopback */
  if (!pick) {
    char names[512] = "";
    size_t n = 0;
    for (const struct ifaddrs *ifa = list; ifa && n + IF_NAMESIZE + 2 < sizeof names; ifa = ifa->ifa_next) {
      if (!ifa->ifa_addr || (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6))
        continue;
      char pat[IF_NAMESIZE + 2];
      snprintf(pat, sizeof pat, " %s", ifa->ifa_name);
      if (strstr(names, pat)) continue;
      n += snprintf(names + n, sizeof names - n, "%s", pat);
    }
    LOG_WARN(RT_SUB_BOOTSTRAP, "BATON_SOCKET_IFNAME=%s matches no interface that is up with an %s address "
             "(interfaces with addresses:%s)", *spec ? spec : "(default)",
             family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "IP", *names ? names : " none");
    freeifaddrs(list);
    return BT_ERR_INVALID;
  }
  memset(out, 0, sizeof *out);
  if (pick->ifa_addr->sa_family == AF_INET) memcpy(&out->in4, pick->ifa_addr, sizeof out->in4);
  else memcpy(&out->in6, pick->ifa_addr, sizeof out->in6);
  if (ifname) snprintf(ifname, IF_NAMESIZE, "%s", pick->ifa_name);
  freeifaddrs(list);
  return BT_OK;
}

static void put16(unsigned char *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static uint32_t get16(const unsigned char *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void rt_socket_pack(const rt_sockaddr *a, unsigned char out[RT_SOCKADDR_WIRE]) {
  memset(out, 0, RT_SOCKADDR_WIRE);
  if (a->sa.sa_family == AF_INET) {
    out[0] = 4;
    put16(out + 2, ntohs(a->in4.sin_port));
    memcpy(out + 8, &a->in4.sin_addr, 4);
  } else if (a->sa.sa_family == AF_INET6) {
    out[0] = 6;
    put16(out + 2, ntohs(a->in6.sin6_port));
    put32(out + 4, a->in6.sin6_scope_id);
    memcpy(out + 8, &a->in6.sin6_addr, 16);
  }
}

bt_result rt_socket_unpack(const unsigned char in[RT_SOCKADDR_WIRE], rt_sockaddr *out) {
  memset(out, 0, sizeof *out);
  uint32_t port = get16(in + 2);
  if (in[1] || port == 0) return BT_ERR_INVALID;
  if (in[0] == 4) {
    for (int i = 4; i < 8; i++) if (in[i]) return BT_ERR_INVALID;
    for (int i = 12; i < RT_SOCKADDR_WIRE; i++) if (in[i]) return BT_ERR_INVALID;
    out->in4.sin_family = AF_INET;
    out->in4.sin_port = htons(port);
    memcpy(&out->in4.sin_addr, in + 8, 4);
  } else if (in[0] == 6) {
    for (int i = 24; i < RT_SOCKADDR_WIRE; i++) if (in[i]) return BT_ERR_INVALID;
    out->in6.sin6_family = AF_INET6;
    out->in6.sin6_port = htons(port);
    out->in6.sin6_scope_id = get32(in + 4);
    memcpy(&out->in6.sin6_addr, in + 8, 16);
  } else {
    return BT_ERR_INVALID;
  }
  return BT_OK;
}

bt_result rt_socket_listen(rt_sockaddr *addr, int backlog, int *fd) {
  char s[RT_SOCKADDR_STRLEN];
  int f = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (f < 0) {
    LOG_WARN(RT_SUB_BOOTSTRAP, "cannot create a socket for %s: %s", rt_socket_str(addr, s, sizeof s), strerror(errno));
    return BT_ERR_SYSTEM;
  }
  int one = 1;
  if (addr->sa.sa_family == AF_INET6) setsockopt(f, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  /* A fixed port (BATON_COMM_ID) should be reusable right after a run. */
  setsockopt(f, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len = addr_len(addr);
  if (bind(f, &addr->sa, len) || listen(f, backlog) || getsockname(f, &addr->sa, &len)) {
    int e = errno;
    LOG_WARN(RT_SUB_BOOTSTRAP, "cannot listen on %s: %s%s", rt_socket_str(addr, s, sizeof s), strerror(e),
             e == EADDRNOTAVAIL ? " (not an address of this host)" : "");
    close(f);
    return e == EADDRNOTAVAIL || e == EADDRINUSE || e == EACCES ? BT_ERR_INVALID : BT_ERR_SYSTEM;
  }
  *fd = f;
  return BT_OK;
}

int rt_socket_poll(struct pollfd *fds, int nfds, int64_t deadline) {
  for (;;) {
    int ms = -1;
    if (deadline >= 0) {
      int64_t left = deadline - rt_time_ns();
      if (left <= 0) return 0;
      ms = (int)((left + 999999) / 1000000);
    }
    int n = poll(fds, nfds, ms);
    if (n >= 0 || errno != EINTR) {
      if (n == 0 && deadline >= 0 && rt_time_ns() < deadline) continue;  /* rounding */
      return n;
    }
  }
}

bt_result rt_socket_connect(const rt_sockaddr *addr, int64_t deadline, int abort_fd,
                            const char *what, int *fd) {
  char s[RT_SOCKADDR_STRLEN];
  rt_socket_str(addr, s, sizeof s);
  int f = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (f < 0) {
    int e = errno;
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: cannot create a socket: %s", what, strerror(e));
    errno = e;
    return BT_ERR_SYSTEM;
  }
  int rc;
  do rc = connect(f, &addr->sa, addr_len(addr)); while (rc && errno == EINTR);
  if (rc && errno == EINPROGRESS) {
    struct pollfd p[2] = {{.fd = f, .events = POLLOUT}, {.fd = abort_fd, .events = POLLIN}};
    int n = rt_socket_poll(p, abort_fd >= 0 ? 2 : 1, deadline);
    if (n == 0) {
      LOG_WARN(RT_SUB_BOOTSTRAP, "%s: timed out connecting to %s", what, s);
      close(f);
      errno = ETIMEDOUT;
      return BT_ERR_SYSTEM;
    }
    if (n < 0 || (abort_fd >= 0 && p[1].revents)) {
      int e = n > 0 ? EINTR : errno;
      if (n > 0) LOG_WARN(RT_SUB_BOOTSTRAP, "%s: aborted while connecting to %s", what, s);
      else LOG_WARN(RT_SUB_BOOTSTRAP, "%s: poll failed: %s", what, strerror(e));
      close(f);
      errno = e;
      return BT_ERR_SYSTEM;
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(f, SOL_SOCKET, SO_ERROR, &err, &el);
    errno = err;
    rc = err ? -1 : 0;
  }
  if (rc) {
    int e = errno;
    LOG_WARN(RT_SUB_BOOTSTRAP, "%s: cannot connect to %s: %s%s", what, s, strerror(e),
             e == ECONNREFUSED ? " (nothing listens there: has that process exited?)" : "");
    close(f);
    errno = e;
    return BT_ERR_SYSTEM;
  }
  int one = 1;
  setsockopt(f, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *fd = f;
  return BT_OK;
}

rt_accept rt_socket_accept(int listen_fd, int *fd, rt_sockaddr *peer) {
  *fd = -1;
  for (int tries = 0; tries < 64; tries++) {
    rt_sockaddr a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    int f = accept4(listen_fd, &a.sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (f >= 0) {
      int one = 1;
      setsockopt(f, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (peer) *peer = a;
      *fd = f;
      return RT_ACCEPT_NEW;
    }
    switch (errno) {
    case EINTR:                  /* a connection that died in the queue, or a firewall's veto: next */
    case ECONNABORTED: case EPROTO: case EPERM: case ENETDOWN: case ENOPROTOOPT: case EHOSTDOWN:
    case ENONET: case EHOSTUNREACH: case ENETUNREACH: case ETIMEDOUT:
      continue;
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return RT_ACCEPT_NONE;
    case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM:
      return RT_ACCEPT_SHORT;
    default:
      LOG_WARN(RT_SUB_BOOTSTRAP, "accept failed: %s", strerror(errno));
      return RT_ACCEPT_BROKEN;
    }
  }
  return RT_ACCEPT_NONE;
}

int rt_socket_reserve(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

int rt_socket_shed(int listen_fd, int *reserve) {
  if (*reserve < 0) *reserve = rt_socket_reserve();
  if (*reserve < 0) return 0;
  close(*reserve);
  int f;
  do f = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC); while (f < 0 && errno == EINTR);
  if (f >= 0) close(f);
  *reserve = rt_socket_reserve();
  return f >= 0;
}

static size_t fault_max_io;
static int fault_eagain_every, fault_calls;

void rt_socket_fault_set(size_t max_io, int eagain_every) {
  fault_max_io = max_io;
  fault_eagain_every = eagain_every;
  fault_calls = 0;
}

/* True when the fault seam asks this call to pretend it would block. */
static int fault_eagain(void) {
  return fault_eagain_every > 0 && __atomic_add_fetch(&fault_calls, 1, __ATOMIC_RELAXED) % fault_eagain_every == 0;
}

ssize_t rt_socket_send(int fd, const struct iovec *iov, int iovcnt) {
  if (fault_eagain()) return 0;
  struct iovec chopped[8];
  if (fault_max_io && iovcnt <= 8) {      /* keep at most fault_max_io bytes */
    size_t left = fault_max_io;
    int n = 0;
    for (int i = 0; i < iovcnt && left; i++) {
      chopped[n] = iov[i];
      if (chopped[n].iov_len > left) chopped[n].iov_len = left;
      left -= chopped[n].iov_len;
      n++;
    }
    iov = chopped;
    iovcnt = n;
  }
  struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt};
  for (;;) {
    ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t rt_socket_recv(int fd, void *buf, size_t n) {
  if (n == 0) return 0;
  if (fault_eagain()) return 0;
  if (fault_max_io && n > fault_max_io) n = fault_max_io;
  for (;;) {
    ssize_t r = recv(fd, buf, n, 0);
    if (r > 0) return r;
    if (r == 0) { errno = ECONNRESET; return -1; }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

static pthread_once_t number_once = PTHREAD_ONCE_INIT;
static uint64_t number;
static void number_pick(void) {
  if (getrandom(&number, sizeof number, 0) != (ssize_t)sizeof number)
    number = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)rt_time_ns();
  if (!number) number = 1;
}

uint64_t rt_process_number(void) {
  pthread_once(&number_once, number_pick);
  return number;
}

uint64_t rt_pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino ^ (uint64_t)st.st_dev << 32 : 0;
}
