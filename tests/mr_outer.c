/* The engine's side of replica groups (hsr/ft.h), launched for real on 2
 * ranks: the outer reduction (cfg.outer) and installing a peer's state.
 *
 *   order    the outer reduction runs after the job's reductions and before
 *            the gradient hook: it sees the synchronized gradient shards
 *            (every element equals what rt_grad_read returns without it)
 *            and what it writes is what the gradient hook, the norm and AdamW
 *            read (scaled by 1/2: the norm is exactly half the plain run's)
 *   drop     a step the outer reduction drops changes nothing (parameters,
 *            moments and the step count bitwise as before, info.dropped set);
 *            retrying it gives bitwise the uninterrupted run
 *   install  engine B takes engine A's master weights and moments after 3
 *            steps (rt_state_installed_at); both then train 3 more steps to
 *            bitwise equal parameters (fsdp, zero2, ddp: the re-gather)
 *   slices   outer_replicas / outer_rank place the job's data slices among
 *            every replica's (dp rank and size), and a bad outer_rank is refused
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "mlp.h"

#define BATCH 16

static int g_rank;
static int g_fail;

#include "mr_check.h"

static const mlp_cfg model = {.layers = 2, .dim = 13, .in_dim = 11, .classes = 5, .seed = 3};

static hsr_rt_config base_cfg(hsr_rt_strategy s) {
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = s;
  c.shard = s == HSR_RT_DDP ? 1 : 2;
  c.replicate = s == HSR_RT_DDP ? 2 : 1;
  c.num_groups = 2;
  c.groups[0] = (hsr_rt_opt_group){3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  c.groups[1] = (hsr_rt_opt_group){3e-3f, 0.9f, 0.999f, 1e-8f, 0.0f};
  c.clip = 0.5; /* active: the norm matters */
  return c;
}

typedef struct env {
  hsr_boot *boot;
  hsr_comm *world;
  hsr_cluster *cl;
} env;

typedef struct run {
  hsr_rt *rt;
  mlp_rt_ctx *x;
} run;

static int open_run(env *e, hsr_rt_config *cfg, run *r) {
  OK(hsr_rt_create(e->boot, e->world, e->cl, cfg, &r->rt));
  OK(mlp_rt_setup(&model, r->rt));
  OK(mlp_rt_ctx_create(&model, r->rt, HSR_F32, &r->x));
  return 0;
}

static int close_run(run *r) {
  mlp_rt_ctx_free(r->x);
  OK(hsr_rt_destroy(r->rt));
  return 0;
}

/* Every parameter, concatenated in registration order (collective). */
static int read_params(hsr_rt *rt, float **out, size_t *n) {
  const rt_layout *l = rt_get_layout(rt);
  size_t tot = 0;
  for (int i = 0; i < rt_layout_num_params(l); i++) {
    rt_param_info p;
    OK(rt_layout_param(l, i, &p));
    tot += p.numel;
  }
  float *v = malloc((tot ? tot : 1) * sizeof *v);
  if (!v) FAIL("out of memory");
  size_t o = 0;
  for (int i = 0; i < rt_layout_num_params(l); i++) {
    rt_param_info p;
    OK(rt_layout_param(l, i, &p));
    OK(rt_param_read(rt, p.name, v + o));
    o += p.numel;
  }
  *out = v;
  *n = tot;
  return 0;
}

/* This rank's master, m and v of every unit, concatenated. */
static int read_state(hsr_rt *rt, float **out, size_t *n) {
  int U = rt_layout_num_units(rt_get_layout(rt));
  size_t tot = 0;
  for (int u = 0; u < U; u++) {
    rt_slice s;
    OK(rt_slice_get(rt, u, &s));
    tot += 3 * s.len;
  }
  float *v = malloc((tot ? tot : 1) * sizeof *v), *p = v;
  if (!v) FAIL("out of memory");
  for (int u = 0; u < U; u++) {
    rt_slice s;
    OK(rt_slice_get(rt, u, &s));
    memcpy(p, s.master, s.len * 4), p += s.len;
    memcpy(p, s.m, s.len * 4), p += s.len;
    memcpy(p, s.v, s.len * 4), p += s.len;
  }
  *out = v;
  *n = tot;
  return 0;
}

/* ---- order ---- */
typedef struct order_ctx {
  float *seen[16]; /* the shards as the outer reduction found them, per unit */
  int outer_calls, hook_calls, bad;
  double scale;
} order_ctx;

static hsr_status order_outer(hsr_rt *rt, void *ctx, int *commit) {
  order_ctx *o = ctx;
  int U = rt_layout_num_units(rt_get_layout(rt));
  for (int u = 0; u < U; u++) {
    rt_slice s;
    HSR_CHECK(rt_slice_get(rt, u, &s));
    free(o->seen[u]);
    o->seen[u] = malloc((s.len ? s.len : 1) * sizeof(float));
    if (!o->seen[u]) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    memcpy(o->seen[u], s.grad, s.len * sizeof(float));
    for (size_t j = 0; j < s.len; j++) s.grad[j] = (float)(s.grad[j] * o->scale);
  }
  o->outer_calls++;
  *commit = 1;
  return HSR_OK;
}

/* The gradient hook reads the full gradient: on this rank's slice it must be
 * what the outer reduction left. */
static hsr_status order_hook(hsr_rt *rt, void *ctx) {
  order_ctx *o = ctx;
  const rt_layout *l = rt_get_layout(rt);
  int me = hsr_comm_rank(hsr_rt_world(rt)) % rt_shard(rt);
  o->hook_calls++;
  for (int i = 0; i < rt_layout_num_params(l); i++) {
    rt_param_info p;
    HSR_CHECK(rt_layout_param(l, i, &p));
    float *g = malloc((p.numel ? p.numel : 1) * sizeof *g);
    if (!g) return hsr_error(HSR_ERR_NOMEM, "out of memory");
    hsr_status st = rt_grad_read(rt, p.name, g);
    size_t Ls = rt_layout_shard_len(l, p.unit), lo = (size_t)me * Ls;
    for (size_t j = 0; st == HSR_OK && j < p.numel; j++) {
      size_t at = p.offset + j;
      if (at < lo || at >= lo + Ls) continue;
      float want = (float)(o->seen[p.unit][at - lo] * o->scale);
      if (g[j] != want && o->bad++ < 3)
        CHECK(0, "order: %s[%zu]: the gradient hook reads %.9g, the outer reduction left %.9g", p.name, j, g[j], want);
    }
    free(g);
    HSR_CHECK(st);
  }
  return HSR_OK;
}

static int case_order(env *e) {
  hsr_rt_config c = base_cfg(HSR_RT_FSDP);
  run plain, hooked;
  double n_plain[4], n_hooked[4], loss;
  if (open_run(e, &c, &plain)) return 1;
  for (int s = 0; s < 4; s++) {
    hsr_rt_step_info in;
    OK(mlp_rt_train_step(plain.x, s, BATCH, 1, &loss, &in));
    n_plain[s] = in.grad_norm;
  }
  if (close_run(&plain)) return 1;
  order_ctx o = {.scale = 0.5};
  c.outer = order_outer, c.outer_ctx = &o, c.grad_hook = order_hook, c.grad_hook_ctx = &o;
  if (open_run(e, &c, &hooked)) return 1;
  for (int s = 0; s < 4; s++) {
    hsr_rt_step_info in;
    /* step 1 is the same in both runs: the same weights, data and gradient */
    OK(mlp_rt_train_step(hooked.x, s, BATCH, 1, &loss, &in));
    n_hooked[s] = in.grad_norm;
    CHECK(!in.dropped && in.step == s + 1, "order: step %d: dropped %d, step %lld", s + 1, in.dropped,
          (long long)in.step);
  }
  if (close_run(&hooked)) return 1;
  CHECK(o.outer_calls == 4 && o.hook_calls == 4, "order: outer reduction ran %d times, gradient hook %d, in 4 steps",
        o.outer_calls, o.hook_calls);
  CHECK(o.bad == 0, "order: %d gradient elements differ from what the outer reduction left", o.bad);
  /* halving every element halves the norm exactly (a power of two) */
  CHECK(n_hooked[0] == 0.5 * n_plain[0], "order: step 1 norm %.9g with the outer reduction halving it, %.9g without",
        n_hooked[0], n_plain[0]);
  for (int u = 0; u < 16; u++) free(o.seen[u]);
  return 0;
}

/* ---- drop ---- */
typedef struct drop_ctx {
  int calls, drop_at; /* the call (1-based) that drops */
} drop_ctx;

static hsr_status drop_outer(hsr_rt *rt, void *ctx, int *commit) {
  (void)rt;
  drop_ctx *d = ctx;
  *commit = ++d->calls != d->drop_at;
  return HSR_OK;
}

static int case_drop(env *e, hsr_rt_strategy strat) {
  const char *sn = rt_strategy_name(strat);
  hsr_rt_config c = base_cfg(strat);
  drop_ctx d = {0, 0};
  c.outer = drop_outer, c.outer_ctx = &d;
  run a, b;
  double loss;
  float *pa, *pb, *p0, *p1, *s0, *s1;
  size_t n, m;
  if (open_run(e, &c, &a)) return 1;
  for (int s = 0; s < 6; s++) OK(mlp_rt_train_step(a.x, s, BATCH, 1, &loss, NULL));
  if (read_params(a.rt, &pa, &n) || close_run(&a)) return 1;
  drop_ctx d2 = {0, 3};
  c.outer_ctx = &d2;
  if (open_run(e, &c, &b)) return 1;
  for (int s = 0; s < 6;) {
    hsr_rt_step_info in;
    int dropping = d2.calls + 1 == d2.drop_at;
    if (dropping && (read_params(b.rt, &p0, &n) || read_state(b.rt, &s0, &m))) return 1;
    OK(mlp_rt_train_step(b.x, s, BATCH, 1, &loss, &in));
    if (dropping) {
      CHECK(in.dropped && in.step == s, "%s drop: the dropped step reports dropped %d, step %lld (want 1, %d)", sn,
            in.dropped, (long long)in.step, s);
      CHECK(rt_get_step(b.rt) == s, "%s drop: the engine's step is %lld after a dropped step %d", sn,
            (long long)rt_get_step(b.rt), s + 1);
      if (read_params(b.rt, &p1, &n) || read_state(b.rt, &s1, &m)) return 1;
      CHECK(!memcmp(p0, p1, n * 4), "%s drop: a dropped step changed the parameters", sn);
      CHECK(!memcmp(s0, s1, m * 4), "%s drop: a dropped step changed the master weights or moments", sn);
      free(p0), free(p1), free(s0), free(s1);
      continue; /* the same step again */
    }
    CHECK(!in.dropped && in.step == s + 1, "%s drop: step %d: dropped %d, step %lld", sn, s + 1, in.dropped,
          (long long)in.step);
    s++;
  }
  CHECK(d2.calls == 7, "%s drop: %d outer reductions for 6 steps and one retry", sn, d2.calls);
  if (read_params(b.rt, &pb, &n) || close_run(&b)) return 1;
  CHECK(!memcmp(pa, pb, n * 4), "%s drop: the run with a dropped and retried step differs from the uninterrupted one",
        sn);
  free(pa), free(pb);
  return 0;
}

/* ---- install ---- */
static int case_install(env *e, hsr_rt_strategy strat) {
  const char *sn = rt_strategy_name(strat);
  hsr_rt_config c = base_cfg(strat);
  run a, b;
  double la, lb;
  if (open_run(e, &c, &a) || open_run(e, &c, &b)) return 1;
  for (int s = 0; s < 3; s++) OK(mlp_rt_train_step(a.x, s, BATCH, 1, &la, NULL));
  int U = rt_layout_num_units(rt_get_layout(a.rt));
  for (int u = 0; u < U; u++) {
    rt_slice x, y;
    OK(rt_slice_get(a.rt, u, &x));
    OK(rt_slice_get(b.rt, u, &y));
    CHECK(x.len == y.len, "%s install: unit %d shard %zu vs %zu elements", sn, u, x.len, y.len);
    memcpy(y.master, x.master, x.len * 4);
    memcpy(y.m, x.m, x.len * 4);
    memcpy(y.v, x.v, x.len * 4);
  }
  OK(rt_state_installed_at(b.rt, rt_get_step(a.rt)));
  CHECK(rt_get_step(b.rt) == 3, "%s install: step %lld after installing step 3", sn, (long long)rt_get_step(b.rt));
  for (int s = 3; s < 6; s++) {
    OK(mlp_rt_train_step(a.x, s, BATCH, 1, &la, NULL));
    OK(mlp_rt_train_step(b.x, s, BATCH, 1, &lb, NULL));
    CHECK(la == lb, "%s install: step %d loss %.9g (source) vs %.9g (installed)", sn, s + 1, la, lb);
  }
  float *pa, *pb;
  size_t n;
  if (read_params(a.rt, &pa, &n) || read_params(b.rt, &pb, &n)) return 1;
  CHECK(!memcmp(pa, pb, n * 4), "%s install: parameters differ after 3 more steps", sn);
  free(pa), free(pb);
  /* inside a step it is refused */
  OK(hsr_rt_forward_begin(b.rt, 0));
  CHECK(rt_state_installed_at(b.rt, 3) == HSR_ERR_STATE, "%s install: accepted inside a unit's window", sn);
  OK(hsr_rt_forward_end(b.rt, 0));
  return close_run(&a) || close_run(&b);
}

/* ---- slices ---- */
static int case_slices(env *e) {
  hsr_rt_config c = base_cfg(HSR_RT_FSDP);
  c.outer_replicas = 3, c.outer_rank = 1;
  run r;
  if (open_run(e, &c, &r)) return 1;
  int me = hsr_comm_rank(e->world);
  CHECK(hsr_rt_dp_rank(r.rt) == 2 + me && hsr_rt_dp_size(r.rt) == 6,
        "slices: replica 1 of 3, shard rank %d: dp rank %d of %d (want %d of 6)", me, hsr_rt_dp_rank(r.rt),
        hsr_rt_dp_size(r.rt), 2 + me);
  if (close_run(&r)) return 1;
  c.outer_rank = 3;
  hsr_rt *bad = NULL;
  hsr_status st = hsr_rt_create(e->boot, e->world, e->cl, &c, &bad);
  CHECK(st == HSR_ERR_INVALID && strstr(hsr_last_error(), "outer replica 3 of 3"),
        "slices: outer_rank 3 of 3 gave %s (%s)", hsr_status_str(st), hsr_last_error());
  hsr_rt_destroy(bad);
  return 0;
}

int main(int argc, char **argv) {
  (void)argc, (void)argv;
  mlp_blas_threads(1);
  env e = {0};
  hsr_topo *t = NULL;
  OK(hsr_boot_init(&e.boot));
  g_rank = hsr_boot_rank(e.boot);
  if (hsr_boot_size(e.boot) != 2) FAIL("run on 2 ranks (got %d)", hsr_boot_size(e.boot));
  OK(hsr_comm_world(e.boot, HSR_BACKEND_HOST, &e.world));
  OK(topo_discover(NULL, &t));
  OK(cluster_gather(e.boot, t, &e.cl));
  int rc = case_order(&e);
  hsr_rt_strategy strats[] = {HSR_RT_FSDP, HSR_RT_ZERO2, HSR_RT_DDP};
  for (int i = 0; i < 3 && !rc; i++) rc = case_drop(&e, strats[i]) || case_install(&e, strats[i]);
  if (!rc) rc = case_slices(&e);
  cluster_free(e.cl);
  topo_free(t);
  OK(hsr_comm_free(e.world));
  OK(hsr_boot_finalize(e.boot));
  if (!rc && !g_fail && g_rank == 0) printf("mr_outer: all cases passed\n");
  return rc || g_fail;
}
