/* hsr trace summarize FILE: what a lifecycle trace says, per step. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "common/sys.h"
#include "runtime/io/trace_summary.h"

static void trace_usage(FILE *f) {
  fprintf(f, "usage: hsr trace summarize FILE [--json]\n"
             "  Reads a Chrome trace written by 'hsr train --trace FILE' (or any hsr program) and\n"
             "  prints per step: step, compute and communication time (means over ranks), the\n"
             "  exposed communication time (communication not covered by compute), the overlap\n"
             "  ratio, and the all-gathers per unit.\n");
}

int cmd_trace(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "hj", opts, NULL)) != -1) {
    if (c == 'h') {
      trace_usage(stdout);
      return HSR_EXIT_OK;
    }
    if (c == 'j')
      json = 1;
    else
      return cli_usage_error("trace", "unknown option '%s'", argv[optind - 1]);
  }
  if (optind >= argc) return cli_usage_error("trace", "missing action (valid: summarize)");
  if (strcmp(argv[optind], "summarize") != 0)
    return cli_usage_error("trace", "unknown action '%s' (valid: summarize)", argv[optind]);
  if (optind + 1 >= argc) return cli_usage_error("trace", "summarize needs a trace FILE");
  if (optind + 2 < argc) return cli_usage_error("trace", "unexpected argument '%s'", argv[optind + 2]);
  /* a FILE that is not there is bad usage (2); one that is there but is not a trace, a failure (1) */
  if (path_check_read("FILE", argv[optind + 1]) != HSR_OK) return cli_usage_error("trace", "%s", hsr_last_error());
  hsr_status st = trace_summarize(argv[optind + 1], json, stdout);
  return st == HSR_OK ? HSR_EXIT_OK : cli_fail("trace", st);
}
