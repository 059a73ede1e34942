/* hsr topology: the mesh a program's engine runs on (hsr_rt_get_mesh). Mesh
 * position (rep, shard) holds one world rank: R replicas of S shards, shard
 * groups inside one NVLink domain whenever S fits in one. Discovery, the
 * cluster view and the planner are internal (topology/topology_internal.h).
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

HSR_API int hsr_mesh_replicate(const hsr_mesh *m); /* R */
HSR_API int hsr_mesh_shard(const hsr_mesh *m);     /* S */
/* Mesh coordinates of a world rank. */
HSR_API hsr_status hsr_mesh_coords(const hsr_mesh *m, int world_rank, int *rep, int *shard);

#ifdef __cplusplus
}
#endif
#endif
