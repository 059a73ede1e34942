/* Unit tests of the Llama-style model and its layer kernels: RMSNorm,
 * SwiGLU, the rotary embedding and grouped-query attention, each forward
 * against a double-precision reference written from the definition
 * (tests/llama_ref64.h) and its backward against finite differences of that
 * reference in double; the whole model's gradient the same way (loss within
 * 1e-5 of the reference); linear wrapping computing the same bits as block
 * wrapping; transformers' LlamaForCausalLM names and shapes; the reference
 * trainer learning. */
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

#include "hsr/kernels.h"
#include "hsr/kmath.h"
#include "kernels_ref.h"
#include "llama.h"
#include "llama_ref64.h"

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

static void expect_fwd(const char *what, const float *y, const double *yd, size_t n, double tol) {
  for (size_t i = 0; i < n; i++)
    if (fabs(y[i] - yd[i]) > tol * (1 + fabs(yd[i]))) fail_msg("%s: y[%zu] %.9g vs %.9g", what, i, y[i], yd[i]);
}

/* d/dv of sum(dy * f(v)) at every element of v, by central differences in double */
#define FD(v, n, fd, loss_expr)              \
  do {                                       \
    double h_ = 1e-6, lp_, lm_;              \
    for (size_t i_ = 0; i_ < (n); i_++) {    \
      double s0_ = (v)[i_];                  \
      (v)[i_] = s0_ + h_, lp_ = (loss_expr); \
      (v)[i_] = s0_ - h_, lm_ = (loss_expr); \
      (v)[i_] = s0_;                         \
      (fd)[i_] = (lp_ - lm_) / (2 * h_);     \
    }                                        \
  } while (0)

static double dot(const float *a, const double *b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* ---- RMSNorm ---- */
static double rms_loss(const double *x, const double *w, const float *dy, double *y, int rows, int C) {
  l64_rmsnorm(x, w, y, rows, C);
  return dot(dy, y, (size_t)rows * C);
}

static void test_rmsnorm(void **state) {
  (void)state;
  uint64_t rng = 11;
  const int rows = 5;
  for (int C = 13; C <= 32; C += 19) { /* 13: a lane tail only; 32: whole lanes */
    size_t n = (size_t)rows * C;
    float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(C * 4), *dy = malloc(n * 4), *dx = malloc(n * 4);
    float *dw = malloc(C * 4), r[8];
    fill(&rng, x, n, -2, 3), fill(&rng, w, C, 0.5f, 1.5f), fill(&rng, dy, n, -1, 1);
    OK(hsr_kernels_rmsnorm(host(), NULL, rows, C, x, w, LLAMA_RMS_EPS, y, r));
    double *xd = widen(x, n), *wd = widen(w, C), *yd = malloc(n * 8), *fd = malloc(n * 8);
    l64_rmsnorm(xd, wd, yd, rows, C);
    expect_fwd("rmsnorm", y, yd, n, 2e-6);
    /* the gradients ADD: start from 0.25 and take it off */
    for (size_t i = 0; i < n; i++) dx[i] = 0.25f;
    for (int i = 0; i < C; i++) dw[i] = 0.25f;
    OK(hsr_kernels_rmsnorm_bwd(host(), NULL, rows, C, dy, x, w, r, dx, dw));
    for (size_t i = 0; i < n; i++) dx[i] -= 0.25f;
    for (int i = 0; i < C; i++) dw[i] -= 0.25f;
    FD(xd, n, fd, rms_loss(xd, wd, dy, yd, rows, C));
    expect_close("rmsnorm dx", dx, fd, n, 1e-5);
    FD(wd, (size_t)C, fd, rms_loss(xd, wd, dy, yd, rows, C));
    expect_close("rmsnorm dw", dw, fd, C, 1e-5);
    free(x), free(y), free(w), free(dy), free(dx), free(dw), free(xd), free(wd), free(yd), free(fd);
  }
  float x1 = 1, w1 = 1, y1, r1;
  assert_int_equal(hsr_kernels_rmsnorm(host(), NULL, 1, 1, &x1, &w1, 0.0f, &y1, &r1), HSR_ERR_INVALID);
  assert_int_equal(hsr_kernels_rmsnorm(host(), NULL, 1, 1, NULL, &w1, 1e-5f, &y1, &r1), HSR_ERR_INVALID);
}

/* ---- SwiGLU ---- */
static double swiglu_loss(const double *g, const double *u, const float *dy, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += dy[i] * l64_swiglu(g[i], u[i]);
  return s;
}

static void test_swiglu(void **state) {
  (void)state;
  uint64_t rng = 12;
  const size_t n = 203; /* vector bodies and a tail */
  float *g = malloc(n * 4), *u = malloc(n * 4), *y = malloc(n * 4), *dy = malloc(n * 4), *dg = malloc(n * 4),
        *du = malloc(n * 4);
  fill(&rng, g, n, -8, 8), fill(&rng, u, n, -2, 2), fill(&rng, dy, n, -1, 1);
  OK(hsr_kernels_swiglu(host(), NULL, n, g, u, y));
  double *gd = widen(g, n), *ud = widen(u, n), *yd = malloc(n * 8), *fd = malloc(n * 8);
  for (size_t i = 0; i < n; i++) yd[i] = l64_swiglu(gd[i], ud[i]);
  expect_fwd("swiglu", y, yd, n, 1e-6);
  OK(hsr_kernels_swiglu_bwd(host(), NULL, n, g, u, dy, dg, du));
  FD(gd, n, fd, swiglu_loss(gd, ud, dy, n));
  expect_close("swiglu dg", dg, fd, n, 1e-5);
  FD(ud, n, fd, swiglu_loss(gd, ud, dy, n));
  expect_close("swiglu du", du, fd, n, 1e-5);
  free(g), free(u), free(y), free(dy), free(dg), free(du), free(gd), free(ud), free(yd), free(fd);
}

/* ---- rotary embedding ---- */
static double rope_loss(const double *x, const float *dy, double *t, int rows, int T, int heads, int D) {
  size_t n = (size_t)rows * heads * D;
  memcpy(t, x, n * sizeof *t);
  l64_rope(t, rows, T, heads, D);
  return dot(dy, t, n);
}

static void test_rope(void **state) {
  (void)state;
  uint64_t rng = 13;
  const int T = 7, rows = 2 * T, heads = 3, D = 8;
  size_t n = (size_t)rows * heads * D;
  float *cs = malloc((size_t)T * D * 4), *x = malloc(n * 4), *y = malloc(n * 4), *dy = malloc(n * 4);
  OK(hsr_kernels_rope_table(host(), NULL, T, D, LLAMA_ROPE_THETA, cs));
  for (int p = 0; p < T; p++)
    for (int i = 0; i < D / 2; i++) {
      double a = p / pow(LLAMA_ROPE_THETA, 2.0 * i / D);
      assert_true(fabs(cs[(p * D / 2 + i) * 2] - cos(a)) < 1e-6 && fabs(cs[(p * D / 2 + i) * 2 + 1] - sin(a)) < 1e-6);
    }
  fill(&rng, x, n, -2, 2), fill(&rng, dy, n, -1, 1);
  memcpy(y, x, n * 4);
  OK(hsr_kernels_rope(host(), NULL, rows, T, heads, D, cs, 0, y));
  double *xd = widen(x, n), *yd = widen(x, n), *fd = malloc(n * 8), *t = malloc(n * 8);
  l64_rope(yd, rows, T, heads, D);
  expect_fwd("rope", y, yd, n, 1e-6);
  for (int i = 0; i < heads * D; i++) assert_true(y[i] == x[i]); /* position 0: no turn */
  /* inverse undoes it */
  OK(hsr_kernels_rope(host(), NULL, rows, T, heads, D, cs, 1, y));
  for (size_t i = 0; i < n; i++) assert_true(fabs(y[i] - x[i]) < 1e-6);
  /* the backward is the inverse turn of dy */
  memcpy(y, dy, n * 4);
  OK(hsr_kernels_rope(host(), NULL, rows, T, heads, D, cs, 1, y));
  FD(xd, n, fd, rope_loss(xd, dy, t, rows, T, heads, D));
  expect_close("rope backward", y, fd, n, 1e-6);
  assert_int_equal(hsr_kernels_rope(host(), NULL, rows, T, heads, 7, cs, 0, y), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "even"));
  free(cs), free(x), free(y), free(dy), free(xd), free(yd), free(fd), free(t);
}

/* ---- grouped-query attention ---- */
static double att_loss(const double *q, const double *k, const double *v, const float *dy, double *y, int B, int T,
                       int H, int G, int D) {
  l64_attention(q, k, v, y, B, T, H, G, D);
  return dot(dy, y, (size_t)B * T * H * D);
}

static void check_attention(int B, int T, int H, int G, int D, uint64_t seed) {
  uint64_t rng = seed;
  size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * G * D, na = (size_t)B * H * T * T;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *att = malloc(na * 4), *y = malloc(nq * 4);
  float *dy = malloc(nq * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
  float *scratch = malloc((size_t)H * T * T * 4);
  fill(&rng, q, nq, -1.5f, 1.5f), fill(&rng, k, nk, -1.5f, 1.5f), fill(&rng, v, nk, -1.5f, 1.5f);
  fill(&rng, dy, nq, -1, 1);
  for (size_t i = 0; i < na; i++) att[i] = NAN; /* what the blocked GEMMs skip must come out 0 */
  OK(llama_attention(host(), NULL, B, T, H, G, D, q, k, v, att, y));
  double *qd = widen(q, nq), *kd = widen(k, nk), *vd = widen(v, nk), *yd = malloc(nq * 8), *fd = malloc(nq * 8);
  l64_attention(qd, kd, vd, yd, B, T, H, G, D);
  char what[64];
  snprintf(what, sizeof what, "attention T=%d H=%d G=%d", T, H, G);
  expect_fwd(what, y, yd, nq, 1e-6);
  for (size_t r = 0; r < (size_t)B * H * T; r++)
    for (int j = (int)(r % T) + 1; j < T; j++) assert_true(att[r * T + j] == 0.0f); /* the mask */
  /* token 0's output in head j is the value vector of its group */
  for (int j = 0; j < H; j++)
    for (int e = 0; e < D; e++) assert_true(fabs(y[j * D + e] - v[(j / (H / G)) * D + e]) < 1e-6);
  for (size_t i = 0; i < nq; i++) dq[i] = NAN; /* every element is written */
  for (size_t i = 0; i < nk; i++) dk[i] = dv[i] = NAN;
  OK(llama_attention_bwd(host(), NULL, B, T, H, G, D, q, k, v, att, dy, dq, dk, dv, scratch));
  FD(qd, nq, fd, att_loss(qd, kd, vd, dy, yd, B, T, H, G, D));
  expect_close("attention dq", dq, fd, nq, 1e-5);
  FD(kd, nk, fd, att_loss(qd, kd, vd, dy, yd, B, T, H, G, D));
  expect_close("attention dk (summed over the group)", dk, fd, nk, 1e-5);
  FD(vd, nk, fd, att_loss(qd, kd, vd, dy, yd, B, T, H, G, D));
  expect_close("attention dv (summed over the group)", dv, fd, nk, 1e-5);
  free(q), free(k), free(v), free(att), free(y), free(dy), free(dq), free(dk), free(dv), free(scratch);
  free(qd), free(kd), free(vd), free(yd), free(fd);
}

static void test_attention(void **state) {
  (void)state;
  check_attention(2, 5, 4, 2, 4, 14);   /* two query heads per key/value head */
  check_attention(1, 6, 3, 1, 2, 15);   /* one key/value head for all (multi-query) */
  check_attention(1, 4, 2, 2, 2, 16);   /* multi-head */
  check_attention(1, 131, 2, 1, 2, 17); /* three query blocks of 64, the last partial */
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
    /* larger weights and non-trivial norms so every path matters */
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

/* f32 analytic gradients of the model against double finite differences
 * (every stride-th element of the embedding and the head) */
static void check_model_grad(const gpt_cfg *c, int B, int T, size_t stride_vc) {
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
  double ref = l64_model_loss(c, m.wd, in, tg, B, T);
  if (fabs(loss - ref) > 1e-5 * ref) fail_msg("model loss %.9g, double reference %.9g", loss, ref);
  int checked = 0;
  for (int i = 0; i < m.np; i++) {
    size_t n = gpt_param_numel(c, i), stride = i == LLAMA_EMBED || i == LLAMA_HEAD ? stride_vc : 1, k = 0;
    float *an = malloc(n * 4);
    double *fd = malloc(n * 8), h = 1e-6;
    for (size_t j = 0; j < n; j += stride, k++) {
      double s0 = m.wd[i][j];
      m.wd[i][j] = s0 + h;
      double lp = l64_model_loss(c, m.wd, in, tg, B, T);
      m.wd[i][j] = s0 - h;
      double lm = l64_model_loss(c, m.wd, in, tg, B, T);
      m.wd[i][j] = s0;
      fd[k] = (lp - lm) / (2 * h);
      an[k] = m.g[i][j];
    }
    char name[64];
    gpt_param_name(c, i, name, sizeof name);
    expect_close(name, an, fd, k, 1e-3); /* f32 through the layers */
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
  /* 4 query heads over 2 key/value heads of 4 channels, MLP width 12 */
  gpt_cfg c = {.n_layer = 2,
               .n_head = 4,
               .n_embd = 16,
               .n_ctx = 6,
               .vocab = 256,
               .seed = 5,
               .arch = GPT_ARCH_LLAMA,
               .n_kv_head = 2,
               .n_ff = 12};
  check_model_grad(&c, 2, 5, 5);
}

/* No blocks: the embedding, the final norm and the untied head alone. */
static void test_head_grad(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 0, .n_head = 1, .n_embd = 6, .n_ctx = 4, .vocab = 7, .seed = 6, .arch = GPT_ARCH_LLAMA};
  check_model_grad(&c, 3, 4, 1);
}

/* Linear wrapping opens four units per block instead of one: the same
 * arithmetic, so the same bits; a pointer used outside its unit's window
 * would be NULL here (the model clears them) and crash. */
static void test_wrap_linear_same_bits(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2,
               .n_head = 4,
               .n_embd = 16,
               .n_ctx = 8,
               .vocab = 256,
               .seed = 7,
               .arch = GPT_ARCH_LLAMA,
               .n_kv_head = 2},
          cl = c;
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
  double lf;
  OK(gpt_forward(&c, w, in, tg, 3, 8, &ba, &lf));
  assert_true(lf == la);
  /* a shorter sequence in the same workspace: positions restart at 0 */
  OK(gpt_forward(&c, w, in, tg, 3, 5, &ba, &lf));
  assert_true(isfinite(lf));
  /* a GPT workspace is refused */
  gpt_cfg g2 = c;
  g2.arch = GPT_ARCH_GPT2;
  gpt_work *wg;
  OK(gpt_work_create(&g2, 3, 8, NULL, NULL, &wg));
  assert_int_equal(gpt_forward(&c, wg, in, tg, 3, 8, &ba, &lf), HSR_ERR_INVALID);
  gpt_work_free(wg);
  gpt_work_free(w);
  model_free(&a), model_free(&b);
}

static void test_names_shapes(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2,
               .n_head = 4,
               .n_embd = 32,
               .n_ctx = 16,
               .vocab = 256,
               .arch = GPT_ARCH_LLAMA,
               .n_kv_head = 2,
               .wrap_linear = 1};
  char name[64];
  int64_t s[2];
  int g;
  assert_int_equal(gpt_num_params(&c), 3 + 18);
  assert_int_equal(llama_ff(&c), 88); /* 8 x 32 / 3 = 85, up to a multiple of 8 */
  static const struct {
    int i;
    const char *name;
    int nd;
    int64_t s0, s1;
    int group, unit;
  } want[] = {
      {LLAMA_EMBED, "model.embed_tokens.weight", 2, 256, 32, 0, 0},
      {LLAMA_NORM, "model.norm.weight", 1, 32, 0, 1, 0},
      {LLAMA_HEAD, "lm_head.weight", 2, 256, 32, 0, 0},
      {LLAMA_PARAM(0, LLAMA_IN_NORM), "model.layers.0.input_layernorm.weight", 1, 32, 0, 1, 1},
      {LLAMA_PARAM(1, LLAMA_Q), "model.layers.1.self_attn.q_proj.weight", 2, 32, 32, 0, 5},
      {LLAMA_PARAM(1, LLAMA_K), "model.layers.1.self_attn.k_proj.weight", 2, 16, 32, 0, 5}, /* 2 heads of 8 */
      {LLAMA_PARAM(1, LLAMA_V), "model.layers.1.self_attn.v_proj.weight", 2, 16, 32, 0, 5},
      {LLAMA_PARAM(1, LLAMA_O), "model.layers.1.self_attn.o_proj.weight", 2, 32, 32, 0, 6},
      {LLAMA_PARAM(1, LLAMA_POST_NORM), "model.layers.1.post_attention_layernorm.weight", 1, 32, 0, 1, 7},
      {LLAMA_PARAM(1, LLAMA_GATE), "model.layers.1.mlp.gate_proj.weight", 2, 88, 32, 0, 7},
      {LLAMA_PARAM(1, LLAMA_UP), "model.layers.1.mlp.up_proj.weight", 2, 88, 32, 0, 7},
      {LLAMA_PARAM(1, LLAMA_DOWN), "model.layers.1.mlp.down_proj.weight", 2, 32, 88, 0, 8},
  };
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    gpt_param_name(&c, want[k].i, name, sizeof name);
    assert_string_equal(name, want[k].name);
    s[1] = 0;
    assert_int_equal(gpt_param_shape(&c, want[k].i, s, &g), want[k].nd);
    if (s[0] != want[k].s0 || (want[k].nd == 2 && s[1] != want[k].s1) || g != want[k].group)
      fail_msg("%s: shape [%lld, %lld] group %d", name, (long long)s[0], (long long)s[1], g);
    assert_int_equal(gpt_param_unit(&c, want[k].i), want[k].unit);
  }
  gpt_unit_name(&c, 8, name, sizeof name);
  assert_string_equal(name, "model.layers.1.mlp.down_proj");
  c.wrap_linear = 0;
  gpt_unit_name(&c, 2, name, sizeof name);
  assert_string_equal(name, "model.layers.1");
  assert_int_equal(gpt_param_unit(&c, LLAMA_PARAM(1, LLAMA_DOWN)), 2);
  /* weights initialised N(0, 0.02), norms 1 */
  float nw[32], *qw = malloc(32 * 32 * 4);
  gpt_param_init(&c, LLAMA_PARAM(0, LLAMA_POST_NORM), nw);
  for (int i = 0; i < 32; i++) assert_true(nw[i] == 1.0f);
  gpt_param_init(&c, LLAMA_PARAM(0, LLAMA_Q), qw);
  double ss = 0;
  for (int i = 0; i < 32 * 32; i++) ss += (double)qw[i] * qw[i];
  assert_true(fabs(sqrt(ss / 1024) - 0.02) < 0.002);
  free(qw);
  /* Llama 2 7B's shapes: 6738415616 weights */
  gpt_cfg l7 = {.n_layer = 32,
                .n_head = 32,
                .n_embd = 4096,
                .n_ctx = 4096,
                .vocab = 32000,
                .arch = GPT_ARCH_LLAMA,
                .n_ff = 11008};
  assert_true(gpt_num_weights(&l7) == 6738415616ull);
  gpt_cfg bad = c;
  bad.n_kv_head = 3;
  assert_int_equal(gpt_cfg_check(&bad), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "must divide the 4 heads"));
  bad = c, bad.n_embd = 12, bad.n_head = 4; /* head size 3: odd */
  assert_int_equal(gpt_cfg_check(&bad), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "even"));
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
  gpt_cfg c = {.n_layer = 2,
               .n_head = 4,
               .n_embd = 32,
               .n_ctx = 16,
               .vocab = 256,
               .seed = 1,
               .arch = GPT_ARCH_LLAMA,
               .n_kv_head = 2};
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
      cmocka_unit_test(test_rmsnorm),
      cmocka_unit_test(test_swiglu),
      cmocka_unit_test(test_rope),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_model_grad),
      cmocka_unit_test(test_head_grad),
      cmocka_unit_test(test_wrap_linear_same_bits),
      cmocka_unit_test(test_names_shapes),
      cmocka_unit_test(test_reference_learns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
