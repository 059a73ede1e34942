/* Shared-memory transport (shm*.c), private: collectives among members on one
 * node. Every rank publishes where its input lives (a registered buffer, or a
 * staged copy of an unregistered one) and bumps its `arrive` counter; peers
 * then read it directly. `mid` is a barrier inside all-reduce; `done` tells
 * the owner that nobody reads its buffers any more. */
#ifndef HSR_COLL_SHM_H
#define HSR_COLL_SHM_H

#include "coll.h"

/* A shared-memory op (coll_op.priv). */
typedef struct shm_op {
  const void *src_in; /* what peers read (user buffer or staged copy) */
  void *tmp;          /* all-reduce: where my reduced slice goes */
} shm_op;
_Static_assert(sizeof(shm_op) <= COLL_OP_PRIV, "shm_op must fit coll_op.priv");

static inline shm_op *shm_op_of(coll_op *op) { return (shm_op *)op->priv; }

enum { SHM_ARRIVE, SHM_MID, SHM_DONE };

/* Member j's control slot for this communicator. */
static inline seg_slot *shm_slot(hsr_comm *c, int j) { return seg_slot_of(&c->ctx->seg, c->world[j], c->peer_slot[j]); }
static inline _Atomic uint64_t *shm_flag(seg_slot *s, int f) {
  return f == SHM_ARRIVE ? &s->arrive : f == SHM_MID ? &s->mid : &s->done;
}
/* Member j has reached flag f for this op. */
static inline int shm_ready(coll_op *op, int f, int j) {
  hsr_comm *c = op->c;
  return atomic_load_explicit(shm_flag(shm_slot(c, j), f), memory_order_acquire) >= c->peer_base[j] + op->seq;
}

/* Sets my flag f for this op and rings every member. */
void shm_publish(coll_op *op, int f);
/* 1 when every member has reached f; else names the first that has not. */
int shm_wait_all(coll_op *op, int f);
/* Describes `p` for the peers, staging it into the comm's scratch at `soff`
 * when it is not registered; 0 if the op failed. */
int shm_expose(coll_op *op, const void *p, size_t bytes, size_t soff, size_t scratch_total, seg_desc *d,
               const void **local);
/* A peer's buffer in my address space; NULL (op failed) if it cannot be mapped. */
const void *shm_peer(coll_op *op, const seg_desc *d);
/* The bulk copy or reduction of a phase runs without the context lock when the
 * progress thread runs it, so the caller's posts and tests do not wait behind
 * it: the op's buffers are the op's alone, and everything shared (peer
 * mappings, slots) is looked up before. Inline progress keeps the lock. */
void shm_bulk_begin(coll_op *op);
void shm_bulk_end(coll_op *op);
/* The bulk phase is over: count what moved and tell peers that I no longer
 * read their buffers. */
int shm_bulk_done(coll_op *op, uint64_t bytes, int next_phase);
/* Last phase: the op is finished once no peer reads my buffers any more. */
int shm_finish_when_all_done(coll_op *op);

#endif
