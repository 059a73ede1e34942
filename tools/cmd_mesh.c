/* hsr mesh: plan the R x S mesh and show it. Offline from a description
 * (--world/--nodes, this host or --xml FILE replicated over the nodes) or
 * under a launcher from the gathered view of the real job. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "launch/boot_internal.h"
#include "common/common_internal.h"

static void cell(const hsr_cluster *c, int r, char *buf, size_t len) {
  int g = cluster_rank_gpu(c, r);
  if (g >= 0)
    snprintf(buf, len, "%d@%d/%d", r, cluster_rank_node(c, r), g);
  else
    snprintf(buf, len, "%d@%d/cpu", r, cluster_rank_node(c, r));
}

static void print_group(const int *g, int n) {
  printf("[");
  for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", g[i]);
  printf("]");
}

static void print_text(const hsr_cluster *c, const hsr_mesh *m) {
  int R = hsr_mesh_replicate(m), S = hsr_mesh_shard(m), K = mesh_partial(m);
  printf("mesh R x S = %d x %d, partial K = %d; world %d on %d node%s, %d NVLink domain%s of %d+ ranks\n", R, S, K,
         mesh_world(m), cluster_num_nodes(c), cluster_num_nodes(c) == 1 ? "" : "s", cluster_num_domains(c),
         cluster_num_domains(c) == 1 ? "" : "s", cluster_domain_size(c));
  printf("cells are rank@node/gpu; rows = replicate index, columns = shard index\n\n");
  int w = 8;
  for (int r = 0; r < mesh_world(m); r++) {
    char b[48];
    cell(c, r, b, sizeof b);
    if ((int)strlen(b) + 1 > w) w = (int)strlen(b) + 1;
  }
  printf("%-7s", "");
  for (int s = 0; s < S; s++) {
    char h[16];
    snprintf(h, sizeof h, "s%d", s);
    printf("|%*s", -w, h);
  }
  printf("|\n");
  for (int rep = 0; rep < R; rep++) {
    printf("r%-6d", rep);
    for (int s = 0; s < S; s++) {
      char b[48];
      cell(c, mesh_rank_at(m, rep, s), b, sizeof b);
      /* '+' marks a shard-group column where the NVLink domain changes. */
      int prev = s ? mesh_rank_at(m, rep, s - 1) : -1;
      int cross = prev >= 0 && cluster_rank_domain(c, prev) != cluster_rank_domain(c, mesh_rank_at(m, rep, s));
      printf("%c%*s", cross ? '+' : '|', -w, b);
    }
    printf("|\n");
  }
  int *g = malloc((size_t)mesh_world(m) * sizeof(int));
  if (!g) return;
  printf("\nshard groups (S=%d, reduce-scatter / all-gather):\n", S);
  for (int rep = 0; rep < R; rep++) {
    mesh_shard_group(m, mesh_rank_at(m, rep, 0), g);
    printf("  r%d: ", rep);
    print_group(g, S);
    printf("\n");
  }
  printf("replicate groups (R=%d, gradient all-reduce):\n", R);
  for (int s = 0; s < S; s++) {
    mesh_replicate_group(m, mesh_rank_at(m, 0, s), g);
    printf("  s%d: ", s);
    print_group(g, R);
    printf("\n");
  }
  printf("partial groups (K=%d, backward re-gather):\n", K);
  for (int rep = 0; rep < R; rep++)
    for (int p = 0; p < S / K; p++) {
      mesh_partial_group(m, mesh_rank_at(m, rep, p * K), g);
      printf("  r%d.p%d: ", rep, p);
      print_group(g, K);
      printf("\n");
    }
  free(g);
}

static cJSON *group_json(const int *g, int n) { return cJSON_CreateIntArray(g, n); }

static hsr_status print_json(const hsr_cluster *c, const hsr_mesh *m) {
  int R = hsr_mesh_replicate(m), S = hsr_mesh_shard(m), K = mesh_partial(m), W = mesh_world(m);
  int *g = malloc((size_t)W * sizeof(int));
  cJSON *o = cJSON_CreateObject();
  if (!g || !o) {
    free(g);
    cJSON_Delete(o);
    return hsr_error(HSR_ERR_NOMEM, "out of memory");
  }
  cJSON_AddNumberToObject(o, "world", W);
  cJSON_AddNumberToObject(o, "replicate", R);
  cJSON_AddNumberToObject(o, "shard", S);
  cJSON_AddNumberToObject(o, "partial", K);
  cJSON_AddNumberToObject(o, "nodes", cluster_num_nodes(c));
  cJSON_AddNumberToObject(o, "domains", cluster_num_domains(c));
  cJSON_AddNumberToObject(o, "domain_size", cluster_domain_size(c));
  cJSON *grid = cJSON_AddArrayToObject(o, "grid");
  for (int rep = 0; rep < R; rep++) {
    cJSON *row = cJSON_CreateArray();
    for (int s = 0; s < S; s++) {
      int r = mesh_rank_at(m, rep, s);
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "rank", r);
      cJSON_AddNumberToObject(x, "node", cluster_rank_node(c, r));
      cJSON_AddNumberToObject(x, "gpu", cluster_rank_gpu(c, r));
      cJSON_AddNumberToObject(x, "domain", cluster_rank_domain(c, r));
      cJSON_AddItemToArray(row, x);
    }
    cJSON_AddItemToArray(grid, row);
  }
  cJSON *sg = cJSON_AddArrayToObject(o, "shard_groups"), *rg = cJSON_AddArrayToObject(o, "replicate_groups"),
        *pg = cJSON_AddArrayToObject(o, "partial_groups");
  for (int rep = 0; rep < R; rep++) {
    mesh_shard_group(m, mesh_rank_at(m, rep, 0), g);
    cJSON_AddItemToArray(sg, group_json(g, S));
    for (int p = 0; p < S / K; p++) {
      mesh_partial_group(m, mesh_rank_at(m, rep, p * K), g);
      cJSON_AddItemToArray(pg, group_json(g, K));
    }
  }
  for (int s = 0; s < S; s++) {
    mesh_replicate_group(m, mesh_rank_at(m, 0, s), g);
    cJSON_AddItemToArray(rg, group_json(g, R));
  }
  char *txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  free(g);
  if (!txt) return hsr_error(HSR_ERR_NOMEM, "out of memory");
  printf("%s\n", txt);
  free(txt);
  return HSR_OK;
}

static hsr_status parse_count(const char *what, const char *s, int auto_ok, int *out) {
  if (auto_ok && !strcmp(s, "auto")) {
    *out = 0;
    return HSR_OK;
  }
  long v;
  hsr_status st = parse_long(what, s, 1, 1 << 20, &v);
  if (st != HSR_OK && auto_ok)
    return hsr_error(HSR_ERR_INVALID, "%s must be a positive integer or 'auto' (got '%s')", what, s);
  *out = (int)v;
  return st;
}

int cmd_mesh(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"json", no_argument, 0, 'j'},
                                       {"xml", required_argument, 0, 'x'},
                                       {"nccl-xml", required_argument, 0, 'N'},
                                       {"nccl-host", required_argument, 0, 'H'},
                                       {"world", required_argument, 0, 'w'},
                                       {"nodes", required_argument, 0, 'n'},
                                       {"shard", required_argument, 0, 's'},
                                       {"replicate", required_argument, 0, 'r'},
                                       {"partial", required_argument, 0, 'k'},
                                       {0, 0, 0, 0}};
  int json = 0, c, world = 0, nodes = 0, host = -1;
  mesh_request req = {0, 0, 0};
  const char *xml = NULL, *nccl = NULL;
  hsr_status st = HSR_OK;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hjx:w:n:s:r:k:", opts, NULL)) != -1) {
    switch (c) {
    case 'h':
      printf("usage: hsr mesh [--world N] [--nodes N] [--shard S|auto] [--replicate R] [--partial K]\n"
             "                [--xml FILE | --nccl-xml FILE [--nccl-host N]] [--json]\n"
             "  Plans the replicate x shard mesh and prints it as a grid (rows = replicate index, columns =\n"
             "  shard index, cells rank@node/gpu; '+' marks where a shard group crosses NVLink domains) with\n"
             "  its shard, replicate and partial groups.\n"
             "  Offline: --world/--nodes describe the job; every node is this host (or FILE, an hwloc XML;\n"
             "  HSR_TOPO_XML does the same; or host N, default 0, of an NCCL topology file) and holds\n"
             "  world/nodes ranks, one per GPU. Default world: one\n"
             "  rank per GPU (per node without GPUs) on --nodes nodes (default 1).\n"
             "  Under a launcher without --world (hsr-run -n 8 --nodes 2 -- hsr mesh) it plans the real job\n"
             "  from the gathered view.\n"
             "  Rules: S divides the world; a shard group stays inside one NVLink domain when S <= domain\n"
             "  size, else S is a multiple of it (whole domains); K divides S. Defaults: S = domain size\n"
             "  (auto), R = world / S, K = the shard group's ranks on one node.\n");
      return HSR_EXIT_OK;
    case 'j': json = 1; break;
    case 'x': xml = optarg; break;
    case 'N': nccl = optarg; break;
    case 'H': {
      long v = 0;
      st = parse_long("--nccl-host", optarg, 0, 1 << 16, &v);
      host = (int)v;
      break;
    }
    case 'w': st = parse_count("--world", optarg, 0, &world); break;
    case 'n': st = parse_count("--nodes", optarg, 0, &nodes); break;
    case 's': st = parse_count("--shard", optarg, 1, &req.shard); break;
    case 'r': st = parse_count("--replicate", optarg, 0, &req.replicate); break;
    case 'k': st = parse_count("--partial", optarg, 0, &req.partial); break;
    default: return cli_usage_error("mesh", "unknown option or missing value '%s'", argv[optind - 1]);
    }
    if (st != HSR_OK) return cli_usage_error("mesh", "%s", hsr_last_error());
  }
  if (optind < argc) return cli_usage_error("mesh", "unexpected argument '%s'", argv[optind]);
  if (xml && nccl) return cli_usage_error("mesh", "give one of --xml (hwloc) and --nccl-xml (NCCL)");
  if ((xml && path_check_read("--xml", xml) != HSR_OK) || (nccl && path_check_read("--nccl-xml", nccl) != HSR_OK))
    return cli_usage_error("mesh", "%s", hsr_last_error());
  if (host >= 0 && !nccl) return cli_usage_error("mesh", "--nccl-host goes with --nccl-xml");

  hsr_topo *t = NULL;
  st = nccl ? topo_load_nccl(nccl, host < 0 ? 0 : host, &t, NULL) : topo_discover(xml, &t);
  if (st != HSR_OK) return cli_fail("mesh", st);
  hsr_boot *b = NULL;
  hsr_cluster *cl = NULL;
  int offline = world > 0 || nodes > 0;
  if (!offline) {
    st = hsr_boot_init(&b);
    if (st == HSR_OK && boot_is_singleton(b))
      offline = 1;
    else if (st == HSR_OK)
      st = cluster_gather(b, t, &cl);
  }
  if (st == HSR_OK && offline) {
    if (!nodes) nodes = 1;
    if (!world) world = nodes * (topo_num_gpus(t) ? topo_num_gpus(t) : 1);
    st = cluster_synthetic(t, nodes, world, &cl);
  }
  hsr_mesh *m = NULL;
  if (st == HSR_OK) st = mesh_plan(cl, &req, &m); /* every rank plans the same mesh */
  if (st == HSR_OK && (!b || hsr_boot_rank(b) == 0)) {
    if (json)
      st = print_json(cl, m);
    else
      print_text(cl, m);
    fflush(stdout);
  }
  mesh_free(m);
  cluster_free(cl);
  topo_free(t);
  if (b) {
    hsr_status fst = hsr_boot_finalize(b);
    if (st == HSR_OK) st = fst;
  }
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("mesh", st);
}
