/* Shared-memory broadcast: the root publishes its buffer, every other rank
 * copies it; only the root waits, since its buffer must outlive every reader. */
#include "algos.h"
#include "kern.h"
#include "shm.h"
#include "common/dtype_internal.h"

static int start(coll_op *op) {
  hsr_comm *c = op->c;
  if (c->rank == op->root) {
    size_t bytes = op->count * dtype_size(op->dt);
    seg_desc d;
    if (!shm_expose(op, op->recv, bytes, 0, bytes, &d, &shm_op_of(op)->src_in)) return 1;
    shm_slot(c, c->rank)->in = d;
  }
  shm_publish(op, SHM_ARRIVE);
  op->phase = 1;
  return 1;
}

static int copy_from_root(coll_op *op) {
  hsr_comm *c = op->c;
  size_t bytes = op->count * dtype_size(op->dt);
  int n = c->size, root = op->root;
  if (c->rank == root) {
    coll_op_count(op, (uint64_t)(n - 1) * bytes, 0);
    op->phase = 2;
    return 1;
  }
  if (!shm_ready(op, SHM_ARRIVE, root)) {
    op->wait_peer = root;
    return 0;
  }
  const void *src = shm_peer(op, &shm_slot(c, root)->in);
  if (!src) return 1;
  coll_copy(op->recv, src, bytes, c->ctx->have_avx2);
  coll_op_count(op, 0, bytes);
  shm_publish(op, SHM_DONE);
  coll_op_finish(op);
  return 1;
}

/* The root, after every reader is done. */
static int root_wait(coll_op *op) {
  hsr_comm *c = op->c;
  for (int j = 0; j < c->size; j++)
    if (j != c->rank && !shm_ready(op, SHM_DONE, j)) {
      op->wait_peer = j;
      return 0;
    }
  shm_publish(op, SHM_DONE);
  coll_op_finish(op);
  return 1;
}

static int advance(coll_op *op) { return op->phase == 1 ? copy_from_root(op) : root_wait(op); }

const coll_algo shm_bcast = {.name = "shm", .tp = &shm_transport, .start = start, .advance = advance, .model = &coll_model_shm};
