/* Two-level transport (two*.c), private: groups that span nodes run a
 * shared-memory stage among the members on one node and a UCX stage among the
 * members with the same local index on every node. Stages are ordinary
 * operations on two internal communicators, chained by the parent op. */
#ifndef HSR_COLL_TWO_H
#define HSR_COLL_TWO_H

#include "coll.h"

/* How a group's members sit on nodes (select.c builds from it). */
typedef struct two_shape {
  int *node, *lidx; /* per comm rank: node id, index among its node's members */
  int local_n, nnodes, uniform;
} two_shape;

/* A two-level communicator's parts (hsr_comm.tp_state). node = my node's
 * members, cross = same local index on every node; map[l * nnodes + i] =
 * comm rank with local index l on cross index i. */
typedef struct two_comm {
  int local_n, nnodes;
  hsr_comm *node, *cross;
  int *map;
} two_comm;

/* A two-level op (coll_op.priv). */
typedef struct two_op {
  coll_op *child;     /* the stage in flight */
  uint64_t before[4]; /* the stage comm's bytes sent, received, fabric sent, fabric received before it */
  void *tmp;
  int direct; /* all-gather: peers read my blocks in place in recv */
} two_op;
_Static_assert(sizeof(two_op) <= COLL_OP_PRIV, "two_op must fit coll_op.priv");

static inline two_op *two_op_of(coll_op *op) { return (two_op *)op->priv; }
static inline two_comm *two_comm_of(const hsr_comm *c) { return c->tp_state; }

hsr_status two_shape_of(hsr_comm *c, two_shape *sh);
void two_shape_free(two_shape *sh);
/* Builds the node and cross communicators; c then runs two-level. */
hsr_status two_setup(hsr_comm *c, const two_shape *sh);

/* Queues a stage on an internal communicator (context lock held); 0 if it
 * could not (the parent has failed). */
int two_stage(coll_op *op, hsr_comm *sub, hsr_op kind, const void *send, void *recv, size_t count, hsr_redop rop,
              const int *perm, const int *blk_at);
/* Before each later step: 1 when the op goes on (its stage, if any, has
 * finished and its bytes are counted), 0 while the stage runs, -1 when the
 * stage failed (and failed the op). Either of the last two: return 0. */
int two_stage_wait(coll_op *op);
void two_scale_avg(coll_op *op, void *buf, size_t count);

#endif
