/* Hugging Face's sharded safetensors layout, written: the shard size, the
 * plan (which tensors go to which file), the files' names and the index's
 * text (runtime/io/safetensors_sharded.h). Writing the files and committing
 * them is the checkpoint room's (runtime/ckpt/ckpt_export.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void st_shard_name(int k, int nshards, char *buf, size_t len) {
  if (nshards == 1)
    snprintf(buf, len, "%s", HSR_ST_SINGLE_NAME);
  else
    snprintf(buf, len, "model-%05d-of-%05d.safetensors", k + 1, nshards);
}

/* A shard file name of an earlier export: model-NNNNN-of-NNNNN.safetensors. */
int st_shard_like(const char *s) {
  static const char pat[] = "model-#####-of-#####.safetensors";
  if (strlen(s) != sizeof pat - 1) return 0;
  for (size_t i = 0; pat[i]; i++)
    if (pat[i] == '#' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i]) return 0;
  return 1;
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

hsr_status st_index_text(const st_tensor *t, const int *shard, int n, int nshards, char **text, size_t *len) {
  if (n < 0 || (n && (!t || !shard)) || !text || !len) return hsr_error(HSR_ERR_INVALID, "st_index_text: bad arguments");
  *text = NULL;
  wm_row *ord = malloc(((size_t)n + 1) * sizeof *ord);
  char *buf = NULL;
  size_t blen = 0;
  FILE *f = ord ? open_memstream(&buf, &blen) : NULL;
  if (!f) {
    free(ord);
    return hsr_error(HSR_ERR_NOMEM, "safetensors index: out of memory");
  }
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    uint64_t b = st_dtype_size(t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++) b *= (uint64_t)t[i].shape[d];
    ord[i] = (wm_row){t[i].name, shard[i]}, total += b;
  }
  qsort(ord, (size_t)n, sizeof *ord, row_cmp);
  fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {", (unsigned long long)total);
  for (int i = 0; i < n; i++) {
    char name[64];
    st_shard_name(ord[i].shard, nshards, name, sizeof name);
    fputs(i ? ",\n    " : "\n    ", f);
    put_json_str(f, ord[i].name);
    fputs(": ", f);
    put_json_str(f, name);
  }
  fputs(n ? "\n  }\n}\n" : "}\n}\n", f);
  int bad = ferror(f);
  fclose(f);
  free(ord);
  if (bad || !buf) {
    free(buf);
    return hsr_error(HSR_ERR_NOMEM, "safetensors index: out of memory");
  }
  *text = buf;
  *len = blen;
  return HSR_OK;
}
