/* The engine's lifecycle: forward/backward begin and end, the engine as the
 * schedule's executor (its table, and the gathers, reshard and release of
 * full units), the views, and the public lifecycle calls (timed and traced).
 * Each call asks the schedule (runtime/sched/schedule.h) what to do and runs
 * its actions through the interpreter (sched_run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "common/common_internal.h"
#include "collectives/comm_internal.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/ledger_internal.h"

/* ---- names ---- */
static const char *const ev_names[RT_EV_COUNT] = {"gather",    "reshard",      "reduce_scatter", "all_reduce",
                                                  "optimizer", "gather_issue", "release"};
const char *rt_event_name(rt_event_kind k) { return k >= 0 && k < RT_EV_COUNT ? ev_names[k] : "?"; }
const char *rt_group_name(hsr_rt_group g) {
  static const char *const n[] = {"shard", "replicate", "partial"};
  return g >= 0 && g < HSR_RT_GROUP_COUNT ? n[g] : "?";
}

/* ---- the event hook ---- */
void rt_event(hsr_rt *rt, int64_t step, rt_event_kind kind, int unit, int group, int collective, size_t bytes,
              uint64_t t0, uint64_t t1) {
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  rt_obs_event(rt->obs, step, kind, unit, group >= 0 && gc[group] ? comm_name(gc[group]) : NULL, collective, bytes, t0,
               t1);
  if (log_enabled(HSR_LOG_DEBUG))
    HSR_LOG_D("rt: %s unit %d group %s%s bytes %zu %.1f us", rt_event_name(kind), unit,
              group >= 0 ? rt_group_name((hsr_rt_group)group) : "-", collective ? "" : " (local copy)", bytes,
              (double)(t1 - t0) / 1e3);
}

/* A collective's span on the device clock: stamps before and after it on its
 * stream (lane 1 gather, 2 reduce); nothing without a device clock. */
_Atomic uint64_t *rt_dev_span_begin(hsr_rt *rt, int lane) { return rt_obs_mark(rt->obs, lane); }

void rt_dev_span_end(hsr_rt *rt, int64_t step, rt_event_kind kind, int unit, int group, size_t bytes,
                     _Atomic uint64_t *a, int lane) {
  if (!a) return;
  hsr_comm *gc[HSR_RT_GROUP_COUNT] = {rt->shard_c, rt->rep_c, rt->part_c};
  const char *g = group >= 0 && gc[group] ? comm_name(gc[group]) : NULL;
  char l[80];
  snprintf(l, sizeof l, "comm %s", g ? g : "?");
  rt_obs_dev_span(rt->obs, step, HSR_SPAN_COMM, l, rt_obs_span_name(kind), unit, g, bytes, a, lane);
}

hsr_status rt_wait_req(hsr_rt *rt, hsr_req *r, uint64_t issued, uint64_t *t0, uint64_t *t1) {
  *t0 = issued;
  *t1 = 0;
  if (!r || rt_dev_async(rt->dv)) {
    /* device: the streams order the consumers (events), the host does not
     * wait; the span is the host's enqueue span */
    *t1 = hsr_clock_ns();
    return r ? rt_dev_defer(rt->dv, r) : HSR_OK;
  }
  int done = 0;
  uint64_t w0 = hsr_clock_ns();
  hsr_status st = req_test(r, &done);
  if (st == HSR_OK && done) {
    uint64_t a = 0, b = 0;
    req_times(r, &a, &b);
    if (a && b) *t0 = a, *t1 = b;
    st = req_free(r);
  } else if (st == HSR_OK) {
    st = hsr_req_wait(r, rt->timeout);
  } else {
    req_free(r);
  }
  uint64_t w1 = hsr_clock_ns();
  rt_obs_wait(rt->obs, w1 - w0);
  if (!*t1) *t1 = w1;
  return st;
}

/* ---- the engine as the schedule's executor: gathers, reshard, release ---- */
/* The schedule chose the source (shard or partial slice) and the group; a
 * one-rank group is a local copy (no handle). */
hsr_status rt_x_gather(void *ctx, const sched_action *a, void **h) {
  hsr_rt *rt = ctx;
  int ui = a->unit;
  rt_unit *u = &rt->units[ui];
  if (rt->opt) rt_optim_close(rt, rt->opt->now); /* the step-end prefetch: at the end of the update before it */
  u->gt0 = hsr_clock_ns();
  u->gstep = rt_obs_step_now(rt->obs);
  hsr_req *req = NULL;
  /* the shard (optimizer) and the partial slice (forward_end) were written on compute */
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt)));
  void *full = rt_buf(rt, ui, HSR_SCHED_BUF_FULL);
  /* the partial slice, the parameter shard (outer shard optim), or the f32
   * master itself (FSDP2's footprint: no parameter shard beside it) */
  int from_master = !a->partial && !sched_holds(rt->sched, HSR_SCHED_BUF_PARAM);
  const void *src = a->partial     ? rt_buf(rt, ui, HSR_SCHED_BUF_PARTIAL)
                    : !from_master ? rt_buf(rt, ui, HSR_SCHED_BUF_PARAM)
                                   : (const void *)rt_master(rt, ui);
  hsr_comm *c = a->partial ? rt->part_c : rt->shard_c;
  if (a->cast) { /* bf16: the gather's input cast from the master into a transient buffer */
    void *in = rt_buf(rt, ui, HSR_SCHED_BUF_GATHER_IN);
    RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, GS(rt), a->count, src, HSR_F32, in, rt->cfg.param_dtype));
    src = in;
  }
  if (a->local && from_master) {
    RT_TIMED(rt, RT_T_DATA, hsr_kernels_cast(rt->dev, GS(rt), a->count, src, HSR_F32, full, rt->cfg.param_dtype));
  } else if (a->local) {
    RT_TIMED(rt, RT_T_DATA, hsr_device_copy(rt->dev, full, src, a->count * rt->pes, GS(rt)));
  } else {
    if (!a->partial) HSR_CHECK(rt_dev_use(rt->dv, c, GS(rt))); /* the partial group is bound at creation */
    _Atomic uint64_t *ds = rt_dev_span_begin(rt, 1);
    RT_TIMED(rt, RT_T_POST, hsr_comm_allgather(c, src, full, a->count, rt->cfg.param_dtype, &req));
    rt_dev_span_end(rt, u->gstep, RT_EV_GATHER, ui, a->group, a->count * rt->pes, ds, 1);
  }
  *h = req;
  HSR_CHECK(rt_dev_gather_issued(rt->dv, ui));
  rt_event(rt, 0, RT_EV_ISSUE, ui, a->group, !a->local, a->count * rt->pes, u->gt0, hsr_clock_ns());
  int live = sched_live(rt->sched);
  if (live > rt->stats.max_live_full) rt->stats.max_live_full = live;
  if (rt->opt) rt_optim_open(rt);
  return HSR_OK;
}

hsr_status rt_x_gather_wait(void *ctx, const sched_action *a, void *h) {
  hsr_rt *rt = ctx;
  int ui = a->unit;
  rt_unit *u = &rt->units[ui];
  if (rt->opt) rt_optim_close(rt, hsr_clock_ns()); /* the step-end prefetch */
  uint64_t t0, t1;
  hsr_req *r = h;
  hsr_status st = rt_wait_req(rt, r, u->gt0, &t0, &t1);
  if (st == HSR_OK) st = rt_dev_gather_consume(rt->dv, ui); /* compute waits for the gather */
  if (st != HSR_OK)
    return hsr_error(st, "runtime: gather of unit '%s' (%s group) failed: %s", u->name,
                     rt_group_name((hsr_rt_group)a->group), hsr_last_error());
  rt_event(rt, u->gstep, RT_EV_GATHER, ui, a->group, r != NULL, a->count * rt->pes, t0, t1);
  return HSR_OK; /* the interpreter returns the partial slice it read */
}

hsr_status rt_x_reshard(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  uint64_t t0 = hsr_clock_ns();
  size_t kept = a->count * rt->pes;
  if (a->partial) /* this rank's 1/K of the unit, for the backward gather in the partial group */
    RT_TIMED(rt, RT_T_DATA,
             hsr_device_copy(rt->dev, rt_buf(rt, a->unit, HSR_SCHED_BUF_PARTIAL),
                             (char *)rt_buf(rt, a->unit, HSR_SCHED_BUF_FULL) + (size_t)rt->prank * kept, kept, CS(rt)));
  rt_event(rt, 0, RT_EV_RESHARD, a->unit, a->group, 1, kept, t0, hsr_clock_ns());
  return HSR_OK;
}

hsr_status rt_x_release(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  uint64_t t0 = hsr_clock_ns();
  rt_event(rt, 0, RT_EV_RELEASE, a->unit, -1, 1, 0, t0, hsr_clock_ns());
  return HSR_OK;
}

hsr_status rt_x_grad_buf(void *ctx, const sched_action *a) {
  hsr_rt *rt = ctx;
  RT_TIMED(rt, RT_T_DATA, rt_zero(rt, rt_buf(rt, a->unit, HSR_SCHED_BUF_GRAD), rt->units[a->unit].L * 4));
  return HSR_OK;
}

/* The engine as an executor: every callback, on host and on the device
 * (where the streams order the reduction stages: nothing to test). */
#define RT_EXEC_COMMON                                                                                                 \
  .get = rt_pool_get, .put = rt_pool_put, .setup = rt_x_setup, .gather = rt_x_gather, .gather_wait = rt_x_gather_wait, \
  .reshard = rt_x_reshard, .release = rt_x_release, .grad_buf = rt_x_grad_buf, .norm = rt_x_norm, .optim = rt_x_optim, \
  .regather = rt_x_regather, .regather_wait = rt_x_regather_wait, .grad_zero = rt_x_grad_zero,                         \
  .stage_cast = rt_x_stage_cast, .stage1 = rt_x_stage1, .stage1_done = rt_x_stage1_done, .stage2 = rt_x_stage2,        \
  .deferred_ar = rt_x_deferred_ar, .wait = rt_x_wait, .accumulate = rt_x_accumulate
static const sched_exec exec_host = {RT_EXEC_COMMON, .test = rt_x_test};
static const sched_exec exec_gpu = {RT_EXEC_COMMON, .test = NULL};
#undef RT_EXEC_COMMON

const sched_exec *rt_exec_of(int gpu) { return gpu ? &exec_gpu : &exec_host; }

hsr_status rt_run(hsr_rt *rt, const sched_action *acts, int n) {
  return sched_run(rt->sched, acts, n, rt->exec, rt);
}

/* ---- the lifecycle ---- */
hsr_status rt_need_committed(const hsr_rt *rt, const char *what) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (rt->commit == RT_COMMITTED && strcmp(what, "load") != 0) HSR_CHECK(rt_need_whole(rt, what));
  if (rt->commit == RT_COMMITTED) return HSR_OK;
  if (rt->commit == RT_BROKEN)
    return hsr_error(HSR_ERR_STATE, "%s: the engine's commit failed earlier (%s); destroy it", what, rt->commit_msg);
  return hsr_error(HSR_ERR_STATE,
                   "%s: the engine is not committed (hsr_rt_commit, or a call that commits: see hsr/runtime.h)", what);
}

hsr_status rt_need_whole(const hsr_rt *rt, const char *what) {
  if (!rt->torn) return HSR_OK;
  return hsr_error(HSR_ERR_STATE,
                   "%s: a checkpoint load into this fresh engine failed after it had begun writing its state in place; "
                   "load a checkpoint again (or destroy the engine)",
                   what);
}

/* Checks only (no collective): the runtime and the unit exist. */
hsr_status rt_check_unit(hsr_rt *rt, int ui, const char *what) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (ui < 0 || ui >= rt->nunits)
    return hsr_error(HSR_ERR_INVALID, "%s: unit %d does not exist (%d units)", what, ui, rt->nunits);
  return HSR_OK;
}

static hsr_status window_free(const rt_unit *u, const char *what) {
  if (!u->in_fwd && !u->in_bwd) return HSR_OK;
  return hsr_error(HSR_ERR_STATE, "%s(%s): the unit is already inside a forward or backward window", what, u->name);
}

/* The begin calls commit first (collective, once: hsr/runtime.h says which
 * calls do); an end call follows its begin, which did. */
static hsr_status forward_begin(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "forward_begin"));
  HSR_CHECK(hsr_rt_commit(rt));
  rt_obs_phase(rt->obs, HSR_PHASE_FORWARD, ui);
  rt_unit *u = &rt->units[ui];
  HSR_CHECK(window_free(u, "forward_begin"));
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_forward_begin(rt->sched, ui, &acts, &n));
  HSR_CHECK(rt_run(rt, acts, n));
  u->in_fwd = 1;
  return HSR_OK;
}

static hsr_status forward_end(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "forward_end"));
  rt_unit *u = &rt->units[ui];
  if (!u->in_fwd) return hsr_error(HSR_ERR_STATE, "forward_end(%s) without forward_begin", u->name);
  rt_obs_phase(rt->obs, HSR_PHASE_FORWARD, ui);
  u->in_fwd = 0;
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_forward_end(rt->sched, ui, &acts, &n));
  return rt_run(rt, acts, n);
}

static hsr_status backward_begin(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "backward_begin"));
  HSR_CHECK(hsr_rt_commit(rt));
  rt_obs_phase(rt->obs, HSR_PHASE_BACKWARD, ui);
  rt_unit *u = &rt->units[ui];
  HSR_CHECK(window_free(u, "backward_begin"));
  int micro = sched_micro(rt->sched, ui);
  if (micro >= rt->cfg.micro_batches)
    return hsr_error(HSR_ERR_STATE,
                     "backward_begin(%s): already %d backward passes this step (micro-batches %d); call "
                     "hsr_rt_step and hsr_rt_zero_grad",
                     u->name, micro, rt->cfg.micro_batches);
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_backward_begin(rt->sched, ui, &acts, &n));
  HSR_CHECK(rt_run(rt, acts, n));
  u->in_bwd = 1;
  return HSR_OK;
}

static hsr_status backward_end(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "backward_end"));
  rt_unit *u = &rt->units[ui];
  if (!u->in_bwd) return hsr_error(HSR_ERR_STATE, "backward_end(%s) without backward_begin", u->name);
  if (u->in_rc) return hsr_error(HSR_ERR_STATE, "backward_end(%s) inside its recompute: call hsr_rt_recompute_end first", u->name);
  rt_obs_phase(rt->obs, HSR_PHASE_REDUCE, ui);
  u->in_bwd = 0;
  u->rc_done = 0;
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_backward_end(rt->sched, ui, &acts, &n));
  return rt_run(rt, acts, n);
}

/* The recompute opens inside the backward window, whose gather serves it:
 * the schedule only checks that the unit is FULL (sched_recompute). A
 * forward_begin there is refused (window_free), which is what keeps a
 * program from gathering a unit a third time. */
static hsr_status recompute_begin(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "recompute_begin"));
  rt_unit *u = &rt->units[ui];
  if (rt->cfg.recompute == HSR_RT_RECOMPUTE_NONE)
    return hsr_error(HSR_ERR_STATE,
                     "recompute_begin(%s): the configuration's recompute is none; declare the policy "
                     "(hsr_rt_config.recompute full or selective) so that the schedule, the ledger and the tuner see it",
                     u->name);
  if (!u->in_bwd)
    return hsr_error(HSR_ERR_STATE,
                     "recompute_begin(%s) outside its backward window: call it after hsr_rt_backward_begin, whose "
                     "gather serves the recompute",
                     u->name);
  if (u->in_rc || u->rc_done)
    return hsr_error(HSR_ERR_STATE, "recompute_begin(%s): the unit %s in this backward window", u->name,
                     u->in_rc ? "is already recomputing" : "was already recomputed");
  rt_obs_phase(rt->obs, HSR_PHASE_RECOMPUTE, ui);
  const sched_action *acts;
  int n;
  HSR_CHECK(sched_recompute(rt->sched, ui, &acts, &n));
  HSR_CHECK(rt_run(rt, acts, n));
  u->in_rc = 1;
  rt->recomputes++;
  return HSR_OK;
}

static hsr_status recompute_end(hsr_rt *rt, int ui) {
  HSR_CHECK(rt_check_unit(rt, ui, "recompute_end"));
  rt_unit *u = &rt->units[ui];
  if (!u->in_rc) return hsr_error(HSR_ERR_STATE, "recompute_end(%s) without recompute_begin", u->name);
  rt_obs_phase(rt->obs, HSR_PHASE_BACKWARD, ui);
  u->in_rc = 0;
  u->rc_done = 1;
  return HSR_OK;
}

/* ---- views ---- */
hsr_status rt_find_param(hsr_rt *rt, const char *name, rt_param_info *p) {
  int idx;
  HSR_CHECK(rt_layout_find(rt->layout, name, &idx));
  return rt_layout_param(rt->layout, idx, p);
}

hsr_status hsr_rt_param_view(hsr_rt *rt, const char *name, void **ptr) {
  if (!rt || !name || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_rt_param_view: NULL argument");
  *ptr = NULL;
  rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  rt_unit *u = &rt->units[p.unit];
  if (!u->in_fwd && !u->in_bwd)
    return hsr_error(HSR_ERR_STATE,
                     "view of parameter '%s' outside its window: unit '%s' is not between forward_begin/forward_end "
                     "or backward_begin/backward_end",
                     name, u->name);
  *ptr = (char *)rt_full(rt, p.unit) + p.offset * rt->pes;
  return HSR_OK;
}

hsr_status hsr_rt_grad_view(hsr_rt *rt, const char *name, float **ptr) {
  if (!rt || !name || !ptr) return hsr_error(HSR_ERR_INVALID, "hsr_rt_grad_view: NULL argument");
  *ptr = NULL;
  rt_param_info p;
  HSR_CHECK(rt_find_param(rt, name, &p));
  rt_unit *u = &rt->units[p.unit];
  if (!u->in_bwd)
    return hsr_error(HSR_ERR_STATE,
                     "gradient view of '%s' outside its window: unit '%s' is not between "
                     "backward_begin and backward_end",
                     name, u->name);
  *ptr = rt_f32(rt, p.unit, HSR_SCHED_BUF_GRAD) + p.offset;
  return HSR_OK;
}

/* ---- public lifecycle calls: the implementations above, timed and traced ---- */
#define RT_OBSERVED(call, starts, window, unit, kind, ends)                \
  do {                                                                     \
    if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");         \
    rt_obs_enter(rt->obs, starts);                                         \
    hsr_status st_ = (call);                                               \
    rt_obs_leave(rt->obs, st_ == HSR_OK ? (window) : 0, unit, kind, ends); \
    return st_;                                                            \
  } while (0)

hsr_status hsr_rt_forward_begin(hsr_rt *rt, int ui) { RT_OBSERVED(forward_begin(rt, ui), 1, 1, ui, RT_WIN_FWD, 0); }
hsr_status hsr_rt_forward_end(hsr_rt *rt, int ui) { RT_OBSERVED(forward_end(rt, ui), 0, -1, ui, RT_WIN_FWD, 0); }
hsr_status hsr_rt_backward_begin(hsr_rt *rt, int ui) { RT_OBSERVED(backward_begin(rt, ui), 1, 1, ui, RT_WIN_BWD, 0); }
hsr_status hsr_rt_backward_end(hsr_rt *rt, int ui) { RT_OBSERVED(backward_end(rt, ui), 0, -1, ui, RT_WIN_BWD, 0); }
hsr_status hsr_rt_recompute_begin(hsr_rt *rt, int ui) {
  RT_OBSERVED(recompute_begin(rt, ui), 0, 1, ui, RT_WIN_RECOMPUTE, 0);
}
hsr_status hsr_rt_recompute_end(hsr_rt *rt, int ui) { RT_OBSERVED(recompute_end(rt, ui), 0, -1, ui, RT_WIN_RECOMPUTE, 0); }
hsr_status hsr_rt_step(hsr_rt *rt, hsr_rt_step_info *info) { RT_OBSERVED(rt_step(rt, info), 0, 0, -1, 0, 1); }
hsr_status hsr_rt_zero_grad(hsr_rt *rt) { RT_OBSERVED(rt_zero_grad(rt), 0, 0, -1, 0, 0); }

/* ---- seeing the schedule ---- */
hsr_ledger *hsr_rt_ledger(hsr_rt *rt) { return rt ? rt_obs_held(rt->obs) : NULL; }
const hsr_ledger *rt_ledger_in_use(const hsr_rt *rt) { return rt ? rt_obs_live(rt->obs) : NULL; }
hsr_status rt_trace_enable(hsr_rt *rt, int on) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (on) rt_dev_clock(rt->dv, rt->obs); /* a device that can stamp its streams times its own spans */
  return rt_obs_trace_enable(rt->obs, on);
}

hsr_status rt_trace_write(hsr_rt *rt, const char *path) {
  if (!rt || !path) return hsr_error(HSR_ERR_INVALID, "rt_trace_write: NULL argument");
  trace_log *t = rt_obs_trace(rt->obs), *empty = NULL;
  /* Gathers still in flight (the last step-end prefetch) are completed first,
   * so every collective the communicators counted is in the file. */
  hsr_status gst = HSR_OK;
  if (t && rt->sched) {
    const sched_action *acts;
    int n;
    gst = sched_settle(rt->sched, &acts, &n);
    if (gst == HSR_OK) gst = rt_run(rt, acts, n);
  }
  if (t && rt_obs_device_clock(rt->obs)) { /* every stamp landed: the device's spans into the trace */
    if (gst == HSR_OK) gst = rt_dev_quiesce(rt->dv);
    rt_obs_settle(rt->obs);
  }
  if (!t) HSR_CHECK(trace_create(hsr_boot_rank(rt->boot), &empty)); /* still collective: write no spans */
  hsr_status st = trace_write(t ? t : empty, rt->boot, path);       /* collective: written even after an error */
  trace_free(empty);
  return gst != HSR_OK ? gst : st;
}

hsr_status rt_get_timing(const hsr_rt *rt, rt_timing *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "rt_get_timing: NULL argument");
  return rt_obs_timing(rt->obs, out);
}
hsr_status rt_reset_timing(hsr_rt *rt) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  rt_obs_timing_reset(rt->obs);
  return HSR_OK;
}
