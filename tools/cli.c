/* Front-end helpers that every command uses (tools/ and bench/): usage
 * errors and failures, with the exit codes of cli.h. */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

int hsr_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hsr %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see 'hsr %s --help')\n", cmd);
  va_end(ap);
  return HSR_EXIT_USAGE;
}

int hsr_cli_fail(const char *cmd, hsr_status st) {
  fprintf(stderr, "hsr %s: %s: %s\n", cmd, hsr_status_str(st), hsr_last_error());
  return st == HSR_ERR_INVALID ? HSR_EXIT_USAGE : HSR_EXIT_FAIL;
}

int hsr_cli_fail_job(const char *cmd, hsr_status st, hsr_boot *b) {
  int code = hsr_cli_fail(cmd, st);
  fflush(stdout);
  if (b) hsr_boot_end_failed_job(b, code, 1.0);
  return code;
}
