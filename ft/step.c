/* The engine's outer reduction and the step's boundaries (hsr/ft.h). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_int.h"
#include "hsr/kernels.h"
#include "runtime/runtime_internal.h"
#include "common/common_internal.h"
#include "common/fault_hook.h"

#define MAX_ABORTS_IN_ROW 5

static size_t total_len(hsr_rt *rt) {
  size_t t = 0;
  int U = rt_layout_num_units(rt_get_layout(rt));
  for (int u = 0; u < U; u++) t += rt_layout_shard_len(rt_get_layout(rt), u);
  return t;
}

/* Every unit's gradient shard into (or out of) a staging buffer (host or device memory). */
static hsr_status pack(hsr_ft *ft, float *stage, int out) {
  hsr_rt *rt = ft->rt;
  hsr_device *d = hsr_rt_device(rt);
  hsr_stream *cs = hsr_rt_compute_stream(rt);
  int U = rt_layout_num_units(rt_get_layout(rt));
  size_t o = 0;
  for (int u = 0; u < U; u++) {
    rt_slice s;
    HSR_CHECK(rt_slice_get(rt, u, &s));
    HSR_CHECK(out ? hsr_device_copy(d, s.grad, stage + o, s.len * 4, cs)
                  : hsr_device_copy(d, stage + o, s.grad, s.len * 4, cs));
    o += s.len;
  }
  return cs ? hsr_stream_sync(cs, ft->T) : HSR_OK;
}

/* The average in device memory: on a CUDA device with HSR_FT_DEVICE_REDUCE=nccl. */
static int on_device(hsr_ft *ft) {
  return ft->dev_reduce && hsr_device_kind_of(hsr_rt_device(ft->rt)) == HSR_DEVICE_CUDA;
}

static hsr_status dstage_get(hsr_ft *ft, size_t n) {
  if (ft->dstage && ft->dstage_cap >= n) return HSR_OK;
  hsr_device *d = hsr_rt_device(ft->rt);
  if (ft->dstage) HSR_CHECK(hsr_device_free(d, ft->dstage));
  ft->dstage = NULL, ft->dstage_cap = 0;
  void *p;
  HSR_CHECK(hsr_device_alloc(d, (n ? n : 1) * sizeof(float), &p));
  ft->dstage = p, ft->dstage_cap = n;
  return HSR_OK;
}

/* The gradient's average over the participants in device memory (NCCL).
 * The communicator follows the quorum: shrunk for a drop, made anew for a
 * join. NCCL names no one, so after a failure a one-float all-reduce on the
 * view (UCX, with its endpoints, heartbeats and bound) names whom this rank
 * cannot complete with. */
static hsr_status dev_allreduce(hsr_ft *ft, size_t n, ft_result *r) {
  int64_t step = ft->q.done + 1;
  hsr_status st = HSR_OK;
  if (!ft->dview || ft->dview_epoch != ft->q.epoch) {
    const char *how = "";
    st = peer_dev_update(&ft->dview, ft->view, FT_DEV_SEQ + step, ft->T, &how);
    if (st == HSR_OK) {
      ft->dview_epoch = ft->q.epoch;
      HSR_LOG_I("replica %d: the replicas' device communicator of %d is %s (epoch %lld)", ft->c.replica_id,
                ft->nparts, how, (long long)ft->q.epoch);
    } else {
      r->ok = 0;
      snprintf(r->why, sizeof r->why, "%.300s", hsr_last_error());
    }
  }
  if (st == HSR_OK) HSR_CHECK(peer_dev_allreduce(ft->dview, ft->dstage, n, HSR_F32, HSR_AVG, ft->T, r));
  if (r->ok) return HSR_OK;
  float *one = malloc(sizeof *one);
  if (!one) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  *one = 1;
  ft_result who = {.ok = 1};
  HSR_CHECK(peer_allreduce(ft->view, FT_DEV_SEQ + FT_COMMIT_SEQ + step, one, 1, HSR_F32, HSR_SUM, ft->T, &who));
  if (!who.buf_taken) free(one);
  r->n = who.ok ? 0 : who.n;
  memcpy(r->culprit, who.culprit, sizeof r->culprit);
  return HSR_OK;
}

static hsr_status stage_get(hsr_ft *ft, size_t n) {
  if (ft->stage && ft->stage_cap >= n) return HSR_OK;
  free(ft->stage);
  ft->stage = malloc((n ? n : 1) * sizeof(float));
  ft->stage_cap = n;
  return ft->stage ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "replica all-reduce: staging of %zu bytes", n * 4);
}

/* The group's outcome from every rank's: ok when all are, the culprits of all. */
static void merge(const ft_outcome *all, int S, ft_outcome *g) {
  memset(g, 0, sizeof *g);
  g->ok = 1, g->healed = 1;
  for (int r = 0; r < S; r++) {
    g->healed &= all[r].healed;
    if (all[r].ok) continue;
    if (g->ok) snprintf(g->why, sizeof g->why, "rank %d: %.300s", r, all[r].why);
    g->ok = 0;
    for (int k = 0; k < all[r].n; k++) {
      int dup = 0;
      for (int j = 0; j < g->n; j++) dup |= g->culprit[j] == all[r].culprit[k];
      if (!dup && g->n < FT_MAX_CULPRITS) g->culprit[g->n++] = all[r].culprit[k];
    }
  }
}

static hsr_status fault_hit(hsr_ft *ft, const char *phase) { return fault_hook_hit(&ft->hook, phase); }

/* The commit exchange on the participants' view of rank 0 (the leaders): x
 * reduced with MAX, tagged apart from the gradient's all-reduce of the step. */
static hsr_status xchg_peer(hsr_ft *ft, int64_t step, float *x, int n, ft_result *r) {
  HSR_CHECK(ft_view(ft));
  float *b = malloc(sizeof(float) * (size_t)n);
  if (!b) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  memcpy(b, x, sizeof(float) * (size_t)n);
  /* half the bound: the group's other ranks wait for its end with the whole timeout */
  hsr_status st = peer_allreduce(ft->view, step + FT_COMMIT_SEQ, b, (size_t)n, HSR_F32, HSR_MAX, ft->T / 2, r);
  if (r->buf_taken) return st; /* the peer context frees it once the request ends */
  if (st == HSR_OK && r->ok) memcpy(x, b, sizeof(float) * (size_t)n);
  free(b);
  return st;
}

/* The exchange's vector: -bit (its MAX is minus the smallest bit), then the
 * hash step and the state hash in 16-bit pieces (exact in a float), each
 * also negated: every group's equal when each MAX is minus its negation's. */
#define XK 5
#define XN (1 + 2 * XK)
static void xchg_fill(float *x, int bit, int64_t hs, uint64_t h) {
  float v[XK] = {(float)hs, (float)(h & 0xffff), (float)(h >> 16 & 0xffff), (float)(h >> 32 & 0xffff),
                 (float)(h >> 48)};
  x[0] = -(float)bit;
  for (int k = 0; k < XK; k++) x[1 + k] = v[k], x[1 + XK + k] = -v[k];
}
static int xchg_equal(const float *x) {
  for (int k = 0; k < XK; k++)
    if (x[1 + k] != -x[1 + XK + k]) return 0;
  return 1;
}

/* Rank 0: whether the step commits through the exchange alone. The group's
 * outcome is ok; its bit says whether it needs the coordinator for this
 * step (a joiner waiting, its lease found expired); its last state hash
 * goes along. Every participant's bit set, every hash equal, the exchange
 * complete: every group's all-reduce completed on all its ranks, so every
 * group commits (one whose exchange did not complete learns it in the
 * coordinator: a vote on the next step, by a group that committed this one,
 * commits it there). *doubt: the exchange did not complete here. */
static hsr_status commit_exchange(hsr_ft *ft, ft_outcome *g, int *fast, int *doubt) {
  *fast = *doubt = 0;
  if (!g->ok || !g->healed || ft->q.njoin) return HSR_OK; /* the others cannot complete without this bit */
  int bit = ft_lead_fast_ok(ft);
  if (ft->nparts <= 1) {
    *fast = bit;
    return HSR_OK;
  }
  float x[XN];
  xchg_fill(x, bit, ft->hash_step, ft->hash);
  ft_result r = {.ok = 1};
  HSR_CHECK(ft->commit_xchg ? ft->commit_xchg(ft, ft->q.done + 1, x, XN, &r)
                            : xchg_peer(ft, ft->q.done + 1, x, XN, &r));
  if (!r.ok) { /* a member may have completed it: the vote is ok, and names whom this one could not hear */
    *doubt = 1;
    g->n = r.n;
    memcpy(g->culprit, r.culprit, sizeof g->culprit);
    snprintf(g->why, sizeof g->why, "the commit exchange: %.280s", r.why);
    return HSR_OK;
  }
  *fast = x[0] == -1.0f && xchg_equal(x); /* hashes that differ: the votes compare them and name both */
  return HSR_OK;
}

hsr_status ft_decide(hsr_ft *ft, const ft_outcome *mine, hsr_ft_step *L) {
  ft_outcome *all = calloc((unsigned)ft->S, sizeof *all), g;
  if (!all) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = ft_grp_allgather(ft, mine, sizeof *mine, all);
  merge(all, ft->S, &g);
  free(all);
  HSR_CHECK(st);
  HSR_CHECK(fault_hit(ft, "ft_vote"));
  int32_t fx[2] = {0, 0}; /* committed by the exchange; its status */
  if (ft->rank == 0) {
    int doubt = 0;
    st = commit_exchange(ft, &g, &fx[0], &doubt);
    fx[1] = st;
    ft->doubt = doubt;
  }
  HSR_CHECK(ft_grp_bcast(ft, fx, sizeof fx));
  if (fx[1] != HSR_OK)
    return ft->rank == 0 ? (hsr_status)fx[1] : hsr_error((hsr_status)fx[1], "ft: rank 0's commit exchange failed");
  if (fx[0]) { /* every participant's bit: committed, the quorum unchanged, no coordinator request */
    ft->q.done++;
    ft->xchg_done = ft->q.done;
    ft->read_stale = 1;
    ft->aborts_in_row = 0;
    L->committed = 1;
    L->saver = ft_quorum_is_member(&ft->q, ft->c.replica_id);
    for (int i = 0; i < ft->q.nmem; i++) L->saver &= ft->q.mem[i] >= ft->c.replica_id;
    return HSR_OK;
  }
  char *blob = NULL;
  HSR_CHECK(ft_grp_wait(ft, ft_lead_vote, &g, &blob));
  cJSON *o = cJSON_Parse(blob);
  if (!o) {
    free(blob);
    return hsr_error(HSR_ERR_INTERNAL, "ft: the decision is not JSON");
  }
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "commit"), *s = cJSON_GetObjectItemCaseSensitive(o, "stop"),
              *cl = cJSON_GetObjectItemCaseSensitive(o, "coord_lost"),
              *ln = cJSON_GetObjectItemCaseSensitive(o, "line");
  L->committed = cJSON_IsNumber(c) && c->valuedouble != 0;
  L->stop = cJSON_IsNumber(s) && s->valuedouble != 0;
  L->coord_lost = cJSON_IsNumber(cl) && cl->valuedouble != 0;
  snprintf(L->line, sizeof L->line, "%s", cJSON_IsString(ln) ? ln->valuestring : "");
  cJSON_Delete(o);
  int64_t was = ft->q.done;
  int nb = ft->nparts, *before = malloc(sizeof(int) * (size_t)(nb + 1));
  if (!before) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (before) memcpy(before, ft->parts, sizeof(int) * (size_t)nb);
  if (!L->stop && st == HSR_OK) st = ft_install(ft, blob);
  free(blob);
  int same = st == HSR_OK && nb == ft->nparts && !memcmp(before, ft->parts, sizeof(int) * (size_t)nb);
  free(before);
  HSR_CHECK(st);
  /* only drops that changed nobody count (two groups that blame each other): a drop that dropped someone made
   * progress, so many groups dying at once are dropped in turn */
  if (L->committed || !same) {
    ft->aborts_in_row = 0;
  } else if (!L->stop && ++ft->aborts_in_row >= MAX_ABORTS_IN_ROW) {
    L->stop = 1;
    snprintf(L->line, sizeof L->line,
             "step %" PRId64 " was dropped %d times in a row with replicas unchanged; this group stops (%s)", was + 1,
             ft->aborts_in_row, g.ok ? "the others could not complete it" : g.why);
  }
  L->saver = ft_quorum_is_member(&ft->q, ft->c.replica_id); /* the smallest live id saves */
  for (int i = 0; i < ft->q.nmem; i++) L->saver &= ft->q.mem[i] >= ft->c.replica_id;
  return HSR_OK;
}

hsr_status ft_outer(hsr_rt *rt, void *ctx, int *commit) {
  hsr_ft *ft = ctx;
  *commit = 0;
  ft->step_ran = 1;
  hsr_ft_step *L = &ft->last;
  memset(L, 0, sizeof *L);
  L->nreplicas = ft->nparts;
  memcpy(L->replicas, ft->parts, sizeof(int) * (size_t)ft->nparts);
  size_t n = total_len(rt);
  int dev = on_device(ft) && ft->nparts > 1 && !ft->heal_failed;
  if (dev) {
    HSR_CHECK(dstage_get(ft, n));
  } else {
    HSR_CHECK(stage_get(ft, n));
  }
  HSR_CHECK(pack(ft, dev ? ft->dstage : ft->stage, 0));
  ft_result r = {.ok = 1};
  HSR_CHECK(fault_hit(ft, "ft_allreduce"));
  if (ft->heal_failed) {
    r.ok = 0, r.n = 1, r.culprit[0] = ft->heal_culprit;
    snprintf(r.why, sizeof r.why, "%s", ft->heal_why);
  } else if (ft->nparts > 1) {
    HSR_CHECK(ft_view(ft)); /* tagged with the quorum's epoch; the step below */
    if (dev) {
      HSR_CHECK(dev_allreduce(ft, n, &r));
    } else {
      HSR_CHECK(peer_allreduce(ft->view, ft->q.done + 1, ft->stage, n, HSR_F32, HSR_AVG, ft->T, &r));
      if (r.buf_taken) ft->stage = NULL, ft->stage_cap = 0; /* the peer context frees it */
    }
  }
  ft_outcome mine = {r.ok, !ft->heal_failed, r.n, {0}, ""};
  memcpy(mine.culprit, r.culprit, sizeof mine.culprit);
  snprintf(mine.why, sizeof mine.why, "%s", r.why);
  HSR_CHECK(ft_decide(ft, &mine, L));
  if (L->committed) HSR_CHECK(pack(ft, dev ? ft->dstage : ft->stage, 1));
  *commit = L->committed;
  return HSR_OK;
}

hsr_status hsr_ft_step_begin(hsr_ft *ft, int64_t done, hsr_ft_heal *out) {
  if (!ft || !out) return hsr_error(HSR_ERR_INVALID, "hsr_ft_step_begin: NULL argument");
  memset(out, 0, sizeof *out);
  out->peer = -1;
  ft->step_ran = 0;
  ft->heal_failed = 0;
  if (done != ft->q.done)
    return hsr_error(HSR_ERR_STATE,
                     "hsr_ft_step_begin: the program is after %" PRId64 " steps, the quorum after %" PRId64, done,
                     ft->q.done);
  int me = ft->c.replica_id;
  if (ft_quorum_healer_of(&ft->q, me) >= 0) return ft_heal_recv(ft, done, out);
  for (int i = 0; i < ft->q.njoin; i++) /* every member heals every joiner, a slice each, in joiner order */
    HSR_CHECK(ft_heal_send(ft, ft->q.join[i], done, out));
  return HSR_OK;
}

hsr_status hsr_ft_step_end(hsr_ft *ft, hsr_ft_step *out) {
  if (!ft || !out) return hsr_error(HSR_ERR_INVALID, "hsr_ft_step_end: NULL argument");
  if (!ft->step_ran) return hsr_error(HSR_ERR_STATE, "hsr_ft_step_end: no step ran since hsr_ft_step_begin");
  *out = ft->last;
  return HSR_OK;
}
