// CUDA kernel of the example model's loss, over the formula in mlp_math.h
// (the CPU model uses the same function); bias, GELU and their backward are
// the layer kernels of hsr/kernels.h.
#include <cuda_runtime.h>

#include "mlp_cuda.h"
#include "mlp_math.h"

static hsr_status launched(const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return hsr_error(HSR_ERR_CUDA, "model kernel %s: %s", what, cudaGetErrorString(e));
  return HSR_OK;
}

static unsigned blocks_for(size_t n, unsigned threads) {
  size_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

__global__ void k_ce(int n, int C, float *z, const int *y, double *rowloss) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x)
    rowloss[r] = mlp_ce_row(z + (size_t)r * C, C, y[r], n);
}


extern "C" hsr_status mlp_cuda_ce(void *stream, int n, int C, float *z, const int *y, double *rowloss) {
  if (n <= 0) return HSR_OK;
  k_ce<<<blocks_for((size_t)n, 128), 128, 0, (cudaStream_t)stream>>>(n, C, z, y, rowloss);
  return launched("softmax_ce");
}
