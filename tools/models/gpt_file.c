/* GPT and Llama-style weights in safetensors files: the configuration from
 * __metadata__ (or the shapes), and the weights into plain arrays (hsr eval,
 * hsr sample). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_file.h"
#include "hsr/kernels.h"
#include "llama.h"

static int meta_int(const st_set *f, const char *key, int *out) {
  const char *v = st_set_meta(f, key);
  if (!v) return 0;
  char *end;
  long x = strtol(v, &end, 10);
  if (!*v || *end || x < 0 || x > 1 << 30) return -1;
  *out = (int)x;
  return 1;
}

static int shape_of(const st_set *f, const char *name, int64_t s[2]) {
  int i;
  st_info in;
  if (gpt_file_find(f, name, &i) != HSR_OK || st_set_info_at(f, i, &in) != HSR_OK || in.ndim != 2) return 0;
  s[0] = in.shape[0], s[1] = in.shape[1];
  return 1;
}

/* A Llama-style file without hsr's metadata (transformers' own): the shapes */
static hsr_status llama_from_shapes(const st_set *f, const char *path, gpt_cfg *c, const int have[7]) {
  int64_t s[2];
  if (!have[2] || !have[4]) {
    if (!shape_of(f, "model.embed_tokens.weight", s))
      return hsr_error(HSR_ERR_INVALID, "'%s': no 2-D tensor 'model.embed_tokens.weight'", path);
    if (!have[4]) c->vocab = (int)s[0];
    if (!have[2]) c->n_embd = (int)s[1];
  }
  if (!have[3]) c->n_ctx = 2048; /* no position table to read it from: Llama's first context */
  if (!have[6] && shape_of(f, "model.layers.0.mlp.gate_proj.weight", s)) c->n_ff = (int)s[0];
  if (!have[0]) {
    char name[64];
    int i;
    for (c->n_layer = 0; c->n_layer < GPT_MAX_LAYERS; c->n_layer++) {
      snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", c->n_layer);
      if (gpt_file_find(f, name, &i) != HSR_OK) break;
    }
  }
  return HSR_OK;
}

hsr_status gpt_file_kv_heads(const st_set *f, const char *path, gpt_cfg *c) {
  int64_t s[2];
  if (c->arch != GPT_ARCH_LLAMA || c->n_kv_head > 0 || c->n_head < 1) return HSR_OK;
  if (c->n_layer == 0 || !shape_of(f, "model.layers.0.self_attn.k_proj.weight", s)) {
    c->n_kv_head = c->n_head;
    return HSR_OK;
  }
  int D = c->n_embd / c->n_head;
  if (D < 1 || s[0] % D)
    return hsr_error(HSR_ERR_INVALID, "'%s': k_proj has %lld rows, not a multiple of the head size %d", path,
                     (long long)s[0], D);
  c->n_kv_head = (int)(s[0] / D);
  return HSR_OK;
}

hsr_status gpt_file_config(const st_set *f, const char *path, gpt_cfg *c) {
  const char *model = st_set_meta(f, "hsr.model");
  int i0;
  if (model && strcmp(model, "gpt") && strcmp(model, "llama"))
    return hsr_error(HSR_ERR_INVALID, "'%s' holds a '%s' model (__metadata__ hsr.model), not a gpt or a llama", path,
                     model);
  memset(c, 0, sizeof *c);
  c->arch = (model ? !strcmp(model, "llama") : st_set_find(f, "model.embed_tokens.weight", &i0) == HSR_OK)
                ? GPT_ARCH_LLAMA
                : GPT_ARCH_GPT2;
  static const char *keys[] = {"n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "n_kv_head", "n_ff"};
  int *dst[] = {&c->n_layer, &c->n_head, &c->n_embd, &c->n_ctx, &c->vocab, &c->n_kv_head, &c->n_ff}, have[7];
  for (int k = 0; k < (c->arch == GPT_ARCH_LLAMA ? 7 : 5); k++) {
    have[k] = meta_int(f, keys[k], dst[k]);
    if (have[k] < 0)
      return hsr_error(HSR_ERR_INVALID, "'%s': __metadata__ %s = '%s' is not a non-negative integer", path, keys[k],
                       st_set_meta(f, keys[k]));
  }
  /* without metadata: what the shapes say (heads cannot be seen: 0 = unknown) */
  if (c->arch == GPT_ARCH_LLAMA) return llama_from_shapes(f, path, c, have);
  int64_t s[2];
  if (!have[2] || !have[4]) {
    if (!shape_of(f, "wte.weight", s))
      return hsr_error(HSR_ERR_INVALID,
                       "'%s': no 2-D tensor 'wte.weight' and no __metadata__ n_embd/vocab_size: not "
                       "GPT-2 weights",
                       path);
    if (!have[4]) c->vocab = (int)s[0];
    if (!have[2]) c->n_embd = (int)s[1];
  }
  if (!have[3] && shape_of(f, "wpe.weight", s)) c->n_ctx = (int)s[0];
  if (!have[0]) {
    char name[64];
    int i;
    for (c->n_layer = 0; c->n_layer < GPT_MAX_LAYERS; c->n_layer++) {
      snprintf(name, sizeof name, "h.%d.ln_1.weight", c->n_layer);
      if (gpt_file_find(f, name, &i) != HSR_OK) break;
    }
  }
  return HSR_OK;
}

hsr_status gpt_file_open(const char *path, int heads, gpt_cfg *c, st_set **out) {
  st_set *f;
  HSR_CHECK(init_st_open(path, &f));
  hsr_status st = gpt_file_config(f, path, c);
  if (st == HSR_OK && heads > 0 && c->n_head > 0 && heads != c->n_head)
    st = hsr_error(HSR_ERR_INVALID, "--heads %d, but '%s' says n_head %d", heads, path, c->n_head);
  if (st == HSR_OK && heads > 0) c->n_head = heads;
  if (st == HSR_OK) st = gpt_file_kv_heads(f, path, c);
  if (st == HSR_OK && c->n_head == 0)
    st = hsr_error(HSR_ERR_INVALID,
                   "'%s': no __metadata__ n_head (the heads cannot be read from the shapes: give --heads; hsr train "
                   "--export writes it, and so does hsr ckpt export of a checkpoint that records its model)",
                   path);
  if (st == HSR_OK) st = gpt_cfg_check(c);
  if (st != HSR_OK) {
    st_set_close(f);
    return st; /* the message stands */
  }
  *out = f;
  return HSR_OK;
}

void gpt_file_free(const gpt_cfg *c, float **w) {
  if (!w) return;
  for (int i = 0; i < gpt_num_params(c); i++) free(w[i]);
  free(w);
}

hsr_status gpt_file_load(const st_set *f, const char *path, const gpt_cfg *c, float ***out) {
  int np = gpt_num_params(c);
  float **w = calloc((size_t)np, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = HSR_OK;
  hsr_device *h = NULL;
  for (int i = 0; st == HSR_OK && i < np; i++) {
    char name[64];
    int j;
    int64_t shape[2];
    int g, nd = gpt_param_shape(c, i, shape, &g);
    size_t n = gpt_param_numel(c, i);
    st_info in;
    gpt_param_name(c, i, name, sizeof name);
    st = gpt_file_find(f, name, &j);
    if (st == HSR_OK) st = st_set_info_at(f, j, &in);
    if (st == HSR_OK && (in.ndim != nd || in.shape[0] != shape[0] || (nd == 2 && in.shape[1] != shape[1])))
      st =
          hsr_error(HSR_ERR_INVALID, "'%s': tensor '%s' does not have the shape its configuration implies", path, name);
    if (st == HSR_OK && !(w[i] = malloc((n ? n : 1) * sizeof(float)))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    if (st == HSR_OK && !strcmp(in.dtype, "F32")) {
      st = st_set_read(f, j, 0, w[i], n * 4);
    } else if (st == HSR_OK && (!strcmp(in.dtype, "BF16") || !strcmp(in.dtype, "F16"))) {
      uint16_t *t = malloc((n ? n : 1) * 2);
      st = t ? st_set_read(f, j, 0, t, n * 2) : hsr_error(HSR_ERR_NOMEM, "out of memory");
      if (st == HSR_OK && !h) st = hsr_device_open(HSR_DEVICE_HOST, 0, &h);
      if (st == HSR_OK)
        st = hsr_kernels_cast(h, NULL, n, t, !strcmp(in.dtype, "BF16") ? HSR_BF16 : HSR_F16, w[i], HSR_F32);
      free(t);
    } else if (st == HSR_OK) {
      st = hsr_error(HSR_ERR_INVALID, "'%s': tensor '%s' is %s (valid: F32, BF16, F16)", path, name, in.dtype);
    }
  }
  hsr_device_close(h);
  if (st != HSR_OK) {
    gpt_file_free(c, w);
    return st;
  }
  *out = w;
  return HSR_OK;
}
