/* This rank's persistent state, seen from outside the engine: what a
 * replica group sends a peer that heals from it (hsr/ft.h), the outer
 * reduction's gradient shards, and installing a peer's copy (through the
 * same steps as a checkpoint load: state.h). */
#include <string.h>

#include "engine.h"
#include "state.h"
#include "runtime/runtime_internal.h"

hsr_status rt_slice_get(hsr_rt *rt, int unit, rt_slice *out) {
  if (!rt || !out) return hsr_error(HSR_ERR_INVALID, "rt_slice_get: NULL argument");
  HSR_CHECK(rt_need_committed(rt, "rt_slice_get"));
  if (unit < 0 || unit >= rt->nunits)
    return hsr_error(HSR_ERR_INVALID, "rt_slice_get: unit %d does not exist (valid: 0 to %d)", unit, rt->nunits - 1);
  rt_unit *u = &rt->units[unit];
  static const rt_state_kind kinds[3] = {RT_STATE_MASTER, RT_STATE_M, RT_STATE_V};
  for (int k = 0; k < 3; k++) { /* one slice: every kind covers this rank's gradient shard */
    rt_state_range r;
    HSR_CHECK(rt_state_range_at(rt, unit, kinds[k], rt->rrank, rt->srank, &r));
    if (r.n != u->Ls)
      return hsr_error(HSR_ERR_UNSUPPORTED,
                       "rt_slice_get: unit '%s' holds %zu elements of its %s but a gradient shard of %zu", u->name, r.n,
                       k == 0 ? "master weights" : "moments", u->Ls);
  }
  *out = (rt_slice){u->Ls, rt_f32(rt, unit, HSR_SCHED_BUF_MASTER), rt_f32(rt, unit, HSR_SCHED_BUF_MOMENT_M),
                        rt_f32(rt, unit, HSR_SCHED_BUF_MOMENT_V), rt_f32(rt, unit, HSR_SCHED_BUF_GRAD_SHARD)};
  return HSR_OK;
}

int64_t rt_get_step(const hsr_rt *rt) { return rt ? rt->step : 0; }

hsr_status rt_state_installed_at(hsr_rt *rt, int64_t step) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  if (step < 0) return hsr_error(HSR_ERR_INVALID, "rt_state_installed_at: step %lld < 0", (long long)step);
  /* between steps, no gather in flight (a step-end prefetch holds the old values) */
  HSR_CHECK(rt_state_idle(rt, "install", 1));
  HSR_CHECK(rt_dev_quiesce(rt->dv));
  HSR_CHECK(rt_state_installed(rt));
  for (int ui = 0; ui < rt->nunits; ui++)
    if (rt->off) /* offload: host memory, the host zeroes it */
      HSR_CHECK(rt_off_zero(rt, ui));
    else
      RT_TIMED(rt, RT_T_DATA, rt_zero(rt, rt_buf(rt, ui, HSR_SCHED_BUF_GRAD_SHARD), rt->units[ui].Ls * 4));
  HSR_CHECK(rt_dev_sync(rt->dv, CS(rt)));
  HSR_CHECK(rt_state_regather(rt));
  rt_state_set_step(rt, step);
  rt->grad_ready = 0;
  return HSR_OK;
}
