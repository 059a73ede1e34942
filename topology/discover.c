/* Per-host discovery through hwloc: NVIDIA GPUs (PCI vendor 0x10de, class
 * 0x03xx), the NUMA nodes near each, NICs ranked by NCCL's PCI path classes,
 * and the NVLink picture (nvlink.c), reduced to node-local NVLink domains.
 *
 * I/O objects have no cpuset, so hwloc's common-ancestor helpers do not work
 * on them: every path question here walks parent chains by hand. */
#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo_hwloc.h"
#include "common/env.h"
#include "common/sys.h"
#include "common/common_internal.h"
#include "topology/topology_internal.h"

static int is_gpu(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == 0x10de &&
         (o->attr->pcidev.class_id >> 8) == 0x03;
}

static int is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }
static int is_pci_bridge(hwloc_obj_t o) {
  return o && is_bridge(o) && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static void busid_str(hwloc_obj_t o, char *buf, size_t len) {
  snprintf(buf, len, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
           o->attr->pcidev.func);
}

static int bcm_gen_of(hwloc_obj_t o, int level) {
  const struct hwloc_pcidev_attr_s *p = &o->attr->bridge.upstream.pci;
  return topo_bcm_gen(p->vendor_id, p->device_id, p->subvendor_id, p->subdevice_id, level);
}

/* The upstream port of a Broadcom sub switch below a port of the same
 * switch: NCCL flattens the two levels into one switch, so this port and the
 * downstream port above it do not count as bridges. */
static int bcm_sub_switch(hwloc_obj_t x) {
  if (!is_pci_bridge(x)) return 0;
  int gen = bcm_gen_of(x, 1);
  hwloc_obj_t up = x->parent ? x->parent->parent : NULL;
  return gen && is_pci_bridge(x->parent) && is_pci_bridge(up) && bcm_gen_of(up, 0) == gen;
}

/* An I/O object's ancestors inside the I/O tree, each with the number of
 * bridges strictly between the object and it. */
typedef struct io_chain {
  hwloc_obj_t obj[64];
  int bridges[64];
  int n;
} io_chain;

static void chain_of(hwloc_obj_t o, io_chain *c) {
  int count = 0, skip_next = 0;
  c->n = 0;
  for (hwloc_obj_t x = o->parent; x && hwloc_obj_type_is_io(x->type) && c->n < 64; x = x->parent) {
    c->obj[c->n] = x;
    c->bridges[c->n++] = count;
    if (!is_bridge(x)) continue;
    if (bcm_sub_switch(x))
      skip_next = 1;
    else if (skip_next)
      skip_next = 0;
    else
      count++;
  }
}

static hwloc_obj_t package_of(hwloc_obj_t o) {
  for (; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PACKAGE) return o;
  return NULL;
}

/* NCCL's PCI path classes between two I/O objects (src/include/graph.h; see
 * docs/topology.md): PIX at most one bridge on each side of their lowest common
 * ancestor, PXB more, PHB the ancestor is their host bridge, NODE different
 * host bridges of one NUMA node, SYS different NUMA nodes. */
static topo_path path_class(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b) {
  io_chain ca, cb;
  chain_of(a, &ca);
  chain_of(b, &cb);
  for (int i = 0; i < ca.n; i++)
    for (int j = 0; j < cb.n; j++) {
      if (ca.obj[i] != cb.obj[j]) continue;
      hwloc_obj_t x = ca.obj[i];
      if (is_bridge(x) && x->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return HSR_PATH_PHB;
      return ca.bridges[i] <= 1 && cb.bridges[j] <= 1 ? HSR_PATH_PIX : HSR_PATH_PXB;
    }
  /* Different host bridges: sharing a NUMA node is NODE. Objects near
   * several NUMA nodes share one when their nodesets intersect. */
  hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(topo, a), nb = hwloc_get_non_io_ancestor_obj(topo, b);
  if (na == nb) return HSR_PATH_NODE;
  if (na->nodeset && nb->nodeset && !hwloc_bitmap_iszero(na->nodeset) && !hwloc_bitmap_iszero(nb->nodeset))
    return hwloc_bitmap_intersects(na->nodeset, nb->nodeset) ? HSR_PATH_NODE : HSR_PATH_SYS;
  hwloc_obj_t pa = package_of(na), pb = package_of(nb);
  return pa && pa == pb ? HSR_PATH_NODE : HSR_PATH_SYS;
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

/* Every NUMA node with cpus in the nodeset of the GPU's locality (an I/O
 * object's locality can cover several, e.g. a package with sub-NUMA
 * clustering); the GPU's cpus are their union. */
static void gpu_numa(hwloc_topology_t topo, hwloc_obj_t na, topo_gpu_rec *g) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  g->num_numa = 0;
  for (hwloc_obj_t n = NULL; set && (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != NULL;) {
    if (!na || !na->nodeset || !hwloc_bitmap_isset(na->nodeset, n->os_index)) continue;
    if (!n->cpuset || hwloc_bitmap_iszero(n->cpuset) || g->num_numa == HSR_TOPO_MAX_NUMA) continue;
    g->numa_list[g->num_numa++] = (int32_t)n->os_index;
    hwloc_bitmap_or(set, set, n->cpuset);
  }
  if (g->num_numa > 0) {
    g->numa = g->numa_list[0];
    hwloc_bitmap_list_snprintf(g->cpuset, sizeof g->cpuset, set);
  } else {
    g->numa = na && na->nodeset ? hwloc_bitmap_first(na->nodeset) : -1;
    if (na && na->cpuset) hwloc_bitmap_list_snprintf(g->cpuset, sizeof g->cpuset, na->cpuset);
  }
  hwloc_bitmap_free(set);
}

static void find_gpus(topo_disc *d) {
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
    topo_gpu_rec *g = &t->gpus[i];
    hwloc_obj_t o = all[i];
    d->gpu[i] = o;
    busid_str(o, g->pci, sizeof g->pci);
    g->cuda = -1;
    gpu_numa(d->topo, hwloc_get_non_io_ancestor_obj(d->topo, o), g);
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
static void find_nics(topo_disc *d) {
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
    topo_gpu_rec *g = &d->t->gpus[i];
    /* Closest first; ties keep PCI discovery order (stable insertion). */
    for (int cls = HSR_PATH_PIX; cls <= HSR_PATH_SYS; cls++)
      for (int k = 0; k < n && g->num_nics < HSR_TOPO_MAX_NICS; k++) {
        if ((int)path_class(d->topo, d->gpu[i], nics[k].pci) != cls) continue;
        topo_nic_rec *r = &g->nics[g->num_nics++];
        snprintf(r->name, sizeof r->name, "%s", nics[k].name);
        busid_str(nics[k].pci, r->pci, sizeof r->pci);
        r->path = cls;
      }
  }
}

static void find_numa(topo_disc *d) {
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

static hsr_status load(topo_disc *d, const char *xml) {
  if (hwloc_topology_init(&d->topo) != 0) return hsr_error(HSR_ERR_SYSTEM, "hwloc_topology_init failed");
  /* hwloc drops I/O objects unless asked to keep them. */
  hwloc_topology_set_io_types_filter(d->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (xml) {
    struct stat sb;
    if (stat(xml, &sb) == 0 && S_ISDIR(sb.st_mode))
      return hsr_error(HSR_ERR_IO, "topology XML '%s' is a directory, not a file", xml);
    FILE *f;
    HSR_CHECK(file_fopen_read("topology XML", xml, &f)); /* a FIFO would hang hwloc */
    int empty = fgetc(f) == EOF;
    fclose(f);
    if (empty) return hsr_error(HSR_ERR_IO, "topology XML '%s' is empty", xml);
    HSR_CHECK(topo_xml_precheck(xml));
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

/* The host name: the file's HostName, else (XML) the file's base name so that
 * --xml output does not depend on the machine reading it, else this host's. */
static void host_name(topo_disc *d, const char *xml) {
  hsr_topo *t = d->t;
  const char *host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(d->topo), "HostName");
  if (host) {
    snprintf(t->host, sizeof t->host, "%s", host);
  } else if (xml) {
    topo_file_stem(xml, t->host, sizeof t->host);
  } else if (gethostname(t->host, sizeof t->host) != 0) {
    snprintf(t->host, sizeof t->host, "localhost");
  }
  t->host[HSR_HOSTNAME_MAX - 1] = '\0';
}

hsr_status topo_discover(const char *xml_path, hsr_topo **out) {
  if (!out) return hsr_error(HSR_ERR_INVALID, "topo_discover: NULL out");
  *out = NULL;
  if (!xml_path) HSR_CHECK(env_get_str("HSR_TOPO_XML", &xml_path)); /* a readable file, or unset */
  topo_disc d;
  memset(&d, 0, sizeof d);
  d.t = calloc(1, sizeof *d.t);
  if (!d.t) return hsr_error(HSR_ERR_NOMEM, "topology: out of memory");
  hsr_status st = load(&d, xml_path);
  if (st == HSR_OK) {
    snprintf(d.t->source, sizeof d.t->source, "%s", xml_path ? "hwloc-xml" : "hwloc");
    host_name(&d, xml_path);
    find_numa(&d);
    find_gpus(&d);
    find_nics(&d);
    topo_nvlink_discover(&d);
    topo_finish(d.t);
    HSR_LOG_D("topology %s: %d GPUs, %d NUMA nodes, %d domains (NVLink from %s, rule %s)", xml_path ? xml_path : "live",
              d.t->num_gpus, d.t->num_numa, d.t->num_domains, d.t->nvlink_source, d.t->domain_rule);
  }
  if (d.topo) hwloc_topology_destroy(d.topo);
  if (st != HSR_OK) {
    free(d.t);
    return st;
  }
  *out = d.t;
  return HSR_OK;
}
