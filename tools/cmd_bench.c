/* hsr bench: the benchmark front end. Each benchmark lives under bench/. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const hsr_cli_command benches[] = {
    {"coll", "collective bandwidth per group (nccl-tests table, JSON)", hsr_bench_coll},
    {"copy", "single- and multi-thread memory copy bandwidth (the physical reference)", hsr_bench_copy},
    {"step", "training-step lifecycle: exposed vs hidden communication, prefetch speed-up", hsr_bench_step},
};

static void usage(FILE *f) {
  fprintf(f, "usage: hsr bench <benchmark> [options]\n\nBenchmarks:\n");
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].summary);
  fprintf(f, "\nRun 'hsr bench <benchmark> --help' for its options, e.g.\n"
             "  hsr-run -n 4 -- hsr bench coll --op all_gather -b 1M -e 64M -f 4\n");
}

int hsr_cmd_bench(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return HSR_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return HSR_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
  return hsr_cli_usage_error("bench", "unknown benchmark '%s' (valid: coll, copy, step)", argv[1]);
}
