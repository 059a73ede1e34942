/* Per-element math shared by host loops and CUDA kernels. Written once,
 * compiled for both: the CPU tests check the formulas the GPU runs.
 *
 * Every float operation that could be contracted or approximated goes through
 * HSR_KM_{ADD,SUB,MUL,DIV,SQRT}: plain IEEE operators on the host (C11 builds
 * do not contract a*b+c), the explicitly rounded intrinsics on the device
 * (nvcc would otherwise fuse into FMA). So a kernel and its CPU loop give the
 * same bits, and the GPU test can compare them exactly.
 *
 * bf16 and f16 values travel as their uint16_t bit patterns. */
#ifndef HSR_KMATH_H
#define HSR_KMATH_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__CUDACC__)
#define HSR_HD static __host__ __device__ __forceinline__
#else
#define HSR_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define HSR_KM_ADD(a, b) __fadd_rn((a), (b))
#define HSR_KM_SUB(a, b) __fsub_rn((a), (b))
#define HSR_KM_MUL(a, b) __fmul_rn((a), (b))
#define HSR_KM_DIV(a, b) __fdiv_rn((a), (b))
#define HSR_KM_SQRT(a) __fsqrt_rn(a)
#define HSR_KM_DADD(a, b) __dadd_rn((a), (b))
#define HSR_KM_DMUL(a, b) __dmul_rn((a), (b))
#else
#define HSR_KM_ADD(a, b) ((a) + (b))
#define HSR_KM_SUB(a, b) ((a) - (b))
#define HSR_KM_MUL(a, b) ((a) * (b))
#define HSR_KM_DIV(a, b) ((a) / (b))
#define HSR_KM_SQRT(a) sqrtf(a)
#define HSR_KM_DADD(a, b) ((a) + (b))
#define HSR_KM_DMUL(a, b) ((a) * (b))
#endif

/* Host loops built twice, for AVX2 and for the baseline, picked at load time
 * (ifunc): the same IEEE operations (no FMA contraction in C11), so the same
 * bits, in wider vectors where the CPU has them. Not under ThreadSanitizer:
 * an ifunc resolver runs before its runtime starts and crashes. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && \
    !defined(__SANITIZE_THREAD__)
#define HSR_KM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HSR_KM_CLONES
#endif

/* c ? a : b on 32-bit words with masks: no branch for any compiler to keep. */
#define HSR_KM_SEL(c, a, b) ((b) ^ (((a) ^ (b)) & (0u - (uint32_t)(c))))

/* ---- bit casts ---------------------------------------------------------- */
HSR_HD uint32_t hsr_km_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

HSR_HD float hsr_km_f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* ---- bf16 ----------------------------------------------------------------
 * f32 -> bf16 rounds to nearest, ties to even; values past the largest bf16
 * round to inf. Every NaN stays a NaN (sign and top payload bits kept) and
 * comes out quiet, never truncated into an inf. */
HSR_HD uint16_t hsr_km_f32_to_bf16(float f) {
  uint32_t u = hsr_km_f32_bits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet = (u >> 16) | 0x0040u;
  /* a select, not a branch: the loops vectorise */
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

/* Exact widening; a signalling NaN is returned quiet. */
HSR_HD float hsr_km_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  u |= (u & 0x7fffffffu) > 0x7f800000u ? 0x00400000u : 0u;
  return hsr_km_f32_from_bits(u);
}

/* ---- f16 (IEEE binary16) ---------------------------------------------------
 * f32 -> f16 rounds to nearest, ties to even, including into and out of the
 * subnormal range; |x| >= 65520 becomes inf; NaN stays NaN, quiet.
 * Both directions compute every case and select (no branches), so the host
 * loops vectorise and GPU warps do not diverge. */
HSR_HD uint16_t hsr_km_f32_to_f16(float f) {
  uint32_t u = hsr_km_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  /* normal range: rebias, round on the 13 dropped bits (ties to even) */
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13;
  /* below 2^-14: adding 0.5 leaves a float whose ulp is 2^-24, the f16
   * subnormal step, so the FPU's own round-to-nearest-even does the work
   * (the sum is >= 0.5: flush-to-zero modes cannot touch it) */
  uint32_t sub = hsr_km_f32_bits(HSR_KM_ADD(hsr_km_f32_from_bits(a), 0.5f)) - 0x3f000000u;
  uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  uint32_t r = HSR_KM_SEL(a < 0x38800000u, sub, normal);
  r = HSR_KM_SEL(a >= 0x477ff000u, 0x7c00u, r); /* >= 65520 rounds past the largest finite: inf */
  r = HSR_KM_SEL(a > 0x7f800000u, nan, r);
  return (uint16_t)(sign | r);
}

HSR_HD float hsr_km_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t m = h & 0x3ffu, e = h & 0x7c00u;
  uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + (112u << 23);                 /* rebias 15 -> 127 */
  uint32_t special = 0x7f800000u | (m << 13) | HSR_KM_SEL(m != 0, 0x00400000u, 0u); /* inf, quiet NaN */
  /* zero and subnormals: m * 2^-24 is exact in f32 */
  uint32_t sub = hsr_km_f32_bits(HSR_KM_MUL((float)(int)m, 0x1p-24f));
  uint32_t u = HSR_KM_SEL(e == 0, sub, HSR_KM_SEL(e == 0x7c00u, special, normal));
  return hsr_km_f32_from_bits(sign | u);
}

/* ---- scale, axpy -------------------------------------------------------- */
HSR_HD float hsr_km_scale(float x, float alpha) { return HSR_KM_MUL(x, alpha); }
HSR_HD double hsr_km_scale_f64(double x, double alpha) { return HSR_KM_DMUL(x, alpha); }
/* y + alpha*x, two roundings (no FMA), the same on host and device. */
HSR_HD float hsr_km_axpy(float alpha, float x, float y) { return HSR_KM_ADD(y, HSR_KM_MUL(alpha, x)); }
HSR_HD double hsr_km_axpy_f64(double alpha, double x, double y) { return HSR_KM_DADD(y, HSR_KM_DMUL(alpha, x)); }

/* ---- AdamW ------------------------------------------------------------------
 * Per-call constants, derived once from the hyper-parameters (PyTorch's
 * AdamW, decoupled weight decay, bias-corrected moments):
 *   g  = grad * grad_scale
 *   p  = p * (1 - lr*wd)
 *   m  = b1*m + (1-b1)*g
 *   v  = b2*v + (1-b2)*g*g
 *   p  = p - (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)      */
typedef struct hsr_km_adamw_c {
  float grad_scale, decay, beta1, one_m_beta1, beta2, one_m_beta2, step_size, bc2_sqrt, eps;
} hsr_km_adamw_c;

#ifndef __CUDACC__
/* Host only: the bias corrections in double, then rounded once. */
static inline hsr_km_adamw_c hsr_km_adamw_consts(float lr, float beta1, float beta2, float eps, float weight_decay,
                                                 int64_t step, float grad_scale) {
  hsr_km_adamw_c c;
  double bc1 = 1.0 - pow((double)beta1, (double)step);
  double bc2 = 1.0 - pow((double)beta2, (double)step);
  c.grad_scale = grad_scale;
  c.decay = (float)(1.0 - (double)lr * (double)weight_decay);
  c.beta1 = beta1;
  c.one_m_beta1 = (float)(1.0 - (double)beta1);
  c.beta2 = beta2;
  c.one_m_beta2 = (float)(1.0 - (double)beta2);
  c.step_size = (float)((double)lr / bc1);
  c.bc2_sqrt = (float)sqrt(bc2);
  c.eps = eps;
  return c;
}
#endif

/* Updates one element in place; returns the new master value. */
HSR_HD float hsr_km_adamw(float *p, float *m, float *v, float grad, const hsr_km_adamw_c *c) {
  float g = HSR_KM_MUL(grad, c->grad_scale);
  float mm = HSR_KM_ADD(HSR_KM_MUL(c->beta1, *m), HSR_KM_MUL(c->one_m_beta1, g));
  float vv = HSR_KM_ADD(HSR_KM_MUL(c->beta2, *v), HSR_KM_MUL(HSR_KM_MUL(c->one_m_beta2, g), g));
  float denom = HSR_KM_ADD(HSR_KM_DIV(HSR_KM_SQRT(vv), c->bc2_sqrt), c->eps);
  float pp = HSR_KM_MUL(*p, c->decay);
  pp = HSR_KM_SUB(pp, HSR_KM_MUL(c->step_size, HSR_KM_DIV(mm, denom)));
  *m = mm;
  *v = vv;
  *p = pp;
  return pp;
}

/* ---- sum of squares ------------------------------------------------------------
 * The reduction order is fixed by n alone, so a result is the same bits on
 * every run, and on host and device:
 *   - the input is cut in chunks of HSR_KM_SQ_CHUNK elements; chunk c goes to
 *     part (c % P), P = hsr_km_sumsq_parts(n);
 *   - inside a part, lane t (of HSR_KM_SQ_LANES) adds x[i]^2 in double, in
 *     index order, for the elements with i % HSR_KM_SQ_LANES == t;
 *   - the lanes of a part are summed by the pairwise tree below;
 *   - part p's sum goes to final lane (p % HSR_KM_SQ_LANES), added in order,
 *     and the final lanes are summed by the same tree.
 * (On the GPU a part is a thread block and a lane a thread.) */
#define HSR_KM_SQ_LANES 256
#define HSR_KM_SQ_CHUNK 4096
#define HSR_KM_SQ_MAX_PARTS 1024

HSR_HD size_t hsr_km_sumsq_parts(size_t n) {
  size_t chunks = (n + HSR_KM_SQ_CHUNK - 1) / HSR_KM_SQ_CHUNK;
  return chunks < HSR_KM_SQ_MAX_PARTS ? chunks : HSR_KM_SQ_MAX_PARTS;
}

HSR_HD double hsr_km_sq_acc(double acc, double x) { return HSR_KM_DADD(acc, HSR_KM_DMUL(x, x)); }

#ifndef __CUDACC__
/* The tree over HSR_KM_SQ_LANES lanes: s[i] += s[i + h] for h = 128 .. 1
 * (the device does the same, the last five levels with warp shuffles).
 * Destroys s; returns s[0]. */
static inline double hsr_km_sq_tree(double *s) {
  for (int h = HSR_KM_SQ_LANES / 2; h >= 1; h /= 2)
    for (int i = 0; i < h; i++) s[i] += s[i + h];
  return s[0];
}
#endif

/* ---- transformer math (the GPT example model) ----------------------------
 * Host and device results are compared with a tolerance here (the GEMMs
 * around these sum in different orders anyway), so plain operators. expf
 * and tanh are hsr's own branch-free versions, so the host loops
 * vectorise (glibc's are scalar calls). Rows are row-major f32. */

/* e^x, within 2 ulp of the exact value for x in [-87, 88]; clamped outside
 * (e^-87 ~ 1.6e-38 stands for 0). NaN stays NaN. */
HSR_HD float hsr_km_expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  /* n = round(x / ln 2) by the 1.5 * 2^23 trick; r = x - n ln 2 in two parts */
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-01f +
                                                r * (4.16666679e-02f + r * (8.33333377e-03f + r * 1.38888892e-03f)))));
  return p * hsr_km_f32_from_bits((uint32_t)((int32_t)n + 127) << 23);
}

/* tanh(x) = sign(x) (1 - e^-2|x|) / (1 + e^-2|x|): absolute error ~1e-7. */
HSR_HD float hsr_km_tanhf(float x) {
  uint32_t b = hsr_km_f32_bits(x);
  float e = hsr_km_expf(-2.0f * hsr_km_f32_from_bits(b & 0x7fffffffu));
  float t = (1.0f - e) / (1.0f + e);
  return hsr_km_f32_from_bits(hsr_km_f32_bits(t) | (b & 0x80000000u));
}

/* GELU with GPT-2's tanh approximation, and its derivative. */
#define HSR_KM_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
HSR_HD float hsr_km_gelu(float x) {
  return 0.5f * x * (1.0f + hsr_km_tanhf(HSR_KM_GELU_C * (x + 0.044715f * x * x * x)));
}
HSR_HD float hsr_km_gelu_grad(float x) {
  float t = hsr_km_tanhf(HSR_KM_GELU_C * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * HSR_KM_GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Row reductions in 8 independent lanes (then a fixed tree): the host loops
 * vectorise without reassociating anything, and the order is fixed by n. */
#define HSR_KM_LANES 8
HSR_HD float hsr_km_lanes_total(const float *a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
HSR_HD float hsr_km_row_sum(const float *x, int n) {
  float a[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0f;
  int j = 0;
  for (; j + HSR_KM_LANES <= n; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) a[k] += x[j + k];
  for (; j < n; j++) t += x[j];
  return hsr_km_lanes_total(a) + t;
}
/* sum of (x[j] - m)^2 */
HSR_HD float hsr_km_row_sqdev(const float *x, float m, int n) {
  float a[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0f;
  int j = 0;
  for (; j + HSR_KM_LANES <= n; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) a[k] += (x[j + k] - m) * (x[j + k] - m);
  for (; j < n; j++) t += (x[j] - m) * (x[j] - m);
  return hsr_km_lanes_total(a) + t;
}
HSR_HD float hsr_km_row_dot(const float *x, const float *y, int n) {
  float a[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0f;
  int j = 0;
  for (; j + HSR_KM_LANES <= n; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) a[k] += x[j + k] * y[j + k];
  for (; j < n; j++) t += x[j] * y[j];
  return hsr_km_lanes_total(a) + t;
}
HSR_HD float hsr_km_row_max(const float *x, int n) {
  float a[HSR_KM_LANES], t = x[0];
  for (int k = 0; k < HSR_KM_LANES; k++) a[k] = x[0];
  int j = 0;
  for (; j + HSR_KM_LANES <= n; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) a[k] = x[j + k] > a[k] ? x[j + k] : a[k];
  for (; j < n; j++) t = x[j] > t ? x[j] : t;
  for (int k = 0; k < HSR_KM_LANES; k++) t = a[k] > t ? a[k] : t;
  return t;
}

/* LayerNorm of one row of C: y = (x - mean) * rstd * w + b; writes mean and
 * rstd = 1 / sqrt(var + eps) (biased variance, two passes). */
HSR_HD void hsr_km_layernorm_row(const float *x, const float *w, const float *b, float *y, int C, float eps,
                                 float *mean, float *rstd) {
  float m = hsr_km_row_sum(x, C) / (float)C;
  float r = 1.0f / sqrtf(hsr_km_row_sqdev(x, m, C) / (float)C + eps);
  for (int i = 0; i < C; i++) y[i] = (x[i] - m) * r * w[i] + b[i];
  *mean = m;
  *rstd = r;
}

/* The input gradient of one LayerNorm row, ADDED to dx:
 * dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w. */
HSR_HD void hsr_km_layernorm_bwd_row(const float *dy, const float *x, const float *w, float mean, float rstd, float *dx,
                                     int C) {
  float a[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, c[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, ta = 0.0f, tc = 0.0f;
  int j = 0;
  for (; j + HSR_KM_LANES <= C; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) {
      float g = dy[j + k] * w[j + k];
      a[k] += g;
      c[k] += g * ((x[j + k] - mean) * rstd);
    }
  for (; j < C; j++) {
    float g = dy[j] * w[j];
    ta += g;
    tc += g * ((x[j] - mean) * rstd);
  }
  float sg = (hsr_km_lanes_total(a) + ta) / (float)C, sgx = (hsr_km_lanes_total(c) + tc) / (float)C;
  for (int i = 0; i < C; i++) dx[i] += rstd * (dy[i] * w[i] - sg - (x[i] - mean) * rstd * sgx);
}

/* Causal softmax of row i of a T x T score block: p[j] = softmax(scale * x)
 * over j <= i, 0 for j > i. p may be x. */
HSR_HD void hsr_km_softmax_causal_row(const float *x, float *p, int T, int i, float scale) {
  int n = i + 1;
  float mx = hsr_km_row_max(x, n);
  for (int j = 0; j < n; j++) p[j] = hsr_km_expf(scale * (x[j] - mx));
  float inv = 1.0f / hsr_km_row_sum(p, n);
  for (int j = 0; j < n; j++) p[j] *= inv;
  for (int j = n; j < T; j++) p[j] = 0.0f;
}

/* Its backward: dx[j] = scale * p[j] * (dp[j] - sum_k p[k] dp[k]) for j <= i,
 * 0 after (dx may be dp). */
HSR_HD void hsr_km_softmax_causal_bwd_row(const float *p, const float *dp, float *dx, int T, int i, float scale) {
  int n = i + 1;
  float dot = hsr_km_row_dot(p, dp, n);
  for (int j = 0; j < n; j++) dx[j] = scale * p[j] * (dp[j] - dot);
  for (int j = n; j < T; j++) dx[j] = 0.0f;
}

/* Softmax cross-entropy of one row of V logits with target t: returns
 * -log softmax(z)[t] (the logarithm in double) and replaces z by
 * (softmax(z) - onehot(t)) * grad_scale. */
HSR_HD double hsr_km_xent_row(float *z, int V, int t, float grad_scale) {
  float mx = hsr_km_row_max(z, V), zt = z[t] - mx;
  for (int k = 0; k < V; k++) z[k] = hsr_km_expf(z[k] - mx);
  float sum = hsr_km_row_sum(z, V), inv = grad_scale / sum;
  for (int k = 0; k < V; k++) z[k] *= inv;
  z[t] -= grad_scale;
  return log((double)sum) - (double)zt;
}

/* ---- the Llama-style model's rows (examples/llama.c) ---- */

/* RMSNorm of one row of C: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps)
 * (kept for the backward). */
HSR_HD void hsr_km_rmsnorm_row(const float *x, const float *w, float *y, int C, float eps, float *rstd) {
  float r = 1.0f / sqrtf(hsr_km_row_dot(x, x, C) / (float)C + eps);
  for (int i = 0; i < C; i++) y[i] = x[i] * r * w[i];
  *rstd = r;
}

/* Its input gradient, ADDED to dx: dx += rstd * (g - x * rstd^2 * mean(g * x)),
 * g = dy * w (the weight's gradient, dy * x * rstd, is a column sum: the
 * caller's). */
HSR_HD void hsr_km_rmsnorm_bwd_row(const float *dy, const float *x, const float *w, float rstd, float *dx, int C) {
  float a[HSR_KM_LANES] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0f;
  int j = 0;
  for (; j + HSR_KM_LANES <= C; j += HSR_KM_LANES)
    for (int k = 0; k < HSR_KM_LANES; k++) a[k] += dy[j + k] * w[j + k] * x[j + k];
  for (; j < C; j++) t += dy[j] * w[j] * x[j];
  float s = (hsr_km_lanes_total(a) + t) / (float)C * rstd * rstd;
  for (int i = 0; i < C; i++) dx[i] += rstd * (dy[i] * w[i] - x[i] * s);
}

/* SiLU x sigmoid(x), and SwiGLU's product silu(g) u with its two input
 * gradients for upstream dy. */
HSR_HD float hsr_km_sigmoid(float x) { return 1.0f / (1.0f + hsr_km_expf(-x)); }
HSR_HD float hsr_km_swiglu(float g, float u) { return g * hsr_km_sigmoid(g) * u; }
HSR_HD void hsr_km_swiglu_bwd(float g, float u, float dy, float *dg, float *du) {
  float sg = hsr_km_sigmoid(g);
  *dg = dy * u * (sg * (1.0f + g * (1.0f - sg)));
  *du = dy * g * sg;
}

/* Rotary position embedding, Hugging Face Llama's rotate-half form: in a head
 * of D = 2 h channels, pair i is (i, i + h), turned by the angle pos / theta^(2i/D).
 * The table holds (cos, sin) per position and pair; the angle is formed as
 * transformers forms it, an f32 inverse frequency (rounded here from double)
 * times the position in f32, and its cos and sin rounded from double. */
HSR_HD void hsr_km_rope_cs(int pos, int i, int D, float theta, float *c, float *s) {
  float inv = (float)(1.0 / pow((double)theta, (double)(2 * i) / (double)D));
  double a = (double)((float)pos * inv);
  *c = (float)cos(a);
  *s = (float)sin(a);
}
/* One row of `heads` heads of D channels at one position: cs is that
 * position's h (cos, sin) pairs; inverse turns back (the backward). */
HSR_HD void hsr_km_rope_row(float *x, int heads, int D, const float *cs, int inverse) {
  int h = D / 2;
  for (int k = 0; k < heads; k++) {
    float *v = x + (size_t)k * D;
    for (int i = 0; i < h; i++) {
      float c = cs[2 * i], s = inverse ? -cs[2 * i + 1] : cs[2 * i + 1], a = v[i], b = v[i + h];
      v[i] = a * c - b * s;
      v[i + h] = b * c + a * s;
    }
  }
}

#endif
