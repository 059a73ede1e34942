/* What the engine reports about itself: the memory ledgers (memory held from
 * the allocator, and buffers in use), the lifecycle trace, and the time spent
 * inside engine calls (split into waits on collectives, optimizer math and
 * the rest: the runtime's own bookkeeping).
 *
 * The engine calls in here from its two hooks (rt_mem_*, rt_event) and from
 * the entry and exit of every lifecycle call. Compute spans are not reported
 * by the program: they are the gaps between engine calls while a unit's
 * window is open, attributed to the innermost open window.
 *
 * On a device that can stamp its streams (the sim device), the trace's
 * compute and collective spans are the device's: a stamp queued on the
 * stream before and after the work gives when the stream ran it, so a
 * host that runs ahead does not turn enqueue time into compute or
 * communication. Such spans wait in a list until both stamps have landed. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "internal.h"
#include "common/common_internal.h"
#include "runtime/io/ledger_internal.h"
#include "runtime/runtime_internal.h"

/* Stamp slots in blocks that never move (queued stamps point into them). */
#define SLOTS 256
typedef struct slot_blk {
  struct slot_blk *next;
  _Atomic uint64_t v[SLOTS];
} slot_blk;

typedef struct pend {
  span_kind kind;
  char lane[80];
  const char *name, *group;
  int unit;
  int64_t step;
  uint64_t bytes;
  _Atomic uint64_t *a, *b;
} pend;

struct rt_obs {
  hsr_ledger *held, *live;
  trace_log *trace; /* NULL: tracing off */
  int rank;
  /* open windows, innermost last: unit index and 0 forward / 1 backward */
  int *stack, depth, cap;
  int in_step;
  int64_t step;
  uint64_t step_t0, last_leave, enter_t;
  int nest;
  rt_timing tm;
  const char *(*unit_name)(void *, int);
  void *name_ctx;
  /* device clock (rt_obs_set_stamper) */
  hsr_status (*stamp)(void *ctx, int lane, _Atomic uint64_t *slot);
  void *stamp_ctx;
  slot_blk *slots;
  int nslot;                /* used in the head block */
  _Atomic uint64_t *cstart; /* compute on the device since the last leave */
  pend *pend;
  int npend, cappend;
};

hsr_status rt_obs_create(int rank, const char *(*unit_name)(void *, int), void *ctx, rt_obs **out) {
  rt_obs *o = calloc(1, sizeof *o);
  if (!o) return hsr_error(HSR_ERR_NOMEM, "runtime: out of memory");
  hsr_status st = ledger_create(&o->held);
  if (st == HSR_OK) st = ledger_create(&o->live);
  if (st != HSR_OK) {
    rt_obs_free(o);
    return st;
  }
  o->rank = rank;
  o->unit_name = unit_name;
  o->name_ctx = ctx;
  *out = o;
  return HSR_OK;
}

void rt_obs_free(rt_obs *o) {
  if (!o) return;
  ledger_free(o->held);
  ledger_free(o->live);
  trace_free(o->trace);
  free(o->stack);
  while (o->slots) {
    slot_blk *n = o->slots->next;
    free(o->slots);
    o->slots = n;
  }
  free(o->pend);
  free(o);
}

hsr_ledger *rt_obs_held(rt_obs *o) { return o ? o->held : NULL; }
hsr_ledger *rt_obs_live(rt_obs *o) { return o ? o->live : NULL; }
trace_log *rt_obs_trace(rt_obs *o) { return o ? o->trace : NULL; }

hsr_status rt_obs_trace_enable(rt_obs *o, int on) {
  if (!on) {
    trace_free(o->trace);
    o->trace = NULL;
    return HSR_OK;
  }
  if (o->trace) return HSR_OK;
  return trace_create(o->rank, &o->trace);
}

/* Ledger errors are bookkeeping bugs: they are logged, never fatal to training. */
static void led(hsr_status st) {
  if (st != HSR_OK) HSR_LOG_W("runtime ledger: %s", hsr_last_error());
}

void rt_obs_mem_get(rt_obs *o, mem_cat cat, size_t bytes, int fresh) {
  if (!o) return;
  if (fresh) led(ledger_alloc(o->held, cat, bytes));
  led(ledger_alloc(o->live, cat, bytes));
}

void rt_obs_mem_put(rt_obs *o, mem_cat cat, size_t bytes) {
  if (o) led(ledger_release(o->live, cat, bytes));
}

void rt_obs_mem_free(rt_obs *o, mem_cat cat, size_t bytes, int in_use) {
  if (!o) return;
  led(ledger_release(o->held, cat, bytes));
  if (in_use) led(ledger_release(o->live, cat, bytes));
}

void rt_obs_phase(rt_obs *o, ledger_phase phase, int unit) {
  if (!o) return;
  int64_t s = o->step + 1;
  ledger_set_phase(o->held, phase, unit, s);
  ledger_set_phase(o->live, phase, unit, s);
}

int64_t rt_obs_step_now(const rt_obs *o) { return o ? o->step + 1 : 0; }

/* step 0: the current step */
static void span_in(rt_obs *o, int64_t step, span_kind kind, const char *lane, const char *name, int unit,
                    const char *group, uint64_t t0, uint64_t t1, uint64_t bytes) {
  if (!o->trace || t1 < t0) return;
  trace_span s = {kind,
                      lane,
                      name,
                      unit >= 0 ? o->unit_name(o->name_ctx, unit) : NULL,
                      group,
                      t0,
                      t1,
                      bytes,
                      step > 0 ? step : o->step + 1};
  led(trace_add(o->trace, &s));
}

static void span(rt_obs *o, span_kind kind, const char *lane, const char *name, int unit, const char *group,
                 uint64_t t0, uint64_t t1, uint64_t bytes) {
  span_in(o, 0, kind, lane, name, unit, group, t0, t1, bytes);
}

/* ---- the device clock ---- */

void rt_obs_set_stamper(rt_obs *o, hsr_status (*stamp)(void *ctx, int lane, _Atomic uint64_t *slot), void *ctx) {
  o->stamp = stamp;
  o->stamp_ctx = ctx;
}

int rt_obs_device_clock(const rt_obs *o) { return o && o->stamp && o->trace; }

_Atomic uint64_t *rt_obs_mark(rt_obs *o, int lane) {
  if (!rt_obs_device_clock(o)) return NULL;
  if (!o->slots || o->nslot == SLOTS) {
    slot_blk *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->next = o->slots;
    o->slots = b;
    o->nslot = 0;
  }
  _Atomic uint64_t *s = &o->slots->v[o->nslot++];
  atomic_store(s, 0);
  if (o->stamp(o->stamp_ctx, lane, s) != HSR_OK) {
    HSR_LOG_W("runtime trace: device clock stamp: %s", hsr_last_error());
    return NULL;
  }
  return s;
}

void rt_obs_dev_span(rt_obs *o, int64_t step, span_kind kind, const char *lane, const char *name, int unit,
                     const char *group, uint64_t bytes, _Atomic uint64_t *a, int end_lane) {
  _Atomic uint64_t *b = a ? rt_obs_mark(o, end_lane) : NULL;
  if (!b) return;
  if (grow_array(&o->pend, &o->cappend, o->npend, sizeof *o->pend, 64, "runtime trace") != HSR_OK) return;
  pend *p = &o->pend[o->npend++];
  p->kind = kind;
  snprintf(p->lane, sizeof p->lane, "%s", lane);
  p->name = name, p->group = group, p->unit = unit, p->bytes = bytes;
  p->step = step > 0 ? step : o->step + 1;
  p->a = a, p->b = b;
}

/* Spans whose stamps have both landed go into the trace. */
void rt_obs_settle(rt_obs *o) {
  if (!o) return;
  int k = 0;
  for (int i = 0; i < o->npend; i++) {
    pend *p = &o->pend[i];
    uint64_t t0 = atomic_load_explicit(p->a, memory_order_acquire),
             t1 = atomic_load_explicit(p->b, memory_order_acquire);
    if (t0 && t1)
      span_in(o, p->step, p->kind, p->lane, p->name, p->unit, p->group, t0, t1, p->bytes);
    else
      o->pend[k++] = *p;
  }
  o->npend = k;
}

/* An event's name in the trace (a gather is the collective's name). */
const char *rt_obs_span_name(rt_event_kind kind) {
  static const char *const names[RT_EV_COUNT] = {"all_gather", "reshard",      "reduce_scatter", "all_reduce",
                                                 "optimizer",  "gather_issue", "release"};
  return kind >= 0 && kind < RT_EV_COUNT ? names[kind] : "?";
}

void rt_obs_event(rt_obs *o, int64_t step, rt_event_kind kind, int unit, const char *group, int collective,
                  size_t bytes, uint64_t t0, uint64_t t1) {
  if (!o) return;
  if (kind == RT_EV_OPTIM) {
    o->tm.optim_s += (double)(t1 - t0) * 1e-9;
    if (!rt_obs_device_clock(o)) /* else the compute stream's optimizer span (rt_obs_dev_span) */
      span(o, HSR_SPAN_COMPUTE, "compute", "optimizer", -1, NULL, t0, t1, bytes);
    return;
  }
  if (kind == RT_EV_GATHER && collective) {
    o->tm.gathers++;
    o->tm.gather_bytes += bytes;
    o->tm.gather_s += (double)(t1 - t0) * 1e-9;
  }
  if (!o->trace) return;
  /* the runtime's own work: a reshard, a release, a gather posted, or a copy standing in for a 1-rank gather */
  if (kind == RT_EV_RESHARD || kind == RT_EV_RELEASE || kind == RT_EV_ISSUE || !collective) {
    span(o, HSR_SPAN_RUNTIME, "runtime", kind == RT_EV_GATHER ? "local_copy" : rt_obs_span_name(kind), unit, group, t0,
         t1, bytes);
    return;
  }
  if (rt_obs_device_clock(o) && unit >= 0) return; /* the device's span, stamped on its stream */
  char lane[80];
  snprintf(lane, sizeof lane, "comm %s", group ? group : "?");
  span_in(o, step, HSR_SPAN_COMM, lane, rt_obs_span_name(kind), unit, group, t0, t1, bytes);
}

void rt_obs_wait(rt_obs *o, uint64_t ns) {
  if (o) o->tm.wait_s += (double)ns * 1e-9;
}

void rt_obs_time(rt_obs *o, rt_time_kind kind, uint64_t ns) {
  if (!o) return;
  if (kind == RT_T_POST)
    o->tm.post_s += (double)ns * 1e-9;
  else
    o->tm.data_s += (double)ns * 1e-9;
}

/* Entry of a lifecycle call. starts_step: forward/backward begin open a step. */
void rt_obs_enter(rt_obs *o, int starts_step) {
  if (!o || o->nest++) return;
  uint64_t now = hsr_clock_ns();
  o->enter_t = now;
  if (!o->in_step && starts_step) {
    o->in_step = 1;
    o->step_t0 = now;
  } else if (o->in_step && o->depth > 0) {
    int top = o->stack[o->depth - 1];
    static const char *const win_names[RT_WIN_COUNT] = {"forward", "backward", "recompute"};
    const char *what = win_names[(top + RT_WIN_COUNT) % RT_WIN_COUNT];
    int tu = (top - (top + RT_WIN_COUNT) % RT_WIN_COUNT) / RT_WIN_COUNT;
    uint64_t t0 = o->last_leave;
    o->tm.compute_s += (double)(now - t0) * 1e-9;
    if (rt_obs_device_clock(o)) /* the compute stream's time between the two stamps */
      rt_obs_dev_span(o, 0, HSR_SPAN_COMPUTE, "compute", what, tu, NULL, 0, o->cstart,
                      0);
    else
      span(o, HSR_SPAN_COMPUTE, "compute", what, tu, NULL, t0, now, 0);
  }
}

/* Exit of a lifecycle call. window: +1 opened (unit, backward), -1 closed
 * it, 0 neither; ends_step: hsr_rt_step. */
void rt_obs_leave(rt_obs *o, int window, int unit, rt_window kind, int ends_step) {
  if (!o || --o->nest) return;
  uint64_t now = hsr_clock_ns();
  o->tm.engine_s += (double)(now - o->enter_t) * 1e-9;
  o->tm.calls++;
  int key = unit * RT_WIN_COUNT + (int)kind; /* unit -1 (not a unit call) is a valid key too */
  if (window > 0) {
    if (o->depth == o->cap) {
      int cap = o->cap ? 2 * o->cap : 16, *p = realloc(o->stack, (size_t)cap * sizeof *p);
      if (p) o->stack = p, o->cap = cap;
    }
    if (o->depth < o->cap) o->stack[o->depth++] = key;
  } else if (window < 0) {
    for (int i = o->depth - 1; i >= 0; i--)
      if (o->stack[i] == key) {
        memmove(o->stack + i, o->stack + i + 1, (size_t)(o->depth - i - 1) * sizeof *o->stack);
        o->depth--;
        break;
      }
  }
  if (rt_obs_device_clock(o)) {
    o->cstart = rt_obs_mark(o, 0); /* compute queued from here on is the program's */
    if (ends_step) rt_obs_settle(o);
  }
  if (ends_step && o->in_step) {
    o->tm.steps++;
    o->tm.step_s += (double)(now - o->step_t0) * 1e-9;
    span(o, HSR_SPAN_STEP, "step", "step", -1, NULL, o->step_t0, now, 0);
    o->in_step = 0;
    o->step++;
  }
  o->last_leave = now;
}

hsr_status rt_obs_timing(const rt_obs *o, rt_timing *out) {
  *out = o->tm;
  return HSR_OK;
}

void rt_obs_timing_reset(rt_obs *o) { memset(&o->tm, 0, sizeof o->tm); }
