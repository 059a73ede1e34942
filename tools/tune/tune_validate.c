/* hsr tune --validate: the tuner checked against this launch. Every rank runs
 * the same sequence: probes of the optimizer and memory speed, a quick bench
 * of each collective in the shard and replicate groups (alone and with both
 * tiers at once), one compute probe through `hsr bench step`; rank 0 fits the
 * cost model to those files and plans the synthetic model of hsr bench step;
 * then every rank runs the top candidates and a few deliberately bad ones
 * through `hsr bench step`, and rank 0 prints predicted beside measured.
 * Each benchmark boots and finalizes its own PMIx session inside this
 * command's, which stays open throughout (PMIx_Init and PMIx_Finalize nest:
 * repeated real re-initialisation fails now and then, nested sessions do not)
 * and carries the decisions from rank 0 to the others. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/cli/cli.h"
#include "hsr/kernels.h"
#include "topology/topology_internal.h"
#include "runtime/runtime_internal.h"
#include "kernels/kernels_internal.h"
#include "launch/boot_internal.h"
#include "common/common_internal.h"
#include "common/json.h"
#include "common/sys.h"
#include "tune_cli.h"

#define V_MAX 24

static const char *const probe_names[] = {"probe-0", "probe-1", "probe-2"};

enum { V_TOP = 0, V_BAD, V_PAIR };
typedef struct vpick {
  int S, pol, K, prefetch, idx; /* idx: the candidate in the plan */
  int role;                     /* V_TOP, V_BAD or V_PAIR (the physics pair, measured at every rate) */
  int outer;                    /* hsr_rt_outer (hybrid's outer shard) */
} vpick;

typedef struct vmeas {
  double step, compute, comm, exposed;
  double busy[HSR_RT_GROUP_COUNT]; /* each group's collectives' union (shard, replicate, partial) */
} vmeas;

static double now_s(void) { return clock_s(); }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f) {
  (void)sb, (void)flag, (void)f;
  return remove(path);
}

/* AdamW and memset speed with every rank at once (the ranks share the cores, as in a step). */
static hsr_status probe_kernels(hsr_boot *b, double *optim_ns, double *data_gbs) {
  size_t n = 1 << 20;
  hsr_device *d = NULL;
  HSR_CHECK(hsr_device_open(HSR_DEVICE_HOST, 0, &d));
  float *a = calloc(n * 5, sizeof(float));
  if (!a) {
    hsr_device_close(d);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .step = 1, .grad_scale = 1};
  double best_o = 1e9, best_d = 1e9;
  hsr_status st = HSR_OK;
  for (int k = 0; k < 4 && st == HSR_OK; k++) {
    st = boot_barrier(b);
    double t0 = now_s();
    if (st == HSR_OK) st = kernels_adamw(d, NULL, n, a, a + n, a + 2 * n, a + 3 * n, HSR_F32, a + 4 * n, HSR_F32, &hp);
    double t1 = now_s();
    if (st == HSR_OK) st = hsr_device_memset(d, a, 0, n * 4 * 4, NULL);
    double t2 = now_s();
    if (k) { /* the first touches the pages */
      if (t1 - t0 < best_o) best_o = t1 - t0;
      if (t2 - t1 < best_d) best_d = t2 - t1;
    }
  }
  free(a);
  hsr_device_close(d);
  HSR_CHECK(st);
  int N = hsr_boot_size(b);
  double mine[2] = {best_o, best_d}, *all = malloc(sizeof(double) * 2 * (size_t)N);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  st = boot_allgather(b, mine, sizeof mine, all);
  double so = 0, sd = 0;
  for (int r = 0; r < N; r++) so += all[2 * r], sd += all[2 * r + 1];
  free(all);
  *optim_ns = so / N / (double)n * 1e9;
  *data_gbs = (double)n * 16 / (sd / N) / 1e9;
  return st;
}

/* Runs one benchmark in this process (coll NULL: hsr bench step), rank 0's
 * table into dir/name.txt; with --validate-reuse a result already in dir
 * (rank 0 looks) is kept. */
/* reuse: --validate-reuse, keep results already in the directory */
static int bench(hsr_boot *boot, int reuse, const char *coll, char **argv, int argc, const char *dir,
                 const char *name) {
  int rank = hsr_boot_rank(boot), have = 0;
  if (reuse) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    have = rank == 0 && access(path, R_OK) == 0;
    if (boot_bcast(boot, &have, sizeof have, 0) != HSR_OK) return cli_fail("tune", HSR_ERR_BOOT);
    if (have) return 0;
  }
  int saved = -1;
  if (rank == 0) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    fflush(stdout);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) saved = dup(1), dup2(fd, 1), close(fd);
  }
  optind = 1;
  int rc = coll ? bench_collective_on(boot, coll, argc, argv) : bench_step_on(boot, argc, argv);
  if (saved >= 0) fflush(stdout), dup2(saved, 1), close(saved);
  return rc;
}

/* kind: 0 shard and replicate groups one after the other, 1 both at once, 2 the world (two-level) */
static int coll_bench(hsr_boot *boot, const tune_opts *o, const char *coll, int kind, int S0, int nodes,
                      const char *dir) {
  char b[32], e[32], s[16], path[512], name[64];
  double U = o->unit_bytes > 0 ? o->unit_bytes : 4 << 20;
  snprintf(b, sizeof b, "%.0f", U / 16 < 65536 ? 65536 : U / 16);
  snprintf(e, sizeof e, "%.0f", U < 262144 ? 262144 : U);
  snprintf(s, sizeof s, "%d", S0);
  snprintf(name, sizeof name, "%s%s", coll, kind == 1 ? "-concurrent" : kind == 2 ? "-world" : "");
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  /* -a 3: the slowest rank's time, not the mean: a step waits for the
   * slowest rank at every collective that follows (the shard group's
   * gathers wait for the rank whose cross-node flow was slowest) */
  char *argv[24] = {(char *)coll, "-a", "3",  "-b",      b,
                    "-e",         e,    "-f", "4",       "-n",
                    "6",          "-w", "1",  "--group", kind == 2 ? "world" : nodes > 1 ? "shard,replicate" : "shard",
                    "--shard",    s,    "-J", path};
  int argc = 19;
  if (kind == 2) { /* --shard means nothing for the world group (bench refuses it) */
    argv[15] = "-J", argv[16] = path;
    argc = 17;
  }
  if (kind == 1) argv[argc++] = "--concurrent";
  return bench(boot, o->v_reuse, coll, argv, argc, dir, name);
}

static int step_bench(hsr_boot *boot, const tune_opts *o, const vpick *p, const char *dir, const char *name) {
  char u[16], us[32], cm[32], st[16], S[16], res[24], pf[8], path[512];
  snprintf(u, sizeof u, "%ld", o->units);
  snprintf(us, sizeof us, "%.0f", o->unit_bytes);
  snprintf(cm, sizeof cm, "%g", o->compute_ms);
  snprintf(st, sizeof st, "%ld", o->v_steps);
  snprintf(S, sizeof S, "%d", p->S);
  if (p->pol == HSR_RT_RESHARD_PARTIAL)
    snprintf(res, sizeof res, "partial:%d", p->K);
  else
    snprintf(res, sizeof res, "%s", p->pol == HSR_RT_RESHARD_NONE ? "none" : "full");
  snprintf(pf, sizeof pf, "%d", p->prefetch);
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  char *argv[26] = {"step",
                    "--units",
                    u,
                    "--unit-size",
                    us,
                    "--compute-ms",
                    cm,
                    "--steps",
                    st,
                    "--shard",
                    S,
                    "--reshard",
                    res,
                    "--prefetch",
                    pf,
                    "--bwd-ratio",
                    "2",
                    "--json",
                    path,
                    "--compute",
                    o->v_wait ? "wait" : "cpu"};
  char bw[16];
  snprintf(bw, sizeof bw, "%g", o->bwd_ratio);
  argv[16] = bw;
  int argc = 21;
  if (p->outer == HSR_RT_OUTER_OPTIM) argv[argc++] = "--outer-shard", argv[argc++] = "optim";
  if (o->v_sim) argv[argc++] = "--device", argv[argc++] = "sim";
  return bench(boot, o->v_reuse, NULL, argv, argc, dir, name);
}

static int read_one(const char *dir, const char *name, vmeas *m) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  FILE *f;
  if (file_fopen_read("measurement", path, &f) != HSR_OK) return -1;
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "results"), 0);
  int ok = r != NULL && json_check_finite(j, HSR_ERR_IO, path) == HSR_OK;
  if (ok) {
    m->step = cJSON_GetObjectItemCaseSensitive(r, "step_ms")->valuedouble;
    m->compute = cJSON_GetObjectItemCaseSensitive(r, "compute_ms")->valuedouble;
    m->comm = cJSON_GetObjectItemCaseSensitive(r, "comm_ms")->valuedouble;
    m->exposed = cJSON_GetObjectItemCaseSensitive(r, "exposed_comm_ms")->valuedouble;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "busy_ms");
    static const char *const gn[HSR_RT_GROUP_COUNT] = {"shard", "replicate", "partial"};
    for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, gn[g]);
      m->busy[g] = cJSON_IsNumber(v) ? v->valuedouble : 0;
    }
  }
  cJSON_Delete(j);
  return ok ? 0 : -1;
}

static void round_name(char *b, size_t n, const char *name, int round) {
  if (round <= 1)
    snprintf(b, n, "%s", name);
  else
    snprintf(b, n, "%s-r%d", name, round);
}

/* The round with the shortest step: other work on the cores only ever adds time. */
static int read_step(long rounds, const char *dir, const char *name, vmeas *m) {
  int found = 0;
  for (int r = 1; r <= rounds; r++) {
    char nm[96];
    vmeas v = {0};
    round_name(nm, sizeof nm, name, r);
    if (read_one(dir, nm, &v) != 0) continue;
    if (!found || v.step < m->step) *m = v;
    found = 1;
  }
  return found ? 0 : -1;
}

static void pick_name(const vpick *p, char *b, size_t n) {
  snprintf(b, n, "step-S%d-%s%d-p%d%s", p->S,
           p->pol == HSR_RT_RESHARD_FULL   ? "full"
           : p->pol == HSR_RT_RESHARD_NONE ? "none"
                                           : "partial",
           p->K, p->prefetch, p->outer == HSR_RT_OUTER_OPTIM ? "-optim" : "");
}

static int same(const vpick *a, const vpick *b) {
  return a->S == b->S && a->pol == b->pol && a->K == b->K && a->prefetch == b->prefetch && a->outer == b->outer;
}

static vpick pick_of(const tune_result *r, int i) {
  return (vpick){r->S, (int)r->cfg.reshard, r->cfg.partial_k, r->cfg.prefetch, i, V_TOP, (int)r->cfg.outer_shard};
}

static int is_probe(const vpick *c, const vpick *probes, int np) {
  for (int k = 0; k < np; k++)
    if (same(c, &probes[k])) return 1;
  return 0;
}

/* The top candidates and a few bad ones (the slowest of distinct meshes and
 * policies), none of them a probe the model was fitted to; then, on several
 * nodes, the physics pair: flat fsdp over every node against hybrid with a
 * node per shard group, both reshard full and prefetch 1 (only the mesh
 * differs), measured at every link rate so bench/tune_validate.sh can find
 * where they swap places. */
static int choose(const tune_opts *o, const tune_plan *p, const vpick *probes, int nprobes, vpick *out) {
  int n = 0;
  for (int i = 0; i < p->nfeasible && n < o->v_top; i++) {
    const tune_result *r = &p->cand[i];
    if (r->cfg.strategy != HSR_RT_FSDP && r->cfg.strategy != HSR_RT_HYBRID) continue; /* hsr bench step runs these */
    vpick c = pick_of(r, i);
    if (!is_probe(&c, probes, nprobes)) out[n++] = c;
  }
  int bad = 0;
  for (int i = p->nfeasible - 1; i >= 0 && bad < o->v_bad && n < V_MAX; i--) {
    const tune_result *r = &p->cand[i];
    if (r->cfg.strategy != HSR_RT_FSDP && r->cfg.strategy != HSR_RT_HYBRID) continue;
    vpick c = pick_of(r, i);
    c.role = V_BAD;
    int dup = is_probe(&c, probes, nprobes);
    for (int k = 0; k < n; k++) dup |= same(&out[k], &c) || (out[k].S == c.S && out[k].pol == c.pol);
    if (!dup) out[n++] = c, bad++;
  }
  if (p->nodes > 1) {
    vpick pair[2] = {{p->world, HSR_RT_RESHARD_FULL, 0, 1, -1, V_PAIR, HSR_RT_OUTER_NONE},
                     {p->per_node, HSR_RT_RESHARD_FULL, 0, 1, -1, V_PAIR, HSR_RT_OUTER_NONE}};
    for (int j = 0; j < 2 && n < V_MAX; j++) {
      int dup = is_probe(&pair[j], probes, nprobes);
      for (int k = 0; k < n; k++) dup |= same(&out[k], &pair[j]);
      if (!dup) out[n++] = pair[j];
    }
  }
  return n;
}

/* The cross-node over intra-node all-gather time at the largest size of the calibration bench. */
static double link_ratio(const char *dir, double *bytes) {
  char path[512];
  snprintf(path, sizeof path, "%s/all_gather.json", dir);
  FILE *f;
  if (file_fopen_read("calibration", path, &f) != HSR_OK) return 0;
  static char buf[1 << 18];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  if (json_check_finite(j, HSR_ERR_IO, path) != HSR_OK) { /* not a measurement to fit */
    cJSON_Delete(j);
    return 0;
  }
  double ti = 0, tx = 0, best = 0;
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "results")) {
    double sz = cJSON_GetObjectItemCaseSensitive(r, "size")->valuedouble;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "hsr"), *lk = cJSON_GetObjectItemCaseSensitive(h, "link");
    double t =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "out_of_place"), "time")->valuedouble;
    if (sz < best) continue;
    if (sz > best) best = sz, ti = tx = 0;
    if (cJSON_IsString(lk) && !strcmp(lk->valuestring, "intra-node"))
      ti = t;
    else
      tx = t;
  }
  cJSON_Delete(j);
  *bytes = best;
  return ti > 0 ? tx / ti : 0;
}

static cJSON *times_json(double step, double pm, double comm, double exposed, double compute, const double *busy) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step_ms", step);
  if (pm >= 0) cJSON_AddNumberToObject(o, "step_pm_ms", pm);
  cJSON_AddNumberToObject(o, "comm_ms", comm);
  cJSON_AddNumberToObject(o, "exposed_ms", exposed);
  cJSON_AddNumberToObject(o, "compute_ms", compute);
  cJSON *b = cJSON_AddObjectToObject(o, "busy_ms");
  for (int g = 0; g < HSR_RT_GROUP_COUNT; g++) cJSON_AddNumberToObject(b, rt_group_name((hsr_rt_group)g), busy[g]);
  return o;
}

static double pct(double pred, double meas) { return meas > 0 ? 100 * (pred - meas) / meas : 0; }

/* role: "top", "bad" or "probe" (fitted, shown, not counted) */
static cJSON *meas_json(const tune_plan *p, const tune_result *r, const vmeas *m, const char *role) {
  cJSON *o = cJSON_CreateObject();
  char lab[96], res[24];
  cJSON_AddStringToObject(o, "label", tune_label(r, lab, sizeof lab));
  cJSON_AddStringToObject(o, "role", role);
  cJSON_AddStringToObject(o, "strategy", rt_strategy_name(r->cfg.strategy));
  cJSON_AddNumberToObject(o, "shard", r->S);
  cJSON_AddNumberToObject(o, "replicate", r->R);
  if (r->cfg.reshard == HSR_RT_RESHARD_PARTIAL)
    snprintf(res, sizeof res, "partial:%d", r->cfg.partial_k);
  else
    snprintf(res, sizeof res, "%s", r->cfg.reshard == HSR_RT_RESHARD_NONE ? "none" : "full");
  cJSON_AddStringToObject(o, "reshard", res);
  cJSON_AddNumberToObject(o, "prefetch", r->cfg.prefetch);
  cJSON_AddStringToObject(o, "outer_shard", rt_outer_shard_name(r->cfg.outer_shard));
  cJSON_AddBoolToObject(o, "deliberately_bad", !strcmp(role, "bad"));
  cJSON_AddBoolToObject(o, "probe", !strcmp(role, "probe"));
  cJSON_AddItemToObject(o, "predicted",
                        times_json(r->step_ms, r->step_pm_ms, r->comm_ms, r->exposed_ms, r->compute_ms, r->busy_ms));
  cJSON_AddItemToObject(o, "measured", times_json(m->step, -1, m->comm, m->exposed, m->compute, m->busy));
  cJSON *er = cJSON_AddObjectToObject(o, "error_pct");
  cJSON_AddNumberToObject(er, "step_ms", pct(r->step_ms, m->step));
  cJSON_AddNumberToObject(er, "comm_ms", pct(r->comm_ms, m->comm));
  cJSON_AddNumberToObject(er, "exposed_ms", pct(r->exposed_ms, m->exposed));
  cJSON_AddNumberToObject(er, "compute_ms", pct(r->compute_ms, m->compute));
  if (r->tie >= 0 && r->tie < p->n)
    cJSON_AddStringToObject(o, "tie_with", tune_label(&p->cand[r->tie], lab, sizeof lab));
  else
    cJSON_AddNullToObject(o, "tie_with");
  return o;
}

static int find(const tune_plan *p, const vpick *c) {
  for (int i = 0; i < p->n; i++) {
    vpick q = pick_of(&p->cand[i], i);
    if (rt_strategy_sharding(p->cand[i].cfg.strategy).params && same(&q, c)) return i;
  }
  return -1;
}

/* Mean absolute and worst error of a set of layouts. */
typedef struct errs {
  double step_sum, step_worst, comm_sum, comm_worst;
  int n;
} errs;

static void add_err(errs *e, double es, double ec) {
  e->step_sum += fabs(es), e->comm_sum += fabs(ec), e->n++;
  if (fabs(es) > e->step_worst) e->step_worst = fabs(es);
  if (fabs(ec) > e->comm_worst) e->comm_worst = fabs(ec);
}

static cJSON *errs_json(const errs *e) {
  cJSON *o = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(o, "step"), *c = cJSON_AddObjectToObject(o, "comm");
  cJSON_AddNumberToObject(o, "layouts", e->n);
  cJSON_AddNumberToObject(s, "mean_abs_pct", e->n ? e->step_sum / e->n : 0);
  cJSON_AddNumberToObject(s, "worst_pct", e->step_worst);
  cJSON_AddNumberToObject(c, "mean_abs_pct", e->n ? e->comm_sum / e->n : 0);
  cJSON_AddNumberToObject(c, "worst_pct", e->comm_worst);
  return o;
}

static void row(const tune_result *r, const vmeas *m, const char *note) {
  char lab[96], pm[16] = "";
  if (r->step_pm_ms > 0) snprintf(pm, sizeof pm, "+-%.1f", r->step_pm_ms);
  printf("%-26s %9.1f %7s %9.1f %+6.1f%% %9.1f %9.1f %+6.1f%% %9.1f %9.1f%s\n", tune_label(r, lab, sizeof lab),
         r->step_ms, pm, m->step, pct(r->step_ms, m->step), r->comm_ms, m->comm, pct(r->comm_ms, m->comm),
         r->exposed_ms, m->exposed, note);
}

/* The table (or, with --json, the JSON on stdout) and dir/validate.json. */
static void report(const tune_ctx *x, const tune_plan *p, const vpick *pk, const vmeas *m, int n, const char *dir,
                   const vpick *probes, int nprobes) {
  double lbytes = 0, ratio = link_ratio(dir, &lbytes);
  const char *emu = getenv("HSR_EMULATE_NET");
  int json = x->o->json;
  if (!json) {
    printf("# hsr tune --validate: %d ranks on %d nodes%s%s; hsr bench step --units %ld --unit-size %.0f "
           "--compute-ms %g --compute %s --steps %ld\n",
           p->world, p->nodes, emu ? ", emulated link " : "", emu ? emu : "", x->o->units, x->o->unit_bytes,
           x->o->compute_ms,
           x->o->v_sim    ? (x->o->v_wait ? "wait --device sim" : "cpu --device sim")
           : x->o->v_wait ? "wait"
                          : "cpu",
           x->o->v_steps);
    if (ratio > 0)
      printf("# link: a %.0f-byte all-gather across the nodes takes %.1fx as long as inside one\n", lbytes, ratio);
    printf("%s", x->calib_report);
    printf("# compute: %s\n", x->compute_desc);
    printf("%-26s %9s %7s %9s %7s %9s %9s %7s %9s %9s\n", "layout", "step pred", "+-", "measured", "err", "comm pred",
           "measured", "err", "exp pred", "measured");
  }
  errs all = {0}, top = {0}, bad = {0}, pair = {0};
  double fastest = 1e300;
  int fi = -1;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "tool", "hsr tune --validate");
  cJSON_AddNumberToObject(root, "ranks", p->world);
  cJSON_AddNumberToObject(root, "nodes", p->nodes);
  cJSON_AddStringToObject(root, "emulated_net", emu ? emu : "");
  cJSON_AddStringToObject(root, "compute_mode", x->o->v_wait ? "wait" : "cpu");
  cJSON_AddStringToObject(root, "device", x->o->v_sim ? "sim" : "host");
  cJSON *mj = cJSON_AddObjectToObject(root, "model");
  cJSON_AddNumberToObject(mj, "units", (double)x->o->units);
  cJSON_AddNumberToObject(mj, "unit_bytes", x->o->unit_bytes);
  cJSON_AddNumberToObject(mj, "compute_ms_asked", x->o->compute_ms);
  cJSON_AddNumberToObject(mj, "fwd_ms_fitted", x->model.fwd_ms);
  cJSON_AddNumberToObject(mj, "bwd_ratio", x->model.bwd_ratio);
  cJSON_AddNumberToObject(mj, "steps", (double)x->o->v_steps);
  cJSON_AddNumberToObject(mj, "rounds", (double)x->o->v_rounds);
  cJSON_AddNumberToObject(root, "link_ratio", ratio);
  cJSON_AddNumberToObject(root, "link_ratio_bytes", lbytes);
  cJSON *fit = cJSON_AddObjectToObject(root, "fit");
  cJSON_AddStringToObject(fit, "report", x->calib_report);
  cJSON_AddStringToObject(fit, "compute", x->compute_desc);
  cJSON_AddItemToObject(fit, "cost_model", tune_cost_json(&x->net));
  cJSON *arr = cJSON_AddArrayToObject(root, "layouts");
  for (int i = 0; i < n; i++) {
    const tune_result *r = &p->cand[pk[i].idx];
    int role = pk[i].role;
    char note[80] = "";
    if (role != V_TOP) snprintf(note, sizeof note, role == V_BAD ? "   (deliberately bad)" : "   (physics pair)");
    if (r->tie >= 0) snprintf(note + strlen(note), sizeof note - strlen(note), "   (tie with rank %d)", r->tie + 1);
    if (!json) row(r, &m[i], note);
    double es = pct(r->step_ms, m[i].step), ec = pct(r->comm_ms, m[i].comm);
    if (role != V_PAIR) add_err(&all, es, ec);
    add_err(role == V_BAD ? &bad : role == V_PAIR ? &pair : &top, es, ec);
    if (m[i].step < fastest) fastest = m[i].step, fi = i;
    cJSON_AddItemToArray(arr, meas_json(p, r, &m[i], role == V_BAD ? "bad" : role == V_PAIR ? "pair" : "top"));
  }
  for (int i = 0; i < nprobes; i++) { /* the runs the model was fitted to: shown, not counted */
    vmeas pm = {0};
    int k = find(p, &probes[i]);
    if (k < 0 || read_step(x->o->v_rounds, dir, probe_names[i], &pm) != 0) continue;
    if (!json) row(&p->cand[k], &pm, "   (probe: fitted)");
    cJSON_AddItemToArray(arr, meas_json(p, &p->cand[k], &pm, "probe"));
  }
  char a[96], b[96];
  if (!json)
    printf("# error over the %d validated layouts (top and bad; not the probes, not the pair): step mean %.1f%%, worst "
           "%.1f%%; communication "
           "mean %.1f%%, worst %.1f%%\n",
           all.n, all.n ? all.step_sum / all.n : 0, all.step_worst, all.n ? all.comm_sum / all.n : 0, all.comm_worst);
  cJSON *ej = cJSON_AddObjectToObject(root, "errors");
  cJSON_AddItemToObject(ej, "all", errs_json(&all));
  cJSON_AddItemToObject(ej, "top", errs_json(&top));
  cJSON_AddItemToObject(ej, "bad", errs_json(&bad));
  cJSON_AddItemToObject(ej, "pair", errs_json(&pair));
  if (n > 0 && fi >= 0) {
    double rv = 100 * (m[0].step - fastest) / fastest;
    tune_label(&p->cand[pk[0].idx], a, sizeof a), tune_label(&p->cand[pk[fi].idx], b, sizeof b);
    if (!json)
      printf("# recommended %s measured %.1f ms; fastest measured %s %.1f ms: recommended is %.1f%% slower\n", a,
             m[0].step, b, fastest, rv);
    cJSON_AddStringToObject(root, "recommended", a);
    cJSON_AddNumberToObject(root, "recommended_measured_ms", m[0].step);
    cJSON_AddStringToObject(root, "fastest_measured", b);
    cJSON_AddNumberToObject(root, "fastest_measured_ms", fastest);
    cJSON_AddNumberToObject(root, "recommended_vs_fastest_pct", rv);
  }
  cJSON_AddNumberToObject(root, "worst_step_error_pct", all.step_worst);
  cJSON_AddNumberToObject(root, "worst_comm_error_pct", all.comm_worst);
  cJSON_AddNumberToObject(root, "mean_step_error_pct", all.n ? all.step_sum / all.n : 0);
  cJSON_AddNumberToObject(root, "mean_comm_error_pct", all.n ? all.comm_sum / all.n : 0);
  /* the predicted ranking of every layout hsr bench step runs, for comparing link rates */
  cJSON *rank = cJSON_AddArrayToObject(root, "predicted_ranking");
  for (int i = 0; i < p->nfeasible; i++) {
    const tune_result *r = &p->cand[i];
    if (r->cfg.strategy != HSR_RT_FSDP && r->cfg.strategy != HSR_RT_HYBRID) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "label", tune_label(r, a, sizeof a));
    cJSON_AddNumberToObject(e, "step_ms", r->step_ms);
    cJSON_AddNumberToObject(e, "step_pm_ms", r->step_pm_ms);
    if (r->tie >= 0)
      cJSON_AddStringToObject(e, "tie_with", tune_label(&p->cand[r->tie], b, sizeof b));
    else
      cJSON_AddNullToObject(e, "tie_with");
    cJSON_AddItemToArray(rank, e);
  }
  char path[512], *txt = cJSON_Print(root);
  snprintf(path, sizeof path, "%s/validate.json", dir);
  FILE *f = fopen(path, "w");
  if (f && txt) fprintf(f, "%s\n", txt);
  if (f) fclose(f);
  if (json && txt) printf("%s\n", txt);
  free(txt);
  cJSON_Delete(root);
}

static hsr_status first_session(tune_opts *o, hsr_boot *b, hsr_cluster **cl, int *rank, int *nodes, int *per,
                                double *probe, char *dir, size_t len) {
  hsr_status st = HSR_OK;
  hsr_topo *t = NULL;
  if (boot_is_singleton(b))
    st = hsr_error(HSR_ERR_INVALID, "--validate runs under a launcher: hsr-run -n 8 --nodes 2 [--emulate-net RATE] -- "
                                    "hsr tune --validate");
  if (st == HSR_OK) st = topo_discover(NULL, &t);
  if (st == HSR_OK) st = cluster_gather(b, t, cl);
  if (st == HSR_OK) st = probe_kernels(b, &probe[0], &probe[1]);
  *rank = hsr_boot_rank(b), *nodes = boot_num_nodes(b), *per = hsr_boot_size(b) / boot_num_nodes(b);
  if (st == HSR_OK && *rank == 0) {
    if (o->v_keep) {
      snprintf(dir, len, "%s", o->v_keep);
      if (mkdir(dir, 0755) != 0 && errno != EEXIST) st = hsr_error(HSR_ERR_INVALID, "cannot make '%s'", dir);
    } else {
      const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
      snprintf(dir, len, "%s/hsr-tune-XXXXXX", tmp);
      if (!mkdtemp(dir)) st = hsr_error(HSR_ERR_SYSTEM, "cannot make a directory under %s: %s", tmp, strerror(errno));
    }
  }
  if (st == HSR_OK) st = boot_bcast(b, dir, len, 0);
  topo_free(t);
  return st;
}

/* Rank 0: the cost model fitted to this launch's benches, the compute per
 * unit from the probe, the plan, and the picks to run. */

static hsr_status tune_validate_plan(tune_ctx *x, hsr_cluster *cl, const char *dir, const double *probe,
                                     const vpick *probes, int nprobes, vpick *picks, int *np, tune_plan *plan) {
  x->calib_report[0] = '\0';
  tune_opts *o = (tune_opts *)x->o;
  static char paths[6][512];
  static const char *const names[] = {"all_gather",       "reduce_scatter",      "all_reduce", "all_reduce-concurrent",
                                      "all_gather-world", "reduce_scatter-world"};
  o->nbench = 0;
  for (int i = 0; i < 6; i++) {
    snprintf(paths[i], sizeof paths[i], "%s/%s.json", dir, names[i]);
    if (access(paths[i], R_OK) == 0) o->bench[o->nbench++] = paths[i];
  }
  if (!o->hw) o->hw = "host";
  HSR_CHECK(tune_setup(x, cl));
  x->net.optim_ns_per_elem = probe[0];
  x->net.data_gbs = probe[1];
  if (o->v_wait) { /* device-like compute: it takes nothing from the collectives, nor they from it */
    x->net.compute_off_host = 1;
    for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) x->net.steal[t] = 0, x->net.slow_busy[t] = 1;
  }
  snprintf(x->topo_desc, sizeof x->topo_desc, "this launch");
  /* the probes: the collectives' slowdown inside a step and the compute per unit */
  tune_probe pr[3];
  int npr = 0;
  for (int i = 0; i < nprobes; i++) {
    vmeas pm = {0};
    if (read_step(x->o->v_rounds, dir, probe_names[i], &pm) != 0)
      return hsr_error(HSR_ERR_INTERNAL, "--validate: no result in %s/%s.json", dir, probe_names[i]);
    tune_probe *q = &pr[npr++];
    memset(q, 0, sizeof *q);
    hsr_rt_config_default(&q->cfg);
    q->S = probes[i].S, q->R = cluster_world(cl) / probes[i].S;
    q->cfg.strategy = q->R > 1 ? HSR_RT_HYBRID : HSR_RT_FSDP;
    q->cfg.reshard = (hsr_rt_reshard)probes[i].pol;
    q->cfg.prefetch = probes[i].prefetch;
    q->cfg.prefetch_step = q->cfg.prefetch > 0; /* hsr bench step's default */
    q->step_ms = pm.step, q->comm_ms = pm.comm, q->compute_ms = pm.compute;
    memcpy(q->busy_ms, pm.busy, sizeof q->busy_ms);
    hsr_mesh *mm = NULL;
    mesh_request req = {q->S, 0, 0};
    HSR_CHECK(mesh_plan(cl, &req, &mm));
    hsr_status st = tune_mesh_shapes(cl, mm, q->shapes);
    mesh_free(mm);
    HSR_CHECK(st);
  }
  size_t used = strlen(x->calib_report);
  HSR_CHECK(tune_calib_step(&x->net, &x->model, pr, npr, x->calib_report + used, sizeof x->calib_report - used));
  snprintf(x->compute_desc, sizeof x->compute_desc,
           "%.3f ms per unit forward, fitted to the probes' measured compute (--compute-ms %g asked of hsr bench "
           "step); AdamW %.2f ns/element, data %.2f GB/s measured",
           x->model.fwd_ms, o->compute_ms, probe[0], probe[1]);
  tune_space sp;
  tune_space_default(&sp);
  sp.max_prefetch = (int)o->max_prefetch;
  sp.mem_budget = x->budget;
  sp.only_outer = o->outer;
  HSR_CHECK(tune_plan_run(cl, &x->model, &x->net, &sp, plan));
  if (*np == 0) *np = choose(o, plan, probes, nprobes, picks);
  for (int i = 0; i < *np; i++) picks[i].idx = find(plan, &picks[i]);
  return HSR_OK;
}

/* One round: the probes, then (picks known) every pick; names carry the round. */
static int run_round(hsr_boot *boot, const tune_opts *o, const vpick *probes, int nprobes, const vpick *picks, int np,
                     const char *dir, int round) {
  int rc = 0;
  char nm[96], base[64];
  for (int i = 0; i < nprobes && !rc; i++) {
    round_name(nm, sizeof nm, probe_names[i], round);
    rc = step_bench(boot, o, &probes[i], dir, nm);
  }
  for (int i = 0; i < np && !rc; i++) {
    pick_name(&picks[i], base, sizeof base);
    round_name(nm, sizeof nm, base, round);
    rc = step_bench(boot, o, &picks[i], dir, nm);
  }
  return rc;
}

/* Rank 0: the fit and plan, the table, the JSON, the plot. */
static hsr_status finish(tune_ctx *x, hsr_cluster *cl, const char *dir, const double *probe, const vpick *probes,
                         int nprobes, vpick *picks, int np) {
  tune_plan plan = {0};
  vmeas m[V_MAX];
  hsr_status st = tune_validate_plan(x, cl, dir, probe, probes, nprobes, picks, &np, &plan);
  for (int i = 0; i < np && st == HSR_OK; i++) {
    char name[64];
    pick_name(&picks[i], name, sizeof name);
    if (read_step(x->o->v_rounds, dir, name, &m[i]) != 0 || picks[i].idx < 0)
      st = hsr_error(HSR_ERR_INTERNAL, "--validate: no result for %s in %s", name, dir);
  }
  if (st == HSR_OK) {
    report(x, &plan, picks, m, np, dir, probes, nprobes);
    if (x->o->plot) {
      double meas[2 * V_MAX];
      int which[V_MAX];
      for (int i = 0; i < np; i++)
        which[i] = picks[i].idx, meas[2 * i] = m[i].step - m[i].exposed, meas[2 * i + 1] = m[i].exposed;
      st = tune_plot(x, &plan, meas, which, np, x->o->plot);
    }
    if (!x->o->json && x->o->v_keep) printf("# bench files: %s\n", dir);
  }
  tune_plan_free(&plan);
  return st;
}

int tune_validate(tune_opts *o) {
  /* units big enough that bandwidth and compute, not the scheduler's jitter, set the times */
  if (o->unit_bytes <= 0 && o->params <= 0) o->unit_bytes = 8 << 20;
  if (o->unit_bytes <= 0) o->unit_bytes = o->params / o->units * 4;
  if (!o->units_given) o->units = 8;
  if (o->compute_ms <= 0) o->compute_ms = 10;
  if (o->tflops > 0 || o->compute_from)
    return cli_usage_error("tune", "--validate times hsr bench step's compute: give --compute-ms-per-unit");
  o->params = 0;
  o->root = HSR_TUNE_ROOT_LAST;
  hsr_cluster *cl = NULL;
  char dir[256] = "";
  int rank = 0, nodes = 1, per = 1, rc = 0;
  double probe[2] = {0};
  hsr_boot *boot = NULL;
  hsr_status st = hsr_boot_init(&boot);
  if (st == HSR_OK) st = first_session(o, boot, &cl, &rank, &nodes, &per, probe, dir, sizeof dir);
  static const char *const colls[] = {"all_gather", "reduce_scatter", "all_reduce"};
  for (int i = 0; i < 3 && !rc && st == HSR_OK; i++) rc = coll_bench(boot, o, colls[i], 0, per, nodes, dir);
  if (!rc && st == HSR_OK && nodes > 1) rc = coll_bench(boot, o, "all_reduce", 1, per, nodes, dir);
  for (int i = 0; i < 2 && !rc && st == HSR_OK && nodes > 1; i++)
    rc = coll_bench(boot, o, colls[i], 2, per, nodes, dir);
  /* probes: the node-sized shard group without re-gathers; one shard group
   * over every node, without and with prefetch (overlap: what busy
   * collectives take from compute). The first and the last are measured at
   * every link rate: bench/tune_validate.sh compares them across rates. */
  vpick probes[3] = {{per, HSR_RT_RESHARD_NONE, 0, 1, -1, V_TOP, HSR_RT_OUTER_NONE},
                     {per * nodes, HSR_RT_RESHARD_FULL, 0, 0, -1, V_TOP, HSR_RT_OUTER_NONE},
                     {per * nodes, HSR_RT_RESHARD_FULL, 0, 2, -1, V_TOP, HSR_RT_OUTER_NONE}};
  int nprobes = nodes > 1 ? 3 : 2;
  if (nodes == 1) probes[1].prefetch = 1;
  vpick picks[V_MAX];
  int np = 0;
  tune_ctx x = {.o = o};
  for (int round = 1; round <= o->v_rounds && st == HSR_OK && !rc; round++) {
    rc = run_round(boot, o, probes, nprobes, picks, np, dir, round);
    if (round > 1 || rc) continue;
    /* rank 0 plans from the first round; every rank learns the picks */
    tune_plan plan = {0};
    if (rank == 0) st = tune_validate_plan(&x, cl, dir, probe, probes, nprobes, picks, &np, &plan);
    tune_plan_free(&plan);
    hsr_status sst = boot_bcast(boot, &np, sizeof np, 0);
    if (sst == HSR_OK && np > 0) sst = boot_bcast(boot, picks, sizeof picks, 0);
    if (st == HSR_OK) st = sst;
    if (st == HSR_OK) rc = run_round(boot, o, NULL, 0, picks, np, dir, 1);
  }
  if (rc && rank == 0) fprintf(stderr, "hsr tune --validate: a benchmark failed (exit %d); see %s\n", rc, dir);
  /* every round measured: fit to the best of each, predict, compare */
  if (st == HSR_OK && !rc && rank == 0) st = finish(&x, cl, dir, probe, probes, nprobes, picks, np);
  /* the temporary directory goes when all went well (--validate-keep keeps
   * it); after a failure it stays, for the files that say what happened */
  if (rank == 0 && dir[0] && !o->v_keep) {
    if (st == HSR_OK && !rc)
      nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    else
      fprintf(stderr, "hsr tune --validate: its files are kept in %s\n", dir);
  }
  cluster_free(cl);
  hsr_status f = boot ? hsr_boot_finalize(boot) : HSR_OK;
  if (st == HSR_OK) st = f;
  if (st != HSR_OK) return cli_fail("tune", st);
  return rc;
}
