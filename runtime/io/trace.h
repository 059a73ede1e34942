/* runtime/io (INTERNAL: the engine, tune/ and the tests; not installed):
 * building a lifecycle trace (runtime/io/trace_summary.h describes the file), and the
 * interval arithmetic of its figures. */
#ifndef HSR_RUNTIME_IO_TRACE_H
#define HSR_RUNTIME_IO_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "hsr/boot.h"
#include "hsr/common.h"
#include "runtime/io/trace_summary.h"

typedef enum span_kind { HSR_SPAN_STEP = 0, HSR_SPAN_COMPUTE, HSR_SPAN_COMM, HSR_SPAN_RUNTIME } span_kind;

typedef struct trace_log trace_log;

typedef struct trace_span {
  span_kind kind;
  const char *lane;      /* "compute", "step", "comm shard", ... */
  const char *name;      /* "forward", "all_gather", ... */
  const char *unit;      /* unit name or NULL */
  const char *group;     /* communicator name or NULL */
  uint64_t t0_ns, t1_ns; /* hsr_clock_ns() values */
  uint64_t bytes;
  int64_t step;
} trace_span;

hsr_status trace_create(int rank, trace_log **out);
void trace_free(trace_log *t);
/* Records a span (strings are copied). t1 < t0 is HSR_ERR_INVALID. */
hsr_status trace_add(trace_log *t, const trace_span *s);
size_t trace_count(const trace_log *t);
/* Collective over `boot`: rank 0 writes every rank's spans to `path`
 * (written to a temporary name, then renamed). boot NULL: this rank alone. */
hsr_status trace_write(trace_log *t, hsr_boot *boot, const char *path);

/* Interval arithmetic of the trace's figures, shared with the tuner's
 * predicted step (tune/eval.c), so both measure a step the same way. */
typedef struct ival {
  double a, b;
} ival;
/* Sorts v[0..*n) by start and merges overlapping intervals in place; *n
 * becomes the number of disjoint intervals. */
hsr_status ival_merge(ival *v, int *n);
/* Total length of disjoint intervals. */
double ival_length(const ival *v, int n);
/* Length of the intersection of two merged interval lists. */
double ival_overlap(const ival *a, int na, const ival *b, int nb);

#endif
