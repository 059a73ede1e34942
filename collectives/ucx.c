/* Cross-node collectives over UCX tagged messages.
 *
 * One UCP worker per world context, addresses exchanged through the PMIx
 * bootstrap, endpoints made on first use. All-gather and reduce-scatter are
 * rings; all-reduce is reduce-scatter + all-gather (large) or recursive
 * doubling (small, power-of-two groups). The progress engine sleeps on the
 * worker's event fd, never spins. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "coll.h"

/* ---- setup ---------------------------------------------------------------- */

hsr_status hsr_coll_ucx_init(coll_ctx *x) {
  ucp_config_t *cfg;
  ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_config_read: %s", ucs_status_string(us));
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                    .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                    .mt_workers_shared = 0};
  us = ucp_init(&p, cfg, &x->ucp);
  ucp_config_release(cfg);
  if (us != UCS_OK)
    return hsr_error(HSR_ERR_TRANSPORT, "ucp_init: %s (check UCX_TLS: it needs a transport such as posix, sysv or tcp)",
                     ucs_status_string(us));
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SERIALIZED};
  us = ucp_worker_create(x->ucp, &wp, &x->worker);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_create: %s", ucs_status_string(us));
  x->have_ucx = 1;

  ucp_address_t *addr;
  size_t len;
  us = ucp_worker_get_address(x->worker, &addr, &len);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_address: %s", ucs_status_string(us));
  uint64_t mylen = len, *lens = calloc((size_t)x->size, sizeof *lens);
  hsr_status st = lens ? hsr_boot_allgather(x->boot, &mylen, sizeof mylen, lens) : hsr_error(HSR_ERR_NOMEM, "lens");
  if (st == HSR_OK) {
    for (int r = 0; r < x->size; r++)
      if (lens[r] > x->addr_max) x->addr_max = lens[r];
    char *mine = calloc(1, x->addr_max);
    x->addrs = calloc((size_t)x->size, x->addr_max);
    if (!mine || !x->addrs) {
      st = hsr_error(HSR_ERR_NOMEM, "UCX address table");
    } else {
      memcpy(mine, addr, len);
      st = hsr_boot_allgather(x->boot, mine, x->addr_max, x->addrs);
    }
    free(mine);
  }
  free(lens);
  ucp_worker_release_address(x->worker, addr);
  if (st != HSR_OK) return st;
  x->eps = calloc((size_t)x->size, sizeof *x->eps);
  if (!x->eps) return hsr_error(HSR_ERR_NOMEM, "endpoint table");

  us = ucp_worker_get_efd(x->worker, &x->efd);
  if (us != UCS_OK) return hsr_error(HSR_ERR_TRANSPORT, "ucp_worker_get_efd: %s", ucs_status_string(us));
  x->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  x->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (x->evfd < 0 || x->epfd < 0) return hsr_error(HSR_ERR_SYSTEM, "eventfd/epoll: %s", strerror(errno));
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = x->efd};
  struct epoll_event ev2 = {.events = EPOLLIN, .data.fd = x->evfd};
  if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->efd, &ev) || epoll_ctl(x->epfd, EPOLL_CTL_ADD, x->evfd, &ev2))
    return hsr_error(HSR_ERR_SYSTEM, "epoll_ctl: %s", strerror(errno));
  return HSR_OK;
}

static void wait_req(coll_ctx *x, ucs_status_ptr_t r) {
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double t0 = hsr_clock_s();
  while (ucp_request_check_status(r) == UCS_INPROGRESS && hsr_clock_s() - t0 < 10) {
    if (!ucp_worker_progress(x->worker)) sched_yield();
  }
  ucp_request_free(r);
}

void hsr_coll_ucx_fini(coll_ctx *x) {
  if (!x->have_ucx) {
    if (x->ucp) ucp_cleanup(x->ucp);
    return;
  }
  /* Deliver what is still in flight, then let every rank get here before any
   * endpoint goes away (a forced close would drop a peer's last message). */
  ucp_request_param_t prm = {.op_attr_mask = 0};
  wait_req(x, ucp_worker_flush_nbx(x->worker, &prm));
  hsr_boot_barrier(x->boot);
  if (x->eps)
    for (int r = 0; r < x->size; r++)
      if (x->eps[r]) {
        ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
        wait_req(x, ucp_ep_close_nbx(x->eps[r], &cp));
      }
  free(x->eps);
  free(x->addrs);
  if (x->epfd >= 0) close(x->epfd);
  if (x->evfd >= 0) close(x->evfd);
  ucp_worker_destroy(x->worker);
  ucp_cleanup(x->ucp);
  x->have_ucx = 0;
}

void hsr_coll_ucx_wait(coll_ctx *x, int ms) {
  if (ms <= 0) {
    sched_yield();
    return;
  }
  pthread_mutex_lock(&x->mu);
  ucs_status_t us = ucp_worker_arm(x->worker);
  pthread_mutex_unlock(&x->mu);
  if (us == UCS_ERR_BUSY) return;
  struct epoll_event ev[2];
  int n = epoll_wait(x->epfd, ev, 2, ms);
  for (int i = 0; i < n; i++)
    if (ev[i].data.fd == x->evfd) {
      uint64_t v;
      ssize_t rr = read(x->evfd, &v, sizeof v);
      (void)rr;
    }
}

static ucp_ep_h ep_of(coll_ctx *x, int wr) {
  if (!x->eps[wr]) {
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                          .address = (const ucp_address_t *)((char *)x->addrs + (size_t)wr * x->addr_max)};
    ucs_status_t us = ucp_ep_create(x->worker, &ep, &x->eps[wr]);
    if (us != UCS_OK) {
      hsr_error(HSR_ERR_TRANSPORT, "ucp_ep_create to world rank %d: %s", wr, ucs_status_string(us));
      x->eps[wr] = NULL;
    }
  }
  return x->eps[wr];
}

/* ---- messages ---------------------------------------------------------------- */

static void forget(hsr_op_s *op, void *req, ucs_status_t status) {
  op->ucx_pending--;
  for (int i = 0; i < op->nucx; i++)
    if (op->ucx_reqs[i] == req) op->ucx_reqs[i] = NULL;
  if (status != UCS_OK && status != UCS_ERR_CANCELED && op->st == HSR_OK && !op->done)
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: UCX transfer failed: %s", op->c->name,
                     hsr_op_name(op->kind), ucs_status_string(status));
  ucp_request_free(req);
  if (op->done && op->ucx_pending == 0 && op->freed_by_transport) free(op);
}

static void send_cb(void *req, ucs_status_t status, void *user) { forget(user, req, status); }
static void recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  (void)info;
  forget(user, req, status);
}

static uint64_t tag_of(hsr_op_s *op, int step) {
  return ((op->c->id & 0xffffffull) << 40) | ((op->seq & 0xffffffull) << 16) | ((uint64_t)step & 0xffff);
}

static void track(hsr_op_s *op, ucs_status_ptr_t r) {
  op->ucx_pending++;
  for (int i = 0; i < op->nucx; i++)
    if (!op->ucx_reqs[i]) {
      op->ucx_reqs[i] = r;
      return;
    }
  if (op->nucx < (int)(sizeof op->ucx_reqs / sizeof op->ucx_reqs[0])) op->ucx_reqs[op->nucx++] = r;
}

static int post_send(hsr_op_s *op, int peer, const void *buf, size_t bytes, int step) {
  coll_ctx *x = op->c->ctx;
  ucp_ep_h ep = ep_of(x, op->c->world[peer]);
  if (!ep) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "%s", hsr_last_error());
    return 0;
  }
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                           .cb.send = send_cb, .user_data = op};
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, bytes, tag_of(op, step), &p);
  if (UCS_PTR_IS_ERR(r)) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: send to rank %d: %s", op->c->name,
                     hsr_op_name(op->kind), peer, ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(op, r);
  return 1;
}

static int post_recv(hsr_op_s *op, void *buf, size_t bytes, int step) {
  coll_ctx *x = op->c->ctx;
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                           .cb.recv = recv_cb, .user_data = op};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(x->worker, buf, bytes, tag_of(op, step), ~0ull, &p);
  if (UCS_PTR_IS_ERR(r)) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: receive: %s", op->c->name, hsr_op_name(op->kind),
                     ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(op, r);
  return 1;
}

/* Cancels what a failed op still has posted (called with x->mu held). */
static void cancel_all(hsr_op_s *op) {
  coll_ctx *x = op->c->ctx;
  for (int i = 0; i < op->nucx; i++)
    if (op->ucx_reqs[i]) ucp_request_cancel(x->worker, op->ucx_reqs[i]);
  for (int k = 0; k < 100 && op->ucx_pending > 0; k++) ucp_worker_progress(x->worker);
}

/* ---- algorithms ------------------------------------------------------------------ */

static int mod(int a, int n) { return ((a % n) + n) % n; }

static void block(hsr_op_s *op, int j, size_t *off, size_t *len);

/* Bytes of the largest block: the reduce-scatter scratch holds an
 * accumulator and a receive buffer of this size. */
static size_t max_block_bytes(hsr_op_s *op) {
  size_t maxb = 0;
  for (int j = 0; j < op->c->size; j++) {
    size_t o, l;
    block(op, j, &o, &l);
    if (l > maxb) maxb = l;
  }
  return maxb * hsr_dtype_size(op->dt);
}

/* Block j of an op, in elements: equal blocks for all-gather/reduce-scatter,
 * near-equal slices of `count` for all-reduce. */
static void block(hsr_op_s *op, int j, size_t *off, size_t *len) {
  int n = op->c->size;
  if (op->kind == HSR_OP_ALLREDUCE) {
    size_t lo = op->count * (size_t)j / (size_t)n, hi = op->count * (size_t)(j + 1) / (size_t)n;
    *off = lo, *len = hi - lo;
  } else {
    *off = op->kind == HSR_OP_ALLGATHER ? (size_t)j * op->count : 0;
    *len = op->count;
  }
}

enum { P_START, P_RS_POST, P_RS_WAIT, P_AG_POST, P_AG_WAIT, P_RD_POST, P_RD_WAIT, P_BC_WAIT, P_BAR_POST, P_BAR_WAIT };

static void finish(hsr_op_s *op) {
  op->done = 1;
  op->t_end = hsr_clock_ns();
}

static int waiting(hsr_op_s *op, int peer) {
  if (op->ucx_pending > 0) {
    op->wait_peer = peer;
    return 1;
  }
  op->wait_peer = -1;
  return 0;
}

static int use_rd(hsr_op_s *op) {
  int n = op->c->size;
  if (n & (n - 1)) return 0;
  coll_ctx *x = op->c->ctx;
  if (x->algo_allreduce == 1) return 0;
  if (x->algo_allreduce == 2) return 1;
  return op->count * hsr_dtype_size(op->dt) <= x->rd_max_bytes;
}

int hsr_coll_ucx_advance(hsr_op_s *op) {
  hsr_comm *c = op->c;
  coll_ctx *x = c->ctx;
  int n = c->size, r = c->rank, right = mod(r + 1, n), left = mod(r - 1, n);
  size_t es = hsr_dtype_size(op->dt);
  hsr_comm_counter *k = &c->counters[op->kind];
  if (op->st != HSR_OK) return 1;
  switch (op->phase) {
  case P_START: {
    op->step = 0;
    if (op->kind == HSR_OP_BARRIER) {
      op->phase = P_BAR_POST;
      return 1;
    }
    if (op->kind == HSR_OP_BCAST) {
      size_t bytes = op->count * es;
      if (r == op->root) {
        for (int j = 0; j < n; j++)
          if (j != r && !post_send(op, j, op->recv, bytes, 0)) return 1;
        k->bytes_sent += (uint64_t)(n - 1) * bytes;
      } else {
        if (!post_recv(op, op->recv, bytes, 0)) return 1;
        k->bytes_recv += bytes;
      }
      op->phase = P_BC_WAIT;
      return 1;
    }
    size_t need = op->kind == HSR_OP_ALLREDUCE && use_rd(op) ? op->count * es : 2 * max_block_bytes(op);
    if (op->kind != HSR_OP_ALLGATHER && need) {
      hsr_status st = hsr_coll_comm_scratch(c, need, &op->tmp);
      if (st != HSR_OK) {
        hsr_coll_op_fail(op, st, "scratch: %s", hsr_last_error());
        return 1;
      }
    }
    if (op->kind == HSR_OP_ALLGATHER) {
      size_t bytes = op->count * es;
      hsr_coll_copy((char *)op->recv + (size_t)r * bytes, op->send, bytes, x->have_avx2);
      op->phase = P_AG_POST;
    } else if (op->kind == HSR_OP_ALLREDUCE && use_rd(op)) {
      hsr_coll_copy(op->recv, op->send, op->count * es, x->have_avx2);
      op->step = 1; /* mask */
      op->phase = P_RD_POST;
    } else {
      op->phase = P_RS_POST;
    }
    return 1;
  }
  case P_RS_POST: {
    if (n == 1 || op->step == n - 1) {
      if (n == 1) { /* a group of one: the reduction of one input */
        size_t o, l;
        block(op, 0, &o, &l);
        const void *in[1] = {(const char *)op->send + o * es};
        char *out = op->kind == HSR_OP_ALLREDUCE ? (char *)op->recv + o * es : op->recv;
        hsr_coll_reduce(op->dt, op->redop, out, in, 1, l, 1);
      }
      if (op->kind == HSR_OP_ALLREDUCE) {
        op->step = 0;
        op->phase = P_AG_POST;
      } else {
        finish(op);
      }
      return 1;
    }
    int sb = mod(r - op->step - 1, n), rb = mod(r - op->step - 2, n);
    size_t so, sl, ro, rl;
    block(op, sb, &so, &sl);
    block(op, rb, &ro, &rl);
    const char *in = op->send;
    size_t in_base = op->kind == HSR_OP_REDUCE_SCATTER ? op->count : 0; /* RS input block j at j*count */
    const void *src = op->step == 0 ? in + (in_base * (size_t)sb + so) * es : (char *)op->tmp;
    char *tmp = (char *)op->tmp;
    size_t maxb = max_block_bytes(op);
    if (!post_recv(op, tmp + maxb, rl * es, op->step) || !post_send(op, right, src, sl * es, op->step)) return 1;
    k->bytes_sent += sl * es;
    k->bytes_recv += rl * es;
    op->phase = P_RS_WAIT;
    return 1;
  }
  case P_RS_WAIT: {
    if (waiting(op, left)) return 0;
    int rb = mod(r - op->step - 2, n);
    size_t ro, rl;
    block(op, rb, &ro, &rl);
    size_t in_base = op->kind == HSR_OP_REDUCE_SCATTER ? op->count : 0;
    size_t maxb = max_block_bytes(op);
    const void *ins[2] = {(char *)op->tmp + maxb, (const char *)op->send + (in_base * (size_t)rb + ro) * es};
    int last = op->step == n - 2;
    void *out = op->tmp;
    if (last) out = op->kind == HSR_OP_ALLREDUCE ? (char *)op->recv + ro * es : op->recv;
    hsr_redop rop = last ? op->redop : (op->redop == HSR_AVG ? HSR_SUM : op->redop);
    hsr_coll_reduce(op->dt, rop, out, ins, 2, rl, n);
    op->step++;
    op->phase = P_RS_POST;
    return 1;
  }
  case P_AG_POST: {
    if (op->step >= n - 1) {
      finish(op);
      return 1;
    }
    int sb = mod(r - op->step, n), rb = mod(r - op->step - 1, n);
    size_t so, sl, ro, rl;
    block(op, sb, &so, &sl);
    block(op, rb, &ro, &rl);
    char *buf = op->recv;
    if (!post_recv(op, buf + ro * es, rl * es, 0x8000 + op->step) ||
        !post_send(op, right, buf + so * es, sl * es, 0x8000 + op->step))
      return 1;
    k->bytes_sent += sl * es;
    k->bytes_recv += rl * es;
    op->phase = P_AG_WAIT;
    return 1;
  }
  case P_AG_WAIT:
    if (waiting(op, left)) return 0;
    op->step++;
    op->phase = P_AG_POST;
    return 1;
  case P_RD_POST: {
    size_t bytes = op->count * es;
    if (op->step >= n) {
      if (op->redop == HSR_AVG) {
        const void *in[1] = {op->recv};
        hsr_coll_reduce(op->dt, HSR_AVG, op->recv, in, 1, op->count, n);
      }
      finish(op);
      return 1;
    }
    int partner = r ^ op->step;
    if (!post_recv(op, op->tmp, bytes, 0x4000 + op->step) || !post_send(op, partner, op->recv, bytes, 0x4000 + op->step))
      return 1;
    k->bytes_sent += bytes;
    k->bytes_recv += bytes;
    op->phase = P_RD_WAIT;
    return 1;
  }
  case P_RD_WAIT: {
    int partner = r ^ op->step;
    if (waiting(op, partner)) return 0;
    const void *ins[2];
    ins[0] = partner < r ? op->tmp : op->recv;
    ins[1] = partner < r ? op->recv : op->tmp;
    hsr_coll_reduce(op->dt, op->redop == HSR_AVG ? HSR_SUM : op->redop, op->recv, ins, 2, op->count, n);
    op->step <<= 1;
    op->phase = P_RD_POST;
    return 1;
  }
  case P_BC_WAIT:
    if (waiting(op, r == op->root ? mod(r + 1, n) : op->root)) return 0;
    finish(op);
    return 1;
  case P_BAR_POST: {
    int dist = 1 << op->step;
    if (dist >= n) {
      finish(op);
      return 1;
    }
    if (!post_recv(op, &op->cur, 0, 0x2000 + op->step) || !post_send(op, mod(r + dist, n), &op->cur, 0, 0x2000 + op->step))
      return 1;
    op->phase = P_BAR_WAIT;
    return 1;
  }
  case P_BAR_WAIT:
    if (waiting(op, mod(r - (1 << op->step), n))) return 0;
    op->step++;
    op->phase = P_BAR_POST;
    return 1;
  }
  return 0;
}

void hsr_coll_ucx_cancel(hsr_op_s *op) {
  if (op->c->ctx->have_ucx && op->ucx_pending > 0) cancel_all(op);
}
