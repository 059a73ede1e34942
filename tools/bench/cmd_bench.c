/* hsr bench: the benchmark front end. Each benchmark lives under bench/. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "tools/cli/cli.h"

static const cli_command benches[] = {
    {"all_gather", "all-gather bandwidth per group (nccl-tests' all_gather_perf: table, JSON)", bench_all_gather},
    {"reduce_scatter", "reduce-scatter bandwidth per group (reduce_scatter_perf)", bench_reduce_scatter},
    {"all_reduce", "all-reduce bandwidth per group (all_reduce_perf)", bench_all_reduce},
    {"broadcast", "broadcast bandwidth per group (broadcast_perf)", bench_broadcast},
    {"copy", "single- and multi-thread memory copy bandwidth (the physical reference)", bench_copy},
    {"step", "training-step lifecycle: exposed vs hidden communication, prefetch speed-up", bench_step},
    {"ft", "replica groups' control plane at N groups, simulated against a real coordinator", bench_ft},
    {"coll", "deprecated: 'hsr bench coll --op X' is 'hsr bench X'", bench_coll},
};

static void usage(FILE *f) {
  fprintf(f, "usage: hsr bench <benchmark> [options]\n\nBenchmarks:\n");
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    fprintf(f, "  %-15s %s\n", benches[i].name, benches[i].summary);
  fprintf(f, "\nRun 'hsr bench <benchmark> --help' for its options, e.g.\n"
             "  hsr-run -n 4 -- hsr bench all_gather -b 1M -e 64M -f 4\n"
             "nccl-tests' binary names work too (all_gather_perf, ...).\n");
}

int cmd_bench(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return HSR_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return HSR_EXIT_OK;
  }
  char name[32];
  size_t l = strlen(argv[1]);
  snprintf(name, sizeof name, "%.*s", l > 5 && !strcmp(argv[1] + l - 5, "_perf") ? (int)(l - 5) : (int)l, argv[1]);
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    if (!strcmp(name, benches[i].name)) return benches[i].run(argc - 1, argv + 1);
  return cli_usage_error("bench",
                         "unknown benchmark '%s' (valid: all_gather, reduce_scatter, all_reduce, broadcast, copy, "
                         "step, ft; coll is deprecated)",
                         argv[1]);
}
