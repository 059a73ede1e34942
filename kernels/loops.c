/* The element-wise kernels: argument checks, then the host loop (plain C
 * over the kmath.h formulas, written so the compiler can vectorise them) or
 * the kind's launch (the host kind's are the kh_* CPU twins below). */
/* Built with -fno-math-errno (bench/kernels.cmake): sqrtf needs no errno
 * branch, so the AdamW loop vectorises; the result is the same IEEE sqrt. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "common/dtype_internal.h"
#include "kernels/kernels_internal.h"

static hsr_status need_ptr(const void *p, const char *what, size_t n) {
  if (!p && n) return hsr_error(HSR_ERR_INVALID, "%s is NULL (n = %zu)", what, n);
  return HSR_OK;
}

/* ---- AdamW ------------------------------------------------------------------ */

/* One loop per (grad dtype, output dtype) so each body is branch-free. */
#define ADAMW_LOOP(LOAD_G, STORE_OUT)                         \
  for (size_t i = 0; i < n; i++) {                            \
    float np = hsr_km_adamw(&p[i], &m[i], &v[i], LOAD_G, &c); \
    STORE_OUT;                                                \
  }

HSR_KM_CLONES static void adamw_host(size_t n, float *restrict p, float *restrict m, float *restrict v,
                                     const void *grad, hsr_dtype gdt, void *out, hsr_dtype odt,
                                     const hsr_km_adamw_c *cp) {
  const hsr_km_adamw_c c = *cp;
  const float *gf = (const float *)grad;
  const uint16_t *gh = (const uint16_t *)grad;
  float *of = (float *)out;
  uint16_t *oh = (uint16_t *)out;
  if (gdt == HSR_F32) {
    if (!out) {
      ADAMW_LOOP(gf[i], (void)np)
    } else if (odt == HSR_F32) {
      ADAMW_LOOP(gf[i], of[i] = np)
    } else {
      ADAMW_LOOP(gf[i], oh[i] = hsr_km_f32_to_bf16(np))
    }
  } else {
    if (!out) {
      ADAMW_LOOP(hsr_km_bf16_to_f32(gh[i]), (void)np)
    } else if (odt == HSR_F32) {
      ADAMW_LOOP(hsr_km_bf16_to_f32(gh[i]), of[i] = np)
    } else {
      ADAMW_LOOP(hsr_km_bf16_to_f32(gh[i]), oh[i] = hsr_km_f32_to_bf16(np))
    }
  }
}

static hsr_status check_hparams(const adamw_hparams *hp) {
  if (!hp) return hsr_error(HSR_ERR_INVALID, "AdamW hyper-parameters are NULL");
  if (hp->step < 1) return hsr_error(HSR_ERR_INVALID, "AdamW step %lld: must be >= 1 (1-based)", (long long)hp->step);
  if (!(hp->beta1 >= 0.0f && hp->beta1 < 1.0f) || !(hp->beta2 >= 0.0f && hp->beta2 < 1.0f))
    return hsr_error(HSR_ERR_INVALID, "AdamW betas (%g, %g): each must be in [0, 1)", hp->beta1, hp->beta2);
  if (!isfinite(hp->lr) || !(hp->eps >= 0.0f) || !isfinite(hp->eps) || !isfinite(hp->weight_decay) ||
      !isfinite(hp->grad_scale))
    return hsr_error(HSR_ERR_INVALID, "AdamW lr %g, eps %g, weight_decay %g, grad_scale %g: must be finite, eps >= 0",
                     hp->lr, hp->eps, hp->weight_decay, hp->grad_scale);
  return HSR_OK;
}

hsr_status kernels_adamw(hsr_device *d, hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad,
                         hsr_dtype grad_dt, void *param_out, hsr_dtype param_dt, const adamw_hparams *hp) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(check_hparams(hp));
  if (grad_dt != HSR_F32 && grad_dt != HSR_BF16)
    return hsr_error(HSR_ERR_INVALID, "AdamW gradient dtype %s: valid are f32 and bf16", dtype_name(grad_dt));
  if (param_out && param_dt != HSR_F32 && param_dt != HSR_BF16)
    return hsr_error(HSR_ERR_INVALID, "AdamW output dtype %s: valid are f32 and bf16", dtype_name(param_dt));
  HSR_CHECK(need_ptr(master, "AdamW master", n));
  HSR_CHECK(need_ptr(m, "AdamW m", n));
  HSR_CHECK(need_ptr(v, "AdamW v", n));
  HSR_CHECK(need_ptr(grad, "AdamW grad", n));
  if (n == 0) return HSR_OK;
  hsr_km_adamw_c c =
      hsr_km_adamw_consts(hp->lr, hp->beta1, hp->beta2, hp->eps, hp->weight_decay, hp->step, hp->grad_scale);
  return d->k->adamw(s, n, master, m, v, grad, grad_dt, param_out, param_dt, &c);
}

hsr_status kh_adamw(hsr_stream *s, size_t n, float *master, float *m, float *v, const void *grad, hsr_dtype grad_dt,
                    void *param_out, hsr_dtype param_dt, const hsr_km_adamw_c *c) {
  (void)s;
  adamw_host(n, master, m, v, grad, grad_dt, param_out, param_dt, c);
  return HSR_OK;
}

/* ---- casts ------------------------------------------------------------------ */

static int is_float_dt(hsr_dtype dt) { return dt == HSR_F32 || dt == HSR_BF16 || dt == HSR_F16; }

HSR_KM_CLONES static void cast_host(size_t n, const void *src, hsr_dtype sdt, void *dst, hsr_dtype ddt) {
  const float *sf = (const float *)src;
  const uint16_t *sh = (const uint16_t *)src;
  float *df = (float *)dst;
  uint16_t *dh = (uint16_t *)dst;
  if (sdt == HSR_F32 && ddt == HSR_BF16) {
    for (size_t i = 0; i < n; i++) dh[i] = hsr_km_f32_to_bf16(sf[i]);
  } else if (sdt == HSR_F32 && ddt == HSR_F16) {
    for (size_t i = 0; i < n; i++) dh[i] = hsr_km_f32_to_f16(sf[i]);
  } else if (sdt == HSR_BF16 && ddt == HSR_F32) {
    for (size_t i = 0; i < n; i++) df[i] = hsr_km_bf16_to_f32(sh[i]);
  } else if (sdt == HSR_F16 && ddt == HSR_F32) {
    for (size_t i = 0; i < n; i++) df[i] = hsr_km_f16_to_f32(sh[i]);
  } else if (sdt == HSR_BF16 && ddt == HSR_F16) { /* bf16 -> f32 is exact: one rounding */
    for (size_t i = 0; i < n; i++) dh[i] = hsr_km_f32_to_f16(hsr_km_bf16_to_f32(sh[i]));
  } else { /* f16 -> bf16 */
    for (size_t i = 0; i < n; i++) dh[i] = hsr_km_f32_to_bf16(hsr_km_f16_to_f32(sh[i]));
  }
}

hsr_status hsr_kernels_cast(hsr_device *d, hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst,
                            hsr_dtype dst_dt) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  if (src_dt == dst_dt) {
    if (dtype_size(src_dt) == 0) return hsr_error(HSR_ERR_INVALID, "cast: invalid dtype %d", (int)src_dt);
    if (src == dst) return HSR_OK;
    return hsr_device_copy(d, dst, src, n * dtype_size(src_dt), s);
  }
  if (!is_float_dt(src_dt) || !is_float_dt(dst_dt))
    return hsr_error(HSR_ERR_INVALID, "cast %s -> %s: valid are f32, bf16, f16 to each other, or a same-type copy",
                     dtype_name(src_dt), dtype_name(dst_dt));
  HSR_CHECK(need_ptr(src, "cast source", n));
  HSR_CHECK(need_ptr(dst, "cast destination", n));
  if (n == 0) return HSR_OK;
  return d->k->cast(s, n, src, src_dt, dst, dst_dt);
}

hsr_status kh_cast(hsr_stream *s, size_t n, const void *src, hsr_dtype src_dt, void *dst, hsr_dtype dst_dt) {
  (void)s;
  cast_host(n, src, src_dt, dst, dst_dt);
  return HSR_OK;
}

/* ---- scale, axpy ------------------------------------------------------------------ */

static hsr_status check_arith_dt(const char *op, hsr_dtype dt) {
  if (dt == HSR_F32 || dt == HSR_F64 || dt == HSR_BF16 || dt == HSR_F16) return HSR_OK;
  return hsr_error(HSR_ERR_INVALID, "%s on dtype %s: valid are f32, f64, bf16, f16", op, dtype_name(dt));
}

hsr_status kernels_scale(hsr_device *d, hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(check_arith_dt("scale", dt));
  HSR_CHECK(need_ptr(x, "scale x", n));
  if (n == 0) return HSR_OK;
  return d->k->scale(s, n, x, dt, alpha);
}

hsr_status kh_scale(hsr_stream *s, size_t n, void *x, hsr_dtype dt, double alpha) {
  (void)s;
  const float a = (float)alpha;
  if (dt == HSR_F64) {
    double *xd = (double *)x;
    for (size_t i = 0; i < n; i++) xd[i] = hsr_km_scale_f64(xd[i], alpha);
  } else if (dt == HSR_F32) {
    float *xf = (float *)x;
    for (size_t i = 0; i < n; i++) xf[i] = hsr_km_scale(xf[i], a);
  } else if (dt == HSR_BF16) {
    uint16_t *xh = (uint16_t *)x;
    for (size_t i = 0; i < n; i++) xh[i] = hsr_km_f32_to_bf16(hsr_km_scale(hsr_km_bf16_to_f32(xh[i]), a));
  } else {
    uint16_t *xh = (uint16_t *)x;
    for (size_t i = 0; i < n; i++) xh[i] = hsr_km_f32_to_f16(hsr_km_scale(hsr_km_f16_to_f32(xh[i]), a));
  }
  return HSR_OK;
}

hsr_status hsr_kernels_axpy(hsr_device *d, hsr_stream *s, size_t n, double alpha, const void *x, void *y,
                            hsr_dtype dt) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(check_arith_dt("axpy", dt));
  HSR_CHECK(need_ptr(x, "axpy x", n));
  HSR_CHECK(need_ptr(y, "axpy y", n));
  if (n == 0) return HSR_OK;
  return d->k->axpy(s, n, alpha, x, y, dt);
}

hsr_status kh_axpy(hsr_stream *s, size_t n, double alpha, const void *x, void *y, hsr_dtype dt) {
  (void)s;
  const float a = (float)alpha;
  if (dt == HSR_F64) {
    const double *xd = (const double *)x;
    double *yd = (double *)y;
    for (size_t i = 0; i < n; i++) yd[i] = hsr_km_axpy_f64(alpha, xd[i], yd[i]);
  } else if (dt == HSR_F32) {
    const float *xf = (const float *)x;
    float *yf = (float *)y;
    for (size_t i = 0; i < n; i++) yf[i] = hsr_km_axpy(a, xf[i], yf[i]);
  } else if (dt == HSR_BF16) {
    const uint16_t *xh = (const uint16_t *)x;
    uint16_t *yh = (uint16_t *)y;
    for (size_t i = 0; i < n; i++)
      yh[i] = hsr_km_f32_to_bf16(hsr_km_axpy(a, hsr_km_bf16_to_f32(xh[i]), hsr_km_bf16_to_f32(yh[i])));
  } else {
    const uint16_t *xh = (const uint16_t *)x;
    uint16_t *yh = (uint16_t *)y;
    for (size_t i = 0; i < n; i++)
      yh[i] = hsr_km_f32_to_f16(hsr_km_axpy(a, hsr_km_f16_to_f32(xh[i]), hsr_km_f16_to_f32(yh[i])));
  }
  return HSR_OK;
}

/* ---- sum of squares (order documented in kmath.h) ------------------------------ */

/* Adds the squares of x[base .. base+cnt) (cnt <= LANES, base % LANES == 0)
 * into lanes 0..cnt-1. */
static void sq_row(double *restrict lane, const void *x, hsr_dtype dt, size_t base, size_t cnt) {
  if (dt == HSR_F32) {
    const float *xf = (const float *)x + base;
    for (size_t t = 0; t < cnt; t++) lane[t] = hsr_km_sq_acc(lane[t], (double)xf[t]);
  } else if (dt == HSR_F64) {
    const double *xd = (const double *)x + base;
    for (size_t t = 0; t < cnt; t++) lane[t] = hsr_km_sq_acc(lane[t], xd[t]);
  } else if (dt == HSR_BF16) {
    const uint16_t *xh = (const uint16_t *)x + base;
    for (size_t t = 0; t < cnt; t++) lane[t] = hsr_km_sq_acc(lane[t], (double)hsr_km_bf16_to_f32(xh[t]));
  } else {
    const uint16_t *xh = (const uint16_t *)x + base;
    for (size_t t = 0; t < cnt; t++) lane[t] = hsr_km_sq_acc(lane[t], (double)hsr_km_f16_to_f32(xh[t]));
  }
}

HSR_KM_CLONES static double sumsq_host(size_t n, const void *x, hsr_dtype dt) {
  size_t parts = hsr_km_sumsq_parts(n);
  size_t chunks = (n + HSR_KM_SQ_CHUNK - 1) / HSR_KM_SQ_CHUNK;
  double fin[HSR_KM_SQ_LANES] = {0}, lane[HSR_KM_SQ_LANES];
  for (size_t p = 0; p < parts; p++) {
    memset(lane, 0, sizeof lane);
    for (size_t c = p; c < chunks; c += parts) {
      size_t end = (c + 1) * HSR_KM_SQ_CHUNK < n ? (c + 1) * HSR_KM_SQ_CHUNK : n;
      for (size_t base = c * HSR_KM_SQ_CHUNK; base < end; base += HSR_KM_SQ_LANES)
        sq_row(lane, x, dt, base, end - base < HSR_KM_SQ_LANES ? end - base : HSR_KM_SQ_LANES);
    }
    fin[p % HSR_KM_SQ_LANES] += hsr_km_sq_tree(lane);
  }
  return hsr_km_sq_tree(fin);
}

hsr_status kernels_sumsq(hsr_device *d, hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out) {
  HSR_CHECK(kern_resolve_stream(d, s, &s));
  HSR_CHECK(check_arith_dt("sumsq", dt));
  HSR_CHECK(need_ptr(x, "sumsq x", n));
  if (!out) return hsr_error(HSR_ERR_INVALID, "sumsq: out is NULL");
  return d->k->sumsq(s, n, x, dt, out);
}

hsr_status kh_sumsq(hsr_stream *s, size_t n, const void *x, hsr_dtype dt, double *out) {
  (void)s;
  *out = sumsq_host(n, x, dt);
  return HSR_OK;
}
