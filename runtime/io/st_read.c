/* safetensors: the validating reader (runtime/io/safetensors.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/io/safetensors.h"
#include "common/json.h"
#include "common/sys.h"
#include "st_internal.h"

typedef struct entry {
  char *name;
  const char *dtype; /* = dt */
  char dt[12];
  size_t es;
  int ndim;
  int64_t shape[HSR_ST_MAX_DIMS];
  uint64_t numel, begin, end;
} entry;

struct st_file {
  char *label;
  int fd;              /* -1: in memory */
  const uint8_t *mem;  /* the whole file, in memory */
  uint64_t size, data; /* file size, start of the byte buffer */
  entry *t;
  int n;
  char **mk, **mv;
  int nm;
};

void st_close(st_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  for (int i = 0; i < f->n; i++) free(f->t[i].name);
  for (int i = 0; i < f->nm; i++) free(f->mk[i]), free(f->mv[i]);
  free(f->t), free(f->mk), free(f->mv), free(f->label);
  free(f);
}

#define BAD(...) return bad(f, __VA_ARGS__)
static hsr_status bad(const st_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static hsr_status bad(const st_file *f, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hsr_error(HSR_ERR_INVALID, "safetensors '%s': %s", f->label, msg);
}

/* A non-negative integer that a double holds exactly. */
static int as_u64(const cJSON *v, uint64_t *out) {
  if (!cJSON_IsNumber(v)) return 0;
  double d = v->valuedouble;
  if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return 0;
  *out = (uint64_t)d;
  return 1;
}

static hsr_status parse_meta(st_file *f, const cJSON *m) {
  if (!cJSON_IsObject(m)) BAD("__metadata__ is not an object (it must map strings to strings)");
  int n = cJSON_GetArraySize(m);
  f->mk = calloc((size_t)n + 1, sizeof(char *));
  f->mv = calloc((size_t)n + 1, sizeof(char *));
  if (!f->mk || !f->mv) return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  for (const cJSON *kv = m->child; kv; kv = kv->next) {
    if (!cJSON_IsString(kv)) BAD("__metadata__ value of '%s' is not a string (only strings are allowed)", kv->string);
    for (int j = 0; j < f->nm; j++)
      if (!strcmp(f->mk[j], kv->string)) BAD("__metadata__ key '%s' appears twice", kv->string);
    f->mk[f->nm] = strdup(kv->string);
    f->mv[f->nm] = strdup(kv->valuestring);
    if (!f->mk[f->nm] || !f->mv[f->nm]) return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
    f->nm++;
  }
  return HSR_OK;
}

static hsr_status parse_entry(st_file *f, const cJSON *o, entry *e) {
  const char *nm = o->string;
  if (!cJSON_IsObject(o)) BAD("tensor '%s' is not an object {\"dtype\", \"shape\", \"data_offsets\"}", nm);
  const cJSON *dt = NULL, *sh = NULL, *off = NULL;
  for (const cJSON *k = o->child; k; k = k->next) {
    const cJSON **slot = !strcmp(k->string, "dtype")          ? &dt
                         : !strcmp(k->string, "shape")        ? &sh
                         : !strcmp(k->string, "data_offsets") ? &off
                                                              : NULL;
    if (!slot) BAD("tensor '%s' has an unknown key '%s' (valid: dtype, shape, data_offsets)", nm, k->string);
    if (*slot) BAD("tensor '%s' has the key '%s' twice", nm, k->string);
    *slot = k;
  }
  if (!dt || !sh || !off) BAD("tensor '%s' lacks %s", nm, !dt ? "dtype" : !sh ? "shape" : "data_offsets");
  if (!cJSON_IsString(dt) || !(e->es = st_dtype_size(dt->valuestring)))
    BAD("tensor '%s': dtype %s%s%s is not one of %s", nm, cJSON_IsString(dt) ? "'" : "",
        cJSON_IsString(dt) ? dt->valuestring : "(not a string)", cJSON_IsString(dt) ? "'" : "", st_dtype_list());
  snprintf(e->dt, sizeof e->dt, "%s", dt->valuestring);
  e->dtype = e->dt;
  if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > HSR_ST_MAX_DIMS)
    BAD("tensor '%s': shape must be an array of at most %d non-negative integers", nm, HSR_ST_MAX_DIMS);
  e->ndim = 0;
  e->numel = 1;
  for (const cJSON *d = sh->child; d; d = d->next) {
    uint64_t v;
    if (!as_u64(d, &v) || v > INT64_MAX) BAD("tensor '%s': shape entry %d is not a non-negative integer", nm, e->ndim);
    if (st_mul_overflows(e->numel, v, &e->numel)) BAD("tensor '%s': the shape overflows 64 bits", nm);
    e->shape[e->ndim++] = (int64_t)v;
  }
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !as_u64(off->child, &e->begin) ||
      !as_u64(off->child->next, &e->end))
    BAD("tensor '%s': data_offsets must be [BEGIN, END], two non-negative integers", nm);
  uint64_t bytes;
  if (st_mul_overflows(e->numel, e->es, &bytes)) BAD("tensor '%s': its byte size overflows 64 bits", nm);
  if (e->end < e->begin)
    BAD("tensor '%s': data_offsets [%llu, %llu] end before they begin", nm, (unsigned long long)e->begin,
        (unsigned long long)e->end);
  if (e->end - e->begin != bytes)
    BAD("tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but %s x %llu elements need %llu", nm,
        (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)(e->end - e->begin), e->dt,
        (unsigned long long)e->numel, (unsigned long long)bytes);
  e->name = strdup(nm);
  if (!e->name) return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  return HSR_OK;
}

static int by_offset(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* No duplicates, no holes, no overlaps, the buffer covered exactly. */
static hsr_status check_cover(st_file *f) {
  uint64_t buf = f->size - f->data;
  entry **s = malloc(((size_t)f->n + 1) * sizeof *s);
  if (!s) return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  for (int i = 0; i < f->n; i++) s[i] = &f->t[i];
  qsort(s, (size_t)f->n, sizeof *s, by_offset);
  uint64_t at = 0;
  hsr_status st = HSR_OK;
  for (int i = 0; i < f->n && st == HSR_OK; i++) {
    if (s[i]->begin > at)
      st = bad(f, "a hole of %llu bytes at buffer offset %llu, before tensor '%s' (the buffer must be fully indexed)",
               (unsigned long long)(s[i]->begin - at), (unsigned long long)at, s[i]->name);
    else if (s[i]->begin < at)
      st = bad(f, "tensor '%s' (data_offsets [%llu, %llu]) overlaps '%s'", s[i]->name, (unsigned long long)s[i]->begin,
               (unsigned long long)s[i]->end, s[i - 1]->name);
    at = s[i]->end;
  }
  free(s);
  HSR_CHECK(st);
  if (at != buf)
    BAD("the tensors cover %llu bytes of the %llu-byte buffer after the header (the file is %llu bytes)",
        (unsigned long long)at, (unsigned long long)buf, (unsigned long long)f->size);
  return HSR_OK;
}

/* Validates header bytes h[0..n) of a file of `size` bytes. */
static hsr_status parse_header(st_file *f, const char *h, size_t n) {
  if (n < 2 || h[0] != '{') BAD("the header does not start with '{' (byte 8 of the file)");
  size_t at;
  if (!st_utf8_valid((const unsigned char *)h, n, &at)) BAD("the header is not valid UTF-8 (header byte %zu)", at);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)h[i] < 0x20 && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
      BAD("the header holds control character 0x%02x at byte %zu (not valid JSON)", (unsigned char)h[i], i);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(h, n, &end, 0);
  if (!root) {
    const char *e = cJSON_GetErrorPtr();
    BAD("the header is not valid JSON (near header byte %ld)", e && e >= h && e <= h + n ? (long)(e - h) : -1L);
  }
  hsr_status st = HSR_OK;
  if (json_check_finite(root, HSR_ERR_INVALID, "header") != HSR_OK) /* an offset of 1e999 */
    st = bad(f, "%s", hsr_last_error());
  for (const char *p = end; p < h + n && st == HSR_OK; p++)
    if (*p != ' ')
      st = bad(f,
               "the header has byte 0x%02x after its JSON object at header byte %ld (only space "
               "padding is allowed)",
               (unsigned char)*p, (long)(p - h));
  if (st == HSR_OK && !cJSON_IsObject(root)) st = bad(f, "the header is not a JSON object");
  int cap = st == HSR_OK ? cJSON_GetArraySize(root) : 0, seen_meta = 0;
  if (st == HSR_OK && !(f->t = calloc((size_t)cap + 1, sizeof *f->t)))
    st = hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  for (const cJSON *c = st == HSR_OK ? root->child : NULL; c && st == HSR_OK; c = c->next) {
    if (!strcmp(c->string, "__metadata__")) {
      st = seen_meta++ ? bad(f, "__metadata__ appears twice") : parse_meta(f, c);
      continue;
    }
    for (int j = 0; j < f->n && st == HSR_OK; j++)
      if (!strcmp(f->t[j].name, c->string))
        st = bad(f, "tensor '%s' appears twice (duplicate keys are not allowed)", c->string);
    if (st == HSR_OK && (st = parse_entry(f, c, &f->t[f->n])) == HSR_OK) f->n++;
  }
  cJSON_Delete(root);
  HSR_CHECK(st);
  return check_cover(f);
}

/* The length field and the header's place in a file of f->size bytes. */
static hsr_status check_length(st_file *f, const uint8_t le[8], uint64_t *n) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | le[i];
  if (v > HSR_ST_HEADER_MAX)
    BAD("header length %llu exceeds the %u-byte limit", (unsigned long long)v, HSR_ST_HEADER_MAX);
  if (v > f->size - 8)
    BAD("header length %llu runs past the end of the file (%llu bytes)", (unsigned long long)v,
        (unsigned long long)f->size);
  *n = v;
  f->data = 8 + v;
  return HSR_OK;
}

static hsr_status new_file(const char *label, st_file **out) {
  *out = NULL; /* set on the error path too: the compiler cannot see hsr_error is never HSR_OK */
  st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->label = strdup(label ? label : "(memory)"))) {
    free(f);
    return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  }
  f->fd = -1;
  *out = f;
  return HSR_OK;
}

hsr_status st_parse(const void *bytes, size_t len, const char *label, st_file **out) {
  if (!out || (len && !bytes)) return hsr_error(HSR_ERR_INVALID, "st_parse: NULL argument");
  st_file *f;
  HSR_CHECK(new_file(label, &f));
  f->mem = bytes;
  f->size = len;
  uint64_t n = 0;
  hsr_status st =
      len < 8 ? bad(f, "%zu bytes: shorter than the 8-byte header length", len) : check_length(f, f->mem, &n);
  if (st == HSR_OK) st = parse_header(f, (const char *)f->mem + 8, (size_t)n);
  if (st != HSR_OK) {
    st_close(f);
    return st;
  }
  *out = f;
  return HSR_OK;
}

static hsr_status read_at(const st_file *f, void *dst, size_t n, uint64_t off) {
  if (f->fd < 0) {
    memcpy(dst, f->mem + off, n);
    return HSR_OK;
  }
  for (size_t got = 0; got < n;) {
    ssize_t r = pread(f->fd, (char *)dst + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return hsr_error(HSR_ERR_IO, "safetensors '%s': read of %zu bytes at %llu: %s", f->label, n,
                       (unsigned long long)off, r < 0 ? strerror(errno) : "unexpected end of file");
    got += (size_t)r;
  }
  return HSR_OK;
}

hsr_status st_open(const char *path, st_file **out) {
  if (!path || !out) return hsr_error(HSR_ERR_INVALID, "st_open: NULL argument");
  *out = NULL;
  st_file *f;
  HSR_CHECK(new_file(path, &f));
  struct stat sb;
  hsr_status st = HSR_OK;
  if (file_open_read("safetensors", path, &f->fd) != HSR_OK)
    st = HSR_ERR_IO; /* hsr_last_error() names it: a FIFO is refused, not waited on */
  else if (fstat(f->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
    st = hsr_error(HSR_ERR_IO, "safetensors '%s': not a regular file", path);
  f->size = st == HSR_OK ? (uint64_t)sb.st_size : 0;
  uint8_t le[8];
  uint64_t n = 0;
  if (st == HSR_OK && f->size < 8)
    st = bad(f, "%llu bytes: shorter than the 8-byte header length", (unsigned long long)f->size);
  if (st == HSR_OK) st = read_at(f, le, 8, 0);
  if (st == HSR_OK) st = check_length(f, le, &n);
  char *h = st == HSR_OK ? malloc((size_t)n + 1) : NULL;
  if (st == HSR_OK && !h) st = hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  if (st == HSR_OK) st = read_at(f, h, (size_t)n, 8);
  if (st == HSR_OK) st = parse_header(f, h, (size_t)n);
  free(h);
  if (st != HSR_OK) {
    st_close(f);
    return st;
  }
  *out = f;
  return HSR_OK;
}

int st_count(const st_file *f) { return f ? f->n : 0; }

hsr_status st_info_at(const st_file *f, int i, st_info *out) {
  if (!f || !out || i < 0 || i >= f->n)
    return hsr_error(HSR_ERR_INVALID, "st_info_at: tensor %d of %d", i, f ? f->n : 0);
  const entry *e = &f->t[i];
  out->name = e->name, out->dtype = e->dtype, out->dtype_size = e->es, out->ndim = e->ndim;
  memcpy(out->shape, e->shape, sizeof out->shape);
  out->numel = e->numel, out->begin = e->begin, out->end = e->end;
  return HSR_OK;
}

hsr_status st_find(const st_file *f, const char *name, int *index) {
  if (!f || !name || !index) return hsr_error(HSR_ERR_INVALID, "st_find: NULL argument");
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->t[i].name, name)) {
      *index = i;
      return HSR_OK;
    }
  return hsr_error(HSR_ERR_NOT_FOUND, "safetensors '%s': no tensor '%s'", f->label, name);
}

const char *st_meta(const st_file *f, const char *key) {
  for (int i = 0; f && key && i < f->nm; i++)
    if (!strcmp(f->mk[i], key)) return f->mv[i];
  return NULL;
}

int st_meta_count(const st_file *f) { return f ? f->nm : 0; }

hsr_status st_meta_at(const st_file *f, int i, const char **key, const char **value) {
  if (!f || i < 0 || i >= f->nm || !key || !value)
    return hsr_error(HSR_ERR_INVALID, "st_meta_at: pair %d of %d", i, f ? f->nm : 0);
  *key = f->mk[i], *value = f->mv[i];
  return HSR_OK;
}

hsr_status st_read(const st_file *f, int i, uint64_t offset, void *dst, size_t bytes) {
  if (!f || i < 0 || i >= f->n || (bytes && !dst))
    return hsr_error(HSR_ERR_INVALID, "st_read: tensor %d of %d", i, f ? f->n : 0);
  const entry *e = &f->t[i];
  if (offset > e->end - e->begin || bytes > e->end - e->begin - offset)
    return hsr_error(HSR_ERR_INVALID, "safetensors '%s': bytes [%llu, %llu) are outside tensor '%s' (%llu bytes)",
                     f->label, (unsigned long long)offset, (unsigned long long)(offset + bytes), e->name,
                     (unsigned long long)(e->end - e->begin));
  return read_at(f, dst, bytes, f->data + e->begin + offset);
}
