/* This rank's persistent state, seen from outside the engine: what a
 * replica group sends a peer that heals from it (hsr/ft.h), the outer
 * reduction's gradient shards, and installing a peer's copy. */
#include <string.h>

#include "engine.h"

hsr_status hsr_rt_slice_get(hsr_rt *rt, int unit, hsr_rt_slice *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "hsr_rt_slice_get: NULL argument");
  HSR_CHECK(hsr_rt_commit(rt));
  if (unit < 0 || unit >= rt->nunits)
    return hsr_error(HSR_ERR_INVALID, "hsr_rt_slice_get: unit %d does not exist (valid: 0 to %d)", unit,
                     rt->nunits - 1);
  rt_unit *u = &rt->units[unit];
  *out = (hsr_rt_slice){u->Ls, u->master, u->m, u->v, u->gshard};
  return HSR_OK;
}

int64_t hsr_rt_get_step(const hsr_rt *rt) { return rt ? rt->step : 0; }

/* zero1 / zero2 / ddp keep full parameters: the shard group gathers the
 * slices each rank derived (the checkpoint load's re-gather). */
static hsr_status regather(hsr_rt *rt) {
  if (rt->sharded_params || rt->S == 1) return HSR_OK;
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt)));
  HSR_CHECK(rt_dev_use(rt->dv, rt->shard_c, GS(rt)));
  for (int ui = 0; ui < rt->nunits; ui++) {
    rt_unit *u = &rt->units[ui];
    HSR_CHECK(hsr_comm_allgather(rt->shard_c, (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes, u->full, u->Ls,
                                 rt->cfg.param_dtype, NULL));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, GS(rt)));
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt)));
  return rt_snapshot_counts(rt, NULL); /* not the next step's collectives */
}

hsr_status hsr_rt_state_installed(hsr_rt *rt, int64_t step) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  HSR_CHECK(hsr_rt_commit(rt));
  if (step < 0) return hsr_error(HSR_ERR_INVALID, "hsr_rt_state_installed: step %lld < 0", (long long)step);
  for (int i = 0; i < rt->nunits; i++) {
    if (rt->units[i].in_fwd || rt->units[i].in_bwd || hsr_sched_micro(rt->sched, i) || hsr_sched_queued(rt->sched))
      return hsr_error(HSR_ERR_STATE, "hsr_rt_state_installed: unit '%s' is inside a step (install between steps)",
                       rt->units[i].name);
    /* a unit gathered ahead (the step-end prefetch) holds the old values */
    if (rt->sharded_params && hsr_sched_state_of(rt->sched, i) != HSR_SCHED_SHARDED)
      return hsr_error(HSR_ERR_STATE,
                       "hsr_rt_state_installed: unit '%s' is %s from the old values (the step-end prefetch); install "
                       "before the first step or without prefetch_step",
                       rt->units[i].name, hsr_sched_state_name(hsr_sched_state_of(rt->sched, i)));
  }
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  for (int ui = 0; ui < rt->nunits; ui++) {
    rt_unit *u = &rt->units[ui];
    void *dst = rt->sharded_params ? u->shard : (char *)u->full + (size_t)rt->srank * u->Ls * rt->pes;
    HSR_CHECK(hsr_kernels_cast(rt->dev, CS(rt), u->Ls, u->master, HSR_F32, dst, rt->cfg.param_dtype));
    RT_TIMED(rt, RT_T_DATA, rt_zero(rt, u->gshard, u->Ls * 4));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, CS(rt)));
  HSR_CHECK(regather(rt));
  rt->step = step;
  rt->grad_ready = 0;
  return HSR_OK;
}
