/* config.json for transformers (hf_config.h). */
#include "hf_config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "llama.h"

static const char *meta_of(const st_kv *kv, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(kv[i].key, key)) return kv[i].value;
  return NULL;
}

/* LlamaForCausalLM's. */
static cJSON *llama_config(const long *v) {
  cJSON *o = cJSON_CreateObject(), *arch = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString("LlamaForCausalLM"));
  cJSON_AddStringToObject(o, "model_type", "llama");
  cJSON_AddNumberToObject(o, "vocab_size", (double)v[6]);
  cJSON_AddNumberToObject(o, "hidden_size", (double)v[3]);
  cJSON_AddNumberToObject(o, "intermediate_size", (double)v[4]);
  cJSON_AddNumberToObject(o, "num_hidden_layers", (double)v[0]);
  cJSON_AddNumberToObject(o, "num_attention_heads", (double)v[1]);
  cJSON_AddNumberToObject(o, "num_key_value_heads", (double)v[2]);
  cJSON_AddNumberToObject(o, "head_dim", (double)(v[3] / v[1]));
  cJSON_AddNumberToObject(o, "max_position_embeddings", (double)v[5]);
  cJSON_AddStringToObject(o, "hidden_act", "silu");
  cJSON_AddNumberToObject(o, "rms_norm_eps", 1e-5); /* LLAMA_RMS_EPS, not its f32 rounding */
  /* transformers 4 reads rope_theta, 5 rope_parameters: both, the same */
  cJSON_AddNumberToObject(o, "rope_theta", (double)LLAMA_ROPE_THETA);
  cJSON *rope = cJSON_AddObjectToObject(o, "rope_parameters");
  cJSON_AddStringToObject(rope, "rope_type", "default");
  cJSON_AddNumberToObject(rope, "rope_theta", (double)LLAMA_ROPE_THETA);
  cJSON_AddBoolToObject(o, "attention_bias", 0);
  cJSON_AddBoolToObject(o, "mlp_bias", 0);
  cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
  cJSON_AddBoolToObject(o, "tie_word_embeddings", 0);
  cJSON_AddNumberToObject(o, "initializer_range", 0.02);
  cJSON_AddStringToObject(o, "torch_dtype", "float32");
  return o;
}

static hsr_status write_config(const char *dir, char *text, int *wrote) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path) {
    free(text);
    return hsr_error(HSR_ERR_INVALID, "config.json: the directory '%.64s...' is too long a path", dir);
  }
  hsr_status st = cli_write_text("config.json", path, text);
  free(text);
  if (st == HSR_OK) *wrote = 1;
  return st;
}

/* The metadata's integers keys[0..n) into v (keys[1], n_head, positive). */
static hsr_status ints_of(const st_kv *kv, int n, const char *const *keys, int nk, long *v) {
  for (int k = 0; k < nk; k++) {
    const char *s = meta_of(kv, n, keys[k]);
    char *end = NULL;
    v[k] = s ? strtol(s, &end, 10) : -1;
    if (!s || !*s || *end || v[k] < 0 || (k == 1 && v[k] == 0))
      return hsr_error(HSR_ERR_INVALID, "config.json: the model's metadata has no valid %s ('%s')", keys[k],
                       s ? s : "absent");
  }
  return HSR_OK;
}

/* GPT2LMHeadModel's: GPT-2's architecture exactly (docs/gpt.md): LayerNorm
 * eps 1e-5, GELU's tanh form (gelu_new), the head tied to wte, no dropout. */
static cJSON *gpt2_config(const long *v) {
  cJSON *o = cJSON_CreateObject(), *arch = cJSON_AddArrayToObject(o, "architectures");
  cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
  cJSON_AddStringToObject(o, "model_type", "gpt2");
  cJSON_AddNumberToObject(o, "vocab_size", (double)v[4]);
  cJSON_AddNumberToObject(o, "n_positions", (double)v[3]);
  cJSON_AddNumberToObject(o, "n_ctx", (double)v[3]);
  cJSON_AddNumberToObject(o, "n_embd", (double)v[2]);
  cJSON_AddNumberToObject(o, "n_layer", (double)v[0]);
  cJSON_AddNumberToObject(o, "n_head", (double)v[1]);
  cJSON_AddNullToObject(o, "n_inner"); /* 4 n_embd */
  cJSON_AddStringToObject(o, "activation_function", "gelu_new");
  cJSON_AddNumberToObject(o, "layer_norm_epsilon", 1e-5);
  cJSON_AddNumberToObject(o, "resid_pdrop", 0.0);
  cJSON_AddNumberToObject(o, "embd_pdrop", 0.0);
  cJSON_AddNumberToObject(o, "attn_pdrop", 0.0);
  cJSON_AddBoolToObject(o, "scale_attn_weights", 1);
  cJSON_AddBoolToObject(o, "tie_word_embeddings", 1);
  cJSON_AddNumberToObject(o, "initializer_range", 0.02);
  cJSON_AddStringToObject(o, "torch_dtype", "float32");
  return o;
}

hsr_status hf_config_write(const char *dir, const st_kv *kv, int n, int *wrote) {
  *wrote = 0;
  const char *kind = meta_of(kv, n, "hsr.model");
  if (!kind || (strcmp(kind, "llama") && strcmp(kind, "gpt"))) return HSR_OK;
  cJSON *o;
  if (!strcmp(kind, "gpt")) {
    static const char *const gkeys[] = {"n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"};
    long g[5];
    HSR_CHECK(ints_of(kv, n, gkeys, 5, g));
    o = gpt2_config(g);
  } else {
    static const char *const keys[] = {"n_layer", "n_head", "n_kv_head", "n_embd", "n_ff", "n_ctx", "vocab_size"};
    long v[7];
    HSR_CHECK(ints_of(kv, n, keys, 7, v));
    o = llama_config(v);
  }
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  return write_config(dir, text, wrote);
}
