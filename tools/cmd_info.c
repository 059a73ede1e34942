/* hsr info: who is who in the job, one line per rank in rank order. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "hsr/boot.h"
#include "launch/boot_internal.h"

typedef struct {
  int32_t rank, size, local_rank, local_size, node, num_nodes;
  char host[HSR_HOSTNAME_MAX];
} info_record;

int cmd_info(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
    if (c == 'h') {
      printf("usage: hsr info [--json]\n"
             "  Under a launcher (hsr-run -n 4 -- hsr info) rank 0 prints one line per rank in rank\n"
             "  order: rank, size, local rank, local size, node index and hostname. HSR_SIM_NODES=N\n"
             "  (hsr-run --nodes N) splits each host into N simulated nodes.\n");
      return HSR_EXIT_OK;
    }
    if (c == 'j')
      json = 1;
    else
      return cli_usage_error("info", "unknown option '%s'", argv[optind - 1]);
  }
  if (optind < argc) return cli_usage_error("info", "unexpected argument '%s'", argv[optind]);

  hsr_boot *b = NULL;
  hsr_status st = hsr_boot_init(&b);
  if (st != HSR_OK) return cli_fail("info", st);
  int n = hsr_boot_size(b);
  info_record mine, *all = calloc((size_t)n, sizeof *all);
  if (!all) {
    hsr_boot_finalize(b);
    return cli_fail("info", hsr_error(HSR_ERR_NOMEM, "out of memory"));
  }
  memset(&mine, 0, sizeof mine);
  mine.rank = hsr_boot_rank(b);
  mine.size = n;
  mine.local_rank = boot_local_rank(b);
  mine.local_size = boot_local_size(b);
  mine.node = boot_node(b);
  mine.num_nodes = boot_num_nodes(b);
  snprintf(mine.host, sizeof mine.host, "%s", boot_hostname(b));
  st = boot_allgather(b, &mine, sizeof mine, all);
  if (st == HSR_OK && hsr_boot_rank(b) == 0) {
    if (json)
      printf("{\"launcher\":\"%s\",\"size\":%d,\"nodes\":%d,\"ranks\":[", boot_launcher(b), n, boot_num_nodes(b));
    else
      printf("%-6s %-6s %-10s %-10s %-6s %s\n", "rank", "size", "local_rank", "local_size", "node", "host");
    for (int r = 0; r < n; r++) {
      const info_record *x = &all[r];
      if (json)
        printf("%s{\"rank\":%d,\"size\":%d,\"local_rank\":%d,\"local_size\":%d,\"node\":%d,\"host\":\"%s\"}",
               r ? "," : "", x->rank, x->size, x->local_rank, x->local_size, x->node, x->host);
      else
        printf("%-6d %-6d %-10d %-10d %-6d %s\n", x->rank, x->size, x->local_rank, x->local_size, x->node, x->host);
    }
    if (json) printf("]}\n");
    fflush(stdout);
  }
  free(all);
  if (st == HSR_OK) st = boot_barrier(b);
  hsr_status fst = hsr_boot_finalize(b);
  if (st == HSR_OK) st = fst;
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("info", st);
}
