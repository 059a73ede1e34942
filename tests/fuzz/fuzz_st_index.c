/* Fuzz target: Hugging Face's model.safetensors.index.json as st_set_open
 * reads it (--init DIR, hsr eval, hsr sample), beside two real shards
 * (model-00001-of-00002.safetensors: "a" F32 [2], "b" I32 [1];
 * model-00002-of-00002.safetensors: "c" U8 [3]), then every getter and a
 * read of every tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_io.h"
#include "runtime/io/safetensors_sharded.h"

static int shard(const char *dir, const char *name, const st_tensor *t, int n, size_t bytes) {
  char p[160];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  st_kv meta[1] = {{"hsr.model", "fuzz"}};
  st_writer *w;
  static const unsigned char data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  if (st_create(p, t, n, meta, 1, &w) != HSR_OK) return 1;
  if (st_write(w, data, bytes) != HSR_OK) {
    st_abort(w);
    return 1;
  }
  return st_finish(w) != HSR_OK;
}

static char dir[64], file[128];

static void cleanup(void) {
  char p[160];
  static const char *const names[3] = {HSR_ST_INDEX_NAME, "model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors"};
  for (int i = 0; i < 3; i++) snprintf(p, sizeof p, "%s/%s", dir, names[i]), unlink(p);
  rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    snprintf(dir, sizeof dir, "/tmp/hsr-fuzz-st-index-XXXXXX");
    if (!mkdtemp(dir)) return 0;
    atexit(cleanup);
    snprintf(file, sizeof file, "%s/%s", dir, HSR_ST_INDEX_NAME);
    st_tensor one[2] = {{"a", "F32", 1, {2}}, {"b", "I32", 1, {1}}}, two[1] = {{"c", "U8", 1, {3}}};
    if (shard(dir, "model-00001-of-00002.safetensors", one, 2, 12) ||
        shard(dir, "model-00002-of-00002.safetensors", two, 1, 3))
      return 0;
    ready = 1;
  }
  FILE *f = fopen(file, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  st_set *s = NULL;
  if (st_set_open(dir, &s) != HSR_OK) return 0;
  unsigned char buf[16];
  for (int i = 0; i < st_set_count(s); i++) {
    st_info in;
    int j;
    if (st_set_info_at(s, i, &in) != HSR_OK) continue;
    st_set_find(s, in.name, &j);
    st_set_file_of(s, i);
    if (in.end - in.begin <= sizeof buf) st_set_read(s, i, 0, buf, (size_t)(in.end - in.begin));
  }
  for (int i = 0; i < st_set_meta_count(s); i++) {
    const char *k, *v;
    st_set_meta_at(s, i, &k, &v);
  }
  st_set_meta(s, "hsr.model");
  st_set_total_bytes(s);
  st_set_close(s);
  return 0;
}
