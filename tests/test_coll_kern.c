/* Unit tests of the collectives' host kernels: the streaming copy, the 16-bit
 * float conversions and the n-input reductions (bf16/f16 summed in f32). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "collectives/kern.h"

static void test_copy_sizes_and_alignment(void **state) {
  (void)state;
  size_t max = (3u << 20) + 333;
  unsigned char *src = malloc(max + 64), *dst = malloc(max + 64);
  for (size_t i = 0; i < max + 64; i++) src[i] = (unsigned char)(i * 131 + 7);
  size_t sizes[] = {0, 1, 31, 32, 129, 4096, (256u << 10) - 1, 256u << 10, (1u << 20) + 17, max};
  for (int avx = 0; avx < 2; avx++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
      for (int so = 0; so < 3; so++)
        for (int d0 = 0; d0 < 3; d0++) {
          memset(dst, 0xee, max + 64);
          coll_copy(dst + d0 * 5, src + so * 3, sizes[k], avx && __builtin_cpu_supports("avx2"));
          assert_memory_equal(dst + d0 * 5, src + so * 3, sizes[k]);
          assert_int_equal(dst[d0 * 5 + sizes[k]], 0xee); /* nothing written past the end */
          if (d0) assert_int_equal(dst[d0 * 5 - 1], 0xee);
        }
  free(src);
  free(dst);
}

static void test_half_round_trip(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = coll_half_to_f32(HSR_F16, (uint16_t)h);
    if (isnan(f)) {
      assert_true(isnan(coll_half_to_f32(HSR_F16, coll_f32_to_half(HSR_F16, f))));
      continue;
    }
    assert_int_equal(coll_f32_to_half(HSR_F16, f), h);
    float b = coll_half_to_f32(HSR_BF16, (uint16_t)h);
    if (!isnan(b)) assert_int_equal(coll_f32_to_half(HSR_BF16, b), h);
  }
  /* f16: 65504 is the largest finite value, 65520 rounds to infinity, 2^-24 the smallest subnormal */
  assert_true(coll_half_to_f32(HSR_F16, coll_f32_to_half(HSR_F16, 65504.f)) == 65504.f);
  assert_true(isinf(coll_half_to_f32(HSR_F16, coll_f32_to_half(HSR_F16, 65520.f))));
  assert_true(coll_half_to_f32(HSR_F16, 1) == ldexpf(1, -24));
  /* ties round to even */
  assert_true(coll_half_to_f32(HSR_F16, coll_f32_to_half(HSR_F16, 1 + ldexpf(1, -11))) == 1.f);
  assert_true(coll_half_to_f32(HSR_F16, coll_f32_to_half(HSR_F16, 1 + 3 * ldexpf(1, -11))) == 1 + ldexpf(1, -9));
  assert_true(coll_half_to_f32(HSR_BF16, coll_f32_to_half(HSR_BF16, 257.f)) == 256.f);
  assert_true(coll_half_to_f32(HSR_BF16, coll_f32_to_half(HSR_BF16, 259.f)) == 260.f);
}

static void test_reduce_bf16_accumulates_in_f32(void **state) {
  (void)state;
  /* 256 + 1 + 1: pairwise bf16 sums round 257 back to 256; one f32 sum gives 258. */
  uint16_t a[3], b[3], c[3], out[3];
  for (int i = 0; i < 3; i++) {
    a[i] = coll_f32_to_half(HSR_BF16, 256.f);
    b[i] = c[i] = coll_f32_to_half(HSR_BF16, 1.f);
  }
  const void *ins[3] = {a, b, c};
  coll_reduce(HSR_BF16, HSR_SUM, out, ins, 3, 3, 3);
  for (int i = 0; i < 3; i++) assert_true(coll_half_to_f32(HSR_BF16, out[i]) == 258.f);
  coll_reduce(HSR_BF16, HSR_AVG, out, ins, 3, 3, 3);
  assert_true(coll_half_to_f32(HSR_BF16, out[0]) == 86.f);
  coll_reduce(HSR_BF16, HSR_MAX, out, ins, 3, 3, 3);
  assert_true(coll_half_to_f32(HSR_BF16, out[2]) == 256.f);
}

static void test_reduce_types(void **state) {
  (void)state;
  enum { N = 3000 }; /* more than one internal block */
  static float f0[N], f1[N], fo[N];
  static int32_t i0[N], i1[N], io[N];
  static uint8_t u0[N], u1[N], uo[N];
  static double d0[N], d1[N], dd[N];
  for (int i = 0; i < N; i++) {
    f0[i] = (float)i, f1[i] = -0.5f * (float)i;
    i0[i] = INT32_MAX, i1[i] = i;
    u0[i] = 200, u1[i] = (uint8_t)(i & 0x7f);
    d0[i] = i * 0.25, d1[i] = -i;
  }
  const void *fi[2] = {f0, f1}, *ii[2] = {i0, i1}, *ui[2] = {u0, u1}, *di[2] = {d0, d1};
  coll_reduce(HSR_F32, HSR_SUM, fo, fi, 2, N, 2);
  coll_reduce(HSR_I32, HSR_SUM, io, ii, 2, N, 2);
  coll_reduce(HSR_U8, HSR_AVG, uo, ui, 2, N, 2);
  coll_reduce(HSR_F64, HSR_MAX, dd, di, 2, N, 2);
  for (int i = 0; i < N; i++) {
    assert_true(fo[i] == 0.5f * (float)i);
    assert_int_equal(io[i], (int32_t)((uint32_t)INT32_MAX + (uint32_t)i)); /* wraps */
    assert_int_equal(uo[i], (200 + (i & 0x7f)) / 2);                       /* averaged before truncation */
    assert_true(dd[i] == i * 0.25);
  }
  /* in place: out aliases the first input */
  coll_reduce(HSR_F32, HSR_AVG, f0, fi, 2, N, 2);
  for (int i = 0; i < N; i++) assert_true(f0[i] == 0.25f * (float)i);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copy_sizes_and_alignment),
      cmocka_unit_test(test_half_round_trip),
      cmocka_unit_test(test_reduce_bf16_accumulates_in_f32),
      cmocka_unit_test(test_reduce_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
