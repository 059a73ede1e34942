/* The memory ledger predicted from sizes and policy: the runtime's own
 * schedule (runtime/sched: the decisions the engine executes) run over a
 * program of lifecycle calls by the same interpreter (sched_run), with
 * an executor that only takes buffers from and returns them to a model of
 * the engine's pool. Every decision depends on program order only, so the
 * prediction is exact; tests/mr_sched.c (sched_ledger_4, sched_ledger_8)
 * holds it against the engine's measured ledgers. */
#include <stdlib.h>

#include "common/grow.h"
#include "runtime/sched/schedule.h"
#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"

/* The pool (runtime/engine/pool.c): a buffer comes back only for the same category
 * and size; memory held grows only when none of those is free. */
typedef struct {
  mem_cat cat;
  size_t bytes;
  int free, total;
} pool_ent;

typedef struct {
  pool_ent *pool;
  int npool, cappool;
  hsr_ledger *held, *use;
  int64_t step;
  int gathers, step_gathers; /* all-gathers (not local copies) in the running step; in the last complete one */
  hsr_status err;
} sim;

static void get(sim *s, mem_cat cat, size_t bytes) {
  for (int i = 0; i < s->npool; i++)
    if (s->pool[i].cat == cat && s->pool[i].bytes == bytes) {
      if (s->pool[i].free) {
        s->pool[i].free--;
      } else {
        s->pool[i].total++;
        ledger_alloc(s->held, cat, bytes);
      }
      ledger_alloc(s->use, cat, bytes);
      return;
    }
  hsr_status gs = grow_array(&s->pool, &s->cappool, s->npool, sizeof *s->pool, 32, "ledger prediction");
  if (gs != HSR_OK) {
    s->err = gs;
    return;
  }
  s->pool[s->npool++] = (pool_ent){cat, bytes, 0, 1};
  ledger_alloc(s->held, cat, bytes);
  ledger_alloc(s->use, cat, bytes);
}

static void put(sim *s, mem_cat cat, size_t bytes) {
  for (int i = 0; i < s->npool; i++)
    if (s->pool[i].cat == cat && s->pool[i].bytes == bytes && s->pool[i].free < s->pool[i].total) {
      s->pool[i].free++;
      ledger_release(s->use, cat, bytes);
      return;
    }
  s->err = hsr_error(HSR_ERR_INTERNAL, "ledger prediction: %s buffer of %zu bytes returned but none is in use",
                     mem_cat_name(cat), bytes);
}

static void phase(sim *s, ledger_phase p, int unit) {
  ledger_set_phase(s->held, p, unit, s->step + 1);
  ledger_set_phase(s->use, p, unit, s->step + 1);
}

/* The executor: the pool alone (every other effect is none). */
static hsr_status x_get(void *ctx, int unit, const sched_bufop *b, void **p) {
  (void)unit, (void)p;
  sim *s = ctx;
  get(s, b->cat, b->bytes);
  return s->err;
}

static void x_put(void *ctx, int unit, const sched_bufop *b, void *p) {
  (void)unit, (void)p;
  put(ctx, b->cat, b->bytes);
}

static const sched_exec pool_only = {.get = x_get, .put = x_put};

static void apply(sim *s, sched_ctx *sc, hsr_status st, const sched_action *acts, int n) {
  for (int i = 0; st == HSR_OK && i < n; i++)
    s->gathers += (acts[i].op == HSR_SCHED_GATHER || acts[i].op == HSR_SCHED_REGATHER) && !acts[i].local;
  if (st == HSR_OK) st = sched_run(sc, acts, n, &pool_only, s);
  if (st != HSR_OK && s->err == HSR_OK) s->err = st;
}

static void call(sim *s, sched_ctx *sc, const hsr_prog_call *c) {
  const sched_action *a = NULL;
  int n = 0, ui = c->unit, nu = sched_num_units(sc);
  hsr_status st = HSR_OK;
  if (c->op != HSR_PROG_STEP && (ui < 0 || ui >= nu)) {
    s->err = hsr_error(HSR_ERR_INVALID, "ledger prediction: program names unit %d of %d", ui, nu);
    return;
  }
  switch (c->op) {
  case HSR_PROG_FWD_BEGIN:
    phase(s, HSR_PHASE_FORWARD, ui);
    st = sched_forward_begin(sc, ui, &a, &n);
    apply(s, sc, st, a, n);
    break;
  case HSR_PROG_FWD_END:
    phase(s, HSR_PHASE_FORWARD, ui);
    st = sched_forward_end(sc, ui, &a, &n);
    apply(s, sc, st, a, n);
    break;
  case HSR_PROG_BWD_BEGIN:
    phase(s, HSR_PHASE_BACKWARD, ui);
    st = sched_backward_begin(sc, ui, &a, &n);
    apply(s, sc, st, a, n);
    break;
  case HSR_PROG_BWD_END:
    phase(s, HSR_PHASE_REDUCE, ui);
    st = sched_backward_end(sc, ui, &a, &n);
    apply(s, sc, st, a, n);
    break;
  case HSR_PROG_RECOMPUTE: /* decides nothing: the backward's gather serves it */
    phase(s, HSR_PHASE_RECOMPUTE, ui);
    st = sched_recompute(sc, ui, &a, &n);
    apply(s, sc, st, a, n);
    phase(s, HSR_PHASE_BACKWARD, ui);
    break;
  case HSR_PROG_STEP: /* hsr_rt_step, then hsr_rt_zero_grad */
    phase(s, HSR_PHASE_STEP, -1);
    st = sched_step(sc, &a, &n);
    apply(s, sc, st, a, n);
    s->step++;
    if (s->err == HSR_OK) st = sched_zero_grad(sc, &a, &n);
    apply(s, sc, st, a, n);
    s->step_gathers = s->gathers; /* what the step's hsr_rt_step_info counts */
    s->gathers = 0;
    break;
  default: s->err = hsr_error(HSR_ERR_INVALID, "ledger prediction: program op %d", (int)c->op);
  }
}

hsr_status tune_ledger_predict(const rt_layout *layout, const int *is_root, const hsr_rt_config *cfg, int S, int R,
                               const hsr_prog_call *prog, int nprog, int steps, hsr_ledger *held, hsr_ledger *in_use) {
  return tune_prog_predict(layout, is_root, cfg, S, R, prog, nprog, steps, held, in_use, NULL);
}

hsr_status tune_prog_predict(const rt_layout *layout, const int *is_root, const hsr_rt_config *cfg, int S, int R,
                             const hsr_prog_call *prog, int nprog, int steps, hsr_ledger *held, hsr_ledger *in_use,
                             int *gathers) {
  if (!layout || !cfg || !prog || nprog < 1 || steps < 1)
    return hsr_error(HSR_ERR_INVALID, "tune_ledger_predict: NULL or empty argument");
  sched_ctx *sc = NULL;
  hsr_status st = sched_create(cfg, S, R, layout, is_root, &sc);
  if (st != HSR_OK) return hsr_error(st, "ledger prediction: %s", hsr_last_error());
  hsr_ledger *own_h = NULL, *own_u = NULL;
  if (!held) st = ledger_create(&own_h);
  if (st == HSR_OK && !in_use) st = ledger_create(&own_u);
  sim s = {.held = held ? held : own_h, .use = in_use ? in_use : own_u, .err = st};
  if (s.err == HSR_OK) {
    ledger_reset(s.held);
    ledger_reset(s.use);
    const sched_action *a = NULL;
    int n = 0;
    st = sched_setup(sc, &a, &n); /* hsr_rt_commit */
    apply(&s, sc, st, a, n);
  }
  int nu = sched_num_units(sc);
  for (int k = 0; k < steps && s.err == HSR_OK; k++)
    for (int i = 0; i < nprog && s.err == HSR_OK; i++) {
      /* a reduction queue longer than two per unit means a malformed program */
      if (sched_queued(sc) >= 2 * nu + 2)
        s.err = hsr_error(HSR_ERR_INVALID, "ledger prediction: program never steps");
      else
        call(&s, sc, &prog[i]);
    }
  st = s.err;
  if (st == HSR_OK && gathers) *gathers = s.step_gathers;
  sched_free(sc);
  free(s.pool);
  ledger_free(own_h);
  ledger_free(own_u);
  return st;
}

hsr_status hsr_tune_prog_nested(int nunits, int outer, int micro, hsr_rt_recompute recompute, hsr_prog_call **calls,
                                int *n) {
  if (!calls || !n || nunits < 1 || outer < 0 || outer > nunits || micro < 1)
    return hsr_error(HSR_ERR_INVALID, "hsr_tune_prog_nested: %d units, %d outer, %d micro-batches", nunits, outer,
                     micro);
  int len = micro * 5 * nunits + 1, k = 0;
  hsr_prog_call *c = malloc((size_t)len * sizeof *c);
  if (!c) return hsr_error(HSR_ERR_NOMEM, "hsr_tune_prog_nested: out of memory");
  for (int m = 0; m < micro; m++) {
    for (int u = 0; u < outer; u++) c[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, u};
    for (int u = outer; u < nunits; u++) {
      c[k++] = (hsr_prog_call){HSR_PROG_FWD_BEGIN, u};
      c[k++] = (hsr_prog_call){HSR_PROG_FWD_END, u};
    }
    for (int u = outer - 1; u >= 0; u--) c[k++] = (hsr_prog_call){HSR_PROG_FWD_END, u};
    for (int u = 0; u < outer; u++) c[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, u};
    for (int u = nunits - 1; u >= outer; u--) {
      c[k++] = (hsr_prog_call){HSR_PROG_BWD_BEGIN, u};
      if (recompute != HSR_RT_RECOMPUTE_NONE) c[k++] = (hsr_prog_call){HSR_PROG_RECOMPUTE, u};
      c[k++] = (hsr_prog_call){HSR_PROG_BWD_END, u};
    }
    for (int u = outer - 1; u >= 0; u--) c[k++] = (hsr_prog_call){HSR_PROG_BWD_END, u};
  }
  c[k++] = (hsr_prog_call){HSR_PROG_STEP, -1};
  *calls = c;
  *n = k;
  return HSR_OK;
}
