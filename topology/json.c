/* JSON views of a node's topology and of the cluster (cJSON). */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "topo_internal.h"
#include "topology/topology_internal.h"

static cJSON *int_array(const int32_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

static cJSON *topo_obj(const hsr_topo *t) {
  cJSON *o = cJSON_CreateObject();
  char summary[256];
  cJSON_AddStringToObject(o, "host", t->host);
  cJSON_AddStringToObject(o, "source", t->source);
  if (topo_summary(t, summary, sizeof summary) == HSR_OK) cJSON_AddStringToObject(o, "summary", summary);
  cJSON_AddStringToObject(o, "nvlink_source", t->nvlink_source);
  cJSON_AddStringToObject(o, "nvlink_unit", t->nvlink_unit);
  cJSON_AddStringToObject(o, "domain_rule", t->domain_rule);
  if (t->notes[0]) cJSON_AddStringToObject(o, "notes", t->notes);
  cJSON *numa = cJSON_AddArrayToObject(o, "numa");
  for (int i = 0; i < t->num_numa; i++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddNumberToObject(n, "os_index", t->numa_os[i]);
    cJSON_AddStringToObject(n, "cpuset", t->numa_cpuset[i]);
    cJSON_AddItemToArray(numa, n);
  }
  cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
  for (int g = 0; g < t->num_gpus; g++) {
    const topo_gpu_rec *r = &t->gpus[g];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "index", g);
    cJSON_AddStringToObject(x, "pci", r->pci);
    cJSON_AddNumberToObject(x, "numa", r->numa);
    cJSON_AddItemToObject(x, "numa_nodes", int_array(r->numa_list, r->num_numa));
    cJSON_AddStringToObject(x, "cpuset", r->cpuset);
    if (r->cuda >= 0) cJSON_AddNumberToObject(x, "cuda", r->cuda);
    cJSON_AddNumberToObject(x, "domain", r->domain);
    if (r->clique[0]) cJSON_AddStringToObject(x, "fabric_clique", r->clique);
    cJSON *nics = cJSON_AddArrayToObject(x, "nics");
    for (int j = 0; j < r->num_nics; j++) {
      cJSON *nic = cJSON_CreateObject();
      cJSON_AddStringToObject(nic, "name", r->nics[j].name);
      if (r->nics[j].pci[0]) cJSON_AddStringToObject(nic, "pci", r->nics[j].pci);
      cJSON_AddStringToObject(nic, "path", topo_path_str((topo_path)r->nics[j].path));
      cJSON_AddItemToArray(nics, nic);
    }
    if (r->nic_pick >= 0) {
      cJSON *pick = cJSON_AddObjectToObject(x, "nic_pick");
      cJSON_AddStringToObject(pick, "name", r->nics[r->nic_pick].name);
      cJSON_AddStringToObject(pick, "path", topo_path_str((topo_path)r->nics[r->nic_pick].path));
    }
    cJSON *links = cJSON_AddArrayToObject(x, "nvlink_bw");
    for (int h = 0; h < t->num_gpus; h++) cJSON_AddItemToArray(links, cJSON_CreateNumber(t->nvlink[g][h]));
    cJSON_AddItemToArray(gpus, x);
  }
  cJSON *doms = cJSON_AddArrayToObject(o, "nvlink_domains");
  for (int d = 0; d < t->num_domains && t->num_gpus > 0; d++) {
    int members[HSR_TOPO_MAX_GPUS], n = 0;
    for (int g = 0; g < t->num_gpus; g++)
      if (t->gpus[g].domain == d) members[n++] = g;
    cJSON_AddItemToArray(doms, int_array(members, n));
  }
  return o;
}

static hsr_status print(cJSON *root, char **out) {
  if (!root) return hsr_error(HSR_ERR_NOMEM, "JSON: out of memory");
  *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return *out ? HSR_OK : hsr_error(HSR_ERR_NOMEM, "JSON: out of memory");
}

hsr_status topo_json(const hsr_topo *t, char **out) {
  if (!t || !out) return hsr_error(HSR_ERR_INVALID, "topo_json: NULL argument");
  return print(topo_obj(t), out);
}

hsr_status cluster_json(const hsr_cluster *c, char **out) {
  if (!c || !out) return hsr_error(HSR_ERR_INVALID, "cluster_json: NULL argument");
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "world", c->world);
  cJSON_AddNumberToObject(root, "num_domains", c->num_domains);
  cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
  for (int n = 0; n < c->num_nodes; n++) {
    if (c->nodes) {
      cJSON_AddItemToArray(nodes, topo_obj(&c->nodes[n]));
    } else {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "index", n);
      cJSON_AddItemToArray(nodes, x);
    }
  }
  cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
  for (int r = 0; r < c->world; r++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "rank", r);
    cJSON_AddNumberToObject(x, "node", c->rank_node[r]);
    cJSON_AddNumberToObject(x, "gpu", c->rank_gpu[r]);
    cJSON_AddNumberToObject(x, "domain", c->rank_domain[r]);
    cJSON_AddItemToArray(ranks, x);
  }
  return print(root, out);
}
