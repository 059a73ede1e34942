/* hsr version: what this build is and what it was compiled against. */
#include <getopt.h>
#include <hwloc.h>
#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "tools/cli/cli.h"
#include "hsr/config.h"
#include "hsr/git.h"
#if HSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

int cmd_version(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
    if (c == 'h') {
      printf("usage: hsr version [--json]\n  Prints hsr's version, git hash and the CUDA, NCCL, UCX, PMIx and hwloc\n"
             "  versions this build was compiled against.\n");
      return HSR_EXIT_OK;
    }
    if (c == 'j')
      json = 1;
    else
      return cli_usage_error("version", "unknown option '%s'", argv[optind - 1]);
  }
  if (optind < argc) return cli_usage_error("version", "unexpected argument '%s'", argv[optind]);

  char cuda[32] = "none", nccl[32] = "none";
#if HSR_HAVE_CUDA
  snprintf(cuda, sizeof cuda, "%d.%d", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  snprintf(nccl, sizeof nccl, "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
  char ucx[32], pmix[32], hwloc[32];
  snprintf(ucx, sizeof ucx, "%d.%d", UCP_API_MAJOR, UCP_API_MINOR);
  snprintf(pmix, sizeof pmix, "%ld.%ld.%ld", (long)PMIX_VERSION_MAJOR, (long)PMIX_VERSION_MINOR,
           (long)PMIX_VERSION_RELEASE);
  snprintf(hwloc, sizeof hwloc, "%u.%u.%u", HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff,
           HWLOC_API_VERSION & 0xff);
  if (json) {
    printf("{\"version\":\"%s\",\"git\":\"%s\",\"cuda\":\"%s\",\"nccl\":\"%s\",\"ucx\":\"%s\",\"pmix\":\"%s\","
           "\"hwloc_api\":\"%s\"}\n",
           HSR_VERSION_STRING, HSR_GIT_HASH, cuda, nccl, ucx, pmix, hwloc);
  } else {
    printf("hsr %s (git %s)\n", HSR_VERSION_STRING, HSR_GIT_HASH);
    printf("  CUDA   %s\n  NCCL   %s\n  UCX    %s (UCP API)\n  PMIx   %s\n  hwloc  %s (API)\n", cuda, nccl, ucx, pmix,
           hwloc);
  }
  return HSR_EXIT_OK;
}
