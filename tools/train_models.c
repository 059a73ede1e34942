/* hsr train's model table: the MLP of the fast tests and the GPT. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_file.h"
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

static int mlp_meta(const train_run *r, hsr_st_kv *kv, char buf[8][64]) {
  const train_args *a = r->a;
  snprintf(buf[0], 64, "%d", a->layers);
  snprintf(buf[1], 64, "%d", a->dim);
  snprintf(buf[2], 64, "%d", a->classes);
  kv[0] = (hsr_st_kv){"hsr.model", "mlp"};
  kv[1] = (hsr_st_kv){"layers", buf[0]};
  kv[2] = (hsr_st_kv){"dim", buf[1]};
  kv[3] = (hsr_st_kv){"classes", buf[2]};
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

/* ---- the GPT (examples/gpt.h) ---- */
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

/* --init: the file's configuration wins where a flag was not given and must
 * agree where one was. */
static hsr_status gpt_from_file(train_args *a, int *n_ctx, int *vocab) {
  hsr_st_set *f;
  gpt_cfg c;
  HSR_CHECK(init_st_open(a->init, &f));
  hsr_status st = gpt_file_config(f, a->init, &c);
  hsr_st_set_close(f);
  HSR_CHECK(st);
  int *flag[] = {&a->layers, &a->heads, &a->dim};
  int file[] = {c.n_layer, c.n_head, c.n_embd};
  static const char *names[] = {"--layers", "--heads", "--dim"};
  for (int k = 0; k < 3; k++) {
    if (file[k] == 0 && k == 1) { /* heads unknown to the file (GPT-2's own has no hsr metadata) */
      if (a->heads < 0)
        return hsr_error(HSR_ERR_INVALID, "--init '%s' has no __metadata__ n_head: give --heads", a->init);
      continue;
    }
    if (*flag[k] >= 0 && *flag[k] != file[k])
      return hsr_error(HSR_ERR_INVALID, "%s %d, but --init '%s' holds %d", names[k], *flag[k], a->init, file[k]);
    *flag[k] = file[k];
  }
  *n_ctx = c.n_ctx, *vocab = c.vocab;
  return HSR_OK;
}

static hsr_status gpt_finish(train_args *a) {
  if (a->classes >= 0) return not_for("--classes", "gpt");
  int n_ctx = 0, vocab = 256;
  if (a->init) HSR_CHECK(gpt_from_file(a, &n_ctx, &vocab));
  if (a->layers < 0) a->layers = 4;
  if (a->heads < 0) a->heads = 4;
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
  gpt_cfg c = {
      .n_layer = a->layers, .n_head = a->heads, .n_embd = a->dim, .n_ctx = n_ctx > 0 ? n_ctx : a->seq, .vocab = vocab};
  return gpt_cfg_check(&c);
}

static hsr_status gpt_setup(train_run *r) {
  gpt_state *s = calloc(1, sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  r->m = s;
  train_args *a = r->a;
  int n_ctx = a->seq, vocab = 256;
  if (a->init) HSR_CHECK(gpt_from_file(a, &n_ctx, &vocab));
  s->c = (gpt_cfg){.n_layer = a->layers,
                   .n_head = a->heads,
                   .n_embd = a->dim,
                   .n_ctx = n_ctx,
                   .vocab = vocab,
                   .seed = a->seed,
                   .wrap_linear = a->wrap_linear};
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
  fprintf(f,
          "model: gpt, %d layers, %d heads, width %d, context %d, vocabulary %d, %.2fM parameters, %d units; "
          "sequence %d; data '%s' (%zu bytes, last %zu held out)\n",
          s->c.n_layer, s->c.n_head, s->c.n_embd, s->c.n_ctx, s->c.vocab, (double)gpt_num_weights(&s->c) / 1e6,
          gpt_num_units(&s->c), a->seq, a->data, s->d.len, s->d.len - s->d.split);
}

static int gpt_meta(const train_run *r, hsr_st_kv *kv, char buf[8][64]) {
  const gpt_cfg *c = &((const gpt_state *)r->m)->c;
  const int v[5] = {c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab};
  static const char *keys[5] = {"n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"};
  kv[0] = (hsr_st_kv){"hsr.model", "gpt"};
  for (int k = 0; k < 5; k++) {
    snprintf(buf[k], 64, "%d", v[k]);
    kv[k + 1] = (hsr_st_kv){keys[k], buf[k]};
  }
  return 6;
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
  gpt_cfg c = {.n_layer = a->layers, .n_head = a->heads, .n_embd = a->dim, .n_ctx = a->seq, .vocab = 256};
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
