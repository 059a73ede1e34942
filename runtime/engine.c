/* The sharding engine: mesh and groups, unit lifecycle (gather, reshard,
 * prefetch), the gradient path (shard-group reduction, replicate-group
 * all-reduce, accumulation), and the sharded AdamW step with global-norm
 * clipping.
 *
 * Every rank issues the same collectives on each communicator in the same
 * order: all decisions (prefetch, reshard, which reduction to start) depend on
 * program order only, never on timing. The one timing-dependent step, moving a
 * finished reduce-scatter on to its replicate all-reduce, is done strictly in
 * FIFO order, so replicate all-reduces are issued in the same order too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_path.h"
#include "hsr/kernels.h"
#include "internal.h"

enum { U_SHARDED = 0, U_GATHERING, U_FULL, U_PARTIAL };
/* Gradient reductions a rank keeps in flight behind its backward pass. */
#define RT_REDUCTIONS_IN_FLIGHT 2

typedef struct unit {
  char name[HSR_RT_NAME_MAX];
  int is_root;
  size_t L, Ls; /* elements: padded length, shard length */
  int state;    /* U_* */
  int gather_from_partial;
  int in_fwd, in_bwd; /* view windows */
  void *shard;        /* Ls (param dtype): sharded strategies */
  void *full;         /* L (param dtype): transient (sharded) or persistent */
  void *partial;      /* L/K (param dtype) between forward and backward */
  hsr_req *greq;      /* gather in flight */
  int ggroup;
  uint64_t gt0;
  int64_t gstep;                  /* the step that issued it (the step-end prefetch serves the next) */
  float *master, *m, *v, *gshard; /* Ls each */
  float *gfull;                   /* L: full gradient being accumulated */
  int micro;                      /* backward passes this step */
  int fwd_pos;                    /* position in the recorded forward order, -1 if none */
} unit;

typedef struct red {
  int unit, stage, done, ar; /* stage 1: shard group; 2: replicate group */
  hsr_req *req;
  void *send;          /* full gradient (or its reduce-dtype copy) read by stage 1 */
  void *slice;         /* Ls (reduce dtype): result of stage 1, in place for stage 2 */
  int slice_is_gshard; /* rs_only's deferred all-reduce runs on the accumulator itself */
  uint64_t t0;
} red;

typedef struct block {
  void *ptr;
  size_t bytes;
  rt_mem_cat cat;
  int in_use, shared;
} block;

struct hsr_rt {
  hsr_rt_config cfg;
  hsr_boot *boot;
  hsr_comm *world, *shard_c, *rep_c, *part_c;
  int own_world;
  hsr_cluster *own_cluster;
  hsr_mesh *mesh;
  hsr_device *dev;
  rt_dev *dv; /* device path: streams and ordering (all NULL / no-ops on host) */
  int S, R, K, srank, rrank, prank;
  int sharded_params, sharded_grads; /* policy flags of the strategy */
  int poison;
  double timeout;
  size_t pes, res;
  hsr_rt_layout *layout;
  int committed;
  unit *units;
  int nunits;
  int *fwd_order, norder, order_fixed;
  int *uparam, *ubeg; /* layout params grouped by unit: uparam[ubeg[u] .. ubeg[u+1]) */
  red *q;
  int qn, qcap;
  block *blocks;
  int nblocks, capblocks;
  int64_t step;
  hsr_comm_counter base[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  hsr_rt_stats stats;
  int live;
  rt_obs *obs; /* ledgers, trace, timing (observe.c) */
};

/* Streams of the device path: compute, all-gather, reduce (NULL on host). */
#define CS(rt) rt_dev_cs((rt)->dv)
#define GS(rt) rt_dev_gs((rt)->dv)
#define RS(rt) rt_dev_rs((rt)->dv)

/* ---- names ---- */
static const char *const ev_names[RT_EV_COUNT] = {"gather", "reshard", "reduce_scatter", "all_reduce", "optimizer"};
const char *rt_event_name(rt_event_kind k) { return k >= 0 && k < RT_EV_COUNT ? ev_names[k] : "?"; }
const char *hsr_rt_group_name(hsr_rt_group g) {
  static const char *const n[] = {"shard", "replicate", "partial"};
  return g >= 0 && g < HSR_RT_GROUP_COUNT ? n[g] : "?";
}

/* ---- the two hooks ---- */
void rt_event(hsr_rt *rt, rt_event_kind kind, int unit, int group, size_t bytes, uint64_t t0, uint64_t t1) {
  rt_event_in(rt, 0, kind, unit, group, bytes, t0, t1);
}

void rt_event_in(hsr_rt *rt, int64_t step, rt_event_kind kind, int unit, int group, size_t bytes, uint64_t t0,
                 uint64_t t1) {
  /* group < -1: a local copy in place of a collective in group -group-2 */
  int collective = group >= -1;
  if (!collective) group = -group - 2;
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  rt_obs_event(rt->obs, step, kind, unit, group >= 0 && gc[group] ? hsr_comm_name(gc[group]) : NULL, collective, bytes,
               t0, t1);
  if (hsr_log_enabled(HSR_LOG_DEBUG))
    HSR_LOG_D("rt: %s unit %d group %s bytes %zu %.1f us", rt_event_name(kind), unit,
              group >= 0 ? hsr_rt_group_name((hsr_rt_group)group) : "-", bytes, (double)(t1 - t0) / 1e3);
}

/* One call, its time charged to a bucket of the engine timing (post: the
 * collective library's own non-blocking calls; data: the runtime's copies,
 * casts, zeroing and accumulation), the rest stays bookkeeping. */
#define RT_TIMED(rt, kind, call)                         \
  do {                                                   \
    uint64_t t_ = hsr_clock_ns();                        \
    hsr_status s_ = (call);                              \
    rt_obs_time((rt)->obs, (kind), hsr_clock_ns() - t_); \
    HSR_CHECK(s_);                                       \
  } while (0)

hsr_status rt_mem_get(hsr_rt *rt, rt_mem_cat cat, size_t bytes, void **ptr) {
  if (!bytes) bytes = 64;
  for (int i = 0; i < rt->nblocks; i++) {
    block *b = &rt->blocks[i];
    if (!b->in_use && b->cat == cat && b->bytes == bytes) {
      HSR_CHECK(rt_dev_block_reuse(rt->dv, i, cat)); /* its first stream waits for the last users */
      b->in_use = 1;
      rt->stats.pool_hits++;
      rt_obs_mem_get(rt->obs, cat, bytes, 0);
      *ptr = b->ptr;
      return HSR_OK;
    }
  }
  if (rt->nblocks == rt->capblocks) {
    int cap = rt->capblocks ? 2 * rt->capblocks : 32;
    block *nb = realloc(rt->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    rt->blocks = nb;
    rt->capblocks = cap;
  }
  /* Optimizer state and the gradient accumulator are never read by peers. */
  int shared =
      !(cat == HSR_MEM_MASTER || cat == HSR_MEM_MOMENT_M || cat == HSR_MEM_MOMENT_V || cat == HSR_MEM_GRAD_SHARD);
  void *p = NULL;
  hsr_status st = shared ? hsr_comm_mem_alloc(rt->world, bytes, &p) : hsr_device_alloc(rt->dev, bytes, &p);
  if (st != HSR_OK)
    return hsr_error(st, "runtime: allocating %zu bytes for %s failed: %s", bytes, hsr_mem_cat_name(cat),
                     hsr_last_error());
  rt->blocks[rt->nblocks++] = (block){p, bytes, cat, 1, shared};
  rt->stats.allocs++;
  rt_obs_mem_get(rt->obs, cat, bytes, 1);
  *ptr = p;
  return HSR_OK;
}

void rt_mem_put(hsr_rt *rt, void *ptr) {
  if (!ptr) return;
  for (int i = 0; i < rt->nblocks; i++)
    if (rt->blocks[i].ptr == ptr) {
      /* 0xFF bytes are NaN in f32 and bf16: a stale view reads NaN */
      if (rt->poison && rt->blocks[i].cat == HSR_MEM_FULL_UNIT)
        hsr_device_memset(rt->dev, ptr, 0xFF, rt->blocks[i].bytes, CS(rt));
      if (rt_dev_block_release(rt->dv, i) != HSR_OK) { /* cannot order reuse: never hand it out again */
        HSR_LOG_W("runtime: buffer %p not recycled: %s", ptr, hsr_last_error());
      } else {
        rt->blocks[i].in_use = 0;
        rt_obs_mem_put(rt->obs, rt->blocks[i].cat, rt->blocks[i].bytes);
      }
      return;
    }
  HSR_LOG_W("runtime: buffer %p returned twice or never allocated", ptr);
}

static void mem_release_all(hsr_rt *rt) {
  if (rt_dev_quiesce(rt->dv) != HSR_OK)
    HSR_LOG_W("runtime: device work still queued at teardown: %s", hsr_last_error());
  for (int i = 0; i < rt->nblocks; i++) {
    rt_obs_mem_free(rt->obs, rt->blocks[i].cat, rt->blocks[i].bytes, rt->blocks[i].in_use);
    if (rt->blocks[i].shared)
      hsr_comm_mem_free(rt->world, rt->blocks[i].ptr);
    else
      hsr_device_free(rt->dev, rt->blocks[i].ptr);
  }
  free(rt->blocks);
  rt->blocks = NULL;
  rt->nblocks = rt->capblocks = 0;
}

/* ---- hashing for the cross-rank comparison ---- */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

static uint64_t config_hash(const hsr_rt *rt) {
  const hsr_rt_config *c = &rt->cfg;
  int64_t v[] = {c->strategy,
                 rt->S,
                 rt->R,
                 rt->K,
                 c->reshard,
                 c->root_reshard,
                 c->prefetch,
                 c->max_live,
                 c->prefetch_step,
                 c->param_dtype,
                 c->reduce_dtype,
                 c->sync,
                 c->micro_batches,
                 (int64_t)c->align,
                 c->num_groups};
  uint64_t h = fnv(0xcbf29ce484222325ull, v, sizeof v);
  h = fnv(h, &c->clip, sizeof c->clip);
  h = fnv(h, c->groups, sizeof c->groups);
  if (rt_dev_gpu(rt->dv)) h = fnv(h, "cuda", 4); /* every rank on the same kind of device */
  return fnv(h, &c->user_hash, sizeof c->user_hash);
}

/* Every rank contributes its hash; a mismatch names the ranks that differ from rank 0. */
static hsr_status compare_hashes(hsr_rt *rt, uint64_t mine, const char *what) {
  int n = hsr_boot_size(rt->boot);
  uint64_t *all = calloc((size_t)n, sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  hsr_status st = hsr_boot_allgather(rt->boot, &mine, sizeof mine, all);
  if (st != HSR_OK) {
    free(all);
    return st;
  }
  char list[256] = "";
  size_t o = 0;
  int bad = 0;
  for (int r = 1; r < n; r++)
    if (all[r] != all[0]) {
      if (o + 16 < sizeof list) o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", bad ? ", " : "", r);
      bad++;
    }
  uint64_t h0 = all[0];
  free(all);
  if (bad)
    return hsr_error(HSR_ERR_MISMATCH,
                     "%s hash differs across ranks: rank(s) %s differ from rank 0 (0x%016llx; this rank 0x%016llx) "
                     "- every rank must register the same units and parameters with the same configuration",
                     what, list, (unsigned long long)h0, (unsigned long long)mine);
  return HSR_OK;
}

/* ---- creation ---- */
static const char *unit_name_of(void *ctx, int u) {
  hsr_rt *rt = ctx;
  return u >= 0 && u < rt->nunits ? rt->units[u].name : "?";
}

static hsr_status split(hsr_rt *rt, int color, int key, const char *name, hsr_comm **out) {
  HSR_CHECK(hsr_comm_split(rt->world, color, key, out));
  return hsr_comm_set_name(*out, name);
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
    hsr_status st = hsr_mesh_partial_group(rt->mesh, me, pg);
    int pi = hsr_mesh_partial_index(rt->mesh, me), pos = index_of(pg, rt->K, me);
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

hsr_status hsr_rt_create(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cluster, const hsr_rt_config *cfg,
                         hsr_rt **out) {
  if (!boot || !cfg || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_create: NULL argument");
  *out = NULL;
  hsr_rt *rt = calloc(1, sizeof *rt);
  if (!rt) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  rt->cfg = *cfg;
  rt->boot = boot;
  hsr_status st = rt_obs_create(hsr_boot_rank(boot), unit_name_of, rt, &rt->obs);
  if (st != HSR_OK) goto fail;
  if (!cluster) {
    hsr_topo *t = NULL;
    st = hsr_topo_discover(NULL, &t);
    if (st == HSR_OK) st = hsr_cluster_gather(boot, t, &rt->own_cluster);
    hsr_topo_free(t);
    if (st != HSR_OK) goto fail;
    cluster = rt->own_cluster;
  }
  int n = hsr_boot_size(boot);
  st = hsr_rt_config_resolve(cfg, n, hsr_cluster_domain_size(cluster), &rt->S, &rt->R);
  if (st != HSR_OK) goto fail;
  rt->K = cfg->reshard == HSR_RT_RESHARD_PARTIAL ? cfg->partial_k : 0;
  hsr_mesh_request req = {rt->S, rt->R, rt->K};
  st = hsr_mesh_plan(cluster, &req, &rt->mesh);
  if (st != HSR_OK) goto fail;
  if (hsr_mesh_shard(rt->mesh) != rt->S || hsr_mesh_replicate(rt->mesh) != rt->R) {
    st = hsr_error(HSR_ERR_INTERNAL, "runtime: mesh planner returned %d x %d for a %d x %d request",
                   hsr_mesh_replicate(rt->mesh), hsr_mesh_shard(rt->mesh), rt->R, rt->S);
    goto fail;
  }
  st = rt_dev_open(cfg, boot, cfg->timeout_s, &rt->dv);
  if (st != HSR_OK) goto fail;
  rt->dev = rt_dev_device(rt->dv);
  /* compare the configuration before any collective that depends on it */
  st = compare_hashes(rt, config_hash(rt), "configuration");
  if (st != HSR_OK) goto fail;
  rt->sharded_params = cfg->strategy == HSR_RT_FSDP || cfg->strategy == HSR_RT_HYBRID;
  rt->sharded_grads = rt->sharded_params || cfg->strategy == HSR_RT_ZERO2;
  rt->pes = hsr_dtype_size(cfg->param_dtype);
  rt->res = hsr_dtype_size(cfg->reduce_dtype);
  rt->timeout = cfg->timeout_s > 0 ? cfg->timeout_s : -1;
  rt->poison = cfg->poison;
  if (rt->poison < 0) {
#ifdef NDEBUG
    int p = 0;
#else
    int p = 1;
#endif
    st = hsr_env_bool("HSR_POISON", p, &p);
    if (st != HSR_OK) goto fail;
    rt->poison = p;
  }
  if (world) {
    if (hsr_comm_backend(world) != rt_dev_backend(rt->dv)) {
      st = hsr_error(
          HSR_ERR_INVALID, "runtime: the world communicator's backend does not match the device (%s needs %s)",
          rt_dev_gpu(rt->dv) ? "cuda" : "host", rt_dev_gpu(rt->dv) ? "HSR_BACKEND_NCCL" : "HSR_BACKEND_HOST");
      goto fail;
    }
    rt->world = world;
  } else {
    st = hsr_comm_world(boot, rt_dev_backend(rt->dv), &rt->world);
    if (st != HSR_OK) goto fail;
    rt->own_world = 1;
  }
  st = build_groups(rt);
  if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->part_c, GS(rt)); /* partial gathers */
  if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->rep_c, RS(rt));  /* replicate all-reduces */
  if (st != HSR_OK) goto fail;
  st = hsr_rt_layout_create(cfg->align, &rt->layout);
  if (st != HSR_OK) goto fail;
  HSR_LOG_I("runtime: %s mesh %d x %d (replicate x shard), rank at (%d, %d)%s", hsr_rt_strategy_name(cfg->strategy),
            rt->R, rt->S, rt->rrank, rt->srank, rt->K ? ", partial group of K ranks" : "");
  *out = rt;
  return HSR_OK;
fail:
  hsr_rt_destroy(rt);
  return st;
}

static hsr_status drain(hsr_rt *rt);

hsr_status hsr_rt_destroy(hsr_rt *rt) {
  if (!rt) return HSR_OK;
  hsr_status st = HSR_OK;
  if (rt->world) {
    hsr_status d = drain(rt);
    if (d != HSR_OK) st = d;
    for (int u = 0; u < rt->nunits; u++)
      if (rt->units[u].greq) {
        hsr_req_wait(rt->units[u].greq, rt->timeout);
        rt->units[u].greq = NULL;
      }
    mem_release_all(rt);
  }
  if (rt->dv) { /* streams and requests drained before the communicators go */
    hsr_status d = rt_dev_quiesce(rt->dv);
    if (d != HSR_OK && st == HSR_OK) st = d;
  }
  free(rt->q);
  hsr_comm_free(rt->part_c);
  hsr_comm_free(rt->rep_c);
  hsr_comm_free(rt->shard_c);
  if (rt->own_world) hsr_comm_free(rt->world);
  hsr_mesh_free(rt->mesh);
  hsr_cluster_free(rt->own_cluster);
  if (rt->dv) {
    hsr_status d = rt_dev_close(rt->dv);
    if (d != HSR_OK && st == HSR_OK) st = d;
  }
  hsr_rt_layout_free(rt->layout);
  free(rt->units);
  free(rt->fwd_order);
  free(rt->uparam);
  free(rt->ubeg);
  rt_obs_free(rt->obs);
  free(rt);
  return st;
}

/* ---- registration ---- */
hsr_status hsr_rt_unit_add(hsr_rt *rt, const char *name, int is_root, int *id) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->committed)
    return hsr_error(HSR_ERR_STATE, "unit '%s' registered after the first step; register every unit before training",
                     name ? name : "?");
  int u;
  HSR_CHECK(hsr_rt_layout_add_unit(rt->layout, name, &u));
  unit *nu = realloc(rt->units, (size_t)(u + 1) * sizeof *nu);
  if (!nu) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  rt->units = nu;
  memset(&nu[u], 0, sizeof nu[u]);
  snprintf(nu[u].name, sizeof nu[u].name, "%s", name);
  nu[u].is_root = is_root;
  nu[u].fwd_pos = -1;
  rt->nunits = u + 1;
  if (id) *id = u;
  return HSR_OK;
}

hsr_status hsr_rt_param_add(hsr_rt *rt, int unit, const char *name, int ndim, const int64_t *shape, int group) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->committed)
    return hsr_error(HSR_ERR_STATE, "parameter '%s' registered after the first step", name ? name : "?");
  if (group >= rt->cfg.num_groups)
    return hsr_error(HSR_ERR_INVALID, "parameter '%s': optimizer group %d, but the config has %d group(s)",
                     name ? name : "?", group, rt->cfg.num_groups);
  return hsr_rt_layout_add_param(rt->layout, unit, name, ndim, shape, group);
}

/* On the compute stream: every buffer zeroed here is next touched by compute
 * (or by a stream that joins compute before it reads). */
static hsr_status zero(hsr_rt *rt, void *p, size_t bytes) { return hsr_device_memset(rt->dev, p, 0, bytes, CS(rt)); }

hsr_status hsr_rt_commit(hsr_rt *rt) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->committed) return HSR_OK;
  if (rt->nunits == 0) return hsr_error(HSR_ERR_STATE, "runtime: no units registered");
  HSR_CHECK(hsr_rt_layout_finalize(rt->layout, rt->S));
  rt->committed = 1;
  uint64_t h = fnv(config_hash(rt), &(uint64_t){hsr_rt_layout_hash(rt->layout)}, sizeof(uint64_t));
  HSR_CHECK(compare_hashes(rt, h, "configuration + layout"));
  rt->fwd_order = malloc((size_t)rt->nunits * sizeof(int));
  int np = hsr_rt_layout_num_params(rt->layout);
  rt->ubeg = calloc((size_t)rt->nunits + 1, sizeof(int));
  rt->uparam = malloc((size_t)(np ? np : 1) * sizeof(int));
  if (!rt->fwd_order || !rt->ubeg || !rt->uparam) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  hsr_rt_param_info pi;
  for (int i = 0; i < np; i++) {
    HSR_CHECK(hsr_rt_layout_param(rt->layout, i, &pi));
    rt->ubeg[pi.unit + 1]++;
  }
  for (int u = 0; u < rt->nunits; u++) rt->ubeg[u + 1] += rt->ubeg[u];
  for (int i = 0, *fill = rt->ubeg; i < np; i++) { /* counting sort, stable: layout order within a unit */
    HSR_CHECK(hsr_rt_layout_param(rt->layout, i, &pi));
    int at = fill[pi.unit]++;
    rt->uparam[at] = i;
  }
  for (int u = rt->nunits; u > 0; u--) rt->ubeg[u] = rt->ubeg[u - 1]; /* fill moved each start to the next */
  rt->ubeg[0] = 0;
  HSR_CHECK(rt_dev_units(rt->dv, rt->nunits));
  for (int i = 0; i < rt->nunits; i++) {
    unit *u = &rt->units[i];
    u->L = hsr_rt_layout_unit_len(rt->layout, i);
    u->Ls = hsr_rt_layout_shard_len(rt->layout, i);
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_MASTER, u->Ls * 4, (void **)&u->master));
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_MOMENT_M, u->Ls * 4, (void **)&u->m));
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_MOMENT_V, u->Ls * 4, (void **)&u->v));
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_GRAD_SHARD, u->Ls * 4, (void **)&u->gshard));
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->master, u->Ls * 4));
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->m, u->Ls * 4));
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->v, u->Ls * 4));
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->gshard, u->Ls * 4));
    if (rt->sharded_params) {
      HSR_CHECK(rt_mem_get(rt, HSR_MEM_PARAM_SHARD, u->Ls * rt->pes, &u->shard));
      RT_TIMED(rt, RT_T_DATA, zero(rt, u->shard, u->Ls * rt->pes));
      u->state = U_SHARDED;
    } else {
      HSR_CHECK(rt_mem_get(rt, HSR_MEM_PARAM_SHARD, u->L * rt->pes, &u->full));
      RT_TIMED(rt, RT_T_DATA, zero(rt, u->full, u->L * rt->pes));
      u->state = U_FULL;
    }
  }
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++)
      if (gc[g]) HSR_CHECK(hsr_comm_counters(gc[g], (hsr_op)op, &rt->base[g][op]));
  return HSR_OK;
}

static hsr_status find_param(hsr_rt *rt, const char *name, hsr_rt_param_info *p) {
  int idx;
  HSR_CHECK(hsr_rt_layout_find(rt->layout, name, &idx));
  return hsr_rt_layout_param(rt->layout, idx, p);
}

/* Intersection of [off, off+n) with this rank's slice of the unit. */
static int local_range(const hsr_rt *rt, const unit *u, size_t off, size_t n, size_t *a, size_t *b) {
  size_t lo = (size_t)rt->srank * u->Ls, hi = lo + u->Ls;
  *a = off > lo ? off : lo;
  *b = off + n < hi ? off + n : hi;
  return *b > *a;
}

hsr_status hsr_rt_param_init(hsr_rt *rt, const char *name, const float *values) {
  if (!rt || !name || !values) return hsr_error(HSR_ERR_INVALID, "hsr_rt_param_init: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  if (rt->step > 0) return hsr_error(HSR_ERR_STATE, "parameter '%s' initialized after training started", name);
  hsr_rt_param_info p;
  HSR_CHECK(find_param(rt, name, &p));
  unit *u = &rt->units[p.unit];
  const float *src = values;
  float *staged = NULL;
  if (rt_dev_gpu(rt->dv) && p.numel) { /* the cast kernels read device memory: stage the values */
    HSR_CHECK(rt_dev_quiesce(rt->dv));
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, p.numel * 4, (void **)&staged));
    src = staged;
  }
  hsr_status st = staged ? hsr_device_copy(rt->dev, staged, values, p.numel * 4, CS(rt)) : HSR_OK;
  size_t a, b, lo = (size_t)rt->srank * u->Ls;
  if (st == HSR_OK && local_range(rt, u, p.offset, p.numel, &a, &b)) {
    st = hsr_device_copy(rt->dev, u->master + (a - lo), src + (a - p.offset), (b - a) * 4, CS(rt));
    if (st == HSR_OK && rt->sharded_params)
      st = hsr_kernels_cast(rt->dev, CS(rt), b - a, src + (a - p.offset), HSR_F32,
                            (char *)u->shard + (a - lo) * rt->pes, rt->cfg.param_dtype);
  }
  if (st == HSR_OK && !rt->sharded_params && p.numel)
    st = hsr_kernels_cast(rt->dev, CS(rt), p.numel, src, HSR_F32, (char *)u->full + p.offset * rt->pes,
                          rt->cfg.param_dtype);
  rt_mem_put(rt, staged);
  return st;
}

/* ---- gathers ---- */

static hsr_status gather_start(hsr_rt *rt, int ui) {
  unit *u = &rt->units[ui];
  if (u->state != U_SHARDED && u->state != U_PARTIAL)
    return hsr_error(HSR_ERR_INTERNAL, "runtime: gather of unit '%s' in state %d", u->name, u->state);
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_FULL_UNIT, u->L * rt->pes, &u->full));
  u->gt0 = hsr_clock_ns();
  u->gstep = rt_obs_step_now(rt->obs);
  u->greq = NULL;
  u->gather_from_partial = u->state == U_PARTIAL;
  /* the shard (optimizer) and the partial slice (forward_end) were written on compute */
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt)));
  if (u->gather_from_partial) {
    size_t n = u->L / (size_t)rt->K;
    u->ggroup = HSR_RT_GROUP_PARTIAL;
    if (rt->K > 1)
      RT_TIMED(rt, RT_T_POST, hsr_comm_allgather(rt->part_c, u->partial, u->full, n, rt->cfg.param_dtype, &u->greq));
    else
      RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, u->full, u->partial, n * rt->pes, GS(rt)));
  } else {
    u->ggroup = HSR_RT_GROUP_SHARD;
    if (rt->S > 1) {
      HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, GS(rt)));
      RT_TIMED(rt, RT_T_POST, hsr_comm_allgather(rt->shard_c, u->shard, u->full, u->Ls, rt->cfg.param_dtype, &u->greq));
    } else
      RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, u->full, u->shard, u->L * rt->pes, GS(rt)));
  }
  HSR_CHECK(rt_dev_gather_issued(rt->dv, ui));
  u->state = U_GATHERING;
  if (++rt->live > rt->stats.max_live_full) rt->stats.max_live_full = rt->live;
  return HSR_OK;
}

/* Waits for a request and reports the transport's own start/end when known. */
static hsr_status wait_req(hsr_rt *rt, hsr_req *r, uint64_t issued, uint64_t *t0, uint64_t *t1) {
  *t0 = issued;
  *t1 = 0;
  if (!r || rt_dev_gpu(rt->dv)) {
    /* device: the streams order the consumers (events), the host does not
     * wait; the span is the host's enqueue span */
    *t1 = hsr_clock_ns();
    return r ? rt_dev_defer(rt->dv, r) : HSR_OK;
  }
  int done = 0;
  uint64_t w0 = hsr_clock_ns();
  hsr_status st = hsr_req_test(r, &done);
  if (st == HSR_OK && done) {
    uint64_t a = 0, b = 0;
    hsr_req_times(r, &a, &b);
    if (a && b) *t0 = a, *t1 = b;
    st = hsr_req_free(r);
  } else if (st == HSR_OK) {
    st = hsr_req_wait(r, rt->timeout);
  } else {
    hsr_req_free(r);
  }
  uint64_t w1 = hsr_clock_ns();
  rt_obs_wait(rt->obs, w1 - w0);
  if (!*t1) *t1 = w1;
  return st;
}

static hsr_status gather_wait(hsr_rt *rt, int ui) {
  unit *u = &rt->units[ui];
  uint64_t t0, t1;
  hsr_req *r = u->greq;
  u->greq = NULL;
  hsr_status st = wait_req(rt, r, u->gt0, &t0, &t1);
  if (st == HSR_OK) st = rt_dev_gather_consume(rt->dv, ui); /* compute waits for the gather */
  if (st != HSR_OK)
    return hsr_error(st, "runtime: gather of unit '%s' (%s group) failed: %s", u->name,
                     hsr_rt_group_name((hsr_rt_group)u->ggroup), hsr_last_error());
  size_t n = u->gather_from_partial ? u->L / (size_t)rt->K : u->Ls;
  rt_event_in(rt, u->gstep, RT_EV_GATHER, ui, r ? u->ggroup : -u->ggroup - 2, n * rt->pes, t0, t1);
  if (u->gather_from_partial) { /* the 1/K copy has served its purpose */
    rt_mem_put(rt, u->partial);
    u->partial = NULL;
  }
  u->state = U_FULL;
  return HSR_OK;
}

static hsr_status make_full(hsr_rt *rt, int ui) {
  unit *u = &rt->units[ui];
  if (u->state == U_SHARDED || u->state == U_PARTIAL) HSR_CHECK(gather_start(rt, ui));
  if (u->state == U_GATHERING) HSR_CHECK(gather_wait(rt, ui));
  return HSR_OK;
}

static void release_full(hsr_rt *rt, int ui) {
  unit *u = &rt->units[ui];
  rt_mem_put(rt, u->full);
  u->full = NULL;
  u->state = u->partial ? U_PARTIAL : U_SHARDED;
  rt->live--;
}

static int can_prefetch(const hsr_rt *rt) { return rt->cfg.max_live == 0 || rt->live < rt->cfg.max_live; }

static hsr_status prefetch(hsr_rt *rt, int ui, int backward) {
  if (!rt->sharded_params || !rt->order_fixed || rt->cfg.prefetch <= 0) return HSR_OK;
  int pos = rt->units[ui].fwd_pos;
  if (pos < 0) return HSR_OK;
  for (int j = 1; j <= rt->cfg.prefetch; j++) {
    int p = backward ? pos - j : pos + j;
    if (p < 0 || p >= rt->norder) break;
    int v = rt->fwd_order[p];
    unit *w = &rt->units[v];
    int want = backward ? (w->state == U_SHARDED || w->state == U_PARTIAL) : w->state == U_SHARDED;
    if (!want) continue;
    if (!can_prefetch(rt)) break;
    HSR_CHECK(gather_start(rt, v));
  }
  return HSR_OK;
}

static hsr_status check_unit(hsr_rt *rt, int ui, const char *what) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (ui < 0 || ui >= rt->nunits)
    return hsr_error(HSR_ERR_INVALID, "%s: unit %d does not exist (%d units)", what, ui, rt->nunits);
  return hsr_rt_commit(rt);
}

static hsr_status forward_begin(hsr_rt *rt, int ui) {
  HSR_CHECK(check_unit(rt, ui, "forward_begin"));
  rt_obs_phase(rt->obs, HSR_PHASE_FORWARD, ui);
  unit *u = &rt->units[ui];
  if (u->in_fwd || u->in_bwd)
    return hsr_error(HSR_ERR_STATE, "forward_begin(%s): the unit is already inside a forward or backward window",
                     u->name);
  if (!rt->order_fixed && u->fwd_pos < 0) {
    u->fwd_pos = rt->norder;
    rt->fwd_order[rt->norder++] = ui;
  }
  HSR_CHECK(make_full(rt, ui));
  u->in_fwd = 1;
  return prefetch(rt, ui, 0);
}

static hsr_status forward_end(hsr_rt *rt, int ui) {
  HSR_CHECK(check_unit(rt, ui, "forward_end"));
  rt_obs_phase(rt->obs, HSR_PHASE_FORWARD, ui);
  unit *u = &rt->units[ui];
  if (!u->in_fwd) return hsr_error(HSR_ERR_STATE, "forward_end(%s) without forward_begin", u->name);
  u->in_fwd = 0;
  if (!rt->sharded_params) return HSR_OK;
  hsr_rt_reshard pol = u->is_root && !rt->cfg.root_reshard ? HSR_RT_RESHARD_NONE : rt->cfg.reshard;
  if (pol == HSR_RT_RESHARD_NONE) return HSR_OK;
  uint64_t t0 = hsr_clock_ns();
  size_t kept = 0;
  if (pol == HSR_RT_RESHARD_PARTIAL) {
    size_t n = u->L / (size_t)rt->K;
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_PARTIAL_SLICE, n * rt->pes, &u->partial));
    RT_TIMED(
        rt, RT_T_DATA,
        hsr_device_copy(rt->dev, u->partial, (char *)u->full + (size_t)rt->prank * n * rt->pes, n * rt->pes, CS(rt)));
    kept = n * rt->pes;
  }
  release_full(rt, ui);
  rt_event(rt, RT_EV_RESHARD, ui, pol == HSR_RT_RESHARD_PARTIAL ? HSR_RT_GROUP_PARTIAL : HSR_RT_GROUP_SHARD, kept, t0,
           hsr_clock_ns());
  return HSR_OK;
}

static hsr_status backward_begin(hsr_rt *rt, int ui) {
  HSR_CHECK(check_unit(rt, ui, "backward_begin"));
  rt_obs_phase(rt->obs, HSR_PHASE_BACKWARD, ui);
  unit *u = &rt->units[ui];
  if (u->in_fwd || u->in_bwd)
    return hsr_error(HSR_ERR_STATE, "backward_begin(%s): the unit is already inside a forward or backward window",
                     u->name);
  if (u->micro >= rt->cfg.micro_batches)
    return hsr_error(HSR_ERR_STATE,
                     "backward_begin(%s): already %d backward passes this step (micro-batches %d); call "
                     "hsr_rt_step and hsr_rt_zero_grad",
                     u->name, u->micro, rt->cfg.micro_batches);
  HSR_CHECK(make_full(rt, ui));
  if (!u->gfull) {
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_RS_BUF, u->L * 4, (void **)&u->gfull));
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->gfull, u->L * 4));
  }
  u->in_bwd = 1;
  return prefetch(rt, ui, 1);
}

hsr_status hsr_rt_param_view(hsr_rt *rt, const char *name, void **ptr) {
  if (!rt || !name || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_rt_param_view: NULL argument");
  *ptr = NULL;
  hsr_rt_param_info p;
  HSR_CHECK(find_param(rt, name, &p));
  unit *u = &rt->units[p.unit];
  if (!u->in_fwd && !u->in_bwd)
    return hsr_error(HSR_ERR_STATE,
                     "view of parameter '%s' outside its window: unit '%s' is not between forward_begin/forward_end "
                     "or backward_begin/backward_end",
                     name, u->name);
  *ptr = (char *)u->full + p.offset * rt->pes;
  return HSR_OK;
}

hsr_status hsr_rt_grad_view(hsr_rt *rt, const char *name, float **ptr) {
  if (!rt || !name || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_rt_grad_view: NULL argument");
  *ptr = NULL;
  hsr_rt_param_info p;
  HSR_CHECK(find_param(rt, name, &p));
  unit *u = &rt->units[p.unit];
  if (!u->in_bwd)
    return hsr_error(HSR_ERR_STATE,
                     "gradient view of '%s' outside its window: unit '%s' is not between "
                     "backward_begin and backward_end",
                     name, u->name);
  *ptr = u->gfull + p.offset;
  return HSR_OK;
}

/* ---- the gradient path ---- */
static hsr_status q_push(hsr_rt *rt, const red *r) {
  if (rt->qn == rt->qcap) {
    int cap = rt->qcap ? 2 * rt->qcap : 16;
    red *nq = realloc(rt->q, (size_t)cap * sizeof *nq);
    if (!nq) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    rt->q = nq;
    rt->qcap = cap;
  }
  rt->q[rt->qn++] = *r;
  return HSR_OK;
}

/* Stage 1: reduce the full gradient in the shard group. Grads sharded:
 * reduce-scatter (avg) to the local slice. Grads replicated (zero1, ddp):
 * all-reduce (avg) in full, then the slice is what the optimizer needs. */
static hsr_status red_start(hsr_rt *rt, int ui, int last) {
  unit *u = &rt->units[ui];
  hsr_dtype rdt = rt->cfg.reduce_dtype;
  red r = {.unit = ui, .stage = 1, .t0 = hsr_clock_ns()};
  hsr_rt_sync sync = rt->cfg.sync;
  HSR_CHECK(rt_dev_join(rt->dv, RS(rt), CS(rt))); /* compute done -> the reduction may read the gradient */
  r.ar = rt->R > 1 && (sync != HSR_RT_SYNC_RS_ONLY || rt->cfg.micro_batches == 1 || last);
  /* reduce-dtype copy of the full gradient (or the gradient itself) */
  if (rdt == HSR_F32) {
    r.send = u->gfull;
  } else {
    HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, u->L * rt->res, &r.send));
    RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), u->L, u->gfull, HSR_F32, r.send, rdt));
    rt_mem_put(rt, u->gfull);
  }
  u->gfull = NULL;
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_AR_BUF, u->Ls * rt->res, &r.slice));
  if (rt->S > 1) {
    HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, RS(rt)));
    if (rt->sharded_grads)
      RT_TIMED(rt, RT_T_POST, hsr_comm_reduce_scatter(rt->shard_c, r.send, r.slice, u->Ls, rdt, HSR_AVG, &r.req));
    else
      RT_TIMED(rt, RT_T_POST, hsr_comm_allreduce(rt->shard_c, r.send, r.send, u->L, rdt, HSR_AVG, &r.req));
  }
  return q_push(rt, &r);
}

static hsr_status stage1_done(hsr_rt *rt, red *r) {
  unit *u = &rt->units[r->unit];
  if (rt->S == 1 || !rt->sharded_grads)
    RT_TIMED(rt, RT_T_DATA,
             hsr_device_copy(rt->dev, r->slice, (char *)r->send + (size_t)rt->srank * u->Ls * rt->res, u->Ls * rt->res,
                             RS(rt)));
  if (r->ar) {
    r->stage = 2;
    r->t0 = hsr_clock_ns();
    RT_TIMED(rt, RT_T_POST,
             hsr_comm_allreduce(rt->rep_c, r->slice, r->slice, u->Ls, rt->cfg.reduce_dtype, HSR_AVG, &r->req));
    return HSR_OK;
  }
  r->done = 1;
  return HSR_OK;
}

/* Adds a reduced slice into the unit's f32 accumulator. */
static hsr_status accumulate(hsr_rt *rt, unit *u, const void *slice) {
  if (rt->cfg.reduce_dtype == HSR_F32) return hsr_kernels_axpy(rt->dev, RS(rt), u->Ls, 1.0, slice, u->gshard, HSR_F32);
  float *tmp;
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, u->Ls * 4, (void **)&tmp));
  hsr_status st = hsr_kernels_cast(rt->dev, RS(rt), u->Ls, slice, rt->cfg.reduce_dtype, tmp, HSR_F32);
  if (st == HSR_OK) st = hsr_kernels_axpy(rt->dev, RS(rt), u->Ls, 1.0, tmp, u->gshard, HSR_F32);
  rt_mem_put(rt, tmp);
  return st;
}

static void red_event(hsr_rt *rt, const red *r, uint64_t t0, uint64_t t1) {
  const unit *u = &rt->units[r->unit];
  int s1 = r->stage == 1;
  rt_event(rt, s1 && rt->sharded_grads ? RT_EV_REDUCE_SCATTER : RT_EV_ALLREDUCE, r->unit,
           s1 ? HSR_RT_GROUP_SHARD : HSR_RT_GROUP_REPLICATE, (s1 && !rt->sharded_grads ? u->L : u->Ls) * rt->res, t0,
           t1);
}

/* Moves entries on without blocking. Stage-1 completions move on in FIFO
 * order, so every rank issues the replicate all-reduces in the same order. */
static hsr_status advance(hsr_rt *rt) {
  if (rt_dev_gpu(rt->dv)) return HSR_OK; /* device: everything was issued in program order (retire) */
  for (int i = 0; i < rt->qn; i++) {
    red *r = &rt->q[i];
    if (r->done) continue;
    if (r->req) {
      int done = 0;
      RT_TIMED(rt, RT_T_POST, hsr_req_test(r->req, &done));
      if (!done) {
        if (r->stage == 1) break; /* later stage-1 entries cannot pass this one */
        continue;
      }
      uint64_t a = 0, b = 0;
      hsr_req_times(r->req, &a, &b);
      hsr_req_free(r->req);
      r->req = NULL;
      red_event(rt, r, a ? a : r->t0, b ? b : hsr_clock_ns());
    }
    if (r->stage == 1) {
      HSR_CHECK(stage1_done(rt, r));
      if (r->stage == 2) i--; /* test its all-reduce right away */
    } else {
      r->done = 1;
    }
  }
  return HSR_OK;
}

/* Completes the oldest entry, blocking (bounded by the timeout). */
static hsr_status complete_head(hsr_rt *rt) {
  red *r = &rt->q[0];
  while (!r->done) {
    if (r->req) {
      uint64_t t0, t1;
      hsr_status st = wait_req(rt, r->req, r->t0, &t0, &t1);
      r->req = NULL;
      if (st != HSR_OK)
        return hsr_error(st, "runtime: gradient %s of unit '%s' failed: %s",
                         r->stage == 1 ? "reduction (shard group)" : "all-reduce (replicate group)",
                         rt->units[r->unit].name, hsr_last_error());
      red_event(rt, r, t0, t1);
    }
    if (r->stage == 1)
      HSR_CHECK(stage1_done(rt, r));
    else
      r->done = 1;
  }
  return HSR_OK;
}

/* Retires all but the newest `keep` entries: accumulates their results in
 * FIFO order (bitwise reproducible sums) and returns their buffers. Buffers
 * go back to the pool only here, at points fixed by program order, so the
 * pool's high-water mark does not depend on timing and steady-state steps
 * allocate nothing. */
static hsr_status retire(hsr_rt *rt, int keep) {
  while (rt->qn > keep) {
    HSR_CHECK(complete_head(rt));
    red *r = &rt->q[0];
    unit *u = &rt->units[r->unit];
    if (r->slice_is_gshard) { /* deferred all-reduce of the accumulator */
      if (rt->cfg.reduce_dtype == HSR_F32)
        RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, u->gshard, r->slice, u->Ls * 4, RS(rt)));
      else
        RT_TIMED(rt, RT_T_DATA,
                 hsr_kernels_cast(rt->dev, RS(rt), u->Ls, r->slice, rt->cfg.reduce_dtype, u->gshard, HSR_F32));
    } else {
      RT_TIMED(rt, RT_T_DATA, accumulate(rt, u, r->slice));
    }
    rt_mem_put(rt, r->send);
    rt_mem_put(rt, r->slice);
    memmove(rt->q, rt->q + 1, (size_t)(rt->qn - 1) * sizeof *rt->q);
    rt->qn--;
  }
  return HSR_OK;
}

static hsr_status drain(hsr_rt *rt) { return retire(rt, 0); }

/* rs_only, last micro-batch: the slices of earlier micro-batches were summed
 * without the replicate all-reduce; one all-reduce of the accumulated slice
 * completes them all. */
static hsr_status deferred_allreduce(hsr_rt *rt, int ui) {
  unit *u = &rt->units[ui];
  red r = {.unit = ui, .stage = 2, .slice_is_gshard = 1, .t0 = hsr_clock_ns()};
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_AR_BUF, u->Ls * rt->res, &r.slice));
  RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, r.slice, rt->cfg.reduce_dtype));
  RT_TIMED(rt, RT_T_POST,
           hsr_comm_allreduce(rt->rep_c, r.slice, r.slice, u->Ls, rt->cfg.reduce_dtype, HSR_AVG, &r.req));
  return q_push(rt, &r);
}

static hsr_status backward_end(hsr_rt *rt, int ui) {
  HSR_CHECK(check_unit(rt, ui, "backward_end"));
  rt_obs_phase(rt->obs, HSR_PHASE_REDUCE, ui);
  unit *u = &rt->units[ui];
  if (!u->in_bwd) return hsr_error(HSR_ERR_STATE, "backward_end(%s) without backward_begin", u->name);
  u->in_bwd = 0;
  int last = u->micro == rt->cfg.micro_batches - 1;
  u->micro++;
  if (rt->sharded_params) release_full(rt, ui);
  if (last || rt->cfg.sync != HSR_RT_SYNC_NONE) {
    if (rt->cfg.sync == HSR_RT_SYNC_RS_ONLY && rt->cfg.micro_batches > 1 && rt->R > 1) {
      /* every micro-batch: the shard-group reduction only (red_start leaves
       * out the all-reduce); on the last, one all-reduce of the sum */
      HSR_CHECK(red_start(rt, ui, 0));
      if (last) {
        HSR_CHECK(drain(rt)); /* the accumulator must hold every micro-batch's slice */
        HSR_CHECK(deferred_allreduce(rt, ui));
      }
    } else {
      HSR_CHECK(red_start(rt, ui, 1));
    }
  }
  HSR_CHECK(advance(rt));
  /* device: the streams keep the reductions in flight; the host issues each
   * stage in program order right away (no timing-dependent issue order) */
  return retire(rt, rt_dev_gpu(rt->dv) ? 0 : RT_REDUCTIONS_IN_FLIGHT);
}

/* ---- the optimizer step ---- */
static hsr_status snapshot_counts(hsr_rt *rt, hsr_rt_step_info *info) {
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++) {
      hsr_comm_counter c = {0, 0, 0};
      if (gc[g]) HSR_CHECK(hsr_comm_counters(gc[g], (hsr_op)op, &c));
      if (info) info->calls[g][op] = c.calls - rt->base[g][op].calls;
      rt->base[g][op] = c;
    }
  return HSR_OK;
}

/* AdamW on this rank's slice of every parameter of unit ui. */
static hsr_status adamw_unit(hsr_rt *rt, int ui, double coef) {
  unit *u = &rt->units[ui];
  size_t lo = (size_t)rt->srank * u->Ls;
  for (int j = rt->ubeg[ui]; j < rt->ubeg[ui + 1]; j++) {
    hsr_rt_param_info p;
    HSR_CHECK(hsr_rt_layout_param(rt->layout, rt->uparam[j], &p));
    size_t a, b;
    if (!local_range(rt, u, p.offset, p.numel, &a, &b)) continue;
    const hsr_rt_opt_group *g = &rt->cfg.groups[p.group];
    hsr_adamw_hparams hp = {g->lr, g->beta1, g->beta2, g->eps, g->weight_decay, rt->step, (float)coef};
    void *out = rt->sharded_params ? (char *)u->shard + (a - lo) * rt->pes : (char *)u->full + a * rt->pes;
    size_t o = a - lo;
    HSR_CHECK(hsr_kernels_adamw(rt->dev, CS(rt), b - a, u->master + o, u->m + o, u->v + o, u->gshard + o, HSR_F32, out,
                                rt->cfg.param_dtype, &hp));
  }
  return HSR_OK;
}

static hsr_status step(hsr_rt *rt, hsr_rt_step_info *info) {
  HSR_CHECK(hsr_rt_commit(rt));
  rt_obs_phase(rt->obs, HSR_PHASE_STEP, -1);
  for (int i = 0; i < rt->nunits; i++) {
    unit *u = &rt->units[i];
    if (u->in_fwd || u->in_bwd)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' is still inside its %s window", u->name,
                       u->in_fwd ? "forward" : "backward");
    if (u->micro != rt->cfg.micro_batches)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' ran %d backward pass(es) this step, expected %d (micro-batches)",
                       u->name, u->micro, rt->cfg.micro_batches);
  }
  HSR_CHECK(drain(rt));
  uint64_t t0 = hsr_clock_ns();
  int M = rt->cfg.micro_batches;
  double ss = 0, *sq;
  /* on the reduce stream, behind the accumulations; partial sums land in host
   * slots and are added in unit order (the same order on host and device) */
  HSR_CHECK(rt_dev_slots(rt->dv, rt->nunits, &sq));
  for (int i = 0; i < rt->nunits; i++) {
    unit *u = &rt->units[i];
    if (M > 1) HSR_CHECK(hsr_kernels_scale(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, 1.0 / M));
    sq[i] = 0;
    HSR_CHECK(hsr_kernels_sumsq(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, &sq[i]));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, RS(rt))); /* the one host wait of a device step: the clip factor */
  for (int i = 0; i < rt->nunits; i++) ss += sq[i];
  /* the slices of one shard group tile the gradient; replicas hold equal slices */
  if (rt->S > 1) {
    uint64_t a = hsr_clock_ns();
    rt_event(rt, RT_EV_OPTIM, -1, -1, 0, t0, a);
    HSR_CHECK(rt_dev_allreduce_f64(rt->dv, rt->shard_c, &ss));
    t0 = hsr_clock_ns();
    rt_obs_wait(rt->obs, t0 - a);
    rt_event(rt, RT_EV_ALLREDUCE, -1, HSR_RT_GROUP_SHARD, sizeof ss, a, t0);
  }
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), RS(rt))); /* the optimizer (compute) reads the reduced gradient */
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt))); /* and overwrites shards that a queued gather may still read */
  double norm = sqrt(ss), coef = 1.0;
  if (rt->cfg.clip > 0 && norm > rt->cfg.clip) coef = rt->cfg.clip / (norm + 1e-6);
  rt->step++;
  rt->order_fixed = 1;
  /* Units in the order the next forward needs them. The first unit's
   * gather (the next step's, sharded) or every unit's (zero1/zero2: the
   * updated slices) is posted as soon as the unit is updated, so it runs
   * under the rest of the optimizer instead of after it. */
  int first = rt->norder > 0 ? rt->fwd_order[0] : -1;
  int early = rt->cfg.prefetch_step && rt->cfg.prefetch > 0 && rt->sharded_params && first >= 0;
  int regather = !rt->sharded_params && rt->S > 1;
  hsr_req **reqs = NULL;
  uint64_t *posted = NULL;
  if (regather) {
    reqs = calloc((size_t)rt->nunits, sizeof *reqs);
    posted = calloc((size_t)rt->nunits, sizeof *posted);
    if (!reqs || !posted) {
      free(reqs), free(posted);
      return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
    }
  }
  hsr_status st = HSR_OK;
  for (int k = -1; k < rt->nunits && st == HSR_OK; k++) {
    int ui = k < 0 ? first : k;
    if (ui < 0 || (k >= 0 && ui == first)) continue;
    st = adamw_unit(rt, ui, coef);
    if (st != HSR_OK) break;
    uint64_t now = hsr_clock_ns();
    if (regather) {
      rt_event(rt, RT_EV_OPTIM, -1, -1, 0, t0, now);
      st = rt_dev_join(rt->dv, GS(rt), CS(rt)); /* the gather reads what the optimizer wrote */
      if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->shard_c, GS(rt));
      unit *u = &rt->units[ui];
      posted[ui] = hsr_clock_ns();
      if (st == HSR_OK)
        st = hsr_comm_allgather(rt->shard_c, (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes, u->full, u->Ls,
                                rt->cfg.param_dtype, &reqs[ui]);
      t0 = hsr_clock_ns();
      rt_obs_time(rt->obs, RT_T_POST, t0 - posted[ui]);
    } else if (k < 0 && early && rt->units[ui].state == U_SHARDED && can_prefetch(rt)) {
      rt_event(rt, RT_EV_OPTIM, -1, -1, 0, t0, now);
      st = gather_start(rt, ui); /* the next step's first gather */
      t0 = hsr_clock_ns();
    }
  }
  if (st == HSR_OK) rt_event(rt, RT_EV_OPTIM, -1, -1, 0, t0, hsr_clock_ns());
  /* zero1/zero2: every rank updated its slice of the full parameters in place */
  if (regather) {
    for (int i = 0; i < rt->nunits; i++) {
      if (!reqs[i]) continue;
      uint64_t a, b;
      hsr_status w = wait_req(rt, reqs[i], posted[i], &a, &b);
      if (w != HSR_OK && st == HSR_OK) st = w;
      rt_event(rt, RT_EV_GATHER, i, HSR_RT_GROUP_SHARD, rt->units[i].Ls * rt->pes, a, b);
    }
    free(reqs);
    free(posted);
    if (st == HSR_OK) st = rt_dev_join(rt->dv, CS(rt), GS(rt)); /* the next forward reads the gathered parameters */
  }
  HSR_CHECK(st);
  HSR_CHECK(rt_dev_reap(rt->dv));
  if (info) {
    memset(info, 0, sizeof *info);
    info->step = rt->step;
    info->grad_norm = norm;
    info->clip_coef = coef;
    info->lr = rt->cfg.groups[0].lr;
  }
  return snapshot_counts(rt, info);
}

static hsr_status zero_grad(hsr_rt *rt) {
  HSR_CHECK(hsr_rt_commit(rt));
  HSR_CHECK(drain(rt));
  for (int i = 0; i < rt->nunits; i++) {
    unit *u = &rt->units[i];
    if (u->in_bwd) return hsr_error(HSR_ERR_STATE, "zero_grad: unit '%s' is inside its backward window", u->name);
    RT_TIMED(rt, RT_T_DATA, zero(rt, u->gshard, u->Ls * 4));
    if (u->gfull) {
      rt_mem_put(rt, u->gfull);
      u->gfull = NULL;
    }
    u->micro = 0;
  }
  return HSR_OK;
}

hsr_status hsr_rt_param_read(hsr_rt *rt, const char *name, float *out) {
  if (!rt || !name || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_param_read: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  hsr_rt_param_info p;
  HSR_CHECK(find_param(rt, name, &p));
  unit *u = &rt->units[p.unit];
  /* device: out is host memory; drain the queued updates first (not a steady-state call) */
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  if (rt->S == 1) {
    RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, out, u->master + p.offset, p.numel * 4, GS(rt)));
    return rt_dev_sync(rt->dv, GS(rt));
  }
  float *full;
  HSR_CHECK(rt_mem_get(rt, HSR_MEM_STAGING, u->L * 4, (void **)&full));
  hsr_status st = rt_dev_quiesce(rt->dv);
  if (st == HSR_OK) st = rt_dev_use(rt->dv, rt->shard_c, GS(rt));
  if (st == HSR_OK) st = hsr_comm_allgather(rt->shard_c, u->master, full, u->Ls, HSR_F32, NULL);
  if (st == HSR_OK) st = hsr_device_copy(rt->dev, out, full + p.offset, p.numel * 4, GS(rt));
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, GS(rt));
  rt_mem_put(rt, full);
  HSR_CHECK(st);
  return snapshot_counts(rt, NULL); /* read-backs do not count toward the next step */
}

/* ---- getters ---- */
const hsr_rt_layout *hsr_rt_get_layout(const hsr_rt *rt) { return rt ? rt->layout : NULL; }
const hsr_mesh *hsr_rt_get_mesh(const hsr_rt *rt) { return rt ? rt->mesh : NULL; }
hsr_comm *hsr_rt_world(hsr_rt *rt) { return rt ? rt->world : NULL; }
hsr_device *hsr_rt_device(hsr_rt *rt) { return rt ? rt->dev : NULL; }
hsr_stream *hsr_rt_compute_stream(hsr_rt *rt) { return rt ? CS(rt) : NULL; }
int hsr_rt_shard(const hsr_rt *rt) { return rt ? rt->S : 0; }
int hsr_rt_replicate(const hsr_rt *rt) { return rt ? rt->R : 0; }
int hsr_rt_partial(const hsr_rt *rt) { return rt ? rt->K : 0; }
int hsr_rt_dp_rank(const hsr_rt *rt) { return rt ? rt->rrank * rt->S + rt->srank : 0; }
int hsr_rt_dp_size(const hsr_rt *rt) { return rt ? rt->R * rt->S : 0; }
hsr_status hsr_rt_get_stats(const hsr_rt *rt, hsr_rt_stats *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_get_stats: NULL argument");
  *out = rt->stats;
  return HSR_OK;
}

/* ---- public lifecycle calls: the implementations above, timed and traced ---- */
#define RT_OBSERVED(call, starts, window, unit, bwd, ends)                \
  do {                                                                    \
    if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");        \
    rt_obs_enter(rt->obs, starts);                                        \
    hsr_status st_ = (call);                                              \
    rt_obs_leave(rt->obs, st_ == HSR_OK ? (window) : 0, unit, bwd, ends); \
    return st_;                                                           \
  } while (0)

hsr_status hsr_rt_forward_begin(hsr_rt *rt, int ui) { RT_OBSERVED(forward_begin(rt, ui), 1, 1, ui, 0, 0); }
hsr_status hsr_rt_forward_end(hsr_rt *rt, int ui) { RT_OBSERVED(forward_end(rt, ui), 0, -1, ui, 0, 0); }
hsr_status hsr_rt_backward_begin(hsr_rt *rt, int ui) { RT_OBSERVED(backward_begin(rt, ui), 1, 1, ui, 1, 0); }
hsr_status hsr_rt_backward_end(hsr_rt *rt, int ui) { RT_OBSERVED(backward_end(rt, ui), 0, -1, ui, 1, 0); }
hsr_status hsr_rt_step(hsr_rt *rt, hsr_rt_step_info *info) { RT_OBSERVED(step(rt, info), 0, 0, -1, 0, 1); }
hsr_status hsr_rt_zero_grad(hsr_rt *rt) { RT_OBSERVED(zero_grad(rt), 0, 0, -1, 0, 0); }

hsr_ledger *hsr_rt_ledger(hsr_rt *rt) { return rt ? rt_obs_held(rt->obs) : NULL; }
const hsr_ledger *hsr_rt_ledger_in_use(const hsr_rt *rt) { return rt ? rt_obs_live(rt->obs) : NULL; }
hsr_status hsr_rt_trace_enable(hsr_rt *rt, int on) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  return rt_obs_trace_enable(rt->obs, on);
}
hsr_status hsr_rt_trace_write(hsr_rt *rt, const char *path) {
  if (!rt || !path) return hsr_error(HSR_ERR_INVALID, "hsr_rt_trace_write: NULL argument");
  hsr_trace *t = rt_obs_trace(rt->obs), *empty = NULL;
  /* Gathers still in flight (the last step-end prefetch) are completed first,
   * so every collective the communicators counted is in the file. */
  hsr_status gst = HSR_OK;
  for (int i = 0; t && i < rt->nunits && gst == HSR_OK; i++)
    if (rt->units[i].state == U_GATHERING) gst = gather_wait(rt, i);
  if (!t) HSR_CHECK(hsr_trace_create(hsr_boot_rank(rt->boot), &empty)); /* still collective: write no spans */
  hsr_status st = hsr_trace_write(t ? t : empty, rt->boot, path);       /* collective: written even after an error */
  hsr_trace_free(empty);
  return gst != HSR_OK ? gst : st;
}
hsr_status hsr_rt_get_timing(const hsr_rt *rt, hsr_rt_timing *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_get_timing: NULL argument");
  return rt_obs_timing(rt->obs, out);
}
hsr_status hsr_rt_reset_timing(hsr_rt *rt) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  rt_obs_timing_reset(rt->obs);
  return HSR_OK;
}
hsr_status hsr_rt_set_lr(hsr_rt *rt, int group, float lr) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (group < 0 || group >= rt->cfg.num_groups)
    return hsr_error(HSR_ERR_INVALID, "hsr_rt_set_lr: group %d (valid: 0 to %d)", group, rt->cfg.num_groups - 1);
  if (!isfinite(lr) || lr < 0) return hsr_error(HSR_ERR_INVALID, "hsr_rt_set_lr: learning rate %g must be finite and >= 0", lr);
  rt->cfg.groups[group].lr = lr;
  return HSR_OK;
}
