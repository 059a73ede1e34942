/* Two readings of one node side by side (normally hwloc's and NCCL's dump):
 * GPUs matched by PCI bus id, NICs by bus id (else by name). Differences are
 * what would change a mesh or a NIC choice: GPUs one reading misses, NVLink
 * domains, the NIC picked per GPU, and GPU-NIC path classes. hwloc's NODE
 * equals NCCL's PHB (NCCL 2.6+ has no NODE) and is listed as equivalent, not
 * as a difference. NICs only one reading lists are informational: NCCL lists
 * the devices of its network plugin only (no Ethernet ports beside IB). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"
#include "topology/topology_internal.h"

static int gpu_of(const hsr_topo *t, const char *pci) {
  for (int g = 0; g < t->num_gpus; g++)
    if (!strcmp(t->gpus[g].pci, pci)) return g;
  return -1;
}

static const topo_nic_rec *nic_in(const topo_gpu_rec *g, const topo_nic_rec *n) {
  for (int j = 0; j < g->num_nics; j++)
    if (topo_same_nic(&g->nics[j], n)) return &g->nics[j];
  return NULL;
}

static cJSON *diff(cJSON *list, const char *what, const char *gpu, const char *nic) {
  cJSON *d = cJSON_CreateObject();
  cJSON_AddStringToObject(d, "what", what);
  if (gpu) cJSON_AddStringToObject(d, "gpu", gpu);
  if (nic) cJSON_AddStringToObject(d, "nic", nic);
  cJSON_AddItemToArray(list, d);
  return d;
}

static void nic_str(const topo_nic_rec *n, char *buf, size_t len) {
  if (n)
    snprintf(buf, len, "%s %s", n->name, topo_path_str((topo_path)n->path));
  else
    snprintf(buf, len, "none");
}

/* Domains of the GPUs both readings see, as lists of bus ids. */
static cJSON *domains(const hsr_topo *t, const hsr_topo *other) {
  cJSON *out = cJSON_CreateArray();
  for (int d = 0; d < t->num_domains; d++) {
    cJSON *dom = cJSON_CreateArray();
    for (int g = 0; g < t->num_gpus; g++)
      if (t->gpus[g].domain == d && gpu_of(other, t->gpus[g].pci) >= 0)
        cJSON_AddItemToArray(dom, cJSON_CreateString(t->gpus[g].pci));
    if (cJSON_GetArraySize(dom))
      cJSON_AddItemToArray(out, dom);
    else
      cJSON_Delete(dom);
  }
  return out;
}

static int same_partition(const hsr_topo *a, const hsr_topo *b) {
  for (int g = 0; g < a->num_gpus; g++)
    for (int h = 0; h < a->num_gpus; h++) {
      int x = gpu_of(b, a->gpus[g].pci), y = gpu_of(b, a->gpus[h].pci);
      if (x < 0 || y < 0) continue;
      if ((a->gpus[g].domain == a->gpus[h].domain) != (b->gpus[x].domain == b->gpus[y].domain)) return 0;
    }
  return 1;
}

static void only_in(cJSON *o, const char *key, const hsr_topo *t, const hsr_topo *other, cJSON *diffs) {
  cJSON *l = cJSON_AddArrayToObject(o, key);
  for (int g = 0; g < t->num_gpus; g++)
    if (gpu_of(other, t->gpus[g].pci) < 0) {
      cJSON_AddItemToArray(l, cJSON_CreateString(t->gpus[g].pci));
      diff(diffs, key, t->gpus[g].pci, NULL);
    }
}

static void nics_only_in(cJSON *o, const char *key, const hsr_topo *t, const hsr_topo *other) {
  cJSON *l = cJSON_AddArrayToObject(o, key);
  for (int g = 0; g < t->num_gpus; g++) {
    int h = gpu_of(other, t->gpus[g].pci);
    if (h < 0) continue;
    for (int j = 0; j < t->gpus[g].num_nics; j++) {
      const topo_nic_rec *n = &t->gpus[g].nics[j];
      int listed = 0;
      for (int k = 0; k < cJSON_GetArraySize(l); k++) listed |= !strcmp(cJSON_GetArrayItem(l, k)->valuestring, n->name);
      if (!listed && !nic_in(&other->gpus[h], n)) cJSON_AddItemToArray(l, cJSON_CreateString(n->name));
    }
  }
}

/* Per GPU both see: the picked NIC, then each NIC's class. */
static void per_gpu(const hsr_topo *a, const hsr_topo *b, cJSON *diffs, cJSON *equiv) {
  char va[64], vb[64];
  for (int g = 0; g < a->num_gpus; g++) {
    const topo_gpu_rec *ga = &a->gpus[g];
    int h = gpu_of(b, ga->pci);
    if (h < 0) continue;
    const topo_gpu_rec *gb = &b->gpus[h];
    const topo_nic_rec *pa = ga->nic_pick >= 0 ? &ga->nics[ga->nic_pick] : NULL;
    const topo_nic_rec *pb = gb->nic_pick >= 0 ? &gb->nics[gb->nic_pick] : NULL;
    int same = (!pa && !pb) || (pa && pb && topo_same_nic(pa, pb) &&
                                topo_path_nccl((topo_path)pa->path) == (topo_path)pb->path);
    if (!same) {
      cJSON *d = diff(diffs, "nic_pick", ga->pci, NULL);
      nic_str(pa, va, sizeof va);
      nic_str(pb, vb, sizeof vb);
      cJSON_AddStringToObject(d, "a", va);
      cJSON_AddStringToObject(d, "b", vb);
    }
    for (int j = 0; j < ga->num_nics; j++) {
      const topo_nic_rec *na = &ga->nics[j], *nb = nic_in(gb, na);
      if (!nb || na->path == nb->path) continue;
      int eq = topo_path_nccl((topo_path)na->path) == (topo_path)nb->path;
      cJSON *d = diff(eq ? equiv : diffs, "path_class", ga->pci, na->name);
      cJSON_AddStringToObject(d, "a", topo_path_str((topo_path)na->path));
      cJSON_AddStringToObject(d, "b", topo_path_str((topo_path)nb->path));
    }
  }
}

static cJSON *side(const hsr_topo *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "host", t->host);
  cJSON_AddStringToObject(o, "source", t->source);
  cJSON_AddStringToObject(o, "domain_rule", t->domain_rule);
  cJSON_AddNumberToObject(o, "gpus", t->num_gpus);
  return o;
}

hsr_status topo_compare(const hsr_topo *a, const hsr_topo *b, char **json, int *count) {
  if (!a || !b || !json) return hsr_error(HSR_ERR_INVALID, "topo_compare: NULL argument");
  *json = NULL;
  cJSON *o = cJSON_CreateObject();
  if (!o) return hsr_error(HSR_ERR_NOMEM, "compare: out of memory");
  cJSON_AddItemToObject(o, "a", side(a));
  cJSON_AddItemToObject(o, "b", side(b));
  cJSON *diffs = cJSON_CreateArray(), *equiv = cJSON_CreateArray();
  only_in(o, "gpus_only_in_a", a, b, diffs);
  only_in(o, "gpus_only_in_b", b, a, diffs);
  if (!same_partition(a, b)) {
    cJSON *d = diff(diffs, "nvlink_domains", NULL, NULL);
    cJSON_AddItemToObject(d, "a", domains(a, b));
    cJSON_AddItemToObject(d, "b", domains(b, a));
  }
  per_gpu(a, b, diffs, equiv);
  nics_only_in(o, "nics_only_in_a", a, b);
  nics_only_in(o, "nics_only_in_b", b, a);
  int n = cJSON_GetArraySize(diffs);
  cJSON_AddNumberToObject(o, "count", n);
  cJSON_AddItemToObject(o, "differences", diffs);
  cJSON_AddItemToObject(o, "equivalent", equiv);
  *json = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!*json) return hsr_error(HSR_ERR_NOMEM, "compare: out of memory");
  if (count) *count = n;
  return HSR_OK;
}
