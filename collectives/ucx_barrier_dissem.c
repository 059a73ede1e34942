/* UCX dissemination barrier: in round k every rank sends a zero-byte message
 * to rank + 2^k and waits for the one from rank - 2^k. */
#include "algos.h"
#include "ucx.h"

enum { P_POST = 1, P_WAIT };

static int start(coll_op *op) {
  ucx_op_of(op)->step = 0;
  if (!ucx_one_chunk(op)) return 1;
  op->phase = P_POST;
  return 1;
}

static int post(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  int n = op->c->size, r = op->c->rank, dist = 1 << u->step;
  if (dist >= n) {
    coll_op_finish(op);
    return 1;
  }
  uint64_t tag = ucx_tag(op, UCX_S_MISC, u->step + 1, 0);
  if (!ucx_recv(u->chunks, &u->cur, 0, tag) || !ucx_send(u->chunks, ucx_mod(r + dist, n), &u->cur, 0, tag)) return 1;
  op->phase = P_WAIT;
  return 1;
}

static int advance(coll_op *op) {
  if (op->phase == P_POST) return post(op);
  ucx_op *u = ucx_op_of(op);
  if (ucx_waiting(op, ucx_mod(op->c->rank - (1 << u->step), op->c->size))) return 0;
  u->step++;
  op->phase = P_POST;
  return 1;
}

const coll_algo ucx_dissem_barrier = {
    .name = "dissemination", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_dissem};
