/* The quorum's rules (ft/quorum.c): what every replica group computes from
 * the same frozen votes, by hand, and the records' JSON round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/quorum.h"

static ft_quorum q3(void) { /* members 0, 1, 2 after 9 steps, epoch 4 */
  ft_quorum q = {0};
  q.epoch = 4, q.done = 9, q.nmem = 3;
  q.mem[0] = 0, q.mem[1] = 1, q.mem[2] = 2;
  return q;
}

static ft_vote ok_vote(int id) {
  ft_vote v = {0};
  v.id = id, v.ok = 1, v.healed = 1, v.hs = -1;
  return v;
}

static ft_vote fail_vote(int id, int culprit) {
  ft_vote v = ok_vote(id);
  v.ok = 0, v.ncul = 1, v.cul[0] = culprit;
  return v;
}

static void decide(void **state) {
  (void)state;
  ft_quorum q = q3();
  ft_vote v[3] = {ok_vote(0), ok_vote(2), ok_vote(1)};
  assert_int_equal(ft_quorum_decide(&q, v, 2, 0), FT_PENDING); /* 1 has not voted */
  assert_int_equal(ft_quorum_decide(&q, v, 3, 0), FT_COMMIT);
  assert_int_equal(ft_quorum_decide(&q, v, 3, 1), FT_ABORT); /* the marker wins: it froze the votes first */
  v[1] = fail_vote(2, 1);
  assert_int_equal(ft_quorum_decide(&q, v, 2, 0), FT_ABORT);
  /* a vote from a group that is not a participant does not count */
  ft_vote w[3] = {ok_vote(0), ok_vote(1), ok_vote(7)};
  assert_int_equal(ft_quorum_decide(&q, w, 3, 0), FT_PENDING);
}

static void commit_admits(void **state) {
  (void)state;
  ft_quorum q = q3(), n;
  ft_vote v[3] = {ok_vote(0), ok_vote(1), ok_vote(2)};
  char why[256];
  ft_quorum_next(&q, v, 3, 1, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.epoch, 4); /* nothing changed: the same epoch, one more step */
  assert_int_equal(n.done, 10);
  assert_int_equal(n.nmem, 3);
  assert_int_equal(n.njoin, 0);
  assert_string_equal(why, "");
  /* two groups saw 5 and 3 waiting: both admitted, healed by members in turn */
  v[0].nseen = 1, v[0].seen[0] = 5;
  v[2].nseen = 2, v[2].seen[0] = 3, v[2].seen[1] = 5;
  ft_quorum_next(&q, v, 3, 1, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.epoch, 5);
  assert_int_equal(n.njoin, 2);
  assert_int_equal(n.join[0], 3);
  assert_int_equal(n.healer[0], 0);
  assert_int_equal(n.join[1], 5);
  assert_int_equal(n.healer[1], 1);
  assert_non_null(strstr(why, "replica(s) 3,5 admitted"));
  assert_int_equal(ft_quorum_healer_of(&n, 5), 1);
  assert_int_equal(ft_quorum_index(&n, 5), 4); /* participants 0,1,2,3,5 */
  /* the next commit makes them members */
  ft_vote w[5] = {ok_vote(0), ok_vote(1), ok_vote(2), ok_vote(3), ok_vote(5)};
  ft_quorum m;
  ft_quorum_next(&n, w, 5, 1, NULL, 0, &m, why, sizeof why);
  assert_int_equal(m.nmem, 5);
  assert_int_equal(m.njoin, 0);
  assert_int_equal(m.epoch, 6);
  assert_int_equal(m.done, 11);
  assert_non_null(strstr(why, "3,5 healed and joined"));
}

static void abort_drops(void **state) {
  (void)state;
  ft_quorum q = q3(), n;
  char why[256];
  /* 1 died: 0 and 2 could not hear from it, it never voted */
  ft_vote v[2] = {fail_vote(0, 1), fail_vote(2, 1)};
  ft_quorum_next(&q, v, 2, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.epoch, 5);
  assert_int_equal(n.done, 9); /* the same step again */
  assert_int_equal(n.nmem, 2);
  assert_int_equal(n.mem[0], 0);
  assert_int_equal(n.mem[1], 2);
  assert_string_equal(why, "replica(s) 1 dropped; replicas now 0,2");
  /* frozen early by 0's failed vote: 2 had not voted and nobody named it: it was slower, it stays */
  ft_quorum_next(&q, v, 1, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 2);
  assert_int_equal(n.mem[1], 2);
  /* a missing vote whose group the marker says is gone goes */
  int gone[1] = {2};
  ft_quorum_next(&q, v, 1, 0, gone, 1, &n, why, sizeof why);
  assert_int_equal(n.nmem, 1);
  assert_int_equal(n.mem[0], 0);
  /* a voter named by half of the voters or fewer stays (two that blame each other) */
  ft_vote w[3] = {fail_vote(0, 1), fail_vote(1, 0), ok_vote(2)};
  ft_quorum_next(&q, w, 3, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 3);
  /* ... named by more than half, it goes */
  ft_vote x[3] = {fail_vote(0, 1), ok_vote(1), fail_vote(2, 1)};
  ft_quorum_next(&q, x, 3, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 2);
  assert_int_equal(ft_quorum_index(&n, 1), -1);
}

static void abort_joiners(void **state) {
  (void)state;
  ft_quorum q = q3(), n;
  q.njoin = 1, q.join[0] = 3, q.healer[0] = 0;
  char why[256];
  /* the healer 0 died while healing 3: 3 did not heal, stays a joiner, now healed by 1 */
  ft_vote v[3] = {fail_vote(1, 0), fail_vote(2, 0), fail_vote(3, 0)};
  v[2].healed = 0;
  ft_quorum_next(&q, v, 3, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 2);
  assert_int_equal(n.mem[0], 1);
  assert_int_equal(n.njoin, 1);
  assert_int_equal(n.join[0], 3);
  assert_int_equal(n.healer[0], 1);
  /* it healed, but the step failed for another reason: it is a member now */
  v[2].healed = 1;
  ft_quorum_next(&q, v, 3, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 3);
  assert_int_equal(n.njoin, 0);
  /* the joiner died while healing: dropped, not re-admitted on the same votes' hearsay */
  ft_vote w[3] = {fail_vote(0, 3), fail_vote(1, 3), fail_vote(2, 3)};
  w[0].nseen = 1, w[0].seen[0] = 3;
  ft_quorum_next(&q, w, 3, 0, NULL, 0, &n, why, sizeof why);
  assert_int_equal(n.nmem, 3);
  assert_int_equal(n.njoin, 0);
}

/* every member heals every joiner: its assigned healer first, then the
 * other members cyclically; units in turn over them */
static void healers(void **state) {
  (void)state;
  ft_quorum q = q3(), n;
  ft_vote v[3] = {ok_vote(0), ok_vote(1), ok_vote(2)};
  v[1].nseen = 2, v[1].seen[0] = 4, v[1].seen[1] = 7;
  ft_quorum_next(&q, v, 3, 1, NULL, 0, &n, NULL, 0);
  int h[FT_MAX_REPLICAS];
  assert_int_equal(ft_quorum_healers(&n, 4, h), 3);
  assert_int_equal(h[0], 0);
  assert_int_equal(h[1], 1);
  assert_int_equal(h[2], 2);
  assert_int_equal(ft_quorum_healers(&n, 7, h), 3); /* 7's assigned healer is 1: it sends the header */
  assert_int_equal(h[0], 1);
  assert_int_equal(h[1], 2);
  assert_int_equal(h[2], 0);
  assert_int_equal(ft_quorum_healers(&n, 1, h), 0); /* a member heals nobody from anyone */
  assert_int_equal(ft_quorum_healers(&n, 9, h), 0); /* not in the quorum */
  /* an abort that drops 0 while 4 heals: 4 heals again from 1 and 2 alone */
  ft_vote w[4] = {ok_vote(1), ok_vote(2), fail_vote(4, 0), fail_vote(7, 0)};
  w[2].healed = 0, w[3].healed = 0;
  int gone[1] = {0};
  ft_quorum m;
  ft_quorum_next(&n, w, 4, 0, gone, 1, &m, NULL, 0);
  assert_int_equal(m.nmem, 2);
  assert_int_equal(ft_quorum_healers(&m, 4, h), 2);
  assert_int_equal(h[0], 1);
  assert_int_equal(h[1], 2);
  assert_int_equal(ft_quorum_healers(&m, 7, h), 2);
  assert_int_equal(h[0], 2);
  assert_int_equal(h[1], 1);
  /* slices: units in turn, sizes differ by at most one unit */
  int cnt[3] = {0};
  for (int u = 0; u < 10; u++) cnt[ft_heal_slice_owner(u, 3)]++;
  assert_int_equal(cnt[0], 4);
  assert_int_equal(cnt[1], 3);
  assert_int_equal(cnt[2], 3);
  assert_int_equal(ft_heal_slice_owner(5, 1), 0);
  assert_int_equal(ft_heal_slice_owner(5, 2), 1);
}

static void hashes(void **state) {
  (void)state;
  ft_vote v[3] = {ok_vote(0), ok_vote(1), ok_vote(2)};
  int a, b;
  v[0].hs = 10, v[0].h = 0xabc;
  v[1].hs = 10, v[1].h = 0xabc;
  v[2].hs = 9, v[2].h = 0x123; /* another step's: not compared */
  assert_int_equal(ft_quorum_hash_mismatch(v, 3, &a, &b), 0);
  v[1].h = 0xabd;
  assert_int_equal(ft_quorum_hash_mismatch(v, 3, &a, &b), 1);
  assert_int_equal(a, 0);
  assert_int_equal(b, 1);
}

static void json(void **state) {
  (void)state;
  ft_quorum q = q3(), r;
  q.njoin = 1, q.join[0] = 7, q.healer[0] = 2;
  char *s = NULL;
  assert_int_equal(ft_quorum_json(&q, &s), HSR_OK);
  assert_int_equal(ft_quorum_parse(s, &r), HSR_OK);
  assert_int_equal(r.epoch, 4);
  assert_int_equal(r.done, 9);
  assert_int_equal(r.nmem, 3);
  assert_int_equal(r.join[0], 7);
  assert_int_equal(r.healer[0], 2);
  free(s);
  ft_vote v = fail_vote(3, 1), w;
  v.hs = 12, v.h = 0xfedcba9876543210ull, v.nseen = 1, v.seen[0] = 9;
  snprintf(v.why, sizeof v.why, "rank 1: \"quoted\" reason");
  assert_int_equal(ft_vote_json(&v, &s), HSR_OK);
  assert_int_equal(ft_vote_parse(s, &w), HSR_OK);
  assert_int_equal(w.id, 3);
  assert_int_equal(w.ok, 0);
  assert_int_equal(w.cul[0], 1);
  assert_int_equal(w.seen[0], 9);
  assert_true(w.h == v.h);
  assert_string_equal(w.why, v.why);
  free(s);
  assert_int_equal(ft_quorum_parse("{\"epoch\":1}", &r), HSR_ERR_IO);
  assert_int_equal(ft_vote_parse("not json", &w), HSR_ERR_IO);
  assert_int_equal(ft_quorum_parse("{\"epoch\":1,\"done\":0,\"members\":[5000],\"joiners\":[],\"healers\":[]}", &r),
                   HSR_ERR_IO);
}

/* The decision written once into the step's r/ key: what every group would
 * compute from the frozen votes, and its JSON round trip. */
static void decision(void **state) {
  (void)state;
  ft_quorum q = q3(), n;
  ft_decision *d = calloc(2, sizeof *d);
  assert_non_null(d);
  /* an abort: 2 named by 0 and gone; the reason is the first failed vote's */
  ft_vote v[2] = {fail_vote(0, 2), ok_vote(1)};
  snprintf(v[0].why, sizeof v[0].why, "rank 0: cannot send to replica 2");
  int gone[1] = {2};
  ft_decision_make(&q, v, 2, 0, gone, 1, &d[0]);
  ft_quorum_next(&q, v, 2, 0, gone, 1, &n, NULL, 0);
  assert_int_equal(d[0].commit, 0);
  assert_int_equal(d[0].mismatch, 0);
  assert_int_equal(d[0].next.epoch, n.epoch);
  assert_int_equal(d[0].next.nmem, 2);
  assert_string_equal(d[0].reason, "rank 0: cannot send to replica 2");
  assert_non_null(strstr(d[0].why, "replica(s) 2 dropped"));
  d[0].nrev = 1, d[0].rev_id[0] = 7, d[0].rev[0] = 123456789012ll;
  d[0].base = 4242, d[0].count = 1000;
  char *s = NULL;
  assert_int_equal(ft_decision_json(&d[0], &s), HSR_OK);
  assert_int_equal(ft_decision_parse(s, &d[1]), HSR_OK);
  free(s);
  assert_int_equal(d[1].commit, 0);
  assert_int_equal(d[1].next.epoch, d[0].next.epoch);
  assert_int_equal(d[1].next.done, 9);
  assert_int_equal(d[1].next.nmem, 2);
  assert_int_equal(d[1].next.mem[1], d[0].next.mem[1]);
  assert_int_equal(d[1].nrev, 1);
  assert_int_equal(d[1].rev_id[0], 7);
  assert_true(d[1].rev[0] == 123456789012ll);
  assert_true(d[1].base == 4242 && d[1].count == 1000);
  assert_string_equal(d[1].why, d[0].why);
  assert_string_equal(d[1].reason, d[0].reason);
  /* a commit that admits a joiner: the next quorum and its healer travel */
  ft_vote c[3] = {ok_vote(0), ok_vote(1), ok_vote(2)};
  c[1].nseen = 1, c[1].seen[0] = 5;
  ft_decision_make(&q, c, 3, 1, NULL, 0, &d[0]);
  assert_int_equal(d[0].commit, 1);
  assert_int_equal(d[0].reason[0], 0);
  assert_int_equal(ft_decision_json(&d[0], &s), HSR_OK);
  assert_int_equal(ft_decision_parse(s, &d[1]), HSR_OK);
  free(s);
  assert_int_equal(d[1].commit, 1);
  assert_int_equal(d[1].next.done, 10);
  assert_int_equal(d[1].next.epoch, 5);
  assert_int_equal(d[1].next.njoin, 1);
  assert_int_equal(d[1].next.join[0], 5);
  assert_int_equal(d[1].next.healer[0], d[0].next.healer[0]);
  /* hashes that differ: every group stops, naming both */
  c[2].hs = 8, c[2].h = 0x1111, c[0].hs = 8, c[0].h = 0x2222;
  ft_decision_make(&q, c, 3, 1, NULL, 0, &d[0]);
  assert_int_equal(d[0].mismatch, 1);
  assert_int_equal(d[0].commit, 0);
  assert_int_equal(ft_decision_json(&d[0], &s), HSR_OK);
  assert_int_equal(ft_decision_parse(s, &d[1]), HSR_OK);
  free(s);
  assert_int_equal(d[1].mismatch, 1);
  assert_true(d[1].mm_step == 8);
  assert_int_equal(d[1].mm_a, 0);
  assert_int_equal(d[1].mm_b, 2);
  assert_true(d[1].mm_ha == 0x2222 && d[1].mm_hb == 0x1111);
  /* a participant voted on the next step: committed, the quorum unchanged */
  ft_decision_ahead(&q, &d[0]);
  assert_int_equal(d[0].commit, 1);
  assert_int_equal(d[0].next.epoch, 4);
  assert_int_equal(d[0].next.done, 10);
  assert_int_equal(d[0].next.nmem, 3);
  assert_int_equal(ft_decision_parse("{\"commit\":1}", &d[1]), HSR_ERR_IO);
  assert_int_equal(ft_decision_parse("{\"commit\":1,\"next\":{\"epoch\":1,\"done\":0,\"members\":[],\"joiners\":[],"
                                     "\"healers\":[]},\"revs\":[[5000,1]],\"base\":0,\"count\":0,\"why\":\"\","
                                     "\"reason\":\"\"}",
                                     &d[1]),
                   HSR_ERR_IO);
  free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(decide),      cmocka_unit_test(commit_admits),
                                     cmocka_unit_test(abort_drops), cmocka_unit_test(abort_joiners), cmocka_unit_test(healers),
                                     cmocka_unit_test(hashes),      cmocka_unit_test(json), cmocka_unit_test(decision)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
