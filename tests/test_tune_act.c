/* The tuner's activation model of hsr's GPT example (hsr_tune_act_predict,
 * family hsr-gpt) against the example's own count (gpt_act_plan_of, what its
 * workspace allocates and the engine's ledger notes), to the byte: per layer
 * kept, one layer's recompute scratch, the root's part and the total, for
 * every recompute policy over shapes of several widths, heads, sequences,
 * vocabularies and micro-batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "gpt.h"
#include "hsr/tune.h"

static void test_equal(void **state) {
  (void)state;
  static const int shapes[][6] = {/* L, C, H, T, V, B */
                                  {2, 64, 4, 32, 256, 2},
                                  {4, 128, 8, 64, 256, 1},
                                  {3, 96, 3, 17, 50, 5},
                                  {12, 768, 12, 1024, 50257, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int rc = HSR_RT_RECOMPUTE_NONE; rc <= HSR_RT_RECOMPUTE_SELECTIVE; rc++) {
      const int *s = shapes[i];
      gpt_cfg c = {.n_layer = s[0], .n_embd = s[1], .n_head = s[2], .n_ctx = s[3], .vocab = s[4],
                   .recompute = (hsr_rt_recompute)rc};
      gpt_act_plan g;
      assert_int_equal(gpt_act_plan_of(&c, s[5], s[3], &g), HSR_OK);
      hsr_tune_arch a;
      assert_int_equal(hsr_tune_arch_preset("hsr-gpt", &a), HSR_OK);
      a.layers = s[0], a.width = s[1], a.heads = s[2], a.seq = s[3], a.vocab = s[4], a.micro_batch = s[5];
      hsr_tune_act t;
      assert_int_equal(hsr_tune_act_predict(&a, (hsr_rt_recompute)rc, &t), HSR_OK);
      printf("L%d C%d H%d T%d V%d B%d %s: layer %zu scratch %zu fixed %zu total %zu\n", s[0], s[1], s[2], s[3], s[4],
             s[5], hsr_rt_recompute_name((hsr_rt_recompute)rc), g.layer, g.scratch, g.fixed, g.total);
      assert_true(t.saved == (double)g.layer);
      assert_true(t.scratch == (double)g.scratch);
      assert_true(t.root == (double)g.fixed);
      assert_true(t.peak == (double)g.total);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_equal)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
