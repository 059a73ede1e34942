/* Fuzz target: a checkpoint manifest as ckpt_open reads it (`hsr ckpt
 * inspect`, resume), then every getter. The manifest checks its own crc32:
 * the target writes the right one into an input that has the field, so the
 * fuzzer gets past it to the structure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz_io.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"

static void fix_crc(char *t, size_t n) {
  const char *key = "\"manifest_crc32\"";
  char *k = memmem(t, n, key, strlen(key));
  if (!k) return;
  char *q = memchr(k + strlen(key), '"', n - (size_t)(k + strlen(key) - t));
  if (!q || (size_t)(q - t) + 9 >= n || q[9] != '"') return;
  char *d = q + 1, saved[8];
  memcpy(saved, d, 8);
  memset(d, '0', 8);
  uLong c = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)t, (uInt)n);
  char hex[9];
  snprintf(hex, sizeof hex, "%08lx", c & 0xffffffffUL);
  memcpy(d, hex, 8);
}

/* The checkpoint directory (a manifest needs one), removed at exit. */
static char dir[256], file[300];
static void remove_dir(void) {
  unlink(file);
  rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "%s/hsr-fuzz-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 0;
    snprintf(file, sizeof file, "%s/manifest.json", dir);
    atexit(remove_dir);
  }
  char *t = malloc(size + 1);
  if (!t) return 0;
  memcpy(t, data, size);
  t[size] = '\0';
  fix_crc(t, size);
  FILE *f = fopen(file, "wb");
  if (!f) {
    free(t);
    return 0;
  }
  fwrite(t, 1, size, f);
  fclose(f);
  free(t);
  ckpt_handle *c = NULL;
  if (ckpt_open(dir, &c) != HSR_OK) return 0;
  ckpt_info info;
  ckpt_get_info(c, &info);
  for (int i = 0; i < ckpt_num_tensors(c); i++) {
    ckpt_tensor_info tt;
    if (ckpt_tensor_at(c, i, &tt) == HSR_OK) {
      int j;
      ckpt_find(c, tt.name, &j);
      float x[4];
      ckpt_read(c, i, HSR_CKPT_MASTER, 0, tt.numel < 4 ? tt.numel : 4, x); /* the data file is absent */
    }
  }
  hsr_ckpt_state *p = NULL;
  if (hsr_ckpt_state_create(&p) == HSR_OK) {
    ckpt_get_program(c, p);
    hsr_ckpt_state_free(p);
  }
  ckpt_close(c);
  return 0;
}
