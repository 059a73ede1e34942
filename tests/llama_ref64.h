/* A double-precision Llama-style forward written from the definition (loops,
 * no kernels, no GEMMs): what the Llama tests take finite differences of.
 * Every layer is also exposed on its own. */
#ifndef HSR_TESTS_LLAMA_REF64_H
#define HSR_TESTS_LLAMA_REF64_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

/* y = x / sqrt(mean(x^2) + eps) w, rows of C */
static void l64_rmsnorm(const double *x, const double *w, double *y, int rows, int C) {
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * C;
    double ss = 0;
    for (int i = 0; i < C; i++) ss += xr[i] * xr[i];
    double rs = 1.0 / sqrt(ss / C + LLAMA_RMS_EPS);
    for (int i = 0; i < C; i++) y[(size_t)r * C + i] = xr[i] * rs * w[i];
  }
}

/* y (n x out) = x (n x in) W^T, W [out, in] */
static void l64_linear(const double *x, const double *W, double *y, int n, int in, int out) {
  for (int r = 0; r < n; r++)
    for (int o = 0; o < out; o++) {
      double s = 0;
      for (int i = 0; i < in; i++) s += x[(size_t)r * in + i] * W[(size_t)o * in + i];
      y[(size_t)r * out + o] = s;
    }
}

static double l64_swiglu(double g, double u) { return g / (1.0 + exp(-g)) * u; }

/* rotate-half rotary embedding of rows of `heads` heads of D, row r at position r % T */
static void l64_rope(double *x, int rows, int T, int heads, int D) {
  int h = D / 2;
  for (int r = 0; r < rows; r++)
    for (int k = 0; k < heads; k++) {
      double *v = x + ((size_t)r * heads + k) * D;
      for (int i = 0; i < h; i++) {
        double a = (r % T) / pow(LLAMA_ROPE_THETA, 2.0 * i / D), c = cos(a), s = sin(a), x0 = v[i], x1 = v[i + h];
        v[i] = x0 * c - x1 * s;
        v[i + h] = x1 * c + x0 * s;
      }
    }
}

/* grouped-query causal attention: q (B T x H D), k, v (B T x G D) -> y (B T x H D) */
static void l64_attention(const double *q, const double *k, const double *v, double *y, int B, int T, int H, int G,
                          int D) {
  double *p = malloc((size_t)T * sizeof *p), sc = 1.0 / sqrt((double)D);
  int R = H / G;
  for (int b = 0; b < B; b++)
    for (int j = 0; j < H; j++)
      for (int i = 0; i < T; i++) {
        const double *qi = q + ((size_t)(b * T + i) * H + j) * D;
        double mx = -1e300, sum = 0;
        for (int t = 0; t <= i; t++) {
          const double *kt = k + ((size_t)(b * T + t) * G + j / R) * D;
          double s = 0;
          for (int e = 0; e < D; e++) s += qi[e] * kt[e];
          p[t] = s * sc;
          mx = p[t] > mx ? p[t] : mx;
        }
        for (int t = 0; t <= i; t++) sum += (p[t] = exp(p[t] - mx));
        double *yi = y + ((size_t)(b * T + i) * H + j) * D;
        for (int e = 0; e < D; e++) {
          double s = 0;
          for (int t = 0; t <= i; t++) s += p[t] / sum * v[((size_t)(b * T + t) * G + j / R) * D + e];
          yi[e] = s;
        }
      }
  free(p);
}

/* mean cross-entropy of the whole model over B x T tokens; w[i] per parameter */
static double l64_model_loss(const gpt_cfg *c, double *const *w, const int32_t *in, const int32_t *tgt, int B, int T) {
  int C = c->n_embd, V = c->vocab, N = B * T, H = c->n_head, G = llama_kv_heads(c), D = C / H, F = llama_ff(c);
  size_t nc = (size_t)N * C, nkv = (size_t)N * G * D, nf = (size_t)N * F;
  double *x = malloc(nc * sizeof *x), *a = malloc(nc * sizeof *a), *q = malloc(nc * sizeof *q);
  double *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v), *y = malloc(nc * sizeof *y);
  double *g = malloc(nf * sizeof *g), *u = malloc(nf * sizeof *u), *t = malloc(nc * sizeof *t);
  for (int n = 0; n < N; n++)
    for (int e = 0; e < C; e++) x[(size_t)n * C + e] = w[LLAMA_EMBED][(size_t)in[n] * C + e];
  for (int l = 0; l < c->n_layer; l++) {
#define W_(kk) w[LLAMA_PARAM(l, kk)]
    l64_rmsnorm(x, W_(LLAMA_IN_NORM), a, N, C);
    l64_linear(a, W_(LLAMA_Q), q, N, C, C);
    l64_linear(a, W_(LLAMA_K), k, N, C, G * D);
    l64_linear(a, W_(LLAMA_V), v, N, C, G * D);
    l64_rope(q, N, T, H, D);
    l64_rope(k, N, T, G, D);
    l64_attention(q, k, v, y, B, T, H, G, D);
    l64_linear(y, W_(LLAMA_O), t, N, C, C);
    for (size_t i = 0; i < nc; i++) x[i] += t[i];
    l64_rmsnorm(x, W_(LLAMA_POST_NORM), a, N, C);
    l64_linear(a, W_(LLAMA_GATE), g, N, C, F);
    l64_linear(a, W_(LLAMA_UP), u, N, C, F);
    for (size_t i = 0; i < nf; i++) g[i] = l64_swiglu(g[i], u[i]);
    l64_linear(g, W_(LLAMA_DOWN), t, N, F, C);
    for (size_t i = 0; i < nc; i++) x[i] += t[i];
#undef W_
  }
  l64_rmsnorm(x, w[LLAMA_NORM], a, N, C);
  double loss = 0, *zs = malloc((size_t)V * sizeof *zs);
  for (int n = 0; n < N; n++) {
    double mx = -1e300, sum = 0, zt = 0;
    for (int o = 0; o < V; o++) {
      double z = 0;
      for (int e = 0; e < C; e++) z += a[(size_t)n * C + e] * w[LLAMA_HEAD][(size_t)o * C + e];
      zs[o] = z;
      mx = z > mx ? z : mx;
      if (o == tgt[n]) zt = z;
    }
    for (int o = 0; o < V; o++) sum += exp(zs[o] - mx);
    loss += log(sum) - (zt - mx);
  }
  free(x), free(a), free(q), free(k), free(v), free(y), free(g), free(u), free(t), free(zs);
  return loss / N;
}

#endif
