/* Per-host discovery through hwloc: NVIDIA GPUs (PCI vendor 0x10de, class
 * 0x03xx), their NUMA node and cpuset, NICs ranked by PCI path class, and the
 * NVLink picture (hwloc NVLinkBandwidth distances, else NVML, else CUDA peer
 * attributes), reduced to node-local NVLink domains.
 *
 * I/O objects have no cpuset, so hwloc's common-ancestor helpers do not work
 * on them: every path question here walks parent chains by hand. */
#include <dlfcn.h>
#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsr/config.h"
#include "topo_internal.h"

#if HSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct disc {
  hwloc_topology_t topo;
  hsr_topo *t;
  hwloc_obj_t gpu[HSR_TOPO_MAX_GPUS];
  int from_xml;
} disc;

static int is_gpu(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == 0x10de &&
         (o->attr->pcidev.class_id >> 8) == 0x03;
}

static int is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }

static void busid_str(hwloc_obj_t o, char *buf, size_t len) {
  snprintf(buf, len, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
           o->attr->pcidev.func);
}

static hwloc_obj_t package_of(hwloc_obj_t o) {
  for (; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PACKAGE) return o;
  return NULL;
}

/* PCI path class between two I/O objects: find their lowest common ancestor
 * by walking both parent chains, counting bridges on the way up. */
static hsr_topo_path path_class(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b) {
  int ba = 0;
  for (hwloc_obj_t x = a->parent; x && hwloc_obj_type_is_io(x->type); x = x->parent) {
    int bb = 0;
    for (hwloc_obj_t y = b->parent; y && hwloc_obj_type_is_io(y->type); y = y->parent) {
      if (y == x) {
        if (is_bridge(x) && x->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return HSR_PATH_PHB;
        return ba <= 1 && bb <= 1 ? HSR_PATH_PIX : HSR_PATH_PXB;
      }
      bb += is_bridge(y);
    }
    ba += is_bridge(x);
  }
  /* Different host bridges: same CPU package (or NUMA node) is PHB. */
  hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(topo, a), nb = hwloc_get_non_io_ancestor_obj(topo, b);
  hwloc_obj_t pa = package_of(na), pb = package_of(nb);
  if (pa && pb) return pa == pb ? HSR_PATH_PHB : HSR_PATH_SYS;
  if (na == nb || (na->nodeset && nb->nodeset && hwloc_bitmap_isequal(na->nodeset, nb->nodeset))) return HSR_PATH_PHB;
  return HSR_PATH_SYS;
}

static int cmp_pci(const void *x, const void *y) {
  hwloc_obj_t a = *(hwloc_obj_t const *)x, b = *(hwloc_obj_t const *)y;
  const struct hwloc_pcidev_attr_s *p = &a->attr->pcidev, *q = &b->attr->pcidev;
  if (p->domain != q->domain) return p->domain < q->domain ? -1 : 1;
  if (p->bus != q->bus) return p->bus < q->bus ? -1 : 1;
  if (p->dev != q->dev) return p->dev < q->dev ? -1 : 1;
  return (int)p->func - (int)q->func;
}

static const char *info_of(hwloc_obj_t pci, const char *name) {
  const char *v = hwloc_obj_get_info_by_name(pci, name);
  for (hwloc_obj_t c = pci->io_first_child; !v && c; c = c->next_sibling) v = hwloc_obj_get_info_by_name(c, name);
  return v;
}

static void find_gpus(disc *d) {
  hsr_topo *t = d->t;
  hwloc_obj_t all[256];
  int n = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(d->topo, o)) != NULL;)
    if (is_gpu(o) && n < 256) all[n++] = o;
  qsort(all, (size_t)n, sizeof all[0], cmp_pci);
  if (n > HSR_TOPO_MAX_GPUS) {
    HSR_LOG_W("topology: %d NVIDIA GPUs, keeping the first %d", n, HSR_TOPO_MAX_GPUS);
    n = HSR_TOPO_MAX_GPUS;
  }
  t->num_gpus = n;
  for (int i = 0; i < n; i++) {
    hsr_topo_gpu_rec *g = &t->gpus[i];
    hwloc_obj_t o = all[i], na = hwloc_get_non_io_ancestor_obj(d->topo, o);
    d->gpu[i] = o;
    busid_str(o, g->pci, sizeof g->pci);
    g->cuda = -1;
    g->numa = na && na->nodeset ? hwloc_bitmap_first(na->nodeset) : -1;
    if (na && na->cpuset) hwloc_bitmap_list_snprintf(g->cpuset, sizeof g->cpuset, na->cpuset);
    /* A CUDA OS device (live hwloc with the CUDA plugin, or an XML) names the ordinal. */
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name && !strncmp(c->name, "cuda", 4) && c->name[4] >= '0' &&
          c->name[4] <= '9')
        g->cuda = atoi(c->name + 4);
    const char *uuid = info_of(o, "HSRFabricClusterUUID"), *clique = info_of(o, "HSRFabricCliqueId");
    if (uuid && clique) snprintf(g->clique, sizeof g->clique, "%.40s/%.20s", uuid, clique);
  }
}

typedef struct nic_cand {
  hwloc_obj_t pci;
  const char *name;
} nic_cand;

/* One NIC per PCI function: its OpenFabrics device (mlx5_0, efa_0) when it has
 * one, else its first network interface. */
static void find_nics(disc *d) {
  nic_cand nics[64];
  int n = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(d->topo, o)) != NULL;) {
    hwloc_obj_osdev_type_t ty = o->attr->osdev.type;
    if (ty != HWLOC_OBJ_OSDEV_OPENFABRICS && ty != HWLOC_OBJ_OSDEV_NETWORK) continue;
    if (!o->parent || o->parent->type != HWLOC_OBJ_PCI_DEVICE || !o->name) continue; /* virtual */
    int k;
    for (k = 0; k < n && nics[k].pci != o->parent; k++) {}
    if (k == n) {
      if (n == 64) continue;
      nics[n].pci = o->parent;
      nics[n++].name = o->name;
    } else if (ty == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      nics[k].name = o->name;
    }
  }
  for (int i = 0; i < d->t->num_gpus; i++) {
    hsr_topo_gpu_rec *g = &d->t->gpus[i];
    /* Closest first; ties keep PCI discovery order (stable insertion). */
    for (int cls = HSR_PATH_PIX; cls <= HSR_PATH_SYS; cls++)
      for (int k = 0; k < n && g->num_nics < HSR_TOPO_MAX_NICS; k++) {
        if ((int)path_class(d->topo, d->gpu[i], nics[k].pci) != cls) continue;
        snprintf(g->nics[g->num_nics].name, sizeof g->nics[0].name, "%s", nics[k].name);
        g->nics[g->num_nics++].path = cls;
      }
  }
}

static void find_numa(disc *d) {
  hsr_topo *t = d->t;
  int n = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(d->topo, HWLOC_OBJ_NUMANODE, o)) != NULL;) {
    if (n == HSR_TOPO_MAX_NUMA) break;
    t->numa_os[n] = (int32_t)o->os_index;
    if (o->cpuset) hwloc_bitmap_list_snprintf(t->numa_cpuset[n], sizeof t->numa_cpuset[n], o->cpuset);
    n++;
  }
  t->num_numa = n;
  hwloc_bitmap_list_snprintf(t->machine_cpuset, sizeof t->machine_cpuset, hwloc_topology_get_topology_cpuset(d->topo));
}

/* Union-find over GPUs for the NVLink components. */
static int uf_find(int *p, int x) {
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}
static void uf_join(int *p, int a, int b) { p[uf_find(p, a)] = uf_find(p, b); }

static int gpu_index(const disc *d, hwloc_obj_t o) {
  while (o && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
  for (int i = 0; i < d->t->num_gpus; i++)
    if (d->gpu[i] == o) return i;
  return -1;
}

/* NVLinkBandwidth is heterogeneous: GPUs (as PCI or NVML/CUDA OS devices),
 * NVSwitch ports and CPU packages. GPUs joined directly or through a switch
 * are NVLink peers; links to CPUs join nothing. */
static int nvlink_from_hwloc(disc *d, int *parent) {
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
    sw[i] = gi[i] < 0 && o && hwloc_obj_type_is_io(o->type); /* NVSwitch and other I/O ports */
  }
  float(*bw)[HSR_TOPO_MAX_GPUS] = d->t->nvlink;
  for (unsigned i = 0; i < n; i++)
    for (unsigned j = 0; j < n; j++) {
      if (i == j || !dist->values[i * n + j] || gi[i] < 0) continue;
      double v = (double)dist->values[i * n + j];
      if (gi[j] >= 0) {
        bw[gi[i]][gi[j]] += (float)v;
        uf_join(parent, gi[i], gi[j]);
      } else if (sw[j]) {
        /* Through switch j: every other GPU on it is a peer. */
        for (unsigned k = 0; k < n; k++) {
          if (k == i || gi[k] < 0 || !dist->values[k * n + j]) continue;
          double w = (double)dist->values[k * n + j];
          double via = v < w ? v : w;
          if (via > bw[gi[i]][gi[k]]) bw[gi[i]][gi[k]] = (float)via;
          uf_join(parent, gi[i], gi[k]);
        }
      }
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

static int parse_busid(const char *s, unsigned v[4]) {
  return sscanf(s, "%x:%x:%x.%x", &v[0], &v[1], &v[2], &v[3]) == 4;
}

static int gpu_by_busid(const disc *d, const char *s) {
  unsigned v[4];
  if (!parse_busid(s, v)) return -1;
  for (int i = 0; i < d->t->num_gpus; i++) {
    const struct hwloc_pcidev_attr_s *p = &d->gpu[i]->attr->pcidev;
    if (p->domain == v[0] && p->bus == v[1] && p->dev == v[2] && p->func == v[3]) return i;
  }
  return -1;
}

static int nvlink_from_nvml(disc *d, int *parent) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
  int (*shutdown)(void) = (int (*)(void))dlsym(lib, "nvmlShutdown");
  int (*by_bus)(const char *, nvml_dev *) =
      (int (*)(const char *, nvml_dev *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  int (*state)(nvml_dev, unsigned, int *) = (int (*)(nvml_dev, unsigned, int *))dlsym(lib, "nvmlDeviceGetNvLinkState");
  int (*remote)(nvml_dev, unsigned, nvml_pci *) =
      (int (*)(nvml_dev, unsigned, nvml_pci *))dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  int (*fabric)(nvml_dev, nvml_fabric *) = (int (*)(nvml_dev, nvml_fabric *))dlsym(lib, "nvmlDeviceGetGpuFabricInfo");
  int used = 0;
  if (init && shutdown && by_bus && state && remote && init() == 0) {
    int on_switch[HSR_TOPO_MAX_GPUS] = {0};
    for (int i = 0; i < d->t->num_gpus; i++) {
      nvml_dev dev;
      if (by_bus(d->t->gpus[i].pci, &dev) != 0) continue;
      used = 1;
      for (unsigned l = 0; l < NVML_MAX_LINKS; l++) {
        int active = 0;
        nvml_pci rp;
        if (state(dev, l, &active) != 0 || !active || remote(dev, l, &rp) != 0) continue;
        int j = gpu_by_busid(d, rp.bus_id);
        if (j >= 0) {
          d->t->nvlink[i][j] += 1; /* links */
          uf_join(parent, i, j);
        } else {
          on_switch[i]++;
        }
      }
      nvml_fabric fi;
      memset(&fi, 0, sizeof fi);
      if (fabric && fabric(dev, &fi) == 0 && fi.status == 0 && fi.state == NVML_FABRIC_COMPLETED) {
        char *c = d->t->gpus[i].clique;
        int off = 0;
        for (int k = 0; k < 16; k++)
          off += snprintf(c + off, sizeof d->t->gpus[i].clique - (size_t)off, "%02x", fi.cluster_uuid[k]);
        snprintf(c + off, sizeof d->t->gpus[i].clique - (size_t)off, "/%u", fi.clique_id);
      }
    }
    /* GPUs whose links end on NVSwitches reach each other through them. */
    for (int i = 0; i < d->t->num_gpus; i++)
      for (int j = 0; j < d->t->num_gpus; j++)
        if (i != j && on_switch[i] && on_switch[j]) {
          d->t->nvlink[i][j] = (float)(on_switch[i] < on_switch[j] ? on_switch[i] : on_switch[j]);
          uf_join(parent, i, j);
        }
    shutdown();
  }
  dlclose(lib);
  return used;
}

/* CUDA ordinals by PCI bus id, and peer access with native atomics (which
 * PCIe peers lack) as the last NVLink hint. */
static int cuda_match(disc *d, int *parent) {
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
    int g = gpu_by_busid(d, bus);
    if (g >= 0) d->t->gpus[g].cuda = dev;
    ord_gpu[dev] = g;
  }
  if (!parent) return 0;
  for (int a = 0; a < n && a < 64; a++)
    for (int b = 0; b < n && b < 64; b++) {
      int acc = 0, atom = 0;
      if (a == b || ord_gpu[a] < 0 || ord_gpu[b] < 0) continue;
      if (cudaDeviceGetP2PAttribute(&acc, cudaDevP2PAttrAccessSupported, a, b) != cudaSuccess ||
          cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, a, b) != cudaSuccess)
        continue;
      if (acc && atom) {
        d->t->nvlink[ord_gpu[a]][ord_gpu[b]] = 1;
        uf_join(parent, ord_gpu[a], ord_gpu[b]);
        used = 1;
      }
    }
  return used;
#else
  (void)d;
  (void)parent;
  return 0;
#endif
}

static void find_domains(disc *d) {
  hsr_topo *t = d->t;
  int parent[HSR_TOPO_MAX_GPUS];
  for (int i = 0; i < t->num_gpus; i++) parent[i] = i;
  const char *src = "none";
  if (t->num_gpus > 0) {
    if (nvlink_from_hwloc(d, parent))
      src = "hwloc";
    else if (!d->from_xml && nvlink_from_nvml(d, parent))
      src = "nvml";
    if (!d->from_xml) {
      int use_cuda = !strcmp(src, "none");
      if (cuda_match(d, use_cuda ? parent : NULL) && use_cuda) src = "cuda";
    }
  }
  /* GPUs of one fabric clique reach each other over NVLink, here too. */
  for (int i = 0; i < t->num_gpus; i++)
    for (int j = 0; j < i; j++)
      if (t->gpus[i].clique[0] && !strcmp(t->gpus[i].clique, t->gpus[j].clique)) {
        uf_join(parent, i, j);
        if (!strcmp(src, "none")) src = "fabric";
      }
  snprintf(t->nvlink_source, sizeof t->nvlink_source, "%s", src);
  int root_dom[HSR_TOPO_MAX_GPUS];
  t->num_domains = 0;
  for (int i = 0; i < t->num_gpus; i++) {
    int r = uf_find(parent, i), dd = -1;
    for (int j = 0; j < i && dd < 0; j++)
      if (uf_find(parent, j) == r) dd = root_dom[j];
    root_dom[i] = dd >= 0 ? dd : t->num_domains++;
    t->gpus[i].domain = root_dom[i];
  }
  if (t->num_gpus == 0) t->num_domains = 1; /* a CPU host: shared memory */
}

static hsr_status load(disc *d, const char *xml) {
  if (hwloc_topology_init(&d->topo) != 0) return hsr_error(HSR_ERR_SYSTEM, "hwloc_topology_init failed");
  hwloc_topology_set_io_types_filter(d->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (xml) {
    FILE *f = fopen(xml, "r");
    if (!f) return hsr_error(HSR_ERR_IO, "cannot open topology XML '%s': %s", xml, strerror(errno));
    int empty = fgetc(f) == EOF;
    fclose(f);
    if (empty) return hsr_error(HSR_ERR_IO, "topology XML '%s' is empty", xml);
    if (hwloc_topology_set_xml(d->topo, xml) != 0)
      return hsr_error(HSR_ERR_IO, "topology XML '%s' is not a valid hwloc topology (truncated or malformed XML?)",
                       xml);
    d->from_xml = 1;
  }
  if (hwloc_topology_load(d->topo) != 0)
    return hsr_error(HSR_ERR_IO, "%s%s%s is not a valid hwloc topology%s",
                     xml ? "topology XML '" : "this host's topology", xml ? xml : "", xml ? "'" : "",
                     xml ? " (truncated or malformed XML?)" : "");
  return HSR_OK;
}

hsr_status hsr_topo_discover(const char *xml_path, hsr_topo **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "hsr_topo_discover: NULL out");
  *out = NULL;
  if (!xml_path) {
    const char *env = getenv("HSR_TOPO_XML");
    if (env && *env) xml_path = env;
  }
  disc d;
  memset(&d, 0, sizeof d);
  d.t = calloc(1, sizeof *d.t);
  if (!d.t) return hsr_error(HSR_ERR_NOMEM, "topology: out of memory");
  hsr_status st = load(&d, xml_path);
  if (st == HSR_OK) {
    hwloc_obj_t root = hwloc_get_root_obj(d.topo);
    const char *host = hwloc_obj_get_info_by_name(root, "HostName");
    if (host)
      snprintf(d.t->host, sizeof d.t->host, "%s", host);
    else if (gethostname(d.t->host, sizeof d.t->host) != 0)
      snprintf(d.t->host, sizeof d.t->host, "localhost");
    d.t->host[HSR_HOSTNAME_MAX - 1] = '\0';
    find_numa(&d);
    find_gpus(&d);
    find_nics(&d);
    find_domains(&d);
    HSR_LOG_D("topology %s: %d GPUs, %d NUMA nodes, %d domains (NVLink from %s)", xml_path ? xml_path : "live",
              d.t->num_gpus, d.t->num_numa, d.t->num_domains, d.t->nvlink_source);
  }
  if (d.topo) hwloc_topology_destroy(d.topo);
  if (st != HSR_OK) {
    free(d.t);
    return st;
  }
  *out = d.t;
  return HSR_OK;
}

void hsr_topo_free(hsr_topo *t) { free(t); }

const char *hsr_topo_path_str(hsr_topo_path p) {
  static const char *const names[] = {"PIX", "PXB", "PHB", "SYS"};
  return p >= HSR_PATH_PIX && p <= HSR_PATH_SYS ? names[p] : "?";
}

static int gpu_ok(const hsr_topo *t, int g) { return t && g >= 0 && g < t->num_gpus; }

const char *hsr_topo_nvlink_source(const hsr_topo *t) { return t->nvlink_source; }
const char *hsr_topo_host(const hsr_topo *t) { return t->host; }
int hsr_topo_num_gpus(const hsr_topo *t) { return t->num_gpus; }
int hsr_topo_num_numa(const hsr_topo *t) { return t->num_numa; }
int hsr_topo_num_domains(const hsr_topo *t) { return t->num_domains; }
const char *hsr_topo_numa_cpuset(const hsr_topo *t, int i) {
  return i >= 0 && i < t->num_numa ? t->numa_cpuset[i] : "";
}
int hsr_topo_numa_os(const hsr_topo *t, int i) { return i >= 0 && i < t->num_numa ? t->numa_os[i] : -1; }
const char *hsr_topo_gpu_pci(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].pci : ""; }
int hsr_topo_gpu_cuda(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].cuda : -1; }
int hsr_topo_gpu_numa(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].numa : -1; }
const char *hsr_topo_gpu_cpuset(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].cpuset : ""; }
int hsr_topo_gpu_num_nics(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].num_nics : 0; }
int hsr_topo_gpu_domain(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].domain : -1; }
const char *hsr_topo_gpu_clique(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].clique : ""; }
double hsr_topo_nvlink_bw(const hsr_topo *t, int a, int b) {
  return gpu_ok(t, a) && gpu_ok(t, b) ? (double)t->nvlink[a][b] : 0.0;
}

hsr_status hsr_topo_gpu_nic(const hsr_topo *t, int g, int j, const char **name, hsr_topo_path *path) {
  if (!gpu_ok(t, g) || j < 0 || j >= t->gpus[g].num_nics)
    return hsr_error(HSR_ERR_INVALID, "topology: no NIC %d on GPU %d", j, g);
  if (name) *name = t->gpus[g].nics[j].name;
  if (path) *path = (hsr_topo_path)t->gpus[g].nics[j].path;
  return HSR_OK;
}

hsr_status hsr_topo_bind_cpuset(const hsr_topo *t, int local_rank, int local_size, char *buf, size_t len) {
  if (!t || !buf || len == 0) return hsr_error(HSR_ERR_INVALID, "hsr_topo_bind_cpuset: NULL argument");
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return hsr_error(HSR_ERR_INVALID, "local rank %d must be in 0..%d (local size %d)", local_rank, local_size - 1,
                     local_size);
  const char *set = t->machine_cpuset;
  if (t->num_gpus > 0) {
    set = t->gpus[local_rank % t->num_gpus].cpuset;
  } else if (t->num_numa > 0) {
    /* Consecutive local ranks share a NUMA node (neighbours talk most); the
     * ranks spread evenly over the nodes. */
    set = t->numa_cpuset[(int)((long)local_rank * t->num_numa / local_size)];
  }
  if (!set[0]) set = t->machine_cpuset;
  if ((size_t)snprintf(buf, len, "%s", set) >= len)
    return hsr_error(HSR_ERR_INVALID, "cpuset '%s' does not fit in %zu bytes", set, len);
  return HSR_OK;
}
