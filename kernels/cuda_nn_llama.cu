// CUDA kernels of the Llama-style model's layers over the kmath.h formulas
// (the CPU loops of nn_llama.c call the same functions): a thread per row
// for RMSNorm, column sums a thread per column adding rows in order (no
// atomics), grid-stride maps for SwiGLU, a thread per (row, head) for RoPE.
#include <cuda_runtime.h>

#include "cuda_launch.cuh"
#include "nn_llama_internal.h"

__global__ void k_rmsnorm(size_t rows, int C, const float *x, const float *w, float eps, float *y, float *rstd) {
  KC_FOR(r, rows) hsr_km_rmsnorm_row(x + r * C, w, y + r * C, C, eps, &rstd[r]);
}

extern "C" hsr_status kc_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps,
                                 float *y, float *rstd) {
  k_rmsnorm<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)C, x, w, eps, y, rstd);
  return kc_launched("rmsnorm");
}

__global__ void k_rmsnorm_bwd_dx(size_t rows, int C, const float *dy, const float *x, const float *w, const float *rstd,
                                 float *dx) {
  KC_FOR(r, rows) hsr_km_rmsnorm_bwd_row(dy + r * C, x + r * C, w, rstd[r], dx + r * C, C);
}

// dw: a thread per column, rows in order (as the host loop adds them)
__global__ void k_rmsnorm_bwd_dw(size_t rows, size_t C, const float *dy, const float *x, const float *rstd, float *dw) {
  KC_FOR(c, C) {
    float a = dw[c];
    for (size_t r = 0; r < rows; r++) a += dy[r * C + c] * (x[r * C + c] * rstd[r]);
    dw[c] = a;
  }
}

extern "C" hsr_status kc_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x,
                                     const float *w, const float *rstd, float *dx, float *dw) {
  k_rmsnorm_bwd_dx<<<kc_grid(rows), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, (int)C, dy, x, w, rstd, dx);
  HSR_CHECK(kc_launched("rmsnorm_bwd"));
  k_rmsnorm_bwd_dw<<<kc_grid(C), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, C, dy, x, rstd, dw);
  return kc_launched("rmsnorm_bwd (weights)");
}

__global__ void k_swiglu(size_t n, const float *g, const float *u, float *y) {
  KC_FOR(i, n) y[i] = hsr_km_swiglu(g[i], u[i]);
}

__global__ void k_swiglu_bwd(size_t n, const float *g, const float *u, const float *dy, float *dg, float *du) {
  KC_FOR(i, n) {
    float a, b;
    hsr_km_swiglu_bwd(g[i], u[i], dy[i], &a, &b);
    dg[i] = a, du[i] = b;
  }
}

extern "C" hsr_status kc_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y) {
  k_swiglu<<<kc_grid(n), KC_BLOCK, 0, KC_STREAM(s)>>>(n, g, u, y);
  return kc_launched("swiglu");
}

extern "C" hsr_status kc_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                                    float *du) {
  k_swiglu_bwd<<<kc_grid(n), KC_BLOCK, 0, KC_STREAM(s)>>>(n, g, u, dy, dg, du);
  return kc_launched("swiglu_bwd");
}

__global__ void k_rope_table(size_t T, int D, float theta, float *cs) {
  size_t h = (size_t)D / 2;
  KC_FOR(k, T * h) hsr_km_rope_cs((int)(k / h), (int)(k % h), D, theta, &cs[2 * k], &cs[2 * k + 1]);
}

extern "C" hsr_status kc_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs) {
  k_rope_table<<<kc_grid(T * (D / 2)), KC_BLOCK, 0, KC_STREAM(s)>>>(T, (int)D, theta, cs);
  return kc_launched("rope_table");
}

__global__ void k_rope(size_t rows, size_t T, size_t heads, int D, const float *cs, int inverse, float *x) {
  KC_FOR(k, rows * heads) {
    size_t r = k / heads;
    hsr_km_rope_row(x + k * D, 1, D, cs + (r % T) * D, inverse);
  }
}

extern "C" hsr_status kc_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs,
                              int inverse, float *x) {
  k_rope<<<kc_grid(rows * heads), KC_BLOCK, 0, KC_STREAM(s)>>>(rows, T, heads, (int)D, cs, inverse, x);
  return kc_launched("rope");
}
