/* hsr tune: the memory ledger predicted from sizes and policy alone (no run),
 * and the wrap-granularity diagnostic. Pure functions: no I/O, no
 * communication.
 *
 * The prediction evaluates the runtime's schedule (runtime/sched/schedule.h, internal: the
 * decisions the engine executes, which depend on program order only, never
 * on timing) over a program: the sequence of lifecycle calls of one training
 * step, and applies each action's buffers to a model of the engine's pool.
 * It fills two ledgers like the
 * engine's: memory held from the allocator (pool high-water; hsr_rt_ledger)
 * and buffers in use (hsr_rt_ledger_in_use). */
#ifndef HSR_TUNE_LEDGER_H
#define HSR_TUNE_LEDGER_H

#include "hsr/ledger.h"
#include "hsr/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hsr_prog_op {
  HSR_PROG_FWD_BEGIN = 0,
  HSR_PROG_FWD_END,
  HSR_PROG_BWD_BEGIN,
  HSR_PROG_BWD_END,
  HSR_PROG_STEP,
  HSR_PROG_RECOMPUTE /* hsr_rt_recompute_begin .. _end inside the unit's backward window */
} hsr_prog_op;
typedef struct hsr_prog_call {
  hsr_prog_op op;
  int unit;
} hsr_prog_call;

/* The program of one step of a model whose first `outer` units wrap the rest
 * (like an embedding/head root unit: begun before the inner units, ended
 * after them), with `micro` forward/backward passes, then hsr_rt_step and
 * hsr_rt_zero_grad. Inner units run in order forward, in reverse backward;
 * with recompute other than none each inner unit recomputes right after its
 * backward_begin. *calls is malloc'd (caller frees). */
HSR_API hsr_status hsr_tune_prog_nested(int nunits, int outer, int micro, hsr_rt_recompute recompute,
                                        hsr_prog_call **calls, int *n);

/* Predicts the ledgers of `steps` steps of `prog` (3 reaches the steady
 * state: step 1 records the order, later steps prefetch). layout: finalized
 * for S shards; is_root[u]: root units (cfg->root_reshard applies); cfg:
 * strategy, reshard, K, prefetch, max_live, dtypes, sync, micro-batches;
 * S and R resolved. held / in_use: ledgers to fill (reset first); either may
 * be NULL. */
HSR_API hsr_status hsr_tune_ledger_predict(const hsr_rt_layout *layout, const int *is_root, const hsr_rt_config *cfg,
                                           int S, int R, const hsr_prog_call *prog, int nprog, int steps,
                                           hsr_ledger *held, hsr_ledger *in_use);

/* The same, also counting the all-gathers (collectives, not the local copies
 * of one-rank groups) the schedule issues in the last of the `steps` steps:
 * what hsr_rt_step_info.calls counts for HSR_OP_ALLGATHER over every group.
 * gathers may be NULL. */
HSR_API hsr_status hsr_tune_prog_predict(const hsr_rt_layout *layout, const int *is_root, const hsr_rt_config *cfg,
                                         int S, int R, const hsr_prog_call *prog, int nprog, int steps,
                                         hsr_ledger *held, hsr_ledger *in_use, int *gathers);

/* ---- wrap granularity ---- */
typedef struct hsr_wrap_input {
  double gathers_per_step;   /* measured all-gathers per step (all groups) */
  int repeating_blocks;      /* repeating blocks of the model (e.g. transformer layers) */
  int units;                 /* units registered */
  int root_units;            /* units outside the repeating blocks */
  int root_gathers_per_step; /* all-gathers per step of those units, implied by the policy */
  int gathers_per_unit;      /* per step implied by the policy: 2 reshard full/partial, 1 none, 0 unsharded */
  double mean_gather_bytes;  /* gathered (full) bytes per all-gather, measured */
  double mean_gather_us;     /* measured duration per all-gather */
  double min_unit_bytes;     /* below this a gathered unit counts as latency-bound (HSR_WRAP_MIN_BYTES) */
} hsr_wrap_input;

typedef struct hsr_wrap_report {
  int too_many_gathers; /* more than 1.5 units' gathers per repeating block */
  int latency_bound;    /* mean gathered unit below min_unit_bytes */
  double gathers_per_block, units_per_block;
  char message[1024]; /* the warning(s) with figures and what to change; "" when none */
} hsr_wrap_report;

HSR_API hsr_status hsr_tune_wrap_check(const hsr_wrap_input *in, hsr_wrap_report *out);

#ifdef __cplusplus
}
#endif
#endif
