/* Multi-rank test of the gathered cluster view and the mesh planned from it,
 * launched for real (hsr-run / mpirun, simulated nodes). Every rank checks
 * the view against the bootstrap, plans the auto mesh and checks its groups;
 * the ranks then compare their meshes (the planner is deterministic).
 *   mr_topo --domains D --domain-size Z [--gpus G] [--partial K] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "launch/boot_internal.h"

static int g_rank; /* for FAIL */
#include "mr_check.h"

static int run(hsr_boot *b, int want_domains, int want_dsize, int gpus, int want_k) {
  int rank = hsr_boot_rank(b), size = hsr_boot_size(b), nodes = boot_num_nodes(b);
  g_rank = rank;
  hsr_topo *t = NULL;
  hsr_cluster *c = NULL;
  hsr_mesh *m = NULL;
  if (topo_discover(NULL, &t) != HSR_OK) FAIL("discover: %s", hsr_last_error());
  if (cluster_gather(b, t, &c) != HSR_OK) FAIL("gather: %s", hsr_last_error());
  if (cluster_world(c) != size) FAIL("view world %d, expected %d", cluster_world(c), size);
  if (cluster_num_nodes(c) != nodes) FAIL("view has %d nodes, boot %d", cluster_num_nodes(c), nodes);
  if (cluster_num_domains(c) != want_domains) FAIL("%d domains, expected %d", cluster_num_domains(c), want_domains);
  if (cluster_domain_size(c) != want_dsize) FAIL("domain size %d, expected %d", cluster_domain_size(c), want_dsize);
  int per = size / nodes;
  for (int r = 0; r < size; r++) {
    if (cluster_rank_node(c, r) != boot_node_of(b, r))
      FAIL("rank %d on node %d, boot says %d", r, cluster_rank_node(c, r), boot_node_of(b, r));
    int want_gpu = gpus ? (r % per) % gpus : -1;
    if (cluster_rank_gpu(c, r) != want_gpu) FAIL("rank %d GPU %d, expected %d", r, cluster_rank_gpu(c, r), want_gpu);
  }
  if (!cluster_node_topo(c, nodes - 1)) FAIL("no record for node %d", nodes - 1);
  if (topo_num_gpus(cluster_node_topo(c, 0)) != gpus) FAIL("node 0 record has wrong GPU count");

  mesh_request req = {0, 0, 0};
  if (mesh_plan(c, &req, &m) != HSR_OK) FAIL("plan: %s", hsr_last_error());
  int S = hsr_mesh_shard(m), R = hsr_mesh_replicate(m);
  if (S != want_dsize || R * S != size) FAIL("auto mesh %d x %d, expected S = %d", R, S, want_dsize);
  if (want_k && mesh_partial(m) != want_k) FAIL("K %d, expected %d", mesh_partial(m), want_k);
  int *g = malloc((size_t)size * sizeof(int));
  mesh_shard_group(m, rank, g);
  int in = 0;
  for (int i = 0; i < S; i++) {
    if (cluster_rank_domain(c, g[i]) != cluster_rank_domain(c, rank)) FAIL("shard group leaves the domain");
    in |= g[i] == rank;
  }
  if (!in) FAIL("rank not in its own shard group");
  mesh_partial_group(m, rank, g);
  for (int i = 0; i < mesh_partial(m); i++)
    if (cluster_rank_node(c, g[i]) != boot_node(b)) FAIL("partial group leaves the node");
  free(g);

  /* Every rank planned the same mesh. */
  int *mine = malloc((size_t)size * sizeof(int)), *all = malloc((size_t)size * size * sizeof(int));
  for (int p = 0; p < size; p++) mine[p] = mesh_rank_at(m, p / S, p % S);
  if (boot_allgather(b, mine, (size_t)size * sizeof(int), all) != HSR_OK) FAIL("allgather: %s", hsr_last_error());
  for (int r = 0; r < size; r++)
    if (memcmp(all + (size_t)r * size, mine, (size_t)size * sizeof(int))) FAIL("rank %d planned another mesh", r);
  free(mine);
  free(all);
  if (rank == 0)
    printf("mr_topo OK: %d ranks, %d nodes, %d domains of %d, mesh %d x %d K=%d\n", size, nodes, cluster_num_domains(c),
           cluster_domain_size(c), R, S, mesh_partial(m));
  mesh_free(m);
  cluster_free(c);
  topo_free(t);
  return 0;
}

int main(int argc, char **argv) {
  int domains = -1, dsize = -1, gpus = 0, k = 0;
  g_rank = -1; /* until the bootstrap says */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--domains"))
      domains = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--domain-size"))
      dsize = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--gpus"))
      gpus = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--partial"))
      k = atoi(argv[i + 1]);
  }
  if (domains < 1 || dsize < 1) FAIL("usage: mr_topo --domains D --domain-size Z [--gpus G] [--partial K]");
  hsr_boot *b;
  if (hsr_boot_init(&b) != HSR_OK) FAIL("boot: %s", hsr_last_error());
  g_rank = hsr_boot_rank(b);
  int rc = run(b, domains, dsize, gpus, k);
  if (rc) boot_abort(b, 1, "mr_topo failed");
  boot_barrier(b);
  hsr_boot_finalize(b);
  return rc;
}
