/* Unit tests of the engine-less checkpoint planner (ckpt_geom): on awkward
 * layouts and meshes (primes, empty parameters and units, S larger than a
 * unit, the outer shard), the pieces of every rank write every element of
 * every parameter exactly once, each inside what that rank holds; a rank's
 * whole pieces are all it holds; a layout finalized for another mesh and a
 * coordinate off the mesh are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtime/ckpt/ckpt_internal.h"
#include "runtime/runtime_internal.h"

static const int64_t sizes[] = {7, 0, 1, 13, 0, 31, 2, 97, 3, 1021, 5, 0, 11, 257, 1};

static rt_layout *build(int R, int S, int outer) {
  rt_layout *l = NULL;
  assert_int_equal(rt_layout_create(4, &l), HSR_OK);
  if (outer) assert_int_equal(rt_layout_set_subshards(l, R), HSR_OK);
  int k = 0;
  for (int u = 0; u < 6; u++) {
    char name[32];
    int id;
    snprintf(name, sizeof name, "u%d", u);
    assert_int_equal(rt_layout_add_unit(l, name, &id), HSR_OK);
    int np = u == 4 ? 0 : 1 + (u * 3) % 6; /* unit 4 is empty */
    for (int p = 0; p < np; p++, k++) {
      int64_t shape[2] = {sizes[k % 15], (k % 4) == 0 ? 3 : 1};
      snprintf(name, sizeof name, "u%d.p%d", u, p);
      assert_int_equal(rt_layout_add_param(l, u, name, 2, shape, 0), HSR_OK);
    }
  }
  assert_int_equal(rt_layout_finalize(l, S), HSR_OK);
  return l;
}

static void check_mesh(int R, int S, int outer) {
  rt_layout *l = build(R, S, outer);
  ckpt_geom *g = NULL;
  assert_int_equal(ckpt_geom_create(l, R, S, outer, &g), HSR_OK);
  int np = rt_layout_num_params(l);
  uint8_t **seen = calloc((size_t)np, sizeof *seen);
  rt_param_info *pi = calloc((size_t)np, sizeof *pi);
  assert_non_null(seen);
  for (int i = 0; i < np; i++) {
    assert_int_equal(rt_layout_param(l, i, &pi[i]), HSR_OK);
    seen[i] = calloc(pi[i].numel + 1, 1);
  }
  for (int rep = 0; rep < R; rep++)
    for (int sh = 0; sh < S; sh++) {
      ckpt_piece *pc = NULL, *all = NULL;
      int n = 0, na = 0;
      assert_int_equal(ckpt_geom_pieces(g, rep, sh, 0, &pc, &n), HSR_OK);
      assert_int_equal(ckpt_geom_pieces(g, rep, sh, 1, &all, &na), HSR_OK);
      uint64_t held = 0, whole = 0;
      for (int i = 0; i < n; i++) {
        const ckpt_piece *p = &pc[i];
        uint64_t lo, len;
        int part, parts;
        assert_true(p->count > 0);
        assert_int_equal(pi[p->param].unit, p->unit);
        assert_true(p->start + p->count <= pi[p->param].numel);
        assert_int_equal(ckpt_geom_range(g, p->unit, rep, sh, &lo, &len, &part, &parts), HSR_OK);
        /* inside what the rank holds, at the place it holds it */
        assert_true(p->local + p->count <= len);
        assert_int_equal(lo + p->local, pi[p->param].offset + p->start);
        for (uint64_t e = p->start; e < p->start + p->count; e++) seen[p->param][e]++;
        held += p->count;
      }
      for (int i = 0; i < na; i++) whole += all[i].count;
      assert_true(held <= whole);
      if (R == 1 || outer) assert_int_equal(held, whole); /* nobody else holds it */
      free(pc), free(all);
    }
  for (int i = 0; i < np; i++)
    for (uint64_t e = 0; e < pi[i].numel; e++) {
      if (seen[i][e] != 1)
        fail_msg("mesh %d x %d%s: %s element %llu written %d times", R, S, outer ? " outer" : "", pi[i].name,
                 (unsigned long long)e, seen[i][e]);
    }
  for (int i = 0; i < np; i++) free(seen[i]);
  free(seen), free(pi);
  ckpt_geom_free(g);
  rt_layout_free(l);
}

static void test_every_element_once(void **state) {
  (void)state;
  static const int m[][3] = {{1, 1, 0}, {1, 4, 0}, {2, 2, 0}, {3, 5, 0}, {4, 1, 0}, {8, 7, 0},  {1, 64, 0},
                             {2, 3, 1}, {4, 4, 1}, {3, 1, 1}, {5, 2, 1}, {1, 3, 1}, {16, 2, 0}, {7, 9, 1}};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) check_mesh(m[i][0], m[i][1], m[i][2]);
}

static void test_refusals(void **state) {
  (void)state;
  rt_layout *l = build(2, 4, 0);
  ckpt_geom *g = NULL;
  assert_int_equal(ckpt_geom_create(l, 2, 3, 0, &g), HSR_ERR_INVALID); /* finalized for 4 shards */
  assert_null(g);
  assert_int_equal(ckpt_geom_create(l, 2, 4, 1, &g), HSR_ERR_INVALID); /* not cut into 2 pieces */
  assert_int_equal(ckpt_geom_create(l, 0, 4, 0, &g), HSR_ERR_INVALID);
  assert_int_equal(ckpt_geom_create(l, 2, 4, 0, &g), HSR_OK);
  uint64_t lo, n;
  int part, parts;
  ckpt_piece *pc = NULL;
  int np = 0;
  assert_int_equal(ckpt_geom_range(g, 0, 2, 0, &lo, &n, &part, &parts), HSR_ERR_INVALID);
  assert_int_equal(ckpt_geom_range(g, 6, 0, 0, &lo, &n, &part, &parts), HSR_ERR_INVALID);
  assert_int_equal(ckpt_geom_pieces(g, 0, 4, 0, &pc, &np), HSR_ERR_INVALID);
  assert_int_equal(ckpt_geom_range(g, 1, 1, 3, &lo, &n, &part, &parts), HSR_OK);
  assert_int_equal(lo, 3 * rt_layout_shard_len(l, 1));
  assert_int_equal(n, rt_layout_shard_len(l, 1));
  assert_int_equal(part, 1);
  assert_int_equal(parts, 2);
  ckpt_geom_free(g);
  rt_layout_free(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_element_once), cmocka_unit_test(test_refusals)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
