/* The optimizer step as the executor's NORM, OPTIM, REGATHER and
 * REGATHER_WAIT (the global gradient norm and clip factor, AdamW on each
 * unit's local slice, the zero1/zero2 re-gather of the updated slices; the
 * step-end prefetch of the next forward's first unit is an ordinary GATHER
 * that closes the optimizer span), GRAD_ZERO, and the public step and
 * zero_grad. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

hsr_status rt_snapshot_counts(hsr_rt *rt, hsr_rt_step_info *info) {
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
    for (int op = 0; op < HSR_OP_COUNT; op++) {
      hsr_comm_counter c = {0};
      if (gc[g]) HSR_CHECK(comm_counters(gc[g], (hsr_op)op, &c));
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

/* The reduction over replicas outside the job (cfg.outer): it sees the
 * finished gradient shards (the reduce stream drained) outside the optimizer
 * span, and may drop the step. */
static hsr_status outer_reduce(hsr_rt *rt, rt_opt_run *o) {
  if (!rt->cfg.outer) return HSR_OK;
  HSR_CHECK(rt_dev_sync(rt->dv, RS(rt)));
  uint64_t t = hsr_clock_ns();
  rt_event(rt, 0, RT_EV_OPTIM, -1, -1, 1, 0, o->t0, t);
  int commit = 1;
  hsr_status st = rt->cfg.outer(rt, rt->cfg.outer_ctx, &commit);
  o->t0 = hsr_clock_ns();
  rt_obs_wait(rt->obs, o->t0 - t);
  if (st != HSR_OK)
    return hsr_error(st, "step %lld: the outer reduction failed: %s", (long long)rt->step + 1, hsr_last_error());
  o->dropped = !commit;
  return HSR_OK;
}

/* The synchronized gradient is complete: the caller's hook sees it (outside
 * the optimizer span). */
static hsr_status grad_hook(hsr_rt *rt, rt_opt_run *o) {
  rt->grad_ready = 1;
  if (!rt->cfg.grad_hook) return HSR_OK;
  rt_event(rt, 0, RT_EV_OPTIM, -1, -1, 1, 0, o->t0, hsr_clock_ns());
  hsr_status st = rt->cfg.grad_hook(rt, rt->cfg.grad_hook_ctx);
  o->t0 = hsr_clock_ns();
  if (st != HSR_OK)
    return hsr_error(st, "step %lld: the gradient hook failed: %s", (long long)rt->step + 1, hsr_last_error());
  return HSR_OK;
}

/* NORM: the global norm of the averaged gradient, and the clip factor. */
hsr_status rt_x_norm(void *ctx, const sched_action *a) {
  (void)a;
  hsr_rt *rt = ctx;
  rt_opt_run *o = rt->opt;
  o->t0 = hsr_clock_ns();
  o->open = 1;
  int M = rt->cfg.micro_batches;
  double ss = 0, *sq;
  /* offload: the accumulators are host memory, complete once every copy
   * down landed and was added; the host scales and sums them */
  if (rt->off && !rt_dev_dropped(rt->dv, RT_DROP_OFFLOAD_WAIT)) HSR_CHECK(rt_dev_quiesce(rt->dv));
  HSR_CHECK(rt_off_settle(rt, -1));
  hsr_device *gd = rt->off ? rt_off_host(rt) : rt->dev;
  hsr_stream *gs = rt->off ? NULL : RS(rt);
  /* on the reduce stream, behind the accumulations; partial sums land in host
   * slots and are added in unit order (the same order on host and device) */
  HSR_CHECK(rt_dev_slots(rt->dv, rt->nunits, &sq));
  /* the optimizer's gradient: the first Lo elements of each accumulator */
  for (int i = 0; i < rt->nunits && M > 1; i++)
    HSR_CHECK(kernels_scale(gd, gs, rt_piece_len(rt, i), rt_f32(rt, i, HSR_SCHED_BUF_GRAD_SHARD), HSR_F32, 1.0 / M));
  HSR_CHECK(outer_reduce(rt, o));
  if (o->dropped) { /* no norm, no update: the step stays where it was */
    o->norm = 0, o->coef = 1.0;
    return HSR_OK;
  }
  HSR_CHECK(grad_hook(rt, o));
  for (int i = 0; i < rt->nunits; i++) {
    sq[i] = 0;
    HSR_CHECK(kernels_sumsq(gd, gs, rt_piece_len(rt, i), rt_f32(rt, i, HSR_SCHED_BUF_GRAD_SHARD), HSR_F32, &sq[i]));
  }
  if (!rt_dev_dropped(rt->dv, RT_DROP_OPTIM_WAIT))
    HSR_CHECK(rt_dev_sync(rt->dv, RS(rt))); /* the one host wait of a device step: the clip factor */
  for (int i = 0; i < rt->nunits; i++) ss += sq[i];
  /* the slices of one shard group tile the gradient; replicas hold equal
   * slices, or (outer shard optim) the R pieces of each */
  hsr_comm *norm_c[2] = {rt->S > 1 ? rt->shard_c : NULL, rt->outer ? rt->rep_c : NULL};
  for (int g = 0; g < 2; g++) {
    if (!norm_c[g]) continue;
    uint64_t t = hsr_clock_ns();
    rt_event(rt, 0, RT_EV_OPTIM, -1, -1, 1, 0, o->t0, t);
    HSR_CHECK(rt_dev_allreduce_f64(rt->dv, norm_c[g], &ss));
    o->t0 = hsr_clock_ns();
    rt_obs_wait(rt->obs, o->t0 - t);
    rt_event(rt, 0, RT_EV_ALLREDUCE, -1, g ? HSR_RT_GROUP_REPLICATE : HSR_RT_GROUP_SHARD, 1, sizeof ss, t, o->t0);
  }
  if (!rt_dev_dropped(rt->dv, RT_DROP_OPTIM_WAIT))
    HSR_CHECK(rt_dev_join(rt->dv, CS(rt), RS(rt))); /* the optimizer (compute) reads the reduced gradient */
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt)));   /* and overwrites shards that a queued gather may still read */
  o->norm = sqrt(ss);
  o->coef = 1.0;
  if (rt->cfg.clip > 0 && o->norm > rt->cfg.clip) o->coef = rt->cfg.clip / (o->norm + 1e-6);
  rt->step++;
  return HSR_OK;
}

/* OPTIM: AdamW on this rank's piece of every parameter of the unit (its
 * shard, or with the outer shard 1/R of it); the new values also go to the
 * parameters in the param dtype where they are a buffer of their own (the
 * whole unit unsharded, the shard with the outer shard), not where the
 * master is the parameter. */
hsr_status rt_x_optim(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  if (rt->opt->dropped) return HSR_OK; /* the outer reduction dropped the step */
  int ui = a->unit;
  if (rt->off) { /* AdamW on the host's cores, the parameters copied up */
    adamw_hparams hp[HSR_RT_MAX_GROUPS];
    for (int g = 0; g < rt->cfg.num_groups; g++) {
      const hsr_rt_opt_group *gr = &rt->cfg.groups[g];
      hp[g] =
          (adamw_hparams){gr->lr, gr->beta1, gr->beta2, gr->eps, gr->weight_decay, rt->step, (float)rt->opt->coef};
    }
    HSR_CHECK(rt_off_optim(rt, ui, hp));
    rt->opt->now = hsr_clock_ns();
    return HSR_OK;
  }
  rt_unit *u = &rt->units[ui];
  size_t lo = rt_piece_lo(rt, ui), slo = (size_t)rt->srank * u->Ls;
  float *master = rt_master(rt, ui), *m = rt_f32(rt, ui, HSR_SCHED_BUF_MOMENT_M),
        *v = rt_f32(rt, ui, HSR_SCHED_BUF_MOMENT_V), *g = rt_f32(rt, ui, HSR_SCHED_BUF_GRAD_SHARD);
  char *param = sched_holds(rt->sched, HSR_SCHED_BUF_MASTER) ? rt_buf(rt, ui, HSR_SCHED_BUF_PARAM) : NULL;
  for (int j = rt->ubeg[ui]; j < rt->ubeg[ui + 1]; j++) {
    rt_param_info p;
    HSR_CHECK(rt_layout_param(rt->layout, rt->uparam[j], &p));
    size_t x, y;
    if (!rt_piece_range(rt, ui, p.offset, p.numel, &x, &y)) continue;
    const hsr_rt_opt_group *gr = &rt->cfg.groups[p.group];
    adamw_hparams hp = {gr->lr, gr->beta1, gr->beta2, gr->eps, gr->weight_decay, rt->step, (float)rt->opt->coef};
    void *out = param ? param + (rt->sh.params ? x - slo : x) * rt->pes : NULL;
    size_t o = x - lo;
    HSR_CHECK(
        kernels_adamw(rt->dev, CS(rt), y - x, master + o, m + o, v + o, g + o, HSR_F32, out, rt->cfg.param_dtype, &hp));
  }
  rt->opt->now = hsr_clock_ns();
  return HSR_OK;
}

void rt_optim_close(hsr_rt *rt, uint64_t end) {
  rt_opt_run *o = rt->opt;
  if (o->open) rt_event(rt, 0, RT_EV_OPTIM, -1, -1, 1, 0, o->t0, end);
  o->open = 0;
}

void rt_optim_open(hsr_rt *rt) {
  rt->opt->t0 = hsr_clock_ns();
  rt->opt->open = 1;
}

/* REGATHER: every rank updated its slice in place; the group gathers them
 * back (REGATHER_WAIT): zero1/zero2 the full parameters over the shard
 * group, the outer shard the parameter shard from its R pieces. */
hsr_status rt_x_regather(void *ctx, const sched_action *a, void **h) {
  hsr_rt *rt = ctx;
  rt_unit *u = &rt->units[a->unit];
  if (rt->opt) rt_optim_close(rt, rt->opt->now);
  int rep = a->group == HSR_RT_GROUP_REPLICATE;
  hsr_comm *c = rep ? rt->rep_c : rt->shard_c;
  char *full = rep ? rt_buf(rt, a->unit, HSR_SCHED_BUF_PARAM) : rt_full(rt, a->unit);
  size_t at = (size_t)(rep ? rt->rrank : rt->srank) * a->count * rt->pes;
  hsr_req *req = NULL;
  hsr_status st = rt_dev_join(rt->dv, GS(rt), CS(rt)); /* the gather reads what the optimizer wrote */
  if (st == HSR_OK) st = rt_dev_use(rt->dv, c, GS(rt));
  u->gt0 = hsr_clock_ns();
  if (st == HSR_OK) st = hsr_comm_allgather(c, full + at, full, a->count, rt->cfg.param_dtype, &req);
  rt_obs_time(rt->obs, RT_T_POST, hsr_clock_ns() - u->gt0);
  *h = req;
  if (rt->opt) rt_optim_open(rt);
  return st;
}

hsr_status rt_x_regather_wait(void *ctx, const sched_action *a, void *h) {
  hsr_rt *rt = ctx;
  if (rt->opt) rt_optim_close(rt, hsr_clock_ns());
  if (!h) return HSR_OK;
  uint64_t t0, t1;
  hsr_status st = rt_wait_req(rt, h, rt->units[a->unit].gt0, &t0, &t1);
  rt_event(rt, 0, RT_EV_GATHER, a->unit, a->group, 1, a->count * rt->pes, t0, t1);
  return st;
}

/* GRAD_ZERO: the accumulator (the interpreter returns a freed gradient buffer). */
hsr_status rt_x_grad_zero(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  if (rt->off) return rt_off_zero(rt, a->unit); /* host memory: the host zeroes it */
  RT_TIMED(rt, RT_T_DATA,
           rt_zero(rt, rt_buf(rt, a->unit, HSR_SCHED_BUF_GRAD_SHARD), sched_acc_len(rt->sched, a->unit) * 4));
  return HSR_OK;
}

/* hsr_rt_step commits first (hsr/runtime.h). */
hsr_status rt_step(hsr_rt *rt, hsr_rt_step_info *info) {
  HSR_CHECK(hsr_rt_commit(rt));
  fault_hook_hit(&rt->hook, "step");
  rt_obs_phase(rt->obs, HSR_PHASE_STEP, -1);
  for (int i = 0; i < rt->nunits; i++) {
    rt_unit *u = &rt->units[i];
    int micro = sched_micro(rt->sched, i);
    if (u->in_fwd || u->in_bwd)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' is still inside its %s window", u->name,
                       u->in_fwd ? "forward" : "backward");
    if (micro != rt->cfg.micro_batches)
      return hsr_error(HSR_ERR_STATE, "step: unit '%s' ran %d backward pass(es) this step, expected %d (micro-batches)",
                       u->name, micro, rt->cfg.micro_batches);
  }
  const sched_action *acts;
  int n, regathered = 0;
  HSR_CHECK(sched_step(rt->sched, &acts, &n));
  for (int i = 0; i < n; i++) regathered |= acts[i].op == HSR_SCHED_REGATHER_WAIT;
  rt_opt_run o = {0};
  rt->opt = &o;
  hsr_status st = rt_run(rt, acts, n); /* gathers already posted complete even after an error */
  if (st == HSR_OK) rt_optim_close(rt, hsr_clock_ns());
  if (st == HSR_OK && o.dev_t0)
    rt_obs_dev_span(rt->obs, 0, HSR_SPAN_COMPUTE, "compute", "optimizer", -1, NULL, 0, o.dev_t0, 0);
  rt->opt = NULL;
  if (st == HSR_OK && (regathered || rt->off)) /* offload: the parameters came up on the gather stream */
    st = rt_dev_join(rt->dv, CS(rt), GS(rt));  /* the next forward reads the gathered parameters */
  HSR_CHECK(st);
  HSR_CHECK(rt_dev_reap(rt->dv));
  if (info) {
    memset(info, 0, sizeof *info);
    info->step = rt->step;
    info->grad_norm = o.norm;
    info->clip_coef = o.coef;
    info->lr = rt->cfg.groups[0].lr;
    info->dropped = o.dropped;
    info->recomputes = rt->recomputes;
  }
  rt->recomputes = 0;
  return rt_snapshot_counts(rt, info);
}

/* hsr_rt_zero_grad commits first (hsr/runtime.h). */
hsr_status rt_zero_grad(hsr_rt *rt) {
  HSR_CHECK(hsr_rt_commit(rt));
  for (int i = 0; i < rt->nunits; i++)
    if (rt->units[i].in_bwd)
      return hsr_error(HSR_ERR_STATE, "zero_grad: unit '%s' is inside its backward window", rt->units[i].name);
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_zero_grad(rt->sched, &acts, &n));
  rt->grad_ready = 0;
  return rt_run(rt, acts, n);
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
