/* Per-element and per-row math of the example model, written once for the
 * CPU loops (examples/mlp.c) and the CUDA kernels (examples/mlp_cuda.cu), so
 * the CPU tests check the formulas the GPU runs. */
#ifndef HSR_EXAMPLES_MLP_MATH_H
#define HSR_EXAMPLES_MLP_MATH_H

#include "hsr/kmath.h" /* HSR_HD: host inline, or __host__ __device__ under nvcc */

#define MLP_GELU_C 0.7978845608028654f

/* tanh-approximated GELU and its derivative */
HSR_HD float mlp_gelu(float x) { return 0.5f * x * (1.0f + tanhf(MLP_GELU_C * (x + 0.044715f * x * x * x))); }
HSR_HD float mlp_gelu_grad(float x) {
  float u = MLP_GELU_C * (x + 0.044715f * x * x * x), t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * MLP_GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Softmax cross-entropy of one row of C logits with label y, over a batch of
 * n: returns the row's loss and turns z into dloss/dz = (p - onehot) / n. */
HSR_HD double mlp_ce_row(float *z, int C, int y, int n) {
  float mx = z[0];
  for (int k = 1; k < C; k++) mx = z[k] > mx ? z[k] : mx;
  double sum = 0;
  for (int k = 0; k < C; k++) sum += exp((double)(z[k] - mx));
  double loss = log(sum) - (double)(z[y] - mx);
  for (int k = 0; k < C; k++) z[k] = (float)((exp((double)(z[k] - mx)) / sum - (k == y)) / n);
  return loss;
}

/* Sum of column o of an n x cols row-major matrix, rows in order (bias gradient). */
HSR_HD float mlp_col_sum(const float *dy, int n, int cols, int o) {
  float s = 0;
  for (int i = 0; i < n; i++) s += dy[(size_t)i * cols + o];
  return s;
}

#endif
