/* Unit tests of the runtime layout (ownership property, duplicates, hash) and
 * of the configuration parsers/resolution. */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hsr/runtime.h"
#include "runtime/runtime_internal.h"
#include "common/dtype_internal.h"

/* Awkward sizes: primes, 1, 0, sizes smaller than S, a straddling big one. */
static const int64_t sizes[] = {7, 0, 1, 13, 0, 31, 2, 97, 3, 1021, 5, 0, 11, 257, 1};

static rt_layout *build(size_t align, int shards, int nunits) {
  rt_layout *l = NULL;
  assert_int_equal(rt_layout_create(align, &l), HSR_OK);
  int k = 0;
  for (int u = 0; u < nunits; u++) {
    char name[32];
    snprintf(name, sizeof name, "u%d", u);
    int id;
    assert_int_equal(rt_layout_add_unit(l, name, &id), HSR_OK);
    assert_int_equal(id, u);
    int np = u == nunits - 1 ? 0 : 1 + (u * 3) % 6; /* the last unit is empty */
    for (int p = 0; p < np; p++, k++) {
      int64_t shape[2] = {sizes[k % 15], (k % 4) == 0 ? 3 : 1};
      snprintf(name, sizeof name, "u%d.p%d", u, p);
      assert_int_equal(rt_layout_add_param(l, u, name, 2, shape, p % 2), HSR_OK);
    }
  }
  assert_int_equal(rt_layout_finalize(l, shards), HSR_OK);
  return l;
}

static void test_ownership_property(void **state) {
  (void)state;
  size_t aligns[] = {1, 4, 16};
  for (int ai = 0; ai < 3; ai++)
    for (int S = 1; S <= 64; S++) {
      rt_layout *l = build(aligns[ai], S, 5);
      for (int u = 0; u < rt_layout_num_units(l); u++) {
        size_t L = rt_layout_unit_len(l, u), sl = rt_layout_shard_len(l, u);
        assert_true(L > 0);
        assert_int_equal(L % ((size_t)S * aligns[ai]), 0);
        assert_int_equal(sl * (size_t)S, L);
        /* every element has exactly one owner, and owners are the contiguous slices */
        for (size_t e = 0; e < L; e++) {
          int o = rt_layout_owner(l, u, e);
          assert_true(o >= 0 && o < S);
          assert_true(e >= (size_t)o * sl && e < (size_t)(o + 1) * sl);
        }
        assert_int_equal(rt_layout_owner(l, u, L), -1);
      }
      /* parameters: aligned, inside their unit, disjoint, every element owned once */
      int np = rt_layout_num_params(l);
      for (int i = 0; i < np; i++) {
        rt_param_info p;
        assert_int_equal(rt_layout_param(l, i, &p), HSR_OK);
        assert_int_equal(p.offset % aligns[ai], 0);
        assert_true(p.offset + p.numel <= rt_layout_unit_len(l, p.unit));
        size_t owned = 0;
        for (int s = 0; s < S; s++) {
          size_t sl = rt_layout_shard_len(l, p.unit), lo = (size_t)s * sl, hi = lo + sl;
          size_t a = p.offset > lo ? p.offset : lo, b = p.offset + p.numel < hi ? p.offset + p.numel : hi;
          if (b > a) owned += b - a;
        }
        assert_int_equal(owned, p.numel);
        for (int j = 0; j < np; j++) {
          rt_param_info q;
          assert_int_equal(rt_layout_param(l, j, &q), HSR_OK);
          if (j == i || q.unit != p.unit || !p.numel || !q.numel) continue;
          assert_true(p.offset + p.numel <= q.offset || q.offset + q.numel <= p.offset);
        }
      }
      rt_layout_free(l);
    }
}

static void test_deterministic_hash(void **state) {
  (void)state;
  rt_layout *a = build(16, 4, 4), *b = build(16, 4, 4), *c = build(16, 8, 4), *d = build(8, 4, 4);
  assert_true(rt_layout_hash(a) == rt_layout_hash(b));
  assert_true(rt_layout_hash(a) != rt_layout_hash(c));
  assert_true(rt_layout_hash(a) != rt_layout_hash(d));
  for (int i = 0; i < rt_layout_num_params(a); i++) {
    rt_param_info p, q;
    rt_layout_param(a, i, &p);
    rt_layout_param(b, i, &q);
    assert_int_equal(p.offset, q.offset);
  }
  rt_layout_free(a), rt_layout_free(b), rt_layout_free(c), rt_layout_free(d);
}

static void test_bad_registration(void **state) {
  (void)state;
  rt_layout *l = NULL;
  int u0, u1;
  int64_t shape[1] = {5};
  assert_int_equal(rt_layout_create(0, &l), HSR_ERR_INVALID);
  assert_int_equal(rt_layout_create(16, &l), HSR_OK);
  assert_int_equal(rt_layout_add_unit(l, "a", &u0), HSR_OK);
  assert_int_equal(rt_layout_add_unit(l, "a", &u1), HSR_ERR_INVALID);
  assert_int_equal(rt_layout_add_unit(l, "b", &u1), HSR_OK);
  assert_int_equal(rt_layout_add_param(l, u0, "w", 1, shape, 0), HSR_OK);
  /* a tied parameter is registered once: the same name in another unit is an error */
  assert_int_equal(rt_layout_add_param(l, u1, "w", 1, shape, 0), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "registered twice"));
  assert_int_equal(rt_layout_add_param(l, 7, "x", 1, shape, 0), HSR_ERR_INVALID);
  assert_int_equal(rt_layout_add_param(l, u0, "y", 1, shape, HSR_RT_MAX_GROUPS), HSR_ERR_INVALID);
  int64_t neg[1] = {-1};
  assert_int_equal(rt_layout_add_param(l, u0, "z", 1, neg, 0), HSR_ERR_INVALID);
  assert_int_equal(rt_layout_finalize(l, 3), HSR_OK);
  assert_int_equal(rt_layout_add_unit(l, "late", &u1), HSR_ERR_STATE);
  assert_non_null(strstr(hsr_last_error(), "after"));
  assert_int_equal(rt_layout_add_param(l, u0, "late", 1, shape, 0), HSR_ERR_STATE);
  int idx;
  assert_int_equal(rt_layout_find(l, "w", &idx), HSR_OK);
  assert_int_equal(rt_layout_find(l, "nope", &idx), HSR_ERR_NOT_FOUND);
  rt_layout_free(l);
}

static void test_config(void **state) {
  (void)state;
  hsr_rt_config c;
  int S, R, k;
  hsr_rt_reshard rs;
  assert_int_equal(hsr_rt_config_default(&c), HSR_OK);
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_OK); /* fsdp auto: all ranks */
  assert_int_equal(S, 4);
  assert_int_equal(R, 1);
  c.strategy = HSR_RT_HYBRID;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_OK); /* hybrid auto: domain size */
  assert_int_equal(S, 2);
  assert_int_equal(R, 2);
  assert_int_equal(rt_config_resolve(&c, 4, 4, &S, &R), HSR_ERR_INVALID);
  c.strategy = HSR_RT_FSDP;
  c.replicate = 2;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_ERR_INVALID);
  c.replicate = 0;
  c.shard = 3;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_ERR_INVALID);
  c.shard = 4;
  assert_int_equal(rt_parse_reshard("partial:3", &rs, &k), HSR_OK);
  c.reshard = rs, c.partial_k = k;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_ERR_INVALID);
  assert_non_null(strstr(hsr_last_error(), "valid K: 1, 2, 4"));
  c.partial_k = 2;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_OK);
  c.strategy = HSR_RT_DDP;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_ERR_INVALID);
  c.shard = 0;
  c.reshard = HSR_RT_RESHARD_FULL;
  assert_int_equal(rt_config_resolve(&c, 4, 2, &S, &R), HSR_OK);
  assert_int_equal(S, 1);
  assert_int_equal(R, 4);
  assert_int_equal(rt_parse_reshard("partial:0", &rs, &k), HSR_ERR_INVALID);
  assert_int_equal(rt_parse_reshard("half", &rs, &k), HSR_ERR_INVALID);
  assert_int_equal(rt_parse_reshard("none", &rs, &k), HSR_OK);
  assert_int_equal(rs, HSR_RT_RESHARD_NONE);
  hsr_rt_strategy st;
  assert_int_equal(hsr_rt_parse_strategy("zero2", &st), HSR_OK);
  assert_int_equal(st, HSR_RT_ZERO2);
  assert_int_equal(hsr_rt_parse_strategy("zero3", &st), HSR_ERR_INVALID);
  hsr_rt_sync sy;
  assert_int_equal(rt_parse_sync("rs_only", &sy), HSR_OK);
  assert_int_equal(sy, HSR_RT_SYNC_RS_ONLY);
  /* device: host by default; cuda = automatic ordinal; cuda:N; bad values name what is valid */
  hsr_rt_config dc;
  assert_int_equal(hsr_rt_config_default(&dc), HSR_OK);
  assert_int_equal(dc.device, HSR_DEVICE_HOST);
  assert_int_equal(dc.device_ordinal, -1);
  assert_null(dc.dev);
  assert_null(dc.stream);
  hsr_device_kind dk;
  int ord;
  assert_int_equal(rt_parse_device("host", &dk, &ord), HSR_OK);
  assert_int_equal(dk, HSR_DEVICE_HOST);
  assert_int_equal(rt_parse_device("cuda", &dk, &ord), HSR_OK);
  assert_true(dk == HSR_DEVICE_CUDA && ord == -1);
  assert_int_equal(rt_parse_device("cuda:3", &dk, &ord), HSR_OK);
  assert_true(dk == HSR_DEVICE_CUDA && ord == 3);
  const char *bad[] = {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(rt_parse_device(bad[i], &dk, &ord), HSR_ERR_INVALID);
    assert_non_null(strstr(hsr_last_error(), "valid: host, cuda, cuda:N"));
  }
  dc.device = (hsr_device_kind)7;
  int dS, dR;
  assert_int_equal(rt_config_resolve(&dc, 4, 4, &dS, &dR), HSR_ERR_INVALID);
}

/* Warm-up then cosine, values computed by hand: lr 1, lr_min 0.1, warm-up 2, 10 steps. */
static void upper(const char *s, char *out, size_t n) {
  snprintf(out, n, "%s", s);
  for (char *c = out; *c; c++) *c = (char)toupper((unsigned char)*c);
}

/* The choice lists of the flags (--strategy, --sync, --param-dtype and
 * --reduce-dtype, -o/--op's redop, --reshard): every value's name, in any
 * case where the parser takes any case, parses back to that value, and the
 * names are distinct. A parser that maps a name to the wrong entry of its
 * list fails here. */
static void test_choice_round_trip(void **state) {
  (void)state;
  char u[64];
  for (int i = 0; i < HSR_RT_STRATEGY_COUNT; i++) {
    hsr_rt_strategy st = (hsr_rt_strategy)-1;
    const char *name = rt_strategy_name((hsr_rt_strategy)i);
    upper(name, u, sizeof u);
    assert_int_equal(hsr_rt_parse_strategy(name, &st), HSR_OK);
    assert_int_equal(st, i);
    assert_int_equal(hsr_rt_parse_strategy(u, &st), HSR_OK);
    assert_int_equal(st, i);
    for (int j = 0; j < i; j++) assert_string_not_equal(name, rt_strategy_name((hsr_rt_strategy)j));
  }
  for (int i = 0; i <= HSR_RT_SYNC_RS_ONLY; i++) {
    hsr_rt_sync sy = (hsr_rt_sync)-1;
    upper(rt_sync_name((hsr_rt_sync)i), u, sizeof u);
    assert_int_equal(rt_parse_sync(rt_sync_name((hsr_rt_sync)i), &sy), HSR_OK);
    assert_int_equal(sy, i);
    assert_int_equal(rt_parse_sync(u, &sy), HSR_OK);
    assert_int_equal(sy, i);
  }
  for (int i = 0; i < HSR_DTYPE_COUNT; i++) {
    hsr_dtype dt = (hsr_dtype)-1;
    upper(dtype_name((hsr_dtype)i), u, sizeof u);
    assert_int_equal(dtype_parse(dtype_name((hsr_dtype)i), &dt), HSR_OK);
    assert_int_equal(dt, i);
    assert_int_equal(dtype_parse(u, &dt), HSR_OK);
    assert_int_equal(dt, i);
  }
  for (int i = 0; i < HSR_REDOP_COUNT; i++) {
    hsr_redop op = (hsr_redop)-1;
    assert_int_equal(redop_parse(redop_name((hsr_redop)i), &op), HSR_OK);
    assert_int_equal(op, i);
  }
  static const struct {
    const char *s;
    hsr_rt_reshard r;
    int k;
  } rs[] = {
      {"full", HSR_RT_RESHARD_FULL, 0}, {"none", HSR_RT_RESHARD_NONE, 0}, {"partial:2", HSR_RT_RESHARD_PARTIAL, 2}};
  for (int i = 0; i < 3; i++) {
    hsr_rt_reshard r = (hsr_rt_reshard)-1;
    int k = -1;
    assert_int_equal(rt_parse_reshard(rs[i].s, &r, &k), HSR_OK);
    assert_true(r == rs[i].r && k == rs[i].k);
  }
}

static void test_lr_schedule(void **state) {
  (void)state;
  rt_lr_schedule s = {.lr = 1.0, .lr_min = 0.1, .warmup = 2, .total = 10};
  assert_int_equal(rt_lr_check(&s), HSR_OK);
  assert_float_equal(rt_lr_at(&s, 1), 0.5, 1e-12);
  assert_float_equal(rt_lr_at(&s, 2), 1.0, 1e-12);
  assert_float_equal(rt_lr_at(&s, 3), 1.0, 1e-12);                                    /* decay starts at ratio 0 */
  assert_float_equal(rt_lr_at(&s, 6), 0.1 + 0.45 * (1 + 0.38268343236508984), 1e-12); /* ratio 3/8 */
  assert_float_equal(rt_lr_at(&s, 10), 0.1 + 0.45 * (1 + cos(M_PI * 7 / 8)), 1e-12);
  assert_float_equal(rt_lr_at(&s, 11), 0.1, 1e-12);
  assert_float_equal(rt_lr_at(&s, 500), 0.1, 1e-12);
  rt_lr_schedule c = {.lr = 0.3};
  assert_float_equal(rt_lr_at(&c, 1), 0.3, 1e-12);
  assert_float_equal(rt_lr_at(&c, 99), 0.3, 1e-12);
  rt_lr_schedule bad[] = {
      {.lr = 0}, {.lr = 1, .lr_min = 2}, {.lr = 1, .warmup = 10, .total = 10}, {.lr = 1, .warmup = -1}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) assert_int_equal(rt_lr_check(&bad[k]), HSR_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ownership_property), cmocka_unit_test(test_deterministic_hash),
      cmocka_unit_test(test_bad_registration),   cmocka_unit_test(test_config),
      cmocka_unit_test(test_lr_schedule),        cmocka_unit_test(test_choice_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
