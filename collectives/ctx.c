/* The world context behind every host communicator: settings, node-shared
 * memory (seg.c), the network transport when the world spans nodes, and the
 * progress engine (progress.c); the communicators it drives. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/grow.h"
#include "coll.h"
#include "common/env.h"
#include "launch/boot_internal.h"

static hsr_status read_env(coll_ctx *x) {
  int p = 0; /* the registry's HSR_PROGRESS: thread|inline */
  hsr_status st = env_get_choice("HSR_PROGRESS", &p);
  if (st == HSR_OK) st = env_get_double("HSR_COMM_TIMEOUT", &x->timeout_s);
  if (st == HSR_OK) st = env_get_double("HSR_STOP_TIMEOUT", &x->stop_s);
  if (st == HSR_OK) st = coll_tuning_env(&x->tune);
  x->inline_progress = p == 1;
  return st;
}

/* The network transport's worker, then the fds progress sleeps on; peers
 * only ring a wake socket once every rank has bound its own. */
static hsr_status open_net(coll_ctx *x) {
  if (!x->net) return HSR_OK;
  HSR_CHECK(x->net->net_init(x));
  HSR_CHECK(coll_events_open(x));
  return boot_barrier(x->boot);
}

hsr_status coll_ctx_create(hsr_boot *boot, const coll_transport *net, coll_ctx **out) {
  coll_ctx *x = calloc(1, sizeof *x);
  if (!x) return hsr_error(HSR_ERR_NOMEM, "collectives context");
  x->boot = boot;
  x->net = net;
  x->rank = hsr_boot_rank(boot);
  x->size = hsr_boot_size(boot);
  x->node = boot_node(boot);
  x->evfd = x->epfd = x->net_fd = -1;
  pthread_mutex_init(&x->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&x->cv, &ca);
  pthread_condattr_destroy(&ca);
  x->have_avx2 = __builtin_cpu_supports("avx2");
  hsr_status st = read_env(x);
  if (st != HSR_OK) {
    free(x);
    return st;
  }
  st = seg_open(&x->seg, boot);
  if (st == HSR_OK) st = coll_fault_open(x);
  if (st == HSR_OK) st = open_net(x);
  if (st == HSR_OK) st = coll_progress_start(x);
  if (st != HSR_OK) {
    coll_ctx_release(x);
    return st;
  }
  *out = x;
  return HSR_OK;
}

void coll_ctx_release(coll_ctx *x) {
  if (!x) return;
  pthread_mutex_lock(&x->mu);
  if (x->refs > 0) x->refs--;
  int last = x->refs == 0;
  if (last) x->stop = 1;
  pthread_mutex_unlock(&x->mu);
  if (!last) return;
  coll_fault_hook(x, "teardown"); /* HSR_FAULT, a test hook */
  coll_progress_stop(x);
  seg_bye(&x->seg);      /* node peers no longer wait for this rank */
  coll_fault_goodbye(x); /* a node peer that died meanwhile is named before any network teardown */
  if (x->net) x->net->net_fini(x);
  coll_events_close(x);
  coll_fault_close(x);
  seg_close(&x->seg);
  free(x->comms);
  pthread_cond_destroy(&x->cv);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

hsr_status coll_ctx_add_comm(coll_ctx *x, hsr_comm *c) {
  pthread_mutex_lock(&x->mu);
  hsr_status st = grow_array(&x->comms, &x->cap_comms, x->ncomms, sizeof *x->comms, 8, "communicator table");
  if (st != HSR_OK) {
    pthread_mutex_unlock(&x->mu);
    return st;
  }
  x->comms[x->ncomms++] = c;
  x->refs++;
  pthread_mutex_unlock(&x->mu);
  return HSR_OK;
}

void coll_ctx_remove_comm(coll_ctx *x, hsr_comm *c) {
  pthread_mutex_lock(&x->mu);
  for (int i = 0; i < x->ncomms; i++)
    if (x->comms[i] == c) {
      x->comms[i] = x->comms[--x->ncomms];
      break;
    }
  seg_slot_free(&x->seg, c->slot);
  pthread_mutex_unlock(&x->mu);
}
