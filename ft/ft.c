/* The replica groups' context (hsr/ft.h): create, join, finish, and the
 * messages from a group's rank 0 to its other ranks. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_int.h"
#include "common/env.h"
#include "launch/agree.h"
#include "common/common_internal.h"
#include "collectives/comm_internal.h"
#include "runtime/runtime_internal.h"
#include "ft/ft_internal.h"

/* ---- the group's messages ---- */

hsr_status ft_grp_bcast(hsr_ft *ft, void *buf, size_t n) {
  if (ft->S == 1 || n == 0) return HSR_OK;
  return hsr_comm_bcast(ft->grp, buf, n, HSR_U8, 0, NULL);
}

hsr_status ft_grp_allgather(hsr_ft *ft, const void *send, size_t n, void *recv) {
  if (ft->S == 1) {
    memcpy(recv, send, n);
    return HSR_OK;
  }
  return hsr_comm_allgather(ft->grp, send, recv, n, HSR_U8, NULL);
}

typedef struct gmsg {
  int32_t final, status;
  uint32_t len;
  char err[1012];
} gmsg;

hsr_status ft_grp_wait(hsr_ft *ft, ft_lead_fn fn, void *arg, char **blob) {
  *blob = NULL;
  gmsg m;
  if (ft->rank == 0) {
    int final = 0;
    char *b = NULL;
    do {
      memset(&m, 0, sizeof m);
      hsr_status st = fn(ft, arg, clock_s() + (ft->slice > 0 ? ft->slice : ft->beat), &final, &b);
      if (st != HSR_OK) {
        final = 1;
        m.status = st;
        snprintf(m.err, sizeof m.err, "%s", hsr_last_error());
        free(b);
        b = NULL;
      }
      m.final = final;
      m.len = final && b ? (uint32_t)strlen(b) + 1 : 0;
      HSR_CHECK(ft_grp_bcast(ft, &m, sizeof m)); /* a heartbeat, or the end */
    } while (!final);
    HSR_CHECK(ft_grp_bcast(ft, b, m.len));
    *blob = b;
  } else {
    do HSR_CHECK(ft_grp_bcast(ft, &m, sizeof m));
    while (!m.final);
    if (m.len) {
      char *b = malloc(m.len);
      if (!b) return hsr_error(HSR_ERR_NOMEM, "out of memory");
      hsr_status st = ft_grp_bcast(ft, b, m.len);
      if (st != HSR_OK) {
        free(b);
        return st;
      }
      b[m.len - 1] = 0;
      *blob = b;
    }
  }
  if (m.status != HSR_OK) {
    free(*blob);
    *blob = NULL;
    hsr_error((hsr_status)m.status, "%s", m.err);
    error_share(); /* the leader's result, on every rank of the group: said once */
    return (hsr_status)m.status;
  }
  return HSR_OK;
}

/* Every rank learns whether all succeeded: the lowest failing rank's error
 * (launch/agree.h), as it said it. */
static hsr_status agree(hsr_boot *b, hsr_status st) {
  return agree_votes(agree_boot_gather, b, hsr_boot_size(b), st, 0, 0, 0, 0, NULL, NULL);
}

/* ---- the address exchange: through the coordinator ---- */

/* This rank's address goes into the group's record (gather_addresses);
 * the others' come with each quorum (ft_install). */
static hsr_status xchg_put(void *arg, const void *blob, size_t len) {
  hsr_ft *ft = arg;
  free(ft->myaddr);
  ft->myaddr = malloc(len ? len : 1);
  if (!ft->myaddr) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  memcpy(ft->myaddr, blob, len);
  ft->mylen = len;
  return HSR_OK;
}

static hsr_status xchg_get(void *arg, int id, void **blob, size_t *len) {
  hsr_ft *ft = arg;
  *blob = NULL, *len = 0;
  if (id < 0 || id >= FT_MAX_REPLICAS || !ft->paddr[id]) return HSR_OK;
  *blob = malloc(ft->plen[id] ? ft->plen[id] : 1);
  if (!*blob) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  memcpy(*blob, ft->paddr[id], ft->plen[id]);
  *len = ft->plen[id];
  return HSR_OK;
}

hsr_status ft_view(hsr_ft *ft) {
  if (ft->view && ft->view_epoch == ft->q.epoch && ft->view_n == ft->nparts &&
      !memcmp(ft->view_parts, ft->parts, sizeof(int) * (size_t)ft->nparts))
    return HSR_OK;
  peer_comm_free(ft->view);
  ft->view = NULL;
  HSR_CHECK(peer_comm_create(ft->peers, ft->parts, ft->nparts, ft->q.epoch, &ft->view));
  ft->view_epoch = ft->q.epoch;
  ft->view_n = ft->nparts;
  memcpy(ft->view_parts, ft->parts, sizeof(int) * (size_t)ft->nparts);
  return HSR_OK;
}

/* ---- installing a quorum ---- */

hsr_status ft_install(hsr_ft *ft, const char *blob) {
  cJSON *o = cJSON_Parse(blob);
  if (!o) return hsr_error(HSR_ERR_INTERNAL, "ft: the group's message is not JSON");
  const cJSON *qj = cJSON_GetObjectItemCaseSensitive(o, "q"), *ad = cJSON_GetObjectItemCaseSensitive(o, "addrs");
  char *qs = qj ? cJSON_PrintUnformatted(qj) : NULL;
  ft_quorum q;
  hsr_status st = qs ? ft_quorum_parse(qs, &q) : hsr_error(HSR_ERR_INTERNAL, "ft: the group's message has no quorum");
  free(qs);
  int old[FT_MAX_REPLICAS], nold = ft->nparts;
  memcpy(old, ft->parts, sizeof(int) * (size_t)nold);
  const cJSON *it;
  cJSON_ArrayForEach(it, ad) { /* "id": [address of rank 0, rank 1, ...] */
    if (st != HSR_OK || !ft->peers) break;
    int id = atoi(it->string);
    const cJSON *a = cJSON_GetArrayItem(it, ft->rank);
    if (id < 0 || id >= FT_MAX_REPLICAS || !cJSON_IsString(a)) {
      st = hsr_error(HSR_ERR_INTERNAL, "ft: a bad address entry for replica '%s'", it->string);
      break;
    }
    void *p;
    size_t n;
    st = ft_b64_decode(a->valuestring, &p, &n);
    if (st != HSR_OK) break;
    if (id != ft->c.replica_id &&
        (!ft->paddr[id] || ft->plen[id] != n || memcmp(ft->paddr[id], p, n) || !peer_connected(ft->peers, id))) {
      free(ft->paddr[id]);
      ft->paddr[id] = p, ft->plen[id] = n;
      st = peer_connect(ft->peers, id); /* endpoints once per peer address; views per epoch (ft_view) */
    } else {
      free(p);
    }
  }
  cJSON_Delete(o);
  HSR_CHECK(st);
  ft->q = q;
  ft->nparts = ft_quorum_parts(&q, ft->parts);
  ft->me = ft_quorum_index(&q, ft->c.replica_id);
  if (!ft->peers) return HSR_OK;   /* a simulated group: no endpoints */
  for (int i = 0; i < nold; i++) { /* those that left the quorum: their pending sends end */
    int still = 0;
    for (int k = 0; k < ft->nparts; k++) still |= ft->parts[k] == old[i];
    if (!still && old[i] != ft->c.replica_id) peer_disconnect(ft->peers, old[i]);
  }
  for (int k = 0; k < ft->nparts; k++)
    if (ft->parts[k] != ft->c.replica_id && !peer_connected(ft->peers, ft->parts[k]))
      return hsr_error(HSR_ERR_INTERNAL, "ft: no address for replica %d of the quorum", ft->parts[k]);
  return HSR_OK;
}

/* ---- the context ---- */

hsr_status hsr_ft_create(hsr_boot *boot, const hsr_ft_config *c, hsr_ft **out) {
  if (!boot || !c || !out) return hsr_error(HSR_ERR_INVALID, "hsr_ft_create: NULL argument");
  *out = NULL;
  if (c->replicas < 1 || c->replicas > HSR_FT_MAX_REPLICAS)
    return hsr_error(HSR_ERR_INVALID, "--replicas %d (valid: 1 to %d)", c->replicas, HSR_FT_MAX_REPLICAS);
  if (c->replica_id < 0 || c->replica_id >= c->replicas)
    return hsr_error(HSR_ERR_INVALID, "--replica-id %d with --replicas %d (valid: 0 to %d)", c->replica_id, c->replicas,
                     c->replicas - 1);
  if (!c->coordinator || !*c->coordinator) return hsr_error(HSR_ERR_INVALID, "ft: no coordinator address");
  const char *tok = NULL;
  HSR_CHECK(env_get_str("HSR_FT_TOKEN", &tok));
  if (!tok)
    return hsr_error(HSR_ERR_INVALID, "HSR_FT_TOKEN is not set: a replica group joins the coordinator with the run's "
                                      "shared token (the one 'hsr coordinator' was started with)");
  double ct = 300;
  HSR_CHECK(env_get_double("HSR_COMM_TIMEOUT", &ct));
  int dev_reduce = 0;
  HSR_CHECK(env_get_choice("HSR_FT_DEVICE_REDUCE", &dev_reduce));
  hsr_ft *ft = calloc(1, sizeof *ft);
  if (!ft) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  ft->c = *c;
  ft->coord = strdup(c->coordinator);
  ft->identity = strdup(c->identity ? c->identity : "{}");
  snprintf(ft->token, sizeof ft->token, "%s", tok);
  ft->boot = boot;
  ft->rank = hsr_boot_rank(boot);
  ft->S = hsr_boot_size(boot);
  ft->T = 0.75 * ct;
  ft->beat = ct / 4 < 1.0 ? ct / 4 : 1.0;
  ft->hash_step = -1;
  ft->me = -1;
  ft->dev_reduce = dev_reduce;
  ft->dview_epoch = -1;
  pthread_mutex_init(&ft->mu, NULL);
  pthread_cond_init(&ft->cv, NULL);
  cJSON *idj = cJSON_Parse(ft->identity);
  hsr_status st = idj && cJSON_IsObject(idj) ? HSR_OK : hsr_error(HSR_ERR_INVALID, "ft: identity is not a JSON object");
  cJSON_Delete(idj);
  if (st == HSR_OK) st = fault_hook_init(&ft->hook, ft->rank);
  if (st == HSR_OK) {
    peer_xchg x = {.put = xchg_put, .get = xchg_get, .arg = ft};
    st = peer_open(ft->c.replica_id, "replica", &x, &ft->peers);
  }
  if (st == HSR_OK && ft->rank == 0) st = ft_lead_open(ft);
  st = agree(boot, st);
  if (st != HSR_OK) {
    hsr_ft_free(ft);
    return st;
  }
  *out = ft;
  return HSR_OK;
}

void hsr_ft_free(hsr_ft *ft) {
  if (!ft) return;
  if (ft->rank == 0) ft_lead_close(ft);
  peer_comm_free(ft->view);
  peer_close(ft->peers);
  for (int i = 0; i < FT_MAX_REPLICAS; i++) free(ft->paddr[i]);
  free(ft->myaddr);
  if (ft->own_grp) hsr_comm_free(ft->grp);
  free(ft->stage);
  peer_dev_free(ft->dview);
  if (ft->dstage && ft->rt) hsr_device_free(hsr_rt_device(ft->rt), ft->dstage);
  hsr_ckpt_state_free(ft->healed_prog);
  pthread_mutex_destroy(&ft->mu);
  pthread_cond_destroy(&ft->cv);
  free(ft->coord);
  free(ft->identity);
  free(ft);
}

hsr_status hsr_ft_attach(hsr_ft *ft, hsr_rt_config *cfg) {
  if (!ft || !cfg) return hsr_error(HSR_ERR_INVALID, "hsr_ft_attach: NULL argument");
  cfg->outer = ft_outer;
  cfg->outer_ctx = ft;
  cfg->outer_replicas = ft->c.replicas;
  cfg->outer_rank = ft->c.replica_id;
  return HSR_OK;
}

int ft_replica_id(const hsr_ft *ft) { return ft ? ft->c.replica_id : -1; }
double ft_timeout(const hsr_ft *ft) { return ft ? ft->T : 0; }

/* Every rank's UCX address: rank 0 keeps them as a JSON array of base64. */
static hsr_status gather_addresses(hsr_ft *ft) {
  const void *a = ft->myaddr;
  size_t len = ft->mylen;
  uint64_t mine = len, *lens = calloc((unsigned)ft->S, sizeof *lens);
  if (!lens) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = ft_grp_allgather(ft, &mine, sizeof mine, lens);
  size_t most = 0;
  for (int r = 0; r < ft->S; r++) most = lens[r] > most ? lens[r] : most;
  char *pad = calloc(1, most), *all = calloc((unsigned)ft->S, most);
  if (st == HSR_OK && (!pad || !all)) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) {
    memcpy(pad, a, len);
    st = ft_grp_allgather(ft, pad, most, all);
  }
  if (st == HSR_OK && ft->rank == 0) {
    cJSON *arr = cJSON_CreateArray();
    for (int r = 0; r < ft->S && st == HSR_OK; r++) {
      char *b;
      st = ft_b64_encode(all + (size_t)r * most, lens[r], &b);
      if (st == HSR_OK) cJSON_AddItemToArray(arr, cJSON_CreateString(b));
      free(b);
    }
    ft->my_addrs = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
  }
  free(lens), free(pad), free(all);
  return st;
}

static hsr_status lead_register_fn(hsr_ft *ft, void *arg, double until, int *final, char **blob) {
  const uint64_t *v = arg; /* done, hash */
  hsr_status st = ft_lead_register(ft, (int64_t)v[0], v[1], until, final);
  if (st == HSR_OK && *final) *blob = strdup("{}");
  return st;
}

hsr_status hsr_ft_join(hsr_ft *ft, hsr_rt *rt, int64_t *done) {
  if (!ft || !rt || !done) return hsr_error(HSR_ERR_INVALID, "hsr_ft_join: NULL argument");
  ft->rt = rt;
  hsr_comm *w = hsr_rt_world(rt);
  if (w && comm_backend(w) == HSR_BACKEND_HOST) {
    ft->grp = w;
  } else { /* a device engine's world is NCCL's: the group's messages get a host world of their own */
    HSR_CHECK(hsr_comm_world(ft->boot, HSR_BACKEND_HOST, &ft->grp));
    ft->own_grp = 1;
  }
  HSR_CHECK(comm_set_name(ft->grp, ft->own_grp ? "ft" : comm_name(ft->grp)));
  ft->layout_hash = rt_layout_hash(rt_get_layout(rt));
  int64_t d0 = rt_get_step(rt);
  uint64_t h = 0;
  HSR_CHECK(hsr_ft_state_hash(ft, rt, d0, &h));
  HSR_CHECK(gather_addresses(ft));
  uint64_t arg[2] = {(uint64_t)d0, h};
  char *blob = NULL;
  /* at info: the moment a (re)started group reaches the coordinator, engine built (bench/peers/ft_side.sh) */
  if (ft->rank == 0)
    log_msg(HSR_LOG_INFO, "replica group %d: registering with the coordinator%s", ft->c.replica_id,
            ft->c.join ? " as a joiner" : "");
  HSR_CHECK(ft_grp_wait(ft, lead_register_fn, arg, &blob));
  free(blob);
  HSR_CHECK(ft_grp_wait(ft, ft_lead_wait_quorum, NULL, &blob));
  hsr_status st = ft_install(ft, blob);
  free(blob);
  HSR_CHECK(st);
  *done = ft->q.done;
  return HSR_OK;
}

hsr_status hsr_ft_finish(hsr_ft *ft, int64_t done, uint64_t hash, char *line, size_t n) {
  if (!ft) return hsr_error(HSR_ERR_INVALID, "hsr_ft_finish: NULL argument");
  uint64_t arg[2] = {(uint64_t)done, hash};
  char *blob = NULL;
  hsr_status st = ft_grp_wait(ft, ft_lead_finish, arg, &blob);
  if (line && n) snprintf(line, n, "%s", st == HSR_OK && blob ? blob : "");
  free(blob);
  return st;
}
