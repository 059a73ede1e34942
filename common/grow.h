/* common/ INTERNAL: the growable array every module's lists use. */
#ifndef HSR_COMMON_GROW_H
#define HSR_COMMON_GROW_H

#include <stddef.h>

#include "hsr/common.h"

/* Room for element n of the array at *(void **)arr of *cap elements of elem
 * bytes: doubles the capacity (from `first`) when n has reached it. On
 * failure the array is unchanged and the error names `what`. */
hsr_status grow_array(void *arr, int *cap, int n, size_t elem, int first, const char *what);

#endif
