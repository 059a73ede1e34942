/* Multi-rank tests of the engine, launched for real.
 *
 *   mr_runtime equiv SPEC...   each SPEC (k=v,k=v,...) trains the example model
 *                              10 steps and compares every parameter with the
 *                              single-rank reference (whole batch, plain AdamW),
 *                              and EVERY step the global gradient norm before
 *                              clipping and every synchronized gradient (read in
 *                              the engine's gradient hook, before the optimizer:
 *                              a wrong 1/N or 1/M scale shows there even though
 *                              clipped AdamW hides it in the parameters),
 *                              checks the per-step collective counts against
 *                              what the policy implies, that the loss falls,
 *                              that steady-state steps allocate nothing, and
 *                              (twice=1) that a second run is bitwise identical.
 *   mr_runtime bad             bad use: view outside its window (and NaN
 *                              poison of a stale view, also as HSR_POISON in
 *                              each spelling), unit registered after
 *                              the first step, layout mismatch across ranks,
 *                              K not dividing S.
 *
 * SPEC keys: strategy, S, R, reshard, prefetch, live, sync, micro, clip, pdt,
 * rdt, root (root_reshard), outer (outer_shard: none | optim), twice, device (host | cuda | cuda:N: the engine
 * then creates its own NCCL world; exit 77 when no GPU is usable; f32
 * tolerance 1e-4, since cuBLAS and CUDA's tanhf/exp round differently from
 * OpenBLAS and glibc). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "collectives/comm_internal.h"
#include "common/env.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "kernels/kernels_internal.h"
#include "mlp.h"

#define STEPS 10
#define BATCH g_batch
static int g_batch = 32; /* global batch: --batch N before the mode (a multiple of the data-parallel ranks) */

static int g_rank;
static int g_fail;

#include "mr_check.h"
#include "mr_spec.h"

/* odd sizes: parameters straddle shard boundaries and leave alignment gaps */
static const mlp_cfg model = {.layers = 3, .dim = 13, .in_dim = 11, .classes = 7, .seed = 7};
static const mlp_opt opt = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};

typedef struct spec {
  hsr_rt_config cfg;
  int twice;
  char same[16]; /* configurations with the same tag must give bitwise identical parameters */
  char text[256];
} spec;

static int parse_spec(const char *s, spec *out) {
  hsr_rt_config *c = &out->cfg;
  hsr_rt_config_default(c);
  c->num_groups = 2;
  c->groups[0] = (hsr_rt_opt_group){opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay};
  c->groups[1] = (hsr_rt_opt_group){opt.lr, opt.beta1, opt.beta2, opt.eps, 0.0f};
  c->poison = 1;
  out->twice = 0;
  out->same[0] = 0;
  snprintf(out->text, sizeof out->text, "%s", s);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *v = strchr(kv, '=');
    if (!v) return fprintf(stderr, "bad spec item '%s'\n", kv), 1;
    *v++ = 0;
    hsr_status st = HSR_OK;
    if (!mr_spec_policy(c, kv, v, &st)) {
      if (!strcmp(kv, "twice"))
        out->twice = atoi(v);
      else if (!strcmp(kv, "same"))
        snprintf(out->same, sizeof out->same, "%s", v);
      else
        return fprintf(stderr, "unknown spec key '%s'\n", kv), 1;
    }
    if (st != HSR_OK) return fprintf(stderr, "spec '%s': %s\n", s, hsr_last_error()), 1;
  }
  return 0;
}

/* What the policy implies, per step and rank. */
static void expected_calls(const hsr_rt_config *c, int S, int R, int K, int U,
                           uint64_t e[HSR_RT_GROUP_COUNT][HSR_OP_COUNT]) {
  memset(e, 0, sizeof(uint64_t) * HSR_RT_GROUP_COUNT * HSR_OP_COUNT);
  int M = c->micro_batches;
  int sharded = c->strategy == HSR_RT_FSDP || c->strategy == HSR_RT_HYBRID;
  int sgrads = sharded || c->strategy == HSR_RT_ZERO2;
  int nred = c->sync == HSR_RT_SYNC_NONE ? 1 : M; /* shard-group reductions per unit */
  if (S > 1) {
    if (sharded) {
      /* forward: every unit; backward: every unit that was resharded (the root is kept unless root=1) */
      int resharded = c->root_reshard ? U : U - 1;
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] = (uint64_t)(M * U);
      if (c->reshard == HSR_RT_RESHARD_FULL) e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] += (uint64_t)(M * resharded);
      if (c->reshard == HSR_RT_RESHARD_PARTIAL && K > 1)
        e[HSR_RT_GROUP_PARTIAL][HSR_OP_ALLGATHER] = (uint64_t)(M * resharded);
    } else if (c->strategy != HSR_RT_DDP) {
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] = (uint64_t)U; /* after the step */
    }
    if (sgrads)
      e[HSR_RT_GROUP_SHARD][HSR_OP_REDUCE_SCATTER] = (uint64_t)(U * nred);
    else
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLREDUCE] = (uint64_t)(U * nred);
    e[HSR_RT_GROUP_SHARD][HSR_OP_ALLREDUCE] += 1; /* the gradient norm */
  }
  if (R > 1) {
    int ars = c->sync == HSR_RT_SYNC_FULL ? M : 1;
    if (c->sync == HSR_RT_SYNC_RS_ONLY) ars = 1;
    if (c->outer_shard == HSR_RT_OUTER_OPTIM) {
      /* the replicate stage is a reduce-scatter into the rank's piece; the step gathers the
       * shard back from the pieces, and the norm's partial sums meet over R too */
      e[HSR_RT_GROUP_REPLICATE][HSR_OP_REDUCE_SCATTER] = (uint64_t)(U * ars);
      e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLGATHER] = (uint64_t)U;
      e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE] = 1;
    } else {
      e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE] = (uint64_t)(U * ars);
    }
  }
}

typedef struct ref_cache {
  double clip;
  float *p[64][4];
  float *g[STEPS][64][4]; /* each step's gradient (whole batch, before clipping) */
  double loss[STEPS], norm[STEPS];
  int valid;
} ref_cache;

static void ref_free(ref_cache *rc) {
  if (!rc->valid) return;
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) {
      free(rc->p[u][k]);
      for (int s = 0; s < STEPS; s++) free(rc->g[s][u][k]);
    }
  rc->valid = 0;
}

static float *copy_of(const float *v, size_t n) {
  float *c = malloc((n ? n : 1) * sizeof(float));
  if (c) memcpy(c, v, n * sizeof(float));
  return c;
}

static int reference(double clip, ref_cache *rc) {
  if (rc->valid && rc->clip == clip) return 0;
  ref_free(rc);
  mlp_opt o = opt;
  o.clip = clip;
  mlp_ref *r;
  OK(mlp_ref_create(&model, &o, BATCH, &r));
  for (int s = 0; s < STEPS; s++) {
    OK(mlp_ref_step(r, s, &rc->loss[s], &rc->norm[s]));
    for (int u = 0; u < mlp_num_units(&model); u++)
      for (int k = 0; k < 4; k++) rc->g[s][u][k] = copy_of(mlp_ref_grad(r, u, k), mlp_param_numel(&model, u, k));
  }
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) rc->p[u][k] = copy_of(mlp_ref_param(r, u, k), mlp_param_numel(&model, u, k));
  mlp_ref_free(r);
  rc->clip = clip;
  rc->valid = 1;
  return 0;
}

/* Largest |a - b| over a tensor, relative to the largest |b| (1 when b is all zero). */
static double rel_diff(const float *a, const float *b, size_t n) {
  double md = 0, mr = 0;
  for (size_t j = 0; j < n; j++) {
    double d = fabs((double)a[j] - b[j]);
    md = d > md ? d : md;
    mr = fabs(b[j]) > mr ? fabs(b[j]) : mr;
  }
  return md / (mr > 0 ? mr : 1);
}

/* The gradient hook's view of a run: every synchronized gradient of the
 * step against the reference's gradient of the same step. */
typedef struct grad_check {
  const spec *sp;
  const ref_cache *rc;
  double tol, worst;
  int step, bad;
  float *buf;
} grad_check;

static hsr_status check_grads(hsr_rt *rt, void *ctx) {
  grad_check *gc = ctx;
  char name[64];
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) {
      size_t n = mlp_param_numel(&model, u, k);
      mlp_param_name(u, k, name, sizeof name);
      HSR_CHECK(rt_grad_read(rt, name, gc->buf));
      if (gc->step >= STEPS) continue;
      double rel = rel_diff(gc->buf, gc->rc->g[gc->step][u][k], n);
      gc->worst = rel > gc->worst ? rel : gc->worst;
      if (!(rel <= gc->tol) && gc->bad++ < 3) /* the first few: a wrong scale shows everywhere */
        CHECK(0, "%s: step %d: synchronized gradient of %s differs from the reference's: relative %.3g > %.0e",
              gc->sp->text, gc->step + 1, name, rel, gc->tol);
    }
  gc->step++;
  return HSR_OK;
}

/* Trains one configuration; params[u][k] receives the final master values;
 * the gradients and their norm are checked every step. */
static int train(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const spec *sp, const ref_cache *rc,
                 float *params[64][4], double loss[STEPS], double *gworst) {
  hsr_rt *rt = NULL;
  int f32 = sp->cfg.param_dtype == HSR_F32 && sp->cfg.reduce_dtype == HSR_F32;
  size_t most = 1;
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) most = mlp_param_numel(&model, u, k) > most ? mlp_param_numel(&model, u, k) : most;
  grad_check gc = {
      sp, rc, f32 ? (sp->cfg.device == HSR_DEVICE_CUDA ? 1e-3 : 1e-4) : 1e-1, 0, 0, 0, malloc(most * sizeof(float))};
  hsr_rt_config cfg = sp->cfg;
  cfg.grad_hook = check_grads;
  cfg.grad_hook_ctx = &gc;
  /* a device run gets the engine's own NCCL world */
  OK(hsr_rt_create(boot, cfg.device == HSR_DEVICE_CUDA ? NULL : world, cl, &cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  mlp_rt_ctx *x = NULL;
  OK(mlp_rt_ctx_create(&model, rt, sp->cfg.param_dtype, &x));
  int S = rt_shard(rt), R = rt_replicate(rt), K = rt_partial(rt), U = mlp_num_units(&model);
  uint64_t e[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  expected_calls(&sp->cfg, S, R, K, U, e);
  rt_stats st3 = {0}, st;
  for (int s = 0; s < STEPS; s++) {
    hsr_rt_step_info info;
    OK(mlp_rt_train_step(x, s, BATCH, sp->cfg.micro_batches, &loss[s], &info));
    CHECK(info.step == s + 1, "%s: step counter %lld", sp->text, (long long)info.step);
    /* the step-end prefetch: the next step's first gather is counted by the step that issues it,
     * so step 1 holds one more (from step 2 on each forward starts with that unit gathered) */
    int pstep = s == 0 && sp->cfg.prefetch_step && sp->cfg.prefetch > 0 && S > 1 &&
                rt_strategy_sharding(sp->cfg.strategy).params;
    for (int g = 0; g < HSR_RT_GROUP_COUNT; g++)
      for (int op = 0; op < HSR_OP_COUNT; op++) {
        uint64_t want = e[g][op] + (pstep && g == HSR_RT_GROUP_SHARD && op == HSR_OP_ALLGATHER);
        CHECK(info.calls[g][op] == want, "%s (mesh %dx%d K %d): step %d: %s %s calls %llu, policy implies %llu",
              sp->text, R, S, K, s + 1, rt_group_name((hsr_rt_group)g), op_name((hsr_op)op),
              (unsigned long long)info.calls[g][op], (unsigned long long)want);
      }
    double nrel = fabs(info.grad_norm - rc->norm[s]) / rc->norm[s];
    CHECK(nrel <= gc.tol, "%s: step %d: gradient norm before clipping %.6g, reference %.6g (relative %.2g > %.0e)",
          sp->text, s + 1, info.grad_norm, rc->norm[s], nrel, gc.tol);
    /* the clip factor scales every update alike: clipped AdamW hardly shows it in the parameters */
    double clip = sp->cfg.clip, coef = clip > 0 && rc->norm[s] > clip ? clip / (rc->norm[s] + 1e-6) : 1.0;
    CHECK(fabs(info.clip_coef - coef) <= gc.tol * coef, "%s: step %d: clip factor %.6g, reference %.6g", sp->text,
          s + 1, info.clip_coef, coef);
    if (s == 2) OK(rt_get_stats(rt, &st3));
  }
  CHECK(gc.step == STEPS, "%s: the gradient hook ran %d times in %d steps", sp->text, gc.step, STEPS);
  CHECK(gc.bad == 0, "%s: %d synchronized gradients differ from the reference (worst relative %.3g)", sp->text, gc.bad,
        gc.worst);
  float probe;
  CHECK(rt_grad_read(rt, "blk0.fc1.w", &probe) == HSR_ERR_STATE, "%s: gradient read after zero_grad accepted",
        sp->text);
  free(gc.buf);
  *gworst = gc.worst;
  OK(rt_get_stats(rt, &st));
  CHECK(st.allocs == st3.allocs, "%s: steady-state steps allocated %llu buffers", sp->text,
        (unsigned long long)(st.allocs - st3.allocs));
  if (sp->cfg.max_live > 0 && sp->cfg.prefetch > 0)
    CHECK(st.max_live_full <= sp->cfg.max_live + 1, "%s: %d units live at once, cap %d", sp->text, st.max_live_full,
          sp->cfg.max_live);
  char name[64];
  for (int u = 0; u < U; u++)
    for (int k = 0; k < 4; k++) {
      mlp_param_name(u, k, name, sizeof name);
      params[u][k] = malloc(mlp_param_numel(&model, u, k) * sizeof(float));
      OK(rt_param_read(rt, name, params[u][k]));
    }
  mlp_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  return 0;
}

static void free_params(float *p[64][4]) {
  for (int u = 0; u < mlp_num_units(&model); u++)
    for (int k = 0; k < 4; k++) free(p[u][k]), p[u][k] = NULL;
}

static int run_equiv(hsr_boot *boot, int nspec, char **specs) {
  hsr_comm *world = NULL;
  hsr_topo *t = NULL;
  hsr_cluster *cl = NULL;
  OK(hsr_comm_world(boot, HSR_BACKEND_HOST, &world));
  OK(topo_discover(NULL, &t));
  OK(cluster_gather(boot, t, &cl));
  for (int i = 0; i < nspec; i++)
    if (strstr(specs[i], "device=cuda") && device_cuda_count() == 0) {
      if (g_rank == 0) printf("SKIP: '%s' needs a CUDA device and none is usable here\n", specs[i]);
      cluster_free(cl);
      topo_free(t);
      hsr_comm_free(world);
      return 77;
    }
  ref_cache rc = {0};
  char tags[8][16];
  float *tagp[8][64][4];
  double tagl[8][STEPS]; /* and their losses */
  int ntags = 0;
  for (int i = 0; i < nspec; i++) {
    spec sp;
    if (parse_spec(specs[i], &sp)) return 2;
    if (reference(sp.cfg.clip, &rc)) return 1;
    float *p[64][4] = {{0}}, *q[64][4] = {{0}};
    double loss[STEPS], loss2[STEPS];
    double gw = 0, gw2 = 0;
    if (train(boot, world, cl, &sp, &rc, p, loss, &gw)) return 1;
    int f32 = sp.cfg.param_dtype == HSR_F32 && sp.cfg.reduce_dtype == HSR_F32;
    double tol = f32 ? (sp.cfg.device == HSR_DEVICE_CUDA ? 1e-4 : 1e-5) : 5e-2, worst = 0;
    for (int u = 0; u < mlp_num_units(&model); u++)
      for (int k = 0; k < 4; k++) {
        size_t n = mlp_param_numel(&model, u, k);
        double md = 0, mr = 0;
        for (size_t j = 0; j < n; j++) {
          double d = fabs((double)p[u][k][j] - rc.p[u][k][j]);
          md = d > md ? d : md;
          mr = fabs(rc.p[u][k][j]) > mr ? fabs(rc.p[u][k][j]) : mr;
        }
        double rel = md / (mr > 0 ? mr : 1);
        worst = rel > worst ? rel : worst;
        char name[64];
        mlp_param_name(u, k, name, sizeof name);
        CHECK(rel <= tol, "%s: parameter %s differs from the single-rank reference: relative %.3g > %.0e", sp.text,
              name, rel, tol);
      }
    CHECK(loss[STEPS - 1] < loss[0], "%s: loss did not fall (%.5f -> %.5f)", sp.text, loss[0], loss[STEPS - 1]);
    if (f32)
      CHECK(fabs(loss[0] - rc.loss[0]) <= 1e-5 * fabs(rc.loss[0]), "%s: first loss %.7f, reference %.7f", sp.text,
            loss[0], rc.loss[0]);
    if (sp.twice) {
      if (train(boot, world, cl, &sp, &rc, q, loss2, &gw2)) return 1;
      int same = !memcmp(loss, loss2, sizeof loss);
      for (int u = 0; u < mlp_num_units(&model); u++)
        for (int k = 0; k < 4; k++) same &= !memcmp(p[u][k], q[u][k], mlp_param_numel(&model, u, k) * sizeof(float));
      CHECK(same, "%s: two runs are not bitwise identical", sp.text);
      free_params(q);
    }
    if (sp.same[0]) {
      int t = 0;
      while (t < ntags && strcmp(tags[t], sp.same)) t++;
      if (t == ntags && ntags < 8) { /* first of its tag: keep its parameters */
        snprintf(tags[ntags], sizeof tags[0], "%s", sp.same);
        memcpy(tagl[ntags], loss, sizeof loss);
        for (int u = 0; u < mlp_num_units(&model); u++)
          for (int k = 0; k < 4; k++) tagp[ntags][u][k] = p[u][k], p[u][k] = NULL;
        ntags++;
      } else if (t < ntags) {
        int same = 1;
        for (int u = 0; u < mlp_num_units(&model); u++)
          for (int k = 0; k < 4; k++)
            same &= !memcmp(tagp[t][u][k], p[u][k], mlp_param_numel(&model, u, k) * sizeof(float));
        CHECK(same, "%s: parameters are not bitwise identical to the first configuration tagged '%s'", sp.text,
              sp.same);
        CHECK(!memcmp(tagl[t], loss, sizeof loss),
              "%s: losses are not bitwise identical to the first configuration tagged '%s'", sp.text, sp.same);
      }
    }
    if (g_rank == 0)
      printf("ok %-70s max rel %.2e grad %.2e loss %.4f -> %.4f%s\n", sp.text, worst, gw, loss[0], loss[STEPS - 1],
             sp.twice ? " (bitwise repeat)" : "");
    fflush(stdout);
    free_params(p);
  }
  ref_free(&rc);
  for (int t = 0; t < ntags; t++) free_params(tagp[t]);
  cluster_free(cl);
  topo_free(t);
  OK(hsr_comm_free(world));
  return 0;
}

static int expect(hsr_status got, hsr_status want, const char *needle, const char *what) {
  if (got != want) {
    CHECK(0, "%s: got %s (%s), expected %s", what, hsr_status_str(got), hsr_last_error(), hsr_status_str(want));
    return 1;
  }
  if (needle && !strstr(hsr_last_error(), needle)) {
    CHECK(0, "%s: message '%s' lacks '%s'", what, hsr_last_error(), needle);
    return 1;
  }
  if (g_rank == 0) printf("ok %s: %s\n", what, hsr_last_error());
  return 0;
}

static hsr_status failing_hook(hsr_rt *rt, void *ctx) {
  (void)rt, (void)ctx;
  return hsr_error(HSR_ERR_INVALID, "refused");
}

/* 1: a stale view after forward_end reads NaN (the released buffer was poisoned). */
static int stale_is_nan(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const hsr_rt_config *cfg, int *nan) {
  hsr_rt *rt;
  void *v;
  OK(hsr_rt_create(boot, world, cl, cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  OK(hsr_rt_forward_begin(rt, 1));
  OK(hsr_rt_param_view(rt, "blk0.fc1.w", &v));
  CHECK(isfinite(((float *)v)[0]), "view inside the window is not finite");
  OK(hsr_rt_forward_end(rt, 1));
  *nan = isnan(((float *)v)[0]);
  OK(hsr_rt_destroy(rt));
  return 0;
}

/* HSR_POISON (poison = -1: the variable decides) in every spelling the
 * registry accepts, in three cases: the effect, a poisoned stale view, is
 * what the spelling means; unset, the build decides (on in debug builds). */
static int poison_spellings(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const hsr_rt_config *base) {
  static const char *const no[] = {"0", "false", "no", "off"}, *const yes[] = {"1", "true", "yes", "on"};
  hsr_rt_config cfg = *base;
  cfg.poison = -1;
  char list[128], val[32];
  env_valid_text(env_find("HSR_POISON"), list, sizeof list);
  int n = 0, nan = -1;
  for (char *sv = NULL, *w = strtok_r(list, "|", &sv); w; w = strtok_r(NULL, "|", &sv)) {
    int want = -1;
    for (int i = 0; i < 4; i++) want = !strcmp(w, no[i]) ? 0 : !strcmp(w, yes[i]) ? 1 : want;
    if (want < 0) FAIL("HSR_POISON accepts '%s', which this test gives no meaning", w);
    for (int how = 0; how < 3; how++, n++) {
      snprintf(val, sizeof val, "%s", w);
      for (char *c = val; *c; c++)
        if (how == 1 || (how == 2 && c == val)) *c = (char)toupper((unsigned char)*c);
      setenv("HSR_POISON", val, 1);
      if (stale_is_nan(boot, world, cl, &cfg, &nan)) return 1;
      CHECK(nan == want, "HSR_POISON=%s: a stale view %s poisoned; %s means %s", val, nan ? "is" : "is not", val,
            want ? "on" : "off");
    }
  }
  unsetenv("HSR_POISON");
  if (stale_is_nan(boot, world, cl, &cfg, &nan)) return 1;
#ifdef NDEBUG
  CHECK(!nan, "HSR_POISON unset: a release build poisons");
#else
  CHECK(nan, "HSR_POISON unset: a debug build does not poison");
#endif
  if (g_rank == 0) printf("ok HSR_POISON: %d spellings, each with its effect\n", n);
  return 0;
}

static int run_bad(hsr_boot *boot) {
  hsr_comm *world = NULL;
  hsr_topo *t = NULL;
  hsr_cluster *cl = NULL;
  OK(hsr_comm_world(boot, HSR_BACKEND_HOST, &world));
  OK(topo_discover(NULL, &t));
  OK(cluster_gather(boot, t, &cl));
  int n = hsr_boot_size(boot);
  spec sp;
  char txt[64];
  snprintf(txt, sizeof txt, "strategy=fsdp,S=%d", n);
  parse_spec(txt, &sp);

  /* a view outside its window, and the NaN poison of a stale one */
  hsr_rt *rt;
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  void *v;
  expect(hsr_rt_param_view(rt, "blk0.fc1.w", &v), HSR_ERR_STATE, "outside its window", "view before forward_begin");
  OK(hsr_rt_forward_begin(rt, 1));
  OK(hsr_rt_param_view(rt, "blk0.fc1.w", &v));
  float first = ((float *)v)[0];
  CHECK(isfinite(first), "view inside the window is not finite");
  OK(hsr_rt_forward_end(rt, 1));
  CHECK(isnan(((float *)v)[0]), "a stale view after forward_end (reshard full) still reads %g, not NaN",
        ((float *)v)[0]);
  expect(hsr_rt_param_view(rt, "blk0.fc1.w", &v), HSR_ERR_STATE, "outside its window", "view after forward_end");
  OK(hsr_rt_destroy(rt));
  if (poison_spellings(boot, world, cl, &sp.cfg)) return 1;
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  float *g;
  expect(hsr_rt_grad_view(rt, "blk0.fc1.w", &g), HSR_ERR_STATE, "outside its window", "grad view outside backward");
  expect(hsr_rt_param_view(rt, "nope", &v), HSR_ERR_NOT_FOUND, "nope", "unknown parameter");
  /* registration after the layout is fixed */
  int id;
  expect(hsr_rt_unit_add(rt, "late", 0, &id), HSR_ERR_STATE, "after the first step", "unit registered late");
  int64_t shape[1] = {4};
  expect(hsr_rt_param_add(rt, 0, "late.w", 1, shape, 0), HSR_ERR_STATE, "after the first step",
         "parameter registered late");
  expect(hsr_rt_step(rt, NULL), HSR_ERR_STATE, "backward pass", "step without backward");
  float gbuf[1024];
  expect(rt_grad_read(rt, "blk0.fc1.w", gbuf), HSR_ERR_STATE, "no synchronized gradient",
         "gradient read before any step");
  expect(rt_grad_read(rt, "nope", gbuf), HSR_ERR_NOT_FOUND, "nope", "gradient read of an unknown parameter");
  OK(hsr_rt_destroy(rt));

  /* a failing gradient hook fails the step with its message */
  sp.cfg.grad_hook = failing_hook;
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  mlp_rt_ctx *x = NULL;
  OK(mlp_rt_ctx_create(&model, rt, HSR_F32, &x));
  expect(mlp_rt_train_step(x, 0, BATCH, 1, NULL, NULL), HSR_ERR_INVALID, "the gradient hook failed: refused",
         "gradient hook failing");
  mlp_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  sp.cfg.grad_hook = NULL;

  /* a tied parameter: registered once, in its owner; another unit uses it through the owner's view */
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  int ua, ub;
  int64_t s8[1] = {8};
  OK(hsr_rt_unit_add(rt, "a", 1, &ua));
  OK(hsr_rt_unit_add(rt, "b", 0, &ub));
  OK(hsr_rt_param_add(rt, ua, "shared.w", 1, s8, 0));
  OK(hsr_rt_param_add(rt, ub, "b.w", 1, s8, 0));
  int64_t s0[2] = {0, 5};
  OK(hsr_rt_param_add(rt, ub, "b.empty", 2, s0, 0)); /* zero-size parameters are valid */
  expect(hsr_rt_param_add(rt, ub, "shared.w", 1, s8, 0), HSR_ERR_INVALID, "registered twice",
         "tied parameter registered twice");
  float init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  OK(hsr_rt_param_init(rt, "shared.w", init));
  OK(hsr_rt_param_init(rt, "b.w", init));
  OK(hsr_rt_param_init(rt, "b.empty", init));
  OK(hsr_rt_forward_begin(rt, ua));
  OK(hsr_rt_forward_begin(rt, ub));
  OK(hsr_rt_param_view(rt, "shared.w", &v)); /* from inside b, through the owner a */
  CHECK(!memcmp(v, init, sizeof init), "tied view does not show the owner's values");
  OK(hsr_rt_forward_end(rt, ub));
  OK(hsr_rt_forward_end(rt, ua));
  expect(hsr_rt_param_view(rt, "shared.w", &v), HSR_ERR_STATE, "outside its window",
         "tied view after the owner closed");
  float back[8] = {0};
  OK(rt_param_read(rt, "b.w", back));
  CHECK(!memcmp(back, init, sizeof init), "read-back of b.w differs from its initial values");
  OK(rt_param_read(rt, "b.empty", back));
  OK(hsr_rt_destroy(rt));

  /* layout mismatch: rank 1 registers a different shape */
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(hsr_rt_unit_add(rt, "u0", 1, &id));
  int64_t s2[1] = {g_rank == 1 ? 17 : 16};
  OK(hsr_rt_param_add(rt, id, "w", 1, s2, 0));
  expect(hsr_rt_commit(rt), HSR_ERR_MISMATCH, "rank(s) 1 differ", "layout mismatch");
  /* a commit that failed after the layout was fixed leaves no half-built
   * engine: every call that commits says why, registration stays closed */
  expect(hsr_rt_commit(rt), HSR_ERR_STATE, "an earlier commit failed (", "commit after a failed commit");
  expect(hsr_rt_forward_begin(rt, id), HSR_ERR_STATE, "rank(s) 1 differ", "forward_begin after a failed commit");
  expect(hsr_rt_step(rt, NULL), HSR_ERR_STATE, "rank(s) 1 differ", "step after a failed commit");
  expect(hsr_rt_param_init(rt, "w", init), HSR_ERR_STATE, "rank(s) 1 differ", "param_init after a failed commit");
  expect(hsr_rt_unit_add(rt, "late", 0, &ub), HSR_ERR_STATE, "after the first step", "unit after a failed commit");
  OK(hsr_rt_destroy(rt));

  /* an end call before any begin: a plain state error (no commit, no collective) */
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(hsr_rt_unit_add(rt, "u0", 1, &id));
  OK(hsr_rt_param_add(rt, id, "w", 1, s8, 0));
  expect(hsr_rt_forward_end(rt, id), HSR_ERR_STATE, "without forward_begin", "forward_end first");
  expect(hsr_rt_backward_end(rt, id), HSR_ERR_STATE, "without backward_begin", "backward_end first");
  OK(hsr_rt_param_add(rt, id, "w2", 1, s8, 0)); /* registration is still open */
  OK(hsr_rt_destroy(rt));

  /* recompute: only inside the unit's backward window, declared, once; the
   * window's gather serves it, and a forward_begin there (the way to gather
   * a unit a third time) is refused */
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(hsr_rt_unit_add(rt, "u0", 1, &id));
  OK(hsr_rt_param_add(rt, id, "w", 1, s8, 0));
  OK(hsr_rt_forward_begin(rt, id));
  OK(hsr_rt_forward_end(rt, id));
  OK(hsr_rt_backward_begin(rt, id));
  expect(hsr_rt_recompute_begin(rt, id), HSR_ERR_STATE, "recompute is none; declare", "recompute undeclared");
  OK(hsr_rt_backward_end(rt, id));
  OK(hsr_rt_destroy(rt));
  hsr_rt_config rcfg = sp.cfg;
  rcfg.recompute = HSR_RT_RECOMPUTE_FULL;
  OK(hsr_rt_create(boot, world, cl, &rcfg, &rt));
  OK(hsr_rt_unit_add(rt, "u0", 1, &id));
  OK(hsr_rt_param_add(rt, id, "w", 1, s8, 0));
  OK(hsr_rt_forward_begin(rt, id));
  expect(hsr_rt_recompute_begin(rt, id), HSR_ERR_STATE, "outside its backward window", "recompute in forward");
  OK(hsr_rt_forward_end(rt, id));
  OK(hsr_rt_backward_begin(rt, id));
  expect(hsr_rt_forward_begin(rt, id), HSR_ERR_STATE, "already inside a forward or backward window",
         "forward_begin inside the backward window");
  expect(hsr_rt_recompute_end(rt, id), HSR_ERR_STATE, "without recompute_begin", "recompute_end first");
  OK(hsr_rt_recompute_begin(rt, id));
  OK(hsr_rt_param_view(rt, "w", &v)); /* the backward's gather serves the recompute */
  expect(hsr_rt_backward_end(rt, id), HSR_ERR_STATE, "inside its recompute", "backward_end inside recompute");
  OK(hsr_rt_recompute_end(rt, id));
  expect(hsr_rt_recompute_begin(rt, id), HSR_ERR_STATE, "already recomputed", "a second recompute");
  OK(hsr_rt_backward_end(rt, id));
  hsr_rt_step_info rinfo;
  OK(hsr_rt_step(rt, &rinfo));
  CHECK(rinfo.recomputes == 1, "step counted %d recomputes, expected 1", rinfo.recomputes);
  OK(hsr_rt_destroy(rt));

  /* K not dividing S */
  snprintf(txt, sizeof txt, "strategy=fsdp,S=%d,reshard=partial:3", n);
  parse_spec(txt, &sp);
  rt = NULL;
  expect(hsr_rt_create(boot, world, cl, &sp.cfg, &rt), HSR_ERR_INVALID, "valid K: 1, 2, 4", "K not dividing S");
  CHECK(rt == NULL, "failed create returned an engine");

  cluster_free(cl);
  topo_free(t);
  OK(hsr_comm_free(world));
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--batch")) {
    g_batch = atoi(argv[2]);
    argv[2] = argv[0], argv += 2, argc -= 2;
  }
  if (argc < 2 || g_batch < 1) {
    fprintf(stderr, "usage: mr_runtime [--batch N] equiv SPEC... | bad\n");
    return 2;
  }
  mlp_blas_threads(1);
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) {
    fprintf(stderr, "boot: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(boot);
  int rc = !strcmp(argv[1], "equiv") ? run_equiv(boot, argc - 2, argv + 2)
           : !strcmp(argv[1], "bad") ? run_bad(boot)
                                     : 2;
  hsr_boot_finalize(boot);
  if (rc == 0 && g_fail) rc = 1;
  if (rc == 0 && g_rank == 0) printf("PASS\n");
  return rc;
}
