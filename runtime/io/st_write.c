/* safetensors: dtypes and the streaming writer (runtime/io/safetensors.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/io/safetensors.h"
#include "common/sys.h"
#include "st_internal.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
              {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};

size_t st_dtype_size(const char *dtype) {
  if (!dtype) return 0;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (!strcmp(dtype, dtypes[i].name)) return dtypes[i].size;
  return 0;
}

const char *st_dtype_list(void) {
  return "BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64";
}

int st_utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    size_t k;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf)
      k = 1;
    else if ((c & 0xf0) == 0xe0)
      k = 2;
    else if (c >= 0xf0 && c <= 0xf4)
      k = 3;
    else
      goto fail;
    if (i + k >= n) goto fail; /* truncated */
    uint32_t cp = c & (0x3fu >> k);
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xc0) != 0x80) goto fail;
      cp = (cp << 6) | (s[i + j] & 0x3fu);
    }
    /* overlong forms, surrogates, beyond U+10FFFF */
    if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      goto fail;
    i += k + 1;
    continue;
  fail:
    *bad = i;
    return 0;
  }
  return 1;
}

/* ---- the header text: compact JSON as serde_json writes it ---- */
typedef struct sbuf {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* a JSON string: ", \ and control characters escaped like serde_json */
static void put_str(sbuf *b, const char *s) {
  put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[8];
    if (c == '"' || c == '\\') {
      e[0] = '\\', e[1] = (char)c;
      put(b, e, 2);
    } else if (c < 0x20) {
      const char *named = c == '\b'   ? "\\b"
                          : c == '\f' ? "\\f"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                                      : NULL;
      if (named)
        puts_(b, named);
      else {
        snprintf(e, sizeof e, "\\u%04x", c);
        puts_(b, e);
      }
    } else {
      put(b, (const char *)&c, 1);
    }
  }
  put(b, "\"", 1);
}

static void put_u64(sbuf *b, uint64_t v) {
  char t[24];
  snprintf(t, sizeof t, "%llu", (unsigned long long)v);
  puts_(b, t);
}

static hsr_status check_text(const char *s, const char *what) {
  size_t bad;
  if (!s) return hsr_error(HSR_ERR_INVALID, "safetensors: %s is NULL", what);
  if (!st_utf8_valid((const unsigned char *)s, strlen(s), &bad))
    return hsr_error(HSR_ERR_INVALID, "safetensors: %s '%s' is not valid UTF-8 (byte %zu)", what, s, bad);
  return HSR_OK;
}

/* Validates the tensors and metadata; *buffer = bytes of all tensors. */
static hsr_status check_entries(const st_tensor *t, int n, const st_kv *meta, int nmeta, uint64_t *buffer) {
  if (n < 0 || nmeta < 0 || (n && !t) || (nmeta && !meta))
    return hsr_error(HSR_ERR_INVALID, "safetensors: %d tensors, %d metadata pairs: bad arguments", n, nmeta);
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    HSR_CHECK(check_text(t[i].name, "tensor name"));
    if (!strcmp(t[i].name, "__metadata__"))
      return hsr_error(HSR_ERR_INVALID, "safetensors: a tensor cannot be named '__metadata__' (the metadata key)");
    for (int j = 0; j < i; j++)
      if (!strcmp(t[i].name, t[j].name))
        return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s' given twice (names must be unique)", t[i].name);
    size_t es = st_dtype_size(t[i].dtype);
    if (!es)
      return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s': dtype '%s' (valid: %s)", t[i].name,
                       t[i].dtype ? t[i].dtype : "(null)", st_dtype_list());
    if (t[i].ndim < 0 || t[i].ndim > HSR_ST_MAX_DIMS)
      return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s' has %d dimensions (valid: 0 to %d)", t[i].name,
                       t[i].ndim, HSR_ST_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < t[i].ndim; d++) {
      if (t[i].shape[d] < 0)
        return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s': dimension %d is %lld", t[i].name, d,
                         (long long)t[i].shape[d]);
      if (st_mul_overflows(numel, (uint64_t)t[i].shape[d], &numel))
        return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s': the shape overflows 64 bits", t[i].name);
    }
    uint64_t bytes;
    if (st_mul_overflows(numel, es, &bytes) || off + bytes < off)
      return hsr_error(HSR_ERR_INVALID, "safetensors: tensor '%s': the byte buffer overflows 64 bits", t[i].name);
    off += bytes;
  }
  for (int i = 0; i < nmeta; i++) {
    HSR_CHECK(check_text(meta[i].key, "metadata key"));
    HSR_CHECK(check_text(meta[i].value, "metadata value"));
    for (int j = 0; j < i; j++)
      if (!strcmp(meta[i].key, meta[j].key))
        return hsr_error(HSR_ERR_INVALID, "safetensors: metadata key '%s' given twice", meta[i].key);
  }
  *buffer = off;
  return HSR_OK;
}

hsr_status st_header(const st_tensor *t, int n, const st_kv *meta, int nmeta, char **out, size_t *len) {
  if (!out || !len) return hsr_error(HSR_ERR_INVALID, "st_header: NULL output");
  uint64_t total;
  HSR_CHECK(check_entries(t, n, meta, nmeta, &total));
  sbuf b = {0};
  put(&b, "{", 1);
  if (nmeta) {
    puts_(&b, "\"__metadata__\":{");
    for (int i = 0; i < nmeta; i++) {
      if (i) put(&b, ",", 1);
      put_str(&b, meta[i].key);
      put(&b, ":", 1);
      put_str(&b, meta[i].value);
    }
    put(&b, "}", 1);
  }
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    if (i || nmeta) put(&b, ",", 1);
    put_str(&b, t[i].name);
    puts_(&b, ":{\"dtype\":");
    put_str(&b, t[i].dtype);
    puts_(&b, ",\"shape\":[");
    uint64_t numel = 1;
    for (int d = 0; d < t[i].ndim; d++) {
      if (d) put(&b, ",", 1);
      put_u64(&b, (uint64_t)t[i].shape[d]);
      numel *= (uint64_t)t[i].shape[d];
    }
    puts_(&b, "],\"data_offsets\":[");
    put_u64(&b, off);
    put(&b, ",", 1);
    off += numel * st_dtype_size(t[i].dtype);
    put_u64(&b, off);
    puts_(&b, "]}");
  }
  put(&b, "}", 1);
  while (b.n % 8) put(&b, " ", 1); /* the buffer starts 8-byte aligned */
  if (b.oom || b.n > HSR_ST_HEADER_MAX) {
    free(b.p);
    return b.oom ? hsr_error(HSR_ERR_NOMEM, "safetensors: header: out of memory")
                 : hsr_error(HSR_ERR_INVALID, "safetensors: header of %zu bytes exceeds the %u-byte limit", b.n,
                             HSR_ST_HEADER_MAX);
  }
  *out = b.p;
  *len = b.n;
  return HSR_OK;
}

/* ---- the streaming writer ---- */
struct st_writer {
  sys_out out; /* st_create's: whole or not at all; a device or a FIFO in place, never renamed over */
  int own;     /* whether out is ours (st_create) or f the caller's (st_begin) */
  FILE *f;
  char *path;
  uint64_t total, written;
};

static void writer_free(st_writer *w) {
  free(w->path);
  free(w);
}

void st_abort(st_writer *w) {
  if (!w) return;
  if (w->own) out_abort(&w->out);
  writer_free(w);
}

/* The writer of these tensors over f, the length and the header written. */
static hsr_status begin(FILE *f, const char *path, const st_tensor *t, int n, const st_kv *meta, int nmeta,
                        st_writer **out) {
  *out = NULL;
  char *hdr;
  size_t hlen;
  HSR_CHECK(st_header(t, n, meta, nmeta, &hdr, &hlen));
  uint64_t total;
  HSR_CHECK(check_entries(t, n, meta, nmeta, &total));
  st_writer *w = calloc(1, sizeof *w);
  if (w) w->path = strdup(path);
  if (!w || !w->path) {
    free(hdr);
    if (w) writer_free(w);
    return hsr_error(HSR_ERR_NOMEM, "safetensors: out of memory");
  }
  w->total = total;
  w->f = f;
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
  int ok = fwrite(le, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
  free(hdr);
  if (!ok) {
    hsr_status st = hsr_error(HSR_ERR_IO, "safetensors '%s': writing the header: %s", path, strerror(errno));
    writer_free(w);
    return st;
  }
  *out = w;
  return HSR_OK;
}

hsr_status st_begin(FILE *f, const char *label, const st_tensor *t, int n, const st_kv *meta, int nmeta,
                    st_writer **out) {
  if (!f || !label || !out) return hsr_error(HSR_ERR_INVALID, "st_begin: NULL argument");
  return begin(f, label, t, n, meta, nmeta, out);
}

hsr_status st_create(const char *path, const st_tensor *t, int n, const st_kv *meta, int nmeta,
                     st_writer **out) {
  if (!path || !out) return hsr_error(HSR_ERR_INVALID, "st_create: NULL argument");
  *out = NULL;
  uint64_t total;
  HSR_CHECK(check_entries(t, n, meta, nmeta, &total)); /* a bad header touches no file */
  sys_out o;
  HSR_CHECK(out_open(&o, "safetensors", path, HSR_OUT_WHOLE));
  hsr_status st = begin(o.f, path, t, n, meta, nmeta, out);
  if (st != HSR_OK) {
    out_abort(&o);
    return st;
  }
  (*out)->out = o;
  (*out)->own = 1;
  return HSR_OK;
}

hsr_status st_write(st_writer *w, const void *data, size_t bytes) {
  if (!w || (bytes && !data)) return hsr_error(HSR_ERR_INVALID, "st_write: NULL argument");
  if (bytes > w->total - w->written)
    return hsr_error(HSR_ERR_INVALID, "safetensors '%s': %zu more bytes, but the header leaves only %llu", w->path,
                     bytes, (unsigned long long)(w->total - w->written));
  if (bytes && fwrite(data, 1, bytes, w->f) != bytes)
    return hsr_error(HSR_ERR_IO, "safetensors '%s': write: %s", w->path, strerror(errno));
  w->written += bytes;
  return HSR_OK;
}

/* Whether every byte the header promises was written. */
static hsr_status complete(const st_writer *w) {
  if (w->written == w->total) return HSR_OK;
  return hsr_error(HSR_ERR_INVALID, "safetensors '%s': %llu of the header's %llu data bytes written", w->path,
                   (unsigned long long)w->written, (unsigned long long)w->total);
}

hsr_status st_end(st_writer *w) {
  if (!w) return hsr_error(HSR_ERR_INVALID, "st_end: NULL writer");
  hsr_status st = complete(w);
  writer_free(w);
  return st;
}

hsr_status st_finish(st_writer *w) {
  if (!w) return hsr_error(HSR_ERR_INVALID, "st_finish: NULL writer");
  hsr_status st = complete(w);
  if (st != HSR_OK) {
    st_abort(w);
    return st;
  }
  st = w->own ? out_close(&w->out) : HSR_OK; /* flush, fsync, every write checked, rename */
  writer_free(w);
  return st;
}
