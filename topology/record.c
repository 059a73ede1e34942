/* A node's record once read (from hwloc or an NCCL file): getters, the NIC
 * NCCL would pick per GPU, the one-line node summary, binding, and the small
 * helpers both readers share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"
#include "topology/topology_internal.h"

void topo_free(hsr_topo *t) { free(t); }

const char *topo_path_str(topo_path p) {
  static const char *const names[] = {"PIX", "PXB", "PHB", "NODE", "SYS"};
  return p >= HSR_PATH_PIX && p <= HSR_PATH_SYS ? names[p] : "?";
}

topo_path topo_path_nccl(topo_path p) { return p == HSR_PATH_NODE ? HSR_PATH_PHB : p; }

int topo_bcm_gen(unsigned vendor, unsigned device, unsigned subvendor, unsigned subdevice, int level) {
  if (vendor != 0x1000 || subvendor != 0x1000) return 0;
  /* Gen4 PEX (c010, subsystem axxx) at any level; Gen5 (c030) with the level
   * in the subsystem id's top nibble. */
  if (device == 0xc010 && (subdevice & 0xf000) == 0xa000) return 4;
  if (device == 0xc030 && (subdevice & 0xf000) == (unsigned)level * 0x1000) return 5;
  return 0;
}

void topo_note(hsr_topo *t, const char *fmt, ...) {
  size_t u = strlen(t->notes);
  if (u) u += (size_t)snprintf(t->notes + u, sizeof t->notes - u, "; ");
  if (u >= sizeof t->notes) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->notes + u, sizeof t->notes - u, fmt, ap);
  va_end(ap);
}

int topo_busid_norm(const char *in, char *out, size_t len) {
  unsigned dom = 0, bus, dev, fn;
  char tail;
  if (!in) return 0;
  if (sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 &&
      (dom = 0, sscanf(in, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3))
    return 0;
  if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return 0;
  snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return 1;
}

void topo_file_stem(const char *path, char *out, size_t len) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strlen(b);
  if (n > 4 && !strcmp(b + n - 4, ".xml")) n -= 4;
  snprintf(out, len, "%.*s", (int)n, b);
}

int topo_same_nic(const topo_nic_rec *a, const topo_nic_rec *b) {
  return a->pci[0] && b->pci[0] ? !strcmp(a->pci, b->pci) : !strcmp(a->name, b->name);
}

/* Class of `nic` from GPU h, -1 when it is not among h's closest NICs. */
static int class_from(const hsr_topo *t, int h, const topo_nic_rec *nic) {
  for (int j = 0; j < t->gpus[h].num_nics; j++)
    if (topo_same_nic(&t->gpus[h].nics[j], nic)) return t->gpus[h].nics[j].path;
  return -1;
}

static int mirror_bits(int val, int pow2) {
  int m = 0;
  for (int b = 1, mb = pow2 >> 1; b < pow2; b <<= 1, mb >>= 1)
    if (val & b) m |= mb;
  return m;
}

/* NCCL's channel-0 NIC (topo.cc ncclTopoGetLocalNetType): the GPU's nets at
 * its best class; the GPUs closest to the first of them share them, GPU
 * index modulo their count, bit-mirrored when the nets are 2^k. */
static int nic_pick(const hsr_topo *t, int g) {
  const topo_gpu_rec *r = &t->gpus[g];
  if (r->num_nics == 0) return -1;
  int nets[HSR_TOPO_MAX_NICS], nn = 0;
  for (int j = 0; j < r->num_nics; j++)
    if (r->nics[j].path == r->nics[0].path) nets[nn++] = j;
  int best = HSR_PATH_SYS + 1, local = 0;
  for (int h = 0; h < t->num_gpus; h++) {
    int c = class_from(t, h, &r->nics[nets[0]]);
    if (c < 0) continue;
    if (c < best) {
      best = c;
      local = 0;
    }
    if (c == best) local++;
  }
  int net = g % (local ? local : 1);
  if ((nn & (nn - 1)) == 0) net = mirror_bits(net, nn);
  return nets[net % nn];
}

void topo_finish(hsr_topo *t) {
  topo_nic_rec seen[HSR_TOPO_MAX_GPUS * HSR_TOPO_MAX_NICS];
  int ns = 0;
  for (int g = 0; g < t->num_gpus; g++) {
    t->gpus[g].nic_pick = nic_pick(t, g);
    for (int j = 0; j < t->gpus[g].num_nics; j++) {
      int k = 0;
      while (k < ns && !topo_same_nic(&seen[k], &t->gpus[g].nics[j])) k++;
      if (k == ns) seen[ns++] = t->gpus[g].nics[j];
    }
  }
  t->num_nics = ns;
}

static int gpu_ok(const hsr_topo *t, int g) { return t && g >= 0 && g < t->num_gpus; }

const char *topo_source(const hsr_topo *t) { return t->source; }
const char *topo_nvlink_source(const hsr_topo *t) { return t->nvlink_source; }
const char *topo_nvlink_unit(const hsr_topo *t) { return t->nvlink_unit; }
const char *topo_domain_rule(const hsr_topo *t) { return t->domain_rule; }
const char *topo_notes(const hsr_topo *t) { return t->notes; }
const char *topo_host(const hsr_topo *t) { return t->host; }
int topo_num_gpus(const hsr_topo *t) { return t->num_gpus; }
int topo_num_numa(const hsr_topo *t) { return t->num_numa; }
int topo_num_nics(const hsr_topo *t) { return t->num_nics; }
int topo_num_domains(const hsr_topo *t) { return t->num_domains; }
const char *topo_numa_cpuset(const hsr_topo *t, int i) { return i >= 0 && i < t->num_numa ? t->numa_cpuset[i] : ""; }
int topo_numa_os(const hsr_topo *t, int i) { return i >= 0 && i < t->num_numa ? t->numa_os[i] : -1; }
const char *topo_gpu_pci(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].pci : ""; }
int topo_gpu_cuda(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].cuda : -1; }
int topo_gpu_numa(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].numa : -1; }
int topo_gpu_num_numa(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].num_numa : 0; }
int topo_gpu_numa_at(const hsr_topo *t, int g, int i) {
  return gpu_ok(t, g) && i >= 0 && i < t->gpus[g].num_numa ? t->gpus[g].numa_list[i] : -1;
}
const char *topo_gpu_cpuset(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].cpuset : ""; }
int topo_gpu_num_nics(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].num_nics : 0; }
int topo_gpu_domain(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].domain : -1; }
const char *topo_gpu_clique(const hsr_topo *t, int g) { return gpu_ok(t, g) ? t->gpus[g].clique : ""; }
double topo_nvlink_bw(const hsr_topo *t, int a, int b) {
  return gpu_ok(t, a) && gpu_ok(t, b) ? (double)t->nvlink[a][b] : 0.0;
}

hsr_status topo_gpu_nic(const hsr_topo *t, int g, int j, const char **name, topo_path *path) {
  if (!gpu_ok(t, g) || j < 0 || j >= t->gpus[g].num_nics)
    return hsr_error(HSR_ERR_INVALID, "topology: no NIC %d on GPU %d", j, g);
  if (name) *name = t->gpus[g].nics[j].name;
  if (path) *path = (topo_path)t->gpus[g].nics[j].path;
  return HSR_OK;
}

hsr_status topo_gpu_nic_pick(const hsr_topo *t, int g, const char **name, topo_path *path) {
  if (!gpu_ok(t, g)) return hsr_error(HSR_ERR_INVALID, "topology: no GPU %d", g);
  if (t->gpus[g].nic_pick < 0) return hsr_error(HSR_ERR_INVALID, "topology: GPU %d has no NIC", g);
  return topo_gpu_nic(t, g, t->gpus[g].nic_pick, name, path);
}

static size_t domains_phrase(const hsr_topo *t, char *buf, size_t len) {
  const char *kind = strstr(t->domain_rule, "fabric-clique") ? "multi-node NVLink"
                     : strstr(t->domain_rule, "nvswitch")    ? "NVSwitch"
                                                             : "NVLink";
  int size[HSR_TOPO_MAX_GPUS] = {0}, equal = 1;
  for (int g = 0; g < t->num_gpus; g++) size[t->gpus[g].domain]++;
  for (int d = 1; d < t->num_domains; d++) equal &= size[d] == size[0];
  if (!strcmp(t->domain_rule, "none")) return (size_t)snprintf(buf, len, "no NVLink (one GPU per domain)");
  if (!strcmp(t->domain_rule, "unknown")) return (size_t)snprintf(buf, len, "NVLink unknown (one GPU per domain)");
  if (t->num_domains == 1) return (size_t)snprintf(buf, len, "one %s domain", kind);
  if (!strcmp(kind, "NVSwitch")) kind = "NVLink"; /* some GPUs lack the switch links */
  if (equal) return (size_t)snprintf(buf, len, "%d %s domains of %d GPUs", t->num_domains, kind, size[0]);
  size_t u = (size_t)snprintf(buf, len, "%d %s domains of", t->num_domains, kind);
  for (int d = 0; d < t->num_domains && u < len; d++)
    u += (size_t)snprintf(buf + u, len - u, "%s%d", d ? "/" : " ", size[d]);
  return u < len ? u + (size_t)snprintf(buf + u, len - u, " GPUs") : u;
}

/* The distinct NICs the GPUs pick, and the class each GPU picks at:
 * "8 NICs at PIX", or "2 NICs: PIX for 2 GPUs, PXB for 2". */
static void nics_phrase(const hsr_topo *t, char *buf, size_t len) {
  int gpus_at[HSR_PATH_SYS + 1] = {0}, distinct = 0, classes = 0;
  for (int g = 0; g < t->num_gpus; g++) {
    int p = t->gpus[g].nic_pick, first = 1;
    if (p < 0) continue;
    for (int h = 0; h < g && first; h++) {
      int q = t->gpus[h].nic_pick;
      first = q < 0 || !topo_same_nic(&t->gpus[h].nics[q], &t->gpus[g].nics[p]);
    }
    distinct += first;
    classes += gpus_at[t->gpus[g].nics[p].path]++ == 0;
  }
  if (!distinct) {
    snprintf(buf, len, "no NICs");
    return;
  }
  size_t u = (size_t)snprintf(buf, len, "%d NIC%s", distinct, distinct == 1 ? "" : "s");
  for (int c = HSR_PATH_PIX, n = 0; c <= HSR_PATH_SYS && u < len; c++) {
    const char *cls = topo_path_str((topo_path)c);
    if (!gpus_at[c]) continue;
    if (classes == 1)
      u += (size_t)snprintf(buf + u, len - u, " at %s", cls);
    else
      u += (size_t)snprintf(buf + u, len - u, "%s%s for %d%s", n ? ", " : ": ", cls, gpus_at[c],
                            n ? "" : (gpus_at[c] == 1 ? " GPU" : " GPUs"));
    n++;
  }
}

hsr_status topo_summary(const hsr_topo *t, char *buf, size_t len) {
  if (!t || !buf || len == 0) return hsr_error(HSR_ERR_INVALID, "topo_summary: NULL argument");
  char dom[96], nics[96];
  int n;
  if (t->num_gpus == 0) {
    n = snprintf(buf, len, "no GPUs, %d NUMA node%s: one shared-memory domain", t->num_numa,
                 t->num_numa == 1 ? "" : "s");
  } else {
    domains_phrase(t, dom, sizeof dom);
    nics_phrase(t, nics, sizeof nics);
    n = snprintf(buf, len, "%d GPU%s, %s, %s", t->num_gpus, t->num_gpus == 1 ? "" : "s", dom, nics);
  }
  if (n < 0 || (size_t)n >= len) return hsr_error(HSR_ERR_INVALID, "summary does not fit in %zu bytes", len);
  return HSR_OK;
}

hsr_status topo_bind_cpuset(const hsr_topo *t, int local_rank, int local_size, char *buf, size_t len) {
  if (!t || !buf || len == 0) return hsr_error(HSR_ERR_INVALID, "topo_bind_cpuset: NULL argument");
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return hsr_error(HSR_ERR_INVALID, "local rank %d must be in 0..%d (local size %d)", local_rank, local_size - 1,
                     local_size);
  const char *set = t->machine_cpuset;
  if (t->num_gpus > 0) {
    set = t->gpus[local_rank % t->num_gpus].cpuset; /* the union of its NUMA nodes' cpus */
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
