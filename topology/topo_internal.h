/* Private layout of the topology records. Everything here is fixed-size and
 * pointer-free so that a node's record travels through boot_allgather. */
#ifndef HSR_TOPO_INTERNAL_H
#define HSR_TOPO_INTERNAL_H

#include <stdint.h>

#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "launch/boot_internal.h"

typedef struct topo_nic_rec {
  char name[HSR_TOPO_NAME_MAX];
  char pci[HSR_TOPO_NAME_MAX]; /* bus id, "" for NICs without one (NCCL's CPU-attached <nic>) */
  int32_t path;                /* topo_path */
  int32_t pad;
} topo_nic_rec;

typedef struct topo_gpu_rec {
  char pci[HSR_TOPO_NAME_MAX];
  char cpuset[HSR_TOPO_CPUSET_MAX];   /* union of the cpus of its NUMA nodes */
  char clique[HSR_TOPO_NAME_MAX * 2]; /* "clusteruuid/cliqueid" or "" */
  int32_t cuda, numa, domain, num_nics;
  int32_t num_numa, nic_pick, on_switch, pad;
  int32_t numa_list[HSR_TOPO_MAX_NUMA]; /* os indexes of every NUMA node (with cpus) near it */
  topo_nic_rec nics[HSR_TOPO_MAX_NICS];
} topo_gpu_rec;

struct hsr_topo {
  char host[HSR_HOSTNAME_MAX];
  char source[16];        /* "hwloc", "hwloc-xml", "nccl-xml" */
  char nvlink_source[16]; /* topo_nvlink_source */
  char nvlink_unit[8];    /* "MB/s", "links", "peer" or "" */
  char domain_rule[40];   /* topo_domain_rule */
  char notes[256];        /* what the reading could not see ("; "-separated), "" if nothing */
  char machine_cpuset[HSR_TOPO_CPUSET_MAX];
  int32_t num_gpus, num_numa, num_domains, num_nics; /* num_nics: distinct NICs near any GPU */
  int32_t numa_os[HSR_TOPO_MAX_NUMA];
  char numa_cpuset[HSR_TOPO_MAX_NUMA][HSR_TOPO_CPUSET_MAX];
  topo_gpu_rec gpus[HSR_TOPO_MAX_GPUS];
  float nvlink[HSR_TOPO_MAX_GPUS][HSR_TOPO_MAX_GPUS];
};

struct hsr_cluster {
  int world, num_nodes, num_domains;
  hsr_topo *nodes;                         /* num_nodes records; NULL for cluster_create views */
  int *rank_node, *rank_gpu, *rank_domain; /* domain: dense 0..num_domains-1 */
};

/* Union-find over a node's GPUs (NVLink components). */
int topo_uf_find(int *parent, int x);
void topo_uf_join(int *parent, int a, int b);

/* Link facts that both readers (hwloc, NCCL XML) collect, reduced to domains
 * by one rule: GPUs with NVSwitch links form one domain per node (NCCL's one
 * NVS node), direct GPU-GPU links join components, equal fabric cliques join
 * across nodes, and anything else is a domain of one GPU. */
typedef struct topo_links {
  int parent[HSR_TOPO_MAX_GPUS];   /* union-find of direct GPU-GPU links */
  double sw_bw[HSR_TOPO_MAX_GPUS]; /* a GPU's total bandwidth into the NVSwitch fabric */
  int direct;                      /* some direct GPU-GPU link was seen */
  int known;                       /* the source could have shown NVLinks (0: "unknown", not "none") */
} topo_links;
void topo_links_init(topo_links *l);
void topo_direct_link(hsr_topo *t, topo_links *l, int a, int b, double bw);
/* Fills nvlink (through-switch pairs), domains, domain_rule, nvlink_source. */
void topo_domains(hsr_topo *t, topo_links *l, const char *source);

/* Per-link NVLink rate in MB/s per direction: by NVML NVLink version
 * (nvmlNvlinkVersion_t, 1..7) or by CUDA compute capability (sm 60..100). */
double topo_nvlink_rate_by_version(unsigned version);
double topo_nvlink_rate_by_sm(int sm);

/* Broadcom PEX switches in base mode show two levels that NCCL flattens into
 * one (topo.cc ncclTopoFlattenBcmSwitches): the PCIe generation (4, 5) when
 * the ids are such a switch at `level` (0 = top, 1 = sub switch), else 0. */
int topo_bcm_gen(unsigned vendor, unsigned device, unsigned subvendor, unsigned subdevice, int level);

/* After a reader filled GPUs and their NIC lists (closest first): the NIC
 * NCCL would pick per GPU and the node's distinct NIC count. */
void topo_finish(hsr_topo *t);
/* One NIC in two lists: equal bus ids when both have one, else equal names. */
int topo_same_nic(const topo_nic_rec *a, const topo_nic_rec *b);
void topo_note(hsr_topo *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "0000:0a:00.0" from any case or width ("0:a:0.0" too); 0 if `in` is not a bus id. */
int topo_busid_norm(const char *in, char *out, size_t len);
/* Refuses an hwloc XML that hwloc's reader would crash on (xml_check.c). */
hsr_status topo_xml_precheck(const char *path);
/* A file's base name without its directory and ".xml" (deterministic host names). */
void topo_file_stem(const char *path, char *out, size_t len);

#endif
