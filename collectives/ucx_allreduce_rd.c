/* UCX recursive-doubling all-reduce (power-of-two groups; chosen for small
 * vectors by algo.c's rule): log2(n) exchanges of the whole vector with partner
 * rank ^ mask, each side summing in rank order so every rank gets the same
 * bits. */
#include "algos.h"
#include "kern.h"
#include "ucx.h"
#include "common/dtype_internal.h"

enum { P_POST = 1, P_WAIT };

static int start(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  size_t bytes = op->count * dtype_size(op->dt);
  if (!ucx_one_chunk(op)) return 1;
  hsr_status st = coll_scratch(op->c, bytes, &u->tmp);
  if (st != HSR_OK) {
    coll_op_fail(op, st, "scratch: %s", hsr_last_error());
    return 1;
  }
  coll_copy(op->recv, op->send, bytes, op->c->ctx->have_avx2);
  u->step = 1; /* mask */
  op->phase = P_POST;
  return 1;
}

static int post(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  int n = op->c->size, r = op->c->rank;
  size_t bytes = op->count * dtype_size(op->dt);
  if (u->step >= n) {
    if (op->redop == HSR_AVG) {
      const void *in[1] = {op->recv};
      coll_reduce(op->dt, HSR_AVG, op->recv, in, 1, op->count, n);
    }
    coll_op_finish(op);
    return 1;
  }
  int partner = r ^ u->step;
  uint64_t tag = ucx_tag(op, UCX_S_RD, u->step, 0);
  if (!ucx_recv(u->chunks, u->tmp, bytes, tag) || !ucx_send(u->chunks, partner, op->recv, bytes, tag)) return 1;
  coll_op_count_peer(op, partner, bytes, partner, bytes);
  op->phase = P_WAIT;
  return 1;
}

static int combine(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  int r = op->c->rank, partner = r ^ u->step;
  if (ucx_waiting(op, partner)) return 0;
  const void *ins[2];
  ins[0] = partner < r ? u->tmp : op->recv;
  ins[1] = partner < r ? op->recv : u->tmp;
  coll_reduce(op->dt, op->redop == HSR_AVG ? HSR_SUM : op->redop, op->recv, ins, 2, op->count, op->c->size);
  u->step <<= 1;
  op->phase = P_POST;
  return 1;
}

/* A failed transfer stops it: the verdict's, never a sum of what did not arrive. */
static int advance(coll_op *op) { return op->xfer_err ? 0 : op->phase == P_POST ? post(op) : combine(op); }

const coll_algo ucx_rd_allreduce = {
    .name = "recursive doubling", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_rd};
