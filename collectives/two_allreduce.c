/* Two-level all-reduce, UCC's "split rail": reduce-scatter inside the node,
 * one cross-node all-reduce per local rank on its 1/L slice (the L of a node
 * run in parallel, each on its own rail), all-gather inside the node. Every
 * byte crosses a node boundary once per node instead of once per local rank,
 * which is what the replicate all-reduce of ddp/zero1 across nodes pays.
 *
 * The vector is split as L slices of q = count / L elements plus a tail of
 * count % L < L elements; the tail (and everything, for MAX or when
 * count < L) takes the plain path: node all-reduce, then cross all-reduce. */
#include "algos.h"
#include "two.h"
#include "common/dtype_internal.h"

enum { P_RS = 1, P_AR, P_AG, P_TAIL_NODE, P_TAIL_CROSS, P_DONE };

/* Stages sum (or take the max); AVG scales once at the end. */
static hsr_redop stage_op(const coll_op *op) { return op->redop == HSR_MAX ? HSR_MAX : HSR_SUM; }

static size_t slice_of(const coll_op *op) {
  size_t L = (size_t)two_comm_of(op->c)->local_n;
  return op->redop == HSR_MAX ? 0 : op->count / L;
}

/* Queues the stage of `phase`; phases with nothing to do are skipped. */
static int next(coll_op *op, int phase) {
  two_comm *t = two_comm_of(op->c);
  size_t es = dtype_size(op->dt), q = slice_of(op), head = q * (size_t)t->local_n, tail = op->count - head;
  int me = t->node->rank; /* the node group is ordered like the local indices */
  char *mine = (char *)op->recv + (size_t)me * q * es;
  const char *send = op->send;
  char *recv = op->recv;
  for (;; phase++) {
    op->phase = phase;
    switch (phase) {
    case P_RS: return two_stage(op, t->node, HSR_OP_REDUCE_SCATTER, send, mine, q, HSR_SUM, NULL, NULL);
    case P_AR: return two_stage(op, t->cross, HSR_OP_ALLREDUCE, mine, mine, q, HSR_SUM, NULL, NULL);
    case P_AG: return two_stage(op, t->node, HSR_OP_ALLGATHER, mine, recv, q, HSR_SUM, NULL, NULL);
    case P_TAIL_NODE:
      if (!tail) {
        phase = P_DONE - 1;
        continue;
      }
      return two_stage(op, t->node, HSR_OP_ALLREDUCE, send + head * es, recv + head * es, tail, stage_op(op), NULL,
                       NULL);
    case P_TAIL_CROSS:
      return two_stage(op, t->cross, HSR_OP_ALLREDUCE, recv + head * es, recv + head * es, tail, stage_op(op), NULL,
                       NULL);
    default:
      two_scale_avg(op, op->recv, op->count);
      coll_op_finish(op);
      return 1;
    }
  }
}

static int start(coll_op *op) {
  next(op, slice_of(op) ? P_RS : P_TAIL_NODE);
  return 1;
}

static int advance(coll_op *op) {
  if (two_stage_wait(op) <= 0) return 0;
  next(op, op->phase + 1);
  return 1;
}

const coll_algo two_allreduce = {
    .name = "two-level split rail", .tp = &two_transport, .start = start, .advance = advance, .model = &coll_model_two};
