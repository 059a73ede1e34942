/* Fuzz target: a trace JSON as `hsr trace summarize` reads it (table and
 * JSON output) and trace_steps. */
#include <stdlib.h>

#include "fuzz_io.h"
#include "runtime/io/trace_summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) return 0;
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  if (!devnull) return 0;
  trace_summarize(path, 0, devnull);
  trace_summarize(path, 1, devnull);
  trace_step_summary *st = NULL;
  int n = 0;
  if (trace_steps(path, &st, &n) == HSR_OK) free(st);
  return 0;
}
