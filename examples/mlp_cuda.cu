// CUDA kernels of the example model: thin grid-stride loops over the
// formulas in mlp_math.h (the CPU model uses the same functions).
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

__global__ void k_bias_add(size_t total, int out, const float *b, float *y) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
    y[i] += b[i % (size_t)out];
}

__global__ void k_gelu(size_t n, const float *a, float *g) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    g[i] = mlp_gelu(a[i]);
}

__global__ void k_gelu_bwd(size_t n, const float *a, float *dg) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dg[i] *= mlp_gelu_grad(a[i]);
}

// One thread per column, rows summed in order (as the CPU loop does).
__global__ void k_col_sum_add(int n, int cols, const float *dy, float *db) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < cols; o += gridDim.x * blockDim.x)
    db[o] += mlp_col_sum(dy, n, cols, o);
}

__global__ void k_ce(int n, int C, float *z, const int *y, double *rowloss) {
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x)
    rowloss[r] = mlp_ce_row(z + (size_t)r * C, C, y[r], n);
}

#define STREAM(s) ((cudaStream_t)hsr_stream_native(s))

extern "C" hsr_status mlp_cuda_bias_add(hsr_stream *s, int n, int out, const float *b, float *y) {
  size_t total = (size_t)n * (size_t)out;
  if (!total) return HSR_OK;
  k_bias_add<<<blocks_for(total, 256), 256, 0, STREAM(s)>>>(total, out, b, y);
  return launched("bias_add");
}

extern "C" hsr_status mlp_cuda_gelu(hsr_stream *s, size_t n, const float *a, float *g) {
  if (!n) return HSR_OK;
  k_gelu<<<blocks_for(n, 256), 256, 0, STREAM(s)>>>(n, a, g);
  return launched("gelu");
}

extern "C" hsr_status mlp_cuda_gelu_bwd(hsr_stream *s, size_t n, const float *a, float *dg) {
  if (!n) return HSR_OK;
  k_gelu_bwd<<<blocks_for(n, 256), 256, 0, STREAM(s)>>>(n, a, dg);
  return launched("gelu_bwd");
}

extern "C" hsr_status mlp_cuda_col_sum_add(hsr_stream *s, int n, int cols, const float *dy, float *db) {
  if (cols <= 0) return HSR_OK;
  k_col_sum_add<<<blocks_for((size_t)cols, 128), 128, 0, STREAM(s)>>>(n, cols, dy, db);
  return launched("col_sum_add");
}

extern "C" hsr_status mlp_cuda_ce(hsr_stream *s, int n, int C, float *z, const int *y, double *rowloss) {
  if (n <= 0) return HSR_OK;
  k_ce<<<blocks_for((size_t)n, 128), 128, 0, STREAM(s)>>>(n, C, z, y, rowloss);
  return launched("softmax_ce");
}
