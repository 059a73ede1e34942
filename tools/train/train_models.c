/* hsr train's model table: the MLP of the fast tests, the GPT and the
 * Llama-style model (the GPT's code with gpt_cfg.arch = GPT_ARCH_LLAMA). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/models/gpt_file.h"
#include "llama.h"
#include "hsr/config.h"
#include "mlp.h"
#include "train.h"

static hsr_status not_for(const char *flag, const char *model) {
  return hsr_error(HSR_ERR_INVALID, "%s does not apply to --model %s", flag, model);
}

static int dp_micro(const train_run *r) {
  int n = hsr_rt_dp_size(r->rt) * r->a->cfg.micro_batches;
  return r->a->batch / (n > 0 ? n : 1);
}

/* ---- the MLP (examples/mlp.h) ---- */
typedef struct mlp_state {
  mlp_cfg c;
  mlp_rt_ctx *x;
} mlp_state;

static hsr_status mlp_finish(train_args *a) {
  if (a->heads >= 0) return not_for("--heads", "mlp");
  if (a->kv_heads >= 0) return not_for("--kv-heads", "mlp");
  if (a->seq >= 0) return not_for("--seq", "mlp");
  if (a->data) return not_for("--data", "mlp");
  if (a->val_every >= 0 || a->val_windows >= 0) return not_for("--val-every/--val-windows", "mlp");
  if (a->layers < 0) a->layers = 4;
  if (a->dim < 0) a->dim = 64;
  if (a->classes < 0) a->classes = 8;
  if (a->batch < 0) a->batch = 64;
  if (a->lr < 0) a->lr = 3e-3f;
  if (a->lr_min < 0) a->lr_min = a->lr; /* constant unless asked */
  if (a->warmup < 0) a->warmup = 0;
  if (a->layers > 1000) return hsr_error(HSR_ERR_INVALID, "--layers %d (valid for the mlp: 0 to 1000)", a->layers);
  if (a->cfg.recompute != HSR_RT_RECOMPUTE_NONE)
    return hsr_error(HSR_ERR_INVALID,
                     "--recompute %s: the mlp keeps every activation (valid: --recompute none; the gpt model "
                     "recomputes full or selective)",
                     hsr_rt_recompute_name(a->cfg.recompute));
  return HSR_OK;
}

static hsr_status mlp_setup(train_run *r) {
  mlp_state *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  r->m = s;
  train_args *a = r->a;
  s->c = (mlp_cfg){.layers = a->layers,
                   .dim = a->dim,
                   .in_dim = a->dim,
                   .classes = a->classes,
                   .seed = a->seed,
                   .wrap_linear = a->wrap_linear};
  HSR_CHECK(mlp_rt_setup(&s->c, r->rt));
  if (a->init) HSR_CHECK(train_init_from(r->rt, r->boot, a->init));
  return mlp_rt_ctx_create(&s->c, r->rt, a->cfg.param_dtype, &s->x);
}

static hsr_status mlp_step(train_run *r, int64_t step, double *loss, hsr_rt_step_info *info) {
  mlp_state *s = r->m;
  return mlp_rt_train_step(s->x, step, r->a->batch, r->a->cfg.micro_batches, loss, info);
}

static hsr_status mlp_program(const train_run *r, hsr_prog_call **calls, int *n) {
  return mlp_rt_program(&((const mlp_state *)r->m)->c, r->a->cfg.micro_batches, calls, n);
}

static int mlp_blocks(const train_run *r) { return r->a->layers; }
static double mlp_tokens(const train_run *r) { return r->a->batch; }
static double mlp_flops(const train_run *r) {
  double d = r->a->dim;
  return 6.0 * (d * d + r->a->layers * 8.0 * d * d + d * r->a->classes);
}
static size_t mlp_act(const train_run *r) { return mlp_work_bytes(&((const mlp_state *)r->m)->c, dp_micro(r)); }

static void mlp_describe(const train_run *r, FILE *f) {
  const train_args *a = r->a;
  fprintf(f, "model: mlp, %d blocks of %d -> %d -> %d, %d classes, %d units\n", a->layers, a->dim, 4 * a->dim, a->dim,
          a->classes, mlp_rt_num_units(&((const mlp_state *)r->m)->c));
}

static int mlp_meta(const train_run *r, st_kv *kv, char buf[8][64]) {
  const train_args *a = r->a;
  snprintf(buf[0], 64, "%d", a->layers);
  snprintf(buf[1], 64, "%d", a->dim);
  snprintf(buf[2], 64, "%d", a->classes);
  kv[0] = (st_kv){"hsr.model", "mlp"};
  kv[1] = (st_kv){"layers", buf[0]};
  kv[2] = (st_kv){"dim", buf[1]};
  kv[3] = (st_kv){"classes", buf[2]};
  return 4;
}

static void mlp_probe(const train_run *r, size_t *m, size_t *n, size_t *k) {
  *m = (size_t)dp_micro(r), *n = 4 * (size_t)r->a->dim, *k = (size_t)r->a->dim;
}

static void mlp_free(train_run *r) {
  mlp_state *s = r->m;
  if (s) mlp_rt_ctx_free(s->x);
  free(s);
  r->m = NULL;
}

static void mlp_sizes(const train_args *a, int rows, double *params, double *unit_max, double *act) {
  mlp_cfg c = {.layers = a->layers, .dim = a->dim, .in_dim = a->dim, .classes = a->classes, .wrap_linear = 0};
  *params = 0, *unit_max = 0;
  for (int u = 0; u < mlp_num_units(&c); u++) {
    double n = 0;
    for (int k = 0; k < mlp_unit_params(&c, u); k++) n += (double)mlp_param_numel(&c, u, k);
    *params += n;
    if (n > *unit_max) *unit_max = n;
  }
  *act = (double)mlp_work_bytes(&c, rows);
}

const train_model train_model_mlp = {"mlp",      mlp_finish, mlp_setup, mlp_step, NULL,         mlp_program,
                                     mlp_blocks, mlp_tokens, mlp_flops, mlp_act,  mlp_describe, mlp_meta,
                                     mlp_probe,  NULL,       NULL,      mlp_free, mlp_sizes};

/* ---- the GPT and the Llama-style model (examples/gpt.h, examples/llama.h) ---- */
typedef struct gpt_state {
  gpt_cfg c;
  gpt_data d;
  gpt_rt_ctx *x;
} gpt_state;

/* The default data: the repository's text, concatenated at build time. */
static const char *default_data(void) {
  FILE *f = fopen(HSR_CORPUS_BUILD, "rb");
  if (f) {
    fclose(f);
    return HSR_CORPUS_BUILD;
  }
  return HSR_CORPUS_INSTALLED;
}

static int arch_of(const train_args *a) { return a->model == &train_model_llama ? GPT_ARCH_LLAMA : GPT_ARCH_GPT2; }

/* --init: the file's configuration wins where a flag was not given and must
 * agree where one was; *fc is the file's (n_ctx, vocab, the llama's MLP width). */
static hsr_status gpt_from_file(train_args *a, gpt_cfg *fc) {
  st_set *f;
  gpt_cfg c;
  HSR_CHECK(init_st_open(a->init, &f));
  hsr_status st = gpt_file_config(f, a->init, &c);
  if (st == HSR_OK && c.arch != arch_of(a))
    st = hsr_error(HSR_ERR_INVALID, "--init '%s' holds a %s model: give --model %s", a->init,
                   c.arch == GPT_ARCH_LLAMA ? "llama" : "gpt", c.arch == GPT_ARCH_LLAMA ? "llama" : "gpt");
  int llama = c.arch == GPT_ARCH_LLAMA;
  int *flag[] = {&a->layers, &a->heads, &a->dim, &a->kv_heads};
  static const char *names[] = {"--layers", "--heads", "--dim", "--kv-heads"};
  for (int k = 0; st == HSR_OK && k < 3 + llama; k++) {
    if (k == 3 && c.n_kv_head == 0) { /* transformers' own: from k_proj, now that the heads are known */
      c.n_head = a->heads;
      st = gpt_file_kv_heads(f, a->init, &c);
      if (st != HSR_OK) break;
    }
    int file[] = {c.n_layer, c.n_head, c.n_embd, c.n_kv_head};
    if (file[k] == 0 && k == 1) { /* heads unknown to the file (GPT-2's own has no hsr metadata) */
      if (a->heads < 0)
        st = hsr_error(HSR_ERR_INVALID, "--init '%s' has no __metadata__ n_head: give --heads", a->init);
      continue;
    }
    if (*flag[k] >= 0 && *flag[k] != file[k])
      st = hsr_error(HSR_ERR_INVALID, "%s %d, but --init '%s' holds %d", names[k], *flag[k], a->init, file[k]);
    *flag[k] = file[k];
  }
  st_set_close(f);
  *fc = c;
  return st;
}

/* The model of the flags (after gpt_finish) and the file's sizes. */
static gpt_cfg cfg_of(const train_args *a, int n_ctx, int vocab, int n_ff) {
  gpt_cfg c = {.n_layer = a->layers,
               .n_head = a->heads,
               .n_embd = a->dim,
               .n_ctx = n_ctx,
               .vocab = vocab,
               .seed = a->seed,
               .wrap_linear = a->wrap_linear,
               .arch = arch_of(a),
               .recompute = a->cfg.recompute};
  if (c.arch == GPT_ARCH_LLAMA) c.n_kv_head = a->kv_heads, c.n_ff = n_ff;
  return c;
}

static hsr_status gpt_finish(train_args *a) {
  const char *name = a->model->name;
  if (a->classes >= 0) return not_for("--classes", name);
  if (a->kv_heads >= 0 && arch_of(a) != GPT_ARCH_LLAMA) return not_for("--kv-heads", name);
  gpt_cfg fc = {.vocab = 256};
  if (a->init) HSR_CHECK(gpt_from_file(a, &fc));
  int n_ctx = fc.n_ctx, vocab = fc.vocab;
  if (a->layers < 0) a->layers = 4;
  if (a->heads < 0) a->heads = 4;
  if (a->kv_heads < 0 && arch_of(a) == GPT_ARCH_LLAMA) a->kv_heads = a->heads % 2 ? a->heads : a->heads / 2;
  if (a->dim < 0) a->dim = 128;
  if (a->seq < 0) a->seq = n_ctx > 0 && n_ctx < 128 ? n_ctx : 128;
  if (n_ctx > 0 && a->seq > n_ctx)
    return hsr_error(HSR_ERR_INVALID, "--seq %d exceeds the context of --init '%s' (%d)", a->seq, a->init, n_ctx);
  if (vocab < 256) return hsr_error(HSR_ERR_INVALID, "vocabulary %d: byte-level text needs at least 256 tokens", vocab);
  if (!a->data) a->data = default_data();
  if (a->batch < 0) a->batch = 16;
  if (a->lr < 0) a->lr = 3e-3f;
  if (a->lr_min < 0) a->lr_min = a->lr / 10;
  if (a->warmup < 0) a->warmup = a->steps >= 20 ? a->steps / 20 : 0;
  if (a->val_every < 0) a->val_every = a->steps >= 25 ? a->steps / 5 : a->steps; /* short runs: at the end */
  if (a->val_windows < 0) a->val_windows = 32;
  gpt_cfg c = cfg_of(a, n_ctx > 0 ? n_ctx : a->seq, vocab, fc.n_ff);
  return gpt_cfg_check(&c);
}

static hsr_status gpt_setup(train_run *r) {
  gpt_state *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  r->m = s;
  train_args *a = r->a;
  gpt_cfg fc = {.n_ctx = a->seq, .vocab = 256};
  if (a->init) HSR_CHECK(gpt_from_file(a, &fc));
  s->c = cfg_of(a, fc.n_ctx, fc.vocab, fc.n_ff);
  HSR_CHECK(train_agree(r->boot, gpt_data_open(a->data, a->seq, &s->d)));
  int held = gpt_data_val_windows(&s->d, a->seq); /* the same file on every rank: the same answer */
  if ((a->given & TRAIN_GIVEN_VAL_WINDOWS) && a->val_windows > held)
    return hsr_error(HSR_ERR_INVALID,
                     "--val-windows %d: the held-out tail of '%s' (its last tenth) holds %d windows of --seq %d + 1 "
                     "bytes (give at most %d)",
                     a->val_windows, a->data, held, a->seq, held);
  HSR_CHECK(gpt_rt_setup(&s->c, r->rt, !a->init));
  if (a->init) HSR_CHECK(train_init_from(r->rt, r->boot, a->init));
  return gpt_rt_ctx_create(&s->c, r->rt, a->cfg.param_dtype, a->seq, &s->x);
}

static hsr_status gpt_step(train_run *r, int64_t step, double *loss, hsr_rt_step_info *info) {
  gpt_state *s = r->m;
  int64_t g0 = step * r->a->batch; /* the global sample index of the step's first window */
  return gpt_rt_train_step(s->x, &s->d, r->a->seed, g0, r->a->batch, r->a->cfg.micro_batches, loss, info);
}

static hsr_status gpt_val(train_run *r, double *loss) {
  gpt_state *s = r->m;
  int n = gpt_data_val_windows(&s->d, r->a->seq);
  if (n > r->a->val_windows) n = r->a->val_windows;
  if (n < 1) {
    *loss = NAN;
    return HSR_OK;
  }
  return gpt_rt_val_loss(s->x, &s->d, n, loss);
}

static hsr_status gpt_program(const train_run *r, hsr_prog_call **calls, int *n) {
  return gpt_rt_program(&((const gpt_state *)r->m)->c, r->a->cfg.micro_batches, calls, n);
}

static int gpt_blocks(const train_run *r) { return r->a->layers; }
static double gpt_tokens(const train_run *r) { return (double)r->a->batch * r->a->seq; }
static double gpt_flops(const train_run *r) { return gpt_flops_per_token(&((const gpt_state *)r->m)->c, r->a->seq); }
static size_t gpt_act(const train_run *r) {
  return gpt_work_bytes(&((const gpt_state *)r->m)->c, dp_micro(r), r->a->seq);
}

static void gpt_describe(const train_run *r, FILE *f) {
  const gpt_state *s = r->m;
  const train_args *a = r->a;
  char extra[64] = "", mlp[64] = "";
  if (s->c.arch == GPT_ARCH_LLAMA) snprintf(mlp, sizeof mlp, " (MLP %d)", llama_ff(&s->c));
  if (s->c.arch == GPT_ARCH_LLAMA) snprintf(extra, sizeof extra, " (%d key/value)", llama_kv_heads(&s->c));
  fprintf(f,
          "model: %s, %d layers, %d heads%s, width %d%s, context %d, vocabulary %d, %.2fM parameters, %d units; "
          "sequence %d; data '%s' (%zu bytes, last %zu held out)\n",
          a->model->name, s->c.n_layer, s->c.n_head, extra, s->c.n_embd, mlp, s->c.n_ctx, s->c.vocab,
          (double)gpt_num_weights(&s->c) / 1e6, gpt_num_units(&s->c), a->seq, a->data, s->d.len, s->d.len - s->d.split);
}

static int gpt_meta(const train_run *r, st_kv *kv, char buf[8][64]) {
  const gpt_cfg *c = &((const gpt_state *)r->m)->c;
  int llama = c->arch == GPT_ARCH_LLAMA;
  const int v[7] = {
      c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab, llama ? llama_kv_heads(c) : 0, llama ? llama_ff(c) : 0};
  static const char *keys[7] = {"n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "n_kv_head", "n_ff"};
  kv[0] = (st_kv){"hsr.model", r->a->model->name};
  int n = llama ? 7 : 5;
  for (int k = 0; k < n; k++) {
    snprintf(buf[k], 64, "%d", v[k]);
    kv[k + 1] = (st_kv){keys[k], buf[k]};
  }
  return n + 1;
}

static void gpt_probe(const train_run *r, size_t *m, size_t *n, size_t *k) {
  *m = (size_t)dp_micro(r) * (size_t)r->a->seq, *n = 4 * (size_t)r->a->dim, *k = (size_t)r->a->dim;
}

static void gpt_profile(train_run *r, double s[3], int reset) { gpt_rt_timing(((gpt_state *)r->m)->x, s, reset); }

static void gpt_json(const train_run *r, cJSON *o) {
  const gpt_state *s = r->m;
  int n = gpt_data_val_windows(&s->d, r->a->seq);
  cJSON *d = cJSON_AddObjectToObject(o, "data");
  cJSON_AddStringToObject(d, "path", r->a->data);
  cJSON_AddNumberToObject(d, "bytes", (double)s->d.len);
  cJSON_AddNumberToObject(d, "val_start", (double)s->d.split); /* validation window i: [val_start + i T, + T + 1) */
  cJSON_AddNumberToObject(d, "val_windows", n < r->a->val_windows ? n : r->a->val_windows);
  cJSON_AddNumberToObject(d, "seq", r->a->seq);
}

static void gpt_free(train_run *r) {
  gpt_state *s = r->m;
  if (s) {
    gpt_rt_ctx_free(s->x);
    gpt_data_close(&s->d);
  }
  free(s);
  r->m = NULL;
}

static void gpt_sizes(const train_args *a, int rows, double *params, double *unit_max, double *act) {
  gpt_cfg c = cfg_of(a, a->seq, 256, 0);
  c.wrap_linear = 0;
  double *per = calloc((size_t)gpt_num_units(&c), sizeof *per);
  *params = 0, *unit_max = 0;
  for (int i = 0; i < gpt_num_params(&c); i++) {
    double n = (double)gpt_param_numel(&c, i);
    *params += n;
    if (per) per[gpt_param_unit(&c, i)] += n;
  }
  for (int u = 0; per && u < gpt_num_units(&c); u++)
    if (per[u] > *unit_max) *unit_max = per[u];
  if (!per) *unit_max = *params; /* out of memory here: the most a unit can be */
  free(per);
  *act = (double)gpt_work_bytes(&c, rows, a->seq);
}

const train_model train_model_gpt = {"gpt",      gpt_finish,  gpt_setup, gpt_step, gpt_val,      gpt_program,
                                     gpt_blocks, gpt_tokens,  gpt_flops, gpt_act,  gpt_describe, gpt_meta,
                                     gpt_probe,  gpt_profile, gpt_json,  gpt_free, gpt_sizes};

/* the same code: gpt_cfg.arch, from the table this is, picks the architecture */
const train_model train_model_llama = {"llama",    gpt_finish,  gpt_setup, gpt_step, gpt_val,      gpt_program,
                                       gpt_blocks, gpt_tokens,  gpt_flops, gpt_act,  gpt_describe, gpt_meta,
                                       gpt_probe,  gpt_profile, gpt_json,  gpt_free, gpt_sizes};
