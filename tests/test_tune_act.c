/* The tuner's activation model of hsr's GPT and Llama examples
 * (tune_act_predict, families hsr-gpt and hsr-llama) against the
 * examples' own count (gpt_act_plan_of, what their workspace allocates and
 * the engine's ledger notes), to the byte: per layer kept, one layer's
 * recompute scratch, the root's part and the total, for every recompute
 * policy over shapes of several widths, heads, kv heads, MLP widths,
 * sequences, vocabularies and micro-batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "gpt.h"
#include "tune/tune.h"

static void test_equal(void **state) {
  (void)state;
  static const int shapes[][9] = {/* llama, L, C, H, KV, F, T, V, B */
                                  {0, 2, 64, 4, 0, 0, 32, 256, 2}, {0, 4, 128, 8, 0, 0, 64, 256, 1},
                                  {0, 3, 96, 3, 0, 0, 17, 50, 5},  {0, 12, 768, 12, 0, 0, 1024, 50257, 1},
                                  {1, 2, 64, 4, 2, 0, 32, 256, 2}, {1, 3, 96, 6, 3, 200, 17, 50, 3},
                                  {1, 2, 128, 8, 8, 0, 64, 300, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int rc = HSR_RT_RECOMPUTE_NONE; rc <= HSR_RT_RECOMPUTE_SELECTIVE; rc++) {
      const int *s = shapes[i];
      gpt_cfg c = {.arch = s[0] ? GPT_ARCH_LLAMA : GPT_ARCH_GPT2,
                   .n_layer = s[1],
                   .n_embd = s[2],
                   .n_head = s[3],
                   .n_kv_head = s[4],
                   .n_ff = s[5],
                   .n_ctx = s[6],
                   .vocab = s[7],
                   .recompute = (hsr_rt_recompute)rc};
      gpt_act_plan g;
      assert_int_equal(gpt_act_plan_of(&c, s[8], s[6], &g), HSR_OK);
      tune_arch a;
      assert_int_equal(tune_arch_preset(s[0] ? "hsr-llama" : "hsr-gpt", &a), HSR_OK);
      a.layers = s[1], a.width = s[2], a.heads = s[3], a.kv_heads = s[4], a.ffn = s[5], a.seq = s[6];
      a.vocab = s[7], a.micro_batch = s[8];
      tune_act t;
      assert_int_equal(tune_act_predict(&a, (hsr_rt_recompute)rc, &t), HSR_OK);
      printf("%s L%d C%d H%d KV%d F%d T%d V%d B%d %s: layer %zu scratch %zu fixed %zu total %zu\n",
             s[0] ? "llama" : "gpt", s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8],
             hsr_rt_recompute_name((hsr_rt_recompute)rc), g.layer, g.scratch, g.fixed, g.total);
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
