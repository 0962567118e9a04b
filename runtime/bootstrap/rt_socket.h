/* rt_socket.h -- a thin TCP layer (IPv4 and IPv6) for the bootstrap, and its fault-injection seam. */
#ifndef RT_SOCKET_H
#define RT_SOCKET_H

#include "rt_result.h"

#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rt_time.h"

/* One socket address, IPv4 or IPv6. */
typedef union rt_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in in4;
  struct sockaddr_in6 in6;
} rt_sockaddr;

enum {
  RT_SOCKADDR_WIRE = 32,    /* bytes of an address in the wire format */
  RT_SOCKADDR_STRLEN = 96   /* enough for "[v6%scope]:port" */
};

/* Writes "1.2.3.4:5" or "[fe80::1%eth0]:5" into buf and returns buf. */
const char *rt_socket_str(const rt_sockaddr *a, char *buf, size_t n);

/* Parses "host:port" or "[v6-address]:port" (host may be a name, resolved
 * with getaddrinfo, or a numeric address).  On failure logs a WARN that
 * starts with `what` (e.g. "BATON_COMM_ID=x") and returns BT_ERR_INVALID. */
bt_result rt_socket_parse(const char *s, const char *what, rt_sockaddr *out);

/* Picks the address of a local interface.  spec is a comma-separated list
 * of interface-name prefixes ("=name" matches exactly; a leading '^'
 * excludes the listed ones); "" means the first non-loopback interface that
 * is up, falling back to loopback.  IPv4 addresses are preferred over IPv6,
 * and global IPv6 over link-local.  family is AF_INET, AF_INET6 or
 * AF_UNSPEC.  ifname (IF_NAMESIZE bytes, may be NULL) receives the name.
 * No match logs a WARN listing the interfaces and returns BT_ERR_INVALID. */
bt_result rt_socket_pick_interface(const char *spec, int family, rt_sockaddr *out, char *ifname);

/* True for 127.0.0.0/8 and ::1. */
int rt_socket_is_loopback(const rt_sockaddr *a);

/* The fixed 32-byte wire format: family (4 or 6), 0, port (big-endian),
 * IPv6 scope id (big-endian), address (4 or 16 bytes), zeros.  unpack
 * returns BT_ERR_INVALID for anything else. */
void rt_socket_pack(const rt_sockaddr *a, unsigned char out[RT_SOCKADDR_WIRE]);
bt_result rt_socket_unpack(const unsigned char in[RT_SOCKADDR_WIRE], rt_sockaddr *out);

/* Opens a non-blocking listening socket bound to *addr; a zero port picks
 * a free one, and *addr receives the bound address. */
bt_result rt_socket_listen(rt_sockaddr *addr, int backlog, int *fd);

/* Connects to addr before the deadline (rt_time_ns() scale) or until
 * *abort_fd (may be -1) becomes readable.  The socket is returned
 * non-blocking.  Errors are logged with `what` naming the peer. */
bt_result rt_socket_connect(const rt_sockaddr *addr, int64_t deadline, int abort_fd,
                            const char *what, int *fd);

/* What one rt_socket_accept did. */
typedef enum {
  RT_ACCEPT_NONE,    /* nothing taken: none pending, or the one pending vanished (ECONNABORTED, EPROTO,
                        EPERM, a network error): poll again */
  RT_ACCEPT_NEW,     /* *fd is a new non-blocking connection, *peer its address */
  RT_ACCEPT_SHORT,   /* out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): nothing taken;
                        the caller frees descriptors or sheds one (rt_socket_shed) and pauses */
  RT_ACCEPT_BROKEN   /* the listening socket itself is unusable (logged) */
} rt_accept;

/* Accepts one pending connection; EINTR is retried.  peer may be NULL. */
rt_accept rt_socket_accept(int listen_fd, int *fd, rt_sockaddr *peer);

/* A spare descriptor (on /dev/null) kept so that a listener out of
 * descriptors can still take a connection off its queue: -1 on failure. */
int rt_socket_reserve(void);

/* Out of descriptors: closes *reserve, accepts one pending connection and
 * closes it at once, then reopens *reserve.  Returns 1 when a connection
 * was shed. */
int rt_socket_shed(int listen_fd, int *reserve);

/* Non-blocking I/O that retries EINTR.  Return the bytes moved (> 0), 0 when
 * the socket would block, or -1 with errno set; recv returns -1 with errno
 * ECONNRESET at end of stream.  send never raises SIGPIPE. */
ssize_t rt_socket_send(int fd, const struct iovec *iov, int iovcnt);
ssize_t rt_socket_recv(int fd, void *buf, size_t n);

/* Waits for events on fds until the deadline; EINTR is retried with the
 * remaining time.  Returns the number of ready fds, 0 when the deadline
 * passed (a negative deadline waits forever), -1 with errno on failure. */
int rt_socket_poll(struct pollfd *fds, int nfds, int64_t deadline);

/* A random number of this process, the same for every caller in it (not
 * 0): ranks publish it so that peers can tell which of them share a
 * process. */
uint64_t rt_process_number(void);

/* This process's PID namespace, as /proc names it (0 where it cannot
 * say): a pid another process publishes means something here only where
 * its namespace is this one. */
uint64_t rt_pid_namespace(void);

/* Fault injection for tests (SQLite's test-VFS idea): when max_io > 0 every
 * send and recv moves at most max_io bytes; when eagain_every > 0 every
 * eagain_every-th send or recv returns 0 (would block) without moving
 * anything, as a spurious wake-up does.  Zero turns each off.  Process-wide,
 * for tests only. */
void rt_socket_fault_set(size_t max_io, int eagain_every);

#endif
