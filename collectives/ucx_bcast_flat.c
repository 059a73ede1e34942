/* UCX flat broadcast: the root sends the buffer to every other rank. */
#include "algos.h"
#include "ucx.h"
#include "common/dtype_internal.h"

static int start(coll_op *op) {
  int n = op->c->size, r = op->c->rank;
  size_t bytes = op->count * dtype_size(op->dt);
  ucx_op_of(op)->step = 0;
  ucx_chunk *ch = ucx_one_chunk(op);
  if (!ch) return 1;
  uint64_t tag = ucx_tag(op, UCX_S_MISC, 0, 0);
  if (r == op->root) {
    for (int j = 0; j < n; j++) {
      if (j == r) continue;
      if (!ucx_send(ch, j, op->recv, bytes, tag)) return 1;
      coll_op_count_peer(op, j, bytes, -1, 0);
    }
  } else {
    if (!ucx_recv(ch, op->recv, bytes, tag)) return 1;
    coll_op_count_peer(op, -1, 0, op->root, bytes);
  }
  return 1;
}

static int advance(coll_op *op) {
  int n = op->c->size, r = op->c->rank;
  if (ucx_waiting(op, r == op->root ? ucx_mod(r + 1, n) : op->root)) return 0;
  coll_op_finish(op);
  return 1;
}

const coll_algo ucx_flat_bcast = {.name = "flat", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_flat};
