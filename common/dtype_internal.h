/* common internals: the calls of hsr/dtype.h that the library, the front ends
 * and the tests use and a program does not. Not installed, not exported
 * from libhsr.so (docs/api.md holds the contract). */
#ifndef HSR_COMMON_DTYPE_INTERNAL_H
#define HSR_COMMON_DTYPE_INTERNAL_H
#include "hsr/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element (0 for an invalid dtype). */
size_t dtype_size(hsr_dtype dt);

/* "f32", "f64", "bf16", "f16", "i32", "u8"; "?" if invalid. */
const char *dtype_name(hsr_dtype dt);

/* nccl-tests names too: float, double, bfloat16, half, int32, uint8. */
hsr_status dtype_parse(const char *s, hsr_dtype *out);
const char *redop_name(hsr_redop op); /* "sum", "avg", "max" */
hsr_status redop_parse(const char *s, hsr_redop *out);

#ifdef __cplusplus
}
#endif
#endif
