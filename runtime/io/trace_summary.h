/* hsr lifecycle trace: the file rt_trace_write writes (spans recorded
 * per rank, one Chrome trace-event JSON file that loads in Perfetto /
 * chrome://tracing: pid = rank, one lane (tid) per compute stream or
 * communicator), and its per-step summary.
 *
 * Conventions that `hsr trace summarize` relies on:
 *  - kind STEP: one span per training step on lane "step" (args.step = n);
 *  - kind COMPUTE: work of the caller (forward/backward per unit, optimizer);
 *  - kind COMM: a collective, from when the transport started it to when it
 *    finished (req_times), on the lane of its communicator, named
 *    "all_gather", "reduce_scatter", "all_reduce", ...;
 *  - kind RUNTIME: the runtime's own work on lane "runtime", recorded in
 *    program order: "gather_issue" (a unit's gather posted: where prefetch
 *    decided it), "reshard" (after forward; group shard: nothing kept, group
 *    partial: a 1/K slice kept), "release" (a full unit returned after its
 *    backward), "local_copy" (a one-rank group's gather).
 */
#ifndef HSR_TRACE_H
#define HSR_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "hsr/common.h"
#include "runtime/runtime_internal.h"
#include "collectives/comm_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-step figures derived from a trace file. */
typedef struct trace_step_summary {
  int64_t step;
  int ranks;
  double step_ms;           /* mean over ranks of the step span */
  double compute_ms;        /* mean over ranks: union of COMPUTE spans in the step */
  double comm_ms;           /* mean over ranks: union of COMM spans in the step */
  double exposed_ms;        /* mean over ranks: COMM time not covered by COMPUTE */
  double overlap;           /* 1 - exposed/comm (1 when there is no communication) */
  long all_gathers;         /* all_gather spans in the step, summed over ranks / ranks */
  double gather_ms;         /* mean over ranks: union of all_gather spans */
  double gather_exposed_ms; /* mean over ranks: all_gather time not covered by COMPUTE */
  /* mean over ranks: union of the COMM spans of each group kind (the
   * span's "group" argument: shard, replicate, partial) */
  double group_busy_ms[3];
} trace_step_summary;

/* Reads a trace written by rt_trace_write and prints per-step figures and
 * all-gathers per unit (table, or JSON when json != 0) to f. */
hsr_status trace_summarize(const char *path, int json, FILE *f);
/* The same figures as data: *out is malloc'd (caller frees), *n steps. */
hsr_status trace_steps(const char *path, trace_step_summary **out, int *n);

#ifdef __cplusplus
}
#endif
#endif
