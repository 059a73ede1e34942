/* Per-element and per-row math of the example model, written once for the
 * CPU loops (examples/mlp.c) and the CUDA kernels (examples/mlp_cuda.cu), so
 * the CPU tests check the formulas the GPU runs. */
#ifndef HSR_EXAMPLES_MLP_MATH_H
#define HSR_EXAMPLES_MLP_MATH_H

#include "hsr/kmath.h" /* HSR_HD: host inline, or __host__ __device__ under nvcc */

/* tanh-approximated GELU and its derivative: the layer kernels' formula
 * (hsr_kernels_gelu runs it), named here for the model's tests */
HSR_HD float mlp_gelu(float x) { return hsr_km_gelu(x); }
HSR_HD float mlp_gelu_grad(float x) { return hsr_km_gelu_grad(x); }

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

#endif
