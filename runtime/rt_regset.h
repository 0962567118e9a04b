/* rt_regset.h -- a communicator's registered windows as a list: the
 * window record, the lookup a call makes and the check that its memory is
 * still the allocation registered.  Registering itself, collective over
 * the communicator, is rt_register.c (baton_comm_register,
 * docs/RUNTIME.md, "Registered buffers"). */
#ifndef RT_REGSET_H
#define RT_REGSET_H

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

/* The window of the list holding [p, p + bytes), or NULL. */
const baton_window *rt_reg_find(const baton_window *list, const void *p, size_t bytes);

/* Whether w's memory is still the allocation it was registered in (not
 * freed, or freed and allocated again): a CUDA query of a few hundred
 * nanoseconds. */
int rt_reg_live(const baton_window *w);

/* Frees every window of *list (a communicator's, at its destruction) and
 * empties it. */
void rt_regs_free(baton_window **list);

#endif
