/* hsr train's end-of-run report: memory ledger beside the predicted one,
 * engine timing, wrap-granularity diagnostic; table and JSON. */
#ifndef HSR_TOOLS_TRAIN_REPORT_H
#define HSR_TOOLS_TRAIN_REPORT_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "hsr/runtime.h"
#include "hsr/tune_ledger.h"

typedef struct train_measured {
  int steps;                 /* steps measured (the first, which records the order, excluded when possible) */
  double step_ms;            /* mean wall time of those steps */
  double gathers_per_step;   /* mean all-gathers per step over all groups (counted) */
  int blocks;                /* repeating blocks of the model */
  const hsr_prog_call *prog; /* the lifecycle calls of one step */
  int nprog;
  size_t activation_bytes; /* per micro-batch, as the model notes them */
  int wrap_linear;         /* units per linear layer: report the cost against one per block */
  hsr_comm_counter comm[HSR_RT_GROUP_COUNT][HSR_OP_COUNT]; /* this rank's counters, summed over the measured steps */
} train_measured;

/* Adds a step's counters (hsr_rt_step_info.comm) to c. */
void train_comm_add(hsr_comm_counter c[HSR_RT_GROUP_COUNT][HSR_OP_COUNT], const hsr_rt_step_info *in);
/* parent[key] = {group: {op: {calls, bytes_sent, bytes_recv, fabric_sent,
 * fabric_recv, bytes_full}, ..., "total": {...}}}, every number divided by
 * `per` (1 for one step, the step count for means). */
void train_comm_json(cJSON *parent, const char *key, const hsr_comm_counter c[HSR_RT_GROUP_COUNT][HSR_OP_COUNT],
                     double per);

/* The ledgers the schedule predicts for a run of prog (one step's calls)
 * with `act` activation bytes per micro-batch: held (ph, activations
 * included) and in use (pu, may be NULL); reset first. *gathers (may be
 * NULL): the all-gathers of a steady step. */
hsr_status train_predict(hsr_rt *rt, const hsr_rt_config *cfg, const hsr_prog_call *prog, int nprog, size_t act,
                         hsr_ledger *ph, hsr_ledger *pu, int *gathers);

/* Every rank computes; rank 0 prints to out and writes json (may be NULL).
 * extra: more fields for the JSON summary (taken over and freed; may be
 * NULL). *warned: the wrap diagnostic fired. */
hsr_status train_report(hsr_rt *rt, const hsr_rt_config *cfg, const train_measured *m, cJSON *extra, FILE *json,
                        FILE *out, int *warned);

#endif
