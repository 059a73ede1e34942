/* Fuzz target: an NCCL topology XML (NCCL_TOPO_FILE) as topo_load_nccl
 * reads it, every host it names. */
#include "fuzz_io.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) return 0;
  hsr_topo *t = NULL;
  int hosts = 0;
  if (topo_load_nccl(path, 0, &t, &hosts) != HSR_OK) return 0;
  volatile size_t sink = (size_t)topo_num_gpus(t) + (size_t)topo_num_nics(t);
  for (int g = 0; g < topo_num_gpus(t); g++) sink += topo_gpu_pci(t, g)[0];
  (void)sink;
  topo_free(t);
  for (int h = 1; h < hosts && h < 8; h++) {
    if (topo_load_nccl(path, h, &t, NULL) == HSR_OK) topo_free(t);
  }
  return 0;
}
