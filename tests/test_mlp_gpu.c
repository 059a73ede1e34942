/* GPU test of the example model: one forward + backward on CUDA (cuBLAS GEMMs
 * and the mlp_cuda.cu kernels over the mlp_math.h formulas) against the same
 * call on the CPU, same weights and data. GEMMs sum in different orders and
 * CUDA's tanhf/exp round differently, so loss and gradients are compared
 * with a tolerance. Exits 77 (skip) without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hsr/kernels.h"
#include "kernels/kernels_internal.h"
#include "mlp.h"
#include "mlp_arrays.h"

#define OK(x) assert_int_equal((x), HSR_OK)

static void test_model_matches_cpu(void **state) {
  (void)state;
  /* odd sizes: GEMM tails, bias columns not a multiple of a warp */
  mlp_cfg c = {.layers = 3, .dim = 37, .in_dim = 29, .classes = 11, .seed = 5};
  int n = 45, U = mlp_num_units(&c);
  hsr_device *gpu;
  hsr_stream *s;
  OK(hsr_device_open(HSR_DEVICE_CUDA, 0, &gpu));
  OK(stream_create(gpu, 0, &s));
  arrays h, d;
  memset(&h, 0, sizeof h);
  memset(&d, 0, sizeof d);
  for (int u = 0; u < U; u++)
    for (int k = 0; k < 4; k++) {
      size_t m = mlp_param_numel(&c, u, k);
      h.p[u][k] = malloc(m * sizeof(float));
      h.g[u][k] = calloc(m, sizeof(float));
      mlp_param_init(&c, u, k, h.p[u][k]);
      for (size_t i = 0; i < m; i++) h.g[u][k][i] = 0.25f; /* gradients accumulate onto what is there */
      OK(hsr_device_alloc(gpu, m * sizeof(float), (void **)&d.p[u][k]));
      OK(hsr_device_alloc(gpu, m * sizeof(float), (void **)&d.g[u][k]));
      OK(hsr_device_copy(gpu, d.p[u][k], h.p[u][k], m * sizeof(float), s));
      OK(hsr_device_copy(gpu, d.g[u][k], h.g[u][k], m * sizeof(float), s));
    }
  float *x = malloc((size_t)n * c.in_dim * sizeof(float)), *xd;
  int *y = malloc((size_t)n * sizeof(int)), *yd;
  mlp_data(&c, 3, 0, n, x, y);
  OK(hsr_device_alloc(gpu, (size_t)n * c.in_dim * sizeof(float), (void **)&xd));
  OK(hsr_device_alloc(gpu, (size_t)n * sizeof(int), (void **)&yd));
  OK(hsr_device_copy(gpu, xd, x, (size_t)n * c.in_dim * sizeof(float), s));
  OK(hsr_device_copy(gpu, yd, y, (size_t)n * sizeof(int), s));

  mlp_work *wh, *wd;
  OK(mlp_work_create(&c, n, &wh));
  OK(mlp_work_create_on(&c, n, gpu, s, &wd));
  mlp_binder bh = {&h, acq, rel}, bd = {&d, acq, rel};
  double lh, ld;
  OK(mlp_fwd_bwd(&c, wh, x, y, n, &bh, &lh));
  OK(mlp_fwd_bwd(&c, wd, xd, yd, n, &bd, &ld));
  if (!(fabs(lh - ld) <= 1e-5 * fabs(lh))) fail_msg("loss: GPU %.9g, CPU %.9g", ld, lh);
  for (int u = 0; u < U; u++)
    for (int k = 0; k < 4; k++) {
      size_t m = mlp_param_numel(&c, u, k);
      float *back = malloc(m * sizeof(float));
      OK(hsr_device_copy(gpu, back, d.g[u][k], m * sizeof(float), s));
      OK(hsr_stream_sync(s, 60));
      double md = 0, mx = 0;
      for (size_t i = 0; i < m; i++) {
        md = fmax(md, fabs((double)back[i] - h.g[u][k][i]));
        mx = fmax(mx, fabs((double)h.g[u][k][i] - 0.25));
      }
      if (md > 1e-4 * (mx > 0 ? mx : 1))
        fail_msg("unit %d param %d: GPU gradient differs from CPU by %.3g (gradient scale %.3g)", u, k, md, mx);
      free(back);
      free(h.p[u][k]), free(h.g[u][k]);
      OK(hsr_device_free(gpu, d.p[u][k]));
      OK(hsr_device_free(gpu, d.g[u][k]));
    }
  printf("model on GPU: loss %.9f (CPU %.9f)\n", ld, lh);
  mlp_work_free(wh);
  mlp_work_free(wd);
  free(x), free(y);
  OK(hsr_device_free(gpu, xd));
  OK(hsr_device_free(gpu, yd));
  OK(stream_destroy(s));
  OK(hsr_device_close(gpu));
}

int main(void) {
  if (device_cuda_count() == 0) {
    printf("SKIP: no CUDA device is usable here\n");
    return 77;
  }
  mlp_blas_threads(1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_model_matches_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
