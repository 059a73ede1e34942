/* UCX links between replica groups (ft/link.h). */
#include "link.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "common/common_internal.h"

typedef struct peer {
  struct ft_link *l;
  int id;
  ucp_ep_h ep;
  int failed; /* the endpoint reported an error */
  char why[160];
} peer;

/* A buffer that requests of an operation read or write. When the operation
 * ends with some of them still pending (a peer that stopped, an abandoned
 * attempt), the buffer stays alive until the last one completes; `owned`
 * buffers are then freed here. */
typedef struct bufrec {
  void *ptr;
  int refs, owned, retired;
} bufrec;

typedef struct slot {
  struct ft_link *l;
  void *req;
  int done, abandoned, peer, kind;
  ucs_status_t st;
  size_t len;
  bufrec *rec;
} slot;

struct ft_link {
  ucp_context_h ucp;
  ucp_worker_h w;
  int efd;
  ucp_address_t *addr;
  size_t alen;
  peer *peers[FT_MAX_REPLICAS];
  bufrec *tmp; /* the all-reduce's receive buffer for other replicas' pieces */
  size_t tmpcap;
  int abandoned; /* slots still pending from finished operations */
};

uint64_t ft_tag(int kind, int64_t epoch, int64_t step, int src) {
  return ((uint64_t)kind << 60) | (((uint64_t)epoch & 0xffffu) << 44) | (((uint64_t)step & 0xffffffffu) << 12) |
         ((uint64_t)src & 0xfffu);
}

static void rec_unref(bufrec *r) {
  if (!r || --r->refs > 0 || !r->retired) return;
  if (r->owned) free(r->ptr);
  free(r);
}

static void complete(slot *s, ucs_status_t st, size_t len) {
  s->st = st, s->len = len, s->done = 1, s->req = NULL;
  if (!s->abandoned) return;
  s->l->abandoned--;
  rec_unref(s->rec);
  free(s);
}

static void send_cb(void *req, ucs_status_t st, void *ud) {
  ucp_request_free(req);
  complete(ud, st, 0);
}

static void recv_cb(void *req, ucs_status_t st, const ucp_tag_recv_info_t *info, void *ud) {
  ucp_request_free(req);
  complete(ud, st, st == UCS_OK && info ? info->length : 0);
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st) {
  (void)ep;
  peer *p = arg;
  if (p->failed) return;
  p->failed = 1;
  snprintf(p->why, sizeof p->why, "its endpoint reported %s", ucs_status_string(st));
}

hsr_status ft_link_open(ft_link **out) {
  *out = NULL;
  ft_link *l = calloc(1, sizeof *l);
  if (!l) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  l->efd = -1;
  ucp_config_t *cfg;
  ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
  if (us != UCS_OK) {
    free(l);
    return hsr_error(HSR_ERR_TRANSPORT, "ucp_config_read: %s", ucs_status_string(us));
  }
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP};
  us = ucp_init(&p, cfg, &l->ucp);
  ucp_config_release(cfg);
  if (us != UCS_OK) {
    free(l);
    return hsr_error(HSR_ERR_TRANSPORT, "replica links: ucp_init: %s", ucs_status_string(us));
  }
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
  us = ucp_worker_create(l->ucp, &wp, &l->w);
  if (us == UCS_OK) us = ucp_worker_get_efd(l->w, &l->efd);
  if (us == UCS_OK) us = ucp_worker_get_address(l->w, &l->addr, &l->alen);
  if (us != UCS_OK) {
    ft_link_close(l);
    return hsr_error(HSR_ERR_TRANSPORT, "replica links: UCX worker: %s", ucs_status_string(us));
  }
  *out = l;
  return HSR_OK;
}

static void progress_all(ft_link *l) {
  while (ucp_worker_progress(l->w)) {}
}

/* Sleeps on the worker's event fd until something may have happened, at
 * most until `deadline` (and never more than 100 ms, so that flags set by
 * endpoint errors are looked at). */
static void sleep_on(ft_link *l, double deadline) {
  progress_all(l);
  if (ucp_worker_arm(l->w) == UCS_ERR_BUSY) return;
  double left = deadline - clock_s();
  int ms = left <= 0 ? 0 : left > 0.1 ? 100 : (int)(left * 1e3) + 1;
  struct pollfd pf = {.fd = l->efd, .events = POLLIN};
  poll(&pf, 1, ms);
}

static void close_ep(ft_link *l, peer *p, int force) {
  if (!p->ep) return;
  ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
  ucs_status_ptr_t r = ucp_ep_close_nbx(p->ep, &cp);
  p->ep = NULL;
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double end = clock_s() + 1.0;
  while (ucp_request_check_status(r) == UCS_INPROGRESS && clock_s() < end) sleep_on(l, end);
  if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(l->w, r);
  ucp_request_free(r);
}

/* Messages of abandoned attempts that no receive matched: taken off the
 * worker before it goes (UCX would warn about each, on every rank). */
static void drain_unexpected(ft_link *l) {
  for (int i = 0; i < 10000; i++) {
    progress_all(l);
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = ucp_tag_probe_nb(l->w, 0, 0, 1, &info);
    if (!m) return;
    void *b = malloc(info.length ? info.length : 1);
    if (!b) return;
    ucp_request_param_t rp = {.op_attr_mask = 0};
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(l->w, b, info.length, m, &rp);
    double end = clock_s() + 0.5;
    while (r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS && clock_s() < end)
      sleep_on(l, end);
    if (r && !UCS_PTR_IS_ERR(r)) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) { /* still arriving: leave it and its buffer */
        ucp_request_free(r);
        return;
      }
      ucp_request_free(r);
    }
    free(b);
  }
}

void ft_link_close(ft_link *l) {
  if (!l) return;
  if (l->w) drain_unexpected(l);
  for (int i = 0; i < FT_MAX_REPLICAS; i++)
    if (l->peers[i]) {
      close_ep(l, l->peers[i], 1); /* pending sends end here */
    }
  if (l->w) {
    double end = clock_s() + 1.0;
    while (l->abandoned > 0 && clock_s() < end) sleep_on(l, end);
  }
  for (int i = 0; i < FT_MAX_REPLICAS; i++) free(l->peers[i]);
  if (l->tmp) {
    l->tmp->retired = 1;
    l->tmp->refs++;
    rec_unref(l->tmp);
  }
  if (l->addr) ucp_worker_release_address(l->w, l->addr);
  if (l->w) ucp_worker_destroy(l->w);
  if (l->ucp) ucp_cleanup(l->ucp);
  free(l);
}

hsr_status ft_link_address(ft_link *l, const void **addr, size_t *len) {
  *addr = l->addr;
  *len = l->alen;
  return HSR_OK;
}

static hsr_status peer_id_ok(int peer) {
  if (peer < 0 || peer >= FT_MAX_REPLICAS)
    return hsr_error(HSR_ERR_INVALID, "replica %d out of range (0 to %d)", peer, FT_MAX_REPLICAS - 1);
  return HSR_OK;
}

hsr_status ft_link_connect(ft_link *l, int id, const void *addr, size_t len) {
  HSR_CHECK(peer_id_ok(id));
  (void)len;
  if (!l->peers[id]) {
    l->peers[id] = calloc(1, sizeof *l->peers[id]);
    if (!l->peers[id]) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  peer *p = l->peers[id];
  close_ep(l, p, 1);
  *p = (peer){.l = l, .id = id};
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
                        .address = addr,
                        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                        .err_handler = {.cb = ep_error, .arg = p}};
  ucs_status_t us = ucp_ep_create(l->w, &ep, &p->ep);
  if (us != UCS_OK) {
    p->ep = NULL;
    p->failed = 1;
    snprintf(p->why, sizeof p->why, "no endpoint (%s)", ucs_status_string(us));
  }
  return HSR_OK;
}

void ft_link_disconnect(ft_link *l, int id) {
  if (peer_id_ok(id) != HSR_OK || !l->peers[id]) return;
  close_ep(l, l->peers[id], 1);
}

int ft_link_connected(const ft_link *l, int id) {
  return id >= 0 && id < FT_MAX_REPLICAS && l->peers[id] && l->peers[id]->ep;
}

/* ---- requests ---- */

static slot *new_slot(ft_link *l, int peer, int kind, bufrec *rec) {
  slot *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->l = l, s->peer = peer, s->kind = kind, s->rec = rec;
  if (rec) rec->refs++;
  return s;
}

static slot *post_send(ft_link *l, int id, uint64_t tag, const void *buf, size_t n, int kind, bufrec *rec) {
  slot *s = new_slot(l, id, kind, rec);
  if (!s) return NULL;
  peer *p = l->peers[id];
  if (!p || !p->ep) {
    s->done = 1, s->st = UCS_ERR_NOT_CONNECTED;
    return s;
  }
  ucp_request_param_t rp = {.op_attr_mask =
                                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                            .cb.send = send_cb,
                            .user_data = s};
  ucs_status_ptr_t r = ucp_tag_send_nbx(p->ep, buf, n, tag, &rp);
  if (UCS_PTR_IS_ERR(r))
    s->done = 1, s->st = UCS_PTR_STATUS(r);
  else
    s->req = r;
  return s;
}

static slot *post_recv(ft_link *l, int id, uint64_t tag, void *buf, size_t n, int kind, bufrec *rec) {
  slot *s = new_slot(l, id, kind, rec);
  if (!s) return NULL;
  ucp_request_param_t rp = {.op_attr_mask =
                                UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                            .cb.recv = recv_cb,
                            .user_data = s};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(l->w, buf, n, tag, ~0ull, &rp);
  if (UCS_PTR_IS_ERR(r))
    s->done = 1, s->st = UCS_PTR_STATUS(r);
  else
    s->req = r;
  return s;
}

/* The end of an operation: pending receives are cancelled, pending sends
 * left to finish (or to end with their endpoint); neither outlives its
 * buffer. */
static int finish_slots(ft_link *l, slot **s, int n) {
  int left = 0;
  for (int i = 0; i < n; i++)
    if (s[i] && !s[i]->done && s[i]->req && s[i]->kind < 0) ucp_request_cancel(l->w, s[i]->req);
  double end = clock_s() + 0.2;
  for (;;) {
    int pend = 0;
    for (int i = 0; i < n; i++) pend += s[i] && !s[i]->done && s[i]->kind < 0;
    if (!pend || clock_s() >= end) break;
    sleep_on(l, end);
  }
  for (int i = 0; i < n; i++) {
    if (!s[i]) continue;
    if (s[i]->done) {
      rec_unref(s[i]->rec);
      free(s[i]);
    } else {
      s[i]->abandoned = 1;
      l->abandoned++;
      left++;
    }
  }
  return left;
}

static void add_culprit(ft_result *r, int id, const char *fmt, const char *why) {
  for (int i = 0; i < r->n; i++)
    if (r->culprit[i] == id) return;
  if (r->n < FT_MAX_CULPRITS) r->culprit[r->n++] = id;
  if (!r->why[0] && fmt) snprintf(r->why, sizeof r->why, fmt, id, why);
  r->ok = 0;
}

/* ---- the all-reduce ---- */

typedef struct abort_msg {
  int32_t n, culprit[FT_MAX_CULPRITS];
} abort_msg;

static size_t off_of(size_t len, int n, int j) { return (size_t)((unsigned long long)len * (unsigned)j / (unsigned)n); }

static hsr_status tmp_get(ft_link *l, size_t floats, float **out) {
  if (l->tmp && l->tmp->refs == 0 && l->tmpcap >= floats) {
    *out = l->tmp->ptr;
    return HSR_OK;
  }
  if (l->tmp) { /* busy with abandoned receives, or too small */
    l->tmp->retired = 1;
    l->tmp->refs++;
    rec_unref(l->tmp);
    l->tmp = NULL;
  }
  bufrec *r = calloc(1, sizeof *r);
  void *p = NULL;
  if (!r || posix_memalign(&p, 64, (floats ? floats : 1) * sizeof(float))) {
    free(r);
    return hsr_error(HSR_ERR_NOMEM, "replica all-reduce: %zu bytes", floats * sizeof(float));
  }
  *r = (bufrec){p, 0, 1, 0};
  l->tmp = r;
  l->tmpcap = floats;
  *out = p;
  return HSR_OK;
}

/* Sends an abort notice to every peer (tiny: it completes eagerly). */
static void send_aborts(ft_link *l, const int *peers, int n, int me, int64_t epoch, int64_t step, const ft_result *r,
                        abort_msg *m, bufrec *rec) {
  m->n = r->n;
  for (int i = 0; i < r->n; i++) m->culprit[i] = r->culprit[i];
  slot *s[FT_MAX_REPLICAS];
  int k = 0;
  for (int j = 0; j < n; j++)
    if (j != me) s[k++] = post_send(l, peers[j], ft_tag(FT_TAG_ABORT, epoch, step, peers[me]), m, sizeof *m, 1, rec);
  double end = clock_s() + 0.05;
  for (;;) {
    int pend = 0;
    for (int i = 0; i < k; i++) pend += s[i] && !s[i]->done;
    if (!pend || clock_s() >= end) break;
    sleep_on(l, end);
  }
  finish_slots(l, s, k);
}

hsr_status ft_link_allreduce_avg(ft_link *l, const int *peers, int n, int me, int64_t epoch, int64_t step, float *buf,
                                 size_t len, double timeout_s, ft_result *res) {
  memset(res, 0, sizeof *res);
  res->ok = 1;
  if (n <= 1) return HSR_OK;
  if (n > FT_MAX_REPLICAS) return hsr_error(HSR_ERR_INVALID, "replica all-reduce over %d replicas", n);
  size_t mine = off_of(len, n, me + 1) - off_of(len, n, me), most = 0;
  for (int j = 0; j < n; j++) {
    size_t c = off_of(len, n, j + 1) - off_of(len, n, j);
    most = c > most ? c : most;
  }
  float *tmp = NULL;
  HSR_CHECK(tmp_get(l, (size_t)(n - 1) * mine + 1, &tmp));
  bufrec *brec = calloc(1, sizeof *brec), *abrec = calloc(1, sizeof *abrec);
  abort_msg *ab = calloc((size_t)n + 1, sizeof *ab);
  slot **rs = calloc((size_t)n * 5, sizeof *rs);
  if (!brec || !abrec || !ab || !rs) {
    free(brec), free(abrec), free(ab), free(rs);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  *brec = (bufrec){buf, 0, 0, 0};
  *abrec = (bufrec){ab, 0, 1, 0}; /* the abort notices in and out: freed with the last request on them */
  slot **rrs = rs, **rag = rs + n, **rab = rs + 2 * n, **srs = rs + 3 * n, **sag = rs + 4 * n;
  int src = peers[me];
  /* every receive first, so that whatever arrives has a place */
  for (int j = 0; j < n; j++) {
    if (j == me) continue;
    int p = peers[j];
    size_t o = off_of(len, n, j), c = off_of(len, n, j + 1) - o;
    rrs[j] = post_recv(l, p, ft_tag(FT_TAG_RS, epoch, step, p), tmp + (size_t)(j < me ? j : j - 1) * mine,
                       mine * sizeof(float), -1, l->tmp);
    rag[j] = post_recv(l, p, ft_tag(FT_TAG_AG, epoch, step, p), buf + o, c * sizeof(float), -2, brec);
    rab[j] = post_recv(l, p, ft_tag(FT_TAG_ABORT, epoch, step, p), &ab[j], sizeof ab[j], -3, abrec);
    if (!rrs[j] || !rag[j] || !rab[j]) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  for (int d = 1; d < n; d++) { /* spread: each sends to its right neighbour first */
    int j = (me + d) % n;
    size_t o = off_of(len, n, j), c = off_of(len, n, j + 1) - o;
    srs[j] = post_send(l, peers[j], ft_tag(FT_TAG_RS, epoch, step, src), buf + o, c * sizeof(float), 1, brec);
    if (!srs[j]) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    res->bytes_sent += c * sizeof(float);
  }
  double deadline = clock_s() + timeout_s;
  int phase = 1;
  float *out = buf + off_of(len, n, me);
  for (;;) {
    progress_all(l);
    int need = 0;
    /* every peer it cannot hear from, not only the first: groups that die together are dropped together */
    for (int j = 0; j < n; j++) {
      if (j == me) continue;
      int p = peers[j];
      if (rab[j]->done && rab[j]->st == UCS_OK) { /* it gave up: say whom it could not hear */
        if (!res->why[0])
          snprintf(res->why, sizeof res->why, "replica %d gave up on this step (it could not hear from replica %d)", p,
                   ab[j].n > 0 ? ab[j].culprit[0] : p);
        for (int i = 0; i < ab[j].n && i < FT_MAX_CULPRITS; i++) add_culprit(res, ab[j].culprit[i], NULL, NULL);
        if (ab[j].n == 0) add_culprit(res, p, NULL, NULL);
        continue;
      }
      slot *w = phase == 1 ? rrs[j] : rag[j];
      slot *sd = phase == 1 ? srs[j] : sag[j];
      if (w->done && w->st != UCS_OK)
        add_culprit(res, p, "no message from replica %d (%s)", ucs_status_string(w->st));
      else if (sd && sd->done && sd->st != UCS_OK)
        add_culprit(res, p, "cannot send to replica %d (%s)", ucs_status_string(sd->st));
      else if (!w->done && l->peers[p] && l->peers[p]->failed)
        add_culprit(res, p, "replica %d is gone: %s", l->peers[p]->why);
      else if (!w->done || (sd && !sd->done))
        need++;
    }
    if (!res->ok) break;
    if (need == 0 && phase == 1) { /* this replica's n-th: the sum in replica order, then the mean */
      float inv = 1.0f / (float)n;
      for (size_t e0 = 0; e0 < mine; e0 += 256) {
        size_t e1 = e0 + 256 < mine ? e0 + 256 : mine;
        float acc[256];
        for (size_t e = e0; e < e1; e++) acc[e - e0] = 0;
        for (int j = 0; j < n; j++) {
          const float *v = j == me ? out : tmp + (size_t)(j < me ? j : j - 1) * mine;
          for (size_t e = e0; e < e1; e++) acc[e - e0] += v[e];
        }
        for (size_t e = e0; e < e1; e++) out[e] = acc[e - e0] * inv;
      }
      for (int d = 1; d < n; d++) {
        int j = (me + d) % n;
        sag[j] = post_send(l, peers[j], ft_tag(FT_TAG_AG, epoch, step, src), out, mine * sizeof(float), 2, brec);
        if (!sag[j]) return hsr_error(HSR_ERR_NOMEM, "out of memory");
        res->bytes_sent += mine * sizeof(float);
      }
      phase = 2;
      continue;
    }
    if (need == 0 && phase == 2) break;
    if (clock_s() >= deadline) {
      char t[32];
      snprintf(t, sizeof t, "%.1f s", timeout_s);
      for (int j = 0; j < n; j++) {
        slot *w = phase == 1 ? rrs[j] : rag[j];
        if (j != me && !w->done) add_culprit(res, peers[j], "replica %d sent nothing in %s", t);
      }
      for (int j = 0; j < n && res->ok; j++) { /* only sends pending: the receiver is the one that does not move */
        slot *sd = phase == 1 ? srs[j] : sag[j];
        if (j != me && sd && !sd->done) add_culprit(res, peers[j], "replica %d took nothing in %s", t);
      }
      break;
    }
    sleep_on(l, deadline);
  }
  if (!res->ok) send_aborts(l, peers, n, me, epoch, step, res, &ab[n], abrec);
  for (int j = 0; j < n; j++)
    if (j != me && rag[j] && rag[j]->done && rag[j]->st == UCS_OK) res->bytes_recv += rag[j]->len;
  for (int j = 0; j < n; j++)
    if (j != me && rrs[j] && rrs[j]->done && rrs[j]->st == UCS_OK) res->bytes_recv += rrs[j]->len;
  finish_slots(l, rs, 5 * n);
  /* buf: still read by an abandoned send? Then it is this module's now (the
   * caller takes another): freed when the last one ends */
  brec->retired = 1;
  brec->refs++;
  res->buf_taken = brec->refs > 1;
  if (res->buf_taken) brec->owned = 1;
  rec_unref(brec);
  abrec->retired = 1;
  abrec->refs++;
  rec_unref(abrec);
  free(rs);
  return HSR_OK;
}

/* ---- point to point ---- */

static hsr_status p2p(ft_link *l, int send, int peer, int src, int64_t epoch, int64_t seq, void *const *bufs,
                      const size_t *bytes, int nbuf, double timeout_s, ft_result *res) {
  memset(res, 0, sizeof *res);
  res->ok = 1;
  HSR_CHECK(peer_id_ok(peer));
  slot **s = calloc((size_t)(nbuf ? nbuf : 1), sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < nbuf; i++) {
    uint64_t tag = ft_tag(FT_TAG_HEAL, epoch, seq + i, send ? src : peer);
    s[i] = send ? post_send(l, peer, tag, bufs[i], bytes[i], 3, NULL)
                : post_recv(l, peer, tag, bufs[i], bytes[i], -4, NULL);
    if (!s[i]) {
      finish_slots(l, s, i);
      free(s);
      return hsr_error(HSR_ERR_NOMEM, "out of memory");
    }
  }
  double deadline = clock_s() + timeout_s;
  for (;;) {
    progress_all(l);
    int pend = 0;
    for (int i = 0; i < nbuf && res->ok; i++) {
      if (s[i]->done && s[i]->st != UCS_OK)
        add_culprit(res, peer, send ? "cannot send to replica %d (%s)" : "no message from replica %d (%s)",
                    ucs_status_string(s[i]->st));
      else if (s[i]->done && !send && s[i]->len != bytes[i]) {
        char w[64];
        snprintf(w, sizeof w, "%zu bytes where %zu were expected", s[i]->len, bytes[i]);
        add_culprit(res, peer, "replica %d sent %s", w);
      } else
        pend += !s[i]->done;
    }
    if (!res->ok || !pend) break;
    if (l->peers[peer] && l->peers[peer]->failed) {
      add_culprit(res, peer, "replica %d is gone: %s", l->peers[peer]->why);
      break;
    }
    if (clock_s() >= deadline) {
      char t[64];
      snprintf(t, sizeof t, "%s for %.1f s", send ? "took nothing" : "sent nothing", timeout_s);
      add_culprit(res, peer, "replica %d %s", t);
      break;
    }
    sleep_on(l, deadline);
  }
  for (int i = 0; i < nbuf; i++)
    if (s[i]->done && s[i]->st == UCS_OK) *(send ? &res->bytes_sent : &res->bytes_recv) += bytes[i];
  res->buf_taken = finish_slots(l, s, nbuf) > 0;
  free(s);
  return HSR_OK;
}

hsr_status ft_link_send(ft_link *l, int peer, int src, int64_t epoch, int64_t seq, void *const *bufs,
                        const size_t *bytes, int nbuf, double timeout_s, ft_result *res) {
  return p2p(l, 1, peer, src, epoch, seq, bufs, bytes, nbuf, timeout_s, res);
}

hsr_status ft_link_recv(ft_link *l, int peer, int64_t epoch, int64_t seq, void *const *bufs, const size_t *bytes,
                        int nbuf, double timeout_s, ft_result *res) {
  return p2p(l, 0, peer, 0, epoch, seq, bufs, bytes, nbuf, timeout_s, res);
}
