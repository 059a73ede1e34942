/* Unit tests of the example model: the shared host/device formulas of
 * mlp_math.h against straightforward references, finite-difference gradient
 * check, data determinism, and the single-rank reference trainer's loss
 * falling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mlp.h"
#include "mlp_arrays.h"
#include "mlp_math.h"

static void test_gradcheck(void **state) {
  (void)state;
  mlp_cfg c = {.layers = 2, .dim = 4, .in_dim = 5, .classes = 3, .seed = 11};
  int n = 6;
  arrays a;
  memset(&a, 0, sizeof a);
  for (int u = 0; u < mlp_num_units(&c); u++)
    for (int k = 0; k < 4; k++) {
      size_t m = mlp_param_numel(&c, u, k);
      a.p[u][k] = malloc(m * sizeof(float));
      a.g[u][k] = calloc(m, sizeof(float));
      mlp_param_init(&c, u, k, a.p[u][k]);
      /* larger weights so every layer matters to the loss */
      for (size_t i = 0; i < m; i++) a.p[u][k][i] *= 2.0f, a.p[u][k][i] += (k & 1) ? 0.1f : 0.0f;
    }
  float x[6 * 5];
  int y[6];
  mlp_data(&c, 0, 0, n, x, y);
  mlp_work *w;
  assert_int_equal(mlp_work_create(&c, n, &w), HSR_OK);
  mlp_binder b = {&a, acq, rel};
  double loss;
  assert_int_equal(mlp_fwd_bwd(&c, w, x, y, n, &b, &loss), HSR_OK);
  assert_true(loss > 0 && isfinite(loss));
  int checked = 0;
  for (int u = 0; u < mlp_num_units(&c); u++)
    for (int k = 0; k < 4; k++) {
      size_t m = mlp_param_numel(&c, u, k);
      for (size_t i = 0; i < m; i += 3) {
        float save = a.p[u][k][i], eps = 1e-2f;
        double lp, lm;
        /* the gradients accumulate: scratch copies keep the analytic ones intact */
        arrays s = a;
        float *tmp[16][4];
        for (int uu = 0; uu < mlp_num_units(&c); uu++)
          for (int kk = 0; kk < 4; kk++) tmp[uu][kk] = s.g[uu][kk] = calloc(mlp_param_numel(&c, uu, kk), sizeof(float));
        mlp_binder sb = {&s, acq, rel};
        a.p[u][k][i] = save + eps;
        assert_int_equal(mlp_fwd_bwd(&c, w, x, y, n, &sb, &lp), HSR_OK);
        a.p[u][k][i] = save - eps;
        assert_int_equal(mlp_fwd_bwd(&c, w, x, y, n, &sb, &lm), HSR_OK);
        a.p[u][k][i] = save;
        for (int uu = 0; uu < mlp_num_units(&c); uu++)
          for (int kk = 0; kk < 4; kk++) free(tmp[uu][kk]);
        double fd = (lp - lm) / (2.0 * eps), an = a.g[u][k][i];
        if (fabs(fd - an) > 2e-3 + 3e-2 * fabs(an))
          fail_msg("unit %d param %d elem %zu: analytic %.6g finite-difference %.6g", u, k, i, an, fd);
        checked++;
      }
    }
  assert_true(checked > 50);
  mlp_work_free(w);
  for (int u = 0; u < mlp_num_units(&c); u++)
    for (int k = 0; k < 4; k++) free(a.p[u][k]), free(a.g[u][k]);
}

/* The formulas the CPU model and the CUDA kernels share. */
static double ref_gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_math(void **state) {
  (void)state;
  for (int i = -800; i <= 800; i++) {
    float x = (float)i / 100.0f;
    double r = ref_gelu(x);
    if (fabs(mlp_gelu(x) - r) > 1e-6 * (1 + fabs(r))) fail_msg("gelu(%g) = %.9g, reference %.9g", x, mlp_gelu(x), r);
    double h = 1e-4, fd = (ref_gelu(x + h) - ref_gelu(x - h)) / (2 * h);
    if (fabs(mlp_gelu_grad(x) - fd) > 1e-5)
      fail_msg("gelu'(%g) = %.9g, central difference %.9g", x, mlp_gelu_grad(x), fd);
  }
  /* cross-entropy: ordinary logits and huge ones (the max shift keeps exp finite) */
  const float rows[2][4] = {{0.5f, -1.25f, 2.0f, 0.0f}, {1000.0f, 998.0f, -1000.0f, 999.5f}};
  for (int r = 0; r < 2; r++)
    for (int y = 0; y < 4; y++) {
      float z[4];
      memcpy(z, rows[r], sizeof z);
      double mx = -INFINITY, sum = 0;
      for (int k = 0; k < 4; k++) mx = fmax(mx, rows[r][k]);
      for (int k = 0; k < 4; k++) sum += exp(rows[r][k] - mx);
      double want = -(rows[r][y] - mx - log(sum));
      double loss = mlp_ce_row(z, 4, y, 8);
      if (!isfinite(loss) || fabs(loss - want) > 1e-9 * (1 + want))
        fail_msg("ce row %d label %d: %.12g vs %.12g", r, y, loss, want);
      double gsum = 0;
      for (int k = 0; k < 4; k++) {
        double p = exp(rows[r][k] - mx) / sum, g = (p - (k == y)) / 8;
        if (fabs(z[k] - g) > 1e-7) fail_msg("ce row %d label %d: dz[%d] = %.9g, reference %.9g", r, y, k, z[k], g);
        gsum += z[k];
      }
      assert_true(fabs(gsum) < 1e-6); /* softmax minus one-hot sums to zero */
    }
}

static void test_data_deterministic(void **state) {
  (void)state;
  mlp_cfg c = {.layers = 1, .dim = 8, .in_dim = 8, .classes = 4, .seed = 3};
  float x1[16 * 8], x2[8 * 8];
  int y1[16], y2[8], counts[4] = {0};
  mlp_data(&c, 5, 0, 16, x1, y1);
  mlp_data(&c, 5, 8, 8, x2, y2); /* a slice equals the same samples of the whole batch */
  assert_memory_equal(x1 + 8 * 8, x2, sizeof x2);
  assert_memory_equal(y1 + 8, y2, sizeof y2);
  for (int i = 0; i < 16; i++) counts[y1[i]]++;
  int used = 0;
  for (int k = 0; k < 4; k++) used += counts[k] > 0;
  assert_true(used >= 2);
  mlp_data(&c, 6, 0, 8, x2, y2);
  assert_memory_not_equal(x1, x2, sizeof x2);
}

/* The helper thread's samples are mlp_data's, whether asked for ahead or not. */
static void test_feed(void **state) {
  (void)state;
  mlp_cfg c = {.layers = 1, .dim = 8, .in_dim = 8, .classes = 4, .seed = 3};
  float want[16 * 8];
  int wy[16];
  const float *x;
  const int *y;
  mlp_feed *f;
  assert_int_equal(mlp_feed_create(&c, &f), HSR_OK);
  for (int round = 0; round < 3; round++) {
    int64_t step = 5 + round;
    mlp_data(&c, step, 0, 16, want, wy);
    assert_int_equal(mlp_feed_get(f, step, 0, 16, &x, &y), HSR_OK); /* the first: made now */
    assert_memory_equal(x, want, sizeof want);
    assert_memory_equal(y, wy, sizeof wy);
    assert_int_equal(mlp_feed_ahead(f, step, 16, 8), HSR_OK);
    mlp_data(&c, step, 16, 8, want, wy);
    assert_int_equal(mlp_feed_get(f, step, 16, 8, &x, &y), HSR_OK); /* made ahead */
    assert_memory_equal(x, want, 8 * 8 * sizeof(float));
    assert_memory_equal(y, wy, 8 * sizeof(int));
    assert_int_equal(mlp_feed_ahead(f, step + 9, 0, 8), HSR_OK); /* asked for, then not taken */
  }
  mlp_feed_free(f);
}

static void test_reference_learns(void **state) {
  (void)state;
  mlp_cfg c = {.layers = 3, .dim = 16, .in_dim = 16, .classes = 8, .seed = 1};
  mlp_opt o = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .clip = 1.0};
  mlp_ref *r;
  assert_int_equal(mlp_ref_create(&c, &o, 64, &r), HSR_OK);
  double first = 0, last = 0, loss, gn;
  for (int s = 0; s < 60; s++) {
    assert_int_equal(mlp_ref_step(r, s, &loss, &gn), HSR_OK);
    assert_true(isfinite(loss) && gn > 0);
    if (s < 5) first += loss / 5;
    if (s >= 55) last += loss / 5;
  }
  if (!(last < 0.8 * first)) fail_msg("loss did not fall: first %.4f last %.4f", first, last);
  mlp_ref_free(r);
}

int main(void) {
  mlp_blas_threads(1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_math), cmocka_unit_test(test_gradcheck),        cmocka_unit_test(test_data_deterministic),
      cmocka_unit_test(test_feed), cmocka_unit_test(test_reference_learns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
