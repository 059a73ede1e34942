/* What discover.c and nvlink.c share about one hwloc reading. */
#ifndef HSR_TOPO_HWLOC_H
#define HSR_TOPO_HWLOC_H

#include <hwloc.h>

#include "topo_internal.h"
#include "topology/topology_internal.h"

typedef struct topo_disc {
  hwloc_topology_t topo;
  hsr_topo *t;
  hwloc_obj_t gpu[HSR_TOPO_MAX_GPUS]; /* PCI objects, in t->gpus order */
  int from_xml;
} topo_disc;

/* The NVLink picture (hwloc NVLinkBandwidth distances, else NVML, else CUDA
 * peer attributes; fabric cliques) reduced to domains; CUDA ordinals. */
void topo_nvlink_discover(topo_disc *d);

#endif
