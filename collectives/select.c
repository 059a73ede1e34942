/* The choices above the transports, in one place: which constructor a
 * backend uses (world, split), whether the world needs a network transport,
 * and which transport a new host communicator runs on: shared memory, UCX, or
 * the two-level composite (which builds its parts from the transports
 * itself). The public API reaches communicators' construction only here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "two.h"
#include "launch/boot_internal.h"

static const coll_transport *net_transport(hsr_boot *boot) { return boot_num_nodes(boot) > 1 ? &ucx_transport : NULL; }

/* Members on one node: shared memory. Across nodes: two-level when
 * HSR_ALGO_TWO_LEVEL allows it and it is worth it (several members per node,
 * the same number on every node), flat UCX otherwise. */
static hsr_status pick_transport(hsr_comm *c) {
  if (c->intra) {
    c->tp = &shm_transport;
    return HSR_OK;
  }
  c->tp = &ucx_transport;
  if (c->ctx->tune.two_level == COLL_TWO_OFF) return HSR_OK;
  two_shape sh;
  HSR_CHECK(two_shape_of(c, &sh));
  hsr_status st = HSR_OK;
  if (coll_model_transport(sh.nnodes, sh.uniform ? sh.local_n : 0, c->ctx->tune.two_level) == COLL_MODEL_TWO)
    st = two_setup(c, &sh); /* sets c->tp */
  two_shape_free(&sh);
  return st;
}

/* A new host communicator gets its transport, or is freed. */
static hsr_status pick(hsr_comm *c, hsr_comm **out) {
  hsr_status st = pick_transport(c);
  if (st != HSR_OK) {
    coll_host_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

static hsr_status host_world(hsr_boot *boot, hsr_backend backend, hsr_comm **out) {
  hsr_comm *c;
  HSR_CHECK(coll_group_world(boot, backend, net_transport(boot), &c));
  return pick(c, out);
}

static hsr_status host_split(hsr_comm *parent, int color, int key, hsr_comm **out) {
  hsr_comm *c = NULL;
  HSR_CHECK(coll_group_split(parent, color, key, &c));
  if (!c) return HSR_OK; /* color < 0: joins none */
  return pick(c, out);
}

const coll_backend *coll_backend_of(hsr_backend backend) {
  static const coll_backend b[] = {
      [HSR_BACKEND_HOST] = {host_world, host_split}, [HSR_BACKEND_NCCL] = {nccl_world, nccl_split}};
  return (unsigned)backend < sizeof b / sizeof b[0] ? &b[backend] : NULL;
}

void coll_model_each_algo(void (*fn)(const char *tp, int op, const char *algo, const coll_model_algo *m, void *arg),
                          void *arg) {
  const coll_transport *const tps[] = {&shm_transport, &ucx_transport, &two_transport};
  for (size_t t = 0; t < sizeof tps / sizeof tps[0]; t++)
    for (int k = 0; k < HSR_OP_COUNT; k++)
      for (int i = 0; i < COLL_ROWS && (*tps[t]->rows)[k][i].algo; i++) {
        const coll_algo *a = (*tps[t]->rows)[k][i].algo;
        fn(tps[t]->name, k, a->name, a->model, arg);
      }
}
