/* Per-element math shared by host loops and CUDA kernels. Written once,
 * compiled for both: the CPU tests check the formulas the GPU runs.
 * (Owned by kernels/; this header is filled in by the kernels module.) */
#ifndef HSR_KMATH_H
#define HSR_KMATH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define HSR_HD __host__ __device__ __forceinline__
#else
#define HSR_HD static inline
#endif

#endif
