/* The engine-less reader of a checkpoint (hsr/ckpt.h): open, close and the
 * getters over the parsed manifest (ckpt_manifest.c), and what a data
 * file's byte holds, for messages. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"

void ckpt_what_at(const ckpt_handle *c, int f, uint64_t off, char *buf, size_t len) {
  for (int i = 0; i < c->nt; i++)
    for (int j = 0; j < c->t[i].nr; j++) {
      const ckpt_range *r = &c->t[i].r[j];
      for (int k = 0; r->file == f && k < CKPT_KINDS; k++)
        if (off >= r->off[k] && off < r->off[k] + 4 * r->count) {
          snprintf(buf, len, "tensor '%s', %s, element %" PRIu64, c->t[i].name, ckpt_kind_name((ckpt_kind)k),
                   r->start + (off - r->off[k]) / 4);
          return;
        }
    }
  snprintf(buf, len, "no tensor");
}

/* ---- the engine-less reader ---- */
hsr_status ckpt_open(const char *path, ckpt_handle **out) {
  if (!path || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_open: NULL argument");
  *out = NULL;
  char *dir = NULL, mp[4096], *text = NULL;
  size_t len = 0;
  HSR_CHECK(ckpt_resolve(path, &dir));
  hsr_status st = ckpt_path(mp, sizeof mp, dir, CKPT_MANIFEST);
  if (st == HSR_OK) st = ckpt_slurp(mp, (size_t)1 << 30, &text, &len);
  if (st == HSR_OK) st = ckpt_parse(dir, text, len, out);
  free(dir);
  return st;
}

void ckpt_close(ckpt_handle *c) {
  if (!c) return;
  for (int i = 0; i < c->nt; i++) free(c->t[i].r);
  for (int i = 0; i < c->nf; i++) free(c->f[i].blocks);
  free(c->t);
  free(c->f);
  cJSON_Delete(c->json);
  free(c->text);
  free(c->dir);
  free(c);
}

hsr_status ckpt_get_info(const ckpt_handle *c, ckpt_info *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_get_info: NULL argument");
  *out = c->info;
  return HSR_OK;
}

int ckpt_num_tensors(const ckpt_handle *c) { return c ? c->nt : 0; }

hsr_status ckpt_tensor_at(const ckpt_handle *c, int i, ckpt_tensor_info *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_tensor_at: NULL argument");
  if (i < 0 || i >= c->nt)
    return hsr_error(HSR_ERR_INVALID, "checkpoint tensor %d does not exist (valid: 0 to %d)", i, c->nt - 1);
  const ckpt_tensor *t = &c->t[i];
  memset(out, 0, sizeof *out);
  out->name = t->name, out->unit = t->unit, out->dtype = t->dtype;
  out->ndim = t->ndim, out->group = t->group, out->unit_index = t->unit_index, out->ranges = t->nr;
  memcpy(out->shape, t->shape, sizeof out->shape);
  out->numel = t->numel, out->offset = t->offset;
  return HSR_OK;
}

hsr_status ckpt_range_at(const ckpt_handle *c, int i, int k, ckpt_saved_range *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_range_at: NULL argument");
  if (i < 0 || i >= c->nt || k < 0 || k >= c->t[i].nr)
    return hsr_error(HSR_ERR_INVALID, "checkpoint tensor %d has no range %d", i, k);
  const ckpt_range *r = &c->t[i].r[k];
  *out = (ckpt_saved_range){r->start, r->count, {r->off[0], r->off[1], r->off[2]}, c->f[r->file].rank};
  return HSR_OK;
}

hsr_status ckpt_find(const ckpt_handle *c, const char *name, int *i) {
  if (!c || !name || !i) return hsr_error(HSR_ERR_INVALID, "ckpt_find: NULL argument");
  for (int k = 0; k < c->nt; k++)
    if (!strcmp(c->t[k].name, name)) {
      *i = k;
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_NOT_FOUND, "checkpoint '%s' has no tensor '%s'", c->dir, name);
}

hsr_status ckpt_get_program(const ckpt_handle *c, hsr_ckpt_state *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_get_program: NULL argument");
  char what[1100];
  snprintf(what, sizeof what, "checkpoint '%s': program state", c->dir);
  return ckpt_state_assign(out, cJSON_GetObjectItemCaseSensitive(c->json, "program"), what);
}

hsr_status ckpt_get_model(const ckpt_handle *c, const char **kind, hsr_ckpt_state *config) {
  if (!c || !kind) return hsr_error(HSR_ERR_INVALID, "ckpt_get_model: NULL argument");
  *kind = NULL;
  if (!c->model)
    return hsr_error(HSR_ERR_NOT_FOUND,
                     "checkpoint '%s' records no model (saved by hsr %s, before checkpoints carried their model, or "
                     "by a program that gave none)",
                     c->dir, c->info.hsr_version);
  *kind = c->model;
  if (!config) return HSR_OK;
  char what[1100];
  snprintf(what, sizeof what, "checkpoint '%s': model config", c->dir);
  return ckpt_state_assign(config, c->model_config, what);
}

const char *ckpt_manifest_text(const ckpt_handle *c) { return c ? c->text : NULL; }
