/* Unit tests of the example model: finite-difference gradient check, data
 * determinism, and the single-rank reference trainer's loss falling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mlp.h"

typedef struct arrays {
  float *p[16][4], *g[16][4];
} arrays;

static hsr_status acq(void *ctx, int unit, int backward, mlp_unit_ptrs *p) {
  arrays *a = ctx;
  (void)backward;
  for (int k = 0; k < 4; k++) p->w[k] = a->p[unit][k], p->g[k] = a->g[unit][k];
  return HSR_OK;
}
static hsr_status rel(void *ctx, int unit, int backward) {
  (void)ctx, (void)unit, (void)backward;
  return HSR_OK;
}

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
      cmocka_unit_test(test_gradcheck),
      cmocka_unit_test(test_data_deterministic),
      cmocka_unit_test(test_reference_learns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
