/* The memory ledger predicted from sizes and policy: a replay of the engine's
 * buffer decisions (runtime/engine.c) over a program of lifecycle calls.
 * Every decision there depends on program order only, so the replay is
 * exact; tests/mr_ledger.c holds the two against each other. */
#include <stdlib.h>
#include <string.h>

#include "hsr/tune_ledger.h"

enum { S_SHARDED = 0, S_GATHERING, S_FULL, S_PARTIAL };

typedef struct {
  int state, from_partial, has_gfull, micro, fwd_pos, is_root;
  size_t L, Ls;
} punit;

typedef struct {
  hsr_mem_cat cat;
  size_t bytes;
  int free, total;
} pool_ent;

typedef struct {
  int unit, has_send, slice_is_gshard;
  hsr_mem_cat send_cat;
  size_t send_bytes;
} pred;

typedef struct {
  const hsr_rt_config *cfg;
  int S, R, K, sharded_params, sharded_grads;
  size_t pes, res;
  punit *u;
  int nu;
  int *order, norder, order_fixed, live;
  pool_ent *pool;
  int npool, cappool;
  pred *q;
  int qn;
  hsr_ledger *held, *use;
  int64_t step;
  hsr_status err;
} sim;

static void get(sim *s, hsr_mem_cat cat, size_t bytes) {
  if (!bytes) bytes = 64; /* as rt_mem_get */
  for (int i = 0; i < s->npool; i++)
    if (s->pool[i].cat == cat && s->pool[i].bytes == bytes) {
      if (s->pool[i].free) {
        s->pool[i].free--;
        hsr_ledger_alloc(s->use, cat, bytes);
        return;
      }
      s->pool[i].total++;
      hsr_ledger_alloc(s->held, cat, bytes);
      hsr_ledger_alloc(s->use, cat, bytes);
      return;
    }
  if (s->npool == s->cappool) {
    int cap = s->cappool ? 2 * s->cappool : 32;
    pool_ent *p = realloc(s->pool, (size_t)cap * sizeof *p);
    if (!p) {
      s->err = hsr_error(HSR_ERR_NOMEM, "ledger prediction: out of memory");
      return;
    }
    s->pool = p;
    s->cappool = cap;
  }
  s->pool[s->npool++] = (pool_ent){cat, bytes, 0, 1};
  hsr_ledger_alloc(s->held, cat, bytes);
  hsr_ledger_alloc(s->use, cat, bytes);
}

static void put(sim *s, hsr_mem_cat cat, size_t bytes) {
  if (!bytes) bytes = 64;
  for (int i = 0; i < s->npool; i++)
    if (s->pool[i].cat == cat && s->pool[i].bytes == bytes && s->pool[i].free < s->pool[i].total) {
      s->pool[i].free++;
      hsr_ledger_release(s->use, cat, bytes);
      return;
    }
  s->err = hsr_error(HSR_ERR_INTERNAL, "ledger prediction: %s buffer of %zu bytes returned but none is in use",
                     hsr_mem_cat_name(cat), bytes);
}

static void phase(sim *s, hsr_phase p, int unit) {
  hsr_ledger_set_phase(s->held, p, unit, s->step + 1);
  hsr_ledger_set_phase(s->use, p, unit, s->step + 1);
}

static void gather_start(sim *s, int ui) {
  punit *u = &s->u[ui];
  get(s, HSR_MEM_FULL_UNIT, u->L * s->pes);
  u->from_partial = u->state == S_PARTIAL;
  u->state = S_GATHERING;
  s->live++;
}

static void make_full(sim *s, int ui) {
  punit *u = &s->u[ui];
  if (u->state == S_SHARDED || u->state == S_PARTIAL) gather_start(s, ui);
  if (u->state == S_GATHERING) {
    if (u->from_partial) put(s, HSR_MEM_PARTIAL_SLICE, u->L / (size_t)s->K * s->pes);
    u->state = S_FULL;
  }
}

static void release_full(sim *s, int ui, int kept_partial) {
  put(s, HSR_MEM_FULL_UNIT, s->u[ui].L * s->pes);
  s->u[ui].state = kept_partial ? S_PARTIAL : S_SHARDED;
  s->live--;
}

static void prefetch(sim *s, int ui, int backward) {
  if (!s->sharded_params || !s->order_fixed || s->cfg->prefetch <= 0) return;
  int pos = s->u[ui].fwd_pos;
  if (pos < 0) return;
  for (int j = 1; j <= s->cfg->prefetch; j++) {
    int p = backward ? pos - j : pos + j;
    if (p < 0 || p >= s->norder) break;
    punit *w = &s->u[s->order[p]];
    int want = backward ? (w->state == S_SHARDED || w->state == S_PARTIAL) : w->state == S_SHARDED;
    if (!want) continue;
    if (s->cfg->max_live && s->live >= s->cfg->max_live) break;
    gather_start(s, s->order[p]);
  }
}

static void red_start(sim *s, int ui) {
  punit *u = &s->u[ui];
  pred r = {.unit = ui, .has_send = 1, .send_cat = HSR_MEM_RS_BUF, .send_bytes = u->L * 4};
  if (s->cfg->reduce_dtype != HSR_F32) {
    get(s, HSR_MEM_STAGING, u->L * s->res);
    put(s, HSR_MEM_RS_BUF, u->L * 4);
    r.send_cat = HSR_MEM_STAGING;
    r.send_bytes = u->L * s->res;
  }
  u->has_gfull = 0;
  get(s, HSR_MEM_AR_BUF, u->Ls * s->res);
  s->q[s->qn++] = r;
}

static void retire(sim *s, int keep) {
  while (s->qn > keep) {
    pred *r = &s->q[0];
    punit *u = &s->u[r->unit];
    if (!r->slice_is_gshard && s->cfg->reduce_dtype != HSR_F32) {
      get(s, HSR_MEM_STAGING, u->Ls * 4);
      put(s, HSR_MEM_STAGING, u->Ls * 4);
    }
    if (r->has_send) put(s, r->send_cat, r->send_bytes);
    put(s, HSR_MEM_AR_BUF, u->Ls * s->res);
    memmove(s->q, s->q + 1, (size_t)(s->qn - 1) * sizeof *s->q);
    s->qn--;
  }
}

static void call(sim *s, const hsr_prog_call *c) {
  const hsr_rt_config *cfg = s->cfg;
  int ui = c->unit;
  punit *u = ui >= 0 && ui < s->nu ? &s->u[ui] : NULL;
  if (c->op != HSR_PROG_STEP && !u) {
    s->err = hsr_error(HSR_ERR_INVALID, "ledger prediction: program names unit %d of %d", ui, s->nu);
    return;
  }
  switch (c->op) {
  case HSR_PROG_FWD_BEGIN:
    phase(s, HSR_PHASE_FORWARD, ui);
    if (!s->order_fixed && u->fwd_pos < 0) {
      u->fwd_pos = s->norder;
      s->order[s->norder++] = ui;
    }
    make_full(s, ui);
    prefetch(s, ui, 0);
    break;
  case HSR_PROG_FWD_END: {
    phase(s, HSR_PHASE_FORWARD, ui);
    if (!s->sharded_params) break;
    hsr_rt_reshard pol = u->is_root && !cfg->root_reshard ? HSR_RT_RESHARD_NONE : cfg->reshard;
    if (pol == HSR_RT_RESHARD_NONE) break;
    if (pol == HSR_RT_RESHARD_PARTIAL) get(s, HSR_MEM_PARTIAL_SLICE, u->L / (size_t)s->K * s->pes);
    release_full(s, ui, pol == HSR_RT_RESHARD_PARTIAL);
    break;
  }
  case HSR_PROG_BWD_BEGIN:
    phase(s, HSR_PHASE_BACKWARD, ui);
    make_full(s, ui);
    if (!u->has_gfull) {
      get(s, HSR_MEM_RS_BUF, u->L * 4);
      u->has_gfull = 1;
    }
    prefetch(s, ui, 1);
    break;
  case HSR_PROG_BWD_END: {
    phase(s, HSR_PHASE_REDUCE, ui);
    int last = u->micro == cfg->micro_batches - 1;
    u->micro++;
    if (s->sharded_params) release_full(s, ui, 0); /* a partial slice is gone once the unit is FULL again */
    if (last || cfg->sync != HSR_RT_SYNC_NONE) {
      red_start(s, ui);
      if (cfg->sync == HSR_RT_SYNC_RS_ONLY && cfg->micro_batches > 1 && s->R > 1 && last) {
        retire(s, 0);
        get(s, HSR_MEM_AR_BUF, u->Ls * s->res);
        s->q[s->qn++] = (pred){.unit = ui, .slice_is_gshard = 1};
      }
    }
    retire(s, 2); /* RT_REDUCTIONS_IN_FLIGHT */
    break;
  }
  case HSR_PROG_STEP:
    phase(s, HSR_PHASE_STEP, -1);
    retire(s, 0);
    s->order_fixed = 1;
    if (cfg->prefetch_step && cfg->prefetch > 0 && s->sharded_params && s->norder > 0 &&
        s->u[s->order[0]].state == S_SHARDED && !(cfg->max_live && s->live >= cfg->max_live))
      gather_start(s, s->order[0]);
    s->step++;
    /* hsr_rt_zero_grad */
    for (int i = 0; i < s->nu; i++) {
      if (s->u[i].has_gfull) put(s, HSR_MEM_RS_BUF, s->u[i].L * 4);
      s->u[i].has_gfull = 0;
      s->u[i].micro = 0;
    }
    break;
  }
}

hsr_status hsr_tune_ledger_predict(const hsr_rt_layout *layout, const int *is_root, const hsr_rt_config *cfg, int S,
                                   int R, const hsr_prog_call *prog, int nprog, int steps, hsr_ledger *held,
                                   hsr_ledger *in_use) {
  if (!layout || !cfg || !prog || nprog < 1 || steps < 1)
    return hsr_error(HSR_ERR_INVALID, "hsr_tune_ledger_predict: NULL or empty argument");
  if (hsr_rt_layout_shards(layout) != S)
    return hsr_error(HSR_ERR_INVALID, "ledger prediction: layout finalized for %d shards, S = %d",
                     hsr_rt_layout_shards(layout), S);
  int K = cfg->reshard == HSR_RT_RESHARD_PARTIAL ? cfg->partial_k : 0;
  if (K < 0 || (K > 0 && S % K))
    return hsr_error(HSR_ERR_INVALID, "ledger prediction: K = %d does not divide S = %d", K, S);
  hsr_ledger *own_h = NULL, *own_u = NULL;
  if (!held) HSR_CHECK(hsr_ledger_create(&own_h));
  if (!in_use && hsr_ledger_create(&own_u) != HSR_OK) {
    hsr_ledger_free(own_h);
    return HSR_ERR_NOMEM;
  }
  sim s = {.cfg = cfg, .S = S, .R = R, .K = K, .held = held ? held : own_h, .use = in_use ? in_use : own_u};
  hsr_ledger_reset(s.held);
  hsr_ledger_reset(s.use);
  s.sharded_params = cfg->strategy == HSR_RT_FSDP || cfg->strategy == HSR_RT_HYBRID;
  s.sharded_grads = s.sharded_params || cfg->strategy == HSR_RT_ZERO2;
  s.pes = hsr_dtype_size(cfg->param_dtype);
  s.res = hsr_dtype_size(cfg->reduce_dtype);
  s.nu = hsr_rt_layout_num_units(layout);
  s.u = calloc((size_t)s.nu + 1, sizeof *s.u);
  s.order = calloc((size_t)s.nu + 1, sizeof *s.order);
  s.q = calloc((size_t)(2 * s.nu + 4), sizeof *s.q);
  if (!s.u || !s.order || !s.q) s.err = hsr_error(HSR_ERR_NOMEM, "ledger prediction: out of memory");
  /* hsr_rt_commit */
  for (int i = 0; i < s.nu && s.err == HSR_OK; i++) {
    punit *u = &s.u[i];
    u->L = hsr_rt_layout_unit_len(layout, i);
    u->Ls = hsr_rt_layout_shard_len(layout, i);
    u->fwd_pos = -1;
    u->is_root = is_root ? is_root[i] : 0;
    get(&s, HSR_MEM_MASTER, u->Ls * 4);
    get(&s, HSR_MEM_MOMENT_M, u->Ls * 4);
    get(&s, HSR_MEM_MOMENT_V, u->Ls * 4);
    get(&s, HSR_MEM_GRAD_SHARD, u->Ls * 4);
    get(&s, HSR_MEM_PARAM_SHARD, (s.sharded_params ? u->Ls : u->L) * s.pes);
    u->state = s.sharded_params ? S_SHARDED : S_FULL;
  }
  for (int k = 0; k < steps && s.err == HSR_OK; k++)
    for (int i = 0; i < nprog && s.err == HSR_OK; i++) {
      /* a reduction queue longer than two per unit means a malformed program */
      if (s.qn >= 2 * s.nu + 2)
        s.err = hsr_error(HSR_ERR_INVALID, "ledger prediction: program never steps");
      else
        call(&s, &prog[i]);
    }
  hsr_status st = s.err;
  free(s.u);
  free(s.order);
  free(s.q);
  free(s.pool);
  hsr_ledger_free(own_h);
  hsr_ledger_free(own_u);
  return st;
}

hsr_status hsr_tune_prog_nested(int nunits, int outer, int micro, hsr_prog_call **calls, int *n) {
  if (!calls || !n || nunits < 1 || outer < 0 || outer > nunits || micro < 1)
    return hsr_error(HSR_ERR_INVALID, "hsr_tune_prog_nested: %d units, %d outer, %d micro-batches", nunits, outer,
                     micro);
  int len = micro * 4 * nunits + 1, k = 0;
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
      c[k++] = (hsr_prog_call){HSR_PROG_BWD_END, u};
    }
    for (int u = outer - 1; u >= 0; u--) c[k++] = (hsr_prog_call){HSR_PROG_BWD_END, u};
  }
  c[k++] = (hsr_prog_call){HSR_PROG_STEP, -1};
  *calls = c;
  *n = k;
  return HSR_OK;
}
