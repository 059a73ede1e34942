/* The Llama-style model's layers (RMSNorm, SwiGLU, rotary embeddings):
 * argument checks, then the device kind's entry; the host loops (kh_*) over
 * the kmath.h row formulas, which the sim kind runs too (CUDA: cuda_nn_llama.cu). Built at -O3 like nn.c so the maps vectorise. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "nn_internal.h"
#include "nn_llama_internal.h"

HSR_KM_CLONES static void rms_host(size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                                   float *rstd) {
  for (size_t r = 0; r < rows; r++) hsr_km_rmsnorm_row(x + r * C, w, y + r * C, (int)C, eps, &rstd[r]);
}

/* dw in row order, as the device's thread per column adds it */
HSR_KM_CLONES static void rms_bwd_host(size_t rows, size_t C, const float *dy, const float *x, const float *w,
                                       const float *rstd, float *dx, float *dw) {
  for (size_t r = 0; r < rows; r++) {
    const float *dyr = dy + r * C, *xr = x + r * C;
    float rs = rstd[r];
    hsr_km_rmsnorm_bwd_row(dyr, xr, w, rs, dx + r * C, (int)C);
    for (size_t i = 0; i < C; i++) dw[i] += dyr[i] * (xr[i] * rs);
  }
}

HSR_KM_CLONES static void swiglu_host(size_t n, const float *g, const float *u, float *y) {
  for (size_t i = 0; i < n; i++) y[i] = hsr_km_swiglu(g[i], u[i]);
}

HSR_KM_CLONES static void swiglu_bwd_host(size_t n, const float *g, const float *u, const float *dy, float *dg,
                                          float *du) {
  for (size_t i = 0; i < n; i++) {
    float a, b;
    hsr_km_swiglu_bwd(g[i], u[i], dy[i], &a, &b);
    dg[i] = a, du[i] = b;
  }
}

hsr_status hsr_kernels_rmsnorm(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *x, const float *w,
                               float eps, float *y, float *rstd) {
  static const char fn[] = "rmsnorm";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(C, "C", fn));
  if (!(eps > 0.0f)) return hsr_error(HSR_ERR_INVALID, "rmsnorm: eps %g must be > 0", eps);
  if (rows == 0 || C == 0) return HSR_OK;
  NEED(x, fn);
  NEED(w, fn);
  NEED(y, fn);
  NEED(rstd, fn);
  return d->k->rmsnorm(s, rows, C, x, w, eps, y, rstd);
}

hsr_status kh_rmsnorm(hsr_stream *s, size_t rows, size_t C, const float *x, const float *w, float eps, float *y,
                      float *rstd) {
  (void)s;
  rms_host(rows, C, x, w, eps, y, rstd);
  return HSR_OK;
}

hsr_status hsr_kernels_rmsnorm_bwd(hsr_device *d, hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x,
                                   const float *w, const float *rstd, float *dx, float *dw) {
  static const char fn[] = "rmsnorm_bwd";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(fits_int(C, "C", fn));
  if (rows == 0 || C == 0) return HSR_OK;
  NEED(dy, fn);
  NEED(x, fn);
  NEED(w, fn);
  NEED(rstd, fn);
  NEED(dx, fn);
  NEED(dw, fn);
  return d->k->rmsnorm_bwd(s, rows, C, dy, x, w, rstd, dx, dw);
}

hsr_status kh_rmsnorm_bwd(hsr_stream *s, size_t rows, size_t C, const float *dy, const float *x, const float *w,
                          const float *rstd, float *dx, float *dw) {
  (void)s;
  rms_bwd_host(rows, C, dy, x, w, rstd, dx, dw);
  return HSR_OK;
}

hsr_status hsr_kernels_swiglu(hsr_device *d, hsr_stream *s, size_t n, const float *g, const float *u, float *y) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (n == 0) return HSR_OK;
  NEED(g, "swiglu");
  NEED(u, "swiglu");
  NEED(y, "swiglu");
  return d->k->swiglu(s, n, g, u, y);
}

hsr_status kh_swiglu(hsr_stream *s, size_t n, const float *g, const float *u, float *y) {
  (void)s;
  swiglu_host(n, g, u, y);
  return HSR_OK;
}

hsr_status hsr_kernels_swiglu_bwd(hsr_device *d, hsr_stream *s, size_t n, const float *g, const float *u,
                                  const float *dy, float *dg, float *du) {
  static const char fn[] = "swiglu_bwd";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (n == 0) return HSR_OK;
  NEED(g, fn);
  NEED(u, fn);
  NEED(dy, fn);
  NEED(dg, fn);
  NEED(du, fn);
  return d->k->swiglu_bwd(s, n, g, u, dy, dg, du);
}

hsr_status kh_swiglu_bwd(hsr_stream *s, size_t n, const float *g, const float *u, const float *dy, float *dg,
                         float *du) {
  (void)s;
  swiglu_bwd_host(n, g, u, dy, dg, du);
  return HSR_OK;
}

static hsr_status rope_dims(size_t T, size_t D, const char *fn) {
  HSR_CHECK(fits_int(T, "T", fn));
  HSR_CHECK(fits_int(D, "D", fn));
  if (D == 0 || D % 2) return hsr_error(HSR_ERR_INVALID, "%s: head size %zu must be even and > 0", fn, D);
  return HSR_OK;
}

hsr_status hsr_kernels_rope_table(hsr_device *d, hsr_stream *s, size_t T, size_t D, float theta, float *cs) {
  static const char fn[] = "rope_table";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(rope_dims(T, D, fn));
  if (!(theta > 1.0f)) return hsr_error(HSR_ERR_INVALID, "rope_table: theta %g must be > 1", theta);
  if (T == 0) return HSR_OK;
  NEED(cs, fn);
  return d->k->rope_table(s, T, D, theta, cs);
}

hsr_status kh_rope_table(hsr_stream *s, size_t T, size_t D, float theta, float *cs) {
  (void)s;
  for (size_t p = 0, h = D / 2; p < T; p++)
    for (size_t i = 0; i < h; i++)
      hsr_km_rope_cs((int)p, (int)i, (int)D, theta, &cs[2 * (p * h + i)], &cs[2 * (p * h + i) + 1]);
  return HSR_OK;
}

hsr_status hsr_kernels_rope(hsr_device *d, hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D,
                            const float *cs, int inverse, float *x) {
  static const char fn[] = "rope";
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(rope_dims(T, D, fn));
  HSR_CHECK(fits_int(heads, "heads", fn));
  if (rows == 0 || heads == 0) return HSR_OK;
  if (T == 0) return hsr_error(HSR_ERR_INVALID, "rope: T is 0 with %zu rows", rows);
  NEED(cs, fn);
  NEED(x, fn);
  return d->k->rope(s, rows, T, heads, D, cs, inverse, x);
}

hsr_status kh_rope(hsr_stream *s, size_t rows, size_t T, size_t heads, size_t D, const float *cs, int inverse,
                   float *x) {
  (void)s;
  for (size_t r = 0; r < rows; r++) hsr_km_rope_row(x + r * heads * D, (int)heads, (int)D, cs + (r % T) * D, inverse);
  return HSR_OK;
}
