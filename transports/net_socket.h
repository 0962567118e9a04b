/* net_socket.h -- the TCP backend's wire format (net_socket.c; tests
 * build hostile peers from it). */
#ifndef NET_SOCKET_H
#define NET_SOCKET_H

#include <stdint.h>

#include "net_backend.h"
#include "rt_socket.h"

enum { NS_DATA = 1, NS_CREDIT = 2, NS_BYE = 3 };   /* frame types */
#define NS_ADDR_MAGIC  0x534e5442u    /* "BTNS" */
#define NS_HELLO_MAGIC 0x484e5442u   /* "BTNH" */
#define NS_VERSION 1u

/* Every frame starts with this. */
typedef struct ns_hdr {
  uint32_t type, conn, off, len, total, pad;
  uint64_t seq;                   /* DATA: the message; CREDIT: the value */
  uint64_t remote_off;
} ns_hdr;
_Static_assert(sizeof(ns_hdr) == 40, "40-byte frame header");

/* The first bytes on a new socket, from the rank that opened it. */
typedef struct ns_hello {
  uint32_t magic, version;
  int32_t from, to, sock, nsocks;
  unsigned char token[16];        /* the accepting rank's */
} ns_hello;

/* What a rank publishes (net_backend.h: NET_ADDR_BYTES). */
typedef struct ns_addr {
  uint32_t magic, version;
  int32_t rank, nsocks;
  unsigned char token[16];
  unsigned char addr[RT_SOCKADDR_WIRE];
} ns_addr;
_Static_assert(sizeof(ns_addr) <= NET_ADDR_BYTES, "socket address fits");

#endif
