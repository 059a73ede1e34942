/* GPT weights in safetensors files (tools/models/gpt_file.c): hsr train --init,
 * hsr eval and hsr sample read them, a single file or Hugging Face's
 * sharded layout alike (runtime/io/safetensors_sharded.h). */
#ifndef HSR_TOOLS_GPT_FILE_H
#define HSR_TOOLS_GPT_FILE_H

#include <stdio.h>

#include "gpt.h"
#include "runtime/io/safetensors_sharded.h"

/* st_set_open for weights the user gave (--init): a file that is not
 * safetensors is HSR_ERR_IO, exit 1 (the file is there but is not what it
 * should be; docs/commands.md), not a usage error. */
static inline hsr_status init_st_open(const char *path, st_set **out) {
  hsr_status st = st_set_open(path, out);
  return st == HSR_ERR_INVALID ? hsr_error(HSR_ERR_IO, "%s", hsr_last_error()) : st;
}
/* Tensor `name` of f, or transformers' GPT-2 name for it (save_pretrained
 * of a GPT2LMHeadModel writes transformer.wte.weight, transformer.h.0....). */
static inline hsr_status gpt_file_find(const st_set *f, const char *name, int *i) {
  if (st_set_find(f, name, i) == HSR_OK) return HSR_OK;
  char hf[256];
  if ((size_t)snprintf(hf, sizeof hf, "transformer.%s", name) < sizeof hf && st_set_find(f, hf, i) == HSR_OK)
    return HSR_OK;
  return st_set_find(f, name, i); /* its error names the tensor */
}
/* The configuration of the weights in f: the architecture (hsr.model gpt or
 * llama; without it, llama when model.embed_tokens.weight is there),
 * __metadata__ n_layer, n_head, n_embd, n_ctx, vocab_size (llama: n_kv_head,
 * n_ff) where present, else what the tensors' shapes say (n_head 0 and
 * n_kv_head 0: unknown; a llama without metadata gets context 2048); an
 * error when hsr.model names another model. */
hsr_status gpt_file_config(const st_set *f, const char *path, gpt_cfg *c);
/* A llama's unknown n_kv_head, once n_head is known: k_proj's rows / head size. */
hsr_status gpt_file_kv_heads(const st_set *f, const char *path, gpt_cfg *c);
/* Opens, reads the configuration and checks it; heads > 0 gives n_head for
 * files without hsr's metadata (GPT-2's own), and must agree with it otherwise. */
hsr_status gpt_file_open(const char *path, int heads, gpt_cfg *c, st_set **out);
/* Every parameter into malloc'd f32 arrays (*out[i], GPT-2's order). */
hsr_status gpt_file_load(const st_set *f, const char *path, const gpt_cfg *c, float ***out);
void gpt_file_free(const gpt_cfg *c, float **w);

#endif
