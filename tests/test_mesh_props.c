/* The mesh planner (mesh_plan, pure) enumerated over placements a
 * launcher really produces: domains spanning nodes, non-block placement (a
 * node's ranks not contiguous), unequal nodes, world sizes up to a few
 * thousand. For every S dividing the world (and several K), a plan that
 * succeeds must keep every invariant, checked against the cluster view
 * itself, never against the planner's own order:
 *   - every rank sits at exactly one position, and coords/rank_at agree;
 *   - a shard group lies inside one domain, or is a union of whole domains;
 *   - inside a shard group the ranks of one node in one domain are
 *     contiguous (the node key of the order), so the default K lies between
 *     the gcd of those (node, domain) counts and the gcd of the node counts
 *     (equal to the latter when no node holds two domains), and every
 *     partial group of the default K lies on one node; with no domain
 *     across nodes a node's ranks are contiguous as well, the default K is
 *     exactly the gcd of the node counts, and every K dividing it keeps its
 *     partial groups on one node;
 *   - a replicate group holds one rank of every shard group, at one index;
 * and a request the cluster obviously allows (every domain a multiple of S,
 * or equal domains that S is a multiple of) must succeed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hsr/topology.h"
#include "topology/topology_internal.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* A cluster view: node and domain of every rank. */
typedef struct view {
  int W, *node, *dom, ndom, *dom_size;
  const char *what;
} view;

static void view_free(view *v) {
  free(v->node);
  free(v->dom);
  free(v->dom_size);
}

/* Nodes of the given sizes, `npd` consecutive nodes per domain (0: a domain
 * per `split` ranks inside each node); ranks placed on the nodes in block
 * order, round robin, or a random permutation of the block placement. */
enum { BLOCK = 0, ROUND_ROBIN, SHUFFLED };
static view make_view(const char *what, int nnodes, const int *size, int npd, int split, int placement) {
  view v = {0};
  v.what = what;
  for (int i = 0; i < nnodes; i++) v.W += size[i];
  v.node = malloc(sizeof(int) * (size_t)v.W);
  v.dom = malloc(sizeof(int) * (size_t)v.W);
  int *slot_node = malloc(sizeof(int) * (size_t)v.W), *slot_dom = malloc(sizeof(int) * (size_t)v.W);
  /* slots in node order; each slot's domain */
  int k = 0, nd = 0;
  for (int n = 0; n < nnodes; n++)
    for (int j = 0; j < size[n]; j++, k++) {
      slot_node[k] = n;
      slot_dom[k] = npd > 0 ? n / npd : n * 1000 + j / split;
    }
  int *order = malloc(sizeof(int) * (size_t)v.W); /* rank -> slot */
  if (placement == ROUND_ROBIN) {                 /* rank r to the next node that still has a free slot */
    int *used = calloc((size_t)nnodes, sizeof(int)), *first = malloc(sizeof(int) * (size_t)nnodes), r = 0;
    for (int n = 0, acc = 0; n < nnodes; acc += size[n], n++) first[n] = acc;
    while (r < v.W)
      for (int n = 0; n < nnodes && r < v.W; n++)
        if (used[n] < size[n]) order[r++] = first[n] + used[n]++;
    free(used);
    free(first);
  } else {
    for (int r = 0; r < v.W; r++) order[r] = r;
    if (placement == SHUFFLED)
      for (int r = v.W - 1; r > 0; r--) {
        int j = (int)rnd((unsigned)r + 1), t = order[r];
        order[r] = order[j];
        order[j] = t;
      }
  }
  /* domain ids renumbered densely, in order of first appearance */
  int *ids = malloc(sizeof(int) * (size_t)v.W);
  for (int r = 0; r < v.W; r++) {
    v.node[r] = slot_node[order[r]];
    int d = slot_dom[order[r]], i;
    for (i = 0; i < nd && ids[i] != d; i++) {}
    if (i == nd) ids[nd++] = d;
    v.dom[r] = i;
  }
  v.ndom = nd;
  v.dom_size = calloc((size_t)nd, sizeof(int));
  for (int r = 0; r < v.W; r++) v.dom_size[v.dom[r]]++;
  free(ids);
  free(order);
  free(slot_node);
  free(slot_dom);
  return v;
}

static int obviously_fits(const view *v, int S) {
  int all_mult = 1, equal = 1;
  for (int d = 0; d < v->ndom; d++) {
    all_mult &= v->dom_size[d] % S == 0;
    equal &= v->dom_size[d] == v->dom_size[0];
  }
  return all_mult || (equal && S % v->dom_size[0] == 0);
}

/* The gcd of the counts of a node's ranks in a group (by_dom: of a node's
 * ranks in one domain). */
static int count_gcd(const view *v, const int *grp, int S, int *cnt, int by_dom) {
  int g = 0;
#define KEY(r) (by_dom ? v->node[r] * v->ndom + v->dom[r] : v->node[r])
  for (int i = 0; i < S; i++) cnt[KEY(grp[i])] = 0;
  for (int i = 0; i < S; i++) cnt[KEY(grp[i])]++;
  for (int i = 0; i < S; i++) g = gcd(g, cnt[KEY(grp[i])]);
#undef KEY
  return g;
}

/* Does some node hold ranks of two domains? */
static int shared_nodes(const view *v) {
  int *d = malloc(sizeof(int) * (size_t)v->W), shared = 0;
  for (int r = 0; r < v->W; r++) d[r] = -1;
  for (int r = 0; r < v->W; r++) {
    if (d[v->node[r]] >= 0 && d[v->node[r]] != v->dom[r]) shared = 1;
    d[v->node[r]] = v->dom[r];
  }
  free(d);
  return shared;
}

/* 1 when some domain holds ranks of several nodes (multi-node NVLink). */
static int spanning_domains(const view *v) {
  int *n0 = malloc(sizeof(int) * (size_t)v->ndom), span = 0;
  for (int d = 0; d < v->ndom; d++) n0[d] = -1;
  for (int r = 0; r < v->W; r++) {
    int d = v->dom[r];
    if (n0[d] >= 0 && n0[d] != v->node[r]) span = 1;
    n0[d] = v->node[r];
  }
  free(n0);
  return span;
}

/* Every invariant of one plan; returns the gcd of the node counts in the shard groups. */
static int check_plan(const view *v, const hsr_mesh *m, int S, int K) {
  int W = v->W, R = W / S;
  assert_int_equal(mesh_world(m), W);
  assert_int_equal(hsr_mesh_shard(m), S);
  assert_int_equal(hsr_mesh_replicate(m), R);
  int *seen = calloc((size_t)W, sizeof(int)), *grp = malloc(sizeof(int) * (size_t)W);
  int *cnt = calloc((size_t)W * (size_t)v->ndom, sizeof(int)), *dseen = calloc((size_t)v->ndom, sizeof(int));
  int g = 0, gnd = 0;
  int Km = mesh_partial(m);
  for (int rep = 0; rep < R; rep++) {
    for (int s = 0; s < S; s++) {
      int r = mesh_rank_at(m, rep, s), a, b;
      if (r < 0 || r >= W) fail_msg("%s S=%d: position (%d, %d) holds rank %d", v->what, S, rep, s, r);
      if (seen[r]++) fail_msg("%s S=%d: rank %d sits at two positions", v->what, S, r);
      assert_int_equal(hsr_mesh_coords(m, r, &a, &b), HSR_OK);
      if (a != rep || b != s) fail_msg("%s S=%d: rank %d at (%d, %d) says (%d, %d)", v->what, S, r, rep, s, a, b);
      grp[s] = r;
    }
    /* inside one domain, or a union of whole domains */
    int nd = 0;
    for (int s = 0; s < S; s++)
      if (dseen[v->dom[grp[s]]]++ == 0) nd++;
    for (int s = 0; s < S; s++) {
      int d = v->dom[grp[s]];
      if (nd > 1 && dseen[d] != v->dom_size[d])
        fail_msg("%s S=%d: shard group %d takes %d of the %d ranks of domain %d", v->what, S, rep, dseen[d],
                 v->dom_size[d], d);
    }
    for (int s = 0; s < S; s++) dseen[v->dom[grp[s]]] = 0;
      /* a node's ranks of one domain are contiguous in the group */
#define SAME(a, b) (v->node[a] == v->node[b] && v->dom[a] == v->dom[b])
    for (int s = 1; s < S; s++)
      for (int t = 0; t < s - 1; t++)
        if (SAME(grp[t], grp[s]) && !SAME(grp[s - 1], grp[s]))
          fail_msg("%s S=%d: in shard group %d the ranks of node %d in domain %d are not contiguous (shard %d, %d)",
                   v->what, S, rep, v->node[grp[s]], v->dom[grp[s]], t, s);
#undef SAME
    /* with no domain across nodes, a node's ranks are contiguous too (however the
     * launcher placed them and however many domains the node holds) */
    if (!spanning_domains(v))
      for (int s = 1; s < S; s++)
        for (int t = 0; t < s - 1; t++)
          if (v->node[grp[t]] == v->node[grp[s]] && v->node[grp[s - 1]] != v->node[grp[s]])
            fail_msg("%s S=%d: in shard group %d the ranks of node %d are not contiguous (shard %d, %d)", v->what, S,
                     rep, v->node[grp[s]], t, s);
    g = gcd(g, count_gcd(v, grp, S, cnt, 0));
    gnd = gcd(gnd, count_gcd(v, grp, S, cnt, 1));
    /* partial groups: on one node whenever K divides every node's count */
    int part[4096];
    for (int s = 0; s < S; s += Km) {
      assert_int_equal(mesh_partial_group(m, grp[s], part), HSR_OK);
      for (int k = 0; k < Km; k++) {
        if (part[k] != grp[s + k]) fail_msg("%s S=%d K=%d: partial group member %d", v->what, S, Km, k);
        if (mesh_partial_index(m, part[k]) != s / Km) fail_msg("%s: partial index of %d", v->what, part[k]);
      }
    }
  }
  for (int r = 0; r < W; r++)
    if (seen[r] != 1) fail_msg("%s S=%d: rank %d sits at %d positions", v->what, S, r, seen[r]);
  if (K == 0 && (Km % gnd || g % Km || ((!shared_nodes(v) || !spanning_domains(v)) && Km != g)))
    fail_msg("%s S=%d: default K = %d; the shard groups' node counts give %d, their (node, domain) counts %d", v->what,
             S, Km, g, gnd);
  /* every partial group on one node: the default K, or one dividing every (node, domain) count (the node
   * counts are not enough: a node holding two domains can be split by another node's domain between them) */
  if (K == 0 || gnd % Km == 0 || (!spanning_domains(v) && g % Km == 0))
    for (int rep = 0; rep < R; rep++)
      for (int s = 0; s < S; s++) {
        int r = mesh_rank_at(m, rep, s), f = mesh_rank_at(m, rep, s / Km * Km);
        if (v->node[r] != v->node[f])
          fail_msg("%s S=%d K=%d: partial group of rank %d spans nodes %d and %d", v->what, S, Km, r, v->node[f],
                   v->node[r]);
      }
  /* replicate groups: one rank per shard group, all at one shard index */
  int *rg = malloc(sizeof(int) * (size_t)R), *reps = calloc((size_t)R, sizeof(int));
  for (int r = 0; r < W; r += 1 + W / 64) {
    int a, b, in = 0;
    assert_int_equal(hsr_mesh_coords(m, r, &a, &b), HSR_OK);
    assert_int_equal(mesh_replicate_group(m, r, rg), HSR_OK);
    memset(reps, 0, sizeof(int) * (size_t)R);
    for (int i = 0; i < R; i++) {
      int x, y;
      assert_int_equal(hsr_mesh_coords(m, rg[i], &x, &y), HSR_OK);
      if (y != b || reps[x]++)
        fail_msg("%s S=%d: replicate group of rank %d holds %d at (%d, %d)", v->what, S, r, rg[i], x, y);
      in |= rg[i] == r;
    }
    if (!in) fail_msg("%s S=%d: replicate group of rank %d lacks it", v->what, S, r);
  }
  free(rg);
  free(reps);
  free(seen);
  free(grp);
  free(cnt);
  free(dseen);
  return g;
}

/* Every S dividing the world, with K auto and each K among the first few
 * divisors of S; returns the number of plans checked. */
static int enumerate(const view *v, int max_k_tries) {
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(v->W, v->node, NULL, v->dom, &c), HSR_OK);
  int plans = 0;
  for (int S = 1; S <= v->W; S++) {
    if (v->W % S) continue;
    int tries = 0;
    for (int K = 0; K <= S && tries <= max_k_tries; K++) {
      if (K > 0 && S % K) continue;
      tries++;
      mesh_request req = {S, 0, K};
      hsr_mesh *m = NULL;
      hsr_status st = mesh_plan(c, &req, &m);
      if (st != HSR_OK) {
        if (K == 0 && obviously_fits(v, S))
          fail_msg("%s: S=%d fits every domain, yet: %s", v->what, S, hsr_last_error());
        if (!strstr(hsr_last_error(), "rule"))
          fail_msg("%s S=%d: error names no rule: %s", v->what, S, hsr_last_error());
        assert_null(m);
        break; /* S is not valid: no K makes it so */
      }
      check_plan(v, m, S, K);
      mesh_free(m);
      plans++;
    }
  }
  cluster_free(c);
  return plans;
}

/* The hand-checked case of the node key: one domain over two nodes whose
 * ranks the launcher placed round robin (node = rank % 2). */
static void spanning_domain_round_robin(void **state) {
  (void)state;
  int node[8], dom[8];
  for (int r = 0; r < 8; r++) node[r] = r % 2, dom[r] = 0;
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(8, node, NULL, dom, &c), HSR_OK);
  mesh_request req = {8, 0, 0};
  hsr_mesh *m = NULL;
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(mesh_partial(m), 4); /* the 4 ranks of one node */
  int g[8], want0[4] = {0, 2, 4, 6}, want1[4] = {1, 3, 5, 7};
  assert_int_equal(mesh_partial_group(m, 4, g), HSR_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(g[i], want0[i]);
  assert_int_equal(mesh_partial_group(m, 3, g), HSR_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(g[i], want1[i]);
  mesh_free(m);
  req.shard = 4; /* two shard groups of the one domain: one per node */
  assert_int_equal(mesh_plan(c, &req, &m), HSR_OK);
  assert_int_equal(mesh_shard_group(m, 6, g), HSR_OK);
  for (int i = 0; i < 4; i++) assert_int_equal(g[i], want0[i]);
  assert_int_equal(mesh_partial(m), 4);
  mesh_free(m);
  cluster_free(c);
}

static void small_placements(void **state) {
  (void)state;
  int plans = 0;
  int eq4[4] = {4, 4, 4, 4}, uneq[4] = {6, 2, 4, 4}, odd[5] = {3, 3, 3, 3, 3}, mix[6] = {8, 8, 4, 4, 4, 4};
  for (int p = BLOCK; p <= SHUFFLED; p++) {
    const char *pn[] = {"block", "round-robin", "shuffled"};
    char what[128];
    view v;
#define RUN(desc, nn, sz, npd, split)                             \
  do {                                                            \
    snprintf(what, sizeof what, "%s, %s placement", desc, pn[p]); \
    v = make_view(what, nn, sz, npd, split, p);                   \
    plans += enumerate(&v, 4);                                    \
    view_free(&v);                                                \
  } while (0)
    RUN("4 nodes of 4, domain = node", 4, eq4, 1, 0);
    RUN("4 nodes of 4, domains of 2 nodes", 4, eq4, 2, 0);
    RUN("4 nodes of 4, one domain over all", 4, eq4, 4, 0);
    RUN("4 nodes of 4, two domains per node", 4, eq4, 0, 2);
    RUN("unequal nodes 6+2+4+4, domain = node", 4, uneq, 1, 0);
    RUN("unequal nodes 6+2+4+4, domains of 2 nodes", 4, uneq, 2, 0);
    RUN("5 nodes of 3", 5, odd, 1, 0);
    RUN("nodes 8+8+4+4+4+4, domains of 2 nodes", 6, mix, 2, 0);
#undef RUN
  }
  assert_true(plans > 200);
}

static void random_placements(void **state) {
  (void)state;
  int plans = 0;
  for (int iter = 0; iter < 60; iter++) {
    int nn = 1 + (int)rnd(8), sz[8], per = 1 + (int)rnd(6);
    for (int i = 0; i < nn; i++) sz[i] = rnd(3) ? per : 1 + (int)rnd(8); /* mostly equal, some not */
    int npd = (int)rnd(3);                                               /* 0: split nodes, else nodes per domain */
    int split = 1 + (int)rnd(3);
    char what[96];
    snprintf(what, sizeof what, "random case %d (%d nodes, npd %d, split %d)", iter, nn, npd, split);
    view v = make_view(what, nn, sz, npd, split, (int)rnd(3));
    plans += enumerate(&v, 3);
    view_free(&v);
  }
  assert_true(plans > 100);
}

/* A few thousand ranks: 256 nodes of 8 (domain = node), and an NVL72-like
 * cluster of 28 domains of 18 nodes x 4 GPUs placed round robin. */
static void large_worlds(void **state) {
  (void)state;
  static int eight[256], four[504];
  for (int i = 0; i < 256; i++) eight[i] = 8;
  for (int i = 0; i < 504; i++) four[i] = 4;
  view v = make_view("2048 ranks, 256 nodes of 8", 256, eight, 1, 0, BLOCK);
  int plans = enumerate(&v, 2);
  view_free(&v);
  v = make_view("2048 ranks, 256 nodes of 8, round robin", 256, eight, 1, 0, ROUND_ROBIN);
  plans += enumerate(&v, 1);
  view_free(&v);
  v = make_view("2016 ranks, NVL72-like domains, round robin", 504, four, 18, 0, ROUND_ROBIN);
  assert_int_equal(v.W, 2016);
  assert_int_equal(v.ndom, 28);
  hsr_cluster *c = NULL;
  assert_int_equal(cluster_create(v.W, v.node, NULL, v.dom, &c), HSR_OK);
  int Ss[] = {72, 144, 36, 4, 2016};
  for (size_t i = 0; i < sizeof Ss / sizeof Ss[0]; i++) {
    mesh_request req = {Ss[i], 0, 0};
    hsr_mesh *m = NULL;
    if (mesh_plan(c, &req, &m) != HSR_OK) fail_msg("%s S=%d: %s", v.what, Ss[i], hsr_last_error());
    int g = check_plan(&v, m, Ss[i], 0);
    if (Ss[i] >= 72) assert_int_equal(g, 4); /* the 4 GPUs of a node */
    mesh_free(m);
    plans++;
  }
  cluster_free(c);
  view_free(&v);
  assert_true(plans > 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(spanning_domain_round_robin), cmocka_unit_test(small_placements),
                                     cmocka_unit_test(random_placements), cmocka_unit_test(large_worlds)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
