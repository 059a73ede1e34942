/* UCX direct all-reduce (peer communicators, ucx_peer.c): member j reduces
 * slice j of the vector (every member's slice j, summed in member order) and
 * sends it to every other (a reduce-scatter then an all-gather, one message
 * per pair and phase, each tagged with its sender). The ring's volume, but a
 * member that does not send stalls no one else's message: an op that does
 * not complete knows exactly whom it has not heard from (ucx_direct_peer),
 * which is what a peer communicator's verdict names.
 *
 * Chunks: [0, n) the reduce-scatter receives, [n, 2n) the all-gather
 * receives, [2n, 3n) the sends to each member. */
#include <stdlib.h>

#include "algos.h"
#include "kern.h"
#include "ucx.h"
#include "common/dtype_internal.h"

enum { P_RS = 1, P_AG };

static size_t off_of(size_t len, int n, int j) { return (size_t)((unsigned long long)len * (unsigned)j / (unsigned)n); }

/* Where member j's contribution to my slice waits (the scratch skips my own). */
static char *rs_slot(coll_op *op, int j, size_t mine, size_t es) {
  int me = op->c->rank;
  return (char *)ucx_op_of(op)->tmp + (size_t)(j < me ? j : j - 1) * mine * es;
}

static int start(coll_op *op) {
  hsr_comm *c = op->c;
  ucx_op *u = ucx_op_of(op);
  int n = c->size, me = c->rank;
  size_t es = dtype_size(op->dt), lo = off_of(op->count, n, me), mine = off_of(op->count, n, me + 1) - lo;
  if (n == 1) {
    const void *in[1] = {op->send};
    coll_reduce(op->dt, op->redop, op->recv, in, 1, op->count, 1);
    coll_op_finish(op);
    return 1;
  }
  ucx_chunk *chs = calloc((size_t)n * 3, sizeof *chs);
  if (!chs) {
    coll_op_fail(op, HSR_ERR_NOMEM, "chunk table");
    return 1;
  }
  free(u->chunks);
  u->chunks = chs;
  u->nchunks = 3 * n;
  for (int k = 0; k < 3 * n; k++) chs[k] = (ucx_chunk){.op = op, .k = k % n};
  hsr_status st = coll_scratch(c, (size_t)(n - 1) * mine * es + 1, &u->tmp);
  if (st != HSR_OK) {
    coll_op_fail(op, st, "scratch: %s", hsr_last_error());
    return 1;
  }
  /* every receive first, so that whatever arrives has its place */
  for (int j = 0; j < n; j++) {
    if (j == me) continue;
    size_t o = off_of(op->count, n, j), l = off_of(op->count, n, j + 1) - o;
    if (!ucx_recv(&chs[j], rs_slot(op, j, mine, es), mine * es, ucx_tag(op, UCX_S_RS, j, 0)) ||
        !ucx_recv(&chs[n + j], (char *)op->recv + o * es, l * es, ucx_tag(op, UCX_S_AG, j, 0)))
      return 1;
  }
  for (int d = 1; d < n; d++) { /* spread: each sends to its right neighbour first */
    int j = (me + d) % n;
    size_t o = off_of(op->count, n, j), l = off_of(op->count, n, j + 1) - o;
    if (!ucx_send(&chs[2 * n + j], j, (const char *)op->send + o * es, l * es, ucx_tag(op, UCX_S_RS, me, 0))) return 1;
    coll_op_count_peer(op, j, l * es, j, mine * es);
  }
  op->phase = P_RS;
  return 1;
}

static int advance(coll_op *op) {
  hsr_comm *c = op->c;
  ucx_op *u = ucx_op_of(op);
  int n = c->size, me = c->rank;
  if (op->xfer_err) return 0; /* a transfer failed: the caller's verdict, never a sum of what did not arrive */
  size_t es = dtype_size(op->dt), lo = off_of(op->count, n, me), mine = off_of(op->count, n, me + 1) - lo;
  for (int j = 0; j < n; j++)
    if (j != me && u->chunks[(op->phase == P_RS ? 0 : n) + j].pending) {
      op->wait_peer = j;
      return 0;
    }
  if (op->phase == P_RS) { /* my slice: every member's, in member order */
    const void **ins = malloc((size_t)n * sizeof *ins);
    if (!ins) {
      coll_op_fail(op, HSR_ERR_NOMEM, "reduction inputs");
      return 1;
    }
    for (int j = 0; j < n; j++) ins[j] = j == me ? (const char *)op->send + lo * es : rs_slot(op, j, mine, es);
    coll_reduce(op->dt, op->redop, (char *)op->recv + lo * es, ins, n, mine, n);
    free(ins);
    for (int d = 1; d < n; d++) {
      int j = (me + d) % n;
      if (!ucx_send(&u->chunks[2 * n + j], j, (char *)op->recv + lo * es, mine * es, ucx_tag(op, UCX_S_AG, me, 0)))
        return 1;
      size_t o = off_of(op->count, n, j);
      coll_op_count_peer(op, j, mine * es, j, (off_of(op->count, n, j + 1) - o) * es);
    }
    op->phase = P_AG;
    return 1;
  }
  for (int j = 0; j < n; j++)
    if (j != me && u->chunks[2 * n + j].pending) {
      op->wait_peer = j;
      return 0;
    }
  op->wait_peer = -1;
  coll_op_finish(op);
  return 1;
}

void ucx_direct_peer(coll_op *op, int j, int *recv, int *send, int *failed) {
  ucx_op *u = ucx_op_of(op);
  int n = op->c->size;
  *recv = *send = *failed = 0;
  if (!u->chunks || u->nchunks != 3 * n || j == op->c->rank || op->phase < P_RS) return;
  const ucx_chunk *r = &u->chunks[(op->phase == P_RS ? 0 : n) + j], *s = &u->chunks[2 * n + j];
  *recv = r->pending > 0;
  *send = s->pending > 0;
  *failed = u->chunks[j].failed || u->chunks[n + j].failed || s->failed;
}

const coll_algo ucx_direct_allreduce = {.name = "direct (reduce-scatter + all-gather)",
                                        .tp = &ucx_peer_transport,
                                        .start = start,
                                        .advance = advance,
                                        .model = &coll_model_ucx_ring};
