/* The model a set of weights belongs to, as safetensors __metadata__ and as
 * a checkpoint's "model": what hsr train --export and hsr ckpt export both
 * write, so eval, sample and --init need no flags whichever wrote them. */
#ifndef HSR_TOOLS_MODEL_META_H
#define HSR_TOOLS_MODEL_META_H

#include <stdint.h>

#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/io/safetensors.h"

#define MODEL_META_MAX 32
#define MODEL_META_KIND "hsr.model" /* the metadata key of the model's kind */

/* __metadata__ pairs; kv[i] points into key[i] / value[i]. */
typedef struct model_meta {
  int n;
  st_kv kv[MODEL_META_MAX];
  char key[MODEL_META_MAX][64], value[MODEL_META_MAX][128];
} model_meta;

hsr_status model_meta_add(model_meta *m, const char *key, const char *value);
/* The model's pairs (kv[0] "hsr.model" = kind, then its config), then where
 * the weights come from: hsr_step and hsr_version. */
hsr_status model_meta_make(model_meta *m, const st_kv *model, int nmodel, int64_t step, const char *version);
/* The same from a checkpoint: its model (none recorded: only hsr_step and
 * hsr_version, and *has_model 0), its step and the hsr that saved it. */
hsr_status model_meta_of_ckpt(model_meta *m, const ckpt_handle *c, int *has_model);
/* A model's pairs (kv[0] "hsr.model" = kind) as a checkpoint's model: the
 * kind, and the config (integers as numbers, anything else as strings). */
hsr_status model_meta_config(const st_kv *model, int nmodel, const char **kind, hsr_ckpt_state *config);

#endif
