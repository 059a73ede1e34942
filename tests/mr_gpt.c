/* Multi-rank equivalence of the GPT example, launched for real; with
 * --llama first, of the Llama-style model (examples/llama.h) instead.
 *
 *   mr_gpt equiv SPEC...   each SPEC (k=v,...) trains the GPT 6 steps with a
 *                          warm-up + cosine schedule and compares, every step,
 *                          the loss, the gradient norm and every parameter
 *                          (the tied wte included) with the single-rank
 *                          reference (whole batch, plain AdamW); checks the
 *                          per-step collective counts against the policy,
 *                          that steady-state steps allocate nothing, and
 *                          bitwise repeats (twice=1, same=TAG).
 *   mr_gpt export FILE     trains 3 steps, writes FILE with hsr train's
 *                          export and FILE.shards in Hugging Face's sharded
 *                          layout (3000-byte shards: several files), reads
 *                          both back and compares every tensor with the
 *                          run's parameters; then --init's load of either
 *                          into a new engine on this mesh reproduces them
 *                          bitwise.
 *
 * SPEC keys: those of mr_spec.h, plus wrap (block | linear), val (1: a
 * validation pass before steps 2 and 4, whose loss must equal the
 * reference's forward on the same weights), rc (none | full | selective:
 * activation recompute, against the reference that keeps everything; every
 * block recomputes once per micro-batch and the gathers stay the policy's),
 * twice, same, device. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "hsr/boot.h"
#include "hsr/comm.h"
#include "collectives/comm_internal.h"
#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "runtime/io/safetensors.h"
#include "runtime/io/safetensors_sharded.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "kernels/kernels_internal.h"
#include "tools/train/train.h"

#define STEPS 6
#define BATCH g_batch
static int g_batch = 8; /* global batch: --batch N (a multiple of the data-parallel ranks) */
#define T 8
#define WARMUP 2
#define LR 3e-3f
#define LR_MIN 3e-4f

static int g_rank;
static int g_fail;

#include "mr_check.h"
#include "mr_spec.h"

/* odd sizes: parameters straddle shard boundaries and leave alignment gaps
 * (the llama: two query heads of 6 on one key/value head, MLP width 20) */
static const gpt_cfg gpt_base = {.n_layer = 2, .n_head = 2, .n_embd = 12, .n_ctx = T, .vocab = 256, .seed = 7};
static const gpt_cfg llama_base = {.n_layer = 2,
                                   .n_head = 2,
                                   .n_embd = 12,
                                   .n_ctx = T,
                                   .vocab = 256,
                                   .seed = 7,
                                   .arch = GPT_ARCH_LLAMA,
                                   .n_kv_head = 1,
                                   .n_ff = 20};
static gpt_cfg base; /* one of the two, set once in main */
static const gpt_opt opt = {.lr = LR, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
static uint8_t g_text[6000];
static gpt_data g_data;

typedef struct spec {
  hsr_rt_config cfg;
  int twice, wrap, val;
  char same[16], text[256];
} spec;

static int parse_spec(const char *s, spec *out) {
  hsr_rt_config *c = &out->cfg;
  hsr_rt_config_default(c);
  c->num_groups = 2;
  c->groups[0] = (hsr_rt_opt_group){opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay};
  c->groups[1] = (hsr_rt_opt_group){opt.lr, opt.beta1, opt.beta2, opt.eps, 0.0f};
  c->poison = 1;
  out->twice = out->wrap = out->val = 0;
  out->same[0] = 0;
  snprintf(out->text, sizeof out->text, "%s", s);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *v = strchr(kv, '=');
    if (!v) return fprintf(stderr, "bad spec item '%s'\n", kv), 1;
    *v++ = 0;
    hsr_status st = HSR_OK;
    if (mr_spec_policy(c, kv, v, &st)) {
    } else if (!strcmp(kv, "twice")) {
      out->twice = atoi(v);
    } else if (!strcmp(kv, "val")) {
      out->val = atoi(v);
    } else if (!strcmp(kv, "wrap")) {
      if (strcmp(v, "block") && strcmp(v, "linear")) return fprintf(stderr, "wrap=%s (block | linear)\n", v), 1;
      out->wrap = !strcmp(v, "linear");
    } else if (!strcmp(kv, "rc")) {
      st = rt_parse_recompute(v, &c->recompute);
    } else if (!strcmp(kv, "same")) {
      snprintf(out->same, sizeof out->same, "%s", v);
    } else {
      return fprintf(stderr, "unknown spec key '%s'\n", kv), 1;
    }
    if (st != HSR_OK) return fprintf(stderr, "spec '%s': %s\n", s, hsr_last_error()), 1;
  }
  return 0;
}

/* What the policy implies, per step and rank (as tests/mr_runtime.c). */
static void expected_calls(const hsr_rt_config *c, int S, int R, int K, int U,
                           uint64_t e[HSR_RT_GROUP_COUNT][HSR_OP_COUNT]) {
  memset(e, 0, sizeof(uint64_t) * HSR_RT_GROUP_COUNT * HSR_OP_COUNT);
  int M = c->micro_batches, sharded = c->strategy == HSR_RT_FSDP || c->strategy == HSR_RT_HYBRID;
  int sgrads = sharded || c->strategy == HSR_RT_ZERO2, nred = c->sync == HSR_RT_SYNC_NONE ? 1 : M;
  if (S > 1) {
    if (sharded) {
      int resharded = c->root_reshard ? U : U - 1;
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] = (uint64_t)(M * U);
      if (c->reshard == HSR_RT_RESHARD_FULL) e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] += (uint64_t)(M * resharded);
      if (c->reshard == HSR_RT_RESHARD_PARTIAL && K > 1)
        e[HSR_RT_GROUP_PARTIAL][HSR_OP_ALLGATHER] = (uint64_t)(M * resharded);
    } else if (c->strategy != HSR_RT_DDP) {
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLGATHER] = (uint64_t)U;
    }
    if (sgrads)
      e[HSR_RT_GROUP_SHARD][HSR_OP_REDUCE_SCATTER] = (uint64_t)(U * nred);
    else
      e[HSR_RT_GROUP_SHARD][HSR_OP_ALLREDUCE] = (uint64_t)(U * nred);
    e[HSR_RT_GROUP_SHARD][HSR_OP_ALLREDUCE] += 1;
  }
  int ars = c->sync == HSR_RT_SYNC_FULL ? M : 1;
  if (R > 1 && c->outer_shard == HSR_RT_OUTER_OPTIM) { /* reduce-scatter over R, the step's gathers, the norm */
    e[HSR_RT_GROUP_REPLICATE][HSR_OP_REDUCE_SCATTER] = (uint64_t)(U * ars);
    e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLGATHER] = (uint64_t)U;
    e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE] = 1;
  } else if (R > 1) {
    e[HSR_RT_GROUP_REPLICATE][HSR_OP_ALLREDUCE] = (uint64_t)(U * ars);
  }
}

typedef struct history {
  double loss[STEPS], norm[STEPS], val[STEPS];
  float **p[STEPS]; /* per step, per parameter */
} history;

static int np(void) { return gpt_num_params(&base); }
static const rt_lr_schedule sched = {LR, LR_MIN, WARMUP, STEPS};

static void history_free(history *h) {
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; h->p[s] && i < np(); i++) free(h->p[s][i]);
    free(h->p[s]);
    h->p[s] = NULL;
  }
}

static float **copy_params(gpt_ref *r) {
  float **p = calloc((size_t)np(), sizeof *p);
  for (int i = 0; i < np(); i++) {
    size_t n = gpt_param_numel(&base, i);
    p[i] = malloc(n * 4 + 4);
    memcpy(p[i], gpt_ref_param(r, i), n * 4);
  }
  return p;
}

/* mean loss of validation windows [0, n) under the reference's weights */
static int ref_val(gpt_ref *r, int n, double *out) {
  gpt_work *w;
  OK(gpt_work_create(&base, n, T, NULL, NULL, &w));
  int32_t in[16 * T], tg[16 * T];
  for (int i = 0; i < n; i++) gpt_data_val_window(&g_data, i, T, in + i * T, tg + i * T);
  float **p = copy_params(r);
  gpt_arrays a = {&base, p, NULL};
  gpt_binder b = gpt_arrays_binder(&a);
  OK(gpt_forward(&base, w, in, tg, n, T, &b, out));
  for (int i = 0; i < np(); i++) free(p[i]);
  free(p);
  gpt_work_free(w);
  return 0;
}

#define VAL_WINDOWS 5

static int reference(double clip, history *h) {
  gpt_opt o = opt;
  o.clip = clip;
  gpt_ref *r;
  OK(gpt_ref_create(&base, &o, BATCH, T, &r));
  for (int s = 0; s < STEPS; s++) {
    if (s == 2 || s == 4)
      if (ref_val(r, VAL_WINDOWS, &h->val[s])) return 1;
    float lr = (float)rt_lr_at(&sched, s + 1);
    OK(gpt_ref_step(r, &g_data, base.seed, (int64_t)s * BATCH, lr, &h->loss[s], &h->norm[s]));
    h->p[s] = copy_params(r);
  }
  gpt_ref_free(r);
  return 0;
}

static float **read_params(hsr_rt *rt) {
  float **p = calloc((size_t)np(), sizeof *p);
  char name[64];
  for (int i = 0; i < np(); i++) {
    gpt_param_name(&base, i, name, sizeof name);
    p[i] = malloc(gpt_param_numel(&base, i) * 4 + 4);
    if (rt_param_read(rt, name, p[i]) != HSR_OK) fprintf(stderr, "read %s: %s\n", name, hsr_last_error());
  }
  return p;
}

/* worst relative difference of the parameters against the reference's */
static double compare(float **p, float **q, const spec *sp, int step, double tol, int weights_only) {
  double worst = 0;
  for (int i = 0; i < np(); i++) {
    int64_t sh[2];
    int grp;
    gpt_param_shape(&base, i, sh, &grp);
    /* bf16: Adam's first steps move the zero-initialised biases by lr x sign(g),
     * and bf16 flips the sign of the tiny ones; the weights, the loss and the
     * norm are what mixed precision must keep */
    if (weights_only && grp) continue;
    size_t n = gpt_param_numel(&base, i);
    double md = 0, mr = 0, d2 = 0, r2 = 0;
    for (size_t j = 0; j < n; j++) {
      double d = (double)p[i][j] - q[i][j];
      md = fmax(md, fabs(d));
      mr = fmax(mr, fabs((double)q[i][j]));
      d2 += d * d, r2 += (double)q[i][j] * q[i][j];
    }
    if (weights_only) md = sqrt(d2), mr = sqrt(r2); /* bf16: the error's norm against the tensor's */
    double rel = md / (mr > 0 ? mr : 1);
    worst = fmax(worst, rel);
    char name[64];
    gpt_param_name(&base, i, name, sizeof name);
    CHECK(rel <= tol, "%s: step %d: parameter %s differs from the single-rank reference: relative %.3g > %.0e",
          sp->text, step + 1, name, rel, tol);
  }
  return worst;
}

static int train(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const spec *sp, const history *ref,
                 history *got, double *worst) {
  gpt_cfg c = base;
  c.wrap_linear = sp->wrap;
  c.recompute = sp->cfg.recompute;
  hsr_rt *rt = NULL;
  OK(hsr_rt_create(boot, sp->cfg.device == HSR_DEVICE_CUDA ? NULL : world, cl, &sp->cfg, &rt));
  OK(gpt_rt_setup(&c, rt, 1));
  gpt_rt_ctx *x = NULL;
  OK(gpt_rt_ctx_create(&c, rt, sp->cfg.param_dtype, T, &x));
  int S = rt_shard(rt), R = rt_replicate(rt), K = rt_partial(rt), U = gpt_num_units(&c);
  uint64_t e[HSR_RT_GROUP_COUNT][HSR_OP_COUNT];
  expected_calls(&sp->cfg, S, R, K, U, e);
  int f32 = sp->cfg.param_dtype == HSR_F32 && sp->cfg.reduce_dtype == HSR_F32;
  /* Adam's first steps divide by |g| + eps: tiny gradients' summation-order
   * differences grow to ~2e-5 of the parameters' scale here */
  double tol = f32 ? (sp->cfg.device == HSR_DEVICE_CUDA ? 3e-4 : 1e-4) : 1e-1;
  rt_stats st3 = {0}, st;
  *worst = 0;
  for (int s = 0; s < STEPS; s++) {
    int after_val = sp->val && (s == 2 || s == 4);
    if (after_val) {
      OK(gpt_rt_val_loss(x, &g_data, VAL_WINDOWS, &got->val[s]));
      CHECK(fabs(got->val[s] - ref->val[s]) <= tol * ref->val[s],
            "%s: validation loss before step %d: %.7f, "
            "reference %.7f",
            sp->text, s + 1, got->val[s], ref->val[s]);
    }
    OK(hsr_rt_set_lr(rt, 0, rt_lr_at(&sched, s + 1)));
    OK(hsr_rt_set_lr(rt, 1, rt_lr_at(&sched, s + 1)));
    hsr_rt_step_info info;
    OK(gpt_rt_train_step(x, &g_data, base.seed, (int64_t)s * BATCH, BATCH, sp->cfg.micro_batches, &got->loss[s],
                         &info));
    got->norm[s] = info.grad_norm;
    CHECK(info.step == s + 1, "%s: step counter %lld", sp->text, (long long)info.step);
    int rcs = sp->cfg.recompute != HSR_RT_RECOMPUTE_NONE ? sp->cfg.micro_batches * (U - 1) : 0;
    CHECK(info.recomputes == rcs, "%s: step %d: %d recomputes, expected %d (every block, every micro-batch)",
          sp->text, s + 1, info.recomputes, rcs);
    for (int g = 0; g < HSR_RT_GROUP_COUNT && !after_val; g++) /* a validation pass's gathers count in the next step */
      for (int op = 0; op < HSR_OP_COUNT; op++)
        CHECK(info.calls[g][op] == e[g][op], "%s (mesh %dx%d K %d): step %d: %s %s calls %llu, policy implies %llu",
              sp->text, R, S, K, s + 1, rt_group_name((hsr_rt_group)g), op_name((hsr_op)op),
              (unsigned long long)info.calls[g][op], (unsigned long long)e[g][op]);
    double ltol = f32 ? 1e-5 : 2e-2;
    CHECK(fabs(got->loss[s] - ref->loss[s]) <= ltol * ref->loss[s], "%s: step %d: loss %.7f, reference %.7f", sp->text,
          s + 1, got->loss[s], ref->loss[s]);
    CHECK(fabs(got->norm[s] - ref->norm[s]) <= (f32 ? 1e-4 : 5e-2) * ref->norm[s],
          "%s: step %d: gradient norm %.7f, reference %.7f", sp->text, s + 1, got->norm[s], ref->norm[s]);
    got->p[s] = read_params(rt);
    *worst = fmax(*worst, compare(got->p[s], ref->p[s], sp, s, tol, !f32));
    if (s == 2) OK(rt_get_stats(rt, &st3));
  }
  OK(rt_get_stats(rt, &st));
  CHECK(st.allocs == st3.allocs, "%s: steady-state steps allocated %llu buffers", sp->text,
        (unsigned long long)(st.allocs - st3.allocs));
  gpt_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  return 0;
}

static int same_bits(const history *a, const history *b) {
  int same = !memcmp(a->loss, b->loss, sizeof a->loss);
  for (int i = 0; i < np(); i++) same &= !memcmp(a->p[STEPS - 1][i], b->p[STEPS - 1][i], gpt_param_numel(&base, i) * 4);
  return same;
}

static int run_equiv(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, int nspec, char **specs) {
  history ref[1]; /* the reference for the current clip setting */
  memset(ref, 0, sizeof ref);
  double ref_clip = -1;
  char tags[8][16];
  history tagh[8];
  int ntags = 0;
  for (int i = 0; i < nspec; i++) {
    spec sp;
    if (parse_spec(specs[i], &sp)) return 2;
    if (sp.cfg.clip != ref_clip) {
      history_free(&ref[0]);
      if (reference(sp.cfg.clip, &ref[0])) return 1;
      ref_clip = sp.cfg.clip;
    }
    history got, again;
    memset(&got, 0, sizeof got), memset(&again, 0, sizeof again);
    double worst;
    if (train(boot, world, cl, &sp, &ref[0], &got, &worst)) return 1;
    if (sp.twice) {
      double w2;
      if (train(boot, world, cl, &sp, &ref[0], &again, &w2)) return 1;
      CHECK(same_bits(&got, &again), "%s: two runs are not bitwise identical", sp.text);
      history_free(&again);
    }
    if (sp.same[0]) {
      int t = 0;
      while (t < ntags && strcmp(tags[t], sp.same)) t++;
      if (t == ntags && ntags < 8) {
        snprintf(tags[ntags], sizeof tags[0], "%s", sp.same);
        tagh[ntags++] = got;
        memset(&got, 0, sizeof got);
      } else if (t < ntags) {
        CHECK(same_bits(&tagh[t], &got), "%s: not bitwise identical to the first configuration tagged '%s'", sp.text,
              sp.same);
      }
    }
    if (g_rank == 0)
      printf("ok %-72s max rel %.2e loss %.4f -> %.4f%s\n", sp.text, worst, ref[0].loss[0], ref[0].loss[STEPS - 1],
             sp.twice ? " (bitwise repeat)" : "");
    fflush(stdout);
    history_free(&got);
  }
  history_free(&ref[0]);
  for (int t = 0; t < ntags; t++) history_free(&tagh[t]);
  return 0;
}

/* Export, read back, --init into a fresh engine: the same bits throughout. */
static int run_export(hsr_boot *boot, hsr_comm *world, const hsr_cluster *cl, const char *path) {
  spec sp;
  if (parse_spec(hsr_boot_size(boot) >= 4 ? "strategy=hybrid,S=2" : "strategy=fsdp", &sp)) return 2;
  hsr_rt *rt;
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(gpt_rt_setup(&base, rt, 1));
  gpt_rt_ctx *x;
  OK(gpt_rt_ctx_create(&base, rt, HSR_F32, T, &x));
  for (int s = 0; s < 3; s++) OK(gpt_rt_train_step(x, &g_data, base.seed, (int64_t)s * BATCH, BATCH, 1, NULL, NULL));
  float **p = read_params(rt);
  st_kv meta[2] = {{"hsr.model", base.arch == GPT_ARCH_LLAMA ? "llama" : "gpt"}, {"n_layer", "2"}};
  /* one file, and Hugging Face's sharded layout with shards far below the big tensors */
  char shards[600];
  snprintf(shards, sizeof shards, "%s.shards", path);
  int files = 0;
  OK(train_export(rt, boot, path, 0, meta, 2, NULL));
  OK(train_export(rt, boot, shards, 3000, meta, 2, &files));
  char name[64];
  for (int form = 0; form < 2; form++) {
    const char *at = form ? shards : path;
    st_set *f;
    OK(st_set_open(at, &f));
    CHECK(st_set_count(f) == np(), "export %s holds %d tensors, the model %d", at, st_set_count(f), np());
    CHECK((g_rank || st_set_num_files(f) == (form ? files : 1)) && (!form || st_set_num_files(f) > 2),
          "export %s: %d files (the writer said %d)", at, st_set_num_files(f), files);
    CHECK(!strcmp(st_set_meta(f, "n_layer"), "2"), "export %s: metadata n_layer", at);
    for (int i = 0; i < np(); i++) {
      gpt_param_name(&base, i, name, sizeof name);
      int j = -1;
      OK(st_set_find(f, name, &j));
      size_t n = gpt_param_numel(&base, i);
      float *q = malloc(n * 4 + 4);
      OK(st_set_read(f, j, 0, q, n * 4));
      CHECK(!memcmp(p[i], q, n * 4), "export %s: tensor %s differs from the run's parameter", at, name);
      free(q);
    }
    st_set_close(f);
  }
  gpt_rt_ctx_free(x);
  OK(hsr_rt_destroy(rt));
  /* --init's load on the same mesh, from either form: bitwise the same parameters */
  for (int form = 0; form < 2; form++) {
    OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
    OK(gpt_rt_setup(&base, rt, 0));
    OK(train_init_from(rt, boot, form ? shards : path));
    float **q = read_params(rt);
    for (int i = 0; i < np(); i++) {
      gpt_param_name(&base, i, name, sizeof name);
      CHECK(!memcmp(p[i], q[i], gpt_param_numel(&base, i) * 4), "--init %s: parameter %s differs from the file",
            form ? shards : path, name);
      free(q[i]);
    }
    free(q);
    if (!form) OK(hsr_rt_destroy(rt));
  }
  for (int i = 0; i < np(); i++) free(p[i]);
  free(p);
  /* a mismatch is refused on every rank, with the tensor named */
  OK(hsr_rt_destroy(rt));
  gpt_cfg other = base;
  other.n_embd = 16, other.n_head = 2;
  OK(hsr_rt_create(boot, world, cl, &sp.cfg, &rt));
  OK(gpt_rt_setup(&other, rt, 1));
  hsr_status st = train_init_from(rt, boot, path);
  gpt_param_name(&base, 0, name, sizeof name); /* the embedding: its width differs */
  CHECK(st == HSR_ERR_INVALID && strstr(hsr_last_error(), name) && strstr(hsr_last_error(), "shape"),
        "--init of another shape: %s (%s)", hsr_status_str(st), hsr_last_error());
  OK(hsr_rt_destroy(rt));
  if (g_rank == 0)
    printf("ok export %s and %s (%d shards): %d tensors equal the run's parameters; --init of either reproduces them\n",
           path, shards, files, np());
  return 0;
}

int main(int argc, char **argv) {
  base = gpt_base;
  if (argc > 2 && !strcmp(argv[1], "--batch")) {
    g_batch = atoi(argv[2]);
    argv[2] = argv[0], argv += 2, argc -= 2;
  }
  if (argc > 1 && !strcmp(argv[1], "--llama")) {
    base = llama_base;
    argv[1] = argv[0], argv++, argc--;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: mr_gpt [--batch N] [--llama] equiv SPEC... | export FILE\n");
    return 2;
  }
  openblas_set_num_threads(1);
  hsr_boot *boot;
  if (hsr_boot_init(&boot) != HSR_OK) {
    fprintf(stderr, "boot: %s\n", hsr_last_error());
    return 1;
  }
  g_rank = hsr_boot_rank(boot);
  /* a text of words: every rank builds the same bytes */
  static const char *words[] = {"the ", "model ", "learns ", "bytes ", "of ", "text ", "and ", "sharded ", "units "};
  uint64_t z = 41;
  size_t n = 0;
  while (n + 16 < sizeof g_text) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    const char *w = words[(z >> 33) % 9];
    memcpy(g_text + n, w, strlen(w));
    n += strlen(w);
  }
  int rc = 1;
  hsr_comm *world = NULL;
  hsr_topo *t = NULL;
  hsr_cluster *cl = NULL;
  if (gpt_data_wrap(g_text, n, T, &g_data) == HSR_OK && hsr_comm_world(boot, HSR_BACKEND_HOST, &world) == HSR_OK &&
      topo_discover(NULL, &t) == HSR_OK && cluster_gather(boot, t, &cl) == HSR_OK) {
    int cuda = 0;
    for (int i = 2; i < argc; i++) cuda |= strstr(argv[i], "device=cuda") != NULL;
    if (cuda && device_cuda_count() == 0) {
      if (g_rank == 0) printf("SKIP: a spec needs a CUDA device and none is usable here\n");
      rc = 77;
    } else if (!strcmp(argv[1], "equiv")) {
      rc = run_equiv(boot, world, cl, argc - 2, argv + 2);
    } else if (!strcmp(argv[1], "export") && argc == 3) {
      rc = run_export(boot, world, cl, argv[2]);
    } else {
      rc = 2;
    }
  } else {
    fprintf(stderr, "setup: %s\n", hsr_last_error());
  }
  cluster_free(cl);
  topo_free(t);
  hsr_comm_free(world);
  hsr_boot_finalize(boot);
  if (rc == 0 && g_fail) rc = 1;
  if (rc == 0 && g_rank == 0) printf("PASS\n");
  return rc;
}
