/* ir_wire.h -- what a program's ranks exchange with one another, compared
 * across programs.  NCCL lets each rank of a call choose whether it runs
 * in place; where the runtime's choice for one differs from its choice
 * for the other, ranks of one call run different programs, which is
 * right only when every message, put, get and signal between them is the
 * same in both. */
#ifndef IR_WIRE_H
#define IR_WIRE_H

#include "ir.h"

/* Whether a and b exchange the same between ranks, so that each rank of
 * one call may run either: the same collective, ranks, protocol, chunks
 * per loop, slots and threads (and scratch chunks, which peers put into,
 * where either has direct steps); on every rank the same
 * thread blocks (send and receive peers, channel) in the same order, but
 * for those that stay on the rank (no connection, no step that crosses),
 * which may differ; and
 * in each, the same sequence of the steps that cross ranks (sends,
 * receives, puts, gets, signals, waits: their kind, count and peer; a put's
 * or get's place in the peer's memory).  Steps that stay on the rank may
 * differ.  A put or get that reaches a peer's input or output is never
 * the same: what it reaches depends on that peer's own placement.  The
 * runtime also checks that the two run with the same lanes (the thread
 * blocks that stay on the rank count there too). */
int ir_wire_same(const ir_prog *a, const ir_prog *b);

#endif
