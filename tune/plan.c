/* The planner: every layout the mesh planner accepts, evaluated, filtered by
 * the memory budget and ranked by predicted step time. The mesh rules are
 * mesh_plan's own: a shard size or partial group it refuses is not a
 * candidate. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/grow.h"
#include "tune/tune.h"
#include "common/common_internal.h"

hsr_status tune_space_default(tune_space *s) {
  if (!s) return hsr_error(HSR_ERR_INVALID, "tune_space_default: NULL argument");
  memset(s, 0, sizeof *s);
  s->max_prefetch = 2;
  s->prefetch_step = 1;
  s->micro_batches = 1;
  s->param_dtype = HSR_F32;
  s->reduce_dtype = HSR_F32;
  s->only_strategy = -1;
  s->only_outer = -1;
  return HSR_OK;
}

typedef struct plan_ctx {
  const hsr_cluster *c;
  const tune_model *m;
  const tune_net *net;
  const tune_space *sp;
  tune_plan *p;
  int cap;
} plan_ctx;

static hsr_status uncertainty(plan_ctx *x, const tune_model *m, const hsr_rt_config *cfg, int S, int R,
                              const tune_shape *sh, tune_result *r);

static hsr_status add_one(plan_ctx *x, const tune_model *m, const hsr_rt_config *cfg, int S, int R,
                          const tune_shape *sh) {
  tune_plan *p = x->p;
  HSR_CHECK(grow_array(&p->cand, &x->cap, p->n, sizeof *p->cand, 256, "tune"));
  tune_result *r = &p->cand[p->n];
  HSR_CHECK(tune_eval(m, x->net, cfg, S, R, sh, r));
  HSR_CHECK(uncertainty(x, m, cfg, S, R, sh, r));
  double budget = x->sp->mem_budget;
  if (budget > 0 && r->peak_total > budget) {
    const double G = 1024.0 * 1024 * 1024;
    char act[96] = "";
    if (m->act_by_policy) /* the shape's activations, per policy */
      snprintf(act, sizeof act, " + activations %.2f GiB with recompute %s", r->act_bytes / G,
               hsr_rt_recompute_name(r->cfg.recompute));
    else if (m->act_bytes > 0)
      snprintf(act, sizeof act, " + activations given");
    r->feasible = 0;
    snprintf(r->reason, sizeof r->reason,
             "over the memory budget: needs %.2f GiB per rank (persistent %.2f GiB + transient peak %.2f GiB in "
             "%s%s), %.2f GiB over %.2f GiB",
             r->peak_total / G, (double)r->persistent / G, (double)r->transient_peak / G,
             phase_name(r->peak_where.phase), act, (r->peak_total - budget) / G, budget / G);
    double over = r->peak_total - budget;
    if (p->min_over_budget == 0 || over < p->min_over_budget) p->min_over_budget = over;
  }
  p->n++;
  if (r->feasible) p->nfeasible++;
  return HSR_OK;
}

/* One layout, with every recompute policy when the model has activations
 * per policy (cheapest in time first). */
static hsr_status add(plan_ctx *x, const hsr_rt_config *cfg, int S, int R, const tune_shape *sh) {
  if (!x->m->act_by_policy) return add_one(x, x->m, cfg, S, R, sh);
  static const hsr_rt_recompute order[] = {HSR_RT_RECOMPUTE_NONE, HSR_RT_RECOMPUTE_SELECTIVE, HSR_RT_RECOMPUTE_FULL};
  for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
    hsr_rt_config c = *cfg;
    c.recompute = order[k];
    HSR_CHECK(add_one(x, x->m, &c, S, R, sh));
  }
  return HSR_OK;
}

/* How far the step moves if each term is one residual off: each tier's
 * collectives slower by its residual, compute longer by its own, and the
 * step's own residual in the probes. Nothing fitted (built-in figures): no
 * residuals, no uncertainty. */
static hsr_status uncertainty(plan_ctx *x, const tune_model *m, const hsr_rt_config *cfg, int S, int R,
                              const tune_shape *sh, tune_result *r) {
  const tune_net *n = x->net;
  tune_result q;
  memset(r->unc_ms, 0, sizeof r->unc_ms);
  for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
    if (n->rel_rms[t] <= 0) continue;
    tune_net np = *n;
    np.slow[t] *= 1 + n->rel_rms[t];
    HSR_CHECK(tune_eval(m, &np, cfg, S, R, sh, &q));
    r->unc_ms[t == HSR_TUNE_INTRA ? HSR_TUNE_UNC_INTRA : HSR_TUNE_UNC_CROSS] = q.step_ms - r->step_ms;
  }
  if (n->compute_rel_rms > 0) {
    tune_model mp = *m;
    double *uf = NULL;
    if (mp.unit_fwd_ms) {
      if (!(uf = malloc(sizeof *uf * (size_t)mp.units))) return hsr_error(HSR_ERR_NOMEM, "tune: out of memory");
      for (int u = 0; u < mp.units; u++) uf[u] = mp.unit_fwd_ms[u] * (1 + n->compute_rel_rms);
      mp.unit_fwd_ms = uf;
    }
    mp.fwd_ms *= 1 + n->compute_rel_rms;
    hsr_status st = tune_eval(&mp, n, cfg, S, R, sh, &q);
    free(uf);
    HSR_CHECK(st);
    r->unc_ms[HSR_TUNE_UNC_COMPUTE] = q.step_ms - r->step_ms;
  }
  r->unc_ms[HSR_TUNE_UNC_STEP] = n->step_rel_rms * r->step_ms;
  double ss = 0;
  for (int k = 0; k < HSR_TUNE_UNC_TERMS; k++) ss += r->unc_ms[k] * r->unc_ms[k];
  r->step_pm_ms = sqrt(ss);
  return HSR_OK;
}

const char *tune_unc_name(int term) {
  static const char *const n[HSR_TUNE_UNC_TERMS] = {"intra-node collectives", "cross-node collectives", "compute",
                                                    "the step's residual in the probes"};
  return term >= 0 && term < HSR_TUNE_UNC_TERMS ? n[term] : "?";
}

/* One sigma of the difference of two layouts' steps: the terms they share
 * (the same links, the same compute) move both, so what counts is how
 * differently; the step residual is each layout's own. */
static double diff_sigma(const tune_result *a, const tune_result *b) {
  double ss = 0;
  for (int k = 0; k < HSR_TUNE_UNC_STEP; k++) ss += (a->unc_ms[k] - b->unc_ms[k]) * (a->unc_ms[k] - b->unc_ms[k]);
  ss += a->unc_ms[HSR_TUNE_UNC_STEP] * a->unc_ms[HSR_TUNE_UNC_STEP] +
        b->unc_ms[HSR_TUNE_UNC_STEP] * b->unc_ms[HSR_TUNE_UNC_STEP];
  return sqrt(ss);
}

/* After ranking: a candidate ties with the best faster one it cannot be
 * told apart from (the difference within one sigma of it, or within 0.2%:
 * the ranking's own resolution). */
static void ties(tune_plan *p) {
  for (int i = 0; i < p->nfeasible; i++) {
    tune_result *r = &p->cand[i];
    r->tie = -1;
    for (int j = 0; j < i && r->tie < 0; j++) {
      double d = r->step_ms - p->cand[j].step_ms;
      if (d <= diff_sigma(r, &p->cand[j]) || d <= 0.002 * p->cand[j].step_ms) r->tie = j;
    }
  }
  for (int i = p->nfeasible; i < p->n; i++) p->cand[i].tie = -1;
}

hsr_status tune_separating_term(const tune_result *a, const tune_result *b, int *term) {
  if (!a || !b || !term) return hsr_error(HSR_ERR_INVALID, "tune_separating_term: NULL argument");
  double best = -1;
  *term = HSR_TUNE_UNC_STEP;
  for (int k = 0; k < HSR_TUNE_UNC_STEP; k++) {
    double d = fabs(a->unc_ms[k] - b->unc_ms[k]);
    if (d > best) best = d, *term = k;
  }
  double own = sqrt(a->unc_ms[HSR_TUNE_UNC_STEP] * a->unc_ms[HSR_TUNE_UNC_STEP] +
                    b->unc_ms[HSR_TUNE_UNC_STEP] * b->unc_ms[HSR_TUNE_UNC_STEP]);
  if (own > best) *term = HSR_TUNE_UNC_STEP;
  return HSR_OK;
}

static hsr_rt_config base_cfg(const tune_space *sp, hsr_rt_strategy s) {
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = s;
  c.param_dtype = sp->param_dtype;
  c.reduce_dtype = sp->reduce_dtype;
  c.micro_batches = sp->micro_batches > 0 ? sp->micro_batches : 1;
  c.prefetch = 0;
  c.prefetch_step = 0;
  c.poison = 0;
  return c;
}

/* Every sync mode that differs with micro-batches (rs_only only with replicas). */
static hsr_status with_syncs(plan_ctx *x, hsr_rt_config c, int S, int R, const tune_shape *sh) {
  int modes = c.micro_batches > 1 ? 3 : 1;
  for (int k = 0; k < modes; k++) {
    if (k == HSR_RT_SYNC_RS_ONLY && R == 1) continue;
    c.sync = (hsr_rt_sync)k;
    HSR_CHECK(add(x, &c, S, R, sh));
  }
  return HSR_OK;
}

/* The strategy filter; the outer shard optim exists only for hybrid. */
static int wanted(const plan_ctx *x, hsr_rt_strategy s) {
  if (x->sp->only_outer == HSR_RT_OUTER_OPTIM && s != HSR_RT_HYBRID) return 0;
  return x->sp->only_strategy < 0 || x->sp->only_strategy == (int)s;
}

/* fsdp / hybrid over reshard policies and prefetch depths. */
static hsr_status sharded(plan_ctx *x, int S, int R, const tune_shape *sh) {
  hsr_rt_strategy s = R == 1 ? HSR_RT_FSDP : HSR_RT_HYBRID;
  if (!wanted(x, s)) return HSR_OK;
  for (int K = 0; K < S; K++) { /* 0: full and none; K > 1: partial:K where the planner accepts it */
    if (K == 1 || (K && S % K)) continue;
    tune_shape ksh[HSR_RT_GROUP_COUNT];
    memcpy(ksh, sh, sizeof ksh);
    if (K) {
      hsr_mesh *mk = NULL;
      mesh_request req = {S, 0, K};
      if (mesh_plan(x->c, &req, &mk) != HSR_OK) continue;
      hsr_status st = tune_mesh_shapes(x->c, mk, ksh);
      mesh_free(mk);
      HSR_CHECK(st);
    }
    for (int outer = HSR_RT_OUTER_NONE; outer <= (s == HSR_RT_HYBRID ? HSR_RT_OUTER_OPTIM : HSR_RT_OUTER_NONE);
         outer++) {
      if (s == HSR_RT_HYBRID && x->sp->only_outer >= 0 && outer != x->sp->only_outer) continue;
      for (int pol = 0; pol < (K ? 1 : 2); pol++)
        for (int d = 0; d <= x->sp->max_prefetch; d++) {
          hsr_rt_config c = base_cfg(x->sp, s);
          c.reshard = K ? HSR_RT_RESHARD_PARTIAL : pol ? HSR_RT_RESHARD_NONE : HSR_RT_RESHARD_FULL;
          c.partial_k = K;
          c.prefetch = d;
          c.prefetch_step = d > 0 && x->sp->prefetch_step;
          c.outer_shard = (hsr_rt_outer)outer;
          HSR_CHECK(with_syncs(x, c, S, R, ksh));
        }
    }
  }
  return HSR_OK;
}

static hsr_status one_shard(plan_ctx *x, int S) {
  int W = cluster_world(x->c), R = W / S;
  hsr_mesh *m = NULL;
  mesh_request req = {S, 0, 0};
  if (mesh_plan(x->c, &req, &m) != HSR_OK) return HSR_OK; /* not a valid S: the planner says why */
  tune_shape sh[HSR_RT_GROUP_COUNT];
  hsr_status st = tune_mesh_shapes(x->c, m, sh);
  mesh_free(m);
  HSR_CHECK(st);
  if (S == 1) {
    if (!wanted(x, HSR_RT_DDP)) return HSR_OK;
    return with_syncs(x, base_cfg(x->sp, HSR_RT_DDP), S, R, sh);
  }
  for (int s = HSR_RT_ZERO1; s <= HSR_RT_ZERO2; s++)
    if (wanted(x, (hsr_rt_strategy)s)) HSR_CHECK(with_syncs(x, base_cfg(x->sp, (hsr_rt_strategy)s), S, R, sh));
  return sharded(x, S, R, sh);
}

/* Step times within 0.2% of each other rank as equal (buckets of a fixed
 * ratio keep the order total); then less memory, less prefetch, fewer bytes
 * across nodes. */
static long bucket(double ms) { return ms > 0 ? (long)floor(log(ms) / log(1.002)) : LONG_MIN; }

static int by_rank(const void *a, const void *b) {
  const tune_result *x = a, *y = b;
  if (x->feasible != y->feasible) return y->feasible - x->feasible;
  if (x->feasible) {
    long bx = bucket(x->step_ms), by = bucket(y->step_ms);
    if (bx != by) return bx < by ? -1 : 1;
    if (x->peak_total != y->peak_total) return x->peak_total < y->peak_total ? -1 : 1;
    if (x->cfg.prefetch != y->cfg.prefetch) return x->cfg.prefetch - y->cfg.prefetch;
    return (x->fabric_all_ranks > y->fabric_all_ranks) - (x->fabric_all_ranks < y->fabric_all_ranks);
  }
  return (x->peak_total > y->peak_total) - (x->peak_total < y->peak_total);
}

hsr_status tune_plan_run(const hsr_cluster *c, const tune_model *m, const tune_net *net,
                         const tune_space *sp, tune_plan *out) {
  if (!c || !m || !net || !sp || !out) return hsr_error(HSR_ERR_INVALID, "tune_plan_run: NULL argument");
  memset(out, 0, sizeof *out);
  double t0 = clock_s();
  struct timespec c0, c1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  int W = cluster_world(c);
  out->world = W;
  out->nodes = cluster_num_nodes(c);
  out->domain_size = cluster_domain_size(c);
  int on0 = 0;
  for (int r = 0; r < W; r++) on0 += cluster_rank_node(c, r) == cluster_rank_node(c, 0);
  out->per_node = on0;
  if (sp->only_shard > 0) { /* the mesh planner's own message: which rule, and the valid S */
    hsr_mesh *mm = NULL;
    mesh_request req = {sp->only_shard, 0, 0};
    HSR_CHECK(mesh_plan(c, &req, &mm)); /* says which rule and the valid S */
    mesh_free(mm);
  }
  plan_ctx x = {c, m, net, sp, out, 0};
  out->recompute_searched = m->act_by_policy;
  out->mem_budget = sp->mem_budget;
  hsr_status st = HSR_OK;
  for (int S = 1; S <= W && st == HSR_OK; S++)
    if (W % S == 0 && (sp->only_shard <= 0 || S == sp->only_shard)) st = one_shard(&x, S);
  if (st != HSR_OK) {
    tune_plan_free(out);
    return st;
  }
  if (out->n == 0)
    return hsr_error(HSR_ERR_INVALID, "tune: no layout to evaluate (strategy, shard and outer-shard filters)");
  qsort(out->cand, (size_t)out->n, sizeof *out->cand, by_rank);
  ties(out);
  out->plan_s = clock_s() - t0;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  out->plan_cpu_s = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
  return HSR_OK;
}

void tune_plan_free(tune_plan *p) {
  if (!p) return;
  free(p->cand);
  memset(p, 0, sizeof *p);
}

const char *tune_label(const tune_result *r, char *buf, size_t len) {
  if (!r || !buf || !len) return "";
  char res[24] = "";
  int sharded = rt_strategy_sharding(r->cfg.strategy).params;
  if (sharded) {
    if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
      snprintf(res, sizeof res, " partial:%d", r->cfg.partial_k);
    else
      snprintf(res, sizeof res, " %s", r->cfg.reshard == HSR_RT_RESHARD_NONE ? "none" : "full");
  }
  char pre[16] = "", sync[24] = "";
  if (sharded) snprintf(pre, sizeof pre, " p%d", r->cfg.prefetch);
  if (r->cfg.micro_batches > 1) snprintf(sync, sizeof sync, " sync:%s", rt_sync_name(r->cfg.sync));
  char rc[24] = "";
  if (r->cfg.recompute != HSR_RT_RECOMPUTE_NONE)
    snprintf(rc, sizeof rc, " recompute:%s", hsr_rt_recompute_name(r->cfg.recompute));
  snprintf(buf, len, "%s %dx%d%s%s%s%s%s", rt_strategy_name(r->cfg.strategy), r->R, r->S, res, pre, sync,
           r->cfg.outer_shard == HSR_RT_OUTER_OPTIM ? " outer:optim" : "", rc);
  return buf;
}
