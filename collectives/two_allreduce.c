/* Two-level all-reduce: node all-reduce, then cross all-reduce in place. */
#include "algos.h"
#include "two.h"

/* Stages sum (or take the max); AVG scales once at the end. */
static hsr_redop stage_op(const coll_op *op) { return op->redop == HSR_MAX ? HSR_MAX : HSR_SUM; }

static int start(coll_op *op) {
  op->phase = 1;
  two_stage(op, two_comm_of(op->c)->node, HSR_OP_ALLREDUCE, op->send, op->recv, op->count, stage_op(op), NULL, NULL);
  return 1;
}

static int advance(coll_op *op) {
  if (two_stage_wait(op) <= 0) return 0;
  if (op->phase == 1) {
    op->phase = 2;
    two_stage(op, two_comm_of(op->c)->cross, HSR_OP_ALLREDUCE, op->recv, op->recv, op->count, stage_op(op), NULL, NULL);
    return 1;
  }
  two_scale_avg(op, op->recv, op->count);
  coll_op_finish(op);
  return 1;
}

const coll_algo two_allreduce = {.name = "two-level", .tp = &two_transport, .start = start, .advance = advance};
