/* Shared-memory all-gather: every rank copies every shard into its own output,
 * all ranks in the same order, with streaming stores. */
#include "algos.h"
#include "kern.h"
#include "shm.h"
#include "common/dtype_internal.h"

/* Publishes where my input is. */
static int start(coll_op *op) {
  hsr_comm *c = op->c;
  size_t bytes = op->count * dtype_size(op->dt);
  seg_desc d;
  if (op->place.direct) { /* my blocks are already in place in my (registered) recv */
    seg_describe(&c->ctx->seg, op->recv, bytes * (size_t)c->size, &d);
    d.scattered = 1;
  } else {
    if (!shm_expose(op, op->send, bytes, 0, bytes, &d, &shm_op_of(op)->src_in)) return 1;
    d.scattered = 0;
  }
  shm_slot(c, c->rank)->in = d;
  shm_publish(op, SHM_ARRIVE);
  op->phase = 1;
  return 1;
}

/* Peer j's block, or (two-level) its m sub-blocks to their scattered places. */
static void copy_from(coll_op *op, int j, const char *src, size_t bytes) {
  hsr_comm *c = op->c;
  char *recv = op->recv;
  const coll_place *pl = &op->place;
  if (!pl->perm) {
    coll_copy(recv + (size_t)j * bytes, src, bytes, c->ctx->have_avx2);
    return;
  }
  int scattered = j != c->rank && shm_slot(c, j)->in.scattered;
  size_t sub = bytes / (size_t)pl->perm_m;
  for (int i = 0; i < pl->perm_m; i++) {
    size_t at = (size_t)pl->perm[j * pl->perm_m + i] * sub;
    coll_copy(recv + at, scattered ? src + at : src + (size_t)i * sub, sub, c->ctx->have_avx2);
  }
}

static int gather(coll_op *op) {
  hsr_comm *c = op->c;
  size_t bytes = op->count * dtype_size(op->dt);
  int n = c->size, r = c->rank;
  if (!shm_wait_all(op, SHM_ARRIVE)) return 0;
  const char *srcs[n];
  for (int j = 0; j < n; j++) {
    srcs[j] = NULL;
    if (j == r && op->place.direct) continue;
    srcs[j] = j == r ? shm_op_of(op)->src_in : shm_peer(op, &shm_slot(c, j)->in);
    if (!srcs[j]) return 1;
  }
  shm_bulk_begin(op);
  for (int j = 0; j < n; j++)
    if (!(j == r && op->place.direct)) copy_from(op, j, srcs[j], bytes);
  shm_bulk_end(op);
  return shm_bulk_done(op, (uint64_t)(n - 1) * bytes, 2);
}

static int advance(coll_op *op) { return op->phase == 1 ? gather(op) : shm_finish_when_all_done(op); }

const coll_algo shm_allgather = {.name = "shm", .tp = &shm_transport, .start = start, .advance = advance, .model = &coll_model_shm};
