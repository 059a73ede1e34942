/* The checkpoint manifest: its checksum, parsing with strict validation
 * (every problem names the checkpoint and the item), and the engine-less
 * reader's getters. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/json.h"
#include "ckpt_int.h"
#include "runtime/ckpt/ckpt_internal.h"

#define CRC_KEY "\"manifest_crc32\""

/* Where the 8 hex digits of the manifest's own crc32 are (NULL: absent). */
static char *crc_digits(char *text, size_t len) {
  char *k = NULL;
  for (char *p = text; (p = strstr(p, CRC_KEY)) != NULL; p++) k = p;
  if (!k) return NULL;
  char *p = k + strlen(CRC_KEY), *end = text + len;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  if (p >= end || *p++ != ':') return NULL;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  if (end - p < 10 || *p != '"' || p[9] != '"') return NULL;
  for (int i = 1; i <= 8; i++)
    if (!strchr("0123456789abcdef", p[i])) return NULL;
  return p + 1;
}

/* crc32 of the text with its own checksum's digits read as "00000000". */
static uint32_t text_crc(char *text, size_t len, char *digits) {
  char keep[8];
  memcpy(keep, digits, 8);
  memset(digits, '0', 8);
  uint32_t c = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text, (uInt)len);
  memcpy(digits, keep, 8);
  return c;
}

hsr_status ckpt_manifest_print(cJSON *root, char **text, size_t *len) {
  if (!cJSON_AddStringToObject(root, "manifest_crc32", "00000000"))
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  char *p = cJSON_Print(root);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory printing the manifest");
  size_t n = strlen(p);
  char *t = malloc(n + 2);
  if (!t) {
    free(p);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  memcpy(t, p, n);
  free(p);
  t[n++] = '\n';
  t[n] = 0;
  char *d = crc_digits(t, n);
  if (!d) {
    free(t);
    return hsr_error(HSR_ERR_INTERNAL, "checkpoint: the printed manifest has no crc field");
  }
  char hex[9];
  snprintf(hex, sizeof hex, "%08x", text_crc(t, n, d));
  memcpy(d, hex, 8);
  *text = t;
  *len = n;
  return HSR_OK;
}

/* ---- validated getters: errors say "checkpoint 'DIR': manifest: WHERE: ..." ---- */
typedef struct pctx {
  const char *dir;
  char where[192];
} pctx;

#define PERR(px, ...) perr(px, __VA_ARGS__)
static hsr_status perr(const pctx *px, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static hsr_status perr(const pctx *px, const char *fmt, ...) {
  char m[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  return hsr_error(HSR_ERR_INVALID, "checkpoint '%s': manifest%s%s: %s", px->dir, px->where[0] ? ": " : "", px->where,
                   m);
}

/* Outputs are set on every path: the error paths return hsr_error's status,
 * which the compiler cannot see is never HSR_OK. */
static hsr_status jint(const pctx *px, const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *v) {
  *v = 0;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(x)) return PERR(px, "'%s' is missing or not a number", k);
  double d = x->valuedouble;
  /* the range first: casting a double beyond int64 is undefined (found by fuzzing) */
  if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
    return PERR(px, "'%s' = %.17g is not an integer in [%" PRId64 ", %" PRId64 "]", k, d, lo, hi);
  *v = (int64_t)d;
  return HSR_OK;
}

static hsr_status ju64(const pctx *px, const cJSON *o, const char *k, uint64_t *v) {
  int64_t x = 0;
  *v = 0;
  HSR_CHECK(jint(px, o, k, 0, (int64_t)1 << 53, &x));
  *v = (uint64_t)x;
  return HSR_OK;
}

static hsr_status jstr(const pctx *px, const cJSON *o, const char *k, const char **v) {
  *v = NULL;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsString(x)) return PERR(px, "'%s' is missing or not a string", k);
  *v = x->valuestring;
  return HSR_OK;
}

static hsr_status jarr(const pctx *px, const cJSON *o, const char *k, const cJSON **v, int *n) {
  *n = 0;
  *v = NULL;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsArray(x)) return PERR(px, "'%s' is missing or not an array", k);
  *v = x;
  *n = cJSON_GetArraySize(x);
  return HSR_OK;
}

static const cJSON *jobj(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsObject(x) ? x : NULL;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A name listed twice, by sorting (a manifest of 10^6 tensors must not take
 * 10^12 comparisons); NULL when every name is unique. Sorts `names`. */
static const char *first_dup(const char **names, int n) {
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int k = 1; k < n; k++)
    if (!strcmp(names[k - 1], names[k])) return names[k];
  return NULL;
}

static hsr_status parse_files(hsr_ckpt *c, pctx *px) {
  const cJSON *fa, *it;
  HSR_CHECK(jarr(px, c->json, "files", &fa, &c->nf));
  c->f = calloc((size_t)c->nf + 1, sizeof *c->f);
  if (!c->f) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  int i = 0;
  cJSON_ArrayForEach(it, fa) {
    ckpt_file *f = &c->f[i];
    snprintf(px->where, sizeof px->where, "file %d", i);
    int64_t crc;
    const cJSON *bl, *b;
    int nb = 0;
    HSR_CHECK(jstr(px, it, "name", &f->name));
    if (!ckpt_safe_name(f->name)) return PERR(px, "file name '%s' is not a plain file name", f->name);
    HSR_CHECK(ju64(px, it, "bytes", &f->bytes));
    HSR_CHECK(jint(px, it, "crc32", 0, 0xffffffffll, &crc));
    f->crc = (uint32_t)crc;
    HSR_CHECK(jarr(px, it, "block_crc32", &bl, &nb));
    f->nblocks = (f->bytes + c->info.block_bytes - 1) / c->info.block_bytes;
    if ((uint64_t)nb != f->nblocks)
      return PERR(px, "'%s' has %d block checksums, its %" PRIu64 " bytes make %" PRIu64 " blocks", f->name, nb,
                  f->bytes, f->nblocks);
    f->blocks = malloc((size_t)(nb ? nb : 1) * sizeof *f->blocks);
    if (!f->blocks) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    int j = 0;
    cJSON_ArrayForEach(b, bl) {
      if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 4294967295.0 ||
          b->valuedouble != (double)(uint32_t)b->valuedouble)
        return PERR(px, "'%s': block checksum %d is not a crc32", f->name, j);
      f->blocks[j++] = (uint32_t)b->valuedouble;
    }
    c->info.data_bytes += f->bytes;
    i++;
  }
  const char **names = malloc(sizeof *names * (size_t)(c->nf + 1));
  if (!names) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  for (int k = 0; k < c->nf; k++) names[k] = c->f[k].name;
  const char *dup = first_dup(names, c->nf);
  free(names);
  if (dup) return (px->where[0] = 0, PERR(px, "data file '%s' is listed twice", dup));
  return HSR_OK;
}

static hsr_status parse_ranges(hsr_ckpt *c, ckpt_tensor *t, const cJSON *tj, pctx *px, uint64_t *covered) {
  const cJSON *ra, *it;
  HSR_CHECK(jarr(px, tj, "ranges", &ra, &t->nr));
  t->r = calloc((size_t)t->nr + 1, sizeof *t->r);
  if (!t->r) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  static const char *const kn[CKPT_KINDS] = {"master", "m", "v"};
  uint64_t next = 0;
  int i = 0;
  cJSON_ArrayForEach(it, ra) {
    ckpt_range *r = &t->r[i++];
    int64_t f;
    HSR_CHECK(ju64(px, it, "start", &r->start));
    HSR_CHECK(ju64(px, it, "count", &r->count));
    HSR_CHECK(jint(px, it, "file", 0, c->nf - 1, &f));
    r->file = (int)f;
    if (r->count == 0 || r->start != next)
      return PERR(px,
                  "range %d is elements [%" PRIu64 ", +%" PRIu64 "), expected one starting at %" PRIu64
                  " (ranges must tile the tensor in order)",
                  i - 1, r->start, r->count, next);
    next = r->start + r->count;
    for (int k = 0; k < CKPT_KINDS; k++) {
      HSR_CHECK(ju64(px, it, kn[k], &r->off[k]));
      if (r->off[k] + 4 * r->count > c->f[r->file].bytes)
        return PERR(px, "range %d (%s) ends at byte %" PRIu64 " of '%s', which has %" PRIu64, i - 1, kn[k],
                    r->off[k] + 4 * r->count, c->f[r->file].name, c->f[r->file].bytes);
    }
    covered[r->file] += 12 * r->count;
  }
  if (next != t->numel) return PERR(px, "the ranges cover %" PRIu64 " of its %" PRIu64 " elements", next, t->numel);
  return HSR_OK;
}

static hsr_status parse_tensor(hsr_ckpt *c, const cJSON *it, int i, pctx *px, uint64_t *covered) {
  ckpt_tensor *t = &c->t[i];
  snprintf(px->where, sizeof px->where, "tensor %d", i);
  HSR_CHECK(jstr(px, it, "name", &t->name));
  snprintf(px->where, sizeof px->where, "tensor '%.64s'", t->name);
  const cJSON *sh, *d;
  HSR_CHECK(jarr(px, it, "shape", &sh, &t->ndim));
  if (t->ndim > HSR_RT_MAX_DIMS) return PERR(px, "%d dimensions (at most %d)", t->ndim, HSR_RT_MAX_DIMS);
  uint64_t numel = 1;
  int k = 0;
  cJSON_ArrayForEach(d, sh) {
    if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= 1e15) ||
        d->valuedouble != (double)(int64_t)d->valuedouble)
      return PERR(px, "shape entry %d is not a size", k);
    t->shape[k++] = (int64_t)d->valuedouble;
    numel *= (uint64_t)d->valuedouble;
  }
  int64_t v;
  HSR_CHECK(ju64(px, it, "numel", &t->numel));
  if (t->numel != numel)
    return PERR(px, "numel %" PRIu64 " is not the product of its shape (%" PRIu64 ")", t->numel, numel);
  HSR_CHECK(jstr(px, it, "dtype", &t->dtype));
  if (strcmp(t->dtype, "f32")) return PERR(px, "dtype '%s' (this hsr keeps f32 master weights and moments)", t->dtype);
  HSR_CHECK(jstr(px, it, "unit", &t->unit));
  HSR_CHECK(jint(px, it, "unit_index", 0, 1 << 30, &v));
  t->unit_index = (int)v;
  HSR_CHECK(ju64(px, it, "offset", &t->offset));
  HSR_CHECK(jint(px, it, "group", 0, HSR_RT_MAX_GROUPS - 1, &v));
  t->group = (int)v;
  c->info.numel += t->numel;
  return parse_ranges(c, t, it, px, covered);
}

static hsr_status parse_info(hsr_ckpt *c, pctx *px) {
  hsr_ckpt_info *in = &c->info;
  const cJSON *j = c->json, *mesh = jobj(j, "mesh"), *dt = jobj(j, "dtypes"), *opt = jobj(j, "optimizer");
  int64_t v;
  HSR_CHECK(jint(px, j, "step", 0, (int64_t)1 << 53, &in->step));
  HSR_CHECK(jstr(px, j, "hsr_version", &in->hsr_version));
  HSR_CHECK(jstr(px, j, "git_hash", &in->git_hash));
  HSR_CHECK(jint(px, j, "block_bytes", 1, (int64_t)1 << 30, &v));
  in->block_bytes = (uint64_t)v;
  if (!mesh || !dt || !opt) return PERR(px, "'mesh', 'dtypes' or 'optimizer' is missing or not an object");
  snprintf(px->where, sizeof px->where, "mesh");
  int64_t w, r, s, k, p;
  HSR_CHECK(jint(px, mesh, "world", 1, 1 << 24, &w));
  HSR_CHECK(jint(px, mesh, "replicate", 1, 1 << 24, &r));
  HSR_CHECK(jint(px, mesh, "shard", 1, 1 << 24, &s));
  HSR_CHECK(jint(px, mesh, "partial", 0, 1 << 24, &k));
  HSR_CHECK(jint(px, mesh, "prefetch", 0, 1 << 24, &p));
  in->world = (int)w, in->replicate = (int)r, in->shard = (int)s, in->partial = (int)k, in->prefetch = (int)p;
  HSR_CHECK(jstr(px, mesh, "strategy", &in->strategy));
  HSR_CHECK(jstr(px, mesh, "reshard", &in->reshard));
  HSR_CHECK(jstr(px, mesh, "device", &in->device));
  snprintf(px->where, sizeof px->where, "dtypes");
  HSR_CHECK(jstr(px, dt, "param", &in->param_dtype));
  HSR_CHECK(jstr(px, dt, "reduce", &in->reduce_dtype));
  snprintf(px->where, sizeof px->where, "optimizer");
  const cJSON *ga, *g, *cl = cJSON_GetObjectItemCaseSensitive(opt, "clip");
  if (!cJSON_IsNumber(cl)) return PERR(px, "'clip' is missing or not a number");
  in->clip = cl->valuedouble;
  HSR_CHECK(jarr(px, opt, "groups", &ga, &in->num_groups));
  if (in->num_groups < 1 || in->num_groups > HSR_RT_MAX_GROUPS)
    return PERR(px, "%d groups (valid: 1 to %d)", in->num_groups, HSR_RT_MAX_GROUPS);
  int i = 0;
  cJSON_ArrayForEach(g, ga) {
    static const char *const names[5] = {"lr", "beta1", "beta2", "eps", "weight_decay"};
    float *dst[5] = {&in->groups[i].lr, &in->groups[i].beta1, &in->groups[i].beta2, &in->groups[i].eps,
                     &in->groups[i].weight_decay};
    for (int q = 0; q < 5; q++) {
      const cJSON *x = cJSON_GetObjectItemCaseSensitive(g, names[q]);
      if (!cJSON_IsNumber(x)) return PERR(px, "group %d: '%s' is missing or not a number", i, names[q]);
      *dst[q] = (float)x->valuedouble;
    }
    i++;
  }
  px->where[0] = 0;
  return HSR_OK;
}

/* "model" (optional: manifests before it lack it): {"kind": NAME,
 * "config": {KEY: number or string, ...}}. */
static hsr_status parse_model(hsr_ckpt *c, pctx *px) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(c->json, "model");
  if (!m) return HSR_OK;
  snprintf(px->where, sizeof px->where, "model");
  const char *kind;
  if (!cJSON_IsObject(m)) return PERR(px, "not an object {\"kind\": ..., \"config\": {...}}");
  HSR_CHECK(jstr(px, m, "kind", &kind));
  if (ckpt_check_key(kind) != HSR_OK) return PERR(px, "kind '%.64s' is not a plain name", kind);
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(m, "config");
  if (!cJSON_IsObject(cfg)) return PERR(px, "'config' is missing or not an object");
  hsr_ckpt_state *tmp = NULL;
  HSR_CHECK(hsr_ckpt_state_create(&tmp));
  hsr_status st = ckpt_state_assign(tmp, cfg, "config");
  hsr_ckpt_state_free(tmp);
  if (st != HSR_OK) {
    char why[CKPT_MSG];
    snprintf(why, sizeof why, "%s", hsr_last_error());
    return PERR(px, "%s", why);
  }
  c->model = kind;
  c->model_config = cfg;
  px->where[0] = 0;
  return HSR_OK;
}

/* The checksum, then the format and its version, then everything else. */
static hsr_status parse_head(hsr_ckpt *c, char *text, size_t len, pctx *px) {
  char *d = crc_digits(text, len);
  c->json = cJSON_ParseWithLength(text, len);
  const cJSON *fmt = c->json ? cJSON_GetObjectItemCaseSensitive(c->json, "format") : NULL;
  if (!c->json || !cJSON_IsObject(c->json) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT)) {
    if (d && strtoul(d, NULL, 16) != text_crc(text, len, d))
      return PERR(px, "its crc32 does not match the one it records (the manifest is corrupted)");
    return PERR(px, "not an hsr checkpoint manifest (%s)",
                !c->json ? "not valid JSON" : "no \"format\": \"" CKPT_FORMAT "\"");
  }
  int64_t v;
  if (json_check_finite(c->json, HSR_ERR_IO, "the manifest") != HSR_OK) { /* 1e999 reads as infinity */
    char m[512];
    snprintf(m, sizeof m, "%s", hsr_last_error());
    return PERR(px, "%s", m);
  }
  HSR_CHECK(jint(px, c->json, "format_version", 1, 1 << 30, &v));
  if (!d) return PERR(px, "no manifest_crc32 (every hsr manifest records its own checksum)");
  uint32_t want = (uint32_t)strtoul(d, NULL, 16), got = text_crc(text, len, d);
  if (want != got) return PERR(px, "its crc32 is 0x%08x, it records 0x%08x (the manifest is corrupted)", got, want);
  if (v > HSR_CKPT_FORMAT_VERSION)
    return PERR(px, "format version %" PRId64 " is newer than this hsr reads (%d): use a newer hsr", v,
                HSR_CKPT_FORMAT_VERSION);
  c->info.format_version = (int)v;
  return HSR_OK;
}

hsr_status ckpt_parse(const char *dir, char *text, size_t len, hsr_ckpt **out) {
  *out = NULL;
  hsr_ckpt *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    free(text);
    return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  c->text = text;
  c->info.dir = c->dir;
  pctx px = {c->dir, ""};
  uint64_t *covered = NULL;
  hsr_status st = parse_head(c, text, len, &px);
  if (st == HSR_OK) st = parse_info(c, &px);
  if (st == HSR_OK) st = parse_model(c, &px);
  if (st == HSR_OK) st = parse_files(c, &px);
  const cJSON *ta = NULL, *it;
  if (st == HSR_OK) st = (px.where[0] = 0, jarr(&px, c->json, "tensors", &ta, &c->nt));
  if (st == HSR_OK) {
    c->t = calloc((size_t)c->nt + 1, sizeof *c->t);
    covered = calloc((size_t)c->nf + 1, sizeof *covered);
    if (!c->t || !covered) st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  }
  int i = 0;
  if (st == HSR_OK) cJSON_ArrayForEach(it, ta) {
      if ((st = parse_tensor(c, it, i++, &px, covered)) != HSR_OK) break;
    }
  const char **names = st == HSR_OK ? malloc(sizeof *names * (size_t)(c->nt + 1)) : NULL;
  if (st == HSR_OK && !names) st = hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  for (int k = 0; st == HSR_OK && k < c->nt; k++) names[k] = c->t[k].name;
  const char *dup = st == HSR_OK ? first_dup(names, c->nt) : NULL;
  if (dup) st = (snprintf(px.where, sizeof px.where, "tensor '%.64s'", dup), PERR(&px, "listed twice"));
  free(names);
  for (int f = 0; st == HSR_OK && f < c->nf; f++)
    if (covered[f] != c->f[f].bytes)
      st = (px.where[0] = 0, PERR(&px, "the tensors' ranges cover %" PRIu64 " of the %" PRIu64 " bytes of '%s'",
                                  covered[f], c->f[f].bytes, c->f[f].name));
  free(covered);
  if (st == HSR_OK) {
    c->info.num_tensors = c->nt;
    c->info.num_files = c->nf;
    *out = c;
    return HSR_OK;
  }
  ckpt_close(c);
  return st;
}

void ckpt_what_at(const hsr_ckpt *c, int f, uint64_t off, char *buf, size_t len) {
  static const char *const kn[CKPT_KINDS] = {"master", "m", "v"};
  for (int i = 0; i < c->nt; i++)
    for (int j = 0; j < c->t[i].nr; j++) {
      const ckpt_range *r = &c->t[i].r[j];
      for (int k = 0; r->file == f && k < CKPT_KINDS; k++)
        if (off >= r->off[k] && off < r->off[k] + 4 * r->count) {
          snprintf(buf, len, "tensor '%s', %s, element %" PRIu64, c->t[i].name, kn[k],
                   r->start + (off - r->off[k]) / 4);
          return;
        }
    }
  snprintf(buf, len, "no tensor");
}

/* ---- the engine-less reader ---- */
hsr_status ckpt_open(const char *path, hsr_ckpt **out) {
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

void ckpt_close(hsr_ckpt *c) {
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

hsr_status ckpt_get_info(const hsr_ckpt *c, hsr_ckpt_info *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_get_info: NULL argument");
  *out = c->info;
  return HSR_OK;
}

int ckpt_num_tensors(const hsr_ckpt *c) { return c ? c->nt : 0; }

hsr_status ckpt_tensor_at(const hsr_ckpt *c, int i, hsr_ckpt_tensor *out) {
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

hsr_status ckpt_find(const hsr_ckpt *c, const char *name, int *i) {
  if (!c || !name || !i) return hsr_error(HSR_ERR_INVALID, "ckpt_find: NULL argument");
  for (int k = 0; k < c->nt; k++)
    if (!strcmp(c->t[k].name, name)) {
      *i = k;
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_NOT_FOUND, "checkpoint '%s' has no tensor '%s'", c->dir, name);
}

const char *ckpt_kind_name(hsr_ckpt_kind k) {
  static const char *const n[CKPT_KINDS] = {"master", "m", "v"};
  return (unsigned)k < CKPT_KINDS ? n[k] : "?";
}

hsr_status ckpt_get_program(const hsr_ckpt *c, hsr_ckpt_state *out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "ckpt_get_program: NULL argument");
  char what[1100];
  snprintf(what, sizeof what, "checkpoint '%s': program state", c->dir);
  return ckpt_state_assign(out, cJSON_GetObjectItemCaseSensitive(c->json, "program"), what);
}

hsr_status ckpt_get_model(const hsr_ckpt *c, const char **kind, hsr_ckpt_state *config) {
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

const char *ckpt_manifest_text(const hsr_ckpt *c) { return c ? c->text : NULL; }
