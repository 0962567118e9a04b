/* sim_run.h -- `baton sim`'s engine: a program's steps timed on a described
 * system, run by the CPU executor's own scheduler (the same dependency,
 * slot and signal semantics), so that what it times is what it verifies. */
#ifndef SIM_RUN_H
#define SIM_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "ip_compute.h"
#include "ip_dtype.h"
#include "ir.h"
#include "rt_diag.h"
#include "rt_result.h"
#include "sim_spec.h"

/* Events (a step of a thread block for one tile) one simulation may time:
 * each keeps its finish time and what bound its start. */
#define SIM_MAX_EVENTS ((int64_t)1 << 23)
/* Events a timeline (--trace) holds at most; past it the file says so. */
#define SIM_MAX_TRACE_EVENTS ((int64_t)1 << 20)
/* Ports (GPU NVLink ports and network ports, each direction) the
 * utilization report lists. */
#define SIM_TOP_PORTS 4

typedef struct sim_opts {
  uint64_t bytes;          /* the call's size: bytes of the larger of a rank's input and output */
  ip_dtype dtype;
  const ip_dims *dims;     /* a fused program's dimensions (baton sim --dim): its compute steps and rows */
  int inplace;             /* 1, 0, or -1: the program's own */
  FILE *trace;             /* a Chrome-trace / Perfetto timeline of the call, or NULL */
} sim_opts;

/* What bound a step's start: its thread block's previous step (on its
 * lane), a dependency, a message, a free slot, a signal, a port busy with
 * other traffic, or nothing (the launch). */
typedef enum sim_bound { SIM_BY_START, SIM_BY_ORDER, SIM_BY_DEP, SIM_BY_MSG, SIM_BY_SLOT, SIM_BY_SIG, SIM_BY_PORT,
                         SIM_BY_COUNT } sim_bound;
extern const char *const sim_bound_name[SIM_BY_COUNT];

typedef struct sim_port_use { char name[48]; double busy_us, util; } sim_port_use;

typedef struct sim_report {
  double time_us;          /* predicted: the launch and the call's fixed cost, then the last step's finish */
  int64_t events, tiles, messages;
  double bytes_moved;      /* bytes every message and direct step carried */
  int path_steps;          /* the critical path: steps on it, and how each was bound */
  int path_by[SIM_BY_COUNT];
  double path_busy_us;     /* ... the time its steps ran (the rest is waiting and latency) */
  char path_end[96];       /* the last step: "rank R tb T step S (op) tile N" */
  sim_port_use ports[SIM_TOP_PORTS];   /* the busiest ports, busiest first */
  int nports;
} sim_report;

/* Times p (valid: ir_check) on system s for one call of o->bytes: the
 * CPU executor runs it (every tile, the postcondition checked on small
 * data) and each step it completes is timed: it starts when its thread
 * block's previous step on its lane, its dependencies, its message, its
 * free slot and its signals allow, takes its protocol's fixed cost plus
 * its bytes over the link, port or memory it uses (ports are shared: a
 * port busy with earlier traffic delays it), and a message arrives a
 * latency later.  BT_ERR_INVALID with the reason in diag for a program
 * the system cannot hold (more ranks than GPUs) or a size over
 * SIM_MAX_EVENTS; the executor's errors as ip_cpu_verify gives them. */
bt_result sim_run(const ir_prog *p, const sim_spec *s, const sim_opts *o, sim_report *rep, rt_diag *diag);

#endif
