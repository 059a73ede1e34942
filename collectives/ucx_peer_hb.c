/* The heartbeat responder of a peer context (peer_hb.h): a UCX context,
 * worker and thread of its own. The thread sleeps on the worker's event fd
 * and on a stop fd; a ping's active message records the sender's address,
 * and after the progress that delivered it the thread answers with a pong
 * on an endpoint to the sender's main worker (made on the first ping, made
 * again when the sender's address changes or the endpoint failed). Nothing
 * here touches the peer context's own worker. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "peer_hb.h"
#include "collectives/peer_internal.h"
#include "common/common_internal.h"

typedef struct hb_peer {
  ucp_ep_h ep;
  void *addr; /* its main worker's address, as its last ping carried it */
  size_t len;
  int failed; /* the endpoint reported an error: made again on the next ping */
  int due;    /* a ping arrived: answer it */
} hb_peer;

struct peer_hb {
  int32_t id; /* the pong's header */
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_address_t *addr;
  size_t addr_len;
  int efd, stopfd;
  pthread_t thread;
  int started;
  atomic_int stop;
  hb_peer peers[PEER_MAX];
  int due[PEER_MAX], ndue;
};

static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep, (void)st;
  ((hb_peer *)arg)->failed = 1;
}

/* Runs inside the thread's progress: record, answer after it (sending from
 * here would re-enter the worker). */
static ucs_status_t on_ping(void *arg, const void *header, size_t header_len, void *data, size_t len,
                            const ucp_am_recv_param_t *param) {
  peer_hb *h = arg;
  int32_t id;
  if (header_len != sizeof id || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || !len) return UCS_OK;
  memcpy(&id, header, sizeof id);
  if (id < 0 || id >= PEER_MAX) return UCS_OK;
  hb_peer *q = &h->peers[id];
  if (q->len != len || memcmp(q->addr, data, len)) { /* a new sender, or its process was restarted */
    void *a = malloc(len);
    if (!a) return UCS_OK;
    memcpy(a, data, len);
    free(q->addr);
    q->addr = a, q->len = len;
    q->failed = 1; /* the endpoint, if any, is to the old address */
  }
  if (!q->due) q->due = 1, h->due[h->ndue++] = id;
  return UCS_OK;
}

static void close_ep(peer_hb *h, hb_peer *q) {
  if (!q->ep) return;
  ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
  ucs_status_ptr_t r = ucp_ep_close_nbx(q->ep, &cp);
  q->ep = NULL;
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  for (int i = 0; i < 1000 && ucp_request_check_status(r) == UCS_INPROGRESS; i++) /* a forced close ends at once */
    if (!ucp_worker_progress(h->worker)) usleep(1000);
  if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(h->worker, r);
  ucp_request_free(r);
}

static void answer(peer_hb *h, int id) {
  hb_peer *q = &h->peers[id];
  q->due = 0;
  if (q->failed) close_ep(h, q), q->failed = 0;
  if (!q->ep) {
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = q->addr,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_failed, .arg = q}};
    if (ucp_ep_create(h->worker, &ep, &q->ep) != UCS_OK) {
      q->ep = NULL;
      return; /* the pinger hears nothing and pings again */
    }
  }
  /* header: this id, read from the context (alive until the worker goes) */
  ucp_request_param_t sp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_AM_SEND_FLAG_EAGER};
  ucs_status_ptr_t r = ucp_am_send_nbx(q->ep, PEER_HB_PONG, &h->id, sizeof h->id, NULL, 0, &sp);
  if (UCS_PTR_IS_PTR(r)) ucp_request_free(r); /* released once it completes */
}

static void *run(void *arg) {
  peer_hb *h = arg;
  while (!atomic_load(&h->stop)) {
    while (ucp_worker_progress(h->worker)) {}
    while (h->ndue > 0) answer(h, h->due[--h->ndue]);
    if (ucp_worker_arm(h->worker) == UCS_ERR_BUSY) continue;
    struct pollfd pf[2] = {{.fd = h->efd, .events = POLLIN}, {.fd = h->stopfd, .events = POLLIN}};
    poll(pf, 2, 1000); /* woken by a ping or by the stop; the second a bound only */
  }
  return NULL;
}

hsr_status peer_hb_open(int id, peer_hb **out) {
  *out = NULL;
  if (id < 0 || id >= PEER_MAX) return hsr_error(HSR_ERR_INVALID, "heartbeat: member id %d (valid: 0 to %d)", id, PEER_MAX - 1);
  peer_hb *h = calloc(1, sizeof *h);
  if (!h) return hsr_error(HSR_ERR_NOMEM, "heartbeat responder");
  h->id = id;
  h->efd = -1;
  h->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  hsr_status st = h->stopfd < 0 ? hsr_error(HSR_ERR_SYSTEM, "heartbeat: eventfd: %s", strerror(errno)) : HSR_OK;
  ucp_config_t *cfg = NULL;
  ucs_status_t us = UCS_OK;
  if (st == HSR_OK && (us = ucp_config_read(NULL, NULL, &cfg)) != UCS_OK)
    st = hsr_error(HSR_ERR_TRANSPORT, "heartbeat: ucp_config_read: %s", ucs_status_string(us));
  if (st == HSR_OK) {
    ucp_params_t prm = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
    us = ucp_init(&prm, cfg, &h->ucp);
    ucp_config_release(cfg);
    if (us != UCS_OK) h->ucp = NULL, st = hsr_error(HSR_ERR_TRANSPORT, "heartbeat: ucp_init: %s", ucs_status_string(us));
  }
  if (st == HSR_OK) {
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    us = ucp_worker_create(h->ucp, &wp, &h->worker);
    if (us != UCS_OK) h->worker = NULL;
    if (us == UCS_OK) us = ucp_worker_get_efd(h->worker, &h->efd);
    if (us == UCS_OK) {
      ucp_am_handler_param_t ap = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                                                 UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                   .id = PEER_HB_PING,
                                   .cb = on_ping,
                                   .arg = h};
      us = ucp_worker_set_am_recv_handler(h->worker, &ap);
    }
    if (us == UCS_OK) us = ucp_worker_get_address(h->worker, &h->addr, &h->addr_len);
    if (us != UCS_OK) h->addr = NULL, st = hsr_error(HSR_ERR_TRANSPORT, "heartbeat: UCX worker: %s", ucs_status_string(us));
  }
  /* the thread owns the worker from here on */
  if (st == HSR_OK) {
    int e = pthread_create(&h->thread, NULL, run, h);
    if (e) st = hsr_error(HSR_ERR_SYSTEM, "heartbeat: pthread_create: %s", strerror(e));
    h->started = !e;
  }
  if (st != HSR_OK) {
    peer_hb_close(h);
    return st;
  }
  *out = h;
  return HSR_OK;
}

const void *peer_hb_address(const peer_hb *h, size_t *len) {
  *len = h ? h->addr_len : 0;
  return h ? h->addr : NULL;
}

void peer_hb_close(peer_hb *h) {
  if (!h) return;
  if (h->started) {
    atomic_store(&h->stop, 1);
    uint64_t one = 1;
    ssize_t w = write(h->stopfd, &one, sizeof one);
    (void)w;
    pthread_join(h->thread, NULL);
  }
  if (h->worker) {
    for (int i = 0; i < PEER_MAX; i++) close_ep(h, &h->peers[i]);
    if (h->addr) ucp_worker_release_address(h->worker, h->addr);
    ucp_worker_destroy(h->worker);
  }
  if (h->ucp) ucp_cleanup(h->ucp);
  for (int i = 0; i < PEER_MAX; i++) free(h->peers[i].addr);
  if (h->stopfd >= 0) close(h->stopfd);
  free(h);
}
