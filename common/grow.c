/* The growable array (grow.h). */
#include <limits.h>
#include <stdlib.h>

#include "grow.h"

hsr_status grow_array(void *arr, int *cap, int n, size_t elem, int first, const char *what) {
  if (n < *cap) return HSR_OK;
  if (*cap > INT_MAX / 2) return hsr_error(HSR_ERR_NOMEM, "%s: more than %d entries", what, INT_MAX / 2);
  int c = *cap ? 2 * *cap : (first > 0 ? first : 16);
  while (c <= n) c *= 2;
  void **p = arr;
  void *np = realloc(*p, (size_t)c * elem);
  if (!np) return hsr_error(HSR_ERR_NOMEM, "%s: out of memory for %d entries", what, c);
  *p = np;
  *cap = c;
  return HSR_OK;
}
