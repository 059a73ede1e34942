/* UCX transport: the context's worker (setup, progress, arming, teardown),
 * endpoints, tagged messages and their callbacks, cancellation, and the
 * transport's table. The algorithms are ucx_ring.c (all-gather,
 * reduce-scatter, all-reduce as both), ucx_allreduce_rd.c, ucx_bcast_flat.c
 * and ucx_barrier_dissem.c. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "ucx.h"
#include "collectives/comm_internal.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"

/* ---- the context's worker ---------------------------------------------------- */

/* Every rank's worker address, through the bootstrap. */
static hsr_status exchange_addresses(coll_ctx *x, ucx_ctx *u) {
  ucp_address_t *addr;
  size_t len;
  ucs_status_t us = ucp_worker_get_address(u->worker, &addr, &len);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_address: %s", ucs_status_string(us));
  uint64_t mylen = len, *lens = calloc((size_t)x->size, sizeof *lens);
  hsr_status st = lens ? boot_allgather(x->boot, &mylen, sizeof mylen, lens) : hsr_error(HSR_ERR_NOMEM, "lens");
  if (st == HSR_OK) {
    for (int r = 0; r < x->size; r++)
      if (lens[r] > u->addr_max) u->addr_max = lens[r];
    char *mine = calloc(1, u->addr_max);
    u->addrs = calloc((size_t)x->size, u->addr_max);
    if (!mine || !u->addrs) {
      st = hsr_error(HSR_ERR_NOMEM, "UCX address table");
    } else {
      memcpy(mine, addr, len);
      st = boot_allgather(x->boot, mine, u->addr_max, u->addrs);
    }
    free(mine);
  }
  free(lens);
  ucp_worker_release_address(u->worker, addr);
  return st;
}

/* ---- fault notices: one receive always posted; a verdict sent to every other node ---- */

static void notice_recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  (void)info;
  ucx_ctx *u = user;
  ucp_request_free(req);
  u->notice_req = NULL;
  u->notice_posting = 0;
  if (status == UCS_OK) u->notice_ready = 1; /* acted on outside the callback (ucx_net_progress) */
}

static void post_notice_recv(coll_ctx *x, ucx_ctx *u) {
  (void)x;
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                           .cb.recv = notice_recv_cb,
                           .user_data = u};
  u->notice_posting = 1; /* see track_begin: the callback may run inside the post */
  ucs_status_ptr_t r = ucp_tag_recv_nbx(u->worker, &u->notice_in, sizeof u->notice_in, UCX_NOTICE_TAG, ~0ull, &p);
  int ran = !u->notice_posting;
  u->notice_posting = 0;
  if (ran) {
    /* ended inside the post: the callback freed the request and said what came */
  } else if (UCS_PTR_IS_ERR(r)) {
    HSR_LOG_D("collectives: cannot post the fault-notice receive: %s", ucs_status_string(UCS_PTR_STATUS(r)));
  } else if (r == NULL) {
    u->notice_ready = 1; /* completed in place */
  } else {
    u->notice_req = r;
  }
}

static void notice_sent_cb(void *req, ucs_status_t status, void *user) {
  (void)status;
  ucx_ctx *u = user;
  u->notices_out--;
  ucp_request_free(req);
}

static ucp_ep_h ep_of(coll_ctx *x, int wr);

static void ucx_net_notify(coll_ctx *x, const seg_notice *n) {
  ucx_ctx *u = ucx_ctx_of(x);
  if (!u || !u->worker) return;
  memcpy(&u->notice_out, n, sizeof u->notice_out);
  int mine = n->reporter == x->rank, dead = n->kind == FAULT_DIED || n->kind == FAULT_LEFT;
  for (int r = 0; r < x->size; r++) {
    /* Node peers read my control segment. The finder tells every other node;
     * the others pass it on over endpoints they have (a new connection to a
     * rank that has just left only prints UCX errors). */
    if (r == x->rank || boot_node_of(x->boot, r) == x->node || x->fault.gone[r] || r == n->reporter ||
        (dead && r == n->culprit) || (!mine && !u->eps[r]))
      continue;
    ucp_ep_h ep = ep_of(x, r);
    if (!ep || u->peers[r].failed) continue;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.send = notice_sent_cb,
                             .user_data = u};
    u->notices_out++; /* before the post: its callback may run inside it */
    ucs_status_ptr_t q = ucp_tag_send_nbx(ep, &u->notice_out, sizeof u->notice_out, UCX_NOTICE_TAG, &p);
    if (!q || UCS_PTR_IS_ERR(q)) u->notices_out--; /* done in place or refused: no callback */
  }
}

/* One round of progress; when nothing moved, a sleep on the worker's event
 * fd of at most ms (8 ranks share 2 cores at teardown: no spinning). */
static void progress_or_sleep(coll_ctx *x, ucx_ctx *u, int ms) {
  if (ucp_worker_progress(u->worker)) return;
  if (x->net_fd < 0 || ucp_worker_arm(u->worker) == UCS_ERR_BUSY) return;
  struct pollfd pf = {.fd = x->net_fd, .events = POLLIN};
  poll(&pf, 1, ms);
}

/* Waits for a UCX request, at most limit_s. */
static void wait_req(coll_ctx *x, ucx_ctx *u, ucs_status_ptr_t r, double limit_s) {
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double t0 = clock_s();
  while (ucp_request_check_status(r) == UCS_INPROGRESS && clock_s() - t0 < limit_s) progress_or_sleep(x, u, 10);
  ucp_request_free(r);
}

static hsr_status ucx_net_init(coll_ctx *x) {
  ucx_ctx *u = calloc(1, sizeof *u);
  if (!u) return hsr_error(HSR_ERR_NOMEM, "UCX state");
  x->net_state = u;
  ucp_config_t *cfg;
  ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_config_read: %s", ucs_status_string(us));
  hsr_status est = ucx_config_emulated(x, cfg);
  if (est == HSR_OK) est = ucx_config_ifaces(x, cfg); /* where it listens */
  if (est != HSR_OK) {
    ucp_config_release(cfg);
    return est;
  }
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
  u->peers = calloc((size_t)x->size, sizeof *u->peers);
  if (!u->eps || !u->peers) return hsr_error(HSR_ERR_NOMEM, "endpoint table");
  for (int r = 0; r < x->size; r++) u->peers[r] = (ucx_peer){.x = x, .wr = r};
  us = ucp_worker_get_efd(u->worker, &x->net_fd);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_efd: %s", ucs_status_string(us));
  post_notice_recv(x, u);
  return HSR_OK;
}

/* The teardown barrier gives up as soon as a peer is known to have failed. */
static int fini_stop(void *arg) {
  coll_ctx *x = arg;
  pthread_mutex_lock(&x->mu);
  ucx_ctx *u = ucx_ctx_of(x);
  ucp_worker_progress(u->worker);
  if (u->notice_ready) {
    u->notice_ready = 0;
    coll_fault_notice_in(x, &u->notice_in);
  }
  coll_fault_poll(x, hsr_clock_ns(), 1);
  int stop = x->fault.declared;
  for (int r = 0; r < x->size && !stop; r++) stop = x->fault.gone[r] == FAULT_DIED;
  pthread_mutex_unlock(&x->mu);
  return stop;
}

/* After a failure: every endpoint closed at once (its requests complete as
 * cancelled), messages nobody will receive taken out, all bounded by a
 * second, so the worker goes away without waiting on a peer and quietly. */
static void close_failed(coll_ctx *x, ucx_ctx *u) {
  int n = 0;
  void **reqs = calloc((size_t)x->size, sizeof *reqs);
  for (int r = 0; u->eps && r < x->size; r++)
    if (u->eps[r]) {
      ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
      ucs_status_ptr_t q = ucp_ep_close_nbx(u->eps[r], &cp);
      if (q && !UCS_PTR_IS_ERR(q) && reqs) reqs[n++] = q;
    }
  double t0 = clock_s();
  for (int busy = 1; busy && clock_s() - t0 < 1.0;) {
    progress_or_sleep(x, u, 10);
    busy = u->live > 0 || u->notices_out > 0;
    for (int i = 0; i < n; i++) busy |= ucp_request_check_status(reqs[i]) == UCS_INPROGRESS;
  }
  for (int i = 0; i < n; i++) ucp_request_free(reqs[i]);
  free(reqs);
  char sink[256];
  for (int k = 0; k < 4096; k++) { /* unexpected messages: received into nothing */
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = ucp_tag_probe_nb(u->worker, 0, 0, 1, &info);
    if (!m) break;
    void *big = info.length > sizeof sink ? malloc(info.length) : NULL;
    ucp_request_param_t p = {.op_attr_mask = 0};
    wait_req(x, u, ucp_tag_msg_recv_nbx(u->worker, big ? big : sink, big ? info.length : sizeof sink, m, &p), 0.1);
    free(big);
  }
}

/* Healthy: deliver what is in flight, then let every rank get here before any
 * endpoint goes away (a closed endpoint is an error on a peer still using it).
 * After a failure: nothing waits on a peer (close_failed). */
static void ucx_net_fini(coll_ctx *x) {
  ucx_ctx *u = ucx_ctx_of(x);
  if (!u) return;
  if (u->worker) {
    int failed = x->fault.declared;
    if (!failed) {
      /* the flush waits on every peer: a peer that died meanwhile (seen by
       * the fault poll) ends it, not UCX's own timeout */
      ucp_request_param_t prm = {.op_attr_mask = 0};
      ucs_status_ptr_t fr = ucp_worker_flush_nbx(u->worker, &prm);
      if (fr && !UCS_PTR_IS_ERR(fr)) {
        double t0 = clock_s(), next = 0;
        while (ucp_request_check_status(fr) == UCS_INPROGRESS && clock_s() - t0 < 10 && !failed) {
          progress_or_sleep(x, u, 20);
          if (clock_s() >= next) next = clock_s() + 0.02, failed = fini_stop(x);
        }
        ucp_request_free(fr);
      }
    }
    if (!failed) {
      if (boot_barrier_until(x->boot, x->timeout_s, fini_stop, x) != HSR_OK) {
        failed = 1;
        /* a peer seen dead before any notice named it: named here, as everywhere */
        if (!x->fault.declared && !coll_fault_declare_gone(x, "found at teardown (the barrier gave up on it)"))
          HSR_LOG_E("collectives: teardown: %s", hsr_last_error());
      }
    }
    if (u->notice_req) ucp_request_cancel(u->worker, u->notice_req);
    if (failed) {
      close_failed(x, u);
    } else if (u->eps) {
      for (int r = 0; r < x->size; r++)
        if (u->eps[r]) {
          ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
          wait_req(x, u, ucp_ep_close_nbx(u->eps[r], &cp), 10);
        }
    }
    for (int k = 0; k < 100 && u->notice_req; k++) ucp_worker_progress(u->worker);
    ucp_worker_destroy(u->worker);
  }
  if (u->ucp) ucp_cleanup(u->ucp);
  free(u->eps);
  free(u->peers);
  free(u->addrs);
  free(u);
  x->net_state = NULL;
}

static int ucx_net_progress(coll_ctx *x) {
  ucx_ctx *u = ucx_ctx_of(x);
  int moved = ucp_worker_progress(u->worker) != 0;
  if (u->notice_ready) {
    u->notice_ready = 0;
    coll_fault_notice_in(x, &u->notice_in);
    post_notice_recv(x, u);
  }
  return moved;
}
static int ucx_net_arm(coll_ctx *x) { return ucp_worker_arm(ucx_ctx_of(x)->worker) == UCS_ERR_BUSY; }

/* A peer's endpoint failed (its process died, its connection broke): with
 * peer error handling UCX reports it here instead of aborting the process
 * (without it a CMA read from a dead peer's memory, process_vm_readv: No such
 * process, was fatal inside UCX). Runs inside ucp_worker_progress. */
static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  ucx_peer *p = arg;
  p->failed = 1;
  p->err = ucs_status_string(status);
  coll_fault_peer_error(p->x, p->wr, p->err);
}

static ucp_ep_h ep_of(coll_ctx *x, int wr) {
  ucx_ctx *u = ucx_ctx_of(x);
  if (u->lanes_bad[0]) {
    hsr_error(HSR_ERR_TRANSPORT, "%s", u->lanes_bad);
    return NULL;
  }
  if (!u->eps[wr] && !u->addrs) { /* a peer context: endpoints are made by ucx_peer.c, from its exchange */
    hsr_error(HSR_ERR_TRANSPORT, "no endpoint to member %d (its address was never exchanged)", wr);
    return NULL;
  }
  if (!u->eps[wr]) {
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t *)((char *)u->addrs + (size_t)wr * u->addr_max),
                          .err_mode = x->tune.ucx_peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
                          .err_handler = {.cb = ep_error, .arg = &u->peers[wr]}};
    ucs_status_t us = ucp_ep_create(u->worker, &ep, &u->eps[wr]);
    if (us != UCS_OK) {
      hsr_error(HSR_ERR_TRANSPORT, "ucp_ep_create to world rank %d: %s", wr, ucs_status_string(us));
      u->eps[wr] = NULL;
    } else if (ucx_ep_check(x, wr, u->eps[wr]) != HSR_OK) {
      snprintf(u->lanes_bad, sizeof u->lanes_bad, "%s", hsr_last_error());
      return NULL;
    }
  }
  return u->eps[wr];
}

/* ---- messages ------------------------------------------------------------------ */

static void forget(ucx_chunk *ch, void *req, ucs_status_t status) {
  coll_op *op = ch->op;
  if (ch->posting) ch->ended_inline = 1; /* its post must not keep the request: it is freed below */
  ch->u->live--;
  ch->pending--;
  op->inflight--;
  if (status != UCS_OK && status != UCS_ERR_CANCELED) ch->failed = 1;
  for (int i = 0; i < 2; i++)
    if (ch->reqs[i] == req) ch->reqs[i] = NULL;
  if (status != UCS_OK && status != UCS_ERR_CANCELED && op->st == HSR_OK && !op->fin)
    coll_fault_xfer_error(op, ucs_status_string(status)); /* a verdict is not made inside a UCX callback */
  ucp_request_free(req);
  coll_op_reap(op);
}

static void send_cb(void *req, ucs_status_t status, void *user) { forget(user, req, status); }
static void recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  (void)info;
  forget(user, req, status);
}

uint64_t ucx_tag(const coll_op *op, int stage, int step, int k) {
  uint64_t cid = op->c->id & 0xfffffull;
  return ((cid ? cid : 1) << 44) | ((op->seq & 0xfffffull) << 24) | ((uint64_t)(stage & 3) << 22) |
         ((uint64_t)(step & 0xfff) << 10) | (uint64_t)(k & 0x3ff);
}

/* UCX may run a request's callback inside the call that posts it (a
 * rendezvous that ends at once, over CMA, or fails there) and still return
 * the request, which the callback has then freed. So a transfer is counted
 * before it is posted, where that callback finds it, and a request whose
 * callback already ran is not kept (ucx_cancel would cancel freed memory). */
static void track_begin(ucx_chunk *ch) {
  ch->u = ucx_ctx_of(ch->op->c->ctx);
  ch->u->live++;
  ch->pending++;
  ch->op->inflight++;
  ch->posting = 1;
  ch->ended_inline = 0;
}

/* After the post: NULL (done in place) and an error ran no callback. */
static void track_end(ucx_chunk *ch, ucs_status_ptr_t r) {
  ch->posting = 0;
  if (ch->ended_inline) return;
  if (!r || UCS_PTR_IS_ERR(r)) {
    ch->u->live--;
    ch->pending--;
    ch->op->inflight--;
    return;
  }
  for (int i = 0; i < 2; i++)
    if (!ch->reqs[i]) {
      ch->reqs[i] = r;
      return;
    }
}

int ucx_send(ucx_chunk *ch, int peer, const void *buf, size_t bytes, uint64_t tag) {
  coll_op *op = ch->op;
  ucp_ep_h ep = ep_of(op->c->ctx, op->c->world[peer]);
  if (!ep || ucx_ctx_of(op->c->ctx)->peers[op->c->world[peer]].failed) {
    op->wait_peer = peer;
    coll_fault_transfer(op, ep ? "its endpoint has failed" : hsr_last_error());
    return 0;
  }
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.send = send_cb, .user_data = ch};
  track_begin(ch);
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, bytes, tag, &p);
  track_end(ch, r);
  if (UCS_PTR_IS_ERR(r)) {
    op->wait_peer = peer;
    coll_fault_transfer(op, ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  return 1;
}

int ucx_recv(ucx_chunk *ch, void *buf, size_t bytes, uint64_t tag) {
  coll_op *op = ch->op;
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.recv = recv_cb, .user_data = ch};
  track_begin(ch);
  ucs_status_ptr_t r = ucp_tag_recv_nbx(ucx_ctx_of(op->c->ctx)->worker, buf, bytes, tag, ~0ull, &p);
  track_end(ch, r);
  if (UCS_PTR_IS_ERR(r)) {
    coll_fault_transfer(op, ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
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

/* A peer communicator's ops run in ucx_peer.c's bounded waits, never
 * through the public API's queues. */
static hsr_status peer_refuse(coll_op *op) {
  return hsr_error(HSR_ERR_INVALID, "%s on '%s': a peer communicator runs its operations through peer_allreduce",
                   op_name(op->kind), op->c->name);
}

/* The world's all-reduce rows, ring and recursive doubling, driven by ucx_peer.c. */
static const coll_rows ucx_peer_rows = {
    [HSR_OP_ALLREDUCE] = {{.algo = &ucx_rd_allreduce, .fits = coll_rule_rd}, {.algo = &ucx_ring_allreduce}}};

const coll_transport ucx_peer_transport = {
    .name = "ucx-peer",
    .rows = &ucx_peer_rows,
    .start = peer_refuse,
    .cancel = ucx_cancel,
    .op_fini = ucx_op_fini,
};

/* ---- the table --------------------------------------------------------------------- */

static const coll_rows ucx_rows = {
    [HSR_OP_ALLGATHER] = {{.algo = &ucx_ring_allgather}},
    [HSR_OP_REDUCE_SCATTER] = {{.algo = &ucx_ring_reduce_scatter}},
    [HSR_OP_ALLREDUCE] = {{.algo = &ucx_rd_allreduce, .fits = coll_rule_rd}, {.algo = &ucx_ring_allreduce}},
    [HSR_OP_BCAST] = {{.algo = &ucx_flat_bcast}},
    [HSR_OP_BARRIER] = {{.algo = &ucx_dissem_barrier}},
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
    .free = coll_host_free,
    .net_init = ucx_net_init,
    .net_fini = ucx_net_fini,
    .net_progress = ucx_net_progress,
    .net_arm = ucx_net_arm,
    .net_notify = ucx_net_notify,
};
