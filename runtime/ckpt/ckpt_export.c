/* Exports (ckpt_export.h): the safetensors formats' writer behind the
 * commit protocol. ckpt_format_safetensors is one file, its own index;
 * ckpt_format_hf is Hugging Face's directory layout, its index
 * model.safetensors.index.json, or model.safetensors when one shard holds
 * every tensor. The bytes (header, index text, names) are
 * runtime/io/'s; staging and the commit are ckpt_commit.c's. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_export.h"
#include "ckpt_int.h"
#include "runtime/io/safetensors_sharded.h"

#define STAGED_SUFFIX ".hsr-staged"

struct ckpt_export {
  const ckpt_format *fmt;
  ckpt_commit_at at;
  char dir[4096], base[256]; /* the single file: dir/base */
  st_tensor *t;          /* copies (names and dtypes strdup'd) */
  uint64_t *bytes;           /* per tensor */
  int *shard, n, nshards;
  st_kv *meta; /* copies */
  int nmeta;
  int cur, next_t;      /* the shard being written and its first tensor */
  uint64_t left;        /* its bytes not yet written */
  FILE *f;              /* its staged file */
  st_writer *w;     /* its writer */
  char label[4400];     /* its final path, for messages */
  st_writer *place; /* a device or a FIFO: written in place */
};

/* ---- the formats ---- */
static const char *single_index(const void *w) { return ((const ckpt_export *)w)->base; }

static int single_staged(const void *w, int i, char *name, size_t len) {
  if (i) return 0;
  snprintf(name, len, "%s", ((const ckpt_export *)w)->base);
  return 1;
}

static int keep_all(const char *name, const void *w) {
  (void)name, (void)w;
  return 1; /* the directory is the user's: only the file itself changes */
}

const ckpt_format ckpt_format_safetensors = {
    .name = "safetensors", .index = single_index, .staged = single_staged, .keep = keep_all};

static const char *hf_index(const void *w) {
  return ((const ckpt_export *)w)->nshards > 1 ? HSR_ST_INDEX_NAME : HSR_ST_SINGLE_NAME;
}

static hsr_status hf_index_text(void *w, char **text, size_t *len) {
  ckpt_export *e = w;
  *text = NULL; /* one shard: model.safetensors, staged, is the index */
  return e->nshards > 1 ? st_index_text(e->t, e->shard, e->n, e->nshards, text, len) : HSR_OK;
}

static int hf_staged(const void *w, int i, char *name, size_t len) {
  const ckpt_export *e = w;
  if (i >= e->nshards) return 0;
  st_shard_name(i, e->nshards, name, len);
  return 1;
}

/* The previous output's index goes before any of its shards is replaced;
 * model.safetensors, when it is the new index, is replaced atomically. */
static int hf_retire(const char *name, const void *w) {
  return !strcmp(name, HSR_ST_INDEX_NAME) || (((const ckpt_export *)w)->nshards > 1 && !strcmp(name, HSR_ST_SINGLE_NAME));
}

/* An earlier export's files that this one does not name go (shards, the
 * other form's index, staged files of a crashed one); anything else stays. */
static int hf_keep(const char *name, const void *w) {
  const ckpt_export *e = w;
  char stem[256];
  size_t n = strlen(name), k = sizeof STAGED_SUFFIX - 1;
  if (n > k && n - k < sizeof stem && !strcmp(name + n - k, STAGED_SUFFIX)) {
    snprintf(stem, sizeof stem, "%.*s", (int)(n - k), name);
    return !st_shard_like(stem) && strcmp(stem, HSR_ST_SINGLE_NAME) && strcmp(stem, HSR_ST_INDEX_NAME);
  }
  if (!strcmp(name, HSR_ST_INDEX_NAME)) return e->nshards > 1;
  if (!strcmp(name, HSR_ST_SINGLE_NAME)) return e->nshards == 1;
  if (!st_shard_like(name)) return 1;
  for (int k2 = 0; k2 < e->nshards; k2++) {
    char mine[64];
    st_shard_name(k2, e->nshards, mine, sizeof mine);
    if (!strcmp(mine, name)) return 1;
  }
  return 0;
}

const ckpt_format ckpt_format_hf = {.name = "safetensors-sharded",
                                    .index = hf_index,
                                    .index_text = hf_index_text,
                                    .staged = hf_staged,
                                    .retire = hf_retire,
                                    .keep = hf_keep};

const ckpt_format *const ckpt_formats[] = {&ckpt_format_native, &ckpt_format_safetensors, &ckpt_format_hf, NULL};

const char *ckpt_format_name(int i) {
  int n = 0;
  while (ckpt_formats[n]) n++;
  return i >= 0 && i < n ? ckpt_formats[i]->name : NULL;
}

/* ---- the writer ---- */
static void export_free(ckpt_export *e) {
  for (int i = 0; e->t && i < e->n; i++) free((char *)e->t[i].name), free((char *)e->t[i].dtype);
  for (int i = 0; e->meta && i < e->nmeta; i++) free((char *)e->meta[i].key), free((char *)e->meta[i].value);
  free(e->t), free(e->bytes), free(e->shard), free(e->meta);
  free(e);
}

void ckpt_export_abort(ckpt_export *e) {
  if (!e) return;
  if (e->place) st_abort(e->place);
  if (e->w) st_abort(e->w);
  if (e->f) fclose(e->f);
  if (e->fmt) ckpt_commit_discard(&e->at, e->fmt, e);
  export_free(e);
}

int ckpt_export_files(const ckpt_export *e) { return e ? e->nshards : 0; }

/* Opens shard e->cur's staged file (its tensors start at e->next_t). */
static hsr_status open_shard(ckpt_export *e) {
  int first = e->next_t, last = first;
  while (last < e->n && e->shard[last] == e->cur) last++;
  e->left = 0;
  for (int i = first; i < last; i++) e->left += e->bytes[i];
  e->next_t = last;
  char name[256], staged[4400];
  HSR_CHECK(e->fmt->staged(e, e->cur, name, sizeof name) ? HSR_OK : hsr_error(HSR_ERR_INVALID, "no shard %d", e->cur));
  HSR_CHECK(ckpt_commit_staged_path(e->dir, name, staged, sizeof staged));
  HSR_CHECK(ckpt_path(e->label, sizeof e->label, e->dir, name));
  if (!(e->f = fopen(staged, "wbe"))) return hsr_error(HSR_ERR_IO, "creating '%s': %s", staged, strerror(errno));
  return st_begin(e->f, e->label, e->t + first, last - first, e->meta, e->nmeta, &e->w);
}

/* The current shard complete and durable under its staged name. */
static hsr_status close_shard(ckpt_export *e) {
  st_writer *w = e->w;
  FILE *f = e->f;
  e->w = NULL, e->f = NULL;
  hsr_status st = st_end(w);
  if (fflush(f) || fsync(fileno(f)))
    st = st == HSR_OK ? hsr_error(HSR_ERR_IO, "safetensors '%s': %s", e->label, strerror(errno)) : st;
  if (fclose(f) && st == HSR_OK) st = hsr_error(HSR_ERR_IO, "safetensors '%s': %s", e->label, strerror(errno));
  return st;
}

/* Closes every full shard and opens the next, while the current is full
 * (shards of empty tensors close at once). */
static hsr_status advance(ckpt_export *e) {
  while (e->w && e->left == 0 && e->cur + 1 < e->nshards) {
    HSR_CHECK(close_shard(e));
    e->cur++;
    HSR_CHECK(open_shard(e));
  }
  return HSR_OK;
}

static hsr_status copy_args(ckpt_export *e, const st_tensor *t, int n, const st_kv *meta, int nmeta) {
  e->t = calloc((size_t)n + 1, sizeof *e->t);
  e->bytes = calloc((size_t)n + 1, sizeof *e->bytes);
  e->shard = calloc((size_t)n + 1, sizeof *e->shard);
  e->meta = calloc((size_t)nmeta + 1, sizeof *e->meta);
  if (!e->t || !e->bytes || !e->shard || !e->meta) return hsr_error(HSR_ERR_NOMEM, "export: out of memory");
  for (int i = 0; i < n; i++, e->n++) {
    e->t[i] = t[i];
    e->t[i].name = strdup(t[i].name), e->t[i].dtype = strdup(t[i].dtype);
    if (!e->t[i].name || !e->t[i].dtype) return hsr_error(HSR_ERR_NOMEM, "export: out of memory");
    uint64_t b = st_dtype_size(t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++) b *= (uint64_t)t[i].shape[d];
    e->bytes[i] = b; /* st_header checked the shapes */
  }
  for (int i = 0; i < nmeta; i++, e->nmeta++) {
    e->meta[i].key = strdup(meta[i].key), e->meta[i].value = strdup(meta[i].value);
    if (!e->meta[i].key || !e->meta[i].value) return hsr_error(HSR_ERR_NOMEM, "export: out of memory");
  }
  return HSR_OK;
}

/* The single file's directory and name (a symlink's target's); *place 1 for
 * a character device or a FIFO. */
static hsr_status single_target(ckpt_export *e, const char *path, int *place) {
  struct stat sb;
  *place = !stat(path, &sb) && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode));
  if (*place) return HSR_OK;
  char real[PATH_MAX];
  const char *p = path;
  if (!lstat(path, &sb) && S_ISLNK(sb.st_mode)) {
    if (!realpath(path, real)) return hsr_error(HSR_ERR_IO, "safetensors '%s': %s", path, strerror(errno));
    p = real;
  }
  const char *sl = strrchr(p, '/');
  const char *base = sl ? sl + 1 : p;
  if (!*base || strlen(base) + sizeof STAGED_SUFFIX > sizeof e->base)
    return hsr_error(HSR_ERR_INVALID, "safetensors '%s': not a file name of at most %zu bytes", path,
                     sizeof e->base - sizeof STAGED_SUFFIX);
  snprintf(e->base, sizeof e->base, "%s", base);
  snprintf(e->dir, sizeof e->dir, "%.*s", sl ? (int)(sl - p) + (sl == p) : 1, sl ? p : ".");
  return HSR_OK;
}

hsr_status ckpt_export_begin(const char *path, uint64_t max_shard_bytes, const st_tensor *t, int n,
                             const st_kv *meta, int nmeta, ckpt_export **out) {
  if (!path || !*path || !out || n < 0 || nmeta < 0 || (n && !t) || (nmeta && !meta))
    return hsr_error(HSR_ERR_INVALID, "ckpt_export_begin: bad arguments");
  *out = NULL;
  /* the whole header's checks first (names, dtypes, shapes, metadata), so a bad one touches no file */
  char *hdr = NULL;
  size_t hlen;
  HSR_CHECK(st_header(t, n, meta, nmeta, &hdr, &hlen));
  free(hdr);
  ckpt_export *e = calloc(1, sizeof *e);
  if (!e) return hsr_error(HSR_ERR_NOMEM, "export: out of memory");
  hsr_status st = copy_args(e, t, n, meta, nmeta);
  int place = 0;
  if (st == HSR_OK && !max_shard_bytes) {
    e->nshards = 1;
    st = single_target(e, path, &place);
    if (st == HSR_OK && place) st = st_create(path, t, n, meta, nmeta, &e->place);
    if (st == HSR_OK && !place) e->fmt = &ckpt_format_safetensors;
  } else if (st == HSR_OK) {
    st = st_shard_plan(e->bytes, n, max_shard_bytes, e->shard, &e->nshards);
    if (st == HSR_OK && (size_t)snprintf(e->dir, sizeof e->dir, "%s", path) >= sizeof e->dir)
      st = hsr_error(HSR_ERR_INVALID, "safetensors: the directory '%.64s...' is too long a path", path);
    struct stat sb;
    if (st == HSR_OK && !stat(path, &sb) && !S_ISDIR(sb.st_mode))
      st = hsr_error(HSR_ERR_INVALID, "safetensors: '%s' is not a directory (sharded weights are a directory)", path);
    if (st == HSR_OK) e->fmt = &ckpt_format_hf;
  }
  e->at = (ckpt_commit_at){.dir = e->dir, .name = e->base};
  if (st == HSR_OK && e->fmt) st = ckpt_commit_prepare(&e->at, e->fmt, e);
  if (st == HSR_OK && e->fmt) st = open_shard(e);
  if (st == HSR_OK && e->fmt) st = advance(e);
  if (st != HSR_OK) {
    ckpt_export_abort(e);
    return st;
  }
  *out = e;
  return HSR_OK;
}

hsr_status ckpt_export_write(ckpt_export *e, const void *data, size_t bytes) {
  if (!e || (bytes && !data)) return hsr_error(HSR_ERR_INVALID, "ckpt_export_write: NULL argument");
  if (e->place) return st_write(e->place, data, bytes);
  const char *p = data;
  while (bytes) {
    if (!e->w || (e->left == 0 && e->cur + 1 >= e->nshards))
      return hsr_error(HSR_ERR_INVALID, "safetensors '%s': %zu bytes more than the tensors hold", e->label, bytes);
    size_t k = bytes < e->left ? bytes : (size_t)e->left;
    HSR_CHECK(st_write(e->w, p, k));
    e->left -= k, p += k, bytes -= k;
    HSR_CHECK(advance(e));
  }
  return HSR_OK;
}

hsr_status ckpt_export_finish(ckpt_export *e) {
  if (!e) return hsr_error(HSR_ERR_INVALID, "ckpt_export_finish: NULL export");
  hsr_status st = HSR_OK;
  if (e->place) {
    st = st_finish(e->place);
    e->place = NULL;
  } else if (e->left || e->cur + 1 != e->nshards || e->next_t != e->n) {
    st = hsr_error(HSR_ERR_INVALID, "safetensors '%s': finished before every tensor's bytes were written",
                   e->fmt == &ckpt_format_hf ? e->dir : e->label);
  } else {
    st = close_shard(e);
    int committed = 0;
    if (st == HSR_OK) st = ckpt_commit_run(&e->at, e->fmt, e, &committed);
    if (committed) e->fmt = NULL; /* nothing staged is left to discard */
  }
  if (st != HSR_OK) {
    ckpt_export_abort(e);
    return st;
  }
  export_free(e);
  return HSR_OK;
}
