/* The checkpoint manifest, written and parsed from one schema: its fields
 * (the tables below), its checksum, the writer of its head, files and
 * tensors (ckpt_save.c assembles them), and parsing with strict validation
 * (every problem names the checkpoint and the item); version 1's ranges
 * read as listed, version 2's derived with the save's planner
 * (ckpt_derive.c). The
 * engine-less reader's getters are ckpt_reader.c. */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/json.h"
#include "ckpt_int.h"

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

/* ---- the schema: one row per field, for the writer and the parser ---- */
typedef enum ftype { F_STR, F_INT, F_I64 } ftype;
typedef struct field {
  const char *key;
  ftype type;
  size_t off;     /* in ckpt_info */
  int64_t lo, hi; /* integers' range */
} field;
#define INFO(m) offsetof(ckpt_info, m)
static const field top_fields[] = {{"hsr_version", F_STR, INFO(hsr_version), 0, 0},
                                   {"git_hash", F_STR, INFO(git_hash), 0, 0},
                                   {"step", F_I64, INFO(step), 0, (int64_t)1 << 53}};
static const field mesh_fields[] = {
    {"world", F_INT, INFO(world), 1, 1 << 24},      {"replicate", F_INT, INFO(replicate), 1, 1 << 24},
    {"shard", F_INT, INFO(shard), 1, 1 << 24},      {"partial", F_INT, INFO(partial), 0, 1 << 24},
    {"strategy", F_STR, INFO(strategy), 0, 0},      {"reshard", F_STR, INFO(reshard), 0, 0},
    {"prefetch", F_INT, INFO(prefetch), 0, 1 << 24}, {"device", F_STR, INFO(device), 0, 0}};
static const field dtype_fields[] = {{"param", F_STR, INFO(param_dtype), 0, 0},
                                     {"reduce", F_STR, INFO(reduce_dtype), 0, 0}};
#define NFIELDS(a) (int)(sizeof a / sizeof a[0])
/* an optimizer group's numbers, in hsr_rt_opt_group */
static const struct {
  const char *key;
  size_t off;
} group_fields[] = {{"lr", offsetof(hsr_rt_opt_group, lr)},
                    {"beta1", offsetof(hsr_rt_opt_group, beta1)},
                    {"beta2", offsetof(hsr_rt_opt_group, beta2)},
                    {"eps", offsetof(hsr_rt_opt_group, eps)},
                    {"weight_decay", offsetof(hsr_rt_opt_group, weight_decay)}};
#define NGROUP_FIELDS 5

static void put_fields(cJSON *o, const field *f, int n, const ckpt_info *in) {
  const char *base = (const char *)in;
  for (int i = 0; i < n; i++) {
    const void *p = base + f[i].off;
    if (f[i].type == F_STR)
      cJSON_AddStringToObject(o, f[i].key, *(const char *const *)p);
    else if (f[i].type == F_INT)
      cJSON_AddNumberToObject(o, f[i].key, *(const int *)p);
    else
      cJSON_AddNumberToObject(o, f[i].key, (double)*(const int64_t *)p);
  }
}

hsr_status ckpt_manifest_head(cJSON *m, const ckpt_info *in, cJSON *layout, cJSON *units) {
  cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
  cJSON_AddNumberToObject(m, "format_version", HSR_CKPT_FORMAT_VERSION);
  put_fields(m, top_fields, NFIELDS(top_fields), in);
  cJSON *opt = cJSON_AddObjectToObject(m, "optimizer"), *ga;
  cJSON_AddStringToObject(opt, "kind", "adamw");
  char clip[40];
  snprintf(clip, sizeof clip, "%.17g", in->clip); /* exactly (cJSON may round a double's last digit) */
  cJSON_AddRawToObject(opt, "clip", clip);
  ga = cJSON_AddArrayToObject(opt, "groups");
  for (int g = 0; g < in->num_groups; g++) {
    cJSON *o = cJSON_CreateObject();
    for (int q = 0; q < NGROUP_FIELDS; q++)
      cJSON_AddNumberToObject(o, group_fields[q].key, *(const float *)((const char *)&in->groups[g] + group_fields[q].off));
    cJSON_AddItemToArray(ga, o);
  }
  cJSON *mesh = cJSON_AddObjectToObject(m, "mesh");
  put_fields(mesh, mesh_fields, NFIELDS(mesh_fields), in);
  cJSON_AddNumberToObject(mesh, "outer_shard", in->outer_shard);
  cJSON *dt = cJSON_AddObjectToObject(m, "dtypes");
  put_fields(dt, dtype_fields, NFIELDS(dtype_fields), in);
  cJSON_AddStringToObject(dt, "master", "f32");
  cJSON_AddStringToObject(dt, "moments", "f32");
  cJSON_AddItemToObject(m, "layout", layout);
  cJSON_AddItemToObject(m, "units", units);
  cJSON_AddNumberToObject(m, "block_bytes", (double)in->block_bytes);
  return cJSON_GetObjectItemCaseSensitive(m, "block_bytes") ? HSR_OK
                                                             : hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
}

/* Version 2 records the layout (units; each tensor's unit, offset, shape
 * and group), the mesh of the save (R x S, the outer shard) and each data
 * file's rank and mesh coordinates, never a range: every reader derives the
 * ranges with the save's own planner (ckpt_geom), so the manifest grows with
 * the files, not with files x units. A file's block checksums are one string
 * of 8 lowercase hex digits per block (a JSON number per block costs a
 * node and its parse). */
cJSON *ckpt_manifest_file(const ckpt_file *f) {
  cJSON *o = cJSON_CreateObject();
  char *hex = malloc((size_t)f->nblocks * 8 + 9);
  if (!o || !hex) {
    free(hex);
    cJSON_Delete(o);
    return NULL;
  }
  cJSON_AddStringToObject(o, "name", f->name);
  cJSON_AddNumberToObject(o, "rank", f->rank);
  cJSON_AddNumberToObject(o, "rep", f->rep);
  cJSON_AddNumberToObject(o, "sh", f->sh);
  cJSON_AddNumberToObject(o, "bytes", (double)f->bytes);
  cJSON_AddNumberToObject(o, "crc32", f->crc);
  hex[0] = 0;
  for (uint64_t b = 0; b < f->nblocks; b++) snprintf(hex + 8 * b, 9, "%08x", f->blocks[b]);
  cJSON_AddStringToObject(o, "block_crc32", hex);
  free(hex);
  return o;
}

cJSON *ckpt_manifest_tensor(const rt_param_info *p, const char *unit) {
  cJSON *o = cJSON_CreateObject(), *sh;
  cJSON_AddStringToObject(o, "name", p->name);
  sh = cJSON_AddArrayToObject(o, "shape");
  for (int d = 0; d < p->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)p->shape[d]));
  cJSON_AddStringToObject(o, "dtype", "f32"); /* the master's, what a checkpoint holds */
  cJSON_AddNumberToObject(o, "numel", (double)p->numel);
  cJSON_AddStringToObject(o, "unit", unit);
  cJSON_AddNumberToObject(o, "unit_index", p->unit);
  cJSON_AddNumberToObject(o, "offset", (double)p->offset);
  cJSON_AddNumberToObject(o, "group", p->group);
  return o;
}

const char *ckpt_kind_name(ckpt_kind k) {
  static const char *const n[CKPT_KINDS] = {"master", "m", "v"}; /* the ranges' keys */
  return (unsigned)k < CKPT_KINDS ? n[k] : "?";
}

/* ---- validated getters: errors say "checkpoint 'DIR': manifest: WHERE: ..." ---- */
hsr_status ckpt_perr(const pctx *px, const char *fmt, ...) {
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
hsr_status ckpt_jint(const pctx *px, const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *v) {
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
  HSR_CHECK(ckpt_jint(px, o, k, 0, (int64_t)1 << 53, &x));
  *v = (uint64_t)x;
  return HSR_OK;
}

hsr_status ckpt_jstr(const pctx *px, const cJSON *o, const char *k, const char **v) {
  *v = NULL;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsString(x)) return PERR(px, "'%s' is missing or not a string", k);
  *v = x->valuestring;
  return HSR_OK;
}

hsr_status ckpt_jarr(const pctx *px, const cJSON *o, const char *k, const cJSON **v, int *n) {
  *n = 0;
  *v = NULL;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsArray(x)) return PERR(px, "'%s' is missing or not an array", k);
  *v = x;
  *n = cJSON_GetArraySize(x);
  return HSR_OK;
}

const cJSON *ckpt_jobj(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsObject(x) ? x : NULL;
}

static hsr_status get_fields(const pctx *px, const cJSON *o, const field *f, int n, ckpt_info *in) {
  char *base = (char *)in;
  for (int i = 0; i < n; i++) {
    void *p = base + f[i].off;
    int64_t v;
    if (f[i].type == F_STR) {
      HSR_CHECK(ckpt_jstr(px, o, f[i].key, (const char **)p));
      continue;
    }
    HSR_CHECK(ckpt_jint(px, o, f[i].key, f[i].lo, f[i].hi, &v));
    if (f[i].type == F_INT)
      *(int *)p = (int)v;
    else
      *(int64_t *)p = v;
  }
  return HSR_OK;
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

/* Version 1: an array of numbers, one per block. */
static hsr_status parse_blocks_v1(pctx *px, const cJSON *it, ckpt_file *f) {
  const cJSON *bl, *b;
  int nb = 0, j = 0;
  HSR_CHECK(ckpt_jarr(px, it, "block_crc32", &bl, &nb));
  if ((uint64_t)nb != f->nblocks)
    return PERR(px, "'%s' has %d block checksums, its %" PRIu64 " bytes make %" PRIu64 " blocks", f->name, nb, f->bytes,
                f->nblocks);
  cJSON_ArrayForEach(b, bl) {
    if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 4294967295.0 ||
        b->valuedouble != (double)(uint32_t)b->valuedouble)
      return PERR(px, "'%s': block checksum %d is not a crc32", f->name, j);
    f->blocks[j++] = (uint32_t)b->valuedouble;
  }
  return HSR_OK;
}

static int hexval(char ch) { return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1; }

/* Version 2: one string, 8 lowercase hex digits per block. */
static hsr_status parse_blocks_hex(pctx *px, const cJSON *it, ckpt_file *f) {
  const char *s;
  HSR_CHECK(ckpt_jstr(px, it, "block_crc32", &s));
  size_t n = strlen(s);
  if (n != 8 * f->nblocks)
    return PERR(px,
                "'%s' has %zu hex digits of block checksums, its %" PRIu64 " bytes make %" PRIu64
                " blocks of 8 digits each",
                f->name, n, f->bytes, f->nblocks);
  for (uint64_t b = 0; b < f->nblocks; b++) {
    uint32_t v = 0;
    for (int k = 0; k < 8; k++) {
      int h = hexval(s[8 * b + (uint64_t)k]);
      if (h < 0) return PERR(px, "'%s': block checksum %" PRIu64 " is not 8 lowercase hex digits", f->name, b);
      v = v << 4 | (uint32_t)h;
    }
    f->blocks[b] = v;
  }
  return HSR_OK;
}

static hsr_status parse_files(ckpt_handle *c, pctx *px) {
  const cJSON *fa, *it;
  HSR_CHECK(ckpt_jarr(px, c->json, "files", &fa, &c->nf));
  c->f = calloc((size_t)c->nf + 1, sizeof *c->f);
  if (!c->f) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  int i = 0;
  cJSON_ArrayForEach(it, fa) {
    ckpt_file *f = &c->f[i];
    snprintf(px->where, sizeof px->where, "file %d", i);
    int64_t crc;
    HSR_CHECK(ckpt_jstr(px, it, "name", &f->name));
    if (!ckpt_safe_name(f->name)) return PERR(px, "file name '%s' is not a plain file name", f->name);
    HSR_CHECK(ju64(px, it, "bytes", &f->bytes));
    HSR_CHECK(ckpt_jint(px, it, "crc32", 0, 0xffffffffll, &crc));
    f->crc = (uint32_t)crc;
    HSR_CHECK(ckpt_jint(px, it, "rank", 0, 1 << 30, &crc));
    f->rank = (int)crc;
    if (c->info.format_version >= 2) {
      HSR_CHECK(ckpt_jint(px, it, "rep", 0, c->info.replicate - 1, &crc));
      f->rep = (int)crc;
      HSR_CHECK(ckpt_jint(px, it, "sh", 0, c->info.shard - 1, &crc));
      f->sh = (int)crc;
    }
    f->nblocks = (f->bytes + c->info.block_bytes - 1) / c->info.block_bytes;
    f->blocks = malloc((size_t)(f->nblocks ? f->nblocks : 1) * sizeof *f->blocks);
    if (!f->blocks) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
    if (c->info.format_version >= 2)
      HSR_CHECK(parse_blocks_hex(px, it, f));
    else
      HSR_CHECK(parse_blocks_v1(px, it, f));
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

/* Range r checked against the tensor and the files, its bytes counted. */
hsr_status ckpt_check_range(ckpt_handle *c, pctx *px, const ckpt_range *r, int i, uint64_t *covered) {
  for (int k = 0; k < CKPT_KINDS; k++)
    if (r->off[k] + 4 * r->count > c->f[r->file].bytes)
      return PERR(px, "range %d (%s) ends at byte %" PRIu64 " of '%s', which has %" PRIu64, i,
                  ckpt_kind_name((ckpt_kind)k), r->off[k] + 4 * r->count, c->f[r->file].name, c->f[r->file].bytes);
  covered[r->file] += 12 * r->count;
  return HSR_OK;
}

/* Version 1: an object per range, {start, count, file, master, m, v}. */
static hsr_status parse_ranges_v1(ckpt_handle *c, ckpt_tensor *t, const cJSON *ra, pctx *px, uint64_t *covered) {
  const cJSON *it;
  uint64_t next = 0;
  int i = 0;
  cJSON_ArrayForEach(it, ra) {
    ckpt_range *r = &t->r[i++];
    int64_t f;
    HSR_CHECK(ju64(px, it, "start", &r->start));
    HSR_CHECK(ju64(px, it, "count", &r->count));
    HSR_CHECK(ckpt_jint(px, it, "file", 0, c->nf - 1, &f));
    r->file = (int)f;
    if (r->count == 0 || r->start != next)
      return PERR(px,
                  "range %d is elements [%" PRIu64 ", +%" PRIu64 "), expected one starting at %" PRIu64
                  " (ranges must tile the tensor in order)",
                  i - 1, r->start, r->count, next);
    next = r->start + r->count;
    for (int k = 0; k < CKPT_KINDS; k++) HSR_CHECK(ju64(px, it, ckpt_kind_name((ckpt_kind)k), &r->off[k]));
    HSR_CHECK(ckpt_check_range(c, px, r, i - 1, covered));
  }
  return HSR_OK;
}

static hsr_status parse_ranges(ckpt_handle *c, ckpt_tensor *t, const cJSON *tj, pctx *px, uint64_t *covered) {
  const cJSON *ra;
  HSR_CHECK(ckpt_jarr(px, tj, "ranges", &ra, &t->nr));
  t->r = calloc((size_t)t->nr + 1, sizeof *t->r);
  if (!t->r) return hsr_error(HSR_ERR_NOMEM, "checkpoint: out of memory");
  HSR_CHECK(parse_ranges_v1(c, t, ra, px, covered));
  uint64_t next = t->nr ? t->r[t->nr - 1].start + t->r[t->nr - 1].count : 0;
  if (next != t->numel) return PERR(px, "the ranges cover %" PRIu64 " of its %" PRIu64 " elements", next, t->numel);
  return HSR_OK;
}

static hsr_status parse_tensor(ckpt_handle *c, const cJSON *it, int i, pctx *px, uint64_t *covered) {
  ckpt_tensor *t = &c->t[i];
  snprintf(px->where, sizeof px->where, "tensor %d", i);
  HSR_CHECK(ckpt_jstr(px, it, "name", &t->name));
  snprintf(px->where, sizeof px->where, "tensor '%.64s'", t->name);
  const cJSON *sh, *d;
  HSR_CHECK(ckpt_jarr(px, it, "shape", &sh, &t->ndim));
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
  HSR_CHECK(ckpt_jstr(px, it, "dtype", &t->dtype));
  if (strcmp(t->dtype, "f32")) return PERR(px, "dtype '%s' (this hsr keeps f32 master weights and moments)", t->dtype);
  HSR_CHECK(ckpt_jstr(px, it, "unit", &t->unit));
  HSR_CHECK(ckpt_jint(px, it, "unit_index", 0, 1 << 30, &v));
  t->unit_index = (int)v;
  HSR_CHECK(ju64(px, it, "offset", &t->offset));
  HSR_CHECK(ckpt_jint(px, it, "group", 0, HSR_RT_MAX_GROUPS - 1, &v));
  t->group = (int)v;
  c->info.numel += t->numel;
  return c->info.format_version >= 2 ? HSR_OK : parse_ranges(c, t, it, px, covered);
}

static hsr_status parse_info(ckpt_handle *c, pctx *px) {
  ckpt_info *in = &c->info;
  const cJSON *j = c->json, *mesh = ckpt_jobj(j, "mesh"), *dt = ckpt_jobj(j, "dtypes"), *opt = ckpt_jobj(j, "optimizer");
  int64_t v;
  HSR_CHECK(get_fields(px, j, top_fields, NFIELDS(top_fields), in));
  HSR_CHECK(ckpt_jint(px, j, "block_bytes", 1, (int64_t)1 << 30, &v));
  in->block_bytes = (uint64_t)v;
  if (!mesh || !dt || !opt) return PERR(px, "'mesh', 'dtypes' or 'optimizer' is missing or not an object");
  snprintf(px->where, sizeof px->where, "mesh");
  HSR_CHECK(get_fields(px, mesh, mesh_fields, NFIELDS(mesh_fields), in));
  if (in->format_version >= 2) {
    HSR_CHECK(ckpt_jint(px, mesh, "outer_shard", 0, 1, &v));
    in->outer_shard = (int)v;
  }
  snprintf(px->where, sizeof px->where, "dtypes");
  HSR_CHECK(get_fields(px, dt, dtype_fields, NFIELDS(dtype_fields), in));
  snprintf(px->where, sizeof px->where, "optimizer");
  const cJSON *ga, *g, *cl = cJSON_GetObjectItemCaseSensitive(opt, "clip");
  if (!cJSON_IsNumber(cl)) return PERR(px, "'clip' is missing or not a number");
  in->clip = cl->valuedouble;
  HSR_CHECK(ckpt_jarr(px, opt, "groups", &ga, &in->num_groups));
  if (in->num_groups < 1 || in->num_groups > HSR_RT_MAX_GROUPS)
    return PERR(px, "%d groups (valid: 1 to %d)", in->num_groups, HSR_RT_MAX_GROUPS);
  int i = 0;
  cJSON_ArrayForEach(g, ga) {
    for (int q = 0; q < NGROUP_FIELDS; q++) {
      const cJSON *x = cJSON_GetObjectItemCaseSensitive(g, group_fields[q].key);
      if (!cJSON_IsNumber(x)) return PERR(px, "group %d: '%s' is missing or not a number", i, group_fields[q].key);
      *(float *)((char *)&in->groups[i] + group_fields[q].off) = (float)x->valuedouble;
    }
    i++;
  }
  px->where[0] = 0;
  return HSR_OK;
}

/* "model" (optional: manifests before it lack it): {"kind": NAME,
 * "config": {KEY: number or string, ...}}. */
static hsr_status parse_model(ckpt_handle *c, pctx *px) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(c->json, "model");
  if (!m) return HSR_OK;
  snprintf(px->where, sizeof px->where, "model");
  const char *kind;
  if (!cJSON_IsObject(m)) return PERR(px, "not an object {\"kind\": ..., \"config\": {...}}");
  HSR_CHECK(ckpt_jstr(px, m, "kind", &kind));
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
static hsr_status parse_head(ckpt_handle *c, char *text, size_t len, pctx *px) {
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
  HSR_CHECK(ckpt_jint(px, c->json, "format_version", 1, 1 << 30, &v));
  if (!d) return PERR(px, "no manifest_crc32 (every hsr manifest records its own checksum)");
  uint32_t want = (uint32_t)strtoul(d, NULL, 16), got = text_crc(text, len, d);
  if (want != got) return PERR(px, "its crc32 is 0x%08x, it records 0x%08x (the manifest is corrupted)", got, want);
  if (v > HSR_CKPT_FORMAT_VERSION)
    return PERR(px, "format version %" PRId64 " is newer than this hsr reads (%d): use a newer hsr", v,
                HSR_CKPT_FORMAT_VERSION);
  c->info.format_version = (int)v;
  return HSR_OK;
}

hsr_status ckpt_parse(const char *dir, char *text, size_t len, ckpt_handle **out) {
  *out = NULL;
  ckpt_handle *c = calloc(1, sizeof *c);
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
  if (st == HSR_OK) st = (px.where[0] = 0, ckpt_jarr(&px, c->json, "tensors", &ta, &c->nt));
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
  if (st == HSR_OK && c->info.format_version >= 2) st = ckpt_derive_ranges(c, &px, covered);
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

