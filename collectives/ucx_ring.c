/* UCX ring, pipelined in chunks: all-gather (n-1 steps passing blocks to the
 * right), reduce-scatter (n-1 steps passing partial sums), and all-reduce as
 * reduce-scatter then all-gather of near-equal slices. */
#include <stdlib.h>

#include "algos.h"
#include "kern.h"
#include "ucx.h"
#include "common/dtype_internal.h"

/* Block j of an op, in elements: equal blocks for all-gather/reduce-scatter,
 * near-equal slices of `count` for all-reduce. */
static void block(const coll_op *op, int j, size_t *off, size_t *len) {
  int n = op->c->size;
  if (op->kind == HSR_OP_ALLREDUCE) {
    size_t lo = op->count * (size_t)j / (size_t)n, hi = op->count * (size_t)(j + 1) / (size_t)n;
    *off = lo, *len = hi - lo;
  } else {
    *off = (size_t)(op->place.blk_at ? op->place.blk_at[j] : j) * op->count;
    *len = op->count;
  }
}

static size_t max_block(const coll_op *op) {
  size_t maxb = 0;
  for (int j = 0; j < op->c->size; j++) {
    size_t o, l;
    block(op, j, &o, &l);
    if (l > maxb) maxb = l;
  }
  return maxb;
}

/* Chunk k of block j: [*lo, *lo + *len) in elements from the block start. */
static void chunk_of(coll_op *op, int j, int k, size_t *boff, size_t *lo, size_t *len) {
  size_t l, ce = ucx_op_of(op)->chunk_elems;
  block(op, j, boff, &l);
  size_t a = (size_t)k * ce;
  *lo = a < l ? a : l;
  *len = a < l ? (l - a < ce ? l - a : ce) : 0;
}

/* Reduce-scatter input block j (all-reduce: slice j of send). */
static const char *rs_in(const coll_op *op, int j, size_t es) {
  size_t off, len;
  block(op, j, &off, &len);
  return (const char *)op->send + off * es;
}
/* Where this rank's reduced block goes. */
static char *rs_out(const coll_op *op, size_t es) {
  size_t off, len;
  block(op, op->c->rank, &off, &len);
  return op->kind == HSR_OP_ALLREDUCE ? (char *)op->recv + off * es : op->recv;
}

/* Chunk k's accumulator and receive buffer in the reduce-scatter scratch. */
static char *rs_acc(coll_op *op, int k, size_t es) {
  ucx_op *u = ucx_op_of(op);
  return (char *)u->tmp + (size_t)k * 2 * u->chunk_elems * es;
}

/* Posts chunk ch's messages for its current stage and step. */
static int ring_post(coll_op *op, ucx_chunk *ch, size_t es) {
  hsr_comm *c = op->c;
  int n = c->size, r = c->rank, s = ch->step, k = ch->k, right = ucx_mod(r + 1, n);
  size_t sb_off, s_lo, s_len, rb_off, r_lo, r_len;
  if (ch->stage == UCX_S_RS) {
    int sb = ucx_mod(r - s - 1, n), rb = ucx_mod(r - s - 2, n);
    chunk_of(op, sb, k, &sb_off, &s_lo, &s_len);
    chunk_of(op, rb, k, &rb_off, &r_lo, &r_len);
    char *acc = rs_acc(op, k, es), *rcv = acc + ucx_op_of(op)->chunk_elems * es;
    const char *src = s == 0 ? rs_in(op, sb, es) + s_lo * es : acc;
    if (!ucx_recv(ch, rcv, r_len * es, ucx_tag(op, UCX_S_RS, s, k)) ||
        !ucx_send(ch, right, src, s_len * es, ucx_tag(op, UCX_S_RS, s, k)))
      return 0;
  } else {
    int sb = ucx_mod(r - s, n), rb = ucx_mod(r - s - 1, n);
    chunk_of(op, sb, k, &sb_off, &s_lo, &s_len);
    chunk_of(op, rb, k, &rb_off, &r_lo, &r_len);
    char *buf = op->recv;
    if (!ucx_recv(ch, buf + (rb_off + r_lo) * es, r_len * es, ucx_tag(op, UCX_S_AG, s, k)) ||
        !ucx_send(ch, right, buf + (sb_off + s_lo) * es, s_len * es, ucx_tag(op, UCX_S_AG, s, k)))
      return 0;
  }
  coll_op_count_peer(op, right, s_len * es, ucx_mod(r - 1, n), r_len * es);
  ch->posted = 1;
  return 1;
}

/* Chunk ch's step has arrived: reduce (reduce-scatter) and move on. */
static void ring_step_done(coll_op *op, ucx_chunk *ch, size_t es) {
  int n = op->c->size, r = op->c->rank, s = ch->step, k = ch->k;
  if (ch->stage == UCX_S_RS) {
    int rb = ucx_mod(r - s - 2, n);
    size_t boff, lo, len;
    chunk_of(op, rb, k, &boff, &lo, &len);
    char *acc = rs_acc(op, k, es), *rcv = acc + ucx_op_of(op)->chunk_elems * es;
    const void *ins[2] = {rcv, rs_in(op, rb, es) + lo * es};
    int last = s == n - 2;
    void *out = last ? rs_out(op, es) + lo * es : acc; /* rb == r on the last step */
    hsr_redop rop = last ? op->redop : (op->redop == HSR_AVG ? HSR_SUM : op->redop);
    coll_reduce(op->dt, rop, out, ins, 2, len, n);
  }
  ch->posted = 0;
  if (++ch->step < n - 1) return;
  if (ch->stage == UCX_S_RS && op->kind == HSR_OP_ALLREDUCE) {
    ch->stage = UCX_S_AG;
    ch->step = 0;
    return;
  }
  ch->finished = 1;
  ucx_op_of(op)->chunks_left--;
}

/* A group of one: the reduction of one input, or a copy. */
static void ring_of_one(coll_op *op, size_t es) {
  size_t o, l;
  block(op, 0, &o, &l);
  if (op->kind == HSR_OP_ALLGATHER) {
    coll_copy(op->recv, op->send, l * es, op->c->ctx->have_avx2);
  } else {
    const void *in[1] = {rs_in(op, 0, es)};
    coll_reduce(op->dt, op->redop, rs_out(op, es), in, 1, l, 1);
  }
  coll_op_finish(op);
}

/* Splits the blocks into chunks of about HSR_UCX_CHUNK bytes (at most 1000). */
static int start(coll_op *op) {
  hsr_comm *c = op->c;
  ucx_op *u = ucx_op_of(op);
  size_t es = dtype_size(op->dt);
  u->step = 0;
  if (op->kind == HSR_OP_ALLGATHER) {
    size_t off, len;
    block(op, c->rank, &off, &len);
    coll_copy((char *)op->recv + off * es, op->send, len * es, c->ctx->have_avx2);
  }
  size_t maxb = max_block(op), target = c->ctx->tune.ucx_chunk / es;
  if (target == 0) target = 1;
  int nch = (int)((maxb + target - 1) / target);
  if (nch < 1) nch = 1;
  if (nch > 1000) nch = 1000;
  u->chunk_elems = (maxb + (size_t)nch - 1) / (size_t)nch;
  if (u->chunk_elems == 0) u->chunk_elems = 1;
  ucx_chunk *chs = calloc((size_t)nch, sizeof *chs);
  if (!chs) {
    coll_op_fail(op, HSR_ERR_NOMEM, "chunk table");
    return 1;
  }
  free(u->chunks);
  u->chunks = chs;
  u->nchunks = u->chunks_left = nch;
  int first = op->kind == HSR_OP_ALLGATHER ? UCX_S_AG : UCX_S_RS;
  for (int k = 0; k < nch; k++) chs[k] = (ucx_chunk){.op = op, .k = k, .stage = first};
  if (first == UCX_S_RS) {
    hsr_status st = coll_scratch(c, 2 * (size_t)nch * u->chunk_elems * es, &u->tmp);
    if (st != HSR_OK) {
      coll_op_fail(op, st, "scratch: %s", hsr_last_error());
      return 1;
    }
  }
  if (c->size == 1) ring_of_one(op, es);
  return 1;
}

/* Every chunk that can move does: post its step, or finish it once arrived. */
static int advance(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  size_t es = dtype_size(op->dt);
  int moved = 0, left = ucx_mod(op->c->rank - 1, op->c->size);
  if (op->xfer_err) { /* a transfer failed: the verdict's, never a sum of what did not arrive */
    op->wait_peer = left;
    return 0;
  }
  for (int k = 0; k < u->nchunks && !op->fin; k++) {
    ucx_chunk *ch = &u->chunks[k];
    if (ch->finished) continue;
    if (!ch->posted) {
      if (!ring_post(op, ch, es)) return 1;
      moved = 1;
    }
    if (ch->posted && ch->pending == 0) {
      ring_step_done(op, ch, es);
      moved = 1;
    }
  }
  if (op->fin) return 1;
  if (u->chunks_left == 0) {
    coll_op_finish(op);
    return 1;
  }
  if (!moved) op->wait_peer = left;
  return moved;
}

const coll_algo ucx_ring_allgather = {.name = "ring", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_ring};
const coll_algo ucx_ring_reduce_scatter = {.name = "ring", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_ring};
const coll_algo ucx_ring_allreduce = {
    .name = "ring (reduce-scatter + all-gather)", .tp = &ucx_transport, .start = start, .advance = advance, .model = &coll_model_ucx_ring};
