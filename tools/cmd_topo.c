/* hsr topo: what hsr sees of the hardware. Offline (one host, or --xml FILE)
 * or under a launcher (every node, from the gathered view). Also the cpuset
 * helper that hsr-bind uses (--bind-cpuset), which never joins the job. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hsr/topology.h"

static void print_node(const hsr_topo *t, int idx) {
  int ng = hsr_topo_num_gpus(t), nd = hsr_topo_num_domains(t);
  printf("node %d: %s  (%d NUMA node%s, %d GPU%s, %d NVLink domain%s%s%s)\n", idx, hsr_topo_host(t),
         hsr_topo_num_numa(t), hsr_topo_num_numa(t) == 1 ? "" : "s", ng, ng == 1 ? "" : "s", nd, nd == 1 ? "" : "s",
         ng ? ", NVLink from " : "", ng ? hsr_topo_nvlink_source(t) : "");
  for (int i = 0; i < hsr_topo_num_numa(t); i++)
    printf("  NUMA %d: cpus %s\n", hsr_topo_numa_os(t, i), hsr_topo_numa_cpuset(t, i));
  if (ng == 0) {
    printf("  no NVIDIA GPUs: the host is one shared-memory domain\n");
    return;
  }
  printf("  %-4s %-13s %-5s %-5s %-14s %-6s %s\n", "gpu", "pci", "cuda", "numa", "cpus", "domain",
         "nics (closest first)");
  for (int g = 0; g < ng; g++) {
    char cuda[16] = "-";
    if (hsr_topo_gpu_cuda(t, g) >= 0) snprintf(cuda, sizeof cuda, "%d", hsr_topo_gpu_cuda(t, g));
    printf("  %-4d %-13s %-5s %-5d %-14s %-6d", g, hsr_topo_gpu_pci(t, g), cuda, hsr_topo_gpu_numa(t, g),
           hsr_topo_gpu_cpuset(t, g), hsr_topo_gpu_domain(t, g));
    for (int j = 0; j < hsr_topo_gpu_num_nics(t, g); j++) {
      const char *name;
      hsr_topo_path p;
      hsr_topo_gpu_nic(t, g, j, &name, &p);
      printf(" %s(%s)", name, hsr_topo_path_str(p));
    }
    if (hsr_topo_gpu_clique(t, g)[0]) printf("  fabric clique %s", hsr_topo_gpu_clique(t, g));
    printf("\n");
  }
  if (strcmp(hsr_topo_nvlink_source(t), "none") && strcmp(hsr_topo_nvlink_source(t), "fabric")) {
    printf("  NVLink bandwidth (%s units; through NVSwitch counts the narrower port):\n       ",
           !strcmp(hsr_topo_nvlink_source(t), "hwloc") ? "MB/s" : "links");
    for (int h = 0; h < ng; h++) printf(" %8d", h);
    printf("\n");
    for (int g = 0; g < ng; g++) {
      printf("    %-3d", g);
      for (int h = 0; h < ng; h++) printf(" %8.0f", hsr_topo_nvlink_bw(t, g, h));
      printf("\n");
    }
  }
  printf("  NVLink domains:");
  for (int d = 0; d < nd; d++) {
    printf(" [");
    for (int g = 0, first = 1; g < ng; g++)
      if (hsr_topo_gpu_domain(t, g) == d) {
        printf(first ? "%d" : " %d", g);
        first = 0;
      }
    printf("]");
  }
  printf("\n");
}

/* Local rank and size from the launcher's environment (hsr-bind runs before
 * the program joins the job, so PMIx is not available to ask). */
static int env_int(const char *const *names, int *out) {
  for (int i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    long x;
    if (v && *v && hsr_parse_long(names[i], v, 0, 1 << 20, &x) == HSR_OK) {
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
    hsr_status st = hsr_parse_long("--bind-cpuset", lr_s, 0, 1 << 20, &lr);
    if (st != HSR_OK) return hsr_cli_fail("topo", st);
  } else if (env_int(lr_env, &v)) {
    lr = v;
  } else {
    return hsr_cli_usage_error("topo", "--bind-cpuset env: no local rank in the environment "
                                       "(OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, PMIX_LOCAL_RANK)");
  }
  if (ls_s) {
    hsr_status st = hsr_parse_long("--local-size", ls_s, 1, 1 << 20, &ls);
    if (st != HSR_OK) return hsr_cli_fail("topo", st);
  } else if (env_int(ls_env, &v) && v >= 1) {
    ls = v;
  } else {
    ls = lr + 1;
  }
  if (lr >= ls) return hsr_cli_usage_error("topo", "local rank %ld must be below the local size %ld", lr, ls);
  hsr_topo *t;
  hsr_status st = hsr_topo_discover(xml, &t);
  if (st != HSR_OK) return hsr_cli_fail("topo", st);
  char set[HSR_TOPO_CPUSET_MAX];
  st = hsr_topo_bind_cpuset(t, (int)lr, (int)ls, set, sizeof set);
  hsr_topo_free(t);
  if (st != HSR_OK) return hsr_cli_fail("topo", st);
  printf("%s\n", set);
  return HSR_EXIT_OK;
}

int hsr_cmd_topo(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                       {"json", no_argument, 0, 'j'},
                                       {"xml", required_argument, 0, 'x'},
                                       {"bind-cpuset", required_argument, 0, 'b'},
                                       {"local-size", required_argument, 0, 'l'},
                                       {0, 0, 0, 0}};
  int json = 0, c;
  const char *xml = NULL, *bind = NULL, *local_size = NULL;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hjx:", opts, NULL)) != -1) {
    switch (c) {
    case 'h':
      printf("usage: hsr topo [--xml FILE] [--json]\n"
             "       hsr topo [--xml FILE] --bind-cpuset LOCAL_RANK|env [--local-size N]\n"
             "  Prints per node the NVIDIA GPUs (PCI bus id, CUDA ordinal, NUMA node, cpus), their NICs\n"
             "  closest first with the PCI path class (PIX same PCIe switch, PXB several bridges, PHB same\n"
             "  host bridge or CPU, SYS across CPUs), the NVLink bandwidth matrix and the NVLink domains.\n"
             "  Alone it describes this host (or FILE, an hwloc XML topology; HSR_TOPO_XML does the same);\n"
             "  under a launcher (hsr-run -n 8 --nodes 2 -- hsr topo) rank 0 prints every node.\n"
             "  --bind-cpuset prints the cpu list recommended for a local rank (its GPU's NUMA node; without\n"
             "  GPUs, local ranks spread over NUMA nodes) and exits without joining the job; 'env' reads the\n"
             "  local rank from OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID / PMIX_LOCAL_RANK.\n");
      return HSR_EXIT_OK;
    case 'j': json = 1; break;
    case 'x': xml = optarg; break;
    case 'b': bind = optarg; break;
    case 'l': local_size = optarg; break;
    default: return hsr_cli_usage_error("topo", "unknown option or missing value '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) return hsr_cli_usage_error("topo", "unexpected argument '%s'", argv[optind]);
  if (local_size && !bind) return hsr_cli_usage_error("topo", "--local-size goes with --bind-cpuset");
  if (bind) return bind_cpuset(xml, bind, local_size);

  hsr_topo *t = NULL;
  hsr_status st = hsr_topo_discover(xml, &t);
  if (st != HSR_OK) return hsr_cli_fail("topo", st);
  hsr_boot *b = NULL;
  st = hsr_boot_init(&b);
  if (st != HSR_OK) {
    hsr_topo_free(t);
    return hsr_cli_fail("topo", st);
  }
  hsr_cluster *cl = NULL;
  if (!hsr_boot_is_singleton(b)) st = hsr_cluster_gather(b, t, &cl);
  if (st == HSR_OK && hsr_boot_rank(b) == 0) {
    char *s = NULL;
    if (json) {
      if (cl) {
        st = hsr_cluster_json(cl, &s);
        if (st == HSR_OK) printf("%s\n", s);
      } else {
        st = hsr_topo_json(t, &s);
        if (st == HSR_OK) printf("{\"nodes\":[%s]}\n", s);
      }
      free(s);
    } else if (cl) {
      for (int n = 0; n < hsr_cluster_num_nodes(cl); n++) print_node(hsr_cluster_node_topo(cl, n), n);
    } else {
      print_node(t, 0);
    }
    fflush(stdout);
  }
  if (st == HSR_OK && cl) st = hsr_boot_barrier(b);
  hsr_cluster_free(cl);
  hsr_topo_free(t);
  hsr_status fst = hsr_boot_finalize(b);
  if (st == HSR_OK) st = fst;
  return st == HSR_OK ? HSR_EXIT_OK : hsr_cli_fail("topo", st);
}
