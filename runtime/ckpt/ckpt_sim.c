/* A save's manifest for a mesh that does not exist: what rank 0 writes
 * after a save on an R x S mesh (one data file per rank that holds bytes,
 * with its mesh coordinates; the tensors' ranges follow from them) built from the
 * layout and the mesh's shape alone with the manifest's own writer, its
 * block checksums stand-ins as wide as a crc32's. `hsr ckpt plan` measures
 * its bytes and times what a save and a load plan from it; tests compare it
 * with a real save's. Ranks sit at mesh position rank = rep x S + sh (the
 * identity placement). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"
#include "hsr/config.h"
#include "hsr/git.h"

/* Each rank's data file's bytes: 12 per element of its pieces. */
static hsr_status file_bytes(const ckpt_geom *g, int R, int S, uint64_t *bytes) {
  for (int r = 0; r < R * S; r++) {
    ckpt_piece *pc;
    int np;
    HSR_CHECK(ckpt_geom_pieces(g, r / S, r % S, 0, &pc, &np));
    bytes[r] = 0;
    for (int i = 0; i < np; i++) bytes[r] += 12 * pc[i].count;
    free(pc);
  }
  return HSR_OK;
}

hsr_status ckpt_sim_manifest(const rt_layout *l, const ckpt_geom *g, int R, int S, uint64_t block_bytes,
                             char **text, size_t *len) {
  *text = NULL, *len = 0;
  if (!l || !g || block_bytes < 1) return hsr_error(HSR_ERR_INVALID, "ckpt_sim_manifest: bad argument");
  int W = R * S, np = rt_layout_num_params(l), nu = rt_layout_num_units(l);
  uint64_t *bytes = calloc((size_t)W, sizeof *bytes);
  uint32_t *zero = NULL;
  cJSON *m = cJSON_CreateObject();
  hsr_status st = bytes && m ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  if (st == HSR_OK) st = file_bytes(g, R, S, bytes);
  uint64_t maxnb = 0, total = 0;
  for (int r = 0; st == HSR_OK && r < W; r++)
    if ((bytes[r] + block_bytes - 1) / block_bytes > maxnb) maxnb = (bytes[r] + block_bytes - 1) / block_bytes;
  if (st == HSR_OK && !(zero = calloc(maxnb + 1, sizeof *zero)))
    st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  for (uint64_t b = 0; st == HSR_OK && b < maxnb; b++)
    zero[b] = (uint32_t)(0x9e3779b9u * (uint32_t)(b + 1)); /* crc-wide */
  if (st == HSR_OK) {
    ckpt_info h = {.hsr_version = HSR_VERSION_STRING,
                       .git_hash = HSR_GIT_HASH,
                       .num_groups = 1,
                       .world = W,
                       .replicate = R,
                       .shard = S,
                       .outer_shard = rt_layout_subshards(l) > 1,
                       .strategy = S > 1 ? (R > 1 ? "hybrid" : "fsdp") : "ddp",
                       .reshard = "full",
                       .device = "cuda",
                       .param_dtype = "bf16",
                       .reduce_dtype = "f32",
                       .block_bytes = block_bytes};
    h.groups[0] = (hsr_rt_opt_group){1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    cJSON *lay = cJSON_CreateObject(), *ua = cJSON_CreateArray();
    cJSON_AddNumberToObject(lay, "align", (double)rt_layout_align(l));
    cJSON_AddNumberToObject(lay, "shards", S);
    for (int u = 0; u < nu; u++) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", rt_layout_unit_name(l, u));
      cJSON_AddBoolToObject(o, "root", 0);
      cJSON_AddNumberToObject(o, "len", (double)rt_layout_unit_len(l, u));
      cJSON_AddNumberToObject(o, "shard_len", (double)rt_layout_shard_len(l, u));
      cJSON_AddItemToArray(ua, o);
    }
    st = ckpt_manifest_head(m, &h, lay, ua);
  }
  cJSON *fa = st == HSR_OK ? cJSON_AddArrayToObject(m, "files") : NULL;
  for (int r = 0; st == HSR_OK && r < W; r++) {
    if (!bytes[r]) continue;
    char name[64];
    snprintf(name, sizeof name, "data-%08x-%05d.bin", 0u, r);
    const ckpt_file f = {name, bytes[r], (bytes[r] + block_bytes - 1) / block_bytes, 0, zero, r, r / S, r % S};
    cJSON_AddItemToArray(fa, ckpt_manifest_file(&f));
    total += bytes[r];
  }
  if (st == HSR_OK) cJSON_AddNumberToObject(m, "data_bytes", (double)total);
  cJSON *ta = st == HSR_OK ? cJSON_AddArrayToObject(m, "tensors") : NULL;
  for (int i = 0; st == HSR_OK && i < np; i++) {
    rt_param_info p;
    st = rt_layout_param(l, i, &p);
    if (st != HSR_OK) break;
    cJSON *tj = ckpt_manifest_tensor(&p, rt_layout_unit_name(l, p.unit));
    if (!tj) st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    cJSON_AddItemToArray(ta, tj);
  }
  if (st == HSR_OK) cJSON_AddItemToObject(m, "program", cJSON_CreateObject());
  if (st == HSR_OK) st = ckpt_manifest_print(m, text, len);
  free(bytes), free(zero);
  cJSON_Delete(m);
  return st;
}

hsr_status ckpt_open_text(const char *what, const char *text, size_t len, ckpt_handle **out) {
  *out = NULL;
  char *t = malloc(len + 1);
  if (!t) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  memcpy(t, text, len);
  t[len] = 0;
  return ckpt_parse(what, t, len, out); /* takes t */
}
