/* collectives internals: peer communicators, for modules above (ft/). Not
 * installed, not exported from libhsr.so.
 *
 * A peer context is a UCX worker of its own whose members are given by id
 * (0 to PEER_MAX - 1: processes of other jobs, such as rank i of every
 * replica group), with a verdict domain of its own: a member that dies or
 * stops fails the operation it was in on this context, and names it, but
 * never touches the job's world communicator. Members find each other's
 * addresses through a small-blob exchange the caller supplies (peer_xchg:
 * PMIx inside a job, peer_xchg_boot; a coordinator across jobs, which ft/
 * provides). Endpoints are made once per member and kept; a communicator is
 * only a membership view (ids and an epoch), so one per quorum is cheap.
 * Messages are tagged with the view's epoch and the operation's step (or
 * sequence number) and sender: nothing of an abandoned attempt matches a
 * later one. Every wait is bounded by the caller's timeout. One thread uses
 * a context at a time. */
#ifndef HSR_COLLECTIVES_PEER_INTERNAL_H
#define HSR_COLLECTIVES_PEER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PEER_MAX 1024       /* member ids: 0 to PEER_MAX - 1 */
#define PEER_MAX_CULPRITS 32 /* members one failure names: those that die at once are named at once */

typedef struct peer_ctx peer_ctx;

/* How members find each other: `put` publishes this member's address (once,
 * when the context opens), `get` returns member id's as last published
 * (*blob malloc'd; NULL when none is known yet). */
typedef struct peer_xchg {
  hsr_status (*put)(void *arg, const void *blob, size_t len);
  hsr_status (*get)(void *arg, int id, void **blob, size_t *len);
  void *arg;
} peer_xchg;

/* The exchange inside one job (its bootstrap, PMIx): member id = world rank;
 * `put` is collective (every rank's address gathered). Freed with
 * peer_xchg_boot_free after the context that uses it. */
hsr_status peer_xchg_boot(hsr_boot *boot, peer_xchg *out);
void peer_xchg_boot_free(peer_xchg *x);

/* What an operation did: ok, or the members it could not complete with
 * (ids) and a sentence. buf_taken: a request on the caller's buffer was
 * still pending when the operation ended (a member that stopped): the
 * buffer belongs to the context now (peer_allreduce: freed with free() once
 * that request ends; peer_send/peer_recv: the caller must neither free nor
 * reuse it). */
typedef struct peer_result {
  int ok;
  int n, culprit[PEER_MAX_CULPRITS];
  char why[320];
  uint64_t bytes_sent, bytes_recv;
  int buf_taken;
} peer_result;

/* A context for member `id` (its own UCP context and worker, endpoints
 * with peer error handling), its address published through `x` (copied).
 * noun: what a member is called in messages ("replica", "rank"). */
hsr_status peer_open(int id, const char *noun, const peer_xchg *x, peer_ctx **out);
/* Closes every endpoint (pending sends end), then the worker; bounded. */
void peer_close(peer_ctx *p);
/* An endpoint to member id from the address the exchange has for it; one
 * made before to another address is replaced. */
hsr_status peer_connect(peer_ctx *p, int id);
/* Closes the endpoint to a member that left (its pending sends end). */
void peer_disconnect(peer_ctx *p, int id);
int peer_connected(const peer_ctx *p, int id);

/* A communicator over members ids[0..n-1] (ascending; this member among
 * them) for `epoch`: no traffic, only the view. */
hsr_status peer_comm_create(peer_ctx *p, const int *ids, int n, int64_t epoch, hsr_comm **out);
void peer_comm_free(hsr_comm *c);

/* All-reduce of buf (count elements; buf from malloc, see buf_taken) over
 * the communicator for `step`, in place, bounded by timeout_s. res says what
 * happened; a member that fails tells the others at once (every culprit it
 * named), so they fail too and name the same. Returns HSR_OK unless hsr
 * itself failed (memory, arguments). */
hsr_status peer_allreduce(hsr_comm *c, int64_t step, void *buf, size_t count, hsr_dtype dt, hsr_redop op,
                          double timeout_s, peer_result *res);

/* Point to point: nbuf buffers to / from member `id`, tagged with (epoch,
 * seq + i, sender), bounded by timeout_s. */
hsr_status peer_send(peer_ctx *p, int id, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes, int nbuf,
                     double timeout_s, peer_result *res);
hsr_status peer_recv(peer_ctx *p, int id, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes, int nbuf,
                     double timeout_s, peer_result *res);
/* n receives from n distinct members at once (request k: nbuf buffers from
 * member id, tagged from seq), all posted before any is waited on so that
 * the transfers overlap; res[k] says what became of request k (a member
 * that fails ends only its own). Bounded by timeout_s. */
typedef struct peer_req {
  int id;
  int64_t seq;
  void *const *bufs;
  const size_t *bytes;
  int nbuf;
} peer_req;
hsr_status peer_recv_many(peer_ctx *p, int64_t epoch, const peer_req *rq, int n, double timeout_s, peer_result *res);

/* ---- device peer communicators (nccl_peer.c) ----
 * An NCCL communicator over a view's members, for reductions of device
 * memory across jobs. Its unique id travels through the view (no
 * bootstrap); a membership that only loses members is made from the last
 * one with ncclCommShrink (NCCL 2.27+) instead of a new rendezvous of
 * every member; one that gains a member is made anew. NCCL cannot say who
 * failed: a failed all-reduce revokes the communicator (ncclCommRevoke,
 * 2.28+) and is reported without culprits; the caller names them with the
 * view, which can. Built without NCCL every call but the plan returns
 * HSR_ERR_UNSUPPORTED. */
typedef struct peer_dev peer_dev;

/* Which members of `from` (ascending ids) are not in `to` (ascending): their
 * indices in `from` into exclude[] (n_from entries at most); the count, or -1
 * when `to` holds an id `from` lacks (a join: no shrink makes it). Pure. */
int peer_dev_shrink_plan(const int *from, int n_from, const int *to, int n_to, int *exclude);
/* 1 when built with NCCL and a CUDA device is usable here. */
int peer_dev_available(void);
/* The communicator for the view's members, on the calling thread's CUDA
 * device. *d NULL: a new one (the smallest member's unique id, through the
 * view: tagged seq). Else *d is replaced: shrunk when the view only lost
 * members (*how "shrunk"), otherwise made anew ("new"); a *d that failed
 * is shrunk with NCCL_SHRINK_ABORT. Every member of the view calls it. */
hsr_status peer_dev_update(peer_dev **d, hsr_comm *view, int64_t seq, double timeout_s, const char **how);
/* In place on device memory; res as peer_allreduce's, without culprits
 * when NCCL failed (the communicator is then revoked). */
hsr_status peer_dev_allreduce(peer_dev *d, void *buf, size_t count, hsr_dtype dt, hsr_redop rop, double timeout_s,
                              peer_result *res);
void peer_dev_free(peer_dev *d);

#ifdef __cplusplus
}
#endif
#endif
