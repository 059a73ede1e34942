/* hsr topology: per-rank hardware discovery (hwloc), the cluster view gathered
 * from every rank, and the 2-D mesh planner.
 *
 * hsr_mesh_plan is a pure function: (cluster view, request) -> mesh, no I/O.
 * Mesh position (rep, shard) holds one world rank; shard groups lie inside one
 * NVLink domain whenever S fits in a domain. (Contract; topology/ fills in the
 * record and view details.)
 */
#ifndef HSR_TOPOLOGY_H
#define HSR_TOPOLOGY_H

#include "hsr/boot.h"
#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hsr_topo hsr_topo;       /* what one rank sees of its node */
typedef struct hsr_cluster hsr_cluster; /* every rank's placement: nodes, domains */
typedef struct hsr_mesh hsr_mesh;

/* Discovers this host (xml_path NULL: live hwloc, or HSR_TOPO_XML if set). */
hsr_status hsr_topo_discover(const char *xml_path, hsr_topo **out);
void hsr_topo_free(hsr_topo *t);

/* Collective over the boot context: every rank's record -> one view. */
hsr_status hsr_cluster_gather(hsr_boot *boot, const hsr_topo *local, hsr_cluster **out);
/* Offline view: `nodes` nodes described by `t`, `world` ranks placed in
 * contiguous blocks (world / nodes per node, one GPU each where there are GPUs). */
hsr_status hsr_cluster_synthetic(const hsr_topo *t, int nodes, int world, hsr_cluster **out);
void hsr_cluster_free(hsr_cluster *c);
int hsr_cluster_world(const hsr_cluster *c);
int hsr_cluster_num_nodes(const hsr_cluster *c);
/* Ranks per NVLink domain (smallest domain, in ranks). */
int hsr_cluster_domain_size(const hsr_cluster *c);

typedef struct hsr_mesh_request {
  int shard;     /* S; 0 = auto (the domain size) */
  int replicate; /* R; 0 = world / S */
  int partial;   /* K; 0 = default (the shard group's ranks on one node) */
} hsr_mesh_request;

hsr_status hsr_mesh_plan(const hsr_cluster *c, const hsr_mesh_request *req, hsr_mesh **out);
void hsr_mesh_free(hsr_mesh *m);
int hsr_mesh_world(const hsr_mesh *m);
int hsr_mesh_replicate(const hsr_mesh *m); /* R */
int hsr_mesh_shard(const hsr_mesh *m);     /* S */
int hsr_mesh_partial(const hsr_mesh *m);   /* K */
/* World rank at mesh position (rep, shard); -1 if out of range. */
int hsr_mesh_rank_at(const hsr_mesh *m, int rep, int shard);
/* Mesh coordinates of a world rank. */
hsr_status hsr_mesh_coords(const hsr_mesh *m, int world_rank, int *rep, int *shard);
/* Group members as world ranks, in group order: shard group (S entries),
 * replicate group (R entries), partial group (K entries). */
hsr_status hsr_mesh_shard_group(const hsr_mesh *m, int world_rank, int *ranks);
hsr_status hsr_mesh_replicate_group(const hsr_mesh *m, int world_rank, int *ranks);
hsr_status hsr_mesh_partial_group(const hsr_mesh *m, int world_rank, int *ranks);
/* Index of the rank's partial group within its shard group (0..S/K-1). */
int hsr_mesh_partial_index(const hsr_mesh *m, int world_rank);

#ifdef __cplusplus
}
#endif
#endif
