/* Every choice the module makes, in one place: which constructor a backend
 * uses, whether the world needs a network transport, which transport a host
 * communicator runs on (shared memory, UCX, two-level), and which row of the
 * transport's per-collective table an op takes. The HSR_ALGO_* knobs,
 * HSR_UCX_CHUNK, HSR_UCX_PEER_ERRORS and HSR_EMULATE_NET are read here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "hsr/env.h"
#include "two.h"

/* Set by hsr-run --emulate-net RATE inside the namespace it made: the UCX
 * context then uses TCP on loopback only (ucx_emul.c). */
static hsr_status emulate_env(coll_tuning *t) {
  const char *e = NULL;
  t->emulate[0] = 0;
  HSR_CHECK(hsr_env_get_str("HSR_EMULATE_NET", &e)); /* a tc rate (the registry checks it) */
  if (!e) return HSR_OK;
  if (strlen(e) >= sizeof t->emulate)
    return hsr_error(HSR_ERR_INVALID, "HSR_EMULATE_NET='%s': expected a tc rate such as 1gbit or 200mbit", e);
  snprintf(t->emulate, sizeof t->emulate, "%s", e);
  return HSR_OK;
}

hsr_status coll_tuning_env(coll_tuning *t) {
  /* the registry's choices: auto|ring|rd (COLL_AR_*), auto|off (COLL_TWO_*); ranges there too */
  hsr_status st = hsr_env_get_choice("HSR_ALGO_ALLREDUCE", &t->allreduce);
  if (st == HSR_OK) st = hsr_env_get_size("HSR_ALGO_ALLREDUCE_RD_MAX", &t->rd_max_bytes);
  if (st == HSR_OK) st = hsr_env_get_size("HSR_UCX_CHUNK", &t->ucx_chunk);
  if (st == HSR_OK) st = hsr_env_get_choice("HSR_ALGO_TWO_LEVEL", &t->two_level);
  /* off: UCX may use its shared-memory and CMA transports between ranks of
   * one host (simulated nodes), which cannot report a peer's death: faster,
   * but a dead peer can then abort a survivor inside UCX */
  int off = 0;
  if (st == HSR_OK) st = hsr_env_get_choice("HSR_UCX_PEER_ERRORS", &off);
  t->ucx_peer_errors = !off;
  if (st == HSR_OK) st = emulate_env(t);
  return st;
}

coll_world_fn coll_backend_world(hsr_backend backend) {
  static const coll_world_fn worlds[] = {[HSR_BACKEND_HOST] = coll_host_world, [HSR_BACKEND_NCCL] = nccl_world};
  return (unsigned)backend < sizeof worlds / sizeof worlds[0] ? worlds[backend] : NULL;
}

const coll_transport *coll_net_transport(hsr_boot *boot) {
  return hsr_boot_num_nodes(boot) > 1 ? &ucx_transport : NULL;
}

/* Members on one node: shared memory. Across nodes: two-level when
 * HSR_ALGO_TWO_LEVEL allows it and it is worth it (several members per node,
 * the same number on every node), flat UCX otherwise. */
hsr_status coll_pick_transport(hsr_comm *c) {
  if (c->intra) {
    c->tp = &shm_transport;
    return HSR_OK;
  }
  c->tp = &ucx_transport;
  if (c->ctx->tune.two_level == COLL_TWO_OFF) return HSR_OK;
  two_shape sh;
  HSR_CHECK(two_shape_of(c, &sh));
  hsr_status st = HSR_OK;
  if (sh.uniform && sh.local_n >= 2 && sh.nnodes >= 2) st = two_setup(c, &sh); /* sets c->tp */
  two_shape_free(&sh);
  return st;
}

/* UCX all-reduce: recursive doubling for power-of-two groups when asked
 * (HSR_ALGO_ALLREDUCE=rd) or, by default, up to HSR_ALGO_ALLREDUCE_RD_MAX bytes. */
int coll_rule_rd(const coll_op *op) {
  int n = op->c->size;
  if (n & (n - 1)) return 0;
  const coll_tuning *t = &op->c->ctx->tune;
  if (t->allreduce == COLL_AR_RING) return 0;
  if (t->allreduce == COLL_AR_RD) return 1;
  return op->count * hsr_dtype_size(op->dt) <= t->rd_max_bytes;
}

const coll_algo *coll_select(const coll_op *op) {
  const coll_rows *rows = op->c->tp->rows;
  if (!rows) return NULL;
  const coll_row *row = (*rows)[op->kind];
  for (int i = 0; i < COLL_ROWS && row[i].algo; i++)
    if (!row[i].fits || row[i].fits(op)) return row[i].algo;
  return NULL;
}
