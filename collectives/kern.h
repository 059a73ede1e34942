/* Host data movement of the collectives (kern.c): a streaming copy and
 * n-input reductions. Knows nothing of communicators. */
#ifndef HSR_COLL_KERN_H
#define HSR_COLL_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/dtype.h"

void coll_copy(void *dst, const void *src, size_t n, int have_avx2);
/* out = op over ins[0..nin) (in that order); AVG divides the sum by `divisor`.
 * `out` may alias ins[k] element for element. */
void coll_reduce(hsr_dtype dt, hsr_redop op, void *out, const void **ins, int nin, size_t count, int divisor);
float coll_half_to_f32(hsr_dtype dt, uint16_t h);
uint16_t coll_f32_to_half(hsr_dtype dt, float f);

#endif
