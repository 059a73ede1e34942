/* NCCL's own topology format (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE) read into
 * a node record, the way NCCL reads it (src/graph/topo.cc, xml.cc, paths.cc
 * of NCCL 2.30):
 *   <system version="1">
 *     <cpu numaid="0" affinity="0000ffff" host_hash="0x..">    one CPU node per NUMA node
 *       <pci busid=".." class="0x060400" ..>                   a PCIe switch
 *         <pci busid=".." class="0x030200"><gpu dev sm rank gdr>
 *             <nvlink target="busid" count="N" tclass="0x068000"/></gpu></pci>
 *         <pci busid=".." class="0x020700"><nic><net name dev speed ../></nic></pci>
 *       </pci>
 *       <nic><net name="eth0" ../></nic>                       a NIC without PCI
 *     </cpu>
 *   </system>
 * Path classes follow paths.cc: a device-switch link is PIX, a switch-switch
 * link PXB, a link to the CPU PHB, CPU to CPU SYS; a path takes its worst
 * link. nvlink tclass 0x068000 (and unknown classes) go to NCCL's single NVS
 * node, 0x03.. to a GPU, 0x068001 to the CPU. */
#include <errno.h>
#include <hwloc.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/sys.h"
#include "topo_internal.h"
#include "topology/topology_internal.h"

#define NX_MAX_NICS 64
#define NX_MAX_HOSTS 64

typedef struct nx_dev {
  xmlNodePtr pci; /* the device's pci element; NULL for a <nic> directly under <cpu> */
  xmlNodePtr sub; /* its <gpu> or <nic> child, NULL in vendor files that list bare devices */
  xmlNodePtr cpu;
  char busid[HSR_TOPO_NAME_MAX], name[HSR_TOPO_NAME_MAX];
} nx_dev;

typedef struct nx_ctx {
  hsr_topo *t;
  const char *path;
  char host_key[NX_MAX_HOSTS][64];
  int num_hosts, host;
  nx_dev gpus[HSR_TOPO_MAX_GPUS], nics[NX_MAX_NICS];
  int num_gpus, num_nics, has_gpu_elems, has_c2c;
} nx_ctx;

static int is(xmlNodePtr n, const char *name) {
  return n && n->type == XML_ELEMENT_NODE && !xmlStrcmp(n->name, (const xmlChar *)name);
}

/* An attribute as a string in buf ("" when absent). */
static const char *attr(xmlNodePtr n, const char *name, char *buf, size_t len) {
  xmlChar *v = n ? xmlGetProp(n, (const xmlChar *)name) : NULL;
  snprintf(buf, len, "%s", v ? (const char *)v : "");
  xmlFree(v);
  return buf;
}

static long attr_long(xmlNodePtr n, const char *name, long dflt) {
  char b[64], *end;
  attr(n, name, b, sizeof b);
  long v = strtol(b, &end, 0);
  return b[0] && !*end ? v : dflt;
}

static xmlNodePtr child(xmlNodePtr n, const char *name) {
  for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next)
    if (is(c, name)) return c;
  return NULL;
}

static int class_is(xmlNodePtr pci, const char *prefix) {
  char c[32];
  return !strncmp(attr(pci, "class", c, sizeof c), prefix, strlen(prefix));
}

static const char *host_of(xmlNodePtr cpu, char *buf, size_t len) { return attr(cpu, "host_hash", buf, len); }

/* Linux cpumask words ("0000ffff,ffffffff") as a cpu list. */
static void affinity_list(const char *mask, char *out, size_t len) {
  char hex[HSR_TOPO_CPUSET_MAX + 2] = "0x";
  size_t u = 2;
  out[0] = '\0';
  for (const char *p = mask; *p && u + 1 < sizeof hex; p++)
    if (*p != ',') hex[u++] = *p;
  hex[u] = '\0';
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  if (b && u > 2 && hwloc_bitmap_taskset_sscanf(b, hex) == 0 && !hwloc_bitmap_iszero(b))
    hwloc_bitmap_list_snprintf(out, len, b);
  hwloc_bitmap_free(b);
}

static void add_dev(nx_dev *list, int *n, int max, xmlNodePtr pci, xmlNodePtr sub, xmlNodePtr cpu) {
  if (*n == max) return;
  nx_dev *d = &list[(*n)++];
  memset(d, 0, sizeof *d);
  d->pci = pci;
  d->sub = sub;
  d->cpu = cpu;
  char b[64];
  if (pci && !topo_busid_norm(attr(pci, "busid", b, sizeof b), d->busid, sizeof d->busid))
    snprintf(d->busid, sizeof d->busid, "%.31s", b);
  xmlNodePtr net = child(sub, "net");
  if (net) attr(net, "name", d->name, sizeof d->name);
  if (!d->name[0]) snprintf(d->name, sizeof d->name, "%s", d->busid[0] ? d->busid : "nic");
}

/* GPUs and NICs below one cpu element, in document order. */
static void walk(nx_ctx *c, xmlNodePtr n, xmlNodePtr cpu) {
  for (xmlNodePtr x = n->children; x; x = x->next) {
    if (is(x, "nic") && is(n, "cpu")) {
      add_dev(c->nics, &c->num_nics, NX_MAX_NICS, NULL, x, cpu);
    } else if (is(x, "pci")) {
      xmlNodePtr gpu = child(x, "gpu"), nic = child(x, "nic");
      if (gpu || (!nic && class_is(x, "0x03"))) {
        c->has_gpu_elems |= gpu != NULL;
        c->has_c2c |= child(gpu, "c2c") != NULL;
        add_dev(c->gpus, &c->num_gpus, HSR_TOPO_MAX_GPUS, x, gpu, cpu);
      } else if (nic || class_is(x, "0x02")) {
        add_dev(c->nics, &c->num_nics, NX_MAX_NICS, x, nic, cpu);
      } else {
        walk(c, x, cpu);
      }
    }
  }
}

static int bcm_gen(xmlNodePtr pci, int level) {
  return topo_bcm_gen((unsigned)attr_long(pci, "vendor", 0), (unsigned)attr_long(pci, "device", 0),
                      (unsigned)attr_long(pci, "subsystem_vendor", 0), (unsigned)attr_long(pci, "subsystem_device", 0),
                      level);
}

/* The switch a device or switch hangs from, after NCCL's flattening of
 * Broadcom sub switches into their parent; NULL at the CPU. */
static xmlNodePtr up_switch(xmlNodePtr n) {
  xmlNodePtr p = n ? n->parent : NULL;
  if (!is(p, "pci")) return NULL;
  int gen = bcm_gen(p, 1);
  if (gen && is(p->parent, "pci") && bcm_gen(p->parent, 0) == gen) return p->parent;
  return p;
}

static topo_path nx_path(const nx_dev *g, const nx_dev *nic) {
  char a[32], b[32];
  if (nic->pci) {
    int hops_g = 0;
    for (xmlNodePtr s = up_switch(g->pci); s; s = up_switch(s), hops_g++) {
      int hops_n = 0;
      for (xmlNodePtr r = up_switch(nic->pci); r; r = up_switch(r), hops_n++)
        if (r == s) return hops_g == 0 && hops_n == 0 ? HSR_PATH_PIX : HSR_PATH_PXB;
    }
  }
  if (g->cpu == nic->cpu) return HSR_PATH_PHB;
  return attr_long(g->cpu, "numaid", -1) == attr_long(nic->cpu, "numaid", -2) &&
                 !strcmp(host_of(g->cpu, a, sizeof a), host_of(nic->cpu, b, sizeof b))
             ? HSR_PATH_PHB
             : HSR_PATH_SYS;
}

static int cmp_dev(const void *x, const void *y) {
  return strcmp(((const nx_dev *)x)->busid, ((const nx_dev *)y)->busid);
}

static void fill_gpus(nx_ctx *c) {
  hsr_topo *t = c->t;
  qsort(c->gpus, (size_t)c->num_gpus, sizeof c->gpus[0], cmp_dev);
  t->num_gpus = c->num_gpus;
  for (int i = 0; i < c->num_gpus; i++) {
    topo_gpu_rec *g = &t->gpus[i];
    char aff[HSR_TOPO_CPUSET_MAX];
    snprintf(g->pci, sizeof g->pci, "%s", c->gpus[i].busid);
    g->cuda = -1;
    g->numa = (int32_t)attr_long(c->gpus[i].cpu, "numaid", -1);
    if (g->numa >= 0) g->numa_list[g->num_numa++] = g->numa;
    affinity_list(attr(c->gpus[i].cpu, "affinity", aff, sizeof aff), g->cpuset, sizeof g->cpuset);
    for (int cls = HSR_PATH_PIX; cls <= HSR_PATH_SYS; cls++)
      for (int k = 0; k < c->num_nics && g->num_nics < HSR_TOPO_MAX_NICS; k++) {
        if ((int)nx_path(&c->gpus[i], &c->nics[k]) != cls) continue;
        topo_nic_rec *r = &g->nics[g->num_nics++];
        snprintf(r->name, sizeof r->name, "%s", c->nics[k].name);
        snprintf(r->pci, sizeof r->pci, "%s", c->nics[k].busid);
        r->path = cls;
      }
  }
}

static int gpu_by_bus(const nx_ctx *c, const char *target) {
  char want[HSR_TOPO_NAME_MAX];
  if (!topo_busid_norm(target, want, sizeof want)) return -1;
  for (int i = 0; i < c->num_gpus; i++)
    if (!strcmp(c->gpus[i].busid, want)) return i;
  return -1;
}

/* nvlink elements -> direct links and NVS bandwidth, in MB/s when every GPU's
 * sm gives its link generation, else in links. */
static void fill_nvlinks(nx_ctx *c) {
  hsr_topo *t = c->t;
  topo_links l;
  topo_links_init(&l);
  int any = 0, known = 1, self = 0, foreign = 0;
  for (int i = 0; i < c->num_gpus; i++)
    for (xmlNodePtr x = c->gpus[i].sub ? c->gpus[i].sub->children : NULL; x; x = x->next)
      if (is(x, "nvlink")) known &= topo_nvlink_rate_by_sm((int)attr_long(c->gpus[i].sub, "sm", 0)) > 0;
  for (int i = 0; i < c->num_gpus; i++) {
    double rate = known ? topo_nvlink_rate_by_sm((int)attr_long(c->gpus[i].sub, "sm", 0)) : 1;
    for (xmlNodePtr x = c->gpus[i].sub ? c->gpus[i].sub->children : NULL; x; x = x->next) {
      if (!is(x, "nvlink")) continue;
      char tclass[32], target[64];
      double bw = (double)attr_long(x, "count", 1) * rate;
      attr(x, "tclass", tclass, sizeof tclass);
      if (!strncmp(tclass, "0x03", 4)) {
        int j = gpu_by_bus(c, attr(x, "target", target, sizeof target));
        if (j == i)
          self = 1;
        else if (j < 0)
          foreign = 1;
        else
          topo_direct_link(t, &l, i, j, bw);
        any |= j >= 0 && j != i;
      } else if (strcmp(tclass, "0x068001")) {
        l.sw_bw[i] += bw; /* NVSwitch, or a class NCCL does not know: its NVS node too */
        any = 1;
        /* A dump fused over several hosts (multi-node NVLink) has one NVS node for all of them. */
        if (c->num_hosts > 1) snprintf(t->gpus[i].clique, sizeof t->gpus[i].clique, "nccl-nvs");
      }
    }
  }
  if (any) snprintf(t->nvlink_unit, sizeof t->nvlink_unit, "%s", known ? "MB/s" : "links");
  if (self) topo_note(t, "nvlink elements that target their own GPU are ignored");
  if (foreign) topo_note(t, "nvlink elements that target GPUs missing from this host are ignored");
  if (c->num_gpus && !c->has_gpu_elems)
    topo_note(t, "NCCL input file (no <gpu> elements): NCCL detects NVLink and NIC names at run time");
  if (c->has_c2c) topo_note(t, "c2c (GPU-CPU) links are not read");
  l.known = c->has_gpu_elems; /* a dump's <gpu> lists every NVLink NVML reported */
  topo_domains(t, &l, any ? "nccl" : "none");
}

/* The host's cpu elements: NUMA nodes, and the devices below them. */
static void read_cpus(nx_ctx *c, xmlNodePtr sys) {
  hsr_topo *t = c->t;
  hwloc_bitmap_t all = hwloc_bitmap_alloc();
  for (xmlNodePtr x = sys->children; x; x = x->next) {
    char key[64], aff[HSR_TOPO_CPUSET_MAX];
    if (!is(x, "cpu") || strcmp(host_of(x, key, sizeof key), c->host_key[c->host])) continue;
    walk(c, x, x);
    if (t->num_numa == HSR_TOPO_MAX_NUMA) continue;
    t->numa_os[t->num_numa] = (int32_t)attr_long(x, "numaid", -1);
    affinity_list(attr(x, "affinity", aff, sizeof aff), t->numa_cpuset[t->num_numa], HSR_TOPO_CPUSET_MAX);
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    if (b && all && hwloc_bitmap_list_sscanf(b, t->numa_cpuset[t->num_numa]) == 0) hwloc_bitmap_or(all, all, b);
    hwloc_bitmap_free(b);
    t->num_numa++;
  }
  if (all) hwloc_bitmap_list_snprintf(t->machine_cpuset, sizeof t->machine_cpuset, all);
  hwloc_bitmap_free(all);
}

static hsr_status parse(const char *path, xmlDocPtr *doc) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return hsr_error(HSR_ERR_IO, "NCCL topology '%s' is a directory, not a file", path);
  FILE *f;
  HSR_CHECK(file_fopen_read("NCCL topology", path, &f)); /* a FIFO would hang the parser */
  int empty = fgetc(f) == EOF;
  fclose(f);
  if (empty) return hsr_error(HSR_ERR_IO, "NCCL topology '%s' is empty", path);
  xmlParserCtxtPtr ctx = xmlNewParserCtxt();
  if (!ctx) return hsr_error(HSR_ERR_NOMEM, "NCCL topology: out of memory");
  *doc = xmlCtxtReadFile(ctx, path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  hsr_status st = HSR_OK;
  if (!*doc) {
    const xmlError *e = xmlCtxtGetLastError(ctx);
    char msg[160] = "malformed XML";
    if (e && e->message) snprintf(msg, sizeof msg, "%.*s", (int)strcspn(e->message, "\n"), e->message);
    st = hsr_error(HSR_ERR_IO, "NCCL topology '%s' is not valid XML (line %d: %s)", path, e ? e->line : 0, msg);
  }
  xmlFreeParserCtxt(ctx);
  return st;
}

static hsr_status check_root(const char *path, xmlNodePtr root) {
  if (is(root, "system")) return HSR_OK;
  if (is(root, "topology"))
    return hsr_error(HSR_ERR_IO,
                     "'%s' is an hwloc topology (root <topology>), not an NCCL one (root <system>): "
                     "read it with --xml",
                     path);
  return hsr_error(HSR_ERR_IO, "'%s' is not an NCCL topology: root element <%s>, expected <system>", path,
                   root ? (const char *)root->name : "(none)");
}

static void find_hosts(nx_ctx *c, xmlNodePtr sys) {
  for (xmlNodePtr x = sys->children; x; x = x->next) {
    char key[64];
    if (!is(x, "cpu")) continue;
    host_of(x, key, sizeof key);
    int k = 0;
    while (k < c->num_hosts && strcmp(c->host_key[k], key)) k++;
    if (k == c->num_hosts && k < NX_MAX_HOSTS) snprintf(c->host_key[c->num_hosts++], sizeof c->host_key[0], "%s", key);
  }
}

hsr_status topo_load_nccl(const char *path, int host, hsr_topo **out, int *num_hosts) {
  if (!path || !out) return hsr_error(HSR_ERR_INVALID, "topo_load_nccl: NULL argument");
  *out = NULL;
  xmlDocPtr doc = NULL;
  HSR_CHECK(parse(path, &doc));
  xmlNodePtr sys = xmlDocGetRootElement(doc);
  nx_ctx *c = calloc(1, sizeof *c);
  hsr_status st = c ? check_root(path, sys) : hsr_error(HSR_ERR_NOMEM, "NCCL topology: out of memory");
  if (st == HSR_OK) {
    c->path = path;
    find_hosts(c, sys);
    if (num_hosts) *num_hosts = c->num_hosts;
    if (c->num_hosts == 0)
      st = hsr_error(HSR_ERR_IO, "NCCL topology '%s' has no <cpu> element", path);
    else if (host < 0 || host >= c->num_hosts)
      st = hsr_error(HSR_ERR_INVALID, "NCCL topology '%s' has %d host%s: host %d is not in 0..%d", path, c->num_hosts,
                     c->num_hosts == 1 ? "" : "s", host, c->num_hosts - 1);
  }
  if (st == HSR_OK && !(c->t = calloc(1, sizeof *c->t))) st = hsr_error(HSR_ERR_NOMEM, "NCCL topology: out of memory");
  if (st == HSR_OK) {
    hsr_topo *t = c->t;
    c->host = host;
    snprintf(t->source, sizeof t->source, "nccl-xml");
    topo_file_stem(path, t->host, sizeof t->host);
    if (c->num_hosts > 1) {
      size_t u = strlen(t->host);
      snprintf(t->host + u, sizeof t->host - u, "#%d", host);
    }
    read_cpus(c, sys);
    fill_gpus(c);
    fill_nvlinks(c);
    topo_finish(t);
    *out = t;
  }
  free(c);
  xmlFreeDoc(doc);
  return st;
}
