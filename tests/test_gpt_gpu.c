/* GPU test of the transformer layers and the GPT example: every layer kernel
 * (kernels/cuda_nn.cu over the kmath.h row formulas) and one forward +
 * backward of the model on CUDA (cuBLAS) against the same calls on the CPU,
 * same inputs. cuBLAS sums in other orders and the device rounds exp/log
 * its own way, so results are compared with a tolerance. Exits 77 (skip)
 * without a GPU. */
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
#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "kernels_ref.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static hsr_device *g_gpu, *g_host;
static hsr_stream *g_s;

/* host buffer -> new device buffer */
static void *up(const void *h, size_t bytes) {
  void *d;
  OK(hsr_device_alloc(g_gpu, bytes ? bytes : 4, &d));
  OK(hsr_device_copy(g_gpu, d, h, bytes, g_s));
  return d;
}
static void down(void *h, const void *d, size_t bytes) {
  OK(hsr_device_copy(g_gpu, h, d, bytes, g_s));
  OK(hsr_stream_sync(g_s, 60));
}
static float *rnd(uint64_t *r, size_t n, float lo, float hi) {
  float *x = malloc(n * 4);
  for (size_t i = 0; i < n; i++) x[i] = ref_uniform(r, lo, hi);
  return x;
}
static void close_to(const char *what, const float *h, const float *dv, size_t n, double tol) {
  double scale = 1e-20, worst = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(h[i]));
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)h[i] - dv[i]) / scale);
  if (worst > tol) fail_msg("%s: GPU differs from CPU by %.3g of the scale %.3g", what, worst, scale);
}

static void test_layers(void **state) {
  (void)state;
  uint64_t r = 3;
  const size_t rows = 67, C = 45, T = 13, V = 33;
  float *x = rnd(&r, rows * C, -2, 2), *w = rnd(&r, C, 0.5f, 1.5f), *b = rnd(&r, C, -1, 1),
        *dy = rnd(&r, rows * C, -1, 1);
  float *y = malloc(rows * C * 4), *m = malloc(rows * 4), *rs = malloc(rows * 4), *dx = calloc(rows * C, 4);
  float *dw = calloc(C, 4), *db = calloc(C, 4), *back = malloc(rows * C * 4 + 4096);
  float *xd = up(x, rows * C * 4), *wd = up(w, C * 4), *bd = up(b, C * 4), *dyd = up(dy, rows * C * 4);
  float *yd = up(y, rows * C * 4), *md = up(m, rows * 4), *rd = up(rs, rows * 4), *dxd = up(dx, rows * C * 4);
  float *dwd = up(dw, C * 4), *dbd = up(db, C * 4);
  OK(hsr_kernels_layernorm(g_host, NULL, rows, C, x, w, b, 1e-5f, y, m, rs));
  OK(hsr_kernels_layernorm(g_gpu, g_s, rows, C, xd, wd, bd, 1e-5f, yd, md, rd));
  down(back, yd, rows * C * 4);
  close_to("layernorm", y, back, rows * C, 1e-5);
  OK(hsr_kernels_layernorm_bwd(g_host, NULL, rows, C, dy, x, w, m, rs, dx, dw, db));
  OK(hsr_kernels_layernorm_bwd(g_gpu, g_s, rows, C, dyd, xd, wd, md, rd, dxd, dwd, dbd));
  down(back, dxd, rows * C * 4);
  close_to("layernorm dx", dx, back, rows * C, 1e-5);
  down(back, dwd, C * 4);
  close_to("layernorm dw", dw, back, C, 1e-5);
  down(back, dbd, C * 4);
  close_to("layernorm db", db, back, C, 1e-5);
  /* GELU, bias */
  OK(hsr_kernels_gelu(g_host, NULL, rows * C, x, y));
  OK(hsr_kernels_gelu(g_gpu, g_s, rows * C, xd, yd));
  down(back, yd, rows * C * 4);
  close_to("gelu", y, back, rows * C, 1e-6);
  OK(hsr_kernels_gelu_bwd(g_host, NULL, rows * C, x, dy, y));
  OK(hsr_kernels_gelu_bwd(g_gpu, g_s, rows * C, xd, dyd, yd));
  down(back, yd, rows * C * 4);
  close_to("gelu_bwd", y, back, rows * C, 1e-6);
  OK(hsr_kernels_bias_bwd(g_host, NULL, rows, C, dy, db));
  OK(hsr_kernels_bias_bwd(g_gpu, g_s, rows, C, dyd, dbd));
  down(back, dbd, C * 4);
  close_to("bias_bwd", db, back, C, 1e-6);
  OK(hsr_kernels_bias_add(g_host, NULL, rows, C, b, x));
  OK(hsr_kernels_bias_add(g_gpu, g_s, rows, C, bd, xd));
  down(back, xd, rows * C * 4);
  close_to("bias_add", x, back, rows * C, 0);
  /* causal softmax over 5 blocks of T x T */
  size_t n = 5 * T * T;
  float *s = rnd(&r, n, -3, 3), *p = malloc(n * 4), *dp = rnd(&r, n, -1, 1);
  float *sd = up(s, n * 4), *pd = up(s, n * 4), *dpd = up(dp, n * 4);
  OK(hsr_kernels_softmax_causal(g_host, NULL, 5 * T, T, 0.5f, s, p));
  OK(hsr_kernels_softmax_causal(g_gpu, g_s, 5 * T, T, 0.5f, sd, pd));
  down(back, pd, n * 4);
  close_to("softmax_causal", p, back, n, 1e-6);
  OK(hsr_kernels_softmax_causal_bwd(g_host, NULL, 5 * T, T, 0.5f, p, dp, s));
  OK(hsr_kernels_softmax_causal_bwd(g_gpu, g_s, 5 * T, T, 0.5f, pd, dpd, sd));
  down(back, sd, n * 4);
  close_to("softmax_causal_bwd", s, back, n, 1e-5);
  /* cross-entropy */
  float *z = rnd(&r, rows * V, -4, 4);
  int32_t *tg = malloc(rows * 4);
  for (size_t i = 0; i < rows; i++) tg[i] = (int32_t)(ref_rand(&r) % V);
  float *zd = up(z, rows * V * 4);
  int32_t *tgd = up(tg, rows * 4);
  double *rl = malloc(rows * 8), *rlb = malloc(rows * 8), *rld = up(rl, rows * 8);
  OK(hsr_kernels_xent(g_host, NULL, rows, V, z, tg, 0.125f, rl));
  OK(hsr_kernels_xent(g_gpu, g_s, rows, V, zd, tgd, 0.125f, rld));
  down(back, zd, rows * V * 4);
  close_to("xent dz", z, back, rows * V, 1e-5);
  down(rlb, rld, rows * 8);
  for (size_t i = 0; i < rows; i++)
    if (fabs(rl[i] - rlb[i]) > 1e-5 * (1 + rl[i])) fail_msg("xent row %zu: GPU %.9g CPU %.9g", i, rlb[i], rl[i]);
  /* embedding: B 3 x T 5 over a table of V x C */
  int32_t tok[15];
  for (int i = 0; i < 15; i++) tok[i] = (int32_t)(ref_rand(&r) % V);
  float *wte = rnd(&r, V * C, -1, 1), *wpe = rnd(&r, 5 * C, -1, 1), *e = malloc(15 * C * 4);
  float *wted = up(wte, V * C * 4), *wped = up(wpe, 5 * C * 4), *ed = up(e, 15 * C * 4);
  int32_t *tokd = up(tok, sizeof tok);
  OK(hsr_kernels_embed(g_host, NULL, 3, 5, C, V, tok, wte, wpe, e));
  OK(hsr_kernels_embed(g_gpu, g_s, 3, 5, C, V, tokd, wted, wped, ed));
  down(back, ed, 15 * C * 4);
  close_to("embed", e, back, 15 * C, 0);
  OK(hsr_kernels_embed_bwd(g_host, NULL, 3, 5, C, V, tok, e, wte, wpe));
  OK(hsr_kernels_embed_bwd(g_gpu, g_s, 3, 5, C, V, tokd, ed, wted, wped));
  down(back, wted, V * C * 4);
  close_to("embed_bwd dwte", wte, back, V * C, 0); /* the same order of additions */
  /* batched GEMM: 3 products of 7 x 5 x 9 with strides */
  float *A = rnd(&r, 3 * 7 * 9, -1, 1), *B = rnd(&r, 3 * 9 * 5, -1, 1), *Cm = calloc(3 * 7 * 5, 4);
  float *Ad = up(A, 3 * 7 * 9 * 4), *Bd = up(B, 3 * 9 * 5 * 4), *Cd = up(Cm, 3 * 7 * 5 * 4);
  OK(hsr_kernels_gemm_batched(g_host, NULL, 0, 0, 7, 5, 9, 1.0f, A, 9, 63, B, 5, 45, 0.0f, Cm, 5, 35, 3));
  OK(hsr_kernels_gemm_batched(g_gpu, g_s, 0, 0, 7, 5, 9, 1.0f, Ad, 9, 63, Bd, 5, 45, 0.0f, Cd, 5, 35, 3));
  down(back, Cd, 3 * 7 * 5 * 4);
  close_to("gemm_batched", Cm, back, 3 * 7 * 5, 1e-6);
  void *all[] = {xd,  wd, bd,  dyd, yd,   md,   rd, dxd,  dwd, dbd, sd, pd,
                 dpd, zd, tgd, rld, wted, wped, ed, tokd, Ad,  Bd,  Cd};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(hsr_device_free(g_gpu, all[i]));
  free(x), free(w), free(b), free(dy), free(y), free(m), free(rs), free(dx), free(dw), free(db), free(back);
  free(s), free(p), free(dp), free(z), free(tg), free(rl), free(rlb), free(wte), free(wpe), free(e), free(A), free(B);
  free(Cm);
}

static void test_model_matches_cpu(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2, .n_head = 3, .n_embd = 24, .n_ctx = 11, .vocab = 256, .seed = 5};
  const int B = 3, T = 11, np = gpt_num_params(&c);
  float **hw = calloc((size_t)np, sizeof *hw), **hg = calloc((size_t)np, sizeof *hg);
  float **dw = calloc((size_t)np, sizeof *dw), **dg = calloc((size_t)np, sizeof *dg);
  for (int i = 0; i < np; i++) {
    size_t n = gpt_param_numel(&c, i);
    hw[i] = malloc(n * 4), hg[i] = malloc(n * 4);
    gpt_param_init(&c, i, hw[i]);
    for (size_t j = 0; j < n; j++) hw[i][j] *= 10.0f, hg[i][j] = 0.25f; /* gradients add onto what is there */
    dw[i] = up(hw[i], n * 4), dg[i] = up(hg[i], n * 4);
  }
  uint64_t r = 9;
  int32_t in[3 * 11], tg[3 * 11];
  for (int i = 0; i < B * T; i++) in[i] = (int32_t)(ref_rand(&r) % 256), tg[i] = (int32_t)(ref_rand(&r) % 256);
  int32_t *ind = up(in, sizeof in), *tgd = up(tg, sizeof tg);
  gpt_work *wh, *wd;
  OK(gpt_work_create(&c, B, T, NULL, NULL, &wh));
  OK(gpt_work_create(&c, B, T, g_gpu, g_s, &wd));
  gpt_arrays ah = {&c, hw, hg}, ad = {&c, dw, dg};
  gpt_binder bh = gpt_arrays_binder(&ah), bd = gpt_arrays_binder(&ad);
  double lh, ld;
  OK(gpt_fwd_bwd(&c, wh, in, tg, B, T, &bh, &lh));
  OK(gpt_fwd_bwd(&c, wd, ind, tgd, B, T, &bd, &ld));
  if (!(fabs(lh - ld) <= 1e-5 * fabs(lh))) fail_msg("loss: GPU %.9g, CPU %.9g", ld, lh);
  for (int i = 0; i < np; i++) {
    size_t n = gpt_param_numel(&c, i);
    float *back = malloc(n * 4);
    down(back, dg[i], n * 4);
    for (size_t j = 0; j < n; j++) back[j] -= 0.25f, hg[i][j] -= 0.25f;
    char name[64];
    gpt_param_name(&c, i, name, sizeof name);
    close_to(name, hg[i], back, n, 1e-4);
    free(back);
    OK(hsr_device_free(g_gpu, dw[i]));
    OK(hsr_device_free(g_gpu, dg[i]));
    free(hw[i]), free(hg[i]);
  }
  printf("GPT on GPU: loss %.9f (CPU %.9f)\n", ld, lh);
  gpt_work_free(wh);
  gpt_work_free(wd);
  OK(hsr_device_free(g_gpu, ind));
  OK(hsr_device_free(g_gpu, tgd));
  free(hw), free(hg), free(dw), free(dg);
}

int main(void) {
  if (device_cuda_count() == 0) {
    printf("SKIP: no CUDA device is usable here\n");
    return 77;
  }
  openblas_set_num_threads(1);
  if (hsr_device_open(HSR_DEVICE_CUDA, 0, &g_gpu) != HSR_OK || stream_create(g_gpu, 0, &g_s) != HSR_OK ||
      hsr_device_open(HSR_DEVICE_HOST, 0, &g_host) != HSR_OK) {
    printf("device: %s\n", hsr_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layers), cmocka_unit_test(test_model_matches_cpu)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  stream_destroy(g_s);
  hsr_device_close(g_gpu);
  hsr_device_close(g_host);
  return rc;
}
