/* A double-precision GPT-2 forward written from the definition (loops, no
 * kernels, no GEMMs): what the GPT tests take finite differences of. Every
 * layer is also exposed on its own. */
#ifndef HSR_TESTS_GPT_REF64_H
#define HSR_TESTS_GPT_REF64_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

static double r64_gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

/* y = LayerNorm(x) w + b, rows of C */
static void r64_layernorm(const double *x, const double *w, const double *b, double *y, int rows, int C) {
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * C;
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) m += xr[i];
    m /= C;
    for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
    double rs = 1.0 / sqrt(v / C + (double)GPT_LN_EPS);
    for (int i = 0; i < C; i++) y[(size_t)r * C + i] = (xr[i] - m) * rs * w[i] + b[i];
  }
}

/* y (n x out) = x (n x in) W (in x out) + b */
static void r64_linear(const double *x, const double *W, const double *b, double *y, int n, int in, int out) {
  for (int r = 0; r < n; r++)
    for (int o = 0; o < out; o++) {
      double s = b[o];
      for (int i = 0; i < in; i++) s += x[(size_t)r * in + i] * W[(size_t)i * out + o];
      y[(size_t)r * out + o] = s;
    }
}

/* causal softmax of scale * x over j <= i for each row i of T x T blocks */
static void r64_softmax_causal(const double *x, double *p, int rows, int T, double scale) {
  for (int r = 0; r < rows; r++) {
    int i = r % T;
    const double *xr = x + (size_t)r * T;
    double mx = xr[0], sum = 0;
    for (int j = 1; j <= i; j++) mx = xr[j] > mx ? xr[j] : mx;
    for (int j = 0; j <= i; j++) sum += exp(scale * (xr[j] - mx));
    for (int j = 0; j < T; j++) p[(size_t)r * T + j] = j <= i ? exp(scale * (xr[j] - mx)) / sum : 0.0;
  }
}

/* multi-head causal attention: qkv (B T x 3C) -> y (B T x C) */
static void r64_attention(const double *qkv, double *y, int B, int T, int C, int H) {
  int hs = C / H;
  double *s = malloc((size_t)T * sizeof *s);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < T; i++) {
        const double *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * hs;
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= i; j++) {
          const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * hs;
          double d = 0;
          for (int e = 0; e < hs; e++) d += q[e] * k[e];
          s[j] = d / sqrt((double)hs);
          mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
        for (int e = 0; e < hs; e++) {
          double acc = 0;
          for (int j = 0; j <= i; j++)
            acc += s[j] / sum * qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * hs + e];
          y[((size_t)b * T + i) * C + (size_t)h * hs + e] = acc;
        }
      }
  free(s);
}

/* mean cross-entropy of the whole model over B x T tokens; w[i] per parameter */
static double r64_model_loss(const gpt_cfg *c, double *const *w, const int32_t *in, const int32_t *tgt, int B, int T) {
  int C = c->n_embd, V = c->vocab, N = B * T;
  size_t nc = (size_t)N * C;
  double *x = malloc(nc * sizeof *x), *a = malloc(nc * sizeof *a), *qkv = malloc(3 * nc * sizeof *qkv);
  double *y = malloc(nc * sizeof *y), *f = malloc(4 * nc * sizeof *f), *t = malloc(nc * sizeof *t);
  for (int n = 0; n < N; n++)
    for (int e = 0; e < C; e++)
      x[(size_t)n * C + e] = w[GPT_WTE][(size_t)in[n] * C + e] + w[GPT_WPE][(size_t)(n % T) * C + e];
  for (int l = 0; l < c->n_layer; l++) {
#define W_(k) w[GPT_PARAM(l, k)]
    r64_layernorm(x, W_(GPT_LN1_W), W_(GPT_LN1_B), a, N, C);
    r64_linear(a, W_(GPT_ATTN_W), W_(GPT_ATTN_B), qkv, N, C, 3 * C);
    r64_attention(qkv, y, B, T, C, c->n_head);
    r64_linear(y, W_(GPT_APROJ_W), W_(GPT_APROJ_B), t, N, C, C);
    for (size_t i = 0; i < nc; i++) x[i] += t[i];
    r64_layernorm(x, W_(GPT_LN2_W), W_(GPT_LN2_B), a, N, C);
    r64_linear(a, W_(GPT_FC_W), W_(GPT_FC_B), f, N, C, 4 * C);
    for (size_t i = 0; i < 4 * nc; i++) f[i] = r64_gelu(f[i]);
    r64_linear(f, W_(GPT_MPROJ_W), W_(GPT_MPROJ_B), t, N, 4 * C, C);
    for (size_t i = 0; i < nc; i++) x[i] += t[i];
#undef W_
  }
  r64_layernorm(x, w[GPT_LNF_W], w[GPT_LNF_B], a, N, C);
  double loss = 0, *zs = malloc((size_t)V * sizeof *zs);
  for (int n = 0; n < N; n++) {
    double mx = -1e300, sum = 0, zt = 0;
    for (int v = 0; v < V; v++) {
      double z = 0;
      for (int e = 0; e < C; e++) z += a[(size_t)n * C + e] * w[GPT_WTE][(size_t)v * C + e];
      zs[v] = z;
      mx = z > mx ? z : mx;
      if (v == tgt[n]) zt = z;
    }
    for (int v = 0; v < V; v++) sum += exp(zs[v] - mx);
    loss += log(sum) - (zt - mx);
  }
  free(x), free(a), free(qkv), free(y), free(f), free(t), free(zs);
  return loss / N;
}

#endif
