/* sim_run.c -- timing a program's steps on a described system, event by
 * event as the CPU executor completes them. */
#include "sim_run.h"

#include <stdlib.h>
#include <string.h>

#include "ip_cpu.h"
#include "ir_geom.h"
#include "sim_fused.h"

const char *const sim_bound_name[SIM_BY_COUNT] = {"start", "its thread block", "a dependency", "a message",
                                                   "a free slot", "a signal", "a busy port"};

typedef struct stream_times { double *t; int64_t *ev; int64_t n, cap; } stream_times;
_Static_assert(sizeof(double) == sizeof(int64_t), "a stream's two arrays grow as one size");

/* A port's reservations: disjoint intervals [s, e), sorted, touching ones
 * merged.  Steps are timed in the executor's order, not in time order, so
 * a transfer takes the earliest gap long enough from its start on, which
 * may lie before transfers timed earlier. */
typedef struct port { double *s, *e; int64_t n, cap; double busy; } port;

typedef struct sim {
  const ir_prog *p;
  const sim_spec *s;
  const sim_opts *o;
  int n, lanes, nslots, esize, nodes, gpus, nics;
  int direct;              /* a direct program: one kernel whose every block works on each step, whole chunks */
  int proto;               /* the protocol it runs: its own, or Simple where the ranks span several nodes */
  double lane_gbs;         /* what one lane moves a second: a direct program's every block, else one block */
  double recv_gbs;         /* ... on a FIFO step that receives and sends nothing */
  int *tb0;                /* per rank: its first thread block's index among all */
  int64_t *ev0;            /* per thread block (all ranks): its first event's id */
  unsigned char *compute;  /* per thread block: ir_tb_compute */
  int64_t *last;           /* per thread block: a compute tb's last event (its steps run one after another) */
  unsigned char *gemm_on;  /* per rank: its GEMM has begun (the gemm kernel runs one GEMM over every gemm step) */
  int64_t ntiles, tile, cap;   /* real tiles per chunk, elements per tile and per chunk */
  double *fin, *begin;     /* per event: finish, and start once its waits were over */
  int64_t *pred;           /* per event: the event that bound its start, or -1 */
  unsigned char *by;       /* per event: a sim_bound */
  double *arrive, *taken;  /* per sending tb and slot: when message k arrived, when its receiver finished it */
  int64_t *arrive_ev, *taken_ev;
  port *ports;
  sim_fused fused;         /* a fused program's dimensions: the timed call's and the executor's */
  int nport;
  stream_times *streams;
  int nstreams;
  double tmax;
  int64_t last_ev, events, messages, trace_events;
  double moved;
  int failed;
  rt_diag *diag;
} sim;

static int64_t ev_id(const sim *m, int r, int t, int s, int64_t tile) {
  return m->ev0[m->tb0[r] + t] + (int64_t)s * m->ntiles + tile;
}

/* Elements of chunk-tile `tile` in the real call (the last is short). */
static int64_t tile_len(const sim *m, int64_t tile) {
  int64_t left = m->cap - tile * m->tile;
  return left < 0 ? 0 : left > m->tile ? m->tile : left;
}

/* Raises *start to t when t is later, noting why. */
static void bound(double *start, int64_t *pred, int *by, double t, int64_t ev, int why) {
  if (t > *start) { *start = t; *pred = ev; *by = why; }
}

/* The ports of a transfer from rank a to rank b, its bandwidth (GB/s),
 * latency, the network's per-message delay (extra) and the time a
 * message holds its ports beside its bytes (busy). */
static void route(const sim *m, int a, int b, int *pa, int *pb, double *bw, double *lat, double *extra, double *busy) {
  int na = a / m->gpus, nb = b / m->gpus;
  if (na == nb) {
    *pa = a;
    *pb = m->n + b;
    *bw = m->s->v[SIM_NVLINK_BW];
    *lat = m->s->v[SIM_NVLINK_LAT];
    *extra = *busy = 0;
    return;
  }
  int ka = a % m->gpus % m->nics, kb = b % m->gpus % m->nics;
  *pa = 2 * m->n + na * m->nics + ka;
  *pb = 2 * m->n + m->nodes * m->nics + nb * m->nics + kb;
  *bw = m->s->v[SIM_NET_BW] / (ka != kb ? m->s->v[SIM_NET_OVERSUB] : 1);
  *lat = m->s->v[SIM_NET_LAT];
  *extra = m->s->v[SIM_NET_STEP];
  *busy = m->s->v[SIM_NET_MSG];
}

/* Makes room for n elements of `size` bytes in each of the k arrays at
 * arrs (one capacity, *cap, for all of them), doubling; 0 when out of
 * memory (the arrays are as they were, or some larger). */
static int grow(void **arrs[], int k, size_t size, int64_t *cap, int64_t n) {
  if (n <= *cap) return 1;
  int64_t c = *cap ? 2 * *cap : 16;
  if (c < n) c = n;
  for (int i = 0; i < k; i++) {
    void *a = realloc(*arrs[i], (size_t)c * size);
    if (!a) return 0;
    *arrs[i] = a;
  }
  *cap = c;
  return 1;
}

/* The first index of p's intervals that ends after t. */
static int64_t first_after(const port *p, double t) {
  int64_t lo = 0, hi = p->n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (p->e[mid] <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The earliest time from t on when p is free for len. */
static double gap(const port *p, double t, double len) {
  for (int64_t i = first_after(p, t); i < p->n && p->s[i] < t + len; i++)
    if (p->e[i] > t) t = p->e[i];
  return t;
}

/* Reserves [t, t + len) on p (free: gap() said so); 0 when out of memory. */
static int reserve(port *p, double t, double len) {
  p->busy += len;
  int64_t i = first_after(p, t);
  int left = i > 0 && p->e[i - 1] >= t, right = i < p->n && p->s[i] <= t + len;
  if (left && right) {   /* fills the hole between two */
    p->e[i - 1] = p->e[i];
    memmove(p->s + i, p->s + i + 1, (size_t)(p->n - i - 1) * sizeof *p->s);
    memmove(p->e + i, p->e + i + 1, (size_t)(p->n - i - 1) * sizeof *p->e);
    p->n--;
    return 1;
  }
  if (left) { p->e[i - 1] = t + len; return 1; }
  if (right) { p->s[i] = t; return 1; }
  void **arrs[] = {(void **)&p->s, (void **)&p->e};
  if (!grow(arrs, 2, sizeof(double), &p->cap, p->n + 1)) return 0;
  memmove(p->s + i + 1, p->s + i, (size_t)(p->n - i) * sizeof *p->s);
  memmove(p->e + i + 1, p->e + i, (size_t)(p->n - i) * sizeof *p->e);
  p->s[i] = t;
  p->e[i] = t + len;
  p->n++;
  return 1;
}

/* Moves `bytes` from rank a to rank b from time t: both ports busy for
 * bytes / bandwidth (and, across the network, the proxies' time per
 * message, net.msg_us) in their first common gap, the lane no faster than
 * its blocks.  A lane slower than the ports sends from t to t + its own
 * time, the ports' share anywhere in that window (many lanes share a
 * port at once): only a gap later than the window delays it.  *end: the
 * sender is done; returns when the data has arrived.  *waited: the ports
 * delayed it. */
static double transfer(sim *m, int a, int b, double bytes, double eff, double t, double *end, int *waited) {
  int pa, pb;
  double bw, lat, extra, busy;
  route(m, a, b, &pa, &pb, &bw, &lat, &extra, &busy);
  double occ = busy + bytes / (bw * 1e3 * eff), lane = bytes / (m->lane_gbs * 1e3 * eff);
  double go = t;
  for (;;) {   /* the first time both ports are free */
    double g1 = gap(&m->ports[pa], go, occ), g2 = gap(&m->ports[pb], g1, occ);
    if (g2 == g1) { go = g1; break; }
    go = g2;
  }
  double own = occ > lane ? occ : lane;   /* its time with nothing in its way */
  *waited = go + occ > t + own;
  if (occ > 0 && (!reserve(&m->ports[pa], go, occ) || !reserve(&m->ports[pb], go, occ))) m->failed = 1;
  m->moved += bytes;
  *end = *waited ? go + occ : t + own;
  return *end + lat + extra;
}

static stream_times *stream_at(sim *m, int k) {
  if (k >= m->nstreams) {
    int n = k + 1 > 2 * m->nstreams ? k + 1 : 2 * m->nstreams;
    stream_times *ns = realloc(m->streams, (size_t)n * sizeof *ns);
    if (!ns) return NULL;
    memset(ns + m->nstreams, 0, (size_t)(n - m->nstreams) * sizeof *ns);
    m->streams = ns;
    m->nstreams = n;
  }
  return &m->streams[k];
}

/* A signal of stream k arrives at time t (event ev).  A wait needs a
 * count of its stream's signals, whichever tiles sent them (lanes send
 * them in any order): the arrivals are kept sorted, and a wait for N
 * signals takes the N-th earliest of those timed so far. */
static int sig_arrives(sim *m, int k, double t, int64_t ev) {
  stream_times *st = stream_at(m, k);
  if (!st) return 0;
  void **arrs[] = {(void **)&st->t, (void **)&st->ev};   /* double and int64_t: one size */
  if (!grow(arrs, 2, sizeof(double), &st->cap, st->n + 1)) return 0;
  int64_t i = st->n;
  while (i > 0 && st->t[i - 1] > t) { st->t[i] = st->t[i - 1]; st->ev[i] = st->ev[i - 1]; i--; }
  st->t[i] = t;
  st->ev[i] = ev;
  st->n++;
  return 1;
}

/* A data step's own time on its lane, a send's port apart: what it writes
 * locally at hbm.bw_gbs (a receive out of its slot into place, three
 * passes for a receive-reduce; a cpy two, a re three) and, in a FIFO
 * program, no less than one pass over its bytes (as the protocol carries
 * them, eff) at its lane's pace (lane_gbs): a lane receives, reduces,
 * writes and sends a tile in one pass.  A direct program's cpy and re use
 * every block of the GPU: its HBM time alone. */
static double fifo_pass(const sim *m, int op, unsigned fl, double bytes, double eff) {
  double hbm = m->s->v[SIM_HBM_BW] * 1e3, local = 0;
  if (fl & IR_F_RECV) local = bytes / hbm * ((fl & IR_F_RED) ? 3 : 1);
  else if (op == IR_OP_COPY) local = 2 * bytes / hbm;
  else if (op == IR_OP_REDUCE) local = 3 * bytes / hbm;
  if (m->direct) return local;
  double rate = (fl & IR_F_RECV) && !(fl & (IR_F_SEND | IR_F_RED)) ? m->recv_gbs : m->lane_gbs;
  double pass = bytes / (rate * 1e3 * eff);
  return pass > local ? pass : local;
}

static void trace_event(sim *m, const ip_cpu_event *e, const ir_step *st, double start, double fin) {
  if (!m->o->trace) return;
  if (m->trace_events++ >= SIM_MAX_TRACE_EVENTS) return;
  fprintf(m->o->trace, "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.4f,\"dur\":%.4f,"
          "\"args\":{\"step\":%d,\"tile\":%lld}}", m->trace_events > 1 ? ",\n" : "", ir_op_xml[st->op], e->r,
          e->t * m->lanes + (int)(e->tile % m->lanes), start, fin - start, e->s, (long long)e->tile);
}

/* How far back step s of a direct program's thread block looks for the
 * step it follows: the direct executor issues up to 4 puts to different
 * peers (each with its signal after it) as one operation, and reads up to
 * 4 peers' chunks (get, getr) in one pass, so such a step starts with the
 * first of its run. */
static int joined(const ir_tb *tb, int s) {
  int op = tb->steps[s].op, back = 1;
  if (op != IR_OP_PUT && op != IR_OP_GET && op != IR_OP_GETR) return 1;
  for (int n = 0; s - back >= 0 && n < 3; back++) {
    int prev = tb->steps[s - back].op;
    if (op == IR_OP_PUT ? prev != IR_OP_PUT && prev != IR_OP_SIG : prev != IR_OP_GET && prev != IR_OP_GETR) break;
    n += prev != IR_OP_SIG;
  }
  return back;
}

/* Whether step s of a direct program's thread block runs inside the
 * executor operation of the step before it: signals after signals or
 * after the puts they follow, waits after waits, a cpy or re right after
 * a data step (the executor's run: the same pass over the data), and the
 * later members of a joined run of puts or of peer reads (joined) -- one
 * barrier and flag pass for all of them. */
/* Whether op moves a chunk's data in the direct executor (a put, get,
 * getr, xchg, cpy or re): the operations a run of them shares one pass over. */
static int moves_data(int op) {
  return op == IR_OP_PUT || op == IR_OP_GET || op == IR_OP_GETR || op == IR_OP_XCHG || op == IR_OP_COPY ||
         op == IR_OP_REDUCE;
}

static int shares_op(const ir_tb *tb, int s) {
  int op = tb->steps[s].op, prev = tb->steps[s - 1].op;
  if (op == IR_OP_SIG) return prev == IR_OP_SIG || prev == IR_OP_PUT;
  if (op == IR_OP_WAIT) return prev == IR_OP_WAIT;
  if (op == IR_OP_COPY || op == IR_OP_REDUCE) return moves_data(prev);
  return joined(tb, s) > 1;
}

/* Whether step s of a direct program's thread block is a cpy that the
 * executor runs in the pass of a later data step: a local copy followed
 * by waits and then a put, get, getr, cpy or re (the executor moves the
 * waits before the copy, which then joins that step's run or copies: one
 * pass over the data, rt_direct.c).  Its time is that step's. */
static int copy_deferred(const ir_tb *tb, int s) {
  if (tb->steps[s].op != IR_OP_COPY || s + 1 >= tb->nsteps || tb->steps[s + 1].op != IR_OP_WAIT) return 0;
  int k = s + 1;
  while (k < tb->nsteps && tb->steps[k].op == IR_OP_WAIT) k++;
  if (k >= tb->nsteps) return 0;
  return moves_data(tb->steps[k].op);
}

static void on_step(void *ctx, const ip_cpu_event *e) {
  sim *m = ctx;
  if (m->failed) return;
  const ir_prog *p = m->p;
  int gt = m->tb0[e->r] + e->t;
  const ir_tb *tb = &p->gpus[e->r].tbs[e->t];
  const ir_step *st = &tb->steps[e->s];
  unsigned fl = ir_op_flags[st->op];
  int64_t id = ev_id(m, e->r, e->t, e->s, e->tile);
  double start = 0;
  int64_t pred = -1;
  int by = SIM_BY_START;
  if (m->compute[gt]) {   /* its steps run one after another, each over every tile */
    if (m->last[gt] >= 0) bound(&start, &pred, &by, m->fin[m->last[gt]], m->last[gt], SIM_BY_ORDER);
    m->last[gt] = id;
  } else {                /* tile t runs on lane t mod lanes, after that lane's previous step */
    int back = 1;
    if (m->direct) back = joined(tb, e->s);
    int64_t prev = e->s >= back ? id - back * m->ntiles
                   : e->s > 0 ? -1
                   : e->tile >= m->lanes ? ev_id(m, e->r, e->t, tb->nsteps - 1, e->tile - m->lanes) : -1;
    if (prev >= 0) bound(&start, &pred, &by, m->fin[prev], prev, SIM_BY_ORDER);
  }
  for (int k = 0; k < ir_step_ndeps(st); k++) {
    ir_dep d = ir_step_dep(st, k);
    int dg = m->tb0[e->r] + d.tb;
    if (m->compute[dg]) {   /* every tile of this tile's semaphore */
      const ir_step *cs = &p->gpus[e->r].tbs[d.tb].steps[d.step];
      int64_t first, count, stride;
      ir_sync_span(cs->sync, cs->sync_param, e->tile, m->ntiles, &first, &count, &stride);
      for (int64_t j = 0; j < count; j++) {
        int64_t de = ev_id(m, e->r, d.tb, d.step, first + j * stride);
        bound(&start, &pred, &by, m->fin[de], de, SIM_BY_DEP);
      }
    } else {
      int64_t de = ev_id(m, e->r, d.tb, d.step, e->tile);
      bound(&start, &pred, &by, m->fin[de], de, SIM_BY_DEP);
    }
  }
  if (e->from_r >= 0) {
    int64_t at = (int64_t)(m->tb0[e->from_r] + e->from_t) * m->nslots + e->rmsg % m->nslots;
    bound(&start, &pred, &by, m->arrive[at], m->arrive_ev[at], SIM_BY_MSG);
  }
  if (e->to_r >= 0 && e->smsg >= m->nslots) {
    int64_t at = (int64_t)gt * m->nslots + e->smsg % m->nslots;
    bound(&start, &pred, &by, m->taken[at], m->taken_ev[at], SIM_BY_SLOT);
  }
  if ((fl & IR_F_WAIT) && e->stream >= 0 && e->sig > 0) {
    stream_times *k = stream_at(m, e->stream);
    if (!k) { m->failed = 1; return; }
    if (k->n >= e->sig) bound(&start, &pred, &by, k->t[e->sig - 1], k->ev[e->sig - 1], SIM_BY_SIG);
  }
  /* its own time: the protocol's fixed cost, then what it moves */
  const sim_spec *s = m->s;
  int proto = m->proto;
  double eff = proto == IR_PROTO_LL ? s->v[SIM_LL_EFF] : proto == IR_PROTO_LL128 ? s->v[SIM_LL128_EFF] : s->v[SIM_SIMPLE_EFF];
  double fixed = (fl & IR_F_DIRECT) || m->direct ? s->v[SIM_DIRECT_STEP]   /* a direct program: executor operations */
                 : proto == IR_PROTO_LL ? s->v[SIM_LL_STEP] : proto == IR_PROTO_LL128 ? s->v[SIM_LL128_STEP] : s->v[SIM_SIMPLE_STEP];
  if (st->op == IR_OP_NOP) fixed = 0;
  if (st->op == IR_OP_GEMM && m->compute[gt]) {   /* one GEMM a rank and call: its cost once, then tile after tile */
    fixed = m->gemm_on[e->r] ? 0 : s->v[SIM_GEMM_US];
    m->gemm_on[e->r] = 1;
  }
  if (m->direct && e->s > 0 && shares_op(tb, e->s)) fixed = 0;   /* one executor operation: one fixed cost */
  /* A direct LL program's signals (a receiver's at its start, taken at
   * its sender's end: data one way) travel beside its data, whose link
   * latency the call's constant holds: no fixed cost, no latency. */
  const int ll_sync = m->direct && ir_proto_landed(proto) && (fl & (IR_F_SIG | IR_F_WAIT));
  if (ll_sync) fixed = 0;
  int deferred = m->direct && copy_deferred(tb, e->s);
  if (deferred) fixed = 0;
  int64_t elems = (fl & (IR_F_SIG | IR_F_WAIT)) ? 0 : (int64_t)st->cnt * tile_len(m, e->tile);
  double bytes = (double)elems * m->esize;
  double t = start + fixed, fin = t, arrival = 0;
  int waited = 0;
  if (fl & IR_F_COMP) {   /* gemvs computes straight into its send's slot */
    fin = t + sim_fused_compute_us(&m->fused, s, st, elems, m->esize);
    if (fl & IR_F_SEND) {
      double end;
      arrival = transfer(m, e->r, tb->send, bytes, eff, fin, &end, &waited);
      fin = end;
      m->messages++;
    }
  } else if (fl & IR_F_SWAP) {   /* xchg: the peer's chunks come here as this rank's go there, in one pass */
    double out_end, in_end;
    int wout = 0, win = 0;
    transfer(m, e->r, st->peer, bytes, eff, t, &out_end, &wout);
    double in = transfer(m, st->peer, e->r, bytes, eff * s->v[SIM_GET_EFF], t, &in_end, &win);
    fin = out_end > in ? out_end : in;
    waited = wout || win;
  } else if (fl & (IR_F_GET)) {   /* get, getr: the peer's chunks come here, added in the same pass */
    double end;
    fin = transfer(m, st->peer, e->r, bytes, eff * s->v[SIM_GET_EFF], t, &end, &waited);
  } else if (fl & IR_F_PUT) {
    double end;
    transfer(m, e->r, st->peer, bytes, eff, t, &end, &waited);
    fin = end;
  } else if (fl & IR_F_SIG) {
    int pa, pb;
    double bw, lat, extra, busy;
    route(m, e->r, st->peer, &pa, &pb, &bw, &lat, &extra, &busy);
    if (e->stream >= 0 && !sig_arrives(m, e->stream, ll_sync ? t : t + lat + extra, id)) { m->failed = 1; return; }
  } else {
    if (!deferred) fin += fifo_pass(m, st->op, fl, bytes, eff);
    if (fl & IR_F_SEND) {   /* the same pass: what it reads goes out as it is read */
      double end;
      arrival = transfer(m, e->r, tb->send, bytes, eff, t, &end, &waited);
      if (end > fin) fin = end;
      m->messages++;
    }
  }
  if (waited) by = SIM_BY_PORT;
  if (e->to_r >= 0) {
    int64_t at = (int64_t)gt * m->nslots + e->smsg % m->nslots;
    m->arrive[at] = arrival;
    m->arrive_ev[at] = id;
  }
  if (e->from_r >= 0) {   /* its slot is free once it has taken the message */
    int64_t at = (int64_t)(m->tb0[e->from_r] + e->from_t) * m->nslots + e->rmsg % m->nslots;
    m->taken[at] = fin;
    m->taken_ev[at] = id;
  }
  m->fin[id] = fin;
  m->begin[id] = start;
  m->pred[id] = pred;
  m->by[id] = (unsigned char)by;
  m->events++;
  if (fin >= m->tmax) { m->tmax = fin; m->last_ev = id; }
  trace_event(m, e, st, start, fin);
}

/* Frees what sim_setup allocated. */
static void sim_free(sim *m) {
  free(m->tb0); free(m->ev0); free(m->compute); free(m->last); free(m->gemm_on);
  free(m->fin); free(m->begin); free(m->pred); free(m->by);
  free(m->arrive); free(m->taken); free(m->arrive_ev); free(m->taken_ev);
  for (int k = 0; m->ports && k < m->nport; k++) { free(m->ports[k].s); free(m->ports[k].e); }
  free(m->ports);
  for (int k = 0; k < m->nstreams; k++) { free(m->streams[k].t); free(m->streams[k].ev); }
  free(m->streams);
}

/* Sizes the run: the call's elements per block for o->bytes, the real
 * tile (a slot of the program's protocol holds one tile of its largest
 * step's chunks) and the tiles per chunk; the events and their arrays.
 * *count: the executor's count, one element per real tile. */
static bt_result sim_setup(sim *m, int64_t *count) {
  const ir_prog *p = m->p;
  const sim_spec *s = m->s;
  m->n = p->ngpus;
  m->gpus = (int)s->v[SIM_GPUS];
  m->nodes = (int)s->v[SIM_NODES];
  m->nics = (int)s->v[SIM_NICS];
  m->direct = ir_prog_direct(p);
  int spans = m->n > m->gpus;   /* the ranks span several nodes: the runtime's network settings */
  m->proto = spans ? IR_PROTO_SIMPLE : (int)p->proto;   /* LL and LL128 flags have no head word a proxy sees */
  m->lane_gbs = m->direct ? s->v[SIM_BLOCKS] * s->v[SIM_BLOCK_BW]
                : m->proto == IR_PROTO_SIMPLE && s->v[SIM_SIMPLE_LANE] > 0 ? s->v[SIM_SIMPLE_LANE] : s->v[SIM_BLOCK_BW];
  m->recv_gbs = !m->direct && m->proto == IR_PROTO_SIMPLE && s->v[SIM_SIMPLE_RECV] > 0 ? s->v[SIM_SIMPLE_RECV] : m->lane_gbs;
  int most = 1;   /* lanes: the SPEC's, or as the runtime picks them */
  for (int r = 0; r < p->ngpus; r++) if (p->gpus[r].ntbs > most) most = p->gpus[r].ntbs;
  m->lanes = s->v[SIM_LANES] > 0 ? (int)s->v[SIM_LANES] : (int)s->v[SIM_BLOCKS] / most;
  if (m->lanes > 64 && s->v[SIM_LANES] <= 0) m->lanes = 64;
  if (spans && s->v[SIM_LANES] <= 0 && s->v[SIM_NET_LANES] > 0 && m->lanes > s->v[SIM_NET_LANES])
    m->lanes = (int)s->v[SIM_NET_LANES];
  if (m->lanes < 1 || m->direct) m->lanes = 1;
  if (m->n > m->nodes * m->gpus) {
    rt_diag_add(m->diag, "%s: %d ranks, but the system (%s) has %d nodes x %d GPUs", ir_prog_where(p), m->n, s->name,
                m->nodes, m->gpus);
    return BT_ERR_INVALID;
  }
  m->esize = ip_dtype_size[m->o->dtype];
  int aliased = ir_prog_aliased(p, m->o->inplace < 0 ? p->inplace : m->o->inplace);
  ir_geom g1;
  if (ir_geom_init(&g1, p, 0, 1, aliased)) {
    rt_diag_add(m->diag, "%s: its chunks do not fit its collective (run baton verify)", ir_prog_where(p));
    return BT_ERR_INVALID;
  }
  int64_t per = g1.elems[IR_BUF_INPUT] > g1.elems[IR_BUF_OUTPUT] ? g1.elems[IR_BUF_INPUT] : g1.elems[IR_BUF_OUTPUT];
  if (per < 1) per = 1;
  int64_t real = (int64_t)(m->o->bytes / (uint64_t)m->esize / (uint64_t)per);
  if (real < 1) real = 1;
  ir_geom g;
  if (ir_geom_init(&g, p, 0, real, aliased)) {
    rt_diag_add(m->diag, "%s: %llu bytes are more than baton addresses for this program", ir_prog_where(p),
                (unsigned long long)m->o->bytes);
    return BT_ERR_INVALID;
  }
  if (sim_fused_setup(&m->fused, p, &g, m->o->dims, m->esize, m->o->bytes, m->diag)) return BT_ERR_INVALID;
  double kb = m->proto == IR_PROTO_LL ? s->v[SIM_LL_TILE] : m->proto == IR_PROTO_LL128 ? s->v[SIM_LL128_TILE]
            : spans ? s->v[SIM_NET_SLOT] : s->v[SIM_SIMPLE_TILE];
  int64_t slot = (int64_t)(kb * 1024) / m->esize / ir_prog_max_cnt(p);
  m->tile = slot < 1 ? 1 : slot;
  /* as the runtime: smaller tiles, down to min_tile_kb, so that every lane has one */
  int64_t share = (g.cap + m->lanes - 1) / m->lanes, least = (int64_t)(s->v[SIM_MIN_TILE] * 1024) / m->esize;
  if (share < m->tile) m->tile = share > least ? share : least < m->tile ? least : m->tile;
  int64_t rows = sim_fused_tile(&g, m->tile, m->esize, m->proto == IR_PROTO_SIMPLE);   /* an interleaved output */
  if (rows < 1) {
    rt_diag_add(m->diag, "%s at %llu bytes: no tile of at most %lld elements keeps to the output's rows of %lld "
                "(interleave %s)", ir_prog_where(p), (unsigned long long)m->o->bytes, (long long)m->tile,
                (long long)g.seg, p->interleave);
    return BT_ERR_INVALID;
  }
  m->tile = rows;
  if (m->direct) m->tile = g.cap;   /* the direct executor: each operation over whole chunks, every block on it */
  if (m->tile < 1) m->tile = 1;
  m->cap = g.cap;
  *count = (real + m->tile - 1) / m->tile;
  ir_geom ge;
  if (ir_geom_init(&ge, p, 0, *count, aliased)) return BT_ERR_INVALID;
  m->ntiles = ge.cap > 0 ? ge.cap : 1;
  /* ports: NVLink out and in per rank, network out and in per node and port */
  m->nport = 2 * m->n + 2 * m->nodes * m->nics;
  int ntb = (int)ir_prog_ntbs(p);
  m->tb0 = calloc((size_t)m->n + 1, sizeof *m->tb0);
  m->ev0 = calloc((size_t)ntb + 1, sizeof *m->ev0);
  m->compute = calloc((size_t)ntb + 1, 1);
  m->last = malloc(((size_t)ntb + 1) * sizeof *m->last);
  m->gemm_on = calloc((size_t)m->n + 1, 1);
  m->ports = calloc((size_t)m->nport, sizeof *m->ports);
  if (!m->tb0 || !m->ev0 || !m->compute || !m->last || !m->gemm_on || !m->ports) return BT_ERR_NOMEM;
  int64_t nev = 0;
  for (int r = 0, k = 0; r < m->n; r++) {
    m->tb0[r] = k;
    for (int t = 0; t < p->gpus[r].ntbs; t++, k++) {
      m->ev0[k] = nev;
      m->compute[k] = (unsigned char)ir_tb_compute(&p->gpus[r].tbs[t]);
      m->last[k] = -1;
      nev += (int64_t)p->gpus[r].tbs[t].nsteps * m->ntiles;
      if (nev > SIM_MAX_EVENTS) {
        rt_diag_add(m->diag, "%s at %llu bytes: more than %lld step-tiles to time (SIM_MAX_EVENTS; %lld tiles of %lld "
                    "elements per chunk): a larger tile (the SPEC's tile_kb) makes fewer", ir_prog_where(p),
                    (unsigned long long)m->o->bytes, (long long)SIM_MAX_EVENTS, (long long)m->ntiles,
                    (long long)m->tile);
        return BT_ERR_INVALID;
      }
    }
  }
  m->nslots = (int)s->v[SIM_SLOTS] * m->lanes;
  size_t ns = (size_t)ntb * (size_t)m->nslots + 1;
  if (ns > (size_t)SIM_MAX_EVENTS) {   /* each slot of each connection keeps two times */
    rt_diag_add(m->diag, "%s: %d thread blocks x %d FIFO slots (slots x lanes) are more than the %lld a simulation "
                "keeps (SIM_MAX_EVENTS): fewer slots or lanes in the system description", ir_prog_where(p), ntb,
                m->nslots, (long long)SIM_MAX_EVENTS);
    return BT_ERR_INVALID;
  }
  m->fin = calloc((size_t)nev + 1, sizeof *m->fin);
  m->begin = calloc((size_t)nev + 1, sizeof *m->begin);
  m->pred = malloc(((size_t)nev + 1) * sizeof *m->pred);
  m->by = calloc((size_t)nev + 1, 1);
  m->arrive = calloc(ns, sizeof *m->arrive);
  m->taken = calloc(ns, sizeof *m->taken);
  m->arrive_ev = malloc(ns * sizeof *m->arrive_ev);
  m->taken_ev = malloc(ns * sizeof *m->taken_ev);
  if (!m->fin || !m->begin || !m->pred || !m->by || !m->arrive || !m->taken || !m->arrive_ev || !m->taken_ev)
    return BT_ERR_NOMEM;
  for (size_t i = 0; i < ns; i++) m->arrive_ev[i] = m->taken_ev[i] = -1;
  m->last_ev = -1;
  return BT_OK;
}

/* Names port k for the report. */
static void port_name(const sim *m, int k, char *out, size_t n) {
  if (k < m->n) snprintf(out, n, "rank %d NVLink out", k);
  else if (k < 2 * m->n) snprintf(out, n, "rank %d NVLink in", k - m->n);
  else {
    int j = k - 2 * m->n, in = j >= m->nodes * m->nics;
    if (in) j -= m->nodes * m->nics;
    snprintf(out, n, "node %d port %d %s", j / m->nics, j % m->nics, in ? "in" : "out");
  }
}

/* The critical path from the last step back, and the busiest ports. */
static void summarize(sim *m, sim_report *rep) {
  const ir_prog *p = m->p;
  for (int64_t id = m->last_ev, hops = 0; id >= 0 && hops <= m->events; hops++) {
    rep->path_steps++;
    rep->path_by[m->by[id]]++;
    rep->path_busy_us += m->fin[id] - m->begin[id];
    id = m->pred[id];
  }
  if (m->last_ev >= 0) {   /* which step is last */
    int r = 0, t = 0;
    while (r + 1 < m->n && m->ev0[m->tb0[r + 1]] <= m->last_ev) r++;
    while (t + 1 < p->gpus[r].ntbs && m->ev0[m->tb0[r] + t + 1] <= m->last_ev) t++;
    int64_t off = m->last_ev - m->ev0[m->tb0[r] + t];
    int s = (int)(off / m->ntiles);
    snprintf(rep->path_end, sizeof rep->path_end, "rank %d tb %d step %d (%s) tile %lld", r, t, s,
             ir_op_xml[p->gpus[r].tbs[t].steps[s].op], (long long)(off % m->ntiles));
  }
  for (int k = 0; k < m->nport; k++) {
    if (m->ports[k].busy <= 0) continue;
    int at = rep->nports < SIM_TOP_PORTS ? rep->nports++ : SIM_TOP_PORTS - 1;
    if (at == SIM_TOP_PORTS - 1 && rep->nports == SIM_TOP_PORTS && rep->ports[at].busy_us >= m->ports[k].busy) continue;
    port_name(m, k, rep->ports[at].name, sizeof rep->ports[at].name);
    rep->ports[at].busy_us = m->ports[k].busy;
    for (int j = at; j > 0 && rep->ports[j].busy_us > rep->ports[j - 1].busy_us; j--) {
      sim_port_use x = rep->ports[j];
      rep->ports[j] = rep->ports[j - 1];
      rep->ports[j - 1] = x;
    }
  }
  for (int j = 0; j < rep->nports; j++) rep->ports[j].util = rep->time_us > 0 ? rep->ports[j].busy_us / rep->time_us : 0;
}

bt_result sim_run(const ir_prog *p, const sim_spec *s, const sim_opts *o, sim_report *rep, rt_diag *diag) {
  memset(rep, 0, sizeof *rep);
  sim m;
  memset(&m, 0, sizeof m);
  m.p = p;
  m.s = s;
  m.o = o;
  m.diag = diag;
  int64_t count = 1;
  bt_result r = sim_setup(&m, &count);
  if (r == BT_ERR_NOMEM) rt_diag_add(diag, "%s: out of memory for the simulation's events", ir_prog_where(p));
  if (!r) {
    if (o->trace) fputs("{\"traceEvents\":[\n", o->trace);
    ip_cpu_opts eo = {.dtype = o->dtype, .op = IP_OP_SUM, .count = count, .tile = 1, .slots = m.nslots,
                      .inplace = o->inplace, .dims = &m.fused.exec, .on_step = on_step, .on_step_ctx = &m};
    ip_cpu_report er;
    r = ip_cpu_verify(p, &eo, &er, diag);
    if (!r && m.failed) {
      rt_diag_add(diag, "%s: out of memory for the simulation's signals and port reservations", ir_prog_where(p));
      r = BT_ERR_NOMEM;
    }
    if (o->trace) {
      if (m.trace_events > SIM_MAX_TRACE_EVENTS)
        fprintf(o->trace, ",\n{\"name\":\"(%lld more steps not shown: SIM_MAX_TRACE_EVENTS)\",\"ph\":\"i\",\"pid\":0,"
                "\"tid\":0,\"ts\":0,\"s\":\"g\"}", (long long)(m.trace_events - SIM_MAX_TRACE_EVENTS));
      fputs("\n]}\n", o->trace);
    }
    if (!r) {
      const double fixed = s->v[SIM_LAUNCH] + s->v[SIM_CALL] - (m.direct ? s->v[SIM_DIRECT_PDL] : 0);
      rep->time_us = (fixed > 0 ? fixed : 0) + m.tmax;
      rep->events = m.events;
      rep->tiles = m.ntiles;
      rep->messages = m.messages;
      rep->bytes_moved = m.moved;
      summarize(&m, rep);
    }
  }
  sim_free(&m);
  return r;
}
