/* Fuzz target: a checkpoint's program state ("program" of the manifest) as
 * ckpt_state_from_json reads it, and its round trip through JSON. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_io.h"
#include "hsr/ckpt.h"
#include "runtime/ckpt/ckpt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *t = malloc(size + 1);
  if (!t) return 0;
  memcpy(t, data, size);
  t[size] = '\0';
  hsr_ckpt_state *s = NULL, *s2 = NULL;
  if (hsr_ckpt_state_create(&s) == HSR_OK && ckpt_state_from_json(s, t) == HSR_OK) {
    char *j = NULL;
    if (ckpt_state_json(s, &j) == HSR_OK && hsr_ckpt_state_create(&s2) == HSR_OK) {
      if (ckpt_state_from_json(s2, j) != HSR_OK) abort(); /* what it wrote, it must read */
      char *j2 = NULL;
      if (ckpt_state_json(s2, &j2) == HSR_OK && strcmp(j, j2) != 0) abort(); /* and the same again */
      free(j2);
    }
    free(j);
  }
  hsr_ckpt_state_free(s2);
  hsr_ckpt_state_free(s);
  free(t);
  return 0;
}
