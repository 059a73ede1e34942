/* Peer communicators (collectives/peer_internal.h): a UCX worker of their
 * own, members by id, endpoints from a caller's address exchange, and their
 * operations run here in bounded waits with a verdict of their own (the
 * world context's fault.c never sees them). The all-reduce is the UCX
 * transport's own (recursive doubling for small vectors over a power of two
 * members, else the pipelined ring), driven here; point to point is the
 * same messages on a view of two. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algos.h"
#include "peer_hb.h"
#include "ucx.h"
#include "collectives/comm_internal.h"
#include "collectives/peer_internal.h"
#include "common/common_internal.h"
#include "common/env.h"
#include "launch/boot_internal.h"

/* An abandoned operation: requests of it were still pending when it ended
 * (a member that stopped), so it and the buffers they read or write stay
 * alive until the last one ends (swept at the next call, or at close). */
typedef struct grave {
  coll_op *ops[3];
  void *own[3];
  struct grave *next;
} grave;

/* What this member knows of another's heartbeats (peer_hb.h). */
typedef struct hb_probe {
  ucp_ep_h ep; /* to its responder; made on the first ping */
  void *addr;  /* its responder's address (NULL: it has none) */
  size_t len;
  int failed;   /* the endpoint reported an error: made again on the next ping */
  double sent;  /* the last ping */
  double quiet; /* the first ping no pong has come after (0: none) */
} hb_probe;

struct peer_ctx {
  coll_ctx x; /* rank: this member's id; size: PEER_MAX; no bootstrap, node-shared memory or world verdict */
  ucx_ctx u;
  peer_xchg xchg;
  char noun[16]; /* what a member is called in messages */
  int efd;
  grave *graves;
  double hb_s;            /* HSR_STOP_TIMEOUT (0: no heartbeats) */
  peer_hb *hb;            /* this member's responder */
  ucp_address_t *addr;    /* this member's main worker address: every ping's data */
  size_t addr_len;
  int32_t hb_hdr;         /* every ping's header: this member's id */
  hb_probe *probe;        /* per member id */
};

/* Pings go out every HB_EVERY seconds to the member an operation waits for,
 * once it has waited HB_AFTER (an operation that completes at once pings
 * nobody). */
#define HB_EVERY 0.25
#define HB_AFTER 0.5

/* A notice's tag: stage MISC, the sender in the step field, chunk NOTICE_K
 * (an abort) or STALL_K (alive and stalled). */
#define NOTICE_K 0x3ff
#define STALL_K 0x3fe
typedef struct abort_msg {
  int32_t n, culprit[PEER_MAX_CULPRITS];
} abort_msg;

static peer_ctx *peer_of(hsr_comm *c) { return (peer_ctx *)(void *)c->ctx; }

/* Comm ids (20 bits of the tag): an all-reduce view's from its epoch, point
 * to point's with the top bit set; never 0. */
static uint64_t view_id(int64_t epoch, int p2p) {
  return (p2p ? 0x80000ull : 0) | (1 + (uint64_t)epoch % 0x7ffffull);
}

/* ---- the worker ------------------------------------------------------------------------ */

static void progress_all(peer_ctx *p) {
  while (ucp_worker_progress(p->u.worker)) {}
}

/* Sleeps on the worker's event fd until something may have happened, at
 * most until `deadline` and never more than 100 ms (endpoint errors set
 * flags that are looked at between sleeps). Returns at once when progress
 * still finds work: the caller looks at what it did first (an arrival may
 * let the operation send, and nothing else would wake it). */
static void sleep_on(peer_ctx *p, double deadline) {
  if (ucp_worker_progress(p->u.worker)) return;
  if (ucp_worker_arm(p->u.worker) == UCS_ERR_BUSY) return;
  double left = deadline - clock_s();
  int ms = left <= 0 ? 0 : left > 0.1 ? 100 : (int)(left * 1e3) + 1;
  struct pollfd pf = {.fd = p->efd, .events = POLLIN};
  poll(&pf, 1, ms);
}

static void sweep(peer_ctx *p) {
  for (grave **g = &p->graves; *g;) {
    int busy = 0;
    for (int i = 0; i < 3; i++) busy |= (*g)->ops[i] && (*g)->ops[i]->inflight > 0;
    if (busy) {
      g = &(*g)->next;
      continue;
    }
    grave *d = *g;
    *g = d->next;
    for (int i = 0; i < 3; i++) {
      if (d->ops[i]) coll_op_destroy(d->ops[i]);
      free(d->own[i]);
    }
    free(d);
  }
}

/* Ends ops[0..2] (NULL: none): pending receives cancelled, then up to
 * wait_s for the rest; 1 when some are still pending, and then they and
 * own[] are the context's (freed once they end); 0 when all ended (own[] is
 * the caller's again). */
static int end_ops(peer_ctx *p, coll_op *const ops[3], double wait_s, void *const own[3]) {
  for (int i = 0; i < 3; i++)
    if (ops[i] && ops[i]->inflight > 0) ops[i]->tp->cancel(ops[i]);
  double end = clock_s() + wait_s;
  int busy;
  for (;;) {
    busy = 0;
    for (int i = 0; i < 3; i++) busy |= ops[i] && ops[i]->inflight > 0;
    if (!busy || clock_s() >= end) break;
    sleep_on(p, end);
  }
  grave *g = busy ? calloc(1, sizeof *g) : NULL;
  if (g) {
    for (int i = 0; i < 3; i++) g->ops[i] = ops[i], g->own[i] = own[i];
    g->next = p->graves;
    p->graves = g;
    return 1;
  }
  if (busy) return 1; /* no memory for the record: left as it is (bounded: once per failure) */
  for (int i = 0; i < 3; i++)
    if (ops[i]) coll_op_destroy(ops[i]);
  return 0;
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep;
  ucx_peer *q = arg;
  q->failed = 1;
  q->err = ucs_status_string(st);
}

static void close_one(peer_ctx *p, ucp_ep_h ep) {
  ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &cp);
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double end = clock_s() + 1.0;
  while (ucp_request_check_status(r) == UCS_INPROGRESS && clock_s() < end) sleep_on(p, end);
  if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(p->u.worker, r);
  ucp_request_free(r);
}

static void close_ep(peer_ctx *p, int id) {
  ucp_ep_h ep = p->u.eps[id];
  p->u.eps[id] = NULL;
  if (ep) close_one(p, ep);
  hb_probe *b = p->probe ? &p->probe[id] : NULL;
  if (b && b->ep) {
    ep = b->ep, b->ep = NULL;
    close_one(p, ep);
  }
}

/* ---- heartbeats: the prober's side (the responder is ucx_peer_hb.c) -------------------------- */

static void hb_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep, (void)st;
  ((hb_probe *)arg)->failed = 1;
}

/* A pong, inside this worker's progress: its sender is alive. */
static ucs_status_t on_pong(void *arg, const void *header, size_t header_len, void *data, size_t len,
                            const ucp_am_recv_param_t *param) {
  (void)data, (void)len, (void)param;
  peer_ctx *p = arg;
  int32_t id;
  if (header_len != sizeof id) return UCS_OK;
  memcpy(&id, header, sizeof id);
  if (id >= 0 && id < PEER_MAX && p->probe) p->probe[id].quiet = 0;
  return UCS_OK;
}

/* Whether member id, which an operation has waited for since `since`,
 * answers no heartbeat: once the wait passed HB_AFTER it is pinged every
 * HB_EVERY, and it is silent once no pong came within hb_s of a ping. A
 * member without a responder is never silent (its bound decides). */
static int hb_silent(peer_ctx *p, int id, double since) {
  if (p->hb_s <= 0 || id < 0 || id >= PEER_MAX || !p->probe) return 0;
  hb_probe *b = &p->probe[id];
  double now = clock_s();
  if (!b->addr || now - since < HB_AFTER) return 0;
  if (b->quiet && b->quiet < since) b->quiet = 0; /* a ping of an earlier wait */
  if (b->failed && b->ep) {
    ucp_ep_h ep = b->ep;
    b->ep = NULL;
    close_one(p, ep);
  }
  b->failed = 0;
  if (!b->ep) {
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = b->addr,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = hb_ep_failed, .arg = b}};
    if (ucp_ep_create(p->u.worker, &ep, &b->ep) != UCS_OK) {
      b->ep = NULL;
      return 0;
    }
  }
  if (now - b->sent >= HB_EVERY) {
    /* header and data are the context's, alive until it closes */
    ucp_request_param_t sp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_AM_SEND_FLAG_EAGER};
    ucs_status_ptr_t r = ucp_am_send_nbx(b->ep, PEER_HB_PING, &p->hb_hdr, sizeof p->hb_hdr, p->addr, p->addr_len, &sp);
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r); /* released once it completes */
    b->sent = now;
    if (!b->quiet) b->quiet = now;
  }
  return b->quiet > 0 && now - b->quiet >= p->hb_s;
}

static void add_culprit(peer_result *r, int id, const char *fmt, const char *noun, const char *why);

static void hb_name(peer_ctx *p, peer_result *res, int id) {
  char t[96];
  snprintf(t, sizeof t, "%.1f s (stopped, or its host hangs)", p->hb_s);
  add_culprit(res, id, "%s %d answered no heartbeat in %s", p->noun, t);
}

/* Messages of abandoned attempts that no receive matched: taken off the
 * worker before it goes (UCX would warn about each). */
static void drain_unexpected(peer_ctx *p) {
  for (int i = 0; i < 10000; i++) {
    progress_all(p);
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = ucp_tag_probe_nb(p->u.worker, 0, 0, 1, &info);
    if (!m) return;
    void *b = malloc(info.length ? info.length : 1);
    if (!b) return;
    ucp_request_param_t rp = {.op_attr_mask = 0};
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(p->u.worker, b, info.length, m, &rp);
    double end = clock_s() + 0.5;
    while (r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS && clock_s() < end)
      sleep_on(p, end);
    if (r && !UCS_PTR_IS_ERR(r)) {
      int still = ucp_request_check_status(r) == UCS_INPROGRESS;
      ucp_request_free(r);
      if (still) return; /* still arriving: leave it and its buffer */
    }
    free(b);
  }
}

static hsr_status id_ok(int id) {
  if (id < 0 || id >= PEER_MAX) return hsr_error(HSR_ERR_INVALID, "member id %d (valid: 0 to %d)", id, PEER_MAX - 1);
  return HSR_OK;
}

hsr_status peer_open(int id, const char *noun, const peer_xchg *xg, peer_ctx **out) {
  *out = NULL;
  HSR_CHECK(id_ok(id));
  if (!xg || !xg->put || !xg->get) return hsr_error(HSR_ERR_INVALID, "peer_open: no address exchange");
  peer_ctx *p = calloc(1, sizeof *p);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "peer context");
  p->x.rank = id, p->x.size = PEER_MAX, p->x.net_state = &p->u;
  p->x.evfd = p->x.epfd = p->x.net_fd = p->efd = -1;
  p->x.have_avx2 = __builtin_cpu_supports("avx2");
  p->xchg = *xg;
  snprintf(p->noun, sizeof p->noun, "%s", noun && *noun ? noun : "member");
  p->u.eps = calloc(PEER_MAX, sizeof *p->u.eps);
  p->u.peers = calloc(PEER_MAX, sizeof *p->u.peers);
  p->probe = calloc(PEER_MAX, sizeof *p->probe);
  p->hb_hdr = id;
  if (!p->u.eps || !p->u.peers || !p->probe) {
    peer_close(p);
    return hsr_error(HSR_ERR_NOMEM, "peer endpoint table");
  }
  for (int r = 0; r < PEER_MAX; r++) p->u.peers[r] = (ucx_peer){.x = &p->x, .wr = r};
  hsr_status st = coll_tuning_env(&p->x.tune);
  if (st == HSR_OK) st = env_get_double("HSR_STOP_TIMEOUT", &p->hb_s);
  ucp_config_t *cfg = NULL;
  ucs_status_t us = UCS_OK;
  if (st == HSR_OK) {
    us = ucp_config_read(NULL, NULL, &cfg);
    if (us != UCS_OK) st = hsr_error(HSR_ERR_TRANSPORT, "peer context: ucp_config_read: %s", ucs_status_string(us));
  }
  if (st == HSR_OK) {
    ucp_params_t prm = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                        .features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
    us = ucp_init(&prm, cfg, &p->u.ucp);
    ucp_config_release(cfg);
    if (us != UCS_OK) p->u.ucp = NULL, st = hsr_error(HSR_ERR_TRANSPORT, "peer context: ucp_init: %s", ucs_status_string(us));
  }
  if (st == HSR_OK) {
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    us = ucp_worker_create(p->u.ucp, &wp, &p->u.worker);
    if (us != UCS_OK) p->u.worker = NULL;
    if (us == UCS_OK) us = ucp_worker_get_efd(p->u.worker, &p->efd);
    if (us == UCS_OK) {
      ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                                                 UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                   .id = PEER_HB_PONG,
                                   .cb = on_pong,
                                   .arg = p};
      us = ucp_worker_set_am_recv_handler(p->u.worker, &ap);
    }
    if (us != UCS_OK) st = hsr_error(HSR_ERR_TRANSPORT, "peer context: UCX worker: %s", ucs_status_string(us));
  }
  if (st == HSR_OK) {
    us = ucp_worker_get_address(p->u.worker, &p->addr, &p->addr_len);
    if (us != UCS_OK)
      p->addr = NULL, st = hsr_error(HSR_ERR_TRANSPORT, "peer context: ucp_worker_get_address: %s", ucs_status_string(us));
  }
  if (st == HSR_OK && p->hb_s > 0) st = peer_hb_open(id, &p->hb);
  if (st == HSR_OK) { /* the blob: the main worker's address's length, it, the responder's (none: no heartbeats) */
    size_t hl = 0;
    const void *ha = peer_hb_address(p->hb, &hl);
    uint32_t ml = (uint32_t)p->addr_len;
    char *blob = malloc(sizeof ml + p->addr_len + hl);
    if (!blob) {
      st = hsr_error(HSR_ERR_NOMEM, "peer context: address");
    } else {
      memcpy(blob, &ml, sizeof ml);
      memcpy(blob + sizeof ml, p->addr, p->addr_len);
      if (hl) memcpy(blob + sizeof ml + p->addr_len, ha, hl);
      st = xg->put(xg->arg, blob, sizeof ml + p->addr_len + hl);
      free(blob);
    }
  }
  if (st != HSR_OK) {
    peer_close(p);
    return st;
  }
  *out = p;
  return HSR_OK;
}

void peer_close(peer_ctx *p) {
  if (!p) return;
  peer_hb_close(p->hb); /* this member stops answering first: it is going */
  if (p->u.worker) {
    sweep(p);
    drain_unexpected(p);
    for (int i = 0; p->u.eps && i < PEER_MAX; i++) close_ep(p, i); /* pending sends end here */
    double end = clock_s() + 1.0;
    while (p->graves && clock_s() < end) {
      sleep_on(p, end);
      sweep(p);
    }
    if (p->addr) ucp_worker_release_address(p->u.worker, p->addr);
    ucp_worker_destroy(p->u.worker);
  }
  while (p->graves) { /* nothing runs on their buffers once the worker is gone */
    grave *g = p->graves;
    p->graves = g->next;
    for (int i = 0; i < 3; i++) {
      if (g->ops[i]) coll_op_destroy(g->ops[i]);
      free(g->own[i]);
    }
    free(g);
  }
  if (p->u.ucp) ucp_cleanup(p->u.ucp);
  for (int i = 0; p->probe && i < PEER_MAX; i++) free(p->probe[i].addr);
  free(p->probe);
  free(p->u.eps);
  free(p->u.peers);
  free(p);
}

hsr_status peer_connect(peer_ctx *p, int id) {
  HSR_CHECK(id_ok(id));
  void *a = NULL;
  size_t len = 0;
  HSR_CHECK(p->xchg.get(p->xchg.arg, id, &a, &len));
  if (!a) return hsr_error(HSR_ERR_INVALID, "peer_connect: no address for %s %d", p->noun, id);
  uint32_t ml = 0;
  if (len >= sizeof ml) memcpy(&ml, a, sizeof ml);
  if (len < sizeof ml || ml == 0 || ml > len - sizeof ml) {
    free(a);
    return hsr_error(HSR_ERR_INVALID, "peer_connect: the address of %s %d is malformed (%zu bytes)", p->noun, id, len);
  }
  close_ep(p, id);
  hb_probe *b = &p->probe[id];
  free(b->addr);
  *b = (hb_probe){0};
  size_t hl = len - sizeof ml - ml;
  if (hl && (b->addr = malloc(hl))) memcpy(b->addr, (char *)a + sizeof ml + ml, hl), b->len = hl;
  ucx_peer *q = &p->u.peers[id];
  q->failed = 0, q->err = NULL;
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
                        .address = (const ucp_address_t *)(const void *)((char *)a + sizeof ml),
                        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                        .err_handler = {.cb = ep_error, .arg = q}};
  ucs_status_t us = ucp_ep_create(p->u.worker, &ep, &p->u.eps[id]);
  free(a);
  if (us != UCS_OK) { /* named by the next operation with it */
    p->u.eps[id] = NULL;
    q->failed = 1, q->err = ucs_status_string(us);
  }
  return HSR_OK;
}

void peer_disconnect(peer_ctx *p, int id) {
  if (id_ok(id) == HSR_OK) close_ep(p, id);
}

int peer_connected(const peer_ctx *p, int id) { return id >= 0 && id < PEER_MAX && p->u.eps[id]; }

/* ---- views ------------------------------------------------------------------------------- */

static hsr_status view(peer_ctx *p, const int *ids, int n, uint64_t cid, const char *what, hsr_comm **out) {
  *out = NULL;
  int me = -1;
  for (int i = 0; i < n; i++) {
    HSR_CHECK(id_ok(ids[i]));
    if (i > 0 && ids[i] <= ids[i - 1])
      return hsr_error(HSR_ERR_INVALID, "peer communicator: ids not ascending (%d after %d)", ids[i], ids[i - 1]);
    if (ids[i] == p->x.rank) me = i;
  }
  if (me < 0) return hsr_error(HSR_ERR_INVALID, "peer communicator: this %s (%d) is not a member", p->noun, p->x.rank);
  hsr_comm *c;
  HSR_CHECK(coll_comm_alloc(n, &c));
  c->tp = &ucx_peer_transport;
  c->ctx = &p->x;
  c->backend = HSR_BACKEND_HOST;
  c->rank = me;
  c->id = cid;
  for (int i = 0; i < n; i++) c->world[i] = ids[i];
  snprintf(c->name, sizeof c->name, "%s", what);
  *out = c;
  return HSR_OK;
}

hsr_status peer_comm_create(peer_ctx *p, const int *ids, int n, int64_t epoch, hsr_comm **out) {
  if (!p || !ids || n < 1 || n > PEER_MAX || !out)
    return hsr_error(HSR_ERR_INVALID, "peer_comm_create: %d members (valid: 1 to %d)", n, PEER_MAX);
  char name[64];
  snprintf(name, sizeof name, "%ss@%lld", p->noun, (long long)epoch);
  return view(p, ids, n, view_id(epoch, 0), name, out);
}

void peer_comm_free(hsr_comm *c) {
  if (!c) return;
  coll_scratch_free(c);
  coll_comm_dealloc(c);
}

/* ---- verdicts ----------------------------------------------------------------------------- */

static void add_culprit(peer_result *r, int id, const char *fmt, const char *noun, const char *why) {
  r->ok = 0;
  for (int i = 0; i < r->n; i++)
    if (r->culprit[i] == id) return;
  if (r->n < PEER_MAX_CULPRITS) r->culprit[r->n++] = id;
  if (!r->why[0] && fmt) snprintf(r->why, sizeof r->why, fmt, noun, id, why);
}

static coll_op *new_op(hsr_comm *c, hsr_op kind, int nch) {
  coll_op *op = coll_op_new(c, kind);
  ucx_chunk *ch = op ? calloc((size_t)nch, sizeof *ch) : NULL;
  if (!ch) {
    free(op);
    return NULL;
  }
  for (int k = 0; k < nch; k++) ch[k] = (ucx_chunk){.op = op, .k = k};
  ucx_op_of(op)->chunks = ch;
  ucx_op_of(op)->nchunks = nch;
  return op;
}

/* What member j (comm rank) did to the all-reduce, into res: its abort
 * notice (whom it could not complete with), or its endpoint's error while
 * the operation still needs everyone. */
static void judge(peer_ctx *p, coll_op *op, coll_op *nop, const abort_msg *ab, int j, peer_result *res) {
  int id = op->c->world[j];
  const ucx_chunk *nc = &ucx_op_of(nop)->chunks[j];
  if (nc->posted && !nc->pending && !nc->failed) { /* it gave up: whom it could not hear */
    if (!res->why[0])
      snprintf(res->why, sizeof res->why, "%s %d gave up on this step (it could not hear from %s %d)", p->noun, id,
               p->noun, ab[j].n > 0 ? ab[j].culprit[0] : id);
    for (int i = 0; i < ab[j].n && i < PEER_MAX_CULPRITS; i++) add_culprit(res, ab[j].culprit[i], NULL, NULL, NULL);
    if (ab[j].n <= 0) add_culprit(res, id, NULL, NULL, NULL);
    return;
  }
  const ucx_peer *q = &p->u.peers[id];
  if (q->failed && !op->fin)
    add_culprit(res, id, "%s %d is gone: its endpoint reported %s", p->noun, q->err ? q->err : "an error");
}

/* A notice to every other member that can still hear (tiny: it completes
 * eagerly): k NOTICE_K an abort naming whom this member could not complete
 * with, STALL_K "alive, and waiting too". */
static void notify(peer_ctx *p, coll_op *aop, abort_msg *m, int k) {
  hsr_comm *c = aop->c;
  ucx_chunk *ch = ucx_op_of(aop)->chunks;
  for (int j = 0; j < c->size; j++)
    if (j != c->rank && !p->u.peers[c->world[j]].failed)
      ucx_send(&ch[j], j, m, sizeof *m, ucx_tag(aop, UCX_S_MISC, c->rank, k));
  double end = clock_s() + 0.05;
  while (aop->inflight > 0 && clock_s() < end) sleep_on(p, end);
}

static int arrived(const coll_op *nop, int j) {
  const ucx_chunk *ch = &ucx_op_of((coll_op *)nop)->chunks[j];
  return ch->posted && !ch->pending && !ch->failed;
}

/* The bound passed without the operation completing. A ring or recursive
 * doubling stalls everywhere when one member stops: every member waits for
 * someone, and only the one waiting for the stopped member is right to
 * name its own. So each stalled member says so (STALL_K) and waits `grace`
 * more: the member it waits for is named when it did not say so (it does
 * not run); when it did, this member waits another `grace` for the abort of
 * the one that names the culprit (and names the member it waits for only if
 * none comes). The operation may still complete meanwhile. */
static void stall_round(peer_ctx *p, coll_op *op, coll_op *nop, coll_op *sop, coll_op *aop, abort_msg *ab,
                        double timeout_s, peer_result *res) {
  hsr_comm *c = op->c;
  int n = c->size, me = c->rank;
  double grace = timeout_s / 4 < 1.0 ? timeout_s / 4 : 1.0, end = clock_s() + grace;
  ucx_chunk *sch = ucx_op_of(sop)->chunks;
  for (int j = 0; j < n; j++)
    if (j != me && ucx_recv(&sch[j], &ab[n + j], sizeof ab[n + j], ucx_tag(sop, UCX_S_MISC, j, STALL_K))) sch[j].posted = 1;
  ab[2 * n + 1] = (abort_msg){0};
  notify(p, aop, &ab[2 * n + 1], STALL_K);
  char t[32];
  snprintf(t, sizeof t, "%.1f s", timeout_s);
  for (int extended = 0;;) {
    progress_all(p);
    while (!op->fin && op->algo->advance(op)) {}
    if (op->fin && op->st == HSR_OK) return;
    for (int j = 0; j < n; j++)
      if (j != me) judge(p, op, nop, ab, j, res);
    if (!res->ok) return;
    if (clock_s() >= end) {
      int w = op->wait_peer;
      if (w >= 0 && w < n && w != me && !arrived(sop, w)) {
        add_culprit(res, c->world[w], "%s %d sent nothing in %s", p->noun, t);
        return;
      }
      if (!extended++) {
        end += grace;
        continue;
      }
      if (w >= 0 && w < n && w != me)
        add_culprit(res, c->world[w], "%s %d sent nothing in %s (it waits too; no member named another)", p->noun, t);
      else
        res->ok = 0, snprintf(res->why, sizeof res->why, "no progress in %s", t);
      return;
    }
    sleep_on(p, end);
  }
}

hsr_status peer_allreduce(hsr_comm *c, int64_t step, void *buf, size_t count, hsr_dtype dt, hsr_redop rop,
                          double timeout_s, peer_result *res) {
  memset(res, 0, sizeof *res);
  res->ok = 1;
  if (!c || c->tp != &ucx_peer_transport) return hsr_error(HSR_ERR_INVALID, "peer_allreduce: not a peer communicator");
  if (count && !buf) return hsr_error(HSR_ERR_INVALID, "peer_allreduce: NULL buffer");
  peer_ctx *p = peer_of(c);
  sweep(p);
  int n = c->size, me = c->rank;
  if (n <= 1) return HSR_OK;
  hsr_comm_counter before = c->counters[HSR_OP_ALLREDUCE];
  coll_op *op = coll_op_new(c, HSR_OP_ALLREDUCE), *nop = new_op(c, HSR_OP_BARRIER, n), *sop = new_op(c, HSR_OP_BARRIER, n),
          *aop = new_op(c, HSR_OP_BCAST, n);
  /* [0, n): members' aborts; [n, 2n): their stall notices; 2n, 2n + 1: this member's */
  abort_msg *ab = calloc(2 * (size_t)n + 2, sizeof *ab);
  if (!op || !nop || !sop || !aop || !ab) {
    coll_op *all[4] = {op, nop, sop, aop};
    for (int i = 0; i < 4; i++)
      if (all[i]) coll_op_destroy(all[i]);
    free(ab);
    return hsr_error(HSR_ERR_NOMEM, "peer all-reduce");
  }
  op->send = op->recv = buf, op->count = count, op->dt = dt, op->redop = rop;
  op->seq = nop->seq = sop->seq = aop->seq = (uint64_t)step;
  op->t_start = op->t_progress = hsr_clock_ns();
  op->algo = coll_select(op);
  ucx_chunk *nch = ucx_op_of(nop)->chunks;
  for (int j = 0; j < n; j++) /* stall notices are received only once stalled (stall_round): they wait unexpected */
    if (j != me && ucx_recv(&nch[j], &ab[j], sizeof ab[j], ucx_tag(nop, UCX_S_MISC, j, NOTICE_K))) nch[j].posted = 1;
  op->algo->start(op);
  double t0 = clock_s(), deadline = t0 + timeout_s;
  for (;;) {
    progress_all(p);
    while (!op->fin && op->algo->advance(op)) {}
    if (op->fin && op->st == HSR_OK) break;
    /* every member it cannot complete with, not only the first: members that die together are named together */
    for (int j = 0; j < n; j++)
      if (j != me) judge(p, op, nop, ab, j, res);
    if (res->ok && op->fin) { /* a post failed */
      int j = op->wait_peer;
      if (j >= 0 && j < n)
        add_culprit(res, c->world[j], "%s %d: %.280s", p->noun, op->err);
      else
        res->ok = 0, snprintf(res->why, sizeof res->why, "%.300s", op->err);
    } else if (res->ok && op->xfer_err) { /* a transfer failed without an endpoint error: the member it waits for */
      int j = op->wait_peer;
      if (j >= 0 && j < n && j != me)
        add_culprit(res, c->world[j], "transfers with %s %d failed (%s)", p->noun, op->xfer_err);
      else
        res->ok = 0, snprintf(res->why, sizeof res->why, "a transfer failed (%s)", op->xfer_err);
    }
    if (res->ok) { /* the member it waits for answers no heartbeat: stopped, named without the whole bound */
      int w = op->wait_peer;
      if (w >= 0 && w < n && w != me && hb_silent(p, c->world[w], t0)) hb_name(p, res, c->world[w]);
    }
    if (!res->ok) break;
    if (clock_s() >= deadline) {
      stall_round(p, op, nop, sop, aop, ab, timeout_s, res);
      break;
    }
    sleep_on(p, deadline);
  }
  if (!res->ok) {
    abort_msg *m = &ab[2 * n];
    m->n = res->n;
    for (int i = 0; i < res->n; i++) m->culprit[i] = res->culprit[i];
    notify(p, aop, m, NOTICE_K);
  }
  hsr_comm_counter *k = &c->counters[HSR_OP_ALLREDUCE];
  res->bytes_sent = k->bytes_sent - before.bytes_sent;
  res->bytes_recv = k->bytes_recv - before.bytes_recv;
  /* the notices, then the op: what is still pending keeps its buffers (the
   * op's: the scratch and buf, which is then the context's) */
  coll_op *nops[3] = {nop, sop, aop}, *ops[3] = {op, NULL, NULL};
  void *nown[3] = {ab, NULL, NULL}, *own[3] = {c->scratch, buf, NULL};
  if (!end_ops(p, nops, res->ok ? 0 : 0.05, nown)) free(ab);
  if (end_ops(p, ops, 0.2, own)) {
    c->scratch = NULL, c->scratch_bytes = 0;
    res->buf_taken = 1;
  }
  return HSR_OK;
}

/* ---- point to point ------------------------------------------------------------------------ */

/* Requests to or from several members at once: every one posted before any
 * is waited on, so that their transfers overlap; each ends on its own (a
 * member that fails ends its request, not the others'). */
static hsr_status p2p(peer_ctx *p, int send, int64_t epoch, const peer_req *rq, int n, double timeout_s,
                      peer_result *res) {
  for (int k = 0; k < n; k++) {
    memset(&res[k], 0, sizeof res[k]);
    res[k].ok = 1;
  }
  int me = p->x.rank;
  for (int k = 0; k < n; k++) {
    HSR_CHECK(id_ok(rq[k].id));
    if (rq[k].id == me)
      return hsr_error(HSR_ERR_INVALID, "peer %s: to itself (%s %d)", send ? "send" : "receive", p->noun, rq[k].id);
  }
  if (n < 1) return HSR_OK;
  sweep(p);
  hsr_comm **c = calloc((size_t)n, sizeof *c);
  coll_op **op = calloc((size_t)n, sizeof *op);
  if (!c || !op) {
    free(c), free(op);
    return hsr_error(HSR_ERR_NOMEM, "peer %s", send ? "send" : "receive");
  }
  hsr_status st = HSR_OK;
  for (int k = 0; k < n && st == HSR_OK; k++) {
    int id = rq[k].id, ids[2] = {me < id ? me : id, me < id ? id : me}, j = me < id ? 1 : 0;
    if (rq[k].nbuf < 1) continue;
    st = view(p, ids, 2, view_id(epoch, 1), "point to point", &c[k]);
    if (st == HSR_OK && !(op[k] = new_op(c[k], HSR_OP_BCAST, rq[k].nbuf)))
      st = hsr_error(HSR_ERR_NOMEM, "peer %s", send ? "send" : "receive");
    if (st != HSR_OK) break;
    ucx_chunk *ch = ucx_op_of(op[k])->chunks;
    int src = send ? me : id;
    for (int i = 0; i < rq[k].nbuf && !op[k]->fin; i++) {
      op[k]->seq = (uint64_t)(rq[k].seq + i); /* the tag's sequence field */
      uint64_t tag = ucx_tag(op[k], UCX_S_MISC, src, 0);
      if (send ? ucx_send(&ch[i], j, rq[k].bufs[i], rq[k].bytes[i], tag)
               : ucx_recv(&ch[i], rq[k].bufs[i], rq[k].bytes[i], tag))
        ch[i].posted = 1;
    }
  }
  double t0 = clock_s(), deadline = t0 + timeout_s;
  for (int busy = st == HSR_OK; busy;) {
    progress_all(p);
    busy = 0;
    int late = clock_s() >= deadline;
    for (int k = 0; k < n; k++) {
      if (!op[k] || !res[k].ok) continue;
      int id = rq[k].id, pend = 0;
      ucx_chunk *ch = ucx_op_of(op[k])->chunks;
      for (int i = 0; i < rq[k].nbuf && res[k].ok; i++) {
        if (ch[i].failed)
          add_culprit(&res[k], id, send ? "cannot send to %s %d (%s)" : "no message from %s %d (%s)", p->noun,
                      op[k]->xfer_err ? op[k]->xfer_err : "an error");
        pend += ch[i].pending > 0;
      }
      if (res[k].ok && op[k]->fin) add_culprit(&res[k], id, "%s %d: %.280s", p->noun, op[k]->err); /* a post failed */
      if (!res[k].ok || !pend) continue;
      const ucx_peer *q = &p->u.peers[id];
      if (q->failed) {
        add_culprit(&res[k], id, "%s %d is gone: its endpoint reported %s", p->noun, q->err ? q->err : "an error");
      } else if (hb_silent(p, id, t0)) {
        hb_name(p, &res[k], id);
      } else if (late) {
        char t[64];
        snprintf(t, sizeof t, "%s for %.1f s", send ? "took nothing" : "sent nothing", timeout_s);
        add_culprit(&res[k], id, "%s %d %s", p->noun, t);
      } else {
        busy = 1;
      }
    }
    if (busy) sleep_on(p, deadline);
  }
  for (int k = 0; k < n; k++) {
    if (!op[k]) {
      if (c[k]) peer_comm_free(c[k]);
      continue;
    }
    ucx_chunk *ch = ucx_op_of(op[k])->chunks;
    for (int i = 0; i < rq[k].nbuf; i++)
      if (ch[i].posted && !ch[i].pending && !ch[i].failed)
        *(send ? &res[k].bytes_sent : &res[k].bytes_recv) += rq[k].bytes[i];
    coll_op *ops[3] = {op[k], NULL, NULL};
    void *own[3] = {NULL, NULL, NULL};
    res[k].buf_taken = end_ops(p, ops, 0.2, own);
    peer_comm_free(c[k]); /* an op left pending no longer reads its communicator */
  }
  free(c), free(op);
  return st;
}

hsr_status peer_send(peer_ctx *p, int id, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes, int nbuf,
                     double timeout_s, peer_result *res) {
  peer_req rq = {id, seq, bufs, bytes, nbuf};
  return p2p(p, 1, epoch, &rq, 1, timeout_s, res);
}

hsr_status peer_recv(peer_ctx *p, int id, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes, int nbuf,
                     double timeout_s, peer_result *res) {
  peer_req rq = {id, seq, bufs, bytes, nbuf};
  return p2p(p, 0, epoch, &rq, 1, timeout_s, res);
}

hsr_status peer_recv_many(peer_ctx *p, int64_t epoch, const peer_req *rq, int n, double timeout_s, peer_result *res) {
  return p2p(p, 0, epoch, rq, n, timeout_s, res);
}

/* ---- the exchange inside one job: the bootstrap --------------------------------------------- */

typedef struct boot_xchg {
  hsr_boot *boot;
  uint64_t *lens;
  char *all;
  size_t most;
} boot_xchg;

static hsr_status boot_put(void *arg, const void *blob, size_t len) {
  boot_xchg *b = arg;
  int n = hsr_boot_size(b->boot);
  uint64_t mine = len;
  free(b->lens), free(b->all);
  b->all = NULL, b->most = 0;
  b->lens = calloc((size_t)n, sizeof *b->lens);
  if (!b->lens) return hsr_error(HSR_ERR_NOMEM, "address exchange");
  HSR_CHECK(boot_allgather(b->boot, &mine, sizeof mine, b->lens));
  for (int r = 0; r < n; r++) b->most = b->lens[r] > b->most ? b->lens[r] : b->most;
  char *pad = calloc(1, b->most ? b->most : 1);
  b->all = calloc((size_t)n, b->most ? b->most : 1);
  hsr_status st = pad && b->all ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "address exchange");
  if (st == HSR_OK) {
    memcpy(pad, blob, len);
    st = boot_allgather(b->boot, pad, b->most, b->all);
  }
  free(pad);
  return st;
}

static hsr_status boot_get(void *arg, int id, void **blob, size_t *len) {
  boot_xchg *b = arg;
  *blob = NULL, *len = 0;
  if (!b->all || id < 0 || id >= hsr_boot_size(b->boot)) return HSR_OK;
  *len = b->lens[id];
  *blob = malloc(*len ? *len : 1);
  if (!*blob) return hsr_error(HSR_ERR_NOMEM, "address exchange");
  memcpy(*blob, b->all + (size_t)id * b->most, *len);
  return HSR_OK;
}

hsr_status peer_xchg_boot(hsr_boot *boot, peer_xchg *out) {
  boot_xchg *b = calloc(1, sizeof *b);
  if (!b) return hsr_error(HSR_ERR_NOMEM, "address exchange");
  b->boot = boot;
  *out = (peer_xchg){.put = boot_put, .get = boot_get, .arg = b};
  return HSR_OK;
}

void peer_xchg_boot_free(peer_xchg *x) {
  if (!x || !x->arg) return;
  boot_xchg *b = x->arg;
  free(b->lens), free(b->all), free(b);
  x->arg = NULL;
}
