/* An operation's life: created by a post, pushed onto the context's incoming
 * list without a lock, moved into its communicator's queue (seq assigned),
 * finished or failed by its transport, dequeued and published to its caller,
 * released. Also where its bytes are counted and its failure recorded. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"
#include "common/dtype_internal.h"

static const char *const op_names[HSR_OP_COUNT] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast",
                                                   "barrier"};

const char *op_name(hsr_op op) { return (unsigned)op < HSR_OP_COUNT ? op_names[op] : "?"; }

coll_op *coll_op_new(hsr_comm *c, hsr_op kind) {
  coll_op *op = calloc(1, sizeof *op);
  if (!op) return NULL;
  op->kind = kind;
  op->c = c;
  op->tp = c->tp;
  op->wait_peer = -1;
  op->timeout_s = c->timeout_s;
  atomic_init(&op->refs, 1);
  return op;
}

/* ---- queues ------------------------------------------------------------------ */

void coll_op_post(coll_op *op) {
  coll_ctx *x = op->c->ctx;
  coll_op *old = atomic_load_explicit(&x->incoming, memory_order_relaxed);
  do op->in_next = old;
  while (!atomic_compare_exchange_weak_explicit(&x->incoming, &old, op, memory_order_release, memory_order_relaxed));
}

void coll_op_enqueue(coll_op *op) {
  hsr_comm *c = op->c;
  op->seq = ++c->seq;
  if (c->tail)
    c->tail->next = op;
  else
    c->head = op;
  c->tail = op;
}

void coll_take_incoming(coll_ctx *x) {
  coll_op *l = atomic_exchange_explicit(&x->incoming, NULL, memory_order_acquire), *rev = NULL;
  while (l) { /* newest first: reverse to posting order */
    coll_op *n = l->in_next;
    l->in_next = rev;
    rev = l;
    l = n;
  }
  for (coll_op *op = rev, *n; op; op = n) {
    n = op->in_next;
    op->in_next = NULL;
    coll_op_enqueue(op);
  }
}

coll_op *coll_op_dequeue(hsr_comm *c) {
  coll_op *op = c->head;
  c->head = op->next;
  if (!c->head) c->tail = NULL;
  op->next = NULL;
  return op;
}

/* ---- completion -------------------------------------------------------------- */

void coll_op_skip(coll_op *op) {
  op->fin = 1;
  op->t_end = hsr_clock_ns();
  op->t_start = op->t_end;
  coll_op_publish(op);
}

void coll_op_finish(coll_op *op) {
  op->fin = 1;
  op->t_end = hsr_clock_ns();
}

void coll_op_publish(coll_op *op) { atomic_store_explicit(&op->done, 1, memory_order_release); }

/* The communicator's first failure is its reason from then on; a failure
 * that only reports the communicator's state does not replace it. */
void coll_op_fail(coll_op *op, hsr_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(op->err, sizeof op->err, fmt, ap);
  va_end(ap);
  op->st = st;
  coll_op_finish(op);
  hsr_comm *c = op->c;
  if (st != HSR_ERR_STATE && !c->failed) {
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s", op->err);
    c->failed = 1;
  }
  HSR_LOG_D("%s", op->err);
}

hsr_status coll_op_result(const coll_op *op) {
  if (op->st != HSR_OK) return hsr_error(op->st, "%s", op->err);
  return HSR_OK;
}

void coll_op_count_call(coll_op *op) {
  hsr_comm_counter *k = &op->c->counters[op->kind];
  uint64_t b = (uint64_t)op->count * dtype_size(op->dt);
  k->calls++;
  k->bytes_full += op->kind == HSR_OP_ALLGATHER || op->kind == HSR_OP_REDUCE_SCATTER ? b * (uint64_t)op->c->size
                   : op->kind == HSR_OP_BARRIER                                      ? 0
                                                                                     : b;
}

void coll_op_count(coll_op *op, uint64_t sent, uint64_t recv) {
  hsr_comm_counter *k = &op->c->counters[op->kind];
  k->bytes_sent += sent;
  k->bytes_recv += recv;
}

/* A peer context (no bootstrap) joins other jobs: every member is remote. */
int coll_remote(const hsr_comm *c, int j) {
  return c->ctx && (!c->ctx->boot || boot_node_of(c->ctx->boot, c->world[j]) != c->ctx->node);
}

void coll_op_count_peer(coll_op *op, int to, uint64_t sent, int from, uint64_t recv) {
  hsr_comm_counter *k = &op->c->counters[op->kind];
  k->bytes_sent += sent;
  k->bytes_recv += recv;
  if (to >= 0 && coll_remote(op->c, to)) k->fabric_sent += sent;
  if (from >= 0 && coll_remote(op->c, from)) k->fabric_recv += recv;
}

void coll_op_count_add(coll_op *op, const hsr_comm_counter *d) {
  hsr_comm_counter *k = &op->c->counters[op->kind];
  k->bytes_sent += d->bytes_sent;
  k->bytes_recv += d->bytes_recv;
  k->fabric_sent += d->fabric_sent;
  k->fabric_recv += d->fabric_recv;
}

/* ---- release ------------------------------------------------------------------- */

void coll_op_destroy(coll_op *op) {
  if (atomic_fetch_sub_explicit(&op->refs, 1, memory_order_acq_rel) > 1) return; /* a stream still holds it */
  if (op->tp && op->tp->op_fini) op->tp->op_fini(op);
  free(op);
}

void coll_op_release_locked(coll_op *op) {
  if (op->inflight > 0) /* cancelled, not yet called back: the transport frees it */
    op->orphaned = 1;
  else
    coll_op_destroy(op);
}

void coll_op_release(coll_op *op) {
  pthread_mutex_t *mu = op->c->mu;
  if (op->st == HSR_OK || !mu) { /* a finished op has no transfer in flight; only a failed one may */
    coll_op_destroy(op);
    return;
  }
  pthread_mutex_lock(mu);
  coll_op_release_locked(op);
  pthread_mutex_unlock(mu);
}

void coll_op_reap(coll_op *op) {
  if (op->fin && op->inflight == 0 && op->orphaned) coll_op_destroy(op);
}
