/* Multi-rank tests of checkpoints (hsr/ckpt.h), launched for real.
 *
 *   mr_ckpt resume PAIR...   each PAIR is SAVE->LOAD (two runtime specs as in
 *                            mr_runtime): train the example model 12 steps on
 *                            SAVE (warm-up + cosine learning rate, clipping);
 *                            train 6 on SAVE, save, load into a fresh engine
 *                            on LOAD and train 6 more. Parameters, moments m
 *                            and v, loss and grad norm must be bitwise equal
 *                            when SAVE == LOAD, else equal within float
 *                            tolerance. Keys beyond mr_spec.h: buffer=BYTES
 *                            (HSR_CKPT_BUFFER of the load), block=BYTES
 *                            (HSR_CKPT_BLOCK of the saves), exchange=off
 *                            (HSR_CKPT_EXCHANGE of the load: each replica
 *                            reads its whole shard), inplace=off
 *                            (HSR_CKPT_IN_PLACE of the load: held, then
 *                            installed), iov=N (HSR_CKPT_IOV: reads in
 *                            place of at most N pieces), async=1 (the
 *                            half-way save is asynchronous: its writer is
 *                            held back (HSR_CKPT_DELAY) while the same
 *                            engine trains the 6 steps after it, which must
 *                            equal the uninterrupted run's bitwise; a second
 *                            async save at step 12 waits for the first and
 *                            equals the uninterrupted run's checkpoint).
 *                            Every slice of every tensor the engine-less
 *                            reader gives equals the same elements of its
 *                            whole read.
 *   mr_ckpt corrupt          a checkpoint broken in each way a load must
 *                            refuse: every rank fails with the same message,
 *                            the engine is unchanged, nothing hangs; a save
 *                            that cannot write fails on every rank too.
 *   mr_ckpt state            the program-state key/value API.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hsr/boot.h"
#include "launch/boot_internal.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "hsr/comm.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "mlp.h"

#define STEPS 12
#define HALF 6
#define BATCH 32

static int g_rank;
static int g_fail;

#include "mr_check.h"
#include "mr_spec.h"

static const mlp_cfg model = {.layers = 3, .dim = 13, .in_dim = 11, .classes = 7, .seed = 7};
static const rt_lr_schedule sched = {.lr = 3e-3, .lr_min = 3e-4, .warmup = 3, .total = STEPS};

typedef struct env {
  hsr_boot *boot;
  hsr_comm *world;
  hsr_topo *topo;
  hsr_cluster *cl;
  char tmp[256];
} env;

typedef struct spec {
  hsr_rt_config cfg;
  int async;
  char buffer[32], block[32], exchange[8], inplace[8], iov[8];
  char text[256];
} spec;

static int parse_spec(const char *s, spec *out) {
  memset(out, 0, sizeof *out);
  hsr_rt_config *c = &out->cfg;
  hsr_rt_config_default(c);
  c->num_groups = 2;
  c->groups[0] = (hsr_rt_opt_group){3e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  c->groups[1] = (hsr_rt_opt_group){3e-3f, 0.9f, 0.999f, 1e-8f, 0.0f};
  c->clip = 0.05;
  c->poison = 1;
  snprintf(out->text, sizeof out->text, "%s", s);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *v = strchr(kv, '=');
    if (!v) return fprintf(stderr, "bad spec item '%s'\n", kv), 1;
    *v++ = 0;
    hsr_status st = HSR_OK;
    if (mr_spec_policy(c, kv, v, &st)) {
      if (st != HSR_OK) return fprintf(stderr, "spec '%s': %s\n", s, hsr_last_error()), 1;
    } else if (!strcmp(kv, "buffer")) {
      snprintf(out->buffer, sizeof out->buffer, "%s", v);
    } else if (!strcmp(kv, "exchange")) {
      snprintf(out->exchange, sizeof out->exchange, "%s", v);
    } else if (!strcmp(kv, "inplace")) {
      snprintf(out->inplace, sizeof out->inplace, "%s", v);
    } else if (!strcmp(kv, "iov")) {
      snprintf(out->iov, sizeof out->iov, "%s", v);
    } else if (!strcmp(kv, "async")) {
      out->async = atoi(v);
    } else if (!strcmp(kv, "block")) {
      snprintf(out->block, sizeof out->block, "%s", v);
    } else {
      return fprintf(stderr, "unknown spec key '%s'\n", kv), 1;
    }
  }
  return 0;
}

static void set_env(const char *name, const char *v) {
  if (v && *v)
    setenv(name, v, 1);
  else
    unsetenv(name);
}

/* One engine with the model, trained from step `from` to `to` (0-based). */
typedef struct run {
  hsr_rt *rt;
  mlp_rt_ctx *x;
  double loss[STEPS], gnorm[STEPS], lr[STEPS];
} run;

static int run_open(env *e, const spec *sp, const mlp_cfg *m, run *r) {
  memset(r, 0, sizeof *r);
  OK(hsr_rt_create(e->boot, e->world, e->cl, &sp->cfg, &r->rt));
  OK(mlp_rt_setup(m, r->rt));
  OK(mlp_rt_ctx_create(m, r->rt, sp->cfg.param_dtype, &r->x));
  return 0;
}

static void run_close(run *r) {
  mlp_rt_ctx_free(r->x);
  hsr_rt_destroy(r->rt);
  r->x = NULL, r->rt = NULL;
}

static int run_steps(run *r, const spec *sp, int from, int to) {
  for (int s = from; s < to; s++) {
    double lr = rt_lr_at(&sched, s + 1);
    OK(hsr_rt_set_lr(r->rt, 0, lr));
    OK(hsr_rt_set_lr(r->rt, 1, lr));
    hsr_rt_step_info info;
    OK(mlp_rt_train_step(r->x, s, BATCH, sp->cfg.micro_batches, &r->loss[s], &info));
    CHECK(info.step == s + 1, "%s: step %lld after training step %d", sp->text, (long long)info.step, s + 1);
    r->gnorm[s] = info.grad_norm;
    r->lr[s] = info.lr;
  }
  return 0;
}

static int save_as(run *r, const char *root, int64_t sample, int async, hsr_ckpt_stats *st) {
  hsr_ckpt_state *ps;
  OK(hsr_ckpt_state_create(&ps));
  OK(hsr_ckpt_state_set_i64(ps, "data.sample_index", sample));
  OK(ckpt_state_set_u64(ps, "rng.seed", model.seed));
  hsr_ckpt_state *mc;
  OK(hsr_ckpt_state_create(&mc));
  OK(hsr_ckpt_state_set_i64(mc, "layers", model.layers));
  OK(hsr_ckpt_state_set_i64(mc, "dim", model.dim));
  OK(hsr_ckpt_state_set_str(mc, "note", "a \"quoted\" string"));
  hsr_ckpt_save_opts o = {ps, 0, NULL, "mlp", mc, async};
  hsr_status s = hsr_ckpt_save(r->rt, root, &o, st);
  hsr_ckpt_state_free(ps);
  hsr_ckpt_state_free(mc);
  OK(s);
  return 0;
}

static int save(run *r, const char *root, int64_t sample, hsr_ckpt_stats *st) {
  return save_as(r, root, sample, 0, st);
}

/* The model save() records reads back: kind, config in order, values as text. */
static int check_model(const char *dir, const char *what) {
  ckpt_handle *c;
  hsr_ckpt_state *mc;
  const char *kind = NULL, *key = NULL;
  char v[64];
  OK(ckpt_open(dir, &c));
  OK(hsr_ckpt_state_create(&mc));
  OK(ckpt_get_model(c, &kind, mc));
  CHECK(!strcmp(kind, "mlp") && ckpt_state_count(mc) == 3, "%s: model '%s' with %d config pairs", what, kind,
        ckpt_state_count(mc));
  OK(ckpt_state_at(mc, 0, &key, v, sizeof v));
  CHECK(!strcmp(key, "layers") && atoi(v) == model.layers, "%s: model config 0: %s = %s", what, key, v);
  OK(ckpt_state_at(mc, 1, &key, v, sizeof v));
  CHECK(!strcmp(key, "dim") && atoi(v) == model.dim && !strchr(v, '.'), "%s: model config 1: %s = %s", what, key, v);
  OK(ckpt_state_at(mc, 2, &key, v, sizeof v));
  CHECK(!strcmp(key, "note") && !strcmp(v, "a \"quoted\" string"), "%s: model config 2: %s = %s", what, key, v);
  CHECK(ckpt_state_at(mc, 3, &key, v, sizeof v) == HSR_ERR_INVALID, "%s: a 4th config pair", what);
  CHECK(ckpt_state_at(mc, 2, &key, v, 4) == HSR_ERR_INVALID, "%s: a value that does not fit", what);
  hsr_ckpt_state_free(mc);
  ckpt_close(c);
  return 0;
}

/* Every tensor's master, m and v in two checkpoints: bitwise (tol < 0) or
 * within a relative tolerance of the largest magnitude per tensor. */
static int compare_ckpt(const char *a, const char *b, double tol, const char *what, double *worst) {
  ckpt_handle *ca, *cb;
  OK(ckpt_open(a, &ca));
  OK(ckpt_open(b, &cb));
  *worst = 0;
  for (int i = 0; i < ckpt_num_tensors(ca); i++) {
    ckpt_tensor_info t;
    int j;
    OK(ckpt_tensor_at(ca, i, &t));
    OK(ckpt_find(cb, t.name, &j));
    float *x = malloc(t.numel * 4 + 4), *y = malloc(t.numel * 4 + 4);
    for (int k = 0; k < HSR_CKPT_KIND_COUNT; k++) {
      OK(ckpt_read(ca, i, (ckpt_kind)k, 0, t.numel, x));
      OK(ckpt_read(cb, j, (ckpt_kind)k, 0, t.numel, y));
      if (tol < 0) {
        CHECK(!memcmp(x, y, t.numel * 4), "%s: tensor %s %s is not bitwise equal", what, t.name,
              ckpt_kind_name((ckpt_kind)k));
        continue;
      }
      double md = 0, mx = 0;
      for (uint64_t q = 0; q < t.numel; q++) {
        md = fmax(md, fabs((double)x[q] - y[q]));
        mx = fmax(mx, fabs((double)x[q]));
      }
      double rel = md / (mx > 0 ? mx : 1);
      *worst = fmax(*worst, rel);
      CHECK(rel <= tol, "%s: tensor %s %s differs: relative %.3g > %.0e", what, t.name,
            ckpt_kind_name((ckpt_kind)k), rel, tol);
    }
    free(x);
    free(y);
  }
  ckpt_close(ca);
  ckpt_close(cb);
  return 0;
}

/* Partial reads (hsr ckpt export reads a tensor in chunks): every slice
 * [a, a + k) of every tensor and kind equals elements [a, a + k) of the
 * whole read, across the ranges the ranks wrote. */
static int check_slices(const char *dir, const char *what, int *nslices) {
  ckpt_handle *c;
  OK(ckpt_open(dir, &c));
  for (int i = 0; i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info t;
    OK(ckpt_tensor_at(c, i, &t));
    float *all = malloc(t.numel * 4 + 4), *part = malloc(t.numel * 4 + 4);
    uint64_t step = t.numel / 37 ? t.numel / 37 : 1, across = t.numel / (t.ranges ? t.ranges : 1) + 2;
    int bad = 0; /* the first wrong slice of a tensor is reported, not every one */
    for (int k = 0; k < HSR_CKPT_KIND_COUNT && !bad; k++) {
      OK(ckpt_read(c, i, (ckpt_kind)k, 0, t.numel, all));
      for (uint64_t j = 0, prev = UINT64_MAX; j <= 37 && !bad; j++) { /* 37 starts and the last element */
        uint64_t a = j < 37 ? j * step : t.numel - 1;
        if (a >= t.numel || a == prev) continue;
        prev = a;
        uint64_t counts[4] = {1, 3, across, t.numel - a};
        for (int q = 0; q < 4 && !bad; q++) {
          uint64_t n = counts[q] < t.numel - a ? counts[q] : t.numel - a;
          memset(part, 0xff, n * 4);
          OK(ckpt_read(c, i, (ckpt_kind)k, a, n, part));
          bad = memcmp(part, all + a, n * 4) != 0;
          CHECK(!bad, "%s: tensor %s %s elements [%llu, %llu) (of %llu, %d ranges) differ from the whole read's", what,
                t.name, ckpt_kind_name((ckpt_kind)k), (unsigned long long)a, (unsigned long long)(a + n),
                (unsigned long long)t.numel, t.ranges);
          (*nslices)++;
        }
      }
    }
    free(all);
    free(part);
  }
  ckpt_close(c);
  return 0;
}

/* A directory every rank knows (rank 0 makes it). */
static int shared_dir(env *e, const char *tag, char *out, size_t len) {
  if (g_rank == 0) {
    snprintf(out, len, "%s/%s", e->tmp, tag);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd)) return 1;
  }
  OK(boot_bcast(e->boot, out, len, 0));
  return 0;
}

/* The half-way save in the background: its writer held back while the same
 * engine trains on (the checkpoint must hold step 6, the training must not
 * notice), then a second async save that has to wait for the first. */
static int async_half(env *e, const spec *ss, const run *ref, run *r1, const char *d_half, const char *d_ref, int idx,
                      hsr_ckpt_stats *sst) {
  char d_end[300], tag[32];
  snprintf(tag, sizeof tag, "p%d-aend", idx);
  if (shared_dir(e, tag, d_end, sizeof d_end)) return 1;
  set_env("HSR_CKPT_DELAY", "0.4");
  hsr_ckpt_stats a, b, w;
  int pending = 0;
  OK(save_as(r1, d_half, HALF * BATCH, 1, &a));
  set_env("HSR_CKPT_DELAY", NULL);
  OK(ckpt_poll(r1->rt, &pending));
  CHECK(a.async && a.step == HALF && pending && a.waited_step == -1, "%s: async save: async %d step %lld pending %d",
        ss->text, a.async, (long long)a.step, pending);
  CHECK(a.bytes_rank > 0 && a.staging_bytes >= a.bytes_rank, "%s: async save staged %llu of %llu bytes", ss->text,
        (unsigned long long)a.staging_bytes, (unsigned long long)a.bytes_rank);
  if (run_steps(r1, ss, HALF, STEPS)) return 1; /* while the writer waits */
  for (int s = HALF; s < STEPS; s++)
    CHECK(r1->loss[s] == ref->loss[s] && r1->gnorm[s] == ref->gnorm[s],
          "%s: step %d after an async save: loss %.17g norm %.17g, uninterrupted %.17g %.17g", ss->text, s + 1,
          r1->loss[s], r1->gnorm[s], ref->loss[s], ref->gnorm[s]);
  OK(save_as(r1, d_end, STEPS * BATCH, 1, &b));
  CHECK(b.waited_step == HALF, "%s: the second async save waited for step %lld, not %d", ss->text,
        (long long)b.waited_step, HALF);
  OK(hsr_ckpt_wait(r1->rt, -1, &w));
  CHECK(w.step == STEPS && w.bytes_total > 0 && w.async, "%s: hsr_ckpt_wait: step %lld, %llu bytes", ss->text,
        (long long)w.step, (unsigned long long)w.bytes_total);
  OK(hsr_ckpt_wait(r1->rt, -1, &w));
  CHECK(w.step == -1, "%s: a second hsr_ckpt_wait found step %lld", ss->text, (long long)w.step);
  OK(ckpt_poll(r1->rt, &pending));
  CHECK(!pending, "%s: pending after the wait", ss->text);
  double worst = 0;
  if (g_rank == 0 && compare_ckpt(d_ref, d_end, -1, ss->text, &worst)) return 1;
  *sst = a;
  ckpt_handle *c;
  OK(ckpt_open(d_half, &c));
  ckpt_info in;
  OK(ckpt_get_info(c, &in));
  sst->bytes_total = in.data_bytes;
  ckpt_close(c);
  return 0;
}

static int resume_pair(env *e, const char *pair, int idx) {
  char a[256], *arrow;
  snprintf(a, sizeof a, "%s", pair);
  if (!(arrow = strstr(a, "->"))) FAIL("pair '%s' has no '->'", pair);
  *arrow = 0;
  spec ss, ls;
  if (parse_spec(a, &ss) || parse_spec(arrow + 2, &ls)) return 2;
  int same = !memcmp(&ss.cfg, &ls.cfg, sizeof ss.cfg); /* the same policy: bitwise (buffer, block aside) */
  char d_ref[300], d_half[300], d_end[300], tag[32];
  snprintf(tag, sizeof tag, "p%d-ref", idx);
  if (shared_dir(e, tag, d_ref, sizeof d_ref)) return 1;
  snprintf(tag, sizeof tag, "p%d-half", idx);
  if (shared_dir(e, tag, d_half, sizeof d_half)) return 1;
  snprintf(tag, sizeof tag, "p%d-end", idx);
  if (shared_dir(e, tag, d_end, sizeof d_end)) return 1;
  set_env("HSR_CKPT_BLOCK", ss.block);
  /* uninterrupted */
  run ref, r1, r2;
  if (run_open(e, &ss, &model, &ref) || run_steps(&ref, &ss, 0, STEPS) || save(&ref, d_ref, STEPS * BATCH, NULL))
    return 1;
  run_close(&ref);
  /* 6 steps, save, a fresh engine on the other mesh, load, 6 steps */
  hsr_ckpt_stats sst, lst;
  if (run_open(e, &ss, &model, &r1) || run_steps(&r1, &ss, 0, HALF)) return 1;
  if (ss.async && async_half(e, &ss, &ref, &r1, d_half, d_ref, idx, &sst)) return 1;
  if (!ss.async && save(&r1, d_half, HALF * BATCH, &sst)) return 1;
  run_close(&r1);
  if (run_open(e, &ls, &model, &r2)) return 1;
  hsr_ckpt_state *ps;
  OK(hsr_ckpt_state_create(&ps));
  set_env("HSR_CKPT_BUFFER", ls.buffer);
  set_env("HSR_CKPT_EXCHANGE", ls.exchange);
  set_env("HSR_CKPT_IN_PLACE", ls.inplace);
  set_env("HSR_CKPT_IOV", ls.iov);
  OK(hsr_ckpt_load(r2.rt, d_half, ps, &lst));
  set_env("HSR_CKPT_BUFFER", NULL);
  set_env("HSR_CKPT_EXCHANGE", NULL);
  set_env("HSR_CKPT_IN_PLACE", NULL);
  set_env("HSR_CKPT_IOV", NULL);
  /* a fresh engine on host memory is loaded in place unless told otherwise */
  CHECK(lst.in_place == (strcmp(ls.inplace, "off") != 0), "%s: in_place %d", pair, lst.in_place);
  int64_t sample = -1;
  uint64_t seed = 0;
  OK(hsr_ckpt_state_get_i64(ps, "data.sample_index", &sample));
  OK(ckpt_state_get_u64(ps, "rng.seed", &seed));
  hsr_ckpt_state_free(ps);
  CHECK(sample == HALF * BATCH && seed == model.seed, "%s: program state %lld %llu", pair, (long long)sample,
        (unsigned long long)seed);
  CHECK(lst.step == HALF && sst.step == HALF, "%s: saved step %lld, loaded %lld", pair, (long long)sst.step,
        (long long)lst.step);
  if (check_model(d_half, pair)) return 1;
  CHECK(lst.bytes_total == sst.bytes_total && sst.bytes_total > 0, "%s: %llu bytes saved, %llu loaded", pair,
        (unsigned long long)sst.bytes_total, (unsigned long long)lst.bytes_total);
  /* every byte read once: on the saving mesh each rank reads exactly its own
   * file, and the replicas of a shard receive the rest of it from each other */
  int W = hsr_boot_size(e->boot), R = rt_replicate(r2.rt);
  uint64_t mine[2] = {lst.bytes_rank, lst.exchanged_bytes}, *all = calloc((size_t)W * 2, sizeof *all), rd = 0, ex = 0;
  OK(boot_allgather(e->boot, mine, sizeof mine, all));
  for (int q = 0; q < W; q++) rd += all[2 * q], ex += all[2 * q + 1];
  free(all);
  int split = strcmp(ls.exchange, "off") != 0;
  /* with the outer shard each piece has one holder: nothing to split or exchange */
  int alike = ls.cfg.outer_shard == HSR_RT_OUTER_OPTIM ? 1 : R;
  CHECK(lst.readers == (split ? 1 : alike), "%s: %d reader(s) of each byte", pair, lst.readers);
  if (same && lst.reads == 1) {
    uint64_t T = lst.bytes_total;
    int xr = split && alike > 1 ? alike - 1 : 0; /* each byte received by the other holders */
    CHECK(rd == (split ? T : (uint64_t)alike * T), "%s: the ranks read %llu bytes of a %llu-byte checkpoint", pair,
          (unsigned long long)rd, (unsigned long long)T);
    CHECK(ex == (uint64_t)xr * T, "%s: the replicas exchanged %llu bytes (%d x %llu expected)", pair,
          (unsigned long long)ex, xr, (unsigned long long)T);
  }
  if (run_steps(&r2, &ls, (int)(sample / BATCH), STEPS) || save(&r2, d_end, STEPS * BATCH, NULL)) return 1;
  run_close(&r2);
  double worst = 0;
  /* bf16 compute on one side: the runs differ by bf16 rounding, not float sums */
  int bf = ss.cfg.param_dtype != HSR_F32 || ls.cfg.param_dtype != HSR_F32;
  double tol = bf ? 5e-2 : 2e-5, ltol = bf ? 1e-2 : 1e-6, gtol = bf ? 5e-2 : 1e-4;
  int nslices = 0;
  if (g_rank == 0) {
    if (compare_ckpt(d_ref, d_end, same ? -1 : tol, pair, &worst)) return 1;
    if (check_slices(d_half, pair, &nslices)) return 1;
    for (int s = HALF; s < STEPS; s++) {
      double tl = same ? 0 : ltol * fabs(ref.loss[s]), tg = same ? 0 : gtol * fabs(ref.gnorm[s]);
      CHECK(fabs(ref.loss[s] - r2.loss[s]) <= tl, "%s: step %d loss %.17g, uninterrupted %.17g", pair, s + 1,
            r2.loss[s], ref.loss[s]);
      CHECK(fabs(ref.gnorm[s] - r2.gnorm[s]) <= tg, "%s: step %d grad norm %.17g, uninterrupted %.17g", pair, s + 1,
            r2.gnorm[s], ref.gnorm[s]);
      CHECK(ref.lr[s] == r2.lr[s], "%s: step %d lr %g, uninterrupted %g", pair, s + 1, r2.lr[s], ref.lr[s]);
    }
    CHECK(ref.gnorm[HALF] > ss.cfg.clip, "%s: clipping is not active at step %d (norm %g)", pair, HALF + 1,
          ref.gnorm[HALF]);
    printf("ok %-64s %s (max rel %.1e), save %.1f KB in %.1f ms, load read %s, %d slices read\n", pair,
           same ? "bitwise" : "within tolerance", worst, sst.bytes_total / 1e3, sst.seconds * 1e3,
           lst.reads == 1 ? "once" : "twice", nslices);
    fflush(stdout);
  }
  set_env("HSR_CKPT_BLOCK", NULL);
  return 0;
}

static int env_open(hsr_boot *boot, env *e) {
  memset(e, 0, sizeof *e);
  e->boot = boot;
  OK(hsr_comm_world(boot, HSR_BACKEND_HOST, &e->world));
  OK(topo_discover(NULL, &e->topo));
  OK(cluster_gather(boot, e->topo, &e->cl));
  if (g_rank == 0) {
    snprintf(e->tmp, sizeof e->tmp, "/tmp/hsr-mr-ckpt-XXXXXX");
    if (!mkdtemp(e->tmp)) FAIL("mkdtemp failed");
  }
  OK(boot_bcast(boot, e->tmp, sizeof e->tmp, 0));
  return 0;
}

static void env_close(env *e) {
  if (g_rank == 0 && !g_fail && e->tmp[0]) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", e->tmp);
  }
  cluster_free(e->cl);
  topo_free(e->topo);
  hsr_comm_free(e->world);
}

#include "mr_ckpt_bad.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mr_ckpt resume SAVE->LOAD... | corrupt | state\n");
    return 2;
  }
  if (!strcmp(argv[1], "state")) return mr_ckpt_state();
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) {
    fprintf(stderr, "boot: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(boot);
  mlp_blas_threads(1);
  env e;
  int rc = env_open(boot, &e);
  if (!rc && !strcmp(argv[1], "resume"))
    for (int i = 2; i < argc && !rc; i++) rc = resume_pair(&e, argv[i], i - 2);
  else if (!rc && !strcmp(argv[1], "corrupt"))
    rc = mr_ckpt_corrupt(&e);
  else if (!rc)
    rc = (fprintf(stderr, "unknown mode '%s'\n", argv[1]), 2);
  /* every rank's verdict, so that a failure on one is the exit code of all */
  int bad = rc || g_fail, any = 0, n = hsr_boot_size(boot);
  int *all = calloc((size_t)n, sizeof *all);
  if (all && boot_allgather(boot, &bad, sizeof bad, all) == HSR_OK)
    for (int r = 0; r < n; r++) any |= all[r];
  free(all);
  env_close(&e);
  hsr_boot_finalize(boot);
  if (g_rank == 0) printf(any ? "FAILED\n" : "PASSED\n");
  return any ? 1 : 0;
}
