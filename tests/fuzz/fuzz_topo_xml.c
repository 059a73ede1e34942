/* Fuzz target: an hwloc XML topology as topo_discover reads it
 * (HSR_TOPO_XML / hsr topo --xml), and every getter on the result. */
#include "fuzz_io.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  hsr_topo *t = NULL;
  if (!path || topo_discover(path, &t) != HSR_OK) return 0;
  volatile size_t sink = 0;
  sink += (size_t)topo_num_gpus(t) + (size_t)topo_num_numa(t) + (size_t)topo_num_nics(t);
  const char *s[] = {topo_source(t),      topo_nvlink_source(t), topo_nvlink_unit(t),
                     topo_domain_rule(t), topo_notes(t),         topo_host(t)};
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) sink += s[i] ? s[i][0] : 0;
  for (int i = 0; i < topo_num_numa(t); i++) {
    const char *c = topo_numa_cpuset(t, i);
    sink += (c ? (size_t)c[0] : 0) + (size_t)topo_numa_os(t, i);
  }
  for (int g = 0; g < topo_num_gpus(t); g++) {
    const char *p = topo_gpu_pci(t, g);
    sink += p ? (size_t)p[0] : 0;
  }
  (void)sink;
  topo_free(t);
  return 0;
}
