/* Fuzz target: an `hsr bench -J` file as `hsr tune --bench` reads it
 * (tune_calib_add_json), then the fit. What it fits must be usable: a
 * fit that succeeds with a non-finite or non-positive bandwidth, latency or
 * factor would rank layouts on garbage, so that aborts like a crash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_io.h"
#include "tune/tune.h"

static void must(int ok) {
  if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  tune_calib *c = NULL;
  if (tune_calib_create(&c) != HSR_OK) {
    free(text);
    return 0;
  }
  tune_net net;
  char report[2048];
  if (tune_calib_add_json(c, text, "fuzz.json") == HSR_OK && tune_net_default("host", &net) == HSR_OK &&
      tune_calib_fit(c, &net, report, sizeof report) == HSR_OK) {
    for (int t = 0; t < HSR_TUNE_TIER_COUNT; t++) {
      for (int op = 0; op < HSR_TUNE_OPS; op++) {
        const tune_link *l = &net.link[t][op];
        must(isfinite(l->alpha_us) && l->alpha_us >= 0);
        must(isfinite(l->busbw_gbs) && l->busbw_gbs > 0);
      }
      must(isfinite(net.concurrent[t]) && net.concurrent[t] > 0);
    }
    for (int op = 0; op < HSR_TUNE_OPS; op++) must(isfinite(net.span[op]) && net.span[op] > 0);
    must(memchr(report, 0, sizeof report) != NULL);
  }
  tune_calib_free(c);
  free(text);
  return 0;
}
