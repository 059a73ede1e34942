/* Element types and reduction operators shared by every layer. */
#ifndef HSR_DTYPE_H
#define HSR_DTYPE_H

#include <stddef.h>

#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_dtype { HSR_F32 = 0, HSR_F64, HSR_BF16, HSR_F16, HSR_I32, HSR_U8, HSR_DTYPE_COUNT } hsr_dtype;

typedef enum hsr_redop { HSR_SUM = 0, HSR_AVG, HSR_MAX, HSR_REDOP_COUNT } hsr_redop;

/* Bytes per element (0 for an invalid dtype). */
HSR_API size_t hsr_dtype_size(hsr_dtype dt);
/* "f32", "f64", "bf16", "f16", "i32", "u8"; "?" if invalid. */
HSR_API const char *hsr_dtype_name(hsr_dtype dt);
/* nccl-tests names too: float, double, bfloat16, half, int32, uint8. */
HSR_API hsr_status hsr_dtype_parse(const char *s, hsr_dtype *out);
HSR_API const char *hsr_redop_name(hsr_redop op); /* "sum", "avg", "max" */
HSR_API hsr_status hsr_redop_parse(const char *s, hsr_redop *out);

#ifdef __cplusplus
}
#endif
#endif
