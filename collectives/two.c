/* Two-level collectives for groups that span nodes (MiCS / UCC-hier shape):
 * a shared-memory stage among the members on one node and a UCX stage among
 * the members with the same local index on every node. Stages are ordinary
 * operations on two internal communicators, chained by the parent op.
 *
 *   all-gather:     cross all-gather, node all-gather straight into place
 *   reduce-scatter: node reduce-scatter reading blocks in place, cross reduce-scatter
 *   all-reduce:     node all-reduce, cross all-reduce
 * Sums are exact stage by stage; AVG sums and scales once at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"

hsr_status hsr_coll_two_setup(hsr_comm *c) {
  coll_ctx *x = c->ctx;
  int n = c->size;
  if (x->algo_two_level == 1) return HSR_OK;
  int *node = calloc((size_t)n, sizeof *node), *lidx = calloc((size_t)n, sizeof *lidx);
  int *seen_nodes = calloc((size_t)n, sizeof *seen_nodes), *per = calloc((size_t)x->size, sizeof *per);
  hsr_status st = HSR_OK;
  if (!node || !lidx || !seen_nodes || !per) {
    st = hsr_error(HSR_ERR_NOMEM, "two-level tables");
    goto out;
  }
  int nnodes = 0;
  for (int q = 0; q < n; q++) {
    node[q] = hsr_boot_node_of(x->boot, c->world[q]);
    lidx[q] = per[node[q]]++;
    if (lidx[q] == 0) seen_nodes[nnodes++] = node[q];
  }
  int L = per[node[0]], uniform = 1;
  for (int k = 0; k < nnodes; k++)
    if (per[seen_nodes[k]] != L) uniform = 0;
  /* Worth it only with several members per node and one shape everywhere. */
  if (!uniform || L < 2 || nnodes < 2) goto out;
  c->two = calloc((size_t)n, sizeof *c->two);
  if (!c->two) {
    st = hsr_error(HSR_ERR_NOMEM, "two-level table");
    goto out;
  }
  int *fill = calloc((size_t)L, sizeof *fill);
  if (!fill) {
    st = hsr_error(HSR_ERR_NOMEM, "two-level table");
    goto out;
  }
  for (int q = 0; q < n; q++) c->two[lidx[q] * nnodes + fill[lidx[q]]++] = q; /* cross index = order by comm rank */
  free(fill);
  st = hsr_comm_split(c, node[c->rank], c->rank, &c->node_comm);
  if (st == HSR_OK) st = hsr_comm_split(c, lidx[c->rank], c->rank, &c->cross_comm);
  if (st != HSR_OK) goto out;
  snprintf(c->node_comm->name, sizeof c->node_comm->name, "%.40s/node", c->name);
  snprintf(c->cross_comm->name, sizeof c->cross_comm->name, "%.40s/cross", c->name);
  c->local_n = L;
  c->nnodes = nnodes;
  c->two_level = 1;
out:
  free(node), free(lidx), free(seen_nodes), free(per);
  return st;
}

/* Queues a stage on an internal communicator (caller holds ctx->mu). */
static int stage(hsr_op_s *op, hsr_comm *sub, hsr_op kind, const void *send, void *recv, size_t count, hsr_redop rop,
                 const int *perm, const int *blk_at) {
  hsr_op_s *ch = calloc(1, sizeof *ch);
  if (!ch) {
    hsr_coll_op_fail(op, HSR_ERR_NOMEM, "two-level stage");
    return 0;
  }
  ch->kind = kind, ch->c = sub, ch->send = send, ch->recv = recv, ch->count = count, ch->dt = op->dt, ch->redop = rop;
  ch->wait_peer = -1;
  ch->timeout_s = op->timeout_s;
  ch->perm = perm;
  ch->perm_m = op->c->nnodes;
  ch->blk_at = blk_at;
  ch->direct = perm && blk_at == NULL && op->direct;
  op->child_before = sub->counters[kind];
  sub->counters[kind].calls++;
  if (count == 0) {
    ch->fin = 1;
    atomic_store(&ch->done, 1);
  } else {
    ch->seq = ++sub->seq;
    if (sub->tail)
      sub->tail->next = ch;
    else
      sub->head = ch;
    sub->tail = ch;
  }
  op->child = ch;
  return 1;
}

/* 1 when the stage has finished (its bytes added to the parent's counters);
 * 0 while it runs. A failed stage fails the parent with its message. */
static int stage_done(hsr_op_s *op) {
  hsr_op_s *ch = op->child;
  if (!atomic_load_explicit(&ch->done, memory_order_acquire)) { /* left its queue */
    op->t_progress = hsr_clock_ns();                            /* the stage enforces the timeout and names the peer */
    return 0;
  }
  hsr_comm_counter *k = &op->c->counters[op->kind], *s = &ch->c->counters[ch->kind];
  k->bytes_sent += s->bytes_sent - op->child_before.bytes_sent;
  k->bytes_recv += s->bytes_recv - op->child_before.bytes_recv;
  hsr_status st = ch->st;
  if (st != HSR_OK)
    hsr_coll_op_fail(op, st, "communicator '%s': %s, two-level stage: %s", op->c->name, hsr_op_name(op->kind), ch->err);
  if (ch->ucx_pending > 0) {
    ch->freed_by_transport = 1;
  } else {
    free(ch->chunks);
    free(ch);
  }
  op->child = NULL;
  return st == HSR_OK;
}

static void scale_avg(hsr_op_s *op, void *buf, size_t count) {
  if (op->redop != HSR_AVG) return;
  const void *in[1] = {buf};
  hsr_coll_reduce(op->dt, HSR_AVG, buf, in, 1, count, op->c->size);
}

int hsr_coll_two_advance(hsr_op_s *op) {
  hsr_comm *c = op->c;
  int m = c->nnodes;
  size_t es = hsr_dtype_size(op->dt), blk = op->count * es;
  hsr_redop sum = op->redop == HSR_MAX ? HSR_MAX : HSR_SUM;
  if (op->child && !stage_done(op)) return 0;
  if (op->fin) return 1;
  switch (op->kind) {
  case HSR_OP_ALLGATHER:
    switch (op->phase) {
    case 0: {
      /* With a registered recv the cross stage lands every block at its
       * final place and node peers read them there (no intermediate copy). */
      shm_desc d;
      op->direct = hsr_coll_describe(c->ctx, op->recv, blk * (size_t)c->size, &d);
      op->phase = 1;
      if (op->direct) {
        stage(op, c->cross_comm, HSR_OP_ALLGATHER, op->send, op->recv, op->count, HSR_SUM, NULL,
              c->two + (size_t)hsr_comm_rank(c->node_comm) * (size_t)m);
        return 1;
      }
      hsr_status st = hsr_coll_comm_scratch(c, blk * (size_t)m, &op->tmp);
      if (st != HSR_OK) {
        hsr_coll_op_fail(op, st, "scratch: %s", hsr_last_error());
        return 1;
      }
      stage(op, c->cross_comm, HSR_OP_ALLGATHER, op->send, op->tmp, op->count, HSR_SUM, NULL, NULL);
      return 1;
    }
    case 1:
      op->phase = 2;
      /* The node stage writes every shard straight to its place in recv. */
      stage(op, c->node_comm, HSR_OP_ALLGATHER, op->direct ? NULL : op->tmp, op->recv, op->count * (size_t)m, HSR_SUM,
            c->two, NULL);
      return 1;
    default: hsr_coll_op_done(op); return 1;
    }
  case HSR_OP_REDUCE_SCATTER:
    switch (op->phase) {
    case 0: {
      hsr_status st = hsr_coll_comm_scratch(c, blk * (size_t)m, &op->tmp);
      if (st != HSR_OK) {
        hsr_coll_op_fail(op, st, "scratch: %s", hsr_last_error());
        return 1;
      }
      /* The node stage sums, for each cross index, the blocks of the ranks
       * that share my local index straight from the peers' inputs. */
      op->phase = 1;
      stage(op, c->node_comm, HSR_OP_REDUCE_SCATTER, op->send, op->tmp, op->count * (size_t)m, HSR_SUM, c->two, NULL);
      return 1;
    }
    case 1:
      op->phase = 2;
      stage(op, c->cross_comm, HSR_OP_REDUCE_SCATTER, op->tmp, op->recv, op->count, HSR_SUM, NULL, NULL);
      return 1;
    default:
      scale_avg(op, op->recv, op->count);
      hsr_coll_op_done(op);
      return 1;
    }
  default: /* all-reduce */
    switch (op->phase) {
    case 0:
      op->phase = 1;
      stage(op, c->node_comm, HSR_OP_ALLREDUCE, op->send, op->recv, op->count, sum, NULL, NULL);
      return 1;
    case 1:
      op->phase = 2;
      stage(op, c->cross_comm, HSR_OP_ALLREDUCE, op->recv, op->recv, op->count, sum, NULL, NULL);
      return 1;
    default:
      scale_avg(op, op->recv, op->count);
      hsr_coll_op_done(op);
      return 1;
    }
  }
}
