/* Two-level reduce-scatter: a node reduce-scatter that sums, for each cross
 * index, the blocks of the ranks sharing my local index straight from the
 * peers' inputs; then a cross reduce-scatter. */
#include "algos.h"
#include "two.h"
#include "common/dtype_internal.h"

static int start(coll_op *op) {
  hsr_comm *c = op->c;
  two_comm *tc = two_comm_of(c);
  two_op *t = two_op_of(op);
  size_t blk = op->count * dtype_size(op->dt);
  hsr_status st = coll_scratch(c, blk * (size_t)tc->nnodes, &t->tmp);
  if (st != HSR_OK) {
    coll_op_fail(op, st, "scratch: %s", hsr_last_error());
    return 1;
  }
  op->phase = 1;
  two_stage(op, tc->node, HSR_OP_REDUCE_SCATTER, op->send, t->tmp, op->count * (size_t)tc->nnodes, HSR_SUM, tc->map,
            NULL);
  return 1;
}

static int advance(coll_op *op) {
  if (two_stage_wait(op) <= 0) return 0;
  if (op->phase == 1) {
    op->phase = 2;
    two_stage(op, two_comm_of(op->c)->cross, HSR_OP_REDUCE_SCATTER, two_op_of(op)->tmp, op->recv, op->count, HSR_SUM,
              NULL, NULL);
    return 1;
  }
  two_scale_avg(op, op->recv, op->count);
  coll_op_finish(op);
  return 1;
}

const coll_algo two_reduce_scatter = {.name = "two-level", .tp = &two_transport, .start = start, .advance = advance, .model = &coll_model_two};
