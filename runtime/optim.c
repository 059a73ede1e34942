/* The optimizer step: the global gradient norm and clip factor, AdamW on
 * each unit's local slice, and the gathers the schedule posts under it (the
 * zero1/zero2 re-gather of the updated slices, the step-end prefetch of the
 * next forward's first unit); and zero_grad. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

hsr_status rt_snapshot_counts(hsr_rt *rt, hsr_rt_step_info *info) {
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++) {
      hsr_comm_counter c = {0};
      if (gc[g]) HSR_CHECK(hsr_comm_counters(gc[g], (hsr_op)op, &c));
      const hsr_comm_counter *b = &rt->base[g][op];
      if (info) {
        info->calls[g][op] = c.calls - b->calls;
        info->comm[g][op] = (hsr_comm_counter){c.calls - b->calls,
                                               c.bytes_sent - b->bytes_sent,
                                               c.bytes_recv - b->bytes_recv,
                                               c.fabric_sent - b->fabric_sent,
                                               c.fabric_recv - b->fabric_recv,
                                               c.bytes_full - b->bytes_full};
      }
      rt->base[g][op] = c;
    }
  return HSR_OK;
}

/* The optimizer's progress through one step: its clip factor and the open
 * span of optimizer work that a posted gather interrupts. */
typedef struct opt_run {
  double norm, coef;
  uint64_t t0, now;
  int open, dropped; /* dropped: the outer reduction voted the step down */
} opt_run;

/* The reduction over replicas outside the job (cfg.outer): it sees the
 * finished gradient shards (the reduce stream drained) outside the optimizer
 * span, and may drop the step. */
static hsr_status outer_reduce(hsr_rt *rt, opt_run *o) {
  if (!rt->cfg.outer) return HSR_OK;
  HSR_CHECK(rt_dev_sync(rt->dv, RS(rt)));
  uint64_t a = hsr_clock_ns();
  rt_event(rt, RT_EV_OPTIM, -1, -1, 0, o->t0, a);
  int commit = 1;
  hsr_status st = rt->cfg.outer(rt, rt->cfg.outer_ctx, &commit);
  o->t0 = hsr_clock_ns();
  rt_obs_wait(rt->obs, o->t0 - a);
  if (st != HSR_OK)
    return hsr_error(st, "step %lld: the outer reduction failed: %s", (long long)rt->step + 1, hsr_last_error());
  o->dropped = !commit;
  return HSR_OK;
}

/* The synchronized gradient is complete: the caller's hook sees it (outside
 * the optimizer span). */
static hsr_status grad_hook(hsr_rt *rt, opt_run *o) {
  rt->grad_ready = 1;
  if (!rt->cfg.grad_hook) return HSR_OK;
  rt_event(rt, RT_EV_OPTIM, -1, -1, 0, o->t0, hsr_clock_ns());
  hsr_status st = rt->cfg.grad_hook(rt, rt->cfg.grad_hook_ctx);
  o->t0 = hsr_clock_ns();
  if (st != HSR_OK)
    return hsr_error(st, "step %lld: the gradient hook failed: %s", (long long)rt->step + 1, hsr_last_error());
  return HSR_OK;
}

/* Global norm of the averaged gradient, and the clip factor. */
static hsr_status grad_norm(hsr_rt *rt, opt_run *o) {
  o->t0 = hsr_clock_ns();
  o->open = 1;
  int M = rt->cfg.micro_batches;
  double ss = 0, *sq;
  /* on the reduce stream, behind the accumulations; partial sums land in host
   * slots and are added in unit order (the same order on host and device) */
  HSR_CHECK(rt_dev_slots(rt->dv, rt->nunits, &sq));
  for (int i = 0; i < rt->nunits && M > 1; i++) {
    rt_unit *u = &rt->units[i];
    HSR_CHECK(hsr_kernels_scale(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, 1.0 / M));
  }
  HSR_CHECK(outer_reduce(rt, o));
  if (o->dropped) { /* no norm, no update: the step stays where it was */
    o->norm = 0, o->coef = 1.0;
    return HSR_OK;
  }
  HSR_CHECK(grad_hook(rt, o));
  for (int i = 0; i < rt->nunits; i++) {
    rt_unit *u = &rt->units[i];
    sq[i] = 0;
    HSR_CHECK(hsr_kernels_sumsq(rt->dev, RS(rt), u->Ls, u->gshard, HSR_F32, &sq[i]));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, RS(rt))); /* the one host wait of a device step: the clip factor */
  for (int i = 0; i < rt->nunits; i++) ss += sq[i];
  /* the slices of one shard group tile the gradient; replicas hold equal slices */
  if (rt->S > 1) {
    uint64_t a = hsr_clock_ns();
    rt_event(rt, RT_EV_OPTIM, -1, -1, 0, o->t0, a);
    HSR_CHECK(rt_dev_allreduce_f64(rt->dv, rt->shard_c, &ss));
    o->t0 = hsr_clock_ns();
    rt_obs_wait(rt->obs, o->t0 - a);
    rt_event(rt, RT_EV_ALLREDUCE, -1, HSR_RT_GROUP_SHARD, sizeof ss, a, o->t0);
  }
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), RS(rt))); /* the optimizer (compute) reads the reduced gradient */
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt))); /* and overwrites shards that a queued gather may still read */
  o->norm = sqrt(ss);
  o->coef = 1.0;
  if (rt->cfg.clip > 0 && o->norm > rt->cfg.clip) o->coef = rt->cfg.clip / (o->norm + 1e-6);
  rt->step++;
  return HSR_OK;
}

/* AdamW on this rank's slice of every parameter of unit ui. */
static hsr_status adamw_unit(hsr_rt *rt, int ui, double coef) {
  rt_unit *u = &rt->units[ui];
  size_t lo = (size_t)rt->srank * u->Ls;
  for (int j = rt->ubeg[ui]; j < rt->ubeg[ui + 1]; j++) {
    hsr_rt_param_info p;
    HSR_CHECK(hsr_rt_layout_param(rt->layout, rt->uparam[j], &p));
    size_t a, b;
    if (!rt_local_range(rt, u, p.offset, p.numel, &a, &b)) continue;
    const hsr_rt_opt_group *g = &rt->cfg.groups[p.group];
    hsr_adamw_hparams hp = {g->lr, g->beta1, g->beta2, g->eps, g->weight_decay, rt->step, (float)coef};
    void *out = rt->sharded_params ? (char *)u->shard + (a - lo) * rt->pes : (char *)u->full + a * rt->pes;
    size_t o = a - lo;
    HSR_CHECK(hsr_kernels_adamw(rt->dev, CS(rt), b - a, u->master + o, u->m + o, u->v + o, u->gshard + o, HSR_F32, out,
                                rt->cfg.param_dtype, &hp));
  }
  return HSR_OK;
}

/* zero1/zero2: every rank updated its slice of the full parameters in place;
 * the shard group gathers them back (waited for at REGATHER_WAIT). */
static hsr_status regather(hsr_rt *rt, const hsr_sched_action *a) {
  rt_unit *u = &rt->units[a->unit];
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt))); /* the gather reads what the optimizer wrote */
  HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, GS(rt)));
  u->gt0 = hsr_clock_ns();
  hsr_status st = hsr_comm_allgather(rt->shard_c, (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes, u->full,
                                     a->count, rt->cfg.param_dtype, &u->greq);
  rt_obs_time(rt->obs, RT_T_POST, hsr_clock_ns() - u->gt0);
  return st;
}

static hsr_status regather_wait(hsr_rt *rt, const hsr_sched_action *a) {
  rt_unit *u = &rt->units[a->unit];
  if (!u->greq) return HSR_OK;
  uint64_t t0, t1;
  hsr_status st = rt_wait_req(rt, u->greq, u->gt0, &t0, &t1);
  u->greq = NULL;
  rt_event(rt, RT_EV_GATHER, a->unit, a->group, a->count * rt->pes, t0, t1);
  return st;
}

static void optim_close(hsr_rt *rt, opt_run *o, uint64_t end) {
  if (o->open) rt_event(rt, RT_EV_OPTIM, -1, -1, 0, o->t0, end);
  o->open = 0;
}

/* One action of the step. A gather posted under the optimizer closes the
 * optimizer span at the end of the update before it and opens the next one. */
static hsr_status step_action(hsr_rt *rt, const hsr_sched_action *a, opt_run *o) {
  hsr_status st = HSR_OK;
  switch (a->op) {
  case HSR_SCHED_RETIRE: return rt_red_retire(rt, a);
  case HSR_SCHED_NORM: return grad_norm(rt, o);
  case HSR_SCHED_OPTIM:
    st = o->dropped ? HSR_OK : adamw_unit(rt, a->unit, o->coef);
    o->now = hsr_clock_ns();
    return st;
  case HSR_SCHED_GATHER: /* the next step's first gather (the step-end prefetch) */
  case HSR_SCHED_REGATHER:
    optim_close(rt, o, o->now);
    st = a->op == HSR_SCHED_GATHER ? rt_gather_start(rt, a) : regather(rt, a);
    o->t0 = hsr_clock_ns();
    o->open = 1;
    return st;
  case HSR_SCHED_REGATHER_WAIT: optim_close(rt, o, hsr_clock_ns()); return regather_wait(rt, a);
  case HSR_SCHED_WAIT: optim_close(rt, o, hsr_clock_ns()); return rt_gather_wait(rt, a); /* the step-end prefetch */
  default:
    return hsr_error(HSR_ERR_INTERNAL, "runtime: the schedule's step holds a %s action", hsr_sched_op_name(a->op));
  }
}

hsr_status rt_step(hsr_rt *rt, hsr_rt_step_info *info) {
  HSR_CHECK(hsr_rt_commit(rt));
  hsr_fault_hook_hit(&rt->hook, "step");
  rt_obs_phase(rt->obs, HSR_PHASE_STEP, -1);
  for (int i = 0; i < rt->nunits; i++) {
    rt_unit *u = &rt->units[i];
    int micro = hsr_sched_micro(rt->sched, i);
    if (u->in_fwd || u->in_bwd)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' is still inside its %s window", u->name,
                       u->in_fwd ? "forward" : "backward");
    if (micro != rt->cfg.micro_batches)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' ran %d backward pass(es) this step, expected %d (micro-batches)",
                       u->name, micro, rt->cfg.micro_batches);
  }
  const hsr_sched_action *acts;
  int n, regathered = 0;
  HSR_CHECK(hsr_sched_step(rt->sched, &acts, &n));
  opt_run o = {0};
  hsr_status st = HSR_OK;
  for (int i = 0; i < n; i++) {
    regathered |= acts[i].op == HSR_SCHED_REGATHER_WAIT;
    if (st == HSR_OK) {
      st = step_action(rt, &acts[i], &o);
    } else if (acts[i].op == HSR_SCHED_REGATHER_WAIT || acts[i].op == HSR_SCHED_WAIT) {
      /* gathers already posted complete even after an error */
      hsr_status w = acts[i].op == HSR_SCHED_WAIT ? rt_gather_wait(rt, &acts[i]) : regather_wait(rt, &acts[i]);
      (void)w;
    }
  }
  if (st == HSR_OK) optim_close(rt, &o, hsr_clock_ns());
  if (st == HSR_OK && regathered)
    st = rt_dev_join(rt->dv, CS(rt), GS(rt)); /* the next forward reads the gathered parameters */
  HSR_CHECK(st);
  HSR_CHECK(rt_dev_reap(rt->dv));
  if (info) {
    memset(info, 0, sizeof *info);
    info->step = rt->step;
    info->grad_norm = o.norm;
    info->clip_coef = o.coef;
    info->lr = rt->cfg.groups[0].lr;
    info->dropped = o.dropped;
  }
  return rt_snapshot_counts(rt, info);
}

hsr_status rt_zero_grad(hsr_rt *rt) {
  HSR_CHECK(hsr_rt_commit(rt));
  for (int i = 0; i < rt->nunits; i++)
    if (rt->units[i].in_bwd)
      return hsr_error(HSR_ERR_STATE, "zero_grad: unit '%s' is inside its backward window", rt->units[i].name);
  const hsr_sched_action *acts;
  int n;
  HSR_CHECK(hsr_sched_zero_grad(rt->sched, &acts, &n));
  rt->grad_ready = 0;
  for (int i = 0; i < n; i++) {
    const hsr_sched_action *a = &acts[i];
    if (a->op == HSR_SCHED_RETIRE) {
      HSR_CHECK(rt_red_retire(rt, a));
      continue;
    }
    rt_unit *u = &rt->units[a->unit];
    RT_TIMED(rt, RT_T_DATA, rt_zero(rt, u->gshard, u->Ls * 4));
    if (a->free_grad) {
      rt_mem_put(rt, u->gfull);
      u->gfull = NULL;
    }
  }
  return HSR_OK;
}

hsr_status hsr_rt_set_lr(hsr_rt *rt, int group, double lr) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (group < 0 || group >= rt->cfg.num_groups)
    return hsr_error(HSR_ERR_INVALID, "hsr_rt_set_lr: group %d does not exist (valid: 0 to %d)", group,
                     rt->cfg.num_groups - 1);
  if (!(lr >= 0) || !isfinite(lr))
    return hsr_error(HSR_ERR_INVALID, "hsr_rt_set_lr: learning rate %g is not a number >= 0", lr);
  rt->cfg.groups[group].lr = (float)lr;
  return HSR_OK;
}
