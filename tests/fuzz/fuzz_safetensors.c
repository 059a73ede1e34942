/* Fuzz target: a safetensors file as hsr reads it (st_open for a path, as
 * `hsr train --init`, and st_parse for bytes in memory), every tensor's
 * info and a read of its first and last bytes, every metadata pair. What one
 * accepts the other must accept too. */
#include <stdlib.h>

#include "fuzz_io.h"
#include "runtime/io/safetensors.h"

static void walk(const st_file *f) {
  for (int i = 0; i < st_count(f); i++) {
    st_info in;
    if (st_info_at(f, i, &in) != HSR_OK) continue;
    int j;
    if (st_find(f, in.name, &j) != HSR_OK || j != i) abort(); /* names are unique */
    unsigned char b[16];
    uint64_t n = in.end - in.begin, k = n < sizeof b ? n : sizeof b;
    st_read(f, i, 0, b, (size_t)k);
    if (n > k) st_read(f, i, n - k, b, (size_t)k);
    st_read(f, i, n, b, 1); /* past the end: an error, never a read */
  }
  for (int i = 0; i < st_meta_count(f); i++) {
    const char *k, *v;
    if (st_meta_at(f, i, &k, &v) == HSR_OK && st_meta(f, k) == NULL) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  st_file *a = NULL, *b = NULL;
  const char *path = fuzz_file(data, size);
  hsr_status sa = path ? st_open(path, &a) : HSR_ERR_IO;
  hsr_status sb = st_parse(data, size, "fuzz input", &b);
  if (path && (sa == HSR_OK) != (sb == HSR_OK)) abort();
  if (a) walk(a);
  if (b) walk(b);
  st_close(a);
  st_close(b);
  return 0;
}
