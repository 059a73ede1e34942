/* Wrap-granularity diagnostic: units that are too small or too many make
 * every step pay collective launch latency many times over (the classic
 * "one unit per linear layer instead of per block" mistake). */
#include <stdio.h>
#include <string.h>

#include "hsr/tune_ledger.h"
#include "tune/tune_ledger_internal.h"

static void fmt_bytes(char *b, size_t n, double v) {
  if (v >= 1 << 20)
    snprintf(b, n, "%.2f MiB", v / (1 << 20));
  else if (v >= 1 << 10)
    snprintf(b, n, "%.1f KiB", v / (1 << 10));
  else
    snprintf(b, n, "%.0f B", v);
}

hsr_status tune_wrap_check(const wrap_input *in, wrap_report *out) {
  if (!in || !out) return hsr_error(HSR_ERR_INVALID, "tune_wrap_check: NULL argument");
  memset(out, 0, sizeof *out);
  if (in->repeating_blocks < 1 || in->gathers_per_unit < 1 || in->gathers_per_step <= 0) return HSR_OK;
  int inner = in->units - in->root_units;
  out->units_per_block = (double)inner / in->repeating_blocks;
  /* gathers of the root units are not part of the repeating structure */
  double g = in->gathers_per_step - in->root_gathers_per_step;
  if (g < 0) g = 0;
  out->gathers_per_block = g / in->repeating_blocks;
  size_t o = 0;
  if (out->gathers_per_block > 1.5 * in->gathers_per_unit) {
    out->too_many_gathers = 1;
    o += (size_t)snprintf(out->message + o, sizeof out->message - o,
                          "wrap granularity: %.1f all-gathers per step for %d repeating blocks = %.1f per block, "
                          "where one unit per block needs %d (%.1f units per block). Each extra unit pays the "
                          "collective's launch latency again. Wrap one unit per repeating block (e.g. per "
                          "transformer layer, not per linear layer).",
                          in->gathers_per_step, in->repeating_blocks, out->gathers_per_block, in->gathers_per_unit,
                          out->units_per_block);
  }
  if (in->min_unit_bytes > 0 && in->mean_gather_bytes > 0 && in->mean_gather_bytes < in->min_unit_bytes) {
    out->latency_bound = 1;
    char a[32], b[32];
    fmt_bytes(a, sizeof a, in->mean_gather_bytes);
    fmt_bytes(b, sizeof b, in->min_unit_bytes);
    double gbs = in->mean_gather_us > 0 ? in->mean_gather_bytes / (in->mean_gather_us * 1e3) : 0;
    o += (size_t)snprintf(out->message + o, sizeof out->message - o,
                          "%sunits are small: the mean all-gather moves %s (%.1f us, %.2f GB/s), below %s "
                          "(HSR_WRAP_MIN_BYTES), so each gather is latency-bound. Group more parameters per unit "
                          "(several blocks per unit, or fewer, larger units).",
                          o ? "\n" : "", a, in->mean_gather_us, gbs, b);
  }
  return HSR_OK;
}
