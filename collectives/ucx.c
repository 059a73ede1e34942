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
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SERIALIZED};
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
  /* Wake socket: lets node peers wake this rank's progress thread out of
   * epoll. Without it (bind refused) progress falls back to short polls. */
  int wfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  socklen_t alen = hsr_coll_wake_addr(x, x->rank, &a);
  struct epoll_event ev3 = {.events = EPOLLIN, .data.fd = wfd};
  if (wfd >= 0 && bind(wfd, (struct sockaddr *)&a, alen) == 0 && epoll_ctl(x->epfd, EPOLL_CTL_ADD, wfd, &ev3) == 0) {
    x->wakefd = wfd;
  } else {
    HSR_LOG_I("collectives: no wake socket (%s): shared-memory progress polls", strerror(errno));
    if (wfd >= 0) close(wfd);
  }
  /* Peers only send once every rank has bound its socket. */
  return hsr_boot_barrier(x->boot);
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
  if (x->wakefd >= 0) close(x->wakefd);
  x->wakefd = -1;
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
  struct epoll_event ev[3];
  int n = epoll_wait(x->epfd, ev, 3, ms);
  for (int i = 0; i < n; i++) {
    if (ev[i].data.fd == x->evfd) {
      uint64_t v;
      ssize_t rr = read(x->evfd, &v, sizeof v);
      (void)rr;
    } else if (ev[i].data.fd == x->wakefd) {
      char b[64];
      while (recv(x->wakefd, b, sizeof b, MSG_DONTWAIT) > 0) {}
    }
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

/* Every message belongs to a chunk: rings run one independent pipeline per
 * chunk of the blocks (chunk k of step s+1 leaves as soon as chunk k of step
 * s has arrived, while other chunks are still in flight); the other
 * algorithms use chunk 0 only. */
typedef struct ucx_chunk {
  hsr_op_s *op;
  int k, stage, step, posted, pending, finished;
  void *reqs[2];
} ucx_chunk;

static void forget(ucx_chunk *ch, void *req, ucs_status_t status) {
  hsr_op_s *op = ch->op;
  ch->pending--;
  op->ucx_pending--;
  for (int i = 0; i < 2; i++)
    if (ch->reqs[i] == req) ch->reqs[i] = NULL;
  if (status != UCS_OK && status != UCS_ERR_CANCELED && op->st == HSR_OK && !op->fin)
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: UCX transfer failed: %s", op->c->name,
                     hsr_op_name(op->kind), ucs_status_string(status));
  ucp_request_free(req);
  if (op->fin && op->ucx_pending == 0 && op->freed_by_transport) {
    free(op->chunks);
    free(op);
  }
}

static void send_cb(void *req, ucs_status_t status, void *user) { forget(user, req, status); }
static void recv_cb(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  (void)info;
  forget(user, req, status);
}

/* comm id (20 bits) | op seq (20) | stage (2) | step (12) | chunk (10) */
static uint64_t tag_of(hsr_op_s *op, int stage, int step, int k) {
  return ((op->c->id & 0xfffffull) << 44) | ((op->seq & 0xfffffull) << 24) | ((uint64_t)(stage & 3) << 22) |
         ((uint64_t)(step & 0xfff) << 10) | (uint64_t)(k & 0x3ff);
}

static void track(ucx_chunk *ch, ucs_status_ptr_t r) {
  ch->pending++;
  ch->op->ucx_pending++;
  for (int i = 0; i < 2; i++)
    if (!ch->reqs[i]) {
      ch->reqs[i] = r;
      return;
    }
}

static int post_send(ucx_chunk *ch, int peer, const void *buf, size_t bytes, uint64_t tag) {
  hsr_op_s *op = ch->op;
  coll_ctx *x = op->c->ctx;
  ucp_ep_h ep = ep_of(x, op->c->world[peer]);
  if (!ep) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "%s", hsr_last_error());
    return 0;
  }
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.send = send_cb, .user_data = ch};
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, buf, bytes, tag, &p);
  if (UCS_PTR_IS_ERR(r)) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: send to rank %d: %s", op->c->name,
                     hsr_op_name(op->kind), peer, ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(ch, r);
  return 1;
}

static int post_recv(ucx_chunk *ch, void *buf, size_t bytes, uint64_t tag) {
  hsr_op_s *op = ch->op;
  ucp_request_param_t p = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA, .cb.recv = recv_cb, .user_data = ch};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(op->c->ctx->worker, buf, bytes, tag, ~0ull, &p);
  if (UCS_PTR_IS_ERR(r)) {
    hsr_coll_op_fail(op, HSR_ERR_TRANSPORT, "communicator '%s': %s: receive: %s", op->c->name, hsr_op_name(op->kind),
                     ucs_status_string(UCS_PTR_STATUS(r)));
    return 0;
  }
  if (r) track(ch, r);
  return 1;
}

/* Cancels what a failed op still has posted (called with x->mu held). */
void hsr_coll_ucx_cancel(hsr_op_s *op) {
  coll_ctx *x = op->c->ctx;
  if (!x->have_ucx || op->ucx_pending <= 0 || !op->chunks) return;
  ucx_chunk *chs = op->chunks;
  for (int k = 0; k < op->nchunks; k++)
    for (int i = 0; i < 2; i++)
      if (chs[k].reqs[i]) ucp_request_cancel(x->worker, chs[k].reqs[i]);
  for (int k = 0; k < 100 && op->ucx_pending > 0; k++) ucp_worker_progress(x->worker);
}

/* ---- algorithms ------------------------------------------------------------------ */

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* Block j of an op, in elements: equal blocks for all-gather/reduce-scatter,
 * near-equal slices of `count` for all-reduce. */
static void block(hsr_op_s *op, int j, size_t *off, size_t *len) {
  int n = op->c->size;
  if (op->kind == HSR_OP_ALLREDUCE) {
    size_t lo = op->count * (size_t)j / (size_t)n, hi = op->count * (size_t)(j + 1) / (size_t)n;
    *off = lo, *len = hi - lo;
  } else {
    *off = (size_t)(op->blk_at ? op->blk_at[j] : j) * op->count;
    *len = op->count;
  }
}

static size_t max_block(hsr_op_s *op) {
  size_t maxb = 0;
  for (int j = 0; j < op->c->size; j++) {
    size_t o, l;
    block(op, j, &o, &l);
    if (l > maxb) maxb = l;
  }
  return maxb;
}

/* Chunk k of block j: [*lo, *lo + *len) in elements from the block start. */
static void chunk_of(hsr_op_s *op, int j, int k, size_t *boff, size_t *lo, size_t *len) {
  size_t l;
  block(op, j, boff, &l);
  size_t a = (size_t)k * op->chunk_elems;
  *lo = a < l ? a : l;
  *len = a < l ? (l - a < op->chunk_elems ? l - a : op->chunk_elems) : 0;
}

enum { S_RS = 0, S_AG = 1, S_RD = 2, S_MISC = 3 };
enum { P_START, P_RING, P_RD_POST, P_RD_WAIT, P_BC_WAIT, P_BAR_POST, P_BAR_WAIT };

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

/* Reduce-scatter input block j (all-reduce: slice j of send). */
static const char *rs_in(hsr_op_s *op, int j, size_t es) {
  size_t off, len;
  block(op, j, &off, &len);
  return (const char *)op->send + off * es;
}
/* Where this rank's reduced block goes. */
static char *rs_out(hsr_op_s *op, size_t es) {
  size_t off, len;
  block(op, op->c->rank, &off, &len);
  return op->kind == HSR_OP_ALLREDUCE ? (char *)op->recv + off * es : op->recv;
}

/* Posts chunk ch's messages for its current stage and step. */
static int ring_post(hsr_op_s *op, ucx_chunk *ch, size_t es) {
  hsr_comm *c = op->c;
  int n = c->size, r = c->rank, s = ch->step, k = ch->k, right = mod(r + 1, n);
  hsr_comm_counter *cnt = &c->counters[op->kind];
  size_t sb_off, s_lo, s_len, rb_off, r_lo, r_len;
  if (ch->stage == S_RS) {
    int sb = mod(r - s - 1, n), rb = mod(r - s - 2, n);
    chunk_of(op, sb, k, &sb_off, &s_lo, &s_len);
    chunk_of(op, rb, k, &rb_off, &r_lo, &r_len);
    char *acc = (char *)op->tmp + (size_t)k * 2 * op->chunk_elems * es, *rcv = acc + op->chunk_elems * es;
    const char *src = s == 0 ? rs_in(op, sb, es) + s_lo * es : acc;
    if (!post_recv(ch, rcv, r_len * es, tag_of(op, S_RS, s, k)) ||
        !post_send(ch, right, src, s_len * es, tag_of(op, S_RS, s, k)))
      return 0;
  } else {
    int sb = mod(r - s, n), rb = mod(r - s - 1, n);
    chunk_of(op, sb, k, &sb_off, &s_lo, &s_len);
    chunk_of(op, rb, k, &rb_off, &r_lo, &r_len);
    char *buf = op->recv;
    if (!post_recv(ch, buf + (rb_off + r_lo) * es, r_len * es, tag_of(op, S_AG, s, k)) ||
        !post_send(ch, right, buf + (sb_off + s_lo) * es, s_len * es, tag_of(op, S_AG, s, k)))
      return 0;
  }
  cnt->bytes_sent += s_len * es;
  cnt->bytes_recv += r_len * es;
  ch->posted = 1;
  return 1;
}

/* Chunk ch's step has arrived: reduce (reduce-scatter) and move on. */
static void ring_step_done(hsr_op_s *op, ucx_chunk *ch, size_t es) {
  int n = op->c->size, r = op->c->rank, s = ch->step, k = ch->k;
  if (ch->stage == S_RS) {
    int rb = mod(r - s - 2, n);
    size_t boff, lo, len;
    chunk_of(op, rb, k, &boff, &lo, &len);
    char *acc = (char *)op->tmp + (size_t)k * 2 * op->chunk_elems * es, *rcv = acc + op->chunk_elems * es;
    const void *ins[2] = {rcv, rs_in(op, rb, es) + lo * es};
    int last = s == n - 2;
    void *out = last ? rs_out(op, es) + lo * es : acc; /* rb == r on the last step */
    hsr_redop rop = last ? op->redop : (op->redop == HSR_AVG ? HSR_SUM : op->redop);
    hsr_coll_reduce(op->dt, rop, out, ins, 2, len, n);
  }
  ch->posted = 0;
  if (++ch->step < n - 1) return;
  if (ch->stage == S_RS && op->kind == HSR_OP_ALLREDUCE) {
    ch->stage = S_AG;
    ch->step = 0;
    return;
  }
  ch->finished = 1;
  op->chunks_left--;
}

static int ring_start(hsr_op_s *op, size_t es) {
  hsr_comm *c = op->c;
  size_t maxb = max_block(op), target = c->ctx->ucx_chunk / es;
  if (target == 0) target = 1;
  int nch = (int)((maxb + target - 1) / target);
  if (nch < 1) nch = 1;
  if (nch > 1000) nch = 1000;
  op->chunk_elems = (maxb + (size_t)nch - 1) / (size_t)nch;
  if (op->chunk_elems == 0) op->chunk_elems = 1;
  ucx_chunk *chs = calloc((size_t)nch, sizeof *chs);
  if (!chs) {
    hsr_coll_op_fail(op, HSR_ERR_NOMEM, "chunk table");
    return 1;
  }
  free(op->chunks);
  op->chunks = chs;
  op->nchunks = op->chunks_left = nch;
  int first = op->kind == HSR_OP_ALLGATHER ? S_AG : S_RS;
  for (int k = 0; k < nch; k++) chs[k] = (ucx_chunk){.op = op, .k = k, .stage = first};
  if (first == S_RS) {
    hsr_status st = hsr_coll_comm_scratch(c, 2 * (size_t)nch * op->chunk_elems * es, &op->tmp);
    if (st != HSR_OK) {
      hsr_coll_op_fail(op, st, "scratch: %s", hsr_last_error());
      return 1;
    }
  }
  if (c->size == 1) {
    /* A group of one: the reduction of one input, or a copy. */
    size_t o, l;
    block(op, 0, &o, &l);
    if (op->kind == HSR_OP_ALLGATHER) {
      hsr_coll_copy(op->recv, op->send, l * es, c->ctx->have_avx2);
    } else {
      const void *in[1] = {rs_in(op, 0, es)};
      hsr_coll_reduce(op->dt, op->redop, rs_out(op, es), in, 1, l, 1);
    }
    hsr_coll_op_done(op);
    return 1;
  }
  op->phase = P_RING;
  return 1;
}

static int ring_advance(hsr_op_s *op, size_t es) {
  int moved = 0, left = mod(op->c->rank - 1, op->c->size);
  ucx_chunk *chs = op->chunks;
  for (int k = 0; k < op->nchunks && !op->fin; k++) {
    ucx_chunk *ch = &chs[k];
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
  if (op->chunks_left == 0) {
    hsr_coll_op_done(op);
    return 1;
  }
  if (!moved) op->wait_peer = left;
  return moved;
}

int hsr_coll_ucx_advance(hsr_op_s *op) {
  hsr_comm *c = op->c;
  coll_ctx *x = c->ctx;
  int n = c->size, r = c->rank;
  size_t es = hsr_dtype_size(op->dt);
  hsr_comm_counter *k = &c->counters[op->kind];
  if (op->st != HSR_OK) return 1;
  if (op->phase == P_START) {
    op->step = 0;
    if (op->kind == HSR_OP_ALLGATHER) {
      size_t off, len;
      block(op, r, &off, &len);
      hsr_coll_copy((char *)op->recv + off * es, op->send, len * es, x->have_avx2);
    }
    if (op->kind == HSR_OP_ALLGATHER || op->kind == HSR_OP_REDUCE_SCATTER ||
        (op->kind == HSR_OP_ALLREDUCE && !use_rd(op)))
      return ring_start(op, es);
    /* The rest run on one chunk. */
    ucx_chunk *ch = calloc(1, sizeof *ch);
    if (!ch) {
      hsr_coll_op_fail(op, HSR_ERR_NOMEM, "chunk");
      return 1;
    }
    *ch = (ucx_chunk){.op = op};
    free(op->chunks);
    op->chunks = ch;
    op->nchunks = 1;
    if (op->kind == HSR_OP_BARRIER) {
      op->phase = P_BAR_POST;
    } else if (op->kind == HSR_OP_BCAST) {
      size_t bytes = op->count * es;
      if (r == op->root) {
        for (int j = 0; j < n; j++)
          if (j != r && !post_send(ch, j, op->recv, bytes, tag_of(op, S_MISC, 0, 0))) return 1;
        k->bytes_sent += (uint64_t)(n - 1) * bytes;
      } else {
        if (!post_recv(ch, op->recv, bytes, tag_of(op, S_MISC, 0, 0))) return 1;
        k->bytes_recv += bytes;
      }
      op->phase = P_BC_WAIT;
    } else { /* recursive doubling */
      hsr_status st = hsr_coll_comm_scratch(c, op->count * es, &op->tmp);
      if (st != HSR_OK) {
        hsr_coll_op_fail(op, st, "scratch: %s", hsr_last_error());
        return 1;
      }
      hsr_coll_copy(op->recv, op->send, op->count * es, x->have_avx2);
      op->step = 1; /* mask */
      op->phase = P_RD_POST;
    }
    return 1;
  }
  ucx_chunk *ch = op->chunks;
  switch (op->phase) {
  case P_RING: return ring_advance(op, es);
  case P_RD_POST: {
    size_t bytes = op->count * es;
    if (op->step >= n) {
      if (op->redop == HSR_AVG) {
        const void *in[1] = {op->recv};
        hsr_coll_reduce(op->dt, HSR_AVG, op->recv, in, 1, op->count, n);
      }
      hsr_coll_op_done(op);
      return 1;
    }
    int partner = r ^ op->step;
    uint64_t tag = tag_of(op, S_RD, op->step, 0);
    if (!post_recv(ch, op->tmp, bytes, tag) || !post_send(ch, partner, op->recv, bytes, tag)) return 1;
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
    hsr_coll_op_done(op);
    return 1;
  case P_BAR_POST: {
    int dist = 1 << op->step;
    if (dist >= n) {
      hsr_coll_op_done(op);
      return 1;
    }
    uint64_t tag = tag_of(op, S_MISC, op->step + 1, 0);
    if (!post_recv(ch, &op->cur, 0, tag) || !post_send(ch, mod(r + dist, n), &op->cur, 0, tag)) return 1;
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
