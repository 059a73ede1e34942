/* hsr train's end-of-run report: memory ledger beside the predicted one,
 * engine timing, wrap-granularity diagnostic; table and JSON. */
#ifndef HSR_TOOLS_TRAIN_REPORT_H
#define HSR_TOOLS_TRAIN_REPORT_H

#include <stdio.h>

#include "hsr/runtime.h"
#include "mlp.h"

typedef struct train_measured {
  int steps;               /* steps measured (the first, which records the order, excluded when possible) */
  double step_ms;          /* mean wall time of those steps */
  double gathers_per_step; /* mean all-gathers per step over all groups (counted) */
} train_measured;

/* Every rank computes; rank 0 prints to out and writes json_path (may be
 * NULL). *warned: the wrap diagnostic fired. */
hsr_status train_report(hsr_rt *rt, const mlp_cfg *model, const hsr_rt_config *cfg, const train_measured *m, FILE *json,
                        FILE *out, int *warned);

#endif
