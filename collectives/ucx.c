/* UCX transport: the context's worker (setup, progress, arming, teardown),
 * endpoints, tagged messages and their callbacks, cancellation, and the
 * transport's table. The algorithms are ucx_ring.c (all-gather,
 * reduce-scatter, all-reduce as both), ucx_allreduce_rd.c, ucx_bcast_flat.c
 * and ucx_barrier_dissem.c. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "ucx.h"

/* ---- the context's worker ---------------------------------------------------- */

/* Every rank's worker address, through the bootstrap. */
static hsr_status exchange_addresses(coll_ctx *x, ucx_ctx *u) {
  ucp_address_t *addr;
  size_t len;
  ucs_status_t us = ucp_worker_get_address(u->worker, &addr, &len);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_address: %s", ucs_status_string(us));
  uint64_t mylen = len, *lens = calloc((size_t)x->size, sizeof *lens);
  hsr_status st = lens ? hsr_boot_allgather(x->boot, &mylen, sizeof mylen, lens) : hsr_error(HSR_ERR_NOMEM, "lens");
  if (st == HSR_OK) {
    for (int r = 0; r < x->size; r++)
      if (lens[r] > u->addr_max) u->addr_max = lens[r];
    char *mine = calloc(1, u->addr_max);
    u->addrs = calloc((size_t)x->size, u->addr_max);
    if (!mine || !u->addrs) {
      st = hsr_error(HSR_ERR_NOMEM, "UCX address table");
    } else {
      memcpy(mine, addr, len);
      st = hsr_boot_allgather(x->boot, mine, u->addr_max, u->addrs);
    }
    free(mine);
  }
  free(lens);
  ucp_worker_release_address(u->worker, addr);
  return st;
}

static hsr_status ucx_net_init(coll_ctx *x) {
  ucx_ctx *u = calloc(1, sizeof *u);
  if (!u) return hsr_error(HSR_ERR_NOMEM, "UCX state");
  x->net_state = u;
  ucp_config_t *cfg;
  ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_config_read: %s", ucs_status_string(us));
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                    .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                    .mt_workers_shared = 0};
  us = ucp_init(&p, cfg, &u->ucp);
  ucp_config_release(cfg);
  if (us != UCS_OK)
    return hsr_error(HSR_ERR_TRANSPORT, "ucp_init: %s (check UCX_TLS: it needs a transport such as posix, sysv or tcp)",
                     ucs_status_string(us));
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SERIALIZED};
  us = ucp_worker_create(u->ucp, &wp, &u->worker);
  if (us != UCS_OK) {
    u->worker = NULL;
    return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_create: %s", ucs_status_string(us));
  }
  HSR_CHECK(exchange_addresses(x, u));
  u->eps = calloc((size_t)x->size, sizeof *u->eps);
  if (!u->eps) return hsr_error(HSR_ERR_NOMEM, "endpoint table");
  us = ucp_worker_get_efd(u->worker, &x->net_fd);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_efd: %s", ucs_status_string(us));
  return HSR_OK;
}

static void wait_req(ucx_ctx *u, ucs_status_ptr_t r) {
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double t0 = hsr_clock_s();
  while (ucp_request_check_status(r) == UCS_INPROGRESS && hsr_clock_s() - t0 < 10) {
    if (!ucp_worker_progress(u->worker)) sched_yield();
  }
  ucp_request_free(r);
}

static void ucx_net_fini(coll_ctx *x) {
  ucx_ctx *u = ucx_ctx_of(x);
  if (!u) return;
  if (u->worker) {
    /* Deliver what is still in flight, then let every rank get here before any
     * endpoint goes away (a forced close would drop a peer's last message). */
    ucp_request_param_t prm = {.op_attr_mask = 0};
    wait_req(u, ucp_worker_flush_nbx(u->worker, &prm));
    hsr_boot_barrier(x->boot);
    if (u->eps)
      for (int r = 0; r < x->size; r++)
        if (u->eps[r]) {
          ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
          wait_req(u, ucp_ep_close_nbx(u->eps[r], &cp));
        }
    ucp_worker_destroy(u->worker);
  }
  if (u->ucp) ucp_cleanup(u->ucp);
  free(u->eps);
  free(u->addrs);
  free(u);
  x->net_state = NULL;
}

static int ucx_net_progress(coll_ctx *x) { return ucp_worker_progress(ucx_ctx_of(x)->worker) != 0; }
static int ucx_net_arm(coll_ctx *x) { return ucp_worker_arm(ucx_ctx_of(x)->worker) == UCS_ERR_BUSY; }

static ucp_ep_h ep_of(coll_ctx *x, int wr) {
  ucx_ctx *u = ucx_ctx_of(x);
  if (!u->eps[wr]) {
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address = (const ucp_address_t *)((char *)u->addrs + (size_t)wr * u->addr_max)};
    ucs_status_t us = ucp_ep_create(u->worker, &ep, &u->eps[wr]);
    if (us != UCS_OK) {
      hsr_error(HSR_ERR_TRANSPORT, "ucp_ep_create to world rank %d: %s", wr, ucs_status_string(us));
      u->eps[wr] = NULL;
    }
  }
  return u->eps[wr];
}

/* ---- messages ------------------------------------------------------------------ */

static void forget(ucx_chunk *ch, void *req, ucs_status_t status) {
  coll_op *op = ch->op;
  ch->pending--;
  op->inflight--;
  for (int i = 0; i < 2; i++)
    if (ch->reqs[i] == req) ch->reqs[i] = NULL;
  if (status != UCS_OK && status != UCS_ERR_CANCELED && op->st == HSR_OK && !op->fin)
    coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: UCX transfer failed: %s", op->c->name,
                 hsr_op_name(op->kind), ucs_status_string(status));
  ucp_request_free(req);
  coll_op_reap(op);
}

static void send_cb(void *req, ucs_status_t status, void *user) { forget(user, req, status); }
static void recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  (void)info;
  forget(user, req, status);
}

uint64_t ucx_tag(const coll_op *op, int stage, int step, int k) {
  return ((op->c->id & 0xfffffull) << 44) | ((op->seq & 0xfffffull) << 24) | ((uint64_t)(stage & 3) << 22) |
         ((uint64_t)(step & 0xfff) << 10) | (uint64_t)(k & 0x3ff);
}

static void track(ucx_chunk *ch, ucs_status_ptr_t r) {
  ch->pending++;
  ch->op->inflight++;
  for (int i = 0; i < 2; i++)
    if (!ch->reqs[i]) {
      ch->reqs[i] = r;
      return;
    }
}

int ucx_send(ucx_chunk *ch, int peer, const void *buf, size_t bytes, uint64_t tag) {
  coll_op *op = ch->op;
  ucp_ep_h ep = ep_of(op->c->ctx, op->c->world[peer]);
  if (!ep) {
    coll_op_fail(op, HSR_ERR_TRANSPORT, "%s", hsr_last_error());
    return 0;
  }
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.send = send_cb, .user_data = ch};
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, bytes, tag, &p);
  if (UCS_PTR_IS_ERR(r)) {
    coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: send to rank %d: %s", op->c->name,
                 hsr_op_name(op->kind), peer, ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(ch, r);
  return 1;
}

int ucx_recv(ucx_chunk *ch, void *buf, size_t bytes, uint64_t tag) {
  coll_op *op = ch->op;
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.recv = recv_cb, .user_data = ch};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(ucx_ctx_of(op->c->ctx)->worker, buf, bytes, tag, ~0ull, &p);
  if (UCS_PTR_IS_ERR(r)) {
    coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: receive: %s", op->c->name, hsr_op_name(op->kind),
                 ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(ch, r);
  return 1;
}

ucx_chunk *ucx_one_chunk(coll_op *op) {
  ucx_op *u = ucx_op_of(op);
  ucx_chunk *ch = calloc(1, sizeof *ch);
  if (!ch) {
    coll_op_fail(op, HSR_ERR_NOMEM, "chunk");
    return NULL;
  }
  *ch = (ucx_chunk){.op = op};
  free(u->chunks);
  u->chunks = ch;
  u->nchunks = 1;
  return ch;
}

int ucx_waiting(coll_op *op, int peer) {
  if (op->inflight > 0) {
    op->wait_peer = peer;
    return 1;
  }
  op->wait_peer = -1;
  return 0;
}

/* Cancels what a failed op still has posted (called with x->mu held). */
static void ucx_cancel(coll_op *op) {
  ucx_ctx *u = ucx_ctx_of(op->c->ctx);
  ucx_op *uo = ucx_op_of(op);
  if (!u || op->inflight <= 0 || !uo->chunks) return;
  for (int k = 0; k < uo->nchunks; k++)
    for (int i = 0; i < 2; i++)
      if (uo->chunks[k].reqs[i]) ucp_request_cancel(u->worker, uo->chunks[k].reqs[i]);
  for (int k = 0; k < 100 && op->inflight > 0; k++) ucp_worker_progress(u->worker);
}

static void ucx_op_fini(coll_op *op) { free(ucx_op_of(op)->chunks); }

/* ---- the table --------------------------------------------------------------------- */

static const coll_rows ucx_rows = {
    [HSR_OP_ALLGATHER] = {{&ucx_ring_allgather}},
    [HSR_OP_REDUCE_SCATTER] = {{&ucx_ring_reduce_scatter}},
    [HSR_OP_ALLREDUCE] = {{&ucx_rd_allreduce, coll_rule_rd}, {&ucx_ring_allreduce}},
    [HSR_OP_BCAST] = {{&ucx_flat_bcast}},
    [HSR_OP_BARRIER] = {{&ucx_dissem_barrier}},
};

const coll_transport ucx_transport = {
    .name = "ucx",
    .rows = &ucx_rows,
    .start = coll_host_start,
    .test = coll_host_test,
    .wait = coll_host_wait,
    .cancel = ucx_cancel,
    .op_fini = ucx_op_fini,
    .mem_alloc = coll_host_mem_alloc,
    .mem_free = coll_host_mem_free,
    .set_stream = coll_host_set_stream,
    .split = coll_host_split,
    .free = coll_host_free,
    .net_init = ucx_net_init,
    .net_fini = ucx_net_fini,
    .net_progress = ucx_net_progress,
    .net_arm = ucx_net_arm,
};
