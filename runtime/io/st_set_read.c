/* A model's weights in one safetensors file or in Hugging Face's sharded
 * layout: locating the file a path denotes, the strict index parser and the
 * reader over every shard (runtime/io/safetensors_sharded.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/sys.h"
#include "runtime/io/safetensors_sharded.h"
#include "st_internal.h"
#include "common/common_internal.h"

typedef struct set_tensor {
  int file, idx; /* shard, its tensor */
} set_tensor;

typedef struct named {
  const char *name; /* owned by its shard's st_file */
  int i;
} named;

struct st_set {
  char *label;
  st_file **f;
  char **fname; /* plain names in the directory (the file itself without an index) */
  int nf;
  set_tensor *t;
  int n;
  named *by_name; /* the tensors sorted by name */
  uint64_t total;
};

static int is_reg(const char *p) {
  struct stat sb;
  return !stat(p, &sb) && S_ISREG(sb.st_mode);
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

hsr_status st_set_locate(const char *path, char **file, int *is_index) {
  if (!path || !*path || !file || !is_index) return hsr_error(HSR_ERR_INVALID, "st_set_locate: NULL argument");
  *file = NULL;
  *is_index = 0;
  struct stat sb;
  if (stat(path, &sb)) return hsr_error(HSR_ERR_NOT_FOUND, "'%s': %s", path, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) {
    *is_index = ends_with(path, ".json");
    *file = strdup(path);
    return *file ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  char *ix = join(path, HSR_ST_INDEX_NAME), *one = join(path, HSR_ST_SINGLE_NAME);
  hsr_status st = ix && one ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  int hi = st == HSR_OK && is_reg(ix), ho = st == HSR_OK && is_reg(one);
  if (st == HSR_OK && hi && ho)
    st = hsr_error(HSR_ERR_INVALID,
                   "directory '%s' holds both %s and %s: name the one meant (the index, or the single file)", path,
                   HSR_ST_INDEX_NAME, HSR_ST_SINGLE_NAME);
  else if (st == HSR_OK && !hi && !ho)
    st = hsr_error(HSR_ERR_INVALID,
                   "directory '%s' holds neither %s nor %s (a directory of weights holds one of them, as "
                   "save_pretrained writes it)",
                   path, HSR_ST_INDEX_NAME, HSR_ST_SINGLE_NAME);
  if (st == HSR_OK) {
    *is_index = hi;
    *file = hi ? ix : one;
    if (hi)
      ix = NULL;
    else
      one = NULL;
  }
  free(ix), free(one);
  return st;
}

void st_set_close(st_set *s) {
  if (!s) return;
  for (int i = 0; i < s->nf; i++) {
    st_close(s->f ? s->f[i] : NULL);
    free(s->fname ? s->fname[i] : NULL);
  }
  free(s->f), free(s->fname), free(s->t), free(s->by_name), free(s->label);
  free(s);
}

#define IBAD(...) return ibad(s, __VA_ARGS__)
static hsr_status ibad(const st_set *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static hsr_status ibad(const st_set *s, const char *fmt, ...) {
  char m[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  return hsr_error(HSR_ERR_INVALID, "safetensors index '%s': %s", s->label, m);
}

/* A file name the index may give: plain (no directory part), so every shard
 * lies beside the index. */
static int plain_name(const char *s) {
  return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && !strchr(s, '\\');
}

static int named_cmp(const void *a, const void *b) {
  return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* weight_map entries sorted by name, to find duplicates and look names up. */
typedef struct wm_entry {
  const char *name, *file;
  int fi; /* index into s->fname */
} wm_entry;
static int wm_cmp(const void *a, const void *b) {
  return strcmp(((const wm_entry *)a)->name, ((const wm_entry *)b)->name);
}

static const wm_entry *wm_find(const wm_entry *e, int n, const char *name) {
  wm_entry k = {name, NULL, 0};
  return bsearch(&k, e, (size_t)n, sizeof *e, wm_cmp);
}

static hsr_status same_meta(const st_set *s, int a, int b) {
  const st_file *x = s->f[a], *y = s->f[b];
  int n = st_meta_count(x);
  for (int i = 0; i < n; i++) {
    const char *k, *v, *w;
    st_meta_at(x, i, &k, &v);
    if (!(w = st_meta(y, k)) || strcmp(v, w))
      IBAD("shards '%s' and '%s' have different __metadata__ ('%s' is '%s' and %s%s%s): they are not one export",
           s->fname[a], s->fname[b], k, v, w ? "'" : "", w ? w : "absent", w ? "'" : "");
  }
  if (st_meta_count(y) != n)
    IBAD("shards '%s' and '%s' have different __metadata__ (%d and %d keys): they are not one export", s->fname[a],
         s->fname[b], n, st_meta_count(y));
  return HSR_OK;
}

/* The shards the map names, opened; every tensor where the map says. */
static hsr_status open_shards(st_set *s, const char *dir, wm_entry *e, int n) {
  const char **names = malloc(((size_t)n + 1) * sizeof *names);
  if (!names) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) names[i] = e[i].file;
  qsort(names, (size_t)n, sizeof *names, str_cmp);
  int nf = 0;
  for (int i = 0; i < n; i++)
    if (!i || strcmp(names[i], names[i - 1])) names[nf++] = names[i];
  s->f = calloc((size_t)nf + 1, sizeof *s->f);
  s->fname = calloc((size_t)nf + 1, sizeof *s->fname);
  hsr_status st = s->f && s->fname ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; st == HSR_OK && i < nf; i++, s->nf++)
    if (!(s->fname[i] = strdup(names[i]))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  free(names);
  HSR_CHECK(st);
  for (int i = 0; i < n; i++) {
    const char *k = e[i].file;
    const char *const *hit = bsearch(&k, s->fname, (size_t)s->nf, sizeof *s->fname, str_cmp);
    e[i].fi = (int)(hit - (const char *const *)s->fname);
  }
  int *count = calloc((size_t)s->nf + 1, sizeof *count);
  if (!count) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) count[e[i].fi]++;
  for (int i = 0; st == HSR_OK && i < s->nf; i++) {
    char *p = join(dir, s->fname[i]);
    const char *eg = NULL; /* a tensor the map puts there, for the message */
    for (int j = 0; j < n && !eg; j++)
      if (e[j].fi == i) eg = e[j].name;
    if (!p) {
      st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    } else if (!is_reg(p)) {
      st =
          ibad(s, "shard '%s' (the weight_map puts %d tensor%s there, e.g. '%s') is missing: '%s' %s", s->fname[i],
               count[i], count[i] == 1 ? "" : "s", eg, p, access(p, F_OK) ? "does not exist" : "is not a regular file");
    } else if ((st = st_open(p, &s->f[i])) != HSR_OK) {
      char why[1024];
      snprintf(why, sizeof why, "%s", hsr_last_error());
      st = ibad(s, "shard '%s': %s", s->fname[i], why);
    }
    free(p);
    /* every tensor of the shard is one the map puts there */
    for (int j = 0; st == HSR_OK && j < st_count(s->f[i]); j++) {
      st_info in;
      st_info_at(s->f[i], j, &in);
      const wm_entry *w = wm_find(e, n, in.name);
      if (!w)
        st = ibad(s, "shard '%s' holds tensor '%s', which the weight_map does not name", s->fname[i], in.name);
      else if (w->fi != i)
        st = ibad(s, "tensor '%s' is in shard '%s', but the weight_map puts it in '%s'", in.name, s->fname[i], w->file);
    }
    if (st == HSR_OK && i) st = same_meta(s, 0, i);
  }
  /* then the counts say whether the map names a tensor its shard lacks */
  for (int i = 0; st == HSR_OK && i < s->nf; i++)
    if (st_count(s->f[i]) != count[i])
      for (int j = 0; j < n && st == HSR_OK; j++) {
        int idx;
        if (e[j].fi == i && st_find(s->f[i], e[j].name, &idx) != HSR_OK)
          st = ibad(s, "the weight_map puts tensor '%s' in shard '%s', which does not hold it", e[j].name, s->fname[i]);
      }
  free(count);
  return st;
}

static hsr_status parse_index(st_set *s, const char *file) {
  char *text = NULL;
  size_t len = 0;
  int fd;
  struct stat sb;
  if (file_open_read("safetensors index", file, &fd) != HSR_OK) /* a FIFO is refused, not waited on */
    return HSR_ERR_IO;
  hsr_status st = HSR_OK;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
    st = ibad(s, "not a regular file");
  else if ((uint64_t)sb.st_size > HSR_ST_HEADER_MAX)
    st = ibad(s, "%lld bytes: larger than the %u-byte limit of an index", (long long)sb.st_size, HSR_ST_HEADER_MAX);
  else if (!(text = malloc((size_t)sb.st_size + 1)))
    st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  while (st == HSR_OK && len < (size_t)sb.st_size) {
    ssize_t r = read(fd, text + len, (size_t)sb.st_size - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) st = hsr_error(HSR_ERR_IO, "safetensors index '%s': read: %s", s->label, r ? strerror(errno) : "EOF");
    len += r > 0 ? (size_t)r : 0;
  }
  close(fd);
  size_t bad = 0;
  if (st == HSR_OK && !st_utf8_valid((const unsigned char *)text, len, &bad))
    st = ibad(s, "not valid UTF-8 (byte %zu)", bad);
  cJSON *root = st == HSR_OK ? cJSON_ParseWithLength(text, len) : NULL;
  free(text);
  HSR_CHECK(st);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    IBAD("not a JSON object {\"metadata\": {\"total_size\": BYTES}, \"weight_map\": {TENSOR: FILE}}");
  }
  if (json_check_finite(root, HSR_ERR_INVALID, "") != HSR_OK) { /* 1e999 reads as infinity */
    char m[512];
    snprintf(m, sizeof m, "%s", hsr_last_error() + 2);
    cJSON_Delete(root);
    return ibad(s, "%s", m);
  }
  const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *ts = NULL, *it;
  int has_total = 0;
  uint64_t total = 0;
  if (md && !cJSON_IsObject(md))
    st = ibad(s, "\"metadata\" is not an object");
  else if (md && (ts = cJSON_GetObjectItemCaseSensitive(md, "total_size")) != NULL) {
    double d = cJSON_IsNumber(ts) ? ts->valuedouble : -1;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d)
      st = ibad(s, "metadata.total_size is not a non-negative integer (bytes)");
    has_total = 1, total = (uint64_t)(d >= 0 && d <= 9007199254740992.0 ? d : 0);
  }
  if (st == HSR_OK && !cJSON_IsObject(wm)) st = ibad(s, "\"weight_map\" is missing or not an object");
  int n = st == HSR_OK ? cJSON_GetArraySize(wm) : 0, k = 0;
  wm_entry *e = st == HSR_OK ? calloc((size_t)n + 1, sizeof *e) : NULL;
  if (st == HSR_OK && !e) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  for (it = st == HSR_OK ? wm->child : NULL; it && st == HSR_OK; it = it->next, k++) {
    if (!cJSON_IsString(it))
      st = ibad(s, "weight_map['%s'] is not a file name (a string)", it->string);
    else if (!plain_name(it->valuestring))
      st = ibad(s,
                "weight_map['%s'] = '%s' is not a plain file name: every shard lies in the index's directory (no "
                "'/', no '..')",
                it->string, it->valuestring);
    else
      e[k] = (wm_entry){it->string, it->valuestring, 0};
  }
  if (st == HSR_OK && n) qsort(e, (size_t)n, sizeof *e, wm_cmp);
  for (int i = 1; st == HSR_OK && i < n; i++)
    if (!strcmp(e[i].name, e[i - 1].name))
      st = ibad(s, "the weight_map names tensor '%s' twice ('%s' and '%s')", e[i].name, e[i - 1].file, e[i].file);
  if (st == HSR_OK && n == 0) st = ibad(s, "the weight_map is empty (no tensors)");
  char *dir = st == HSR_OK ? strdup(file) : NULL;
  if (st == HSR_OK && !dir) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK) {
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = 0;
    else
      strcpy(dir, ".");
    st = open_shards(s, dir, e, n);
  }
  free(dir);
  free(e);
  cJSON_Delete(root); /* e's strings lived in it */
  if (st == HSR_OK) {
    for (int i = 0; i < s->nf; i++)
      for (int j = 0; j < st_count(s->f[i]); j++) {
        st_info in;
        st_info_at(s->f[i], j, &in);
        s->total += in.end - in.begin;
      }
    if (has_total && total != s->total)
      HSR_LOG_W("safetensors index '%s': metadata.total_size is %llu, the tensors hold %llu bytes", s->label,
                (unsigned long long)total, (unsigned long long)s->total);
  }
  return st;
}

/* The tensor list (files in name order, header order in each) and the name lookup. */
static hsr_status list_tensors(st_set *s) {
  for (int i = 0; i < s->nf; i++) s->n += st_count(s->f[i]);
  s->t = calloc((size_t)s->n + 1, sizeof *s->t);
  s->by_name = calloc((size_t)s->n + 1, sizeof *s->by_name);
  if (!s->t || !s->by_name) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  int k = 0;
  for (int i = 0; i < s->nf; i++)
    for (int j = 0; j < st_count(s->f[i]); j++, k++) {
      st_info in;
      st_info_at(s->f[i], j, &in);
      s->t[k] = (set_tensor){i, j};
      s->by_name[k] = (named){in.name, k};
    }
  qsort(s->by_name, (size_t)s->n, sizeof *s->by_name, named_cmp);
  /* a single file cannot name a tensor twice (its reader refuses); shards can */
  for (k = 1; k < s->n; k++)
    if (!strcmp(s->by_name[k].name, s->by_name[k - 1].name))
      return hsr_error(HSR_ERR_INVALID, "safetensors '%s': tensor '%s' is in two files ('%s' and '%s')", s->label,
                       s->by_name[k].name, s->fname[s->t[s->by_name[k - 1].i].file],
                       s->fname[s->t[s->by_name[k].i].file]);
  return HSR_OK;
}

hsr_status st_set_open(const char *path, st_set **out) {
  if (!path || !out) return hsr_error(HSR_ERR_INVALID, "st_set_open: NULL argument");
  *out = NULL;
  char *file = NULL;
  int is_index = 0;
  HSR_CHECK(st_set_locate(path, &file, &is_index));
  st_set *s = calloc(1, sizeof *s);
  hsr_status st = s && (s->label = strdup(file)) ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "out of memory");
  if (st == HSR_OK && is_index) {
    st = parse_index(s, file);
  } else if (st == HSR_OK) {
    s->f = calloc(1, sizeof *s->f);
    s->fname = calloc(1, sizeof *s->fname);
    if (!s->f || !s->fname || !(s->fname[0] = strdup(file))) st = hsr_error(HSR_ERR_NOMEM, "out of memory");
    if (st == HSR_OK) s->nf = 1, st = st_open(file, &s->f[0]);
    for (int j = 0; st == HSR_OK && j < st_count(s->f[0]); j++) {
      st_info in;
      st_info_at(s->f[0], j, &in);
      s->total += in.end - in.begin;
    }
  }
  if (st == HSR_OK) st = list_tensors(s);
  free(file);
  if (st != HSR_OK) {
    st_set_close(s);
    return st;
  }
  *out = s;
  return HSR_OK;
}

int st_set_count(const st_set *s) { return s ? s->n : 0; }

hsr_status st_set_info_at(const st_set *s, int i, st_info *out) {
  if (!s || !out || i < 0 || i >= s->n)
    return hsr_error(HSR_ERR_INVALID, "st_set_info_at: tensor %d of %d", i, s ? s->n : 0);
  return st_info_at(s->f[s->t[i].file], s->t[i].idx, out);
}

hsr_status st_set_find(const st_set *s, const char *name, int *index) {
  if (!s || !name || !index) return hsr_error(HSR_ERR_INVALID, "st_set_find: NULL argument");
  named k = {name, 0};
  const named *hit = s->n ? bsearch(&k, s->by_name, (size_t)s->n, sizeof k, named_cmp) : NULL;
  if (hit) {
    *index = hit->i;
    return HSR_OK;
  }
  return hsr_error(HSR_ERR_NOT_FOUND, "safetensors '%s': no tensor '%s'", s->label, name);
}

hsr_status st_set_read(const st_set *s, int i, uint64_t offset, void *dst, size_t bytes) {
  if (!s || i < 0 || i >= s->n) return hsr_error(HSR_ERR_INVALID, "st_set_read: tensor %d of %d", i, s ? s->n : 0);
  return st_read(s->f[s->t[i].file], s->t[i].idx, offset, dst, bytes);
}

const char *st_set_meta(const st_set *s, const char *key) { return s && s->nf ? st_meta(s->f[0], key) : NULL; }

int st_set_meta_count(const st_set *s) { return s && s->nf ? st_meta_count(s->f[0]) : 0; }

hsr_status st_set_meta_at(const st_set *s, int i, const char **key, const char **value) {
  if (!s || !s->nf) return hsr_error(HSR_ERR_INVALID, "st_set_meta_at: no file");
  return st_meta_at(s->f[0], i, key, value);
}

int st_set_num_files(const st_set *s) { return s ? s->nf : 0; }

const char *st_set_file_of(const st_set *s, int i) {
  return s && i >= 0 && i < s->n ? s->fname[s->t[i].file] : NULL;
}

uint64_t st_set_total_bytes(const st_set *s) { return s ? s->total : 0; }

const char *st_set_label(const st_set *s) { return s ? s->label : NULL; }
