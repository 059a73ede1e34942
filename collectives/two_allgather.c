/* Two-level all-gather: cross all-gather, then a node all-gather straight
 * into place. With a registered recv the cross stage lands every block at its
 * final place and node peers read them there (no intermediate copy). */
#include "algos.h"
#include "two.h"
#include "common/dtype_internal.h"

static int start(coll_op *op) {
  hsr_comm *c = op->c;
  two_comm *tc = two_comm_of(c);
  two_op *t = two_op_of(op);
  size_t blk = op->count * dtype_size(op->dt);
  seg_desc d;
  t->direct = seg_describe(&c->ctx->seg, op->recv, blk * (size_t)c->size, &d);
  op->phase = 1;
  if (t->direct) {
    two_stage(op, tc->cross, HSR_OP_ALLGATHER, op->send, op->recv, op->count, HSR_SUM, NULL,
              tc->map + (size_t)tc->node->rank * (size_t)tc->nnodes);
    return 1;
  }
  hsr_status st = coll_scratch(c, blk * (size_t)tc->nnodes, &t->tmp);
  if (st != HSR_OK) {
    coll_op_fail(op, st, "scratch: %s", hsr_last_error());
    return 1;
  }
  two_stage(op, tc->cross, HSR_OP_ALLGATHER, op->send, t->tmp, op->count, HSR_SUM, NULL, NULL);
  return 1;
}

static int advance(coll_op *op) {
  if (two_stage_wait(op) <= 0) return 0;
  two_comm *tc = two_comm_of(op->c);
  two_op *t = two_op_of(op);
  if (op->phase == 1) {
    op->phase = 2;
    /* The node stage writes every shard straight to its place in recv. */
    two_stage(op, tc->node, HSR_OP_ALLGATHER, t->direct ? NULL : t->tmp, op->recv, op->count * (size_t)tc->nnodes,
              HSR_SUM, tc->map, NULL);
    return 1;
  }
  coll_op_finish(op);
  return 1;
}

const coll_algo two_allgather = {.name = "two-level", .tp = &two_transport, .start = start, .advance = advance, .model = &coll_model_two};
