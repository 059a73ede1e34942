/* Hugging Face's sharded safetensors layout, written: the shard size, the
 * plan (which tensors go to which file), the streaming writer over the
 * shards and the index (runtime/io/safetensors_sharded.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sys.h"
#include "runtime/io/safetensors_sharded.h"
#include "common/common_internal.h"

hsr_status st_parse_shard_size(const char *what, const char *s, uint64_t *out) {
  static const char *const valid = "a positive number of bytes, e.g. 5GB (5 x 10^9, as save_pretrained), 500MB, "
                                   "2GiB (2 x 2^30) or 1000000";
  *out = 0;
  if (!s || !*s) return hsr_error(HSR_ERR_INVALID, "%s: empty size (valid: %s)", what, valid);
  const char *p = s;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10) return hsr_error(HSR_ERR_INVALID, "%s: '%s' is too large", what, s);
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (p == s) return hsr_error(HSR_ERR_INVALID, "%s: '%s' is not a size (valid: %s)", what, s, valid);
  uint64_t unit = 1;
  if (*p) {
    static const char units[] = "KMGT";
    const char *u = strchr(units, *p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    if (!u) return hsr_error(HSR_ERR_INVALID, "%s: '%s' has an unknown unit (valid: %s)", what, s, valid);
    int bin = p[1] == 'i';
    const char *b = p + 1 + bin;
    if (*b == 'b')
      return hsr_error(HSR_ERR_INVALID, "%s: '%s': a lowercase b means bits (as transformers reads it); write %.*sB",
                       what, s, (int)(b - s), s);
    if (*b != 'B')
      return hsr_error(
          HSR_ERR_INVALID, "%s: '%s' is ambiguous: write %.*s%cB (10^%d bytes, as save_pretrained) or %.*s%ciB (2^%d)",
          what, s, (int)(p - s), s, *u, 3 * (int)(u - units + 1), (int)(p - s), s, *u, 10 * (int)(u - units + 1));
    if (b[1]) return hsr_error(HSR_ERR_INVALID, "%s: '%s' has trailing characters (valid: %s)", what, s, valid);
    for (int k = 0; k <= u - units; k++) unit *= bin ? 1024 : 1000;
  }
  if (v == 0) return hsr_error(HSR_ERR_INVALID, "%s: '%s' is zero (valid: %s)", what, s, valid);
  if (v > UINT64_MAX / unit) return hsr_error(HSR_ERR_INVALID, "%s: '%s' is too large", what, s);
  *out = v * unit;
  return HSR_OK;
}

hsr_status st_shard_plan(const uint64_t *bytes, int n, uint64_t max_bytes, int *shard, int *nshards) {
  if (n < 0 || (n && (!bytes || !shard)) || !nshards || !max_bytes)
    return hsr_error(HSR_ERR_INVALID, "st_shard_plan: bad arguments (n %d, max_bytes %llu)", n,
                     (unsigned long long)max_bytes);
  int cur = 0, open = 0; /* open: shard cur takes more tensors */
  uint64_t fill = 0;
  for (int i = 0; i < n; i++) {
    if (bytes[i] > max_bytes) { /* a file of its own */
      if (open) cur++;
      shard[i] = cur++;
      open = 0;
      continue;
    }
    if (open && fill + bytes[i] > max_bytes) cur++, open = 0;
    if (!open) open = 1, fill = 0;
    shard[i] = cur;
    fill += bytes[i];
  }
  *nshards = cur + open > 0 ? cur + open : 1;
  if (*nshards > HSR_ST_MAX_SHARDS)
    return hsr_error(HSR_ERR_INVALID, "%d shards of at most %llu bytes exceed the %d that five-digit names allow",
                     *nshards, (unsigned long long)max_bytes, HSR_ST_MAX_SHARDS);
  return HSR_OK;
}

struct hsr_st_set_writer {
  char *dir, *path; /* dir NULL: one file at path */
  hsr_st_tensor *t; /* copies (names and dtypes strdup'd) */
  uint64_t *bytes;  /* per tensor */
  int *shard, n, nshards;
  hsr_st_kv *meta; /* copies */
  int nmeta;
  int cur, next_t;  /* the shard being written and its first tensor */
  uint64_t left;    /* its bytes not yet written */
  hsr_st_writer *w; /* its writer */
  int done;         /* shards renamed into place */
};

static void shard_name(const hsr_st_set_writer *w, int k, char *buf, size_t len) {
  if (w->nshards == 1)
    snprintf(buf, len, "%s", HSR_ST_SINGLE_NAME);
  else
    snprintf(buf, len, "model-%05d-of-%05d.safetensors", k + 1, w->nshards);
}

static char *in_dir(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static hsr_status sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return hsr_error(HSR_ERR_IO, "safetensors: cannot open directory '%s': %s", dir, strerror(errno));
  int r = fsync(fd);
  close(fd);
  return r ? hsr_error(HSR_ERR_IO, "safetensors: fsync of directory '%s': %s", dir, strerror(errno)) : HSR_OK;
}

static hsr_status unlink_in(const char *dir, const char *name) {
  char *p = in_dir(dir, name);
  if (!p) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  int r = unlink(p);
  hsr_status st =
      r && errno != ENOENT ? hsr_error(HSR_ERR_IO, "safetensors: removing '%s': %s", p, strerror(errno)) : HSR_OK;
  free(p);
  return st;
}

static void writer_free(hsr_st_set_writer *w) {
  for (int i = 0; w->t && i < w->n; i++) free((char *)w->t[i].name), free((char *)w->t[i].dtype);
  for (int i = 0; w->meta && i < w->nmeta; i++) free((char *)w->meta[i].key), free((char *)w->meta[i].value);
  free(w->t), free(w->bytes), free(w->shard), free(w->meta), free(w->dir), free(w->path);
  free(w);
}

void st_set_abort(hsr_st_set_writer *w) {
  if (!w) return;
  st_abort(w->w);
  for (int k = 0; w->dir && k < w->done; k++) { /* without an index they are no model: they go */
    char name[64];
    shard_name(w, k, name, sizeof name);
    if (unlink_in(w->dir, name) != HSR_OK) HSR_LOG_W("%s", hsr_last_error());
  }
  writer_free(w);
}

/* Opens shard w->cur (its tensors start at w->next_t). */
static hsr_status open_shard(hsr_st_set_writer *w) {
  int first = w->next_t, last = first;
  while (last < w->n && w->shard[last] == w->cur) last++;
  w->left = 0;
  for (int i = first; i < last; i++) w->left += w->bytes[i];
  w->next_t = last;
  char name[64], *p = w->path;
  if (w->dir) {
    shard_name(w, w->cur, name, sizeof name);
    if (!(p = in_dir(w->dir, name))) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  hsr_status st = st_create(p, w->t + first, last - first, w->meta, w->nmeta, &w->w);
  if (p != w->path) free(p);
  return st;
}

/* Closes every full shard and opens the next, while the current is full
 * (shards of empty tensors close at once). */
static hsr_status advance(hsr_st_set_writer *w) {
  while (w->w && w->left == 0 && w->cur + 1 < w->nshards) {
    hsr_st_writer *x = w->w;
    w->w = NULL;
    HSR_CHECK(st_finish(x));
    w->done++;
    w->cur++;
    HSR_CHECK(open_shard(w));
  }
  return HSR_OK;
}

static hsr_status copy_args(hsr_st_set_writer *w, const hsr_st_tensor *t, int n, const hsr_st_kv *meta, int nmeta) {
  w->t = calloc((size_t)n + 1, sizeof *w->t);
  w->bytes = calloc((size_t)n + 1, sizeof *w->bytes);
  w->shard = calloc((size_t)n + 1, sizeof *w->shard);
  w->meta = calloc((size_t)nmeta + 1, sizeof *w->meta);
  if (!w->t || !w->bytes || !w->shard || !w->meta) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++, w->n++) {
    w->t[i] = t[i];
    w->t[i].name = t[i].name ? strdup(t[i].name) : NULL;
    w->t[i].dtype = t[i].dtype ? strdup(t[i].dtype) : NULL;
    if ((t[i].name && !w->t[i].name) || (t[i].dtype && !w->t[i].dtype))
      return hsr_error(HSR_ERR_NOMEM, "out of memory");
    uint64_t b = st_dtype_size(t[i].dtype);
    for (int d = 0; d < t[i].ndim && d < HSR_ST_MAX_DIMS; d++) b *= t[i].shape[d] > 0 ? (uint64_t)t[i].shape[d] : 0;
    w->bytes[i] = b; /* the shapes themselves are checked by st_header below */
  }
  for (int i = 0; i < nmeta; i++, w->nmeta++) {
    w->meta[i].key = meta[i].key ? strdup(meta[i].key) : NULL;
    w->meta[i].value = meta[i].value ? strdup(meta[i].value) : NULL;
    if ((meta[i].key && !w->meta[i].key) || (meta[i].value && !w->meta[i].value))
      return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  return HSR_OK;
}

hsr_status st_set_create(const char *path, uint64_t max_shard_bytes, const hsr_st_tensor *t, int n,
                         const hsr_st_kv *meta, int nmeta, hsr_st_set_writer **out) {
  if (!path || !*path || !out || n < 0 || nmeta < 0 || (n && !t) || (nmeta && !meta))
    return hsr_error(HSR_ERR_INVALID, "st_set_create: bad arguments");
  *out = NULL;
  /* the whole header's checks first (names, dtypes, shapes, metadata), so a bad one touches no file */
  char *hdr = NULL;
  size_t hlen;
  HSR_CHECK(st_header(t, n, meta, nmeta, &hdr, &hlen));
  free(hdr);
  hsr_st_set_writer *w = calloc(1, sizeof *w);
  if (!w) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  hsr_status st = copy_args(w, t, n, meta, nmeta);
  if (st == HSR_OK && !max_shard_bytes) {
    w->nshards = 1;
    if (!(w->path = strdup(path))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  } else if (st == HSR_OK) {
    st = st_shard_plan(w->bytes, n, max_shard_bytes, w->shard, &w->nshards);
    if (st == HSR_OK && !(w->dir = strdup(path))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    struct stat sb;
    if (st == HSR_OK && mkdir(path, 0755) && errno != EEXIST)
      st = hsr_error(HSR_ERR_IO, "safetensors: creating directory '%s': %s", path, strerror(errno));
    if (st == HSR_OK && (stat(path, &sb) || !S_ISDIR(sb.st_mode)))
      st = hsr_error(HSR_ERR_INVALID, "safetensors: '%s' is not a directory (sharded weights are a directory)", path);
    /* from here the directory holds no complete model until the new index is in place */
    if (st == HSR_OK) st = unlink_in(path, HSR_ST_INDEX_NAME);
    if (st == HSR_OK) st = sync_dir(path);
  }
  if (st == HSR_OK) st = open_shard(w);
  if (st == HSR_OK) st = advance(w);
  if (st != HSR_OK) {
    st_set_abort(w);
    return st;
  }
  *out = w;
  return HSR_OK;
}

hsr_status st_set_write(hsr_st_set_writer *w, const void *data, size_t bytes) {
  if (!w || (bytes && !data)) return hsr_error(HSR_ERR_INVALID, "st_set_write: NULL argument");
  const char *p = data;
  while (bytes) {
    if (!w->w || (w->left == 0 && w->cur + 1 >= w->nshards))
      return hsr_error(HSR_ERR_INVALID, "safetensors '%s': %zu bytes more than the tensors hold",
                       w->dir ? w->dir : w->path, bytes);
    size_t k = bytes < w->left ? bytes : (size_t)w->left;
    HSR_CHECK(st_write(w->w, p, k));
    w->left -= k, p += k, bytes -= k;
    HSR_CHECK(advance(w));
  }
  return HSR_OK;
}

/* A shard file name of an earlier export: model-NNNNN-of-NNNNN.safetensors. */
static int shard_like(const char *s) {
  static const char pat[] = "model-#####-of-#####.safetensors";
  if (strlen(s) != sizeof pat - 1) return 0;
  for (size_t i = 0; pat[i]; i++)
    if (pat[i] == '#' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i]) return 0;
  return 1;
}

/* Files of an earlier export that this one does not name. */
static void remove_stale(const hsr_st_set_writer *w) {
  DIR *d = opendir(w->dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char mine[64];
    int ours = 0;
    for (int k = 0; k < w->nshards && !ours; k++) shard_name(w, k, mine, sizeof mine), ours = !strcmp(mine, e->d_name);
    if (!ours && shard_like(e->d_name) && unlink_in(w->dir, e->d_name) != HSR_OK) HSR_LOG_W("%s", hsr_last_error());
  }
  closedir(d);
}

typedef struct wm_row {
  const char *name;
  int shard;
} wm_row;
static int row_cmp(const void *a, const void *b) {
  return strcmp(((const wm_row *)a)->name, ((const wm_row *)b)->name);
}

/* A JSON string as Python's json.dumps writes it (ASCII, \uXXXX beyond). */
static void put_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    unsigned c = *p;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c), p++;
    else if (c == '\n')
      fputs("\\n", f), p++;
    else if (c == '\r')
      fputs("\\r", f), p++;
    else if (c == '\t')
      fputs("\\t", f), p++;
    else if (c == '\b')
      fputs("\\b", f), p++;
    else if (c == '\f')
      fputs("\\f", f), p++;
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c), p++;
    else if (c < 0x80)
      fputc((int)c, f), p++;
    else { /* valid UTF-8 (the header's check said so) */
      int k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
      uint32_t cp = c & (0x3fu >> k);
      for (int j = 1; j <= k; j++) cp = (cp << 6) | (p[j] & 0x3fu);
      p += k + 1;
      if (cp >= 0x10000)
        cp -= 0x10000, fprintf(f, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      else
        fprintf(f, "\\u%04x", cp);
    }
  }
  fputc('"', f);
}

/* The index: {"metadata": {"total_size": N}, "weight_map": {...}} as
 * save_pretrained writes it (json.dumps(indent=2, sort_keys=True) + "\n"),
 * under a temporary name, synced, renamed. */
static hsr_status write_index(const hsr_st_set_writer *w) {
  wm_row *ord = malloc(((size_t)w->n + 1) * sizeof *ord);
  char *p = in_dir(w->dir, HSR_ST_INDEX_NAME);
  if (!ord || !p) {
    free(ord), free(p);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  uint64_t total = 0;
  for (int i = 0; i < w->n; i++) ord[i] = (wm_row){w->t[i].name, w->shard[i]}, total += w->bytes[i];
  qsort(ord, (size_t)w->n, sizeof *ord, row_cmp);
  hsr_out o; /* whole or not at all (synced, renamed); never renamed over a device or a FIFO */
  hsr_status st = out_open(&o, "safetensors index", p, HSR_OUT_WHOLE);
  FILE *f = st == HSR_OK ? o.f : NULL;
  if (st == HSR_OK) {
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {", (unsigned long long)total);
    for (int i = 0; i < w->n; i++) {
      char name[64];
      shard_name(w, ord[i].shard, name, sizeof name);
      fputs(i ? ",\n    " : "\n    ", f);
      put_json_str(f, ord[i].name);
      fputs(": ", f);
      put_json_str(f, name);
    }
    fputs(w->n ? "\n  }\n}\n" : "}\n}\n", f);
    st = out_close(&o);
  }
  free(ord), free(p);
  return st;
}

hsr_status st_set_finish(hsr_st_set_writer *w) {
  if (!w) return hsr_error(HSR_ERR_INVALID, "st_set_finish: NULL writer");
  hsr_status st = HSR_OK;
  if (w->left || w->cur + 1 != w->nshards || w->next_t != w->n)
    st = hsr_error(HSR_ERR_INVALID, "safetensors '%s': finished before every tensor's bytes were written",
                   w->dir ? w->dir : w->path);
  hsr_st_writer *x = w->w;
  w->w = NULL;
  if (st == HSR_OK) {
    st = st_finish(x);
    if (st == HSR_OK) w->done++;
  } else {
    st_abort(x);
  }
  if (st == HSR_OK && w->dir) {
    st = sync_dir(w->dir); /* the shards' renames are durable before the index names them */
    if (st == HSR_OK && w->nshards > 1) st = unlink_in(w->dir, HSR_ST_SINGLE_NAME);
    if (st == HSR_OK && w->nshards > 1) st = write_index(w);
    if (st == HSR_OK) st = sync_dir(w->dir);
    if (st == HSR_OK) remove_stale(w);
  }
  if (st != HSR_OK) {
    st_set_abort(w);
    return st;
  }
  writer_free(w);
  return HSR_OK;
}

int st_set_writer_files(const hsr_st_set_writer *w) { return w ? w->nshards : 0; }
