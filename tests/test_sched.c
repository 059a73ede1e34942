/* Unit tests of the predicted ledger (known layouts, by hand) and the wrap diagnostic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hsr/tune_ledger.h"

/* Two units of 1024 and 4096 f32 elements, S = 4, align 16: no padding. */
static hsr_rt_layout *two_units(int S) {
  hsr_rt_layout *l;
  assert_int_equal(hsr_rt_layout_create(16, &l), HSR_OK);
  int u;
  int64_t a[] = {1024}, b[] = {64, 64};
  assert_int_equal(hsr_rt_layout_add_unit(l, "root", &u), HSR_OK);
  assert_int_equal(hsr_rt_layout_add_param(l, u, "a", 1, a, 0), HSR_OK);
  assert_int_equal(hsr_rt_layout_add_unit(l, "blk", &u), HSR_OK);
  assert_int_equal(hsr_rt_layout_add_param(l, u, "b", 2, b, 0), HSR_OK);
  assert_int_equal(hsr_rt_layout_finalize(l, S), HSR_OK);
  return l;
}

static void test_predict_fsdp(void **state) {
  (void)state;
  hsr_rt_layout *l = two_units(4);
  hsr_rt_config c;
  hsr_rt_config_default(&c);
  c.strategy = HSR_RT_FSDP;
  c.prefetch = 0;
  c.root_reshard = 1;
  hsr_prog_call *p;
  int n;
  assert_int_equal(hsr_tune_prog_nested(2, 0, 1, &p, &n), HSR_OK);
  assert_int_equal(n, 9);
  hsr_ledger *h, *u;
  hsr_ledger_create(&h);
  hsr_ledger_create(&u);
  int roots[2] = {0, 0};
  hsr_status st = hsr_tune_ledger_predict(l, roots, &c, 4, 1, p, n, 3, h, u);
  if (st != HSR_OK) fprintf(stderr, "%s\n", hsr_last_error());
  assert_int_equal(st, HSR_OK);
  /* persistent: (256 + 1024) elements x 4 B x 5 categories */
  assert_int_equal(hsr_ledger_persistent(h), 1280 * 4 * 5);
  assert_int_equal(hsr_ledger_peak(h, HSR_MEM_MASTER), 1280 * 4);
  /* sequential units, no prefetch: one full unit at a time, pool keeps one of each size */
  assert_int_equal(hsr_ledger_peak(u, HSR_MEM_FULL_UNIT), 4096 * 4);
  assert_int_equal(hsr_ledger_peak(h, HSR_MEM_FULL_UNIT), (4096 + 1024) * 4);
  /* backward of blk: full unit + its f32 gradient */
  assert_int_equal(hsr_ledger_peak(u, HSR_MEM_RS_BUF), (4096 + 1024) * 4);
  assert_int_equal(hsr_ledger_peak(u, HSR_MEM_AR_BUF), (1024 + 256) * 4);
  hsr_ledger_where w = hsr_ledger_runtime_peak_where(u);
  assert_int_equal(w.phase, HSR_PHASE_BACKWARD);
  assert_int_equal(w.unit,
                   1); /* blk: its full unit and full gradient (32 KiB) beat root + queued blk reduction (28 KiB) */
  /* everything transient is back in the pool at the end */
  assert_int_equal(hsr_ledger_current(u, HSR_MEM_FULL_UNIT), 0);
  assert_int_equal(hsr_ledger_current(h, HSR_MEM_FULL_UNIT), (4096 + 1024) * 4);

  /* ddp: full parameters are persistent, no gathers */
  c.strategy = HSR_RT_DDP;
  hsr_rt_layout *l1 = two_units(1);
  assert_int_equal(hsr_tune_ledger_predict(l1, roots, &c, 1, 4, p, n, 2, h, u), HSR_OK);
  assert_int_equal(hsr_ledger_persistent(h), 5120 * 4 * 5);
  assert_int_equal(hsr_ledger_peak(h, HSR_MEM_FULL_UNIT), 0);
  /* bad input */
  assert_int_equal(hsr_tune_ledger_predict(l1, roots, &c, 4, 1, p, n, 2, h, u), HSR_ERR_INVALID);
  free(p);
  hsr_rt_layout_free(l);
  hsr_rt_layout_free(l1);
  hsr_ledger_free(h);
  hsr_ledger_free(u);
}

static void test_wrap(void **state) {
  (void)state;
  hsr_wrap_report r;
  /* per block: 4 blocks + root kept, reshard full: 2 x 4 + 1 gathers */
  hsr_wrap_input in = {.gathers_per_step = 9,
                       .repeating_blocks = 4,
                       .units = 5,
                       .root_units = 1,
                       .root_gathers_per_step = 1,
                       .gathers_per_unit = 2,
                       .mean_gather_bytes = 256 << 10,
                       .mean_gather_us = 80,
                       .min_unit_bytes = 64 << 10};
  assert_int_equal(hsr_tune_wrap_check(&in, &r), HSR_OK);
  assert_false(r.too_many_gathers);
  assert_false(r.latency_bound);
  assert_string_equal(r.message, "");
  /* per linear layer: 2 units per block */
  hsr_wrap_input lin = in;
  lin.gathers_per_step = 17;
  lin.units = 9;
  lin.mean_gather_bytes = 128 << 10;
  assert_int_equal(hsr_tune_wrap_check(&lin, &r), HSR_OK);
  assert_true(r.too_many_gathers);
  assert_true(r.gathers_per_block > 3.9 && r.gathers_per_block < 4.1);
  assert_non_null(strstr(r.message, "per block"));
  /* small units: latency-bound */
  in.mean_gather_bytes = 4096;
  assert_int_equal(hsr_tune_wrap_check(&in, &r), HSR_OK);
  assert_true(r.latency_bound);
  assert_non_null(strstr(r.message, "HSR_WRAP_MIN_BYTES"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_predict_fsdp), cmocka_unit_test(test_wrap)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
