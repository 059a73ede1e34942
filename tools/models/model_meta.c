/* The model's __metadata__ and the checkpoint's "model", one from the other. */
#include "model_meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/ckpt/ckpt_internal.h"

hsr_status model_meta_add(model_meta *m, const char *key, const char *value) {
  if (m->n >= MODEL_META_MAX) return hsr_error(HSR_ERR_INVALID, "more than %d metadata pairs", MODEL_META_MAX);
  int i = m->n;
  if ((size_t)snprintf(m->key[i], sizeof m->key[i], "%s", key) >= sizeof m->key[i] ||
      (size_t)snprintf(m->value[i], sizeof m->value[i], "%s", value) >= sizeof m->value[i])
    return hsr_error(HSR_ERR_INVALID, "metadata '%.40s' is longer than this export allows", key);
  m->kv[i] = (st_kv){m->key[i], m->value[i]};
  m->n++;
  return HSR_OK;
}

static hsr_status provenance(model_meta *m, int64_t step, const char *version) {
  char s[32];
  snprintf(s, sizeof s, "%" PRId64, step);
  HSR_CHECK(model_meta_add(m, "hsr_step", s));
  return model_meta_add(m, "hsr_version", version);
}

hsr_status model_meta_make(model_meta *m, const st_kv *model, int nmodel, int64_t step, const char *version) {
  m->n = 0;
  for (int i = 0; i < nmodel; i++) HSR_CHECK(model_meta_add(m, model[i].key, model[i].value));
  return provenance(m, step, version);
}

hsr_status model_meta_of_ckpt(model_meta *m, const ckpt_handle *c, int *has_model) {
  ckpt_info in;
  HSR_CHECK(ckpt_get_info(c, &in));
  m->n = 0;
  *has_model = 0;
  hsr_ckpt_state *cfg;
  HSR_CHECK(hsr_ckpt_state_create(&cfg));
  const char *kind = NULL;
  hsr_status st = ckpt_get_model(c, &kind, cfg);
  if (st == HSR_ERR_NOT_FOUND) {
    st = HSR_OK; /* an older checkpoint: the export says where it comes from, not what it is */
  } else if (st == HSR_OK) {
    *has_model = 1;
    st = model_meta_add(m, MODEL_META_KIND, kind);
    for (int i = 0; st == HSR_OK && i < ckpt_state_count(cfg); i++) {
      const char *k;
      char v[128];
      st = ckpt_state_at(cfg, i, &k, v, sizeof v);
      if (st == HSR_OK) st = model_meta_add(m, k, v);
    }
  }
  hsr_ckpt_state_free(cfg);
  HSR_CHECK(st);
  return provenance(m, in.step, in.hsr_version);
}

hsr_status model_meta_config(const st_kv *model, int nmodel, const char **kind, hsr_ckpt_state *config) {
  if (nmodel < 1 || strcmp(model[0].key, MODEL_META_KIND))
    return hsr_error(HSR_ERR_INTERNAL, "the model's metadata does not start with %s", MODEL_META_KIND);
  *kind = model[0].value;
  HSR_CHECK(ckpt_state_clear(config));
  for (int i = 1; i < nmodel; i++) {
    char *end;
    errno = 0;
    long long v = strtoll(model[i].value, &end, 10);
    /* "%lld" prints it back exactly: the export of the checkpoint is the run's export */
    char back[32];
    snprintf(back, sizeof back, "%lld", v);
    if (!errno && *model[i].value && !*end && !strcmp(back, model[i].value))
      HSR_CHECK(hsr_ckpt_state_set_i64(config, model[i].key, v));
    else
      HSR_CHECK(hsr_ckpt_state_set_str(config, model[i].key, model[i].value));
  }
  return HSR_OK;
}
