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

#ifdef __cplusplus
}
#endif
#endif
