/* config.json for transformers (hf_config.h). */
#include "hf_config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "llama.h"

static const char *meta_of(const hsr_st_kv *kv, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(kv[i].key, key)) return kv[i].value;
  return NULL;
}

hsr_status hf_config_write(const char *dir, const hsr_st_kv *kv, int n, int *wrote) {
  *wrote = 0;
  const char *kind = meta_of(kv, n, "hsr.model");
  if (!kind || strcmp(kind, "llama")) return HSR_OK;
  static const char *keys[] = {"n_layer", "n_head", "n_kv_head", "n_embd", "n_ff", "n_ctx", "vocab_size"};
  long v[7];
  for (int k = 0; k < 7; k++) {
    const char *s = meta_of(kv, n, keys[k]);
    char *end = NULL;
    v[k] = s ? strtol(s, &end, 10) : -1;
    if (!s || !*s || *end || v[k] < 0 || (k == 1 && v[k] == 0))
      return hsr_error(HSR_ERR_INVALID, "config.json: the model's metadata has no valid %s ('%s')", keys[k],
                       s ? s : "absent");
  }
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
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
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
