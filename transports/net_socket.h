/* net_socket.h -- the TCP backend's wire format (net_socket.c; tests
 * build hostile peers from it).  Every integer travels little-endian: the
 * structs are filled in host order and turned with ns_*_wire before they
 * are sent, and back with the same call once they arrive (a no-op on
 * little-endian hosts). */
#ifndef NET_SOCKET_H
#define NET_SOCKET_H

#include <endian.h>
#include <stdint.h>

#include "net_backend.h"
#include "rt_socket.h"

enum { NS_DATA = 1, NS_CREDIT = 2, NS_BYE = 3 };   /* frame types */
#define NS_ADDR_MAGIC  0x534e5442u    /* "BTNS" */
#define NS_HELLO_MAGIC 0x484e5442u   /* "BTNH" */
#define NS_VERSION 2u
#define NS_ACK 0xa5u                  /* the accepting rank's one-byte answer to a greeting that asks for it */

/* Every frame starts with this. */
typedef struct ns_hdr {
  uint32_t type, conn, off, len, total, pad;
  uint64_t seq;                   /* DATA: the message; CREDIT: the value */
  uint64_t remote_off;
} ns_hdr;
_Static_assert(sizeof(ns_hdr) == 40, "40-byte frame header");

/* The first bytes on a new socket, from the rank that opened it.  With
 * ack set, the accepting rank answers a greeting it takes with the byte
 * NS_ACK before anything else; one it sheds or refuses is closed unread,
 * and the opening rank opens it again (net_socket.c). */
typedef struct ns_hello {
  uint32_t magic, version;
  int32_t from, to, sock, nsocks;
  unsigned char token[16];        /* the accepting rank's */
  int32_t ack, pad;
} ns_hello;

/* What a rank publishes (net_backend.h: NET_ADDR_BYTES). */
typedef struct ns_addr {
  uint32_t magic, version;
  int32_t rank, nsocks;
  unsigned char token[16];
  unsigned char addr[RT_SOCKADDR_WIRE];
  uint64_t proc;                  /* a random number of the rank's process (ranks of one process share it) */
} ns_addr;
_Static_assert(sizeof(ns_addr) <= NET_ADDR_BYTES, "socket address fits");

/* Swaps a struct between host order and wire order (its own inverse). */
static inline void ns_hdr_wire(ns_hdr *h) {
  h->type = htole32(h->type), h->conn = htole32(h->conn), h->off = htole32(h->off);
  h->len = htole32(h->len), h->total = htole32(h->total), h->pad = htole32(h->pad);
  h->seq = htole64(h->seq), h->remote_off = htole64(h->remote_off);
}
static inline void ns_hello_wire(ns_hello *h) {
  h->magic = htole32(h->magic), h->version = htole32(h->version);
  h->from = (int32_t)htole32((uint32_t)h->from), h->to = (int32_t)htole32((uint32_t)h->to);
  h->sock = (int32_t)htole32((uint32_t)h->sock), h->nsocks = (int32_t)htole32((uint32_t)h->nsocks);
  h->ack = (int32_t)htole32((uint32_t)h->ack), h->pad = (int32_t)htole32((uint32_t)h->pad);
}
static inline void ns_addr_wire(ns_addr *a) {
  a->magic = htole32(a->magic), a->version = htole32(a->version);
  a->rank = (int32_t)htole32((uint32_t)a->rank), a->nsocks = (int32_t)htole32((uint32_t)a->nsocks);
  a->proc = htole64(a->proc);
}

#endif
