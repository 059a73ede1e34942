/* What every op's algorithm choice reads: the knobs (HSR_ALGO_*,
 * HSR_UCX_CHUNK, HSR_UCX_PEER_ERRORS, HSR_EMULATE_NET) and the rule that picks
 * an op's row of its transport's table. Reads only the op and the context's
 * settings, so the progress engine and the transports can use it without
 * depending on anything above them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "common/env.h"
#include "common/dtype_internal.h"

/* Set by hsr-run --emulate-net RATE inside the namespace it made: the UCX
 * context then uses TCP on loopback only (ucx_emul.c). */
static hsr_status emulate_env(coll_tuning *t) {
  const char *e = NULL;
  t->emulate[0] = 0;
  HSR_CHECK(env_get_str("HSR_EMULATE_NET", &e)); /* a tc rate (the registry checks it) */
  if (!e) return HSR_OK;
  if (strlen(e) >= sizeof t->emulate)
    return hsr_error(HSR_ERR_INVALID, "HSR_EMULATE_NET='%s': expected a tc rate such as 1gbit or 200mbit", e);
  snprintf(t->emulate, sizeof t->emulate, "%s", e);
  return HSR_OK;
}

hsr_status coll_tuning_env(coll_tuning *t) {
  /* the registry's choices: auto|ring|rd (COLL_AR_*), auto|off (COLL_TWO_*); ranges there too */
  hsr_status st = env_get_choice("HSR_ALGO_ALLREDUCE", &t->allreduce);
  if (st == HSR_OK) st = env_get_size("HSR_ALGO_ALLREDUCE_RD_MAX", &t->rd_max_bytes);
  if (st == HSR_OK) st = env_get_size("HSR_UCX_CHUNK", &t->ucx_chunk);
  if (st == HSR_OK) st = env_get_choice("HSR_ALGO_TWO_LEVEL", &t->two_level);
  /* off: UCX may use its shared-memory and CMA transports between ranks of
   * one host (simulated nodes), which cannot report a peer's death: faster,
   * but a dead peer can then abort a survivor inside UCX */
  int off = 0;
  if (st == HSR_OK) st = env_get_choice("HSR_UCX_PEER_ERRORS", &off);
  t->ucx_peer_errors = !off;
  if (st == HSR_OK) st = emulate_env(t);
  return st;
}

/* UCX all-reduce: the model's rule (common/coll_model.c) on the context's settings. */
int coll_rule_rd(const coll_op *op) {
  const coll_tuning *t = &op->c->ctx->tune;
  const coll_model_cfg cfg = {.allreduce = t->allreduce, .rd_max_bytes = (double)t->rd_max_bytes};
  return coll_model_rd(&cfg, op->c->size, (double)(op->count * dtype_size(op->dt)));
}

const coll_algo *coll_select(const coll_op *op) {
  const coll_rows *rows = op->c->tp->rows;
  if (!rows) return NULL;
  const coll_row *row = (*rows)[op->kind];
  for (int i = 0; i < COLL_ROWS && row[i].algo; i++)
    if (!row[i].fits || row[i].fits(op)) return row[i].algo;
  return NULL;
}
