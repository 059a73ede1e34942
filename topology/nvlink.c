/* The NVLink picture of one node and the rule that turns it into NVLink
 * domains. Sources, first found wins: hwloc's NVLinkBandwidth distances
 * (an XML, or live hwloc built with NVML), NVML loaded at run time, CUDA peer
 * attributes; GPU fabric cliques (multi-node NVLink) come on top.
 *
 * The rule follows NCCL (src/graph/topo.cc ncclTopoAddNvLinks): every NVLink
 * that ends on an NVSwitch goes to one NVS node per system, so all GPUs with
 * NVSwitch links form one domain per node, whatever switch chip each GPU
 * reaches (hwloc never lists the switch-to-switch trunks). Direct GPU-GPU
 * links join connected components. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsr/config.h"
#include "topology/topology_internal.h"
#include "topo_hwloc.h"

#if HSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int topo_uf_find(int *p, int x) {
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}
void topo_uf_join(int *p, int a, int b) { p[topo_uf_find(p, a)] = topo_uf_find(p, b); }

void topo_links_init(topo_links *l) {
  memset(l, 0, sizeof *l);
  for (int i = 0; i < HSR_TOPO_MAX_GPUS; i++) l->parent[i] = i;
}

void topo_direct_link(hsr_topo *t, topo_links *l, int a, int b, double bw) {
  if (a == b) return;
  t->nvlink[a][b] += (float)bw;
  topo_uf_join(l->parent, a, b);
  l->direct = 1;
}

static void add_rule(char *buf, size_t len, const char *r) {
  size_t u = strlen(buf);
  snprintf(buf + u, len - u, "%s%s", u ? "+" : "", r);
}

void topo_domains(hsr_topo *t, topo_links *l, const char *source) {
  int first_sw = -1, clique = 0;
  for (int g = 0; g < t->num_gpus; g++) {
    t->gpus[g].on_switch = l->sw_bw[g] > 0;
    if (!t->gpus[g].on_switch) continue;
    if (first_sw < 0)
      first_sw = g;
    else
      topo_uf_join(l->parent, g, first_sw);
  }
  /* Through the one NVS node a pair gets the narrower of the two GPUs' total
   * switch bandwidth (the best of that and a direct link). */
  for (int i = 0; i < t->num_gpus; i++)
    for (int k = 0; k < t->num_gpus; k++) {
      if (i == k || !t->gpus[i].on_switch || !t->gpus[k].on_switch) continue;
      double via = l->sw_bw[i] < l->sw_bw[k] ? l->sw_bw[i] : l->sw_bw[k];
      if (via > t->nvlink[i][k]) t->nvlink[i][k] = (float)via;
    }
  /* GPUs of one fabric clique reach each other over NVLink, here too. */
  for (int i = 0; i < t->num_gpus; i++)
    for (int j = 0; j < i; j++)
      if (t->gpus[i].clique[0] && !strcmp(t->gpus[i].clique, t->gpus[j].clique)) {
        topo_uf_join(l->parent, i, j);
        clique = 1;
      }
  if (!strcmp(source, "none") && clique) source = "fabric";
  snprintf(t->nvlink_source, sizeof t->nvlink_source, "%s", source);
  t->domain_rule[0] = '\0';
  if (first_sw >= 0) add_rule(t->domain_rule, sizeof t->domain_rule, "nvswitch");
  if (l->direct) add_rule(t->domain_rule, sizeof t->domain_rule, "nvlink-components");
  if (clique) add_rule(t->domain_rule, sizeof t->domain_rule, "fabric-clique");
  if (!t->domain_rule[0])
    snprintf(t->domain_rule, sizeof t->domain_rule, "%s",
             !t->num_gpus ? "shared-memory"
             : l->known   ? "none"
                          : "unknown");
  int root_dom[HSR_TOPO_MAX_GPUS];
  t->num_domains = 0;
  for (int i = 0; i < t->num_gpus; i++) {
    int r = topo_uf_find(l->parent, i), dd = -1;
    for (int j = 0; j < i && dd < 0; j++)
      if (topo_uf_find(l->parent, j) == r) dd = root_dom[j];
    root_dom[i] = dd >= 0 ? dd : t->num_domains++;
    t->gpus[i].domain = root_dom[i];
  }
  if (t->num_gpus == 0) t->num_domains = 1; /* a CPU host: shared memory */
}

/* Nominal per-direction rates per link (NVIDIA's published figures): NVLink1
 * 20 GB/s (P100), NVLink2-4 25 GB/s (V100, A100, H100), NVLink5 50 GB/s
 * (B200); the 3rd-generation bridge of sm 8.6 boards 14.0625 GB/s. */
double topo_nvlink_rate_by_version(unsigned v) {
  /* nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0 */
  if (v == 1) return 20000;
  if (v >= 2 && v <= 6) return 25000;
  if (v == 7) return 50000;
  return 0;
}

double topo_nvlink_rate_by_sm(int sm) {
  if (sm >= 60 && sm < 70) return 20000;
  if (sm == 86) return 14062.5;
  if (sm >= 70 && sm < 100) return 25000;
  if (sm >= 100 && sm < 110) return 50000;
  return 0;
}

static int gpu_index(const topo_disc *d, hwloc_obj_t o) {
  while (o && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
  for (int i = 0; i < d->t->num_gpus; i++)
    if (d->gpu[i] == o) return i;
  return -1;
}

/* NVLinkBandwidth is heterogeneous: GPUs (as PCI or NVML/CUDA OS devices),
 * NVSwitch ports (I/O objects) and CPU packages. Links to CPUs join nothing. */
static int nvlink_from_hwloc(topo_disc *d, topo_links *l) {
  unsigned nr = 1;
  struct hwloc_distances_s *dist = NULL;
  if (hwloc_distances_get_by_name(d->topo, "NVLinkBandwidth", &nr, &dist, 0) != 0 || nr == 0) return 0;
  unsigned n = dist->nbobjs;
  int *gi = malloc(n * sizeof(int)), *sw = malloc(n * sizeof(int));
  if (!gi || !sw) {
    free(gi);
    free(sw);
    hwloc_distances_release(d->topo, dist);
    return 0;
  }
  for (unsigned i = 0; i < n; i++) {
    hwloc_obj_t o = dist->objs[i];
    gi[i] = gpu_index(d, o);
    sw[i] = gi[i] < 0 && o && hwloc_obj_type_is_io(o->type);
  }
  for (unsigned i = 0; i < n; i++)
    for (unsigned j = 0; j < n; j++) {
      double v = (double)dist->values[i * n + j];
      if (i == j || v == 0 || gi[i] < 0) continue;
      if (gi[j] >= 0)
        topo_direct_link(d->t, l, gi[i], gi[j], v);
      else if (sw[j])
        l->sw_bw[gi[i]] += v;
    }
  free(gi);
  free(sw);
  hwloc_distances_release(d->topo, dist);
  return 1;
}

/* NVML, loaded at run time so that hsr builds and runs without the driver.
 * Types mirror nvml.h (not shipped with the toolkit here). */
typedef void *nvml_dev;
typedef struct {
  char bus_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
} nvml_pci;
typedef struct {
  unsigned char cluster_uuid[16];
  int status;
  unsigned clique_id;
  unsigned char state;
} nvml_fabric;
#define NVML_MAX_LINKS 18
#define NVML_FABRIC_COMPLETED 3
#define NVML_LINK_TO_NPU 1 /* nvmlIntNvLinkDeviceType_t: an IBM NPU, i.e. the CPU */

typedef struct nvml_api {
  int (*init)(void), (*shutdown)(void);
  int (*by_bus)(const char *, nvml_dev *);
  int (*state)(nvml_dev, unsigned, int *);
  int (*remote)(nvml_dev, unsigned, nvml_pci *);
  int (*remote_type)(nvml_dev, unsigned, int *); /* optional (newer drivers) */
  int (*version)(nvml_dev, unsigned, unsigned *);
  int (*fabric)(nvml_dev, nvml_fabric *);
} nvml_api;

static int gpu_by_busid(const hsr_topo *t, const char *s) {
  char want[HSR_TOPO_NAME_MAX];
  if (!topo_busid_norm(s, want, sizeof want)) return -1;
  for (int i = 0; i < t->num_gpus; i++)
    if (!strcmp(t->gpus[i].pci, want)) return i;
  return -1;
}

static void fabric_clique(const nvml_api *a, nvml_dev dev, topo_gpu_rec *g) {
  nvml_fabric fi;
  memset(&fi, 0, sizeof fi);
  if (!a->fabric || a->fabric(dev, &fi) != 0 || fi.status != 0 || fi.state != NVML_FABRIC_COMPLETED) return;
  int off = 0, zero = 1;
  for (int k = 0; k < 16; k++) {
    zero &= fi.cluster_uuid[k] == 0;
    off += snprintf(g->clique + off, sizeof g->clique - (size_t)off, "%02x", fi.cluster_uuid[k]);
  }
  snprintf(g->clique + off, sizeof g->clique - (size_t)off, "/%u", fi.clique_id);
  if (zero) g->clique[0] = '\0'; /* all-zero UUID: no multi-node fabric */
}

/* Per GPU and link: the peer GPU (>= 0), -1 a switch (or an unknown device,
 * as NCCL assumes), -2 the CPU; and the link's rate (0 = version unknown). */
static int nvml_links(const nvml_api *a, hsr_topo *t, int peer[][NVML_MAX_LINKS], double rate[][NVML_MAX_LINKS]) {
  int used = 0;
  for (int i = 0; i < t->num_gpus; i++) {
    nvml_dev dev;
    for (unsigned k = 0; k < NVML_MAX_LINKS; k++) peer[i][k] = -3; /* inactive */
    if (a->by_bus(t->gpus[i].pci, &dev) != 0) continue;
    used = 1;
    for (unsigned k = 0; k < NVML_MAX_LINKS; k++) {
      int active = 0, type = -1;
      unsigned ver = 0;
      nvml_pci rp;
      if (a->state(dev, k, &active) != 0 || !active || a->remote(dev, k, &rp) != 0) continue;
      peer[i][k] = gpu_by_busid(t, rp.bus_id);
      if (peer[i][k] < 0 && a->remote_type && a->remote_type(dev, k, &type) == 0 && type == NVML_LINK_TO_NPU)
        peer[i][k] = -2;
      rate[i][k] = a->version && a->version(dev, k, &ver) == 0 ? topo_nvlink_rate_by_version(ver) : 0;
    }
    fabric_clique(a, dev, &t->gpus[i]);
  }
  return used;
}

static int nvlink_from_nvml(hsr_topo *t, topo_links *l) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  nvml_api a;
#define SYM(field, name) *(void **)(&a.field) = dlsym(lib, name)
  SYM(init, "nvmlInit_v2");
  SYM(shutdown, "nvmlShutdown");
  SYM(by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
  SYM(state, "nvmlDeviceGetNvLinkState");
  SYM(remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  SYM(remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
  SYM(version, "nvmlDeviceGetNvLinkVersion");
  SYM(fabric, "nvmlDeviceGetGpuFabricInfo");
#undef SYM
  int used = 0;
  int peer[HSR_TOPO_MAX_GPUS][NVML_MAX_LINKS];
  double rate[HSR_TOPO_MAX_GPUS][NVML_MAX_LINKS];
  if (a.init && a.shutdown && a.by_bus && a.state && a.remote && a.init() == 0) {
    used = nvml_links(&a, t, peer, rate);
    a.shutdown();
  }
  dlclose(lib);
  if (!used) return 0;
  /* MB/s when every active link's generation is known, else link counts. */
  int known = 1;
  for (int i = 0; i < t->num_gpus; i++)
    for (int k = 0; k < NVML_MAX_LINKS; k++) known &= peer[i][k] == -3 || rate[i][k] > 0;
  snprintf(t->nvlink_unit, sizeof t->nvlink_unit, "%s", known ? "MB/s" : "links");
  for (int i = 0; i < t->num_gpus; i++)
    for (int k = 0; k < NVML_MAX_LINKS; k++) {
      double bw = known ? rate[i][k] : 1;
      if (peer[i][k] >= 0)
        topo_direct_link(t, l, i, peer[i][k], bw);
      else if (peer[i][k] == -1)
        l->sw_bw[i] += bw;
    }
  return 1;
}

/* CUDA ordinals by PCI bus id, and peer access with native atomics (which
 * PCIe peers lack) as the last NVLink hint: 0 no CUDA device, 1 devices but
 * no such peers, 2 peers found. */
static int cuda_match(hsr_topo *t, topo_links *l) {
#if HSR_HAVE_CUDA
  int n = 0, used = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int ord_gpu[64];
  for (int dev = 0; dev < n && dev < 64; dev++) {
    char bus[32];
    ord_gpu[dev] = -1;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) continue;
    int g = gpu_by_busid(t, bus);
    if (g >= 0) t->gpus[g].cuda = dev;
    ord_gpu[dev] = g;
  }
  if (!l || n == 0) return n > 0;
  for (int a = 0; a < n && a < 64; a++)
    for (int b = 0; b < n && b < 64; b++) {
      int acc = 0, atom = 0;
      if (a == b || ord_gpu[a] < 0 || ord_gpu[b] < 0) continue;
      if (cudaDeviceGetP2PAttribute(&acc, cudaDevP2PAttrAccessSupported, a, b) != cudaSuccess ||
          cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, a, b) != cudaSuccess)
        continue;
      if (acc && atom) {
        topo_direct_link(t, l, ord_gpu[a], ord_gpu[b], 1);
        used = 1;
      }
    }
  return 1 + used;
#else
  (void)t;
  (void)l;
  return 0;
#endif
}

void topo_nvlink_discover(topo_disc *d) {
  hsr_topo *t = d->t;
  topo_links l;
  topo_links_init(&l);
  const char *src = "none";
  if (t->num_gpus > 0) {
    if (nvlink_from_hwloc(d, &l)) {
      src = "hwloc";
      snprintf(t->nvlink_unit, sizeof t->nvlink_unit, "MB/s");
    } else if (!d->from_xml && nvlink_from_nvml(t, &l)) {
      src = "nvml";
    }
    l.known = strcmp(src, "none") != 0;
    if (!d->from_xml) {
      int use_cuda = !l.known, cuda = cuda_match(t, use_cuda ? &l : NULL);
      if (use_cuda && cuda) l.known = 1;
      if (use_cuda && cuda == 2) {
        src = "cuda";
        snprintf(t->nvlink_unit, sizeof t->nvlink_unit, "peer");
      }
    }
    if (d->from_xml && !l.known)
      topo_note(t, "no NVLinkBandwidth distances in the XML: NVLink absent or not recorded (hwloc records it "
                   "only when built with NVML)");
  }
  topo_domains(t, &l, src);
}
