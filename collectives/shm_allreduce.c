/* Shared-memory all-reduce: each rank reduces its slice of the vector from
 * every peer's input (reduce-scatter), a `mid` barrier, then every rank copies
 * every reduced slice (all-gather). */
#include "algos.h"
#include "kern.h"
#include "shm.h"
#include "common/dtype_internal.h"

static size_t slice_off(size_t count, int n, int j) { return count * (size_t)j / (size_t)n; }

/* Publishes my input and where my reduced slice goes: straight into recv when
 * peers can read it, else into the comm's scratch after the staged input. */
static int start(coll_op *op) {
  hsr_comm *c = op->c;
  shm_op *s = shm_op_of(op);
  size_t es = dtype_size(op->dt), bytes = op->count * es;
  int n = c->size, r = c->rank;
  size_t lo = slice_off(op->count, n, r), mine = (slice_off(op->count, n, r + 1) - lo) * es;
  char *recv = op->recv;
  seg_desc d, o;
  if (!shm_expose(op, op->send, bytes, 0, bytes + mine, &d, &s->src_in)) return 1;
  if (mine == 0 || seg_describe(&c->ctx->seg, recv + lo * es, mine, &o)) {
    s->tmp = recv + lo * es;
    if (mine == 0) o = (seg_desc){.rank = c->ctx->rank, .seg = -1};
  } else {
    void *scr;
    hsr_status st = coll_scratch(c, bytes + mine, &scr);
    if (st != HSR_OK) {
      coll_op_fail(op, st, "staging: %s", hsr_last_error());
      return 1;
    }
    s->tmp = (char *)scr + bytes;
    seg_describe(&c->ctx->seg, s->tmp, mine, &o);
  }
  shm_slot(c, r)->in = d;
  shm_slot(c, r)->out = o;
  shm_publish(op, SHM_ARRIVE);
  op->phase = 1;
  return 1;
}

static int reduce_mine(coll_op *op) {
  hsr_comm *c = op->c;
  size_t es = dtype_size(op->dt);
  int n = c->size, r = c->rank;
  size_t lo = slice_off(op->count, n, r), hi = slice_off(op->count, n, r + 1);
  if (!shm_wait_all(op, SHM_ARRIVE)) return 0;
  if (hi > lo) {
    const void *ins[n];
    for (int j = 0; j < n; j++) {
      const char *base = j == r ? shm_op_of(op)->src_in : shm_peer(op, &shm_slot(c, j)->in);
      if (!base) return 1;
      ins[j] = base + lo * es;
    }
    shm_bulk_begin(op);
    coll_reduce(op->dt, op->redop, shm_op_of(op)->tmp, ins, n, hi - lo, n);
    shm_bulk_end(op);
  }
  shm_publish(op, SHM_MID);
  op->phase = 2;
  return 1;
}

static int gather_all(coll_op *op) {
  hsr_comm *c = op->c;
  size_t es = dtype_size(op->dt), bytes = op->count * es;
  int n = c->size, r = c->rank;
  size_t mine = (slice_off(op->count, n, r + 1) - slice_off(op->count, n, r)) * es;
  char *recv = op->recv;
  if (!shm_wait_all(op, SHM_MID)) return 0;
  const void *outs[n];
  for (int j = 0; j < n; j++) {
    size_t jn = slice_off(op->count, n, j + 1) - slice_off(op->count, n, j);
    outs[j] = NULL;
    if (!jn) continue;
    outs[j] = j == r ? shm_op_of(op)->tmp : shm_peer(op, &shm_slot(c, j)->out);
    if (!outs[j]) return 1;
  }
  shm_bulk_begin(op);
  for (int j = 0; j < n; j++) {
    size_t jlo = slice_off(op->count, n, j), jn = slice_off(op->count, n, j + 1) - jlo;
    if (jn) coll_copy(recv + jlo * es, outs[j], jn * es, c->ctx->have_avx2);
  }
  shm_bulk_end(op);
  return shm_bulk_done(op, (uint64_t)(n - 1) * mine + (bytes - mine), 3);
}

static int advance(coll_op *op) {
  switch (op->phase) {
  case 1: return reduce_mine(op);
  case 2: return gather_all(op);
  default: return shm_finish_when_all_done(op);
  }
}

const coll_algo shm_allreduce = {.name = "shm", .tp = &shm_transport, .start = start, .advance = advance, .model = &coll_model_shm};
