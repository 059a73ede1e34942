/* Communicator objects (member table and name, every backend) and host
 * communicators: the world and splits on the context's control slots (their
 * transport is select.c's choice), free, scratch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "kernels/sim.h"
#include "launch/boot_internal.h"

hsr_status coll_comm_alloc(int size, hsr_comm **out) {
  hsr_comm *c = calloc(1, sizeof *c);
  if (!c) return hsr_error(HSR_ERR_NOMEM, "communicator");
  c->world = calloc((size_t)size, sizeof *c->world);
  c->peer_slot = calloc((size_t)size, sizeof *c->peer_slot);
  c->peer_base = calloc((size_t)size, sizeof *c->peer_base);
  if (!c->world || !c->peer_slot || !c->peer_base) {
    free(c->world), free(c->peer_slot), free(c->peer_base), free(c);
    return hsr_error(HSR_ERR_NOMEM, "communicator tables");
  }
  c->size = size;
  c->slot = -1;
  *out = c;
  return HSR_OK;
}

void coll_comm_dealloc(hsr_comm *c) { free(c->world), free(c->peer_slot), free(c->peer_base), free(c); }

hsr_status coll_comm_alloc_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  int size = hsr_boot_size(boot);
  hsr_comm *c;
  HSR_CHECK(coll_comm_alloc(size, &c));
  c->backend = backend;
  c->rank = hsr_boot_rank(boot);
  for (int i = 0; i < size; i++) c->world[i] = i;
  snprintf(c->name, sizeof c->name, "world");
  *out = c;
  return HSR_OK;
}

static uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

/* What each member tells the others when a host communicator is made. */
typedef struct join_rec {
  int32_t color, key, slot, pad;
  uint64_t base;
} join_rec;

hsr_status coll_group_world(hsr_boot *boot, hsr_backend backend, const coll_transport *net, hsr_comm **out) {
  hsr_comm *c;
  HSR_CHECK(coll_comm_alloc_world(boot, backend, &c));
  coll_ctx *x;
  hsr_status st = coll_ctx_create(boot, net, &x);
  if (st != HSR_OK) {
    coll_comm_dealloc(c);
    return st;
  }
  int size = c->size;
  c->ctx = x;
  c->mu = &x->mu;
  c->timeout_s = x->timeout_s;
  c->id = mix64(x->seg.job, 1);
  c->intra = boot_num_nodes(boot) == 1;
  c->slot = seg_slot_alloc(&x->seg);
  join_rec me = {.slot = c->slot, .base = seg_slot_base(&x->seg, c->slot)}, *all = calloc((size_t)size, sizeof *all);
  if (!all) st = hsr_error(HSR_ERR_NOMEM, "join table");
  if (st == HSR_OK) st = boot_allgather(boot, &me, sizeof me, all);
  if (st == HSR_OK)
    for (int i = 0; i < size; i++) c->peer_slot[i] = all[i].slot, c->peer_base[i] = all[i].base;
  free(all);
  if (st == HSR_OK) st = coll_ctx_add_comm(x, c);
  if (st != HSR_OK) {
    coll_ctx_release(x);
    coll_comm_dealloc(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

static int cmp_member(const void *a, const void *b) {
  const int *x = a, *y = b; /* (key, parent rank) */
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Every member's join record, through an all-gather on the parent. My slot
 * is given back if I join nothing or the exchange fails. */
static hsr_status exchange_joins(hsr_comm *parent, int color, int key, join_rec **all_out) {
  coll_ctx *x = parent->ctx;
  join_rec me = {.color = color < 0 ? -1 : color, .key = key, .slot = -1};
  *all_out = NULL;
  if (color >= 0) {
    pthread_mutex_lock(&x->mu);
    me.slot = seg_slot_alloc(&x->seg);
    pthread_mutex_unlock(&x->mu);
    if (me.slot < 0)
      return hsr_error(HSR_ERR_NOMEM, "comm_split: more than %d live communicators on this rank", SEG_SLOTS);
    me.base = seg_slot_base(&x->seg, me.slot);
  }
  join_rec *all = calloc((size_t)parent->size, sizeof *all);
  coll_op *op = all ? coll_op_new(parent, HSR_OP_ALLGATHER) : NULL;
  if (!op) {
    free(all);
    return hsr_error(HSR_ERR_NOMEM, "join table");
  }
  /* on the parent's own transport, like any all-gather of it */
  op->send = &me, op->recv = all, op->count = sizeof me, op->dt = HSR_U8;
  hsr_status st = coll_op_issue(op, 0, NULL);
  parent->nsplits++;
  if (st != HSR_OK || color < 0) {
    free(all);
    if (me.slot >= 0) {
      pthread_mutex_lock(&x->mu);
      seg_slot_free(&x->seg, me.slot);
      pthread_mutex_unlock(&x->mu);
    }
    return st;
  }
  *all_out = all;
  return HSR_OK;
}

/* The members of `color`, ordered by (key, parent rank), as a communicator. */
static hsr_status build_split(hsr_comm *parent, int color, const join_rec *all, hsr_comm **out) {
  coll_ctx *x = parent->ctx;
  int n = parent->size, m = 0, (*mem)[2] = calloc((size_t)n, sizeof *mem);
  if (!mem) return hsr_error(HSR_ERR_NOMEM, "member table");
  for (int i = 0; i < n; i++)
    if (all[i].color == color) mem[m][0] = all[i].key, mem[m][1] = i, m++;
  qsort(mem, (size_t)m, sizeof *mem, cmp_member);
  hsr_comm *c;
  hsr_status st = coll_comm_alloc(m, &c);
  if (st == HSR_OK) {
    c->ctx = x;
    c->mu = &x->mu;
    c->backend = HSR_BACKEND_HOST;
    c->timeout_s = parent->timeout_s;
    c->id = mix64(mix64(parent->id, (uint64_t)parent->nsplits), (uint64_t)color);
    c->slot = all[parent->rank].slot;
    c->intra = 1;
    for (int i = 0; i < m; i++) {
      int pr = mem[i][1];
      c->world[i] = parent->world[pr];
      c->peer_slot[i] = all[pr].slot;
      c->peer_base[i] = all[pr].base;
      if (pr == parent->rank) c->rank = i;
      if (boot_node_of(x->boot, c->world[i]) != x->node) c->intra = 0;
    }
    snprintf(c->name, sizeof c->name, "%.30s.split%d[%d]", parent->name, (parent->nsplits - 1) & 0xffff,
             color & 0xffffff);
    *out = c;
  }
  free(mem);
  return st;
}

hsr_status coll_group_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  join_rec *all;
  *out = NULL;
  HSR_CHECK(exchange_joins(parent, color, key, &all));
  if (!all) return HSR_OK; /* color < 0: joins none */
  hsr_comm *c = NULL;
  hsr_status st = build_split(parent, color, all, &c);
  free(all);
  if (st == HSR_OK) st = coll_ctx_add_comm(c->ctx, c);
  if (st != HSR_OK) {
    if (c) coll_comm_dealloc(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

hsr_status coll_host_idle(hsr_comm *c) {
  coll_ctx *x = c->ctx;
  pthread_mutex_lock(&x->mu);
  coll_take_incoming(x);
  while (c->head && c->head->fin) { /* failed ops the engine has not handed back yet */
    coll_op *op = coll_op_dequeue(c);
    if (op->detached)
      coll_op_release_locked(op);
    else
      coll_op_publish(op);
  }
  int busy = c->head != NULL;
  pthread_mutex_unlock(&x->mu);
  if (busy)
    return hsr_error(HSR_ERR_STATE,
                     "hsr_comm_free: communicator '%s' still has outstanding requests (wait for them first)", c->name);
  return HSR_OK;
}

void coll_host_destroy(hsr_comm *c) {
  coll_ctx *x = c->ctx;
  coll_ctx_remove_comm(x, c);
  coll_scratch_free(c);
  coll_comm_dealloc(c);
  coll_ctx_release(x);
}

hsr_status coll_host_free(hsr_comm *c) {
  HSR_CHECK(coll_host_idle(c));
  coll_host_destroy(c);
  return HSR_OK;
}

hsr_status coll_host_mem_alloc(hsr_comm *c, size_t bytes, void **ptr) {
  return seg_pool_alloc(&c->ctx->seg, bytes, ptr);
}
hsr_status coll_host_mem_free(hsr_comm *c, void *ptr) { return seg_pool_free(&c->ctx->seg, ptr); }

/* A host communicator runs its ops in the order of a sim stream (the sim
 * device's collectives), or at once (NULL). A CUDA stream needs NCCL. */
hsr_status coll_host_set_stream(hsr_comm *c, hsr_stream *stream) {
  if (stream && !kern_stream_is_sim(stream))
    return hsr_error(HSR_ERR_INVALID,
                     "hsr_comm_set_stream: communicator '%s' is a host communicator: it takes a stream of a sim device "
                     "(or NULL); CUDA streams are for HSR_BACKEND_NCCL",
                     c->name);
  c->stream = stream;
  return HSR_OK;
}

/* A peer context (no bootstrap) has no node-shared memory: its scratch is the heap's. */
void coll_scratch_free(hsr_comm *c) {
  if (!c->scratch) return;
  if (c->ctx->boot)
    seg_pool_free(&c->ctx->seg, c->scratch);
  else
    free(c->scratch);
  c->scratch = NULL;
  c->scratch_bytes = 0;
}

hsr_status coll_scratch(hsr_comm *c, size_t bytes, void **p) {
  if (c->scratch_bytes < bytes) {
    coll_scratch_free(c);
    if (c->ctx->boot) {
      HSR_CHECK(seg_pool_alloc(&c->ctx->seg, bytes, &c->scratch));
    } else if (posix_memalign(&c->scratch, 64, bytes ? bytes : 1)) {
      c->scratch = NULL;
      return hsr_error(HSR_ERR_NOMEM, "communicator '%s': scratch of %zu bytes", c->name, bytes);
    }
    c->scratch_bytes = bytes;
  }
  *p = c->scratch;
  return HSR_OK;
}
