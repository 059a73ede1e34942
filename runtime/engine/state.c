/* The checkpoint room's interface (state.h): ranges, memory, idleness and
 * the installation of loaded state, answered from the engine's private
 * struct and the schedule's buffers. */
#include <string.h>

#include "engine.h"
#include "state.h"
#include "common/common_internal.h"
#include "kernels/kernels_internal.h"
#include "runtime/io/ledger_internal.h"

void rt_state_info_of(const hsr_rt *rt, rt_state_info *out) {
  *out = (rt_state_info){.cfg = &rt->cfg,
                         .layout = rt->layout,
                         .mesh = rt->mesh,
                         .boot = rt->boot,
                         .world = rt->world,
                         .rep = rt->rep_c,
                         .rank = hsr_boot_rank(rt->boot),
                         .world_size = hsr_boot_size(rt->boot),
                         .S = rt->S,
                         .R = rt->R,
                         .K = rt->K,
                         .gpu = rt_dev_async(rt->dv),
                         .host_state = !rt_dev_async(rt->dv) || rt->off != NULL,
                         .step = rt->step,
                         .nunits = rt->nunits};
}

hsr_status rt_state_unit_of(const hsr_rt *rt, int u, rt_state_unit *out) {
  if (u < 0 || u >= rt->nunits || !rt->ubeg)
    return hsr_error(HSR_ERR_INVALID, "runtime state: unit %d does not exist (%d units, committed: %s)", u, rt->nunits,
                     rt->ubeg ? "yes" : "no");
  const rt_unit *un = &rt->units[u];
  *out = (rt_state_unit){un->name, un->is_root, un->L, un->Ls, rt->uparam + rt->ubeg[u], rt->ubeg[u + 1] - rt->ubeg[u]};
  return HSR_OK;
}

hsr_status rt_state_range_at(const hsr_rt *rt, int u, rt_state_kind k, int rep, int sh, rt_state_range *out) {
  if (u < 0 || u >= rt->nunits || k < 0 || k >= RT_STATE_KINDS || rep < 0 || rep >= rt->R || sh < 0 || sh >= rt->S)
    return hsr_error(HSR_ERR_INVALID, "runtime state: unit %d kind %d at (%d, %d) does not exist", u, (int)k, rep, sh);
  const rt_unit *un = &rt->units[u];
  if (k == RT_STATE_PARAM && !rt->sh.params) { /* the whole unit on every rank */
    *out = (rt_state_range){0, un->L, rep * rt->S + sh, rt->R * rt->S, rt->cfg.param_dtype};
    return HSR_OK;
  }
  if (k != RT_STATE_PARAM && rt->outer) { /* piece rep of shard sh: one rank holds it */
    size_t lo = rt_piece_len(rt, u);
    *out = (rt_state_range){(size_t)sh * un->Ls + (size_t)rep * lo, lo, 0, 1, HSR_F32};
    return HSR_OK;
  }
  /* shard sh, alike on its R replicas; sharded without the outer shard the
   * parameters are the f32 master itself */
  int own = k == RT_STATE_PARAM && sched_holds(rt->sched, HSR_SCHED_BUF_PARAM);
  *out = (rt_state_range){(size_t)sh * un->Ls, un->Ls, rep, rt->R, own ? rt->cfg.param_dtype : HSR_F32};
  return HSR_OK;
}

void *rt_state_ptr(hsr_rt *rt, int u, rt_state_kind k) {
  switch (k) {
  case RT_STATE_MASTER: return rt_master(rt, u);
  case RT_STATE_M: return rt_buf(rt, u, HSR_SCHED_BUF_MOMENT_M);
  case RT_STATE_V: return rt_buf(rt, u, HSR_SCHED_BUF_MOMENT_V);
  case RT_STATE_PARAM:
    return sched_holds(rt->sched, HSR_SCHED_BUF_PARAM) ? rt_buf(rt, u, HSR_SCHED_BUF_PARAM) : rt_master(rt, u);
  default: return NULL;
  }
}

hsr_status rt_state_idle(hsr_rt *rt, const char *what, int need_sharded) {
  HSR_CHECK(rt_need_committed(rt, what));
  if (sched_queued(rt->sched) > 0)
    return hsr_error(HSR_ERR_STATE, "checkpoint %s: %d gradient reduction(s) still in flight; call it between steps",
                     what, sched_queued(rt->sched));
  for (int u = 0; u < rt->nunits; u++) {
    const rt_unit *un = &rt->units[u];
    if (un->in_fwd || un->in_bwd)
      return hsr_error(HSR_ERR_STATE, "checkpoint %s: unit '%s' is inside its %s window; call it between steps", what,
                       un->name, un->in_fwd ? "forward" : "backward");
    if (sched_micro(rt->sched, u) > 0)
      return hsr_error(HSR_ERR_STATE,
                       "checkpoint %s: unit '%s' ran %d backward pass(es) of a step not yet taken (gradients are not "
                       "saved); call it after hsr_rt_step",
                       what, un->name, sched_micro(rt->sched, u));
    sched_state s = sched_state_of(rt->sched, u);
    if (need_sharded && rt->sh.params && s != HSR_SCHED_SHARDED)
      return hsr_error(HSR_ERR_STATE,
                       "checkpoint %s: unit '%s' is %s (a gather issued at the end of the last step); load before "
                       "the first step or without prefetch_step",
                       what, un->name, sched_state_name(s));
  }
  return HSR_OK;
}

hsr_status rt_state_quiesce(hsr_rt *rt) { return rt_dev_quiesce(rt->dv); }

hsr_status rt_state_copy(hsr_rt *rt, void *dst, const void *src, size_t bytes) {
  return hsr_device_copy(rt->dev, dst, src, bytes, CS(rt));
}

hsr_status rt_state_sync(hsr_rt *rt) { return rt_dev_async(rt->dv) ? rt_dev_sync(rt->dv, CS(rt)) : HSR_OK; }

/* This rank's piece of the parameters, cast from the master where they are
 * a buffer of their own (unsharded strategies: its slice of the full copy,
 * which the shard group gathers; the outer shard: its piece of the shard,
 * which the replicate group gathers). Sharded without the outer shard the
 * master is the parameter: nothing to do. */
hsr_status rt_state_installed(hsr_rt *rt) {
  if (rt->off) { /* host master: cast on the host, copied up */
    HSR_CHECK(rt_off_installed(rt));
    rt->loaded = 1;
    return HSR_OK;
  }
  hsr_status st = HSR_OK;
  int own = sched_holds(rt->sched, HSR_SCHED_BUF_PARAM) && sched_holds(rt->sched, HSR_SCHED_BUF_MASTER);
  for (int ui = 0; ui < rt->nunits && st == HSR_OK && own; ui++) {
    rt_unit *u = &rt->units[ui];
    char *param = rt_buf(rt, ui, HSR_SCHED_BUF_PARAM);
    size_t at = rt->sh.params ? rt_piece_lo(rt, ui) - (size_t)rt->srank * u->Ls : rt_piece_lo(rt, ui);
    st = hsr_kernels_cast(rt->dev, CS(rt), rt_piece_len(rt, ui), rt_master(rt, ui), HSR_F32, param + at * rt->pes,
                          rt->cfg.param_dtype);
  }
  if (st == HSR_OK) st = rt_dev_sync(rt->dv, CS(rt)); /* before the caller's staging buffers go */
  if (st == HSR_OK) rt->loaded = 1;
  return st;
}

hsr_status rt_state_regather(hsr_rt *rt) {
  int rep = rt->outer;
  /* the load's exchange has counted too: the snapshot below is taken on every path */
  if ((rt->sh.params && !rep) || (!rep && rt->S == 1)) return rt_snapshot_counts(rt, NULL);
  hsr_comm *c = rep ? rt->rep_c : rt->shard_c;
  HSR_CHECK(rt_dev_join(rt->dv, GS(rt), CS(rt)));
  HSR_CHECK(rt_dev_use(rt->dv, c, GS(rt)));
  for (int ui = 0; ui < rt->nunits; ui++) {
    size_t n = rep ? rt_piece_len(rt, ui) : rt->units[ui].Ls;
    char *full = rt_buf(rt, ui, HSR_SCHED_BUF_PARAM);
    HSR_CHECK(hsr_comm_allgather(c, full + (size_t)(rep ? rt->rrank : rt->srank) * n * rt->pes, full, n,
                                 rt->cfg.param_dtype, NULL));
  }
  HSR_CHECK(rt_dev_sync(rt->dv, GS(rt)));
  HSR_CHECK(rt_dev_join(rt->dv, CS(rt), GS(rt)));
  if (rep) HSR_CHECK(rt_dev_use(rt->dv, rt->rep_c, RS(rt))); /* the replicate group's reductions */
  return rt_snapshot_counts(rt, NULL); /* the load's gathers and exchange do not count toward the next step */
}

void rt_state_set_step(hsr_rt *rt, int64_t step) { rt->step = step; }

int rt_state_fresh(const hsr_rt *rt) { return rt->step == 0 && !rt->loaded && !rt->grad_ready; }

void rt_state_torn(hsr_rt *rt, int torn) { rt->torn = torn; }

hsr_status rt_state_commit(hsr_rt *rt) {
  if (!rt) return hsr_error(HSR_ERR_INVALID, "runtime is NULL");
  int torn = rt->torn;
  rt->torn = 0;
  hsr_status st = hsr_rt_commit(rt);
  rt->torn = torn;
  return st;
}

void rt_state_phase(hsr_rt *rt) { rt_obs_phase(rt->obs, HSR_PHASE_CKPT, -1); }

hsr_status rt_state_host_alloc(hsr_rt *rt, size_t bytes, void **p) {
  HSR_CHECK(device_host_alloc(rt->dev, bytes, p));
  rt_obs_mem_get(rt->obs, HSR_MEM_CKPT_STAGING, bytes, 1);
  return HSR_OK;
}

void rt_state_host_free(hsr_rt *rt, void *p, size_t bytes) {
  if (!p) return;
  rt_obs_mem_free(rt->obs, HSR_MEM_CKPT_STAGING, bytes, 1);
  if (device_host_free(rt->dev, p) != HSR_OK) HSR_LOG_W("checkpoint: %s", hsr_last_error());
}

void *rt_state_attached(const hsr_rt *rt) { return rt->ckpt; }

void rt_state_attach(hsr_rt *rt, void *obj, void (*fini)(void *obj)) {
  rt->ckpt = obj;
  rt->ckpt_fini = fini;
}

void rt_state_fault(hsr_rt *rt, const char *phase) { fault_hook_hit(&rt->hook, phase); }
