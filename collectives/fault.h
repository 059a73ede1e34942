/* Failure detection and the verdict (fault.c), private to collectives/.
 *
 * A rank learns that a peer failed in one of five ways: a node peer's process
 * ends (its pidfd becomes readable) without having left hsr; the launcher says
 * so (PMIx events, where it sends them); a UCX endpoint fails; an op that
 * waits for the peer makes no progress for the timeout (then the node peers'
 * published state tells a stopped, busy or waiting rank apart); or another
 * rank's notice arrives (node peers: their control segment; other nodes: a
 * UCX message). The first verdict fails every communicator of the context,
 * is printed once, and is sent on to every rank, so every survivor names the
 * same culprit within milliseconds and tears down without waiting for anyone.
 */
#ifndef HSR_COLL_FAULT_H
#define HSR_COLL_FAULT_H

#include <stdint.h>

#include "common/fault_hook.h"
#include "seg.h"

typedef struct coll_ctx coll_ctx;
typedef struct hsr_req coll_op;

/* What happened to the culprit (seg_notice.kind). */
enum {
  FAULT_NONE = 0,
  FAULT_DIED,      /* its process ended without leaving hsr */
  FAULT_LEFT,      /* it left hsr (freed its communicators) while peers waited for it */
  FAULT_STOPPED,   /* alive but stopped (SIGSTOP, a debugger) */
  FAULT_SILENT,    /* no word from it for the timeout (remote, or its engine does not run) */
  FAULT_ABSENT,    /* alive, but not in the operation the others wait in */
  FAULT_TRANSPORT, /* its transfers failed */
};

typedef struct coll_fault {
  int *pidfd;                       /* per world rank: node peers' pidfds, -1 otherwise */
  uint8_t *gone;                    /* per world rank: FAULT_DIED / FAULT_LEFT once seen */
  uint64_t *gone_ns;                /* when */
  char (*why)[128];                 /* what was seen */
  _Atomic unsigned launcher_events; /* bumped on PMIx's thread */
  unsigned launcher_seen;
  uint64_t next_poll_ns, last_poll_ns;
  uint64_t gap_ns; /* between the last two polls: long when this rank itself was stopped */
  uint64_t *stop_ns; /* per world rank: since when a node peer waited for is seen stopped (0: not) */
  uint64_t next_stop_ns; /* the next look at a stopped peer's process state */
  int declared;    /* a verdict holds: every communicator has failed */
  hsr_status st;
  seg_notice verdict;
  fault_hook hook; /* HSR_FAULT */
  int *node_pids;      /* the node peers' pids, for the hook's killnode */
} coll_fault;

/* After seg_open: pidfds of node peers, HSR_FAULT, the launcher's events. */
hsr_status coll_fault_open(coll_ctx *x);
void coll_fault_close(coll_ctx *x);
/* Context lock held: the launcher's events, node peers' exits and notices,
 * and this rank's published state (beat, what it waits for). Cheap unless
 * `force` or 20 ms have passed. */
void coll_fault_poll(coll_ctx *x, uint64_t now, int force);
/* Context lock held, for an op that moved nothing: fails it (and everything
 * with it) when its peer is gone, its transfers failed or its timeout passed;
 * 1 if so. */
int coll_fault_check_op(coll_op *op, uint64_t now);
/* A transfer of `op` could not be posted: the verdict now (never from inside
 * a UCX callback); the op is failed either way. */
void coll_fault_transfer(coll_op *op, const char *why);
/* A transfer of `op` failed (a UCX callback: acted on in the next pass). */
void coll_fault_xfer_error(coll_op *op, const char *why);
/* Context lock held: world rank `wr`'s endpoint failed (UCX error callback). */
void coll_fault_peer_error(coll_ctx *x, int wr, const char *why);
/* Context lock held: a notice from another node (UCX message). */
void coll_fault_notice_in(coll_ctx *x, const seg_notice *n);
/* Context lock held: fails every communicator with verdict v (the first one
 * holds), prints it, tells every rank. */
void coll_fault_declare(coll_ctx *x, const seg_notice *v);
/* Takes the context lock: the earliest rank seen dead (its endpoint, its
 * pidfd), when no verdict holds yet, becomes the verdict, found `where`; 1
 * if one did. */
int coll_fault_declare_gone(coll_ctx *x, const char *where);
/* Teardown, after seg_bye and before the network's: waits, at
 * most HSR_COMM_TIMEOUT, until every node peer has left hsr or ended; one
 * that ended without leaving gets the verdict a run gives it (a rank alive
 * past the bound is no fault: it is still finishing). Context lock not held. */
void coll_fault_goodbye(coll_ctx *x);
/* HSR_FAULT at a post of `kind`. */
void coll_fault_hook(coll_ctx *x, const char *phase);

#endif
