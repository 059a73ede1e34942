// CUDA kernels of the transformer layers: one thread per row over the
// kmath.h row formulas (the CPU loops call the same functions), grid-stride
// maps, and column sums with one thread per column adding rows in order
// (deterministic, no atomics). Launched on the caller's stream.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_launch.cuh"
#include "nn_internal.h"

extern "C" hsr_status kc_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                                      float alpha, const float *a, size_t lda, size_t stride_a, const float *b,
                                      size_t ldb, size_t stride_b, float beta, float *c, size_t ldc, size_t stride_c,
                                      size_t count) {
  void *hv = NULL;
  HSR_CHECK(kc_blas(s, &hv));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  cublasStatus_t st = cublasSgemmStridedBatched((cublasHandle_t)hv, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                                                (int)ldb, (long long)stride_b, a, (int)lda, (long long)stride_a, &beta,
                                                c, (int)ldc, (long long)stride_c, (int)count);
  if (st != CUBLAS_STATUS_SUCCESS)
    return hsr_error(HSR_ERR_CUDA, "cublasSgemmStridedBatched: %s", cublasGetStatusString(st));
  return HSR_OK;
}

__global__ void k_layernorm(size_t rows, int C, const float *x, const float *w, const float *b, float eps, float *y,
                            float *mean, float *rstd) {
  KC_FOR(r, rows) hsr_km_layernorm_row(x + r * C, w, b, y + r * C, C, eps, &mean[r], &rstd[r]);
}

extern "C" hsr_status kc_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b,
                                   float eps, float *y, float *mean, float *rstd) {
  k_layernorm<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)C, x, w, b, eps, y, mean, rstd);
  return kc_launched("layernorm");
}

__global__ void k_layernorm_bwd_dx(size_t rows, int C, const float *dy, const float *x, const float *w,
                                   const float *mean, const float *rstd, float *dx) {
  KC_FOR(r, rows) hsr_km_layernorm_bwd_row(dy + r * C, x + r * C, w, mean[r], rstd[r], dx + r * C, C);
}

// dw, db: a thread per column, rows in order (as the host loop adds them)
__global__ void k_layernorm_bwd_dw(size_t rows, size_t C, const float *dy, const float *x, const float *mean,
                                   const float *rstd, float *dw, float *db) {
  KC_FOR(c, C) {
    float a = dw[c], bb = db[c];
    for (size_t r = 0; r < rows; r++) {
      float g = dy[r * C + c];
      a += g * ((x[r * C + c] - mean[r]) * rstd[r]);
      bb += g;
    }
    dw[c] = a;
    db[c] = bb;
  }
}

extern "C" hsr_status kc_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x,
                                       const float *w, const float *mean, const float *rstd, float *dx, float *dw,
                                       float *db) {
  k_layernorm_bwd_dx<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)C, dy, x, w, mean, rstd, dx);
  HSR_CHECK(kc_launched("layernorm_bwd"));
  k_layernorm_bwd_dw<<<kc_grid(C), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, C, dy, x, mean, rstd, dw, db);
  return kc_launched("layernorm_bwd (weights)");
}

__global__ void k_gelu(size_t n, const float *x, float *y) { KC_FOR(i, n) y[i] = hsr_km_gelu(x[i]); }

__global__ void k_gelu_bwd(size_t n, const float *x, const float *dy, float *dx) {
  KC_FOR(i, n) dx[i] = dy[i] * hsr_km_gelu_grad(x[i]);
}

extern "C" hsr_status kc_gelu(hsr_stream *s, size_t n, const float *x, float *y) {
  k_gelu<<<kc_grid(n), KC_BLOCK, 0, KC_STREAM(s)>>>(n, x, y);
  return kc_launched("gelu");
}

extern "C" hsr_status kc_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx) {
  k_gelu_bwd<<<kc_grid(n), KC_BLOCK, 0, KC_STREAM(s)>>>(n, x, dy, dx);
  return kc_launched("gelu_bwd");
}

__global__ void k_bias_add(size_t total, size_t cols, const float *b, float *y) {
  KC_FOR(i, total) y[i] += b[i % cols];
}

__global__ void k_bias_bwd(size_t rows, size_t cols, const float *dy, float *db) {
  KC_FOR(c, cols) {
    float a = db[c];
    for (size_t r = 0; r < rows; r++) a += dy[r * cols + c];
    db[c] = a;
  }
}

extern "C" hsr_status kc_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y) {
  k_bias_add<<<kc_grid(rows * cols), KC_BLOCK, 0, KC_STREAM(s)>>>(rows * cols, cols, b, y);
  return kc_launched("bias_add");
}

extern "C" hsr_status kc_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db) {
  k_bias_bwd<<<kc_grid(cols), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, cols, dy, db);
  return kc_launched("bias_bwd");
}

__global__ void k_softmax_causal(size_t rows, int T, float scale, const float *x, float *p) {
  KC_FOR(r, rows) hsr_km_softmax_causal_row(x + r * T, p + r * T, T, (int)(r % T), scale);
}

__global__ void k_softmax_causal_bwd(size_t rows, int T, float scale, const float *p, const float *dp, float *dx) {
  KC_FOR(r, rows) hsr_km_softmax_causal_bwd_row(p + r * T, dp + r * T, dx + r * T, T, (int)(r % T), scale);
}

extern "C" hsr_status kc_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p) {
  k_softmax_causal<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)T, scale, x, p);
  return kc_launched("softmax_causal");
}

extern "C" hsr_status kc_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p,
                                            const float *dp, float *dx) {
  k_softmax_causal_bwd<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)T, scale, p, dp, dx);
  return kc_launched("softmax_causal_bwd");
}

// A target outside [0, V) gives a NaN loss (the host checks its own; device memory is not read back here).
__global__ void k_xent(size_t rows, int V, float *z, const int32_t *targets, float grad_scale, double *rowloss) {
  KC_FOR(r, rows) {
    int t = targets[r];
    if (t < 0 || t >= V)
      rowloss[r] = __longlong_as_double(0x7ff8000000000000ll);
    else
      rowloss[r] = hsr_km_xent_row(z + r * (size_t)V, V, t, grad_scale);
  }
}

extern "C" hsr_status kc_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                              double *rowloss) {
  k_xent<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)V, z, targets, grad_scale, rowloss);
  return kc_launched("xent");
}

// Tokens outside [0, V) give NaN rows.
__global__ void k_embed(size_t n, size_t T, size_t C, size_t V, const int32_t *tok, const float *wte, const float *wpe,
                        float *out) {
  KC_FOR(i, n * C) {
    size_t p = i / C, c = i % C;
    int t = tok[p];
    out[i] = (t < 0 || (size_t)t >= V) ? __int_as_float(0x7fc00000) : wte[(size_t)t * C + c] + wpe[(p % T) * C + c];
  }
}

// A thread per channel, positions in order (the host loop's order): no atomics.
__global__ void k_embed_bwd(size_t n, size_t T, size_t C, size_t V, const int32_t *tok, const float *dout, float *dwte,
                            float *dwpe) {
  KC_FOR(c, C) {
    for (size_t p = 0; p < n; p++) {
      int t = tok[p];
      if (t < 0 || (size_t)t >= V) continue;
      float g = dout[p * C + c];
      dwte[(size_t)t * C + c] += g;
      dwpe[(p % T) * C + c] += g;
    }
  }
}

extern "C" hsr_status kc_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens,
                               const float *wte, const float *wpe, float *out) {
  k_embed<<<kc_grid(B * T * C), KC_BLOCK, 0, KC_STREAM(s)>>>(B * T, T, C, V, tokens, wte, wpe, out);
  return kc_launched("embed");
}

extern "C" hsr_status kc_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens,
                                   const float *dout, float *dwte, float *dwpe) {
  k_embed_bwd<<<kc_grid(C), KC_BLOCK, 0, KC_STREAM(s)>>>(B * T, T, C, V, tokens, dout, dwte, dwpe);
  return kc_launched("embed_bwd");
}
