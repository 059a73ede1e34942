/* GPU test of the Llama-style model's layers and the model: RMSNorm, SwiGLU,
 * the rotary table and rotation (kernels/cuda_nn_llama.cu over the kmath.h
 * formulas) and one forward + backward of the model on CUDA (cuBLAS) against
 * the same calls on the CPU, same inputs; compared with a tolerance (cuBLAS
 * sums in other orders, the device rounds exp and cos/sin its own way).
 * Exits 77 (skip) without a GPU. */
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
#include "kernels/kernels_internal.h"
#include "kernels_ref.h"
#include "llama.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static hsr_device *g_gpu, *g_host;
static hsr_stream *g_s;

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
  const size_t rows = 67, C = 45, T = 13, H = 3, D = 8, n = rows * C;
  float *x = rnd(&r, n, -2, 2), *w = rnd(&r, C, 0.5f, 1.5f), *dy = rnd(&r, n, -1, 1), *u = rnd(&r, n, -2, 2);
  float *y = malloc(n * 4), *rs = malloc(rows * 4), *dx = calloc(n, 4), *dw = calloc(C, 4), *back = malloc(n * 4);
  float *dg = malloc(n * 4), *du = malloc(n * 4);
  float *xd = up(x, n * 4), *wd = up(w, C * 4), *dyd = up(dy, n * 4), *ud = up(u, n * 4), *yd = up(y, n * 4);
  float *rd = up(rs, rows * 4), *dxd = up(dx, n * 4), *dwd = up(dw, C * 4), *dgd = up(dg, n * 4), *dud = up(du, n * 4);
  OK(hsr_kernels_rmsnorm(g_host, NULL, rows, C, x, w, LLAMA_RMS_EPS, y, rs));
  OK(hsr_kernels_rmsnorm(g_gpu, g_s, rows, C, xd, wd, LLAMA_RMS_EPS, yd, rd));
  down(back, yd, n * 4);
  close_to("rmsnorm", y, back, n, 1e-5);
  OK(hsr_kernels_rmsnorm_bwd(g_host, NULL, rows, C, dy, x, w, rs, dx, dw));
  OK(hsr_kernels_rmsnorm_bwd(g_gpu, g_s, rows, C, dyd, xd, wd, rd, dxd, dwd));
  down(back, dxd, n * 4);
  close_to("rmsnorm dx", dx, back, n, 1e-5);
  down(back, dwd, C * 4);
  close_to("rmsnorm dw", dw, back, C, 1e-5);
  OK(hsr_kernels_swiglu(g_host, NULL, n, x, u, y));
  OK(hsr_kernels_swiglu(g_gpu, g_s, n, xd, ud, yd));
  down(back, yd, n * 4);
  close_to("swiglu", y, back, n, 1e-6);
  OK(hsr_kernels_swiglu_bwd(g_host, NULL, n, x, u, dy, dg, du));
  OK(hsr_kernels_swiglu_bwd(g_gpu, g_s, n, xd, ud, dyd, dgd, dud));
  down(back, dgd, n * 4);
  close_to("swiglu dg", dg, back, n, 1e-6);
  down(back, dud, n * 4);
  close_to("swiglu du", du, back, n, 1e-6);
  /* the rotary table and a rotation there and back, of rows x H heads of D */
  float *cs = malloc(T * D * 4), *csd = up(cs, T * D * 4), *q = rnd(&r, rows * H * D, -2, 2);
  float *qd = up(q, rows * H * D * 4);
  OK(hsr_kernels_rope_table(g_host, NULL, T, D, LLAMA_ROPE_THETA, cs));
  OK(hsr_kernels_rope_table(g_gpu, g_s, T, D, LLAMA_ROPE_THETA, csd));
  down(back, csd, T * D * 4);
  close_to("rope table", cs, back, T * D, 1e-6);
  for (int inverse = 0; inverse < 2; inverse++) {
    OK(hsr_kernels_rope(g_host, NULL, rows, T, H, D, cs, inverse, q));
    OK(hsr_kernels_rope(g_gpu, g_s, rows, T, H, D, csd, inverse, qd));
    down(back, qd, rows * H * D * 4);
    close_to(inverse ? "rope inverse" : "rope", q, back, rows * H * D, 1e-6);
  }
  void *all[] = {xd, wd, dyd, ud, yd, rd, dxd, dwd, dgd, dud, csd, qd};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(hsr_device_free(g_gpu, all[i]));
  free(x), free(w), free(dy), free(u), free(y), free(rs), free(dx), free(dw), free(back), free(dg), free(du);
  free(cs), free(q);
}

static void test_model_matches_cpu(void **state) {
  (void)state;
  gpt_cfg c = {.n_layer = 2,
               .n_head = 4,
               .n_embd = 24,
               .n_ctx = 11,
               .vocab = 256,
               .seed = 5,
               .arch = GPT_ARCH_LLAMA,
               .n_kv_head = 2};
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
  printf("llama on GPU: loss %.9f (CPU %.9f)\n", ld, lh);
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
