/* Setting the engine up: creation (mesh, device, groups), registration, the
 * commit that fixes the layout, creates the schedule and takes the
 * persistent buffers, parameter init and read-back, teardown, getters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "common/env.h"
#include "common/common_internal.h"
#include "common/dtype_internal.h"
#include "topology/topology_internal.h"

static const char *unit_name_of(void *ctx, int u) {
  hsr_rt *rt = ctx;
  return u >= 0 && u < rt->nunits ? rt->units[u].name : "?";
}

static hsr_status split(hsr_rt *rt, int color, int key, const char *name, hsr_comm **out) {
  HSR_CHECK(comm_split(rt->world, color, key, out));
  return comm_set_name(*out, name);
}

static int index_of(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return i;
  return -1;
}

static hsr_status build_groups(hsr_rt *rt) {
  int me = hsr_boot_rank(rt->boot), rep, sh;
  HSR_CHECK(hsr_mesh_coords(rt->mesh, me, &rep, &sh));
  rt->srank = sh;
  rt->rrank = rep;
  char name[48];
  snprintf(name, sizeof name, "shard[%d]", rep);
  HSR_CHECK(split(rt, rep, sh, name, &rt->shard_c));
  snprintf(name, sizeof name, "replicate[%d]", sh);
  HSR_CHECK(split(rt, sh, rep, name, &rt->rep_c));
  if (rt->K > 0) {
    int *pg = malloc((size_t)rt->K * sizeof *pg);
    if (!pg) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    hsr_status st = mesh_partial_group(rt->mesh, me, pg);
    int pi = mesh_partial_index(rt->mesh, me), pos = index_of(pg, rt->K, me);
    free(pg);
    HSR_CHECK(st);
    if (pos < 0) return hsr_error(HSR_ERR_INTERNAL, "runtime: rank %d is not in its own partial group", me);
    rt->prank = pos;
    snprintf(name, sizeof name, "partial[%d.%d]", rep, pi);
    HSR_CHECK(split(rt, rep * (rt->S / rt->K) + pi, pos, name, &rt->part_c));
  }
  /* the mesh and the communicators must agree on who is where */
  if (hsr_comm_rank(rt->shard_c) != rt->srank || hsr_comm_size(rt->shard_c) != rt->S ||
      hsr_comm_rank(rt->rep_c) != rt->rrank || hsr_comm_size(rt->rep_c) != rt->R)
    return hsr_error(HSR_ERR_INTERNAL, "runtime: communicator ranks disagree with the mesh");
  return HSR_OK;
}

/* cfg.poison, or (-1) HSR_POISON, which defaults to on in debug builds. */
static hsr_status resolve_poison(hsr_rt *rt) {
  rt->poison = rt->cfg.poison;
  if (rt->poison >= 0) return HSR_OK;
  int p = -1;
  HSR_CHECK(env_get_bool("HSR_POISON", &p));
#ifdef NDEBUG
  if (p < 0) p = 0;
#else
  if (p < 0) p = 1;
#endif
  rt->poison = p;
  return HSR_OK;
}

/* The world communicator: the caller's (on the device's backend) or our own. */
static hsr_status open_world(hsr_rt *rt, hsr_comm *world) {
  if (!world) {
    HSR_CHECK(hsr_comm_world(rt->boot, rt_dev_backend(rt->dv), &rt->world));
    rt->own_world = 1;
    return HSR_OK;
  }
  if (comm_backend(world) != rt_dev_backend(rt->dv))
    return hsr_error(HSR_ERR_INVALID,
                     "runtime: the world communicator's backend does not match the device (%s needs %s)",
                     rt_dev_backend(rt->dv) == HSR_BACKEND_NCCL ? "cuda" : "host or sim",
                     rt_dev_backend(rt->dv) == HSR_BACKEND_NCCL ? "HSR_BACKEND_NCCL" : "HSR_BACKEND_HOST");
  rt->world = world;
  return HSR_OK;
}

/* S, R, K from the config and the topology, and the mesh that places them. */
static hsr_status plan_mesh(hsr_rt *rt, const hsr_cluster *cluster) {
  if (!cluster) {
    hsr_topo *t = NULL;
    hsr_status st = topo_discover(NULL, &t);
    if (st == HSR_OK) st = cluster_gather(rt->boot, t, &rt->own_cluster);
    topo_free(t);
    HSR_CHECK(st);
    cluster = rt->own_cluster;
  }
  const hsr_rt_config *cfg = &rt->cfg;
  HSR_CHECK(rt_config_resolve(cfg, hsr_boot_size(rt->boot), cluster_domain_size(cluster), &rt->S, &rt->R));
  rt->K = cfg->reshard == HSR_RT_RESHARD_PARTIAL ? cfg->partial_k : 0;
  mesh_request req = {rt->S, rt->R, rt->K};
  HSR_CHECK(mesh_plan(cluster, &req, &rt->mesh));
  if (hsr_mesh_shard(rt->mesh) != rt->S || hsr_mesh_replicate(rt->mesh) != rt->R)
    return hsr_error(HSR_ERR_INTERNAL, "runtime: mesh planner returned %d x %d for a %d x %d request",
                     hsr_mesh_replicate(rt->mesh), hsr_mesh_shard(rt->mesh), rt->R, rt->S);
  return HSR_OK;
}

hsr_status hsr_rt_create(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cluster, const hsr_rt_config *cfg,
                         hsr_rt **out) {
  if (!boot || !cfg || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_create: NULL argument");
  *out = NULL;
  hsr_rt *rt = calloc(1, sizeof *rt);
  if (!rt) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  rt->cfg = *cfg;
  rt->boot = boot;
  hsr_status st = rt_obs_create(hsr_boot_rank(boot), unit_name_of, rt, &rt->obs);
  if (st == HSR_OK) st = fault_hook_init(&rt->hook, hsr_boot_rank(boot));
  if (st == HSR_OK) st = plan_mesh(rt, cluster);
  if (st == HSR_OK) st = rt_dev_open(cfg, boot, cfg->timeout_s, &rt->dv);
  if (st != HSR_OK) goto fail;
  rt->dev = rt_dev_device(rt->dv);
  /* compare the configuration before any collective that depends on it */
  st = rt_id_compare(rt, rt_id_config(rt), "configuration");
  if (st != HSR_OK) goto fail;
  rt->sh = rt_strategy_sharding(cfg->strategy);
  rt->outer = cfg->outer_shard == HSR_RT_OUTER_OPTIM;
  rt->master_shared = rt->sh.params && !rt->outer && cfg->param_dtype == HSR_F32;
  rt->exec = rt_exec_of(rt_dev_async(rt->dv));
  rt->pes = dtype_size(cfg->param_dtype);
  rt->res = dtype_size(cfg->reduce_dtype);
  rt->timeout = cfg->timeout_s > 0 ? cfg->timeout_s : -1;
  st = resolve_poison(rt);
  if (st == HSR_OK) st = open_world(rt, world);
  if (st == HSR_OK) st = build_groups(rt);
  if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->part_c, GS(rt)); /* partial gathers */
  if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->rep_c, RS(rt));  /* replicate all-reduces */
  if (st == HSR_OK) st = rt_layout_create(cfg->align, &rt->layout);
  if (st != HSR_OK) goto fail;
  HSR_LOG_I("runtime: %s mesh %d x %d (replicate x shard), rank at (%d, %d)%s%s", rt_strategy_name(cfg->strategy),
            rt->R, rt->S, rt->rrank, rt->srank, rt->K ? ", partial group of K ranks" : "",
            rt->outer ? ", optimizer state over the R replicas" : "");
  *out = rt;
  return HSR_OK;
fail:
  hsr_rt_destroy(rt);
  return st;
}

hsr_status hsr_rt_destroy(hsr_rt *rt) {
  if (!rt) return HSR_OK;
  hsr_status st = HSR_OK;
  if (rt->ckpt_fini) rt->ckpt_fini(rt->ckpt); /* a background save ends before its communicator's parent goes */
  rt->ckpt = NULL, rt->ckpt_fini = NULL;
  if (rt->world) {
    /* reductions and gathers still in flight complete first (bounded) */
    hsr_status d = rt->sched ? sched_drain(rt->sched, rt->exec, rt) : HSR_OK;
    if (d != HSR_OK) st = d;
    rt_mem_release_all(rt);
  }
  rt_off_close(rt); /* after the drain: its events and threads are no longer needed */
  if (rt->dv) {     /* streams and requests drained before the communicators go */
    hsr_status d = rt_dev_quiesce(rt->dv);
    if (d != HSR_OK && st == HSR_OK) st = d;
  }
  hsr_comm_free(rt->part_c);
  hsr_comm_free(rt->rep_c);
  hsr_comm_free(rt->shard_c);
  if (rt->own_world) hsr_comm_free(rt->world);
  mesh_free(rt->mesh);
  cluster_free(rt->own_cluster);
  if (rt->dv) {
    hsr_status d = rt_dev_close(rt->dv);
    if (d != HSR_OK && st == HSR_OK) st = d;
  }
  rt_layout_free(rt->layout);
  sched_free(rt->sched);
  free(rt->units);
  free(rt->uparam);
  free(rt->ubeg);
  rt_obs_free(rt->obs);
  free(rt);
  return st;
}

/* ---- registration ---- */
hsr_status hsr_rt_unit_add(hsr_rt *rt, const char *name, int is_root, int *id) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->commit != RT_OPEN)
    return hsr_error(HSR_ERR_STATE, "unit '%s' registered after the first step; register every unit before training",
                     name ? name : "?");
  int u;
  HSR_CHECK(rt_layout_add_unit(rt->layout, name, &u));
  rt_unit *nu = realloc(rt->units, (size_t)(u + 1) * sizeof *nu);
  if (!nu) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  rt->units = nu;
  memset(&nu[u], 0, sizeof nu[u]);
  snprintf(nu[u].name, sizeof nu[u].name, "%s", name);
  nu[u].is_root = is_root;
  rt->nunits = u + 1;
  if (id) *id = u;
  return HSR_OK;
}

hsr_status hsr_rt_param_add(hsr_rt *rt, int unit, const char *name, int ndim, const int64_t *shape, int group) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->commit != RT_OPEN)
    return hsr_error(HSR_ERR_STATE, "parameter '%s' registered after the first step", name ? name : "?");
  if (group >= rt->cfg.num_groups)
    return hsr_error(HSR_ERR_INVALID, "parameter '%s': optimizer group %d, but the config has %d group(s)",
                     name ? name : "?", group, rt->cfg.num_groups);
  return rt_layout_add_param(rt->layout, unit, name, ndim, shape, group);
}

/* Layout params grouped by unit (counting sort, stable: layout order within a unit). */
static hsr_status group_params(hsr_rt *rt) {
  int np = rt_layout_num_params(rt->layout);
  rt->ubeg = calloc((size_t)rt->nunits + 1, sizeof(int));
  rt->uparam = malloc((size_t)(np ? np : 1) * sizeof(int));
  if (!rt->ubeg || !rt->uparam) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  rt_param_info pi;
  for (int i = 0; i < np; i++) {
    HSR_CHECK(rt_layout_param(rt->layout, i, &pi));
    rt->ubeg[pi.unit + 1]++;
  }
  for (int u = 0; u < rt->nunits; u++) rt->ubeg[u + 1] += rt->ubeg[u];
  for (int i = 0, *fill = rt->ubeg; i < np; i++) {
    HSR_CHECK(rt_layout_param(rt->layout, i, &pi));
    int at = fill[pi.unit]++;
    rt->uparam[at] = i;
  }
  for (int u = rt->nunits; u > 0; u--) rt->ubeg[u] = rt->ubeg[u - 1]; /* fill moved each start to the next */
  rt->ubeg[0] = 0;
  return HSR_OK;
}

/* The schedule, from the config as it runs here (the device actually used). */
static hsr_status make_schedule(hsr_rt *rt) {
  int *is_root = calloc((size_t)rt->nunits, sizeof *is_root);
  if (!is_root) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  for (int i = 0; i < rt->nunits; i++) is_root[i] = rt->units[i].is_root;
  hsr_rt_config c = rt->cfg;
  c.device = hsr_device_kind_of(rt->dev);
  hsr_status st = sched_create(&c, rt->S, rt->R, rt->layout, is_root, &rt->sched);
  free(is_root);
  return st;
}

/* SETUP: the unit's persistent buffers (taken by the interpreter), zeroed
 * (host memory, offload's, by the host: nothing is queued on it yet). */
hsr_status rt_x_setup(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  for (int k = HSR_SCHED_BUF_MASTER; k <= HSR_SCHED_BUF_LAST_HELD; k++) {
    sched_buf b = (sched_buf)k;
    if (!sched_holds(rt->sched, b)) continue;
    void *p = rt_buf(rt, a->unit, b);
    size_t bytes = sched_buf_bytes(rt->sched, b, a->unit);
    if (mem_cat_host(hsr_sched_cat_of(rt->sched, b)))
      memset(p, 0, bytes);
    else
      RT_TIMED(rt, RT_T_DATA, rt_zero(rt, p, bytes));
  }
  return HSR_OK;
}

/* Every step of it, in order; committed only when all of them succeeded. */
static hsr_status commit(hsr_rt *rt) {
  if (rt->nunits == 0) return hsr_error(HSR_ERR_STATE, "runtime: no units registered");
  if (rt->outer) HSR_CHECK(rt_layout_set_subshards(rt->layout, rt->R)); /* equal pieces of every shard */
  HSR_CHECK(rt_layout_finalize(rt->layout, rt->S));
  for (int u = 0; u < rt->nunits; u++) {
    rt->units[u].L = rt_layout_unit_len(rt->layout, u);
    rt->units[u].Ls = rt_layout_shard_len(rt->layout, u);
  }
  HSR_CHECK(rt_id_compare(rt, rt_id_layout(rt), "configuration + layout"));
  HSR_CHECK(group_params(rt));
  HSR_CHECK(make_schedule(rt));
  HSR_CHECK(rt_dev_units(rt->dv, rt->nunits));
  HSR_CHECK(rt_off_open(rt));
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_setup(rt->sched, &acts, &n));
  HSR_CHECK(rt_run(rt, acts, n));
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++)
      if (gc[g]) HSR_CHECK(comm_counters(gc[g], (hsr_op)op, &rt->base[g][op]));
  return HSR_OK;
}

hsr_status hsr_rt_commit(hsr_rt *rt) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->commit == RT_COMMITTED) return rt_need_whole(rt, "hsr_rt_commit");
  if (rt->commit == RT_BROKEN)
    return hsr_error(HSR_ERR_STATE, "hsr_rt_commit: an earlier commit failed (%s); destroy the engine", rt->commit_msg);
  hsr_status st = commit(rt);
  if (st != HSR_OK) {
    /* before the layout is fixed registration stays open; after it
     * collectives may have run, so there is no second attempt */
    snprintf(rt->commit_msg, sizeof rt->commit_msg, "%s", hsr_last_error());
    rt->commit = rt_layout_shards(rt->layout) > 0 ? RT_BROKEN : RT_OPEN;
    return st;
  }
  rt->commit = RT_COMMITTED;
  return HSR_OK;
}

/* Commits first (hsr/runtime.h). */
hsr_status hsr_rt_param_init(hsr_rt *rt, const char *name, const float *values) {
  if (!rt || !name || !values) return hsr_error(HSR_ERR_INVALID, "hsr_rt_param_init: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  if (rt->step > 0) return hsr_error(HSR_ERR_STATE, "parameter '%s' initialized after training started", name);
  rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  rt_unit *u = &rt->units[p.unit];
  float *master = rt_master(rt, p.unit);
  /* the shard (outer shard optim), the whole unit (unsharded), or none (the master is the shard) */
  char *param = rt_buf(rt, p.unit, HSR_SCHED_BUF_PARAM);
  const float *src = values;
  float *staged = NULL;
  if (rt_dev_async(rt->dv) && p.numel) { /* the cast kernels read device memory: stage the values */
    HSR_CHECK(rt_dev_quiesce(rt->dv));
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, p.numel * 4, (void **)&staged));
    src = staged;
  }
  hsr_status st = staged ? hsr_device_copy(rt->dev, staged, values, p.numel * 4, CS(rt)) : HSR_OK;
  size_t a, b, lo = (size_t)rt->srank * u->Ls, mlo = rt_piece_lo(rt, p.unit);
  if (st == HSR_OK && rt_piece_range(rt, p.unit, p.offset, p.numel, &a, &b) &&
      sched_holds(rt->sched, HSR_SCHED_BUF_MASTER)) /* else the master is a piece of the shard below */
    st = hsr_device_copy(rt->dev, master + (a - mlo), src + (a - p.offset), (b - a) * 4, CS(rt));
  if (st == HSR_OK && rt->sh.params && param && rt_local_range(rt, u, p.offset, p.numel, &a, &b))
    st = hsr_kernels_cast(rt->dev, CS(rt), b - a, src + (a - p.offset), HSR_F32, param + (a - lo) * rt->pes,
                          rt->cfg.param_dtype);
  if (st == HSR_OK && !rt->sh.params && p.numel)
    st = hsr_kernels_cast(rt->dev, CS(rt), p.numel, src, HSR_F32, param + p.offset * rt->pes, rt->cfg.param_dtype);
  /* one-off: not kept in the pool, where it would hold a copy of the model after initialization */
  hsr_status d = rt_mem_drop(rt, staged);
  return st != HSR_OK ? st : d;
}

/* Commits first (hsr/runtime.h). */
hsr_status rt_param_read(hsr_rt *rt, const char *name, float *out) {
  if (!rt || !name || !out) return hsr_error(HSR_ERR_INVALID, "rt_param_read: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  /* device: out is host memory; drain the queued updates first (not a steady-state call) */
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  if (rt->S == 1 && !rt->outer) {
    RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, out, rt_master(rt, p.unit) + p.offset, p.numel * 4, GS(rt)));
    return rt_dev_sync(rt->dv, GS(rt));
  }
  float *full = NULL;
  hsr_status st = rt_gather_pieces(rt, p.unit, rt_master(rt, p.unit), GS(rt), &full);
  if (st == HSR_OK) st = hsr_device_copy(rt->dev, out, full + p.offset, p.numel * 4, GS(rt));
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, GS(rt));
  rt_mem_put(rt, full);
  HSR_CHECK(st);
  return rt_snapshot_counts(rt, NULL); /* read-backs do not count toward the next step */
}

/* The whole unit from every rank's f32 piece (master or gradient): over the
 * replicate group first (outer shard optim: the pieces of a shard), then the
 * shard group; one rank alone copies. *full: a staging buffer of L x 4. */
hsr_status rt_gather_pieces(hsr_rt *rt, int ui, const float *piece, hsr_stream *s, float **full) {
  rt_unit *u = &rt->units[ui];
  *full = NULL;
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, u->L * 4, (void **)full));
  float *shard = *full + (size_t)rt->srank * u->Ls; /* this rank's shard, in place for the shard gather */
  hsr_status st = HSR_OK;
  if (rt->outer) {
    size_t lo = rt_piece_len(rt, ui);
    st = rt_dev_use(rt->dv, rt->rep_c, s);
    if (st == HSR_OK && rt->off) /* a host piece: copied in, then gathered in place (collectives read device memory) */
      st = hsr_device_copy(rt->dev, shard + (size_t)rt->rrank * lo, piece, lo * 4, s);
    if (st == HSR_OK)
      st = hsr_comm_allgather(rt->rep_c, rt->off ? shard + (size_t)rt->rrank * lo : piece, shard, lo, HSR_F32, NULL);
    if (st == HSR_OK && rt_dev_async(rt->dv)) st = rt_dev_use(rt->dv, rt->rep_c, RS(rt)); /* its reductions' stream */
  } else {
    st = hsr_device_copy(rt->dev, shard, piece, u->Ls * 4, s);
  }
  if (st == HSR_OK && rt->S > 1) st = rt_dev_use(rt->dv, rt->shard_c, s);
  if (st == HSR_OK && rt->S > 1) st = hsr_comm_allgather(rt->shard_c, shard, *full, u->Ls, HSR_F32, NULL);
  if (st != HSR_OK) {
    rt_mem_put(rt, *full);
    *full = NULL;
  }
  return st;
}

/* ---- getters ---- */
const rt_layout *rt_get_layout(const hsr_rt *rt) { return rt ? rt->layout : NULL; }
const hsr_mesh *hsr_rt_get_mesh(const hsr_rt *rt) { return rt ? rt->mesh : NULL; }
hsr_comm *hsr_rt_world(hsr_rt *rt) { return rt ? rt->world : NULL; }
hsr_device *hsr_rt_device(hsr_rt *rt) { return rt ? rt->dev : NULL; }
hsr_stream *hsr_rt_compute_stream(hsr_rt *rt) { return rt ? CS(rt) : NULL; }
int rt_shard(const hsr_rt *rt) { return rt ? rt->S : 0; }
int rt_replicate(const hsr_rt *rt) { return rt ? rt->R : 0; }
int rt_partial(const hsr_rt *rt) { return rt ? rt->K : 0; }
/* replicas outside the job (cfg.outer_replicas) hold the slices around this job's */
int hsr_rt_dp_rank(const hsr_rt *rt) { return rt ? (rt->cfg.outer_rank * rt->R + rt->rrank) * rt->S + rt->srank : 0; }
int hsr_rt_dp_size(const hsr_rt *rt) {
  return rt ? (rt->cfg.outer_replicas > 0 ? rt->cfg.outer_replicas : 1) * rt->R * rt->S : 0;
}
hsr_status rt_get_stats(const hsr_rt *rt, rt_stats *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "rt_get_stats: NULL argument");
  *out = rt->stats;
  return HSR_OK;
}
