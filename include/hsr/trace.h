/* hsr lifecycle trace: spans recorded per rank and written as one Chrome
 * trace-event JSON file (loads in Perfetto / chrome://tracing): pid = rank,
 * one lane (tid) per compute stream or communicator.
 *
 * Conventions that `hsr trace summarize` relies on:
 *  - kind STEP: one span per training step on lane "step" (args.step = n);
 *  - kind COMPUTE: work of the caller (forward/backward per unit, optimizer);
 *  - kind COMM: a collective, from when the transport started it to when it
 *    finished (hsr_req_times), on the lane of its communicator, named
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

#include "hsr/boot.h"
#include "hsr/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_span_kind { HSR_SPAN_STEP = 0, HSR_SPAN_COMPUTE, HSR_SPAN_COMM, HSR_SPAN_RUNTIME } hsr_span_kind;

typedef struct hsr_trace hsr_trace;

typedef struct hsr_trace_span {
  hsr_span_kind kind;
  const char *lane;      /* "compute", "step", "comm shard", ... */
  const char *name;      /* "forward", "all_gather", ... */
  const char *unit;      /* unit name or NULL */
  const char *group;     /* communicator name or NULL */
  uint64_t t0_ns, t1_ns; /* hsr_clock_ns() values */
  uint64_t bytes;
  int64_t step;
} hsr_trace_span;

HSR_API hsr_status hsr_trace_create(int rank, hsr_trace **out);
HSR_API void hsr_trace_free(hsr_trace *t);
/* Records a span (strings are copied). t1 < t0 is HSR_ERR_INVALID. */
HSR_API hsr_status hsr_trace_add(hsr_trace *t, const hsr_trace_span *s);
HSR_API size_t hsr_trace_count(const hsr_trace *t);
/* Collective over `boot`: rank 0 writes every rank's spans to `path`
 * (written to a temporary name, then renamed). boot NULL: this rank alone. */
HSR_API hsr_status hsr_trace_write(hsr_trace *t, hsr_boot *boot, const char *path);

/* Per-step figures derived from a trace file. */
typedef struct hsr_trace_step_summary {
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
} hsr_trace_step_summary;

/* Reads a trace written by hsr_trace_write and prints per-step figures and
 * all-gathers per unit (table, or JSON when json != 0) to f. */
HSR_API hsr_status hsr_trace_summarize(const char *path, int json, FILE *f);
/* The same figures as data: *out is malloc'd (caller frees), *n steps. */
HSR_API hsr_status hsr_trace_steps(const char *path, hsr_trace_step_summary **out, int *n);

/* Interval arithmetic of the trace's figures, shared with the tuner's
 * predicted step (tune/eval.c), so both measure a step the same way. */
typedef struct hsr_ival {
  double a, b;
} hsr_ival;
/* Sorts v[0..*n) by start and merges overlapping intervals in place; *n
 * becomes the number of disjoint intervals. */
HSR_API hsr_status hsr_ival_merge(hsr_ival *v, int *n);
/* Total length of disjoint intervals. */
HSR_API double hsr_ival_length(const hsr_ival *v, int n);
/* Length of the intersection of two merged interval lists. */
HSR_API double hsr_ival_overlap(const hsr_ival *a, int na, const hsr_ival *b, int nb);

#ifdef __cplusplus
}
#endif
#endif
