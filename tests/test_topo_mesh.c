/* The mesh planner on explicit placements: valid shapes, groups, and the
 * errors for impossible requests (rule named, valid values listed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "hsr/topology.h"
#include "topology/topology_internal.h"

/* world ranks in blocks of `per_node` per node; domain = node. */
static hsr_cluster *blocks(int world, int per_node) {
  int node[64], dom[64];
  for (int r = 0; r < world; r++) node[r] = dom[r] = r / per_node;
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(world, node, NULL, dom, &c), HSR_OK);
  return c;
}

static hsr_mesh *plan_ok(const hsr_cluster *c, int S, int R, int K) {
  mesh_request req = {S, R, K};
  hsr_mesh *m = NULL;
  hsr_status st = mesh_plan(c, &req, &m);
  if (st != HSR_OK) fail_msg("plan S=%d R=%d K=%d failed: %s", S, R, K, hsr_last_error());
  return m;
}

static void plan_err(const hsr_cluster *c, int S, int R, int K, const char *rule, const char *valid) {
  mesh_request req = {S, R, K};
  hsr_mesh *m = (hsr_mesh *)1;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_ERR_INVALID);
  assert_null(m);
  const char *e = hsr_last_error();
  if (!strstr(e, rule)) fail_msg("error '%s' does not name rule '%s'", e, rule);
  if (valid && !strstr(e, valid)) fail_msg("error '%s' does not list '%s'", e, valid);
}

static void expect_group(const int *got, const int *want, int n) {
  for (int i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
}

static void auto_two_nodes(void **s) {
  (void)s;
  hsr_cluster *c = blocks(8, 4);
  assert_int_equal(cluster_num_nodes(c), 2);
  assert_int_equal(cluster_num_domains(c), 2);
  assert_int_equal(cluster_domain_size(c), 4);
  hsr_mesh *m = plan_ok(c, 0, 0, 0);
  assert_int_equal(hsr_mesh_shard(m), 4);
  assert_int_equal(hsr_mesh_replicate(m), 2);
  assert_int_equal(mesh_partial(m), 4);
  for (int r = 0; r < 8; r++) {
    int rep, sh;
    assert_int_equal(hsr_mesh_coords(m, r, &rep, &sh), HSR_OK);
    assert_int_equal(rep, r / 4);
    assert_int_equal(sh, r % 4);
    assert_int_equal(mesh_rank_at(m, rep, sh), r);
  }
  int g[8];
  assert_int_equal(mesh_shard_group(m, 6, g), HSR_OK);
  expect_group(g, (int[]){4, 5, 6, 7}, 4);
  assert_int_equal(mesh_replicate_group(m, 6, g), HSR_OK);
  expect_group(g, (int[]){2, 6}, 2);
  assert_int_equal(mesh_partial_group(m, 6, g), HSR_OK);
  expect_group(g, (int[]){4, 5, 6, 7}, 4);
  assert_int_equal(mesh_partial_index(m, 6), 0);
  assert_int_equal(mesh_rank_at(m, 2, 0), -1);
  assert_int_equal(hsr_mesh_coords(m, 8, g, g + 1), HSR_ERR_INVALID);
  mesh_free(m);
  cluster_free(c);
}

static void shard_spans_domains(void **s) {
  (void)s;
  hsr_cluster *c = blocks(8, 4);
  hsr_mesh *m = plan_ok(c, 8, 0, 0); /* union of both domains */
  assert_int_equal(hsr_mesh_replicate(m), 1);
  assert_int_equal(mesh_partial(m), 4); /* default K: the group's ranks on one node */
  int g[8];
  assert_int_equal(mesh_partial_group(m, 5, g), HSR_OK);
  expect_group(g, (int[]){4, 5, 6, 7}, 4);
  assert_int_equal(mesh_partial_index(m, 5), 1);
  assert_int_equal(mesh_partial_index(m, 3), 0);
  mesh_free(m);
  m = plan_ok(c, 8, 0, 2);
  assert_int_equal(mesh_partial_group(m, 5, g), HSR_OK);
  expect_group(g, (int[]){4, 5}, 2);
  assert_int_equal(mesh_partial_index(m, 5), 2);
  mesh_free(m);
  m = plan_ok(c, 2, 0, 0); /* inside a domain */
  assert_int_equal(hsr_mesh_replicate(m), 4);
  assert_int_equal(mesh_partial(m), 2);
  assert_int_equal(mesh_replicate_group(m, 3, g), HSR_OK);
  expect_group(g, (int[]){1, 3, 5, 7}, 4);
  mesh_free(m);
  cluster_free(c);
}

static void world6_s3(void **s) {
  (void)s;
  hsr_cluster *c = blocks(6, 3); /* 2 nodes of 3 */
  hsr_mesh *m = plan_ok(c, 3, 0, 0);
  assert_int_equal(hsr_mesh_replicate(m), 2);
  assert_int_equal(mesh_partial(m), 3);
  int g[6];
  assert_int_equal(mesh_shard_group(m, 4, g), HSR_OK);
  expect_group(g, (int[]){3, 4, 5}, 3);
  assert_int_equal(mesh_replicate_group(m, 4, g), HSR_OK);
  expect_group(g, (int[]){1, 4}, 2);
  mesh_free(m);
  m = plan_ok(c, 0, 0, 0); /* auto = domain size */
  assert_int_equal(hsr_mesh_shard(m), 3);
  mesh_free(m);
  m = plan_ok(c, 6, 0, 0);
  assert_int_equal(mesh_partial(m), 3);
  mesh_free(m);
  plan_err(c, 2, 0, 0, "lies inside one NVLink domain", "valid S: 1, 3, 6");
  plan_err(c, 4, 0, 0, "S divides the world", "valid S: 1, 3, 6");
  cluster_free(c);

  c = blocks(6, 6); /* one node */
  m = plan_ok(c, 3, 0, 0);
  assert_int_equal(hsr_mesh_replicate(m), 2);
  mesh_free(m);
  cluster_free(c);

  c = blocks(6, 2); /* 3 domains of 2: S=3 would split one */
  plan_err(c, 3, 0, 0, "multiple of it and a shard group is a union of whole domains", "valid S: 1, 2, 6");
  cluster_free(c);
}

static void bad_requests(void **s) {
  (void)s;
  hsr_cluster *c = blocks(8, 4);
  plan_err(c, 3, 0, 0, "S divides the world", "valid S: 1, 2, 4, 8");
  plan_err(c, 16, 0, 0, "S divides the world", "valid S: 1, 2, 4, 8");
  plan_err(c, 4, 0, 3, "K divides S", "valid K: 1, 2, 4");
  plan_err(c, 0, 3, 0, "R divides the world", "valid R: 1, 2, 4, 8");
  plan_err(c, 2, 2, 0, "R x S = world", NULL);
  plan_err(c, -1, 0, 0, ">= 0", NULL);
  hsr_mesh *m = plan_ok(c, 0, 2, 0); /* S from R */
  assert_int_equal(hsr_mesh_shard(m), 4);
  mesh_free(m);
  cluster_free(c);
}

/* Round-robin placement: rank r on node r % 2. Shard groups still stay in
 * their domain, so the mesh reorders ranks. */
static void round_robin_placement(void **s) {
  (void)s;
  int node[8], dom[8];
  for (int r = 0; r < 8; r++) node[r] = dom[r] = r % 2;
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(8, node, NULL, dom, &c), HSR_OK);
  hsr_mesh *m = plan_ok(c, 4, 0, 0);
  int g[8];
  assert_int_equal(mesh_shard_group(m, 2, g), HSR_OK);
  expect_group(g, (int[]){0, 2, 4, 6}, 4);
  assert_int_equal(mesh_replicate_group(m, 2, g), HSR_OK);
  expect_group(g, (int[]){2, 3}, 2);
  assert_int_equal(mesh_rank_at(m, 1, 0), 1);
  mesh_free(m);
  cluster_free(c);
}

/* One NVLink domain over two nodes (multi-node NVLink): S = 4 spans the
 * nodes inside the domain and K defaults to the ranks on one node. */
static void multinode_domain(void **s) {
  (void)s;
  int node[8] = {0, 0, 1, 1, 2, 2, 3, 3}, dom[8] = {7, 7, 7, 7, 9, 9, 9, 9};
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(8, node, NULL, dom, &c), HSR_OK);
  assert_int_equal(cluster_num_domains(c), 2);
  assert_int_equal(cluster_rank_domain(c, 5), 1);
  hsr_mesh *m = plan_ok(c, 0, 0, 0);
  assert_int_equal(hsr_mesh_shard(m), 4);
  assert_int_equal(mesh_partial(m), 2);
  int g[4];
  assert_int_equal(mesh_partial_group(m, 3, g), HSR_OK);
  expect_group(g, (int[]){2, 3}, 2);
  mesh_free(m);
  cluster_free(c);
}

/* Uneven domains (a 4-GPU and a 2-GPU component): S must fit both. */
static void uneven_domains(void **s) {
  (void)s;
  int node[6] = {0, 0, 0, 0, 0, 0}, dom[6] = {0, 0, 0, 0, 1, 1};
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(6, node, NULL, dom, &c), HSR_OK);
  assert_int_equal(cluster_domain_size(c), 2);
  hsr_mesh *m = plan_ok(c, 0, 0, 0);
  assert_int_equal(hsr_mesh_shard(m), 2);
  mesh_free(m);
  plan_err(c, 3, 0, 0, "lies inside one NVLink domain", "valid S: 1, 2, 6");
  cluster_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(auto_two_nodes), cmocka_unit_test(shard_spans_domains),   cmocka_unit_test(world6_s3),
      cmocka_unit_test(bad_requests),   cmocka_unit_test(round_robin_placement), cmocka_unit_test(multinode_domain),
      cmocka_unit_test(uneven_domains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
