/* Shared-memory reduce-scatter: every rank sums its own block straight from
 * every peer's input. */
#include "algos.h"
#include "kern.h"
#include "shm.h"
#include "common/dtype_internal.h"

static int start(coll_op *op) {
  hsr_comm *c = op->c;
  size_t all = op->count * dtype_size(op->dt) * (size_t)c->size;
  seg_desc d;
  if (!shm_expose(op, op->send, all, 0, all, &d, &shm_op_of(op)->src_in)) return 1;
  shm_slot(c, c->rank)->in = d;
  shm_publish(op, SHM_ARRIVE);
  op->phase = 1;
  return 1;
}

static int reduce(coll_op *op) {
  hsr_comm *c = op->c;
  size_t bytes = op->count * dtype_size(op->dt);
  int n = c->size, r = c->rank;
  if (!shm_wait_all(op, SHM_ARRIVE)) return 0;
  const void *ins[n];
  const char *bases[n];
  for (int j = 0; j < n; j++) {
    bases[j] = j == r ? shm_op_of(op)->src_in : shm_peer(op, &shm_slot(c, j)->in);
    if (!bases[j]) return 1;
  }
  /* Two-level: my block is m sub-blocks taken from scattered places. */
  const coll_place *pl = &op->place;
  int parts = pl->perm ? pl->perm_m : 1;
  size_t sub = bytes / (size_t)parts, subn = op->count / (size_t)parts;
  shm_bulk_begin(op);
  for (int i = 0; i < parts; i++) {
    size_t at = pl->perm ? (size_t)pl->perm[r * parts + i] * sub : (size_t)r * bytes;
    for (int j = 0; j < n; j++) ins[j] = bases[j] + at;
    coll_reduce(op->dt, op->redop, (char *)op->recv + (size_t)i * sub, ins, n, subn, n);
  }
  shm_bulk_end(op);
  return shm_bulk_done(op, (uint64_t)(n - 1) * bytes, 2);
}

static int advance(coll_op *op) { return op->phase == 1 ? reduce(op) : shm_finish_when_all_done(op); }

const coll_algo shm_reduce_scatter = {.name = "shm", .tp = &shm_transport, .start = start, .advance = advance, .model = &coll_model_shm};
