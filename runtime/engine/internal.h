/* runtime/engine, private to this folder: the two hooks every buffer
 * and every lifecycle event go through (the memory ledger and the trace are
 * built on exactly these). */
#ifndef HSR_RUNTIME_ENGINE_INTERNAL_H
#define HSR_RUNTIME_ENGINE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hsr/ledger.h"
#include "runtime/io/ledger_internal.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "collectives/comm_internal.h"
#include "runtime/io/trace.h"

/* Buffer categories are the ledger's (hsr/ledger.h): param shard, grad
 * shard, master, moments m and v, full unit, partial slice, reduce-scatter
 * buffer (the full gradient), all-reduce buffer, staging. */
typedef mem_cat rt_mem_cat;

typedef enum rt_event_kind {
  RT_EV_GATHER = 0,
  RT_EV_RESHARD,
  RT_EV_REDUCE_SCATTER,
  RT_EV_ALLREDUCE,
  RT_EV_OPTIM,
  RT_EV_ISSUE,   /* a unit's gather posted (the schedule's GATHER): when prefetch decided it */
  RT_EV_RELEASE, /* a unit's full buffer returned after its backward */
  RT_EV_COUNT
} rt_event_kind;

const char *rt_event_name(rt_event_kind k);

/* Every runtime allocation: from the pool, else from comm_mem_alloc
 * (buffers collectives touch) or the device allocator (optimizer state). */
hsr_status rt_mem_get(hsr_rt *rt, rt_mem_cat cat, size_t bytes, void **ptr);
/* Back to the pool (poisoned first if it held a gathered unit and poisoning is on). */
void rt_mem_put(hsr_rt *rt, void *ptr);

/* Every lifecycle event: the step that issued it (0: the current one; the
 * step-end prefetch's gather belongs to the step before), unit, group (-1:
 * none), whether a collective ran (0: a local copy stood in for the
 * collective of a one-rank group), bytes moved or touched, start/end
 * monotonic ns. */
void rt_event(hsr_rt *rt, int64_t step, rt_event_kind kind, int unit, int group, int collective, size_t bytes,
              uint64_t t0, uint64_t t1);

/* ---- observe.c: ledgers, trace and engine timing behind the hooks ---- */
typedef struct rt_obs rt_obs;
hsr_status rt_obs_create(int rank, const char *(*unit_name)(void *, int), void *ctx, rt_obs **out);
void rt_obs_free(rt_obs *o);
hsr_ledger *rt_obs_held(rt_obs *o);
hsr_ledger *rt_obs_live(rt_obs *o);
trace_log *rt_obs_trace(rt_obs *o);
hsr_status rt_obs_trace_enable(rt_obs *o, int on);
/* fresh: the buffer came from the allocator (held memory grows), not the pool */
void rt_obs_mem_get(rt_obs *o, mem_cat cat, size_t bytes, int fresh);
void rt_obs_mem_put(rt_obs *o, mem_cat cat, size_t bytes);
void rt_obs_mem_free(rt_obs *o, mem_cat cat, size_t bytes, int in_use);
void rt_obs_phase(rt_obs *o, ledger_phase phase, int unit);
/* collective: 0 when no collective ran (a local copy standing in for a 1-rank
 * group); step: the step that issued it (0: the current one) */
void rt_obs_event(rt_obs *o, int64_t step, rt_event_kind kind, int unit, const char *group, int collective,
                  size_t bytes, uint64_t t0, uint64_t t1);
/* An event's name in the trace ("all_gather", "reduce_scatter", ...). */
const char *rt_obs_span_name(rt_event_kind kind);
/* The step now running (1-based): what a collective posted now belongs to. */
int64_t rt_obs_step_now(const rt_obs *o);
void rt_obs_wait(rt_obs *o, uint64_t ns);
typedef enum rt_time_kind { RT_T_POST = 0, RT_T_DATA } rt_time_kind;
void rt_obs_time(rt_obs *o, rt_time_kind kind, uint64_t ns);
void rt_obs_enter(rt_obs *o, int starts_step);
/* The windows a lifecycle call opens or closes; the compute between two
 * calls is the innermost open window's ("forward", "backward", "recompute"). */
typedef enum rt_window { RT_WIN_FWD = 0, RT_WIN_BWD, RT_WIN_RECOMPUTE, RT_WIN_COUNT } rt_window;
void rt_obs_leave(rt_obs *o, int window, int unit, rt_window kind, int ends_step);
hsr_status rt_obs_timing(const rt_obs *o, rt_timing *out);
/* The device clock (a device whose streams can be stamped, with tracing on):
 * stamp(ctx, lane, slot) queues a stamp on lane 0 compute, 1 gather, 2 reduce.
 * rt_obs_mark queues one and returns its slot (NULL: no device clock);
 * rt_obs_dev_span stamps the end on end_lane and keeps the span until both
 * stamps landed; rt_obs_settle moves the landed ones into the trace. */
void rt_obs_set_stamper(rt_obs *o, hsr_status (*stamp)(void *ctx, int lane, _Atomic uint64_t *slot), void *ctx);
int rt_obs_device_clock(const rt_obs *o);
_Atomic uint64_t *rt_obs_mark(rt_obs *o, int lane);
void rt_obs_dev_span(rt_obs *o, int64_t step, span_kind kind, const char *lane, const char *name, int unit,
                     const char *group, uint64_t bytes, _Atomic uint64_t *a, int end_lane);
void rt_obs_settle(rt_obs *o);
void rt_obs_timing_reset(rt_obs *o);

#endif
