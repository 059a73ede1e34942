/* hsr topo: what hsr sees of the hardware. Offline (one host, --xml FILE, or
 * an NCCL topology file with --nccl-xml) or under a launcher (every node, from
 * the gathered view). --compare-nccl sets hwloc's reading beside NCCL's (a
 * file, or the dump NCCL writes when hsr creates an NCCL world). Also the
 * cpuset helper that hsr-bind uses (--bind-cpuset), which never joins the job. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "hsr/comm.h"
#include "hsr/config.h"
#include "common/env.h"
#include "common/sys.h"
#include "hsr/topology.h"
#include "topology/topology_internal.h"
#include "launch/boot_internal.h"
#include "common/common_internal.h"

static const char *rule_text(const char *rule) {
  if (!strcmp(rule, "nvswitch")) return "every GPU with NVSwitch links is in one domain per node (NCCL's NVS node)";
  if (!strcmp(rule, "nvlink-components")) return "connected components of direct GPU-GPU NVLinks";
  if (!strcmp(rule, "fabric-clique")) return "GPUs with equal fabric clusterUuid/cliqueId, across nodes";
  if (!strcmp(rule, "none")) return "no NVLink: one GPU per domain";
  if (!strcmp(rule, "unknown")) return "the source does not show NVLink: one GPU per domain";
  if (!strcmp(rule, "shared-memory")) return "no GPUs: the host is one shared-memory domain";
  return "NVSwitch GPUs one domain per node, joined with direct-link components and fabric cliques";
}

static void print_gpu(const hsr_topo *t, int g) {
  char cuda[16] = "-", numa[48] = "", pick[48] = "-";
  if (topo_gpu_cuda(t, g) >= 0) snprintf(cuda, sizeof cuda, "%d", topo_gpu_cuda(t, g));
  for (int i = 0, u = 0; i < topo_gpu_num_numa(t, g) && u < (int)sizeof numa; i++)
    u += snprintf(numa + u, sizeof numa - (size_t)u, i ? ",%d" : "%d", topo_gpu_numa_at(t, g, i));
  if (!numa[0]) snprintf(numa, sizeof numa, "%d", topo_gpu_numa(t, g));
  const char *name;
  topo_path p;
  if (topo_gpu_nic_pick(t, g, &name, &p) == HSR_OK) snprintf(pick, sizeof pick, "%s %s", name, topo_path_str(p));
  printf("  %-4d %-13s %-5s %-5s %-14s %-6d %-16s", g, topo_gpu_pci(t, g), cuda, numa, topo_gpu_cpuset(t, g),
         topo_gpu_domain(t, g), pick);
  for (int j = 0; j < topo_gpu_num_nics(t, g); j++) {
    topo_gpu_nic(t, g, j, &name, &p);
    printf(" %s(%s)", name, topo_path_str(p));
  }
  if (topo_gpu_clique(t, g)[0]) printf("  fabric clique %s", topo_gpu_clique(t, g));
  printf("\n");
}

static void print_nvlink(const hsr_topo *t) {
  int ng = topo_num_gpus(t);
  const char *unit = topo_nvlink_unit(t);
  printf("  NVLink bandwidth, GPU row to GPU column (%s%s; through NVSwitches the narrower GPU's total):\n       ",
         !strcmp(unit, "MB/s")    ? "MB/s per direction"
         : !strcmp(unit, "links") ? "NVLink link counts"
                                  : "1 = peer",
         !strcmp(unit, "links") ? ", generation unknown" : "");
  for (int h = 0; h < ng; h++) printf(" %8d", h);
  printf("\n");
  for (int g = 0; g < ng; g++) {
    printf("    %-3d", g);
    for (int h = 0; h < ng; h++) printf(" %8.0f", topo_nvlink_bw(t, g, h));
    printf("\n");
  }
}

static void print_node(const hsr_topo *t, int idx) {
  int ng = topo_num_gpus(t), nd = topo_num_domains(t);
  char summary[256] = "";
  topo_summary(t, summary, sizeof summary);
  printf("node %d: %s  (%s; %d NUMA node%s, %d GPU%s, %d NVLink domain%s%s%s)\n", idx, topo_host(t), topo_source(t),
         topo_num_numa(t), topo_num_numa(t) == 1 ? "" : "s", ng, ng == 1 ? "" : "s", nd, nd == 1 ? "" : "s",
         ng ? ", NVLink from " : "", ng ? topo_nvlink_source(t) : "");
  printf("  summary: %s\n", summary);
  printf("  domain rule: %s (%s)\n", topo_domain_rule(t), rule_text(topo_domain_rule(t)));
  for (int i = 0; i < topo_num_numa(t); i++)
    printf("  NUMA %d: cpus %s\n", topo_numa_os(t, i), topo_numa_cpuset(t, i)[0] ? topo_numa_cpuset(t, i) : "?");
  if (ng > 0) {
    printf("  %-4s %-13s %-5s %-5s %-14s %-6s %-16s %s\n", "gpu", "pci", "cuda", "numa", "cpus", "domain", "nccl nic",
           "nics (closest first)");
    for (int g = 0; g < ng; g++) print_gpu(t, g);
    const char *unit = topo_nvlink_unit(t);
    if (unit[0]) print_nvlink(t);
    printf("  NVLink domains:");
    for (int d = 0; d < nd; d++) {
      printf(" [");
      for (int g = 0, first = 1; g < ng; g++)
        if (topo_gpu_domain(t, g) == d) {
          printf(first ? "%d" : " %d", g);
          first = 0;
        }
      printf("]");
    }
    printf("\n");
  }
  if (topo_notes(t)[0]) printf("  notes: %s\n", topo_notes(t));
}

/* Local rank and size from the launcher's environment (hsr-bind runs before
 * the program joins the job, so PMIx is not available to ask). */
static int env_int(const char *const *names, int *out) {
  for (int i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    long x;
    if (v && *v && parse_long(names[i], v, 0, 1 << 20, &x) == HSR_OK) {
      *out = (int)x;
      return 1;
    }
  }
  return 0;
}

static int bind_cpuset(const char *xml, const char *lr_s, const char *ls_s) {
  static const char *const lr_env[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "PMIX_LOCAL_RANK",
                                       "MPI_LOCALRANKID", NULL};
  static const char *const ls_env[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "PMIX_LOCAL_SIZE",
                                       "MPI_LOCALNRANKS", NULL};
  long lr = -1, ls = -1;
  int v;
  if (lr_s && strcmp(lr_s, "env")) {
    hsr_status st = parse_long("--bind-cpuset", lr_s, 0, 1 << 20, &lr);
    if (st != HSR_OK) return cli_fail("topo", st);
  } else if (env_int(lr_env, &v)) {
    lr = v;
  } else {
    return cli_usage_error("topo", "--bind-cpuset env: no local rank in the environment "
                                   "(OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, PMIX_LOCAL_RANK)");
  }
  if (ls_s) {
    hsr_status st = parse_long("--local-size", ls_s, 1, 1 << 20, &ls);
    if (st != HSR_OK) return cli_fail("topo", st);
  } else if (env_int(ls_env, &v) && v >= 1) {
    ls = v;
  } else {
    ls = lr + 1;
  }
  if (lr >= ls) return cli_usage_error("topo", "local rank %ld must be below the local size %ld", lr, ls);
  hsr_topo *t;
  hsr_status st = topo_discover(xml, &t);
  if (st != HSR_OK) return cli_fail("topo", st);
  char set[HSR_TOPO_CPUSET_MAX];
  st = topo_bind_cpuset(t, (int)lr, (int)ls, set, sizeof set);
  topo_free(t);
  if (st != HSR_OK) return cli_fail("topo", st);
  printf("%s\n", set);
  return HSR_EXIT_OK;
}

/* ---- --compare-nccl ---------------------------------------------------- */

static void print_domains(const cJSON *doms) {
  printf("[");
  for (int d = 0; d < cJSON_GetArraySize(doms); d++) {
    const cJSON *dom = cJSON_GetArrayItem(doms, d);
    printf(d ? " [" : "[");
    for (int i = 0; i < cJSON_GetArraySize(dom); i++) printf(i ? " %s" : "%s", cJSON_GetArrayItem(dom, i)->valuestring);
    printf("]");
  }
  printf("]");
}

static void print_list(const char *label, const cJSON *l, const char *why) {
  if (!cJSON_GetArraySize(l)) return;
  printf("  %s:", label);
  for (int i = 0; i < cJSON_GetArraySize(l); i++) printf(" %s", cJSON_GetArrayItem(l, i)->valuestring);
  printf("%s\n", why);
}

static const char *str_of(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* The comparison report as a table (the JSON is topo_compare's). */
static void print_compare(const char *js, int node) {
  cJSON *o = cJSON_Parse(js);
  if (!o) return;
  const cJSON *a = cJSON_GetObjectItem(o, "a"), *b = cJSON_GetObjectItem(o, "b");
  int n = cJSON_GetObjectItem(o, "count")->valueint;
  printf("node %d: hwloc (%s, %s) vs NCCL (%s, %s): %d difference%s\n", node, str_of(a, "host"), str_of(a, "source"),
         str_of(b, "host"), str_of(b, "source"), n, n == 1 ? "" : "s");
  const cJSON *d;
  cJSON_ArrayForEach(d, cJSON_GetObjectItem(o, "differences")) {
    const char *what = str_of(d, "what");
    if (!strcmp(what, "nvlink_domains")) {
      printf("  NVLink domains: hwloc ");
      print_domains(cJSON_GetObjectItem(d, "a"));
      printf(", NCCL ");
      print_domains(cJSON_GetObjectItem(d, "b"));
      printf("\n");
    } else if (!strcmp(what, "nic_pick")) {
      printf("  GPU %s NIC: hwloc %s, NCCL %s\n", str_of(d, "gpu"), str_of(d, "a"), str_of(d, "b"));
    } else if (!strcmp(what, "path_class")) {
      printf("  GPU %s -> %s: hwloc %s, NCCL %s\n", str_of(d, "gpu"), str_of(d, "nic"), str_of(d, "a"), str_of(d, "b"));
    }
  }
  print_list("GPUs only hwloc sees", cJSON_GetObjectItem(o, "gpus_only_in_a"), "");
  print_list("GPUs only NCCL sees", cJSON_GetObjectItem(o, "gpus_only_in_b"), " (NCCL lists the job's GPUs only)");
  int eq = cJSON_GetArraySize(cJSON_GetObjectItem(o, "equivalent"));
  if (eq)
    printf("  %d GPU-NIC pair%s NODE in hwloc and PHB in NCCL: the same class (NCCL 2.6+ has no NODE)\n", eq,
           eq == 1 ? " is" : "s are");
  print_list("NICs only hwloc lists", cJSON_GetObjectItem(o, "nics_only_in_a"),
             " (NCCL lists its network plugin's devices only)");
  print_list("NICs only NCCL lists", cJSON_GetObjectItem(o, "nics_only_in_b"), "");
  cJSON_Delete(o);
}

/* The host of a multi-host NCCL file that holds most of our GPUs. */
static hsr_status load_nccl_for(const char *path, int host, const hsr_topo *mine, hsr_topo **out) {
  int n = 1;
  HSR_CHECK(topo_load_nccl(path, host < 0 ? 0 : host, out, &n));
  for (int h = 1; host < 0 && h < n; h++) {
    hsr_topo *t;
    HSR_CHECK(topo_load_nccl(path, h, &t, NULL));
    int best = 0, here = 0;
    for (int g = 0; g < topo_num_gpus(mine); g++)
      for (int k = 0; k < topo_num_gpus(t); k++) {
        here += !strcmp(topo_gpu_pci(mine, g), topo_gpu_pci(t, k));
        best += k < topo_num_gpus(*out) && !strcmp(topo_gpu_pci(mine, g), topo_gpu_pci(*out, k));
      }
    if (here > best) {
      topo_free(*out);
      *out = t;
    } else {
      topo_free(t);
    }
  }
  return HSR_OK;
}

#define REPORT_MAX 32768

/* NCCL writes its topology (NCCL_TOPO_DUMP_FILE) while hsr creates an NCCL
 * world; the lowest rank of each node dumps (NCCL_TOPO_DUMP_FILE_RANK), reads
 * it back and compares it with its hwloc reading into `report`. Every rank
 * sets NCCL_TOPO_DUMP_FILE: NCCL's dump pass is an intra-node collective. */
static hsr_status dump_and_compare(hsr_boot *b, const hsr_topo *hw, char *report) {
  int leader = 0, node = boot_node(b), lead = 0;
  while (boot_node_of(b, leader) != node) leader++;
  lead = hsr_boot_rank(b) == leader;
  const char *keep = getenv("HSR_TOPO_DUMP_DIR");
  char dir[512] = "/tmp/hsr-nccl-topo-XXXXXX", path[600] = "/dev/null", rank_s[16];
  hsr_status st = HSR_OK;
  if (lead && keep && *keep)
    snprintf(path, sizeof path, "%s/hsr-nccl-topo-node%d.xml", keep, node);
  else if (lead && mkdtemp(dir))
    snprintf(path, sizeof path, "%s/node%d.xml", dir, node);
  else if (lead)
    st = hsr_error(HSR_ERR_IO, "cannot create a folder for NCCL's topology dump under /tmp");
  snprintf(rank_s, sizeof rank_s, "%d", leader);
  setenv("NCCL_TOPO_DUMP_FILE", path, 1);
  setenv("NCCL_TOPO_DUMP_FILE_RANK", rank_s, 1);
  hsr_comm *c = NULL;
  hsr_status cst = hsr_comm_world(b, HSR_BACKEND_NCCL, &c); /* every rank, also after a local error */
  if (c) hsr_comm_free(c);
  unsetenv("NCCL_TOPO_DUMP_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE_RANK");
  if (st == HSR_OK) st = cst;
  report[0] = '\0';
  hsr_topo *nt = NULL;
  char *js = NULL;
  if (st == HSR_OK && lead) st = load_nccl_for(path, -1, hw, &nt);
  if (st == HSR_OK && lead) st = topo_compare(hw, nt, &js, NULL);
  if (st == HSR_OK && lead && strlen(js) >= REPORT_MAX)
    st = hsr_error(HSR_ERR_INTERNAL, "node %d: the comparison (%zu bytes) exceeds %d bytes", node, strlen(js),
                   REPORT_MAX);
  if (st == HSR_OK && lead) snprintf(report, REPORT_MAX, "%s", js);
  if (lead && !(keep && *keep)) {
    unlink(path);
    rmdir(dir);
  }
  free(js);
  topo_free(nt);
  return st;
}

static int compare_live(hsr_boot *b, const hsr_topo *hw, int json) {
  char *mine = calloc(1, REPORT_MAX), *all = NULL;
  if (!mine) return cli_fail("topo", hsr_error(HSR_ERR_NOMEM, "out of memory"));
  hsr_status st = dump_and_compare(b, hw, mine);
  int ok = st == HSR_OK, all_ok = 0;
  /* Every rank takes part in the gathers, also after a local failure. */
  int size = hsr_boot_size(b);
  int *oks = calloc((size_t)size, sizeof(int));
  all = calloc((size_t)size, REPORT_MAX);
  if (!oks || !all || boot_allgather(b, &ok, sizeof ok, oks) != HSR_OK ||
      boot_allgather(b, mine, REPORT_MAX, all) != HSR_OK) {
    st = st == HSR_OK ? hsr_error(HSR_ERR_NOMEM, "gathering the comparison failed") : st;
  } else {
    all_ok = 1;
    for (int r = 0; r < size; r++) all_ok &= oks[r];
  }
  if (all_ok && hsr_boot_rank(b) == 0) {
    if (json) printf("{\"nodes\":[");
    for (int r = 0, first = 1; r < size; r++) {
      const char *rep = all + (size_t)r * REPORT_MAX;
      if (!rep[0]) continue;
      if (json)
        printf("%s%s", first ? "" : ",", rep);
      else
        print_compare(rep, boot_node_of(b, r));
      first = 0;
    }
    if (json) printf("]}\n");
    fflush(stdout);
  }
  if (st == HSR_OK && !all_ok) st = hsr_error(HSR_ERR_TRANSPORT, "another rank failed to compare (see its error)");
  free(oks);
  free(all);
  free(mine);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("topo", st);
}

/* hwloc's reading (this host or --xml) beside NCCL's (--nccl-xml, else a
 * dump of a fresh NCCL world on this machine). */
static int compare_mode(const char *xml, const char *nccl, int host, int json) {
  hsr_topo *hw = NULL, *nt = NULL;
  hsr_status st = topo_discover(xml, &hw);
  if (st != HSR_OK) return cli_fail("topo", st);
  if (!nccl && topo_num_gpus(hw) == 0) {
    topo_free(hw);
    return cli_usage_error("topo", "--compare-nccl: no NVIDIA GPU on this host, so NCCL has nothing to dump "
                                   "(compare with a saved dump: --nccl-xml FILE)");
  }
  const char *keep = getenv("HSR_TOPO_DUMP_DIR");
  if (!nccl && keep && *keep && access(keep, W_OK | X_OK) != 0) {
    topo_free(hw);
    return cli_usage_error("topo", "HSR_TOPO_DUMP_DIR='%s' is not a writable folder", keep);
  }
  if (!nccl && !HSR_HAVE_NCCL) {
    topo_free(hw);
    return cli_usage_error("topo", "--compare-nccl: hsr was built without NCCL (compare with a saved dump: "
                                   "--nccl-xml FILE)");
  }
  hsr_boot *b = NULL;
  st = hsr_boot_init(&b);
  int rc = HSR_EXIT_OK;
  if (st == HSR_OK && !nccl) {
    rc = compare_live(b, hw, json);
  } else if (st == HSR_OK) {
    char *js = NULL;
    st = load_nccl_for(nccl, host, hw, &nt);
    if (st == HSR_OK) st = topo_compare(hw, nt, &js, NULL);
    if (st == HSR_OK && hsr_boot_rank(b) == 0) {
      if (json)
        printf("{\"nodes\":[%s]}\n", js);
      else
        print_compare(js, 0);
    }
    free(js);
  }
  hsr_status fst = b ? hsr_boot_finalize(b) : HSR_OK;
  if (st == HSR_OK) st = fst;
  topo_free(hw);
  topo_free(nt);
  if (rc != HSR_EXIT_OK) return rc;
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("topo", st);
}

static void usage(void) {
  printf("usage: hsr topo [--xml FILE | --nccl-xml FILE [--nccl-host N]] [--json]\n"
         "       hsr topo --compare-nccl [--xml FILE] [--nccl-xml FILE [--nccl-host N]] [--json]\n"
         "       hsr topo [--xml FILE] --bind-cpuset LOCAL_RANK|env [--local-size N]\n"
         "  Prints per node a summary line, the NVIDIA GPUs (PCI bus id, CUDA ordinal, NUMA nodes, cpus,\n"
         "  NVLink domain), the NIC NCCL would pick for each GPU and all its NICs closest first with\n"
         "  NCCL's path class (PIX same PCIe switch, PXB several bridges, PHB same host bridge, NODE\n"
         "  other host bridge of the same NUMA node (NCCL 2.6+ calls it PHB), SYS across NUMA nodes),\n"
         "  the NVLink bandwidth matrix with its unit, and the domains with the rule that formed them.\n"
         "  Alone it describes this host (or FILE, an hwloc XML topology; HSR_TOPO_XML does the same);\n"
         "  --nccl-xml reads NCCL's own format (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE), host N of it;\n"
         "  under a launcher (hsr-run -n 8 --nodes 2 -- hsr topo) rank 0 prints every node.\n"
         "  --compare-nccl lists where NCCL's reading and hwloc's disagree (NVLink domains, the NIC\n"
         "  per GPU, path classes): against --nccl-xml FILE, or, on GPU nodes under a launcher with one\n"
         "  rank per GPU (hsr-run -n 8 -- hsr topo --compare-nccl), against the topology NCCL dumps\n"
         "  when hsr creates an NCCL world (kept in HSR_TOPO_DUMP_DIR when set).\n"
         "  --bind-cpuset prints the cpu list recommended for a local rank (its GPU's NUMA nodes;\n"
         "  without GPUs, local ranks spread over NUMA nodes) and exits without joining the job; 'env'\n"
         "  reads the local rank from OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID / PMIX_LOCAL_RANK.\n");
}

static int show(const char *xml, const char *nccl, int host, int json) {
  hsr_topo *t = NULL;
  hsr_status st = nccl ? topo_load_nccl(nccl, host, &t, NULL) : topo_discover(xml, &t);
  if (st != HSR_OK) return cli_fail("topo", st);
  hsr_boot *b = NULL;
  st = hsr_boot_init(&b);
  if (st != HSR_OK) {
    topo_free(t);
    return cli_fail("topo", st);
  }
  hsr_cluster *cl = NULL;
  if (!boot_is_singleton(b)) st = cluster_gather(b, t, &cl);
  if (st == HSR_OK && hsr_boot_rank(b) == 0) {
    char *s = NULL;
    if (json) {
      if (cl) {
        st = cluster_json(cl, &s);
        if (st == HSR_OK) printf("%s\n", s);
      } else {
        st = topo_json(t, &s);
        if (st == HSR_OK) printf("{\"nodes\":[%s]}\n", s);
      }
      free(s);
    } else if (cl) {
      for (int n = 0; n < cluster_num_nodes(cl); n++) print_node(cluster_node_topo(cl, n), n);
    } else {
      print_node(t, 0);
    }
    fflush(stdout);
  }
  if (st == HSR_OK && cl) st = boot_barrier(b);
  cluster_free(cl);
  topo_free(t);
  hsr_status fst = hsr_boot_finalize(b);
  if (st == HSR_OK) st = fst;
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("topo", st);
}

int cmd_topo(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"json", no_argument, 0, 'j'},
                                       {"xml", required_argument, 0, 'x'},
                                       {"nccl-xml", required_argument, 0, 'N'},
                                       {"nccl-host", required_argument, 0, 'H'},
                                       {"compare-nccl", no_argument, 0, 'C'},
                                       {"bind-cpuset", required_argument, 0, 'b'},
                                       {"local-size", required_argument, 0, 'l'},
                                       {0, 0, 0, 0}};
  int json = 0, compare = 0, c;
  long host = -1;
  const char *xml = NULL, *nccl = NULL, *bind = NULL, *local_size = NULL;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hjx:", opts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(); return HSR_EXIT_OK;
    case 'j': json = 1; break;
    case 'x': xml = optarg; break;
    case 'N': nccl = optarg; break;
    case 'H':
      if (parse_long("--nccl-host", optarg, 0, 1 << 16, &host) != HSR_OK)
        return cli_usage_error("topo", "%s", hsr_last_error());
      break;
    case 'C': compare = 1; break;
    case 'b': bind = optarg; break;
    case 'l': local_size = optarg; break;
    default: return cli_usage_error("topo", "unknown option or missing value '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return cli_usage_error("topo", "unexpected argument '%s'", argv[optind]);
  if ((xml && path_check_read("--xml", xml) != HSR_OK) || (nccl && path_check_read("--nccl-xml", nccl) != HSR_OK))
    return cli_usage_error("topo", "%s", hsr_last_error());
  if (json && bind) return cli_usage_error("topo", "--json has no effect with --bind-cpuset (it prints a cpu list)");
  if (local_size && !bind) return cli_usage_error("topo", "--local-size goes with --bind-cpuset");
  if (host >= 0 && !nccl) return cli_usage_error("topo", "--nccl-host goes with --nccl-xml");
  if (bind && (nccl || compare))
    return cli_usage_error("topo", "--bind-cpuset reads hwloc (this host or --xml), not --nccl-xml/--compare-nccl");
  if (bind) return bind_cpuset(xml, bind, local_size);
  if (compare && !nccl && (xml || getenv("HSR_TOPO_XML")))
    return cli_usage_error("topo", "--compare-nccl without --nccl-xml compares with the topology NCCL dumps on "
                                   "this machine, so hwloc must read this machine too: drop --xml / HSR_TOPO_XML");
  if (compare) return compare_mode(xml, nccl, (int)host, json);
  if (xml && nccl)
    return cli_usage_error("topo", "--xml (hwloc) and --nccl-xml (NCCL) describe the same thing: give one, or "
                                   "both with --compare-nccl");
  return show(xml, nccl, host < 0 ? 0 : (int)host, json);
}
