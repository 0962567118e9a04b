/* rt_register.h -- registered windows: a buffer every rank of a
 * communicator registers together (baton_comm_register), which every peer
 * maps once, so that calls on such buffers run direct programs on the
 * ranks' own buffers without a copy and without exchanging anything per
 * call (docs/RUNTIME.md, "Registered buffers"). */
#ifndef RT_REGISTER_H
#define RT_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include "baton.h"
#include "ip_direct.h"

/* A registered window (baton.h's opaque baton_window).  Its number is
 * the count of the communicator's registrations before it, the same on
 * every rank (registration is collective). */
struct baton_window {
  baton_comm *comm;
  uint32_t id;
  char *base;                         /* this rank's buffer */
  size_t bytes;
  unsigned long long alloc;           /* CUDA's id of the allocation it lies in (a freed one is not reused) */
  char *peer[IP_WIN_MAX_RANKS];       /* every rank's buffer as this process reaches it (a process per GPU) */
  struct baton_window *next;
};

/* The window of c holding [p, p + bytes), or NULL. */
const baton_window *rt_reg_find(const baton_comm *c, const void *p, size_t bytes);

/* Whether w's memory is still the allocation it was registered in (not
 * freed, or freed and allocated again): a CUDA query of a few hundred
 * nanoseconds. */
int rt_reg_live(const baton_window *w);

/* Drops every window of c (at its destruction). */
void rt_regs_free(baton_comm *c);

#endif
