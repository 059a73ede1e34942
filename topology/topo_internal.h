/* Private layout of the topology records. Everything here is fixed-size and
 * pointer-free so that a node's record travels through hsr_boot_allgather. */
#ifndef HSR_TOPO_INTERNAL_H
#define HSR_TOPO_INTERNAL_H

#include "hsr/topology.h"

typedef struct hsr_topo_nic_rec {
  char name[HSR_TOPO_NAME_MAX];
  int32_t path; /* hsr_topo_path */
  int32_t pad;
} hsr_topo_nic_rec;

typedef struct hsr_topo_gpu_rec {
  char pci[HSR_TOPO_NAME_MAX];
  char cpuset[HSR_TOPO_CPUSET_MAX];
  char clique[HSR_TOPO_NAME_MAX * 2]; /* "clusteruuid/cliqueid" or "" */
  int32_t cuda, numa, domain, num_nics;
  hsr_topo_nic_rec nics[HSR_TOPO_MAX_NICS];
} hsr_topo_gpu_rec;

struct hsr_topo {
  char host[HSR_HOSTNAME_MAX];
  char nvlink_source[16];
  char machine_cpuset[HSR_TOPO_CPUSET_MAX];
  int32_t num_gpus, num_numa, num_domains, pad;
  int32_t numa_os[HSR_TOPO_MAX_NUMA];
  char numa_cpuset[HSR_TOPO_MAX_NUMA][HSR_TOPO_CPUSET_MAX];
  hsr_topo_gpu_rec gpus[HSR_TOPO_MAX_GPUS];
  float nvlink[HSR_TOPO_MAX_GPUS][HSR_TOPO_MAX_GPUS];
};

struct hsr_cluster {
  int world, num_nodes, num_domains;
  hsr_topo *nodes;                         /* num_nodes records; NULL for hsr_cluster_create views */
  int *rank_node, *rank_gpu, *rank_domain; /* domain: dense 0..num_domains-1 */
};

#endif
