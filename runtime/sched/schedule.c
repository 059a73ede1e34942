/* The schedule: the lifecycle's decisions as pure functions (see
 * runtime/sched/schedule.h). The interpreter (run.c) runs them for the
 * engine and for tune/. */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "common/dtype_internal.h"
#include "runtime/io/ledger_internal.h"
#include "runtime/runtime_internal.h"

static const char *const state_names[] = {"sharded", "gathering", "full", "partial"};
static const char *const op_names[HSR_SCHED_OP_COUNT] = {
    "setup",    "gather", "wait", "reshard", "release",  "grad_buf",      "reduce",   "deferred_ar",
    "progress", "retire", "norm", "optim",   "regather", "regather_wait", "grad_zero"};

const char *sched_state_name(sched_state st) { return st >= 0 && st <= HSR_SCHED_PARTIAL ? state_names[st] : "?"; }
const char *sched_op_name(sched_op op) { return op >= 0 && op < HSR_SCHED_OP_COUNT ? op_names[op] : "?"; }

hsr_status sched_create(const hsr_rt_config *cfg, int S, int R, const rt_layout *layout, const int *is_root,
                        sched_ctx **out) {
  if (!cfg || !layout || !out) return hsr_error(HSR_ERR_INVALID, "sched_create: NULL argument");
  *out = NULL;
  if (S < 1 || R < 1) return hsr_error(HSR_ERR_INVALID, "schedule: mesh %d x %d (both must be >= 1)", R, S);
  if (rt_layout_shards(layout) != S)
    return hsr_error(HSR_ERR_INVALID, "schedule: layout finalized for %d shards, S = %d", rt_layout_shards(layout), S);
  int K = cfg->reshard == HSR_RT_RESHARD_PARTIAL ? cfg->partial_k : 0;
  if (K < 0 || (cfg->reshard == HSR_RT_RESHARD_PARTIAL && (K < 1 || S % K)))
    return hsr_error(HSR_ERR_INVALID, "schedule: K = %d does not divide S = %d", K, S);
  if (cfg->micro_batches < 1)
    return hsr_error(HSR_ERR_INVALID, "schedule: %d micro-batches (valid: >= 1)", cfg->micro_batches);
  rt_sharding sh = rt_strategy_sharding(cfg->strategy);
  int outer = cfg->outer_shard == HSR_RT_OUTER_OPTIM;
  if (outer && (!sh.params || R < 2))
    return hsr_error(HSR_ERR_INVALID, "schedule: outer shard optim needs sharded parameters and R > 1 (%s, R = %d)",
                     rt_strategy_name(cfg->strategy), R);
  if (outer && rt_layout_subshards(layout) != R)
    return hsr_error(HSR_ERR_INVALID,
                     "schedule: outer shard optim needs a layout cut into R = %d pieces per shard "
                     "(it has %d)",
                     R, rt_layout_subshards(layout));
  sched_ctx *s = calloc(1, sizeof *s);
  int nu = rt_layout_num_units(layout);
  if (s) {
    s->u = calloc((size_t)nu + 1, sizeof *s->u);
    s->order = calloc((size_t)nu + 1, sizeof *s->order);
  }
  if (!s || !s->u || !s->order) {
    sched_free(s);
    return hsr_error(HSR_ERR_NOMEM, "schedule: out of memory");
  }
  s->cfg = *cfg;
  s->S = S;
  s->R = R;
  s->K = K;
  s->sharded_params = sh.params;
  s->sharded_grads = sh.grads;
  s->outer = outer;
  /* offload: the device keeps the parameters in their dtype, the master is on the host */
  s->offload = cfg->offload == HSR_RT_OFFLOAD_OPTIM && cfg->device != HSR_DEVICE_HOST;
  s->master_in_param = outer && cfg->param_dtype == HSR_F32 && !s->offload;
  s->gather_cast = sh.params && !outer && cfg->param_dtype != HSR_F32 && !s->offload;
  /* rs_only sums whole slices over its micro-batches before the one reduce-scatter over R */
  int acc_piece = outer && !(cfg->sync == HSR_RT_SYNC_RS_ONLY && cfg->micro_batches > 1);
  /* host: the reductions of the last two units stay in flight behind the
   * backward pass; CUDA and sim: the reduce stream keeps them in flight instead */
  s->in_flight = cfg->device != HSR_DEVICE_HOST ? 0 : 2;
  s->pes = dtype_size(cfg->param_dtype);
  s->res = dtype_size(cfg->reduce_dtype);
  s->nu = nu;
  for (int i = 0; i < nu; i++) {
    sunit *u = &s->u[i];
    u->L = rt_layout_unit_len(layout, i);
    u->Ls = rt_layout_shard_len(layout, i);
    u->Lo = outer ? u->Ls / (size_t)R : u->Ls;
    u->La = acc_piece ? u->Lo : u->Ls;
    u->is_root = is_root ? is_root[i] : 0;
    u->fwd_pos = -1;
    u->state = s->sharded_params ? HSR_SCHED_SHARDED : HSR_SCHED_FULL;
  }
  *out = s;
  return HSR_OK;
}

void sched_free(sched_ctx *s) {
  if (!s) return;
  free(s->u);
  free(s->order);
  free(s->q);
  free(s->act);
  free(s);
}

/* ---- emitting actions ---- */
static void emit(sched_ctx *s, sched_action a) {
  if (s->nact == s->capact) {
    int cap = s->capact ? 2 * s->capact : 32;
    sched_action *na = realloc(s->act, (size_t)cap * sizeof *na);
    if (!na) {
      s->err = hsr_error(HSR_ERR_NOMEM, "schedule: out of memory");
      return;
    }
    s->act = na;
    s->capact = cap;
  }
  s->act[s->nact++] = a;
}

static sched_action act(sched_op op, int unit) {
  return (sched_action){.op = op, .unit = unit, .group = -1};
}

static hsr_status begin(sched_ctx *s, const sched_action **acts, int *n) {
  if (!s || !acts || !n) return hsr_error(HSR_ERR_INVALID, "schedule: NULL argument");
  *acts = NULL;
  *n = 0;
  s->nact = 0;
  s->err = HSR_OK;
  return HSR_OK;
}

static hsr_status finish(sched_ctx *s, const sched_action **acts, int *n) {
  *acts = s->act;
  *n = s->err == HSR_OK ? s->nact : 0;
  return s->err;
}

static hsr_status begin_unit(sched_ctx *s, int unit, const char *what, const sched_action **acts, int *n) {
  HSR_CHECK(begin(s, acts, n));
  if (unit < 0 || unit >= s->nu)
    return hsr_error(HSR_ERR_INVALID, "schedule %s: unit %d does not exist (%d units)", what, unit, s->nu);
  return HSR_OK;
}

/* ---- gathers and prefetch ---- */
/* SHARDED or PARTIAL -> GATHERING: from the partial slice in the partial
 * group, else from the shard in the shard group; a one-rank group copies. */
static void gather(sched_ctx *s, int ui) {
  sunit *u = &s->u[ui];
  int part = u->state == HSR_SCHED_PARTIAL;
  sched_action a = act(HSR_SCHED_GATHER, ui);
  a.partial = part;
  a.group = part ? HSR_RT_GROUP_PARTIAL : HSR_RT_GROUP_SHARD;
  a.local = part ? s->K == 1 : s->S == 1;
  a.count = part ? u->L / (size_t)s->K : u->Ls;
  a.cast = !part && !a.local && s->gather_cast;
  emit(s, a);
  u->from_partial = part;
  u->from_cast = a.cast;
  u->state = HSR_SCHED_GATHERING;
  if (++s->live > s->live_peak) s->live_peak = s->live;
}

static void gather_wait(sched_ctx *s, int ui) {
  sunit *u = &s->u[ui];
  sched_action a = act(HSR_SCHED_WAIT, ui);
  a.partial = u->from_partial;
  a.group = u->from_partial ? HSR_RT_GROUP_PARTIAL : HSR_RT_GROUP_SHARD;
  a.local = u->from_partial ? s->K == 1 : s->S == 1;
  a.count = u->from_partial ? u->L / (size_t)s->K : u->Ls;
  a.cast = u->from_cast;
  emit(s, a);
  u->from_partial = 0;
  u->from_cast = 0;
  u->state = HSR_SCHED_FULL;
}

static void make_full(sched_ctx *s, int ui) {
  if (s->u[ui].state == HSR_SCHED_SHARDED || s->u[ui].state == HSR_SCHED_PARTIAL) gather(s, ui);
  if (s->u[ui].state == HSR_SCHED_GATHERING) gather_wait(s, ui);
}

static int can_prefetch(const sched_ctx *s) { return s->cfg.max_live == 0 || s->live < s->cfg.max_live; }

/* The next `prefetch` units of the recorded forward order (backward: the
 * previous ones) that are not gathered yet, while the live cap allows. A
 * forward prefetch leaves PARTIAL units alone: their backward gathers them. */
static void prefetch(sched_ctx *s, int ui, int backward) {
  if (!s->sharded_params || !s->order_fixed || s->cfg.prefetch <= 0) return;
  int pos = s->u[ui].fwd_pos;
  if (pos < 0) return;
  for (int j = 1; j <= s->cfg.prefetch; j++) {
    int p = backward ? pos - j : pos + j;
    if (p < 0 || p >= s->norder) break;
    sched_state st = s->u[s->order[p]].state;
    int want = backward ? (st == HSR_SCHED_SHARDED || st == HSR_SCHED_PARTIAL) : st == HSR_SCHED_SHARDED;
    if (!want) continue;
    if (!can_prefetch(s)) break;
    gather(s, s->order[p]);
  }
}

static hsr_status need_full(const sched_ctx *s, int ui, const char *what) {
  if (s->u[ui].state == HSR_SCHED_FULL) return HSR_OK;
  return hsr_error(HSR_ERR_STATE, "schedule %s: unit %d is %s, not full", what, ui, sched_state_name(s->u[ui].state));
}

/* ---- the lifecycle ---- */
hsr_status sched_setup(sched_ctx *s, const sched_action **acts, int *n) {
  HSR_CHECK(begin(s, acts, n));
  for (int i = 0; i < s->nu; i++) emit(s, act(HSR_SCHED_SETUP, i));
  return finish(s, acts, n);
}

hsr_status sched_forward_begin(sched_ctx *s, int ui, const sched_action **acts, int *n) {
  HSR_CHECK(begin_unit(s, ui, "forward_begin", acts, n));
  sunit *u = &s->u[ui];
  if (!s->order_fixed && u->fwd_pos < 0) { /* the first step records the forward order */
    u->fwd_pos = s->norder;
    s->order[s->norder++] = ui;
  }
  make_full(s, ui);
  prefetch(s, ui, 0);
  return finish(s, acts, n);
}

hsr_rt_reshard sched_reshard_of(const sched_ctx *s, int ui) {
  if (!s || ui < 0 || ui >= s->nu || !s->sharded_params) return HSR_RT_RESHARD_NONE;
  return s->u[ui].is_root && !s->cfg.root_reshard ? HSR_RT_RESHARD_NONE : s->cfg.reshard;
}

hsr_status sched_forward_end(sched_ctx *s, int ui, const sched_action **acts, int *n) {
  HSR_CHECK(begin_unit(s, ui, "forward_end", acts, n));
  HSR_CHECK(need_full(s, ui, "forward_end"));
  hsr_rt_reshard pol = sched_reshard_of(s, ui);
  if (pol != HSR_RT_RESHARD_NONE) {
    int part = pol == HSR_RT_RESHARD_PARTIAL;
    sched_action a = act(HSR_SCHED_RESHARD, ui);
    a.partial = part;
    a.group = part ? HSR_RT_GROUP_PARTIAL : HSR_RT_GROUP_SHARD;
    a.count = part ? s->u[ui].L / (size_t)s->K : 0;
    emit(s, a);
    s->u[ui].state = part ? HSR_SCHED_PARTIAL : HSR_SCHED_SHARDED;
    s->live--;
  }
  return finish(s, acts, n);
}

hsr_status sched_backward_begin(sched_ctx *s, int ui, const sched_action **acts, int *n) {
  HSR_CHECK(begin_unit(s, ui, "backward_begin", acts, n));
  sunit *u = &s->u[ui];
  if (u->micro >= s->cfg.micro_batches)
    return hsr_error(HSR_ERR_STATE,
                     "schedule backward_begin: unit %d already ran %d backward passes (micro-batches %d)", ui, u->micro,
                     s->cfg.micro_batches);
  make_full(s, ui);
  if (!u->has_grad) {
    emit(s, act(HSR_SCHED_GRAD_BUF, ui));
    u->has_grad = 1;
  }
  prefetch(s, ui, 1);
  return finish(s, acts, n);
}

/* A unit's recompute inside its backward window: the backward's gather
 * serves it, so it decides nothing (no gather, no prefetch in the forward
 * order: the recompute is not a forward); the unit must be FULL, which is
 * what makes a third gather impossible. */
hsr_status sched_recompute(sched_ctx *s, int ui, const sched_action **acts, int *n) {
  HSR_CHECK(begin_unit(s, ui, "recompute", acts, n));
  if (s->cfg.recompute == HSR_RT_RECOMPUTE_NONE)
    return hsr_error(HSR_ERR_STATE, "schedule recompute: unit %d, but the configuration's recompute is none", ui);
  HSR_CHECK(need_full(s, ui, "recompute"));
  return finish(s, acts, n);
}

/* Appends a reduction to the queue; sched_run starts it (REDUCE,
 * DEFERRED_AR) and removes it (RETIRE). */
static void push(sched_ctx *s, const sched_action *a) {
  if (s->qn == s->qcap) {
    int cap = s->qcap ? 2 * s->qcap : 16;
    sched_red *nq = realloc(s->q, (size_t)cap * sizeof *nq);
    if (!nq) {
      s->err = hsr_error(HSR_ERR_NOMEM, "schedule: out of memory");
      return;
    }
    s->q = nq;
    s->qcap = cap;
  }
  int deferred = a->op == HSR_SCHED_DEFERRED_AR;
  s->q[s->qn++] = (sched_red){.unit = a->unit,
                                  .deferred = deferred,
                                  .scatter = a->scatter,
                                  .local = a->local,
                                  .all_reduce = deferred || a->all_reduce,
                                  .outer = a->outer,
                                  .count = a->count};
}

/* Stage 1 in the shard group: a reduce-scatter when gradients are sharded,
 * else an all-reduce in full; the replicate stage follows unless rs_only
 * defers it to the last micro-batch: an all-reduce of the slice, or (outer
 * shard optim) its reduce-scatter over R. */
static void reduce(sched_ctx *s, int ui) {
  sched_action a = act(HSR_SCHED_REDUCE, ui);
  a.group = HSR_RT_GROUP_SHARD;
  a.local = s->S == 1;
  a.scatter = s->sharded_grads;
  a.count = a.scatter ? s->u[ui].Ls : s->u[ui].L;
  a.all_reduce = s->R > 1 && !(s->cfg.sync == HSR_RT_SYNC_RS_ONLY && s->cfg.micro_batches > 1);
  a.outer = a.all_reduce && s->outer;
  emit(s, a);
  s->u[ui].has_grad = 0;
  push(s, &a);
}

/* Retires the oldest reductions until `keep` remain, in FIFO order (qd:
 * the entries already decided; sched_run removes them). */
static void retire(sched_ctx *s, int keep) {
  while (s->qn - s->qd > keep) {
    sched_action a = act(HSR_SCHED_RETIRE, s->q[s->qd].unit);
    a.deferred = s->q[s->qd].deferred;
    a.outer = s->q[s->qd].outer;
    emit(s, a);
    s->qd++;
  }
}

hsr_status sched_backward_end(sched_ctx *s, int ui, const sched_action **acts, int *n) {
  HSR_CHECK(begin_unit(s, ui, "backward_end", acts, n));
  HSR_CHECK(need_full(s, ui, "backward_end"));
  sunit *u = &s->u[ui];
  int last = u->micro == s->cfg.micro_batches - 1;
  u->micro++;
  if (s->sharded_params) { /* a partial slice is gone once the unit is FULL again */
    emit(s, act(HSR_SCHED_RELEASE, ui));
    u->state = HSR_SCHED_SHARDED;
    s->live--;
  }
  if (last || s->cfg.sync != HSR_RT_SYNC_NONE) {
    reduce(s, ui);
    if (last && s->cfg.sync == HSR_RT_SYNC_RS_ONLY && s->cfg.micro_batches > 1 && s->R > 1) {
      retire(s, 0); /* the accumulator must hold every micro-batch's slice */
      sched_action a = act(HSR_SCHED_DEFERRED_AR, ui);
      a.group = HSR_RT_GROUP_REPLICATE;
      a.outer = s->outer;
      a.count = s->outer ? u->Lo : u->Ls; /* elements each rank receives */
      emit(s, a);
      push(s, &a);
    }
  }
  emit(s, act(HSR_SCHED_PROGRESS, -1));
  retire(s, s->in_flight);
  return finish(s, acts, n);
}

hsr_status sched_step(sched_ctx *s, const sched_action **acts, int *n) {
  HSR_CHECK(begin(s, acts, n));
  retire(s, 0);
  emit(s, act(HSR_SCHED_NORM, -1));
  s->order_fixed = 1;
  /* The next forward's first unit is updated first: its gather (the next
   * step's, sharded) or every unit's re-gather (zero1/zero2) is posted as
   * soon as the unit is updated, under the rest of the optimizer. */
  int first = s->norder > 0 ? s->order[0] : -1;
  int early = s->cfg.prefetch_step && s->cfg.prefetch > 0 && s->sharded_params && first >= 0;
  /* zero1/zero2 gather the full parameters back in the shard group; the
   * outer shard gathers each shard back from its R pieces */
  int regather = (!s->sharded_params && s->S > 1) || s->outer, waited = -1;
  int rg = s->outer ? HSR_RT_GROUP_REPLICATE : HSR_RT_GROUP_SHARD;
  for (int k = -1; k < s->nu; k++) {
    int ui = k < 0 ? first : k;
    if (ui < 0 || (k >= 0 && ui == first)) continue;
    emit(s, act(HSR_SCHED_OPTIM, ui));
    sched_action a = act(HSR_SCHED_REGATHER, ui);
    a.group = rg;
    a.count = s->outer ? s->u[ui].Lo : s->u[ui].Ls;
    if (regather) emit(s, a);
    if (k < 0 && early && s->u[ui].state == HSR_SCHED_SHARDED && can_prefetch(s)) {
      if (regather) { /* the next forward's gather reads the shard the outer gather rebuilds */
        a.op = HSR_SCHED_REGATHER_WAIT;
        emit(s, a);
        waited = ui;
      }
      gather(s, ui);
    }
  }
  for (int i = 0; regather && i < s->nu; i++) {
    if (i == waited) continue;
    sched_action a = act(HSR_SCHED_REGATHER_WAIT, i);
    a.group = rg;
    a.count = s->outer ? s->u[i].Lo : s->u[i].Ls;
    emit(s, a);
  }
  /* Like the re-gathers, the step-end prefetch completes before the step
   * returns (it ran under the rest of the optimizer): a step's counters then
   * hold whole collectives, never the part of one that had moved so far. */
  if (early && s->u[first].state == HSR_SCHED_GATHERING) gather_wait(s, first);
  return finish(s, acts, n);
}

hsr_status sched_zero_grad(sched_ctx *s, const sched_action **acts, int *n) {
  HSR_CHECK(begin(s, acts, n));
  retire(s, 0);
  for (int i = 0; i < s->nu; i++) {
    sched_action a = act(HSR_SCHED_GRAD_ZERO, i);
    a.free_grad = s->u[i].has_grad;
    emit(s, a);
    s->u[i].has_grad = 0;
    s->u[i].micro = 0;
  }
  return finish(s, acts, n);
}

hsr_status sched_settle(sched_ctx *s, const sched_action **acts, int *n) {
  HSR_CHECK(begin(s, acts, n));
  for (int i = 0; i < s->nu; i++)
    if (s->u[i].state == HSR_SCHED_GATHERING) gather_wait(s, i);
  return finish(s, acts, n);
}

/* ---- buffers ---- */
mem_cat sched_buf_cat(sched_buf b) {
  static const mem_cat cat[HSR_SCHED_BUF_COUNT] = {
      HSR_MEM_MASTER,       HSR_MEM_MOMENT_M,     HSR_MEM_MOMENT_V,  HSR_MEM_GRAD_SHARD,    HSR_MEM_PARAM_SHARD,
      HSR_MEM_HOST_STAGING, HSR_MEM_HOST_STAGING, HSR_MEM_FULL_UNIT, HSR_MEM_PARTIAL_SLICE, HSR_MEM_RS_BUF,
      HSR_MEM_STAGING,      HSR_MEM_AR_BUF,       HSR_MEM_STAGING,   HSR_MEM_STAGING,       HSR_MEM_AR_BUF};
  return b >= 0 && b < HSR_SCHED_BUF_COUNT ? cat[b] : HSR_MEM_STAGING;
}

mem_cat hsr_sched_cat_of(const sched_ctx *s, sched_buf b) {
  if (s && s->offload) switch (b) {
    case HSR_SCHED_BUF_MASTER: return HSR_MEM_HOST_MASTER;
    case HSR_SCHED_BUF_MOMENT_M: return HSR_MEM_HOST_MOMENT_M;
    case HSR_SCHED_BUF_MOMENT_V: return HSR_MEM_HOST_MOMENT_V;
    case HSR_SCHED_BUF_GRAD_SHARD: return HSR_MEM_HOST_GRAD_SHARD;
    default: break;
    }
  return sched_buf_cat(b);
}

size_t sched_buf_bytes(const sched_ctx *s, sched_buf b, int unit) {
  if (!s || unit < 0 || unit >= s->nu) return 0;
  const sunit *u = &s->u[unit];
  size_t n = 0;
  switch (b) {
  case HSR_SCHED_BUF_MASTER:
  case HSR_SCHED_BUF_MOMENT_M:
  case HSR_SCHED_BUF_MOMENT_V: n = u->Lo * 4; break;
  case HSR_SCHED_BUF_GRAD_SHARD:
  case HSR_SCHED_BUF_ACC_STAGE: n = u->La * 4; break;
  case HSR_SCHED_BUF_PARAM: n = (s->sharded_params ? u->Ls : u->L) * s->pes; break;
  case HSR_SCHED_BUF_PARAM_UP: n = u->Lo * s->pes; break;
  case HSR_SCHED_BUF_GRAD_DOWN: n = u->La * s->res; break; /* rs_only's deferred stage sends the La accumulator up */
  case HSR_SCHED_BUF_GATHER_IN: n = u->Ls * s->pes; break;
  case HSR_SCHED_BUF_OUTER_SLICE: n = u->Lo * s->res; break;
  case HSR_SCHED_BUF_FULL: n = u->L * s->pes; break;
  case HSR_SCHED_BUF_PARTIAL: n = s->K ? u->L / (size_t)s->K * s->pes : 0; break;
  case HSR_SCHED_BUF_GRAD: n = u->L * 4; break;
  case HSR_SCHED_BUF_REDUCE_STAGE: n = u->L * s->res; break;
  case HSR_SCHED_BUF_SLICE: n = u->Ls * s->res; break;
  default: return 0;
  }
  return n ? n : 64;
}

static void op(const sched_ctx *s, int get, sched_buf b, int unit, sched_bufop *out, int *n) {
  out[(*n)++] = (sched_bufop){get, b, hsr_sched_cat_of(s, b), sched_buf_bytes(s, b, unit)};
}

hsr_status sched_buffers(const sched_ctx *s, const sched_action *a, sched_bufop *out, int *n) {
  if (!s || !a || !out || !n) return hsr_error(HSR_ERR_INVALID, "sched_buffers: NULL argument");
  *n = 0;
  int u = a->unit, staged = s->cfg.reduce_dtype != HSR_F32;
  int acc_stage = staged && !s->offload; /* offload: the host casts what GRAD_DOWN received */
  switch (a->op) {
  case HSR_SCHED_SETUP:
    for (int b = HSR_SCHED_BUF_MASTER; b <= HSR_SCHED_BUF_LAST_HELD; b++)
      if (sched_holds(s, (sched_buf)b)) op(s, 1, (sched_buf)b, u, out, n);
    break;
  case HSR_SCHED_GATHER:
    if (a->cast) op(s, 1, HSR_SCHED_BUF_GATHER_IN, u, out, n);
    op(s, 1, HSR_SCHED_BUF_FULL, u, out, n);
    break;
  case HSR_SCHED_WAIT:
    if (a->cast) op(s, 0, HSR_SCHED_BUF_GATHER_IN, u, out, n);
    if (a->partial) op(s, 0, HSR_SCHED_BUF_PARTIAL, u, out, n);
    break;
  case HSR_SCHED_RESHARD:
    if (a->partial) op(s, 1, HSR_SCHED_BUF_PARTIAL, u, out, n);
    op(s, 0, HSR_SCHED_BUF_FULL, u, out, n);
    break;
  case HSR_SCHED_RELEASE: op(s, 0, HSR_SCHED_BUF_FULL, u, out, n); break;
  case HSR_SCHED_GRAD_BUF: op(s, 1, HSR_SCHED_BUF_GRAD, u, out, n); break;
  case HSR_SCHED_REDUCE:
    if (staged) {
      op(s, 1, HSR_SCHED_BUF_REDUCE_STAGE, u, out, n);
      op(s, 0, HSR_SCHED_BUF_GRAD, u, out, n);
    }
    op(s, 1, HSR_SCHED_BUF_SLICE, u, out, n);
    if (a->outer) op(s, 1, HSR_SCHED_BUF_OUTER_SLICE, u, out, n);
    break;
  case HSR_SCHED_DEFERRED_AR:
    op(s, 1, HSR_SCHED_BUF_SLICE, u, out, n);
    if (a->outer) op(s, 1, HSR_SCHED_BUF_OUTER_SLICE, u, out, n);
    break;
  case HSR_SCHED_RETIRE:
    if (!a->deferred) {
      if (acc_stage) {
        op(s, 1, HSR_SCHED_BUF_ACC_STAGE, u, out, n);
        op(s, 0, HSR_SCHED_BUF_ACC_STAGE, u, out, n);
      }
      op(s, 0, staged ? HSR_SCHED_BUF_REDUCE_STAGE : HSR_SCHED_BUF_GRAD, u, out, n);
    }
    op(s, 0, HSR_SCHED_BUF_SLICE, u, out, n);
    if (a->outer) op(s, 0, HSR_SCHED_BUF_OUTER_SLICE, u, out, n);
    break;
  case HSR_SCHED_GRAD_ZERO:
    if (a->free_grad) op(s, 0, HSR_SCHED_BUF_GRAD, u, out, n);
    break;
  default: break;
  }
  return HSR_OK;
}

int sched_holds(const sched_ctx *s, sched_buf b) {
  if (!s || b < HSR_SCHED_BUF_MASTER || b > HSR_SCHED_BUF_LAST_HELD) return 0;
  if (b == HSR_SCHED_BUF_MASTER) return !s->master_in_param;
  if (b == HSR_SCHED_BUF_PARAM) return !s->sharded_params || s->outer || s->offload;
  if (b == HSR_SCHED_BUF_PARAM_UP || b == HSR_SCHED_BUF_GRAD_DOWN) return s->offload;
  return 1;
}

int hsr_sched_offload(const sched_ctx *s) { return s ? s->offload : 0; }

size_t sched_piece_len(const sched_ctx *s, int unit) { return s && unit >= 0 && unit < s->nu ? s->u[unit].Lo : 0; }
size_t sched_acc_len(const sched_ctx *s, int unit) { return s && unit >= 0 && unit < s->nu ? s->u[unit].La : 0; }
int sched_outer(const sched_ctx *s) { return s ? s->outer : 0; }

/* ---- getters ---- */
int sched_in_flight(const sched_ctx *s) { return s ? s->in_flight : 0; }
int sched_num_units(const sched_ctx *s) { return s ? s->nu : 0; }
sched_state sched_state_of(const sched_ctx *s, int unit) {
  return s && unit >= 0 && unit < s->nu ? s->u[unit].state : HSR_SCHED_SHARDED;
}
int sched_micro(const sched_ctx *s, int unit) { return s && unit >= 0 && unit < s->nu ? s->u[unit].micro : 0; }
int sched_live(const sched_ctx *s) { return s ? s->live : 0; }
int sched_live_peak(const sched_ctx *s) { return s ? s->live_peak : 0; }
int sched_queued(const sched_ctx *s) { return s ? s->qn - s->qd : 0; }
int sched_started(const sched_ctx *s) { return s ? s->qs : 0; }
const int *sched_order(const sched_ctx *s, int *n) {
  if (n) *n = s ? s->norder : 0;
  return s ? s->order : NULL;
}
