/* The transformer layers of the GPT example: argument checks, then the host
 * loop over the kmath.h row formulas (the kh_* CPU twins) or the kind's launch.
 * Built with -O3 -fno-math-errno (CMakeLists.txt) so the maps vectorise. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn_internal.h"

hsr_status hsr_kernels_gemm_batched(hsr_device *d, hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n,
                                    size_t k, float alpha, const float *a, size_t lda, size_t stride_a, const float *b,
                                    size_t ldb, size_t stride_b, float beta, float *c, size_t ldc, size_t stride_c,
                                    size_t count) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (count == 0 || m == 0 || n == 0) return HSR_OK;
  if (count > INT_MAX) return hsr_error(HSR_ERR_INVALID, "gemm_batched: count %zu exceeds %d", count, INT_MAX);
  /* the first product checks sizes and leading dimensions for all */
  HSR_CHECK(hsr_kernels_gemm(d, s, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  if (count == 1) return HSR_OK;
  return d->k->gemm_batched(s, trans_a, trans_b, m, n, k, alpha, a + stride_a, lda, stride_a, b + stride_b, ldb,
                            stride_b, beta, c + stride_c, ldc, stride_c, count - 1);
}

hsr_status kh_gemm_batched(hsr_stream *s, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                           const float *a, size_t lda, size_t stride_a, const float *b, size_t ldb, size_t stride_b,
                           float beta, float *c, size_t ldc, size_t stride_c, size_t count) {
  (void)s;
  for (size_t i = 0; i < count; i++)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                (int)k, alpha, a + i * stride_a, (int)lda, b + i * stride_b, (int)ldb, beta, c + i * stride_c,
                (int)ldc);
  return HSR_OK;
}

/* The host loops, built for AVX2 and for the baseline (HSR_KM_CLONES). */
HSR_KM_CLONES static void ln_host(size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                                  float *y, float *mean, float *rstd) {
  for (size_t r = 0; r < rows; r++) hsr_km_layernorm_row(x + r * C, w, b, y + r * C, (int)C, eps, &mean[r], &rstd[r]);
}

HSR_KM_CLONES static void ln_bwd_host(size_t rows, size_t C, const float *dy, const float *x, const float *w,
                                      const float *mean, const float *rstd, float *dx, float *dw, float *db) {
  for (size_t r = 0; r < rows; r++) {
    const float *dyr = dy + r * C, *xr = x + r * C;
    float m = mean[r], rs = rstd[r];
    hsr_km_layernorm_bwd_row(dyr, xr, w, m, rs, dx + r * C, (int)C);
    for (size_t i = 0; i < C; i++) {
      dw[i] += dyr[i] * ((xr[i] - m) * rs);
      db[i] += dyr[i];
    }
  }
}

HSR_KM_CLONES static void gelu_host(size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = hsr_km_gelu(x[i]);
}

HSR_KM_CLONES static void gelu_bwd_host(size_t n, const float *x, const float *dy, float *dx) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * hsr_km_gelu_grad(x[i]);
}

HSR_KM_CLONES static void bias_host(size_t rows, size_t cols, const float *b, float *y, const float *dy, float *db) {
  for (size_t r = 0; r < rows; r++) {
    if (y) {
      float *yr = y + r * cols;
      for (size_t c = 0; c < cols; c++) yr[c] += b[c];
    } else {
      const float *dr = dy + r * cols;
      for (size_t c = 0; c < cols; c++) db[c] += dr[c];
    }
  }
}

HSR_KM_CLONES static void softmax_host(size_t rows, size_t T, float scale, const float *x, float *p, const float *dp,
                                       float *dx) {
  for (size_t r = 0; r < rows; r++) {
    if (!dp)
      hsr_km_softmax_causal_row(x + r * T, p + r * T, (int)T, (int)(r % T), scale);
    else
      hsr_km_softmax_causal_bwd_row(p + r * T, dp + r * T, dx + r * T, (int)T, (int)(r % T), scale);
  }
}

HSR_KM_CLONES static void xent_host(size_t rows, size_t V, float *z, const int32_t *t, float scale, double *rowloss) {
  for (size_t r = 0; r < rows; r++) rowloss[r] = hsr_km_xent_row(z + r * V, (int)V, t[r], scale);
}

hsr_status hsr_kernels_layernorm(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *x, const float *w,
                                 const float *b, float eps, float *y, float *mean, float *rstd) {
  static const char fn[] = "layernorm";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(C, "C", fn));
  if (!(eps > 0.0f)) return hsr_error(HSR_ERR_INVALID, "layernorm: eps %g must be > 0", eps);
  if (rows == 0 || C == 0) return HSR_OK;
  NEED(x, fn);
  NEED(w, fn);
  NEED(b, fn);
  NEED(y, fn);
  NEED(mean, fn);
  NEED(rstd, fn);
  return d->k->layernorm(s, rows, C, x, w, b, eps, y, mean, rstd);
}

hsr_status kh_layernorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, const float *b, float eps,
                        float *y, float *mean, float *rstd) {
  (void)s;
  ln_host(rows, C, x, w, b, eps, y, mean, rstd);
  return HSR_OK;
}

hsr_status hsr_kernels_layernorm_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *dy,
                                     const float *x, const float *w, const float *mean, const float *rstd, float *dx,
                                     float *dw, float *db) {
  static const char fn[] = "layernorm_bwd";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(C, "C", fn));
  if (rows == 0 || C == 0) return HSR_OK;
  NEED(dy, fn);
  NEED(x, fn);
  NEED(w, fn);
  NEED(mean, fn);
  NEED(rstd, fn);
  NEED(dx, fn);
  NEED(dw, fn);
  NEED(db, fn);
  return d->k->layernorm_bwd(s, rows, C, dy, x, w, mean, rstd, dx, dw, db);
}

hsr_status kh_layernorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                            const float *mean, const float *rstd, float *dx, float *dw, float *db) {
  (void)s;
  ln_bwd_host(rows, C, dy, x, w, mean, rstd, dx, dw, db);
  return HSR_OK;
}

hsr_status hsr_kernels_gelu(hsr_device *d, hsr_stream *s, size_t n, const float *x, float *y) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (n == 0) return HSR_OK;
  NEED(x, "gelu");
  NEED(y, "gelu");
  return d->k->gelu(s, n, x, y);
}

hsr_status kh_gelu(hsr_stream *s, size_t n, const float *x, float *y) {
  (void)s;
  gelu_host(n, x, y);
  return HSR_OK;
}

hsr_status hsr_kernels_gelu_bwd(hsr_device *d, hsr_stream *s, size_t n, const float *x, const float *dy, float *dx) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (n == 0) return HSR_OK;
  NEED(x, "gelu_bwd");
  NEED(dy, "gelu_bwd");
  NEED(dx, "gelu_bwd");
  return d->k->gelu_bwd(s, n, x, dy, dx);
}

hsr_status kh_gelu_bwd(hsr_stream *s, size_t n, const float *x, const float *dy, float *dx) {
  (void)s;
  gelu_bwd_host(n, x, dy, dx);
  return HSR_OK;
}

hsr_status hsr_kernels_bias_add(hsr_device *d, hsr_stream *s, size_t rows, size_t cols, const float *b, float *y) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (rows == 0 || cols == 0) return HSR_OK;
  NEED(b, "bias_add");
  NEED(y, "bias_add");
  return d->k->bias_add(s, rows, cols, b, y);
}

hsr_status kh_bias_add(hsr_stream *s, size_t rows, size_t cols, const float *b, float *y) {
  (void)s;
  bias_host(rows, cols, b, y, NULL, NULL);
  return HSR_OK;
}

hsr_status hsr_kernels_bias_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (rows == 0 || cols == 0) return HSR_OK;
  NEED(dy, "bias_bwd");
  NEED(db, "bias_bwd");
  return d->k->bias_bwd(s, rows, cols, dy, db);
}

hsr_status kh_bias_bwd(hsr_stream *s, size_t rows, size_t cols, const float *dy, float *db) {
  (void)s;
  bias_host(rows, cols, NULL, NULL, dy, db);
  return HSR_OK;
}

hsr_status hsr_kernels_softmax_causal(hsr_device *d, hsr_stream *s, size_t rows, size_t T, float scale, const float *x,
                                      float *p) {
  static const char fn[] = "softmax_causal";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(T, "T", fn));
  if (rows == 0) return HSR_OK;
  if (T == 0) return hsr_error(HSR_ERR_INVALID, "softmax_causal: T is 0 with %zu rows", rows);
  NEED(x, fn);
  NEED(p, fn);
  return d->k->softmax_causal(s, rows, T, scale, x, p);
}

hsr_status kh_softmax_causal(hsr_stream *s, size_t rows, size_t T, float scale, const float *x, float *p) {
  (void)s;
  softmax_host(rows, T, scale, x, p, NULL, NULL);
  return HSR_OK;
}

hsr_status hsr_kernels_softmax_causal_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t T, float scale,
                                          const float *p, const float *dp, float *dx) {
  static const char fn[] = "softmax_causal_bwd";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(T, "T", fn));
  if (rows == 0) return HSR_OK;
  if (T == 0) return hsr_error(HSR_ERR_INVALID, "softmax_causal_bwd: T is 0 with %zu rows", rows);
  NEED(p, fn);
  NEED(dp, fn);
  NEED(dx, fn);
  return d->k->softmax_causal_bwd(s, rows, T, scale, p, dp, dx);
}

hsr_status kh_softmax_causal_bwd(hsr_stream *s, size_t rows, size_t T, float scale, const float *p, const float *dp,
                                 float *dx) {
  (void)s;
  softmax_host(rows, T, scale, NULL, (float *)p, dp, dx);
  return HSR_OK;
}

hsr_status hsr_kernels_xent(hsr_device *d, hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets,
                            float grad_scale, double *rowloss) {
  static const char fn[] = "xent";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(V, "V", fn));
  if (rows == 0) return HSR_OK;
  if (V == 0) return hsr_error(HSR_ERR_INVALID, "xent: V is 0 with %zu rows", rows);
  NEED(z, fn);
  NEED(targets, fn);
  NEED(rowloss, fn);
  return d->k->xent(s, rows, V, z, targets, grad_scale, rowloss);
}

hsr_status kh_xent(hsr_stream *s, size_t rows, size_t V, float *z, const int32_t *targets, float grad_scale,
                   double *rowloss) {
  (void)s;
  for (size_t r = 0; r < rows; r++)
    if (targets[r] < 0 || (size_t)targets[r] >= V)
      return hsr_error(HSR_ERR_INVALID, "xent: target %d of row %zu is outside [0, %zu)", (int)targets[r], r, V);
  xent_host(rows, V, z, targets, grad_scale, rowloss);
  return HSR_OK;
}

static hsr_status check_tokens(const int32_t *tok, size_t n, size_t V, const char *fn) {
  for (size_t i = 0; i < n; i++)
    if (tok[i] < 0 || (size_t)tok[i] >= V)
      return hsr_error(HSR_ERR_INVALID, "%s: token %d at position %zu is outside the vocabulary [0, %zu)", fn,
                       (int)tok[i], i, V);
  return HSR_OK;
}

hsr_status hsr_kernels_embed(hsr_device *d, hsr_stream *s, size_t B, size_t T, size_t C, size_t V,
                             const int32_t *tokens, const float *wte, const float *wpe, float *out) {
  static const char fn[] = "embed";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (B == 0 || T == 0 || C == 0) return HSR_OK;
  NEED(tokens, fn);
  NEED(wte, fn);
  NEED(wpe, fn);
  NEED(out, fn);
  return d->k->embed(s, B, T, C, V, tokens, wte, wpe, out);
}

hsr_status kh_embed(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *wte,
                    const float *wpe, float *out) {
  static const char fn[] = "embed";
  (void)s;
  HSR_CHECK(check_tokens(tokens, B * T, V, fn));
  for (size_t i = 0; i < B * T; i++) {
    const float *e = wte + (size_t)tokens[i] * C, *p = wpe + (i % T) * C;
    float *o = out + i * C;
    for (size_t c = 0; c < C; c++) o[c] = e[c] + p[c];
  }
  return HSR_OK;
}

hsr_status hsr_kernels_embed_bwd(hsr_device *d, hsr_stream *s, size_t B, size_t T, size_t C, size_t V,
                                 const int32_t *tokens, const float *dout, float *dwte, float *dwpe) {
  static const char fn[] = "embed_bwd";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (B == 0 || T == 0 || C == 0) return HSR_OK;
  NEED(tokens, fn);
  NEED(dout, fn);
  NEED(dwte, fn);
  NEED(dwpe, fn);
  return d->k->embed_bwd(s, B, T, C, V, tokens, dout, dwte, dwpe);
}

hsr_status kh_embed_bwd(hsr_stream *s, size_t B, size_t T, size_t C, size_t V, const int32_t *tokens, const float *dout,
                        float *dwte, float *dwpe) {
  static const char fn[] = "embed_bwd";
  (void)s;
  HSR_CHECK(check_tokens(tokens, B * T, V, fn));
  /* positions in order: the device kernel (a thread per channel) adds in the same order */
  for (size_t i = 0; i < B * T; i++) {
    const float *g = dout + i * C;
    float *e = dwte + (size_t)tokens[i] * C, *p = dwpe + (i % T) * C;
    for (size_t c = 0; c < C; c++) {
      e[c] += g[c];
      p[c] += g[c];
    }
  }
  return HSR_OK;
}
