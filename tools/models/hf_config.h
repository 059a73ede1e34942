/* Hugging Face's config.json beside an export in its directory layout
 * (--max-shard-size), so transformers' from_pretrained(dir) finds the model:
 * written for the GPT (GPT2LMHeadModel) and the Llama-style model
 * (LlamaForCausalLM). */
#ifndef HSR_TOOLS_HF_CONFIG_H
#define HSR_TOOLS_HF_CONFIG_H

#include "runtime/io/safetensors.h"

/* The model's __metadata__ pairs (kv[0] hsr.model, then its config, as
 * hsr train --export and hsr ckpt export write them) as DIR/config.json;
 * *wrote 0 and nothing written for a model transformers has no class for
 * here (the MLP). */
hsr_status hf_config_write(const char *dir, const st_kv *kv, int n, int *wrote);

#endif
