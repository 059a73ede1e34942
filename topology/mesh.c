/* The mesh planner: a pure function from (cluster view, request) to the R x S
 * mesh. No I/O, no globals; errors name the rule broken and the valid values.
 *
 * Ranks are ordered by (domain, node, rank), domains in order of (their first
 * node, their lowest rank), and cut into shard groups of S consecutive ranks.
 * The first-node key keeps a node's domains next to each other, so a shard
 * group of several domains holds each node's ranks contiguously and its
 * partial groups stay on one node whatever the launcher's placement. With the
 * usual block placement that order is the identity, so rank r sits at
 * (r / S, r % S). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"
#include "topology/topology_internal.h"

struct hsr_mesh {
  int world, R, S, K;
  int *pos_rank; /* mesh position rep*S+shard -> world rank */
  int *rank_pos; /* world rank -> mesh position */
};

typedef struct plan_ctx {
  const hsr_cluster *c;
  int *order;     /* world ranks in (domain's first node, domain, node, rank) order */
  int *dom_size;  /* ranks per domain */
  int *dom_node0; /* the lowest node of each domain */
  int *cnt;       /* scratch: a group's members per domain */
} plan_ctx;

static int by_domain_r(const void *a, const void *b, void *arg) {
  const plan_ctx *p = arg;
  const hsr_cluster *c = p->c;
  int x = *(const int *)a, y = *(const int *)b, dx = c->rank_domain[x], dy = c->rank_domain[y];
  if (p->dom_node0[dx] != p->dom_node0[dy]) return p->dom_node0[dx] - p->dom_node0[dy];
  if (dx != dy) return dx - dy; /* domain ids follow their lowest rank */
  if (c->rank_node[x] != c->rank_node[y]) return c->rank_node[x] - c->rank_node[y];
  return x - y;
}

static int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* 0 if shard groups of size S respect the domain rules, else which rule broke
 * (1: S <= domain size but a group leaves its domain, 2: S > domain size but
 * a group is not a union of whole domains); *bad_dom names the domain.
 * Members are counted per domain (p->cnt, zero between groups), so a check
 * is linear in the world. */
static int check_domains(const plan_ctx *p, int S, int *bad_dom) {
  const hsr_cluster *c = p->c;
  int W = c->world, rule = 0;
  for (int g = 0; g < W / S && !rule; g++) {
    const int *grp = p->order + g * S;
    int d0 = c->rank_domain[grp[0]], same = 1;
    for (int i = 0; i < S; i++) {
      p->cnt[c->rank_domain[grp[i]]]++;
      if (c->rank_domain[grp[i]] != d0) same = 0;
    }
    /* Spans domains: every domain it touches must be wholly inside it. */
    for (int i = 0; i < S && !same && !rule; i++) {
      int d = c->rank_domain[grp[i]];
      if (p->cnt[d] != p->dom_size[d]) {
        *bad_dom = d;
        rule = S <= p->dom_size[d] ? 1 : 2;
      }
    }
    for (int i = 0; i < S; i++) p->cnt[c->rank_domain[grp[i]]] = 0;
  }
  return rule;
}

static void list_valid_s(const plan_ctx *p, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int s = 1; s <= p->c->world && used < len; s++) {
    int bad;
    if (p->c->world % s || check_domains(p, s, &bad)) continue;
    used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", s);
  }
}

static void list_divisors(int n, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 1; k <= n && used < len; k++)
    if (n % k == 0) used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? ", " : "", k);
}

/* Default K: the shard group's ranks inside one node. Runs of one node in a
 * group can differ (uneven placement), so take their gcd: every partial group
 * then lies inside one node. */
static int default_partial(const plan_ctx *p, int S) {
  const hsr_cluster *c = p->c;
  int k = 0;
  for (int g = 0; g < c->world / S; g++) {
    const int *grp = p->order + g * S;
    int run = 1;
    for (int i = 1; i <= S; i++) {
      if (i < S && c->rank_node[grp[i]] == c->rank_node[grp[i - 1]]) {
        run++;
        continue;
      }
      k = gcd(k, run);
      run = 1;
    }
  }
  return k ? k : 1;
}

static hsr_status plan(plan_ctx *p, const mesh_request *req, hsr_mesh **out) {
  const hsr_cluster *c = p->c;
  int W = c->world, S = req->shard, R = req->replicate, K = req->partial;
  char valid[512];
  if (S < 0 || R < 0 || K < 0)
    return hsr_error(HSR_ERR_INVALID, "mesh request: shard %d, replicate %d, partial %d must be >= 0 (0 = auto)", S, R,
                     K);
  int dmin = W;
  for (int d = 0; d < c->num_domains; d++)
    if (p->dom_size[d] < dmin) dmin = p->dom_size[d];

  if (S == 0 && R > 0) {
    if (W % R) {
      list_divisors(W, valid, sizeof valid);
      return hsr_error(HSR_ERR_INVALID, "replicate R=%d: rule 'R divides the world' broken (world %d); valid R: %s", R,
                       W, valid);
    }
    S = W / R;
  }
  if (S == 0) S = dmin; /* auto: one shard group per domain */
  if (S > W || W % S) {
    list_valid_s(p, valid, sizeof valid);
    return hsr_error(HSR_ERR_INVALID, "shard S=%d: rule 'S divides the world' broken (world %d); valid S: %s", S, W,
                     valid);
  }
  if (R > 0 && R * S != W) {
    list_valid_s(p, valid, sizeof valid);
    return hsr_error(HSR_ERR_INVALID,
                     "replicate R=%d with shard S=%d: rule 'R x S = world' broken (%d x %d != %d); valid S: %s", R, S,
                     R, S, W, valid);
  }
  int bad = 0, rule = check_domains(p, S, &bad);
  if (rule) {
    list_valid_s(p, valid, sizeof valid);
    if (rule == 1)
      return hsr_error(HSR_ERR_INVALID,
                       "shard S=%d: rule 'a shard group lies inside one NVLink domain when S <= domain size' broken: "
                       "domain %d has %d ranks, not a multiple of %d; valid S: %s",
                       S, bad, p->dom_size[bad], S, valid);
    return hsr_error(HSR_ERR_INVALID,
                     "shard S=%d: rule 'when S > domain size, S is a multiple of it and a shard group is a union of "
                     "whole domains' broken: domain %d (%d ranks) would be split; valid S: %s",
                     S, bad, p->dom_size[bad], valid);
  }
  R = W / S;
  if (K == 0) K = default_partial(p, S);
  if (S % K) {
    list_divisors(S, valid, sizeof valid);
    return hsr_error(HSR_ERR_INVALID, "partial K=%d: rule 'K divides S' broken (S=%d); valid K: %s", K, S, valid);
  }

  hsr_mesh *m = calloc(1, sizeof *m);
  if (!m) return hsr_error(HSR_ERR_NOMEM, "mesh: out of memory");
  m->pos_rank = malloc((size_t)W * sizeof *m->pos_rank);
  m->rank_pos = malloc((size_t)W * sizeof *m->rank_pos);
  if (!m->pos_rank || !m->rank_pos) {
    mesh_free(m);
    return hsr_error(HSR_ERR_NOMEM, "mesh: out of memory");
  }
  m->world = W;
  m->R = R;
  m->S = S;
  m->K = K;
  for (int i = 0; i < W; i++) {
    m->pos_rank[i] = p->order[i];
    m->rank_pos[p->order[i]] = i;
  }
  *out = m;
  return HSR_OK;
}

hsr_status mesh_plan(const hsr_cluster *c, const mesh_request *req, hsr_mesh **out) {
  if (!c || !req || !out) return hsr_error(HSR_ERR_INVALID, "mesh_plan: NULL argument");
  *out = NULL;
  if (c->world < 1) return hsr_error(HSR_ERR_INVALID, "mesh_plan: empty cluster view");
  plan_ctx p = {c, malloc((size_t)c->world * sizeof(int)), calloc((size_t)c->num_domains, sizeof(int)),
                malloc((size_t)c->num_domains * sizeof(int)), calloc((size_t)c->num_domains, sizeof(int))};
  if (!p.order || !p.dom_size || !p.dom_node0 || !p.cnt) {
    free(p.order);
    free(p.dom_size);
    free(p.dom_node0);
    free(p.cnt);
    return hsr_error(HSR_ERR_NOMEM, "mesh: out of memory");
  }
  for (int d = 0; d < c->num_domains; d++) p.dom_node0[d] = INT32_MAX;
  for (int r = 0; r < c->world; r++) {
    int d = c->rank_domain[r];
    p.order[r] = r;
    p.dom_size[d]++;
    if (c->rank_node[r] < p.dom_node0[d]) p.dom_node0[d] = c->rank_node[r];
  }
  qsort_r(p.order, (size_t)c->world, sizeof(int), by_domain_r, &p);
  hsr_status st = plan(&p, req, out);
  free(p.order);
  free(p.dom_size);
  free(p.dom_node0);
  free(p.cnt);
  return st;
}

void mesh_free(hsr_mesh *m) {
  if (!m) return;
  free(m->pos_rank);
  free(m->rank_pos);
  free(m);
}

int mesh_world(const hsr_mesh *m) { return m->world; }
int hsr_mesh_replicate(const hsr_mesh *m) { return m->R; }
int hsr_mesh_shard(const hsr_mesh *m) { return m->S; }
int mesh_partial(const hsr_mesh *m) { return m->K; }

int mesh_rank_at(const hsr_mesh *m, int rep, int shard) {
  if (rep < 0 || rep >= m->R || shard < 0 || shard >= m->S) return -1;
  return m->pos_rank[rep * m->S + shard];
}

static hsr_status check_rank(const hsr_mesh *m, int r) {
  if (r < 0 || r >= m->world) return hsr_error(HSR_ERR_INVALID, "mesh: rank %d out of range (world %d)", r, m->world);
  return HSR_OK;
}

hsr_status hsr_mesh_coords(const hsr_mesh *m, int r, int *rep, int *shard) {
  HSR_CHECK(check_rank(m, r));
  *rep = m->rank_pos[r] / m->S;
  *shard = m->rank_pos[r] % m->S;
  return HSR_OK;
}

hsr_status mesh_shard_group(const hsr_mesh *m, int r, int *ranks) {
  HSR_CHECK(check_rank(m, r));
  int rep = m->rank_pos[r] / m->S;
  for (int s = 0; s < m->S; s++) ranks[s] = m->pos_rank[rep * m->S + s];
  return HSR_OK;
}

hsr_status mesh_replicate_group(const hsr_mesh *m, int r, int *ranks) {
  HSR_CHECK(check_rank(m, r));
  int shard = m->rank_pos[r] % m->S;
  for (int i = 0; i < m->R; i++) ranks[i] = m->pos_rank[i * m->S + shard];
  return HSR_OK;
}

hsr_status mesh_partial_group(const hsr_mesh *m, int r, int *ranks) {
  HSR_CHECK(check_rank(m, r));
  int rep = m->rank_pos[r] / m->S, shard = m->rank_pos[r] % m->S;
  int first = shard / m->K * m->K;
  for (int k = 0; k < m->K; k++) ranks[k] = m->pos_rank[rep * m->S + first + k];
  return HSR_OK;
}

int mesh_partial_index(const hsr_mesh *m, int r) {
  if (r < 0 || r >= m->world) return -1;
  return m->rank_pos[r] % m->S / m->K;
}
