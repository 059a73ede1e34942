/* The memory of this job's GPU, as the driver reports it (NVML, loaded at
 * run time so that hsr needs no driver to build or to plan): hsr tune's
 * memory bound under a launcher when --mem-budget is not given. */
#include <dlfcn.h>
#include <stdio.h>

#include "tune_cli.h"

typedef struct nvml_memory {
  unsigned long long total, free, used;
} nvml_memory;

hsr_status tune_device_memory(const char *pci, double *total, char *name, size_t len) {
  if (!pci || !total) return hsr_error(HSR_ERR_INVALID, "tune_device_memory: NULL argument");
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return hsr_error(HSR_ERR_UNSUPPORTED, "no NVIDIA driver (libnvidia-ml.so.1)");
  int (*init)(void), (*shutdown)(void), (*by_bus)(const char *, void **), (*mem)(void *, nvml_memory *);
  int (*dev_name)(void *, char *, unsigned);
  *(void **)(&init) = dlsym(lib, "nvmlInit_v2");
  *(void **)(&shutdown) = dlsym(lib, "nvmlShutdown");
  *(void **)(&by_bus) = dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)(&mem) = dlsym(lib, "nvmlDeviceGetMemoryInfo");
  *(void **)(&dev_name) = dlsym(lib, "nvmlDeviceGetName");
  hsr_status st = HSR_OK;
  if (!init || !shutdown || !by_bus || !mem || init() != 0) {
    st = hsr_error(HSR_ERR_UNSUPPORTED, "NVML did not initialise");
  } else {
    void *dev = NULL;
    nvml_memory m = {0};
    if (by_bus(pci, &dev) != 0 || mem(dev, &m) != 0 || m.total == 0)
      st = hsr_error(HSR_ERR_UNSUPPORTED, "NVML has no memory figure for GPU %s", pci);
    *total = (double)m.total;
    if (name && len) {
      name[0] = '\0';
      if (st == HSR_OK && dev_name && dev_name(dev, name, (unsigned)len) != 0) name[0] = '\0';
    }
    shutdown();
  }
  dlclose(lib);
  return st;
}
