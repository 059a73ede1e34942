/* The measured memory ledger against the predicted one (tune/), launched for
 * real: for each SPEC, trains the example model a few steps and requires the
 * runtime's own allocations, per category (current and peak), the runtime
 * peak and where it was reached, to equal the prediction exactly, for memory
 * held (pool high-water) and buffers in use.
 *
 *   mr_sched ledger SPEC...   keys: strategy, S, R, reshard, prefetch, live,
 *                             sync, micro, pdt, rdt, root, wrap (block|linear)
 *
 * And the engine's actual gathers against a hand-written expectation: for
 * each SPEC, trains three steps with the trace on and requires rank 0's
 * gathers of step 2 (the steady state), in the order the engine recorded
 * them (when each was waited for), to read exactly EXPECT: "unit/group ..."
 * with the group's kind (shard, partial, replicate), "(copy)" for a one-rank group's
 * local copy.
 *
 *   mr_sched events TRACE.json SPEC EXPECT [SPEC EXPECT...]
 *
 * And every unit's lifecycle, from rank 0's trace: from the end of step 1
 * to the end of step 2, in the order the engine recorded them, the words
 *   +U/G  unit U's gather posted on group kind G (shard, partial)
 *   =U    its gather completed (waited for; "=U(copy)": a one-rank group's copy)
 *   =U/replicate  the step's all-gather over R of the unit's shard (outer shard optim)
 *   -U    resharded after forward to nothing   ~U  to its 1/K slice
 *   !U    its full buffer released after backward
 * must read exactly EXPECT, and the most units alive at once (posted and not
 * yet resharded or released, counted from the events of the whole run, and
 * the engine's own max_live_full) must be exactly MAXLIVE.
 *
 *   mr_sched life TRACE.json SPEC EXPECT MAXLIVE [SPEC EXPECT MAXLIVE...] */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/boot.h"
#include "hsr/comm.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"
#include "runtime/io/ledger_internal.h"
#include "mlp.h"

static int g_rank, g_fail, g_device; /* g_device: the spec runs on a device (sim, cuda) */
#include "mr_check.h"
#include "mr_spec.h"

static int parse(const char *s, hsr_rt_config *c, mlp_cfg *m) {
  hsr_rt_config_default(c);
  c->num_groups = 2;
  c->groups[1] = c->groups[0];
  c->clip = 1.0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *v = strchr(kv, '=');
    if (!v) return fprintf(stderr, "bad spec item '%s'\n", kv), 1;
    *v++ = 0;
    hsr_status st = HSR_OK;
    if (!mr_spec_policy(c, kv, v, &st)) {
      if (!strcmp(kv, "wrap"))
        m->wrap_linear = !strcmp(v, "linear");
      else
        return fprintf(stderr, "unknown spec key '%s'\n", kv), 1;
    }
    if (st != HSR_OK) return fprintf(stderr, "spec '%s': %s\n", s, hsr_last_error()), 1;
  }
  return 0;
}

static void compare(const char *what, const char *spec, const hsr_ledger *m, const hsr_ledger *p) {
  for (int c = 0; c < HSR_MEM_CAT_COUNT; c++) {
    if (c == HSR_MEM_ACTIVATION) continue; /* the program's, not the runtime's */
    /* a device run's hsr_rt_param_init stages the values through device
     * memory: a one-off buffer, dropped at once, that no schedule action takes */
    int init_staging = c == HSR_MEM_STAGING && g_device;
    CHECK(init_staging || ledger_peak(m, c) == ledger_peak(p, c), "%s: %s %s peak %llu, predicted %llu", spec, what,
          mem_cat_name(c), (unsigned long long)ledger_peak(m, c), (unsigned long long)ledger_peak(p, c));
    CHECK(ledger_current(m, c) == ledger_current(p, c), "%s: %s %s current %llu, predicted %llu", spec, what,
          mem_cat_name(c), (unsigned long long)ledger_current(m, c), (unsigned long long)ledger_current(p, c));
  }
  CHECK(ledger_host(m) == ledger_host(p) && ledger_host_peak(m) == ledger_host_peak(p),
        "%s: %s host bytes %llu (peak %llu), predicted %llu (peak %llu)", spec, what,
        (unsigned long long)ledger_host(m), (unsigned long long)ledger_host_peak(m), (unsigned long long)ledger_host(p),
        (unsigned long long)ledger_host_peak(p));
  CHECK(ledger_runtime_peak(m) == ledger_runtime_peak(p), "%s: %s runtime peak %llu, predicted %llu", spec, what,
        (unsigned long long)ledger_runtime_peak(m), (unsigned long long)ledger_runtime_peak(p));
  ledger_where a = ledger_runtime_peak_where(m), b = ledger_runtime_peak_where(p);
  CHECK(a.phase == b.phase && a.unit == b.unit && a.step == b.step,
        "%s: %s runtime peak reached in %s/unit %d/step %lld, predicted %s/unit %d/step %lld", spec, what,
        phase_name(a.phase), a.unit, (long long)a.step, phase_name(b.phase), b.unit, (long long)b.step);
}

/* FNV-1a over every parameter's bytes, read back after training. */
static int checksum(hsr_rt *rt, const mlp_cfg *model, uint64_t *h) {
  *h = 0xcbf29ce484222325ull;
  char name[64];
  for (int u = 0; u < mlp_num_units(model); u++)
    for (int k = 0; k < mlp_unit_params(model, u); k++) {
      size_t n = mlp_param_numel(model, u, k);
      float *v = malloc((n ? n : 1) * sizeof *v);
      mlp_param_name(u, k, name, sizeof name);
      OK(rt_param_read(rt, name, v));
      const unsigned char *b = (const unsigned char *)v;
      for (size_t i = 0; i < n * sizeof *v; i++) *h = (*h ^ b[i]) * 0x100000001b3ull;
      free(v);
    }
  return 0;
}

static int run(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const char *spec, int pstep_off, uint64_t *sum) {
  hsr_rt_config cfg;
  mlp_cfg model = {.layers = 3, .dim = 13, .in_dim = 11, .classes = 7, .seed = 7};
  if (parse(spec, &cfg, &model)) return 1;
  g_device = cfg.device != HSR_DEVICE_HOST;
  if (pstep_off) cfg.prefetch_step = 0;
  hsr_rt *rt = NULL;
  OK(hsr_rt_create(boot, world, cl, &cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  mlp_rt_ctx *x = NULL;
  OK(mlp_rt_ctx_create(&model, rt, cfg.param_dtype, &x));
  for (int s = 0; s < 4; s++) OK(mlp_rt_train_step(x, s, 32, cfg.micro_batches, NULL, NULL));
  const rt_layout *lay = rt_get_layout(rt);
  int nu = rt_layout_num_units(lay), *is_root = calloc((size_t)nu, sizeof *is_root), n = 0;
  is_root[0] = 1;
  hsr_prog_call *prog = NULL;
  OK(mlp_rt_program(&model, cfg.micro_batches, &prog, &n));
  hsr_ledger *ph, *pu;
  OK(ledger_create(&ph));
  OK(ledger_create(&pu));
  OK(tune_ledger_predict(lay, is_root, &cfg, rt_shard(rt), rt_replicate(rt), prog, n, 4, ph, pu));
  compare("held", spec, hsr_rt_ledger(rt), ph);
  compare("in use", spec, rt_ledger_in_use(rt), pu);
  CHECK(ledger_peak(hsr_rt_ledger(rt), HSR_MEM_ACTIVATION) > 0, "%s: activations were not noted", spec);
  if (g_rank == 0)
    printf("%-70s runtime peak %8llu B held, %8llu B in use%s\n", spec,
           (unsigned long long)ledger_runtime_peak(hsr_rt_ledger(rt)),
           (unsigned long long)ledger_runtime_peak(rt_ledger_in_use(rt)), g_fail ? "  MISMATCH" : "");
  ledger_free(ph);
  ledger_free(pu);
  free(prog);
  free(is_root);
  if (checksum(rt, &model, sum)) return 1;
  mlp_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  return 0;
}

static cJSON *load_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "cannot open %s\n", path), NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  size_t got = buf ? fread(buf, 1, (size_t)len, f) : 0;
  fclose(f);
  if (!buf || got != (size_t)len) return free(buf), fprintf(stderr, "cannot read %s\n", path), NULL;
  buf[len] = 0;
  cJSON *doc = cJSON_Parse(buf);
  free(buf);
  return doc;
}

/* Rank 0's gathers of step 2 in trace order, as "unit/group" words. */
static int gathers_of(const char *path, char *out, size_t cap) {
  cJSON *doc = load_json(path);
  if (!doc) return 1;
  const cJSON *e, *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
  size_t o = 0;
  out[0] = 0;
  cJSON_ArrayForEach(e, events) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"),
                *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"),
                *step = cJSON_GetObjectItemCaseSensitive(args, "step");
    const cJSON *unit = cJSON_GetObjectItemCaseSensitive(args, "unit"),
                *grp = cJSON_GetObjectItemCaseSensitive(args, "group");
    if (!cJSON_IsString(name) || !cJSON_IsNumber(pid) || pid->valueint != 0 || !cJSON_IsNumber(step) ||
        step->valueint != 2 || !cJSON_IsString(unit) || !cJSON_IsString(grp))
      continue;
    int copy = !strcmp(name->valuestring, "local_copy");
    if (!copy && strcmp(name->valuestring, "all_gather")) continue;
    int kind = (int)strcspn(grp->valuestring, "[");
    o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s/%.*s%s", o ? " " : "", unit->valuestring, kind,
                          grp->valuestring, copy ? "(copy)" : "");
  }
  cJSON_Delete(doc);
  return o >= cap;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Rank 0's lifecycle words (see the top of the file) and the most units alive. */
static int lifecycle_of(const char *path, char *out, size_t cap, int *maxlive) {
  cJSON *doc = load_json(path);
  if (!doc) return 1;
  const cJSON *e;
  size_t o = 0;
  int window = 0, live = 0; /* window: 0 before the end of step 1, 1 inside, 2 after the end of step 2 */
  out[0] = 0;
  *maxlive = 0;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "traceEvents")) {
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"), *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const char *name = jstr(e, "name"), *cat = jstr(e, "cat"), *ph = jstr(e, "ph");
    if (!cJSON_IsNumber(pid) || pid->valueint != 0 || !name || !cat || !ph || strcmp(ph, "X")) continue;
    if (!strcmp(cat, "step")) {
      const cJSON *st = cJSON_GetObjectItemCaseSensitive(args, "step");
      if (window == 0 && cJSON_IsNumber(st) && st->valueint == 1)
        window = 1;
      else if (window == 1 && cJSON_IsNumber(st) && st->valueint == 2)
        window = 2;
      continue;
    }
    const char *unit = jstr(args, "unit"), *grp = jstr(args, "group");
    if (!unit) continue;
    char w[160];
    w[0] = 0;
    int kind = grp ? (int)strcspn(grp, "[") : 0;
    if (!strcmp(name, "gather_issue")) {
      live++;
      snprintf(w, sizeof w, "+%s/%.*s", unit, kind, grp ? grp : "");
    } else if (!strcmp(name, "all_gather") || !strcmp(name, "local_copy")) {
      int rep = grp && !strncmp(grp, "replicate", 9);
      snprintf(w, sizeof w, "=%s%s%s", unit, name[0] == 'l' ? "(copy)" : "", rep ? "/replicate" : "");
    } else if (!strcmp(name, "reshard")) {
      live--;
      snprintf(w, sizeof w, "%c%s", grp && !strncmp(grp, "partial", 7) ? '~' : '-', unit);
    } else if (!strcmp(name, "release")) {
      live--;
      snprintf(w, sizeof w, "!%s", unit);
    }
    if (window == 1 && w[0]) {
      o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s", o ? " " : "", w);
      if (live > *maxlive) *maxlive = live;
    }
  }
  cJSON_Delete(doc);
  return o >= cap || window != 2;
}

/* Three traced training steps of the spec's model; the trace goes to path,
 * the engine's stats to *st. */
static int traced_run(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const char *path, const char *spec,
                      rt_stats *st) {
  hsr_rt_config cfg;
  mlp_cfg model = {.layers = 3, .dim = 13, .in_dim = 11, .classes = 7, .seed = 7};
  if (parse(spec, &cfg, &model)) return 1;
  hsr_rt *rt = NULL;
  OK(hsr_rt_create(boot, world, cl, &cfg, &rt));
  OK(mlp_rt_setup(&model, rt));
  OK(rt_trace_enable(rt, 1));
  mlp_rt_ctx *x = NULL;
  OK(mlp_rt_ctx_create(&model, rt, cfg.param_dtype, &x));
  for (int s = 0; s < 3; s++) OK(mlp_rt_train_step(x, s, 32, cfg.micro_batches, NULL, NULL));
  OK(rt_get_stats(rt, st));
  OK(rt_trace_write(rt, path));
  mlp_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  return 0;
}

static int run_life(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const char *path, const char *spec,
                    const char *expect, int maxlive) {
  rt_stats st;
  if (traced_run(boot, world, cl, path, spec, &st)) return 1;
  if (g_rank == 0) {
    char got[4096];
    int live = -1;
    CHECK(!lifecycle_of(path, got, sizeof got, &live), "%s: reading the lifecycle of %s", spec, path);
    CHECK(!strcmp(got, expect), "%s: step 2's lifecycle\n    %s\n  expected\n    %s", spec, got, expect);
    CHECK(live == maxlive, "%s: %d units alive at most (from the trace), expected %d", spec, live, maxlive);
    CHECK(st.max_live_full == maxlive, "%s: the engine counted %d units alive at most, expected %d", spec,
          st.max_live_full, maxlive);
    printf("%-60s live %d: %s%s\n", spec, live, got, g_fail ? "  MISMATCH" : "");
    remove(path);
  }
  return 0;
}

static int run_events(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const char *path, const char *spec,
                      const char *expect) {
  rt_stats st;
  if (traced_run(boot, world, cl, path, spec, &st)) return 1;
  if (g_rank == 0) {
    char got[2048];
    CHECK(!gathers_of(path, got, sizeof got), "%s: reading the gathers of %s", spec, path);
    CHECK(!strcmp(got, expect), "%s: step 2 gathered\n    %s\n  expected\n    %s", spec, got, expect);
    printf("%-60s %s%s\n", spec, got, g_fail ? "  MISMATCH" : "");
    remove(path);
  }
  return 0;
}

int main(int argc, char **argv) {
  int events = argc >= 5 && !strcmp(argv[1], "events") && argc % 2 == 1;
  int life = argc >= 6 && !strcmp(argv[1], "life") && argc % 3 == 0;
  if (!events && !life && (argc < 3 || strcmp(argv[1], "ledger"))) {
    fprintf(stderr, "usage: mr_sched ledger SPEC... | mr_sched events TRACE.json SPEC EXPECT [SPEC EXPECT...] | "
                    "mr_sched life TRACE.json SPEC EXPECT MAXLIVE [SPEC EXPECT MAXLIVE...]\n");
    return 2;
  }
  mlp_blas_threads(1);
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) return 1;
  g_rank = hsr_boot_rank(boot);
  hsr_topo *t = NULL;
  hsr_cluster *cl = NULL;
  hsr_comm *world = NULL;
  int rc = 0;
  if (topo_discover(NULL, &t) != HSR_OK || cluster_gather(boot, t, &cl) != HSR_OK ||
      hsr_comm_world(boot, HSR_BACKEND_HOST, &world) != HSR_OK) {
    fprintf(stderr, "[rank %d] setup: %s\n", g_rank, hsr_last_error());
    rc = 1;
  }
  for (int i = 3; events && !rc && i + 1 < argc; i += 2)
    rc = run_events(boot, world, cl, argv[2], argv[i], argv[i + 1]);
  for (int i = 3; life && !rc && i + 2 < argc; i += 3)
    rc = run_life(boot, world, cl, argv[2], argv[i], argv[i + 1], atoi(argv[i + 2]));
  for (int i = 2; !events && !life && !rc && i < argc; i++) {
    uint64_t a = 0, b = 0;
    rc = run(boot, world, cl, argv[i], 0, &a);
    /* the step-end prefetch is a scheduling change only: bitwise identical parameters */
    if (!rc && strstr(argv[i], "pstep=1")) {
      rc = run(boot, world, cl, argv[i], 1, &b);
      CHECK(a == b, "%s: parameters differ with and without the step-end prefetch", argv[i]);
    }
  }
  hsr_comm_free(world);
  cluster_free(cl);
  topo_free(t);
  hsr_boot_finalize(boot);
  return rc || g_fail;
}
