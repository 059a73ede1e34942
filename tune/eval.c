/* One layout evaluated: the runtime's schedule (runtime/sched/schedule.h, the
 * decisions the engine executes) walked over three training steps, every
 * action run on a timeline of the program and its communicators (or CUDA
 * streams), and the third step measured as `hsr bench step` measures it from
 * the trace: the step span, compute, communication (the union of the
 * collectives' spans), its part not covered by compute, all-gather time.
 * Bytes per step are the volumes of the collectives that step issued; the
 * ledger is tune_ledger_predict's over the same program. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/io/trace.h"
#include "runtime/sched/schedule.h"
#include "hsr/tune_ledger.h"
#include "common/dtype_internal.h"
#include "tune_int.h"

#define EV_STEPS 3 /* step 1 records the order, step 2 prefetches, step 3 is steady */

typedef struct ev {
  const tune_model *m;
  const tune_net *net;
  const hsr_rt_config *cfg;
  const tune_shape *shape;
  const rt_layout *lay;
  sched_ctx *sc;
  int S, R, gpu, measure;
  size_t pes, res;
  tl t;
  int last_reduce;
  tune_result *out;
  hsr_status err;
} ev;

static double unit_len(const ev *e, int u) { return (double)rt_layout_unit_len(e->lay, u); }
static double shard_len(const ev *e, int u) { return (double)rt_layout_shard_len(e->lay, u); }
/* the rank's piece (what the optimizer updates) and its accumulator */
static double piece_len(const ev *e, int u) { return (double)sched_piece_len(e->sc, u); }
static double acc_len(const ev *e, int u) { return (double)sched_acc_len(e->sc, u); }
static void data(ev *e, double bytes) { tl_busy(&e->t, bytes / (e->net->data_gbs * 1e9)); }

/* A timeline op as the interpreter's handle: its id + 1 (NULL: none). */
static void *handle(int id) { return id >= 0 ? (void *)(intptr_t)(id + 1) : NULL; }
static int id_of(const void *h) { return h ? (int)((intptr_t)h - 1) : -1; }

static int post(ev *e, int group, int op, double count, size_t es) {
  tune_vol v;
  hsr_status st = tune_volume(e->net, op, &e->shape[group], count, es, &v);
  if (st != HSR_OK) {
    e->err = st;
    return -1;
  }
  if (e->measure) {
    tune_bytes *b = &e->out->bytes[group][op];
    b->calls++, b->sent += v.sent, b->recv += v.recv, b->full += v.full;
    b->fabric_sent += v.fabric_sent, b->fabric_recv += v.fabric_recv;
    e->out->fabric_all_ranks += v.fabric_sent * e->S * e->R;
  }
  /* host: one queue per communicator; CUDA: the all-gather stream and the reduce stream */
  int lane = e->gpu ? (op == HSR_OP_ALLGATHER ? 0 : 1) : group;
  int id = tl_post(&e->t, lane, group, op, &v);
  if (lane == 1 && id >= 0) e->last_reduce = id;
  return id;
}

/* The status the interpreter sees: the first error of the model or the timeline. */
static hsr_status ok(const ev *e) { return e->err != HSR_OK ? e->err : e->t.err; }

/* ---- the timeline as the schedule's executor (sched_exec) ---- */
static hsr_status x_gather(void *ctx, const sched_action *a, void **h) {
  ev *e = ctx;
  if (a->cast) data(e, (double)a->count * (4.0 + (double)e->pes)); /* the input cast from the master */
  if (a->local)
    data(e, unit_len(e, a->unit) * (double)e->pes);
  else
    *h = handle(post(e, a->group, HSR_OP_ALLGATHER, (double)a->count, e->pes));
  return ok(e);
}

static hsr_status x_wait(void *ctx, const sched_action *a, void *h) {
  (void)a;
  ev *e = ctx;
  tl_wait(&e->t, id_of(h));
  return ok(e);
}

static hsr_status x_reshard(void *ctx, const sched_action *a) {
  ev *e = ctx;
  if (a->partial) data(e, (double)a->count * (double)e->pes);
  return ok(e);
}

static hsr_status x_grad_buf(void *ctx, const sched_action *a) {
  ev *e = ctx;
  data(e, unit_len(e, a->unit) * 4);
  return ok(e);
}

static hsr_status x_norm(void *ctx, const sched_action *a) {
  (void)a;
  ev *e = ctx;
  if (e->gpu) tl_wait(&e->t, e->last_reduce);
  double ls = 0;
  for (int u = 0; u < rt_layout_num_units(e->lay); u++) ls += piece_len(e, u);
  tl_compute(&e->t, ls * 4 / (e->net->data_gbs * 1e9)); /* sums of squares: the optimizer's span */
  if (e->S > 1) tl_wait(&e->t, post(e, HSR_RT_GROUP_SHARD, HSR_OP_ALLREDUCE, 1, 8));
  if (sched_outer(e->sc)) tl_wait(&e->t, post(e, HSR_RT_GROUP_REPLICATE, HSR_OP_ALLREDUCE, 1, 8));
  return ok(e);
}

static hsr_status x_optim(void *ctx, const sched_action *a) {
  ev *e = ctx;
  tl_compute(&e->t, piece_len(e, a->unit) * e->net->optim_ns_per_elem * 1e-9);
  return ok(e);
}

static hsr_status x_regather(void *ctx, const sched_action *a, void **h) {
  ev *e = ctx;
  *h = handle(post(e, a->group, HSR_OP_ALLGATHER, (double)a->count, e->pes));
  return ok(e);
}

static hsr_status x_grad_zero(void *ctx, const sched_action *a) {
  ev *e = ctx;
  data(e, acc_len(e, a->unit) * 4);
  return ok(e);
}

static hsr_status x_stage_cast(void *ctx, sched_red *r, void *grad) {
  (void)grad;
  ev *e = ctx;
  data(e, unit_len(e, r->unit) * (4.0 + (double)e->res));
  return ok(e);
}

static hsr_status x_stage1(void *ctx, sched_red *r) {
  ev *e = ctx;
  if (r->local)
    data(e, shard_len(e, r->unit) * (double)e->res);
  else
    r->h = handle(
        post(e, HSR_RT_GROUP_SHARD, r->scatter ? HSR_OP_REDUCE_SCATTER : HSR_OP_ALLREDUCE, (double)r->count, e->res));
  return ok(e);
}

/* Stage 2 and rs_only's deferred stage: the replicate group's all-reduce of
 * the slice, or (outer shard optim) its reduce-scatter into the piece. */
static hsr_status x_stage2(void *ctx, sched_red *r) {
  ev *e = ctx;
  if (r->outer)
    r->h = handle(post(e, HSR_RT_GROUP_REPLICATE, HSR_OP_REDUCE_SCATTER, piece_len(e, r->unit), e->res));
  else
    r->h = handle(post(e, HSR_RT_GROUP_REPLICATE, HSR_OP_ALLREDUCE, shard_len(e, r->unit), e->res));
  return ok(e);
}

static hsr_status x_test(void *ctx, sched_red *r, int *done) {
  ev *e = ctx;
  *done = tl_done(&e->t, id_of(r->h));
  return ok(e);
}

static hsr_status x_red_wait(void *ctx, sched_red *r) {
  ev *e = ctx;
  tl_wait(&e->t, id_of(r->h));
  return ok(e);
}

static hsr_status x_accumulate(void *ctx, sched_red *r, void *stage) {
  (void)stage;
  ev *e = ctx;
  double ls = r->outer ? piece_len(e, r->unit) : shard_len(e, r->unit);
  data(e, r->deferred ? ls * 4 : ls * 8 + (e->cfg->reduce_dtype != HSR_F32 ? ls * (4.0 + (double)e->res) : 0));
  return ok(e);
}

/* Host: a finished stage 1 posts its replicate all-reduce at the next
 * progress point, and a retire waits for its stages. CUDA: the reduce stream
 * orders the stages; the program does not wait for them. */
#define EV_EXEC_COMMON                                                                                     \
  .gather = x_gather, .gather_wait = x_wait, .reshard = x_reshard, .grad_buf = x_grad_buf, .norm = x_norm, \
  .optim = x_optim, .regather = x_regather, .regather_wait = x_wait, .grad_zero = x_grad_zero,             \
  .stage_cast = x_stage_cast, .stage1 = x_stage1, .stage2 = x_stage2, .deferred_ar = x_stage2,             \
  .accumulate = x_accumulate
static const sched_exec exec_host = {EV_EXEC_COMMON, .test = x_test, .wait = x_red_wait};
static const sched_exec exec_gpu = {EV_EXEC_COMMON};
#undef EV_EXEC_COMMON

static void run(ev *e, hsr_status st, const sched_action *acts, int n) {
  if (st == HSR_OK && e->err == HSR_OK && e->t.err == HSR_OK)
    st = sched_run(e->sc, acts, n, e->gpu ? &exec_gpu : &exec_host, e);
  if (st != HSR_OK && e->err == HSR_OK) e->err = st;
}

static double fwd_s(const ev *e, int u) { return (e->m->unit_fwd_ms ? e->m->unit_fwd_ms[u] : e->m->fwd_ms) * 1e-3; }

/* One lifecycle call: the schedule's actions, then the program's compute. */
static void call(ev *e, const hsr_prog_call *c) {
  const sched_action *a = NULL;
  int n = 0, u = c->unit;
  hsr_status st;
  switch (c->op) {
  case HSR_PROG_FWD_BEGIN: st = sched_forward_begin(e->sc, u, &a, &n); break;
  case HSR_PROG_FWD_END: st = sched_forward_end(e->sc, u, &a, &n); break;
  case HSR_PROG_BWD_BEGIN: st = sched_backward_begin(e->sc, u, &a, &n); break;
  case HSR_PROG_BWD_END: st = sched_backward_end(e->sc, u, &a, &n); break;
  case HSR_PROG_RECOMPUTE: st = sched_recompute(e->sc, u, &a, &n); break;
  default: st = sched_step(e->sc, &a, &n); break;
  }
  run(e, st, a, n);
  if (c->op == HSR_PROG_FWD_BEGIN) tl_compute(&e->t, fwd_s(e, u));
  if (c->op == HSR_PROG_RECOMPUTE) { /* the shape's cost per unit, or full: the forward again; selective: a part */
    const double *rc = e->m->unit_recompute_ms[e->cfg->recompute];
    tl_compute(&e->t, rc ? rc[u] * 1e-3
                         : fwd_s(e, u) * (e->cfg->recompute == HSR_RT_RECOMPUTE_FULL ? 1.0 : e->m->selective_frac));
  }
  if (c->op == HSR_PROG_BWD_BEGIN) tl_compute(&e->t, fwd_s(e, u) * e->m->bwd_ratio);
}

/* The measured step's window [s0, s1]: compute, communication and its
 * exposed part, all-gathers, each group's busy time. */
static hsr_status measure(ev *e, double s0, double s1) {
  tl *t = &e->t;
  ival *c = malloc(sizeof *c * (size_t)(t->ncomp + 1)), *m = malloc(sizeof *m * (size_t)(t->nops + 1));
  if (!c || !m) {
    free(c), free(m);
    return hsr_error(HSR_ERR_NOMEM, "tune: out of memory");
  }
  int nc = 0;
  for (int i = 0; i < t->ncomp; i++) {
    double a = t->comp[i].a < s0 ? s0 : t->comp[i].a, b = t->comp[i].b > s1 ? s1 : t->comp[i].b;
    if (b > a) c[nc++] = (ival){a, b};
  }
  ival_merge(c, &nc);
  tune_result *o = e->out;
  for (int pass = -2; pass < HSR_RT_GROUP_COUNT; pass++) { /* -2: all, -1: all-gathers, then per group */
    int nm = 0;
    for (int i = 0; i < t->nops; i++) {
      const tl_op *x = &t->ops[i];
      if ((pass == -1 && x->op != HSR_OP_ALLGATHER) || (pass >= 0 && x->group != pass)) continue;
      double a = x->start < s0 ? s0 : x->start, b = x->end > s1 ? s1 : x->end;
      if (b > a) m[nm++] = (ival){a, b};
    }
    ival_merge(m, &nm);
    double len = ival_length(m, nm) * 1e3, hid = ival_overlap(c, nc, m, nm) * 1e3;
    if (pass == -2)
      o->comm_ms = len, o->exposed_ms = len - hid;
    else if (pass == -1)
      o->ag_ms = len, o->ag_exposed_ms = len - hid;
    else
      o->busy_ms[pass] = len;
  }
  for (int tier = 0; tier < HSR_TUNE_TIER_COUNT; tier++) {
    int nm = 0;
    ival *m2 = realloc(m, sizeof *m * (size_t)(t->nstg + 1));
    if (!m2) break;
    m = m2;
    for (int i = 0; i < t->nstg; i++) {
      double a = t->stg[i].a < s0 ? s0 : t->stg[i].a, b = t->stg[i].b > s1 ? s1 : t->stg[i].b;
      if (t->stg_tier[i] == tier && b > a) m[nm++] = (ival){a, b};
    }
    ival_merge(m, &nm);
    o->tier_busy_ms[tier] = ival_length(m, nm) * 1e3;
  }
  o->compute_ms = ival_length(c, nc) * 1e3;
  o->step_ms = (s1 - s0) * 1e3;
  free(c), free(m);
  return HSR_OK;
}

static hsr_status simulate(ev *e, const int *is_root, const hsr_prog_call *prog, int nprog) {
  double s0 = 0, s1 = 0;
  HSR_CHECK(sched_create(e->cfg, e->S, e->R, e->lay, is_root, &e->sc));
  const sched_action *a = NULL;
  int n = 0;
  hsr_status st = sched_setup(e->sc, &a, &n);
  run(e, st, a, n);
  for (int k = 1; k <= EV_STEPS && e->err == HSR_OK; k++) {
    e->measure = k == EV_STEPS;
    if (e->measure) s0 = e->t.now;
    for (int i = 0; i < nprog && e->err == HSR_OK && e->t.err == HSR_OK; i++) call(e, &prog[i]);
    if (e->measure) s1 = e->t.now;
    st = sched_zero_grad(e->sc, &a, &n);
    run(e, st, a, n);
  }
  e->measure = 0;
  for (int i = 0; i < e->t.nops && e->t.err == HSR_OK; i++) tl_wait(&e->t, i); /* the last step-end prefetch */
  if (e->err == HSR_OK) e->err = e->t.err;
  if (e->err == HSR_OK) e->err = measure(e, s0, s1);
  return e->err;
}

static hsr_status ledger(ev *e, const int *is_root, const hsr_prog_call *prog, int nprog, double params) {
  hsr_ledger *held = NULL;
  HSR_CHECK(ledger_create(&held));
  hsr_status st = tune_ledger_predict(e->lay, is_root, e->cfg, e->S, e->R, prog, nprog, EV_STEPS, held, NULL);
  tune_result *o = e->out;
  if (st == HSR_OK) {
    o->persistent = ledger_persistent(held);
    o->runtime_peak = ledger_runtime_peak(held);
    o->transient_peak = o->runtime_peak - o->persistent;
    o->peak_where = ledger_runtime_peak_where(held);
    for (int c = 0; c < HSR_MEM_CAT_COUNT; c++) o->peak_cat[c] = ledger_peak(held, (mem_cat)c);
    o->peak_total = (double)o->runtime_peak + o->act_bytes;
    o->persistent_per_param = params > 0 ? (double)o->persistent / params : 0;
  }
  ledger_free(held);
  return st;
}

static hsr_status build_layout(const tune_model *m, const hsr_rt_config *cfg, int S, int R, rt_layout **out,
                               double *params) {
  rt_layout *l = NULL;
  HSR_CHECK(rt_layout_create(cfg->align ? cfg->align : 16, &l));
  /* the outer shard cuts every shard into R pieces, as the engine's commit does */
  hsr_status st = cfg->outer_shard == HSR_RT_OUTER_OPTIM ? rt_layout_set_subshards(l, R) : HSR_OK;
  *params = 0;
  for (int u = 0; u < m->units && st == HSR_OK; u++) {
    char name[32];
    int id;
    double p = m->unit_params ? m->unit_params[u] : m->params / m->units;
    int64_t shape[1] = {(int64_t)(p + 0.5)};
    *params += (double)shape[0];
    snprintf(name, sizeof name, "u%d", u);
    st = rt_layout_add_unit(l, name, &id);
    snprintf(name, sizeof name, "u%d.w", u);
    if (st == HSR_OK) st = rt_layout_add_param(l, id, name, 1, shape, 0);
  }
  if (st == HSR_OK) st = rt_layout_finalize(l, S);
  if (st != HSR_OK) rt_layout_free(l), l = NULL;
  *out = l;
  return st;
}

hsr_status tune_eval(const tune_model *m, const tune_net *net, const hsr_rt_config *cfg_in, int S, int R,
                     const tune_shape shapes[HSR_RT_GROUP_COUNT], tune_result *out) {
  if (!m || !net || !cfg_in || !shapes || !out) return hsr_error(HSR_ERR_INVALID, "tune_eval: NULL argument");
  if (m->units < 1 || (!m->unit_params && m->params < m->units))
    return hsr_error(HSR_ERR_INVALID, "tune: a model of %d units and %g parameters (at least one per unit)", m->units,
                     m->params);
  hsr_rt_config cfg = *cfg_in;
  cfg.device = net->device_is_gpu ? HSR_DEVICE_CUDA : HSR_DEVICE_HOST;
  memset(out, 0, sizeof *out);
  out->cfg = cfg;
  out->S = S, out->R = R, out->K = cfg.reshard == HSR_RT_RESHARD_PARTIAL ? cfg.partial_k : shapes[2].n;
  memcpy(out->shape, shapes, sizeof out->shape);
  out->feasible = 1;
  out->act_bytes = m->act_by_policy ? m->act_policy[cfg.recompute] : m->act_bytes;
  int outer = m->root == HSR_TUNE_ROOT_OUTER ? 1 : 0, nprog = 0;
  int *is_root = calloc((size_t)m->units, sizeof *is_root);
  ev e = {.m = m, .net = net, .cfg = &cfg, .shape = shapes, .S = S, .R = R, .gpu = net->device_is_gpu, .out = out};
  e.pes = dtype_size(cfg.param_dtype), e.res = dtype_size(cfg.reduce_dtype), e.last_reduce = -1;
  hsr_prog_call *prog = NULL;
  rt_layout *lay = NULL;
  double params = 0;
  hsr_status st = is_root ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "tune: out of memory");
  if (st == HSR_OK) {
    if (m->root == HSR_TUNE_ROOT_LAST) is_root[m->units - 1] = 1;
    if (outer) is_root[0] = 1;
    st = hsr_tune_prog_nested(m->units, outer, cfg.micro_batches, cfg.recompute, &prog, &nprog);
  }
  if (st == HSR_OK) st = build_layout(m, &cfg, S, R, &lay, &params);
  if (st == HSR_OK) {
    e.lay = lay;
    tl_init(&e.t, net);
    st = simulate(&e, is_root, prog, nprog);
    tl_free(&e.t);
  }
  if (st == HSR_OK) st = ledger(&e, is_root, prog, nprog, params);
  sched_free(e.sc);
  rt_layout_free(lay);
  free(prog), free(is_root);
  return st;
}

hsr_status tune_mesh_shapes(const hsr_cluster *c, const hsr_mesh *m, tune_shape shapes[HSR_RT_GROUP_COUNT]) {
  if (!c || !m || !shapes) return hsr_error(HSR_ERR_INVALID, "tune_mesh_shapes: NULL argument");
  int W = mesh_world(m), nn = cluster_num_nodes(c), nd = cluster_num_domains(c);
  int *g = malloc(sizeof *g * (size_t)W), *pn = calloc((size_t)nn, sizeof *pn),
      *pd = calloc((size_t)nd + 1, sizeof *pd);
  hsr_status st = g && pn && pd ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "tune: out of memory");
  for (int k = 0; k < HSR_RT_GROUP_COUNT && st == HSR_OK; k++) {
    int n = k == 0 ? hsr_mesh_shard(m) : k == 1 ? hsr_mesh_replicate(m) : mesh_partial(m);
    int r0 = mesh_rank_at(m, 0, 0);
    st = k == 0 ? mesh_shard_group(m, r0, g) : k == 1 ? mesh_replicate_group(m, r0, g) : mesh_partial_group(m, r0, g);
    if (st != HSR_OK) break;
    int nodes = 0, domains = 0, per = -1;
    for (int i = 0; i < n; i++) {
      int nd_ = cluster_rank_node(c, g[i]), dm = cluster_rank_domain(c, g[i]);
      if (pn[nd_]++ == 0) nodes++;
      if (dm >= 0 && dm <= nd && pd[dm]++ == 0) domains++;
    }
    for (int i = 0; i < n; i++) { /* uniform: every node of the group holds as many */
      int cnt = pn[cluster_rank_node(c, g[i])];
      per = per < 0 ? cnt : per == cnt ? per : 0;
    }
    for (int i = 0; i < n; i++) {
      pn[cluster_rank_node(c, g[i])] = 0;
      int dm = cluster_rank_domain(c, g[i]);
      if (dm >= 0 && dm <= nd) pd[dm] = 0;
    }
    shapes[k] = (tune_shape){n, nodes, per < 0 ? 0 : per, domains};
  }
  free(g), free(pn), free(pd);
  return st;
}
