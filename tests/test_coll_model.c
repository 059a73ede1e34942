/* The collectives' algorithm model (common/coll_model.h): every row of every
 * host transport's table names an algorithm with a volume the tuner reads,
 * and the rules give what the selection runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/coll_model.h"
#include "hsr/comm.h"

typedef struct seen {
  int rows, missing;
} seen;

static void each(const char *tp, int op, const char *algo, const coll_model_algo *m, void *arg) {
  seen *s = arg;
  s->rows++;
  if (!m || !m->vol) {
    printf("%s %s (op %d): no model volume (set coll_algo.model, common/coll_model.c)\n", tp, algo, op);
    s->missing++;
    return;
  }
  /* a group of 8 on 2 nodes, 1 MiB: every algorithm but the barrier moves bytes */
  const coll_model_cfg cfg = {.allreduce = COLL_AR_AUTO, .rd_max_bytes = 65536, .split_rail = 1};
  const coll_model_shape g = {8, 2, 4, 2};
  coll_model_vol v;
  memset(&v, 0, sizeof v);
  m->vol(&cfg, op, &g, 1 << 20, 4, &v);
  assert_non_null(v.algo);
  assert_true(v.nstages >= 1);
  if (op != HSR_OP_BARRIER) assert_true(v.sent > 0 && v.recv > 0);
}

static void test_every_algorithm_has_a_volume(void **state) {
  (void)state;
  seen s = {0, 0};
  coll_model_each_algo(each, &s);
  assert_true(s.rows >= 15); /* shm 5, ucx 6, two-level 5 rows */
  assert_int_equal(s.missing, 0);
}

static void test_rules(void **state) {
  (void)state;
  coll_model_cfg cfg = {.allreduce = COLL_AR_AUTO, .rd_max_bytes = 65536, .split_rail = 1};
  assert_true(coll_model_rd(&cfg, 8, 65536));
  assert_false(coll_model_rd(&cfg, 8, 65537));
  assert_false(coll_model_rd(&cfg, 6, 1)); /* not a power of two */
  cfg.allreduce = COLL_AR_RD;
  assert_true(coll_model_rd(&cfg, 4, 1e9));
  cfg.allreduce = COLL_AR_RING;
  assert_false(coll_model_rd(&cfg, 4, 1));
  assert_int_equal(coll_model_transport(1, 8, COLL_TWO_AUTO), COLL_MODEL_SHM);
  assert_int_equal(coll_model_transport(2, 4, COLL_TWO_AUTO), COLL_MODEL_TWO);
  assert_int_equal(coll_model_transport(2, 4, COLL_TWO_OFF), COLL_MODEL_UCX);
  assert_int_equal(coll_model_transport(2, 0, COLL_TWO_AUTO), COLL_MODEL_UCX); /* uneven */
  assert_int_equal(coll_model_transport(4, 1, COLL_TWO_AUTO), COLL_MODEL_UCX);
}

/* The transport's choice is the volume's: a ring all-gather of 4 members on
 * 4 nodes sends 3 blocks, all across; the two-level one adds the node stage. */
static void test_volume_follows_the_transport(void **state) {
  (void)state;
  const coll_model_cfg cfg = {.allreduce = COLL_AR_AUTO, .rd_max_bytes = 65536, .split_rail = 1};
  coll_model_vol v;
  coll_model_volume(&cfg, 0, HSR_OP_ALLGATHER, &(coll_model_shape){4, 4, 1, 4}, 100, 4, &v);
  assert_string_equal(v.algo, "ucx ring");
  assert_true(v.sent == 300 && v.fabric_sent == 300);
  coll_model_volume(&cfg, 0, HSR_OP_ALLGATHER, &(coll_model_shape){8, 2, 4, 2}, 100, 4, &v);
  assert_string_equal(v.algo, "two-level");
  assert_true(v.sent == 3 * 200 + 100 && v.fabric_sent == 100); /* node: 3 x 2 blocks; cross: 1 block */
  coll_model_volume(&cfg, 0, HSR_OP_ALLREDUCE, &(coll_model_shape){1, 1, 1, 1}, 100, 4, &v);
  assert_string_equal(v.algo, "local");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_algorithm_has_a_volume),
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_volume_follows_the_transport),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
