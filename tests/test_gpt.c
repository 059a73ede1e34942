/* Unit tests of the GPT example and its layer kernels: every layer's forward
 * against a double-precision reference written from the definition, and its
 * backward against finite differences of that reference in double (so the
 * f32 gradients are checked against the true derivative, not against f32
 * noise); the whole model's gradient the same way at small sizes, the tied
 * embedding included; linear wrapping computing the same bits as block
 * wrapping; the data windows; the reference trainer learning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cblas.h>

#include "gpt.h"
#include "gpt_ref64.h"
#include "hsr/kernels.h"
#include "hsr/kmath.h"
#include "kernels_ref.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static hsr_device *host(void) {
  static hsr_device *d;
  if (!d) OK(hsr_device_open(HSR_DEVICE_HOST, 0, &d));
  return d;
}

static void fill(uint64_t *rng, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = ref_uniform(rng, lo, hi);
}
static double *widen(const float *x, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof *d);
  for (size_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}

/* |analytic - fd| against the scale of the whole gradient */
static void expect_close(const char *what, const float *an, const double *fd, size_t n, double tol) {
  double scale = 1e-12, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(fd[i]));
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)an[i] - fd[i]) / scale;
    if (e > worst) worst = e, at = i;
  }
  if (worst > tol)
    fail_msg("%s: element %zu: analytic %.9g, double-precision finite difference %.9g (error %.2e of the scale %.3g "
             "> %.0e)",
             what, at, an[at], fd[at], worst, scale, tol);
}

/* ---- per-element math ---- */
static void test_expf_tanh_gelu(void **state) {
  (void)state;
  double worst = 0;
  for (int i = -870000; i <= 880000; i += 7) {
    float x = (float)i / 10000.0f;
    double r = exp((double)x), e = fabs(hsr_km_expf(x) - r) / r;
    worst = fmax(worst, e);
  }
  if (worst > 3e-7) fail_msg("expf: relative error %.3g", worst);
  for (int i = -2000; i <= 2000; i++) {
    float x = (float)i / 100.0f;
    if (fabs(hsr_km_tanhf(x) - tanh((double)x)) > 2e-7)
      fail_msg("tanh(%g) = %.9g, libm %.9g", x, hsr_km_tanhf(x), tanh(x));
    double g = r64_gelu(x);
    if (fabs(hsr_km_gelu(x) - g) > 1e-6 * (1 + fabs(g)))
      fail_msg("gelu(%g) = %.9g, reference %.9g", x, hsr_km_gelu(x), g);
    double h = 1e-6, fd = (r64_gelu(x + h) - r64_gelu(x - h)) / (2 * h);
    if (fabs(hsr_km_gelu_grad(x) - fd) > 1e-6)
      fail_msg("gelu'(%g) = %.9g, finite difference %.9g", x, hsr_km_gelu_grad(x), fd);
  }
  assert_true(hsr_km_expf(-1000.0f) < 1e-37f && isinf(1.0f / 0.0f) && hsr_km_expf(0.0f) == 1.0f);
  assert_true(isnan(hsr_km_expf(NAN)));
}

/* ---- LayerNorm ---- */
static void test_layernorm(void **state) {
  (void)state;
  uint64_t rng = 11;
  const int rows = 5;
  for (int C = 13; C <= 32; C += 19) {
    size_t n = (size_t)rows * C;
    float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(C * 4), *b = malloc(C * 4), *dy = malloc(n * 4);
    float *dx = malloc(n * 4), *dw = malloc(C * 4), *db = malloc(C * 4), m[8], r[8];
    fill(&rng, x, n, -2, 3), fill(&rng, w, C, 0.5f, 1.5f), fill(&rng, b, C, -0.5f, 0.5f), fill(&rng, dy, n, -1, 1);
    OK(hsr_kernels_layernorm(host(), NULL, rows, C, x, w, b, GPT_LN_EPS, y, m, r));
    double *xd = widen(x, n), *wd = widen(w, C), *bd = widen(b, C), *yd = malloc(n * 8), *fd = malloc(n * 8);
    r64_layernorm(xd, wd, bd, yd, rows, C);
    for (size_t i = 0; i < n; i++)
      if (fabs(y[i] - yd[i]) > 2e-6 * (1 + fabs(yd[i])))
        fail_msg("layernorm C=%d: y[%zu] %.9g vs %.9g", C, i, y[i], yd[i]);
    /* the gradients ADD: start from 0.25 and take it off */
    for (size_t i = 0; i < n; i++) dx[i] = 0.25f;
    for (int i = 0; i < C; i++) dw[i] = db[i] = 0.25f;
    OK(hsr_kernels_layernorm_bwd(host(), NULL, rows, C, dy, x, w, m, r, dx, dw, db));
    for (size_t i = 0; i < n; i++) dx[i] -= 0.25f;
    for (int i = 0; i < C; i++) dw[i] -= 0.25f, db[i] -= 0.25f;
    /* finite differences of sum(dy * LayerNorm(x)) in double */
    double *yp = malloc(n * 8), h = 1e-6;
#define LOSS(out)                                       \
  ({                                                    \
    r64_layernorm(xd, wd, bd, yp, rows, C);             \
    double s_ = 0;                                      \
    for (size_t k = 0; k < n; k++) s_ += dy[k] * yp[k]; \
    out = s_;                                           \
  })
    double lp, lm;
    for (size_t i = 0; i < n; i++) {
      double s0 = xd[i];
      xd[i] = s0 + h, LOSS(lp), xd[i] = s0 - h, LOSS(lm), xd[i] = s0;
      fd[i] = (lp - lm) / (2 * h);
    }
    expect_close("layernorm dx", dx, fd, n, 1e-5);
    for (int i = 0; i < C; i++) {
      double s0 = wd[i];
      wd[i] = s0 + h, LOSS(lp), wd[i] = s0 - h, LOSS(lm), wd[i] = s0;
      fd[i] = (lp - lm) / (2 * h);
    }
    expect_close("layernorm dw", dw, fd, C, 1e-5);
    for (int i = 0; i < C; i++) {
      double s0 = bd[i];
      bd[i] = s0 + h, LOSS(lp), bd[i] = s0 - h, LOSS(lm), bd[i] = s0;
      fd[i] = (lp - lm) / (2 * h);
    }
    expect_close("layernorm db", db, fd, C, 1e-5);
#undef LOSS
    free(x), free(y), free(w), free(b), free(dy), free(dx), free(dw), free(db);
    free(xd), free(wd), free(bd), free(yd), free(fd), free(yp);
  }
}

/* ---- causal softmax ---- */
static void test_softmax_causal(void **state) {
  (void)state;
  uint64_t rng = 12;
  const int T = 11, rows = 2 * T;
  const float scale = 0.7f;
  size_t n = (size_t)rows * T;
  float *x = malloc(n * 4), *p = malloc(n * 4), *dp = malloc(n * 4), *dx = malloc(n * 4);
  fill(&rng, x, n, -4, 4), fill(&rng, dp, n, -1, 1);
  OK(hsr_kernels_softmax_causal(host(), NULL, rows, T, scale, x, p));
  double *xd = widen(x, n), *pd = malloc(n * 8), *fd = malloc(n * 8), h = 1e-6;
  r64_softmax_causal(xd, pd, rows, T, scale);
  for (size_t i = 0; i < n; i++)
    if (fabs(p[i] - pd[i]) > 1e-6) fail_msg("softmax p[%zu] %.9g vs %.9g", i, p[i], pd[i]);
  for (int r = 0; r < rows; r++)
    for (int j = r % T + 1; j < T; j++) assert_true(p[(size_t)r * T + j] == 0.0f); /* the mask */
  OK(hsr_kernels_softmax_causal_bwd(host(), NULL, rows, T, scale, p, dp, dx));
  for (size_t i = 0; i < n; i++) {
    double s0 = xd[i], lp = 0, lm = 0;
    xd[i] = s0 + h;
    r64_softmax_causal(xd, pd, rows, T, scale);
    for (size_t k = 0; k < n; k++) lp += dp[k] * pd[k];
    xd[i] = s0 - h;
    r64_softmax_causal(xd, pd, rows, T, scale);
    for (size_t k = 0; k < n; k++) lm += dp[k] * pd[k];
    xd[i] = s0;
    fd[i] = (lp - lm) / (2 * h);
  }
  expect_close("softmax_causal dx", dx, fd, n, 1e-5);
  free(x), free(p), free(dp), free(dx), free(xd), free(pd), free(fd);
}

/* ---- cross-entropy, GELU, bias, embedding ---- */
static double r64_xent(const double *z, int V, int t) {
  double mx = z[0], s = 0;
  for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
  for (int v = 0; v < V; v++) s += exp(z[v] - mx);
  return log(s) - (z[t] - mx);
}

static void test_xent_gelu_bias_embed(void **state) {
  (void)state;
  uint64_t rng = 13;
  const int rows = 4, V = 19;
  float z[4 * 19], g[4 * 19];
  int32_t t[4] = {0, 18, 7, 7};
  double rl[4], zd[4 * 19], fd[4 * 19], h = 1e-6;
  fill(&rng, z, rows * V, -3, 3);
  for (int i = 0; i < rows * V; i++) zd[i] = z[i];
  memcpy(g, z, sizeof z);
  OK(hsr_kernels_xent(host(), NULL, rows, V, g, t, 0.25f, rl));
  for (int r = 0; r < rows; r++) {
    double want = r64_xent(zd + r * V, V, t[r]);
    if (fabs(rl[r] - want) > 1e-6 * (1 + want)) fail_msg("xent row %d: %.9g vs %.9g", r, rl[r], want);
    for (int v = 0; v < V; v++) {
      int i = r * V + v;
      double s0 = zd[i];
      zd[i] = s0 + h;
      double lp = r64_xent(zd + r * V, V, t[r]);
      zd[i] = s0 - h;
      double lm = r64_xent(zd + r * V, V, t[r]);
      zd[i] = s0;
      fd[i] = 0.25 * (lp - lm) / (2 * h);
    }
  }
  expect_close("xent dz", g, fd, (size_t)rows * V, 1e-5);
  int32_t bad[1] = {V};
  assert_int_equal(hsr_kernels_xent(host(), NULL, 1, V, g, bad, 1.0f, rl), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "outside [0, 19)"));

  /* GELU loops = the formula; bias add and its column sums */
  float x[37], y[37], dy[37], dx[37];
  fill(&rng, x, 37, -5, 5), fill(&rng, dy, 37, -1, 1);
  OK(hsr_kernels_gelu(host(), NULL, 37, x, y));
  OK(hsr_kernels_gelu_bwd(host(), NULL, 37, x, dy, dx));
  for (int i = 0; i < 37; i++) assert_true(y[i] == hsr_km_gelu(x[i]) && dx[i] == dy[i] * hsr_km_gelu_grad(x[i]));
  float m[3][5] = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}}, bias[5] = {1, 1, 1, 1, 2}, db[5] = {0};
  OK(hsr_kernels_bias_bwd(host(), NULL, 3, 5, &m[0][0], db));
  OK(hsr_kernels_bias_add(host(), NULL, 3, 5, bias, &m[0][0]));
  assert_true(db[0] == 18 && db[4] == 30 && m[2][4] == 17 && m[0][0] == 2);

  /* embedding: out = wte[tok] + wpe[pos]; the backward adds every use */
  float wte[4 * 3], wpe[2 * 3], out[4 * 3], dwte[4 * 3] = {0}, dwpe[2 * 3] = {0}, d1[4 * 3];
  int32_t tok[4] = {2, 2, 0, 3}; /* B 2 x T 2; token 2 twice */
  fill(&rng, wte, 12, -1, 1), fill(&rng, wpe, 6, -1, 1);
  for (int i = 0; i < 12; i++) d1[i] = (float)(i + 1);
  OK(hsr_kernels_embed(host(), NULL, 2, 2, 3, 4, tok, wte, wpe, out));
  OK(hsr_kernels_embed_bwd(host(), NULL, 2, 2, 3, 4, tok, d1, dwte, dwpe));
  for (int i = 0; i < 4; i++)
    for (int c = 0; c < 3; c++) assert_true(out[i * 3 + c] == wte[tok[i] * 3 + c] + wpe[(i % 2) * 3 + c]);
  assert_true(dwte[2 * 3 + 0] == 1 + 4 && dwte[0] == 7 && dwte[3 * 3 + 2] == 12 && dwte[1 * 3] == 0);
  assert_true(dwpe[0] == 1 + 7 && dwpe[3 + 2] == 6 + 12);
  int32_t oob[4] = {0, 4, 0, 0};
  assert_int_equal(hsr_kernels_embed(host(), NULL, 2, 2, 3, 4, oob, wte, wpe, out), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "outside the vocabulary"));
}

/* ---- attention with the causal mask ---- */
/* B x T sequences: qkv against the double reference and its finite differences */
static void check_attention(int B, int T, int C, int H, uint64_t seed) {
  uint64_t rng = seed;
  size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * H * T * T;
  float *qkv = malloc(nq * 4), *att = malloc(na * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4), *dq = malloc(nq * 4);
  float *scratch = malloc((size_t)H * T * T * 4);
  fill(&rng, qkv, nq, -1.5f, 1.5f), fill(&rng, dy, ny, -1, 1);
  for (size_t i = 0; i < na; i++) att[i] = NAN; /* what the blocked GEMMs skip must come out 0 */
  OK(gpt_attention(host(), NULL, B, T, C, H, qkv, att, y));
  double *qd = widen(qkv, nq), *yd = malloc(ny * 8), *fd = malloc(nq * 8), h = 1e-6;
  r64_attention(qd, yd, B, T, C, H);
  for (size_t i = 0; i < ny; i++)
    if (fabs(y[i] - yd[i]) > 1e-6 * (1 + fabs(yd[i])))
      fail_msg("attention T=%d: y[%zu] %.9g vs %.9g", T, i, y[i], yd[i]);
  for (size_t r = 0; r < (size_t)B * H * T; r++)
    for (int j = (int)(r % T) + 1; j < T; j++) assert_true(att[r * T + j] == 0.0f); /* the mask */
  /* token 0's output is its own value vector in every head */
  for (int e = 0; e < C; e++) assert_true(fabs(y[e] - qkv[2 * C + e]) < 1e-6);
  for (size_t i = 0; i < nq; i++) dq[i] = NAN; /* every element of dqkv is written */
  OK(gpt_attention_bwd(host(), NULL, B, T, C, H, qkv, att, dy, dq, scratch));
  for (size_t i = 0; i < nq; i++) {
    double s0 = qd[i], lp = 0, lm = 0;
    qd[i] = s0 + h;
    r64_attention(qd, yd, B, T, C, H);
    for (size_t k = 0; k < ny; k++) lp += dy[k] * yd[k];
    qd[i] = s0 - h;
    r64_attention(qd, yd, B, T, C, H);
    for (size_t k = 0; k < ny; k++) lm += dy[k] * yd[k];
    qd[i] = s0;
    fd[i] = (lp - lm) / (2 * h);
  }
  expect_close("attention dqkv", dq, fd, nq, 1e-5);
  free(qkv), free(att), free(y), free(dy), free(dq), free(scratch), free(qd), free(yd), free(fd);
}

static void test_attention(void **state) {
  (void)state;
  check_attention(2, 5, 6, 2, 14);
  check_attention(1, 131, 4, 2, 15); /* three query blocks of 64, the last partial */
}

/* ---- the whole model ---- */
typedef struct model {
  gpt_cfg c;
  int np;
  float **w, **g;
  double **wd;
} model;

static void model_make(model *m, const gpt_cfg *c, uint64_t seed) {
  m->c = *c;
  m->np = gpt_num_params(c);
  m->w = calloc((size_t)m->np, sizeof *m->w);
  m->g = calloc((size_t)m->np, sizeof *m->g);
  m->wd = calloc((size_t)m->np, sizeof *m->wd);
  uint64_t rng = seed;
  for (int i = 0; i < m->np; i++) {
    size_t n = gpt_param_numel(c, i);
    m->w[i] = malloc(n * 4), m->g[i] = calloc(n, 4);
    gpt_param_init(c, i, m->w[i]);
    /* larger weights and non-trivial biases/LayerNorms so every path matters */
    for (size_t j = 0; j < n; j++) m->w[i][j] = m->w[i][j] * 10.0f + ref_uniform(&rng, -0.1f, 0.1f);
    m->wd[i] = widen(m->w[i], n);
  }
}

static void model_free(model *m) {
  for (int i = 0; i < m->np; i++) free(m->w[i]), free(m->g[i]), free(m->wd[i]);
  free(m->w), free(m->g), free(m->wd);
}

static void tokens(uint64_t *rng, int32_t *t, int n, int V) {
  for (int i = 0; i < n; i++) t[i] = (int32_t)(ref_rand(rng) % (uint64_t)V);
}

/* f32 analytic gradients of the model against double finite differences */
static void check_model_grad(const gpt_cfg *c, int B, int T, size_t wte_stride) {
  model m;
  model_make(&m, c, 21);
  uint64_t rng = 22;
  int32_t *in = malloc((size_t)B * T * 4), *tg = malloc((size_t)B * T * 4);
  tokens(&rng, in, B * T, c->vocab), tokens(&rng, tg, B * T, c->vocab);
  gpt_work *w;
  OK(gpt_work_create(c, B, T, NULL, NULL, &w));
  gpt_arrays a = {c, m.w, m.g};
  gpt_binder b = gpt_arrays_binder(&a);
  double loss;
  OK(gpt_fwd_bwd(c, w, in, tg, B, T, &b, &loss));
  double ref = r64_model_loss(c, m.wd, in, tg, B, T);
  if (fabs(loss - ref) > 1e-5 * ref) fail_msg("model loss %.9g, double reference %.9g", loss, ref);
  int checked = 0;
  for (int i = 0; i < m.np; i++) {
    size_t n = gpt_param_numel(c, i), stride = i == GPT_WTE ? wte_stride : 1, k = 0;
    float *an = malloc(n * 4);
    double *fd = malloc(n * 8), h = 1e-6;
    for (size_t j = 0; j < n; j += stride, k++) {
      double s0 = m.wd[i][j];
      m.wd[i][j] = s0 + h;
      double lp = r64_model_loss(c, m.wd, in, tg, B, T);
      m.wd[i][j] = s0 - h;
      double lm = r64_model_loss(c, m.wd, in, tg, B, T);
      m.wd[i][j] = s0;
      fd[k] = (lp - lm) / (2 * h);
      an[k] = m.g[i][j];
    }
    char name[64];
    gpt_param_name(c, i, name, sizeof name);
    expect_close(name, an, fd, k, 1e-3); /* f32 through the layers: ~1e-4 seen */
    checked += (int)k;
    free(an), free(fd);
  }
  assert_true(checked > 60);
  gpt_work_free(w);
  free(in), free(tg);
  model_free(&m);
}

static void test_model_grad(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2, .n_head = 2, .n_embd = 8, .n_ctx = 6, .vocab = 256, .seed = 5};
  check_model_grad(&c, 2, 5, 3);
}

/* The tied head alone: no blocks, the embedding and the head share wte. */
static void test_tied_head_grad(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 0, .n_head = 1, .n_embd = 5, .n_ctx = 4, .vocab = 7, .seed = 6};
  check_model_grad(&c, 3, 4, 1);
}

/* Linear wrapping opens four units per block instead of one: the same
 * arithmetic, so the same bits; and a pointer used outside its unit's
 * window would be NULL here (the model clears them) and crash. */
static void test_wrap_linear_same_bits(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2, .n_head = 2, .n_embd = 16, .n_ctx = 8, .vocab = 256, .seed = 7}, cl = c;
  cl.wrap_linear = 1;
  assert_int_equal(gpt_num_units(&c), 3);
  assert_int_equal(gpt_num_units(&cl), 9);
  model a, b;
  model_make(&a, &c, 31), model_make(&b, &cl, 31);
  uint64_t rng = 32;
  int32_t in[3 * 8], tg[3 * 8];
  tokens(&rng, in, 24, 256), tokens(&rng, tg, 24, 256);
  gpt_work *w;
  OK(gpt_work_create(&c, 3, 8, NULL, NULL, &w));
  gpt_arrays aa = {&c, a.w, a.g}, ab = {&cl, b.w, b.g};
  gpt_binder ba = gpt_arrays_binder(&aa), bb = gpt_arrays_binder(&ab);
  double la, lb;
  OK(gpt_fwd_bwd(&c, w, in, tg, 3, 8, &ba, &la));
  OK(gpt_fwd_bwd(&cl, w, in, tg, 3, 8, &bb, &lb));
  assert_true(la == lb);
  for (int i = 0; i < a.np; i++) assert_memory_equal(a.g[i], b.g[i], gpt_param_numel(&c, i) * 4);
  /* a forward pass alone gives the same loss */
  double lf;
  OK(gpt_forward(&c, w, in, tg, 3, 8, &ba, &lf));
  assert_true(lf == la);
  gpt_work_free(w);
  model_free(&a), model_free(&b);
}

static void test_names_shapes(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_ctx = 16, .vocab = 256, .wrap_linear = 1};
  char name[64];
  int64_t s[2];
  int g;
  assert_int_equal(gpt_num_params(&c), 4 + 24);
  gpt_param_name(&c, GPT_WTE, name, sizeof name);
  assert_string_equal(name, "wte.weight");
  assert_int_equal(gpt_param_shape(&c, GPT_WTE, s, &g), 2);
  assert_true(s[0] == 256 && s[1] == 32 && g == 0);
  gpt_param_name(&c, GPT_PARAM(1, GPT_ATTN_W), name, sizeof name);
  assert_string_equal(name, "h.1.attn.c_attn.weight");
  gpt_param_shape(&c, GPT_PARAM(1, GPT_ATTN_W), s, &g);
  assert_true(s[0] == 32 && s[1] == 96); /* [in, out] */
  gpt_param_shape(&c, GPT_PARAM(0, GPT_MPROJ_W), s, &g);
  assert_true(s[0] == 128 && s[1] == 32);
  assert_int_equal(gpt_param_shape(&c, GPT_PARAM(0, GPT_FC_B), s, &g), 1);
  assert_true(s[0] == 128 && g == 1);
  gpt_param_name(&c, GPT_PARAM(0, GPT_MPROJ_B), name, sizeof name);
  assert_string_equal(name, "h.0.mlp.c_proj.bias");
  assert_int_equal(gpt_param_unit(&c, GPT_PARAM(1, GPT_LN2_W)), 1 + 4 + 2); /* ln_2 rides with c_fc */
  gpt_unit_name(&c, 1 + 4 + 3, name, sizeof name);
  assert_string_equal(name, "h.1.mlp.c_proj");
  /* 124M-parameter GPT-2 small: 124439808 weights, wte tied */
  gpt_cfg g2 = {.n_layer = 12, .n_head = 12, .n_embd = 768, .n_ctx = 1024, .vocab = 50257};
  assert_int_equal(gpt_num_weights(&g2), 124439808);
  gpt_cfg badc = c;
  badc.n_head = 5;
  assert_int_equal(gpt_cfg_check(&badc), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "multiple of the heads"));
}

/* ---- data ---- */
static void test_data(void **state) {
  (void)state;
  uint8_t text[1000];
  uint64_t rng = 17;
  for (int i = 0; i < 1000; i++) text[i] = (uint8_t)ref_rand(&rng);
  gpt_data d;
  OK(gpt_data_wrap(text, sizeof text, 16, &d));
  assert_int_equal(d.split, 900);
  assert_int_equal(gpt_data_val_windows(&d, 16), (100 - 1) / 16);
  int32_t in[16], tg[16], in2[16], tg2[16];
  int seen[1000] = {0}, distinct = 0;
  for (int64_t g = 0; g < 2000; g++) {
    gpt_data_window(&d, 3, g, 16, in, tg);
    uint8_t wb[17];
    for (int t = 0; t < 16; t++) wb[t] = (uint8_t)in[t];
    wb[16] = (uint8_t)tg[15];
    for (int t = 0; t < 15; t++) assert_int_equal(tg[t], in[t + 1]); /* targets are the next bytes */
    int pos = -1;
    for (int p = 0; p + 17 <= 1000 && pos < 0; p++)
      if (!memcmp(text + p, wb, 17)) pos = p;
    /* every byte of a training window, targets included, lies before the held-out tail */
    if (pos < 0 || pos + 17 > 900) fail_msg("window of sample %lld at %d: outside [0, 900)", (long long)g, pos);
    distinct += !seen[pos]++;
  }
  assert_true(distinct > 700); /* 884 positions, 2000 draws: ~790 expected */
  gpt_data_window(&d, 3, 77, 16, in, tg);
  gpt_data_window(&d, 3, 77, 16, in2, tg2);
  assert_memory_equal(in, in2, sizeof in);
  gpt_data_window(&d, 4, 77, 16, in2, tg2);
  assert_memory_not_equal(in, in2, sizeof in); /* another seed, another position */
  gpt_data_val_window(&d, 5, 16, in, tg);
  assert_int_equal(in[0], text[900 + 80]);
  assert_int_equal(tg[15], text[900 + 80 + 16]);
  assert_int_equal(gpt_data_wrap(text, 16, 16, &d), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "shorter --seq"));
  assert_int_equal(gpt_data_open("/nonexistent/x", 16, &d), HSR_ERR_IO);
}

/* ---- the reference trainer learns a text ---- */
static void test_reference_learns(void **state) {
  (void)state;
  static const char *words[] = {"the ", "model ", "learns ", "bytes ", "of ", "text ", "and ", "sharded ", "units "};
  static uint8_t text[20000];
  uint64_t rng = 41;
  size_t n = 0;
  while (n + 16 < sizeof text) {
    const char *wd = words[ref_rand(&rng) % 9];
    memcpy(text + n, wd, strlen(wd));
    n += strlen(wd);
  }
  gpt_data d;
  OK(gpt_data_wrap(text, n, 16, &d));
  gpt_cfg c = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 16, .vocab = 256, .seed = 1};
  gpt_opt o = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f, .clip = 1.0};
  gpt_ref *r;
  OK(gpt_ref_create(&c, &o, 8, 16, &r));
  double first = 0, last = 0, loss, gn;
  for (int s = 0; s < 60; s++) {
    OK(gpt_ref_step(r, &d, 9, (int64_t)s * 8, o.lr, &loss, &gn));
    assert_true(isfinite(loss) && gn > 0);
    if (s == 0) first = loss;
    last = loss;
  }
  if (!(first > 5.0 && last < 2.5)) fail_msg("loss did not fall: %.4f -> %.4f", first, last);
  gpt_ref_free(r);
}

int main(void) {
  openblas_set_num_threads(1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expf_tanh_gelu),   cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_softmax_causal),   cmocka_unit_test(test_xent_gelu_bias_embed),
      cmocka_unit_test(test_attention),        cmocka_unit_test(test_model_grad),
      cmocka_unit_test(test_tied_head_grad),   cmocka_unit_test(test_wrap_linear_same_bits),
      cmocka_unit_test(test_names_shapes),     cmocka_unit_test(test_data),
      cmocka_unit_test(test_reference_learns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
