/* topology internals: per-rank hardware discovery (hwloc), the cluster view
 * gathered from every rank, and the 2-D mesh planner; the library, the front
 * ends and the tests use them, a program does not (not installed, not
 * exported from libhsr.so; docs/api.md holds the contract).
 *
 * mesh_plan is a pure function: (cluster view, request) -> mesh, no I/O.
 */
#ifndef HSR_TOPOLOGY_TOPOLOGY_INTERNAL_H
#define HSR_TOPOLOGY_TOPOLOGY_INTERNAL_H
#include "hsr/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Discovers this host (xml_path NULL: live hwloc, or HSR_TOPO_XML if set). */
hsr_status topo_discover(const char *xml_path, hsr_topo **out);

/* Reads an NCCL topology file (the format of NCCL_TOPO_FILE and
 * NCCL_TOPO_DUMP_FILE: <system><cpu><pci><gpu><nvlink/></gpu></pci><nic><net/></nic>)
 * as the record of host `host` (0-based, in the order of the cpu elements'
 * host_hash; files without host_hash are one host). *num_hosts (optional) gets
 * the number of hosts in the file. Vendor files that list bare PCI devices
 * (no <gpu>/<nic> children) read as GPUs by class 0x03 and NICs by 0x02. */
hsr_status topo_load_nccl(const char *path, int host, hsr_topo **out, int *num_hosts);
void topo_free(hsr_topo *t);

/* Limits of one node's record (records are fixed-size blobs for the allgather). */
#define HSR_TOPO_MAX_GPUS 32
#define HSR_TOPO_MAX_NICS 8 /* per GPU, closest first */
#define HSR_TOPO_MAX_NUMA 16
#define HSR_TOPO_NAME_MAX 32
#define HSR_TOPO_CPUSET_MAX 256 /* cpu list "0-7,16-23" */

/* PCI path class between a GPU and a NIC, closest first, named as NCCL
 * names them (src/include/graph.h): PIX at most one PCIe bridge (same
 * switch), PXB several bridges, PHB through the host bridge (CPU), NODE
 * different host bridges of one NUMA node, SYS across NUMA nodes / sockets.
 * NODE is NCCL 2.4-2.5's class (and nvidia-smi topo's); NCCL 2.6 and later
 * fold it into PHB (topo_path_nccl). */
typedef enum topo_path { HSR_PATH_PIX = 0, HSR_PATH_PXB, HSR_PATH_PHB, HSR_PATH_NODE, HSR_PATH_SYS } topo_path;
const char *topo_path_str(topo_path p);

/* The class current NCCL (>= 2.6) reports for p: NODE -> PHB, others as is. */
topo_path topo_path_nccl(topo_path p);

/* What the record was read from: "hwloc" (live), "hwloc-xml", "nccl-xml". */
const char *topo_source(const hsr_topo *t);

/* Where the NVLink picture came from: "hwloc" (NVLinkBandwidth distances),
 * "nvml", "cuda" (peer attributes), "nccl" (nvlink elements), "fabric" (only
 * fabric cliques), "none". */
const char *topo_nvlink_source(const hsr_topo *t);

/* Unit of topo_nvlink_bw: "MB/s" (per direction), "links" (NVML link
 * counts whose generation is unknown), "peer" (1 = CUDA peer access with
 * native atomics), "" when there is no NVLink. */
const char *topo_nvlink_unit(const hsr_topo *t);

/* How the NVLink domains were formed, '+'-joined: "nvswitch" (every GPU with
 * NVSwitch links is in one domain per node, NCCL's single NVS node),
 * "nvlink-components" (connected components of direct GPU-GPU links),
 * "fabric-clique" (equal clusterUuid/cliqueId, across nodes); "none" (no
 * NVLink: one GPU per domain); "unknown" (the source cannot show NVLink: an
 * hwloc XML without NVLinkBandwidth, an NCCL input file without <gpu>, a host
 * without driver; one GPU per domain); "shared-memory" (no GPUs). */
const char *topo_domain_rule(const hsr_topo *t);

/* What the reading could not see, "; "-separated ("" when nothing). */
const char *topo_notes(const hsr_topo *t);
const char *topo_host(const hsr_topo *t);
int topo_num_gpus(const hsr_topo *t);
int topo_num_numa(const hsr_topo *t);

/* Distinct NICs near any GPU (within each GPU's HSR_TOPO_MAX_NICS closest). */
int topo_num_nics(const hsr_topo *t);

/* cpu list of NUMA node i (by position, os index in topo_numa_os). */
const char *topo_numa_cpuset(const hsr_topo *t, int i);
int topo_numa_os(const hsr_topo *t, int i);
const char *topo_gpu_pci(const hsr_topo *t, int gpu); /* "0000:34:00.0" */
int topo_gpu_cuda(const hsr_topo *t, int gpu);        /* CUDA ordinal, -1 if no driver */
int topo_gpu_numa(const hsr_topo *t, int gpu);        /* os index of first NUMA node, -1 unknown */

/* Every NUMA node near a GPU (an I/O locality can span several): count and
 * the i-th os index. The GPU's cpus (and its binding) are their union. */
int topo_gpu_num_numa(const hsr_topo *t, int gpu);
int topo_gpu_numa_at(const hsr_topo *t, int gpu, int i);
const char *topo_gpu_cpuset(const hsr_topo *t, int gpu); /* local cpu list */
int topo_gpu_num_nics(const hsr_topo *t, int gpu);

/* NIC j of a GPU (closest first): name ("mlx5_0", "eth0") and path class. */
hsr_status topo_gpu_nic(const hsr_topo *t, int gpu, int j, const char **name, topo_path *path);

/* The NIC NCCL would give the GPU's first channel (topo.cc
 * ncclTopoGetLocalNet): among the NICs at the GPU's best class, the GPUs that
 * share them take them in turn by GPU index (bit-mirrored for 2^k NICs). NIC
 * speeds are not in hwloc, so NCCL's bandwidth tie-break is not applied. */
hsr_status topo_gpu_nic_pick(const hsr_topo *t, int gpu, const char **name, topo_path *path);

/* Node-local NVLink domain index of a GPU (0..num_domains-1). */
int topo_gpu_domain(const hsr_topo *t, int gpu);

/* Multi-node NVLink fabric clique of a GPU ("" when none): clusterUuid/cliqueId. */
const char *topo_gpu_clique(const hsr_topo *t, int gpu);
int topo_num_domains(const hsr_topo *t);

/* NVLink bandwidth from GPU a to GPU b in topo_nvlink_unit (0 = none);
 * through NVSwitches, the narrower of the two GPUs' total switch bandwidth. */
double topo_nvlink_bw(const hsr_topo *t, int a, int b);

/* One line for the node: "8 GPUs, one NVSwitch domain, 8 NICs at PIX". */
hsr_status topo_summary(const hsr_topo *t, char *buf, size_t len);

/* Recommended cpu list for local rank `local_rank` of `local_size`: its GPU's
 * NUMA nodes (GPU = local_rank % GPUs); without GPUs, local ranks spread over
 * the NUMA nodes in blocks. */
hsr_status topo_bind_cpuset(const hsr_topo *t, int local_rank, int local_size, char *buf, size_t len);

/* JSON of one node ({"host":..,"gpus":[..],"numa":[..],"nvlink_domains":[[..]]});
 * *out is malloc'd, free() it. */
hsr_status topo_json(const hsr_topo *t, char **out);

/* Where two readings of one node disagree, by GPU PCI bus id: GPUs only one
 * sees, NVLink domains, the NIC picked per GPU and its path class, and every
 * GPU-NIC class (hwloc's NODE matches NCCL's PHB). `a` is normally hwloc's
 * reading, `b` NCCL's. *json (malloc'd) lists them; *count is their number. */
hsr_status topo_compare(const hsr_topo *a, const hsr_topo *b, char **json, int *count);

/* Collective over the boot context: every rank's record -> one view. */
hsr_status cluster_gather(hsr_boot *boot, const hsr_topo *local, hsr_cluster **out);

/* Offline view: `nodes` nodes described by `t`, `world` ranks placed in
 * contiguous blocks (world / nodes per node, one GPU each where there are GPUs). */
hsr_status cluster_synthetic(const hsr_topo *t, int nodes, int world, hsr_cluster **out);

/* A view from explicit placement (tools, tests): per world rank its node,
 * GPU (-1 none) and domain id (any integers; equal ids = same domain). Nodes
 * get no hardware record. */
hsr_status cluster_create(int world, const int *node_of, const int *gpu_of, const int *domain_of, hsr_cluster **out);
void cluster_free(hsr_cluster *c);
int cluster_world(const hsr_cluster *c);
int cluster_num_nodes(const hsr_cluster *c);

/* Ranks per NVLink domain (smallest domain, in ranks). */
int cluster_domain_size(const hsr_cluster *c);
int cluster_num_domains(const hsr_cluster *c);

/* Placement of a world rank (-1 when out of range; gpu -1 on CPU-only nodes). */
int cluster_rank_node(const hsr_cluster *c, int rank);
int cluster_rank_gpu(const hsr_cluster *c, int rank);
int cluster_rank_domain(const hsr_cluster *c, int rank);

/* Node i's record (the first rank's on that node). */
const hsr_topo *cluster_node_topo(const hsr_cluster *c, int node);

/* {"world":..,"nodes":[<topo_json>..],"ranks":[{"rank","node","gpu","domain"}..]}; free() it. */
hsr_status cluster_json(const hsr_cluster *c, char **out);
typedef struct mesh_request {
  int shard;     /* S; 0 = auto (the domain size) */
  int replicate; /* R; 0 = world / S */
  int partial;   /* K; 0 = default (the shard group's ranks on one node) */
} mesh_request;
hsr_status mesh_plan(const hsr_cluster *c, const mesh_request *req, hsr_mesh **out);
void mesh_free(hsr_mesh *m);
int mesh_world(const hsr_mesh *m);
int mesh_partial(const hsr_mesh *m); /* K */

/* World rank at mesh position (rep, shard); -1 if out of range. */
int mesh_rank_at(const hsr_mesh *m, int rep, int shard);

/* Group members as world ranks, in group order: shard group (S entries),
 * replicate group (R entries), partial group (K entries). */
hsr_status mesh_shard_group(const hsr_mesh *m, int world_rank, int *ranks);
hsr_status mesh_replicate_group(const hsr_mesh *m, int world_rank, int *ranks);
hsr_status mesh_partial_group(const hsr_mesh *m, int world_rank, int *ranks);

/* Index of the rank's partial group within its shard group (0..S/K-1). */
int mesh_partial_index(const hsr_mesh *m, int world_rank);

#ifdef __cplusplus
}
#endif
#endif
