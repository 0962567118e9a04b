/* cc_topo.h -- collective{}'s topology: which pairs of ranks a copy or a
 * reduce may connect.  Internal to compiler/. */
#ifndef CC_TOPO_H
#define CC_TOPO_H

#include <lua.h>
#include <stddef.h>

#include "cc.h"

/* Reads the topology at stack index `at` (collective{}'s topology field,
 * its keys already checked) into *tp for a program of nranks ranks: nil
 * (fully connected), {nodes = N, gpus = G} or {links = {{a, b}, ...}},
 * either with an optional name = "...".  A malformed topology raises a
 * Lua error that says what is wrong (a link to itself, a rank out of
 * range, a link listed twice, more than BATON_MAX_LINKS links, ...). */
void cc_topo_read(lua_State *L, cc_topo *tp, int nranks, int at);

/* Whether ranks a and b may exchange data: the same rank, or linked. */
int cc_topo_linked(const cc_topo *tp, int a, int b);

/* The topology in a few words for messages ("2 nodes x 4 GPUs", "ring of
 * 8 ranks: 8 links", "a list of 3 links"); returns buf. */
const char *cc_topo_describe(const cc_topo *tp, char *buf, size_t n);

void cc_topo_free(cc_topo *tp);

#endif
