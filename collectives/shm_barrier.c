/* Shared-memory barrier: publish `arrive`, wait for every member's. */
#include "algos.h"
#include "shm.h"

static int start(coll_op *op) {
  shm_publish(op, SHM_ARRIVE);
  op->phase = 1;
  return 1;
}

static int advance(coll_op *op) {
  if (!shm_wait_all(op, SHM_ARRIVE)) return 0;
  coll_op_finish(op);
  return 1;
}

const coll_algo shm_barrier = {.name = "shm", .tp = &shm_transport, .start = start, .advance = advance, .model = &coll_model_shm};
