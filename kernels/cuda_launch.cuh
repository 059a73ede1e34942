// kernels/ private (CUDA): what every kernel file's launches share: the
// launch check, the grid for a number of items, the native stream, and the
// grid-stride loop.
#ifndef HSR_KERNELS_CUDA_LAUNCH_CUH
#define HSR_KERNELS_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

#include "internal.h"

#define KC_BLOCK 128

static inline hsr_status kc_launched(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return hsr_error(HSR_ERR_CUDA, "%s launch: %s", what, cudaGetErrorString(e));
  return HSR_OK;
}

static inline unsigned kc_grid(size_t items) {
  size_t g = (items + KC_BLOCK - 1) / KC_BLOCK;
  return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

#define KC_STREAM(s) ((cudaStream_t)(s)->native)
#define KC_FOR(i, n) \
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#endif
