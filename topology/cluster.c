/* The cluster view: every rank's placement (node, GPU, NVLink domain), from
 * an allgather of topology records, from one description replicated over N
 * nodes (offline), or from explicit placement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"
#include "common/common_internal.h"
#include "launch/boot_internal.h"
#include "topology/topology_internal.h"

static hsr_status cluster_alloc(int world, int num_nodes, int with_records, hsr_cluster **out) {
  hsr_cluster *c = calloc(1, sizeof *c);
  if (!c) return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  c->world = world;
  c->num_nodes = num_nodes;
  c->rank_node = calloc((size_t)world, sizeof(int));
  c->rank_gpu = calloc((size_t)world, sizeof(int));
  c->rank_domain = calloc((size_t)world, sizeof(int));
  if (with_records) c->nodes = calloc((size_t)num_nodes, sizeof *c->nodes);
  if (!c->rank_node || !c->rank_gpu || !c->rank_domain || (with_records && !c->nodes)) {
    cluster_free(c);
    return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  }
  *out = c;
  return HSR_OK;
}

void cluster_free(hsr_cluster *c) {
  if (!c) return;
  free(c->nodes);
  free(c->rank_node);
  free(c->rank_gpu);
  free(c->rank_domain);
  free(c);
}

/* Dense domain ids in order of lowest rank, from one string key per rank:
 * ranks sorted by (key, rank), each run of equal keys one domain (a sort, so
 * views of 16,384 ranks take milliseconds, not the seconds of a pairwise scan). */
static int by_key(const void *a, const void *b, void *arg) {
  char(*key)[128] = arg;
  int x = *(const int *)a, y = *(const int *)b, c = strcmp(key[x], key[y]);
  return c ? c : x - y;
}

static hsr_status number_domains(hsr_cluster *c, char (*key)[128]) {
  int *idx = malloc(sizeof(int) * (size_t)c->world), *first = malloc(sizeof(int) * (size_t)c->world);
  if (!idx || !first) {
    free(idx);
    free(first);
    return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  }
  for (int r = 0; r < c->world; r++) idx[r] = r;
  qsort_r(idx, (size_t)c->world, sizeof *idx, by_key, key);
  for (int i = 0; i < c->world; i++) /* the lowest rank of each run: its first entry */
    first[idx[i]] = i > 0 && !strcmp(key[idx[i]], key[idx[i - 1]]) ? first[idx[i - 1]] : idx[i];
  c->num_domains = 0;
  for (int r = 0; r < c->world; r++) c->rank_domain[r] = first[r] == r ? c->num_domains++ : c->rank_domain[first[r]];
  free(idx);
  free(first);
  return HSR_OK;
}

/* Fills rank_gpu and rank_domain from node records and rank_node. A rank's GPU
 * is its index among its node's ranks, modulo the node's GPUs. GPUs that
 * report a fabric clique share a domain across nodes; otherwise a domain is a
 * node-local NVLink component, and a node without GPUs is one domain. */
static hsr_status place_ranks(hsr_cluster *c) {
  char(*key)[128] = calloc((size_t)c->world, sizeof *key);
  int *seen = calloc((size_t)c->num_nodes, sizeof(int));
  if (!key || !seen) {
    free(key);
    free(seen);
    return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  }
  for (int r = 0; r < c->world; r++) {
    int n = c->rank_node[r];
    const hsr_topo *t = &c->nodes[n];
    int idx = seen[n]++;
    if (t->num_gpus == 0) {
      c->rank_gpu[r] = -1;
      snprintf(key[r], sizeof key[r], "node:%d", n);
      continue;
    }
    if (idx == t->num_gpus)
      HSR_LOG_W("node %d (%s) runs more ranks than its %d GPUs: ranks share GPUs", n, t->host, t->num_gpus);
    int g = idx % t->num_gpus;
    c->rank_gpu[r] = g;
    if (t->gpus[g].clique[0])
      snprintf(key[r], sizeof key[r], "clique:%s", t->gpus[g].clique);
    else
      snprintf(key[r], sizeof key[r], "node:%d/%d", n, t->gpus[g].domain);
  }
  hsr_status st = number_domains(c, key);
  free(key);
  free(seen);
  return st;
}

hsr_status cluster_create(int world, const int *node_of, const int *gpu_of, const int *domain_of, hsr_cluster **out) {
  if (!out || !node_of || !domain_of || world < 1)
    return hsr_error(HSR_ERR_INVALID, "cluster_create: need world >= 1 and node/domain arrays");
  int nodes = 0;
  for (int r = 0; r < world; r++) {
    if (node_of[r] < 0 || node_of[r] >= world)
      return hsr_error(HSR_ERR_INVALID, "cluster_create: rank %d node %d out of range 0..%d", r, node_of[r], world - 1);
    if (node_of[r] + 1 > nodes) nodes = node_of[r] + 1;
  }
  hsr_cluster *c;
  HSR_CHECK(cluster_alloc(world, nodes, 0, &c));
  char(*key)[128] = calloc((size_t)world, sizeof *key);
  if (!key) {
    cluster_free(c);
    return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  }
  for (int r = 0; r < world; r++) {
    c->rank_node[r] = node_of[r];
    c->rank_gpu[r] = gpu_of ? gpu_of[r] : -1;
    snprintf(key[r], sizeof key[r], "%d", domain_of[r]);
  }
  hsr_status st = number_domains(c, key);
  free(key);
  if (st != HSR_OK) {
    cluster_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

hsr_status cluster_synthetic(const hsr_topo *t, int nodes, int world, hsr_cluster **out) {
  if (!t || !out) return hsr_error(HSR_ERR_INVALID, "cluster_synthetic: NULL argument");
  if (nodes < 1 || world < 1)
    return hsr_error(HSR_ERR_INVALID, "offline view: nodes (%d) and world (%d) must be >= 1", nodes, world);
  if (world % nodes) {
    char valid[256];
    size_t u = 0;
    valid[0] = '\0';
    for (int n = 1; n <= world && u < sizeof valid; n++)
      if (world % n == 0) u += (size_t)snprintf(valid + u, sizeof valid - u, "%s%d", u ? ", " : "", n);
    return hsr_error(HSR_ERR_INVALID, "offline view: %d nodes do not divide world %d (valid nodes: %s)", nodes, world,
                     valid);
  }
  int per = world / nodes;
  if (t->num_gpus > 0 && per > t->num_gpus)
    return hsr_error(HSR_ERR_INVALID,
                     "offline view: %d ranks per node but the topology has %d GPUs per node (one rank per GPU: use "
                     "--nodes %d or more, or --world %d or less)",
                     per, t->num_gpus, (world + t->num_gpus - 1) / t->num_gpus, nodes * t->num_gpus);
  hsr_cluster *c;
  HSR_CHECK(cluster_alloc(world, nodes, 1, &c));
  for (int n = 0; n < nodes; n++) {
    c->nodes[n] = *t;
    if (nodes > 1) snprintf(c->nodes[n].host, sizeof c->nodes[n].host, "node%d", n);
  }
  for (int r = 0; r < world; r++) c->rank_node[r] = r / per;
  hsr_status st = place_ranks(c);
  if (st != HSR_OK) {
    cluster_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

hsr_status cluster_gather(hsr_boot *boot, const hsr_topo *local, hsr_cluster **out) {
  if (!boot || !local || !out) return hsr_error(HSR_ERR_INVALID, "cluster_gather: NULL argument");
  int world = hsr_boot_size(boot), nodes = boot_num_nodes(boot);
  hsr_topo *all = malloc((size_t)world * sizeof *all);
  if (!all) return hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
  hsr_topo mine = *local;
  /* Name simulated nodes apart so that the view reads like N hosts. */
  if (boot_sim_nodes(boot) > 1)
    snprintf(mine.host, sizeof mine.host, "%.50s#%d", boot_hostname(boot), boot_node(boot) % boot_sim_nodes(boot));
  hsr_status st = boot_allgather(boot, &mine, sizeof mine, all);
  hsr_cluster *c = NULL;
  if (st == HSR_OK) st = cluster_alloc(world, nodes, 1, &c);
  if (st == HSR_OK) {
    int *have = calloc((size_t)nodes, sizeof(int));
    if (!have) st = hsr_error(HSR_ERR_NOMEM, "cluster view: out of memory");
    for (int r = 0; st == HSR_OK && r < world; r++) {
      int n = boot_node_of(boot, r);
      if (n < 0 || n >= nodes) {
        st = hsr_error(HSR_ERR_INTERNAL, "rank %d has node %d outside 0..%d", r, n, nodes - 1);
        break;
      }
      c->rank_node[r] = n;
      if (!have[n])
        c->nodes[n] = all[r]; /* the node's record: its lowest rank's */
      else if (all[r].num_gpus != c->nodes[n].num_gpus)
        st = hsr_error(HSR_ERR_MISMATCH, "ranks on node %d disagree on its GPUs: %d sees %d, an earlier rank %d", n, r,
                       all[r].num_gpus, c->nodes[n].num_gpus);
      have[n] = 1;
    }
    free(have);
  }
  if (st == HSR_OK) st = place_ranks(c);
  free(all);
  if (st != HSR_OK) {
    cluster_free(c);
    return st;
  }
  *out = c;
  return HSR_OK;
}

int cluster_world(const hsr_cluster *c) { return c->world; }
int cluster_num_nodes(const hsr_cluster *c) { return c->num_nodes; }
int cluster_num_domains(const hsr_cluster *c) { return c->num_domains; }

int cluster_domain_size(const hsr_cluster *c) {
  int best = c->world;
  for (int d = 0; d < c->num_domains; d++) {
    int n = 0;
    for (int r = 0; r < c->world; r++) n += c->rank_domain[r] == d;
    if (n < best) best = n;
  }
  return best;
}

int cluster_rank_node(const hsr_cluster *c, int r) { return r >= 0 && r < c->world ? c->rank_node[r] : -1; }
int cluster_rank_gpu(const hsr_cluster *c, int r) { return r >= 0 && r < c->world ? c->rank_gpu[r] : -1; }
int cluster_rank_domain(const hsr_cluster *c, int r) { return r >= 0 && r < c->world ? c->rank_domain[r] : -1; }
const hsr_topo *cluster_node_topo(const hsr_cluster *c, int n) {
  return c->nodes && n >= 0 && n < c->num_nodes ? &c->nodes[n] : NULL;
}
