/* hsr tune (internal: not installed, not exported): the memory ledger
 * predicted from sizes and policy alone (no run),
 * and the wrap-granularity diagnostic. Pure functions: no I/O, no
 * communication.
 *
 * The prediction evaluates the runtime's schedule (runtime/sched/schedule.h, internal: the
 * decisions the engine executes, which depend on program order only, never
 * on timing) over a program: the sequence of lifecycle calls of one training
 * step, and applies each action's buffers to a model of the engine's pool.
 * It fills two ledgers like the
 * engine's: memory held from the allocator (pool high-water; hsr_rt_ledger)
 * and buffers in use (rt_ledger_in_use). */
#ifndef HSR_TUNE_TUNE_LEDGER_INTERNAL_H
#define HSR_TUNE_TUNE_LEDGER_INTERNAL_H
#include "hsr/tune_ledger.h"
#include "runtime/runtime_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Predicts the ledgers of `steps` steps of `prog` (3 reaches the steady
 * state: step 1 records the order, later steps prefetch). layout: finalized
 * for S shards; is_root[u]: root units (cfg->root_reshard applies); cfg:
 * strategy, reshard, K, prefetch, max_live, dtypes, sync, micro-batches;
 * S and R resolved. held / in_use: ledgers to fill (reset first); either may
 * be NULL. */
hsr_status tune_ledger_predict(const rt_layout *layout, const int *is_root, const hsr_rt_config *cfg, int S, int R,
                               const hsr_prog_call *prog, int nprog, int steps, hsr_ledger *held, hsr_ledger *in_use);

/* The same, also counting the all-gathers (collectives, not the local copies
 * of one-rank groups) the schedule issues in the last of the `steps` steps:
 * what hsr_rt_step_info.calls counts for HSR_OP_ALLGATHER over every group.
 * gathers may be NULL. */
hsr_status tune_prog_predict(const rt_layout *layout, const int *is_root, const hsr_rt_config *cfg, int S, int R,
                                 const hsr_prog_call *prog, int nprog, int steps, hsr_ledger *held, hsr_ledger *in_use,
                                 int *gathers);
typedef struct wrap_input {
  double gathers_per_step;   /* measured all-gathers per step (all groups) */
  int repeating_blocks;      /* repeating blocks of the model (e.g. transformer layers) */
  int units;                 /* units registered */
  int root_units;            /* units outside the repeating blocks */
  int root_gathers_per_step; /* all-gathers per step of those units, implied by the policy */
  int gathers_per_unit;      /* per step implied by the policy: 2 reshard full/partial, 1 none, 0 unsharded */
  double mean_gather_bytes;  /* gathered (full) bytes per all-gather, measured */
  double mean_gather_us;     /* measured duration per all-gather */
  double min_unit_bytes;     /* below this a gathered unit counts as latency-bound (HSR_WRAP_MIN_BYTES) */
} wrap_input;
typedef struct wrap_report {
  int too_many_gathers; /* more than 1.5 units' gathers per repeating block */
  int latency_bound;    /* mean gathered unit below min_unit_bytes */
  double gathers_per_block, units_per_block;
  char message[1024]; /* the warning(s) with figures and what to change; "" when none */
} wrap_report;
hsr_status tune_wrap_check(const wrap_input *in, wrap_report *out);

#ifdef __cplusplus
}
#endif
#endif
