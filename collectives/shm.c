/* Shared-memory transport: the steps every intra-node algorithm shares and
 * the transport's table. The algorithms are shm_allgather.c,
 * shm_reduce_scatter.c, shm_allreduce.c, shm_bcast.c and shm_barrier.c. */
#include <pthread.h>

#include "algos.h"
#include "kern.h"
#include "shm.h"

void shm_publish(coll_op *op, int f) {
  hsr_comm *c = op->c;
  atomic_store_explicit(shm_flag(shm_slot(c, c->rank), f), c->peer_base[c->rank] + op->seq, memory_order_release);
  for (int j = 0; j < c->size; j++)
    if (j != c->rank) seg_ring(&c->ctx->seg, c->world[j]);
}

int shm_wait_all(coll_op *op, int f) {
  for (int j = 0; j < op->c->size; j++)
    if (!shm_ready(op, f, j)) {
      op->wait_peer = j;
      return 0;
    }
  op->wait_peer = -1;
  return 1;
}

int shm_expose(coll_op *op, const void *p, size_t bytes, size_t soff, size_t scratch_total, seg_desc *d,
               const void **local) {
  hsr_comm *c = op->c;
  seg_node *sg = &c->ctx->seg;
  if (bytes == 0 || seg_describe(sg, p, bytes, d)) {
    if (bytes == 0) *d = (seg_desc){.rank = c->ctx->rank, .seg = -1};
    *local = p;
    return 1;
  }
  void *s;
  hsr_status st = coll_scratch(c, scratch_total, &s);
  if (st != HSR_OK) {
    coll_op_fail(op, st, "staging %zu bytes: %s", bytes, hsr_last_error());
    return 0;
  }
  coll_copy((char *)s + soff, p, bytes, c->ctx->have_avx2);
  seg_describe(sg, (char *)s + soff, bytes, d);
  *local = (char *)s + soff;
  return 1;
}

const void *shm_peer(coll_op *op, const seg_desc *d) {
  if (d->seg < 0) return NULL;
  void *p = seg_peer_ptr(&op->c->ctx->seg, d);
  if (!p) coll_op_fail(op, HSR_ERR_TRANSPORT, "mapping rank %d's segment %d: %s", d->rank, d->seg, hsr_last_error());
  return p;
}

void shm_bulk_begin(coll_op *op) {
  if (!op->c->ctx->inline_progress) pthread_mutex_unlock(&op->c->ctx->mu);
}
void shm_bulk_end(coll_op *op) {
  if (!op->c->ctx->inline_progress) pthread_mutex_lock(&op->c->ctx->mu);
}

int shm_bulk_done(coll_op *op, uint64_t bytes, int next_phase) {
  coll_op_count(op, bytes, bytes);
  shm_publish(op, SHM_DONE);
  op->phase = next_phase;
  return 1;
}

int shm_finish_when_all_done(coll_op *op) {
  if (!shm_wait_all(op, SHM_DONE)) return 0;
  coll_op_finish(op);
  return 1;
}

static const coll_rows shm_rows = {
    [HSR_OP_ALLGATHER] = {{.algo = &shm_allgather}},           /* shm_allgather.c */
    [HSR_OP_REDUCE_SCATTER] = {{.algo = &shm_reduce_scatter}}, /* shm_reduce_scatter.c */
    [HSR_OP_ALLREDUCE] = {{.algo = &shm_allreduce}},           /* shm_allreduce.c */
    [HSR_OP_BCAST] = {{.algo = &shm_bcast}},                   /* shm_bcast.c */
    [HSR_OP_BARRIER] = {{.algo = &shm_barrier}},               /* shm_barrier.c */
};

const coll_transport shm_transport = {
    .name = "shm",
    .rows = &shm_rows,
    .start = coll_host_start,
    .test = coll_host_test,
    .wait = coll_host_wait,
    .mem_alloc = coll_host_mem_alloc,
    .mem_free = coll_host_mem_free,
    .set_stream = coll_host_set_stream,
    .free = coll_host_free,
};
