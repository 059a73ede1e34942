/* Intra-node collectives through node-shared memory.
 *
 * Every rank publishes where its input lives (a registered buffer, or a staged
 * copy of an unregistered one) and bumps its `arrive` counter; peers then read
 * it directly: all-gather copies every shard into the local output (all ranks
 * in the same order, streaming stores), reduce-scatter sums this rank's block
 * straight from every peer's input, all-reduce is both with a `mid` barrier.
 * `done` tells the owner that nobody reads its buffers any more. */
#include <string.h>

#include <pthread.h>

#include "coll.h"

static ctl_slot *slot_of(hsr_comm *c, int j) {
  coll_ctx *x = c->ctx;
  int wr = c->world[j];
  ctl_seg *s = wr == x->rank ? x->ctl : x->peer_ctl[wr];
  return &s->slot[c->peer_slot[j]];
}

enum { F_ARRIVE, F_MID, F_DONE };

static _Atomic uint64_t *flag(ctl_slot *s, int f) {
  return f == F_ARRIVE ? &s->arrive : f == F_MID ? &s->mid : &s->done;
}

static void publish(hsr_op_s *op, int f) {
  hsr_comm *c = op->c;
  atomic_store_explicit(flag(slot_of(c, c->rank), f), c->peer_base[c->rank] + op->seq, memory_order_release);
  for (int j = 0; j < c->size; j++)
    if (j != c->rank) hsr_coll_ring(c->ctx, c->world[j]);
}

static int ready(hsr_op_s *op, int f, int j) {
  hsr_comm *c = op->c;
  return atomic_load_explicit(flag(slot_of(c, j), f), memory_order_acquire) >= c->peer_base[j] + op->seq;
}

static int wait_all(hsr_op_s *op, int f) {
  for (int j = 0; j < op->c->size; j++)
    if (!ready(op, f, j)) {
      op->wait_peer = j;
      return 0;
    }
  op->wait_peer = -1;
  return 1;
}

/* Describes `p` for the peers, staging it into the comm's scratch at `soff`
 * when it is not registered. */
static int expose(hsr_op_s *op, const void *p, size_t bytes, size_t soff, size_t scratch_total, shm_desc *d,
                  const void **local) {
  hsr_comm *c = op->c;
  if (bytes == 0 || hsr_coll_describe(c->ctx, p, bytes, d)) {
    if (bytes == 0) *d = (shm_desc){.rank = c->ctx->rank, .seg = -1};
    *local = p;
    return 1;
  }
  void *s;
  hsr_status st = hsr_coll_comm_scratch(c, scratch_total, &s);
  if (st != HSR_OK) {
    hsr_coll_op_fail(op, st, "staging %zu bytes: %s", bytes, hsr_last_error());
    return 0;
  }
  hsr_coll_copy((char *)s + soff, p, bytes, c->ctx->have_avx2);
  hsr_coll_describe(c->ctx, (char *)s + soff, bytes, d);
  *local = (char *)s + soff;
  return 1;
}

/* The bulk copy or reduction of a phase runs without the context lock when the
 * progress thread runs it, so the caller's posts and tests do not wait behind
 * it: the op's buffers are the op's alone, and everything shared (peer
 * mappings, slots) is looked up before. Inline progress keeps the lock. */
static void bulk_begin(hsr_op_s *op) {
  if (!op->c->ctx->inline_progress) pthread_mutex_unlock(&op->c->ctx->mu);
}
static void bulk_end(hsr_op_s *op) {
  if (!op->c->ctx->inline_progress) pthread_mutex_lock(&op->c->ctx->mu);
}

/* The bulk phase is over: count what moved and tell peers that I no longer
 * read their buffers. */
static int bulk_done(hsr_op_s *op, hsr_comm_counter *k, uint64_t bytes, int next_phase) {
  k->bytes_recv += bytes;
  k->bytes_sent += bytes;
  publish(op, F_DONE);
  op->phase = next_phase;
  return 1;
}

/* Last phase: the op is finished once no peer reads my buffers any more. */
static int finish_when_all_done(hsr_op_s *op) {
  if (!wait_all(op, F_DONE)) return 0;
  hsr_coll_op_done(op);
  return 1;
}

static const void *peer(hsr_op_s *op, const shm_desc *d) {
  if (d->seg < 0) return NULL;
  void *p = hsr_coll_peer_ptr(op->c->ctx, d);
  if (!p)
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "mapping rank %d's segment %d: %s", d->rank, d->seg, hsr_last_error());
  return p;
}

static int advance_allgather(hsr_op_s *op) {
  hsr_comm *c = op->c;
  size_t es = hsr_dtype_size(op->dt), bytes = op->count * es;
  char *recv = op->recv;
  int n = c->size, r = c->rank;
  hsr_comm_counter *k = &c->counters[HSR_OP_ALLGATHER];
  switch (op->phase) {
  case 0: {
    shm_desc d;
    if (op->direct) { /* my blocks are already in place in my (registered) recv */
      hsr_coll_describe(c->ctx, recv, bytes * (size_t)n, &d);
      d.scattered = 1;
    } else {
      if (!expose(op, op->send, bytes, 0, bytes, &d, &op->src_in)) return 1;
      d.scattered = 0;
    }
    slot_of(c, r)->in = d;
    publish(op, F_ARRIVE);
    op->phase = 1;
    return 1;
  }
  case 1: {
    if (!wait_all(op, F_ARRIVE)) return 0;
    const char *srcs[n];
    for (int j = 0; j < n; j++) {
      srcs[j] = NULL;
      if (j == r && op->direct) continue;
      srcs[j] = j == r ? op->src_in : peer(op, &slot_of(c, j)->in);
      if (!srcs[j]) return 1;
    }
    bulk_begin(op);
    for (int j = 0; j < n; j++) {
      if (j == r && op->direct) continue;
      const shm_desc *dj = &slot_of(c, j)->in;
      const char *src = srcs[j];
      if (op->perm) { /* two-level: peer j's m sub-blocks go to scattered places */
        size_t sub = bytes / (size_t)op->perm_m;
        for (int i = 0; i < op->perm_m; i++) {
          size_t at = (size_t)op->perm[j * op->perm_m + i] * sub;
          const char *from = j != r && dj->scattered ? src + at : src + (size_t)i * sub;
          hsr_coll_copy(recv + at, from, sub, c->ctx->have_avx2);
        }
      } else {
        hsr_coll_copy(recv + (size_t)j * bytes, src, bytes, c->ctx->have_avx2);
      }
    }
    bulk_end(op);
    return bulk_done(op, k, (uint64_t)(n - 1) * bytes, 2);
  }
  default: return finish_when_all_done(op);
  }
}

static int advance_reduce_scatter(hsr_op_s *op) {
  hsr_comm *c = op->c;
  size_t es = hsr_dtype_size(op->dt), bytes = op->count * es;
  int n = c->size, r = c->rank;
  hsr_comm_counter *k = &c->counters[HSR_OP_REDUCE_SCATTER];
  switch (op->phase) {
  case 0: {
    shm_desc d;
    if (!expose(op, op->send, bytes * (size_t)n, 0, bytes * (size_t)n, &d, &op->src_in)) return 1;
    slot_of(c, r)->in = d;
    publish(op, F_ARRIVE);
    op->phase = 1;
    return 1;
  }
  case 1: {
    if (!wait_all(op, F_ARRIVE)) return 0;
    const void *ins[n];
    const char *bases[n];
    for (int j = 0; j < n; j++) {
      bases[j] = j == r ? op->src_in : peer(op, &slot_of(c, j)->in);
      if (!bases[j]) return 1;
    }
    /* Two-level: my block is m sub-blocks taken from scattered places. */
    int parts = op->perm ? op->perm_m : 1;
    size_t sub = bytes / (size_t)parts, subn = op->count / (size_t)parts;
    bulk_begin(op);
    for (int i = 0; i < parts; i++) {
      size_t at = op->perm ? (size_t)op->perm[r * parts + i] * sub : (size_t)r * bytes;
      for (int j = 0; j < n; j++) ins[j] = bases[j] + at;
      hsr_coll_reduce(op->dt, op->redop, (char *)op->recv + (size_t)i * sub, ins, n, subn, n);
    }
    bulk_end(op);
    return bulk_done(op, k, (uint64_t)(n - 1) * bytes, 2);
  }
  default: return finish_when_all_done(op);
  }
}

static size_t slice_off(size_t count, int n, int j) { return count * (size_t)j / (size_t)n; }

static int advance_allreduce(hsr_op_s *op) {
  hsr_comm *c = op->c;
  size_t es = hsr_dtype_size(op->dt), bytes = op->count * es;
  int n = c->size, r = c->rank;
  size_t lo = slice_off(op->count, n, r), hi = slice_off(op->count, n, r + 1), mine = (hi - lo) * es;
  hsr_comm_counter *k = &c->counters[HSR_OP_ALLREDUCE];
  char *recv = op->recv;
  switch (op->phase) {
  case 0: {
    shm_desc d, o;
    if (!expose(op, op->send, bytes, 0, bytes + mine, &d, &op->src_in)) return 1;
    /* Where my reduced slice goes: straight into recv when peers can read it. */
    if (mine == 0 || hsr_coll_describe(c->ctx, recv + lo * es, mine, &o)) {
      op->tmp = recv + lo * es;
      if (mine == 0) o = (shm_desc){.rank = c->ctx->rank, .seg = -1};
    } else {
      void *s;
      hsr_status st = hsr_coll_comm_scratch(c, bytes + mine, &s);
      if (st != HSR_OK) {
        hsr_coll_op_fail(op, st, "staging: %s", hsr_last_error());
        return 1;
      }
      op->tmp = (char *)s + bytes;
      hsr_coll_describe(c->ctx, op->tmp, mine, &o);
    }
    slot_of(c, r)->in = d;
    slot_of(c, r)->out = o;
    publish(op, F_ARRIVE);
    op->phase = 1;
    return 1;
  }
  case 1: {
    if (!wait_all(op, F_ARRIVE)) return 0;
    if (mine) {
      const void *ins[n];
      for (int j = 0; j < n; j++) {
        const char *base = j == r ? op->src_in : peer(op, &slot_of(c, j)->in);
        if (!base) return 1;
        ins[j] = base + lo * es;
      }
      bulk_begin(op);
      hsr_coll_reduce(op->dt, op->redop, op->tmp, ins, n, hi - lo, n);
      bulk_end(op);
    }
    publish(op, F_MID);
    op->phase = 2;
    return 1;
  }
  case 2: {
    if (!wait_all(op, F_MID)) return 0;
    const void *outs[n];
    for (int j = 0; j < n; j++) {
      size_t jlo = slice_off(op->count, n, j), jn = slice_off(op->count, n, j + 1) - jlo;
      outs[j] = NULL;
      if (!jn) continue;
      outs[j] = j == r ? op->tmp : peer(op, &slot_of(c, j)->out);
      if (!outs[j]) return 1;
    }
    bulk_begin(op);
    for (int j = 0; j < n; j++) {
      size_t jlo = slice_off(op->count, n, j), jn = slice_off(op->count, n, j + 1) - jlo;
      if (jn) hsr_coll_copy(recv + jlo * es, outs[j], jn * es, c->ctx->have_avx2);
    }
    bulk_end(op);
    return bulk_done(op, k, (uint64_t)(n - 1) * mine + (bytes - mine), 3);
  }
  default: return finish_when_all_done(op);
  }
}

static int advance_bcast(hsr_op_s *op) {
  hsr_comm *c = op->c;
  size_t bytes = op->count * hsr_dtype_size(op->dt);
  int n = c->size, r = c->rank, root = op->root;
  hsr_comm_counter *k = &c->counters[HSR_OP_BCAST];
  switch (op->phase) {
  case 0:
    if (r == root) {
      shm_desc d;
      if (!expose(op, op->recv, bytes, 0, bytes, &d, &op->src_in)) return 1;
      slot_of(c, r)->in = d;
    }
    publish(op, F_ARRIVE);
    op->phase = 1;
    return 1;
  case 1:
    if (r == root) {
      k->bytes_sent += (uint64_t)(n - 1) * bytes;
      op->phase = 2;
      return 1;
    }
    if (!ready(op, F_ARRIVE, root)) {
      op->wait_peer = root;
      return 0;
    }
    {
      const void *src = peer(op, &slot_of(c, root)->in);
      if (!src) return 1;
      hsr_coll_copy(op->recv, src, bytes, c->ctx->have_avx2);
    }
    k->bytes_recv += bytes;
    publish(op, F_DONE);
    hsr_coll_op_done(op);
    return 1;
  default:
    /* Only the root waits: its buffer must outlive every reader. */
    for (int j = 0; j < n; j++)
      if (j != r && !ready(op, F_DONE, j)) {
        op->wait_peer = j;
        return 0;
      }
    publish(op, F_DONE);
    hsr_coll_op_done(op);
    return 1;
  }
}

static int advance_barrier(hsr_op_s *op) {
  if (op->phase == 0) {
    publish(op, F_ARRIVE);
    op->phase = 1;
    return 1;
  }
  if (!wait_all(op, F_ARRIVE)) return 0;
  hsr_coll_op_done(op);
  return 1;
}

int hsr_coll_shm_advance(hsr_op_s *op) {
  switch (op->kind) {
  case HSR_OP_ALLGATHER: return advance_allgather(op);
  case HSR_OP_REDUCE_SCATTER: return advance_reduce_scatter(op);
  case HSR_OP_ALLREDUCE: return advance_allreduce(op);
  case HSR_OP_BCAST: return advance_bcast(op);
  default: return advance_barrier(op);
  }
}
