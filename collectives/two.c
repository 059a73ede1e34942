/* Two-level: a composite above the flat transports (MiCS / UCC-hier shape):
 * how a group splits into a node communicator (shared memory) and a cross
 * communicator (UCX), how a parent op chains its stages on them, and the
 * composite's table. The algorithms are two_allgather.c,
 * two_reduce_scatter.c and two_allreduce.c. Sums are exact stage by stage;
 * AVG sums and scales once at the end. */
#include <stdio.h>
#include <stdlib.h>

#include "algos.h"
#include "kern.h"
#include "two.h"
#include "launch/boot_internal.h"
#include "collectives/comm_internal.h"

hsr_status two_shape_of(hsr_comm *c, two_shape *sh) {
  coll_ctx *x = c->ctx;
  int n = c->size;
  *sh = (two_shape){0};
  sh->node = calloc((size_t)n, sizeof *sh->node);
  sh->lidx = calloc((size_t)n, sizeof *sh->lidx);
  int *seen_nodes = calloc((size_t)n, sizeof *seen_nodes), *per = calloc((size_t)x->size, sizeof *per);
  hsr_status st = HSR_OK;
  if (!sh->node || !sh->lidx || !seen_nodes || !per) {
    st = hsr_error(HSR_ERR_NOMEM, "two-level tables");
    two_shape_free(sh);
  } else {
    int nnodes = 0;
    for (int q = 0; q < n; q++) {
      sh->node[q] = boot_node_of(x->boot, c->world[q]);
      sh->lidx[q] = per[sh->node[q]]++;
      if (sh->lidx[q] == 0) seen_nodes[nnodes++] = sh->node[q];
    }
    sh->local_n = per[sh->node[0]];
    sh->nnodes = nnodes;
    sh->uniform = 1;
    for (int k = 0; k < nnodes; k++)
      if (per[seen_nodes[k]] != sh->local_n) sh->uniform = 0;
  }
  free(seen_nodes), free(per);
  return st;
}

void two_shape_free(two_shape *sh) {
  free(sh->node), free(sh->lidx);
  sh->node = sh->lidx = NULL;
}

static void two_comm_free(two_comm *t) {
  if (!t) return;
  if (t->node) coll_host_free(t->node);
  if (t->cross) coll_host_free(t->cross);
  free(t->map);
  free(t);
}

hsr_status two_setup(hsr_comm *c, const two_shape *sh) {
  int n = c->size, L = sh->local_n, m = sh->nnodes;
  two_comm *t = calloc(1, sizeof *t);
  int *fill = calloc((size_t)L, sizeof *fill);
  if (t) t->map = calloc((size_t)n, sizeof *t->map);
  if (!t || !t->map || !fill) {
    free(fill);
    two_comm_free(t);
    return hsr_error(HSR_ERR_NOMEM, "two-level table");
  }
  for (int q = 0; q < n; q++) t->map[sh->lidx[q] * m + fill[sh->lidx[q]]++] = q; /* cross index = order by comm rank */
  free(fill);
  /* The parts are host communicators on the flat transports below: the node
   * group runs shared memory, the cross group (one member per node) UCX. Their
   * join exchange runs on c's flat UCX transport. */
  hsr_status st = coll_group_split(c, sh->node[c->rank], c->rank, &t->node);
  if (st == HSR_OK) t->node->tp = &shm_transport;
  if (st == HSR_OK) st = coll_group_split(c, sh->lidx[c->rank], c->rank, &t->cross);
  if (st == HSR_OK) t->cross->tp = &ucx_transport;
  if (st != HSR_OK) {
    two_comm_free(t);
    return st;
  }
  snprintf(t->node->name, sizeof t->node->name, "%.40s/node", c->name);
  snprintf(t->cross->name, sizeof t->cross->name, "%.40s/cross", c->name);
  t->local_n = L;
  t->nnodes = m;
  c->tp_state = t;
  c->tp = &two_transport;
  return HSR_OK;
}

static hsr_status two_free(hsr_comm *c) {
  HSR_CHECK(coll_host_idle(c));
  two_comm_free(c->tp_state);
  c->tp_state = NULL;
  coll_host_destroy(c);
  return HSR_OK;
}

/* ---- stages ------------------------------------------------------------------ */

int two_stage(coll_op *op, hsr_comm *sub, hsr_op kind, const void *send, void *recv, size_t count, hsr_redop rop,
              const int *perm, const int *blk_at) {
  coll_op *ch = coll_op_new(sub, kind);
  if (!ch) {
    coll_op_fail(op, HSR_ERR_NOMEM, "two-level stage");
    return 0;
  }
  two_op *t = two_op_of(op);
  ch->send = send, ch->recv = recv, ch->count = count, ch->dt = op->dt, ch->redop = rop;
  ch->timeout_s = op->timeout_s;
  ch->place = (coll_place){.perm = perm,
                           .perm_m = two_comm_of(op->c)->nnodes,
                           .blk_at = blk_at,
                           .direct = perm && blk_at == NULL && t->direct};
  const hsr_comm_counter *k = &sub->counters[kind];
  t->before[0] = k->bytes_sent, t->before[1] = k->bytes_recv;
  t->before[2] = k->fabric_sent, t->before[3] = k->fabric_recv;
  coll_op_count_call(ch);
  if (count == 0)
    coll_op_skip(ch);
  else
    coll_op_enqueue(ch);
  t->child = ch;
  return 1;
}

int two_stage_wait(coll_op *op) {
  two_op *t = two_op_of(op);
  coll_op *ch = t->child;
  if (!ch) return 1;
  if (!atomic_load_explicit(&ch->done, memory_order_acquire)) { /* left its queue */
    op->t_progress = hsr_clock_ns();                            /* the stage enforces the timeout and names the peer */
    return 0;
  }
  /* the stage's bytes count for the parent */
  const hsr_comm_counter *s = &ch->c->counters[ch->kind];
  hsr_comm_counter d = {.bytes_sent = s->bytes_sent - t->before[0],
                        .bytes_recv = s->bytes_recv - t->before[1],
                        .fabric_sent = s->fabric_sent - t->before[2],
                        .fabric_recv = s->fabric_recv - t->before[3]};
  coll_op_count_add(op, &d);
  hsr_status st = ch->st;
  if (st != HSR_OK)
    coll_op_fail(op, st, "communicator '%s': %s, two-level stage: %s", op->c->name, op_name(op->kind), ch->err);
  coll_op_release_locked(ch);
  t->child = NULL;
  return st == HSR_OK ? 1 : -1;
}

/* A failed parent freed with its stage still out (context lock held). */
static void two_op_fini(coll_op *op) {
  coll_op *ch = two_op_of(op)->child;
  two_op_of(op)->child = NULL;
  if (!ch) return;
  if (atomic_load_explicit(&ch->done, memory_order_acquire))
    coll_op_release_locked(ch);
  else
    ch->detached = 1;
}

void two_scale_avg(coll_op *op, void *buf, size_t count) {
  if (op->redop != HSR_AVG) return;
  const void *in[1] = {buf};
  coll_reduce(op->dt, HSR_AVG, buf, in, 1, count, op->c->size);
}

/* Broadcast and barrier have no two-level form: flat UCX. */
static const coll_rows two_rows = {
    [HSR_OP_ALLGATHER] = {{.algo = &two_allgather}},    [HSR_OP_REDUCE_SCATTER] = {{.algo = &two_reduce_scatter}},
    [HSR_OP_ALLREDUCE] = {{.algo = &two_allreduce}},    [HSR_OP_BCAST] = {{.algo = &ucx_flat_bcast}},
    [HSR_OP_BARRIER] = {{.algo = &ucx_dissem_barrier}},
};

const coll_transport two_transport = {
    .name = "two-level",
    .rows = &two_rows,
    .start = coll_host_start,
    .test = coll_host_test,
    .wait = coll_host_wait,
    .op_fini = two_op_fini,
    .mem_alloc = coll_host_mem_alloc,
    .mem_free = coll_host_mem_free,
    .set_stream = coll_host_set_stream,
    .free = two_free,
};
