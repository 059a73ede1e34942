/* hsr: the command-line front end. Each subcommand lives in its own file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const hsr_cli_command commands[] = {
    {"version", "print the version and the library versions compiled in", hsr_cmd_version},
    {"info", "print rank, size, local rank/size, node and host of every rank", hsr_cmd_info},
    {"topo", "show GPUs, NICs, NUMA nodes and NVLink domains (hwloc, or --xml FILE)", hsr_cmd_topo},
    {"mesh", "plan the R x S device mesh and show its groups", hsr_cmd_mesh},
    {"trace", "summarize a lifecycle trace: exposed communication and overlap per step", hsr_cmd_trace},
    {"bench", "benchmarks: collective bandwidth (coll), copy bandwidth (copy), lifecycle overlap (step)",
     hsr_cmd_bench},
    {"train", "train the example MLP with the sharding engine (loss, step time, collective counts)", hsr_cmd_train},
    {"ckpt", "checkpoints: inspect, verify (every checksum), bench (save/load GB/s beside the disk's)", hsr_cmd_ckpt},
};

static void usage(FILE *f) {
  fprintf(f, "usage: hsr <command> [options]\n\n"
             "hsr is a hybrid-sharding training runtime. Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\nRun 'hsr <command> --help' for a command's options. Multi-rank commands run\n"
             "under a launcher: hsr-run -n 4 -- hsr info\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return HSR_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
    usage(stdout);
    return HSR_EXIT_OK;
  }
  if (!strcmp(name, "--version")) return hsr_cmd_version(1, argv + 1);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(name, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "hsr: unknown command '%s'\n\n", name);
  usage(stderr);
  return HSR_EXIT_USAGE;
}
